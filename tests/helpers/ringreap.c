// SPDX-License-Identifier: MIT
/*
 * ringreap aio|uring FILE N WHEN: extending direct writes whose
 * completions the program takes from the ring itself, as QEMU does with
 * the aio ring and liburing's inline peek does with the CQ: no reap call
 * the shim could see.
 *
 * Creates FILE (O_RDWR|O_CREAT|O_TRUNC|O_DIRECT) and writes N 64 KiB
 * records one after another, 8 in flight, each the byte 'a' + its index
 * mod 26, a buffer and iocb reused only once its write completed.  The
 * completions are read from the ring (aio: io_events between
 * the ring's head and tail, head moved on; uring: io_uring_peek_cqe and
 * io_uring_cqe_seen, both inline).  Then, by WHEN:
 *
 *   after     every completion taken, fdatasync, close, exit: QEMU's end
 *   fstat     the same with an fstat before the close
 *   inflight  the last 8 submitted, then the close at once, the
 *             completions taken after it, then exit
 *   stat      as inflight, then a stat(FILE) (the shim sees a call), then
 *             `stat -c %s FILE` run without LD_PRELOAD while this
 *             process is still alive: its output is the line printed
 *   fork      as inflight, with a fork right after the close: the child
 *             sleeps 300 ms and exits, outliving the parent, which takes
 *             the completions and exits at once
 *   status    as fstat, then `$RINGREAP_DIOSHIM status FILE` run without
 *             LD_PRELOAD before the close: its output is the line printed
 *
 * The kernel alone: FILE ends at N * 64 KiB, every record in place.
 * Exits 0, or 1 if a call failed or a completion was not the whole record.
 */
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <liburing.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define REC 65536
#define DEPTH 8

extern char **environ;

/* fs/aio.c: the ring mapped at the context's address. */
struct aio_ring {
	unsigned id, nr, head, tail;
	unsigned magic, compat_features, incompat_features, header_length;
	struct io_event io_events[];
};

static int use_uring;
static io_context_t ctx;
static struct io_uring ring;
static struct iocb cbs[DEPTH];
static bool busy[DEPTH]; /* a slot's buffer and iocb are in flight */

static void submit(int fd, void *buf, int slot, long i)
{
	if (use_uring) {
		struct io_uring_sqe *s = io_uring_get_sqe(&ring);

		io_uring_prep_write(s, fd, buf, REC, (__u64)i * REC);
		io_uring_sqe_set_data64(s, (__u64)slot);
		if (io_uring_submit(&ring) != 1) {
			fprintf(stderr, "io_uring_submit failed\n");
			exit(1);
		}
	} else {
		struct iocb *p = &cbs[slot];

		io_prep_pwrite(p, fd, buf, REC, (long long)i * REC);
		if (io_submit(ctx, 1, &p) != 1) {
			perror("io_submit");
			exit(1);
		}
	}
}

/* Completions in the ring now, taken without a call: how many. */
static int take(void)
{
	int n = 0;

	if (use_uring) {
		struct io_uring_cqe *c;

		while (io_uring_peek_cqe(&ring, &c) == 0) {
			if (c->res != REC) {
				fprintf(stderr, "completion %d\n", c->res);
				exit(1);
			}
			busy[c->user_data % DEPTH] = false;
			io_uring_cqe_seen(&ring, c);
			n++;
		}
	} else {
		struct aio_ring *r = (struct aio_ring *)ctx;
		unsigned head = r->head;
		unsigned tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);

		for (; head != tail; head = (head + 1) % r->nr, n++) {
			struct io_event *e = &r->io_events[head];

			if ((long)e->res != REC) {
				fprintf(stderr, "completion %ld\n",
					(long)e->res);
				exit(1);
			}
			busy[(struct iocb *)e->obj - cbs] = false;
		}
		__atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
	}
	return n;
}

/* argv[0] run with LD_PRELOAD taken out of the environment. */
static void outside(char **argv)
{
	char *env[64];
	int i, n = 0, st;
	pid_t pid;

	fflush(stdout);
	for (i = 0; environ[i] && n < 63; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11))
			env[n++] = environ[i];
	env[n] = NULL;
	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, env) ||
	    waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st)) {
		fprintf(stderr, "%s outside failed\n", argv[0]);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	const char *when;
	long n, sub = 0, done = 0, i;
	char *bufs[DEPTH];
	int fd;
	bool early;

	if (argc != 5) {
		fprintf(stderr,
			"usage: ringreap aio|uring FILE N "
			"after|fstat|inflight|stat|fork|status\n");
		return 2;
	}
	use_uring = !strcmp(argv[1], "uring");
	n = atol(argv[3]);
	when = argv[4];
	early = !strcmp(when, "inflight") || !strcmp(when, "stat") ||
		!strcmp(when, "fork");
	fd = open(argv[2], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (fd < 0) {
		perror("open");
		return 1;
	}
	for (i = 0; i < DEPTH; i++)
		if (posix_memalign((void **)&bufs[i], 4096, REC))
			return 1;
	if (use_uring ? io_uring_queue_init(DEPTH, &ring, 0) != 0
		      : io_setup(DEPTH, &ctx) != 0) {
		fprintf(stderr, "ring setup failed\n");
		return 1;
	}
	while (done < n) {
		for (i = 0; i < DEPTH && sub < n; i++) {
			if (busy[i])
				continue;
			memset(bufs[i], 'a' + (int)(sub % 26), REC);
			busy[i] = true;
			submit(fd, bufs[i], (int)i, sub);
			sub++;
		}
		if (early && sub == n && fd >= 0) {
			if (close(fd)) {
				perror("close");
				return 1;
			}
			fd = -1;
			if (!strcmp(when, "fork")) {
				pid_t pid = fork();

				if (pid < 0)
					return 1;
				if (pid == 0) {
					usleep(300000);
					exit(0);
				}
			}
		}
		done += take();
	}
	if (fd >= 0) {
		struct stat st;

		if ((!strcmp(when, "fstat") || !strcmp(when, "status")) &&
		    fstat(fd, &st))
			return 1;
		if (!strcmp(when, "status")) {
			char *cmd = getenv("RINGREAP_DIOSHIM");
			char *sv[] = { cmd, "status", argv[2], NULL };

			if (!cmd)
				return 2;
			outside(sv);
		}
		if (fdatasync(fd) || close(fd)) {
			perror("fdatasync/close");
			return 1;
		}
	}
	if (!strcmp(when, "stat")) {
		char *sv[] = { "stat", "-c", "%s", argv[2], NULL };
		struct stat st;

		if (stat(argv[2], &st)) {
			perror("stat");
			return 1;
		}
		outside(sv);
	}
	return 0;
}
