/* SPDX-License-Identifier: MIT */
/*
 * The fd table's insides, shared by fdtable.c and fdfork.c (the table
 * across fork and exec) alone.  L4.
 */
#ifndef DIOSHIM_FDTABLE_PRIV_H
#define DIOSHIM_FDTABLE_PRIV_H

#include "fdtable.h"

/* Every change of an entry is made under it (fdtable.h). */
extern pthread_mutex_t fdt_lock;

/* fdt_mark (hot.c): the objects quiet entries point at, never written:
 * no file, no pin, no flags — what the fast paths read says "the
 * kernel's".  A fork child's inherited quiet entries point at the second:
 * woken, the description may be its parent's too (the `shared` of an
 * inherited ofd).  The third
 * marks an entry being looked at under fdt_lock (wake_begin); the fourth
 * a descriptor whose close is under way (fdtable_close to
 * fdtable_closed): its file may be leaving, and a call that finds it
 * waits for the close, then goes to the kernel, rather than attach the
 * number anew while it is still open. */
#define OFD_QUIET (&fdt_mark[0])
#define OFD_QUIET_INHERITED (&fdt_mark[1])
#define OFD_WAKING (&fdt_mark[2])
#define OFD_CLOSING (&fdt_mark[3])

static inline bool is_quiet(const struct ofd *o)
{
	return o == OFD_QUIET || o == OFD_QUIET_INHERITED;
}

/* An ofd of its own, not one of the markers. */
static inline bool is_ofd(const struct ofd *o)
{
	return o && o != OFD_PASS && !is_quiet(o) && o != OFD_WAKING &&
	       o != OFD_CLOSING;
}

/* Take fdt_lock, and put what handlers left behind. */
void fdt_lock_take(void);
/* fn(fd, entry, arg) for every entry in [lo, hi] of a chunk there is. */
void each_entry(unsigned lo, unsigned hi,
		void (*fn)(unsigned, fd_entry *, void *), void *arg);
/* fn(fd, o) for every entry that names an ofd; under fdt_lock. */
void for_each_ofd(void (*fn)(int, struct ofd *));
/* After an attach attempt for o that gave f: o keeps the announcement
 * *p while it is not attached (fdtable.c). */
void ofd_pin(struct ofd *o, struct shim_file *f, struct guest_pin *p);
/* Whether an open with these flags makes an O_DIRECT writer. */
bool direct_writer(int flags);

#endif
