// SPDX-License-Identifier: MIT
/*
 * t_fops: one descriptor, a script of calls on it, one line per call with
 * what the call returned.  Run the same script under the shim and outside
 * it (or with DIOSHIM_DISABLE=1) and compare the outputs.
 *
 *   t_fops [-d] [-r] [-a] [-t] [-c] [-n] FILE OP...
 *     -d O_DIRECT  -r O_RDONLY (else O_RDWR)  -a O_APPEND  -t O_TRUNC
 *     -c O_CREAT   -n open nothing (path calls only)
 *
 *   w OFF LEN [xHH]    pwrite LEN bytes of HH (hex; default a pattern
 *                      of the offset) at OFF
 *   a LEN [xHH]        write (at the position, or appending)
 *   wv OFF LEN HOW     pwritev of LEN bytes at OFF, the iovec array in a
 *                      page of its own, then HOW: keep, unmap or protect
 *                      it (PROT_NONE): the next wv finds it gone
 *   r OFF LEN          pread: the count, the zero bytes among them and a
 *                      checksum
 *   rd LEN             read at the position, same output
 *   size               fstat st_size
 *   kernel             the kernel's size by a raw statx syscall (the shim
 *                      does not see it): for diagnostics, not comparisons
 *   end | cur          lseek(0, SEEK_END) | lseek(0, SEEK_CUR)
 *   set OFF            lseek(OFF, SEEK_SET)
 *   data OFF | hole OFF  lseek SEEK_DATA | SEEK_HOLE
 *   trunc LEN          ftruncate
 *   ptrunc LEN         truncate(FILE)
 *   fa MODE OFF LEN    fallocate, MODE: 0 or keep,punch,zero,collapse,
 *                      insert,unshare or a number, joined by ','
 *   pfa OFF LEN        posix_fallocate (prints the error it returns)
 *   stat | statx       stat(FILE) / statx(FILE) st_size
 *   fsync | close | reopen
 *   touch PATH | wait PATH   signal / wait for another process
 */
#include "t_rec.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>

static const char *file;
static int fd = -1, oflags;
static char *buf;
static size_t bufcap;

static void *need(size_t n)
{
	if (n > bufcap) {
		free(buf);
		bufcap = (n + 4095) / 4096 * 4096;
		if (posix_memalign((void **)&buf, 4096, bufcap))
			abort();
	}
	return buf;
}

static long long num(const char *s)
{
	char *end;
	long long v = strtoll(s, &end, 0);

	switch (*end) {
	case 'k': case 'K': v <<= 10; break;
	case 'm': case 'M': v <<= 20; break;
	case 'g': case 'G': v <<= 30; break;
	}
	return v;
}

static void result(const char *what, long long r, int err)
{
	if (r < 0)
		printf("%s = -1 %s\n", what, strerrorname_np(err));
	else
		printf("%s = %lld\n", what, r);
}

static void show_read(const char *what, ssize_t r, int err)
{
	uint64_t h = 0x12345, zeros = 0;
	ssize_t i;

	if (r < 0) {
		result(what, r, err);
		return;
	}
	for (i = 0; i < r; i++) {
		zeros += !buf[i];
		h = rec_mix(h ^ (unsigned char)buf[i]) + (uint64_t)i;
	}
	printf("%s = %zd zeros=%llu sum=%016llx\n", what, r,
	       (unsigned long long)zeros, (unsigned long long)h);
}

static int fa_mode(const char *s)
{
	int mode = 0;
	char word[32];

	while (*s) {
		size_t n = strcspn(s, ",");

		if (n >= sizeof(word))
			exit(2);
		memcpy(word, s, n);
		word[n] = '\0';
		if (!strcmp(word, "keep"))
			mode |= FALLOC_FL_KEEP_SIZE;
		else if (!strcmp(word, "punch"))
			mode |= FALLOC_FL_PUNCH_HOLE;
		else if (!strcmp(word, "zero"))
			mode |= FALLOC_FL_ZERO_RANGE;
		else if (!strcmp(word, "collapse"))
			mode |= FALLOC_FL_COLLAPSE_RANGE;
		else if (!strcmp(word, "insert"))
			mode |= FALLOC_FL_INSERT_RANGE;
		else if (!strcmp(word, "unshare"))
			mode |= FALLOC_FL_UNSHARE_RANGE;
		else if (strcmp(word, "0")) {
			char *e;
			long v = strtol(word, &e, 0); /* a raw mode */

			if (*e || !v)
				exit(2);
			mode |= (int)v;
		}
		s += n;
		if (*s == ',')
			s++;
	}
	return mode;
}

static void do_open(void)
{
	fd = open(file, oflags, 0644);
	if (fd < 0) {
		perror(file);
		exit(1);
	}
}

#define ARG(k) (i + (k) < argc ? argv[i + (k)] : (exit(2), ""))

int main(int argc, char **argv)
{
	int c, i, n;
	bool open_it = true;
	char what[256];

	oflags = O_RDWR;
	while ((c = getopt(argc, argv, "+dratcn")) != -1) {
		switch (c) {
		case 'd': oflags |= O_DIRECT; break;
		case 'r': oflags = (oflags & ~O_ACCMODE) | O_RDONLY; break;
		case 'a': oflags |= O_APPEND; break;
		case 't': oflags |= O_TRUNC; break;
		case 'c': oflags |= O_CREAT; break;
		case 'n': open_it = false; break;
		default: return 2;
		}
	}
	if (optind >= argc)
		return 2;
	file = argv[optind];
	if (open_it)
		do_open();
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = optind + 1; i < argc; i += n) {
		const char *op = argv[i];
		long long r;
		int err;

		n = 1;
		errno = 0;
		if (!strcmp(op, "w") || !strcmp(op, "a")) {
			bool at = op[0] == 'w';
			long long off = at ? num(ARG(1)) : 0;
			size_t len = (size_t)num(ARG(at ? 2 : 1));
			const char *byte = i + (at ? 3 : 2) < argc ?
				argv[i + (at ? 3 : 2)] : NULL;
			size_t k;

			n = at ? 3 : 2;
			need(len);
			if (byte && byte[0] == 'x' && strlen(byte) >= 2 &&
			    strlen(byte) <= 3 &&
			    strspn(byte + 1, "0123456789abcdefABCDEF") ==
				    strlen(byte) - 1) {
				memset(buf, (int)strtol(byte + 1, NULL, 16), len);
				n++;
			} else {
				for (k = 0; k < len; k++)
					buf[k] = (char)(((off + (long long)k) >> 9) * 7 + 1);
			}
			r = at ? pwrite(fd, buf, len, (off_t)off)
			       : write(fd, buf, len);
			err = errno;
			if (at)
				snprintf(what, sizeof(what), "w %lld %zu", off, len);
			else
				snprintf(what, sizeof(what), "a %zu", len);
			result(what, r, err);
		} else if (!strcmp(op, "wv")) {
			/* pwritev of LEN bytes at OFF, its iovec array alone
			 * in a page of its own; then, per HOW: kept, munmap'd,
			 * or made PROT_NONE (a later wv finds it gone). */
			static struct iovec *arr;
			long long off = num(ARG(1));
			size_t len = (size_t)num(ARG(2));
			const char *how = ARG(3);

			n = 4;
			if (!arr) {
				arr = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
				if (arr == MAP_FAILED)
					abort();
				need(len);
				memset(buf, 'v', len);
				arr[0] = (struct iovec){ buf, len };
			}
			r = pwritev(fd, arr, 1, (off_t)off);
			err = errno;
			snprintf(what, sizeof(what), "wv %lld %zu %s", off, len,
				 how);
			result(what, r, err);
			if (!strcmp(how, "unmap"))
				munmap(arr, 4096);
			else if (!strcmp(how, "protect"))
				mprotect(arr, 4096, PROT_NONE);
		} else if (!strcmp(op, "r") || !strcmp(op, "rd")) {
			bool at = op[1] == '\0';
			long long off = at ? num(ARG(1)) : 0;
			size_t len = (size_t)num(ARG(at ? 2 : 1));
			ssize_t rr;

			n = at ? 3 : 2;
			need(len);
			memset(buf, 0x5a, len);
			rr = at ? pread(fd, buf, len, (off_t)off)
				: read(fd, buf, len);
			err = errno;
			if (at)
				snprintf(what, sizeof(what), "r %lld %zu", off, len);
			else
				snprintf(what, sizeof(what), "rd %zu", len);
			show_read(what, rr, err);
		} else if (!strcmp(op, "size")) {
			struct stat st;

			r = fstat(fd, &st);
			err = errno;
			result("size", r ? -1 : (long long)st.st_size, err);
		} else if (!strcmp(op, "kernel")) {
			struct statx stx;

			r = syscall(SYS_statx, fd, "", AT_EMPTY_PATH,
				    STATX_SIZE, &stx);
			err = errno;
			result("kernel", r ? -1 : (long long)stx.stx_size, err);
		} else if (!strcmp(op, "end") || !strcmp(op, "cur")) {
			r = lseek(fd, 0, op[0] == 'e' ? SEEK_END : SEEK_CUR);
			result(op, r, errno);
		} else if (!strcmp(op, "set") || !strcmp(op, "data") ||
			   !strcmp(op, "hole")) {
			long long off = num(ARG(1));
			int wh = op[0] == 's' ? SEEK_SET :
				 op[0] == 'd' ? SEEK_DATA : SEEK_HOLE;

			n = 2;
			r = lseek(fd, (off_t)off, wh);
			snprintf(what, sizeof(what), "%s %lld", op, off);
			result(what, r, errno);
		} else if (!strcmp(op, "trunc") || !strcmp(op, "ptrunc")) {
			long long len = num(ARG(1));

			n = 2;
			r = op[0] == 't' ? ftruncate(fd, (off_t)len)
					 : truncate(file, (off_t)len);
			snprintf(what, sizeof(what), "%s %lld", op, len);
			result(what, r, errno);
		} else if (!strcmp(op, "fa")) {
			int mode = fa_mode(ARG(1));
			long long off = num(ARG(2)), len = num(ARG(3));

			n = 4;
			r = fallocate(fd, mode, (off_t)off, (off_t)len);
			snprintf(what, sizeof(what), "fa %s %lld %lld", argv[i + 1],
				 off, len);
			result(what, r, errno);
		} else if (!strcmp(op, "pfa")) {
			long long off = num(ARG(1)), len = num(ARG(2));

			n = 3;
			err = posix_fallocate(fd, (off_t)off, (off_t)len);
			snprintf(what, sizeof(what), "pfa %lld %lld", off, len);
			result(what, err ? -1 : 0, err);
		} else if (!strcmp(op, "stat")) {
			struct stat st;

			r = stat(file, &st);
			result("stat", r ? -1 : (long long)st.st_size, errno);
		} else if (!strcmp(op, "statx")) {
			struct statx stx;

			r = statx(AT_FDCWD, file, 0, STATX_SIZE, &stx);
			result("statx", r ? -1 : (long long)stx.stx_size, errno);
		} else if (!strcmp(op, "fsync")) {
			result("fsync", fsync(fd), errno);
		} else if (!strcmp(op, "close")) {
			result("close", close(fd), errno);
			fd = -1;
		} else if (!strcmp(op, "reopen")) {
			oflags &= ~(O_TRUNC | O_CREAT);
			do_open();
			printf("reopen\n");
		} else if (!strcmp(op, "touch")) {
			n = 2;
			touch(ARG(1));
		} else if (!strcmp(op, "wait")) {
			n = 2;
			if (wait_for(ARG(1)))
				return 3;
		} else {
			fprintf(stderr, "t_fops: unknown op %s\n", op);
			return 2;
		}
	}
	return 0;
}
