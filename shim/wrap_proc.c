// SPDX-License-Identifier: MIT
/*
 * The wrappers of the process's life: vfork, _Fork, the exits, main's
 * start and the execs (L5: one check, then a call to proc.c).  The
 * library's constructor and destructor are here too: they run only in
 * the library, not in the command or the unit tests.
 */
#define _GNU_SOURCE
#include "wrap.h"

#include "proc.h"
#include "segment.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <unistd.h>

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

/* quick_exit runs no destructor: ours runs as its last handler. */
static void lib_quick_exit(void)
{
	proc_detach_all();
}

__attribute__((constructor)) static void lib_constructor(void)
{
	lib_ensure();
	if (!config.disable) {
		segment_reclaim_self();
		at_quick_exit(lib_quick_exit);
	}
}

__attribute__((destructor)) static void lib_destructor(void)
{
	proc_detach_all();
}

EXPORT void _exit(int status)
{
	lib_ensure();
	proc_detach_all();
	real__exit(status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	lib_ensure();
	proc_detach_all();
	real__Exit(status);
	__builtin_unreachable();
}

EXPORT void exit(int status)
{
	proc_exit_claim();
	real_exit(status);
	__builtin_unreachable();
}

/* quick_exit runs no destructor: ours runs as its last handler. */
EXPORT void quick_exit(int status)
{
	proc_exit_claim();
	real_quick_exit(status);
	__builtin_unreachable();
}

EXPORT void verr(int status, const char *fmt, va_list ap)
{
	proc_exit_claim();
	real_verr(status, fmt, ap);
	__builtin_unreachable();
}

EXPORT void verrx(int status, const char *fmt, va_list ap)
{
	proc_exit_claim();
	real_verrx(status, fmt, ap);
	__builtin_unreachable();
}

EXPORT void err(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	proc_exit_claim();
	real_verr(status, fmt, ap);
	__builtin_unreachable();
}

EXPORT void errx(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	proc_exit_claim();
	real_verrx(status, fmt, ap);
	__builtin_unreachable();
}

/* The program's main, whose return is an exit. */
static int (*app_main)(int, char **, char **);

static int shim_main(int argc, char **argv, char **envp)
{
	int ret = app_main(argc, argv, envp);

	proc_exit_claim();
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
 * An exec leaves every file first (proc_exec_prepare) and takes them back
 * if it fails.  execl and friends build an argv and come here, since
 * glibc's call its internal execve.
 */
#define EXEC_WRAP(call)                         \
	({                                      \
		bool prepared_ = proc_exec_prepare(); \
		int rc_ = call;                 \
		proc_exec_failed(prepared_);         \
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
