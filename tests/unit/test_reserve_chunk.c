// SPDX-License-Identifier: MIT
/* The reservation chunk policy: grows with the append rate toward one
 * reservation per period, at most doubling or halving per step, inside
 * [RESERVE, RESERVE_MAX], and never more than 1/16 of free space. */
#define _GNU_SOURCE
#include "unit.h"

#include "reserve.h"

#define MiB (1ull << 20)

int main(void)
{
	const uint64_t min = 1 * MiB, max = 64 * MiB, ms = 1000000;
	uint64_t c;

	/* 1 MiB served in 10 ms = 100 MiB/s: a 250 ms period wants 25 MiB,
	 * but a step at most doubles. */
	CHECK_EQ(reserve_chunk_next(1 * MiB, 1 * MiB, 10 * ms, min, max),
		 2 * MiB);
	/* Growth repeats until the rate's target is reached... */
	c = 1 * MiB;
	for (int i = 0; i < 10; i++)
		c = reserve_chunk_next(c, c, c / MiB * 10 * ms, min, max);
	CHECK_EQ(c, 25 * MiB);
	/* ... and stops at the maximum. */
	c = 1 * MiB;
	for (int i = 0; i < 20; i++)
		c = reserve_chunk_next(c, c, 1 * ms, min, max);
	CHECK_EQ(c, max);
	/* A slow appender shrinks it, at most by half per step. */
	CHECK_EQ(reserve_chunk_next(64 * MiB, 64 * MiB, 100000 * ms, min, max),
		 32 * MiB);
	CHECK_EQ(reserve_chunk_next(2 * MiB, 2 * MiB, 100000 * ms, min, max),
		 1 * MiB);
	CHECK_EQ(reserve_chunk_next(1 * MiB, 1 * MiB, 100000 * ms, min, max),
		 1 * MiB);
	/* Results are whole multiples of the minimum. */
	c = reserve_chunk_next(8 * MiB, 5 * MiB + 12345, 250 * ms, min, max);
	CHECK_EQ(c % min, 0);
	CHECK(c >= 5 * MiB && c <= 6 * MiB);
	/* Degenerate inputs do not divide by zero or overflow. */
	CHECK_EQ(reserve_chunk_next(1 * MiB, UINT64_MAX, 0, min, max), 2 * MiB);
	CHECK_EQ(reserve_chunk_next(1 * MiB, 0, 0, min, max), min);

	/* Free space: a chunk is at most 1/16 of what is free, in blocks. */
	/* 1/16 of what would be free without the reservations, less the
	 * others'; the XFS throttle on what is free now. */
	CHECK_EQ(reserve_room(1024 * MiB, 0, 0, 4096), 64 * MiB);
	CHECK_EQ(reserve_room(160 * MiB, 0, 0, 4096), 10 * MiB);
	CHECK_EQ(reserve_room(150 * MiB, 0, 10 * MiB, 4096), 0);
	CHECK_EQ(reserve_room(156 * MiB, 0, 4 * MiB, 4096), 6 * MiB);
	CHECK_EQ(reserve_room(16 * 4096 + 100, 0, 0, 4096), 4096);
	CHECK_EQ(reserve_room(4096, 0, 0, 4096), 0);
	CHECK_EQ(reserve_room(50 * 1024 * MiB, 100 * 1024 * MiB, 0, 4096),
		 3200 * MiB);
	CHECK_EQ(reserve_room(4800 * MiB, 100 * 1024 * MiB, 0, 4096),
		 75 * MiB); /* < 5%: a quarter */
	CHECK_EQ(reserve_room(3840 * MiB, 100 * 1024 * MiB, 0, 4096),
		 30 * MiB); /* < 4%: an eighth */
	CHECK_EQ(reserve_room(1536 * MiB, 100 * 1024 * MiB, 0, 4096),
		 3 * MiB); /* < 2%: a thirty-second */
	CHECK_EQ(reserve_room(1000 * MiB, 100 * 1024 * MiB, 0, 4096),
		 0); /* < 1% */
	return unit_result();
}
