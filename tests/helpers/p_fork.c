// SPDX-License-Identifier: MIT
/*
 * p_fork FILE: one file written by a process, its forked children (through
 * the inherited descriptors, ending by exit and by _exit), a child that
 * execs this program again (which finds an O_DIRECT descriptor it never
 * opened), one started by posix_spawn and one by vfork+exec.  Every step
 * prints sizes and positions; lines starting with '#' (the kernel's own
 * size, the environment) are not for diffing.
 *
 *   p_fork FILE               the parent
 *   p_fork -child FD WFD FILE N   (exec'd) N appends through FD, one
 *                             pwrite at the end through WFD, then sizes
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define K 4096

extern char **environ;
static char wbuf[K] __attribute__((aligned(K)));
static unsigned seq;

static void *data(const char *who)
{
	seq++;
	memset(wbuf, 'a' + (int)(seq % 26), K);
	snprintf(wbuf, 32, "%s:%u", who, seq);
	return wbuf;
}

static void ksize(int fd)
{
	struct stat st;

	if (syscall(SYS_fstat, fd, &st) == 0)
		printf("#ksize %lld\n", (long long)st.st_size);
}

static void sizes(const char *who, int fd, const char *path)
{
	struct stat st, pst;
	int r1 = fstat(fd, &st), r2 = stat(path, &pst);

	printf("%s: fstat=%lld stat=%lld end=%lld pos=%lld\n", who,
	       r1 ? -1LL : (long long)st.st_size,
	       r2 ? -1LL : (long long)pst.st_size,
	       (long long)lseek(fd, 0, SEEK_END),
	       (long long)lseek(fd, 0, SEEK_CUR));
	ksize(fd);
	fflush(stdout);
}

static void appends(const char *who, int fd, int n)
{
	for (int i = 0; i < n; i++) {
		ssize_t r = write(fd, data(who), K);

		if (r != K)
			printf("%s: write %zd errno=%s\n", who, r,
			       strerrorname_np(errno));
	}
}

/* One positional write at the logical end, through a non-append fd. */
static void pwrite_end(const char *who, int wfd, const char *path)
{
	struct stat st;
	ssize_t r;

	if (stat(path, &st))
		return;
	r = pwrite(wfd, data(who), K, st.st_size);
	printf("%s: pwrite at %lld ret=%zd\n", who, (long long)st.st_size, r);
}

static int wait_for(pid_t pid, const char *who)
{
	int status = 0;

	if (pid < 0) {
		printf("%s: no child (%s)\n", who, strerrorname_np(errno));
		return -1;
	}
	if (waitpid(pid, &status, 0) != pid)
		printf("%s: waitpid failed\n", who);
	printf("%s: exited=%d status=%d\n", who, WIFEXITED(status),
	       WEXITSTATUS(status));
	fflush(stdout);
	return 0;
}

static int child_main(int fd, int wfd, const char *path, int n)
{
	const char *pre = getenv("LD_PRELOAD");
	char who[32];
	int r;

	snprintf(who, sizeof(who), "exec-child(%d)", n);
	printf("#LD_PRELOAD=%s\n", pre ? pre : "(unset)");
	/* The first calls on descriptors this image never opened. */
	appends(who, fd, n);
	pwrite_end(who, wfd, path);
	sizes(who, fd, path);
	r = fcntl(fd, F_GETFL);
	printf("%s: getfl append=%d direct=%d\n", who, !!(r & O_APPEND),
	       !!(r & O_DIRECT));
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	char self[4096], fdstr[16], wfdstr[16], nstr[16];
	const char *path;
	ssize_t len;
	pid_t pid;
	int fd, wfd;

	if (argc == 6 && !strcmp(argv[1], "-child"))
		return child_main(atoi(argv[2]), atoi(argv[3]), argv[4],
				  atoi(argv[5]));
	if (argc != 2) {
		fprintf(stderr, "usage: p_fork FILE\n");
		return 2;
	}
	path = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len < 0)
		return 2;
	self[len] = '\0';

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_APPEND,
		  0644);
	wfd = open(path, O_WRONLY | O_DIRECT);
	if (fd < 0 || wfd < 0) {
		perror("open");
		return 1;
	}
	appends("parent", fd, 3);
	sizes("parent", fd, path);

	/* A forked child appends, ends with exit(). */
	pid = fork();
	if (pid == 0) {
		appends("fork-child", fd, 2);
		pwrite_end("fork-child", wfd, path);
		sizes("fork-child", fd, path);
		exit(0);
	}
	wait_for(pid, "fork-child");
	sizes("parent", fd, path);

	/* Parent and child both append while both are alive, the child ends
	 * with _exit(). */
	pid = fork();
	if (pid == 0) {
		appends("fork-child2", fd, 3);
		sizes("fork-child2", fd, path);
		_exit(3);
	}
	wait_for(pid, "fork-child2");
	appends("parent", fd, 1);
	sizes("parent", fd, path);

	/* A child that execs: its new image finds fd and wfd open. */
	snprintf(fdstr, sizeof(fdstr), "%d", fd);
	snprintf(wfdstr, sizeof(wfdstr), "%d", wfd);
	snprintf(nstr, sizeof(nstr), "%d", 2);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		execl(self, self, "-child", fdstr, wfdstr, path, nstr,
		      (char *)NULL);
		_exit(127);
	}
	wait_for(pid, "exec-child");
	sizes("parent", fd, path);
	appends("parent", fd, 1);
	sizes("parent", fd, path);

	/* posix_spawn (no atfork handlers run). */
	{
		char *av[] = { self, "-child", fdstr, wfdstr, (char *)path,
			       "3", NULL };

		if (posix_spawn(&pid, self, NULL, NULL, av, environ))
			pid = -1;
		wait_for(pid, "spawn-child");
		sizes("parent", fd, path);
	}

	/* vfork + exec. */
	snprintf(nstr, sizeof(nstr), "%d", 1);
	pid = vfork();
	if (pid == 0) {
		execl(self, self, "-child", fdstr, wfdstr, path, nstr,
		      (char *)NULL);
		_exit(127);
	}
	wait_for(pid, "vfork-child");
	sizes("parent", fd, path);
	appends("parent", fd, 2);
	sizes("parent", fd, path);

	close(wfd);
	close(fd);
	{
		struct stat st;

		stat(path, &st);
		printf("final: size=%lld\n", (long long)st.st_size);
	}
	return 0;
}
