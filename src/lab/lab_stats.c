/* lab_stats.c - the arithmetic of bench: percentiles, TFLOP/s, peak. */
#include <stdlib.h>
#include "lab.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tk_lab_percentile(double *x, int n, double q)
{
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    if (q <= 0.0 || n == 1)
        return x[0];
    if (q >= 1.0)
        return x[n - 1];
    double pos = q * (n - 1);
    int lo = (int)pos;
    double f = pos - lo;
    return lo + 1 < n ? x[lo] + f * (x[lo + 1] - x[lo]) : x[lo];
}

/* A GEMM does M*N*K multiply-adds, 2 flops each; ms * 1e9 turns flop/ms into TFLOP/s. */
double tk_lab_tflops(int64_t m, int64_t n, int64_t k, double ms)
{
    return 2.0 * (double)m * (double)n * (double)k / (ms * 1e9);
}

/* Dense bf16 tensor throughput per SM per clock (flop = 2 x FMA):
 * Hopper 4096 (4 tensor cores x 512 FMA), A100 2048, the GA10x/AD10x
 * consumer parts (sm_86, sm_87, sm_89) 1024 with fp32 accumulation. */
int tk_lab_flop_per_clk(int sm)
{
    switch (sm) {
    case 90: return 4096;
    case 80: return 2048;
    case 86: case 87: case 89: return 1024;
    default: return 0;
    }
}

double tk_lab_peak_tflops(int sm, int sm_count, int clock_khz)
{
    return (double)sm_count * tk_lab_flop_per_clk(sm) * (double)clock_khz * 1e3 / 1e12;
}

int tk_lab_row_unstable(const tk_lab_bench_row *r)
{
    return r->ms_p80 > 1.25 * r->ms_p20;
}

static double rel_spread(const tk_lab_bench_row *r)
{
    return r->ms_median > 0 ? (r->ms_p80 - r->ms_p20) / r->ms_median : 0.0;
}

int tk_lab_attempt_better(const tk_lab_bench_row *cand, const tk_lab_bench_row *best)
{
    return rel_spread(cand) < rel_spread(best);
}
