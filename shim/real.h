/* SPDX-License-Identifier: MIT */
/* The real libc functions behind the wrappers: real_open, real_pwrite, ... */
#ifndef DIOSHIM_REAL_H
#define DIOSHIM_REAL_H

#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <linux/types.h>
#include <signal.h>
#include <time.h>

/* What the LAZY entries take (libaio.h, liburing.h: not included here;
 * io_context_t is a struct io_context *). */
struct io_context;
struct iocb;
struct io_event;
struct io_uring;
struct io_uring_cqe;
struct __kernel_timespec;

/*
 * A LAZY entry: real_<name>, NULL until resolved; real_lazy_<name>()
 * resolves it (real.c); lazy_<name>() is the function, resolved on first
 * use.
 */
#define REAL(ret, name, params) extern ret(*real_##name) params;
#define COMPAT(ret, name, params, version) REAL(ret, name, params)
#define LAZY(ret, name, params)                                        \
	extern ret(*real_##name) params;                               \
	ret(*real_lazy_##name(void)) params;                           \
	static inline ret(*lazy_##name(void)) params                   \
	{                                                              \
		ret(*fn) params =                                      \
			__atomic_load_n(&real_##name, __ATOMIC_ACQUIRE); \
		return __builtin_expect(fn != NULL, 1)                 \
			       ? fn                                    \
			       : real_lazy_##name();                   \
	}
#include "real.def"
#undef REAL
#undef COMPAT
#undef LAZY

/* Resolve every real_* pointer, once; safe to call from any thread, any
 * time, before or after the constructor.  Every REAL and COMPAT name in
 * real.def is exported by glibc 2.36, so a wrapper only runs where its real
 * function exists; the LAZY ones are resolved one by one, on first use. */
void real_resolve(void);

#endif
