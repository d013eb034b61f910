// SPDX-License-Identifier: MIT
/*
 * Gaps (gap.h): a few ranges per segment, merged when they touch.
 *
 * Layer L2, above recover (recover_reopen); calls L1 and L0.
 * The order inside L2 is shim/layers'.
 */
#define _GNU_SOURCE
#include "gap.h"

#include "extmap.h"
#include "log.h"
#include "recover.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/mman.h>

static bool gap_free(const struct dioshim_range *g)
{
	return g->hi <= g->lo;
}

void gap_note(struct dioshim_seg *seg, uint64_t lo, uint64_t hi)
{
	struct dioshim_range *free_one = NULL;
	unsigned i;

	if (hi <= lo)
		return;
	/* The program's own blocks past eof (KEEP_SIZE) are not a gap:
	 * only what lies outside them is. */
	for (i = 0; i < DIOSHIM_KEEPS; i++) {
		const struct dioshim_range *k = &seg->keep[i];

		if (!gap_free(k) && k->lo < hi && k->hi > lo) {
			if (k->lo > lo)
				gap_note(seg, lo, k->lo);
			if (k->hi < hi)
				gap_note(seg, k->hi, hi);
			return;
		}
	}
	for (i = 0; i < DIOSHIM_GAPS; i++) {
		struct dioshim_range *g = &seg->gap[i];

		if (gap_free(g)) {
			if (!free_one)
				free_one = g;
		} else if (g->lo <= hi && lo <= g->hi) {
			/* Touching: one range (the blocks between are the
			 * size's growth too). */
			if (lo < g->lo)
				g->lo = lo;
			if (hi > g->hi)
				g->hi = hi;
			return;
		}
	}
	/* No room: left allocated, as the reservation made it. */
	if (free_one) {
		free_one->lo = lo;
		free_one->hi = hi;
	}
}

void gap_take(struct dioshim_seg *seg, uint64_t lo, uint64_t hi)
{
	unsigned i, j;

	for (i = 0; i < DIOSHIM_GAPS; i++) {
		struct dioshim_range *g = &seg->gap[i];

		if (gap_free(g) || g->hi <= lo || hi <= g->lo)
			continue;
		if (lo <= g->lo) {
			g->lo = hi < g->hi ? hi : g->hi;
		} else if (hi >= g->hi) {
			g->hi = lo;
		} else {
			/* Split: the upper part needs an entry of its own;
			 * without one it is left allocated. */
			for (j = 0; j < DIOSHIM_GAPS; j++)
				if (gap_free(&seg->gap[j]))
					break;
			if (j < DIOSHIM_GAPS) {
				seg->gap[j].lo = hi;
				seg->gap[j].hi = g->hi;
			}
			g->hi = lo;
		}
	}
}

void gap_clip(struct dioshim_seg *seg, uint64_t len)
{
	unsigned i;

	for (i = 0; i < DIOSHIM_GAPS; i++)
		if (seg->gap[i].hi > len)
			seg->gap[i].hi = len;
}

void gap_clear(struct dioshim_seg *seg)
{
	memset(seg->gap, 0, sizeof(seg->gap));
}

struct punch {
	int fd;
	uint64_t lo, hi, bs;
	unsigned punched;
};

#define LOOK 64 /* pages looked at per mincore */

/*
 * Whether [lo, hi) has pages in the page cache: a mapping's or a
 * buffered writer's data not written back yet over unwritten blocks (or
 * zeros a reader cached): never punched.  When it cannot tell, it says
 * so.
 */
static bool cached(int fd, uint64_t lo, uint64_t hi)
{
	const uint64_t page = 4096, span = LOOK * page;
	unsigned char vec[LOOK];
	uint64_t at, n, i;
	void *map;
	bool any = false;

	for (at = lo; at < hi && !any; at += span) {
		n = hi - at < span ? hi - at : span;
		map = sys_mmap_ro(fd, n, (off_t)at);
		if (map == MAP_FAILED)
			return true;
		if (sys_mincore(map, n, vec))
			any = true;
		for (i = 0; !any && i < (n + page - 1) / page; i++)
			any = vec[i] & 1;
		sys_munmap(map, n);
	}
	return any;
}

static bool punch_unwritten(const struct fiemap_extent *e, void *arg)
{
	struct punch *p = arg;
	uint64_t lo = e->fe_logical, hi = e->fe_logical + e->fe_length;

	if (!(e->fe_flags & FIEMAP_EXTENT_UNWRITTEN) ||
	    (e->fe_flags & (FIEMAP_EXTENT_DELALLOC | FIEMAP_EXTENT_UNKNOWN)))
		return true;
	if (lo < p->lo)
		lo = p->lo;
	if (hi > p->hi)
		hi = p->hi;
	if (hi > lo && !cached(p->fd, lo, hi) &&
	    sys_fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			  (off_t)lo, (off_t)(hi - lo)) == 0)
		p->punched++;
	return true;
}

void gap_punch(struct dioshim_seg *seg, int fd)
{
	uint64_t eof = atomic_load(&seg->eof), bs = seg_blksize(seg);
	struct punch p = { .fd = -1, .bs = bs };
	unsigned i;

	for (i = 0; i < DIOSHIM_GAPS; i++) {
		struct dioshim_range *g = &seg->gap[i];

		if (gap_free(g) || g->lo >= eof)
			continue;
		/* Whole blocks: the one holding eof past it, if the gap
		 * reaches eof (past eof is nobody's). */
		p.lo = (g->lo + bs - 1) / bs * bs;
		p.hi = g->hi >= eof ? (eof + bs - 1) / bs * bs : g->hi / bs * bs;
		if (p.hi <= p.lo)
			continue;
		if (p.fd < 0) {
			/* Read and write: the page cache is looked at through
			 * a mapping. */
			int fl = sys_fcntl(fd, F_GETFL, 0);

			p.fd = fl >= 0 && (fl & O_ACCMODE) == O_RDWR
				       ? fd
				       : recover_reopen(fd, O_RDWR);
			if (p.fd < 0)
				break;
		}
		/* What a buffered write or a mapping left in the page cache
		 * over unwritten blocks is data: written out first, so the
		 * extent map says so. */
		if (sys_sync_file_range(p.fd, (off_t)p.lo, (off_t)(p.hi - p.lo),
				    SYNC_FILE_RANGE_WAIT_BEFORE |
					    SYNC_FILE_RANGE_WRITE |
					    SYNC_FILE_RANGE_WAIT_AFTER)) {
			/* Not written out: the map may call data unwritten.
			 * Left allocated. */
			log_event(LOG_ERROR, LOG_FD(p.fd),
				  "cannot write out what the size grew over "
				  "(%s): left allocated",
				  strerror(errno));
			continue;
		}
		if (!extmap_walk(p.fd, p.lo, p.hi, punch_unwritten, &p))
			log_event(
				LOG_ERROR, LOG_FD(p.fd),
				"cannot read the extent map to punch what the "
				"size grew over: %s",
				strerror(errno));
	}
	if (p.fd >= 0 && p.fd != fd)
		sys_close(p.fd);
	gap_clear(seg);
}

/* Cover [lo, hi) with k too. */
static void range_cover(struct dioshim_range *k, uint64_t lo, uint64_t hi)
{
	if (lo < k->lo)
		k->lo = lo;
	if (hi > k->hi)
		k->hi = hi;
}

void keep_add(struct dioshim_seg *seg, uint64_t lo, uint64_t hi)
{
	struct dioshim_range *k, *best = NULL;
	uint64_t cost, best_cost = UINT64_MAX;
	unsigned i;

	if (hi <= lo)
		return;
	/* One it touches: they become one range. */
	for (i = 0; i < DIOSHIM_KEEPS; i++) {
		k = &seg->keep[i];
		if (!gap_free(k) && k->lo <= hi && lo <= k->hi) {
			range_cover(k, lo, hi);
			return;
		}
	}
	/* Else a free entry. */
	for (i = 0; i < DIOSHIM_KEEPS; i++) {
		k = &seg->keep[i];
		if (gap_free(k)) {
			k->lo = lo;
			k->hi = hi;
			return;
		}
	}
	/* Else the nearest grows over it, and the blocks between. */
	for (i = 0; i < DIOSHIM_KEEPS; i++) {
		k = &seg->keep[i];
		cost = lo > k->hi ? lo - k->hi : k->lo - hi;
		if (cost < best_cost) {
			best_cost = cost;
			best = k;
		}
	}
	range_cover(best, lo, hi);
}

bool keep_any_past(const struct dioshim_seg *seg, uint64_t from)
{
	unsigned i;

	for (i = 0; i < DIOSHIM_KEEPS; i++)
		if (!gap_free(&seg->keep[i]) && seg->keep[i].hi > from)
			return true;
	return false;
}

void keep_each_past(struct dioshim_seg *seg, uint64_t from,
		    void (*fn)(uint64_t lo, uint64_t hi, void *arg), void *arg)
{
	unsigned i;

	for (i = 0; i < DIOSHIM_KEEPS; i++) {
		struct dioshim_range *k = &seg->keep[i];

		if (gap_free(k))
			continue;
		if (k->hi > from)
			fn(k->lo > from ? k->lo : from, k->hi, arg);
		else
			k->lo = k->hi = 0; /* inside the size now */
	}
}

void keep_clear(struct dioshim_seg *seg)
{
	memset(seg->keep, 0, sizeof(seg->keep));
}
