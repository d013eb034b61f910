// SPDX-License-Identifier: MIT
/*
 * The shared segment of a file: create, attach, validate, detach, reclaim.
 *
 * A segment is published complete: its creator builds it under a private
 * temporary name and link()s it into place, so whoever opens the final name
 * sees an initialised segment, and two creators racing end with one segment
 * (the loser's link fails with EEXIST and it attaches to the winner's).
 * The last detacher marks the segment DEAD under attach_lock before it
 * unlinks it; an attacher that opened the old name re-checks the state under
 * the same lock and starts over, so no two segments serve one file.
 *
 * Lock order: files_lock (this process) -> hint_lock, and files_lock ->
 * attach_lock -> ext_lock.
 */
#define _GNU_SOURCE
#include "segment.h"

#include "config.h"
#include "log.h"
#include "mem.h"
#include "prefill.h"
#include "rangelock.h"
#include "recover.h"
#include "reserve.h"
#include "sys.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <time.h>

#define SEG_SIZE sizeof(struct dioshim_seg)
#define LOCK_TIMEOUT_SEC 30

/* ---- owner identity --------------------------------------------------- */

static struct owner_id self_id;
static int self_valid;

/*
 * starttime (field 22 of /proc/PID/stat) of pid; *gone when the process
 * does not exist or is a zombie.  Returns false when /proc cannot tell.
 */
static bool proc_starttime(pid_t pid, uint64_t *start, bool *gone)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd, field;

	*gone = false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = sys_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		*gone = errno == ENOENT || errno == ESRCH;
		return *gone;
	}
	n = sys_read(fd, buf, sizeof(buf) - 1);
	sys_close(fd);
	if (n <= 0) {
		*gone = n == 0 || errno == ESRCH;
		return *gone;
	}
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return false;
	p += 2; /* field 3: state */
	if (*p == 'Z' || *p == 'X') {
		*gone = true;
		return true;
	}
	for (field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		return false;
	*start = strtoull(p, NULL, 10);
	return true;
}

void owner_refresh(void)
{
	struct statx stx;
	uint64_t start = 0;
	uint32_t token = 0;
	bool gone;
	pid_t pid = getpid();

	if (!proc_starttime(pid, &start, &gone) || gone)
		start = 0;
	self_id.pid_start = (uint64_t)pid | start << DIOSHIM_OWNER_PID_BITS;
	self_id.pidns = 0;
	if (sys_statx(AT_FDCWD, "/proc/self/ns/pid", 0, STATX_INO, &stx) == 0)
		self_id.pidns = (uint32_t)stx.stx_ino;
	/* This image's lifeline token (see lifeline_held). */
	while (!token)
		if (syscall(SYS_getrandom, &token, sizeof(token), 0) !=
		    sizeof(token))
			token = (uint32_t)(pid * 2654435761u ^ start) | 1;
	self_id.pidns |= (uint64_t)token << 32;
	__atomic_store_n(&self_valid, 1, __ATOMIC_RELEASE);
}

const struct owner_id *owner_self(void)
{
	if (!__atomic_load_n(&self_valid, __ATOMIC_ACQUIRE))
		owner_refresh();
	return &self_id;
}

static bool lifeline_held(uint64_t key, uint32_t token, bool *known);

bool owner_alive_in(uint64_t key, uint64_t pid_start, uint64_t pidns)
{
	const struct owner_id *me = owner_self();
	uint32_t ns = (uint32_t)pidns, my_ns = (uint32_t)me->pidns;
	uint32_t token = (uint32_t)(pidns >> 32);
	uint64_t start;
	bool gone, known;
	pid_t pid = (pid_t)(pid_start & DIOSHIM_OWNER_PID_MASK);

	if (pid_start == me->pid_start && ns == my_ns)
		return true;
	/* proc inode numbers are never 0 (0 is recorded only by a process
	 * that could not read its own, when neither can we): a corrupt owner
	 * is no owner. */
	if (pid <= 0 || (!ns && my_ns))
		return false;
	/* A pid from another namespace means nothing here, and /proc may
	 * not tell: the owner's lifeline does, wherever it runs. */
	if (ns == my_ns && proc_starttime(pid, &start, &gone)) {
		if (gone)
			return false;
		return start == pid_start >> DIOSHIM_OWNER_PID_BITS;
	}
	if (token && key != LIFELINE_NONE) {
		bool held = lifeline_held(key, token, &known);

		if (known)
			return held;
	}
	return true; /* cannot tell: alive, which only costs a trim */
}

bool owner_alive(uint64_t pid_start, uint64_t pidns)
{
	return owner_alive_in(LIFELINE_NONE, pid_start, pidns);
}

/* The same process (pid, start time, namespace), whatever its image: a
 * new image after exec has a new token. */
static bool owner_is_self(const struct dioshim_owner *o)
{
	const struct owner_id *me = owner_self();

	return atomic_load_explicit(&o->pid_start, memory_order_acquire) ==
		       me->pid_start &&
	       (uint32_t)o->pidns == (uint32_t)me->pidns;
}

static void owner_set_self(struct dioshim_owner *o)
{
	const struct owner_id *me = owner_self();

	o->pidns = me->pidns;
	atomic_store_explicit(&o->pid_start, me->pid_start,
			      memory_order_release);
}

/* ---- robust locks ----------------------------------------------------- */

static void robust_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

/*
 * A mutex in shared memory is only locked if its kind is the one every
 * segment mutex is made with: glibc acts on the kind bits (priority
 * protection, priority inheritance) and asserts on what they imply, so a
 * corrupt kind would crash the application instead of failing a lock.
 */
static int robust_kind = -1;

static bool mutex_sane(pthread_mutex_t *m)
{
	if (__atomic_load_n(&robust_kind, __ATOMIC_RELAXED) < 0) {
		pthread_mutex_t probe;

		robust_init(&probe);
		__atomic_store_n(&robust_kind, probe.__data.__kind,
				 __ATOMIC_RELAXED);
		pthread_mutex_destroy(&probe);
	}
	return __atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED) ==
	       robust_kind;
}

static int seg_lock_for(pthread_mutex_t *m, bool *recovered, int secs)
{
	struct timespec dl;
	int rc;

	*recovered = false;
	if (!mutex_sane(m))
		return EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += secs;
	rc = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &dl);
	if (rc == EOWNERDEAD) {
		/* The holder died: its critical section is ours to repair. */
		pthread_mutex_consistent(m);
		*recovered = true;
		return 0;
	}
	return rc;
}

bool seg_lock(pthread_mutex_t *m, bool *recovered)
{
	int rc = seg_lock_for(m, recovered, LOCK_TIMEOUT_SEC);

	if (rc) {
		log_msg("shared lock unusable (%s): passing through",
			strerror(rc));
		return false;
	}
	return true;
}

void seg_unlock(pthread_mutex_t *m)
{
	pthread_mutex_unlock(m);
}


/* ---- shared files: naming, checking, publishing ----------------------- */

static bool shm_dir_setgid(void);
#define HINT_GROUP_BIT (1ull << 32)

int segment_path(char *buf, size_t cap, uint64_t dev, uint64_t ino)
{
	int n = snprintf(buf, cap, "%s/" DIOSHIM_SEG_PREFIX "%llx.%llx",
			 config.shm_dir, (unsigned long long)dev,
			 (unsigned long long)ino);

	return n > 0 && (size_t)n < cap ? 0 : -1;
}

/*
 * A group's directory, <shm_dir>/dioshim-g<gid>: the segments of its
 * group-writable files, and its hint.  0770 and the group's, without the
 * sticky bit, so that whichever member is the last user of a file can
 * remove the segment another member made.  Only a member (or root) can
 * give a directory that group; a look-alike planted under the name makes
 * the group's files pass through for every member alike.
 */
static int group_dir(char *buf, size_t cap, uint32_t gid, bool make)
{
	struct stat st;
	int n = snprintf(buf, cap, "%s/" DIOSHIM_GROUP_PREFIX "%u",
			 config.shm_dir, (unsigned)gid);

	if (n <= 0 || (size_t)n >= cap)
		return -1;
	if (make && syscall(SYS_mkdirat, AT_FDCWD, buf, 0700) == 0) {
		if (syscall(SYS_fchownat, AT_FDCWD, buf, (uid_t)-1, (gid_t)gid,
			    AT_SYMLINK_NOFOLLOW) ||
		    syscall(SYS_fchmodat, AT_FDCWD, buf, 0770)) {
			log_msg("%s: cannot give it to its group (%s)", buf,
				strerror(errno));
			syscall(SYS_unlinkat, AT_FDCWD, buf, AT_REMOVEDIR);
			return -1;
		}
	}
	if (syscall(SYS_newfstatat, AT_FDCWD, buf, &st, AT_SYMLINK_NOFOLLOW))
		return -1;
	if (!S_ISDIR(st.st_mode) || st.st_gid != gid ||
	    (st.st_mode & 07777) != 0770 || shm_dir_setgid()) {
		log_once("%s: not a group directory of ours: its files pass "
			 "through", buf);
		errno = EPERM;
		return -1;
	}
	return 0;
}

int segment_path_of(char *buf, size_t cap, uint64_t dev, uint64_t ino,
		    uint32_t mode, uint32_t gid, bool make)
{
	char dir[PATH_MAX];
	int n;

	if (!(mode & S_IWGRP))
		return segment_path(buf, cap, dev, ino);
	if (group_dir(dir, sizeof(dir), gid, make))
		return -1;
	n = snprintf(buf, cap, "%s/" DIOSHIM_SEG_PREFIX "%llx.%llx", dir,
		     (unsigned long long)dev, (unsigned long long)ino);
	return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* The name of a segment we have mapped, from its own words. */
static int seg_path_of(const struct dioshim_seg *seg, char *buf, size_t cap)
{
	bool group = seg->hint_key & HINT_GROUP_BIT;

	return segment_path_of(buf, cap, seg->dev, seg->ino,
			       group ? S_IWGRP : 0, (uint32_t)seg->hint_key,
			       false);
}

/*
 * Who may own a shared file, and with which mode.  Who may change a
 * segment is who may write its file: a segment is 0600, or 0660 with the
 * file's group when the file is group-writable (every writer of the file
 * can then join, and nobody else can change a word).  A hint is 0600 for
 * one user, or 0660 for one group.  Anything else — another user's file,
 * a planted one, a mode wider than the file's — is foreign.
 */
enum shm_kind {
	SHM_HINT_USER, /* id: the uid */
	SHM_HINT_GROUP, /* id: the gid */
	SHM_SEG_FILE, /* the segment of file */
	SHM_SEG_ANY, /* a segment, file unknown (gc, status, reclaim) */
};
struct shm_want {
	enum shm_kind kind;
	uint32_t id;
	const struct file_id *file;
};

/* Whether the directory hands its group to new files (then a file's
 * group no longer says who made it). */
static bool shm_dir_setgid(void)
{
	static int cached = -1;
	struct stat st;
	int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);

	if (v < 0) {
		v = syscall(SYS_newfstatat, AT_FDCWD, config.shm_dir, &st,
			    0) != 0 ||
		    (st.st_mode & S_ISGID);
		__atomic_store_n(&cached, v, __ATOMIC_RELAXED);
	}
	return v;
}

static bool shm_stat_ok(const struct stat *st, size_t size,
			const struct shm_want *w)
{
	mode_t perm = st->st_mode & 07777;
	uid_t me = geteuid();

	if (!S_ISREG(st->st_mode) || (size_t)st->st_size != size)
		return false;
	switch (w->kind) {
	case SHM_HINT_USER:
		return perm == 0600 && st->st_uid == w->id;
	case SHM_HINT_GROUP:
		return perm == 0660 && st->st_gid == w->id &&
		       !shm_dir_setgid();
	case SHM_SEG_ANY:
		return (perm == 0600 && (st->st_uid == me || me == 0)) ||
		       perm == 0660;
	case SHM_SEG_FILE:
		break;
	}
	if (perm != 0600 && perm != 0660)
		return false;
	/* Group write on the segment only where the file has it. */
	if (perm == 0660 && (st->st_gid != w->file->gid ||
			     !(w->file->mode & S_IWGRP)))
		return false;
	/* Made by us, by the file's owner, by root, or by a member of the
	 * file's group (the only ones who can give it that group). */
	return st->st_uid == me || st->st_uid == w->file->uid ||
	       st->st_uid == 0 || (perm == 0660 && !shm_dir_setgid());
}

static bool shm_fd_ok(int fd, size_t size, const struct shm_want *w)
{
	struct stat st;

	return sys_fstat(fd, &st) == 0 && shm_stat_ok(&st, size, w);
}

/*
 * Size a shared file to size and allocate [0, backed) of it: tmpfs gives
 * fallocate a page for every hole, so no later store there can fault for
 * want of memory.  The rest stays a hole until slot_back() allocates it.
 */
static int shm_back(int fd, size_t size, size_t backed)
{
	struct stat st;
	int rc;

	if (sys_fstat(fd, &st))
		return -1;
	if ((size_t)st.st_size != size && sys_ftruncate(fd, (off_t)size))
		return -1;
	do
		rc = sys_fallocate(fd, 0, 0, (off_t)backed);
	while (rc && errno == EINTR);
	if (rc && (errno == EOPNOTSUPP || errno == ENOSYS))
		/* Not tmpfs (a configured directory elsewhere): the
		 * filesystem allocates on write, as for any file. */
		return 0;
	return rc;
}

/* Pages of a mapping to allocate before use, per the file's kind. */
static size_t shm_backed_size(size_t size)
{
	/* A segment: its head and the first page of slots. */
	if (size == SEG_SIZE)
		return DIOSHIM_SEG_HEAD + 4096;
	return size;
}

static void *shm_open_existing(const char *path, size_t size, bool writable,
				const struct shm_want *want)
{
	int fd, err;
	void *map;

	fd = sys_openat(AT_FDCWD, path,
			(writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW |
				O_CLOEXEC | O_NONBLOCK,
			0);
	if (fd < 0)
		return NULL;
	if (!shm_fd_ok(fd, size, want)) {
		sys_close(fd);
		log_msg("%s: not ours (owner, mode or size): ignoring it",
			path);
		errno = EPERM;
		return NULL;
	}
	/* A file truncated and re-grown may have holes where its words are:
	 * back them now or refuse the file (ENOSPC). */
	if (writable && shm_back(fd, size, shm_backed_size(size))) {
		err = errno;
		sys_close(fd);
		log_msg("%s: cannot back it (%s): ignoring it", path,
			strerror(err));
		errno = err;
		return NULL;
	}
	map = mmap(NULL, size, PROT_READ | (writable ? PROT_WRITE : 0),
		   MAP_SHARED, fd, 0);
	err = errno;
	sys_close(fd);
	errno = err;
	return map == MAP_FAILED ? NULL : map;
}

/*
 * Build a shared file under a temporary name and link it into place.
 * Returns the mapping, or NULL with errno (EEXIST: someone else won).
 */
/* The mode and owner a new shared file gets. */
struct shm_owner {
	mode_t mode;
	uid_t uid; /* (uid_t)-1: ours */
	gid_t gid; /* (gid_t)-1: ours */
};

static void *shm_create_published(const char *path, size_t size,
				  const struct shm_owner *own,
				  void (*init)(void *, const void *),
				  void (*undo)(void *), const void *arg)
{
	char tmp[PATH_MAX];
	void *map;
	int fd, err;

	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)sys_gettid());
	fd = sys_openat(AT_FDCWD, tmp,
			O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			0600);
	if (fd < 0 && errno == EEXIST) {
		/* A leftover of a dead thread with our tid: ours to remove. */
		sys_unlink(tmp);
		fd = sys_openat(AT_FDCWD, tmp,
				O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
					O_CLOEXEC,
				0600);
	}
	if (fd < 0)
		return NULL;
	/* Owner and group before the mode widens; every page allocated
	 * before the first is touched: a full directory is ENOSPC here,
	 * never a SIGBUS in the application later (a MAP_SHARED page of
	 * tmpfs is allocated on first touch). */
	if (((own->uid != (uid_t)-1 || own->gid != (gid_t)-1) &&
	     syscall(SYS_fchown, fd, own->uid, own->gid)) ||
	    sys_fchmod(fd, own->mode) ||
	    shm_back(fd, size, shm_backed_size(size)))
		goto fail_fd;
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto fail_fd;
	sys_close(fd);
	init(map, arg);
	if (sys_link(tmp, path)) {
		err = errno;
		sys_unlink(tmp);
		if (undo)
			undo(map);
		munmap(map, size);
		errno = err;
		return NULL;
	}
	sys_unlink(tmp);
	return map;
fail_fd:
	err = errno;
	sys_close(fd);
	sys_unlink(tmp);
	errno = err;
	return NULL;
}

/* ---- the hints ----------------------------------------------------------- */

/*
 * A hint counts the segments that exist for the files of one user
 * (private segments) or one group (segments of group-writable files), so
 * that a process which touches no such file pays no system call to find
 * out.  A process reads its own user's hint and its groups': together
 * they cover every segment of a file it may write.  live over-counts after
 * a crash (a segment left behind), never under-counts: creators add before
 * creating and subtract after unlinking.
 */
#define HINTS_MAX 33 /* the user and 32 groups */
#define HINTS_EXTRA 8 /* other users' hints, for root */

enum { HINT_UNTRIED, HINT_READY, HINT_BROKEN };
static int hint_state;
static struct hint_entry {
	uint64_t key;
	struct dioshim_hint *h;
} hint_extra[HINTS_EXTRA];
struct dioshim_hint *hint_set[HINTS_MAX];
int hint_count;
static pthread_mutex_t hint_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t hint_keys[HINTS_MAX];

static void hint_init(void *map, const void *arg)
{
	struct dioshim_hint *h = map;

	(void)arg;
	h->magic = DIOSHIM_HINT_MAGIC;
	h->version = DIOSHIM_LAYOUT_VERSION;
	h->size = sizeof(*h);
}

/* The hint file of key: a user's in the segment directory, a group's in
 * its group directory. */
static int hint_path(uint64_t key, char *path, size_t cap, bool make)
{
	char dir[PATH_MAX];
	uint32_t id = (uint32_t)key;
	int n;

	if (key & HINT_GROUP_BIT) {
		if (group_dir(dir, sizeof(dir), id, make))
			return -1;
		n = snprintf(path, cap, "%s/" DIOSHIM_HINT_PREFIX "g", dir);
	} else {
		n = snprintf(path, cap, "%s/" DIOSHIM_HINT_PREFIX "%u",
			     config.shm_dir, (unsigned)id);
	}
	return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* Map the hint of key (a uid, or HINT_GROUP_BIT | gid), making it if it
 * is missing; NULL if it is unusable. */
static struct dioshim_hint *hint_open(uint64_t key)
{
	bool group = key & HINT_GROUP_BIT;
	uint32_t id = (uint32_t)key;
	struct shm_want want = { group ? SHM_HINT_GROUP : SHM_HINT_USER, id,
				 NULL };
	struct shm_owner own = { group ? 0660 : 0600,
				 !group && id != geteuid() ? id : (uid_t)-1,
				 group ? id : (gid_t)-1 };
	struct dioshim_hint *h = NULL;
	char path[PATH_MAX];
	int tries;

	if (hint_path(key, path, sizeof(path), true))
		return NULL;
	for (tries = 0; tries < 4 && !h; tries++) {
		h = shm_open_existing(path, sizeof(*h), true, &want);
		if (!h && errno == ENOENT) {
			h = shm_create_published(path, sizeof(*h), &own,
						 hint_init, NULL, NULL);
			if (!h && errno != EEXIST)
				break;
		} else if (!h) {
			break;
		}
	}
	if (h && (h->magic != DIOSHIM_HINT_MAGIC ||
		  h->version != DIOSHIM_LAYOUT_VERSION ||
		  h->size != sizeof(*h))) {
		munmap(h, sizeof(*h));
		h = NULL;
	}
	if (!h)
		log_msg("hint %s unusable: checking for segments on every "
			"call", path);
	return h;
}

/* The keys of the hints this process reads: its user's and its groups'. */
static int hint_my_keys(uint64_t *keys)
{
	gid_t groups[HINTS_MAX - 2];
	int n = 0, ng, i, j;

	keys[n++] = geteuid();
	keys[n++] = HINT_GROUP_BIT | getegid();
	ng = getgroups(HINTS_MAX - 2, groups);
	for (i = 0; i < ng; i++) {
		uint64_t k = HINT_GROUP_BIT | groups[i];

		for (j = 0; j < n && keys[j] != k; j++)
			;
		if (j == n)
			keys[n++] = k;
	}
	return n;
}

static bool hints_ready(void)
{
	int i, n;

	switch (__atomic_load_n(&hint_state, __ATOMIC_ACQUIRE)) {
	case HINT_READY:
		return true;
	case HINT_BROKEN:
		return false;
	}
	pthread_mutex_lock(&hint_lock);
	if (hint_state != HINT_UNTRIED)
		goto out;
	n = hint_my_keys(hint_keys);
	for (i = 0; i < n; i++) {
		hint_set[i] = hint_open(hint_keys[i]);
		if (!hint_set[i])
			break;
	}
	if (i < n) {
		while (i-- > 0)
			munmap(hint_set[i], sizeof(struct dioshim_hint));
		__atomic_store_n(&hint_state, HINT_BROKEN, __ATOMIC_RELEASE);
		goto out;
	}
	__atomic_store_n(&hint_count, n, __ATOMIC_RELEASE);
	__atomic_store_n(&hint_state, HINT_READY, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&hint_lock);
	return hint_state == HINT_READY;
}

bool hint_maybe_live(void)
{
	int i;

	if (!hints_ready())
		return true;
	for (i = 0; i < hint_count; i++)
		if (atomic_load_explicit(&hint_set[i]->live,
					 memory_order_seq_cst))
			return true;
	return false;
}

uint64_t hint_gen(void)
{
	uint64_t g = 0;
	int i;

	if (!hints_ready())
		return UINT64_MAX;
	for (i = 0; i < hint_count; i++)
		g += atomic_load_explicit(&hint_set[i]->gen,
					  memory_order_seq_cst);
	return g == UINT64_MAX ? 0 : g;
}

/* The hint of key, mapped (ours, or another user's for root). */
static struct dioshim_hint *hint_for(uint64_t key)
{
	struct dioshim_hint *h = NULL;
	int i;

	if (hints_ready())
		for (i = 0; i < hint_count; i++)
			if (hint_keys[i] == key)
				return hint_set[i];
	pthread_mutex_lock(&hint_lock);
	for (i = 0; i < HINTS_EXTRA && hint_extra[i].h; i++)
		if (hint_extra[i].key == key) {
			h = hint_extra[i].h;
			goto out;
		}
	h = hint_open(key);
	if (h && i < HINTS_EXTRA) {
		hint_extra[i].key = key;
		hint_extra[i].h = h;
	}
out:
	pthread_mutex_unlock(&hint_lock);
	return h;
}

static void hint_live_add(uint64_t key, int64_t delta)
{
	struct dioshim_hint *h = hint_for(key);

	if (!h)
		return;
	if (delta > 0)
		atomic_fetch_add_explicit(&h->gen, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&h->live, (uint64_t)delta,
				  memory_order_seq_cst);
	/* A stray decrement (a segment removed by hand) must not wrap. */
	if ((int64_t)atomic_load_explicit(&h->live, memory_order_relaxed) < 0)
		atomic_store_explicit(&h->live, 0, memory_order_relaxed);
}

/* ---- lifelines ----------------------------------------------------------- */

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
#define LIFELINES_MAX (HINTS_MAX + HINTS_EXTRA)
static struct lifeline {
	uint64_t key;
	int fd;
} lifelines[LIFELINES_MAX];
static int lifeline_n;
static pthread_mutex_t lifeline_lock = PTHREAD_MUTEX_INITIALIZER;

static int lifeline_open(uint64_t key)
{
	bool group = key & HINT_GROUP_BIT;
	struct shm_want want = { group ? SHM_HINT_GROUP : SHM_HINT_USER,
				 (uint32_t)key, NULL };
	char path[PATH_MAX];
	int fd, hi;

	if (hint_path(key, path, sizeof(path), false))
		return -1;
	fd = sys_openat(AT_FDCWD, path, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (!shm_fd_ok(fd, sizeof(struct dioshim_hint), &want)) {
		sys_close(fd);
		return -1;
	}
	/* Out of the way of the numbers a program picks for itself. */
	hi = sys_fcntl(fd, F_DUPFD_CLOEXEC, 512);
	if (hi >= 0) {
		sys_close(fd);
		fd = hi;
	}
	return fd;
}

static int lifeline_lock_byte(int fd, uint32_t token, int cmd, short type)
{
	struct flock fl = {
		.l_type = type,
		.l_whence = SEEK_SET,
		.l_start = (off_t)(DIOSHIM_LIFELINE_BASE + token),
		.l_len = 1,
	};
	int rc = (int)sys_fcntl(fd, cmd, (long)&fl);

	return rc ? rc : (cmd == F_OFD_GETLK ? fl.l_type : 0);
}

/* Hold our lifeline in the place of key (the hint must exist). */
static void lifeline_register(uint64_t key)
{
	uint32_t token = (uint32_t)(owner_self()->pidns >> 32);
	int i, fd;

	pthread_mutex_lock(&lifeline_lock);
	for (i = 0; i < lifeline_n; i++)
		if (lifelines[i].key == key)
			goto out;
	if (lifeline_n == LIFELINES_MAX)
		goto out;
	fd = lifeline_open(key);
	if (fd < 0)
		goto out;
	if (lifeline_lock_byte(fd, token, F_OFD_SETLK, F_WRLCK)) {
		log_msg("cannot hold a lifeline (%s)", strerror(errno));
		sys_close(fd);
		goto out;
	}
	lifelines[lifeline_n].key = key;
	lifelines[lifeline_n].fd = fd;
	lifeline_n++;
out:
	pthread_mutex_unlock(&lifeline_lock);
}

static bool lifeline_held(uint64_t key, uint32_t token, bool *known)
{
	int i, fd = -1, type;
	bool mine = false;

	*known = false;
	pthread_mutex_lock(&lifeline_lock);
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
	pthread_mutex_unlock(&lifeline_lock);
	if (type < 0)
		return true;
	*known = true;
	return type != F_UNLCK;
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

/* In a fork child: the inherited descriptors carry the parent's locks. */
static void lifeline_forget_inherited(void)
{
	int i;

	for (i = 0; i < lifeline_n; i++)
		sys_close(lifelines[i].fd);
	lifeline_n = 0;
	pthread_mutex_init(&lifeline_lock, NULL);
}

/*
 * The mode, owner and hint of a new segment for file id: shared with the
 * file's group when the file is group-writable and we can give the
 * segment that group; else private to the file's owner (when we are
 * root) or to us.
 */
static void seg_owner_for(const struct file_id *id, struct shm_owner *own,
			  uint64_t *hint_key)
{
	uid_t me = geteuid();

	own->uid = me == 0 ? id->uid : (uid_t)-1;
	own->gid = (gid_t)-1;
	/* Its place (segment_path_of) says the same: a group-writable
	 * file's segment is in the group's directory, the group's. */
	if (id->mode & S_IWGRP) {
		own->mode = 0660;
		own->gid = id->gid;
		*hint_key = HINT_GROUP_BIT | id->gid;
	} else {
		own->mode = 0600;
		*hint_key = me == 0 ? id->uid : me;
	}
}

/* ---- validating a segment's header ------------------------------------ */

static bool birth_matches(const struct dioshim_seg *seg,
			  const struct file_id *id)
{
	if ((seg->birth_kind == DIOSHIM_BIRTH_NONE) !=
	    (id->birth_kind == DIOSHIM_BIRTH_NONE))
		return false;
	if (id->birth_kind == DIOSHIM_BIRTH_NONE)
		return true;
	/* The generation is compared when both sides have it: an O_PATH
	 * descriptor cannot ask for it, and has btime only. */
	return seg->birth_sec == id->birth_sec &&
	       seg->birth_nsec == id->birth_nsec &&
	       (id->birth_kind != DIOSHIM_BIRTH_GEN ||
		seg->birth_kind != DIOSHIM_BIRTH_GEN ||
		seg->birth_gen == id->birth_gen);
}

/* Everything a process checks before it trusts a mapped segment. */
static bool seg_header_ok(const struct dioshim_seg *seg, uint64_t dev,
			  uint64_t ino)
{
	uint64_t eof, tail, phys;
	uint32_t state = atomic_load_explicit(&seg->state,
					      memory_order_acquire);

	if (seg->magic != DIOSHIM_SEG_MAGIC ||
	    seg->version != DIOSHIM_LAYOUT_VERSION || seg->size != SEG_SIZE ||
	    seg->dev != dev || seg->ino != ino)
		return false;
	if (state != DIOSHIM_SEG_READY && state != DIOSHIM_SEG_DEAD)
		return false;
	if (seg->blksize < 512 || seg->blksize > (1u << 20) ||
	    (seg->blksize & (seg->blksize - 1)))
		return false;
	eof = atomic_load(&seg->eof);
	tail = atomic_load(&seg->tail);
	phys = atomic_load(&seg->phys);
	return eof <= phys && eof <= tail && phys <= (uint64_t)INT64_MAX &&
	       tail <= (uint64_t)INT64_MAX &&
	       atomic_load(&seg->users) <= DIOSHIM_MAX_PROCS &&
	       atomic_load(&seg->slots_hi) <= DIOSHIM_MAX_PROCS;
}

/* ---- attach slots (under attach_lock) --------------------------------- */

static void slot_reset(struct dioshim_slot *s)
{
	int i;

	for (i = 0; i < DIOSHIM_SLOT_SHARDS; i++)
		atomic_store(&s->shard[i].inflight, 0);
	atomic_store(&s->async_inflight, 0);
}

bool async_in_flight(struct dioshim_seg *seg)
{
	int i, n = seg_slots(seg);

	for (i = 0; i < n; i++) {
		struct dioshim_slot *s = &seg->slot[i];
		uint64_t o = atomic_load(&s->owner.pid_start);

		if (o && atomic_load(&s->async_inflight) &&
		    owner_alive_in(seg->hint_key, o, s->owner.pidns))
			return true;
	}
	return false;
}

/*
 * Make slot i usable: allocate the pages up to its end before anything
 * touches them, so that a full directory is a refused attach, never a
 * SIGBUS.  MADV_POPULATE_WRITE allocates and reports ENOMEM instead of
 * faulting.  Under attach_lock.
 */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
static bool slot_back(struct dioshim_seg *seg, int i)
{
	uint32_t hi = atomic_load(&seg->slots_hi);
	uintptr_t from, to;

	if ((uint32_t)i < hi)
		return true;
	from = (uintptr_t)&seg->slot[hi] & ~(uintptr_t)4095;
	to = ((uintptr_t)&seg->slot[i + 1] + 4095) & ~(uintptr_t)4095;
	if (madvise((void *)from, to - from, MADV_POPULATE_WRITE)) {
		log_msg("cannot allocate attach slot %d (%s)", i,
			strerror(errno));
		return false;
	}
	atomic_store_explicit(&seg->slots_hi, (uint32_t)i + 1,
			      memory_order_release);
	return true;
}

/*
 * Free slot i if its owner is still o: a CAS, so that two who find the
 * same dead owner (a drain, an attacher) free it once.  The counters stay
 * as they were: the next claimer zeroes them before it publishes itself.
 */
static bool slot_free_if(struct dioshim_seg *seg, int i, uint64_t o)
{
	if (!o || !atomic_compare_exchange_strong(
			  &seg->slot[i].owner.pid_start, &o, 0))
		return false;
	atomic_fetch_sub(&seg->users, 1);
	return true;
}

bool slot_free_dead(struct dioshim_seg *seg, int i, uint64_t o)
{
	return slot_free_if(seg, i, o);
}

static int slot_claim(struct dioshim_seg *seg)
{
	int i, n = seg_slots(seg), free_slot = -1;

	for (i = 0; i < n; i++) {
		struct dioshim_slot *s = &seg->slot[i];

		if (owner_is_self(&s->owner)) {
			/* Left by the image we exec'd from: start clean, under
			 * this image's lifeline. */
			slot_reset(s);
			lifeline_register(seg->hint_key);
			owner_set_self(&s->owner);
			return i;
		}
		if (free_slot < 0 && !atomic_load(&s->owner.pid_start))
			free_slot = i;
	}
	if (free_slot < 0 && n < DIOSHIM_MAX_PROCS)
		free_slot = n; /* a new slot, backed below */
	if (free_slot < 0) {
		for (i = 0; i < n && free_slot < 0; i++) {
			struct dioshim_slot *s = &seg->slot[i];
			uint64_t o = atomic_load(&s->owner.pid_start);

			if (!owner_alive_in(seg->hint_key, o, s->owner.pidns) &&
			    slot_free_if(seg, i, o))
				free_slot = i;
		}
	}
	if (free_slot < 0 || !slot_back(seg, free_slot))
		return -1;
	/* Counters are zeroed before the owner is published: a drainer that
	 * sees our owner word sees our zeroed counters. */
	slot_reset(&seg->slot[free_slot]);
	lifeline_register(seg->hint_key);
	owner_set_self(&seg->slot[free_slot].owner);
	atomic_fetch_add(&seg->users, 1);
	return free_slot;
}

static void slot_release(struct dioshim_seg *seg, int i)
{
	if (i < 0 || i >= seg_slots(seg))
		return;
	slot_free_if(seg, i, atomic_load(&seg->slot[i].owner.pid_start));
}

/* Is any process other than slot `self` still attached?  Frees the slots
 * of dead processes on the way. */
static bool others_alive(struct dioshim_seg *seg, int self)
{
	int i, n = seg_slots(seg);

	for (i = 0; i < n; i++) {
		struct dioshim_slot *s = &seg->slot[i];
		uint64_t o = atomic_load(&s->owner.pid_start);

		if (i == self || !o)
			continue;
		if (owner_alive_in(seg->hint_key, o, s->owner.pidns))
			return true;
		slot_free_if(seg, i, o);
	}
	return false;
}

/* Is any attached process alive?  Reads only: no lock needed. */
static bool any_live_owner(struct dioshim_seg *seg)
{
	int i, n = seg_slots(seg);

	for (i = 0; i < n; i++) {
		uint64_t o = atomic_load(&seg->slot[i].owner.pid_start);

		if (o && owner_alive_in(seg->hint_key, o, seg->slot[i].owner.pidns))
			return true;
	}
	return false;
}

/*
 * attach_lock, which every attach and detach takes and holds only briefly.
 * If it cannot be had in ATTACH_TIMEOUT_SEC and no attached process is
 * alive, its word is garbage (nobody alive can hold it): it is made anew.
 */
#define ATTACH_TIMEOUT_SEC 2
static bool attach_lock_take(struct dioshim_seg *seg)
{
	bool recovered;
	int rc = seg_lock_for(&seg->attach_lock, &recovered,
			      ATTACH_TIMEOUT_SEC);

	if (!rc)
		return true;
	if (any_live_owner(seg)) {
		/* Hundreds of processes attaching at once queue here; one
		 * that gives up would write beside the others' reservation. */
		rc = seg_lock_for(&seg->attach_lock, &recovered,
				  LOCK_TIMEOUT_SEC);
		if (!rc)
			return true;
		log_msg("attach lock held too long (%s): passing through",
			strerror(rc));
		return false;
	}
	log_msg("attach lock unusable with no live user: re-made");
	robust_init(&seg->attach_lock);
	return seg_lock_for(&seg->attach_lock, &recovered, 1) == 0;
}

/*
 * First live user of a segment whose previous users all died: the words
 * may be behind the kernel (a writer killed between fallocate and storing
 * phys), so phys is re-read and the rest pulled inside it.
 */
static void seg_resync(struct dioshim_seg *seg, int fd)
{
	/* phys from the kernel's size, eof and tail inside it (or at the
	 * end of data written past eof), the record made to match. */
	recover_words(seg, fd);
	atomic_store(&seg->barrier, 0);
}

/*
 * The first live user of a segment — its creator, or the first to join
 * one whose users all died — before anyone else may use it (it holds
 * attach_lock): cut what a crash left past the recorded EOF, then start
 * the words from the kernel's size.  A segment of dead users is no more
 * trusted than none: its words may be ahead of what reached the disk
 * (the filesystem went down with them), while the record and the data
 * are what the disk says.  Its eof only says where, inside the last
 * block of data past the record, the size of a kill -9 was.
 */
static void seg_recover(struct dioshim_seg *seg, int fd)
{
	struct recover_hint hint = {
		.eof = atomic_load(&seg->eof),
		.rec_eof = atomic_load(&seg->recorded_eof),
		.rec_phys = atomic_load(&seg->recorded_phys),
	};
	struct stat st;

	if (recover_fd_hint(fd, seg_blksize(seg), &hint, &recover_last) ==
	    RECOVER_FAILED) {
		log_msg("recovery failed (%s): keeping the segment's eof",
			strerror(errno));
		seg_resync(seg, fd);
		return;
	}
	if (sys_fstat(fd, &st))
		return;
	atomic_store(&seg->eof, (uint64_t)st.st_size);
	atomic_store(&seg->tail, (uint64_t)st.st_size);
	atomic_store(&seg->phys, (uint64_t)st.st_size);
	atomic_store(&seg->synced_eof, (uint64_t)st.st_size);
	atomic_store(&seg->recorded_eof, 0);
	atomic_store(&seg->recorded_phys, 0);
	/* Nobody alive holds or waits on anything here: everything the dead
	 * left — locks, barrier, policy, group-commit state — starts over,
	 * whatever its words say. */
	atomic_store(&seg->flags, 0);
	atomic_store(&seg->barrier, 0);
	atomic_store(&seg->barrier_waiters, 0);
	atomic_store(&seg->publish_waiters, 0);
	memset((void *)seg->done, 0, sizeof(seg->done));
	memset((void *)seg->stripe, 0, sizeof(seg->stripe));
	memset((void *)seg->prefill, 0, sizeof(seg->prefill));
	robust_init(&seg->barrier_lock);
	robust_init(&seg->ext_lock);
	robust_init(&seg->commit_lock);
	seg->chunk = config.reserve;
	seg->last_reserve_ns = 0;
	seg->last_reserve_phys = 0;
	seg->keep_lo = seg->keep_hi = 0;
	atomic_store(&seg->sync_seq, 0);
	atomic_store(&seg->sync_done, 0);
	atomic_store(&seg->sync_done_full, 0);
	atomic_store(&seg->sync_err_seq, 0);
}

/* ---- the process's list of attached files ---------------------------- */

static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shim_file *files_head, *files_free;

/*
 * Segments are unmapped late: a thread that read a segment pointer just
 * before another thread closed the last fd of the file (a race the
 * application should not have, but may) touches a mapping that still
 * exists.  The oldest of GRAVE_SIZE retired mappings is the one unmapped.
 */
#define GRAVE_SIZE 64
static struct dioshim_seg *grave[GRAVE_SIZE];
static struct shim_file *grave_file[GRAVE_SIZE];
static unsigned grave_next;

static void grave_push(struct shim_file *f)
{
	unsigned i = grave_next++ % GRAVE_SIZE;

	if (grave[i]) {
		munmap(grave[i], SEG_SIZE);
		grave_file[i]->next = files_free;
		files_free = grave_file[i];
	}
	grave[i] = f->seg;
	grave_file[i] = f;
}

static struct shim_file *file_new(void)
{
	struct shim_file *f = files_free;

	if (f)
		files_free = f->next;
	else
		f = mem_alloc(sizeof(*f));
	if (f)
		memset(f, 0, sizeof(*f));
	return f;
}

struct seg_init_arg {
	const struct file_id *id;
	int fd;
	int *slot;
	uint64_t hint_key;
};

/* Where fd's file is, for `dioshim gc`; empty if it has no name. */
static void seg_note_path(struct dioshim_seg *seg, int fd)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = syscall(SYS_readlinkat, AT_FDCWD, link, seg->path,
		    sizeof(seg->path) - 1);
	if (n <= 0 || n >= (ssize_t)sizeof(seg->path) - 1 ||
	    seg->path[0] != '/' || strstr(seg->path, " (deleted)"))
		n = 0;
	seg->path[n] = '\0';
}

static void seg_init_undo(void *map)
{
	pthread_mutex_unlock(&((struct dioshim_seg *)map)->attach_lock);
}

static void seg_init(void *map, const void *argp)
{
	const struct seg_init_arg *arg = argp;
	const struct file_id *id = arg->id;
	struct dioshim_seg *seg = map;

	seg->magic = DIOSHIM_SEG_MAGIC;
	seg->version = DIOSHIM_LAYOUT_VERSION;
	seg->size = SEG_SIZE;
	seg->dev = id->dev;
	seg->ino = id->ino;
	seg->birth_kind = id->birth_kind;
	seg->birth_sec = id->birth_sec;
	seg->birth_nsec = id->birth_nsec;
	seg->birth_gen = id->birth_gen;
	seg->hint_key = arg->hint_key;
	seg->fs_magic = id->fs_bit;
	seg->blksize = id->blksize;
	atomic_store(&seg->eof, id->size);
	atomic_store(&seg->tail, id->size);
	atomic_store(&seg->phys, id->size);
	atomic_store(&seg->synced_eof, id->size);
	seg->chunk = config.reserve;
	atomic_store(&seg->prefill_chunk, prefill_initial_chunk(id->fs_bit));
	rangelock_init(seg);
	robust_init(&seg->barrier_lock);
	robust_init(&seg->ext_lock);
	robust_init(&seg->attach_lock);
	robust_init(&seg->commit_lock);
	/* Held until the creator has recovered the file: an attacher that
	 * finds the new segment waits for it in seg_join. */
	pthread_mutex_lock(&seg->attach_lock);
	seg_note_path(seg, arg->fd);
	owner_set_self(&seg->creator);
	*arg->slot = 0;
	lifeline_register(arg->hint_key);
	/* The first page of slots was allocated with the head. */
	atomic_store(&seg->slots_hi, 4096 / sizeof(struct dioshim_slot));
	owner_set_self(&seg->slot[0].owner);
	atomic_store(&seg->users, 1);
	atomic_store_explicit(&seg->state, DIOSHIM_SEG_READY,
			      memory_order_release);
}

/*
 * Attach to the segment at path (mapped as seg), under its attach_lock.
 * Returns the slot, -1 to give up, -2 to start over (the segment died).
 */
static int seg_join(struct dioshim_seg *seg, const char *path,
		    const struct file_id *id, int fd)
{
	int slot;

	if (!attach_lock_take(seg))
		return -1;
	if (atomic_load(&seg->state) == DIOSHIM_SEG_DEAD) {
		seg_unlock(&seg->attach_lock);
		return -2;
	}
	if (!birth_matches(seg, id)) {
		/* The inode number was reused; the old file's segment may
		 * go only when nobody holds the old file open. */
		if (others_alive(seg, -1)) {
			seg_unlock(&seg->attach_lock);
			log_msg("%s: belongs to an older file still open "
				"elsewhere: passing through", path);
			return -1;
		}
		atomic_store(&seg->state, DIOSHIM_SEG_DEAD);
		sys_unlink(path);
		hint_live_add(seg->hint_key, -1);
		seg_unlock(&seg->attach_lock);
		return -2;
	}
	if (!others_alive(seg, -1))
		seg_recover(seg, fd);
	slot = slot_claim(seg);
	seg_unlock(&seg->attach_lock);
	if (slot < 0)
		log_msg("%s: all %d attach slots taken: passing through", path,
			DIOSHIM_MAX_PROCS);
	return slot;
}

/* Whether a segment of id exists where it would be had the file's group
 * write bit been the other way (a chmod while it was served). */
static bool other_place_taken(const struct file_id *id)
{
	struct shm_want want = { SHM_SEG_ANY, 0, NULL };
	struct dioshim_seg *seg;
	char path[PATH_MAX];
	bool taken;

	if (segment_path_of(path, sizeof(path), id->dev, id->ino,
			    id->mode ^ S_IWGRP, id->gid, false))
		return false;
	seg = shm_open_existing(path, SEG_SIZE, false, &want);
	if (!seg)
		return false;
	/* Only a live segment of this very file counts: a stale or
	 * planted file there costs nothing. */
	taken = seg_header_ok(seg, id->dev, id->ino) &&
		atomic_load(&seg->state) == DIOSHIM_SEG_READY &&
		birth_matches(seg, id) && any_live_owner(seg);
	munmap(seg, SEG_SIZE);
	return taken;
}

struct shim_file *segment_attach(int fd, const struct file_id *id, bool create)
{
	char path[PATH_MAX];
	struct dioshim_seg *seg = NULL;
	struct shim_file *f;
	int slot = -1, tries;

	if (segment_path_of(path, sizeof(path), id->dev, id->ino, id->mode,
			    id->gid, create))
		return NULL;
	pthread_mutex_lock(&files_lock);
	for (f = files_head; f; f = f->next) {
		if (f->dev == id->dev && f->ino == id->ino &&
		    !f->exec_released && birth_matches(f->seg, id)) {
			f->refs++;
			goto out;
		}
	}
	for (tries = 0; tries < 8; tries++) {
		struct shm_want want = { SHM_SEG_FILE, 0, id };

		seg = shm_open_existing(path, SEG_SIZE, true, &want);
		if (!seg && errno == ENOENT) {
			struct seg_init_arg arg = { id, fd, &slot, 0 };
			struct shm_owner own;

			if (!create)
				break;
			if (other_place_taken(id)) {
				log_msg("%s: the file's mode changed while a "
					"segment serves it elsewhere: passing "
					"through", path);
				break;
			}
			seg_owner_for(id, &own, &arg.hint_key);
			hint_live_add(arg.hint_key, 1);
			seg = shm_create_published(path, SEG_SIZE, &own,
						   seg_init, seg_init_undo,
						   &arg);
			if (seg) {
				seg_recover(seg, fd);
				seg_unlock(&seg->attach_lock);
				break;
			}
			hint_live_add(arg.hint_key, -1);
			if (errno == EEXIST)
				continue;
			log_msg("%s: cannot create (%s): passing through", path,
				strerror(errno));
			break;
		}
		if (!seg) {
			log_msg("%s: cannot open (%s): passing through", path,
				strerror(errno));
			break;
		}
		if (!seg_header_ok(seg, id->dev, id->ino)) {
			log_msg("%s: corrupt or foreign segment: passing "
				"through", path);
			munmap(seg, SEG_SIZE);
			seg = NULL;
			break;
		}
		slot = seg_join(seg, path, id, fd);
		if (slot >= 0)
			break;
		munmap(seg, SEG_SIZE);
		seg = NULL;
		if (slot == -1)
			break;
	}
	f = NULL;
	if (!seg)
		goto out;
	f = file_new();
	if (!f) {
		/* Give the slot back: we could not track it. */
		if (attach_lock_take(seg)) {
			slot_release(seg, slot);
			seg_unlock(&seg->attach_lock);
		}
		munmap(seg, SEG_SIZE);
		goto out;
	}
	f->seg = seg;
	f->dev = id->dev;
	f->ino = id->ino;
	f->fs_bit = id->fs_bit;
	f->slot = slot;
	f->refs = 1;
	f->next = files_head;
	files_head = f;
out:
	pthread_mutex_unlock(&files_lock);
	return f;
}

/* Detach f (its last reference is gone); files_lock held. */
static void file_detach(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	struct shim_file **pp;
	char path[PATH_MAX];

	for (pp = &files_head; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	if (attach_lock_take(seg)) {
		slot_release(seg, f->slot); /* none, for a slotless child */
		/* A segment already dead (its last user left it at exec) is
		 * not ours to unlink: the name may be a new segment's. */
		if (atomic_load(&seg->state) != DIOSHIM_SEG_DEAD &&
		    !others_alive(seg, -1) && reserve_trim(f, fd) &&
		    !seg_path_of(seg, path, sizeof(path))) {
			atomic_store(&seg->state, DIOSHIM_SEG_DEAD);
			sys_unlink(path);
			hint_live_add(seg->hint_key, -1);
		}
		seg_unlock(&seg->attach_lock);
	}
	grave_push(f);
}

/*
 * exec: the new image is another program, maybe not under the shim; it
 * keeps the descriptors, not our books.  Leave the file as a process that
 * ends would: wait (briefly) for this process's writes in flight — exec
 * is about to kill the threads that made them — give the slot back, and,
 * as the last user, cut the reserved tail and remove the segment.  A new
 * image under the shim attaches again on first use.  f->slot is -1 until
 * segment_exec_undo.
 */
void segment_exec_release(struct shim_file *f, int fd)
{
	static const struct timespec nap = { 0, 1000000 };
	struct dioshim_seg *seg = f->seg;
	char path[PATH_MAX];
	int i, waited;

	pthread_mutex_lock(&files_lock);
	if (f->slot < 0 || f->exec_released)
		goto out;
	for (waited = 0; waited < 2000; waited++) {
		int64_t n = 0;

		for (i = 0; i < DIOSHIM_SLOT_SHARDS; i++)
			n += atomic_load(&seg->slot[f->slot].shard[i].inflight);
		if (n <= 0)
			break;
		nanosleep(&nap, NULL);
	}
	if (!attach_lock_take(seg))
		goto out;
	slot_release(seg, f->slot);
	f->slot = -1;
	f->exec_released = true;
	if (!others_alive(seg, -1) && reserve_trim(f, fd) &&
	    !seg_path_of(seg, path, sizeof(path))) {
		atomic_store(&seg->state, DIOSHIM_SEG_DEAD);
		sys_unlink(path);
		hint_live_add(seg->hint_key, -1);
	}
	seg_unlock(&seg->attach_lock);
out:
	pthread_mutex_unlock(&files_lock);
}

bool segment_exec_undo(struct shim_file *f)
{
	struct dioshim_seg *seg = f->seg;
	bool ok = false;
	int slot;

	pthread_mutex_lock(&files_lock);
	if (!f->exec_released) {
		ok = true;
		goto out;
	}
	if (!attach_lock_take(seg))
		goto out;
	if (atomic_load(&seg->state) == DIOSHIM_SEG_READY) {
		slot = slot_claim(seg);
		if (slot >= 0) {
			f->exec_released = false;
			__atomic_store_n(&f->slot, slot, __ATOMIC_RELEASE);
			ok = true;
		}
	}
	seg_unlock(&seg->attach_lock);
out:
	pthread_mutex_unlock(&files_lock);
	return ok;
}

void segment_get(struct shim_file *f)
{
	pthread_mutex_lock(&files_lock);
	f->refs++;
	pthread_mutex_unlock(&files_lock);
}

void segment_put(struct shim_file *f, int fd)
{
	pthread_mutex_lock(&files_lock);
	if (--f->refs == 0)
		file_detach(f, fd);
	pthread_mutex_unlock(&files_lock);
}

void segment_atfork_prepare(void)
{
	/* The order every path takes them in: files_lock -> hint_lock. */
	pthread_mutex_lock(&files_lock);
	pthread_mutex_lock(&hint_lock);
}

void segment_atfork_parent(void)
{
	pthread_mutex_unlock(&files_lock);
	pthread_mutex_unlock(&hint_lock);
}

void segment_atfork_child(void)
{
	struct shim_file *f, **pp;

	pthread_mutex_unlock(&files_lock);
	pthread_mutex_unlock(&hint_lock);
	owner_refresh();
	lifeline_forget_inherited();
	pthread_mutex_lock(&files_lock);
	/* The child holds the parent's fds: it is a user of each file too. */
	for (pp = &files_head; (f = *pp);) {
		int slot = -1;

		if (attach_lock_take(f->seg)) {
			slot = slot_claim(f->seg);
			seg_unlock(&f->seg->attach_lock);
		}
		if (slot < 0) {
			/* Keep the mapping (ofds point here) but stop using
			 * the parent's slot: the child passes through. */
			log_msg("fork: no slot for the child: passing through");
			f->slot = -1;
		} else {
			f->slot = slot;
		}
		pp = &f->next;
	}
	pthread_mutex_unlock(&files_lock);
}

/* Give back, in one segment, the slots that name this process. */
static void reclaim_self_in(const char *path)
{
	struct shm_want want = { SHM_SEG_ANY, 0, NULL };
	struct dioshim_seg *seg = shm_open_existing(path, SEG_SIZE, true,
						    &want);
	int i;

	if (!seg)
		return;
	if (seg->magic == DIOSHIM_SEG_MAGIC &&
	    seg->version == DIOSHIM_LAYOUT_VERSION && seg->size == SEG_SIZE &&
	    attach_lock_take(seg)) {
		int n = seg_slots(seg);

		for (i = 0; i < n; i++)
			if (owner_is_self(&seg->slot[i].owner))
				slot_release(seg, i);
		rangelock_release_self(seg);
		seg_unlock(&seg->attach_lock);
	}
	munmap(seg, SEG_SIZE);
}

/*
 * exec keeps the pid and the start time, so slots the previous image held
 * still look alive — and exec killed its other threads, perhaps with writes
 * counted in flight, which would hold every barrier up until we exit.  At
 * load, nothing of ours is attached yet: any slot naming us is stale.  The
 * files stay open across exec only if inherited; the new image re-attaches
 * to them on first use.
 */
/*
 * Call fn with the path of every segment in dir and, at the top level,
 * in every group directory there (one level down).
 */
static void scan_segments(const char *dir, bool top, void (*fn)(const char *))
{
	char buf[4096], path[PATH_MAX];
	size_t plen = strlen(DIOSHIM_SEG_PREFIX);
	size_t glen = strlen(DIOSHIM_GROUP_PREFIX);
	long n, off;
	int dfd;

	dfd = sys_openat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (dfd < 0)
		return;
	while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
		for (off = 0; off < n;) {
			struct linux_dirent64 {
				uint64_t d_ino;
				int64_t d_off;
				unsigned short d_reclen;
				unsigned char d_type;
				char d_name[];
			} *d = (void *)(buf + off);
			bool group;

			off += d->d_reclen;
			group = top && !strncmp(d->d_name,
						DIOSHIM_GROUP_PREFIX, glen);
			if (!group &&
			    (strncmp(d->d_name, DIOSHIM_SEG_PREFIX, plen) ||
			     strstr(d->d_name, ".tmp")))
				continue;
			if (snprintf(path, sizeof(path), "%s/%s", dir,
				     d->d_name) >= (int)sizeof(path))
				continue;
			if (group)
				scan_segments(path, false, fn);
			else
				fn(path);
		}
	}
	sys_close(dfd);
}

void segment_reclaim_self(void)
{
	/* Nothing to do unless some segment exists: the common case costs
	 * one load of the hint. */
	if (!hint_maybe_live())
		return;
	scan_segments(config.shm_dir, true, reclaim_self_in);
}

void segment_scan(void (*fn)(const char *))
{
	scan_segments(config.shm_dir, true, fn);
}

/* ---- the dioshim command: gc and users -------------------------------- */

int segment_live_users(struct dioshim_seg *seg)
{
	int i, n = 0, hi = seg_slots(seg);

	for (i = 0; i < hi; i++) {
		uint64_t o = atomic_load(&seg->slot[i].owner.pid_start);

		if (o && owner_alive_in(seg->hint_key, o, seg->slot[i].owner.pidns))
			n++;
	}
	return n;
}

enum gc_verdict segment_gc(const char *segpath, char *file, size_t cap)
{
	struct shm_want want = { SHM_SEG_ANY, 0, NULL };
	struct dioshim_seg *seg = shm_open_existing(segpath, SEG_SIZE, true,
						    &want);
	enum gc_verdict v;

	file[0] = '\0';
	if (!seg)
		return GC_FOREIGN;
	if (seg->magic != DIOSHIM_SEG_MAGIC ||
	    seg->version != DIOSHIM_LAYOUT_VERSION || seg->size != SEG_SIZE ||
	    !attach_lock_take(seg)) {
		munmap(seg, SEG_SIZE);
		return GC_FOREIGN;
	}
	memcpy(file, seg->path, cap < sizeof(seg->path) ? cap : sizeof(seg->path));
	file[cap - 1] = '\0';
	if (atomic_load(&seg->state) != DIOSHIM_SEG_DEAD &&
	    others_alive(seg, -1)) {
		v = GC_IN_USE;
	} else if (atomic_load(&seg->state) == DIOSHIM_SEG_DEAD ||
		   (atomic_load(&seg->phys) <= atomic_load(&seg->eof) &&
		    !atomic_load(&seg->recorded_phys))) {
		/* Nothing reserved: the segment is all there is to remove. */
		if (atomic_load(&seg->state) != DIOSHIM_SEG_DEAD)
			hint_live_add(seg->hint_key, -1);
		atomic_store(&seg->state, DIOSHIM_SEG_DEAD);
		sys_unlink(segpath);
		v = GC_REMOVED;
	} else {
		/* A tail to cut: that needs the file (segment_attach then
		 * segment_put, by the caller). */
		v = GC_NEEDS_FILE;
	}
	seg_unlock(&seg->attach_lock);
	munmap(seg, SEG_SIZE);
	return v;
}

bool segment_exists(const struct stat *file)
{
	char path[PATH_MAX];
	struct stat st;

	return !segment_path_of(path, sizeof(path), file->st_dev,
				file->st_ino, file->st_mode, file->st_gid,
				false) &&
	       syscall(SYS_newfstatat, AT_FDCWD, path, &st,
		       AT_SYMLINK_NOFOLLOW) == 0;
}

/* ---- read-only access: stat(path) and the dioshim command ------------- */

struct dioshim_seg *segment_map_path(const char *path, bool writable)
{
	struct shm_want want = { SHM_SEG_ANY, 0, NULL };
	struct dioshim_seg *seg = shm_open_existing(path, SEG_SIZE, writable,
						    &want);

	if (!seg)
		return NULL;
	if (seg->magic != DIOSHIM_SEG_MAGIC ||
	    seg->version != DIOSHIM_LAYOUT_VERSION || seg->size != SEG_SIZE) {
		munmap(seg, SEG_SIZE);
		errno = EPROTO;
		return NULL;
	}
	return seg;
}

void segment_unmap(struct dioshim_seg *seg)
{
	munmap(seg, SEG_SIZE);
}

bool segment_peek_eof(const struct stat *st, const char *path, int dirfd,
		      int at_flags, uint64_t *eof)
{
	char name[PATH_MAX];
	struct file_id fid;
	struct shm_want want = { SHM_SEG_FILE, 0, &fid };
	struct dioshim_seg *seg;
	struct statx stx;
	bool ok;

	if (segment_path_of(name, sizeof(name), st->st_dev, st->st_ino,
			    st->st_mode, st->st_gid, false))
		return false;
	fid.uid = st->st_uid;
	fid.gid = st->st_gid;
	fid.mode = st->st_mode;
	seg = shm_open_existing(name, SEG_SIZE, false, &want);
	if (!seg)
		return false;
	ok = seg_header_ok(seg, st->st_dev, st->st_ino) &&
	     atomic_load(&seg->state) == DIOSHIM_SEG_READY;
	/* By path, btime is what can be had without opening the file;
	 * an inode is reused only once nobody holds it open, so a live
	 * segment (READY) with a matching btime is this file's. */
	if (ok && seg->birth_kind != DIOSHIM_BIRTH_NONE) {
		ok = path &&
		     sys_statx(dirfd, path,
			       at_flags & (AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH),
			       STATX_BTIME, &stx) == 0 &&
		     (stx.stx_mask & STATX_BTIME) &&
		     stx.stx_btime.tv_sec == seg->birth_sec &&
		     stx.stx_btime.tv_nsec == seg->birth_nsec;
	}
	if (ok) {
		*eof = atomic_load_explicit(&seg->eof, memory_order_acquire);
		/* The kernel's size bounds every answer: a segment never
		 * makes a file look longer than it is. */
		if (*eof > (uint64_t)st->st_size)
			*eof = (uint64_t)st->st_size;
	}
	munmap(seg, SEG_SIZE);
	return ok;
}

/* ---- identifying a file ------------------------------------------------ */

bool file_identify(int fd, struct file_id *id)
{
	struct statx stx;
	struct statfs sfs;

	if (sys_statx(fd, "", AT_EMPTY_PATH,
		      STATX_TYPE | STATX_MODE | STATX_UID | STATX_GID |
			      STATX_INO | STATX_SIZE | STATX_BTIME,
		      &stx))
		return false;
	if (!S_ISREG(stx.stx_mode))
		return false;
	if (stx.stx_attributes &
	    (STATX_ATTR_APPEND | STATX_ATTR_IMMUTABLE))
		return false;
	if (sys_fstatfs(fd, &sfs))
		return false;
	id->fs_bit = config_fs_bit(sfs.f_type);
	if (!(id->fs_bit & config.fs_mask))
		return false;
	id->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	id->ino = stx.stx_ino;
	id->uid = stx.stx_uid;
	id->gid = stx.stx_gid;
	id->mode = stx.stx_mode;
	id->size = stx.stx_size;
	id->blksize = stx.stx_blksize;
	if (id->blksize < 512 || id->blksize > (1u << 20) ||
	    (id->blksize & (id->blksize - 1)))
		id->blksize = 4096;
	id->birth_kind = DIOSHIM_BIRTH_NONE;
	id->birth_sec = 0;
	id->birth_nsec = 0;
	id->birth_gen = 0;
	if (stx.stx_mask & STATX_BTIME) {
		unsigned int gen;

		id->birth_kind = DIOSHIM_BIRTH_BTIME;
		id->birth_sec = stx.stx_btime.tv_sec;
		id->birth_nsec = stx.stx_btime.tv_nsec;
		if (syscall(SYS_ioctl, fd, FS_IOC_GETVERSION, &gen) == 0) {
			id->birth_kind = DIOSHIM_BIRTH_GEN;
			id->birth_gen = gen;
		}
	}
	return true;
}
