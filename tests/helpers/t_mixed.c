// SPDX-License-Identifier: MIT
/*
 * t_mixed: one file used several ways by one process and its children.
 *
 *   t_mixed dual FILE N
 *	Writes N records with O_DIRECT through one descriptor and, after each,
 *	checks through buffered descriptors (one opened before the O_DIRECT
 *	one, one after) that fstat, lseek(SEEK_END), pread and read() see
 *	exactly what was written: the logical size, no zeros past it.
 *	Counts the checks made while the kernel's size (a raw statx, which
 *	the shim does not see) was ahead: a reservation stood.
 *
 *   t_mixed stdio FILE N
 *	The same with a stdio stream: fseek(SEEK_END)/ftell and fread.
 *
 *   t_mixed spawn FILE N
 *	Opens FILE O_WRONLY|O_APPEND|O_DIRECT|O_TRUNC and appends N records
 *	as writer 0 while children append N each: writer 1 a fork child
 *	writing through the inherited descriptor, writer 2 an exec'd
 *	t_appender writing through it, writer 3 an exec'd t_appender that
 *	opens the file itself, writers 4 and 5 two threads of an exec'd
 *	t_appender on the inherited descriptor, writer 6 a posix_spawn'd
 *	t_appender on it.  `appendbench check -t 7 -n N` verifies the file.
 *
 *   t_mixed closefrom FILE N
 *	Appends N records (writer 0, O_APPEND|O_DIRECT), closes a dup and
 *	other descriptors with close_range above the file's and goes on
 *	(the reservation stands), then closefrom(3) closes the file itself
 *	(the last close: trimmed, no segment), reopens it and appends N
 *	more, close_range(3, ~0U, 0), reopens, appends N more and exits
 *	without closing.  The file then holds 4N records of writer 0.
 *
 *   t_mixed quiet FILE N
 *	Opens FILE buffered (O_WRONLY|O_APPEND), dups it, opens it again
 *	read-only and forks a child, all before any O_DIRECT writer: under
 *	the shim these descriptions are "quiet", with nothing kept for them.
 *	The child opens FILE O_DIRECT|O_APPEND and appends N/2 records each
 *	from two threads (writers 0 and 1).  Then, the child paused, the
 *	parent checks that fstat through all three and lseek(SEEK_END) give
 *	the logical size; the dup's description is O_APPEND in the kernel
 *	alone: the parent turns O_DIRECT on through the original and appends
 *	N/2 records (writer 2), then N/2 more through the dup, with
 *	buffered writes switched back on, while the child appends its other
 *	N/2 each.  The file then holds N records of writers 0-2.
 *
 * Prints "ok ..." and exits 0, or says what was wrong and exits 1.
 */
#include "t_rec.h"

#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <libgen.h>
#include <limits.h>

extern char **environ;

static const char *file;
static int bad;
static char self_dir[PATH_MAX];

#define FAIL(...)                                   \
	do {                                        \
		if (bad++ < 20)                     \
			printf(__VA_ARGS__);        \
	} while (0)

static uint64_t kernel_size(int fd)
{
	struct statx stx;

	if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_SIZE, &stx))
		return 0;
	return stx.stx_size;
}

static char *aligned(size_t n)
{
	char *b;

	if (posix_memalign((void **)&b, 4096, n))
		abort();
	return b;
}

/* Writer w appends records seq from..to-1 with write(). */
static int append_records(int fd, uint32_t w, uint64_t from, uint64_t to)
{
	char *buf = aligned(4096);
	uint64_t s;

	for (s = from; s < to; s++) {
		ssize_t r;

		rec_stamp(buf, 4096, w, s);
		r = write(fd, buf, 4096);
		if (r != 4096) {
			printf("writer %u seq %llu: write returned %zd: %s\n", w,
			       (unsigned long long)s, r, strerror(errno));
			free(buf);
			return -1;
		}
	}
	free(buf);
	return 0;
}

/* Every byte of [0, n) through fd: records 0..n/4096-1 of writer 0. */
static void check_contents(const char *what, const char *buf, uint64_t n)
{
	uint64_t b;

	for (b = 0; b < n / 4096; b++) {
		uint32_t w;
		uint64_t seq;

		if (rec_parse(buf + b * 4096, 4096, &w, &seq) || w || seq != b) {
			FAIL("%s: block %llu is not record %llu\n", what,
			     (unsigned long long)b, (unsigned long long)b);
			return;
		}
	}
}

static int dual(uint64_t n, bool stdio)
{
	int fb0, fd, fb1;
	FILE *fs = NULL;
	char *rec = aligned(4096), *big = aligned((n + 64) * 4096);
	uint64_t i, evidence = 0;

	/* A buffered reader from before any segment existed. */
	fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return perror(file), 1;
	close(fd);
	fb0 = open(file, O_RDONLY);
	fd = open(file, O_RDWR | O_DIRECT);
	fb1 = open(file, O_RDONLY);
	if (fb0 < 0 || fd < 0 || fb1 < 0)
		return perror(file), 1;
	if (stdio) {
		fs = fopen(file, "r");
		if (!fs)
			return perror(file), 1;
	}
	for (i = 0; i < n; i++) {
		uint64_t want = (i + 1) * 4096;
		int fds[2] = { fb0, fb1 }, k;
		char what[64];

		rec_stamp(rec, 4096, 0, i);
		if (pwrite(fd, rec, 4096, (off_t)(i * 4096)) != 4096)
			return perror("pwrite"), 1;
		if (kernel_size(fd) > want)
			evidence++;
		if (stdio) {
			long pos;
			size_t got;

			if (fseek(fs, 0, SEEK_END))
				return perror("fseek"), 1;
			pos = ftell(fs);
			if (pos != (long)want)
				FAIL("record %llu: ftell after fseek(SEEK_END) %ld, "
				     "logical size %llu\n", (unsigned long long)i,
				     pos, (unsigned long long)want);
			rewind(fs);
			got = fread(big, 1, (n + 64) * 4096, fs);
			if (got != want)
				FAIL("record %llu: fread read %zu bytes, logical "
				     "size %llu\n", (unsigned long long)i, got,
				     (unsigned long long)want);
			clearerr(fs);
			continue;
		}
		for (k = 0; k < 2; k++) {
			struct stat st;
			off_t end;
			ssize_t r;
			uint64_t total = 0;

			snprintf(what, sizeof(what), "record %llu, reader %d",
				 (unsigned long long)i, k);
			if (fstat(fds[k], &st) || (uint64_t)st.st_size != want)
				FAIL("%s: fstat size %lld, want %llu\n", what,
				     (long long)st.st_size,
				     (unsigned long long)want);
			end = lseek(fds[k], 0, SEEK_END);
			if (end != (off_t)want)
				FAIL("%s: SEEK_END %lld, want %llu\n", what,
				     (long long)end, (unsigned long long)want);
			r = pread(fds[k], big, (n + 64) * 4096, 0);
			if (r != (ssize_t)want)
				FAIL("%s: pread of everything read %zd, want %llu\n",
				     what, r, (unsigned long long)want);
			else
				check_contents(what, big, want);
			/* read() from the start, in odd pieces, to EOF. */
			lseek(fds[k], 0, SEEK_SET);
			while ((r = read(fds[k], big + total, 3000)) > 0)
				total += (uint64_t)r;
			if (r < 0 || total != want)
				FAIL("%s: read() to EOF got %llu, want %llu\n", what,
				     (unsigned long long)total,
				     (unsigned long long)want);
			else
				check_contents(what, big, want);
		}
	}
	printf("%s checks=%llu with-reservation=%llu\n", bad ? "BAD" : "ok",
	       (unsigned long long)n, (unsigned long long)evidence);
	return bad ? 1 : 0;
}

static char *helper(const char *name)
{
	static char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", self_dir, name);
	return path;
}

static pid_t exec_appender(int fd, const char *threads, const char *w,
			   const char *n)
{
	char fdarg[16];
	pid_t pid = fork();

	snprintf(fdarg, sizeof(fdarg), "%d", fd);
	if (pid == 0) {
		if (fd >= 0)
			execl(helper("t_appender"), "t_appender", "-F", fdarg,
			      "-t", threads, "-w", w, "-n", n, file, (char *)NULL);
		else
			execl(helper("t_appender"), "t_appender", "-t", threads,
			      "-w", w, "-n", n, file, (char *)NULL);
		perror("exec t_appender");
		_exit(127);
	}
	return pid;
}

static int spawn(uint64_t n)
{
	char nstr[32], fdarg[16];
	pid_t pids[6];
	int fd, i, st, rc = 0;
	struct stat sb;
	char *argv[12];

	snprintf(nstr, sizeof(nstr), "%llu", (unsigned long long)n);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_DIRECT, 0644);
	if (fd < 0)
		return perror(file), 1;
	snprintf(fdarg, sizeof(fdarg), "%d", fd);
	pids[0] = fork();
	if (pids[0] == 0)
		_exit(append_records(fd, 1, 0, n) ? 1 : 0);
	pids[1] = exec_appender(fd, "1", "2", nstr);
	pids[2] = exec_appender(-1, "1", "3", nstr);
	pids[3] = exec_appender(fd, "2", "4", nstr);
	argv[0] = "t_appender";
	argv[1] = "-F";
	argv[2] = fdarg;
	argv[3] = "-t";
	argv[4] = "1";
	argv[5] = "-w";
	argv[6] = "6";
	argv[7] = "-n";
	argv[8] = nstr;
	argv[9] = (char *)file;
	argv[10] = NULL;
	if ((errno = posix_spawn(&pids[4], helper("t_appender"), NULL, NULL,
				 argv, environ))) {
		perror("posix_spawn");
		return 1;
	}
	if (append_records(fd, 0, 0, n))
		rc = 1;
	for (i = 0; i < 5; i++) {
		if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) ||
		    WEXITSTATUS(st)) {
			printf("child %d failed (status %#x)\n", i, st);
			rc = 1;
		}
	}
	if (fstat(fd, &sb))
		return perror("fstat"), 1;
	printf("%s size=%lld\n", rc ? "BAD" : "ok", (long long)sb.st_size);
	close(fd);
	return rc;
}

static int segment_exists(void)
{
	const char *dir = getenv("DIOSHIM_SHM_DIR");
	char path[PATH_MAX];
	struct stat st;

	if (stat(file, &st))
		return -1;
	snprintf(path, sizeof(path), "%s/dioshim.%llx.%llx",
		 dir && *dir ? dir : "/dev/shm", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	return access(path, F_OK) == 0;
}

static int raw_size(void)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, file, O_RDONLY | O_CLOEXEC);
	uint64_t s;

	if (fd < 0)
		return -1;
	s = kernel_size(fd);
	syscall(SYS_close, fd);
	return (int)s;
}

static int closing(uint64_t n)
{
	int flags = O_WRONLY | O_APPEND | O_DIRECT, fd, fd2, fd3;
	uint64_t want;

	fd = open(file, flags | O_CREAT | O_TRUNC, 0644);
	if (fd < 3)
		return perror(file), 1;
	if (append_records(fd, 0, 0, n))
		return 1;
	want = n * 4096;
	if ((uint64_t)raw_size() <= want)
		FAIL("no reservation after the first records (kernel size %d)\n",
		     raw_size());
	fd2 = dup(fd);
	fd3 = open("/dev/null", O_RDONLY);
	if (fd2 <= fd || fd3 <= fd)
		return printf("dup/open: %d %d\n", fd2, fd3), 1;
	/* Close the dup and everything above: the file's own fd stays. */
	if (close_range((unsigned)fd2, ~0u, 0))
		return perror("close_range"), 1;
	if (append_records(fd, 0, n, 2 * n))
		return 1;
	want = 2 * n * 4096;
	if ((uint64_t)raw_size() <= want)
		FAIL("close_range of a dup dropped the reservation (kernel size "
		     "%d, logical %llu)\n", raw_size(), (unsigned long long)want);
	if (segment_exists() != 1)
		FAIL("close_range of a dup dropped the segment\n");
	/* closefrom(3): the last close of the file. */
	closefrom(3);
	if ((uint64_t)raw_size() != want)
		FAIL("after closefrom(3) the kernel size is %d, want %llu (the "
		     "reserved tail was not trimmed)\n", raw_size(),
		     (unsigned long long)want);
	if (segment_exists() != 0)
		FAIL("a segment outlived closefrom(3)\n");
	fd = open(file, flags);
	if (fd < 0)
		return perror(file), 1;
	if (append_records(fd, 0, 2 * n, 3 * n))
		return 1;
	want = 3 * n * 4096;
	if (close_range(3, ~0u, 0))
		return perror("close_range"), 1;
	if ((uint64_t)raw_size() != want)
		FAIL("after close_range(3, ~0U) the kernel size is %d, want %llu\n",
		     raw_size(), (unsigned long long)want);
	if (segment_exists() != 0)
		FAIL("a segment outlived close_range(3, ~0U)\n");
	fd = open(file, flags);
	if (fd < 0)
		return perror(file), 1;
	if (append_records(fd, 0, 3 * n, 4 * n))
		return 1;
	printf("%s\n", bad ? "BAD" : "ok");
	/* Exit without closing: the destructor detaches and trims. */
	return bad ? 1 : 0;
}

struct pair_arg {
	int fd;
	uint32_t w;
	uint64_t from, to;
	int rc;
};

static void *pair_thread(void *p)
{
	struct pair_arg *a = p;

	a->rc = append_records(a->fd, a->w, a->from, a->to);
	return NULL;
}

/* Two threads append writers 0 and 1, seq [from, to), through fd. */
static int pair_append(int fd, uint64_t from, uint64_t to)
{
	struct pair_arg a[2] = { { fd, 0, from, to, 0 }, { fd, 1, from, to, 0 } };
	pthread_t t[2];
	int i;

	for (i = 0; i < 2; i++)
		if (pthread_create(&t[i], NULL, pair_thread, &a[i]))
			return -1;
	for (i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return a[0].rc || a[1].rc ? -1 : 0;
}

static void size_seen(const char *what, int fd, uint64_t want)
{
	struct stat st;

	if (fstat(fd, &st) || (uint64_t)st.st_size != want)
		FAIL("%s: fstat says %lld, %llu were written\n", what,
		     (long long)st.st_size, (unsigned long long)want);
}

static int quiet(uint64_t n)
{
	int a, b, r, go[2], ready[2], status, reserved;
	uint64_t half = n / 2, want = 2 * half * 4096;
	char c = 0;
	off_t end;
	pid_t pid;

	a = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
	b = dup(a);
	r = open(file, O_RDONLY);
	if (a < 0 || b < 0 || r < 0 || pipe(go) || pipe(ready)) {
		printf("set-up: %s\n", strerror(errno));
		return 1;
	}
	pid = fork();
	if (pid == 0) {
		int d = open(file, O_WRONLY | O_APPEND | O_DIRECT);

		if (d < 0 || pair_append(d, 0, half / 2) ||
		    write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1 ||
		    pair_append(d, half / 2, half))
			_exit(1);
		close(d);
		_exit(0);
	}
	if (pid < 0 || read(ready[0], &c, 1) != 1) {
		printf("child: did not start\n");
		return 1;
	}
	/* The child's half is in, and a reservation may stand. */
	want = 2 * (half / 2) * 4096;
	reserved = kernel_size(r) > want;
	size_seen("read-only descriptor", r, want);
	size_seen("O_APPEND descriptor", a, want);
	size_seen("its dup", b, want);
	end = lseek(r, 0, SEEK_END);
	if (end != (off_t)want)
		FAIL("lseek(SEEK_END) says %lld, %llu were written\n",
		     (long long)end, (unsigned long long)want);
	if (write(go[1], &c, 1) != 1)
		return 1;
	/* O_DIRECT through one, buffered through the other: the kernel has
	 * one description, so F_SETFL through either moves both. */
	if (fcntl(a, F_SETFL, O_APPEND | O_DIRECT) ||
	    append_records(a, 2, 0, half / 2) ||
	    fcntl(b, F_SETFL, O_APPEND) ||
	    append_records(b, 2, half / 2, half))
		FAIL("parent appends failed\n");
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		FAIL("child failed (status %d)\n", status);
	want = 3 * half * 4096;
	size_seen("O_APPEND descriptor at the end", a, want);
	close(a);
	close(b);
	close(r);
	if (bad)
		return 1;
	printf("ok quiet records=%llu with-reservation=%d\n",
	       (unsigned long long)(3 * half), reserved);
	return 0;
}

int main(int argc, char **argv)
{
	char exe[PATH_MAX];
	ssize_t len;
	uint64_t n;

	if (argc != 4) {
		fprintf(stderr, "usage: t_mixed dual|stdio|spawn|closefrom|quiet FILE N\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (len <= 0)
		return 2;
	exe[len] = '\0';
	snprintf(self_dir, sizeof(self_dir), "%s", dirname(exe));
	file = argv[2];
	n = strtoull(argv[3], NULL, 0);
	if (!strcmp(argv[1], "dual"))
		return dual(n, false);
	if (!strcmp(argv[1], "stdio"))
		return dual(n, true);
	if (!strcmp(argv[1], "spawn"))
		return spawn(n);
	if (!strcmp(argv[1], "closefrom"))
		return closing(n);
	if (!strcmp(argv[1], "quiet"))
		return quiet(n);
	return 2;
}
