/* dist_bench.c - the distributed GEMMs against their sequential baseline
 * (issue 41), one process per GPU (tests/gpu/dist_fork.h).
 *
 * For each projection of Llama-3-70B split over the ranks (hidden 8192,
 * ffn 28672, 64 query and 8 key/value heads of 128) and each token count:
 *   gemm        tilekit's GEMM of the whole local product alone (a handle
 *               of its own: every SM, split-K as by default);
 *   comm        the NCCL collective alone: ncclAllGather of the token
 *               shards (column-parallel: qkv, gate_up), ncclReduceScatter
 *               (sum) of the bf16 products (row-parallel: o, down);
 *   sequential  the collective, then the GEMM (or the GEMM, then the
 *               collective), on one stream;
 *   overlapped  tk_dist_all_gather_gemm / tk_dist_gemm_reduce_scatter;
 * each the median of --samples timings (CUDA events, after a barrier and
 * an L2 flush), the slowest rank's. hidden = (gemm + comm - overlapped) /
 * comm: the share of the communication the overlap hid (1: all of it).
 * Every overlapped result is verified against the single-GPU product of
 * the gathered operands (fp32, tk_gemm on the gathered A, or the sum of
 * every rank's A_r B_r by fp32 accumulation): the global similarity
 * 1 - 2 sum(xy) / sum(x^2 + y^2) (DeepGEMM's), which must stay below 1e-4.
 *
 *   build/dist_bench [--ranks 2] [--ops qkv,o,gate_up,down] [--tokens 2048,4096,8192,16384,32768]
 *                    [--chunks 0,1,2,4,8] [--partial f32,bf16] [--transport p2p,ce] [--comm-sms N]
 *                    [--samples 15] [--kernel NAME] [--probe] [--json out/dist_bench.json]
 *
 * --chunks and --partial are lists: each shape's baselines (gemm, comm,
 * sequential) are timed once, then the overlapped call once per chunk
 * count (0: the plan's) and, for the reduce-scatters, per partial type
 * (f32, bf16; the all-gathers have none), one line each: the sweep of
 * docs/NOTES.md's issue 41 in one run. Defaults: 0 (planned) and f32.
 * --transport is a list too (tk_dist_set_transport: p2p, ce, auto), each
 * variant run with each; default p2p,ce, where the CE lines are left out
 * (a note says why) when the copy engines cannot be had; named
 * explicitly, a CE that cannot be had is a failure.
 * --comm-sms N caps the GEMMs of the overlapped calls at the device's SMs
 * less N (tk_dist_set_comm_sms; the baseline's GEMMs keep every SM) and
 * sets NCCL_MAX_CTAS=N where it is unset, so that the persistent GEMM
 * kernels leave NCCL room instead of holding every SM until they end.
 * --kernel NAME: every overlapped call's GEMMs run on the named kernel
 * (desc.kernel; default auto-dispatch per chunk); the baselines stay auto.
 * --probe first asks, per transport, whether the exchange needs SMs: an
 * all-gather alone beside a GEMM that holds every SM (probe() below), one
 * line per rank.
 * Exit 0 when every shape ran and verified. The multicast variables
 * (NCCL_NVLS_ENABLE=0 and the other two) are set before NCCL loads.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "dist/dist.h"
#include "lab/lab.h"
#include "lab/lab_rand.h"
#include "../tests/gpu/dist_fork.h"

#define MAX_SHAPES 64
#define MAX_CHUNK_LIST 8
#define MAX_ROWS 512             /* shapes x chunk counts x partial types */

typedef struct shape {
    const char *name;
    tk_dist_op op;
    int64_t tokens, n, k;        /* the local problem: all-gather N and K; reduce-scatter N and each rank's K */
} shape;

/* One line of the table: a shape's baselines and one overlapped variant. */
typedef struct result {
    double gemm_us, comm_us, seq_us, ov_us, model_us, sim;
    int shape;                   /* index in opts.shapes */
    int chunks_asked;            /* desc.chunks: 0 planned */
    int partial_type;            /* reduce-scatter: TK_F32 or TK_BF16 */
    int transport;               /* tk_dist_transport asked */
    int chunks, ok;
    int skipped;                 /* CE unavailable under the default --transport: no line */
} result;

/* What rank 0 hands back to the parent (shared memory). */
typedef struct shared_out {
    result res[MAX_ROWS];        /* rank 0's figures with the slowest rank's times */
    int nrows;
    int nccl_version;
    char ce_skip[256];           /* why the CE lines were left out (default --transport) */
} shared_out;

typedef struct opts {
    int ranks, comm_sms, samples, nshapes;
    int nchunks, npartial, ntransport;
    int chunks[MAX_CHUNK_LIST];  /* --chunks: desc.chunks of each variant */
    int partial[2];              /* --partial: tk_dtype of the reduce-scatter's partials */
    int transport[3];            /* --transport: tk_dist_transport of each variant */
    int transport_default;       /* --transport not given: CE left out where unavailable */
    int probe;                   /* --probe: does the exchange run beside a GEMM holding every SM? */
    shape shapes[MAX_SHAPES];
    shared_out *out;
    const char *json;
    const char *kernel;          /* --kernel: desc.kernel of the overlapped calls (NULL: auto) */
} opts;

static double now_us_since(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return ms * 1e3;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* One rank's state for a shape. */
typedef struct bctx {
    const tkd_nccl *nccl;
    struct ncclComm *comm;
    tk_dist d;
    tk_handle h;                 /* the baseline's and the reference's: every SM */
    cudaStream_t s;
    cudaEvent_t e0, e1;
    void *flush;                 /* 256 MiB written before each sample: L2 holds nothing of the operands */
    float *one;                  /* the barrier's float */
    int rank, R;
} bctx;

static int barrier(bctx *b)
{
    if (b->nccl->AllGather(b->one + b->rank, b->one, 1, ncclFloat32, b->comm, b->s) != ncclSuccess)
        return 1;
    return cudaStreamSynchronize(b->s) != cudaSuccess;
}

typedef int (*step_fn)(bctx *b, void *arg);

/* The median time of fn over samples runs (after one warm-up), us; -1 on a failure. */
static double timed(bctx *b, int samples, step_fn fn, void *arg)
{
    double t[256];
    if (samples > 255)
        samples = 255;
    for (int i = -1; i < samples; i++) {
        if (barrier(b) || cudaMemsetAsync(b->flush, i & 0xff, 256u << 20, b->s) != cudaSuccess ||
            cudaEventRecord(b->e0, b->s) != cudaSuccess || fn(b, arg) || cudaEventRecord(b->e1, b->s) != cudaSuccess ||
            cudaStreamSynchronize(b->s) != cudaSuccess)
            return -1;
        if (i >= 0)
            t[i] = now_us_since(b->e0, b->e1);
    }
    qsort(t, (size_t)samples, sizeof t[0], cmp_double);
    return samples % 2 ? t[samples / 2] : 0.5 * (t[samples / 2 - 1] + t[samples / 2]);
}

/* The buffers of one shape on one rank (bf16 unless said). */
typedef struct bufs {
    const shape *sh;
    int64_t M, mb, N, K;
    void *a;                     /* all-gather: the shard (mb x K); reduce-scatter: A_r (M x K) */
    void *w;                     /* B_r, stored N x K (nn.Linear's weight: op T) */
    void *g;                     /* all-gather: the gathered A (M x K) */
    void *c;                     /* all-gather: C (M x N); reduce-scatter: the local product (M x N) */
    void *cs;                    /* reduce-scatter: this rank's rows of the sum (mb x N) */
    void *out;                   /* the overlapped result (all-gather M x N, reduce-scatter mb x N) */
    int chunks, partial_type;    /* the variant: desc.chunks, desc.partial_type */
    const char *kernel;          /* desc.kernel (--kernel) */
    tk_status st;                /* the last overlapped call's */
} bufs;

static int gemm_alone(bctx *b, void *arg)
{
    bufs *u = arg;
    const int ag = u->sh->op == TK_DIST_ALL_GATHER_GEMM;
    return tk_gemm(b->h, TK_ROW_MAJOR, TK_OP_N, TK_OP_T, u->M, u->N, u->K, 1.0f, ag ? u->g : u->a, u->K, u->w, u->K,
                   0.0f, u->c, TK_BF16, u->N, NULL, b->s) != TK_SUCCESS;
}

static int comm_alone(bctx *b, void *arg)
{
    bufs *u = arg;
    if (u->sh->op == TK_DIST_ALL_GATHER_GEMM)
        return b->nccl->AllGather(u->a, u->g, (size_t)(u->mb * u->K), ncclBfloat16, b->comm, b->s) != ncclSuccess;
    return b->nccl->ReduceScatter(u->c, u->cs, (size_t)(u->mb * u->N), ncclBfloat16, ncclSum, b->comm, b->s) !=
           ncclSuccess;
}

static int sequential(bctx *b, void *arg)
{
    bufs *u = arg;
    if (u->sh->op == TK_DIST_ALL_GATHER_GEMM)
        return comm_alone(b, arg) || gemm_alone(b, arg);
    return gemm_alone(b, arg) || comm_alone(b, arg);
}

static int overlapped(bctx *b, void *arg)
{
    bufs *u = arg;
    const int ag = u->sh->op == TK_DIST_ALL_GATHER_GEMM;
    tk_dist_desc g = TK_DIST_DESC_INIT;
    g.problem = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_T, u->M, u->N, u->K, 1.0f, 0.0f, u->a, u->K, u->w,
                                   u->K, u->out, u->N, TK_BF16 };
    g.gathered = ag ? u->g : NULL;
    g.chunks = u->chunks;
    g.kernel = u->kernel;
    g.partial_type = ag ? TK_F32 : u->partial_type;
    tk_status st = ag ? tk_dist_all_gather_gemm(b->d, &g, b->s) : tk_dist_gemm_reduce_scatter(b->d, &g, b->s);
    u->st = st;
    if (st && st != TK_ERR_NOT_SUPPORTED)
        fprintf(stderr, "rank %d: %s: %s\n", b->rank, u->sh->name, tk_dist_last_error(b->d));
    return st != TK_SUCCESS;
}

/* Random bf16 in (-1, 1) on the device (the lab's fill), seed by rank. */
static int fill(void *p, int64_t n, uint64_t seed, cudaStream_t s)
{
    return n > 0 && (tk_lab_fill_device(p, TK_BF16, (size_t)n, seed, s) || cudaStreamSynchronize(s));
}

/* The reference of the overlapped result, fp32 (all-gather M x N, reduce-scatter this rank's mb x N), and
 * the similarity of `out` (bf16) to it. */
static int verify(bctx *b, bufs *u, double *sim)
{
    const int ag = u->sh->op == TK_DIST_ALL_GATHER_GEMM;
    const int64_t rows = ag ? u->M : u->mb;
    float *ref = NULL;
    void *ga = NULL, *gw = NULL;
    int bad = cudaMalloc((void **)&ref, (size_t)(u->M * u->N) * 4) != cudaSuccess;
    if (!bad && ag) {
        /* the gathered A (the sequential path's ncclAllGather) times B_r */
        bad = comm_alone(b, u) || tk_gemm(b->h, TK_ROW_MAJOR, TK_OP_N, TK_OP_T, u->M, u->N, u->K, 1.0f, u->g, u->K,
                                          u->w, u->K, 0.0f, ref, TK_F32, u->N, NULL, b->s);
    } else if (!bad) {
        /* every rank's A_r and B_r gathered; ref = sum_r A_r B_r, accumulated in fp32 in rank order */
        bad = cudaMalloc(&ga, (size_t)(b->R * u->M * u->K) * 2) || cudaMalloc(&gw, (size_t)(b->R * u->N * u->K) * 2) ||
              b->nccl->AllGather(u->a, ga, (size_t)(u->M * u->K), ncclBfloat16, b->comm, b->s) ||
              b->nccl->AllGather(u->w, gw, (size_t)(u->N * u->K), ncclBfloat16, b->comm, b->s);
        for (int r = 0; r < b->R && !bad; r++)
            bad = tk_gemm(b->h, TK_ROW_MAJOR, TK_OP_N, TK_OP_T, u->M, u->N, u->K, 1.0f,
                          (const uint16_t *)ga + (size_t)r * u->M * u->K, u->K,
                          (const uint16_t *)gw + (size_t)r * u->N * u->K, u->K, r ? 1.0f : 0.0f, ref, TK_F32, u->N,
                          NULL, b->s) != TK_SUCCESS;
    }
    bad = bad || cudaStreamSynchronize(b->s) != cudaSuccess;
    float *hr = bad ? NULL : malloc((size_t)(rows * u->N) * 4);
    uint16_t *ho = bad ? NULL : malloc((size_t)(rows * u->N) * 2);
    const float *mine = ref + (ag ? 0 : (size_t)b->rank * u->mb * u->N);
    bad = bad || !hr || !ho || cudaMemcpy(hr, mine, (size_t)(rows * u->N) * 4, cudaMemcpyDeviceToHost) ||
          cudaMemcpy(ho, u->out, (size_t)(rows * u->N) * 2, cudaMemcpyDeviceToHost);
    double xy = 0, xx = 0;
    for (int64_t i = 0; !bad && i < rows * u->N; i++) {
        double x = tk_lab_bf16_to_f32(ho[i]), y = hr[i];
        xy += x * y;
        xx += x * x + y * y;
    }
    *sim = bad ? 1.0 : xx > 0 ? 1.0 - 2.0 * xy / xx : 0.0;
    free(hr);
    free(ho);
    cudaFree(ref);
    cudaFree(ga);
    cudaFree(gw);
    return bad;
}

/* One shape on this rank: the baselines once, then each variant of
 * --transport x --chunks x --partial (the all-gather: no partials) into
 * rows[0..], *nrows of them. */
static int run_shape(bctx *b, const opts *o, int si, result *rows, int *nrows)
{
    const shape *sh = &o->shapes[si];
    bufs u = { .sh = sh, .M = sh->tokens, .mb = sh->tokens / b->R, .N = sh->n, .K = sh->k, .kernel = o->kernel };
    const int ag = sh->op == TK_DIST_ALL_GATHER_GEMM;
    const size_t bf = 2;
    int bad = cudaMalloc(&u.a, (size_t)((ag ? u.mb : u.M) * u.K) * bf) || cudaMalloc(&u.w, (size_t)(u.N * u.K) * bf) ||
              cudaMalloc(&u.c, (size_t)(u.M * u.N) * bf) ||
              cudaMalloc(&u.out, (size_t)((ag ? u.M : u.mb) * u.N) * bf) ||
              (ag && cudaMalloc(&u.g, (size_t)(u.M * u.K) * bf)) || (!ag && cudaMalloc(&u.cs, (size_t)(u.mb * u.N) * bf));
    bad = bad || fill(u.a, (ag ? u.mb : u.M) * u.K, 1000 + (uint64_t)b->rank, b->s) ||
          fill(u.w, u.N * u.K, 2000 + (uint64_t)b->rank, b->s);
    double gemm_us = -1, comm_us = -1, seq_us = -1;
    if (!bad) {
        gemm_us = timed(b, o->samples, gemm_alone, &u);
        comm_us = timed(b, o->samples, comm_alone, &u);
        seq_us = timed(b, o->samples, sequential, &u);
        bad = gemm_us < 0 || comm_us < 0 || seq_us < 0;
    }
    const int np = ag ? 1 : o->npartial;
    int n = 0;
    for (int v = 0; v < o->ntransport * o->nchunks; v++)
        for (int pi_ = 0; pi_ < np; pi_++) {
            const int ti = v / o->nchunks, ci = v % o->nchunks;
            result *res = &rows[n++];
            memset(res, 0, sizeof *res);
            res->shape = si;
            res->transport = o->transport[ti];
            res->chunks_asked = u.chunks = o->chunks[ci];
            res->partial_type = u.partial_type = ag ? TK_F32 : o->partial[pi_];
            res->gemm_us = gemm_us;
            res->comm_us = comm_us;
            res->seq_us = seq_us;
            res->ov_us = -1;
            int vbad = bad;
            /* CE that cannot be had: left out under the default list (every rank alike: the set-up agrees) */
            tk_status tst = tk_dist_set_transport(b->d, (tk_dist_transport)res->transport);
            if (tst == TK_ERR_NOT_SUPPORTED && o->transport_default) {
                res->skipped = res->ok = 1;
                if (b->rank == 0)
                    snprintf(o->out->ce_skip, sizeof o->out->ce_skip, "%s", tk_dist_last_error(b->d));
                continue;
            }
            if (tst) {
                fprintf(stderr, "rank %d: %s\n", b->rank, tk_dist_last_error(b->d));
                vbad = 1;
            }
            if (!vbad) {
                tk_dist_plan_info pi = TK_DIST_PLAN_INFO_INIT;
                tk_dist_desc g = TK_DIST_DESC_INIT;
                g.problem = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_T, u.M, u.N, u.K, 1.0f, 0.0f, u.a, u.K,
                                               u.w, u.K, u.out, u.N, TK_BF16 };
                g.gathered = ag ? u.g : NULL;
                g.chunks = u.chunks;
                g.kernel = u.kernel;
                g.partial_type = u.partial_type;
                if (tk_dist_plan(b->d, sh->op, &g, &pi) == TK_SUCCESS) {
                    res->chunks = pi.chunks;
                    res->model_us = pi.overlapped_us;
                }
                res->ov_us = timed(b, o->samples, overlapped, &u);
                if (res->ov_us < 0 && u.st == TK_ERR_NOT_SUPPORTED && o->transport_default &&
                    res->transport == TK_DIST_TRANSPORT_CE) {
                    res->skipped = res->ok = 1;
                    if (b->rank == 0)
                        snprintf(o->out->ce_skip, sizeof o->out->ce_skip, "%s", tk_dist_last_error(b->d));
                    continue;
                }
                if (res->ov_us < 0 && u.st == TK_ERR_NOT_SUPPORTED)
                    fprintf(stderr, "rank %d: %s: %s\n", b->rank, sh->name, tk_dist_last_error(b->d));
                vbad = res->ov_us < 0 || verify(b, &u, &res->sim);
            }
            res->ok = !vbad && res->sim < 1e-4;
            bad |= vbad;
        }
    *nrows = n;
    cudaFree(u.a);
    cudaFree(u.w);
    cudaFree(u.c);
    cudaFree(u.out);
    cudaFree(u.g);
    cudaFree(u.cs);
    return bad;
}

/* --probe: whether a transport's exchange needs SMs. A GEMM that holds
 * every SM but TKD_CE_SMS (the one the CE transport's GEMMs leave to its
 * barriers; 8192^3 bf16 on d's handle's sibling, ~1.4 ms on an H200)
 * starts on b->s; the all-gather alone (N = 0: the exchange, no product)
 * of a 4096 x 8192 bf16 block per rank is enqueued at once on a second
 * stream. If the exchange ends well before the GEMM, it ran beside it (the
 * copy engines, or NCCL kernels that found room); if it ends after, it
 * waited for SMs: NCCL's kernels queued behind the GEMM's persistent grid.
 * Each rank prints its own times. */
static int probe(bctx *b, int transport)
{
    const int64_t mb = 4096, K = 8192, n = 8192;
    void *x = NULL, *g = NULL, *ha = NULL, *hc = NULL;
    cudaStream_t s2 = NULL;
    cudaEvent_t e2 = NULL;
    int bad = 1;
    if (cudaMalloc(&x, (size_t)mb * K * 2) || cudaMalloc(&g, (size_t)mb * b->R * K * 2) ||
        cudaMalloc(&ha, (size_t)n * n * 2) || cudaMalloc(&hc, (size_t)n * n * 2) ||
        cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) || cudaEventCreate(&e2) ||
        fill(x, mb * K, 11, b->s) || fill(ha, n * n, 12, b->s) || cudaStreamSynchronize(b->s))
        goto out;
    if (tk_dist_set_transport(b->d, (tk_dist_transport)transport)) {
        fprintf(stderr, "rank %d: probe %s: %s\n", b->rank, tkd_transport_name(transport), tk_dist_last_error(b->d));
        goto out;
    }
    tk_dist_desc dd = TK_DIST_DESC_INIT;
    dd.problem = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_T, mb * b->R, 0, K, 1.0f, 0.0f, x, K, NULL, K,
                                    NULL, 1, TK_BF16 };
    dd.gathered = g;
    dd.chunks = 1;
    const tk_gemm_problem hog = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, n, n, n, 1.0f, 0.0f, ha, n, ha, n, hc, n, TK_BF16 };
    double t_ex = 0, t_gemm = 0, t_alone = 0;
    int sms = 0, dev = 0;
    if (cudaGetDevice(&dev) || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) ||
        tk_set_sm_count(b->h, sms - TKD_CE_SMS))
        goto out;
    for (int it = 0; it < 3; it++) {   /* the first: set-up and warm-up */
        if (barrier(b) || cudaEventRecord(b->e0, b->s) || cudaStreamWaitEvent(s2, b->e0, 0) ||
            tk_gemm_ex(b->h, &hog, NULL, b->s) || cudaEventRecord(b->e1, b->s) ||
            tk_dist_all_gather_gemm(b->d, &dd, s2) || cudaEventRecord(e2, s2) || cudaStreamSynchronize(s2) ||
            cudaStreamSynchronize(b->s)) {
            fprintf(stderr, "rank %d: probe %s: %s %s\n", b->rank, tkd_transport_name(transport),
                    tk_dist_last_error(b->d), tk_last_error(b->h));
            goto out;
        }
        t_gemm = now_us_since(b->e0, b->e1);
        t_ex = now_us_since(b->e0, e2);
    }
    /* the exchange alone */
    if (barrier(b) || cudaEventRecord(b->e0, s2) || tk_dist_all_gather_gemm(b->d, &dd, s2) ||
        cudaEventRecord(e2, s2) || cudaStreamSynchronize(s2))
        goto out;
    t_alone = now_us_since(b->e0, e2);
    printf("rank %d: probe %-4s: the exchange alone %.0f us; beside a GEMM of %d of %d SMs (%.0f us) it ended at %.0f "
           "us: %s\n", b->rank, tkd_transport_name(transport), t_alone, sms - TKD_CE_SMS, sms, t_gemm, t_ex,
           t_ex < 0.8 * t_gemm ? "it ran beside the GEMM" : "it waited for the GEMM's SMs");
    fflush(stdout);
    bad = 0;
out:
    tk_set_sm_count(b->h, 0);   /* the baseline's handle: every SM again */
    cudaFree(x);
    cudaFree(g);
    cudaFree(ha);
    cudaFree(hc);
    if (s2)
        cudaStreamDestroy(s2);
    if (e2)
        cudaEventDestroy(e2);
    return bad;
}

static int bench_rank(int rank, int R, struct ncclComm *comm, void *arg)
{
    opts *o = arg;
    char why[512];
    bctx b = { .comm = comm, .rank = rank, .R = R };
    b.nccl = tkd_nccl_get(why, sizeof why);
    if (!b.nccl || tk_dist_create(&b.d, comm) || tk_create(&b.h) ||
        cudaStreamCreateWithFlags(&b.s, cudaStreamNonBlocking) || cudaEventCreate(&b.e0) || cudaEventCreate(&b.e1) ||
        cudaMalloc(&b.flush, 256u << 20) || cudaMalloc((void **)&b.one, sizeof(float) * (size_t)R)) {
        fprintf(stderr, "rank %d: setup: %s\n", rank, tk_dist_last_error(NULL));
        return 1;
    }
    if (o->comm_sms && tk_dist_set_comm_sms(b.d, o->comm_sms)) {
        fprintf(stderr, "rank %d: %s\n", rank, tk_dist_last_error(b.d));
        return 1;
    }
    int bad = 0, total = 0;
    for (int t = 0; o->probe && t < o->ntransport; t++)
        bad |= probe(&b, o->transport[t]);
    for (int i = 0; i < o->nshapes; i++) {
        result rows[MAX_CHUNK_LIST * 2 * 3];
        int n = 0;
        bad |= run_shape(&b, o, i, rows, &n);
        for (int v = 0; v < n; v++) {
            result r = rows[v];
            /* the slowest rank's times: rank 0 takes the max of every rank's */
            double mine[4] = { r.gemm_us, r.comm_us, r.seq_us, r.ov_us };
            double *dv = NULL, all[4 * TKF_MAX_RANKS];
            if (cudaMalloc((void **)&dv, sizeof all) ||
                cudaMemcpy(dv + 4 * rank, mine, sizeof mine, cudaMemcpyHostToDevice) ||
                b.nccl->AllGather(dv + 4 * rank, dv, 4, ncclFloat64, comm, b.s) || cudaStreamSynchronize(b.s) ||
                cudaMemcpy(all, dv, sizeof(double) * 4 * (size_t)R, cudaMemcpyDeviceToHost)) {
                bad = 1;
            } else if (rank == 0 && total < MAX_ROWS) {
                for (int q = 1; q < R; q++)
                    for (int w = 0; w < 4; w++)
                        if (mine[w] >= 0 && (all[4 * q + w] > mine[w] || all[4 * q + w] < 0))
                            mine[w] = all[4 * q + w] < 0 ? -1 : all[4 * q + w];
                r.gemm_us = mine[0];
                r.comm_us = mine[1];
                r.seq_us = mine[2];
                r.ov_us = mine[3];
                o->out->res[total] = r;
            }
            total++;
            if (rank != 0 && !r.ok)
                fprintf(stderr, "rank %d: %s %lld %s chunks %d: similarity %.3g (bad %d)\n", rank, o->shapes[i].name,
                        (long long)o->shapes[i].tokens, tkd_transport_name(r.transport), r.chunks_asked, r.sim, bad);
            bad |= !r.ok;
            cudaFree(dv);
        }
    }
    if (rank == 0)
        o->out->nrows = total < MAX_ROWS ? total : MAX_ROWS;
    tk_dist_info info = TK_DIST_INFO_INIT;
    if (rank == 0 && tk_dist_get_info(b.d, &info) == TK_SUCCESS)
        o->out->nccl_version = info.nccl_version;
    tk_dist_destroy(b.d);
    tk_destroy(b.h);
    return bad;
}

static int parse_list(const char *s, int64_t *out, int cap)
{
    int n = 0;
    while (s && *s && n < cap) {
        out[n++] = strtoll(s, NULL, 10);
        s = strchr(s, ',');
        s = s ? s + 1 : NULL;
    }
    return n;
}

int main(int argc, char **argv)
{
    tkf_no_multicast();
    opts o = { .ranks = 2, .samples = 15 };
    const char *ops = "qkv,o,gate_up,down", *tokens = "2048,4096,8192,16384,32768", *chunks = "0", *partial = "f32";
    const char *transport = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--ranks") && v)
            o.ranks = atoi(v);
        else if (!strcmp(argv[i], "--ops") && v)
            ops = v;
        else if (!strcmp(argv[i], "--tokens") && v)
            tokens = v;
        else if (!strcmp(argv[i], "--chunks") && v)
            chunks = v;
        else if (!strcmp(argv[i], "--partial") && v)
            partial = v;
        else if (!strcmp(argv[i], "--transport") && v)
            transport = v;
        else if (!strcmp(argv[i], "--comm-sms") && v)
            o.comm_sms = atoi(v);
        else if (!strcmp(argv[i], "--samples") && v)
            o.samples = atoi(v);
        else if (!strcmp(argv[i], "--json") && v)
            o.json = v;
        else if (!strcmp(argv[i], "--kernel") && v)
            o.kernel = v;
        else if (!strcmp(argv[i], "--probe")) {
            o.probe = 1;
            continue;
        } else {
            fprintf(stderr, "usage: %s [--ranks 2] [--ops qkv,o,gate_up,down] [--tokens 2048,...] [--chunks 0,1,2,4,8] "
                    "[--partial f32,bf16] [--transport p2p,ce] [--comm-sms N] [--samples 15] [--kernel NAME] [--probe] "
                    "[--json FILE]\n", argv[0]);
            return 2;
        }
        i++;
    }
    if (o.samples < 1)
        o.samples = 1;
    int64_t cl[MAX_CHUNK_LIST];
    o.nchunks = parse_list(chunks, cl, MAX_CHUNK_LIST);
    for (int i = 0; i < o.nchunks; i++)
        if ((o.chunks[i] = (int)cl[i]) < 0 || cl[i] > TKD_MAX_CHUNKS_ASKED) {
            fprintf(stderr, "--chunks: %lld is not 0 (planned) or 1..%d\n", (long long)cl[i], TKD_MAX_CHUNKS_ASKED);
            return 2;
        }
    for (const char *q = partial; q && *q && o.npartial < 2;) {
        size_t len = strcspn(q, ",");
        if (len == 3 && !strncmp(q, "f32", 3))
            o.partial[o.npartial++] = TK_F32;
        else if (len == 4 && !strncmp(q, "bf16", 4))
            o.partial[o.npartial++] = TK_BF16;
        else {
            fprintf(stderr, "--partial: '%.*s' is not f32 or bf16\n", (int)len, q);
            return 2;
        }
        q += len + (q[len] == ',');
    }
    o.transport_default = !transport;
    for (const char *q = transport ? transport : "p2p,ce"; *q && o.ntransport < 3;) {
        size_t len = strcspn(q, ",");
        int t = -1;
        for (int k = TK_DIST_TRANSPORT_AUTO; k <= TK_DIST_TRANSPORT_CE; k++)
            if (len == strlen(tkd_transport_name(k)) && !strncmp(q, tkd_transport_name(k), len))
                t = k;
        if (t < 0) {
            fprintf(stderr, "--transport: '%.*s' is not p2p, ce or auto\n", (int)len, q);
            return 2;
        }
        o.transport[o.ntransport++] = t;
        q += len + (q[len] == ',');
    }
    if (o.nchunks < 1 || o.npartial < 1 || o.ntransport < 1) {
        fprintf(stderr, "--chunks, --partial and --transport need at least one value each\n");
        return 2;
    }
    /* Llama-3-70B: hidden 8192, ffn 28672, 64 query and 8 key/value heads of 128, split over R */
    const int R = o.ranks;
    const struct { const char *name; tk_dist_op op; int64_t n, k; } proj[] = {
        { "qkv", TK_DIST_ALL_GATHER_GEMM, (64 + 2 * 8) * 128 / R, 8192 },
        { "o", TK_DIST_GEMM_REDUCE_SCATTER, 8192, 64 * 128 / R },
        { "gate_up", TK_DIST_ALL_GATHER_GEMM, 2 * 28672 / R, 8192 },
        { "down", TK_DIST_GEMM_REDUCE_SCATTER, 8192, 28672 / R },
    };
    int64_t tok[16];
    int ntok = parse_list(tokens, tok, 16);
    for (size_t p = 0; p < sizeof proj / sizeof proj[0]; p++) {
        char pat[32];
        snprintf(pat, sizeof pat, ",%s,", proj[p].name);
        char have[256];
        snprintf(have, sizeof have, ",%s,", ops);
        if (!strstr(have, pat))
            continue;
        for (int t = 0; t < ntok && o.nshapes < MAX_SHAPES; t++)
            o.shapes[o.nshapes++] = (shape){ proj[p].name, proj[p].op, tok[t], proj[p].n, proj[p].k };
    }
    if (o.comm_sms > 0) {
        /* NCCL no wider than the SMs the GEMMs leave it (NCCL 2.17+ reads it at init) */
        char v[16];
        snprintf(v, sizeof v, "%d", o.comm_sms);
        setenv("NCCL_MAX_CTAS", v, 0);
    }
    int gpus = tkf_gpu_count();
    if (gpus < R || R < 2) {
        printf("dist_bench needs %d GPUs (found %d)\n", R < 2 ? 2 : R, gpus);
        return 1;
    }
    o.out = mmap(NULL, sizeof *o.out, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (o.out == MAP_FAILED)
        return 1;
    memset(o.out, 0, sizeof *o.out);
    char why[1024];
    int bad = tkf_run(R, 1800, bench_rank, &o, why, sizeof why);
    if (bad)
        fprintf(stderr, "dist_bench: %s\n", why);

    char tlist[32];
    snprintf(tlist, sizeof tlist, "%s", transport ? transport : "p2p,ce");
    printf("Llama-3-70B projections on %d ranks (NCCL %d), comm SMs %d, chunks asked %s (0: planned), partials %s, "
           "transports %s, overlapped GEMMs on %s; times in us, the slowest rank's median of %d\n", R, o.out->nccl_version,
           o.comm_sms, chunks, partial, tlist, o.kernel ? o.kernel : "auto", o.samples);
    if (o.out->ce_skip[0])
        printf("note: the ce lines are left out: %s\n", o.out->ce_skip);
    printf("%-8s %-15s %6s %5s %5s %6s %4s %10s %10s %12s %12s %8s %7s %9s %s\n", "proj", "op", "tokens", "trans",
           "asked", "chunks", "part", "gemm", "comm", "sequential", "overlapped", "x seq", "hidden", "similar.", "model");
    /* the geomean and the 70% count per variant (transport x chunks asked x partial type), and over each shape's best */
    double log_sum[3][MAX_CHUNK_LIST][2] = { { { 0 } } }, best_log = 0;
    int nspeed[3][MAX_CHUNK_LIST][2] = { { { 0 } } }, nhid[3][MAX_CHUNK_LIST][2] = { { { 0 } } };
    int nhid_ok[3][MAX_CHUNK_LIST][2] = { { { 0 } } }, nbest = 0;
    FILE *js = o.json ? fopen(o.json, "w") : NULL;
    if (js)
        fprintf(js, "{\"ranks\": %d, \"nccl_version\": %d, \"comm_sms\": %d, \"chunks\": \"%s\", \"partial\": \"%s\", "
                "\"transports\": \"%s\", \"kernel\": \"%s\", \"ce_skipped\": \"%s\", \"samples\": %d, \"shapes\": [", R,
                o.out->nccl_version, o.comm_sms, chunks, partial, tlist, o.kernel ? o.kernel : "auto", o.out->ce_skip,
                o.samples);
    int nline = 0;
    for (int i = 0; i < o.out->nrows; i++) {
        const result *r = &o.out->res[i];
        const shape *sh = &o.shapes[r->shape];
        double speed = r->ov_us > 0 ? r->seq_us / r->ov_us : 0;
        double hidden = r->comm_us > 0 ? (r->gemm_us + r->comm_us - r->ov_us) / r->comm_us : 0;
        int ci = 0, ti = 0;
        while (ci < o.nchunks - 1 && o.chunks[ci] != r->chunks_asked)
            ci++;
        while (ti < o.ntransport - 1 && o.transport[ti] != r->transport)
            ti++;
        /* an all-gather (no partials) counts in every partial type's summary */
        for (int pj = 0; pj < o.npartial && !r->skipped; pj++) {
            if (sh->op != TK_DIST_ALL_GATHER_GEMM && o.partial[pj] != r->partial_type)
                continue;
            if (speed > 0) {
                log_sum[ti][ci][pj] += log(speed);
                nspeed[ti][ci][pj]++;
            }
            if (r->comm_us > 0 && r->comm_us < r->gemm_us) {
                nhid[ti][ci][pj]++;
                nhid_ok[ti][ci][pj] += hidden >= 0.7;
            }
        }
        /* each shape's best variant (the rows of a shape are consecutive) */
        if (i + 1 == o.out->nrows || o.out->res[i + 1].shape != r->shape) {
            double best = 0;
            for (int q = i; q >= 0 && o.out->res[q].shape == r->shape; q--)
                if (o.out->res[q].ov_us > 0 && o.out->res[q].seq_us / o.out->res[q].ov_us > best)
                    best = o.out->res[q].seq_us / o.out->res[q].ov_us;
            if (best > 0) {
                best_log += log(best);
                nbest++;
            }
        }
        if (r->skipped)
            continue;
        const char *opn = sh->op == TK_DIST_ALL_GATHER_GEMM ? "all-gather+GEMM" : "GEMM+red.-scat.";
        const char *pn = sh->op == TK_DIST_ALL_GATHER_GEMM ? "-" : r->partial_type == TK_BF16 ? "bf16" : "f32";
        const char *tn = tkd_transport_name(r->transport);
        printf("%-8s %-15s %6lld %5s %5d %6d %4s %10.1f %10.1f %12.1f %12.1f %8.3f %7.2f %9.2g %.1f%s\n", sh->name, opn,
               (long long)sh->tokens, tn, r->chunks_asked, r->chunks, pn, r->gemm_us, r->comm_us, r->seq_us, r->ov_us,
               speed, hidden, r->sim, r->model_us, r->ok ? "" : "  FAILED");
        if (js)
            fprintf(js, "%s\n  {\"proj\": \"%s\", \"op\": \"%s\", \"tokens\": %lld, \"m\": %lld, \"n\": %lld, \"k\": %lld, "
                    "\"transport\": \"%s\", \"chunks_asked\": %d, \"chunks\": %d, \"partial\": \"%s\", \"gemm_us\": %.3f, "
                    "\"comm_us\": %.3f, \"sequential_us\": %.3f, \"overlapped_us\": %.3f, \"speedup\": %.4f, "
                    "\"hidden\": %.4f, \"similarity\": %.3g, \"model_us\": %.3f, \"ok\": %s}", nline++ ? "," : "",
                    sh->name, sh->op == TK_DIST_ALL_GATHER_GEMM ? "all_gather_gemm" : "gemm_reduce_scatter",
                    (long long)sh->tokens, (long long)sh->tokens, (long long)sh->n, (long long)sh->k, tn,
                    r->chunks_asked, r->chunks, pn, r->gemm_us, r->comm_us, r->seq_us, r->ov_us, speed, hidden, r->sim,
                    r->model_us, r->ok ? "true" : "false");
    }
    if (js)
        fprintf(js, "\n], \"variants\": [");
    int nv = 0;
    for (int ti = 0; ti < o.ntransport; ti++)
        for (int ci = 0; ci < o.nchunks; ci++)
            for (int pj = 0; pj < o.npartial; pj++) {
                if (!nspeed[ti][ci][pj])
                    continue;
                double geo = exp(log_sum[ti][ci][pj] / nspeed[ti][ci][pj]);
                const char *pn = o.partial[pj] == TK_BF16 ? "bf16" : "f32", *tn = tkd_transport_name(o.transport[ti]);
                printf("%s, chunks %d, %s partials (all-gathers: none): geomean overlapped x sequential %.3f over %d "
                       "shapes (target >= 1.2); comm < gemm hiding >= 70%%: %d of %d\n", tn, o.chunks[ci], pn, geo,
                       nspeed[ti][ci][pj], nhid_ok[ti][ci][pj], nhid[ti][ci][pj]);
                if (js)
                    fprintf(js, "%s\n  {\"transport\": \"%s\", \"chunks_asked\": %d, \"partial\": \"%s\", "
                            "\"geomean_speedup\": %.4f, \"shapes\": %d, \"hidden_70_of_comm_lt_gemm\": [%d, %d]}",
                            nv++ ? "," : "", tn, o.chunks[ci], pn, geo, nspeed[ti][ci][pj], nhid_ok[ti][ci][pj],
                            nhid[ti][ci][pj]);
            }
    double best_geo = nbest ? exp(best_log / nbest) : 0;
    printf("geomean of each shape's best variant: %.3f over %d shapes\n", best_geo, nbest);
    if (js) {
        fprintf(js, "\n], \"geomean_best_variant\": %.4f}\n", best_geo);
        fclose(js);
    }
    return bad;
}
