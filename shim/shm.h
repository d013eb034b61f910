/* SPDX-License-Identifier: MIT */
/*
 * Shared files: where segments and hints live, their names, and who may
 * own them, allocated before they are touched and published complete; the
 * walk over the segments; OFD byte locks on shared files.  Layer L1, its
 * bottom (above L0 only).  The hints (hint.h), lifelines (lifeline.h),
 * guests (guest.h) and owners (owner.h) are built on it.
 */
#ifndef DIOSHIM_SHM_H
#define DIOSHIM_SHM_H

#include "dioshim/layout.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * What a file looks like to the segment code: filled from one statx of the
 * data file (plus statfs for fs_bit, segment.c file_identify); who may
 * own its shared files follows from it.
 */
struct file_id {
	uint64_t dev, ino;
	uint64_t size;
	uint32_t blksize;
	uint32_t fs_bit;
	uint32_t dio_mem_align, dio_off_align; /* STATX_DIOALIGN, or 0 */
	uint32_t birth_kind;
	int64_t birth_sec;
	uint32_t birth_nsec;
	uint64_t birth_gen;
	uint32_t uid, gid, mode; /* who may write it: who may join */
};

#define SEG_SIZE sizeof(struct dioshim_seg)
/* A hint key: a uid, or this bit | a gid. */
#define HINT_GROUP_BIT (1ull << 32)

/*
 * Who may own a shared file, and with which mode.  Who may change a
 * segment is who may write its file: a segment is 0600, or 0660 with the
 * file's group when the file is group-writable (every writer of the file
 * can then join, and nobody else can change a word).  A hint is 0600 for
 * one user, or 0660 for one group.  Anything else — another user's file,
 * a planted one, a mode wider than the file's — is foreign.
 */
enum shm_kind {
	SHM_HINT_USER, /* id: the uid */
	SHM_HINT_GROUP, /* id: the gid */
	SHM_SEG_FILE, /* the segment of file */
	SHM_SEG_ANY, /* a segment, file unknown (gc, status, reclaim) */
};
struct shm_want {
	enum shm_kind kind;
	uint32_t id;
	const struct file_id *file;
};

/* The mode and owner a new shared file gets. */
struct shm_owner {
	mode_t mode;
	uid_t uid; /* (uid_t)-1: ours */
	gid_t gid; /* (gid_t)-1: ours */
};

/* Open and map an existing shared file of size bytes if it is what want
 * says (else NULL, errno EPERM, one log line), backing its pages first
 * when writable. */
void *shm_open_existing(const char *path, size_t size, bool writable,
			const struct shm_want *want);
/* A descriptor of an existing shared file if it is what want says (else
 * -1, errno EPERM, one log line): for reading it without mapping it. */
int shm_open_checked(const char *path, size_t size, bool writable,
		     const struct shm_want *want);
/* Build a shared file under a temporary name (own's owner and mode, its
 * pages allocated), init it, link it into place.  NULL with errno
 * (EEXIST: someone else won; undo, if any, was called). */
void *shm_create_published(const char *path, size_t size,
			   const struct shm_owner *own,
			   void (*init)(void *, const void *),
			   void (*undo)(void *), const void *arg);
/* Whether the segment directory hands its group to new files. */
bool shm_dir_setgid(void);
/* Whether fd is a shared file of size bytes as want says. */
bool shm_fd_ok(int fd, size_t size, const struct shm_want *want);
/*
 * A group's directory, <shm_dir>/dioshim-g<gid>, into buf (made, 0770
 * and the group's, when make says so): 0, or -1 when it cannot be made or
 * is not a group directory of ours (logged once).
 */
int shm_group_dir(char *buf, size_t cap, uint32_t gid, bool make);
/* The hint file of key (a uid, or HINT_GROUP_BIT | gid): a user's in the
 * segment directory, a group's in its group directory (made when make
 * says so). */
int hint_path(uint64_t key, char *path, size_t cap, bool make);
/* An OFD lock command on byte `byte` of fd: 0 or -1 for a set, the type
 * of a conflicting lock (F_UNLCK: none; -1 when it cannot be told) for
 * F_OFD_GETLK, which a failure makes again, then asks /proc/locks. */
int shm_lock_byte(int fd, uint64_t byte, int cmd, short type);

/* Name of a private file's segment: "<shm_dir>/dioshim.<dev>.<ino>". */
int segment_path(char *buf, size_t cap, uint64_t dev, uint64_t ino);
/* Name of the segment of a file (dev, ino, mode, gid): the one above, or,
 * for a group-writable file, the same name in its group's directory
 * "<shm_dir>/dioshim-g<gid>" (made when make says so).  -1 when that
 * directory is unusable: the file is then served for no one. */
int segment_path_of(char *buf, size_t cap, uint64_t dev, uint64_t ino,
		    uint32_t mode, uint32_t gid, bool make);
/* The name of a segment we have mapped, from its own words. */
int seg_path_of(const struct dioshim_seg *seg, char *buf, size_t cap);
/* The mode, owner and hint key of a new segment for file id. */
void seg_owner_for(const struct file_id *id, struct shm_owner *own,
		   uint64_t *hint_key);
/* A segment's file name: "dioshim.<dev>.<ino>" (hex, as segment_path
 * makes it), nothing after it (a name being made has a suffix).  The one
 * parser of the names; false if name is not one. */
bool segment_name_parse(const char *name, uint64_t *dev, uint64_t *ino);
/*
 * The one walk over the segments: fn(path, dev, ino, arg) for every
 * segment file (segment_name_parse) in the segment directory and in its
 * group directories, for gc, recounts, the reclaim at load and the
 * give-back of space.  Takes no stack to speak of (its buffers are
 * mapped for the walk); false if they could not be.
 */
typedef void segment_walk_fn(const char *path, uint64_t dev, uint64_t ino,
			     void *arg);
bool segment_walk(segment_walk_fn *fn, void *arg);
/* each(name, arg) for the entries of the directory open at dfd (read
 * into buf, cap bytes: getdents64, no heap), until it returns true.
 * Whether it did. */
bool shm_dir_each(int dfd, char *buf, size_t cap,
		  bool (*each)(const char *name, void *arg), void *arg);

#endif
