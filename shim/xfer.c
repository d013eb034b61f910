// SPDX-License-Identifier: MIT
/*
 * Transfers (xfer.h): the calls that move data from file to file inside
 * the kernel, with every file they may change held around them.  L4:
 * calls io (io_quiesce, io_resume, io_eof) and fdtable (L4), serve's
 * checks, lib (L1), L0 (umem, sys, real, guard, log).
 *
 * Lock order: the files a call holds are quiesced in the order of their
 * (dev, ino), every process's holders alike (holds_take).
 */
#define _GNU_SOURCE
#include "xfer.h"

#include "grow.h"
#include "io.h"
#include "sizes.h"
#include "log.h"
#include "real.h"
#include "serve.h"
#include "sys.h"
#include "umem.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

/* ---- calls that move data from file to file -----------------------------
 *
 * copy_file_range, sendfile and splice read a source and write a
 * destination inside the kernel; the clone, dedupe and exchange ioctls
 * move blocks and sizes.  Every file whose blocks or size such a call may
 * change (a destination, every file of a block call, whose checks compare
 * ranges with the size), and a served source the call reads past its
 * logical end, is held around the call: a served one quiesced
 * (io_quiesce: its writers drained, its reservation cut, so that the
 * kernel's checks and stops are those of the data, and the size the call
 * leaves taken as its own), a guest writer's counted in as its writes are
 * (fdtable_raw_enter).  A call with no side the shim serves goes to the
 * kernel untouched (a splice between pipes stays a cancellation point).
 */

/* The files a call holds, each once, in room the caller gives. */
struct holds {
	int n, max;
	struct hold {
		int fd;
		struct ofd *o, *g; /* served, or a guest writer's */
		uint32_t inc;
		struct quiesce q;
	} *h;
};

/* fd to hold: served through o, or a guest writer's through g. */
static void holds_put(struct holds *hs, int fd, struct ofd *o, struct ofd *g)
{
	struct hold *h;
	int i;

	if (!o && !g)
		return;
	for (i = 0; i < hs->n; i++)
		if (hs->h[i].fd == fd)
			return;
	if (hs->n == hs->max) {
		log_once(LOG_FALLBACK, NULL,
			 "a call on more than %d files: the rest go as they "
			 "are",
			 hs->max);
		return;
	}
	h = &hs->h[hs->n++];
	h->fd = fd;
	h->o = o;
	h->g = g;
	h->q.raised = false;
}

/* Note fd as one the call writes (before holds_take's guard: a guest
 * writer is found outside it). */
static void holds_add(struct holds *hs, int fd)
{
	struct ofd *o = served(fd);

	holds_put(hs, fd, o, o ? NULL : guest_writer(fd));
}

static bool hold_before(const struct hold *a, const struct hold *b)
{
	struct shim_file *x = atomic_load(&a->o->file);
	struct shim_file *y = atomic_load(&b->o->file);

	return x->dev < y->dev || (x->dev == y->dev && x->ino < y->ino);
}

/* Hold them (inside the guard): guests counted in first — one attached
 * meanwhile is served — then the served quiesced in the order of their
 * (dev, ino), every process's holders alike, each file once. */
static void holds_take(struct holds *hs)
{
	struct hold t;
	int i, j;

	for (i = 0; i < hs->n; i++) {
		struct hold *h = &hs->h[i];

		if (h->g && !fdtable_raw_enter(h->fd, h->g, &h->inc)) {
			h->g = NULL;
			h->o = shim_served(h->fd);
		}
	}
	for (i = 1; i < hs->n; i++)
		for (j = i; j > 0 && hs->h[j].o &&
			    (!hs->h[j - 1].o ||
			     hold_before(&hs->h[j], &hs->h[j - 1]));
		     j--) {
			t = hs->h[j];
			hs->h[j] = hs->h[j - 1];
			hs->h[j - 1] = t;
		}
	for (i = 0; i < hs->n && hs->h[i].o; i++) {
		struct shim_file *f = atomic_load(&hs->h[i].o->file);

		if (i && f == atomic_load(&hs->h[i - 1].o->file))
			continue;
		io_quiesce(f, hs->h[i].fd, &hs->h[i].q);
	}
}

static void holds_drop(struct holds *hs)
{
	int i;

	for (i = hs->n - 1; i >= 0; i--) {
		io_resume(&hs->h[i].q);
		if (hs->h[i].g)
			fdtable_raw_exit(hs->h[i].g, hs->h[i].inc);
	}
}

static ssize_t xfer_real(enum xfer_call c, int in, void *off_in, int out,
			 void *off_out, size_t len, unsigned flags)
{
	switch (c) {
	case X_COPY:
		return real_copy_file_range(in, off_in, out, off_out, len,
					    flags);
	case X_SENDFILE:
		return real_sendfile(out, in, off_in, len);
	case X_SENDFILE64:
		return real_sendfile64(out, in, off_in, len);
	default:
		return real_splice(in, off_in, out, off_out, len, flags);
	}
}

/* Where a read of fd (o, served) from *offp (else its position) for len
 * bytes ends against the logical size: SRC_INSIDE below it, SRC_CUT
 * past it with *len cut to it (a buffered source, some of it below the
 * size, for a call the kernel may not run with the file quiesced),
 * SRC_HOLD past it otherwise (the source is to be quiesced: a cut length
 * could break a direct read's alignment, move the kernel's own checks, or
 * clone less).  Anything the kernel is to refuse is left to it. */
enum src_plan { SRC_INSIDE, SRC_CUT, SRC_HOLD };
/* may_cut: no, a buffered source with data left, or always (nothing can
 * be held: better an answer the kernel might refuse than zeros). */
enum { CUT_NEVER, CUT_BUFFERED, CUT_ALWAYS };

static enum src_plan source_plan(struct ofd *o, int fd, const off64_t *offp,
				 size_t *len, int may_cut, bool reentrant)
{
	uint32_t fl = atomic_load_explicit(&o->flags, memory_order_relaxed);
	uint64_t eof;
	off64_t pos;

	if (!*len || (fl & O_ACCMODE) == O_WRONLY || (fl & O_PATH))
		return SRC_INSIDE;
	if (offp) {
		if (umem_read(&pos, offp, sizeof(pos)) != sizeof(pos))
			return SRC_INSIDE;
	} else {
		pos = sys_lseek(fd, 0, SEEK_CUR);
	}
	if (pos < 0)
		return SRC_INSIDE;
	eof = io_eof(o, fd, UINT64_MAX, reentrant);
	if ((uint64_t)pos < eof && *len <= eof - (uint64_t)pos)
		return SRC_INSIDE;
	if (may_cut == CUT_ALWAYS ||
	    (may_cut && !(fl & O_DIRECT) && (uint64_t)pos < eof)) {
		*len = (uint64_t)pos >= eof ? 0 : (size_t)(eof - (uint64_t)pos);
		return SRC_CUT;
	}
	return SRC_HOLD;
}

/* Whether fd's file is quiesced among hs. */
static bool source_held(const struct holds *hs, int fd)
{
	struct shim_file *f = NULL;
	int i;

	for (i = 0; i < hs->n; i++)
		if (hs->h[i].fd == fd && hs->h[i].o)
			f = atomic_load(&hs->h[i].o->file);
	for (i = 0; i < hs->n; i++)
		if (hs->h[i].q.raised && hs->h[i].q.f == f)
			return f != NULL;
	return false;
}

/* A splice that found its pipe full or empty while holding files: wait
 * for it with nothing held (a cancellation point, as the call is), then
 * try again.  False if the pipe is the program's non-blocking one: the
 * kernel's EAGAIN stands. */
static bool splice_wait(int pipe_fd, short events)
{
	struct pollfd p = { .fd = pipe_fd, .events = events };
	int fl = sys_fcntl(pipe_fd, F_GETFL, 0);

	if (fl < 0 || (fl & O_NONBLOCK))
		return false;
	return poll(&p, 1, -1) >= 0 || errno == EINTR;
}

ssize_t xfer(enum xfer_call c, int in, void *off_in, int out,
		    void *off_out, size_t len, unsigned flags)
{
	struct hold room[2], dest;
	struct holds hs = { .n = 0, .max = 2, .h = room };
	enum src_plan plan = SRC_INSIDE;
	int ndest;
	struct guard g;
	struct ofd *o;
	struct stat st;
	ssize_t ret;
	int err;
	bool re;

	/* A signal handler inside the shim, or a vfork child: no lock, no
	 * hold; a buffered source still stops at the logical size. */
	o = served_io(in, &re);
	if (re || in_vfork_child()) {
		if (o)
			source_plan(o, in, off_in, &len, CUT_ALWAYS, true);
		return xfer_real(c, in, off_in, out, off_out, len, flags);
	}
	if (!shim_on())
		return xfer_real(c, in, off_in, out, off_out, len, flags);
	holds_add(&hs, out);
	if (!o && !hs.n)
		return xfer_real(c, in, off_in, out, off_out, len, flags);
	/* copy_file_range and splice are cancellation points, sendfile is
	 * not; the guard keeps a cancel from leaving a file held. */
	guard_enter(&g, c == X_COPY || c == X_SPLICE);
	dest = room[0];
	ndest = hs.n;
	for (;;) {
		/* Planned anew each time: the size moves while we wait. */
		hs.n = ndest;
		room[0] = dest;
		if (o) {
			/* sendfile to a socket or a pipe may block on it: a
			 * buffered source is cut rather than held across
			 * that.  sendfile's offset is 64 bits, as off64_t. */
			bool may_cut = (c == X_SENDFILE || c == X_SENDFILE64) &&
				       (sys_fstat(out, &st) ||
					!S_ISREG(st.st_mode));

			plan = source_plan(o, in, off_in, &len,
					   may_cut ? CUT_BUFFERED : CUT_NEVER,
					   false);
			if (plan == SRC_HOLD)
				holds_put(&hs, in, o, NULL);
		}
		holds_take(&hs);
		/* A source that could not be quiesced (its writers would
		 * not drain: a signal handler that interrupted one) is cut
		 * after all. */
		if (plan == SRC_HOLD && !source_held(&hs, in))
			source_plan(o, in, off_in, &len, CUT_ALWAYS, false);
		/* A splice holds nothing while its pipe makes it wait. */
		ret = xfer_real(c, in, off_in, out, off_out, len,
				c == X_SPLICE && hs.n ? flags | SPLICE_F_NONBLOCK
						      : flags);
		err = errno;
		holds_drop(&hs);
		if (c != X_SPLICE || !hs.n || ret >= 0 || err != EAGAIN ||
		    (flags & SPLICE_F_NONBLOCK))
			break;
		/* One side is a pipe: the source's reader, or the
		 * destination's writer. */
		guard_exit(&g, ret, err);
		if (!splice_wait(o ? out : in, o ? POLLOUT : POLLIN))
			return ret;
		guard_enter(&g, true);
	}
	guard_exit(&g, ret, err);
	return ret;
}

/* XFS's exchange of ranges (Linux 6.10) and its commit (6.13): file1's
 * descriptor first in each.  A commit exchanges only if file2 has not
 * changed (its times) since START_COMMIT sampled it: its reserved tail is
 * cut before the sample, so that the commit's own hold finds nothing to
 * cut and changes nothing (unless a write came between, as the kernel
 * alone would then refuse it too). */
struct xfs_exchange_range_ {
	int32_t file1_fd;
	uint32_t pad;
	uint64_t file1_offset, file2_offset, length, flags;
};
struct xfs_commit_range_ {
	int32_t file1_fd;
	uint32_t pad;
	uint64_t file1_offset, file2_offset, length, flags;
	uint64_t file2_freshness[6];
};
#define XFS_IOC_EXCHANGE_RANGE_ _IOW('X', 129, struct xfs_exchange_range_)
#define XFS_IOC_START_COMMIT_ _IOR('X', 130, struct xfs_commit_range_)
#define XFS_IOC_COMMIT_RANGE_ _IOW('X', 131, struct xfs_commit_range_)

/* The kernel reads the request as 32 bits: so do we (FIDEDUPERANGE has
 * bit 31 set, and may come sign-extended from an int). */
bool blocks_request(unsigned int req)
{
	return req == FICLONE || req == FICLONERANGE ||
	       req == FIDEDUPERANGE || req == XFS_IOC_EXCHANGE_RANGE_ ||
	       req == XFS_IOC_START_COMMIT_ || req == XFS_IOC_COMMIT_RANGE_;
}

/* The most files a dedupe can name (the kernel takes one page of
 * request), and its source. */
#define BLOCKS_FILES (1 + (4096 - sizeof(struct file_dedupe_range)) / \
			      sizeof(struct file_dedupe_range_info))

/* A clone, dedupe or exchange on fd: every file it names held. */
int blocks_call(int fd, unsigned int req, unsigned long raw, void *arg)
{
	struct hold room[BLOCKS_FILES]; /* 7 KiB of stack, for a rare call */
	struct holds hs = { .n = 0, .max = (int)BLOCKS_FILES, .h = room };
	struct file_dedupe_range dr;
	struct file_dedupe_range_info di;
	struct guard g;
	int32_t other;
	int ret, err;
	unsigned i;

	holds_add(&hs, fd);
	switch (req) {
	case FICLONE:
		holds_add(&hs, (int)(intptr_t)arg);
		break;
	case FICLONERANGE: /* src_fd, an s64, first */
	case XFS_IOC_EXCHANGE_RANGE_:
	case XFS_IOC_COMMIT_RANGE_:
		if (umem_read(&other, arg, sizeof(other)) == sizeof(other))
			holds_add(&hs, other);
		break;
	case FIDEDUPERANGE:
		if (umem_read(&dr, arg, sizeof(dr)) != sizeof(dr))
			break;
		for (i = 0; i < dr.dest_count && i + 1 < BLOCKS_FILES; i++) {
			if (umem_read(&di, (char *)arg + sizeof(dr) +
						   i * sizeof(di),
				      sizeof(di)) != sizeof(di))
				break;
			holds_add(&hs, (int)di.dest_fd);
		}
		break;
	}
	guard_enter(&g, false);
	holds_take(&hs);
	ret = real_ioctl(fd, raw, arg);
	err = errno;
	holds_drop(&hs);
	guard_exit(&g, ret, err);
	return ret;
}
