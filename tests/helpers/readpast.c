// SPDX-License-Identifier: MIT
/*
 * readpast FILE: reads that straddle the end of the file must not write
 * the caller's memory past what the kernel alone writes.  Writes 4096
 * bytes (O_DIRECT; under the shim a reservation then stands past them),
 * then reads 64 KiB at 0 into buffers filled with 0xAA: pread and preadv
 * on the O_DIRECT descriptor, pread at 100 on a buffered one.  Prints, per
 * read, what it returned and how many bytes past that it changed:
 *   "direct 4096 0", "directv 4096 0", "buffered 3996 0"
 * (the kernel alone; a direct read may fill its last block, not more).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define BIG 65536

static size_t changed(const unsigned char *b, long from)
{
	size_t n = 0;
	long i;

	for (i = from < 0 ? 0 : from; i < BIG; i++)
		n += b[i] != 0xAA;
	return n;
}

int main(int argc, char **argv)
{
	unsigned char *b;
	struct iovec v[2];
	long r;
	int fd, bfd;

	if (argc != 2 || posix_memalign((void **)&b, 4096, BIG))
		return 2;
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0)
		return 2;
	memset(b, 'x', 4096);
	if (pwrite(fd, b, 4096, 0) != 4096)
		return 2;
	memset(b, 0xAA, BIG);
	r = (long)pread(fd, b, BIG, 0);
	printf("direct %ld %zu\n", r, changed(b, r));
	memset(b, 0xAA, BIG);
	v[0] = (struct iovec){ b, 8192 };
	v[1] = (struct iovec){ b + 8192, BIG - 8192 };
	r = (long)preadv(fd, v, 2, 0);
	printf("directv %ld %zu\n", r, changed(b, r));
	bfd = open(argv[1], O_RDONLY);
	if (bfd < 0)
		return 2;
	memset(b, 0xAA, BIG);
	r = (long)pread(bfd, b, BIG, 100);
	printf("buffered %ld %zu\n", r, changed(b, r));
	close(bfd);
	return close(fd) ? 1 : 0;
}
