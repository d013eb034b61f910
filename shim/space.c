// SPDX-License-Identifier: MIT
/*
 * Disk space the shim holds, given back when the filesystem runs short
 * (DESIGN.md 7, budgets): as XFS frees the blocks it preallocated past
 * EOF and retries a write that met ENOSPC, a write or a fallocate of the
 * application that meets ENOSPC or EDQUOT has the reserved tails of the
 * filesystem's files cut, and is made once more.  The shim never causes
 * an ENOSPC that the kernel alone would not give.
 *
 * The files are found by their segments, in this user's directory and
 * the group directories in it: each names its file (dev, ino, and the
 * path it was opened by, checked against both before anything is cut).
 * A tail is cut as a guest cuts it (lifecycle.c): joined as a user of the
 * file, under its barrier (no write in flight) and ext_lock, down to the
 * logical size and never below data.  The caller holds nothing of any
 * file, its own included: two processes that meet ENOSPC at once then
 * wait for nothing of each other's.
 */
#define _GNU_SOURCE
#include "space.h"

#include "config.h"
#include "inflight.h"
#include "log.h"
#include "reserve.h"
#include "sys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Cut the reserved tail of the file whose segment is at segpath, if it is
 * on dev and has one.  True if blocks were given back. */
static bool cut_one(const char *segpath, uint64_t dev)
{
	struct dioshim_seg *seg = segment_map_path(segpath, false);
	char path[sizeof(seg->path) + 1];
	uint64_t ino, before;
	struct file_id id;
	struct shim_file *f;
	bool cut = false, recovered, locked;
	int fd;

	if (!seg)
		return false;
	ino = seg->ino;
	if (seg->dev != dev ||
	    atomic_load(&seg->phys) <= atomic_load(&seg->eof)) {
		segment_unmap(seg);
		return false;
	}
	memcpy(path, seg->path, sizeof(seg->path));
	path[sizeof(seg->path)] = 0;
	segment_unmap(seg);

	/* The file the segment names, if it still is that file. */
	fd = sys_openat(AT_FDCWD, path,
			O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
				O_CLOEXEC,
			0);
	if (fd < 0)
		return false;
	if (!file_identify(fd, &id) || id.dev != dev || id.ino != ino ||
	    !(f = segment_attach(fd, &id, false))) {
		sys_close(fd);
		return false;
	}
	if (f->slot >= 0 && !atomic_load(&f->seg->exact) &&
	    barrier_raise_fd(f, fd)) {
		seg = f->seg;
		before = atomic_load(&seg->phys);
		locked = seg_lock(&seg->ext_lock, &recovered);
		barrier_changing(f); /* killed here: the words are redone */
		if (reserve_trim(f, fd) && atomic_load(&seg->phys) < before)
			cut = true;
		if (locked)
			seg_unlock(&seg->ext_lock);
		barrier_lower(f);
	}
	segment_put(f, fd);
	sys_close(fd);
	return cut;
}

/* Cut the tails of dev's files whose segments are in dir; recurse once
 * into the group directories.  How many were cut. */
static int cut_in(const char *dir, uint64_t dev, bool groups)
{
	char path[PATH_MAX];
	struct dirent *de;
	unsigned long long d, i;
	int n = 0, len;
	DIR *dp = opendir(dir);

	if (!dp)
		return 0;
	while ((de = readdir(dp))) {
		len = snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (len <= 0 || (size_t)len >= sizeof(path))
			continue;
		if (groups && !strncmp(de->d_name, DIOSHIM_GROUP_PREFIX,
				       strlen(DIOSHIM_GROUP_PREFIX))) {
			n += cut_in(path, dev, false);
			continue;
		}
		/* dioshim.<dev>.<ino>, and nothing else (a name being
		 * made has a suffix) */
		if (sscanf(de->d_name, DIOSHIM_SEG_PREFIX "%llx.%llx%n", &d, &i,
			   &len) != 2 ||
		    de->d_name[len] || d != dev)
			continue;
		n += cut_one(path, dev);
	}
	closedir(dp);
	return n;
}

bool space_reclaim(uint64_t dev)
{
	int saved = errno, n = cut_in(config.shm_dir, dev, true);

	if (n)
		log_msg("out of space: reserved tails of %d file(s) given back, "
			"trying again",
			n);
	errno = saved;
	return n > 0;
}
