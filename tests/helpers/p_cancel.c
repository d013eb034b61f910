// SPDX-License-Identifier: MIT
/*
 * p_cancel MODE FILE: threads and signals against one O_DIRECT file.  Each
 * mode prints only what is deterministic, so that a run outside the shim
 * and one under it can be diffed; lines starting with '#' are not for
 * diffing.  A watchdog ends the process with status 3 after 60 s, so that
 * a deadlock fails rather than hangs.
 *
 *   cancel    threads looping in pwrite (and in write on an O_APPEND fd)
 *             are cancelled (deferred); another thread then ftruncates and
 *             appends, and the process exits normally
 *   signal    SIGALRM (setitimer) handlers append to the fd the main
 *             thread is appending to; every record lands exactly once
 *   sigopen   SIGALRM handlers open, append to and close a file while the
 *             main thread opens, appends and closes another
 *   pending   with a cancel pending, call functions that are not
 *             cancellation points (lseek, ftruncate, truncate, fstat,
 *             posix_fallocate, fcntl, dup, close_range...), each in its own
 *             thread: each must return, as it does without the shim
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#define K 4096
#define NTHREADS 4

static const char *path;
static int fd, wfd;
static _Atomic long progress[NTHREADS];
static _Atomic int stop;

static void watchdog(int sig)
{
	(void)sig;
	static const char msg[] = "p_cancel: watchdog: stuck for 60 s\n";
	ssize_t r = syscall(SYS_write, 2, msg, sizeof(msg) - 1);

	(void)r;
	_exit(3);
}

static void start_watchdog(void)
{
	/* SIGALRM is the signal modes' own: the watchdog uses a POSIX timer
	 * on SIGUSR2. */
	struct sigevent sev = { .sigev_notify = SIGEV_SIGNAL,
				.sigev_signo = SIGUSR2 };
	struct itimerspec its = { .it_value = { .tv_sec = 60 } };
	timer_t t;

	signal(SIGUSR2, watchdog);
	if (timer_create(CLOCK_MONOTONIC, &sev, &t) == 0)
		timer_settime(t, 0, &its, NULL);
}

static long long size_of(int f)
{
	struct stat st;

	return fstat(f, &st) ? -1 : (long long)st.st_size;
}

/* ---- cancel ---------------------------------------------------------- */

static void *pwriter(void *arg)
{
	long i = (long)arg;
	char *b = aligned_alloc(K, K);
	off_t base = (off_t)(i / 2) * (2 << 20), off = base;

	memset(b, 'p', K);
	for (;;) {
		/* Positional writes past the end (the shim reserves), and
		 * appends through the O_APPEND fd. */
		if (i & 1) {
			if (write(fd, b, K) != K)
				break;
		} else {
			if (pwrite(wfd, b, K, off) != K)
				break;
			off += K;
			if (off >= base + (2 << 20))
				off = base;
		}
		atomic_fetch_add(&progress[i], 1);
	}
	return NULL;
}

static void *truncater(void *arg)
{
	(void)arg;
	printf("ftruncate ret=%d\n", ftruncate(wfd, 0));
	printf("size after ftruncate=%lld\n", size_of(fd));
	return NULL;
}

static int mode_cancel(void)
{
	pthread_t t[NTHREADS], tt;
	void *res;
	char *b = aligned_alloc(K, K);

	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, pwriter, (void *)i);
	/* Let every thread get going (no timing: progress counts). */
	for (int i = 0; i < NTHREADS; i++)
		while (atomic_load(&progress[i]) < 50)
			usleep(1000);
	for (int i = 0; i < NTHREADS; i++)
		pthread_cancel(t[i]);
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(t[i], &res);
		printf("thread %d cancelled=%d\n", i, res == PTHREAD_CANCELED);
	}
	/* The barrier a truncate raises must not wait for the cancelled. */
	pthread_create(&tt, NULL, truncater, NULL);
	pthread_join(tt, NULL);
	memset(b, 'z', K);
	printf("append ret=%zd\n", write(fd, b, K));
	printf("pwrite ret=%zd\n", pwrite(wfd, b, K, K));
	printf("size=%lld\n", size_of(fd));
	printf("close ret=%d %d\n", close(fd), close(wfd));
	return 0;
}

/* ---- signal ------------------------------------------------------------ */

#define MAIN_RECORDS 1000
static char hbuf[K] __attribute__((aligned(K)));
static volatile sig_atomic_t handler_writes, handler_fail;

static void on_alarm(int sig)
{
	int saved = errno;

	(void)sig;
	if (!stop) {
		snprintf(hbuf, 32, "H%08d", (int)handler_writes);
		if (write(fd, hbuf, K) == K)
			handler_writes++;
		else
			handler_fail++;
	}
	errno = saved;
}

/* Every record exactly once, none torn, no zeros: read back. */
static void check_records(long main_n, long handler_n)
{
	char *seen_m = calloc((size_t)main_n + 1, 1);
	char *seen_h = calloc((size_t)handler_n + 1, 1);
	char *b = aligned_alloc(K, K);
	long bad = 0, dup = 0, total = 0;
	int rfd = open(path, O_RDONLY);

	while (read(rfd, b, K) == K) {
		int n;

		total++;
		if (sscanf(b, "M%08d", &n) == 1 && n >= 0 && n < main_n &&
		    b[K - 1] == 'm')
			dup += seen_m[n]++ > 0;
		else if (sscanf(b, "H%08d", &n) == 1 && n >= 0 &&
			 n < handler_n)
			dup += seen_h[n]++ > 0;
		else
			bad++;
	}
	close(rfd);
	for (long i = 0; i < main_n; i++)
		bad += !seen_m[i];
	for (long i = 0; i < handler_n; i++)
		bad += !seen_h[i];
	printf("records: total-matches=%d bad=%ld duplicated=%ld\n",
	       total == main_n + handler_n, bad, dup);
}

static int mode_signal(void)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	struct itimerval it = { { 0, 2000 }, { 0, 2000 } };
	char *b = aligned_alloc(K, K);
	long failures = 0;

	/* Only records from here on in the file. */
	if (ftruncate(wfd, 0))
		printf("ftruncate failed\n");
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (int i = 0; i < MAIN_RECORDS; i++) {
		memset(b, 'm', K);
		snprintf(b, 32, "M%08d", i);
		if (write(fd, b, K) != K)
			failures++;
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	stop = 1;
	printf("#handler writes=%d\n", (int)handler_writes);
	printf("main failures=%ld handler failures=%d\n", failures,
	       (int)handler_fail);
	printf("size-matches=%d\n",
	       size_of(fd) == (long long)(MAIN_RECORDS + handler_writes) * K);
	printf("close ret=%d\n", close(fd));
	{
		struct stat st;

		stat(path, &st);
		printf("closed size-matches=%d\n",
		       st.st_size ==
			       (long long)(MAIN_RECORDS + handler_writes) * K);
	}
	check_records(MAIN_RECORDS, handler_writes);
	return 0;
}

/* ---- sigopen ------------------------------------------------------------ */

static char *path2;
static volatile sig_atomic_t h_opens, h_fail;

static void on_alarm_open(int sig)
{
	int saved = errno, f;

	(void)sig;
	if (stop)
		return;
	f = open(path2, O_WRONLY | O_CREAT | O_DIRECT | O_APPEND, 0644);
	if (f < 0) {
		h_fail++;
	} else {
		if (write(f, hbuf, K) != K)
			h_fail++;
		if (close(f))
			h_fail++;
		h_opens++;
	}
	errno = saved;
}

static int mode_sigopen(void)
{
	struct sigaction sa = { .sa_handler = on_alarm_open };
	struct itimerval it = { { 0, 2000 }, { 0, 2000 } };
	char *b = aligned_alloc(K, K);
	size_t l = strlen(path) + 3;
	long failures = 0;
	struct stat st;

	path2 = malloc(l);
	snprintf(path2, l, "%s.2", path);
	memset(b, 'o', K);
	memset(hbuf, 'h', K);
	close(fd);
	close(wfd);
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (int i = 0; i < 500; i++) {
		int f = open(path, O_WRONLY | O_CREAT | O_DIRECT | O_APPEND,
			     0644);

		if (f < 0 || write(f, b, K) != K)
			failures++;
		if (f >= 0 && i % 2 == 0 && ftruncate(f, (off_t)(i + 1) * K))
			failures++;
		if (f >= 0 && close(f))
			failures++;
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	stop = 1;
	printf("#handler opens=%d\n", (int)h_opens);
	printf("main failures=%ld handler failures=%d\n", failures,
	       (int)h_fail);
	stat(path, &st);
	printf("size=%lld\n", (long long)st.st_size);
	stat(path2, &st);
	printf("size2-matches=%d\n", st.st_size == (long long)h_opens * K);
	return 0;
}

/* ---- pending --------------------------------------------------------- */

static pthread_barrier_t bar;
static int which;

static void *pending_thread(void *arg)
{
	struct stat st;
	long r = 0;
	int w = (int)(long)arg;
	const char *name = "?";
	char *b = aligned_alloc(K, K);

	memset(b, 'c', K);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_barrier_wait(&bar); /* main cancels us now */
	pthread_barrier_wait(&bar);
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	errno = 0;
	switch (w) {
	case 0:
		name = "lseek SEEK_END";
		r = (long)lseek(fd, 0, SEEK_END);
		break;
	case 1:
		name = "lseek SEEK_DATA";
		r = (long)lseek(wfd, 0, SEEK_DATA);
		break;
	case 2:
		name = "ftruncate";
		r = ftruncate(wfd, 12 * K);
		break;
	case 3:
		name = "truncate";
		r = truncate(path, 12 * K);
		break;
	case 4:
		name = "fstat";
		r = fstat(fd, &st) ? -1 : (long)st.st_size;
		break;
	case 5:
		name = "stat";
		r = stat(path, &st) ? -1 : (long)st.st_size;
		break;
	case 6:
		name = "posix_fallocate";
		r = posix_fallocate(wfd, 0, 40 * K);
		break;
	case 7:
		name = "fcntl F_SETFL";
		r = fcntl(fd, F_SETFL, O_APPEND | O_DIRECT);
		break;
	case 8:
		name = "dup";
		r = dup(fd);
		if (r >= 0)
			r = 0;
		break;
	case 9:
		name = "lseek SEEK_SET";
		r = (long)lseek(wfd, 4 * K, SEEK_SET);
		break;
	case 10:
		name = "open O_TRUNC";
		r = open(path, O_WRONLY | O_TRUNC);
		if (r >= 0)
			r = 0;
		break;
	}
	printf("%s returned %ld (%s)\n", name, r,
	       errno ? strerrorname_np(errno) : "0");
	printf("size=%lld\n", size_of(fd));
	fflush(stdout);
	pthread_testcancel();
	return NULL;
}

static int mode_pending(void)
{
	char *b = aligned_alloc(K, K);

	memset(b, 'x', K);
	for (which = 0; which <= 10; which++) {
		pthread_t t;
		void *res;

		/* A reservation in place, and a known size, each time. */
		if (ftruncate(wfd, 0) || write(fd, b, K) != K ||
		    write(fd, b, K) != K || write(fd, b, K) != K ||
		    write(fd, b, K) != K)
			printf("setup failed\n");
		pthread_barrier_init(&bar, NULL, 2);
		pthread_create(&t, NULL, pending_thread, (void *)(long)which);
		pthread_barrier_wait(&bar);
		pthread_cancel(t);
		pthread_barrier_wait(&bar);
		pthread_join(t, &res);
		printf("case %d cancelled=%d size=%lld\n", which,
		       res == PTHREAD_CANCELED, size_of(fd));
		pthread_barrier_destroy(&bar);
	}
	return 0;
}

int main(int argc, char **argv)
{
	char *b;

	if (argc != 3) {
		fprintf(stderr, "usage: p_cancel cancel|signal|sigopen|pending "
				"FILE\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	start_watchdog();
	path = argv[2];
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_APPEND,
		  0644);
	wfd = open(path, O_WRONLY | O_DIRECT);
	if (fd < 0 || wfd < 0) {
		perror("open");
		return 1;
	}
	/* A reservation in place before anything else. */
	b = aligned_alloc(K, K);
	memset(b, 's', K);
	for (int i = 0; i < 4; i++)
		if (write(fd, b, K) != K)
			perror("write");
	{
		struct stat st;

		if (syscall(SYS_fstat, fd, &st) == 0)
			printf("#ksize %lld\n", (long long)st.st_size);
	}
	if (!strcmp(argv[1], "cancel"))
		return mode_cancel();
	if (!strcmp(argv[1], "signal"))
		return mode_signal();
	if (!strcmp(argv[1], "sigopen"))
		return mode_sigopen();
	if (!strcmp(argv[1], "pending"))
		return mode_pending();
	fprintf(stderr, "p_cancel: unknown mode %s\n", argv[1]);
	return 2;
}
