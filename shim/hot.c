// SPDX-License-Identifier: MIT
/*
 * What every intercepted read and write looks at, on one page.
 *
 * A program that never uses O_DIRECT still goes through the wrappers on
 * every read and write, and the wrappers stop at a few loads: the exec
 * flag, the fd's entry, its description, the hints and the real
 * function.  Those loads cost little, the pages they sit on do: on a
 * kernel with page-table isolation and no PCID every system call empties
 * the TLB, and each distinct page the next call touches is a page walk
 * again (about 0.4% of a 512-byte write() each, bench "overhead").  So the
 * variables those loads read are defined here, in one section, in this
 * order, from a page boundary: the first chunk of the fd table comes
 * last, and its first few hundred entries share the page
 * (test_fdtable checks the layout).  Each is declared where it belongs.
 *
 * Layer L0: data only; it includes the headers of the layers whose
 * variables it places, for their types (shim/layers says why).
 */
#define _GNU_SOURCE
#include "fdtable.h"
#include "real.h"
#include "segment.h"
#include "shm.h"

/* One section of this file alone, emitted in the order written. */
#define HOT __attribute__((section(".bss.dioshim_hot"), no_reorder))

HOT __attribute__((aligned(4096))) int segment_exec_pending;
HOT int hint_count;
HOT struct dioshim_hint *hint_set[HINTS_MAX];

#define REAL(ret, name, params) HOT ret(*real_##name) params;
#define COMPAT(ret, name, params, version) REAL(ret, name, params)
#include "real.def"
#undef REAL
#undef COMPAT

HOT struct ofd fdt_mark[FDT_MARKS];
HOT fd_entry fdt_chunk0[FDT_CHUNK];
