// SPDX-License-Identifier: MIT
/*
 * The asynchronous writes in flight (libaio's, liburing's) and the
 * completion rings they finish on; layer L4.
 *
 * The kernel runs an extending asynchronous direct write synchronously
 * (ext4 waits for it inside io_submit; io_uring punts it to a worker that
 * takes the inode lock), so queue depth 16 becomes 1.  Here a write queued
 * for an accelerated fd gets what a pwrite gets before the kernel sees it —
 * the reservation, the prefill, an O_APPEND offset from the tail (made
 * positional with RWF_NOAPPEND) — and the kernel runs it as an overwrite,
 * in parallel with the rest of the queue (batch.c prepares it; aio.c and
 * uring.c submit it).
 *
 * The logical EOF moves when the completion appears in the completion ring
 * (the aio ring libaio maps at the context's address, the io_uring CQ):
 * both are in this process's memory, so the shim reads them without
 * consuming anything.  Each ring has a cursor: the completions between it
 * and the kernel's tail are matched to the writes in flight (libaio: by
 * iocb address; io_uring: by user_data, oldest first) and applied.  The
 * rings are read at every submit and reap call the shim sees, and before
 * every size or read answer while writes are in flight (async_settle), so
 * no size the application is given misses a completion it could have
 * seen.
 *
 * A completion can be overwritten only after it was consumed and the ring
 * wrapped; every submission passes here (reading the ring first), so no
 * more completions than fit the ring arrive between two reads.
 *
 * A size change (ftruncate, O_TRUNC, collapse/insert) waits, in the
 * kernel, for the direct writes in flight; the epoch it bumps tells a
 * completion read later that its size is already decided.  A trim never
 * cuts below seg->async_end while writes may be in flight.
 *
 * May call: L0-L3 (the write transaction settles a completion) and the
 * fd table; nothing above it (not io.c, nor the submitters).
 *
 * Locks: async_lock (this process's rings) before any segment lock.
 */
#define _GNU_SOURCE
#include "ring.h"
#include "lockrank.h"

#include "inflight.h"
#include "abi.h"
#include "fdtable.h"
#include "guard.h"
#include "log.h"
#include "mem.h"
#include "real.h"
#include "reserve.h"
#include "segment.h"
#include "sys.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

_Atomic unsigned async_pending;

pthread_mutex_t async_lock = PTHREAD_MUTEX_INITIALIZER;

/* The process ends: its rings were drained for the last time (under
 * async_lock). */
static bool sealed;

static struct aring *rings;

static struct aop *aop_free;

struct aring *ring_find(enum ring_kind kind, uintptr_t handle)
{
	struct aring *r;

	for (r = rings; r; r = r->next)
		if (r->kind == kind && r->handle == handle)
			return r;
	return NULL;
}

static unsigned ring_tail(const struct aring *r)
{
	if (r->kind == RING_AIO) {
		struct aio_ring_hdr *h = (struct aio_ring_hdr *)r->handle;

		return __atomic_load_n(&h->tail, __ATOMIC_ACQUIRE);
	}
	return __atomic_load_n(r->cq.ktail, __ATOMIC_ACQUIRE);
}

static void ring_forget(struct aring *r);

/* r's view of the io_uring at its address, from the program's struct
 * (valid: a call names it). */
static void cq_view_take(struct aring *r, const struct io_uring *ring)
{
	r->cq.khead = ring->cq.khead;
	r->cq.ktail = ring->cq.ktail;
	r->cq.cqes = ring->cq.cqes;
	r->cq.mask = *ring->cq.kring_mask;
	r->cq.entries = *ring->cq.kring_entries;
	r->cq.flags = ring->flags;
	r->cq.features = ring->features;
	r->cq.ring_fd = ring->ring_fd;
}

/*
 * Whether the io_uring at r's address is still the one r was made for.
 * If not (the one before was freed without io_uring_queue_exit, and
 * another made in its place), r stays the one before's, under a handle
 * no call names: its writes are still seen complete through its view,
 * and it goes once they are.
 */
static bool cq_view_same(struct aring *r, const struct io_uring *ring)
{
	if (r->cq.ktail == ring->cq.ktail && r->cq.cqes == ring->cq.cqes) {
		/* io_uring_close_ring_fd may have closed it since. */
		r->cq.ring_fd = ring->ring_fd;
		return true;
	}
	r->handle = (uintptr_t)r | 1; /* no struct io_uring's address */
	free(r->files);
	r->files = NULL;
	r->nfiles = 0;
	if (!r->ops)
		ring_forget(r);
	return false;
}

/* Under async_lock: the ring's record, made with the cursor at the
 * kernel's tail (what completed before is none of ours). */
struct aring *ring_get(enum ring_kind kind, uintptr_t handle)
{
	struct aring *r = ring_find(kind, handle);

	if (r && (kind == RING_AIO ||
		  cq_view_same(r, (const struct io_uring *)handle)))
		return r;
	if (kind == RING_AIO) {
		struct aio_ring_hdr h;

		/* Not a context (the kernel says EINVAL): none of ours. */
		if (!copy_in(&h, (void *)handle, sizeof(h)) ||
		    h.magic != AIO_RING_MAGIC || !h.nr)
			return NULL;
	}
	r = mem_alloc(sizeof(*r));
	if (!r)
		return NULL;
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->handle = handle;
	r->ops_last = &r->ops;
	if (kind == RING_URING)
		cq_view_take(r, (const struct io_uring *)handle);
	r->cursor = ring_tail(r);
	r->next = rings;
	rings = r;
	return r;
}

static void ring_forget(struct aring *r)
{
	struct aring **pp;

	for (pp = &rings; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	}
	free(r->files);
	/* mem_alloc'd: kept for the life of the process (rings are few) */
	r->next = NULL;
}

struct aop *aop_new(void)
{
	struct aop *a = aop_free;

	if (a)
		aop_free = a->next;
	else
		a = mem_alloc(sizeof(*a));
	if (a)
		memset(a, 0, sizeof(*a));
	return a;
}

void aop_queue(struct aring *r, struct aop *a)
{
	a->next = NULL;
	*r->ops_last = a;
	r->ops_last = &a->next;
	r->nops++;
	atomic_fetch_add(&async_pending, 1);
}

/* Take a out of r's list (prev: the op before it, or NULL); still
 * counted in async_pending until aop_finish has applied it. */
void aop_unlink(struct aring *r, struct aop *prev, struct aop *a)
{
	if (prev)
		prev->next = a->next;
	else
		r->ops = a->next;
	if (r->ops_last == &a->next)
		r->ops_last = prev ? &prev->next : &r->ops;
	r->nops--;
}

/* The attachment stays while any of its writes is in flight: pinned by
 * the first (one files_lock round trip per burst, not per write). */
void aop_pin(struct aop *a, struct shim_file *f)
{
	a->f = f;
	if (f->async_ops++ == 0)
		segment_pin(f);
	atomic_fetch_add(&f->seg->slot[f->slot].async_inflight, 1);
}

static void aop_release(struct aop *a)
{
	struct shim_file *f = a->f;

	if (f->slot >= 0)
		atomic_fetch_sub(&f->seg->slot[f->slot].async_inflight, 1);
	if (--f->async_ops == 0)
		segment_unpin(f);
	a->next = aop_free;
	aop_free = a;
}

/*
 * Appends completed whose range could not be handed on (the segment's
 * done ring was full), in offset order: published by a later scan,
 * never waited for here — this thread may hold what the appends before
 * them need (async_lock; the program's own locks).  Under async_lock;
 * counted in async_pending, so that scans go on.
 */
static struct aop *deferred;

/* Where an append at off goes in the deferred list, kept in offset
 * order: published in that order, at exit one after another. */
static struct aop **deferred_place(uint64_t off)
{
	struct aop **pp = &deferred;

	lock_held(LOCK_ASYNC);
	while (*pp && (*pp)->t.off < off)
		pp = &(*pp)->next;
	return pp;
}

/* Publish what can be of the deferred appends. */
static void deferred_retry(void)
{
	struct aop **pp = &deferred, *a;

	while ((a = *pp)) {
		if (!wtx_publish_deferred(&a->t, false)) {
			pp = &a->next;
			continue;
		}
		*pp = a->next;
		atomic_fetch_sub(&async_pending, 1);
		aop_release(a);
	}
}

/* A queued write's completion in the file's counts (dioshim status),
 * as a call's is counted in io.c. */
static void aop_count(const struct aop *a, int64_t res, int st)
{
	struct dioshim_shard *sh;

	if (a->t.kind == WTX_GROW || res <= 0 || a->f->slot < 0)
		return;
	sh = inflight_shard(a->f);
	atomic_fetch_add_explicit(&sh->writes, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sh->bytes, (uint64_t)res,
				  memory_order_relaxed);
	if (a->t.kind == WTX_APPEND)
		atomic_fetch_add_explicit(&sh->appends, 1,
					  memory_order_relaxed);
	if (st & WTX_MOVED)
		atomic_fetch_add_explicit(&sh->extends, 1,
					  memory_order_relaxed);
}

/*
 * The write finished with res (bytes, or -errno): settle its transaction.
 * False if the append's range is left to deferred_retry (the op is then
 * not the caller's to release).  Under async_lock.
 */
static bool aop_apply(struct aop *a, int64_t res)
{
	struct aop **pp;
	int st = wtx_settle(&a->t, -1, res);

	lock_held(LOCK_ASYNC);
	aop_count(a, res, st);
	if (!(st & WTX_DEFERRED))
		return true;
	pp = deferred_place(a->t.off);
	a->next = *pp;
	*pp = a;
	atomic_fetch_add(&async_pending, 1);
	return false;
}

/* The result of a as if it completed whole. */
int64_t aop_whole(const struct aop *a)
{
	return a->t.kind == WTX_GROW ? 0 : (int64_t)(a->t.end - a->t.off);
}

/*
 * aop_apply, then give a back unless it was deferred.  Only then is it
 * no longer pending: a thread that reaped its completion from the kernel
 * and finds nothing pending (async_settle) must find it in the size.
 */
void aop_finish(struct aop *a, int64_t res)
{
	if (aop_apply(a, res))
		aop_release(a);
	atomic_fetch_sub(&async_pending, 1);
}

/* Match a completion to the oldest write in flight with its key. */
static void ring_complete(struct aring *r, uint64_t key, int64_t res)
{
	struct aop *a, *prev = NULL;

	for (a = r->ops; a; prev = a, a = a->next) {
		if (a->key != key)
			continue;
		aop_unlink(r, prev, a);
		aop_finish(a, res);
		return;
	}
}

/* Every op of r as if it completed whole (its completion can no longer
 * be read). */
static void ring_complete_all(struct aring *r, const char *why)
{
	if (r->ops)
		log_event(LOG_ERROR, NULL,
			  "%u asynchronous writes: %s; taken as complete",
			  r->nops, why);
	while (r->ops) {
		struct aop *a = r->ops;

		aop_unlink(r, NULL, a);
		aop_finish(a, aop_whole(a));
	}
}

/* Read r's completions from the cursor to the kernel's tail.  Under
 * async_lock. */
void ring_scan(struct aring *r)
{
	unsigned tail = ring_tail(r);

	if (r->kind == RING_AIO) {
		struct aio_ring_hdr *h = (struct aio_ring_hdr *)r->handle;
		unsigned nr = h->nr;

		if (!nr || tail >= nr || r->cursor >= nr) {
			r->cursor = tail;
			return;
		}
		for (; r->cursor != tail; r->cursor = (r->cursor + 1) % nr) {
			struct io_event *ev = &h->io_events[r->cursor];

			if (r->ops)
				ring_complete(r, (uint64_t)(uintptr_t)ev->obj,
					      (int64_t)(long)ev->res);
		}
		return;
	} else {
		unsigned mask = r->cq.mask;
		unsigned shift = (r->cq.flags & IORING_SETUP_CQE32) ? 1 : 0;

		if (tail - r->cursor > r->cq.entries) {
			ring_complete_all(r, "completions overwritten unread");
			r->cursor = tail;
			return;
		}
		for (; r->cursor != tail; r->cursor++) {
			struct io_uring_cqe *c =
				&r->cq.cqes[(r->cursor & mask) << shift];

			if (r->ops)
				ring_complete(r, c->user_data, c->res);
		}
	}
}

static void scan_locked(void)
{
	struct aring *r, *next;

	for (r = rings; r; r = next) {
		next = r->next;
		if (r->ops)
			ring_scan(r);
		/* A ring gone without io_uring_queue_exit, its writes all
		 * seen complete. */
		if ((r->handle & 1) && !r->ops)
			ring_forget(r);
	}
	if (deferred)
		deferred_retry();
}

void async_poll_slow(void)
{
	int saved = errno, busy = io_busy;

	/* Inside the shim already (a signal handler that interrupted this
	 * thread there, maybe holding async_lock or files_lock, which
	 * applying a completion may take): the next call reads the rings. */
	if (busy)
		return;
	busy_enter();
	rank_lock(&async_lock, LOCK_ASYNC);
	scan_locked();
	rank_unlock(&async_lock, LOCK_ASYNC);
	busy_exit(busy);
	errno = saved;
}

/* publish_poll: an append waits for a queued write ahead of it.  Not
 * under async_lock (the sync path never holds it); a thread that does,
 * or another one at it, reads the rings itself. */
static void poll_try(void)
{
	int saved = errno;

	if (!atomic_load_explicit(&async_pending, memory_order_acquire) ||
	    rank_trylock(&async_lock, LOCK_ASYNC))
		return;
	scan_locked();
	rank_unlock(&async_lock, LOCK_ASYNC);
	errno = saved;
}

PUBLISH_POLL(poll_try);

/* At least n ops on the free list, for a submission that cannot be cut
 * short (uring_reserve).  Under async_lock. */
bool aop_reserve(unsigned n)
{
	unsigned have = 0;
	struct aop *a;

	lock_held(LOCK_ASYNC);
	for (a = aop_free; a && have < n; a = a->next)
		have++;
	for (; have < n; have++) {
		a = mem_alloc(sizeof(*a));
		if (!a)
			return false;
		a->next = aop_free;
		aop_free = a;
	}
	return true;
}

/*
 * Take async_lock to enter writes.  An exec, or the process's end, drains
 * the rings under it (async_drain_all) and then leaves the files: a
 * submission that took it after the drain would enter a write behind
 * their back.  It waits for the exec instead, and for good once the
 * process ends.
 */
void lock_to_submit(void)
{
	for (;;) {
		rank_lock(&async_lock, LOCK_ASYNC);
		if (!sealed && !__atomic_load_n(&segment_exec_pending,
						__ATOMIC_ACQUIRE))
			return;
		rank_unlock(&async_lock, LOCK_ASYNC);
		if (sealed)
			sys_wait_for_the_end();
		segment_exec_wait();
	}
}

/* ---- a ring that goes -------------------------------------------------- */

/* Wait until every tracked write of an aio context has completed, and
 * apply them: the ring goes away with the context. */
static void aio_drain(struct aring *r)
{
	struct io_event ev[64];
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	int idle = 0;

	/* Another thread's io_getevents may take a completion first (it
	 * then waits for async_lock to read the ring, which we hold): read
	 * the ring again each round, and wait in short steps.  30 s
	 * without a completion of ours: given up. */
	ring_scan(r);
	while (r->ops && idle++ < 3000) {
		/* The application gave up these completions (destroy, exit):
		 * reaping them here takes nothing it will look for. */
		unsigned before = r->nops;
		int n = lazy_io_getevents()((io_context_t)r->handle, 1,
					    r->nops < 64 ? r->nops : 64, ev,
					    &ts);
		int i;

		if (n < 0 && n != -EINTR)
			break;
		for (i = 0; i < n; i++)
			ring_complete(r, (uint64_t)(uintptr_t)ev[i].obj,
				      (int64_t)(long)ev[i].res);
		ring_scan(r);
		if (r->nops < before)
			idle = 0;
	}
	ring_complete_all(r, "not completed when its context went");
}

/* Wait until the ring holds want completions, or 10 ms (where the kernel
 * takes a timeout: a completion the program reaped already, or one that
 * never comes, must not hold the process up for ever). */
static int uring_wait_events(const struct cq_view *cq, unsigned want)
{
	struct __kernel_timespec ts = { 0, 10000000 };
	struct io_uring_getevents_arg arg = {
		.sigmask = 0,
		.sigmask_sz = _NSIG / 8,
		.ts = (uint64_t)(uintptr_t)&ts,
	};

	if (!(cq->features & IORING_FEAT_EXT_ARG))
		return sys_io_uring_enter(cq->ring_fd, 0, want,
					  IORING_ENTER_GETEVENTS, NULL,
					  _NSIG / 8);
	return sys_io_uring_enter(cq->ring_fd, 0, want,
				  IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG,
				  &arg, sizeof(arg));
}

/* Wait (without consuming) until the ring's tracked writes have posted
 * their completions, then apply them. */
static void uring_drain(struct aring *r)
{
	int tries = 0;

	ring_scan(r);
	/* 10 s without a completion of ours: given up. */
	while (r->ops && tries++ < 1000) {
		unsigned before = r->nops;
		unsigned ready = ring_tail(r) -
				 __atomic_load_n(r->cq.khead, __ATOMIC_ACQUIRE);
		unsigned want = ready + r->nops;

		if (want > r->cq.entries)
			want = r->cq.entries;
		if (uring_wait_events(&r->cq, want) < 0 && errno != EINTR &&
		    errno != ETIME)
			break;
		ring_scan(r);
		if (r->nops < before)
			tries = 0;
	}
	ring_complete_all(r, "not seen complete when the ring went");
}

/* The ring is going away (io_destroy, io_uring_queue_exit): apply its
 * writes in flight first, while it can still be read. */
void ring_drop(enum ring_kind kind, uintptr_t handle)
{
	int saved = errno, busy = busy_enter();
	struct aring *r;

	rank_lock(&async_lock, LOCK_ASYNC);
	r = ring_find(kind, handle);
	/* Another ring at the address of one freed without
	 * io_uring_queue_exit: that one is not this call's to drop. */
	if (r && kind == RING_URING &&
	    !cq_view_same(r, (const struct io_uring *)handle))
		r = NULL;
	if (r) {
		if (kind == RING_AIO)
			aio_drain(r);
		else
			uring_drain(r);
		ring_forget(r);
	}
	rank_unlock(&async_lock, LOCK_ASYNC);
	busy_exit(busy);
	errno = saved;
}

/* ---- process life ------------------------------------------------------ */

void async_drain_all(bool for_good)
{
	struct aring *r;

	rank_lock(&async_lock, LOCK_ASYNC);
	sealed = for_good;
	for (r = rings; r; r = r->next) {
		if (!r->ops)
			continue;
		if (r->kind == RING_AIO)
			aio_drain(r);
		else
			uring_drain(r);
	}
	/* The appends before the deferred ones are all done now, or never
	 * will be: the last resort is eof_publish_in_order's. */
	deferred_retry();
	while (deferred) {
		struct aop *a = deferred;

		deferred = a->next;
		atomic_fetch_sub(&async_pending, 1);
		wtx_publish_deferred(&a->t, true);
		aop_release(a);
	}
	rank_unlock(&async_lock, LOCK_ASYNC);
}

/* The parent's writes in flight, whose pins the child gives back once
 * its segment code is set up (async_atfork_child_unpin). */
static struct aop *child_drop;

void async_atfork_child(void)
{
	struct aring *r;

	/* The rings are not the child's (an aio context is not inherited; a
	 * ring's queue is the parent's to submit): forget them and their
	 * writes.  Their pins are the parent's: a file the parent closed
	 * with writes in flight is not the child's at all. */
	child_drop = NULL;
	for (r = rings; r; r = r->next) {
		if (r->ops) {
			*r->ops_last = child_drop;
			child_drop = r->ops;
		}
	}
	/* Appends completed but not yet published hold theirs too. */
	while (deferred) {
		struct aop *a = deferred;

		deferred = a->next;
		a->next = child_drop;
		child_drop = a;
	}
	rank_reinit(&async_lock);
	sealed = false;
	rings = NULL;
	aop_free = NULL;
	deferred = NULL;
	atomic_store(&async_pending, 0);
}

void async_atfork_child_unpin(void)
{
	while (child_drop) {
		struct aop *a = child_drop;
		struct shim_file *f = a->f;

		child_drop = a->next;
		/* Once per file: its copy, if the parent kept one, was
		 * closed with the lifelines. */
		if (f->async_ops) {
			f->async_ops = 0;
			f->kept = 0;
			segment_unpin(f);
		}
		a->next = aop_free;
		aop_free = a;
	}
}
