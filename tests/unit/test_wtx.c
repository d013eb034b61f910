// SPDX-License-Identifier: MIT
/*
 * The write transaction, without preloading: claims and settlings of
 * appends, writes at their own offsets and fallocates growing the size,
 * with the kernel's answer injected at each step (refused, short, whole)
 * and the publication checked against what the kernel alone would make
 * of the same answers:
 *
 *  - a refused or short append that nobody claimed past gives back what
 *    it did not write: the next append lands right after the data, and
 *    the size never covers a byte that was not written;
 *  - one claimed past publishes over its range (the only hole there is,
 *    one nobody could foresee), so that the later append is covered;
 *  - appends settle in any order and are published in claim order: a
 *    size never covers an append not settled, for calls (which wait) and
 *    queued requests (which never wait, and are deferred when the done
 *    ring is full, then published in order);
 *  - a queued write at its own offset past the tail holds its range
 *    there while in flight and gives back what it did not write (a call
 *    holds nothing), not below the size others made meanwhile; one
 *    the kernel will refuse (WTX_REFUSED) holds nothing, an append so
 *    made at the tail;
 *    a fallocate moves the tail and the size only by what the kernel
 *    did: a refused one pushes nothing;
 *  - RWF_NOWAIT claims nothing that waits; an O_DIRECT append at an
 *    unaligned tail goes alone, taking nothing; a queued request settled
 *    after a size change (epoch) settles nothing;
 *  - without a reservation (no room to make one) the claim holds
 *    ext_lock, and the settling releases it before it waits; a batch
 *    that holds ext_lock already claims appends past the reservation
 *    without taking it again;
 *  - a claim from a signal handler takes no lock (ext_lock held by its
 *    own thread) and its settling waits for nothing;
 *  - a file with one write in flight reserves nothing: the kernel extends
 *    (ext_lock held, the kernel's size untouched); a second write in
 *    flight, a holder of ext_lock met by an extending claim, or a queued
 *    write engages it, and reservations start.
 * Past engage(), the file is engaged (the rest tests reservations).
 */
#define _GNU_SOURCE
#include "unit.h"

#include "config.h"
#include "inflight.h"
#include "wtx.h"

#include <pthread.h>
#include <time.h>

#define BS 4096ull

static struct shim_file *f;
static int fd;

static uint64_t w(_Atomic uint64_t *word)
{
	return atomic_load(word);
}

static struct wtx claim(enum wtx_kind kind, uint64_t off, uint64_t len,
			unsigned how, enum wtx_claimed want)
{
	struct wtx t;
	enum wtx_claimed got = wtx_claim(&t, f, fd, kind, off, len, how);

	CHECK_EQ(got, want);
	return t;
}

/* A settling that must wait, run in a thread: done once it returned. */
struct later {
	pthread_t tid;
	struct wtx *t;
	int64_t res;
	_Atomic int done;
};

static void *settle_thread(void *arg)
{
	struct later *l = arg;

	wtx_settle(l->t, fd, l->res);
	atomic_store(&l->done, 1);
	return NULL;
}

static void settle_later(struct later *l, struct wtx *t, int64_t res)
{
	l->t = t;
	l->res = res;
	atomic_store(&l->done, 0);
	if (pthread_create(&l->tid, NULL, settle_thread, l))
		exit(T_FAIL);
}

static void pause_ms(long ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* The words back to a file of size n (no reservation beyond it). */
static void reset(uint64_t n)
{
	struct dioshim_seg *seg = f->seg;

	atomic_store(&seg->eof, n);
	atomic_store(&seg->tail, n);
	atomic_fetch_add(&seg->epoch, 1);
}

static void appends_sync(void)
{
	struct dioshim_seg *seg = f->seg;
	struct wtx a, b, c;
	struct later l;

	reset(0);
	/* Refused, nothing claimed past: the range goes back. */
	a = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	CHECK_EQ(a.off, 0);
	CHECK_EQ(w(&seg->tail), BS);
	CHECK_EQ(wtx_settle(&a, fd, -EINVAL), 0);
	CHECK_EQ(w(&seg->tail), 0);
	CHECK_EQ(w(&seg->eof), 0);

	/* Short: the rest goes back; the next append follows the data. */
	a = claim(WTX_APPEND, 0, 2 * BS, 0, WTX_GO);
	CHECK_EQ(wtx_settle(&a, fd, 512), WTX_MOVED);
	CHECK_EQ(w(&seg->tail), 512);
	CHECK_EQ(w(&seg->eof), 512);
	b = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	CHECK_EQ(b.off, 512);
	wtx_settle(&b, fd, BS);
	CHECK_EQ(w(&seg->eof), 512 + BS);

	/* In order: b settles before a, and waits for it; the size never
	 * covers a while a is not settled. */
	reset(0);
	a = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	b = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	CHECK_EQ(b.off, BS);
	settle_later(&l, &b, BS);
	pause_ms(50);
	CHECK(!atomic_load(&l.done));
	CHECK_EQ(w(&seg->eof), 0);
	wtx_settle(&a, fd, BS);
	pthread_join(l.tid, NULL);
	CHECK_EQ(w(&seg->eof), 2 * BS);

	/* Refused with a later claim standing: published over (a hole
	 * nobody could foresee), so that the later one is covered; the
	 * refused range is not given back under the later one. */
	reset(0);
	a = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	b = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	c = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	settle_later(&l, &c, BS);
	wtx_settle(&a, fd, -EIO);
	CHECK_EQ(w(&seg->tail), 3 * BS);
	CHECK_EQ(w(&seg->eof), BS);
	pause_ms(20);
	CHECK(!atomic_load(&l.done)); /* b is still in flight */
	wtx_settle(&b, fd, BS);
	pthread_join(l.tid, NULL);
	CHECK_EQ(w(&seg->eof), 3 * BS);

	/* The last of three refused after the two before were settled:
	 * given back, nothing published. */
	reset(0);
	a = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	b = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	wtx_settle(&a, fd, BS);
	CHECK_EQ(wtx_settle(&b, fd, -ENOSPC), 0);
	CHECK_EQ(w(&seg->tail), BS);
	CHECK_EQ(w(&seg->eof), BS);
}

static void writes_at(void)
{
	struct dioshim_seg *seg = f->seg;
	struct wtx t, a;

	reset(BS);
	/* A call past the end holds nothing (killed in it, it must leave
	 * the next append at the size); refused, nothing moves. */
	t = claim(WTX_AT, 64 * BS, BS, 0, WTX_GO);
	CHECK(w(&seg->phys) >= 65 * BS); /* reserved before the write */
	CHECK_EQ(w(&seg->tail), BS);
	CHECK_EQ(wtx_settle(&t, fd, -EINVAL), 0);
	CHECK_EQ(w(&seg->tail), BS);

	/* Queued past the end: its range is held in the tail (an append
	 * meanwhile lands past it, as behind ext4's extending write).
	 * Refused: given back, so the next append lands at the end, as in
	 * the kernel alone (no hole). */
	t = claim(WTX_AT, 64 * BS, BS, WTX_QUEUED, WTX_GO);
	CHECK_EQ(w(&seg->tail), 65 * BS);
	CHECK_EQ(wtx_settle(&t, fd, -EINVAL), 0);
	CHECK_EQ(w(&seg->tail), BS);
	CHECK_EQ(w(&seg->eof), BS);
	a = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	CHECK_EQ(a.off, BS);
	wtx_settle(&a, fd, BS);
	CHECK_EQ(w(&seg->eof), 2 * BS);

	/* One the kernel will refuse (WTX_REFUSED), or queued behind a
	 * link (WTX_NOHOLD), holds nothing; a refused append so becomes a
	 * write at the tail, moving it only if written. */
	t = claim(WTX_AT, 64 * BS, BS, WTX_NOHOLD | WTX_QUEUED, WTX_GO);
	CHECK_EQ(w(&seg->tail), 2 * BS);
	CHECK_EQ(wtx_settle(&t, fd, -ECANCELED), 0);
	t = claim(WTX_AT, 64 * BS, BS, WTX_REFUSED | WTX_QUEUED, WTX_GO);
	CHECK_EQ(w(&seg->tail), 2 * BS);
	CHECK_EQ(wtx_settle(&t, fd, -EINVAL), 0);
	t = claim(WTX_APPEND, w(&seg->tail), BS, WTX_REFUSED, WTX_GO);
	CHECK_EQ(t.kind, WTX_AT);
	CHECK_EQ(t.off, 2 * BS);
	CHECK_EQ(w(&seg->tail), 2 * BS);
	a = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	CHECK_EQ(a.off, 2 * BS); /* the refused one left no hole before it */
	CHECK_EQ(wtx_settle(&t, fd, -EINVAL), 0);
	wtx_settle(&a, fd, BS);
	CHECK_EQ(w(&seg->tail), 3 * BS);
	CHECK_EQ(w(&seg->eof), 3 * BS);
	/* Decided at a tail that moved since: made where it was decided
	 * (there the kernel refuses it), never at the new tail. */
	t = claim(WTX_APPEND, 3 * BS - 100, BS, WTX_REFUSED, WTX_GO);
	CHECK_EQ(t.off, 3 * BS - 100);
	CHECK_EQ(wtx_settle(&t, fd, -EINVAL), 0);
	CHECK_EQ(w(&seg->tail), 3 * BS);

	/* Held, and an append claimed past it: not given back (the tail
	 * moved on); the size still moves only by what was written. */
	t = claim(WTX_AT, 4 * BS, BS, WTX_QUEUED, WTX_GO);
	a = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	CHECK_EQ(a.off, 5 * BS);
	CHECK_EQ(wtx_settle(&t, fd, BS), WTX_MOVED);
	CHECK_EQ(w(&seg->eof), 5 * BS);
	wtx_settle(&a, fd, BS);
	CHECK_EQ(w(&seg->tail), 6 * BS);
	CHECK_EQ(w(&seg->eof), 6 * BS);

	/* Held, refused, and a write inside the held range done meanwhile:
	 * given back no lower than the size it made (an append must not
	 * land on it). */
	t = claim(WTX_AT, 10 * BS, BS, WTX_QUEUED, WTX_GO);
	CHECK_EQ(w(&seg->tail), 11 * BS);
	a = claim(WTX_AT, 6 * BS, BS, 0, WTX_GO);
	CHECK_EQ(wtx_settle(&a, fd, BS), WTX_MOVED);
	CHECK_EQ(wtx_settle(&t, fd, -ECANCELED), 0);
	CHECK_EQ(w(&seg->eof), 7 * BS);
	CHECK_EQ(w(&seg->tail), 7 * BS);
	atomic_store(&seg->tail, 6 * BS);
	atomic_store(&seg->eof, 6 * BS);

	/* Short past the end: tail and size at what was written. */
	t = claim(WTX_AT, 8 * BS, 4 * BS, 0, WTX_GO);
	CHECK_EQ(wtx_settle(&t, fd, BS + 100), WTX_MOVED);
	CHECK_EQ(w(&seg->tail), 9 * BS + 100);
	CHECK_EQ(w(&seg->eof), 9 * BS + 100);

	/* Inside the size: nothing moves. */
	t = claim(WTX_AT, 0, BS, 0, WTX_GO);
	CHECK_EQ(wtx_settle(&t, fd, BS), 0);
	CHECK_EQ(w(&seg->eof), 9 * BS + 100);

	/* Past the largest size: claims nothing, the kernel refuses it. */
	t = claim(WTX_AT, (uint64_t)INT64_MAX - 10, BS, 0, WTX_GO);
	CHECK_EQ(t.end, t.off);
	CHECK_EQ(wtx_settle(&t, fd, -EFBIG), 0);
	CHECK_EQ(w(&seg->tail), 9 * BS + 100);

	/* fallocate growing the size: refused, nothing; done, eof = end
	 * and the record must be rewritten (no data under the size). */
	atomic_fetch_and(&seg->flags, ~DIOSHIM_SEGF_SIZE_NO_DATA);
	t = claim(WTX_GROW, 12 * BS, 4 * BS, 0, WTX_GO);
	CHECK_EQ(t.res, RESERVE_OK);
	CHECK(w(&seg->phys) >= 16 * BS);
	CHECK_EQ(wtx_settle(&t, fd, -ENOSPC), 0);
	CHECK_EQ(w(&seg->tail), 9 * BS + 100);
	CHECK_EQ(w(&seg->eof), 9 * BS + 100);
	CHECK(!(atomic_load(&seg->flags) & DIOSHIM_SEGF_SIZE_NO_DATA));
	t = claim(WTX_GROW, 12 * BS, 4 * BS, 0, WTX_GO);
	CHECK_EQ(wtx_settle(&t, fd, 0), WTX_MOVED);
	CHECK_EQ(w(&seg->tail), 16 * BS);
	CHECK_EQ(w(&seg->eof), 16 * BS);
	CHECK(atomic_load(&seg->flags) & DIOSHIM_SEGF_SIZE_NO_DATA);
}

static void queued(void)
{
	struct dioshim_seg *seg = f->seg;
	struct wtx t[DIOSHIM_DONE_RING + 3], late;
	int i, n = DIOSHIM_DONE_RING + 3, deferred = 0;

	/* Settled last to first by a reaper that never waits: the size
	 * stays below the first until it is settled, the done ring fills,
	 * the rest are deferred, and every one is published in order. */
	reset(0);
	for (i = 0; i < n; i++) {
		t[i] = claim(WTX_APPEND, 0, BS, WTX_QUEUED, WTX_GO);
		CHECK_EQ(t[i].off, (uint64_t)i * BS);
	}
	for (i = n - 1; i > 0; i--) {
		int st = wtx_settle(&t[i], -1, BS);

		deferred += st == WTX_DEFERRED;
		CHECK_EQ(w(&seg->eof), 0);
	}
	/* The last settled (the first claimed) found the ring full. */
	CHECK_EQ(deferred, n - 1 - DIOSHIM_DONE_RING);
	CHECK_EQ(wtx_settle(&t[0], -1, BS), 0);
	CHECK_EQ(w(&seg->eof), BS);
	/* Deferred: published only in order, then the ring carries on. */
	CHECK(!wtx_publish_deferred(&t[2], false));
	CHECK_EQ(w(&seg->eof), BS);
	CHECK(wtx_publish_deferred(&t[1], false));
	CHECK_EQ(w(&seg->eof), 2 * BS);
	CHECK(wtx_publish_deferred(&t[2], false));
	CHECK_EQ(w(&seg->eof), (uint64_t)n * BS);

	/* A short queued append, nothing claimed past: given back. */
	t[0] = claim(WTX_APPEND, 0, 2 * BS, WTX_QUEUED, WTX_GO);
	wtx_settle(&t[0], -1, BS);
	CHECK_EQ(w(&seg->tail), (uint64_t)(n + 1) * BS);
	CHECK_EQ(w(&seg->eof), (uint64_t)(n + 1) * BS);

	/* A size change after the claim (a truncate): it settles nothing,
	 * deferred or not. */
	late = claim(WTX_APPEND, 0, BS, WTX_QUEUED, WTX_GO);
	t[1] = claim(WTX_AT, 100 * BS, BS, WTX_QUEUED, WTX_GO);
	reset(0);
	CHECK_EQ(wtx_settle(&late, -1, BS), 0);
	CHECK_EQ(wtx_settle(&t[1], -1, BS), 0);
	CHECK(wtx_publish_deferred(&late, true));
	CHECK_EQ(w(&seg->eof), 0);
	CHECK_EQ(w(&seg->tail), 0);
}

static void edges(void)
{
	struct dioshim_seg *seg = f->seg;
	uint32_t fs = f->fs_bit;
	struct wtx t;

	/* RWF_NOWAIT on ext4: any write past the size is EAGAIN, with
	 * nothing claimed; elsewhere, past the reservation. */
	reset(BS);
	f->fs_bit = CONFIG_FS_EXT4;
	claim(WTX_APPEND, 0, BS, WTX_NOWAIT, WTX_AGAIN);
	claim(WTX_AT, BS, BS, WTX_NOWAIT, WTX_AGAIN);
	CHECK_EQ(w(&seg->tail), BS);
	f->fs_bit = fs;
	claim(WTX_AT, w(&seg->phys), BS, WTX_NOWAIT, WTX_AGAIN);
	t = claim(WTX_APPEND, 0, BS, WTX_NOWAIT, WTX_GO);
	wtx_settle(&t, fd, BS);
	CHECK_EQ(w(&seg->eof), 2 * BS);

	/* O_DIRECT at an unaligned tail: it goes alone, taking nothing. */
	reset(BS + 100);
	claim(WTX_APPEND, 0, BS, WTX_DIRECT, WTX_ALONE);
	CHECK_EQ(w(&seg->tail), BS + 100);
	wtx_claim_alone(&t, f, BS, false);
	CHECK_EQ(t.off, BS + 100);
	CHECK_EQ(wtx_settle(&t, fd, -EINVAL), 0);
	CHECK_EQ(w(&seg->tail), BS + 100);
	CHECK_EQ(w(&seg->eof), BS + 100);
	/* Queued, it goes as claimed: the kernel answers. */
	t = claim(WTX_APPEND, 0, BS, WTX_DIRECT | WTX_QUEUED, WTX_GO);
	wtx_settle(&t, -1, -EINVAL);
	CHECK_EQ(w(&seg->tail), BS + 100);
}

static void exact(void)
{
	struct dioshim_seg *seg = f->seg;
	struct wtx a, b;
	bool recovered;
	int rc;

	/* No reservation can be made: the claim holds ext_lock. */
	reset(w(&seg->phys));
	atomic_fetch_or(&seg->flags, DIOSHIM_SEGF_NO_RESERVE);
	a = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	CHECK_EQ(a.res, RESERVE_EXACT);
	CHECK_EQ(pthread_mutex_trylock(&seg->ext_lock), EBUSY);

	/* A signal handler of this thread: no lock, no wait. */
	b = claim(WTX_APPEND, 0, BS, WTX_REENTRANT, WTX_GO);
	CHECK_EQ(b.off, a.end);
	CHECK_EQ(wtx_settle(&b, fd, BS), WTX_MOVED);
	CHECK_EQ(w(&seg->eof), b.end);

	/* Refused: the lock goes, the range cannot come back (b stands
	 * past it): published over. */
	wtx_settle(&a, fd, -ENOSPC);
	CHECK_EQ(pthread_mutex_trylock(&seg->ext_lock), 0);
	pthread_mutex_unlock(&seg->ext_lock);
	CHECK_EQ(w(&seg->eof), b.end);

	/* A batch that holds ext_lock claims past the reservation without
	 * taking it again; the batch releases it. */
	if (!seg_lock(&seg->ext_lock, &recovered))
		exit(T_FAIL);
	a = claim(WTX_APPEND, 0, BS, WTX_QUEUED | WTX_EXACT_HELD, WTX_GO);
	b = claim(WTX_AT, a.end, BS, WTX_QUEUED | WTX_EXACT_HELD, WTX_GO);
	CHECK_EQ(a.res, RESERVE_EXACT);
	CHECK_EQ(b.res, RESERVE_EXACT);
	wtx_settle(&a, -1, BS);
	wtx_settle(&b, -1, BS);
	rc = pthread_mutex_trylock(&seg->ext_lock);
	CHECK(rc == EBUSY || rc == EDEADLK); /* still the batch's */
	seg_unlock(&seg->ext_lock);
	CHECK_EQ(w(&seg->eof), b.end);
	atomic_fetch_and(&seg->flags, ~DIOSHIM_SEGF_NO_RESERVE);
}

/* The claiming thread's own write, counted in flight as io.c does. */
static void counted(int64_t n)
{
	atomic_store(&f->seg->slot[f->slot].shard[0].inflight, n);
}

static void *lock_ext(void *arg)
{
	bool recovered;

	(void)arg;
	seg_lock(&f->seg->ext_lock, &recovered);
	pause_ms(50);
	seg_unlock(&f->seg->ext_lock);
	return NULL;
}

static char blk[BS] __attribute__((aligned(4096)));

static void engage(void)
{
	struct dioshim_seg *seg = f->seg;
	struct wtx a;
	pthread_t tid;

	reset(0);
	CHECK(!file_engaged(seg));
	counted(1);
	/* Alone: the kernel extends, nothing reserved. */
	a = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	CHECK_EQ(a.res, RESERVE_EXACT);
	CHECK_EQ(w(&seg->phys), 0);
	CHECK_EQ(pwrite(fd, blk, BS, 0), (ssize_t)BS);
	CHECK_EQ(wtx_settle(&a, fd, BS), WTX_MOVED);
	CHECK_EQ(w(&seg->phys), BS);
	a = claim(WTX_AT, BS, BS, 0, WTX_GO);
	CHECK_EQ(a.res, RESERVE_EXACT);
	CHECK_EQ(wtx_settle(&a, fd, -EIO), 0);
	CHECK(!file_engaged(seg));
	/* Another holds ext_lock when an extending claim comes: engaged. */
	if (pthread_create(&tid, NULL, lock_ext, NULL))
		exit(T_FAIL);
	pause_ms(10);
	a = claim(WTX_APPEND, 0, BS, 0, WTX_GO);
	pthread_join(tid, NULL);
	CHECK(file_engaged(seg));
	CHECK_EQ(a.res, RESERVE_OK);
	CHECK(w(&seg->phys) >= 2 * BS);
	wtx_settle(&a, fd, -EIO);

	/* Two in flight, or a queued write: engaged as well. */
	atomic_fetch_and(&seg->flags, ~DIOSHIM_SEGF_ENGAGED);
	counted(2);
	CHECK(inflight_engaged(f));
	atomic_fetch_and(&seg->flags, ~DIOSHIM_SEGF_ENGAGED);
	counted(1);
	CHECK(!inflight_engaged(f));
	a = claim(WTX_AT, 0, BS, WTX_QUEUED, WTX_GO);
	CHECK(file_engaged(seg));
	wtx_settle(&a, fd, BS);
	counted(0);
}

int main(void)
{
	struct file_id id;
	char path[512];

	unit_setup();
	fd = unit_file("wtx", 0, path, sizeof(path));
	if (!file_identify(fd, &id) || !(f = segment_attach(fd, &id, true)))
		return T_FAIL;
	engage();
	config.engage_always = true;
	appends_sync();
	writes_at();
	queued();
	edges();
	exact();
	segment_put(f, fd);
	close(fd);
	return unit_result();
}
