// SPDX-License-Identifier: MIT
/*
 * Who owns a slot or a lock: the identity every shared object records
 * (pid, start time, pid namespace and lifeline token), whether that owner
 * still lives, and the robust process-shared locks of a segment.
 *
 * Layer L1 (shared state), above the shared files and the lifelines
 * (an owner from another pid namespace is judged by its lifeline,
 * lifeline_held); calls only them and L0.
 */
#define _GNU_SOURCE
#include "owner.h"

#include "lockrank.h"

#include "log.h"
#include "lifeline.h"
#include "sys.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOCK_TIMEOUT_SEC 30

/* ---- owner identity --------------------------------------------------- */

static struct owner_id self_id;
static int self_valid;

/*
 * starttime (field 22 of /proc/PID/stat) of pid; *gone when the process
 * does not exist or is a zombie.  Returns false when /proc cannot tell.
 */
static bool proc_starttime(pid_t pid, uint64_t *start, bool *gone)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd, field;

	*gone = false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = sys_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0) {
		*gone = errno == ENOENT || errno == ESRCH;
		return *gone;
	}
	n = sys_read(fd, buf, sizeof(buf) - 1);
	sys_close(fd);
	if (n <= 0) {
		*gone = n == 0 || errno == ESRCH;
		return *gone;
	}
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return false;
	p += 2; /* field 3: state */
	if (*p == 'Z' || *p == 'X') {
		*gone = true;
		return true;
	}
	for (field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p)
		return false;
	*start = strtoull(p, NULL, 10);
	return true;
}

/* Whether /proc is our pid namespace's (a namespace made without its own
 * /proc sees the parent's, where our pids name other processes). */
static bool proc_ours;

void owner_refresh(void)
{
	struct statx stx;
	uint64_t start = 0;
	uint32_t token = 0;
	bool gone;
	pid_t pid = getpid();
	char self[32];
	long n = sys_readlinkat(AT_FDCWD, "/proc/self", self, sizeof(self) - 1);

	if (n > 0) {
		self[n] = '\0';
		proc_ours = strtol(self, NULL, 10) == (long)pid;
	} else {
		proc_ours = false;
	}
	if (!proc_ours || !proc_starttime(pid, &start, &gone) || gone)
		start = 0;
	self_id.pid_start = (uint64_t)pid | start << DIOSHIM_OWNER_PID_BITS;
	self_id.pidns = 0;
	if (sys_statx(AT_FDCWD, "/proc/self/ns/pid", 0, STATX_INO, &stx) == 0)
		self_id.pidns = (uint32_t)stx.stx_ino;
	/* This image's lifeline token (see lifeline_held). */
	while (!token)
		if (sys_getrandom(&token, sizeof(token), 0) != sizeof(token))
			token = (uint32_t)(pid * 2654435761u ^ start) | 1;
	self_id.pidns |= (uint64_t)token << 32;
	__atomic_store_n(&self_valid, 1, __ATOMIC_RELEASE);
}

const struct owner_id *owner_self(void)
{
	if (!__atomic_load_n(&self_valid, __ATOMIC_ACQUIRE))
		owner_refresh();
	return &self_id;
}

bool owner_alive_in(uint64_t key, uint64_t pid_start, uint64_t pidns)
{
	const struct owner_id *me = owner_self();
	uint32_t ns = (uint32_t)pidns, my_ns = (uint32_t)me->pidns;
	uint32_t token = (uint32_t)(pidns >> 32);
	uint64_t start;
	bool gone, known;
	pid_t pid = (pid_t)(pid_start & DIOSHIM_OWNER_PID_MASK);

	if (pid_start == me->pid_start && ns == my_ns)
		return true;
	if (pid <= 0)
		return false; /* a corrupt owner is no owner */
	/*
	 * In our pid namespace, kill(pid, 0) says surely whether the pid is
	 * gone; /proc, when it is ours and shows the process (hidepid hides
	 * other users'), tells a recycled pid by its start time.  A pid from
	 * another namespace means nothing here: the owner's lifeline tells,
	 * wherever it runs, and so it does when /proc cannot.
	 */
	if (ns && ns == my_ns) {
		/* kill's ESRCH is taken for death once /proc or the lifeline
		 * agrees (a failure of kill itself must not make a live
		 * writer's slot, locks and tail another's to take). */
		bool dead = kill(pid, 0) && errno == ESRCH;

		if (proc_ours && (pid_start >> DIOSHIM_OWNER_PID_BITS) &&
		    proc_starttime(pid, &start, &gone)) {
			if (!gone)
				return start == pid_start >>
							DIOSHIM_OWNER_PID_BITS;
			if (dead)
				return false;
		} else if (dead && !(token && key != LIFELINE_NONE)) {
			return false;
		}
	}
	if (token && key != LIFELINE_NONE) {
		bool held = lifeline_held(key, token, &known);

		if (known)
			return held;
	}
	/* Cannot tell: alive, which only costs a trim — unless the word
	 * cannot be an owner's (no namespace and no lifeline). */
	return ns || token;
}

bool owner_alive(uint64_t pid_start, uint64_t pidns)
{
	return owner_alive_in(LIFELINE_NONE, pid_start, pidns);
}

/* The same process (pid, start time, namespace), whatever its image: a
 * new image after exec has a new token. */
bool owner_is_self(const struct dioshim_owner *o)
{
	const struct owner_id *me = owner_self();

	return atomic_load_explicit(&o->pid_start, memory_order_acquire) ==
		       me->pid_start &&
	       (uint32_t)o->pidns == (uint32_t)me->pidns;
}

void owner_set_self(struct dioshim_owner *o)
{
	const struct owner_id *me = owner_self();

	o->pidns = me->pidns;
	atomic_store_explicit(&o->pid_start, me->pid_start,
			      memory_order_release);
}

/* ---- robust locks ----------------------------------------------------- */

void robust_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

/*
 * A mutex in shared memory is only locked if its kind is the one every
 * segment mutex is made with: glibc acts on the kind bits (priority
 * protection, priority inheritance) and asserts on what they imply, so a
 * corrupt kind would crash the application instead of failing a lock.
 */
static int robust_kind = -1;

static bool mutex_sane(pthread_mutex_t *m)
{
	if (__atomic_load_n(&robust_kind, __ATOMIC_RELAXED) < 0) {
		pthread_mutex_t probe;

		robust_init(&probe);
		__atomic_store_n(&robust_kind, probe.__data.__kind,
				 __ATOMIC_RELAXED);
		pthread_mutex_destroy(&probe);
	}
	return __atomic_load_n(&m->__data.__kind, __ATOMIC_RELAXED) ==
	       robust_kind;
}

int seg_lock_for(pthread_mutex_t *m, bool *recovered, int secs)
{
	struct timespec dl;
	int rc;

	*recovered = false;
	if (!mutex_sane(m))
		return EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += secs;
	lock_want(lock_rank_of_seg(m), m);
	rc = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &dl);
	if (rc == EOWNERDEAD) {
		/* The holder died: its critical section is ours to repair. */
		pthread_mutex_consistent(m);
		*recovered = true;
		rc = 0;
	}
	if (rc == 0)
		lock_got(lock_rank_of_seg(m), m);
	return rc;
}

bool seg_lock(pthread_mutex_t *m, bool *recovered)
{
	int rc = seg_lock_for(m, recovered, LOCK_TIMEOUT_SEC);

	if (rc) {
		log_event(LOG_FALLBACK, NULL,
			  "shared lock unusable (%s): passing through",
			  strerror(rc));
		return false;
	}
	return true;
}

int seg_trylock(pthread_mutex_t *m, bool *recovered)
{
	int rc;

	*recovered = false;
	if (!mutex_sane(m))
		return EINVAL;
	rc = pthread_mutex_trylock(m);
	if (rc == EOWNERDEAD) {
		pthread_mutex_consistent(m);
		*recovered = true;
		rc = 0;
	}
	if (rc == 0)
		lock_got(lock_rank_of_seg(m), m);
	return rc;
}

void seg_unlock(pthread_mutex_t *m)
{
	lock_put(lock_rank_of_seg(m), m);
	pthread_mutex_unlock(m);
}
