/* SPDX-License-Identifier: MIT */
/* The real libc functions behind the wrappers: real_open, real_pwrite, ... */
#ifndef DIOSHIM_REAL_H
#define DIOSHIM_REAL_H

#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#define REAL(ret, name, params) extern ret(*real_##name) params;
#define COMPAT(ret, name, params, version) REAL(ret, name, params)
#include "real.def"
#undef REAL
#undef COMPAT

/* Resolve every real_* pointer, once; safe to call from any thread, any
 * time, before or after the constructor.  Every name in real.def is exported by
 * glibc 2.36, so a wrapper only runs where its real function exists. */
void real_resolve(void);

#endif
