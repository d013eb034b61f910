// SPDX-License-Identifier: MIT
/*
 * xfer DIR: the calls that move data from file to file inside the kernel,
 * on a file that an O_DIRECT writer holds open (under the shim, with a
 * reserved tail past its data).  Prints one line per call: its name, what
 * it returned (-errno on failure) and the sizes it may have moved, as
 * fstat gives them; the same run without the shim is the control.
 *
 *   a   the writer's file: 64 KiB of 'a' through O_DIRECT, kept open; ab a
 *       buffered descriptor of it (XFS refuses unaligned copies into an
 *       O_DIRECT one)
 *   b   128 KiB of 'b', buffered
 *   c   copies out of a; d a clone of a; e exchanges with a (XFS)
 *
 * Reads of a past its data (copy_file_range, sendfile, splice from 60K and
 * 64K for 8K) must stop where the kernel alone stops; copies into a
 * (unaligned, past its end), clones and exchanges must leave the sizes the
 * kernel alone leaves, during the run and after it.  On a filesystem
 * without reflink the block calls fail the same way with and without the
 * shim.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct xfs_exchange_range_ {
	int32_t file1_fd;
	uint32_t pad;
	uint64_t file1_offset, file2_offset, length, flags;
};
#define XFS_IOC_EXCHANGE_RANGE_ _IOW('X', 129, struct xfs_exchange_range_)
#define XFS_EXCHANGE_RANGE_TO_EOF_ (1ull << 0)

static long long size_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? -1 : (long long)st.st_size;
}

static long long rv(long long r)
{
	return r < 0 ? -errno : r;
}

static int open_in(const char *dir, const char *name, int flags)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return open(p, flags, 0644);
}

int main(int argc, char **argv)
{
	static char buf[1 << 17] __attribute__((aligned(4096)));
	int a, ab, b, c, d, e, pfd[2];
	off64_t oi, oo;
	off_t so;
	long long r;

	if (argc != 2)
		return 2;
	a = open_in(argv[1], "a", O_RDWR | O_CREAT | O_TRUNC | O_DIRECT);
	ab = open_in(argv[1], "a", O_RDWR);
	b = open_in(argv[1], "b", O_RDWR | O_CREAT | O_TRUNC);
	c = open_in(argv[1], "c", O_RDWR | O_CREAT | O_TRUNC);
	d = open_in(argv[1], "d", O_RDWR | O_CREAT | O_TRUNC);
	e = open_in(argv[1], "e", O_RDWR | O_CREAT | O_TRUNC);
	if (a < 0 || ab < 0 || b < 0 || c < 0 || d < 0 || e < 0 || pipe(pfd))
		return 2;
	memset(buf, 'a', 65536);
	if (pwrite(a, buf, 65536, 0) != 65536)
		return 2;
	memset(buf, 'b', sizeof(buf));
	if (pwrite(b, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
		return 2;
	memset(buf, 'e', 65536);
	if (pwrite(e, buf, 65536, 0) != 65536)
		return 2;

	/* Reads of a at and across its end. */
	oi = 65536, oo = 0;
	r = rv(copy_file_range(a, &oi, c, &oo, 8192, 0));
	printf("copy_from_end %lld off %lld c %lld\n", r, (long long)oi,
	       size_of(c));
	oi = 61440, oo = 0;
	r = rv(copy_file_range(a, &oi, c, &oo, 8192, 0));
	printf("copy_across_end %lld off %lld c %lld\n", r, (long long)oi,
	       size_of(c));
	so = 61440;
	r = rv(sendfile(c, a, &so, 8192));
	printf("sendfile_across_end %lld off %lld c %lld\n", r, (long long)so,
	       size_of(c));
	so = 65536;
	r = rv(sendfile(c, a, &so, 8192));
	printf("sendfile_from_end %lld\n", r);
	/* From the position: a's is 0 (pwrite), moved to 60K. */
	lseek(a, 61440, SEEK_SET);
	r = rv(sendfile(c, a, NULL, 8192));
	printf("sendfile_position %lld pos %lld\n", r,
	       (long long)lseek(a, 0, SEEK_CUR));
	oi = 61440;
	r = rv(splice(a, &oi, pfd[1], NULL, 8192, 0));
	printf("splice_across_end %lld\n", r);
	if (r > 0 && read(pfd[0], buf, (size_t)r) != r)
		return 2;
	lseek(a, 0, SEEK_SET);
	/* Through syscall(3), as programs older than glibc's function do;
	 * and other numbers through it as they are. */
	oi = 61440, oo = 0;
	r = rv(syscall(SYS_copy_file_range, a, &oi, c, &oo, (size_t)8192, 0));
	printf("syscall_copy_across_end %lld off %lld\n", r, (long long)oi);
	printf("syscall_getpid %d\n", syscall(SYS_getpid) == getpid());
	r = rv(syscall(SYS_close, -1));
	printf("syscall_close_bad %lld\n", r);
	r = rv(syscall(99999, 1, 2, 3, 4, 5, 6));
	printf("syscall_unknown %lld\n", r);
	r = rv(syscall(SYS_pread64, a, buf, (size_t)4096, (off_t)4096));
	printf("syscall_pread %lld\n", r);
	/* A fork made through syscall(): the child returns from it. */
	r = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(7);
	{
		int st = 0;

		printf("syscall_clone %d\n",
		       r > 0 && waitpid((pid_t)r, &st, 0) == r &&
			       WIFEXITED(st) && WEXITSTATUS(st) == 7);
	}

	/* Writes into a: unaligned and past its end, then from a pipe. */
	oi = 0, oo = 131072;
	r = rv(copy_file_range(b, &oi, ab, &oo, 1000, 0));
	printf("copy_into %lld a %lld\n", r, size_of(a));
	memset(buf, 'p', 4096);
	if (write(pfd[1], buf, 4096) != 4096)
		return 2;
	oo = 196608;
	r = rv(splice(pfd[0], NULL, a, &oo, 4096, 0));
	printf("splice_into %lld a %lld\n", r, size_of(a));
	so = 0;
	r = rv(sendfile(a, b, &so, 4096));
	printf("sendfile_into %lld a %lld\n", r, size_of(a));

	/* Clones, a dedupe and an exchange (reflink filesystems). */
	r = rv(ioctl(d, FICLONE, a));
	printf("ficlone %lld d %lld a %lld\n", r, size_of(d), size_of(a));
	{
		struct file_clone_range cr = { .src_fd = b, .src_offset = 0,
					       .src_length = 65536,
					       .dest_offset = 262144 };

		r = rv(ioctl(a, FICLONERANGE, &cr));
		printf("ficlonerange_into %lld a %lld\n", r, size_of(a));
	}
	/* An unaligned end of a (a copy of 1000 bytes), cloned to EOF. */
	oi = 0, oo = 327680;
	r = rv(copy_file_range(b, &oi, ab, &oo, 1000, 0));
	printf("copy_unaligned_end %lld a %lld\n", r, size_of(a));
	/* Across that end through the O_DIRECT descriptor: the kernel
	 * checks the length for alignment, and stops at the size. */
	so = 327680;
	r = rv(sendfile(c, a, &so, 8192));
	printf("sendfile_direct_unaligned_end %lld off %lld\n", r,
	       (long long)so);
	oi = 327680, oo = 0;
	r = rv(copy_file_range(a, &oi, c, &oo, 8192, 0));
	printf("copy_direct_unaligned_end %lld\n", r);
	{
		struct file_clone_range cr = { .src_fd = a,
					       .src_offset = 327680,
					       .src_length = 0,
					       .dest_offset = 327680 };

		r = rv(ioctl(d, FICLONERANGE, &cr));
		printf("ficlonerange_to_eof %lld d %lld\n", r, size_of(d));
	}
	{
		struct {
			struct file_dedupe_range r;
			struct file_dedupe_range_info i;
		} dd = { .r = { .src_offset = 0, .src_length = 8192,
				.dest_count = 1 },
			 .i = { .dest_fd = a, .dest_offset = 0 } };

		r = rv(ioctl(d, FIDEDUPERANGE, &dd));
		printf("fidedupe %lld status %d bytes %llu\n", r,
		       (int)dd.i.status,
		       (unsigned long long)dd.i.bytes_deduped);
		dd.r.src_offset = 327680;
		dd.i.dest_offset = 327680;
		r = rv(ioctl(d, FIDEDUPERANGE, &dd));
		printf("fidedupe_at_end %lld status %d bytes %llu\n", r,
		       (int)dd.i.status,
		       (unsigned long long)dd.i.bytes_deduped);
	}
	{
		struct xfs_exchange_range_ x = {
			.file1_fd = a, .file1_offset = 0, .file2_offset = 0,
			.length = 0, .flags = XFS_EXCHANGE_RANGE_TO_EOF_
		};

		r = rv(ioctl(e, XFS_IOC_EXCHANGE_RANGE_, &x));
		printf("exchange_to_eof %lld a %lld e %lld\n", r, size_of(a),
		       size_of(e));
	}
	/* The writer goes on after all that: one more block at its end. */
	memset(buf, 'z', 4096);
	r = size_of(a);
	r = rv(pwrite(a, buf, 4096, (r + 4095) / 4096 * 4096));
	printf("append_after %lld a %lld\n", r, size_of(a));
	close(a);
	close(ab);
	close(b);
	close(c);
	close(d);
	close(e);
	return 0;
}
