/* SPDX-License-Identifier: MIT */
/*
 * Kernel ABI helpers (layer L0): the per-call write flags the shim reads
 * and writes (RWF_*), the kernel's rule for whether a write appends, and
 * whether the kernel can write at an offset through an O_APPEND
 * descriptor.  Calls only L0 (sys.h, log.h).
 */
#ifndef DIOSHIM_ABI_H
#define DIOSHIM_ABI_H

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

/* The kernel's values (include/uapi/linux/fs.h), where libc's headers
 * are older. */
#ifndef RWF_APPEND
#define RWF_APPEND 0x00000010
#endif
#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x00000020
#endif

/* Whether a write through a description opened with flags, with these
 * RWF flags, appends: the kernel's rule (RWF_NOAPPEND wins). */
static inline bool write_appends(uint32_t flags, int rwf)
{
	return ((flags & O_APPEND) || (rwf & RWF_APPEND)) &&
	       !(rwf & RWF_NOAPPEND);
}

/* The kernel can write at an offset through an O_APPEND descriptor
 * (RWF_NOAPPEND, Linux 6.9): without it the shim serves nothing.  Probed
 * once, on a memfd. */
bool io_kernel_ready(void);

#endif
