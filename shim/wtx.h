/* SPDX-License-Identifier: MIT */
/*
 * One write transaction (DESIGN.md 7b).  Every write of a served file —
 * a call, a queued libaio or io_uring request, a call from a signal
 * handler that interrupted the shim — is claimed and settled here, so
 * that the rules that keep sizes right exist once:
 *
 *  - an append takes its offset from the tail; a write at its own offset
 *    moves the tail only by what the kernel wrote, never by a claim that
 *    may fail (a refused write must not push the next append's offset);
 *  - a queued write at its own offset past the tail holds its range in
 *    the tail while in flight (an append made after io_submit returned
 *    must not land on it), and gives back what it did not write when
 *    nothing was claimed past it since;
 *  - a queued append, or one from a signal handler, that the kernel is
 *    sure to refuse (misaligned for O_DIRECT where statx gave the
 *    alignment) takes the tail's offset without moving it, so that the
 *    refusal leaves no hole behind the appends that come after it; one
 *    it may refuse or not is claimed like any (a call goes alone, io.c);
 *  - a failed or short append gives back what it did not write, and
 *    publishes past its own data only when a later claim stands there
 *    (the size must pass over it to reach that one);
 *  - appends are published in the order they were claimed: a size never
 *    covers an append still in flight, however slow;
 *  - ext_lock, held for a write the kernel extends, goes before the
 *    wait for earlier appends, which may need it.
 *
 * The caller has entered the in-flight count, and takes the stripes
 * between the claim and the kernel's call; what it hands the kernel is
 * its own business (io.c for calls, async.c for queued requests).
 */
#ifndef DIOSHIM_WTX_H
#define DIOSHIM_WTX_H

#include "move.h"
#include "reserve.h"

#include <stdint.h>

enum wtx_kind {
	WTX_AT, /* at its own offset: eof = max(eof, what it wrote) */
	WTX_APPEND, /* claimed [off, end) from the tail: published in order */
	WTX_GROW, /* fallocate growing the size: eof = end, no data */
};

/* How the write reaches the kernel (a set of these). */
#define WTX_NOWAIT 1u /* RWF_NOWAIT: claim nothing that waits */
#define WTX_REENTRANT 2u /* from a signal handler: no lock, no wait */
#define WTX_QUEUED 4u /* libaio, io_uring: settled by whoever reaps */
#define WTX_EXACT_HELD 8u /* a batch holds ext_lock (RESERVE_EXACT) */
#define WTX_DIRECT 16u /* O_DIRECT: an unaligned tail is refused */
#define WTX_REFUSED 32u /* the kernel will refuse it (wtx_refused):
			 * hold nothing a later claim could land past */
#define WTX_NOHOLD 64u /* queued behind another that may fail (an
			* io_uring link): hold nothing in the tail */

struct wtx {
	struct shim_file *f;
	uint64_t off, end; /* the range claimed; off: where it ended up */
	uint64_t epoch; /* seg->epoch at the claim */
	uint64_t held_from; /* the tail before an AT write held its range
			     * (== end: nothing held) */
	enum wtx_kind kind;
	enum reserve_result res; /* RESERVE_EXACT: ext_lock held */
	unsigned how;
	/* An append made by a call: how to write its data again, lower,
	 * should an append before it fail (move.h); NULL: it cannot be
	 * (queued, from a signal handler). */
	const struct move_writer *mover;
	/* The kernel's answer as the program gets it (wtx_settle): a move
	 * may make a failed append succeed, or fail one it could not write
	 * again. */
	int64_t result;
};

/* The alignment a direct write's offset and length need on f, and its
 * buffer's: what statx said, or 512 (the smallest any block device has). */
static inline uint64_t dio_off_align(const struct shim_file *f)
{
	return f->dio_off_align ? f->dio_off_align : 512;
}

static inline uint64_t dio_mem_align(const struct shim_file *f)
{
	return f->dio_mem_align ? f->dio_mem_align : 512;
}

/*
 * Whether the kernel surely takes a write of len bytes at off (an
 * append: the tail) to f as it takes the rest: buffered, or direct and
 * aligned as the file asks, with flags every kernel that has
 * RWF_NOAPPEND knows.  base_or and len_or: the OR of its non-empty
 * buffers' addresses and of their lengths (each must be aligned).  Only
 * the kernel says what it refuses: this and wtx_refused decide what a
 * write holds, never its answer.
 */
bool wtx_sure(const struct shim_file *f, bool direct, int rwf, uint64_t off,
	      uint64_t len, uint64_t base_or, uint64_t len_or);

/* Whether the kernel surely refuses it: a direct write misaligned where
 * statx gave the file's alignment (ext4 and XFS refuse it, EINVAL; where
 * it gave none, as for ext4 data=journal or tmpfs, the kernel may take
 * it buffered). */
bool wtx_refused(const struct shim_file *f, bool direct, uint64_t off,
		 uint64_t len, uint64_t base_or, uint64_t len_or);

enum wtx_claimed {
	WTX_GO, /* write [off, end) */
	WTX_AGAIN, /* RWF_NOWAIT would wait: EAGAIN, nothing claimed */
	WTX_ALONE, /* an append the kernel will refuse at this tail:
		    * nothing claimed, it must go alone */
	WTX_MOVING, /* (from a signal handler) the file's appends move
		     * (move.h): nothing claimed */
};

/*
 * Claim len bytes for a write of kind (at off, unless an append) to f
 * through fd: the append's offset, a reservation covering the range, or
 * the holes under it filled.  len > 0; f->seg is the segment entered.
 * An append with WTX_REFUSED becomes a write at off, the tail the caller
 * read to decide it (t->kind WTX_AT): it is made there, positionally,
 * holding nothing.
 */
enum wtx_claimed wtx_claim(struct wtx *t, struct shim_file *f, int fd,
			   enum wtx_kind kind, uint64_t off, uint64_t len,
			   unsigned how);

/*
 * An append that holds the file alone (every write drained and held off,
 * ext_lock taken if locked): its offset is the tail, which nobody else
 * moves.  Settled as any append.
 */
void wtx_claim_alone(struct wtx *t, struct shim_file *f, uint64_t len,
		     bool locked);

/* A write claimed that will not be made (the kernel did not take it):
 * an append's range given back now, if nothing was claimed past it (its
 * settling then has nothing to give back or publish): true if so. */
bool wtx_unclaim(struct wtx *t);

/* What wtx_settle did. */
#define WTX_MOVED 1 /* eof moved */
#define WTX_DEFERRED 2 /* a queued append's range could not be handed on
			* (the done ring was full): wtx_publish_deferred
			* later; [off, end) is what must be published */

/*
 * The kernel answered res (bytes, or 0 for a fallocate that succeeded,
 * or -errno): give back, release ext_lock (unless a batch holds it),
 * move the tail and publish, as the kernel alone would have moved its
 * size.  A queued write that a size change overtook settles nothing.
 */
int wtx_settle(struct wtx *t, int fd, int64_t res);

/* A deferred append: publish it if the appends before it are (wait: at
 * exit, wait for them).  False if it is still deferred. */
bool wtx_publish_deferred(struct wtx *t, bool wait);

#endif
