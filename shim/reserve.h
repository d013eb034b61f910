/* SPDX-License-Identifier: MIT */
/*
 * Reservation ahead of EOF and the EOF words (DESIGN.md 2.1, 2.6).
 *
 * The kernel's size (phys) is kept ahead of the application's (eof) by
 * fallocate(fd, 0, ...) in chunks, so appends reach the kernel as
 * overwrites of unwritten extents, which ext4 and XFS run in parallel.
 */
#ifndef DIOSHIM_RESERVE_H
#define DIOSHIM_RESERVE_H

#include "publish.h"
#include "segment.h"

#include <stdbool.h>
#include <stdint.h>

enum reserve_result {
	RESERVE_OK, /* phys >= end; no lock held */
	RESERVE_EXACT, /* ext_lock held: write exactly, then reserve_exact_done */
	RESERVE_UNLOCKED, /* the extension lock is unusable: write unlocked */
	RESERVE_WOULD_BLOCK, /* RWF_NOWAIT, and a reservation is needed */
};

/* Make phys cover [off, end) for a write, or say it must go exact. */
enum reserve_result reserve_extend(struct shim_file *f, int fd, uint64_t off,
				   uint64_t end);

/* The offset of an O_APPEND write of len bytes, taken from the tail, with
 * the reservation made if needed; RESERVE_EXACT as for reserve_extend
 * (ext_lock held: the write goes as issued; give back what it did not
 * write before reserve_exact_done).  held: the caller holds ext_lock
 * already (a batch), and keeps it: past the reservation the answer is
 * then RESERVE_EXACT, whatever was reserved. */
enum reserve_result append_claim(struct shim_file *f, int fd, uint64_t len,
				 bool nowait, bool held, uint64_t *off);

/* After an exact (kernel-extended) write: re-read phys, drop ext_lock. */
void reserve_exact_done(struct shim_file *f, int fd);

/*
 * Cut the reserved tail back to eof, never below the end of the last data
 * block; the caller makes sure nobody writes meanwhile (last detach, or the
 * barrier and ext_lock held, before a call whose kernel semantics depend on
 * the size).  False only when a tail had to go and could not (no writable
 * descriptor): at the last detach the segment then stays for the next user.
 */
bool reserve_trim(struct shim_file *f, int fd);

/* The application allocated [off, end) past eof with KEEP_SIZE. */
void keep_note(struct shim_file *f, uint64_t off, uint64_t end);

/* After the kernel's size was cut to from (which freed every block past
 * it): allocate again what the application had allocated past from.
 * ext_lock held, or nobody writing. */
void keep_restore(struct dioshim_seg *seg, int fd, uint64_t from);

/* Remove the EOF record if one was written (the tail is gone).  False
 * if it could not be removed. */
bool record_forget(struct shim_file *f, int fd);

/*
 * Rewrite the record from the current words, under ext_lock (before a
 * sync, when recovery from the old one would be wrong).  True if the
 * record now matches (written, or removed when nothing is reserved).
 */
bool record_refresh(struct shim_file *f, int fd);

/*
 * Whether the record no longer lets recovery find the logical size: the
 * reservation changed without a record, the size grew without data or
 * lost its last block of data (fallocate, punch), or eof moved since the
 * record to inside a block.  Recovery keeps the recorded eof and every
 * block of data past it, so eof is found without a new record only where
 * it ends a block of data; a size inside one (appends of 512 bytes) would
 * come back rounded up to the block.  Appends of whole blocks, the
 * common case, need no record at a sync.
 */
static inline bool record_stale(struct dioshim_seg *seg)
{
	uint64_t phys = atomic_load_explicit(&seg->phys, memory_order_acquire);
	uint64_t eof = atomic_load_explicit(&seg->eof, memory_order_acquire);
	uint64_t rec;

	if (phys <= eof)
		return atomic_load_explicit(&seg->recorded_phys,
					    memory_order_relaxed) != 0;
	if (atomic_load_explicit(&seg->recorded_phys, memory_order_relaxed) !=
		    phys ||
	    (atomic_load_explicit(&seg->flags, memory_order_relaxed) &
	     DIOSHIM_SEGF_SIZE_NO_DATA))
		return true;
	rec = atomic_load_explicit(&seg->recorded_eof, memory_order_relaxed);
	/* Recovery keeps data only past the block that holds the recorded
	 * eof: a record inside a block hides what was written after it in
	 * that block, and an eof inside a block cannot be found from data. */
	return rec > eof ||
	       (rec < eof && ((eof | rec) & (seg_blksize(seg) - 1)));
}

/*
 * Durable cuts (DESIGN.md 5): whether the kernel's size past eof, or a
 * record, stands now — a sync beside it may make it durable.
 */
static inline bool reserve_standing(struct dioshim_seg *seg)
{
	return atomic_load_explicit(&seg->phys, memory_order_acquire) >
		       atomic_load_explicit(&seg->eof, memory_order_acquire) ||
	       atomic_load_explicit(&seg->recorded_phys, memory_order_relaxed);
}

/* A sync reaches the kernel (a queued one, an O_SYNC or O_DSYNC write):
 * if something reserved stands, the last user's cut is to be made
 * durable (DIOSHIM_SEGF_SYNCED).  A load in the common case. */
static inline void sync_note(struct dioshim_seg *seg)
{
	if (!(atomic_load_explicit(&seg->flags, memory_order_relaxed) &
	      DIOSHIM_SEGF_SYNCED) &&
	    reserve_standing(seg))
		atomic_fetch_or(&seg->flags, DIOSHIM_SEGF_SYNCED);
}

/* An fsync or fdatasync that succeeded, reserved: whether something
 * reserved stood when it began.  One that began and ended with nothing
 * reserved made the file durable as it is: no cut is owed. */
void sync_done(struct dioshim_seg *seg, bool reserved);

/* The last user has cut the reserved tail through fd: if a sync may have
 * made that tail durable, so is the cut (one fsync), lest a power cut
 * after a clean close bring the tail back. */
void reserve_cut_durable(struct shim_file *f, int fd);

/* Re-read phys, eof and tail from the kernel size after a size change the
 * kernel made (barrier and ext_lock held). */
void reserve_resync(struct shim_file *f, int fd);

/*
 * The chunk policy, pure for testing: the next chunk given the previous
 * one, the bytes the previous reservation served and over how long.  Aims
 * at one reservation per RESERVE_PERIOD_NS at the current append rate,
 * moving by at most a factor of two per step, within [min, max].
 */
#define RESERVE_PERIOD_NS 250000000ull
uint64_t reserve_chunk_next(uint64_t prev, uint64_t served, uint64_t elapsed_ns,
			    uint64_t min, uint64_t max);

/*
 * The disk budget (DESIGN.md 7): how much one file may hold reserved past
 * its logical size, when the filesystem has avail bytes free of total and
 * the place's other files hold others.  All of them together hold at
 * most 1/16 of what would be free without them; and, as XFS throttles
 * its speculative preallocation, a quarter of that below 5% of the
 * filesystem free, halved again below each of 4%, 3% and 2%, nothing
 * below 1%.  In whole blocks.
 */
uint64_t reserve_room(uint64_t avail, uint64_t total, uint64_t others,
		      uint32_t blksize);

/* Count what seg's file holds reserved now (phys - eof) in its place's budget;
 * ext_lock held, or nobody writing. */
void reserve_charge(struct dioshim_seg *seg);

/* Appends moved down over failed ones (move.h), maybe past phys (exact
 * ones): phys follows the kernel's size, and the record with it. */
void reserve_after_move(struct shim_file *f, int fd);

/*
 * An append that claimed [off, end) from the tail wrote [off, done): give
 * back what it did not use, if nothing was claimed past it.  Returns how
 * far its publication must reach: done, or end when a later claim stands
 * past it (the size must pass over this one to reach that one).  Every
 * path of an append — a call, a signal handler's, a queued request — ends
 * here; an append that may be refused goes alone (io.c), so that this
 * returns end only for a failure nobody could foresee.
 */
static inline uint64_t append_give_back(struct dioshim_seg *seg, uint64_t off,
					uint64_t end, uint64_t done)
{
	uint64_t want = end;

	if (done < end &&
	    !atomic_compare_exchange_strong(&seg->tail, &want, done))
		return end;
	return done > off ? done : off;
}

/* *w = max(*w, v), relaxed: a word that only grows (outside a barrier).
 * Returns what *w was. */
static inline uint64_t word_max(_Atomic uint64_t *w, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(w, memory_order_relaxed);

	while (v > cur &&
	       !atomic_compare_exchange_weak_explicit(w, &cur, v,
						      memory_order_relaxed,
						      memory_order_relaxed))
		;
	return cur;
}

/*
 * Where the untouched reserved blocks begin: [fresh_from, phys) are
 * allocated by the reservation, and nothing wrote or punched them since
 * nor is claimed there in flight (appends below tail, other writes below
 * touched).  tail: the tail as the caller read it (before a hold of its
 * own, wtx.h).  UINT64_MAX while appends move (the tail is closed).
 */
static inline uint64_t fresh_from(struct dioshim_seg *seg, uint64_t tail)
{
	uint64_t eof = atomic_load(&seg->eof);
	uint64_t touched = atomic_load(&seg->touched);

	if (tail & DIOSHIM_TAIL_CLOSED)
		return UINT64_MAX;
	if (tail > eof)
		eof = tail;
	return touched > eof ? touched : eof;
}

/* tail = max(tail, end), for writes at explicit offsets. */
static inline void tail_advance(struct dioshim_seg *seg, uint64_t end)
{
	word_max(&seg->tail, end);
}

#endif
