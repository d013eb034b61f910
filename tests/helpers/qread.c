// SPDX-License-Identifier: MIT
/*
 * qread FILE: queued reads at and across the end of a file an O_DIRECT
 * writer holds open (under the shim, a reserved tail stands past its 64
 * KiB of data).  io_uring READ, READ_FIXED and READV and libaio PREAD
 * and PREADV through the writer's descriptor, io_uring READ and READV
 * and libaio PREAD and PREADV through a buffered one; prints what each
 * returned.
 * The kernel alone: 0 at the end, 4096 across it (3996 from 61540).
 */
#include <fcntl.h>
#include <libaio.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct io_uring ring;
static io_context_t ctx;

static long aio_one(int fd, void *buf, size_t len, long long off)
{
	struct iocb io, *p = &io;
	struct io_event ev;
	static struct iovec v[2];

	/* len | 1: as PREADV, in two halves */
	if (len & 1) {
		len &= ~(size_t)1;
		v[0] = (struct iovec){ buf, len / 2 };
		v[1] = (struct iovec){ (char *)buf + len / 2, len - len / 2 };
		io_prep_preadv(&io, fd, v, 2, off);
	} else {
		io_prep_pread(&io, fd, buf, len, off);
	}
	if (io_submit(ctx, 1, &p) != 1 || io_getevents(ctx, 1, 1, &ev, NULL) != 1)
		exit(2);
	return (long)ev.res;
}

static int one(int op, int fd, void *buf, unsigned len, long long off)
{
	struct io_uring_sqe *s = io_uring_get_sqe(&ring);
	struct io_uring_cqe *c;
	int res;

	static struct iovec v[2];

	if (op == IORING_OP_READ_FIXED) {
		io_uring_prep_read_fixed(s, fd, buf, len, (__u64)off, 0);
	} else if (op == IORING_OP_READV) {
		v[0] = (struct iovec){ buf, len / 2 };
		v[1] = (struct iovec){ (char *)buf + len / 2, len - len / 2 };
		io_uring_prep_readv(s, fd, v, 2, (__u64)off);
	} else {
		io_uring_prep_read(s, fd, buf, len, (__u64)off);
	}
	if (io_uring_submit(&ring) != 1 || io_uring_wait_cqe(&ring, &c))
		exit(2);
	res = c->res;
	io_uring_cqe_seen(&ring, c);
	return res;
}

int main(int argc, char **argv)
{
	struct iovec v;
	char *b;
	int fd, bfd;

	if (argc != 2 || posix_memalign((void **)&b, 4096, 65536) ||
	    io_uring_queue_init(8, &ring, 0) || io_setup(8, &ctx))
		return 2;
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0)
		return 2;
	memset(b, 'q', 65536);
	if (pwrite(fd, b, 65536, 0) != 65536)
		return 2;
	v.iov_base = b;
	v.iov_len = 65536;
	if (io_uring_register_buffers(&ring, &v, 1))
		return 2;
	printf("read_at_end %d\n", one(IORING_OP_READ, fd, b, 8192, 65536));
	printf("read_across_end %d\n",
	       one(IORING_OP_READ, fd, b, 8192, 61440));
	printf("read_fixed_at_end %d\n",
	       one(IORING_OP_READ_FIXED, fd, b, 8192, 65536));
	printf("read_fixed_across_end %d\n",
	       one(IORING_OP_READ_FIXED, fd, b, 8192, 61440));
	printf("readv_across_end %d\n",
	       one(IORING_OP_READV, fd, b, 8192, 61440));
	printf("aio_pread_at_end %ld\n", aio_one(fd, b, 8192, 65536));
	printf("aio_pread_across_end %ld\n", aio_one(fd, b, 8192, 61440));
	printf("aio_preadv_across_end %ld\n", aio_one(fd, b, 8193, 61440));
	bfd = open(argv[1], O_RDONLY);
	if (bfd < 0)
		return 2;
	printf("buffered_read_across_end %d\n",
	       one(IORING_OP_READ, bfd, b, 8192, 61540));
	printf("buffered_read_past_end %d\n",
	       one(IORING_OP_READ, bfd, b, 8192, 70000));
	printf("buffered_aio_pread_across_end %ld\n",
	       aio_one(bfd, b, 8192, 61540));
	printf("buffered_readv_across_end %d\n",
	       one(IORING_OP_READV, bfd, b, 8192, 61540));
	printf("buffered_aio_preadv_across_end %ld\n",
	       aio_one(bfd, b, 8193, 61540));
	/* A priority on a READV read at submission: its result, not
	 * EINVAL (a NOP takes no priority). */
	{
		struct io_uring_sqe *s = io_uring_get_sqe(&ring);
		struct io_uring_cqe *c;
		static struct iovec pv[2];

		pv[0] = (struct iovec){ b, 4096 };
		pv[1] = (struct iovec){ b + 4096, 4096 };
		io_uring_prep_readv(s, bfd, pv, 2, 61540);
		s->ioprio = (2 << 13) | 4; /* best effort, level 4 */
		if (io_uring_submit(&ring) != 1 || io_uring_wait_cqe(&ring, &c))
			return 2;
		printf("readv_ioprio_across_end %d\n", c->res);
		io_uring_cqe_seen(&ring, c);
	}
	/* An iocb whose read across the end was never reaped through
	 * io_getevents (its context destroyed), reused at once for a whole
	 * read of another file: that read's count is its own. */
	{
		static struct iovec pv[2];
		struct iocb io, *p = &io;
		struct io_event ev;
		io_context_t c2 = 0;
		char path[4096];
		int other;

		/* on tmpfs, which the shim does not serve: its submit takes
		 * the path that keeps no books */
		snprintf(path, sizeof(path), "/dev/shm/qread.%d", (int)getpid());
		other = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (other < 0 || pwrite(other, b, 8192, 0) != 8192 ||
		    io_setup(4, &c2))
			return 2;
		pv[0] = (struct iovec){ b, 4096 };
		pv[1] = (struct iovec){ b + 4096, 4096 };
		io_prep_preadv(&io, bfd, pv, 2, 61540);
		if (io_submit(ctx, 1, &p) != 1)
			return 2;
		io_destroy(ctx); /* waits for it; nobody reaps it */
		ctx = 0;
		if (io_setup(8, &ctx))
			return 2;
		io_prep_pread(&io, other, b, 8192, 0);
		if (io_submit(c2, 1, &p) != 1 ||
		    io_getevents(c2, 1, 1, &ev, NULL) != 1)
			return 2;
		printf("reused_iocb_other_file %ld\n", (long)ev.res);
		io_destroy(c2);
		close(other);
		unlink(path);
	}
	/* Still the writer's: one more block, then a read of it. */
	if (pwrite(fd, b, 4096, 65536) != 4096)
		return 2;
	printf("read_after_append %d\n",
	       one(IORING_OP_READ, fd, b, 8192, 65536));
	close(bfd);
	close(fd);
	io_uring_queue_exit(&ring);
	io_destroy(ctx);
	return 0;
}
