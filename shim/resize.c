// SPDX-License-Identifier: MIT
/*
 * ftruncate and the fallocates of a descriptor (size.h).  L4: calls io
 * and fdtable (L4), serve's checks, L0.
 */
#define _GNU_SOURCE
#include "resize.h"

#include "io.h"
#include "grow.h"
#include "real.h"
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>

static int size_real(int fd, enum size_op op, int mode, off64_t off,
		     off64_t len)
{
	switch (op) {
	case SZ_TRUNCATE:
		return real_ftruncate64(fd, len);
	case SZ_FALLOCATE:
		return real_fallocate64(fd, mode, off, len);
	default:
		return real_posix_fallocate64(fd, off, len);
	}
}

/* The shim's, or the kernel's — a guest writer's counted (fdtable.c),
 * with this thread marked inside the shim, so that a signal handler's
 * write meanwhile goes straight to the kernel rather than wait for this
 * one to be counted out. */
int size_call(int fd, enum size_op op, int mode, off64_t off, off64_t len)
{
	struct ofd *o = served(fd), *g;
	struct guard gd;
	uint32_t inc;
	int r, err;

	if (o)
		return op == SZ_TRUNCATE
			       ? io_ftruncate(o, fd, len)
			       : io_fallocate(o, fd, mode, off, len,
					      op == SZ_POSIX_FALLOCATE);
	g = guest_writer(fd);
	if (!g)
		return size_real(fd, op, mode, off, len);
	/* Blocks kept past the end are the program's: the segment notes
	 * them, so that no trim takes them. */
	if (op == SZ_FALLOCATE && (mode & FALLOC_FL_KEEP_SIZE)) {
		fdtable_engage_fd(fd);
		if (!guest_writer(fd))
			return size_call(fd, op, mode, off, len);
	}
	/* Counted only once marked inside the shim and not cancellable (a
	 * cancel pending acts first, as in the real fallocate, a
	 * cancellation point; ftruncate and posix_fallocate are not). */
	guard_enter(&gd, op == SZ_FALLOCATE);
	if (!fdtable_raw_enter(fd, g, &inc)) {
		guard_exit(&gd, 0, 0);
		return size_call(fd, op, mode, off, len); /* attached */
	}
	r = size_real(fd, op, mode, off, len);
	err = errno;
	fdtable_raw_exit(g, inc);
	guard_exit(&gd, r, err);
	return r;
}
