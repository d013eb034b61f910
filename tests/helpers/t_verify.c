// SPDX-License-Identifier: MIT
/*
 * t_verify: check a file t_appender wrote against its log.  Run it outside
 * the shim.
 *
 *   t_verify [-b BS] [-z] [-S SIZE] [-x LEN] [-o OFF] FILE LOG...
 *     -z        zero blocks are allowed (a truncate grew the file); else
 *               a zero block is a lost write
 *     -o OFF    look only at the blocks from OFF on (the logs then name
 *               the records written there)
 *     -S SIZE   the file's size must be SIZE
 *     -x LEN    an outside truncate to LEN happened (t_appender -m)
 *
 * Every block must be zeros (with -z) or a whole record that the log says
 * was acknowledged at that very offset (offset -1: anywhere), and no record
 * may appear twice.  With truncates (from the log, or -x):
 *   - a record written before a truncate to below its end must be gone;
 *   - a record that no truncate after its start could have cut must be
 *     there (so must every record when there was no truncate);
 *   - the size is the last truncate's length or the end of the records
 *     appended after it, and nothing past that length is zeros.
 * A log line "H off len" names a range a write that failed was given (a
 * positioned write, t_counter): zero blocks there are no lost write.
 * Prints one line; exits 0 when everything holds.
 */
#include "t_rec.h"

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>

struct rec {
	uint32_t writer;
	uint64_t seq;
	int64_t off;
	uint32_t sa, fb;
	int seen;
};

static struct rec *recs;
static size_t nrec, caprec;
static uint64_t tlen[65];
static int ntrunc;
static int bad, max_report = 20;
/* "H off len": ranges failed writes were given; zeros there are allowed. */
static uint64_t (*holes)[2];
static size_t nholes, capholes;

static bool in_hole(uint64_t at, size_t bs)
{
	size_t i;

	for (i = 0; i < nholes; i++)
		if (at >= holes[i][0] && at + bs <= holes[i][0] + holes[i][1])
			return true;
	return false;
}

#define FAIL(...)                                   \
	do {                                        \
		if (bad++ < max_report)             \
			printf(__VA_ARGS__);        \
	} while (0)

static int cmp(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;

	if (x->writer != y->writer)
		return x->writer < y->writer ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static struct rec *find(uint32_t writer, uint64_t seq)
{
	struct rec key = { .writer = writer, .seq = seq };

	return bsearch(&key, recs, nrec, sizeof(*recs), cmp);
}

static void load(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256];

	if (!f) {
		perror(path);
		exit(2);
	}
	while (fgets(line, sizeof(line), f)) {
		struct rec r = { 0 };
		long long off;
		int idx;
		uint64_t len, off64;

		if (sscanf(line, "H %" SCNu64 " %" SCNu64, &off64, &len) == 2) {
			if (nholes == capholes) {
				capholes = capholes ? capholes * 2 : 64;
				holes = realloc(holes, capholes * sizeof(*holes));
				if (!holes)
					exit(2);
			}
			holes[nholes][0] = off64;
			holes[nholes++][1] = len;
			continue;
		}
		if (sscanf(line, "T %d %" SCNu64, &idx, &len) == 2) {
			if (idx < 0 || idx > 63)
				exit(2);
			tlen[idx] = len;
			if (idx + 1 > ntrunc)
				ntrunc = idx + 1;
			continue;
		}
		if (sscanf(line, "R %u %" SCNu64 " %lld %u %u", &r.writer,
			   &r.seq, &off, &r.sa, &r.fb) != 5) {
			fprintf(stderr, "%s: bad line %s", path, line);
			exit(2);
		}
		r.off = off;
		if (nrec == caprec) {
			caprec = caprec ? caprec * 2 : 4096;
			recs = realloc(recs, caprec * sizeof(*recs));
		}
		recs[nrec++] = r;
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	size_t bs = 4096, i;
	bool zeros_ok = false;
	long long want_size = -1;
	uint64_t size, b, blocks, zeros = 0, present = 0, last_end = 0, start = 0;
	struct stat st;
	char *buf;
	int c, fd, li;

	while ((c = getopt(argc, argv, "b:zS:x:o:v")) != -1) {
		switch (c) {
		case 'v': max_report = 1 << 30; break;
		case 'b': bs = strtoull(optarg, NULL, 0); break;
		case 'z': zeros_ok = true; break;
		case 'S': want_size = strtoll(optarg, NULL, 0); break;
		case 'x':
			tlen[ntrunc++] = strtoull(optarg, NULL, 0);
			break;
		case 'o': start = strtoull(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: t_verify [-b BS] [-z] [-S SIZE] "
					"[-x LEN] [-o OFF] [-v] FILE LOG...\n");
			return 2;
		}
	}
	if (optind + 2 > argc)
		return 2;
	for (li = optind + 1; li < argc; li++)
		load(argv[li]);
	qsort(recs, nrec, sizeof(*recs), cmp);
	for (i = 1; i < nrec; i++)
		if (!cmp(&recs[i - 1], &recs[i]))
			FAIL("log: writer %u seq %" PRIu64 " twice\n",
			     recs[i].writer, recs[i].seq);

	fd = open(argv[optind], O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[optind]);
		return 2;
	}
	size = (uint64_t)st.st_size;
	if (want_size >= 0 && size != (uint64_t)want_size)
		FAIL("size %" PRIu64 ", expected %lld\n", size, want_size);
	if (start > size)
		start = size;
	if ((size - start) % bs)
		FAIL("size %" PRIu64 " is not a whole number of records\n", size);
	blocks = (size - start) / bs;
	buf = malloc(bs);
	for (b = 0; b < blocks; b++) {
		uint32_t w;
		uint64_t seq;
		struct rec *r;
		int k;

		uint64_t at = start + b * bs;

		if (pread(fd, buf, bs, (off_t)at) != (ssize_t)bs) {
			FAIL("short read at block %" PRIu64 "\n", b);
			break;
		}
		k = rec_parse(buf, bs, &w, &seq);
		if (k == 1) {
			zeros++;
			if (in_hole(at, bs))
				continue;
			if (!zeros_ok)
				FAIL("block %" PRIu64 ": zeros (a lost write)\n", b);
			else if (ntrunc && at >= tlen[ntrunc - 1])
				FAIL("block %" PRIu64 ": zeros past the last "
				     "truncate (%" PRIu64 ")\n", b,
				     tlen[ntrunc - 1]);
			continue;
		}
		if (k == 2) {
			FAIL("block %" PRIu64 ": torn or garbage\n", b);
			continue;
		}
		last_end = at + bs;
		r = find(w, seq);
		if (!r) {
			FAIL("block %" PRIu64 ": writer %u seq %" PRIu64
			     " was never acknowledged\n", b, w, seq);
			continue;
		}
		if (r->seen++) {
			FAIL("block %" PRIu64 ": writer %u seq %" PRIu64
			     " appears twice\n", b, w, seq);
			continue;
		}
		present++;
		if (r->off >= 0 && (uint64_t)r->off != at)
			FAIL("block %" PRIu64 ": writer %u seq %" PRIu64
			     " was acknowledged at %lld\n", b, w, seq,
			     (long long)r->off);
		/* Truncates that started after this write returned. */
		for (li = (int)r->fb; li < ntrunc; li++)
			if (r->off >= 0 && tlen[li] < (uint64_t)r->off + bs)
				FAIL("block %" PRIu64 ": writer %u seq %" PRIu64
				     " survived truncate %d to %" PRIu64 "\n",
				     b, w, seq, li, tlen[li]);
	}
	for (i = 0; i < nrec; i++) {
		struct rec *r = &recs[i];
		bool must = true;

		if (r->seen)
			continue;
		for (li = (int)r->sa; li < ntrunc; li++)
			if (r->off < 0 || tlen[li] < (uint64_t)r->off + bs)
				must = false;
		if (must)
			FAIL("writer %u seq %" PRIu64 " (at %lld) is missing\n",
			     r->writer, r->seq, (long long)r->off);
	}
	if (ntrunc) {
		uint64_t want = tlen[ntrunc - 1] > last_end ? tlen[ntrunc - 1]
							     : last_end;

		if (size != want)
			FAIL("size %" PRIu64 ": the last truncate was to %" PRIu64
			     " and the records end at %" PRIu64 "\n",
			     size, tlen[ntrunc - 1], last_end);
	}
	printf("%s: size=%" PRIu64 " blocks=%" PRIu64 " records=%" PRIu64
	       " logged=%zu zeros=%" PRIu64 " truncates=%d: %s\n",
	       argv[optind], size, blocks, present, nrec, zeros, ntrunc,
	       bad ? "BAD" : "ok");
	return bad ? 1 : 0;
}
