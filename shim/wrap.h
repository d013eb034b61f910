/* SPDX-License-Identifier: MIT */
/*
 * What the wrappers share (L5, private to the wrap_*.c files).  Each
 * wrapper decides one thing — is this call the shim's? — and hands it to a
 * mechanism; everything else goes to the real function untouched.  A
 * wrapper entered while this thread is already inside the shim (a signal
 * handler) passes its call through.  The checks are serve.h's and lib.h's
 * static inline ones: the wrappers' fast path.
 *
 * Only the interposed names are exported (-fvisibility=hidden elsewhere).
 * The library is not built with _FILE_OFFSET_BITS=64: open and pread would
 * then be exported as open64 and pread64, and the plain names missed.
 */
#ifndef DIOSHIM_WRAP_H
#define DIOSHIM_WRAP_H

#include "async.h"
#include "lib.h"
#include "real.h"
#include "serve.h"

#define EXPORT __attribute__((visibility("default")))

/* Every wrapper's prototype, from the one table: a wrapper whose
 * definition disagrees with its entry does not compile. */
#define REAL(ret, name, params) EXPORT ret name params;
#define COMPAT(ret, name, params, version) REAL(ret, name, params)
#define RAW(ret, name, params) REAL(ret, name, params)
#define VIA(ret, name, params, via) REAL(ret, name, params)
#include "real.def"
#undef REAL
#undef COMPAT
#undef RAW
#undef VIA

/*
 * Before the shim's close of a file, or a size it answers by path:
 * completions the program consumed from a ring itself (QEMU reads the aio
 * ring; liburing's peek is inline) are applied first, so that the last
 * close finds no write in flight and cuts the reserved tail as it leaves.
 * Outside BOOKKEEP, which makes the shim busy and the settle a no-op.
 */
static inline void rings_settle(void)
{
	if (shim_on())
		async_settle();
}

#endif
