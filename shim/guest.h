/* SPDX-License-Identifier: MIT */
/*
 * Guests of a file (writers with no slot in its segment, or no segment)
 * and the append lock of a file kept exact.  Layer L1, above the shared
 * files, the lifelines and the hints.
 */
#ifndef DIOSHIM_GUEST_H
#define DIOSHIM_GUEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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

/* In a fork child, after lifeline_forget_inherited: take the guest
 * locks the parent held as the child's own. */
void guest_atfork_child(void);

#endif
