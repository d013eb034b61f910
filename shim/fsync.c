// SPDX-License-Identifier: MIT
/*
 * fsync and fdatasync of a served file: the EOF record rewritten first
 * when recovery could not find the size from it, group commit when on,
 * and what the sync made durable noted.  Layer L4, the lowest I/O path
 * file: may call L0-L3 (commit, reserve, the guard) and nothing in L4.
 */
#define _GNU_SOURCE
#include "fsync.h"
#include "abi.h"
#include "fdtable.h"
#include "guard.h"

#include "commit.h"
#include "config.h"
#include "real.h"
#include "reserve.h"

#include <errno.h>

/*
 * fsync or fdatasync of f through fd, as the program's: the record
 * rewritten first when recovery could not find the size from it (and
 * the sync made a full one, ext4's fdatasync leaving an xattr change
 * behind), group commit when on; what it made durable is noted.
 */
int fsync_file(struct shim_file *f, int fd, bool datasync)
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

int io_fsync(struct ofd *o, int fd, bool datasync)
{
	struct shim_file *f = atomic_load_explicit(&o->file,
						   memory_order_acquire);
	struct guard g;
	int ret;

	if (atomic_load_explicit(&o->flags, memory_order_relaxed) & O_PATH)
		return datasync ? real_fdatasync(fd) : real_fsync(fd);
	guard_enter(&g, true);
	ret = fsync_file(f, fd, datasync);
	guard_exit(&g, ret, errno);
	return ret;
}
