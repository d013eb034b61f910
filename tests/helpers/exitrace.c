// SPDX-License-Identifier: MIT
/*
 * exitrace FILE HOW THREADS BLOCKS: threads end the process at once.
 *
 * Opens FILE (O_WRONLY|O_CREAT|O_TRUNC|O_DIRECT).  THREADS threads write
 * BLOCKS 4 KiB blocks between them, block i at offset i * 4096 (the next
 * free number, taken in turn), every write acknowledged; then all of them
 * meet and end the process together, as HOW says:
 *
 *   exit   every thread calls exit(0)
 *   main   main returns 0 from main() while the others call exit(0)
 *   errx   every thread calls errx(0, ...) (libc's own exit inside)
 *   quick  every thread calls quick_exit(0)
 *   fork   the main thread calls exit(0) (the others wait), and the
 *          exit's atexit handler forks a child that calls exit(0) itself,
 *          and waits for it (with every thread calling exit, glibc 2.36's
 *          child can find its exit lock taken: not the shim's to test)
 *   join   the main thread calls exit(0), and the exit's atexit handler
 *          tells the others to stop and joins them; each calls exit(0)
 *          when told (glibc 2.36 lets one of them end the process)
 *   aio    one more thread goes on writing the blocks after BLOCKS with
 *          libaio (8 in flight, each block reaped before its number is
 *          used again) when the others call exit(0)
 *
 * With the kernel alone the file ends at BLOCKS * 4096 (exit, main, errx,
 * quick), every block written; with aio, at the end of the last block the
 * aio thread submitted, with no zero block before it.  The checks are the
 * caller's, outside the process.  Exits 0, or 1 if a call failed.
 *
 * exitrace check FILE: reads FILE back (run it outside the shim) and
 * prints "size=S written=N zero=Z wrong=W": blocks as written, zero
 * blocks, and blocks that are neither.
 */
#include <err.h>
#include <fcntl.h>
#include <libaio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLK 4096
#define AIO_DEPTH 8

static int fd;
static const char *how;
static long blocks;
static atomic_long next_block;
static pthread_barrier_t meet;

static void fill(char *b, long i)
{
	memset(b, 'a' + (int)(i % 26), BLK);
	memcpy(b, &i, sizeof(i));
}

static void leave(void)
{
	if (!strcmp(how, "errx"))
		errx(0, "leaving");
	if (!strcmp(how, "quick"))
		quick_exit(0);
	exit(0);
}

static void fork_at_exit(void)
{
	pid_t pid = fork();

	if (pid == 0)
		exit(0);
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

static pthread_t writers[64];
static long nwriters;
static atomic_int stop;

static void join_writers(void)
{
	long k;

	atomic_store(&stop, 1);
	for (k = 0; k < nwriters; k++)
		pthread_join(writers[k], NULL);
}

static void *writer(void *arg)
{
	char *b;
	long i;

	if (posix_memalign((void **)&b, BLK, BLK))
		exit(1);
	while ((i = atomic_fetch_add(&next_block, 1)) < blocks) {
		fill(b, i);
		if (pwrite(fd, b, BLK, i * BLK) != BLK) {
			perror("pwrite");
			exit(1);
		}
	}
	pthread_barrier_wait(&meet);
	/* arg: the main thread, the one that exits with "fork" and "join". */
	while (!arg && !strcmp(how, "fork"))
		pause();
	while (!arg && !strcmp(how, "join") && !atomic_load(&stop))
		usleep(1000);
	leave();
	return NULL;
}

/* Blocks from BLOCKS on, AIO_DEPTH in flight, until the process ends. */
static void *aio_writer(void *arg)
{
	struct iocb cbs[AIO_DEPTH], *cb;
	struct io_event ev[AIO_DEPTH];
	io_context_t ctx = 0;
	char *bufs;
	long i = blocks;
	int k, n;

	(void)arg;
	if (io_setup(AIO_DEPTH, &ctx) ||
	    posix_memalign((void **)&bufs, BLK, (size_t)BLK * AIO_DEPTH))
		exit(1);
	for (k = 0; k < AIO_DEPTH; k++, i++) {
		fill(bufs + (size_t)k * BLK, i);
		io_prep_pwrite(&cbs[k], fd, bufs + (size_t)k * BLK, BLK,
			       i * BLK);
		cb = &cbs[k];
		if (io_submit(ctx, 1, &cb) != 1)
			exit(1);
	}
	pthread_barrier_wait(&meet);
	for (;;) {
		n = io_getevents(ctx, 1, AIO_DEPTH, ev, NULL);
		for (k = 0; k < n; k++, i++) {
			cb = ev[k].obj;
			if (ev[k].res != BLK) {
				fprintf(stderr, "aio write: %ld\n",
					(long)ev[k].res);
				exit(1);
			}
			fill(cb->u.c.buf, i);
			io_prep_pwrite(cb, fd, cb->u.c.buf, BLK, i * BLK);
			if (io_submit(ctx, 1, &cb) != 1)
				exit(1);
		}
	}
	return NULL;
}

static int check(const char *path)
{
	char want[BLK], got[BLK];
	long i, written = 0, zero = 0, wrong = 0, size = 0;
	ssize_t n;
	FILE *f = fopen(path, "r");

	if (!f) {
		perror(path);
		return 1;
	}
	for (i = 0; (n = (ssize_t)fread(got, 1, BLK, f)) > 0; i++) {
		size += n;
		fill(want, i);
		if (n == BLK && !memcmp(got, want, BLK))
			written++;
		else if (!memcmp(got, (char[BLK]){ 0 }, (size_t)n))
			zero++;
		else
			wrong++;
	}
	fclose(f);
	printf("size=%ld written=%ld zero=%ld wrong=%ld\n", size, written,
	       zero, wrong);
	return 0;
}

int main(int argc, char **argv)
{
	pthread_t t;
	long threads, k;
	bool aio;

	if (argc == 3 && !strcmp(argv[1], "check"))
		return check(argv[2]);
	if (argc != 5) {
		fprintf(stderr,
			"usage: exitrace FILE exit|main|errx|quick|fork|join|aio THREADS BLOCKS\n");
		return 2;
	}
	how = argv[2];
	threads = strtol(argv[3], NULL, 0);
	blocks = strtol(argv[4], NULL, 0);
	aio = !strcmp(how, "aio");
	if (threads < 1 || blocks < 1)
		return 2;
	if (!strcmp(how, "fork"))
		atexit(fork_at_exit);
	if (!strcmp(how, "join"))
		atexit(join_writers);
	if (threads > 64)
		return 2;
	fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	/* The main thread is one of the writers. */
	pthread_barrier_init(&meet, NULL, (unsigned)(threads + aio));
	for (k = 1; k < threads; k++)
		if (pthread_create(&writers[nwriters++], NULL, writer, NULL))
			return 1;
	if (aio && pthread_create(&t, NULL, aio_writer, NULL))
		return 1;
	if (strcmp(how, "main")) {
		writer(argv);
		return 1;
	}
	{
		char *b;
		long i;

		if (posix_memalign((void **)&b, BLK, BLK))
			return 1;
		while ((i = atomic_fetch_add(&next_block, 1)) < blocks) {
			fill(b, i);
			if (pwrite(fd, b, BLK, i * BLK) != BLK) {
				perror("pwrite");
				return 1;
			}
		}
		pthread_barrier_wait(&meet);
	}
	return 0;
}
