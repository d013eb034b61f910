// SPDX-License-Identifier: MIT
/*
 * umem: what the kernel could read is read, what it could not is not,
 * to the byte; a page known readable is read without asking, until the
 * address space is said to have changed.
 */
#define _GNU_SOURCE
#include "umem.h"
#include "unit.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
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

/* Whether reading p faults: known readable, it is read without asking
 * the kernel (in a child, which shows it). */
static bool read_faults(const char *p)
{
	char dst[64];
	pid_t pid = fork();
	int st;

	if (!pid) {
		umem_read(dst, p, sizeof(dst));
		_exit(0);
	}
	CHECK(waitpid(pid, &st, 0) == pid);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
}

/* Other threads logging ranges far from the page under test, all the
 * time: a loss of that page must never be missed (the log wrapped, an
 * entry rewritten while read, or the log busy). */
static atomic_bool noise_stop;

static void *noise(void *arg)
{
	char *far = arg;

	while (!atomic_load(&noise_stop))
		umem_lost(far, PG);
	return NULL;
}

static void lost_under_noise(void)
{
	pthread_t t[3];
	char dst[64], *far = pages(1), *p;
	int i;

	for (i = 0; i < 3; i++)
		CHECK(pthread_create(&t[i], NULL, noise, far) == 0);
	for (i = 0; i < 2000; i++) {
		p = pages(1);
		if (umem_read(dst, p, 64) != 64) {
			CHECK(!"a mapped page read as unreadable");
			break;
		}
		raw_unmap(p, PG);
		umem_lost(p, PG);
		if (umem_read(dst, p, 64) != 0) {
			CHECK(!"a page unmapped and logged read as readable");
			break;
		}
	}
	atomic_store(&noise_stop, true);
	for (i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
}

/* A fork while another thread writes the log: the child's log works
 * (a range lost forgets only its pages) once umem_atfork_child ran. */
static void fork_mid_log(void)
{
	pthread_t t;
	char *far = pages(1);
	int i, st, bad = 0;
	pid_t pid;

	atomic_store(&noise_stop, false);
	CHECK(pthread_create(&t, NULL, noise, far) == 0);
	for (i = 0; i < 50; i++) {
		pid = fork();
		if (!pid) {
			char dst[64], *p;

			umem_atfork_child();
			p = pages(2);
			if (umem_read(dst, p, 64) != 64)
				_exit(2);
			raw_unmap(p, 2 * PG);
			umem_lost(p + PG, PG);
			_exit(read_faults(p) ? 0 : 1);
		}
		CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
		bad += !WIFEXITED(st) || WEXITSTATUS(st);
	}
	atomic_store(&noise_stop, true);
	pthread_join(t, NULL);
	CHECK(bad == 0);
}

int main(void)
{
	char dst[3 * PG], *p;
	int fd, st, i;
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

	/* A range logged lost: only its pages are asked about again.  One
	 * out of it, taken away without a word, still reads without asking
	 * (it faults); one in it answers 0. */
	p = pages(3);
	CHECK(umem_read(dst, p, 64) == 64 && umem_read(dst, p + 2 * PG, 64) == 64);
	raw_unmap(p, PG);
	raw_unmap(p + 2 * PG, PG);
	umem_lost(p + 2 * PG, PG);
	CHECK(read_faults(p));
	CHECK(umem_read(dst, p + 2 * PG, 64) == 0);
	/* A range of many pages (searched for among all the slots): its
	 * pages forgotten, one past it not. */
	p = pages(102);
	CHECK(umem_read(dst, p + 50 * PG, 64) == 64 &&
	      umem_read(dst, p + 101 * PG, 64) == 64);
	raw_unmap(p, 102 * PG);
	umem_lost(p, 101 * PG);
	CHECK(read_faults(p + 101 * PG));
	CHECK(umem_read(dst, p + 50 * PG, 64) == 0);
	/* The last page of a range whose length is not whole pages, and a
	 * range to the top of the address space. */
	p = pages(2);
	CHECK(umem_read(dst, p + PG, 64) == 64);
	raw_unmap(p + PG, PG);
	umem_lost(p, PG + 1);
	CHECK(umem_read(dst, p + PG, 64) == 0);
	p = pages(1);
	CHECK(umem_read(dst, p, 64) == 64);
	raw_unmap(p, PG);
	umem_lost(p, SIZE_MAX);
	CHECK(umem_read(dst, p, 64) == 0);
	/* More ranges logged than a thread looks through: it forgets all. */
	p = pages(1);
	CHECK(umem_read(dst, p, 64) == 64);
	raw_unmap(p, PG);
	for (i = 0; i < 100; i++)
		umem_lost((void *)PG, PG);
	CHECK(umem_read(dst, p, 64) == 0);
	/* A change without a range (fork, a truncate): all. */
	p = pages(1);
	CHECK(umem_read(dst, p, 64) == 64);
	raw_unmap(p, PG);
	umem_lost((void *)PG, PG);
	umem_changed();
	umem_lost((void *)PG, PG);
	CHECK(umem_read(dst, p, 64) == 0);
	lost_under_noise();
	fork_mid_log();

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
