// SPDX-License-Identifier: MIT
/*
 * liburing: the calls that submit (io_uring_submit and the waits that
 * submit) and those that only reap.  Before the real call the queued
 * entries are prepared (batch.c) and tracked on the ring (ring.c); after
 * it, what the kernel left queued is undone.  A write whose completion is
 * skipped, and a read the kernel cannot be asked to cut, are made here
 * through the synchronous paths (io.c) and their entries become NOPs.
 * Layer L4, with the liburing wrappers: may call L0-L3, the fd table,
 * ring.c, batch.c and io.c (the only submitter above the I/O paths).
 *
 * Locks: async_lock, then what batch.c takes; io_write and io_read run
 * before the batch, with none held.
 */
#define _GNU_SOURCE
#include "batch.h"
#include "lockrank.h"

#include "abi.h"
#include "io.h"
#include "lib.h"
#include "log.h"
#include "prefill.h"
#include "real.h"
#include "segment.h"
#include "shm.h"

#include <errno.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <sys/utsname.h>

#define EXPORT __attribute__((visibility("default")))

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
			s->rw_flags = (s->rw_flags & ~RWF_APPEND) |
				      RWF_NOAPPEND;
		}
		if (s->flags & IOSQE_CQE_SKIP_SUCCESS) {
			/* in a chain (uring_write_skipped): nothing will
			 * say when it is done */
			struct aop *p, *prev = NULL;

			log_once(LOG_FALLBACK, NULL,
				 "a write that skips its completion goes as "
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
		busy = busy_enter();
		f = served_writer(s->fd, &o);
		busy_exit(busy);
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
		busy = busy_enter();
		queued_read_len(fd, s->off, vec ? sp.len : s->len, vec, &o);
		busy_exit(busy);
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
	unsigned i, n = 0;

	lock_held(LOCK_ASYNC);
	for (i = uring_first(ring, r); i != ring->sq.sqe_tail; i++) {
		uint8_t op = uring_sqe(ring, i)->opcode;

		n += uring_is_write(op) || op == IORING_OP_FALLOCATE;
	}
	if (!aop_reserve(n))
		return false;
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
			rank_unlock(&async_lock, LOCK_ASYNC);
			batch_end(b);
			log_once(LOG_ERROR, NULL,
				 "no memory for the books of an io_uring "
				 "submission: refused (ENOMEM)");
			return -ENOMEM;
		}
		batch_number(b);
		uring_prepare(b, ring, r);
		r->leftovers = false;
	}
	rank_unlock(&async_lock, LOCK_ASYNC);
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
	rank_lock(&async_lock, LOCK_ASYNC);
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
		log_once(LOG_ERROR, NULL,
			 "io_uring entries left queued by the kernel stay "
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
	rank_unlock(&async_lock, LOCK_ASYNC);
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
			log_once(LOG_ERROR, NULL,
				 "an io_uring submission from a signal handler "
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

EXPORT void io_uring_queue_exit(struct io_uring *ring)
{
	ring_drop(RING_URING, (uintptr_t)ring);
	lazy_io_uring_queue_exit()(ring);
	/* liburing unmapped the rings by raw system calls (umem.c). */
	umem_changed();
}
