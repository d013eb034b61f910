// SPDX-License-Identifier: MIT
/* Configuration parsing: sizes with suffixes, filesystem lists, bad values
 * keep the defaults. */
#define _GNU_SOURCE
#include "unit.h"

#include <linux/magic.h>

/* The defaults config.def writes down are the ones config.c starts
 * from: set in the environment, each leaves the configuration as it was. */
static void defaults_are_the_tables(void)
{
	struct config before = config;

#define CONFIG(name, def, what)                                          \
	if (*def)                                                        \
		setenv(#name, def, 1);
#include "config.def"
#undef CONFIG
	config_load();
	CHECK_EQ(config.disable, before.disable);
	CHECK_EQ(config.group_commit, before.group_commit);
	CHECK_EQ(config.rangelock, before.rangelock);
	CHECK_EQ(config.stripes, before.stripes);
	CHECK_EQ(config.stripe_shift, before.stripe_shift);
	CHECK_EQ(config.prefill, before.prefill);
	CHECK_EQ(config.engage_always, before.engage_always);
	CHECK_EQ(config.prefill_chunk, before.prefill_chunk);
	CHECK_EQ(config.reserve, before.reserve);
	CHECK_EQ(config.reserve_max, before.reserve_max);
	CHECK_EQ(config.fs_mask, before.fs_mask);
	CHECK(!strcmp(config.shm_dir, before.shm_dir));
#define CONFIG(name, def, what) unsetenv(#name);
#include "config.def"
#undef CONFIG
}

int main(void)
{
	uint64_t v;

	defaults_are_the_tables();

	CHECK(config_parse_size("4096", &v) && v == 4096);
	CHECK(config_parse_size("64k", &v) && v == 65536);
	CHECK(config_parse_size("1M", &v) && v == 1 << 20);
	CHECK(config_parse_size("2GiB", &v) && v == 2ull << 30);
	CHECK(config_parse_size("3gb", &v) && v == 3ull << 30);
	CHECK(!config_parse_size("", &v));
	CHECK(!config_parse_size("-1", &v));
	CHECK(!config_parse_size("12q", &v));
	CHECK(!config_parse_size("1Mx", &v));
	CHECK(!config_parse_size("99999999999999999999", &v));
	CHECK(!config_parse_size("20000000T", &v));

	CHECK_EQ(config_fs_bit(EXT4_SUPER_MAGIC), CONFIG_FS_EXT4);
	CHECK_EQ(config_fs_bit(XFS_SUPER_MAGIC), CONFIG_FS_XFS);
	CHECK_EQ(config_fs_bit(TMPFS_MAGIC), CONFIG_FS_TMPFS);
	CHECK_EQ(config_fs_bit(BTRFS_SUPER_MAGIC), 0);

	/* Defaults. */
	config_load();
	CHECK_EQ(config.fs_mask, CONFIG_FS_EXT4 | CONFIG_FS_XFS);
	CHECK_EQ(config.reserve, 1 << 20);
	CHECK_EQ(config.reserve_max, 64 << 20);
	CHECK(!config.disable);

	setenv("DIOSHIM_FS", "xfs, tmpfs,btrfs", 1);
	setenv("DIOSHIM_RESERVE", "256k", 1);
	setenv("DIOSHIM_RESERVE_MAX", "128k", 1); /* below RESERVE: raised */
	setenv("DIOSHIM_DISABLE", "1", 1);
	config_load();
	CHECK_EQ(config.fs_mask, CONFIG_FS_XFS | CONFIG_FS_TMPFS);
	CHECK_EQ(config.reserve, 256 << 10);
	CHECK_EQ(config.reserve_max, 256 << 10);
	CHECK(config.disable);

	setenv("DIOSHIM_RESERVE", "bogus", 1); /* keeps the last good value */
	setenv("DIOSHIM_DISABLE", "0", 1);
	setenv("DIOSHIM_SHM_MODE", "0660", 1); /* ignored, and runs */
	config.disable = false;
	config_load();
	CHECK_EQ(config.reserve, 256 << 10);
	CHECK(!config.disable);
	return unit_result();
}
