/* cost.c - the rough cost model of tk_candidates (tilekit.h says what it
 * is and is not): launch overhead plus the longer of compute and memory
 * time. Pure arithmetic on the device description, so the CPU tests check
 * it with hand-made devices. */
#include <math.h>
#include "internal.h"

/* What one launch costs on the GPU's timeline at small sizes (route.c: 3-4
 * us a launch, measured on the H100). */
#define TK_COST_LAUNCH_US 3.0

/* Dense bf16 tensor flop per SM per clock (2 x FMA): Hopper 4096 (taken
 * for anything newer too), A100 2048, the sm_86/87/89 parts 1024 with fp32
 * accumulation. The lab's tk_lab_flop_per_clk has the same numbers for the
 * bench's percent of peak. 0: not known. */
static double flop_per_clk(int sm)
{
    return sm >= 90 ? 4096 : sm == 80 ? 2048 : sm > 80 ? 1024 : 0;
}

double tk_cost_us(const tk_route *r, const tk_args *a, const tk_device *dev)
{
    const tk_kernel *k = r->k;
    const double fpc = flop_per_clk(dev->sm), pct = k->family->est_pct;
    /* DRAM: two transfers a memory clock over the bus (DDR and HBM alike) */
    const double bw = 2.0 * (double)dev->mem_clock_khz * 1e3 * (double)dev->mem_bus_bits / 8.0;
    if (fpc <= 0 || pct <= 0 || dev->clock_khz <= 0 || dev->sm_count <= 0 || bw <= 0)
        return 0.0;
    /* one SM's flop/s at the family's share of the peak */
    const double sm_flops = fpc * (double)dev->clock_khz * 1e3 * pct / 100.0;
    const double m = (double)a->m, n = (double)a->n, kk = (double)a->k;
    double compute;
    if (k->bm > 0 && k->bn > 0) {
        /* whole waves of output tiles: the last, partly empty, costs a full one */
        const double tiles = ceil(m / k->bm) * ceil(n / k->bn);
        compute = ceil(tiles / dev->sm_count) * 2.0 * k->bm * k->bn * kk / sm_flops;
    } else {
        compute = 2.0 * m * n * kk / (sm_flops * dev->sm_count);
    }
    /* A and B read once, C written and, with beta != 0, read; each copy
     * reads and writes its operand once more (C staged: out, and in when
     * read), in one launch for A and B (and C in) and one for C out; FP8
     * operands are bytes, and their transposed copies one more launch */
    const double cb = a->c_type == TK_F32 ? 4.0 : 2.0, c_rw = a->beta != 0.0f ? 2.0 : 1.0;
    const double ab = a->fp8 ? 1.0 : 2.0;
    double bytes = ab * (m * kk + kk * n) + cb * m * n * c_rw;
    int launches = 1;
    if (r->copy[0])
        bytes += 2.0 * ab * m * kk;
    if (r->copy[1])
        bytes += 2.0 * ab * kk * n;
    if ((r->copy[0] && !r->transposed[0]) || (r->copy[1] && !r->transposed[1]) || (r->copy[2] && a->beta != 0.0f))
        launches++;
    if (r->transposed[0] || r->transposed[1])
        launches++;
    if (r->copy[2]) {
        bytes += 2.0 * cb * m * n * c_rw;
        launches++;
    }
    const double memory = bytes / bw;
    return TK_COST_LAUNCH_US * launches + 1e6 * fmax(compute, memory);
}
