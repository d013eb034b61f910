// SPDX-License-Identifier: MIT
/*
 * t_blocks FILE [BS]: one line per BS-byte block (4096), the hex value of
 * its byte when every byte of the block is the same, "mixed" otherwise, and
 * "partial" for a short last block.  For files written with fill patterns
 * (dd from pattern files): `t_blocks F | sort | uniq -c` counts the blocks
 * of each pattern; a torn or lost block shows.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	size_t bs = argc > 2 ? strtoull(argv[2], NULL, 0) : 4096, i;
	unsigned char *buf;
	ssize_t r;
	int fd;

	if (argc < 2 || !bs)
		return 2;
	fd = open(argv[1], O_RDONLY);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	buf = malloc(bs);
	for (;;) {
		size_t got = 0;

		while (got < bs && (r = read(fd, buf + got, bs - got)) > 0)
			got += (size_t)r;
		if (!got)
			break;
		if (got < bs) {
			puts("partial");
			break;
		}
		for (i = 1; i < bs && buf[i] == buf[0]; i++)
			;
		if (i == bs)
			printf("%02x\n", buf[0]);
		else
			puts("mixed");
	}
	return 0;
}
