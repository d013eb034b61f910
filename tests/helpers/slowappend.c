// SPDX-License-Identifier: MIT
/*
 * slowappend FILE: a slow append and a quick one behind it.  A 1 MiB
 * O_APPEND|O_DIRECT append to a new FILE whose buffer the kernel can read
 * only after 3 s (its pages are missing under userfaultfd, supplied after
 * 3 s, past the shim's 2 s look for a dead writer: the write is in flight
 * all that time, as on a throttled device);
 * 200 ms after it starts, a 4 KiB append through another descriptor.  A
 * thread fstat()s FILE meanwhile.  Prints
 *
 *   first_off=O1 second_off=O2 first=T1 second=T2 covered=C size=S
 *
 * T: seconds after the start at which each append returned; O: where each
 * landed; C: sizes seen, while the first was in flight, that covered its
 * range without its data there (the block read back is not the first's).
 * The kernel alone (ext4) makes the second wait for the first.  Prints
 * "skip: ..." and exits 3 when userfaultfd is not available.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define BIG (1 << 20)
#define BS 4096

static const char *path;
static char *big, *src;
static int uffd;
static atomic_int first_done, covered;
static struct timespec t0;

static double since(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0.tv_sec) +
	       (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
}

/* The first fault on the big buffer: 3 s, then all of it at once. */
static void *pager(void *arg)
{
	struct pollfd p = { .fd = uffd, .events = POLLIN };
	struct uffd_msg msg;
	struct uffdio_copy copy = { .dst = (uintptr_t)big,
				    .src = (uintptr_t)src,
				    .len = BIG };

	(void)arg;
	if (poll(&p, 1, -1) != 1 || read(uffd, &msg, sizeof(msg)) <= 0)
		return NULL;
	usleep(3000000);
	ioctl(uffd, UFFDIO_COPY, &copy);
	return NULL;
}

/* A size that covers the first append's range before its data is there
 * (the block reads as anything but the first's). */
static void *watcher(void *arg)
{
	int fd = open(path, O_RDONLY | O_DIRECT);
	struct stat st;
	char *b;

	(void)arg;
	if (fd < 0 || posix_memalign((void **)&b, BS, BS))
		return NULL;
	while (!atomic_load(&first_done)) {
		if (fstat(fd, &st) == 0 && st.st_size > 0 &&
		    (pread(fd, b, BS, 0) != BS || b[0] != 'S'))
			atomic_fetch_add(&covered, 1);
		usleep(1000);
	}
	close(fd);
	return NULL;
}

static void *first(void *arg)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_DIRECT);
	ssize_t w = write(fd, big, BIG);

	atomic_store(&first_done, 1);
	*(double *)arg = since();
	if (w != BIG)
		perror("first append");
	printf("first_off=%lld ", (long long)lseek(fd, 0, SEEK_CUR) - BIG);
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	pthread_t pt, ft, wt;
	double t_first = 0, t_second;
	struct stat st;
	char *small;
	int fd;

	if (argc != 2)
		return 2;
	path = argv[1];
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	big = mmap(NULL, BIG, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	reg.range.start = (uintptr_t)big;
	reg.range.len = BIG;
	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) ||
	    ioctl(uffd, UFFDIO_REGISTER, &reg)) {
		printf("skip: userfaultfd: %s\n", strerror(errno));
		return 3;
	}
	if (posix_memalign((void **)&src, BS, BIG) ||
	    posix_memalign((void **)&small, BS, BS))
		return 2;
	memset(src, 'S', BIG);
	memset(small, 'q', BS);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_DIRECT,
		  0644);
	if (fd < 0) {
		perror(path);
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pthread_create(&pt, NULL, pager, NULL);
	pthread_create(&wt, NULL, watcher, NULL);
	pthread_create(&ft, NULL, first, &t_first);
	usleep(200000);
	if (write(fd, small, BS) != BS)
		perror("second append");
	t_second = since();
	pthread_join(ft, NULL);
	printf("second_off=%lld ", (long long)lseek(fd, 0, SEEK_CUR) - BS);
	pthread_join(wt, NULL);
	pthread_join(pt, NULL);
	fstat(fd, &st);
	printf("first=%.2f second=%.2f covered=%d size=%lld\n", t_first,
	       t_second, atomic_load(&covered), (long long)st.st_size);
	return 0;
}
