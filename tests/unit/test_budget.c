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

int main(void)
{
	struct shim_file *a, *b;
	_Atomic uint64_t *budget;
	int fa, fb;

	setenv("DIOSHIM_ENGAGE", "always", 1);
	setenv("DIOSHIM_RESERVE", "1M", 1);
	unit_setup();
	a = attach("a", &fa);
	b = attach("b", &fb);
	budget = hint_budget(a->seg->hint_key, a->seg->dev);
	CHECK(budget != NULL);
	if (!budget)
		return unit_result();
	CHECK_EQ(atomic_load(budget), 0);

	/* A's reservation is counted; B's adds to it. */
	CHECK_EQ(reserve_extend(a, fa, 0, 4096), RESERVE_OK);
	CHECK(held(a) >= (1 << 20));
	CHECK_EQ(atomic_load(budget), held(a));
	CHECK_EQ(reserve_extend(b, fb, 0, 4096), RESERVE_OK);
	CHECK_EQ(atomic_load(budget), held(a) + held(b));

	/* The budget nearly spent by others: B may not reserve past it
	 * (the kernel extends instead). */
	atomic_fetch_add(budget, (uint64_t)1 << 50);
	CHECK_EQ(reserve_extend(b, fb, 64 << 20, (64 << 20) + 4096),
		 RESERVE_EXACT);
	reserve_exact_done(b, fb);
	atomic_fetch_sub(budget, (uint64_t)1 << 50);

	/* Trims give the counts back. */
	CHECK(reserve_trim(a, fa));
	CHECK_EQ(held(a), 0);
	CHECK_EQ(atomic_load(budget), held(b));
	CHECK(reserve_trim(b, fb));
	CHECK_EQ(atomic_load(budget), 0);

	segment_put(a, fa);
	segment_put(b, fb);
	return unit_result();
}
