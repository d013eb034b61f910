// SPDX-License-Identifier: MIT
/* openclose FILE: open FILE for O_DIRECT writing and close it — under the
 * shim, the first open after a crash is what recovers a file. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int fd;

	if (argc != 2)
		return 2;
	fd = open(argv[1], O_WRONLY | O_DIRECT);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	return close(fd) ? 1 : 0;
}
