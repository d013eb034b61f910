// SPDX-License-Identifier: MIT
/*
 * Segments: created once per file and shared; another process attaches to
 * the same one; foreign, corrupt, truncated, symlinked or stale segments
 * are refused (the caller passes through); a dead process's slot is
 * reclaimed; the last detach trims the reserved tail and removes the
 * segment, never cutting data.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "reserve.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

static char seg_path[512];

static int data_file(const char *name, off_t size, struct file_id *id)
{
	char path[512];
	int fd = unit_file(name, size, path, sizeof(path));

	if (!file_identify(fd, id)) {
		fprintf(stderr, "file_identify failed on tmpfs\n");
		exit(T_FAIL);
	}
	segment_path(seg_path, sizeof(seg_path), id->dev, id->ino);
	return fd;
}

static bool exists(const char *p)
{
	struct stat st;

	return lstat(p, &st) == 0;
}

/* Plant a file at the segment's name: size bytes of a byte, mode, uid. */
static void plant(size_t size, int fill, mode_t mode, uid_t uid)
{
	char *buf = malloc(size);
	int fd;

	memset(buf, fill, size);
	unlink(seg_path);
	fd = open(seg_path, O_CREAT | O_EXCL | O_WRONLY, mode);
	CHECK(fd >= 0);
	CHECK(write(fd, buf, size) == (ssize_t)size);
	CHECK(fchmod(fd, mode) == 0);
	CHECK(fchown(fd, uid, (gid_t)-1) == 0);
	close(fd);
	free(buf);
}

static void test_create_share_detach(void)
{
	struct file_id id;
	struct shim_file *f, *g;
	struct stat st;
	int fd = data_file("a", 8192, &id);

	f = segment_attach(fd, &id, true);
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(exists(seg_path));
	CHECK(stat(seg_path, &st) == 0 && (st.st_mode & 0777) == 0600);
	CHECK_EQ(atomic_load(&f->seg->eof), 8192);
	CHECK_EQ(atomic_load(&f->seg->phys), 8192);
	CHECK_EQ(atomic_load(&f->seg->tail), 8192);
	CHECK_EQ(atomic_load(&f->seg->users), 1);
	CHECK(hint_maybe_live());

	/* A second fd of the same file in this process shares it. */
	g = segment_attach(fd, &id, false);
	CHECK(g == f);
	segment_put(g, fd);
	CHECK(exists(seg_path));

	/* A child is a second user; when it dies without detaching, the
	 * parent's detach still finds itself last. */
	pid_t kid = unit_fork();

	if (kid == 0) {
		_exit(f->slot >= 0 &&
				      atomic_load(&f->seg->users) == 2
			      ? 0
			      : 1);
	}
	int status;

	waitpid(kid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_EQ(atomic_load(&f->seg->users), 2);

	/* Reserve a tail: the kernel size runs ahead of eof. */
	CHECK(fallocate(fd, 0, 8192, 1 << 20) == 0);
	atomic_store(&f->seg->phys, 8192 + (1 << 20));
	segment_put(f, fd);
	CHECK(!exists(seg_path));
	CHECK(fstat(fd, &st) == 0 && st.st_size == 8192);
	close(fd);
}

/* The give-back's view of a segment (segment_peek): read, not mapped;
 * only a whole segment of this layout is one. */
static void test_peek(void)
{
	struct file_id id;
	struct shim_file *f;
	struct seg_peek p;
	int fd = data_file("peek", 8192, &id), i;
	bool me = false;

	f = segment_attach(fd, &id, true);
	CHECK(f != NULL);
	if (!f)
		return;
	atomic_store(&f->seg->phys, 65536);
	CHECK(segment_peek(seg_path, &p));
	CHECK_EQ(p.dev, id.dev);
	CHECK_EQ(p.ino, id.ino);
	CHECK_EQ(p.eof, 8192);
	CHECK_EQ(p.phys, 65536);
	CHECK(strstr(p.path, "peek") != NULL);
	for (i = 0; i < p.npids; i++)
		me |= p.pids[i] == getpid();
	CHECK(me);
	atomic_store(&f->seg->phys, 8192);
	segment_put(f, fd);
	close(fd);

	/* Cut short (resized by a member of its group), or not a segment:
	 * refused, and nothing faults. */
	plant(4096, 0, 0600, 0);
	CHECK(!segment_peek(seg_path, &p));
	plant(sizeof(struct dioshim_seg), 0x5a, 0600, 0);
	CHECK(!segment_peek(seg_path, &p));
	unlink(seg_path);
}

static void test_trim_keeps_data(void)
{
	struct file_id id;
	struct shim_file *f;
	struct stat st;
	char *buf = NULL;
	int fd = data_file("b", 4096, &id);

	f = segment_attach(fd, &id, true);
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK(fallocate(fd, 0, 4096, 1 << 20) == 0);
	atomic_store(&f->seg->phys, 4096 + (1 << 20));
	/* A block written past eof that eof never covered (a writer that
	 * died between its write and moving eof): the trim must keep it. */
	CHECK(posix_memalign((void **)&buf, 4096, 4096) == 0);
	memset(buf, 'x', 4096);
	CHECK(pwrite(fd, buf, 4096, 3 * 4096) == 4096);
	segment_put(f, fd);
	CHECK(fstat(fd, &st) == 0);
	CHECK_EQ(st.st_size, 4 * 4096);
	close(fd);
	free(buf);
}

static void test_refused(void)
{
	struct file_id id;
	struct shim_file *f;
	struct dioshim_seg *seg;
	size_t sz = sizeof(struct dioshim_seg);
	int fd = data_file("c", 4096, &id), sfd;

	/* Another user's segment. */
	plant(sz, 0, 0600, 65534);
	CHECK(segment_attach(fd, &id, true) == NULL);
	/* Ours, but group/world accessible. */
	plant(sz, 0, 0644, getuid());
	CHECK(segment_attach(fd, &id, true) == NULL);
	/* Garbage. */
	plant(sz, 0x5a, 0600, getuid());
	CHECK(segment_attach(fd, &id, true) == NULL);
	/* Truncated. */
	plant(100, 0, 0600, getuid());
	CHECK(segment_attach(fd, &id, true) == NULL);
	/* A symlink at the name, pointing at a valid-looking file. */
	unlink(seg_path);
	CHECK(symlink("/dev/null", seg_path) == 0);
	CHECK(segment_attach(fd, &id, true) == NULL);
	unlink(seg_path);

	/* A real segment, then corrupted word by word. */
	f = segment_attach(fd, &id, true);
	CHECK(f != NULL);
	if (!f)
		return;
	sfd = open(seg_path, O_RDWR);
	seg = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
	close(sfd);
	segment_put(f, fd); /* removes it; keep our mapping for the copy */
	{
		struct dioshim_seg *copy = malloc(sz);
		struct {
			size_t off;
			uint64_t val;
			int width;
		} bad[] = {
			{ offsetof(struct dioshim_seg, magic), 1, 8 },
			{ offsetof(struct dioshim_seg, version), 99, 4 },
			{ offsetof(struct dioshim_seg, size), 12, 4 },
			{ offsetof(struct dioshim_seg, ino), 1, 8 },
			{ offsetof(struct dioshim_seg, blksize), 3000, 4 },
			{ offsetof(struct dioshim_seg, state), 7, 4 },
			{ offsetof(struct dioshim_seg, eof), 1ull << 40, 8 },
			{ offsetof(struct dioshim_seg, phys), 1ull << 63, 8 },
			{ offsetof(struct dioshim_seg, users), 100000, 4 },
		};
		unsigned i;

		memcpy(copy, seg, sz);
		atomic_store(&copy->state, DIOSHIM_SEG_READY);
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char *bytes = malloc(sz);
			int pfd;

			memcpy(bytes, copy, sz);
			memcpy(bytes + bad[i].off, &bad[i].val,
			       (size_t)bad[i].width);
			unlink(seg_path);
			pfd = open(seg_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
			CHECK(pfd >= 0 && write(pfd, bytes, sz) == (ssize_t)sz);
			close(pfd);
			f = segment_attach(fd, &id, true);
			if (f) {
				fprintf(stderr, "corruption %u accepted\n", i);
				unit_failures++;
				segment_put(f, -1);
			}
			free(bytes);
		}
		free(copy);
	}
	munmap(seg, sz);
	unlink(seg_path);
	close(fd);
}

static void test_stale_birth(void)
{
	struct file_id id, old;
	struct shim_file *f;
	int fd = data_file("d", 4096, &id);

	/* A segment left by an earlier file with the same inode number, whose
	 * users are all gone: it is replaced. */
	old = id;
	old.birth_sec -= 1000;
	f = segment_attach(fd, &old, true);
	CHECK(f != NULL);
	if (!f)
		return;
	/* Pretend its owner (us) died: free our slot by hand. */
	atomic_store(&f->seg->slot[f->slot].owner.pid_start, 4194303);
	f->seg->slot[f->slot].owner.pidns = owner_self()->pidns;
	{
		struct shim_file *g = segment_attach(fd, &id, true);

		CHECK(g != NULL && g != f);
		if (g)
			CHECK_EQ(g->seg->birth_sec, id.birth_sec);
		/* While the new file's segment is in use, the stale one's
		 * name is taken by the new one. */
		if (g)
			segment_put(g, fd);
	}
	close(fd);
}

/*
 * More processes than the first page of slots — hundreds, as a database's
 * backends — all get slots of their own; the table grows by whole pages;
 * once they are gone, the next user reclaims every slot.  A process whose
 * pid namespace is not ours is judged by its lifeline: alive while it
 * runs, dead once killed.
 */
#define MANY 300
static void test_many_processes(void)
{
	struct file_id id;
	struct shim_file *f;
	pid_t kids[MANY];
	int fd = data_file("many", 4096, &id), go[2], ready[2], i, n = 0;
	char c;

	CHECK(pipe(go) == 0 && pipe(ready) == 0);
	for (i = 0; i < MANY; i++) {
		kids[i] = unit_fork();
		if (kids[i] == 0) {
			close(go[1]);
			close(ready[0]);
			f = segment_attach(fd, &id, true);
			c = f && f->slot >= 0 ? 'y' : 'n';
			if (write(ready[1], &c, 1) != 1)
				_exit(2);
			/* Wait to be told, or killed; never detach. */
			(void)read(go[0], &c, 1);
			_exit(0);
		}
	}
	for (i = 0; i < MANY; i++)
		if (read(ready[0], &c, 1) == 1 && c == 'y')
			n++;
	CHECK_EQ(n, MANY);
	f = segment_attach(fd, &id, true);
	CHECK(f != NULL);
	if (f) {
		struct dioshim_slot *s = NULL;
		int j;

		CHECK_EQ(atomic_load(&f->seg->users), MANY + 1);
		CHECK(seg_slots(f->seg) >= MANY + 1);
		CHECK(seg_slots(f->seg) <= MANY + 1 + 4096 / 320);
		/* A child pretends to live in another pid namespace: its
		 * lifeline says it is alive, then, once killed, dead. */
		for (j = 0; j < seg_slots(f->seg) && !s; j++)
			if ((pid_t)(atomic_load(&f->seg->slot[j].owner.pid_start) &
				    DIOSHIM_OWNER_PID_MASK) == kids[0])
				s = &f->seg->slot[j];
		CHECK(s != NULL);
		if (s) {
			uint64_t o = atomic_load(&s->owner.pid_start);

			s->owner.pidns ^= 0x5a5a5a5a; /* another namespace */
			CHECK(owner_alive_in(f->seg->hint_key, o,
					     s->owner.pidns));
			kill(kids[0], SIGKILL);
			waitpid(kids[0], NULL, 0);
			kids[0] = 0;
			CHECK(!owner_alive_in(f->seg->hint_key, o,
					      s->owner.pidns));
		}
	}
	/* Every child goes, without detaching (as kill -9 would). */
	close(go[1]);
	for (i = 0; i < MANY; i++)
		if (kids[i] > 0)
			waitpid(kids[i], NULL, 0);
	if (f) {
		segment_put(f, fd);
		f = segment_attach(fd, &id, true);
		CHECK(f != NULL);
		if (f) {
			CHECK_EQ(atomic_load(&f->seg->users), 1);
			segment_put(f, fd);
		}
	}
	CHECK(!exists(seg_path));
	close(go[0]);
	close(ready[0]);
	close(ready[1]);
	close(fd);
}

int main(void)
{
	unit_setup();
	if (getuid() != 0)
		SKIP("needs root to plant segments owned by another user");
	test_create_share_detach();
	test_peek();
	test_trim_keeps_data();
	test_refused();
	test_stale_birth();
	test_many_processes();
	return unit_result();
}
