// SPDX-License-Identifier: MIT
/*
 * Resolution of the real libc symbols, driven by real.def.
 *
 * A wrapper can run before our constructor (another library's constructor
 * opens a file), so every wrapper makes sure the library is initialised
 * first (lib.h); resolution runs once, under pthread_once.  Only
 * symbols glibc 2.36 exports are named: dlsym of a missing name mallocs.
 *
 * Layer L0: calls only the dynamic linker (dlsym, dlvsym).
 */
#define _GNU_SOURCE
#include "real.h"

#include <dlfcn.h>
#include <pthread.h>

/* The REAL and COMPAT pointers are defined in hot.c, on the page every
 * read and write looks at. */

static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static void real_resolve_once(void)
{
#define LAZY(ret, name, params)
#define REAL(ret, name, params) \
	real_##name = (ret(*) params)dlsym(RTLD_NEXT, #name);
#define COMPAT(ret, name, params, version) \
	real_##name = (ret(*) params)dlvsym(RTLD_NEXT, #name, version);
#include "real.def"
#undef REAL
#undef COMPAT
#undef LAZY
}

void real_resolve(void)
{
	pthread_once(&real_once, real_resolve_once);
}

/* The LAZY entries' pointers (off the hot page: used per submission, not
 * per read or write) and their resolvers. */
#define REAL(ret, name, params)
#define COMPAT(ret, name, params, version)
#define LAZY(ret, name, params)                                        \
	ret(*real_##name) params;                                      \
	ret(*real_lazy_##name(void)) params                            \
	{                                                              \
		if (!__atomic_load_n(&real_##name, __ATOMIC_ACQUIRE))  \
			__atomic_store_n(&real_##name,                 \
					 (ret(*) params)dlsym(RTLD_NEXT, \
							      #name),  \
					 __ATOMIC_RELEASE);            \
		return real_##name;                                    \
	}
#include "real.def"
#undef REAL
#undef COMPAT
#undef LAZY
