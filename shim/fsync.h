/* SPDX-License-Identifier: MIT */
/*
 * The sync path of a served file (fsync.c): fsync and fdatasync, keeping
 * the EOF record able to find the size being made durable.  Layer L4, the
 * lowest of the I/O path files.
 */
#ifndef DIOSHIM_FSYNC_H
#define DIOSHIM_FSYNC_H

#include "fdtable.h"

#include <stdbool.h>

/* fsync / fdatasync: keeps the EOF record able to find the size being
 * made durable, then syncs (shared with concurrent callers when group
 * commit is on). */
int io_fsync(struct ofd *o, int fd, bool datasync);

/* f synced through fd as the program's fsync (datasync: fdatasync) would
 * be; for grow.c too, which makes a growth durable (a sync file). */
int fsync_file(struct shim_file *f, int fd, bool datasync);

#endif
