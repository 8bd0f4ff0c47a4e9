/* plan.c - how many chunks: a replay of each operation's pipeline on a
 * model of one chunk's GEMM and transfer times, for every chunk count the
 * block allows. Pure (no GPU, no NCCL): tests/host/test_dist.c checks it.
 *
 * One chunk of n rows: its GEMM takes gemm_launch_us + gemm_us * n' / m,
 * with n' the rows rounded up to TKD_CHUNK_ROWS (a chunk pays for whole
 * tiles), and its transfer comm_launch_us + n * row_bytes / link. More
 * chunks start the pipeline sooner (the first transfer, or the first
 * GEMM, is shorter) and pay more launches; the replay weighs both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dist.h"

static double gemm_time(const tkd_plan_in *in, int64_t rows)
{
    if (rows <= 0 || in->m <= 0)
        return 0.0;
    int64_t padded = (rows + TKD_CHUNK_ROWS - 1) / TKD_CHUNK_ROWS * TKD_CHUNK_ROWS;
    if (padded > in->m)
        padded = in->m;
    return in->gemm_launch_us + in->gemm_us * (double)padded / (double)in->m;
}

static double comm_time(const tkd_plan_in *in, int64_t rows)
{
    double bw = in->link_bytes_per_us > 0 ? in->link_bytes_per_us : 1.0;
    return in->comm_launch_us + (double)rows * in->row_bytes / bw;
}

static double max2(double x, double y) { return x > y ? x : y; }

double tkd_plan_time(const tkd_plan_in *in, int chunks)
{
    int64_t b[TKD_MAX_CHUNKS_ASKED + 1];
    if (chunks > TKD_MAX_CHUNKS_ASKED)
        chunks = TKD_MAX_CHUNKS_ASKED;
    int n = tkd_chunk_bounds(in->block_rows, chunks < 1 ? 1 : chunks, b);
    int steps = in->nranks - 1;
    if (n == 0)
        return 0.0;
    if (in->op == TK_DIST_ALL_GATHER_GEMM) {
        /* the own block at once from 0; each arrived chunk after the one before */
        double comp = gemm_time(in, in->block_rows), comm = 0.0;
        for (int s = 0; s < steps; s++)
            for (int i = 0; i < n; i++) {
                int64_t rows = b[i + 1] - b[i];
                comm += comm_time(in, rows);
                comp = max2(comp, comm) + gemm_time(in, rows);
            }
        return comp;
    }
    /* reduce-scatter: the peers' chunks computed in order, each sent once
     * computed and the transfer before it done; the own block last; then the sum */
    double comp = 0.0, comm = 0.0;
    for (int s = 0; s < steps; s++)
        for (int i = 0; i < n; i++) {
            int64_t rows = b[i + 1] - b[i];
            comp += gemm_time(in, rows);
            comm = max2(comm, comp) + comm_time(in, rows);
        }
    comp += gemm_time(in, in->block_rows);
    return max2(comp, comm) + in->sum_us;
}

double tkd_plan_sequential(const tkd_plan_in *in)
{
    double rb = in->seq_row_bytes > 0 ? in->seq_row_bytes : in->row_bytes;
    double bw = in->link_bytes_per_us > 0 ? in->link_bytes_per_us : 1.0;
    double comm = in->nranks > 1 ? in->comm_launch_us + (double)(in->nranks - 1) * in->block_rows * rb / bw : 0.0;
    return comm + in->gemm_launch_us + in->gemm_us;
}

int tkd_plan_chunks(const tkd_plan_in *in, double *est)
{
    int best = 1;
    double best_t = tkd_plan_time(in, 1);
    for (int c = 2; c <= TKD_MAX_CHUNKS; c++) {
        if (in->block_rows / c < TKD_CHUNK_ROWS)
            break;
        double t = tkd_plan_time(in, c);
        if (t < best_t * 0.99) {
            best = c;
            best_t = t;
        }
    }
    if (est)
        *est = best_t;
    return best;
}

/* bound i of n over rows, rounded down to a multiple of g */
static int64_t bound(int64_t rows, int chunks, int i, int64_t g)
{
    int64_t x = (int64_t)((__int128)rows * i / chunks);
    return x / g * g;
}

int tkd_chunk_bounds(int64_t rows, int chunks, int64_t *bounds)
{
    if (rows <= 0)
        return 0;
    if (chunks < 1)
        chunks = 1;
    /* the coarsest granule at which every chunk keeps at least one granule */
    int64_t g = rows / chunks >= TKD_CHUNK_ROWS ? TKD_CHUNK_ROWS : rows / chunks >= 8 ? 8 : 1;
    int n = 0;
    bounds[0] = 0;
    for (int i = 1; i < chunks; i++) {
        int64_t x = bound(rows, chunks, i, g);
        if (x > bounds[n] && x < rows)
            bounds[++n] = x;
    }
    bounds[++n] = rows;
    return n;
}

int tkd_chunks_choose(int32_t asked, const char *env, int planned, int *from, char *why, size_t len)
{
    if (asked < 0 || asked > TKD_MAX_CHUNKS_ASKED) {
        snprintf(why, len, "desc->chunks: %d is out of range (0: planned, or 1..%d)", (int)asked,
                 TKD_MAX_CHUNKS_ASKED);
        return -1;
    }
    if (asked > 0) {
        *from = 1;
        return asked;
    }
    if (env && *env) {
        char *end = NULL;
        long v = strtol(env, &end, 10);
        if (!end || *end || v < 1 || v > TKD_MAX_CHUNKS_ASKED) {
            snprintf(why, len, "$TK_DIST_CHUNKS: '%s' is not a chunk count (1..%d)", env, TKD_MAX_CHUNKS_ASKED);
            return -1;
        }
        *from = 2;
        return (int)v;
    }
    *from = 0;
    return planned < 1 ? 1 : planned;
}
