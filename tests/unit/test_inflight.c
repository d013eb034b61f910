// SPDX-License-Identifier: MIT
/*
 * The sharded in-flight counter and the barrier: while a barrier is up and
 * drained, no writer is inside its write, under threads racing for a few
 * seconds; a process killed inside a write does not hold a barrier up
 * forever.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "inflight.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

static struct shim_file *f;
static _Atomic int inside, stop, violations;
static _Atomic long writes, barriers;

static void *writer(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		struct dioshim_shard *sh = inflight_enter(f);

		if (!sh) {
			atomic_fetch_add(&violations, 1);
			break;
		}
		atomic_fetch_add(&inside, 1);
		for (volatile int i = 0; i < 200; i++)
			;
		atomic_fetch_sub(&inside, 1);
		inflight_exit(sh);
		atomic_fetch_add(&writes, 1);
	}
	return NULL;
}

static void *raiser(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		if (!barrier_raise(f)) {
			atomic_fetch_add(&violations, 1);
			break;
		}
		for (int i = 0; i < 50; i++)
			if (atomic_load(&inside))
				atomic_fetch_add(&violations, 1);
		barrier_lower(f);
		atomic_fetch_add(&barriers, 1);
		sched_yield();
	}
	return NULL;
}

static void alarm_fail(int sig)
{
	(void)sig;
	static const char msg[] = "hung: a barrier never drained\n";
	if (write(2, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

int main(void)
{
	struct file_id id;
	struct timespec run = { 3, 0 };
	pthread_t w[6], r[2];
	char path[512];
	int fd, i, status;
	pid_t kid;

	unit_setup();
	fd = unit_file("f", 0, path, sizeof(path));
	if (!file_identify(fd, &id))
		return T_FAIL;
	f = segment_attach(fd, &id, true);
	if (!f)
		return T_FAIL;

	for (i = 0; i < 6; i++)
		pthread_create(&w[i], NULL, writer, NULL);
	for (i = 0; i < 2; i++)
		pthread_create(&r[i], NULL, raiser, NULL);
	nanosleep(&run, NULL);
	atomic_store(&stop, 1);
	for (i = 0; i < 6; i++)
		pthread_join(w[i], NULL);
	for (i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	printf("%ld writes, %ld barriers\n", atomic_load(&writes),
	       atomic_load(&barriers));
	CHECK_EQ(atomic_load(&violations), 0);
	CHECK(atomic_load(&writes) > 1000);
	CHECK(atomic_load(&barriers) > 10);
	CHECK_EQ(inflight_count(f->seg), 0);
	CHECK_EQ(atomic_load(&f->seg->barrier), 0);

	/* A child dies inside a write, its count held. */
	kid = unit_fork();
	if (kid == 0) {
		if (f->slot < 0 || !inflight_enter(f))
			_exit(1);
		raise(SIGKILL);
		_exit(1);
	}
	waitpid(kid, &status, 0);
	CHECK(WIFSIGNALED(status));
	CHECK_EQ(inflight_count(f->seg), 1);
	signal(SIGALRM, alarm_fail);
	alarm(20);
	CHECK(barrier_raise(f));
	barrier_lower(f);
	alarm(0);

	/* A raiser that dies with the barrier up: writers go on. */
	kid = unit_fork();
	if (kid == 0) {
		if (f->slot < 0 || !barrier_raise(f))
			_exit(1);
		raise(SIGKILL);
		_exit(1);
	}
	waitpid(kid, &status, 0);
	CHECK(WIFSIGNALED(status));
	CHECK_EQ(atomic_load(&f->seg->barrier), 1);
	alarm(20);
	{
		struct dioshim_shard *sh = inflight_enter(f);

		CHECK(sh != NULL);
		if (sh)
			inflight_exit(sh);
	}
	alarm(0);
	CHECK_EQ(atomic_load(&f->seg->barrier), 0);

	segment_put(f, fd);
	close(fd);
	return unit_result();
}
