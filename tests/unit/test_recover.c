// SPDX-License-Identifier: MIT
/*
 * Recovery exactness, on the mechanisms: recovery from the record keeps
 * every block of data past it, and places the size inside the last one
 * only where the dead users' segment says (and only if its record is the
 * file's); a size change cut short by SIGKILL (the kernel's size cut,
 * the words not) is repaired by whoever takes the barrier over with a
 * descriptor, and waits for one otherwise; the words are recomputed from
 * the kernel's size, the data past eof, and the record made to match.
 *
 * tmpfs has no extent map: data is found with SEEK_DATA here (the bats
 * suite recovery.bats covers the extent map on ext4 and XFS).
 */
#define _GNU_SOURCE
#include "unit.h"

#include "inflight.h"
#include "recover.h"
#include "sys.h"

#include <signal.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#define KiB 1024ull
#define MiB (1024ull * 1024)

static char *buf;

static off_t size_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? -1 : st.st_size;
}

/* bytes of data at off, then a reservation: the kernel's size is phys. */
static void reserved(int fd, uint64_t data, uint64_t phys)
{
	CHECK(ftruncate(fd, 0) == 0);
	memset(buf, 'd', MiB);
	if (data)
		CHECK(pwrite(fd, buf, data, 0) == (ssize_t)data);
	CHECK(fallocate(fd, 0, 0, (off_t)phys) == 0);
}

static uint64_t recovered(int fd, uint64_t rec_eof, uint64_t rec_phys,
			  const struct recover_hint *hint)
{
	struct recover_report rep;

	CHECK(record_write(fd, rec_eof, rec_phys));
	CHECK(recover_fd_hint(fd, 4096, hint, &rep) != RECOVER_FAILED);
	CHECK(fgetxattr(fd, "user.dioshim.eof", NULL, 0) < 0);
	return (uint64_t)size_of(fd);
}

static void hint_rules(int fd)
{
	struct recover_hint h;

	/* No hint: the end of the last block of data past the record. */
	reserved(fd, 1536, MiB);
	CHECK_EQ(recovered(fd, 0, MiB, NULL), 4096);
	/* The dead users' eof, their record being the file's: exact. */
	reserved(fd, 1536, MiB);
	h = (struct recover_hint){ 1536, 0, MiB, false };
	CHECK_EQ(recovered(fd, 0, MiB, &h), 1536);
	/* Another record than theirs: not theirs to say. */
	reserved(fd, 1536, MiB);
	h = (struct recover_hint){ 1536, 0, 2 * MiB, false };
	CHECK_EQ(recovered(fd, 0, MiB, &h), 4096);
	/* Past the data (the disk lost what the words say): ignored. */
	reserved(fd, 1536, MiB);
	h = (struct recover_hint){ 12 * KiB, 0, MiB, false };
	CHECK_EQ(recovered(fd, 0, MiB, &h), 4096);
	/* More than a block below the end of the data: ignored (data a
	 * dead writer wrote past its eof stays). */
	reserved(fd, 12 * KiB, MiB);
	h = (struct recover_hint){ 4096, 0, MiB, false };
	CHECK_EQ(recovered(fd, 0, MiB, &h), 12 * KiB);
	/* Inside the last block: the size there. */
	reserved(fd, 12 * KiB, MiB);
	h = (struct recover_hint){ 10 * KiB, 0, MiB, false };
	CHECK_EQ(recovered(fd, 0, MiB, &h), 10 * KiB);
	/* Never below the record... */
	reserved(fd, 1536, MiB);
	h = (struct recover_hint){ 512, 1024, MiB, false };
	CHECK_EQ(recovered(fd, 1024, MiB, &h), 1024);
	/* ... and up to the eof inside the record's own block. */
	reserved(fd, 2048, MiB);
	h = (struct recover_hint){ 2048, 1024, MiB, false };
	CHECK_EQ(recovered(fd, 1024, MiB, &h), 2048);
	/* Users killed on this mount (live): the kernel alone keeps every
	 * size they made, a growth by fallocate with no data under it
	 * too, and their eof is that size. */
	reserved(fd, 1536, MiB);
	h = (struct recover_hint){ 512 * KiB, 0, MiB, true };
	CHECK_EQ(recovered(fd, 0, MiB, &h), 512 * KiB);
	/* ... only with their record on the file ... */
	reserved(fd, 1536, MiB);
	h = (struct recover_hint){ 512 * KiB, 0, 2 * MiB, true };
	CHECK_EQ(recovered(fd, 0, MiB, &h), 4096);
	/* ... never past the kernel's size ... */
	reserved(fd, 1536, MiB);
	h = (struct recover_hint){ 2 * MiB, 0, MiB, true };
	CHECK_EQ(recovered(fd, 0, MiB, &h), 4096);
	/* ... and never below the data. */
	reserved(fd, 12 * KiB, MiB);
	h = (struct recover_hint){ 4096, 0, MiB, true };
	CHECK_EQ(recovered(fd, 0, MiB, &h), 12 * KiB);
	/* A recorded eof with no data past it: exactly that, not a block. */
	reserved(fd, 64 * KiB, MiB);
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			32 * KiB, 32 * KiB) == 0);
	CHECK_EQ(recovered(fd, 64 * KiB, MiB, NULL), 64 * KiB);
}

/* A child dies inside a size change: the barrier and ext_lock held, the
 * kernel's size cut to len, the words and the record as they were. */
static void die_in_truncate(struct shim_file *f, int fd, uint64_t len,
			    bool changing)
{
	int status;
	pid_t kid = unit_fork();

	if (kid == 0) {
		bool recovered;

		if (f->slot < 0 || !barrier_raise_fd(f, fd) ||
		    !seg_lock(&f->seg->ext_lock, &recovered))
			_exit(1);
		if (changing)
			barrier_changing(f);
		if (sys_ftruncate(fd, (off_t)len))
			_exit(1);
		raise(SIGKILL);
		_exit(1);
	}
	waitpid(kid, &status, 0);
	CHECK(WIFSIGNALED(status));
}

/* Words of a file with 20 KiB of data and a reservation to 1 MiB. */
static void words_reserved(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;

	reserved(fd, 20 * KiB, MiB);
	CHECK(record_write(fd, 0, MiB));
	atomic_store(&seg->eof, 20 * KiB);
	atomic_store(&seg->tail, 20 * KiB);
	atomic_store(&seg->phys, MiB);
	atomic_store(&seg->synced_eof, 0);
	atomic_store(&seg->recorded_eof, 0);
	atomic_store(&seg->recorded_phys, MiB);
}

static void check_words(struct shim_file *f, uint64_t eof, uint64_t phys)
{
	CHECK_EQ(atomic_load(&f->seg->eof), eof);
	CHECK_EQ(atomic_load(&f->seg->tail), eof);
	CHECK_EQ(atomic_load(&f->seg->phys), phys);
}

static void alarm_fail(int sig)
{
	static const char msg[] = "hung: a barrier never went down\n";

	(void)sig;
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void takeover(struct shim_file *f, int fd)
{
	struct dioshim_seg *seg = f->seg;
	struct dioshim_shard *sh;
	uint64_t e, p;

	signal(SIGALRM, alarm_fail);
	alarm(30);

	/* A writer without a descriptor cannot repair: it passes through,
	 * and leaves the mark for one that can. */
	words_reserved(f, fd);
	die_in_truncate(f, fd, 8 * KiB, true);
	CHECK_EQ(atomic_load(&seg->barrier), BARRIER_CHANGING);
	CHECK(inflight_enter(f) == NULL);
	CHECK_EQ(atomic_load(&seg->barrier), BARRIER_CHANGING);
	check_words(f, 20 * KiB, MiB);
	/* A writer with one: the words follow the kernel's size, the stale
	 * record goes (nothing is reserved now). */
	sh = inflight_enter_fd(f, fd);
	CHECK(sh != NULL);
	if (sh)
		inflight_exit(sh);
	CHECK_EQ(atomic_load(&seg->barrier), 0);
	check_words(f, 8 * KiB, 8 * KiB);
	CHECK(fgetxattr(fd, "user.dioshim.eof", NULL, 0) < 0);
	CHECK_EQ(atomic_load(&seg->recorded_phys), 0);

	/* The next barrier raiser repairs too, then raises its own. */
	words_reserved(f, fd);
	die_in_truncate(f, fd, 4 * KiB, true);
	CHECK(barrier_raise_fd(f, fd));
	check_words(f, 4 * KiB, 4 * KiB);
	CHECK_EQ(atomic_load(&seg->barrier), BARRIER_UP);
	barrier_lower(f);
	CHECK_EQ(atomic_load(&seg->barrier), 0);

	/* A raiser that died before changing anything needs no repair:
	 * any writer lowers its barrier, and the words stay. */
	words_reserved(f, fd);
	die_in_truncate(f, fd, MiB, false);
	CHECK_EQ(atomic_load(&seg->barrier), BARRIER_UP);
	sh = inflight_enter(f);
	CHECK(sh != NULL);
	if (sh)
		inflight_exit(sh);
	check_words(f, 20 * KiB, MiB);

	/* Growth cut short: the kernel's size is phys, eof stays at the
	 * data, the record names the new reservation. */
	words_reserved(f, fd);
	die_in_truncate(f, fd, 2 * MiB, true);
	CHECK(barrier_raise_fd(f, fd));
	barrier_lower(f);
	check_words(f, 20 * KiB, 2 * MiB);
	CHECK(record_read(fd, &e, &p));
	CHECK_EQ(p, 2 * MiB);
	CHECK(e <= 20 * KiB);
	CHECK_EQ(atomic_load(&seg->recorded_phys), 2 * MiB);

	/* Data past eof (a writer killed before it published): eof reaches
	 * the end of it. */
	words_reserved(f, fd);
	CHECK(pwrite(fd, buf, 8 * KiB, 20 * KiB) == 8 * KiB);
	die_in_truncate(f, fd, 512 * KiB, true);
	CHECK(barrier_raise_fd(f, fd));
	barrier_lower(f);
	check_words(f, 28 * KiB, 512 * KiB);
	alarm(0);
}

int main(void)
{
	struct shim_file *f;
	struct file_id id;
	char path[512];
	int fd;

	unit_setup();
	if (posix_memalign((void **)&buf, 4096, MiB))
		return T_FAIL;
	fd = unit_file("r", 0, path, sizeof(path));
	if (fsetxattr(fd, "user.t", "1", 1, 0))
		SKIP("no user xattrs on %s", path);
	hint_rules(fd);

	if (ftruncate(fd, 0) || !file_identify(fd, &id) ||
	    !(f = segment_attach(fd, &id, true)))
		return T_FAIL;
	takeover(f, fd);
	segment_put(f, fd);
	close(fd);
	return unit_result();
}
