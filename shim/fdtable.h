/* SPDX-License-Identifier: MIT */
/*
 * The per-process fd table: fd -> open file description (ofd) -> attached
 * segment.  Filled at open/dup/fcntl and lazily on the first intercepted
 * call for an fd the shim has not seen (inherited through exec, opened
 * before the library loaded, opened by stdio); cleared at close.
 *
 * Reading an entry is two dependent loads and never takes a lock; every
 * change is made under fdt_lock.  Lock order: fdt_lock -> files_lock
 * (segment.c) -> the segment's locks.
 */
#ifndef DIOSHIM_FDTABLE_H
#define DIOSHIM_FDTABLE_H

#include "segment.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

enum ofd_state {
	OFD_UNCHECKED, /* flags known; not yet identified (nothing was live) */
	OFD_WATCH, /* a regular file dioshim could serve; no segment yet */
	OFD_ATTACHED, /* file points at its segment */
	OFD_NEVER, /* adopted unchecked, then found not servable */
};

/*
 * One open file description as this process sees it: fds made by dup
 * share one, as they share the kernel's.  pos_lock serialises the calls
 * that use the file position (read, write, readv, writev) as the kernel's
 * f_pos_lock does, because the shim turns them into a position read, a
 * positional call and a position update.
 */
struct ofd {
	/* file, flags and pin first: what every intercepted call reads
	 * (fdtable_quiet) is one cache line, which no write writes */
	struct shim_file *_Atomic file; /* set once, when attached */
	_Atomic uint32_t flags; /* F_GETFL flags, as last set through us */
	uint32_t state; /* enum ofd_state; under fdt_lock */
	uint64_t checked_gen; /* hint generation when last identified */
	/* its announcement as a guest of a file with no segment (a lazy
	 * writer, or none could be made), kept while it is not attached;
	 * under fdt_lock */
	struct guest_pin pin;
	unsigned refs; /* fds pointing here; under fdt_lock */
	/* Written by every append: away from the line every call reads. */
	pthread_mutex_t pos_lock;
	/* write() appends through this description that are under way, and
	 * the furthest end they reached: the position is set once the last
	 * of them is done (under pos_lock) */
	_Atomic uint32_t appending;
	_Atomic uint64_t append_end;
	/* While pinned: its writes in the kernel (counted around each raw
	 * write, ftruncate and fallocate), and whether one thread is
	 * attaching it (the others wait; the count drains first).  nomake:
	 * a segment could not be made for it, none is tried again. */
	_Atomic uint64_t raw; /* incarnation << 32 | count (a write that
			       * outlives its fd's close counts nothing in
			       * the next description made here) */
	_Atomic uint32_t engaging;
	_Atomic bool nomake;
	/* inherited through fork: the parent may write it too */
	_Atomic bool shared;
	struct ofd *next; /* every live ofd, or the free list */
};

/* An fd the shim never serves (not a regular file of a configured
 * filesystem, an O_PATH fd). */
#define OFD_PASS ((struct ofd *)1)

/*
 * The ofd to apply the shim's rules with, or NULL to pass the call
 * through.  Adopts an fd it has not seen; re-checks a watched one when a
 * segment has appeared since it last looked.
 */
struct ofd *fdtable_resolve(int fd);

#define FDT_SHIFT 10
#define FDT_CHUNK (1u << FDT_SHIFT)
#define FDT_CHUNKS 1024u
#define FDT_MAX (FDT_CHUNK * FDT_CHUNKS)

typedef struct ofd *_Atomic fd_entry;
extern fd_entry *_Atomic fdt[FDT_CHUNKS];
/* The first chunk (fdt[0], always there) and the objects the markers of
 * fdtable.c point at: on the page every call reads (hot.c). */
extern fd_entry fdt_chunk0[FDT_CHUNK];
#define FDT_MARKS 4
extern struct ofd fdt_mark[FDT_MARKS];

/* The entry as it is, without adopting or re-checking (NULL: unknown):
 * one load below FDT_CHUNK, two dependent loads above. */
static inline struct ofd *fdtable_peek(int fd)
{
	fd_entry *c = fdt_chunk0;

	if ((unsigned)fd >= FDT_CHUNK) {
		if ((unsigned)fd >= FDT_MAX)
			return OFD_PASS;
		c = atomic_load_explicit(&fdt[(unsigned)fd >> FDT_SHIFT],
					 memory_order_acquire);
		if (!c)
			return NULL;
	}
	return atomic_load_explicit(&c[(unsigned)fd & (FDT_CHUNK - 1)],
				    memory_order_acquire);
}

/*
 * Whether fd is surely not served, decided from the entry alone: not a
 * file dioshim serves, or one with no segment while no segment exists.
 * False means "look closer" (fdtable_resolve).
 */
static inline bool fdtable_surely_pass(int fd)
{
	struct ofd *o = fdtable_peek(fd);

	if (o == OFD_PASS)
		return true;
	return o && !atomic_load_explicit(&o->file, memory_order_relaxed) &&
	       hint_surely_dead();
}

/*
 * fdtable_surely_pass, and not a guest writer either: every call on fd,
 * whatever it is, goes to the kernel as the program made it.  The writes
 * and reads of programs that never use O_DIRECT stop here, in a few
 * loads: they pay no more (DESIGN.md 7, "a few nanoseconds").
 */
static inline bool fdtable_quiet(int fd)
{
	struct ofd *o = fdtable_peek(fd);

	if (o == OFD_PASS)
		return true;
	return o && !atomic_load_explicit(&o->file, memory_order_relaxed) &&
	       !__atomic_load_n(&o->pin.held, __ATOMIC_RELAXED) &&
	       hint_surely_dead();
}

/*
 * A guest writer's call that can move the size (fd pinned, not attached):
 * fdtable_raw_enter counts it and says true — the caller makes the real
 * call, then fdtable_raw_exit.  False when a second one was in flight
 * (threads sharing the description): the file was attached instead (a
 * segment made, its writes served from now on) and the caller goes
 * through the shim again.  Not for signal handlers inside the shim.
 */
struct ofd *fdtable_guest_writer(int fd);
/* fd is closed and its entry held nothing (none, OFD_PASS, a quiet
 * description): cleared without the lock, true.  False: fdtable_close. */
bool fdtable_forget_light(int fd);
/* The close (or close_range) of fd (or [lo, hi]) that fdtable_close (or
 * fdtable_close_range) began was made: entries still marked as closing
 * are cleared. */
void fdtable_closed(int fd);
void fdtable_closed_range(unsigned lo, unsigned hi);
bool fdtable_raw_enter(int fd, struct ofd *o, uint32_t *incarnation);
void fdtable_raw_exit(struct ofd *o, uint32_t incarnation);
/* Whether any description of this process is a guest writer (a queued
 * write to one engages it, even while no segment exists anywhere). */
bool fdtable_guests(void);
/* fd, a guest writer, is about to get a queued write (several may be in
 * flight): attach it, making its segment. */
void fdtable_engage_fd(int fd);

/* fd was just opened with flags; record: its file carries an EOF record
 * (recover.h record_present), which its first user recovers. */
void fdtable_opened(int fd, int flags, bool record);
/* fd is about to be closed (still open: the last detach trims through it). */
void fdtable_close(int fd);
/* The same, from a signal handler that interrupted this thread inside the
 * shim: takes no lock (the entry goes at once; the rest is done by the
 * next call that takes the table's lock). */
void fdtable_close_reentrant(int fd);
/* Every fd in [lo, hi] is about to be closed. */
void fdtable_close_range(unsigned lo, unsigned hi);
/* newfd is now a duplicate of oldfd. */
void fdtable_dup(int oldfd, int newfd);
/* F_SETFL succeeded on fd. */
void fdtable_setfl(int fd);
/* The process is ending: detach everything (trimming where last). */
void fdtable_release_all(void);

/* exec: leave every attached file as an ending process would; and, if
 * the exec failed, attach again. */
void fdtable_exec_prepare(void);
void fdtable_exec_failed(void);

void fdtable_atfork_prepare(void);
void fdtable_atfork_parent(void);
void fdtable_atfork_child(void);

#endif
