/* SPDX-License-Identifier: MIT */
/*
 * The process's life as the shim keeps books of it (L4): fork, exec and
 * exit.  The wrappers of wrap_proc.c call here.
 */
#ifndef DIOSHIM_PROC_H
#define DIOSHIM_PROC_H

#include <stdbool.h>

/* Before an exec: every file left as an ending process leaves it; true if
 * done (the shim acts), to be undone by proc_exec_failed if the exec
 * fails. */
bool proc_exec_prepare(void);
void proc_exec_failed(bool prepared);
/* The process ends without closing its files: detach from every segment
 * so that the last one out trims the reserved tail. */
void proc_detach_all(void);
/* exit and the calls that make one: the first caller goes on, a later
 * one waits until the first has left the files. */
void proc_exit_claim(void);

#endif
