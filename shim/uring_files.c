// SPDX-License-Identifier: MIT
/*
 * io_uring registered files: the table of each ring's registered fds
 * (index -> fd), kept as the program registers and updates it, so that an
 * entry naming a registered file (IOSQE_FIXED_FILE) is known by its fd
 * (uring.c).  Layer L4, with the registration wrappers: may call L0-L3,
 * the fd table and ring.c.
 *
 * Locks: async_lock alone.
 */
#define _GNU_SOURCE
#include "ring.h"
#include "lockrank.h"

#include "real.h"

#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

/* Set slots [off, off + nr) of ring's table (grow it to size if larger). */
static void files_set(struct io_uring *ring, unsigned size, unsigned off,
		      const int *fds, unsigned nr)
{
	struct aring *r;
	unsigned i;

	/* A lone writer's file, registered: queued writes may follow. */
	for (i = 0; fds && i < nr; i++)
		if (fds[i] >= 0)
			fdtable_engage_fd(fds[i]);
	rank_lock(&async_lock, LOCK_ASYNC);
	r = ring_get(RING_URING, (uintptr_t)ring);
	if (r && size > r->nfiles) {
		int *t = realloc(r->files, size * sizeof(int));

		if (t) {
			for (i = r->nfiles; i < size; i++)
				t[i] = -1;
			r->files = t;
			r->nfiles = size;
		}
	}
	for (i = 0; r && i < nr && off + i < r->nfiles; i++)
		r->files[off + i] = fds ? fds[i] : -1;
	rank_unlock(&async_lock, LOCK_ASYNC);
}

EXPORT int io_uring_register_files(struct io_uring *ring, const int *files,
				   unsigned nr_files)
{
	int ret = lazy_io_uring_register_files()(ring, files, nr_files);

	if (ret == 0)
		files_set(ring, nr_files, 0, files, nr_files);
	return ret;
}

EXPORT int io_uring_register_files_tags(struct io_uring *ring,
					const int *files, const __u64 *tags,
					unsigned nr)
{
	int ret = lazy_io_uring_register_files_tags()(ring, files, tags, nr);

	if (ret == 0)
		files_set(ring, nr, 0, files, nr);
	return ret;
}

EXPORT int io_uring_register_files_sparse(struct io_uring *ring, unsigned nr)
{
	int ret = lazy_io_uring_register_files_sparse()(ring, nr);

	if (ret == 0)
		files_set(ring, nr, 0, NULL, nr);
	return ret;
}

EXPORT int io_uring_register_files_update(struct io_uring *ring, unsigned off,
					  const int *files, unsigned nr_files)
{
	int ret = lazy_io_uring_register_files_update()(ring, off, files,
							 nr_files);

	if (ret > 0)
		files_set(ring, 0, off, files, (unsigned)ret);
	return ret;
}

EXPORT int io_uring_register_files_update_tag(struct io_uring *ring,
					      unsigned off, const int *files,
					      const __u64 *tags, unsigned nr)
{
	int ret = lazy_io_uring_register_files_update_tag()(ring, off, files,
							     tags, nr);

	if (ret > 0)
		files_set(ring, 0, off, files, (unsigned)ret);
	return ret;
}

EXPORT int io_uring_unregister_files(struct io_uring *ring)
{
	int ret = lazy_io_uring_unregister_files()(ring);
	struct aring *r;

	if (ret == 0) {
		rank_lock(&async_lock, LOCK_ASYNC);
		r = ring_find(RING_URING, (uintptr_t)ring);
		if (r) {
			free(r->files);
			r->files = NULL;
			r->nfiles = 0;
		}
		rank_unlock(&async_lock, LOCK_ASYNC);
	}
	return ret;
}
