// SPDX-License-Identifier: MIT
/*
 * The segments seen from outside a membership: counted by place (hint
 * recounts), reclaimed from a previous image at load, collected by
 * `dioshim gc`, peeked at read-only (the give-back of space, stat of a
 * path, `dioshim status`); and a file's identity (file_identify).
 *
 * Layer L1, the top of it with segment.c: calls segbase.c (attach_lock,
 * slots, hooks), the rest of L1 and L0.  Lock order: a segment's
 * attach_lock alone (seg_open_locked).
 */
#define _GNU_SOURCE
#include "segment.h"

#include "dioshim.h"

#include "config.h"
#include "log.h"
#include "mem.h"
#include "owner.h"
#include "record.h"
#include "shm.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <time.h>

/* The segments counted by place (segment_recount): our own hints'. */
static struct {
	uint64_t key[HINTS_MAX], n[HINTS_MAX];
	int keys;
} counted;

static void count_in(uint64_t key)
{
	int i;

	for (i = 0; i < counted.keys; i++)
		if (counted.key[i] == key)
			counted.n[i]++;
}

/* Give back, in one segment, the slots that name this process; count it
 * in its place. */
static void reclaim_self_in(const char *path, uint64_t dev, uint64_t ino,
			    void *arg)
{
	struct dioshim_seg *seg = seg_open_locked(path);
	int i, n;

	if (!seg)
		return;
	count_in(seg->hint_key);
	n = seg_slots(seg);
	for (i = 0; i < n; i++)
		if (owner_is_self(&seg->slot[i].owner))
			slot_release(seg, i);
	hook_image_gone(seg);
	seg_close_locked(seg);
}

static void count_one(const char *path, uint64_t dev, uint64_t ino,
		      void *arg)
{
	struct seg_peek p;

	if (segment_peek(path, &p))
		count_in(p.hint_key);
}

static uint64_t recount_key(uint64_t key)
{
	counted.keys = 1;
	counted.key[0] = key;
	counted.n[0] = 0;
	segment_walk(count_one, NULL);
	return counted.n[0];
}

/* After a scan that counted our places' segments (counted): a place
 * whose hint counts more than it has is counted anew, under the count's
 * lock (a hint that over-counts, left by a process killed in a window,
 * sends every call of every process of its place down the slow path). */
static void recount_places(void)
{
	uint64_t keys[HINTS_MAX], live[HINTS_MAX], seen[HINTS_MAX];
	int i, j, n = hint_mine(keys, live, HINTS_MAX);

	for (i = 0; i < n; i++) {
		seen[i] = 0;
		for (j = 0; j < counted.keys; j++)
			if (counted.key[j] == keys[i])
				seen[i] = counted.n[j];
	}
	for (i = 0; i < n; i++)
		if (live[i] > seen[i])
			hint_recount(keys[i], recount_key);
}

/* Set up counted for our own places, before a scan. */
static void count_start(void)
{
	uint64_t live[HINTS_MAX];

	counted.keys = hint_mine(counted.key, live, HINTS_MAX);
	memset(counted.n, 0, sizeof(counted.n));
}

void segment_recount(void)
{
	count_start();
	segment_walk(count_one, NULL);
	recount_places();
}

/*
 * exec keeps the pid and the start time, so slots the previous image held
 * still look alive — and exec killed its other threads, perhaps with writes
 * counted in flight, which would hold every barrier up until we exit.  At
 * load, nothing of ours is attached yet: any slot naming us is stale.  The
 * files stay open across exec only if inherited; the new image re-attaches
 * to them on first use.
 */
void segment_reclaim_self(void)
{
	/* Nothing to do unless some segment exists: the common case costs
	 * one load of the hint. */
	if (!hint_maybe_live())
		return;
	count_start();
	segment_walk(reclaim_self_in, NULL);
	recount_places();
}

/* ---- the dioshim command: gc and users -------------------------------- */

int segment_live_users(struct dioshim_seg *seg)
{
	int i, n = 0, hi = seg_slots(seg);

	for (i = 0; i < hi; i++) {
		uint64_t o = atomic_load(&seg->slot[i].owner.pid_start);

		if (slot_owner_alive(seg, &seg->slot[i], o))
			n++;
	}
	return n;
}

enum gc_verdict segment_gc(const char *segpath, char *file, size_t cap,
			   struct dioshim_fh *fh)
{
	struct dioshim_seg *seg = seg_open_locked(segpath);
	enum gc_verdict v;

	file[0] = '\0';
	if (!seg)
		return GC_FOREIGN;
	memcpy(file, seg->path, cap < sizeof(seg->path) ? cap : sizeof(seg->path));
	file[cap - 1] = '\0';
	*fh = seg->handle;
	if (fh->fh_bytes > sizeof(fh->fh))
		fh->fh_bytes = 0;
	if (atomic_load(&seg->state) != DIOSHIM_SEG_DEAD &&
	    others_alive(seg, -1)) {
		v = GC_IN_USE;
	} else if (atomic_load(&seg->state) == DIOSHIM_SEG_DEAD ||
		   (atomic_load(&seg->phys) <= atomic_load(&seg->eof) &&
		    !atomic_load(&seg->recorded_phys))) {
		/* Nothing reserved: the segment is all there is to remove
		 * (one dead already, left by a process killed as it removed
		 * it, is removed too). */
		if (atomic_load(&seg->state) == DIOSHIM_SEG_DEAD)
			sys_unlink(segpath);
		seg_retire(seg, segpath);
		v = GC_REMOVED;
	} else {
		/* A tail to cut: that needs the file (segment_attach then
		 * segment_put, by the caller). */
		v = GC_NEEDS_FILE;
	}
	seg_close_locked(seg);
	return v;
}

bool segment_gc_file_gone(const char *segpath, const struct dioshim_fh *fh)
{
	struct dioshim_seg *seg = seg_open_locked(segpath);
	bool gone = false;

	if (!seg)
		return false;
	/* Still that file's (the name may be a new file's now: the inode
	 * number reused, its handle another generation), and still nobody
	 * alive (a process may have come since). */
	if (!memcmp(&seg->handle, fh, sizeof(*fh)) &&
	    atomic_load(&seg->state) != DIOSHIM_SEG_DEAD &&
	    !others_alive(seg, -1)) {
		seg_retire(seg, segpath);
		gone = true;
	}
	seg_close_locked(seg);
	return gone;
}

bool segment_exists(const struct stat *file)
{
	char path[PATH_MAX];
	struct stat st;

	return !segment_path_of(path, sizeof(path), file->st_dev,
				file->st_ino, file->st_mode, file->st_gid,
				false) &&
	       sys_newfstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* ---- read-only access: stat(path) and the dioshim command ------------- */

struct dioshim_seg *segment_map_path(const char *path, bool writable)
{
	struct shm_want want = { SHM_SEG_ANY, 0, NULL };
	struct dioshim_seg *seg = shm_open_existing(path, SEG_SIZE, writable,
						    &want);

	if (!seg)
		return NULL;
	if (seg->magic != DIOSHIM_SEG_MAGIC ||
	    seg->version != DIOSHIM_LAYOUT_VERSION || seg->size != SEG_SIZE) {
		sys_munmap(seg, SEG_SIZE);
		errno = EPROTO;
		return NULL;
	}
	return seg;
}

/* Read one field of the segment open at fd into dst (its size). */
#define PEEK(fd, dst, field)                                                \
	(sys_pread(fd, dst, sizeof(((struct dioshim_seg *)0)->field),       \
		   offsetof(struct dioshim_seg, field)) ==                   \
	 (ssize_t)sizeof(((struct dioshim_seg *)0)->field))

bool segment_peek(const char *path, struct seg_peek *p)
{
	struct shm_want want = { SHM_SEG_ANY, 0, NULL };
	uint32_t version, size, hi, ns = (uint32_t)owner_self()->pidns;
	struct dioshim_owner o;
	uint64_t magic;
	int fd = shm_open_checked(path, SEG_SIZE, false, &want);
	bool ok;
	uint32_t i;

	if (fd < 0)
		return false;
	p->npids = 0;
	ok = PEEK(fd, &magic, magic) && PEEK(fd, &version, version) &&
	     PEEK(fd, &size, size) && magic == DIOSHIM_SEG_MAGIC &&
	     version == DIOSHIM_LAYOUT_VERSION && size == SEG_SIZE &&
	     PEEK(fd, &p->dev, dev) && PEEK(fd, &p->ino, ino) &&
	     PEEK(fd, &p->phys, phys) && PEEK(fd, &p->eof, eof) &&
	     PEEK(fd, &p->hint_key, hint_key) &&
	     PEEK(fd, &p->budget_charged, budget_charged) &&
	     PEEK(fd, p->path, path) && PEEK(fd, &hi, slots_hi);
	p->path[sizeof(p->path) - 1] = 0;
	if (hi > DIOSHIM_MAX_PROCS)
		hi = DIOSHIM_MAX_PROCS;
	for (i = 0; ok && i < hi && p->npids < SEG_PEEK_PIDS; i++)
		if (sys_pread(fd, &o, sizeof(o),
			      (off_t)(offsetof(struct dioshim_seg, slot) +
				      i * sizeof(struct dioshim_slot) +
				      offsetof(struct dioshim_slot, owner))) ==
			    (ssize_t)sizeof(o) &&
		    o.pid_start && (uint32_t)o.pidns == ns)
			p->pids[p->npids++] =
				(pid_t)(o.pid_start & DIOSHIM_OWNER_PID_MASK);
	sys_close(fd);
	return ok;
}

void segment_unmap(struct dioshim_seg *seg)
{
	sys_munmap(seg, SEG_SIZE);
}

bool segment_peek_eof(const struct stat *st, const char *path, int dirfd,
		      int at_flags, uint64_t *eof)
{
	char name[PATH_MAX];
	struct file_id fid;
	struct shm_want want = { SHM_SEG_FILE, 0, &fid };
	struct dioshim_seg *seg;
	struct statx stx;
	bool ok;

	if (segment_path_of(name, sizeof(name), st->st_dev, st->st_ino,
			    st->st_mode, st->st_gid, false))
		return false;
	fid.uid = st->st_uid;
	fid.gid = st->st_gid;
	fid.mode = st->st_mode;
	seg = shm_open_existing(name, SEG_SIZE, false, &want);
	if (!seg)
		return false;
	ok = seg_header_ok(seg, st->st_dev, st->st_ino) &&
	     atomic_load(&seg->state) == DIOSHIM_SEG_READY;
	/* By path, btime is what can be had without opening the file;
	 * an inode is reused only once nobody holds it open, so a live
	 * segment (READY) with a matching btime is this file's. */
	if (ok && seg->birth_kind != DIOSHIM_BIRTH_NONE) {
		ok = path &&
		     sys_statx(dirfd, path,
			       at_flags & (AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH),
			       STATX_BTIME, &stx) == 0 &&
		     (stx.stx_mask & STATX_BTIME) &&
		     stx.stx_btime.tv_sec == seg->birth_sec &&
		     stx.stx_btime.tv_nsec == seg->birth_nsec;
	}
	if (ok) {
		*eof = atomic_load_explicit(&seg->eof, memory_order_acquire);
		/* The kernel's size bounds every answer: a segment never
		 * makes a file look longer than it is. */
		if (*eof > (uint64_t)st->st_size)
			*eof = (uint64_t)st->st_size;
	}
	sys_munmap(seg, SEG_SIZE);
	return ok;
}

/* ---- identifying a file ------------------------------------------------ */

bool file_identify(int fd, struct file_id *id)
{
	struct statx stx;
	struct statfs sfs;

	if (sys_statx(fd, "", AT_EMPTY_PATH,
		      STATX_TYPE | STATX_MODE | STATX_UID | STATX_GID |
			      STATX_INO | STATX_SIZE | STATX_BTIME |
			      STATX_DIOALIGN,
		      &stx))
		return false;
	if (!S_ISREG(stx.stx_mode))
		return false;
	if (stx.stx_attributes &
	    (STATX_ATTR_APPEND | STATX_ATTR_IMMUTABLE))
		return false;
	if (sys_fstatfs(fd, &sfs))
		return false;
	id->fs_bit = config_fs_bit(sfs.f_type);
	if (!(id->fs_bit & config.fs_mask))
		return false;
	/* Writers a segment could not let in — anyone, for a world-writable
	 * file; the users and groups an ACL names — would write beside a
	 * reservation: such a file is served for no one (DESIGN.md 4). */
	if ((stx.stx_mode & S_IWOTH) ||
	    sys_fgetxattr(fd, "system.posix_acl_access", NULL, 0) > 0)
		return false;
	id->dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	id->ino = stx.stx_ino;
	id->uid = stx.stx_uid;
	id->gid = stx.stx_gid;
	id->mode = stx.stx_mode;
	id->size = stx.stx_size;
	id->blksize = stx.stx_blksize;
	if (id->blksize < 512 || id->blksize > (1u << 20) ||
	    (id->blksize & (id->blksize - 1)))
		id->blksize = 4096;
	id->dio_mem_align = id->dio_off_align = 0;
	if (stx.stx_mask & STATX_DIOALIGN) {
		id->dio_mem_align = stx.stx_dio_mem_align;
		id->dio_off_align = stx.stx_dio_offset_align;
	}
	id->birth_kind = DIOSHIM_BIRTH_NONE;
	id->birth_sec = 0;
	id->birth_nsec = 0;
	id->birth_gen = 0;
	if (stx.stx_mask & STATX_BTIME) {
		unsigned int gen;

		id->birth_kind = DIOSHIM_BIRTH_BTIME;
		id->birth_sec = stx.stx_btime.tv_sec;
		id->birth_nsec = stx.stx_btime.tv_nsec;
		if (sys_ioctl(fd, FS_IOC_GETVERSION, &gen) == 0) {
			id->birth_kind = DIOSHIM_BIRTH_GEN;
			id->birth_gen = gen;
		}
	}
	return true;
}
