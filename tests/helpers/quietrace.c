// SPDX-License-Identifier: MIT
/*
 * quietrace DIR ROUNDS: a descriptor number closed and opened again for
 * another file by a signal handler while the main thread dups it.
 *
 * Each round opens DIR/a read-only, arms a timer of 1-200 us whose
 * handler (every other round: another thread, after a short spin)
 * closes that descriptor and opens DIR/b (O_WRONLY|O_APPEND), which takes
 * the same number, and dups the number in a loop until that is done.  Then a child opens DIR/b O_DIRECT|O_APPEND and appends
 * one 4 KiB record, and, while the child keeps the file open, the main
 * thread appends one through the handler's descriptor.  Under the shim
 * the descriptions are quiet (no segment when they are opened) and a dup
 * wakes one: a wake that lands on the number after the handler reused it
 * would give DIR/b's descriptor DIR/a's read-only, non-append books, and
 * the append would go where the kernel alone never puts it.
 *
 * The kernel alone: DIR/b grows by exactly 8 KiB a round.  Prints
 * "rounds=N size=S" and exits 0 when every round's size was right.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static char path_b[4096];
static volatile sig_atomic_t armed;
static volatile int victim = -1, reopened = -1;

static void on_alarm(int sig)
{
	int saved = errno;

	(void)sig;
	if (armed) {
		close(victim);
		reopened = open(path_b, O_WRONLY | O_APPEND);
		armed = 0;
	}
	errno = saved;
}

/* The same from another thread, on the other CPU: a spin of 0-400 loads,
 * then the close and the open. */
static volatile int spin_go;

static void *reopener(void *arg)
{
	(void)arg;
	for (;;) {
		int n;

		while (!spin_go)
			;
		for (n = rand() % 400; n > 0; n--)
			__asm__ volatile("" ::: "memory");
		on_alarm(0);
		spin_go = 0;
	}
	return NULL;
}

static long long raw_size(const char *p)
{
	struct statx stx;

	if (syscall(SYS_statx, AT_FDCWD, p, 0, STATX_SIZE, &stx))
		return -1;
	return (long long)stx.stx_size;
}

int main(int argc, char **argv)
{
	char path_a[4096], *rec;
	struct sigaction sa;
	long long want = 0, got;
	int rounds, r, bad = 0;

	if (argc != 3)
		return 2;
	rounds = atoi(argv[2]);
	snprintf(path_a, sizeof(path_a), "%s/a", argv[1]);
	snprintf(path_b, sizeof(path_b), "%s/b", argv[1]);
	if (posix_memalign((void **)&rec, 4096, 4096))
		return 2;
	memset(rec, 0x42, 4096);
	close(open(path_a, O_WRONLY | O_CREAT | O_TRUNC, 0644));
	close(open(path_b, O_WRONLY | O_CREAT | O_TRUNC, 0644));
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	srand(1);
	{
		pthread_t t;

		if (pthread_create(&t, NULL, reopener, NULL))
			return 2;
		pthread_detach(t);
	}
	for (r = 0; r < rounds && !bad; r++) {
		struct itimerval it = { { 0, 0 }, { 0, 1 + rand() % 200 } };
		int go[2], ready[2], status, fd;
		char c = 0;
		pid_t pid;

		victim = open(path_a, O_RDONLY);
		if (victim < 0 || pipe(go) || pipe(ready))
			return 2;
		armed = 1;
		if (r % 2)
			setitimer(ITIMER_REAL, &it, NULL);
		else
			spin_go = 1;
		while (armed) {
			int d = dup(victim);

			if (d >= 0)
				close(d);
		}
		fd = reopened;
		if (fd < 0)
			return 2;
		pid = fork();
		if (pid == 0) {
			int w = open(path_b, O_WRONLY | O_APPEND | O_DIRECT);

			if (w < 0 || write(w, rec, 4096) != 4096 ||
			    write(ready[1], &c, 1) != 1 ||
			    read(go[0], &c, 1) != 1)
				_exit(1);
			_exit(0);
		}
		if (pid < 0 || read(ready[0], &c, 1) != 1)
			return 2;
		if (write(fd, rec, 4096) != 4096) {
			printf("round %d: append failed: %s\n", r,
			       strerror(errno));
			bad++;
		}
		if (write(go[1], &c, 1) != 1 || waitpid(pid, &status, 0) != pid ||
		    !WIFEXITED(status) || WEXITSTATUS(status))
			return 2;
		close(fd);
		close(go[0]);
		close(go[1]);
		close(ready[0]);
		close(ready[1]);
		want += 8192;
		got = raw_size(path_b);
		if (got != want) {
			printf("round %d: %s holds %lld bytes, %lld were "
			       "appended\n", r, path_b, got, want);
			bad++;
		}
	}
	printf("rounds=%d size=%lld\n", r, raw_size(path_b));
	return bad ? 1 : 0;
}
