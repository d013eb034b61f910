// SPDX-License-Identifier: MIT
/*
 * filesbench: many files, each written by one writer with O_DIRECT — the
 * way most files of a database or a log are written (issue 12).  Run it
 * under the shim and outside it; the script compares.
 *
 *   filesbench life DIR N SIZE BS
 *       N files one after another: open (O_CREAT|O_TRUNC|O_DIRECT), SIZE
 *       bytes in BS pwrites, fsync, close.  Prints ms_per_file= and
 *       cpu_us_per_file= (user+sys).
 *   filesbench open DIR N SIZE BS
 *       N files open at once (O_APPEND|O_DIRECT), SIZE bytes appended to
 *       each in BS writes, round-robin over the files; then every size
 *       checked with fstat, "ready" printed and a line read from standard
 *       input before all are closed (the script looks at the disk and the
 *       shared memory meanwhile).  Prints files= written= enospc_at= (the
 *       first file whose write failed, -1: none) bad_sizes=.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static void *block(size_t bs)
{
	void *buf;

	if (posix_memalign(&buf, 4096, bs)) {
		perror("posix_memalign");
		exit(1);
	}
	memset(buf, 0x5a, bs);
	return buf;
}

static int life(const char *dir, long n, long size, long bs)
{
	char path[4096];
	void *buf = block((size_t)bs);
	double t0 = now_s(), c0 = cpu_us();
	long i, off;
	int fd;

	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/f%ld", dir, i);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
		if (fd < 0) {
			perror(path);
			return 1;
		}
		for (off = 0; off < size; off += bs)
			if (pwrite(fd, buf, (size_t)bs, off) != bs) {
				perror("pwrite");
				return 1;
			}
		if (fsync(fd) || close(fd)) {
			perror("fsync/close");
			return 1;
		}
	}
	printf("ms_per_file=%.3f cpu_us_per_file=%.1f\n",
	       (now_s() - t0) * 1e3 / (double)n, (cpu_us() - c0) / (double)n);
	return 0;
}

static int many(const char *dir, long n, long size, long bs)
{
	char path[4096], line[16];
	void *buf = block((size_t)bs);
	long i, off, written = 0, enospc_at = -1, bad = 0;
	int *fds = calloc((size_t)n, sizeof(*fds));
	struct stat st;

	if (!fds)
		return 1;
	for (i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/f%ld", dir, i);
		fds[i] = open(path,
			      O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_DIRECT,
			      0644);
		if (fds[i] < 0) {
			perror(path);
			return 1;
		}
	}
	for (off = 0; off < size; off += bs)
		for (i = 0; i < n; i++) {
			if (write(fds[i], buf, (size_t)bs) == bs) {
				written += bs;
			} else if (enospc_at < 0) {
				fprintf(stderr, "file %ld at %ld: %s\n", i, off,
					strerror(errno));
				enospc_at = i;
			}
		}
	for (i = 0; i < n; i++)
		if (fstat(fds[i], &st) || st.st_size != size)
			bad++;
	printf("ready\n");
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		line[0] = 0;
	for (i = 0; i < n; i++)
		close(fds[i]);
	printf("files=%ld written=%ld enospc_at=%ld bad_sizes=%ld\n", n,
	       written, enospc_at, bad);
	return enospc_at >= 0 || bad;
}

int main(int argc, char **argv)
{
	if (argc == 6 && !strcmp(argv[1], "life"))
		return life(argv[2], atol(argv[3]), atol(argv[4]),
			    atol(argv[5]));
	if (argc == 6 && !strcmp(argv[1], "open"))
		return many(argv[2], atol(argv[3]), atol(argv[4]),
			    atol(argv[5]));
	fprintf(stderr, "usage: filesbench life|open DIR N SIZE BS\n");
	return 2;
}
