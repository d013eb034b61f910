// SPDX-License-Identifier: MIT
/*
 * p_do: run a script of file calls, one per line on stdin, and print each
 * call's return value, errno and results, so that a run outside the shim
 * and one under it can be diffed line by line.
 *
 *   p_do [ARG1 [ARG2...]] < SCRIPT
 *
 * In the script, "%1", "%2"... at the start of a word stand for ARG1,
 * ARG2... (the file names differ between the two runs; the printed line
 * keeps the "%N" so that outputs compare).  "@name" names a descriptor a
 * command stored ("open a ..." stores @a).  errno is set to a sentinel
 * before every call: "errno=-" means the call left it alone.  Output lines
 * starting with '#' tell what the kernel alone holds (raw syscalls: the
 * size under a reservation, whether a segment exists) and are not for
 * diffing.  Numbers take k/m suffixes (4k = 4096).  A PATH given to the
 * *stat* commands may be '' (the empty string) or NULL.  posix_fallocate
 * prints its return value as an error name.
 *
 * Commands (FD is @name or a number; B is a buffer: a aligned (default),
 * m misaligned, n NULL, f a bad address, r a read-only page; IOV is
 * "4k,4k" (consecutive parts of the buffer), "m:4k" (first base
 * misaligned), "-" (count 0), "null:N" (NULL iov, count N), "cnt:N"
 * (count N, every part empty but the first)):
 *
 *   open V PATH FLAGS [MODE]      openat V DIRFD PATH FLAGS [MODE]
 *   creat V PATH MODE             close FD      closefrom LO
 *   close_range LO HI FLAGS       dup V FD      dup2 FD NEW   dup3 FD NEW FL
 *   dupfd V FD MIN                dupfd_cloexec V FD MIN
 *   getfl FD   setfl FD FLAGS     getfd FD      umask MODE
 *   write FD LEN [B]              pwrite FD LEN OFF [B]
 *   writev FD IOV                 pwritev FD IOV OFF   pwritev2 FD IOV OFF RWF
 *   read FD LEN [B]               pread FD LEN OFF [B]
 *   readv FD IOV                  preadv FD IOV OFF    preadv2 FD IOV OFF RWF
 *   readall FD                    (read to the end, 64k at a time)
 *   lseek FD OFF WHENCE           pos FD
 *   fstat FD   stat PATH   lstat PATH   fstatat DIRFD PATH ATFLAGS
 *   statx DIRFD PATH ATFLAGS MASK
 *   xstat VER PATH   lxstat VER PATH   fxstat VER FD
 *   fxstatat VER DIRFD PATH ATFLAGS    (the GLIBC_2.2.5/2.4 versions)
 *   ftruncate FD LEN   truncate PATH LEN
 *   fallocate FD MODE OFF LEN     posix_fallocate FD OFF LEN
 *   fsync FD   fdatasync FD   sync_file_range FD OFF LEN FLAGS
 *   fdopen_fclose FD MODE         unlink PATH   mkfifo PATH
 *   fdopen_freopen FD PATH MODE   (the stream, and so FD, reopened on PATH)
 *   linkat FD PATH                (an O_TMPFILE fd given a name)
 *   rawclose FD (behind the shim's back)   fopen V PATH MODE (stdio)
 *   ksize FD   kstat PATH   seg PATH   (the '#' lines)
 *   rep N COMMAND...              (COMMAND N times)
 *   lock FD                       (F_SETLK on the whole file: a write lock,
 *                                 a read lock through a read-only FD)
 *   lockseen FD                   (whether another process sees that lock:
 *                                 a child asks F_GETLK; held=1 or held=0)
 *   fresh NAME                    (close every stored fd; ARG1/NAME made
 *                                 anew by 4 O_DIRECT appends of 4k through
 *                                 @a (O_APPEND); @w, @r, @rw opened on it
 *                                 O_DIRECT write-only, read-only, both)
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef RWF_NOAPPEND
#define RWF_NOAPPEND 0x00000020
#endif
#ifndef RWF_ATOMIC
#define RWF_ATOMIC 0x00000040
#endif

/* The stat family as binaries built on glibc < 2.33 call it. */
extern int __xstat(int, const char *, struct stat *);
extern int __lxstat(int, const char *, struct stat *);
extern int __fxstat(int, int, struct stat *);
extern int __fxstatat(int, int, const char *, struct stat *, int);
__asm__(".symver __xstat,__xstat@GLIBC_2.2.5");
__asm__(".symver __lxstat,__lxstat@GLIBC_2.2.5");
__asm__(".symver __fxstat,__fxstat@GLIBC_2.2.5");
__asm__(".symver __fxstatat,__fxstatat@GLIBC_2.4");

#define SENTINEL 4242
#define BUFSZ (8u << 20)
#define MAXTOK 16

static int g_argc;
static char **g_argv;
static unsigned char *buf; /* BUFSZ, page aligned */
static unsigned char *robuf; /* one read-only page */
static unsigned wseq;
static struct iovec iovs[2048];

static struct {
	char name[16];
	int fd;
} vars[64];
static int nvars;

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "p_do: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

static const char *ename(int e)
{
	const char *n;

	if (e == SENTINEL)
		return "-";
	if (e == 0)
		return "0";
	n = strerrorname_np(e);
	return n ? n : "?";
}

static void setvar(const char *name, int fd)
{
	int i;

	for (i = 0; i < nvars; i++)
		if (!strcmp(vars[i].name, name))
			break;
	if (i == nvars) {
		if (nvars == 64 || strlen(name) >= sizeof(vars[0].name))
			die("too many variables");
		nvars++;
	}
	snprintf(vars[i].name, sizeof(vars[i].name), "%s", name);
	vars[i].fd = fd;
}

static long long num(const char *s)
{
	char *end;
	long long v;
	int saved = errno; /* arguments are read after errno is set */

	if (!strcmp(s, "AT_FDCWD"))
		return AT_FDCWD;
	if (s[0] == '@') {
		for (int i = 0; i < nvars; i++)
			if (!strcmp(vars[i].name, s + 1))
				return vars[i].fd;
		die("no variable %s", s);
	}
	errno = 0;
	v = strtoll(s, &end, 0);
	if (end == s)
		die("not a number: %s", s);
	if (*end == 'k' || *end == 'K')
		v *= 1024, end++;
	else if (*end == 'm' || *end == 'M')
		v *= 1024 * 1024, end++;
	else if (*end == 'g' || *end == 'G')
		v *= 1024LL * 1024 * 1024, end++;
	if (*end)
		die("not a number: %s", s);
	errno = saved;
	return v;
}

struct name {
	const char *n;
	long long v;
};

static const struct name oflags[] = {
	{ "RDONLY", O_RDONLY }, { "WRONLY", O_WRONLY }, { "RDWR", O_RDWR },
	{ "CREAT", O_CREAT }, { "EXCL", O_EXCL }, { "TRUNC", O_TRUNC },
	{ "APPEND", O_APPEND }, { "DIRECT", O_DIRECT },
	{ "CLOEXEC", O_CLOEXEC }, { "TMPFILE", O_TMPFILE },
	{ "DIRECTORY", O_DIRECTORY }, { "PATH", O_PATH },
	{ "NONBLOCK", O_NONBLOCK }, { "DSYNC", O_DSYNC }, { "SYNC", O_SYNC },
	{ "NOATIME", O_NOATIME }, { "LARGEFILE", O_LARGEFILE },
	{ "NOCTTY", O_NOCTTY }, { "NOFOLLOW", O_NOFOLLOW }, { NULL, 0 }
};
static const struct name rwflags[] = {
	{ "HIPRI", RWF_HIPRI }, { "DSYNC", RWF_DSYNC }, { "SYNC", RWF_SYNC },
	{ "NOWAIT", RWF_NOWAIT }, { "APPEND", RWF_APPEND },
	{ "NOAPPEND", RWF_NOAPPEND }, { "ATOMIC", RWF_ATOMIC }, { NULL, 0 }
};
static const struct name whences[] = {
	{ "SET", SEEK_SET }, { "CUR", SEEK_CUR }, { "END", SEEK_END },
	{ "DATA", SEEK_DATA }, { "HOLE", SEEK_HOLE }, { NULL, 0 }
};
static const struct name fmodes[] = {
	{ "KEEP_SIZE", FALLOC_FL_KEEP_SIZE },
	{ "PUNCH_HOLE", FALLOC_FL_PUNCH_HOLE },
	{ "ZERO_RANGE", FALLOC_FL_ZERO_RANGE },
	{ "COLLAPSE_RANGE", FALLOC_FL_COLLAPSE_RANGE },
	{ "INSERT_RANGE", FALLOC_FL_INSERT_RANGE },
	{ "UNSHARE_RANGE", FALLOC_FL_UNSHARE_RANGE }, { NULL, 0 }
};
static const struct name atflags[] = {
	{ "AT_EMPTY_PATH", AT_EMPTY_PATH },
	{ "AT_SYMLINK_NOFOLLOW", AT_SYMLINK_NOFOLLOW },
	{ "AT_STATX_SYNC_AS_STAT", AT_STATX_SYNC_AS_STAT },
	{ "AT_STATX_FORCE_SYNC", AT_STATX_FORCE_SYNC },
	{ "AT_STATX_DONT_SYNC", AT_STATX_DONT_SYNC }, { NULL, 0 }
};
static const struct name smask[] = {
	{ "TYPE", STATX_TYPE }, { "MODE", STATX_MODE }, { "NLINK", STATX_NLINK },
	{ "SIZE", STATX_SIZE }, { "BLOCKS", STATX_BLOCKS },
	{ "INO", STATX_INO }, { "BASIC", STATX_BASIC_STATS },
	{ "BTIME", STATX_BTIME }, { NULL, 0 }
};
static const struct name misc[] = {
	{ "CLOSE_RANGE_CLOEXEC", CLOSE_RANGE_CLOEXEC },
	{ "CLOSE_RANGE_UNSHARE", CLOSE_RANGE_UNSHARE },
	{ "SFR_WAIT_BEFORE", SYNC_FILE_RANGE_WAIT_BEFORE },
	{ "SFR_WRITE", SYNC_FILE_RANGE_WRITE },
	{ "SFR_WAIT_AFTER", SYNC_FILE_RANGE_WAIT_AFTER }, { NULL, 0 }
};

/* "A|B|0x10" against a table. */
static long long flags(const char *s, const struct name *t)
{
	long long v = 0;
	char tmp[256], *save = NULL, *w;

	snprintf(tmp, sizeof(tmp), "%s", s);
	for (w = strtok_r(tmp, "|", &save); w; w = strtok_r(NULL, "|", &save)) {
		const struct name *n;
		const char *x = w;

		if (!strncmp(x, "O_", 2) || !strncmp(x, "RWF_", 4) ||
		    !strncmp(x, "SEEK_", 5) || !strncmp(x, "FALLOC_FL_", 10) ||
		    !strncmp(x, "STATX_", 6))
			x = strchr(x, '_') + 1;
		for (n = t; n->n; n++)
			if (!strcmp(n->n, x))
				break;
		if (n->n)
			v |= n->v;
		else
			v |= num(w);
	}
	return v;
}

/* F_GETFL flags, named. */
static void print_oflags(int fl)
{
	static const struct name shown[] = {
		{ "APPEND", O_APPEND }, { "DIRECT", O_DIRECT },
		{ "NONBLOCK", O_NONBLOCK }, { "DSYNC", O_DSYNC },
		{ "SYNC", O_SYNC & ~O_DSYNC }, { "NOATIME", O_NOATIME },
		{ "LARGEFILE", O_LARGEFILE }, { "CLOEXEC", O_CLOEXEC },
		{ "PATH", O_PATH }, { NULL, 0 }
	};
	const char *acc[] = { "RDONLY", "WRONLY", "RDWR", "ACC3" };
	int rest = fl & ~O_ACCMODE;

	printf(" flags=%s", acc[fl & O_ACCMODE]);
	for (const struct name *n = shown; n->n; n++)
		if (rest & n->v) {
			printf("|%s", n->n);
			rest &= ~n->v;
		}
	if (rest)
		printf("|0x%x", rest);
}

static void *bufarg(const char *s)
{
	if (!s || !strcmp(s, "a"))
		return buf;
	if (!strcmp(s, "m"))
		return buf + 1;
	if (!strcmp(s, "n"))
		return NULL;
	if (!strcmp(s, "f"))
		return (void *)16;
	if (!strcmp(s, "r"))
		return robuf;
	die("bad buffer %s", s);
	return NULL;
}

/* Fill what a write will write: every 512-byte sector starts with the
 * write's number and the sector's index, the rest is one letter. */
static void fill(unsigned char *p, size_t len)
{
	size_t i;

	wseq++;
	if (!p || p == (unsigned char *)16 || p == robuf)
		return;
	if (len > BUFSZ - 1)
		len = BUFSZ - 1;
	memset(p, 'a' + (int)(wseq % 26), len);
	for (i = 0; i + 16 <= len; i += 512)
		snprintf((char *)p + i, 16, "W%05u:%06zu", wseq, i / 512);
}

static void prepare_read(void)
{
	memset(buf, 0xee, BUFSZ);
}

static uint64_t hash(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* "4k,4k" | "m:4k" | "-" | "null:N" | "cnt:N" */
static struct iovec *iovarg(const char *s, int *cnt, size_t *total)
{
	char tmp[256], *save = NULL, *w;
	unsigned char *p = buf;
	int n = 0;

	*total = 0;
	memset(iovs, 0, sizeof(iovs));
	if (!strcmp(s, "-")) {
		*cnt = 0;
		return iovs;
	}
	if (!strncmp(s, "null:", 5)) {
		*cnt = (int)num(s + 5);
		return NULL;
	}
	if (!strncmp(s, "cnt:", 4)) {
		*cnt = (int)num(s + 4);
		iovs[0].iov_base = buf;
		iovs[0].iov_len = 4096;
		for (int i = 1; i < 2048; i++)
			iovs[i].iov_base = buf;
		*total = 4096;
		return iovs;
	}
	if (!strncmp(s, "m:", 2)) {
		p++;
		s += 2;
	}
	snprintf(tmp, sizeof(tmp), "%s", s);
	for (w = strtok_r(tmp, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		size_t l = (size_t)num(w);

		iovs[n].iov_base = p;
		iovs[n].iov_len = l;
		p += l;
		*total += l;
		n++;
	}
	*cnt = n;
	return iovs;
}

/* A path word: '' is the empty string, NULL a null pointer. */
static const char *pathw(const char *w)
{
	if (!strcmp(w, "''"))
		return "";
	if (!strcmp(w, "NULL"))
		return NULL;
	return w;
}

static void need(int ntok, int want, const char *cmd)
{
	if (ntok < want)
		die("%s: needs %d words", cmd, want - 1);
}

static void kernel_size_fd(int fd)
{
	struct stat st;

	if (syscall(SYS_fstat, fd, &st) == 0)
		printf("#ksize %lld\n", (long long)st.st_size);
	else
		printf("#ksize error\n");
}

static void print_stat(int r, const struct stat *st)
{
	printf(" ret=%d errno=%s", r, ename(errno));
	if (r == 0)
		printf(" size=%lld mode=%o nlink=%lu", (long long)st->st_size,
		       (unsigned)st->st_mode, (unsigned long)st->st_nlink);
	printf("\n");
}

static void print_rw(ssize_t r, int is_read, const void *p)
{
	int e = errno;

	printf(" ret=%zd errno=%s", r, ename(e));
	if (is_read && r > 0 && p)
		printf(" hash=%016llx",
		       (unsigned long long)hash(p, (size_t)r));
	printf("\n");
}

static void run(char **t, int n);

static void run_line(char *line)
{
	char *t[MAXTOK], *save = NULL, *w, expanded[MAXTOK][512];
	int n = 0;

	for (w = strtok_r(line, " \t\n", &save); w && n < MAXTOK;
	     w = strtok_r(NULL, " \t\n", &save)) {
		if (w[0] == '%' && isdigit((unsigned char)w[1])) {
			int a = w[1] - '0';

			if (a >= g_argc)
				die("no argument %d", a);
			snprintf(expanded[n], sizeof(expanded[n]), "%s%s",
				 g_argv[a], w + 2);
			t[n] = expanded[n];
		} else {
			t[n] = w;
		}
		n++;
	}
	if (n == 0 || t[0][0] == '#')
		return;
	run(t, n);
}

static void run(char **t, int n)
{
	const char *c = t[0];
	struct stat st;
	ssize_t r;
	int ri;
	off_t ro;

	if (!strcmp(c, "fresh")) {
		/* A new file with a reservation in place, and the usual fds. */
		char path[4096], *o[6];

		need(n, 2, c);
		if (g_argc < 2)
			die("fresh: needs a directory as argument 1");
		printf("fresh %s\n", t[1]);
		for (int i = 0; i < nvars; i++)
			if (vars[i].fd > 2)
				close(vars[i].fd);
		nvars = 0;
		snprintf(path, sizeof(path), "%s/%s", g_argv[1], t[1]);
		o[0] = "open", o[2] = path, o[4] = "644";
		o[1] = "a", o[3] = "WRONLY|CREAT|TRUNC|DIRECT|APPEND";
		run(o, 5);
		o[0] = "write", o[1] = "@a", o[2] = "4k";
		for (int i = 0; i < 4; i++)
			run(o, 3);
		o[0] = "open", o[2] = path;
		o[1] = "w", o[3] = "WRONLY|DIRECT";
		run(o, 4);
		o[1] = "r", o[3] = "RDONLY|DIRECT";
		run(o, 4);
		o[1] = "rw", o[3] = "RDWR|DIRECT";
		run(o, 4);
		o[0] = "ksize", o[1] = "@a";
		run(o, 2);
		return;
	}
	if (!strcmp(c, "rep")) {
		need(n, 3, c);
		for (long long i = num(t[1]); i > 0; i--)
			run(t + 2, n - 2);
		return;
	}
	for (int i = 0; i < n; i++) {
		const char *x = t[i];

		for (int a = 1; a < g_argc; a++) {
			size_t l = strlen(g_argv[a]);

			if (!strncmp(x, g_argv[a], l)) {
				printf("%s%%%d%s", i ? " " : "", a, x + l);
				x = NULL;
				break;
			}
		}
		if (x)
			printf("%s%s", i ? " " : "", x);
	}
	/* (the echo: each path given as an argument shown as %N again) */
	printf(":");
	fflush(stdout);
	errno = SENTINEL;

	if (!strcmp(c, "open") || !strcmp(c, "openat")) {
		int at = !strcmp(c, "openat");
		int fl, dirfd = AT_FDCWD;
		mode_t mode = 0;

		need(n, 4 + at, c);
		if (at)
			dirfd = (int)num(t[2]);
		fl = (int)flags(t[3 + at], oflags);
		if (n > 4 + at)
			mode = (mode_t)strtoul(t[4 + at], NULL, 8);
		errno = SENTINEL;
		if (at)
			ri = n > 5 ? openat(dirfd, t[3], fl, mode)
				   : openat(dirfd, t[3], fl);
		else
			ri = n > 4 ? open(t[2], fl, mode) : open(t[2], fl);
		printf(" ret=%d errno=%s\n", ri, ename(errno));
		setvar(t[1], ri);
	} else if (!strcmp(c, "creat")) {
		need(n, 4, c);
		ri = creat(t[2], (mode_t)strtoul(t[3], NULL, 8));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
		setvar(t[1], ri);
	} else if (!strcmp(c, "close")) {
		need(n, 2, c);
		ri = close((int)num(t[1]));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "closefrom")) {
		need(n, 2, c);
		closefrom((int)num(t[1]));
		printf(" errno=%s\n", ename(errno));
	} else if (!strcmp(c, "close_range")) {
		need(n, 4, c);
		ri = close_range((unsigned)num(t[1]), (unsigned)num(t[2]),
				 (int)flags(t[3], misc));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "dup")) {
		need(n, 3, c);
		ri = dup((int)num(t[2]));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
		setvar(t[1], ri);
	} else if (!strcmp(c, "dup2")) {
		need(n, 3, c);
		ri = dup2((int)num(t[1]), (int)num(t[2]));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "dup3")) {
		need(n, 4, c);
		ri = dup3((int)num(t[1]), (int)num(t[2]),
			  (int)flags(t[3], oflags));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "dupfd") || !strcmp(c, "dupfd_cloexec")) {
		need(n, 4, c);
		ri = fcntl((int)num(t[2]),
			   c[5] ? F_DUPFD_CLOEXEC : F_DUPFD, (int)num(t[3]));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
		setvar(t[1], ri);
	} else if (!strcmp(c, "getfl")) {
		need(n, 2, c);
		ri = fcntl((int)num(t[1]), F_GETFL);
		printf(" ret=%s errno=%s", ri < 0 ? "-1" : "ok", ename(errno));
		if (ri >= 0)
			print_oflags(ri);
		printf("\n");
	} else if (!strcmp(c, "getfd")) {
		need(n, 2, c);
		ri = fcntl((int)num(t[1]), F_GETFD);
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "setfl")) {
		need(n, 3, c);
		ri = fcntl((int)num(t[1]), F_SETFL, (int)flags(t[2], oflags));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "umask")) {
		need(n, 2, c);
		umask((mode_t)strtoul(t[1], NULL, 8));
		printf(" errno=%s\n", ename(errno));
	} else if (!strcmp(c, "write") || !strcmp(c, "pwrite")) {
		int p = c[0] == 'p';
		size_t len;
		void *b;

		need(n, 3 + p, c);
		len = (size_t)num(t[2]);
		b = bufarg(n > 3 + p ? t[3 + p] : NULL);
		fill(b, len);
		errno = SENTINEL;
		r = p ? pwrite((int)num(t[1]), b, len, (off_t)num(t[3]))
		      : write((int)num(t[1]), b, len);
		print_rw(r, 0, NULL);
	} else if (!strcmp(c, "read") || !strcmp(c, "pread")) {
		int p = c[0] == 'p';
		size_t len;
		void *b;

		need(n, 3 + p, c);
		len = (size_t)num(t[2]);
		b = bufarg(n > 3 + p ? t[3 + p] : NULL);
		prepare_read();
		errno = SENTINEL;
		r = p ? pread((int)num(t[1]), b, len, (off_t)num(t[3]))
		      : read((int)num(t[1]), b, len);
		print_rw(r, 1, b);
	} else if (!strcmp(c, "writev") || !strcmp(c, "pwritev") ||
		   !strcmp(c, "pwritev2")) {
		int kind = c[0] == 'w' ? 0 : c[7] == '2' ? 2 : 1;
		struct iovec *iov;
		size_t total;
		int cnt, fd;

		need(n, 3 + kind, c);
		fd = (int)num(t[1]);
		iov = iovarg(t[2], &cnt, &total);
		fill(iov && cnt > 0 ? iov[0].iov_base : NULL,
		     total > 4096 || !iov ? total : 4096);
		errno = SENTINEL;
		if (kind == 0)
			r = writev(fd, iov, cnt);
		else if (kind == 1)
			r = pwritev(fd, iov, cnt, (off_t)num(t[3]));
		else
			r = pwritev2(fd, iov, cnt, (off_t)num(t[3]),
				     (int)flags(t[4], rwflags));
		print_rw(r, 0, NULL);
	} else if (!strcmp(c, "readv") || !strcmp(c, "preadv") ||
		   !strcmp(c, "preadv2")) {
		int kind = c[0] == 'r' ? 0 : c[6] == '2' ? 2 : 1;
		struct iovec *iov;
		size_t total;
		int cnt, fd;

		need(n, 3 + kind, c);
		fd = (int)num(t[1]);
		iov = iovarg(t[2], &cnt, &total);
		prepare_read();
		errno = SENTINEL;
		if (kind == 0)
			r = readv(fd, iov, cnt);
		else if (kind == 1)
			r = preadv(fd, iov, cnt, (off_t)num(t[3]));
		else
			r = preadv2(fd, iov, cnt, (off_t)num(t[3]),
				    (int)flags(t[4], rwflags));
		print_rw(r, 1, iov && cnt > 0 ? iov[0].iov_base : NULL);
	} else if (!strcmp(c, "readall")) {
		uint64_t h = 1469598103934665603ull, tot = 0;
		int fd;

		need(n, 2, c);
		fd = (int)num(t[1]);
		for (;;) {
			r = read(fd, buf, 65536);
			if (r <= 0)
				break;
			for (ssize_t i = 0; i < r; i++)
				h = (h ^ buf[i]) * 1099511628211ull;
			tot += (uint64_t)r;
		}
		printf(" ret=%zd errno=%s total=%llu hash=%016llx\n", r,
		       ename(errno), (unsigned long long)tot,
		       (unsigned long long)h);
	} else if (!strcmp(c, "lseek") || !strcmp(c, "pos")) {
		int fd, wh = SEEK_CUR;
		off_t off = 0;

		need(n, c[0] == 'l' ? 4 : 2, c);
		fd = (int)num(t[1]);
		if (c[0] == 'l') {
			off = (off_t)num(t[2]);
			wh = (int)flags(t[3], whences);
		}
		errno = SENTINEL;
		ro = lseek(fd, off, wh);
		printf(" ret=%lld errno=%s\n", (long long)ro, ename(errno));
	} else if (!strcmp(c, "fstat")) {
		need(n, 2, c);
		ri = fstat((int)num(t[1]), &st);
		print_stat(ri, &st);
	} else if (!strcmp(c, "stat") || !strcmp(c, "lstat")) {
		need(n, 2, c);
		ri = c[0] == 's' ? stat(t[1], &st) : lstat(t[1], &st);
		print_stat(ri, &st);
	} else if (!strcmp(c, "fstatat")) {
		need(n, 4, c);
		ri = fstatat((int)num(t[1]), pathw(t[2]),
			     &st, (int)flags(t[3], atflags));
		print_stat(ri, &st);
	} else if (!strcmp(c, "statx")) {
		struct statx sx;

		need(n, 5, c);
		memset(&sx, 0, sizeof(sx));
		ri = statx((int)num(t[1]), pathw(t[2]),
			   (int)flags(t[3], atflags),
			   (unsigned)flags(t[4], smask), &sx);
		printf(" ret=%d errno=%s", ri, ename(errno));
		if (ri == 0)
			printf(" has_size=%d size=%llu",
			       !!(sx.stx_mask & STATX_SIZE),
			       (unsigned long long)sx.stx_size);
		printf("\n");
	} else if (!strcmp(c, "xstat") || !strcmp(c, "lxstat")) {
		need(n, 3, c);
		ri = c[0] == 'x' ? __xstat((int)num(t[1]), t[2], &st)
				 : __lxstat((int)num(t[1]), t[2], &st);
		print_stat(ri, &st);
	} else if (!strcmp(c, "fxstat")) {
		need(n, 3, c);
		ri = __fxstat((int)num(t[1]), (int)num(t[2]), &st);
		print_stat(ri, &st);
	} else if (!strcmp(c, "fxstatat")) {
		need(n, 5, c);
		ri = __fxstatat((int)num(t[1]), (int)num(t[2]),
				pathw(t[3]), &st,
				(int)flags(t[4], atflags));
		print_stat(ri, &st);
	} else if (!strcmp(c, "ftruncate")) {
		need(n, 3, c);
		ri = ftruncate((int)num(t[1]), (off_t)num(t[2]));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "truncate")) {
		need(n, 3, c);
		ri = truncate(t[1], (off_t)num(t[2]));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "fallocate")) {
		need(n, 5, c);
		ri = fallocate((int)num(t[1]), (int)flags(t[2], fmodes),
			       (off_t)num(t[3]), (off_t)num(t[4]));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "posix_fallocate")) {
		need(n, 4, c);
		ri = posix_fallocate((int)num(t[1]), (off_t)num(t[2]),
				     (off_t)num(t[3]));
		printf(" ret=%s errno=%s\n", ename(ri ? ri : 0), ename(errno));
	} else if (!strcmp(c, "lock")) {
		struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };

		need(n, 2, c);
		if ((fcntl((int)num(t[1]), F_GETFL) & O_ACCMODE) == O_RDONLY)
			fl.l_type = F_RDLCK;
		ri = fcntl((int)num(t[1]), F_SETLK, &fl);
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "lockseen")) {
		int st = 0;
		pid_t child;

		need(n, 2, c);
		fflush(stdout);
		child = fork();
		if (child == 0) {
			struct flock fl = { .l_type = F_WRLCK,
					    .l_whence = SEEK_SET };

			_exit(fcntl((int)num(t[1]), F_GETLK, &fl) ? 2
			      : fl.l_type != F_UNLCK		  ? 1
								  : 0);
		}
		waitpid(child, &st, 0);
		printf(" held=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	} else if (!strcmp(c, "fsync") || !strcmp(c, "fdatasync")) {
		need(n, 2, c);
		ri = c[1] == 's' ? fsync((int)num(t[1]))
				 : fdatasync((int)num(t[1]));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "sync_file_range")) {
		need(n, 5, c);
		ri = sync_file_range((int)num(t[1]), (off_t)num(t[2]),
				     (off_t)num(t[3]),
				     (unsigned)flags(t[4], misc));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "fdopen_fclose")) {
		FILE *f;

		need(n, 3, c);
		f = fdopen((int)num(t[1]), t[2]);
		if (!f) {
			printf(" fdopen=NULL errno=%s\n", ename(errno));
		} else {
			errno = SENTINEL;
			ri = fclose(f);
			printf(" ret=%d errno=%s\n", ri, ename(errno));
		}
	} else if (!strcmp(c, "fdopen_freopen")) {
		FILE *f;

		need(n, 4, c);
		f = fdopen((int)num(t[1]), "w");
		if (!f) {
			printf(" fdopen=NULL errno=%s\n", ename(errno));
		} else {
			errno = SENTINEL;
			f = freopen(t[2], t[3], f);
			printf(" ret=%d errno=%s\n", f ? fileno(f) : -1,
			       ename(errno));
		}
	} else if (!strcmp(c, "mkfifo")) {
		need(n, 2, c);
		ri = mkfifo(t[1], 0644);
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "unlink")) {
		need(n, 2, c);
		ri = unlink(t[1]);
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "linkat")) {
		need(n, 3, c);
		ri = linkat((int)num(t[1]), "", AT_FDCWD, t[2], AT_EMPTY_PATH);
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "rawclose")) {
		need(n, 2, c);
		ri = (int)syscall(SYS_close, (int)num(t[1]));
		printf(" ret=%d errno=%s\n", ri, ename(errno));
	} else if (!strcmp(c, "fopen")) {
		FILE *f;

		need(n, 4, c);
		f = fopen(t[2], t[3]);
		ri = f ? fileno(f) : -1;
		printf(" ret=%d errno=%s\n", ri, ename(errno));
		setvar(t[1], ri);
	} else if (!strcmp(c, "ksize")) {
		need(n, 2, c);
		printf("\n");
		kernel_size_fd((int)num(t[1]));
	} else if (!strcmp(c, "kstat")) {
		need(n, 2, c);
		printf("\n");
		if (syscall(SYS_newfstatat, AT_FDCWD, t[1], &st, 0) == 0)
			printf("#ksize %lld\n", (long long)st.st_size);
		else
			printf("#ksize error\n");
	} else if (!strcmp(c, "seg")) {
		const char *dir = getenv("DIOSHIM_SHM_DIR");
		char path[4096];

		need(n, 2, c);
		printf("\n");
		if (syscall(SYS_newfstatat, AT_FDCWD, t[1], &st, 0)) {
			printf("#seg error\n");
		} else {
			snprintf(path, sizeof(path), "%s/dioshim.%llx.%llx",
				 dir && *dir ? dir : "/dev/shm",
				 (unsigned long long)st.st_dev,
				 (unsigned long long)st.st_ino);
			printf("#seg %d\n", access(path, F_OK) == 0);
		}
	} else {
		die("unknown command %s", c);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char line[1024];

	g_argc = argc;
	g_argv = argv;
	buf = mmap(NULL, BUFSZ + 4096, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		die("mmap");
	robuf = buf + BUFSZ;
	mprotect(robuf, 4096, PROT_READ);
	setvbuf(stdout, NULL, _IOLBF, 0);
	while (fgets(line, sizeof(line), stdin))
		run_line(line);
	return 0;
}
