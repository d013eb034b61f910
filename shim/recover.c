// SPDX-License-Identifier: MIT
/*
 * The EOF record and crash recovery.
 *
 * The record is written before each reservation's fallocate, so that the
 * journal (jbd2, the XFS log) commits it no later than the size change it
 * describes: whatever makes that size durable — a journal commit, fsync,
 * or the fdatasync that commits an unwritten-extent conversion — makes the
 * record durable too.  It is rewritten at fsync only when recovery from it
 * would be wrong: recovery keeps every block of data past the record, so
 * appends of whole blocks need no rewrite, but a size inside a block (it
 * would come back rounded up), grown without data or whose last block was
 * punched (it would come back short) does (record_stale).
 *
 * Data is found from the extent map (FIEMAP), never from SEEK_DATA over a
 * page cache that a reader outside the shim may have filled with zeros
 * over the reserved, unwritten blocks.
 *
 * Layer L2, its bottom: calls L1 (the record, segments) and L0 (extmap,
 * log, sys).  (The order
 * inside L2 is shim/layers'.)
 */
#define _GNU_SOURCE
#include "recover.h"

#include "dioshim.h"
#include "extmap.h"
#include "log.h"
#include "segment.h"
#include "sys.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct recover_report recover_last;

void recover_drop_cache(int fd, uint64_t from, uint64_t to)
{
	/* Clean cached pages over unwritten extents (a buffered reader read
	 * the reserved tail: readahead caches zeros) are data to SEEK_DATA;
	 * they hold nothing, so they go first.  Dirty pages stay, and count:
	 * they are someone's buffered writes.  Pages that stay mapped, or
	 * large folios reaching below from, cannot be dropped: hence the
	 * extent map, where there is one. */
	if (to > from)
		sys_fadvise64(fd, (off_t)from, (off_t)(to - from),
			      POSIX_FADV_DONTNEED);
}

static uint64_t seek_data_end(int fd, uint64_t from, uint64_t size)
{
	uint64_t end = from;
	off_t d = (off_t)from, h;

	recover_drop_cache(fd, from, size);
	for (;;) {
		d = sys_lseek(fd, d, SEEK_DATA);
		if (d < 0)
			break;
		h = sys_lseek(fd, d, SEEK_HOLE);
		if (h < 0)
			break;
		end = (uint64_t)h;
		d = h;
	}
	return end;
}

struct data_end {
	uint64_t size, end;
};

static bool note_data(const struct fiemap_extent *e, void *arg)
{
	struct data_end *d = arg;
	uint64_t e_end = e->fe_logical + e->fe_length;

	if (!(e->fe_flags & FIEMAP_EXTENT_UNWRITTEN) && e->fe_logical < d->size &&
	    e_end > d->end)
		d->end = e_end;
	return true;
}

/*
 * The end of the last data extent in [from, size), or from; false if the
 * filesystem has no extent map (tmpfs) or the map cannot be read.
 *
 * A buffered write over an unwritten extent (a program outside the shim
 * writing into the reserved tail) is data only in the page cache until
 * writeback converts the extent: the range is written back first, and
 * both ext4 and XFS end a page's writeback only after the conversion.
 * A write into a hole not yet written back is a delayed allocation, which
 * the map reports as such: data.
 */
static bool fiemap_data_end(int fd, uint64_t from, uint64_t size,
			    uint64_t *end)
{
	struct data_end d = { .size = size, .end = from };

	*end = from;
	sys_sync_file_range(fd, (off_t)from, (off_t)(size - from),
			    SYNC_FILE_RANGE_WAIT_BEFORE |
				    SYNC_FILE_RANGE_WRITE |
				    SYNC_FILE_RANGE_WAIT_AFTER);
	if (!extmap_walk(fd, from, size, note_data, &d))
		return false;
	/* The last block of data may reach past the size (the size is
	 * inside it): the data ends at the size. */
	*end = d.end > size ? size : d.end;
	return true;
}

uint64_t recover_data_end(int fd, uint64_t from)
{
	struct stat st;
	uint64_t size, end;

	if (sys_fstat(fd, &st))
		return from;
	size = (uint64_t)st.st_size;
	if (from >= size)
		return from;
	if (fiemap_data_end(fd, from, size, &end))
		return end;
	return seek_data_end(fd, from, size);
}

#define ZERO_LOOK (64u << 10)

static bool zeros_through(int fd, uint64_t from, uint64_t to, uint64_t *buf)
{
	uint64_t at, i;
	ssize_t n;

	for (at = from; at < to; at += (uint64_t)n) {
		n = sys_pread(fd, buf,
			      to - at < ZERO_LOOK ? to - at : ZERO_LOOK,
			      (off_t)at);
		if (n <= 0 || n % 8)
			return false;
		for (i = 0; i < (uint64_t)n / 8; i++)
			if (buf[i])
				return false;
	}
	return true;
}

bool recover_zeros(int fd, uint64_t from, uint64_t to)
{
	uint64_t *buf =
		(uint64_t *)sys_mmap(NULL, ZERO_LOOK, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int rfd = fd;
	bool zero;

	if (buf == MAP_FAILED)
		return false;
	/* A descriptor for writing only (a last close through one): a
	 * second one, for this. */
	if (!recover_fd_readable(fd))
		rfd = recover_reopen(fd, O_RDONLY);
	zero = rfd >= 0 && zeros_through(rfd, from, to, buf);
	if (rfd >= 0 && rfd != fd)
		sys_close(rfd);
	sys_munmap(buf, ZERO_LOOK);
	return zero;
}

/* A block size to round with, whoever passed it. */
static uint64_t valid_blksize(uint64_t bs)
{
	return bs >= 512 && bs <= (1u << 20) && !(bs & (bs - 1)) ? bs : 4096;
}

bool recover_fd_readable(int fd)
{
	int fl = sys_fcntl(fd, F_GETFL, 0);

	return fl >= 0 && (fl & O_ACCMODE) != O_WRONLY;
}

bool recover_fd_writable(int fd)
{
	int fl = sys_fcntl(fd, F_GETFL, 0);

	return fl >= 0 && (fl & O_ACCMODE) != O_RDONLY;
}

static void self_fd_path(char *buf, size_t cap, int fd)
{
	snprintf(buf, cap, "/proc/self/fd/%d", fd);
}

int recover_reopen(int fd, int flags)
{
	char path[64];

	self_fd_path(path, sizeof(path), fd);
	return sys_openat(AT_FDCWD, path, flags | O_NOCTTY | O_CLOEXEC, 0);
}

int recover_truncate(int fd, uint64_t size)
{
	char path[64];

	if (recover_fd_writable(fd))
		return sys_ftruncate(fd, (off_t)size);
	self_fd_path(path, sizeof(path), fd);
	return (int)SYS_TRY(sys_truncate(path, (off_t)size));
}

enum recover_outcome recover_fd(int fd, uint32_t blksize,
				struct recover_report *rep)
{
	return recover_fd_hint(fd, blksize, NULL, rep);
}

enum recover_outcome recover_fd_hint(int fd, uint32_t blksize,
				     const struct recover_hint *hint,
				     struct recover_report *rep)
{
	uint64_t bs = valid_blksize(blksize), start, base, aligned, target;
	uint64_t data;
	struct stat st;

	memset(rep, 0, sizeof(*rep));
	if (!record_read(fd, &rep->rec_eof, &rep->rec_phys))
		return rep->outcome = RECOVER_NO_RECORD;
	if (sys_fstat(fd, &st))
		return rep->outcome = RECOVER_FAILED;
	rep->size_before = rep->size_after = (uint64_t)st.st_size;
	start = rep->rec_eof < rep->size_before ? rep->rec_eof
						: rep->size_before;
	/* Anything written past the recorded EOF stays: appends after the
	 * record, and writes in flight at the crash that made it to disk.
	 * The block holding EOF is the application's own: data is looked
	 * for from its start, but only data past it moves the size. */
	base = start / bs * bs;
	aligned = base < start ? base + bs : start;
	data = recover_data_end(fd, base);
	target = data > aligned ? data : start;
	/* Recovery sees data by whole blocks; where in the last one the size
	 * was, only the dead users' segment knows (appends of 512 bytes end
	 * inside a block).  Its eof is taken only inside that last block of
	 * data, and only if its record is the one on the file: never past
	 * the data nor below the record, so a word that outlived its writers
	 * (or that another process wrote) moves the size by less than a
	 * block, over bytes of a block that holds data. */
	if (hint && hint->rec_eof == rep->rec_eof &&
	    hint->rec_phys == rep->rec_phys && hint->eof >= start &&
	    hint->eof <= data && hint->eof + bs > data)
		target = hint->eof;
	/* Users killed on a filesystem that stayed up (kill -9, not a power
	 * cut): the kernel alone keeps every size they made, a growth by
	 * fallocate not yet synced included, and their eof is that size.
	 * The record must be the one their words name (nobody changed the
	 * file since), and nothing past the kernel's size is taken. */
	if (hint && hint->live && hint->rec_eof == rep->rec_eof &&
	    hint->rec_phys == rep->rec_phys && hint->eof > target &&
	    hint->eof <= rep->size_before)
		target = hint->eof;
	if (target > rep->size_before)
		target = rep->size_before;
	if (target < rep->size_before) {
		if (recover_truncate(fd, target))
			return rep->outcome = RECOVER_FAILED;
		rep->size_after = target;
		rep->outcome = RECOVER_TRIMMED;
	} else {
		rep->outcome = RECOVER_CLEAN;
	}
	if (!record_remove(fd))
		log_event(LOG_ERROR, LOG_FD(fd),
			  "recovered, but the record stays: %s",
			  strerror(errno));
	log_event(LOG_RECOVER, LOG_FD(fd),
		  "recovered: record eof %" PRIu64 " phys %" PRIu64
		  ", size %" PRIu64 " -> %" PRIu64,
		  rep->rec_eof, rep->rec_phys, rep->size_before,
		  rep->size_after);
	return rep->outcome;
}

#ifndef STATX_MNT_ID_UNIQUE
#define STATX_MNT_ID_UNIQUE 0x00004000U
#endif

uint64_t recover_mnt_id(int fd)
{
	struct statx stx;

	memset(&stx, 0, sizeof(stx));
	if (sys_statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID_UNIQUE, &stx) ||
	    !(stx.stx_mask & STATX_MNT_ID_UNIQUE))
		return 0;
	return stx.stx_mnt_id;
}

bool recover_words(struct dioshim_seg *seg, int fd)
{
	uint64_t bs = seg_blksize(seg), size, eof, aligned, data;
	uint64_t rec_eof, rec_phys, want;
	struct stat st;

	if (sys_fstat(fd, &st)) {
		log_event(LOG_ERROR, LOG_SEGFD(seg, fd),
			  "cannot read the size to recompute the words: %s",
			  strerror(errno));
		return false;
	}
	size = (uint64_t)st.st_size;
	eof = atomic_load(&seg->eof);
	if (eof > size)
		eof = size;
	/* Data past eof was written (a writer killed between its write and
	 * publishing it) — or eof is not to be trusted: either way the size
	 * reaches at least to the end of the data. */
	aligned = (eof + bs - 1) / bs * bs;
	data = recover_data_end(fd, aligned);
	if (data > aligned)
		eof = data < size ? data : size;
	atomic_store(&seg->phys, size);
	atomic_store(&seg->eof, eof);
	/* Nobody is writing: no append holds a claim past eof.  What the
	 * dead claimed there is not untouched (fresh_from). */
	touched_raise(seg, atomic_load(&seg->tail) & ~DIOSHIM_TAIL_CLOSED);
	atomic_store(&seg->tail, eof);
	if (atomic_load(&seg->synced_eof) > eof)
		atomic_store(&seg->synced_eof, eof);
	if (atomic_load(&seg->async_end) > size)
		atomic_store(&seg->async_end, size);

	/* The record must let recovery find eof with what is reserved now;
	 * where it cannot be made to, recorded_phys stays apart from phys,
	 * so the next sync tries again (record_stale). */
	if (size <= eof) {
		if (record_remove(fd)) {
			atomic_store(&seg->recorded_eof, 0);
			atomic_store(&seg->recorded_phys, 0);
		}
		return true;
	}
	want = atomic_load(&seg->recorded_eof);
	if (want < atomic_load(&seg->synced_eof))
		want = atomic_load(&seg->synced_eof);
	if (want > eof)
		want = eof;
	if (record_read(fd, &rec_eof, &rec_phys) && rec_phys == size &&
	    rec_eof == want) {
		atomic_store(&seg->recorded_eof, rec_eof);
		atomic_store(&seg->recorded_phys, rec_phys);
	} else if (record_write(fd, want, size)) {
		atomic_store(&seg->recorded_eof, want);
		atomic_store(&seg->recorded_phys, size);
	} else {
		atomic_store(&seg->recorded_phys, 0);
		log_event(LOG_ERROR, LOG_SEGFD(seg, fd),
			  "cannot record eof after recomputing the words: %s",
			  strerror(errno));
	}
	return true;
}
