// SPDX-License-Identifier: MIT
/*
 * Asynchronous submitters: libaio's io_submit and liburing's submit calls.
 *
 * The kernel runs an extending asynchronous direct write synchronously
 * (ext4 waits for it inside io_submit; io_uring punts it to a worker that
 * takes the inode lock), so queue depth 16 becomes 1.  Here a write queued
 * for an accelerated fd gets what a pwrite gets before the kernel sees it —
 * the reservation, the prefill, an O_APPEND offset from the tail (made
 * positional with RWF_NOAPPEND) — and the kernel runs it as an overwrite,
 * in parallel with the rest of the queue.
 *
 * The logical EOF moves when the completion appears in the completion ring
 * (the aio ring libaio maps at the context's address, the io_uring CQ):
 * both are in this process's memory, so the shim reads them without
 * consuming anything.  Each ring has a cursor: the completions between it
 * and the kernel's tail are matched to the writes in flight (libaio: by
 * iocb address; io_uring: by user_data, oldest first) and applied.  The
 * rings are read at every submit and reap call the shim sees, and before
 * every size or read answer while writes are in flight, so no size the
 * application is given misses a completion it could have seen.
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
 * Locks: async_lock (this process's rings) before any segment lock.
 */
#define _GNU_SOURCE
#include "async.h"

#include "config.h"
#include "fdtable.h"
#include "inflight.h"
#include "io.h"
#include "log.h"
#include "mem.h"
#include "prefill.h"
#include "real.h"
#include "reserve.h"
#include "sys.h"
#include "umem.h"
#include "wtx.h"

#include <errno.h>
/* libaio.h has an inline io_fsync of its own; io.h's is the shim's. */
#define io_fsync libaio_io_fsync
#include <libaio.h>
#undef io_fsync
#include <limits.h>
#include <liburing.h>
#include <pthread.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>

#define EXPORT __attribute__((visibility("default")))

#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x00000020
#endif
#define RWF_APPEND_ 0x00000010

_Atomic unsigned async_pending;

/* ---- writes in flight and the rings they complete on ------------------ */

/* A queued write: its transaction, settled when its completion is
 * reaped. */
struct aop {
	struct aop *next;
	struct shim_file *f; /* pinned (a reference) until applied */
	uint64_t key; /* iocb address, or user_data */
	struct wtx t;
	/* An io_uring entry's: the entry, its fields before the shim
	 * rewrote them, and the batch that prepared it (uring_leftovers) */
	struct io_uring_sqe *sqe;
	uint64_t app_off;
	uint32_t app_flags, app_len;
	uint64_t batch;
};

enum ring_kind { RING_AIO, RING_URING };

/*
 * What the shim reads of an io_uring outside a call that names it: the
 * kernel's completion queue, mapped until io_uring_queue_exit unmaps it,
 * as the program's struct io_uring pointed at it when last seen.  The
 * struct itself may be gone by then: a program may free it without
 * io_uring_queue_exit (a ring on the stack of a thread that ended).
 */
struct cq_view {
	unsigned *khead, *ktail;
	struct io_uring_cqe *cqes;
	unsigned mask, entries, flags, features;
	int ring_fd;
};

struct aring {
	struct aring *next;
	enum ring_kind kind;
	uintptr_t handle; /* io_context_t, or struct io_uring * */
	struct cq_view cq; /* io_uring */
	unsigned cursor; /* next completion to look at */
	struct aop *ops, **ops_last; /* in submission order */
	unsigned nops;
	int *files; /* io_uring registered files: index -> fd, -1 */
	unsigned nfiles;
	/* Entries the kernel left queued (it stopped at a refused one:
	 * no IORING_SETUP_SUBMIT_ALL), their preparation undone: the next
	 * submission prepares them again, from the kernel's head. */
	bool leftovers;
};

/* The kernel's aio ring, mapped at the io_context_t's address
 * (fs/aio.c): completions are io_events[head..tail) modulo nr. */
struct aio_ring_hdr {
	unsigned id, nr, head, tail;
	unsigned magic, compat_features, incompat_features, header_length;
	struct io_event io_events[];
};
#define AIO_RING_MAGIC 0xa10a10a1

/* Copy n bytes the application pointed at, or say they are not all there
 * (the kernel would answer EFAULT: let it). */
static bool copy_in(void *dst, const void *src, size_t n)
{
	return umem_read(dst, src, n) == n;
}

static pthread_mutex_t async_lock = PTHREAD_MUTEX_INITIALIZER;
/* The process ends: its rings were drained for the last time (under
 * async_lock). */
static bool sealed;
static struct aring *rings;
static struct aop *aop_free;

static struct aring *ring_find(enum ring_kind kind, uintptr_t handle)
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
static struct aring *ring_get(enum ring_kind kind, uintptr_t handle)
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

static struct aop *aop_new(void)
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

static void aop_queue(struct aring *r, struct aop *a)
{
	a->next = NULL;
	*r->ops_last = a;
	r->ops_last = &a->next;
	r->nops++;
	atomic_fetch_add(&async_pending, 1);
}

/* Take a out of r's list (prev: the op before it, or NULL); still
 * counted in async_pending until aop_finish has applied it. */
static void aop_unlink(struct aring *r, struct aop *prev, struct aop *a)
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
static void aop_pin(struct aop *a, struct shim_file *f)
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
static int64_t aop_whole(const struct aop *a)
{
	return a->t.kind == WTX_GROW ? 0 : (int64_t)(a->t.end - a->t.off);
}

/*
 * aop_apply, then give a back unless it was deferred.  Only then is it
 * no longer pending: a thread that reaped its completion from the kernel
 * and finds nothing pending (async_settle) must find it in the size.
 */
static void aop_finish(struct aop *a, int64_t res)
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
		log_msg("%u asynchronous writes: %s; taken as complete",
			r->nops, why);
	while (r->ops) {
		struct aop *a = r->ops;

		aop_unlink(r, NULL, a);
		aop_finish(a, aop_whole(a));
	}
}

/* Read r's completions from the cursor to the kernel's tail.  Under
 * async_lock. */
static void ring_scan(struct aring *r)
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
	io_busy = 1;
	pthread_mutex_lock(&async_lock);
	scan_locked();
	pthread_mutex_unlock(&async_lock);
	io_busy = busy;
	errno = saved;
}

/* publish_poll: an append waits for a queued write ahead of it.  Not
 * under async_lock (the sync path never holds it); a thread that does,
 * or another one at it, reads the rings itself. */
static void poll_try(void)
{
	int saved = errno;

	if (!atomic_load_explicit(&async_pending, memory_order_acquire) ||
	    pthread_mutex_trylock(&async_lock))
		return;
	scan_locked();
	pthread_mutex_unlock(&async_lock);
	errno = saved;
}

__attribute__((constructor)) static void async_register(void)
{
	publish_poll = poll_try;
}

/* ---- preparing a batch of queued requests ------------------------------ */

/*
 * A batch holds, per file it writes, the in-flight count (a size change
 * waits for the submission) and ext_lock if a write must go exact.  Most
 * batches write a file or two: those are held in the caller's frame,
 * which stays small (each page of stack a request touches is a TLB miss
 * after the system call, hot.c).  A wider batch moves to a spare array,
 * twice as large each time, taken under async_lock and given back at
 * its end: a submission may name any number of files, and a write the
 * batch could not hold would go to the kernel untracked.
 */
#define BATCH_INLINE 4
#define SPARE_CLASSES 12 /* 16 << 11: a ring's most entries, 32768 */

struct held {
	struct shim_file *f;
	struct dioshim_shard *sh;
	int fd;
	bool exact; /* ext_lock held: reserve_exact_done after submit */
};

struct spare {
	struct spare *next; /* on the free list */
	int cls; /* holds 16 << cls */
	struct held h[];
};

struct batch {
	struct held *h; /* inl, or spare->h */
	struct spare *spare;
	int n, cap;
	bool full; /* no memory to grow: libaio submits what it has */
	int saved_errno, busy;
	uint64_t seq; /* its ops' aop.batch (io_uring) */
	struct held inl[BATCH_INLINE];
};

static uint64_t batch_seq; /* under async_lock */

static struct spare *spares[SPARE_CLASSES]; /* under async_lock */

static void batch_begin(struct batch *b)
{
	b->h = b->inl;
	b->spare = NULL;
	b->n = 0;
	b->cap = BATCH_INLINE;
	b->full = false;
	b->saved_errno = errno;
	b->busy = io_busy;
	io_busy = 1;
}

/* Under async_lock. */
static void spare_put(struct spare *s)
{
	s->next = spares[s->cls];
	spares[s->cls] = s;
}

/* Room for twice as many files.  Under async_lock. */
static bool batch_grow(struct batch *b)
{
	int cls = b->spare ? b->spare->cls + 1 : 0;
	struct spare *s;

	if (cls == SPARE_CLASSES)
		return false;
	s = spares[cls];
	if (s)
		spares[cls] = s->next;
	else if ((s = mem_alloc(sizeof(*s) +
				((size_t)16 << cls) * sizeof(s->h[0]))))
		s->cls = cls;
	else
		return false;
	memcpy(s->h, b->h, (size_t)b->n * sizeof(s->h[0]));
	if (b->spare)
		spare_put(b->spare);
	b->spare = s;
	b->h = s->h;
	b->cap = 16 << cls;
	return true;
}

/* The held entry for f, entering it on first use; NULL if no memory is
 * left for it or the barrier is unusable (the request then goes as it
 * is).  Under async_lock; the entry moves when the batch grows. */
static struct held *batch_hold(struct batch *b, struct shim_file *f, int fd)
{
	struct held *h;
	int i;

	for (i = 0; i < b->n; i++)
		if (b->h[i].f == f)
			return &b->h[i];
	if (b->n == b->cap && !batch_grow(b)) {
		b->full = true;
		return NULL;
	}
	h = &b->h[b->n];
	h->sh = inflight_enter_locked(f, fd);
	if (!h->sh)
		return NULL;
	h->f = f;
	h->fd = fd;
	h->exact = false;
	b->n++;
	return h;
}

/* Let go of the files the batch holds (their ext_lock, for exact
 * writes, and their count in flight). */
static void batch_release(struct batch *b)
{
	int i;

	for (i = 0; i < b->n; i++) {
		if (b->h[i].exact)
			reserve_exact_done(b->h[i].f, b->h[i].fd);
		inflight_exit(b->h[i].sh);
	}
	b->n = 0;
}

static void batch_end(struct batch *b)
{
	batch_release(b);
	if (b->spare) {
		pthread_mutex_lock(&async_lock);
		spare_put(b->spare);
		pthread_mutex_unlock(&async_lock);
	}
	io_busy = b->busy;
	errno = b->saved_errno;
}

/* The file fd names, if the shim serves writes to it. */
static struct shim_file *served_writer(int fd, struct ofd **op)
{
	struct ofd *o = shim_served(fd);
	struct shim_file *f;

	if (!o)
		return NULL;
	f = atomic_load_explicit(&o->file, memory_order_acquire);
	if (!f || f->slot < 0 ||
	    (atomic_load_explicit(&o->flags, memory_order_relaxed) &
	     O_ACCMODE) == O_RDONLY)
		return NULL;
	*op = o;
	return f;
}

/*
 * A queued read of a served file ends at its logical size, as a
 * synchronous one does: the length it may have, len cut, which the
 * caller writes in the request before the kernel reads it (the kernel's
 * from then on: nothing is changed after).  The size is the one at
 * submission: the kernel alone may give more if an append lands first,
 * never less.  A direct read whose cut would break its alignment, and a
 * vectored one (its length is in its iovecs, which are the program's),
 * keep their length: *uncut says so (the callers then read it now, or
 * cut its count when it is reaped).
 */
static uint64_t queued_read_len(int fd, uint64_t off, uint64_t len,
				bool vec, struct ofd **uncut)
{
	struct ofd *o = shim_served(fd);
	struct shim_file *f;
	uint64_t eof, n, align;
	uint32_t flags;

	if (uncut)
		*uncut = NULL;
	if (!o || !(f = atomic_load_explicit(&o->file, memory_order_acquire)) ||
	    off > (uint64_t)INT64_MAX)
		return len;
	flags = atomic_load_explicit(&o->flags, memory_order_relaxed);
	if ((flags & O_ACCMODE) == O_WRONLY || (flags & O_PATH))
		return len;
	eof = atomic_load_explicit(&f->seg->eof, memory_order_acquire);
	if (off + len <= eof)
		return len;
	n = off >= eof ? 0 : eof - off;
	align = f->dio_off_align ? f->dio_off_align : 512;
	if (vec || ((flags & O_DIRECT) && (n & (align - 1)))) {
		if (uncut)
			*uncut = o;
		return len;
	}
	return n;
}

/* What a queued write asks for: its length, and the OR of its buffers'
 * addresses and of their lengths, empty ones left out (wtx_refused). */
struct span {
	uint64_t len, base_or, len_or;
};

/* A queued request's transaction, claimed and tracked on r; NULL if the
 * batch cannot hold it (the request then goes as issued). */
static struct aop *aop_claim(struct batch *b, struct aring *r,
			     struct shim_file *f, int fd, uint64_t key,
			     enum wtx_kind kind, uint64_t off, uint64_t len,
			     unsigned how)
{
	struct held *h = batch_hold(b, f, fd);
	struct aop *a = h ? aop_new() : NULL;

	if (!a && b->full && r->kind == RING_AIO)
		return NULL; /* aio_submit_some submits what it holds */
	if (!a) {
		log_once("a queued write cannot be tracked (no memory, or the "
			 "file's barrier is unusable): it goes as issued");
		return NULL;
	}
	/* Counted in flight before it claims: a move (move.h) that starts
	 * meanwhile sees it, and is not made (its data is not ours to write
	 * again). */
	aop_pin(a, f);
	wtx_claim(&a->t, f, fd, kind, off, len,
		  how | WTX_QUEUED | (h->exact ? WTX_EXACT_HELD : 0));
	if (a->t.res == RESERVE_EXACT)
		h->exact = true; /* the kernel extends; phys re-read after */
	a->key = key;
	aop_queue(r, a);
	return a;
}

/*
 * One queued write of len bytes at *off (an append: wherever the tail
 * is) to fd: apply the rules and say what it becomes.  Returns the op to
 * track (queued on r before the kernel can complete it), or NULL to let
 * the request go as it is.  *append_off is set for an append: the
 * request must be rewritten to write there, positionally.
 */
static struct aop *prepare_write(struct batch *b, struct aring *r, int fd,
				 uint64_t key, uint64_t off,
				 const struct span *sp, int rwf, unsigned how,
				 bool *append_out)
{
	struct ofd *o;
	struct shim_file *f = served_writer(fd, &o);
	uint64_t len = sp->len, tail = 0;
	uint32_t flags;
	struct aop *a;
	bool append;

	*append_out = false;
	if (!f || !len || len > INT_MAX)
		return NULL;
	flags = atomic_load_explicit(&o->flags, memory_order_relaxed);
	append = write_appends(flags, rwf);
	if (!append && (off > (uint64_t)INT64_MAX - len))
		return NULL;
	if (rwf & RWF_NOWAIT)
		return NULL; /* the kernel's answer stands, whatever it is */
	/* One the kernel will refuse holds nothing: an append is made at
	 * the tail without moving it (the kernel refuses it at submission
	 * or at completion, and appends claimed meanwhile must not be left
	 * past a hole). */
	if (append)
		tail = tail_of(atomic_load(&f->seg->tail));
	if (wtx_refused(f, flags & O_DIRECT, append ? tail : off, len,
			sp->base_or, sp->len_or)) {
		how |= WTX_REFUSED;
		/* Made at the very tail that decided it: there, the kernel
		 * refuses it, wherever the tail has moved since. */
		if (append)
			off = tail;
	}
	a = aop_claim(b, r, f, fd, key, append ? WTX_APPEND : WTX_AT, off,
		      len, how);
	if (!a)
		return NULL;
	if ((flags & O_DSYNC) || (rwf & (RWF_DSYNC | RWF_SYNC)))
		sync_note(f->seg);
	/* Inside the reservation a trim could cut it while in flight; past
	 * it, the kernel extends the size itself. */
	if (a->t.end <= atomic_load(&f->seg->phys))
		word_max(&f->seg->async_end, a->t.end);
	*append_out = append;
	return a;
}

/* A request the kernel never took: undo what prepare_write did. */
static void unprepare(struct aring *r, struct aop *a)
{
	struct aop *p, *prev = NULL;

	for (p = r->ops; p && p != a; prev = p, p = p->next)
		;
	if (!p)
		return;
	aop_unlink(r, prev, a);
	aop_finish(a, -ECANCELED);
}

/* fsync or fdatasync queued for fd: the record must be able to find the
 * size being made durable first; a stale record turns fdatasync into
 * fsync (ext4's fdatasync leaves an xattr change behind).  True if the
 * request must become a full fsync. */
static bool prepare_sync(int fd, bool datasync)
{
	struct ofd *o = shim_served(fd);
	struct shim_file *f = o ? atomic_load(&o->file) : NULL;

	if (!f || f->slot < 0)
		return false;
	sync_note(f->seg);
	if (!record_stale(f->seg))
		return false;
	return record_refresh(f, fd) && datasync;
}

/* ---- libaio -------------------------------------------------------------- */

/* The program's arrays (iocb pointers, iovecs) are read in chunks of
 * this many: a few hundred bytes of stack (hot.c). */
#define COPY_CHUNK 16

/* The chunk of iocbs[0, nr) from base: *n pointers asked for, into ptr;
 * returns how many of them could be read (the kernel takes those and
 * stops at the first it cannot). */
static long iocb_chunk(struct iocb **ptr, struct iocb **iocbs, long base,
		       long nr, long *n)
{
	*n = nr - base < COPY_CHUNK ? nr - base : COPY_CHUNK;
	return (long)(umem_read(ptr, iocbs + base, (size_t)*n * sizeof(*ptr)) /
		      sizeof(*ptr));
}

/* The span of an iovec array; false when the kernel will refuse it (it
 * then answers for itself). */
static bool iov_sum(const struct iovec *iov, long cnt, struct span *sp)
{
	struct iovec v[COPY_CHUNK];
	uint64_t sum = 0;
	long i;

	if (cnt <= 0 || cnt > IOV_MAX)
		return false;
	sp->base_or = sp->len_or = 0;
	for (i = 0; i < cnt; i++) {
		const struct iovec *e = &v[i % COPY_CHUNK];

		if (i % COPY_CHUNK == 0 &&
		    !copy_in(v, iov + i,
			     (size_t)(cnt - i < COPY_CHUNK ? cnt - i
							   : COPY_CHUNK) *
				     sizeof(*v)))
			return false;
		if (e->iov_len > (size_t)SSIZE_MAX - sum)
			return false;
		sum += e->iov_len;
		if (e->iov_len) { /* the kernel skips an empty one */
			sp->base_or |= (uintptr_t)e->iov_base;
			sp->len_or |= e->iov_len;
		}
	}
	sp->len = sum;
	return true;
}

/* The span of one buffer. */
static bool buf_span(uint64_t base, uint64_t len, struct span *sp)
{
	*sp = (struct span){ .len = len, .base_or = base, .len_or = len };
	return true;
}

static bool aio_is_write(const struct iocb *io)
{
	return io->aio_lio_opcode == IO_CMD_PWRITE ||
	       io->aio_lio_opcode == IO_CMD_PWRITEV;
}

static bool aio_span(const struct iocb *io, struct span *sp)
{
	if (io->aio_lio_opcode == IO_CMD_PWRITE)
		return buf_span((uintptr_t)io->u.c.buf, io->u.c.nbytes, sp);
	return iov_sum(io->u.v.vec, io->u.v.nr, sp);
}

/*
 * What the shim writes in an iocb — an append's offset from the tail,
 * made positional with RWF_NOAPPEND; fdatasync made fsync when the EOF
 * record must reach the disk — it writes before the kernel reads it, and
 * leaves there: from that moment the application may reap it and reuse
 * the iocb, and any later store would land in its next request.  A mark
 * per appending iocb keeps what the application had written; when the
 * iocb comes back with the shim's RWF_NOAPPEND still in it (not prepared
 * anew), io_submit takes it out (RWF_APPEND back, if it was there), and
 * gives back the offset unless the application changed it, before
 * anything else looks.  An fsync left
 * for an fdatasync stays one (a stronger sync).  Under async_lock.
 */
struct aio_mark {
	uintptr_t iocb; /* 0: free */
	long long off, app_off;
	unsigned flags, app_flags;
	short app_opcode; /* aio_submit_some's own copy only */
};

#define AIO_MARKS 65536u
static struct aio_mark *aio_marks;
static _Atomic bool aio_marked; /* a mark was ever made */

static struct aio_mark *aio_mark_slot(const struct iocb *io, bool make)
{
	uintptr_t key = (uintptr_t)io;
	size_t h = (size_t)((key >> 5) * 0x9e3779b97f4a7c15ull) % AIO_MARKS;
	size_t i;

	if (!aio_marks && !(make && (aio_marks = mem_alloc(
					       AIO_MARKS * sizeof(*aio_marks)))))
		return NULL;
	for (i = 0; i < 8; i++)
		if (aio_marks[(h + i) % AIO_MARKS].iocb == key)
			return &aio_marks[(h + i) % AIO_MARKS];
	for (i = 0; make && i < 8; i++)
		if (!aio_marks[(h + i) % AIO_MARKS].iocb)
			return &aio_marks[(h + i) % AIO_MARKS];
	if (!make)
		return NULL;
	log_once("more than %u iocbs rewritten: an unchanged one submitted "
		 "again may keep the shim's offset", AIO_MARKS);
	return &aio_marks[h];
}

/* io was rewritten from app (its offset, flags and opcode): mark it. */
static void aio_mark(struct iocb *io, const struct aio_mark *app)
{
	struct aio_mark *m = aio_mark_slot(io, true);

	if (!m)
		return;
	m->iocb = (uintptr_t)io;
	m->off = io->u.c.offset;
	m->flags = io->aio_rw_flags;
	m->app_off = app->app_off;
	m->app_flags = app->app_flags;
	atomic_store_explicit(&aio_marked, true, memory_order_relaxed);
}

/* Give every marked iocb of iocbs[0, nr) its application fields back
 * where the shim's are still there; readable ones only (the kernel
 * answers EFAULT for the rest). */
static void aio_unmark(long nr, struct iocb **iocbs)
{
	struct iocb *ptr[COPY_CHUNK];
	int busy = io_busy;
	long base, i, n, got;

	io_busy = 1;
	pthread_mutex_lock(&async_lock);
	for (base = 0; base < nr; base += n) {
		got = iocb_chunk(ptr, iocbs, base, nr, &n);
		for (i = 0; i < got; i++) {
			struct aio_mark *m = aio_mark_slot(ptr[i], false);
			struct iocb *io = ptr[i], seen;

			/* Not there any more: the kernel answers EFAULT. */
			if (!m || !copy_in(&seen, io, sizeof(seen)) ||
			    !umem_writable(io, sizeof(seen)))
				continue;
			/* The shim's RWF_NOAPPEND still there: the
			 * application did not prepare it anew (nor would it
			 * set RWF_NOAPPEND on an iocb it appends with); any
			 * other flag it added stays. */
			if (seen.aio_rw_flags & RWF_NOAPPEND) {
				io->aio_rw_flags = (seen.aio_rw_flags &
						    ~RWF_NOAPPEND) |
						   (m->app_flags & RWF_APPEND_);
				if (seen.u.c.offset == m->off)
					io->u.c.offset = m->app_off;
			}
			m->iocb = 0;
		}
		if (got < n)
			break;
	}
	pthread_mutex_unlock(&async_lock);
	io_busy = busy;
}

/*
 * Direct reads submitted across a logical end they could not be cut at
 * (queued_read_len): the count the kernel reports is cut when the event
 * is reaped through io_getevents or io_pgetevents, as pread's is.  An
 * event the program takes from the ring itself keeps the kernel's count
 * (a gap: the reserved tail's zeros).  Under async_lock.
 */
#define READ_CLAMPS 64
static struct read_clamp {
	uintptr_t iocb; /* 0: free */
	uintptr_t ctx;
	/* the request as submitted: an event applies only while the iocb
	 * still says so (an iocb reused for another request, whose own
	 * event the shim never saw, is not cut) */
	int fd;
	short opcode;
	long long off;
	int64_t max;
} read_clamps[READ_CLAMPS];
static _Atomic int read_clamps_n;

static void read_clamp_add(io_context_t ctx, const struct iocb *io,
			   struct ofd *o)
{
	struct shim_file *f = atomic_load_explicit(&o->file,
						   memory_order_acquire);
	uint64_t eof = atomic_load_explicit(&f->seg->eof, memory_order_acquire);
	int i;

	for (i = 0; i < READ_CLAMPS; i++)
		if (!read_clamps[i].iocb) {
			read_clamps[i] = (struct read_clamp){
				.iocb = (uintptr_t)io,
				.ctx = (uintptr_t)ctx,
				.fd = io->aio_fildes,
				.opcode = io->aio_lio_opcode,
				.off = io->u.c.offset,
				.max = (uint64_t)io->u.c.offset >= eof
					       ? 0
					       : (int64_t)(eof -
						  (uint64_t)io->u.c.offset)
			};
			atomic_fetch_add(&read_clamps_n, 1);
			return;
		}
	log_once("more than %d reads across the end that could not be cut "
		 "in flight: the rest keep the kernel's count", READ_CLAMPS);
}

/* Clamps of io (submitted anew: its last request was done, whoever
 * reaped it; or not taken), or, io NULL, of every iocb of ctx (a context
 * destroyed): none may apply any more.  Under async_lock. */
static void read_clamp_drop(io_context_t ctx, const struct iocb *io)
{
	int j;

	if (!atomic_load(&read_clamps_n))
		return;
	for (j = 0; j < READ_CLAMPS; j++)
		if (read_clamps[j].iocb &&
		    (io ? read_clamps[j].iocb == (uintptr_t)io
			: read_clamps[j].ctx == (uintptr_t)ctx)) {
			read_clamps[j].iocb = 0;
			atomic_fetch_sub(&read_clamps_n, 1);
		}
}

/* The events just reaped from ctx: the clamped reads' counts cut. */
static void read_clamp_apply(io_context_t ctx, struct io_event *ev, int n)
{
	struct iocb now;
	int i, j;

	if (n <= 0 || !atomic_load(&read_clamps_n))
		return;
	pthread_mutex_lock(&async_lock);
	for (i = 0; i < n; i++)
		for (j = 0; j < READ_CLAMPS; j++) {
			struct read_clamp *c = &read_clamps[j];

			if (!c->iocb || c->iocb != (uintptr_t)ev[i].obj ||
			    c->ctx != (uintptr_t)ctx)
				continue;
			if (copy_in(&now, ev[i].obj, sizeof(now)) &&
			    now.aio_fildes == c->fd &&
			    now.aio_lio_opcode == c->opcode &&
			    now.u.c.offset == c->off &&
			    (int64_t)ev[i].res > c->max)
				ev[i].res = (unsigned long)c->max;
			c->iocb = 0;
			atomic_fetch_sub(&read_clamps_n, 1);
			break;
		}
	pthread_mutex_unlock(&async_lock);
}

/* Clamps of iocbs[0, nr), submitted on a path that keeps no books: they
 * are new requests (readable ones only; the kernel answers the rest). */
static void read_clamp_drop_all(long nr, struct iocb **iocbs)
{
	struct iocb *ptr[COPY_CHUNK];
	long base, i, n, got;

	pthread_mutex_lock(&async_lock);
	for (base = 0; base < nr; base += n) {
		got = iocb_chunk(ptr, iocbs, base, nr, &n);
		for (i = 0; i < got; i++)
			read_clamp_drop(NULL, ptr[i]);
		if (got < n)
			break;
	}
	pthread_mutex_unlock(&async_lock);
}

/* What aio_submit_some keeps of each iocb until the kernel has it. */
struct submitted {
	struct aio_mark app; /* the application's fields */
	unsigned long nbytes; /* a read's length before its cut */
	struct aop *op;
};

/*
 * Take async_lock to enter writes.  An exec, or the process's end, drains
 * the rings under it (async_drain_all) and then leaves the files: a
 * submission that took it after the drain would enter a write behind
 * their back.  It waits for the exec instead, and for good once the
 * process ends.
 */
static void lock_to_submit(void)
{
	for (;;) {
		pthread_mutex_lock(&async_lock);
		if (!sealed && !__atomic_load_n(&segment_exec_pending,
						__ATOMIC_ACQUIRE))
			return;
		pthread_mutex_unlock(&async_lock);
		if (sealed)
			sys_wait_for_the_end();
		segment_exec_wait();
	}
}

/*
 * Submit iocbs[0, n), at most 64 of them: the shim's part.  Its record
 * of them is as long as the batch (most are one or two requests), so
 * that the frame, and the calls below it, stay on the pages of stack the
 * program touches anyway (hot.c).
 */
static int aio_submit_some(io_context_t ctx, long n, struct iocb **iocbs)
{
	long i, take = n < 64 ? n : 64;
	struct submitted e[take];
	struct aring *r;
	struct batch b;
	int ret;

	batch_begin(&b);
	lock_to_submit();
	r = ring_get(RING_AIO, (uintptr_t)ctx);
	if (r)
		ring_scan(r);
	for (i = 0; i < take; i++) {
		struct iocb *io = iocbs[i];
		struct span sp;
		bool append;

		e[i].op = NULL;
		e[i].app.iocb = 0;
		e[i].app.app_off = io->u.c.offset;
		e[i].app.app_flags = io->aio_rw_flags;
		e[i].app.app_opcode = io->aio_lio_opcode;
		e[i].nbytes = io->u.c.nbytes;
		read_clamp_drop(ctx, io);
		if (!r)
			continue;
		/* Its length cut, and left so: the kernel copies it at
		 * submission, the iocb is the application's again once
		 * reaped (it reads its own length back cut). */
		if (io->aio_lio_opcode == IO_CMD_PREAD) {
			struct ofd *uncut;

			if (io->u.c.offset < 0)
				continue;
			io->u.c.nbytes = queued_read_len(
				io->aio_fildes, (uint64_t)io->u.c.offset,
				io->u.c.nbytes, false, &uncut);
			if (uncut)
				read_clamp_add(ctx, io, uncut);
			continue;
		}
		if (io->aio_lio_opcode == IO_CMD_PREADV) {
			struct ofd *uncut;
			struct span sp;

			if (io->u.v.offset >= 0 &&
			    iov_sum(io->u.v.vec, io->u.v.nr, &sp)) {
				queued_read_len(io->aio_fildes,
						(uint64_t)io->u.v.offset,
						sp.len, true, &uncut);
				if (uncut)
					read_clamp_add(ctx, io, uncut);
			}
			continue;
		}
		if (io->aio_lio_opcode == IO_CMD_FSYNC ||
		    io->aio_lio_opcode == IO_CMD_FDSYNC) {
			if (prepare_sync(io->aio_fildes, io->aio_lio_opcode ==
								 IO_CMD_FDSYNC)) {
				/* left so: submitted again, a stronger sync */
				io->aio_lio_opcode = IO_CMD_FSYNC;
				e[i].app.iocb = (uintptr_t)io;
			}
			continue;
		}
		if (!aio_is_write(io) || !aio_span(io, &sp) ||
		    (!(io->aio_rw_flags & RWF_APPEND_) &&
		     io->u.c.offset < 0))
			continue;
		e[i].op = prepare_write(&b, r, io->aio_fildes,
					(uint64_t)(uintptr_t)io,
					(uint64_t)io->u.c.offset, &sp,
					(int)io->aio_rw_flags, 0, &append);
		/* No memory for one more file: submit the requests before
		 * this one, untouched, and this one in the next round (it
		 * holds at least the four files a batch keeps inline). */
		if (!e[i].op && b.full) {
			take = i;
			break;
		}
		if (e[i].op && append) {
			io->u.c.offset = (long long)e[i].op->t.off;
			io->aio_rw_flags = (io->aio_rw_flags & ~RWF_APPEND_) |
					   RWF_NOAPPEND;
			e[i].app.iocb = (uintptr_t)io;
			aio_mark(io, &e[i].app);
		}
	}
	pthread_mutex_unlock(&async_lock);

	ret = lazy_io_submit()(ctx, take, iocbs);

	/* All taken, as most are: nothing to give back, and async_lock is
	 * not taken again while the batch holds a file's ext_lock (an exact
	 * write): another thread preparing under async_lock may be waiting
	 * for that ext_lock. */
	if (ret == take) {
		batch_end(&b);
		return (int)(take << 16 | ret);
	}
	/* Taken in part.  The appends the kernel did not take give their
	 * ranges back first, the last first, while the batch still holds the
	 * ext_lock of the exact ones (nobody claims past them meanwhile);
	 * then the batch lets go of the files, and only then is async_lock
	 * taken again to undo the rest: another thread preparing under it
	 * may be waiting for that ext_lock. */
	for (i = take - 1; i >= (ret > 0 ? ret : 0); i--)
		if (e[i].op)
			wtx_unclaim(&e[i].op->t);
	batch_release(&b);
	pthread_mutex_lock(&async_lock);
	/* What the kernel did not take is still the application's alone,
	 * and unseen by it: give it back as it was, the last first (each
	 * append's range back to the tail, which then ends where the taken
	 * ones do).  The rest stays as the kernel read it (the marks). */
	for (i = take - 1; i >= (ret > 0 ? ret : 0); i--) {
		struct iocb *io = iocbs[i];

		io->u.c.nbytes = e[i].nbytes;
		read_clamp_drop(ctx, io);
		if (e[i].app.iocb) {
			struct aio_mark *m = aio_mark_slot(io, false);

			io->u.c.offset = e[i].app.app_off;
			io->aio_rw_flags = e[i].app.app_flags;
			io->aio_lio_opcode = e[i].app.app_opcode;
			if (m)
				m->iocb = 0;
		}
		if (e[i].op)
			unprepare(r, e[i].op);
	}
	pthread_mutex_unlock(&async_lock);
	batch_end(&b);
	return ret < 0 ? ret : (int)(take << 16 | ret);
}

/* How many of iocbs[0, nr) the kernel can read, the array and the iocbs
 * (it takes those and stops at the first it cannot: EFAULT if none), and
 * whether one of those writes to or syncs a file the shim may serve. */
static long aio_readable(long nr, struct iocb **iocbs, bool *any)
{
	struct iocb *ptr[COPY_CHUNK], io;
	long base, i, n, got;

	*any = false;
	for (base = 0; base < nr; base += n) {
		got = iocb_chunk(ptr, iocbs, base, nr, &n);
		for (i = 0; i < got; i++) {
			/* The kernel reads each iocb, then stores its key
			 * in it: one it cannot write is its EFAULT too. */
			if (!umem_writable(ptr[i], sizeof(io)))
				return base + i;
			memcpy(&io, ptr[i], sizeof(io));
			/* A queued write to a lone writer's file: others may
			 * follow it before it completes. */
			if (aio_is_write(&io))
				fdtable_engage_fd(io.aio_fildes);
			*any = *any || ((aio_is_write(&io) ||
					 io.aio_lio_opcode == IO_CMD_FSYNC ||
					 io.aio_lio_opcode == IO_CMD_FDSYNC ||
					 io.aio_lio_opcode == IO_CMD_PREAD ||
					 io.aio_lio_opcode == IO_CMD_PREADV) &&
					!fdtable_surely_pass(io.aio_fildes));
		}
		if (got < n)
			return base + got;
	}
	return nr;
}

/*
 * A submission made while this thread runs the shim's own code — from a
 * signal handler that interrupted it, where a lock the shim holds may be
 * the one a submission needs — cannot be tracked, and an untracked write
 * to a served file lands past its reserved tail.  If it has anything for
 * the shim (a write, a sync or a read of a file the shim may serve, or a
 * read clamp pending), it is answered as the kernel answers a submission
 * it has no resources for: EAGAIN, nothing submitted; the program tries
 * again (outside the handler, or once the shim has let go).  Read without
 * a lock: the program's arrays through umem, the descriptor table's
 * entries as they are.
 */
/* Whether fd may be a file the shim serves, told from its entry alone
 * (no lock, no system call): not for one it passes, a quiet one, or one
 * it never saw while nothing anywhere is served. */
static bool nested_may_serve(int fd)
{
	struct ofd *o = fdtable_peek(fd);

	if (!o)
		return !hint_surely_dead() || fdtable_guests();
	return !fdtable_quiet(fd);
}

static bool aio_nested_refused(long nr, struct iocb **iocbs)
{
	struct iocb *ptr[COPY_CHUNK], io;
	long base, i, n, got;

	if (atomic_load(&read_clamps_n))
		return true;
	for (base = 0; base < nr; base += n) {
		got = iocb_chunk(ptr, iocbs, base, nr, &n);
		for (i = 0; i < got; i++) {
			if (umem_read(&io, ptr[i], sizeof(io)) != sizeof(io))
				return false; /* the kernel stops there */
			if ((aio_is_write(&io) ||
			     io.aio_lio_opcode == IO_CMD_FSYNC ||
			     io.aio_lio_opcode == IO_CMD_FDSYNC ||
			     io.aio_lio_opcode == IO_CMD_PREAD ||
			     io.aio_lio_opcode == IO_CMD_PREADV) &&
			    nested_may_serve(io.aio_fildes))
				return true;
		}
		if (got < n)
			return false;
	}
	return false;
}

EXPORT int io_submit(io_context_t ctx, long nr, struct iocb *iocbs[])
{
	long done = 0;
	bool any = false;

	if (nr > 0 && shim_nested() && aio_nested_refused(nr, iocbs)) {
		log_once("a libaio submission from a signal handler inside "
			 "the shim: EAGAIN");
		return -EAGAIN;
	}

	/* The application's own fields first, whatever follows. */
	if (nr > 0 && atomic_load_explicit(&aio_marked, memory_order_relaxed) &&
	    shim_active())
		aio_unmark(nr, iocbs);
	/* Arguments the kernel refuses (EINVAL, EFAULT) are its to refuse;
	 * a batch with nothing for the shim goes straight through.  One it
	 * cannot read all of it takes up to the first it cannot: so does the
	 * shim, and the rest is not submitted (the kernel's count). */
	if (nr > 0 && shim_active() &&
	    (!hint_surely_dead() || fdtable_guests())) {
		long readable = aio_readable(nr, iocbs, &any);

		if (readable && any)
			nr = readable;
	}
	if (!any) {
		if (atomic_load(&async_pending))
			async_poll_slow();
		if (nr > 0 && atomic_load(&read_clamps_n))
			read_clamp_drop_all(nr, iocbs);
		return lazy_io_submit()(ctx, nr, iocbs);
	}
	while (done < nr) {
		int r = aio_submit_some(ctx, nr - done, iocbs + done);
		long taken, accepted;

		if (r < 0)
			return done ? (int)done : r;
		taken = r >> 16;
		accepted = r & 0xffff;
		done += accepted;
		if (accepted < taken)
			break;
	}
	return (int)done;
}

/* After a reap: apply what the kernel posted. */
static void aio_after_reap(void)
{
	if (atomic_load(&async_pending))
		async_poll_slow();
}

EXPORT int io_getevents(io_context_t ctx, long min_nr, long nr,
			struct io_event *events, struct timespec *timeout)
{
	int ret = lazy_io_getevents()(ctx, min_nr, nr, events, timeout);
	int saved = errno;

	read_clamp_apply(ctx, events, ret);
	aio_after_reap();
	errno = saved;
	return ret;
}

EXPORT int io_pgetevents(io_context_t ctx, long min_nr, long nr,
			 struct io_event *events, struct timespec *timeout,
			 sigset_t *sigset)
{
	int ret = lazy_io_pgetevents()(ctx, min_nr, nr, events, timeout,
				       sigset);
	int saved = errno;

	read_clamp_apply(ctx, events, ret);
	aio_after_reap();
	errno = saved;
	return ret;
}

EXPORT int io_cancel(io_context_t ctx, struct iocb *iocb,
		     struct io_event *evt)
{
	int ret = lazy_io_cancel()(ctx, iocb, evt);
	int saved = errno;

	aio_after_reap();
	errno = saved;
	return ret;
}

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

static void ring_drop(enum ring_kind kind, uintptr_t handle);

EXPORT int io_destroy(io_context_t ctx)
{
	int r;

	ring_drop(RING_AIO, (uintptr_t)ctx);
	if (atomic_load(&read_clamps_n)) {
		pthread_mutex_lock(&async_lock);
		read_clamp_drop(ctx, NULL);
		pthread_mutex_unlock(&async_lock);
	}
	r = lazy_io_destroy()(ctx);
	/* The kernel unmapped the ring (umem.c). */
	umem_changed();
	return r;
}

/* ---- liburing ------------------------------------------------------------ */

static struct io_uring_sqe *uring_sqe(struct io_uring *ring, unsigned i)
{
	unsigned shift = (ring->flags & IORING_SETUP_SQE128) ? 1 : 0;

	return &ring->sq.sqes[(i & *ring->sq.kring_mask) << shift];
}

/*
 * The first entry a submission's preparation looks at: the kernel's head
 * when the last submission left entries queued, their preparation undone
 * (r->leftovers: liburing has handed them to the kernel already, and
 * submits them again with the new ones), else liburing's.  r NULL: the
 * calls before the batch, which leave the entries as they are where they
 * already looked.
 */
static unsigned uring_first(struct io_uring *ring, const struct aring *r)
{
	unsigned kh = __atomic_load_n(ring->sq.khead, __ATOMIC_ACQUIRE);
	unsigned behind = ring->sq.sqe_head - kh;

	if ((!r || r->leftovers) && behind &&
	    behind <= *ring->sq.kring_entries)
		return kh;
	return ring->sq.sqe_head;
}

static bool uring_is_write(uint8_t op)
{
	return op == IORING_OP_WRITE || op == IORING_OP_WRITEV ||
	       op == IORING_OP_WRITE_FIXED;
}

static bool uring_is_read(uint8_t op)
{
	return op == IORING_OP_READ || op == IORING_OP_READ_FIXED ||
	       op == IORING_OP_READV;
}

/* The fd an SQE's request works on (a registered file's own fd). */
static int uring_fd(struct aring *r, const struct io_uring_sqe *s)
{
	if (!(s->flags & IOSQE_FIXED_FILE))
		return s->fd;
	if (!r || s->fd < 0 || (unsigned)s->fd >= r->nfiles)
		return -1;
	return r->files[s->fd];
}

static bool uring_span(const struct io_uring_sqe *s, struct span *sp)
{
	if (s->opcode != IORING_OP_WRITEV)
		return buf_span(s->addr, s->len, sp);
	return iov_sum((const struct iovec *)(uintptr_t)s->addr, (long)s->len,
		       sp);
}

/* Whether any queued entry may be the shim's: no lock, so a program
 * that queues only other work (sockets, reads) never takes one here. */
static bool uring_any_served(struct io_uring *ring)
{
	unsigned i;

	/* A queued write to a lone writer's file: others may follow it
	 * before it completes (registered files are at registration). */
	for (i = uring_first(ring, NULL); i != ring->sq.sqe_tail; i++) {
		const struct io_uring_sqe *s = uring_sqe(ring, i);

		if (uring_is_write(s->opcode) && !(s->flags & IOSQE_FIXED_FILE))
			fdtable_engage_fd(s->fd);
	}
	for (i = uring_first(ring, NULL); i != ring->sq.sqe_tail; i++) {
		const struct io_uring_sqe *s = uring_sqe(ring, i);
		uint8_t op = s->opcode;

		if (!uring_is_write(op) && op != IORING_OP_FSYNC &&
		    op != IORING_OP_FALLOCATE &&
		    !(uring_is_read(op) && !hint_surely_dead()))
			continue;
		/* a registered file: its fd is known under the lock */
		if ((s->flags & IOSQE_FIXED_FILE) ||
		    !fdtable_surely_pass(s->fd))
			return true;
	}
	return false;
}

/* A queued fallocate growing the size: like a write with no data. */
static struct aop *prepare_fallocate(struct batch *b, struct aring *r,
				     struct io_uring_sqe *s, int fd)
{
	struct ofd *o;
	struct shim_file *f = served_writer(fd, &o);
	uint64_t off = s->off, len = s->addr, end;
	int mode = (int)s->len;
	struct aop *a;

	if (!f || !len || off > (uint64_t)INT64_MAX - len)
		return NULL;
	end = off + len;
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		prefill_forget(f, off, len);
		return NULL;
	}
	if ((mode & ~FALLOC_FL_ZERO_RANGE) != 0 ||
	    end <= atomic_load(&f->seg->eof))
		return NULL; /* no size the application sees changes */
	a = aop_claim(b, r, f, fd, s->user_data, WTX_GROW, off, len, 0);
	if (a && a->t.res == RESERVE_OK)
		s->len |= FALLOC_FL_KEEP_SIZE; /* inside the reservation */
	return a;
}

/*
 * Before the real submit: rewrite and track the queued entries
 * [sqe_head, sqe_tail), which the kernel sees only when the submit call
 * publishes them.  A write whose completion is skipped on success
 * (IOSQE_CQE_SKIP_SUCCESS) was made by uring_write_skipped, unless it is
 * inside a chain: that one is taken as done at submission.
 */
/* The op a batch made of entry s, noted with the entry as the program
 * made it (uring_leftovers puts it back). */
static void aop_of_sqe(struct aop *a, const struct batch *b,
		       struct io_uring_sqe *s, uint64_t off, uint32_t flags,
		       uint32_t len)
{
	a->sqe = s;
	a->app_off = off;
	a->app_flags = flags;
	a->app_len = len;
	a->batch = b->seq;
}

static void uring_prepare(struct batch *b, struct io_uring *ring,
			  struct aring *r)
{
	bool link = false; /* the entry before was linked to the next */
	unsigned i;

	for (i = uring_first(ring, r); i != ring->sq.sqe_tail; i++) {
		struct io_uring_sqe *s = uring_sqe(ring, i);
		uint64_t app_off = s->off;
		uint32_t app_flags = s->rw_flags, app_len = s->len;
		bool linked = link;
		struct span sp;
		bool append;
		struct aop *a;
		int fd = uring_fd(r, s);

		link = s->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK);
		if (fd < 0)
			continue;
		if (s->opcode == IORING_OP_FSYNC) {
			if (prepare_sync(fd, s->fsync_flags &
						     IORING_FSYNC_DATASYNC))
				s->fsync_flags &= ~IORING_FSYNC_DATASYNC;
			continue;
		}
		if (s->opcode == IORING_OP_FALLOCATE) {
			a = prepare_fallocate(b, r, s, fd);
			if (a)
				aop_of_sqe(a, b, s, app_off, app_flags,
					   app_len);
			continue;
		}
		if (uring_is_read(s->opcode)) {
			/* (a READV's len counts its iovecs: uring_read_now) */
			if (s->opcode != IORING_OP_READV)
				s->len = (__u32)queued_read_len(
					fd, s->off, s->len, false, NULL);
			continue;
		}
		if (!uring_is_write(s->opcode) || !uring_span(s, &sp))
			continue;
		/* off -1: the file position, which the shim does not follow
		 * for io_uring; only an append ignores it */
		/* Behind a link, it may be cancelled (-ECANCELED): it holds
		 * nothing an append could be left past. */
		a = prepare_write(b, r, fd, s->user_data, s->off, &sp,
				  (int)s->rw_flags, linked ? WTX_NOHOLD : 0,
				  &append);
		if (!a)
			continue;
		aop_of_sqe(a, b, s, app_off, app_flags, app_len);
		if (append) {
			s->off = a->t.off;
			s->rw_flags = (s->rw_flags & ~RWF_APPEND_) |
				      RWF_NOAPPEND;
		}
		if (s->flags & IOSQE_CQE_SKIP_SUCCESS) {
			/* in a chain (uring_write_skipped): nothing will
			 * say when it is done */
			struct aop *p, *prev = NULL;

			log_once("a write that skips its completion goes as "
				 "before: its size is taken at submission");

			for (p = r->ops; p != a; prev = p, p = p->next)
				;
			aop_unlink(r, prev, a);
			aop_finish(a, aop_whole(a));
		}
	}
}

#ifndef IORING_NOP_INJECT_RESULT
#define IORING_NOP_INJECT_RESULT (1U << 0)
#endif

/* Whether the kernel's NOP can give a result of our choosing (Linux
 * 6.10): else it would answer EINVAL for a write that was made. */
static bool nop_injects(void)
{
	static int known; /* 0 unknown, 1 yes, 2 no */
	struct utsname u;
	unsigned long maj, min;
	char *end;

	if (!known) {
		known = 2;
		if (uname(&u) == 0) {
			maj = strtoul(u.release, &end, 10);
			min = *end == '.' ? strtoul(end + 1, NULL, 10) : 0;
			if (maj > 6 || (maj == 6 && min >= 10))
				known = 1;
		}
	}
	return known == 1;
}

/*
 * A write whose completion is skipped on success (IOSQE_CQE_SKIP_SUCCESS)
 * never says when it is done, so no size could follow it.  It is made
 * here, through the shim's own write path, before the queue goes to the
 * kernel (the unlinked entries of one submission run in any order), and
 * its entry becomes a NOP that gives the write's result: nothing when it
 * succeeded, the same completion when it failed, the same broken chain
 * when it heads one (a short one completes: the kernel posts a short
 * write whatever the flag).  Outside any batch: the write may raise a
 * barrier.  An entry inside a chain, at or after a drain, not a plain
 * write (uring_plain_write), or an append behind asynchronous writes in
 * flight cannot go ahead: uring_prepare takes it as done at submission
 * (log_once), as before.  Known gap: a short write heading a chain does
 * not break it.
 */
/* Whether the kernel would take s as the plain write the shim makes of
 * it: the shim's write is made before the kernel checks the entry, so
 * anything the kernel may refuse or do otherwise — another personality,
 * a priority, a registered file or buffer (whose slot the shim may not
 * know as the kernel does), integrity metadata, polled completion — keeps
 * the entry as it is. */
static bool uring_plain_write(const struct io_uring *ring,
			      const struct io_uring_sqe *s)
{
	return (s->opcode == IORING_OP_WRITE ||
		s->opcode == IORING_OP_WRITEV) &&
	       !(s->flags & (IOSQE_FIXED_FILE | IOSQE_BUFFER_SELECT)) &&
	       !s->personality && !s->ioprio && !s->buf_index &&
	       !s->splice_fd_in && !s->addr3 && !s->__pad2[0] &&
	       !(ring->flags & IORING_SETUP_IOPOLL);
}

/* s made by the shim already, with result ret: the entry becomes a NOP
 * that gives it. */
static void sqe_done(struct io_uring_sqe *s, ssize_t ret)
{
	s->opcode = IORING_OP_NOP;
	s->fd = -1;
	s->off = 0;
	s->addr = 0;
	s->ioprio = 0; /* a NOP takes none */
	s->rw_flags = IORING_NOP_INJECT_RESULT;
	s->len = (__u32)(int32_t)ret;
	s->buf_index = 0;
}

static void uring_write_skipped(struct io_uring *ring)
{
	bool chained = false, drained = false;
	unsigned i;

	for (i = uring_first(ring, NULL); i != ring->sq.sqe_tail; i++) {
		struct io_uring_sqe *s = uring_sqe(ring, i);
		bool inside = chained;
		struct iovec one;
		struct io_req req;
		struct ofd *o = NULL;
		struct shim_file *f;
		int fd, busy, saved;
		struct span sp;
		ssize_t ret;

		chained = s->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK);
		/* Nothing after a drain may start before it is done. */
		drained |= s->flags & IOSQE_IO_DRAIN;
		if (!(s->flags & IOSQE_CQE_SKIP_SUCCESS) || inside || drained ||
		    !uring_plain_write(ring, s) || !uring_span(s, &sp) ||
		    !nop_injects())
			continue;
		busy = io_busy;
		io_busy = 1;
		f = served_writer(s->fd, &o);
		io_busy = busy;
		fd = s->fd;
		/* An append behind one of the rings' still in flight would
		 * wait for its publication, which only a reap brings: the
		 * kernel alone just queues it. */
		if (!f || (write_appends(atomic_load_explicit(
						 &o->flags, memory_order_relaxed),
					 (int)s->rw_flags) &&
			   async_in_flight(f->seg)))
			continue;
		req.kind = IO_PV2;
		req.fd = fd;
		req.off = (off_t)s->off;
		req.rwf = (int)s->rw_flags;
		if (s->opcode == IORING_OP_WRITEV) {
			req.iov = (const struct iovec *)(uintptr_t)s->addr;
			req.iovcnt = (int)s->len;
		} else {
			one.iov_base = (void *)(uintptr_t)s->addr;
			one.iov_len = s->len;
			req.iov = &one;
			req.iovcnt = 1;
		}
		saved = errno;
		ret = io_write(o, &req, false);
		if (ret < 0)
			ret = -errno;
		errno = saved;
		/* A short write completes even when success is skipped. */
		if (ret >= 0 && (uint64_t)ret < sp.len)
			s->flags &= (__u8)~IOSQE_CQE_SKIP_SUCCESS;
		sqe_done(s, ret);
	}
}

/*
 * A read across a logical end the kernel cannot be asked to stop at (a
 * direct one whose cut would break its alignment, a READV): read now, as
 * pread and preadv read (the count cut at the end), and the entry made a
 * NOP that gives that result (Linux 6.10).  Only an entry that may start
 * at once: not behind a link or a drain.
 */
static void uring_read_now(struct io_uring *ring)
{
	bool chained = false, drained = false;
	unsigned i;

	for (i = uring_first(ring, NULL); i != ring->sq.sqe_tail; i++) {
		struct io_uring_sqe *s = uring_sqe(ring, i);
		bool inside = chained;
		struct io_req req;
		struct span sp;
		struct ofd *o;
		ssize_t ret;
		int fd = s->fd, saved, busy;
		bool vec;

		chained = s->flags & (IOSQE_IO_LINK | IOSQE_IO_HARDLINK);
		drained |= s->flags & IOSQE_IO_DRAIN;
		/* Not in a chain (a short read breaks it, a NOP's result
		 * does not), nor a registered file's (its fd is the ring's
		 * to say, under the lock). */
		/* Nor one the kernel may refuse or treat otherwise (a
		 * personality, flags such as RWF_NOWAIT, a polled ring): it
		 * goes whole.  A priority is the I/O's, not the result's:
		 * the NOP takes none (sqe_done). */
		if (!uring_is_read(s->opcode) || inside || chained || drained ||
		    (s->flags & (IOSQE_BUFFER_SELECT | IOSQE_FIXED_FILE)) ||
		    s->off == UINT64_MAX || fd < 0 ||
		    s->personality || s->rw_flags || s->addr3 ||
		    s->__pad2[0] || (ring->flags & IORING_SETUP_IOPOLL))
			continue;
		vec = s->opcode == IORING_OP_READV;
		if (vec && !iov_sum((const struct iovec *)(uintptr_t)s->addr,
				    (long)s->len, &sp))
			continue;
		busy = io_busy;
		io_busy = 1;
		queued_read_len(fd, s->off, vec ? sp.len : s->len, vec, &o);
		io_busy = busy;
		if (!o || !nop_injects())
			continue;
		if (vec)
			req = (struct io_req){
				.kind = IO_PV, .fd = fd,
				.iov = (const struct iovec *)(uintptr_t)s->addr,
				.iovcnt = (int)s->len, .off = (off_t)s->off
			};
		else
			req = (struct io_req){
				.kind = IO_P, .fd = fd,
				.buf = (void *)(uintptr_t)s->addr,
				.len = s->len, .off = (off_t)s->off
			};
		saved = errno;
		ret = io_read(o, &req, false);
		if (ret < 0)
			ret = -errno;
		errno = saved;
		sqe_done(s, ret);
	}
}

/*
 * Memory for the books of every write the queue may hold, before any is
 * prepared: a ring's entries cannot be split as a libaio batch can, and
 * a write that goes untracked to a served file is a wrong size.  False if
 * it cannot be had: the submission is refused (ENOMEM, nothing taken, as
 * the kernel refuses one it has no memory for).  Under async_lock.
 */
static bool uring_reserve(struct batch *b, struct io_uring *ring,
			  struct aring *r)
{
	unsigned i, n = 0, have = 0;
	struct aop *a;

	for (i = uring_first(ring, r); i != ring->sq.sqe_tail; i++) {
		uint8_t op = uring_sqe(ring, i)->opcode;

		n += uring_is_write(op) || op == IORING_OP_FALLOCATE;
	}
	for (a = aop_free; a && have < n; a = a->next)
		have++;
	for (; have < n; have++) {
		a = mem_alloc(sizeof(*a));
		if (!a)
			return false;
		a->next = aop_free;
		aop_free = a;
	}
	while (b->cap < (int)n)
		if (!batch_grow(b))
			return false;
	return true;
}

/* Run before any submitting call: prepare the queue, under a batch that
 * the caller ends after the real call.  1: prepared (a batch begun); 0:
 * nothing of the shim's; -ENOMEM: refused (uring_reserve). */
static int uring_before(struct io_uring *ring, struct batch *b)
{
	struct aring *r;

	if (!shim_active() || (ring->flags & IORING_SETUP_SQPOLL))
		return 0; /* SQPOLL: the kernel's thread reads the queue */
	if (!uring_any_served(ring)) {
		async_settle(); /* still read the rings if writes are in flight */
		return 0;
	}
	segment_exec_wait(); /* (lock_to_submit would wait later) */
	uring_write_skipped(ring);
	/* before the batch: its reads settle every ring first */
	uring_read_now(ring);
	batch_begin(b);
	lock_to_submit();
	r = ring_get(RING_URING, (uintptr_t)ring);
	if (r) {
		ring_scan(r);
		if (!uring_reserve(b, ring, r)) {
			pthread_mutex_unlock(&async_lock);
			batch_end(b);
			log_once("no memory for the books of an io_uring "
				 "submission: refused (ENOMEM)");
			return -ENOMEM;
		}
		b->seq = ++batch_seq;
		uring_prepare(b, ring, r);
		r->leftovers = false;
	}
	pthread_mutex_unlock(&async_lock);
	return 1;
}

/*
 * After the real call: entries the kernel left queued (it stops at one it
 * refuses, unless the ring was set up with IORING_SETUP_SUBMIT_ALL; on an
 * error it took none) were prepared as if submitted.  They will be
 * submitted with the next call, or never: their preparation is undone —
 * each append's range given back (the last first; the batch's files let
 * go of first, as for libaio), the entries as the program made them, the
 * ops finished as never made — and the next submission prepares them
 * again from the kernel's head.  Should a range not come back (an append
 * claimed past it meanwhile), they all stay as prepared (their sizes then
 * follow their completions, whenever those come).
 */
static void uring_leftovers(struct io_uring *ring, struct batch *b)
{
	unsigned kh = __atomic_load_n(ring->sq.khead, __ATOMIC_ACQUIRE);
	unsigned kt = __atomic_load_n(ring->sq.ktail, __ATOMIC_ACQUIRE), i;
	struct aop *a, *prev, *next;
	struct aring *r;
	bool progress, all = true;

	if (kh == kt || kt - kh > *ring->sq.kring_entries)
		return;
	batch_release(b);
	pthread_mutex_lock(&async_lock);
	r = ring_get(RING_URING, (uintptr_t)ring);
	if (!r)
		goto out;
	/* Mark this batch's ops whose entry is still queued (batch 0). */
	for (a = r->ops; a; a = a->next) {
		if (a->batch != b->seq || !a->sqe)
			continue;
		for (i = kh; i != kt && uring_sqe(ring, i) != a->sqe; i++)
			;
		if (i != kt)
			a->batch = 0;
	}
	/* Their ranges back, the last first: passes until none moves. */
	do {
		progress = false;
		for (a = r->ops; a; a = a->next)
			if (!a->batch && a->sqe && a->t.end != a->t.off &&
			    a->t.kind == WTX_APPEND && wtx_unclaim(&a->t))
				progress = true;
	} while (progress);
	for (a = r->ops; a; a = a->next)
		if (!a->batch && a->sqe && a->t.kind == WTX_APPEND &&
		    a->t.end != a->t.off)
			all = false;
	if (!all) {
		log_once("io_uring entries left queued by the kernel stay "
			 "tracked as submitted (a range could not be given "
			 "back)");
		for (a = r->ops; a; a = a->next)
			if (!a->batch && a->sqe)
				a->batch = b->seq;
		goto out;
	}
	for (prev = NULL, a = r->ops; a; a = next) {
		next = a->next;
		if (a->batch || !a->sqe) {
			prev = a;
			continue;
		}
		a->sqe->off = a->app_off;
		a->sqe->rw_flags = a->app_flags;
		a->sqe->len = a->app_len;
		aop_unlink(r, prev, a);
		aop_finish(a, -ECANCELED);
	}
	r->leftovers = true;
out:
	pthread_mutex_unlock(&async_lock);
}

/* After the real call (its result ret): drop the batch, apply what
 * completed. */
static void uring_after(struct io_uring *ring, struct batch *b, int began,
			int ret)
{
	int saved = errno;

	(void)ret;
	if (began > 0) {
		uring_leftovers(ring, b);
		batch_end(b);
	}
	if (atomic_load(&async_pending))
		async_poll_slow();
	errno = saved;
}

/*
 * The ring whose submission this thread is making (inside the real
 * call): liburing calls its own exported functions for it, which come
 * back here, on that ring.  A submission on another ring while this
 * thread runs the shim's own code is a signal handler's (aio_nested_
 * refused says why it is refused).
 */
static __thread const struct io_uring *uring_outer
	__attribute__((tls_model("initial-exec")));

static bool uring_nested_refused(struct io_uring *ring)
{
	unsigned i;

	if (!shim_nested() || ring == uring_outer ||
	    (ring->flags & IORING_SETUP_SQPOLL))
		return false;
	for (i = uring_first(ring, NULL); i != ring->sq.sqe_tail; i++) {
		const struct io_uring_sqe *s = uring_sqe(ring, i);
		uint8_t op = s->opcode;

		if ((uring_is_write(op) || uring_is_read(op) ||
		     op == IORING_OP_FSYNC || op == IORING_OP_FALLOCATE) &&
		    ((s->flags & IOSQE_FIXED_FILE) || nested_may_serve(s->fd))) {
			log_once("an io_uring submission from a signal handler "
				 "inside the shim: EAGAIN");
			return true;
		}
	}
	return false;
}

/* call, made as the ring's own submission (uring_outer). */
#define URING_CALL(call)                                             \
	({                                                           \
		const struct io_uring *outer_ = uring_outer;         \
		int r_;                                              \
		uring_outer = ring;                                  \
		r_ = (call);                                         \
		uring_outer = outer_;                                \
		r_;                                                  \
	})

/* A call that submits and returns at once. */
#define URING_SUBMIT(call)                                     \
	do {                                                   \
		struct batch b_;                               \
		int began_, ret_;                              \
		if (uring_nested_refused(ring))                \
			return -EAGAIN;                        \
		began_ = uring_before(ring, &b_);              \
		if (began_ < 0)                                \
			return began_;                         \
		ret_ = URING_CALL(call);                       \
		uring_after(ring, &b_, began_, ret_);          \
		return ret_;                                   \
	} while (0)

/*
 * A call that submits, then waits.  With entries of the shim's queued,
 * the submission goes first on its own: the batch holds the files'
 * in-flight counts, which a size change waits for, and a wait can be
 * long.  counts: the call returns how many it submitted.
 */
#define URING_WAIT(call, counts)                                     \
	do {                                                         \
		struct batch b_;                                     \
		int sub_ = 0, ret_, began_;                          \
		if (uring_nested_refused(ring))                      \
			return -EAGAIN;                              \
		began_ = uring_before(ring, &b_);                    \
		if (began_ < 0)                                      \
			return began_;                               \
		if (began_) {                                        \
			sub_ = URING_CALL(lazy_io_uring_submit()(ring)); \
			uring_after(ring, &b_, began_, sub_);        \
			if (sub_ < 0)                                \
				return sub_;                         \
		}                                                    \
		ret_ = URING_CALL(call);                             \
		uring_after(ring, &b_, 0, ret_);                     \
		if ((counts) && sub_ > 0)                            \
			ret_ = ret_ < 0 ? sub_ : ret_ + sub_;        \
		return ret_;                                         \
	} while (0)

EXPORT int io_uring_submit(struct io_uring *ring)
{
	URING_SUBMIT(lazy_io_uring_submit()(ring));
}

EXPORT int io_uring_submit_and_wait(struct io_uring *ring, unsigned wait_nr)
{
	URING_WAIT(lazy_io_uring_submit_and_wait()(ring, wait_nr), true);
}

EXPORT int io_uring_submit_and_wait_timeout(struct io_uring *ring,
					    struct io_uring_cqe **cqe_ptr,
					    unsigned wait_nr,
					    struct __kernel_timespec *ts,
					    sigset_t *sigmask)
{
	URING_WAIT(lazy_io_uring_submit_and_wait_timeout()(ring, cqe_ptr,
							    wait_nr, ts,
							    sigmask),
		   false);
}

EXPORT int io_uring_submit_and_get_events(struct io_uring *ring)
{
	URING_SUBMIT(lazy_io_uring_submit_and_get_events()(ring));
}

/*
 * A call that only waits and reaps: it touches no submission queue entry,
 * and neither does the shim — another thread may be filling one (InnoDB
 * fills and submits under a lock its reaping thread does not take).  The
 * shim only reads what completed, after.
 */
#define URING_REAP(call)                                       \
	do {                                                   \
		int ret_ = (call);                             \
		uring_after(ring, NULL, 0, ret_);              \
		return ret_;                                   \
	} while (0)

/*
 * The wait calls submit only where liburing's do: __io_uring_get_cqe
 * when asked to submit some (liburing's inline waits ask for none), and a
 * wait with a timeout on a kernel without IORING_FEAT_EXT_ARG (liburing
 * then queues a timeout entry and submits the queue with it).
 */
static bool uring_wait_submits(const struct io_uring *ring,
			       const struct __kernel_timespec *ts)
{
	return ts && !(ring->features & IORING_FEAT_EXT_ARG);
}

EXPORT int __io_uring_get_cqe(struct io_uring *ring,
			      struct io_uring_cqe **cqe_ptr, unsigned submit,
			      unsigned wait_nr, sigset_t *sigmask)
{
	if (!submit)
		URING_REAP(lazy___io_uring_get_cqe()(ring, cqe_ptr, 0, wait_nr,
						     sigmask));
	URING_WAIT(lazy___io_uring_get_cqe()(ring, cqe_ptr, submit, wait_nr,
					     sigmask),
		   false);
}

EXPORT int io_uring_wait_cqes(struct io_uring *ring,
			      struct io_uring_cqe **cqe_ptr, unsigned wait_nr,
			      struct __kernel_timespec *ts, sigset_t *sigmask)
{
	if (!uring_wait_submits(ring, ts))
		URING_REAP(lazy_io_uring_wait_cqes()(ring, cqe_ptr, wait_nr, ts,
						     sigmask));
	URING_WAIT(lazy_io_uring_wait_cqes()(ring, cqe_ptr, wait_nr, ts,
					     sigmask),
		   false);
}

EXPORT int io_uring_wait_cqe_timeout(struct io_uring *ring,
				     struct io_uring_cqe **cqe_ptr,
				     struct __kernel_timespec *ts)
{
	if (!uring_wait_submits(ring, ts))
		URING_REAP(lazy_io_uring_wait_cqe_timeout()(ring, cqe_ptr, ts));
	URING_WAIT(lazy_io_uring_wait_cqe_timeout()(ring, cqe_ptr, ts), false);
}

EXPORT int io_uring_get_events(struct io_uring *ring)
{
	URING_REAP(lazy_io_uring_get_events()(ring));
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
		return (int)syscall(SYS_io_uring_enter, cq->ring_fd, 0, want,
				    IORING_ENTER_GETEVENTS, NULL, _NSIG / 8);
	return (int)syscall(SYS_io_uring_enter, cq->ring_fd, 0, want,
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

EXPORT void io_uring_queue_exit(struct io_uring *ring)
{
	ring_drop(RING_URING, (uintptr_t)ring);
	lazy_io_uring_queue_exit()(ring);
	/* liburing unmapped the rings by raw system calls (umem.c). */
	umem_changed();
}

/* The ring is going away (io_destroy, io_uring_queue_exit): apply its
 * writes in flight first, while it can still be read. */
static void ring_drop(enum ring_kind kind, uintptr_t handle)
{
	int busy = io_busy, saved = errno;
	struct aring *r;

	io_busy = 1;
	pthread_mutex_lock(&async_lock);
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
	pthread_mutex_unlock(&async_lock);
	io_busy = busy;
	errno = saved;
}

/* ---- io_uring registered files ------------------------------------------ */

/* Set slots [off, off + nr) of ring's table (grow it to size if larger). */
static void files_set(struct io_uring *ring, unsigned size, unsigned off,
		      const int *fds, unsigned nr)
{
	struct aring *r;
	unsigned i;

	/* A lone writer's file, registered: queued writes may follow. */
	for (i = 0; fds && i < nr; i++)
		if (fds[i] >= 0)
			fdtable_engage_fd(fds[i]);
	pthread_mutex_lock(&async_lock);
	r = ring_get(RING_URING, (uintptr_t)ring);
	if (r && size > r->nfiles) {
		int *t = realloc(r->files, size * sizeof(int));

		if (t) {
			for (i = r->nfiles; i < size; i++)
				t[i] = -1;
			r->files = t;
			r->nfiles = size;
		}
	}
	for (i = 0; r && i < nr && off + i < r->nfiles; i++)
		r->files[off + i] = fds ? fds[i] : -1;
	pthread_mutex_unlock(&async_lock);
}

EXPORT int io_uring_register_files(struct io_uring *ring, const int *files,
				   unsigned nr_files)
{
	int ret = lazy_io_uring_register_files()(ring, files, nr_files);

	if (ret == 0)
		files_set(ring, nr_files, 0, files, nr_files);
	return ret;
}

EXPORT int io_uring_register_files_tags(struct io_uring *ring,
					const int *files, const __u64 *tags,
					unsigned nr)
{
	int ret = lazy_io_uring_register_files_tags()(ring, files, tags, nr);

	if (ret == 0)
		files_set(ring, nr, 0, files, nr);
	return ret;
}

EXPORT int io_uring_register_files_sparse(struct io_uring *ring, unsigned nr)
{
	int ret = lazy_io_uring_register_files_sparse()(ring, nr);

	if (ret == 0)
		files_set(ring, nr, 0, NULL, nr);
	return ret;
}

EXPORT int io_uring_register_files_update(struct io_uring *ring, unsigned off,
					  const int *files, unsigned nr_files)
{
	int ret = lazy_io_uring_register_files_update()(ring, off, files,
							 nr_files);

	if (ret > 0)
		files_set(ring, 0, off, files, (unsigned)ret);
	return ret;
}

EXPORT int io_uring_register_files_update_tag(struct io_uring *ring,
					      unsigned off, const int *files,
					      const __u64 *tags, unsigned nr)
{
	int ret = lazy_io_uring_register_files_update_tag()(ring, off, files,
							     tags, nr);

	if (ret > 0)
		files_set(ring, 0, off, files, (unsigned)ret);
	return ret;
}

EXPORT int io_uring_unregister_files(struct io_uring *ring)
{
	int ret = lazy_io_uring_unregister_files()(ring);
	struct aring *r;

	if (ret == 0) {
		pthread_mutex_lock(&async_lock);
		r = ring_find(RING_URING, (uintptr_t)ring);
		if (r) {
			free(r->files);
			r->files = NULL;
			r->nfiles = 0;
		}
		pthread_mutex_unlock(&async_lock);
	}
	return ret;
}

/* ---- process life ---------------------------------------------------------- */

void async_drain_all(bool for_good)
{
	struct aring *r;

	pthread_mutex_lock(&async_lock);
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
	pthread_mutex_unlock(&async_lock);
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
	pthread_mutex_init(&async_lock, NULL);
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
