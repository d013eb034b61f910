// SPDX-License-Identifier: MIT
/*
 * The wrappers of the address space (L5: the bare system call, then a
 * word to umem.c).
 */
#define _GNU_SOURCE
#include "wrap.h"

#include "sys.h"
#include "umem.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/uio.h>

/* ---- the address space ---------------------------------------------------
 *
 * Calls that can take readable pages away, seen so that the shim forgets
 * the pages it knows readable (umem.c).  Each is the bare system call, as
 * glibc's is; none needs the library set up (an allocator's mmap may come
 * before anything else, even from inside dlsym).
 */

/* Moved whatever the call answers: one that fails part way (ENOMEM over
 * a gap, a MAP_FIXED mmap refused after the old mapping went) may have
 * changed part of its range.  [addr, addr + len) when lost; all of the
 * address space when len is SIZE_MAX. */
static long mm_result(long r, bool lost, const void *addr, size_t len)
{
	if (lost && len == SIZE_MAX)
		umem_changed();
	else if (lost)
		umem_lost(addr, len);
	return r;
}

EXPORT int munmap(void *addr, size_t len)
{
	return (int)mm_result(sys_call(SYS_munmap, addr, len), true, addr, len);
}

/* The range a protection change reaches: PROT_GROWSDOWN and PROT_GROWSUP
 * carry it to the start or the end of the mapping (all of the address
 * space, for umem: the shim does not know where that is). */
static size_t prot_reach(int prot, size_t len)
{
	return prot & (PROT_GROWSDOWN | PROT_GROWSUP) ? SIZE_MAX : len;
}

EXPORT int mprotect(void *addr, size_t len, int prot)
{
	/* Unreadable, or unwritable (an iocb the kernel and the shim store
	 * in). */
	return (int)mm_result(sys_call(SYS_mprotect, addr, len, prot),
			      (prot & (PROT_READ | PROT_WRITE)) !=
				      (PROT_READ | PROT_WRITE),
			      addr, prot_reach(prot, len));
}

EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	/* A key may deny what the protection allows. */
	return (int)mm_result(sys_call(SYS_pkey_mprotect, addr, len, prot,
				      pkey), true, addr, prot_reach(prot, len));
}

#ifndef MADV_SOFT_OFFLINE
#define MADV_SOFT_OFFLINE 101
#endif
/* The range an advice reaches: poison, every mapping of the page,
 * wherever it is. */
static size_t advice_reach(int advice, size_t len)
{
	return advice == MADV_HWPOISON || advice == MADV_SOFT_OFFLINE ?
		       SIZE_MAX :
		       len;
}

EXPORT int madvise(void *addr, size_t len, int advice)
{
	return (int)mm_result(sys_call(SYS_madvise, addr, len, advice),
			      !umem_advice_keeps(advice), addr,
			      advice_reach(advice, len));
}

/* The range a mapping reaches: huge pages round the length up to their
 * size (MAP_HUGETLB, or a file on hugetlbfs: what a file's mapping
 * reaches, umem does not know). */
static size_t map_reach(int flags, size_t len)
{
	return (flags & MAP_HUGETLB) || !(flags & MAP_ANONYMOUS) ? SIZE_MAX
								 : len;
}

static void *mmap_common(void *addr, size_t len, int prot, int flags, int fd,
			 off64_t off)
{
	/* MAP_FIXED replaces what was there; MAP_FIXED_NOREPLACE does not. */
	return (void *)mm_result(sys_call(SYS_mmap, addr, len, prot, flags, fd,
					 off),
				 flags & MAP_FIXED, addr,
				 map_reach(flags, len));
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off)
{
	return mmap_common(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd,
		    off64_t off)
{
	return mmap_common(addr, len, prot, flags, fd, off);
}

/* As Debian's glibc 2.36: flags it does not know are EINVAL, and the new
 * address is read with MREMAP_FIXED or MREMAP_DONTUNMAP. */
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *to = NULL;

	if (flags & ~(MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP)) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) {
		va_list ap;

		va_start(ap, flags);
		to = va_arg(ap, void *);
		va_end(ap);
	}
	return (void *)mm_result(sys_call(SYS_mremap, old, old_len, new_len,
					 flags, to),
				 true, NULL, SIZE_MAX);
}

EXPORT int shmdt(const void *addr)
{
	return (int)mm_result(sys_call(SYS_shmdt, addr), true, NULL, SIZE_MAX);
}

/* SHM_REMAP maps over what was there (read-only, with SHM_RDONLY). */
EXPORT void *shmat(int id, const void *addr, int flags)
{
	return (void *)mm_result(sys_call(SYS_shmat, id, addr, flags),
				 flags & SHM_REMAP, NULL, SIZE_MAX);
}

/* madvise for a process named by a pidfd, this one perhaps: a guard or
 * another advice that takes pages away, wherever its ranges are. */
EXPORT ssize_t process_madvise(int pidfd, const struct iovec *iov, size_t n,
			       int advice, unsigned int flags)
{
	return (ssize_t)mm_result(sys_call(SYS_process_madvise, pidfd, iov, n,
					  advice, flags),
				  !umem_advice_keeps(advice), NULL, SIZE_MAX);
}

/* The heap cut by the program itself (glibc's malloc calls __sbrk, and
 * brk keeps glibc's own idea of the break: neither is seen, dioshim(7)). */
extern void *__sbrk(intptr_t inc);

EXPORT void *sbrk(intptr_t inc)
{
	return (void *)mm_result((long)__sbrk(inc), inc < 0, NULL, SIZE_MAX);
}
