// SPDX-License-Identifier: MIT
/*
 * The EOF record and crash recovery.
 *
 * The record is written before each reservation's fallocate, so that the
 * journal (jbd2, the XFS log) commits it no later than the size change it
 * describes: whatever makes that size durable — a journal commit, fsync,
 * or the fdatasync that commits an unwritten-extent conversion — makes the
 * record durable too.  It is rewritten at fsync only when recovery from it
 * would be wrong (the logical size grew without data since); appends need
 * no rewrite, since recovery keeps every written block past the record.
 */
#define _GNU_SOURCE
#include "recover.h"

#include "dioshim.h"
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

struct recover_report recover_last;

bool record_write(int fd, uint64_t eof, uint64_t phys)
{
	char v[64];
	int n = snprintf(v, sizeof(v), "v1 %" PRIu64 " %" PRIu64, eof, phys);

	return syscall(SYS_fsetxattr, fd, DIOSHIM_XATTR_EOF, v, (size_t)n,
		       0) == 0;
}

bool record_read(int fd, uint64_t *eof, uint64_t *phys)
{
	char v[64];
	long n = syscall(SYS_fgetxattr, fd, DIOSHIM_XATTR_EOF, v,
			 sizeof(v) - 1);

	if (n <= 0)
		return false;
	v[n] = '\0';
	if (sscanf(v, "v1 %" SCNu64 " %" SCNu64, eof, phys) != 2 ||
	    *eof > *phys || *phys > (uint64_t)INT64_MAX) {
		log_msg("ignoring a malformed %s record", DIOSHIM_XATTR_EOF);
		errno = EINVAL;
		return false;
	}
	return true;
}

bool record_remove(int fd)
{
	return syscall(SYS_fremovexattr, fd, DIOSHIM_XATTR_EOF) == 0 ||
	       errno == ENODATA;
}

void recover_drop_cache(int fd, uint64_t from, uint64_t to)
{
	/* Clean cached pages over unwritten extents (a buffered reader read
	 * the reserved tail: readahead caches zeros) are data to SEEK_DATA;
	 * they hold nothing, so they go first.  Dirty pages stay, and count:
	 * they are someone's buffered writes. */
	if (to > from)
		syscall(SYS_fadvise64, fd, (off_t)from, (off_t)(to - from),
			POSIX_FADV_DONTNEED);
}

uint64_t recover_data_end(int fd, uint64_t from)
{
	uint64_t end = from;
	off_t d = (off_t)from, h;

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

int recover_writable_fd(int fd)
{
	char path[64];
	int fl = sys_fcntl(fd, F_GETFL, 0);

	if (fl >= 0 && (fl & O_ACCMODE) != O_RDONLY)
		return fd;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return sys_openat(AT_FDCWD, path, O_WRONLY | O_CLOEXEC | O_NOCTTY, 0);
}

enum recover_outcome recover_fd(int fd, uint32_t blksize,
				struct recover_report *rep)
{
	uint64_t start, aligned, target, data;
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
	 * The block holding EOF is the application's own. */
	aligned = (start + blksize - 1) / blksize * blksize;
	recover_drop_cache(fd, aligned, rep->size_before);
	data = recover_data_end(fd, aligned);
	target = data > aligned ? data : start;
	if (target > rep->size_before)
		target = rep->size_before;
	if (target < rep->size_before) {
		int wfd = recover_writable_fd(fd), rc, err;

		if (wfd < 0)
			return rep->outcome = RECOVER_FAILED;
		rc = sys_ftruncate(wfd, (off_t)target);
		err = errno;
		if (wfd != fd)
			sys_close(wfd);
		errno = err;
		if (rc)
			return rep->outcome = RECOVER_FAILED;
		rep->size_after = target;
		rep->outcome = RECOVER_TRIMMED;
	} else {
		rep->outcome = RECOVER_CLEAN;
	}
	if (!record_remove(fd))
		log_msg("recovered, but the record stays: %s", strerror(errno));
	log_msg("recovered: record eof %" PRIu64 " phys %" PRIu64
		", size %" PRIu64 " -> %" PRIu64,
		rep->rec_eof, rep->rec_phys, rep->size_before,
		rep->size_after);
	return rep->outcome;
}
