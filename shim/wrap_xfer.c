// SPDX-License-Identifier: MIT
/*
 * The wrappers of transfers: copy_file_range, sendfile, splice, the
 * block ioctls, and syscall(3) for their numbers (L5: one check, then a
 * call to xfer.c).
 */
#define _GNU_SOURCE
#include "wrap.h"

#include "sys.h"
#include "xfer.h"

#include <pthread.h>
#include <stdarg.h>
#include <sys/syscall.h>

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
 * syscall(3): a program that copies with syscall(SYS_copy_file_range, ...)
 * — written before glibc had the function, as fstests' fsx still is —
 * gets the function's rules, and so do SYS_sendfile, SYS_splice and
 * SYS_ioctl.  Every other number jumps to entry.c's sys_call, the same
 * few instructions as glibc's syscall(): in assembly with no frame of its
 * own, so that a clone or a vfork made through it returns in the child as
 * it would there, and no library set-up is needed.
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
