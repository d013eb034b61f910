// SPDX-License-Identifier: MIT
/*
 * readback FILE CHILDREN ROUNDS [BS]: the pattern of fstests' generic/418
 * (dio-invalidate-cache -w): each round, FILE is made empty, then
 * CHILDREN processes each open it for reading (buffered) and for writing
 * (O_DIRECT), in that order, write BS bytes (512) at their own offset
 * (child i at i * BS, past the end the others grow), and read them back
 * through the reading descriptor at once.  A read must return the whole
 * of the process's own write, acknowledged just before: the kernel
 * alone's answer.  Prints "rounds=R short=S wrong=W"; exits 1 if S or W.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* One child: 0 the read came back whole and right, 1 short, 2 wrong. */
static int child(const char *path, int i, size_t bs, int round)
{
	char *w, *r;
	int rfd, wfd;
	ssize_t n;

	if (posix_memalign((void **)&w, 4096, bs) ||
	    posix_memalign((void **)&r, 4096, bs))
		return 3;
	memset(w, 'A' + (i + round) % 26, bs);
	memset(r, 0, bs);
	rfd = open(path, O_RDONLY);
	wfd = open(path, O_WRONLY | O_DIRECT);
	if (rfd < 0 || wfd < 0)
		return 3;
	if (pwrite(wfd, w, bs, (off_t)(i * bs)) != (ssize_t)bs)
		return 3;
	n = pread(rfd, r, bs, (off_t)(i * bs));
	if (n != (ssize_t)bs) {
		fprintf(stderr, "round %d child %d: read %zd of %zu\n", round,
			i, n, bs);
		return 1;
	}
	return memcmp(w, r, bs) ? 2 : 0;
}

int main(int argc, char **argv)
{
	int children, rounds, round, i, st, fd, bad_short = 0, wrong = 0;
	size_t bs;

	if (argc < 4)
		return 2;
	children = atoi(argv[2]);
	rounds = atoi(argv[3]);
	bs = argc > 4 ? (size_t)atol(argv[4]) : 512;
	for (round = 0; round < rounds; round++) {
		fd = open(argv[1], O_CREAT | O_TRUNC | O_RDWR, 0600);
		if (fd < 0 || fsync(fd) || close(fd))
			return 2;
		for (i = 0; i < children; i++) {
			pid_t p = fork();

			if (p < 0)
				return 2;
			if (!p)
				_exit(child(argv[1], i, bs, round));
		}
		for (i = 0; i < children; i++) {
			if (wait(&st) < 0 || !WIFEXITED(st))
				return 2;
			if (WEXITSTATUS(st) == 3)
				return 2;
			bad_short += WEXITSTATUS(st) == 1;
			wrong += WEXITSTATUS(st) == 2;
		}
	}
	printf("rounds=%d short=%d wrong=%d\n", rounds, bad_short, wrong);
	return bad_short || wrong;
}
