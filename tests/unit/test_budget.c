// SPDX-License-Identifier: MIT
/*
 * The disk budget (DESIGN.md 7): what a file holds reserved is counted in
 * its place's hint, per filesystem, from its reservation to its trim; a
 * second file of the filesystem may reserve only what the budget leaves
 * it; a size change that takes the reservation gives its count back.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "config.h"
#include "reserve.h"
#include "shm.h"

#include <limits.h>

static struct shim_file *attach(const char *name, int *fd)
{
	char path[512];
	struct file_id id;
	struct shim_file *f;

	*fd = unit_file(name, 0, path, sizeof(path));
	if (!file_identify(*fd, &id) || !(f = segment_attach(*fd, &id, true)))
		exit(T_FAIL);
	return f;
}

static uint64_t held(struct shim_file *f)
{
	return atomic_load(&f->seg->phys) - atomic_load(&f->seg->eof);
}

/* Mappings of hint files in this process. */
static int hint_maps(void)
{
	char line[512];
	FILE *m = fopen("/proc/self/maps", "r");
	int n = 0;

	while (m && fgets(line, sizeof(line), m))
		n += strstr(line, "dioshim-hint") != NULL;
	if (m)
		fclose(m);
	return n;
}

/* Root counting into the budgets of many other users' places maps each
 * hint at most once, or for the call only: nothing grows with calls. */
static void many_places(uint64_t dev)
{
	int round, k, after_first = 0;

	char path[PATH_MAX];

	if (geteuid() != 0)
		return;
	/* Their places exist (root made segments for their files). */
	for (k = 0; k < 20; k++)
		hint_live_add(50000 + k, 1);
	for (round = 0; round < 3; round++) {
		for (k = 0; k < 20; k++) {
			CHECK_EQ(hint_budget_add(50000 + k, dev, 4096), 4096);
			hint_budget_add(50000 + k, dev, -4096);
		}
		if (!round)
			after_first = hint_maps();
	}
	CHECK(after_first > 0);
	CHECK_EQ(hint_maps(), after_first);
	for (k = 0; k < 20; k++)
		hint_live_add(50000 + k, -1);
	/* A key read from a segment (anyone who can write one sets it)
	 * makes no hint, for a user or a group, where none was. */
	CHECK_EQ(hint_budget_add(60000, dev, 4096), 0);
	hint_live_add(60001, -1);
	hint_live_add(HINT_GROUP_BIT | 60002, -1);
	snprintf(path, sizeof(path), "%s/" DIOSHIM_HINT_PREFIX "60000",
		 config.shm_dir);
	CHECK(access(path, F_OK) && errno == ENOENT);
	snprintf(path, sizeof(path), "%s/" DIOSHIM_HINT_PREFIX "60001",
		 config.shm_dir);
	CHECK(access(path, F_OK) && errno == ENOENT);
	snprintf(path, sizeof(path), "%s/" DIOSHIM_GROUP_PREFIX "60002",
		 config.shm_dir);
	CHECK(access(path, F_OK) && errno == ENOENT);
}

int main(void)
{
	struct shim_file *a, *b;
	uint64_t key, dev;
	int fa, fb;

	setenv("DIOSHIM_ENGAGE", "always", 1);
	setenv("DIOSHIM_RESERVE", "1M", 1);
	unit_setup();
	a = attach("a", &fa);
	b = attach("b", &fb);
	key = a->seg->hint_key;
	dev = a->seg->dev;
#define BUDGET() hint_budget_add(key, dev, 0)
	CHECK_EQ(BUDGET(), 0);

	/* A's reservation is counted; B's adds to it. */
	CHECK_EQ(reserve_extend(a, fa, 0, 4096), RESERVE_OK);
	CHECK(held(a) >= (1 << 20));
	CHECK_EQ(BUDGET(), held(a));
	CHECK_EQ(reserve_extend(b, fb, 0, 4096), RESERVE_OK);
	CHECK_EQ(BUDGET(), held(a) + held(b));

	/* The budget nearly spent by another file's tail (A's, as its
	 * segment says too): B may not reserve past it (the kernel extends
	 * instead), and a count anew finds it right. */
	a->seg->budget_charged += (uint64_t)1 << 50;
	CHECK_EQ(hint_budget_add(key, dev, (int64_t)1 << 50),
		 ((uint64_t)1 << 50) + held(a) + held(b));
	CHECK_EQ(reserve_extend(b, fb, 64 << 20, (64 << 20) + 4096),
		 RESERVE_EXACT);
	reserve_exact_done(b, fb);
	a->seg->budget_charged -= (uint64_t)1 << 50;

	/* The same count with no segment holding it (one lost, refused,
	 * removed by hand): counted anew from the segments (once two
	 * seconds have passed since the last count, which found it right),
	 * and B reserves. */
	usleep(2100000);
	CHECK_EQ(reserve_extend(b, fb, 128 << 20, (128 << 20) + 4096),
		 RESERVE_OK);
	CHECK_EQ(BUDGET(), held(a) + held(b));

	/* Again, for a fast writer whose chunk is past what the whole
	 * budget allows (a small filesystem): its room is still short
	 * because of the others' count, which is counted anew (a second
	 * after a count that mended something). */
	usleep(1100000);
	hint_budget_add(key, dev, (int64_t)1 << 50);
	{
		uint64_t r = config.reserve, m = config.reserve_max;

		config.reserve = config.reserve_max = (uint64_t)1 << 44;
		CHECK_EQ(reserve_extend(b, fb, 256 << 20, (256 << 20) + 4096),
			 RESERVE_OK);
		config.reserve = r;
		config.reserve_max = m;
	}
	CHECK_EQ(BUDGET(), held(a) + held(b));

	/* Trims give the counts back. */
	CHECK(reserve_trim(a, fa));
	CHECK_EQ(held(a), 0);
	CHECK_EQ(BUDGET(), held(b));
	CHECK(reserve_trim(b, fb));
	CHECK_EQ(BUDGET(), 0);
	/* A give-back larger than the count (reset meanwhile) stops at 0. */
	CHECK_EQ(hint_budget_add(key, dev, 4096), 4096);
	CHECK_EQ(hint_budget_add(key, dev, -8192), 0);

	many_places(dev);
	segment_put(a, fa);
	segment_put(b, fb);
	return unit_result();
}
