// SPDX-License-Identifier: MIT
/*
 * Disk space the shim holds, given back when the filesystem runs short
 * (DESIGN.md 7, budgets): as XFS frees the blocks it preallocated past
 * EOF and retries a write that met ENOSPC, a write or a fallocate of the
 * application that meets ENOSPC or EDQUOT has the reserved tails of the
 * filesystem's files cut, and is made once more.  The shim never causes
 * an ENOSPC that the kernel alone would not give.
 *
 * The files are found by their segments, in this user's directory and
 * the group directories in it: each names its file (dev, ino, and the
 * path it was opened by, checked against both before anything is cut).
 * A tail is cut as a guest cuts it (lifecycle.c): joined as a user of the
 * file, under its barrier (no write in flight) and ext_lock, down to the
 * logical size and never below data.  The caller holds nothing of any
 * file, its own included: two processes that meet ENOSPC at once then
 * wait for nothing of each other's.
 */
#define _GNU_SOURCE
#include "space.h"

#include "config.h"
#include "inflight.h"
#include "io.h"
#include "log.h"
#include "reserve.h"
#include "sys.h"

#include <pthread.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Processes whose descriptors are looked through for a file that moved
 * away from its recorded path (renamed, unlinked). */
#define MEMBERS_MAX 16

/* The entries of the directory open at dfd, through getdents64 into the
 * caller's buffer (no heap: the caller may be a signal handler's write).
 * Calls each(name, arg) until it returns true.  Whether it did. */
static bool dir_each(int dfd, bool (*each)(const char *name, void *arg),
		     void *arg)
{
	char buf[4096] __attribute__((aligned(8)));
	long n, at;

	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0)
		for (at = 0; at < n;) {
			/* struct linux_dirent64: ino, off, reclen, type,
			 * name */
			unsigned short reclen;

			memcpy(&reclen, buf + at + 16, sizeof(reclen));
			if (reclen < 20 || at + reclen > n)
				return false;
			if (each(buf + at + 19, arg))
				return true;
			at += reclen;
		}
	return false;
}

/* A descriptor for writing the regular file (dev, ino) at path, opened
 * without side effects first (O_PATH: no device or FIFO is opened, a
 * planted segment's path costs nothing); -1 if it is not that file. */
static int open_checked(const char *path, bool follow, uint64_t dev,
			uint64_t ino)
{
	char self[64];
	struct stat st;
	int pfd, fd = -1;

	pfd = sys_openat(AT_FDCWD, path,
			 O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW), 0);
	if (pfd < 0)
		return -1;
	if (!sys_fstat(pfd, &st) && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino) {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
		fd = sys_openat(AT_FDCWD, self,
				O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC, 0);
	}
	sys_close(pfd);
	return fd;
}

struct member_look {
	char dir[48];
	uint64_t dev, ino;
	int fd;
};

static bool try_member_fd(const char *name, void *arg)
{
	struct member_look *m = arg;
	char path[80];

	if (name[0] < '0' || name[0] > '9')
		return false;
	snprintf(path, sizeof(path), "%s/%s", m->dir, name);
	m->fd = open_checked(path, true, m->dev, m->ino);
	return m->fd >= 0;
}

/* The file through a descriptor one of its members holds (a file renamed
 * or unlinked since its segment recorded the path): /proc/PID/fd. */
static int open_via_member(pid_t pid, uint64_t dev, uint64_t ino)
{
	struct member_look m = { .dev = dev, .ino = ino, .fd = -1 };
	int dfd;

	snprintf(m.dir, sizeof(m.dir), "/proc/%d/fd", (int)pid);
	dfd = sys_openat(AT_FDCWD, m.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC,
			 0);
	if (dfd < 0)
		return -1;
	dir_each(dfd, try_member_fd, &m);
	sys_close(dfd);
	return m.fd;
}

static bool fd_is(const char *name, void *arg)
{
	const uint64_t *want = arg;
	char path[64];
	struct stat st;

	if (name[0] < '0' || name[0] > '9')
		return false;
	snprintf(path, sizeof(path), "/proc/self/fd/%s", name);
	return !syscall(SYS_newfstatat, AT_FDCWD, path, &st, 0) &&
	       (uint64_t)st.st_dev == want[0] && (uint64_t)st.st_ino == want[1];
}

/* Whether this process has the file open: closing another descriptor of
 * it would drop the POSIX locks the program holds on it. */
static bool self_has_open(uint64_t dev, uint64_t ino)
{
	uint64_t want[2] = { dev, ino };
	int dfd = sys_openat(AT_FDCWD, "/proc/self/fd",
			     O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	bool found;

	if (dfd < 0)
		return true;
	found = dir_each(dfd, fd_is, want);
	sys_close(dfd);
	return found;
}

/* Cut the reserved tail of the file whose segment is at segpath, if it is
 * on dev and has one.  True if blocks were given back. */
static bool cut_one(const char *segpath, uint64_t dev)
{
	struct dioshim_seg *seg = segment_map_path(segpath, false);
	char path[sizeof(seg->path) + 1];
	uint32_t ns = (uint32_t)owner_self()->pidns;
	pid_t pids[MEMBERS_MAX];
	int npids = 0, i, hi, fd;
	uint64_t ino, before;
	struct file_id id;
	struct shim_file *f;
	bool cut = false, recovered, locked;

	if (!seg)
		return false;
	ino = seg->ino;
	if (seg->dev != dev ||
	    atomic_load(&seg->phys) <= atomic_load(&seg->eof)) {
		segment_unmap(seg);
		return false;
	}
	memcpy(path, seg->path, sizeof(seg->path));
	path[sizeof(seg->path)] = 0;
	hi = seg_slots(seg);
	for (i = 0; i < hi && npids < MEMBERS_MAX; i++) {
		uint64_t o = atomic_load(&seg->slot[i].owner.pid_start);

		if (o && (uint32_t)seg->slot[i].owner.pidns == ns)
			pids[npids++] = (pid_t)(o & DIOSHIM_OWNER_PID_MASK);
	}
	segment_unmap(seg);
	if (self_has_open(dev, ino))
		return false;

	/* The file the segment names, if it is still that file; else one
	 * of its members' descriptors of it.  Nothing here trusts the
	 * segment: what is cut is the file's own segment, attached as
	 * any user attaches (segment_attach checks it). */
	fd = path[0] == '/' ? open_checked(path, false, dev, ino) : -1;
	for (i = 0; fd < 0 && i < npids; i++)
		fd = open_via_member(pids[i], dev, ino);
	if (fd < 0)
		return false;
	if (!file_identify(fd, &id) || id.dev != dev || id.ino != ino ||
	    !(f = segment_attach(fd, &id, false))) {
		sys_close(fd);
		return false;
	}
	/* Queued writes in flight past eof: a cut now would have to keep
	 * their range, and the size would cover writes not yet done. */
	if (f->slot >= 0 && !atomic_load(&f->seg->exact) &&
	    !async_in_flight(f->seg) && barrier_raise_fd(f, fd)) {
		seg = f->seg;
		before = atomic_load(&seg->phys);
		locked = seg_lock(&seg->ext_lock, &recovered);
		barrier_changing(f); /* killed here: the words are redone */
		if (!async_in_flight(seg) && reserve_trim(f, fd) &&
		    atomic_load(&seg->phys) < before)
			cut = true;
		if (locked)
			seg_unlock(&seg->ext_lock);
		barrier_lower(f);
	}
	segment_put(f, fd);
	sys_close(fd);
	return cut;
}

struct scan {
	const char *dir;
	uint64_t dev;
	bool groups;
	int cut;
};

static void cut_in(const char *dir, uint64_t dev, bool groups, int *cut);

static bool scan_entry(const char *name, void *arg)
{
	struct scan *s = arg;
	char path[PATH_MAX];
	unsigned long long d, i;
	int len;

	len = snprintf(path, sizeof(path), "%s/%s", s->dir, name);
	if (len <= 0 || (size_t)len >= sizeof(path))
		return false;
	if (s->groups && !strncmp(name, DIOSHIM_GROUP_PREFIX,
				  strlen(DIOSHIM_GROUP_PREFIX))) {
		cut_in(path, s->dev, false, &s->cut);
		return false;
	}
	/* dioshim.<dev>.<ino>, and nothing else (a name being made has a
	 * suffix) */
	if (sscanf(name, DIOSHIM_SEG_PREFIX "%llx.%llx%n", &d, &i, &len) != 2 ||
	    name[len] || d != s->dev)
		return false;
	s->cut += cut_one(path, s->dev);
	return false;
}

/* Cut the tails of dev's files whose segments are in dir; once into the
 * group directories. */
static void cut_in(const char *dir, uint64_t dev, bool groups, int *cut)
{
	struct scan s = { dir, dev, groups, 0 };
	int dfd = sys_openat(AT_FDCWD, dir,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);

	if (dfd < 0)
		return;
	dir_each(dfd, scan_entry, &s);
	sys_close(dfd);
	*cut += s.cut;
}

bool space_reclaim(uint64_t dev)
{
	int saved = errno, n = 0, busy = io_busy, cancel;

	/* As inside any call of the shim: a signal handler's write on this
	 * thread meanwhile passes through, and no cancellation point here
	 * leaves a file attached or a barrier raised. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	io_busy = 1;
	cut_in(config.shm_dir, dev, true, &n);
	io_busy = busy;
	pthread_setcancelstate(cancel, NULL);
	if (n)
		log_msg("out of space: reserved tails of %d file(s) given back, "
			"trying again",
			n);
	errno = saved;
	return n > 0;
}
