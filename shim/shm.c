// SPDX-License-Identifier: MIT
/*
 * Shared files: where a segment or a hint lives (the segment directory, or
 * a group's directory in it) and its name, who may own it, allocating its
 * pages before they are touched, publishing it complete; the walk over
 * the segments; the OFD byte locks taken on shared files.
 *
 * Layer L1, its bottom: calls only L0 (config, log, sys).  Takes no lock.
 */
#define _GNU_SOURCE
#include "shm.h"

#include "config.h"
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/sysmacros.h>
#include <sys/mman.h>
#include <time.h>

/* ---- shared files: naming, checking, publishing ----------------------- */

/* The one format of a segment's name (segment_name_parse reads it):
 * "<dir>/dioshim.<dev>.<ino>", in hex. */
static int segment_name(char *buf, size_t cap, const char *dir, uint64_t dev,
			uint64_t ino)
{
	int n = snprintf(buf, cap, "%s/" DIOSHIM_SEG_PREFIX "%llx.%llx", dir,
			 (unsigned long long)dev, (unsigned long long)ino);

	return n > 0 && (size_t)n < cap ? 0 : -1;
}

int segment_path(char *buf, size_t cap, uint64_t dev, uint64_t ino)
{
	return segment_name(buf, cap, config.shm_dir, dev, ino);
}

/*
 * A group's directory, <shm_dir>/dioshim-g<gid>: the segments of its
 * group-writable files, and its hint.  0770 and the group's, without the
 * sticky bit, so that whichever member is the last user of a file can
 * remove the segment another member made.  Only a member (or root) can
 * give a directory that group; a look-alike planted under the name makes
 * the group's files pass through for every member alike.
 */
int shm_group_dir(char *buf, size_t cap, uint32_t gid, bool make)
{
	struct stat st;
	int n = snprintf(buf, cap, "%s/" DIOSHIM_GROUP_PREFIX "%u",
			 config.shm_dir, (unsigned)gid);

	if (n <= 0 || (size_t)n >= cap)
		return -1;
	if (make && sys_mkdirat(AT_FDCWD, buf, 0700) == 0) {
		if (sys_fchownat(AT_FDCWD, buf, (uid_t)-1, (gid_t)gid,
				 AT_SYMLINK_NOFOLLOW) ||
		    sys_fchmodat(AT_FDCWD, buf, 0770)) {
			log_event(LOG_ERROR, NULL,
				  "%s: cannot give it to its group (%s)", buf,
				  strerror(errno));
			sys_unlinkat(AT_FDCWD, buf, AT_REMOVEDIR);
			return -1;
		}
	}
	if (sys_newfstatat(AT_FDCWD, buf, &st, AT_SYMLINK_NOFOLLOW))
		return -1;
	if (!S_ISDIR(st.st_mode) || st.st_gid != gid ||
	    (st.st_mode & 07777) != 0770 || shm_dir_setgid()) {
		log_once(LOG_FALLBACK, NULL,
			 "%s: not a group directory of ours: its files pass "
			 "through",
			 buf);
		errno = EPERM;
		return -1;
	}
	return 0;
}

int segment_path_of(char *buf, size_t cap, uint64_t dev, uint64_t ino,
		    uint32_t mode, uint32_t gid, bool make)
{
	char dir[PATH_MAX];

	if (!(mode & S_IWGRP))
		return segment_path(buf, cap, dev, ino);
	if (shm_group_dir(dir, sizeof(dir), gid, make))
		return -1;
	return segment_name(buf, cap, dir, dev, ino);
}

/* The name of a segment we have mapped, from its own words. */
int seg_path_of(const struct dioshim_seg *seg, char *buf, size_t cap)
{
	bool group = seg->hint_key & HINT_GROUP_BIT;

	return segment_path_of(buf, cap, seg->dev, seg->ino,
			       group ? S_IWGRP : 0, (uint32_t)seg->hint_key,
			       false);
}


/* Whether the directory hands its group to new files (then a file's
 * group no longer says who made it). */
bool shm_dir_setgid(void)
{
	static int cached = -1;
	struct stat st;
	int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);

	if (v < 0) {
		v = sys_newfstatat(AT_FDCWD, config.shm_dir, &st, 0) != 0 ||
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

bool shm_fd_ok(int fd, size_t size, const struct shm_want *w)
{
	struct stat st;

	return sys_fstat(fd, &st) == 0 && shm_stat_ok(&st, size, w);
}

/*
 * Size a shared file to size and allocate [0, backed) of it: tmpfs gives
 * fallocate a page for every hole, so no later store there can fault for
 * want of memory.  The rest stays a hole until slot_back() allocates it.
 */
static bool fsize_allows(size_t size)
{
	struct rlimit rl;

	return getrlimit(RLIMIT_FSIZE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	       size <= rl.rlim_cur;
}

static int shm_back(int fd, size_t size, size_t backed)
{
	struct stat st;
	int rc, tries = 0;

	if (sys_fstat(fd, &st))
		return -1;
	/* Past RLIMIT_FSIZE the kernel would kill the program (SIGXFSZ)
	 * for a file it never asked for: no shared file, as when /dev/shm
	 * is full. */
	if ((size_t)st.st_size < size && !fsize_allows(size)) {
		errno = EFBIG;
		return -1;
	}
	if ((size_t)st.st_size != size && sys_ftruncate(fd, (off_t)size))
		return -1;
	/* The pages of a file others made are there already: a failure to
	 * allocate them (ENOSPC, EIO) can only be for the moment, and is
	 * asked again; a refused segment is a writer that passes through. */
	do
		rc = sys_fallocate(fd, 0, 0, (off_t)backed);
	while (rc && errno != EOPNOTSUPP && errno != ENOSYS && ++tries < 4);
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

int shm_open_checked(const char *path, size_t size, bool writable,
		     const struct shm_want *want)
{
	int fd;

	fd = sys_openat(AT_FDCWD, path,
			(writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW |
				O_CLOEXEC | O_NONBLOCK,
			0);
	if (fd < 0)
		return -1;
	if (!shm_fd_ok(fd, size, want)) {
		sys_close(fd);
		log_event(LOG_ERROR, NULL,
			  "%s: not ours (owner, mode or size): ignoring it",
			  path);
		errno = EPERM;
		return -1;
	}
	return fd;
}

void *shm_open_existing(const char *path, size_t size, bool writable,
				const struct shm_want *want)
{
	int fd, err;
	void *map;

	fd = shm_open_checked(path, size, writable, want);
	if (fd < 0)
		return NULL;
	/* A file truncated and re-grown may have holes where its words are:
	 * back them now or refuse the file (ENOSPC). */
	if (writable && shm_back(fd, size, shm_backed_size(size))) {
		err = errno;
		sys_close(fd);
		log_event(LOG_ERROR, NULL,
			  "%s: cannot back it (%s): ignoring it", path,
			  strerror(err));
		errno = err;
		return NULL;
	}
	map = sys_mmap(NULL, size, PROT_READ | (writable ? PROT_WRITE : 0),
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

/*
 * The name of a shared file until it is published: NAME.tmpTID.RANDOM.
 * Not the thread number alone: that repeats in every pid namespace, and
 * two makers of one segment in two containers sharing the directory
 * would each take the other's file for a dead thread's leftover.
 */
static void tmp_name(char *tmp, size_t cap, const char *path)
{
	struct timespec ts;
	uint64_t r;

	if (sys_getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r = ((uint64_t)ts.tv_sec << 32 ^ (uint64_t)ts.tv_nsec) *
			    0x9e3779b97f4a7c15ull ^
		    (uint64_t)sys_gettid();
	}
	snprintf(tmp, cap, "%s.tmp%d.%016llx", path, (int)sys_gettid(),
		 (unsigned long long)r);
}

void *shm_create_published(const char *path, size_t size,
				  const struct shm_owner *own,
				  void (*init)(void *, const void *),
				  void (*undo)(void *), const void *arg)
{
	char tmp[PATH_MAX];
	void *map;
	int fd, err, tries = 0;

	/* Never another maker's: a name taken is some live maker's, or a
	 * leftover of a dead one (dioshim gc's to remove). */
	do {
		tmp_name(tmp, sizeof(tmp), path);
		fd = sys_openat(AT_FDCWD, tmp,
				O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
					O_CLOEXEC,
				0600);
	} while (fd < 0 && errno == EEXIST && ++tries < 4);
	if (fd < 0)
		return NULL;
	/* Owner and group before the mode widens; every page allocated
	 * before the first is touched: a full directory is ENOSPC here,
	 * never a SIGBUS in the application later (a MAP_SHARED page of
	 * tmpfs is allocated on first touch). */
	if (((own->uid != (uid_t)-1 || own->gid != (gid_t)-1) &&
	     sys_fchown(fd, own->uid, own->gid)) ||
	    sys_fchmod(fd, own->mode) ||
	    shm_back(fd, size, shm_backed_size(size)))
		goto fail_fd;
	map = sys_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		goto fail_fd;
	sys_close(fd);
	init(map, arg);
	if (sys_link(tmp, path)) {
		err = errno;
		sys_unlink(tmp);
		if (undo)
			undo(map);
		sys_munmap(map, size);
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

/* ---- names of the hints ------------------------------------------------- */

/* The hint file of key: a user's in the segment directory, a group's in
 * its group directory. */
int hint_path(uint64_t key, char *path, size_t cap, bool make)
{
	char dir[PATH_MAX];
	uint32_t id = (uint32_t)key;
	int n;

	if (key & HINT_GROUP_BIT) {
		if (shm_group_dir(dir, sizeof(dir), id, make))
			return -1;
		n = snprintf(path, cap, "%s/" DIOSHIM_HINT_PREFIX "g", dir);
	} else {
		n = snprintf(path, cap, "%s/" DIOSHIM_HINT_PREFIX "%u",
			     config.shm_dir, (unsigned)id);
	}
	return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* ---- OFD byte locks ------------------------------------------------------ */

/*
 * Whether a lock of any kind covers byte of fd's file, from /proc/locks
 * ("1: OFDLCK ADVISORY  WRITE -1 00:1b:195214 2199023255552 ..."): the
 * lock test's answer when fcntl keeps failing.  It sees this process's
 * own locks too: the byte asked about is never one we hold (another
 * process's lifeline, a guest's announcement).  F_WRLCK, F_UNLCK, or -1
 * when it cannot be read.
 */
struct lock_query {
	dev_t dev;
	ino_t ino;
	uint64_t byte;
};

/* 1 when a /proc/locks line holds a lock over the query's byte. */
static int lock_line_covers(char *line, void *arg)
{
	const struct lock_query *q = arg;
	char *tok[8], *save = NULL, *t;
	unsigned maj, min;
	unsigned long long ino;
	int k = 0;

	/* "N: KIND MODE RW PID MAJ:MIN:INO START END"; a waiter's line
	 * ("N: -> ...") holds nothing */
	for (t = strtok_r(line, " ", &save); t && k < 8;
	     t = strtok_r(NULL, " ", &save))
		tok[k++] = t;
	return k == 8 && strcmp(tok[1], "->") &&
	       sscanf(tok[5], "%x:%x:%llu", &maj, &min, &ino) == 3 &&
	       makedev(maj, min) == q->dev && ino == q->ino &&
	       q->byte >= strtoull(tok[6], NULL, 10) &&
	       (!strcmp(tok[7], "EOF") ||
		q->byte <= strtoull(tok[7], NULL, 10));
}

static int proc_locks_test(int fd, uint64_t byte)
{
	struct lock_query q = { .byte = byte };
	struct stat st;
	int found;

	if (sys_fstat(fd, &st))
		return -1;
	q.dev = st.st_dev;
	q.ino = st.st_ino;
	found = sys_each_line("/proc/locks", lock_line_covers, &q);
	return found < 0 ? -1 : found ? F_WRLCK : F_UNLCK;
}

/* An OFD lock command on byte `byte` of fd: 0 or -1 for a set, the
 * type of a conflicting lock (F_UNLCK: none) for F_OFD_GETLK. */
int shm_lock_byte(int fd, uint64_t byte, int cmd, short type)
{
	struct flock fl = {
		.l_type = type,
		.l_whence = SEEK_SET,
		.l_start = (off_t)byte,
		.l_len = 1,
	};
	/* A test made again when it fails for the moment: read as a lock
	 * held, a failed one would keep a tail no one holds; one that keeps
	 * failing is answered from /proc/locks. */
	int rc = cmd == F_OFD_GETLK
			 ? (int)SYS_TRY(sys_fcntl(fd, cmd, (long)&fl))
			 : (int)sys_fcntl(fd, cmd, (long)&fl);

	if (rc && cmd == F_OFD_GETLK) {
		int err = errno, t = proc_locks_test(fd, byte);

		errno = err;
		return t;
	}
	return rc ? rc : (cmd == F_OFD_GETLK ? fl.l_type : 0);
}

/* ---- segments: owner, the walk ------------------------------------------- */

/*
 * The mode, owner and hint of a new segment for file id: shared with the
 * file's group when the file is group-writable and we can give the
 * segment that group; else private to the file's owner (when we are
 * root) or to us.
 */
void seg_owner_for(const struct file_id *id, struct shm_owner *own,
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

/* ---- segment names and the walk over them ------------------------------ */

bool segment_name_parse(const char *name, uint64_t *dev, uint64_t *ino)
{
	unsigned long long d, i;
	int len;

	if (sscanf(name, DIOSHIM_SEG_PREFIX "%llx.%llx%n", &d, &i, &len) != 2 ||
	    name[len])
		return false;
	*dev = d;
	*ino = i;
	return true;
}

bool shm_dir_each(int dfd, char *buf, size_t cap,
		  bool (*each)(const char *name, void *arg), void *arg)
{
	long n, at;

	while ((n = sys_getdents64(dfd, buf, cap)) > 0)
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

/*
 * The walk's buffers, mapped for the one walk: the give-back of space
 * walks from a write that met ENOSPC, which may be a signal handler's on
 * a small alternate stack.  One level for the segment directory, one for
 * a group directory in it.
 */
enum { WALK_TOP, WALK_GROUP, WALK_LEVELS };
struct walk {
	struct {
		char dents[WALK_LEVELS][4096];
		char path[WALK_LEVELS][PATH_MAX];
	} *buf;
	const char *dir; /* the level above's path (or the top's) */
	int lv;
	segment_walk_fn *fn;
	void *arg;
};

static void walk_in(struct walk *w, const char *dir, int lv);

static bool walk_entry(const char *name, void *arg)
{
	struct walk *w = arg;
	char *path = w->buf->path[w->lv];
	size_t ld = strlen(w->dir), ln = strlen(name);
	uint64_t dev, ino;

	if (ld + 1 + ln >= PATH_MAX)
		return false;
	memcpy(path, w->dir, ld);
	path[ld] = '/';
	memcpy(path + ld + 1, name, ln + 1);
	if (w->lv == WALK_TOP && !strncmp(name, DIOSHIM_GROUP_PREFIX,
					  strlen(DIOSHIM_GROUP_PREFIX)))
		walk_in(w, path, WALK_GROUP);
	else if (segment_name_parse(name, &dev, &ino))
		w->fn(path, dev, ino, w->arg);
	return false;
}

/* The segments in dir (at depth lv); from the top, once into the group
 * directories (never through a link: shm_group_dir never uses one). */
static void walk_in(struct walk *from, const char *dir, int lv)
{
	struct walk w = *from;
	int dfd = sys_openat(AT_FDCWD, dir,
			     O_RDONLY | O_DIRECTORY | O_CLOEXEC |
				     (lv == WALK_TOP ? 0 : O_NOFOLLOW),
			     0);

	if (dfd < 0)
		return;
	w.dir = dir;
	w.lv = lv;
	shm_dir_each(dfd, w.buf->dents[lv], sizeof(w.buf->dents[lv]),
		     walk_entry, &w);
	sys_close(dfd);
}

bool segment_walk(segment_walk_fn *fn, void *arg)
{
	struct walk w = { .fn = fn, .arg = arg };

	w.buf = sys_mmap(NULL, sizeof(*w.buf), PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (w.buf == MAP_FAILED)
		return false;
	walk_in(&w, config.shm_dir, WALK_TOP);
	sys_munmap(w.buf, sizeof(*w.buf));
	return true;
}
