// SPDX-License-Identifier: MIT
/*
 * appendbench: N threads or processes writing one file with O_DIRECT, and a
 * checker for what they wrote.
 *
 *   appendbench run  [options] FILE   write, then print one result line
 *   appendbench check [options] FILE  verify a file an append run wrote
 *
 * Write modes (-m):
 *   counter    appends at offsets taken from a shared counter (pwrite)
 *   append     O_APPEND write()s
 *   overwrite  random block overwrites inside the file's existing size
 *   random     random block writes inside -S bytes of a sparse file
 *   redo       a database redo log: writes of 1 to 3 KiB, 512-aligned, at
 *              offsets from a shared counter (with -F 1: each followed by
 *              its sync, as InnoDB does)
 *
 * Every block written is a record: each 512-byte sector carries the
 * writer, the sequence number and a checksum, and the rest of the sector a
 * pattern of both, so a torn, lost, doubled or misplaced write is found.
 *
 * The result line is key=value pairs: mode, writers, ops, secs, iops,
 * cpu_us_per_op (user+sys of every writer, per write), size.
 *
 * For crash tests: -A ACKLOG logs "writer seq" for every record the
 * program was told is written (after its sync, with -F; else after the
 * write); -E ends a writer quietly at its first error (the filesystem was
 * shut down under it); -T SIZE adds a process that keeps truncating the
 * file to SIZE (raising the shim's barrier); -f syncs with fsync rather
 * than fdatasync.  -o makes each process open the file itself (with -p;
 * otherwise they share one open file, whose write()s the kernel runs one
 * at a time); -w BASE numbers writers from BASE, so that separate runs
 * can write one file (check with the same -w).  `check -A ACKLOG` then
 * requires every acknowledged
 * record, allows blocks of zeros (writes never acknowledged), and requires
 * the file to end at its data (or at SIZE with -T).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAGIC 0x44494f5348494d52ull /* "DIOSHIMR" */
#define SECTOR 512

enum mode { M_COUNTER, M_APPEND, M_OVERWRITE, M_RANDOM, M_REDO };

struct opts {
	enum mode mode;
	int threads, procs;
	size_t bs;
	uint64_t count; /* writes per writer; 0 = run for secs */
	double secs;
	uint64_t span; /* -S: the random mode's file extent */
	uint64_t prealloc; /* -P: fallocate this much first (the ceiling) */
	uint64_t fsync_every;
	bool buffered;
	bool keep; /* do not O_TRUNC the file */
	bool quiet_errors; /* -E */
	bool full_sync; /* -f */
	uint64_t trunc_to; /* -T */
	bool reopen; /* -o: each process opens the file itself */
	uint32_t wbase; /* -w: writer numbers start here */
	uint64_t ack_before; /* -X: check only acks made before (ns) */
	const char *acklog; /* -A */
	const char *file;
};

struct shared {
	_Atomic uint64_t next; /* the counter mode's next offset */
	_Atomic uint64_t ops;
	_Atomic int stop;
	_Atomic int errors;
	_Atomic int writers_done;
};

static struct opts o = {
	.mode = M_COUNTER, .threads = 1, .procs = 1, .bs = 4096, .secs = 5,
};
static struct shared *sh;
static int fd, ackfd = -1;

/* Acknowledge records [from, to) of writer w in one append, with the
 * time (CLOCK_REALTIME ns) the program was told they were written. */
static void ack(uint32_t w, uint64_t from, uint64_t to)
{
	struct timespec ts;
	char buf[4096];
	size_t n = 0;
	uint64_t now;

	clock_gettime(CLOCK_REALTIME, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	while (from < to) {
		n += (size_t)snprintf(buf + n, sizeof(buf) - n,
				      "%u %" PRIu64 " %" PRIu64 "\n", w, from++,
				      now);
		if (n > sizeof(buf) - 64 || from == to) {
			if (write(ackfd, buf, n) != (ssize_t)n)
				abort();
			n = 0;
		}
	}
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

struct sector_head {
	uint64_t magic;
	uint32_t writer;
	uint32_t sector;
	uint64_t seq;
	uint64_t check;
};

static void stamp(char *buf, size_t bs, uint32_t writer, uint64_t seq)
{
	size_t s;

	for (s = 0; s < bs / SECTOR; s++) {
		struct sector_head *h = (void *)(buf + s * SECTOR);
		uint64_t fill = mix(((uint64_t)writer << 40) ^ seq ^ s);

		h->magic = MAGIC;
		h->writer = writer;
		h->sector = (uint32_t)s;
		h->seq = seq;
		h->check = mix(MAGIC ^ writer ^ (seq << 1) ^ ((uint64_t)s << 50));
		memset(buf + s * SECTOR + sizeof(*h), (int)(fill & 0xff),
		       SECTOR - sizeof(*h));
	}
}

/* 0 good record, 1 all zeros, 2 torn or garbage */
static int parse(const char *buf, size_t bs, uint32_t *writer, uint64_t *seq)
{
	const struct sector_head *h0 = (const void *)buf;
	size_t s, i;

	for (i = 0; i < bs && !buf[i]; i++)
		;
	if (i == bs)
		return 1;
	for (s = 0; s < bs / SECTOR; s++) {
		const struct sector_head *h = (const void *)(buf + s * SECTOR);
		uint64_t fill;

		if (h->magic != MAGIC || h->writer != h0->writer ||
		    h->seq != h0->seq || h->sector != s ||
		    h->check != mix(MAGIC ^ h->writer ^ (h->seq << 1) ^
				    ((uint64_t)s << 50)))
			return 2;
		fill = mix(((uint64_t)h->writer << 40) ^ h->seq ^ s) & 0xff;
		for (i = sizeof(*h); i < SECTOR; i++)
			if ((unsigned char)buf[s * SECTOR + i] != fill)
				return 2;
	}
	*writer = h0->writer;
	*seq = h0->seq;
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct worker {
	uint32_t id;
	pthread_t th;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	uint64_t seq, rnd = mix(w->id + 1), size = 0, acked = 0;
	struct stat st;
	char *buf;
	ssize_t r;

	if (posix_memalign((void **)&buf, 4096, o.bs))
		abort();
	if (o.mode == M_OVERWRITE) {
		fstat(fd, &st);
		size = (uint64_t)st.st_size / o.bs;
		if (!size) {
			fprintf(stderr, "overwrite: the file is empty\n");
			atomic_fetch_add(&sh->errors, 1);
			return NULL;
		}
	}
	for (seq = 0; o.count ? seq < o.count : !atomic_load(&sh->stop);
	     seq++) {
		uint64_t off;

		stamp(buf, o.bs, w->id, seq);
		switch (o.mode) {
		case M_COUNTER:
			off = atomic_fetch_add(&sh->next, o.bs);
			if (o.trunc_to && off + o.bs > o.trunc_to)
				goto out; /* writes stay below -T */
			r = pwrite(fd, buf, o.bs, (off_t)off);
			break;
		case M_APPEND:
			r = write(fd, buf, o.bs);
			break;
		case M_REDO: {
			/* 1, 1.5, ... 3 KiB: the sizes a redo log writes. */
			size_t n = (2 + (size_t)(mix(rnd = mix(rnd)) % 5)) * SECTOR;

			off = atomic_fetch_add(&sh->next, n);
			r = pwrite(fd, buf, n, (off_t)off);
			if (r == (ssize_t)n)
				r = (ssize_t)o.bs;
			break;
		}
		case M_OVERWRITE:
			rnd = mix(rnd);
			r = pwrite(fd, buf, o.bs, (off_t)(rnd % size * o.bs));
			break;
		default:
			rnd = mix(rnd);
			r = pwrite(fd, buf, o.bs,
				   (off_t)(rnd % (o.span / o.bs) * o.bs));
			break;
		}
		if (r != (ssize_t)o.bs) {
			if (o.quiet_errors)
				break;
			fprintf(stderr, "writer %u: write returned %zd: %s\n",
				w->id, r, r < 0 ? strerror(errno) : "short");
			atomic_fetch_add(&sh->errors, 1);
			break;
		}
		if (o.fsync_every && (seq + 1) % o.fsync_every == 0) {
			if (o.full_sync ? fsync(fd) : fdatasync(fd)) {
				if (o.quiet_errors)
					break;
				perror("sync");
				atomic_fetch_add(&sh->errors, 1);
				break;
			}
			if (ackfd >= 0)
				ack(w->id, acked, seq + 1);
			acked = seq + 1;
		} else if (ackfd >= 0 && !o.fsync_every) {
			ack(w->id, seq, seq + 1);
		}
		atomic_fetch_add_explicit(&sh->ops, 1, memory_order_relaxed);
	}
out:
	free(buf);
	return NULL;
}

/* -T: keep truncating the file to one size, until the writers stop. */
static void truncater(void)
{
	while (!atomic_load(&sh->stop) && !atomic_load(&sh->writers_done))
		if (ftruncate(fd, (off_t)o.trunc_to)) {
			perror("ftruncate");
			_exit(1);
		}
	_exit(0);
}

/* One process's writers: threads numbered from base. */
static void run_threads(uint32_t base)
{
	struct worker *w = calloc((size_t)o.threads, sizeof(*w));
	int i;

	for (i = 0; i < o.threads; i++) {
		w[i].id = base + (uint32_t)i;
		if (pthread_create(&w[i].th, NULL, work, &w[i]))
			abort();
	}
	for (i = 0; i < o.threads; i++)
		pthread_join(w[i].th, NULL);
	free(w);
}

/* Ends a timed run: the writers poll sh->stop. */
static void *stopper(void *arg)
{
	struct timespec ts = { (time_t)o.secs,
			       (long)((o.secs - (time_t)o.secs) * 1e9) };

	(void)arg;
	nanosleep(&ts, NULL);
	atomic_store(&sh->stop, 1);
	return NULL;
}

static uint64_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'k': case 'K': v *= 1024; break;
	case 'm': case 'M': v *= 1024 * 1024; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
	}
	return (uint64_t)v;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: appendbench run|check [-m counter|append|overwrite|random|redo]\n"
		"         [-t threads] [-p procs] [-b blocksize] [-n writes-per-writer]\n"
		"         [-s seconds] [-S span] [-P prealloc] [-F fsync-every]\n"
		"         [-B (buffered)] [-k (keep file)] [-A acklog] [-E] [-f]\n"
		"         [-T truncate-size] [-o] [-w writer-base] [-X ack-before-ns]\n"
		"         FILE\n");
	exit(2);
}

static int cmd_run(void)
{
	struct rusage ru_self, ru_kids;
	double t0, t1, cpu;
	uint64_t ops;
	struct stat st;
	int flags = O_RDWR | O_CREAT | (o.buffered ? 0 : O_DIRECT);
	pid_t *kids = calloc((size_t)o.procs, sizeof(pid_t)), trunc_pid = 0;
	int p;

	if (!o.keep && o.mode != M_OVERWRITE)
		flags |= O_TRUNC;
	if (o.mode == M_APPEND)
		flags |= O_APPEND;
	fd = open(o.file, flags, 0644);
	if (fd < 0) {
		perror(o.file);
		return 1;
	}
	if (o.prealloc && fallocate(fd, 0, 0, (off_t)o.prealloc)) {
		perror("fallocate");
		return 1;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	if (o.acklog) {
		ackfd = open(o.acklog, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC,
			     0644);
		if (ackfd < 0) {
			perror(o.acklog);
			return 1;
		}
	}
	if (o.trunc_to) {
		trunc_pid = fork();
		if (trunc_pid == 0)
			truncater();
	}

	t0 = now();
	for (p = 0; o.procs > 1 && p < o.procs; p++) {
		kids[p] = fork();
		if (kids[p] == 0) {
			if (o.reopen) {
				close(fd);
				fd = open(o.file, flags & ~(O_TRUNC | O_CREAT));
				if (fd < 0) {
					perror(o.file);
					_exit(1);
				}
			}
			run_threads(o.wbase + (uint32_t)(p * o.threads));
			_exit(0);
		}
	}
	if (!o.count) {
		pthread_t timer;

		if (pthread_create(&timer, NULL, stopper, NULL))
			abort();
		if (o.procs == 1)
			run_threads(o.wbase);
		pthread_join(timer, NULL);
	} else if (o.procs == 1) {
		run_threads(o.wbase);
	}
	/* Writers first: the truncater runs until they are all done. */
	for (p = 0; o.procs > 1 && p < o.procs; p++)
		waitpid(kids[p], NULL, 0);
	atomic_store(&sh->writers_done, 1);
	if (trunc_pid > 0)
		waitpid(trunc_pid, NULL, 0);
	t1 = now();

	getrusage(RUSAGE_SELF, &ru_self);
	getrusage(RUSAGE_CHILDREN, &ru_kids);
	cpu = ru_self.ru_utime.tv_sec + ru_self.ru_utime.tv_usec / 1e6 +
	      ru_self.ru_stime.tv_sec + ru_self.ru_stime.tv_usec / 1e6 +
	      ru_kids.ru_utime.tv_sec + ru_kids.ru_utime.tv_usec / 1e6 +
	      ru_kids.ru_stime.tv_sec + ru_kids.ru_stime.tv_usec / 1e6;
	ops = atomic_load(&sh->ops);
	fstat(fd, &st);
	printf("mode=%s writers=%d ops=%" PRIu64 " secs=%.3f iops=%.0f "
	       "cpu_us_per_op=%.2f size=%lld errors=%d\n",
	       (const char *[]){ "counter", "append", "overwrite",
				 "random", "redo" }[o.mode],
	       o.threads * o.procs, ops, t1 - t0, ops / (t1 - t0),
	       ops ? cpu * 1e6 / (double)ops : 0.0, (long long)st.st_size,
	       atomic_load(&sh->errors));
	close(fd);
	return atomic_load(&sh->errors) ? 1 : 0;
}

/* The acknowledged records of an -A log, as a bitmap per writer. */
static int read_acks(uint32_t writers, uint64_t blocks, uint8_t **acked,
		     uint64_t *count)
{
	FILE *f = fopen(o.acklog, "r");
	unsigned w;
	uint64_t seq, when;

	*count = 0;
	if (!f) {
		perror(o.acklog);
		return 1;
	}
	while (fscanf(f, "%u %" SCNu64 " %" SCNu64, &w, &seq, &when) == 3) {
		w -= o.wbase;
		/* -X: a sync that returned after the filesystem began to shut
		 * down may have returned 0 for data the shutdown dropped
		 * (an XFS behaviour; a real power cut acknowledges nothing
		 * after it). */
		if (o.ack_before && when >= o.ack_before)
			continue;
		if (w >= writers || seq > blocks) {
			/* More acknowledged than the file can hold: lost. */
			printf("acknowledged writer %u seq %" PRIu64
			       " cannot be in a file of %" PRIu64 " blocks\n",
			       w, seq, blocks);
			fclose(f);
			return 1;
		}
		acked[w][seq] = 1;
		(*count)++;
	}
	fclose(f);
	return 0;
}

/*
 * Check a file an append or counter run wrote: every block a whole record,
 * no record twice, each writer's records 0..n-1 with none missing (with
 * -n: exactly n each).  With -A (after a crash or kills): every
 * acknowledged record present, zero blocks allowed (unacknowledged
 * writes), and the file ends at its last record (or at -T SIZE).
 */
static int cmd_check(void)
{
	uint32_t writers = (uint32_t)(o.threads * o.procs), w;
	uint64_t *next, blocks, b, *seen_count, acks = 0, data_end = 0;
	int rc = 0, kind;
	uint8_t **seen, **acked = NULL;
	struct stat st;
	char *buf;

	fd = open(o.file, O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		perror(o.file);
		return 1;
	}
	if (st.st_size % (off_t)o.bs) {
		printf("size %lld is not a whole number of %zu-byte records\n",
		       (long long)st.st_size, o.bs);
		rc = 1;
	}
	blocks = (uint64_t)st.st_size / o.bs;
	next = calloc(writers, sizeof(*next));
	seen_count = calloc(writers, sizeof(*seen_count));
	seen = calloc(writers, sizeof(*seen));
	for (w = 0; w < writers; w++)
		seen[w] = calloc(blocks + 1, 1);
	if (o.acklog) {
		acked = calloc(writers, sizeof(*acked));
		for (w = 0; w < writers; w++)
			acked[w] = calloc(blocks + 1, 1);
		rc |= read_acks(writers, blocks, acked, &acks);
	}
	buf = malloc(o.bs);
	for (b = 0; b < blocks; b++) {
		uint64_t seq;

		if (pread(fd, buf, o.bs, (off_t)(b * o.bs)) != (ssize_t)o.bs) {
			printf("short read at block %" PRIu64 "\n", b);
			rc = 1;
			break;
		}
		kind = parse(buf, o.bs, &w, &seq);
		w -= o.wbase;
		if (kind == 1) {
			if (!o.acklog) {
				printf("block %" PRIu64 ": zeros (a lost write)\n",
				       b);
				rc = 1;
			}
			continue;
		}
		data_end = (b + 1) * o.bs;
		if (kind == 2) {
			printf("block %" PRIu64 ": torn or garbage\n", b);
			rc = 1;
			continue;
		}
		if (w >= writers || seq > blocks) {
			printf("block %" PRIu64 ": writer %u seq %" PRIu64
			       " out of range\n", b, w, seq);
			rc = 1;
			continue;
		}
		if (seen[w][seq]++) {
			printf("writer %u seq %" PRIu64 " written twice\n", w,
			       seq);
			rc = 1;
		}
		seen_count[w]++;
		if (seq + 1 > next[w])
			next[w] = seq + 1;
	}
	for (w = 0; w < writers; w++) {
		if (acked) {
			for (b = 0; b <= blocks; b++)
				if (acked[w][b] && !seen[w][b]) {
					printf("writer %u seq %" PRIu64
					       ": acknowledged, not in the file\n",
					       w, b);
					rc = 1;
				}
			continue;
		}
		if (seen_count[w] != next[w]) {
			printf("writer %u: %" PRIu64 " records but highest seq "
			       "%" PRIu64 ": some are missing\n", w,
			       seen_count[w], next[w]);
			rc = 1;
		}
		if (o.count && next[w] != o.count) {
			printf("writer %u: %" PRIu64 " records, expected %"
			       PRIu64 "\n", w, next[w], o.count);
			rc = 1;
		}
	}
	if (o.acklog) {
		uint64_t want = o.trunc_to > data_end ? o.trunc_to : data_end;

		if ((uint64_t)st.st_size != want) {
			printf("size %lld, but the data ends at %" PRIu64 "%s\n",
			       (long long)st.st_size, data_end,
			       o.trunc_to ? " (or the -T size)" : "");
			rc = 1;
		}
	}
	printf("%s: %" PRIu64 " blocks, %u writers, %" PRIu64
	       " acknowledged: %s\n", o.file, blocks, writers, acks,
	       rc ? "BAD" : "ok");
	return rc;
}

int main(int argc, char **argv)
{
	const char *cmd;
	int c;

	if (argc < 2)
		usage();
	cmd = argv[1];
	optind = 2;
	while ((c = getopt(argc, argv, "m:t:p:b:n:s:S:P:F:BkA:EfT:ow:X:")) != -1) {
		switch (c) {
		case 'm':
			if (!strcmp(optarg, "counter"))
				o.mode = M_COUNTER;
			else if (!strcmp(optarg, "append"))
				o.mode = M_APPEND;
			else if (!strcmp(optarg, "overwrite"))
				o.mode = M_OVERWRITE;
			else if (!strcmp(optarg, "random"))
				o.mode = M_RANDOM;
			else if (!strcmp(optarg, "redo"))
				o.mode = M_REDO;
			else
				usage();
			break;
		case 't': o.threads = atoi(optarg); break;
		case 'p': o.procs = atoi(optarg); break;
		case 'b': o.bs = parse_size(optarg); break;
		case 'n': o.count = strtoull(optarg, NULL, 0); break;
		case 's': o.secs = atof(optarg); break;
		case 'S': o.span = parse_size(optarg); break;
		case 'P': o.prealloc = parse_size(optarg); break;
		case 'F': o.fsync_every = strtoull(optarg, NULL, 0); break;
		case 'B': o.buffered = true; break;
		case 'k': o.keep = true; break;
		case 'A': o.acklog = optarg; break;
		case 'E': o.quiet_errors = true; break;
		case 'f': o.full_sync = true; break;
		case 'T': o.trunc_to = parse_size(optarg); break;
		case 'o': o.reopen = true; break;
		case 'w': o.wbase = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'X': o.ack_before = strtoull(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (optind != argc - 1 || o.threads < 1 || o.procs < 1 ||
	    o.bs < SECTOR || o.bs % SECTOR ||
	    (o.mode == M_RANDOM && o.span < o.bs) ||
	    (o.mode == M_REDO && o.bs < 3072))
		usage();
	o.file = argv[optind];
	if (!strcmp(cmd, "run"))
		return cmd_run();
	if (!strcmp(cmd, "check"))
		return cmd_check();
	usage();
	return 2;
}
