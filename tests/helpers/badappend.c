// SPDX-License-Identifier: MIT
/*
 * badappend N LOG FILE [write|aio|uring|signal|unmapped]: one thread
 * appends N good 4 KiB records to FILE (O_APPEND|O_DIRECT, a descriptor
 * of its own) while another appends through a misaligned buffer, which
 * the kernel refuses (EINVAL), until the first is done: by write(2) (the
 * default), through an aligned buffer that is not mapped (unmapped: the
 * kernel refuses it with EFAULT, which the shim cannot foresee),
 * queued through libaio or io_uring (refused at submission or at
 * completion), or from a signal handler that a timer runs every 50 us in
 * a thread busy reading the file (interrupting the shim there).  Writes
 * LOG for t_verify (the good records, at the offsets their writes ended
 * at); prints "good=N refused=R other=E", E being refused appends whose
 * error was not EINVAL plus any that succeeded.  A refused append must
 * leave no trace: t_verify then finds N records, no zero block, the size
 * N * 4096.
 */
#include "t_rec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libaio.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#define BS 4096

static const char *path;
static atomic_bool done;
static atomic_long refused, other;
static int bad_fd;
static char *bad_buf; /* misaligned: direct I/O refuses it */

static void count(long res)
{
	if (res == -EINVAL || res == -EFAULT)
		atomic_fetch_add(&refused, 1);
	else
		atomic_fetch_add(&other, 1);
}

static void bad_write(void)
{
	count(write(bad_fd, bad_buf, BS) < 0 ? -errno : 0);
}

static void bad_aio(io_context_t ctx)
{
	struct iocb cb, *cbs[1] = { &cb };
	struct io_event ev;
	int ret;

	io_prep_pwrite(&cb, bad_fd, bad_buf, BS, 0);
	ret = io_submit(ctx, 1, cbs);
	if (ret != 1) {
		count(ret < 0 ? ret : -EIO);
		return;
	}
	if (io_getevents(ctx, 1, 1, &ev, NULL) != 1)
		count(-EIO);
	else
		count((long)ev.res);
}

static void bad_uring(struct io_uring *ring)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	struct io_uring_cqe *cqe;

	io_uring_prep_write(sqe, bad_fd, bad_buf, BS, 0);
	if (io_uring_submit(ring) != 1 || io_uring_wait_cqe(ring, &cqe)) {
		count(-EIO);
		return;
	}
	count(cqe->res);
	io_uring_cqe_seen(ring, cqe);
}

static void on_timer(int sig)
{
	int e = errno;

	(void)sig;
	bad_write();
	errno = e;
}

/* Busy inside the shim (reads, fstat) while a timer's handler appends. */
static void bad_signal(void)
{
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID,
				.sigev_signo = SIGUSR1 };
	struct itimerspec its = { { 0, 50000 }, { 0, 50000 } };
	struct sigaction sa = { .sa_handler = on_timer,
				.sa_flags = SA_RESTART };
	int fd = open(path, O_RDONLY | O_DIRECT);
	struct stat st;
	timer_t tm;
	char *buf;

	if (fd < 0 || posix_memalign((void **)&buf, BS, BS)) {
		count(-EIO);
		return;
	}
	sigaction(SIGUSR1, &sa, NULL);
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	timer_create(CLOCK_MONOTONIC, &sev, &tm);
	timer_settime(tm, 0, &its, NULL);
	while (!atomic_load(&done)) {
		fstat(fd, &st);
		if (pread(fd, buf, BS, 0) < 0 && errno != EINTR)
			count(-errno);
	}
	timer_delete(tm);
	close(fd);
}

static void *bad_thread(void *arg)
{
	const char *mode = arg;
	struct io_uring ring;
	io_context_t ctx = 0;
	char *raw;

	bad_fd = open(path, O_WRONLY | O_APPEND | O_DIRECT);
	if (bad_fd < 0 || posix_memalign((void **)&raw, BS, 2 * BS) ||
	    (!strcmp(mode, "aio") && io_setup(4, &ctx)) ||
	    (!strcmp(mode, "uring") && io_uring_queue_init(4, &ring, 0))) {
		atomic_fetch_add(&other, 1);
		return NULL;
	}
	bad_buf = raw + 1;
	memset(raw, 'z', 2 * BS);
	if (!strcmp(mode, "unmapped")) {
		bad_buf = mmap(NULL, BS, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (bad_buf == MAP_FAILED) {
			atomic_fetch_add(&other, 1);
			return NULL;
		}
	}
	if (!strcmp(mode, "signal"))
		bad_signal();
	while (!atomic_load(&done)) {
		if (!strcmp(mode, "aio"))
			bad_aio(ctx);
		else if (!strcmp(mode, "uring"))
			bad_uring(&ring);
		else
			bad_write();
	}
	close(bad_fd);
	return NULL;
}

int main(int argc, char **argv)
{
	FILE *log;
	pthread_t th;
	char *buf;
	int fd, n, k;

	if (argc < 4 || argc > 5 || posix_memalign((void **)&buf, BS, BS))
		return 2;
	n = atoi(argv[1]);
	path = argv[3];
	log = fopen(argv[2], "w");
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_DIRECT,
		  0644);
	if (fd < 0 || !log) {
		perror(path);
		return 2;
	}
	pthread_create(&th, NULL, bad_thread, argc > 4 ? argv[4] : "write");
	for (k = 0; k < n; k++) {
		off_t end;

		rec_stamp(buf, BS, 0, (uint64_t)k);
		if (write(fd, buf, BS) != BS) {
			perror("write");
			return 1;
		}
		end = lseek(fd, 0, SEEK_CUR);
		fprintf(log, "R 0 %d %" PRId64 " 0 0\n", k, (int64_t)end - BS);
	}
	atomic_store(&done, true);
	pthread_join(th, NULL);
	fclose(log);
	printf("good=%d refused=%ld other=%ld\n", n, atomic_load(&refused),
	       atomic_load(&other));
	return close(fd) || atomic_load(&other) ? 1 : 0;
}
