// SPDX-License-Identifier: MIT
/*
 * uring_skip FILE: io_uring writes with IOSQE_CQE_SKIP_SUCCESS to a new
 * O_DIRECT file, each heading a chain that ends in a NOP, whose completion
 * says the write is done (or failed: the NOP is then cancelled):
 *
 *   1. 4 KiB at 0, a good buffer (no completion is posted)
 *   2. 4 KiB at 4096 from a misaligned buffer (refused: a completion)
 *   3. 4 KiB at 8192, a good buffer, then a NOP of its own in the chain
 *   4. a vector of two 2 KiB halves at 12288 (good)
 *   5. 4 KiB at 20480 from an address that is not mapped (EFAULT)
 *
 * After each step it prints every completion it reaped and the size
 * fstat gives, then the file's blocks as the letters they hold.  Run
 * with and without the shim: the outputs must be the same.
 */
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define BS 4096

static struct io_uring ring;

/* The entry just queued links to a NOP (user_data 100 + step): submit,
 * reap until the NOP completes after the write, or the write fails (a
 * failed head that skips its success takes its chain's completions with
 * it: the NOP may never say anything). */
static void settle(int fd, int step, const char *what)
{
	struct io_uring_sqe *s = io_uring_get_sqe(&ring);
	struct io_uring_cqe *c;
	struct stat st;
	int done = 0;

	io_uring_prep_nop(s);
	s->user_data = 100 + (unsigned)step;
	io_uring_submit(&ring);
	while (!done && io_uring_wait_cqe(&ring, &c) == 0) {
		if (c->user_data == 100 + (unsigned)step ||
		    (c->user_data == (unsigned)step && c->res < 0))
			done = 1;
		if (c->user_data != 100 + (unsigned)step || c->res)
			printf("%d %s: cqe ud=%llu res=%d\n", step, what,
			       (unsigned long long)c->user_data, c->res);
		io_uring_cqe_seen(&ring, c);
	}
	fstat(fd, &st);
	printf("%d %s: size=%lld\n", step, what, (long long)st.st_size);
}

static struct io_uring_sqe *write_sqe(int fd, const void *buf, unsigned len,
				      off_t off, unsigned long long ud)
{
	struct io_uring_sqe *s = io_uring_get_sqe(&ring);

	io_uring_prep_write(s, fd, buf, len, (__u64)off);
	s->flags |= IOSQE_CQE_SKIP_SUCCESS | IOSQE_IO_LINK;
	s->user_data = ud;
	return s;
}

int main(int argc, char **argv)
{
	char *buf, *raw, *back;
	struct io_uring_sqe *s;
	struct iovec v[2];
	void *hole;
	int fd, i;

	if (argc != 2 || posix_memalign((void **)&buf, BS, BS) ||
	    posix_memalign((void **)&raw, BS, 2 * BS) ||
	    posix_memalign((void **)&back, BS, 6 * BS) ||
	    io_uring_queue_init(16, &ring, 0))
		return 2;
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 2;
	}
	hole = mmap(NULL, BS, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(hole, BS);

	memset(buf, 'a', BS);
	write_sqe(fd, buf, BS, 0, 1);
	settle(fd, 1, "good");

	memset(raw, 'b', 2 * BS);
	write_sqe(fd, raw + 1, BS, BS, 2);
	settle(fd, 2, "misaligned");

	memset(buf, 'c', BS);
	write_sqe(fd, buf, BS, 2 * BS, 3);
	s = io_uring_get_sqe(&ring);
	io_uring_prep_nop(s);
	s->flags |= IOSQE_IO_LINK;
	s->user_data = 33;
	settle(fd, 3, "linked");

	memset(raw, 'd', 2 * BS);
	v[0] = (struct iovec){ raw, BS / 2 };
	v[1] = (struct iovec){ raw + BS, BS / 2 };
	s = io_uring_get_sqe(&ring);
	io_uring_prep_writev(s, fd, v, 2, 3 * BS);
	s->flags |= IOSQE_CQE_SKIP_SUCCESS | IOSQE_IO_LINK;
	s->user_data = 4;
	settle(fd, 4, "vector");

	write_sqe(fd, hole, BS, 5 * BS, 5);
	settle(fd, 5, "unmapped");

	if (pread(fd, back, 6 * BS, 0) < 0)
		perror("pread");
	printf("blocks:");
	for (i = 0; i < 6; i++)
		printf(" %c", back[i * BS] ? back[i * BS] : '0');
	printf("\n");
	io_uring_queue_exit(&ring);
	return close(fd) ? 1 : 0;
}
