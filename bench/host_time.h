/* host_time.h - host time per call, enqueue only, as bench/host_cost.c and
 * tests/gpu/test_plan.c take it: samples of back-to-back calls timed with
 * host_now_us, summed up by host_spread as their median, min and max.
 * Header-only and free of the library, so host_cost.c still builds on its
 * own against an older library (bench/device_run.sh's A/B). */
#ifndef TK_BENCH_HOST_TIME_H
#define TK_BENCH_HOST_TIME_H

#include <stdlib.h>
#include <time.h>

/* CLOCK_MONOTONIC, in microseconds. */
static inline double host_now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e6 * (double)t.tv_sec + 1e-3 * (double)t.tv_nsec;
}

static inline int host_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Sorts the n samples t and gives their median, min and max in out[3]. */
static inline void host_spread(double *t, int n, double out[3])
{
    qsort(t, (size_t)n, sizeof t[0], host_cmp_double);
    out[0] = t[n / 2];
    out[1] = t[0];
    out[2] = t[n - 1];
}

#endif
