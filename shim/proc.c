// SPDX-License-Identifier: MIT
/*
 * The process's life as the shim keeps books of it (proc.h): the fork
 * handlers of the fd table and the rings (handed to lib.c as its fork
 * hooks), leaving the files before an exec and at exit, and the order of
 * threads that exit at once.  L4: calls async and fdtable (L4), segment
 * and lib (L1), L0.
 */
#define _GNU_SOURCE
#include "proc.h"

#include "async.h"
#include "fdtable.h"
#include "lib.h"
#include "segment.h"
#include "sys.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

static void fork_child(void)
{
	async_atfork_child();
	fdtable_atfork_child();
	async_atfork_child_unpin();
}

static const struct lib_fork_hooks proc_fork_hooks = {
	.prepare = fdtable_atfork_prepare,
	.parent = fdtable_atfork_parent,
	.child = fork_child,
};
LIB_FORK_HOOKS(proc_fork_hooks);

/*
 * Another thread ends the process (proc_exit_claim): wait while it leaves
 * our files, a bounded job, and, when starting (the exit's atexit handlers
 * run first), a second for it to begin.  Then go on: with the files left
 * an exit_group of ours cuts nothing short, and a first thread that has
 * not begun in a second may be waiting for this very one (an atexit
 * handler that joins it), as glibc 2.36 lets it.
 */
static bool detach_wait(bool starting)
{
	static const struct timespec nap = { 0, 1000000 };
	int waited = 0;

	while (!__atomic_load_n(&lib_detached, __ATOMIC_ACQUIRE) &&
	       (__atomic_load_n(&exiting_tid, __ATOMIC_ACQUIRE) ||
		(starting && waited++ < 1000)))
		nanosleep(&nap, NULL);
	return __atomic_load_n(&lib_detached, __ATOMIC_ACQUIRE);
}

/* A process ends without closing its files: detach from every segment so
 * that the last one out trims the reserved tail (fio's jobs end in _exit). */
void proc_detach_all(void)
{
	int saved = errno, busy;
	pid_t none = 0, self = sys_gettid();

	/* A vfork child shares our memory: its _exit must not detach the
	 * parent, nor even mark it exiting for a moment (its threads would
	 * pass their appends through).  It is the only caller whose pid is
	 * not ours. */
	if (config.disable || io_busy || vfork_child_slow())
		return;
	/* One thread leaves the files.  Another that ends the process
	 * meanwhile (two threads failing at once, each calling _exit) waits
	 * until it has left them rather than end the process under it, half
	 * way through its cuts; the first thread coming back here (exit's
	 * _exit after the destructor, a signal handler) goes on. */
	if (!__atomic_compare_exchange_n(&exiting_tid, &none, self, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		if (none != self)
			detach_wait(false);
		return;
	}
	/* From here the other threads' calls wait (exec_wait). */
	__atomic_store_n(&lib_exiting, 1, __ATOMIC_SEQ_CST);
	busy = busy_enter();
	async_drain_all(true);
	fdtable_release_all();
	busy_exit(busy);
	__atomic_store_n(&lib_detached, 1, __ATOMIC_RELEASE);
	errno = saved;
}

/*
 * exit is not thread-safe in glibc 2.36: of two threads calling it at
 * once, the one that finds the handlers taken ends the process at once,
 * under the other's destructors — ours among them, half way through the
 * cuts of the reserved tails.  The first caller goes on; a later one
 * waits until the first has left the files (detach_wait).  The paths
 * that call exit inside libc are claimed at their start too: main's
 * return, and the err family.  (error() and argp's exits are not seen.)
 */
void proc_exit_claim(void)
{
	pid_t owner = 0, self;

	lib_ensure();
	if (config.disable || vfork_child_slow())
		return;
	self = sys_gettid();
	if (__atomic_compare_exchange_n(&exit_tid, &owner, self, false,
					__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST) ||
	    owner == self)
		return;
	/* The owner has not begun in a second: one waiter takes its place,
	 * the others wait for that one in turn. */
	while (!detach_wait(true))
		if (__atomic_compare_exchange_n(&exit_tid, &owner, self, false,
						__ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST))
			return;
}

/*
 * The new image is another program, maybe not under the shim (a cleared
 * LD_PRELOAD, a static binary): it keeps our descriptors but none of our
 * books, so every file is left first as an ending process leaves it — the
 * last user cuts the reserved tail and removes the record — and the new
 * image, if shimmed, attaches again on first use.  If the exec fails,
 * the files are attached again.
 */
bool proc_exec_prepare(void)
{
	int saved = errno, cancel, busy;

	if (!shim_on())
		return false;
	/* Holding the fd table and the file list through waits: no
	 * cancellation point may end this thread here. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	/* seq_cst: a writer announces itself in flight, then reads this
	 * (inflight_enter_fd); the release below reads the counts after. */
	__atomic_store_n(&segment_exec_pending, 1, __ATOMIC_SEQ_CST);
	busy = busy_enter();
	async_drain_all(false);
	fdtable_exec_prepare();
	busy_exit(busy);
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
	return true;
}

void proc_exec_failed(bool prepared)
{
	int saved = errno, cancel, busy;

	if (!prepared)
		return;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	busy = busy_enter();
	fdtable_exec_failed();
	busy_exit(busy);
	__atomic_store_n(&segment_exec_pending, 0, __ATOMIC_RELEASE);
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
}
