/* SPDX-License-Identifier: MIT */
/* Configuration, read once from the environment when the library loads. */
#ifndef DIOSHIM_CONFIG_H
#define DIOSHIM_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct config {
	bool disable; /* DIOSHIM_DISABLE: pass every call through */
	bool group_commit; /* DIOSHIM_GROUP_COMMIT: share concurrent syncs */
	bool rangelock; /* DIOSHIM_RANGELOCK: the extent-lock table */
	uint32_t stripes; /* DIOSHIM_STRIPES: power of two, <= the layout's */
	uint32_t stripe_shift; /* log2 of DIOSHIM_STRIPE_SIZE */
	int prefill; /* DIOSHIM_PREFILL: CONFIG_PREFILL_* */
	bool engage_always; /* DIOSHIM_ENGAGE=always: reserve and prefill
			     * from the first write, not on contention */
	uint64_t prefill_chunk; /* DIOSHIM_PREFILL_CHUNK: power of two */
	uint64_t reserve; /* DIOSHIM_RESERVE: first and smallest chunk */
	uint64_t reserve_max; /* DIOSHIM_RESERVE_MAX: largest chunk */
	uint32_t fs_mask; /* DIOSHIM_FS: CONFIG_FS_* bits */
	char shm_dir[256]; /* DIOSHIM_SHM_DIR: where segments live */
};

enum { CONFIG_PREFILL_AUTO, CONFIG_PREFILL_ON, CONFIG_PREFILL_OFF };

#define CONFIG_FS_EXT4 0x1u
#define CONFIG_FS_XFS 0x2u
#define CONFIG_FS_TMPFS 0x4u

extern struct config config;

/* Fill config from the environment (no heap: safe in a constructor). */
void config_load(void);

/* Parse "4096", "64k", "1M", "2g" into bytes; false if malformed. */
bool config_parse_size(const char *s, uint64_t *out);

/* CONFIG_FS_* bit for a statfs f_type, 0 if dioshim does not know it. */
uint32_t config_fs_bit(long f_type);

#endif
