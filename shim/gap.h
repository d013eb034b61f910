/* SPDX-License-Identifier: MIT */
/*
 * Gaps: ranges the size grew over without the program asking for blocks
 * there — an ftruncate up, a fallocate that starts past the end.  The
 * kernel alone leaves them holes; under the shim the reservation had
 * already allocated them, so the writes that come into them are
 * overwrites.  At the last close, what no write has reached of them (the
 * unwritten extents) is punched, and the file's allocation is the kernel
 * alone's.  The list is kept short of the truth, never past it: a range
 * the program allocated itself is taken out, and one that cannot be
 * kept exactly is dropped (left allocated, as the prefill leaves its
 * chunks).  Every call but gap_punch runs under ext_lock.
 */
#ifndef DIOSHIM_GAP_H
#define DIOSHIM_GAP_H

#include "segment.h"

#include <stdbool.h>
#include <stdint.h>

/* The size grew over [lo, hi) with no blocks asked for. */
void gap_note(struct dioshim_seg *seg, uint64_t lo, uint64_t hi);

/* The program allocated [lo, hi) itself (fallocate, a zero range): none
 * of it is a gap. */
void gap_take(struct dioshim_seg *seg, uint64_t lo, uint64_t hi);

/* The size was cut to len. */
void gap_clip(struct dioshim_seg *seg, uint64_t len);

/* Data moved (collapse, insert), or the words start over: no gaps. */
void gap_clear(struct dioshim_seg *seg);

/* The program allocated [lo, hi) past eof (KEEP_SIZE). */
void keep_add(struct dioshim_seg *seg, uint64_t lo, uint64_t hi);

/* Whether it allocated some past from. */
bool keep_any_past(const struct dioshim_seg *seg, uint64_t from);

/* fn on each range it allocated past from (clipped there); those wholly
 * below from are inside the size now, and forgotten. */
void keep_each_past(struct dioshim_seg *seg, uint64_t from,
		    void (*fn)(uint64_t lo, uint64_t hi, void *arg), void *arg);

/* The size was cut below eof, or the words start over. */
void keep_clear(struct dioshim_seg *seg);

/* The last close, through fd (the file's size is eof now): punch the
 * unwritten blocks of the gaps, whole blocks below eof, then forget
 * them. */
void gap_punch(struct dioshim_seg *seg, int fd);

#endif
