// SPDX-License-Identifier: MIT
/*
 * In-flight counter and barrier.
 *
 * A writer increments its shard, then reads the barrier; the raiser sets
 * the barrier, then reads the shards.  Both sides use seq_cst, so at least
 * one of them sees the other: either the writer backs off, or the raiser
 * waits for it.  A writer that sees the barrier undoes its count before it
 * waits, and waits holding nothing, so the raiser can always drain.
 *
 * A process killed mid-write leaves its count behind; the raiser skips the
 * slots of processes that are gone (owner pid and start time), which is
 * also why counts live in per-process slots and not in anonymous shards.
 *
 * Lock order: barrier_lock, then (after the drain) ext_lock.
 */
#define _GNU_SOURCE
#include "inflight.h"

#include "log.h"

#include <sched.h>
#include <time.h>

static __thread int tls_shard __attribute__((tls_model("initial-exec"))) = -1;
static unsigned shard_next;

struct dioshim_shard *inflight_shard(struct shim_file *f)
{
	if (__builtin_expect(tls_shard < 0, 0))
		tls_shard = (int)(__atomic_fetch_add(&shard_next, 1,
						     __ATOMIC_RELAXED) %
				  DIOSHIM_SLOT_SHARDS);
	return &f->seg->slot[f->slot].shard[tls_shard];
}

/* Wait for the barrier to go down: its raiser holds barrier_lock for as
 * long as it is up. */
static bool barrier_wait(struct dioshim_seg *seg)
{
	bool recovered;

	if (!seg_lock(&seg->barrier_lock, &recovered))
		return false;
	if (recovered)
		/* The raiser died with the barrier up. */
		atomic_store(&seg->barrier, 0);
	seg_unlock(&seg->barrier_lock);
	return true;
}

struct dioshim_shard *inflight_enter(struct shim_file *f)
{
	struct dioshim_seg *seg = f->seg;
	struct dioshim_shard *sh = inflight_shard(f);
	bool waited = false;

	for (;;) {
		atomic_fetch_add_explicit(&sh->inflight, 1,
					  memory_order_seq_cst);
		if (!atomic_load_explicit(&seg->barrier,
					  memory_order_seq_cst)) {
			if (waited)
				atomic_fetch_sub(&seg->barrier_waiters, 1);
			return sh;
		}
		atomic_fetch_sub_explicit(&sh->inflight, 1,
					  memory_order_release);
		if (!waited) {
			atomic_fetch_add(&seg->barrier_waiters, 1);
			waited = true;
		}
		if (!barrier_wait(seg)) {
			atomic_fetch_sub(&seg->barrier_waiters, 1);
			return NULL;
		}
	}
}

static int64_t slot_inflight(struct dioshim_slot *s)
{
	int64_t n = 0;
	int i;

	for (i = 0; i < DIOSHIM_SLOT_SHARDS; i++)
		n += atomic_load_explicit(&s->shard[i].inflight,
					  memory_order_seq_cst);
	return n;
}

int64_t inflight_count(struct dioshim_seg *seg)
{
	int64_t n = 0;
	int i;

	for (i = 0; i < DIOSHIM_MAX_PROCS; i++)
		if (atomic_load_explicit(&seg->slot[i].owner.pid_start,
					 memory_order_acquire))
			n += slot_inflight(&seg->slot[i]);
	return n;
}

#define FAIR_WAIT_MS 10

static uint64_t ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)(t.tv_sec - t0->tv_sec) * 1000 +
	       (uint64_t)((t.tv_nsec - t0->tv_nsec) / 1000000);
}

/* Wait for every live process's writes to drain. */
static void drain(struct dioshim_seg *seg)
{
	static const struct timespec nap = { 0, 50000 };
	uint64_t dead_owner[DIOSHIM_MAX_PROCS] = { 0 };
	uint64_t next_check = 20;
	struct timespec t0;
	unsigned spins = 0;
	int i;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int64_t n = 0;

		for (i = 0; i < DIOSHIM_MAX_PROCS; i++) {
			struct dioshim_slot *s = &seg->slot[i];
			uint64_t o = atomic_load_explicit(
				&s->owner.pid_start, memory_order_acquire);

			if (o && o != dead_owner[i])
				n += slot_inflight(s);
		}
		if (n <= 0)
			return;
		if (++spins < 64) {
			sched_yield();
			continue;
		}
		nanosleep(&nap, NULL);
		if (ms_since(&t0) < next_check)
			continue;
		/* Slow: look for owners that died with writes counted. */
		next_check = ms_since(&t0) + 100;
		for (i = 0; i < DIOSHIM_MAX_PROCS; i++) {
			struct dioshim_slot *s = &seg->slot[i];
			uint64_t o = atomic_load(&s->owner.pid_start);

			if (o && o != dead_owner[i] && slot_inflight(s) > 0 &&
			    !owner_alive(o, s->owner.pidns)) {
				log_msg("barrier: skipping writes of dead "
					"process %llu",
					(unsigned long long)(o & DIOSHIM_OWNER_PID_MASK));
				dead_owner[i] = o;
			}
		}
	}
}

bool barrier_raise(struct shim_file *f)
{
	struct dioshim_seg *seg = f->seg;
	bool recovered;

	if (!seg_lock(&seg->barrier_lock, &recovered))
		return false;
	/* Writers held up by the last barrier get in before this one goes
	 * up (for at most FAIR_WAIT_NS: a waiter killed while waiting never
	 * gets in). */
	if (atomic_load(&seg->barrier_waiters)) {
		struct timespec t0;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (atomic_load(&seg->barrier_waiters) &&
		       ms_since(&t0) < FAIR_WAIT_MS) {
			seg_unlock(&seg->barrier_lock);
			sched_yield();
			if (!seg_lock(&seg->barrier_lock, &recovered))
				return false;
		}
	}
	atomic_store_explicit(&seg->barrier, 1, memory_order_seq_cst);
	drain(seg);
	/* Asynchronous writes submitted before now complete, in the kernel,
	 * before the size change (which waits for direct I/O): reaped
	 * later, they must not move the size it sets. */
	atomic_fetch_add(&seg->epoch, 1);
	if (f->slot >= 0)
		atomic_fetch_add_explicit(&seg->slot[f->slot].barriers, 1,
					  memory_order_relaxed);
	return true;
}

void barrier_lower(struct shim_file *f)
{
	atomic_store_explicit(&f->seg->barrier, 0, memory_order_seq_cst);
	seg_unlock(&f->seg->barrier_lock);
}
