/* SPDX-License-Identifier: MIT */
/*
 * The durable record of the logical EOF and recovery after a crash
 * (DESIGN.md 5).
 *
 * While a reservation exists the file carries the xattr user.dioshim.eof,
 * "v1 EOF PHYS": the logical EOF when the record was written and the
 * kernel size it reserved.  After a crash (the shared segment is gone with
 * the machine), the first shimmed open, or `dioshim recover`, cuts the
 * reserved tail: back to EOF if the size is still PHYS and nothing was
 * written past EOF, otherwise to the end of the last data block — never
 * below either, so no byte that was written is cut.
 */
#ifndef DIOSHIM_RECOVER_H
#define DIOSHIM_RECOVER_H

#include "record.h"

#include <stdbool.h>
#include <stdint.h>

/* Drop clean cached pages of [from, to) (for the SEEK_DATA fallback of
 * recover_data_end, where cached zeros would count as data). */
void recover_drop_cache(int fd, uint64_t from, uint64_t to);

/*
 * End of the data at or past from (the end of a block, or the size), or
 * from when [from, size) holds none.  Read from the kernel's extent map
 * (FIEMAP), after writing back dirty pages of the range: unwritten
 * extents hold no data, whatever the page cache holds over them; delayed
 * allocations do.  SEEK_DATA where the filesystem has no extent map.
 */
uint64_t recover_data_end(int fd, uint64_t from);

/* Whether [from, to) of fd (blocks, at most a few MiB) reads as zeros:
 * false when it cannot be read. */
bool recover_zeros(int fd, uint64_t from, uint64_t to);

enum recover_outcome {
	RECOVER_NO_RECORD, /* nothing to do: the file is left alone */
	RECOVER_CLEAN, /* a record, but no tail to cut: record removed */
	RECOVER_TRIMMED, /* tail cut, record removed */
	RECOVER_FAILED, /* errno says why; the file is unchanged */
};

struct recover_report {
	enum recover_outcome outcome;
	uint64_t rec_eof, rec_phys; /* the record */
	uint64_t size_before, size_after;
};

/* Whether fd is open for writing. */
bool recover_fd_writable(int fd);
bool recover_fd_readable(int fd);
/* A new descriptor of fd's file, opened by its /proc/self/fd link with
 * flags (O_NOCTTY and O_CLOEXEC added); -1 with errno.  Closing it drops
 * every POSIX lock this process holds on the file. */
int recover_reopen(int fd, int flags);
/* ftruncate fd to size, even if fd is open only for reading: then by its
 * /proc/self/fd link (truncate(2) needs write permission on the file, as
 * an open for writing would).  Never through a second descriptor: closing
 * it would drop every POSIX lock this process holds on the file. */
int recover_truncate(int fd, uint64_t size);

/* Recover fd from its record; nobody may be writing
 * the file meanwhile (the caller holds the segment's attach_lock). */
enum recover_outcome recover_fd(int fd, uint32_t blksize,
				struct recover_report *rep);

/*
 * What the segment of processes that were all killed says (a kill -9:
 * the segment outlived them, the machine did not go down): the eof they
 * last published, and the record they had written.  Used only if that
 * record is the one on the file, and only to place the size inside the
 * last block of data recovery finds past the record: appends made after
 * the record end there, not at the end of the block.
 */
struct recover_hint {
	uint64_t eof, rec_eof, rec_phys;
	/* The words are of the mount the file is on now: their users were
	 * killed, the filesystem stayed up, and the kernel kept every size
	 * they made (eof included). */
	bool live;
};

/* The mount fd is on (STATX_MNT_ID_UNIQUE), or 0 if the kernel cannot
 * say. */
uint64_t recover_mnt_id(int fd);

/* recover_fd, told where the dead users' size was (hint may be NULL). */
enum recover_outcome recover_fd_hint(int fd, uint32_t blksize,
				     const struct recover_hint *hint,
				     struct recover_report *rep);

struct dioshim_seg;

/*
 * Recompute the size words of seg from the kernel's size, after a process
 * died between changing that size and moving the words (a truncate cut
 * short): phys is the kernel's size, eof and tail the smaller of it and
 * the old eof — or the end of data written past that eof — and the record
 * is made to describe what is reserved.  Nothing is cut.  Nobody may be
 * writing meanwhile: the barrier is up and drained and ext_lock held, or
 * the caller is the segment's first live user.  False (nothing changed)
 * when the kernel's size cannot be read.
 */
bool recover_words(struct dioshim_seg *seg, int fd);

/* The last recovery this process ran, for the dioshim command. */
extern struct recover_report recover_last;

#endif
