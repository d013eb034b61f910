/* SPDX-License-Identifier: MIT */
/*
 * The asynchronous writes in flight and the completion rings they finish
 * on (ring.c), as the files above it see them: batch.c prepares writes
 * onto a ring, aio.c and uring.c submit them, uring_files.c keeps a
 * ring's registered files.  Layer L4, below the I/O paths (io.c reads
 * the rings through async.h's async_settle).  Everything here is under
 * async_lock unless it says otherwise.
 */
#ifndef DIOSHIM_RING_H
#define DIOSHIM_RING_H

#include "async.h"
#include "fdtable.h"
#include "umem.h"
#include "wtx.h"

/* libaio.h has an inline io_fsync of its own; io.h's is the shim's. */
#define io_fsync libaio_io_fsync
#include <libaio.h>
#undef io_fsync
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* A queued write: its transaction, settled when its completion is
 * reaped. */
struct aop {
	struct aop *next;
	struct shim_file *f; /* pinned (a reference) until applied */
	uint64_t key; /* iocb address, or user_data */
	struct wtx t;
	/* An io_uring entry's: the entry, its fields before the shim
	 * rewrote them, and the batch that prepared it (uring_leftovers) */
	struct io_uring_sqe *sqe;
	uint64_t app_off;
	uint32_t app_flags, app_len;
	uint64_t batch;
};

enum ring_kind { RING_AIO, RING_URING };

/*
 * What the shim reads of an io_uring outside a call that names it: the
 * kernel's completion queue, mapped until io_uring_queue_exit unmaps it,
 * as the program's struct io_uring pointed at it when last seen.  The
 * struct itself may be gone by then: a program may free it without
 * io_uring_queue_exit (a ring on the stack of a thread that ended).
 */
struct cq_view {
	unsigned *khead, *ktail;
	struct io_uring_cqe *cqes;
	unsigned mask, entries, flags, features;
	int ring_fd;
};

struct aring {
	struct aring *next;
	enum ring_kind kind;
	uintptr_t handle; /* io_context_t, or struct io_uring * */
	struct cq_view cq; /* io_uring */
	unsigned cursor; /* next completion to look at */
	struct aop *ops, **ops_last; /* in submission order */
	unsigned nops;
	int *files; /* io_uring registered files: index -> fd, -1 */
	unsigned nfiles;
	/* Entries the kernel left queued (it stopped at a refused one:
	 * no IORING_SETUP_SUBMIT_ALL), their preparation undone: the next
	 * submission prepares them again, from the kernel's head. */
	bool leftovers;
};

/* The kernel's aio ring, mapped at the io_context_t's address
 * (fs/aio.c): completions are io_events[head..tail) modulo nr. */
struct aio_ring_hdr {
	unsigned id, nr, head, tail;
	unsigned magic, compat_features, incompat_features, header_length;
	struct io_event io_events[];
};

#define AIO_RING_MAGIC 0xa10a10a1

/* This process's rings, their ops, the deferred appends. */
extern pthread_mutex_t async_lock;

/* Copy n bytes the application pointed at, or say they are not all there
 * (the kernel would answer EFAULT: let it). */
static inline bool copy_in(void *dst, const void *src, size_t n)
{
	return umem_read(dst, src, n) == n;
}

/* Under async_lock: the ring's record, made with the cursor at the
 * kernel's tail; NULL if it is none of ours or no memory. */
struct aring *ring_get(enum ring_kind kind, uintptr_t handle);
/* Under async_lock: the ring's record if there is one. */
struct aring *ring_find(enum ring_kind kind, uintptr_t handle);
/* Read r's completions from the cursor to the kernel's tail. */
void ring_scan(struct aring *r);
/* The ring is going away (io_destroy, io_uring_queue_exit): its writes
 * in flight applied first.  Takes async_lock. */
void ring_drop(enum ring_kind kind, uintptr_t handle);
/* Take async_lock to enter writes (waits out an exec, and the end). */
void lock_to_submit(void);

/* An op, from the free list or new; NULL without memory. */
struct aop *aop_new(void);
/* At least n ops on the free list (false: no memory). */
bool aop_reserve(unsigned n);
/* a's file, pinned while a is in flight. */
void aop_pin(struct aop *a, struct shim_file *f);
/* a at the end of r's list, counted in async_pending. */
void aop_queue(struct aring *r, struct aop *a);
/* a out of r's list (prev: the op before it, or NULL). */
void aop_unlink(struct aring *r, struct aop *prev, struct aop *a);
/* a's transaction settled with res, a given back, no longer pending. */
void aop_finish(struct aop *a, int64_t res);
/* The result of a as if it completed whole. */
int64_t aop_whole(const struct aop *a);

#endif
