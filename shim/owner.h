/* SPDX-License-Identifier: MIT */
/*
 * Who owns a slot or a lock, whether it lives, and the robust locks of a
 * segment.  Layer L1 (shared state), above the lifelines (shm.h): an
 * owner from another pid namespace is judged by its lifeline.
 */
#ifndef DIOSHIM_OWNER_H
#define DIOSHIM_OWNER_H

#include "dioshim/layout.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* Identity of the calling process, as recorded in owner words. */
struct owner_id {
	uint64_t pid_start;
	uint64_t pidns; /* namespace inode | lifeline token << 32 */
};
const struct owner_id *owner_self(void);
/* This image's lifeline token (lifeline_register). */
static inline uint32_t owner_token(void)
{
	return (uint32_t)(owner_self()->pidns >> 32);
}
/* Recompute after fork (the child is a new process, with a new token). */
void owner_refresh(void);

/* False only when the process named is known to be gone: through /proc
 * in our pid namespace, else through its lifeline in the place (a
 * segment's hint_key) where it is registered. */
#define LIFELINE_NONE UINT64_MAX
bool owner_alive_in(uint64_t key, uint64_t pid_start, uint64_t pidns);
bool owner_alive(uint64_t pid_start, uint64_t pidns);
/* Whether o, the owner word just read from slot s of seg, names a live
 * process (0, a free slot, names none). */
static inline bool slot_owner_alive(const struct dioshim_seg *seg,
				    const struct dioshim_slot *s, uint64_t o)
{
	return o && owner_alive_in(seg->hint_key, o, s->owner.pidns);
}

/* The same process (pid, start time, namespace), whatever its image. */
bool owner_is_self(const struct dioshim_owner *o);
/* Record this image as o's owner. */
void owner_set_self(struct dioshim_owner *o);

/* Make a robust process-shared mutex (a segment's lock). */
void robust_init(pthread_mutex_t *m);
/* Lock it within secs: 0, or an error (a corrupt kind is EINVAL);
 * *recovered says its last owner died holding it. */
int seg_lock_for(pthread_mutex_t *m, bool *recovered, int secs);
/* The same within the default bound: true if taken, false on timeout or
 * a broken lock (logged). */
bool seg_lock(pthread_mutex_t *m, bool *recovered);
void seg_unlock(pthread_mutex_t *m);
/* Lock it if nobody holds it: 0, EBUSY, or an error as seg_lock_for. */
int seg_trylock(pthread_mutex_t *m, bool *recovered);

#endif
