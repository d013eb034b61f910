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
 * lock is unusable (the caller then passes the call through).  fd, a
 * descriptor of the file, lets this caller repair the words after a raiser
 * died mid-change; without one (fd < 0) such a file is passed through until
 * a caller with one comes. */
struct dioshim_shard *inflight_enter_fd(struct shim_file *f, int fd);
/* The same, under async_lock: an exec under way is not waited for. */
struct dioshim_shard *inflight_enter_locked(struct shim_file *f, int fd);
struct dioshim_shard *inflight_enter(struct shim_file *f);

static inline void inflight_exit(struct dioshim_shard *sh)
{
	atomic_fetch_sub_explicit(&sh->inflight, 1, memory_order_release);
}

/* Raise the barrier and wait until no write of any live process is in
 * flight.  False if the barrier's lock is unusable (or, fd < 0, if the
 * words wait for a repair, as for inflight_enter_fd). */
bool barrier_raise_fd(struct shim_file *f, int fd);
bool barrier_raise(struct shim_file *f);
/* The same for a write that must go alone, which changes no size behind
 * the asynchronous writes in flight: their completions still count. */
bool barrier_raise_write(struct shim_file *f, int fd);
/* barrier_raise_fd for a caller that must not wait on the file (the
 * give-back of space, for a file it does not write): false, the barrier
 * down, if its lock is held or its writes do not drain within max_ms. */
bool barrier_try_raise(struct shim_file *f, unsigned max_ms);
void barrier_lower(struct shim_file *f);
/* Before a size is read from the words: wait while they are being
 * changed (a raiser between the kernel's size and its words, or a maker
 * waiting for its file's lone writers), repairing them if that raiser
 * died. */
void barrier_settle(struct shim_file *f, int fd);

/* The raiser is about to change the kernel's size: until barrier_lower,
 * its death leaves the words to be recomputed from the kernel's size. */
static inline void barrier_changing(struct shim_file *f)
{
	atomic_store_explicit(&f->seg->barrier, BARRIER_CHANGING,
			      memory_order_seq_cst);
}

/* Sum of the in-flight counts of live owners (for tests and the drain). */
int64_t inflight_count(struct dioshim_seg *seg);

/*
 * Pay only for parallelism (DESIGN.md 7): a file's writes go to the
 * kernel as issued — no reservation, no record, no prefill — until a
 * second write is seen in flight beside one (a caller that has entered
 * the count and finds another, a holder of ext_lock met by an extending
 * write, a queued write); from then on, for good, the file is engaged.
 * The switch is made under ext_lock, which every write the kernel
 * extends holds through its call (a queued one through its submission),
 * so no reservation starts beside one.
 */
static inline bool file_engaged(struct dioshim_seg *seg)
{
	return atomic_load_explicit(&seg->flags, memory_order_relaxed) &
	       DIOSHIM_SEGF_ENGAGED;
}

static inline void file_engage(struct dioshim_seg *seg)
{
	if (!file_engaged(seg))
		atomic_fetch_or(&seg->flags, DIOSHIM_SEGF_ENGAGED);
}

/* Whether f is engaged, engaging it if the caller (counted in flight)
 * finds another write in flight. */
bool inflight_engaged(struct shim_file *f);

#endif
