// SPDX-License-Identifier: MIT
/*
 * The extent-lock table: writers of overlapping ranges never interleave
 * and a validated read never sees half of a write (threads writing and
 * reading a shared buffer through the table); ranges wider than the table
 * and ranges that wrap around it take stripes in one order (no deadlock,
 * under an alarm); a process killed holding stripes does not hold them for
 * ever; sub-block ranges of one block share its stripe.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "rangelock.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define REGION (64 * 4096)

static struct shim_file file;
static struct dioshim_seg *seg;
static unsigned char region[REGION];
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
		uint64_t off = xorshift(&s) % (REGION / 512) * 512;
		uint64_t len = 512 * (1 + xorshift(&s) % 24);
		uint64_t i;

		if (off + len > REGION)
			len = REGION - off;
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
		uint64_t off = xorshift(&s) % (REGION / 512) * 512;
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
