// SPDX-License-Identifier: MIT
/*
 * One write transaction: the claim before the kernel's call and the
 * settling after it, for every path of a write (see wtx.h).
 *
 * Layer L3: calls the mechanisms (L2: reserve, publish, move, prefill)
 * and L0; never the I/O paths above it.
 */
#define _GNU_SOURCE
#include "wtx.h"

#include "abi.h"
#include "config.h"
#include "inflight.h"
#include "prefill.h"
#include "sys.h"

#include <stdint.h>

/* A direct write's offset, lengths and buffers aligned to blk and mem. */
static bool aligned(uint64_t blk, uint64_t mem, uint64_t off, uint64_t len,
		    uint64_t base_or, uint64_t len_or)
{
	return (off | len | len_or) % blk == 0 && base_or % mem == 0;
}

bool wtx_sure(const struct shim_file *f, bool direct, int rwf, uint64_t off,
	      uint64_t len, uint64_t base_or, uint64_t len_or)
{
	const int known = RWF_HIPRI | RWF_DSYNC | RWF_SYNC | RWF_NOWAIT |
			  RWF_APPEND | RWF_NOAPPEND;

	if (rwf & ~known)
		return false;
	return !direct || aligned(dio_off_align(f), dio_mem_align(f), off,
				  len, base_or, len_or);
}

bool wtx_refused(const struct shim_file *f, bool direct, uint64_t off,
		 uint64_t len, uint64_t base_or, uint64_t len_or)
{
	return direct && f->dio_off_align && f->dio_mem_align &&
	       !aligned(f->dio_off_align, f->dio_mem_align, off, len, base_or,
			len_or);
}

/* Hold [.., t->end) in the tail for a write at its own offset: the tail
 * it found, in t->held_from. */
static void tail_hold(struct wtx *t)
{
	uint64_t was = word_max(&t->f->seg->tail, t->end);

	t->held_from = was < t->end ? was : t->end;
}

/* The append's offset, or why it has none. */
static enum wtx_claimed claim_append(struct wtx *t, int fd, uint64_t len)
{
	struct shim_file *f = t->f;
	struct dioshim_seg *seg = f->seg;
	uint64_t off, want;

	if (t->how & WTX_REENTRANT) {
		/* No lock: the offset from the tail all the same (an append
		 * at the kernel's size would land past the reserved tail and
		 * be cut with it); past the reservation the kernel extends.
		 * Not while the appends move (move.h): one made here could
		 * neither wait for its turn nor be written again. */
		uint64_t cur = atomic_load(&seg->tail);

		do {
			if (cur & DIOSHIM_TAIL_CLOSED)
				return WTX_MOVING;
		} while (!atomic_compare_exchange_weak(&seg->tail, &cur,
						       cur + len));
		t->off = cur;
		t->end = t->off + len;
		return WTX_GO;
	}
	t->res = append_claim(f, fd, len, t->how & WTX_NOWAIT,
			      t->how & WTX_EXACT_HELD, &off);
	t->off = off;
	t->end = off + len;
	if (t->res == RESERVE_WOULD_BLOCK)
		return WTX_AGAIN;
	if (t->res == RESERVE_OK && (t->how & WTX_DIRECT) &&
	    !(t->how & (WTX_NOWAIT | WTX_QUEUED)) && off % dio_off_align(f)) {
		/* A buffered writer left the tail unaligned: the kernel will
		 * refuse this one, which goes alone, if the range can still
		 * be given back (nothing claimed after it). */
		want = t->end;
		if (atomic_compare_exchange_strong(&seg->tail, &want, off))
			return WTX_ALONE;
	}
	return WTX_GO;
}

enum wtx_claimed wtx_claim(struct wtx *t, struct shim_file *f, int fd,
			   enum wtx_kind kind, uint64_t off, uint64_t len,
			   unsigned how)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t phys;

	t->f = f;
	t->kind = kind;
	t->how = how;
	t->held_from = UINT64_MAX;
	t->res = RESERVE_OK;
	t->mover = NULL;
	t->epoch = atomic_load(&seg->epoch);
	if (how & WTX_QUEUED)
		file_engage(seg); /* a queue: writes in flight beside it */
	if ((how & WTX_NOWAIT) && f->fs_bit == CONFIG_FS_EXT4 &&
	    (kind == WTX_APPEND ? atomic_load(&seg->tail) : off) + len >
		    atomic_load_explicit(&seg->eof, memory_order_acquire))
		/* ext4 refuses RWF_NOWAIT for a direct write that extends
		 * the file (ext4_dio_write_checks: that needs the inode lock
		 * exclusive); so does the shim, though it could do it. */
		return WTX_AGAIN;
	if (kind == WTX_APPEND && (how & WTX_REFUSED)) {
		/* At off, the tail that said the kernel refuses it (the
		 * caller's look); a refusal there leaves nothing for the
		 * appends after it to pass over. */
		t->kind = kind = WTX_AT;
	} else if (kind == WTX_APPEND) {
		return claim_append(t, fd, len);
	}

	t->off = off;
	/* A range past the largest size: the kernel refuses it. */
	t->end = off <= (uint64_t)INT64_MAX - len ? off + len : off;
	/* A write past eof: the reserved blocks it lands on are not
	 * untouched any more (fresh_from), from before the kernel sees it
	 * until the size is cut again.  Inside eof nothing to say: eof
	 * only grows while it is in flight. */
	if (kind == WTX_AT && t->end > off &&
	    t->end > atomic_load_explicit(&seg->eof, memory_order_acquire))
		touched_raise(seg, t->end);
	if (t->end == off || (how & WTX_REENTRANT))
		return WTX_GO;
	/* A queued write past the tail holds its range there while in
	 * flight: an append the program makes once io_submit returned must
	 * land after it (ext4 alone makes an extending one inside the
	 * call).  A call holds nothing: an append racing it is a race with
	 * the kernel alone too, and one killed in it must leave the next
	 * append at the size.  A growth (fallocate past eof) holds its
	 * range too: an append claimed beside it goes after it, as after
	 * the kernel's; killed in it, the appends after it pass over it
	 * as over a dead writer's, and the size covers it, done. */
	if ((kind == WTX_AT && (how & WTX_QUEUED) &&
	     !(how & (WTX_REFUSED | WTX_NOHOLD | WTX_NOWAIT))) ||
	    kind == WTX_GROW)
		tail_hold(t);
	phys = atomic_load_explicit(&seg->phys, memory_order_acquire);
	if (t->end > phys) {
		if (how & WTX_NOWAIT)
			/* A reservation waits for the file's I/O to drain:
			 * the kernel says EAGAIN to an extending write too. */
			return WTX_AGAIN;
		t->res = (how & WTX_EXACT_HELD)
				 ? RESERVE_EXACT
				 : reserve_extend(f, fd, off, t->end);
	} else if (kind == WTX_AT && !(how & WTX_NOWAIT)) {
		/* Inside the kernel's size: no hole where the write lands
		 * (a no-op where the prefill bitmap knows). */
		prefill_ensure(f, fd, off, len);
	}
	return WTX_GO;
}

void wtx_claim_alone(struct wtx *t, struct shim_file *f, uint64_t len,
		     bool locked)
{
	struct dioshim_seg *seg = f->seg;

	t->f = f;
	t->kind = WTX_APPEND;
	t->how = 0;
	t->mover = NULL;
	t->held_from = UINT64_MAX;
	t->res = locked ? RESERVE_EXACT : RESERVE_UNLOCKED;
	t->epoch = atomic_load(&seg->epoch);
	t->off = atomic_fetch_add(&seg->tail, len);
	t->end = t->off + len;
}

bool wtx_unclaim(struct wtx *t)
{
	if (t->kind != WTX_APPEND ||
	    append_give_back(t->f->seg, t->off, t->end, t->off) > t->off)
		return false;
	t->end = t->off;
	return true;
}

/*
 * A fallocate the kernel extended (exact) and refused half way: ext4
 * keeps what it allocated by then, and the size with it, as it does for
 * the kernel alone.  How far the size went (off if it did not).
 */
static uint64_t grown_anyway(const struct wtx *t, int fd)
{
	struct stat st;

	if (t->res != RESERVE_EXACT || (t->how & (WTX_QUEUED | WTX_EXACT_HELD)) ||
	    sys_fstat(fd, &st) ||
	    (uint64_t)st.st_size <= atomic_load(&t->f->seg->phys))
		return t->off;
	return (uint64_t)st.st_size < t->end ? (uint64_t)st.st_size : t->end;
}

/*
 * An append made by a call whose range could not be given back (claims
 * stand past it): it failed, or came up short.  Rather than leave a hole
 * inside the data, the appends move (move.h).  True if this one takes
 * part in a move; else reach, as append_give_back left it.
 */
static bool append_failed(struct wtx *t, int fd, uint64_t done,
			  uint64_t *reach)
{
	struct dioshim_seg *seg = t->f->seg;

	if (!t->mover || (t->how & (WTX_QUEUED | WTX_REENTRANT)))
		return false;
	for (;;) {
		switch (move_join(t->f, fd, t->end)) {
		case MOVE_JOINED:
			return true;
		case MOVE_GIVE_BACK:
			/* The claims past it went meanwhile. */
			*reach = append_give_back(seg, t->off, t->end, done);
			if (*reach < t->end)
				return false;
			continue;
		case MOVE_NONE:
			return false;
		}
	}
}

int wtx_settle(struct wtx *t, int fd, int64_t res)
{
	struct dioshim_seg *seg = t->f->seg;
	uint64_t done = t->off + (res > 0 ? (uint64_t)res : 0), reach;
	bool moved = false, moving = false;
	int r;

	t->result = res;
	if ((t->how & WTX_QUEUED) && atomic_load(&seg->epoch) != t->epoch)
		return 0; /* a size change came after it: it decided */
	switch (t->kind) {
	case WTX_APPEND:
		/* (an exact append, under ext_lock, always gives back) */
		reach = append_give_back(seg, t->off, t->end, done);
		if (reach == t->end && done < t->end)
			moving = append_failed(t, fd, done, &reach);
		break;
	case WTX_GROW:
		reach = res >= 0 ? t->end : grown_anyway(t, fd);
		break;
	default:
		reach = done;
		break;
	}
	/* The tail covers what was written before ext_lock goes: an append
	 * past the reservation, next in line for the lock, must not land
	 * on it.  A held range it did not write goes back, unless a later
	 * claim stands past it (the tail moved on). */
	if (t->held_from < t->end) {
		/* Never below what others made the size meanwhile (a write
		 * inside the held range, done): an append must not land on
		 * it. */
		uint64_t back = reach > t->off && reach > t->held_from
					? reach
					: t->held_from,
			 eof = atomic_load(&seg->eof), want = t->end;

		if (back < eof)
			back = eof;
		if (back < t->end)
			atomic_compare_exchange_strong(&seg->tail, &want, back);
	} else if (t->kind != WTX_APPEND && reach > t->off) {
		tail_advance(seg, reach);
	}
	/* ext_lock goes before the wait: an append waiting for an earlier
	 * one must not hold what that one needs. */
	if (t->res == RESERVE_EXACT &&
	    !(t->how & (WTX_QUEUED | WTX_EXACT_HELD)))
		reserve_exact_done(t->f, fd);
	if (reach <= t->off && !moving)
		return 0;
	if (t->kind != WTX_APPEND || (t->how & WTX_REENTRANT)) {
		/* A re-entrant append moves the size without waiting for
		 * the appends before it: they may be its own thread's. */
		moved = eof_advance(seg, reach);
		/* Appends claimed past a held range wait for eof to reach
		 * them: carry it on over those done, and wake the rest. */
		if (moved && t->held_from < t->end)
			eof_publish_at(seg, reach, reach);
		if (moved && t->kind == WTX_GROW)
			/* The size grew with no data under it: recovery
			 * from the record would not find it, so the next
			 * sync must rewrite the record. */
			atomic_fetch_or(&seg->flags,
					DIOSHIM_SEGF_SIZE_NO_DATA);
	} else if (t->how & WTX_QUEUED) {
		/* Reaped by a thread that may hold earlier appends not yet
		 * reaped: never wait. */
		t->end = reach;
		if (!eof_publish_async(seg, t->off, reach))
			return WTX_DEFERRED;
	} else {
		r = moving ? PUBLISH_MOVE
			   : eof_publish_in_order(seg, t->f->slot, t->off,
						  reach);
		/* An append before this one failed (or this one did): it
		 * publishes where the move takes it (t->off). */
		if (r == PUBLISH_MOVE) {
			t->result = move_publish(t->f, fd, t->off, t->end,
						 res, t->mover, &t->off);
			r = t->result > 0;
		}
		moved = r > 0;
	}
	return moved ? WTX_MOVED : 0;
}

bool wtx_publish_deferred(struct wtx *t, bool wait)
{
	struct dioshim_seg *seg = t->f->seg;

	if (atomic_load(&seg->epoch) != t->epoch)
		return true;
	if (wait) {
		eof_publish_in_order(seg, t->f->slot, t->off, t->end);
		return true;
	}
	return eof_publish_async(seg, t->off, t->end);
}
