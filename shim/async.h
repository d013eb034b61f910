/* SPDX-License-Identifier: MIT */
/*
 * Asynchronous writes (libaio, liburing) as the rest of the shim sees
 * them: writes queued for an accelerated fd get the reservation, prefill
 * and O_APPEND rules before the kernel sees them (batch.c, aio.c,
 * uring.c), and move the logical EOF when their completion appears in the
 * completion ring (ring.c, which defines what this header declares).
 * Layer L4, below the I/O paths: io.c reads the rings through
 * async_settle.
 */
#ifndef DIOSHIM_ASYNC_H
#define DIOSHIM_ASYNC_H

#include <stdatomic.h>
#include <stdbool.h>

/* Asynchronous writes submitted and not yet seen complete, process-wide. */
extern _Atomic unsigned async_pending;

void async_poll_slow(void);

/*
 * Before answering a size or reading: apply every completion the kernel
 * has posted, so that an application which saw one (a CQE read inline,
 * an eventfd) gets the size the kernel alone would give.  One load when
 * nothing is in flight.
 */
static inline void async_settle(void)
{
	if (__builtin_expect(atomic_load_explicit(&async_pending,
						  memory_order_acquire) != 0,
			     0))
		async_poll_slow();
}

/* The process is ending: wait for its writes in flight, apply them. */
void async_drain_all(bool for_good);

/* After fork, in the child: the rings and their writes are the parent's. */
void async_atfork_child(void);
/* Then, once the segment code is the child's too: their pins go. */
void async_atfork_child_unpin(void);

#endif
