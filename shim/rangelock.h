/* SPDX-License-Identifier: MIT */
/*
 * The extent-lock table (DESIGN.md 2.4): overlapping writes never
 * interleave and reads never see half of a write, across threads and
 * processes.  A write locks the stripes of its range exclusive; a read
 * takes nothing and validates instead (a sequence count per stripe, as a
 * seqlock), so readers write no shared line at all.
 */
#ifndef DIOSHIM_RANGELOCK_H
#define DIOSHIM_RANGELOCK_H

#include "segment.h"

#include <stdbool.h>
#include <stdint.h>

/* The stripes a range covers, as a bitmap in ascending order. */
struct rangelock {
	uint64_t bits[DIOSHIM_STRIPES / 64];
	uint32_t seq[DIOSHIM_STRIPES]; /* readers: the counts seen */
	uint64_t gated[DIOSHIM_STRIPES / 64]; /* readers: gates we hold */
	uint64_t lo, hi; /* the range, rounded out to stripe blocks */
	uint64_t wide_seen; /* readers: the wide ticket when they began */
	int wide; /* a wide slot held: its index + 1 (else 0) */
	bool active;
	bool all; /* the range is as wide as the table */
	bool gating; /* gated[] is in use */
};

/* Lock [off, off + len) exclusive for a write (rounded out to blocks).
 * Stripes are taken in ascending order, so two writers never deadlock; a
 * range as wide as the table holds a wide slot instead, and locks only
 * its range (every stripe if the slots are all taken).  False if the
 * table is unusable (the write then goes unlocked). */
bool rangelock_write(struct shim_file *f, uint64_t off, uint64_t len,
		     struct rangelock *rl);
void rangelock_write_done(struct shim_file *f, struct rangelock *rl);

/* Before a read: wait for no writer in the range, note the counts.
 * After it: true if no write touched the range meanwhile (else read
 * again).  rl->gating must be false before the first begin. */
void rangelock_read_begin(struct shim_file *f, uint64_t off, uint64_t len,
			  struct rangelock *rl);
bool rangelock_read_valid(struct shim_file *f, struct rangelock *rl);

/*
 * After a failed validation: once this thread's reads have met writers
 * a few times, it asks the writers of its range to let it through — new
 * writers of a gated stripe wait before taking it, writers already in go
 * on — so that readers and writers both make progress.  Readers still
 * exclude nobody: two read at once.  rangelock_read_done ends it.  True
 * when even that did not do (a read longer than a gate holds): the gates
 * are dropped, and the reader locks the range like a writer.
 */
bool rangelock_read_retry(struct shim_file *f, struct rangelock *rl);
void rangelock_read_done(struct shim_file *f, struct rangelock *rl);

/* Geometry for a new segment, from the configuration. */
void rangelock_init(struct dioshim_seg *seg);

/* Free the stripes and gates that name this process: held by threads of
 * the image that exec replaced (same pid and start time, so they look
 * alive). */
void rangelock_release_self(struct dioshim_seg *seg);

#endif
