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
 *
 * Layer L2, above reserve (reserve_trim), inflight and recover; walks
 * the segments through L1 (segment_walk, segment_peek, segment_attach).
 * The order inside L2 is shim/layers'.
 */
#define _GNU_SOURCE
#include "space.h"

#include "config.h"
#include "inflight.h"
#include "log.h"
#include "recover.h"
#include "reserve.h"
#include "sys.h"

#include <pthread.h>
#include <sys/mman.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How long the give-back waits for another file's writes to drain: a
 * writer stopped (SIGSTOP, a debugger) mid-write leaves its file alone. */
#define DRAIN_MS 100

/*
 * The give-back's buffers, mapped for the one call that needs them: the
 * write that met ENOSPC may be a signal handler's on a small alternate
 * stack.  The walk over the segments maps its own (segment_walk); this
 * one holds what is read below it: a segment's words, a process's
 * descriptors.
 */
struct scratch {
	char dents[4096];
	struct seg_peek peek;
};
static __thread struct scratch *scratch
	__attribute__((tls_model("initial-exec")));

/* The entries of the directory open at dfd, read into the scratch. */
static bool dir_each(int dfd, bool (*each)(const char *name, void *arg),
		     void *arg)
{
	return shm_dir_each(dfd, scratch->dents, sizeof(scratch->dents), each,
			    arg);
}

/* A descriptor for writing the regular file (dev, ino) at path, opened
 * without side effects first (O_PATH: no device or FIFO is opened, a
 * planted segment's path costs nothing); -1 if it is not that file. */
static int open_checked(const char *path, bool follow, uint64_t dev,
			uint64_t ino)
{
	struct stat st;
	int pfd, fd = -1;

	pfd = sys_openat(AT_FDCWD, path,
			 O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW), 0);
	if (pfd < 0)
		return -1;
	if (!sys_fstat(pfd, &st) && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino)
		fd = recover_reopen(pfd, O_WRONLY | O_NONBLOCK);
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
	return !sys_newfstatat(AT_FDCWD, path, &st, 0) &&
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

/* Cut the reserved tail of the file whose segment says p, if it is on dev
 * and has one.  True if blocks were given back. */
static bool cut_one(const struct seg_peek *p, uint64_t dev)
{
	struct dioshim_seg *seg = NULL;
	int i, fd;
	uint64_t before = 0;
	struct file_id id;
	struct shim_file *f;
	bool cut = false, skipped = false, recovered;

	if (p->phys <= p->eof || self_has_open(dev, p->ino))
		return false;

	/* The file the segment names, if it is still that file; else one
	 * of its members' descriptors of it.  Nothing here trusts the
	 * segment: what is cut is the file's own segment, attached as
	 * any user attaches (segment_attach checks it). */
	fd = p->path[0] == '/' ? open_checked(p->path, false, dev, p->ino)
			       : -1;
	for (i = 0; fd < 0 && i < p->npids; i++)
		fd = open_via_member(p->pids[i], dev, p->ino);
	if (fd < 0)
		return false;
	if (!file_identify(fd, &id) || id.dev != dev || id.ino != p->ino ||
	    !(f = segment_attach(fd, &id, false))) {
		sys_close(fd);
		return false;
	}
	/* Queued writes in flight past eof: a cut now would have to keep
	 * their range, and the size would cover writes not yet done. */
	if (f->slot >= 0 && !atomic_load(&f->seg->exact) &&
	    !async_in_flight(f->seg) && barrier_try_raise(f, DRAIN_MS)) {
		seg = f->seg;
		before = atomic_load(&seg->phys);
		/* Drained, nobody holds ext_lock but one stopped or dead in
		 * a size change of its own: never wait for it. */
		if (!seg_trylock(&seg->ext_lock, &recovered)) {
			barrier_changing(f); /* killed here: words redone */
			if (!async_in_flight(seg) && reserve_trim(f, fd) &&
			    atomic_load(&seg->phys) < before)
				cut = true;
			seg_unlock(&seg->ext_lock);
		} else {
			skipped = true;
		}
		barrier_lower(f);
	} else if (f->slot >= 0 && !atomic_load(&f->seg->exact)) {
		skipped = true;
	}
	if (cut)
		log_event(LOG_GIVEBACK, LOG_IDFD(dev, p->ino, fd),
			  "out of space: %llu bytes of reserved tail given "
			  "back",
			  (unsigned long long)(before - atomic_load(&seg->phys)));
	else if (skipped)
		log_event(LOG_GIVEBACK, LOG_IDFD(dev, p->ino, fd),
			  "out of space: the reserved tail stays (its writers "
			  "did not drain within %d ms)",
			  DRAIN_MS);
	segment_put(f, fd);
	sys_close(fd);
	return cut;
}

/* A walk of dev's segments: fn(peek, arg) for each. */
struct scan {
	uint64_t dev;
	void (*fn)(const struct seg_peek *p, void *arg);
	void *arg;
};

/* Read, not mapped: a segment someone resizes meanwhile (any member of a
 * group can, in its directory) cannot fault us. */
static void scan_entry(const char *path, uint64_t dev, uint64_t ino,
		       void *arg)
{
	struct scan *s = arg;

	if (dev != s->dev || !segment_peek(path, &scratch->peek) ||
	    scratch->peek.dev != s->dev)
		return;
	s->fn(&scratch->peek, s->arg);
}

/* Every segment of dev's files this user may see, with the scratch
 * mapped for the walk.  False if it could not be. */
static bool walk(uint64_t dev, void (*fn)(const struct seg_peek *p, void *arg),
		 void *arg)
{
	struct scan s = { dev, fn, arg };
	bool walked;

	scratch = sys_mmap(NULL, sizeof(*scratch), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (scratch == MAP_FAILED) {
		scratch = NULL;
		return false;
	}
	walked = segment_walk(scan_entry, &s);
	sys_munmap(scratch, sizeof(*scratch));
	scratch = NULL;
	return walked;
}

static void cut_each(const struct seg_peek *p, void *arg)
{
	int *n = arg;

	*n += cut_one(p, p->dev);
}

bool space_reclaim(uint64_t dev)
{
	int saved = errno, n = 0, cancel;

	/* No cancellation point here leaves a file attached or a barrier
	 * raised. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	walk(dev, cut_each, &n);
	pthread_setcancelstate(cancel, NULL);
	if (n)
		log_event(LOG_GIVEBACK, NULL,
			  "out of space: reserved tails of %d file(s) given "
			  "back, trying again",
			  n);
	errno = saved;
	return n > 0;
}

struct recount {
	uint64_t key, sum;
};

static void count_each(const struct seg_peek *p, void *arg)
{
	struct recount *r = arg;

	if (p->hint_key == r->key)
		r->sum += p->budget_charged;
}

/* When each place and filesystem was last counted, and the wait before
 * its next count (places that hash alike share one). */
#define RECOUNT_SLOTS 8
static struct {
	_Atomic uint64_t last_ns, wait;
} recounts[RECOUNT_SLOTS];

void space_recount(uint64_t key, uint64_t dev)
{
	struct recount r = { key, 0 };
	typeof(recounts[0]) *t =
		&recounts[(((key ^ dev) * 0x9e3779b97f4a7c15ull) >> 32) %
			 RECOUNT_SLOTS];
	uint64_t now = now_ns(), was = atomic_load(&t->last_ns), held, before;
	uint64_t w = atomic_load(&t->wait);
	int saved = errno;

	if (!w)
		w = SPACE_RECOUNT_NS;
	if ((was && now > was && now - was < w) ||
	    !atomic_compare_exchange_strong(&t->last_ns, &was, now))
		return;
	/* A charge made during the walk may be missed by it: the count is
	 * lowered only if nothing moved it meanwhile (charges move the
	 * segment's word first and the hint's after, give-backs the other
	 * way round: one caught half way leaves the hint the lower). */
	before = hint_budget_add(key, dev, 0);
	if (!walk(dev, count_each, &r)) {
		errno = saved;
		return;
	}
	held = hint_budget_add(key, dev, 0);
	if (held == before && held > r.sum) {
		log_event(LOG_RECLAIM, NULL,
			  "disk budget: %llu bytes counted, %llu held by the "
			  "segments there: counted anew",
			  (unsigned long long)held, (unsigned long long)r.sum);
		hint_budget_add(key, dev, -(int64_t)(held - r.sum));
		atomic_store(&t->wait, SPACE_RECOUNT_NS);
	} else if (held == before) {
		/* Right: the budget is held for real (many open files);
		 * the next count waits twice as long, up to 64 s. */
		atomic_store(&t->wait, w < 64 * SPACE_RECOUNT_NS ? 2 * w : w);
	}
	errno = saved;
}
