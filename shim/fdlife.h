/* SPDX-License-Identifier: MIT */
/*
 * A descriptor's life as the wrappers of wrap_fd.c hand it over (L4):
 * opened, forgotten before its close, a range closed around the shim's
 * lifelines, a number dup'ed over.
 */
#ifndef DIOSHIM_FDLIFE_H
#define DIOSHIM_FDLIFE_H

#include <stdbool.h>
#include <sys/types.h>

/* open/openat/creat of every flavour, by the shim or the kernel. */
int fdlife_open(int dirfd, const char *path, int flags, mode_t mode);
/* A descriptor about to go away (close, dup2 over it). */
void fdlife_forget(int fd);
/* Close [lo, hi] up to its last lifeline, around them (see fdlife.c). */
long fdlife_close_below_lifelines(unsigned int lo, unsigned int hi,
				  int flags, bool one_by_one);
int fdlife_close_range_around(unsigned int lo, unsigned int hi, int flags);
/* dup2/dup3 over newfd: our close of it, while it is still open. */
void fdlife_dup_over(int oldfd, int newfd);

#endif
