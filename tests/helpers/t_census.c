// SPDX-License-Identifier: MIT
/*
 * t_census [-b BS] [-s] [-m MIN] FILE: what a file of t_rec.h records
 * holds, read outside the shim, for comparing runs.  One line:
 *
 *   size=      the file's size
 *   records=   blocks holding a whole record
 *   dup=       records (writer, seq) found more than once
 *   torn=      blocks neither a whole record nor zeros
 *   inside=    zero blocks before the end of the last record
 *   trailing=  bytes past the end of the last record (past MIN with -m:
 *              a truncate's length the file may keep)
 *   misplaced= (-s) records whose seq is not their block's index, as
 *              asyncwrite's seq and rand modes write them
 *   data_end=  the end of the last record
 *
 * Exits 0 (the counts are the answer, not the status), 2 if it cannot
 * read the file.
 */
#include "t_rec.h"

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>

struct key {
	uint32_t writer;
	uint64_t seq;
};

static int cmp(const void *a, const void *b)
{
	const struct key *x = a, *y = b;

	if (x->writer != y->writer)
		return x->writer < y->writer ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int main(int argc, char **argv)
{
	size_t bs = 4096, n = 0, i;
	uint64_t min = 0, b, blocks, records = 0, dup = 0, torn = 0, zeros = 0,
		 inside = 0, misplaced = 0, data_end = 0, trailing = 0;
	bool seqmode = false;
	struct key *keys;
	struct stat st;
	char *buf;
	int c, fd;

	while ((c = getopt(argc, argv, "b:sm:")) != -1) {
		switch (c) {
		case 'b': bs = strtoull(optarg, NULL, 0); break;
		case 's': seqmode = true; break;
		case 'm': min = strtoull(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: t_census [-b BS] [-s] [-m MIN] FILE\n");
			return 2;
		}
	}
	if (optind != argc - 1 || bs < REC_SECTOR)
		return 2;
	fd = open(argv[optind], O_RDONLY);
	if (fd < 0 || fstat(fd, &st)) {
		perror(argv[optind]);
		return 2;
	}
	blocks = ((uint64_t)st.st_size + bs - 1) / bs;
	keys = calloc(blocks + 1, sizeof(*keys));
	buf = malloc(bs);
	if (!keys || !buf)
		return 2;
	for (b = 0; b < blocks; b++) {
		uint32_t w;
		uint64_t seq;
		ssize_t r;
		int k;

		memset(buf, 0, bs);
		r = pread(fd, buf, bs, (off_t)(b * bs));
		if (r < 0) {
			perror("pread");
			return 2;
		}
		k = (size_t)r == bs ? rec_parse(buf, bs, &w, &seq) : 2;
		if ((size_t)r < bs) {
			/* a partial last block: zeros or torn */
			ssize_t j;

			for (j = 0; j < r && !buf[j]; j++)
				;
			k = j == r ? 1 : 2;
		}
		if (k == 1) {
			zeros++;
			continue;
		}
		inside += zeros;
		zeros = 0;
		data_end = b * bs + ((size_t)r < bs ? (size_t)r : bs);
		if (k == 2) {
			torn++;
			continue;
		}
		records++;
		if (seqmode && seq != b)
			misplaced++;
		keys[n].writer = w;
		keys[n++].seq = seq;
	}
	qsort(keys, n, sizeof(*keys), cmp);
	for (i = 1; i < n; i++)
		if (!cmp(&keys[i - 1], &keys[i]))
			dup++;
	if ((uint64_t)st.st_size > data_end && (uint64_t)st.st_size > min)
		trailing = (uint64_t)st.st_size - (data_end > min ? data_end : min);
	printf("size=%lld records=%" PRIu64 " dup=%" PRIu64 " torn=%" PRIu64
	       " inside=%" PRIu64 " trailing=%" PRIu64 " misplaced=%" PRIu64
	       " data_end=%" PRIu64 "\n", (long long)st.st_size, records, dup,
	       torn, inside, trailing, misplaced, data_end);
	return 0;
}
