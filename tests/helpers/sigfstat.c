// SPDX-License-Identifier: MIT
/*
 * sigfstat N FILE: N libaio writes (4 KiB, O_DIRECT, appending by offset)
 * submitted and reaped one at a time while a 50 µs interval timer's
 * SIGALRM handler calls fstat on the file — re-entering the shim while
 * its thread is inside io_submit or io_getevents.  Prints "writes=N
 * signals=S size=Z"; exit 0 when every write completed whole and the size
 * is N * 4096.  A hang is the failure the caller's timeout catches.
 */
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#define BS 4096

static int fd;
static volatile sig_atomic_t signals;

static void on_alarm(int sig)
{
	struct stat st;
	int saved = errno;

	(void)sig;
	if (fstat(fd, &st) == 0)
		signals++;
	errno = saved;
}

int main(int argc, char **argv)
{
	struct itimerval it = { { 0, 50 }, { 0, 50 } };
	struct sigaction sa;
	io_context_t ctx = 0;
	struct stat st;
	char *buf;
	int n, i;

	if (argc != 3 || posix_memalign((void **)&buf, BS, BS))
		return 2;
	n = atoi(argv[1]);
	fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0 || io_setup(8, &ctx))
		return 2;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (i = 0; i < n; i++) {
		struct iocb cb, *cbs[1] = { &cb };
		struct io_event ev;
		int r;

		memset(buf, 'a' + i % 26, BS);
		io_prep_pwrite(&cb, fd, buf, BS, (long long)i * BS);
		while ((r = io_submit(ctx, 1, cbs)) == -EINTR)
			;
		if (r != 1) {
			fprintf(stderr, "io_submit: %d\n", r);
			return 1;
		}
		while ((r = io_getevents(ctx, 1, 1, &ev, NULL)) == -EINTR)
			;
		if (r != 1 || (long)ev.res != BS) {
			fprintf(stderr, "io_getevents: %d res %ld\n", r,
				(long)ev.res);
			return 1;
		}
	}
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	io_destroy(ctx);
	if (fstat(fd, &st))
		return 1;
	printf("writes=%d signals=%d size=%lld\n", n, (int)signals,
	       (long long)st.st_size);
	return st.st_size == (off_t)n * BS ? 0 : 1;
}
