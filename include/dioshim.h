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

/* Environment variables read once, when the library loads. */
#define DIOSHIM_ENV_DISABLE "DIOSHIM_DISABLE" /* any value but 0: pass all */
#define DIOSHIM_ENV_LOG "DIOSHIM_LOG" /* a file path, or "stderr" */
#define DIOSHIM_ENV_RESERVE "DIOSHIM_RESERVE" /* first reservation chunk */
#define DIOSHIM_ENV_RESERVE_MAX "DIOSHIM_RESERVE_MAX" /* largest chunk */
#define DIOSHIM_ENV_FS "DIOSHIM_FS" /* e.g. "ext4,xfs" */
#define DIOSHIM_ENV_SHM_DIR "DIOSHIM_SHM_DIR" /* default /dev/shm */
#define DIOSHIM_ENV_SHM_MODE "DIOSHIM_SHM_MODE" /* 0600 or 0660 */

/* The xattr recording the logical EOF while a reservation exists. */
#define DIOSHIM_XATTR_EOF "user.dioshim.eof"

#endif /* DIOSHIM_H */
