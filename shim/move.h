/* SPDX-License-Identifier: MIT */
/*
 * Appends moved over ones that failed (layout.h struct dioshim_move).
 *
 * The kernel alone appends one at a time: an append it refuses (EIO,
 * ENOSPC, EINTR) leaves nothing, and the next one lands where it would
 * have.  The shim claims appends in parallel, so one that fails may have
 * later ones claimed — written perhaps, none published (a size covers
 * only appends done before it).  Its range would be a hole inside the
 * data.  Instead the file's appends move: the tail closes at the furthest
 * claim (no new append claims meanwhile), and every append claimed below
 * it publishes at its new offset — its claimed one less the length of the
 * failed ranges (voids) below it — in offset order, each when eof reaches
 * that offset (its turn), writing its data there again if it moved.  The
 * one that failed is tried once more at its turn: a failure that passes
 * (EINTR, a moment's EIO) costs nothing but the wait.  The last to publish
 * cuts the stale copies left past the new end, and the tail opens there.
 *
 * Only calls move: an append's data must still be the caller's to write
 * again.  While queued writes are in flight on the file no move starts
 * (their data is the program's once it reaps them); a failed append then
 * leaves its hole, as before.
 */
#ifndef DIOSHIM_MOVE_H
#define DIOSHIM_MOVE_H

#include "publish.h"
#include "segment.h"

#include <stdbool.h>
#include <stdint.h>

/*
 * An append [off, end), called through fd, whose kernel write failed (or
 * was short), could not give its range back: later appends are claimed.
 * Start the file's move (or join the one under way).  MOVE_JOINED: the caller
 * publishes through move_publish; MOVE_NONE: no move can be made (queued
 * writes in flight), the caller publishes past its range as before;
 * MOVE_GIVE_BACK: the later claims went meanwhile, give the range back.
 */
enum move_join { MOVE_NONE, MOVE_JOINED, MOVE_GIVE_BACK };
enum move_join move_join(struct shim_file *f, int fd, uint64_t end);

/* How an append taking part in a move writes its data again (its own
 * buffers, at a new offset): the bytes written, or -errno. */
struct move_writer {
	int64_t (*write_at)(void *arg, uint64_t off, uint64_t len);
	void *arg;
};

/*
 * An append claimed at [off, end) that takes part in the move under way
 * (move_covers), its first write done with result res (bytes, or
 * -errno): wait for its turn, write it again where it moved (or, if it
 * failed, try it once more there), publish it, and close the move if it
 * was the last.  Returns the append's result (a move that could not
 * write it again fails it: its data is not in the file) and sets *at to
 * where it now is.
 */
int64_t move_publish(struct shim_file *f, int fd, uint64_t off, uint64_t end,
		     int64_t res, const struct move_writer *w, uint64_t *at);

/* A claimer met the tail closed: wait for the move to end (closing it
 * if its writers are gone). */
void move_wait(struct shim_file *f, int fd);

#endif
