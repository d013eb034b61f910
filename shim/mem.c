// SPDX-License-Identifier: MIT
/*
 * Memory for the shim's own objects, from mmap'd arenas (mem.h says why
 * not malloc).  Layer L0: calls only the kernel (mmap) and libc.
 */
#define _GNU_SOURCE
#include "mem.h"
#include "lockrank.h"
#include "sys.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#define ARENA_SIZE (256u << 10)

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static char *arena_next, *arena_end;

void *mem_alloc(size_t size)
{
	void *p = NULL;

	size = (size + 63) & ~(size_t)63;
	if (size > ARENA_SIZE) {
		p = sys_mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		return p == MAP_FAILED ? NULL : p;
	}
	rank_lock(&mem_lock, LOCK_MEM);
	if ((size_t)(arena_end - arena_next) < size) {
		char *a = sys_mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (a != MAP_FAILED) {
			arena_next = a;
			arena_end = a + ARENA_SIZE;
		}
	}
	if ((size_t)(arena_end - arena_next) >= size) {
		p = arena_next;
		arena_next += size;
	}
	rank_unlock(&mem_lock, LOCK_MEM);
	return p;
}

void mem_atfork_prepare(void)
{
	rank_lock(&mem_lock, LOCK_MEM);
}

void mem_atfork_release(void)
{
	rank_unlock(&mem_lock, LOCK_MEM);
}
