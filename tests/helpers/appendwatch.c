// SPDX-License-Identifier: MIT
/*
 * appendwatch FILE THREADS WRITES: THREADS threads append WRITES 4 KiB
 * blocks each with O_APPEND|O_DIRECT while a reader polls the size and
 * reads the whole file below it.  The kernel runs appends one at a time, so
 * a size it reports never covers an append still in flight: every block
 * below any size seen must already hold its data.  Exits 1 at the first
 * zero block found below a reported size.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BS 4096

static const char *path;
static int writes;
static atomic_int done_writers;

static void *appender(void *arg)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_DIRECT);
	char *buf;
	int i;

	if (fd < 0 || posix_memalign((void **)&buf, BS, BS))
		exit(2);
	memset(buf, 'a' + (int)(long)arg % 26, BS);
	for (i = 0; i < writes; i++)
		if (write(fd, buf, BS) != BS) {
			perror("write");
			exit(2);
		}
	close(fd);
	atomic_fetch_add(&done_writers, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	int threads, fd, i;
	long checks = 0;
	pthread_t *t;
	char *buf;
	off_t checked = 0;

	if (argc != 4)
		return 2;
	path = argv[1];
	threads = atoi(argv[2]);
	writes = atoi(argv[3]);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0 || posix_memalign((void **)&buf, BS, BS))
		return 2;
	t = calloc((size_t)threads, sizeof(*t));
	for (i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, appender, (void *)(long)i);
	while (atomic_load(&done_writers) < threads) {
		struct stat st;
		off_t off;

		if (fstat(fd, &st))
			return 2;
		/* Every block below the size, from where we last looked. */
		for (off = checked; off + BS <= st.st_size; off += BS) {
			if (pread(fd, buf, BS, off) != BS) {
				printf("short read at %lld below size %lld\n",
				       (long long)off, (long long)st.st_size);
				return 1;
			}
			if (buf[0] == 0 || buf[BS - 1] == 0) {
				printf("zeros at %lld below size %lld\n",
				       (long long)off, (long long)st.st_size);
				return 1;
			}
			checks++;
		}
		checked = st.st_size / BS * BS;
	}
	for (i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	printf("%ld blocks checked below reported sizes\n", checks);
	return 0;
}
