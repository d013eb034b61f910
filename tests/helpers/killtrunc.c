// SPDX-License-Identifier: MIT
/*
 * killtrunc [-a] [-t] [-r ROUNDS] [-s SEED] FILE: a writer killed with
 * SIGKILL inside ftruncate (or a collapse), many times; after each kill,
 * the first writer to come along must append at the file's size, with no
 * hole before it.
 *
 * Each round execs a child (this program, "child FILE FD MODE") that
 * appends blocks with pwrite at the end of the file and shrinks it with
 * ftruncate (every fourth round, at random: a collapse of two blocks).
 *
 * -t (trap): the child appends, then asks seccomp to stop its next
 *     ftruncate or fallocate and hand it to the parent, which makes that
 *     very call on the child's file itself and kills the child before the
 *     call returns.  The kernel has cut the file; nothing after the call
 *     ran (under the shim: the words still say the old size).  Every round
 *     lands in that window.  (The shim's own trim before a collapse is an
 *     ftruncate too: then that is the call the child dies in.)
 * without -t: the child loops (4 appends, then a shrink by 2 blocks) and
 *     is killed after a random 0-3 ms, wherever it is: inside a write, a
 *     reservation, a truncate, the record...
 *
 * The parent then, in turn: appends at once (O_APPEND), or first
 * truncates the file to its own size (a barrier raiser), or first checks
 * the size and the data.  Every block of the file below its size must be
 * data (only appends and shrinks ever touched it), the append must land
 * at the size fstat gave just before, and the size must follow it.
 *
 * -a: the parent keeps the file open throughout (the takeover is by a
 *     live user of the file's segment); else it opens the file after each
 *     kill (the first user after all the others died).
 *
 * Prints "rounds N size S seed X"; exits 0 if every check held.  Run it
 * outside the shim too, for the control.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BS 4096
#define CAP (1 << 20)

static char *blk, *rbuf;

static int bad(int round, const char *what, long long a, long long b)
{
	printf("FAIL round %d: %s (%lld, %lld)\n", round, what, a, b);
	return 1;
}

/* From now on, ftruncate and fallocate stop and wait for the listener. */
static int trap_size_calls(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ftruncate, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fallocate, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog prog = { sizeof(f) / sizeof(f[0]), f };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			    SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
}

static void say(int fd, int v)
{
	if (write(fd, &v, sizeof(v)) != sizeof(v))
		_exit(2);
}

static int child(const char *file, int ready, int mode)
{
	bool trap = mode & 1, collapse = mode & 2;
	struct stat st;
	off_t size;
	int fd, i, n, lfd;

	fd = open(file, O_RDWR | O_DIRECT);
	if (fd < 0 || fstat(fd, &st))
		return 2;
	size = st.st_size;
	memset(blk, 'c', BS);
	for (n = 0;; n++) {
		for (i = 0; i < 4; i++) {
			if (pwrite(fd, blk, BS, size) != BS)
				return 2;
			size += BS;
		}
		if (trap) {
			lfd = trap_size_calls();
			say(ready, lfd);
			if (lfd < 0)
				return 2;
		}
		if (collapse) {
			if (fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, BS, 2 * BS))
				return 2;
			size -= 2 * BS;
		} else {
			size = size > CAP ? 0 : size - 2 * BS;
			if (ftruncate(fd, size))
				return 2;
		}
		if (trap)
			return 3; /* never: the parent kills us first */
		if (n == 0)
			say(ready, -1);
	}
}

/*
 * The child is stopped in its ftruncate or fallocate: make that call on
 * its file ourselves, with a raw syscall (not through the shim: the
 * kernel's part of the call is all that happens), then kill it.
 */
static int do_and_kill(pid_t pid, int lfd_child, int round)
{
	struct seccomp_notif req;
	int pidfd, lfd, tfd;
	long rc;

	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return bad(round, "pidfd_open", errno, 0);
	lfd = (int)syscall(SYS_pidfd_getfd, pidfd, lfd_child, 0);
	if (lfd < 0)
		return bad(round, "pidfd_getfd listener", errno, 0);
	memset(&req, 0, sizeof(req));
	if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, &req))
		return bad(round, "seccomp notification", errno, 0);
	tfd = (int)syscall(SYS_pidfd_getfd, pidfd, (int)req.data.args[0], 0);
	if (tfd < 0)
		return bad(round, "pidfd_getfd file", errno, 0);
	if (req.data.nr == SYS_ftruncate)
		rc = syscall(SYS_ftruncate, tfd, (off_t)req.data.args[1]);
	else
		rc = syscall(SYS_fallocate, tfd, (int)req.data.args[1],
			     (off_t)req.data.args[2], (off_t)req.data.args[3]);
	if (rc)
		return bad(round, "the child's call, made for it", errno,
			   req.data.nr);
	kill(pid, SIGKILL);
	close(tfd);
	close(lfd);
	close(pidfd);
	return 0;
}

/* Every block below size holds data: no hole, no zero block. */
static int all_data(int fd, off_t size, int round)
{
	off_t off;
	ssize_t n, i;

	for (off = 0; off < size; off += n) {
		n = pread(fd, rbuf, CAP, off);
		if (n <= 0)
			return bad(round, "short read", off, size);
		for (i = 0; i + BS <= n; i += BS)
			if (rbuf[i] == 0 &&
			    !memcmp(rbuf + i, rbuf + i + 1, BS - 1))
				return bad(round, "zero block below the size",
					   off + i, size);
	}
	return 0;
}

static int one_round(const char *file, int *pfd, int *afd, bool keep,
		     bool trap, int round)
{
	char rfd[16], mode[16];
	struct stat st;
	off_t before, pos;
	int p[2], fd, rc = 0, status, v;
	pid_t pid;

	if (pipe(p))
		return 2;
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		close(p[0]);
		snprintf(rfd, sizeof(rfd), "%d", p[1]);
		snprintf(mode, sizeof(mode), "%d",
			 (trap ? 1 : 0) | (rand() % 4 == 0 ? 2 : 0));
		execl("/proc/self/exe", "killtrunc", "child", file, rfd, mode,
		      (char *)NULL);
		_exit(2);
	}
	close(p[1]);
	if (read(p[0], &v, sizeof(v)) != sizeof(v)) {
		close(p[0]);
		waitpid(pid, &status, 0);
		return bad(round, "child did not start", status, 0);
	}
	close(p[0]);
	if (trap) {
		rc = do_and_kill(pid, v, round);
		if (rc) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return rc;
		}
	} else {
		usleep((useconds_t)(rand() % 3000));
		kill(pid, SIGKILL);
	}
	waitpid(pid, &status, 0);
	if (!WIFSIGNALED(status))
		return bad(round, "child ended on its own", status, 0);

	if (!keep) {
		*pfd = open(file, O_RDWR | O_DIRECT);
		*afd = open(file, O_WRONLY | O_APPEND | O_DIRECT);
		if (*pfd < 0 || *afd < 0)
			return bad(round, "reopen", errno, 0);
	}
	fd = *pfd;
	if (round % 3 == 1) {
		/* A barrier raiser comes first. */
		if (fstat(fd, &st) || ftruncate(fd, st.st_size))
			return bad(round, "ftruncate to the size", errno, 0);
	} else if (round % 3 == 2) {
		if (fstat(fd, &st))
			return 2;
		rc |= all_data(fd, st.st_size, round);
	}
	if (fstat(fd, &st))
		return 2;
	before = st.st_size;
	memset(blk, 'p', BS);
	if (write(*afd, blk, BS) != BS)
		return bad(round, "append", errno, 0);
	pos = lseek(*afd, 0, SEEK_CUR) - BS;
	if (pos != before)
		rc |= bad(round, "append landed away from the size", pos,
			  before);
	if (fstat(fd, &st))
		return 2;
	if (st.st_size != pos + BS)
		rc |= bad(round, "size after the append", st.st_size, pos + BS);
	rc |= all_data(fd, st.st_size, round);
	/* Keep the file small. */
	if (st.st_size > CAP && ftruncate(fd, 0))
		return bad(round, "ftruncate to 0", errno, 0);
	if (!keep) {
		close(*afd);
		close(*pfd);
	}
	return rc;
}

int main(int argc, char **argv)
{
	int rounds = 60, opt, rc = 0, fd, afd = -1, r;
	unsigned seed = (unsigned)time(NULL);
	bool keep = false, trap = false;
	struct stat st;

	if (posix_memalign((void **)&blk, BS, BS) ||
	    posix_memalign((void **)&rbuf, BS, CAP))
		return 2;
	if (argc == 5 && !strcmp(argv[1], "child"))
		return child(argv[2], atoi(argv[3]), atoi(argv[4]));
	while ((opt = getopt(argc, argv, "atr:s:")) != -1) {
		switch (opt) {
		case 'a':
			keep = true;
			break;
		case 't':
			trap = true;
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 's':
			seed = (unsigned)strtoul(optarg, NULL, 0);
			break;
		default:
			return 2;
		}
	}
	if (optind != argc - 1)
		return 2;
	srand(seed);
	fd = open(argv[optind], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0)
		return 2;
	if (keep) {
		afd = open(argv[optind], O_WRONLY | O_APPEND | O_DIRECT);
		if (afd < 0)
			return 2;
	} else {
		close(fd);
	}
	for (r = 0; r < rounds && !rc; r++)
		rc |= one_round(argv[optind], &fd, &afd, keep, trap, r);
	if (!keep)
		fd = open(argv[optind], O_RDONLY);
	if (fd < 0 || fstat(fd, &st))
		return 2;
	printf("rounds %d size %lld seed %u\n", r, (long long)st.st_size, seed);
	return rc;
}
