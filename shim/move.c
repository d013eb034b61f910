// SPDX-License-Identifier: MIT
/*
 * Appends moved over ones that failed (move.h).
 *
 * The protocol, on the words of struct dioshim_move:
 *  - start: an append that failed with later claims closes the tail
 *    (CAS: DIOSHIM_TAIL_CLOSED) at T, the furthest claim; state goes
 *    STARTING, end = T, then ACTIVE unless queued writes are in flight
 *    (then the tail opens again at T and no move is made).  Failures
 *    that meet the tail closed join it.  Claims stop: every append below
 *    T was claimed before, and each of them, called, is still in its
 *    call — none is published past the failed one, since eof does not
 *    pass a range that was not published.
 *  - turns: an append claimed at off publishes at off less the voids
 *    below it (target), once eof reaches target.  Below target, every
 *    append has published or become a void, so every old write that
 *    could overlap [target, ...) is done: writing there again is safe.
 *    A failed append tries its write once more at its turn; one that
 *    fails there, or whose data cannot be written again, becomes a void
 *    (its caller gets the failure: its data is not in the file).
 *  - close: whoever brings eof to T less the voids closes the move
 *    (CAS ACTIVE -> CLOSING): the stale copies in [new end, T) are
 *    zeroed (KEEP_SIZE), the tail opens at the new end, claimers wake.
 *  - a writer that died in its turn (kill -9): a waiter that sees eof
 *    stall (publish_stalled, the rules of eof_publish_in_order) zeroes
 *    the range below its target and publishes past it, as a dead
 *    append's range is passed over outside a move (zeros); waiters
 *    lower down are left past by it (their appends fail).  The lowest
 *    waiter acts first: the wait grows with the distance to eof.
 *
 * Layer L2, above publish (eof_publish_at, eof_wake, publish_blocked)
 * and prefill; the record after a move is reserve.c's, reached through
 * segment_hooks (segment_moved).  (The order
 * inside L2 is shim/layers'.)
 *
 * Layer L2, above publish.c: calls the EOF publishing, prefill, owners
 * and the segment's base (L1); the reservation only through
 * segment_hooks (segment_moved).
 */
#define _GNU_SOURCE
#include "move.h"

#include "inflight.h"
#include "log.h"
#include "owner.h"
#include "prefill.h"
#include "sys.h"

#include <errno.h>
#include <linux/falloc.h>
#include <linux/futex.h>
#include <string.h>
#include <time.h>

/* How long a waiter lower by one byte waits less before it acts on a
 * stalled move: 4 KiB lower, 4 ms sooner. */
#define STALL_NS_PER_BYTE 1000ull

static void nap(void)
{
	static const struct timespec ts = { 0, 100000 };

	nanosleep(&ts, NULL);
}

static void move_changed(struct dioshim_seg *seg)
{
	atomic_fetch_add(&seg->move.seq, 1);
	sys_futex_wake(&seg->move.seq, INT32_MAX);
	eof_wake(seg);
}

/* The voids, as they stand.  A slot being written is waited for, 100 ms
 * at most: one whose writer died between taking it and filling it is
 * none (its range is then a dead writer's, passed over: pass_dead). */
static int voids_read(struct dioshim_seg *seg, uint64_t *off, uint64_t *end)
{
	uint32_t n = atomic_load(&seg->move.nvoids), i, k = 0;
	int spins;

	if (n > DIOSHIM_VOIDS)
		n = DIOSHIM_VOIDS;
	for (i = 0; i < n; i++) {
		for (spins = 0;
		     !(end[k] = atomic_load(&seg->move.voids[i].end)) &&
		     spins < 1000;
		     spins++)
			nap();
		if (!end[k])
			continue;
		off[k] = atomic_load(&seg->move.voids[i].off);
		k++;
	}
	return (int)k;
}

/* Where the append claimed at off publishes: off less the voids below
 * it; *inside: off lies in a void (its range was given up). */
static uint64_t target_of(struct dioshim_seg *seg, uint64_t off, bool *inside)
{
	uint64_t vo[DIOSHIM_VOIDS], ve[DIOSHIM_VOIDS], t = off;
	int i, n = voids_read(seg, vo, ve);

	*inside = false;
	for (i = 0; i < n; i++) {
		if (ve[i] <= off)
			t -= ve[i] - vo[i];
		else if (vo[i] <= off)
			*inside = true;
	}
	return t;
}

/* The move's new end: its tail less every void. */
static uint64_t new_end(struct dioshim_seg *seg)
{
	bool inside;

	return target_of(seg, atomic_load(&seg->move.end), &inside);
}

/* [off, end), in claimed offsets, holds nothing.  False if the list is
 * full. */
static bool void_add(struct dioshim_seg *seg, uint64_t off, uint64_t end)
{
	uint32_t i;

	if (off >= end)
		return true;
	i = atomic_fetch_add(&seg->move.nvoids, 1);
	if (i >= DIOSHIM_VOIDS)
		return false;
	atomic_store(&seg->move.voids[i].off, off);
	atomic_store(&seg->move.voids[i].end, end);
	move_changed(seg);
	return true;
}

/* Zero [from, to) (stale copies, or the range of a dead writer), the
 * size kept: KEEP_SIZE, and the blocks stay allocated where the
 * filesystem zeroes in place.  False if neither way works. */
static bool zero_range(struct shim_file *f, int fd, uint64_t from,
		       uint64_t to)
{
	if (to <= from)
		return true;
	if (!sys_fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
			   (off_t)from, (off_t)(to - from)))
		return true;
	if (sys_fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  (off_t)from, (off_t)(to - from))) {
		log_event(LOG_ERROR, LOG_FD(fd),
			  "cannot zero %llu bytes at %llu after moving appends "
			  "(%s)",
			  (unsigned long long)(to - from),
			  (unsigned long long)from, strerror(errno));
		return false;
	}
	prefill_forget(f, from, to - from);
	return true;
}

/* The closing steps, by the one that holds the move (CLOSING, its
 * owner): past the new end every append has written its copy lower,
 * what is left there is stale and zeroed; the tail opens at the new end
 * (or at eof, had a write at its own offset gone past it). */
static void finish_close(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t end = atomic_load(&seg->move.end), to = new_end(seg), eof;

	zero_range(f, fd, to, end);
	eof = atomic_load(&seg->eof);
	atomic_store(&seg->move.nvoids, 0);
	atomic_store(&seg->move.end, 0);
	atomic_store(&seg->tail, eof > to ? eof : to);
	atomic_store(&seg->move.owner.pid_start, 0);
	atomic_store(&seg->move.state, MOVE_IDLE);
	move_changed(seg);
	if (to < end)
		log_once_file(
			LOG_ERROR, LOG_FD(fd),
			"appends moved down by %llu bytes over failed ones",
			(unsigned long long)(end - to));
	/* The appends moved may have extended the kernel's size (exact
	 * ones): the reserved tail past eof needs its record. */
	segment_moved(f, fd);
}

/* eof reached the new end: close the move, if we are the one. */
static void close_if_done(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	uint32_t active = MOVE_ACTIVE;

	if (atomic_load(&seg->move.state) != MOVE_ACTIVE ||
	    atomic_load(&seg->eof) < new_end(seg) ||
	    !atomic_compare_exchange_strong(&seg->move.state, &active,
					    MOVE_CLOSING))
		return;
	owner_set_self(&seg->move.owner);
	finish_close(f, fd);
}

/*
 * A move left STARTING or CLOSING by a process that died there: taken
 * over (once: a CAS on its owner word).  A start is undone (the tail
 * opens where it closed); a close is finished.  True if it was.
 */
static bool take_over(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	uint32_t st = atomic_load(&seg->move.state);
	uint64_t o = atomic_load(&seg->move.owner.pid_start);
	const struct owner_id *me = owner_self();

	if ((st != MOVE_STARTING && st != MOVE_CLOSING) || !o ||
	    owner_alive_in(seg->hint_key, o, seg->move.owner.pidns) ||
	    !atomic_compare_exchange_strong(&seg->move.owner.pid_start, &o,
					    me->pid_start))
		return false;
	seg->move.owner.pidns = me->pidns;
	log_event(LOG_RECLAIM, LOG_FD(fd),
		  "a move of appends was left %s by a process that died: "
		  "taken over",
		  st == MOVE_STARTING ? "starting" : "closing");
	if (st == MOVE_CLOSING) {
		finish_close(f, fd);
		return true;
	}
	atomic_store(&seg->move.end, 0);
	atomic_store(&seg->tail, tail_of(atomic_load(&seg->tail)));
	atomic_store(&seg->move.owner.pid_start, 0);
	atomic_store(&seg->move.state, MOVE_IDLE);
	move_changed(seg);
	return true;
}

enum move_join move_join(struct shim_file *f, int fd, uint64_t end)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t t;
	uint32_t st, idle;

	for (;;) {
		t = atomic_load(&seg->tail);
		st = atomic_load(&seg->move.state);
		if ((t & DIOSHIM_TAIL_CLOSED) && st == MOVE_ACTIVE)
			return MOVE_JOINED;
		if (!(t & DIOSHIM_TAIL_CLOSED) && t == end)
			return MOVE_GIVE_BACK;
		if (!(t & DIOSHIM_TAIL_CLOSED) && st == MOVE_IDLE &&
		    async_in_flight(seg))
			return MOVE_NONE;
		if (st != MOVE_IDLE) {
			/* Being set up, or closing: wait for it (taking it
			 * over from a dead process). */
			if (!take_over(f, fd))
				nap();
			continue;
		}
		/* Ours to start: the state first, with its owner, then the
		 * tail closed where it stands. */
		idle = MOVE_IDLE;
		if (!atomic_compare_exchange_strong(&seg->move.state, &idle,
						    MOVE_STARTING))
			continue;
		owner_set_self(&seg->move.owner);
		if (atomic_compare_exchange_strong(&seg->tail, &t,
						   t | DIOSHIM_TAIL_CLOSED))
			break;
		atomic_store(&seg->move.owner.pid_start, 0);
		atomic_store(&seg->move.state, MOVE_IDLE);
	}
	atomic_store(&seg->move.nvoids, 0);
	atomic_store(&seg->move.end, t);
	/* A queued write counts itself in before it claims: one that did
	 * just before the tail closed is seen now. */
	if (async_in_flight(seg)) {
		atomic_store(&seg->move.end, 0);
		atomic_store(&seg->tail, t);
		atomic_store(&seg->move.owner.pid_start, 0);
		atomic_store(&seg->move.state, MOVE_IDLE);
		move_changed(seg);
		return MOVE_NONE;
	}
	atomic_store(&seg->move.owner.pid_start, 0);
	atomic_store(&seg->move.state, MOVE_ACTIVE);
	move_changed(seg);
	return MOVE_JOINED;
}

/*
 * A waiter below which eof does not move, its writers gone: zero
 * [eof, upto) and publish past it.  Waiters lower than upto then find
 * eof past their turn (their appends fail: nothing of theirs is in the
 * file).
 */
static void pass_dead(struct shim_file *f, int fd, uint64_t upto)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t e = atomic_load(&seg->eof);

	if (e >= upto)
		return;
	log_event(LOG_RECLAIM, LOG_FD(fd),
		  "appends moving at %llu: a writer below died; its range "
		  "%llu-%llu is passed over as zeros",
		  (unsigned long long)upto, (unsigned long long)e,
		  (unsigned long long)upto);
	zero_range(f, fd, e, upto);
	eof_publish_at(seg, e, upto);
}

/* Whether, waiting since start with eof gap bytes below its target, a
 * waiter may take the writers before it for gone: past APPEND_WAIT_NS
 * (and less for the lowest: the extra grows with the gap), every
 * APPEND_WAIT_NS, it finds them so (publish_blocked) — or past
 * APPEND_GIVE_UP_NS in all. */
static bool stall_over(struct dioshim_seg *seg, uint64_t start,
		       uint64_t *next, uint64_t gap)
{
	uint64_t now = now_ns(), extra = gap * STALL_NS_PER_BYTE;

	if (extra > APPEND_WAIT_NS)
		extra = APPEND_WAIT_NS;
	if (now < start + APPEND_WAIT_NS + extra || now < *next)
		return false;
	*next = now + APPEND_WAIT_NS;
	return publish_blocked(seg) || now - start > APPEND_GIVE_UP_NS;
}

/* Counted as waiting, not working (publish_blocked), in f's slot. */
static void waiting_add(struct shim_file *f, int64_t d)
{
	if (f->slot >= 0)
		atomic_fetch_add(&f->seg->slot[f->slot].publish_waiting,
				 (uint64_t)d);
}

/* Wait for the turn of the append claimed at off: eof at its target.
 * Returns the target; *lost: its range was passed over (a void it did
 * not make, or eof past its target). */
static uint64_t wait_turn(struct shim_file *f, int fd, uint64_t off,
			  bool *lost)
{
	struct dioshim_seg *seg = f->seg;
	struct timespec slice = { 0, 10000000 };
	uint64_t target, e, start = now_ns(), next = 0;
	uint32_t seq;
	bool inside;

	waiting_add(f, 1);
	for (;;) {
		seq = atomic_load(&seg->publish_seq);
		target = target_of(seg, off, &inside);
		e = atomic_load(&seg->eof);
		*lost = inside || e > target;
		if (*lost || e == target)
			break;
		if (stall_over(seg, start, &next, target - e)) {
			pass_dead(f, fd, target);
			continue;
		}
		atomic_fetch_add(&seg->publish_waiters, 1);
		if (atomic_load(&seg->publish_seq) == seq &&
		    atomic_load(&seg->eof) < target)
			sys_futex_wait(&seg->publish_seq, seq, &slice);
		atomic_fetch_sub(&seg->publish_waiters, 1);
	}
	waiting_add(f, -1);
	return target;
}

int64_t move_publish(struct shim_file *f, int fd, uint64_t off, uint64_t end,
		     int64_t res, const struct move_writer *w, uint64_t *at)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t len = end - off, done = res > 0 ? (uint64_t)res : 0, target;
	int64_t r, result = res;
	bool lost;

	target = wait_turn(f, fd, off, &lost);
	*at = target;
	if (lost) {
		/* Passed over as a dead writer's (it was too slow): its data
		 * is not in the file. */
		result = -EIO;
		done = 0;
		goto out;
	}
	if (!w) {
		/* (Its data is not ours to write again.) */
		if (target != off) {
			result = -EIO;
			done = 0;
		}
	} else if (done < len) {
		/* It failed (or came up short): tried once more, whole, at
		 * its turn; what stays written of it is data. */
		r = w->write_at(w->arg, target, len);
		if (r == (int64_t)len) {
			result = r;
			done = len;
		} else if (r > (int64_t)done) {
			result = r;
			done = (uint64_t)r;
		} else if (done && target != off &&
			   w->write_at(w->arg, target, done) != (int64_t)done) {
			result = r < 0 ? r : -EIO;
			done = 0;
		}
	} else if (target != off) {
		r = w->write_at(w->arg, target, len);
		if (r != (int64_t)len) {
			result = r < 0 ? r : -EIO;
			done = 0;
		}
	}
	/* What it does not hold is a void: the appends after it come down
	 * by its length.  With no room to say so, the range is zeros, and
	 * passed over. */
	if (done < len && !void_add(seg, off + done, end)) {
		log_once_file(LOG_ERROR, LOG_FD(fd),
			      "too many failed appends in one move: a range of "
			      "zeros is left");
		zero_range(f, fd, target + done, target + len);
		done = len;
	}
out:
	if (done)
		eof_publish_at(seg, target, target + done);
	close_if_done(f, fd);
	return result;
}

void move_wait(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	struct timespec slice = { 0, 10000000 };
	uint64_t start = now_ns(), next = 0, to;
	uint32_t seq;

	/* A claimer waits on nothing it could do: not working. */
	waiting_add(f, 1);
	for (;;) {
		seq = atomic_load(&seg->move.seq);
		if (!(atomic_load(&seg->tail) & DIOSHIM_TAIL_CLOSED))
			break;
		/* The last appends of the move gone (killed in their
		 * turn): what is left is passed over, and the move closed.
		 * After those still waiting had their chance. */
		if (take_over(f, fd))
			continue;
		to = new_end(seg);
		if (atomic_load(&seg->move.state) == MOVE_ACTIVE &&
		    stall_over(seg, start, &next, APPEND_WAIT_NS)) {
			pass_dead(f, fd, to);
			close_if_done(f, fd);
			continue;
		}
		sys_futex_wait(&seg->move.seq, seq, &slice);
	}
	waiting_add(f, -1);
}
