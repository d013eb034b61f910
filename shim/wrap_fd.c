// SPDX-License-Identifier: MIT
/*
 * The wrappers of a descriptor's life: open, close, dup, fcntl and the
 * streams' fopen, freopen, fclose (L5: one check, then a call to fdlife.c,
 * fdtable.c or io.c).
 */
#define _GNU_SOURCE
#include "wrap.h"

#include "fdlife.h"
#include "fsync.h"
#include "grow.h"
#include "io.h"
#include "sizes.h"
#include "shm.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#ifndef __O_TMPFILE
#define __O_TMPFILE (O_TMPFILE & ~O_DIRECTORY)
#endif
#define OPEN_NEEDS_MODE(fl) \
	(((fl) & O_CREAT) || ((fl) & __O_TMPFILE) == __O_TMPFILE)

/* ---- open --------------------------------------------------------------- */

#define OPEN_MODE(flags, last)                  \
	({                                      \
		mode_t m_ = 0;                  \
		if (OPEN_NEEDS_MODE(flags)) {   \
			va_list ap_;            \
			va_start(ap_, last);    \
			m_ = (mode_t)va_arg(ap_, int); \
			va_end(ap_);            \
		}                               \
		m_;                             \
	})

EXPORT int open(const char *path, int flags, ...)
{
	return fdlife_open(AT_FDCWD, path, flags, OPEN_MODE(flags, flags));
}

EXPORT int open64(const char *path, int flags, ...)
{
	return fdlife_open(AT_FDCWD, path, flags, OPEN_MODE(flags, flags));
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	return fdlife_open(dirfd, path, flags, OPEN_MODE(flags, flags));
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	return fdlife_open(dirfd, path, flags, OPEN_MODE(flags, flags));
}

EXPORT int creat(const char *path, mode_t mode)
{
	return fdlife_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

EXPORT int creat64(const char *path, mode_t mode)
{
	return fdlife_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* The fortified forms: a missing mode is the real function's to report. */
EXPORT int __open_2(const char *path, int flags)
{
	lib_ensure();
	if (OPEN_NEEDS_MODE(flags))
		return real___open_2(path, flags);
	return fdlife_open(AT_FDCWD, path, flags, 0);
}

EXPORT int __open64_2(const char *path, int flags)
{
	lib_ensure();
	if (OPEN_NEEDS_MODE(flags))
		return real___open64_2(path, flags);
	return fdlife_open(AT_FDCWD, path, flags, 0);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	lib_ensure();
	if (OPEN_NEEDS_MODE(flags))
		return real___openat_2(dirfd, path, flags);
	return fdlife_open(dirfd, path, flags, 0);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	lib_ensure();
	if (OPEN_NEEDS_MODE(flags))
		return real___openat64_2(dirfd, path, flags);
	return fdlife_open(dirfd, path, flags, 0);
}

/* ---- close and dup ------------------------------------------------------ */

/* The close fdlife_forget began is made: a mark left on the entry for the
 * threads that meanwhile wait on it goes (not a vfork child's: the table
 * is its parent's).  Atomics only: errno stays the real call's. */
static void closed_fd(int fd)
{
	if (!in_vfork_child())
		fdtable_closed(fd);
}

static void closed_range(unsigned lo, unsigned hi)
{
	if (!in_vfork_child())
		fdtable_closed_range(lo, hi);
}

EXPORT int close(int fd)
{
	int r;

	fdlife_forget(fd);
	/* A number the program never opened, as far as it knows: the
	 * kernel alone would say EBADF. */
	if (__builtin_expect(lifeline_owns_fd(fd), 0) && shim_on()) {
		errno = EBADF;
		return -1;
	}
	r = real_close(fd);
	closed_fd(fd);
	return r;
}

EXPORT int close_range(unsigned int lo, unsigned int hi, int flags)
{
	int r;

	if (lo <= hi && !(flags & CLOSE_RANGE_CLOEXEC)) {
		rings_settle();
		BOOKKEEP(fdtable_close_range(lo, hi));
	}
	if (lo <= hi && shim_on())
		r = fdlife_close_range_around(lo, hi, flags);
	else
		r = real_close_range(lo, hi, flags);
	if (lo <= hi)
		closed_range(lo, hi);
	return r;
}

EXPORT void closefrom(int lowfd)
{
	int from = lowfd;

	if (lowfd >= 0) {
		rings_settle();
		BOOKKEEP(fdtable_close_range((unsigned)lowfd, ~0u));
	}
	/* Past the last lifeline, glibc's closefrom, with its own fallback. */
	if (lowfd >= 0 && shim_on())
		lowfd = (int)fdlife_close_below_lifelines((unsigned)lowfd,
							  ~0u, 0, true);
	real_closefrom(lowfd);
	if (from >= 0)
		closed_range((unsigned)from, ~0u);
}

EXPORT int fclose(FILE *stream)
{
	/* An fd given to fdopen goes away inside fclose, out of our sight. */
	int fd = stream ? fileno(stream) : -1, r;

	if (fd >= 0) {
		rings_settle();
		BOOKKEEP(fdtable_close(fd));
	}
	r = real_fclose(stream);
	if (fd >= 0)
		closed_fd(fd);
	return r;
}

/* A stream opened by glibc's own open, out of our sight: looked at as an
 * open would look at it (a record a crash left is recovered). */
static FILE *stream_opened(FILE *r)
{
	if (r && shim_on())
		BOOKKEEP(io_stream_opened(fileno(r)));
	return r;
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
	lib_ensure();
	return stream_opened(real_fopen(path, mode));
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
	lib_ensure();
	return stream_opened(real_fopen64(path, mode));
}

/* freopen closes the stream's fd inside glibc and reopens the number,
 * both out of our sight.  The caller has set the shim up (real resolved). */
static FILE *reopen_common(FILE *(*real)(const char *, const char *, FILE *),
			   const char *path, const char *mode, FILE *stream)
{
	int fd = stream ? fileno(stream) : -1;
	FILE *r;

	if (fd >= 0) {
		rings_settle();
		BOOKKEEP(fdtable_close(fd));
	}
	r = real(path, mode, stream);
	if (fd >= 0)
		closed_fd(fd);
	return path ? stream_opened(r) : r;
}

EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	lib_ensure();
	return reopen_common(real_freopen, path, mode, stream);
}

EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	lib_ensure();
	return reopen_common(real_freopen64, path, mode, stream);
}

EXPORT int dup(int oldfd)
{
	int fd;

	lib_ensure();
	fd = real_dup(oldfd);
	if (fd >= 0)
		BOOKKEEP(fdtable_dup(oldfd, fd));
	return fd;
}

EXPORT int dup2(int oldfd, int newfd)
{
	int fd;

	rings_settle();
	BOOKKEEP(fdlife_dup_over(oldfd, newfd));
	if (io_busy && oldfd != newfd && sys_fcntl(oldfd, F_GETFD, 0) >= 0)
		fdlife_forget(newfd); /* from a handler: newfd adopted anew */
	fd = real_dup2(oldfd, newfd);
	if (fd >= 0 && oldfd != newfd)
		BOOKKEEP(fdtable_dup(oldfd, fd));
	closed_fd(newfd); /* dup_over's mark, if the dup failed */
	return fd;
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
	int fd;

	if (oldfd != newfd) {
		rings_settle();
		BOOKKEEP(fdlife_dup_over(oldfd, newfd));
	}
	if (io_busy && oldfd != newfd && sys_fcntl(oldfd, F_GETFD, 0) >= 0)
		fdlife_forget(newfd); /* as in dup2 */
	fd = real_dup3(oldfd, newfd, flags);
	if (fd >= 0)
		BOOKKEEP(fdtable_dup(oldfd, fd));
	closed_fd(newfd); /* dup_over's mark, if the dup failed */
	return fd;
}

static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd,
			void *arg)
{
	int r = real(fd, cmd, arg);

	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
		BOOKKEEP(fdtable_dup(fd, r));
	else if (r == 0 && cmd == F_SETFL)
		BOOKKEEP(fdtable_setfl(fd));
	return r;
}

/* glibc reads the argument as a pointer whatever cmd is; so do we. */
EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	lib_ensure();
	return fcntl_common(real_fcntl, fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	lib_ensure();
	return fcntl_common(real_fcntl64, fd, cmd, arg);
}
