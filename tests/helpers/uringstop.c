// SPDX-License-Identifier: MIT
/*
 * uringstop FILE: an io_uring (no IORING_SETUP_SUBMIT_ALL) queues three
 * 4 KiB appends to FILE (O_APPEND|O_DIRECT, made new), A, C and D, with
 * an entry the kernel refuses at submission (an unknown opcode) second:
 * it takes A and the refused one and leaves C and D queued.  Then the
 * program appends W with write(2), and only then submits again.  Prints
 * the two submits' counts, the write's result and time, the completions
 * and the file's blocks in order (a letter each, '0' for zeros), and its
 * size; the kernel alone gives "submit=2 write=4096 (0.0 s) submit=2",
 * blocks AWCD, size 16384.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BS 4096

int main(int argc, char **argv)
{
	struct io_uring ring;
	struct io_uring_cqe *cqe;
	struct timespec t0, t1;
	struct stat st;
	char *buf[5], *rd;
	int fd, i, s1, s2, res[5] = { 0 }, n = 0;
	ssize_t w;
	off_t o;

	if (argc != 2 || io_uring_queue_init(8, &ring, 0))
		return 2;
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_DIRECT,
		  0644);
	if (fd < 0)
		return 2;
	if (posix_memalign((void **)&rd, BS, BS))
		return 2;
	for (i = 0; i < 5; i++) {
		if (posix_memalign((void **)&buf[i], BS, BS))
			return 2;
		memset(buf[i], "ABCDW"[i], BS);
	}
	for (i = 0; i < 4; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);

		if (i == 1) {
			io_uring_prep_nop(sqe);
			sqe->opcode = 250; /* refused: EINVAL */
		} else {
			io_uring_prep_write(sqe, fd, buf[i], BS, 0);
		}
		sqe->user_data = (__u64)i;
	}
	s1 = io_uring_submit(&ring);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	w = write(fd, buf[4], BS);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s2 = io_uring_submit(&ring);
	while (n < 4 && !io_uring_wait_cqe(&ring, &cqe)) {
		if (cqe->user_data < 4)
			res[cqe->user_data] = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
		n++;
	}
	printf("submit=%d write=%zd (%.1f s) submit=%d res=%d,%d,%d,%d ", s1,
	       w,
	       (double)(t1.tv_sec - t0.tv_sec) +
		       (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       s2, res[0], res[1], res[2], res[3]);
	if (fstat(fd, &st))
		return 2;
	printf("blocks=");
	for (o = 0; o < st.st_size; o += BS) {
		if (pread(fd, rd, BS, o) != BS)
			return 2;
		putchar(rd[0] ? rd[0] : '0');
	}
	printf(" size=%lld\n", (long long)st.st_size);
	io_uring_queue_exit(&ring);
	return close(fd) ? 1 : 0;
}
