// SPDX-License-Identifier: MIT
/*
 * The wrappers of reads and writes (L5: one check, then a call to io.c).
 * The busiest wrappers of all: their fast path is serve.h's inline checks
 * and nothing else.
 */
#define _GNU_SOURCE
#include "wrap.h"

#include "fsync.h"
#include "grow.h"
#include "io.h"
#include "sizes.h"

#include <sys/uio.h>
#include <unistd.h>

/* ---- reads -------------------------------------------------------------- */

#define READ_BODY(fallback, ...)                                   \
	do {                                                       \
		bool re_;                                          \
		struct ofd *o_ = served_io(fd, &re_);              \
		if (!o_)                                           \
			return fallback;                           \
		struct io_req r_ = { __VA_ARGS__ };                \
		return io_read(o_, &r_, re_);                      \
	} while (0)

/*
 * The busiest wrappers: the test that passes a call through first, with
 * nothing else in the function, so that it costs no frame; the rest in a
 * function of its own.  Together in .text.hot: one page of code for all
 * of them (a page is a TLB miss after each system call, hot.c).
 */
#define HOT_WRAPPER(ret, name, write, params, args)                       \
	EXPORT __attribute__((hot)) ret name params                      \
	{                                                                \
		if (io_surely_pass(fd, write))                           \
			return real_##name args;                         \
		return name##_slow args;                                 \
	}

static __attribute__((noinline)) ssize_t read_slow(int fd, void *buf,
						    size_t n)
{
	READ_BODY(real_read(fd, buf, n), .kind = IO_PLAIN, .fd = fd,
		  .buf = buf, .len = n);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	READ_BODY(real_readv(fd, iov, cnt), .kind = IO_VEC, .fd = fd,
		  .iov = iov, .iovcnt = cnt);
}

HOT_WRAPPER(ssize_t, read, false, (int fd, void *buf, size_t n),
	    (fd, buf, n))

static __attribute__((noinline)) ssize_t pread_slow(int fd, void *buf,
						     size_t n, off_t off)
{
	READ_BODY(real_pread(fd, buf, n, off), .kind = IO_P, .fd = fd,
		  .buf = buf, .len = n, .off = off);
}

HOT_WRAPPER(ssize_t, pread, false,
	    (int fd, void *buf, size_t n, off_t off), (fd, buf, n, off))

static __attribute__((noinline)) ssize_t pread64_slow(int fd, void *buf,
						       size_t n, off64_t off)
{
	READ_BODY(real_pread64(fd, buf, n, off), .kind = IO_P, .fd = fd,
		  .buf = buf, .len = n, .off = off);
}

HOT_WRAPPER(ssize_t, pread64, false,
	    (int fd, void *buf, size_t n, off64_t off), (fd, buf, n, off))

EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	READ_BODY(real_preadv(fd, iov, cnt, off), .kind = IO_PV, .fd = fd,
		  .iov = iov, .iovcnt = cnt, .off = off);
}

EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	READ_BODY(real_preadv64(fd, iov, cnt, off), .kind = IO_PV, .fd = fd,
		  .iov = iov, .iovcnt = cnt, .off = off);
}

EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off,
		       int flags)
{
	READ_BODY(real_preadv2(fd, iov, cnt, off, flags), .kind = IO_PV2,
		  .fd = fd, .iov = iov, .iovcnt = cnt, .off = off,
		  .rwf = flags);
}

EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt,
			  off64_t off, int flags)
{
	READ_BODY(real_preadv64v2(fd, iov, cnt, off, flags), .kind = IO_PV2,
		  .fd = fd, .iov = iov, .iovcnt = cnt, .off = off,
		  .rwf = flags);
}

/* Fortified reads: a buffer smaller than n is the real function's to
 * report (it aborts). */
EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	lib_ensure();
	if (n > buflen)
		return real___read_chk(fd, buf, n, buflen);
	return read(fd, buf, n);
}

EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off,
			   size_t buflen)
{
	lib_ensure();
	if (n > buflen)
		return real___pread_chk(fd, buf, n, off, buflen);
	return pread(fd, buf, n, off);
}

EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off,
			     size_t buflen)
{
	lib_ensure();
	if (n > buflen)
		return real___pread64_chk(fd, buf, n, off, buflen);
	return pread64(fd, buf, n, off);
}

/* ---- writes ------------------------------------------------------------- */

#define WRITE_BODY(fallback, ...)                                  \
	do {                                                       \
		bool re_;                                          \
		if (io_surely_pass(fd, true))                      \
			return fallback;                           \
		struct ofd *o_ = served_io(fd, &re_);              \
		if (!o_) {                                         \
			struct shim_file *x_ = exact_appender(fd); \
			struct ofd *g_;                            \
			if (x_) {                                  \
				struct io_req r_ = { __VA_ARGS__ }; \
				return io_write_exact(x_, &r_);    \
			}                                          \
			g_ = guest_writer(fd);                     \
			if (!g_)                                   \
				return fallback;                   \
			struct io_req r_ = { __VA_ARGS__ };        \
			return io_write_guest(g_, &r_);            \
		}                                                  \
		struct io_req r_ = { __VA_ARGS__ };                \
		return io_write(o_, &r_, re_);                     \
	} while (0)

static __attribute__((noinline)) ssize_t write_slow(int fd, const void *buf,
						     size_t n)
{
	WRITE_BODY(real_write(fd, buf, n), .kind = IO_PLAIN, .fd = fd,
		   .buf = (void *)buf, .len = n);
}

HOT_WRAPPER(ssize_t, write, true, (int fd, const void *buf, size_t n),
	    (fd, buf, n))

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	WRITE_BODY(real_writev(fd, iov, cnt), .kind = IO_VEC, .fd = fd,
		   .iov = iov, .iovcnt = cnt);
}

static __attribute__((noinline)) ssize_t pwrite_slow(int fd, const void *buf,
						      size_t n, off_t off)
{
	WRITE_BODY(real_pwrite(fd, buf, n, off), .kind = IO_P, .fd = fd,
		   .buf = (void *)buf, .len = n, .off = off);
}

HOT_WRAPPER(ssize_t, pwrite, true,
	    (int fd, const void *buf, size_t n, off_t off), (fd, buf, n, off))

static __attribute__((noinline)) ssize_t pwrite64_slow(int fd,
							const void *buf,
							size_t n, off64_t off)
{
	WRITE_BODY(real_pwrite64(fd, buf, n, off), .kind = IO_P, .fd = fd,
		   .buf = (void *)buf, .len = n, .off = off);
}

HOT_WRAPPER(ssize_t, pwrite64, true,
	    (int fd, const void *buf, size_t n, off64_t off),
	    (fd, buf, n, off))

EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	WRITE_BODY(real_pwritev(fd, iov, cnt, off), .kind = IO_PV, .fd = fd,
		   .iov = iov, .iovcnt = cnt, .off = off);
}

EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt,
			 off64_t off)
{
	WRITE_BODY(real_pwritev64(fd, iov, cnt, off), .kind = IO_PV, .fd = fd,
		   .iov = iov, .iovcnt = cnt, .off = off);
}

EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off,
			int flags)
{
	WRITE_BODY(real_pwritev2(fd, iov, cnt, off, flags), .kind = IO_PV2,
		   .fd = fd, .iov = iov, .iovcnt = cnt, .off = off,
		   .rwf = flags);
}

EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt,
			   off64_t off, int flags)
{
	WRITE_BODY(real_pwritev64v2(fd, iov, cnt, off, flags), .kind = IO_PV2,
		   .fd = fd, .iov = iov, .iovcnt = cnt, .off = off,
		   .rwf = flags);
}
