/* k20_core.cuh - what k20_mma_sync and k21_mma_fastload share: the tile
 * configuration, the shared-memory stage layout, the cp.async loader of an
 * operand tile, the swizzled ldmatrix fragment loads, the K-tile step (the
 * copies of a later stage spread over the MMAs of four k16 slices), the
 * epilogue and the fused epilogues, and the host side (stage count,
 * supports(), resources(), launch, workspace).
 *
 * The kernel files keep what differs: their header (design, figure, command),
 * their product of one tile (k21 runs the K tiles of interior blocks with FULL =
 * 1, the bounds-free copies), around which K20_KERNELS writes their __global__
 * entries, and their registry entry. Read k20_mma_sync.cu for
 * the design, k21_mma_fastload.cu for the fast load path; the measured
 * history of both is docs/kernels/k20.md.
 *
 * Fused epilogues (issue 39; tk_epi_args): the EPI instances
 * (K20_KERNELS, EPI = K20_EPI_PLAIN or K20_EPI_GATED) run the same
 * product, then every kind of tilekit.h (bias per row or column, fp32 or
 * bf16; aux stored or read; D apart from C with beta * C; K == 0; bias_grad)
 * through the accumulators staged in shared memory (k20_epi_store), so
 * that sm_80 GPUs get a fused epilogue instead of k01_naive. GATED's B
 * tiles interleave gate and up columns (k20_loader_gated) so a thread holds
 * both halves of its output. bias_grad is deterministic: per-tile column
 * sums in a fixed order, added over tile rows in order (k20_bias_grad_sum;
 * without a workspace, a launch a tile row). EPI = 0 leaves the plain
 * product's machine code as it was (bench/sass_compare.py).
 *
 * Templates: the device functions are specialised on the two operand layouts
 * (A_T, B_T: ldmatrix vs ldmatrix.trans and the loader's direction), the
 * K-tile step on FULL (whether its copies need bounds checks) and the
 * epilogue on EPI, the kind and the activation (each arm's code alone), all
 * known at compile time; C cannot express that without writing each body out
 * per case.
 */
#ifndef TK_KERNELS_K20_CORE_CUH
#define TK_KERNELS_K20_CORE_CUH

#include <stdio.h>
#include <limits.h>
#include "../lib/kernel.h"
#include "../ptx/cp_async.cuh"
#include "../ptx/ldmatrix.cuh"
#include "../ptx/mma_sync.cuh"
#include "../tiles/epi_formula.cuh"
#include "../tiles/epilogue.cuh"
#include "../tiles/raster.cuh"
#include "../tiles/swizzle.cuh"

/* Configuration. The K20_* macros may be overridden with -D by tuning builds
 * of either kernel. */
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
#define K20_MT (K20_WM / 16)   /* m16 tiles per warp */
#define K20_NT (K20_WN / 8)    /* n8 tiles per warp */

/* ---- the shared-memory stage ----
 * Bytes of one stage: the A tile (BM x 64) then the B tile (64 x BN). The
 * operand tiles: the A tile of A op N is [BM rows m][64 k], of A op T
 * (stored K x M) [64 rows k][BM m]; the B tile of B op T (stored N x K) is
 * [BN rows n][64 k], of B op N (stored K x N) [64 rows k][BN n]. */
#define K20_STAGE_BYTES ((K20_BM + K20_BN) * K20_BK * 2)
#define K20_A_BYTES (K20_BM * K20_BK * 2)
#define K20_AR(A_T) ((A_T) ? K20_BK : K20_BM)
#define K20_AC(A_T) ((A_T) ? K20_BM : K20_BK)
#define K20_BR(B_T) ((B_T) ? K20_BN : K20_BK)
#define K20_BC(B_T) ((B_T) ? K20_BK : K20_BN)
#define K20_A_PASSES (K20_BM * K20_BK / 8 / K20_THREADS)   /* chunks per thread, either layout */
#define K20_B_PASSES (K20_BN * K20_BK / 8 / K20_THREADS)

static_assert(K20_BM % K20_WM == 0 && K20_BN % K20_WN == 0, "warp tiles must tile the block");
static_assert((K20_A_PASSES + K20_B_PASSES) % 4 == 0, "the copies of a stage are spread over the 4 k16 slices");

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
    int64_t delta;      /* GATED's B op T: bytes from a gate row to the same up row (k20_loader_gated) */
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
 * unrolled, so the range test costs nothing.
 * full == 0 (k20, and k21's edge tiles): zero-fill copies predicated on the
 * rows and columns left. full (uniform over the block; k21 only): every chunk
 * of this tile lies inside the matrix, so the copies need no bounds
 * arithmetic -- the change that makes k21.
 * GATED (the B tile of op T in the GATED instances, k20_loader_gated): the
 * passes alternate between a gate row (even) and the same up row (odd,
 * delta bytes on), a pair of passes one step down both. */
template <int R, int C, int GATED = 0>
static __device__ __forceinline__ void k20_loader_copy(const k20_loader *l, const void *base, int64_t ld,
                                                       uint32_t dst, int first, int last, int full)
{
    const int rpp = K20_THREADS / (C / 8);
    static_assert(rpp % 8 == 0 && R % rpp == 0, "each thread's chunks must share one swizzle phase");
    const int passes = R / rpp;
    const int64_t step = (int64_t)rpp * ld * 2;   /* bytes between a thread's chunks */
    if (GATED) {
        const int col_bytes = l->cols_left >= 8 ? 16 : (l->cols_left > 0 ? l->cols_left * 2 : 0);
#pragma unroll
        for (int i = 0; i < passes; i++) {
            if (i < first || i >= last)
                continue;
            const uint8_t *g = l->g + (i >> 1) * step + (i & 1) * l->delta;
            const int bytes = full ? 16 : l->rows_left > (i >> 1) * rpp ? col_bytes : 0;
            tk_cp_async_16(dst + l->smem + i * rpp * TK_SWZ_ROW_BYTES, bytes ? (const void *)g : base,
                           (uint32_t)bytes);
        }
        return;
    }
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

/* GATED's B loader (the K20_EPI_GATED instances): the block's 256 B
 * columns are its BN / 2 output columns n0.. twice, gate and up
 * interleaved by 32 so that each warp's 64 columns are 32 gate columns
 * (its n8 tiles 0-3) and the same 32 of the up half (tiles 4-7): gate
 * column c and up column c land in one thread's accumulators, [j] and
 * [j + 4]. Tile column 64 w + q is the gate's (q < 32) or the up half's
 * (q >= 32) column n0 + 32 w + q % 32. b: op(B)'s gate half, b_up op(b_up)'s
 * up half (B's op and ldb), half = N / 2 columns each.
 * op T (rows n): pass i of a thread copies tile row r + 32 i, the gate's
 * (i even) or up half's (i odd) row n0 + 32 (i / 2) + r: k20_loader_copy's
 * GATED passes, delta bytes from b to b_up.
 * op N (columns n): a thread's chunk cc of a tile row is column 8 cc, the
 * gate's or up half's source column n0 + 32 (cc / 8) + 8 (cc % 4) for
 * every pass: k20_loader_init with that base and a col0 that puts the
 * chunk there (col0 + 8 cc = that column). */
template <int B_T>
static __device__ __forceinline__ k20_loader k20_loader_gated(const void *b, const void *b_up, int64_t ldb, int n0,
                                                              int half, int K)
{
    if (B_T) {
        k20_loader l = k20_loader_init<K20_BN, K20_BK>(b, ldb, n0, 0, half, K);
        l.delta = (const uint8_t *)b_up - (const uint8_t *)b;
        return l;
    }
    const int cc = threadIdx.x % (K20_BN / 8);
    const int src = n0 + 32 * (cc / 8) + 8 * (cc % 4);
    k20_loader l = k20_loader_init<K20_BK, K20_BN>(cc % 8 < 4 ? b : b_up, ldb, 0, src - 8 * cc, K, half);
    l.delta = 0;
    return l;
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

/* The MMAs of one k16 slice: the warp's 64 x 64 tile of C. */
static __device__ __forceinline__ void k20_mma_slice(float acc[K20_MT][K20_NT][4], uint32_t af[K20_MT][4],
                                                     uint32_t bf[K20_NT][2])
{
#pragma unroll
    for (int i = 0; i < K20_MT; i++)
#pragma unroll
        for (int j = 0; j < K20_NT; j++)
            tk_mma_m16n8k16_bf16(acc[i][j], af[i], bf[j], acc[i][j]);
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

/* ---- the block's work and its pipeline ---- */

typedef struct k20_block {
    int lane;       /* threadIdx.x % 32 */
    int m0, n0;     /* the block's tile of C */
    int wm0, wn0;   /* the warp's tile inside it */
    int ktiles;     /* K tiles of BK, the last one possibly partial */
} k20_block;

/* The stage ring of one thread: its loaders, where it reads its fragments,
 * and which stages are read and filled. */
typedef struct k20_pipe {
    k20_loader la, lb;
    uint32_t smem0;            /* shared address of stage 0 */
    uint32_t a_lane, b_lane;   /* k20_a_lane_off, k20_b_lane_off */
    int stages;                /* in the ring, chosen at launch */
    int rd, wr;                /* stage read this K tile, stage being filled */
} k20_pipe;

/* The fused-epilogue instances (tk_epi_args; issue 39), EPI of the
 * device steps below and of the kernels' k20_epi_kernel: 0 is the plain
 * product (k20_kernel), whose code the parameter leaves as it was. */
#define K20_EPI_PLAIN 1   /* TK_EPI_BIAS_ACT, _BACKWARD, _GATED_BACKWARD: the product's tiles as EPI 0's */
#define K20_EPI_GATED 2   /* TK_EPI_GATED: tiles of BN / 2 output columns, B interleaved (k20_loader_gated) */

/* Output tiles along N: GATED's are BN / 2 of its N / 2 output columns. */
#define K20_TILES_N(n, epi) ((epi) == K20_EPI_GATED ? ((n) / 2 + K20_BN / 2 - 1) / (K20_BN / 2) \
                                                   : ((n) + K20_BN - 1) / K20_BN)

/* Places the block and the warp, and sets up the loaders. The block's
 * tile: block blockIdx.x's in super-tile order (row < 0), or tile (row,
 * blockIdx.x) (the fused epilogues' bias_grad without a workspace: a
 * launch a tile row, k20_epi_grad). GATED (EPI): n0 is the tile's first
 * output column, in op(B)'s and op(b_up)'s N / 2 (k20_loader_gated). */
template <int A_T, int B_T, int EPI>
static __device__ __forceinline__ k20_block k20_block_at(const tk_args *p, const void *b_up, k20_pipe *s,
                                                         uint32_t smem0, int stages, int row, int group_m)
{
    const int WARPS_N = K20_BN / K20_WN;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int M = (int)p->m, N = (int)p->n, K = (int)p->k;
    int tm = row, tn = (int)blockIdx.x;
    if (row < 0)
        tk_raster_supertile((int)blockIdx.x, (M + K20_BM - 1) / K20_BM, K20_TILES_N(N, EPI), group_m, &tm, &tn);
    k20_block b;
    b.lane = lane;
    b.m0 = tm * K20_BM;
    b.n0 = tn * (EPI == K20_EPI_GATED ? K20_BN / 2 : K20_BN);
    b.wm0 = (warp / WARPS_N) * K20_WM;
    b.wn0 = (warp % WARPS_N) * K20_WN;
    b.ktiles = (K + K20_BK - 1) / K20_BK;

    s->la = A_T ? k20_loader_init<K20_AR(A_T), K20_AC(A_T)>(p->a, p->lda, 0, b.m0, K, M)
                : k20_loader_init<K20_AR(A_T), K20_AC(A_T)>(p->a, p->lda, b.m0, 0, M, K);
    if (EPI == K20_EPI_GATED)
        s->lb = k20_loader_gated<B_T>(p->b, b_up, p->ldb, b.n0, N / 2, K);
    else
        s->lb = B_T ? k20_loader_init<K20_BR(B_T), K20_BC(B_T)>(p->b, p->ldb, b.n0, 0, N, K)
                    : k20_loader_init<K20_BR(B_T), K20_BC(B_T)>(p->b, p->ldb, 0, b.n0, K, N);
    s->smem0 = smem0;
    s->stages = stages;
    return b;
}

/* The plain product's (k20_kernel): block blockIdx.x's tile. */
template <int A_T, int B_T>
static __device__ __forceinline__ k20_block k20_block_init(const tk_args *p, k20_pipe *s, uint32_t smem0, int stages,
                                                           int group_m)
{
    return k20_block_at<A_T, B_T, 0>(p, NULL, s, smem0, stages, -1, group_m);
}

/* Copies q in [first, last) of a stage's A_PASSES + B_PASSES chunks (A's first). */
template <int A_T, int B_T, int EPI = 0>
static __device__ __forceinline__ void k20_copy(const tk_args *p, const k20_pipe *s, uint32_t dst, int first,
                                                int last, int full)
{
    k20_loader_copy<K20_AR(A_T), K20_AC(A_T)>(&s->la, p->a, p->lda, dst, first, last, full);
    k20_loader_copy<K20_BR(B_T), K20_BC(B_T), EPI == K20_EPI_GATED && B_T>(
        &s->lb, p->b, p->ldb, dst + K20_A_BYTES, first - K20_A_PASSES, last - K20_A_PASSES, full);
}

template <int A_T, int B_T>
static __device__ __forceinline__ void k20_loaders_next(const tk_args *p, k20_pipe *s)
{
    k20_loader_next<A_T>(&s->la, p->lda);
    k20_loader_next<!B_T>(&s->lb, p->ldb);
}

/* Prologue: stages 0 .. stages-2 in flight, one commit group each.
 * interior (k21; k20 passes 0): the block's C tile lies inside C, so its
 * complete K tiles of A and B lie inside A and B and are copied bounds-free. */
template <int A_T, int B_T, int EPI = 0>
static __device__ __forceinline__ void k20_prologue(const tk_args *p, k20_pipe *s, int ktiles, int interior)
{
    const int K = (int)p->k;   /* read before the loop, so the && below compiles to a predicate */
    for (int st = 0; st < s->stages - 1; st++) {
        if (st < ktiles) {
            k20_copy<A_T, B_T, EPI>(p, s, s->smem0 + st * K20_STAGE_BYTES, 0, K20_A_PASSES + K20_B_PASSES,
                               interior && K - st * K20_BK >= K20_BK);
            k20_loaders_next<A_T, B_T>(p, s);
        }
        tk_cp_async_commit();
    }
}

/* After the prologue: zeroed accumulators, this lane's fragment offsets,
 * stage 0 visible to all warps and the fragments of its first k16 slice in
 * af[0], bf[0]. */
template <int A_T, int B_T>
static __device__ __forceinline__ void k20_mainloop_start(const k20_block *b, k20_pipe *s,
                                                          float acc[K20_MT][K20_NT][4], uint32_t af[2][K20_MT][4],
                                                          uint32_t bf[2][K20_NT][2])
{
#pragma unroll
    for (int i = 0; i < K20_MT; i++)
#pragma unroll
        for (int j = 0; j < K20_NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                acc[i][j][e] = 0.0f;
    s->a_lane = k20_a_lane_off<A_T>(b->lane, b->wm0);
    s->b_lane = k20_b_lane_off<B_T>(b->lane, b->wn0);
    k20_wait_pending(s->stages - 2);
    __syncthreads();
    s->rd = 0;
    s->wr = s->stages - 1;
    k20_load_frags<A_T, B_T>(af[0], bf[0], s->smem0, s->smem0 + K20_A_BYTES, s->a_lane, s->b_lane, 0);
}

/* One K tile: the MMAs of stage rd, with register double-buffering (the
 * fragments of k16 slice kk + 1 are loaded while the MMAs of slice kk run),
 * while the copies of K tile kt + stages - 1 (if fill) go to stage wr, spread
 * over the four slices instead of issued in one burst. FULL: that tile lies
 * wholly inside A and B (k21) -- a compile-time flag, so the main loop of
 * interior blocks is compiled without any bounds arithmetic (a runtime flag
 * was if-converted by the compiler into predicated copies of both paths). */
template <int A_T, int B_T, int FULL, int EPI = 0>
static __device__ __forceinline__ void k20_ktile(const tk_args *p, k20_pipe *s, float acc[K20_MT][K20_NT][4],
                                                 uint32_t af[2][K20_MT][4], uint32_t bf[2][K20_NT][2], int fill)
{
    const int Q = K20_A_PASSES + K20_B_PASSES;
    const uint32_t dst = s->smem0 + s->wr * K20_STAGE_BYTES;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        if (kk == 3) {
            /* Last slice: close this K tile's copies, then make the next stage
             * visible to all warps. The barrier also guarantees every warp has
             * finished reading the stage that the next K tile's copies
             * overwrite (its last fragments were read at kk == 2). */
            if (fill)
                k20_copy<A_T, B_T, EPI>(p, s, dst, 3 * Q / 4, Q, FULL);
            tk_cp_async_commit();
            k20_wait_pending(s->stages - 2);
            __syncthreads();
            s->rd = s->rd + 1 == s->stages ? 0 : s->rd + 1;
        }
        const uint32_t sa = s->smem0 + s->rd * K20_STAGE_BYTES;
        k20_load_frags<A_T, B_T>(af[(kk + 1) & 1], bf[(kk + 1) & 1], sa, sa + K20_A_BYTES, s->a_lane, s->b_lane,
                                 (kk + 1) & 3);
        if (kk < 3 && fill)
            k20_copy<A_T, B_T, EPI>(p, s, dst, kk * Q / 4, (kk + 1) * Q / 4, FULL);
        k20_mma_slice(acc, af[kk & 1], bf[kk & 1]);
    }
    if (fill)
        k20_loaders_next<A_T, B_T>(p, s);
    s->wr = s->wr + 1 == s->stages ? 0 : s->wr + 1;
}

/* ---- epilogue ---- */

/* C[row][col] and C[row][col + 1], two neighbours of one accumulator
 * fragment, bounded by M and N; alpha/beta with C read only when beta != 0
 * (epilogue.cuh). col is even, ldc even and C aligned (supports()), so a pair
 * is one aligned vector store; the last column of an odd N is stored alone. */
static __device__ __forceinline__ void k20_store_pair(const tk_args *p, int row, int col, float x0, float x1)
{
    if (row >= p->m || col >= p->n)
        return;
    const int64_t idx = (int64_t)row * p->ldc + col;
    if (col + 1 < p->n)
        tk_epilogue_store2(p->c, idx, p->c_type, x0, x1, p->alpha, p->beta);
    else
        tk_epilogue_store(p->c, idx, p->c_type, x0, p->alpha, p->beta);
}

/* Stores the warp's tile of C: acc[i][j] holds rows g, g + 8 and columns
 * 2t, 2t + 1 of the 16 x 8 tile (i, j) of the warp (mma_sync.cuh). */
static __device__ __forceinline__ void k20_epilogue(const tk_args *p, const k20_block *b,
                                                    float acc[K20_MT][K20_NT][4])
{
    const int g = b->lane >> 2, t = b->lane & 3;
#pragma unroll
    for (int i = 0; i < K20_MT; i++)
#pragma unroll
        for (int j = 0; j < K20_NT; j++) {
            const int row = b->m0 + b->wm0 + i * 16 + g, col = b->n0 + b->wn0 + j * 8 + 2 * t;
            k20_store_pair(p, row, col, acc[i][j][0], acc[i][j][1]);
            k20_store_pair(p, row + 8, col, acc[i][j][2], acc[i][j][3]);
        }
}

/* ---- fused epilogues (the EPI instances; tk_epi_args) ----
 * After the product, in place of k20_epilogue: the formula of the call's
 * kind (tilekit.h; per element epi_formula.cuh's, which k01_naive, k30
 * and k40 apply too) on the accumulators, z stored to or read from aux,
 * beta * C read from C (ldc) where beta != 0, and D written (e->d,
 * e->ldd: c_type, out_cols columns), each access bounded by M and the
 * kind's columns. */

/* The staged tile: the block's accumulators pass through shared memory
 * (free once the product is done) one warp row (64 rows) at a time, rows
 * K20_EPI_LD floats apart: the 8 floats of padding put the 8 rows of a
 * fragment store in distinct banks. So each thread then walks rows of one
 * column pair, a warp 64 adjacent columns of a row (coalesced D, aux and C
 * accesses), in a loop that is not unrolled: an arm of the formula (17 of
 * them, k20_epi_store) is the code of one pair. Holding the tile in
 * registers instead (the formula unrolled over the thread's 128
 * accumulators) spilled up to 1.1 KB a thread and took ptxas minutes. */
#define K20_EPI_ROWS K20_WM
#define K20_EPI_LD (K20_BN + 8)
static_assert(K20_EPI_ROWS * K20_EPI_LD * 4 <= K20_MIN_STAGES * K20_STAGE_BYTES, "a staged half fits the stages");

/* Where one thread's elements lie in the tile, as k20_epi_store sets them:
 * a column pair of the output and rows r0, r0 + step, ... of each pass. */
typedef struct k20_epi_at {
    int r0, step, count;   /* the thread's rows in a pass of K20_EPI_ROWS */
    int col;               /* its pair's first column in D's formula (GATED: an output column) */
    int scol;              /* that pair in the staged tile (GATED: the gate's; the up half's 32 on) */
    int n;                 /* the columns of that space: N, or N / 2 for GATED */
    bool d_pairs, c_pairs, aux_pairs;   /* 2-element accesses allowed: ld even, base aligned to a pair */
} k20_epi_at;

/* Columns col and col + 1 of row `row` of a row-major matrix m (ld; bf16
 * or fp32), in0 and in1 saying which lie inside it: one 2-element access
 * where pairs allows it and both are inside, else each inside element
 * alone (outside: 0, never stored). */
static __device__ __forceinline__ float2 k20_get2(const void *m, int64_t ld, bool bf16, int row, int col, bool in0,
                                                  bool in1, bool pairs)
{
    const int64_t at = (int64_t)row * ld + col;
    if (pairs && in1)
        return bf16 ? __bfloat1622float2(*(const __nv_bfloat162 *)((const uint16_t *)m + at))
                    : *(const float2 *)((const float *)m + at);
    float2 v = make_float2(0.0f, 0.0f);
    if (in0)
        v.x = bf16 ? tk_bf16_to_f32(((const uint16_t *)m)[at]) : ((const float *)m)[at];
    if (in1)
        v.y = bf16 ? tk_bf16_to_f32(((const uint16_t *)m)[at + 1]) : ((const float *)m)[at + 1];
    return v;
}

static __device__ __forceinline__ void k20_put2(void *m, int64_t ld, bool bf16, int row, int col, bool in0, bool in1,
                                                bool pairs, float2 v)
{
    const int64_t at = (int64_t)row * ld + col;
    if (pairs && in1) {
        if (bf16)
            *(__nv_bfloat162 *)((uint16_t *)m + at) = __floats2bfloat162_rn(v.x, v.y);
        else
            *(float2 *)((float *)m + at) = v;
        return;
    }
    if (bf16) {
        if (in0)
            ((uint16_t *)m)[at] = tk_f32_to_bf16(v.x);
        if (in1)
            ((uint16_t *)m)[at + 1] = tk_f32_to_bf16(v.y);
    } else {
        if (in0)
            ((float *)m)[at] = v.x;
        if (in1)
            ((float *)m)[at + 1] = v.y;
    }
}

/* The bias of z in row `row` (< M) at columns col and col + 1 of the
 * n-column space, off + col in the vector for a column bias (GATED's up
 * half: off = N / 2); columns past n read column n - 1's (never stored). */
static __device__ __forceinline__ float2 k20_bias2(const tk_epi_args *e, int row, int col, int n, int off)
{
    if (!e->bias)
        return make_float2(0.0f, 0.0f);
    if (e->bias_rows) {
        const float b = tk_epi_bias_at(e->bias, e->bias_bf16, row);
        return make_float2(b, b);
    }
    return make_float2(tk_epi_bias_at(e->bias, e->bias_bf16, off + min(col, n - 1)),
                       tk_epi_bias_at(e->bias, e->bias_bf16, off + min(col + 1, n - 1)));
}

/* P = alpha * acc of a staged pair, rounded as written: epi_formula.cuh's
 * formulas take P. */
static __device__ __forceinline__ float2 k20_p2(float alpha, float2 v)
{
    return make_float2(__fmul_rn(alpha, v.x), __fmul_rn(alpha, v.y));
}

/* v + beta * C (C read only where beta != 0, as tk_epilogue_store adds it). */
static __device__ __forceinline__ float2 k20_residual(const tk_args *p, const k20_epi_at *at, int row, int col,
                                                      bool in0, bool in1, float2 v)
{
    if (p->beta == 0.0f)
        return v;
    const float2 c = k20_get2(p->c, p->ldc, p->c_type == TK_BF16, row, col, in0, in1, at->c_pairs);
    return make_float2(fmaf(p->beta, c.x, v.x), fmaf(p->beta, c.y, v.y));
}

/* One pass (staged rows from row0 on in D's formula) of the thread's
 * column pair through kind KIND with activation ACT. The backward kinds
 * add their D values (fp32, before the rounding) to sum[u][.] (u:
 * GATED_BACKWARD's dz_up columns N..), in row order, for bias_grad. */
template <int KIND, int ACT>
static __device__ __forceinline__ void k20_epi_pass(const tk_args *p, const tk_epi_args *e, const k20_epi_at *at,
                                                    const float *st, int row0, float sum[2][2])
{
    const int n = at->n, cc = at->col;
    const bool bf16 = p->c_type == TK_BF16, in0 = cc < n, in1 = cc + 1 < n;
    const float alpha = p->alpha;
    const bool col_bias = e->bias && !e->bias_rows;
    const float2 zero = make_float2(0.0f, 0.0f);
    /* a column bias is the pair's for every row: read once */
    const float2 cb = col_bias ? k20_bias2(e, 0, cc, n, 0) : zero;
    const float2 cbu = KIND == TK_EPI_GATED && col_bias ? k20_bias2(e, 0, cc, n, n) : zero;
#pragma unroll 1
    for (int k = 0; k < at->count; k++) {
        const int sr = at->r0 + k * at->step, r = row0 + k * at->step;
        if (r >= p->m)
            break;
        const float2 v = *(const float2 *)(st + sr * K20_EPI_LD + at->scol);
        float2 out;
        if (KIND == TK_EPI_BIAS_ACT) {
            const float2 b = e->bias && e->bias_rows ? k20_bias2(e, r, cc, n, 0) : cb;
            const float2 P = k20_p2(alpha, v);
            const float2 z = make_float2(tk_epi_z(P.x, b.x), tk_epi_z(P.y, b.y));
            if (e->aux)
                k20_put2(e->aux, e->ldaux, true, r, cc, in0, in1, at->aux_pairs, z);
            out = make_float2(tk_act(ACT, z.x), tk_act(ACT, z.y));
        } else if (KIND == TK_EPI_GATED) {   /* the up half: 32 staged columns on (k20_loader_gated) */
            const float2 u = *(const float2 *)(st + sr * K20_EPI_LD + at->scol + 32);
            const float2 bg = e->bias && e->bias_rows ? k20_bias2(e, r, cc, n, 0) : cb;
            const float2 bu = e->bias && e->bias_rows ? bg : cbu;
            const float2 P = k20_p2(alpha, v), Pu = k20_p2(alpha, u);
            const float2 zg = make_float2(tk_epi_z(P.x, bg.x), tk_epi_z(P.y, bg.y));
            const float2 zu = make_float2(tk_epi_z(Pu.x, bu.x), tk_epi_z(Pu.y, bu.y));
            if (e->aux) {
                k20_put2(e->aux, e->ldaux, true, r, cc, in0, in1, at->aux_pairs, zg);
                k20_put2(e->aux, e->ldaux, true, r, n + cc, in0, in1, at->aux_pairs && n % 2 == 0, zu);
            }
            out = make_float2(tk_epi_glu(ACT, zg.x, zu.x), tk_epi_glu(ACT, zg.y, zu.y));
        } else if (KIND == TK_EPI_BACKWARD) {
            const float2 z = k20_get2(e->aux, e->ldaux, true, r, cc, in0, in1, at->aux_pairs);
            const float2 P = k20_p2(alpha, v);
            out = make_float2(tk_epi_dact(ACT, P.x, z.x), tk_epi_dact(ACT, P.y, z.y));
        } else {   /* GATED_BACKWARD: z_gate at aux's columns cc.., z_up at N + cc..; D's dz_up at N + cc.. */
            const bool upairs = n % 2 == 0;
            const float2 zg = k20_get2(e->aux, e->ldaux, true, r, cc, in0, in1, at->aux_pairs);
            const float2 zu = k20_get2(e->aux, e->ldaux, true, r, n + cc, in0, in1, at->aux_pairs && upairs);
            const float2 P = k20_p2(alpha, v);
            out = make_float2(tk_epi_dgate(ACT, P.x, zg.x, zu.x), tk_epi_dgate(ACT, P.y, zg.y, zu.y));
            const float2 du = make_float2(tk_epi_dup(ACT, P.x, zg.x), tk_epi_dup(ACT, P.y, zg.y));
            k20_put2(e->d, e->ldd, bf16, r, n + cc, in0, in1, at->d_pairs && upairs, du);
            sum[1][0] += du.x;
            sum[1][1] += du.y;
        }
        if (KIND != TK_EPI_GATED_BACKWARD)   /* whose beta is 0 (tilekit.h) */
            out = k20_residual(p, at, r, cc, in0, in1, out);
        k20_put2(e->d, e->ldd, bf16, r, cc, in0, in1, at->d_pairs, out);
        sum[0][0] += out.x;
        sum[0][1] += out.y;
    }
}

/* The activation as a constant (no arm for TK_ACT_NONE but BIAS_ACT's:
 * the API refuses it with the other kinds). */
template <int KIND>
static __device__ __forceinline__ void k20_epi_act(const tk_args *p, const tk_epi_args *e, const k20_epi_at *at,
                                                   const float *st, int row0, float sum[2][2])
{
    switch (e->act) {
    case TK_ACT_RELU:
        k20_epi_pass<KIND, TK_ACT_RELU>(p, e, at, st, row0, sum);
        break;
    case TK_ACT_GELU_ERF:
        k20_epi_pass<KIND, TK_ACT_GELU_ERF>(p, e, at, st, row0, sum);
        break;
    case TK_ACT_GELU_TANH:
        k20_epi_pass<KIND, TK_ACT_GELU_TANH>(p, e, at, st, row0, sum);
        break;
    case TK_ACT_SILU:
        k20_epi_pass<KIND, TK_ACT_SILU>(p, e, at, st, row0, sum);
        break;
    default:
        if (KIND == TK_EPI_BIAS_ACT)
            k20_epi_pass<KIND, TK_ACT_NONE>(p, e, at, st, row0, sum);
        break;
    }
}

/* Warp row wm0's accumulators into the staged tile (fragment layout of
 * k20_epilogue: acc[i][j] holds rows g, g + 8 of m16 tile i, columns 2t,
 * 2t + 1 of n8 tile j). */
static __device__ __forceinline__ void k20_epi_stage(float *st, const k20_block *b, float acc[K20_MT][K20_NT][4])
{
    const int g = b->lane >> 2, t = b->lane & 3;
#pragma unroll
    for (int i = 0; i < K20_MT; i++)
#pragma unroll
        for (int j = 0; j < K20_NT; j++) {
            float *q = st + (16 * i + g) * K20_EPI_LD + b->wn0 + 8 * j + 2 * t;
            *(float2 *)q = make_float2(acc[i][j][0], acc[i][j][1]);
            *(float2 *)(q + 8 * K20_EPI_LD) = make_float2(acc[i][j][2], acc[i][j][3]);
        }
}

/* bias_grad's share of the tile (the backward kinds): threads t and
 * t + K20_THREADS / 2 hold the same column pair (k20_epi_store: the even
 * and the odd rows); their sums are added in that order and stored to the
 * tile row's slot of the partial sums (part: out_cols floats a tile row,
 * k20_bias_grad_sum adds them in tile-row order), or without them
 * (a launch a tile row, k20_block_at) added to bias_grad in tile-row order here:
 * the same bits either way. red: the staged tile's memory. */
static __device__ __forceinline__ void k20_epi_grad(const tk_args *p, const tk_epi_args *e, const k20_block *b,
                                                    const k20_epi_at *at, float sum[2][2], float *red, float *part)
{
    const int half = K20_THREADS / 2, tid = (int)threadIdx.x;
    const int U = e->kind == TK_EPI_GATED_BACKWARD ? 2 : 1;
    __syncthreads();   /* the last pass's reads of the staged tile are done */
    if (tid >= half)
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int x = 0; x < 2; x++)
                red[(2 * u + x) * half + tid - half] = sum[u][x];
    __syncthreads();
    if (tid < half) {
        const int tm = b->m0 / K20_BM;
#pragma unroll
        for (int u = 0; u < 2; u++)
#pragma unroll
            for (int x = 0; x < 2; x++) {
                if (u >= U || at->col + x >= p->n)
                    continue;
                const float v = sum[u][x] + red[(2 * u + x) * half + tid];
                const int64_t dcol = (int64_t)u * p->n + at->col + x;
                if (part)
                    part[(int64_t)tm * e->out_cols + dcol] = v;
                else
                    e->bias_grad[dcol] = (tm == 0 ? 0.0f : e->bias_grad[dcol]) + v;
            }
    }
}

/* The fused epilogue of the block's tile, two passes of a warp row each:
 * staged, then the call's kind and activation as constants (one branch a
 * pass), then bias_grad's share. smem: the block's shared memory. */
template <int EPI>
static __device__ __forceinline__ void k20_epi_store(const tk_args *p, const tk_epi_args *e, const k20_block *b,
                                                     float acc[K20_MT][K20_NT][4], float *smem, float *part)
{
    /* GATED: the tile's BN / 2 output columns as 64 pairs a row, pair q at
     * staged column 64 (q / 16) + 2 (q % 16) (k20_loader_gated); the others:
     * BN / 2 pairs a row, pair q at column 2 q */
    const int pairs = EPI == K20_EPI_GATED ? K20_BN / 4 : K20_BN / 2, q = (int)threadIdx.x % pairs;
    k20_epi_at at;
    at.r0 = (int)threadIdx.x / pairs;
    at.step = K20_THREADS / pairs;
    at.count = K20_EPI_ROWS / at.step;
    at.col = b->n0 + 2 * q;
    at.scol = EPI == K20_EPI_GATED ? 64 * (q / 16) + 2 * (q % 16) : 2 * q;
    at.n = EPI == K20_EPI_GATED ? (int)(p->n / 2) : (int)p->n;
    const int esz = p->c_type == TK_BF16 ? 2 : 4;
    at.d_pairs = e->ldd % 2 == 0 && (uintptr_t)e->d % (2 * esz) == 0;
    at.c_pairs = p->ldc % 2 == 0 && (uintptr_t)p->c % (2 * esz) == 0;
    at.aux_pairs = e->ldaux % 2 == 0 && (uintptr_t)e->aux % 4 == 0;
    float sum[2][2] = { { 0.0f, 0.0f }, { 0.0f, 0.0f } };
#pragma unroll 1
    for (int pass = 0; pass < K20_BM / K20_EPI_ROWS; pass++) {
        /* the stages' (or the previous pass's) last reads are done */
        __syncthreads();
        if (b->wm0 == pass * K20_EPI_ROWS)
            k20_epi_stage(smem, b, acc);
        __syncthreads();
        const int row0 = b->m0 + pass * K20_EPI_ROWS + at.r0;
        if (EPI == K20_EPI_GATED)
            k20_epi_act<TK_EPI_GATED>(p, e, &at, smem, row0, sum);
        else if (e->kind == TK_EPI_BACKWARD)
            k20_epi_act<TK_EPI_BACKWARD>(p, e, &at, smem, row0, sum);
        else if (e->kind == TK_EPI_GATED_BACKWARD)
            k20_epi_act<TK_EPI_GATED_BACKWARD>(p, e, &at, smem, row0, sum);
        else
            k20_epi_act<TK_EPI_BIAS_ACT>(p, e, &at, smem, row0, sum);
    }
    if (EPI != K20_EPI_GATED && e->bias_grad)
        k20_epi_grad(p, e, b, &at, sum, smem, part);
}

/* A kernel file's entries around its product of one tile
 * (product<A_T, B_T, EPI>(p, b, s, stages, acc): k20's, or k21's with the
 * bounds-free copies): name##_kernel<A_T, B_T>, the plain product and
 * k20_epilogue; name##_epi_kernel<A_T, B_T, EPI>, the fused epilogues
 * (k20_epi_store); and their instances for K20_FAMILY_OPS, name##_fns in
 * k20_pick's order and name##_epi_fns for K20_EPI_PLAIN, then
 * K20_EPI_GATED. A macro, as K20_FAMILY_OPS, because each file's product
 * has its own name. */
#define K20_KERNELS(name, product)                                                                                   \
    template <int A_T, int B_T>                                                                                      \
    static __global__ void __launch_bounds__(K20_THREADS, K20_MIN_BLOCKS)                                            \
        name##_kernel(tk_args p, int stages, int group_m)                                                            \
    {                                                                                                                \
        extern __shared__ __align__(1024) uint8_t name##_smem[];                                                     \
        k20_pipe s;                                                                                                  \
        const k20_block b = k20_block_init<A_T, B_T>(&p, &s, tk_smem_u32(name##_smem), stages, group_m);             \
        float acc[K20_MT][K20_NT][4];                                                                                \
        product<A_T, B_T, 0>(&p, &b, &s, stages, acc);                                                               \
        k20_epilogue(&p, &b, acc);                                                                                   \
    }                                                                                                                \
    template <int A_T, int B_T, int EPI>                                                                             \
    static __global__ void __launch_bounds__(K20_THREADS, K20_MIN_BLOCKS)                                            \
        name##_epi_kernel(tk_args p, tk_epi_args e, float *part, int row, int stages, int group_m)                   \
    {                                                                                                                \
        extern __shared__ __align__(1024) uint8_t name##_epi_smem[];                                                 \
        k20_pipe s;                                                                                                  \
        const k20_block b =                                                                                          \
            k20_block_at<A_T, B_T, EPI>(&p, e.b_up, &s, tk_smem_u32(name##_epi_smem), stages, row, group_m);         \
        float acc[K20_MT][K20_NT][4];                                                                                \
        product<A_T, B_T, EPI>(&p, &b, &s, stages, acc);                                                             \
        k20_epi_store<EPI>(&p, &e, &b, acc, (float *)name##_epi_smem, part);                                         \
    }                                                                                                                \
    static const k20_fn name##_fns[4] = { name##_kernel<0, 0>, name##_kernel<0, 1>, name##_kernel<1, 0>,             \
                                          name##_kernel<1, 1> };                                                     \
    static const k20_epi_fn name##_epi_fns[2][4] = {                                                                 \
        { name##_epi_kernel<0, 0, K20_EPI_PLAIN>, name##_epi_kernel<0, 1, K20_EPI_PLAIN>,                            \
          name##_epi_kernel<1, 0, K20_EPI_PLAIN>, name##_epi_kernel<1, 1, K20_EPI_PLAIN> },                          \
        { name##_epi_kernel<0, 0, K20_EPI_GATED>, name##_epi_kernel<0, 1, K20_EPI_GATED>,                            \
          name##_epi_kernel<1, 0, K20_EPI_GATED>, name##_epi_kernel<1, 1, K20_EPI_GATED> },                          \
    };

/* bias_grad[j] = the partial sums of column j (k20_epi_grad: one a tile
 * row) added in tile-row order: the same bits every run. */
static __global__ void k20_bias_grad_sum(const float *part, int tiles_m, int64_t cols, float *bias_grad)
{
    for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < cols; j += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int t = 0; t < tiles_m; t++)
            s += part[(int64_t)t * cols + j];
        bias_grad[j] = s;
    }
}

/* ---- host side ---- */

/* A kernel's entry, instantiated for op_a, op_b in {N, T}: the kernel files
 * list the four instances indexed 2 * (op_a == T) + (op_b == T), and their
 * fused-epilogue instances the same for EPI = PLAIN and GATED, [EPI -
 * 1][...] (K20_KERNELS lists both). */
typedef void (*k20_fn)(tk_args, int, int);
typedef void (*k20_epi_fn)(tk_args, tk_epi_args, float *, int, int, int);

static int k20_pick_at(tk_op op_a, tk_op op_b)
{
    return (op_a == TK_OP_N ? 0 : 2) + (op_b == TK_OP_N ? 0 : 1);
}

static k20_fn k20_pick(const k20_fn fns[4], tk_op op_a, tk_op op_b)
{
    return fns[k20_pick_at(op_a, op_b)];
}

/* The instance of a call: its epilogue's (a->epi), else the product's. */
static const void *k20_func(const k20_fn fns[4], const k20_epi_fn epi_fns[2][4], const tk_args *a)
{
    const int at = k20_pick_at(a->op_a, a->op_b);
    if (!a->epi)
        return (const void *)fns[at];
    return (const void *)epi_fns[a->epi->kind == TK_EPI_GATED ? 1 : 0][at];
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

/* Output tiles of a call: along M, and along N (GATED: of its N / 2 columns). */
static void k20_tiles(const tk_args *a, int64_t *tiles_m, int64_t *tiles_n)
{
    *tiles_m = (a->m + K20_BM - 1) / K20_BM;
    *tiles_n = K20_TILES_N(a->n, a->epi && a->epi->kind == TK_EPI_GATED ? K20_EPI_GATED : 0);
}

/* A fused epilogue's own limits (the EPI instances take every kind, bias,
 * aux, bias_grad, D apart from C with beta * C, K == 0). */
static tk_status k20_supports_epi(const tk_args *a, char *why, size_t len)
{
    const tk_epi_args *e = a->epi;
    const int64_t lim = (INT_MAX - 256) / 2;
    if (e->kind == TK_EPI_GATED_BACKWARD && a->n > lim) {
        snprintf(why, len, "n: %lld is too large: TK_EPI_GATED_BACKWARD's D has 2N columns and its column indices "
                 "are 32-bit (expected N at most %lld)", (long long)a->n, (long long)lim);
        return TK_ERR_NOT_SUPPORTED;
    }
    return tk_check_b_up(a, "cp.async", why, len);
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
    if (a->epi) {
        tk_status st = k20_supports_epi(a, why, len);
        if (st)
            return st;
    }
    /* 16-byte cp.async of A and B rows; C stored in aligned pairs, or with
     * an epilogue D, C and aux accessed in pairs only where aligned
     * (k20_epi_store) */
    return tk_check_align(a, 8, a->epi ? 1 : 2, why, len);
}

/* bias_grad's partial sums (k20_epi_grad): out_cols floats a tile row. */
static size_t k20_grad_bytes(const tk_args *a)
{
    if (!a || !a->epi || !a->epi->bias_grad || a->epi->kind == TK_EPI_BIAS_ACT || a->epi->kind == TK_EPI_GATED)
        return 0;
    int64_t tiles_m, tiles_n;
    k20_tiles(a, &tiles_m, &tiles_n);
    return (size_t)tiles_m * (size_t)a->epi->out_cols * sizeof(float);
}

static void k20_core_resources(const k20_fn fns[4], const k20_epi_fn epi_fns[2][4], const tk_args *a,
                               const tk_device *dev, tk_resources *r)
{
    r->func = a ? k20_func(fns, epi_fns, a) : (const void *)k20_pick(fns, TK_OP_N, TK_OP_N);
    r->threads = K20_THREADS;
    int s = k20_stages(dev);
    r->dyn_smem = (size_t)(s < K20_MIN_STAGES ? K20_MIN_STAGES : s) * K20_STAGE_BYTES;
}

static tk_status k20_launch_error(char *why, size_t len)
{
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "launch: %s", cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

static tk_status k20_core_launch(const k20_fn fns[4], const k20_epi_fn epi_fns[2][4], const tk_args *a,
                                 const tk_device *dev, cudaStream_t stream, char *why, size_t len)
{
    const void *fn = k20_func(fns, epi_fns, a);
    const int stages = k20_stages(dev);
    const int smem = stages * K20_STAGE_BYTES;
    cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaFuncSetAttribute(%d bytes of shared memory): %s", smem, cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    int64_t tiles_m, tiles_n;
    k20_tiles(a, &tiles_m, &tiles_n);
    if (!a->epi) {
        k20_pick(fns, a->op_a, a->op_b)<<<(unsigned)(tiles_m * tiles_n), K20_THREADS, smem, stream>>>(*a, stages,
                                                                                                       K20_GROUP_M);
        return k20_launch_error(why, len);
    }
    /* bias_grad: its partial sums in the launch's workspace when it has
     * room for them (k20_workspace), else a launch a tile row (k20_block_at) */
    const size_t grad = k20_grad_bytes(a);
    float *part = grad && a->kws && a->kws_bytes >= grad ? (float *)a->kws : NULL;
    if (grad && !part) {
        for (int64_t tm = 0; tm < tiles_m; tm++) {
            ((k20_epi_fn)fn)<<<(unsigned)tiles_n, K20_THREADS, smem, stream>>>(*a, *a->epi, NULL, (int)tm, stages,
                                                                                K20_GROUP_M);
            tk_status st = k20_launch_error(why, len);
            if (st)
                return st;
        }
        return TK_SUCCESS;
    }
    ((k20_epi_fn)fn)<<<(unsigned)(tiles_m * tiles_n), K20_THREADS, smem, stream>>>(*a, *a->epi, part, -1, stages,
                                                                                    K20_GROUP_M);
    tk_status st = k20_launch_error(why, len);
    if (st || !part)
        return st;
    const int64_t cols = a->epi->out_cols, per = 256, b = (cols + per - 1) / per;
    k20_bias_grad_sum<<<(unsigned)(b < 65535 ? b : 65535), (unsigned)per, 0, stream>>>(part, (int)tiles_m, cols,
                                                                                        a->epi->bias_grad);
    return k20_launch_error(why, len);
}

/* The partial sums of bias_grad (without them: a launch a tile row), no flags. */
static size_t k20_workspace(const tk_args *a, size_t *nflags)
{
    *nflags = 0;
    return k20_grad_bytes(a);
}

#endif /* TK_KERNELS_K20_CORE_CUH */

/* The family functions (tk_family_ops) of a kernel built on this core, over
 * its four instances fns and its fused-epilogue instances epi_fns:
 * k20_mma_sync.cu and k21_mma_fastload.cu are a family each
 * (src/kernels/table.def) and differ only in their kernels. A macro
 * because each file's instance arrays have their own names. */
#define K20_FAMILY_OPS(family, fns, epi_fns)                                                                     \
    static tk_status family##_family_supports(const tk_kernel *k, const tk_args *a, const tk_device *dev,        \
                                              char *why, size_t len)                                             \
    {                                                                                                            \
        (void)k;                                                                                                 \
        return k20_supports(a, dev, why, len);                                                                   \
    }                                                                                                            \
    static void family##_family_resources(const tk_kernel *k, const tk_args *a, const tk_device *dev,            \
                                          tk_resources *r)                                                       \
    {                                                                                                            \
        (void)k;                                                                                                 \
        k20_core_resources(fns, epi_fns, a, dev, r);                                                             \
    }                                                                                                            \
    static tk_status family##_family_launch(const tk_kernel *k, const tk_args *a, const tk_device *dev,          \
                                            cudaStream_t stream, char *why, size_t len)                          \
    {                                                                                                            \
        (void)k;                                                                                                 \
        return k20_core_launch(fns, epi_fns, a, dev, stream, why, len);                                          \
    }                                                                                                            \
    static size_t family##_family_workspace(const tk_kernel *k, const tk_args *a, const tk_device *dev,          \
                                            size_t *nflags)                                                      \
    {                                                                                                            \
        (void)k;                                                                                                 \
        (void)dev;                                                                                               \
        return k20_workspace(a, nflags);                                                                         \
    }                                                                                                            \
    extern "C" const tk_family_ops tk_ops_##family = { family##_family_supports, family##_family_resources,     \
                                                       family##_family_launch, family##_family_workspace, NULL };
