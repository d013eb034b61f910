// SPDX-License-Identifier: MIT
/*
 * aiothreads FILE T R [B]: T threads, each with its own libaio context,
 * append to FILE (O_APPEND|O_DIRECT, made new with one 4 KiB block) one
 * stamped 4 KiB record at a time through io_submit, reaping each before
 * the next, R records each.  With B, each submits B records at once to a
 * context made for one: the kernel takes them in part (the rest are
 * submitted again once it has room), R rounds of B each.  Then, through the same descriptor, every
 * record must be there once, after the first block, and the size their
 * sum.  Prints "records=N size=S bad=B secs=X"; exits 0 when B is 0.
 */
#include "t_rec.h"

#include <fcntl.h>
#include <libaio.h>
#include <pthread.h>
#include <stdatomic.h>

#define BS 4096

static int fd, rounds;
static _Atomic int failures;

static int per_submit = 1;

/* B records at once, submitted again in part while the kernel takes
 * them in part, each reaped. */
static void *appender_many(void *arg)
{
	uint32_t w = (uint32_t)(uintptr_t)arg;
	struct iocb io[64], *ios[64];
	struct io_event ev[64];
	io_context_t ctx = 0;
	char *buf;
	int r, i, done, got, n;

	if (io_setup(1, &ctx) ||
	    posix_memalign((void **)&buf, BS, (size_t)per_submit * BS)) {
		atomic_fetch_add(&failures, 1);
		return NULL;
	}
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < per_submit; i++) {
			rec_stamp(buf + (size_t)i * BS, BS, w,
				  (uint64_t)r * (uint64_t)per_submit +
					  (uint64_t)i);
			io_prep_pwrite(&io[i], fd, buf + (size_t)i * BS, BS, 0);
			ios[i] = &io[i];
		}
		for (done = 0; done < per_submit; done += n) {
			n = io_submit(ctx, per_submit - done, ios + done);
			if (n == -EAGAIN)
				n = 0;
			if (n < 0)
				break;
			got = io_getevents(ctx, n ? n : 1, 64, ev, NULL);
			for (i = 0; i < got; i++)
				if ((long)ev[i].res != BS)
					atomic_fetch_add(&failures, 1);
			if (!n && got <= 0)
				break;
		}
		if (done < per_submit) {
			atomic_fetch_add(&failures, 1);
			break;
		}
	}
	io_destroy(ctx);
	free(buf);
	return NULL;
}

static void *appender(void *arg)
{
	uint32_t w = (uint32_t)(uintptr_t)arg;
	struct iocb io, *ios[1] = { &io };
	struct io_event ev;
	io_context_t ctx = 0;
	char *buf;
	int r;

	if (io_setup(4, &ctx) || posix_memalign((void **)&buf, BS, BS)) {
		atomic_fetch_add(&failures, 1);
		return NULL;
	}
	for (r = 0; r < rounds; r++) {
		rec_stamp(buf, BS, w, (uint64_t)r);
		io_prep_pwrite(&io, fd, buf, BS, 0);
		if (io_submit(ctx, 1, ios) != 1 ||
		    io_getevents(ctx, 1, 1, &ev, NULL) != 1 ||
		    (long)ev.res != BS) {
			atomic_fetch_add(&failures, 1);
			break;
		}
	}
	io_destroy(ctx);
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[64];
	struct timespec t0, t1;
	struct stat st;
	char *seen, *b;
	long i, n, bad = 0;
	int threads;

	if (argc < 4 || argc > 5 || (threads = atoi(argv[2])) < 1 ||
	    threads > 64 || (rounds = atoi(argv[3])) < 1)
		return 2;
	if (argc == 5 && ((per_submit = atoi(argv[4])) < 1 || per_submit > 64))
		return 2;
	n = (long)threads * rounds * per_submit;
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_DIRECT,
		  0644);
	if (fd < 0 || posix_memalign((void **)&b, BS, BS))
		return 2;
	memset(b, 'h', BS);
	if (write(fd, b, BS) != BS)
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < threads; i++)
		pthread_create(&th[i], NULL,
			       per_submit > 1 ? appender_many : appender,
			       (void *)(uintptr_t)i);
	for (i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	seen = calloc((size_t)n, 1);
	if (fstat(fd, &st) || st.st_size != (1 + n) * BS)
		bad++;
	for (i = 1; i <= n; i++) {
		const struct rec_head *h = (const void *)b;

		if (pread(fd, b, BS, i * BS) != BS || h->magic != REC_MAGIC ||
		    h->writer >= (uint32_t)threads ||
		    h->seq >= (uint64_t)rounds * (uint64_t)per_submit ||
		    seen[h->writer * (long)rounds * per_submit +
			 (long)h->seq]++)
			bad++;
	}
	printf("records=%ld size=%lld bad=%ld secs=%.2f\n", n,
	       (long long)st.st_size, bad + atomic_load(&failures),
	       (double)(t1.tv_sec - t0.tv_sec) +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	return bad || atomic_load(&failures) ? 1 : 0;
}
