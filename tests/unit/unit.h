/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the unit tests: each test is one program proving one
 * behaviour, exiting 0 (pass), 1 (fail) or 77 (skip), automake style.
 * Unit tests link the mechanisms directly, without the wrappers.
 */
#ifndef DIOSHIM_UNIT_H
#define DIOSHIM_UNIT_H

#include "config.h"
#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T_PASS 0
#define T_FAIL 1
#define T_SKIP 77

static int unit_failures;

#define CHECK(cond)                                                          \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				__LINE__, #cond);                            \
			unit_failures++;                                     \
		}                                                            \
	} while (0)

#define CHECK_EQ(a, b)                                                       \
	do {                                                                 \
		long long a_ = (long long)(a), b_ = (long long)(b);          \
		if (a_ != b_) {                                              \
			fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", \
				__FILE__, __LINE__, #a, a_, #b, b_);         \
			unit_failures++;                                     \
		}                                                            \
	} while (0)

#define SKIP(...)                                \
	do {                                     \
		printf(__VA_ARGS__);             \
		printf("\n");                    \
		exit(T_SKIP);                    \
	} while (0)

static inline int unit_result(void)
{
	if (unit_failures)
		fprintf(stderr, "%d check(s) failed\n", unit_failures);
	return unit_failures ? T_FAIL : T_PASS;
}

/*
 * A private world for the test: segments in a fresh directory, data files
 * on tmpfs (which supports O_DIRECT), tmpfs served.  Returns the data
 * directory.
 */
static char unit_dir[256];

static inline void unit_rmdir(void)
{
	char cmd[600];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", unit_dir,
		 config.shm_dir);
	if (system(cmd))
		fprintf(stderr, "cleanup of %s failed\n", unit_dir);
}

static inline const char *unit_setup(void)
{
	char shm[] = "/dev/shm/dioshim-unit-shm.XXXXXX";
	char data[] = "/dev/shm/dioshim-unit-data.XXXXXX";

	if (!mkdtemp(shm) || !mkdtemp(data)) {
		perror("mkdtemp");
		exit(T_FAIL);
	}
	setenv("DIOSHIM_SHM_DIR", shm, 1);
	setenv("DIOSHIM_FS", "tmpfs", 1);
	config_load();
	snprintf(unit_dir, sizeof(unit_dir), "%s", data);
	atexit(unit_rmdir);
	return unit_dir;
}

/* A new O_DIRECT file in the test's data directory, with size bytes. */
static inline int unit_file(const char *name, off_t size, char *path,
			    size_t cap)
{
	int fd;

	snprintf(path, cap, "%s/%s", unit_dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
	if (fd < 0 || (size && ftruncate(fd, size))) {
		perror(path);
		exit(T_FAIL);
	}
	return fd;
}

/* fork(2) with the segment layer's fork handlers run around it, as the
 * library's pthread_atfork handlers run them (the unit programs link no
 * wrappers): the child is a user of every file the parent has. */
static inline pid_t unit_fork(void)
{
	pid_t pid;

	segment_atfork_prepare();
	pid = fork();
	if (pid == 0)
		segment_atfork_child();
	else
		segment_atfork_parent();
	return pid;
}

#endif
