/* SPDX-License-Identifier: MIT */
/*
 * The hints: whether any segment exists for this process's user and
 * groups (a few loads on the path of every call), the generation of
 * segment creations, each place's disk budget.  Layer L1, above the
 * shared files (shm.h) and the lifelines (lifeline.h).
 */
#ifndef DIOSHIM_HINT_H
#define DIOSHIM_HINT_H

#include "dioshim/layout.h"
#include "lifeline.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* False means no segment exists for this process's user and
 * groups right now. */
bool hint_maybe_live(void);
/* Generation of segment creations; changes whenever a segment appears.
 * UINT64_MAX when a hint is unusable (callers then always re-check). */
uint64_t hint_gen(void);
/* Count a segment in (delta 1, before creating it) or out (-1, after
 * unlinking it) of the hint of key. */
void hint_live_add(uint64_t key, int64_t delta);
/*
 * Around a change of key's live count and the making or removal of the
 * segment it counts (hint_live_add(1) before the segment is published,
 * its unlink before hint_live_add(-1)): live over-counts in between, for
 * good if the process dies there.  hint_recount counts only while no
 * such window is open, in any process.
 */
void hint_window_open(uint64_t key);
void hint_window_close(uint64_t key);
/* key's live count set to count(key) (the segments of key's place), if
 * no window is open anywhere: true if it was recounted. */
bool hint_recount(uint64_t key, uint64_t (*count)(uint64_t key));
/* The keys of this process's own hints (its user's and its groups'),
 * and what each counts live; how many (at most max). */
int hint_mine(uint64_t *keys, uint64_t *live, int max);
/* A segment of key's place was published: the generation moves again
 * (it moved before, when live was counted up), so that a descriptor that
 * looked in between looks once more. */
void hint_published(uint64_t key);
/* Whether key's place surely has no segment (its hint counts none live;
 * live never under-counts); false when it cannot tell. */
bool hint_key_idle(uint64_t key);
/* Add delta to the bytes reserved on filesystem dev in key's hint (an
 * entry claimed on first use; never below zero), and return the sum:
 * delta 0 reads it.  0 if the hint is unusable or its table full. */
uint64_t hint_budget_add(uint64_t key, uint64_t dev, int64_t delta);

/* The hints this process reads (its user's and its groups'), once
 * mapped (hint_count 0 before, or if one is unusable): for the check on
 * the path of every call the shim does not serve, a few loads. */
extern struct dioshim_hint *hint_set[HINTS_MAX];
extern int hint_count;

/* hint_gen() into *gen (read first: a segment made after it moves it),
 * then hint_maybe_live(), in one look: inline once the hints are mapped
 * (hint_count is published last, and never taken back). */
bool hint_look_slow(uint64_t *gen);
static inline bool hint_look(uint64_t *gen)
{
	int i, n = __atomic_load_n(&hint_count, __ATOMIC_ACQUIRE);
	uint64_t g = 0;

	if (!n)
		return hint_look_slow(gen);
	for (i = 0; i < n; i++)
		g += atomic_load_explicit(&hint_set[i]->gen,
					  memory_order_seq_cst);
	*gen = g == UINT64_MAX ? 0 : g;
	for (i = 0; i < n; i++)
		if (atomic_load_explicit(&hint_set[i]->live,
					 memory_order_seq_cst))
			return true;
	return false;
}

static inline bool hint_surely_dead(void)
{
	int i, n = __atomic_load_n(&hint_count, __ATOMIC_ACQUIRE);

	for (i = 0; i < n; i++)
		if (atomic_load_explicit(&hint_set[i]->live,
					 memory_order_relaxed))
			return false;
	return n > 0;
}

/* The hint of key, mapped (ours, or another user's for root); *temp
 * when it is not kept: give it back with hint_put once done with it.
 * Made if missing only when make says so (never for a key read from a
 * segment).  hint_kept: the hint of key if this process keeps it
 * mapped; NULL (never a call) if not. */
struct dioshim_hint *hint_get(uint64_t key, bool make, bool *temp);
void hint_put(struct dioshim_hint *h, bool temp);
struct dioshim_hint *hint_kept(uint64_t key);

/* Around fork: hold hint_lock (after files_lock), then let it go in the
 * parent and the child; in the child, forget the parent's windows. */
void hint_atfork_prepare(void);
void hint_atfork_release(void);
void hint_atfork_child(void);

#endif
