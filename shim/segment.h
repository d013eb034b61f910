/* SPDX-License-Identifier: MIT */
/*
 * The per-inode shared segment: membership (attach, detach, slots, fork,
 * exec, reclaim) and validation.  owner.h (who owns a slot or a lock) and
 * shm.h (the shared files, hints and lifelines) come with it.
 */
#ifndef DIOSHIM_SEGMENT_H
#define DIOSHIM_SEGMENT_H

#include "segbase.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>


/* statx the fd; false if not a regular file dioshim may accelerate (wrong
 * filesystem, append-only or immutable inode). */
bool file_identify(int fd, struct file_id *id);

/*
 * Find this process's attachment for the file, attaching to (or, with
 * create, creating) its segment.  Takes a reference.  NULL when the file
 * has no usable segment: the caller passes the call through.
 */
struct shim_file *segment_attach(int fd, const struct file_id *id, bool create);

/* A descriptor's hold as a guest of a file that has no segment it could
 * get into (shm.h guest_hold): kept until it attaches or closes. */
struct guest_pin {
	uint64_t key, dev, ino;
	bool held;
};
/* What segment_attach_pin does when the file has no segment. */
enum seg_want {
	SEG_FIND,	/* nothing: NULL */
	SEG_MAKE,	/* make one */
	/* A writer that may well be the file's only one (DESIGN.md 7, pay
	 * only for parallelism): announce it as a guest (pin held), which
	 * keeps any segment made later exact, and make none — unless another
	 * process is a guest of the file already: it is written in parallel,
	 * one is made. */
	SEG_LAZY,
};

/* segment_attach; when it returns NULL having announced this process as
 * a guest (no segment could be made, or SEG_LAZY), *pin holds that
 * announcement for the caller to give back (guest_drop) — else
 * pin->held is false. */
struct shim_file *segment_attach_pin(int fd, const struct file_id *id,
				     enum seg_want want, struct guest_pin *pin);


/* Whether the shim serves calls on f, with no side effect: a member's,
 * unless the file is exact (a guest writes it).  Only a hint: writers
 * decide again after announcing themselves (inflight_enter_fd). */
static inline bool segment_member_serves(struct shim_file *f)
{
	struct dioshim_seg *seg = __atomic_load_n(&f->seg, __ATOMIC_ACQUIRE);

	return __builtin_expect(__atomic_load_n(&f->slot, __ATOMIC_RELAXED) >=
					0 &&
					!atomic_load_explicit(
						&seg->exact,
						memory_order_relaxed),
				1);
}

bool segment_serves_slow(struct shim_file *f, int fd);
/* segment_member_serves(); a guest's calls never are served, and its
 * first one through fd makes the file exact first. */
static inline bool segment_serves(struct shim_file *f, int fd)
{
	return segment_member_serves(f) || segment_serves_slow(f, fd);
}

/* Before exec: give back our slot in f's file (fd, still open, names
 * it), trimming as its last user would.  f->slot is -1 afterwards. */
void segment_exec_release(struct shim_file *f, int fd);
/* exec failed: take a slot again.  False when the segment is gone (we
 * were its last user): the caller attaches anew. */
bool segment_exec_undo(struct shim_file *f);
/* ... and gives f the new attachment g in place (threads that hold f go
 * on with it), leaving the old segment to g, which it then puts.  False
 * if g is not a fresh attachment of its own. */
bool segment_exec_revive(struct shim_file *f, struct shim_file *g);
/* Set while this process leaves its files for an exec: a write whose
 * slot was given back waits for it to end. */
extern int segment_exec_pending;
/* Wait while another thread leaves our files for an exec: the exec then
 * ends this thread, or failed and the files are ours again. */
void segment_exec_wait(void);

/* Take one more reference (an asynchronous write in flight pins the
 * attachment until its completion is seen). */
void segment_get(struct shim_file *f);
/* The reference of asynchronous writes in flight: a close that leaves
 * only it keeps a copy of its descriptor, for the unpin to cut with. */
void segment_pin(struct shim_file *f);
void segment_unpin(struct shim_file *f);

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


/* What a segment file says of its file, read without mapping it (a
 * file that someone resizes meanwhile cannot fault the reader). */
#define SEG_PEEK_PIDS 16
struct seg_peek {
	uint64_t dev, ino, phys, eof;
	uint64_t hint_key, budget_charged;
	char path[sizeof(((struct dioshim_seg *)0)->path) + 1];
	/* members in this pid namespace (at most SEG_PEEK_PIDS) */
	pid_t pids[SEG_PEEK_PIDS];
	int npids;
};
/* False if path is not a segment of this layout that we may read. */
bool segment_peek(const char *path, struct seg_peek *p);

/* Count the segments of this process's places anew where their hints
 * count more (dioshim gc; at load, with the reclaim). */
void segment_recount(void);

/* Processes attached to seg and alive. */
int segment_live_users(struct dioshim_seg *seg);

/*
 * `dioshim gc` for one segment file: removes it when nobody alive uses it
 * and nothing is reserved.  When a reserved tail must be cut first, says
 * GC_NEEDS_FILE and copies the file's recorded path into file and its
 * handle into fh.
 */
enum gc_verdict {
	GC_IN_USE,
	GC_REMOVED,
	GC_NEEDS_FILE,
	GC_FOREIGN, /* not a segment of ours, or unreadable: left alone */
};
enum gc_verdict segment_gc(const char *segpath, char *file, size_t cap,
			   struct dioshim_fh *fh);
/* GC_NEEDS_FILE, and the file is deleted (its handle fh is stale): the
 * tail went with it; the segment goes, if it still holds fh and still
 * nobody alive uses it. */
bool segment_gc_file_gone(const char *segpath, const struct dioshim_fh *fh);

/* Map and validate an existing segment by path (for the dioshim command
 * and recovery); NULL with errno on failure.  Unmap with segment_unmap. */
struct dioshim_seg *segment_map_path(const char *path, bool writable);
void segment_unmap(struct dioshim_seg *seg);


/* Whether the file turned exact since the caller decided to serve it (a
 * segment's maker that waited for its lone writers in vain, a guest): its
 * words are not the file's any more, the kernel's size is.  Read after
 * barrier_settle, which waits out such a maker. */
static inline bool words_stale(struct dioshim_seg *seg)
{
	return atomic_load_explicit(&seg->exact, memory_order_acquire);
}

#endif
