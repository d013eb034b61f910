// SPDX-License-Identifier: MIT
/*
 * segprobe FILE a|b: the two halves of a writer that crashes.
 *   a: create FILE, write 8 blocks (patterns 'A'..'H') with O_DIRECT at
 *      offsets 0..28K, then die by SIGKILL — under the shim this leaves a
 *      segment with a dead user and a reserved tail.
 *   b: open FILE O_APPEND|O_DIRECT, append 8 blocks ('a'..'h') with
 *      write(), check what it can see (every size it is told is the one
 *      the data implies; the 8 first blocks are intact; a read at the end
 *      returns 0), and print "size S appended-at P".
 * Exit 0 when every check holds.
 *
 * segprobe SEG fuzz N FIRST SPAN: write N random 8-byte words over the
 * file SEG (a segment, not under the shim), each at word FIRST + a random
 * number below SPAN: the fuzzing of hostile.bats in one process.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define BS 4096

static int bad(const char *what)
{
	printf("FAIL: %s (%s)\n", what, strerror(errno));
	return 1;
}

static int fuzz(const char *seg, long n, long first, long span)
{
	uint64_t r[2];
	int fd = open(seg, O_WRONLY);

	if (fd < 0 || n < 0 || first < 0 || span <= 0)
		return bad("fuzz");
	while (n--) {
		if (getrandom(r, sizeof(r), 0) != sizeof(r) ||
		    pwrite(fd, &r[0], 8, (first + (long)(r[1] % (uint64_t)span)) *
						 8) != 8)
			return bad("fuzz write");
	}
	return close(fd) ? bad("fuzz close") : 0;
}

int main(int argc, char **argv)
{
	struct stat st;
	off_t first = -1, pos;
	char *buf;
	int fd, i;

	if (argc == 6 && !strcmp(argv[2], "fuzz"))
		return fuzz(argv[1], atol(argv[3]), atol(argv[4]),
			    atol(argv[5]));
	if (argc != 3 || posix_memalign((void **)&buf, BS, BS))
		return 2;
	if (!strcmp(argv[2], "a")) {
		fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
		if (fd < 0)
			return bad("open a");
		for (i = 0; i < 8; i++) {
			memset(buf, 'A' + i, BS);
			if (pwrite(fd, buf, BS, (off_t)i * BS) != BS)
				return bad("pwrite a");
		}
		raise(SIGKILL);
		return 1;
	}
	fd = open(argv[1], O_RDWR | O_APPEND | O_DIRECT);
	if (fd < 0)
		return bad("open b");
	for (i = 0; i < 8; i++) {
		memset(buf, 'a' + i, BS);
		if (write(fd, buf, BS) != BS)
			return bad("append b");
		pos = lseek(fd, 0, SEEK_CUR);
		if (first < 0)
			first = pos - BS;
		if (pos != first + (off_t)(i + 1) * BS) {
			printf("FAIL: appends not contiguous: pos %lld\n",
			       (long long)pos);
			return 1;
		}
	}
	if (fstat(fd, &st))
		return bad("fstat");
	if (st.st_size != first + 8 * BS || lseek(fd, 0, SEEK_END) != st.st_size) {
		printf("FAIL: size %lld after appending at %lld\n",
		       (long long)st.st_size, (long long)first);
		return 1;
	}
	if (pread(fd, buf, BS, st.st_size) != 0)
		return bad("read at the end is not 0");
	for (i = 0; i < 8; i++) {
		if (pread(fd, buf, BS, (off_t)i * BS) != BS ||
		    buf[0] != 'A' + i || buf[BS - 1] != 'A' + i) {
			printf("FAIL: block %d of the first writer changed\n", i);
			return 1;
		}
		if (pread(fd, buf, BS, first + (off_t)i * BS) != BS ||
		    buf[0] != 'a' + i || buf[BS - 1] != 'a' + i) {
			printf("FAIL: appended block %d not found\n", i);
			return 1;
		}
	}
	printf("size %lld appended-at %lld\n", (long long)st.st_size,
	       (long long)first);
	return close(fd) ? bad("close") : 0;
}
