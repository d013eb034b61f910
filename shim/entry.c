// SPDX-License-Identifier: MIT
/*
 * The raw system call entry (L0 platform; calls nothing of the shim's).
 *
 * sys_call(n, ...) is glibc's syscall(): the same few instructions, in
 * assembly with no frame of its own, so that a clone or a vfork made
 * through it returns in the child as it would there, and no library
 * set-up is needed (the shim's own calls come here, some before its
 * constructor).  The shim's own system calls (sys.h) go here rather than
 * to syscall(), which is a wrapper (wrap_xfer.c) and jumps here for every
 * number it does not serve.
 */
#define _GNU_SOURCE

#include <errno.h>

#if defined(__x86_64__)
__asm__(".pushsection .text\n"
	".p2align 4\n"
	".globl sys_call\n"
	".hidden sys_call\n"
	".type sys_call, @function\n"
	"sys_call:\n"
	".cfi_startproc\n"
	"\tmov %rdi, %rax\n"
	"\tmov %rsi, %rdi\n"
	"\tmov %rdx, %rsi\n"
	"\tmov %rcx, %rdx\n"
	"\tmov %r8, %r10\n"
	"\tmov %r9, %r8\n"
	"\tmov 8(%rsp), %r9\n"
	"\tsyscall\n"
	"\tcmp $-4095, %rax\n"
	"\tjae 1f\n"
	"\tret\n"
	"1:\tmov %rax, %rdi\n"
	"\tjmp dioshim_syscall_failed\n"
	".cfi_endproc\n"
	".size sys_call, .-sys_call\n"
	".popsection\n");

/* The raw path's failure: errno from the kernel's answer. */
__attribute__((used, visibility("hidden"))) long
dioshim_syscall_failed(long neg)
{
	errno = (int)-neg;
	return -1;
}
#endif
