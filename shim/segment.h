/* SPDX-License-Identifier: MIT */
/*
 * The per-inode shared segment (create, attach, validate, detach, reclaim),
 * the per-user hint, and the owner identity every shared object records.
 */
#ifndef DIOSHIM_SEGMENT_H
#define DIOSHIM_SEGMENT_H

#include "dioshim/layout.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

/* This process's attachment to one segment. */
struct shim_file {
	struct dioshim_seg *seg;
	uint64_t dev, ino;
	uint32_t fs_bit; /* CONFIG_FS_* */
	int slot; /* our slot in seg->slot[] */
	unsigned refs; /* ofds pointing here; under files_lock */
	/* asynchronous writes in flight (async.c, under its lock): the
	 * first pins the attachment with one reference, the last drops it */
	unsigned async_ops;
	bool exec_released; /* slot given back for an exec; under files_lock */
	struct shim_file *next; /* the process's list; under files_lock */
};

/* Identity of the calling process, as recorded in owner words. */
struct owner_id {
	uint64_t pid_start;
	uint64_t pidns;
};
const struct owner_id *owner_self(void);
/* Recompute after fork (the child is a new process). */
void owner_refresh(void);
/* False only when the process named is known to be gone: through /proc
 * in our pid namespace, else through its lifeline in the place (a
 * segment's hint_key) where it is registered. */
#define LIFELINE_NONE UINT64_MAX
bool owner_alive_in(uint64_t key, uint64_t pid_start, uint64_t pidns);
bool owner_alive(uint64_t pid_start, uint64_t pidns);
/* Whether fd is one of the shim's own lifeline descriptors, which the
 * program's closes must leave open. */
bool lifeline_owns_fd(int fd);
/* Those of them in [lo, hi], ascending, at most max. */
int lifeline_fds(unsigned lo, unsigned hi, unsigned *out, int max);

/*
 * What a file looks like to the segment code: filled from one statx of the
 * data file (plus statfs for fs_bit).
 */
struct file_id {
	uint64_t dev, ino;
	uint64_t size;
	uint32_t blksize;
	uint32_t fs_bit;
	uint32_t birth_kind;
	int64_t birth_sec;
	uint32_t birth_nsec;
	uint64_t birth_gen;
	uint32_t uid, gid, mode; /* who may write it: who may join */
};

/* statx the fd; false if not a regular file dioshim may accelerate (wrong
 * filesystem, append-only or immutable inode). */
bool file_identify(int fd, struct file_id *id);

/*
 * Find this process's attachment for the file, attaching to (or, with
 * create, creating) its segment.  Takes a reference.  NULL when the file
 * has no usable segment: the caller passes the call through.
 */
struct shim_file *segment_attach(int fd, const struct file_id *id, bool create);

/* Before exec: give back our slot in f's file (fd, still open, names
 * it), trimming as its last user would.  f->slot is -1 afterwards. */
void segment_exec_release(struct shim_file *f, int fd);
/* exec failed: take a slot again.  False when the segment is gone (we
 * were its last user): the caller attaches anew. */
bool segment_exec_undo(struct shim_file *f);

/* Take one more reference (an asynchronous write in flight pins the
 * attachment until its completion is seen). */
void segment_get(struct shim_file *f);

/* Drop a reference; the last one detaches, and the last detacher of the
 * file trims the reserved tail through fd (still open) and removes the
 * segment. */
void segment_put(struct shim_file *f, int fd);

/* Read the logical EOF of a file this process may not have open, for
 * stat(path).  False when it has no valid segment. */
bool segment_peek_eof(const struct stat *st, const char *path_or_null,
		      int dirfd, int at_flags, uint64_t *eof);

/* Whether a segment exists by the name of file (valid or not). */
bool segment_exists(const struct stat *file);

/* Detach from every segment (exit, _exit). */
void segment_detach_all(void);

/* After fork, in the child: take slots of our own in every segment the
 * parent had attached. */
void segment_atfork_child(void);

/* Lock the process's file list around fork. */
void segment_atfork_prepare(void);
void segment_atfork_parent(void);

/* At load: if any segment may exist, give back slots that name this very
 * process (left by the image we replaced with exec). */
void segment_reclaim_self(void);

/* Call fn with the path of every segment file under the segment
 * directory (its group directories included). */
void segment_scan(void (*fn)(const char *));

/* The hint: false means no segment exists for this user right now. */
bool hint_maybe_live(void);

/* The hints this process reads (its user's and its groups'), once
 * mapped (hint_count 0 before, or if one is unusable): for the check on
 * the path of every call the shim does not serve, a few loads. */
extern struct dioshim_hint *hint_set[];
extern int hint_count;

static inline bool hint_surely_dead(void)
{
	int i, n = __atomic_load_n(&hint_count, __ATOMIC_ACQUIRE);

	for (i = 0; i < n; i++)
		if (atomic_load_explicit(&hint_set[i]->live,
					 memory_order_relaxed))
			return false;
	return n > 0;
}
/* Generation of segment creations; changes whenever a segment appears.
 * UINT64_MAX when the hint is unusable (callers then always re-check). */
uint64_t hint_gen(void);

/* Robust process-shared lock with a bound: true if taken (*recovered says
 * the previous owner died holding it), false on timeout or a broken lock. */
bool seg_lock(pthread_mutex_t *m, bool *recovered);
void seg_unlock(pthread_mutex_t *m);

/* Name of a private file's segment: "<shm_dir>/dioshim.<dev>.<ino>". */
int segment_path(char *buf, size_t cap, uint64_t dev, uint64_t ino);
/* Name of the segment of a file (dev, ino, mode, gid): the one above, or,
 * for a group-writable file, the same name in its group's directory
 * "<shm_dir>/dioshim-g<gid>" (made when make says so).  -1 when that
 * directory is unusable: the file is then served for no one. */
int segment_path_of(char *buf, size_t cap, uint64_t dev, uint64_t ino,
		    uint32_t mode, uint32_t gid, bool make);

/* Whether a live process has asynchronous writes in flight to seg's file
 * (the kernel's truncate would wait for them, then cut them). */
bool async_in_flight(struct dioshim_seg *seg);

/* The segment's block size, bounded where it is used: a word another
 * writer can change must not become a divisor of zero. */
static inline uint32_t seg_blksize(const struct dioshim_seg *seg)
{
	uint32_t b = __atomic_load_n(&seg->blksize, __ATOMIC_RELAXED);

	return b >= 512 && b <= (1u << 20) && !(b & (b - 1)) ? b : 4096;
}

/* How many slots of seg may be in use (and are backed): the bound of
 * every walk of seg->slot[]. */
static inline int seg_slots(const struct dioshim_seg *seg)
{
	uint32_t n = atomic_load_explicit(&seg->slots_hi, memory_order_acquire);

	return n > DIOSHIM_MAX_PROCS ? DIOSHIM_MAX_PROCS : (int)n;
}

/* Free slot i, whose owner o was found dead (a CAS: freed once, whoever
 * else found it too).  True if this call freed it. */
bool slot_free_dead(struct dioshim_seg *seg, int i, uint64_t o);

/* Processes attached to seg and alive. */
int segment_live_users(struct dioshim_seg *seg);

/*
 * `dioshim gc` for one segment file: removes it when nobody alive uses it
 * and nothing is reserved.  When a reserved tail must be cut first, says
 * GC_NEEDS_FILE and copies the file's recorded path into file.
 */
enum gc_verdict {
	GC_IN_USE,
	GC_REMOVED,
	GC_NEEDS_FILE,
	GC_FOREIGN, /* not a segment of ours, or unreadable: left alone */
};
enum gc_verdict segment_gc(const char *segpath, char *file, size_t cap);

/* Map and validate an existing segment by path (for the dioshim command
 * and recovery); NULL with errno on failure.  Unmap with segment_unmap. */
struct dioshim_seg *segment_map_path(const char *path, bool writable);
void segment_unmap(struct dioshim_seg *seg);

#endif
