/* SPDX-License-Identifier: MIT */
/*
 * dioshim public header: what a program or a script may rely on.
 *
 * dioshim needs no code in the programs it accelerates; this header names
 * the configuration it reads and the on-disk record it leaves, so that tools
 * can be written against them.
 */
#ifndef DIOSHIM_H
#define DIOSHIM_H

#define DIOSHIM_VERSION "0.1.0"

/* Some of the environment variables read once, when the library loads;
 * every one, with its default, is in dioshim(7) and `dioshim --help`. */
#define DIOSHIM_ENV_DISABLE "DIOSHIM_DISABLE" /* any value but 0: pass all */
#define DIOSHIM_ENV_LOG "DIOSHIM_LOG" /* a file path, or "stderr" */
#define DIOSHIM_ENV_RESERVE "DIOSHIM_RESERVE" /* first reservation chunk */
#define DIOSHIM_ENV_RESERVE_MAX "DIOSHIM_RESERVE_MAX" /* largest chunk */
#define DIOSHIM_ENV_FS "DIOSHIM_FS" /* e.g. "ext4,xfs" */
#define DIOSHIM_ENV_SHM_DIR "DIOSHIM_SHM_DIR" /* default /dev/shm */
#define DIOSHIM_ENV_SHM_MODE "DIOSHIM_SHM_MODE" /* ignored: a segment's
							* mode follows its
							* file's */

/* The xattr recording the logical EOF while a reservation exists. */
#define DIOSHIM_XATTR_EOF "user.dioshim.eof"

#endif /* DIOSHIM_H */
