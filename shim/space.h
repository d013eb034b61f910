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

/* errno of a call that failed for want of space. */
static inline bool space_short(int err)
{
	return err == ENOSPC || err == EDQUOT;
}

#endif
