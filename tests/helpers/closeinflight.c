// SPDX-License-Identifier: MIT
/*
 * closeinflight FILE LEN MS close|exit|loop: a descriptor goes away while
 * another thread's write through it is still in the kernel.
 *
 * Opens FILE (O_WRONLY|O_CREAT|O_TRUNC|O_DIRECT), writes one 4 KiB
 * record at 0, then a thread writes LEN bytes at 4096 with one pwrite
 * while, MS milliseconds later, the main thread either closes the
 * descriptor ("close"; the thread's write then returns, and its result is
 * printed), or ends the process with exit(0) ("exit").  Run it with its
 * writes slowed (a blkio limit) so that the write is still in flight.
 *
 * "loop": the thread writes LEN bytes after LEN bytes, each at the end of
 * the last, until a write fails (EBADF once the descriptor is closed),
 * and the close comes MS milliseconds in; prints "acked=N", the bytes
 * whose writes returned: the file must end at 4096 + N, all of them the
 * pattern.
 *
 * The kernel alone keeps the write whole either way: the file ends at
 * 4096 + LEN and every byte of it is the pattern.  Prints "pwrite=N" for
 * "close", and whether the close returned while the write was still in
 * flight; exits 0, or 1 if a call failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fd;
static size_t len;
static char *buf;
static ssize_t got;
static volatile int started, done;
static int looping;
static unsigned long long acked;

static void *writer(void *arg)
{
	(void)arg;
	started = 1;
	if (looping) {
		ssize_t n;

		while ((n = pwrite(fd, buf, len, 4096 + acked)) > 0)
			acked += (unsigned long long)n;
		done = 1;
		return NULL;
	}
	got = pwrite(fd, buf, len, 4096);
	done = 1;
	return NULL;
}

int main(int argc, char **argv)
{
	struct timespec nap;
	pthread_t t;
	int in_flight;
	long ms;

	if (argc != 5) {
		fprintf(stderr, "usage: closeinflight FILE LEN MS close|exit\n");
		return 2;
	}
	len = strtoull(argv[2], NULL, 0);
	ms = strtol(argv[3], NULL, 0);
	if (!len || len % 4096 ||
	    posix_memalign((void **)&buf, 4096, len + 4096))
		return 2;
	memset(buf, 0x5a, len + 4096);
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0 || pwrite(fd, buf, 4096, 0) != 4096) {
		perror(argv[1]);
		return 1;
	}
	looping = !strcmp(argv[4], "loop");
	if (pthread_create(&t, NULL, writer, NULL))
		return 1;
	while (!started)
		sched_yield();
	nap.tv_sec = ms / 1000;
	nap.tv_nsec = (ms % 1000) * 1000000L;
	nanosleep(&nap, NULL);
	if (!strcmp(argv[4], "exit"))
		exit(0);
	if (close(fd)) {
		perror("close");
		return 1;
	}
	/* Whether the close came back while the write was still in the
	 * kernel: the kernel alone's does (the run is not vacuous). */
	in_flight = !done;
	pthread_join(t, NULL);
	if (looping) {
		printf("acked=%llu\n", acked);
		return 0;
	}
	printf("pwrite=%zd closed-in-flight=%d\n", got, in_flight);
	return got == (ssize_t)len ? 0 : 1;
}
