/* k21_mma_fastload - k20_mma_sync with bounds-free global loads for the
 * tiles that lie inside the matrices.
 *
 * What it changes against k20 and why: ncu on k20 at 8192^3 showed the
 * tensor pipe active 72% of the cycles, an issue slot busy 41% of the time,
 * and warps stalled mostly on fixed-latency dependencies and the math pipe;
 * the SASS showed about 440 instructions per warp per K tile of which only
 * 128 are HMMA, 32 LDSM and 12 LDGSTS -- most of the rest is the bounds
 * arithmetic of the predicated cp.async (row/column limits, zero-fill byte
 * counts, pointer selects), done for every copy although only edge tiles
 * need it. With only 2 warps per scheduler, those instruction runs leave the
 * tensor pipe idle. k21 decides once per K tile (uniform over the block)
 * whether the whole tile is inside A and B; if so the copies are plain
 * 16-byte cp.async at a pointer that advances by a fixed step. Edge tiles
 * and the last partial K tile take k20's predicated path unchanged.
 * Everything else (tiles, swizzle, pipeline, epilogue) is k20's.
 *
 * Tile configuration: as k20: BM = 128, BN = 256, BK = 64, 8 warps of
 * 64 x 64, 4 stages (192 KB) on H100, GROUP_M = 16, __launch_bounds__(256, 1):
 * 240-244 registers, no spills (tilekit info on the H100: 241 registers,
 * 196608 bytes dynamic shared memory, 1 block/SM).
 *
 * Measured effect (H100 SXM, one device run with k20 and cuBLAS, bf16 ->
 * fp32, NN, L2 flushed; the SM clock under this load was 1665-1680 MHz of
 * 1980, so figures move by up to ~10% between runs):
 *   SASS (sm_90a): the main loop of interior blocks is 242 instructions per
 *   warp per K tile (128 HMMA, 32 LDSM, 12 LDGSTS) against k20's 439.
 *   ncu at 8192^3 (clock locked at 1.44 GHz): tensor pipe active 80.9% of
 *   cycles (k20, then with GROUP_M 8, in an earlier run: 71.9%).
 *   tilekit bench, TFLOP/s (x cuBLAS): 8192^3 cuBLAS 781.5, k20 416.7
 *   (0.533), k21 497.3 (0.636); 4096^3 cuBLAS 754.5, k20 427.9, k21 455.7
 *   (0.604); 2048^3 cuBLAS 582.9, k20 344.8, k21 375.0 (0.643); 8000^3
 *   cuBLAS 761.8, k20 392.0, k21 420.9 (0.552).
 *   H4's harness in the same run, 8192^3 (median of 20): cuBLAS 776.1, k20
 *   400.0, k21 443.9; k21 with GROUP_M 8: 443.7, 256x128 tiles: 463.8,
 *   128x128 tiles with 2 blocks/SM: 422.2, 3 stages: 418.3. 8191x8193x8190
 *   (ld padded to 8): cuBLAS 126.8, k20 417.5, k21 384.4.
 *   Bank conflicts (ncu, 2048^3, op_b T): 0 on shared loads and stores;
 *   4.23M load wavefronts for 1.06M ldmatrix.x4, the minimum of 4 each.
 * Figure: 0.636x cuBLAS at 8192^3 (497.3 vs 781.5 TFLOP/s, tilekit bench);
 * the issue's 0.75x is not reached. The mma.sync ceiling this H100 showed in
 * a register-only loop is 645 TFLOP/s at 1826 MHz (2678 flop/clk/SM).
 * Reproduce: build/tilekit bench --kernel k21_mma_fastload
 *
 * Templates: the kernel is specialised on the two operand layouts (which
 * decide ldmatrix vs ldmatrix.trans and the loader's direction at compile
 * time) and its K-tile step on whether the copies need bounds checks; C
 * cannot express that without duplicating the kernel body eight times.
 */
#include <stdio.h>
#include <limits.h>
#include "../host/kernel.h"
#include "../ptx/cp_async.cuh"
#include "../ptx/ldmatrix.cuh"
#include "../ptx/mma_sync.cuh"
#include "../tiles/epilogue.cuh"
#include "../tiles/raster.cuh"
#include "../tiles/swizzle.cuh"

/* Configuration. The K21_* macros may be overridden with -D by tuning builds
 * (which also rename the registry entry with K21_ENTRY/K21_NAME). */
#ifndef K21_BM
#define K21_BM 128
#endif
#ifndef K21_BN
#define K21_BN 256
#endif
#ifndef K21_MAX_STAGES
#define K21_MAX_STAGES 4
#endif
#ifndef K21_GROUP_M
#define K21_GROUP_M 16
#endif
#ifndef K21_ENTRY
#define K21_ENTRY tk_kernel_k21_mma_fastload
#define K21_NAME "k21_mma_fastload"
#endif

#if K21_MAX_STAGES > 4
#error "k21_wait_pending handles at most 4 stages"
#endif

#define K21_BK 64          /* one 128-byte swizzle row of bf16 */
#define K21_WM 64
#define K21_WN 64
#ifndef K21_MIN_BLOCKS
#define K21_MIN_BLOCKS 1   /* blocks per SM the registers and shared memory are sized for */
#endif
#define K21_THREADS (K21_BM / K21_WM * K21_BN / K21_WN * 32)
#define K21_MIN_STAGES 2

/* Bytes of one stage: the A tile (BM x 64) then the B tile (64 x BN). */
#define K21_STAGE_BYTES ((K21_BM + K21_BN) * K21_BK * 2)

/* ---- global -> shared loader of one operand tile ----
 * The tile is R rows x C columns of a row-major global matrix (C a multiple
 * of 64), stored in smem as C/64 panels of R swizzled 128-byte rows. Each
 * thread copies PASSES chunks of 16 bytes: column chunk cc, rows r, r + RPP,
 * r + 2 RPP, ... (RPP = rows per pass of 256 threads; a multiple of 8, so
 * every one of a thread's chunks has the same swizzle). K runs along the
 * columns (A op N, B op T) or along the rows (A op T, B op N). */
typedef struct k21_loader {
    const uint8_t *g;   /* this thread's first chunk at the current K tile */
    uint32_t smem;      /* its byte offset inside the operand tile */
    int rows_left;      /* valid rows from this thread's first row on */
    int cols_left;      /* valid columns from this thread's first column on */
} k21_loader;

template <int R, int C>
static __device__ __forceinline__ k21_loader k21_loader_init(const void *base, int64_t ld, int row0, int col0,
                                                             int rows, int cols)
{
    const int cpr = C / 8;   /* chunks per row */
    const int cc = threadIdx.x % cpr, r = threadIdx.x / cpr;
    k21_loader l;
    l.g = (const uint8_t *)base + ((int64_t)(row0 + r) * ld + col0 + cc * 8) * 2;
    l.smem = (cc / 8) * R * TK_SWZ_ROW_BYTES + tk_swz128_chunk(r, cc % 8);
    l.rows_left = rows - (row0 + r);
    l.cols_left = cols - (col0 + cc * 8);
    return l;
}

/* Issues this thread's chunks first..last-1 (of PASSES) of the tile into
 * smem at dst. first/last become constants once the caller's k16 loop is
 * unrolled, so the range test costs nothing. full (uniform over the block):
 * every chunk of this tile lies inside the matrix, so the copies need no
 * bounds arithmetic -- the common case, and the change that makes k21. */
template <int R, int C>
static __device__ __forceinline__ void k21_loader_copy(const k21_loader *l, const void *base, int64_t ld,
                                                       uint32_t dst, int first, int last, int full)
{
    const int rpp = K21_THREADS / (C / 8);
    static_assert(rpp % 8 == 0 && R % rpp == 0, "each thread's chunks must share one swizzle phase");
    const int passes = R / rpp;
    const int64_t step = (int64_t)rpp * ld * 2;   /* bytes between a thread's chunks */
    const uint8_t *g = l->g + (first > 0 ? first : 0) * step;
    if (full) {
#pragma unroll
        for (int i = 0; i < passes; i++) {
            if (i < first || i >= last)
                continue;
            tk_cp_async_16(dst + l->smem + i * rpp * TK_SWZ_ROW_BYTES, g, 16);
            g += step;
        }
        return;
    }
    const int col_bytes = l->cols_left >= 8 ? 16 : (l->cols_left > 0 ? l->cols_left * 2 : 0);
#pragma unroll
    for (int i = 0; i < passes; i++) {
        if (i < first || i >= last)
            continue;
        const int bytes = l->rows_left > i * rpp ? col_bytes : 0;
        tk_cp_async_16(dst + l->smem + i * rpp * TK_SWZ_ROW_BYTES, bytes ? (const void *)g : base, (uint32_t)bytes);
        g += step;
    }
}

/* Moves the loader to the next K tile. */
template <int K_IS_ROWS>
static __device__ __forceinline__ void k21_loader_next(k21_loader *l, int64_t ld)
{
    if (K_IS_ROWS) {
        l->g += (int64_t)K21_BK * ld * 2;
        l->rows_left -= K21_BK;
    } else {
        l->g += K21_BK * 2;
        l->cols_left -= K21_BK;
    }
}

/* ---- shared -> register fragments ----
 * Byte offset (inside the operand tile) of the 16 bytes this lane hands to
 * ldmatrix.x4 for 16x16 sub-tile `t` of the warp (t-th m16 tile of A or
 * t-th n16 pair of B) at k16 slice `kk`.
 *  K-contiguous tiles (A op N, B op T; plain ldmatrix): rows are M or N.
 *    The 4 matrices are (rows 0-7 | 8-15) x (k 0-7 | 8-15) in the order the
 *    mma operand wants; `lane_off` already holds the row and the chunk bits
 *    of the lane; slice kk adds 2 chunks = XOR (kk << 5) (swizzle.cuh).
 *  MN-contiguous tiles (A op T, B op N; ldmatrix.trans): rows are K, so the
 *    slice is a row offset (16 rows = 2048 bytes) and the sub-tile a chunk
 *    XOR (t << 5). */
template <int K_CONTIG>
static __device__ __forceinline__ uint32_t k21_frag_off(uint32_t lane_off, int t, int kk)
{
    /* The row step never touches the chunk bits (4..6), so it is added after
     * the XOR and becomes the ldmatrix immediate offset. */
    if (K_CONTIG)
        return (lane_off ^ (uint32_t)(kk << 5)) + t * 16 * TK_SWZ_ROW_BYTES;
    return (lane_off ^ (uint32_t)(t << 5)) + kk * 16 * TK_SWZ_ROW_BYTES;
}

/* Lane offsets (see k21_frag_off). A: lane l of sub-tile t must point at
 * matrix q = l / 8, row l % 8; for a0..a3 the matrices are (m 0-7, k 0-7),
 * (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15). B: b[2t][0..1],
 * b[2t+1][0..1] are (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
 * (n 8-15, k 8-15). */
template <int A_T>
static __device__ __forceinline__ uint32_t k21_a_lane_off(int lane, int wm0)
{
    const int q = lane >> 3, r = lane & 7;
    if (!A_T)   /* [BM rows m][64 k]: row = m within 16, chunk = k / 8 */
        return tk_swz128_chunk(wm0 + (q & 1) * 8 + r, q >> 1);
    /* panels [BM/64][64 rows k][64 m]: row = k, chunk = m / 8 */
    return (wm0 / 64) * 64 * TK_SWZ_ROW_BYTES + tk_swz128_chunk((q >> 1) * 8 + r, q & 1);
}

template <int B_T>
static __device__ __forceinline__ uint32_t k21_b_lane_off(int lane, int wn0)
{
    const int q = lane >> 3, r = lane & 7;
    if (B_T)    /* [BN rows n][64 k] */
        return tk_swz128_chunk(wn0 + (q >> 1) * 8 + r, q & 1);
    /* panels [BN/64][64 rows k][64 n] */
    return (wn0 / 64) * 64 * TK_SWZ_ROW_BYTES + tk_swz128_chunk((q & 1) * 8 + r, q >> 1);
}

#define K21_MT (K21_WM / 16)   /* m16 tiles per warp */
#define K21_NT (K21_WN / 8)    /* n8 tiles per warp */

/* Loads the A and B fragments of k16 slice kk from one stage. */
template <int A_T, int B_T>
static __device__ __forceinline__ void k21_load_frags(uint32_t af[K21_MT][4], uint32_t bf[K21_NT][2], uint32_t sa,
                                                      uint32_t sb, uint32_t a_lane, uint32_t b_lane, int kk)
{
#pragma unroll
    for (int i = 0; i < K21_MT; i++) {
        if (A_T)
            tk_ldmatrix_x4_trans(af[i], sa + k21_frag_off<0>(a_lane, i, kk));
        else
            tk_ldmatrix_x4(af[i], sa + k21_frag_off<1>(a_lane, i, kk));
    }
#pragma unroll
    for (int j = 0; j < K21_NT / 2; j++) {
        uint32_t r[4];
        if (B_T)
            tk_ldmatrix_x4(r, sb + k21_frag_off<1>(b_lane, j, kk));
        else
            tk_ldmatrix_x4_trans(r, sb + k21_frag_off<0>(b_lane, j, kk));
        bf[2 * j][0] = r[0];
        bf[2 * j][1] = r[1];
        bf[2 * j + 1][0] = r[2];
        bf[2 * j + 1][1] = r[3];
    }
}

/* Stores C[row][col], C[row][col+1] (two neighbours of one accumulator
 * fragment) with alpha/beta, bounded by N; C is read only when beta != 0.
 * col is even and ldc is even (supports()), so pairs are aligned. */
static __device__ __forceinline__ void k21_store_pair(const tk_args *p, int row, int col, float x0, float x1)
{
    if (row >= p->m || col >= p->n)
        return;
    const int64_t idx = (int64_t)row * p->ldc + col;
    const int pair = col + 1 < p->n;
    float v0 = p->alpha * x0, v1 = p->alpha * x1;
    if (p->c_type == TK_F32) {
        float *c = (float *)p->c + idx;
        if (pair) {
            if (p->beta != 0.0f) {
                float2 old = *(const float2 *)c;
                v0 = fmaf(p->beta, old.x, v0);
                v1 = fmaf(p->beta, old.y, v1);
            }
            *(float2 *)c = make_float2(v0, v1);
        } else {
            if (p->beta != 0.0f)
                v0 = fmaf(p->beta, c[0], v0);
            c[0] = v0;
        }
    } else {
        uint16_t *c = (uint16_t *)p->c + idx;
        if (pair) {
            if (p->beta != 0.0f) {
                uint32_t old = *(const uint32_t *)c;
                v0 = fmaf(p->beta, tk_bf16_to_f32((uint16_t)(old & 0xffffu)), v0);
                v1 = fmaf(p->beta, tk_bf16_to_f32((uint16_t)(old >> 16)), v1);
            }
            *(uint32_t *)c = (uint32_t)tk_f32_to_bf16(v0) | ((uint32_t)tk_f32_to_bf16(v1) << 16);
        } else {
            if (p->beta != 0.0f)
                v0 = fmaf(p->beta, tk_bf16_to_f32(c[0]), v0);
            c[0] = tk_f32_to_bf16(v0);
        }
    }
}

/* Waits until at most n (0..K21_MAX_STAGES-2, uniform) cp.async groups are
 * pending; wait_group takes an immediate, hence the switch. */
static __device__ __forceinline__ void k21_wait_pending(int n)
{
    if (n >= 2)
        tk_cp_async_wait(2);
    else if (n == 1)
        tk_cp_async_wait(1);
    else
        tk_cp_async_wait(0);
}

/* The operand tiles: the A tile of A op N is [BM rows m][64 k], of A op T
 * (stored K x M) [64 rows k][BM m]; the B tile of B op T (stored N x K) is
 * [BN rows n][64 k], of B op N (stored K x N) [64 rows k][BN n]. */
#define K21_AR(A_T) ((A_T) ? K21_BK : K21_BM)
#define K21_AC(A_T) ((A_T) ? K21_BM : K21_BK)
#define K21_BR(B_T) ((B_T) ? K21_BN : K21_BK)
#define K21_BC(B_T) ((B_T) ? K21_BK : K21_BN)
#define K21_A_PASSES (K21_BM * K21_BK / 8 / K21_THREADS)   /* chunks per thread, either layout */
#define K21_B_PASSES (K21_BN * K21_BK / 8 / K21_THREADS)
#define K21_A_BYTES (K21_BM * K21_BK * 2)

/* Copies q in [first, last) of a stage's A_PASSES + B_PASSES chunks (A's first). */
template <int A_T, int B_T>
static __device__ __forceinline__ void k21_copy(const tk_args *p, const k21_loader *la, const k21_loader *lb,
                                                uint32_t dst, int first, int last, int full)
{
    k21_loader_copy<K21_AR(A_T), K21_AC(A_T)>(la, p->a, p->lda, dst, first, last, full);
    k21_loader_copy<K21_BR(B_T), K21_BC(B_T)>(lb, p->b, p->ldb, dst + K21_A_BYTES, first - K21_A_PASSES,
                                              last - K21_A_PASSES, full);
}

/* One K tile: the MMAs of stage *rd, while the copies of K tile
 * kt + stages - 1 (if fill) go to stage *wr. FULL: that tile lies wholly
 * inside A and B -- a compile-time flag, so the main loop of interior blocks
 * is compiled without any bounds arithmetic (a runtime flag was if-converted
 * by the compiler into predicated copies of both paths). */
template <int A_T, int B_T, int FULL>
static __device__ __forceinline__ void k21_ktile(const tk_args *p, k21_loader *la, k21_loader *lb,
                                                 float acc[K21_MT][K21_NT][4], uint32_t af[2][K21_MT][4],
                                                 uint32_t bf[2][K21_NT][2], uint32_t smem0, uint32_t a_lane,
                                                 uint32_t b_lane, int stages, int fill, int *rd, int *wr)
{
    const int Q = K21_A_PASSES + K21_B_PASSES;
    static_assert(Q % 4 == 0, "the copies of a stage are spread over the 4 k16 slices");
    const uint32_t dst = smem0 + *wr * K21_STAGE_BYTES;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        if (kk == 3) {
            /* Last slice: close this K tile's copies, then make the next stage
             * visible to all warps. The barrier also guarantees every warp has
             * finished reading the stage that the next K tile's copies
             * overwrite (its last fragments were read at kk == 2). */
            if (fill)
                k21_copy<A_T, B_T>(p, la, lb, dst, 3 * Q / 4, Q, FULL);
            tk_cp_async_commit();
            k21_wait_pending(stages - 2);
            __syncthreads();
            *rd = *rd + 1 == stages ? 0 : *rd + 1;
        }
        const uint32_t sa = smem0 + *rd * K21_STAGE_BYTES;
        k21_load_frags<A_T, B_T>(af[(kk + 1) & 1], bf[(kk + 1) & 1], sa, sa + K21_A_BYTES, a_lane, b_lane,
                                 (kk + 1) & 3);
        if (kk < 3 && fill)
            k21_copy<A_T, B_T>(p, la, lb, dst, kk * Q / 4, (kk + 1) * Q / 4, FULL);
#pragma unroll
        for (int i = 0; i < K21_MT; i++)
#pragma unroll
            for (int j = 0; j < K21_NT; j++)
                tk_mma_m16n8k16_bf16(acc[i][j], af[kk & 1][i], bf[kk & 1][j], acc[i][j]);
    }
    if (fill) {
        k21_loader_next<A_T>(la, p->lda);
        k21_loader_next<!B_T>(lb, p->ldb);
    }
    *wr = *wr + 1 == stages ? 0 : *wr + 1;
}

template <int A_T, int B_T>
static __global__ void __launch_bounds__(K21_THREADS, K21_MIN_BLOCKS) k21_kernel(tk_args p, int stages, int group_m)
{
    const int WARPS_N = K21_BN / K21_WN;
    static_assert(K21_BM % K21_WM == 0 && K21_BN % K21_WN == 0, "warp tiles must tile the block");

    extern __shared__ __align__(1024) uint8_t k21_smem[];
    const uint32_t smem0 = tk_smem_u32(k21_smem);

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int M = (int)p.m, N = (int)p.n, K = (int)p.k;
    int tm, tn;
    tk_raster_supertile((int)blockIdx.x, (M + K21_BM - 1) / K21_BM, (N + K21_BN - 1) / K21_BN, group_m, &tm, &tn);
    const int m0 = tm * K21_BM, n0 = tn * K21_BN;
    const int wm0 = (warp / WARPS_N) * K21_WM, wn0 = (warp % WARPS_N) * K21_WN;
    const int ktiles = (K + K21_BK - 1) / K21_BK;

    k21_loader la = A_T ? k21_loader_init<K21_AR(A_T), K21_AC(A_T)>(p.a, p.lda, 0, m0, K, M)
                        : k21_loader_init<K21_AR(A_T), K21_AC(A_T)>(p.a, p.lda, m0, 0, M, K);
    k21_loader lb = B_T ? k21_loader_init<K21_BR(B_T), K21_BC(B_T)>(p.b, p.ldb, n0, 0, N, K)
                        : k21_loader_init<K21_BR(B_T), K21_BC(B_T)>(p.b, p.ldb, 0, n0, K, N);

    /* A block whose C tile lies inside C reads A and B tiles that lie inside
     * A and B, except in the last, partial K tile. */
    const int interior = m0 + K21_BM <= M && n0 + K21_BN <= N;

    /* Prologue: stages 0 .. stages-2 in flight, one commit group each. */
    for (int s = 0; s < stages - 1; s++) {
        if (s < ktiles) {
            k21_copy<A_T, B_T>(&p, &la, &lb, smem0 + s * K21_STAGE_BYTES, 0,
                               K21_A_PASSES + K21_B_PASSES, interior && K - s * K21_BK >= K21_BK);
            k21_loader_next<A_T>(&la, p.lda);
            k21_loader_next<!B_T>(&lb, p.ldb);
        }
        tk_cp_async_commit();
    }

    float acc[K21_MT][K21_NT][4];
#pragma unroll
    for (int i = 0; i < K21_MT; i++)
#pragma unroll
        for (int j = 0; j < K21_NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0f;

    const uint32_t a_lane = k21_a_lane_off<A_T>(lane, wm0);
    const uint32_t b_lane = k21_b_lane_off<B_T>(lane, wn0);
    uint32_t af[2][K21_MT][4], bf[2][K21_NT][2];

    k21_wait_pending(stages - 2);
    __syncthreads();
    int rd = 0, wr = stages - 1;   /* stage read this K tile, stage being filled */
    k21_load_frags<A_T, B_T>(af[0], bf[0], smem0, smem0 + K21_A_BYTES, a_lane, b_lane, 0);

    int kt = 0;
    if (interior) {
        /* K tiles whose copies (of K tile kt + stages - 1) are complete tiles */
        const int kfast = K / K21_BK - (stages - 1);
        for (; kt < kfast; kt++)
            k21_ktile<A_T, B_T, 1>(&p, &la, &lb, acc, af, bf, smem0, a_lane, b_lane, stages, 1, &rd, &wr);
    }
    for (; kt < ktiles; kt++)
        k21_ktile<A_T, B_T, 0>(&p, &la, &lb, acc, af, bf, smem0, a_lane, b_lane, stages, kt + stages - 1 < ktiles,
                               &rd, &wr);
    tk_cp_async_wait_all();

    /* Epilogue: acc[i][j] holds rows g, g + 8 and columns 2t, 2t + 1 of the
     * 16 x 8 tile (i, j) of the warp (mma_sync.cuh). */
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < K21_MT; i++)
#pragma unroll
        for (int j = 0; j < K21_NT; j++) {
            const int row = m0 + wm0 + i * 16 + g, col = n0 + wn0 + j * 8 + 2 * t;
            k21_store_pair(&p, row, col, acc[i][j][0], acc[i][j][1]);
            k21_store_pair(&p, row + 8, col, acc[i][j][2], acc[i][j][3]);
        }
}

/* ---- host side ---- */

typedef void (*k21_fn)(tk_args, int, int);

static k21_fn k21_pick(tk_op op_a, tk_op op_b)
{
    if (op_a == TK_OP_N)
        return op_b == TK_OP_N ? k21_kernel<0, 0> : k21_kernel<0, 1>;
    return op_b == TK_OP_N ? k21_kernel<1, 0> : k21_kernel<1, 1>;
}

/* As many stages as fit K21_MIN_BLOCKS blocks per SM in the device's shared
 * memory (1 KB per block is reserved by the runtime), at most K21_MAX_STAGES;
 * fewer than K21_MIN_STAGES means the kernel cannot run. */
static int k21_stages(const tk_device *dev)
{
    size_t per_block = (dev->smem_per_sm ? dev->smem_per_sm : dev->smem_per_block_optin) / K21_MIN_BLOCKS;
    per_block = per_block > 1024 ? per_block - 1024 : 0;
    if (per_block > dev->smem_per_block_optin)
        per_block = dev->smem_per_block_optin;
    int s = (int)(per_block / K21_STAGE_BYTES);
    return s > K21_MAX_STAGES ? K21_MAX_STAGES : s;
}

static tk_status k21_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    if (k21_stages(dev) < K21_MIN_STAGES) {
        snprintf(why, len, "needs %d bytes of shared memory per block (%d stages of %d); the device allows %zu",
                 K21_MIN_STAGES * K21_STAGE_BYTES, K21_MIN_STAGES, K21_STAGE_BYTES, dev->smem_per_block_optin);
        return TK_ERR_NOT_SUPPORTED;
    }
    /* Tile coordinates are 32-bit; global offsets are 64-bit. */
    const int64_t lim = INT_MAX - 256;
    if (a->m > lim || a->n > lim || a->k > lim) {
        snprintf(why, len, "M, N and K must each be at most %lld", (long long)lim);
        return TK_ERR_NOT_SUPPORTED;
    }
    const int64_t tiles = ((a->m + K21_BM - 1) / K21_BM) * ((a->n + K21_BN - 1) / K21_BN);
    if (tiles > INT_MAX) {
        snprintf(why, len, "%lld output tiles of %d x %d exceed the grid limit", (long long)tiles, K21_BM, K21_BN);
        return TK_ERR_NOT_SUPPORTED;
    }
    /* 16-byte cp.async of A and B rows; C stored in aligned pairs. */
    struct { const char *name; const void *p; int64_t ld; int elems; size_t bytes; } need[3] = {
        { "A", a->a, a->lda, 8, 16 },
        { "B", a->b, a->ldb, 8, 16 },
        { "C", a->c, a->ldc, 2, a->c_type == TK_F32 ? 8u : 4u },
    };
    for (int i = 0; i < 3; i++) {
        if (need[i].ld % need[i].elems) {
            snprintf(why, len, "leading dimension of %s (%lld) must be a multiple of %d elements", need[i].name,
                     (long long)need[i].ld, need[i].elems);
            return TK_ERR_NOT_SUPPORTED;
        }
        if ((uintptr_t)need[i].p % need[i].bytes) {
            snprintf(why, len, "%s pointer %p must be %zu-byte aligned", need[i].name, need[i].p, need[i].bytes);
            return TK_ERR_NOT_SUPPORTED;
        }
    }
    return TK_SUCCESS;
}

static void k21_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    r->func = (const void *)(a ? k21_pick(a->op_a, a->op_b) : k21_pick(TK_OP_N, TK_OP_N));
    r->threads = K21_THREADS;
    int s = k21_stages(dev);
    r->dyn_smem = (size_t)(s < K21_MIN_STAGES ? K21_MIN_STAGES : s) * K21_STAGE_BYTES;
}

static tk_status k21_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    const k21_fn fn = k21_pick(a->op_a, a->op_b);
    const int stages = k21_stages(dev);
    const int smem = stages * K21_STAGE_BYTES;
    cudaError_t e = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaFuncSetAttribute(%d bytes of shared memory): %s", smem, cudaGetErrorString(e));
        return TK_ERR_CUDA;
    }
    const int64_t tiles = ((a->m + K21_BM - 1) / K21_BM) * ((a->n + K21_BN - 1) / K21_BN);
    fn<<<(unsigned)tiles, K21_THREADS, smem, stream>>>(*a, stages, K21_GROUP_M);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "launch: %s", cudaGetErrorString(e));
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

extern "C" const tk_kernel K21_ENTRY = {
    K21_NAME, "k20 with bounds-free cp.async for tiles inside the matrices (sm_80+)",
    80, K21_BM, K21_BN, K21_WM, K21_WN, 21,
    k21_supports, k21_resources, k21_launch,
};
