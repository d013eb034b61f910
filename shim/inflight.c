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
 * A raiser killed between changing the kernel's size and moving the words
 * (a truncate cut short) leaves the barrier BARRIER_CHANGING and its lock
 * to be recovered: the next to take the lock with a descriptor of the
 * file — a writer held up, or the next raiser — recomputes the words from
 * the kernel's size before anyone writes (an append would otherwise land
 * at the old tail, behind a hole).
 *
 * Lock order: barrier_lock, then (after the drain) ext_lock.
 *
 * Layer L2, above commit; calls L1 (segments, owners) and L0.  A
 * repair of the words after a raiser's death is lifecycle.c's, reached
 * through segment_hooks (segment_words_repair).  (The order
 * inside L2 is shim/layers'.)
 */
#define _GNU_SOURCE
#include "inflight.h"

#include "config.h"

#include "log.h"
#include "sys.h"

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

static bool barrier_repair(struct shim_file *f, int fd);

/* Wait for the barrier to go down: its raiser holds barrier_lock for as
 * long as it is up.  False if the lock is unusable, or if the words need
 * a repair that fd < 0 cannot make. */
static bool barrier_wait(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	bool recovered;

	if (!seg_lock(&seg->barrier_lock, &recovered))
		return false;
	/* Its raiser holds barrier_lock for as long as the barrier is up:
	 * holding the lock, we see it up only if the raiser died with it up
	 * (recovered) or the word is garbage — either way it is down, once
	 * the words are right. */
	if (atomic_load(&seg->barrier) == BARRIER_CHANGING &&
	    !barrier_repair(f, fd)) {
		seg_unlock(&seg->barrier_lock);
		return false;
	}
	atomic_store(&seg->barrier, 0);
	seg_unlock(&seg->barrier_lock);
	return true;
}

struct dioshim_shard *inflight_enter(struct shim_file *f)
{
	return inflight_enter_fd(f, -1);
}

static struct dioshim_shard *enter(struct shim_file *f, int fd,
				   bool exec_waits);

struct dioshim_shard *inflight_enter_fd(struct shim_file *f, int fd)
{
	return enter(f, fd, true);
}

/* Under async_lock, which an exec takes to drain the rings: an exec under
 * way is not waited for (its drain waits for us instead). */
struct dioshim_shard *inflight_enter_locked(struct shim_file *f, int fd)
{
	return enter(f, fd, false);
}

static struct dioshim_shard *enter(struct shim_file *f, int fd,
				   bool exec_waits)
{
	struct dioshim_seg *seg;
	struct dioshim_shard *sh;
	bool waited = false;

	/* No slot: given back while another thread execs.  Wait for the
	 * exec to end (it ends this thread, or failed and f is attached
	 * again); still none, and the caller passes the write through. */
	if (__builtin_expect(__atomic_load_n(&f->slot, __ATOMIC_ACQUIRE) < 0,
			     0)) {
		static const struct timespec nap = { 0, 100000 };

		while (__atomic_load_n(&segment_exec_pending,
				       __ATOMIC_ACQUIRE) &&
		       __atomic_load_n(&f->slot, __ATOMIC_ACQUIRE) < 0)
			nanosleep(&nap, NULL);
		if (__atomic_load_n(&f->slot, __ATOMIC_ACQUIRE) < 0)
			return NULL;
	}
	seg = __atomic_load_n(&f->seg, __ATOMIC_ACQUIRE);
	sh = inflight_shard(f);

	for (;;) {
		atomic_fetch_add_explicit(&sh->inflight, 1,
					  memory_order_seq_cst);
		/* Its last close is under way (another thread's): step back
		 * until it is done, then go to the kernel as the call is —
		 * that close drains the writes counted before this one. */
		if (__builtin_expect(atomic_load_explicit(&f->leaving,
							  memory_order_seq_cst),
				     0)) {
			static const struct timespec nap = { 0, 100000 };

			atomic_fetch_sub_explicit(&sh->inflight, 1,
						  memory_order_release);
			if (waited)
				atomic_fetch_sub(&seg->barrier_waiters, 1);
			while (atomic_load(&f->leaving) == FILE_LEAVING)
				nanosleep(&nap, NULL);
			return NULL;
		}
		/* A guest made the file exact (after cutting the tail, under
		 * a barrier that drained us): the call goes as it is.  Read
		 * before the barrier: a writer that then finds the barrier
		 * down is one that barrier's drain waits for. */
		if (__builtin_expect(atomic_load_explicit(&seg->exact,
							  memory_order_seq_cst),
				     0)) {
			atomic_fetch_sub_explicit(&sh->inflight, 1,
						  memory_order_release);
			if (waited)
				atomic_fetch_sub(&seg->barrier_waiters, 1);
			return NULL;
		}
		if (!atomic_load_explicit(&seg->barrier,
					  memory_order_seq_cst)) {
			if (waited)
				atomic_fetch_sub(&seg->barrier_waiters, 1);
			/* Another thread is leaving our files for an exec,
			 * and may have counted our writes in flight before
			 * we announced this one: step back until it is done
			 * (it ends this thread, or failed and we go on). */
			if (__builtin_expect(
				    __atomic_load_n(&segment_exec_pending,
						    __ATOMIC_SEQ_CST),
				    0) &&
			    exec_waits) {
				atomic_fetch_sub_explicit(
					&sh->inflight, 1,
					memory_order_release);
				segment_exec_wait();
				return enter(f, fd, true);
			}
			return sh;
		}
		atomic_fetch_sub_explicit(&sh->inflight, 1,
					  memory_order_release);
		if (!waited) {
			atomic_fetch_add(&seg->barrier_waiters, 1);
			waited = true;
		}
		if (!barrier_wait(f, fd)) {
			atomic_fetch_sub(&seg->barrier_waiters, 1);
			return NULL;
		}
	}
}

/* The writes (writes) or the calls in flight (!writes) of seg's live
 * processes, summed until they reach enough. */
static int64_t live_sum(struct dioshim_seg *seg, bool writes, int64_t enough)
{
	int64_t n = 0;
	int i, hi = seg_slots(seg);

	for (i = 0; i < hi && n < enough; i++) {
		struct dioshim_slot *s = &seg->slot[i];

		if (atomic_load_explicit(&s->owner.pid_start,
					 memory_order_acquire))
			n += writes ? slot_writes(s) : slot_inflight(s);
	}
	return n;
}

bool inflight_engaged(struct shim_file *f)
{
	struct dioshim_seg *seg = f->seg;

	if (file_engaged(seg))
		return true;
	if (config.engage_always) {
		file_engage(seg);
		return true;
	}
	if (live_sum(seg, true, 2) < 2)
		return false;
	file_engage(seg);
	return true;
}

int64_t inflight_count(struct dioshim_seg *seg)
{
	return live_sum(seg, false, INT64_MAX);
}

#define FAIR_WAIT_MS 10

/* Milliseconds since t0 (now_ns). */
#define ms_since(t0) ((now_ns() - (t0)) / 1000000)

/*
 * Wait for every live process's writes to drain.  A process that died
 * with writes counted is freed from its slot on the way (a CAS on its
 * owner word, so an attacher that finds it dead too frees it once): its
 * counts then stop counting, and the next claimer of the slot zeroes them.
 */
static bool drain_for(struct dioshim_seg *seg, uint64_t max_ms)
{
	static const struct timespec nap = { 0, 50000 };
	uint64_t next_check = 20, t0 = now_ns();
	unsigned spins = 0;
	int i, hi;

	for (;;) {
		if (inflight_count(seg) <= 0)
			return true;
		if (max_ms && ms_since(t0) >= max_ms)
			return false;
		if (++spins < 64) {
			sched_yield();
			continue;
		}
		nanosleep(&nap, NULL);
		if (ms_since(t0) < next_check)
			continue;
		/* Slow: look for owners that died with writes counted. */
		next_check = ms_since(t0) + 100;
		hi = seg_slots(seg);
		for (i = 0; i < hi; i++) {
			struct dioshim_slot *s = &seg->slot[i];
			uint64_t o = atomic_load(&s->owner.pid_start);

			if (!o || slot_inflight(s) <= 0 ||
			    slot_owner_alive(seg, s, o) ||
			    !slot_free_dead(seg, i, o))
				continue;
			o &= DIOSHIM_OWNER_PID_MASK;
			log_event(LOG_RECLAIM, LOG_SEG(seg),
				  "barrier: skipping writes of dead process "
				  "%llu", (unsigned long long)o);
		}
	}
}

static void drain(struct dioshim_seg *seg)
{
	drain_for(seg, 0);
}

/*
 * The raiser before us died after it changed the kernel's size and before
 * the words followed (BARRIER_CHANGING); we hold barrier_lock.  With the
 * barrier up nobody new gets in: drain whoever is still in, then put the
 * words on the kernel's size under ext_lock, which the dead raiser held
 * too.  The mark stays until they are right, so that our own death here
 * leaves the repair to the next taker.  False when fd < 0 (no descriptor
 * to read the size with) or ext_lock is unusable: the mark stays for the
 * next caller that can.
 */
static bool barrier_repair(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	bool recovered;

	if (fd < 0) {
		log_once_file(
			LOG_FALLBACK, LOG_SEG(seg),
			"a size change was cut short: the words wait for a "
			"caller with a descriptor; passing through");
		return false;
	}
	drain(seg);
	if (!seg_lock(&seg->ext_lock, &recovered))
		return false;
	/* The words from the kernel's size (lifecycle.c, through the
	 * hooks: recovery and reservation are above us). */
	if (!segment_words_repair(f, fd)) {
		seg_unlock(&seg->ext_lock);
		return false;
	}
	/* Completions of asynchronous writes submitted before now must not
	 * move the size, as after any size change. */
	atomic_fetch_add(&seg->epoch, 1);
	atomic_store_explicit(&seg->barrier, BARRIER_UP, memory_order_seq_cst);
	seg_unlock(&seg->ext_lock);
	log_event(LOG_RECOVER, LOG_SEGFD(seg, fd),
		  "a size change was cut short by its process's death: eof "
		  "%llu, size %llu, from the kernel's size",
		  (unsigned long long)atomic_load(&seg->eof),
		  (unsigned long long)atomic_load(&seg->phys));
	return true;
}

bool barrier_raise(struct shim_file *f)
{
	return barrier_raise_fd(f, -1);
}

/* The barrier is up and nothing is in flight. */
static void barrier_raised(struct shim_file *f, bool size_change)
{
	struct dioshim_seg *seg = f->seg;

	/* Asynchronous writes submitted before now complete, in the kernel,
	 * before the size change (which waits for direct I/O): reaped
	 * later, they must not move the size it sets. */
	if (size_change)
		atomic_fetch_add(&seg->epoch, 1);
	if (f->slot >= 0)
		atomic_fetch_add_explicit(&seg->slot[f->slot].barriers, 1,
					  memory_order_relaxed);
}

static bool barrier_up(struct shim_file *f, int fd, bool size_change)
{
	struct dioshim_seg *seg = f->seg;
	bool recovered;

	if (!seg_lock(&seg->barrier_lock, &recovered))
		return false;
	/* Exact (set under this lock): no size change needs the shim. */
	if (atomic_load(&seg->exact)) {
		seg_unlock(&seg->barrier_lock);
		return false;
	}
	/* Writers held up by the last barrier get in before this one goes
	 * up (for at most FAIR_WAIT_NS: a waiter killed while waiting never
	 * gets in). */
	if (atomic_load(&seg->barrier_waiters)) {
		uint64_t t0 = now_ns();

		while (atomic_load(&seg->barrier_waiters) &&
		       ms_since(t0) < FAIR_WAIT_MS) {
			seg_unlock(&seg->barrier_lock);
			sched_yield();
			if (!seg_lock(&seg->barrier_lock, &recovered))
				return false;
		}
	}
	if (atomic_load(&seg->barrier) == BARRIER_CHANGING &&
	    !barrier_repair(f, fd)) {
		seg_unlock(&seg->barrier_lock);
		return false;
	}
	atomic_store_explicit(&seg->barrier, BARRIER_UP, memory_order_seq_cst);
	drain(seg);
	barrier_raised(f, size_change);
	return true;
}

bool barrier_raise_fd(struct shim_file *f, int fd)
{
	return barrier_up(f, fd, true);
}

bool barrier_raise_write(struct shim_file *f, int fd)
{
	return barrier_up(f, fd, false);
}

bool barrier_try_raise(struct shim_file *f, unsigned max_ms)
{
	struct dioshim_seg *seg = f->seg;
	bool recovered;

	if (seg_trylock(&seg->barrier_lock, &recovered))
		return false;
	if (atomic_load(&seg->exact) ||
	    atomic_load(&seg->barrier) == BARRIER_CHANGING) {
		seg_unlock(&seg->barrier_lock);
		return false;
	}
	atomic_store_explicit(&seg->barrier, BARRIER_UP, memory_order_seq_cst);
	if (!drain_for(seg, max_ms)) {
		barrier_lower(f);
		return false;
	}
	barrier_raised(f, true);
	return true;
}

void barrier_settle(struct shim_file *f, int fd)
{
	if (__builtin_expect(atomic_load_explicit(&f->seg->barrier,
						  memory_order_acquire) ==
				     BARRIER_CHANGING,
			     0))
		barrier_wait(f, fd);
}

void barrier_lower(struct shim_file *f)
{
	atomic_store_explicit(&f->seg->barrier, 0, memory_order_seq_cst);
	seg_unlock(&f->seg->barrier_lock);
}
