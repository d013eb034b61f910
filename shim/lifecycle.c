// SPDX-License-Identifier: MIT
/*
 * What the mechanisms do at a segment's turning points: when it is made,
 * when a first live user takes it (recovery: cut what a crash left, start
 * the words from the kernel's size), when the last user leaves (cut the
 * reserved tail), and when a new image of a process replaces one that
 * held extent locks.  segment.c calls these through segment_hooks, so the
 * membership layer knows nothing of reservations, prefill or the extent
 * lock table.  Registered at load, in every program that links the
 * mechanisms: the library, the command and the unit tests.
 *
 * Layer L2, its top: may call every mechanism of L2, L1 and L0; the
 * segment layer calls it only through the hooks registered here.
 * The order inside L2 is shim/layers'.
 */
#define _GNU_SOURCE
#include "segment.h"

#include "config.h"
#include "gap.h"
#include "inflight.h"
#include "log.h"
#include "prefill.h"
#include "rangelock.h"
#include "recover.h"
#include "reserve.h"
#include "space.h"
#include "sys.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

static void made(struct dioshim_seg *seg, const struct file_id *id)
{
	seg->chunk = config.reserve;
	atomic_store(&seg->prefill_chunk, prefill_initial_chunk(id->fs_bit));
	rangelock_init(seg);
}

/*
 * The words from the kernel's size: phys from it, eof and tail inside it
 * (or at the end of data written past eof), the record made to match,
 * the budget charged for what is reserved then.  The one routine for a
 * segment whose words cannot be trusted: a first user's after a failed
 * recovery, and a barrier's after a size change cut short.
 */
static bool words_from_kernel(struct dioshim_seg *seg, int fd)
{
	if (!recover_words(seg, fd))
		return false;
	reserve_charge(seg);
	return true;
}

/*
 * First live user of a segment whose previous users all died: the words
 * may be behind the kernel (a writer killed between fallocate and storing
 * phys), so phys is re-read and the rest pulled inside it.
 */
static bool seg_resync(struct dioshim_seg *seg, int fd)
{
	if (!words_from_kernel(seg, fd))
		return false;
	atomic_store(&seg->barrier, 0);
	return true;
}

/*
 * A raiser died between changing the kernel's size and moving the words
 * (inflight.c barrier_repair, which holds barrier_lock and ext_lock, and
 * drained the writers): the words from the kernel's size.
 */
static bool words_repair(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;

	if (!words_from_kernel(seg, fd))
		return false;
	/* A maker that died waiting for its file's lone writers (guests):
	 * one still announced may have a write of its own in the kernel,
	 * past the size just read: the file is theirs as it is (exact).
	 * Nothing was reserved yet. */
	if (atomic_load(&seg->phys) <= atomic_load(&seg->eof) &&
	    guest_present(seg->hint_key, f->dev, f->ino, true)) {
		atomic_store(&seg->exact, 1);
		log_event(LOG_EXACT, LOG_SEGFD(seg, fd),
			  "its maker died waiting for its lone writers: exact");
	}
	/* Truncated away, blocks may be holes again. */
	prefill_forget_all(f);
	return true;
}

/*
 * The first live user of a segment — its creator, or the first to join
 * one whose users all died — before anyone else may use it (it holds
 * attach_lock): cut what a crash left past the recorded EOF, then start
 * the words from the kernel's size.  A segment of dead users is no more
 * trusted than none: its words may be ahead of what reached the disk
 * (the filesystem went down with them), while the record and the data
 * are what the disk says.  Its eof only says where, inside the last
 * block of data past the record, the size of a kill -9 was.  False when
 * the kernel's size could not be read: the words are not the file's,
 * and the file must be kept exact (every call as it is) until a first
 * user can.
 */
static bool first_in(struct dioshim_seg *seg, int fd)
{
	struct recover_hint hint = {
		.eof = atomic_load(&seg->eof),
		.rec_eof = atomic_load(&seg->recorded_eof),
		.rec_phys = atomic_load(&seg->recorded_phys),
	};
	struct recover_report rep = { .outcome = RECOVER_NO_RECORD };
	uint64_t mnt = recover_mnt_id(fd);
	struct stat st;

	/* Its users were killed on this very mount: the kernel kept what
	 * they did, their eof is the file's logical size (a segment made
	 * afresh says 0: not this mount). */
	hint.live = mnt && seg->mnt_id == mnt;

	/* A move of appends (move.h) its writers left: over, whatever its
	 * words say (the tail is set anew below, its closed bit gone). */
	memset((void *)&seg->move, 0, sizeof(seg->move));
	/* Exact (a guest wrote it): nothing was reserved, the words are
	 * stale, the kernel's size is the file's. */
	if (!atomic_load(&seg->exact)) {
		recover_fd_hint(fd, seg_blksize(seg), &hint, &rep);
		recover_last = rep;
		if (rep.outcome == RECOVER_FAILED) {
			log_event(LOG_ERROR, LOG_SEGFD(seg, fd),
				  "recovery failed (%s): keeping the segment's "
				  "eof",
				  strerror(errno));
			return seg_resync(seg, fd);
		}
	}
	if (sys_fstat(fd, &st)) {
		log_event(LOG_EXACT, LOG_SEGFD(seg, fd),
			  "cannot read the size of a file its segment's first "
			  "user starts from (%s): it stays exact",
			  strerror(errno));
		return false;
	}
	/* Killed on this mount, its users' words are the file's: the
	 * blocks the program allocated past the size, which the cut took,
	 * come back; what the size grew over unwritten goes, as at a last
	 * close. */
	if (hint.live && !atomic_load(&seg->exact)) {
		atomic_store(&seg->eof, (uint64_t)st.st_size);
		if (keep_any_past(seg, (uint64_t)st.st_size))
			keep_restore(seg, fd, (uint64_t)st.st_size);
		gap_punch(seg, fd);
	}
	seg->mnt_id = mnt;
	atomic_store(&seg->eof, (uint64_t)st.st_size);
	atomic_store(&seg->tail, (uint64_t)st.st_size);
	/* Nothing is reserved: every block past the size is new. */
	atomic_store(&seg->touched, (uint64_t)st.st_size);
	atomic_store(&seg->phys, (uint64_t)st.st_size);
	atomic_store(&seg->synced_eof, (uint64_t)st.st_size);
	atomic_store(&seg->recorded_eof, 0);
	atomic_store(&seg->recorded_phys, 0);
	reserve_charge(seg); /* what the dead counted goes back */
	/* Nobody alive holds or waits on anything here: everything the dead
	 * left — locks, barrier, policy, group-commit state — starts over,
	 * whatever its words say.  A record found means a cut (or its
	 * removal) that the disk does not have yet: the last user makes it
	 * durable. */
	atomic_store(&seg->flags, rep.outcome == RECOVER_TRIMMED ||
					  rep.outcome == RECOVER_CLEAN
				  ? DIOSHIM_SEGF_SYNCED
				  : 0);
	atomic_store(&seg->barrier, 0);
	atomic_store(&seg->barrier_waiters, 0);
	atomic_store(&seg->publish_waiters, 0);
	memset((void *)seg->done, 0, sizeof(seg->done));
	/* The extent-lock table, the prefill bitmap and its claims. */
	lazy_reset(seg);
	robust_init(&seg->barrier_lock);
	robust_init(&seg->ext_lock);
	robust_init(&seg->commit_lock);
	seg->chunk = config.reserve;
	seg->last_reserve_ns = 0;
	seg->reserve_failed_ns = 0;
	seg->last_reserve_phys = 0;
	keep_clear(seg);
	gap_clear(seg);
	atomic_store(&seg->sync_seq, 0);
	atomic_store(&seg->sync_done, 0);
	atomic_store(&seg->sync_done_full, 0);
	atomic_store(&seg->sync_err_seq, 0);
	return true;
}

static bool last_out(struct shim_file *f, int fd)
{
	/* Exact: nothing reserved, and words that may be behind the kernel's
	 * size (the calls went to it as they were): nothing to cut — but a
	 * cut made when it turned exact may still be owed to the disk. */
	if (!atomic_load(&f->seg->exact)) {
		if (!reserve_trim(f, fd))
			return false;
		gap_punch(f->seg, fd);
	}
	reserve_cut_durable(f, fd);
	return true;
}

/*
 * A guest is about to write: no one may have anything reserved while it
 * does.  Under the barrier (no write in flight) the reserved tail is cut
 * as a last user would cut it; then the file is marked exact, and every
 * writer after that goes to the kernel as it is.
 */
static void guest_in(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	bool recovered, locked;

	/* A segment its last member removed: a new one is made exact by
	 * our announcement. */
	if (atomic_load(&seg->state) == DIOSHIM_SEG_DEAD)
		return;
	if (!barrier_raise_fd(f, fd)) {
		if (!atomic_load(&seg->exact))
			log_event(LOG_EXACT, LOG_SEGFD(seg, fd),
				  "a guest cannot make the file exact: the "
				  "barrier is unusable");
		return;
	}
	locked = seg_lock(&seg->ext_lock, &recovered);
	barrier_changing(f); /* a guest killed here: the words are redone */
	/* Not cut: not exact either (the tail would stay for good); the
	 * guest's next call tries again. */
	if (reserve_trim(f, fd)) {
		gap_clear(seg); /* its writes: the kernel's business */
		atomic_store(&seg->exact, 1);
		log_event(LOG_EXACT, LOG_SEGFD(seg, fd),
			  "a writer outside the segment (a guest): the reserved "
			  "tail cut, the file exact");
	} else {
		log_event(LOG_ERROR, LOG_SEGFD(seg, fd),
			  "a guest could not cut the reserved tail (%s)",
			  strerror(errno));
	}
	if (locked)
		seg_unlock(&seg->ext_lock);
	barrier_lower(f);
}

/*
 * A segment just made for a file whose lone writers announced themselves
 * (lazy guests, DESIGN.md 7): they join it at their next call, each with
 * no write of its own left in the kernel, and give their announcements
 * back.  The barrier went up as the segment was made, before anyone could
 * join, so nothing is written through the segment until the guests are
 * gone and the words are taken from the kernel's size (they wrote
 * through it).  A guest that does not come within
 * GUEST_JOIN_MS (idle, or one that can never join: no slot, no segment
 * directory) leaves the file exact, as any guest does.
 *
 * Only a writer that is writing comes soon: the wait ends once the file
 * has not changed (size, mtime, ctime) for GUEST_IDLE_MS.  A process that
 * opens a file another one wrote a moment ago and then left alone (each
 * new WAL segment PostgreSQL opens under its WALWriteLock, while the
 * last writer waits for that lock) pays that, not the whole wait.
 */
#define GUEST_JOIN_MS 100
#define GUEST_IDLE_MS 10

/* Whether the file changed since *was (then updated). */
static bool file_changed(int fd, struct stat *was)
{
	struct stat st;

	if (sys_fstat(fd, &st))
		return false;
	if (st.st_size == was->st_size &&
	    st.st_mtim.tv_sec == was->st_mtim.tv_sec &&
	    st.st_mtim.tv_nsec == was->st_mtim.tv_nsec &&
	    st.st_ctim.tv_sec == was->st_ctim.tv_sec &&
	    st.st_ctim.tv_nsec == was->st_ctim.tv_nsec)
		return false;
	*was = st;
	return true;
}

static void guests_wait(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	struct timespec nap = { 0, 1000000 };
	struct stat st;
	bool recovered, locked, gone = false;
	int i, idle, cancel;

	/* The caller may hold the descriptor table's lock. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	/* The barrier is up already (barrier_hold_new, as it was made). */
	memset(&st, 0, sizeof(st));
	file_changed(fd, &st);
	for (i = 0, idle = 0; i < GUEST_JOIN_MS && idle < GUEST_IDLE_MS &&
			      !gone; i++) {
		gone = !guest_present(seg->hint_key, f->dev, f->ino, true);
		if (!gone) {
			nanosleep(&nap, NULL);
			idle = file_changed(fd, &st) ? 0 : idle + 1;
		}
	}
	locked = seg_lock(&seg->ext_lock, &recovered);
	barrier_changing(f);
	if (gone && !sys_fstat(fd, &st)) {
		atomic_store(&seg->eof, (uint64_t)st.st_size);
		atomic_store(&seg->tail, (uint64_t)st.st_size);
		atomic_store(&seg->touched, (uint64_t)st.st_size);
		atomic_store(&seg->phys, (uint64_t)st.st_size);
		atomic_store(&seg->synced_eof, (uint64_t)st.st_size);
		reserve_charge(seg);
	} else {
		/* Nothing reserved yet: nothing to cut. */
		atomic_store(&seg->exact, 1);
	}
	if (locked)
		seg_unlock(&seg->ext_lock);
	barrier_lower(f);
	if (!gone)
		log_event(LOG_EXACT, LOG_SEGFD(seg, fd),
			  "a lone writer did not join the new segment (idle, "
			  "or unable to): exact");
	pthread_setcancelstate(cancel, NULL);
}

static const struct segment_hooks lifecycle_hooks = {
	.made = made,
	.first_in = first_in,
	.last_out = last_out,
	.image_gone = rangelock_release_self,
	.guest_in = guest_in,
	.guests_wait = guests_wait,
	.words_repair = words_repair,
	.moved = reserve_after_move,
	.budget_recount = space_recount,
};
SEGMENT_HOOKS(lifecycle_hooks);
