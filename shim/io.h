/* SPDX-License-Identifier: MIT */
/*
 * The I/O paths: how a write, a read, a position or size call on a served
 * fd uses the mechanisms (in-flight counter, reservation, EOF words, append
 * tail, barrier).  The wrappers (wrap_*.c) decode their arguments into
 * an io_req and call here; nothing here decides whether an fd is served.
 * Layer L4.
 * This header declares io.c's (writes, reads, open) and includes those of
 * the other I/O path files, bottom up: fsync.h (fsync.c), grow.h (grow.c:
 * ftruncate, fallocate, quiesce), sizes.h (sizes.c: lseek, the size a
 * stat reports).
 */
#ifndef DIOSHIM_IO_H
#define DIOSHIM_IO_H

#include "abi.h"
#include "fdtable.h"
#include "guard.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Which libc call an io_req came from: the real call made is the same
 * one, with the same arguments, unless an append needs an offset. */
enum io_kind {
	IO_PLAIN, /* read / write */
	IO_VEC, /* readv / writev */
	IO_P, /* pread / pwrite */
	IO_PV, /* preadv / pwritev */
	IO_PV2, /* preadv2 / pwritev2 (off -1: the file position) */
};

struct io_req {
	enum io_kind kind;
	int fd;
	void *buf; /* IO_PLAIN, IO_P */
	size_t len;
	const struct iovec *iov; /* IO_VEC, IO_PV, IO_PV2 */
	int iovcnt;
	off_t off; /* IO_P, IO_PV, IO_PV2 */
	int rwf; /* IO_PV2 */
};

/* reentrant: called from a signal handler that interrupted this thread
 * inside the shim — take no lock and wait for nothing. */
ssize_t io_write(struct ofd *o, const struct io_req *r, bool reentrant);
/* A write through an O_APPEND descriptor of f, which the shim does not
 * serve because the file is exact (f is a guest's, or a guest writes it):
 * as the kernel does it, one append at a time among the segment's users. */
ssize_t io_write_exact(struct shim_file *f, const struct io_req *r);
/* A write through o, a guest writer's description (fdtable_guest_writer). */
ssize_t io_write_guest(struct ofd *o, const struct io_req *r);
ssize_t io_read(struct ofd *o, const struct io_req *r, bool reentrant);

/* open/openat/creat of every flavour: O_TRUNC of a served file goes
 * through the barrier. */
int io_open(int dirfd, const char *path, int flags, mode_t mode);

/* fd was opened by a stream (fopen, freopen), out of the shim's sight:
 * a record a crash left on its file is recovered, as at an open. */
void io_stream_opened(int fd);

#endif
