/* SPDX-License-Identifier: MIT */
/*
 * Timed batches for the per-call benchmarks (callcost.c, aiocost.c): a
 * clock, and the report of a run, the fastest batch, the 10th percentile
 * and the median.  The fastest batches are the ones no other process
 * interrupted: on a busy machine they tell a few nanoseconds apart where
 * a whole program's run time cannot.
 */
#ifndef DIOSHIM_BENCH_BATCHES_H
#define DIOSHIM_BENCH_BATCHES_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* t[0, n): each batch's time per call; sorts it, prints the report. */
static void batches_report(double *t, int n)
{
	qsort(t, (size_t)n, sizeof(*t), by_value);
	printf("%.1f %.1f %.1f\n", t[0], t[n / 10], t[n / 2]);
}

#endif
