/* SPDX-License-Identifier: MIT */
/*
 * Preparing a batch of queued requests (batch.c) for aio.c and uring.c:
 * the files a submission holds, and what a queued write, read or sync
 * becomes before the kernel sees it.  Layer L4, above ring.c, below the
 * submitters.
 */
#ifndef DIOSHIM_BATCH_H
#define DIOSHIM_BATCH_H

#include "ring.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

/*
 * A batch holds, per file it writes, the in-flight count (a size change
 * waits for the submission) and ext_lock if a write must go exact.  Most
 * batches write a file or two: those are held in the caller's frame,
 * which stays small (each page of stack a request touches is a TLB miss
 * after the system call, hot.c).  A wider batch moves to a spare array,
 * twice as large each time, taken under async_lock and given back at
 * its end: a submission may name any number of files, and a write the
 * batch could not hold would go to the kernel untracked.
 */
#define BATCH_INLINE 4
#define SPARE_CLASSES 12 /* 16 << 11: a ring's most entries, 32768 */

struct held {
	struct shim_file *f;
	struct dioshim_shard *sh;
	int fd;
	bool exact; /* ext_lock held: reserve_exact_done after submit */
};

struct spare {
	struct spare *next; /* on the free list */
	int cls; /* holds 16 << cls */
	struct held h[];
};

struct batch {
	struct held *h; /* inl, or spare->h */
	struct spare *spare;
	int n, cap;
	bool full; /* no memory to grow: libaio submits what it has */
	int saved_errno, busy;
	uint64_t seq; /* its ops' aop.batch (io_uring) */
	struct held inl[BATCH_INLINE];
};

/* What a queued write asks for: its length, and the OR of its buffers'
 * addresses and of their lengths, empty ones left out (wtx_refused). */
struct span {
	uint64_t len, base_or, len_or;
};

/* The program's arrays (iocb pointers, iovecs) are read in chunks of
 * this many: a few hundred bytes of stack (hot.c). */
#define COPY_CHUNK 16

void batch_begin(struct batch *b);
/* Room for twice as many files.  Under async_lock. */
bool batch_grow(struct batch *b);
/* Let go of the files the batch holds. */
void batch_release(struct batch *b);
void batch_end(struct batch *b);
/* The batch's number, its ops' aop.batch (io_uring).  Under async_lock. */
void batch_number(struct batch *b);

/* The file fd names, if the shim serves writes to it. */
struct shim_file *served_writer(int fd, struct ofd **op);
/* The length a queued read of a served file may have (cut at its size). */
uint64_t queued_read_len(int fd, uint64_t off, uint64_t len, bool vec,
			 struct ofd **uncut);
/* A queued request's transaction, claimed and tracked on r. */
struct aop *aop_claim(struct batch *b, struct aring *r, struct shim_file *f,
		      int fd, uint64_t key, enum wtx_kind kind, uint64_t off,
		      uint64_t len, unsigned how);
/* One queued write: the op to track, or NULL to let it go as it is. */
struct aop *prepare_write(struct batch *b, struct aring *r, int fd,
			  uint64_t key, uint64_t off, const struct span *sp,
			  int rwf, unsigned how, bool *append_out);
/* A request the kernel never took: undo what prepare_write did. */
void unprepare(struct aring *r, struct aop *a);
/* A queued fsync or fdatasync: true if it must become a full fsync. */
bool prepare_sync(int fd, bool datasync);

/* The span of an iovec array, of one buffer. */
bool iov_sum(const struct iovec *iov, long cnt, struct span *sp);
bool buf_span(uint64_t base, uint64_t len, struct span *sp);
/* From a signal handler inside the shim: whether fd may be served. */
bool nested_may_serve(int fd);

#endif
