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
 * Lock order: files_lock (this process) -> attach_lock -> ext_lock.
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
	bool gone;
	pid_t pid = getpid();

	if (!proc_starttime(pid, &start, &gone) || gone)
		start = 0;
	self_id.pid_start = (uint64_t)pid | start << DIOSHIM_OWNER_PID_BITS;
	self_id.pidns = 0;
	if (sys_statx(AT_FDCWD, "/proc/self/ns/pid", 0, STATX_INO, &stx) == 0)
		self_id.pidns = stx.stx_ino;
	__atomic_store_n(&self_valid, 1, __ATOMIC_RELEASE);
}

const struct owner_id *owner_self(void)
{
	if (!__atomic_load_n(&self_valid, __ATOMIC_ACQUIRE))
		owner_refresh();
	return &self_id;
}

bool owner_alive(uint64_t pid_start, uint64_t pidns)
{
	const struct owner_id *me = owner_self();
	uint64_t start;
	bool gone;
	pid_t pid = (pid_t)(pid_start & DIOSHIM_OWNER_PID_MASK);

	if (pid_start == me->pid_start && pidns == me->pidns)
		return true;
	/* proc inode numbers are 32-bit and never 0 (0 is recorded only by
	 * a process that could not read its own, when neither can we): any
	 * other value is a corrupt word, and a corrupt owner is no owner. */
	if (pidns > UINT32_MAX || pid <= 0 || (!pidns && me->pidns))
		return false;
	/* A pid from another namespace means nothing here: assume alive. */
	if (pidns != me->pidns)
		return true;
	if (!proc_starttime(pid, &start, &gone))
		return true;
	if (gone)
		return false;
	return start == pid_start >> DIOSHIM_OWNER_PID_BITS;
}

static bool owner_is_self(const struct dioshim_owner *o)
{
	const struct owner_id *me = owner_self();

	return atomic_load_explicit(&o->pid_start, memory_order_acquire) ==
		       me->pid_start &&
	       o->pidns == me->pidns;
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

int segment_path(char *buf, size_t cap, uint64_t dev, uint64_t ino)
{
	int n = snprintf(buf, cap, "%s/" DIOSHIM_SEG_PREFIX "%llx.%llx",
			 config.shm_dir, (unsigned long long)dev,
			 (unsigned long long)ino);

	return n > 0 && (size_t)n < cap ? 0 : -1;
}

static int hint_path(char *buf, size_t cap)
{
	int n;

	if (config.shm_mode == 0600)
		n = snprintf(buf, cap, "%s/" DIOSHIM_HINT_PREFIX "%u",
			     config.shm_dir, (unsigned)geteuid());
	else
		n = snprintf(buf, cap, "%s/" DIOSHIM_HINT_PREFIX "g%u",
			     config.shm_dir, (unsigned)getegid());
	return n > 0 && (size_t)n < cap ? 0 : -1;
}

/*
 * A shared file is ours to use only if it is a regular file of the right
 * size with exactly the configured mode, owned by us (0600) or by our group
 * (0660).  Anything else — another user's file, a planted one — is foreign.
 */
static bool shm_fd_ok(int fd, size_t size)
{
	struct stat st;

	if (sys_fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    (size_t)st.st_size != size ||
	    (st.st_mode & 07777) != config.shm_mode)
		return false;
	if (config.shm_mode == 0600)
		return st.st_uid == geteuid();
	return st.st_gid == getegid();
}

static void *shm_open_existing(const char *path, size_t size, bool writable)
{
	int fd, err;
	void *map;

	fd = sys_openat(AT_FDCWD, path,
			(writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW |
				O_CLOEXEC | O_NONBLOCK,
			0);
	if (fd < 0)
		return NULL;
	if (!shm_fd_ok(fd, size)) {
		sys_close(fd);
		log_msg("%s: not ours (owner, mode or size): ignoring it",
			path);
		errno = EPERM;
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
static void *shm_create_published(const char *path, size_t size,
				  void (*init)(void *, const void *),
				  void (*undo)(void *), const void *arg)
{
	char tmp[PATH_MAX];
	void *map;
	int fd, err;

	snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)sys_gettid());
	fd = sys_openat(AT_FDCWD, tmp,
			O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			config.shm_mode);
	if (fd < 0 && errno == EEXIST) {
		/* A leftover of a dead thread with our tid: ours to remove. */
		sys_unlink(tmp);
		fd = sys_openat(AT_FDCWD, tmp,
				O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
					O_CLOEXEC,
				config.shm_mode);
	}
	if (fd < 0)
		return NULL;
	if (sys_fchmod(fd, config.shm_mode) || sys_ftruncate(fd, (off_t)size))
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

/* ---- the hint --------------------------------------------------------- */

enum { HINT_UNTRIED, HINT_READY, HINT_BROKEN };
static int hint_state;
static struct dioshim_hint *hint_ptr;
struct dioshim_hint *hint_mapped;
static pthread_mutex_t hint_lock = PTHREAD_MUTEX_INITIALIZER;

static void hint_init(void *map, const void *arg)
{
	struct dioshim_hint *h = map;

	(void)arg;
	h->magic = DIOSHIM_HINT_MAGIC;
	h->version = DIOSHIM_LAYOUT_VERSION;
	h->size = sizeof(*h);
}

static struct dioshim_hint *hint_get(void)
{
	char path[PATH_MAX];
	struct dioshim_hint *h = NULL;
	int tries;

	switch (__atomic_load_n(&hint_state, __ATOMIC_ACQUIRE)) {
	case HINT_READY:
		return hint_ptr;
	case HINT_BROKEN:
		return NULL;
	}
	pthread_mutex_lock(&hint_lock);
	if (hint_state != HINT_UNTRIED)
		goto out;
	if (hint_path(path, sizeof(path)))
		goto broken;
	for (tries = 0; tries < 4 && !h; tries++) {
		h = shm_open_existing(path, sizeof(*h), true);
		if (!h && errno == ENOENT) {
			h = shm_create_published(path, sizeof(*h), hint_init,
						 NULL, NULL);
			if (!h && errno != EEXIST)
				break;
		} else if (!h) {
			break;
		}
	}
	if (!h)
		goto broken;
	if (h->magic != DIOSHIM_HINT_MAGIC ||
	    h->version != DIOSHIM_LAYOUT_VERSION || h->size != sizeof(*h)) {
		munmap(h, sizeof(*h));
		goto broken;
	}
	hint_ptr = h;
	__atomic_store_n(&hint_state, HINT_READY, __ATOMIC_RELEASE);
	__atomic_store_n(&hint_mapped, h, __ATOMIC_RELEASE);
	goto out;
broken:
	log_msg("hint %s unusable: checking for segments on every call", path);
	__atomic_store_n(&hint_state, HINT_BROKEN, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&hint_lock);
	return hint_ptr;
}

bool hint_maybe_live(void)
{
	struct dioshim_hint *h = hint_get();

	return !h || atomic_load_explicit(&h->live, memory_order_seq_cst);
}

uint64_t hint_gen(void)
{
	struct dioshim_hint *h = hint_get();

	return h ? atomic_load_explicit(&h->gen, memory_order_seq_cst)
		 : UINT64_MAX;
}

static void hint_live_add(int64_t delta)
{
	struct dioshim_hint *h = hint_get();

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

/* ---- validating a segment's header ------------------------------------ */

static bool birth_matches(const struct dioshim_seg *seg,
			  const struct file_id *id)
{
	if (seg->birth_kind != id->birth_kind)
		return false;
	if (id->birth_kind == DIOSHIM_BIRTH_NONE)
		return true;
	return seg->birth_sec == id->birth_sec &&
	       seg->birth_nsec == id->birth_nsec;
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
	       atomic_load(&seg->users) <= DIOSHIM_MAX_PROCS;
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
	int i;

	for (i = 0; i < DIOSHIM_MAX_PROCS; i++) {
		struct dioshim_slot *s = &seg->slot[i];
		uint64_t o = atomic_load(&s->owner.pid_start);

		if (o && atomic_load(&s->async_inflight) &&
		    owner_alive(o, s->owner.pidns))
			return true;
	}
	return false;
}

static int slot_claim(struct dioshim_seg *seg)
{
	int i, free_slot = -1;

	for (i = 0; i < DIOSHIM_MAX_PROCS; i++) {
		struct dioshim_slot *s = &seg->slot[i];

		if (owner_is_self(&s->owner)) {
			/* Left by the image we exec'd from: start clean. */
			slot_reset(s);
			return i;
		}
		if (free_slot < 0 && !atomic_load(&s->owner.pid_start))
			free_slot = i;
	}
	if (free_slot < 0) {
		for (i = 0; i < DIOSHIM_MAX_PROCS && free_slot < 0; i++) {
			struct dioshim_slot *s = &seg->slot[i];

			if (!owner_alive(atomic_load(&s->owner.pid_start),
					 s->owner.pidns)) {
				atomic_store(&s->owner.pid_start, 0);
				atomic_fetch_sub(&seg->users, 1);
				free_slot = i;
			}
		}
	}
	if (free_slot < 0)
		return -1;
	/* Counters are zeroed before the owner is published: a drainer that
	 * sees our owner word sees our zeroed counters. */
	slot_reset(&seg->slot[free_slot]);
	owner_set_self(&seg->slot[free_slot].owner);
	atomic_fetch_add(&seg->users, 1);
	return free_slot;
}

static void slot_release(struct dioshim_seg *seg, int i)
{
	slot_reset(&seg->slot[i]);
	atomic_store_explicit(&seg->slot[i].owner.pid_start, 0,
			      memory_order_release);
	atomic_fetch_sub(&seg->users, 1);
}

/* Is any process other than slot `self` still attached?  Frees the slots
 * of dead processes on the way. */
static bool others_alive(struct dioshim_seg *seg, int self)
{
	int i;

	for (i = 0; i < DIOSHIM_MAX_PROCS; i++) {
		struct dioshim_slot *s = &seg->slot[i];
		uint64_t o = atomic_load(&s->owner.pid_start);

		if (i == self || !o)
			continue;
		if (owner_alive(o, s->owner.pidns))
			return true;
		slot_release(seg, i);
	}
	return false;
}

/* Is any attached process alive?  Reads only: no lock needed. */
static bool any_live_owner(struct dioshim_seg *seg)
{
	int i;

	for (i = 0; i < DIOSHIM_MAX_PROCS; i++) {
		uint64_t o = atomic_load(&seg->slot[i].owner.pid_start);

		if (o && owner_alive(o, seg->slot[i].owner.pidns))
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
	struct stat st;
	uint64_t eof, aligned, data;

	if (sys_fstat(fd, &st))
		return;
	atomic_store(&seg->phys, (uint64_t)st.st_size);
	eof = atomic_load(&seg->eof);
	if (eof > (uint64_t)st.st_size)
		eof = (uint64_t)st.st_size;
	/* Data past eof was written (a writer killed between its write and
	 * publishing it) — or eof is not to be trusted: either way the size
	 * reaches at least to the end of the data. */
	aligned = (eof + seg->blksize - 1) / seg->blksize * seg->blksize;
	recover_drop_cache(fd, aligned, (uint64_t)st.st_size);
	data = recover_data_end(fd, aligned);
	if (data > aligned)
		eof = data < (uint64_t)st.st_size ? data : (uint64_t)st.st_size;
	atomic_store(&seg->eof, eof);
	atomic_store(&seg->tail, eof);
	if (atomic_load(&seg->synced_eof) > eof)
		atomic_store(&seg->synced_eof, eof);
	atomic_store(&seg->barrier, 0);
}

/*
 * The first live user of a segment — its creator, or the first to join
 * one whose users all died — before anyone else may use it (it holds
 * attach_lock): cut what a crash left past the recorded EOF, then start
 * the words from the kernel's size.  A segment of dead users is no more
 * trusted than none: its words may be ahead of what reached the disk
 * (the filesystem went down with them), while the record and the data
 * are what the disk says.
 */
static void seg_recover(struct dioshim_seg *seg, int fd)
{
	struct stat st;

	if (recover_fd(fd, seg->blksize, &recover_last) == RECOVER_FAILED) {
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
		hint_live_add(-1);
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

struct shim_file *segment_attach(int fd, const struct file_id *id, bool create)
{
	char path[PATH_MAX];
	struct dioshim_seg *seg = NULL;
	struct shim_file *f;
	int slot = -1, tries;

	if (segment_path(path, sizeof(path), id->dev, id->ino))
		return NULL;
	pthread_mutex_lock(&files_lock);
	for (f = files_head; f; f = f->next) {
		if (f->dev == id->dev && f->ino == id->ino &&
		    birth_matches(f->seg, id)) {
			f->refs++;
			goto out;
		}
	}
	for (tries = 0; tries < 8; tries++) {
		seg = shm_open_existing(path, SEG_SIZE, true);
		if (!seg && errno == ENOENT) {
			struct seg_init_arg arg = { id, fd, &slot };

			if (!create)
				break;
			hint_live_add(1);
			seg = shm_create_published(path, SEG_SIZE, seg_init,
						   seg_init_undo, &arg);
			if (seg) {
				seg_recover(seg, fd);
				seg_unlock(&seg->attach_lock);
				break;
			}
			hint_live_add(-1);
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
		slot_release(seg, f->slot);
		if (!others_alive(seg, -1) && reserve_trim(f, fd) &&
		    !segment_path(path, sizeof(path), f->dev, f->ino)) {
			atomic_store(&seg->state, DIOSHIM_SEG_DEAD);
			sys_unlink(path);
			hint_live_add(-1);
		}
		seg_unlock(&seg->attach_lock);
	}
	grave_push(f);
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
	pthread_mutex_lock(&hint_lock);
	pthread_mutex_lock(&files_lock);
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
	struct dioshim_seg *seg = shm_open_existing(path, SEG_SIZE, true);
	int i;

	if (!seg)
		return;
	if (seg->magic == DIOSHIM_SEG_MAGIC &&
	    seg->version == DIOSHIM_LAYOUT_VERSION && seg->size == SEG_SIZE &&
	    attach_lock_take(seg)) {
		for (i = 0; i < DIOSHIM_MAX_PROCS; i++)
			if (owner_is_self(&seg->slot[i].owner))
				slot_release(seg, i);
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
void segment_reclaim_self(void)
{
	char buf[4096], path[PATH_MAX];
	size_t plen = strlen(DIOSHIM_SEG_PREFIX);
	long n, off;
	int dfd;

	/* Nothing to do unless some segment exists: the common case costs
	 * one load of the hint. */
	if (!hint_maybe_live())
		return;
	dfd = sys_openat(AT_FDCWD, config.shm_dir,
			 O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
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

			off += d->d_reclen;
			if (strncmp(d->d_name, DIOSHIM_SEG_PREFIX, plen) ||
			    strstr(d->d_name, ".tmp"))
				continue;
			if (snprintf(path, sizeof(path), "%s/%s",
				     config.shm_dir, d->d_name) <
			    (int)sizeof(path))
				reclaim_self_in(path);
		}
	}
	sys_close(dfd);
}

/* ---- the dioshim command: gc and users -------------------------------- */

int segment_live_users(struct dioshim_seg *seg)
{
	int i, n = 0;

	for (i = 0; i < DIOSHIM_MAX_PROCS; i++) {
		uint64_t o = atomic_load(&seg->slot[i].owner.pid_start);

		if (o && owner_alive(o, seg->slot[i].owner.pidns))
			n++;
	}
	return n;
}

enum gc_verdict segment_gc(const char *segpath, char *file, size_t cap)
{
	struct dioshim_seg *seg = shm_open_existing(segpath, SEG_SIZE, true);
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
			hint_live_add(-1);
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

bool segment_exists(uint64_t dev, uint64_t ino)
{
	char path[PATH_MAX];
	struct stat st;

	return !segment_path(path, sizeof(path), dev, ino) &&
	       syscall(SYS_newfstatat, AT_FDCWD, path, &st,
		       AT_SYMLINK_NOFOLLOW) == 0;
}

/* ---- read-only access: stat(path) and the dioshim command ------------- */

struct dioshim_seg *segment_map_path(const char *path, bool writable)
{
	struct dioshim_seg *seg = shm_open_existing(path, SEG_SIZE, writable);

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
	struct dioshim_seg *seg;
	struct statx stx;
	bool ok;

	if (segment_path(name, sizeof(name), st->st_dev, st->st_ino))
		return false;
	seg = shm_open_existing(name, SEG_SIZE, false);
	if (!seg)
		return false;
	ok = seg_header_ok(seg, st->st_dev, st->st_ino) &&
	     atomic_load(&seg->state) == DIOSHIM_SEG_READY;
	if (ok && seg->birth_kind == DIOSHIM_BIRTH_BTIME) {
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
		      STATX_TYPE | STATX_INO | STATX_SIZE | STATX_BTIME,
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
	id->size = stx.stx_size;
	id->blksize = stx.stx_blksize;
	if (id->blksize < 512 || id->blksize > (1u << 20) ||
	    (id->blksize & (id->blksize - 1)))
		id->blksize = 4096;
	if (stx.stx_mask & STATX_BTIME) {
		id->birth_kind = DIOSHIM_BIRTH_BTIME;
		id->birth_sec = stx.stx_btime.tv_sec;
		id->birth_nsec = stx.stx_btime.tv_nsec;
	} else {
		id->birth_kind = DIOSHIM_BIRTH_NONE;
		id->birth_sec = 0;
		id->birth_nsec = 0;
	}
	return true;
}
