// SPDX-License-Identifier: MIT
/*
 * sigclose DIR ROUNDS [fork]: a signal handler closes a file while its
 * thread is inside a write (with "fork": inside fork(), whose handlers
 * hold the shim's fd table), and the number is reused at once for a
 * socket.
 *
 * Each round opens DIR/b (O_RDWR|O_DIRECT), then writes 4 KiB blocks to
 * DIR/a (O_DIRECT) while an interval timer fires every 200 us; the first
 * signal after that closes b's descriptor from the handler.  The thread
 * then makes a socket pair, which takes b's number, sends 4 KiB through the
 * other end and reads them back through that number: a read of a socket,
 * as the kernel sees it, whatever the number meant before.
 *
 * Prints "rounds=N reused=R bad=B": R rounds in which the socket got b's
 * number, B of them in which the read did not return the 4 KiB sent
 * (an fd table that still takes the number for b).  Exits 0 when B is 0
 * and R is not.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define BS 4096

static volatile sig_atomic_t armed, closed;
static volatile int victim = -1;

static void on_alarm(int sig)
{
	(void)sig;
	if (armed && !closed) {
		close(victim);
		closed = 1;
	}
}

int main(int argc, char **argv)
{
	struct itimerval it = { { 0, 200 }, { 0, 200 } };
	char a_path[4096], b_path[4096], *buf, *in;
	int rounds, r, reused = 0, bad = 0, a;
	int forking = argc == 4 && !strcmp(argv[3], "fork");

	if (argc < 3 || posix_memalign((void **)&buf, BS, BS) ||
	    posix_memalign((void **)&in, BS, BS))
		return 2;
	rounds = atoi(argv[2]);
	snprintf(a_path, sizeof(a_path), "%s/a", argv[1]);
	snprintf(b_path, sizeof(b_path), "%s/b", argv[1]);
	memset(buf, 'x', BS);
	a = open(a_path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
	if (a < 0) {
		perror(a_path);
		return 2;
	}
	signal(SIGALRM, on_alarm);
	setitimer(ITIMER_REAL, &it, NULL);
	for (r = 0; r < rounds; r++) {
		int b = open(b_path, O_RDWR | O_CREAT | O_DIRECT, 0644);
		int s[2], k;
		ssize_t got;

		if (b < 0) {
			perror(b_path);
			return 2;
		}
		victim = b;
		closed = 0;
		armed = 1;
		for (k = 0; !closed; k++) {
			if (forking) {
				pid_t kid = fork();

				if (kid == 0)
					_exit(0);
				if (kid > 0)
					waitpid(kid, NULL, 0);
				continue;
			}
			if (pwrite(a, buf, BS, (off_t)(k % 256) * BS) != BS &&
			    errno != EINTR) {
				perror("pwrite");
				return 2;
			}
		}
		armed = 0;
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, s))
			return 2;
		if (s[0] == b) {
			reused++;
			if (write(s[1], buf, BS) != BS)
				return 2;
			got = 0;
			while (got < BS) {
				ssize_t n = read(s[0], in + got, BS - got);

				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0)
					break;
				got += n;
			}
			if (got != BS || memcmp(in, buf, BS))
				bad++;
		}
		close(s[0]);
		close(s[1]);
	}
	it.it_value.tv_usec = it.it_interval.tv_usec = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	printf("rounds=%d reused=%d bad=%d\n", rounds, reused, bad);
	return bad || !reused ? 1 : 0;
}
