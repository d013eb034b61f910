// SPDX-License-Identifier: MIT
/*
 * ringgone FILE: a struct io_uring the program frees without
 * io_uring_queue_exit, as a thread whose ring lived on its stack leaves
 * it, while the file goes on being used.
 *
 * The struct lives in a page of its own.  A 1 MiB write extending FILE
 * is queued through it, its completion taken with liburing's inline peek
 * (no call a preloaded library sees), and the page is unmapped: the ring
 * is not exited.  Then fstat, a pwrite at the end, and a second ring made
 * in a page at the very same address, through which another extending
 * write is queued and peeked, then fstat, and that ring exited.  Then
 * close, and a stat of the path.  Prints one line per step, the same
 * under the kernel alone as under a shim that keeps up.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEN (1 << 20)
#define BS 4096

static struct io_uring *ring_page(void *at)
{
	void *p = mmap(at, BS, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS |
			       (at ? MAP_FIXED_NOREPLACE : 0),
		       -1, 0);

	if (p == MAP_FAILED || (at && p != at)) {
		printf("mmap: %s\n", strerror(errno));
		exit(2);
	}
	return p;
}

/* One extending write at off through ring, its completion peeked. */
static void queue_one(struct io_uring *ring, int fd, char *buf, off_t off)
{
	struct io_uring_cqe *c = NULL;
	int i;

	io_uring_prep_write(io_uring_get_sqe(ring), fd, buf, LEN, off);
	printf("submit %d\n", io_uring_submit(ring));
	for (i = 0; i < 5000 && io_uring_peek_cqe(ring, &c); i++)
		usleep(1000);
	printf("res %d\n", c ? c->res : -1);
	if (c)
		io_uring_cqe_seen(ring, c);
}

static void size_now(int fd, const char *when)
{
	struct stat st;

	if (fstat(fd, &st))
		printf("%s fstat: %s\n", when, strerror(errno));
	else
		printf("%s size %lld\n", when, (long long)st.st_size);
}

int main(int argc, char **argv)
{
	struct io_uring *ring;
	struct stat st;
	char *buf;
	void *at;
	int fd;

	if (argc != 2)
		return 2;
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0 || posix_memalign((void **)&buf, BS, LEN))
		return 2;
	memset(buf, 'x', LEN);
	if (write(fd, buf, BS) != BS)
		return 2;
	ring = ring_page(NULL);
	at = ring;
	if (io_uring_queue_init(8, ring, 0)) {
		printf("skip: io_uring_queue_init failed\n");
		return 3;
	}
	queue_one(ring, fd, buf, BS);
	munmap(ring, BS); /* the struct gone, the ring not exited */
	size_now(fd, "freed");
	printf("pwrite %zd\n", pwrite(fd, buf, BS, BS + LEN));
	size_now(fd, "written");
	ring = ring_page(at); /* another ring where the first one was */
	if (io_uring_queue_init(8, ring, 0))
		return 2;
	queue_one(ring, fd, buf, 2 * BS + LEN);
	size_now(fd, "second");
	io_uring_queue_exit(ring);
	close(fd);
	if (stat(argv[1], &st))
		return 2;
	printf("closed size %lld\n", (long long)st.st_size);
	return 0;
}
