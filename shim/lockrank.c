// SPDX-License-Identifier: MIT
/*
 * The debug build's lock-order check (lockrank.h): each thread keeps the
 * locks it holds, in the order taken, and every take is checked against
 * them.  Compiled to nothing in the release build.
 *
 * Layer L0: libc only (write(2) and abort(3), in the debug build alone:
 * STYLE.md's "no abort" is for the library people run).
 */
#define _GNU_SOURCE
#include "lockrank.h"

#ifdef DIOSHIM_DEBUG
#include "dioshim/layout.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char *const names[LOCK_RANKS] = {
	[LOCK_ASYNC] = "async_lock",	 [LOCK_FDT] = "fdt_lock",
	[LOCK_FILES] = "files_lock",	 [LOCK_HINT] = "hint_lock",
	[LOCK_ATTACH] = "attach_lock",	 [LOCK_COMMIT] = "commit_lock",
	[LOCK_BARRIER] = "barrier_lock", [LOCK_EXT] = "ext_lock",
	[LOCK_POS] = "pos_lock",	 [LOCK_LIFELINE] = "lifeline_lock",
	[LOCK_MEM] = "mem_lock",
};

#define DEPTH 16

struct held {
	enum lock_rank rank;
	const void *lock;
};

static __thread struct held held[DEPTH];
static __thread unsigned depth;

static const char *name(enum lock_rank r)
{
	return r > 0 && r < LOCK_RANKS && names[r] ? names[r] : "?";
}

static __attribute__((noreturn)) void die(const char *what, enum lock_rank a,
					  enum lock_rank b)
{
	char line[256];
	int n;

	n = snprintf(line, sizeof(line),
		     "dioshim lockrank: %s: %s (rank %d)%s%s (rank %d), "
		     "thread %ld\n",
		     what, name(a), (int)a, b ? " while holding " : "",
		     b ? name(b) : "", (int)b, (long)syscall(SYS_gettid));
	if (n > 0)
		(void)!write(2, line, (size_t)n < sizeof(line) ? (size_t)n
							       : sizeof(line));
	abort();
}

void lock_want(enum lock_rank rank, const void *lock)
{
	unsigned i;

	for (i = 0; i < depth; i++) {
		if (held[i].lock == lock)
			die("taken twice", rank, held[i].rank);
		if (held[i].rank > rank)
			die("out of order", rank, held[i].rank);
	}
}

void lock_got(enum lock_rank rank, const void *lock)
{
	if (depth == DEPTH)
		die("too many locks held", rank, held[DEPTH - 1].rank);
	held[depth++] = (struct held){ rank, lock };
}

static int find(const void *lock)
{
	unsigned i;

	for (i = depth; i-- > 0;)
		if (held[i].lock == lock)
			return (int)i;
	return -1;
}

static void drop(unsigned i)
{
	memmove(&held[i], &held[i + 1], (depth - i - 1) * sizeof(held[0]));
	depth--;
}

void lock_put(enum lock_rank rank, const void *lock)
{
	int i = find(lock);

	if (i < 0)
		die("released, not held", rank, 0);
	if (held[i].rank != rank)
		die("released under another rank", rank, held[i].rank);
	drop((unsigned)i);
}

void lock_held(enum lock_rank rank)
{
	unsigned i;

	for (i = 0; i < depth; i++)
		if (held[i].rank == rank)
			return;
	die("called without", rank, 0);
}

void lock_forget(const void *lock)
{
	int i = find(lock);

	if (i >= 0)
		drop((unsigned)i);
}

enum lock_rank lock_rank_of_seg(const void *lock)
{
	/* A segment is mapped at a page boundary, and its locks sit at
	 * fixed places in its first page. */
	_Static_assert(offsetof(struct dioshim_seg, commit_lock) < 4096,
		       "the segment's locks sit in its first page");
	switch ((uintptr_t)lock % 4096) {
	case offsetof(struct dioshim_seg, attach_lock):
		return LOCK_ATTACH;
	case offsetof(struct dioshim_seg, commit_lock):
		return LOCK_COMMIT;
	case offsetof(struct dioshim_seg, barrier_lock):
		return LOCK_BARRIER;
	case offsetof(struct dioshim_seg, ext_lock):
		return LOCK_EXT;
	}
	die("not a segment lock", LOCK_RANKS, 0);
}
#endif
