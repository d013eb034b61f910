// SPDX-License-Identifier: MIT
/*
 * mmcalls: the address-space calls the shim wraps (to forget the pages
 * it knows readable, shim/umem.c), with bad arguments and good ones, one
 * line each: the return (or ok / MAP_FAILED for addresses, which differ
 * from run to run) and errno, which must be left alone on success.  Run
 * under the shim and outside it; the outputs must be the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/uio.h>
#include <unistd.h>

#define PG 4096

static void show(const char *what, long r)
{
	printf("%-28s = %ld errno=%s\n", what, r,
	       errno == 12345 ? "-" : strerrorname_np(errno));
}

static void show_map(const char *what, void *p)
{
	printf("%-28s = %s errno=%s\n", what, p == MAP_FAILED ? "MAP_FAILED" : "ok",
	       errno == 12345 ? "-" : strerrorname_np(errno));
}

#define CALL(what, expr) (errno = 12345, show(what, (long)(expr)))
#define MAP(what, expr) (errno = 12345, show_map(what, (expr)))

int main(void)
{
	char *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	void *q;

	if (p == MAP_FAILED)
		return 2;
	CALL("munmap len 0", munmap(p, 0));
	CALL("munmap unaligned", munmap(p + 1, PG));
	CALL("munmap kernel address", munmap((void *)-PG, PG));
	CALL("mprotect unaligned", mprotect(p + 1, PG, PROT_READ));
	CALL("mprotect bad prot", mprotect(p, PG, 0x100));
	CALL("mprotect ok", mprotect(p, PG, PROT_READ));
	CALL("pkey_mprotect bad key", pkey_mprotect(p, PG, PROT_READ, 999));
	CALL("madvise bad advice", madvise(p, PG, 9999));
	CALL("madvise unaligned", madvise(p + 1, PG, MADV_DONTNEED));
	CALL("madvise ok", madvise(p + PG, PG, MADV_DONTNEED));
	CALL("madvise unmapped", madvise((void *)PG, PG, MADV_WILLNEED));
	MAP("mmap len 0", mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0));
	MAP("mmap bad fd", mmap(NULL, PG, PROT_READ, MAP_PRIVATE, 999, 0));
	MAP("mmap unaligned offset",
	    mmap(NULL, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 1));
	MAP("mmap fixed unaligned",
	    mmap(p + 1, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		 -1, 0));
	MAP("mmap no type", mmap(NULL, PG, PROT_READ, MAP_ANONYMOUS, -1, 0));
	MAP("mmap fixed ok",
	    mmap(p + 2 * PG, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		 -1, 0));
	MAP("mmap64 bad fd", mmap64(NULL, PG, PROT_READ, MAP_PRIVATE, 999, 0));
	MAP("mremap unknown flag", mremap(p, PG, PG, 8));
	MAP("mremap unaligned", mremap(p + 1, PG, PG, 0));
	MAP("mremap new len 0", mremap(p, PG, 0, MREMAP_MAYMOVE));
	MAP("mremap fixed, no maymove",
	    mremap(p, PG, PG, MREMAP_FIXED, p + 3 * PG));
	q = mmap(NULL, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	MAP("mremap fixed ok",
	    mremap(p + 3 * PG, PG, PG, MREMAP_MAYMOVE | MREMAP_FIXED, q));
	CALL("shmdt not attached", shmdt(p));
	MAP("shmat bad id", shmat(-1, NULL, 0));
	MAP("shmat remap, no address", shmat(-1, NULL, SHM_REMAP));
	{
		struct iovec v = { p, PG };

		CALL("process_madvise bad pidfd",
		     process_madvise(999, &v, 1, MADV_WILLNEED, 0));
		CALL("process_madvise bad flags",
		     process_madvise(999, &v, 1, MADV_WILLNEED, 1));
	}
	CALL("sbrk(0) failed", sbrk(0) == (void *)-1);
	CALL("munmap ok", munmap(p, 3 * PG));
	return 0;
}
