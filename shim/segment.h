/* SPDX-License-Identifier: MIT */
/*
 * The per-inode shared segment: membership (attach, detach, slots, fork,
 * exec, reclaim) and validation.  owner.h (who owns a slot or a lock) and
 * shm.h (the shared files, hints and lifelines) come with it.
 */
#ifndef DIOSHIM_SEGMENT_H
#define DIOSHIM_SEGMENT_H

#include "dioshim/layout.h"
#include "owner.h"
#include "guest.h"
#include "hint.h"
#include "lifeline.h"
#include "shm.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

/* This process's attachment to one segment. */
struct shim_file {
	struct dioshim_seg *seg;
	uint64_t dev, ino;
	uint32_t fs_bit; /* CONFIG_FS_* */
	/* what the kernel asks of a direct write (STATX_DIOALIGN): buffer
	 * and offset/length alignment, 0 when it does not say */
	uint32_t dio_mem_align, dio_off_align;
	int slot; /* our slot in seg->slot[] */
	unsigned refs; /* ofds pointing here; under files_lock */
	/* asynchronous writes in flight (async.c, under its lock): the
	 * first pins the attachment with one reference, the last drops it */
	unsigned async_ops;
	/* Pinned by them (segment_pin), under files_lock; the copy of the
	 * program's last descriptor, kept when it closed it with writes
	 * still in flight (fd_keep), through which the unpin cuts. */
	bool pinned;
	uint64_t kept;
	bool exec_released; /* slot given back for an exec; under files_lock */
	/* A guest (slot -1): it writes with no slot, holding its guest lock
	 * (shm.h) while attached; the file is kept exact for everyone. */
	bool guest;
	bool guest_held; /* its announcement (guest_hold) is ours to drop */
	/* Its first exact append waited for the lone writers' lockless
	 * appends (shm.h append_lockless_drain): none can start since. */
	bool lockless_drained;
	/* The kernel has taken a FALLOC_FL_ZERO_RANGE on this file: it
	 * supports them (tmpfs, ext4 without extents do not), so one over
	 * untouched reserved blocks may be answered without it (io.c). */
	_Atomic bool zero_range_ok;
	/* The last close (or exit) is taking it away: LEAVING while our
	 * writes still in flight drain (new ones wait, then go to the
	 * kernel as they are), GONE once detached. */
	_Atomic int leaving;
	struct shim_file *next; /* the process's list; under files_lock */
};
enum { FILE_HERE, FILE_LEAVING, FILE_GONE };

/*
 * seg->barrier: 0 down; BARRIER_UP while a raiser drains and acts;
 * BARRIER_CHANGING from just before the raiser changes the kernel's size
 * until its words follow.  Whoever takes barrier_lock and finds it
 * CHANGING knows the raiser died half way, and recomputes the words from
 * the kernel's size through its own descriptor of the file.
 */
#define BARRIER_UP 1u
#define BARRIER_CHANGING 2u

/* Count n in one of a slot's statistics (layout.h: relaxed, for
 * `dioshim status` only). */
static inline void slot_stat_add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* The calls of slot s in flight (its shards' counts). */
int64_t slot_inflight(struct dioshim_slot *s);

/* The writes of slot s in flight: calls, and queued writes whose
 * completion it has not seen. */
static inline int64_t slot_writes(struct dioshim_slot *s)
{
	return (int64_t)atomic_load(&s->async_inflight) + slot_inflight(s);
}

/*
 * What the mechanisms above do at a segment's turning points (lifecycle.c
 * registers them at load), and the calls of one mechanism up to another
 * (the last three: the layers below reach them only through this table).
 * Each of the first four runs with attach_lock held and nobody else in
 * the segment.
 */
struct segment_hooks {
	/* A new segment for id: the mechanisms' words, before it is
	 * published. */
	void (*made)(struct dioshim_seg *seg, const struct file_id *id);
	/* Its first live user (the creator, or the first after users that
	 * all died), through fd: recover the file, start the words.  False
	 * if the words could not be started from the kernel's size: the
	 * file is then kept exact. */
	bool (*first_in)(struct dioshim_seg *seg, int fd);
	/* Its last user, through fd (-1: none): cut the reserved tail;
	 * false if it must stay (the segment then stays too). */
	bool (*last_out)(struct shim_file *f, int fd);
	/* A new image of this process, at load: free what the old held. */
	void (*image_gone)(struct dioshim_seg *seg);
	/* A guest about to write through fd (no attach_lock held, other
	 * users active): make the file exact — drain the writers, cut the
	 * reserved tail, set seg->exact. */
	void (*guest_in)(struct shim_file *f, int fd);
	/* The segment was just made through fd while guests had announced
	 * themselves: wait (bounded) for them to join, else make the file
	 * exact. */
	void (*guests_wait)(struct shim_file *f, int fd);
	/* A size change cut short by its raiser's death (BARRIER_CHANGING):
	 * with barrier_lock and ext_lock held and nothing in flight, the
	 * words taken anew from the kernel's size through fd (inflight.c).
	 * False if they could not be: the mark stays. */
	bool (*words_repair)(struct shim_file *f, int fd);
	/* A move of appends (move.h) closed through fd: the reserved tail
	 * past eof gets its record (move.c). */
	void (*moved)(struct shim_file *f, int fd);
	/* The disk budget of key's place on dev counted anew from its
	 * segments (space_recount, for reserve.c). */
	void (*budget_recount)(uint64_t key, uint64_t dev);
};
void segment_set_hooks(const struct segment_hooks *h);
/* The hooks above, for the mechanisms below the one that does it: each
 * does nothing (false) without hooks. */
bool segment_words_repair(struct shim_file *f, int fd);
void segment_moved(struct shim_file *f, int fd);
void segment_budget_recount(uint64_t key, uint64_t dev);

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

/* The page of the lazy tables (layout.h) that holds p. */
static inline unsigned lazy_page(const struct dioshim_seg *seg, const void *p)
{
	return (unsigned)(((uintptr_t)p - (uintptr_t)seg - DIOSHIM_LAZY_OFF) /
			  4096);
}

/* Whether the lazy page holding p is allocated: if not, nobody ever
 * wrote it, and its words are zeros (read them without touching it). */
static inline bool lazy_is_backed(const struct dioshim_seg *seg,
				  const void *p)
{
	return __atomic_load_n(&seg->lazy_backed, __ATOMIC_ACQUIRE) &
	       (1u << lazy_page(seg, p));
}

/* Allocate the lazy pages holding [p, p + len) before anything writes
 * them (MADV_POPULATE_WRITE: a full directory is an error, never a
 * SIGBUS).  False if they cannot be: the caller does without them. */
bool lazy_back(struct dioshim_seg *seg, const void *p, size_t len);

/* A first live user (nobody else inside): every lazy page given back,
 * zeros at its next use. */
void lazy_reset(struct dioshim_seg *seg);

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

/*
 * A write at its own offset, or a punch, of [.., end) past eof: the
 * reserved blocks up to end are no longer known untouched.  Raised
 * before the kernel's call (seq_cst: a grower that does not see it is
 * ordered before the write), a load when it need not move.
 */
static inline void touched_raise(struct dioshim_seg *seg, uint64_t end)
{
	uint64_t cur = atomic_load_explicit(&seg->touched, memory_order_relaxed);

	while (end > cur &&
	       !atomic_compare_exchange_weak(&seg->touched, &cur, end))
		;
}

#endif
