// SPDX-License-Identifier: MIT
/*
 * The fd table.
 *
 * Two levels of lazily mmap'd chunks, so memory grows with the highest fd
 * seen, not with RLIMIT_NOFILE; a lookup is two dependent loads.  Entries
 * are NULL (never seen), OFD_PASS, OFD_QUIET, or an ofd shared by the fds
 * that dup made of one another.
 *
 * OFD_QUIET is what most opens of most programs get: a description that
 * is not an O_DIRECT writer, opened while no segment existed.  Until one
 * exists there is nothing to keep for it, so its open and close cost no
 * allocation and no lock; once one may (the hint), its first call gives
 * it an ofd of its own, as an open would have (quiet_wake).
 *
 * An fd closed behind the shim's back (fclose of an fdopen'd stream, a raw
 * syscall) leaves a stale entry until the number is reused: an open through
 * the shim replaces it, and its segment reference is then dropped without a
 * trim, since the number now names another file.
 *
 * Layer L4, its bottom: calls segment membership, hints and guests
 * (L1), the barrier's settling (L2), L0.
 */
#define _GNU_SOURCE
#include "fdtable.h"
#include "lockrank.h"
#include "fdtable_priv.h"

#include "abi.h"
#include "config.h"
#include "guard.h"
#include "inflight.h"
#include "log.h"
#include "mem.h"
#include "sys.h"

#include <errno.h>
#include <string.h>


/* The first chunk is hot.c's, on the page every call reads. */
fd_entry *_Atomic fdt[FDT_CHUNKS] = { fdt_chunk0 };
pthread_mutex_t fdt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ofd *ofd_free;

#define entry_get fdtable_peek

/* The chunk holding fd's entry, made if missing when make says so (then
 * under fdt_lock). */
static fd_entry *chunk_of(int fd, bool make)
{
	fd_entry *c;

	if ((unsigned)fd >= FDT_MAX)
		return NULL;
	c = atomic_load_explicit(&fdt[(unsigned)fd >> FDT_SHIFT],
				 memory_order_acquire);
	if (!c && make) {
		c = mem_alloc(FDT_CHUNK * sizeof(fd_entry));
		if (c)
			atomic_store_explicit(&fdt[(unsigned)fd >> FDT_SHIFT],
					      c, memory_order_release);
	}
	return c; /* none: unknown stays unknown, passed through */
}

/* Under fdt_lock. */
static void entry_set(int fd, struct ofd *o)
{
	fd_entry *c = chunk_of(fd, o != NULL);

	lock_held(LOCK_FDT);
	if (c)
		atomic_store_explicit(&c[(unsigned)fd & (FDT_CHUNK - 1)], o,
				      memory_order_release);
}

/* Replace fd's entry if it is still old, without the lock: entries that
 * hold nothing (NULL and the markers) change this way. */
static bool entry_cas(int fd, struct ofd *old, struct ofd *new)
{
	fd_entry *c = chunk_of(fd, false);

	return c && atomic_compare_exchange_strong(
			    &c[(unsigned)fd & (FDT_CHUNK - 1)], &old, new);
}

/* fn(fd, entry, arg) for every entry in [lo, hi] of a chunk there is. */
void each_entry(unsigned lo, unsigned hi,
		       void (*fn)(unsigned, fd_entry *, void *), void *arg)
{
	unsigned c, i;

	if (hi >= FDT_MAX)
		hi = FDT_MAX - 1;
	for (c = lo >> FDT_SHIFT; c <= hi >> FDT_SHIFT && lo <= hi; c++) {
		fd_entry *chunk = atomic_load(&fdt[c]);

		for (i = 0; chunk && i < FDT_CHUNK; i++) {
			unsigned fd = (c << FDT_SHIFT) | i;

			if (fd >= lo && fd <= hi)
				fn(fd, &chunk[i], arg);
		}
	}
}

/* Call fn(fd, o) for every entry that names an ofd; under fdt_lock. */
static void ofd_each(unsigned fd, fd_entry *e, void *fn)
{
	struct ofd *o = atomic_load(e);

	lock_held(LOCK_FDT);
	if (is_ofd(o))
		((void (*)(int, struct ofd *))fn)((int)fd, o);
}

void for_each_ofd(void (*fn)(int, struct ofd *))
{
	each_entry(0, FDT_MAX - 1, ofd_each, (void *)fn);
}

/*
 * Descriptors closed from a signal handler that interrupted this process
 * inside the shim, where fdt_lock may be held by the very thread the
 * handler runs on.  The entry goes at once, lock-free, so that the number,
 * reused for a socket or a pipe, is never taken for the file; the
 * reference is put later, under fdt_lock, with no descriptor: a copy of
 * the application's would keep its open file description (a flock) alive,
 * and closing it would drop the process's POSIX locks on the file.  The
 * last one out then cannot cut the reserved tail; the next user, or
 * `dioshim gc`, does.
 */
#define LATE_PUTS 64
enum { LATE_FREE, LATE_FILLING, LATE_READY };
static struct late_put {
	_Atomic int state;
	struct ofd *o;
} late[LATE_PUTS];
static _Atomic unsigned late_pending;

static void ofd_put(struct ofd *o, int fd);
static void guest_recheck(int fd, struct ofd *o, uint64_t gen);
static void raw_drain(struct ofd *o);

/* Take fdt_lock, and put what handlers left behind. */
void fdt_lock_take(void)
{
	int i;

	rank_lock(&fdt_lock, LOCK_FDT);
	if (__builtin_expect(!atomic_load_explicit(&late_pending,
						   memory_order_acquire),
			     1))
		return;
	for (i = 0; i < LATE_PUTS; i++) {
		if (atomic_load(&late[i].state) != LATE_READY)
			continue;
		ofd_put(late[i].o, -1);
		atomic_store(&late[i].state, LATE_FREE);
		atomic_fetch_sub(&late_pending, 1);
	}
}

void fdtable_close_reentrant(int fd)
{
	struct ofd *o = entry_get(fd);
	fd_entry *c;
	int i;

	if (!o || (unsigned)fd >= FDT_MAX)
		return;
	c = atomic_load(&fdt[(unsigned)fd >> FDT_SHIFT]);
	if (!c || !atomic_compare_exchange_strong(
			  &c[(unsigned)fd & (FDT_CHUNK - 1)], &o, NULL) ||
	    !is_ofd(o))
		return;
	for (i = 0; i < LATE_PUTS; i++) {
		int free_ = LATE_FREE;

		if (!atomic_compare_exchange_strong(&late[i].state, &free_,
						    LATE_FILLING))
			continue;
		late[i].o = o;
		atomic_store(&late[i].state, LATE_READY);
		atomic_fetch_add(&late_pending, 1);
		return;
	}
	/* No room: the description stays attached until the process ends
	 * (its reference is never put), which keeps every rule. */
}

static struct ofd *ofd_new(int flags, uint32_t state, struct shim_file *f,
			   uint64_t gen)
{
	struct ofd *o = ofd_free;

	if (o)
		ofd_free = o->next;
	else
		o = mem_alloc(sizeof(*o));
	if (!o) {
		if (f)
			segment_put(f, -1);
		return OFD_PASS;
	}
	{
		uint64_t inc = (atomic_load(&o->raw) >> 32) + 1;

		memset(o, 0, sizeof(*o));
		atomic_store(&o->raw, inc << 32);
	}
	o->pos_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	atomic_store(&o->file, f);
	atomic_store(&o->flags, (uint32_t)flags);
	o->state = state;
	o->checked_gen = gen;
	o->refs = 1;
	return o;
}

/* Descriptions holding a pin; under fdt_lock. */
static unsigned pinned_n;

/* o's announcement as a guest, if it has one, goes. */
static void ofd_unpin(struct ofd *o)
{
	lock_held(LOCK_FDT);

	if (o->pin.held) {
		guest_drop(o->pin.key, o->pin.dev, o->pin.ino);
		o->pin.held = false;
		pinned_n--;
	}
}

/*
 * After an attach attempt for o that gave f: o keeps the
 * announcement *p (one per description) while it is not attached;
 * attached, or OFD_PASS, it needs none.
 */
void ofd_pin(struct ofd *o, struct shim_file *f, struct guest_pin *p)
{
	bool keep = o != OFD_PASS && !f;

	if (o != OFD_PASS && !keep)
		ofd_unpin(o);
	if (p->held) {
		if (keep && !o->pin.held) {
			o->pin = *p;
			pinned_n++;
		} else
			guest_drop(p->key, p->dev, p->ino);
		p->held = false;
	}
}

/*
 * A lone writer leaves (fd still open): a segment another process made
 * for its file and left when it saw this one announced (members leave
 * it to the guests) is this one's to take away now — attached and put,
 * as its last user.  Only where its place may hold a segment.
 */
static void guest_leaves(int fd, const struct guest_pin *p)
{
	struct shim_file *g;
	struct file_id id;

	if (fd < 0 || hint_key_idle(p->key) || !file_identify(fd, &id))
		return;
	g = segment_attach(fd, &id, false);
	if (g)
		segment_put(g, fd);
}

/* Drop one fd's reference; fd is still open (or -1 when the number no
 * longer names this file). */
static void ofd_put(struct ofd *o, int fd)
{
	struct shim_file *f;
	struct guest_pin lone;

	if (!is_ofd(o) || --o->refs)
		return;
	lone = o->pin;
	ofd_unpin(o);
	if (lone.held && !atomic_load(&o->file))
		guest_leaves(fd, &lone);
	f = atomic_load(&o->file);
	o->next = ofd_free;
	ofd_free = o;
	if (f)
		segment_put(f, fd);
}

bool direct_writer(int flags)
{
	return (flags & O_DIRECT) && (flags & O_ACCMODE) != O_RDONLY;
}

/* What an O_DIRECT writer does on a file with no segment: announce
 * itself and wait for a second writer (DESIGN.md 7), or, with
 * DIOSHIM_ENGAGE=always, make one at once. */
static enum seg_want writer_want(void)
{
	return config.engage_always ? SEG_MAKE : SEG_LAZY;
}

/* Identify fd and attach it if its file has a segment; an O_DIRECT writer
 * does as want says when it has none.  Under fdt_lock. */
static struct shim_file *identify_attach(int fd, int flags, bool *servable,
					 struct guest_pin *pin,
					 enum seg_want want)
{
	struct file_id id;

	lock_held(LOCK_FDT);
	pin->held = false;
	*servable = file_identify(fd, &id);
	if (!*servable)
		return NULL;
	if (!io_kernel_ready()) {
		*servable = false;
		return NULL;
	}
	return segment_attach_pin(fd, &id,
				  direct_writer(flags) ? want : SEG_FIND, pin);
}

/*
 * Our other descriptions of a file that are its guest writers (pinned, not
 * attached) when a segment is about to be made for it: each is held back
 * (engaging), its writes drained, its pin given back — else the segment
 * would be made exact for our own sake — and attached once it is made.
 * Under fdt_lock.
 */
#define SIBLINGS_MAX 16
struct sibling {
	struct ofd *o;
	int fd;
	struct guest_pin pin;
};
static struct {
	const struct file_id *id;
	struct ofd *self;
	struct sibling *sib;
	int n;
} take_ctx;

static void sibling_take(int fd, struct ofd *o)
{
	uint32_t idle = 0;
	int i;

	lock_held(LOCK_FDT);
	if (o == take_ctx.self || !o->pin.held || atomic_load(&o->file) ||
	    o->pin.dev != take_ctx.id->dev || o->pin.ino != take_ctx.id->ino ||
	    take_ctx.n == SIBLINGS_MAX)
		return;
	for (i = 0; i < take_ctx.n; i++)
		if (take_ctx.sib[i].o == o)
			return; /* a dup of one taken */
	/* One attaching itself (waiting for this lock) is left to it. */
	if (!atomic_compare_exchange_strong(&o->engaging, &idle, 1))
		return;
	raw_drain(o);
	take_ctx.sib[take_ctx.n++] = (struct sibling){ o, fd, o->pin };
	ofd_unpin(o);
}

static int siblings_take(const struct file_id *id, struct ofd *self,
			 struct sibling *sib)
{
	if (!pinned_n)
		return 0;
	take_ctx.id = id;
	take_ctx.self = self;
	take_ctx.sib = sib;
	take_ctx.n = 0;
	for_each_ofd(sibling_take);
	return take_ctx.n;
}

/* Attach the siblings taken (a segment was made, or not: then each
 * announces itself again). */
static void siblings_attach(const struct file_id *id, struct sibling *sib,
			    int n)
{
	struct shim_file *f;
	int i;

	for (i = 0; i < n; i++) {
		struct ofd *o = sib[i].o;

		f = segment_attach(sib[i].fd, id, false);
		if (f) {
			o->state = OFD_ATTACHED;
			atomic_store_explicit(&o->file, f,
					      memory_order_release);
		} else if (guest_hold(sib[i].pin.key, id->dev, id->ino)) {
			o->pin = sib[i].pin;
			pinned_n++;
		}
		atomic_store(&o->engaging, 0);
	}
}

/* An O_DIRECT writer's attach through fd (o, or NULL while opening): a
 * segment made at once, with its siblings, if any description of ours is
 * a guest writer of the same file; else as want says. */
static struct shim_file *writer_attach(int fd, struct ofd *o, int flags,
				       bool *servable, struct guest_pin *pin,
				       enum seg_want want)
{
	struct sibling sib[SIBLINGS_MAX];
	struct shim_file *f;
	struct file_id id;
	int n = 0;

	if (pinned_n && direct_writer(flags) && file_identify(fd, &id))
		n = siblings_take(&id, o, sib);
	f = identify_attach(fd, flags, servable, pin, n ? SEG_MAKE : want);
	if (n)
		siblings_attach(&id, sib, n);
	return f;
}

/* What an open with flags gives fd: OFD_QUIET only where quiet says it
 * may be.  record: the file carries an EOF record (it is looked at, so
 * that its first user recovers it).  Under fdt_lock. */
static struct ofd *classify(int fd, int flags, bool quiet, bool record)
{
	struct guest_pin pin;
	struct shim_file *f;
	struct ofd *o;
	uint64_t gen;
	bool servable;

	lock_held(LOCK_FDT);
	/* O_TMPFILE carries the O_DIRECTORY bit but opens a regular file.
	 * O_PATH fds are served for the sizes fstat gives through them. */
	if ((flags & O_DIRECTORY) && (flags & O_TMPFILE) != O_TMPFILE &&
	    !(flags & O_PATH))
		return OFD_PASS;
	/* The generation is read before looking: a segment created after
	 * this point changes it, and the fd is looked at again. */
	if (!hint_look(&gen) && !direct_writer(flags) && !record)
		return quiet ? OFD_QUIET :
			       ofd_new(flags, OFD_UNCHECKED, NULL, gen);
	f = writer_attach(fd, NULL, flags, &servable, &pin, writer_want());
	o = servable ? ofd_new(flags, f ? OFD_ATTACHED : OFD_WATCH, f, gen) :
		       OFD_PASS;
	ofd_pin(o, f, &pin);
	return o;
}

/*
 * An entry that holds nothing (was: NULL or a quiet marker) is to be
 * given what its fd is, asked of the kernel: it is marked OFD_WAKING
 * meanwhile.  A close and an open of the number by another thread then
 * take the lock and wait (only entries that hold nothing are changed
 * without it), where they could otherwise have put a quiet entry of
 * another description back in its place, unseen (the same marker); a
 * signal handler's close (fdtable_close_reentrant) clears it, and
 * wake_end sees that.  Under fdt_lock.
 */
static bool wake_begin(int fd, struct ofd *was)
{
	lock_held(LOCK_FDT);

	return chunk_of(fd, true) && entry_cas(fd, was, OFD_WAKING);
}

/* The entry, marked by wake_begin, becomes o, unless a signal handler
 * closed the number meanwhile (o is dropped).  The entry as it then is. */
static struct ofd *wake_end(int fd, struct ofd *o)
{
	if (!entry_cas(fd, OFD_WAKING, o)) {
		ofd_put(o, -1);
		return entry_get(fd);
	}
	return o;
}

static struct ofd *adopt(int fd)
{
	struct ofd *o;
	int flags;

	fdt_lock_take();
	o = entry_get(fd);
	if (!o && wake_begin(fd, NULL)) {
		flags = sys_fcntl(fd, F_GETFL, 0);
		o = wake_end(fd, flags < 0 ? NULL
					       : classify(fd, flags, true, false));
	}
	rank_unlock(&fdt_lock, LOCK_FDT);
	return o;
}

static void recheck(int fd, struct ofd *o, uint64_t gen)
{
	struct guest_pin pin;
	struct shim_file *f;
	bool servable;

	fdt_lock_take();
	if (entry_get(fd) == o && !atomic_load(&o->file) &&
	    o->state != OFD_NEVER) {
		/* A guest joins a segment someone made; makes none. */
		f = identify_attach(fd, (int)atomic_load(&o->flags),
				    &servable, &pin,
				    o->pin.held ? SEG_FIND : writer_want());
		ofd_pin(o, f, &pin);
		if (!servable) {
			o->state = OFD_NEVER;
		} else if (f) {
			o->state = OFD_ATTACHED;
			atomic_store_explicit(&o->file, f,
					      memory_order_release);
		} else {
			o->state = OFD_WATCH;
		}
		o->checked_gen = gen;
	}
	rank_unlock(&fdt_lock, LOCK_FDT);
}

/* fd's quiet entry, now that a segment may exist, that a dup must share
 * it or that its flags changed: what an open with the kernel's flags for
 * it would give now — an ofd of its own unless quiet allows a quiet entry
 * again.  Returns fd's entry as it then is.  Under fdt_lock. */
static struct ofd *quiet_wake(int fd, bool quiet)
{
	struct ofd *was = entry_get(fd), *o = was;
	int flags;

	lock_held(LOCK_FDT);
	if (!is_quiet(was) || !wake_begin(fd, was))
		return entry_get(fd);
	flags = sys_fcntl(fd, F_GETFL, 0);
	if (flags >= 0) {
		o = classify(fd, flags, quiet, false);
		if (o == OFD_QUIET)
			o = was;
		else if (is_ofd(o) && was == OFD_QUIET_INHERITED)
			atomic_store(&o->shared, true);
	}
	return wake_end(fd, o);
}

struct ofd *fdtable_resolve(int fd)
{
	static const struct timespec nap = { 0, 50000 };
	struct ofd *o = entry_get(fd);
	struct shim_file *f;
	uint64_t gen;

	/* Another thread is closing the number: the call is made once the
	 * close is done (to the kernel: EBADF, or the file opened on the
	 * number since, looked at then). */
	while (o == OFD_CLOSING) {
		nanosleep(&nap, NULL);
		o = entry_get(fd);
	}
	if (o == OFD_PASS)
		return NULL;
	if (!o) {
		o = adopt(fd);
		if (!o || o == OFD_PASS)
			return NULL;
	}
	/* Quiet, or being woken by another thread (its answer waits for
	 * the lock). */
	if (is_quiet(o) || o == OFD_WAKING) {
		if (!hint_maybe_live())
			return NULL;
		fdt_lock_take();
		o = quiet_wake(fd, false);
		rank_unlock(&fdt_lock, LOCK_FDT);
		if (!is_ofd(o))
			return NULL;
	}
	f = atomic_load_explicit(&o->file, memory_order_acquire);
	if (f)
		return segment_serves(f, fd) ? o : NULL;
	/* Watching: one load says whether any segment exists at all. */
	if (!hint_look(&gen))
		return NULL;
	if (gen == __atomic_load_n(&o->checked_gen, __ATOMIC_RELAXED) &&
	    gen != UINT64_MAX)
		return NULL;
	if (__atomic_load_n(&o->state, __ATOMIC_RELAXED) == OFD_NEVER)
		return NULL;
	if (o->pin.held)
		guest_recheck(fd, o, gen);
	else
		recheck(fd, o, gen);
	f = atomic_load_explicit(&o->file, memory_order_acquire);
	return f && segment_serves(f, fd) ? o : NULL;
}

/* ---- guest writers ------------------------------------------------------
 *
 * A writer with no segment — alone on its file so far, or one that none
 * could be made for — writes through the kernel as the program wrote.
 * Its announcement (the pin) keeps any segment made meanwhile exact.  When
 * it attaches (a second write of its own in flight, a queued write, a
 * segment someone else made), no write of its own may still be in the
 * kernel: once it is a member and the file may leave exact, a reservation
 * could put the kernel's size past that write's end, then cut it.  So its
 * writes are counted, and the one thread that attaches it holds the
 * others back and waits for the count to drain first.
 */

static void raw_drain(struct ofd *o)
{
	struct timespec ts = { 0, 20000 };

	while ((uint32_t)atomic_load(&o->raw))
		nanosleep(&ts, NULL);
}

static void engaging_wait(struct ofd *o)
{
	struct timespec ts = { 0, 20000 };

	while (atomic_load(&o->engaging))
		nanosleep(&ts, NULL);
}

/* A guest's recheck: its own writes drained first (see above); once it
 * is in, the words its maker takes from the kernel's size (the barrier
 * stays up until then) before any size is read through them. */
static void guest_recheck(int fd, struct ofd *o, uint64_t gen)
{
	uint32_t idle = 0;
	struct shim_file *f;
	struct guard g;

	/* It takes fdt_lock and may wait (its writes, other guests). */
	guard_enter(&g, false);
	if (!atomic_compare_exchange_strong(&o->engaging, &idle, 1)) {
		engaging_wait(o);
	} else {
		raw_drain(o);
		recheck(fd, o, gen);
		atomic_store(&o->engaging, 0);
		f = atomic_load(&o->file);
		if (f)
			barrier_settle(f, fd);
	}
	guard_exit(&g, 0, 0);
}

/* Attach o, making its file's segment, its writes drained first; false
 * if it stays a guest. */
static bool guest_engage(int fd, struct ofd *o)
{
	struct guest_pin pin;
	struct shim_file *f = NULL;
	uint32_t idle = 0;
	struct guard g;
	bool servable;

	if (atomic_load(&o->nomake))
		return false;
	guard_enter(&g, false);
	if (!atomic_compare_exchange_strong(&o->engaging, &idle, 1)) {
		engaging_wait(o);
		guard_exit(&g, 0, 0);
		return atomic_load(&o->file) != NULL;
	}
	raw_drain(o);
	fdt_lock_take();
	if (entry_get(fd) == o && !atomic_load(&o->file) && o->pin.held) {
		/* Our own announcement would keep the new segment exact. */
		ofd_unpin(o);
		f = writer_attach(fd, o, (int)atomic_load(&o->flags),
				  &servable, &pin, SEG_MAKE);
		ofd_pin(o, f, &pin);
		if (f) {
			o->state = OFD_ATTACHED;
			atomic_store_explicit(&o->file, f,
					      memory_order_release);
		} else {
			atomic_store(&o->nomake, true);
		}
	}
	rank_unlock(&fdt_lock, LOCK_FDT);
	atomic_store(&o->engaging, 0);
	guard_exit(&g, 0, 0);
	return f != NULL;
}

struct ofd *fdtable_guest_writer(int fd)
{
	struct ofd *o = fdtable_peek(fd);

	if (!o || o == OFD_PASS || atomic_load_explicit(&o->file,
							memory_order_acquire))
		return NULL;
	return __atomic_load_n(&o->pin.held, __ATOMIC_RELAXED) ? o : NULL;
}

bool fdtable_raw_enter(int fd, struct ofd *o, uint32_t *incarnation)
{
	uint64_t old;

	for (;;) {
		if (atomic_load(&o->engaging)) {
			engaging_wait(o);
			if (atomic_load(&o->file))
				return false;
		}
		old = atomic_fetch_add(&o->raw, 1);
		*incarnation = (uint32_t)(old >> 32);
		if (atomic_load(&o->engaging)) {
			fdtable_raw_exit(o, *incarnation);
			continue;
		}
		/* Alone, or no segment to be had: through the kernel. */
		if ((!(uint32_t)old && !atomic_load(&o->shared)) ||
		    atomic_load(&o->nomake))
			return true;
		/* A second one in flight: this file is written in
		 * parallel. */
		fdtable_raw_exit(o, *incarnation);
		if (guest_engage(fd, o))
			return false;
	}
}

void fdtable_raw_exit(struct ofd *o, uint32_t incarnation)
{
	uint64_t cur = atomic_load(&o->raw);

	while ((uint32_t)(cur >> 32) == incarnation && (uint32_t)cur &&
	       !atomic_compare_exchange_weak(&o->raw, &cur, cur - 1))
		;
}

bool fdtable_guests(void)
{
	return __atomic_load_n(&pinned_n, __ATOMIC_RELAXED) != 0;
}

void fdtable_engage_fd(int fd)
{
	struct ofd *o = fdtable_guest_writer(fd);

	if (o)
		guest_engage(fd, o);
}

void fdtable_opened(int fd, int flags, bool record)
{
	struct ofd *stale;
	uint64_t gen;

	/* Most opens: nothing to keep, an entry with nothing in it. */
	if (!direct_writer(flags) && !record && !hint_look(&gen) &&
	    entry_cas(fd, NULL, OFD_QUIET))
		return;
	fdt_lock_take();
	stale = entry_get(fd);
	if (stale && stale != OFD_PASS)
		ofd_put(stale, -1);
	entry_set(fd, classify(fd, flags, true, record));
	rank_unlock(&fdt_lock, LOCK_FDT);
}

bool fdtable_forget_light(int fd)
{
	struct ofd *o = entry_get(fd);

	return !o ||
	       ((is_quiet(o) || o == OFD_PASS) && entry_cas(fd, o, NULL));
}

void fdtable_close(int fd)
{
	struct ofd *o;

	if (fdtable_forget_light(fd))
		return;
	fdt_lock_take();
	o = entry_get(fd);
	if (o) {
		entry_set(fd, is_ofd(o) ? OFD_CLOSING : NULL);
		ofd_put(o, fd);
	}
	rank_unlock(&fdt_lock, LOCK_FDT);
}

void fdtable_closed(int fd)
{
	entry_cas(fd, OFD_CLOSING, NULL);
}

/* Under fdt_lock: drop an entry, marking it closing where arg says a
 * close follows and the description was an ofd. */
static void drop_one(unsigned fd, fd_entry *e, void *arg)
{
	bool closing = *(bool *)arg;
	struct ofd *o = atomic_load(e);

	if (!o)
		return;
	atomic_store(e, closing && is_ofd(o) ? OFD_CLOSING : NULL);
	ofd_put(o, (int)fd);
}

static void drop_range(unsigned lo, unsigned hi, bool closing)
{
	each_entry(lo, hi, drop_one, &closing);
}

static void closed_one(unsigned fd, fd_entry *e, void *arg)
{
	(void)arg;
	if (atomic_load(e) == OFD_CLOSING)
		entry_cas((int)fd, OFD_CLOSING, NULL);
}

void fdtable_closed_range(unsigned lo, unsigned hi)
{
	each_entry(lo, hi, closed_one, NULL);
}

void fdtable_close_range(unsigned lo, unsigned hi)
{
	fdt_lock_take();
	drop_range(lo, hi, true);
	rank_unlock(&fdt_lock, LOCK_FDT);
}

void fdtable_dup(int oldfd, int newfd)
{
	struct ofd *o, *stale;

	fdt_lock_take();
	o = entry_get(oldfd);
	/* Dups share one ofd, as they share the description: two quiet
	 * entries would be woken apart (quiet_wake). */
	if (is_quiet(o))
		o = quiet_wake(oldfd, false);
	stale = entry_get(newfd);
	if (stale && stale != OFD_PASS)
		ofd_put(stale, -1);
	if (is_ofd(o))
		o->refs++;
	entry_set(newfd, o);
	rank_unlock(&fdt_lock, LOCK_FDT);
}

void fdtable_setfl(int fd)
{
	struct guest_pin pin;
	struct ofd *o;
	struct shim_file *f;
	bool servable;
	int flags;

	fdt_lock_take();
	o = entry_get(fd);
	if (is_quiet(o)) {
		quiet_wake(fd, true);
		rank_unlock(&fdt_lock, LOCK_FDT);
		return;
	}
	flags = sys_fcntl(fd, F_GETFL, 0);
	if (o && o != OFD_PASS && flags >= 0) {
		atomic_store(&o->flags, (uint32_t)flags);
		/* O_DIRECT turned on for a writer: from now on it is one. */
		if (!atomic_load(&o->file) && o->state != OFD_NEVER &&
		    direct_writer(flags)) {
			f = identify_attach(fd, flags, &servable, &pin,
					    writer_want());
			ofd_pin(o, f, &pin);
			if (!servable)
				o->state = OFD_NEVER;
			if (f) {
				o->state = OFD_ATTACHED;
				atomic_store_explicit(&o->file, f,
						      memory_order_release);
			}
		}
	}
	rank_unlock(&fdt_lock, LOCK_FDT);
}

void fdtable_release_all(void)
{
	fdt_lock_take();
	drop_range(0, FDT_MAX - 1, false);
	rank_unlock(&fdt_lock, LOCK_FDT);
}
