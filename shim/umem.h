/* SPDX-License-Identifier: MIT */
/*
 * Reading what the application points at (an iocb, its array, an iovec
 * array) without faulting where the kernel would answer EFAULT.  The first
 * read of a page asks the kernel (one system call); later reads of a page
 * known readable are plain loads, until the address space loses pages
 * through a call the shim sees (munmap, mprotect, mmap MAP_FIXED, ...).
 */
#ifndef DIOSHIM_UMEM_H
#define DIOSHIM_UMEM_H

#include <stdbool.h>
#include <stddef.h>

/* Copy what can be read of src[0, n) to dst: the number of leading bytes
 * read, n when all of them were (whole pages: readability is a page's). */
size_t umem_read(void *dst, const void *src, size_t n);

/* Whether all of src[0, n) can be read (nothing copied). */
bool umem_readable(const void *src, size_t n);

/* Whether all of p[0, n) can be read and written (an iocb: the kernel
 * stores in it at submission). */
bool umem_writable(const void *p, size_t n);

/* The address space may have lost readable pages: forget them all. */
void umem_changed(void);

/* It may have lost those of [addr, addr + len): forget those. */
void umem_lost(const void *addr, size_t len);

/* In a fork child: MADV_DONTFORK and MADV_WIPEONFORK pages are gone, and
 * the parent's other threads with them. */
void umem_atfork_child(void);

/* Whether a madvise advice leaves every page of its range readable. */
bool umem_advice_keeps(int advice);

#endif
