/* SPDX-License-Identifier: MIT */
/*
 * The dioshim command's parts (dioshim.c: run, recover, gc; status.c:
 * status).  Above every layer of the library.
 */
#ifndef DIOSHIM_CMD_H
#define DIOSHIM_CMD_H

#include "dioshim/layout.h"

#include <sys/types.h>

/* The file a segment's handle names, opened read-only on the filesystem
 * dev (path: where it was, to find that filesystem's mount); -1 with
 * errno (ESTALE: it was deleted), -2 when there is no handle or no way
 * to ask (open_by_handle_at needs CAP_DAC_READ_SEARCH). */
int open_handle(dev_t dev, const char *path, const struct dioshim_fh *fh);

/* dioshim status [--json] [-w SECS] [--] [FILE...]: argv after "status";
 * the exit status. */
int status(char **argv);

#endif
