/* k40_skinny - decode and other skinny products (the smaller of M and N at
 * most 64): the large operand streamed once through registers, the small
 * one as mma.sync's n8 side, split-K with a fixed-order reduction (issue 10).
 *
 * What changes against k34_wgmma_128x64 (auto-dispatch's choice for decode
 * before), and why: a 1 x N x K product is bound by reading the weights once,
 * but wgmma's M is 64 per warpgroup, so k34 computed mostly padding rows.
 * Here C^T = W X^T on mma.sync: weight rows as its M, tokens as its n8 side,
 * loaded straight into fragment registers, several chunks in flight a warp;
 * K split over grid.y where row blocks alone leave SMs idle, the splits added
 * in a fixed order; mid-size token counts staged in shared memory, long weight
 * streams on sm_90 through a TMA ring. Each point in full: docs/kernels/k40.md.
 *
 * Fused epilogues (issue 39; k40_epi): instances apart (k40_kernel_epi,
 * k40_kernel_bulk_epi; the dense ones' code and parameter block as they
 * were) apply tilekit.h's formula to each element's final fp32 sum, after
 * the split-K sum in split order, with src/tiles/epi_formula.cuh's pieces
 * (k01_naive's, so the same roundings): every kind and activation, bias
 * per column or row, aux, D apart from C with any beta, both orientations.
 * TK_EPI_GATED (SwiGLU at decode): a 16-row slab streams 8 gate rows of B
 * and the same 8 rows of b_up (the ring: two 8-row boxes a stage), so gate
 * and up of an output column meet in one thread and each weight half is
 * read once. Refused with a reason (k40_supports_epi; auto goes on to the
 * next kernel): bias_grad, and GATED where N < M. Its figures: not yet
 * measured (docs/kernels/k40.md gives the command).
 *
 * Configuration: 4 warps (128 threads), 16-row weight slabs read by wk warps;
 * 8 * NJ tokens per CTA (NJ in 1, 2, 4, 8) and U chunks a step, template
 * parameters so that the register arrays they size are compile-time
 * constants; k40_plan.h plans the launch. A stored M x K and B stored N x K
 * (op_a N, op_b T: torch's F.linear); the transposed layouts go to the other kernels.
 * Figure (H100, fp32 C, auto-dispatch's choice of k40, cuBLAS in the same
 * run, L2 flushed by a read; docs/NOTES.md session 15, suite call 8): 1 x
 * 4096 x 14336 NT 44.3 us against cuBLAS's 46.4 (1.05x, 87.8% of the DRAM
 * read rate), 16 x 4096 x 14336 45.8 / 46.2 (1.01x, 85.4%), 16 x 3584 x
 * 18944 52.8 / 53.1 (1.01x, 85.7%), 1 x 4096 x 4096 17.6 / 17.3 (0.98x),
 * 16 x 6144 x 4096 23.1 / 22.9 (0.99x), 1 x 768 x 768 7.0 / 6.8 (0.97x).
 * Reproduce: build/tilekit bench --kernel auto --op-b t --shapes
 * 1x4096x14336,16x4096x14336,16x3584x18944,1x4096x4096,16x6144x4096,1x768x768
 */
#include <stdio.h>
#include <limits.h>
#include "lib/kernel.h"
#include "lib/launch_cache.h"
#include "lib/tma.h"
#include "kernels/k40_plan.h"
#include "ptx/cp_async.cuh"
#include "ptx/fence.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"
#include "ptx/flag.cuh"
#include "ptx/ld.cuh"
#include "ptx/mma_sync.cuh"
#include "tiles/epilogue.cuh"
#include "tiles/epi_formula.cuh"

#define K40_THREADS (32 * K40_WARPS)

typedef struct k40_params {
    const uint16_t *w, *x;             /* weights R x K, tokens T x K, both along K */
    int64_t ldw, ldx;
    void *c;
    int64_t ldc_t, ldc_r;              /* C element (token t, row r) at c + t * ldc_t + r * ldc_r */
    int64_t r, t, k, chunks;
    int splits;
    int wk;                            /* warps per 16-row slab (1, 2, 4), splitting its k-range */
    tk_dtype c_type;
    float alpha, beta;
    uint32_t *flag;                    /* one per (group, split): seq once that split's partial is stored */
    float4 *part;                      /* partial slots, (group * splits + split) * 128 * NJ float4s */
    uint32_t seq;
} k40_params;

/* The ring's launches (k40_kernel_bulk) add its two tensor maps: boxes of
 * 16 x 256 weights and 8 * nj x 256 tokens. Apart from k40_params because a
 * launch's parameter block is copied for every launch and read by every
 * CTA: 464 bytes with the maps, 144 without (a load-only kernel with the
 * larger block took 0.3-0.9 us longer at 1 x 50257 x 768's 1571 CTAs;
 * docs/NOTES.md, session 18). */
typedef struct k40_bulk_params {
    CUtensorMap wmap, xmap;
    k40_params p;
} k40_bulk_params;

/* A fused epilogue (issue 39; the EPI instances, k40_kernel_epi and
 * k40_kernel_bulk_epi): the call's tk_epi_args as they are, the residual
 * C's row stride (k40_params.c is C itself there, read where beta != 0)
 * and whether the weights are A's rows (k40_plan.swap: C's rows, else
 * its columns). TK_EPI_GATED (never swapped): a 16-row slab holds 8 row
 * pairs, the gate's rows r0 / 2 .. + 7 of B (wl_row: fragment rows 0-7)
 * and the same rows of b_up (wh_row: rows 8-15), so that a thread holds
 * gate and up of one output column in acc[j][e] and acc[j][e + 2]. Apart
 * from k40_params, whose parameter block the dense instances keep as it
 * was (k40_bulk_params says why its size counts). */
typedef struct k40_epi {
    tk_epi_args e;
    int64_t ldc;
    int swap;
} k40_epi;

typedef struct k40_epi_params {
    k40_params p;
    k40_epi x;
} k40_epi_params;

/* The ring's with an epilogue: umap, the up half's rows (GATED; then wmap
 * is the gate's, both boxes of 8 rows). */
typedef struct k40_bulk_epi_params {
    CUtensorMap wmap, xmap, umap;
    k40_params p;
    k40_epi x;
} k40_bulk_epi_params;

/* 8 bf16 of a row at column k (a multiple of 8) inside K: one 16-byte
 * load where the row is 16-byte aligned, else element by element. NULL row
 * (past the matrix edge): zeros. STREAM: read-once data (evict first). */
template <int ALIGNED, int STREAM>
static __device__ __forceinline__ uint4 k40_load8(const uint16_t *row, int64_t k)
{
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row && ALIGNED) {
        v = STREAM ? tk_ld_stream_v4(row + k) : __ldg((const uint4 *)(row + k));
    } else if (row) {
        v.x = (uint32_t)row[k] | (uint32_t)row[k + 1] << 16;
        v.y = (uint32_t)row[k + 2] | (uint32_t)row[k + 3] << 16;
        v.z = (uint32_t)row[k + 4] | (uint32_t)row[k + 5] << 16;
        v.w = (uint32_t)row[k + 6] | (uint32_t)row[k + 7] << 16;
    }
    return v;
}

/* The same on the K edge: elements at K and past it are zeros. */
static __device__ __forceinline__ uint4 k40_load8_edge(const uint16_t *row, int64_t k, int64_t kmax)
{
    uint32_t v[4] = { 0, 0, 0, 0 };
    if (row) {
#pragma unroll
        for (int e = 0; e < 8; e++)
            if (k + e < kmax)
                v[e / 2] |= (uint32_t)row[k + e] << (16 * (e % 2));
    }
    return make_uint4(v[0], v[1], v[2], v[3]);
}

/* One chunk of 32 k: lane (g, t) holds weight rows g and g + 8 (wl, wh)
 * and token g of each n8 fragment (xv[j]) at k = 8t .. 8t + 7. Step 0
 * takes k 8t .. 8t + 3 as k-slots 2t, 2t + 1, 2t + 8, 2t + 9 (mma_sync.cuh's
 * fragment layout), step 1 k 8t + 4 .. 8t + 7: the same permutation of k
 * for both operands, so every dot product is unchanged. */
template <int NJ>
static __device__ __forceinline__ void k40_mma_chunk(float (*acc)[4], uint4 wl, uint4 wh, const uint4 *xv)
{
    const uint32_t a0[4] = { wl.x, wh.x, wl.y, wh.y };
    const uint32_t a1[4] = { wl.z, wh.z, wl.w, wh.w };
#pragma unroll
    for (int j = 0; j < NJ; j++) {
        const uint32_t b0[2] = { xv[j].x, xv[j].y };
        const uint32_t b1[2] = { xv[j].z, xv[j].w };
        tk_mma_m16n8k16_bf16(acc[j], a0, b0, acc[j]);
        tk_mma_m16n8k16_bf16(acc[j], a1, b1, acc[j]);
    }
}

/* n <= UU chunks of the two weight rows from chunk c on, all inside K (the
 * rest zeros), and the tokens of the same chunks (L1-resident after the
 * first warp); every load issued before the first MMA, so a warp has UU KB
 * of weights in flight; a warp's last n < UU chunks go in one such step
 * too, one memory round trip instead of n. Then the MMAs in chunk order. */
template <int NJ, int ALIGNED, int UU>
static __device__ __forceinline__ void k40_step(float (*acc)[4], const uint16_t *wl_row, const uint16_t *wh_row,
                                                const uint16_t *const *x_row, int64_t c, int n)
{
    const int64_t k0 = c * K40_CHUNK + 8 * (threadIdx.x % 4);
    uint4 wl[UU], wh[UU], xv[UU][NJ];
#pragma unroll
    for (int u = 0; u < UU; u++) {
        wl[u] = k40_load8<ALIGNED, 1>(u < n ? wl_row : NULL, k0 + u * K40_CHUNK);
        wh[u] = k40_load8<ALIGNED, 1>(u < n ? wh_row : NULL, k0 + u * K40_CHUNK);
    }
#pragma unroll
    for (int u = 0; u < UU; u++)
#pragma unroll
        for (int j = 0; j < NJ; j++)
            xv[u][j] = k40_load8<ALIGNED, 0>(u < n ? x_row[j] : NULL, k0 + u * K40_CHUNK);
#pragma unroll
    for (int u = 0; u < UU; u++)
        if (u < n)
            k40_mma_chunk<NJ>(acc, wl[u], wh[u], xv[u]);
}

/* Tokens staged in shared memory (XS, k40_plan.h): the CTA's four
 * warps walk one k-range (wk = 1) over four different 16-row slabs, so the
 * 8 * NJ token rows of a step (K40_UXS chunks, 128 k) are copied once per
 * CTA with cp.async, double-buffered, instead of once per warp into
 * registers; the registers that held them let every warp keep K40_UXS
 * chunks of weights in flight. Each 16-byte unit v of token row rr sits at
 * unit v ^ ((rr & 1) << 2): the eight lanes of a load phase (two rows, four
 * units) then hit eight different bank groups. Returns the first chunk
 * not done (the rest, fewer than a step and the K edge, go the register
 * way). */
#define K40_XS_UNITS (K40_UXS * K40_CHUNK / 8)

/* Copies the token tile of the step starting at k = kb into buf (token rows
 * past T: zeros), one cp.async group. */
template <int NJ>
static __device__ __forceinline__ void k40_xs_copy(uint4 (*buf)[K40_XS_UNITS], const uint16_t *x, int64_t ldx,
                                                   int64_t t0, int64_t t, int64_t kb)
{
#pragma unroll
    for (int i = threadIdx.x; i < 8 * NJ * K40_XS_UNITS; i += K40_THREADS) {
        const int rr = i / K40_XS_UNITS, v = i % K40_XS_UNITS;
        const bool in = t0 + rr < t;
        tk_cp_async_16(tk_smem_u32(&buf[rr][v ^ ((rr & 1) << 2)]),
                       in ? (const void *)(x + (t0 + rr) * ldx + kb + 8 * v) : (const void *)x, in ? 16u : 0u);
    }
    tk_cp_async_commit();
}

template <int NJ>
static __device__ __forceinline__ int64_t k40_loop_xs(float (*acc)[4], uint4 (*xs)[8 * NJ][K40_XS_UNITS],
                                                      const uint16_t *wl_row, const uint16_t *wh_row,
                                                      const uint16_t *x, int64_t ldx, int64_t t0, int64_t t,
                                                      int64_t c0, int64_t c_full)
{
    const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
    const int64_t steps = c_full > c0 ? (c_full - c0) / K40_UXS : 0;
    if (steps > 0)
        k40_xs_copy<NJ>(xs[0], x, ldx, t0, t, c0 * K40_CHUNK);
    for (int64_t s = 0; s < steps; s++) {
        const int64_t k0 = (c0 + s * K40_UXS) * K40_CHUNK + 8 * t4;
        uint4 wl[K40_UXS], wh[K40_UXS];
#pragma unroll
        for (int u = 0; u < K40_UXS; u++) {
            wl[u] = k40_load8<1, 1>(wl_row, k0 + u * K40_CHUNK);
            wh[u] = k40_load8<1, 1>(wh_row, k0 + u * K40_CHUNK);
        }
        if (s + 1 < steps) {
            k40_xs_copy<NJ>(xs[(s + 1) & 1], x, ldx, t0, t, (c0 + (s + 1) * K40_UXS) * K40_CHUNK);
            tk_cp_async_wait(1);
        } else {
            tk_cp_async_wait(0);
        }
        __syncthreads();
#pragma unroll
        for (int u = 0; u < K40_UXS; u++) {
            uint4 xv[NJ];
#pragma unroll
            for (int j = 0; j < NJ; j++) {
                const int rr = 8 * j + g;
                xv[j] = xs[s & 1][rr][(4 * u + t4) ^ ((rr & 1) << 2)];
            }
            k40_mma_chunk<NJ>(acc, wl[u], wh[u], xv);
        }
        __syncthreads();                    /* buffer s & 1 is refilled at step s + 2 */
    }
    return c0 + steps * K40_UXS;
}

/* Issues a stage's copies into dst on its full barrier bar (k40_loop_bulk):
 * 16 weight rows from row r0 and the tokens from t0, at k; EPI instances
 * with umap (TK_EPI_GATED): the weights as two boxes of 8 rows, the slab's
 * gate rows r0 / 2.. (wmap) then its up rows (umap), k40_epi's pairing. */
template <int EPI>
static __device__ __forceinline__ void k40_bulk_stage(uint32_t dst, uint32_t bar, uint32_t bytes, uint32_t sb,
                                                      const CUtensorMap *wmap, const CUtensorMap *umap,
                                                      const CUtensorMap *xmap, int32_t k, int64_t r0, int64_t t0)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    tk_mbarrier_arrive_expect_tx(bar, bytes);
    if (EPI && umap) {
        tk_tma_load_2d(dst, wmap, k, (int32_t)(r0 / 2), bar);
        tk_tma_load_2d(dst + 8 * sb, umap, k, (int32_t)(r0 / 2), bar);
    } else {
        tk_tma_load_2d(dst, wmap, k, (int32_t)r0, bar);
    }
    tk_tma_load_2d(dst + 16 * sb, xmap, k, (int32_t)t0, bar);
#endif
}

/* Weights and tokens through a ring of K40_BULK_NS stages in shared memory
 * (sm_90): thread 0 issues two TMA copies a stage (the CTA's 16 weight rows
 * and its 8 * NJ token rows, K40_BULK_SC chunks = 256 k each; rows past R
 * or T zero-filled; GATED: three, k40_bulk_stage) on the stage's full barrier; the CTA's four warps (all
 * on the same 16 rows, wk = 4) take two chunks of each stage; a CTA
 * barrier after each stage frees it for the copy K40_BULK_NS stages on.
 * The bytes in flight are the ring's, not registers', and no load is left
 * on a stage's critical path. The boxes' rows lie 512 bytes apart, so the
 * eight rows of a load phase share banks (two wavefronts more a load: a
 * small share of the SM's shared-memory rate at DRAM speed). Returns the
 * first chunk not done. */
template <int NJ, int EPI>
static __device__ __forceinline__ int64_t k40_loop_bulk(float (*acc)[4], uint8_t *ring, uint64_t *full,
                                                        const CUtensorMap *wmap, const CUtensorMap *umap,
                                                        const CUtensorMap *xmap, int64_t r0, int64_t t0, int64_t c0,
                                                        int64_t c_end)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
    const int64_t nst = c_end > c0 ? (c_end - c0) / K40_BULK_SC : 0;
    if (nst == 0)
        return c0;
    constexpr uint32_t SB = K40_BULK_SC * K40_CHUNK * 2;
    constexpr uint32_t STAGE = (16 + 8 * NJ) * SB;
    const uint32_t ring_s = tk_smem_u32(ring), full_s = tk_smem_u32(full);
    if (threadIdx.x == 0) {
        tk_tma_prefetch_map(wmap);
        tk_tma_prefetch_map(xmap);
        for (int st = 0; st < K40_BULK_NS; st++)
            tk_mbarrier_init(full_s + 8 * st, 1);
        tk_fence_mbarrier_init();
    }
    __syncthreads();
    for (int64_t s = 0; threadIdx.x == 0 && s < nst && s < K40_BULK_NS; s++) {
        const uint32_t st = (uint32_t)s;
        const int32_t k = (int32_t)((c0 + s * K40_BULK_SC) * K40_CHUNK);
        k40_bulk_stage<EPI>(ring_s + st * STAGE, full_s + 8 * st, STAGE, SB, wmap, umap, xmap, k, r0, t0);
    }
    constexpr int UW = K40_BULK_SC / K40_WARPS;     /* chunks a warp takes of each stage */
    for (int64_t s = 0; s < nst; s++) {
        const int st = (int)(s % K40_BULK_NS);
        tk_mbarrier_wait_parity(full_s + 8 * st, (uint32_t)(s / K40_BULK_NS) & 1);
        const uint8_t *sw = ring + st * STAGE + (UW * warp) * (K40_CHUNK * 2) + 16 * t4;
#pragma unroll
        for (int u = 0; u < UW; u++) {
            uint4 xv[NJ];
#pragma unroll
            for (int j = 0; j < NJ; j++)
                xv[j] = *(const uint4 *)(sw + (16 + 8 * j + g) * SB + u * (K40_CHUNK * 2));
            const uint4 wl = *(const uint4 *)(sw + g * SB + u * (K40_CHUNK * 2));
            const uint4 wh = *(const uint4 *)(sw + (g + 8) * SB + u * (K40_CHUNK * 2));
            k40_mma_chunk<NJ>(acc, wl, wh, xv);
        }
        __syncthreads();
        if (threadIdx.x == 0 && s + K40_BULK_NS < nst) {
            const int32_t k = (int32_t)((c0 + (s + K40_BULK_NS) * K40_BULK_SC) * K40_CHUNK);
            k40_bulk_stage<EPI>(ring_s + st * STAGE, full_s + 8 * st, STAGE, SB, wmap, umap, xmap, k, r0, t0);
        }
    }
    return c0 + nst * K40_BULK_SC;
#else
    return c0;
#endif
}

/* The fused epilogue of the EPI instances (issue 39), on the thread's
 * final sums: after the split-K reduction in split order, the one place
 * the fp32 value of an element exists. Each element goes through
 * epi_formula.cuh's formula of x->e.kind (k01_naive's, the same roundings)
 * and is stored to D. The sums pass through the thread's own slots of
 * shared memory (s: slot q at s[32 q], lane-contiguous; no barrier, each
 * thread reads what it wrote) so that one loop, not unrolled, holds the
 * formula once: the kind and activation are runtime values, and their
 * every arm unrolled over the 4 NJ register sums would multiply the
 * instance's length for work done once a thread. Fragment element e of
 * n8 fragment j is weight row r0 + g (+8 for e >= 2) and token t0 + 8j +
 * 2t + (e & 1); GATED: row g's gate and up of output column r0 / 2 + g
 * (k40_epi). */
template <int NJ>
static __device__ __forceinline__ void k40_epi_finish(const k40_params *p, const k40_epi *x, float (*acc)[4],
                                                      float *s, int64_t r0, int64_t t0)
{
    const int lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
    const tk_epi_args *e = &x->e;
#pragma unroll
    for (int j = 0; j < NJ; j++)
#pragma unroll
        for (int q = 0; q < 4; q++)
            s[32 * (4 * j + q)] = acc[j][q];
    const int gated = e->kind == TK_EPI_GATED;
#pragma unroll 1
    for (int q = 0; q < 4 * NJ; q++) {
        const int64_t row = r0 + g + (q % 4 >= 2 ? 8 : 0), tok = t0 + 8 * (q / 4) + 2 * t4 + (q & 1);
        const float P = __fmul_rn(p->alpha, s[32 * q]);
        if (gated) {                        /* elements 0, 1: the gate's, their up halves two on */
            const int64_t col = r0 / 2 + g;
            if (q % 4 < 2 && tok < p->t && col < e->out_cols) {
                const float v = tk_epi_gated(e, P, __fmul_rn(p->alpha, s[32 * (q + 2)]), tok, col, e->out_cols, 1);
                tk_epi_store_d(e, p->c_type, tok, col, tk_epi_residual(p->c, x->ldc, p->c_type, p->beta, tok, col, v));
            }
            continue;
        }
        if (row >= p->r || tok >= p->t)
            continue;
        const int64_t i = x->swap ? row : tok, j = x->swap ? tok : row;   /* C's element */
        if (e->kind == TK_EPI_GATED_BACKWARD) {   /* D's columns j and N + j; beta is 0 */
            tk_epi_store_d(e, p->c_type, i, j, tk_epi_gated_grad(e, P, i, j, 0));
            tk_epi_store_d(e, p->c_type, i, e->out_cols / 2 + j, tk_epi_gated_grad(e, P, i, j, 1));
            continue;
        }
        const float v = e->kind == TK_EPI_BACKWARD ? tk_epi_backward(e, P, i, j) : tk_epi_bias_act(e, P, i, j, 1);
        tk_epi_store_d(e, p->c_type, i, j, tk_epi_residual(p->c, x->ldc, p->c_type, p->beta, i, j, v));
    }
}

/* The kernel's body (k40_kernel, k40_kernel_bulk: the ring's tensor maps
 * wmap, xmap, or NULL; EPI: the fused epilogue's k40_kernel_epi and
 * k40_kernel_bulk_epi, x its arguments and umap GATED's up map in the
 * ring, else NULL). */
template <int NJ, int ALIGNED, int XS, int BULK, int USHORT, int EPI>
static __device__ __forceinline__ void k40_body(const k40_params *p, const k40_epi *x, const CUtensorMap *wmap,
                                                const CUtensorMap *umap, const CUtensorMap *xmap)
{
    constexpr int U = USHORT ? K40_U_SHORT : K40_U(NJ, ALIGNED);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
    /* wk warps share each 16-row slab, splitting its k-range; the CTA has
     * K40_WARPS / wk slabs. wk is 1, 2 or 4 (k40_plan.h): shifts, not
     * divisions, here and for the k-range below. */
    const int lwk = p->wk == 4 ? 2 : p->wk == 2 ? 1 : 0, wk = 1 << lwk, kw = warp & (wk - 1);
    const int64_t r0 = (int64_t)blockIdx.x * ((16 * K40_WARPS) >> lwk) + (warp >> lwk) * 16;   /* k40_rows(wk) */
    const int64_t t0 = (int64_t)blockIdx.z * (8 * NJ);
    const uint16_t *wl_row = r0 + g < p->r ? p->w + (r0 + g) * p->ldw : NULL;
    const uint16_t *wh_row = r0 + g + 8 < p->r ? p->w + (r0 + g + 8) * p->ldw : NULL;
    if (EPI && x->e.kind == TK_EPI_GATED) {   /* the slab's 8 row pairs (k40_epi) */
        const int64_t pr = r0 / 2 + g;
        wl_row = pr < x->e.out_cols ? p->w + pr * p->ldw : NULL;
        wh_row = pr < x->e.out_cols ? (const uint16_t *)x->e.b_up + pr * p->ldw : NULL;
    }
    const uint16_t *x_row[NJ];
#pragma unroll
    for (int j = 0; j < NJ; j++)
        x_row[j] = t0 + 8 * j + g < p->t ? p->x + (t0 + 8 * j + g) * p->ldx : NULL;

    /* The split's chunks; unsplit without the two 64-bit divisions, which
     * came before every CTA's first load (1 x 50257 x 768: 1571 CTAs). */
    int64_t s0 = p->splits == 1 ? 0 : (int64_t)blockIdx.y * p->chunks / p->splits;
    const int64_t s1 = p->splits == 1 ? p->chunks : (int64_t)(blockIdx.y + 1) * p->chunks / p->splits;
    float acc[NJ][4];
#pragma unroll
    for (int j = 0; j < NJ; j++)
        acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    if constexpr (BULK) {
        /* The whole stages inside K through the ring, the rest (under a
         * stage, and the K edge) the register way below. */
        extern __shared__ __align__(128) uint8_t k40_ring[];
        __shared__ __align__(8) uint64_t full[K40_BULK_NS];
        const int64_t inside = s1 < p->k / K40_CHUNK ? s1 : p->k / K40_CHUNK;
        s0 = k40_loop_bulk<NJ, EPI>(acc, k40_ring, full, wmap, umap, xmap, r0, t0, s0,
                                    s0 + (inside > s0 ? (inside - s0) / K40_BULK_SC * K40_BULK_SC : 0));
    }
    const int64_t c0 = s0 + ((s1 - s0) * kw >> lwk), c1 = s0 + ((s1 - s0) * (kw + 1) >> lwk);
    const int64_t c_full = c1 < p->k / K40_CHUNK ? c1 : p->k / K40_CHUNK;   /* chunks inside K */

    int64_t c = c0;
    if constexpr (XS) {
        __shared__ uint4 xs[2][8 * NJ][K40_XS_UNITS];
        c = k40_loop_xs<NJ>(acc, xs, wl_row, wh_row, p->x, p->ldx, t0, p->t, c0, c_full);
    }
    for (; c + U <= c_full; c += U)
        k40_step<NJ, ALIGNED, U>(acc, wl_row, wh_row, x_row, c, U);
    if (c < c_full) {
        k40_step<NJ, ALIGNED, U>(acc, wl_row, wh_row, x_row, c, (int)(c_full - c));
        c = c_full;
    }
    if (c < c1) {                           /* the chunk across the K edge (c1 <= c_full + 1) */
        const int64_t k = c * K40_CHUNK + 8 * t4;
        uint4 xv[NJ];
#pragma unroll
        for (int j = 0; j < NJ; j++)
            xv[j] = k40_load8_edge(x_row[j], k, p->k);
        k40_mma_chunk<NJ>(acc, k40_load8_edge(wl_row, k, p->k), k40_load8_edge(wh_row, k, p->k), xv);
    }

    /* The warps of a slab meet in shared memory; the first adds the
     * others' sums in k order and goes on alone. EPI: also each thread's
     * slots for k40_epi_finish (a thread of the first warp of a slab
     * rewrites only its own, which no other reads). */
    __shared__ float red[XS && !EPI ? 1 : K40_WARPS][NJ][4][32];
    if (!XS && wk > 1) {
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                red[warp][j][e][lane] = acc[j][e];
        __syncthreads();
        if (kw == 0)
            for (int q = 1; q < wk; q++)
#pragma unroll
                for (int j = 0; j < NJ; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        acc[j][e] += red[warp + q][j][e][lane];
    }
    const bool active = kw == 0;

    if (p->splits > 1) {
        const int64_t group = (int64_t)blockIdx.z * gridDim.x + blockIdx.x;
        const float4 *first = p->part + (size_t)(group * p->splits) * (NJ * K40_THREADS) + threadIdx.x;
        if (blockIdx.y + 1 < (unsigned)p->splits) {
            /* Not the last split: store the partial sum, publish it. */
            float4 *slot = p->part + (size_t)(group * p->splits + blockIdx.y) * (NJ * K40_THREADS) + threadIdx.x;
            if (active)
#pragma unroll
                for (int j = 0; j < NJ; j++)
                    __stcg(slot + j * K40_THREADS, make_float4(acc[j][0], acc[j][1], acc[j][2], acc[j][3]));
            __threadfence();
            __syncthreads();
            if (threadIdx.x == 0)
                tk_flag_store_release(p->flag + group * p->splits + blockIdx.y, p->seq);
            return;
        }
        /* The last split adds the others' partial sums to its own, in
         * split order: the same sum on every run. Thread s waits for split
         * s's flag; a flag left by an older launch of any kernel holds a
         * smaller seq (the handle's flag area holds launch numbers alone). No CAS, so the splits
         * never contend on one word. The waits cannot deadlock: a split
         * grid fits the GPU in one wave (k40_plan.h), and the last split
         * has the highest block index of its group. */
        if (threadIdx.x + 1 < (unsigned)p->splits)
            while (tk_flag_load_acquire(p->flag + group * p->splits + threadIdx.x) != p->seq)
                __nanosleep(32);
        __syncthreads();
        float sum[NJ][4];
#pragma unroll
        for (int j = 0; j < NJ; j++)
            sum[j][0] = sum[j][1] = sum[j][2] = sum[j][3] = 0.0f;
        /* RB slots' loads in flight at once, then added in split order:
         * one L2 round trip per RB splits, not per split. */
        constexpr int RB = NJ >= 8 ? 1 : 8 / NJ;
        for (int s0 = 0; active && s0 + 1 < p->splits; s0 += RB) {
            float4 v[RB][NJ];
#pragma unroll
            for (int u = 0; u < RB; u++)
#pragma unroll
                for (int j = 0; j < NJ; j++)
                    v[u][j] = s0 + u + 1 < p->splits
                                  ? __ldcg(first + (size_t)(s0 + u) * (NJ * K40_THREADS) + j * K40_THREADS)
                                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
            for (int u = 0; u < RB; u++)
#pragma unroll
                for (int j = 0; j < NJ; j++)
                    if (s0 + u + 1 < p->splits) {
                        sum[j][0] += v[u][j].x;
                        sum[j][1] += v[u][j].y;
                        sum[j][2] += v[u][j].z;
                        sum[j][3] += v[u][j].w;
                    }
        }
#pragma unroll
        for (int j = 0; j < NJ; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[j][e] += sum[j][e];
    }

    if constexpr (EPI) {
        if (active)
            k40_epi_finish<NJ>(p, x, acc, &red[warp][0][0][lane], r0, t0);
    } else {
        /* Fragment element e of n8 fragment j: weight row g (+8 for e >= 2),
         * token 2t + (e & 1). */
#pragma unroll
        for (int j = 0; j < NJ; j++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int64_t row = r0 + g + (e >= 2 ? 8 : 0), tok = t0 + 8 * j + 2 * t4 + (e & 1);
                if (active && row < p->r && tok < p->t)
                    tk_epilogue_store(p->c, tok * p->ldc_t + row * p->ldc_r, p->c_type, acc[j][e], p->alpha,
                                      p->beta);
            }
        }
    }
}

template <int NJ, int ALIGNED, int XS, int USHORT>
static __global__ void __launch_bounds__(K40_THREADS, K40_CTAS_PER_SM(NJ))
    k40_kernel(const __grid_constant__ k40_params p)
{
    k40_body<NJ, ALIGNED, XS, 0, USHORT, 0>(&p, NULL, NULL, NULL, NULL);
}

template <int NJ>
static __global__ void __launch_bounds__(K40_THREADS, K40_CTAS_PER_SM(NJ))
    k40_kernel_bulk(const __grid_constant__ k40_bulk_params q)
{
    k40_body<NJ, 1, 0, 1, 0, 0>(&q.p, NULL, &q.wmap, NULL, &q.xmap);
}

/* The same with a fused epilogue (k40_epi): instances apart, so that the
 * dense ones keep their machine code and parameter block. */
template <int NJ, int ALIGNED, int XS, int USHORT>
static __global__ void __launch_bounds__(K40_THREADS, K40_CTAS_PER_SM(NJ))
    k40_kernel_epi(const __grid_constant__ k40_epi_params q)
{
    k40_body<NJ, ALIGNED, XS, 0, USHORT, 1>(&q.p, &q.x, NULL, NULL, NULL);
}

template <int NJ>
static __global__ void __launch_bounds__(K40_THREADS, K40_CTAS_PER_SM(NJ))
    k40_kernel_bulk_epi(const __grid_constant__ k40_bulk_epi_params q)
{
    k40_body<NJ, 1, 0, 1, 0, 1>(&q.p, &q.x, &q.wmap, q.x.e.kind == TK_EPI_GATED ? &q.umap : NULL, &q.xmap);
}

/* The kernel instance for nj fragments, the alignment, the token staging
 * (xs: aligned, nj 4 or 8 only), the ring of TMA copies (bulk: aligned,
 * nj 1, 2 or 4 only) and six chunks a step (ushort: aligned, nj 1 only);
 * epi: the fused epilogue's (k40_kernel_epi, k40_kernel_bulk_epi). */
#define K40_SELECT(KERNEL, KERNEL_BULK)                                                                              \
    switch (nj) {                                                                                                    \
    case 1:                                                                                                          \
        return bulk ? (const void *)KERNEL_BULK<1>                                                                   \
               : ushort ? (const void *)KERNEL<1, 1, 0, 1>                                                           \
                        : aligned ? (const void *)KERNEL<1, 1, 0, 0> : (const void *)KERNEL<1, 0, 0, 0>;             \
    case 2:                                                                                                          \
        return bulk ? (const void *)KERNEL_BULK<2>                                                                   \
               : aligned ? (const void *)KERNEL<2, 1, 0, 0> : (const void *)KERNEL<2, 0, 0, 0>;                      \
    case 4:                                                                                                          \
        return bulk ? (const void *)KERNEL_BULK<4>                                                                   \
               : xs ? (const void *)KERNEL<4, 1, 1, 0>                                                               \
                  : aligned ? (const void *)KERNEL<4, 1, 0, 0> : (const void *)KERNEL<4, 0, 0, 0>;                   \
    default:                                                                                                         \
        return xs ? (const void *)KERNEL<8, 1, 1, 0>                                                                 \
                  : aligned ? (const void *)KERNEL<8, 1, 0, 0> : (const void *)KERNEL<8, 0, 0, 0>;                   \
    }
static const void *k40_func(int nj, int aligned, int xs, int bulk, int ushort, int epi)
{
    if (epi) {
        K40_SELECT(k40_kernel_epi, k40_kernel_bulk_epi)
    }
    K40_SELECT(k40_kernel, k40_kernel_bulk)
}
#undef K40_SELECT

/* The plan on this device: the ring of bulk copies needs sm_90 (a plan
 * whose ring is cleared keeps ushort 0: the register path's default step). */
static void k40_plan_dev(const tk_args *a, const tk_device *dev, size_t ws_avail, k40_plan *p)
{
    k40_make_plan(a, dev ? dev->sm_count : 1, ws_avail, p);
    if (!dev || dev->sm < 90)
        p->bulk = 0;
}

/* A fused epilogue (a->epi; nothing to check without one): every kind and
 * activation, D apart from C with any beta, K == 0 (the formula on P = 0),
 * in both orientations, but GATED only with the weights on B (the plan
 * unswapped: its row pairs are weight rows, k40_epi) and no bias_grad
 * (its column sums would need a second fixed-order reduction across the
 * token blocks or, swapped, across the CTAs of the weight rows; k01_naive
 * computes them). */
static tk_status k40_supports_epi(const tk_args *a, const k40_plan *p, char *why, size_t len)
{
    const tk_epi_args *e = a->epi;
    if (!e)
        return TK_SUCCESS;
    if (e->bias_grad) {
        snprintf(why, len, "bias_grad: its column sums are not fused in k40_skinny (k01_naive computes them)");
        return TK_ERR_NOT_SUPPORTED;
    }
    if (e->kind == TK_EPI_GATED && p->swap) {
        snprintf(why, len,
                 "epilogue: TK_EPI_GATED with N = %lld < M = %lld: k40_skinny pairs the gate and up rows of the "
                 "streamed weights, which are B's only where N >= M",
                 (long long)a->n, (long long)a->m);
        return TK_ERR_NOT_SUPPORTED;
    }
    return TK_SUCCESS;
}

static tk_status k40_supports(const tk_kernel *k, const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    (void)k;
    if (a->op_a != TK_OP_N || a->op_b != TK_OP_T) {
        snprintf(why, len, "op_a %s, op_b %s is not supported: this kernel reads A stored M x K and B stored N x K "
                 "(op_a N, op_b T), both along K",
                 a->op_a == TK_OP_N ? "N" : "T", a->op_b == TK_OP_N ? "N" : "T");
        return TK_ERR_NOT_SUPPORTED;
    }
    k40_plan p;
    k40_make_plan(a, 1, 0, &p);
    if (p.tokblocks > 65535 || p.rowblocks > INT_MAX) {
        snprintf(why, len, "M = %lld and N = %lld are both too large for this skinny kernel (min(M, N) needs %lld "
                 "blocks of %d, at most 65535)",
                 (long long)a->m, (long long)a->n, (long long)p.tokblocks, 8 * p.nj);
        return TK_ERR_NOT_SUPPORTED;
    }
    return k40_supports_epi(a, &p, why, len);
}

static void k40_resources(const tk_kernel *k, const tk_args *a, const tk_device *dev, tk_resources *r)
{
    (void)k;
    int nj = 2, aligned = 1, xs = 0, bulk = 0, ushort = 0;
    if (a) {
        k40_plan p;
        k40_plan_dev(a, dev, (size_t)-1, &p);
        nj = p.nj;
        aligned = k40_aligned(a);
        xs = p.xs;
        bulk = p.bulk;
        ushort = p.ushort;
    }
    r->func = k40_func(nj, aligned, xs, bulk, ushort, a && a->epi);
    r->threads = K40_THREADS;
    r->dyn_smem = bulk ? k40_bulk_smem(nj) : 0;
}

static size_t k40_workspace(const tk_kernel *k, const tk_args *a, const tk_device *dev, size_t *nflags)
{
    (void)k;
    k40_plan p;
    k40_plan_dev(a, dev, (size_t)-1, &p);
    *nflags = (size_t)p.nflags;
    return p.ws_bytes;
}

/* The ring's tensor maps (k40_loop_bulk): 16 weight rows a box, or with
 * gated (umap) two boxes of 8, the gate's rows of B and the up half's of
 * b_up (k40_epi); 8 * nj token rows. */
static tk_status k40_bulk_maps(const tk_args *a, const k40_plan *pl, const k40_params *p, int gated,
                               CUtensorMap *wmap, CUtensorMap *xmap, CUtensorMap *umap, char *why, size_t len)
{
    const uint64_t rows = gated ? (uint64_t)a->epi->out_cols : (uint64_t)pl->r;
    const uint32_t box = gated ? 8 : 16;
    tk_status st = tk_tma_map_2d(a->lc, wmap, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, p->w, rows, (uint64_t)pl->k,
                                 (uint64_t)p->ldw, box, K40_BULK_SC * K40_CHUNK, CU_TENSOR_MAP_SWIZZLE_NONE, why,
                                 len);
    if (!st && gated)
        st = tk_tma_map_2d(a->lc, umap, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a->epi->b_up, rows, (uint64_t)pl->k,
                           (uint64_t)p->ldw, box, K40_BULK_SC * K40_CHUNK, CU_TENSOR_MAP_SWIZZLE_NONE, why, len);
    if (!st)
        st = tk_tma_map_2d(a->lc, xmap, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, p->x, (uint64_t)pl->t, (uint64_t)pl->k,
                           (uint64_t)p->ldx, (uint32_t)(8 * pl->nj), K40_BULK_SC * K40_CHUNK,
                           CU_TENSOR_MAP_SWIZZLE_NONE, why, len);
    return st;
}

static tk_status k40_launch(const tk_kernel *k, const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why,
                            size_t len)
{
    (void)k;
    k40_plan pl;
    k40_plan_dev(a, dev, a->kws && a->flags ? a->kws_bytes : 0, &pl);
    if (pl.splits > 1 && (size_t)pl.nflags > a->nflags)   /* fewer flags than asked for: unsplit */
        k40_plan_dev(a, dev, 0, &pl);
    const void *func = k40_func(pl.nj, k40_aligned(a), pl.xs, pl.bulk, pl.ushort, a->epi != NULL);
    const size_t smem = pl.bulk ? k40_bulk_smem(pl.nj) : 0;
    if (smem > 0) {                         /* with the static arrays, past 48 KB: opt in */
        cudaError_t e = tk_lc_func_smem(a->lc, func, (int)smem);
        if (e != cudaSuccess) {
            cudaGetLastError();
            snprintf(why, len, "k40_skinny: cudaFuncSetAttribute(%zu bytes of shared memory): %s", smem,
                     cudaGetErrorString(e));
            tk_note_cuda_error((int)e);
            return TK_ERR_CUDA;
        }
    }
    k40_params p;
    p.w = (const uint16_t *)(pl.swap ? a->a : a->b);
    p.x = (const uint16_t *)(pl.swap ? a->b : a->a);
    p.ldw = pl.swap ? a->lda : a->ldb;
    p.ldx = pl.swap ? a->ldb : a->lda;
    p.c = a->c;
    p.ldc_t = pl.swap ? 1 : a->ldc;
    p.ldc_r = pl.swap ? a->ldc : 1;
    p.r = pl.r;
    p.t = pl.t;
    p.k = pl.k;
    p.chunks = pl.chunks;
    p.splits = pl.splits;
    p.wk = pl.wk;
    p.c_type = a->c_type;
    p.alpha = a->alpha;
    p.beta = a->beta;
    p.seq = a->seq;
    p.flag = NULL;
    p.part = NULL;
    if (pl.splits > 1) {
        p.flag = a->flags;
        p.part = (float4 *)a->kws;
    }
    /* The parameter block: k40_params alone, or with the ring's maps, the
     * epilogue, or both (the dense blocks as they were, k40_bulk_params). */
    k40_bulk_params qb;
    k40_epi_params qe;
    k40_bulk_epi_params qbe;
    void *arg = &p;
    if (a->epi) {
        qe.p = qbe.p = p;
        qe.x.e = *a->epi;
        qe.x.ldc = a->ldc;
        qe.x.swap = pl.swap;
        qbe.x = qe.x;
        arg = pl.bulk ? (void *)&qbe : (void *)&qe;
    } else if (pl.bulk) {
        qb.p = p;
        arg = &qb;
    }
    if (pl.bulk) {
        const int gated = a->epi && a->epi->kind == TK_EPI_GATED;
        tk_status st = k40_bulk_maps(a, &pl, &p, gated, a->epi ? &qbe.wmap : &qb.wmap,
                                     a->epi ? &qbe.xmap : &qb.xmap, gated ? &qbe.umap : NULL, why, len);
        if (st)
            return st;
    }
    void *args[] = { arg };
    cudaError_t e = cudaLaunchKernel(func, dim3((unsigned)pl.rowblocks, (unsigned)pl.splits, (unsigned)pl.tokblocks),
                                     dim3(K40_THREADS), args, smem, stream);
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(why, len, "k40_skinny launch (%lld x %d x %lld CTAs): %s", (long long)pl.rowblocks, pl.splits,
                 (long long)pl.tokblocks, cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

/* Auto-dispatch takes this kernel where the token side is at most
 * K40_AUTO_MAX_T and its row blocks fit about one wave (or K is short);
 * longer streams stay with k34's TMA ring, which reads them faster
 * (measured: docs/NOTES.md, session 6). From 17 to 32 tokens (16-byte
 * loads only) where the tokens are staged in shared memory or come through
 * the TMA ring (unless their
 * unsplit grid ends in a last wave under 70% full at 4 CTAs a SM: 32 x
 * 37888 x 3584, 592 CTAs, 1.12 waves, measured 0.835x cuBLAS), or else
 * where K is at least twice the weight rows or there are at most 1024 of
 * them (H100, same run: 32 x 4096 x 4096 NT 22.9 us against k34's 23.7,
 * 32 x 768 x 3072 12.3 / 13.4, 32 x 768 x 768 8.3 / 9.3); k34 keeps 2304
 * or 3072 rows of K = 768 (32 x 3072 x 768: 10.3 against 9.9) and 33 to 64
 * tokens, whose m64n64 tiles are then full (docs/NOTES.md, session 7).
 * Elsewhere only as a last resort. */
#define K40_AUTO_MAX_T 16
#define K40_AUTO_MAX_T_XS 32
static int k40_rank(const tk_kernel *k, const tk_args *a, const tk_device *dev)
{
    (void)k;
    const int64_t t = a->m < a->n ? a->m : a->n, r = a->m < a->n ? a->n : a->m;
    const int64_t slabs64 = (r + 63) / 64;
    if (t <= K40_AUTO_MAX_T)
        return slabs64 <= 8LL * dev->sm_count || a->k <= 1024 ? 40 : 1;
    if (t <= K40_AUTO_MAX_T_XS && k40_aligned(a)) {
        k40_plan p;
        k40_make_plan(a, dev->sm_count, (size_t)-1, &p);
        /* a wave: the CTAs resident on every SM at once */
        const int64_t g = p.rowblocks * p.tokblocks, per_wave = (int64_t)K40_CTAS_PER_SM(p.nj) * dev->sm_count;
        const int64_t waves = (g + per_wave - 1) / per_wave;
        if (p.xs || p.bulk ? g <= (int64_t)K40_SPLIT_CTAS_PER_SM * dev->sm_count || 10 * g >= 7 * waves * per_wave
                 : a->k >= 2 * r || r <= 1024)
            return 40;
    }
    return 1;
}

/* The family's functions (src/kernels/table.def: its one configuration). */
extern "C" const tk_family_ops tk_ops_k40 = { k40_supports, k40_resources, k40_launch, k40_workspace, k40_rank };
