/* k20_core.cuh - what k20_mma_sync and k21_mma_fastload share: the tile
 * configuration, the shared-memory stage layout, the cp.async loader of an
 * operand tile, the swizzled ldmatrix fragment loads, the K-tile step (the
 * copies of a later stage spread over the MMAs of four k16 slices), the
 * epilogue, and the host side (stage count, supports(), resources(), launch).
 *
 * The kernel files keep what differs: their header (design, figure, command),
 * their __global__ entry (k21 runs the K tiles of interior blocks with FULL = 1,
 * the bounds-free copies) and their registry entry. Read k20_mma_sync.cu for
 * the design, k21_mma_fastload.cu for the fast load path; the measured
 * history of both is docs/kernels/k20.md.
 *
 * Templates: the device functions are specialised on the two operand layouts
 * (A_T, B_T: ldmatrix vs ldmatrix.trans and the loader's direction) and the
 * K-tile step on FULL (whether its copies need bounds checks), all known at
 * compile time; C cannot express that without writing each body out per case.
 */
#ifndef TK_KERNELS_K20_CORE_CUH
#define TK_KERNELS_K20_CORE_CUH

#include <stdio.h>
#include <limits.h>
#include "../lib/kernel.h"
#include "../ptx/cp_async.cuh"
#include "../ptx/ldmatrix.cuh"
#include "../ptx/mma_sync.cuh"
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
 * arithmetic -- the change that makes k21. */
template <int R, int C>
static __device__ __forceinline__ void k20_loader_copy(const k20_loader *l, const void *base, int64_t ld,
                                                       uint32_t dst, int first, int last, int full)
{
    const int rpp = K20_THREADS / (C / 8);
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

/* Places the block (super-tile order) and the warp, and sets up the loaders. */
template <int A_T, int B_T>
static __device__ __forceinline__ k20_block k20_block_init(const tk_args *p, k20_pipe *s, uint32_t smem0, int stages,
                                                           int group_m)
{
    const int WARPS_N = K20_BN / K20_WN;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int M = (int)p->m, N = (int)p->n, K = (int)p->k;
    int tm, tn;
    tk_raster_supertile((int)blockIdx.x, (M + K20_BM - 1) / K20_BM, (N + K20_BN - 1) / K20_BN, group_m, &tm, &tn);
    k20_block b;
    b.lane = lane;
    b.m0 = tm * K20_BM;
    b.n0 = tn * K20_BN;
    b.wm0 = (warp / WARPS_N) * K20_WM;
    b.wn0 = (warp % WARPS_N) * K20_WN;
    b.ktiles = (K + K20_BK - 1) / K20_BK;

    s->la = A_T ? k20_loader_init<K20_AR(A_T), K20_AC(A_T)>(p->a, p->lda, 0, b.m0, K, M)
                : k20_loader_init<K20_AR(A_T), K20_AC(A_T)>(p->a, p->lda, b.m0, 0, M, K);
    s->lb = B_T ? k20_loader_init<K20_BR(B_T), K20_BC(B_T)>(p->b, p->ldb, b.n0, 0, N, K)
                : k20_loader_init<K20_BR(B_T), K20_BC(B_T)>(p->b, p->ldb, 0, b.n0, K, N);
    s->smem0 = smem0;
    s->stages = stages;
    return b;
}

/* Copies q in [first, last) of a stage's A_PASSES + B_PASSES chunks (A's first). */
template <int A_T, int B_T>
static __device__ __forceinline__ void k20_copy(const tk_args *p, const k20_pipe *s, uint32_t dst, int first,
                                                int last, int full)
{
    k20_loader_copy<K20_AR(A_T), K20_AC(A_T)>(&s->la, p->a, p->lda, dst, first, last, full);
    k20_loader_copy<K20_BR(B_T), K20_BC(B_T)>(&s->lb, p->b, p->ldb, dst + K20_A_BYTES, first - K20_A_PASSES,
                                              last - K20_A_PASSES, full);
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
template <int A_T, int B_T>
static __device__ __forceinline__ void k20_prologue(const tk_args *p, k20_pipe *s, int ktiles, int interior)
{
    const int K = (int)p->k;   /* read before the loop, so the && below compiles to a predicate */
    for (int st = 0; st < s->stages - 1; st++) {
        if (st < ktiles) {
            k20_copy<A_T, B_T>(p, s, s->smem0 + st * K20_STAGE_BYTES, 0, K20_A_PASSES + K20_B_PASSES,
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
template <int A_T, int B_T, int FULL>
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
                k20_copy<A_T, B_T>(p, s, dst, 3 * Q / 4, Q, FULL);
            tk_cp_async_commit();
            k20_wait_pending(s->stages - 2);
            __syncthreads();
            s->rd = s->rd + 1 == s->stages ? 0 : s->rd + 1;
        }
        const uint32_t sa = s->smem0 + s->rd * K20_STAGE_BYTES;
        k20_load_frags<A_T, B_T>(af[(kk + 1) & 1], bf[(kk + 1) & 1], sa, sa + K20_A_BYTES, s->a_lane, s->b_lane,
                                 (kk + 1) & 3);
        if (kk < 3 && fill)
            k20_copy<A_T, B_T>(p, s, dst, kk * Q / 4, (kk + 1) * Q / 4, FULL);
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

/* ---- host side ---- */

/* A kernel's entry, instantiated for op_a, op_b in {N, T}: the kernel files
 * list the four instances indexed 2 * (op_a == T) + (op_b == T). */
typedef void (*k20_fn)(tk_args, int, int);

static k20_fn k20_pick(const k20_fn fns[4], tk_op op_a, tk_op op_b)
{
    return fns[(op_a == TK_OP_N ? 0 : 2) + (op_b == TK_OP_N ? 0 : 1)];
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
    return tk_check_align(a, 8, 2, why, len);
}

static void k20_core_resources(const k20_fn fns[4], const tk_args *a, const tk_device *dev, tk_resources *r)
{
    r->func = (const void *)(a ? k20_pick(fns, a->op_a, a->op_b) : k20_pick(fns, TK_OP_N, TK_OP_N));
    r->threads = K20_THREADS;
    int s = k20_stages(dev);
    r->dyn_smem = (size_t)(s < K20_MIN_STAGES ? K20_MIN_STAGES : s) * K20_STAGE_BYTES;
}

static tk_status k20_core_launch(const k20_fn fns[4], const tk_args *a, const tk_device *dev, cudaStream_t stream,
                                 char *why, size_t len)
{
    const k20_fn fn = k20_pick(fns, a->op_a, a->op_b);
    const int stages = k20_stages(dev);
    const int smem = stages * K20_STAGE_BYTES;
    cudaError_t e = cudaFuncSetAttribute((const void *)fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaFuncSetAttribute(%d bytes of shared memory): %s", smem, cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    const int64_t tiles = ((a->m + K20_BM - 1) / K20_BM) * ((a->n + K20_BN - 1) / K20_BN);
    fn<<<(unsigned)tiles, K20_THREADS, smem, stream>>>(*a, stages, K20_GROUP_M);
    e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "launch: %s", cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

#endif /* TK_KERNELS_K20_CORE_CUH */

/* The family functions (tk_family_ops) of a kernel built on this core, over
 * its four instances fns: k20_mma_sync.cu and k21_mma_fastload.cu are a
 * family each (src/kernels/table.def) and differ only in their kernels. A
 * macro because each file's instance array has its own name. */
#define K20_FAMILY_OPS(family, fns)                                                                              \
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
        k20_core_resources(fns, a, dev, r);                                                                      \
    }                                                                                                            \
    static tk_status family##_family_launch(const tk_kernel *k, const tk_args *a, const tk_device *dev,          \
                                            cudaStream_t stream, char *why, size_t len)                          \
    {                                                                                                            \
        (void)k;                                                                                                 \
        return k20_core_launch(fns, a, dev, stream, why, len);                                                   \
    }                                                                                                            \
    extern "C" const tk_family_ops tk_ops_##family = { family##_family_supports, family##_family_resources,     \
                                                       family##_family_launch, NULL, NULL };
