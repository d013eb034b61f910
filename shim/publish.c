// SPDX-License-Identifier: MIT
/*
 * Publishing eof (DESIGN.md 2.6): appends that ran in parallel move the
 * size in the order of their offsets, each waiting for those before it,
 * and a writer that died in between is passed over.
 *
 * Layer L2, above the in-flight counter (slot_writes), below the move of
 * appends (move.c publishes through it) and the reservation; may call
 * L1 (segment, owner) and L0 (log, sys).  Takes no lock: the words are
 * moved with CAS, the waiters sleep on futexes.
 */
#define _GNU_SOURCE
#include "publish.h"

#include "log.h"
#include "owner.h"
#include "sys.h"

#include <linux/futex.h>
#include <time.h>

/*
 * eof = end for an append that wrote [off, end), once every append before
 * it is done.  The kernel runs O_APPEND writes one at a time, so the size
 * a reader sees never covers an append still in flight; appends that run
 * in parallel must publish in the order of their offsets for that to stay
 * true.  An append done before its predecessors leaves its range in the
 * done ring; whichever append brings eof to that range's start carries
 * eof on to its end, so a run of early finishers is published at once,
 * with one wake-up, by the last of their predecessors.  Each still waits
 * until eof covers its own range before it returns: a write the caller
 * has seen succeed is in the size it sees next — however slow the write
 * before it.  Only an appender killed between claiming and publishing
 * holds the others back for good: every APPEND_WAIT_NS a waiter looks for
 * a dead process with writes still counted in flight, or, when that trace
 * is gone too (a new process took the dead one's slot), for the absence
 * of any live writer that is not itself waiting here; only then does it
 * publish past (the range claimed reads as zeros, the one trace of it).
 * A live writer that makes no progress at all for APPEND_GIVE_UP_NS is
 * the last resort: stopped (SIGSTOP), or the queued append of another
 * process that never reaps it (only the submitter reads its ring), which
 * the kernel alone would have finished regardless.  Past it the size may
 * cover that append's range before its completion is seen; without it,
 * every appender of the file would hang for as long.
 */

/* The poll handed in (PUBLISH_POLL): its section's bounds, the linker's. */
extern void (*const __start_dioshim_pubpoll[])(void)
	__attribute__((weak, visibility("hidden")));
extern void (*const __stop_dioshim_pubpoll[])(void)
	__attribute__((weak, visibility("hidden")));
static void (*const *const poll_first)(void) = __start_dioshim_pubpoll;
static void (*const *const poll_end)(void) = __stop_dioshim_pubpoll;
#define DONE_FILLING UINT64_MAX /* a done entry being filled in */

/* eof from at or past off on to end; false if eof is still below off. */
static bool advance_from(struct dioshim_seg *seg, uint64_t off, uint64_t end)
{
	uint64_t e = atomic_load_explicit(&seg->eof, memory_order_acquire);

	while (e >= off) {
		if (e >= end)
			return true;
		if (atomic_compare_exchange_weak_explicit(
			    &seg->eof, &e, end, memory_order_release,
			    memory_order_acquire))
			return true;
	}
	return false;
}

/* Carry eof over every done range it has reached; wake the waiters. */
static void drain_done(struct dioshim_seg *seg)
{
	bool moved = true;
	int i;

	while (moved) {
		uint64_t e = atomic_load_explicit(&seg->eof,
						  memory_order_acquire);

		moved = false;
		for (i = 0; i < DIOSHIM_DONE_RING; i++) {
			struct dioshim_done *d = &seg->done[i];
			uint64_t end = atomic_load_explicit(
				&d->end, memory_order_acquire);
			uint64_t off;

			if (!end || end == DONE_FILLING)
				continue;
			off = atomic_load_explicit(&d->off,
						   memory_order_relaxed);
			if (off > e)
				continue;
			/* Take it (its owner may be taking it back), carry
			 * eof over it and wake its owner alone. */
			if (!atomic_compare_exchange_strong(&d->end, &end, 0))
				continue;
			advance_from(seg, off, end);
			atomic_store(&d->wake, 1);
			sys_futex_wake(&d->wake, 1);
			moved = true;
		}
	}
	if (atomic_load(&seg->publish_waiters)) {
		atomic_fetch_add(&seg->publish_seq, 1);
		sys_futex_wake(&seg->publish_seq, INT32_MAX);
	}
}

/* Leave [off, end) in the done ring for whoever gets eof to off; NULL
 * when the ring is full. */
static struct dioshim_done *done_put(struct dioshim_seg *seg, uint64_t off,
				     uint64_t end)
{
	int i;

	for (i = 0; i < DIOSHIM_DONE_RING; i++) {
		struct dioshim_done *d = &seg->done[i];
		uint64_t free_end = 0;

		if (atomic_load_explicit(&d->end, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&d->end, &free_end,
						    DONE_FILLING))
			continue;
		/* Ours: fill it, then let takers see it (they read off
		 * after end, and skip an entry being filled). */
		atomic_store(&d->wake, 0);
		atomic_store_explicit(&d->off, off, memory_order_relaxed);
		atomic_store_explicit(&d->end, end, memory_order_release);
		return d;
	}
	return NULL;
}

/* Whether a process that died (or whose slot was freed as dead) still
 * has writes counted in flight: the only writers that never publish. */
static bool dead_writer_in_flight(struct dioshim_seg *seg)
{
	int i, n = seg_slots(seg);

	for (i = 0; i < n; i++) {
		struct dioshim_slot *s = &seg->slot[i];
		uint64_t o = atomic_load(&s->owner.pid_start);

		if (slot_writes(s) > 0 && !slot_owner_alive(seg, s, o))
			return true;
	}
	return false;
}

/* Whether a live process has a write in flight that is not an append
 * waiting here: one that may yet publish what holds the waiters back. */
static bool live_writer_working(struct dioshim_seg *seg)
{
	int i, n = seg_slots(seg);

	for (i = 0; i < n; i++) {
		struct dioshim_slot *s = &seg->slot[i];
		uint64_t o = atomic_load(&s->owner.pid_start);

		if (slot_writes(s) >
			    (int64_t)atomic_load(&s->publish_waiting) &&
		    slot_owner_alive(seg, s, o))
			return true;
	}
	return false;
}

/* Waited APPEND_WAIT_NS more: whether to stop waiting (the writer that
 * holds us back is gone, or APPEND_GIVE_UP_NS in all); the clock starts
 * over. */
static bool stalled(struct dioshim_seg *seg, uint64_t *t0, uint64_t *waited)
{
	uint64_t now = now_ns();

	*waited += now - *t0;
	*t0 = now;
	return dead_writer_in_flight(seg) || !live_writer_working(seg) ||
	       *waited > APPEND_GIVE_UP_NS;
}

bool eof_publish_at(struct dioshim_seg *seg, uint64_t off, uint64_t end)
{
	bool moved = advance_from(seg, off, end);

	drain_done(seg);
	return moved;
}

void eof_wake(struct dioshim_seg *seg)
{
	atomic_fetch_add(&seg->publish_seq, 1);
	sys_futex_wake(&seg->publish_seq, INT32_MAX);
}

bool publish_blocked(struct dioshim_seg *seg)
{
	return dead_writer_in_flight(seg) || !live_writer_working(seg);
}

int eof_publish_in_order(struct dioshim_seg *seg, int slot, uint64_t off,
			 uint64_t end)
{
	struct timespec slice = { 0, 10000000 };
	struct dioshim_done *mine = NULL;
	uint64_t before = atomic_load(&seg->eof), waited = 0, t0;
	_Atomic uint64_t *waiting =
		slot >= 0 ? &seg->slot[slot].publish_waiting : NULL;
	uint32_t seq;

	if (advance_from(seg, off, end)) {
		drain_done(seg);
		return end > before;
	}
	if (waiting)
		atomic_fetch_add(waiting, 1);
	/* Not next: leave the range for whoever gets eof to off. */
	mine = done_put(seg, off, end);
	t0 = now_ns();
	for (;;) {
		seq = atomic_load(&seg->publish_seq);
		if (atomic_load_explicit(&seg->eof, memory_order_acquire) >=
		    end)
			break;
		/* An append below failed and the appends move (move.h):
		 * this one publishes lower, through the move, its range
		 * taken back (eof has not reached it: a void holds it). */
		if (move_covers(seg, off)) {
			uint64_t want = end;

			if (!mine || atomic_compare_exchange_strong(
					     &mine->end, &want, 0)) {
				if (waiting)
					atomic_fetch_sub(waiting, 1);
				return PUBLISH_MOVE;
			}
		}
		/* eof reached off and nobody carried it on: our own range,
		 * if we can take it back, or if it never got in the ring. */
		if (atomic_load(&seg->eof) >= off) {
			uint64_t want = end;

			if (!mine || atomic_compare_exchange_strong(
					     &mine->end, &want, 0)) {
				advance_from(seg, off, end);
				drain_done(seg);
				break;
			}
			continue; /* a helper is carrying it */
		}
		if (now_ns() - t0 > APPEND_WAIT_NS &&
		    stalled(seg, &t0, &waited)) {
			uint64_t want = end;

			log_event(LOG_RECLAIM, LOG_SEG(seg),
				  "append at %llu: an earlier append's writer "
				  "died; publishing past it",
				  (unsigned long long)off);
			if (mine)
				atomic_compare_exchange_strong(&mine->end,
							       &want, 0);
			eof_advance(seg, end);
			drain_done(seg);
			break;
		}
		/* A write ahead of ours may be a queued one of this
		 * process, done but not yet reaped: its completion is read
		 * here, not waited for from the application. */
		if (poll_first < poll_end)
			(*poll_first)();
		if (mine) {
			/* Woken by whoever takes our range. */
			if (atomic_load(&seg->eof) < end &&
			    !atomic_load(&mine->wake))
				sys_futex_wait(&mine->wake, 0, &slice);
			continue;
		}
		atomic_fetch_add(&seg->publish_waiters, 1);
		if (atomic_load(&seg->eof) < end &&
		    atomic_load(&seg->publish_seq) == seq)
			sys_futex_wait(&seg->publish_seq, seq, &slice);
		atomic_fetch_sub(&seg->publish_waiters, 1);
	}
	if (waiting)
		atomic_fetch_sub(waiting, 1);
	return end > before;
}

bool eof_publish_async(struct dioshim_seg *seg, uint64_t off, uint64_t end)
{
	struct dioshim_done *d;
	uint64_t want = end;

	if (advance_from(seg, off, end)) {
		drain_done(seg);
		return true;
	}
	d = done_put(seg, off, end);
	if (!d)
		return false;
	/* eof may have reached off before the range was in the ring: then
	 * nobody would carry it, unless we take it back ourselves. */
	if (atomic_load(&seg->eof) >= off &&
	    atomic_compare_exchange_strong(&d->end, &want, 0)) {
		advance_from(seg, off, end);
		drain_done(seg);
	}
	return true;
}
