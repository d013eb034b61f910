// SPDX-License-Identifier: MIT
/*
 * Hole prefill: the first write into a chunk allocates the chunk (and
 * only it), once; a punched range is forgotten and prefilled again; a
 * write past what the bitmap covers doubles the chunk, a doubled chunk
 * being known only if both halves were; a chunk another writer claimed is
 * left to it, a claim word held for another chunk waited for (not for
 * ever); prefill never changes the size; a file with one write in
 * flight is not prefilled, and is from the moment a second one is.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "inflight.h"
#include "prefill.h"

#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#define MiB (1ull << 20)

static long long blocks_kib(int fd)
{
	struct stat st;

	fstat(fd, &st);
	return (long long)st.st_blocks / 2;
}

static bool bit(struct dioshim_seg *seg, uint64_t i)
{
	return atomic_load(&seg->prefill[i / 64]) & (1ull << (i % 64));
}

/* Every claim word held for the chunk at claim - 1. */
static void claim_all(struct dioshim_seg *seg, uint64_t claim)
{
	unsigned i;

	for (i = 0; i < DIOSHIM_PREFILL_CLAIMS; i++)
		atomic_store(&seg->prefill_claim[i], claim);
}

/* A holder that lets its claims go after 10 ms. */
static void *let_go_later(void *seg)
{
	struct timespec t = { 0, 10 * 1000 * 1000 };

	nanosleep(&t, NULL);
	claim_all(seg, 0);
	return NULL;
}

int main(void)
{
	struct shim_file *f;
	struct file_id id;
	char path[512];
	long long before;
	struct stat st;
	uint64_t big = (uint64_t)DIOSHIM_PREFILL_BITS * MiB * 2, chunk;
	struct timespec t0, t1;
	pthread_t tid;
	unsigned i;
	int fd;

	setenv("DIOSHIM_PREFILL", "on", 1);
	unit_setup();
	fd = unit_file("sparse", (off_t)big, path, sizeof(path));
	if (!file_identify(fd, &id) || !(f = segment_attach(fd, &id, true)))
		return T_FAIL;
	CHECK_EQ(atomic_load(&f->seg->prefill_chunk), MiB);

	/* One write in flight (this one): into its hole, as issued. */
	before = blocks_kib(fd);
	atomic_store(&f->seg->slot[f->slot].shard[0].inflight, 1);
	prefill_ensure(f, fd, 5 * MiB + 100, 4096);
	CHECK(!bit(f->seg, 5));
	CHECK_EQ(blocks_kib(fd) - before, 0);
	CHECK(!file_engaged(f->seg));
	/* A second one beside it: the file is engaged, for good. */
	atomic_store(&f->seg->slot[f->slot].shard[1].inflight, 1);
	CHECK(inflight_engaged(f));
	atomic_store(&f->seg->slot[f->slot].shard[0].inflight, 0);
	atomic_store(&f->seg->slot[f->slot].shard[1].inflight, 0);
	CHECK(inflight_engaged(f));

	before = blocks_kib(fd);
	prefill_ensure(f, fd, 5 * MiB + 100, 4096);
	CHECK(bit(f->seg, 5));
	CHECK(!bit(f->seg, 4) && !bit(f->seg, 6));
	CHECK_EQ(blocks_kib(fd) - before, 1024);
	/* Once only. */
	prefill_ensure(f, fd, 5 * MiB, 8192);
	CHECK_EQ(blocks_kib(fd) - before, 1024);
	/* A write across two chunks takes both. */
	prefill_ensure(f, fd, 8 * MiB - 4096, 8192);
	CHECK(bit(f->seg, 7) && bit(f->seg, 8));

	/* Punched: forgotten, prefilled again on the next write. */
	prefill_forget(f, 5 * MiB, 4096);
	CHECK(!bit(f->seg, 5));
	CHECK(bit(f->seg, 7));
	prefill_ensure(f, fd, 5 * MiB, 4096);
	CHECK(bit(f->seg, 5));

	/* Past the bitmap: the chunk doubles; chunks 7 and 8 were known,
	 * but 7 pairs with 6 and 8 with 9, so neither doubled chunk is; 4+5
	 * is not either; a fresh pair is. */
	prefill_ensure(f, fd, 10 * MiB, 2 * MiB);
	CHECK(bit(f->seg, 10) && bit(f->seg, 11));
	prefill_ensure(f, fd, (uint64_t)DIOSHIM_PREFILL_BITS * MiB + MiB, 4096);
	CHECK_EQ(atomic_load(&f->seg->prefill_chunk), 2 * MiB);
	CHECK(!bit(f->seg, 3)); /* old 6 and 7 */
	CHECK(!bit(f->seg, 4)); /* old 8 and 9 */
	CHECK(bit(f->seg, 5)); /* old 10 and 11 */
	CHECK(bit(f->seg, DIOSHIM_PREFILL_BITS / 2));

	/* The size never moved. */
	fstat(fd, &st);
	CHECK_EQ(st.st_size, (off_t)big);

	/* A chunk another writer is filling: the write goes into its hole,
	 * no second fallocate.  A claim word another chunk holds is waited
	 * for while it is let go in time, and given up on (the write goes
	 * into its hole) when its holder seems dead.  Claims are let go once
	 * done. */
	chunk = atomic_load(&f->seg->prefill_chunk);
	claim_all(f->seg, 20 * chunk + 1);
	before = blocks_kib(fd);
	prefill_ensure(f, fd, 20 * chunk, 4096);
	CHECK(!bit(f->seg, 20));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	prefill_ensure(f, fd, 21 * chunk, 4096);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK(!bit(f->seg, 21));
	CHECK(t1.tv_sec - t0.tv_sec + (t1.tv_nsec - t0.tv_nsec) / 1e9 >= 0.1);
	CHECK_EQ(blocks_kib(fd), before);
	pthread_create(&tid, NULL, let_go_later, f->seg);
	prefill_ensure(f, fd, 21 * chunk, 4096);
	pthread_join(tid, NULL);
	CHECK(bit(f->seg, 21));
	prefill_ensure(f, fd, 20 * chunk + 8192, 4096);
	CHECK(bit(f->seg, 20));
	for (i = 0; i < DIOSHIM_PREFILL_CLAIMS; i++)
		CHECK_EQ(atomic_load(&f->seg->prefill_claim[i]), 0);

	/* Off: nothing happens. */
	atomic_store(&f->seg->prefill_chunk, 0);
	before = blocks_kib(fd);
	prefill_ensure(f, fd, 30 * MiB, 4096);
	CHECK_EQ(blocks_kib(fd), before);
	segment_put(f, fd);
	close(fd);
	return unit_result();
}
