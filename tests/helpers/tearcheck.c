// SPDX-License-Identifier: MIT
/*
 * tearcheck MODE FILE SECS WRITERS READERS [procs]: writers and readers of
 * one region with O_DIRECT; counts reads that see parts of two writes.
 *
 *   whole   writers rewrite one 1 MiB region, each write one fill byte;
 *           readers read the region: torn if it holds two values
 *   sub     writers rewrite bytes [512, 2048) of the first block (a
 *           sub-block write, 512-aligned); readers read the block: torn
 *           if that range holds two values
 *   punch   writers write random 4 KiB blocks of a 1 MiB region, one fill
 *           byte each; as many punchers punch random blocks
 *           (FALLOC_FL_PUNCH_HOLE); readers read random blocks: torn if
 *           a block is neither one value nor all zeros
 *   wide    every writer writes 256 KiB to 4 MiB at random 4 KiB-aligned
 *           offsets of an 8 MiB region (ranges that span many stripes,
 *           half of them as wide as the table: 2 MiB), readers as in
 *           punch; the point is that nothing hangs or tears
 *   long    writers write random 4 KiB blocks of a 512 MiB file, readers
 *           read all of it at once (a read longer than writers wait for
 *           a reader): torn if a block holds two values; the point is
 *           that reads complete
 *
 * "procs" makes every writer and reader a process with its own open file
 * description, instead of a thread.  Prints "reads=N torn=N writes=N" and
 * exits 1 if any read was torn.
 */
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB (1 << 20)
#define BLK 4096

enum mode { WHOLE, SUB, PUNCH, WIDE, LONG };

/* LONG: the file and each read */
#define LONG_SPAN ((size_t)512 * MIB)

struct counts {
	_Atomic long reads, torn, writes;
	_Atomic int stop;
};

static enum mode mode;
static const char *path;
static struct counts *c;
static int shared_fd = -1;

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int fd_for(void)
{
	if (shared_fd >= 0)
		return shared_fd;
	return open(path, O_RDWR | O_DIRECT);
}

static void *writer(void *arg)
{
	uint64_t id = (uint64_t)(uintptr_t)arg, s = id * 7919 + 13;
	int fd = fd_for();
	unsigned char val = (unsigned char)(id * 16 + 1);
	char *buf;

	if (fd < 0 ||
	    posix_memalign((void **)&buf, BLK, mode == WIDE ? 4 * MIB : MIB))
		exit(2);
	while (!atomic_load(&c->stop)) {
		off_t off = 0;
		size_t len = MIB;

		if (++val == 0)
			val = 1;
		switch (mode) {
		case WHOLE:
			break;
		case SUB:
			off = 512;
			len = 1536;
			break;
		case PUNCH:
			off = (off_t)(rnd(&s) % (MIB / BLK)) * BLK;
			len = BLK;
			if (id % 2) { /* half of them punch */
				fallocate(fd, FALLOC_FL_PUNCH_HOLE |
						      FALLOC_FL_KEEP_SIZE,
					  off, BLK);
				atomic_fetch_add(&c->writes, 1);
				continue;
			}
			break;
		case WIDE:
			len = (size_t)(1 + rnd(&s) % 16) * 256 * 1024;
			off = (off_t)(rnd(&s) % ((8 * MIB - len) / BLK)) * BLK;
			break;
		case LONG:
			len = BLK;
			off = (off_t)(rnd(&s) % (LONG_SPAN / BLK)) * BLK;
			break;
		}
		memset(buf, val, len);
		if (pwrite(fd, buf, len, off) != (ssize_t)len) {
			perror("pwrite");
			exit(2);
		}
		atomic_fetch_add(&c->writes, 1);
	}
	return NULL;
}

/* Whether buf[from, to) is one value; zeros allowed where allow_zero. */
static bool uniform(const unsigned char *buf, size_t from, size_t to)
{
	size_t i;

	for (i = from + 1; i < to; i++)
		if (buf[i] != buf[from])
			return false;
	return true;
}

static void *reader(void *arg)
{
	uint64_t s = (uint64_t)(uintptr_t)arg * 104729 + 7;
	int fd = fd_for();
	unsigned char *buf;
	size_t b;

	if (fd < 0 || posix_memalign((void **)&buf, BLK,
				     mode == LONG ? LONG_SPAN : MIB))
		exit(2);
	while (!atomic_load(&c->stop)) {
		bool ok;

		switch (mode) {
		case LONG:
			if (pread(fd, buf, LONG_SPAN, 0) != (ssize_t)LONG_SPAN)
				exit(2);
			ok = true;
			for (b = 0; b < LONG_SPAN && ok; b += BLK)
				ok = uniform(buf, b, b + BLK);
			break;
		case WHOLE:
			if (pread(fd, buf, MIB, 0) != MIB)
				exit(2);
			ok = uniform(buf, 0, MIB);
			break;
		case SUB:
			if (pread(fd, buf, BLK, 0) != BLK)
				exit(2);
			ok = uniform(buf, 512, 2048);
			break;
		default: {
			size_t span = mode == WIDE ? 8 * MIB : MIB;
			off_t off = (off_t)(rnd(&s) % (span / BLK)) * BLK;

			if (pread(fd, buf, BLK, off) != BLK)
				exit(2);
			ok = uniform(buf, 0, BLK);
			break;
		}
		}
		atomic_fetch_add(&c->reads, 1);
		if (!ok)
			atomic_fetch_add(&c->torn, 1);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int writers, readers, i, n, secs;
	bool procs;
	pthread_t *t;
	pid_t *kids;
	char *buf;
	int fd;

	if (argc < 6)
		return 2;
	mode = !strcmp(argv[1], "whole") ? WHOLE
	       : !strcmp(argv[1], "sub") ? SUB
	       : !strcmp(argv[1], "punch") ? PUNCH
	       : !strcmp(argv[1], "long")  ? LONG
					   : WIDE;
	path = argv[2];
	secs = atoi(argv[3]);
	writers = atoi(argv[4]);
	readers = atoi(argv[5]);
	procs = argc > 6 && !strcmp(argv[6], "procs");
	n = writers + readers;
	c = mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	/* The region, written once so reads never meet a hole. */
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0 || posix_memalign((void **)&buf, BLK, MIB))
		return 2;
	memset(buf, 0xee, MIB);
	for (i = 0; i < (mode == WIDE ? 8 : mode == LONG ? 512 : 1); i++)
		if (pwrite(fd, buf, MIB, (off_t)i * MIB) != MIB)
			return 2;
	if (!procs)
		shared_fd = fd;

	t = calloc((size_t)n, sizeof(*t));
	kids = calloc((size_t)n, sizeof(*kids));
	for (i = 0; i < n; i++) {
		void *(*fn)(void *) = i < writers ? writer : reader;

		if (procs) {
			kids[i] = fork();
			if (kids[i] == 0) {
				fn((void *)(uintptr_t)(i + 1));
				_exit(0);
			}
		} else {
			pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)(i + 1));
		}
	}
	sleep((unsigned)secs);
	atomic_store(&c->stop, 1);
	for (i = 0; i < n; i++) {
		if (procs)
			waitpid(kids[i], NULL, 0);
		else
			pthread_join(t[i], NULL);
	}
	printf("reads=%ld torn=%ld writes=%ld\n", atomic_load(&c->reads),
	       atomic_load(&c->torn), atomic_load(&c->writes));
	return atomic_load(&c->torn) ? 1 : 0;
}
