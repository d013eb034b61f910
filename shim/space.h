/* SPDX-License-Identifier: MIT */
/*
 * Disk space the shim holds (DESIGN.md 7): reserved tails given back when
 * the filesystem runs short.
 */
#ifndef DIOSHIM_SPACE_H
#define DIOSHIM_SPACE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * A write or fallocate on filesystem dev met ENOSPC or EDQUOT: cut the
 * reserved tails of its files (this user's segments, every process's
 * writers), under each file's barrier.  True if any was cut: the caller
 * then tries once more.  The caller holds nothing of any file (no
 * in-flight count, no lock, no barrier).  errno is kept.
 */
bool space_reclaim(uint64_t dev);

/*
 * The disk budget of key's place on dev says more is reserved than its
 * segments hold (charges of files whose segments were lost, refused or
 * removed by hand): count it anew from them.  At most once per
 * SPACE_RECOUNT_NS for a place and filesystem in a process, less often
 * (up to 64 times) while the counts find it right; errno is kept.
 */
#define SPACE_RECOUNT_NS 1000000000ull
void space_recount(uint64_t key, uint64_t dev);

/* errno of a call that failed for want of space. */
static inline bool space_short(int err)
{
	return err == ENOSPC || err == EDQUOT;
}

#endif
