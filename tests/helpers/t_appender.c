// SPDX-License-Identifier: MIT
/*
 * t_appender: threads appending records (t_rec.h) to one file with
 * O_APPEND|O_DIRECT, logging where each acknowledged record went, so that
 * t_verify can tell afterwards what must, may and must not be in the file.
 *
 *   t_appender [options] FILE
 *     -t T        threads (4); each opens its own descriptor, so the end of
 *                 its write (lseek SEEK_CUR) tells where the record went
 *     -n N        records per thread, at most (1000)
 *     -b BS       record size (4096)
 *     -w BASE     first writer id (0)
 *     -c          O_TRUNC the file first (it is always O_CREAT)
 *     -B          buffered: no O_DIRECT
 *     -F FD       write through the inherited descriptor FD (all threads);
 *                 offsets are then unknown and logged as -1
 *     -l LOG      write the log of acknowledged records on exit
 *     -s STOP     stop once the file STOP exists
 *     -r N:FILE   create FILE once N records are acknowledged
 *     -p N:READY:GO  after N records: create READY, wait for GO, go on
 *     -m PRE:MARK an outside truncate: PRE exists from just before it,
 *                 MARK from just after it
 *     -k K        after MARK is seen, each thread writes K more, then stops
 *     -T N        a thread of this process ftruncates N times, alternately
 *                 down to half the size and up by 16 records
 *     -e          ENOSPC, EDQUOT or EFBIG ends a thread quietly
 *     -R          a write that fails with EINTR is made again (as a log
 *                 appender retrying an interrupted call would)
 *
 * Log lines: "R writer seq off sa fb" for a record (sa: truncates finished
 * before its write started; fb: truncates started before it returned) and
 * "T index len" for a truncate.  Output: one line of key=value pairs, size
 * being fstat's answer after every writer has finished.
 */
#include "t_rec.h"

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct rec {
	uint32_t writer;
	uint64_t seq;
	int64_t off;
	uint32_t sa, fb;
};

struct worker {
	pthread_t th;
	uint32_t id;
	int fd;
	struct rec *recs;
	uint64_t n;
	int err;
};

static const char *file, *logpath, *stop_path, *ready_path, *pause_ready,
	*pause_go, *pre_path, *mark_path;
static int threads = 4, inherited = -1, truncs;
static uint64_t per_thread = 1000, ready_at, pause_at, after_mark = ~0ull;
static uint32_t base;
static size_t bs = 4096;
static bool direct = true, do_trunc, quiet_full, retry_eintr;

static _Atomic uint64_t tickets, acked;
static _Atomic int resumed, writers_left;
static _Atomic uint32_t trunc_started, trunc_done;
static _Atomic int enospc, errors;
static uint64_t trunc_len[64];

static uint32_t started_count(void)
{
	if (truncs)
		return atomic_load(&trunc_done);
	return mark_path && path_exists(mark_path) ? 1 : 0;
}

static uint32_t begun_count(void)
{
	if (truncs)
		return atomic_load(&trunc_started);
	return pre_path && path_exists(pre_path) ? 1 : 0;
}

static void record_acked(void)
{
	uint64_t a = atomic_fetch_add(&acked, 1) + 1;

	if (ready_path && a == ready_at)
		touch(ready_path);
	if (pause_ready && a == pause_at) {
		touch(pause_ready);
		if (wait_for(pause_go))
			exit(3);
		atomic_store(&resumed, 1);
	}
}

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t seq, extra = 0;
	char *buf;
	ssize_t r;

	if (posix_memalign((void **)&buf, 4096, bs))
		abort();
	w->recs = calloc(per_thread, sizeof(*w->recs));
	for (seq = 0; seq < per_thread; seq++) {
		struct rec *rc = &w->recs[w->n];
		uint64_t t;
		off_t pos;

		if (stop_path && path_exists(stop_path))
			break;
		if (mark_path && after_mark != ~0ull && path_exists(mark_path) &&
		    extra++ >= after_mark)
			break;
		/* A pause: records past the pause point wait for GO. */
		t = atomic_fetch_add(&tickets, 1);
		if (pause_ready && t >= pause_at)
			while (!atomic_load(&resumed))
				nap_ms(1);
		rec_stamp(buf, bs, w->id, seq);
		rc->sa = started_count();
		do
			r = write(w->fd, buf, bs);
		while (r < 0 && errno == EINTR && retry_eintr);
		rc->fb = begun_count();
		if (r != (ssize_t)bs) {
			int e = errno;

			if (r < 0 && quiet_full &&
			    (e == ENOSPC || e == EDQUOT || e == EFBIG)) {
				atomic_fetch_add(&enospc, 1);
			} else {
				fprintf(stderr, "writer %u: write returned %zd: %s\n",
					w->id, r, r < 0 ? strerror(e) : "short");
				atomic_fetch_add(&errors, 1);
			}
			w->err = r < 0 ? e : -1;
			break;
		}
		if (inherited >= 0) {
			pos = -1;
		} else {
			pos = lseek(w->fd, 0, SEEK_CUR);
			if (pos < (off_t)bs) {
				fprintf(stderr, "writer %u: position %lld after a write\n",
					w->id, (long long)pos);
				atomic_fetch_add(&errors, 1);
				break;
			}
			pos -= (off_t)bs;
		}
		rc->writer = w->id;
		rc->seq = seq;
		rc->off = pos;
		w->n++;
		record_acked();
	}
	free(buf);
	atomic_fetch_sub(&writers_left, 1);
	return NULL;
}

/* Alternately halve the file and grow it by 16 records, each time after
 * the writers have made some progress (never timed), spread over the
 * run. */
static void *truncator(void *arg)
{
	int fd = *(int *)arg, i;
	uint64_t seen = 0, gap = per_thread * (uint64_t)threads /
				 (uint64_t)(truncs + 2);
	struct stat st;

	for (i = 0; i < truncs && i < 64; i++) {
		uint64_t len;

		while (atomic_load(&acked) < seen + gap &&
		       atomic_load(&writers_left) > 0)
			nap_ms(1);
		if (atomic_load(&writers_left) == 0)
			break;
		seen = atomic_load(&acked);
		if (fstat(fd, &st)) {
			perror("fstat");
			atomic_fetch_add(&errors, 1);
			break;
		}
		if (i % 2 == 0)
			len = (uint64_t)st.st_size / 2 / bs * bs;
		else
			len = (uint64_t)st.st_size + 16 * bs;
		trunc_len[i] = len;
		atomic_fetch_add(&trunc_started, 1);
		if (ftruncate(fd, (off_t)len)) {
			perror("ftruncate");
			atomic_fetch_add(&errors, 1);
			break;
		}
		atomic_fetch_add(&trunc_done, 1);
	}
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: t_appender [-t T] [-n N] [-b BS] [-w BASE] [-c] "
			"[-B] [-F FD] [-l LOG] [-s STOP] [-r N:FILE]\n"
			"       [-p N:READY:GO] [-m PRE:MARK] [-k K] [-T N] [-e] FILE\n");
	exit(2);
}

static char *split(char *s)
{
	char *c = strchr(s, ':');

	if (!c)
		usage();
	*c = '\0';
	return c + 1;
}

int main(int argc, char **argv)
{
	struct worker *w;
	pthread_t tt;
	struct stat st;
	int c, i, fd0 = -1, flags;
	uint64_t total = 0;
	FILE *log;

	while ((c = getopt(argc, argv, "t:n:b:w:cBF:l:s:r:p:m:k:T:eR")) != -1) {
		switch (c) {
		case 't': threads = atoi(optarg); break;
		case 'n': per_thread = strtoull(optarg, NULL, 0); break;
		case 'b': bs = strtoull(optarg, NULL, 0); break;
		case 'w': base = (uint32_t)atoi(optarg); break;
		case 'c': do_trunc = true; break;
		case 'B': direct = false; break;
		case 'F': inherited = atoi(optarg); break;
		case 'l': logpath = optarg; break;
		case 's': stop_path = optarg; break;
		case 'r':
			ready_path = split(optarg);
			ready_at = strtoull(optarg, NULL, 0);
			break;
		case 'p': {
			char *r = split(optarg);

			pause_ready = r;
			pause_go = split(r);
			pause_at = strtoull(optarg, NULL, 0);
			break;
		}
		case 'm':
			pre_path = optarg;
			mark_path = split(optarg);
			break;
		case 'k': after_mark = strtoull(optarg, NULL, 0); break;
		case 'T': truncs = atoi(optarg); break;
		case 'e': quiet_full = true; break;
		case 'R': retry_eintr = true; break;
		default: usage();
		}
	}
	if (optind != argc - 1 || threads < 1 || bs < REC_SECTOR ||
	    bs % REC_SECTOR || truncs > 64)
		usage();
	file = argv[optind];
	flags = O_WRONLY | O_CREAT | O_APPEND | (direct ? O_DIRECT : 0);
	if (inherited < 0) {
		fd0 = open(file, flags | (do_trunc ? O_TRUNC : 0), 0644);
		if (fd0 < 0) {
			perror(file);
			return 1;
		}
	}
	atomic_store(&writers_left, threads);
	w = calloc((size_t)threads, sizeof(*w));
	for (i = 0; i < threads; i++) {
		w[i].id = base + (uint32_t)i;
		if (inherited >= 0)
			w[i].fd = inherited;
		else if (i == 0)
			w[i].fd = fd0;
		else
			w[i].fd = open(file, flags, 0644);
		if (w[i].fd < 0) {
			perror(file);
			return 1;
		}
	}
	for (i = 0; i < threads; i++)
		if (pthread_create(&w[i].th, NULL, work, &w[i]))
			abort();
	if (truncs && pthread_create(&tt, NULL, truncator, &w[0].fd))
		abort();
	for (i = 0; i < threads; i++)
		pthread_join(w[i].th, NULL);
	if (truncs)
		pthread_join(tt, NULL);
	if (fstat(w[0].fd, &st)) {
		perror("fstat");
		return 1;
	}
	if (logpath) {
		log = fopen(logpath, "w");
		if (!log) {
			perror(logpath);
			return 1;
		}
		for (i = 0; i < (int)atomic_load(&trunc_done); i++)
			fprintf(log, "T %d %" PRIu64 "\n", i, trunc_len[i]);
		for (i = 0; i < threads; i++) {
			uint64_t k;

			for (k = 0; k < w[i].n; k++) {
				struct rec *r = &w[i].recs[k];

				fprintf(log, "R %u %" PRIu64 " %lld %u %u\n",
					r->writer, r->seq, (long long)r->off,
					r->sa, r->fb);
			}
		}
		if (fclose(log)) {
			perror(logpath);
			return 1;
		}
	}
	for (i = 0; i < threads; i++) {
		total += w[i].n;
		if (inherited < 0)
			close(w[i].fd);
	}
	printf("records=%" PRIu64 " size=%lld truncates=%u enospc=%d errors=%d\n",
	       total, (long long)st.st_size, atomic_load(&trunc_done),
	       atomic_load(&enospc), atomic_load(&errors));
	return atomic_load(&errors) ? 1 : 0;
}
