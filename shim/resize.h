/* SPDX-License-Identifier: MIT */
/*
 * ftruncate and the fallocates of a descriptor, which move or may move
 * the size (L4): the shim's, a guest writer's counted, or the kernel's.
 */
#ifndef DIOSHIM_SIZE_H
#define DIOSHIM_SIZE_H

#include <sys/types.h>

enum size_op { SZ_TRUNCATE, SZ_FALLOCATE, SZ_POSIX_FALLOCATE };

int size_call(int fd, enum size_op op, int mode, off64_t off, off64_t len);

#endif
