// SPDX-License-Identifier: MIT
/*
 * syncgrow FILE fsync|fdatasync [fill]: append 16 blocks with O_DIRECT,
 * grow the size to 16 blocks + 10000 bytes with fallocate (no data under
 * the growth), sync, print "synced SIZE", then wait to be killed (a power
 * cut is coming).  With "fill", the filesystem is filled first (a file
 * FILE.fill takes what is free) so that the sync runs on a full
 * filesystem; the results of every call are printed, to be compared with
 * the kernel alone.
 */
/* (SYNCGROW_DELAY=N: wait N seconds between the growth and the sync.) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define BS 4096

static void fill(const char *path)
{
	char name[4096];
	struct statvfs sv;
	int fd;

	snprintf(name, sizeof(name), "%s.fill", path);
	fd = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || fstatvfs(fd, &sv))
		exit(2);
	/* Everything free, then block by block what is left. */
	fallocate(fd, 0, 0, (off_t)(sv.f_bavail * sv.f_frsize));
	for (off_t off = 0;; off += BS) {
		struct stat st;

		fstat(fd, &st);
		if (fallocate(fd, 0, st.st_size, BS))
			break;
	}
	close(fd);
}

int main(int argc, char **argv)
{
	int fd, i, r, datasync;
	char *buf;

	if (argc < 3 || posix_memalign((void **)&buf, BS, BS))
		return 2;
	datasync = !strcmp(argv[2], "fdatasync");
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0)
		return 2;
	for (i = 0; i < 16; i++) {
		memset(buf, 'a' + i, BS);
		r = (int)pwrite(fd, buf, BS, (off_t)i * BS);
		if (r != BS)
			return 2;
	}
	if (argc > 3 && !strcmp(argv[3], "fill")) {
		fill(argv[1]);
		errno = 0;
		r = (int)pwrite(fd, buf, BS, 16 * BS);
		printf("append on a full fs: %d %s\n", r, r < 0 ? strerror(errno) : "");
	}
	errno = 0;
	r = fallocate(fd, 0, 0, 16 * BS + 10000);
	printf("fallocate: %d %s\n", r, r ? strerror(errno) : "");
	/* SYNCGROW_DELAY: let the journal commit the growth on its own first
	 * (ext4 commits every 5 s), so that the sync's own record change is
	 * the one thing left for it to make durable. */
	if (getenv("SYNCGROW_DELAY"))
		sleep((unsigned)atoi(getenv("SYNCGROW_DELAY")));
	errno = 0;
	r = datasync ? fdatasync(fd) : fsync(fd);
	printf("%s: %d %s\n", argv[2], r, r ? strerror(errno) : "");
	if (argc > 3) {
		errno = 0;
		r = datasync ? fsync(fd) : fdatasync(fd);
		printf("second sync: %d %s\n", r, r ? strerror(errno) : "");
	}
	printf("synced %lld\n", (long long)lseek(fd, 0, SEEK_END));
	fflush(stdout);
	if (argc > 3)
		return close(fd) ? 1 : 0;
	pause();
	return 0;
}
