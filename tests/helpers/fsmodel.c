// SPDX-License-Identifier: MIT
/*
 * fsmodel DIR SEED OPS: random operations on one file, every read and
 * every size compared with a model of it kept in memory (in the spirit of
 * fstests' fsx, written here).  The file DIR/f is opened three ways — an
 * O_DIRECT descriptor, a buffered one and an O_APPEND|O_DIRECT one — and
 * worked through every call dioshim serves: positional and appending
 * writes, direct and buffered reads (at and past the end too), fstat and
 * lseek, ftruncate, fallocate in each mode, libaio and io_uring writes
 * and reads, copy_file_range (from another file and within the file),
 * sendfile and splice out of it, clone, dedupe and exchange ranges,
 * fsync, and closing every descriptor and opening them again (the last
 * close).
 *
 * Prints one line per operation — what it asked and what the kernel
 * answered — so that a run under the shim can be compared line by line
 * with the kernel alone's; a read or a size that differs from the model
 * prints MISMATCH and exits 1.  At the end the model is written to
 * DIR/model, for a comparison made outside the shim.
 */
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <liburing.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#define BS 4096
#define MAXSZ (4u << 20)
#define SRCSZ (1u << 20)
#define IOMAX (64u << 10)

static unsigned char *model, *src, *buf, *cmpbuf, *xmodel;
static uint64_t msz, rng;
static int dfd, bfd, afd, sfd, ofd, xfd;
static io_context_t actx;
static struct io_uring ring;
static char path[4096], dir[4000];
static long op_no;
static struct iovec iov[2]; /* a vectored read's two halves */

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* An offset and a length: block-aligned ones for direct I/O. */
static void pick(bool aligned, uint64_t *off, uint64_t *len, uint64_t end)
{
	if (aligned) {
		*len = BS * (1 + below(IOMAX / BS));
		*off = BS * below((end - *len) / BS + 1);
	} else {
		*len = 1 + below(IOMAX);
		*off = below(end - *len + 1);
	}
}

static void fail(const char *what)
{
	printf("MISMATCH op %ld: %s (model size %llu)\n", op_no, what,
	       (unsigned long long)msz);
	fflush(stdout);
	exit(1);
}

/* A queued call that did not do what it must: what it returned. */
static void fail_queue(const char *what, long r)
{
	char why[128];

	snprintf(why, sizeof(why), "%s returned %ld (%s)", what, r,
		 r < 0 ? strerror((int)-r) : "short");
	fail(why);
}

/* The one completion of a queued call.  io_getevents may return -EINTR
 * with no handler installed (the process stopped and continued, as a
 * loaded test machine's job control or a tracer does): the completion is
 * still due, so wait again, as libaio's users do. */
static long reap(struct io_event *ev)
{
	long n;

	do
		n = io_getevents(actx, 1, 1, ev, NULL);
	while (n == -EINTR);
	return n;
}

static void fill(unsigned char *p, uint64_t n)
{
	uint64_t i, v = rnd();

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * (i % 8))) ^ (unsigned char)i;
}

/* The model after a write of [off, off+n) from p. */
static void m_write(uint64_t off, const void *p, uint64_t n)
{
	memcpy(model + off, p, n);
	if (off + n > msz)
		msz = off + n;
}

static void m_size(uint64_t n)
{
	if (n < msz)
		memset(model + n, 0, msz - n);
	msz = n;
}

/* What a read of [off, off+len) must return: n bytes, equal to the
 * model's; a splice may stop short (a pipe holds 16 pages), never at 0
 * before the end. */
static void check_read(const char *what, uint64_t off, uint64_t len,
		       long long got, const unsigned char *p)
{
	uint64_t want = off >= msz ? 0 : (msz - off < len ? msz - off : len);

	printf("%s %llu %llu -> %lld\n", what, (unsigned long long)off,
	       (unsigned long long)len, got);
	/* XFS answers EIO to a few queued direct reads across the end
	 * (seed 13, op 2351, on Linux 6.18): the kernel's answer, which the
	 * logs compare; the model says nothing of it. */
	if (got == -EIO)
		return;
	if (!strcmp(what, "splice_out") && got > 0 &&
	    (uint64_t)got < want)
		want = (uint64_t)got;
	if (got != (long long)want)
		fail("read length");
	if (want && memcmp(p, model + off, want))
		fail("read data");
}

static void check_size(void)
{
	struct stat st;
	off_t end;

	if (fstat(dfd, &st))
		fail("fstat");
	end = lseek(bfd, 0, SEEK_END);
	printf("size %lld end %lld\n", (long long)st.st_size, (long long)end);
	if ((uint64_t)st.st_size != msz || (uint64_t)end != msz)
		fail("size");
}

static long long rv(long long r)
{
	return r < 0 ? -errno : r;
}

static void open_all(void)
{
	snprintf(path, sizeof(path), "%s/f", dir);
	dfd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0644);
	bfd = open(path, O_RDWR);
	afd = open(path, O_WRONLY | O_APPEND | O_DIRECT);
	if (dfd < 0 || bfd < 0 || afd < 0) {
		perror("open");
		exit(2);
	}
}

static void close_all(void)
{
	close(dfd);
	close(bfd);
	close(afd);
}

/* A positional write: direct (aligned) or buffered (anywhere). */
static void op_write(bool direct)
{
	uint64_t off, len;
	long long r;

	pick(direct, &off, &len, MAXSZ);
	fill(buf, len);
	r = rv(pwrite(direct ? dfd : bfd, buf, len, (off_t)off));
	printf("%s %llu %llu -> %lld\n", direct ? "dio_write" : "buf_write",
	       (unsigned long long)off, (unsigned long long)len, r);
	if (r > 0)
		m_write(off, buf, (uint64_t)r);
}

static void op_append(void)
{
	uint64_t len = BS * (1 + below(4)), at = msz;

	if (msz + len > MAXSZ)
		return;
	fill(buf, len);
	long long r = rv(write(afd, buf, len));
	printf("append %llu -> %lld\n", (unsigned long long)len, r);
	if (r > 0)
		m_write(at, buf, (uint64_t)r);
}

static void op_dio_read(void)
{
	uint64_t off, len;

	pick(true, &off, &len, MAXSZ);
	/* Now and then at and across the end. */
	if (below(2) && msz >= BS)
		off = (msz & ~(uint64_t)(BS - 1)) - (below(2) ? BS : 0);
	memset(buf, 0xee, len);
	check_read("dio_read", off, len, rv(pread(dfd, buf, len, (off_t)off)),
		   buf);
}

static void op_buf_read(void)
{
	uint64_t off, len;

	pick(false, &off, &len, MAXSZ);
	if (below(2) && msz)
		off = msz - below(msz < 5000 ? msz : 5000);
	check_read("buf_read", off, len, rv(pread(bfd, buf, len, (off_t)off)),
		   buf);
}

static void op_truncate(void)
{
	uint64_t n = below(2) ? BS * below(MAXSZ / BS) : below(MAXSZ);
	long long r = rv(ftruncate(bfd, (off_t)n));

	printf("truncate %llu -> %lld\n", (unsigned long long)n, r);
	if (!r)
		m_size(n);
}

static void op_fallocate(void)
{
	static const int modes[] = {
		0,
		FALLOC_FL_KEEP_SIZE,
		FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		FALLOC_FL_ZERO_RANGE,
		FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
		FALLOC_FL_COLLAPSE_RANGE,
		FALLOC_FL_INSERT_RANGE,
	};
	int mode = modes[below(sizeof(modes) / sizeof(modes[0]))];
	uint64_t off, len, end;
	long long r;

	pick(true, &off, &len, MAXSZ);
	if (mode == FALLOC_FL_COLLAPSE_RANGE || mode == FALLOC_FL_INSERT_RANGE) {
		/* Inside the file, as the kernel asks; the result must fit. */
		if (msz < 2 * BS)
			return;
		off = BS * below(msz / BS);
		if (mode == FALLOC_FL_INSERT_RANGE && msz + len > MAXSZ)
			return;
	}
	end = off + len;
	r = rv(fallocate(bfd, mode, (off_t)off, (off_t)len));
	printf("fallocate %d %llu %llu -> %lld\n", mode,
	       (unsigned long long)off, (unsigned long long)len, r);
	if (r)
		return;
	switch (mode) {
	case 0:
		if (end > msz)
			msz = end;
		break;
	case FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE:
	case FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE:
		if (off < msz)
			memset(model + off, 0, (end < msz ? end : msz) - off);
		break;
	case FALLOC_FL_ZERO_RANGE:
		memset(model + off, 0, len);
		if (end > msz)
			msz = end;
		break;
	case FALLOC_FL_COLLAPSE_RANGE:
		memmove(model + off, model + end, msz - end);
		m_size(msz - len);
		break;
	case FALLOC_FL_INSERT_RANGE:
		memmove(model + end, model + off, msz - off);
		memset(model + off, 0, len);
		msz += len;
		break;
	}
}

/*
 * Growth past the end, as programs make it: a zero range (qcow2's
 * clusters), mode 0 (InnoDB), KEEP_SIZE ahead (RocksDB), ftruncate up
 * (Seastar), at the end or past a gap; half the time with a queued
 * write in flight beside it, anywhere, reaped after (the kernel alone
 * drains it first: the model applies it first), and now and then a
 * write into what it grew.
 */
static void op_grow(void)
{
	static const int modes[] = {
		FALLOC_FL_ZERO_RANGE, 0, FALLOC_FL_KEEP_SIZE,
		FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
		-1, /* ftruncate */
	};
	int mode = modes[below(sizeof(modes) / sizeof(modes[0]))];
	uint64_t off = below(2) ? msz : (msz + BS - 1) / BS * BS + BS * below(8);
	uint64_t len = BS * (1 + below(16)), woff = 0, wlen = 0, end;
	struct iocb io, *p = &io;
	struct io_event ev;
	bool racing = below(2);
	long long r, w = 0;

	end = off + len;
	if (end > MAXSZ)
		return;
	if (racing) {
		pick(true, &woff, &wlen, MAXSZ);
		fill(cmpbuf, wlen);
		io_prep_pwrite(&io, dfd, cmpbuf, wlen, (long long)woff);
		long n = io_submit(actx, 1, &p);

		if (n != 1)
			fail_queue("io_submit", n);
	}
	r = mode < 0 ? rv(ftruncate(bfd, (off_t)end))
		     : rv(fallocate(bfd, mode, (off_t)off, (off_t)len));
	if (racing) {
		long n = reap(&ev);

		if (n != 1)
			fail_queue("io_getevents", n);
		w = (long long)(long)ev.res;
		printf("aio_write %llu %llu -> %lld, beside: ",
		       (unsigned long long)woff, (unsigned long long)wlen, w);
		if (w > 0)
			m_write(woff, cmpbuf, (uint64_t)w);
	}
	printf("grow %d %llu %llu -> %lld\n", mode, (unsigned long long)off,
	       (unsigned long long)len, r);
	if (r)
		return;
	if (mode < 0)
		m_size(end);
	else if (!(mode & FALLOC_FL_KEEP_SIZE) && end > msz)
		msz = end;
	if ((mode & FALLOC_FL_ZERO_RANGE) && off < msz)
		memset(model + off, 0, (end < msz ? end : msz) - off);
	if (below(2) && end > off + BS) {
		uint64_t at = (off + BS - 1) / BS * BS;

		if (at + BS <= end) {
			fill(buf, BS);
			r = rv(pwrite(dfd, buf, BS, (off_t)at));
			printf("dio_write %llu %u -> %lld\n",
			       (unsigned long long)at, BS, r);
			if (r > 0)
				m_write(at, buf, (uint64_t)r);
		}
	}
}

/* buf[0, len) as two iovecs, split at a block (XFS answers EIO to some
 * direct vectored reads across the end with sub-block pieces). */
static void split(uint64_t len)
{
	uint64_t half = BS * (len / BS / 2);

	iov[0] = (struct iovec){ buf, half };
	iov[1] = (struct iovec){ buf + half, len - half };
}

static void op_aio(bool write)
{
	struct iocb io, *p = &io;
	struct io_event ev;
	uint64_t off, len;
	bool vec = false;
	long long r;

	pick(true, &off, &len, MAXSZ);
	if (write) {
		fill(buf, len);
		io_prep_pwrite(&io, dfd, buf, len, (long long)off);
	} else {
		if (below(2) && msz >= BS)
			off = (msz & ~(uint64_t)(BS - 1)) - (below(2) ? BS : 0);
		if (below(2) || len < 2 * BS) {
			io_prep_pread(&io, dfd, buf, len, (long long)off);
		} else {
			split(len);
			vec = true;
			io_prep_preadv(&io, dfd, iov, 2, (long long)off);
		}
	}
	r = io_submit(actx, 1, &p);
	if (r != 1)
		fail_queue("io_submit", (long)r);
	r = reap(&ev);
	if (r != 1)
		fail_queue("io_getevents", (long)r);
	r = (long long)(long)ev.res;
	if (write) {
		printf("aio_write %llu %llu -> %lld\n", (unsigned long long)off,
		       (unsigned long long)len, r);
		if (r > 0)
			m_write(off, buf, (uint64_t)r);
	} else {
		check_read(vec ? "aio_readv" : "aio_read", off, len, r, buf);
	}
}

static void op_uring(bool write)
{
	struct io_uring_sqe *s = io_uring_get_sqe(&ring);
	struct io_uring_cqe *c;
	uint64_t off, len;
	long long r;

	pick(true, &off, &len, MAXSZ);
	if (write) {
		fill(buf, len);
		io_uring_prep_write(s, dfd, buf, (unsigned)len, off);
	} else {
		if (below(2) && msz >= BS)
			off = (msz & ~(uint64_t)(BS - 1)) - (below(2) ? BS : 0);
		if (below(2) || len < 2 * BS) {
			io_uring_prep_read(s, dfd, buf, (unsigned)len, off);
		} else {
			split(len);
			io_uring_prep_readv(s, dfd, iov, 2, off);
		}
	}
	if (io_uring_submit(&ring) != 1 || io_uring_wait_cqe(&ring, &c))
		fail("io_uring");
	r = c->res;
	io_uring_cqe_seen(&ring, c);
	if (write) {
		printf("uring_write %llu %llu -> %lld\n",
		       (unsigned long long)off, (unsigned long long)len, r);
		if (r > 0)
			m_write(off, buf, (uint64_t)r);
	} else {
		check_read("uring_read", off, len, r, buf);
	}
}

static void op_copy(void)
{
	loff_t oi, oo;
	uint64_t off, len, from;
	long long r;

	pick(false, &off, &len, MAXSZ);
	if (below(2)) {
		from = below(SRCSZ - len);
		oi = (loff_t)from, oo = (loff_t)off;
		r = rv(copy_file_range(sfd, &oi, bfd, &oo, len, 0));
		printf("copy_in %llu %llu %llu -> %lld\n",
		       (unsigned long long)from, (unsigned long long)off,
		       (unsigned long long)len, r);
		if (r > 0)
			m_write(off, src + from, (uint64_t)r);
		return;
	}
	/* Within the file, ranges apart (the kernel refuses overlaps). */
	from = msz ? below(msz) : 0;
	if ((from < off + len && off < from + len) || off + len > MAXSZ)
		return;
	oi = (loff_t)from, oo = (loff_t)off;
	r = rv(copy_file_range(bfd, &oi, bfd, &oo, len, 0));
	printf("copy_within %llu %llu %llu -> %lld\n", (unsigned long long)from,
	       (unsigned long long)off, (unsigned long long)len, r);
	if (r > 0) {
		memcpy(cmpbuf, model + from, (size_t)r);
		m_write(off, cmpbuf, (uint64_t)r);
	}
}

/* sendfile or splice out of the file: what arrives is the model's. */
static void op_out(bool splice_it)
{
	uint64_t off, len;
	long long r, got = 0;
	int pfd[2];

	pick(false, &off, &len, MAXSZ);
	if (below(2) && msz)
		off = msz - below(msz < 5000 ? msz : 5000);
	if (splice_it) {
		loff_t o = (loff_t)off;

		if (pipe(pfd))
			fail("pipe");
		if (len > 65536)
			len = 65536; /* a pipe's default room */
		r = rv(splice(bfd, &o, pfd[1], NULL, len, 0));
		while (r > 0 && got < r) {
			long n = read(pfd[0], buf + got, (size_t)(r - got));

			if (n <= 0)
				fail("pipe read");
			got += n;
		}
		close(pfd[0]);
		close(pfd[1]);
		check_read("splice_out", off, len, r, buf);
		return;
	}
	off_t o = (off_t)off;

	if (ftruncate(ofd, 0) || lseek(ofd, 0, SEEK_SET))
		fail("out truncate");
	r = rv(sendfile(ofd, bfd, &o, len));
	if (r > 0 && pread(ofd, buf, (size_t)r, 0) != r)
		fail("out read");
	check_read("sendfile_out", off, len, r, buf);
}

static void op_clone(bool dedupe)
{
	uint64_t off, len, from;
	long long r;

	pick(true, &off, &len, MAXSZ);
	from = BS * below((SRCSZ - len) / BS + 1);
	if (!dedupe) {
		struct file_clone_range cr = { .src_fd = sfd,
					       .src_offset = from,
					       .src_length = len,
					       .dest_offset = off };

		r = rv(ioctl(bfd, FICLONERANGE, &cr));
		printf("clone %llu %llu %llu -> %lld\n",
		       (unsigned long long)from, (unsigned long long)off,
		       (unsigned long long)len, r);
		if (!r)
			m_write(off, src + from, len);
		return;
	}
	struct {
		struct file_dedupe_range r;
		struct file_dedupe_range_info i;
	} dd = { .r = { .src_offset = from, .src_length = len,
			.dest_count = 1 },
		 .i = { .dest_fd = bfd, .dest_offset = off } };

	r = rv(ioctl(sfd, FIDEDUPERANGE, &dd));
	printf("dedupe %llu %llu %llu -> %lld status %d bytes %llu\n",
	       (unsigned long long)from, (unsigned long long)off,
	       (unsigned long long)len, r, (int)dd.i.status,
	       (unsigned long long)dd.i.bytes_deduped);
}

/* XFS's exchange of ranges (Linux 6.10; EOPNOTSUPP on an XFS made
 * without exchange=1, and on ext4): a range of the file swapped with one
 * of DIR/x, a second file of SRCSZ bytes. */
struct xfs_exchange_range_ {
	int32_t file1_fd;
	uint32_t pad;
	uint64_t file1_offset, file2_offset, length, flags;
};
#define XFS_IOC_EXCHANGE_RANGE_ _IOW('X', 129, struct xfs_exchange_range_)

static void op_exchange(void)
{
	uint64_t off, len, from;
	long long r;

	pick(true, &off, &len, MAXSZ);
	from = BS * below((SRCSZ - len) / BS + 1);
	struct xfs_exchange_range_ x = { .file1_fd = xfd,
					 .file1_offset = from,
					 .file2_offset = off,
					 .length = len };

	r = rv(ioctl(bfd, XFS_IOC_EXCHANGE_RANGE_, &x));
	printf("exchange %llu %llu %llu -> %lld\n", (unsigned long long)from,
	       (unsigned long long)off, (unsigned long long)len, r);
	if (r)
		return;
	memcpy(cmpbuf, model + off, len);
	memcpy(model + off, xmodel + from, len);
	memcpy(xmodel + from, cmpbuf, len);
}

int main(int argc, char **argv)
{
	long ops, i;

	if (argc != 4)
		return 2;
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	rng = strtoull(argv[2], NULL, 0) * 2654435761u + 1;
	ops = atol(argv[3]);
	model = calloc(1, MAXSZ + IOMAX);
	src = malloc(SRCSZ);
	if (!model || !src || posix_memalign((void **)&cmpbuf, BS, IOMAX) ||
	    posix_memalign((void **)&buf, BS, IOMAX) || io_setup(4, &actx) ||
	    io_uring_queue_init(4, &ring, 0))
		return 2;
	fill(src, SRCSZ);
	snprintf(path, sizeof(path), "%s/src", dir);
	sfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	xmodel = malloc(SRCSZ);
	if (!xmodel)
		return 2;
	fill(xmodel, SRCSZ);
	snprintf(path, sizeof(path), "%s/x", dir);
	xfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (xfd < 0 || pwrite(xfd, xmodel, SRCSZ, 0) != SRCSZ)
		return 2;
	snprintf(path, sizeof(path), "%s/out", dir);
	ofd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (sfd < 0 || ofd < 0 || pwrite(sfd, src, SRCSZ, 0) != SRCSZ)
		return 2;
	snprintf(path, sizeof(path), "%s/f", dir);
	unlink(path);
	open_all();
	for (i = 0; i < ops; i++) {
		op_no = i;
		switch (below(20)) {
		case 0: case 1: op_write(true); break;
		case 2: op_write(false); break;
		case 3: case 4: op_append(); break;
		case 5: op_dio_read(); break;
		case 6: op_buf_read(); break;
		case 7: check_size(); break;
		case 8: op_truncate(); break;
		case 9: op_fallocate(); break;
		case 10: op_aio(true); break;
		case 11: op_aio(false); break;
		case 12: op_uring(true); break;
		case 13: op_uring(false); break;
		case 14: op_copy(); break;
		case 15: op_out(below(2)); break;
		case 16:
			if (below(3))
				op_clone(below(2));
			else
				op_exchange();
			break;
		case 17:
			printf("fsync -> %lld\n", rv(fsync(dfd)));
			break;
		case 18:
			close_all();
			open_all();
			printf("reopen\n");
			check_size();
			break;
		case 19: op_grow(); break;
		default: op_buf_read(); break;
		}
	}
	check_size();
	close_all();
	if (pread(xfd, cmpbuf, 1, 0) < 0)
		return 2;
	for (i = 0; i < (long)(SRCSZ / IOMAX); i++)
		if (pread(xfd, cmpbuf, IOMAX, i * (off_t)IOMAX) != IOMAX ||
		    memcmp(cmpbuf, xmodel + i * IOMAX, IOMAX))
			fail("the exchanged file");
	close(xfd);
	snprintf(path, sizeof(path), "%s/model", dir);
	i = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (i < 0 || write((int)i, model, msz) != (ssize_t)msz)
		return 2;
	close((int)i);
	printf("done %ld ops, size %llu\n", ops, (unsigned long long)msz);
	return 0;
}
