// SPDX-License-Identifier: MIT
/*
 * The library's state (lib.h).  L1 shared state: calls L0 (real, config,
 * guard, sys, umem) and segment.c's exec flag (L1); the fork bookkeeping
 * of the layers above only through the tables in section dioshim_fork.
 */
#define _GNU_SOURCE
#include "lib.h"

#include "real.h"
#include "segment.h"
#include "sys.h"
#include "umem.h"

#include <errno.h>
#include <pthread.h>

int lib_ready;
int lib_exiting;
pid_t exiting_tid;
pid_t exit_tid;
int lib_detached;
pid_t lib_pid;
int dioshim_vforked __attribute__((used));
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

/* The fork hooks handed in (lib.h): the bounds of their section, which
 * the linker defines (and dioshim.map keeps out of the exports). */
extern const struct lib_fork_hooks *const __start_dioshim_fork[]
	__attribute__((weak, visibility("hidden")));
extern const struct lib_fork_hooks *const __stop_dioshim_fork[]
	__attribute__((weak, visibility("hidden")));

#define EACH_FORK_HOOKS(h)                                              \
	for (const struct lib_fork_hooks *const *h = __start_dioshim_fork; \
	     h < __stop_dioshim_fork; h++)

/* fork holds the table's lock from prepare to parent/child: a signal
 * handler's close meanwhile must not wait for it (forget_fd). */
static __thread int fork_busy __attribute__((tls_model("initial-exec")));

static void atfork_prepare(void)
{
	fork_busy = busy_enter();
	EACH_FORK_HOOKS(h)
		(*h)->prepare();
}

static void atfork_parent(void)
{
	EACH_FORK_HOOKS(h)
		(*h)->parent();
	busy_exit(fork_busy);
}

static void atfork_child(void)
{
	umem_atfork_child();
	__atomic_store_n(&lib_pid, sys_getpid(), __ATOMIC_RELAXED);
	EACH_FORK_HOOKS(h)
		(*h)->child();
	/* A child forked while another thread exits (an atexit handler's
	 * fork) has its own exit to make. */
	__atomic_store_n(&exit_tid, 0, __ATOMIC_RELAXED);
	busy_exit(fork_busy);
}

static void lib_init_once(void)
{
	/* May run inside the first wrapper called: that call's errno is the
	 * application's. */
	int saved = errno;

	__atomic_store_n(&lib_pid, sys_getpid(), __ATOMIC_RELAXED);
	real_resolve();
	config_load();
	if (!config.disable)
		pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	__atomic_store_n(&lib_ready, 1, __ATOMIC_RELEASE);
	errno = saved;
}

void lib_start(void)
{
	pthread_once(&lib_once, lib_init_once);
}

__attribute__((noinline)) bool vfork_child_slow(void)
{
	pid_t me = __atomic_load_n(&lib_pid, __ATOMIC_RELAXED);

	return me && sys_getpid() != me;
}

/* Another thread is leaving our files for an exec: an I/O call waits
 * until it is done — the exec then ends this thread, or failed and the
 * files are ours again — rather than pass through beside a reservation.
 * Another thread is leaving them at exit: the call waits for the end of
 * the process (exit_group ends this thread), rather than pass through
 * and see, or write past, a reserved tail about to be cut. */
__attribute__((noinline)) bool exec_wait(void)
{
	segment_exec_wait();
	if (__atomic_load_n(&lib_exiting, __ATOMIC_RELAXED) &&
	    !config.disable &&
	    sys_gettid() != __atomic_load_n(&exiting_tid, __ATOMIC_RELAXED))
		sys_wait_for_the_end();
	return !config.disable && !__atomic_load_n(&lib_exiting,
						  __ATOMIC_RELAXED);
}

bool shim_active(void)
{
	/* As served_io: not beside a thread leaving the files at exit
	 * (a submission passed through now would write in the reserved
	 * tail about to be cut, and be cut with it). */
	if (__builtin_expect(__atomic_load_n(&lib_exiting, __ATOMIC_RELAXED),
			     0) &&
	    !io_busy)
		exec_wait();
	return shim_on();
}

bool shim_nested(void)
{
	lib_ensure();
	return io_busy && !config.disable &&
	       !__atomic_load_n(&lib_exiting, __ATOMIC_RELAXED) &&
	       !in_vfork_child();
}
