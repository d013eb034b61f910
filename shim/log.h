/* SPDX-License-Identifier: MIT */
/*
 * The log: one line per event, to DIOSHIM_LOG; silent by default.
 *
 *   TIME dioshim[PID] EVENT FILE PATH MESSAGE
 *
 * TIME is UTC, ISO 8601 with microseconds; EVENT one word of the list
 * below; FILE the file's device and inode, MAJOR:MINOR:INO, and PATH
 * where it is (octal escapes for blanks, control bytes and backslashes,
 * as /proc/self/mounts), each "-" when the line is about no file or it is
 * not known.  Only MESSAGE, the rest of the line, is free text.
 * dioshim(7) documents the format; tests/bats/log.bats parses it.
 */
#ifndef DIOSHIM_LOG_H
#define DIOSHIM_LOG_H

#include <stdbool.h>
#include <stdint.h>

/* What a line reports: its EVENT word (log.c names them). */
enum log_event {
	LOG_FALLBACK, /* fallback: calls go to the kernel as issued */
	LOG_EXACT,    /* exact: a file is written with no reservation */
	LOG_RECOVER,  /* recover: what a crash left is repaired */
	LOG_RECLAIM,  /* reclaim: a dead process's holdings taken back */
	LOG_GIVEBACK, /* enospc-giveback: reserved tails given back */
	LOG_OUTSIDE,  /* outside: a change made outside the shim seen */
	LOG_CONFIG,   /* config: a setting refused or ignored */
	LOG_ERROR,    /* error: a call of ours failed; the line says what
		       * follows from it */
	LOG_EVENTS
};

/*
 * The file a line is about.  dev/ino 0: read from fd, if fd >= 0.  The
 * path is fd's (where the file is now) when fd >= 0, else path's (NUL
 * terminated within LOG_PATH_MAX bytes, as a segment's), else "-".
 */
#define LOG_PATH_MAX 256
struct log_file {
	uint64_t dev, ino;
	const char *path;
	int fd;
};
#define LOG_FD(fd_) (&(struct log_file){.fd = (fd_)})
#define LOG_ID(dev_, ino_) \
	(&(struct log_file){.dev = (dev_), .ino = (ino_), .fd = -1})
#define LOG_IDFD(dev_, ino_, fd_) \
	(&(struct log_file){.dev = (dev_), .ino = (ino_), .fd = (fd_)})

/* Write one line about file (NULL: none).  Keeps errno.  Never touches
 * the application's stdout, never allocates. */
void log_event(enum log_event ev, const struct log_file *file, const char *fmt,
	       ...) __attribute__((format(printf, 3, 4)));

bool log_enabled(void);
/* Where the lines go (DIOSHIM_LOG): "stderr" or a file; "" silences. */
void log_set_path(const char *path);

/* A number for file (its dev and ino, read from its fd if need be):
 * what log_once_file compares; never 0. */
uint64_t log_file_key(const struct log_file *file);

/* Log a line once per call site for the life of the process. */
#define log_once(...)                                                          \
	do {                                                                   \
		static int log_once_done;                                      \
		if (!__atomic_exchange_n(&log_once_done, 1, __ATOMIC_RELAXED)) \
			log_event(__VA_ARGS__);                                \
	} while (0)

/* Log a line at a call site once per file in a row: again when the
 * site's file is another than its last one's (a state each file that
 * enters it should report, without a line per call). */
#define log_once_file(ev, file, ...)                                       \
	do {                                                               \
		static uint64_t log_once_last;                             \
		const struct log_file *log_once_f = (file);                \
		uint64_t log_once_k;                                       \
		if (!log_enabled())                                        \
			break;                                             \
		log_once_k = log_file_key(log_once_f);                     \
		if (__atomic_exchange_n(&log_once_last, log_once_k,        \
					__ATOMIC_RELAXED) != log_once_k)   \
			log_event(ev, log_once_f, __VA_ARGS__);            \
	} while (0)

#endif
