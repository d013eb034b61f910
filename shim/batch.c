// SPDX-License-Identifier: MIT
/*
 * Preparing a batch of queued requests, for the submitters (aio.c,
 * uring.c): the files a submission holds (their in-flight counts, and
 * ext_lock for a write that must go exact), and what each queued write,
 * read or sync becomes before the kernel sees it — the same rules as the
 * synchronous paths', tracked as an op on its ring (ring.c).  Layer L4:
 * may call L0-L3, the fd table and ring.c; not io.c, nor the submitters.
 *
 * Locks: async_lock, then a file's ext_lock (batch_hold, exact writes).
 */
#define _GNU_SOURCE
#include "batch.h"
#include "lockrank.h"

#include "inflight.h"
#include "abi.h"
#include "fdtable.h"
#include "guard.h"
#include "serve.h"
#include "log.h"
#include "mem.h"
#include "reserve.h"
#include "shm.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

static uint64_t batch_seq; /* under async_lock */

static struct spare *spares[SPARE_CLASSES]; /* under async_lock */

void batch_begin(struct batch *b)
{
	b->h = b->inl;
	b->spare = NULL;
	b->n = 0;
	b->cap = BATCH_INLINE;
	b->full = false;
	b->saved_errno = errno;
	b->busy = busy_enter();
}

/* Under async_lock. */
static void spare_put(struct spare *s)
{
	lock_held(LOCK_ASYNC);

	s->next = spares[s->cls];
	spares[s->cls] = s;
}

/* Room for twice as many files.  Under async_lock. */
bool batch_grow(struct batch *b)
{
	int cls = b->spare ? b->spare->cls + 1 : 0;
	struct spare *s;

	lock_held(LOCK_ASYNC);
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

	lock_held(LOCK_ASYNC);
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
void batch_release(struct batch *b)
{
	int i;

	for (i = 0; i < b->n; i++) {
		if (b->h[i].exact)
			reserve_exact_done(b->h[i].f, b->h[i].fd);
		inflight_exit(b->h[i].sh);
	}
	b->n = 0;
}

void batch_end(struct batch *b)
{
	batch_release(b);
	if (b->spare) {
		rank_lock(&async_lock, LOCK_ASYNC);
		spare_put(b->spare);
		rank_unlock(&async_lock, LOCK_ASYNC);
	}
	busy_exit(b->busy);
	errno = b->saved_errno;
}

void batch_number(struct batch *b)
{
	b->seq = ++batch_seq;
}

/* The file fd names, if the shim serves writes to it. */
struct shim_file *served_writer(int fd, struct ofd **op)
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
uint64_t queued_read_len(int fd, uint64_t off, uint64_t len,
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

/* A queued request's transaction, claimed and tracked on r; NULL if the
 * batch cannot hold it (the request then goes as issued). */
struct aop *aop_claim(struct batch *b, struct aring *r,
			     struct shim_file *f, int fd, uint64_t key,
			     enum wtx_kind kind, uint64_t off, uint64_t len,
			     unsigned how)
{
	struct held *h = batch_hold(b, f, fd);
	struct aop *a = h ? aop_new() : NULL;

	if (!a && b->full && r->kind == RING_AIO)
		return NULL; /* aio_submit_some submits what it holds */
	if (!a) {
		log_once_file(
			LOG_FALLBACK, LOG_FD(fd),
			"a queued write cannot be tracked (no memory, or the "
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
struct aop *prepare_write(struct batch *b, struct aring *r, int fd,
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
void unprepare(struct aring *r, struct aop *a)
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
bool prepare_sync(int fd, bool datasync)
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

/* The span of an iovec array; false when the kernel will refuse it (it
 * then answers for itself). */
bool iov_sum(const struct iovec *iov, long cnt, struct span *sp)
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
bool buf_span(uint64_t base, uint64_t len, struct span *sp)
{
	*sp = (struct span){ .len = len, .base_or = base, .len_or = len };
	return true;
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
bool nested_may_serve(int fd)
{
	struct ofd *o = fdtable_peek(fd);

	if (!o)
		return !hint_surely_dead() || fdtable_guests();
	return !fdtable_quiet(fd);
}
