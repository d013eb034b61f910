// SPDX-License-Identifier: MIT
/*
 * The shared segment of a file: membership.  Validate, attach (create),
 * join, detach, reclaim the slots of the dead; fork, exec and vfork.  The
 * shared files themselves are shm.c's, their owners owner.c's.
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

#include "dioshim.h"

#include "owner.h"
#include "shm.h"

#include "config.h"
#include "inflight.h"
#include "log.h"
#include "mem.h"
#include "record.h"
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
static bool seg_header_ok(const struct dioshim_seg *seg, uint64_t dev,
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

/* A segment being made (attach_lock held, nobody in it): its barrier
 * raised at once (BARRIER_CHANGING: its words are not yet the file's),
 * for its maker to lower (barrier_lower) once they are.  False if the
 * barrier's lock is unusable. */
static bool barrier_hold_new(struct dioshim_seg *seg)
{
	bool recovered;

	if (!seg_lock(&seg->barrier_lock, &recovered))
		return false;
	/* Its words wait for the guests' writes: CHANGING, so that its
	 * maker's death leaves them to be taken from the kernel. */
	atomic_store_explicit(&seg->barrier, BARRIER_CHANGING,
			      memory_order_seq_cst);
	return true;
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
static bool slot_back_range(struct dioshim_seg *seg, int n)
{
	uintptr_t from = (uintptr_t)&seg->slot[0];
	uintptr_t to = ((uintptr_t)&seg->slot[n] + 4095) & ~(uintptr_t)4095;

	return !SYS_TRY(madvise((void *)from, to - from,
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
	if (madvise((char *)seg + DIOSHIM_LAZY_OFF + (size_t)first * 4096,
		    (size_t)(last - first + 1) * 4096, MADV_POPULATE_WRITE)) {
		log_once("shared memory for the extent-lock table or the "
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

		if ((had & (1u << pg)) && madvise(page, 4096, MADV_REMOVE))
			memset(page, 0, 4096);
	}
}

static bool slot_back(struct dioshim_seg *seg, int i)
{
	if ((uint32_t)i < atomic_load(&seg->slots_hi))
		return true;
	if (!slot_back_range(seg, i + 1)) {
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
		if (slot_owner_alive(seg, s, o))
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

		if (slot_owner_alive(seg, &seg->slot[i], o))
			return true;
	}
	return false;
}

/* Remove the name of seg (dead now) and count it out of its place's
 * hint, inside a count window (shm.h): a recount meanwhile would find
 * the file gone and the count not yet down. */
static void seg_unlink(struct dioshim_seg *seg, const char *path)
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

/* ---- the mechanisms above, at a segment's turning points ------------ */

static const struct segment_hooks *hooks;

void segment_set_hooks(const struct segment_hooks *h)
{
	__atomic_store_n(&hooks, h, __ATOMIC_RELEASE);
}

static void hook_made(struct dioshim_seg *seg, const struct file_id *id)
{
	const struct segment_hooks *h = __atomic_load_n(&hooks,
						       __ATOMIC_ACQUIRE);

	if (h && h->made)
		h->made(seg, id);
}

/* False: the words are not the file's (first_in could not read its
 * size), the file must be kept exact. */
static bool seg_recover(struct dioshim_seg *seg, int fd)
{
	const struct segment_hooks *h = __atomic_load_n(&hooks,
						       __ATOMIC_ACQUIRE);

	return !h || !h->first_in || h->first_in(seg, fd);
}

/* Without mechanisms above, nothing is ever reserved: nothing to cut. */
static bool last_out(struct shim_file *f, int fd)
{
	const struct segment_hooks *h = __atomic_load_n(&hooks,
						       __ATOMIC_ACQUIRE);

	return !h || !h->last_out || h->last_out(f, fd);
}

static void image_gone(struct dioshim_seg *seg)
{
	const struct segment_hooks *h = __atomic_load_n(&hooks,
						       __ATOMIC_ACQUIRE);

	if (h && h->image_gone)
		h->image_gone(seg);
}

bool segment_words_repair(struct shim_file *f, int fd)
{
	const struct segment_hooks *h = __atomic_load_n(&hooks,
						       __ATOMIC_ACQUIRE);

	return h && h->words_repair && h->words_repair(f, fd);
}

void segment_moved(struct shim_file *f, int fd)
{
	const struct segment_hooks *h = __atomic_load_n(&hooks,
						       __ATOMIC_ACQUIRE);

	if (h && h->moved)
		h->moved(f, fd);
}

void segment_budget_recount(uint64_t key, uint64_t dev)
{
	const struct segment_hooks *h = __atomic_load_n(&hooks,
						       __ATOMIC_ACQUIRE);

	if (h && h->budget_recount)
		h->budget_recount(key, dev);
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
		sys_munmap(grave[i], SEG_SIZE);
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
	n = syscall(SYS_readlinkat, AT_FDCWD, link, seg->path,
		    sizeof(seg->path) - 1);
	if (n <= 0 || n >= (ssize_t)sizeof(seg->path) - 1 ||
	    seg->path[0] != '/' || strstr(seg->path, " (deleted)"))
		n = 0;
	seg->path[n] = '\0';
	seg_note_handle(seg, fd);
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
	hook_made(seg, id);
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
	lifeline_register(arg->hint_key, owner_token());
	/* The first page of slots was allocated with the head. */
	atomic_store(&seg->slots_hi, 4096 / sizeof(struct dioshim_slot));
	owner_set_self(&seg->slot[0].owner);
	atomic_store(&seg->users, 1);
	atomic_store_explicit(&seg->state, DIOSHIM_SEG_READY,
			      memory_order_release);
}

/*
 * Attach to the segment at path (mapped as seg), under its attach_lock.
 * Returns the slot, JOIN_NONE to give up (not this file's segment, or one
 * we cannot touch), JOIN_AGAIN to start over (the segment died),
 * JOIN_GUEST to write it as a guest (no slot to be had).
 */
#define JOIN_NONE (-1)
#define JOIN_AGAIN (-2)
#define JOIN_GUEST (-3)
#define JOIN_GUEST_UNANNOUNCED (-4) /* a guest that could not say so */
static int seg_join(struct dioshim_seg *seg, const char *path,
		    const struct file_id *id, int fd)
{
	int slot;

	if (!attach_lock_take(seg)) {
		/* Announced first, then looked at: a segment that died
		 * meanwhile is not ours to make exact. */
		bool held = guest_hold(seg->hint_key, id->dev, id->ino);

		if (atomic_load(&seg->state) != DIOSHIM_SEG_DEAD)
			return held ? JOIN_GUEST : JOIN_GUEST_UNANNOUNCED;
		if (held)
			guest_drop(seg->hint_key, id->dev, id->ino);
		return JOIN_AGAIN;
	}
	if (atomic_load(&seg->state) == DIOSHIM_SEG_DEAD) {
		seg_unlock(&seg->attach_lock);
		return JOIN_AGAIN;
	}
	/* Every walk of the slots goes up to slots_hi, a word any writer
	 * of the file can set: the pages below it are ours to touch only
	 * once allocated (a no-op where they are). */
	if (seg_slots(seg) > 0 && !slot_back_range(seg, seg_slots(seg))) {
		/* Not a member, and never beside its reservation: a guest,
		 * the file exact (DESIGN.md 4, a fallback is per file).  The
		 * pages exist in the file (slots_hi grows only once they
		 * do): the guest's barrier reads them without a fault. */
		slot = guest_hold(seg->hint_key, id->dev, id->ino)
			       ? JOIN_GUEST
			       : JOIN_GUEST_UNANNOUNCED;
		seg_unlock(&seg->attach_lock);
		log_msg("%s: its slots cannot be mapped (%s): writing as a "
			"guest, the file exact", path, strerror(errno));
		return slot;
	}
	if (!birth_matches(seg, id)) {
		/* The inode number was reused; the old file's segment may
		 * go only when nobody holds the old file open. */
		if (others_alive(seg, -1)) {
			seg_unlock(&seg->attach_lock);
			log_msg("%s: belongs to an older file still open "
				"elsewhere: passing through", path);
			return JOIN_NONE;
		}
		atomic_store(&seg->state, DIOSHIM_SEG_DEAD);
		seg_unlink(seg, path);
		seg_unlock(&seg->attach_lock);
		return JOIN_AGAIN;
	}
	if (!others_alive(seg, -1)) {
		bool started = seg_recover(seg, fd);

		/* Exact stays only while a guest lives, or words that are
		 * not the file's could not be started anew. */
		atomic_store(&seg->exact,
			     !started || guest_present(seg->hint_key, id->dev,
						       id->ino, true));
	}
	slot = slot_claim(seg);
	/* A guest announces itself before the last member can leave: that
	 * one then keeps the segment for it. */
	if (slot < 0 && !guest_hold(seg->hint_key, id->dev, id->ino)) {
		log_msg("%s: a guest that cannot announce itself", path);
		slot = JOIN_GUEST_UNANNOUNCED;
	}
	seg_unlock(&seg->attach_lock);
	if (slot < 0) {
		log_msg("%s: no attach slot (all %d taken, or no memory for "
			"one): writing as a guest, the file exact", path,
			DIOSHIM_MAX_PROCS);
		return slot == JOIN_GUEST_UNANNOUNCED ? slot : JOIN_GUEST;
	}
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
	sys_munmap(seg, SEG_SIZE);
	return taken;
}

struct shim_file *segment_attach(int fd, const struct file_id *id, bool create)
{
	struct guest_pin pin;
	struct shim_file *f = segment_attach_pin(fd, id,
						create ? SEG_MAKE : SEG_FIND, &pin);

	if (pin.held)
		guest_drop(pin.key, pin.dev, pin.ino);
	return f;
}

/*
 * A lazy writer's announcement when the file's places (where its segment
 * would be, and where it would be had its group write bit been the other
 * way) surely hold no segment, before and after it: no segment to look
 * for, none made meanwhile that did not see it.
 */
enum lazy_step { LAZY_SLOW, LAZY_ALONE, LAZY_LOOK, LAZY_MAKE };

/* A lone writer's announcement of id in key's place: ANNOUNCED (*pin
 * holds it), SHARED (another description of ours, or another guest,
 * writes the file: it is written in parallel) or NONE (none could be
 * made). */
enum announce { ANNOUNCE_NONE, ANNOUNCE_DONE, ANNOUNCE_SHARED };

static enum announce guest_announce(uint64_t key, const struct file_id *id,
				    struct guest_pin *pin)
{
	if (guest_mine(key, id->dev, id->ino))
		return ANNOUNCE_SHARED;
	if (!guest_hold(key, id->dev, id->ino))
		return ANNOUNCE_NONE;
	if (guest_present(key, id->dev, id->ino, false)) {
		guest_drop(key, id->dev, id->ino);
		return ANNOUNCE_SHARED;
	}
	*pin = (struct guest_pin){ key, id->dev, id->ino, true };
	return ANNOUNCE_DONE;
}

static enum lazy_step lazy_announce(const struct file_id *id,
				    struct guest_pin *pin)
{
	struct file_id flip = *id;
	struct shm_owner own;
	uint64_t key, other;

	seg_owner_for(id, &own, &key);
	flip.mode ^= S_IWGRP;
	seg_owner_for(&flip, &own, &other);
	if (!guest_mine(key, id->dev, id->ino) &&
	    (!hint_key_idle(key) || !hint_key_idle(other)))
		return LAZY_SLOW;
	switch (guest_announce(key, id, pin)) {
	case ANNOUNCE_SHARED:
		return LAZY_MAKE;
	case ANNOUNCE_NONE:
		return LAZY_SLOW;
	default:
		return hint_key_idle(key) && hint_key_idle(other) ? LAZY_ALONE
								  : LAZY_LOOK;
	}
}

/* One attach under way (segment_attach_pin), through its steps. */
struct attach {
	int fd;
	const struct file_id *id;
	enum seg_want mode;
	bool create;
	struct guest_pin *pin;
	char path[PATH_MAX];
	struct dioshim_seg *seg;
	int slot;
	/* moved: the segment is where a chmod left it; guest, held: we
	 * write as a guest (held: announced); wait_guests: we made it
	 * while guests had announced themselves, its barrier up. */
	bool moved, guest, held, wait_guests;
};

/* Our attachment for id, one reference more; NULL if none.  files_lock
 * held. */
static struct shim_file *file_find(const struct file_id *id)
{
	struct shim_file *f;

	for (f = files_head; f; f = f->next) {
		if (f->dev == id->dev && f->ino == id->ino &&
		    !f->exec_released && birth_matches(f->seg, id)) {
			f->refs++;
			return f;
		}
	}
	return NULL;
}

/* What the attach may do (a->mode, a->create); false for a lone writer
 * that needs no segment at all (lazy, and surely alone). */
static bool attach_decide(struct attach *a)
{
	/* A record of a reservation a crash left: the segment's first user
	 * recovers the file (first_in), so it is made now — by any user of
	 * the file, a reader too (DESIGN.md 5: the first shimmed open, in
	 * any mode). */
	if (a->mode != SEG_MAKE && record_present(a->fd))
		a->mode = SEG_MAKE;
	a->create = a->mode != SEG_FIND;
	if (a->mode == SEG_LAZY) {
		switch (lazy_announce(a->id, a->pin)) {
		case LAZY_ALONE:
			return false;
		case LAZY_LOOK:
			a->create = false;
			break;
		case LAZY_MAKE:
			a->mode = SEG_MAKE;
			break;
		case LAZY_SLOW:
			break;
		}
	}
	return true;
}

/* a->seg was just made and published (its attach_lock held, slot 0
 * ours): recover the file, and hold the barrier for guests that
 * announced themselves. */
static void attach_made(struct attach *a, uint64_t key)
{
	struct dioshim_seg *seg = a->seg;
	const struct file_id *id = a->id;

	hint_published(key);
	if (!seg_recover(seg, a->fd))
		atomic_store(&seg->exact, 1);
	/* Published: a guest that announced itself before looking found
	 * nothing here.  It may be a lone writer that joins at its next
	 * call: waited for once we are in. */
	a->wait_guests = guest_present(key, id->dev, id->ino, true);
	/* Up before anyone can join: a guest that joins writes nothing
	 * through the segment until the words hold its own writes. */
	if (a->wait_guests && !barrier_hold_new(seg)) {
		atomic_store(&seg->exact, 1);
		a->wait_guests = false;
	}
	seg_unlock(&seg->attach_lock);
}

enum { ATTACH_AGAIN, ATTACH_DONE };

/* No segment at a->path: look where a chmod may have left one, make it,
 * or announce ourselves as a guest.  ATTACH_AGAIN: look once more;
 * ATTACH_DONE: a->seg made, or none to be had (NULL). */
static int attach_make(struct attach *a)
{
	const struct file_id *id = a->id;
	struct seg_init_arg arg = { id, a->fd, &a->slot, 0 };
	struct shm_owner own;

	/* The file's group write bit changed while a segment serves it:
	 * everyone who can joins that one. */
	if (!a->moved && other_place_taken(id) &&
	    !segment_path_of(a->path, sizeof(a->path), id->dev, id->ino,
			     id->mode ^ S_IWGRP, id->gid, false)) {
		a->moved = true;
		return ATTACH_AGAIN;
	}
	if (!a->create || a->moved)
		return ATTACH_DONE;
	seg_owner_for(id, &own, &arg.hint_key);
	/* Lazy: announced, then looked at again — a segment made meanwhile
	 * is joined.  Another guest there already: two processes write it,
	 * so it is made (exact while that one stays a guest). */
	if (a->mode == SEG_LAZY && !a->pin->held) {
		a->mode = SEG_MAKE;
		if (guest_announce(arg.hint_key, id, a->pin) == ANNOUNCE_DONE) {
			a->create = false;
			return ATTACH_AGAIN;
		}
	}
	hint_window_open(arg.hint_key);
	hint_live_add(arg.hint_key, 1);
	a->seg = shm_create_published(a->path, SEG_SIZE, &own, seg_init,
				      seg_init_undo, &arg);
	if (!a->seg)
		hint_live_add(arg.hint_key, -1);
	hint_window_close(arg.hint_key);
	if (a->seg) {
		attach_made(a, arg.hint_key);
		return ATTACH_DONE;
	}
	if (errno == EEXIST)
		return ATTACH_AGAIN;
	log_msg("%s: cannot create (%s): passing through", a->path,
		strerror(errno));
	/* No segment (a full directory): we write the file as it is, so no
	 * one may reserve in it while we live.  Announced as a guest, then
	 * looked at again: a segment made meanwhile is joined (and made
	 * exact), one made later starts exact. */
	if (!a->pin->held && guest_hold(arg.hint_key, id->dev, id->ino)) {
		*a->pin = (struct guest_pin){ arg.hint_key, id->dev, id->ino,
					      true };
		a->create = false;
		return ATTACH_AGAIN;
	}
	return ATTACH_DONE;
}

/* The file's segment found (or made) and joined: a->seg with a->slot,
 * or as a guest (a->guest); a->seg NULL if there is none to use. */
static void attach_seg(struct attach *a)
{
	int tries;

	for (tries = 0; tries < 8; tries++) {
		/* Where the file's mode says, or, once moved, where its
		 * segment was made before a chmod (validated as any of ours,
		 * then by its header). */
		struct shm_want want = { a->moved ? SHM_SEG_ANY : SHM_SEG_FILE,
					 0, a->id };

		a->seg = shm_open_existing(a->path, SEG_SIZE, true, &want);
		if (!a->seg && errno == ENOENT) {
			if (attach_make(a) == ATTACH_AGAIN)
				continue;
			break;
		}
		if (!a->seg) {
			/* One that is not ours (owner, mode, a link) stays
			 * so; anything else may pass, and is asked again. */
			if (errno != EPERM && errno != EACCES &&
			    errno != ELOOP && tries < 7)
				continue;
			log_msg("%s: cannot open (%s): passing through",
				a->path, strerror(errno));
			break;
		}
		if (!seg_header_ok(a->seg, a->id->dev, a->id->ino)) {
			log_msg("%s: corrupt or foreign segment: passing "
				"through", a->path);
			sys_munmap(a->seg, SEG_SIZE);
			a->seg = NULL;
			break;
		}
		a->slot = seg_join(a->seg, a->path, a->id, a->fd);
		if (a->slot >= 0)
			break;
		if (a->slot == JOIN_GUEST || a->slot == JOIN_GUEST_UNANNOUNCED) {
			a->guest = true;
			a->held = a->slot == JOIN_GUEST;
			a->slot = -1;
			break;
		}
		sys_munmap(a->seg, SEG_SIZE);
		a->seg = NULL;
		if (a->slot == JOIN_NONE)
			break;
	}
}

/* The attachment of a->seg, put on the process's list (files_lock
 * held); NULL, with the slot and holds given back, if there is no
 * memory for it. */
static struct shim_file *attach_track(struct attach *a)
{
	struct dioshim_seg *seg = a->seg;
	const struct file_id *id = a->id;
	struct shim_file *f = file_new();

	if (!f) {
		if (a->wait_guests) {
			/* Nobody reserves while the guests are there. */
			atomic_store(&seg->exact, 1);
			atomic_store(&seg->barrier, 0);
			seg_unlock(&seg->barrier_lock);
		}
		if (a->held)
			guest_drop(seg->hint_key, id->dev, id->ino);
		/* Give the slot back: we could not track it. */
		if (attach_lock_take(seg)) {
			slot_release(seg, a->slot);
			seg_unlock(&seg->attach_lock);
		}
		sys_munmap(seg, SEG_SIZE);
		return NULL;
	}
	f->seg = seg;
	f->dev = id->dev;
	f->ino = id->ino;
	f->fs_bit = id->fs_bit;
	f->dio_mem_align = id->dio_mem_align;
	f->dio_off_align = id->dio_off_align;
	f->slot = a->slot;
	f->guest = a->guest;
	f->guest_held = a->held;
	f->refs = 1;
	f->next = files_head;
	files_head = f;
	return f;
}

/* After files_lock: a guest makes the file exact before its first write;
 * a maker that met guests waits for them (lifecycle's guests_wait). */
static void attach_settle(struct shim_file *f, int fd, bool wait_guests)
{
	const struct segment_hooks *h;

	if (f->guest) {
		segment_serves(f, fd);
		return;
	}
	if (!wait_guests)
		return;
	h = __atomic_load_n(&hooks, __ATOMIC_ACQUIRE);
	if (h && h->guests_wait) {
		h->guests_wait(f, fd);
	} else {
		atomic_store(&f->seg->exact, 1);
		atomic_store(&f->seg->barrier, 0);
		seg_unlock(&f->seg->barrier_lock);
	}
}

struct shim_file *segment_attach_pin(int fd, const struct file_id *id,
				     enum seg_want mode, struct guest_pin *pin)
{
	struct attach a = { .fd = fd, .id = id, .mode = mode,
			    .create = mode != SEG_FIND, .pin = pin,
			    .slot = -1 };
	struct shim_file *f;

	pin->held = false;
	if (segment_path_of(a.path, sizeof(a.path), id->dev, id->ino,
			    id->mode, id->gid, a.create))
		return NULL;
	pthread_mutex_lock(&files_lock);
	f = file_find(id);
	if (!f && attach_decide(&a)) {
		attach_seg(&a);
		if (a.seg)
			f = attach_track(&a);
	}
	/* Attached (its hold, if a guest, taken in seg_join): the
	 * announcement of this call is not needed. */
	if (f && pin->held) {
		guest_drop(pin->key, pin->dev, pin->ino);
		pin->held = false;
	}
	pthread_mutex_unlock(&files_lock);
	if (f)
		attach_settle(f, fd, a.wait_guests);
	return f;
}

bool segment_serves_slow(struct shim_file *f, int fd)
{
	const struct segment_hooks *h = __atomic_load_n(&hooks,
						       __ATOMIC_ACQUIRE);
	struct dioshim_seg *seg = __atomic_load_n(&f->seg, __ATOMIC_ACQUIRE);

	if (f->guest && fd >= 0 && !atomic_load(&seg->exact) && h &&
	    h->guest_in)
		h->guest_in(f, fd);
	return false;
}

/*
 * Wait for this process's writes to f that are still in the kernel: a
 * thread writing through a descriptor that another thread closes, or an
 * exit or exec under way beside it.  The kernel alone keeps such a write
 * whole; the last user's cut, made before it is published, would cut it
 * (the kernel's truncate waits for it, then cuts: on XFS an acknowledged
 * write gone), and a slot given back with writes counted in it is one no
 * other process's barrier waits for.  New writes are held back by the
 * caller (f->leaving, or an exec pending).  Writes always come back; a
 * count that does not (one leaked by a longjmp out of a write) is waited
 * for DRAIN_OWN_MS at most.  Nothing between a write's count and its
 * uncount takes files_lock or fdt_lock.
 */
#define DRAIN_OWN_MS 30000
static void own_writes_drain(struct shim_file *f)
{
	static const struct timespec nap = { 0, 1000000 };
	int slot = __atomic_load_n(&f->slot, __ATOMIC_ACQUIRE), waited;

	if (slot < 0 || slot >= seg_slots(f->seg))
		return;
	for (waited = 0; waited < DRAIN_OWN_MS &&
			 slot_inflight(&f->seg->slot[slot]) > 0;
	     waited++)
		nanosleep(&nap, NULL);
	if (waited == DRAIN_OWN_MS)
		log_msg("writes of ours still in flight after %d ms: left",
			DRAIN_OWN_MS);
}

/* Mark seg dead, remove its name and count it out of the hint (its
 * attach lock held).  Once only: a segment dead already is not ours to
 * unlink, the name may be a new segment's. */
static void seg_retire(struct dioshim_seg *seg, const char *path)
{
	if (atomic_load(&seg->state) == DIOSHIM_SEG_DEAD)
		return;
	atomic_store(&seg->state, DIOSHIM_SEG_DEAD);
	seg_unlink(seg, path);
}

/* The segment at path mapped, if it is one of this layout, with its
 * attach lock held; NULL (nothing mapped) if not. */
static struct dioshim_seg *seg_open_locked(const char *path)
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
static void seg_close_locked(struct dioshim_seg *seg)
{
	seg_unlock(&seg->attach_lock);
	sys_munmap(seg, SEG_SIZE);
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
	if (f->guest_held)
		guest_drop(seg->hint_key, f->dev, f->ino);
	atomic_store(&f->leaving, FILE_LEAVING);
	own_writes_drain(f);
	if (attach_lock_take(seg)) {
		slot_release(seg, f->slot); /* none, for a guest */
		/* A segment already dead (its last user left it at exec) is
		 * not ours to unlink: the name may be a new segment's.  One
		 * a guest still writes stays, exact, for it to remove. */
		if (atomic_load(&seg->state) != DIOSHIM_SEG_DEAD &&
		    !others_alive(seg, -1) &&
		    !guest_present(seg->hint_key, f->dev, f->ino, false) &&
		    last_out(f, fd) && !seg_path_of(seg, path, sizeof(path)))
			seg_retire(seg, path);
		seg_unlock(&seg->attach_lock);
	}
	atomic_store(&f->leaving, FILE_GONE);
	grave_push(f);
}

/*
 * exec: the new image is another program, maybe not under the shim; it
 * keeps the descriptors, not our books.  Leave the file as a process that
 * ends would: wait for this process's writes in flight — exec
 * is about to kill the threads that made them — give the slot back, and,
 * as the last user, cut the reserved tail and remove the segment.  A new
 * image under the shim attaches again on first use.  f->slot is -1 until
 * segment_exec_undo.
 */
void segment_exec_release(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	char path[PATH_MAX];

	pthread_mutex_lock(&files_lock);
	if (f->slot < 0 || f->exec_released)
		goto out;
	/* New writes step back while the exec is pending (enter()). */
	own_writes_drain(f);
	if (!attach_lock_take(seg))
		goto out;
	slot_release(seg, f->slot);
	f->slot = -1;
	f->exec_released = true;
	if (!others_alive(seg, -1) &&
	    !guest_present(seg->hint_key, f->dev, f->ino, false) &&
	    last_out(f, fd) &&
	    !seg_path_of(seg, path, sizeof(path)))
		seg_retire(seg, path);
	seg_unlock(&seg->attach_lock);
out:
	pthread_mutex_unlock(&files_lock);
}

/* segment_exec_pending is defined in hot.c. */

void segment_exec_wait(void)
{
	static const struct timespec nap = { 0, 100000 };

	while (__atomic_load_n(&segment_exec_pending, __ATOMIC_ACQUIRE))
		nanosleep(&nap, NULL);
}

bool segment_exec_revive(struct shim_file *f, struct shim_file *g)
{
	struct dioshim_seg *old;
	bool done = false;

	pthread_mutex_lock(&files_lock);
	/* Only a fresh attachment of the file's new segment: one that other
	 * descriptors share already stays theirs. */
	if (g && g != f && g->refs == 1 && g->slot >= 0 && f->exec_released) {
		old = f->seg;
		__atomic_store_n(&f->seg, g->seg, __ATOMIC_RELEASE);
		f->exec_released = false;
		__atomic_store_n(&f->slot, g->slot, __ATOMIC_RELEASE);
		g->seg = old;
		g->slot = -1;
		g->exec_released = true;
		done = true;
	}
	pthread_mutex_unlock(&files_lock);
	return done;
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

/* Under files_lock: the last reference went; fd (or the kept copy) is
 * the file's, or -1. */
static void file_last_put(struct shim_file *f, int fd)
{
	int kept = fd_kept(f->kept);
	struct stat st;

	/* Never cut another file through a number that was ours. */
	if (kept >= 0 && (sys_fstat(kept, &st) || (uint64_t)st.st_dev != f->dev ||
			  (uint64_t)st.st_ino != f->ino)) {
		log_msg("the kept copy of a file is not it any more");
		kept = -1;
		fd_unkeep(f->kept, false); /* nor closed: not ours now */
		f->kept = 0;
	}

	file_detach(f, fd >= 0 ? fd : kept);
	fd_unkeep(f->kept, true);
	f->kept = 0;
}

void segment_put(struct shim_file *f, int fd)
{
	pthread_mutex_lock(&files_lock);
	if (--f->refs == 0) {
		file_last_put(f, fd);
	} else if (f->refs == 1 && f->pinned && fd >= 0 && !f->kept) {
		/* The program's last descriptor goes with writes in flight:
		 * the kernel keeps the file open for them, so do we. */
		f->kept = fd_keep(fd);
		if (!f->kept)
			log_msg("closed with writes in flight, and no room to "
				"keep it: its reserved tail stays");
	}
	pthread_mutex_unlock(&files_lock);
}

void segment_pin(struct shim_file *f)
{
	pthread_mutex_lock(&files_lock);
	f->refs++;
	f->pinned = true;
	pthread_mutex_unlock(&files_lock);
}

void segment_unpin(struct shim_file *f)
{
	pthread_mutex_lock(&files_lock);
	f->pinned = false;
	if (--f->refs == 0)
		file_last_put(f, -1);
	pthread_mutex_unlock(&files_lock);
}

void segment_atfork_prepare(void)
{
	/* The order every path takes them in: files_lock -> hint_lock. */
	pthread_mutex_lock(&files_lock);
	hint_atfork_prepare();
}

void segment_atfork_parent(void)
{
	pthread_mutex_unlock(&files_lock);
	hint_atfork_release();
}

void segment_atfork_child(void)
{
	struct shim_file *f, **pp;

	pthread_mutex_unlock(&files_lock);
	hint_atfork_release();
	owner_refresh();
	lifeline_forget_inherited();
	hint_atfork_child();
	guest_atfork_child();
	pthread_mutex_lock(&files_lock);
	/* The child holds the parent's fds: it is a user of each file too. */
	for (pp = &files_head; (f = *pp);) {
		int slot = -1;

		/* A guest's child is one too: its lock is taken anew. */
		if (f->guest) {
			pp = &f->next;
			continue;
		}
		if (attach_lock_take(f->seg)) {
			slot = slot_claim(f->seg);
			if (slot < 0)
				f->guest_held = guest_hold(f->seg->hint_key,
							   f->dev, f->ino);
			seg_unlock(&f->seg->attach_lock);
		} else {
			f->guest_held = guest_hold(f->seg->hint_key, f->dev,
						   f->ino);
		}
		if (slot < 0) {
			/* Keep the mapping (ofds point here) but stop using
			 * the parent's slot: the child writes as a guest,
			 * making the file exact on its first call. */
			log_msg("fork: no slot for the child: a guest");
			f->slot = -1;
			f->guest = true;
		} else {
			f->slot = slot;
		}
		pp = &f->next;
	}
	pthread_mutex_unlock(&files_lock);
}

/* The segments counted by place (segment_recount): our own hints'. */
static struct {
	uint64_t key[HINTS_MAX], n[HINTS_MAX];
	int keys;
} counted;

static void count_in(uint64_t key)
{
	int i;

	for (i = 0; i < counted.keys; i++)
		if (counted.key[i] == key)
			counted.n[i]++;
}

/* Give back, in one segment, the slots that name this process; count it
 * in its place. */
static void reclaim_self_in(const char *path, uint64_t dev, uint64_t ino,
			    void *arg)
{
	struct dioshim_seg *seg = seg_open_locked(path);
	int i, n;

	if (!seg)
		return;
	count_in(seg->hint_key);
	n = seg_slots(seg);
	for (i = 0; i < n; i++)
		if (owner_is_self(&seg->slot[i].owner))
			slot_release(seg, i);
	image_gone(seg);
	seg_close_locked(seg);
}

static void count_one(const char *path, uint64_t dev, uint64_t ino,
		      void *arg)
{
	struct seg_peek p;

	if (segment_peek(path, &p))
		count_in(p.hint_key);
}

static uint64_t recount_key(uint64_t key)
{
	counted.keys = 1;
	counted.key[0] = key;
	counted.n[0] = 0;
	segment_walk(count_one, NULL);
	return counted.n[0];
}

/* After a scan that counted our places' segments (counted): a place
 * whose hint counts more than it has is counted anew, under the count's
 * lock (a hint that over-counts, left by a process killed in a window,
 * sends every call of every process of its place down the slow path). */
static void recount_places(void)
{
	uint64_t keys[HINTS_MAX], live[HINTS_MAX], seen[HINTS_MAX];
	int i, j, n = hint_mine(keys, live, HINTS_MAX);

	for (i = 0; i < n; i++) {
		seen[i] = 0;
		for (j = 0; j < counted.keys; j++)
			if (counted.key[j] == keys[i])
				seen[i] = counted.n[j];
	}
	for (i = 0; i < n; i++)
		if (live[i] > seen[i])
			hint_recount(keys[i], recount_key);
}

/* Set up counted for our own places, before a scan. */
static void count_start(void)
{
	uint64_t live[HINTS_MAX];

	counted.keys = hint_mine(counted.key, live, HINTS_MAX);
	memset(counted.n, 0, sizeof(counted.n));
}

void segment_recount(void)
{
	count_start();
	segment_walk(count_one, NULL);
	recount_places();
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
	/* Nothing to do unless some segment exists: the common case costs
	 * one load of the hint. */
	if (!hint_maybe_live())
		return;
	count_start();
	segment_walk(reclaim_self_in, NULL);
	recount_places();
}

/* ---- the dioshim command: gc and users -------------------------------- */

int segment_live_users(struct dioshim_seg *seg)
{
	int i, n = 0, hi = seg_slots(seg);

	for (i = 0; i < hi; i++) {
		uint64_t o = atomic_load(&seg->slot[i].owner.pid_start);

		if (slot_owner_alive(seg, &seg->slot[i], o))
			n++;
	}
	return n;
}

enum gc_verdict segment_gc(const char *segpath, char *file, size_t cap,
			   struct dioshim_fh *fh)
{
	struct dioshim_seg *seg = seg_open_locked(segpath);
	enum gc_verdict v;

	file[0] = '\0';
	if (!seg)
		return GC_FOREIGN;
	memcpy(file, seg->path, cap < sizeof(seg->path) ? cap : sizeof(seg->path));
	file[cap - 1] = '\0';
	*fh = seg->handle;
	if (fh->fh_bytes > sizeof(fh->fh))
		fh->fh_bytes = 0;
	if (atomic_load(&seg->state) != DIOSHIM_SEG_DEAD &&
	    others_alive(seg, -1)) {
		v = GC_IN_USE;
	} else if (atomic_load(&seg->state) == DIOSHIM_SEG_DEAD ||
		   (atomic_load(&seg->phys) <= atomic_load(&seg->eof) &&
		    !atomic_load(&seg->recorded_phys))) {
		/* Nothing reserved: the segment is all there is to remove
		 * (one dead already, left by a process killed as it removed
		 * it, is removed too). */
		if (atomic_load(&seg->state) == DIOSHIM_SEG_DEAD)
			sys_unlink(segpath);
		seg_retire(seg, segpath);
		v = GC_REMOVED;
	} else {
		/* A tail to cut: that needs the file (segment_attach then
		 * segment_put, by the caller). */
		v = GC_NEEDS_FILE;
	}
	seg_close_locked(seg);
	return v;
}

bool segment_gc_file_gone(const char *segpath, const struct dioshim_fh *fh)
{
	struct dioshim_seg *seg = seg_open_locked(segpath);
	bool gone = false;

	if (!seg)
		return false;
	/* Still that file's (the name may be a new file's now: the inode
	 * number reused, its handle another generation), and still nobody
	 * alive (a process may have come since). */
	if (!memcmp(&seg->handle, fh, sizeof(*fh)) &&
	    atomic_load(&seg->state) != DIOSHIM_SEG_DEAD &&
	    !others_alive(seg, -1)) {
		seg_retire(seg, segpath);
		gone = true;
	}
	seg_close_locked(seg);
	return gone;
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
		sys_munmap(seg, SEG_SIZE);
		errno = EPROTO;
		return NULL;
	}
	return seg;
}

/* Read one field of the segment open at fd into dst (its size). */
#define PEEK(fd, dst, field)                                                \
	(sys_pread(fd, dst, sizeof(((struct dioshim_seg *)0)->field),       \
		   offsetof(struct dioshim_seg, field)) ==                   \
	 (ssize_t)sizeof(((struct dioshim_seg *)0)->field))

bool segment_peek(const char *path, struct seg_peek *p)
{
	struct shm_want want = { SHM_SEG_ANY, 0, NULL };
	uint32_t version, size, hi, ns = (uint32_t)owner_self()->pidns;
	struct dioshim_owner o;
	uint64_t magic;
	int fd = shm_open_checked(path, SEG_SIZE, false, &want);
	bool ok;
	uint32_t i;

	if (fd < 0)
		return false;
	p->npids = 0;
	ok = PEEK(fd, &magic, magic) && PEEK(fd, &version, version) &&
	     PEEK(fd, &size, size) && magic == DIOSHIM_SEG_MAGIC &&
	     version == DIOSHIM_LAYOUT_VERSION && size == SEG_SIZE &&
	     PEEK(fd, &p->dev, dev) && PEEK(fd, &p->ino, ino) &&
	     PEEK(fd, &p->phys, phys) && PEEK(fd, &p->eof, eof) &&
	     PEEK(fd, &p->hint_key, hint_key) &&
	     PEEK(fd, &p->budget_charged, budget_charged) &&
	     PEEK(fd, p->path, path) && PEEK(fd, &hi, slots_hi);
	p->path[sizeof(p->path) - 1] = 0;
	if (hi > DIOSHIM_MAX_PROCS)
		hi = DIOSHIM_MAX_PROCS;
	for (i = 0; ok && i < hi && p->npids < SEG_PEEK_PIDS; i++)
		if (sys_pread(fd, &o, sizeof(o),
			      (off_t)(offsetof(struct dioshim_seg, slot) +
				      i * sizeof(struct dioshim_slot) +
				      offsetof(struct dioshim_slot, owner))) ==
			    (ssize_t)sizeof(o) &&
		    o.pid_start && (uint32_t)o.pidns == ns)
			p->pids[p->npids++] =
				(pid_t)(o.pid_start & DIOSHIM_OWNER_PID_MASK);
	sys_close(fd);
	return ok;
}

void segment_unmap(struct dioshim_seg *seg)
{
	sys_munmap(seg, SEG_SIZE);
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
	sys_munmap(seg, SEG_SIZE);
	return ok;
}

/* ---- identifying a file ------------------------------------------------ */

bool file_identify(int fd, struct file_id *id)
{
	struct statx stx;
	struct statfs sfs;

	if (sys_statx(fd, "", AT_EMPTY_PATH,
		      STATX_TYPE | STATX_MODE | STATX_UID | STATX_GID |
			      STATX_INO | STATX_SIZE | STATX_BTIME |
			      STATX_DIOALIGN,
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
	/* Writers a segment could not let in — anyone, for a world-writable
	 * file; the users and groups an ACL names — would write beside a
	 * reservation: such a file is served for no one (DESIGN.md 4). */
	if ((stx.stx_mode & S_IWOTH) ||
	    syscall(SYS_fgetxattr, fd, "system.posix_acl_access", NULL, 0) > 0)
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
	id->dio_mem_align = id->dio_off_align = 0;
	if (stx.stx_mask & STATX_DIOALIGN) {
		id->dio_mem_align = stx.stx_dio_mem_align;
		id->dio_off_align = stx.stx_dio_offset_align;
	}
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
