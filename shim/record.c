// SPDX-License-Identifier: MIT
/*
 * The EOF record: write, read, remove it, or ask whether it is there.
 * Layer L1; calls only L0 (log, sys).  Recovery (recover.c) reads it
 * after a crash, reservation (reserve.c) writes it, and a segment's
 * maker (segment.c) asks whether one is there.
 */
#define _GNU_SOURCE
#include "record.h"

#include "dioshim.h"
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

bool record_write(int fd, uint64_t eof, uint64_t phys)
{
	char v[64];
	int n = snprintf(v, sizeof(v), "v1 %" PRIu64 " %" PRIu64, eof, phys);

	return SYS_TRY(sys_fsetxattr(fd, DIOSHIM_XATTR_EOF, v, (size_t)n,
				     0)) == 0;
}

bool record_read(int fd, uint64_t *eof, uint64_t *phys)
{
	char v[64];
	long n = SYS_TRY(sys_fgetxattr(fd, DIOSHIM_XATTR_EOF, v,
				       sizeof(v) - 1));

	if (n <= 0)
		return false;
	v[n] = '\0';
	if (sscanf(v, "v1 %" SCNu64 " %" SCNu64, eof, phys) != 2 ||
	    *eof > *phys || *phys > (uint64_t)INT64_MAX) {
		log_event(LOG_ERROR, LOG_FD(fd),
			  "ignoring a malformed %s record", DIOSHIM_XATTR_EOF);
		errno = EINVAL;
		return false;
	}
	return true;
}

bool record_present(int fd)
{
	return sys_has_xattr(fd, DIOSHIM_XATTR_EOF);
}

bool record_remove(int fd)
{
	return SYS_TRY(sys_fremovexattr(fd, DIOSHIM_XATTR_EOF)) == 0 ||
	       errno == ENODATA;
}
