// SPDX-License-Identifier: MIT
/*
 * slowguest FILE LOG READY GO: a lone writer whose append stays in the
 * kernel.  It opens FILE (O_WRONLY|O_CREAT|O_APPEND|O_DIRECT), appends
 * record 0 of writer 9 (t_rec.h), then record 1 from a buffer whose page
 * is missing under userfaultfd: the kernel has picked the append's offset
 * and waits for the page.  READY is created once it waits; the page is
 * given when GO exists (or after 10 s), as on a throttled device.  LOG
 * gets t_verify's lines for both records.  Prints "off0=O off1=O".
 * Prints "skip: ..." and exits 3 when userfaultfd is not available.
 */
#include "t_rec.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define BS 4096
#define WRITER 9

static const char *ready, *go;
static char *page, *src;
static int uffd;

/* The first fault: READY, then GO (at most 10 s), then the page. */
static void *pager(void *arg)
{
	struct pollfd p = { .fd = uffd, .events = POLLIN };
	struct uffdio_copy copy = { .dst = (uintptr_t)page,
				    .src = (uintptr_t)src,
				    .len = BS };
	struct uffd_msg msg;
	int i;

	(void)arg;
	if (poll(&p, 1, -1) != 1 || read(uffd, &msg, sizeof(msg)) <= 0)
		return NULL;
	touch(ready);
	for (i = 0; i < 10000 && !path_exists(go); i++)
		nap_ms(1);
	ioctl(uffd, UFFDIO_COPY, &copy);
	return NULL;
}

int main(int argc, char **argv)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	off_t off[2];
	pthread_t pt;
	char *first;
	FILE *log;
	int fd, i;

	if (argc != 5)
		return 2;
	ready = argv[3];
	go = argv[4];
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	page = mmap(NULL, BS, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	reg.range.start = (uintptr_t)page;
	reg.range.len = BS;
	if (uffd < 0 || page == MAP_FAILED ||
	    ioctl(uffd, UFFDIO_API, &api) || ioctl(uffd, UFFDIO_REGISTER, &reg)) {
		printf("skip: userfaultfd: %s\n", strerror(errno));
		return 3;
	}
	if (posix_memalign((void **)&src, BS, BS) ||
	    posix_memalign((void **)&first, BS, BS))
		return 2;
	rec_stamp(first, BS, WRITER, 0);
	rec_stamp(src, BS, WRITER, 1);
	fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND | O_DIRECT, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 2;
	}
	if (write(fd, first, BS) != BS) {
		perror("append 0");
		return 1;
	}
	off[0] = lseek(fd, 0, SEEK_CUR) - BS;
	pthread_create(&pt, NULL, pager, NULL);
	if (write(fd, page, BS) != BS) {
		perror("append 1");
		return 1;
	}
	off[1] = lseek(fd, 0, SEEK_CUR) - BS;
	pthread_join(pt, NULL);
	log = fopen(argv[2], "w");
	if (!log)
		return 2;
	for (i = 0; i < 2; i++)
		fprintf(log, "R %d %d %lld 0 0\n", WRITER, i, (long long)off[i]);
	fclose(log);
	printf("off0=%lld off1=%lld\n", (long long)off[0], (long long)off[1]);
	close(fd);
	return 0;
}
