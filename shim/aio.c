// SPDX-License-Identifier: MIT
/*
 * libaio: io_submit and the calls that reap, cancel and destroy.  A
 * submission's writes, reads and syncs are prepared (batch.c) and tracked
 * on the context's ring (ring.c); the iocbs the shim rewrote are given
 * their application fields back (the marks), and reads it could not cut
 * have their counts cut when reaped (the read clamps).  Layer L4, with
 * the libaio wrappers: may call L0-L3, the fd table, ring.c and batch.c.
 *
 * Locks: async_lock, then what batch.c takes.
 */
#define _GNU_SOURCE
#include "batch.h"
#include "lockrank.h"

#include "abi.h"
#include "io.h"
#include "lib.h"
#include "log.h"
#include "mem.h"
#include "real.h"
#include "shm.h"

#include <errno.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

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

	lock_held(LOCK_ASYNC);
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
	log_once(LOG_ERROR, NULL,
		 "more than %u iocbs rewritten: an unchanged one submitted "
		 "again may keep the shim's offset",
		 AIO_MARKS);
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
	long base, i, n, got;
	int busy = busy_enter();

	rank_lock(&async_lock, LOCK_ASYNC);
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
						   (m->app_flags & RWF_APPEND);
				if (seen.u.c.offset == m->off)
					io->u.c.offset = m->app_off;
			}
			m->iocb = 0;
		}
		if (got < n)
			break;
	}
	rank_unlock(&async_lock, LOCK_ASYNC);
	busy_exit(busy);
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

	lock_held(LOCK_ASYNC);
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
	log_once(LOG_ERROR, NULL,
		 "more than %d reads across the end that could not be cut "
		 "in flight: the rest keep the kernel's count",
		 READ_CLAMPS);
}

/* Clamps of io (submitted anew: its last request was done, whoever
 * reaped it; or not taken), or, io NULL, of every iocb of ctx (a context
 * destroyed): none may apply any more.  Under async_lock. */
static void read_clamp_drop(io_context_t ctx, const struct iocb *io)
{
	int j;

	lock_held(LOCK_ASYNC);
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
	rank_lock(&async_lock, LOCK_ASYNC);
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
	rank_unlock(&async_lock, LOCK_ASYNC);
}

/* Clamps of iocbs[0, nr), submitted on a path that keeps no books: they
 * are new requests (readable ones only; the kernel answers the rest). */
static void read_clamp_drop_all(long nr, struct iocb **iocbs)
{
	struct iocb *ptr[COPY_CHUNK];
	long base, i, n, got;

	rank_lock(&async_lock, LOCK_ASYNC);
	for (base = 0; base < nr; base += n) {
		got = iocb_chunk(ptr, iocbs, base, nr, &n);
		for (i = 0; i < got; i++)
			read_clamp_drop(NULL, ptr[i]);
		if (got < n)
			break;
	}
	rank_unlock(&async_lock, LOCK_ASYNC);
}

/* What aio_submit_some keeps of each iocb until the kernel has it. */
struct submitted {
	struct aio_mark app; /* the application's fields */
	unsigned long nbytes; /* a read's length before its cut */
	struct aop *op;
};

/* A read of a served file: its length cut, and left so (the kernel
 * copies it at submission, the iocb is the application's again once
 * reaped: it reads its own length back cut); one that cannot be cut
 * (queued_read_len) has its count cut when reaped. */
static void aio_prepare_read(io_context_t ctx, struct iocb *io)
{
	struct ofd *uncut;
	struct span sp;

	if (io->aio_lio_opcode == IO_CMD_PREAD) {
		if (io->u.c.offset < 0)
			return;
		io->u.c.nbytes = queued_read_len(io->aio_fildes,
						 (uint64_t)io->u.c.offset,
						 io->u.c.nbytes, false, &uncut);
		if (uncut)
			read_clamp_add(ctx, io, uncut);
		return;
	}
	if (io->u.v.offset >= 0 && iov_sum(io->u.v.vec, io->u.v.nr, &sp)) {
		queued_read_len(io->aio_fildes, (uint64_t)io->u.v.offset,
				sp.len, true, &uncut);
		if (uncut)
			read_clamp_add(ctx, io, uncut);
	}
}

/*
 * One iocb of a submission (r: its ring, NULL if none of ours), e its
 * record: the application's fields kept, then what the kernel must see
 * written in it.  False if the batch has no memory for one more file:
 * this iocb and those after it go in the next round.
 */
static bool aio_prepare_one(struct batch *b, struct aring *r,
			    io_context_t ctx, struct iocb *io,
			    struct submitted *e)
{
	struct span sp;
	bool append;

	e->op = NULL;
	e->app.iocb = 0;
	e->app.app_off = io->u.c.offset;
	e->app.app_flags = io->aio_rw_flags;
	e->app.app_opcode = io->aio_lio_opcode;
	e->nbytes = io->u.c.nbytes;
	read_clamp_drop(ctx, io);
	if (!r)
		return true;
	if (io->aio_lio_opcode == IO_CMD_PREAD ||
	    io->aio_lio_opcode == IO_CMD_PREADV) {
		aio_prepare_read(ctx, io);
		return true;
	}
	if (io->aio_lio_opcode == IO_CMD_FSYNC ||
	    io->aio_lio_opcode == IO_CMD_FDSYNC) {
		if (prepare_sync(io->aio_fildes,
				 io->aio_lio_opcode == IO_CMD_FDSYNC)) {
			/* left so: submitted again, a stronger sync */
			io->aio_lio_opcode = IO_CMD_FSYNC;
			e->app.iocb = (uintptr_t)io;
		}
		return true;
	}
	if (!aio_is_write(io) || !aio_span(io, &sp) ||
	    (!(io->aio_rw_flags & RWF_APPEND) && io->u.c.offset < 0))
		return true;
	e->op = prepare_write(b, r, io->aio_fildes, (uint64_t)(uintptr_t)io,
			      (uint64_t)io->u.c.offset, &sp,
			      (int)io->aio_rw_flags, 0, &append);
	/* No memory for one more file: submit the requests before this one,
	 * untouched, and this one in the next round (it holds at least the
	 * four files a batch keeps inline). */
	if (!e->op && b->full)
		return false;
	if (e->op && append) {
		io->u.c.offset = (long long)e->op->t.off;
		io->aio_rw_flags = (io->aio_rw_flags & ~RWF_APPEND) |
				   RWF_NOAPPEND;
		e->app.iocb = (uintptr_t)io;
		aio_mark(io, &e->app);
	}
	return true;
}

/*
 * The kernel took iocbs[0, ret) of the take prepared (ret < 0: none):
 * the rest given back as the application made them, and the batch's
 * files let go of.  The appends the kernel did not take give their
 * ranges back first, the last first, while the batch still holds the
 * ext_lock of the exact ones (nobody claims past them meanwhile); then
 * the batch lets go of the files, and only then is async_lock taken
 * again to undo the rest: another thread preparing under it may be
 * waiting for that ext_lock.
 */
static void aio_give_back(struct batch *b, struct aring *r, io_context_t ctx,
			  struct iocb **iocbs, struct submitted *e, long take,
			  int ret)
{
	long i;

	for (i = take - 1; i >= (ret > 0 ? ret : 0); i--)
		if (e[i].op)
			wtx_unclaim(&e[i].op->t);
	batch_release(b);
	rank_lock(&async_lock, LOCK_ASYNC);
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
	rank_unlock(&async_lock, LOCK_ASYNC);
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
		if (!aio_prepare_one(&b, r, ctx, iocbs[i], &e[i])) {
			take = i;
			break;
		}
	}
	rank_unlock(&async_lock, LOCK_ASYNC);

	ret = lazy_io_submit()(ctx, take, iocbs);

	/* All taken, as most are: nothing to give back, and async_lock is
	 * not taken again while the batch holds a file's ext_lock (an exact
	 * write): another thread preparing under async_lock may be waiting
	 * for that ext_lock. */
	if (ret == take) {
		batch_end(&b);
		return (int)(take << 16 | ret);
	}
	aio_give_back(&b, r, ctx, iocbs, e, take, ret);
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
		log_once(LOG_ERROR, NULL,
			 "a libaio submission from a signal handler inside "
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

EXPORT int io_destroy(io_context_t ctx)
{
	int r;

	ring_drop(RING_AIO, (uintptr_t)ctx);
	if (atomic_load(&read_clamps_n)) {
		rank_lock(&async_lock, LOCK_ASYNC);
		read_clamp_drop(ctx, NULL);
		rank_unlock(&async_lock, LOCK_ASYNC);
	}
	r = lazy_io_destroy()(ctx);
	/* The kernel unmapped the ring (umem.c). */
	umem_changed();
	return r;
}
