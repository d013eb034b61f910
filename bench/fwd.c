// SPDX-License-Identifier: MIT
/*
 * fwd.so: the least an LD_PRELOAD library can do — take the calls a
 * program without O_DIRECT makes most (reads, writes, opens, closes,
 * stats, seeks) and hand each to the next definition, unchanged.  The
 * overhead section of bench/run.sh runs it as a third side: what any
 * interposer costs on this machine (its code and data are pages the
 * program touches after every system call), apart from what dioshim
 * itself does.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* The next definition of name, looked up on the first call. */
#define NEXT(name)                                                       \
	static __typeof__(name) *next_;                                  \
	if (__builtin_expect(!next_, 0))                                 \
		next_ = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

/* name(params) forwarded as name(args), and its 64-bit twin too (what
 * programs built with _FILE_OFFSET_BITS=64 call). */
#define FWD(ret, name, params, args)                                     \
	EXPORT ret name params                                           \
	{                                                                \
		NEXT(name);                                              \
		return next_ args;                                       \
	}

#define FWD2(ret, name, params, args)                                    \
	FWD(ret, name, params, args)                                     \
	FWD(ret, name##64, params, args)

FWD(ssize_t, read, (int fd, void *buf, size_t n), (fd, buf, n))
FWD(ssize_t, write, (int fd, const void *buf, size_t n), (fd, buf, n))
FWD2(ssize_t, pread, (int fd, void *buf, size_t n, off_t off),
     (fd, buf, n, off))
FWD2(ssize_t, pwrite, (int fd, const void *buf, size_t n, off_t off),
     (fd, buf, n, off))
FWD2(off_t, lseek, (int fd, off_t off, int whence), (fd, off, whence))
FWD(int, close, (int fd), (fd))
FWD(int, fstat, (int fd, struct stat *st), (fd, st))
FWD(int, fstat64, (int fd, struct stat64 *st), (fd, st))
FWD(int, fstatat, (int dirfd, const char *path, struct stat *st, int flags),
    (dirfd, path, st, flags))
FWD(int, fstatat64,
    (int dirfd, const char *path, struct stat64 *st, int flags),
    (dirfd, path, st, flags))
FWD(int, stat, (const char *path, struct stat *st), (path, st))
FWD(int, stat64, (const char *path, struct stat64 *st), (path, st))
FWD(int, lstat, (const char *path, struct stat *st), (path, st))
FWD(int, lstat64, (const char *path, struct stat64 *st), (path, st))

/* The opens: the mode only when the flags say there is one. */
#define FWD_OPEN(name, params, args)                                     \
	EXPORT int name params                                           \
	{                                                                \
		mode_t mode = 0;                                         \
		va_list ap;                                              \
		NEXT(name);                                              \
		va_start(ap, flags);                                     \
		if (flags & (O_CREAT | O_TMPFILE))                       \
			mode = va_arg(ap, mode_t);                       \
		va_end(ap);                                              \
		return next_ args;                                       \
	}

FWD_OPEN(open, (const char *path, int flags, ...), (path, flags, mode))
FWD_OPEN(open64, (const char *path, int flags, ...), (path, flags, mode))
FWD_OPEN(openat, (int dirfd, const char *path, int flags, ...),
	 (dirfd, path, flags, mode))
FWD_OPEN(openat64, (int dirfd, const char *path, int flags, ...),
	 (dirfd, path, flags, mode))
