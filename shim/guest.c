// SPDX-License-Identifier: MIT
/*
 * Guests (writers of a file with no slot in its segment, or with no
 * segment) and the append lock that makes a kernel-placed append to a
 * file kept exact one at a time.
 *
 * Layer L1, above the shared files, the lifelines (its locks go through
 * kept descriptors, under lifeline_lock) and the hints; calls only them
 * and L0.  Lock order: lifeline_lock is a leaf (hint_get, which takes
 * hint_lock, is never called with it held).
 */
#define _GNU_SOURCE
#include "guest.h"
#include "lockrank.h"

#include "config.h"
#include "hint.h"
#include "lifeline.h"
#include "log.h"
#include "shm.h"
#include "sys.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- guests -------------------------------------------------------------- */

/*
 * A guest of a file: a process that writes it with no slot in its segment
 * (every slot taken, no memory for another) or with no segment at all
 * (none could be made).  It cannot take part in a reservation, so the file
 * must have none while it writes (DESIGN.md 4): it holds an OFD read lock
 * on byte DIOSHIM_GUEST_BASE + guest_byte(file) of its place's directory
 * (which needs no memory: a full directory is the usual reason for a
 * guest), and the members keep the file exact while any guest's lock is
 * there.  The kernel drops the lock when the guest dies or execs, in any
 * pid namespace.  The descriptor is kept with the lifelines (the same
 * protection from the program's close and dup2), under key | GUEST_KEY.
 * Anyone who can open the directory can take such a lock, or collide with
 * another file's byte: that costs the file its reservation, nothing else.
 * F_OFD_GETLK does not see the asker's own locks: our holds are in
 * guests[].
 */
#define GUEST_KEY (1ull << 63)
#define GUESTS_MAX 1024
static struct guest {
	uint64_t key;
	uint32_t byte;
	unsigned holds;
} guests[GUESTS_MAX];
static int guest_n;

static uint32_t guest_byte(uint64_t dev, uint64_t ino)
{
	uint64_t h = (dev * 0x9e3779b97f4a7c15ULL) ^ ino;

	h *= 0xff51afd7ed558ccdULL;
	return (uint32_t)(h >> 33); /* 31 bits */
}

static int guest_lock_byte(int fd, uint32_t byte, int cmd, short type)
{
	return shm_lock_byte(fd, DIOSHIM_GUEST_BASE + byte, cmd, type);
}

/* A descriptor of key's place directory, out of the program's way. */
static int guest_dir_open(uint64_t key)
{
	char path[PATH_MAX];
	int fd;

	if (key & HINT_GROUP_BIT) {
		if (shm_group_dir(path, sizeof(path), (uint32_t)key, false))
			return -1;
	} else if (snprintf(path, sizeof(path), "%s", config.shm_dir) >=
		   (int)sizeof(path)) {
		return -1;
	}
	fd = sys_openat(AT_FDCWD, path,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	return fd < 0 ? -1 : lifeline_moved(fd);
}

/* Our kept descriptor of key's place directory, opened on first use;
 * lifeline_lock held. */
static int guest_dir_fd(uint64_t key, bool open_it)
{
	lock_held(LOCK_LIFELINE);

	return lifeline_kept(key | GUEST_KEY, key | GUEST_KEY, key,
			     guest_dir_open, open_it);
}

static struct guest *guest_find(uint64_t key, uint32_t byte)
{
	int i;

	for (i = 0; i < guest_n; i++)
		if (guests[i].key == key && guests[i].byte == byte)
			return &guests[i];
	return NULL;
}

bool guest_mine(uint64_t key, uint64_t dev, uint64_t ino)
{
	bool mine;

	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	mine = guest_find(key, guest_byte(dev, ino)) != NULL;
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
	return mine;
}

bool guest_hold(uint64_t key, uint64_t dev, uint64_t ino)
{
	uint32_t byte = guest_byte(dev, ino);
	struct guest *g;
	bool ok = false;
	int fd;

	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	g = guest_find(key, byte);
	if (g) {
		g->holds++;
		ok = true;
	} else if (guest_n < GUESTS_MAX &&
		   (fd = guest_dir_fd(key, true)) >= 0 &&
		   !guest_lock_byte(fd, byte, F_OFD_SETLK, F_RDLCK)) {
		guests[guest_n++] = (struct guest){ key, byte, 1 };
		ok = true;
	}
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
	if (!ok)
		log_event(LOG_ERROR, LOG_ID(dev, ino),
			  "cannot announce a guest writer (%s)",
			  strerror(errno));
	return ok;
}

void guest_drop(uint64_t key, uint64_t dev, uint64_t ino)
{
	struct guest *g;
	int fd;

	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	g = guest_find(key, guest_byte(dev, ino));
	if (g && --g->holds == 0) {
		fd = guest_dir_fd(key, false);
		if (fd >= 0)
			guest_lock_byte(fd, g->byte, F_OFD_SETLK, F_UNLCK);
		*g = guests[--guest_n];
	}
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
}

bool guest_present(uint64_t key, uint64_t dev, uint64_t ino, bool ours)
{
	uint32_t byte = guest_byte(dev, ino);
	int fd, type;
	bool mine;

	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	if (ours && guest_find(key, byte)) {
		rank_unlock(&lifeline_lock, LOCK_LIFELINE);
		return true;
	}
	/* Kept open, as a guest keeps it: asked at every segment made
	 * and left, it costs one call, not six. */
	fd = guest_dir_fd(key, true);
	mine = fd >= 0;
	if (!mine)
		fd = guest_dir_open(key);
	/* No directory to lock in: no guest could have announced itself.
	 * One we cannot open now (no descriptor left) may have one. */
	if (fd < 0)
		type = errno == ENOENT ? F_UNLCK : -1;
	else
		type = guest_lock_byte(fd, byte, F_OFD_GETLK, F_WRLCK);
	if (fd >= 0 && !mine)
		sys_close(fd);
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
	/* A test that fails says nothing: count a guest, which costs only
	 * the reservation. */
	return type != F_UNLCK;
}

/*
 * An append the kernel places on a file kept exact, a guest's or a
 * member's: one at a time (layout.h DIOSHIM_APPEND_BASE), under an OFD
 * lock of the place's hint file, taken through a descriptor kept with the
 * lifelines (looked up at each try and at the release: the program's
 * dup2 may move it).  The kernel drops it when its holder
 * dies.  Its holder stopped (SIGSTOP) after its write holds back only the
 * appends of the same file, APPEND_LOCK_NS at most: past it, an append
 * goes as the kernel alone takes it (logged), as one does when there is
 * no lock to take (no descriptor of the place).
 */
#define APPEND_LOCK_NS 30000000000ull

/* 0 done, -1 held by another (errno), APPEND_NO_FD when there is no
 * descriptor to take it through (errno: why). */
#define APPEND_NO_FD (-2)
static int append_lock_try(uint64_t key, uint32_t byte, short type)
{
	int fd, rc = APPEND_NO_FD;

	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	errno = EBADF;
	fd = lifeline_place_fd(key, type != F_UNLCK);
	if (fd >= 0 && shm_lock_byte(fd, DIOSHIM_APPEND_BASE + byte,
				     F_OFD_SETLK, type))
		rc = -1;
	else if (fd >= 0)
		rc = 0;
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
	return rc;
}

bool append_lock_take(uint64_t key, uint64_t dev, uint64_t ino)
{
	uint32_t byte = guest_byte(dev, ino);
	struct timespec nap = { 0, 20000 };
	struct dioshim_hint *h;
	uint64_t t0;
	bool temp;
	int rc;

	rc = append_lock_try(key, byte, F_WRLCK);
	/* The first in a place with no hint yet (a segment made later makes
	 * one): made now, for the lock a member will take there. */
	if (rc == APPEND_NO_FD && errno == ENOENT) {
		h = hint_get(key, true, &temp);
		if (h)
			hint_put(h, temp);
		rc = append_lock_try(key, byte, F_WRLCK);
	}
	if (!rc)
		return true;
	t0 = now_ns();
	/* Only a lock held by another is waited for: a hint we may not open
	 * (another's file planted there) is no reason to wait. */
	while (rc == -1 &&
	       (errno == EAGAIN || errno == EACCES || errno == EINTR)) {
		nanosleep(&nap, NULL);
		if (nap.tv_nsec < 1000000)
			nap.tv_nsec *= 2;
		rc = append_lock_try(key, byte, F_WRLCK);
		if (!rc)
			return true;
		if (now_ns() - t0 > APPEND_LOCK_NS) {
			errno = ETIMEDOUT;
			break;
		}
	}
	log_once(LOG_ERROR, NULL, "an exact append goes without its lock (%s)",
		 strerror(errno));
	return false;
}

void append_lock_give(uint64_t key, uint64_t dev, uint64_t ino)
{
	int saved = errno;

	append_lock_try(key, guest_byte(dev, ino), F_UNLCK);
	errno = saved;
}

/*
 * A lone writer pays for the lock only where parallelism may be: while
 * its place has no segment at all (live 0), its append goes without,
 * counted in instead (layout.h lockless).  A segment's maker adds to
 * live before making it, so a guest that read live 0 was counted in
 * before: the members' first exact append waits for it.
 */
_Atomic uint32_t *append_lockless_enter(uint64_t key, uint64_t dev,
					uint64_t ino)
{
	struct dioshim_hint *h = hint_kept(key);
	_Atomic uint32_t *n;

	if (!h)
		return NULL;
	n = &h->lockless[guest_byte(dev, ino) % DIOSHIM_LOCKLESS].n;
	atomic_fetch_add_explicit(n, 1, memory_order_seq_cst);
	if (!atomic_load_explicit(&h->live, memory_order_seq_cst))
		return n;
	atomic_fetch_sub_explicit(n, 1, memory_order_release);
	return NULL;
}

void append_lockless_exit(_Atomic uint32_t *n)
{
	uint32_t cur = atomic_load_explicit(n, memory_order_relaxed);

	/* Never below zero (a hint someone else wrote). */
	while (cur && !atomic_compare_exchange_weak_explicit(
			      n, &cur, cur - 1, memory_order_release,
			      memory_order_relaxed))
		;
}

/*
 * Before a member's first exact append of (dev, ino), under its append
 * lock: the guests' lockless appends still in the kernel that may be of
 * this file are waited for, LOCKLESS_WAIT_NS at most (a count a killed or
 * stopped guest left up never comes down).  A count that is not this
 * file's (no guest of it is announced) is not waited for.
 */
#define LOCKLESS_WAIT_NS 2000000000ull

void append_lockless_drain(uint64_t key, uint64_t dev, uint64_t ino)
{
	struct timespec nap = { 0, 50000 };
	_Atomic uint32_t *n;
	struct dioshim_hint *h;
	bool temp, looked = false;
	uint64_t t0;

	h = hint_get(key, false, &temp);
	if (!h)
		return;
	n = &h->lockless[guest_byte(dev, ino) % DIOSHIM_LOCKLESS].n;
	t0 = now_ns();
	while (atomic_load_explicit(n, memory_order_seq_cst)) {
		if (!looked) {
			if (!guest_present(key, dev, ino, false))
				break;
			looked = true;
		}
		if (now_ns() - t0 > LOCKLESS_WAIT_NS) {
			log_event(LOG_ERROR, LOG_ID(dev, ino),
				  "a lone writer's append still in the kernel "
				  "after %llu s: an exact append goes on",
				  LOCKLESS_WAIT_NS / 1000000000ull);
			break;
		}
		nanosleep(&nap, NULL);
	}
	hint_put(h, temp);
}

/*
 * In a fork child, after lifeline_forget_inherited: the child is a guest
 * of the parent's files as the parent was: it takes its own guest locks,
 * on descriptors of its own.
 */
void guest_atfork_child(void)
{
	int i, fd;

	for (i = 0; i < guest_n; i++) {
		rank_lock(&lifeline_lock, LOCK_LIFELINE);
		fd = guest_dir_fd(guests[i].key, true);
		if (fd < 0 || guest_lock_byte(fd, guests[i].byte, F_OFD_SETLK,
					      F_RDLCK))
			log_event(LOG_ERROR, NULL,
				  "fork: cannot announce the child as a guest "
				  "writer (%s)",
				  strerror(errno));
		rank_unlock(&lifeline_lock, LOCK_LIFELINE);
	}
}
