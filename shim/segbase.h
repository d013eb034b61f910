/* SPDX-License-Identifier: MIT */
/*
 * Inside the segment layer (segbase.c, segment.c, segview.c): a
 * segment's own words under its attach_lock, and the calls up through
 * segment_hooks.  Not for the layers above: they use segment.h.
 */
#ifndef DIOSHIM_SEGBASE_H
#define DIOSHIM_SEGBASE_H

#include "segment.h"

#include <stdbool.h>
#include <stdint.h>

/* Whether seg was made for the file id is (its birth time or
 * generation: an inode number reused is another file). */
bool birth_matches(const struct dioshim_seg *seg, const struct file_id *id);
/* Whether seg's header is of this layout and names (dev, ino). */
bool seg_header_ok(const struct dioshim_seg *seg, uint64_t dev, uint64_t ino);
/* The pages of seg's first n slots allocated (they may be touched). */
bool slot_back_range(struct dioshim_seg *seg, int n);
/* A slot of seg for this process (attach_lock held); -1 if none. */
int slot_claim(struct dioshim_seg *seg);
/* Slot i of seg given back (attach_lock held; -1: none). */
void slot_release(struct dioshim_seg *seg, int i);
/* Whether a live process other than slot self's holds a slot of seg
 * (the dead's are freed on the way). */
bool others_alive(struct dioshim_seg *seg, int self);
/* Whether any live process holds a slot of seg. */
bool any_live_owner(struct dioshim_seg *seg);
/* Remove seg's name at path and count it out of its hint. */
void seg_unlink(struct dioshim_seg *seg, const char *path);
/* seg's attach_lock, taken: false if it could not be had. */
bool attach_lock_take(struct dioshim_seg *seg);

/* The new segment's words (shm_create_published's init and undo). */
struct seg_init_arg {
	const struct file_id *id;
	int fd;
	int *slot;
	uint64_t hint_key;
};
void seg_init(void *map, const void *argp);
void seg_init_undo(void *map);
/* Mark seg dead and remove its name at path, once (attach_lock held). */
void seg_retire(struct dioshim_seg *seg, const char *path);
/* The segment at path mapped, if it is one of this layout, with its
 * attach lock held; NULL if not.  Given back with seg_close_locked. */
struct dioshim_seg *seg_open_locked(const char *path);
void seg_close_locked(struct dioshim_seg *seg);

/* The hooks registered (NULL: none), and the calls through them, each a
 * no-op (or true) without hooks. */
const struct segment_hooks *hook_table(void);
void hook_made(struct dioshim_seg *seg, const struct file_id *id);
/* False: the words are not the file's, the file must be kept exact. */
bool hook_first_in(struct dioshim_seg *seg, int fd);
bool hook_last_out(struct shim_file *f, int fd);
void hook_image_gone(struct dioshim_seg *seg);

#endif
