/* SPDX-License-Identifier: MIT */
/*
 * Transfers (L4): copy_file_range, sendfile and splice, and the clone,
 * dedupe and exchange ioctls, with the files they change held around the
 * kernel's call (xfer.c says how).  The wrappers of wrap_xfer.c call here.
 */
#ifndef DIOSHIM_XFER_H
#define DIOSHIM_XFER_H

#include <stdbool.h>
#include <sys/types.h>

/* A copy of len bytes from in to out inside the kernel (copy_file_range,
 * sendfile, splice: which, and how, is call's to say). */
enum xfer_call { X_COPY, X_SENDFILE, X_SENDFILE64, X_SPLICE };

ssize_t xfer(enum xfer_call c, int in, void *off_in, int out, void *off_out,
	     size_t len, unsigned flags);

/* Whether an ioctl request moves blocks or sizes (clone, dedupe, XFS's
 * exchange and commit of ranges): the kernel reads it as 32 bits. */
bool blocks_request(unsigned int req);
/* Such a request on fd (req as 32 bits, raw as the caller gave it): every
 * file it names held. */
int blocks_call(int fd, unsigned int req, unsigned long raw, void *arg);

#endif
