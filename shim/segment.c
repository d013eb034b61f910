// SPDX-License-Identifier: MIT
/*
 * The shared segment of a file: membership.  Attach (create), join,
 * detach; fork, exec and vfork.  A segment's own words (header, slots,
 * attach_lock, hooks) are segbase.c's, the view from outside (gc,
 * recounts, peeks) segview.c's, the shared files shm.c's, their owners
 * owner.c's.
 *
 * Layer L1, its top: calls segbase.c and the rest of L1 (shared files,
 * lifelines, owners, hints, guests) and L0; the mechanisms above only
 * through segment_hooks (segbase.h hook_*).
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
#include "lockrank.h"

#include "dioshim.h"

#include "owner.h"
#include "shm.h"

#include "config.h"
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
		log_event(LOG_EXACT, LOG_ID(id->dev, id->ino),
			  "%s: its slots cannot be mapped (%s): writing as a "
			  "guest, the file exact",
			  path, strerror(errno));
		return slot;
	}
	if (!birth_matches(seg, id)) {
		/* The inode number was reused; the old file's segment may
		 * go only when nobody holds the old file open. */
		if (others_alive(seg, -1)) {
			seg_unlock(&seg->attach_lock);
			log_event(LOG_FALLBACK, LOG_ID(id->dev, id->ino),
				  "%s: belongs to an older file still open "
				  "elsewhere: passing through",
				  path);
			return JOIN_NONE;
		}
		atomic_store(&seg->state, DIOSHIM_SEG_DEAD);
		seg_unlink(seg, path);
		seg_unlock(&seg->attach_lock);
		return JOIN_AGAIN;
	}
	if (!others_alive(seg, -1)) {
		bool started = hook_first_in(seg, fd);

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
		log_event(LOG_ERROR, LOG_ID(id->dev, id->ino),
			  "%s: a guest that cannot announce itself", path);
		slot = JOIN_GUEST_UNANNOUNCED;
	}
	seg_unlock(&seg->attach_lock);
	if (slot < 0) {
		log_event(LOG_EXACT, LOG_ID(id->dev, id->ino),
			  "%s: no attach slot (all %d taken, or no memory for "
			  "one): writing as a guest, the file exact",
			  path, DIOSHIM_MAX_PROCS);
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

/* A segment being made (attach_lock held, nobody in it): its barrier
 * raised at once (BARRIER_CHANGING: its words are not yet the file's),
 * for its maker to lower (barrier_lower) once they are.  False if the
 * barrier's lock is unusable. */
static bool barrier_hold_new(struct dioshim_seg *seg)
{
	bool recovered;

	lock_held(LOCK_ATTACH);
	if (!seg_lock(&seg->barrier_lock, &recovered))
		return false;
	/* Its words wait for the guests' writes: CHANGING, so that its
	 * maker's death leaves them to be taken from the kernel. */
	atomic_store_explicit(&seg->barrier, BARRIER_CHANGING,
			      memory_order_seq_cst);
	return true;
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
/* The file of an attach, for a log line. */
#define ATTACH_LOG(a) LOG_IDFD((a)->id->dev, (a)->id->ino, (a)->fd)

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

	lock_held(LOCK_ATTACH);
	hint_published(key);
	if (!hook_first_in(seg, a->fd))
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
		log_event(LOG_EXACT, ATTACH_LOG(a),
			  "its lone writers cannot be waited for (the barrier "
			  "is unusable): exact");
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
	log_once_file(LOG_FALLBACK, ATTACH_LOG(a),
		      "%s: cannot create (%s): passing through", a->path,
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
			log_event(LOG_FALLBACK, ATTACH_LOG(a),
				  "%s: cannot open (%s): passing through",
				  a->path, strerror(errno));
			break;
		}
		if (!seg_header_ok(a->seg, a->id->dev, a->id->ino)) {
			log_event(LOG_FALLBACK, ATTACH_LOG(a),
				  "%s: corrupt or foreign segment: passing "
				  "through",
				  a->path);
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
	h = hook_table();
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
	rank_lock(&files_lock, LOCK_FILES);
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
	rank_unlock(&files_lock, LOCK_FILES);
	if (f)
		attach_settle(f, fd, a.wait_guests);
	return f;
}

bool segment_serves_slow(struct shim_file *f, int fd)
{
	const struct segment_hooks *h = hook_table();
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
		log_event(LOG_ERROR, LOG_SEG(f->seg),
			  "writes of ours still in flight after %d ms: left",
			  DRAIN_OWN_MS);
}

/* Detach f (its last reference is gone); files_lock held. */
static void file_detach(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	struct shim_file **pp;
	char path[PATH_MAX];

	lock_held(LOCK_FILES);
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
		    hook_last_out(f, fd) && !seg_path_of(seg, path, sizeof(path)))
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

	rank_lock(&files_lock, LOCK_FILES);
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
	    hook_last_out(f, fd) &&
	    !seg_path_of(seg, path, sizeof(path)))
		seg_retire(seg, path);
	seg_unlock(&seg->attach_lock);
out:
	rank_unlock(&files_lock, LOCK_FILES);
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

	rank_lock(&files_lock, LOCK_FILES);
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
	rank_unlock(&files_lock, LOCK_FILES);
	return done;
}

bool segment_exec_undo(struct shim_file *f)
{
	struct dioshim_seg *seg = f->seg;
	bool ok = false;
	int slot;

	rank_lock(&files_lock, LOCK_FILES);
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
	rank_unlock(&files_lock, LOCK_FILES);
	return ok;
}

void segment_get(struct shim_file *f)
{
	rank_lock(&files_lock, LOCK_FILES);
	f->refs++;
	rank_unlock(&files_lock, LOCK_FILES);
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
		log_event(LOG_OUTSIDE, LOG_ID(f->dev, f->ino),
			  "the kept copy of a file is not it any more");
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
	rank_lock(&files_lock, LOCK_FILES);
	if (--f->refs == 0) {
		file_last_put(f, fd);
	} else if (f->refs == 1 && f->pinned && fd >= 0 && !f->kept) {
		/* The program's last descriptor goes with writes in flight:
		 * the kernel keeps the file open for them, so do we. */
		f->kept = fd_keep(fd);
		if (!f->kept)
			log_event(
				LOG_ERROR, LOG_IDFD(f->dev, f->ino, fd),
				"closed with writes in flight, and no room to "
				"keep it: its reserved tail stays");
	}
	rank_unlock(&files_lock, LOCK_FILES);
}

void segment_pin(struct shim_file *f)
{
	rank_lock(&files_lock, LOCK_FILES);
	f->refs++;
	f->pinned = true;
	rank_unlock(&files_lock, LOCK_FILES);
}

void segment_unpin(struct shim_file *f)
{
	rank_lock(&files_lock, LOCK_FILES);
	f->pinned = false;
	if (--f->refs == 0)
		file_last_put(f, -1);
	rank_unlock(&files_lock, LOCK_FILES);
}

void segment_atfork_prepare(void)
{
	/* The order every path takes them in: files_lock -> hint_lock. */
	rank_lock(&files_lock, LOCK_FILES);
	hint_atfork_prepare();
}

void segment_atfork_parent(void)
{
	rank_unlock(&files_lock, LOCK_FILES);
	hint_atfork_release();
}

void segment_atfork_child(void)
{
	struct shim_file *f, **pp;

	rank_unlock(&files_lock, LOCK_FILES);
	hint_atfork_release();
	owner_refresh();
	lifeline_forget_inherited();
	hint_atfork_child();
	guest_atfork_child();
	rank_lock(&files_lock, LOCK_FILES);
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
			log_event(LOG_EXACT, LOG_SEG(f->seg),
				  "fork: no slot for the child: a guest");
			f->slot = -1;
			f->guest = true;
		} else {
			f->slot = slot;
		}
		pp = &f->next;
	}
	rank_unlock(&files_lock, LOCK_FILES);
}
