/* k20_mma_sync - the portable fast kernel: mma.sync + ldmatrix + a
 * multi-stage cp.async pipeline, no warpgroups, TMA or wgmma (issue 4).
 *
 * What it changes against k01_naive (the only kernel before it), and why:
 *  - Tensor cores: mma.sync m16n8k16 bf16 -> fp32; each warp owns a 64x64
 *    tile of C (128 fp32 accumulators per thread), so every A fragment is
 *    used 8 times and every B fragment 4 times from registers.
 *  - Shared-memory staging with cp.async (16 bytes per copy, L1 bypassed):
 *    STAGES tiles of A and B in flight, so global latency overlaps the MMAs;
 *    one __syncthreads per K tile of 64.
 *  - The 128-byte XOR swizzle (src/tiles/swizzle.cuh): every operand tile is
 *    made of panels of 128-byte rows, so the cp.async writes and the
 *    ldmatrix reads are both free of bank conflicts without padding.
 *  - ldmatrix.x4 fragments; the .trans form serves the operands stored with
 *    M or N contiguous (op_a T, op_b N), so all four op combinations share
 *    one smem layout rule.
 *  - Register double-buffering: the fragments of k16 slice s+1 are loaded
 *    while the MMAs of slice s run; the global copies of the next stage are
 *    spread over the four slices instead of issued in one burst.
 *  - L2 super-tile order (src/tiles/raster.cuh): GROUP_M tile rows per group.
 *  - Stage count chosen at launch from the device's shared memory (4 on
 *    H100, 3 on A100, 2 on sm_86/89), so the same kernel runs everywhere.
 *  - Edges: zero-fill cp.async (src_bytes < 16) on the M/N/K borders, bounded
 *    stores; fp32 stores are float2, bf16 stores are bf16 pairs.
 *
 * Tile configuration: BM = 128, BN = 256, BK = 64, 8 warps as 2 x 4 with
 * WM = WN = 64, 256 threads, 48 KB per stage (4 stages = 192 KB on H100),
 * GROUP_M = 16, __launch_bounds__(256, 1): 233-254 registers, no spills.
 *
 * Measured (H100 SXM, 8192^3 bf16 -> fp32, NN, helper H4's harness: median of
 * 20 with L2 flushed; the clock falls to 1575-1680 MHz under this load, so
 * two runs differ by up to 10%; figures in TFLOP/s, cuBLAS in the same run):
 *   run A: cuBLAS 788.1; GROUP_M 8: 413.3; 3 stages: 405.9; 256x128 tiles:
 *          412.5; GROUP_M 16: 439.5; GROUP_M 4: 416.3.
 *   run B: cuBLAS 774.2; GROUP_M 8: 375.9; GROUP_M 16: 424.0; GROUP_M 32:
 *          412.6; 256x128 GROUP_M 16: 393.9; 128x128 tiles with 4 warps and
 *          2 blocks/SM (3 stages): 389.0 (GROUP_M 8), 380.0 (GROUP_M 16).
 *   Hence GROUP_M = 16, 128x256, 4 stages. Bank conflicts (ncu, 2048^3):
 *   341 on shared loads out of 4.2M wavefronts, 0 on stores. At 8192^3 the
 *   tensor pipe is active 72% of the cycles (ncu, GROUP_M 8), where 100% is the
 *   mma.sync peak this H100 reached in a register-only loop: 645 TFLOP/s
 *   at 1826 MHz, 2678 flop/clk/SM (65% of the wgmma rate).
 *   run C (with k21, tilekit bench): 8192^3 cuBLAS 781.5, k20 416.7 (0.533x);
 *          4096^3 754.5 vs 427.9; 2048^3 582.9 vs 344.8; 8000^3 761.8 vs 392.0.
 * Figure: 0.55x cuBLAS at 8192^3 (run B), 0.53x (run C); the issue's 0.75x
 * is not reached. k21_mma_fastload removes most of the loader arithmetic.
 * Reproduce: build/tilekit bench --kernel k20_mma_sync
 *
 * Templates: the kernel is specialised on the two operand layouts (which
 * decide ldmatrix vs ldmatrix.trans and the loader's direction at compile
 * time); C cannot express that without duplicating the kernel four times.
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

/* Configuration. The K20_* macros may be overridden with -D by tuning builds
 * (which also rename the registry entry with K20_ENTRY/K20_NAME). */
#ifndef K20_BM
#define K20_BM 128
#endif
#ifndef K20_BN
#define K20_BN 256
#endif
#ifndef K20_MAX_STAGES
#define K20_MAX_STAGES 4
#endif
#ifndef K20_GROUP_M
#define K20_GROUP_M 16
#endif
#ifndef K20_ENTRY
#define K20_ENTRY tk_kernel_k20_mma_sync
#define K20_NAME "k20_mma_sync"
#endif

#if K20_MAX_STAGES > 4
#error "k20_wait_pending handles at most 4 stages"
#endif

#define K20_BK 64          /* one 128-byte swizzle row of bf16 */
#define K20_WM 64
#define K20_WN 64
#ifndef K20_MIN_BLOCKS
#define K20_MIN_BLOCKS 1   /* blocks per SM the registers and shared memory are sized for */
#endif
#define K20_THREADS (K20_BM / K20_WM * K20_BN / K20_WN * 32)
#define K20_MIN_STAGES 2

/* Bytes of one stage: the A tile (BM x 64) then the B tile (64 x BN). */
#define K20_STAGE_BYTES ((K20_BM + K20_BN) * K20_BK * 2)

/* ---- global -> shared loader of one operand tile ----
 * The tile is R rows x C columns of a row-major global matrix (C a multiple
 * of 64), stored in smem as C/64 panels of R swizzled 128-byte rows. Each
 * thread copies PASSES chunks of 16 bytes: column chunk cc, rows r, r + RPP,
 * r + 2 RPP, ... (RPP = rows per pass of 256 threads; a multiple of 8, so
 * every one of a thread's chunks has the same swizzle). K runs along the
 * columns (A op N, B op T) or along the rows (A op T, B op N). */
typedef struct k20_loader {
    const uint8_t *g;   /* this thread's first chunk at the current K tile */
    uint32_t smem;      /* its byte offset inside the operand tile */
    int rows_left;      /* valid rows from this thread's first row on */
    int cols_left;      /* valid columns from this thread's first column on */
} k20_loader;

template <int R, int C>
static __device__ __forceinline__ k20_loader k20_loader_init(const void *base, int64_t ld, int row0, int col0,
                                                             int rows, int cols)
{
    const int cpr = C / 8;   /* chunks per row */
    const int cc = threadIdx.x % cpr, r = threadIdx.x / cpr;
    k20_loader l;
    l.g = (const uint8_t *)base + ((int64_t)(row0 + r) * ld + col0 + cc * 8) * 2;
    l.smem = (cc / 8) * R * TK_SWZ_ROW_BYTES + tk_swz128_chunk(r, cc % 8);
    l.rows_left = rows - (row0 + r);
    l.cols_left = cols - (col0 + cc * 8);
    return l;
}

/* Issues this thread's chunks first..last-1 (of PASSES) of the tile into
 * smem at dst. first/last become constants once the caller's k16 loop is
 * unrolled, so the range test costs nothing. */
template <int R, int C>
static __device__ __forceinline__ void k20_loader_copy(const k20_loader *l, const void *base, int64_t ld,
                                                       uint32_t dst, int first, int last)
{
    const int rpp = K20_THREADS / (C / 8);
    static_assert(rpp % 8 == 0 && R % rpp == 0, "each thread's chunks must share one swizzle phase");
    const int passes = R / rpp;
    const int col_bytes = l->cols_left >= 8 ? 16 : (l->cols_left > 0 ? l->cols_left * 2 : 0);
    const int64_t step = (int64_t)rpp * ld * 2;   /* bytes between a thread's chunks */
    const uint8_t *g = l->g + (first > 0 ? first : 0) * step;
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
static __device__ __forceinline__ void k20_loader_next(k20_loader *l, int64_t ld)
{
    if (K_IS_ROWS) {
        l->g += (int64_t)K20_BK * ld * 2;
        l->rows_left -= K20_BK;
    } else {
        l->g += K20_BK * 2;
        l->cols_left -= K20_BK;
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
static __device__ __forceinline__ uint32_t k20_frag_off(uint32_t lane_off, int t, int kk)
{
    /* The row step never touches the chunk bits (4..6), so it is added after
     * the XOR and becomes the ldmatrix immediate offset. */
    if (K_CONTIG)
        return (lane_off ^ (uint32_t)(kk << 5)) + t * 16 * TK_SWZ_ROW_BYTES;
    return (lane_off ^ (uint32_t)(t << 5)) + kk * 16 * TK_SWZ_ROW_BYTES;
}

/* Lane offsets (see k20_frag_off). A: lane l of sub-tile t must point at
 * matrix q = l / 8, row l % 8; for a0..a3 the matrices are (m 0-7, k 0-7),
 * (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15). B: b[2t][0..1],
 * b[2t+1][0..1] are (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
 * (n 8-15, k 8-15). */
template <int A_T>
static __device__ __forceinline__ uint32_t k20_a_lane_off(int lane, int wm0)
{
    const int q = lane >> 3, r = lane & 7;
    if (!A_T)   /* [BM rows m][64 k]: row = m within 16, chunk = k / 8 */
        return tk_swz128_chunk(wm0 + (q & 1) * 8 + r, q >> 1);
    /* panels [BM/64][64 rows k][64 m]: row = k, chunk = m / 8 */
    return (wm0 / 64) * 64 * TK_SWZ_ROW_BYTES + tk_swz128_chunk((q >> 1) * 8 + r, q & 1);
}

template <int B_T>
static __device__ __forceinline__ uint32_t k20_b_lane_off(int lane, int wn0)
{
    const int q = lane >> 3, r = lane & 7;
    if (B_T)    /* [BN rows n][64 k] */
        return tk_swz128_chunk(wn0 + (q >> 1) * 8 + r, q & 1);
    /* panels [BN/64][64 rows k][64 n] */
    return (wn0 / 64) * 64 * TK_SWZ_ROW_BYTES + tk_swz128_chunk((q & 1) * 8 + r, q >> 1);
}

#define K20_MT (K20_WM / 16)   /* m16 tiles per warp */
#define K20_NT (K20_WN / 8)    /* n8 tiles per warp */

/* Loads the A and B fragments of k16 slice kk from one stage. */
template <int A_T, int B_T>
static __device__ __forceinline__ void k20_load_frags(uint32_t af[K20_MT][4], uint32_t bf[K20_NT][2], uint32_t sa,
                                                      uint32_t sb, uint32_t a_lane, uint32_t b_lane, int kk)
{
#pragma unroll
    for (int i = 0; i < K20_MT; i++) {
        if (A_T)
            tk_ldmatrix_x4_trans(af[i], sa + k20_frag_off<0>(a_lane, i, kk));
        else
            tk_ldmatrix_x4(af[i], sa + k20_frag_off<1>(a_lane, i, kk));
    }
#pragma unroll
    for (int j = 0; j < K20_NT / 2; j++) {
        uint32_t r[4];
        if (B_T)
            tk_ldmatrix_x4(r, sb + k20_frag_off<1>(b_lane, j, kk));
        else
            tk_ldmatrix_x4_trans(r, sb + k20_frag_off<0>(b_lane, j, kk));
        bf[2 * j][0] = r[0];
        bf[2 * j][1] = r[1];
        bf[2 * j + 1][0] = r[2];
        bf[2 * j + 1][1] = r[3];
    }
}

/* Stores C[row][col], C[row][col+1] (two neighbours of one accumulator
 * fragment) with alpha/beta, bounded by N; C is read only when beta != 0.
 * col is even and ldc is even (supports()), so pairs are aligned. */
static __device__ __forceinline__ void k20_store_pair(const tk_args *p, int row, int col, float x0, float x1)
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

/* Waits until at most n (0..K20_MAX_STAGES-2, uniform) cp.async groups are
 * pending; wait_group takes an immediate, hence the switch. */
static __device__ __forceinline__ void k20_wait_pending(int n)
{
    if (n >= 2)
        tk_cp_async_wait(2);
    else if (n == 1)
        tk_cp_async_wait(1);
    else
        tk_cp_async_wait(0);
}

template <int A_T, int B_T>
static __global__ void __launch_bounds__(K20_THREADS, K20_MIN_BLOCKS) k20_kernel(tk_args p, int stages, int group_m)
{
    /* The A tile: A op N is [BM rows m][64 k]; A op T (stored K x M) is
     * [64 rows k][BM m]. The B tile: B op T (stored N x K) is [BN rows n][64 k];
     * B op N (stored K x N) is [64 rows k][BN n]. */
    const int AR = A_T ? K20_BK : K20_BM, AC = A_T ? K20_BM : K20_BK;
    const int BR = B_T ? K20_BN : K20_BK, BC = B_T ? K20_BK : K20_BN;
    const int A_PASSES = AR * AC / 8 / K20_THREADS, B_PASSES = BR * BC / 8 / K20_THREADS;
    const int A_BYTES = K20_BM * K20_BK * 2;
    const int WARPS_N = K20_BN / K20_WN;
    static_assert(K20_BM % K20_WM == 0 && K20_BN % K20_WN == 0, "warp tiles must tile the block");
    static_assert((A_PASSES + B_PASSES) % 4 == 0, "the copies of a stage are spread over the 4 k16 slices");

    extern __shared__ __align__(1024) uint8_t k20_smem[];
    const uint32_t smem0 = tk_smem_u32(k20_smem);

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int M = (int)p.m, N = (int)p.n, K = (int)p.k;
    int tm, tn;
    tk_raster_supertile((int)blockIdx.x, (M + K20_BM - 1) / K20_BM, (N + K20_BN - 1) / K20_BN, group_m, &tm, &tn);
    const int m0 = tm * K20_BM, n0 = tn * K20_BN;
    const int wm0 = (warp / WARPS_N) * K20_WM, wn0 = (warp % WARPS_N) * K20_WN;
    const int ktiles = (K + K20_BK - 1) / K20_BK;

    k20_loader la = A_T ? k20_loader_init<AR, AC>(p.a, p.lda, 0, m0, K, M)
                        : k20_loader_init<AR, AC>(p.a, p.lda, m0, 0, M, K);
    k20_loader lb = B_T ? k20_loader_init<BR, BC>(p.b, p.ldb, n0, 0, N, K)
                        : k20_loader_init<BR, BC>(p.b, p.ldb, 0, n0, K, N);

    /* Copies q in [FIRST, LAST) of the stage's A_PASSES + B_PASSES chunks
     * (A's first) into the stage at DST. */
#define K20_COPY(FIRST, LAST, DST)                                                                   \
    do {                                                                                             \
        k20_loader_copy<AR, AC>(&la, p.a, p.lda, (DST), (FIRST), (LAST));                            \
        k20_loader_copy<BR, BC>(&lb, p.b, p.ldb, (DST) + A_BYTES, (FIRST) - A_PASSES, (LAST) - A_PASSES); \
    } while (0)

    /* Prologue: stages 0 .. stages-2 in flight, one commit group each. */
    for (int s = 0; s < stages - 1; s++) {
        if (s < ktiles) {
            K20_COPY(0, A_PASSES + B_PASSES, smem0 + s * K20_STAGE_BYTES);
            k20_loader_next<A_T>(&la, p.lda);
            k20_loader_next<!B_T>(&lb, p.ldb);
        }
        tk_cp_async_commit();
    }

    float acc[K20_MT][K20_NT][4];
#pragma unroll
    for (int i = 0; i < K20_MT; i++)
#pragma unroll
        for (int j = 0; j < K20_NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0f;

    const uint32_t a_lane = k20_a_lane_off<A_T>(lane, wm0);
    const uint32_t b_lane = k20_b_lane_off<B_T>(lane, wn0);
    uint32_t af[2][K20_MT][4], bf[2][K20_NT][2];

    k20_wait_pending(stages - 2);
    __syncthreads();
    int rd = 0, wr = stages - 1;   /* stage read this K tile, stage being filled */
    k20_load_frags<A_T, B_T>(af[0], bf[0], smem0, smem0 + A_BYTES, a_lane, b_lane, 0);

    const int Q = A_PASSES + B_PASSES;
    for (int kt = 0; kt < ktiles; kt++) {
        const int fill = kt + stages - 1 < ktiles;
        const uint32_t dst = smem0 + wr * K20_STAGE_BYTES;
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            if (kk == 3) {
                /* Last slice: close this K tile's copies, then make the next
                 * stage visible to all warps. The barrier also guarantees every
                 * warp has finished reading the stage that the next K tile's
                 * copies overwrite (its last fragments were read at kk == 2). */
                if (fill)
                    K20_COPY(3 * Q / 4, Q, dst);
                tk_cp_async_commit();
                k20_wait_pending(stages - 2);
                __syncthreads();
                rd = rd + 1 == stages ? 0 : rd + 1;
            }
            const uint32_t sa = smem0 + rd * K20_STAGE_BYTES;
            k20_load_frags<A_T, B_T>(af[(kk + 1) & 1], bf[(kk + 1) & 1], sa, sa + A_BYTES, a_lane, b_lane,
                                     (kk + 1) & 3);
            if (kk < 3 && fill)
                K20_COPY(kk * Q / 4, (kk + 1) * Q / 4, dst);
#pragma unroll
            for (int i = 0; i < K20_MT; i++)
#pragma unroll
                for (int j = 0; j < K20_NT; j++)
                    tk_mma_m16n8k16_bf16(acc[i][j], af[kk & 1][i], bf[kk & 1][j], acc[i][j]);
        }
        if (fill) {
            k20_loader_next<A_T>(&la, p.lda);
            k20_loader_next<!B_T>(&lb, p.ldb);
        }
        wr = wr + 1 == stages ? 0 : wr + 1;
    }
#undef K20_COPY
    tk_cp_async_wait_all();

    /* Epilogue: acc[i][j] holds rows g, g + 8 and columns 2t, 2t + 1 of the
     * 16 x 8 tile (i, j) of the warp (mma_sync.cuh). */
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int i = 0; i < K20_MT; i++)
#pragma unroll
        for (int j = 0; j < K20_NT; j++) {
            const int row = m0 + wm0 + i * 16 + g, col = n0 + wn0 + j * 8 + 2 * t;
            k20_store_pair(&p, row, col, acc[i][j][0], acc[i][j][1]);
            k20_store_pair(&p, row + 8, col, acc[i][j][2], acc[i][j][3]);
        }
}

/* ---- host side ---- */

typedef void (*k20_fn)(tk_args, int, int);

static k20_fn k20_pick(tk_op op_a, tk_op op_b)
{
    if (op_a == TK_OP_N)
        return op_b == TK_OP_N ? k20_kernel<0, 0> : k20_kernel<0, 1>;
    return op_b == TK_OP_N ? k20_kernel<1, 0> : k20_kernel<1, 1>;
}

/* As many stages as fit K20_MIN_BLOCKS blocks per SM in the device's shared
 * memory (1 KB per block is reserved by the runtime), at most K20_MAX_STAGES;
 * fewer than K20_MIN_STAGES means the kernel cannot run. */
static int k20_stages(const tk_device *dev)
{
    size_t per_block = (dev->smem_per_sm ? dev->smem_per_sm : dev->smem_per_block_optin) / K20_MIN_BLOCKS;
    per_block = per_block > 1024 ? per_block - 1024 : 0;
    if (per_block > dev->smem_per_block_optin)
        per_block = dev->smem_per_block_optin;
    int s = (int)(per_block / K20_STAGE_BYTES);
    return s > K20_MAX_STAGES ? K20_MAX_STAGES : s;
}

static tk_status k20_supports(const tk_args *a, const tk_device *dev, char *why, size_t len)
{
    if (k20_stages(dev) < K20_MIN_STAGES) {
        snprintf(why, len, "needs %d bytes of shared memory per block (%d stages of %d); the device allows %zu",
                 K20_MIN_STAGES * K20_STAGE_BYTES, K20_MIN_STAGES, K20_STAGE_BYTES, dev->smem_per_block_optin);
        return TK_ERR_NOT_SUPPORTED;
    }
    /* Tile coordinates are 32-bit; global offsets are 64-bit. */
    const int64_t lim = INT_MAX - 256;
    if (a->m > lim || a->n > lim || a->k > lim) {
        snprintf(why, len, "M, N and K must each be at most %lld", (long long)lim);
        return TK_ERR_NOT_SUPPORTED;
    }
    const int64_t tiles = ((a->m + K20_BM - 1) / K20_BM) * ((a->n + K20_BN - 1) / K20_BN);
    if (tiles > INT_MAX) {
        snprintf(why, len, "%lld output tiles of %d x %d exceed the grid limit", (long long)tiles, K20_BM, K20_BN);
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

static void k20_resources(const tk_args *a, const tk_device *dev, tk_resources *r)
{
    r->func = (const void *)(a ? k20_pick(a->op_a, a->op_b) : k20_pick(TK_OP_N, TK_OP_N));
    r->threads = K20_THREADS;
    int s = k20_stages(dev);
    r->dyn_smem = (size_t)(s < K20_MIN_STAGES ? K20_MIN_STAGES : s) * K20_STAGE_BYTES;
}

static tk_status k20_launch(const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    const k20_fn fn = k20_pick(a->op_a, a->op_b);
    const int stages = k20_stages(dev);
    const int smem = stages * K20_STAGE_BYTES;
    cudaError_t e = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaFuncSetAttribute(%d bytes of shared memory): %s", smem, cudaGetErrorString(e));
        return TK_ERR_CUDA;
    }
    const int64_t tiles = ((a->m + K20_BM - 1) / K20_BM) * ((a->n + K20_BN - 1) / K20_BN);
    fn<<<(unsigned)tiles, K20_THREADS, smem, stream>>>(*a, stages, K20_GROUP_M);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "launch: %s", cudaGetErrorString(e));
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

extern "C" const tk_kernel K20_ENTRY = {
    K20_NAME, "mma.sync + ldmatrix + cp.async pipeline, swizzled smem, 128x256 tiles, super-tile order (sm_80+)",
    80, K20_BM, K20_BN, K20_WM, K20_WN, 20,
    k20_supports, k20_resources, k20_launch,
};
