/* SPDX-License-Identifier: MIT */
/*
 * The shim's own system calls.  Inside the library a call to open() or
 * fstat() would bind to our own wrapper and re-enter it; the shim's
 * bookkeeping therefore goes straight to the kernel.  The application's
 * calls go through real_* instead, to keep libc's semantics (cancellation
 * points, errno conventions, vDSO) for them.
 */
#ifndef DIOSHIM_SYS_H
#define DIOSHIM_SYS_H

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/*
 * A system call made as it is: entry.c's raw entry on x86_64, where the
 * library's syscall() is a wrapper (wrap_xfer.c); libc's elsewhere, where
 * it is not wrapped.
 */
#if defined(__x86_64__)
long sys_call(long n, ...) __attribute__((visibility("hidden")));
#else
#define sys_call syscall
#endif

/*
 * The shim's own calls that change nothing, or whose repetition does what
 * one would (a stat, a truncate to a size, an unlink, a lock test), are
 * made again when the kernel could not make them for the moment (EINTR,
 * EAGAIN, ENOMEM, ENOLCK, EBUSY; EIO, which a retry of such a call only
 * confirms): SYS_TRIES times in all before the failure is believed.  The
 * program did not make these calls; a failure the kernel alone would
 * never have met must not become its answer, or its file's (a cut not
 * made, a writer taken for alive).
 */
#define SYS_TRIES 4

static inline bool sys_again(int *tries)
{
	static const struct timespec nap = { 0, 100000 };
	int err = errno;

	if ((err != EINTR && err != EAGAIN && err != ENOMEM && err != ENOLCK &&
	     err != EBUSY && err != EIO) ||
	    ++*tries >= SYS_TRIES)
		return false;
	if (*tries > 1)
		sys_call(SYS_nanosleep, &nap, NULL);
	errno = err;
	return true;
}

/* call, made again while it fails for the moment (sys_again). */
#define SYS_TRY(call)                                   \
	({                                              \
		long r_;                                \
		int t_ = 0;                             \
		do                                      \
			r_ = (long)(call);              \
		while (r_ < 0 && sys_again(&t_));       \
		r_;                                     \
	})

static inline int sys_openat(int dirfd, const char *path, int flags, mode_t m)
{
	return (int)SYS_TRY(sys_call(SYS_openat, dirfd, path, flags, m));
}

static inline int sys_close(int fd)
{
	return (int)sys_call(SYS_close, fd);
}

/* A mapping of the shim's own, read only, to look at a file's page cache
 * (mincore): MAP_FAILED on failure. */
static inline void *sys_mmap_ro(int fd, size_t len, off_t off)
{
	return (void *)sys_call(SYS_mmap, NULL, len, PROT_READ, MAP_SHARED, fd,
			       off);
}

static inline int sys_mincore(void *addr, size_t len, unsigned char *vec)
{
	return (int)sys_call(SYS_mincore, addr, len, vec);
}

/* The shim's own mappings: its unmapping takes nothing the application
 * reads (the munmap wrapper would have every thread ask again, umem.c). */
static inline int sys_munmap(void *addr, size_t len)
{
	return (int)sys_call(SYS_munmap, addr, len);
}

/* The shim's own mappings and advice, and its write-out of a range: not
 * the wrappers (the mmap and madvise wrappers tell umem.c, and none of
 * these is a mapping, an advice or a range the program reads). */
static inline void *sys_mmap(void *addr, size_t len, int prot, int flags,
			     int fd, off_t off)
{
	return (void *)sys_call(SYS_mmap, addr, len, prot, flags, fd, off);
}

static inline int sys_madvise(void *addr, size_t len, int advice)
{
	return (int)sys_call(SYS_madvise, addr, len, advice);
}

static inline int sys_sync_file_range(int fd, off_t off, off_t n,
				      unsigned int flags)
{
	return (int)sys_call(SYS_sync_file_range, fd, off, n, flags);
}

static inline ssize_t sys_read(int fd, void *buf, size_t n)
{
	return sys_call(SYS_read, fd, buf, n);
}

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline ssize_t sys_pread(int fd, void *buf, size_t n, off_t off)
{
	return sys_call(SYS_pread64, fd, buf, n, off);
}

static inline int sys_statx(int dirfd, const char *path, int flags,
			    unsigned mask, struct statx *stx)
{
	return (int)SYS_TRY(sys_call(SYS_statx, dirfd, path, flags, mask, stx));
}

/*
 * The size and identity of the shim's files are read through another
 * call when one keeps failing where it should not (an EIO from fstat):
 * the answer is the kernel's all the same, and a size the shim cannot
 * read is a tail it cannot cut, or words it cannot start.
 */
int sys_fstat_slow(int fd, struct stat *st);
int sys_each_line(const char *path, int (*fn)(char *line, void *arg),
		  void *arg);
int sys_fstatfs_slow(int fd, struct statfs *sfs);

static inline int sys_fstat(int fd, struct stat *st)
{
	if (__builtin_expect(SYS_TRY(sys_call(SYS_fstat, fd, st)) == 0, 1))
		return 0;
	return sys_fstat_slow(fd, st);
}

static inline int sys_fstatfs(int fd, struct statfs *sfs)
{
	if (__builtin_expect(SYS_TRY(sys_call(SYS_fstatfs, fd, sfs)) == 0, 1))
		return 0;
	return sys_fstatfs_slow(fd, sfs);
}

/* A truncate to a size is made again for EPERM too: the kernel says it
 * for an immutable or append-only file, which stays so (then four tries
 * cost three calls), and nothing else here; one that passes would leave
 * a reserved tail for good. */
static inline int sys_ftruncate(int fd, off_t len)
{
	long r;
	int t = 0;

	while ((r = sys_call(SYS_ftruncate, fd, len)) < 0 &&
	       (sys_again(&t) || (errno == EPERM && ++t < SYS_TRIES)))
		;
	return (int)r;
}

/* Whether fd's file has the extended attribute name (nothing read;
 * errno kept). */
static inline bool sys_has_xattr(int fd, const char *name)
{
	int saved = errno;
	bool here = SYS_TRY(sys_call(SYS_fgetxattr, fd, name, NULL, 0)) >= 0;

	errno = saved;
	return here;
}

static inline int sys_fsync(int fd)
{
	return (int)sys_call(SYS_fsync, fd);
}

static inline int sys_fallocate(int fd, int mode, off_t off, off_t len)
{
	return (int)sys_call(SYS_fallocate, fd, mode, off, len);
}

static inline off_t sys_lseek(int fd, off_t off, int whence)
{
	return (off_t)sys_call(SYS_lseek, fd, off, whence);
}

static inline int sys_fcntl(int fd, int cmd, long arg)
{
	return (int)sys_call(SYS_fcntl, fd, cmd, arg);
}

static inline int sys_unlink(const char *path)
{
	return (int)SYS_TRY(sys_call(SYS_unlinkat, AT_FDCWD, path, 0));
}

static inline int sys_link(const char *from, const char *to)
{
	return (int)SYS_TRY(
		sys_call(SYS_linkat, AT_FDCWD, from, AT_FDCWD, to, 0));
}

static inline int sys_fchmod(int fd, mode_t m)
{
	return (int)SYS_TRY(sys_call(SYS_fchmod, fd, m));
}

static inline pid_t sys_gettid(void)
{
	return (pid_t)sys_call(SYS_gettid);
}

/*
 * The calls below are made once, as they are: a caller that would have
 * one made again while it fails for the moment writes SYS_TRY around it.
 * The status calls answer 0 or -1 (errno), as the kernel's own.
 */
static inline pid_t sys_getpid(void)
{
	return (pid_t)sys_call(SYS_getpid);
}

static inline ssize_t sys_write(int fd, const void *buf, size_t n)
{
	return sys_call(SYS_write, fd, buf, n);
}

static inline int sys_openat_once(int dirfd, const char *path, int flags,
				  mode_t m)
{
	return (int)sys_call(SYS_openat, dirfd, path, flags, m);
}

static inline int sys_newfstatat(int dirfd, const char *path, struct stat *st,
				 int flags)
{
	return (int)sys_call(SYS_newfstatat, dirfd, path, st, flags);
}

static inline ssize_t sys_readlinkat(int dirfd, const char *path, char *buf,
				     size_t cap)
{
	return sys_call(SYS_readlinkat, dirfd, path, buf, cap);
}

static inline int sys_mkdirat(int dirfd, const char *path, mode_t m)
{
	return (int)sys_call(SYS_mkdirat, dirfd, path, m);
}

static inline int sys_unlinkat(int dirfd, const char *path, int flags)
{
	return (int)sys_call(SYS_unlinkat, dirfd, path, flags);
}

static inline int sys_fchownat(int dirfd, const char *path, uid_t uid,
			       gid_t gid, int flags)
{
	return (int)sys_call(SYS_fchownat, dirfd, path, uid, gid, flags);
}

static inline int sys_fchmodat(int dirfd, const char *path, mode_t m)
{
	return (int)sys_call(SYS_fchmodat, dirfd, path, m);
}

static inline int sys_fchown(int fd, uid_t uid, gid_t gid)
{
	return (int)sys_call(SYS_fchown, fd, uid, gid);
}

static inline int sys_truncate(const char *path, off_t len)
{
	return (int)sys_call(SYS_truncate, path, len);
}

static inline long sys_getdents64(int fd, void *buf, size_t cap)
{
	return sys_call(SYS_getdents64, fd, buf, cap);
}

static inline int sys_ioctl(int fd, unsigned int req, void *arg)
{
	return (int)sys_call(SYS_ioctl, fd, req, arg);
}

static inline int sys_fadvise64(int fd, off_t off, off_t len, int advice)
{
	return (int)sys_call(SYS_fadvise64, fd, off, len, advice);
}

static inline ssize_t sys_fgetxattr(int fd, const char *name, void *buf,
				    size_t cap)
{
	return sys_call(SYS_fgetxattr, fd, name, buf, cap);
}

static inline int sys_fsetxattr(int fd, const char *name, const void *v,
				size_t n, int flags)
{
	return (int)sys_call(SYS_fsetxattr, fd, name, v, n, flags);
}

static inline int sys_fremovexattr(int fd, const char *name)
{
	return (int)sys_call(SYS_fremovexattr, fd, name);
}

static inline int sys_memfd_create(const char *name, unsigned int flags)
{
	return (int)sys_call(SYS_memfd_create, name, flags);
}

/* pos_lo, pos_hi: the offset as the kernel takes it (pos_hi 0 on 64-bit). */
static inline ssize_t sys_pwritev2(int fd, const struct iovec *iov, int cnt,
				   long pos_lo, long pos_hi, int flags)
{
	return sys_call(SYS_pwritev2, fd, iov, cnt, pos_lo, pos_hi, flags);
}

static inline ssize_t sys_getrandom(void *buf, size_t n, unsigned int flags)
{
	return sys_call(SYS_getrandom, buf, n, flags);
}

static inline int sys_rt_sigprocmask(int how, const void *set, void *old,
				     size_t setsize)
{
	return (int)sys_call(SYS_rt_sigprocmask, how, set, old, setsize);
}

static inline int sys_io_uring_enter(int fd, unsigned int to_submit,
				     unsigned int min_complete,
				     unsigned int flags, const void *arg,
				     size_t argsz)
{
	return (int)sys_call(SYS_io_uring_enter, fd, to_submit, min_complete,
			     flags, arg, argsz);
}

/* The shared futex words (not FUTEX_PRIVATE: other processes wait on
 * them too): a wait of at most timeout while *addr is val, and a wake of
 * at most n waiters. */
static inline long sys_futex_wait(_Atomic uint32_t *addr, uint32_t val,
				  const struct timespec *timeout)
{
	return sys_call(SYS_futex, addr, FUTEX_WAIT, val, timeout, NULL, 0);
}

static inline long sys_futex_wake(_Atomic uint32_t *addr, int n)
{
	return sys_call(SYS_futex, addr, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* Another thread ends the process: this one waits for its exit_group. */
static inline __attribute__((noreturn)) void sys_wait_for_the_end(void)
{
	static const struct timespec nap = { 1, 0 };

	for (;;)
		nanosleep(&nap, NULL);
}

#endif
