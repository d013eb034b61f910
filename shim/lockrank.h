/* SPDX-License-Identifier: MIT */
/*
 * Every lock the shim takes, in the one order a thread may take them:
 * outermost first.  A thread that holds a lock takes only locks of a
 * higher rank (or of the same rank, where the comment says how two of
 * them are ordered); the order is said here once, and nowhere else.
 *
 * The debug build (make debug, -DDIOSHIM_DEBUG) checks it: every take
 * names its rank (rank_lock, or seg_lock for a segment's), and a take
 * below a held rank, a release of a lock not held, or a function called
 * without the lock its comment requires (lock_held) prints both ranks and
 * aborts, so that the tests that run on that build find an
 * inversion the first time it happens rather than the day two threads
 * meet in it.  The release build compiles all of it to nothing.
 *
 * Not mutexes, so not here: the extent-lock stripes (rangelock.c: taken
 * after the in-flight count and before ext_lock, held across the kernel's
 * write), the barrier (writers hold no lock while they wait for it), and
 * the file's append lock (guest.c: an OFD lock, after ext_lock, which a
 * guest takes alone).
 *
 * Layer L0: calls nothing but libc.
 */
#ifndef DIOSHIM_LOCKRANK_H
#define DIOSHIM_LOCKRANK_H

#include <pthread.h>
#include <stdbool.h>

enum lock_rank {
	/* async.c: this process's rings; before any other lock (a ring
	 * settles writes, which take every lock below). */
	LOCK_ASYNC = 1,
	/* fdtable.c: every change of the fd table. */
	LOCK_FDT,
	/* segment.c: this process's attached files. */
	LOCK_FILES,
	/* The segment's attach_lock: joining and leaving a file. */
	LOCK_ATTACH,
	/* The segment's commit_lock: one group commit at a time. */
	LOCK_COMMIT,
	/* The segment's barrier_lock: the barrier's raiser; two files'
	 * barriers (a transfer) are taken in the order xfer.c sorts them. */
	LOCK_BARRIER,
	/* The segment's ext_lock: the reservation, the EOF words; the
	 * innermost segment lock. */
	LOCK_EXT,
	/* An open file description's position (fdtable.h ofd.pos_lock). */
	LOCK_POS,
	/* hint.c: this process's hints; nothing but the lifelines and
	 * memory under it. */
	LOCK_HINT,
	/* lifeline.c: the lifelines; a leaf. */
	LOCK_LIFELINE,
	/* mem.c: the shim's own memory; a leaf, taken under any lock. */
	LOCK_MEM,
	LOCK_RANKS
};

#ifdef DIOSHIM_DEBUG
/* Before a blocking take: no lock of a higher rank may be held (a
 * trylock cannot wait, so it skips this). */
void lock_want(enum lock_rank rank, const void *lock);
/* After a take: the lock is held by this thread. */
void lock_got(enum lock_rank rank, const void *lock);
/* Before a release. */
void lock_put(enum lock_rank rank, const void *lock);
/* What a function documented "called with X held" asserts first. */
void lock_held(enum lock_rank rank);
/* A lock made anew (pthread_mutex_init in a child of fork, which kept
 * its parent's thread's locks): forgotten if this thread held it. */
void lock_forget(const void *lock);
/* The rank of a segment lock, from its place in struct dioshim_seg. */
enum lock_rank lock_rank_of_seg(const void *lock);
#else
static inline void lock_want(enum lock_rank rank, const void *lock)
{
}
static inline void lock_got(enum lock_rank rank, const void *lock)
{
}
static inline void lock_put(enum lock_rank rank, const void *lock)
{
}
static inline void lock_held(enum lock_rank rank)
{
}
static inline void lock_forget(const void *lock)
{
}
static inline enum lock_rank lock_rank_of_seg(const void *lock)
{
	return LOCK_RANKS;
}
#endif

/* This process's mutexes, taken through their rank. */
static inline void rank_lock(pthread_mutex_t *m, enum lock_rank rank)
{
	lock_want(rank, m);
	pthread_mutex_lock(m);
	lock_got(rank, m);
}

static inline int rank_trylock(pthread_mutex_t *m, enum lock_rank rank)
{
	int rc = pthread_mutex_trylock(m);

	if (rc == 0)
		lock_got(rank, m);
	return rc;
}

static inline void rank_unlock(pthread_mutex_t *m, enum lock_rank rank)
{
	lock_put(rank, m);
	pthread_mutex_unlock(m);
}

/* A mutex made anew in a child of fork. */
static inline void rank_reinit(pthread_mutex_t *m)
{
	lock_forget(m);
	pthread_mutex_init(m, NULL);
}

#endif
