// SPDX-License-Identifier: MIT
/*
 * umem: what the kernel could read is read, what it could not is not,
 * to the byte; a page known readable is read without asking, until the
 * address space is said to have changed.
 */
#define _GNU_SOURCE
#include "umem.h"
#include "unit.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG 4096

static char *pages(int n)
{
	char *p = mmap(NULL, (size_t)n * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED);
	memset(p, 'a', (size_t)n * PG);
	return p;
}

/* Unmapped behind umem's back (a raw system call, no umem_changed). */
static void raw_unmap(void *p, size_t n)
{
	CHECK(syscall(SYS_munmap, p, n) == 0);
}

int main(void)
{
	char dst[3 * PG], *p;
	int fd, st;
	pid_t pid;

	/* Readable, and a bad pointer. */
	p = pages(2);
	CHECK(umem_read(dst, p + 100, 200) == 200 && dst[0] == 'a');
	CHECK(umem_read(dst, (void *)24, 8) == 0);
	CHECK(umem_read(dst, NULL, 0) == 0);

	/* The readable prefix, to the byte, across a page taken away. */
	p = pages(3);
	CHECK(mprotect(p + PG, PG, PROT_NONE) == 0);
	umem_changed();
	CHECK(umem_read(dst, p + PG - 40, 100) == 40);
	CHECK(umem_read(dst, p + PG + 8, 100) == 0);
	CHECK(umem_read(dst, p + 2 * PG, 100) == 100);

	/* Known readable: read without asking.  Taken away without a word,
	 * the read faults (in a child), which shows no system call was made;
	 * after umem_changed it is asked about again: 0. */
	p = pages(1);
	CHECK(umem_read(dst, p, 64) == 64);
	raw_unmap(p, PG);
	pid = fork();
	if (!pid) {
		umem_read(dst, p, 64);
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
	umem_changed();
	CHECK(umem_read(dst, p, 64) == 0);

	/* A mapped file cut short: past its end, no SIGBUS. */
	fd = memfd_create("umem", 0);
	CHECK(fd >= 0 && ftruncate(fd, 2 * PG) == 0);
	p = mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(p != MAP_FAILED);
	CHECK(umem_read(dst, p + PG - 8, 16) == 16);
	CHECK(ftruncate(fd, PG) == 0);
	umem_changed();
	CHECK(umem_read(dst, p + PG - 8, 16) == 8);

	/* Write-only pages can be read (x86: as the kernel reads them);
	 * read-only ones cannot be written. */
	p = pages(2);
	CHECK(mprotect(p, PG, PROT_WRITE) == 0 &&
	      mprotect(p + PG, PG, PROT_READ) == 0);
	umem_changed();
	CHECK(umem_readable(p, 64) && umem_writable(p, 64));
	CHECK(umem_readable(p + PG, 64) && !umem_writable(p + PG, 64));
	CHECK(umem_readable(p, 2 * PG) && !umem_writable(p, 2 * PG));
	/* Known readable, not yet known writable: asked. */
	p = pages(1);
	CHECK(umem_readable(p, 8));
	CHECK(mprotect(p, PG, PROT_READ) == 0);
	umem_changed();
	CHECK(!umem_writable(p, 8) && umem_readable(p, 8));

	/* The advice that keeps pages readable, and one that does not. */
	CHECK(umem_advice_keeps(MADV_DONTNEED));
	CHECK(umem_advice_keeps(MADV_POPULATE_WRITE));
	CHECK(!umem_advice_keeps(102)); /* MADV_GUARD_INSTALL */
	CHECK(!umem_advice_keeps(MADV_HWPOISON));
	return unit_result();
}
