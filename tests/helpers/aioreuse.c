// SPDX-License-Identifier: MIT
/*
 * aioreuse N LOG FILE: libaio appends reaped in another thread, whose
 * iocbs are reused at once, as InnoDB does.
 *
 * A submitting thread appends N 4 KiB records to FILE (O_APPEND|O_DIRECT)
 * through a pool of iocbs.  The main thread reaps with the raw
 * io_getevents system call (no libaio function the shim could wrap) and,
 * the moment a write's completion is in hand, reuses its iocb for a 4 KiB
 * read of block 0 into a buffer of its own, then watches the iocb for a
 * while: nobody may change it after that.  Odd records go out by an iocb
 * prepared once and submitted again unchanged, the rest freshly prepared.
 *
 * Writes LOG for t_verify (every record, anywhere); prints
 * "appends=N reads=R changed=C badres=B": C iocbs changed under the
 * application's hands, B completions that were not whole.  Exits 0 when
 * both are 0.
 */
#include "t_rec.h"

#include <fcntl.h>
#include <inttypes.h>
#include <libaio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>

#define BS 4096
#define POOL 16

struct slot {
	struct iocb cb;
	char *wbuf, *rbuf;
	bool reading;
	bool prepared; /* an odd record's iocb, prepared once */
};

static struct slot slots[POOL];
static io_context_t ctx;
static int fd, n;
static atomic_int free_mask = (1 << POOL) - 1;
static atomic_long changed, badres, reads;

static int take_slot(void)
{
	for (;;) {
		int m = atomic_load(&free_mask), i;

		for (i = 0; i < POOL; i++)
			if ((m & (1 << i)) &&
			    atomic_compare_exchange_strong(&free_mask, &m,
							   m & ~(1 << i)))
				return i;
		sched_yield();
	}
}

static void *submitter(void *arg)
{
	FILE *log = arg;
	int k;

	for (k = 0; k < n; k++) {
		int i = take_slot();
		struct slot *s = &slots[i];
		struct iocb *p = &s->cb;

		rec_stamp(s->wbuf, BS, 0, (uint64_t)k);
		/* an iocb prepared once and submitted again as it is, or
		 * prepared for each write */
		if (!(k & 1) || !s->prepared || s->reading) {
			io_prep_pwrite(p, fd, s->wbuf, BS, 0);
			s->prepared = k & 1;
		}
		s->reading = false;
		p->data = (void *)(uintptr_t)i;
		fprintf(log, "R 0 %d -1 0 0\n", k);
		if (io_submit(ctx, 1, &p) != 1) {
			fprintf(stderr, "io_submit failed\n");
			exit(2);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct io_event ev[POOL];
	pthread_t th;
	FILE *log;
	long done = 0;
	int i;

	if (argc != 4)
		return 2;
	n = atoi(argv[1]);
	log = fopen(argv[2], "w");
	fd = open(argv[3], O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_DIRECT,
		  0644);
	if (fd < 0 || !log || io_setup(64, &ctx)) {
		perror(argv[3]);
		return 2;
	}
	for (i = 0; i < POOL; i++)
		if (posix_memalign((void **)&slots[i].wbuf, BS, BS) ||
		    posix_memalign((void **)&slots[i].rbuf, BS, BS))
			return 2;
	pthread_create(&th, NULL, submitter, log);
	while (done < n) {
		long got = syscall(SYS_io_getevents, ctx, 1L, (long)POOL, ev,
				   NULL);
		long e;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			perror("io_getevents");
			return 2;
		}
		for (e = 0; e < got; e++) {
			int k = (int)(uintptr_t)ev[e].data;
			struct slot *s = &slots[k];
			struct iocb *p = &s->cb, want;
			int spin;

			if ((long)ev[e].res != BS)
				atomic_fetch_add(&badres, 1);
			if (s->reading) {
				s->reading = false;
				s->prepared = false;
				atomic_fetch_or(&free_mask, 1 << k);
				continue;
			}
			done++;
			if (s->prepared && (k & 1)) {
				/* kept for the next odd record as it is */
				atomic_fetch_or(&free_mask, 1 << k);
				continue;
			}
			/* Reuse it at once: a read of block 0. */
			s->reading = true;
			io_prep_pread(p, fd, s->rbuf, BS, 0);
			p->data = (void *)(uintptr_t)k;
			want = *p;
			if (io_submit(ctx, 1, &p) != 1) {
				fprintf(stderr, "read io_submit failed\n");
				return 2;
			}
			atomic_fetch_add(&reads, 1);
			/* The kernel writes aio_key at submission; nothing
			 * else may change. */
			for (spin = 0; spin < 2000; spin++) {
				want.key = p->key;
				if (memcmp(&want, p, sizeof(want))) {
					atomic_fetch_add(&changed, 1);
					break;
				}
			}
		}
	}
	pthread_join(th, NULL);
	/* the reads still out */
	while (atomic_load(&free_mask) != (1 << POOL) - 1) {
		long got = syscall(SYS_io_getevents, ctx, 1L, (long)POOL, ev,
				   NULL);
		long e;

		for (e = 0; e < got; e++) {
			int k = (int)(uintptr_t)ev[e].data;

			if ((long)ev[e].res != BS)
				atomic_fetch_add(&badres, 1);
			slots[k].reading = false;
			atomic_fetch_or(&free_mask, 1 << k);
		}
	}
	fclose(log);
	io_destroy(ctx);
	printf("appends=%d reads=%ld changed=%ld badres=%ld\n", n,
	       atomic_load(&reads), atomic_load(&changed),
	       atomic_load(&badres));
	return close(fd) || changed || badres ? 1 : 0;
}
