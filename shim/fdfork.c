// SPDX-License-Identifier: MIT
/*
 * The fd table across fork and exec (fdtable.h): the table's lock held
 * through a fork and the child's entries reset, every file left before an
 * exec and taken back if it fails.  L4, part of the fd table: calls
 * fdtable.c's insides (fdtable_priv.h), segment membership (L1), mem (L0).
 *
 * Lock order: fdt_lock -> files_lock (segment.c) -> the segment's locks.
 */
#define _GNU_SOURCE
#include "fdtable_priv.h"
#include "lockrank.h"

#include "mem.h"

#include <stdatomic.h>

static void exec_release(int fd, struct ofd *o)
{
	struct shim_file *f = atomic_load(&o->file);

	if (f)
		segment_exec_release(f, fd);
}

static void exec_undo(int fd, struct ofd *o)
{
	struct shim_file *f = atomic_load(&o->file), *g;
	struct guest_pin pin = { 0, 0, 0, false };
	struct file_id id;

	if (!f || !f->exec_released || segment_exec_undo(f))
		return;
	/* We were the last user and the segment went with the exec that
	 * failed: this description attaches anew (a new segment, or one
	 * that another process made meanwhile). */
	g = file_identify(fd, &id) ?
		    segment_attach_pin(fd, &id,
				       direct_writer((int)atomic_load(&o->flags))
					       ? SEG_MAKE
					       : SEG_FIND,
				       &pin) :
		    NULL;
	if (segment_exec_revive(f, g)) {
		/* f carries the new segment on; g the old, to be put. */
		ofd_pin(o, f, &pin);
		segment_put(g, -1);
		return;
	}
	ofd_pin(o, g, &pin);
	atomic_store_explicit(&o->file, g, memory_order_release);
	o->state = g ? OFD_ATTACHED : OFD_WATCH;
	o->checked_gen = 0;
	segment_put(f, -1);
}

void fdtable_exec_prepare(void)
{
	fdt_lock_take();
	for_each_ofd(exec_release);
	rank_unlock(&fdt_lock, LOCK_FDT);
}

void fdtable_exec_failed(void)
{
	fdt_lock_take();
	for_each_ofd(exec_undo);
	rank_unlock(&fdt_lock, LOCK_FDT);
}

void fdtable_atfork_prepare(void)
{
	fdt_lock_take();
	segment_atfork_prepare();
	mem_atfork_prepare();
}

void fdtable_atfork_parent(void)
{
	mem_atfork_release();
	segment_atfork_parent();
	rank_unlock(&fdt_lock, LOCK_FDT);
}

/* A position lock held by a parent thread that the child does not have
 * would never be released; appends under way belong to parent threads. */
static void child_reset(int fd, struct ofd *o)
{
	(void)fd;
	rank_reinit(&o->pos_lock);
	/* The parent's writes in flight are not the child's; the parent
	 * may write on beside it. */
	atomic_store(&o->raw, atomic_load(&o->raw) & ~0xffffffffull);
	atomic_store(&o->engaging, 0);
	atomic_store(&o->shared, true);
	atomic_store(&o->appending, 0);
	atomic_store(&o->append_end, 0);
}

/* The markers a fork child inherits: its quiet entries may be its
 * parent's descriptions too; a close under way is the parent's, and the
 * child's descriptor stays open, looked at on first use. */
static void child_mark(unsigned fd, fd_entry *e, void *arg)
{
	struct ofd *o = atomic_load(e);

	(void)fd;
	(void)arg;
	if (o == OFD_QUIET)
		atomic_store(e, OFD_QUIET_INHERITED);
	else if (o == OFD_CLOSING)
		atomic_store(e, NULL);
}

void fdtable_atfork_child(void)
{
	mem_atfork_release();
	segment_atfork_child();
	for_each_ofd(child_reset);
	each_entry(0, FDT_MAX - 1, child_mark, NULL);
	rank_unlock(&fdt_lock, LOCK_FDT);
}
