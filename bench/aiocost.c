// SPDX-License-Identifier: MIT
/*
 * aiocost FILE BATCHES: what one queued write costs, in nanoseconds: a
 * 4 KiB O_DIRECT overwrite of FILE (allocated, at least 64 MiB) through
 * libaio, four in flight (so that the shim serves the file as it does a
 * database's or QEMU's: more than one write at a time), each reaped by
 * io_getevents and replaced by io_submit.  BATCHES batches of 1000, each
 * timed; prints the fastest batch, the 10th percentile and the median,
 * per request.  On tmpfs the write is made inside io_submit
 * and costs little, so what the shim adds to the two calls shows; the
 * fastest batches are the ones nothing else interrupted (batches.h).
 */
#define _GNU_SOURCE
#include "batches.h"

#include <fcntl.h>
#include <libaio.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define REQUESTS 1000
#define DEPTH 4
#define BLOCKS 16384 /* 64 MiB of 4 KiB blocks */

int main(int argc, char **argv)
{
	struct iocb io[DEPTH], *p;
	struct io_event ev;
	io_context_t ctx = 0;
	int fd, batches, b, i;
	unsigned long k = 0;
	double *t, start;
	void *buf;

	if (argc != 3 || (batches = atoi(argv[2])) < 10)
		return 2;
	fd = open(argv[1], O_WRONLY | O_DIRECT);
	t = malloc(sizeof(*t) * (size_t)batches);
	if (fd < 0 || !t || io_setup(DEPTH, &ctx) ||
	    posix_memalign(&buf, 4096, 4096))
		return 2;
	for (i = 0; i < DEPTH; i++) {
		io_prep_pwrite(&io[i], fd, buf, 4096, (long long)i * 4096);
		p = &io[i];
		if (io_submit(ctx, 1, &p) != 1)
			return 1;
	}
	for (b = 0; b < batches; b++) {
		start = now_ns();
		for (i = 0; i < REQUESTS; i++) {
			if (io_getevents(ctx, 1, 1, &ev, NULL) != 1 ||
			    ev.res != 4096)
				return 1;
			/* a stride that visits every block once per lap */
			k = (k + 7919) % BLOCKS;
			p = ev.obj;
			io_prep_pwrite(p, fd, buf, 4096, (long long)k * 4096);
			if (io_submit(ctx, 1, &p) != 1)
				return 1;
		}
		t[b] = (now_ns() - start) / REQUESTS;
	}
	batches_report(t, batches);
	return 0;
}
