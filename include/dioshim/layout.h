/* SPDX-License-Identifier: MIT */
/*
 * dioshim shared-memory layout: the ABI between every shimmed process that
 * has one file open and the dioshim command.
 *
 * One segment per inode, named DIOSHIM_SEG_PREFIX "<dev>.<ino>" (hex) in
 * the shared-memory directory, created O_EXCL|O_NOFOLLOW with mode 0600
 * (0660 in a group's subdirectory, for a group-writable file: the mode
 * follows the file's).  Every word below is read from memory that
 * another process can write: readers bounds-check what they use, and nothing
 * destructive is done on a word's say alone (a trim re-checks with fstat and
 * SEEK_DATA first).
 *
 * Lock order, for every process that takes more than one (shim/lockrank.h
 * ranks these and the library's own locks):
 *	attach_lock -> barrier_lock -> (drain) -> ext_lock -> the file's
 *	append lock (DIOSHIM_APPEND_BASE, which a guest takes alone)
 * Writers hold no segment lock while they wait for the barrier, so a barrier
 * raiser that drains them can never wait on a lock they hold.
 *
 * Any change of meaning or of an offset bumps DIOSHIM_LAYOUT_VERSION; a
 * process that finds another version passes every call through.
 */
#ifndef DIOSHIM_LAYOUT_H
#define DIOSHIM_LAYOUT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define DIOSHIM_ATOMIC(t) t
#else
#include <stdatomic.h>
#define DIOSHIM_ATOMIC(t) _Atomic t
#endif

#define DIOSHIM_SEG_MAGIC 0x314d485343494f44ULL /* "DIOSCHM1" */
#define DIOSHIM_HINT_MAGIC 0x544e4948534f4944ULL /* "DIOSHINT" */
#define DIOSHIM_LAYOUT_VERSION 8u
#define DIOSHIM_CACHELINE 64

#define DIOSHIM_SEG_PREFIX "dioshim."
/* One hint per layout version (bumped with it): a process of another
 * version that finds the name never takes the hint for broken, which
 * would cost it a look for segments at every call. */
#define DIOSHIM_HINT_PREFIX "dioshim-hint8."
/* a group's directory: segments of its group-writable files, its hint */
#define DIOSHIM_GROUP_PREFIX "dioshim-g"

/* Attach slots: processes with the file open.  The table is as large as
 * any real workload needs, and costs only the pages in use: slots are
 * handed out lowest first, and the pages up to slots_hi are allocated
 * before a slot there is used (see struct dioshim_seg). */
#define DIOSHIM_MAX_PROCS 4096
#define DIOSHIM_SLOT_SHARDS 4 /* in-flight shards per process */
#define DIOSHIM_STRIPES 512 /* extent-lock stripes (at most; see config) */
#define DIOSHIM_WIDE_SLOTS 8 /* writes wider than the stripe table */
#define DIOSHIM_PREFILL_BITS 65536 /* prefill bitmap, one bit per chunk */
#define DIOSHIM_PREFILL_CLAIMS 64 /* words claiming chunks to prefill */
#define DIOSHIM_DONE_RING 64 /* appends done, waiting to publish */
#define DIOSHIM_BUDGETS 16 /* filesystems a place's disk budget knows */
#define DIOSHIM_BUDGET_USED (1ULL << 63)
#define DIOSHIM_LOCKLESS 32 /* counts of guests' lockless appends */
#define DIOSHIM_VOIDS 16 /* appends that failed in one move */
#define DIOSHIM_GAPS 4 /* ranges grown over without blocks asked for */
#define DIOSHIM_KEEPS 4 /* ranges the program allocated past eof */
/* In dioshim_seg.tail: a move is under way (struct dioshim_move); no
 * append claims until it ends.  Every size is below it (INT64_MAX). */
#define DIOSHIM_TAIL_CLOSED (1ULL << 63)

/* Segment state: written by the creator and by the last detacher only. */
enum dioshim_seg_state {
	DIOSHIM_SEG_INIT = 0, /* being initialised by its creator */
	DIOSHIM_SEG_READY = 1, /* in use */
	DIOSHIM_SEG_DEAD = 2, /* unlinked by the last detacher: re-open */
};

/* How the inode's birth was identified, in dioshim_seg.birth_kind. */
enum dioshim_birth_kind {
	DIOSHIM_BIRTH_NONE = 0, /* the filesystem reports none */
	DIOSHIM_BIRTH_BTIME = 1, /* statx btime */
	/* btime and the inode generation (FS_IOC_GETVERSION, ext4 and
	 * XFS): a file re-created in the same clock tick can get its inode
	 * number and btime back, never its generation */
	DIOSHIM_BIRTH_GEN = 2,
};

/* dioshim_seg.flags */
#define DIOSHIM_SEGF_NO_RESERVE 0x1u /* fallocate or xattrs unsupported */
#define DIOSHIM_SEGF_SIZE_NO_DATA 0x2u /* eof grew past the data since the
					* record was written (fallocate) */
#define DIOSHIM_SEGF_ENGAGED 0x4u /* a second write was seen in flight:
				   * reservation and prefill start (until
				   * then writes go to the kernel as issued) */
#define DIOSHIM_SEGF_SYNCED 0x8u /* a sync (fsync, fdatasync, an O_SYNC or
				  * O_DSYNC write, a queued one) may have
				  * made a reserved size durable: the cut of
				  * the last user is made durable too, so a
				  * power cut after a clean close brings the
				  * file back at its synced size */

/*
 * Owner of a slot or a lock: a process, named so that a recycled pid never
 * passes for the process that died.  pid alone is not enough; starttime is
 * field 22 of /proc/PID/stat (clock ticks since boot), pidns the inode of
 * /proc/self/ns/pid (a pid is only meaningful inside its namespace).  The
 * high half of pidns is the image's lifeline token: a process holds an
 * OFD lock on byte DIOSHIM_LIFELINE_BASE + token of the hint file of each
 * place it has slots in, so that a process in another pid namespace (or
 * without /proc) can tell whether it lives: the kernel drops the lock when
 * the process dies or execs.
 */
struct dioshim_owner {
	DIOSHIM_ATOMIC(uint64_t) pid_start; /* pid | starttime << 22; 0 = free */
	uint64_t pidns; /* pid namespace inode | lifeline token << 32 */
};
#define DIOSHIM_LIFELINE_BASE (1ULL << 40)
/* A guest of a file (a writer with no slot in its segment, or with no
 * segment at all) holds an OFD read lock on byte DIOSHIM_GUEST_BASE +
 * a 31-bit hash of the file's (dev, ino) of its place's directory (the
 * segment directory, or the group's) while it has the file open. */
#define DIOSHIM_GUEST_BASE (1ULL << 41)
/* Appends the kernel places on a file kept exact (DESIGN.md 4) — a
 * guest's, written through the kernel with no segment of its own, and
 * the members' (under ext_lock) — go one at a time, each under an OFD
 * write lock on byte DIOSHIM_APPEND_BASE + the same hash of the file of
 * the place's hint: where XFS alone would hand two concurrent ones one
 * offset.  The kernel drops it with its holder. */
#define DIOSHIM_APPEND_BASE (1ULL << 42)
/* A place's hint counts its segments (live) before one is made and after
 * one is removed: between the two it over-counts, and for good if the
 * process dies there.  Each such window holds an OFD read lock on this
 * byte of the hint file; a recount takes it for writing, without
 * waiting, and sets live to the segments it finds. */
#define DIOSHIM_COUNT_BYTE (1ULL << 43)
#define DIOSHIM_OWNER_PID_BITS 22
#define DIOSHIM_OWNER_PID_MASK ((1ULL << DIOSHIM_OWNER_PID_BITS) - 1)

/*
 * One in-flight shard: written only by the threads of the owning process
 * that hash to it, so no cache line is written by every write of every
 * thread.  The statistics ride on the same line, which the write dirties
 * anyway.
 */
struct dioshim_shard {
	DIOSHIM_ATOMIC(int64_t) inflight; /* writes between enter and exit */
	DIOSHIM_ATOMIC(uint64_t) writes; /* write calls handled */
	DIOSHIM_ATOMIC(uint64_t) bytes; /* bytes those calls wrote */
	DIOSHIM_ATOMIC(uint64_t) extends; /* writes that moved eof */
	DIOSHIM_ATOMIC(uint64_t) appends; /* O_APPEND writes emulated */
	DIOSHIM_ATOMIC(uint64_t) reads_clamped; /* reads cut at eof */
	uint64_t pad[2];
} __attribute__((aligned(DIOSHIM_CACHELINE)));

/* An attached process: one per process that has the file open. */
struct dioshim_slot {
	struct dioshim_owner owner;
	DIOSHIM_ATOMIC(uint64_t) reserves; /* fallocate reservations made */
	DIOSHIM_ATOMIC(uint64_t) exact; /* extending writes the kernel did */
	DIOSHIM_ATOMIC(uint64_t) barriers; /* barriers raised */
	DIOSHIM_ATOMIC(uint64_t) prefills; /* chunks prefilled */
	/* asynchronous writes submitted, their completion not yet seen */
	DIOSHIM_ATOMIC(uint64_t) async_inflight;
	/* of those writes, appends waiting for the ones before them to be
	 * published (eof_publish_in_order): not working on anything */
	DIOSHIM_ATOMIC(uint64_t) publish_waiting;
	struct dioshim_shard shard[DIOSHIM_SLOT_SHARDS];
} __attribute__((aligned(DIOSHIM_CACHELINE)));

/*
 * One extent-lock stripe (the extent-lock table, DESIGN.md 2.4): stripe i
 * covers the blocks whose number is i modulo the stripe count.  Writers
 * hold it exclusive (writer != 0); readers take nothing: they read seq
 * before and after their read and read again if it moved or was odd.
 */
struct dioshim_stripe {
	DIOSHIM_ATOMIC(uint32_t) seq; /* odd while held; futex for waiters */
	DIOSHIM_ATOMIC(uint32_t) waiters; /* sleeping on seq */
	struct dioshim_owner writer; /* the holding process; 0: free */
	/* a reader that kept meeting writers: new writers wait for it */
	struct dioshim_owner gate;
	uint64_t pad[3];
} __attribute__((aligned(DIOSHIM_CACHELINE)));

/*
 * A write as wide as the stripe table (it would take every stripe): it
 * holds a slot with its range instead, so writes and reads of other
 * ranges go on beside it.  Writers that take stripes look at the slots
 * after taking them, and back off from one that overlaps; a wide writer
 * waits for the stripes held when it came, and for the overlapping wide
 * writers with a smaller ticket.
 */
struct dioshim_wide {
	DIOSHIM_ATOMIC(uint32_t) seq; /* odd while held; futex for waiters */
	DIOSHIM_ATOMIC(uint32_t) waiters; /* sleeping on seq */
	struct dioshim_owner owner; /* 0: free; ~0: being freed */
	DIOSHIM_ATOMIC(uint64_t) lo; /* [lo, hi): whole stripe blocks */
	DIOSHIM_ATOMIC(uint64_t) hi;
	DIOSHIM_ATOMIC(uint64_t) ticket; /* 0 while being taken */
	uint64_t pad[2];
} __attribute__((aligned(DIOSHIM_CACHELINE)));

struct dioshim_seg {
	/* Identity: written once by the creator, before state turns READY. */
	uint64_t magic;
	uint32_t version;
	uint32_t size; /* sizeof(struct dioshim_seg) */
	uint64_t dev; /* st_dev of the file */
	uint64_t ino; /* st_ino of the file */
	int64_t birth_sec; /* statx btime, if birth_kind says so */
	uint32_t birth_nsec;
	uint32_t birth_kind;
	uint32_t fs_magic; /* statfs f_type */
	uint32_t blksize; /* st_blksize, a power of two <= 1 MiB */
	DIOSHIM_ATOMIC(uint32_t) state; /* enum dioshim_seg_state */
	DIOSHIM_ATOMIC(uint32_t) flags; /* DIOSHIM_SEGF_* */

	/*
	 * Sizes.  Invariants: eof <= tail, eof <= phys.  phys is the kernel's
	 * i_size whenever no extension is in progress (changed only under
	 * ext_lock).  [eof, phys) holds no data once the writes in flight past
	 * eof have completed.  eof only grows, except under the barrier; tail
	 * likewise.
	 */
	DIOSHIM_ATOMIC(uint64_t) eof __attribute__((aligned(DIOSHIM_CACHELINE)));
	DIOSHIM_ATOMIC(uint64_t) tail; /* next O_APPEND offset: max end issued */
	DIOSHIM_ATOMIC(uint64_t) phys; /* kernel size: eof + reservation */
	/* appends waiting to publish (futex on publish_seq, bumped by every
	 * append that publishes while some wait) */
	DIOSHIM_ATOMIC(uint32_t) publish_waiters;
	DIOSHIM_ATOMIC(uint32_t) publish_seq;
	/* Asynchronous writes (libaio, io_uring): the furthest end submitted
	 * into the reservation since the last size change, which a trim must
	 * not cut while a live process has some in flight (slot's
	 * async_inflight); and the size-change epoch, bumped by every
	 * barrier, which tells a completion reaped late that a truncate came
	 * between its submission and now. */
	DIOSHIM_ATOMIC(uint64_t) async_end;
	DIOSHIM_ATOMIC(uint64_t) epoch;
	/* The mount the words are of (statx STATX_MNT_ID_UNIQUE, never
	 * reused; 0: unknown), set by each first user: a first user that
	 * finds its own mount here after its users were killed knows the
	 * filesystem did not go down meanwhile (recover_hint.live). */
	uint64_t mnt_id;
	/* The furthest end of any write at its own offset, or punch, that
	 * went past eof (raised before the kernel's call, kept while it is in
	 * flight): [max(eof, tail, touched), phys) is reserved blocks that
	 * nothing has written since they were reserved — allocated, reading
	 * as zeros — where a fallocate that grows the file has nothing to do
	 * in the kernel.  Only grows, but under the barrier. */
	DIOSHIM_ATOMIC(uint64_t) touched;

	/* Reservation policy state: only under ext_lock. */
	uint64_t chunk __attribute__((aligned(DIOSHIM_CACHELINE)));
	uint64_t last_reserve_ns; /* CLOCK_MONOTONIC of the last reservation */
	uint64_t last_reserve_phys; /* phys just before it */
	uint64_t keep_pad[2];
	/* what this file counts in its place's disk budget (the hint's
	 * entry for dev): its reserved tail when it last changed */
	uint64_t budget_charged;
	/* CLOCK_MONOTONIC of the last reservation the kernel refused (EIO,
	 * ENOSPC): none is tried for a while after it (writes go exact) */
	uint64_t reserve_failed_ns;
	uint64_t policy_pad[1];

	/*
	 * Barrier: raised (non-zero) while a size change drains the writers;
	 * 2 (BARRIER_CHANGING, inflight.h) from just before the kernel's size
	 * changes, so that whoever takes barrier_lock from a raiser that died
	 * there recomputes the size words from the kernel's size first.
	 * Writers read it after announcing themselves in their shard; the
	 * raiser reads the shards after raising it (both seq_cst: one of the
	 * two always sees the other).
	 */
	DIOSHIM_ATOMIC(uint32_t) barrier __attribute__((aligned(DIOSHIM_CACHELINE)));
	/* writers that met a raised barrier and have not yet got in since:
	 * the next raiser lets them in first, so size changes in a loop
	 * cannot starve writers */
	DIOSHIM_ATOMIC(uint32_t) barrier_waiters;
	struct dioshim_owner barrier_owner;
	/* Non-zero: the file is exact — nothing reserved, every call goes to
	 * the kernel as it is — because a process writes it without a slot
	 * (a guest, DESIGN.md 4).  Set by a guest under the barrier, after
	 * the reserved tail is cut; cleared only by a first live user that
	 * finds no guest's lock (DIOSHIM_GUEST_BASE).  Writers read it after
	 * announcing themselves and before the barrier. */
	DIOSHIM_ATOMIC(uint32_t) exact;
	uint32_t exact_pad;
	uint64_t barrier_pad2[4];

	/* Robust process-shared mutexes: the kernel hands a dead owner's lock
	 * to the next locker with EOWNERDEAD. */
	pthread_mutex_t barrier_lock __attribute__((aligned(DIOSHIM_CACHELINE)));
	pthread_mutex_t ext_lock __attribute__((aligned(DIOSHIM_CACHELINE)));
	pthread_mutex_t attach_lock __attribute__((aligned(DIOSHIM_CACHELINE)));

	/* Attach table: users counts the owned slots.  slots_hi bounds every
	 * walk of slot[]: no slot at or past it has ever been used, and the
	 * pages below it are allocated.  It only grows, under attach_lock,
	 * after the pages it adds are backed; readers bound it by
	 * DIOSHIM_MAX_PROCS. */
	DIOSHIM_ATOMIC(uint32_t) users __attribute__((aligned(DIOSHIM_CACHELINE)));
	DIOSHIM_ATOMIC(uint32_t) slots_hi;
	struct dioshim_owner creator;
	uint64_t birth_gen; /* identity: with birth_kind GEN, written once */
	/* the hint that counts this segment (HINT_GROUP_BIT | gid, or a
	 * uid): its creator added to it, its last detacher subtracts */
	uint64_t hint_key;
	uint64_t attach_pad[3];

	/* Group commit (DESIGN.md 2.7) and the durable-EOF record (5). */
	DIOSHIM_ATOMIC(uint64_t) sync_seq __attribute__((aligned(DIOSHIM_CACHELINE)));
	DIOSHIM_ATOMIC(uint64_t) sync_done; /* tickets the last sync covered */
	DIOSHIM_ATOMIC(uint64_t) sync_done_full; /* ... the last full fsync */
	DIOSHIM_ATOMIC(int32_t) sync_err;
	uint32_t sync_pad;
	DIOSHIM_ATOMIC(uint64_t) sync_err_seq; /* start of the last failed sync */
	/* What user.dioshim.eof says, as far as we know (0/0: no record);
	 * changed only under ext_lock. */
	DIOSHIM_ATOMIC(uint64_t) recorded_eof;
	DIOSHIM_ATOMIC(uint64_t) recorded_phys;
	/* eof when the last successful sync began: known durable */
	DIOSHIM_ATOMIC(uint64_t) synced_eof;
	pthread_mutex_t commit_lock __attribute__((aligned(DIOSHIM_CACHELINE)));

	/* Where the file was when the segment was made: lets `dioshim gc`
	 * trim a tail its writers left; verified against dev/ino before use. */
	char path[256] __attribute__((aligned(DIOSHIM_CACHELINE)));

	/* Appends done but not yet covered by eof, waiting for an earlier
	 * one: whoever moves eof to a done range's off moves it on to its
	 * end.  end == 0: a free entry. */
	struct dioshim_done {
		DIOSHIM_ATOMIC(uint64_t) off;
		DIOSHIM_ATOMIC(uint64_t) end;
		DIOSHIM_ATOMIC(uint32_t) wake; /* futex: set by the taker */
		uint32_t pad;
		uint64_t pad2;
	} done[DIOSHIM_DONE_RING] __attribute__((aligned(DIOSHIM_CACHELINE)));

	/* The extent-lock table's geometry, fixed by the creator (from
	 * DIOSHIM_STRIPES, DIOSHIM_STRIPE_SIZE): every user maps ranges alike */
	uint32_t stripes __attribute__((aligned(DIOSHIM_CACHELINE)));
	uint32_t stripe_shift; /* log2 of the stripe size, >= 9 */
	DIOSHIM_ATOMIC(uint64_t) wide_ticket; /* last wide ticket handed out */
	/* Bit p: page p of the lazy tables (from stripe[] on) is allocated
	 * (MADV_POPULATE_WRITE); set once it is, cleared only by a first
	 * live user (nobody else inside).  A page not allocated was never
	 * written: it reads as zeros without being touched. */
	DIOSHIM_ATOMIC(uint32_t) lazy_backed;
	uint32_t lazy_pad;
	uint64_t stripe_pad[5];
	struct dioshim_wide wide[DIOSHIM_WIDE_SLOTS];

	/* Hole prefill (DESIGN.md 2.2): bit i set = chunk i (of prefill_chunk
	 * bytes) has been allocated with fallocate(KEEP_SIZE), so writes into
	 * it are overwrites.  A cache: a clear bit only costs a fallocate.
	 * prefill_chunk (a power of two) only grows, under ext_lock, so that
	 * the bitmap covers the file; 0 = prefill off for this file.
	 * prefill_claim: a chunk being prefilled, as its offset + 1 in the
	 * word its offset hashes to (0 = free), so that racing writers make
	 * one fallocate per chunk. */
	DIOSHIM_ATOMIC(uint64_t) prefill_chunk __attribute__((aligned(DIOSHIM_CACHELINE)));
	uint64_t prefill_pad[7];

	/* What the file is, wherever it went (name_to_handle_at, by the
	 * creator): `dioshim gc` tells a file renamed from one deleted
	 * (ESTALE), whose tail went with it.  fh_bytes 0: none (a filesystem
	 * without handles, a longer one, or a creator older than the field:
	 * it sat in the head's unused tail, zeros, so the layout is the same
	 * for them). */
	struct dioshim_fh {
		uint32_t fh_bytes;
		int32_t fh_type;
		unsigned char fh[56];
	} handle __attribute__((aligned(DIOSHIM_CACHELINE)));

	/*
	 * Appends moved over ones that failed.  The kernel appends one at a
	 * time, so an append it refuses leaves nothing behind it; appends
	 * claimed in parallel past one that failed (their offsets taken,
	 * their data perhaps written, none published: a size covers only
	 * appends done before it) are made again lower, by the length of
	 * the failed ones below them — each by its own writer, in offset
	 * order, when eof reaches its new offset (its turn).  While a move
	 * is under way the tail is closed (DIOSHIM_TAIL_CLOSED): it covers
	 * the claims below end, and no append claims until it is over.
	 * Queued writes in flight forbid a move: their data is not the
	 * shim's to write again.  Written under the move's protocol
	 * (move.c); state and seq are futex words.
	 */
	struct dioshim_move {
		DIOSHIM_ATOMIC(uint32_t) state; /* MOVE_* (move.h) */
		DIOSHIM_ATOMIC(uint32_t) seq; /* bumped by every change */
		DIOSHIM_ATOMIC(uint64_t) end; /* the tail it closed at */
		DIOSHIM_ATOMIC(uint32_t) nvoids; /* voids[] taken */
		uint32_t pad;
		/* who is starting or closing it (MOVE_STARTING, _CLOSING):
		 * one that died there is taken over */
		struct dioshim_owner owner;
		uint64_t pad2[3];
		/* [off, end) in the offsets the appends claimed: ranges
		 * that hold nothing (a failed append; one whose writer
		 * died); end 0 while it is being written */
		struct dioshim_void {
			DIOSHIM_ATOMIC(uint64_t) off;
			DIOSHIM_ATOMIC(uint64_t) end;
		} voids[DIOSHIM_VOIDS];
	} move __attribute__((aligned(DIOSHIM_CACHELINE)));

	/* Ranges the size grew over without the program asking for blocks
	 * there (an ftruncate up, a fallocate past a gap): the kernel alone
	 * leaves them holes, the shim's reservation allocated them.  What
	 * no write has reached of them is punched at the last close.
	 * Under-approximated: a range the program allocated itself is never
	 * in one (lo == hi: a free entry).  Under ext_lock (gap.h). */
	struct dioshim_range {
		uint64_t lo, hi;
	} gap[DIOSHIM_GAPS] __attribute__((aligned(DIOSHIM_CACHELINE)));
	/* The blocks the program itself allocated past eof (fallocate
	 * KEEP_SIZE): cutting the reserved tail must leave them allocated,
	 * as the kernel alone would.  Over-approximated: when the entries
	 * run out, one grows to cover a new range.  Under ext_lock. */
	struct dioshim_range keep[DIOSHIM_KEEPS];

	/* Page-aligned: only the pages below slots_hi are backed. */
	struct dioshim_slot slot[DIOSHIM_MAX_PROCS] __attribute__((aligned(4096)));

	/* The lazy tables, page-aligned: a page is allocated when a writer
	 * first needs it (lazy_backed), so that a file with few writers
	 * holds a few pages of shared memory, not the whole table. */
	struct dioshim_stripe stripe[DIOSHIM_STRIPES] __attribute__((aligned(4096)));
	DIOSHIM_ATOMIC(uint64_t) prefill_claim[DIOSHIM_PREFILL_CLAIMS] __attribute__((aligned(4096)));
	DIOSHIM_ATOMIC(uint64_t) prefill[DIOSHIM_PREFILL_BITS / 64];
};
/* The part of a segment allocated when it is made: the head, before the
 * slots (and their first page with it). */
#define DIOSHIM_SEG_HEAD offsetof(struct dioshim_seg, slot)
/* The lazy tables: pages [0, DIOSHIM_LAZY_PAGES) from stripe[]. */
#define DIOSHIM_LAZY_OFF offsetof(struct dioshim_seg, stripe)
#define DIOSHIM_LAZY_PAGES \
	((sizeof(struct dioshim_seg) - DIOSHIM_LAZY_OFF + 4095) / 4096)

/*
 * The hint: one small segment per user (or per group, in group mode) that
 * says whether any file segment may exist.  Processes that never touch a
 * file with a segment (a build, tar) then pay no syscall to find out.
 * live over-counts after a crash (a segment left behind), never
 * under-counts: creators add before creating and subtract after unlinking.
 */
struct dioshim_hint {
	uint64_t magic;
	uint32_t version;
	uint32_t size;
	DIOSHIM_ATOMIC(uint64_t) live __attribute__((aligned(DIOSHIM_CACHELINE)));
	DIOSHIM_ATOMIC(uint64_t) gen; /* bumped by every segment creation */
	uint64_t pad[6];
	/* The disk budget (DESIGN.md 7): per filesystem, the bytes the
	 * place's files hold reserved past their logical size, so that
	 * together they stay a small part of its free space.  dev is
	 * st_dev | DIOSHIM_BUDGET_USED (0: a free entry, claimed once). */
	struct dioshim_budget {
		DIOSHIM_ATOMIC(uint64_t) dev;
		DIOSHIM_ATOMIC(uint64_t) reserved;
	} budget[DIOSHIM_BUDGETS] __attribute__((aligned(DIOSHIM_CACHELINE)));
	/* Appends of guests made without the append lock
	 * (DIOSHIM_APPEND_BASE) while the place had no segment (live 0),
	 * still in the kernel, by the file's hash % DIOSHIM_LOCKLESS: an
	 * append a member of a file kept exact places waits for them.  A
	 * guest counts itself in, then reads live; a segment's maker adds
	 * to live before making it. */
	struct dioshim_lockless {
		DIOSHIM_ATOMIC(uint32_t) n;
	} __attribute__((aligned(DIOSHIM_CACHELINE))) lockless[DIOSHIM_LOCKLESS];
};

#ifndef __cplusplus
_Static_assert(sizeof(struct dioshim_shard) == DIOSHIM_CACHELINE, "shard");
_Static_assert(sizeof(struct dioshim_stripe) == DIOSHIM_CACHELINE, "stripe");
_Static_assert(sizeof(struct dioshim_wide) == DIOSHIM_CACHELINE, "wide");
_Static_assert(sizeof(struct dioshim_slot) ==
		       (1 + DIOSHIM_SLOT_SHARDS) * DIOSHIM_CACHELINE,
	       "slot");
_Static_assert(sizeof(pthread_mutex_t) == 40, "glibc x86_64 mutex");
_Static_assert(offsetof(struct dioshim_seg, eof) == 1 * DIOSHIM_CACHELINE,
	       "eof line");
_Static_assert(offsetof(struct dioshim_seg, chunk) == 2 * DIOSHIM_CACHELINE,
	       "policy line");
_Static_assert(offsetof(struct dioshim_seg, barrier) == 3 * DIOSHIM_CACHELINE,
	       "barrier line");
_Static_assert(offsetof(struct dioshim_seg, barrier_lock) ==
		       4 * DIOSHIM_CACHELINE,
	       "barrier lock line");
_Static_assert(offsetof(struct dioshim_seg, users) == 7 * DIOSHIM_CACHELINE,
	       "attach line");
_Static_assert(offsetof(struct dioshim_seg, sync_seq) == 8 * DIOSHIM_CACHELINE,
	       "commit line");
_Static_assert(offsetof(struct dioshim_seg, path) == 10 * DIOSHIM_CACHELINE,
	       "path");
_Static_assert(offsetof(struct dioshim_seg, done) == 14 * DIOSHIM_CACHELINE,
	       "done ring");
_Static_assert(offsetof(struct dioshim_seg, stripes) == 46 * DIOSHIM_CACHELINE,
	       "stripe geometry");
_Static_assert(offsetof(struct dioshim_seg, handle) ==
			       offsetof(struct dioshim_seg, prefill_chunk) +
				       DIOSHIM_CACHELINE &&
		       offsetof(struct dioshim_seg, slot) == 4096,
	       "handle: in layout 5's unused head tail, nothing moved");
_Static_assert(offsetof(struct dioshim_seg, slot) % 4096 == 0, "slot pages");
_Static_assert(DIOSHIM_SEG_HEAD <= 4096, "segment head: one page");
_Static_assert(DIOSHIM_LAZY_OFF % 4096 == 0 &&
		       offsetof(struct dioshim_seg, prefill_claim) % 4096 == 0,
	       "lazy pages");
/* 64 stripes, one word of a range's stripe bitmap, to a page */
_Static_assert(64 * sizeof(struct dioshim_stripe) == 4096, "stripe page");
_Static_assert(DIOSHIM_LAZY_PAGES <= 32, "lazy_backed bits");
/* One page: a nearly full segment directory still holds it. */
_Static_assert(sizeof(struct dioshim_hint) ==
			       (6 + DIOSHIM_LOCKLESS) * DIOSHIM_CACHELINE &&
		       sizeof(struct dioshim_hint) <= 4096,
	       "hint");
#endif

#endif /* DIOSHIM_LAYOUT_H */
