// SPDX-License-Identifier: MIT
/*
 * Whether a call is the shim's: the slow halves of serve.h's checks.  L4:
 * calls fdtable (L4), lib and segment membership (L1), the guard (L0).
 */
#define _GNU_SOURCE
#include "serve.h"

#include "guard.h"

#include <errno.h>
#include <fcntl.h>

__attribute__((noinline)) struct ofd *served_slow(int fd)
{
	struct ofd *o;
	int saved = errno, busy;

	/* A vfork child writes through the parent's descriptors, with the
	 * parent's slot (the parent is stopped): an fd already attached is
	 * served; adopting one would put the child's number in our table. */
	if (in_vfork_child()) {
		struct shim_file *f;

		o = fdtable_peek(fd);
		if (!o || o == OFD_PASS)
			return NULL;
		f = atomic_load_explicit(&o->file, memory_order_acquire);
		return f && segment_member_serves(f) ? o : NULL;
	}
	/* Restored, not cleared: a signal handler's call must leave the
	 * interrupted shim code marked busy. */
	busy = busy_enter();
	o = fdtable_resolve(fd);
	busy_exit(busy);
	errno = saved;
	return o;
}

/* served_io's answer in a signal handler inside the shim (serve.h). */
__attribute__((noinline)) struct ofd *served_reentrant(int fd,
						       bool *reentrant)
{
	struct ofd *o = fdtable_peek(fd);
	struct shim_file *f;

	if (!o || o == OFD_PASS)
		return NULL;
	f = atomic_load_explicit(&o->file, memory_order_acquire);
	if (!f || !segment_member_serves(f))
		return NULL;
	*reentrant = true;
	return o;
}

__attribute__((noinline)) struct shim_file *exact_appender(int fd)
{
	struct ofd *o;
	struct shim_file *f;

	if (!shim_on() || io_busy || in_vfork_child())
		return NULL;
	o = fdtable_peek(fd);
	if (!o || o == OFD_PASS ||
	    !(atomic_load_explicit(&o->flags, memory_order_relaxed) &
	      O_APPEND))
		return NULL;
	f = atomic_load_explicit(&o->file, memory_order_acquire);
	return f && !segment_member_serves(f) ? f : NULL;
}

__attribute__((noinline)) struct ofd *guest_writer(int fd)
{
	if (!shim_on() || io_busy || in_vfork_child())
		return NULL;
	return fdtable_guest_writer(fd);
}

struct ofd *shim_served(int fd)
{
	/* Called from inside the shim (io_busy set): no re-entry check. */
	if (fdtable_surely_pass(fd))
		return NULL;
	return fdtable_resolve(fd);
}
