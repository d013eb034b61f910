/* SPDX-License-Identifier: MIT */
/*
 * The lifelines: each image's OFD lock in the places (hint files) where
 * it holds slots, which tells its death to any pid namespace; and the
 * descriptors the shim keeps with them, out of the program's way.
 * Layer L1, above the shared files (shm.h).
 */
#ifndef DIOSHIM_LIFELINE_H
#define DIOSHIM_LIFELINE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define HINTS_MAX 33 /* the user and 32 groups */
#define HINTS_EXTRA 8 /* other users' hints, for root */
#define KEEPS_MAX 256 /* kept descriptors (fd_keep) */
/* The descriptors the shim keeps out of the program's way: lifelines,
 * guests' directories, kept copies (lifeline_fds lists them all). */
/* per place: its lifeline, its guests' directory, its append locks */
#define LIFELINES_MAX (3 * (HINTS_MAX + HINTS_EXTRA) + KEEPS_MAX)

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
/* In a fork child: drop the parent's lifelines and kept descriptors
 * (inherited: their locks are the parent's); guest_atfork_child and
 * hint_atfork_child follow. */
void lifeline_forget_inherited(void);

/*
 * For the guests and the hints' windows (guest.c, hint.c), which keep
 * descriptors here.  lifeline_lock guards the table (and their own
 * tables); a leaf lock.
 */
extern pthread_mutex_t lifeline_lock;
/* fd moved out of the way of the program's numbers, or left where it is
 * if there is no room. */
int lifeline_moved(int fd);
/* A descriptor kept with the lifelines under kept (or under also), else,
 * if open_it says so, opened by open_fn(key) and kept under kept; -1 if
 * none.  lifeline_lock held. */
int lifeline_kept(uint64_t kept, uint64_t also, uint64_t key,
		  int (*open_fn)(uint64_t), bool open_it);
/* The descriptor of key's hint that append locks and windows are taken
 * through (the lifeline's own, or one kept for them); lifeline_lock
 * held. */
int lifeline_place_fd(uint64_t key, bool open_it);

#endif
