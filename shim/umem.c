// SPDX-License-Identifier: MIT
/*
 * Readable pages, remembered.  Before io_submit the shim reads the iocb
 * array and the iocbs; a pointer the kernel would refuse (EFAULT) must not
 * make the shim fault.  Asking the kernel costs a system call per read,
 * more than the whole submit of a 4 KiB overwrite is allowed to cost, so
 * each thread keeps the pages it has seen readable (or writable),
 * tagged with a process-wide generation; the wrappers of every call that
 * can take pages away (munmap, mremap, mprotect, pkey_mprotect, mmap over
 * a range, madvise guards, shmdt, sbrk down, a truncate or an O_TRUNC
 * open under a mapping, io_destroy and io_uring_queue_exit, which unmap
 * rings, fork, which drops MADV_DONTFORK pages) move the generation,
 * succeeded or not, and every thread forgets its pages at its next read.
 * A call that names its range (munmap, mprotect, an anonymous MAP_FIXED
 * mmap, a guard) also logs the range with its generation: a thread then
 * forgets only the pages in the ranges logged since it last looked.  One
 * whose reach the kernel takes past the range named (PROT_GROWSDOWN, a
 * huge page's rounding, poison) forgets all.  A program that makes a
 * guard page for every coroutine stack (QEMU) would otherwise have every
 * thread ask again about every iocb page, a system call each, a few
 * times a second.
 *
 * What is not seen: pages glibc gives back on its own (free() of a large
 * block, an arena trimmed, a thread's stack, dlclose, brk), raw system
 * calls, an io_uring madvise, shm_open(O_TRUNC), and another process
 * truncating a file mapped here.  Only a pointer into memory freed that
 * way — a use after free — reads differently: the kernel alone answers
 * EFAULT, the shim faults.
 *
 * A page is asked about with a copy the kernel makes from it, through a
 * call every seccomp profile allows and that changes nothing
 * (rt_sigprocmask with an invalid how): what the kernel reads, it reads
 * the way io_submit's own copy would, a write-only page included.  An
 * iocb must be writable too (the kernel stores its key in it, and the
 * shim rewrites appends): madvise(MADV_POPULATE_WRITE) asks.
 *
 * Layer L0: calls only the kernel (sys.h).
 */
#define _GNU_SOURCE
#include "sys.h"
#include "umem.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* A probe that says nothing (umem_readable, page_writable) is made
 * again so many times. */
#define UMEM_TRIES 4
#define UMEM_POPULATE_TRIES 64

#define UMEM_PAGE 4096u
#define UMEM_SLOTS 512u
#define UMEM_WAYS 8u /* a set's slots: pages a stride apart (coroutine
		      * stacks) must not keep evicting each other */

static _Atomic unsigned long umem_gen = 1;

/* This thread's known pages: (page number + 1) << 1, | 1 when writable
 * too; 0 is empty.  Valid for generation gen.  A page lives in one set
 * of UMEM_WAYS slots; a full set gives up its slots in turn (evict). */
static __thread struct {
	unsigned long gen;
	unsigned evict;
	/* 4 KiB: static TLS comes out of every thread's stack, one a
	 * program may have sized tightly; QEMU's iocbs take ~160 pages. */
	uintptr_t page[UMEM_SLOTS];
} known __attribute__((tls_model("initial-exec")));

/*
 * The ranges lost, by generation: generation g's pages [lo, hi] are in
 * entry g % UMEM_LOG when its gen says g.  One writer at a time (a call
 * that finds the log busy, a signal handler's say, moves the generation
 * without an entry: readers then forget everything); readers check gen
 * before and after (a seqlock), and an entry rewritten meanwhile, or
 * never written, makes them forget everything too.
 */
#define UMEM_LOG 64u

static struct {
	_Atomic unsigned long gen;
	_Atomic uintptr_t lo, hi;
} lost_log[UMEM_LOG];
static atomic_flag lost_busy = ATOMIC_FLAG_INIT;

void umem_changed(void)
{
	atomic_fetch_add_explicit(&umem_gen, 1, memory_order_release);
}

void umem_atfork_child(void)
{
	/* The only thread: a log a thread of the parent was writing is no
	 * one's now (left busy, every range would forget all). */
	atomic_flag_clear_explicit(&lost_busy, memory_order_relaxed);
	umem_changed();
}

void umem_lost(const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, lo = a / UMEM_PAGE, hi;
	unsigned long g;

	if (atomic_flag_test_and_set_explicit(&lost_busy,
					      memory_order_acquire)) {
		umem_changed();
		return;
	}
	hi = len && a + len - 1 >= a ? (a + len - 1) / UMEM_PAGE
				     : len ? UINTPTR_MAX : lo;
	g = atomic_fetch_add_explicit(&umem_gen, 1, memory_order_acq_rel) + 1;
	atomic_store_explicit(&lost_log[g % UMEM_LOG].gen, 0,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&lost_log[g % UMEM_LOG].lo, lo,
			      memory_order_relaxed);
	atomic_store_explicit(&lost_log[g % UMEM_LOG].hi, hi,
			      memory_order_relaxed);
	atomic_store_explicit(&lost_log[g % UMEM_LOG].gen, g,
			      memory_order_release);
	atomic_flag_clear_explicit(&lost_busy, memory_order_release);
}

/* Generation g's range, if its entry still holds it. */
static bool lost_range(unsigned long g, uintptr_t *lo, uintptr_t *hi)
{
	unsigned long seen;

	seen = atomic_load_explicit(&lost_log[g % UMEM_LOG].gen,
				    memory_order_acquire);
	*lo = atomic_load_explicit(&lost_log[g % UMEM_LOG].lo,
				   memory_order_relaxed);
	*hi = atomic_load_explicit(&lost_log[g % UMEM_LOG].hi,
				   memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	return seen == g && atomic_load_explicit(&lost_log[g % UMEM_LOG].gen,
						 memory_order_relaxed) == g;
}

/* The set of slots pg lives in. */
static uintptr_t *set_of(uintptr_t pg)
{
	uint64_t h = pg;

	/* splitmix64's finaliser: every bit of the page number moves the
	 * set (a multiplier alone keeps some strides together). */
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
	h ^= h >> 31;
	return &known.page[(h % (UMEM_SLOTS / UMEM_WAYS)) * UMEM_WAYS];
}

/* The slot that holds pg, in either state, or NULL. */
static uintptr_t *known_at(uintptr_t *set, uintptr_t pg)
{
	size_t w;

	for (w = 0; w < UMEM_WAYS; w++)
		if (set[w] >> 1 == pg + 1)
			return &set[w];
	return NULL;
}

/* Forget pg if known: a few pages lost (a guard page) are looked up, not
 * searched for among all the slots. */
static void forget_page(uintptr_t pg)
{
	uintptr_t *s = known_at(set_of(pg), pg);

	if (s)
		*s = 0;
}

/* Bring this thread's pages from generation known.gen to gen: forget
 * those in the ranges lost since, or all of them. */
static void forget(unsigned long gen)
{
	uintptr_t lo[UMEM_LOG / 4], hi[UMEM_LOG / 4], pages = 0, pg;
	unsigned long g, n = gen - known.gen;
	size_t i, k;

	if (n > UMEM_LOG / 4)
		goto all;
	for (k = 0, g = known.gen + 1; k < n; k++, g++) {
		if (!lost_range(g, &lo[k], &hi[k]))
			goto all;
		pages += hi[k] - lo[k] < UMEM_WAYS * 4 ? hi[k] - lo[k] + 1
						       : UMEM_SLOTS;
	}
	if (pages <= UMEM_WAYS * 4) {
		for (k = 0; k < n; k++)
			for (pg = lo[k];; pg++) {
				forget_page(pg);
				if (pg == hi[k])
					break;
			}
		known.gen = gen;
		return;
	}
	for (i = 0; i < UMEM_SLOTS; i++) {
		pg = (known.page[i] >> 1) - 1;
		if (!known.page[i])
			continue;
		for (k = 0; k < n; k++)
			if (pg >= lo[k] && pg <= hi[k]) {
				known.page[i] = 0;
				break;
			}
	}
	known.gen = gen;
	return;
all:
	memset(known.page, 0, sizeof(known.page));
	known.gen = gen;
}

bool umem_advice_keeps(int advice)
{
	switch (advice) {
	case MADV_NORMAL:
	case MADV_RANDOM:
	case MADV_SEQUENTIAL:
	case MADV_WILLNEED:
	case MADV_DONTNEED:	/* zero-fill or the file again: readable */
	case MADV_FREE:
	case MADV_DONTFORK:	/* a child forgets its pages (atfork) */
	case MADV_DOFORK:
	case MADV_MERGEABLE:
	case MADV_UNMERGEABLE:
	case MADV_HUGEPAGE:
	case MADV_NOHUGEPAGE:
	case MADV_DONTDUMP:
	case MADV_DODUMP:
	case MADV_WIPEONFORK:
	case MADV_KEEPONFORK:
	case MADV_COLD:
	case MADV_PAGEOUT:
	case 22: /* MADV_POPULATE_READ */
	case MADV_POPULATE_WRITE:
	case 24: /* MADV_DONTNEED_LOCKED */
	case 25: /* MADV_COLLAPSE */
		return true;
	default:	/* guards (MADV_GUARD_INSTALL), poison, unknown;
			 * MADV_REMOVE (on hugetlbfs the page's reservation
			 * goes with it: the next fault may find none) */
		return false;
	}
}

/* The slot of pg's set that holds it, or the one to put it in. */
static uintptr_t *slot(uintptr_t pg)
{
	uintptr_t *set = set_of(pg), *s = known_at(set, pg);
	size_t w;

	if (s)
		return s;
	for (w = 0; w < UMEM_WAYS; w++)
		if (!set[w])
			return &set[w];
	return &set[known.evict++ % UMEM_WAYS];
}

/* Whether the kernel can read the page at pg (an address >> 12): a real
 * copy from it, as the kernel's own would be (rt_sigprocmask copies the
 * new mask in before it looks at how, which is invalid: nothing
 * changes). */
static bool page_readable(uintptr_t pg)
{
	int saved = errno, tries;
	long rc = 0;
	bool ok;

	/* EINVAL: read, and refused for its how; EFAULT: not readable, an
	 * answer that stays when asked again.  Anything else (it cannot fail
	 * otherwise, but for a fault a tracer injects, or a seccomp filter)
	 * says nothing: asked again, then asked another way
	 * (MADV_POPULATE_READ: 0 readable, EFAULT or ENOMEM not).  A page
	 * taken for unreadable that is not would have the shim cut a
	 * submission the kernel takes whole, its writes untracked. */
	for (tries = 0; tries < UMEM_TRIES; tries++) {
		rc = sys_rt_sigprocmask(0x7fffffff, (void *)(pg * UMEM_PAGE),
					NULL, 8);
		if (rc && errno == EINVAL)
			break;
	}
	if (tries < UMEM_TRIES || errno == EFAULT) {
		ok = tries < UMEM_TRIES;
	} else {
		rc = sys_madvise((void *)(pg * UMEM_PAGE), UMEM_PAGE,
			     MADV_POPULATE_READ);
		ok = !rc || (errno != EFAULT && errno != ENOMEM);
	}
	errno = saved;
	return ok;
}

/*
 * Whether the mapping holding addr may be written, from /proc/self/maps
 * (its rights: "rw-p"): 1 or 0 (0 too when nothing maps it), -1 when
 * the file cannot be read.  Raw calls and a buffer on the stack: safe
 * wherever the shim reads the program's memory.
 */
/* 1 + whether it may be written, when a maps line holds *arg. */
static int maps_line_rights(char *line, void *arg)
{
	uintptr_t addr = *(const uintptr_t *)arg;
	unsigned long lo, hi;
	char perms[5];

	if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3 || addr < lo ||
	    addr >= hi)
		return 0;
	return 1 + (perms[1] == 'w');
}

static int maps_writable(uintptr_t addr)
{
	int r = sys_each_line("/proc/self/maps", maps_line_rights, &addr);

	return r <= 0 ? r : r - 1;
}

/* Whether it can write there too: the page faulted in for writing, as
 * the kernel's own store would.  A kernel without MADV_POPULATE_WRITE
 * (before 5.14) cannot say: a readable page is taken as writable. */
static int populate_write = -1; /* unknown, 0 unsupported, 1 works */

static bool page_writable(uintptr_t pg)
{
	int saved = errno, rc, tries;

	if (populate_write < 0)
		populate_write = !sys_madvise((void *)((uintptr_t)&known &
						   ~(uintptr_t)(UMEM_PAGE - 1)),
					  1, MADV_POPULATE_WRITE) ||
				 errno != EINVAL;
	if (!populate_write) {
		errno = saved;
		return page_readable(pg);
	}
	/* EFAULT: not writable.  A fault not served for the moment (EINTR,
	 * EAGAIN) is served again, so many times at most, and any failure
	 * is asked about once more (a tracer's injected fault passes).  One
	 * that stays says nothing sure — EINVAL is a read-only mapping or
	 * one it will not populate, ENOMEM no mapping or no memory — and
	 * the mapping's own rights decide (/proc/self/maps): a page the
	 * kernel would write, taken for one it refuses, would have the shim
	 * cut a submission the kernel takes whole, its writes untracked. */
	tries = 0;
	for (;;) {
		rc = sys_madvise((void *)(pg * UMEM_PAGE), 1,
				 MADV_POPULATE_WRITE);
		if (!rc || ++tries >= UMEM_POPULATE_TRIES ||
		    (errno != EINTR && errno != EAGAIN && tries >= UMEM_TRIES))
			break;
	}
	if (rc && errno != EFAULT) {
		int w = maps_writable(pg * UMEM_PAGE);

		if (w >= 0)
			rc = !w;
	}
	errno = saved;
	return !rc;
}

/* How many leading bytes of src[0, n) can be read (and written, if
 * write): the long way, asking the kernel about pages not known. */
static __attribute__((noinline)) size_t usable_prefix_slow(const void *src,
							  size_t n,
							  bool write)
{
	uintptr_t a = (uintptr_t)src, first, last, pg, want;
	unsigned long gen;

	if (!n)
		return 0;
	if (a + n < a)
		n = UINTPTR_MAX - a + 1;
	first = a / UMEM_PAGE;
	last = (a + n - 1) / UMEM_PAGE;
	gen = atomic_load_explicit(&umem_gen, memory_order_acquire);
	if (known.gen != gen)
		forget(gen);
	for (pg = first; pg <= last; pg++) {
		uintptr_t *s = slot(pg);

		want = (pg + 1) << 1 | write;
		if (*s == want || (!write && *s == (want | 1)))
			continue;
		if (!(write ? page_writable(pg) : page_readable(pg)))
			break;
		/* Kept for this generation only: a signal handler that ran
		 * meanwhile and found the generation moved emptied the table
		 * (or will); a store after it is taken back. */
		*s = want;
		atomic_signal_fence(memory_order_seq_cst);
		if (known.gen != gen)
			*s = 0;
	}
	return pg > last ? n : pg == first ? 0 : (size_t)(pg * UMEM_PAGE - a);
}

/* The same; first the common case, inline and without a frame: one
 * page, known in this generation. */
static inline size_t usable_prefix(const void *src, size_t n, bool write)
{
	uintptr_t a = (uintptr_t)src, pg = a / UMEM_PAGE, want, *set;
	size_t w;

	if (n && a + n - 1 >= a && (a + n - 1) / UMEM_PAGE == pg &&
	    known.gen == atomic_load_explicit(&umem_gen,
					      memory_order_acquire)) {
		set = set_of(pg);
		want = (pg + 1) << 1 | write;
		for (w = 0; w < UMEM_WAYS; w++)
			if (set[w] == want || (!write && set[w] == (want | 1)))
				return n;
	}
	return usable_prefix_slow(src, n, write);
}

size_t umem_read(void *dst, const void *src, size_t n)
{
	size_t done = usable_prefix(src, n, false);

	memcpy(dst, src, done);
	return done;
}

bool umem_readable(const void *src, size_t n)
{
	return usable_prefix(src, n, false) == n;
}

bool umem_writable(const void *p, size_t n)
{
	return usable_prefix(p, n, true) == n;
}
