// SPDX-License-Identifier: MIT
/*
 * badappend N LOG FILE: one thread appends N good 4 KiB records to FILE
 * (O_APPEND|O_DIRECT, a descriptor of its own) while another appends
 * through a misaligned buffer, which the kernel refuses (EINVAL), until
 * the first is done.  Writes LOG for t_verify (the good records, at the
 * offsets their writes ended at); prints "good=N refused=R other=E",
 * E being refused appends whose error was not EINVAL plus any that
 * succeeded.  A refused append must leave no trace: t_verify then finds
 * N records, no zero block, the size N * 4096.
 */
#include "t_rec.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define BS 4096

static const char *path;
static atomic_bool done;
static long refused, other;

static void *bad_thread(void *arg)
{
	char *raw, *buf;
	int fd = open(path, O_WRONLY | O_APPEND | O_DIRECT);

	(void)arg;
	if (fd < 0 || posix_memalign((void **)&raw, BS, 2 * BS)) {
		other++;
		return NULL;
	}
	buf = raw + 1; /* misaligned: direct I/O refuses it */
	memset(raw, 'z', 2 * BS);
	while (!atomic_load(&done)) {
		if (write(fd, buf, BS) < 0 && errno == EINVAL)
			refused++;
		else
			other++;
	}
	close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	FILE *log;
	pthread_t th;
	char *buf;
	int fd, n, k;

	if (argc != 4 || posix_memalign((void **)&buf, BS, BS))
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
	pthread_create(&th, NULL, bad_thread, NULL);
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
	printf("good=%d refused=%ld other=%ld\n", n, refused, other);
	return close(fd) || other ? 1 : 0;
}
