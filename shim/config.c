// SPDX-License-Identifier: MIT
/*
 * Configuration from the environment.  Read once, in the constructor (or by
 * the first wrapper that runs before it); malformed values keep the default
 * and say so in the log, since the application must run as it would without
 * the shim.
 *
 * Layer L0: calls only log.c (below it) and libc.
 */
#define _GNU_SOURCE
#include "config.h"

#include "log.h"

#include "dioshim/layout.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>

struct config config = {
	.reserve = 1u << 20,
	.reserve_max = 64u << 20,
	.fs_mask = CONFIG_FS_EXT4 | CONFIG_FS_XFS,
	.rangelock = true,
	.stripes = DIOSHIM_STRIPES,
	.stripe_shift = 12,
	.prefill = CONFIG_PREFILL_AUTO,
	.prefill_chunk = 1u << 20,
	.shm_dir = "/dev/shm",
};

bool config_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return false;
	switch (tolower((unsigned char)*end)) {
	case 'k':
		shift = 10;
		break;
	case 'm':
		shift = 20;
		break;
	case 'g':
		shift = 30;
		break;
	case 't':
		shift = 40;
		break;
	case '\0':
		break;
	default:
		return false;
	}
	if (shift) {
		end++;
		if (tolower((unsigned char)*end) == 'i')
			end++;
		if (tolower((unsigned char)*end) == 'b')
			end++;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

uint32_t config_fs_bit(long f_type)
{
	switch ((unsigned long)f_type) {
	case EXT4_SUPER_MAGIC:
		return CONFIG_FS_EXT4;
	case XFS_SUPER_MAGIC:
		return CONFIG_FS_XFS;
	case TMPFS_MAGIC:
		return CONFIG_FS_TMPFS;
	}
	return 0;
}

static uint32_t parse_fs_list(const char *s)
{
	uint32_t mask = 0;
	char word[16];

	while (*s) {
		size_t n = strcspn(s, ", ");

		if (n && n < sizeof(word)) {
			memcpy(word, s, n);
			word[n] = '\0';
			if (!strcasecmp(word, "ext4"))
				mask |= CONFIG_FS_EXT4;
			else if (!strcasecmp(word, "xfs"))
				mask |= CONFIG_FS_XFS;
			else if (!strcasecmp(word, "tmpfs"))
				mask |= CONFIG_FS_TMPFS;
			else
				log_event(LOG_CONFIG, NULL,
					  "DIOSHIM_FS: unknown filesystem '%s'",
					  word);
		}
		s += n;
		s += strspn(s, ", ");
	}
	return mask;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static void load_size(const char *name, uint64_t *dst)
{
	const char *v = getenv(name);
	uint64_t n;

	if (!v)
		return;
	if (config_parse_size(v, &n) && n >= 4096)
		*dst = n;
	else
		log_event(LOG_CONFIG, NULL,
			  "%s=%s: not a size of at least 4k, keeping %llu",
			  name, v, (unsigned long long)*dst);
}

void config_load(void)
{
	const char *v;

	/* The log first, so that what follows can complain. */
	if ((v = getenv("DIOSHIM_LOG")) && *v)
		log_set_path(v);
	if ((v = getenv("DIOSHIM_DISABLE")) && *v && strcmp(v, "0"))
		config.disable = true;
	if ((v = getenv("DIOSHIM_GROUP_COMMIT")) && *v)
		config.group_commit = strcmp(v, "0") != 0;
	if ((v = getenv("DIOSHIM_RANGELOCK")) && *v)
		config.rangelock = strcmp(v, "0") != 0;
	if ((v = getenv("DIOSHIM_ENGAGE"))) {
		if (!strcmp(v, "always"))
			config.engage_always = true;
		else if (strcmp(v, "contention"))
			log_event(LOG_CONFIG, NULL,
				  "DIOSHIM_ENGAGE=%s: contention or always", v);
	}
	if ((v = getenv("DIOSHIM_PREFILL"))) {
		if (!strcmp(v, "auto"))
			config.prefill = CONFIG_PREFILL_AUTO;
		else if (!strcmp(v, "on") || !strcmp(v, "1"))
			config.prefill = CONFIG_PREFILL_ON;
		else if (!strcmp(v, "off") || !strcmp(v, "0"))
			config.prefill = CONFIG_PREFILL_OFF;
		else
			log_event(LOG_CONFIG, NULL,
				  "DIOSHIM_PREFILL=%s: auto, on or off", v);
	}
	if ((v = getenv("DIOSHIM_PREFILL_CHUNK"))) {
		uint64_t n;

		if (config_parse_size(v, &n) && n >= 4096 && !(n & (n - 1)))
			config.prefill_chunk = n;
		else
			log_event(
				LOG_CONFIG, NULL,
				"DIOSHIM_PREFILL_CHUNK=%s: a power of two, at "
				"least 4k",
				v);
	}
	if ((v = getenv("DIOSHIM_STRIPES"))) {
		uint64_t n;

		if (config_parse_size(v, &n) && n >= 1 && n <= DIOSHIM_STRIPES &&
		    !(n & (n - 1)))
			config.stripes = (uint32_t)n;
		else
			log_event(LOG_CONFIG, NULL,
				  "DIOSHIM_STRIPES=%s: a power of two up to %d",
				  v, DIOSHIM_STRIPES);
	}
	if ((v = getenv("DIOSHIM_STRIPE_SIZE"))) {
		uint64_t n;

		if (config_parse_size(v, &n) && n >= 512 && n <= (1u << 30) &&
		    !(n & (n - 1)))
			config.stripe_shift = (uint32_t)__builtin_ctzll(n);
		else
			log_event(LOG_CONFIG, NULL,
				  "DIOSHIM_STRIPE_SIZE=%s: a power of two, 512 "
				  "to 1G",
				  v);
	}
	load_size("DIOSHIM_RESERVE", &config.reserve);
	load_size("DIOSHIM_RESERVE_MAX", &config.reserve_max);
	if (config.reserve_max < config.reserve)
		config.reserve_max = config.reserve;
	if ((v = getenv("DIOSHIM_FS")))
		config.fs_mask = parse_fs_list(v);
	if ((v = getenv("DIOSHIM_SHM_DIR")) && *v == '/')
		copy_str(config.shm_dir, sizeof(config.shm_dir), v);
	/* Segments follow their files' modes now; the old setting is
	 * accepted and ignored, so that a unit file that sets it still runs. */
	if (getenv("DIOSHIM_SHM_MODE"))
		log_event(
			LOG_CONFIG, NULL,
			"DIOSHIM_SHM_MODE is ignored: a segment's mode follows "
			"its file's");
}
