/* SPDX-License-Identifier: MIT */
/*
 * The I/O paths: how a write, a read, a position or size call on a served
 * fd uses the mechanisms (in-flight counter, reservation, EOF words, append
 * tail, barrier).  The wrappers in interpose.c decode their arguments into
 * an io_req and call here; nothing here decides whether an fd is served.
 */
#ifndef DIOSHIM_IO_H
#define DIOSHIM_IO_H

#include "abi.h"
#include "fdtable.h"

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

/* Set while this thread runs shim code that may hold a lock: a wrapper
 * entered meanwhile (from a signal handler) passes its call through. */
extern __thread int io_busy __attribute__((tls_model("initial-exec")));

/* Around the shim's own work for a call: this thread marked inside the
 * shim (a signal handler's call meanwhile takes no lock and goes as it
 * is) and not cancellable (a cancel cannot leave a count or a lock up). */
struct guard {
	int cancel_state;
	int saved_errno;
	int busy;
};

/* cancel_point: the call is a cancellation point in glibc (read, write,
 * fsync, fallocate...), so a cancel pending at entry acts here, as it
 * would in the real call; lseek, ftruncate and posix_fallocate are not. */
static inline void guard_enter(struct guard *g, bool cancel_point)
{
	g->saved_errno = errno;
	if (cancel_point)
		pthread_testcancel();
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &g->cancel_state);
	g->busy = io_busy;
	io_busy = 1;
}

/* Leave with the call's own errno on failure, the caller's on success. */
static inline void guard_exit(struct guard *g, ssize_t ret, int err)
{
	io_busy = g->busy;
	pthread_setcancelstate(g->cancel_state, NULL);
	errno = ret < 0 ? err : g->saved_errno;
}

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
off_t io_lseek(struct ofd *o, int fd, off_t off, int whence, bool reentrant);
int io_ftruncate(struct ofd *o, int fd, off_t len);
/* posix: posix_fallocate's convention (returns the error number). */
int io_fallocate(struct ofd *o, int fd, int mode, off_t off, off_t len,
		 bool posix);

/*
 * A call the kernel makes on f's blocks and size behind the write path: a
 * copy or a splice into it, a clone, a dedupe or an exchange of ranges, a
 * fallocate that moves blocks.  io_quiesce drains f's writers (the
 * barrier, every process's) and cuts its reservation, so that the kernel
 * sees the size the application does; io_resume takes the size the call
 * left as the file's and lets the writers go.  False (nothing held): the
 * barrier could not be raised, the call goes as it is.
 */
struct quiesce {
	struct shim_file *f;
	int fd;
	bool raised, locked;
};
bool io_quiesce(struct shim_file *f, int fd, struct quiesce *q);
void io_resume(struct quiesce *q);

/* fsync / fdatasync: keeps the EOF record able to find the size being
 * made durable, then syncs (shared with concurrent callers when group
 * commit is on). */
int io_fsync(struct ofd *o, int fd, bool datasync);

/* The logical EOF, bounded by the size the kernel just reported. */
uint64_t io_eof(struct ofd *o, int fd, uint64_t kernel_size, bool reentrant);

/* open/openat/creat of every flavour: O_TRUNC of a served file goes
 * through the barrier. */
int io_open(int dirfd, const char *path, int flags, mode_t mode);

/* fd was opened by a stream (fopen, freopen), out of the shim's sight:
 * a record a crash left on its file is recovered, as at an open. */
void io_stream_opened(int fd);

/* stat(path) family: correct st_size if a segment serves the file. */
void io_fix_path_size(const char *path, int dirfd, int at_flags,
		      struct stat *st);

/* interpose.c, for async.c's wrappers: the ofd whose rules apply to fd
 * (NULL: pass through), called with io_busy set; and whether wrappers act
 * at all right now. */
struct ofd *shim_served(int fd);
bool shim_active(void);
/* Whether this call came while this thread runs the shim's own code (a
 * signal handler's, or a library's call back into its own wrapped
 * functions): it may take none of the shim's locks. */
bool shim_nested(void);

#endif
