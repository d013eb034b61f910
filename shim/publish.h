/* SPDX-License-Identifier: MIT */
/*
 * Publishing eof (DESIGN.md 2.6): the order in which parallel appends
 * move the size.  Layer L2, below the move of appends (move.h) and the
 * reservation (reserve.h), which include this header.
 */
#ifndef DIOSHIM_PUBLISH_H
#define DIOSHIM_PUBLISH_H

#include "segment.h"

#include <stdbool.h>
#include <stdint.h>

/* The states of a move of appends (move.h), which publishing reads. */
enum {
	MOVE_IDLE = 0,
	MOVE_STARTING, /* the tail closed, the move being set up */
	MOVE_ACTIVE,
	MOVE_CLOSING, /* every append published: being closed */
};

/* A tail word without the closed bit. */
static inline uint64_t tail_of(uint64_t t)
{
	return t & ~DIOSHIM_TAIL_CLOSED;
}

/* Whether an append claimed at off (before the move) takes part in the
 * move under way. */
static inline bool move_covers(struct dioshim_seg *seg, uint64_t off)
{
	return atomic_load_explicit(&seg->move.state, memory_order_acquire) ==
		       MOVE_ACTIVE &&
	       off < atomic_load_explicit(&seg->move.end, memory_order_acquire);
}

/*
 * eof = max(eof, end): an unlocked check first, a CAS only when the write
 * extends — a write inside the file dirties no shared line.
 */
static inline bool eof_advance(struct dioshim_seg *seg, uint64_t end)
{
	uint64_t cur = atomic_load_explicit(&seg->eof, memory_order_relaxed);

	while (end > cur) {
		if (atomic_compare_exchange_weak_explicit(
			    &seg->eof, &cur, end, memory_order_release,
			    memory_order_relaxed))
			return true;
	}
	return false;
}

/*
 * eof = end for an append that wrote [off, end) (the range it claimed
 * from the tail), once every append before it is done: a size never
 * covers an append still in flight.  Returns when eof covers [off, end):
 * 1 if this call moved eof, 0 if not; PUBLISH_MOVE if the appends of
 * the file move meanwhile (move.h): its range was taken back, not
 * published.  slot: the caller's (-1: none), where it
 * is counted as waiting, not working, while it waits.
 */
#define PUBLISH_MOVE (-1) /* a move took it (move.h): publish there */
int eof_publish_in_order(struct dioshim_seg *seg, int slot, uint64_t off,
			 uint64_t end);

/* eof from off (reached) on to end, and over the done ranges it meets;
 * true if it moved. */
bool eof_publish_at(struct dioshim_seg *seg, uint64_t off, uint64_t end);

/* Wake whoever waits for eof to move (its waiting rules changed). */
void eof_wake(struct dioshim_seg *seg);

/* A waiter of eof stops waiting for the writers before it when, every
 * APPEND_WAIT_NS, it finds them gone (publish_blocked: a dead process
 * with writes counted in flight, or no live writer working on anything
 * but waiting), or after APPEND_GIVE_UP_NS in all. */
#define APPEND_WAIT_NS 2000000000ull
#define APPEND_GIVE_UP_NS 120000000000ull
bool publish_blocked(struct dioshim_seg *seg);

/* eof_publish_in_order for an asynchronous append, reaped by a thread that
 * may hold earlier ones not yet reaped: it never waits; whoever brings eof to off
 * carries it on to end.  False, having done nothing, when the done ring
 * is full: the caller keeps the range and tries again later. */
bool eof_publish_async(struct dioshim_seg *seg, uint64_t off, uint64_t end);

/*
 * Handed in by ring.c (PUBLISH_POLL): read the completions this process's
 * queued writes have posted, unless another of its threads is at it (it
 * never waits), so that an append behind one of them waits for the
 * kernel, never for the application to reap it.  Put in the section
 * dioshim_pubpoll, it is there before any code runs.
 */
#define PUBLISH_POLL(fn)                                                   \
	static void (*const publish_poll_##fn)(void)                       \
		__attribute__((used, section("dioshim_pubpoll"))) = (fn)

#endif
