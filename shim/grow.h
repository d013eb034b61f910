/* SPDX-License-Identifier: MIT */
/*
 * The calls that change a served file's size or blocks (grow.c):
 * ftruncate, fallocate in every mode, and the quiesce around the calls
 * the kernel makes behind the write path.  Layer L4, above fsync.c,
 * below io.c.
 */
#ifndef DIOSHIM_GROW_H
#define DIOSHIM_GROW_H

#include "fdtable.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

int io_ftruncate(struct ofd *o, int fd, off_t len);
/* posix: posix_fallocate's convention (returns the error number). */
int io_fallocate(struct ofd *o, int fd, int mode, off_t off, off_t len,
		 bool posix);

/*
 * A call the kernel makes on f's blocks and size behind the write path: a
 * copy or a splice into it, a clone, a dedupe or an exchange of ranges, a
 * fallocate that moves blocks.  io_quiesce drains f's writers (the
 * barrier, every process's) and cuts its reservation, so that the kernel
 * sees the size the application does; io_resume takes the size the call
 * left as the file's and lets the writers go.  False (nothing held): the
 * barrier could not be raised, the call goes as it is.
 */
struct quiesce {
	struct shim_file *f;
	int fd;
	bool raised, locked;
};
bool io_quiesce(struct shim_file *f, int fd, struct quiesce *q);
void io_resume(struct quiesce *q);

/* space_reclaim as inside any call of the shim (io.c's writes too): a
 * signal handler's write on this thread meanwhile passes through. */
bool io_reclaim(uint64_t dev);

#endif
