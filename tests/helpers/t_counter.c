// SPDX-License-Identifier: MIT
/*
 * t_counter: threads writing records (t_rec.h) with pwrite at offsets
 * taken from a shared counter, as a database's log writers do, through
 * one O_DIRECT descriptor; between phases, with every writer stopped, the
 * file is cut to half its size with ftruncate, synced with fsync, and the
 * counter goes back to the new end.  For fault injection: a failed write
 * is logged and the thread goes on with its next record, a failed truncate
 * or sync is counted and the run goes on.  t_verify checks the file
 * against the log afterwards.
 *
 *   t_counter [options] FILE
 *     -t T        threads (4)
 *     -n N        records per thread (200), spread over the phases
 *     -b BS       record size (4096)
 *     -P P        phases (3): P-1 truncates
 *     -l LOG      write the log on exit, in one write
 *
 * Log lines, in t_verify's format: "R writer seq off k k" for a record
 * whose pwrite returned BS (k: truncates done before it), "T k len" for
 * the k-th truncate, "H off len" for a write that failed (its range may
 * stay a hole, as with the kernel alone).
 *
 * At each phase's end and after the last, fstat must give the size the
 * kernel alone would: the end of the furthest acknowledged record, or the
 * last truncate's length if larger.  Output: one line of key=value pairs;
 * errors= the calls that failed, wrong= the answers that were not the
 * kernel's.  Exits 0 if neither, 1 otherwise, 3 if the log was not
 * written whole.
 */
#include "t_rec.h"

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

static int threads = 4, phases = 3, fd;
static uint64_t per_thread = 200;
static size_t bs = 4096;
static const char *logpath;

static _Atomic uint64_t counter, hi; /* next offset; furthest acked end */
static _Atomic int errors, wrong;
static int ntrunc; /* written by the serial thread between barriers */
static pthread_barrier_t bar;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char *logbuf;
static size_t loglen, logcap;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	va_list ap;
	int n;

	pthread_mutex_lock(&log_lock);
	if (logcap - loglen < 128) {
		logcap = logcap ? logcap * 2 : 1 << 16;
		logbuf = realloc(logbuf, logcap);
		if (!logbuf)
			abort();
	}
	va_start(ap, fmt);
	n = vsnprintf(logbuf + loglen, logcap - loglen, fmt, ap);
	va_end(ap);
	loglen += (size_t)n;
	pthread_mutex_unlock(&log_lock);
}

static void raise_hi(uint64_t end)
{
	uint64_t cur = atomic_load(&hi);

	while (cur < end && !atomic_compare_exchange_weak(&hi, &cur, end))
		;
}

/* fstat must say what the kernel alone would. */
static void check_size(const char *when)
{
	struct stat st;

	if (fstat(fd, &st)) {
		fprintf(stderr, "fstat %s: %s\n", when, strerror(errno));
		atomic_fetch_add(&errors, 1);
		return;
	}
	if ((uint64_t)st.st_size != atomic_load(&hi)) {
		fprintf(stderr, "wrong: fstat %s: size %lld, expected %" PRIu64
				"\n", when, (long long)st.st_size,
			atomic_load(&hi));
		atomic_fetch_add(&wrong, 1);
	}
}

/* Between phases, every writer stopped: cut to half, sync. */
static void between(int phase)
{
	char when[64];
	uint64_t len = atomic_load(&hi) / 2 / bs * bs;

	snprintf(when, sizeof(when), "after phase %d", phase);
	check_size(when);
	if (ftruncate(fd, (off_t)len)) {
		fprintf(stderr, "ftruncate %" PRIu64 ": %s\n", len,
			strerror(errno));
		atomic_fetch_add(&errors, 1);
	} else {
		logf_("T %d %" PRIu64 "\n", ntrunc++, len);
		atomic_store(&counter, len);
		atomic_store(&hi, len);
	}
	if (fsync(fd)) {
		fprintf(stderr, "fsync: %s\n", strerror(errno));
		atomic_fetch_add(&errors, 1);
	}
}

static void *work(void *arg)
{
	uint32_t id = (uint32_t)(uintptr_t)arg;
	uint64_t seq = 0, each = per_thread / (uint64_t)phases, k;
	char *buf;
	int p;

	if (posix_memalign((void **)&buf, 4096, bs))
		abort();
	for (p = 0; p < phases; p++) {
		int t = ntrunc; /* stable: changed only between barriers */

		for (k = 0; k < each; k++, seq++) {
			uint64_t off = atomic_fetch_add(&counter, bs);
			ssize_t r;

			rec_stamp(buf, bs, id, seq);
			r = pwrite(fd, buf, bs, (off_t)off);
			if (r == (ssize_t)bs) {
				raise_hi(off + bs);
				logf_("R %u %" PRIu64 " %" PRIu64 " %d %d\n", id,
				      seq, off, t, t);
				continue;
			}
			fprintf(stderr, "writer %u: pwrite at %" PRIu64
					" returned %zd: %s\n", id, off, r,
				r < 0 ? strerror(errno) : "short");
			atomic_fetch_add(&errors, 1);
			logf_("H %" PRIu64 " %zu\n", off, bs);
			/* A short write acknowledged part of it: it may
			 * stay, and the kernel's size covers it. */
			if (r > 0)
				raise_hi(off + (uint64_t)r);
		}
		if (p == phases - 1)
			break;
		if (pthread_barrier_wait(&bar) == PTHREAD_BARRIER_SERIAL_THREAD)
			between(p);
		pthread_barrier_wait(&bar);
	}
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t *th;
	struct stat st;
	int c, i, rc = 0;

	while ((c = getopt(argc, argv, "t:n:b:P:l:")) != -1) {
		switch (c) {
		case 't': threads = atoi(optarg); break;
		case 'n': per_thread = strtoull(optarg, NULL, 0); break;
		case 'b': bs = strtoull(optarg, NULL, 0); break;
		case 'P': phases = atoi(optarg); break;
		case 'l': logpath = optarg; break;
		default:
			fprintf(stderr, "usage: t_counter [-t T] [-n N] [-b BS] "
					"[-P PHASES] [-l LOG] FILE\n");
			return 2;
		}
	}
	if (optind != argc - 1 || threads < 1 || phases < 1 ||
	    bs < REC_SECTOR || bs % REC_SECTOR)
		return 2;
	fd = open(argv[optind], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0) {
		perror(argv[optind]);
		return 1;
	}
	pthread_barrier_init(&bar, NULL, (unsigned)threads);
	th = calloc((size_t)threads, sizeof(*th));
	for (i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, work, (void *)(uintptr_t)i))
			abort();
	for (i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	check_size("at the end");
	if (fstat(fd, &st))
		st.st_size = -1;
	if (close(fd)) {
		perror("close");
		atomic_fetch_add(&errors, 1);
	}
	if (logpath) {
		int lfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (lfd < 0 || write(lfd, logbuf, loglen) != (ssize_t)loglen ||
		    close(lfd)) {
			perror(logpath);
			rc = 3;
		}
	}
	printf("size=%lld truncates=%d errors=%d wrong=%d\n",
	       (long long)st.st_size, ntrunc, atomic_load(&errors),
	       atomic_load(&wrong));
	if (rc)
		return rc;
	return atomic_load(&errors) || atomic_load(&wrong) ? 1 : 0;
}
