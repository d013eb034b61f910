// SPDX-License-Identifier: MIT
/*
 * dioshim status: the shared state of files being written, read from
 * their segments without changing a word.
 *
 *   dioshim status FILE...     one line per FILE
 *   dioshim status             one line per segment the caller can read
 *                              (the one walk, segment_walk: the user's
 *                              place and its groups' dioshim-g<gid>
 *                              directories it may enter; root: all)
 *   --json                     the same as one JSON document
 *   -w SECS                    again every SECS seconds, like watch(1)
 *
 * A FILE that is not served, not a regular file or missing, a segment
 * of another layout or a corrupt one: one line each (on standard error,
 * or in the document's "errors"), and exit status 1.
 *
 * Above every layer of the library (with dioshim.c): maps segments with
 * segment_map_path, checks them with seg_header_ok (L1), sums the
 * writes in flight with inflight_count (L2).
 */
#define _GNU_SOURCE
#include "cmd.h"

#include "dioshim.h"

#include "config.h"
#include "inflight.h"
#include "owner.h"
#include "segment.h"
#include "shm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define USAGE "usage: dioshim status [--json] [-w SECS] [--] [FILE...]\n"
#define VIEW_PIDS 64

/* One file's line. */
struct view {
	char name[PATH_MAX + 32]; /* the operand, or the path found */
	char seg[PATH_MAX];
	bool deleted, lost; /* its file was deleted; could not be found */
	uint64_t dev, ino, eof, phys, tail, rec_eof, rec_phys;
	long long ksize; /* -1: unknown */
	uint32_t users;
	int procs, npids;
	pid_t pid[VIEW_PIDS];
	bool alive[VIEW_PIDS];
	int64_t inflight;
	uint64_t queued, writes, bytes, appends, reserves, exact, prefills;
	bool exact_mode;
};

/* One round's answers: the lines, and the one-line complaints. */
struct round {
	struct view *v;
	int n, cap;
	char **err;
	int nerr;
	bool json;
};

static void complain(struct round *r, const char *what, const char *fmt,
		     ...) __attribute__((format(printf, 3, 4)));
static void complain(struct round *r, const char *what, const char *fmt, ...)
{
	char msg[PATH_MAX + 256], *line, **e;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if ((what ? asprintf(&line, "%s: %s", what, msg) :
		    asprintf(&line, "%s", msg)) < 0)
		return;
	if (!r->json) {
		fprintf(stderr, "dioshim: %s\n", line);
		free(line);
		r->nerr++;
		return;
	}
	e = realloc(r->err, sizeof(*e) * (size_t)(r->nerr + 1));

	if (!e) {
		free(line);
		return;
	}
	r->err = e;
	r->err[r->nerr++] = line;
}

static struct view *view_new(struct round *r)
{
	if (r->n == r->cap) {
		int cap = r->cap ? 2 * r->cap : 16;
		struct view *v = realloc(r->v, sizeof(*v) * (size_t)cap);

		if (!v)
			return NULL;
		r->v = v;
		r->cap = cap;
	}
	memset(&r->v[r->n], 0, sizeof(r->v[r->n]));
	r->v[r->n].ksize = -1;
	return &r->v[r->n];
}

/* The words of a mapped, checked segment into v. */
static void view_fill(struct view *v, struct dioshim_seg *seg)
{
	int i, j, hi = seg_slots(seg);

	v->dev = seg->dev;
	v->ino = seg->ino;
	v->eof = atomic_load(&seg->eof);
	v->phys = atomic_load(&seg->phys);
	v->tail = atomic_load(&seg->tail) & ~DIOSHIM_TAIL_CLOSED;
	v->rec_eof = atomic_load(&seg->recorded_eof);
	v->rec_phys = atomic_load(&seg->recorded_phys);
	v->users = atomic_load(&seg->users);
	v->inflight = inflight_count(seg);
	v->exact_mode = atomic_load(&seg->exact) != 0;
	for (i = 0; i < hi; i++) {
		struct dioshim_slot *s = &seg->slot[i];
		uint64_t o = atomic_load(&s->owner.pid_start);

		if (!o)
			continue;
		if (v->npids < VIEW_PIDS) {
			v->pid[v->npids] = (pid_t)(o & DIOSHIM_OWNER_PID_MASK);
			v->alive[v->npids++] = slot_owner_alive(seg, s, o);
		}
		v->procs++;
		v->queued += atomic_load(&s->async_inflight);
		v->reserves += atomic_load(&s->reserves);
		v->exact += atomic_load(&s->exact);
		v->prefills += atomic_load(&s->prefills);
		for (j = 0; j < DIOSHIM_SLOT_SHARDS; j++) {
			v->writes += atomic_load(&s->shard[j].writes);
			v->bytes += atomic_load(&s->shard[j].bytes);
			v->appends += atomic_load(&s->shard[j].appends);
		}
	}
}

/* Where a segment's file is now (list mode): its recorded path if that
 * still names it, else through its handle, else "(deleted)" when the
 * handle is stale. */
static void view_where(struct view *v, const struct dioshim_seg *seg)
{
	char rec[sizeof(seg->path) + 1], at[64], now[PATH_MAX];
	struct dioshim_fh fh = seg->handle;
	struct stat st;
	ssize_t n = -1;
	int fd;

	memcpy(rec, seg->path, sizeof(seg->path));
	rec[sizeof(seg->path)] = '\0';
	snprintf(v->name, sizeof(v->name), "%s", rec[0] ? rec : "(unknown)");
	if (rec[0] == '/' && !stat(rec, &st) && (uint64_t)st.st_dev == v->dev &&
	    (uint64_t)st.st_ino == v->ino) {
		v->ksize = st.st_size;
		return;
	}
	if (fh.fh_bytes > sizeof(fh.fh))
		fh.fh_bytes = 0;
	fd = open_handle((dev_t)v->dev, rec, &fh);
	if (fd == -1 && errno == ESTALE) {
		v->deleted = true;
		return;
	}
	if (fd < 0) {
		v->lost = true;
		return;
	}
	snprintf(at, sizeof(at), "/proc/self/fd/%d", fd);
	n = readlink(at, now, sizeof(now) - 1);
	if (!fstat(fd, &st)) {
		v->ksize = st.st_size;
		v->deleted = st.st_nlink == 0;
	}
	close(fd);
	if (n > 0) {
		size_t k = (size_t)n;
		const char *del = " (deleted)";

		now[k] = '\0';
		if (v->deleted && k > strlen(del) &&
		    !strcmp(now + k - strlen(del), del))
			now[k - strlen(del)] = '\0';
		snprintf(v->name, sizeof(v->name), "%s", now);
	}
}

/* Why the segment at path could not be used (err: the mapping's errno):
 * into msg; false when it is simply not the caller's to read (the
 * listing leaves it out). */
static bool seg_trouble(const char *path, int err, char *msg, size_t cap)
{
	struct {
		uint64_t magic;
		uint32_t version, size;
	} h;
	struct stat st;
	bool bad = true;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0) {
		snprintf(msg, cap, "segment %s: %s", path, strerror(errno));
		return errno != EACCES && errno != EPERM;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		snprintf(msg, cap, "segment %s: not a regular file", path);
	else if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
		 h.magic != DIOSHIM_SEG_MAGIC)
		snprintf(msg, cap, "corrupt segment %s (not a dioshim "
			 "segment)", path);
	else if (h.version > DIOSHIM_LAYOUT_VERSION)
		snprintf(msg, cap, "segment %s is of layout version %u, "
			 "newer than this dioshim's %u: ask a newer dioshim",
			 path, h.version, DIOSHIM_LAYOUT_VERSION);
	else if (h.version != DIOSHIM_LAYOUT_VERSION)
		snprintf(msg, cap, "segment %s is of layout version %u, older "
			 "than this dioshim's %u", path, h.version,
			 DIOSHIM_LAYOUT_VERSION);
	else if (h.size != SEG_SIZE || (size_t)st.st_size != SEG_SIZE)
		snprintf(msg, cap, "corrupt segment %s (its size)", path);
	else if (err == EPERM || err == EACCES) {
		snprintf(msg, cap, "segment %s is not ours (owner %u, mode "
			 "%03o): left alone", path, (unsigned)st.st_uid,
			 (unsigned)(st.st_mode & 07777));
		bad = false;
	} else
		snprintf(msg, cap, "segment %s: %s", path, strerror(err));
	close(fd);
	return bad;
}

/*
 * Map the segment at path and check it names (dev, ino): into v (which
 * takes the segment's name), 0; else 1 with msg said (a complaint), -1
 * when there is none, -2 for one the listing leaves out (not the
 * caller's, being made).
 */
static int seg_read(const char *path, uint64_t dev, uint64_t ino,
		    struct view *v, char *msg, size_t cap, bool listing)
{
	struct dioshim_seg *seg = segment_map_path(path, false);

	if (!seg) {
		int err = errno;

		if (err == ENOENT)
			return -1;
		return seg_trouble(path, err, msg, cap) || !listing ? 1 : -2;
	}
	if (atomic_load(&seg->state) == DIOSHIM_SEG_INIT) {
		segment_unmap(seg);
		snprintf(msg, cap, "not served yet: its segment is being made");
		return listing ? -2 : 1;
	}
	if (!seg_header_ok(seg, dev, ino)) {
		segment_unmap(seg);
		snprintf(msg, cap, "corrupt segment %s (its header's words "
			 "are out of range or name another file)", path);
		return 1;
	}
	snprintf(v->seg, sizeof(v->seg), "%s", path);
	view_fill(v, seg);
	if (listing)
		view_where(v, seg);
	segment_unmap(seg);
	return 0;
}

/* FILE: its line, or one complaint. */
static void status_file(struct round *r, const char *file)
{
	char segpath[PATH_MAX], msg[PATH_MAX + 160];
	struct view *v;
	struct stat st;
	int rc;

	if (stat(file, &st)) {
		complain(r, file, "%s", strerror(errno));
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		complain(r, file, "not a regular file: never served");
		return;
	}
	if (segment_path_of(segpath, sizeof(segpath), st.st_dev, st.st_ino,
			    st.st_mode, st.st_gid, false)) {
		complain(r, file, "not served: its group's segment directory "
			 "is unusable");
		return;
	}
	v = view_new(r);
	if (!v) {
		complain(r, file, "%s", strerror(ENOMEM));
		return;
	}
	rc = seg_read(segpath, st.st_dev, st.st_ino, v, msg, sizeof(msg),
		      false);
	if (rc < 0)
		complain(r, file, "not served: no segment (size %lld)",
			 (long long)st.st_size);
	else if (rc > 0)
		complain(r, file, "%s", msg);
	if (rc)
		return;
	snprintf(v->name, sizeof(v->name), "%s", file);
	v->ksize = st.st_size;
	r->n++;
}

static void list_one(const char *path, uint64_t dev, uint64_t ino,
		     void *arg)
{
	char msg[PATH_MAX + 160];
	struct round *r = arg;
	struct view *v = view_new(r);
	int rc;

	if (!v)
		return;
	rc = seg_read(path, dev, ino, v, msg, sizeof(msg), true);
	if (rc > 0)
		complain(r, NULL, "%s", msg);
	if (!rc)
		r->n++;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct view *)a)->name,
		      ((const struct view *)b)->name);
}

/* Every segment the caller can read. */
static void status_all(struct round *r)
{
	struct stat st;

	if (stat(config.shm_dir, &st)) {
		complain(r, config.shm_dir, "%s", strerror(errno));
		return;
	}
	if (!segment_walk(list_one, r))
		complain(r, config.shm_dir, "%s", strerror(ENOMEM));
	qsort(r->v, (size_t)r->n, sizeof(*r->v), by_name);
}

static void print_line(const struct view *v)
{
	char ks[32], pids[VIEW_PIDS * 20 + 2] = "-", name[sizeof(v->name)];
	size_t at = 0;
	int i;

	/* One line a file, whatever bytes a name (or a corrupt segment's
	 * recorded path) holds. */
	for (i = 0; v->name[i]; i++)
		name[i] = (unsigned char)v->name[i] < 0x20 ||
				  v->name[i] == 0x7f ? '?' : v->name[i];
	name[i] = '\0';

	snprintf(ks, sizeof(ks), v->ksize < 0 ? "-" : "%lld", v->ksize);
	for (i = 0; i < v->npids && at < sizeof(pids) - 20; i++)
		at += (size_t)snprintf(pids + at, sizeof(pids) - at, "%s%d%s",
				       i ? "," : "", (int)v->pid[i],
				       v->alive[i] ? "" : "(gone)");
	printf("%s%s: eof %llu phys %llu tail %llu kernel-size %s "
	       "record %llu/%llu users %u procs %d inflight %lld writes %llu "
	       "bytes %llu appends %llu reserves %llu exact %llu "
	       "prefills %llu mode %s reserved %llu queued %llu pids %s\n",
	       name,
	       v->deleted ? " (deleted)" : v->lost ? " (not found)" : "",
	       (unsigned long long)v->eof, (unsigned long long)v->phys,
	       (unsigned long long)v->tail, ks,
	       (unsigned long long)v->rec_eof,
	       (unsigned long long)v->rec_phys, v->users, v->procs,
	       (long long)v->inflight, (unsigned long long)v->writes,
	       (unsigned long long)v->bytes, (unsigned long long)v->appends,
	       (unsigned long long)v->reserves, (unsigned long long)v->exact,
	       (unsigned long long)v->prefills,
	       v->exact_mode ? "exact" : "reserving",
	       (unsigned long long)(v->phys > v->eof ? v->phys - v->eof : 0),
	       (unsigned long long)v->queued, pids);
}

/* Length of the UTF-8 sequence at s, 0 if it is not one. */
static int utf8_len(const unsigned char *s)
{
	int n, i;

	if (s[0] < 0x80)
		return 1;
	n = s[0] >= 0xf0 && s[0] < 0xf5 ? 4 :
	    s[0] >= 0xe0		? 3 :
	    s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
	for (i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* A JSON string: a byte that is no UTF-8 is written as the code point
 * of its value (a name's bytes are not text). */
static void json_str(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	int n;

	putchar('"');
	while (*s) {
		n = utf8_len(s);
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if (*s < 0x20 || !n || *s == 0x7f)
			printf("\\u%04x", *s);
		else
			fwrite(s, 1, (size_t)n, stdout);
		s += n ? n : 1;
	}
	putchar('"');
}

static void print_json_view(const struct view *v)
{
	int i;

	printf("{\"path\":");
	json_str(v->name);
	printf(",\"deleted\":%s,\"found\":%s,\"segment\":",
	       v->deleted ? "true" : "false",
	       v->deleted || v->lost ? "false" : "true");
	json_str(v->seg);
	printf(",\"dev\":%llu,\"ino\":%llu,\"eof\":%llu,\"phys\":%llu,"
	       "\"tail\":%llu,\"reserved\":%llu,",
	       (unsigned long long)v->dev, (unsigned long long)v->ino,
	       (unsigned long long)v->eof, (unsigned long long)v->phys,
	       (unsigned long long)v->tail,
	       (unsigned long long)(v->phys > v->eof ? v->phys - v->eof : 0));
	if (v->ksize < 0)
		printf("\"kernel_size\":null,");
	else
		printf("\"kernel_size\":%lld,", v->ksize);
	printf("\"record_eof\":%llu,\"record_phys\":%llu,\"users\":%u,"
	       "\"procs\":%d,\"writers\":[",
	       (unsigned long long)v->rec_eof,
	       (unsigned long long)v->rec_phys, v->users, v->procs);
	for (i = 0; i < v->npids; i++)
		printf("%s{\"pid\":%d,\"alive\":%s}", i ? "," : "",
		       (int)v->pid[i], v->alive[i] ? "true" : "false");
	printf("],\"inflight\":%lld,\"queued\":%llu,\"writes\":%llu,"
	       "\"bytes\":%llu,\"appends\":%llu,\"reserves\":%llu,"
	       "\"exact\":%llu,\"prefills\":%llu,\"mode\":\"%s\"}",
	       (long long)v->inflight, (unsigned long long)v->queued,
	       (unsigned long long)v->writes, (unsigned long long)v->bytes,
	       (unsigned long long)v->appends,
	       (unsigned long long)v->reserves, (unsigned long long)v->exact,
	       (unsigned long long)v->prefills,
	       v->exact_mode ? "exact" : "reserving");
}

static void print_json(const struct round *r)
{
	int i;

	printf("{\"version\":\"%s\",\"layout\":%u,\"files\":[",
	       DIOSHIM_VERSION, DIOSHIM_LAYOUT_VERSION);
	for (i = 0; i < r->n; i++) {
		printf(i ? ",\n  " : "\n  ");
		print_json_view(&r->v[i]);
	}
	printf("],\"errors\":[");
	for (i = 0; i < r->nerr; i++) {
		printf(i ? ",\n  " : "\n  ");
		json_str(r->err[i]);
	}
	printf("]}\n");
}

/* One look at files (or every segment): printed; its exit status. */
static int status_round(char **files, bool json)
{
	struct round r = { .json = json };
	int i;

	if (*files)
		for (; *files; files++)
			status_file(&r, *files);
	else
		status_all(&r);
	if (json)
		print_json(&r);
	else
		for (i = 0; i < r.n; i++)
			print_line(&r.v[i]);
	fflush(stdout);
	for (i = 0; json && i < r.nerr; i++)
		free(r.err[i]);
	free(r.err);
	free(r.v);
	return r.nerr ? 1 : 0;
}

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	stop = 1;
}

/* -w: like watch(1), until SIGINT or SIGTERM. */
static int status_watch(char **files, bool json, double every)
{
	struct sigaction sa = { .sa_handler = on_stop };
	struct timespec nap = { (time_t)every,
				(long)((every - (double)(time_t)every) * 1e9) };
	bool tty = isatty(STDOUT_FILENO);
	int rc = 0;

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!stop) {
		struct timespec left = nap;
		time_t now = time(NULL);
		char when[64];

		if (tty)
			fputs("\033[H\033[2J", stdout);
		strftime(when, sizeof(when), "%F %T", localtime(&now));
		if (!json)
			printf("Every %gs: dioshim status%s  %s\n\n", every,
			       *files ? " FILE..." : "", when);
		rc = status_round(files, json);
		while (!stop && nanosleep(&left, &left) && errno == EINTR)
			;
	}
	return rc;
}

/* -w's operand: seconds, more than 0, at most a day. */
static bool parse_secs(const char *s, double *out)
{
	char *end;
	double d;

	if (!s || !*s)
		return false;
	errno = 0;
	d = strtod(s, &end);
	if (errno || *end || !isfinite(d) || d <= 0 || d > 86400)
		return false;
	*out = d;
	return true;
}

int status(char **argv)
{
	char **a, **ops;
	bool json = false, dashdash = false;
	double every = 0;
	int n = 0;

	for (a = argv; *a && strcmp(*a, "--"); a++)
		if (!strcmp(*a, "--help") || !strcmp(*a, "-h")) {
			printf(USAGE "\nThe shared state of each FILE being "
			       "written, or of every file served\nwhose "
			       "segment the caller can read: logical EOF, "
			       "kernel size, reserved\nbytes, mode, writers "
			       "and their pids, writes in flight, counters.\n"
			       "--json prints one JSON document; -w SECS "
			       "prints it again every SECS\nseconds until "
			       "interrupted.\n");
			return 0;
		}
	for (a = argv; *a; a++)
		n++;
	ops = calloc((size_t)n + 1, sizeof(*ops));
	if (!ops)
		return 1;
	for (n = 0, a = argv; *a; a++) {
		if (dashdash || (*a)[0] != '-' || !(*a)[1]) {
			ops[n++] = *a;
		} else if (!strcmp(*a, "--")) {
			dashdash = true;
		} else if (!strcmp(*a, "--json")) {
			json = true;
		} else if (!strcmp(*a, "-w") || !strcmp(*a, "--watch")) {
			if (!parse_secs(a[1], &every)) {
				fprintf(stderr, "dioshim status: %s wants a "
					"number of seconds above 0 (at most "
					"86400), not %s\n" USAGE, *a,
					a[1] ? a[1] : "nothing");
				free(ops);
				return 2;
			}
			a++;
		} else {
			fprintf(stderr, "dioshim status: unknown option %s\n"
				USAGE, *a);
			free(ops);
			return 2;
		}
	}
	config_load();
	n = every > 0 ? status_watch(ops, json, every) :
			status_round(ops, json);
	free(ops);
	return n;
}
