// SPDX-License-Identifier: MIT
/*
 * callcost FILE BATCHES: what one read() of /dev/zero and one write() of
 * FILE cost, 512 bytes each, in nanoseconds: BATCHES batches of 1000
 * pairs, rewriting the first 512 KiB of FILE (page cache only, nothing
 * allocated), each batch timed.  Prints the fastest batch, the 10th
 * percentile and the median, per pair.  The fastest batches are the ones
 * no other process interrupted: on a busy machine they tell a few
 * nanoseconds apart where a whole program's run time cannot.
 */
#define _GNU_SOURCE
#include "batches.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define PAIRS 1000

int main(int argc, char **argv)
{
	static char buf[512];
	int fd, zero, batches, b, i;
	double *t, start;

	if (argc != 3 || (batches = atoi(argv[2])) < 10)
		return 2;
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	zero = open("/dev/zero", O_RDONLY);
	t = malloc(sizeof(*t) * (size_t)batches);
	if (fd < 0 || zero < 0 || !t)
		return 2;
	for (b = 0; b < batches; b++) {
		if (lseek(fd, 0, SEEK_SET))
			return 1;
		start = now_ns();
		for (i = 0; i < PAIRS; i++)
			if (read(zero, buf, sizeof(buf)) != sizeof(buf) ||
			    write(fd, buf, sizeof(buf)) != sizeof(buf))
				return 1;
		t[b] = (now_ns() - start) / PAIRS;
	}
	batches_report(t, batches);
	return 0;
}
