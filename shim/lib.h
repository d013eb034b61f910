/* SPDX-License-Identifier: MIT */
/*
 * The library's state (L1 shared state): set up once, whether this
 * process is exiting or a vfork child, and the checks every wrapper makes
 * first (static inline: they are the wrappers' fast path).  May call L0
 * (real, config, guard, sys, umem) and L1 (segment's exec flag); the fork
 * bookkeeping of the layers above is reached through the fork hooks they
 * hand in (struct lib_fork_hooks).
 */
#ifndef DIOSHIM_LIB_H
#define DIOSHIM_LIB_H

#include "config.h"
#include "guard.h"

#include <stdbool.h>
#include <sys/types.h>

extern int lib_ready;
extern int lib_exiting;
extern pid_t exiting_tid; /* the thread that leaves the files, at exit */
extern pid_t exit_tid;    /* the thread that called exit first */
extern int lib_detached;  /* that thread has left the files */
/* Our pid, as of the load or the last fork: a vfork child sees its
 * parent's here (and computes nothing of its own into our memory). */
extern pid_t lib_pid;
/* A vfork happened (wrap_proc.c's vfork, _Fork): from then on, the calls
 * that keep books compare the caller's pid with ours. */
extern int dioshim_vforked;

/*
 * What the layers above do around a fork, in the order the handlers run:
 * prepare before, parent after in the parent, child after in the child
 * (after umem.c forgot its pages and lib_pid is the child's).  A table is
 * handed in by being put in the section dioshim_fork (LIB_FORK_HOOKS), so
 * that it is there before any wrapper runs, constructors included.
 */
struct lib_fork_hooks {
	void (*prepare)(void);
	void (*parent)(void);
	void (*child)(void);
};
#define LIB_FORK_HOOKS(table)                                             \
	static const struct lib_fork_hooks *const lib_fork_hooks_##table  \
		__attribute__((used, section("dioshim_fork"))) = &(table)

/* Set the library up: pthread_once, from any thread, at any time. */
void lib_start(void);

static inline void lib_ensure(void)
{
	if (__builtin_expect(!__atomic_load_n(&lib_ready, __ATOMIC_ACQUIRE), 0))
		lib_start();
}

/* Whether the caller's pid is not ours (a vfork child's): a system call. */
bool vfork_child_slow(void);

/* Whether this is a vfork child running in its parent's memory. */
static inline bool in_vfork_child(void)
{
	return __builtin_expect(
		       __atomic_load_n(&dioshim_vforked, __ATOMIC_RELAXED), 0) &&
	       vfork_child_slow();
}

/* Whether wrappers act at all right now. */
static inline bool shim_on(void)
{
	lib_ensure();
	return !config.disable && !io_busy &&
	       !__atomic_load_n(&lib_exiting, __ATOMIC_RELAXED) &&
	       !in_vfork_child();
}

/* Another thread is leaving our files for an exec or at exit: wait (see
 * lib.c); whether the shim acts after it. */
bool exec_wait(void);

/* Whether wrappers act at all right now, for async.c's wrappers: as
 * shim_on, after waiting out a thread leaving the files at exit. */
bool shim_active(void);
/* Whether this call came while this thread runs the shim's own code (a
 * signal handler's, or a library's call back into its own wrapped
 * functions): it may take none of the shim's locks. */
bool shim_nested(void);

#endif
