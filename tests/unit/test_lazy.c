// SPDX-License-Identifier: MIT
/*
 * Shared memory touched only when used (DESIGN.md 7, memory): a new
 * segment allocates its head and its first page of slots; the pages of
 * the extent-lock table come one at a time, when a write first locks a
 * stripe in them; reads of stripes never locked allocate nothing; the
 * prefill bitmap comes when a chunk is first prefilled; a first live
 * user gives every lazy page back.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "prefill.h"
#include "rangelock.h"

#include <limits.h>
#include <sys/stat.h>

#define KiB 1024ull

static struct shim_file *f;

/* The segment file's allocated bytes. */
static long long seg_bytes(void)
{
	char path[PATH_MAX];
	struct stat st;

	if (seg_path_of(f->seg, path, sizeof(path)) || stat(path, &st))
		return -1;
	return (long long)st.st_blocks * 512;
}

int main(void)
{
	struct rangelock rl = { .active = false };
	struct file_id id;
	char path[512];
	long long base;
	int fd;

	setenv("DIOSHIM_PREFILL", "on", 1);
	setenv("DIOSHIM_ENGAGE", "always", 1);
	unit_setup();
	fd = unit_file("lazy", 64 << 20, path, sizeof(path));
	if (!file_identify(fd, &id) || !(f = segment_attach(fd, &id, true)))
		return T_FAIL;

	/* A new segment: the head and one page of slots. */
	base = seg_bytes();
	printf("new segment: %lld bytes allocated\n", base);
	CHECK_EQ(base, 8 * KiB);
	CHECK_EQ(atomic_load(&f->seg->lazy_backed), 0);

	/* Reads of stripes never locked: valid, nothing allocated. */
	rangelock_read_begin(f, 1 << 20, 4096, &rl);
	CHECK(rangelock_read_valid(f, &rl));
	CHECK_EQ(seg_bytes(), base);

	/* A write at 0 (stripe 0): the first page of the table. */
	CHECK(rangelock_write(f, 0, 4096, &rl));
	rangelock_write_done(f, &rl);
	CHECK_EQ(atomic_load(&f->seg->lazy_backed), 1u);
	CHECK_EQ(seg_bytes(), base + 4 * KiB);
	/* 256 KiB later (stripe 64): the second page, no other. */
	CHECK(rangelock_write(f, 256 * KiB, 4096, &rl));
	rangelock_write_done(f, &rl);
	CHECK_EQ(atomic_load(&f->seg->lazy_backed), 3u);
	CHECK_EQ(seg_bytes(), base + 8 * KiB);

	/* A read begun before a write's page was allocated sees the write. */
	rangelock_read_begin(f, 1 << 20, 4096, &rl);
	{
		struct rangelock w = { .active = false };

		CHECK(rangelock_write(f, 1 << 20, 4096, &w));
		CHECK(!rangelock_read_valid(f, &rl));
		rangelock_write_done(f, &w);
		CHECK(!rangelock_read_valid(f, &rl));
	}

	/* The first prefill: the claims and the bitmap. */
	base = seg_bytes();
	prefill_ensure(f, fd, 8 << 20, 4096);
	CHECK_EQ(seg_bytes(), base + 12 * KiB);

	/* Every lazy page given back. */
	lazy_reset(f->seg);
	CHECK_EQ(atomic_load(&f->seg->lazy_backed), 0);
	CHECK_EQ(seg_bytes(), 8 * KiB);
	rangelock_read_begin(f, 0, 4096, &rl);
	CHECK(rangelock_read_valid(f, &rl));

	segment_put(f, fd);
	close(fd);
	return unit_result();
}
