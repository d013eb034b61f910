/* SPDX-License-Identifier: MIT */
/*
 * Shared files: where segments and hints live and who may own them,
 * allocated before they are touched and published complete; the hints
 * that say whether any segment exists; the lifelines.
 */
#ifndef DIOSHIM_SHM_H
#define DIOSHIM_SHM_H

#include "dioshim/layout.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct file_id;

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
/* Call fn with the path of every segment file under the segment
 * directory (its group directories included). */
void segment_scan(void (*fn)(const char *));

/* The hints: false means no segment exists for this process's user and
 * groups right now. */
bool hint_maybe_live(void);
/* Generation of segment creations; changes whenever a segment appears.
 * UINT64_MAX when a hint is unusable (callers then always re-check). */
uint64_t hint_gen(void);
/* Count a segment in (delta 1, before creating it) or out (-1, after
 * unlinking it) of the hint of key. */
void hint_live_add(uint64_t key, int64_t delta);
/*
 * Around a change of key's live count and the making or removal of the
 * segment it counts (hint_live_add(1) before the segment is published,
 * its unlink before hint_live_add(-1)): live over-counts in between, for
 * good if the process dies there.  hint_recount counts only while no
 * such window is open, in any process.
 */
void hint_window_open(uint64_t key);
void hint_window_close(uint64_t key);
/* key's live count set to count(key) (the segments of key's place), if
 * no window is open anywhere: true if it was recounted. */
bool hint_recount(uint64_t key, uint64_t (*count)(uint64_t key));
/* The keys of this process's own hints (its user's and its groups'),
 * and what each counts live; how many (at most max). */
int hint_mine(uint64_t *keys, uint64_t *live, int max);
/* A segment of key's place was published: the generation moves again
 * (it moved before, when live was counted up), so that a descriptor that
 * looked in between looks once more. */
void hint_published(uint64_t key);
/* Whether key's place surely has no segment (its hint counts none live;
 * live never under-counts); false when it cannot tell. */
bool hint_key_idle(uint64_t key);
/* Add delta to the bytes reserved on filesystem dev in key's hint (an
 * entry claimed on first use; never below zero), and return the sum:
 * delta 0 reads it.  0 if the hint is unusable or its table full. */
uint64_t hint_budget_add(uint64_t key, uint64_t dev, int64_t delta);

/* The hints this process reads (its user's and its groups'), once
 * mapped (hint_count 0 before, or if one is unusable): for the check on
 * the path of every call the shim does not serve, a few loads. */
#define HINTS_MAX 33 /* the user and 32 groups */
#define HINTS_EXTRA 8 /* other users' hints, for root */
#define KEEPS_MAX 256 /* kept descriptors (fd_keep) */
/* The descriptors the shim keeps out of the program's way: lifelines,
 * guests' directories, kept copies (lifeline_fds lists them all). */
/* per place: its lifeline, its guests' directory, its append locks */
#define LIFELINES_MAX (3 * (HINTS_MAX + HINTS_EXTRA) + KEEPS_MAX)
extern struct dioshim_hint *hint_set[HINTS_MAX];
extern int hint_count;

/* hint_gen() into *gen (read first: a segment made after it moves it),
 * then hint_maybe_live(), in one look: inline once the hints are mapped
 * (hint_count is published last, and never taken back). */
bool hint_look_slow(uint64_t *gen);
static inline bool hint_look(uint64_t *gen)
{
	int i, n = __atomic_load_n(&hint_count, __ATOMIC_ACQUIRE);
	uint64_t g = 0;

	if (!n)
		return hint_look_slow(gen);
	for (i = 0; i < n; i++)
		g += atomic_load_explicit(&hint_set[i]->gen,
					  memory_order_seq_cst);
	*gen = g == UINT64_MAX ? 0 : g;
	for (i = 0; i < n; i++)
		if (atomic_load_explicit(&hint_set[i]->live,
					 memory_order_seq_cst))
			return true;
	return false;
}

static inline bool hint_surely_dead(void)
{
	int i, n = __atomic_load_n(&hint_count, __ATOMIC_ACQUIRE);

	for (i = 0; i < n; i++)
		if (atomic_load_explicit(&hint_set[i]->live,
					 memory_order_relaxed))
			return false;
	return n > 0;
}

/* Hold our lifeline, the lock of this image's token (owner_token), in
 * the place of key (its hint must exist). */
void lifeline_register(uint64_t key, uint32_t token);
/* Whether the image with token holds its lifeline in key's place;
 * *known false when that cannot be told. */
bool lifeline_held(uint64_t key, uint32_t token, bool *known);
/* Whether fd is one of the shim's own lifeline descriptors, which the
 * program's closes must leave open. */
bool lifeline_owns_fd(int fd);
/* A copy of fd kept out of the program's way, named by the key returned
 * (0: none could be kept); its number now (-1: gone); given up (and
 * closed, if close_it). */
uint64_t fd_keep(int fd);
int fd_kept(uint64_t key);
void fd_unkeep(uint64_t key, bool close_it);
/* The program wants fd, a lifeline's number (dup2 onto it): move the
 * lifeline to another number. */
void lifeline_evict(int fd);
/* Those of them in [lo, hi], ascending, at most max. */
int lifeline_fds(unsigned lo, unsigned hi, unsigned *out, int max);
/* In a fork child: drop the parent's lifelines (inherited descriptors),
 * and take the guest locks the parent held as the child's own. */
void lifeline_forget_inherited(void);

/* Announce this process as a guest writer of file (dev, ino) in key's
 * place, for one more hold; false if it cannot. */
bool guest_hold(uint64_t key, uint64_t dev, uint64_t ino);
/* Whether this process holds a guest's announcement of the file. */
bool guest_mine(uint64_t key, uint64_t dev, uint64_t ino);
/* One hold fewer; the lock goes with the last. */
void guest_drop(uint64_t key, uint64_t dev, uint64_t ino);
/* Whether another process, or (ours) this one, is a guest of the file. */
bool guest_present(uint64_t key, uint64_t dev, uint64_t ino, bool ours);
/* Take the lock that makes kernel-placed appends to the file one at a
 * time in key's place (a guest's and a file kept exact's members'); false
 * if there is none to take.  Given back, once taken, with
 * append_lock_give. */
bool append_lock_take(uint64_t key, uint64_t dev, uint64_t ino);
void append_lock_give(uint64_t key, uint64_t dev, uint64_t ino);
/* A guest's append with no lock, while key's place has no segment:
 * counted in (the count to give back), or NULL (take the lock). */
_Atomic uint32_t *append_lockless_enter(uint64_t key, uint64_t dev,
					uint64_t ino);
void append_lockless_exit(_Atomic uint32_t *n);
/* Under the append lock: wait for the lockless appends of the file. */
void append_lockless_drain(uint64_t key, uint64_t dev, uint64_t ino);

/* Around fork: hold hint_lock (after files_lock), then let it go in the
 * parent and the child. */
void shm_atfork_prepare(void);
void shm_atfork_release(void);

#endif
