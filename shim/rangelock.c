// SPDX-License-Identifier: MIT
/*
 * The extent-lock table.
 *
 * Stripe i covers every block whose number modulo the stripe count is i
 * (blocks of 2^stripe_shift bytes): a range maps to the stripes of its
 * blocks, all of them when it spans the table.  Writes to disjoint blocks
 * mostly take disjoint stripes, each on a cache line of its own; a write
 * wider than the table takes all of it.  Stripes are always taken in
 * ascending index order, so no two writers deadlock.
 *
 * A writer owns a stripe by writing its owner word (pid and start time)
 * and makes the stripe's count odd; it makes the count even again before
 * it lets go.  A reader waits for even counts, reads, and reads again if a
 * count moved.  A holder killed with kill -9 is found by whoever waits on
 * it past STRIPE_PATIENCE_NS, and its stripe is taken over (an odd count
 * made even).
 *
 * Wide writes: a range as wide as the table would take every stripe and
 * hold up every reader and writer of the file.  It takes a wide slot
 * instead (struct dioshim_wide: its range, a ticket), which it makes odd,
 * then waits for the stripes held when it came and for the overlapping
 * wide writers with smaller tickets.  A writer that took stripes looks at
 * the slots (a fence between, as in Dekker's algorithm: of a stripe
 * writer and a wide one, at least one sees the other) and, if one held
 * overlaps its range, lets its stripes go and waits for the slot.  A
 * reader waits for the overlapping slots held, notes the wide ticket, and
 * at validation finds every wide write begun since in the slots: its read
 * is valid if none overlaps.  A wide writer killed is found by whoever
 * waits on it, as for stripes.  All slots taken: every stripe, as before.
 *
 * Fairness: a reader whose reads keep meeting writers sets the gate word
 * of its stripes (its owner word, if no other reader's is there); a
 * writer waits at every gate of its range before taking the first stripe
 * — never once it holds one, so a gate cannot close a cycle — until the
 * reader is done, is found dead, or GATE_PATIENCE_NS has passed.  Readers
 * write nothing shared until they have met writers.
 *
 * The table's pages are allocated as writers first need them (a page of
 * 64 stripes: one word of a range's bitmap): a stripe in a page not yet
 * allocated was never taken, and readers and drainers pass it by without
 * touching it.  A writer that cannot have its pages (the segment
 * directory is full) holds a wide slot for its range instead, and writes
 * unlocked only when none is free.
 *
 * Lock order: stripes are taken after the in-flight count and before
 * ext_lock (the reservation), and held across the kernel's write.
 *
 * Layer L2, above gap; calls only L1 (owners, segment slots and lazy
 * pages) and L0.  (The order
 * inside L2 is shim/layers'.)
 *
 * Layer L2: calls owners and segment membership (L1), L0.
 */
#define _GNU_SOURCE
#include "rangelock.h"

#include "config.h"
#include "log.h"
#include "sys.h"

#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define STRIPE_PATIENCE_NS 20000000ull /* before asking if a holder lives */
#define READ_TRIES 1 /* reads that met a writer, before gating */
/* ... before locking the range like a writer: a read longer than the
 * gate's patience would otherwise meet writers for ever. */
#define READ_LOCK_TRIES 8
/* How long a writer waits at a gate, whoever holds it: past that the gate
 * is void (its reader stopped, or slower than any read should be). */
#define GATE_PATIENCE_NS 100000000ull

void rangelock_init(struct dioshim_seg *seg)
{
	seg->stripes = config.stripes;
	seg->stripe_shift = config.stripe_shift;
}

/* The table's geometry, bounded: a segment's words are not trusted. */
static bool geometry(struct dioshim_seg *seg, uint32_t *n, uint32_t *shift)
{
	*n = seg->stripes;
	*shift = seg->stripe_shift;
	return *n >= 1 && *n <= DIOSHIM_STRIPES && !(*n & (*n - 1)) &&
	       *shift >= 9 && *shift <= 30;
}

static void cover(struct dioshim_seg *seg, uint64_t off, uint64_t len,
		  struct rangelock *rl)
{
	uint32_t n, shift;
	uint64_t first, last, b;

	memset(rl->bits, 0, sizeof(rl->bits));
	rl->wide = 0;
	rl->all = false;
	rl->active = geometry(seg, &n, &shift) && len;
	if (!rl->active)
		return;
	first = off >> shift;
	last = (off + len - 1) >> shift;
	rl->lo = first << shift;
	rl->hi = last + 1 < (UINT64_MAX >> shift) ? (last + 1) << shift
						 : UINT64_MAX;
	if (last - first + 1 >= n) {
		rl->all = true;
		memset(rl->bits, 0xff, n / 8 ? n / 8 : 1);
		if (n < 64)
			rl->bits[0] = (1ull << n) - 1;
		return;
	}
	for (b = first; b <= last; b++)
		rl->bits[(b & (n - 1)) / 64] |= 1ull << ((b & (n - 1)) % 64);
}

/* Whether stripe i's page is allocated (else it was never taken). */
static bool stripe_backed(const struct dioshim_seg *seg, unsigned i)
{
	return lazy_is_backed(seg, &seg->stripe[i]);
}

/* Allocate the pages of rl's stripes; false if they cannot be. */
static bool stripes_back(struct dioshim_seg *seg, const struct rangelock *rl)
{
	unsigned w;

	for (w = 0; w < DIOSHIM_STRIPES / 64; w++)
		if (rl->bits[w] && !lazy_back(seg, &seg->stripe[w * 64],
					      64 * sizeof(seg->stripe[0])))
			return false;
	return true;
}

#define for_each_stripe(rl, i)                                          \
	for (unsigned w_ = 0; w_ < DIOSHIM_STRIPES / 64; w_++)          \
		for (uint64_t m_ = (rl)->bits[w_];                      \
		     m_ && ((i) = w_ * 64 + (unsigned)__builtin_ctzll(m_), 1); \
		     m_ &= m_ - 1)

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
	struct timespec slice = { 0, 5000000 };

	sys_futex_wait(w, val, &slice);
}

static void futex_wake_all(_Atomic uint32_t *w)
{
	sys_futex_wake(w, INT32_MAX);
}

/* A stripe whose holder is gone: take it over (we are a writer) or free
 * it (we only read).  True if it changed hands. */
static bool reclaim_dead(uint64_t key, struct dioshim_stripe *s,
			 uint64_t holder, uint64_t to)
{
	/* Freeing (to 0), we hold it ourselves while the count is put
	 * right: an owner word at 0 with the count still odd would let a
	 * new holder in whose count we then made even. */
	uint64_t via = to ? to : owner_self()->pid_start;

	if (!holder || owner_alive_in(key, holder, s->writer.pidns))
		return false;
	if (!atomic_compare_exchange_strong(&s->writer.pid_start, &holder,
					    via))
		return false;
	log_event(LOG_RECLAIM, NULL,
		  "extent lock: holder %llu died; taken over",
		  (unsigned long long)(holder & DIOSHIM_OWNER_PID_MASK));
	/* It died holding the stripe: its count is odd. */
	if (atomic_load(&s->seq) & 1) {
		if (!to)
			atomic_fetch_add_explicit(&s->seq, 1,
						  memory_order_release);
	} else if (to) {
		atomic_fetch_add_explicit(&s->seq, 1, memory_order_acq_rel);
	}
	if (!to) {
		atomic_store_explicit(&s->writer.pid_start, 0,
				      memory_order_release);
		if (atomic_load(&s->waiters))
			futex_wake_all(&s->seq);
	}
	return true;
}

/* One round of waiting on s while *w holds v: a pause for the first
 * rounds, then a sleep on the stripe's count (*start set when sleeping
 * begins).  False while it only spins. */
static bool stripe_pause(struct dioshim_stripe *s, _Atomic uint64_t *w,
			 uint64_t v, unsigned *spins, uint64_t *start)
{
	uint32_t seq;

	if (++*spins < 64) {
		__builtin_ia32_pause();
		return false;
	}
	if (!*start)
		*start = now_ns();
	seq = atomic_load(&s->seq);
	atomic_fetch_add(&s->waiters, 1);
	if (atomic_load(w) == v)
		futex_wait(&s->seq, seq);
	atomic_fetch_sub(&s->waiters, 1);
	return true;
}

/* The same on a 32-bit count itself: while *seq is v. */
static bool seq_pause(_Atomic uint32_t *seq, _Atomic uint32_t *waiters,
		      uint32_t v, unsigned *spins, uint64_t *start)
{
	if (++*spins < 64) {
		__builtin_ia32_pause();
		return false;
	}
	if (!*start)
		*start = now_ns();
	atomic_fetch_add(waiters, 1);
	if (atomic_load(seq) == v)
		futex_wait(seq, v);
	atomic_fetch_sub(waiters, 1);
	return true;
}

static void stripe_lock(uint64_t key, struct dioshim_stripe *s, uint64_t me,
			uint64_t pidns)
{
	uint64_t start = 0, free_word;
	unsigned spins = 0;

	for (;;) {
		free_word = 0;
		if (atomic_compare_exchange_weak_explicit(
			    &s->writer.pid_start, &free_word, me,
			    memory_order_acquire, memory_order_relaxed)) {
			s->writer.pidns = pidns;
			atomic_fetch_add_explicit(&s->seq, 1,
						  memory_order_acq_rel);
			return;
		}
		if (!stripe_pause(s, &s->writer.pid_start, free_word, &spins,
				  &start))
			continue;
		if (now_ns() - start > STRIPE_PATIENCE_NS) {
			if (reclaim_dead(key, s,
					 atomic_load(&s->writer.pid_start),
					 me)) {
				s->writer.pidns = pidns;
				return;
			}
			start = now_ns();
		}
	}
}

static void stripe_unlock(struct dioshim_stripe *s)
{
	atomic_fetch_add_explicit(&s->seq, 1, memory_order_release);
	atomic_store_explicit(&s->writer.pid_start, 0, memory_order_release);
	if (atomic_load(&s->waiters))
		futex_wake_all(&s->seq);
}

/* ---- wide slots ---------------------------------------------------------- */

#define WIDE_FREEING UINT64_MAX /* owner word while a slot is being freed */

static bool wide_overlaps(uint64_t lo, uint64_t hi,
			  const struct rangelock *rl)
{
	return lo < rl->hi && rl->lo < hi;
}

/* Make w's count, seen at v, even if it is still v and odd. */
static void wide_even(struct dioshim_wide *w, uint32_t v)
{
	if ((v & 1) && atomic_compare_exchange_strong(&w->seq, &v, v + 1) &&
	    atomic_load(&w->waiters))
		futex_wake_all(&w->seq);
}

/* Free slot w from holder (gone, or this process's previous image): its
 * count made even, then its owner word freed — both by CAS, as a waiter
 * that finds a freer gone half way finishes for it (wide_reclaim). */
static bool wide_free(struct dioshim_wide *w, uint64_t holder)
{
	uint64_t freeing = WIDE_FREEING;
	/* Read before: a count read after our owner word may be freed by a
	 * waiter (we stalled), is a new holder's. */
	uint32_t v = atomic_load(&w->seq);

	if (!holder || holder == WIDE_FREEING ||
	    !atomic_compare_exchange_strong(&w->owner.pid_start, &holder,
					    WIDE_FREEING))
		return false;
	wide_even(w, v);
	atomic_compare_exchange_strong(&w->owner.pid_start, &freeing, 0);
	return true;
}

/*
 * After waiting on w past the patience: free it if its holder is gone.
 * A count left odd with no holder (or a freer gone half way) is void: a
 * holder takes the owner word before its count goes odd, and lets it go
 * after the count is even again.  The count is read first: one that
 * moved since is somebody's, and the CAS leaves it.
 */
static void wide_reclaim(uint64_t key, struct dioshim_wide *w)
{
	uint32_t v = atomic_load(&w->seq);
	uint64_t h = atomic_load(&w->owner.pid_start);

	if (!h || h == WIDE_FREEING) {
		wide_even(w, v);
		/* A freer gone half way: finish, once the count is even. */
		if (h && !(atomic_load(&w->seq) & 1))
			atomic_compare_exchange_strong(&w->owner.pid_start,
						       &h, 0);
		return;
	}
	if (!owner_alive_in(key, h, w->owner.pidns) && wide_free(w, h))
		log_event(LOG_RECLAIM, NULL,
			  "extent lock: wide holder %llu died; slot freed",
			  (unsigned long long)(h & DIOSHIM_OWNER_PID_MASK));
}

/*
 * Slot w as read at its count v: its range and ticket, if neither the
 * count nor the ticket moved meanwhile (a slot being taken again clears
 * its ticket before it writes a new range: see wide_take).
 */
static bool wide_read(struct dioshim_wide *w, uint32_t v, uint64_t *lo,
		      uint64_t *hi, uint64_t *ticket)
{
	*ticket = atomic_load_explicit(&w->ticket, memory_order_acquire);
	*lo = atomic_load_explicit(&w->lo, memory_order_relaxed);
	*hi = atomic_load_explicit(&w->hi, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&w->ticket, memory_order_relaxed) ==
		       *ticket &&
	       atomic_load_explicit(&w->seq, memory_order_relaxed) == v;
}

/* Wait while slot w's count is v (held), or — pending — until it has its
 * ticket; its holder found dead frees it. */
static void wide_wait(uint64_t key, struct dioshim_wide *w, uint32_t v,
		      bool pending)
{
	uint64_t start = 0;
	unsigned spins = 0;

	while (atomic_load_explicit(&w->seq, memory_order_acquire) == v &&
	       !(pending && atomic_load(&w->ticket))) {
		if (pending) {
			/* Taking a ticket is a few instructions away. */
			if (++spins < 64) {
				__builtin_ia32_pause();
				continue;
			}
			if (!start)
				start = now_ns();
			sched_yield();
		} else if (!seq_pause(&w->seq, &w->waiters, v, &spins,
				      &start)) {
			continue;
		}
		if (now_ns() - start > STRIPE_PATIENCE_NS) {
			wide_reclaim(key, w);
			start = now_ns();
		}
	}
}

/*
 * The first held slot (other than skip) that overlaps rl's range, and
 * the count it was seen at; -1 if none.  With mine (a wide writer's
 * ticket): only those to wait for — taken before it, or still taking.
 */
static int wide_conflict(struct dioshim_seg *seg, const struct rangelock *rl,
			 int skip, uint64_t mine, uint32_t *seen,
			 uint64_t *seen_ticket)
{
	uint64_t lo, hi, ticket;
	int j;

	for (j = 0; j < DIOSHIM_WIDE_SLOTS; j++) {
		struct dioshim_wide *w = &seg->wide[j];
		uint32_t v;

		if (j == skip)
			continue;
		do
			v = atomic_load_explicit(&w->seq,
						 memory_order_acquire);
		while ((v & 1) && !wide_read(w, v, &lo, &hi, &ticket));
		if (!(v & 1) || !wide_overlaps(lo, hi, rl))
			continue;
		if (mine && ticket && ticket > mine)
			continue; /* it waits for us */
		*seen = v;
		*seen_ticket = ticket;
		return j;
	}
	return -1;
}

/* Make a slot just taken odd, always by moving its count: a count left
 * odd (a holder gone, a corrupt word) becomes odd anew, so a stale
 * wide_even that read it fails. */
static void wide_odd(struct dioshim_wide *w)
{
	uint32_t v = atomic_load(&w->seq);

	while (!atomic_compare_exchange_weak_explicit(
		&w->seq, &v, v + ((v & 1) ? 2 : 1), memory_order_release,
		memory_order_relaxed))
		;
}

/* A slot for rl, held and ticketed; -1 if every slot is taken. */
static int wide_take(struct dioshim_seg *seg, const struct owner_id *me,
		     const struct rangelock *rl, uint64_t *ticket)
{
	int j, round;

	for (round = 0; round < 2; round++) {
		for (j = 0; j < DIOSHIM_WIDE_SLOTS; j++) {
			struct dioshim_wide *w = &seg->wide[j];
			uint64_t none = 0;

			if (!atomic_compare_exchange_strong(
				    &w->owner.pid_start, &none, me->pid_start))
				continue;
			w->owner.pidns = me->pidns;
			atomic_store_explicit(&w->ticket, 0,
					      memory_order_relaxed);
			atomic_thread_fence(memory_order_release);
			atomic_store_explicit(&w->lo, rl->lo,
					      memory_order_relaxed);
			atomic_store_explicit(&w->hi, rl->hi,
					      memory_order_relaxed);
			wide_odd(w);
			/* Never 0: that is "still taking one". */
			do
				*ticket = atomic_fetch_add(&seg->wide_ticket,
							   1) + 1;
			while (!*ticket);
			atomic_store(&w->ticket, *ticket);
			/* Our odd count before the loads of the stripes
			 * and slots that follow (see the top). */
			atomic_thread_fence(memory_order_seq_cst);
			return j;
		}
		/* All taken: free those whose holders are gone. */
		for (j = 0; j < DIOSHIM_WIDE_SLOTS; j++)
			wide_reclaim(seg->hint_key, &seg->wide[j]);
	}
	return -1;
}

/* Wait while s's count is v (and, with owned, while it has an owner
 * word); a holder found dead past the patience is freed. */
static void stripe_wait_moved(uint64_t key, struct dioshim_stripe *s,
			      uint32_t v, bool owned)
{
	uint64_t start = 0;
	unsigned spins = 0;

	while (atomic_load_explicit(&s->seq, memory_order_acquire) == v &&
	       (!owned || atomic_load_explicit(&s->writer.pid_start,
					       memory_order_acquire))) {
		if (!seq_pause(&s->seq, &s->waiters, v, &spins, &start))
			continue;
		if (now_ns() - start > STRIPE_PATIENCE_NS) {
			reclaim_dead(key, s, atomic_load(&s->writer.pid_start),
				     0);
			start = now_ns();
		}
	}
}

/* Wait until no writer holds stripe s; the (even) count then. */
static uint32_t stripe_wait_even(uint64_t key, struct dioshim_stripe *s)
{
	uint32_t seq;

	while ((seq = atomic_load_explicit(&s->seq, memory_order_acquire)) & 1)
		stripe_wait_moved(key, s, seq, false);
	return seq;
}

/* Wait until every stripe held now has been let go once: a stripe
 * writer that comes after sees our slot.  Held: an owner word, or an odd
 * count (a word a killed or corrupt holder left is not trusted alone). */
static void wide_drain_stripes(struct dioshim_seg *seg, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (stripe_backed(seg, i))
			stripe_wait_moved(seg->hint_key, &seg->stripe[i],
				  atomic_load_explicit(&seg->stripe[i].seq,
						       memory_order_acquire),
				  true);
}

/* Hold a wide slot for rl; false if none is free. */
static bool wide_lock(struct dioshim_seg *seg, const struct owner_id *me,
		      struct rangelock *rl)
{
	uint64_t ticket, theirs;
	uint32_t n, shift, v;
	int j, other;

	(void)geometry(seg, &n, &shift);
	j = wide_take(seg, me, rl, &ticket);
	if (j < 0)
		return false;
	rl->wide = j + 1;
	/* One still taking its ticket: wait for the ticket, then see. */
	while ((other = wide_conflict(seg, rl, j, ticket, &v, &theirs)) >= 0)
		wide_wait(seg->hint_key, &seg->wide[other], v, !theirs);
	wide_drain_stripes(seg, n);
	return true;
}

static void wide_unlock(struct dioshim_seg *seg, struct rangelock *rl)
{
	struct dioshim_wide *w = &seg->wide[rl->wide - 1];

	atomic_fetch_add_explicit(&w->seq, 1, memory_order_release);
	atomic_store_explicit(&w->owner.pid_start, 0, memory_order_release);
	if (atomic_load(&w->waiters))
		futex_wake_all(&w->seq);
	rl->wide = 0;
}

/* ---- the table ----------------------------------------------------------- */

void rangelock_release_self(struct dioshim_seg *seg)
{
	const struct owner_id *me = owner_self();
	uint32_t n, shift, i;

	if (!geometry(seg, &n, &shift))
		return;
	for (i = 0; i < DIOSHIM_WIDE_SLOTS; i++)
		if ((uint32_t)seg->wide[i].owner.pidns == (uint32_t)me->pidns &&
		    wide_free(&seg->wide[i], me->pid_start))
			log_event(LOG_RECLAIM, LOG_SEG(seg),
				  "extent lock: wide slot %u left by our "
				  "previous image",
				  i);
	for (i = 0; i < n; i++) {
		struct dioshim_stripe *s = &seg->stripe[i];
		uint64_t holder = me->pid_start;

		if (!stripe_backed(seg, i))
			continue;
		if ((uint32_t)s->gate.pidns == (uint32_t)me->pidns &&
		    atomic_compare_exchange_strong(&s->gate.pid_start, &holder,
						   0) &&
		    atomic_load(&s->waiters))
			futex_wake_all(&s->seq);
		holder = me->pid_start;
		if ((uint32_t)s->writer.pidns != (uint32_t)me->pidns ||
		    !atomic_compare_exchange_strong(&s->writer.pid_start,
						    &holder, 0))
			continue;
		log_event(LOG_RECLAIM, LOG_SEG(seg),
			  "extent lock: stripe %u left by our previous image",
			  i);
		if (atomic_load(&s->seq) & 1)
			atomic_fetch_add_explicit(&s->seq, 1,
						  memory_order_release);
		if (atomic_load(&s->waiters))
			futex_wake_all(&s->seq);
	}
}

/* Wait while a reader holds the gate of s (see the top of the file). */
static void gate_wait(uint64_t key, struct dioshim_stripe *s)
{
	uint64_t start = 0, g, waited;
	unsigned spins = 0;

	while ((g = atomic_load_explicit(&s->gate.pid_start,
					 memory_order_acquire))) {
		if (!stripe_pause(s, &s->gate.pid_start, g, &spins, &start))
			continue;
		waited = now_ns() - start;
		if (waited > GATE_PATIENCE_NS ||
		    (waited > STRIPE_PATIENCE_NS &&
		     !owner_alive_in(key, g, s->gate.pidns)))
			atomic_compare_exchange_strong(&s->gate.pid_start, &g,
						       0);
	}
}

static void stripes_unlock(struct shim_file *f, struct rangelock *rl)
{
	unsigned i;

	/* Any order: releasing cannot deadlock. */
	for_each_stripe(rl, i)
		stripe_unlock(&f->seg->stripe[i]);
}

bool rangelock_write(struct shim_file *f, uint64_t off, uint64_t len,
		     struct rangelock *rl)
{
	const struct owner_id *me = owner_self();
	struct dioshim_seg *seg = f->seg;
	uint64_t t;
	uint32_t v;
	unsigned i;
	int j;

	if (!config.rangelock) {
		rl->active = false;
		return true;
	}
	cover(seg, off, len, rl);
	if (!rl->active)
		return false;
	if (!stripes_back(seg, rl)) {
		/* No memory for its stripes: a wide slot (in the head,
		 * always there) holds its range as well, readers and
		 * writers of the range see it; without one, unlocked. */
		if (wide_lock(seg, me, rl))
			return true;
		rl->active = false;
		return false;
	}
	for (;;) {
		for_each_stripe(rl, i)
			gate_wait(seg->hint_key, &seg->stripe[i]);
		if (rl->all && wide_lock(seg, me, rl))
			return true;
		for_each_stripe(rl, i)
			stripe_lock(seg->hint_key, &seg->stripe[i],
				    me->pid_start, me->pidns);
		/* Our odd counts before the slots' (see the top). */
		atomic_thread_fence(memory_order_seq_cst);
		j = wide_conflict(seg, rl, -1, 0, &v, &t);
		if (j < 0)
			return true;
		stripes_unlock(f, rl);
		wide_wait(seg->hint_key, &seg->wide[j], v, false);
	}
}

void rangelock_write_done(struct shim_file *f, struct rangelock *rl)
{
	if (!rl->active)
		return;
	if (rl->wide)
		wide_unlock(f->seg, rl);
	else
		stripes_unlock(f, rl);
	rl->active = false;
}

static __thread unsigned tls_read_tries
	__attribute__((tls_model("initial-exec")));

void rangelock_read_begin(struct shim_file *f, uint64_t off, uint64_t len,
			  struct rangelock *rl)
{
	struct dioshim_seg *seg = f->seg;
	uint64_t t;
	uint32_t v;
	unsigned i;
	int j;

	if (!config.rangelock) {
		rl->active = false;
		return;
	}
	cover(seg, off, len, rl);
	if (!rl->active)
		return;
	/* Every wide write with a ticket up to here is in the slots (its
	 * count went odd before it took the ticket). */
	rl->wide_seen = atomic_load_explicit(&seg->wide_ticket,
					     memory_order_acquire);
	while ((j = wide_conflict(seg, rl, -1, 0, &v, &t)) >= 0)
		wide_wait(seg->hint_key, &seg->wide[j], v, false);
	for_each_stripe(rl, i)
		rl->seq[i] = stripe_backed(seg, i)
				     ? stripe_wait_even(seg->hint_key,
							&seg->stripe[i])
				     : 0;
}

/* Whether a wide write begun since rl->wide_seen may have touched rl's
 * range: each must be found in a slot, not overlapping. */
static bool wide_touched(struct dioshim_seg *seg, const struct rangelock *rl)
{
	uint64_t now = atomic_load_explicit(&seg->wide_ticket,
					    memory_order_acquire);
	uint64_t lo, hi, ticket, found = 0;
	int j;

	if (now == rl->wide_seen)
		return false;
	for (j = 0; j < DIOSHIM_WIDE_SLOTS; j++) {
		struct dioshim_wide *w = &seg->wide[j];
		uint32_t v = atomic_load_explicit(&w->seq,
						  memory_order_acquire);

		if (!wide_read(w, v, &lo, &hi, &ticket))
			return true;
		if (ticket <= rl->wide_seen || ticket > now)
			continue;
		if (wide_overlaps(lo, hi, rl))
			return true;
		found++;
	}
	return found != now - rl->wide_seen;
}

bool rangelock_read_valid(struct shim_file *f, struct rangelock *rl)
{
	unsigned i;

	if (!rl->active)
		return true;
	atomic_thread_fence(memory_order_acquire);
	for_each_stripe(rl, i) {
		/* A page allocated since: a writer came (its count moved
		 * from the zero the reader took). */
		if ((stripe_backed(f->seg, i)
			     ? atomic_load_explicit(&f->seg->stripe[i].seq,
						    memory_order_relaxed)
			     : 0) != rl->seq[i]) {
			tls_read_tries++;
			return false;
		}
	}
	if (wide_touched(f->seg, rl)) {
		tls_read_tries++;
		return false;
	}
	tls_read_tries = 0;
	return true;
}

bool rangelock_read_retry(struct shim_file *f, struct rangelock *rl)
{
	const struct owner_id *me = owner_self();
	unsigned i;

	if (!rl->active || tls_read_tries < READ_TRIES)
		return false;
	if (tls_read_tries >= READ_LOCK_TRIES) {
		tls_read_tries = 0;
		rangelock_read_done(f, rl);
		return true;
	}
	if (!rl->gating) {
		memset(rl->gated, 0, sizeof(rl->gated));
		rl->gating = true;
	}
	/* Each time round: a gate another reader held may be free now, and
	 * one of ours a writer found void is set again. */
	for_each_stripe(rl, i) {
		struct dioshim_stripe *s = &f->seg->stripe[i];
		uint64_t none = 0;

		if (!lazy_back(f->seg, s, sizeof(*s)) ||
		    atomic_load_explicit(&s->gate.pid_start,
					 memory_order_relaxed) == me->pid_start)
			continue;
		if (atomic_compare_exchange_strong(&s->gate.pid_start, &none,
						   me->pid_start)) {
			s->gate.pidns = me->pidns;
			rl->gated[i / 64] |= 1ull << (i % 64);
		}
	}
	return false;
}

void rangelock_read_done(struct shim_file *f, struct rangelock *rl)
{
	const struct owner_id *me = owner_self();
	unsigned w, i;

	if (!rl->gating)
		return;
	rl->gating = false;
	for (w = 0; w < DIOSHIM_STRIPES / 64; w++) {
		for (uint64_t m = rl->gated[w]; m; m &= m - 1) {
			struct dioshim_stripe *s;
			uint64_t mine = me->pid_start;

			i = w * 64 + (unsigned)__builtin_ctzll(m);
			s = &f->seg->stripe[i];
			/* Unless a writer found it void meanwhile. */
			atomic_compare_exchange_strong(&s->gate.pid_start,
						       &mine, 0);
			if (atomic_load(&s->waiters))
				futex_wake_all(&s->seq);
		}
	}
}
