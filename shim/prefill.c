// SPDX-License-Identifier: MIT
/*
 * Hole prefill.
 *
 * Bit i of the bitmap covers bytes [i * chunk, (i + 1) * chunk).  The
 * chunk starts at DIOSHIM_PREFILL_CHUNK and doubles (under ext_lock) when
 * a write lands past what the bitmap covers; a doubled chunk is known
 * allocated only if both halves were.  Every word read from the bitmap is
 * only a hint: a set bit wrongly read lets a write find a hole (the kernel
 * then serialises it, correctly), a clear bit wrongly read costs a
 * fallocate of blocks already there (a no-op for them).
 *
 * The fallocate takes the inode lock exclusive and drains the file's
 * direct I/O, like a reservation: it is made once per chunk, so chunks are
 * large (1 MiB by default) and a sparse file fills in chunk units — `du`
 * grows by whole chunks.  Once: a writer claims the chunk first, and a
 * writer that finds it claimed writes into its hole as the kernel alone
 * would (serialised there) rather than drain the file's I/O again.  A
 * chunk the extent map shows allocated already (a preallocated image) is
 * only marked.
 *
 * Lock order: ext_lock only to grow the chunk, never around the fallocate.
 *
 * Layer L2, above inflight (inflight_engaged); calls L1 and L0 (extmap).
 * The order inside L2 is shim/layers'.
 */
#define _GNU_SOURCE
#include "prefill.h"

#include "config.h"
#include "extmap.h"
#include "inflight.h"
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <linux/falloc.h>
#include <string.h>
#include <time.h>

#define BITS DIOSHIM_PREFILL_BITS

uint64_t prefill_initial_chunk(uint32_t fs_bit)
{
	switch (config.prefill) {
	case CONFIG_PREFILL_ON:
		return config.prefill_chunk;
	case CONFIG_PREFILL_AUTO:
		/* XFS runs hole-filling direct writes in parallel already
		 * (bench/RESULTS.md); ext4 serialises them. */
		return fs_bit == CONFIG_FS_EXT4 ? config.prefill_chunk : 0;
	}
	return 0;
}

/* The claims and the bitmap are lazy pages (layout.h), allocated
 * together when a chunk is first prefilled: until then every bit is
 * clear, read without touching them. */
static bool pages_backed(struct dioshim_seg *seg)
{
	return lazy_is_backed(seg, seg->prefill_claim);
}

static bool pages_back(struct dioshim_seg *seg)
{
	return lazy_back(seg, seg->prefill_claim,
			 sizeof(seg->prefill_claim) + sizeof(seg->prefill));
}

static bool bit_test(struct dioshim_seg *seg, uint64_t i)
{
	return pages_backed(seg) &&
	       (atomic_load_explicit(&seg->prefill[i / 64],
				     memory_order_relaxed) &
		(1ull << (i % 64)));
}

static void bit_set(struct dioshim_seg *seg, uint64_t i)
{
	if (pages_back(seg))
		atomic_fetch_or_explicit(&seg->prefill[i / 64],
					 1ull << (i % 64),
					 memory_order_relaxed);
}

/* Double the chunk until chunk number `last` fits the bitmap; ext_lock. */
static uint64_t grow(struct dioshim_seg *seg, uint64_t last_byte)
{
	uint64_t chunk = atomic_load(&seg->prefill_chunk), i;
	bool recovered;

	if (!chunk || last_byte / chunk < BITS)
		return chunk;
	if (!seg_lock(&seg->ext_lock, &recovered))
		return 0;
	chunk = atomic_load(&seg->prefill_chunk);
	while (chunk && last_byte / chunk >= BITS) {
		/* New bit i: old bits 2i and 2i + 1 both set. */
		for (i = 0; i < BITS && pages_backed(seg); i++) {
			bool both = i * 2 + 1 < BITS && bit_test(seg, 2 * i) &&
				    bit_test(seg, 2 * i + 1);
			uint64_t m = 1ull << (i % 64);

			if (both)
				atomic_fetch_or(&seg->prefill[i / 64], m);
			else
				atomic_fetch_and(&seg->prefill[i / 64], ~m);
		}
		chunk *= 2;
		atomic_store(&seg->prefill_chunk, chunk);
	}
	seg_unlock(&seg->ext_lock);
	return chunk;
}

/* The word a chunk starting at start claims (a hash, so that writers of
 * the same chunk meet on one word). */
static _Atomic uint64_t *claim_word(struct dioshim_seg *seg, uint64_t start)
{
	return &seg->prefill_claim[(start / 4096 * 0x9e3779b97f4a7c15ull >> 40) %
				   DIOSHIM_PREFILL_CLAIMS];
}

/* How long a claim held for another chunk is waited for: many times a
 * fallocate under load; past it the holder is taken for dead. */
#define CLAIM_WAIT_NS (200ull * 1000 * 1000)

/*
 * Claim the chunk at start (mine = start + 1): true if ours; false if
 * another writer is filling it, or the word stayed taken by another
 * chunk for CLAIM_WAIT_NS (a writer killed while filling: its word is
 * free again only when the segment starts over).
 */
static bool claim(_Atomic uint64_t *w, uint64_t mine)
{
	struct timespec nap = { 0, 20 * 1000 };
	uint64_t seen, waited = 0;

	for (;;) {
		seen = 0;
		if (atomic_compare_exchange_strong(w, &seen, mine))
			return true;
		if (seen == mine || waited >= CLAIM_WAIT_NS)
			return false;
		nanosleep(&nap, NULL);
		waited += (uint64_t)nap.tv_nsec;
	}
}

enum fill { FILL_DONE, FILL_OTHER, FILL_FAILED };

/*
 * Allocate chunk i (of chunk bytes) unless it is: once, by whoever claims
 * it.  Never past the kernel's size (phys): blocks allocated there would
 * outlive the file's last close when nothing is reserved to cut; a chunk
 * the size cuts is allocated up to it, and marked whole once the extent
 * map shows it whole (the reservation's fallocate allocates the rest, or
 * a later fill, once the size has moved on, from where this one ended).
 * FILL_OTHER: another writer is at it, and the write goes into the hole,
 * as with the kernel alone, rather than drain the file's I/O for a
 * second fallocate.
 */
static enum fill fill(struct shim_file *f, int fd, uint64_t i, uint64_t chunk,
		      uint64_t phys)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t start = i * chunk, end = start + chunk, from = start;
	_Atomic uint64_t *w = claim_word(seg, start);
	enum fill r = FILL_DONE;

	if (end > phys)
		end = phys;
	if (!pages_back(seg))
		return FILL_FAILED; /* into the hole, as the kernel alone */
	if (!claim(w, start + 1))
		return FILL_OTHER;
	/* A chunk the size cut before was allocated up to it: from there. */
	if (!bit_test(seg, i))
		from = extmap_allocated_to(fd, start, end);
	if (bit_test(seg, i)) {
		/* Filled between our look and the claim. */
	} else if (from >= end) {
		if (end == start + chunk)
			bit_set(seg, i);
	} else if (sys_fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)from,
				 (off_t)(end - from))) {
		/* ENOSPC, EDQUOT, no fallocate: the write goes as it is, into
		 * its hole. */
		log_once_file(LOG_ERROR, LOG_FD(fd),
			      "prefill of %llu bytes failed (%s): writing into "
			      "holes",
			      (unsigned long long)chunk, strerror(errno));
		r = FILL_FAILED;
	} else {
		if (end == start + chunk)
			bit_set(seg, i);
		if (f->slot >= 0)
			atomic_fetch_add_explicit(&seg->slot[f->slot].prefills,
						  1, memory_order_relaxed);
	}
	atomic_store(w, 0);
	return r;
}

void prefill_ensure(struct shim_file *f, int fd, uint64_t off, uint64_t len)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t chunk, i, first, last, phys, start;

	chunk = atomic_load_explicit(&seg->prefill_chunk,
				     memory_order_relaxed);
	if (!chunk || !len)
		return;
	if ((off + len - 1) / chunk >= BITS)
		chunk = grow(seg, off + len - 1);
	/* A segment's word: bounded before use. */
	if (!chunk || (chunk & (chunk - 1)) || chunk < 4096)
		return;
	first = off / chunk;
	last = (off + len - 1) / chunk;
	for (i = first; i <= last && i < BITS; i++) {
		if (bit_test(seg, i))
			continue;
		/* One writer writes into holes as the kernel alone does. */
		if (!inflight_engaged(f))
			return;
		/* Inside the kernel's size only: past it, the reservation's
		 * fallocate allocates. */
		phys = atomic_load_explicit(&seg->phys, memory_order_acquire);
		start = i * chunk;
		if (start >= phys)
			break;
		if (fill(f, fd, i, chunk, phys) == FILL_FAILED)
			return;
	}
}

void prefill_forget(struct shim_file *f, uint64_t off, uint64_t len)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t chunk = atomic_load(&seg->prefill_chunk), i;

	if (!chunk || (chunk & (chunk - 1)) || !len || !pages_backed(seg))
		return;
	for (i = off / chunk; i <= (off + len - 1) / chunk && i < BITS; i++)
		atomic_fetch_and(&seg->prefill[i / 64], ~(1ull << (i % 64)));
}

void prefill_forget_all(struct shim_file *f)
{
	unsigned i;

	for (i = 0; i < BITS / 64 && pages_backed(f->seg); i++)
		atomic_store(&f->seg->prefill[i], 0);
}

void prefill_note_allocated(struct shim_file *f, uint64_t from, uint64_t to)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t chunk = atomic_load(&seg->prefill_chunk), i;

	if (!chunk || (chunk & (chunk - 1)) || to <= from)
		return;
	/* Only the chunks wholly inside: the rest of one that straddles
	 * from may be a hole. */
	for (i = (from + chunk - 1) / chunk; (i + 1) * chunk <= to && i < BITS;
	     i++)
		bit_set(seg, i);
}
