// SPDX-License-Identifier: MIT
/*
 * The extent map, read in batches with the raw ioctl (the shim's own
 * calls never go through the interposed symbols).
 *
 * Layer L0: calls only the kernel (FIEMAP through sys.h).
 */
#define _GNU_SOURCE
#include "extmap.h"
#include "sys.h"

#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BATCH 32

bool extmap_walk(int fd, uint64_t from, uint64_t to, extmap_fn fn, void *arg)
{
	union {
		struct fiemap fm;
		char buf[sizeof(struct fiemap) +
			 BATCH * sizeof(struct fiemap_extent)];
	} u;
	const struct fiemap_extent *last;
	uint64_t pos = from, last_end;
	unsigned i, n;

	while (pos < to) {
		memset(&u.fm, 0, sizeof(u.fm));
		u.fm.fm_start = pos;
		u.fm.fm_length = to - pos;
		u.fm.fm_extent_count = BATCH;
		if (sys_ioctl(fd, FS_IOC_FIEMAP, &u.fm))
			return false;
		n = u.fm.fm_mapped_extents;
		if (!n || n > BATCH)
			break;
		for (i = 0; i < n; i++)
			if (!fn(&u.fm.fm_extents[i], arg))
				return true;
		last = &u.fm.fm_extents[n - 1];
		if (last->fe_flags & FIEMAP_EXTENT_LAST)
			break;
		last_end = last->fe_logical + last->fe_length;
		if (last_end <= pos)
			break; /* no progress: a map we do not understand */
		pos = last_end;
	}
	return true;
}

struct covered {
	uint64_t pos; /* allocated without a gap from `from` to here */
	bool gap;
};

static bool cover(const struct fiemap_extent *e, void *arg)
{
	struct covered *c = arg;

	/* A delayed allocation has no blocks yet: a direct write there
	 * allocates them as it would in a hole. */
	if (e->fe_logical > c->pos ||
	    (e->fe_flags & (FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_UNKNOWN))) {
		c->gap = true;
		return false;
	}
	if (e->fe_logical + e->fe_length > c->pos)
		c->pos = e->fe_logical + e->fe_length;
	return true;
}

uint64_t extmap_allocated_to(int fd, uint64_t from, uint64_t to)
{
	struct covered c = { .pos = from };

	if (!extmap_walk(fd, from, to, cover, &c))
		return from;
	return c.pos < to ? c.pos : to;
}

bool extmap_allocated(int fd, uint64_t from, uint64_t to)
{
	return extmap_allocated_to(fd, from, to) >= to;
}
