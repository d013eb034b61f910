/* SPDX-License-Identifier: MIT */
/*
 * Hole prefill (DESIGN.md 2.2).  ext4 takes the inode lock exclusive for a
 * direct write into a hole; an overwrite of allocated (even unwritten)
 * blocks runs shared.  So before the first write into a chunk of the file,
 * the chunk is allocated with fallocate(FALLOC_FL_KEEP_SIZE) — once, as a
 * bitmap in the segment remembers — and every later write into it is an
 * overwrite.  Prefill never changes data or the size.
 */
#ifndef DIOSHIM_PREFILL_H
#define DIOSHIM_PREFILL_H

#include "segment.h"

#include <stdint.h>

/* The prefill chunk for a new segment of a file on fs_bit (0: off). */
uint64_t prefill_initial_chunk(uint32_t fs_bit);

/* Before a write of [off, off + len), all inside the kernel's size:
 * allocate the chunks it touches that are not known to be. */
void prefill_ensure(struct shim_file *f, int fd, uint64_t off, uint64_t len);

/* fallocate(0) allocated [from, to) (a reservation): its whole chunks
 * need no prefill. */
void prefill_note_allocated(struct shim_file *f, uint64_t from, uint64_t to);

/* [off, off + len) may hold holes again (punched, truncated away). */
void prefill_forget(struct shim_file *f, uint64_t off, uint64_t len);
void prefill_forget_all(struct shim_file *f);

#endif
