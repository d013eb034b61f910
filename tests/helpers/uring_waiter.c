// SPDX-License-Identifier: MIT
/*
 * uring_waiter: the submission pattern of InnoDB's io_uring AIO.  S
 * submitter threads share one ring; each, under a mutex the waiter does
 * not take, gets an SQE, fills it (a 4 KiB O_DIRECT write of its own
 * block, user_data naming the request) and submits.  One thread reaps
 * with io_uring_wait_cqe, outside that mutex — so a wait that submitted
 * would publish another thread's entry, maybe half-filled.
 *
 *   uring_waiter [-s S] [-n N] [-a] FILE
 *     -s S   submitter threads (4)
 *     -n N   writes in all (20000), to blocks 0..N-1 of FILE
 *     -a     O_APPEND writes (offset ignored) instead of positional ones
 *
 * Each request has a buffer of its own.  Checks: every io_uring_submit returns 1; every completion names a
 * request that was submitted and not yet completed, with res 4096; the
 * count is N.  Positional: block i holds its own pattern afterwards.
 * Prints "submits_bad=.. stale=.. dup=.. failed=.. done=..", exit 0 when
 * all hold.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BS 4096

static struct io_uring ring;
static pthread_mutex_t sq_lock = PTHREAD_MUTEX_INITIALIZER;
static int fd, nsub = 4, nreq = 20000, append;
static atomic_int next_req, submits_bad;
static unsigned char *state; /* 0 free, 1 submitted, 2 completed */
static char *bufs;

static void *submitter(void *arg)
{
	(void)arg;
	for (;;) {
		int i = atomic_fetch_add(&next_req, 1), r;
		struct io_uring_sqe *sqe;
		char *b;

		if (i >= nreq)
			return NULL;
		b = bufs + (size_t)i * BS;
		memset(b, 'A' + i % 26, BS);
		memcpy(b, &i, sizeof(i));
		pthread_mutex_lock(&sq_lock);
		while (!(sqe = io_uring_get_sqe(&ring))) {
			pthread_mutex_unlock(&sq_lock);
			usleep(100);
			pthread_mutex_lock(&sq_lock);
		}
		io_uring_prep_write(sqe, fd, b, BS, append ? 0 : (uint64_t)i * BS);
		__atomic_store_n(&state[i], 1, __ATOMIC_RELEASE);
		io_uring_sqe_set_data64(sqe, (uint64_t)i + 1);
		r = io_uring_submit(&ring);
		pthread_mutex_unlock(&sq_lock);
		if (r != 1)
			atomic_fetch_add(&submits_bad, 1);
	}
}

int main(int argc, char **argv)
{
	int c, i, done = 0, stale = 0, dup = 0, failed = 0, bad = 0;
	pthread_t *th;

	while ((c = getopt(argc, argv, "s:n:a")) != -1) {
		if (c == 's')
			nsub = atoi(optarg);
		else if (c == 'n')
			nreq = atoi(optarg);
		else if (c == 'a')
			append = 1;
		else
			return 2;
	}
	if (optind != argc - 1 || nsub < 1 || nreq < 1)
		return 2;
	fd = open(argv[optind], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT |
					(append ? O_APPEND : 0), 0644);
	if (fd < 0 || posix_memalign((void **)&bufs, BS, (size_t)nreq * BS) ||
	    !(state = calloc((size_t)nreq, 1)) ||
	    io_uring_queue_init(64, &ring, 0)) {
		perror("setup");
		return 2;
	}
	th = calloc((size_t)nsub, sizeof(*th));
	for (i = 0; i < nsub; i++)
		pthread_create(&th[i], NULL, submitter, NULL);
	while (done < nreq) {
		struct io_uring_cqe *cqe;
		uint64_t d;
		int r = io_uring_wait_cqe(&ring, &cqe);

		if (r == -EINTR)
			continue;
		if (r) {
			fprintf(stderr, "wait: %s\n", strerror(-r));
			break;
		}
		d = io_uring_cqe_get_data64(cqe);
		if (d < 1 || d > (uint64_t)nreq ||
		    __atomic_load_n(&state[d - 1], __ATOMIC_ACQUIRE) == 0)
			stale++;
		else if (state[d - 1] == 2)
			dup++;
		else
			state[d - 1] = 2;
		if (cqe->res != BS)
			failed++;
		io_uring_cqe_seen(&ring, cqe);
		done++;
	}
	for (i = 0; i < nsub; i++)
		pthread_join(th[i], NULL);
	if (!append) {
		for (i = 0; i < nreq; i++) {
			int got = -1;

			if (pread(fd, bufs, BS, (off_t)i * BS) != BS ||
			    (memcpy(&got, bufs, sizeof(got)), got != i) ||
			    bufs[BS - 1] != 'A' + i % 26)
				bad++;
		}
	}
	io_uring_queue_exit(&ring);
	printf("submits_bad=%d stale=%d dup=%d failed=%d misplaced=%d done=%d\n",
	       atomic_load(&submits_bad), stale, dup, failed, bad, done);
	return atomic_load(&submits_bad) || stale || dup || failed || bad ||
	       done != nreq;
}
