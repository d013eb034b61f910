// SPDX-License-Identifier: MIT
/*
 * What a program is told of a served file's size and positions: the
 * logical EOF (the size minus the reserved tail) for lseek's SEEK_END,
 * SEEK_DATA and SEEK_HOLE and for fstat's and stat's st_size; each reads
 * the completions of queued writes first (async_settle).  Layer L4: may
 * call L0-L3 and ring.c (async.h).
 *
 * Locks: the ofd's pos_lock alone.
 */
#define _GNU_SOURCE
#include "sizes.h"
#include "lockrank.h"
#include "abi.h"
#include "fdtable.h"
#include "guard.h"

#include "async.h"
#include "inflight.h"
#include "real.h"
#include "segment.h"
#include "shm.h"
#include "sys.h"

#include <errno.h>
#include <stdint.h>

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
		rank_lock(&o->pos_lock, LOCK_POS);
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
		rank_unlock(&o->pos_lock, LOCK_POS);
	guard_exit(&g, ret, err);
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

void io_fix_path_size(const char *path, int dirfd, int at_flags,
		      struct stat *st)
{
	uint64_t eof;

	if (!S_ISREG(st->st_mode) || !hint_maybe_live())
		return;
	if (segment_peek_eof(st, path, dirfd, at_flags, &eof))
		st->st_size = (off_t)eof;
}
