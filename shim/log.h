/* SPDX-License-Identifier: MIT */
/* The log: one line per event, to DIOSHIM_LOG; silent by default. */
#ifndef DIOSHIM_LOG_H
#define DIOSHIM_LOG_H

#include <stdbool.h>

/* Write one line "dioshim[pid]: ...".  Keeps errno.  Never touches the
 * application's stdout, never allocates. */
void log_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

bool log_enabled(void);
/* Where the lines go (DIOSHIM_LOG): "stderr" or a file; "" silences. */
void log_set_path(const char *path);

/* Log a line once per call site for the life of the process. */
#define log_once(...)                                                      \
	do {                                                               \
		static int log_once_done;                                  \
		if (!__atomic_exchange_n(&log_once_done, 1, __ATOMIC_RELAXED)) \
			log_msg(__VA_ARGS__);                              \
	} while (0)

#endif
