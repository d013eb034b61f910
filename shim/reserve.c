// SPDX-License-Identifier: MIT
/*
 * Reservation ahead of EOF.
 *
 * Every fallocate and every size change drains the file's in-flight direct
 * I/O in the kernel (inode_dio_wait under the exclusive inode lock), so a
 * reservation is a stop-the-world for the file: chunks grow with the append
 * rate until one covers about RESERVE_PERIOD_NS of appends, like XFS's
 * speculative preallocation, bounded by DIOSHIM_RESERVE_MAX, by free space
 * and by RLIMIT_FSIZE.  When a reservation cannot be made (ENOSPC, EDQUOT,
 * EFBIG, no fallocate) the write goes to the kernel exactly as the
 * application issued it, under ext_lock so phys stays the kernel's size.
 *
 * Lock order: ext_lock is the innermost segment lock.
 *
 * Layer L2, above move (move_wait), publish, prefill, inflight, gap and
 * recover; a recount of the budget is space.c's, reached through
 * segment_hooks (segment_budget_recount).  (The order
 * inside L2 is shim/layers'.)
 */
#define _GNU_SOURCE
#include "reserve.h"
#include "lockrank.h"

#include "config.h"
#include "gap.h"
#include "inflight.h"
#include "log.h"
#include "move.h"
#include "prefill.h"
#include "recover.h"
#include "sys.h"

#include <errno.h>
#include <linux/falloc.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* After a reservation the kernel refused, none is tried for this long. */
#define RESERVE_RETRY_NS 1000000000ull

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

uint64_t reserve_chunk_next(uint64_t prev, uint64_t served, uint64_t elapsed_ns,
			    uint64_t min, uint64_t max)
{
	uint64_t target;

	if (elapsed_ns == 0)
		elapsed_ns = 1;
	/* served * PERIOD / elapsed, without overflow for any sane input */
	if (served > UINT64_MAX / RESERVE_PERIOD_NS)
		target = UINT64_MAX;
	else
		target = served * RESERVE_PERIOD_NS / elapsed_ns;
	if (target > prev * 2)
		target = prev * 2;
	if (target < prev / 2)
		target = prev / 2;
	if (target < min)
		target = min;
	if (target > max)
		target = max;
	return round_up(target, min);
}

uint64_t reserve_room(uint64_t avail, uint64_t total, uint64_t others,
		      uint32_t blksize)
{
	uint64_t cap = (avail + others) / 16, pct = total / 100;
	unsigned shift = 0, p;

	if (pct && avail < 5 * pct) {
		if (avail < pct)
			return 0;
		shift = 2;
		for (p = 4; p >= 2; p--)
			if (avail < p * pct)
				shift++;
	}
	cap >>= shift;
	return cap > others ? (cap - others) / blksize * blksize : 0;
}

void reserve_charge(struct dioshim_seg *seg)
{
	uint64_t phys = atomic_load(&seg->phys), eof = atomic_load(&seg->eof);
	uint64_t now = phys > eof ? phys - eof : 0, was = seg->budget_charged;

	if (now == was)
		return;
	/* The segment says more than the hint while the two move: a count
	 * anew (space_recount) meanwhile never finds the hint too high. */
	if (now > was) {
		__atomic_store_n(&seg->budget_charged, now, __ATOMIC_SEQ_CST);
		hint_budget_add(seg->hint_key, seg->dev, (int64_t)(now - was));
	} else {
		hint_budget_add(seg->hint_key, seg->dev, (int64_t)(now - was));
		__atomic_store_n(&seg->budget_charged, now, __ATOMIC_SEQ_CST);
	}
}

/* What the other files of seg's place and filesystem hold reserved. */
static uint64_t budget_others(struct dioshim_seg *seg)
{
	uint64_t all = hint_budget_add(seg->hint_key, seg->dev, 0);

	return all > seg->budget_charged ? all - seg->budget_charged : 0;
}

/*
 * A reservation's fallocate failed (ENOSPC, EIO): ext4 keeps what it
 * managed to allocate, and the size with it.  Both are given back, so
 * that the write that follows meets the file the kernel alone would
 * have — but not what writes made meanwhile: the fallocate drained the
 * queued writes in flight, and those that extended the file (submitted
 * past phys, exact) made its size at their end, which is data.  The cut
 * stops at the end of the last block of data past phys.  Exact writes
 * are submitted under ext_lock, which we hold: none is in flight now.
 * Returns the kernel's size, in phys.
 */
static uint64_t undo_failed_reserve(struct shim_file *f, int fd,
				    uint64_t phys)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t keep = phys, data;
	struct stat st;

	if (sys_fstat(fd, &st) || (uint64_t)st.st_size <= phys)
		return phys;
	data = recover_data_end(fd, phys / seg_blksize(seg) *
					    seg_blksize(seg));
	if (data > keep)
		keep = data;
	if (keep >= (uint64_t)st.st_size || sys_ftruncate(fd, (off_t)keep))
		keep = (uint64_t)st.st_size;
	atomic_store_explicit(&seg->phys, keep, memory_order_release);
	return keep;
}

/* The eof a record written now names: the one the last sync made
 * durable, not the current one — appends not yet synced may not survive
 * a crash, and recovery must not keep their size without their data
 * (what survives of them, it keeps as data) — nor below what a sync in
 * progress has just recorded for itself (record_refresh, before its
 * kernel sync): replacing its record with an older eof would let that
 * sync make the older one durable. */
static uint64_t record_eof(struct dioshim_seg *seg)
{
	uint64_t eof = atomic_load(&seg->synced_eof);

	if (eof < atomic_load(&seg->recorded_eof))
		eof = atomic_load(&seg->recorded_eof);
	if (eof > atomic_load(&seg->eof))
		eof = atomic_load(&seg->eof);
	return eof;
}

/* Re-read the kernel's size, which a writer outside the shim (or one
 * that died mid-extension) may have moved; the slow path's phys. */
static uint64_t phys_resync(struct dioshim_seg *seg, int fd, uint64_t phys)
{
	struct stat st;

	if (sys_fstat(fd, &st) == 0 && (uint64_t)st.st_size != phys) {
		log_once_file(
			LOG_OUTSIDE, LOG_SEGFD(seg, fd),
			"size moved outside the shim (%llu, expected %llu)",
			(unsigned long long)st.st_size,
			(unsigned long long)phys);
		phys = (uint64_t)st.st_size;
		atomic_store(&seg->phys, phys);
		/* Whatever moved it may have written there. */
		touched_raise(seg, phys);
	}
	return phys;
}

/* The chunk to reserve past a write that ends at end: the policy's
 * (reserve_chunk_next), cut to what the disk budget leaves this file, in
 * whole blocks.  Less than a block: none, the kernel extends. */
static uint64_t chunk_for(struct dioshim_seg *seg, int fd, uint64_t phys,
			  uint64_t end, uint64_t now)
{
	struct statfs sfs;
	uint64_t chunk;

	if (seg->last_reserve_ns)
		chunk = reserve_chunk_next(seg->chunk ? seg->chunk
						      : config.reserve,
					   phys - seg->last_reserve_phys,
					   now - seg->last_reserve_ns,
					   config.reserve, config.reserve_max);
	else
		chunk = config.reserve;
	if (sys_fstatfs(fd, &sfs) == 0) {
		/* What this file may hold past eof, the others' share of
		 * the budget left to them; this write's own blocks past
		 * phys come out of it too. */
		uint64_t others = budget_others(seg);
		uint64_t avail = (uint64_t)sfs.f_bavail * (uint64_t)sfs.f_bsize;
		uint64_t total = (uint64_t)sfs.f_blocks * (uint64_t)sfs.f_bsize;
		uint64_t room = reserve_room(avail, total, others,
					     seg_blksize(seg));
		uint64_t held = (end > phys ? end : phys) -
				atomic_load(&seg->eof);

		/* Short of the chunk, and the others' share is what cuts
		 * it: is it counted right? */
		if (room < held + chunk &&
		    reserve_room(avail, total, 0, seg_blksize(seg)) >
			    (room > held ? room : held)) {
			segment_budget_recount(seg->hint_key, seg->dev);
			others = budget_others(seg);
			room = reserve_room(avail, total, others,
					    seg_blksize(seg));
		}

		chunk = room > held ? (room - held < chunk ? room - held
							   : chunk)
				    : 0;
		chunk = chunk / seg_blksize(seg) * seg_blksize(seg);
	}
	return chunk;
}

/*
 * Where a reservation of chunk past a write [off, end) ends, and from
 * where (*start) it allocates: a write far past the end leaves the gap a
 * hole, so it starts at the write's block, not at phys, and reaches a
 * chunk past the write, so that the writes that follow it find their
 * blocks too.  0 when the write itself passes RLIMIT_FSIZE.
 */
static uint64_t reserve_target(struct dioshim_seg *seg, uint64_t off,
			       uint64_t end, uint64_t phys, uint64_t chunk,
			       uint64_t *start)
{
	struct rlimit rl;
	uint64_t new_phys;

	*start = off / seg_blksize(seg) * seg_blksize(seg);
	if (*start < phys)
		*start = phys;
	new_phys = round_up((end > phys ? end : phys) + chunk, seg_blksize(seg));
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		/* Past the limit the kernel sends SIGXFSZ: only the
		 * application's own write may do that. */
		if (end > rl.rlim_cur)
			return 0;
		if (new_phys > rl.rlim_cur)
			new_phys = rl.rlim_cur;
	}
	return new_phys;
}

/* What the filesystem lacks (why) rules out a reservation for good:
 * extending writes of seg's file go to the kernel as issued. */
static void reserve_never(struct dioshim_seg *seg, int fd, const char *why)
{
	atomic_fetch_or(&seg->flags, DIOSHIM_SEGF_NO_RESERVE);
	log_event(LOG_FALLBACK, LOG_SEGFD(seg, fd),
		  "%s: extending writes of this file go to the kernel as "
		  "issued",
		  why);
}

/* The record of a reservation up to new_phys, written before it, so the
 * journal commits it no later than the size it describes; no record, no
 * reservation (false): a crash could leave a tail that recovery would
 * not know to cut. */
static bool record_ahead(struct dioshim_seg *seg, int fd, uint64_t eof,
			 uint64_t new_phys)
{
	if (record_write(fd, eof, new_phys))
		return true;
	if (errno == EOPNOTSUPP || errno == ENOTSUP) {
		reserve_never(seg, fd, "no user xattrs here");
	} else {
		log_once_file(LOG_EXACT, LOG_SEGFD(seg, fd),
			      "cannot record eof (%s): writing exactly",
			      strerror(errno));
	}
	return false;
}

/* The fallocate of len bytes failed with err: the file and its record
 * put back as they were, no reservation tried for a while. */
static void reserve_failed(struct shim_file *f, int fd, uint64_t phys,
			   uint64_t eof, uint64_t now, int err, uint64_t len)
{
	struct dioshim_seg *seg = f->seg;

	phys = undo_failed_reserve(f, fd, phys);
	/* Put the record back to the truth: the old reservation (or
	 * none), the words saying what the file says, lest the last
	 * user take a record for none and leave it. */
	if (phys > atomic_load(&seg->eof) && record_write(fd, eof, phys)) {
		atomic_store(&seg->recorded_eof, eof);
		atomic_store(&seg->recorded_phys, phys);
	} else if (record_remove(fd)) {
		atomic_store(&seg->recorded_eof, 0);
		atomic_store(&seg->recorded_phys, 0);
	}
	seg->reserve_failed_ns = now;
	if (err == EOPNOTSUPP) {
		reserve_never(seg, fd, "fallocate unsupported");
	} else {
		log_once_file(LOG_EXACT, LOG_SEGFD(seg, fd),
			      "reservation of %llu bytes failed (%s): "
			      "writing exactly",
			      (unsigned long long)len, strerror(err));
	}
}

/*
 * The reservation proper; ext_lock held, and kept on return.  RESERVE_OK:
 * phys >= end now.  RESERVE_EXACT: no reservation can be made, the write
 * must go to the kernel as issued.  The steps: the kernel's size, the
 * chunk (policy and budget), the range (RLIMIT_FSIZE), the record, the
 * fallocate, the words.
 */
static enum reserve_result reserve_locked(struct shim_file *f, int fd,
					  uint64_t off, uint64_t end,
					  bool recovered)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t phys, eof, start, chunk, new_phys, now;

	lock_held(LOCK_EXT);
	phys = atomic_load(&seg->phys);
	if (end <= phys && !recovered)
		return RESERVE_OK;
	/* One writer: the kernel extends the file, as it would alone. */
	if (!recovered && !inflight_engaged(f))
		goto exact;
	phys = phys_resync(seg, fd, phys);
	if (end <= phys)
		return RESERVE_OK;
	if (atomic_load(&seg->flags) & DIOSHIM_SEGF_NO_RESERVE)
		goto exact;

	now = now_ns();
	/* The kernel refused one a moment ago: writes go as issued for a
	 * while, rather than each pay a refused fallocate and two records. */
	if (seg->reserve_failed_ns &&
	    now - seg->reserve_failed_ns < RESERVE_RETRY_NS)
		goto exact;
	chunk = chunk_for(seg, fd, phys, end, now);
	/* No room left in the budget: the kernel extends. */
	if (chunk < seg_blksize(seg))
		goto exact;
	new_phys = reserve_target(seg, off, end, phys, chunk, &start);
	if (!new_phys)
		goto exact;
	eof = record_eof(seg);
	if (!record_ahead(seg, fd, eof, new_phys))
		goto exact;
	if (sys_fallocate(fd, 0, (off_t)start, (off_t)(new_phys - start))) {
		reserve_failed(f, fd, phys, eof, now, errno, new_phys - start);
		goto exact;
	}
	prefill_note_allocated(f, start, new_phys);
	seg->reserve_failed_ns = 0;
	atomic_store(&seg->recorded_eof, eof);
	atomic_store(&seg->recorded_phys, new_phys);
	atomic_store_explicit(&seg->phys, new_phys, memory_order_release);
	reserve_charge(f->seg);
	seg->chunk = chunk ? chunk : config.reserve;
	seg->last_reserve_ns = now;
	seg->last_reserve_phys = phys;
	if (f->slot >= 0)
		slot_stat_add(&seg->slot[f->slot].reserves, 1);
	return RESERVE_OK;
exact:
	if (f->slot >= 0)
		slot_stat_add(&seg->slot[f->slot].exact, 1);
	return RESERVE_EXACT;
}

/* ext_lock for a write past phys: a holder met there is another write
 * (or a size change) beside this one, and engages the file. */
static bool ext_lock_extend(struct dioshim_seg *seg, bool *recovered)
{
	if (!seg_trylock(&seg->ext_lock, recovered))
		return true;
	file_engage(seg);
	return seg_lock(&seg->ext_lock, recovered);
}

enum reserve_result reserve_extend(struct shim_file *f, int fd, uint64_t off,
				   uint64_t end)
{
	enum reserve_result res;
	bool recovered;

	if (!ext_lock_extend(f->seg, &recovered))
		return RESERVE_UNLOCKED;
	res = reserve_locked(f, fd, off, end, recovered);
	if (res == RESERVE_OK)
		seg_unlock(&f->seg->ext_lock);
	return res;
}

/*
 * An append's offset.  Inside the reservation appends claim their range
 * with a CAS on the tail and run in parallel.  Past it they claim under
 * ext_lock, one at a time: if no reservation can be made, the claim and
 * the kernel's exact write happen under the same lock, so that a failed
 * append always gives its range back and the next one takes it, as
 * appends do in the kernel — a failing append never leaves a hole.
 */
enum reserve_result append_claim(struct shim_file *f, int fd, uint64_t len,
				 bool nowait, bool held, uint64_t *off)
{
	struct dioshim_seg *seg = f->seg;
	enum reserve_result res;
	uint64_t t;
	bool recovered = false;

	for (;;) {
		t = atomic_load_explicit(&seg->tail, memory_order_relaxed);
		/* Appends move (move.h): none claims until they are done. */
		if (t & DIOSHIM_TAIL_CLOSED) {
			if (nowait)
				break;
			move_wait(f, fd);
			continue;
		}
		if (t + len > atomic_load_explicit(&seg->phys,
						   memory_order_acquire))
			break;
		if (atomic_compare_exchange_weak(&seg->tail, &t, t + len)) {
			*off = t;
			return RESERVE_OK;
		}
	}
	if (nowait) {
		*off = tail_of(t);
		return RESERVE_WOULD_BLOCK;
	}
	if (!held && !ext_lock_extend(seg, &recovered)) {
		/* (No lock, no move: none starts without one of ours
		 * waiting in it, and none is under way here.) */
		*off = tail_of(atomic_fetch_add(&seg->tail, len));
		return RESERVE_UNLOCKED;
	}
	for (;;) {
		t = atomic_load(&seg->tail);
		if (t & DIOSHIM_TAIL_CLOSED) {
			/* A move waits for nothing we hold: its appends
			 * claimed before it, none past phys without ext_lock
			 * but ours (a batch's, held through it). */
			move_wait(f, fd);
			continue;
		}
		res = reserve_locked(f, fd, t, t + len, recovered);
		recovered = false;
		/* Claimers inside the reservation may have moved the tail
		 * while we reserved; past it nobody else can. */
		if (atomic_compare_exchange_strong(&seg->tail, &t, t + len))
			break;
	}
	*off = t;
	if (held)
		return RESERVE_EXACT; /* the holder's to release */
	if (res == RESERVE_OK)
		seg_unlock(&seg->ext_lock);
	return res;
}

void reserve_exact_done(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	struct stat st;

	if (sys_fstat(fd, &st) == 0 &&
	    (uint64_t)st.st_size > atomic_load(&seg->phys))
		atomic_store_explicit(&seg->phys, (uint64_t)st.st_size,
				      memory_order_release);
	seg_unlock(&seg->ext_lock);
}

/* The most a large folio of the page cache reaches past the block that
 * holds eof (a PMD's worth on x86-64). */
#define FOLIO_REACH (2ull << 20)

/*
 * Whether what the extent map calls data in [from, to), past eof, is the
 * kernel's own: zeros a large folio dirtied just below eof wrote back
 * whole — the kernel's size being the reservation's, nothing cut them
 * at eof as the kernel alone does — where no write was claimed (tail,
 * touched).  Read to be sure: a write the shim did not see (a ring it
 * passes through) is kept.
 */
static bool kernel_zeros(struct dioshim_seg *seg, int fd, uint64_t from,
			 uint64_t to)
{
	uint64_t claimed = tail_of(atomic_load(&seg->tail));

	if (claimed < atomic_load(&seg->touched))
		claimed = atomic_load(&seg->touched);
	return claimed <= from && to - from <= FOLIO_REACH &&
	       recover_zeros(fd, from, to);
}

bool reserve_trim(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t eof = atomic_load(&seg->eof), aligned, target;
	struct stat st;
	int rc, err;

	/* Without a descriptor only the words can say nothing is reserved;
	 * a reservation must then wait for a user who can check and cut. */
	if (fd < 0)
		return atomic_load(&seg->phys) <= eof &&
		       !atomic_load(&seg->recorded_phys);
	if (sys_fstat(fd, &st))
		return false;
	if ((uint64_t)st.st_size <= eof) {
		/* Nothing reserved (or cut by someone else): eof follows. */
		atomic_store(&seg->phys, (uint64_t)st.st_size);
		atomic_store(&seg->eof, (uint64_t)st.st_size);
		atomic_store(&seg->tail, (uint64_t)st.st_size);
		reserve_charge(f->seg);
		return record_forget(f, fd);
	}
	/* Never cut data: a tail that holds some (a writer that died after
	 * its write but before moving eof, a queued write the shim does not
	 * see) ends where the data ends. */
	aligned = round_up(eof, seg_blksize(seg));
	target = recover_data_end(fd, aligned);
	if (target <= aligned || kernel_zeros(seg, fd, aligned, target))
		target = eof; /* no data past the block holding eof */
	/* Nor what asynchronous writes may still be writing: the kernel's
	 * truncate waits for them, then would cut them. */
	if (atomic_load(&seg->async_end) > target && async_in_flight(seg))
		target = atomic_load(&seg->async_end);
	if (target >= (uint64_t)st.st_size) {
		atomic_store(&seg->phys, (uint64_t)st.st_size);
		target = (uint64_t)st.st_size;
	} else {
		rc = recover_truncate(fd, target);
		err = errno;
		if (!rc) {
			prefill_forget(f, target, UINT64_MAX / 2);
			keep_restore(seg, fd, target);
		}
		if (rc) {
			log_event(LOG_ERROR, LOG_SEGFD(seg, fd),
				  "trim to %llu failed (%s)",
				  (unsigned long long)target, strerror(err));
			return false;
		}
		atomic_store(&seg->phys, target);
	}
	if (target > eof) {
		log_event(LOG_RECOVER, LOG_SEGFD(seg, fd),
			  "data found past eof %llu: size kept at %llu",
			  (unsigned long long)eof, (unsigned long long)target);
		atomic_store(&seg->eof, target);
		atomic_store(&seg->tail, target);
	}
	reserve_charge(f->seg);
	return record_forget(f, fd);
}

void keep_note(struct shim_file *f, uint64_t off, uint64_t end)
{
	struct dioshim_seg *seg = f->seg;
	bool recovered;

	if (!seg_lock(&seg->ext_lock, &recovered))
		return;
	keep_add(seg, off, end);
	seg_unlock(&seg->ext_lock);
}

static void keep_again(uint64_t lo, uint64_t hi, void *arg)
{
	int wfd = *(int *)arg;

	if (wfd < 0 ||
	    sys_fallocate(wfd, FALLOC_FL_KEEP_SIZE, (off_t)lo, (off_t)(hi - lo)))
		log_event(LOG_ERROR, LOG_FD(wfd),
			  "could not re-allocate the application's blocks past "
			  "eof: %s",
			  strerror(errno));
}

void keep_restore(struct dioshim_seg *seg, int fd, uint64_t from)
{
	int wfd = -1;

	/* Through a descriptor for reading (a last close through one), a
	 * second one for writing, only for this: the application's own
	 * blocks past eof come first. */
	if (keep_any_past(seg, from))
		wfd = recover_fd_writable(fd) ? fd : recover_reopen(fd, O_WRONLY);
	keep_each_past(seg, from, keep_again, &wfd);
	if (wfd >= 0 && wfd != fd)
		sys_close(wfd);
}

bool record_forget(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;

	if (!atomic_load(&seg->recorded_phys))
		return true;
	if (!record_remove(fd)) {
		/* A full XFS may refuse even to remove an xattr.  The tail is
		 * gone; what the record says is then only that the size was
		 * once reserved up to its phys, and recovery keeps every
		 * block of data: the next shimmed open removes it. */
		log_event(LOG_ERROR, LOG_SEGFD(seg, fd),
			  "cannot remove the eof record: %s", strerror(errno));
		if (errno != ENOSPC && errno != EDQUOT)
			return false;
	}
	atomic_store(&seg->recorded_eof, 0);
	atomic_store(&seg->recorded_phys, 0);
	return true;
}

bool record_refresh(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t eof, phys;
	bool recovered, ok = false;

	if (!seg_lock(&seg->ext_lock, &recovered))
		return false;
	/* Cleared before eof is read: a size growth that races with us
	 * sets it again, and the next sync records that. */
	atomic_fetch_and(&seg->flags, ~DIOSHIM_SEGF_SIZE_NO_DATA);
	eof = atomic_load(&seg->eof);
	phys = atomic_load(&seg->phys);
	if (phys <= eof) {
		ok = record_forget(f, fd);
	} else if (record_write(fd, eof, phys)) {
		atomic_store(&seg->recorded_eof, eof);
		atomic_store(&seg->recorded_phys, phys);
		ok = true;
	} else {
		atomic_fetch_or(&seg->flags, DIOSHIM_SEGF_SIZE_NO_DATA);
		log_once_file(LOG_ERROR, LOG_SEGFD(seg, fd),
			      "cannot record eof at sync (%s)",
			      strerror(errno));
	}
	seg_unlock(&seg->ext_lock);
	return ok;
}

void reserve_after_move(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t phys, rec;
	struct stat st;
	bool recovered;

	if (!seg_lock(&seg->ext_lock, &recovered))
		return;
	if (!sys_fstat(fd, &st) && (uint64_t)st.st_size > atomic_load(&seg->phys))
		atomic_store_explicit(&seg->phys, (uint64_t)st.st_size,
				      memory_order_release);
	phys = atomic_load(&seg->phys);
	if (phys > atomic_load(&seg->eof) &&
	    atomic_load(&seg->recorded_phys) != phys) {
		rec = record_eof(seg);
		if (record_write(fd, rec, phys)) {
			atomic_store(&seg->recorded_eof, rec);
			atomic_store(&seg->recorded_phys, phys);
		} else {
			log_once_file(
				LOG_ERROR, LOG_SEGFD(seg, fd),
				"cannot record eof after moving appends (%s)",
				strerror(errno));
		}
	}
	reserve_charge(seg);
	seg_unlock(&seg->ext_lock);
}

void sync_done(struct dioshim_seg *seg, bool reserved)
{
	if (reserved || reserve_standing(seg))
		sync_note(seg);
	else if (atomic_load(&seg->flags) & DIOSHIM_SEGF_SYNCED)
		atomic_fetch_and(&seg->flags, ~DIOSHIM_SEGF_SYNCED);
}

void reserve_cut_durable(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;

	if (fd < 0 || !(atomic_load(&seg->flags) & DIOSHIM_SEGF_SYNCED))
		return;
	if (sys_fsync(fd)) {
		/* The cut stands; a power cut may bring the tail back, with
		 * its record if that too was synced: the next shimmed open
		 * of the file cuts it again. */
		log_event(LOG_ERROR, LOG_SEGFD(seg, fd),
			  "cannot make the cut of the reserved tail durable "
			  "(%s)",
			  strerror(errno));
		return;
	}
	atomic_fetch_and(&seg->flags, ~DIOSHIM_SEGF_SYNCED);
}

void reserve_resync(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	struct stat st;

	if (sys_fstat(fd, &st))
		return;
	atomic_store(&seg->phys, (uint64_t)st.st_size);
	atomic_store(&seg->eof, (uint64_t)st.st_size);
	atomic_store(&seg->tail, (uint64_t)st.st_size);
	/* Nothing reserved: every block past the size is new. */
	atomic_store(&seg->touched, (uint64_t)st.st_size);
	reserve_charge(f->seg);
}
