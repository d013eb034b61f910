// SPDX-License-Identifier: MIT
/*
 * The hints: whether any segment exists for this process's user and
 * groups, the generation of segment creations, each place's disk budget,
 * and the windows around a change of the count.
 *
 * Layer L1, above the shared files (shm.c) and the lifelines (the
 * windows' locks go through kept descriptors); calls only them and L0.
 * Lock order: files_lock (segment.c) -> hint_lock; lifeline_lock is
 * taken alone.
 */
#define _GNU_SOURCE
#include "hint.h"
#include "lockrank.h"

#include "config.h"
#include "lifeline.h"
#include "log.h"
#include "shm.h"
#include "sys.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- the hints ----------------------------------------------------------- */

/*
 * A hint counts the segments that exist for the files of one user
 * (private segments) or one group (segments of group-writable files), so
 * that a process which touches no such file pays no system call to find
 * out.  A process reads its own user's hint and its groups': together
 * they cover every segment of a file it may write.  live over-counts after
 * a crash (a segment left behind), never under-counts: creators add before
 * creating and subtract after unlinking.
 */

/* HINT_NODIR: the segment directory is not there, so no segment can be:
 * each look is one stat of it, and once it is back the hints are tried
 * again (a process may start before any shimmed writer made it). */
enum { HINT_UNTRIED, HINT_READY, HINT_BROKEN, HINT_NODIR };
static int hint_state;
static struct hint_entry {
	uint64_t key;
	struct dioshim_hint *h;
} hint_extra[HINTS_EXTRA];
/* hint_set and hint_count are defined in hot.c. */
static pthread_mutex_t hint_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t hint_keys[HINTS_MAX];

static void hint_init(void *map, const void *arg)
{
	struct dioshim_hint *h = map;

	(void)arg;
	h->magic = DIOSHIM_HINT_MAGIC;
	h->version = DIOSHIM_LAYOUT_VERSION;
	h->size = sizeof(*h);
}

/* Map the hint of key (a uid, or HINT_GROUP_BIT | gid), making it (and
 * its group directory) if it is missing and make says so; NULL if it is
 * unusable. */
static struct dioshim_hint *hint_open(uint64_t key, bool make)
{
	bool group = key & HINT_GROUP_BIT;
	uint32_t id = (uint32_t)key;
	struct shm_want want = { group ? SHM_HINT_GROUP : SHM_HINT_USER, id,
				 NULL };
	struct shm_owner own = { group ? 0660 : 0600,
				 !group && id != geteuid() ? id : (uid_t)-1,
				 group ? id : (gid_t)-1 };
	struct dioshim_hint *h = NULL;
	char path[PATH_MAX];
	int tries;

	if (hint_path(key, path, sizeof(path), make))
		return NULL;
	for (tries = 0; tries < 4 && !h; tries++) {
		h = shm_open_existing(path, sizeof(*h), true, &want);
		if (!h && errno == ENOENT && make) {
			h = shm_create_published(path, sizeof(*h), &own,
						 hint_init, NULL, NULL);
			if (!h && errno != EEXIST)
				break;
		} else if (!h) {
			break;
		}
	}
	if (h && (h->magic != DIOSHIM_HINT_MAGIC ||
		  h->version != DIOSHIM_LAYOUT_VERSION ||
		  h->size != sizeof(*h))) {
		sys_munmap(h, sizeof(*h));
		h = NULL;
	}
	if (!h && make)
		log_event(LOG_ERROR, NULL,
			  "hint %s unusable: checking for segments on every "
			  "call",
			  path);
	return h;
}

/* The keys of the hints this process reads: its user's and its groups'. */
static int hint_my_keys(uint64_t *keys)
{
	gid_t groups[HINTS_MAX - 2];
	int n = 0, ng, i, j;

	keys[n++] = geteuid();
	keys[n++] = HINT_GROUP_BIT | getegid();
	/* More groups than we read hints for: no hint can say "none", and
	 * every call looks (hints_ready fails). */
	ng = getgroups(0, NULL);
	if (ng < 0 || ng > HINTS_MAX - 2)
		return -1;
	ng = getgroups(HINTS_MAX - 2, groups);
	if (ng < 0)
		return -1;
	for (i = 0; i < ng; i++) {
		uint64_t k = HINT_GROUP_BIT | groups[i];

		for (j = 0; j < n && keys[j] != k; j++)
			;
		if (j == n)
			keys[n++] = k;
	}
	return n;
}

/* Whether the segment directory is missing (keeps errno). */
static bool shm_dir_missing(void)
{
	struct statx stx;
	int saved = errno;
	bool missing = sys_statx(AT_FDCWD, config.shm_dir, 0, STATX_TYPE,
				 &stx) &&
		       (errno == ENOENT || errno == ENOTDIR);

	errno = saved;
	return missing;
}

static bool hints_ready(void)
{
	int i, n;

	switch (__atomic_load_n(&hint_state, __ATOMIC_ACQUIRE)) {
	case HINT_READY:
		return true;
	case HINT_BROKEN:
		return false;
	case HINT_NODIR:
		if (shm_dir_missing())
			return false;
		break;
	}
	rank_lock(&hint_lock, LOCK_HINT);
	if (hint_state == HINT_NODIR)
		hint_state = HINT_UNTRIED;
	if (hint_state != HINT_UNTRIED)
		goto out;
	n = hint_my_keys(hint_keys);
	if (n < 0) {
		log_event(LOG_ERROR, NULL,
			  "more than %d groups: checking for segments on every "
			  "call",
			  HINTS_MAX - 2);
		__atomic_store_n(&hint_state, HINT_BROKEN, __ATOMIC_RELEASE);
		goto out;
	}
	for (i = 0; i < n; i++) {
		hint_set[i] = hint_open(hint_keys[i], true);
		if (!hint_set[i])
			break;
	}
	if (i < n) {
		while (i-- > 0)
			sys_munmap(hint_set[i], sizeof(struct dioshim_hint));
		__atomic_store_n(&hint_state,
				 shm_dir_missing() ? HINT_NODIR : HINT_BROKEN,
				 __ATOMIC_RELEASE);
		goto out;
	}
	__atomic_store_n(&hint_count, n, __ATOMIC_RELEASE);
	__atomic_store_n(&hint_state, HINT_READY, __ATOMIC_RELEASE);
out:
	rank_unlock(&hint_lock, LOCK_HINT);
	return hint_state == HINT_READY;
}

bool hint_maybe_live(void)
{
	int i;

	if (!hints_ready())
		return __atomic_load_n(&hint_state, __ATOMIC_ACQUIRE) !=
		       HINT_NODIR;
	for (i = 0; i < hint_count; i++)
		if (atomic_load_explicit(&hint_set[i]->live,
					 memory_order_seq_cst))
			return true;
	return false;
}

bool hint_look_slow(uint64_t *gen)
{
	if (!hints_ready()) {
		*gen = UINT64_MAX;
		return __atomic_load_n(&hint_state, __ATOMIC_ACQUIRE) !=
		       HINT_NODIR;
	}
	/* Ready: hint_count is published (a user's and a group's at
	 * least), and the inline look reads them. */
	return hint_look(gen);
}

uint64_t hint_gen(void)
{
	uint64_t g = 0;
	int i;

	if (!hints_ready())
		return UINT64_MAX;
	for (i = 0; i < hint_count; i++)
		g += atomic_load_explicit(&hint_set[i]->gen,
					  memory_order_seq_cst);
	return g == UINT64_MAX ? 0 : g;
}

/* key's hint among this process's own (its user's and groups'). */
static struct dioshim_hint *hint_own(uint64_t key)
{
	int i;

	if (hints_ready())
		for (i = 0; i < hint_count; i++)
			if (hint_keys[i] == key)
				return hint_set[i];
	return NULL;
}

/* key's hint, mapped (ours, or another user's for root), as it is kept;
 * else, unless look_only, opened (made if missing only when make says
 * so) and kept, or *temp when it cannot be (root past HINTS_EXTRA other
 * users). */
static struct dioshim_hint *hint_find(uint64_t key, bool look_only,
				      bool make, bool *temp)
{
	struct dioshim_hint *h = hint_own(key);
	int i;

	*temp = false;
	if (h)
		return h;
	rank_lock(&hint_lock, LOCK_HINT);
	for (i = 0; i < HINTS_EXTRA && hint_extra[i].h; i++)
		if (hint_extra[i].key == key) {
			h = hint_extra[i].h;
			goto out;
		}
	if (look_only)
		goto out;
	h = hint_open(key, make);
	if (h && i < HINTS_EXTRA) {
		hint_extra[i].key = key;
		hint_extra[i].h = h;
	} else if (h) {
		*temp = true;
	}
out:
	rank_unlock(&hint_lock, LOCK_HINT);
	return h;
}

/* The hint of key, mapped (ours, or another user's for root); *temp
 * when it is not kept (root past HINTS_EXTRA other users): the caller
 * gives it back with hint_put once done with it.  Made if missing only
 * when make says so: for a segment about to be made, never for a key
 * read from a segment (which anyone who can write it can set: a hint,
 * and a group directory, for any id). */
struct dioshim_hint *hint_get(uint64_t key, bool make, bool *temp)
{
	return hint_find(key, false, make, temp);
}

void hint_put(struct dioshim_hint *h, bool temp)
{
	if (temp)
		sys_munmap(h, sizeof(*h));
}

/* The hint of key if this process keeps it mapped; NULL (never a call)
 * if not. */
struct dioshim_hint *hint_kept(uint64_t key)
{
	bool temp;

	return hint_find(key, true, false, &temp);
}

void hint_live_add(uint64_t key, int64_t delta)
{
	bool temp;
	struct dioshim_hint *h = hint_get(key, delta > 0, &temp);

	if (!h)
		return;
	if (delta > 0)
		atomic_fetch_add_explicit(&h->gen, 1, memory_order_seq_cst);
	atomic_fetch_add_explicit(&h->live, (uint64_t)delta,
				  memory_order_seq_cst);
	/* A stray decrement (a segment removed by hand) must not wrap. */
	if ((int64_t)atomic_load_explicit(&h->live, memory_order_relaxed) < 0)
		atomic_store_explicit(&h->live, 0, memory_order_relaxed);
	/* No segment left: nothing is reserved, whatever the budget says
	 * (what files of killed writers counted, and no user came back to
	 * give back). */
	if (delta < 0 && !atomic_load(&h->live)) {
		int i;

		for (i = 0; i < DIOSHIM_BUDGETS; i++)
			atomic_store(&h->budget[i].reserved, 0);
	}
	hint_put(h, temp);
}

/* dev's budget word in h, claimed if dev has none yet; NULL when all are
 * taken. */
static _Atomic uint64_t *budget_in(struct dioshim_hint *h, uint64_t dev)
{
	uint64_t want = dev | DIOSHIM_BUDGET_USED, seen;
	int i;

	for (i = 0; i < DIOSHIM_BUDGETS; i++) {
		seen = atomic_load_explicit(&h->budget[i].dev,
					    memory_order_acquire);
		if (!seen && atomic_compare_exchange_strong(&h->budget[i].dev,
							    &seen, want))
			return &h->budget[i].reserved;
		if (seen == want)
			return &h->budget[i].reserved;
	}
	return NULL;
}

void hint_published(uint64_t key)
{
	bool temp;
	struct dioshim_hint *h = hint_get(key, false, &temp);

	if (!h)
		return;
	atomic_fetch_add_explicit(&h->gen, 1, memory_order_seq_cst);
	hint_put(h, temp);
}

bool hint_key_idle(uint64_t key)
{
	bool temp, idle;
	struct dioshim_hint *h = hint_get(key, false, &temp);

	if (!h)
		return false;
	idle = !atomic_load_explicit(&h->live, memory_order_seq_cst);
	hint_put(h, temp);
	return idle;
}

uint64_t hint_budget_add(uint64_t key, uint64_t dev, int64_t delta)
{
	bool temp;
	struct dioshim_hint *h = hint_get(key, false, &temp);
	_Atomic uint64_t *b = h ? budget_in(h, dev) : NULL;
	uint64_t cur = 0, want;

	if (b) {
		cur = atomic_load(b);
		/* Never below zero (a budget reset while some was held). */
		do
			want = delta >= 0 || cur > (uint64_t)-delta
				       ? cur + (uint64_t)delta
				       : 0;
		while (delta && !atomic_compare_exchange_weak(b, &cur, want));
		cur = delta ? want : cur;
	}
	if (h)
		hint_put(h, temp);
	return cur;
}

/* ---- the count of segments: windows and recounts ------------------------ */

/* This process's open windows, by place: our threads share one lock
 * through one descriptor, which goes when the last of them closes its
 * window (a place past the table keeps its lock: no recount there while
 * we live, which costs only the recount).  Under lifeline_lock
 * (hint_window_open). */
#define WINDOW_PLACES 8
static struct {
	uint64_t key;
	unsigned n;
} windows[WINDOW_PLACES];


static int count_lock(int fd, int cmd, short type)
{
	return shm_lock_byte(fd, DIOSHIM_COUNT_BYTE, cmd, type);
}

static unsigned *window_count(uint64_t key)
{
	int i, free_i = -1;

	for (i = 0; i < WINDOW_PLACES; i++) {
		if (windows[i].n && windows[i].key == key)
			return &windows[i].n;
		if (!windows[i].n && free_i < 0)
			free_i = i;
	}
	if (free_i < 0)
		return NULL;
	windows[free_i].key = key;
	return &windows[free_i].n;
}

void hint_window_open(uint64_t key)
{
	int saved = errno, fd;
	unsigned *n;

	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	fd = lifeline_place_fd(key, true);
	n = window_count(key);
	/* Waits for a recount under way (a scan of the directory). */
	if (fd >= 0 && (!n || !*n) &&
	    SYS_TRY(count_lock(fd, F_OFD_SETLKW, F_RDLCK)))
		log_once(LOG_ERROR, NULL,
			 "cannot hold the segment count's window (%s)",
			 strerror(errno));
	if (n)
		++*n;
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
	errno = saved;
}

void hint_window_close(uint64_t key)
{
	int saved = errno, fd, i;

	rank_lock(&lifeline_lock, LOCK_LIFELINE);
	fd = lifeline_place_fd(key, false);
	for (i = 0; i < WINDOW_PLACES; i++)
		if (windows[i].n && windows[i].key == key) {
			if (!--windows[i].n && fd >= 0)
				count_lock(fd, F_OFD_SETLK, F_UNLCK);
			break;
		}
	rank_unlock(&lifeline_lock, LOCK_LIFELINE);
	errno = saved;
}

bool hint_recount(uint64_t key, uint64_t (*count)(uint64_t key))
{
	char path[PATH_MAX];
	struct dioshim_hint *h;
	bool temp, done = false;
	int fd;

	h = hint_get(key, false, &temp);
	if (!h)
		return false;
	/* A descriptor of our own: a lock through one we share with our
	 * other threads' windows would only convert theirs. */
	fd = hint_path(key, path, sizeof(path), false)
		     ? -1
		     : sys_openat(AT_FDCWD, path,
				  O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
	if (fd >= 0 && !count_lock(fd, F_OFD_SETLK, F_WRLCK)) {
		uint64_t n = count(key), was = atomic_load(&h->live);

		if (n != was) {
			log_event(LOG_RECLAIM, NULL,
				  "segments counted anew: %llu, the hint said "
				  "%llu",
				  (unsigned long long)n,
				  (unsigned long long)was);
			atomic_store(&h->live, n);
			atomic_fetch_add(&h->gen, 1);
		}
		done = true;
	}
	if (fd >= 0)
		sys_close(fd); /* and its lock */
	hint_put(h, temp);
	return done;
}

int hint_mine(uint64_t *keys, uint64_t *live, int max)
{
	int i, n = 0;

	if (hints_ready())
		for (i = 0; i < hint_count && n < max; i++, n++) {
			keys[n] = hint_keys[i];
			live[n] = atomic_load(&hint_set[i]->live);
		}
	return n;
}

void hint_atfork_prepare(void)
{
	rank_lock(&hint_lock, LOCK_HINT);
}

void hint_atfork_release(void)
{
	rank_unlock(&hint_lock, LOCK_HINT);
}

/* In a fork child: the parent's windows are its own (their locks went
 * with the descriptors lifeline_forget_inherited closed). */
void hint_atfork_child(void)
{
	memset(windows, 0, sizeof(windows));
}
