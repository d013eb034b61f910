// SPDX-License-Identifier: MIT
/*
 * The lifelines, and the descriptors the shim keeps with them out of the
 * program's way (kept copies, guests' directories, append locks).
 *
 * Layer L1, above the shared files (shm.c); calls only them and L0.
 * lifeline_lock is a leaf: taken with nothing of this file held, and
 * held while guest.c and hint.c take OFD locks through kept descriptors.
 */
#define _GNU_SOURCE
#include "lifeline.h"
#include "lockrank.h"

#include "log.h"
#include "shm.h"
#include "sys.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/*
 * A process's lifeline in a place (the hint file of a segment's key): an
 * OFD write lock on byte DIOSHIM_LIFELINE_BASE + its token, on a
 * descriptor of its own.  The kernel drops it when the process dies, is
 * killed, or execs (the descriptor is close-on-exec), in any pid
 * namespace; another process asks with F_OFD_GETLK, and needs no /proc.
 * Only who may open the hint — the writers of the place's files — can
 * take or test a lifeline there.  A fork child closes its inherited copies
 * (they are the parent's lock) and registers anew with a token of its own.
 */
static struct lifeline {
	uint64_t key;
	int fd;
} lifelines[LIFELINES_MAX];
static int lifeline_n;

pthread_mutex_t lifeline_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * A copy of fd out of the way of the numbers a program picks for itself
 * (the lowest free ones): from 512 up, or from half the descriptor limit
 * when that is lower; -1 if there is no room.
 */
static int lifeline_move(int fd)
{
	struct rlimit rl;
	long from = 512;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)from >= rl.rlim_cur / 2)
		from = (long)(rl.rlim_cur / 2);
	return sys_fcntl(fd, F_DUPFD_CLOEXEC, from);
}

/* fd moved out of the way (lifeline_move), or left where it is if there
 * is no room. */
int lifeline_moved(int fd)
{
	int hi = lifeline_move(fd);

	if (hi < 0)
		return fd;
	sys_close(fd);
	return hi;
}

static int lifeline_open(uint64_t key)
{
	bool group = key & HINT_GROUP_BIT;
	struct shm_want want = { group ? SHM_HINT_GROUP : SHM_HINT_USER,
				 (uint32_t)key, NULL };
	char path[PATH_MAX];
	int fd;

	if (hint_path(key, path, sizeof(path), false))
		return -1;
	fd = sys_openat(AT_FDCWD, path, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (!shm_fd_ok(fd, sizeof(struct dioshim_hint), &want)) {
		sys_close(fd);
		return -1;
	}
	return lifeline_moved(fd);
}

static int lifeline_lock_byte(int fd, uint32_t token, int cmd, short type)
{
	return shm_lock_byte(fd, DIOSHIM_LIFELINE_BASE + token, cmd, type);
}

/* Hold our lifeline (token) in the place of key (the hint must exist). */
void lifeline_register(uint64_t key, uint32_t token)
{
	int i, fd;

	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	for (i = 0; i < lifeline_n; i++)
		if (lifelines[i].key == key)
			goto out;
	if (lifeline_n == LIFELINES_MAX)
		goto out;
	fd = lifeline_open(key);
	if (fd < 0)
		goto out;
	if (lifeline_lock_byte(fd, token, F_OFD_SETLK, F_WRLCK)) {
		log_event(LOG_ERROR, NULL, "cannot hold a lifeline (%s)",
			  strerror(errno));
		sys_close(fd);
		goto out;
	}
	lifelines[lifeline_n].key = key;
	lifelines[lifeline_n].fd = fd;
	lifeline_n++;
out:
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
}

bool lifeline_held(uint64_t key, uint32_t token, bool *known)
{
	int i, fd = -1, type;
	bool mine = false;

	*known = false;
	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	for (i = 0; i < lifeline_n; i++)
		if (lifelines[i].key == key) {
			fd = lifelines[i].fd;
			mine = true;
			break;
		}
	if (fd < 0)
		fd = lifeline_open(key);
	type = fd < 0 ? -1 : lifeline_lock_byte(fd, token, F_OFD_GETLK,
						 F_WRLCK);
	if (fd >= 0 && !mine)
		sys_close(fd);
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
	if (type < 0)
		return true;
	*known = true;
	return type != F_UNLCK;
}

void lifeline_evict(int fd)
{
	int i, to;

	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	for (i = 0; i < lifeline_n; i++) {
		if (lifelines[i].fd != fd)
			continue;
		to = lifeline_move(fd);
		if (to < 0 || to == fd)
			to = sys_fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (to >= 0) {
			/* fd itself is the program's to replace now. */
			__atomic_store_n(&lifelines[i].fd, to,
					 __ATOMIC_RELEASE);
		} else {
			/* No number left: the lifeline goes with fd, and
			 * the slot it vouched for is judged by /proc. */
			log_event(LOG_ERROR, NULL,
				  "cannot move a lifeline off fd %d: %s", fd,
				  strerror(errno));
			lifelines[i] = lifelines[--lifeline_n];
		}
		break;
	}
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
}

bool lifeline_owns_fd(int fd)
{
	int i, n = __atomic_load_n(&lifeline_n, __ATOMIC_ACQUIRE);

	for (i = 0; i < n && i < LIFELINES_MAX; i++)
		if (lifelines[i].fd == fd)
			return true;
	return false;
}

int lifeline_fds(unsigned lo, unsigned hi, unsigned *out, int max)
{
	int i, j, n = 0, k = __atomic_load_n(&lifeline_n, __ATOMIC_ACQUIRE);

	for (i = 0; i < k && i < LIFELINES_MAX && n < max; i++) {
		unsigned fd = (unsigned)lifelines[i].fd;

		if (fd < lo || fd > hi)
			continue;
		/* Insertion sort: a handful at most. */
		for (j = n++; j > 0 && out[j - 1] > fd; j--)
			out[j] = out[j - 1];
		out[j] = fd;
	}
	return n;
}

/* A descriptor kept with the lifelines under kept (or under also),
 * else, if open_it says so, opened by open_fn(key) and kept under kept;
 * -1 if none.  lifeline_lock held. */
int lifeline_kept(uint64_t kept, uint64_t also, uint64_t key,
			 int (*open_fn)(uint64_t), bool open_it)
{
	int i, fd;

	lock_held(LOCK_LIFELINE);
	for (i = 0; i < lifeline_n; i++)
		if (lifelines[i].key == kept || lifelines[i].key == also)
			return lifelines[i].fd;
	if (!open_it || lifeline_n == LIFELINES_MAX)
		return -1;
	fd = open_fn(key);
	if (fd >= 0) {
		lifelines[lifeline_n].key = kept;
		lifelines[lifeline_n].fd = fd;
		lifeline_n++;
	}
	return fd;
}

/* The descriptor key's append locks and windows are taken through: the
 * place's hint, open for writing (a directory takes only read locks) —
 * the lifeline's own, or one kept for them; lifeline_lock held. */
#define APPEND_KEY (1ull << 61)
int lifeline_place_fd(uint64_t key, bool open_it)
{
	lock_held(LOCK_LIFELINE);

	return lifeline_kept(key | APPEND_KEY, key, key, lifeline_open,
			     open_it);
}

/* ---- kept descriptors ---------------------------------------------------- */

/*
 * A copy the shim keeps of a descriptor the program closed while
 * asynchronous writes to its file were in flight: the kernel keeps the
 * file open for them, and the last of them to complete cuts the reserved
 * tail through the copy (segment.c).  Kept with the lifelines, for the
 * same protection from the program's close, close_range and dup2 (which
 * may move it: it is named by its key); the fork child closes its copies
 * with the lifelines.  At most KEEPS_MAX: past them, none is kept, and
 * the file's reserved tail stays for gc (segment_put says so).
 */
#define KEEP_KEY (1ull << 62)
static uint64_t keep_seq;
static int keeps_n;

uint64_t fd_keep(int fd)
{
	uint64_t key = 0;
	int to;

	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	if (lifeline_n == LIFELINES_MAX || keeps_n == KEEPS_MAX)
		goto out;
	to = lifeline_move(fd);
	if (to < 0)
		goto out;
	key = KEEP_KEY | ++keep_seq;
	lifelines[lifeline_n].key = key;
	lifelines[lifeline_n].fd = to;
	lifeline_n++;
	keeps_n++;
out:
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
	return key;
}

/* key's descriptor now, or -1 (none kept, or not in this process). */
int fd_kept(uint64_t key)
{
	int i, fd = -1;

	if (!key)
		return -1;
	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	for (i = 0; i < lifeline_n; i++)
		if (lifelines[i].key == key)
			fd = lifelines[i].fd;
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
	return fd;
}

void fd_unkeep(uint64_t key, bool close_it)
{
	int i;

	if (!key)
		return;
	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	for (i = 0; i < lifeline_n; i++) {
		if (lifelines[i].key != key)
			continue;
		if (close_it)
			sys_close(lifelines[i].fd);
		lifelines[i] = lifelines[--lifeline_n];
		keeps_n--;
		break;
	}
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
}

/*
 * In a fork child: the inherited descriptors carry the parent's locks.
 * They are closed; the child registers its own lifelines as it attaches,
 * and takes its own guest locks (guest_atfork_child).
 */
void lifeline_forget_inherited(void)
{
	int i;

	for (i = 0; i < lifeline_n; i++)
		sys_close(lifelines[i].fd);
	lifeline_n = 0;
	keeps_n = 0;
	rank_reinit(&lifeline_lock);
}
