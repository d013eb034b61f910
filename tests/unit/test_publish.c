// SPDX-License-Identifier: MIT
/*
 * Appends published in order: threads claim ranges from the tail, "write"
 * them for a random time, mark them written and publish.  A watcher checks
 * that eof never covers a range not yet written, every publisher returns
 * only once eof covers its range, and eof ends at the total.  Also: an
 * append behind a slow one of a live process waits for it however long;
 * one whose predecessor's process died gets through after the bounded
 * wait.  And the give-back of a refused or short append.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "reserve.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#define THREADS 8
#define EACH 3000
#define BS 4096

static struct dioshim_seg seg;
static _Atomic uint8_t written[THREADS * EACH + 1];
static _Atomic int stop, bad_cover, bad_return;

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t after_off;
static _Atomic int after_returned;

static void *publish_after(void *arg)
{
	(void)arg;
	eof_publish_in_order(&seg, -1, after_off, after_off + BS);
	atomic_store(&after_returned, 1);
	return NULL;
}

static void *appender(void *arg)
{
	uint64_t rnd = (uint64_t)(uintptr_t)arg * 2654435761u + 1;
	int i;

	for (i = 0; i < EACH; i++) {
		uint64_t off = atomic_fetch_add(&seg.tail, BS);

		/* The write: a random little while, sometimes a yield. */
		if (xorshift(&rnd) % 4 == 0)
			sched_yield();
		for (volatile unsigned k = xorshift(&rnd) % 3000; k; k--)
			;
		atomic_store(&written[off / BS], 1);
		eof_publish_in_order(&seg, -1, off, off + BS);
		if (atomic_load(&seg.eof) < off + BS)
			atomic_fetch_add(&bad_return, 1);
	}
	return NULL;
}

static void *watcher(void *arg)
{
	uint64_t checked = 0;

	(void)arg;
	while (!atomic_load(&stop)) {
		uint64_t e = atomic_load(&seg.eof);

		for (; checked < e; checked += BS)
			if (!atomic_load(&written[checked / BS]))
				atomic_fetch_add(&bad_cover, 1);
	}
	return NULL;
}

int main(void)
{
	pthread_t t[THREADS], w;
	struct timespec t0, t1;
	int i;

	pthread_create(&w, NULL, watcher, NULL);
	for (i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, appender, (void *)(uintptr_t)i);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	atomic_store(&stop, 1);
	pthread_join(w, NULL);
	CHECK_EQ(atomic_load(&bad_cover), 0);
	CHECK_EQ(atomic_load(&bad_return), 0);
	CHECK_EQ(atomic_load(&seg.eof), (uint64_t)THREADS * EACH * BS);
	for (i = 0; i < DIOSHIM_DONE_RING; i++)
		CHECK_EQ(atomic_load(&seg.done[i].end), 0);

	/* A slow append of a live process (ours): the next one waits for
	 * it past APPEND_WAIT_NS, and is published only with it. */
	owner_set_self(&seg.slot[0].owner);
	atomic_store(&seg.slots_hi, 1);
	atomic_store(&seg.slot[0].shard[0].inflight, 1);
	uint64_t slow = atomic_fetch_add(&seg.tail, BS);

	after_off = atomic_fetch_add(&seg.tail, BS);
	pthread_create(&w, NULL, publish_after, NULL);
	sleep(3);
	CHECK(!atomic_load(&after_returned));
	CHECK(atomic_load(&seg.eof) <= slow);
	eof_publish_in_order(&seg, -1, slow, slow + BS);
	pthread_join(w, NULL);
	CHECK(atomic_load(&after_returned));
	CHECK_EQ(atomic_load(&seg.eof), after_off + BS);

	/* A claimant whose process died (its slot freed as dead, the write
	 * still counted): the next append waits for it (about 2 s), then
	 * publishes past it. */
	atomic_store(&seg.slot[0].owner.pid_start, 0);
	uint64_t dead = atomic_fetch_add(&seg.tail, BS);
	uint64_t next = atomic_fetch_add(&seg.tail, BS);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	eof_publish_in_order(&seg, -1, next, next + BS);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	CHECK_EQ(atomic_load(&seg.eof), next + BS);
	CHECK(t1.tv_sec - t0.tv_sec >= 1);
	CHECK(dead + BS == next);

	/* Its slot taken over by a new process (the dead writer's count
	 * gone): the next append waits while a live writer works, and
	 * publishes past once none does but the waiters themselves. */
	owner_set_self(&seg.slot[0].owner);
	atomic_store(&seg.slot[0].shard[0].inflight, 1);
	dead = atomic_fetch_add(&seg.tail, BS);
	after_off = atomic_fetch_add(&seg.tail, BS);
	atomic_store(&after_returned, 0);
	pthread_create(&w, NULL, publish_after, NULL);
	sleep(3);
	CHECK(!atomic_load(&after_returned)); /* a live writer works */
	atomic_store(&seg.slot[0].shard[0].inflight, 0);
	pthread_join(w, NULL);
	CHECK_EQ(atomic_load(&seg.eof), after_off + BS);
	dead = atomic_fetch_add(&seg.tail, BS);
	next = atomic_fetch_add(&seg.tail, BS);
	atomic_store(&seg.slot[0].shard[0].inflight, 1); /* the waiter */
	eof_publish_in_order(&seg, 0, next, next + BS);
	CHECK_EQ(atomic_load(&seg.eof), next + BS);
	CHECK_EQ(atomic_load(&seg.slot[0].publish_waiting), 0);
	atomic_store(&seg.slot[0].shard[0].inflight, 0);

	/* The give-back (append_give_back): a refused append with nothing
	 * claimed past it gives its range back, and the next one takes it;
	 * a short one keeps what it wrote; one with a later claim past it
	 * must be published over (a failure nobody could foresee). */
	uint64_t g = atomic_load(&seg.tail), r;

	atomic_store(&seg.tail, g + BS); /* claims [g, g+BS) */
	r = append_give_back(&seg, g, g + BS, g); /* refused */
	CHECK_EQ(r, g);
	CHECK_EQ(atomic_load(&seg.tail), g);
	atomic_store(&seg.tail, g + 2 * BS);
	r = append_give_back(&seg, g, g + 2 * BS, g + BS); /* short */
	CHECK_EQ(r, g + BS);
	CHECK_EQ(atomic_load(&seg.tail), g + BS);
	atomic_store(&seg.tail, g + 2 * BS); /* claims [g+BS, g+2BS) */
	r = append_give_back(&seg, g + BS, g + 2 * BS, g + 2 * BS); /* whole */
	CHECK_EQ(r, g + 2 * BS);
	atomic_store(&seg.tail, g + 4 * BS); /* two claims, the first fails */
	r = append_give_back(&seg, g + 2 * BS, g + 3 * BS, g + 2 * BS);
	CHECK_EQ(r, g + 3 * BS);
	CHECK_EQ(atomic_load(&seg.tail), g + 4 * BS);
	return unit_result();
}
