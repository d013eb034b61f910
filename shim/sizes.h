/* SPDX-License-Identifier: MIT */
/*
 * What a program is told of a served file's size (sizes.c): lseek's
 * SEEK_END, SEEK_DATA and SEEK_HOLE, and st_size (fstat and stat).
 * Layer L4, beside grow.c, below io.c.
 */
#ifndef DIOSHIM_SIZES_H
#define DIOSHIM_SIZES_H

#include "fdtable.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

off_t io_lseek(struct ofd *o, int fd, off_t off, int whence, bool reentrant);

/* The logical EOF, bounded by the size the kernel just reported. */
uint64_t io_eof(struct ofd *o, int fd, uint64_t kernel_size, bool reentrant);

/* stat(path) family: correct st_size if a segment serves the file. */
void io_fix_path_size(const char *path, int dirfd, int at_flags,
		      struct stat *st);

#endif
