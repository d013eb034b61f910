/* SPDX-License-Identifier: MIT */
/*
 * The re-entry guard (L0 platform; calls nothing of the shim's).
 *
 * io_busy is set while this thread runs shim code that may hold a lock:
 * a wrapper entered meanwhile (from a signal handler, or a library's call
 * back into its own wrapped functions) passes its call through.  It is
 * restored, never cleared, on the way out: a signal handler's call must
 * leave the interrupted shim code marked busy.
 */
#ifndef DIOSHIM_GUARD_H
#define DIOSHIM_GUARD_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

extern __thread int io_busy __attribute__((tls_model("initial-exec")));

/* Mark this thread inside the shim; returns the mark to restore. */
static inline int busy_enter(void)
{
	int busy = io_busy;

	io_busy = 1;
	return busy;
}

static inline void busy_exit(int busy)
{
	io_busy = busy;
}

/* Around the shim's own work for a call: this thread marked inside the
 * shim (a signal handler's call meanwhile takes no lock and goes as it
 * is) and not cancellable (a cancel cannot leave a count or a lock up). */
struct guard {
	int cancel_state;
	int saved_errno;
	int busy;
};

/* cancel_point: the call is a cancellation point in glibc (read, write,
 * fsync, fallocate...), so a cancel pending at entry acts here, as it
 * would in the real call; lseek, ftruncate and posix_fallocate are not. */
static inline void guard_enter(struct guard *g, bool cancel_point)
{
	g->saved_errno = errno;
	if (cancel_point)
		pthread_testcancel();
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &g->cancel_state);
	g->busy = busy_enter();
}

/* Leave with the call's own errno on failure, the caller's on success. */
static inline void guard_exit(struct guard *g, ssize_t ret, int err)
{
	busy_exit(g->busy);
	pthread_setcancelstate(g->cancel_state, NULL);
	errno = ret < 0 ? err : g->saved_errno;
}

#endif
