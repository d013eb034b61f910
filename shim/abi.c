// SPDX-License-Identifier: MIT
/*
 * Kernel ABI probes (layer L0): what the running kernel can do that the
 * shim relies on.  Calls only L0: raw system calls (sys.h) and the log.
 */
#define _GNU_SOURCE
#include "abi.h"

#include "log.h"
#include "sys.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

bool io_kernel_ready(void)
{
	static int ready; /* 0 unknown, 1 yes, 2 no */
	struct iovec iov = { (void *)"x", 1 };
	int fd, r = __atomic_load_n(&ready, __ATOMIC_RELAXED), saved = errno;

	if (r)
		return r == 1;
	r = 2;
	fd = sys_memfd_create("dioshim-probe", 1u /* CLOEXEC */);
	if (fd >= 0) {
		if (sys_fcntl(fd, F_SETFL, O_APPEND) == 0 &&
		    sys_pwritev2(fd, &iov, 1, 1L, 0L, RWF_NOAPPEND) == 1 &&
		    sys_lseek(fd, 0, SEEK_END) == 2)
			r = 1;
		sys_close(fd);
	}
	if (r == 2)
		log_event(LOG_FALLBACK, NULL,
			  "kernel lacks RWF_NOAPPEND (Linux 6.9): passing "
			  "everything through");
	__atomic_store_n(&ready, r, __ATOMIC_RELAXED);
	errno = saved;
	return r == 1;
}
