// SPDX-License-Identifier: MIT
/*
 * asyncwrite ENGINE MODE FILE BLOCKS QD [OPTION...]: write BLOCKS 4 KiB
 * records with O_DIRECT through libaio (ENGINE aio) or liburing (uring),
 * keeping QD in flight, then read the file back and check every record.
 *
 *   MODE seq     record i at block i of a new file
 *   MODE rand    the same blocks in a random order (a sparse file filling)
 *   MODE append  O_APPEND: every record exactly once, anywhere
 *
 *   stat     a thread fstat()s all along: every size a multiple of 4 KiB,
 *            never shrinking, never past what was submitted; and after
 *            each completion is reaped the size covers it (seq, rand)
 *   trunc    a thread truncates the file to 0 three times while the first
 *            half is written; the rest is submitted after it is done: the
 *            end must hold every record, the start records or zeros
 *   fixed    (uring) the file registered, requests by index
 *   sqpoll   (uring) a ring with IORING_SETUP_SQPOLL
 *   fsync    a final fdatasync through the engine
 *   nospc    the filesystem fills up: ENOSPC completions are expected;
 *            every acknowledged record must be there, the size must end
 *            at the last acknowledged one (seq, rand)
 *
 * asyncwrite ENGINE check FILE: every block is record i at block i, or
 * zeros (after a kill); prints the census.
 *
 * asyncwrite ENGINE errors FILE: requests the kernel refuses, one per
 * line with what the program got back, for comparing with the kernel
 * alone.
 *
 * asyncwrite uring linked FILE: a write at 8 KiB of a new file, linked
 * behind a pipe read that comes up short (the write is cancelled), while
 * a pwrite writes block 0; then an append.  Prints the completions, the
 * size and each block's first byte ('0' for zeros): the kernel alone
 * gives "B C", 8192.
 *
 * asyncwrite ENGINE flagged FILE: 50 submissions of 4 appends each with
 * a flag the shim does not know (RWF_DONTCACHE, which the kernel may take
 * or refuse): prints the results, the size and how many distinct records
 * the file holds.
 *
 * asyncwrite ENGINE past-then-append FILE: a 1 MiB write of 'A' at 0 of
 * a new file queued, then, before it is reaped (likely still in flight),
 * a 4 KiB write(2) of 'B' through an O_APPEND descriptor; prints
 * "size=S at0=C at1m=C" once both are done ('-' past the size).  ext4
 * alone makes an extending queued write before io_submit returns: A,
 * then B after it.
 *
 * asyncwrite aio gone FILE: iocbs and arrays whose memory is taken away
 * after one submit (EFAULT from the kernel alone), and batches the kernel
 * reads in part; one line per submit.
 *
 * asyncwrite ENGINE wide DIR: 40 files in DIR, each given one 4 KiB
 * record 'A' by write(2), then one submission of 40 writes of 'B' right
 * after it, one per file: appends (RWF_APPEND) to the even ones,
 * positioned at 4 KiB to the odd ones.  Prints "sizes=S0,S1,... ok=N"
 * once all are reaped and the files closed, N the files that read back
 * A then B; the kernel alone gives 8192 and 40.
 *
 * asyncwrite aio recut DIR: 17 files in DIR given 'A' by write(2), an
 * appending iocb each (RWF_APPEND, 'B'), reaped, then submitted again
 * unchanged but for the buffer ('C') from a pointer array of 18 whose last
 * entry is on an unmapped page (the kernel takes the 17 it can read).
 * Prints the two submits' results and each file's size and blocks; the
 * kernel alone gives "size=12288 ABC" for every file.
 *
 * Prints one summary line; exits 1 if a check failed, 2 on a setup error.
 */
#include "t_rec.h"

#include <fcntl.h>
#include <libaio.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>

#define BLK 4096
#define HUGE (2u << 20) /* x86-64's huge page */

enum engine { AIO, URING };
enum mode { SEQ, RAND, APPEND };

static enum engine engine;
static enum mode mode;
static const char *path;
static long nblocks;
static int qd, fd;
static bool opt_stat, opt_trunc, opt_fixed, opt_sqpoll, opt_fsync, opt_nospc;
static char *acked; /* nospc: which blocks' writes succeeded */
static long max_acked = -1, nospc;
static char *bufs; /* qd slots of BLK */
static long *order; /* block of the i-th submission */
static _Atomic long submitted_end; /* blocks: highest end submitted */
static _Atomic bool stop, trunc_done;
static _Atomic long stat_bad;
static long bad;

static io_context_t ctx;
static struct io_uring ring;

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void *stat_thread(void *arg)
{
	off_t last = 0;
	struct stat st;

	(void)arg;
	while (!atomic_load(&stop)) {
		if (fstat(fd, &st))
			die("fstat");
		if (st.st_size % BLK || (st.st_size < last && !opt_trunc) ||
		    st.st_size > atomic_load(&submitted_end) * BLK) {
			fprintf(stderr, "size %lld (last %lld, submitted %ld)\n",
				(long long)st.st_size, (long long)last,
				atomic_load(&submitted_end));
			atomic_fetch_add(&stat_bad, 1);
		}
		last = st.st_size;
	}
	return NULL;
}

static void *trunc_thread(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < 3; i++) {
		while (atomic_load(&submitted_end) < nblocks / 2 * (i + 1) / 3 &&
		       !atomic_load(&stop))
			usleep(100);
		if (ftruncate(fd, 0))
			die("ftruncate");
	}
	atomic_store(&trunc_done, true);
	return NULL;
}

/* ---- the engines ----------------------------------------------------- */

static struct iocb *iocbs;

static void engine_init(void)
{
	if (engine == AIO) {
		iocbs = calloc((size_t)qd, sizeof(*iocbs));
		if (io_setup(qd, &ctx))
			die("io_setup");
		return;
	}
	struct io_uring_params p = { 0 };

	if (opt_sqpoll) {
		p.flags |= IORING_SETUP_SQPOLL;
		p.sq_thread_idle = 100;
	}
	if (io_uring_queue_init_params((unsigned)qd * 2, &ring, &p) < 0)
		die("io_uring_queue_init");
	if (opt_fixed && io_uring_register_files(&ring, &fd, 1))
		die("io_uring_register_files");
}

/* Queue a write of slot's buffer at block (ignored for an append). */
static void engine_queue(int slot, long block)
{
	char *buf = bufs + (size_t)slot * BLK;
	off_t off = mode == APPEND ? 0 : (off_t)block * BLK;

	if (engine == AIO) {
		struct iocb *io = &iocbs[slot], *one = io;

		io_prep_pwrite(io, fd, buf, BLK, off);
		io->data = (void *)(intptr_t)slot;
		if (io_submit(ctx, 1, &one) != 1)
			die("io_submit");
		return;
	}
	struct io_uring_sqe *s = io_uring_get_sqe(&ring);

	if (!s)
		die("io_uring_get_sqe");
	io_uring_prep_write(s, opt_fixed ? 0 : fd, buf, BLK, (uint64_t)off);
	if (opt_fixed)
		s->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(s, (uint64_t)slot);
}

static void engine_submit(void)
{
	if (engine == URING && io_uring_submit(&ring) < 0)
		die("io_uring_submit");
}

/* Wait for one completion: its slot and result. */
static int engine_reap(long *res)
{
	if (engine == AIO) {
		struct io_event ev;
		int n;

		do
			n = io_getevents(ctx, 1, 1, &ev, NULL);
		while (n == -EINTR);
		if (n != 1)
			die("io_getevents");
		*res = (long)ev.res;
		return (int)(intptr_t)ev.data;
	}
	struct io_uring_cqe *c;
	int slot;

	if (io_uring_wait_cqe(&ring, &c))
		die("io_uring_wait_cqe");
	*res = c->res;
	slot = (int)c->user_data;
	io_uring_cqe_seen(&ring, c);
	return slot;
}

static long engine_datasync(void)
{
	long res;

	if (engine == AIO) {
		struct iocb *io = &iocbs[0], *one = io;

		io_prep_fdsync(io, fd);
		io->data = 0;
		if (io_submit(ctx, 1, &one) != 1)
			return -errno;
		engine_reap(&res);
		return res;
	}
	struct io_uring_sqe *s = io_uring_get_sqe(&ring);

	io_uring_prep_fsync(s, fd, IORING_FSYNC_DATASYNC);
	io_uring_sqe_set_data64(s, 0);
	io_uring_submit(&ring);
	engine_reap(&res);
	return res;
}

static void engine_exit(void)
{
	if (engine == AIO)
		io_destroy(ctx);
	else
		io_uring_queue_exit(&ring);
}

/* ---- the run ----------------------------------------------------------- */

static long verify(void)
{
	char *b;
	long i, errors = 0, *seen = calloc((size_t)nblocks, sizeof(long));
	int rfd = open(path, O_RDONLY | O_DIRECT);
	struct stat st;
	long keep_from = opt_trunc ? nblocks - 2L * qd : 0;

	if (rfd < 0 || fstat(rfd, &st) || posix_memalign((void **)&b, BLK, BLK))
		die("verify");
	if (st.st_size != (off_t)(opt_nospc ? max_acked + 1 : nblocks) * BLK) {
		fprintf(stderr, "size %lld, expected %lld\n",
			(long long)st.st_size,
			(long long)(opt_nospc ? max_acked + 1 : nblocks) * BLK);
		errors++;
	}
	for (i = 0; i < st.st_size / BLK; i++) {
		uint32_t w;
		uint64_t seq;
		int k;

		if (pread(rfd, b, BLK, (off_t)i * BLK) != BLK)
			die("pread");
		k = rec_parse(b, BLK, &w, &seq);
		if (k == 2 || (k == 0 && (long)seq >= nblocks)) {
			fprintf(stderr, "block %ld: garbage\n", i);
			errors++;
			continue;
		}
		if (k == 1) {
			if (opt_nospc ? acked[i]
				      : (mode == APPEND || i >= keep_from)) {
				fprintf(stderr, "block %ld: zeros\n", i);
				errors++;
			}
			continue;
		}
		if (mode != APPEND && (long)seq != i) {
			fprintf(stderr, "block %ld holds record %llu\n", i,
				(unsigned long long)seq);
			errors++;
		}
		seen[seq]++;
	}
	for (i = 0; mode == APPEND && !opt_nospc && i < nblocks; i++)
		if (seen[i] != 1) {
			fprintf(stderr, "record %ld seen %ld times\n", i,
				seen[i]);
			errors++;
		}
	close(rfd);
	free(seen);
	return errors;
}

static void run(void)
{
	pthread_t st_tid, tr_tid;
	long next = 0, done = 0, res;
	int *slot_free = calloc((size_t)qd, sizeof(int)), nfree = 0, slot;
	long *slot_block = calloc((size_t)qd, sizeof(long));
	uint64_t t0;
	struct stat st;

	for (slot = qd - 1; slot >= 0; slot--)
		slot_free[nfree++] = slot;
	if (opt_stat && pthread_create(&st_tid, NULL, stat_thread, NULL))
		die("pthread_create");
	if (opt_trunc && pthread_create(&tr_tid, NULL, trunc_thread, NULL))
		die("pthread_create");
	t0 = now_ns();
	while (done < nblocks) {
		bool queued = false;

		while (nfree && next < nblocks) {
			/* trunc: the last stretch goes after the truncates */
			if (opt_trunc && next >= nblocks - 2L * qd &&
			    !atomic_load(&trunc_done)) {
				if (nfree < qd)
					break;
				usleep(100);
				continue;
			}
			slot = slot_free[--nfree];
			slot_block[slot] = order[next];
			rec_stamp(bufs + (size_t)slot * BLK, BLK, 0,
				  (uint64_t)order[next]);
			/* the size may cover it from now on */
			if (order[next] + 1 > atomic_load(&submitted_end))
				atomic_store(&submitted_end, order[next] + 1);
			if (mode == APPEND)
				atomic_store(&submitted_end, next + 1);
			engine_queue(slot, order[next]);
			next++;
			queued = true;
		}
		if (queued)
			engine_submit();
		slot = engine_reap(&res);
		if (opt_nospc && res == -ENOSPC) {
			nospc++;
		} else if (res == BLK && opt_nospc) {
			acked[slot_block[slot]] = 1;
			if (slot_block[slot] > max_acked)
				max_acked = slot_block[slot];
		} else if (res != BLK) {
			fprintf(stderr, "block %ld: result %ld\n",
				slot_block[slot], res);
			bad++;
		}
		if (opt_stat && mode != APPEND && !opt_trunc && res == BLK) {
			if (fstat(fd, &st))
				die("fstat");
			if (st.st_size < (slot_block[slot] + 1) * BLK) {
				fprintf(stderr,
					"block %ld reaped, size %lld misses "
					"it\n",
					slot_block[slot],
					(long long)st.st_size);
				atomic_fetch_add(&stat_bad, 1);
			}
		}
		slot_free[nfree++] = slot;
		done++;
	}
	if (opt_fsync && (res = engine_datasync()) != 0) {
		fprintf(stderr, "fdatasync: %ld\n", res);
		bad++;
	}
	atomic_store(&stop, true);
	if (opt_stat)
		pthread_join(st_tid, NULL);
	if (opt_trunc)
		pthread_join(tr_tid, NULL);
	{
		double secs = (double)(now_ns() - t0) / 1e9;

		if (fstat(fd, &st))
			die("fstat");
		engine_exit();
		close(fd);
		bad += verify();
		printf("engine=%s mode=%s blocks=%ld qd=%d secs=%.3f iops=%.0f "
		       "size=%lld bad=%ld statbad=%ld nospc=%ld\n",
		       engine == AIO ? "aio" : "uring",
		       mode == SEQ ? "seq" : mode == RAND ? "rand" : "append",
		       nblocks, qd, secs, (double)nblocks / secs,
		       (long long)st.st_size, bad, atomic_load(&stat_bad),
		       nospc);
	}
}

/* ---- refused requests ------------------------------------------------- */

/* After the refused requests: one O_APPEND write through a descriptor of
 * its own.  It lands at the size the kernel alone would have, never past
 * a write that was refused (that would leave a hole). */
static void append_after(const char *buf)
{
	int afd = open(path, O_WRONLY | O_APPEND | O_DIRECT);
	struct stat st;
	ssize_t w = afd < 0 ? -1 : write(afd, buf, BLK);

	fstat(fd, &st);
	printf("append-after write=%zd size=%lld\n", w, (long long)st.st_size);
	if (afd >= 0)
		close(afd);
}

static void aio_errors(void)
{
	struct iocb io, *one = &io, *bogus = (struct iocb *)0x10,
		    **bogus_array;
	struct io_event ev;
	char *buf;
	int rfd = open(path, O_RDONLY | O_DIRECT);
	struct stat st;
	int r;

	if (posix_memalign((void **)&buf, BLK, 2 * BLK) || rfd < 0 ||
	    io_setup(8, &ctx))
		die("setup");
	memset(buf, 'x', 2 * BLK);
#define SUBMIT(name, ctxv, n, arr)                                          \
	do {                                                                \
		r = io_submit(ctxv, n, arr);                                \
		printf("%s submit=%d", name, r);                            \
		if (r == 1 && io_getevents(ctx, 1, 1, &ev, NULL) == 1)      \
			printf(" res=%ld", (long)ev.res);                  \
		fstat(fd, &st);                                             \
		printf(" size=%lld\n", (long long)st.st_size);              \
	} while (0)
	SUBMIT("nr-negative", ctx, -1, &one);
	SUBMIT("ctx-bogus", (io_context_t)0x1000, 1, &one);
	/* laundered, so the compiler lets a bad pointer through */
	bogus_array = (struct iocb **)(uintptr_t)atoi("24");
	SUBMIT("array-bogus", ctx, 1, bogus_array);
	SUBMIT("iocb-bogus", ctx, 1, &bogus);
	io_prep_pwrite(&io, -1, buf, BLK, 0);
	SUBMIT("fd-bad", ctx, 1, &one);
	io_prep_pwrite(&io, rfd, buf, BLK, 0);
	SUBMIT("fd-readonly", ctx, 1, &one);
	io_prep_pwrite(&io, fd, buf + 1, BLK, 0);
	SUBMIT("misaligned", ctx, 1, &one);
	io_prep_pwrite(&io, fd, buf, BLK, -BLK);
	SUBMIT("offset-negative", ctx, 1, &one);
	io_prep_pwrite(&io, fd, buf, BLK, (long long)1 << 62);
	SUBMIT("offset-huge", ctx, 1, &one);
	io_prep_pwrite(&io, fd, buf, BLK, BLK);
	SUBMIT("write-ok", ctx, 1, &one);
	io_prep_pwrite(&io, fd, buf, 0, 8 * BLK);
	SUBMIT("write-empty", ctx, 1, &one);
	io_prep_fdsync(&io, fd);
	SUBMIT("fdsync", ctx, 1, &one);
	io_prep_pwrite(&io, fd, buf + 1, BLK, 64 * BLK);
	SUBMIT("misaligned-past-eof", ctx, 1, &one);
	append_after(buf);
	io_destroy(ctx);
}

/* ---- memory that goes away ------------------------------------------- */

static long gone_block = 1;
static char *gone_buf;

/* Submit io (writing the next block) through the array arr, reap it; one
 * line: the count, the completion and the size. */
static void gone_submit(const char *name, struct iocb *io, struct iocb **arr,
			long nr)
{
	struct io_event ev;
	struct stat st;
	int r;

	if (io)
		io_prep_pwrite(io, fd, gone_buf, BLK, gone_block++ * BLK);
	r = io_submit(ctx, nr, arr);
	printf("%s submit=%d", name, r);
	while (r-- > 0 && io_getevents(ctx, 1, 1, &ev, NULL) == 1)
		printf(" res=%ld", (long)ev.res);
	fstat(fd, &st);
	printf(" size=%lld\n", (long long)st.st_size);
}

static char *two_pages(void)
{
	char *p = mmap(NULL, 2 * BLK, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

/*
 * asyncwrite aio gone FILE: iocbs, and arrays of them, in memory that is
 * submitted from once (so the shim has read it) and then taken away —
 * munmap, mprotect, mmap over it, a guard, mremap, shmdt, a mapped file
 * cut short — and submitted from again: the kernel alone answers EFAULT.
 * Then batches the kernel reads only part of.
 */
static void aio_gone(void)
{
	struct iocb *io, *arr[2], **parr, stack_io;
	char *p;
	int mfd, shm;

	if (posix_memalign((void **)&gone_buf, BLK, BLK) || io_setup(8, &ctx))
		die("setup");
	memset(gone_buf, 'g', BLK);

	/* The iocb goes; the array stays. */
#define IOCB_GONE(name, take_away)                                       \
	do {                                                             \
		p = two_pages();                                         \
		io = (struct iocb *)p;                                   \
		arr[0] = io;                                             \
		gone_submit(name "-before", io, arr, 1);                 \
		take_away;                                               \
		gone_submit(name, NULL, arr, 1);                         \
	} while (0)
	IOCB_GONE("munmap", munmap(p, 2 * BLK));
	IOCB_GONE("mprotect", mprotect(p, BLK, PROT_NONE));
	IOCB_GONE("mmap-fixed",
		  mmap(p, BLK, PROT_NONE, MAP_FIXED | MAP_PRIVATE |
						  MAP_ANONYMOUS, -1, 0));
	IOCB_GONE("guard", printf("guard-install=%d\n",
				  madvise(p, BLK, 102) ? -errno : 0));
	IOCB_GONE("mremap",
		  mremap(p, BLK, BLK, MREMAP_MAYMOVE | MREMAP_FIXED,
			 mmap(NULL, BLK, PROT_NONE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)));
	/* In a mapped file, cut short under it. */
	mfd = memfd_create("iocbs", 0);
	if (mfd < 0 || ftruncate(mfd, BLK))
		die("memfd");
	p = mmap(NULL, BLK, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (p == MAP_FAILED)
		die("mmap memfd");
	io = (struct iocb *)p;
	arr[0] = io;
	gone_submit("file-cut-before", io, arr, 1);
	if (ftruncate(mfd, 0))
		die("ftruncate");
	gone_submit("file-cut", NULL, arr, 1);
	/* System V shared memory, detached. */
	shm = shmget(IPC_PRIVATE, BLK, IPC_CREAT | 0600);
	p = shm < 0 ? (char *)-1 : shmat(shm, NULL, 0);
	if (p == (char *)-1)
		die("shm");
	shmctl(shm, IPC_RMID, NULL);
	io = (struct iocb *)p;
	arr[0] = io;
	gone_submit("shmdt-before", io, arr, 1);
	shmdt(p);
	gone_submit("shmdt", NULL, arr, 1);

	/* The array goes; the iocb stays. */
	p = two_pages();
	parr = (struct iocb **)p;
	parr[0] = &stack_io;
	gone_submit("array-munmap-before", &stack_io, parr, 1);
	munmap(p, 2 * BLK);
	gone_submit("array-munmap", NULL, parr, 1);

	/* An mprotect that fails part way (a gap in its range) after it
	 * changed the first page. */
	IOCB_GONE("mprotect-partial",
		  munmap(p + BLK, BLK);
		  printf("mprotect=%d\n", mprotect(p, 3 * BLK, PROT_NONE) ?
					    -errno : 0));
	/* The page next to the iocb's taken away: the iocb's stays, and so
	 * does the kernel's answer. */
	IOCB_GONE("neighbour", mprotect(p + BLK, BLK, PROT_NONE));
	/* A mapping that grows down: PROT_GROWSDOWN carries the protection
	 * to the mapping's start, below the page named. */
	p = mmap(NULL, 2 * BLK, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_GROWSDOWN, -1, 0);
	if (p == MAP_FAILED)
		die("mmap growsdown");
	io = (struct iocb *)p;
	arr[0] = io;
	gone_submit("growsdown-before", io, arr, 1);
	printf("mprotect-growsdown=%d\n",
	       mprotect(p + BLK, BLK, PROT_NONE | PROT_GROWSDOWN) ? -errno : 0);
	gone_submit("growsdown", NULL, arr, 1);
	/* Huge pages: a 4 KiB MAP_FIXED|MAP_HUGETLB mapping replaces the
	 * whole huge page around it (the kernel rounds the length up).  With
	 * no huge page to be had, the mapping is refused, on both sides. */
	p = mmap(NULL, 2 * HUGE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap 4 MiB");
	p = (char *)(((uintptr_t)p + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
	io = (struct iocb *)(p + BLK);
	arr[0] = io;
	gone_submit("hugetlb-before", io, arr, 1);
	printf("hugetlb-mmap=%s\n",
	       mmap(p, BLK, PROT_NONE,
		    MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1,
		    0) == MAP_FAILED ?
		       strerrorname_np(errno) :
		       "ok");
	gone_submit("hugetlb", NULL, arr, 1);
	/* System V shared memory attached over the iocb, read-only. */
	shm = shmget(IPC_PRIVATE, BLK, IPC_CREAT | 0600);
	if (shm < 0)
		die("shmget");
	IOCB_GONE("shmat-remap",
		  printf("shmat-remap=%s\n",
			 shmat(shm, p, SHM_REMAP | SHM_RDONLY) == (void *)-1 ?
				 strerrorname_np(errno) :
				 "ok"));
	shmctl(shm, IPC_RMID, NULL);
	/* A guard put in by process_madvise on this process's own pidfd. */
	{
		int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
		struct iovec v;

		IOCB_GONE("process-madvise-guard",
			  v.iov_base = p; v.iov_len = BLK;
			  printf("process-madvise-guard=%s\n",
				 process_madvise(self, &v, 1, 102, 0) < 0 ?
					 strerrorname_np(errno) :
					 "ok"));
		close(self);
	}
	/* Made read-only: the kernel cannot store the iocb's key (and the
	 * shim must not rewrite the append). */
	IOCB_GONE("readonly-append",
		  io->aio_rw_flags = RWF_APPEND;
		  gone_submit("readonly-append-rw", NULL, arr, 1);
		  mprotect(p, BLK, PROT_READ));
	/* Write-only: readable all the same (x86), the kernel takes it. */
	p = two_pages();
	io = (struct iocb *)p;
	io_prep_pwrite(io, fd, gone_buf, BLK, gone_block++ * BLK);
	mprotect(p, BLK, PROT_WRITE);
	arr[0] = &stack_io;
	arr[1] = io;
	gone_submit("batch-writeonly", &stack_io, arr, 2);
	/* A context destroyed (its ring unmapped by the kernel): EINVAL. */
	{
		io_context_t keep = ctx, gone = 0;

		if (io_setup(4, &gone))
			die("io_setup");
		ctx = gone;
		arr[0] = &stack_io;
		gone_submit("ctx-before", &stack_io, arr, 1);
		io_destroy(gone);
		gone_submit("ctx-destroyed", &stack_io, arr, 1);
		ctx = keep;
	}
	/* A child does not have its parent's MADV_DONTFORK pages. */
	p = two_pages();
	madvise(p, BLK, MADV_DONTFORK);
	io = (struct iocb *)p;
	arr[0] = io;
	gone_submit("dontfork-before", io, arr, 1);
	fflush(stdout);
	{
		pid_t kid = fork();
		int st;

		if (!kid) {
			ctx = 0;
			if (io_setup(4, &ctx))
				die("io_setup child");
			gone_submit("dontfork-child", NULL, arr, 1);
			fflush(stdout);
			_exit(0);
		}
		if (kid < 0 || waitpid(kid, &st, 0) != kid || !WIFEXITED(st))
			printf("dontfork-child died\n");
		/* _Fork runs no fork handler: its child has the parent's
		 * books, and not the page. */
		kid = _Fork();
		if (!kid) {
			ctx = 0;
			if (io_setup(4, &ctx))
				_exit(3);
			gone_submit("dontfork-_Fork-child", NULL, arr, 1);
			fflush(stdout);
			_exit(0);
		}
		if (kid < 0 || waitpid(kid, &st, 0) != kid || !WIFEXITED(st))
			printf("dontfork-_Fork-child died\n");
	}

	/* Batches read in part: the second iocb unreadable; the array's
	 * second pointer in an unmapped page. */
	arr[0] = &stack_io;
	arr[1] = (struct iocb *)(uintptr_t)atoi("4096");
	gone_submit("batch-second-bogus", &stack_io, arr, 2);
	p = two_pages();
	munmap(p + BLK, BLK);
	parr = (struct iocb **)(p + BLK - sizeof(*parr));
	parr[0] = &stack_io;
	gone_submit("batch-array-cut", &stack_io, parr, 2);
	munmap(p, BLK);
	io_destroy(ctx);
}

static void uring_errors(void)
{
	struct io_uring_cqe *c;
	struct io_uring_sqe *s;
	char *buf;
	int rfd = open(path, O_RDONLY | O_DIRECT);
	struct stat st;

	if (posix_memalign((void **)&buf, BLK, 2 * BLK) || rfd < 0 ||
	    io_uring_queue_init(8, &ring, 0) < 0 ||
	    io_uring_register_files(&ring, &fd, 1))
		die("setup");
	memset(buf, 'x', 2 * BLK);
#define ONE(name, prep)                                                   \
	do {                                                              \
		s = io_uring_get_sqe(&ring);                              \
		prep;                                                     \
		printf("%s submit=%d", name, io_uring_submit(&ring));     \
		if (!io_uring_wait_cqe(&ring, &c)) {                      \
			printf(" res=%d", c->res);                        \
			io_uring_cqe_seen(&ring, c);                      \
		}                                                         \
		fstat(fd, &st);                                           \
		printf(" size=%lld\n", (long long)st.st_size);            \
	} while (0)
	ONE("fd-bad", io_uring_prep_write(s, -1, buf, BLK, 0));
	ONE("fd-readonly", io_uring_prep_write(s, rfd, buf, BLK, 0));
	ONE("misaligned", io_uring_prep_write(s, fd, buf + 1, BLK, 0));
	ONE("offset-negative", io_uring_prep_write(s, fd, buf, BLK,
						   (uint64_t)-BLK));
	ONE("offset-huge", io_uring_prep_write(s, fd, buf, BLK, 1ull << 62));
	ONE("fixed-index-bad", io_uring_prep_write(s, 5, buf, BLK, 0);
	    s->flags |= IOSQE_FIXED_FILE);
	ONE("write-ok", io_uring_prep_write(s, fd, buf, BLK, BLK));
	ONE("fixed-ok", io_uring_prep_write(s, 0, buf, BLK, 3 * BLK);
	    s->flags |= IOSQE_FIXED_FILE);
	ONE("fallocate-grow", io_uring_prep_fallocate(s, fd, 0, 0, 6 * BLK));
	ONE("fallocate-keep", io_uring_prep_fallocate(
				      s, fd, FALLOC_FL_KEEP_SIZE, 0, 9 * BLK));
	ONE("fsync", io_uring_prep_fsync(s, fd, IORING_FSYNC_DATASYNC));
	ONE("misaligned-past-eof",
	    io_uring_prep_write(s, fd, buf + 1, BLK, 64 * BLK));
	ONE("fallocate-refused", io_uring_prep_fallocate(s, fd, 0x1000, 0,
							 80 * BLK));
	append_after(buf);
	io_uring_queue_exit(&ring);
}

/* Each block's first byte, '0' for zeros, after the size. */
static void print_blocks(void)
{
	int rfd = open(path, O_RDONLY);
	struct stat st;
	char r[BLK];
	off_t o;

	fstat(rfd, &st);
	printf("size=%lld:", (long long)st.st_size);
	for (o = 0; o < st.st_size; o += BLK)
		printf(" %c", pread(rfd, r, BLK, o) > 0 && r[0] ? r[0] : '0');
	printf("\n");
	close(rfd);
}

static void linked(void)
{
	int afd = open(path, O_WRONLY | O_APPEND | O_DIRECT), p[2], i;
	struct io_uring_sqe *s;
	struct io_uring_cqe *c;
	char *a, pbuf[8];

	if (afd < 0 || pipe(p) || posix_memalign((void **)&a, BLK, BLK) ||
	    io_uring_queue_init(8, &ring, 0) < 0)
		die("setup");
	s = io_uring_get_sqe(&ring);
	io_uring_prep_read(s, p[0], pbuf, sizeof(pbuf), 0);
	s->flags |= IOSQE_IO_LINK;
	s->user_data = 1;
	memset(a, 'A', BLK);
	s = io_uring_get_sqe(&ring);
	io_uring_prep_write(s, fd, a, BLK, 2 * BLK);
	s->user_data = 2;
	printf("submit=%d\n", io_uring_submit(&ring));
	memset(a, 'B', BLK);
	printf("pwrite=%zd\n", pwrite(fd, a, BLK, 0));
	if (write(p[1], "x", 1) != 1)
		die("pipe");
	for (i = 0; i < 2 && !io_uring_wait_cqe(&ring, &c); i++) {
		printf("cqe %llu res=%d\n", (unsigned long long)c->user_data,
		       c->res);
		io_uring_cqe_seen(&ring, c);
	}
	memset(a, 'C', BLK);
	printf("append=%zd\n", write(afd, a, BLK));
	print_blocks();
}

#ifndef RWF_DONTCACHE
#define RWF_DONTCACHE 0x00000080
#endif

static void flagged(void)
{
	int afd = open(path, O_WRONLY | O_APPEND | O_DIRECT), round, i;
	long ok = 0, failed = 0, distinct = 0;
	struct iocb io[4], *ios[4];
	struct io_event ev[4];
	struct io_uring_cqe *c;
	char *b, *seen;
	struct stat st;

	if (afd < 0 || posix_memalign((void **)&b, BLK, 4 * BLK) ||
	    (engine == AIO ? io_setup(8, &ctx)
			   : io_uring_queue_init(8, &ring, 0)) < 0)
		die("setup");
	for (round = 0; round < 50; round++) {
		for (i = 0; i < 4; i++) {
			memset(b + i * BLK, 0, BLK);
			snprintf(b + i * BLK, BLK, "rec %d", round * 4 + i);
			if (engine == AIO) {
				io_prep_pwrite(&io[i], afd, b + i * BLK, BLK, 0);
				io[i].aio_rw_flags = RWF_DONTCACHE;
				ios[i] = &io[i];
			} else {
				struct io_uring_sqe *s = io_uring_get_sqe(&ring);

				io_uring_prep_write(s, afd, b + i * BLK, BLK, 0);
				s->rw_flags = RWF_DONTCACHE;
			}
		}
		if (engine == AIO) {
			int n = io_submit(ctx, 4, ios), got = 0;

			failed += n < 0 ? 4 : 4 - n;
			while (n > 0 && got < n) {
				int k = io_getevents(ctx, 1, 4, ev, NULL);

				for (i = 0; i < k; i++)
					(long)ev[i].res == BLK ? ok++ : failed++;
				got += k > 0 ? k : 0;
			}
		} else {
			io_uring_submit(&ring);
			for (i = 0; i < 4 && !io_uring_wait_cqe(&ring, &c); i++) {
				c->res == BLK ? ok++ : failed++;
				io_uring_cqe_seen(&ring, c);
			}
		}
	}
	fstat(fd, &st);
	seen = calloc(200, 1);
	for (i = 0; i < st.st_size / BLK; i++) {
		int k = -1;

		if (pread(fd, b, BLK, (off_t)i * BLK) == BLK &&
		    sscanf(b, "rec %d", &k) == 1 && k >= 0 && k < 200 &&
		    !seen[k]++)
			distinct++;
	}
	printf("ok=%ld failed=%ld size=%lld distinct=%ld\n", ok, failed,
	       (long long)st.st_size, distinct);
}

#define PAST (1 << 20)

static void past_then_append(void)
{
	int afd = open(path, O_WRONLY | O_APPEND | O_DIRECT);
	struct io_uring_cqe *c;
	struct iocb io, *one = &io;
	struct io_event ev;
	char *a, *b, at[2];
	struct stat st;
	int i;

	if (afd < 0 || posix_memalign((void **)&a, BLK, PAST) ||
	    posix_memalign((void **)&b, BLK, BLK))
		die("setup");
	memset(a, 'A', PAST);
	memset(b, 'B', BLK);
	if (engine == AIO) {
		if (io_setup(4, &ctx))
			die("io_setup");
		io_prep_pwrite(&io, fd, a, PAST, 0);
		if (io_submit(ctx, 1, &one) != 1)
			die("io_submit");
	} else {
		if (io_uring_queue_init(4, &ring, 0) < 0)
			die("io_uring_queue_init");
		io_uring_prep_write(io_uring_get_sqe(&ring), fd, a, PAST, 0);
		if (io_uring_submit(&ring) != 1)
			die("io_uring_submit");
	}
	if (write(afd, b, BLK) != BLK)
		die("append");
	if (engine == AIO ? io_getevents(ctx, 1, 1, &ev, NULL) != 1 ||
				    (long)ev.res != PAST
			  : io_uring_wait_cqe(&ring, &c) || c->res != PAST)
		die("queued write");
	fstat(fd, &st);
	for (i = 0; i < 2; i++) {
		at[i] = '-';
		if (pread(fd, b, BLK, (off_t)i * PAST) == BLK)
			at[i] = b[0];
	}
	printf("size=%lld at0=%c at1m=%c\n", (long long)st.st_size, at[0],
	       at[1]);
}

/* check: every block record i at block i, or zeros; nothing else. */
#define WIDE 40

/* One submission writing to more files than the shim's batch holds. */
static void wide(const char *dir)
{
	struct iocb ios[WIDE], *arr[WIDE];
	struct io_event ev[WIDE];
	int fds[WIDE], i, n = 0, ok = 0;
	char name[4096], *buf;

	if (posix_memalign((void **)&buf, BLK, 2 * BLK))
		die("posix_memalign");
	memset(buf, 'A', BLK);
	memset(buf + BLK, 'B', BLK);
	for (i = 0; i < WIDE; i++) {
		snprintf(name, sizeof(name), "%s/wide%02d", dir, i);
		fds[i] = open(name, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT,
			      0644);
		if (fds[i] < 0)
			die(name);
		if (write(fds[i], buf, BLK) != BLK)
			die("write");
	}
	if (engine == AIO) {
		if (io_setup(WIDE, &ctx))
			die("io_setup");
		for (i = 0; i < WIDE; i++) {
			io_prep_pwrite(&ios[i], fds[i], buf + BLK, BLK, BLK);
			if (i % 2 == 0)
				ios[i].aio_rw_flags = RWF_APPEND;
			arr[i] = &ios[i];
		}
		if (io_submit(ctx, WIDE, arr) != WIDE)
			die("io_submit");
		while (n < WIDE) {
			int got = io_getevents(ctx, 1, WIDE - n, ev, NULL);

			if (got < 0)
				die("io_getevents");
			for (i = 0; i < got; i++)
				if (ev[i].res != BLK)
					bad++;
			n += got;
		}
		io_destroy(ctx);
	} else {
		struct io_uring_cqe *cqe;

		if (io_uring_queue_init(WIDE, &ring, 0))
			die("io_uring_queue_init");
		for (i = 0; i < WIDE; i++) {
			struct io_uring_sqe *s = io_uring_get_sqe(&ring);

			io_uring_prep_write(s, fds[i], buf + BLK, BLK, BLK);
			if (i % 2 == 0)
				s->rw_flags = RWF_APPEND;
		}
		if (io_uring_submit(&ring) != WIDE)
			die("io_uring_submit");
		for (n = 0; n < WIDE; n++) {
			if (io_uring_wait_cqe(&ring, &cqe))
				die("io_uring_wait_cqe");
			if (cqe->res != BLK)
				bad++;
			io_uring_cqe_seen(&ring, cqe);
		}
		io_uring_queue_exit(&ring);
	}
	for (i = 0; i < WIDE; i++)
		close(fds[i]);
	printf("sizes=");
	for (i = 0; i < WIDE; i++) {
		struct stat st;
		char got[2 * BLK];
		int f;

		snprintf(name, sizeof(name), "%s/wide%02d", dir, i);
		f = open(name, O_RDONLY);
		if (f < 0 || fstat(f, &st))
			die(name);
		printf("%s%lld", i ? "," : "", (long long)st.st_size);
		if (st.st_size == 2 * BLK &&
		    pread(f, got, 2 * BLK, 0) == 2 * BLK &&
		    !memcmp(got, buf, 2 * BLK))
			ok++;
		close(f);
	}
	printf(" ok=%d bad=%ld\n", ok, bad);
}

#define RECUT 17

/* Appending iocbs submitted again from an array cut by an unmapped page:
 * the shim must give back each readable one's fields (aio_unmark). */
static void recut(const char *dir)
{
	long pg = sysconf(_SC_PAGESIZE);
	char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct iocb ios[RECUT], *full[RECUT], **arr;
	struct io_event ev[RECUT];
	int fds[RECUT], i, r, got;
	char name[4096], *buf;

	if (m == MAP_FAILED || posix_memalign((void **)&buf, BLK, 3 * BLK) ||
	    io_setup(RECUT, &ctx))
		die("setup");
	memset(buf, 'A', BLK);
	memset(buf + BLK, 'B', BLK);
	memset(buf + 2 * BLK, 'C', BLK);
	for (i = 0; i < RECUT; i++) {
		snprintf(name, sizeof(name), "%s/r%02d", dir, i);
		fds[i] = open(name, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT,
			      0644);
		if (fds[i] < 0 || write(fds[i], buf, BLK) != BLK)
			die(name);
		io_prep_pwrite(&ios[i], fds[i], buf + BLK, BLK, 0);
		ios[i].aio_rw_flags = RWF_APPEND;
		full[i] = &ios[i];
	}
	for (r = 0; r < 2; r++) {
		if (r == 0) {
			arr = full;
			printf("submit %d\n", io_submit(ctx, RECUT, arr));
		} else {
			for (i = 0; i < RECUT; i++)
				ios[i].u.c.buf = buf + 2 * BLK;
			if (munmap(m + pg, pg))
				die("munmap");
			arr = (struct iocb **)(m + pg - RECUT * sizeof(*arr));
			memcpy(arr, full, sizeof(full));
			printf("submit %d\n", io_submit(ctx, RECUT + 1, arr));
		}
		for (got = 0; got < RECUT;) {
			int n = io_getevents(ctx, 1, RECUT, ev, NULL);

			if (n <= 0)
				die("io_getevents");
			for (i = 0; i < n; i++)
				if (ev[i].res != BLK)
					printf("res %ld\n", (long)ev[i].res);
			got += n;
		}
	}
	io_destroy(ctx);
	for (i = 0; i < RECUT; i++) {
		char back[3 * BLK] = { 0 };
		struct stat st;

		close(fds[i]);
		snprintf(name, sizeof(name), "%s/r%02d", dir, i);
		fds[i] = open(name, O_RDONLY);
		if (fds[i] < 0 || fstat(fds[i], &st) ||
		    pread(fds[i], back, sizeof(back), 0) < 0)
			die(name);
		printf("%d: size=%lld %c%c%c\n", i, (long long)st.st_size,
		       back[0] ? back[0] : '0', back[BLK] ? back[BLK] : '0',
		       back[2 * BLK] ? back[2 * BLK] : '0');
		close(fds[i]);
	}
}

static int check_only(void)
{
	int rfd = open(path, O_RDONLY | O_DIRECT);
	long i, records = 0, zeros = 0, errors = 0;
	struct stat st;
	char *b;

	if (rfd < 0 || fstat(rfd, &st) || posix_memalign((void **)&b, BLK, BLK))
		die(path);
	for (i = 0; i < (st.st_size + BLK - 1) / BLK; i++) {
		uint32_t w;
		uint64_t seq;
		int k;

		memset(b, 0, BLK);
		if (pread(rfd, b, BLK, (off_t)i * BLK) < 0)
			die("pread");
		k = rec_parse(b, BLK, &w, &seq);
		if (k == 1)
			zeros++;
		else if (k == 0 && (long)seq == i)
			records++;
		else
			errors++;
	}
	printf("size=%lld records=%ld zeros=%ld bad=%ld\n",
	       (long long)st.st_size, records, zeros, errors);
	return errors || st.st_size % BLK ? 1 : 0;
}

int main(int argc, char **argv)
{
	int i, flags = O_RDWR | O_CREAT | O_DIRECT;

	if (argc < 4) {
		fprintf(stderr, "usage: asyncwrite aio|uring seq|rand|append "
				"FILE BLOCKS QD [stat trunc fixed sqpoll "
				"fsync]\n       asyncwrite aio|uring "
				"errors|linked|flagged|past-then-append "
				"FILE\n       asyncwrite aio|uring wide DIR\n"
				"       asyncwrite aio recut DIR\n");
		return 2;
	}
	engine = strcmp(argv[1], "aio") ? URING : AIO;
	path = argv[3];
	if (!strcmp(argv[2], "check"))
		return check_only();
	if (!strcmp(argv[2], "wide")) {
		wide(path);
		return 0;
	}
	if (!strcmp(argv[2], "recut")) {
		recut(path);
		return 0;
	}
	if (!strcmp(argv[2], "errors") || !strcmp(argv[2], "linked") ||
	    !strcmp(argv[2], "flagged") ||
	    !strcmp(argv[2], "past-then-append") ||
	    !strcmp(argv[2], "gone")) {
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
		if (fd < 0)
			die(path);
		if (argv[2][0] == 'p')
			past_then_append();
		else if (argv[2][0] == 'l')
			linked();
		else if (argv[2][0] == 'f')
			flagged();
		else if (argv[2][0] == 'g')
			aio_gone();
		else if (engine == AIO)
			aio_errors();
		else
			uring_errors();
		return 0;
	}
	if (argc < 6)
		return 2;
	mode = !strcmp(argv[2], "rand") ? RAND
	       : !strcmp(argv[2], "append") ? APPEND
					    : SEQ;
	nblocks = atol(argv[4]);
	qd = atoi(argv[5]);
	for (i = 6; i < argc; i++) {
		opt_stat |= !strcmp(argv[i], "stat");
		opt_trunc |= !strcmp(argv[i], "trunc");
		opt_fixed |= !strcmp(argv[i], "fixed");
		opt_sqpoll |= !strcmp(argv[i], "sqpoll");
		opt_fsync |= !strcmp(argv[i], "fsync");
		opt_nospc |= !strcmp(argv[i], "nospc");
	}
	if (nblocks <= 0 || qd <= 0 || (opt_trunc && nblocks < 8L * qd) ||
	    (opt_nospc && mode == APPEND))
		return 2;
	acked = calloc((size_t)nblocks, 1);
	if (mode == APPEND)
		flags |= O_APPEND;
	fd = open(path, flags | O_TRUNC, 0644);
	if (fd < 0)
		die(path);
	if (posix_memalign((void **)&bufs, BLK, (size_t)qd * BLK))
		die("posix_memalign");
	order = malloc((size_t)nblocks * sizeof(long));
	for (i = 0; i < nblocks; i++)
		order[i] = i;
	if (mode == RAND) {
		srand(42);
		for (i = (int)nblocks - 1; i > 0; i--) {
			int j = rand() % (i + 1);
			long t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
	}
	engine_init();
	run();
	return bad || atomic_load(&stat_bad) ? 1 : 0;
}
