/* SPDX-License-Identifier: MIT */
/*
 * The EOF record on the file itself: the xattr user.dioshim.eof,
 * "v1 EOF PHYS" (recover.h says what it is for).  Layer L1 (shared state:
 * the one word of the shim the file carries), above L0 only.
 */
#ifndef DIOSHIM_RECORD_H
#define DIOSHIM_RECORD_H

#include <stdbool.h>
#include <stdint.h>

/* Write, read, remove the record (raw syscalls; errno on failure). */
bool record_write(int fd, uint64_t eof, uint64_t phys);
bool record_read(int fd, uint64_t *eof, uint64_t *phys);
bool record_remove(int fd);
/* Whether fd's file carries a record (one system call, nothing read). */
bool record_present(int fd);

#endif
