// SPDX-License-Identifier: MIT
/*
 * A segment's own words, under its attach_lock: validating its header,
 * backing and claiming its slots (and freeing the slots of the dead),
 * making a new one's words, retiring one; and the hooks through which
 * the segment layer calls the mechanisms above it (segment_hooks).
 *
 * Layer L1, under segment.c (membership) and segview.c; calls the rest
 * of L1 (shared files, lifelines, owners, hints, guests) and L0.  Lock
 * order: attach_lock, then (a slot's backing) nothing else.
 */
#define _GNU_SOURCE
#include "segbase.h"

#include "dioshim.h"

#include "config.h"
#include "lockrank.h"
#include "log.h"
#include "mem.h"
#include "owner.h"
#include "record.h"
#include "shm.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <time.h>

#define LOCK_TIMEOUT_SEC 30

/* ---- validating a segment's header ------------------------------------ */

bool birth_matches(const struct dioshim_seg *seg,
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

/* The size words agree with each other (eof <= phys, eof <= tail, all
 * within a file's largest size).  They move one at a time: a size change
 * under way (a truncate stores phys, then eof, then tail) shows a moment
 * where they do not. */
static bool seg_sizes_ok(const struct dioshim_seg *seg)
{
	uint64_t eof = atomic_load(&seg->eof), tail, phys;

	/* (without the bit that says the appends move: move.h) */
	tail = atomic_load(&seg->tail) & ~DIOSHIM_TAIL_CLOSED;
	phys = atomic_load(&seg->phys);
	return eof <= phys && eof <= tail && phys <= (uint64_t)INT64_MAX &&
	       tail <= (uint64_t)INT64_MAX;
}

/* Everything a process checks before it trusts a mapped segment.  Size
 * words that disagree are looked at again for up to SIZES_SETTLE_US: a
 * size change in another process passes; words that stay wrong are a
 * corrupt segment. */
#define SIZES_SETTLE_US 20000
bool seg_header_ok(const struct dioshim_seg *seg, uint64_t dev,
			  uint64_t ino)
{
	static const struct timespec nap = { 0, 100000 };
	uint32_t state = atomic_load_explicit(&seg->state,
					      memory_order_acquire);
	int waited;

	if (seg->magic != DIOSHIM_SEG_MAGIC ||
	    seg->version != DIOSHIM_LAYOUT_VERSION || seg->size != SEG_SIZE ||
	    seg->dev != dev || seg->ino != ino)
		return false;
	if (state != DIOSHIM_SEG_READY && state != DIOSHIM_SEG_DEAD)
		return false;
	if (seg->blksize < 512 || seg->blksize > (1u << 20) ||
	    (seg->blksize & (seg->blksize - 1)))
		return false;
	if (atomic_load(&seg->users) > DIOSHIM_MAX_PROCS ||
	    atomic_load(&seg->slots_hi) > DIOSHIM_MAX_PROCS)
		return false;
	for (waited = 0; !seg_sizes_ok(seg) && waited < SIZES_SETTLE_US;
	     waited += 100)
		nanosleep(&nap, NULL);
	return seg_sizes_ok(seg);
}

/* ---- attach slots (under attach_lock) --------------------------------- */

int64_t slot_inflight(struct dioshim_slot *s)
{
	int64_t n = 0;
	int i;

	for (i = 0; i < DIOSHIM_SLOT_SHARDS; i++)
		n += atomic_load_explicit(&s->shard[i].inflight,
					  memory_order_seq_cst);
	return n;
}

static void slot_reset(struct dioshim_slot *s)
{
	int i;

	for (i = 0; i < DIOSHIM_SLOT_SHARDS; i++)
		atomic_store(&s->shard[i].inflight, 0);
	atomic_store(&s->async_inflight, 0);
	atomic_store(&s->publish_waiting, 0);
}

bool async_in_flight(struct dioshim_seg *seg)
{
	int i, n = seg_slots(seg);

	for (i = 0; i < n; i++) {
		struct dioshim_slot *s = &seg->slot[i];
		uint64_t o = atomic_load(&s->owner.pid_start);

		if (atomic_load(&s->async_inflight) &&
		    slot_owner_alive(seg, s, o))
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
/*
 * Before Linux 5.14 there is no MADV_POPULATE_WRITE: allocate the range
 * through the file instead.  Under attach_lock, with the segment READY,
 * its name is this very file (unlinking takes the same lock).
 */
static bool slot_back_by_fd(struct dioshim_seg *seg, uintptr_t from,
			    uintptr_t to)
{
	char path[PATH_MAX];
	int fd, rc, err;

	lock_held(LOCK_ATTACH);
	if (seg_path_of(seg, path, sizeof(path)))
		return false;
	fd = sys_openat(AT_FDCWD, path, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd < 0)
		return false;
	rc = sys_fallocate(fd, 0, (off_t)(from - (uintptr_t)seg),
			   (off_t)(to - from));
	err = errno;
	sys_close(fd);
	errno = err;
	return rc == 0;
}

/* Allocate the pages of slots [0, n) (a no-op where they are). */
bool slot_back_range(struct dioshim_seg *seg, int n)
{
	uintptr_t from = (uintptr_t)&seg->slot[0];
	uintptr_t to = ((uintptr_t)&seg->slot[n] + 4095) & ~(uintptr_t)4095;

	return !SYS_TRY(sys_madvise((void *)from, to - from,
				MADV_POPULATE_WRITE)) ||
	       (errno == EINVAL && slot_back_by_fd(seg, from, to));
}

bool lazy_back(struct dioshim_seg *seg, const void *p, size_t len)
{
	unsigned first = lazy_page(seg, p),
		 last = lazy_page(seg, (const char *)p + len - 1), pg;
	uint32_t want = 0;

	for (pg = first; pg <= last && pg < DIOSHIM_LAZY_PAGES; pg++)
		want |= 1u << pg;
	if ((atomic_load_explicit(&seg->lazy_backed, memory_order_acquire) &
	     want) == want)
		return true;
	if (sys_madvise((char *)seg + DIOSHIM_LAZY_OFF + (size_t)first * 4096,
		    (size_t)(last - first + 1) * 4096, MADV_POPULATE_WRITE)) {
		log_once_file(LOG_ERROR, LOG_SEG(seg),
			      "shared memory for the extent-lock table or the "
			      "prefill bitmap unavailable (%s): doing without",
			      strerror(errno));
		return false;
	}
	atomic_fetch_or_explicit(&seg->lazy_backed, want, memory_order_release);
	return true;
}

void lazy_reset(struct dioshim_seg *seg)
{
	uint32_t had = atomic_exchange(&seg->lazy_backed, 0);
	unsigned pg;

	for (pg = 0; pg < DIOSHIM_LAZY_PAGES; pg++) {
		char *page = (char *)seg + DIOSHIM_LAZY_OFF + (size_t)pg * 4096;

		if ((had & (1u << pg)) && sys_madvise(page, 4096, MADV_REMOVE))
			memset(page, 0, 4096);
	}
}

static bool slot_back(struct dioshim_seg *seg, int i)
{
	if ((uint32_t)i < atomic_load(&seg->slots_hi))
		return true;
	if (!slot_back_range(seg, i + 1)) {
		log_event(LOG_ERROR, LOG_SEG(seg),
			  "cannot allocate attach slot %d (%s)", i,
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

int slot_claim(struct dioshim_seg *seg)
{
	int i, n = seg_slots(seg), free_slot = -1;

	lock_held(LOCK_ATTACH);
	for (i = 0; i < n; i++) {
		struct dioshim_slot *s = &seg->slot[i];

		if (owner_is_self(&s->owner)) {
			/* Left by the image we exec'd from: start clean, under
			 * this image's lifeline. */
			slot_reset(s);
			lifeline_register(seg->hint_key, owner_token());
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

			if (!slot_owner_alive(seg, s, o) &&
			    slot_free_if(seg, i, o))
				free_slot = i;
		}
	}
	if (free_slot < 0 || !slot_back(seg, free_slot))
		return -1;
	/* Counters are zeroed before the owner is published: a drainer that
	 * sees our owner word sees our zeroed counters. */
	slot_reset(&seg->slot[free_slot]);
	lifeline_register(seg->hint_key, owner_token());
	owner_set_self(&seg->slot[free_slot].owner);
	atomic_fetch_add(&seg->users, 1);
	return free_slot;
}

void slot_release(struct dioshim_seg *seg, int i)
{
	lock_held(LOCK_ATTACH);

	if (i < 0 || i >= seg_slots(seg))
		return;
	slot_free_if(seg, i, atomic_load(&seg->slot[i].owner.pid_start));
}

/* Is any process other than slot `self` still attached?  Frees the slots
 * of dead processes on the way. */
bool others_alive(struct dioshim_seg *seg, int self)
{
	int i, n = seg_slots(seg);

	for (i = 0; i < n; i++) {
		struct dioshim_slot *s = &seg->slot[i];
		uint64_t o = atomic_load(&s->owner.pid_start);

		if (i == self || !o)
			continue;
		if (slot_owner_alive(seg, s, o))
			return true;
		slot_free_if(seg, i, o);
	}
	return false;
}

/* Is any attached process alive?  Reads only: no lock needed. */
bool any_live_owner(struct dioshim_seg *seg)
{
	int i, n = seg_slots(seg);

	for (i = 0; i < n; i++) {
		uint64_t o = atomic_load(&seg->slot[i].owner.pid_start);

		if (slot_owner_alive(seg, &seg->slot[i], o))
			return true;
	}
	return false;
}

/* Remove the name of seg (dead now) and count it out of its place's
 * hint, inside a count window (shm.h): a recount meanwhile would find
 * the file gone and the count not yet down. */
void seg_unlink(struct dioshim_seg *seg, const char *path)
{
	hint_window_open(seg->hint_key);
	sys_unlink(path);
	hint_live_add(seg->hint_key, -1);
	hint_window_close(seg->hint_key);
}

/*
 * attach_lock, which every attach and detach takes and holds only briefly.
 * If it cannot be had in ATTACH_TIMEOUT_SEC and no attached process is
 * alive, its word is garbage (nobody alive can hold it): it is made anew.
 */
#define ATTACH_TIMEOUT_SEC 2
bool attach_lock_take(struct dioshim_seg *seg)
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
		log_event(LOG_FALLBACK, LOG_SEG(seg),
			  "attach lock held too long (%s): passing through",
			  strerror(rc));
		return false;
	}
	log_event(LOG_RECLAIM, LOG_SEG(seg),
		  "attach lock unusable with no live user: re-made");
	robust_init(&seg->attach_lock);
	return seg_lock_for(&seg->attach_lock, &recovered, 1) == 0;
}

/* ---- the mechanisms above, at a segment's turning points ------------ */

/* The table handed in (SEGMENT_HOOKS): the bounds of its section, which
 * the linker defines (and dioshim.map keeps out of the exports). */
extern const struct segment_hooks *const __start_dioshim_seghooks[]
	__attribute__((weak, visibility("hidden")));
extern const struct segment_hooks *const __stop_dioshim_seghooks[]
	__attribute__((weak, visibility("hidden")));

const struct segment_hooks *hook_table(void)
{
	const struct segment_hooks *const *first = __start_dioshim_seghooks;
	const struct segment_hooks *const *end = __stop_dioshim_seghooks;

	return first < end ? *first : NULL;
}

void hook_made(struct dioshim_seg *seg, const struct file_id *id)
{
	const struct segment_hooks *h = hook_table();

	if (h && h->made)
		h->made(seg, id);
}

/* False: the words are not the file's (first_in could not read its
 * size), the file must be kept exact. */
bool hook_first_in(struct dioshim_seg *seg, int fd)
{
	const struct segment_hooks *h = hook_table();

	return !h || !h->first_in || h->first_in(seg, fd);
}

/* Without mechanisms above, nothing is ever reserved: nothing to cut. */
bool hook_last_out(struct shim_file *f, int fd)
{
	const struct segment_hooks *h = hook_table();

	return !h || !h->last_out || h->last_out(f, fd);
}

void hook_image_gone(struct dioshim_seg *seg)
{
	const struct segment_hooks *h = hook_table();

	if (h && h->image_gone)
		h->image_gone(seg);
}

bool segment_words_repair(struct shim_file *f, int fd)
{
	const struct segment_hooks *h = hook_table();

	return h && h->words_repair && h->words_repair(f, fd);
}

void segment_moved(struct shim_file *f, int fd)
{
	const struct segment_hooks *h = hook_table();

	if (h && h->moved)
		h->moved(f, fd);
}

void segment_budget_recount(uint64_t key, uint64_t dev)
{
	const struct segment_hooks *h = hook_table();

	if (h && h->budget_recount)
		h->budget_recount(key, dev);
}

/* ---- making a segment's words, retiring one ---------------------------- */

/* What fd's file is, for `dioshim gc`: its handle, if it fits. */
static void seg_note_handle(struct dioshim_seg *seg, int fd)
{
	union {
		struct file_handle h;
		unsigned char buf[sizeof(struct file_handle) +
				  sizeof(seg->handle.fh)];
	} u;
	int mnt;

	u.h.handle_bytes = sizeof(seg->handle.fh);
	seg->handle.fh_bytes = 0;
	if (name_to_handle_at(fd, "", &u.h, &mnt, AT_EMPTY_PATH))
		return;
	memcpy(seg->handle.fh, u.h.f_handle, u.h.handle_bytes);
	seg->handle.fh_type = u.h.handle_type;
	seg->handle.fh_bytes = u.h.handle_bytes;
}

/* Where fd's file is, for `dioshim gc`; empty if it has no name. */
static void seg_note_path(struct dioshim_seg *seg, int fd)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = sys_readlinkat(AT_FDCWD, link, seg->path, sizeof(seg->path) - 1);
	if (n <= 0 || n >= (ssize_t)sizeof(seg->path) - 1 ||
	    seg->path[0] != '/' || strstr(seg->path, " (deleted)"))
		n = 0;
	seg->path[n] = '\0';
	seg_note_handle(seg, fd);
}

void seg_init_undo(void *map)
{
	seg_unlock(&((struct dioshim_seg *)map)->attach_lock);
}

void seg_init(void *map, const void *argp)
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
	hook_made(seg, id);
	robust_init(&seg->barrier_lock);
	robust_init(&seg->ext_lock);
	robust_init(&seg->attach_lock);
	robust_init(&seg->commit_lock);
	/* Held until the creator has recovered the file: an attacher that
	 * finds the new segment waits for it in seg_join. */
	lock_want(LOCK_ATTACH, &seg->attach_lock);
	pthread_mutex_lock(&seg->attach_lock);
	lock_got(LOCK_ATTACH, &seg->attach_lock);
	seg_note_path(seg, arg->fd);
	owner_set_self(&seg->creator);
	*arg->slot = 0;
	lifeline_register(arg->hint_key, owner_token());
	/* The first page of slots was allocated with the head. */
	atomic_store(&seg->slots_hi, 4096 / sizeof(struct dioshim_slot));
	owner_set_self(&seg->slot[0].owner);
	atomic_store(&seg->users, 1);
	atomic_store_explicit(&seg->state, DIOSHIM_SEG_READY,
			      memory_order_release);
}

/* Mark seg dead, remove its name and count it out of the hint (its
 * attach lock held).  Once only: a segment dead already is not ours to
 * unlink, the name may be a new segment's. */
void seg_retire(struct dioshim_seg *seg, const char *path)
{
	lock_held(LOCK_ATTACH);

	if (atomic_load(&seg->state) == DIOSHIM_SEG_DEAD)
		return;
	atomic_store(&seg->state, DIOSHIM_SEG_DEAD);
	seg_unlink(seg, path);
}

/* The segment at path mapped, if it is one of this layout, with its
 * attach lock held; NULL (nothing mapped) if not. */
struct dioshim_seg *seg_open_locked(const char *path)
{
	struct shm_want want = { SHM_SEG_ANY, 0, NULL };
	struct dioshim_seg *seg = shm_open_existing(path, SEG_SIZE, true,
						    &want);

	if (!seg)
		return NULL;
	if (seg->magic == DIOSHIM_SEG_MAGIC &&
	    seg->version == DIOSHIM_LAYOUT_VERSION && seg->size == SEG_SIZE &&
	    attach_lock_take(seg))
		return seg;
	sys_munmap(seg, SEG_SIZE);
	return NULL;
}

/* seg_open_locked's segment given back. */
void seg_close_locked(struct dioshim_seg *seg)
{
	seg_unlock(&seg->attach_lock);
	sys_munmap(seg, SEG_SIZE);
}
