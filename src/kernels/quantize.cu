/* quantize - tk_quantize_fp8's kernels (tilekit.h; issue 40): bf16 to FP8
 * codes and fp32 scales, bit for bit the lab's tk_lab_fp8_quantize.
 *
 * One core, qt_kernel, walks groups: a team of TEAM threads takes a group
 * (a 1 x 128 strip, a row, a 128 x 128 block), loads its 16-byte chunks (8
 * bf16 each), keeps the first CACHE chunks of each thread in registers,
 * reduces the largest |x| over the team, computes the scale and writes the
 * codes from the registers; chunks past CACHE are read again (from L2: the
 * team has just read them). So each mode but TENSOR is one pass over x:
 *   TK_QUANT_1X128    TEAM 8, CACHE 2: 8 threads a strip, two chunks each (two
 *                     16-byte loads in flight a thread: one did not cover
 *                     the DRAM latency at the occupancy its registers allow);
 *   TK_QUANT_ROW      cols <= 1024: TEAM 32, CACHE 4 (a warp a row); <= 4096:
 *                     TEAM 128, CACHE 4 (half a block a row); longer rows
 *                     TEAM 256, CACHE 8 (a block a row, 16384 columns held);
 *   TK_QUANT_128X128  TEAM 256, CACHE 8 (a block a block: 128 rows x 16 chunks);
 *   TK_QUANT_TENSOR   the 1 x 128 walk twice, groups in row-major order:
 *                     QT_AMAX (each block's largest |x| into scale[0] with
 *                     atomicMax, after a memset) then QT_CODES (scale[0]'s
 *                     scale; the groups in reverse order, so that what the
 *                     first kernel left in L2 is read first).
 * The largest |x| is taken on the bits: with the sign cleared, the unsigned
 * order of bf16 (or fp32) bits is the order of the magnitudes, NaN above
 * infinity, so an integer max is exact and keeps a NaN (fmaxf would drop
 * it), and atomicMax on them is deterministic. QT_AMAX stores the bits
 * with the sign set (-|amax|: sign-set patterns order by magnitude too,
 * and a memset's 0 is below them all); QT_CODES reads the word, a sign
 * set meaning the amax, clear the final scale already written by another
 * block (every block writes the same value), so scale[0] serves both with
 * no workspace.
 * Teams of one warp (TEAM above 32: of the block) walk the same number of
 * iterations, so the reductions always have full warps. Divisions are IEEE
 * (__fdiv_rn): fl32(x / scale), not x * (1 / scale), which differs in the
 * last bit, nor __fdividef. A quotient can only be NaN where the scale is
 * not finite (a NaN group; inf / inf): those groups take the path that
 * writes 0x7F for it, the others none.
 *
 * Figure: none measured yet. Reproduce: build/quant_bench (GB/s of the bytes
 * read and written, against the DRAM copy rate measured in the same run).
 */
#include <stdio.h>
#include "../lib/kernel.h"
#include "../ptx/cvt.cuh"
#include "../ptx/ld.cuh"

#define QT_THREADS 256          /* threads per block */
#define QT_BLOCKS_PER_SM 8      /* the grid's cap: 2048 threads per SM; the walk strides over the rest */
#define QT_ROW_WARP_COLS 1024   /* ROW: a warp per row up to this many columns (32 threads x CACHE 4 x 8) */
#define QT_ROW_HALF_COLS 4096   /* ROW: half a block per row up to this many (128 threads x CACHE 4 x 8) */

enum { QT_GROUPS = 0, QT_AMAX = 1, QT_CODES = 2 };

/* 8 bf16: one 16-byte load. */
typedef union qt_chunk {
    uint4 v;
    uint32_t w[4];
    uint16_t h[8];
} qt_chunk;

/* The groups: gr_rows x gc_cols elements each (gc_cols a multiple of 8, or
 * every column), ngr x ngc of them. The walk's order: row-major (rowwise
 * 1, every mode: consecutive teams read consecutive memory, which DRAM
 * streams best; 1X128's scales are then written ld_scale apart, sectors
 * that L2 merges before they reach DRAM) or column-major (0: consecutive
 * teams take consecutive row blocks and write consecutive scales). */
typedef struct qt_geom {
    int64_t gr_rows, gc_cols, ngr, ngc;
    int rowwise;
} qt_geom;

/* The chunk i of the group at (r0, c0) with `rows` rows of cpr chunks. */
static __device__ __forceinline__ void qt_where(int64_t r0, int64_t c0, int rows, int cpr, int64_t i, int64_t *r,
                                                int64_t *c)
{
    if (rows == 1) {
        *r = r0;
        *c = c0 + i * 8;
    } else {   /* a 128 x 128 block: i < 2048 */
        const int ri = (int)i / cpr;
        *r = r0 + ri;
        *c = c0 + ((int)i - ri * cpr) * 8;
    }
}

static __device__ __forceinline__ qt_chunk qt_load(const tk_quant_args &a, int64_t r, int64_t c)
{
    const uint16_t *p = (const uint16_t *)a.x + r * a.ldx + c;
    const int64_t n = a.cols - c;
    qt_chunk v;
    if (a.vec_x && n >= 8) {
        v.v = tk_ld_stream_v4(p);
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++)
            v.h[j] = j < n ? p[j] : 0;   /* a zero never raises the amax */
    }
    return v;
}

/* m (two 16-bit halves) = the largest bf16 magnitudes seen, per half. */
static __device__ __forceinline__ uint32_t qt_amax2(qt_chunk v, uint32_t m)
{
#pragma unroll
    for (int j = 0; j < 4; j++)
        m = __vmaxu2(m, v.w[j] & 0x7fff7fffu);
    return m;
}

/* The fp32 bits of the largest magnitude of a qt_amax2 pair. */
static __device__ __forceinline__ uint32_t qt_amax_bits(uint32_t m2)
{
    return max(m2 & 0xffffu, m2 >> 16) << 16;
}

template <int TEAM>
static __device__ __forceinline__ uint32_t qt_team_max(uint32_t m, uint32_t *red)
{
#pragma unroll
    for (int off = (TEAM < 32 ? TEAM : 32) / 2; off > 0; off /= 2)
        m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (TEAM > 32) {   /* the team's warps, through shared memory (every team of the block at once) */
        const int base = threadIdx.x / TEAM * (TEAM / 32);
        __syncthreads();   /* the previous reduction's readers are done with red */
        if (threadIdx.x % 32 == 0)
            red[threadIdx.x / 32] = m;
        __syncthreads();
#pragma unroll
        for (int w = 0; w < TEAM / 32; w++)
            m = max(m, red[base + w]);
    }
    return m;
}

static __device__ __forceinline__ float qt_scale(uint32_t amax_bits, float fmax)
{
    const float amax = __uint_as_float(amax_bits);
    return amax == 0.0f ? 1.0f : __fdiv_rn(amax, fmax);
}

static __device__ __forceinline__ float qt_bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

/* Two codes (the first in the low byte); special: the scale is not finite,
 * so a quotient may be NaN, which becomes 0x7F. */
static __device__ __forceinline__ uint32_t qt_pair(uint16_t x0, uint16_t x1, float s, int e5, bool special)
{
    const float v0 = __fdiv_rn(qt_bf16(x0), s), v1 = __fdiv_rn(qt_bf16(x1), s);
    uint32_t d = e5 ? tk_cvt_e5m2x2_f32(v0, v1) : tk_cvt_e4m3x2_f32(v0, v1);
    if (special) {
        d = v0 != v0 ? (d & 0xff00u) | 0x7fu : d;
        d = v1 != v1 ? (d & 0x00ffu) | 0x7f00u : d;
    }
    return d;
}

static __device__ __forceinline__ void qt_store(const tk_quant_args &a, int64_t r, int64_t c, qt_chunk v, float s,
                                                int e5, bool special)
{
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; j++)
        w[j] = qt_pair(v.h[2 * j], v.h[2 * j + 1], s, e5, special);
    const uint2 codes = make_uint2(w[0] | w[1] << 16, w[2] | w[3] << 16);
    uint8_t *p = (uint8_t *)a.q + r * a.ldq + c;
    const int64_t n = a.cols - c;
    if (a.vec_q && n >= 8) {
        *(uint2 *)p = codes;
    } else {
        const uint64_t b = codes.x | (uint64_t)codes.y << 32;
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (j < n)
                p[j] = (uint8_t)(b >> 8 * j);
    }
}

/* TEAM, CACHE and PHASE are template parameters because they size the
 * register array of cached chunks and the reduction's shuffles and decide
 * which steps exist (QT_AMAX writes no codes, QT_CODES reads its scale):
 * compile-time, with the instances listed in the launcher below. */
template <int TEAM, int CACHE, int PHASE>
static __global__ void __launch_bounds__(QT_THREADS) qt_kernel(const __grid_constant__ tk_quant_args a,
                                                               const qt_geom gm)
{
    constexpr int TEAMS = QT_THREADS / TEAM;
    __shared__ uint32_t red[QT_THREADS / 32];
    const int t = threadIdx.x % TEAM;
    const int e5 = a.format == TK_FP8_E5M2;
    const float fmax = e5 ? 57344.0f : 448.0f;
    const int64_t groups = gm.ngr * gm.ngc;
    float s = 0.0f;
    if (PHASE == QT_CODES) {
        const uint32_t w = __ldcg((const unsigned int *)a.scale);
        const uint32_t sb = __float_as_uint(w >> 31 ? qt_scale(w & 0x7fffffffu, fmax) : __uint_as_float(w));
        s = __uint_as_float(sb & 0x7fffffffu);   /* a NaN's sign too: the word must read as a scale */
        if (threadIdx.x == 0)
            a.scale[0] = s;
    }
    /* The team's group (gf along the walk's fast index, gs its slow one)
     * and the step to its next one, with no division per group. The grid's
     * teams number less than 2^32, so 32-bit divisions do (a 64-bit one is
     * a call, which made ptxas spill around it). */
    const int64_t nf = gm.rowwise ? gm.ngc : gm.ngr;
    const uint32_t stride = gridDim.x * TEAMS, gi0 = blockIdx.x * TEAMS + threadIdx.x / TEAM;
    const bool wide = nf > (int64_t)UINT32_MAX;   /* then every team's group and step lie within one line */
    const uint32_t nf32 = wide ? 1u : (uint32_t)nf;
    const int64_t step_f = wide ? stride : stride % nf32, step_s = wide ? 0 : stride / nf32;
    int64_t gf = wide ? gi0 : gi0 % nf32, gs = wide ? 0 : gi0 / nf32;
    uint32_t mt = 0;   /* QT_AMAX: the largest magnitudes over the thread's groups */
    for (int64_t g0 = (int64_t)blockIdx.x * TEAMS; g0 < groups;
         g0 += stride, gf += step_f, gs += step_s + (gf >= nf), gf -= gf >= nf ? nf : 0) {
        int64_t gr = gm.rowwise ? gs : gf, gc = gm.rowwise ? gf : gs;
        const bool live = g0 + threadIdx.x / TEAM < groups;
        if (PHASE == QT_CODES) {   /* the mirror image of QT_AMAX's walk */
            gr = gm.ngr - 1 - gr;
            gc = gm.ngc - 1 - gc;
        }
        const int64_t r0 = gr * gm.gr_rows, c0 = gc * gm.gc_cols;
        const int rows = live ? (int)min(gm.gr_rows, a.rows - r0) : 0;
        const int64_t cols = live ? min(gm.gc_cols, a.cols - c0) : 0;
        const int cpr = (int)((cols + 7) / 8);
        const int64_t nchunks = rows == 1 ? (cols + 7) / 8 : (int64_t)rows * cpr;
        qt_chunk c[CACHE];
        uint32_t m = 0;
#pragma unroll
        for (int j = 0; j < CACHE; j++) {
            const int64_t i = t + (int64_t)j * TEAM;
            if (i < nchunks) {
                int64_t r, cc;
                qt_where(r0, c0, rows, cpr, i, &r, &cc);
                c[j] = qt_load(a, r, cc);
                m = qt_amax2(c[j], m);
            }
        }
        if (PHASE != QT_CODES)
            for (int64_t i = t + (int64_t)CACHE * TEAM; i < nchunks; i += TEAM) {
                int64_t r, cc;
                qt_where(r0, c0, rows, cpr, i, &r, &cc);
                m = qt_amax2(qt_load(a, r, cc), m);
            }
        if (PHASE == QT_AMAX) {
            mt = __vmaxu2(mt, m);
            continue;
        }
        if (PHASE == QT_GROUPS) {
            const uint32_t amax = qt_team_max<TEAM>(qt_amax_bits(m), red);
            s = qt_scale(amax, fmax);
            if (t == 0 && live)
                a.scale[gr + gc * a.ld_scale] = s;
        }
        const bool special = !(fabsf(s) < __uint_as_float(0x7f800000u));   /* NaN or infinite */
#pragma unroll
        for (int j = 0; j < CACHE; j++) {
            const int64_t i = t + (int64_t)j * TEAM;
            if (i < nchunks) {
                int64_t r, cc;
                qt_where(r0, c0, rows, cpr, i, &r, &cc);
                qt_store(a, r, cc, c[j], s, e5, special);
            }
        }
        for (int64_t i = t + (int64_t)CACHE * TEAM; i < nchunks; i += TEAM) {
            int64_t r, cc;
            qt_where(r0, c0, rows, cpr, i, &r, &cc);
            qt_store(a, r, cc, qt_load(a, r, cc), s, e5, special);
        }
    }
    if (PHASE == QT_AMAX) {
        const uint32_t amax = qt_team_max<QT_THREADS>(qt_amax_bits(mt), red);
        if (threadIdx.x == 0)
            atomicMax((unsigned int *)a.scale, 0x80000000u | amax);
    }
}

template <int TEAM, int CACHE, int PHASE>
static cudaError_t qt_launch(const tk_quant_args *a, const qt_geom *g, cudaStream_t stream)
{
    const int64_t teams = QT_THREADS / TEAM, need = (g->ngr * g->ngc + teams - 1) / teams;
    const int64_t cap = (int64_t)a->sm_count * QT_BLOCKS_PER_SM;
    qt_kernel<TEAM, CACHE, PHASE><<<(unsigned)(need < cap ? need : cap), QT_THREADS, 0, stream>>>(*a, *g);
    return cudaGetLastError();
}

extern "C" tk_status tk_launch_quantize_fp8(const tk_quant_args *a, cudaStream_t stream, char *why, size_t len)
{
    const int64_t rb = (a->rows + 127) / 128, cb = (a->cols + 127) / 128;
    cudaError_t e = cudaSuccess;
    switch (a->mode) {
    case TK_QUANT_1X128: {
        const qt_geom g = { 1, 128, a->rows, cb, 1 };
        e = qt_launch<8, 2, QT_GROUPS>(a, &g, stream);
        break;
    }
    case TK_QUANT_ROW: {
        const qt_geom g = { 1, a->cols, a->rows, 1, 1 };
        e = a->cols <= QT_ROW_WARP_COLS   ? qt_launch<32, 4, QT_GROUPS>(a, &g, stream)
            : a->cols <= QT_ROW_HALF_COLS ? qt_launch<128, 4, QT_GROUPS>(a, &g, stream)
                                          : qt_launch<256, 8, QT_GROUPS>(a, &g, stream);
        break;
    }
    case TK_QUANT_128X128: {
        const qt_geom g = { 128, 128, rb, cb, 1 };
        e = qt_launch<256, 8, QT_GROUPS>(a, &g, stream);
        break;
    }
    case TK_QUANT_TENSOR: {
        const qt_geom g = { 1, 128, a->rows, cb, 1 };
        e = cudaMemsetAsync(a->scale, 0, sizeof(float), stream);
        if (e == cudaSuccess)
            e = qt_launch<8, 2, QT_AMAX>(a, &g, stream);
        if (e == cudaSuccess)
            e = qt_launch<8, 2, QT_CODES>(a, &g, stream);
        break;
    }
    default:
        snprintf(why, len, "quantize: mode %d reached the launcher (a bug: quantize.c checks it)", a->mode);
        return TK_ERR_INTERNAL;
    }
    if (e != cudaSuccess) {
        snprintf(why, len, "quantize launch: %s", cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}
