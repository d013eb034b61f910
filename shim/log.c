// SPDX-License-Identifier: MIT
/*
 * The log (L0: calls only the kernel, through raw syscalls; it keeps its
 * own destination, set by config_load, so that it depends on nothing).
 * Lines go out through raw syscalls, so logging works before the
 * real symbols are resolved and can never re-enter a wrapper; the file is
 * opened per line because programs that close every fd (closefrom) would
 * close a descriptor kept open for us.  One write(2) per line, on a file
 * opened O_APPEND: lines of processes logging at once do not mix.
 */
#define _GNU_SOURCE
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

/* DIOSHIM_LOG: "" silent, "stderr", or a file (made absolute at load). */
static char log_path[PATH_MAX];

static const char *const event_word[LOG_EVENTS] = {
	[LOG_FALLBACK] = "fallback",
	[LOG_EXACT] = "exact",
	[LOG_RECOVER] = "recover",
	[LOG_RECLAIM] = "reclaim",
	[LOG_GIVEBACK] = "enospc-giveback",
	[LOG_OUTSIDE] = "outside",
	[LOG_CONFIG] = "config",
	[LOG_ERROR] = "error",
};

/*
 * A relative path is taken from the working directory at load, once: a
 * process that changes directory keeps writing where it began.  A path
 * that does not fit (or a working directory that cannot be read)
 * silences the log rather than write to another file.
 */
void log_set_path(const char *path)
{
	size_t n = strlen(path), cwd = 0;

	log_path[0] = '\0';
	if (!n)
		return;
	if (path[0] != '/' && strcmp(path, "stderr")) {
		/* Not "(unreachable)/...": a directory outside the root. */
		if (sys_call(SYS_getcwd, log_path, sizeof(log_path)) <= 0 ||
		    log_path[0] != '/') {
			log_path[0] = '\0';
			return;
		}
		cwd = strlen(log_path);
		log_path[cwd++] = '/';
	}
	if (cwd + n >= sizeof(log_path)) {
		log_path[0] = '\0';
		return;
	}
	memcpy(log_path + cwd, path, n + 1);
}

bool log_enabled(void)
{
	return log_path[0] != '\0';
}

/*
 * "YYYY-MM-DDThh:mm:ss.uuuuuuZ" of now.  By hand, not gmtime_r: glibc's
 * takes the time zone lock even for UTC, and a line may be written in a
 * child after fork or in a signal handler, where that lock may be held
 * by a thread that is gone.  The civil date from days since the epoch is
 * the proleptic Gregorian calendar's, counted in 400-year eras from
 * March 1st of year 0 (so the leap day falls at the end of a year).
 */
static int put_time(char *out, size_t cap)
{
	struct timespec ts;
	long long days, secs, era, doe, yoe, doy, mp, y, m, d;

	clock_gettime(CLOCK_REALTIME, &ts);
	days = ts.tv_sec / 86400;
	secs = ts.tv_sec % 86400;
	days += 719468;
	era = days / 146097;
	doe = days - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	y = yoe + era * 400 + (m <= 2);
	return snprintf(out, cap,
			"%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%06ldZ", y,
			m, d, secs / 3600, secs / 60 % 60, secs % 60,
			ts.tv_nsec / 1000);
}

/* path as one field: blanks, control bytes and backslashes as \ooo. */
static int put_path(char *out, size_t cap, const char *path, size_t len)
{
	size_t i, n = 0;

	if (!len)
		return snprintf(out, cap, "-");
	for (i = 0; i < len && n + 5 < cap; i++) {
		unsigned char c = (unsigned char)path[i];

		if (c <= ' ' || c == 0x7f || c == '\\')
			n += (size_t)snprintf(out + n, cap - n, "\\%03o", c);
		else
			out[n++] = (char)c;
	}
	out[n] = '\0';
	return (int)n;
}

/* "MAJOR:MINOR:INO PATH" of file, or "- -". */
static int put_file(char *out, size_t cap, const struct log_file *file)
{
	char link[1024], proc[32];
	uint64_t dev = 0, ino = 0;
	const char *path = NULL;
	size_t len = 0;
	struct stat st;
	ssize_t r;
	int n;

	if (file) {
		dev = file->dev;
		ino = file->ino;
		if (!ino && file->fd >= 0 && !sys_fstat(file->fd, &st)) {
			dev = st.st_dev;
			ino = st.st_ino;
		}
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", file->fd);
		r = file->fd >= 0
			    ? sys_readlinkat(AT_FDCWD, proc, link, sizeof(link))
			    : -1;
		/* A path longer than the buffer is not written cut: it
		 * would name a directory above the file. */
		if (r > 0 && r < (ssize_t)sizeof(link) && link[0] == '/') {
			path = link;
			len = (size_t)r;
		} else if (file->path) {
			path = file->path;
			len = strnlen(path, LOG_PATH_MAX);
		}
	}
	if (ino)
		n = snprintf(out, cap, "%u:%u:%llu ", major((dev_t)dev),
			     minor((dev_t)dev), (unsigned long long)ino);
	else
		n = snprintf(out, cap, "- ");
	return n + put_path(out + n, cap - (size_t)n, path, len);
}

uint64_t log_file_key(const struct log_file *file)
{
	uint64_t dev = file ? file->dev : 0, ino = file ? file->ino : 0;
	int saved = errno; /* the line's arguments may read it */
	struct stat st;

	if (file && !ino && file->fd >= 0 && !sys_fstat(file->fd, &st)) {
		dev = st.st_dev;
		ino = st.st_ino;
	}
	errno = saved;
	return (ino * 0x9e3779b97f4a7c15ull ^ dev) | 1;
}

/* Whether n more bytes at the end of fd stay within RLIMIT_FSIZE: past
 * it the kernel sends SIGXFSZ, which would kill a program that never
 * wrote that far itself. */
static bool fits_fsize(int fd, size_t n)
{
	struct rlimit rl;
	struct stat st;

	if (sys_call(SYS_prlimit64, 0, RLIMIT_FSIZE, NULL, &rl) ||
	    rl.rlim_cur == RLIM_INFINITY)
		return true;
	return !sys_fstat(fd, &st) &&
	       (!S_ISREG(st.st_mode) || (uint64_t)st.st_size + n <= rl.rlim_cur);
}

/*
 * One write(2) of a line with SIGPIPE and SIGXFSZ held off: a reader
 * gone, or a file that reached RLIMIT_FSIZE since fits_fsize looked (or
 * descriptor 2 at it), loses the line, never the program.  Either signal
 * that this write raised, pending now only because it was held, is taken
 * back; one pending before is left to the program.
 */
static void write_line(int fd, const char *line, size_t n)
{
	static const struct timespec now;
	uint64_t hold = 1ull << (SIGPIPE - 1) | 1ull << (SIGXFSZ - 1);
	uint64_t old, before = 0, after = 0, mine;

	if (sys_rt_sigprocmask(SIG_BLOCK, &hold, &old, sizeof(hold))) {
		sys_write(fd, line, n);
		return;
	}
	sys_call(SYS_rt_sigpending, &before, sizeof(before));
	if (sys_write(fd, line, n) < 0) {
		sys_call(SYS_rt_sigpending, &after, sizeof(after));
		mine = after & ~before & hold;
		if (mine)
			sys_call(SYS_rt_sigtimedwait, &mine, NULL, &now,
				 sizeof(mine));
	}
	sys_rt_sigprocmask(SIG_SETMASK, &old, NULL, sizeof(old));
}

void log_event(enum log_event ev, const struct log_file *file, const char *fmt,
	       ...)
{
	char line[4096];
	size_t cap = sizeof(line) - 1, n;
	int saved = errno, fd;
	va_list ap;

	if (!log_enabled())
		return;
	n = (size_t)put_time(line, cap);
	n += (size_t)snprintf(
		line + n, cap - n, " dioshim[%d] %s ", (int)getpid(),
		(unsigned)ev < LOG_EVENTS ? event_word[ev] : "error");
	n += (size_t)put_file(line + n, cap - n, file);
	if (n < cap - 1) {
		line[n++] = ' ';
		va_start(ap, fmt);
		n += (size_t)vsnprintf(line + n, cap - n, fmt, ap);
		va_end(ap);
	}
	if (n > cap - 1)
		n = cap - 1;
	/* A message is one line, whatever its arguments held: no control
	 * character (a newline, a carriage return, an escape) reaches it. */
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)line[i] < ' ' || line[i] == 0x7f)
			line[i] = ' ';
	line[n++] = '\n';

	if (!strcmp(log_path, "stderr")) {
		if (fits_fsize(2, n))
			write_line(2, line, n);
	} else {
		/* O_NONBLOCK: a FIFO with no reader, or one not read, loses
		 * the line rather than stop the program. */
		fd = sys_openat_once(AT_FDCWD, log_path,
				     O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC |
					     O_NONBLOCK,
				     0644);
		if (fd >= 0) {
			if (fits_fsize(fd, n))
				write_line(fd, line, n);
			sys_close(fd);
		}
	}
	errno = saved;
}
