/* SPDX-License-Identifier: MIT */
/*
 * Records shared by the t_* test helpers: the same format as
 * bench/appendbench.c, so that `appendbench check` verifies what they write.
 * Every 512-byte sector of a record carries its writer, its sequence number
 * and a checksum, and the rest of the sector a pattern of both: a torn,
 * lost, doubled or misplaced record is recognised.
 */
#ifndef T_REC_H
#define T_REC_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define REC_MAGIC 0x44494f5348494d52ull /* "DIOSHIMR" */
#define REC_SECTOR 512

static inline uint64_t rec_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

struct rec_head {
	uint64_t magic;
	uint32_t writer;
	uint32_t sector;
	uint64_t seq;
	uint64_t check;
};

static inline void rec_stamp(char *buf, size_t bs, uint32_t writer,
			     uint64_t seq)
{
	size_t s;

	for (s = 0; s < bs / REC_SECTOR; s++) {
		struct rec_head *h = (void *)(buf + s * REC_SECTOR);
		uint64_t fill = rec_mix(((uint64_t)writer << 40) ^ seq ^ s);

		h->magic = REC_MAGIC;
		h->writer = writer;
		h->sector = (uint32_t)s;
		h->seq = seq;
		h->check = rec_mix(REC_MAGIC ^ writer ^ (seq << 1) ^
				   ((uint64_t)s << 50));
		memset(buf + s * REC_SECTOR + sizeof(*h), (int)(fill & 0xff),
		       REC_SECTOR - sizeof(*h));
	}
}

/* 0 a whole record, 1 all zeros, 2 torn or garbage. */
static inline int rec_parse(const char *buf, size_t bs, uint32_t *writer,
			    uint64_t *seq)
{
	const struct rec_head *h0 = (const void *)buf;
	size_t s, i;

	for (i = 0; i < bs && !buf[i]; i++)
		;
	if (i == bs)
		return 1;
	for (s = 0; s < bs / REC_SECTOR; s++) {
		const struct rec_head *h = (const void *)(buf + s * REC_SECTOR);
		uint64_t fill;

		if (h->magic != REC_MAGIC || h->writer != h0->writer ||
		    h->seq != h0->seq || h->sector != s ||
		    h->check != rec_mix(REC_MAGIC ^ h->writer ^ (h->seq << 1) ^
					((uint64_t)s << 50)))
			return 2;
		fill = rec_mix(((uint64_t)h->writer << 40) ^ h->seq ^ s) & 0xff;
		for (i = sizeof(*h); i < REC_SECTOR; i++)
			if ((unsigned char)buf[s * REC_SECTOR + i] != fill)
				return 2;
	}
	*writer = h0->writer;
	*seq = h0->seq;
	return 0;
}

static inline int path_exists(const char *p)
{
	struct stat st;

	return p && stat(p, &st) == 0;
}

static inline void touch(const char *p)
{
	FILE *f = fopen(p, "w");

	if (!f) {
		perror(p);
		exit(3);
	}
	fclose(f);
}

static inline void nap_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Wait (at most ~120 s: a test must not hang) until p exists. */
static inline int wait_for(const char *p)
{
	int i;

	for (i = 0; i < 120000; i++) {
		if (path_exists(p))
			return 0;
		nap_ms(1);
	}
	fprintf(stderr, "timed out waiting for %s\n", p);
	return -1;
}

#endif
