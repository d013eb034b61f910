// SPDX-License-Identifier: MIT
/*
 * The shim's own system calls, the slow halves (sys.h): an answer read
 * through another call when the first keeps failing.
 *
 * Layer L0: calls only the raw entry (entry.c) and libc.
 */
#define _GNU_SOURCE
#include "sys.h"

#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

int sys_fstat_slow(int fd, struct stat *st)
{
	int err = errno;
	struct statx stx;

	if (sys_statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &stx) ||
	    (stx.stx_mask & (STATX_TYPE | STATX_SIZE | STATX_INO)) !=
		    (STATX_TYPE | STATX_SIZE | STATX_INO)) {
		errno = err;
		return -1;
	}
	memset(st, 0, sizeof(*st));
	st->st_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	st->st_ino = stx.stx_ino;
	st->st_mode = stx.stx_mode;
	st->st_nlink = stx.stx_nlink;
	st->st_uid = stx.stx_uid;
	st->st_gid = stx.stx_gid;
	st->st_rdev = makedev(stx.stx_rdev_major, stx.stx_rdev_minor);
	st->st_size = (off_t)stx.stx_size;
	st->st_blksize = stx.stx_blksize;
	st->st_blocks = (blkcnt_t)stx.stx_blocks;
	st->st_atim.tv_sec = stx.stx_atime.tv_sec;
	st->st_atim.tv_nsec = stx.stx_atime.tv_nsec;
	st->st_mtim.tv_sec = stx.stx_mtime.tv_sec;
	st->st_mtim.tv_nsec = stx.stx_mtime.tv_nsec;
	st->st_ctim.tv_sec = stx.stx_ctime.tv_sec;
	st->st_ctim.tv_nsec = stx.stx_ctime.tv_nsec;
	return 0;
}

int sys_fstatfs_slow(int fd, struct statfs *sfs)
{
	int err = errno;
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (SYS_TRY(sys_call(SYS_statfs, path, sfs))) {
		errno = err;
		return -1;
	}
	return 0;
}

/*
 * fn(line, arg) for each line of a file (a /proc one: /proc/locks,
 * /proc/self/maps), its newline made a '\0', until fn returns other than
 * 0: that value, 0 when no line did, -1 when the file cannot be opened.
 * Raw calls and a buffer on the stack: safe wherever the shim reads the
 * program's memory.  A line longer than the buffer is skipped.
 */
int sys_each_line(const char *path, int (*fn)(char *line, void *arg),
		  void *arg)
{
	char buf[4096];
	size_t have = 0;
	int fd = sys_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0), ret = 0;

	if (fd < 0)
		return -1;
	while (!ret) {
		ssize_t n = sys_read(fd, buf + have, sizeof(buf) - 1 - have);
		char *line = buf, *nl;

		if (n <= 0)
			break;
		have += (size_t)n;
		buf[have] = '\0';
		while (!ret &&
		       (nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			*nl = '\0';
			ret = fn(line, arg);
			line = nl + 1;
		}
		/* keep the part of a line the next read completes */
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == sizeof(buf) - 1)
			have = 0;
	}
	sys_close(fd);
	return ret;
}
