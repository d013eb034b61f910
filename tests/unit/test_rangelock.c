// SPDX-License-Identifier: MIT
/*
 * The extent-lock table: writers of overlapping ranges never interleave
 * and a validated read never sees half of a write (threads writing and
 * reading a shared buffer through the table); ranges wider than the table
 * and ranges that wrap around it take stripes in one order (no deadlock,
 * under an alarm); a process killed holding stripes does not hold them for
 * ever; sub-block ranges of one block share its stripe.  Wide writes (as
 * wide as the table) exclude the writes and reads they overlap, each
 * other included, and nothing else; a killed wide writer is got over; with
 * every wide slot taken, a wide write takes the whole table and still
 * waits for the slots it overlaps.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "rangelock.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define BIG (6u << 20)

static struct shim_file file;
static struct dioshim_seg *seg;
static unsigned char region[BIG];
static uint64_t region_len = 64 * 4096; /* the part in use */
static _Atomic int stop, torn, reads;

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Writers fill a random range with one value, byte by byte (slowly:
 * a torn read has time to happen if the locks allow it). */
static void *writer(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg * 6364136223846793005ull + 1;
	struct rangelock rl;
	unsigned char v = (unsigned char)(uintptr_t)arg;

	while (!atomic_load(&stop)) {
		uint64_t off = xorshift(&s) % (region_len / 512) * 512;
		uint64_t len = 512 * (1 + xorshift(&s) % 24);
		uint64_t i;

		if (off + len > region_len)
			len = region_len - off;
		rangelock_write(&file, off, len, &rl);
		v += 7;
		for (i = off; i < off + len; i++)
			__atomic_store_n(&region[i], v, __ATOMIC_RELAXED);
		rangelock_write_done(&file, &rl);
	}
	return NULL;
}

/* Readers copy one 512-byte sector at a time (the unit a writer writes
 * whole) and validate; a valid copy must be one value. */
static void *reader(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg * 1442695040888963407ull + 3;
	unsigned char copy[512];
	struct rangelock rl;

	while (!atomic_load(&stop)) {
		uint64_t off = xorshift(&s) % (region_len / 512) * 512;
		int i;

		do {
			rangelock_read_begin(&file, off, 512, &rl);
			for (i = 0; i < 512; i++)
				copy[i] = __atomic_load_n(&region[off + i],
							  __ATOMIC_RELAXED);
		} while (!rangelock_read_valid(&file, &rl));
		for (i = 1; i < 512; i++)
			if (copy[i] != copy[0]) {
				atomic_fetch_add(&torn, 1);
				break;
			}
		atomic_fetch_add(&reads, 1);
	}
	return NULL;
}

/* Writers of ranges at least as wide as the table, in the region. */
static void *wide_filler(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg * 3935559000370003845ull + 7;
	uint64_t span = (uint64_t)seg->stripes << seg->stripe_shift;
	struct rangelock rl;
	unsigned char v = (unsigned char)(uintptr_t)arg;

	while (!atomic_load(&stop)) {
		uint64_t len = span + xorshift(&s) % (span / 512) * 512;
		uint64_t off = xorshift(&s) % ((region_len - len) / 512) * 512;
		uint64_t i;

		rangelock_write(&file, off, len, &rl);
		v += 13;
		for (i = off; i < off + len; i++)
			__atomic_store_n(&region[i], v, __ATOMIC_RELAXED);
		rangelock_write_done(&file, &rl);
	}
	return NULL;
}

/* One lock taken in a thread: done says when it got it; it holds it
 * until let go. */
struct taker {
	pthread_t t;
	uint64_t off, len;
	bool read;
	_Atomic int done, go;
};

static void *take(void *arg)
{
	struct taker *k = arg;
	struct rangelock rl;

	if (k->read) {
		rl.gating = false;
		rangelock_read_begin(&file, k->off, k->len, &rl);
		if (!rangelock_read_valid(&file, &rl))
			atomic_store(&k->done, 2);
		else
			atomic_store(&k->done, 1);
		return NULL;
	}
	rangelock_write(&file, k->off, k->len, &rl);
	atomic_store(&k->done, 1);
	while (!atomic_load(&k->go))
		usleep(1000);
	rangelock_write_done(&file, &rl);
	return NULL;
}

static void taker_start(struct taker *k, uint64_t off, uint64_t len,
			bool read)
{
	memset(k, 0, sizeof(*k));
	k->off = off;
	k->len = len;
	k->read = read;
	pthread_create(&k->t, NULL, take, k);
}

/* Whether k got its lock within ms. */
static bool taker_got(struct taker *k, int ms)
{
	while (ms-- > 0 && !atomic_load(&k->done))
		usleep(1000);
	return atomic_load(&k->done) != 0;
}

static void taker_end(struct taker *k)
{
	atomic_store(&k->go, 1);
	pthread_join(k->t, NULL);
}

static void *wide_writer(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg * 2862933555777941757ull + 5;
	struct rangelock rl;

	while (!atomic_load(&stop)) {
		/* Anywhere in 4 GiB, up to twice the table's span: wraps. */
		uint64_t off = xorshift(&s) % (1ull << 32) / 4096 * 4096;
		uint64_t len = 4096 * (1 + xorshift(&s) % (2 * seg->stripes));

		rangelock_write(&file, off, len, &rl);
		rangelock_write_done(&file, &rl);
	}
	return NULL;
}

static void hang(int sig)
{
	(void)sig;
	if (write(2, "hung\n", 5) < 0)
		_exit(1);
	_exit(1);
}

static void run(void *(*fn)(void *), int n, void *(*fn2)(void *), int n2,
		unsigned secs)
{
	pthread_t t[16];
	int i;

	atomic_store(&stop, 0);
	for (i = 0; i < n; i++)
		pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)(i + 1));
	for (i = 0; i < n2; i++)
		pthread_create(&t[n + i], NULL, fn2,
			       (void *)(uintptr_t)(i + 100));
	sleep(secs);
	atomic_store(&stop, 1);
	for (i = 0; i < n + n2; i++)
		pthread_join(t[i], NULL);
}

int main(void)
{
	struct rangelock a, b;
	int status;
	pid_t kid;

	unit_setup();
	seg = mmap(NULL, sizeof(*seg), PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	rangelock_init(seg);
	file.seg = seg;
	CHECK_EQ(seg->stripes, DIOSHIM_STRIPES);
	CHECK_EQ(seg->stripe_shift, 12);

	/* Sub-block ranges of one block map to its stripe alone. */
	rangelock_read_begin(&file, 512, 512, &a);
	rangelock_read_begin(&file, 3584, 512, &b);
	CHECK(!memcmp(a.bits, b.bits, sizeof(a.bits)));
	CHECK_EQ(__builtin_popcountll(a.bits[0]), 1);
	/* A range as wide as the table takes all of it. */
	rangelock_read_begin(&file, 8192,
			     (uint64_t)seg->stripes * 4096 + 1, &a);
	CHECK_EQ(__builtin_popcountll(a.bits[0]) +
			 __builtin_popcountll(a.bits[DIOSHIM_STRIPES / 64 - 1]),
		 128);

	signal(SIGALRM, hang);
	alarm(60);
	run(writer, 4, reader, 4, 2);
	printf("%d reads, %d torn\n", atomic_load(&reads), atomic_load(&torn));
	CHECK_EQ(atomic_load(&torn), 0);
	CHECK(atomic_load(&reads) > 1000);

	run(wide_writer, 8, NULL, 0, 2);

	/* Wide writes among small writes and reads: none torn, wide ones
	 * excluding each other too. */
	region_len = BIG;
	atomic_store(&reads, 0);
	{
		pthread_t w[2];
		int i;

		atomic_store(&stop, 0);
		for (i = 0; i < 2; i++)
			pthread_create(&w[i], NULL, wide_filler,
				       (void *)(uintptr_t)(i + 50));
		run(writer, 2, reader, 3, 3);
		atomic_store(&stop, 1);
		for (i = 0; i < 2; i++)
			pthread_join(w[i], NULL);
	}
	printf("with wide writers: %d reads, %d torn\n", atomic_load(&reads),
	       atomic_load(&torn));
	CHECK_EQ(atomic_load(&torn), 0);
	CHECK(atomic_load(&reads) > 1000);
	alarm(0);

	/* A wide write holds up the range it covers, and nothing else. */
	{
		uint64_t span = (uint64_t)seg->stripes << seg->stripe_shift;
		struct taker wide, near, far, rnear, rfar, wide2, slots[8];
		int i;

		alarm(30);
		taker_start(&wide, 0, 2 * span, false);
		CHECK(taker_got(&wide, 2000));
		taker_start(&far, 3 * span, 4096, false);
		CHECK(taker_got(&far, 2000)); /* beside it: at once */
		taker_start(&rfar, 3 * span + 8192, 4096, true);
		CHECK(taker_got(&rfar, 2000));
		CHECK_EQ(atomic_load(&rfar.done), 1);
		taker_start(&near, span, 4096, false);
		taker_start(&rnear, span - 8192, 4096, true);
		taker_start(&wide2, span, span, false);
		CHECK(!taker_got(&near, 300)); /* inside it: waits */
		CHECK(!atomic_load(&rnear.done));
		CHECK(!atomic_load(&wide2.done));
		taker_end(&far);
		taker_end(&rfar);
		taker_end(&wide);
		CHECK(taker_got(&rnear, 2000));
		taker_end(&rnear);
		/* near and wide2 overlap: one, then the other. */
		CHECK(taker_got(&near, 500) || taker_got(&wide2, 500));
		usleep(200000);
		CHECK_EQ(atomic_load(&near.done) + atomic_load(&wide2.done), 1);
		if (atomic_load(&near.done)) {
			taker_end(&near);
			CHECK(taker_got(&wide2, 2000));
			taker_end(&wide2);
		} else {
			taker_end(&wide2);
			CHECK(taker_got(&near, 2000));
			taker_end(&near);
		}

		/* Every slot taken: a ninth wide write takes every stripe,
		 * and still waits for the slot it overlaps. */
		for (i = 0; i < 8; i++) {
			taker_start(&slots[i], (uint64_t)i * 2 * span, span,
				    false);
			CHECK(taker_got(&slots[i], 2000));
		}
		taker_start(&wide, 20 * span, span, false);
		CHECK(taker_got(&wide, 2000));
		taker_start(&near, 20 * span + 4096, 4096, false);
		CHECK(!taker_got(&near, 200)); /* every stripe is taken */
		taker_end(&wide);
		CHECK(taker_got(&near, 2000));
		taker_end(&near);
		taker_start(&wide, span / 2, span, false);
		CHECK(!taker_got(&wide, 300));
		taker_end(&slots[0]);
		CHECK(taker_got(&wide, 2000));
		taker_end(&wide);
		for (i = 1; i < 8; i++)
			taker_end(&slots[i]);
		alarm(0);
	}

	/* A stripe left free with an odd count (a corrupt word, or a holder
	 * taken over half way) neither stops a wide write nor lets one past
	 * a holder whose count it inverted. */
	{
		uint64_t span = (uint64_t)seg->stripes << seg->stripe_shift;
		struct taker small, wide;

		alarm(20);
		atomic_store(&seg->stripe[5].seq, 1);
		taker_start(&small, 5 * 4096, 4096, false);
		CHECK(taker_got(&small, 2000));
		taker_start(&wide, 0, span, false);
		CHECK(!taker_got(&wide, 300));
		taker_end(&small);
		CHECK(taker_got(&wide, 2000));
		taker_end(&wide);
		rangelock_write(&file, 0, span, &a); /* odd and free again */
		rangelock_write_done(&file, &a);
		atomic_store(&seg->stripe[5].seq, 0);
		alarm(0);
	}

	/* A child dies holding a wide range: got over, by a small write
	 * and a read inside it. */
	kid = fork();
	if (kid == 0) {
		owner_refresh();
		rangelock_write(&file, 0, 4ull << 30, &a);
		raise(SIGKILL);
		_exit(1);
	}
	waitpid(kid, &status, 0);
	CHECK(WIFSIGNALED(status));
	alarm(20);
	rangelock_write(&file, 1 << 20, 4096, &a);
	rangelock_write_done(&file, &a);
	rangelock_read_begin(&file, 2 << 20, 4096, &a);
	CHECK(rangelock_read_valid(&file, &a));
	alarm(0);

	/* A child dies holding a range; the parent gets it, in time. */
	kid = fork();
	if (kid == 0) {
		owner_refresh();
		rangelock_write(&file, 0, 65536, &a);
		raise(SIGKILL);
		_exit(1);
	}
	waitpid(kid, &status, 0);
	CHECK(WIFSIGNALED(status));
	alarm(20);
	rangelock_write(&file, 4096, 4096, &a);
	rangelock_write_done(&file, &a);
	/* ... and a reader is not held up by it either. */
	rangelock_read_begin(&file, 0, 65536, &a);
	CHECK(rangelock_read_valid(&file, &a));
	alarm(0);
	return unit_result();
}
