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
 * grows by whole chunks.
 *
 * Lock order: ext_lock only to grow the chunk, never around the fallocate.
 */
#define _GNU_SOURCE
#include "prefill.h"

#include "config.h"
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <linux/falloc.h>
#include <string.h>

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

static bool bit_test(struct dioshim_seg *seg, uint64_t i)
{
	return atomic_load_explicit(&seg->prefill[i / 64],
				    memory_order_relaxed) &
	       (1ull << (i % 64));
}

static void bit_set(struct dioshim_seg *seg, uint64_t i)
{
	atomic_fetch_or_explicit(&seg->prefill[i / 64], 1ull << (i % 64),
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
		for (i = 0; i < BITS; i++) {
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
		/* Inside the kernel's size only: past it, the reservation's
		 * fallocate allocates.  The whole chunk, even where it runs
		 * past the size (KEEP_SIZE): a chunk cut at the size would be
		 * prefilled again by every write into it. */
		phys = atomic_load_explicit(&seg->phys, memory_order_acquire);
		start = i * chunk;
		if (start >= phys)
			break;
		if (sys_fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)start,
				  (off_t)chunk)) {
			/* ENOSPC, EDQUOT, no fallocate: the write goes as it
			 * is, into its hole. */
			log_once("prefill of %llu bytes failed (%s): writing "
				 "into holes", (unsigned long long)chunk,
				 strerror(errno));
			return;
		}
		bit_set(seg, i);
		if (f->slot >= 0)
			atomic_fetch_add_explicit(&seg->slot[f->slot].prefills,
						  1, memory_order_relaxed);
	}
}

void prefill_forget(struct shim_file *f, uint64_t off, uint64_t len)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t chunk = atomic_load(&seg->prefill_chunk), i;

	if (!chunk || (chunk & (chunk - 1)) || !len)
		return;
	for (i = off / chunk; i <= (off + len - 1) / chunk && i < BITS; i++)
		atomic_fetch_and(&seg->prefill[i / 64], ~(1ull << (i % 64)));
}

void prefill_forget_all(struct shim_file *f)
{
	unsigned i;

	for (i = 0; i < BITS / 64; i++)
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
