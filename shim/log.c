// SPDX-License-Identifier: MIT
/*
 * The log (L0: calls only the kernel, through raw syscalls; it keeps its
 * own destination, set by config_load, so that it depends on nothing).
 * Lines go out through raw syscalls, so logging works before the
 * real symbols are resolved and can never re-enter a wrapper; the file is
 * opened per line because programs that close every fd (closefrom) would
 * close a descriptor kept open for us.
 */
#define _GNU_SOURCE
#include "log.h"
#include "sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* DIOSHIM_LOG: "" silent, "stderr", or a file. */
static char log_path[256];

void log_set_path(const char *path)
{
	size_t n = strlen(path);

	if (n >= sizeof(log_path))
		n = sizeof(log_path) - 1;
	memcpy(log_path, path, n);
	log_path[n] = '\0';
}

bool log_enabled(void)
{
	return log_path[0] != '\0';
}

void log_msg(const char *fmt, ...)
{
	char line[512];
	int saved = errno, n, fd;
	va_list ap;

	if (!log_enabled())
		return;
	n = snprintf(line, sizeof(line), "dioshim[%d]: ", (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';

	if (!strcmp(log_path, "stderr")) {
		sys_write(2, line, (size_t)n);
	} else {
		fd = sys_openat_once(AT_FDCWD, log_path,
				     O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
				     0644);
		if (fd >= 0) {
			sys_write(fd, line, (size_t)n);
			sys_close(fd);
		}
	}
	errno = saved;
}
