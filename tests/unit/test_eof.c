// SPDX-License-Identifier: MIT
/*
 * The EOF and tail words under racing threads: eof only grows, ends at the
 * largest end any thread reported, and a write inside the file does not
 * touch the word; the append tail hands out disjoint ranges.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "reserve.h"

#include <pthread.h>

#define THREADS 8
#define ROUNDS 200000

static struct dioshim_seg seg;
static _Atomic uint64_t max_seen;
static _Atomic int stop, went_down;
static uint64_t claimed[THREADS][1000];

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *advance(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg * 7919 + 1, local = 0, end;
	int i;

	for (i = 0; i < ROUNDS; i++) {
		end = xorshift(&s) % (1ull << 40);
		eof_advance(&seg, end);
		if (end > local)
			local = end;
	}
	/* Publish this thread's maximum. */
	uint64_t cur = atomic_load(&max_seen);
	while (local > cur && !atomic_compare_exchange_weak(&max_seen, &cur,
							    local))
		;
	return NULL;
}

static void *watch(void *arg)
{
	uint64_t last = 0, now;

	(void)arg;
	while (!atomic_load(&stop)) {
		now = atomic_load(&seg.eof);
		if (now < last)
			atomic_store(&went_down, 1);
		last = now;
	}
	return NULL;
}

static void *append(void *arg)
{
	int t = (int)(uintptr_t)arg, i;

	for (i = 0; i < 1000; i++)
		claimed[t][i] = atomic_fetch_add(&seg.tail, 4096);
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(void)
{
	pthread_t t[THREADS], w;
	uint64_t all[THREADS * 1000];
	int i;

	pthread_create(&w, NULL, watch, NULL);
	for (i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, advance, (void *)(uintptr_t)i);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(w, NULL);
	CHECK_EQ(atomic_load(&seg.eof), atomic_load(&max_seen));
	CHECK(!atomic_load(&went_down));
	/* An end inside the file reports no extension. */
	CHECK(!eof_advance(&seg, 4096));
	CHECK(eof_advance(&seg, atomic_load(&seg.eof) + 1));

	/* tail_advance is a maximum too. */
	atomic_store(&seg.tail, 100);
	tail_advance(&seg, 50);
	CHECK_EQ(atomic_load(&seg.tail), 100);
	tail_advance(&seg, 150);
	CHECK_EQ(atomic_load(&seg.tail), 150);

	/* Appenders racing on the tail get disjoint ranges. */
	atomic_store(&seg.tail, 0);
	for (i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, append, (void *)(uintptr_t)i);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	memcpy(all, claimed, sizeof(all));
	qsort(all, THREADS * 1000, sizeof(all[0]), cmp);
	for (i = 0; i < THREADS * 1000; i++)
		if (all[i] != (uint64_t)i * 4096) {
			CHECK_EQ(all[i], (uint64_t)i * 4096);
			break;
		}
	return unit_result();
}
