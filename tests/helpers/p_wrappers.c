// SPDX-License-Identifier: MIT
/*
 * p_wrappers FILE: call every name the shim wraps, on one file written with
 * O_DIRECT appends (so that a reservation is in place), and print what each
 * call returned and every size the program can see.  Run outside the shim
 * and under it, the outputs must be identical; lines starting with '#'
 * (the kernel's own size, read by a raw syscall) are not for diffing.
 *
 * Each step is built so that a name the shim failed to wrap shows: a write
 * not counted leaves a size behind, a size call not corrected reports the
 * reservation, a read not clamped returns the reservation's zeros, and an
 * O_TRUNC open or creat not seen leaves the append tail where it was.
 *
 * The same source is built four ways (see interpose.bats): plainly, with
 * -D_FILE_OFFSET_BITS=64 (the plain names become the *64 ones), with
 * -O2 -D_FORTIFY_SOURCE=2 (open with non-constant flags becomes __open_2,
 * read into a buffer of known size __read_chk, pread __pread_chk) and with
 * both (__open64_2, __openat64_2, __pread64_chk).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The stat family of binaries built on glibc < 2.33. */
extern int __xstat(int, const char *, struct stat *);
extern int __xstat64(int, const char *, struct stat64 *);
extern int __lxstat(int, const char *, struct stat *);
extern int __lxstat64(int, const char *, struct stat64 *);
extern int __fxstat(int, int, struct stat *);
extern int __fxstat64(int, int, struct stat64 *);
extern int __fxstatat(int, int, const char *, struct stat *, int);
extern int __fxstatat64(int, int, const char *, struct stat64 *, int);
__asm__(".symver __xstat,__xstat@GLIBC_2.2.5");
__asm__(".symver __xstat64,__xstat64@GLIBC_2.2.5");
__asm__(".symver __lxstat,__lxstat@GLIBC_2.2.5");
__asm__(".symver __lxstat64,__lxstat64@GLIBC_2.2.5");
__asm__(".symver __fxstat,__fxstat@GLIBC_2.2.5");
__asm__(".symver __fxstat64,__fxstat64@GLIBC_2.2.5");
__asm__(".symver __fxstatat,__fxstatat@GLIBC_2.4");
__asm__(".symver __fxstatat64,__fxstatat64@GLIBC_2.4");

#define SENTINEL 4242
#define K 4096

static const char *F;
static int a = -1, b = -1; /* a: O_APPEND|O_DIRECT writer; b: O_RDWR|O_DIRECT */
/* Not constants, so that _FORTIFY_SOURCE calls __open_2 and __read_chk. */
static volatile int v_trunc = O_WRONLY | O_TRUNC;
static volatile size_t v_len;
static char wbuf[16 * K] __attribute__((aligned(K)));
static char rbuf[16 * K] __attribute__((aligned(K)));
static unsigned seq;

static const char *en(int e)
{
	const char *n;

	if (e == SENTINEL)
		return "-";
	n = strerrorname_np(e);
	return n ? n : "?";
}

/* Print "what ret errno": errno is the sentinel before every call. */
#define CALL(what, expr)                                                  \
	do {                                                              \
		long long r_;                                             \
		errno = SENTINEL;                                         \
		r_ = (long long)(expr);                                   \
		printf("%s ret=%lld errno=%s\n", what, r_, en(errno));    \
	} while (0)

/* A read: also the bytes read and the position after. */
#define READ(what, fd, expr)                                              \
	do {                                                              \
		long long r_;                                             \
		uint64_t h_ = 1469598103934665603ull;                     \
		memset(rbuf, 0xee, sizeof(rbuf));                         \
		errno = SENTINEL;                                         \
		r_ = (long long)(expr);                                   \
		for (long long i_ = 0; i_ < r_; i_++)                     \
			h_ = (h_ ^ (unsigned char)rbuf[i_]) *             \
			     1099511628211ull;                            \
		printf("%s ret=%lld errno=%s hash=%016llx pos=%lld\n",    \
		       what, r_, en(errno), (unsigned long long)h_,       \
		       (long long)lseek(fd, 0, SEEK_CUR));                \
	} while (0)

static void *data(size_t n)
{
	seq++;
	memset(wbuf, 'A' + (int)(seq % 26), n);
	snprintf(wbuf, 16, "rec%u", seq);
	return wbuf;
}

/* Every size the program can ask for, on one line. */
static void sizes(const char *label)
{
	struct stat st;
	struct stat64 st64;
	struct statx sx;
	char line[2048];
	size_t n = 0;

#define ADD(name, expr, val)                                                \
	do {                                                                \
		errno = SENTINEL;                                           \
		int r_ = (expr);                                            \
		n += (size_t)snprintf(line + n, sizeof(line) - n,           \
				      " %s=%lld%s", name,                   \
				      r_ ? -1LL : (long long)(val),         \
				      errno == SENTINEL ? "" : "!");        \
	} while (0)
	ADD("fstat", fstat(a, &st), st.st_size);
	ADD("fstat64", fstat64(a, &st64), st64.st_size);
	ADD("stat", stat(F, &st), st.st_size);
	ADD("stat64", stat64(F, &st64), st64.st_size);
	ADD("lstat", lstat(F, &st), st.st_size);
	ADD("lstat64", lstat64(F, &st64), st64.st_size);
	ADD("fstatat", fstatat(AT_FDCWD, F, &st, 0), st.st_size);
	ADD("fstatat-empty", fstatat(a, "", &st, AT_EMPTY_PATH), st.st_size);
	ADD("fstatat64", fstatat64(AT_FDCWD, F, &st64, 0), st64.st_size);
	ADD("fstatat64-empty", fstatat64(b, "", &st64, AT_EMPTY_PATH),
	    st64.st_size);
	ADD("statx", statx(AT_FDCWD, F, 0, STATX_BASIC_STATS, &sx),
	    sx.stx_size);
	ADD("statx-empty", statx(a, "", AT_EMPTY_PATH, STATX_SIZE, &sx),
	    sx.stx_size);
	memset(&sx, 0, sizeof(sx));
	ADD("statx-nosize", statx(b, "", AT_EMPTY_PATH, STATX_MODE, &sx),
	    (sx.stx_mask & STATX_SIZE) ? (long long)sx.stx_size : -2);
	ADD("__xstat", __xstat(1, F, &st), st.st_size);
	ADD("__xstat64", __xstat64(1, F, &st64), st64.st_size);
	ADD("__lxstat", __lxstat(1, F, &st), st.st_size);
	ADD("__lxstat64", __lxstat64(1, F, &st64), st64.st_size);
	ADD("__fxstat", __fxstat(1, a, &st), st.st_size);
	ADD("__fxstat64", __fxstat64(1, b, &st64), st64.st_size);
	ADD("__fxstatat", __fxstatat(1, AT_FDCWD, F, &st, 0), st.st_size);
	ADD("__fxstatat-empty", __fxstatat(1, a, "", &st, AT_EMPTY_PATH),
	    st.st_size);
	ADD("__fxstatat64", __fxstatat64(1, AT_FDCWD, F, &st64, 0),
	    st64.st_size);
	ADD("lseek-end", (int)(lseek(a, 0, SEEK_END) < 0), lseek(a, 0, SEEK_CUR));
	ADD("lseek64-end", (int)(lseek64(a, 0, SEEK_END) < 0),
	    lseek64(a, 0, SEEK_CUR));
#undef ADD
	printf("sizes %s:%s\n", label, line);
	if (syscall(SYS_fstat, a, &st) == 0)
		printf("#ksize %lld\n", (long long)st.st_size);
}

static void append(const char *what)
{
	CALL(what, write(a, data(K), K));
}

int main(int argc, char **argv)
{
	struct iovec iov[2];
	int c, t;

	if (argc != 2) {
		fprintf(stderr, "usage: p_wrappers FILE\n");
		return 2;
	}
	F = argv[1];
	setvbuf(stdout, NULL, _IOLBF, 0);
	v_len = 8 * K;

	/* 1. Appends: the kernel's size runs ahead (a reservation). */
	errno = SENTINEL;
	a = open(F, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_APPEND, 0644);
	printf("open a ret=%d errno=%s\n", a, en(errno));
	for (int i = 0; i < 4; i++)
		append("write a");
	sizes("after 4 appends");

	/* 2. Positional writes and the position-using ones. */
	errno = SENTINEL;
	b = open64(F, O_RDWR | O_DIRECT);
	printf("open64 b ret=%d errno=%s\n", b, en(errno));
	CALL("pwrite b 16k", pwrite(b, data(K), K, 4 * K));
	sizes("pwrite");
	CALL("pwrite64 b 20k", pwrite64(b, data(K), K, 5 * K));
	sizes("pwrite64");
	iov[0] = (struct iovec){ data(2 * K), K };
	iov[1] = (struct iovec){ wbuf + K, K };
	CALL("pwritev b 24k", pwritev(b, iov, 2, 6 * K));
	sizes("pwritev");
	iov[0] = (struct iovec){ data(K), K };
	CALL("pwritev64 b 32k", pwritev64(b, iov, 1, 8 * K));
	sizes("pwritev64");
	CALL("lseek b END", lseek(b, 0, SEEK_END));
	iov[0] = (struct iovec){ data(K), K };
	CALL("pwritev2 b -1", pwritev2(b, iov, 1, -1, 0));
	CALL("pos b", lseek(b, 0, SEEK_CUR));
	sizes("pwritev2");
	CALL("lseek64 b END", lseek64(b, 0, SEEK_END));
	iov[0] = (struct iovec){ data(K), K };
	CALL("pwritev64v2 b -1", pwritev64v2(b, iov, 1, -1, 0));
	CALL("pos b", lseek64(b, 0, SEEK_CUR));
	sizes("pwritev64v2");
	iov[0] = (struct iovec){ data(2 * K), K };
	iov[1] = (struct iovec){ wbuf + K, K };
	CALL("writev a", writev(a, iov, 2));
	CALL("pos a", lseek(a, 0, SEEK_CUR));
	sizes("writev");
	CALL("write b", write(b, data(K), K));
	CALL("pos b", lseek(b, 0, SEEK_CUR));
	sizes("write b");

	/* 3. Reads: at and across the logical end (52k). */
	READ("pread b 48k", b, pread(b, rbuf, v_len, 12 * K));
	READ("pread b 52k", b, pread(b, rbuf, K, 13 * K));
	READ("pread64 b 48k", b, pread64(b, rbuf, v_len, 12 * K));
	READ("pread64 b 52k", b, pread64(b, rbuf, K, 13 * K));
	iov[0] = (struct iovec){ rbuf, K };
	iov[1] = (struct iovec){ rbuf + K, 3 * K };
	READ("preadv b 48k", b, preadv(b, iov, 2, 12 * K));
	READ("preadv b 52k", b, preadv(b, iov, 2, 13 * K));
	READ("preadv64 b 48k", b, preadv64(b, iov, 2, 12 * K));
	READ("preadv64 b 56k", b, preadv64(b, iov, 2, 14 * K));
	CALL("lseek b 44k", lseek(b, 11 * K, SEEK_SET));
	READ("preadv2 b -1", b, preadv2(b, iov, 2, -1, 0));
	READ("preadv2 b -1 again", b, preadv2(b, iov, 2, -1, 0));
	READ("preadv2 b 48k", b, preadv2(b, iov, 2, 12 * K, 0));
	CALL("lseek64 b 44k", lseek64(b, 11 * K, SEEK_SET));
	READ("preadv64v2 b -1", b, preadv64v2(b, iov, 2, -1, 0));
	READ("preadv64v2 b -1 again", b, preadv64v2(b, iov, 2, -1, 0));
	READ("preadv64v2 b 52k", b, preadv64v2(b, iov, 2, 13 * K, 0));
	CALL("lseek b 48k", lseek(b, 12 * K, SEEK_SET));
	READ("read b", b, read(b, rbuf, v_len));
	READ("read b at end", b, read(b, rbuf, v_len));
	CALL("lseek b 48k", lseek(b, 12 * K, SEEK_SET));
	READ("readv b", b, readv(b, iov, 2));
	READ("readv b at end", b, readv(b, iov, 2));

	/* 4. Readers without O_DIRECT, through openat and openat64. */
	errno = SENTINEL;
	c = openat(AT_FDCWD, F, O_RDONLY);
	printf("openat c ret=%d errno=%s\n", c, en(errno));
	CALL("lseek c END", lseek(c, 0, SEEK_END));
	CALL("lseek c 0", lseek(c, 0, SEEK_SET));
	READ("read c", c, read(c, rbuf, sizeof(rbuf)));
	READ("read c", c, read(c, rbuf, sizeof(rbuf)));
	READ("read c", c, read(c, rbuf, sizeof(rbuf)));
	READ("read c", c, read(c, rbuf, sizeof(rbuf)));
	CALL("close c", close(c));
	errno = SENTINEL;
	c = openat64(AT_FDCWD, F, O_RDONLY);
	printf("openat64 c ret=%d errno=%s\n", c, en(errno));
	READ("pread c 40k", c, pread(c, rbuf, sizeof(rbuf), 10 * K));
	CALL("close c", close(c));

	/* 5. Size changes, each followed by an append (a new reservation). */
	CALL("ftruncate b 60k", ftruncate(b, 15 * K));
	sizes("ftruncate");
	append("write a");
	sizes("append");
	CALL("ftruncate64 b 40k", ftruncate64(b, 10 * K));
	sizes("ftruncate64");
	append("write a");
	sizes("append");
	CALL("truncate 48k", truncate(F, 12 * K));
	sizes("truncate");
	append("write a");
	sizes("append");
	CALL("truncate64 32k", truncate64(F, 8 * K));
	sizes("truncate64");
	append("write a");
	sizes("append");
	CALL("fallocate b 36k+8k", fallocate(b, 0, 9 * K, 2 * K));
	sizes("fallocate");
	append("write a");
	CALL("fallocate64 b 52k+4k", fallocate64(b, 0, 13 * K, K));
	sizes("fallocate64");
	append("write a");
	CALL("posix_fallocate b 60k+4k", posix_fallocate(b, 15 * K, K));
	sizes("posix_fallocate");
	append("write a");
	CALL("posix_fallocate64 b 68k+4k", posix_fallocate64(b, 17 * K, K));
	sizes("posix_fallocate64");
	append("write a");
	sizes("append");

	/* 6. O_TRUNC opens and creat of the file while a is appending. */
	errno = SENTINEL;
	t = open(F, v_trunc);
	printf("open O_TRUNC ret=%d errno=%s\n", t, en(errno));
	close(t);
	sizes("open O_TRUNC");
	append("write a");
	sizes("append");
	errno = SENTINEL;
	t = open64(F, v_trunc);
	printf("open64 O_TRUNC ret=%d errno=%s\n", t, en(errno));
	close(t);
	sizes("open64 O_TRUNC");
	append("write a");
	append("write a");
	sizes("append");
	errno = SENTINEL;
	t = openat(AT_FDCWD, F, v_trunc);
	printf("openat O_TRUNC ret=%d errno=%s\n", t, en(errno));
	close(t);
	sizes("openat O_TRUNC");
	append("write a");
	sizes("append");
	errno = SENTINEL;
	t = openat64(AT_FDCWD, F, v_trunc);
	printf("openat64 O_TRUNC ret=%d errno=%s\n", t, en(errno));
	close(t);
	sizes("openat64 O_TRUNC");
	append("write a");
	append("write a");
	sizes("append");
	errno = SENTINEL;
	t = creat(F, 0644);
	printf("creat ret=%d errno=%s\n", t, en(errno));
	close(t);
	sizes("creat");
	append("write a");
	sizes("append");
	errno = SENTINEL;
	t = creat64(F, 0644);
	printf("creat64 ret=%d errno=%s\n", t, en(errno));
	close(t);
	sizes("creat64");
	append("write a");
	append("write a");
	append("write a");
	sizes("append");

	/* 7. Sync calls, then the end. */
	CALL("fsync a", fsync(a));
	CALL("fdatasync b", fdatasync(b));
	CALL("sync_file_range a", sync_file_range(a, 0, 0,
						  SYNC_FILE_RANGE_WRITE));
	CALL("close b", close(b));
	sizes("closed b");
	CALL("close a", close(a));
	{
		struct stat st;

		CALL("stat", stat(F, &st));
		printf("final size=%lld\n", (long long)st.st_size);
	}
	return 0;
}
