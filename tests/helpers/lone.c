// SPDX-License-Identifier: MIT
/*
 * lone: a lone O_DIRECT writer (no segment yet, DIOSHIM_ENGAGE=contention)
 * at the edges a review found.  Each mode prints one line to compare with
 * the kernel alone; a hang is caught by the caller's timeout.
 *
 *   lone cancel FILE w|f   a thread looping pwrite (w) or fallocate (f) is
 *                          cancelled; then one pwrite at 1 MiB: its count
 *                          and the size
 *   lone signal FILE SECS  the main thread pwrites for SECS seconds while
 *                          a SIGALRM every 50 us pwrites to the same fd:
 *                          the size
 *   lone keep FILE         fallocate(KEEP_SIZE) 8 MiB, one append, then a
 *                          second description and two threads appending
 *                          256 records each: size and allocated bytes
 *                          after close
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define BLK 4096

static int fd;
static char *buf, *hbuf, mode;
static volatile long handled;

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static char *block(int c)
{
	char *b;

	if (posix_memalign((void **)&b, BLK, BLK))
		die("posix_memalign");
	memset(b, c, BLK);
	return b;
}

static void *loop(void *arg)
{
	long i;

	for (i = 0;; i++) {
		if (mode == 'w')
			pwrite(fd, buf, BLK, (i % 16) * BLK);
		else
			fallocate(fd, 0, 0, 65536 + (i % 16) * BLK);
	}
	return arg;
}

/* Past it, the handler writes no more: on a loaded machine a direct
 * write can take longer than the timer's period, and the main thread's
 * write, restarted after every handler, would never finish. */
static volatile time_t deadline;

static void on_alarm(int sig)
{
	int e = errno;

	(void)sig;
	if (time(NULL) < deadline)
		pwrite(fd, hbuf, BLK, (1 << 20) + (handled++ % 64) * BLK);
	errno = e;
}

static void *appender(void *arg)
{
	int i, afd = (int)(long)arg;

	for (i = 0; i < 256; i++)
		if (write(afd, buf, BLK) != BLK)
			die("write");
	return NULL;
}

int main(int argc, char **argv)
{
	struct stat st;
	pthread_t t, t2;

	if (argc < 3)
		return 2;
	buf = block('m');
	hbuf = block('h');
	if (!strcmp(argv[1], "cancel") && argc > 3) {
		ssize_t r;

		mode = argv[3][0];
		fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
		if (fd < 0 || pthread_create(&t, NULL, loop, NULL))
			die("setup");
		usleep(20000);
		pthread_cancel(t);
		pthread_join(t, NULL);
		r = pwrite(fd, buf, BLK, 1 << 20);
		fstat(fd, &st);
		printf("pwrite=%zd size=%lld\n", r, (long long)st.st_size);
	} else if (!strcmp(argv[1], "signal") && argc > 3) {
		struct sigaction sa = { .sa_handler = on_alarm,
					.sa_flags = SA_RESTART };
		struct itimerval it = { { 0, 50 }, { 0, 50 } }, off = { 0 };
		time_t end = time(NULL) + atoi(argv[3]);
		long n = 0;

		deadline = end;
		fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
		if (fd < 0)
			die(argv[2]);
		sigaction(SIGALRM, &sa, NULL);
		setitimer(ITIMER_REAL, &it, NULL);
		while (time(NULL) < end)
			pwrite(fd, buf, BLK, (n++ % 64) * BLK);
		setitimer(ITIMER_REAL, &off, NULL);
		fstat(fd, &st);
		printf("size=%lld\n", (long long)st.st_size);
	} else if (!strcmp(argv[1], "keep")) {
		int fd2;

		fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT |
					   O_APPEND,
			  0644);
		if (fd < 0 || fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 8 << 20) ||
		    write(fd, buf, BLK) != BLK)
			die("keep");
		fd2 = open(argv[2], O_WRONLY | O_DIRECT | O_APPEND);
		if (fd2 < 0 ||
		    pthread_create(&t, NULL, appender, (void *)(long)fd) ||
		    pthread_create(&t2, NULL, appender, (void *)(long)fd2))
			die("keep threads");
		pthread_join(t, NULL);
		pthread_join(t2, NULL);
		close(fd);
		close(fd2);
		stat(argv[2], &st);
		printf("size=%lld allocated=%lld\n", (long long)st.st_size,
		       (long long)st.st_blocks * 512);
	} else {
		return 2;
	}
	return 0;
}
