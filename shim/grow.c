// SPDX-License-Identifier: MIT
/*
 * The calls that change a served file's size or blocks: ftruncate (grown
 * from the reservation where the kernel would change nothing else, else
 * under the barrier), fallocate in every mode (growth answered from the
 * reservation, allocation and zeroing past the end kept, the rest
 * quiesced), and io_quiesce/io_resume around the calls the kernel makes
 * behind the write path (copies, clones, collapse, insert).  Layer L4:
 * may call L0-L3 and fsync.c; io.c calls it (O_TRUNC at open).
 *
 * Locks, in order: the barrier, then the segment's ext_lock, then an
 * extent lock (rangelock), per layout.h.
 */
#define _GNU_SOURCE
#include "grow.h"
#include "fsync.h"
#include "abi.h"
#include "fdtable.h"
#include "guard.h"

#include "config.h"
#include "gap.h"
#include "inflight.h"
#include "prefill.h"
#include "rangelock.h"
#include "real.h"
#include "recover.h"
#include "reserve.h"
#include "space.h"
#include "sys.h"
#include "wtx.h"

#include <errno.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/resource.h>
#include <sys/syscall.h>

/* space_reclaim as inside any call of the shim (grow.h). */
bool io_reclaim(uint64_t dev)
{
	int busy = busy_enter();
	bool cut;

	cut = space_reclaim(dev);
	busy_exit(busy);
	return cut;
}

/* A growth served from the reservation where the kernel would have made
 * it durable before returning (a sync file or descriptor): 0, or -1 with
 * the sync's errno. */
static int sync_served(struct shim_file *f, int fd)
{
	return fsync_file(f, fd, true);
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
	     sys_ioctl(fd, FS_IOC_GETFLAGS, &attr) == 0 &&
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
	if (sys_ioctl(fd, FS_IOC_GETFLAGS, &attr) == 0 && (attr & FS_SYNC_FL))
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
		if (io_reclaim(f->dev))
			ret = fallocate_once(o, fd, mode, off, len, posix);
	}
	return ret;
}
