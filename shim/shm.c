// SPDX-License-Identifier: MIT
/*
 * Shared files: where a segment or a hint lives (the segment directory, or
 * a group's directory in it), who may own it, allocating its pages before
 * they are touched, publishing it complete; the hints; the lifelines.
 *
 * Lock order: files_lock (segment.c) -> hint_lock; lifeline_lock is a
 * leaf.
 */
#define _GNU_SOURCE
#include "shm.h"

#include "config.h"
#include "segment.h"
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/mman.h>
#include <sys/resource.h>

/* ---- shared files: naming, checking, publishing ----------------------- */

bool shm_dir_setgid(void);
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
	int rc, tries = 0;

	if (sys_fstat(fd, &st))
		return -1;
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
		log_msg("%s: not ours (owner, mode or size): ignoring it",
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

void *shm_create_published(const char *path, size_t size,
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

/* HINT_NODIR: the segment directory is not there, so no segment can be:
 * each look is one stat of it, and once it is back the hints are tried
 * again (a process may start before any shimmed writer made it). */
enum { HINT_UNTRIED, HINT_READY, HINT_BROKEN, HINT_NODIR };
static int hint_state;
static struct hint_entry {
	uint64_t key;
	struct dioshim_hint *h;
} hint_extra[HINTS_EXTRA];
/* hint_set and hint_count are defined in hot.c. */
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

/* Map the hint of key (a uid, or HINT_GROUP_BIT | gid), making it (and
 * its group directory) if it is missing and make says so; NULL if it is
 * unusable. */
static struct dioshim_hint *hint_open(uint64_t key, bool make)
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

	if (hint_path(key, path, sizeof(path), make))
		return NULL;
	for (tries = 0; tries < 4 && !h; tries++) {
		h = shm_open_existing(path, sizeof(*h), true, &want);
		if (!h && errno == ENOENT && make) {
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
		sys_munmap(h, sizeof(*h));
		h = NULL;
	}
	if (!h && make)
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
	/* More groups than we read hints for: no hint can say "none", and
	 * every call looks (hints_ready fails). */
	ng = getgroups(0, NULL);
	if (ng < 0 || ng > HINTS_MAX - 2)
		return -1;
	ng = getgroups(HINTS_MAX - 2, groups);
	if (ng < 0)
		return -1;
	for (i = 0; i < ng; i++) {
		uint64_t k = HINT_GROUP_BIT | groups[i];

		for (j = 0; j < n && keys[j] != k; j++)
			;
		if (j == n)
			keys[n++] = k;
	}
	return n;
}

/* Whether the segment directory is missing (keeps errno). */
static bool shm_dir_missing(void)
{
	struct statx stx;
	int saved = errno;
	bool missing = sys_statx(AT_FDCWD, config.shm_dir, 0, STATX_TYPE,
				 &stx) &&
		       (errno == ENOENT || errno == ENOTDIR);

	errno = saved;
	return missing;
}

static bool hints_ready(void)
{
	int i, n;

	switch (__atomic_load_n(&hint_state, __ATOMIC_ACQUIRE)) {
	case HINT_READY:
		return true;
	case HINT_BROKEN:
		return false;
	case HINT_NODIR:
		if (shm_dir_missing())
			return false;
		break;
	}
	pthread_mutex_lock(&hint_lock);
	if (hint_state == HINT_NODIR)
		hint_state = HINT_UNTRIED;
	if (hint_state != HINT_UNTRIED)
		goto out;
	n = hint_my_keys(hint_keys);
	if (n < 0) {
		log_msg("more than %d groups: checking for segments on every "
			"call", HINTS_MAX - 2);
		__atomic_store_n(&hint_state, HINT_BROKEN, __ATOMIC_RELEASE);
		goto out;
	}
	for (i = 0; i < n; i++) {
		hint_set[i] = hint_open(hint_keys[i], true);
		if (!hint_set[i])
			break;
	}
	if (i < n) {
		while (i-- > 0)
			sys_munmap(hint_set[i], sizeof(struct dioshim_hint));
		__atomic_store_n(&hint_state,
				 shm_dir_missing() ? HINT_NODIR : HINT_BROKEN,
				 __ATOMIC_RELEASE);
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
		return __atomic_load_n(&hint_state, __ATOMIC_ACQUIRE) !=
		       HINT_NODIR;
	for (i = 0; i < hint_count; i++)
		if (atomic_load_explicit(&hint_set[i]->live,
					 memory_order_seq_cst))
			return true;
	return false;
}

bool hint_look_slow(uint64_t *gen)
{
	if (!hints_ready()) {
		*gen = UINT64_MAX;
		return __atomic_load_n(&hint_state, __ATOMIC_ACQUIRE) !=
		       HINT_NODIR;
	}
	/* Ready: hint_count is published (a user's and a group's at
	 * least), and the inline look reads them. */
	return hint_look(gen);
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

/* key's hint among this process's own (its user's and groups'). */
static struct dioshim_hint *hint_own(uint64_t key)
{
	int i;

	if (hints_ready())
		for (i = 0; i < hint_count; i++)
			if (hint_keys[i] == key)
				return hint_set[i];
	return NULL;
}

/* key's hint, mapped (ours, or another user's for root), as it is kept;
 * else, unless look_only, opened (made if missing only when make says
 * so) and kept, or *temp when it cannot be (root past HINTS_EXTRA other
 * users). */
static struct dioshim_hint *hint_find(uint64_t key, bool look_only,
				      bool make, bool *temp)
{
	struct dioshim_hint *h = hint_own(key);
	int i;

	*temp = false;
	if (h)
		return h;
	pthread_mutex_lock(&hint_lock);
	for (i = 0; i < HINTS_EXTRA && hint_extra[i].h; i++)
		if (hint_extra[i].key == key) {
			h = hint_extra[i].h;
			goto out;
		}
	if (look_only)
		goto out;
	h = hint_open(key, make);
	if (h && i < HINTS_EXTRA) {
		hint_extra[i].key = key;
		hint_extra[i].h = h;
	} else if (h) {
		*temp = true;
	}
out:
	pthread_mutex_unlock(&hint_lock);
	return h;
}

/* The hint of key, mapped (ours, or another user's for root); *temp
 * when it is not kept (root past HINTS_EXTRA other users): the caller
 * gives it back with hint_put once done with it.  Made if missing only
 * when make says so: for a segment about to be made, never for a key
 * read from a segment (which anyone who can write it can set: a hint,
 * and a group directory, for any id). */
static struct dioshim_hint *hint_get(uint64_t key, bool make, bool *temp)
{
	return hint_find(key, false, make, temp);
}

static void hint_put(struct dioshim_hint *h, bool temp)
{
	if (temp)
		sys_munmap(h, sizeof(*h));
}

/* The hint of key if this process keeps it mapped; NULL (never a call)
 * if not. */
static struct dioshim_hint *hint_kept(uint64_t key)
{
	bool temp;

	return hint_find(key, true, false, &temp);
}

void hint_live_add(uint64_t key, int64_t delta)
{
	bool temp;
	struct dioshim_hint *h = hint_get(key, delta > 0, &temp);

	if (!h)
		return;
	if (delta > 0)
		atomic_fetch_add_explicit(&h->gen, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&h->live, (uint64_t)delta,
				  memory_order_seq_cst);
	/* A stray decrement (a segment removed by hand) must not wrap. */
	if ((int64_t)atomic_load_explicit(&h->live, memory_order_relaxed) < 0)
		atomic_store_explicit(&h->live, 0, memory_order_relaxed);
	/* No segment left: nothing is reserved, whatever the budget says
	 * (what files of killed writers counted, and no user came back to
	 * give back). */
	if (delta < 0 && !atomic_load(&h->live)) {
		int i;

		for (i = 0; i < DIOSHIM_BUDGETS; i++)
			atomic_store(&h->budget[i].reserved, 0);
	}
	hint_put(h, temp);
}

/* dev's budget word in h, claimed if dev has none yet; NULL when all are
 * taken. */
static _Atomic uint64_t *budget_in(struct dioshim_hint *h, uint64_t dev)
{
	uint64_t want = dev | DIOSHIM_BUDGET_USED, seen;
	int i;

	for (i = 0; i < DIOSHIM_BUDGETS; i++) {
		seen = atomic_load_explicit(&h->budget[i].dev,
					    memory_order_acquire);
		if (!seen && atomic_compare_exchange_strong(&h->budget[i].dev,
							    &seen, want))
			return &h->budget[i].reserved;
		if (seen == want)
			return &h->budget[i].reserved;
	}
	return NULL;
}

void hint_published(uint64_t key)
{
	bool temp;
	struct dioshim_hint *h = hint_get(key, false, &temp);

	if (!h)
		return;
	atomic_fetch_add_explicit(&h->gen, 1, memory_order_seq_cst);
	hint_put(h, temp);
}

bool hint_key_idle(uint64_t key)
{
	bool temp, idle;
	struct dioshim_hint *h = hint_get(key, false, &temp);

	if (!h)
		return false;
	idle = !atomic_load_explicit(&h->live, memory_order_seq_cst);
	hint_put(h, temp);
	return idle;
}

uint64_t hint_budget_add(uint64_t key, uint64_t dev, int64_t delta)
{
	bool temp;
	struct dioshim_hint *h = hint_get(key, false, &temp);
	_Atomic uint64_t *b = h ? budget_in(h, dev) : NULL;
	uint64_t cur = 0, want;

	if (b) {
		cur = atomic_load(b);
		/* Never below zero (a budget reset while some was held). */
		do
			want = delta >= 0 || cur > (uint64_t)-delta
				       ? cur + (uint64_t)delta
				       : 0;
		while (delta && !atomic_compare_exchange_weak(b, &cur, want));
		cur = delta ? want : cur;
	}
	if (h)
		hint_put(h, temp);
	return cur;
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
static struct lifeline {
	uint64_t key;
	int fd;
} lifelines[LIFELINES_MAX];
static int lifeline_n;

/* This process's open windows, by place: our threads share one lock
 * through one descriptor, which goes when the last of them closes its
 * window (a place past the table keeps its lock: no recount there while
 * we live, which costs only the recount).  Under lifeline_lock (hint_window_open). */
#define WINDOW_PLACES 8
static struct {
	uint64_t key;
	unsigned n;
} windows[WINDOW_PLACES];

static pthread_mutex_t lifeline_lock = PTHREAD_MUTEX_INITIALIZER;

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
static int lifeline_moved(int fd)
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
static int ofd_lock_byte(int fd, uint64_t byte, int cmd, short type)
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

static int lifeline_lock_byte(int fd, uint32_t token, int cmd, short type)
{
	return ofd_lock_byte(fd, DIOSHIM_LIFELINE_BASE + token, cmd, type);
}

/* Hold our lifeline (token) in the place of key (the hint must exist). */
void lifeline_register(uint64_t key, uint32_t token)
{
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

bool lifeline_held(uint64_t key, uint32_t token, bool *known)
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

void lifeline_evict(int fd)
{
	int i, to;

	pthread_mutex_lock(&lifeline_lock);
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
			log_msg("cannot move a lifeline off fd %d: %s", fd,
				strerror(errno));
			lifelines[i] = lifelines[--lifeline_n];
		}
		break;
	}
	pthread_mutex_unlock(&lifeline_lock);
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

	pthread_mutex_lock(&lifeline_lock);
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
	pthread_mutex_unlock(&lifeline_lock);
	return key;
}

/* key's descriptor now, or -1 (none kept, or not in this process). */
int fd_kept(uint64_t key)
{
	int i, fd = -1;

	if (!key)
		return -1;
	pthread_mutex_lock(&lifeline_lock);
	for (i = 0; i < lifeline_n; i++)
		if (lifelines[i].key == key)
			fd = lifelines[i].fd;
	pthread_mutex_unlock(&lifeline_lock);
	return fd;
}

void fd_unkeep(uint64_t key, bool close_it)
{
	int i;

	if (!key)
		return;
	pthread_mutex_lock(&lifeline_lock);
	for (i = 0; i < lifeline_n; i++) {
		if (lifelines[i].key != key)
			continue;
		if (close_it)
			sys_close(lifelines[i].fd);
		lifelines[i] = lifelines[--lifeline_n];
		keeps_n--;
		break;
	}
	pthread_mutex_unlock(&lifeline_lock);
}

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
	return ofd_lock_byte(fd, DIOSHIM_GUEST_BASE + byte, cmd, type);
}

/* A descriptor of key's place directory, out of the program's way. */
static int guest_dir_open(uint64_t key)
{
	char path[PATH_MAX];
	int fd;

	if (key & HINT_GROUP_BIT) {
		if (group_dir(path, sizeof(path), (uint32_t)key, false))
			return -1;
	} else if (snprintf(path, sizeof(path), "%s", config.shm_dir) >=
		   (int)sizeof(path)) {
		return -1;
	}
	fd = sys_openat(AT_FDCWD, path,
			O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
	return fd < 0 ? -1 : lifeline_moved(fd);
}

/* A descriptor kept with the lifelines under kept (or under also),
 * else, if open_it says so, opened by open_fn(key) and kept under kept;
 * -1 if none.  lifeline_lock held. */
static int lifeline_kept(uint64_t kept, uint64_t also, uint64_t key,
			 int (*open_fn)(uint64_t), bool open_it)
{
	int i, fd;

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

/* Our kept descriptor of key's place directory, opened on first use;
 * lifeline_lock held. */
static int guest_dir_fd(uint64_t key, bool open_it)
{
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

	pthread_mutex_lock(&lifeline_lock);
	mine = guest_find(key, guest_byte(dev, ino)) != NULL;
	pthread_mutex_unlock(&lifeline_lock);
	return mine;
}

bool guest_hold(uint64_t key, uint64_t dev, uint64_t ino)
{
	uint32_t byte = guest_byte(dev, ino);
	struct guest *g;
	bool ok = false;
	int fd;

	pthread_mutex_lock(&lifeline_lock);
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
	pthread_mutex_unlock(&lifeline_lock);
	if (!ok)
		log_msg("cannot announce a guest writer (%s)", strerror(errno));
	return ok;
}

void guest_drop(uint64_t key, uint64_t dev, uint64_t ino)
{
	struct guest *g;
	int fd;

	pthread_mutex_lock(&lifeline_lock);
	g = guest_find(key, guest_byte(dev, ino));
	if (g && --g->holds == 0) {
		fd = guest_dir_fd(key, false);
		if (fd >= 0)
			guest_lock_byte(fd, g->byte, F_OFD_SETLK, F_UNLCK);
		*g = guests[--guest_n];
	}
	pthread_mutex_unlock(&lifeline_lock);
}

bool guest_present(uint64_t key, uint64_t dev, uint64_t ino, bool ours)
{
	uint32_t byte = guest_byte(dev, ino);
	int fd, type;
	bool mine;

	pthread_mutex_lock(&lifeline_lock);
	if (ours && guest_find(key, byte)) {
		pthread_mutex_unlock(&lifeline_lock);
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
	pthread_mutex_unlock(&lifeline_lock);
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

#define APPEND_KEY (1ull << 61)

/* The descriptor key's append locks are taken through: the place's hint,
 * open for writing (a directory takes only read locks) — the lifeline's
 * own, or one kept for them; lifeline_lock held. */
static int append_fd(uint64_t key, bool open_it)
{
	return lifeline_kept(key | APPEND_KEY, key, key, lifeline_open,
			     open_it);
}

/* 0 done, -1 held by another (errno), APPEND_NO_FD when there is no
 * descriptor to take it through (errno: why). */
#define APPEND_NO_FD (-2)
static int append_lock_try(uint64_t key, uint32_t byte, short type)
{
	int fd, rc = APPEND_NO_FD;

	pthread_mutex_lock(&lifeline_lock);
	errno = EBADF;
	fd = append_fd(key, type != F_UNLCK);
	if (fd >= 0 && ofd_lock_byte(fd, DIOSHIM_APPEND_BASE + byte,
				     F_OFD_SETLK, type))
		rc = -1;
	else if (fd >= 0)
		rc = 0;
	pthread_mutex_unlock(&lifeline_lock);
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
	log_once("an exact append goes without its lock (%s)",
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
			log_msg("a lone writer's append still in the kernel "
				"after %llu s: an exact append goes on",
				LOCKLESS_WAIT_NS / 1000000000ull);
			break;
		}
		nanosleep(&nap, NULL);
	}
	hint_put(h, temp);
}

/*
 * In a fork child: the inherited descriptors carry the parent's locks.
 * The child is a guest of the parent's files as the parent was: it takes
 * its own guest locks, on descriptors of its own.
 */
void lifeline_forget_inherited(void)
{
	int i, fd;

	for (i = 0; i < lifeline_n; i++)
		sys_close(lifelines[i].fd);
	lifeline_n = 0;
	keeps_n = 0;
	/* The parent's windows are its own (their locks went with the
	 * descriptors closed above). */
	memset(windows, 0, sizeof(windows));
	pthread_mutex_init(&lifeline_lock, NULL);
	for (i = 0; i < guest_n; i++) {
		pthread_mutex_lock(&lifeline_lock);
		fd = guest_dir_fd(guests[i].key, true);
		if (fd < 0 || guest_lock_byte(fd, guests[i].byte, F_OFD_SETLK,
					      F_RDLCK))
			log_msg("fork: cannot announce the child as a guest "
				"writer (%s)", strerror(errno));
		pthread_mutex_unlock(&lifeline_lock);
	}
}

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

void segment_scan(void (*fn)(const char *))
{
	scan_segments(config.shm_dir, true, fn);
}


/* ---- the count of segments: windows and recounts ------------------------ */

static int count_lock(int fd, int cmd, short type)
{
	return ofd_lock_byte(fd, DIOSHIM_COUNT_BYTE, cmd, type);
}

static unsigned *window_count(uint64_t key)
{
	int i, free_i = -1;

	for (i = 0; i < WINDOW_PLACES; i++) {
		if (windows[i].n && windows[i].key == key)
			return &windows[i].n;
		if (!windows[i].n && free_i < 0)
			free_i = i;
	}
	if (free_i < 0)
		return NULL;
	windows[free_i].key = key;
	return &windows[free_i].n;
}

void hint_window_open(uint64_t key)
{
	int saved = errno, fd;
	unsigned *n;

	pthread_mutex_lock(&lifeline_lock);
	fd = append_fd(key, true);
	n = window_count(key);
	/* Waits for a recount under way (a scan of the directory). */
	if (fd >= 0 && (!n || !*n) &&
	    SYS_TRY(count_lock(fd, F_OFD_SETLKW, F_RDLCK)))
		log_once("cannot hold the segment count's window (%s)",
			 strerror(errno));
	if (n)
		++*n;
	pthread_mutex_unlock(&lifeline_lock);
	errno = saved;
}

void hint_window_close(uint64_t key)
{
	int saved = errno, fd, i;

	pthread_mutex_lock(&lifeline_lock);
	fd = append_fd(key, false);
	for (i = 0; i < WINDOW_PLACES; i++)
		if (windows[i].n && windows[i].key == key) {
			if (!--windows[i].n && fd >= 0)
				count_lock(fd, F_OFD_SETLK, F_UNLCK);
			break;
		}
	pthread_mutex_unlock(&lifeline_lock);
	errno = saved;
}

bool hint_recount(uint64_t key, uint64_t (*count)(uint64_t key))
{
	char path[PATH_MAX];
	struct dioshim_hint *h;
	bool temp, done = false;
	int fd;

	h = hint_get(key, false, &temp);
	if (!h)
		return false;
	/* A descriptor of our own: a lock through one we share with our
	 * other threads' windows would only convert theirs. */
	fd = hint_path(key, path, sizeof(path), false)
		     ? -1
		     : sys_openat(AT_FDCWD, path,
				  O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd >= 0 && !count_lock(fd, F_OFD_SETLK, F_WRLCK)) {
		uint64_t n = count(key), was = atomic_load(&h->live);

		if (n != was) {
			log_msg("segments counted anew: %llu, the hint said "
				"%llu", (unsigned long long)n,
				(unsigned long long)was);
			atomic_store(&h->live, n);
			atomic_fetch_add(&h->gen, 1);
		}
		done = true;
	}
	if (fd >= 0)
		sys_close(fd); /* and its lock */
	hint_put(h, temp);
	return done;
}

int hint_mine(uint64_t *keys, uint64_t *live, int max)
{
	int i, n = 0;

	if (hints_ready())
		for (i = 0; i < hint_count && n < max; i++, n++) {
			keys[n] = hint_keys[i];
			live[n] = atomic_load(&hint_set[i]->live);
		}
	return n;
}

void shm_atfork_prepare(void)
{
	pthread_mutex_lock(&hint_lock);
}

void shm_atfork_release(void)
{
	pthread_mutex_unlock(&hint_lock);
}
