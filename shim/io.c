// SPDX-License-Identifier: MIT
/*
 * The I/O paths of a served fd: writes, reads, open.
 *
 * A write announces itself in the in-flight counter, claims its range
 * (the append tail for O_APPEND, else its own offset), makes sure the
 * reservation covers it, lets the kernel write, then moves eof.  Reads are
 * cut at eof, read before the kernel call: the kernel alone reads i_size
 * when the read starts, too.
 *
 * Locks, in order: the ofd's pos_lock (process-local, calls that use the
 * file position), then the segment's, per layout.h; the in-flight count is
 * taken after pos_lock and before ext_lock.
 *
 * While the shim holds shared state, cancellation is disabled: pwrite and
 * fsync are cancellation points, and a thread unwound in the middle would
 * leave its count and its locks behind.  A cancel already pending acts at
 * entry, as it would in the real call; one that arrives during the call
 * acts at the thread's next cancellation point, which is what glibc does
 * for a system call that had side effects.
 *
 * Layer L4, the top of the I/O path files: may call L0-L3, the fd table,
 * ring.c (async_settle: completions reaped go first), grow.c (O_TRUNC at
 * open, io_reclaim), sizes.c and fsync.c; never the asynchronous
 * submitters (uring.c calls here, not the other way).
 */
#define _GNU_SOURCE
#include "io.h"
#include "lockrank.h"
#include "serve.h"
#include "grow.h"

#include "async.h"
#include "inflight.h"
#include "rangelock.h"
#include "real.h"
#include "recover.h"
#include "reserve.h"
#include "space.h"
#include "sys.h"
#include "umem.h"
#include "wtx.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>

/* The kernel's cap on one read or write (MAX_RW_COUNT). */
#define RW_MAX ((size_t)INT_MAX & ~(size_t)4095)
/* Highest user address on x86_64 with 4-level paging. */
#define USER_TOP ((uintptr_t)1 << 47)


/* Bytes the call asks for, as the kernel counts them; false when the
 * kernel will refuse the arguments (it then answers for itself). */
static bool req_len(const struct io_req *r, uint64_t *len)
{
	size_t sum = 0;
	int i;

	if (r->kind == IO_PLAIN || r->kind == IO_P) {
		*len = r->len > RW_MAX ? RW_MAX : r->len;
		return true;
	}
	if (!r->iov || (uintptr_t)r->iov < 4096 ||
	    (uintptr_t)r->iov >= USER_TOP || r->iovcnt <= 0 ||
	    r->iovcnt > IOV_MAX ||
	    !umem_readable(r->iov, (size_t)r->iovcnt * sizeof(*r->iov)))
		return false;
	for (i = 0; i < r->iovcnt; i++) {
		if (r->iov[i].iov_len > (size_t)SSIZE_MAX - sum)
			return false;
		sum += r->iov[i].iov_len;
	}
	*len = sum > RW_MAX ? RW_MAX : sum;
	return true;
}

static bool req_positional(const struct io_req *r)
{
	return r->kind == IO_P || r->kind == IO_PV ||
	       (r->kind == IO_PV2 && r->off != -1);
}

static int req_rwf(const struct io_req *r)
{
	return r->kind == IO_PV2 ? r->rwf : 0;
}

/* The call the application made, made for real. */
static ssize_t real_write_call(const struct io_req *r)
{
	switch (r->kind) {
	case IO_PLAIN:
		return real_write(r->fd, r->buf, r->len);
	case IO_VEC:
		return real_writev(r->fd, r->iov, r->iovcnt);
	case IO_P:
		return real_pwrite(r->fd, r->buf, r->len, r->off);
	case IO_PV:
		return real_pwritev(r->fd, r->iov, r->iovcnt, r->off);
	case IO_PV2:
		break;
	}
	return real_pwritev2(r->fd, r->iov, r->iovcnt, r->off, r->rwf);
}

static ssize_t real_read_call(const struct io_req *r)
{
	switch (r->kind) {
	case IO_PLAIN:
		return real_read(r->fd, r->buf, r->len);
	case IO_VEC:
		return real_readv(r->fd, r->iov, r->iovcnt);
	case IO_P:
		return real_pread(r->fd, r->buf, r->len, r->off);
	case IO_PV:
		return real_preadv(r->fd, r->iov, r->iovcnt, r->off);
	case IO_PV2:
		break;
	}
	return real_preadv2(r->fd, r->iov, r->iovcnt, r->off, r->rwf);
}

/* The application's buffers written at off: an append made positional.
 * RWF_NOAPPEND makes the kernel honour off on an O_APPEND descriptor,
 * which keeps its O_APPEND for F_GETFL, for children and across exec. */
static ssize_t real_write_at(const struct io_req *r, uint64_t off)
{
	struct iovec one;
	int rwf = (req_rwf(r) & ~RWF_APPEND) | RWF_NOAPPEND;

	if (r->kind == IO_PLAIN || r->kind == IO_P) {
		one.iov_base = r->buf;
		one.iov_len = r->len > RW_MAX ? RW_MAX : r->len;
		return real_pwritev2(r->fd, &one, 1, (off_t)off, rwf);
	}
	return real_pwritev2(r->fd, r->iov, r->iovcnt, (off_t)off, rwf);
}

/*
 * write() on O_APPEND leaves the file position at the end of what it
 * wrote.  Appends through one description run in parallel here, where the
 * kernel runs them one at a time (and the last, the furthest, sets the
 * position): so the position is set once, when the last append under way
 * through the description finishes, to the furthest end any of them
 * reached.  A lone append sets it to its own end, as the kernel does.
 */
static void append_done_position(struct ofd *o, int fd, ssize_t ret,
				 uint64_t done)
{
	uint64_t cur = atomic_load_explicit(&o->append_end,
					    memory_order_relaxed);

	while (ret > 0 && done > cur &&
	       !atomic_compare_exchange_weak(&o->append_end, &cur, done))
		;
	if (atomic_fetch_sub(&o->appending, 1) != 1)
		return;
	/* The last one out sets the position; the lock orders it against
	 * the last one out of a later batch. */
	rank_lock(&o->pos_lock, LOCK_POS);
	cur = atomic_exchange(&o->append_end, 0);
	if (cur)
		sys_lseek(fd, (off_t)cur, SEEK_SET);
	rank_unlock(&o->pos_lock, LOCK_POS);
}

static bool user_span(const void *base, size_t n)
{
	return (uintptr_t)base < USER_TOP && n <= USER_TOP - (uintptr_t)base;
}

/*
 * Whether the kernel takes this write at off (an append: the tail) as it
 * takes the rest (wtx_sure), its buffers all in the user's range; and,
 * in *refused unless NULL, whether it surely refuses it (wtx_refused).
 * An append it may refuse goes alone (append_alone): claimed beside
 * others, a refusal would leave theirs past a hole the kernel alone never
 * makes.  One from a signal handler cannot wait for that: one the kernel
 * will refuse is made at the tail, taking nothing.
 */
static bool write_sure(struct shim_file *f, uint32_t flags,
		       const struct io_req *r, uint64_t off, uint64_t len,
		       bool *refused)
{
	uint64_t base_or = 0, len_or = 0;
	int i;

	if (refused)
		*refused = false;
	if (r->kind == IO_PLAIN || r->kind == IO_P) {
		if (!user_span(r->buf, len))
			return false;
		base_or = (uintptr_t)r->buf;
		len_or = len;
	} else {
		for (i = 0; i < r->iovcnt; i++) {
			if (!r->iov[i].iov_len)
				continue; /* the kernel skips it */
			if (!user_span(r->iov[i].iov_base, r->iov[i].iov_len))
				return false;
			base_or |= (uintptr_t)r->iov[i].iov_base;
			len_or |= r->iov[i].iov_len;
		}
	}
	if (refused)
		*refused = wtx_refused(f, flags & O_DIRECT, off, len, base_or,
				       len_or);
	return wtx_sure(f, flags & O_DIRECT, req_rwf(r), off, len, base_or,
			len_or);
}

/*
 * A write made from a signal handler that interrupted this thread inside
 * the shim: it may hold the position lock, ext_lock or a barrier, so this
 * takes none and waits for nothing (WTX_REENTRANT); a write past the
 * reservation is the kernel's to extend.
 */
static ssize_t io_write_reentrant(struct ofd *o, const struct io_req *r,
				  bool append, uint64_t len)
{
	struct shim_file *f = atomic_load(&o->file);
	bool positional = req_positional(r);
	int saved = errno, err;
	bool refused = false;
	uint64_t off = 0;
	struct wtx t;
	ssize_t ret;

	if (!append) {
		off_t pos = positional ? r->off : sys_lseek(r->fd, 0, SEEK_CUR);

		off = pos < 0 ? 0 : (uint64_t)pos;
	}
	/* An append the kernel will refuse is made at the tail, holding
	 * nothing: claimed, its refusal would leave a hole behind the
	 * appends after it. */
	if (append) {
		/* Made at the very tail that decided it (wtx_claim). */
		off = tail_of(atomic_load(&f->seg->tail));
		write_sure(f, atomic_load(&o->flags), r, off, len, &refused);
	}
	if (wtx_claim(&t, f, r->fd, append ? WTX_APPEND : WTX_AT, off, len,
		      WTX_REENTRANT | (refused ? WTX_REFUSED : 0)) ==
	    WTX_MOVING) {
		/* The appends move over a failed one (move.h): this one
		 * can neither wait for its turn nor be written again.
		 * Nothing is written: the program may try again. */
		errno = EINTR;
		return -1;
	}
	ret = append ? real_write_at(r, t.off) : real_write_call(r);
	err = errno;
	wtx_settle(&t, r->fd, ret < 0 ? -err : ret);
	if (ret > 0 && append && !positional)
		sys_lseek(r->fd, (off_t)(t.off + (uint64_t)ret), SEEK_SET);
	errno = ret < 0 ? err : saved;
	return ret;
}

/*
 * An append to a file kept exact (a guest writes it): the kernel places
 * it, but one at a time, under the segment's ext_lock, which no
 * reservation takes while the file is exact, and the file's append lock
 * (shm.c), which a guest with no segment takes around its own appends
 * (io_write_guest) — once its lockless ones, made while its place had no
 * segment, are out of the kernel.  XFS alone hands two concurrent
 * O_APPEND|O_DIRECT writers one offset; writes made this way never get
 * one — not even beside a guest's append still in the kernel when the
 * segment was made.  (Queued appends to an exact file go as the kernel
 * alone takes them: dioshim(7).)
 */
static ssize_t append_one_at_a_time(struct shim_file *f,
				    const struct io_req *r, int *err)
{
	struct dioshim_seg *seg = __atomic_load_n(&f->seg, __ATOMIC_ACQUIRE);
	bool recovered, locked = seg_lock(&seg->ext_lock, &recovered);
	bool one = append_lock_take(seg->hint_key, seg->dev, seg->ino);
	ssize_t ret;

	/* Once: the segment counts in live, so no lockless one starts. */
	if (!__atomic_exchange_n(&f->lockless_drained, true, __ATOMIC_ACQ_REL))
		append_lockless_drain(seg->hint_key, seg->dev, seg->ino);
	ret = real_write_call(r);

	*err = errno;
	if (one)
		append_lock_give(seg->hint_key, seg->dev, seg->ino);
	if (locked)
		seg_unlock(&seg->ext_lock);
	return ret;
}

/* A write the shim cannot serve (the file turned exact, or the barrier
 * is unusable): as it is, an append one at a time among the segment's. */
static ssize_t write_as_is(struct shim_file *f, const struct io_req *r,
			   bool append, int *err)
{
	ssize_t ret;

	if (append && atomic_load_explicit(&f->seg->exact,
					   memory_order_relaxed))
		return append_one_at_a_time(f, r, err);
	/* Anywhere, for all the shim knows: no reserved block is known
	 * untouched until the size is cut again. */
	touched_raise(f->seg, INT64_MAX);
	ret = real_write_call(r);
	*err = errno;
	return ret;
}

/*
 * An append the kernel may refuse, made alone: every write of the file
 * drained and held off (the barrier), its offset the tail, under ext_lock.
 * Whatever the kernel answers, the next append starts where this one
 * ended, as in the kernel alone, which appends one at a time.  Past the
 * reservation the kernel extends the size itself.
 */
static ssize_t append_alone(struct ofd *o, struct shim_file *f,
			    const struct io_req *r, bool positional,
			    uint64_t len, int *err)
{
	struct dioshim_shard *sh;
	struct dioshim_seg *seg;
	bool locked, recovered;
	struct wtx t;
	ssize_t ret;

	if (f->slot < 0 || !barrier_raise_write(f, r->fd))
		return write_as_is(f, r, true, err);
	seg = __atomic_load_n(&f->seg, __ATOMIC_ACQUIRE);
	/* Counted in flight behind its own barrier (no one else enters):
	 * killed half way, it is a dead writer in flight, which the appends
	 * after it wait for only so long. */
	sh = inflight_shard(f);
	atomic_fetch_add_explicit(&sh->inflight, 1, memory_order_acq_rel);
	locked = seg_lock(&seg->ext_lock, &recovered);
	if (!positional)
		atomic_fetch_add(&o->appending, 1);
	wtx_claim_alone(&t, f, len, locked);
	ret = real_write_at(r, t.off);
	*err = errno;
	if (ret > 0) {
		slot_stat_add(&sh->writes, 1);
		slot_stat_add(&sh->bytes, (uint64_t)ret);
		slot_stat_add(&sh->appends, 1);
	}
	/* Past the reservation the kernel extended the size: phys is what
	 * it made. */
	wtx_settle(&t, r->fd, ret < 0 ? -*err : ret);
	if ((atomic_load(&o->flags) & O_DSYNC) ||
	    (req_rwf(r) & (RWF_DSYNC | RWF_SYNC)))
		sync_note(seg);
	inflight_exit(sh);
	barrier_lower(f);
	if (!positional)
		append_done_position(o, r->fd, ret,
				     t.off + (ret > 0 ? (uint64_t)ret : 0));
	return ret;
}

ssize_t io_write_exact(struct shim_file *f, const struct io_req *r)
{
	struct guard g;
	ssize_t ret;
	int err;

	guard_enter(&g, true);
	ret = append_one_at_a_time(f, r, &err);
	guard_exit(&g, ret, err);
	return ret;
}

static bool req_clip(const struct io_req *r, uint64_t n, struct io_req *out,
		     struct iovec *v, int vmax);

/* An append's data written again at off (move.h): len bytes of the
 * program's buffers, under the extent lock of their new range. */
struct again {
	struct shim_file *f;
	const struct io_req *r;
};

static int64_t write_again(void *arg, uint64_t off, uint64_t len)
{
	struct again *a = arg;
	struct iovec v[64];
	struct io_req cut;
	struct rangelock rl;
	ssize_t n;

	if (!req_clip(a->r, len, &cut, v, 64))
		return -EINVAL;
	rangelock_write(a->f, off, len, &rl);
	n = real_write_at(&cut, off);
	if (n < 0)
		n = -errno;
	rangelock_write_done(a->f, &rl);
	return n;
}

/*
 * The write itself, claimed (t) and counted in flight (sh): the kernel
 * writes it under the extent lock of its range, then the transaction
 * settles (an append whose turn a failed one took is written again where
 * it moved), the counts and the file position (an append's) follow.
 * Returns the call's result, its errno in *err.
 */
static ssize_t write_claimed(struct ofd *o, struct shim_file *f,
			     const struct io_req *r, struct wtx *t,
			     struct dioshim_shard *sh, uint64_t len,
			     uint32_t flags, int *err)
{
	bool positional = req_positional(r);
	int rwf = req_rwf(r);
	bool append = write_appends(flags, rwf);
	struct again again;
	struct move_writer mover = { write_again, &again };
	struct rangelock rl;
	ssize_t ret;
	int st;

	if (append && !positional)
		atomic_fetch_add(&o->appending, 1);

	/* Overlapping writes one at a time, whole blocks; after ext_lock
	 * (an exact write holds it), so the order is always the same. */
	rangelock_write(f, t->off, len, &rl);
	ret = append ? real_write_at(r, t->off) : real_write_call(r);
	*err = errno;
	rangelock_write_done(f, &rl);

	if (ret > 0) {
		slot_stat_add(&sh->writes, 1);
		slot_stat_add(&sh->bytes, (uint64_t)ret);
	}
	if (append) {
		slot_stat_add(&sh->appends, 1);
		/* Should an append before it fail, it is written again
		 * lower (move.h). */
		again = (struct again){ f, r };
		t->mover = &mover;
	}
	st = wtx_settle(t, r->fd, ret < 0 ? -*err : ret);
	if (t->result != (ret < 0 ? -*err : ret)) {
		/* A move made it succeed at its second try, or failed it
		 * (its data could not be written again where it moved). */
		ret = t->result < 0 ? -1 : (ssize_t)t->result;
		*err = t->result < 0 ? (int)-t->result : *err;
	}
	if (st & WTX_MOVED)
		slot_stat_add(&sh->extends, 1);
	if ((flags & O_DSYNC) || (rwf & (RWF_DSYNC | RWF_SYNC)))
		sync_note(t->f->seg);
	if (append && !positional)
		append_done_position(o, r->fd, ret,
				     t->off + (ret > 0 ? (uint64_t)ret : 0));
	return ret;
}

static ssize_t write_once(struct ofd *o, const struct io_req *r,
			  bool reentrant)
{
	struct shim_file *f = atomic_load_explicit(&o->file,
						   memory_order_acquire);
	struct dioshim_seg *seg = f->seg;
	uint32_t flags = atomic_load_explicit(&o->flags, memory_order_relaxed);
	bool positional = req_positional(r);
	int rwf = req_rwf(r);
	bool append = write_appends(flags, rwf);
	bool nowait = rwf & RWF_NOWAIT;
	/* The position lock serialises calls that read and move the file
	 * position; an append's offset comes from the tail instead. */
	bool pos_locked = !positional && !append;
	struct dioshim_shard *sh;
	uint64_t len, off = 0;
	struct guard g;
	struct wtx t;
	ssize_t ret;
	int err;

	/* Calls the kernel refuses outright change nothing: let it say so. */
	if ((flags & O_ACCMODE) == O_RDONLY || !req_len(r, &len) || !len ||
	    (positional && r->off < 0) ||
	    ((rwf & RWF_APPEND) && (rwf & RWF_NOAPPEND)))
		return real_write_call(r);

	if (reentrant)
		return io_write_reentrant(o, r, append, len);

	/* Completions reaped since: an append goes after them. */
	if (append)
		async_settle();
	guard_enter(&g, true);
	if (append &&
	    !write_sure(f, flags, r,
			atomic_load_explicit(&seg->tail, memory_order_relaxed),
			len, NULL) &&
	    !atomic_load_explicit(&seg->exact, memory_order_relaxed)) {
		if (nowait) {
			/* Going alone waits for the file's writes: that is
			 * what RWF_NOWAIT says no to. */
			ret = -1;
			err = EAGAIN;
		} else {
			ret = append_alone(o, f, r, positional, len, &err);
		}
		goto out_unlock;
	}
	if (pos_locked)
		rank_lock(&o->pos_lock, LOCK_POS);
	sh = inflight_enter_fd(f, r->fd);
	if (!sh) {
		ret = write_as_is(f, r, append, &err);
		goto out_unlock;
	}
	/* After entering: an exec that failed in another thread may have
	 * given f a new segment meanwhile. */
	if (!append && positional) {
		off = (uint64_t)r->off;
	} else if (!append) {
		off_t pos = sys_lseek(r->fd, 0, SEEK_CUR);

		off = pos < 0 ? 0 : (uint64_t)pos;
	}
	switch (wtx_claim(&t, f, r->fd, append ? WTX_APPEND : WTX_AT, off, len,
			  (nowait ? WTX_NOWAIT : 0) |
				  (flags & O_DIRECT ? WTX_DIRECT : 0))) {
	case WTX_AGAIN:
		/* RWF_NOWAIT, and the write needs what waits: the kernel
		 * would say EAGAIN for an extending write too. */
		ret = -1;
		err = EAGAIN;
		goto out_exit;
	case WTX_ALONE:
		inflight_exit(sh);
		ret = append_alone(o, f, r, positional, len, &err);
		goto out_unlock;
	case WTX_MOVING: /* (only from a signal handler) */
	case WTX_GO:
		break;
	}
	ret = write_claimed(o, f, r, &t, sh, len, flags, &err);
out_exit:
	inflight_exit(sh);
out_unlock:
	if (pos_locked)
		rank_unlock(&o->pos_lock, LOCK_POS);
	guard_exit(&g, ret, err);
	return ret;
}

ssize_t io_write(struct ofd *o, const struct io_req *r, bool reentrant)
{
	ssize_t ret = write_once(o, r, reentrant);
	struct shim_file *f;

	/* Out of space: the shim's reservations may be what took it. */
	if (ret < 0 && space_short(errno) && !reentrant &&
	    !(req_rwf(r) & RWF_NOWAIT)) {
		f = atomic_load_explicit(&o->file, memory_order_acquire);
		if (io_reclaim(f->dev))
			ret = write_once(o, r, reentrant);
	}
	return ret;
}

/*
 * A guest writer's write (fdtable.c): through the kernel as the program
 * wrote it, counted; or, once its file was attached instead (a second
 * write of its own was in flight), through the shim.  Out of space, the
 * tails other files hold reserved are given back first, as for any write
 * the shim serves.
 */
ssize_t io_write_guest(struct ofd *o, const struct io_req *r)
{
	uint32_t flags = atomic_load_explicit(&o->flags, memory_order_relaxed);
	int rwf = req_rwf(r);
	bool append = write_appends(flags, rwf);
	_Atomic uint32_t *lockless;
	struct guard g;
	struct ofd *n;
	bool one;
	uint32_t inc;
	ssize_t ret;
	int err, tries = 0;

	/* Marked inside the shim, and not cancellable, before it is
	 * counted: a signal handler's write meanwhile goes straight to the
	 * kernel, and a cancel cannot leave the count up. */
	guard_enter(&g, true);
	if (!fdtable_raw_enter(r->fd, o, &inc)) {
		guard_exit(&g, 0, 0);
		n = shim_served(r->fd);
		return n ? io_write(n, r, false) : real_write_call(r);
	}
	/* An append one at a time with those of a file kept exact: a
	 * segment made while it is in the kernel has members that append
	 * through the kernel too.  Under the file's append lock, or, while
	 * its place has no segment at all, counted in for them to wait for.
	 * Not across a reclaim, which takes other files' locks. */
	do {
		lockless = append ? append_lockless_enter(o->pin.key,
							 o->pin.dev,
							 o->pin.ino)
				  : NULL;
		one = append && !lockless &&
		      append_lock_take(o->pin.key, o->pin.dev, o->pin.ino);
		ret = real_write_call(r);
		err = errno;
		if (lockless)
			append_lockless_exit(lockless);
		if (one)
			append_lock_give(o->pin.key, o->pin.dev, o->pin.ino);
	} while (ret < 0 && space_short(err) && !tries++ &&
		 !(rwf & RWF_NOWAIT) && io_reclaim(o->pin.dev));
	fdtable_raw_exit(o, inc);
	guard_exit(&g, ret, err);
	return ret;
}

/*
 * The read itself, never half of a write: read, then check that no write
 * touched the range meanwhile, else read again (a read that uses the file
 * position goes back to pos first).  A reader that keeps meeting writers
 * makes new ones wait for it, and in the end locks the range.  From a
 * signal handler: just read.
 */
static ssize_t read_whole(struct shim_file *f, const struct io_req *r,
			  uint64_t pos, uint64_t len, bool positional,
			  bool reentrant, int *err)
{
	struct rangelock rl;
	ssize_t ret;

	if (reentrant) {
		ret = real_read_call(r);
		*err = errno;
		return ret;
	}
	rl.gating = false;
	for (;;) {
		rangelock_read_begin(f, pos, len, &rl);
		ret = real_read_call(r);
		*err = errno;
		if (ret <= 0 || rangelock_read_valid(f, &rl))
			break;
		if (!positional)
			sys_lseek(r->fd, (off_t)pos, SEEK_SET);
		if (rangelock_read_retry(f, &rl)) {
			rangelock_write(f, pos, len, &rl);
			ret = real_read_call(r);
			*err = errno;
			rangelock_write_done(f, &rl);
			return ret;
		}
	}
	rangelock_read_done(f, &rl);
	return ret;
}

/*
 * r cut to n bytes, in *out (iovecs in v, room for vmax): a buffered read
 * that would run into the reserved tail writes no more of the caller's
 * memory than the kernel alone.  False if it cannot be cut (too many
 * iovecs): r then goes whole.
 */
static bool req_clip(const struct io_req *r, uint64_t n, struct io_req *out,
		     struct iovec *v, int vmax)
{
	int i;

	*out = *r;
	if (r->kind == IO_PLAIN || r->kind == IO_P) {
		if (n < r->len)
			out->len = (size_t)n;
		return true;
	}
	if (r->iovcnt < 0 || r->iovcnt > vmax)
		return false;
	for (i = 0; i < r->iovcnt; i++) {
		v[i] = r->iov[i];
		if (v[i].iov_len > n)
			v[i].iov_len = (size_t)n;
		n -= v[i].iov_len;
	}
	out->iov = v;
	return true;
}

ssize_t io_read(struct ofd *o, const struct io_req *r, bool reentrant)
{
	struct shim_file *f = atomic_load_explicit(&o->file,
						   memory_order_acquire);
	struct dioshim_seg *seg = f->seg;
	uint32_t flags = atomic_load_explicit(&o->flags, memory_order_relaxed);
	bool positional = req_positional(r);
	uint64_t len, pos, eof;
	struct guard g;
	ssize_t ret;
	int err = 0;

	if ((flags & O_ACCMODE) == O_WRONLY || (flags & O_PATH) ||
	    !req_len(r, &len) || !len || (positional && r->off < 0) ||
	    ((r->kind == IO_PLAIN || r->kind == IO_P) &&
	     ((uintptr_t)r->buf >= USER_TOP ||
	      (uintptr_t)r->buf + len > USER_TOP)))
		return real_read_call(r);

	if (!reentrant)
		async_settle(); /* a write the application saw complete */
	guard_enter(&g, true);
	if (positional) {
		pos = (uint64_t)r->off;
	} else {
		off_t p;

		if (!reentrant)
			rank_lock(&o->pos_lock, LOCK_POS);
		p = sys_lseek(r->fd, 0, SEEK_CUR);
		pos = p < 0 ? 0 : (uint64_t)p;
	}
	if (!reentrant)
		barrier_settle(f, r->fd);
	if (words_stale(seg)) {
		/* Exact since the call looked (a maker that waited for its
		 * lone writers in vain, a guest): the kernel's size is the
		 * file's, the words are not. */
		ret = real_read_call(r);
		err = errno;
		goto out;
	}
	eof = atomic_load_explicit(&seg->eof, memory_order_acquire);
	if (pos >= eof) {
		/* At or past the end the kernel reads nothing; the reserved
		 * tail must not be read as zeros.  A read of nothing still
		 * lets the kernel say whether the fd may be read at all. */
		ret = real_read(r->fd, r->buf, 0);
		err = errno;
	} else {
		uint64_t span = eof - pos < len ? eof - pos : len;
		struct iovec v[64];
		struct io_req cut;

		/* A buffered read goes no further than eof, as the kernel
		 * alone would; a direct one whole (the kernel alone zeroes the
		 * rest of the request past its size, and cutting it could make
		 * a request it refuses for its alignment one it takes). */
		if ((flags & O_DIRECT) || !req_clip(r, span, &cut, v, 64))
			cut = *r;
		ret = read_whole(f, &cut, pos,
				 eof - pos < len ? eof - pos : len, positional,
				 reentrant, &err);
		if (ret > 0 && pos + (uint64_t)ret > eof) {
			ret = (ssize_t)(eof - pos);
			if (f->slot >= 0)
				slot_stat_add(&inflight_shard(f)->reads_clamped, 1);
			if (!positional)
				sys_lseek(r->fd, (off_t)eof, SEEK_SET);
		}
	}
out:
	if (!positional && !reentrant)
		rank_unlock(&o->pos_lock, LOCK_POS);
	guard_exit(&g, ret, err);
	return ret;
}

int io_open(int dirfd, const char *path, int flags, mode_t mode)
{
	bool strip = (flags & O_TRUNC) && !(flags & O_PATH) &&
		     (flags & O_ACCMODE) != O_RDONLY &&
		     ((flags & O_DIRECT) || hint_maybe_live());
	int fd = -1, saved = errno, rc = 0, err;
	struct ofd *o;
	struct stat st;

	/* A file this very open creates has nothing to truncate (the
	 * kernel does not truncate it either): made exclusively, it needs
	 * no drain and no truncate.  If it exists (or anything else), the
	 * open as asked, then the truncate. */
	if (strip && (flags & O_CREAT) && !(flags & O_EXCL) &&
	    (flags & O_TMPFILE) != O_TMPFILE) {
		fd = real_openat(dirfd, path, (flags & ~O_TRUNC) | O_EXCL,
				 mode);
		if (fd >= 0)
			strip = false;
	}
	if (fd < 0)
		fd = real_openat(dirfd, path, strip ? flags & ~O_TRUNC : flags,
				 mode);
	if (fd < 0)
		return fd;
	/* Every open looks for a record a crash left (DESIGN.md 5), but for
	 * a file it made itself and a descriptor that cannot ask. */
	fdtable_opened(fd,
		       flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC |
				 O_CLOEXEC),
		       !(flags & O_PATH) &&
			       !((flags & O_CREAT) && (flags & O_EXCL)) &&
			       record_present(fd));
	if (strip) {
		/* O_TRUNC of a file other processes are writing must drain
		 * them first, as the kernel's truncate drains its DIO. */
		o = fdtable_resolve(fd);
		if (o)
			rc = io_ftruncate(o, fd, 0);
		else if (sys_fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
			rc = real_ftruncate(fd, 0);
		if (rc) {
			err = errno;
			fdtable_close(fd);
			real_close(fd);
			fdtable_closed(fd);
			errno = err;
			return -1;
		}
	}
	errno = saved;
	return fd;
}

void io_stream_opened(int fd)
{
	int flags;

	if (fd < 0 || !record_present(fd))
		return;
	flags = sys_fcntl(fd, F_GETFL, 0);
	if (flags >= 0)
		fdtable_opened(fd, flags, true);
}

