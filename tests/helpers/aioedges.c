// SPDX-License-Identifier: MIT
/*
 * aioedges CASE FILE: libaio O_APPEND|O_DIRECT appends to a new FILE at
 * the edges of the shim's rewrite of an iocb; prints what the program
 * sees (results, the size, the file's blocks as letters), to be compared
 * with the kernel alone.
 *
 *   off     an append's iocb, reaped, submitted again with a new buffer
 *           and an offset of 0 (which O_APPEND ignores)
 *   setfl   the same after F_SETFL took O_APPEND away: a write at the
 *           iocb's own offset
 *   nowait  the same iocb again with RWF_NOWAIT added
 *   batch   one io_submit of three appends, the middle one with a flag
 *           the kernel does not know (refused at submission)
 *   epoch   an append queued and not reaped while a refused append goes
 *           (alone); then the reap, and one more write(): no wait
 */
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define BS 4096

static char *blk[5];

static void show(int fd)
{
	static char tmp[BS] __attribute__((aligned(BS)));
	struct stat st;
	off_t o;

	fstat(fd, &st);
	printf(" size=%lld [", (long long)st.st_size);
	for (o = 0; o < st.st_size; o += BS) {
		if (pread(fd, tmp, BS, o) != BS)
			tmp[0] = '?';
		putchar(tmp[0] ? tmp[0] : '0');
	}
	printf("]\n");
}

static long one(io_context_t ctx, struct iocb *cb)
{
	struct io_event ev;
	int r = io_submit(ctx, 1, &cb);

	if (r != 1)
		return r;
	if (io_getevents(ctx, 1, 1, &ev, NULL) != 1)
		return -1000;
	return (long)ev.res;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	io_context_t ctx = 0;
	struct iocb cb[3], *p[3];
	const char *c;
	int fd, i;

	if (argc != 3)
		return 2;
	c = argv[1];
	fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_DIRECT,
		  0644);
	if (fd < 0 || io_setup(16, &ctx))
		return 2;
	for (i = 0; i < 5; i++) {
		if (posix_memalign((void **)&blk[i], BS, BS))
			return 2;
		memset(blk[i], 'A' + i, BS);
	}
	if (!strcmp(c, "off") || !strcmp(c, "setfl") || !strcmp(c, "nowait")) {
		if (write(fd, blk[0], BS) != BS || write(fd, blk[1], BS) != BS)
			return 2;
		io_prep_pwrite(&cb[0], fd, blk[2], BS, 0);
		printf("C=%ld", one(ctx, &cb[0]));
		cb[0].u.c.buf = blk[3];
		if (!strcmp(c, "off"))
			cb[0].u.c.offset = 0;
		else if (!strcmp(c, "setfl"))
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_APPEND);
		else
			cb[0].aio_rw_flags |= RWF_NOWAIT;
		printf(" D=%ld", one(ctx, &cb[0]));
	} else if (!strcmp(c, "batch")) {
		for (i = 0; i < 3; i++) {
			io_prep_pwrite(&cb[i], fd, blk[i], BS, 0);
			p[i] = &cb[i];
		}
		cb[1].aio_rw_flags = 0x40000000;
		i = io_submit(ctx, 3, p);
		printf("submitted=%d", i);
		if (i > 0) {
			struct io_event ev[3];
			int got = io_getevents(ctx, i, i, ev, NULL), k;

			for (k = 0; k < got; k++)
				printf(" res=%ld", (long)ev[k].res);
		}
		if (write(fd, blk[4], BS) != BS)
			printf(" next append failed");
	} else if (!strcmp(c, "epoch")) {
		struct iovec v = { blk[1], BS };
		struct io_event ev;
		double t0;
		ssize_t r;

		io_prep_pwrite(&cb[0], fd, blk[0], BS, 0);
		p[0] = &cb[0];
		if (io_submit(ctx, 1, p) != 1)
			return 2;
		t0 = now();
		r = pwritev2(fd, &v, 1, -1, 0x40000000);
		printf("refused=%zd/%s", r, r < 0 ? strerror(errno) : "-");
		if (io_getevents(ctx, 1, 1, &ev, NULL) == 1)
			printf(" A=%ld", (long)ev.res);
		r = write(fd, blk[2], BS);
		printf(" C=%zd %s", r, now() - t0 < 5 ? "at once" : "late");
	} else {
		return 2;
	}
	show(fd);
	io_destroy(ctx);
	return close(fd) ? 1 : 0;
}
