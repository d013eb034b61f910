// SPDX-License-Identifier: MIT
/*
 * The wrappers.  Each decides one thing — is this call the shim's? — and
 * hands it to a mechanism (io.c, fdtable.c); everything else goes to the
 * real function untouched.  A wrapper entered while this thread is already
 * inside the shim (a signal handler) passes its call through.
 *
 * Only the interposed names are exported (-fvisibility=hidden elsewhere).
 * The library is not built with _FILE_OFFSET_BITS=64: open and pread would
 * then be exported as open64 and pread64, and the plain names missed.
 */
#define _GNU_SOURCE
#include "async.h"
#include "config.h"
#include "fdtable.h"
#include "io.h"
#include "log.h"
#include "real.h"
#include "segment.h"
#include "sys.h"
#include "umem.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

#ifndef __O_TMPFILE
#define __O_TMPFILE (O_TMPFILE & ~O_DIRECTORY)
#endif
#define OPEN_NEEDS_MODE(fl) \
	(((fl) & O_CREAT) || ((fl) & __O_TMPFILE) == __O_TMPFILE)

/* ---- start-up and shut-down ------------------------------------------- */

static int lib_ready;
static int lib_exiting;
static pid_t exiting_tid; /* the thread that leaves the files, at exit */
static pid_t exit_tid;    /* the thread that called exit first */
static int lib_detached;  /* that thread has left the files */
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

/* fork holds the table's lock from prepare to parent/child: a signal
 * handler's close meanwhile must not wait for it (forget_fd). */
static __thread int fork_busy __attribute__((tls_model("initial-exec")));

static void atfork_prepare(void)
{
	fork_busy = io_busy;
	io_busy = 1;
	fdtable_atfork_prepare();
}

static void atfork_parent(void)
{
	fdtable_atfork_parent();
	io_busy = fork_busy;
}

/* Our pid, as of the load or the last fork: a vfork child sees its
 * parent's here (and computes nothing of its own into our memory). */
static pid_t lib_pid;

static void atfork_child(void)
{
	umem_atfork_child();
	__atomic_store_n(&lib_pid, (pid_t)sys_call(SYS_getpid),
			 __ATOMIC_RELAXED);
	async_atfork_child();
	fdtable_atfork_child();
	async_atfork_child_unpin();
	/* A child forked while another thread exits (an atexit handler's
	 * fork) has its own exit to make. */
	__atomic_store_n(&exit_tid, 0, __ATOMIC_RELAXED);
	io_busy = fork_busy;
}

static void lib_init_once(void)
{
	/* May run inside the first wrapper called: that call's errno is the
	 * application's. */
	int saved = errno;

	__atomic_store_n(&lib_pid, (pid_t)sys_call(SYS_getpid),
			 __ATOMIC_RELAXED);
	real_resolve();
	config_load();
	if (!config.disable)
		pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
	__atomic_store_n(&lib_ready, 1, __ATOMIC_RELEASE);
	errno = saved;
}

static inline void lib_ensure(void)
{
	if (__builtin_expect(!__atomic_load_n(&lib_ready, __ATOMIC_ACQUIRE), 0))
		pthread_once(&lib_once, lib_init_once);
}

/*
 * vfork.  The child runs in our memory until it execs or exits: any
 * bookkeeping it did — a close releasing our slot, the last-user trim, an
 * open filling our fd table with its numbers — would be done to us.  The
 * wrapper notes that a vfork happened and jumps to the real one (a vfork
 * wrapper cannot return through a frame of its own: the child would
 * clobber it).  From then on, the calls that keep books compare the
 * caller's pid with ours: a system call, paid only by processes that
 * vfork.  posix_spawn's child makes no call the shim sees.
 */
int dioshim_vforked __attribute__((visibility("hidden"), used));

#if defined(__x86_64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, @function\n"
	"vfork:\n"
	"\tmovl $1, dioshim_vforked(%rip)\n"
	"\tjmp __vfork@PLT\n"
	".size vfork, .-vfork\n");
#elif defined(__aarch64__)
__asm__(".text\n"
	".globl vfork\n"
	".type vfork, %function\n"
	"vfork:\n"
	"\tadrp x16, dioshim_vforked\n"
	"\tmov w17, #1\n"
	"\tstr w17, [x16, :lo12:dioshim_vforked]\n"
	"\tb __vfork\n"
	".size vfork, .-vfork\n");
#endif


/*
 * _Fork (glibc 2.34): a fork that runs no fork handlers, so the child
 * keeps its parent's books (the fd table, the slots, the pages umem knows
 * readable, MADV_DONTFORK ones included).  It is meant to exec or exit at
 * once, calling only what is async-signal-safe; the shim treats it as a
 * vfork child: every call goes to the kernel as it is.
 */
EXPORT pid_t _Fork(void)
{
	pid_t pid;

	lib_ensure();
	if (!real__Fork) {
		errno = ENOSYS;
		return -1;
	}
	pid = real__Fork();
	if (pid == 0)
		__atomic_store_n(&dioshim_vforked, 1, __ATOMIC_RELAXED);
	return pid;
}

static __attribute__((noinline)) bool vfork_child_slow(void)
{
	pid_t me = __atomic_load_n(&lib_pid, __ATOMIC_RELAXED);

	return me && (pid_t)sys_call(SYS_getpid) != me;
}

/* Whether this is a vfork child running in its parent's memory. */
static inline bool in_vfork_child(void)
{
	return __builtin_expect(
		       __atomic_load_n(&dioshim_vforked, __ATOMIC_RELAXED), 0) &&
	       vfork_child_slow();
}

/* Whether wrappers act at all right now. */
static inline bool shim_on(void)
{
	lib_ensure();
	return !config.disable && !io_busy &&
	       !__atomic_load_n(&lib_exiting, __ATOMIC_RELAXED) &&
	       !in_vfork_child();
}

static void lib_quick_exit(void);

__attribute__((constructor)) static void lib_constructor(void)
{
	lib_ensure();
	if (!config.disable) {
		segment_reclaim_self();
		at_quick_exit(lib_quick_exit);
	}
}

/*
 * Another thread ends the process (exit_claim): wait while it leaves our
 * files, a bounded job, and, when starting (the exit's atexit handlers
 * run first), a second for it to begin.  Then go on: with the files left
 * an exit_group of ours cuts nothing short, and a first thread that has
 * not begun in a second may be waiting for this very one (an atexit
 * handler that joins it), as glibc 2.36 lets it.
 */
static bool detach_wait(bool starting)
{
	static const struct timespec nap = { 0, 1000000 };
	int waited = 0;

	while (!__atomic_load_n(&lib_detached, __ATOMIC_ACQUIRE) &&
	       (__atomic_load_n(&exiting_tid, __ATOMIC_ACQUIRE) ||
		(starting && waited++ < 1000)))
		nanosleep(&nap, NULL);
	return __atomic_load_n(&lib_detached, __ATOMIC_ACQUIRE);
}

/* A process ends without closing its files: detach from every segment so
 * that the last one out trims the reserved tail (fio's jobs end in _exit). */
static void lib_detach_all(void)
{
	int saved = errno;
	pid_t none = 0, self = sys_gettid();

	/* A vfork child shares our memory: its _exit must not detach the
	 * parent, nor even mark it exiting for a moment (its threads would
	 * pass their appends through).  It is the only caller whose pid is
	 * not ours. */
	if (config.disable || io_busy || vfork_child_slow())
		return;
	/* One thread leaves the files.  Another that ends the process
	 * meanwhile (two threads failing at once, each calling _exit) waits
	 * until it has left them rather than end the process under it, half
	 * way through its cuts; the first thread coming back here (exit's
	 * _exit after the destructor, a signal handler) goes on. */
	if (!__atomic_compare_exchange_n(&exiting_tid, &none, self, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		if (none != self)
			detach_wait(false);
		return;
	}
	/* From here the other threads' calls wait (exec_wait). */
	__atomic_store_n(&lib_exiting, 1, __ATOMIC_SEQ_CST);
	io_busy = 1;
	async_drain_all(true);
	fdtable_release_all();
	io_busy = 0;
	__atomic_store_n(&lib_detached, 1, __ATOMIC_RELEASE);
	errno = saved;
}

__attribute__((destructor)) static void lib_destructor(void)
{
	lib_detach_all();
}

EXPORT void _exit(int status)
{
	lib_ensure();
	lib_detach_all();
	real__exit(status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	lib_ensure();
	lib_detach_all();
	real__Exit(status);
	__builtin_unreachable();
}

/*
 * exit is not thread-safe in glibc 2.36: of two threads calling it at
 * once, the one that finds the handlers taken ends the process at once,
 * under the other's destructors — ours among them, half way through the
 * cuts of the reserved tails.  The first caller goes on; a later one
 * waits until the first has left the files (detach_wait).  The paths
 * that call exit inside libc are claimed at their start too: main's
 * return, and the err family.  (error() and argp's exits are not seen.)
 */
static void exit_claim(void)
{
	pid_t owner = 0, self;

	lib_ensure();
	if (config.disable || vfork_child_slow())
		return;
	self = sys_gettid();
	if (__atomic_compare_exchange_n(&exit_tid, &owner, self, false,
					__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST) ||
	    owner == self)
		return;
	/* The owner has not begun in a second: one waiter takes its place,
	 * the others wait for that one in turn. */
	while (!detach_wait(true))
		if (__atomic_compare_exchange_n(&exit_tid, &owner, self, false,
						__ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST))
			return;
}

EXPORT void exit(int status)
{
	exit_claim();
	real_exit(status);
	__builtin_unreachable();
}

/* quick_exit runs no destructor: ours runs as its last handler. */
EXPORT void quick_exit(int status)
{
	exit_claim();
	real_quick_exit(status);
	__builtin_unreachable();
}

static void lib_quick_exit(void)
{
	lib_detach_all();
}

EXPORT void verr(int status, const char *fmt, va_list ap)
{
	exit_claim();
	real_verr(status, fmt, ap);
	__builtin_unreachable();
}

EXPORT void verrx(int status, const char *fmt, va_list ap)
{
	exit_claim();
	real_verrx(status, fmt, ap);
	__builtin_unreachable();
}

EXPORT void err(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	exit_claim();
	real_verr(status, fmt, ap);
	__builtin_unreachable();
}

EXPORT void errx(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	exit_claim();
	real_verrx(status, fmt, ap);
	__builtin_unreachable();
}

/* The program's main, whose return is an exit. */
static int (*app_main)(int, char **, char **);

static int shim_main(int argc, char **argv, char **envp)
{
	int ret = app_main(argc, argv, envp);

	exit_claim();
	return ret;
}

EXPORT int __libc_start_main(int (*main)(int, char **, char **), int argc,
			     char **argv, void (*init)(void),
			     void (*fini)(void), void (*rtld_fini)(void),
			     void *stack_end)
{
	lib_ensure();
	app_main = main;
	return real___libc_start_main(shim_main, argc, argv, init, fini,
				      rtld_fini, stack_end);
}

/* ---- exec ---------------------------------------------------------------- */

/*
 * The new image is another program, maybe not under the shim (a cleared
 * LD_PRELOAD, a static binary): it keeps our descriptors but none of our
 * books, so every file is left first as an ending process leaves it — the
 * last user cuts the reserved tail and removes the record — and the new
 * image, if shimmed, attaches again on first use.  If the exec fails,
 * the files are attached again.  execl and friends build an argv and come
 * here, since glibc's call its internal execve.
 */
static bool exec_prepare(void)
{
	int saved = errno, cancel;

	if (!shim_on())
		return false;
	/* Holding the fd table and the file list through waits: no
	 * cancellation point may end this thread here. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	/* seq_cst: a writer announces itself in flight, then reads this
	 * (inflight_enter_fd); the release below reads the counts after. */
	__atomic_store_n(&segment_exec_pending, 1, __ATOMIC_SEQ_CST);
	io_busy = 1;
	async_drain_all(false);
	fdtable_exec_prepare();
	io_busy = 0;
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
	return true;
}

static void exec_failed(bool prepared)
{
	int saved = errno, cancel;

	if (!prepared)
		return;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	io_busy = 1;
	fdtable_exec_failed();
	io_busy = 0;
	__atomic_store_n(&segment_exec_pending, 0, __ATOMIC_RELEASE);
	pthread_setcancelstate(cancel, NULL);
	errno = saved;
}

#define EXEC_WRAP(call)                         \
	({                                      \
		bool prepared_ = exec_prepare(); \
		int rc_ = call;                 \
		exec_failed(prepared_);         \
		rc_;                            \
	})

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	return EXEC_WRAP(real_execve(path, argv, envp));
}

EXPORT int execv(const char *path, char *const argv[])
{
	return EXEC_WRAP(real_execv(path, argv));
}

EXPORT int execvp(const char *file, char *const argv[])
{
	return EXEC_WRAP(real_execvp(file, argv));
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	return EXEC_WRAP(real_execvpe(file, argv, envp));
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	return EXEC_WRAP(real_fexecve(fd, argv, envp));
}

EXPORT int execveat(int dirfd, const char *path, char *const argv[],
		    char *const envp[], int flags)
{
	return EXEC_WRAP(real_execveat(dirfd, path, argv, envp, flags));
}

/* The argument list of execl*: arg0 and what follows up to NULL, in an
 * array on the stack (as glibc builds it). */
#define EXECL_ARGV(argv, arg0, last_fixed)                               \
	size_t argc_ = 1;                                                \
	va_list ap_;                                                     \
	va_start(ap_, last_fixed);                                       \
	while (va_arg(ap_, const char *))                                \
		argc_++;                                                 \
	va_end(ap_);                                                     \
	char *argv[argc_ + 1];                                           \
	argv[0] = (char *)(arg0);                                        \
	va_start(ap_, last_fixed);                                       \
	for (size_t i_ = 1; i_ <= argc_; i_++)                           \
		argv[i_] = va_arg(ap_, char *);                          \
	va_end(ap_)

EXPORT int execl(const char *path, const char *arg, ...)
{
	EXECL_ARGV(argv, arg, arg);
	return execv(path, argv);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
	EXECL_ARGV(argv, arg, arg);
	return execvp(file, argv);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
	char *const *envp;

	EXECL_ARGV(argv, arg, arg);
	/* The environment follows the NULL that ends the arguments. */
	va_start(ap_, arg);
	while (va_arg(ap_, const char *))
		;
	envp = va_arg(ap_, char *const *);
	va_end(ap_);
	return execve(path, argv, envp);
}

static __attribute__((noinline)) struct ofd *served_slow(int fd)
{
	struct ofd *o;
	int saved = errno, busy;

	/* A vfork child writes through the parent's descriptors, with the
	 * parent's slot (the parent is stopped): an fd already attached is
	 * served; adopting one would put the child's number in our table. */
	if (in_vfork_child()) {
		struct shim_file *f;

		o = fdtable_peek(fd);
		if (!o || o == OFD_PASS)
			return NULL;
		f = atomic_load_explicit(&o->file, memory_order_acquire);
		return f && segment_member_serves(f) ? o : NULL;
	}
	/* Restored, not cleared: a signal handler's call must leave the
	 * interrupted shim code marked busy. */
	busy = io_busy;
	io_busy = 1;
	o = fdtable_resolve(fd);
	io_busy = busy;
	errno = saved;
	return o;
}

/* The ofd whose rules apply to fd, or NULL to pass through.  The calls
 * the shim does not serve — most calls of most programs — cost the loads
 * of shim_on() and of the fd's entry. */
static inline struct ofd *served(int fd)
{
	if (!shim_on() || fdtable_surely_pass(fd))
		return NULL;
	return served_slow(fd);
}

/*
 * served() for reads, writes and seeks, which must keep the shim's rules
 * even in a signal handler that interrupted this thread inside the shim
 * (an append passed through would land past the reserved tail and be cut
 * with it).  Then only an fd already attached is served, *reentrant says
 * so, and the call must take no lock.
 */
static __attribute__((noinline)) struct ofd *served_reentrant(int fd,
								bool *reentrant)
{
	struct ofd *o = fdtable_peek(fd);
	struct shim_file *f;

	if (!o || o == OFD_PASS)
		return NULL;
	f = atomic_load_explicit(&o->file, memory_order_acquire);
	if (!f || !segment_member_serves(f))
		return NULL;
	*reentrant = true;
	return o;
}

/* Another thread is leaving our files for an exec: an I/O call waits
 * until it is done — the exec then ends this thread, or failed and the
 * files are ours again — rather than pass through beside a reservation.
 * Another thread is leaving them at exit: the call waits for the end of
 * the process (exit_group ends this thread), rather than pass through
 * and see, or write past, a reserved tail about to be cut. */
static __attribute__((noinline)) bool exec_wait(void)
{
	segment_exec_wait();
	if (__atomic_load_n(&lib_exiting, __ATOMIC_RELAXED) &&
	    !config.disable &&
	    sys_gettid() != __atomic_load_n(&exiting_tid, __ATOMIC_RELAXED))
		sys_wait_for_the_end();
	return !config.disable && !__atomic_load_n(&lib_exiting,
						  __ATOMIC_RELAXED);
}

/*
 * The reads' and writes' first look: fd is surely the kernel's alone, as
 * every branch of served_io would find too — re-entrant (nothing
 * attached), exiting, disabled or in a vfork child.  Not while another
 * thread leaves our files for an exec: the hint may then say no segment
 * for one that comes back if the exec fails (exec_wait).  True only for
 * an entry the shim made, so the real functions are resolved.
 */
static inline __attribute__((always_inline)) bool io_surely_pass(int fd,
							  bool write)
{
	/* A number past the table's reach goes the long way: the shim may
	 * not be set up yet (a call before its constructor), and only an
	 * entry made since says so. */
	return (unsigned)fd < FDT_MAX &&
	       !__atomic_load_n(&segment_exec_pending, __ATOMIC_RELAXED) &&
	       (write ? fdtable_quiet(fd) : fdtable_surely_pass(fd));
}

static inline struct ofd *served_io(int fd, bool *reentrant)
{
	*reentrant = false;
	if (io_surely_pass(fd, false))
		return NULL;
	lib_ensure();
	if (__builtin_expect(config.disable |
				     __atomic_load_n(&lib_exiting,
						     __ATOMIC_RELAXED) |
				     __atomic_load_n(&segment_exec_pending,
						     __ATOMIC_RELAXED),
			     0) &&
	    (io_busy || !exec_wait()))
		return NULL;
	if (__builtin_expect(io_busy, 0))
		return served_reentrant(fd, reentrant);
	return served_slow(fd);
}

struct ofd *shim_served(int fd)
{
	/* Called from inside the shim (io_busy set): no re-entry check. */
	if (fdtable_surely_pass(fd))
		return NULL;
	return fdtable_resolve(fd);
}

bool shim_active(void)
{
	/* As served_io: not beside a thread leaving the files at exit
	 * (a submission passed through now would write in the reserved
	 * tail about to be cut, and be cut with it). */
	if (__builtin_expect(__atomic_load_n(&lib_exiting, __ATOMIC_RELAXED),
			     0) &&
	    !io_busy)
		exec_wait();
	return shim_on();
}

bool shim_nested(void)
{
	lib_ensure();
	return io_busy && !config.disable &&
	       !__atomic_load_n(&lib_exiting, __ATOMIC_RELAXED) &&
	       !in_vfork_child();
}

/* Run table bookkeeping with the shim marked busy and errno kept. */
#define BOOKKEEP(stmt)                          \
	do {                                    \
		if (shim_on()) {                \
			int saved_ = errno;     \
			int busy_ = io_busy;    \
			io_busy = 1;            \
			stmt;                   \
			io_busy = busy_;        \
			errno = saved_;         \
		}                               \
	} while (0)

/*
 * Before the shim's close of a file, or a size it answers by path:
 * completions the program consumed from a ring itself (QEMU reads the aio
 * ring; liburing's peek is inline) are applied first, so that the last
 * close finds no write in flight and cuts the reserved tail as it leaves.
 * Outside BOOKKEEP, which makes the shim busy and the settle a no-op.
 */
static void rings_settle(void)
{
	if (shim_on())
		async_settle();
}

/*
 * A descriptor about to go away (close, dup2 over it).  From a signal
 * handler that interrupted this thread inside the shim, where the table's
 * lock may be held: its entry goes without the lock, lest the number,
 * reused, be taken for the file.
 */
static void forget_fd(int fd)
{
	/* Most closes: nothing is kept for fd (not even in a signal
	 * handler's), unless this is a vfork child, whose descriptors are
	 * not the ones our table names. */
	if (!in_vfork_child() && fdtable_forget_light(fd))
		return;
	if (shim_on()) {
		async_settle();
		BOOKKEEP(fdtable_close(fd));
	}
	else if (io_busy && !config.disable && !in_vfork_child() &&
		 !__atomic_load_n(&lib_exiting, __ATOMIC_RELAXED))
		fdtable_close_reentrant(fd);
}

/* ---- open --------------------------------------------------------------- */

static int open_common(int dirfd, const char *path, int flags, mode_t mode)
{
	int fd, busy;

	if (!shim_on())
		return real_openat(dirfd, path, flags, mode);
	busy = io_busy;
	io_busy = 1;
	fd = io_open(dirfd, path, flags, mode);
	io_busy = busy;
	/* A file mapped here, emptied (umem.c). */
	if (fd >= 0 && (flags & O_TRUNC))
		umem_changed();
	return fd;
}

#define OPEN_MODE(flags, last)                  \
	({                                      \
		mode_t m_ = 0;                  \
		if (OPEN_NEEDS_MODE(flags)) {   \
			va_list ap_;            \
			va_start(ap_, last);    \
			m_ = (mode_t)va_arg(ap_, int); \
			va_end(ap_);            \
		}                               \
		m_;                             \
	})

EXPORT int open(const char *path, int flags, ...)
{
	return open_common(AT_FDCWD, path, flags, OPEN_MODE(flags, flags));
}

EXPORT int open64(const char *path, int flags, ...)
{
	return open_common(AT_FDCWD, path, flags, OPEN_MODE(flags, flags));
}

EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	return open_common(dirfd, path, flags, OPEN_MODE(flags, flags));
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	return open_common(dirfd, path, flags, OPEN_MODE(flags, flags));
}

EXPORT int creat(const char *path, mode_t mode)
{
	return open_common(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

EXPORT int creat64(const char *path, mode_t mode)
{
	return open_common(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* The fortified forms: a missing mode is the real function's to report. */
EXPORT int __open_2(const char *path, int flags)
{
	lib_ensure();
	if (OPEN_NEEDS_MODE(flags))
		return real___open_2(path, flags);
	return open_common(AT_FDCWD, path, flags, 0);
}

EXPORT int __open64_2(const char *path, int flags)
{
	lib_ensure();
	if (OPEN_NEEDS_MODE(flags))
		return real___open64_2(path, flags);
	return open_common(AT_FDCWD, path, flags, 0);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	lib_ensure();
	if (OPEN_NEEDS_MODE(flags))
		return real___openat_2(dirfd, path, flags);
	return open_common(dirfd, path, flags, 0);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	lib_ensure();
	if (OPEN_NEEDS_MODE(flags))
		return real___openat64_2(dirfd, path, flags);
	return open_common(dirfd, path, flags, 0);
}

/* ---- close and dup ------------------------------------------------------ */

/*
 * The shim's lifeline descriptors (segment.c) outlive a program's sweep of
 * its descriptors (closefrom, a close of every number): closing one would
 * tell processes in other pid namespaces that this one died.  The range
 * is closed around them.
 */
/*
 * Close [lo, hi] up to its last lifeline, around them: by close_range, or
 * one by one where the kernel has none and one_by_one says so.  Returns
 * where the rest of the range starts (past the last lifeline, or lo when
 * there is none), or -1 with close_range's error.
 */
static long close_below_lifelines(unsigned int lo, unsigned int hi, int flags,
				  bool one_by_one)
{
	unsigned int keep[LIFELINES_MAX], fd;
	int i, n = lifeline_fds(lo, hi, keep, LIFELINES_MAX);

	for (i = 0; i < n; i++) {
		if (keep[i] > lo && real_close_range(lo, keep[i] - 1, flags)) {
			if (!one_by_one)
				return -1;
			for (fd = lo; fd < keep[i]; fd++)
				real_close((int)fd);
		}
		lo = keep[i] + 1;
	}
	return lo;
}

static int close_range_around(unsigned int lo, unsigned int hi, int flags)
{
	long rest = close_below_lifelines(lo, hi, flags, false);

	if (rest < 0)
		return -1;
	if (rest > (long)hi)
		return 0; /* the last of the range was a lifeline */
	return real_close_range((unsigned)rest, hi, flags);
}

/* The close forget_fd began is made: a mark left on the entry for the
 * threads that meanwhile wait on it goes (not a vfork child's: the table
 * is its parent's).  Atomics only: errno stays the real call's. */
static void closed_fd(int fd)
{
	if (!in_vfork_child())
		fdtable_closed(fd);
}

static void closed_range(unsigned lo, unsigned hi)
{
	if (!in_vfork_child())
		fdtable_closed_range(lo, hi);
}

EXPORT int close(int fd)
{
	int r;

	forget_fd(fd);
	/* A number the program never opened, as far as it knows: the
	 * kernel alone would say EBADF. */
	if (__builtin_expect(lifeline_owns_fd(fd), 0) && shim_on()) {
		errno = EBADF;
		return -1;
	}
	r = real_close(fd);
	closed_fd(fd);
	return r;
}

EXPORT int close_range(unsigned int lo, unsigned int hi, int flags)
{
	int r;

	if (lo <= hi && !(flags & CLOSE_RANGE_CLOEXEC)) {
		rings_settle();
		BOOKKEEP(fdtable_close_range(lo, hi));
	}
	if (lo <= hi && shim_on())
		r = close_range_around(lo, hi, flags);
	else
		r = real_close_range(lo, hi, flags);
	if (lo <= hi)
		closed_range(lo, hi);
	return r;
}

EXPORT void closefrom(int lowfd)
{
	int from = lowfd;

	if (lowfd >= 0) {
		rings_settle();
		BOOKKEEP(fdtable_close_range((unsigned)lowfd, ~0u));
	}
	/* Past the last lifeline, glibc's closefrom, with its own fallback. */
	if (lowfd >= 0 && shim_on())
		lowfd = (int)close_below_lifelines((unsigned)lowfd, ~0u, 0,
						   true);
	real_closefrom(lowfd);
	if (from >= 0)
		closed_range((unsigned)from, ~0u);
}

EXPORT int fclose(FILE *stream)
{
	/* An fd given to fdopen goes away inside fclose, out of our sight. */
	int fd = stream ? fileno(stream) : -1, r;

	if (fd >= 0) {
		rings_settle();
		BOOKKEEP(fdtable_close(fd));
	}
	r = real_fclose(stream);
	if (fd >= 0)
		closed_fd(fd);
	return r;
}

/* A stream opened by glibc's own open, out of our sight: looked at as an
 * open would look at it (a record a crash left is recovered). */
static FILE *stream_opened(FILE *r)
{
	if (r && shim_on())
		BOOKKEEP(io_stream_opened(fileno(r)));
	return r;
}

EXPORT FILE *fopen(const char *path, const char *mode)
{
	lib_ensure();
	return stream_opened(real_fopen(path, mode));
}

EXPORT FILE *fopen64(const char *path, const char *mode)
{
	lib_ensure();
	return stream_opened(real_fopen64(path, mode));
}

/* freopen closes the stream's fd inside glibc and reopens the number,
 * both out of our sight.  The caller has set the shim up (real resolved). */
static FILE *reopen_common(FILE *(*real)(const char *, const char *, FILE *),
			   const char *path, const char *mode, FILE *stream)
{
	int fd = stream ? fileno(stream) : -1;
	FILE *r;

	if (fd >= 0) {
		rings_settle();
		BOOKKEEP(fdtable_close(fd));
	}
	r = real(path, mode, stream);
	if (fd >= 0)
		closed_fd(fd);
	return path ? stream_opened(r) : r;
}

EXPORT FILE *freopen(const char *path, const char *mode, FILE *stream)
{
	lib_ensure();
	return reopen_common(real_freopen, path, mode, stream);
}

EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
	lib_ensure();
	return reopen_common(real_freopen64, path, mode, stream);
}

EXPORT int dup(int oldfd)
{
	int fd;

	lib_ensure();
	fd = real_dup(oldfd);
	if (fd >= 0)
		BOOKKEEP(fdtable_dup(oldfd, fd));
	return fd;
}

/* dup2/dup3 close newfd first: do our close of it while it is still open,
 * and only when the call can succeed (oldfd valid). */
static void dup_over(int oldfd, int newfd)
{
	if (oldfd == newfd || newfd < 0 || sys_fcntl(oldfd, F_GETFD, 0) < 0)
		return;
	fdtable_close(newfd);
	/* The program wants the number of one of our lifelines: it moves
	 * (its lock goes with its open file description). */
	if (lifeline_owns_fd(newfd))
		lifeline_evict(newfd);
}

EXPORT int dup2(int oldfd, int newfd)
{
	int fd;

	rings_settle();
	BOOKKEEP(dup_over(oldfd, newfd));
	if (io_busy && oldfd != newfd && sys_fcntl(oldfd, F_GETFD, 0) >= 0)
		forget_fd(newfd); /* from a handler: newfd is adopted anew */
	fd = real_dup2(oldfd, newfd);
	if (fd >= 0 && oldfd != newfd)
		BOOKKEEP(fdtable_dup(oldfd, fd));
	closed_fd(newfd); /* dup_over's mark, if the dup failed */
	return fd;
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
	int fd;

	if (oldfd != newfd) {
		rings_settle();
		BOOKKEEP(dup_over(oldfd, newfd));
	}
	if (io_busy && oldfd != newfd && sys_fcntl(oldfd, F_GETFD, 0) >= 0)
		forget_fd(newfd); /* as in dup2 */
	fd = real_dup3(oldfd, newfd, flags);
	if (fd >= 0)
		BOOKKEEP(fdtable_dup(oldfd, fd));
	closed_fd(newfd); /* dup_over's mark, if the dup failed */
	return fd;
}

static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd,
			void *arg)
{
	int r = real(fd, cmd, arg);

	if (r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
		BOOKKEEP(fdtable_dup(fd, r));
	else if (r == 0 && cmd == F_SETFL)
		BOOKKEEP(fdtable_setfl(fd));
	return r;
}

/* glibc reads the argument as a pointer whatever cmd is; so do we. */
EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	lib_ensure();
	return fcntl_common(real_fcntl, fd, cmd, arg);
}

EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	lib_ensure();
	return fcntl_common(real_fcntl64, fd, cmd, arg);
}

/* ---- reads -------------------------------------------------------------- */

#define READ_BODY(fallback, ...)                                   \
	do {                                                       \
		bool re_;                                          \
		struct ofd *o_ = served_io(fd, &re_);              \
		if (!o_)                                           \
			return fallback;                           \
		struct io_req r_ = { __VA_ARGS__ };                \
		return io_read(o_, &r_, re_);                      \
	} while (0)

/*
 * The busiest wrappers: the test that passes a call through first, with
 * nothing else in the function, so that it costs no frame; the rest in a
 * function of its own.  Together in .text.hot: one page of code for all
 * of them (a page is a TLB miss after each system call, hot.c).
 */
#define HOT_WRAPPER(ret, name, write, params, args)                       \
	EXPORT __attribute__((hot)) ret name params                      \
	{                                                                \
		if (io_surely_pass(fd, write))                           \
			return real_##name args;                         \
		return name##_slow args;                                 \
	}

static __attribute__((noinline)) ssize_t read_slow(int fd, void *buf,
						    size_t n)
{
	READ_BODY(real_read(fd, buf, n), .kind = IO_PLAIN, .fd = fd,
		  .buf = buf, .len = n);
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	READ_BODY(real_readv(fd, iov, cnt), .kind = IO_VEC, .fd = fd,
		  .iov = iov, .iovcnt = cnt);
}

HOT_WRAPPER(ssize_t, read, false, (int fd, void *buf, size_t n),
	    (fd, buf, n))

static __attribute__((noinline)) ssize_t pread_slow(int fd, void *buf,
						     size_t n, off_t off)
{
	READ_BODY(real_pread(fd, buf, n, off), .kind = IO_P, .fd = fd,
		  .buf = buf, .len = n, .off = off);
}

HOT_WRAPPER(ssize_t, pread, false,
	    (int fd, void *buf, size_t n, off_t off), (fd, buf, n, off))

static __attribute__((noinline)) ssize_t pread64_slow(int fd, void *buf,
						       size_t n, off64_t off)
{
	READ_BODY(real_pread64(fd, buf, n, off), .kind = IO_P, .fd = fd,
		  .buf = buf, .len = n, .off = off);
}

HOT_WRAPPER(ssize_t, pread64, false,
	    (int fd, void *buf, size_t n, off64_t off), (fd, buf, n, off))

EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	READ_BODY(real_preadv(fd, iov, cnt, off), .kind = IO_PV, .fd = fd,
		  .iov = iov, .iovcnt = cnt, .off = off);
}

EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	READ_BODY(real_preadv64(fd, iov, cnt, off), .kind = IO_PV, .fd = fd,
		  .iov = iov, .iovcnt = cnt, .off = off);
}

EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off,
		       int flags)
{
	READ_BODY(real_preadv2(fd, iov, cnt, off, flags), .kind = IO_PV2,
		  .fd = fd, .iov = iov, .iovcnt = cnt, .off = off,
		  .rwf = flags);
}

EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt,
			  off64_t off, int flags)
{
	READ_BODY(real_preadv64v2(fd, iov, cnt, off, flags), .kind = IO_PV2,
		  .fd = fd, .iov = iov, .iovcnt = cnt, .off = off,
		  .rwf = flags);
}

/* Fortified reads: a buffer smaller than n is the real function's to
 * report (it aborts). */
EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	lib_ensure();
	if (n > buflen)
		return real___read_chk(fd, buf, n, buflen);
	return read(fd, buf, n);
}

EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off,
			   size_t buflen)
{
	lib_ensure();
	if (n > buflen)
		return real___pread_chk(fd, buf, n, off, buflen);
	return pread(fd, buf, n, off);
}

EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off,
			     size_t buflen)
{
	lib_ensure();
	if (n > buflen)
		return real___pread64_chk(fd, buf, n, off, buflen);
	return pread64(fd, buf, n, off);
}

/* ---- writes ------------------------------------------------------------- */

/* An O_APPEND descriptor of a file the shim keeps exact, or NULL. */
static __attribute__((noinline)) struct shim_file *exact_appender(int fd)
{
	struct ofd *o;
	struct shim_file *f;

	if (!shim_on() || io_busy || in_vfork_child())
		return NULL;
	o = fdtable_peek(fd);
	if (!o || o == OFD_PASS ||
	    !(atomic_load_explicit(&o->flags, memory_order_relaxed) &
	      O_APPEND))
		return NULL;
	f = atomic_load_explicit(&o->file, memory_order_acquire);
	return f && !segment_member_serves(f) ? f : NULL;
}

/* A guest writer's description (fdtable.c), from a thread not inside
 * the shim. */
static __attribute__((noinline)) struct ofd *guest_writer(int fd)
{
	if (!shim_on() || io_busy || in_vfork_child())
		return NULL;
	return fdtable_guest_writer(fd);
}

#define WRITE_BODY(fallback, ...)                                  \
	do {                                                       \
		bool re_;                                          \
		if (io_surely_pass(fd, true))                      \
			return fallback;                           \
		struct ofd *o_ = served_io(fd, &re_);              \
		if (!o_) {                                         \
			struct shim_file *x_ = exact_appender(fd); \
			struct ofd *g_;                            \
			if (x_) {                                  \
				struct io_req r_ = { __VA_ARGS__ }; \
				return io_write_exact(x_, &r_);    \
			}                                          \
			g_ = guest_writer(fd);                     \
			if (!g_)                                   \
				return fallback;                   \
			struct io_req r_ = { __VA_ARGS__ };        \
			return io_write_guest(g_, &r_);            \
		}                                                  \
		struct io_req r_ = { __VA_ARGS__ };                \
		return io_write(o_, &r_, re_);                     \
	} while (0)

static __attribute__((noinline)) ssize_t write_slow(int fd, const void *buf,
						     size_t n)
{
	WRITE_BODY(real_write(fd, buf, n), .kind = IO_PLAIN, .fd = fd,
		   .buf = (void *)buf, .len = n);
}

HOT_WRAPPER(ssize_t, write, true, (int fd, const void *buf, size_t n),
	    (fd, buf, n))

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	WRITE_BODY(real_writev(fd, iov, cnt), .kind = IO_VEC, .fd = fd,
		   .iov = iov, .iovcnt = cnt);
}

static __attribute__((noinline)) ssize_t pwrite_slow(int fd, const void *buf,
						      size_t n, off_t off)
{
	WRITE_BODY(real_pwrite(fd, buf, n, off), .kind = IO_P, .fd = fd,
		   .buf = (void *)buf, .len = n, .off = off);
}

HOT_WRAPPER(ssize_t, pwrite, true,
	    (int fd, const void *buf, size_t n, off_t off), (fd, buf, n, off))

static __attribute__((noinline)) ssize_t pwrite64_slow(int fd,
							const void *buf,
							size_t n, off64_t off)
{
	WRITE_BODY(real_pwrite64(fd, buf, n, off), .kind = IO_P, .fd = fd,
		   .buf = (void *)buf, .len = n, .off = off);
}

HOT_WRAPPER(ssize_t, pwrite64, true,
	    (int fd, const void *buf, size_t n, off64_t off),
	    (fd, buf, n, off))

EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	WRITE_BODY(real_pwritev(fd, iov, cnt, off), .kind = IO_PV, .fd = fd,
		   .iov = iov, .iovcnt = cnt, .off = off);
}

EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt,
			 off64_t off)
{
	WRITE_BODY(real_pwritev64(fd, iov, cnt, off), .kind = IO_PV, .fd = fd,
		   .iov = iov, .iovcnt = cnt, .off = off);
}

EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off,
			int flags)
{
	WRITE_BODY(real_pwritev2(fd, iov, cnt, off, flags), .kind = IO_PV2,
		   .fd = fd, .iov = iov, .iovcnt = cnt, .off = off,
		   .rwf = flags);
}

EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt,
			   off64_t off, int flags)
{
	WRITE_BODY(real_pwritev64v2(fd, iov, cnt, off, flags), .kind = IO_PV2,
		   .fd = fd, .iov = iov, .iovcnt = cnt, .off = off,
		   .rwf = flags);
}

/* ---- position and size -------------------------------------------------- */

EXPORT off_t lseek(int fd, off_t off, int whence)
{
	bool re;
	struct ofd *o = served_io(fd, &re);

	return o ? io_lseek(o, fd, off, whence, re)
		 : real_lseek(fd, off, whence);
}

EXPORT off64_t lseek64(int fd, off64_t off, int whence)
{
	bool re;
	struct ofd *o = served_io(fd, &re);

	return o ? io_lseek(o, fd, off, whence, re)
		 : real_lseek64(fd, off, whence);
}

/* st_size of a stat that succeeded on fd. */
static void fix_fd_size(int fd, off_t *size, mode_t mode)
{
	struct ofd *o;
	bool re;

	if (!S_ISREG(mode))
		return;
	o = served_io(fd, &re);
	if (o)
		*size = (off_t)io_eof(o, fd, (uint64_t)*size, re);
}

static void fix_path_size(int dirfd, const char *path, int flags,
			  struct stat *st)
{
	/* An empty path — or none, which Linux 6.11 accepts — with
	 * AT_EMPTY_PATH is the fd itself. */
	if ((!path || !*path) && (flags & AT_EMPTY_PATH))
		fix_fd_size(dirfd, &st->st_size, st->st_mode);
	else if (S_ISREG(st->st_mode) && !hint_surely_dead()) {
		rings_settle();
		BOOKKEEP(io_fix_path_size(path, dirfd, flags, st));
	}
}

EXPORT int fstat(int fd, struct stat *st)
{
	int r;

	lib_ensure();
	r = real_fstat(fd, st);
	if (r == 0)
		fix_fd_size(fd, &st->st_size, st->st_mode);
	return r;
}

EXPORT int fstat64(int fd, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real_fstat64(fd, st);
	if (r == 0)
		fix_fd_size(fd, &st->st_size, st->st_mode);
	return r;
}

/* struct stat64 is struct stat on x86_64; the 64 names share the code. */
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "stat64");

EXPORT int stat(const char *path, struct stat *st)
{
	int r;

	lib_ensure();
	r = real_stat(path, st);
	if (r == 0)
		fix_path_size(AT_FDCWD, path, 0, st);
	return r;
}

EXPORT int stat64(const char *path, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real_stat64(path, st);
	if (r == 0)
		fix_path_size(AT_FDCWD, path, 0, (struct stat *)st);
	return r;
}

EXPORT int lstat(const char *path, struct stat *st)
{
	int r;

	lib_ensure();
	r = real_lstat(path, st);
	if (r == 0)
		fix_path_size(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, st);
	return r;
}

EXPORT int lstat64(const char *path, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real_lstat64(path, st);
	if (r == 0)
		fix_path_size(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW,
			      (struct stat *)st);
	return r;
}

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	int r;

	lib_ensure();
	r = real_fstatat(dirfd, path, st, flags);
	if (r == 0)
		fix_path_size(dirfd, path, flags, st);
	return r;
}

EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st,
		     int flags)
{
	int r;

	lib_ensure();
	r = real_fstatat64(dirfd, path, st, flags);
	if (r == 0)
		fix_path_size(dirfd, path, flags, (struct stat *)st);
	return r;
}

EXPORT int statx(int dirfd, const char *path, int flags, unsigned int mask,
		 struct statx *stx)
{
	struct stat st;
	int r;

	lib_ensure();
	r = real_statx(dirfd, path, flags, mask, stx);
	if (r || !(stx->stx_mask & STATX_SIZE) || !S_ISREG(stx->stx_mode))
		return r;
	/* The segment's place follows the file's group and mode: ask for
	 * them if the caller did not. */
	if ((stx->stx_mask & (STATX_UID | STATX_GID | STATX_MODE)) !=
	    (STATX_UID | STATX_GID | STATX_MODE)) {
		struct statx all;

		if (real_statx(dirfd, path, flags & ~AT_STATX_SYNC_TYPE,
			       STATX_BASIC_STATS, &all) ||
		    all.stx_ino != stx->stx_ino)
			return r;
		st.st_uid = all.stx_uid;
		st.st_gid = all.stx_gid;
		st.st_mode = all.stx_mode;
	} else {
		st.st_uid = stx->stx_uid;
		st.st_gid = stx->stx_gid;
		st.st_mode = stx->stx_mode;
	}
	st.st_dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
	st.st_ino = stx->stx_ino;
	st.st_size = (off_t)stx->stx_size;
	fix_path_size(dirfd, path, flags, &st);
	stx->stx_size = (uint64_t)st.st_size;
	return r;
}

/* Binaries built against glibc < 2.33 call the versioned __xstat family;
 * on x86_64 versions 0 (_STAT_VER_KERNEL) and 1 (_STAT_VER_LINUX) are both
 * struct stat, and glibc refuses any other. */
#define XSTAT_VER_OK(v) ((v) == 0 || (v) == 1)
EXPORT int __xstat(int ver, const char *path, struct stat *st)
{
	int r;

	lib_ensure();
	r = real___xstat(ver, path, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(AT_FDCWD, path, 0, st);
	return r;
}

EXPORT int __xstat64(int ver, const char *path, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real___xstat64(ver, path, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(AT_FDCWD, path, 0, (struct stat *)st);
	return r;
}

EXPORT int __lxstat(int ver, const char *path, struct stat *st)
{
	int r;

	lib_ensure();
	r = real___lxstat(ver, path, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, st);
	return r;
}

EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real___lxstat64(ver, path, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW,
			      (struct stat *)st);
	return r;
}

EXPORT int __fxstat(int ver, int fd, struct stat *st)
{
	int r;

	lib_ensure();
	r = real___fxstat(ver, fd, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_fd_size(fd, &st->st_size, st->st_mode);
	return r;
}

EXPORT int __fxstat64(int ver, int fd, struct stat64 *st)
{
	int r;

	lib_ensure();
	r = real___fxstat64(ver, fd, st);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_fd_size(fd, &st->st_size, st->st_mode);
	return r;
}

EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st,
		      int flags)
{
	int r;

	lib_ensure();
	r = real___fxstatat(ver, dirfd, path, st, flags);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(dirfd, path, flags, st);
	return r;
}

EXPORT int __fxstatat64(int ver, int dirfd, const char *path,
			struct stat64 *st, int flags)
{
	int r;

	lib_ensure();
	r = real___fxstatat64(ver, dirfd, path, st, flags);
	if (r == 0 && XSTAT_VER_OK(ver))
		fix_path_size(dirfd, path, flags, (struct stat *)st);
	return r;
}

/* A file mapped here and cut short: its pages past the new end are gone
 * (umem.c).  Keeps errno. */
static int mapped_cut(int r)
{
	if (!r)
		umem_changed();
	return r;
}

/* ftruncate and the fallocates, which move or may move the size. */
enum size_op { SZ_TRUNCATE, SZ_FALLOCATE, SZ_POSIX_FALLOCATE };

static int size_real(int fd, enum size_op op, int mode, off64_t off,
		     off64_t len)
{
	switch (op) {
	case SZ_TRUNCATE:
		return real_ftruncate64(fd, len);
	case SZ_FALLOCATE:
		return real_fallocate64(fd, mode, off, len);
	default:
		return real_posix_fallocate64(fd, off, len);
	}
}

/* The shim's, or the kernel's — a guest writer's counted (fdtable.c),
 * with this thread marked inside the shim, so that a signal handler's
 * write meanwhile goes straight to the kernel rather than wait for this
 * one to be counted out. */
static int size_call(int fd, enum size_op op, int mode, off64_t off,
		     off64_t len)
{
	struct ofd *o = served(fd), *g;
	struct guard gd;
	uint32_t inc;
	int r, err;

	if (o)
		return op == SZ_TRUNCATE
			       ? io_ftruncate(o, fd, len)
			       : io_fallocate(o, fd, mode, off, len,
					      op == SZ_POSIX_FALLOCATE);
	g = guest_writer(fd);
	if (!g)
		return size_real(fd, op, mode, off, len);
	/* Blocks kept past the end are the program's: the segment notes
	 * them, so that no trim takes them. */
	if (op == SZ_FALLOCATE && (mode & FALLOC_FL_KEEP_SIZE)) {
		fdtable_engage_fd(fd);
		if (!guest_writer(fd))
			return size_call(fd, op, mode, off, len);
	}
	/* Counted only once marked inside the shim and not cancellable (a
	 * cancel pending acts first, as in the real fallocate, a
	 * cancellation point; ftruncate and posix_fallocate are not). */
	guard_enter(&gd, op == SZ_FALLOCATE);
	if (!fdtable_raw_enter(fd, g, &inc)) {
		guard_exit(&gd, 0, 0);
		return size_call(fd, op, mode, off, len); /* attached */
	}
	r = size_real(fd, op, mode, off, len);
	err = errno;
	fdtable_raw_exit(g, inc);
	guard_exit(&gd, r, err);
	return r;
}

EXPORT int ftruncate(int fd, off_t len)
{
	return mapped_cut(size_call(fd, SZ_TRUNCATE, 0, 0, len));
}

EXPORT int ftruncate64(int fd, off64_t len)
{
	return mapped_cut(size_call(fd, SZ_TRUNCATE, 0, 0, len));
}

/*
 * truncate(path) of a file with a segment: through a descriptor, so that
 * the barrier drains its writers.  If the file cannot be opened for
 * writing, truncate(path) cannot succeed either: the real call answers.
 */
static int truncate_common(int (*real)(const char *, off_t), const char *path,
			   off_t len)
{
	struct ofd *o;
	struct stat st;
	int fd, r, err, cancel;

	/* Only a regular file that has a segment needs the detour: opening
	 * anything else (a FIFO, a device) could block or have effects. */
	if (!shim_on() || !hint_maybe_live() || len < 0 ||
	    real_stat(path, &st) || !S_ISREG(st.st_mode) ||
	    !segment_exists(&st))
		return real(path, len);
	/* truncate is not a cancellation point; the open inside must not
	 * become one. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	fd = open_common(AT_FDCWD, path,
			 O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0);
	if (fd < 0) {
		pthread_setcancelstate(cancel, NULL);
		return real(path, len);
	}
	o = served(fd);
	r = o ? io_ftruncate(o, fd, len) : real_ftruncate(fd, len);
	err = errno;
	close(fd);
	pthread_setcancelstate(cancel, NULL);
	errno = err;
	return r;
}

EXPORT int truncate(const char *path, off_t len)
{
	lib_ensure();
	return mapped_cut(truncate_common(real_truncate, path, len));
}

EXPORT int truncate64(const char *path, off64_t len)
{
	lib_ensure();
	return mapped_cut(truncate_common(real_truncate64, path, len));
}

EXPORT int fallocate(int fd, int mode, off_t off, off_t len)
{
	int r = size_call(fd, SZ_FALLOCATE, mode, off, len);

	return mode & FALLOC_FL_COLLAPSE_RANGE ? mapped_cut(r) : r;
}

EXPORT int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
	int r = size_call(fd, SZ_FALLOCATE, mode, off, len);

	return mode & FALLOC_FL_COLLAPSE_RANGE ? mapped_cut(r) : r;
}

EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
	return size_call(fd, SZ_POSIX_FALLOCATE, 0, off, len);
}

EXPORT int posix_fallocate64(int fd, off64_t off, off64_t len)
{
	return size_call(fd, SZ_POSIX_FALLOCATE, 0, off, len);
}

/* ---- calls that move data from file to file -----------------------------
 *
 * copy_file_range, sendfile and splice read a source and write a
 * destination inside the kernel; the clone, dedupe and exchange ioctls
 * move blocks and sizes.  Every file whose blocks or size such a call may
 * change (a destination, every file of a block call, whose checks compare
 * ranges with the size), and a served source the call reads past its
 * logical end, is held around the call: a served one quiesced
 * (io_quiesce: its writers drained, its reservation cut, so that the
 * kernel's checks and stops are those of the data, and the size the call
 * leaves taken as its own), a guest writer's counted in as its writes are
 * (fdtable_raw_enter).  A call with no side the shim serves goes to the
 * kernel untouched (a splice between pipes stays a cancellation point).
 */

/* The files a call holds, each once, in room the caller gives. */
struct holds {
	int n, max;
	struct hold {
		int fd;
		struct ofd *o, *g; /* served, or a guest writer's */
		uint32_t inc;
		struct quiesce q;
	} *h;
};

/* fd to hold: served through o, or a guest writer's through g. */
static void holds_put(struct holds *hs, int fd, struct ofd *o, struct ofd *g)
{
	struct hold *h;
	int i;

	if (!o && !g)
		return;
	for (i = 0; i < hs->n; i++)
		if (hs->h[i].fd == fd)
			return;
	if (hs->n == hs->max) {
		log_once("a call on more than %d files: the rest go as they "
			 "are", hs->max);
		return;
	}
	h = &hs->h[hs->n++];
	h->fd = fd;
	h->o = o;
	h->g = g;
	h->q.raised = false;
}

/* Note fd as one the call writes (before holds_take's guard: a guest
 * writer is found outside it). */
static void holds_add(struct holds *hs, int fd)
{
	struct ofd *o = served(fd);

	holds_put(hs, fd, o, o ? NULL : guest_writer(fd));
}

static bool hold_before(const struct hold *a, const struct hold *b)
{
	struct shim_file *x = atomic_load(&a->o->file);
	struct shim_file *y = atomic_load(&b->o->file);

	return x->dev < y->dev || (x->dev == y->dev && x->ino < y->ino);
}

/* Hold them (inside the guard): guests counted in first — one attached
 * meanwhile is served — then the served quiesced in the order of their
 * (dev, ino), every process's holders alike, each file once. */
static void holds_take(struct holds *hs)
{
	struct hold t;
	int i, j;

	for (i = 0; i < hs->n; i++) {
		struct hold *h = &hs->h[i];

		if (h->g && !fdtable_raw_enter(h->fd, h->g, &h->inc)) {
			h->g = NULL;
			h->o = shim_served(h->fd);
		}
	}
	for (i = 1; i < hs->n; i++)
		for (j = i; j > 0 && hs->h[j].o &&
			    (!hs->h[j - 1].o ||
			     hold_before(&hs->h[j], &hs->h[j - 1]));
		     j--) {
			t = hs->h[j];
			hs->h[j] = hs->h[j - 1];
			hs->h[j - 1] = t;
		}
	for (i = 0; i < hs->n && hs->h[i].o; i++) {
		struct shim_file *f = atomic_load(&hs->h[i].o->file);

		if (i && f == atomic_load(&hs->h[i - 1].o->file))
			continue;
		io_quiesce(f, hs->h[i].fd, &hs->h[i].q);
	}
}

static void holds_drop(struct holds *hs)
{
	int i;

	for (i = hs->n - 1; i >= 0; i--) {
		io_resume(&hs->h[i].q);
		if (hs->h[i].g)
			fdtable_raw_exit(hs->h[i].g, hs->h[i].inc);
	}
}

/* A copy of len bytes from in to out inside the kernel (copy_file_range,
 * sendfile, splice: which, and how, is call's to say). */
enum xfer_call { X_COPY, X_SENDFILE, X_SENDFILE64, X_SPLICE };

static ssize_t xfer_real(enum xfer_call c, int in, void *off_in, int out,
			 void *off_out, size_t len, unsigned flags)
{
	switch (c) {
	case X_COPY:
		return real_copy_file_range(in, off_in, out, off_out, len,
					    flags);
	case X_SENDFILE:
		return real_sendfile(out, in, off_in, len);
	case X_SENDFILE64:
		return real_sendfile64(out, in, off_in, len);
	default:
		return real_splice(in, off_in, out, off_out, len, flags);
	}
}

/* Where a read of fd (o, served) from *offp (else its position) for len
 * bytes ends against the logical size: SRC_INSIDE below it, SRC_CUT
 * past it with *len cut to it (a buffered source, some of it below the
 * size, for a call the kernel may not run with the file quiesced),
 * SRC_HOLD past it otherwise (the source is to be quiesced: a cut length
 * could break a direct read's alignment, move the kernel's own checks, or
 * clone less).  Anything the kernel is to refuse is left to it. */
enum src_plan { SRC_INSIDE, SRC_CUT, SRC_HOLD };
/* may_cut: no, a buffered source with data left, or always (nothing can
 * be held: better an answer the kernel might refuse than zeros). */
enum { CUT_NEVER, CUT_BUFFERED, CUT_ALWAYS };

static enum src_plan source_plan(struct ofd *o, int fd, const off64_t *offp,
				 size_t *len, int may_cut, bool reentrant)
{
	uint32_t fl = atomic_load_explicit(&o->flags, memory_order_relaxed);
	uint64_t eof;
	off64_t pos;

	if (!*len || (fl & O_ACCMODE) == O_WRONLY || (fl & O_PATH))
		return SRC_INSIDE;
	if (offp) {
		if (umem_read(&pos, offp, sizeof(pos)) != sizeof(pos))
			return SRC_INSIDE;
	} else {
		pos = sys_lseek(fd, 0, SEEK_CUR);
	}
	if (pos < 0)
		return SRC_INSIDE;
	eof = io_eof(o, fd, UINT64_MAX, reentrant);
	if ((uint64_t)pos < eof && *len <= eof - (uint64_t)pos)
		return SRC_INSIDE;
	if (may_cut == CUT_ALWAYS ||
	    (may_cut && !(fl & O_DIRECT) && (uint64_t)pos < eof)) {
		*len = (uint64_t)pos >= eof ? 0 : (size_t)(eof - (uint64_t)pos);
		return SRC_CUT;
	}
	return SRC_HOLD;
}

/* Whether fd's file is quiesced among hs. */
static bool source_held(const struct holds *hs, int fd)
{
	struct shim_file *f = NULL;
	int i;

	for (i = 0; i < hs->n; i++)
		if (hs->h[i].fd == fd && hs->h[i].o)
			f = atomic_load(&hs->h[i].o->file);
	for (i = 0; i < hs->n; i++)
		if (hs->h[i].q.raised && hs->h[i].q.f == f)
			return f != NULL;
	return false;
}

/* A splice that found its pipe full or empty while holding files: wait
 * for it with nothing held (a cancellation point, as the call is), then
 * try again.  False if the pipe is the program's non-blocking one: the
 * kernel's EAGAIN stands. */
static bool splice_wait(int pipe_fd, short events)
{
	struct pollfd p = { .fd = pipe_fd, .events = events };
	int fl = (int)sys_call(SYS_fcntl, pipe_fd, F_GETFL);

	if (fl < 0 || (fl & O_NONBLOCK))
		return false;
	return poll(&p, 1, -1) >= 0 || errno == EINTR;
}

static ssize_t xfer(enum xfer_call c, int in, void *off_in, int out,
		    void *off_out, size_t len, unsigned flags)
{
	struct hold room[2], dest;
	struct holds hs = { .n = 0, .max = 2, .h = room };
	enum src_plan plan = SRC_INSIDE;
	int ndest;
	struct guard g;
	struct ofd *o;
	struct stat st;
	ssize_t ret;
	int err;
	bool re;

	/* A signal handler inside the shim, or a vfork child: no lock, no
	 * hold; a buffered source still stops at the logical size. */
	o = served_io(in, &re);
	if (re || in_vfork_child()) {
		if (o)
			source_plan(o, in, off_in, &len, CUT_ALWAYS, true);
		return xfer_real(c, in, off_in, out, off_out, len, flags);
	}
	if (!shim_on())
		return xfer_real(c, in, off_in, out, off_out, len, flags);
	holds_add(&hs, out);
	if (!o && !hs.n)
		return xfer_real(c, in, off_in, out, off_out, len, flags);
	/* copy_file_range and splice are cancellation points, sendfile is
	 * not; the guard keeps a cancel from leaving a file held. */
	guard_enter(&g, c == X_COPY || c == X_SPLICE);
	dest = room[0];
	ndest = hs.n;
	for (;;) {
		/* Planned anew each time: the size moves while we wait. */
		hs.n = ndest;
		room[0] = dest;
		if (o) {
			/* sendfile to a socket or a pipe may block on it: a
			 * buffered source is cut rather than held across
			 * that.  sendfile's offset is 64 bits, as off64_t. */
			bool may_cut = (c == X_SENDFILE || c == X_SENDFILE64) &&
				       (sys_fstat(out, &st) ||
					!S_ISREG(st.st_mode));

			plan = source_plan(o, in, off_in, &len,
					   may_cut ? CUT_BUFFERED : CUT_NEVER,
					   false);
			if (plan == SRC_HOLD)
				holds_put(&hs, in, o, NULL);
		}
		holds_take(&hs);
		/* A source that could not be quiesced (its writers would
		 * not drain: a signal handler that interrupted one) is cut
		 * after all. */
		if (plan == SRC_HOLD && !source_held(&hs, in))
			source_plan(o, in, off_in, &len, CUT_ALWAYS, false);
		/* A splice holds nothing while its pipe makes it wait. */
		ret = xfer_real(c, in, off_in, out, off_out, len,
				c == X_SPLICE && hs.n ? flags | SPLICE_F_NONBLOCK
						      : flags);
		err = errno;
		holds_drop(&hs);
		if (c != X_SPLICE || !hs.n || ret >= 0 || err != EAGAIN ||
		    (flags & SPLICE_F_NONBLOCK))
			break;
		/* One side is a pipe: the source's reader, or the
		 * destination's writer. */
		guard_exit(&g, ret, err);
		if (!splice_wait(o ? out : in, o ? POLLOUT : POLLIN))
			return ret;
		guard_enter(&g, true);
	}
	guard_exit(&g, ret, err);
	return ret;
}

EXPORT ssize_t copy_file_range(int in, off64_t *off_in, int out,
			       off64_t *off_out, size_t len, unsigned flags)
{
	return xfer(X_COPY, in, off_in, out, off_out, len, flags);
}

EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	return xfer(X_SENDFILE, in, off, out, NULL, count, 0);
}

EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t count)
{
	return xfer(X_SENDFILE64, in, off, out, NULL, count, 0);
}

EXPORT ssize_t splice(int in, off64_t *off_in, int out, off64_t *off_out,
		      size_t len, unsigned flags)
{
	return xfer(X_SPLICE, in, off_in, out, off_out, len, flags);
}


/* XFS's exchange of ranges (Linux 6.10) and its commit (6.13): file1's
 * descriptor first in each.  A commit exchanges only if file2 has not
 * changed (its times) since START_COMMIT sampled it: its reserved tail is
 * cut before the sample, so that the commit's own hold finds nothing to
 * cut and changes nothing (unless a write came between, as the kernel
 * alone would then refuse it too). */
struct xfs_exchange_range_ {
	int32_t file1_fd;
	uint32_t pad;
	uint64_t file1_offset, file2_offset, length, flags;
};
struct xfs_commit_range_ {
	int32_t file1_fd;
	uint32_t pad;
	uint64_t file1_offset, file2_offset, length, flags;
	uint64_t file2_freshness[6];
};
#define XFS_IOC_EXCHANGE_RANGE_ _IOW('X', 129, struct xfs_exchange_range_)
#define XFS_IOC_START_COMMIT_ _IOR('X', 130, struct xfs_commit_range_)
#define XFS_IOC_COMMIT_RANGE_ _IOW('X', 131, struct xfs_commit_range_)

/* The kernel reads the request as 32 bits: so do we (FIDEDUPERANGE has
 * bit 31 set, and may come sign-extended from an int). */
static bool blocks_request(unsigned int req)
{
	return req == FICLONE || req == FICLONERANGE ||
	       req == FIDEDUPERANGE || req == XFS_IOC_EXCHANGE_RANGE_ ||
	       req == XFS_IOC_START_COMMIT_ || req == XFS_IOC_COMMIT_RANGE_;
}

/* The most files a dedupe can name (the kernel takes one page of
 * request), and its source. */
#define BLOCKS_FILES (1 + (4096 - sizeof(struct file_dedupe_range)) / \
			      sizeof(struct file_dedupe_range_info))

/* A clone, dedupe or exchange on fd: every file it names held. */
static int blocks_call(int fd, unsigned int req, unsigned long raw, void *arg)
{
	struct hold room[BLOCKS_FILES]; /* 7 KiB of stack, for a rare call */
	struct holds hs = { .n = 0, .max = (int)BLOCKS_FILES, .h = room };
	struct file_dedupe_range dr;
	struct file_dedupe_range_info di;
	struct guard g;
	int32_t other;
	int ret, err;
	unsigned i;

	holds_add(&hs, fd);
	switch (req) {
	case FICLONE:
		holds_add(&hs, (int)(intptr_t)arg);
		break;
	case FICLONERANGE: /* src_fd, an s64, first */
	case XFS_IOC_EXCHANGE_RANGE_:
	case XFS_IOC_COMMIT_RANGE_:
		if (umem_read(&other, arg, sizeof(other)) == sizeof(other))
			holds_add(&hs, other);
		break;
	case FIDEDUPERANGE:
		if (umem_read(&dr, arg, sizeof(dr)) != sizeof(dr))
			break;
		for (i = 0; i < dr.dest_count && i + 1 < BLOCKS_FILES; i++) {
			if (umem_read(&di, (char *)arg + sizeof(dr) +
						   i * sizeof(di),
				      sizeof(di)) != sizeof(di))
				break;
			holds_add(&hs, (int)di.dest_fd);
		}
		break;
	}
	guard_enter(&g, false);
	holds_take(&hs);
	ret = real_ioctl(fd, raw, arg);
	err = errno;
	holds_drop(&hs);
	guard_exit(&g, ret, err);
	return ret;
}

EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	lib_ensure();
	if (!blocks_request((unsigned int)req) || !shim_on())
		return real_ioctl(fd, req, arg);
	return blocks_call(fd, (unsigned int)req, req, arg);
}

#if defined(__x86_64__)
/*
 * syscall(3): a program that copies with sys_call(SYS_copy_file_range, ...)
 * — written before glibc had the function, as fstests' fsx still is —
 * gets the function's rules, and so do SYS_sendfile, SYS_splice and
 * SYS_ioctl.  Every other number is made by the same few instructions
 * as glibc's syscall(), in assembly with no frame of its own: a clone or
 * a vfork made through it returns in the child as it would there, and
 * no library set-up is needed (the shim's own calls come here too, some
 * before its constructor).
 */
#define XSTR(x) STR(x)
#define STR(x) #x
__asm__(".pushsection .text\n"
	".p2align 4\n"
	".globl syscall\n"
	".type syscall, @function\n"
	"syscall:\n"
	".cfi_startproc\n"
	"\tcmp $" XSTR(SYS_copy_file_range) ", %rdi\n"
	"\tje dioshim_syscall_served\n"
	"\tcmp $" XSTR(SYS_sendfile) ", %rdi\n"
	"\tje dioshim_syscall_served\n"
	"\tcmp $" XSTR(SYS_splice) ", %rdi\n"
	"\tje dioshim_syscall_served\n"
	"\tcmp $" XSTR(SYS_ioctl) ", %rdi\n"
	"\tje dioshim_syscall_served\n"
	"\tjmp sys_call\n"
	".cfi_endproc\n"
	".size syscall, .-syscall\n"
	".popsection\n");

/* A system call is no cancellation point: neither is the wrapper's work
 * for one (glibc's copy_file_range and splice are). */
__attribute__((used, visibility("hidden"))) long
dioshim_syscall_served(long n, long a0, long a1, long a2, long a3, long a4,
		       long a5)
{
	long r;
	int cs;

	if (n == SYS_ioctl && !blocks_request((unsigned int)a1))
		return sys_call(n, a0, a1, a2, a3, a4, a5);
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cs);
	lib_ensure();
	switch (n) {
	case SYS_copy_file_range:
		r = (long)xfer(X_COPY, (int)a0, (void *)a1, (int)a2,
			       (void *)a3, (size_t)a4, (unsigned)a5);
		break;
	case SYS_sendfile:
		r = (long)xfer(X_SENDFILE64, (int)a1, (void *)a2, (int)a0,
			       NULL, (size_t)a3, 0);
		break;
	case SYS_splice:
		r = (long)xfer(X_SPLICE, (int)a0, (void *)a1, (int)a2,
			       (void *)a3, (size_t)a4, (unsigned)a5);
		break;
	default: /* SYS_ioctl, a block request */
		r = shim_on() ? blocks_call((int)a0, (unsigned int)a1,
					    (unsigned long)a1, (void *)a2)
			      : sys_call(n, a0, a1, a2, a3, a4, a5);
		break;
	}
	pthread_setcancelstate(cs, NULL);
	return r;
}
#endif

/* ---- the address space ---------------------------------------------------
 *
 * Calls that can take readable pages away, seen so that the shim forgets
 * the pages it knows readable (umem.c).  Each is the bare system call, as
 * glibc's is; none needs the library set up (an allocator's mmap may come
 * before anything else, even from inside dlsym).
 */

/* Moved whatever the call answers: one that fails part way (ENOMEM over
 * a gap, a MAP_FIXED mmap refused after the old mapping went) may have
 * changed part of its range.  [addr, addr + len) when lost; all of the
 * address space when len is SIZE_MAX. */
static long mm_result(long r, bool lost, const void *addr, size_t len)
{
	if (lost && len == SIZE_MAX)
		umem_changed();
	else if (lost)
		umem_lost(addr, len);
	return r;
}

EXPORT int munmap(void *addr, size_t len)
{
	return (int)mm_result(sys_call(SYS_munmap, addr, len), true, addr, len);
}

/* The range a protection change reaches: PROT_GROWSDOWN and PROT_GROWSUP
 * carry it to the start or the end of the mapping (all of the address
 * space, for umem: the shim does not know where that is). */
static size_t prot_reach(int prot, size_t len)
{
	return prot & (PROT_GROWSDOWN | PROT_GROWSUP) ? SIZE_MAX : len;
}

EXPORT int mprotect(void *addr, size_t len, int prot)
{
	/* Unreadable, or unwritable (an iocb the kernel and the shim store
	 * in). */
	return (int)mm_result(sys_call(SYS_mprotect, addr, len, prot),
			      (prot & (PROT_READ | PROT_WRITE)) !=
				      (PROT_READ | PROT_WRITE),
			      addr, prot_reach(prot, len));
}

EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey)
{
	/* A key may deny what the protection allows. */
	return (int)mm_result(sys_call(SYS_pkey_mprotect, addr, len, prot,
				      pkey), true, addr, prot_reach(prot, len));
}

#ifndef MADV_SOFT_OFFLINE
#define MADV_SOFT_OFFLINE 101
#endif
/* The range an advice reaches: poison, every mapping of the page,
 * wherever it is. */
static size_t advice_reach(int advice, size_t len)
{
	return advice == MADV_HWPOISON || advice == MADV_SOFT_OFFLINE ?
		       SIZE_MAX :
		       len;
}

EXPORT int madvise(void *addr, size_t len, int advice)
{
	return (int)mm_result(sys_call(SYS_madvise, addr, len, advice),
			      !umem_advice_keeps(advice), addr,
			      advice_reach(advice, len));
}

/* The range a mapping reaches: huge pages round the length up to their
 * size (MAP_HUGETLB, or a file on hugetlbfs: what a file's mapping
 * reaches, umem does not know). */
static size_t map_reach(int flags, size_t len)
{
	return (flags & MAP_HUGETLB) || !(flags & MAP_ANONYMOUS) ? SIZE_MAX
								 : len;
}

static void *mmap_common(void *addr, size_t len, int prot, int flags, int fd,
			 off64_t off)
{
	/* MAP_FIXED replaces what was there; MAP_FIXED_NOREPLACE does not. */
	return (void *)mm_result(sys_call(SYS_mmap, addr, len, prot, flags, fd,
					 off),
				 flags & MAP_FIXED, addr,
				 map_reach(flags, len));
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off)
{
	return mmap_common(addr, len, prot, flags, fd, off);
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd,
		    off64_t off)
{
	return mmap_common(addr, len, prot, flags, fd, off);
}

/* As Debian's glibc 2.36: flags it does not know are EINVAL, and the new
 * address is read with MREMAP_FIXED or MREMAP_DONTUNMAP. */
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif
EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
	void *to = NULL;

	if (flags & ~(MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP)) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) {
		va_list ap;

		va_start(ap, flags);
		to = va_arg(ap, void *);
		va_end(ap);
	}
	return (void *)mm_result(sys_call(SYS_mremap, old, old_len, new_len,
					 flags, to),
				 true, NULL, SIZE_MAX);
}

EXPORT int shmdt(const void *addr)
{
	return (int)mm_result(sys_call(SYS_shmdt, addr), true, NULL, SIZE_MAX);
}

/* SHM_REMAP maps over what was there (read-only, with SHM_RDONLY). */
EXPORT void *shmat(int id, const void *addr, int flags)
{
	return (void *)mm_result(sys_call(SYS_shmat, id, addr, flags),
				 flags & SHM_REMAP, NULL, SIZE_MAX);
}

/* madvise for a process named by a pidfd, this one perhaps: a guard or
 * another advice that takes pages away, wherever its ranges are. */
EXPORT ssize_t process_madvise(int pidfd, const struct iovec *iov, size_t n,
			       int advice, unsigned int flags)
{
	return (ssize_t)mm_result(sys_call(SYS_process_madvise, pidfd, iov, n,
					  advice, flags),
				  !umem_advice_keeps(advice), NULL, SIZE_MAX);
}

/* The heap cut by the program itself (glibc's malloc calls __sbrk, and
 * brk keeps glibc's own idea of the break: neither is seen, README). */
extern void *__sbrk(intptr_t inc);

EXPORT void *sbrk(intptr_t inc)
{
	return (void *)mm_result((long)__sbrk(inc), inc < 0, NULL, SIZE_MAX);
}

/* ---- sync ---------------------------------------------------------------- */

EXPORT int fsync(int fd)
{
	struct ofd *o = served(fd);

	return o ? io_fsync(o, fd, false) : real_fsync(fd);
}

EXPORT int fdatasync(int fd)
{
	struct ofd *o = served(fd);

	return o ? io_fsync(o, fd, true) : real_fdatasync(fd);
}

EXPORT int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags)
{
	lib_ensure();
	return real_sync_file_range(fd, off, n, flags);
}
