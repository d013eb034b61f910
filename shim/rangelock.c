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
 * Fairness: a reader whose reads keep meeting writers sets the gate word
 * of its stripes (its owner word, if no other reader's is there); a
 * writer waits at every gate of its range before taking the first stripe
 * — never once it holds one, so a gate cannot close a cycle — until the
 * reader is done, is found dead, or GATE_PATIENCE_NS has passed.  Readers
 * write nothing shared until they have met writers.
 *
 * Lock order: stripes are taken after the in-flight count and before
 * ext_lock (the reservation), and held across the kernel's write.
 */
#define _GNU_SOURCE
#include "rangelock.h"

#include "config.h"
#include "log.h"

#include <linux/futex.h>
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
	rl->active = geometry(seg, &n, &shift) && len;
	if (!rl->active)
		return;
	first = off >> shift;
	last = (off + len - 1) >> shift;
	if (last - first + 1 >= n) {
		memset(rl->bits, 0xff, n / 8 ? n / 8 : 1);
		if (n < 64)
			rl->bits[0] = (1ull << n) - 1;
		return;
	}
	for (b = first; b <= last; b++)
		rl->bits[(b & (n - 1)) / 64] |= 1ull << ((b & (n - 1)) % 64);
}

#define for_each_stripe(rl, i)                                          \
	for (unsigned w_ = 0; w_ < DIOSHIM_STRIPES / 64; w_++)          \
		for (uint64_t m_ = (rl)->bits[w_];                      \
		     m_ && ((i) = w_ * 64 + (unsigned)__builtin_ctzll(m_), 1); \
		     m_ &= m_ - 1)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
	struct timespec slice = { 0, 5000000 };

	syscall(SYS_futex, w, FUTEX_WAIT, val, &slice, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* A stripe whose holder is gone: take it over (we are a writer) or free
 * it (we only read).  True if it changed hands. */
static bool reclaim_dead(uint64_t key, struct dioshim_stripe *s,
			 uint64_t holder, uint64_t to)
{
	if (!holder || owner_alive_in(key, holder, s->writer.pidns))
		return false;
	if (!atomic_compare_exchange_strong(&s->writer.pid_start, &holder, to))
		return false;
	log_msg("extent lock: holder %llu died; taken over",
		(unsigned long long)(holder & DIOSHIM_OWNER_PID_MASK));
	/* It died holding the stripe: its count is odd. */
	if (atomic_load(&s->seq) & 1) {
		if (!to)
			atomic_fetch_add_explicit(&s->seq, 1,
						  memory_order_release);
	} else if (to) {
		atomic_fetch_add_explicit(&s->seq, 1, memory_order_acq_rel);
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

void rangelock_release_self(struct dioshim_seg *seg)
{
	const struct owner_id *me = owner_self();
	uint32_t n, shift, i;

	if (!geometry(seg, &n, &shift))
		return;
	for (i = 0; i < n; i++) {
		struct dioshim_stripe *s = &seg->stripe[i];
		uint64_t holder = me->pid_start;

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
		log_msg("extent lock: stripe %u left by our previous image", i);
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

bool rangelock_write(struct shim_file *f, uint64_t off, uint64_t len,
		     struct rangelock *rl)
{
	const struct owner_id *me = owner_self();
	unsigned i;

	if (!config.rangelock) {
		rl->active = false;
		return true;
	}
	cover(f->seg, off, len, rl);
	if (!rl->active)
		return false;
	for_each_stripe(rl, i)
		gate_wait(f->seg->hint_key, &f->seg->stripe[i]);
	for_each_stripe(rl, i)
		stripe_lock(f->seg->hint_key, &f->seg->stripe[i],
			    me->pid_start, me->pidns);
	return true;
}

void rangelock_write_done(struct shim_file *f, struct rangelock *rl)
{
	unsigned i;

	if (!rl->active)
		return;
	/* Any order: releasing cannot deadlock. */
	for_each_stripe(rl, i)
		stripe_unlock(&f->seg->stripe[i]);
	rl->active = false;
}

/* Wait until no writer holds stripe s; the (even) count then. */
static uint32_t stripe_wait_even(uint64_t key, struct dioshim_stripe *s)
{
	uint64_t start = 0;
	unsigned spins = 0;
	uint32_t seq;

	for (;;) {
		seq = atomic_load_explicit(&s->seq, memory_order_acquire);
		if (!(seq & 1))
			return seq;
		if (++spins < 64) {
			__builtin_ia32_pause();
			continue;
		}
		if (!start)
			start = now_ns();
		atomic_fetch_add(&s->waiters, 1);
		if (atomic_load(&s->seq) == seq)
			futex_wait(&s->seq, seq);
		atomic_fetch_sub(&s->waiters, 1);
		if (now_ns() - start > STRIPE_PATIENCE_NS) {
			reclaim_dead(key, s, atomic_load(&s->writer.pid_start),
				     0);
			start = now_ns();
		}
	}
}

static __thread unsigned tls_read_tries
	__attribute__((tls_model("initial-exec")));

void rangelock_read_begin(struct shim_file *f, uint64_t off, uint64_t len,
			  struct rangelock *rl)
{
	unsigned i;

	if (!config.rangelock) {
		rl->active = false;
		return;
	}
	cover(f->seg, off, len, rl);
	if (!rl->active)
		return;
	for_each_stripe(rl, i)
		rl->seq[i] = stripe_wait_even(f->seg->hint_key,
					      &f->seg->stripe[i]);
}

bool rangelock_read_valid(struct shim_file *f, struct rangelock *rl)
{
	unsigned i;

	if (!rl->active)
		return true;
	atomic_thread_fence(memory_order_acquire);
	for_each_stripe(rl, i) {
		if (atomic_load_explicit(&f->seg->stripe[i].seq,
					 memory_order_relaxed) != rl->seq[i]) {
			tls_read_tries++;
			return false;
		}
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

		if (atomic_load_explicit(&s->gate.pid_start,
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
