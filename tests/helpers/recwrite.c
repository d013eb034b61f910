// SPDX-License-Identifier: MIT
/*
 * recwrite FILE OP...: write a file step by step, then wait to be killed
 * (kill -9, or a power cut) — for recovery tests.  The file is created
 * empty, O_RDWR|O_DIRECT; one line per step.
 *
 *   a LEN          append LEN bytes (a multiple of 512) with pwrite at the
 *                  size fstat gives; block-aligned buffer, bytes 'a'..'z'
 *   punch OFF LEN  fallocate(PUNCH_HOLE|KEEP_SIZE)
 *   zero OFF LEN   fallocate(ZERO_RANGE|KEEP_SIZE)
 *   grow LEN       fallocate(0, 0, LEN): the size grows without data
 *   zgrow LEN | kgrow LEN | tgrow LEN   the size grows by LEN past the
 *                  size fstat gives: fallocate(ZERO_RANGE), fallocate
 *                  (KEEP_SIZE: it does not), ftruncate
 *   dgrow LEN      fallocate(0) of LEN past the size through the O_DSYNC
 *                  descriptor: prints "synced SIZE" (the kernel makes
 *                  such a growth durable before it returns)
 *   dsync LEN      append LEN bytes as "a" does, through a second
 *                  descriptor opened O_DSYNC|O_DIRECT (kept for the
 *                  next ones): prints "synced SIZE", the write durable
 *   aio LEN        append LEN bytes as "a" does, through libaio (one
 *                  request, reaped before the next step)
 *   fsync | fdatasync   prints "synced SIZE": the size it acknowledged
 *   sleep SECS
 *   ready PATH     create PATH (the test waits for it)
 *   pause          wait to be killed
 *
 * Exits 0 after the last step (pause never returns), 1 if a step failed.
 */
#include <fcntl.h>
#include <libaio.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXLEN (1 << 20)

static long long num(const char *s)
{
	char *end;
	long long v = strtoll(s, &end, 0);

	if (*end == 'k' || *end == 'K')
		v <<= 10;
	else if (*end == 'm' || *end == 'M')
		v <<= 20;
	return v;
}

int main(int argc, char **argv)
{
	io_context_t ctx = 0;
	struct stat st;
	char *buf;
	int fd, dfd = -1, i, n = 0;

	if (argc < 2 || posix_memalign((void **)&buf, 4096, MAXLEN))
		return 2;
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 2; i < argc; i++) {
		const char *op = argv[i];

		if (!strcmp(op, "a") && i + 1 < argc) {
			long long len = num(argv[++i]);

			if (len <= 0 || len > MAXLEN || fstat(fd, &st))
				return 1;
			memset(buf, 'a' + n++ % 26, (size_t)len);
			if (pwrite(fd, buf, (size_t)len, st.st_size) != len) {
				perror("append");
				return 1;
			}
			printf("a %lld at %lld\n", len, (long long)st.st_size);
		} else if (!strcmp(op, "dsync") && i + 1 < argc) {
			long long len = num(argv[++i]);

			if (dfd < 0)
				dfd = open(argv[1], O_WRONLY | O_DSYNC | O_DIRECT);
			if (dfd < 0 || len <= 0 || len > MAXLEN ||
			    fstat(fd, &st))
				return 1;
			memset(buf, 'a' + n++ % 26, (size_t)len);
			if (pwrite(dfd, buf, (size_t)len, st.st_size) != len) {
				perror("dsync");
				return 1;
			}
			printf("synced %lld\n", (long long)(st.st_size + len));
		} else if (!strcmp(op, "dgrow") && i + 1 < argc) {
			long long len = num(argv[++i]);

			if (dfd < 0)
				dfd = open(argv[1], O_WRONLY | O_DSYNC | O_DIRECT);
			if (dfd < 0 || len <= 0 || fstat(fd, &st))
				return 1;
			if (fallocate(dfd, 0, st.st_size, len)) {
				perror("dgrow");
				return 1;
			}
			printf("synced %lld\n", (long long)(st.st_size + len));
		} else if (!strcmp(op, "aio") && i + 1 < argc) {
			long long len = num(argv[++i]);
			struct iocb cb, *cbs[1] = { &cb };
			struct io_event ev;

			if (!ctx && io_setup(4, &ctx))
				return 1;
			if (len <= 0 || len > MAXLEN || fstat(fd, &st))
				return 1;
			memset(buf, 'a' + n++ % 26, (size_t)len);
			io_prep_pwrite(&cb, fd, buf, (size_t)len, st.st_size);
			if (io_submit(ctx, 1, cbs) != 1 ||
			    io_getevents(ctx, 1, 1, &ev, NULL) != 1 ||
			    (long long)ev.res != len) {
				fprintf(stderr, "aio: failed\n");
				return 1;
			}
			printf("aio %lld at %lld\n", len, (long long)st.st_size);
		} else if ((!strcmp(op, "punch") || !strcmp(op, "zero")) &&
			   i + 2 < argc) {
			int mode = FALLOC_FL_KEEP_SIZE |
				   (op[0] == 'p' ? FALLOC_FL_PUNCH_HOLE
						 : FALLOC_FL_ZERO_RANGE);
			long long off = num(argv[i + 1]);
			long long len = num(argv[i + 2]);

			i += 2;
			if (fallocate(fd, mode, off, len)) {
				perror(op);
				return 1;
			}
			printf("%s %lld %lld\n", op, off, len);
		} else if (!strcmp(op, "grow") && i + 1 < argc) {
			long long len = num(argv[++i]);

			if (fallocate(fd, 0, 0, len)) {
				perror("grow");
				return 1;
			}
			printf("grow %lld\n", len);
		} else if ((!strcmp(op, "zgrow") || !strcmp(op, "kgrow") ||
			    !strcmp(op, "tgrow")) && i + 1 < argc) {
			long long len = num(argv[++i]);
			int r;

			if (fstat(fd, &st))
				return 1;
			if (op[0] == 't')
				r = ftruncate(fd, st.st_size + len);
			else
				r = fallocate(fd, op[0] == 'z' ? FALLOC_FL_ZERO_RANGE
							      : FALLOC_FL_KEEP_SIZE,
					      st.st_size, len);
			if (r) {
				perror(op);
				return 1;
			}
			printf("%s %lld at %lld\n", op, len, (long long)st.st_size);
		} else if (!strcmp(op, "fsync") || !strcmp(op, "fdatasync")) {
			if ((op[1] == 's' ? fsync(fd) : fdatasync(fd)) ||
			    fstat(fd, &st)) {
				perror(op);
				return 1;
			}
			printf("synced %lld\n", (long long)st.st_size);
		} else if (!strcmp(op, "sleep") && i + 1 < argc) {
			sleep((unsigned)atoi(argv[++i]));
		} else if (!strcmp(op, "ready") && i + 1 < argc) {
			int r = open(argv[++i], O_WRONLY | O_CREAT, 0644);

			if (r < 0)
				return 1;
			close(r);
		} else if (!strcmp(op, "pause")) {
			for (;;)
				pause();
		} else {
			fprintf(stderr, "recwrite: bad op %s\n", op);
			return 2;
		}
	}
	return close(fd) ? 1 : 0;
}
