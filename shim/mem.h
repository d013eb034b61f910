/* SPDX-License-Identifier: MIT */
/*
 * Memory for the shim's own objects, without malloc: a wrapper may run
 * inside the application's malloc (a malloc that logs to a file), in a
 * signal handler, or in the child of a fork.  Objects come from mmap'd
 * arenas that are never unmapped, so a racing reader of a freed object
 * reads stale memory, never unmapped memory.
 */
#ifndef DIOSHIM_MEM_H
#define DIOSHIM_MEM_H

#include <stddef.h>

/* Zeroed memory of at least size bytes, 64-byte aligned; NULL if mmap
 * fails.  Never returned to the system; recycle objects with a free list. */
void *mem_alloc(size_t size);

/* Hold the allocator across fork so the child inherits it unlocked. */
void mem_atfork_prepare(void);
void mem_atfork_release(void);

#endif
