// SPDX-License-Identifier: MIT
/*
 * The I/O paths of a served fd.
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
 */
#define _GNU_SOURCE
#include "io.h"

#include "async.h"
#include "commit.h"
#include "config.h"
#include "gap.h"
#include "inflight.h"
#include "log.h"
#include "prefill.h"
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
#include <linux/falloc.h>
#include <linux/fs.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <stdint.h>
#include <time.h>

/* Whether the file turned exact since the caller decided to serve it (a
 * segment's maker that waited for its lone writers in vain, a guest): its
 * words are not the file's any more, the kernel's size is.  Read after
 * barrier_settle, which waits out such a maker. */
static inline bool words_stale(struct dioshim_seg *seg)
{
	return atomic_load_explicit(&seg->exact, memory_order_acquire);
}

/* The kernel's cap on one read or write (MAX_RW_COUNT). */
#define RW_MAX ((size_t)INT_MAX & ~(size_t)4095)
/* Highest user address on x86_64 with 4-level paging. */
#define USER_TOP ((uintptr_t)1 << 47)

__thread int io_busy __attribute__((tls_model("initial-exec")));

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

static void stat_add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
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
	pthread_mutex_lock(&o->pos_lock);
	cur = atomic_exchange(&o->append_end, 0);
	if (cur)
		sys_lseek(fd, (off_t)cur, SEEK_SET);
	pthread_mutex_unlock(&o->pos_lock);
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
 * alone takes them: README.)
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
		stat_add(&sh->writes, 1);
		stat_add(&sh->bytes, (uint64_t)ret);
		stat_add(&sh->appends, 1);
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

/* space_reclaim as inside any call of the shim: a signal handler's
 * write on this thread meanwhile passes through. */
static bool reclaim(uint64_t dev)
{
	int busy = io_busy;
	bool cut;

	io_busy = 1;
	cut = space_reclaim(dev);
	io_busy = busy;
	return cut;
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
	struct rangelock rl;
	uint64_t len, off = 0;
	struct again again;
	struct move_writer mover = { write_again, &again };
	struct guard g;
	struct wtx t;
	ssize_t ret;
	int err, st;

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
		pthread_mutex_lock(&o->pos_lock);
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
	if (append && !positional)
		atomic_fetch_add(&o->appending, 1);

	/* Overlapping writes one at a time, whole blocks; after ext_lock
	 * (an exact write holds it), so the order is always the same. */
	rangelock_write(f, t.off, len, &rl);
	ret = append ? real_write_at(r, t.off) : real_write_call(r);
	err = errno;
	rangelock_write_done(f, &rl);

	if (ret > 0) {
		stat_add(&sh->writes, 1);
		stat_add(&sh->bytes, (uint64_t)ret);
	}
	if (append) {
		stat_add(&sh->appends, 1);
		/* Should an append before it fail, it is written again
		 * lower (move.h). */
		again = (struct again){ f, r };
		t.mover = &mover;
	}
	st = wtx_settle(&t, r->fd, ret < 0 ? -err : ret);
	if (t.result != (ret < 0 ? -err : ret)) {
		/* A move made it succeed at its second try, or failed it
		 * (its data could not be written again where it moved). */
		ret = t.result < 0 ? -1 : (ssize_t)t.result;
		err = t.result < 0 ? (int)-t.result : err;
	}
	if (st & WTX_MOVED)
		stat_add(&sh->extends, 1);
	if ((flags & O_DSYNC) || (rwf & (RWF_DSYNC | RWF_SYNC)))
		sync_note(t.f->seg);
	if (append && !positional)
		append_done_position(o, r->fd, ret,
				     t.off + (ret > 0 ? (uint64_t)ret : 0));
out_exit:
	inflight_exit(sh);
out_unlock:
	if (pos_locked)
		pthread_mutex_unlock(&o->pos_lock);
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
		if (reclaim(f->dev))
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
		 !(rwf & RWF_NOWAIT) && reclaim(o->pin.dev));
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
			pthread_mutex_lock(&o->pos_lock);
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
				stat_add(&inflight_shard(f)->reads_clamped, 1);
			if (!positional)
				sys_lseek(r->fd, (off_t)eof, SEEK_SET);
		}
	}
out:
	if (!positional && !reentrant)
		pthread_mutex_unlock(&o->pos_lock);
	guard_exit(&g, ret, err);
	return ret;
}

off_t io_lseek(struct ofd *o, int fd, off_t off, int whence, bool reentrant)
{
	struct shim_file *f = atomic_load_explicit(&o->file,
						   memory_order_acquire);
	uint64_t eof;
	off_t ret, old;
	struct guard g;
	int err = 0;

	if (!reentrant) {
		async_settle();
		barrier_settle(f, fd);
	}
	eof = atomic_load_explicit(&f->seg->eof, memory_order_acquire);

	if ((whence != SEEK_END && whence != SEEK_DATA && whence != SEEK_HOLE) ||
	    (atomic_load_explicit(&o->flags, memory_order_relaxed) & O_PATH) ||
	    words_stale(f->seg))
		return real_lseek(fd, off, whence);

	guard_enter(&g, false);
	if (!reentrant)
		pthread_mutex_lock(&o->pos_lock);
	if (whence == SEEK_END) {
		/* The kernel: eof + off, EINVAL below zero (or on overflow),
		 * its own limit checked by the SEEK_SET that follows. */
		if ((off < 0 && (uint64_t)-off > eof) ||
		    (off > 0 && (uint64_t)off > (uint64_t)INT64_MAX - eof)) {
			ret = -1;
			err = EINVAL;
		} else {
			ret = real_lseek(fd, (off_t)(eof + (uint64_t)off),
					 SEEK_SET);
			err = errno;
		}
	} else if (off < 0 || (uint64_t)off >= eof) {
		/* No data or hole at or past the end; the kernel still says
		 * whether the fd is one. */
		ret = -1;
		err = real_lseek(fd, 0, SEEK_CUR) < 0 ? errno : ENXIO;
	} else if (whence == SEEK_DATA) {
		/* Unwritten extents are holes, so data found is data below
		 * phys; past eof it does not exist, and the position must
		 * stay where it was. */
		old = sys_lseek(fd, 0, SEEK_CUR);
		ret = real_lseek(fd, off, SEEK_DATA);
		err = errno;
		if ((ret < 0 && err == ENXIO) || (ret >= 0 &&
						   (uint64_t)ret >= eof)) {
			if (old >= 0)
				sys_lseek(fd, old, SEEK_SET);
			ret = -1;
			err = ENXIO;
		}
	} else {
		ret = real_lseek(fd, off, SEEK_HOLE);
		err = errno;
		if (ret >= 0 && (uint64_t)ret > eof)
			ret = sys_lseek(fd, (off_t)eof, SEEK_SET);
	}
	if (!reentrant)
		pthread_mutex_unlock(&o->pos_lock);
	guard_exit(&g, ret, err);
	return ret;
}

/*
 * fsync or fdatasync of f through fd, as the program's: the record
 * rewritten first when recovery could not find the size from it (and
 * the sync made a full one, ext4's fdatasync leaving an xattr change
 * behind), group commit when on; what it made durable is noted.
 */
static int file_sync(struct shim_file *f, int fd, bool datasync)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t eof;
	bool reserved;
	int ret, err;

	if (record_stale(seg) && record_refresh(f, fd))
		datasync = false;
	reserved = reserve_standing(seg);
	eof = atomic_load_explicit(&seg->eof, memory_order_acquire);
	if (config.group_commit)
		ret = commit_sync(f, fd, datasync);
	else
		ret = datasync ? real_fdatasync(fd) : real_fsync(fd);
	err = errno;
	/* Every write that had completed when the sync began is durable. */
	if (ret == 0) {
		uint64_t cur = atomic_load(&seg->synced_eof);

		while (eof > cur &&
		       !atomic_compare_exchange_weak(&seg->synced_eof, &cur, eof))
			;
		sync_done(seg, reserved);
	} else {
		/* A sync that failed may still have committed the size. */
		sync_note(seg);
	}
	errno = err;
	return ret;
}

/* A growth served from the reservation where the kernel would have made
 * it durable before returning (a sync file or descriptor): 0, or -1 with
 * the sync's errno. */
static int sync_served(struct shim_file *f, int fd)
{
	return file_sync(f, fd, true);
}

/*
 * Whether the filesystem takes a zero range on f: XFS always, ext4 on a
 * file mapped by extents (not one converted from ext3), anything else
 * once the kernel has taken one there.
 */
static bool zero_range_known(struct shim_file *f, int fd)
{
	int attr = 0;

	if (atomic_load_explicit(&f->zero_range_ok, memory_order_relaxed))
		return true;
	if (f->fs_bit == CONFIG_FS_XFS ||
	    (f->fs_bit == CONFIG_FS_EXT4 &&
	     syscall(SYS_ioctl, fd, FS_IOC_GETFLAGS, &attr) == 0 &&
	     (attr & FS_EXTENT_FL))) {
		atomic_store_explicit(&f->zero_range_ok, true,
				      memory_order_relaxed);
		return true;
	}
	return false;
}

/* What a call that grows the file or zeroes past it asks of the kernel
 * (serve_check). */
#define TAKE_ZERO 1u /* a zero range */
#define TAKE_TRUNCATE 2u /* a truncate */

enum serve {
	SERVE_NO, /* the kernel's to answer */
	SERVE_YES, /* answered from the reservation */
	SERVE_SYNC, /* so, then made durable (a sync file or descriptor) */
};

/*
 * Whether a call that grows the file, or zeroes or allocates past its
 * end, may be answered without the kernel: one the kernel would take as
 * it stands and change nothing else with.  It refuses anything on an
 * immutable file, a zero range or a truncate on an append-only one, a
 * zero range where the filesystem has none (tmpfs; ext4 without extents:
 * the shim knows once the kernel has taken one on this file), a size
 * past RLIMIT_FSIZE (size: what the call makes it; 0: none); and it
 * drops a file's set-user-ID and set-group-ID bits and its capability,
 * which only it can do.  A file with the sync attribute (chattr +S), or
 * a descriptor opened O_DSYNC or O_SYNC (dsync), has the kernel make
 * such a call durable before it returns: so does the shim.  A statx, an
 * xattr look and an ioctl: no lock, no drain.
 */
static enum serve serve_check(struct shim_file *f, int fd, unsigned what,
			      uint64_t size, bool dsync)
{
	struct statx stx;
	struct rlimit rl;
	int attr = 0;

	if ((what & TAKE_ZERO) && !zero_range_known(f, fd))
		return SERVE_NO;
	if (size && getrlimit(RLIMIT_FSIZE, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY && size > rl.rlim_cur)
		return SERVE_NO;
	if (sys_statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC,
		      STATX_MODE, &stx))
		return SERVE_NO;
	if (stx.stx_attributes & STATX_ATTR_IMMUTABLE ||
	    (what && (stx.stx_attributes & STATX_ATTR_APPEND)) ||
	    (stx.stx_mode & (S_ISUID | S_ISGID)) ||
	    sys_has_xattr(fd, "security.capability"))
		return SERVE_NO;
	if (syscall(SYS_ioctl, fd, FS_IOC_GETFLAGS, &attr) == 0 &&
	    (attr & FS_SYNC_FL))
		return SERVE_SYNC;
	return dsync ? SERVE_SYNC : SERVE_YES;
}

/*
 * The size grew from eof0 over [.., end), the program asking for blocks
 * in [off, end) (none: off == end): what lies between is a gap (gap.h).
 * locked: ext_lock is held already (an exact growth).
 */
static void grew(struct dioshim_seg *seg, uint64_t eof0, uint64_t off,
		 uint64_t end, bool locked)
{
	bool recovered;

	if (!locked && !seg_lock(&seg->ext_lock, &recovered))
		return;
	gap_take(seg, off, end);
	gap_note(seg, eof0, off < end ? off : end);
	if (!locked)
		seg_unlock(&seg->ext_lock);
}

/*
 * ftruncate growing the file past eof, answered without the kernel: the
 * size moves (WTX_GROW, as a fallocate's), and the blocks under it are
 * the reservation's, allocated, so the writes that come into them are
 * overwrites, not writes into a hole.  Only while nothing is written or
 * claimed past eof (the kernel alone would drain it first), inside a
 * reservation, for a truncate the kernel would take.  False: not
 * served, nothing changed.
 */
static bool ftruncate_grow(struct shim_file *f, int fd, uint64_t len,
			   bool *sync)
{
	struct dioshim_seg *seg = f->seg;
	struct dioshim_shard *sh;
	enum serve serve;
	uint64_t eof;
	struct wtx t;
	bool served;

	/* (Past RLIMIT_FSIZE the kernel sends SIGXFSZ.) */
	serve = serve_check(f, fd, TAKE_TRUNCATE, len, false);
	if (serve == SERVE_NO)
		return false;
	*sync = serve == SERVE_SYNC;
	sh = inflight_enter_fd(f, fd);
	if (!sh)
		return false;
	eof = atomic_load_explicit(&seg->eof, memory_order_acquire);
	if (len <= eof) {
		inflight_exit(sh);
		return false;
	}
	wtx_claim(&t, f, fd, WTX_GROW, eof, len - eof, 0);
	served = t.res == RESERVE_OK && fresh_from(seg, t.held_from) <= eof &&
		 atomic_load(&seg->eof) == eof;
	wtx_settle(&t, fd, served ? 0 : -1);
	inflight_exit(sh);
	if (served)
		grew(seg, eof, len, len, false);
	return served;
}

int io_ftruncate(struct ofd *o, int fd, off_t len)
{
	struct shim_file *f = atomic_load_explicit(&o->file,
						   memory_order_acquire);
	struct dioshim_seg *seg = f->seg;
	uint32_t flags = atomic_load_explicit(&o->flags, memory_order_relaxed);
	bool locked, recovered, sync = false;
	struct guard g;
	uint64_t eof0;
	int ret, err;

	if (len < 0 || (flags & O_ACCMODE) == O_RDONLY)
		return real_ftruncate(fd, len);

	guard_enter(&g, false);
	if ((uint64_t)len > atomic_load_explicit(&seg->eof,
						 memory_order_acquire) &&
	    !(flags & O_PATH) && ftruncate_grow(f, fd, (uint64_t)len, &sync)) {
		/* A sync file's truncate is durable when it returns. */
		ret = sync ? sync_served(f, fd) : 0;
		err = errno;
		goto out;
	}
	if (!barrier_raise_fd(f, fd)) {
		ret = real_ftruncate(fd, len);
		err = errno;
		goto out;
	}
	locked = seg_lock(&seg->ext_lock, &recovered);
	/* Killed between the kernel's truncate and the words below, we would
	 * leave words that put the next append behind a hole: the mark makes
	 * whoever takes the barrier over recompute them. */
	barrier_changing(f);
	eof0 = atomic_load(&seg->eof);
	ret = real_ftruncate(fd, len);
	err = errno;
	if (ret == 0) {
		/* Growing, it kept the reserved blocks under the new size. */
		if ((uint64_t)len > eof0)
			gap_note(seg, eof0, (uint64_t)len);
		else
			gap_clip(seg, (uint64_t)len);
		/* No writer is in flight: the words can move down.  The
		 * reservation went with the kernel's truncate; so must its
		 * record, lest recovery cut a size set here. */
		/* The kernel's truncate from phys freed every block past len;
		 * the kernel alone, growing the file from eof, would have
		 * freed none of the application's. */
		/* Blocks past len are gone: so is the prefill there. */
		prefill_forget(f, (uint64_t)len, UINT64_MAX / 2);
		/* (A truncate to the size itself frees the blocks past it,
		 * as a cut does.) */
		if ((uint64_t)len > eof0)
			keep_restore(seg, fd, (uint64_t)len);
		else
			keep_clear(seg);
		atomic_store(&seg->phys, (uint64_t)len);
		atomic_store(&seg->eof, (uint64_t)len);
		atomic_store(&seg->tail, (uint64_t)len);
		atomic_store(&seg->touched, (uint64_t)len);
		atomic_store(&seg->async_end, 0);
		if (atomic_load(&seg->synced_eof) > (uint64_t)len)
			atomic_store(&seg->synced_eof, (uint64_t)len);
		reserve_charge(seg); /* nothing reserved now */
		record_forget(f, fd);
	}
	if (locked)
		seg_unlock(&seg->ext_lock);
	barrier_lower(f);
out:
	guard_exit(&g, ret, err);
	return ret;
}

static int call_fallocate(int fd, int mode, off_t off, off_t len, bool posix)
{
	if (posix)
		return mode ? real_fallocate(fd, mode, off, len) < 0 ? errno : 0
			    : real_posix_fallocate(fd, off, len);
	return real_fallocate(fd, mode, off, len);
}

/*
 * [off, end) was punched or zeroed (unwritten now).  Recovery finds eof
 * from the record and the blocks of data past it: if the block holding
 * the end of the file lost its data, only a new record can say where the
 * size is, so the next sync must write one.
 */
static void punch_note(struct dioshim_seg *seg, uint64_t off, uint64_t end)
{
	uint64_t eof = atomic_load_explicit(&seg->eof, memory_order_acquire);
	uint64_t last = eof ? (eof - 1) & ~((uint64_t)seg_blksize(seg) - 1) : 0;

	if (off < eof && end > last)
		atomic_fetch_or(&seg->flags, DIOSHIM_SEGF_SIZE_NO_DATA);
}

bool io_quiesce(struct shim_file *f, int fd, struct quiesce *q)
{
	bool recovered;

	q->f = f;
	q->fd = fd;
	q->raised = barrier_raise_fd(f, fd);
	if (!q->raised)
		return false;
	q->locked = seg_lock(&f->seg->ext_lock, &recovered);
	barrier_changing(f); /* as in io_ftruncate */
	reserve_trim(f, fd);
	/* Blocks moved or written behind the write path: the bitmap of
	 * prefilled, never written blocks means nothing now. */
	prefill_forget_all(f);
	return true;
}

void io_resume(struct quiesce *q)
{
	struct dioshim_seg *seg;

	if (!q->raised)
		return;
	seg = q->f->seg;
	reserve_resync(q->f, q->fd);
	atomic_store(&seg->async_end, 0);
	if (q->locked)
		seg_unlock(&seg->ext_lock);
	barrier_lower(q->f);
	q->raised = false;
}

/* A call whose kernel semantics depend on the size (collapse, insert, a
 * mode we do not know): quiesced (io_quiesce). */
static int fallocate_quiesced(struct shim_file *f, int fd, int mode, off_t off,
			      off_t len, bool posix, int *err)
{
	struct quiesce q;
	int ret;

	io_quiesce(f, fd, &q);
	ret = call_fallocate(fd, mode, off, len, posix);
	*err = errno;
	/* Data moved (collapse, insert, a mode we do not know): what the
	 * size grew over is elsewhere now. */
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_ZERO_RANGE |
		     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_UNSHARE_RANGE))
		gap_clear(f->seg);
	io_resume(&q);
	return ret;
}

static bool fallocate_failed(int ret, bool posix)
{
	return posix ? ret != 0 : ret < 0;
}

/*
 * fallocate or zero [off, kend) through the kernel without moving its
 * size, holding the range as a write does if it changes data; learns
 * whether the file takes a zero range.
 */
static int fallocate_kept(struct shim_file *f, int fd, int mode, uint64_t off,
			  uint64_t kend, bool posix, int *err)
{
	struct rangelock rl = { .active = false };
	bool data = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
	int ret;

	if (data)
		rangelock_write(f, off, kend - off, &rl);
	ret = call_fallocate(fd, mode | FALLOC_FL_KEEP_SIZE, (off_t)off,
			     (off_t)(kend - off), posix);
	*err = errno;
	rangelock_write_done(f, &rl);
	if ((mode & FALLOC_FL_ZERO_RANGE) && !fallocate_failed(ret, posix))
		atomic_store_explicit(&f->zero_range_ok, true,
				      memory_order_relaxed);
	return ret;
}

/*
 * Allocation or zeroing past eof that keeps the size (KEEP_SIZE, with
 * ZERO_RANGE or alone): what the reservation holds untouched is answered
 * as it is; past phys the reservation grows over it first, as for an
 * append; what a write touched is the kernel's.  The blocks are the
 * application's: the trim keeps them.  NOT_SERVED: nothing done.
 */
#define NOT_SERVED (-2) /* neither a call's answer nor posix_fallocate's */
static int fallocate_ahead(struct shim_file *f, int fd, int mode, uint64_t off,
			   uint64_t end, bool posix, bool dsync, int *err,
			   bool *sync)
{
	struct dioshim_seg *seg = f->seg;
	enum serve serve = serve_check(
		f, fd, mode & FALLOC_FL_ZERO_RANGE ? TAKE_ZERO : 0, 0, dsync);
	enum reserve_result res = RESERVE_OK;
	struct dioshim_shard *sh;
	uint64_t kend, from;
	int ret;

	if (serve == SERVE_NO)
		return NOT_SERVED;
	sh = inflight_enter_fd(f, fd);
	if (!sh)
		return NOT_SERVED;
	*sync = serve == SERVE_SYNC;
	if (end > atomic_load_explicit(&seg->phys, memory_order_acquire))
		res = reserve_extend(f, fd, off, end);
	if (res == RESERVE_OK) {
		from = fresh_from(seg, atomic_load(&seg->tail));
		kend = from <= off ? off : from < end ? from : end;
		ret = kend > off ? fallocate_kept(f, fd, mode, off, kend, posix,
						  err)
				 : 0;
	} else {
		ret = fallocate_kept(f, fd, mode, off, end, posix, err);
		if (res == RESERVE_EXACT)
			reserve_exact_done(f, fd);
	}
	inflight_exit(sh);
	if (!fallocate_failed(ret, posix)) {
		/* The program's own blocks, below eof too. */
		grew(seg, off, off, end, false);
		keep_note(f, off, end);
	}
	return ret;
}

/* Punch, zero, unshare or allocate without a change of size. */
static int fallocate_in_place(struct shim_file *f, int fd, int mode,
			      uint64_t off, uint64_t end, bool posix, bool dsync,
			      int *err, bool *sync)
{
	struct dioshim_seg *seg = f->seg;
	bool data = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE);
	struct rangelock rl = { .active = false };
	int ret;

	if ((mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_ZERO_RANGE)) == 0 &&
	    (mode & FALLOC_FL_KEEP_SIZE) &&
	    end > atomic_load_explicit(&seg->eof, memory_order_acquire)) {
		ret = fallocate_ahead(f, fd, mode, off, end, posix, dsync, err,
				      sync);
		if (ret != NOT_SERVED)
			return ret;
	}
	/* A punch past eof: the reserved blocks there are not untouched. */
	if (mode & FALLOC_FL_PUNCH_HOLE)
		touched_raise(seg, end);
	if (data)
		rangelock_write(f, off, end - off, &rl);
	ret = call_fallocate(fd, mode, (off_t)off, (off_t)(end - off), posix);
	*err = errno;
	if (mode & FALLOC_FL_PUNCH_HOLE)
		prefill_forget(f, off, end - off);
	if (data && !fallocate_failed(ret, posix))
		punch_note(seg, off, end);
	rangelock_write_done(f, &rl);
	if ((mode & FALLOC_FL_ZERO_RANGE) && !fallocate_failed(ret, posix))
		atomic_store_explicit(&f->zero_range_ok, true,
				      memory_order_relaxed);
	if (!(mode & FALLOC_FL_PUNCH_HOLE) && !fallocate_failed(ret, posix)) {
		/* The program's own blocks now. */
		grew(seg, off, off, end, false);
		if ((mode & FALLOC_FL_KEEP_SIZE) &&
		    end > atomic_load_explicit(&seg->eof, memory_order_acquire))
			keep_note(f, off, end);
	}
	return ret;
}

/*
 * mode 0 (posix_fallocate) or ZERO_RANGE past eof: the logical size grows
 * to end, claimed as a write is (WTX_GROW, holding [.., end) in the tail
 * so that no append lands inside it).  Inside the reservation, over
 * blocks nothing touched, nothing reaches the kernel; past it (none
 * could be made) the kernel grows the file itself.  Between the hold and
 * the settling the kernel is called for nothing but the reservation, so
 * that a grower killed there leaves what the appends after it take for
 * done (they pass over a dead writer's range) as done: zeros, its size.
 * A zero range that reaches below eof, writes past eof in flight (the
 * kernel alone drains them first), or a call the kernel would answer
 * otherwise (serve_check) go quiesced, as the kernel alone runs them.
 */
static int fallocate_grow(struct shim_file *f, int fd, int mode, uint64_t off,
			  uint64_t end, bool posix, bool dsync, int *err,
			  bool *sync)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t eof0 = atomic_load_explicit(&seg->eof, memory_order_acquire);
	enum serve serve = serve_check(
		f, fd, mode & FALLOC_FL_ZERO_RANGE ? TAKE_ZERO : 0, end, dsync);
	struct dioshim_shard *sh;
	struct wtx t;
	int ret;

	if (serve == SERVE_NO || ((mode & FALLOC_FL_ZERO_RANGE) && off < eof0))
		return fallocate_quiesced(f, fd, mode, (off_t)off,
					  (off_t)(end - off), posix, err);
	*sync = serve == SERVE_SYNC;
	/* An allocation reaching below eof: that part first (the kernel's,
	 * holes there filled), the size's growth after. */
	if (off < eof0) {
		ret = fallocate_kept(f, fd, mode, off, eof0, posix, err);
		if (fallocate_failed(ret, posix))
			return ret;
	}
	sh = inflight_enter_fd(f, fd);
	if (!sh) {
		ret = call_fallocate(fd, mode, (off_t)off, (off_t)(end - off),
				     posix);
		*err = errno;
		return ret;
	}
	wtx_claim(&t, f, fd, WTX_GROW, off, end - off, 0);
	if (t.res == RESERVE_OK) {
		uint64_t from = fresh_from(seg, t.held_from);

		if (from > atomic_load(&seg->eof) ||
		    ((mode & FALLOC_FL_ZERO_RANGE) && from > off)) {
			/* Written or claimed past eof, or eof moved over
			 * off: not untouched.  The kernel alone would drain
			 * those writes, then zero. */
			wtx_settle(&t, fd, -1);
			inflight_exit(sh);
			*sync = false;
			return fallocate_quiesced(f, fd, mode, (off_t)off,
						  (off_t)(end - off), posix,
						  err);
		}
		ret = 0;
	} else {
		ret = call_fallocate(fd, mode, (off_t)off, (off_t)(end - off),
				     posix);
		*err = errno;
		if (mode & FALLOC_FL_ZERO_RANGE && !fallocate_failed(ret, posix))
			atomic_store_explicit(&f->zero_range_ok, true,
					      memory_order_relaxed);
	}
	if (!fallocate_failed(ret, posix))
		grew(seg, eof0, off, end, t.res == RESERVE_EXACT);
	wtx_settle(&t, fd, fallocate_failed(ret, posix) ? -1 : 0);
	inflight_exit(sh);
	return ret;
}

static int fallocate_once(struct ofd *o, int fd, int mode, off_t off,
			  off_t len, bool posix)
{
	const int known = FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE |
			  FALLOC_FL_ZERO_RANGE | FALLOC_FL_COLLAPSE_RANGE |
			  FALLOC_FL_INSERT_RANGE | FALLOC_FL_UNSHARE_RANGE;
	struct shim_file *f = atomic_load_explicit(&o->file,
						   memory_order_acquire);
	uint32_t flags = atomic_load_explicit(&o->flags, memory_order_relaxed);
	bool dsync = flags & O_DSYNC, sync = false; /* O_SYNC too */
	uint64_t end;
	struct guard g;
	int ret, err = 0;

	if (off < 0 || len <= 0 || (flags & O_ACCMODE) == O_RDONLY ||
	    (flags & O_PATH) ||
	    (uint64_t)off > (uint64_t)INT64_MAX - (uint64_t)len)
		return call_fallocate(fd, mode, off, len, posix);
	end = (uint64_t)off + (uint64_t)len;

	guard_enter(&g, !posix);
	if ((mode & FALLOC_FL_KEEP_SIZE && !(mode & ~known)) ||
	    ((mode & ~FALLOC_FL_ZERO_RANGE) == 0 &&
	     end <= atomic_load_explicit(&f->seg->eof, memory_order_acquire)))
		/* No size the application sees changes.  Blocks allocated
		 * past eof are the application's: the trim must keep them. */
		ret = fallocate_in_place(f, fd, mode, (uint64_t)off, end, posix,
					 dsync, &err, &sync);
	else if ((mode & ~FALLOC_FL_ZERO_RANGE) != 0)
		ret = fallocate_quiesced(f, fd, mode, off, len, posix, &err);
	else
		ret = fallocate_grow(f, fd, mode, (uint64_t)off, end, posix,
				     dsync, &err, &sync);
	/* Served where the kernel would have made it durable first. */
	if (sync && !fallocate_failed(ret, posix) && sync_served(f, fd)) {
		err = errno;
		ret = posix ? err : -1;
	}
	/* posix_fallocate returns its error and leaves errno alone. */
	guard_exit(&g, posix ? 0 : ret, err);
	return ret;
}

int io_fallocate(struct ofd *o, int fd, int mode, off_t off, off_t len,
		 bool posix)
{
	int ret = fallocate_once(o, fd, mode, off, len, posix);
	struct shim_file *f;

	/* Out of space: the shim's reservations may be what took it. */
	if (space_short(posix ? ret : ret < 0 ? errno : 0) &&
	    !(mode & FALLOC_FL_PUNCH_HOLE)) {
		f = atomic_load_explicit(&o->file, memory_order_acquire);
		if (reclaim(f->dev))
			ret = fallocate_once(o, fd, mode, off, len, posix);
	}
	return ret;
}

int io_fsync(struct ofd *o, int fd, bool datasync)
{
	struct shim_file *f = atomic_load_explicit(&o->file,
						   memory_order_acquire);
	struct guard g;
	int ret;

	if (atomic_load_explicit(&o->flags, memory_order_relaxed) & O_PATH)
		return datasync ? real_fdatasync(fd) : real_fsync(fd);
	guard_enter(&g, true);
	ret = file_sync(f, fd, datasync);
	guard_exit(&g, ret, errno);
	return ret;
}

uint64_t io_eof(struct ofd *o, int fd, uint64_t kernel_size, bool reentrant)
{
	struct shim_file *f = atomic_load_explicit(&o->file,
						   memory_order_acquire);
	uint64_t eof;

	async_settle();
	if (!reentrant)
		barrier_settle(f, fd);
	if (words_stale(f->seg))
		return kernel_size;
	eof = atomic_load_explicit(&f->seg->eof, memory_order_acquire);

	return eof < kernel_size ? eof : kernel_size;
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

void io_fix_path_size(const char *path, int dirfd, int at_flags,
		      struct stat *st)
{
	uint64_t eof;

	if (!S_ISREG(st->st_mode) || !hint_maybe_live())
		return;
	if (segment_peek_eof(st, path, dirfd, at_flags, &eof))
		st->st_size = (off_t)eof;
}
