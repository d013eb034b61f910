// SPDX-License-Identifier: MIT
/*
 * sigsubmit ENGINE N LOG FILE: the main thread appends N 4 KiB records to
 * FILE (O_APPEND|O_DIRECT, made new) queued through ENGINE (aio: libaio,
 * uring: liburing), one submitted and reaped at a time, while a 200 us
 * interval timer's handler appends a record of its own through a second
 * context or ring of the same engine, submitted and reaped in the
 * handler — re-entering the shim while its thread is inside its own
 * submission.  A submission the handler gets EAGAIN for (nothing taken:
 * the shim cannot track it there) is counted, not retried.  Writes LOG
 * for t_verify (every acknowledged record, its offset unknown: -1);
 * prints "main=N handler=H refused=R other=E"; exits 1 if E (a failure
 * other than EAGAIN in the handler, or any in the main thread).
 */
#include "t_rec.h"

#include <fcntl.h>
#include <inttypes.h>
#include <libaio.h>
#include <liburing.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/time.h>

#define BS 4096
#define MAX_HANDLER 2000

static int fd;
static bool use_uring;
static io_context_t hctx;
static struct io_uring hring;
static char *hbuf;
static volatile sig_atomic_t handler_n, refused, other, in_handler;
static uint64_t handler_seq[MAX_HANDLER];

/* One append queued and reaped: its result (bytes, or -errno). */
static long append_aio(io_context_t ctx, char *buf)
{
	struct iocb cb, *cbs[1] = { &cb };
	struct io_event ev;
	int r;

	io_prep_pwrite(&cb, fd, buf, BS, 0);
	r = io_submit(ctx, 1, cbs);
	if (r != 1)
		return r < 0 ? r : -EIO;
	while ((r = io_getevents(ctx, 1, 1, &ev, NULL)) == -EINTR)
		;
	if (r != 1)
		return -EIO;
	return (long)ev.res;
}

static long append_uring(struct io_uring *ring, char *buf)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;
	long res;
	int r;

	if (!sqe)
		return -EBUSY;
	io_uring_prep_write(sqe, fd, buf, BS, 0);
	r = io_uring_submit(ring);
	if (r != 1) {
		/* Not taken: the entry is still queued; take it back. */
		if (r == -EAGAIN)
			ring->sq.sqe_tail--;
		return r < 0 ? r : -EIO;
	}
	while ((r = io_uring_wait_cqe(ring, &cqe)) == -EINTR)
		;
	if (r)
		return -EIO;
	res = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return res;
}

static void on_alarm(int sig)
{
	int saved = errno, n = handler_n;
	long r;

	(void)sig;
	if (in_handler || n >= MAX_HANDLER)
		return;
	in_handler = 1;
	rec_stamp(hbuf, BS, 1, (uint64_t)n);
	r = use_uring ? append_uring(&hring, hbuf) : append_aio(hctx, hbuf);
	if (r == BS) {
		handler_seq[n] = (uint64_t)n;
		handler_n = n + 1;
	} else if (r == -EAGAIN) {
		refused++;
	} else {
		other++;
	}
	in_handler = 0;
	errno = saved;
}

int main(int argc, char **argv)
{
	struct itimerval it = { { 0, 200 }, { 0, 200 } }, off = { { 0, 0 },
								 { 0, 0 } };
	struct io_uring ring;
	io_context_t ctx = 0;
	struct sigaction sa;
	long n, k, r;
	char *buf;
	FILE *log;

	if (argc != 5)
		return 2;
	use_uring = !strcmp(argv[1], "uring");
	n = atol(argv[2]);
	log = fopen(argv[3], "w");
	fd = open(argv[4], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_DIRECT,
		  0644);
	if (!log || fd < 0 || posix_memalign((void **)&buf, BS, BS) ||
	    posix_memalign((void **)&hbuf, BS, BS))
		return 2;
	if (use_uring ? io_uring_queue_init(4, &ring, 0) ||
				io_uring_queue_init(4, &hring, 0)
		      : io_setup(4, &ctx) || io_setup(4, &hctx))
		return 2;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (k = 0; k < n; k++) {
		rec_stamp(buf, BS, 0, (uint64_t)k);
		do
			r = use_uring ? append_uring(&ring, buf)
				      : append_aio(ctx, buf);
		while (r == -EINTR);
		if (r != BS) {
			fprintf(stderr, "main: append %ld: %ld\n", k, r);
			other++;
			break;
		}
		fprintf(log, "R 0 %ld -1 0 0\n", k);
	}
	setitimer(ITIMER_REAL, &off, NULL);
	for (k = 0; k < handler_n; k++)
		fprintf(log, "R 1 %" PRIu64 " -1 0 0\n", handler_seq[k]);
	fclose(log);
	printf("main=%ld handler=%d refused=%d other=%d\n", n,
	       (int)handler_n, (int)refused, (int)other);
	return close(fd) || other ? 1 : 0;
}
