/* SPDX-License-Identifier: MIT */
/*
 * Group commit (DESIGN.md 2.7): concurrent fsync/fdatasync calls on one
 * file, from any process, share one sync.  A caller returns only after a
 * sync that started after its call has completed; every caller a failed
 * sync covered gets its error.
 */
#ifndef DIOSHIM_COMMIT_H
#define DIOSHIM_COMMIT_H

#include "segment.h"

#include <stdbool.h>

/* Sync f through fd (fsync, or fdatasync with datasync), sharing the sync
 * with concurrent callers.  Returns 0 or -1 with errno, like fsync. */
int commit_sync(struct shim_file *f, int fd, bool datasync);

#endif
