// SPDX-License-Identifier: MIT
/*
 * holes FILE SIZE WRITES [punch]: random 4 KiB O_DIRECT writes into a
 * sparse file of SIZE bytes (made with truncate), each block stamped with
 * its offset and a generation; with "punch", every fourth write first
 * punches the block it is about to write (a hole written again).  Stops
 * at WRITES writes or at ENOSPC, then reads every block it wrote back and
 * checks the latest stamp is there, and that the size is still SIZE.
 * Prints "written=N enospc=0|1 size=S" and exits 0 if all holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BS 4096

int main(int argc, char **argv)
{
	uint64_t size, blocks, writes, i, s = 88172645463325252ull;
	uint32_t *gen;
	int fd, punch, enospc = 0;
	char *buf;
	struct stat st;
	uint64_t written = 0;

	if (argc < 4 || posix_memalign((void **)&buf, BS, BS))
		return 2;
	size = strtoull(argv[2], NULL, 0);
	writes = strtoull(argv[3], NULL, 0);
	punch = argc > 4 && !strcmp(argv[4], "punch");
	blocks = size / BS;
	gen = calloc(blocks, sizeof(*gen));
	/* Made sparse before it is opened for the writes, as fio lays its
	 * files out (an ftruncate through a descriptor the writes do not
	 * share would be served from the reservation, leaving no holes for
	 * them). */
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || close(fd) || truncate(argv[1], (off_t)size))
		return 2;
	fd = open(argv[1], O_RDWR | O_DIRECT);
	if (fd < 0)
		return 2;
	for (i = 0; i < writes; i++) {
		uint64_t b;

		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		b = s % blocks;
		if (punch && i % 4 == 3 && gen[b] &&
		    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)(b * BS), BS) == 0)
			gen[b] = 0;
		memset(buf, 0, BS);
		snprintf(buf, BS, "block %llu gen %u", (unsigned long long)b,
			 gen[b] + 1);
		if (pwrite(fd, buf, BS, (off_t)(b * BS)) != BS) {
			if (errno == ENOSPC) {
				enospc = 1;
				break;
			}
			perror("pwrite");
			return 1;
		}
		gen[b]++;
		written++;
	}
	for (i = 0; i < blocks; i++) {
		char want[64];

		if (pread(fd, buf, BS, (off_t)(i * BS)) != BS)
			return perror("pread"), 1;
		if (!gen[i]) {
			/* Never written, or punched: reads as zeros. */
			if (buf[0]) {
				printf("block %llu should be a hole\n",
				       (unsigned long long)i);
				return 1;
			}
			continue;
		}
		snprintf(want, sizeof(want), "block %llu gen %u",
			 (unsigned long long)i, gen[i]);
		if (strcmp(buf, want)) {
			printf("block %llu: '%.40s', expected '%s'\n",
			       (unsigned long long)i, buf, want);
			return 1;
		}
	}
	fstat(fd, &st);
	printf("written=%llu enospc=%d size=%lld\n", (unsigned long long)written,
	       enospc, (long long)st.st_size);
	return (uint64_t)st.st_size == size ? 0 : 1;
}
