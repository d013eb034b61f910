// SPDX-License-Identifier: MIT
/*
 * The fd table: an O_DIRECT writer is attached at open; dups share one
 * open file description and one reference; the last close detaches; fds
 * the shim never saw are adopted on first use; pipes and directories pass;
 * a number reused behind the shim's back is replaced; F_SETFL adding
 * O_DIRECT attaches; close_range drops a range (all with every file
 * engaged at once, DIOSHIM_ENGAGE=always).  By default an O_DIRECT writer
 * alone on its file has no segment (a lone writer, announced): a second
 * description of the file in the process attaches both.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "config.h"
#include "fdtable.h"
#include "real.h"
#include "shm.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static bool seg_exists(int fd)
{
	struct stat st, ss;
	char p[512];

	fstat(fd, &st);
	segment_path(p, sizeof(p), st.st_dev, st.st_ino);
	return stat(p, &ss) == 0;
}

/* What every read and write looks at is on one page (hot.c): the exec
 * flag, the hints' pointers, the real functions, the markers and the
 * first few hundred entries of the fd table. */
static void hot_page(void)
{
	uintptr_t page = (uintptr_t)&segment_exec_pending & ~(uintptr_t)4095;
	const void *hot[] = { &segment_exec_pending, &hint_count,
			      &hint_set[HINTS_MAX - 1], &real_read,
			      &real_write, &real_pread, &real_pwrite,
			      &real_pread64, &real_pwrite64,
			      &fdt_mark[FDT_MARKS - 1] + 1, &fdt_chunk0[255] };
	unsigned i;

	CHECK_EQ((uintptr_t)&segment_exec_pending & 4095, 0);
	for (i = 0; i < sizeof(hot) / sizeof(hot[0]); i++)
		CHECK_EQ((uintptr_t)hot[i] & ~(uintptr_t)4095, page);
	CHECK(fdt[0] == fdt_chunk0);
}

static bool seg_exists_path(const char *path)
{
	struct stat st, ss;
	char p[512];

	stat(path, &st);
	segment_path(p, sizeof(p), st.st_dev, st.st_ino);
	return stat(p, &ss) == 0;
}

int main(void)
{
	char path[512], path2[512];
	struct ofd *o, *o2;
	int fd, fd2, fd3, pfd[2];

	hot_page();
	setenv("DIOSHIM_ENGAGE", "always", 1);
	unit_setup();
	fd = unit_file("a", 0, path, sizeof(path));
	fdtable_opened(fd, O_RDWR | O_DIRECT, false);
	o = fdtable_resolve(fd);
	CHECK(o && atomic_load(&o->file));
	CHECK(seg_exists(fd));

	/* dup shares the ofd. */
	fd2 = dup(fd);
	fdtable_dup(fd, fd2);
	CHECK(fdtable_resolve(fd2) == o);
	CHECK_EQ(o->refs, 2);
	fdtable_close(fd);
	close(fd);
	fdtable_closed(fd);
	CHECK(fdtable_resolve(fd2) == o);
	CHECK(seg_exists(fd2));
	/* Last close: detached, segment removed; the entry marked until the
	 * close is made (a call meanwhile waits for it). */
	fdtable_close(fd2);
	CHECK(!seg_exists(fd2));
	CHECK(fdtable_peek(fd2) != NULL);
	close(fd2);
	fdtable_closed(fd2);
	CHECK(fdtable_peek(fd2) == NULL);

	/* An fd opened behind the shim's back is adopted on first use. */
	fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_DIRECT, 0);
	CHECK(fd >= 0);
	CHECK(fdtable_peek(fd) == NULL);
	o = fdtable_resolve(fd);
	CHECK(o && atomic_load(&o->file));
	CHECK(seg_exists(fd));

	/* Its number closed and reused behind our back, then opened through
	 * the shim: the stale entry is replaced and nothing is trimmed
	 * through the new file. */
	syscall(SYS_close, fd);
	fd3 = unit_file("b", 12345, path2, sizeof(path2));
	CHECK_EQ(fd3, fd);
	fdtable_opened(fd3, O_RDWR | O_DIRECT, false);
	o2 = fdtable_resolve(fd3);
	CHECK(o2 && atomic_load(&o2->file) &&
	      atomic_load(&o2->file)->seg->eof == 12345);
	{
		struct stat st;

		fstat(fd3, &st);
		CHECK_EQ(st.st_size, 12345);
	}
	fdtable_close(fd3);
	close(fd3);
	fdtable_closed(fd3);

	/* Across the first chunk's end (hot.c's, then one made on demand):
	 * a dup at 1023 and one at 1500 share the ofd of the first. */
	fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDWR | O_DIRECT, 0);
	o = fdtable_resolve(fd);
	CHECK(o && atomic_load(&o->file));
	CHECK_EQ(dup2(fd, FDT_CHUNK - 1), FDT_CHUNK - 1);
	fdtable_dup(fd, FDT_CHUNK - 1);
	CHECK_EQ(dup2(fd, FDT_CHUNK + 476), FDT_CHUNK + 476);
	fdtable_dup(fd, FDT_CHUNK + 476);
	CHECK(fdtable_resolve(FDT_CHUNK - 1) == o);
	CHECK(fdtable_resolve(FDT_CHUNK + 476) == o);
	CHECK_EQ(o->refs, 3);
	CHECK(fdtable_peek(FDT_CHUNK + 477) == NULL);
	CHECK(fdtable_peek(FDT_MAX) == OFD_PASS);
	fdtable_close(FDT_CHUNK - 1);
	close(FDT_CHUNK - 1);
	fdtable_closed(FDT_CHUNK - 1);
	fdtable_close(FDT_CHUNK + 476);
	close(FDT_CHUNK + 476);
	fdtable_closed(FDT_CHUNK + 476);
	CHECK_EQ(o->refs, 1);
	fdtable_close(fd);
	close(fd);
	fdtable_closed(fd);
	CHECK(!seg_exists_path(path));

	/* Pipes pass through. */
	CHECK(pipe(pfd) == 0);
	CHECK(fdtable_resolve(pfd[0]) == NULL);
	CHECK(fdtable_resolve(pfd[1]) == NULL);
	o = fdtable_peek(pfd[0]);
	CHECK(o == OFD_PASS || (o && !atomic_load(&o->file)));
	fdtable_close(pfd[0]);
	fdtable_close(pfd[1]);
	close(pfd[0]);
	close(pfd[1]);

	/* A buffered writer: watched, not attached (no segment exists)... */
	fd = open(path, O_RDWR);
	fdtable_opened(fd, O_RDWR, false);
	CHECK(fdtable_resolve(fd) == NULL);
	CHECK(!seg_exists(fd));
	/* ... until F_SETFL turns O_DIRECT on. */
	CHECK(fcntl(fd, F_SETFL, O_DIRECT) == 0);
	fdtable_setfl(fd);
	o = fdtable_resolve(fd);
	CHECK(o && atomic_load(&o->file));
	CHECK(atomic_load(&o->flags) & O_DIRECT);

	/* A second, buffered fd of a file that has a segment is served too
	 * (it must see the logical size). */
	fd2 = open(path, O_RDONLY);
	fdtable_opened(fd2, O_RDONLY, false);
	o2 = fdtable_resolve(fd2);
	CHECK(o2 && atomic_load(&o2->file) == atomic_load(&o->file));

	/* close_range drops both. */
	fdtable_close_range((unsigned)(fd < fd2 ? fd : fd2),
			    (unsigned)(fd < fd2 ? fd2 : fd));
	CHECK(!seg_exists(fd));
	close(fd);
	close(fd2);
	fdtable_closed_range((unsigned)(fd < fd2 ? fd : fd2),
			     (unsigned)(fd < fd2 ? fd2 : fd));
	CHECK(fdtable_peek(fd) == NULL && fdtable_peek(fd2) == NULL);

	/* A lone writer: no segment, writes counted; a second description
	 * of its file attaches both. */
	config.engage_always = false;
	fd = unit_file("lone", 0, path, sizeof(path));
	fdtable_opened(fd, O_RDWR | O_DIRECT, false);
	CHECK(fdtable_resolve(fd) == NULL);
	CHECK(!seg_exists(fd));
	o = fdtable_guest_writer(fd);
	CHECK(o != NULL);
	fd2 = open(path, O_WRONLY | O_DIRECT);
	fdtable_opened(fd2, O_WRONLY | O_DIRECT, false);
	CHECK(seg_exists(fd));
	CHECK(fdtable_guest_writer(fd) == NULL);
	o = fdtable_resolve(fd);
	o2 = fdtable_resolve(fd2);
	CHECK(o && o2 && atomic_load(&o->file) &&
	      atomic_load(&o->file) == atomic_load(&o2->file));
	fdtable_close(fd2);
	close(fd2);
	fdtable_closed(fd2);
	fdtable_close(fd);
	CHECK(!seg_exists(fd));
	close(fd);
	fdtable_closed(fd);

	/* fds past the table's reach are never served. */
	CHECK(fdtable_resolve(1 << 30) == NULL);
	return unit_result();
}
