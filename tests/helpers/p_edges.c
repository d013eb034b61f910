// SPDX-License-Identifier: MIT
/*
 * p_edges: the edges of a process's life around one O_APPEND|O_DIRECT file
 * that a review of the lifecycle work found.  Run under the shim or outside
 * it (the control); check the file outside it with t_verify.
 *
 *   p_edges execfail N LOG FILE
 *       One thread appends N records while another calls execvp on a
 *       program that does not exist every 2 ms (the exec fails each time
 *       and the process goes on).  Writes LOG for t_verify.
 *   p_edges vforkwrite LOG FILE
 *       Append record 0; a vfork child appends record 1 through the same
 *       descriptor and _exits; the parent appends record 2.  Prints the
 *       size fstat gives then (the kernel: 12288).
 *   p_edges dup2life FILE
 *       Open FILE O_DIRECT for writing (the shim then holds its own
 *       descriptors), then dup2 a pipe's write end onto every number from
 *       3 to 1023 that is free or taken, close them all, and read the pipe:
 *       EOF must come (no number kept the pipe open).  Prints "eof".
 */
#include "t_rec.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define BS 4096

static char *aligned(void)
{
	void *p;

	if (posix_memalign(&p, 4096, BS)) {
		perror("posix_memalign");
		exit(2);
	}
	return p;
}

/* One record appended; its offset (from the position), or -1. */
static int64_t append(int fd, char *buf, uint32_t writer, uint64_t seq)
{
	off_t pos;

	rec_stamp(buf, BS, writer, seq);
	if (write(fd, buf, BS) != BS) {
		perror("write");
		return -1;
	}
	pos = lseek(fd, 0, SEEK_CUR);
	return pos < BS ? -1 : pos - BS;
}

static atomic_bool stop;

static void *exec_loop(void *arg)
{
	char *const argv[] = { "p-edges-no-such-program", NULL };

	(void)arg;
	/* A few hundred failed execs over the run, each racing the
	 * appender (a tight loop would only starve it, as it waits for
	 * every exec to end). */
	while (!atomic_load(&stop)) {
		execvp(argv[0], argv);
		usleep(2000);
	}
	return NULL;
}

static int cmd_execfail(int n, const char *logpath, const char *file)
{
	char *buf = aligned();
	pthread_t th;
	FILE *log = fopen(logpath, "w");
	int fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_DIRECT, 0644);

	if (fd < 0 || !log) {
		perror(file);
		return 2;
	}
	pthread_create(&th, NULL, exec_loop, NULL);
	for (int k = 0; k < n; k++) {
		int64_t off = append(fd, buf, 0, (uint64_t)k);

		if (off < 0)
			return 1;
		fprintf(log, "R 0 %d %" PRId64 " 0 0\n", k, off);
	}
	atomic_store(&stop, true);
	pthread_join(th, NULL);
	fclose(log);
	return close(fd) ? 1 : 0;
}

static int cmd_vforkwrite(const char *logpath, const char *file)
{
	char *buf = aligned();
	FILE *log = fopen(logpath, "w");
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_DIRECT,
		      0644);
	struct stat st;
	int64_t off;
	pid_t pid;
	int status;

	if (fd < 0 || !log) {
		perror(file);
		return 2;
	}
	if ((off = append(fd, buf, 0, 0)) < 0)
		return 1;
	fprintf(log, "R 0 0 %" PRId64 " 0 0\n", off);
	pid = vfork();
	if (pid == 0) {
		rec_stamp(buf, BS, 1, 0);
		_exit(write(fd, buf, BS) == BS ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || status)
		return 1;
	fprintf(log, "R 1 0 -1 0 0\n");
	if ((off = append(fd, buf, 2, 0)) < 0)
		return 1;
	fprintf(log, "R 2 0 %" PRId64 " 0 0\n", off);
	fstat(fd, &st);
	printf("size %lld\n", (long long)st.st_size);
	fclose(log);
	return close(fd) ? 1 : 0;
}

static int cmd_dup2life(const char *file)
{
	int fd = open(file, O_WRONLY | O_CREAT | O_DIRECT, 0644), p[2];
	char c;

	if (fd < 0 || pipe(p)) {
		perror(file);
		return 2;
	}
	for (int n = 3; n < 1024; n++)
		if (n != p[0] && n != p[1] && n != fd)
			dup2(p[1], n);
	for (int n = 3; n < 1024; n++)
		if (n != p[0] && n != fd)
			close(n);
	alarm(20);
	if (read(p[0], &c, 1) != 0) {
		fprintf(stderr, "the pipe is still open somewhere\n");
		return 1;
	}
	printf("eof\n");
	return close(fd) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "execfail"))
		return cmd_execfail(atoi(argv[2]), argv[3], argv[4]);
	if (argc == 4 && !strcmp(argv[1], "vforkwrite"))
		return cmd_vforkwrite(argv[2], argv[3]);
	if (argc == 3 && !strcmp(argv[1], "dup2life"))
		return cmd_dup2life(argv[2]);
	fprintf(stderr, "usage: p_edges execfail N LOG FILE | vforkwrite LOG "
			"FILE | dup2life FILE\n");
	return 2;
}
