// SPDX-License-Identifier: MIT
/*
 * The wrappers of position and size: lseek, the stat family, ftruncate,
 * truncate and the fallocates (L5: one check, then a call to io.c or
 * size.c).
 */
#define _GNU_SOURCE
#include "wrap.h"

#include "fdlife.h"
#include "fsync.h"
#include "grow.h"
#include "io.h"
#include "sizes.h"
#include "segment.h"
#include "shm.h"
#include "resize.h"
#include "umem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* ---- position and size -------------------------------------------------- */

EXPORT off_t lseek(int fd, off_t off, int whence)
{
	bool re;
	struct ofd *o = served_io(fd, &re);

	return o ? io_lseek(o, fd, off, whence, re)
		 : real_lseek(fd, off, whence);
}

EXPORT off64_t lseek64(int fd, off64_t off, int whence)
{
	bool re;
	struct ofd *o = served_io(fd, &re);

	return o ? io_lseek(o, fd, off, whence, re)
		 : real_lseek64(fd, off, whence);
}

/* st_size of a stat that succeeded on fd. */
static void fix_fd_size(int fd, off_t *size, mode_t mode)
{
	struct ofd *o;
	bool re;

	if (!S_ISREG(mode))
		return;
	o = served_io(fd, &re);
	if (o)
		*size = (off_t)io_eof(o, fd, (uint64_t)*size, re);
}

static void fix_path_size(int dirfd, const char *path, int flags,
			  struct stat *st)
{
	/* An empty path — or none, which Linux 6.11 accepts — with
	 * AT_EMPTY_PATH is the fd itself. */
	if ((!path || !*path) && (flags & AT_EMPTY_PATH))
		fix_fd_size(dirfd, &st->st_size, st->st_mode);
	else if (S_ISREG(st->st_mode) && !hint_surely_dead()) {
		rings_settle();
		BOOKKEEP(io_fix_path_size(path, dirfd, flags, st));
	}
}

EXPORT int fstat(int fd, struct stat *st)
{
	int r;

	lib_ensure();
	r = real_fstat(fd, st);
	if (r == 0)
		fix_fd_size(fd, &st->st_size, st->st_mode);
	return r;
}

EXPORT int fstat64(int fd, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real_fstat64(fd, st);
	if (r == 0)
		fix_fd_size(fd, &st->st_size, st->st_mode);
	return r;
}

/* struct stat64 is struct stat on x86_64; the 64 names share the code. */
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "stat64");

EXPORT int stat(const char *path, struct stat *st)
{
	int r;

	lib_ensure();
	r = real_stat(path, st);
	if (r == 0)
		fix_path_size(AT_FDCWD, path, 0, st);
	return r;
}

EXPORT int stat64(const char *path, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real_stat64(path, st);
	if (r == 0)
		fix_path_size(AT_FDCWD, path, 0, (struct stat *)st);
	return r;
}

EXPORT int lstat(const char *path, struct stat *st)
{
	int r;

	lib_ensure();
	r = real_lstat(path, st);
	if (r == 0)
		fix_path_size(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, st);
	return r;
}

EXPORT int lstat64(const char *path, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real_lstat64(path, st);
	if (r == 0)
		fix_path_size(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW,
			      (struct stat *)st);
	return r;
}

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	int r;

	lib_ensure();
	r = real_fstatat(dirfd, path, st, flags);
	if (r == 0)
		fix_path_size(dirfd, path, flags, st);
	return r;
}

EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st,
		     int flags)
{
	int r;

	lib_ensure();
	r = real_fstatat64(dirfd, path, st, flags);
	if (r == 0)
		fix_path_size(dirfd, path, flags, (struct stat *)st);
	return r;
}

EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask,
		 struct statx *stx)
{
	struct stat st;
	int r;

	lib_ensure();
	r = real_statx(dirfd, path, flags, mask, stx);
	if (r || !(stx->stx_mask & STATX_SIZE) || !S_ISREG(stx->stx_mode))
		return r;
	/* The segment's place follows the file's group and mode: ask for
	 * them if the caller did not. */
	if ((stx->stx_mask & (STATX_UID | STATX_GID | STATX_MODE)) !=
	    (STATX_UID | STATX_GID | STATX_MODE)) {
		struct statx all;

		if (real_statx(dirfd, path, flags & ~AT_STATX_SYNC_TYPE,
			       STATX_BASIC_STATS, &all) ||
		    all.stx_ino != stx->stx_ino)
			return r;
		st.st_uid = all.stx_uid;
		st.st_gid = all.stx_gid;
		st.st_mode = all.stx_mode;
	} else {
		st.st_uid = stx->stx_uid;
		st.st_gid = stx->stx_gid;
		st.st_mode = stx->stx_mode;
	}
	st.st_dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
	st.st_ino = stx->stx_ino;
	st.st_size = (off_t)stx->stx_size;
	fix_path_size(dirfd, path, flags, &st);
	stx->stx_size = (uint64_t)st.st_size;
	return r;
}

/* Binaries built against glibc < 2.33 call the versioned __xstat family;
 * on x86_64 versions 0 (_STAT_VER_KERNEL) and 1 (_STAT_VER_LINUX) are both
 * struct stat, and glibc refuses any other. */
#define XSTAT_VER_OK(v) ((v) == 0 || (v) == 1)
EXPORT int __xstat(int ver, const char *path, struct stat *st)
{
	int r;

	lib_ensure();
	r = real___xstat(ver, path, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(AT_FDCWD, path, 0, st);
	return r;
}

EXPORT int __xstat64(int ver, const char *path, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real___xstat64(ver, path, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(AT_FDCWD, path, 0, (struct stat *)st);
	return r;
}

EXPORT int __lxstat(int ver, const char *path, struct stat *st)
{
	int r;

	lib_ensure();
	r = real___lxstat(ver, path, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, st);
	return r;
}

EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real___lxstat64(ver, path, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW,
			      (struct stat *)st);
	return r;
}

EXPORT int __fxstat(int ver, int fd, struct stat *st)
{
	int r;

	lib_ensure();
	r = real___fxstat(ver, fd, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_fd_size(fd, &st->st_size, st->st_mode);
	return r;
}

EXPORT int __fxstat64(int ver, int fd, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real___fxstat64(ver, fd, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_fd_size(fd, &st->st_size, st->st_mode);
	return r;
}

EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st,
		      int flags)
{
	int r;

	lib_ensure();
	r = real___fxstatat(ver, dirfd, path, st, flags);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(dirfd, path, flags, st);
	return r;
}

EXPORT int __fxstatat64(int ver, int dirfd, const char *path,
			struct stat64 *st, int flags)
{
	int r;

	lib_ensure();
	r = real___fxstatat64(ver, dirfd, path, st, flags);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(dirfd, path, flags, (struct stat *)st);
	return r;
}

/* A file mapped here and cut short: its pages past the new end are gone
 * (umem.c).  Keeps errno. */
static int mapped_cut(int r)
{
	if (!r)
		umem_changed();
	return r;
}

EXPORT int ftruncate(int fd, off_t len)
{
	return mapped_cut(size_call(fd, SZ_TRUNCATE, 0, 0, len));
}

EXPORT int ftruncate64(int fd, off64_t len)
{
	return mapped_cut(size_call(fd, SZ_TRUNCATE, 0, 0, len));
}

/*
 * truncate(path) of a file with a segment: through a descriptor, so that
 * the barrier drains its writers.  If the file cannot be opened for
 * writing, truncate(path) cannot succeed either: the real call answers.
 */
static int truncate_common(int (*real)(const char *, off_t), const char *path,
			   off_t len)
{
	struct ofd *o;
	struct stat st;
	int fd, r, err, cancel;

	/* Only a regular file that has a segment needs the detour: opening
	 * anything else (a FIFO, a device) could block or have effects. */
	if (!shim_on() || !hint_maybe_live() || len < 0 ||
	    real_stat(path, &st) || !S_ISREG(st.st_mode) ||
	    !segment_exists(&st))
		return real(path, len);
	/* truncate is not a cancellation point; the open inside must not
	 * become one. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	fd = fdlife_open(AT_FDCWD, path,
			 O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0);
	if (fd < 0) {
		pthread_setcancelstate(cancel, NULL);
		return real(path, len);
	}
	o = served(fd);
	r = o ? io_ftruncate(o, fd, len) : real_ftruncate(fd, len);
	err = errno;
	close(fd);
	pthread_setcancelstate(cancel, NULL);
	errno = err;
	return r;
}

EXPORT int truncate(const char *path, off_t len)
{
	lib_ensure();
	return mapped_cut(truncate_common(real_truncate, path, len));
}

EXPORT int truncate64(const char *path, off64_t len)
{
	lib_ensure();
	return mapped_cut(truncate_common(real_truncate64, path, len));
}

EXPORT int fallocate(int fd, int mode, off_t off, off_t len)
{
	int r = size_call(fd, SZ_FALLOCATE, mode, off, len);

	return mode & FALLOC_FL_COLLAPSE_RANGE ? mapped_cut(r) : r;
}

EXPORT int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
	int r = size_call(fd, SZ_FALLOCATE, mode, off, len);

	return mode & FALLOC_FL_COLLAPSE_RANGE ? mapped_cut(r) : r;
}

EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
	return size_call(fd, SZ_POSIX_FALLOCATE, 0, off, len);
}

EXPORT int posix_fallocate64(int fd, off64_t off, off64_t len)
{
	return size_call(fd, SZ_POSIX_FALLOCATE, 0, off, len);
}
