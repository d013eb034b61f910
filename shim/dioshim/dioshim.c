// SPDX-License-Identifier: MIT
/*
 * dioshim: run a command with libdioshim.so preloaded, and look at the
 * shared state of files being written.
 *
 *   dioshim [--] CMD [ARGS...]   run CMD under the shim
 *   dioshim status [FILE...]     show the logical EOF, the reservation and
 *                                the writers of each file (status.c; with
 *                                no FILE, of every file served)
 *   dioshim recover FILE...      cut the reserved tail a crash left
 *   dioshim gc                   remove segments nobody alive uses
 *
 * The library is found next to this program (the build tree), in the
 * library directory it was built for when it runs from the directory it
 * was built to be installed in, else in ../lib/dioshim/ (an install moved
 * elsewhere); it is prepended to LD_PRELOAD, never put in place of what
 * is there.
 *
 * Above every layer of the library it links (the mechanisms without the
 * wrappers, CORE_SRC): gc walks the segments with segment_walk (L1);
 * status.c reads them (cmd.h).
 */
#define _GNU_SOURCE
#include "dioshim.h"
#include "cmd.h"

#include "config.h"
#include "inflight.h"
#include "recover.h"
#include "segment.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#ifndef DIOSHIM_LIBDIR
#define DIOSHIM_LIBDIR "/usr/local/lib/dioshim"
#endif
#ifndef DIOSHIM_BINDIR
#define DIOSHIM_BINDIR "/usr/local/bin"
#endif

static void usage(FILE *out)
{
	fprintf(out,
		"usage: dioshim [--] COMMAND [ARGS...]\n"
		"       dioshim status [--json] [-w SECS] [FILE...]\n"
		"       dioshim recover FILE...\n"
		"       dioshim gc\n"
		"       dioshim --help | --version\n"
		"\n"
		"Runs COMMAND with libdioshim.so preloaded, so that its O_DIRECT\n"
		"writes to one file run in parallel on ext4 and XFS.\n"
		"\n"
		"Environment (read by the library; dioshim(7)):\n");
	/* One list, the library's (config.def): unset by default when
	 * no default is written. */
#define CONFIG(name, def, what)                                          \
	fprintf(out, "  %-26s %s\n", *def ? #name "=" def : #name, what);
#include "config.def"
#undef CONFIG
}

/* True if p names a regular file; p is made canonical in place. */
static int file_exists(char *p)
{
	char canon[PATH_MAX];
	struct stat st;

	if (stat(p, &st) || !S_ISREG(st.st_mode))
		return 0;
	if (realpath(p, canon) && strlen(canon) < PATH_MAX - 64)
		strcpy(p, canon);
	return 1;
}

/* The library that belongs with this launcher. */
static int find_library(char *out, size_t cap)
{
	char exe[PATH_MAX - 64], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			if (snprintf(out, cap, "%s/libdioshim.so", exe) <
				    (int)cap &&
			    file_exists(out))
				return 0;
			/* Installed where it was built for: its own library,
			 * not one another install left in ../lib/dioshim (the
			 * Debian package's is in a multiarch directory). */
			if (!strcmp(exe, DIOSHIM_BINDIR))
				goto built_for;
			if (snprintf(out, cap, "%s/../lib/dioshim/libdioshim.so",
				     exe) < (int)cap &&
			    file_exists(out))
				return 0;
		}
	}
built_for:
	snprintf(out, cap, "%s/libdioshim.so", DIOSHIM_LIBDIR);
	return file_exists(out) ? 0 : -1;
}

/* A relative DIOSHIM_LOG made absolute, from here: every process of the
 * command logs to the one file, wherever it changes directory to. */
static void log_path_absolute(void)
{
	const char *v = getenv("DIOSHIM_LOG");
	char cwd[PATH_MAX], *abs;

	if (!v || !*v || *v == '/' || !strcmp(v, "stderr") ||
	    !getcwd(cwd, sizeof(cwd)) || asprintf(&abs, "%s/%s", cwd, v) < 0)
		return;
	setenv("DIOSHIM_LOG", abs, 1);
	free(abs);
}

static int run(char **argv)
{
	char lib[PATH_MAX], *preload;
	const char *old = getenv("LD_PRELOAD");
	size_t n;

	if (find_library(lib, sizeof(lib))) {
		fprintf(stderr, "dioshim: libdioshim.so not found\n");
		return 127;
	}
	log_path_absolute();
	n = strlen(lib) + (old ? strlen(old) + 1 : 0) + 1;
	preload = malloc(n);
	if (!preload)
		return 127;
	if (old && *old)
		snprintf(preload, n, "%s:%s", lib, old);
	else
		snprintf(preload, n, "%s", lib);
	setenv("LD_PRELOAD", preload, 1);
	execvp(argv[0], argv);
	fprintf(stderr, "dioshim: %s: %s\n", argv[0], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/*
 * Recover one file the way the first shimmed open does: attach (creating
 * the segment runs the recovery from the record, joining one whose writers
 * are gone takes its words), then detach as the last user, which cuts the
 * tail.  A file still open under the shim is left alone.  Opened at path,
 * named file in what is printed.
 */
static int recover_at(const char *path, const char *file)
{
	char segpath[PATH_MAX];
	struct dioshim_seg *seg = NULL;
	struct shim_file *f;
	struct file_id id;
	struct stat before, after;
	int fd, users;

	fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &before)) {
		fprintf(stderr, "dioshim: %s: %s\n", file, strerror(errno));
		return 1;
	}
	if (!file_identify(fd, &id)) {
		/* Not on a served filesystem now (or not regular): the record
		 * alone says what to cut. */
		struct recover_report rep;

		if (!S_ISREG(before.st_mode)) {
			fprintf(stderr, "dioshim: %s: not a regular file\n",
				file);
			close(fd);
			return 1;
		}
		if (recover_fd(fd, (uint32_t)before.st_blksize, &rep) ==
		    RECOVER_FAILED) {
			fprintf(stderr, "dioshim: %s: %s\n", file,
				strerror(errno));
			close(fd);
			return 1;
		}
		recover_last = rep;
		goto report;
	}
	seg = segment_path_of(segpath, sizeof(segpath), id.dev, id.ino,
			      id.mode, id.gid, false) ?
		      NULL :
		      segment_map_path(segpath, false);
	if (seg) {
		users = segment_live_users(seg);
		segment_unmap(seg);
		if (users) {
			printf("%s: open under the shim by %d process%s: left "
			       "alone\n", file, users, users > 1 ? "es" : "");
			close(fd);
			return 0;
		}
	}
	memset(&recover_last, 0, sizeof(recover_last));
	f = segment_attach(fd, &id, true);
	if (!f) {
		fprintf(stderr, "dioshim: %s: its segment is unusable (see "
			"DIOSHIM_LOG=stderr)\n", file);
		close(fd);
		return 1;
	}
	segment_put(f, fd);
report:
	fstat(fd, &after);
	close(fd);
	if (recover_last.outcome != RECOVER_NO_RECORD)
		printf("%s: record eof %llu phys %llu; size %lld -> %lld\n",
		       file, (unsigned long long)recover_last.rec_eof,
		       (unsigned long long)recover_last.rec_phys,
		       (long long)before.st_size, (long long)after.st_size);
	else if (seg)
		printf("%s: writers gone; size %lld -> %lld\n", file,
		       (long long)before.st_size, (long long)after.st_size);
	else
		printf("%s: no record, size %lld: left alone\n", file,
		       (long long)before.st_size);
	return 0;
}

static int recover_one(const char *file)
{
	return recover_at(file, file);
}

static int recover(char **files)
{
	int rc = 0;

	for (; *files; files++)
		rc |= recover_one(*files);
	return rc;
}

/* Remove segments nobody alive uses, cutting the tails they reserved. */
static int gc_rc;

/* A descriptor of a directory on the filesystem dev: the recorded path's
 * nearest existing parent, else a mount point of dev (mountinfo); -1. */
static int mount_dir(dev_t dev, const char *path)
{
	char dir[PATH_MAX], line[4096];
	struct stat st;
	FILE *mi;
	int fd;

	snprintf(dir, sizeof(dir), "%s", path);
	for (char *slash; (slash = strrchr(dir, '/')) && slash != dir;) {
		*slash = '\0';
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0 && !fstat(fd, &st) && st.st_dev == dev)
			return fd;
		if (fd >= 0)
			close(fd);
	}
	mi = fopen("/proc/self/mountinfo", "re");
	if (!mi)
		return -1;
	fd = -1;
	while (fd < 0 && fgets(line, sizeof(line), mi)) {
		unsigned maj, min;
		char mnt[PATH_MAX];

		/* id parent maj:min root mountpoint ... */
		if (sscanf(line, "%*d %*d %u:%u %*s %4095s", &maj, &min, mnt) !=
			    3 ||
		    makedev(maj, min) != dev)
			continue;
		fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0 && (fstat(fd, &st) || st.st_dev != dev)) {
			close(fd);
			fd = -1;
		}
	}
	fclose(mi);
	return fd;
}

int open_handle(dev_t dev, const char *path,
		       const struct dioshim_fh *fh)
{
	union {
		struct file_handle h;
		unsigned char buf[sizeof(struct file_handle) +
				  sizeof(fh->fh)];
	} u;
	int mfd, fd, err;

	if (!fh->fh_bytes || (mfd = mount_dir(dev, path)) < 0)
		return -2;
	u.h.handle_bytes = fh->fh_bytes;
	u.h.handle_type = fh->fh_type;
	memcpy(u.h.f_handle, fh->fh, fh->fh_bytes);
	fd = open_by_handle_at(mfd, &u.h, O_RDONLY | O_NOCTTY | O_CLOEXEC);
	err = errno;
	close(mfd);
	errno = err;
	return fd < 0 && err != ESTALE ? -2 : fd;
}

static void gc_one(const char *segpath, uint64_t dev, uint64_t ino, void *arg)
{
	const char *name = strrchr(segpath, '/') + 1;
	char file[256];

	struct dioshim_fh fh;

	switch (segment_gc(segpath, file, sizeof(file), &fh)) {
	case GC_IN_USE:
		printf("%s: in use (%s)\n", name, file);
		break;
	case GC_REMOVED:
		printf("%s: removed (%s)\n", name, file);
		break;
	case GC_FOREIGN:
		printf("%s: not ours or unreadable: left alone\n", name);
		break;
	case GC_NEEDS_FILE: {
		struct stat st;
		int fd;

		/* The recorded path must still name that inode. */
		if (file[0] && stat(file, &st) == 0 &&
		    (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino) {
			gc_rc |= recover_one(file);
			break;
		}
		/* Else the handle says where it went, or that it is gone. */
		fd = open_handle((dev_t)dev, file, &fh);
		if (fd >= 0) {
			char at[64], now[PATH_MAX];
			ssize_t n;

			snprintf(at, sizeof(at), "/proc/self/fd/%d", fd);
			n = readlink(at, now, sizeof(now) - 1);
			now[n > 0 ? n : 0] = '\0';
			printf("%s: its file moved from %s to %s\n", name,
			       file[0] ? file : "(unknown)",
			       n > 0 ? now : "(unknown)");
			/* Through the handle's descriptor, named where the
			 * file is now. */
			gc_rc |= recover_at(at, n > 0 ? now : at);
			close(fd);
		} else if (fd == -1 && errno == ESTALE) {
			if (segment_gc_file_gone(segpath, &fh))
				printf("%s: removed (its file was deleted)\n",
				       name);
			else
				printf("%s: in use\n", name);
		} else {
			printf("%s: a reserved tail is left and its file is "
			       "not at %s: run dioshim recover on it\n",
			       name, file[0] ? file : "(unknown)");
			gc_rc = 1;
		}
		break;
	}
	}
}

/*
 * A shared file (a segment, a hint) its maker never published:
 * "NAME.tmpTID.RANDOM" (shm.c tmp_name; "NAME.tmpTID" before), left by a
 * maker killed between making it and linking it in.  It is removed once
 * it is a minute old and its thread is gone: a maker takes microseconds,
 * and one in another pid namespace (whose thread number means nothing
 * here) is long done by then.
 */
#define LEFTOVER_AGE_SEC 60

/* NAME.tmpTID[.16 hex digits], NAME a segment's or a hint's; its TID. */
static long leftover_tid(const char *name)
{
	const char *tmp = strstr(name, ".tmp"), *p;
	char published[NAME_MAX + 1];
	uint64_t dev, ino;
	long tid = 0;
	int hex = 0;

	if (!tmp || (size_t)(tmp - name) >= sizeof(published))
		return 0;
	memcpy(published, name, (size_t)(tmp - name));
	published[tmp - name] = '\0';
	if (!segment_name_parse(published, &dev, &ino) &&
	    strncmp(published, DIOSHIM_HINT_PREFIX,
		    strlen(DIOSHIM_HINT_PREFIX)))
		return 0;
	for (p = tmp + 4; *p >= '0' && *p <= '9' && tid < (1L << 30); p++)
		tid = tid * 10 + (*p - '0');
	if (p == tmp + 4 || tmp[4] == '0')
		return 0;
	if (*p == '.')
		for (p++; hex < 16 && isxdigit((unsigned char)*p); p++)
			hex++;
	return !*p && (hex == 0 || hex == 16) && p[-1] != '.' ? tid : 0;
}

static void gc_leftover(int dfd, const char *dir, const char *name)
{
	long tid = leftover_tid(name);
	struct stat st;

	if (!tid || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) ||
	    !S_ISREG(st.st_mode) ||
	    st.st_mtime > time(NULL) - LEFTOVER_AGE_SEC ||
	    !(kill((pid_t)tid, 0) && errno == ESRCH))
		return;
	if (unlinkat(dfd, name, 0) == 0)
		printf("%s/%s: a shared file its maker died making: removed\n",
		       dir, name);
}

/* The leftovers in the directory open at dfd (closed here) and, from the
 * top, in its group directories, never through a link (as the segment
 * walk, shm.c). */
static void gc_leftovers(int dfd, const char *dir, bool top)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	char sub[PATH_MAX];
	int gfd;

	if (!d) {
		close(dfd);
		return;
	}
	while ((e = readdir(d))) {
		if (!top || strncmp(e->d_name, DIOSHIM_GROUP_PREFIX,
				    strlen(DIOSHIM_GROUP_PREFIX))) {
			gc_leftover(dirfd(d), dir, e->d_name);
			continue;
		}
		gfd = openat(dirfd(d), e->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (gfd < 0)
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name) <
		    (int)sizeof(sub))
			gc_leftovers(gfd, sub, false);
		else
			close(gfd);
	}
	closedir(d);
}

static int gc(void)
{
	struct stat st;
	int fd;

	if (stat(config.shm_dir, &st)) {
		fprintf(stderr, "dioshim: %s: %s\n", config.shm_dir,
			strerror(errno));
		return 1;
	}
	gc_rc = 0;
	segment_walk(gc_one, NULL);
	fd = open(config.shm_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		gc_leftovers(fd, config.shm_dir, true);
	/* A hint left counting segments that are gone (a process killed
	 * between counting one and making or removing it). */
	segment_recount();
	return gc_rc;
}

/* The operands from a on: how many. */
static int argc_of(char **a)
{
	int n = 0;

	while (a[n])
		n++;
	return n;
}

/* The subcommands, each with its usage and what it takes. */
struct sub {
	const char *name, *args, *what;
	bool files; /* FILE... operands, at least one; else none */
};

static const struct sub subs[] = {
	/* status parses its own options (status.c): only its name here */
	{ "status", " [--json] [-w SECS] [FILE...]", "", false },
	{ "recover", " FILE...", "After a crash: cut each file's reserved tail "
	  "back to where its\ndata ends; exits non-zero on any error", true },
	{ "gc", "", "Remove shared segments whose processes are all gone, "
	  "cutting the\ntails they left", false },
};

/*
 * Options of a subcommand: --help (or -h) prints its usage; "--" ends the
 * options (a file named "-x" comes after it); any other "-..." is refused
 * before anything is done, as are operands it does not take.  Returns the
 * operands, or NULL with *rc set (0 for --help, 2 for a refusal).
 */
static char **sub_args(const struct sub *c, char **argv, int *rc)
{
	char **a = argv, **ops;

	for (; *a && strcmp(*a, "--"); a++) {
		if (!strcmp(*a, "--help") || !strcmp(*a, "-h")) {
			printf("usage: dioshim %s%s\n\n%s.\n", c->name, c->args,
			       c->what);
			*rc = 0;
			return NULL;
		}
	}
	for (a = argv; *a && strcmp(*a, "--"); a++) {
		if ((*a)[0] == '-') {
			fprintf(stderr, "dioshim %s: unknown option %s\n"
					"usage: dioshim %s%s\n",
				c->name, *a, c->name, c->args);
			*rc = 2;
			return NULL;
		}
	}
	/* The operands, without the "--" that may stand before them. */
	ops = argv;
	for (a = argv; *a; a++)
		if (!strcmp(*a, "--")) {
			memmove(a, a + 1, sizeof(*a) * (size_t)(argc_of(a + 1) + 1));
			break;
		}
	if (c->files ? !*ops : !!*ops) {
		fprintf(stderr, "usage: dioshim %s%s\n", c->name, c->args);
		*rc = 2;
		return NULL;
	}
	return ops;
}

int main(int argc, char **argv)
{
	char **ops;
	size_t k;
	int rc;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("dioshim %s\n", DIOSHIM_VERSION);
		return 0;
	}
	for (k = 0; k < sizeof(subs) / sizeof(subs[0]); k++) {
		if (strcmp(argv[1], subs[k].name))
			continue;
		if (k == 0) /* its own options (status.c) */
			return status(argv + 2);
		ops = sub_args(&subs[k], argv + 2, &rc);
		if (!ops)
			return rc;
		config_load();
		switch (k) {
		case 1:
			return recover(ops);
		default:
			return gc();
		}
	}
	/* The command run reads the settings itself (the library): read
	 * here too, a bad one would be logged twice. */
	if (!strcmp(argv[1], "--")) {
		if (argc < 3) {
			usage(stderr);
			return 2;
		}
		return run(argv + 2);
	}
	if (argv[1][0] == '-') {
		fprintf(stderr, "dioshim: unknown option %s\n", argv[1]);
		usage(stderr);
		return 2;
	}
	return run(argv + 1);
}
