/* SPDX-License-Identifier: MIT */
/*
 * Whether a call is the shim's (L4): the checks every wrapper makes on an
 * fd, their fast halves static inline (the wrappers' fast path, measured:
 * bench/ab.sh), their slow halves in serve.c.  May call L4 fdtable, L1
 * lib and segment membership, L0.
 */
#ifndef DIOSHIM_SERVE_H
#define DIOSHIM_SERVE_H

#include "fdtable.h"
#include "lib.h"

#include <errno.h>
#include <stdbool.h>

struct ofd *served_slow(int fd);
struct ofd *served_reentrant(int fd, bool *reentrant);
/* An O_APPEND descriptor of a file the shim keeps exact, or NULL. */
struct shim_file *exact_appender(int fd);
/* A guest writer's description (fdtable.c), from a thread not inside
 * the shim. */
struct ofd *guest_writer(int fd);
/* The ofd whose rules apply to fd (NULL: pass through), called from
 * inside the shim (io_busy set): for io.c and async.c. */
struct ofd *shim_served(int fd);

/* The ofd whose rules apply to fd, or NULL to pass through.  The calls
 * the shim does not serve — most calls of most programs — cost the loads
 * of shim_on() and of the fd's entry. */
static inline struct ofd *served(int fd)
{
	if (!shim_on() || fdtable_surely_pass(fd))
		return NULL;
	return served_slow(fd);
}

/*
 * The reads' and writes' first look: fd is surely the kernel's alone, as
 * every branch of served_io would find too — re-entrant (nothing
 * attached), exiting, disabled or in a vfork child.  Not while another
 * thread leaves our files for an exec: the hint may then say no segment
 * for one that comes back if the exec fails (exec_wait).  True only for
 * an entry the shim made, so the real functions are resolved.
 */
static inline __attribute__((always_inline)) bool io_surely_pass(int fd,
							  bool write)
{
	/* A number past the table's reach goes the long way: the shim may
	 * not be set up yet (a call before its constructor), and only an
	 * entry made since says so. */
	return (unsigned)fd < FDT_MAX &&
	       !__atomic_load_n(&segment_exec_pending, __ATOMIC_RELAXED) &&
	       (write ? fdtable_quiet(fd) : fdtable_surely_pass(fd));
}

/*
 * served() for reads, writes and seeks, which must keep the shim's rules
 * even in a signal handler that interrupted this thread inside the shim
 * (an append passed through would land past the reserved tail and be cut
 * with it).  Then only an fd already attached is served, *reentrant says
 * so, and the call must take no lock (served_reentrant).
 */
static inline struct ofd *served_io(int fd, bool *reentrant)
{
	*reentrant = false;
	if (io_surely_pass(fd, false))
		return NULL;
	lib_ensure();
	if (__builtin_expect(config.disable |
				     __atomic_load_n(&lib_exiting,
						     __ATOMIC_RELAXED) |
				     __atomic_load_n(&segment_exec_pending,
						     __ATOMIC_RELAXED),
			     0) &&
	    (io_busy || !exec_wait()))
		return NULL;
	if (__builtin_expect(io_busy, 0))
		return served_reentrant(fd, reentrant);
	return served_slow(fd);
}

/* Run table bookkeeping with the shim marked busy and errno kept. */
#define BOOKKEEP(stmt)                                  \
	do {                                            \
		if (shim_on()) {                        \
			int saved_ = errno;             \
			int busy_ = busy_enter();       \
			stmt;                           \
			busy_exit(busy_);               \
			errno = saved_;                 \
		}                                       \
	} while (0)

#endif
