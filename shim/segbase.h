/* SPDX-License-Identifier: MIT */
/*
 * The segment's base (L1, under segment.h): a process's attachment to a
 * segment (struct shim_file), the slots' counts, the lazy pages, and the
 * hooks through which the layers below reach the mechanisms above.  The
 * second half is the segment layer's insides (segbase.c, segment.c,
 * segview.c): a segment's own words under its attach_lock.  The layers
 * above include segment.h.
 */
#ifndef DIOSHIM_SEGBASE_H
#define DIOSHIM_SEGBASE_H

#include "dioshim/layout.h"
#include "guest.h"
#include "hint.h"
#include "log.h"
#include "lifeline.h"
#include "owner.h"
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
/* The table is handed in by being put in the section dioshim_seghooks:
 * it is there before any code runs, whatever the order of the
 * constructors (another library's constructor may call a wrapper before
 * ours run).  One table: lifecycle.c's. */
#define SEGMENT_HOOKS(table)                                               \
	static const struct segment_hooks *const segment_hooks_##table     \
		__attribute__((used, section("dioshim_seghooks"))) = &(table)
/* The hooks above, for the mechanisms below the one that does it: each
 * does nothing (false) without hooks. */
bool segment_words_repair(struct shim_file *f, int fd);
void segment_moved(struct shim_file *f, int fd);
void segment_budget_recount(uint64_t key, uint64_t dev);

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

/* The insides, for segment.c and segview.c. */

/* Whether seg was made for the file id is (its birth time or
 * generation: an inode number reused is another file). */
bool birth_matches(const struct dioshim_seg *seg, const struct file_id *id);
/* Whether seg's header is of this layout and names (dev, ino). */
bool seg_header_ok(const struct dioshim_seg *seg, uint64_t dev, uint64_t ino);

/* A log line's file (log.h): seg's, with the path it was made at, or
 * fd's path when fd >= 0 (where the file is now). */
#define LOG_SEG(seg_) LOG_SEGFD(seg_, -1)
#define LOG_SEGFD(seg_, fd_)                      \
	(&(struct log_file){.dev = (seg_)->dev,   \
			    .ino = (seg_)->ino,   \
			    .path = (seg_)->path, \
			    .fd = (fd_)})
/* The pages of seg's first n slots allocated (they may be touched). */
bool slot_back_range(struct dioshim_seg *seg, int n);
/* A slot of seg for this process (attach_lock held); -1 if none. */
int slot_claim(struct dioshim_seg *seg);
/* Slot i of seg given back (attach_lock held; -1: none). */
void slot_release(struct dioshim_seg *seg, int i);
/* Whether a live process other than slot self's holds a slot of seg
 * (the dead's are freed on the way). */
bool others_alive(struct dioshim_seg *seg, int self);
/* Whether any live process holds a slot of seg. */
bool any_live_owner(struct dioshim_seg *seg);
/* Remove seg's name at path and count it out of its hint. */
void seg_unlink(struct dioshim_seg *seg, const char *path);
/* seg's attach_lock, taken: false if it could not be had. */
bool attach_lock_take(struct dioshim_seg *seg);

/* The new segment's words (shm_create_published's init and undo). */
struct seg_init_arg {
	const struct file_id *id;
	int fd;
	int *slot;
	uint64_t hint_key;
};
void seg_init(void *map, const void *argp);
void seg_init_undo(void *map);
/* Mark seg dead and remove its name at path, once (attach_lock held). */
void seg_retire(struct dioshim_seg *seg, const char *path);
/* The segment at path mapped, if it is one of this layout, with its
 * attach lock held; NULL if not.  Given back with seg_close_locked. */
struct dioshim_seg *seg_open_locked(const char *path);
void seg_close_locked(struct dioshim_seg *seg);

/* The hooks registered (NULL: none), and the calls through them, each a
 * no-op (or true) without hooks. */
const struct segment_hooks *hook_table(void);
void hook_made(struct dioshim_seg *seg, const struct file_id *id);
/* False: the words are not the file's, the file must be kept exact. */
bool hook_first_in(struct dioshim_seg *seg, int fd);
bool hook_last_out(struct shim_file *f, int fd);
void hook_image_gone(struct dioshim_seg *seg);

#endif
