/* k40_plan.h - the launch plan of k40_skinny (src/kernels/k40_skinny.cu):
 * which operand is streamed, the token blocks, the split of K and the
 * workspace. Plain C, so the CPU tests check it (tests/host/test_k40_plan.c).
 *
 * k40 computes C = op(A) op(B) with A stored M x K and B stored N x K (both
 * read along K). The smaller of M and N is the "token" side T (its rows sit
 * in mma.sync fragments as the n8 operand, 8 x nj per block); the
 * larger is the "weight" side R, streamed once from DRAM, 64 rows per CTA.
 * Where R / 64 row blocks are too few to keep every SM streaming, K is split
 * into `splits` ranges (grid.y) whose partial sums meet in the workspace
 * and are added in split order by the last split's CTA: the same sum, bit
 * for bit, however the CTAs are scheduled.
 */
#ifndef TK_K40_PLAN_H
#define TK_K40_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include "lib/kernel.h"

#define K40_WARPS 4                    /* warps per CTA, 16 weight rows each */
#define K40_WK 4                       /* warps per 16-row slab, splitting its k-range (1, 2, 4) */
#define K40_WK_SHORT 2                 /* the same where K is short and the slabs many (k40_make_plan) */
#define K40_WK_SHORT_NJ1 4             /* ... for up to 8 tokens, with six chunks a step (K40_U_SHORT) */
/* Weight rows per CTA: K40_WARPS / wk slabs of 16. */
static inline int64_t k40_rows(int wk)
{
    return 16 * (K40_WARPS / wk);
}
#define K40_CHUNK 32                   /* k per chunk: 8 bf16 (16 bytes) per lane, 4 lanes per row */
#define K40_MIN_WARP_CHUNKS 8          /* a split gives each warp at least 8 chunks (256 k) */
#define K40_MAX_SPLITS 64
/* CTAs resident a SM by the kernel's launch bounds (k40_kernel), for nj
 * n8 fragments, and the fewest of any nj. */
#define K40_CTAS_PER_SM(nj) ((nj) >= 8 ? 3 : 4)
#define K40_MAX_CTAS_PER_SM K40_CTAS_PER_SM(8)
/* K40_SPLIT_CTAS_PER_SM, K40_U_SMALL and K40_UXS may be given with -D for
 * bench/ab.sh define variants (docs/NOTES.md, session 13). */
#ifndef K40_SPLIT_CTAS_PER_SM
#define K40_SPLIT_CTAS_PER_SM 2        /* a split grid's CTAs per SM */
#endif
#define K40_MAX_NJ 8                   /* tokens per CTA: 8 * nj, nj in 1, 2, 4, 8 */
/* The ring of TMA copies (sm_90, k40_loop_bulk): K40_BULK_SC chunks (256 k,
 * 512 bytes of a row) a stage, K40_BULK_NS stages; for grids of at most
 * K40_BULK_MAX_CTAS_PER_SM CTAs an SM whose CTAs take at least
 * K40_BULK_MIN_STAGES stages. -D overridable for bench/ab.sh. */
#ifndef K40_BULK_SC
#define K40_BULK_SC 8                  /* 256 k: TMA's largest box side */
#endif
#ifndef K40_BULK_NS
#define K40_BULK_NS 4
#endif
#ifndef K40_BULK_MIN_STAGES
#define K40_BULK_MIN_STAGES 16
#endif
#ifndef K40_BULK_MAX_CTAS_PER_SM
#define K40_BULK_MAX_CTAS_PER_SM 2
#endif
/* The ring's bytes: 16 weight rows and 8 * nj token rows a stage. */
static inline size_t k40_bulk_smem(int nj)
{
    return (size_t)K40_BULK_NS * (16 + 8 * nj) * (K40_BULK_SC * K40_CHUNK * 2);
}

typedef struct k40_plan {
    int swap;                          /* 1: tokens are N (B's rows), weights are A's rows */
    int64_t r, t, k;                   /* weight rows, tokens, K */
    int nj;                            /* n8 fragments per CTA: tokens per CTA = 8 * nj */
    int wk;                            /* warps per 16-row slab, splitting its k-range */
    int xs;                            /* tokens staged in shared memory (K40_XS_MIN_RK) */
    int bulk;                          /* weights and tokens through a ring of TMA copies (K40_BULK_*) */
    int ushort;                        /* K40_U_SHORT chunks a step (one token fragment, short streams) */
    int64_t rowblocks;                 /* grid.x: ceil(r / 64) */
    int splits;                        /* grid.y */
    int64_t tokblocks;                 /* grid.z: ceil(t / (8 * nj)) */
    int64_t chunks;                    /* ceil(k / 32) */
    size_t ws_bytes;                   /* workspace for splits > 1: the partial slots */
    int64_t nflags;                    /* completion flags for splits > 1: one a CTA */
} k40_plan;

/* Bytes of one partial slot: each of the CTA's 128 threads keeps 4 floats
 * per n8 fragment. */
static inline size_t k40_slot_bytes(int nj)
{
    return (size_t)nj * K40_WARPS * 32 * 4 * sizeof(float);
}

/* Chunks a warp loads before its first MMA (k40_skinny.cu): 16-byte loads
 * (aligned) keep 4 chunks in flight for up to 16 tokens; element loads
 * take more registers per chunk. */
#ifndef K40_U_SMALL
#define K40_U_SMALL 4
#endif
/* With 16-byte loads, 17 to 64 tokens and at least K40_XS_MIN_RK weight
 * elements the tokens are staged in shared memory (k40_loop_xs), one warp
 * a slab, K40_UXS chunks a step. Measured on the H100 (docs/NOTES.md,
 * session 7): 32 x 4096 x 4096 NT 24.0 -> 23.0 us, 64 x 4096 x 4096 34.2 ->
 * 26.4; smaller streams lose (32 x 3072 x 768 10.5 -> 11.9), their few
 * steps a warp cannot hide the barriers. */
#ifndef K40_UXS
#define K40_UXS 4
#endif
#define K40_XS_MIN_RK (8LL << 20)
#define K40_U(nj, aligned) ((aligned) ? ((nj) <= 2 ? K40_U_SMALL : (nj) == 4 ? 2 : 1) : ((nj) <= 2 ? 2 : 1))
/* One token fragment, 16-byte loads, the register path, unsplit: K40_U_SHORT
 * chunks a step where each warp takes at most one such step or the grid is
 * at most two CTAs an SM. Measured on the H100 (docs/NOTES.md, session 18):
 * 1 x 768 x 768 NT 5.9 -> 5.4 us, 8 x 2304 x 768 6.9 -> 6.5, 8 x 3584 x
 * 3584 14.7 -> 14.3, 1 x 50257 x 768 (with four warps a slab) 30.1 -> 29.1;
 * fuller grids of long streams lose with it (1 x 28672 x 4096 81.4 -> 83.5,
 * 8 x 6144 x 4096 21.9 -> 22.1), as did 768 x 3072's split in three (8.8 ->
 * 8.9). */
#define K40_U_SHORT 6

/* 16-byte loads need both operands' bases 16-byte aligned and rows a
 * multiple of 8 elements (NULL pointers, introspection: judged on the
 * leading dimensions); with TK_EPI_GATED the up half's base too (its rows
 * are streamed beside the gate's, k40_skinny.cu). */
static inline int k40_aligned(const tk_args *a)
{
    const void *up = a->epi && a->epi->kind == TK_EPI_GATED ? a->epi->b_up : NULL;
    return a->lda % 8 == 0 && a->ldb % 8 == 0 && (uintptr_t)a->a % 16 == 0 && (uintptr_t)a->b % 16 == 0 &&
           (uintptr_t)up % 16 == 0;
}

static inline int k40_nj_for(int64_t t)
{
    return t <= 8 ? 1 : t <= 16 ? 2 : t <= 32 ? 4 : 8;
}

/* The plan for a (normalized) problem on sms SMs; ws_avail: bytes of
 * workspace the launch got (the plan never splits beyond it; (size_t)-1
 * when asking how much a launch would want). Split grids aim at
 * K40_SPLIT_CTAS_PER_SM CTAs per SM: a sweep of forced split counts on the
 * H100 (docs/NOTES.md, session 6) was fastest at 2 per SM (1 x 4096 x
 * 4096: 20.6 us with 256 CTAs, 22.9 with 640, 31.0 unsplit), and every
 * CTA of a split grid is then resident at once (the kernel's launch
 * bounds allow at least 3 per SM), which the last split's wait needs. */
/* The plan with the tokens staged in shared memory allowed or not
 * (k40_make_plan below takes the TMA ring first where it applies: for
 * 32 tokens it replaces the staging). */
static inline void k40_plan_with(const tk_args *a, int sms, size_t ws_avail, int allow_xs, k40_plan *p)
{
    p->swap = a->n < a->m;
    p->r = p->swap ? a->m : a->n;
    p->t = p->swap ? a->n : a->m;
    p->k = a->k;
    p->nj = k40_nj_for(p->t);
    p->tokblocks = (p->t + 8 * p->nj - 1) / (8 * p->nj);
    p->chunks = (p->k + K40_CHUNK - 1) / K40_CHUNK;
    /* Four warps on a slab's k-range (16 rows a CTA): 4 times the CTAs of
     * one warp a slab, without the cross-CTA reduction a split needs (1 x
     * 768 x 768 6.9 us against 7.8; 1 x 4096 x 4096 18.9 against 20.3).
     * Not where one warp a slab already fills the GPU and K is short
     * (under 2 steps a warp): 1 x 50257 x 768 took 39.9 us so, 35.9 with
     * one warp a slab (docs/NOTES.md, session 6); there two warps a slab
     * (K40_WK_SHORT, 32 rows a CTA: 1571 CTAs, three nearly full rounds of
     * 528 resident, against 786 in 1.5) took 34.3 against 35.3, 8 x 50257
     * x 768 35.0 against 36.0 (session 13). For one token fragment with
     * 16-byte loads, four warps a slab again, with six chunks a step
     * (K40_WK_SHORT_NJ1, K40_U_SHORT: each warp's six chunks in one step;
     * 1 x 50257 x 768 29.9 -> 29.1, session 18). */
    p->xs = allow_xs && k40_aligned(a) && p->nj >= 4 && p->r * p->k >= K40_XS_MIN_RK;
    const int xs = p->xs;
    const int u1 = xs ? K40_UXS : K40_U(p->nj, k40_aligned(a));
    const int64_t groups1 = (p->r + k40_rows(1) - 1) / k40_rows(1) * p->tokblocks;
    p->wk = xs ? 1
            : groups1 >= (int64_t)K40_SPLIT_CTAS_PER_SM * (sms > 0 ? sms : 1) && p->chunks < 8LL * u1
                ? (p->nj == 1 && k40_aligned(a) ? K40_WK_SHORT_NJ1 : K40_WK_SHORT)
                : K40_WK;
    p->rowblocks = (p->r + k40_rows(p->wk) - 1) / k40_rows(p->wk);
    const int64_t groups = p->rowblocks * p->tokblocks;
    int64_t s = (int64_t)K40_SPLIT_CTAS_PER_SM * (sms > 0 ? sms : 1) / groups;
    const int64_t s_k = p->chunks / ((int64_t)K40_MIN_WARP_CHUNKS * p->wk);
    if (s > s_k)
        s = s_k;
    if (s > K40_MAX_SPLITS)
        s = K40_MAX_SPLITS;
    if (s < 1)
        s = 1;
    /* Round up to the split count that gives the same number of U-chunk
     * steps per warp with no warp left one step longer (24 chunks in 5
     * splits of one warp each take 2 steps in some, in 6 splits 1 each), as
     * long as every CTA stays resident (K40_MAX_CTAS_PER_SM). */
    const int64_t u = (int64_t)u1 * p->wk;
    const int64_t steps = p->chunks / (s * u);
    if (s > 1 && steps >= 1) {
        const int64_t s_up = (p->chunks + steps * u - 1) / (steps * u);
        if (s_up > s && s_up <= K40_MAX_SPLITS && groups * s_up <= (int64_t)K40_MAX_CTAS_PER_SM * (sms > 0 ? sms : 1))
            s = s_up;
    }
    p->splits = (int)s;
    p->ws_bytes = 0;
    p->nflags = 0;
    if (p->splits > 1) {
        p->ws_bytes = (size_t)groups * (size_t)p->splits * k40_slot_bytes(p->nj);
        p->nflags = groups * p->splits;
        if (p->ws_bytes > ws_avail) {
            p->splits = 1;
            p->ws_bytes = 0;
            p->nflags = 0;
        }
    }
    /* A warp's loads are ~4 KB a round trip; with two CTAs an SM (eight
     * warps) that leaves DRAM short of requests, and a second register set
     * costs registers that two token fragments do not leave. Where the grid
     * is at most two CTAs an SM and each CTA takes at least 16 stages, the
     * weights and tokens come through a ring of TMA copies instead (sm_90;
     * H100, docs/NOTES.md session 15: 16 x 4096 x 14336 NT 48.8 -> 45.6 us,
     * 4 x 4096 x 14336 46.8 -> 44.9, 16 x 3584 x 18944 56.8 -> 52.4, 8 x
     * 4096 x 4096 17.5 -> 16.7). Shorter rings and fuller grids lose with it
     * (4 x 768 x 3072, 3 splits of 4 stages: 9.4 -> 10.1; 1 x 4608 x 3584,
     * 288 CTAs: 16.6 -> 18.2; 1 x 6144 x 4096, 384 CTAs: 22.1 -> 22.9; 16 x
     * 28672 x 4096: 85.8 -> 88.6), as does a deeper ring (six stages: 1 x
     * 3584 x 18944 56.4 against 51.7). 32 tokens (nj = 4, in place of
     * the tokens staged in shared memory): 32 x 3584 x 18944 63.2 -> 56.3,
     * 32 x 4096 x 14336 53.7 -> 47.7; 17 and 24 tokens did not gain (17 x
     * 4096 x 14336 53.3 / 53.5, 24 x 3584 x 18944 63.4 / 63.6, 24 x 4096 x
     * 14336 53.6 -> 49.5), so nj = 4 takes the ring only with its token
     * block full. TMA coordinates are 32-bit. k40_skinny.cu clears bulk on
     * GPUs before sm_90. */
    p->bulk = k40_aligned(a) && !xs && (p->nj <= 2 || (p->nj == 4 && p->t % 32 == 0)) && p->wk == K40_WK && p->k < ((int64_t)1 << 31) &&
              p->r < ((int64_t)1 << 31) && a->lda < ((int64_t)1 << 36) && a->ldb < ((int64_t)1 << 36) &&
              groups * p->splits <= (int64_t)K40_BULK_MAX_CTAS_PER_SM * (sms > 0 ? sms : 1) &&
              p->chunks / p->splits / K40_BULK_SC >= K40_BULK_MIN_STAGES;
    const int64_t warp_chunks = (p->chunks + (int64_t)p->splits * p->wk - 1) / ((int64_t)p->splits * p->wk);
    p->ushort = p->nj == 1 && k40_aligned(a) && !xs && !p->bulk && p->splits == 1 &&
                (warp_chunks <= K40_U_SHORT || groups <= 2LL * (sms > 0 ? sms : 1));
}

static inline void k40_make_plan(const tk_args *a, int sms, size_t ws_avail, k40_plan *p)
{
    k40_plan_with(a, sms, ws_avail, 0, p);
    if (!p->bulk)
        k40_plan_with(a, sms, ws_avail, 1, p);   /* its own rule decides whether tokens are staged */
}

#endif /* TK_K40_PLAN_H */
