// SPDX-License-Identifier: MIT
/*
 * The wrappers of sync: fsync, fdatasync, sync_file_range (L5: one
 * check, then a call to io.c).
 */
#define _GNU_SOURCE
#include "wrap.h"

#include "fsync.h"
#include "grow.h"
#include "io.h"
#include "sizes.h"

#include <fcntl.h>
#include <unistd.h>

/* ---- sync ---------------------------------------------------------------- */

EXPORT int fsync(int fd)
{
	struct ofd *o = served(fd);

	return o ? io_fsync(o, fd, false) : real_fsync(fd);
}

EXPORT int fdatasync(int fd)
{
	struct ofd *o = served(fd);

	return o ? io_fsync(o, fd, true) : real_fdatasync(fd);
}

EXPORT int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags)
{
	lib_ensure();
	return real_sync_file_range(fd, off, n, flags);
}
