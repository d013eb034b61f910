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
/* False only when the process named is known to be gone. */
bool owner_alive(uint64_t pid_start, uint64_t pidns);

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

/* Whether a segment exists by the name of (dev, ino) (valid or not). */
bool segment_exists(uint64_t dev, uint64_t ino);

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

/* The hint: false means no segment exists for this user right now. */
bool hint_maybe_live(void);

/* The hint once mapped (NULL before, or if unusable): for the one-load
 * check on the path of every call the shim does not serve. */
extern struct dioshim_hint *hint_mapped;

static inline bool hint_surely_dead(void)
{
	struct dioshim_hint *h = __atomic_load_n(&hint_mapped,
						 __ATOMIC_ACQUIRE);

	return h && !atomic_load_explicit(&h->live, memory_order_relaxed);
}
/* Generation of segment creations; changes whenever a segment appears.
 * UINT64_MAX when the hint is unusable (callers then always re-check). */
uint64_t hint_gen(void);

/* Robust process-shared lock with a bound: true if taken (*recovered says
 * the previous owner died holding it), false on timeout or a broken lock. */
bool seg_lock(pthread_mutex_t *m, bool *recovered);
void seg_unlock(pthread_mutex_t *m);

/* Name of a file's segment: "<shm_dir>/dioshim.<dev>.<ino>". */
int segment_path(char *buf, size_t cap, uint64_t dev, uint64_t ino);

/* Whether a live process has asynchronous writes in flight to seg's file
 * (the kernel's truncate would wait for them, then cut them). */
bool async_in_flight(struct dioshim_seg *seg);

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
