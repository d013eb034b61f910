// SPDX-License-Identifier: MIT
/*
 * keptfds DIR N: N files closed with writes in flight, then a sweep of
 * every descriptor, then numbers the shim may have used handed back to
 * another file.
 *
 * Creates DIR/f0 .. DIR/f<N-1> (O_DIRECT), submits PER extending 64 KiB
 * libaio writes to each, one after another, and closes it at once.  Then closefrom(3), opens
 * DIR/victim (8 KiB of data, ftruncated to 100 MiB) and dups it onto 200
 * numbers from 500 up.  Then takes every completion from the aio ring
 * itself, stats DIR/f0 by path (a call the shim sees), and checks that
 * the victim is still 100 MiB and every dup still open.
 *
 * The kernel alone: each fN ends at PER * 64 KiB, the victim at 100 MiB, every
 * descriptor open.  Exits 0, or 1 with what went wrong.
 */
#include <fcntl.h>
#include <libaio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REC 65536
#define DUPS 200
#define PER 1 /* writes per file */

struct aio_ring {
	unsigned id, nr, head, tail;
	unsigned magic, compat_features, incompat_features, header_length;
	struct io_event io_events[];
};

int main(int argc, char **argv)
{
	char path[4096], vb[8192];
	int n, i, v, dups[DUPS], ndups = 0, done = 0, bad = 0;
	struct iocb *cbs, *p;
	io_context_t ctx = 0;
	struct stat st;
	void *buf;

	if (argc != 3) {
		fprintf(stderr, "usage: keptfds DIR N\n");
		return 2;
	}
	n = atoi(argv[2]);
	cbs = calloc((size_t)n * PER, sizeof(*cbs));
	if (!cbs || posix_memalign(&buf, 4096, REC) || io_setup(n * PER, &ctx))
		return 1;
	memset(buf, 'k', REC);
	for (i = 0; i < n; i++) {
		int fd;

		snprintf(path, sizeof(path), "%s/f%d", argv[1], i);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
		if (fd < 0) {
			perror("open");
			return 1;
		}
		for (int k = 0; k < PER; k++) {
			p = &cbs[i * PER + k];
			io_prep_pwrite(p, fd, buf, REC, (long long)k * REC);
			if (io_submit(ctx, 1, &p) != 1) {
				perror("io_submit");
				return 1;
			}
		}
		if (close(fd)) {
			perror("close");
			return 1;
		}
	}
	closefrom(3);
	snprintf(path, sizeof(path), "%s/victim", argv[1]);
	v = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	memset(vb, 'v', sizeof(vb));
	if (v < 0 || write(v, vb, sizeof(vb)) != (ssize_t)sizeof(vb) ||
	    ftruncate(v, 100 << 20))
		return 1;
	for (i = 0; i < DUPS; i++) {
		int d = fcntl(v, F_DUPFD, 500);

		if (d < 0)
			break;
		dups[ndups++] = d;
	}
	while (done < n * PER) {
		struct aio_ring *r = (struct aio_ring *)ctx;
		unsigned head = r->head;
		unsigned tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);

		for (; head != tail; head = (head + 1) % r->nr, done++)
			if ((long)r->io_events[head].res != REC) {
				fprintf(stderr, "completion %ld\n",
					(long)r->io_events[head].res);
				return 1;
			}
		__atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
	}
	snprintf(path, sizeof(path), "%s/f0", argv[1]);
	if (stat(path, &st))
		return 1;
	if (fstat(v, &st) || st.st_size != 100 << 20) {
		fprintf(stderr, "victim is %lld bytes\n", (long long)st.st_size);
		bad = 1;
	}
	for (i = 0; i < ndups; i++)
		if (fcntl(dups[i], F_GETFD) < 0) {
			fprintf(stderr, "fd %d closed behind our back\n",
				dups[i]);
			bad = 1;
		}
	printf("dups=%d\n", ndups);
	return bad;
}
