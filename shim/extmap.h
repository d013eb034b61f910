/* SPDX-License-Identifier: MIT */
/*
 * The kernel's extent map of a file (FIEMAP), walked in order.  Recovery
 * reads it to find where data ends; the prefill reads it to leave alone
 * the chunks that are allocated already.
 */
#ifndef DIOSHIM_EXTMAP_H
#define DIOSHIM_EXTMAP_H

#include <linux/fiemap.h>
#include <stdbool.h>
#include <stdint.h>

/* Called for each extent that meets [from, to), in order of offset;
 * false stops the walk. */
typedef bool (*extmap_fn)(const struct fiemap_extent *e, void *arg);

/* Walk the extents of fd that meet [from, to) (from < to).  False if the
 * filesystem has no extent map (tmpfs) or the map cannot be read. */
bool extmap_walk(int fd, uint64_t from, uint64_t to, extmap_fn fn, void *arg);

/* Is every byte of [from, to) allocated (written or not), with no delayed
 * allocation in it?  False where the map cannot say. */
bool extmap_allocated(int fd, uint64_t from, uint64_t to);

/* Where the allocation that starts at from ends, up to to: from if from
 * is in a hole or the map cannot say, to if [from, to) is allocated. */
uint64_t extmap_allocated_to(int fd, uint64_t from, uint64_t to);

#endif
