// SPDX-License-Identifier: MIT
/*
 * A descriptor's life as the wrappers hand it over (fdlife.h).  L4: calls
 * io and async (L4: the open path, the rings' settling), fdtable (L4),
 * the lifelines (L1), lib, L0.
 */
#define _GNU_SOURCE
#include "fdlife.h"

#include "async.h"
#include "fsync.h"
#include "grow.h"
#include "io.h"
#include "sizes.h"
#include "real.h"
#include "serve.h"
#include "shm.h"
#include "sys.h"
#include "umem.h"

#include <errno.h>
#include <fcntl.h>

int fdlife_open(int dirfd, const char *path, int flags, mode_t mode)
{
	int fd, busy;

	if (!shim_on())
		return real_openat(dirfd, path, flags, mode);
	busy = busy_enter();
	fd = io_open(dirfd, path, flags, mode);
	busy_exit(busy);
	/* A file mapped here, emptied (umem.c). */
	if (fd >= 0 && (flags & O_TRUNC))
		umem_changed();
	return fd;
}

/*
 * A descriptor about to go away (close, dup2 over it).  From a signal
 * handler that interrupted this thread inside the shim, where the table's
 * lock may be held: its entry goes without the lock, lest the number,
 * reused, be taken for the file.
 */
void fdlife_forget(int fd)
{
	/* Most closes: nothing is kept for fd (not even in a signal
	 * handler's), unless this is a vfork child, whose descriptors are
	 * not the ones our table names. */
	if (!in_vfork_child() && fdtable_forget_light(fd))
		return;
	if (shim_on()) {
		async_settle();
		BOOKKEEP(fdtable_close(fd));
	}
	else if (io_busy && !config.disable && !in_vfork_child() &&
		 !__atomic_load_n(&lib_exiting, __ATOMIC_RELAXED))
		fdtable_close_reentrant(fd);
}

/*
 * The shim's lifeline descriptors (segment.c) outlive a program's sweep of
 * its descriptors (closefrom, a close of every number): closing one would
 * tell processes in other pid namespaces that this one died.  The range
 * is closed around them.
 */
/*
 * Close [lo, hi] up to its last lifeline, around them: by close_range, or
 * one by one where the kernel has none and one_by_one says so.  Returns
 * where the rest of the range starts (past the last lifeline, or lo when
 * there is none), or -1 with close_range's error.
 */
long fdlife_close_below_lifelines(unsigned int lo, unsigned int hi,
				  int flags, bool one_by_one)
{
	unsigned int keep[LIFELINES_MAX], fd;
	int i, n = lifeline_fds(lo, hi, keep, LIFELINES_MAX);

	for (i = 0; i < n; i++) {
		if (keep[i] > lo && real_close_range(lo, keep[i] - 1, flags)) {
			if (!one_by_one)
				return -1;
			for (fd = lo; fd < keep[i]; fd++)
				real_close((int)fd);
		}
		lo = keep[i] + 1;
	}
	return lo;
}

int fdlife_close_range_around(unsigned int lo, unsigned int hi, int flags)
{
	long rest = fdlife_close_below_lifelines(lo, hi, flags, false);

	if (rest < 0)
		return -1;
	if (rest > (long)hi)
		return 0; /* the last of the range was a lifeline */
	return real_close_range((unsigned)rest, hi, flags);
}

/* dup2/dup3 close newfd first: do our close of it while it is still open,
 * and only when the call can succeed (oldfd valid). */
void fdlife_dup_over(int oldfd, int newfd)
{
	if (oldfd == newfd || newfd < 0 || sys_fcntl(oldfd, F_GETFD, 0) < 0)
		return;
	fdtable_close(newfd);
	/* The program wants the number of one of our lifelines: it moves
	 * (its lock goes with its open file description). */
	if (lifeline_owns_fd(newfd))
		lifeline_evict(newfd);
}
