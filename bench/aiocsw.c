// SPDX-License-Identifier: MIT
/*
 * aiocsw MODE FILE [WRITES [DEPTH]]: does a queued write block its
 * submitter?  WRITES 4 KiB O_DIRECT writes (10000) through libaio, DEPTH
 * (3) in flight, each reaped by io_getevents and replaced by io_submit;
 * the voluntary context switches of the submitting thread across each
 * io_submit (getrusage RUSAGE_THREAD, ru_nvcsw) are summed: a submitter
 * that never sleeps in io_submit has 0 per write.
 *
 *   MODE append   block i at block i of a new file (each write extends)
 *   MODE oappend  the same through an O_APPEND descriptor: each write
 *                 lands where the kernel (or the shim) appends it
 *   MODE fill     the same blocks in a scattered order into a file
 *                 ftruncated to its final size first (a sparse file
 *                 filling)
 *
 * Prints "mode=M writes=N csw_per_write=X iops=Y".
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <libaio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long csw(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nvcsw;
}

int main(int argc, char **argv)
{
	long writes = argc > 3 ? atol(argv[3]) : 10000, switches = 0, before;
	int depth = argc > 4 ? atoi(argv[4]) : 3, fd, i, inflight = 0;
	struct iocb *io, *p;
	struct io_event ev;
	io_context_t ctx = 0;
	struct timespec t0, t1;
	bool fill, oappend;
	long next = 0;
	char *buf;
	double secs;

	if (argc < 3 || writes <= 0 || depth <= 0)
		return 2;
	fill = !strcmp(argv[1], "fill");
	oappend = !strcmp(argv[1], "oappend");
	if (!fill && !oappend && strcmp(argv[1], "append"))
		return 2;
	fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT |
				   (oappend ? O_APPEND : 0),
		  0644);
	io = calloc((size_t)depth, sizeof(*io));
	if (fd < 0 || !io || io_setup(depth, &ctx) ||
	    posix_memalign((void **)&buf, 4096, 4096 * (size_t)depth))
		return 2;
	memset(buf, 'a', 4096 * (size_t)depth);
	if (fill && ftruncate(fd, (off_t)writes * 4096))
		return 2;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (next < writes || inflight) {
		if (next < writes && inflight < depth) {
			/* fill: a stride coprime with most sizes scatters the
			 * blocks; each is written once. */
			long blk = fill ? (next * 7919) % writes : next;

			i = (int)(next % depth);
			io_prep_pwrite(&io[i], fd, buf + 4096 * i, 4096,
				       (long long)blk * 4096);
			p = &io[i];
			before = csw();
			if (io_submit(ctx, 1, &p) != 1) {
				perror("io_submit");
				return 1;
			}
			switches += csw() - before;
			next++;
			inflight++;
			continue;
		}
		if (io_getevents(ctx, 1, 1, &ev, NULL) != 1 ||
		    (long)ev.res != 4096) {
			fprintf(stderr, "write failed: %ld\n", (long)ev.res);
			return 1;
		}
		inflight--;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) +
	       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("mode=%s writes=%ld csw_per_write=%.4f iops=%.0f\n", argv[1],
	       writes, (double)switches / (double)writes,
	       (double)writes / secs);
	close(fd);
	io_destroy(ctx);
	return 0;
}
