// SPDX-License-Identifier: MIT
/*
 * holdmap FILE READY: what a reader outside the shim leaves in the page
 * cache, and keeps there: map the whole file read-only, read every page
 * (over a reserved tail: cached zero pages, which fadvise cannot drop
 * while they are mapped), create READY, then wait to be killed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	volatile unsigned char sum = 0;
	unsigned char *p;
	struct stat st;
	off_t off;
	int fd;

	if (argc != 3)
		return 2;
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) || !st.st_size) {
		perror(argv[1]);
		return 1;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	for (off = 0; off < st.st_size; off += 4096)
		sum += p[off];
	fd = open(argv[2], O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		return 1;
	close(fd);
	for (;;)
		pause();
}
