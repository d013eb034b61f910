// SPDX-License-Identifier: MIT
/*
 * Group commit.
 *
 * Each caller takes a ticket (sync_seq), then the commit lock.  Whoever
 * holds the lock either finds that a sync which started after its ticket
 * has already completed (sync_done >= ticket: its data was covered, so it
 * returns that sync's result), or runs one sync that covers every ticket
 * handed out so far.  sync_err_seq remembers the start of the last failed
 * sync, so a caller covered by a failure gets the error even if a later
 * sync succeeded before it got the lock.
 *
 * Both jbd2 and the XFS log already batch concurrent syncs of one file, so
 * this pays only where the kernel's own batching does not reach; it is off
 * unless DIOSHIM_GROUP_COMMIT=1 (bench/RESULTS.md has the measurements).
 *
 * Lock order: commit_lock is taken with no other segment lock held.
 *
 * Layer L2, above rangelock; calls only L1 (owner's locks) and L0.
 * The order inside L2 is shim/layers'.
 */
#define _GNU_SOURCE
#include "commit.h"

#include "real.h"

#include <errno.h>

int commit_sync(struct shim_file *f, int fd, bool datasync)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t ticket, start;
	bool recovered;
	int ret, err;

	ticket = atomic_fetch_add(&seg->sync_seq, 1) + 1;
	if (!seg_lock(&seg->commit_lock, &recovered))
		return datasync ? real_fdatasync(fd) : real_fsync(fd);
	/* An fdatasync covers a caller of fdatasync only. */
	if (atomic_load(datasync ? &seg->sync_done : &seg->sync_done_full) >=
	    ticket) {
		/* A sync that began after our call completed meanwhile. */
		err = atomic_load(&seg->sync_err_seq) >= ticket
			      ? atomic_load(&seg->sync_err)
			      : 0;
		seg_unlock(&seg->commit_lock);
		if (err) {
			errno = err;
			return -1;
		}
		return 0;
	}
	start = atomic_load(&seg->sync_seq);
	ret = datasync ? real_fdatasync(fd) : real_fsync(fd);
	err = errno;
	if (ret) {
		atomic_store(&seg->sync_err, err);
		atomic_store(&seg->sync_err_seq, start);
	}
	atomic_store(&seg->sync_done, start);
	if (!datasync)
		atomic_store(&seg->sync_done_full, start);
	seg_unlock(&seg->commit_lock);
	errno = err;
	return ret;
}
