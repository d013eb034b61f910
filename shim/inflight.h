/* SPDX-License-Identifier: MIT */
/*
 * The sharded in-flight counter and the barrier (DESIGN.md 2.5): the
 * userspace inode_dio_wait.  Writers count themselves in a shard of their
 * own process's slot; a size change raises the barrier, waits for the sum
 * of the shards to drain, acts, and lowers it.
 */
#ifndef DIOSHIM_INFLIGHT_H
#define DIOSHIM_INFLIGHT_H

#include "segment.h"

#include <stdbool.h>

/* The calling thread's shard of f; threads spread over the slot's
 * DIOSHIM_SLOT_SHARDS lines round-robin. */
struct dioshim_shard *inflight_shard(struct shim_file *f);

/* Announce a write; waits while a barrier is up.  NULL if the barrier's
 * lock is unusable (the caller then passes the call through). */
struct dioshim_shard *inflight_enter(struct shim_file *f);

static inline void inflight_exit(struct dioshim_shard *sh)
{
	atomic_fetch_sub_explicit(&sh->inflight, 1, memory_order_release);
}

/* Raise the barrier and wait until no write of any live process is in
 * flight.  False if the barrier's lock is unusable. */
bool barrier_raise(struct shim_file *f);
void barrier_lower(struct shim_file *f);

/* Sum of the in-flight counts of live owners (for tests and the drain). */
int64_t inflight_count(struct dioshim_seg *seg);

#endif
