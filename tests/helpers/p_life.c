// SPDX-License-Identifier: MIT
/*
 * p_life: process lifecycles around one file written with O_DIRECT (issue
 * 10): many processes, vfork and fork children that close the data
 * descriptors, exec with the data descriptor left open, exec while another
 * thread is inside a write.  Records are t_rec.h records and the logs are
 * in t_verify's format ("R writer seq off 0 0"), so t_verify checks the
 * file afterwards.  Run it under the shim or outside it (the control).
 *
 *   p_life procs N RECS LOG FILE
 *       N processes, forked at once, each open FILE themselves
 *       (O_WRONLY|O_CREAT|O_APPEND|O_DIRECT) and, released together, append
 *       RECS records of 4 KiB each.  Writer i is process i.
 *   p_life vfork [-f] T N LOG FILE
 *       T threads append N records each (O_APPEND|O_DIRECT, a descriptor
 *       each) while another thread vforks (fork with -f) over and over; the
 *       child closes one data descriptor, dup2()s /dev/null over another
 *       and _exit(0)s.
 *   p_life exec [-f] [-w] [-k] LOG FILE PROG [ARG...]
 *       Write 3 records to FILE (O_WRONLY|O_CREAT|O_TRUNC|O_DIRECT, not
 *       close-on-exec), then exec PROG with LD_PRELOAD removed from the
 *       environment (-k: kept).  -f: a forked child execs, the parent goes
 *       on and exits without waiting (-w: after waiting for the child); the
 *       parent prints "child=PID".
 *   p_life stall [-r] SECS LOG FILE
 *       A process (W) whose thread rewrites the first 1 MiB of FILE in a
 *       loop (O_DIRECT pwrite at 0) execs "sleep SECS" from its main thread
 *       (environment kept); right after the exec this process writes 4 KiB
 *       at offset 0 and prints how long that took (second_write_ms=).
 *       -r: W execs itself with the raw system call instead (no libc
 *       execve: an exec the shim does not see) while this process holds
 *       FILE open, and its new image, the same process, rewrites the block
 *       at 8 KiB with what the old image wrote there, prints how long that
 *       took (self_write_ms=) and sleeps SECS.
 *   p_life rotate READY GO LOG FILE
 *       A long-running writer: appends 50 records to FILE.a, creates READY
 *       and waits for GO (the test fills the segment directory meanwhile),
 *       then appends 50 more to FILE.a, has a forked child open FILE.a and
 *       append 50 (writer 1), and opens FILE.b and appends 50 (writer 2):
 *       every step after GO needs shared memory it did not have before.
 *       Logs: LOG.a and LOG.b.
 *   p_life xattr FILE
 *       Prints user.dioshim.eof; exit 0 if the file has it, 1 if not, 2 on
 *       another error.  Run it outside the shim.
 */
#include "t_rec.h"

#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#define BS 4096

extern char **environ;

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static char *aligned(size_t n)
{
	void *p;

	if (posix_memalign(&p, 4096, n))
		die("posix_memalign");
	return p;
}

/* Append one record; its offset, or -1 (error reported). */
static int64_t append_rec(int fd, char *buf, uint32_t writer, uint64_t seq)
{
	ssize_t r;
	off_t pos;

	rec_stamp(buf, BS, writer, seq);
	r = write(fd, buf, BS);
	if (r != BS) {
		fprintf(stderr, "writer %u seq %" PRIu64 ": write returned %zd: %s\n",
			writer, seq, r, r < 0 ? strerror(errno) : "short");
		return -1;
	}
	pos = lseek(fd, 0, SEEK_CUR);
	if (pos < BS) {
		fprintf(stderr, "writer %u: position %lld after a write\n",
			writer, (long long)pos);
		return -1;
	}
	return pos - BS;
}

/* ---- procs ------------------------------------------------------------ */

static int procs_child(int go, int logw, const char *file, uint32_t id,
		       int recs)
{
	char *buf = aligned(BS), *lines;
	size_t len = 0, cap = (size_t)recs * 64 + 1;
	char c;
	int fd, k;

	lines = malloc(cap);
	fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_DIRECT, 0644);
	if (fd < 0) {
		perror(file);
		return 1;
	}
	/* Released together: the parent closes its end of the go pipe. */
	while (read(go, &c, 1) > 0)
		;
	for (k = 0; k < recs; k++) {
		int64_t off = append_rec(fd, buf, id, (uint64_t)k);

		if (off < 0)
			return 1;
		len += (size_t)snprintf(lines + len, cap - len,
					"R %u %d %" PRId64 " 0 0\n", id, k, off);
	}
	if (close(fd)) {
		perror("close");
		return 1;
	}
	/* One write of at most PIPE_BUF bytes: never mixed with another's. */
	if (len > PIPE_BUF || write(logw, lines, len) != (ssize_t)len) {
		fprintf(stderr, "writer %u: log write failed\n", id);
		return 1;
	}
	return 0;
}

static int cmd_procs(int argc, char **argv)
{
	int n, recs, go[2], lg[2], i, failed = 0, signaled = 0, ok = 0;
	const char *logpath, *file;
	pid_t *pids;
	FILE *log;
	char buf[65536];
	ssize_t r;
	uint64_t lines = 0;
	int64_t t0;

	if (argc != 5)
		return 2;
	n = atoi(argv[1]);
	recs = atoi(argv[2]);
	logpath = argv[3];
	file = argv[4];
	if (n < 1 || recs < 1 || recs * 64 > PIPE_BUF)
		return 2;
	log = fopen(logpath, "w");
	if (!log)
		die(logpath);
	if (pipe(go) || pipe(lg))
		die("pipe");
	pids = calloc((size_t)n, sizeof(*pids));
	fflush(NULL);
	t0 = now_us();
	for (i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("fork");
			failed++;
			break;
		}
		if (pids[i] == 0) {
			close(go[1]);
			close(lg[0]);
			exit(procs_child(go[0], lg[1], file, (uint32_t)i, recs));
		}
	}
	close(go[0]);
	close(lg[1]);
	close(go[1]); /* go */
	while ((r = read(lg[0], buf, sizeof(buf))) > 0) {
		for (ssize_t k = 0; k < r; k++)
			lines += buf[k] == '\n';
		if (fwrite(buf, 1, (size_t)r, log) != (size_t)r)
			die(logpath);
	}
	if (fclose(log))
		die(logpath);
	for (i = 0; i < n; i++) {
		int st;

		if (pids[i] <= 0)
			continue;
		if (waitpid(pids[i], &st, 0) != pids[i]) {
			failed++;
			continue;
		}
		if (WIFSIGNALED(st)) {
			if (signaled++ < 5)
				fprintf(stderr, "process %d: signal %d\n", i,
					WTERMSIG(st));
		} else if (WEXITSTATUS(st)) {
			failed++;
		} else {
			ok++;
		}
	}
	printf("procs=%d ok=%d failed=%d signaled=%d records=%" PRIu64
	       " ms=%lld\n", n, ok, failed, signaled, lines,
	       (long long)((now_us() - t0) / 1000));
	return ok == n ? 0 : 1;
}

/* ---- vfork ------------------------------------------------------------ */

struct vworker {
	pthread_t th;
	uint32_t id;
	int fd, n, done;
	int64_t *offs;
	int err;
};

static struct vworker *vw;
static int vthreads, vnull;
static bool use_fork;
static _Atomic int vleft;

static void *vappend(void *arg)
{
	struct vworker *w = arg;
	char *buf = aligned(BS);

	for (int k = 0; k < w->n; k++) {
		int64_t off = append_rec(w->fd, buf, w->id, (uint64_t)k);

		if (off < 0) {
			w->err = 1;
			break;
		}
		w->offs[w->done++] = off;
	}
	atomic_fetch_sub(&vleft, 1);
	free(buf);
	return NULL;
}

/* One child: close one data descriptor, dup2 /dev/null over another. */
static __attribute__((noinline)) pid_t spawn_closer(int a, int b)
{
	pid_t pid = use_fork ? fork() : vfork();

	if (pid == 0) {
		close(a);
		dup2(vnull, b);
		_exit(0);
	}
	return pid;
}

static int cmd_vfork(int argc, char **argv)
{
	const char *logpath, *file;
	int i, n, errors = 0, bad_children = 0;
	uint64_t total = 0, children = 0;
	FILE *log;

	if (argc > 1 && !strcmp(argv[1], "-f")) {
		use_fork = true;
		argc--;
		argv++;
	}
	if (argc != 5)
		return 2;
	vthreads = atoi(argv[1]);
	n = atoi(argv[2]);
	logpath = argv[3];
	file = argv[4];
	if (vthreads < 1 || n < 1)
		return 2;
	vnull = open("/dev/null", O_WRONLY);
	if (vnull < 0)
		die("/dev/null");
	vw = calloc((size_t)vthreads, sizeof(*vw));
	for (i = 0; i < vthreads; i++) {
		vw[i].id = (uint32_t)i;
		vw[i].n = n;
		vw[i].offs = calloc((size_t)n, sizeof(int64_t));
		vw[i].fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_DIRECT,
				0644);
		if (vw[i].fd < 0)
			die(file);
	}
	atomic_store(&vleft, vthreads);
	for (i = 0; i < vthreads; i++)
		if (pthread_create(&vw[i].th, NULL, vappend, &vw[i]))
			die("pthread_create");
	/* This thread makes children until the appenders are done. */
	while (atomic_load(&vleft) > 0) {
		int a = vw[children % (uint64_t)vthreads].fd;
		int b = vw[(children + 1) % (uint64_t)vthreads].fd;
		pid_t pid = spawn_closer(a, b);
		int st;

		if (pid < 0)
			die(use_fork ? "fork" : "vfork");
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st))
			bad_children++;
		children++;
	}
	for (i = 0; i < vthreads; i++) {
		pthread_join(vw[i].th, NULL);
		errors += vw[i].err;
	}
	log = fopen(logpath, "w");
	if (!log)
		die(logpath);
	for (i = 0; i < vthreads; i++) {
		for (int k = 0; k < vw[i].done; k++)
			fprintf(log, "R %u %d %" PRId64 " 0 0\n", vw[i].id, k,
				vw[i].offs[k]);
		total += (uint64_t)vw[i].done;
		if (close(vw[i].fd)) {
			perror("close");
			errors++;
		}
	}
	if (fclose(log))
		die(logpath);
	printf("records=%" PRIu64 " children=%" PRIu64 " bad_children=%d "
	       "errors=%d\n", total, children, bad_children, errors);
	return errors || bad_children ? 1 : 0;
}

/* ---- exec ------------------------------------------------------------- */

/* The environment, without LD_PRELOAD unless keep. */
static char **exec_env(bool keep)
{
	size_t n = 0, j = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 1, sizeof(*env));
	for (size_t i = 0; i < n; i++)
		if (keep || strncmp(environ[i], "LD_PRELOAD=", 11))
			env[j++] = environ[i];
	return env;
}

static int cmd_exec(int argc, char **argv)
{
	bool forked = false, wait_child = false, keep = false;
	const char *logpath, *file;
	char *buf = aligned(BS);
	char **env;
	FILE *log;
	int fd, k;
	pid_t pid;

	argc--;
	argv++;
	while (argc > 0 && argv[0][0] == '-') {
		if (!strcmp(argv[0], "-f"))
			forked = true;
		else if (!strcmp(argv[0], "-w"))
			wait_child = true;
		else if (!strcmp(argv[0], "-k"))
			keep = true;
		else
			return 2;
		argc--;
		argv++;
	}
	if (argc < 3)
		return 2;
	logpath = argv[0];
	file = argv[1];
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0)
		die(file);
	log = fopen(logpath, "w");
	if (!log)
		die(logpath);
	for (k = 0; k < 3; k++) {
		rec_stamp(buf, BS, 0, (uint64_t)k);
		if (write(fd, buf, BS) != BS)
			die("write");
		fprintf(log, "R 0 %d %d 0 0\n", k, k * BS);
	}
	if (fclose(log))
		die(logpath);
	env = exec_env(keep);
	fflush(NULL);
	if (!forked) {
		execve(argv[2], &argv[2], env);
		die(argv[2]);
	}
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		execve(argv[2], &argv[2], env);
		perror(argv[2]);
		_exit(127);
	}
	printf("child=%d\n", (int)pid);
	fflush(stdout);
	/* The parent goes on a little with the file open. */
	{
		struct stat st;

		nap_ms(20);
		if (fstat(fd, &st) || st.st_size != 3 * BS) {
			fprintf(stderr, "parent: fstat size %lld\n",
				(long long)st.st_size);
			return 1;
		}
	}
	if (wait_child) {
		int st;

		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st)) {
			fprintf(stderr, "child failed\n");
			return 1;
		}
	}
	/* Ends normally: the descriptor is left to exit to close. */
	return 0;
}

/* ---- stall ------------------------------------------------------------ */

#define STALL_LEN (1 << 20)

static _Atomic int stall_writes;
static int stall_fd;

static void *stall_writer(void *arg)
{
	char *buf = aligned(STALL_LEN);

	(void)arg;
	for (int k = 0; k < STALL_LEN / BS; k++)
		rec_stamp(buf + (size_t)k * BS, BS, 0, (uint64_t)k);
	for (;;) {
		if (pwrite(stall_fd, buf, STALL_LEN, 0) != STALL_LEN) {
			perror("stall: pwrite");
			_exit(1);
		}
		atomic_fetch_add(&stall_writes, 1);
	}
	return NULL;
}

static int cmd_stall(int argc, char **argv)
{
	const char *secs, *logpath, *file;
	int p[2], fd, st, k, hold;
	bool raw;
	pthread_t th;
	char c, *buf;
	pid_t pid;
	int64_t t0, t1, t2;
	FILE *log;
	ssize_t r;

	raw = argc == 5 && !strcmp(argv[1], "-r");
	if (raw) {
		argc--;
		argv++;
	}
	if (argc != 4)
		return 2;
	secs = argv[1];
	logpath = argv[2];
	file = argv[3];
	if (pipe2(p, O_CLOEXEC))
		die("pipe2");
	/* -r: this process holds the file across W's exec, so that the file
	 * keeps a user while W's old image gives way to the new one. */
	hold = raw ? open(file, O_WRONLY | O_CREAT | O_DIRECT | O_CLOEXEC, 0644)
		   : -1;
	if (raw && hold < 0)
		die(file);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		char *av[] = { "sleep", (char *)secs, NULL };

		if (hold >= 0)
			close(hold);
		close(p[0]);
		stall_fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT,
				0644);
		if (stall_fd < 0)
			die(file);
		if (pthread_create(&th, NULL, stall_writer, NULL))
			die("pthread_create");
		while (atomic_load(&stall_writes) < 3)
			nap_ms(1);
		/* The writer thread is almost always inside a pwrite now. */
		if (raw) {
			char *self[] = { "p_life", "stall-after", (char *)file,
					 (char *)secs, NULL };

			syscall(SYS_execve, "/proc/self/exe", self, environ);
		} else {
			execve("/bin/sleep", av, environ);
		}
		perror("execve");
		_exit(127);
	}
	close(p[1]);
	/* The pipe ends at the exec (close-on-exec) or at W's death. */
	while ((r = read(p[0], &c, 1)) > 0)
		;
	t0 = now_us();
	if (waitpid(pid, &st, WNOHANG) == pid) {
		fprintf(stderr, "the writer process ended before its exec\n");
		return 1;
	}
	buf = aligned(BS);
	rec_stamp(buf, BS, 1, 0);
	fd = open(file, O_WRONLY | O_DIRECT);
	if (fd < 0)
		die(file);
	t1 = now_us();
	if (pwrite(fd, buf, BS, 0) != BS)
		die("pwrite");
	t2 = now_us();
	if (close(fd))
		die("close");
	printf("second_write_ms=%lld (open %lld ms after the exec)\n",
	       (long long)((t2 - t1) / 1000), (long long)((t1 - t0) / 1000));
	fflush(stdout);
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	if (hold >= 0 && close(hold))
		die("close");
	printf("exec'd=%s status=%d after %lld ms\n",
	       WIFEXITED(st) ? "exited" : "signaled",
	       WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
	       (long long)((now_us() - t0) / 1000));
	log = fopen(logpath, "w");
	if (!log)
		die(logpath);
	fprintf(log, "R 1 0 0 0 0\n");
	for (k = 1; k < STALL_LEN / BS; k++)
		fprintf(log, "R 0 %d %d 0 0\n", k, k * BS);
	if (fclose(log))
		die(logpath);
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 1;
}

/* W's new image after a raw exec (stall -r): the block at 8 KiB written
 * again as the old image wrote it, timed, then SECS of sleep. */
static int cmd_stall_after(int argc, char **argv)
{
	char *buf = aligned(BS);
	int64_t t0;
	int fd;

	if (argc != 3)
		return 2;
	rec_stamp(buf, BS, 0, 2);
	fd = open(argv[1], O_WRONLY | O_DIRECT);
	if (fd < 0)
		die(argv[1]);
	t0 = now_us();
	if (pwrite(fd, buf, BS, 2 * BS) != BS)
		die("pwrite");
	printf("self_write_ms=%lld\n", (long long)((now_us() - t0) / 1000));
	fflush(stdout);
	if (close(fd))
		die("close");
	sleep((unsigned)atoi(argv[2]));
	return 0;
}

/* ---- rotate ----------------------------------------------------------- */

/* Open PATH and append N records of WRITER from seq FIRST, logging them;
 * 0 or -1.  fd < 0: open (and close) the file here. */
static int append_n(int fd, const char *path, FILE *log, uint32_t writer,
		    int first, int n)
{
	char *buf = aligned(BS);
	int own = fd < 0, k, rc = 0;

	if (own)
		fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_DIRECT, 0644);
	if (fd < 0) {
		perror(path);
		return -1;
	}
	for (k = first; k < first + n; k++) {
		int64_t off = append_rec(fd, buf, writer, (uint64_t)k);

		if (off < 0) {
			rc = -1;
			break;
		}
		fprintf(log, "R %u %d %" PRId64 " 0 0\n", writer, k, off);
	}
	fflush(log);
	if (own && close(fd)) {
		perror("close");
		rc = -1;
	}
	free(buf);
	return rc;
}

static int cmd_rotate(int argc, char **argv)
{
	char pa[4096], pb[4096], la[4096], lb[4096];
	FILE *loga, *logb;
	int fd, st;
	pid_t pid;

	if (argc != 5)
		return 2;
	snprintf(pa, sizeof(pa), "%s.a", argv[4]);
	snprintf(pb, sizeof(pb), "%s.b", argv[4]);
	snprintf(la, sizeof(la), "%s.a", argv[3]);
	snprintf(lb, sizeof(lb), "%s.b", argv[3]);
	loga = fopen(la, "w");
	logb = fopen(lb, "w");
	if (!loga || !logb)
		die("log");
	fd = open(pa, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_DIRECT, 0644);
	if (fd < 0)
		die(pa);
	if (append_n(fd, pa, loga, 0, 0, 50))
		return 1;
	touch(argv[1]);
	if (wait_for(argv[2]))
		return 1;
	fprintf(stderr, "rotate: appending to %s again\n", pa);
	if (append_n(fd, pa, loga, 0, 50, 50))
		return 1;
	fprintf(stderr, "rotate: a forked child opens %s and appends\n", pa);
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0)
		exit(append_n(-1, pa, loga, 1, 0, 50) ? 1 : 0);
	if (waitpid(pid, &st, 0) != pid)
		die("waitpid");
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "rotate: the forked writer %s %d\n",
			WIFEXITED(st) ? "exited" : "died of signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		return 1;
	}
	fprintf(stderr, "rotate: opening %s and appending\n", pb);
	if (append_n(-1, pb, logb, 2, 0, 50))
		return 1;
	if (close(fd))
		die("close");
	if (fclose(loga) || fclose(logb))
		die("log");
	printf("rotate: ok\n");
	return 0;
}

/* ---- xattr ------------------------------------------------------------ */

static int cmd_xattr(int argc, char **argv)
{
	char val[256];
	ssize_t r;

	if (argc != 2)
		return 2;
	r = getxattr(argv[1], "user.dioshim.eof", val, sizeof(val) - 1);
	if (r < 0) {
		if (errno == ENODATA)
			return 1;
		perror(argv[1]);
		return 2;
	}
	printf("user.dioshim.eof: %zd bytes:", r);
	for (ssize_t i = 0; i < r; i++)
		printf(" %02x", (unsigned char)val[i]);
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		goto usage;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "procs"))
		return cmd_procs(argc - 1, argv + 1);
	if (!strcmp(argv[1], "vfork"))
		return cmd_vfork(argc - 1, argv + 1);
	if (!strcmp(argv[1], "exec"))
		return cmd_exec(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stall"))
		return cmd_stall(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stall-after"))
		return cmd_stall_after(argc - 1, argv + 1);
	if (!strcmp(argv[1], "rotate"))
		return cmd_rotate(argc - 1, argv + 1);
	if (!strcmp(argv[1], "xattr"))
		return cmd_xattr(argc - 1, argv + 1);
usage:
	fprintf(stderr, "usage: p_life procs N RECS LOG FILE\n"
			"       p_life vfork [-f] T N LOG FILE\n"
			"       p_life exec [-f] [-w] [-k] LOG FILE PROG [ARG...]\n"
			"       p_life stall [-r] SECS LOG FILE\n"
			"       p_life rotate READY GO LOG FILE\n"
			"       p_life xattr FILE\n");
	return 2;
}
