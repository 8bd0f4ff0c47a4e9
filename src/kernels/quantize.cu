/* quantize - tk_quantize_fp8's kernels (tilekit.h; issue 40): bf16 to FP8
 * codes and fp32 scales, bit for bit the lab's tk_lab_fp8_quantize.
 *
 * One core, qt_kernel, walks groups: a team of TEAM threads takes a group
 * (a 1 x 128 strip, a row, a 128 x 128 block), loads its 16-byte chunks (8
 * bf16 each), keeps the first CACHE chunks of each thread in registers,
 * reduces the largest |x| over the team, computes the scale and writes the
 * codes from the registers; chunks past CACHE are read again (from L2: the
 * team has just read them). So each mode but TENSOR is one pass over x:
 *   TK_QUANT_1X128    TEAM 4, CACHE 4: 4 threads a strip, four chunks each;
 *   TK_QUANT_ROW      cols <= 1024: TEAM 32, CACHE 4 (a warp a row); <= 4096:
 *                     TEAM 128, CACHE 4 (half a block a row); <= 8192: TEAM
 *                     256, CACHE 4 (a block a row); longer rows TEAM 256,
 *                     CACHE 8 (16384 columns held, the rest read again);
 *   TK_QUANT_128X128  TEAM 256, CACHE 8 (a block a block: 128 rows x 16 chunks);
 *   TK_QUANT_TENSOR   the 1 x 128 walk twice, groups in row-major order:
 *                     QT_AMAX (each block's largest |x| into scale[0] with
 *                     atomicMax, after a memset) then QT_CODES (scale[0]'s
 *                     scale; the groups in reverse order, so that what the
 *                     first kernel left in L2 is read first).
 * The speed (session 30; docs/NOTES.md, "Quantizer speed"): a streaming
 * kernel needs about 20-30 KB of loads in flight an SM at all times. So:
 * the loads of a team's next group are issued before its current group's
 * reduction and codes (two register sets of CACHE chunks: 64 or 128 bytes
 * a thread in flight while it computes); the grid is exactly the blocks
 * that fit (the launch bound's, so that registers decide it at compile
 * time and a spill fails the build), every block resident from the start;
 * a team wider than a warp meets behind one barrier a group (two arrays of
 * partial maxima taken in turn), after its next loads are in flight; and
 * the division is a product and one correction (tk_qdiv, src/tiles/qdiv.h:
 * three instructions for __fdiv_rn's seven and a branch), exact for every
 * scale it takes, the others (a tiny, NaN or infinite scale) on __fdiv_rn.
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
 * iterations, so the reductions always have full warps. Divisions are IEEE:
 * fl32(x / scale), not x * (1 / scale), which differs in the last bit, nor
 * __fdividef. A quotient can only be NaN where the scale is not finite (a
 * NaN group; inf / inf): those groups take the path that writes 0x7F for
 * it, the others none.
 *
 * Figure: session 29's kernel (H200, L2 flushed, 8192 x 8192 e4m3, of the
 * 4241 GB/s copy rate): tensor 1276 GB/s, row 1620, 1x128 1900, 128x128
 * 1531; this one not measured yet (predicted in docs/NOTES.md). Reproduce:
 * build/quant_bench (GB/s of the bytes read and written, against the DRAM
 * copy rate measured in the same run).
 */
#include <stdio.h>
#include "../lib/kernel.h"
#include "../ptx/cvt.cuh"
#include "../ptx/ld.cuh"
#include "../tiles/qdiv.h"

#define QT_THREADS 256          /* threads per block */
#define QT_BLOCK_CPR 16         /* chunks in a row of a 128 x 128 group */
#define QT_ROW_WARP_COLS 1024   /* ROW: a warp per row up to this many columns (32 threads x CACHE 4 x 8) */
#define QT_ROW_HALF_COLS 4096   /* ROW: half a block per row up to this many (128 threads x CACHE 4 x 8) */
#define QT_ROW_BLOCK_COLS 8192  /* ROW: a block per row with CACHE 4 up to this many (256 x 4 x 8); CACHE 8 past it */

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

/* One step of a team's walk: its group's first element, its extent (rows
 * 0: no group this step) and its scale's slot. */
typedef struct qt_group {
    int64_t r0, c0, cols, si;
    int rows;
} qt_group;

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

/* Where the thread's chunk j of a group lies from the group's first
 * element. A strip (GROWS 1): the team's threads side by side, chunk j TEAM
 * chunks on from chunk 0. A 128 x 128 block (GROWS 128, TEAM * CACHE =
 * 128 rows of 16 chunks): 16 threads across a row, TEAM / 16 rows down,
 * chunk j that many rows further. */
template <int TEAM, int GROWS>
static __device__ __forceinline__ void qt_offset(int t, int j, int *dr, int *dc)
{
    if (GROWS == 1) {
        *dr = 0;
        *dc = (t + j * TEAM) * 8;
    } else {
        *dr = t / QT_BLOCK_CPR + j * (TEAM / QT_BLOCK_CPR);
        *dc = t % QT_BLOCK_CPR * 8;
    }
}

/* The team's group at the walk's (gf, gs); rows 0 where it has none
 * (!live). mirror: the walk reversed (QT_CODES). */
static __device__ __forceinline__ qt_group qt_group_at(const tk_quant_args &a, const qt_geom &gm, int64_t gf,
                                                       int64_t gs, bool live, bool mirror)
{
    int64_t gr = gm.rowwise ? gs : gf, gc = gm.rowwise ? gf : gs;
    if (mirror) {
        gr = gm.ngr - 1 - gr;
        gc = gm.ngc - 1 - gc;
    }
    qt_group g;
    g.r0 = gr * gm.gr_rows;
    g.c0 = gc * gm.gc_cols;
    g.rows = live ? (int)min(gm.gr_rows, a.rows - g.r0) : 0;
    g.cols = live ? min(gm.gc_cols, a.cols - g.c0) : 0;
    g.si = gr + gc * a.ld_scale;
    return g;
}

/* Whether every chunk the thread holds of g is whole, inside the group
 * (every group but those at the matrix's right or bottom edge): then its
 * loads and stores need no check, and their addresses are one base and a
 * step (chunk j of a strip TEAM chunks on, of a block TEAM / 16 rows down). */
template <int TEAM, int CACHE, int GROWS>
static __device__ __forceinline__ bool qt_whole(const qt_group &g)
{
    return GROWS == 1 ? g.rows && g.cols >= TEAM * CACHE * 8 : g.rows == GROWS && g.cols == QT_BLOCK_CPR * 8;
}

template <int TEAM, int GROWS>
static __device__ __forceinline__ int64_t qt_step(int64_t ld)
{
    return GROWS == 1 ? TEAM * 8 : TEAM / QT_BLOCK_CPR * ld;
}

/* The thread's chunks of group g, those outside it zero (a zero never
 * raises the amax). */
template <int TEAM, int CACHE, int GROWS>
static __device__ __forceinline__ void qt_load_group(const tk_quant_args &a, const qt_group &g, int t, qt_chunk *c)
{
    if (a.vec_x && qt_whole<TEAM, CACHE, GROWS>(g)) {
        int dr, dc;
        qt_offset<TEAM, GROWS>(t, 0, &dr, &dc);
        const uint16_t *p = (const uint16_t *)a.x + (g.r0 + dr) * a.ldx + g.c0 + dc;
#pragma unroll
        for (int j = 0; j < CACHE; j++)
            c[j].v = tk_ld_stream_v4(p + j * qt_step<TEAM, GROWS>(a.ldx));
        return;
    }
#pragma unroll
    for (int j = 0; j < CACHE; j++) {
        int dr, dc;
        qt_offset<TEAM, GROWS>(t, j, &dr, &dc);
        if (dr < g.rows && dc < g.cols)
            c[j] = qt_load(a, g.r0 + dr, g.c0 + dc);
        else
            c[j].v = make_uint4(0, 0, 0, 0);
    }
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

/* The largest of m over the team. A team of a warp or less: shuffles. A
 * wider one also meets in red (one slot per warp) behind one barrier; the
 * caller alternates between two red arrays, so the next reduction's writes
 * cannot meet this one's reads (a thread writes the other array only after
 * the next barrier, which every reader of this one has passed). */
template <int TEAM>
static __device__ __forceinline__ uint32_t qt_team_max(uint32_t m, uint32_t *red)
{
#pragma unroll
    for (int off = (TEAM < 32 ? TEAM : 32) / 2; off > 0; off /= 2)
        m = max(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (TEAM > 32) {   /* the team's warps, through shared memory (every team of the block at once) */
        const int base = threadIdx.x / TEAM * (TEAM / 32);
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

/* A chunk's 8 codes (the first in the low byte). FAST: the scale passes
 * tk_qdiv_fits and r is its reciprocal: tk_qdiv's product and correction,
 * the format fixed (E5). Else __fdiv_rn and the format read from e5;
 * special: the scale is not finite, so a quotient may be NaN, which
 * becomes 0x7F. */
template <bool FAST, bool E5>
static __device__ __forceinline__ uint2 qt_codes(qt_chunk v, float s, float r, int e5, bool special)
{
    uint32_t d[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float x0 = __uint_as_float(v.w[j] << 16), x1 = __uint_as_float(v.w[j] & 0xffff0000u);
        const float v0 = FAST ? tk_qdiv(x0, s, r) : __fdiv_rn(x0, s);
        const float v1 = FAST ? tk_qdiv(x1, s, r) : __fdiv_rn(x1, s);
        d[j] = (FAST ? E5 : e5) ? tk_cvt_e5m2x2_f32(v0, v1) : tk_cvt_e4m3x2_f32(v0, v1);
        if (!FAST && special) {
            d[j] = v0 != v0 ? (d[j] & 0xff00u) | 0x7fu : d[j];
            d[j] = v1 != v1 ? (d[j] & 0x00ffu) | 0x7f00u : d[j];
        }
    }
    return make_uint2(d[0] | d[1] << 16, d[2] | d[3] << 16);
}

static __device__ __forceinline__ void qt_store(const tk_quant_args &a, int64_t r, int64_t c, uint2 codes)
{
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

/* Group g's codes from the thread's chunks c (and, past them, chunks read
 * again: ROW's longest rows). */
template <int TEAM, int CACHE, int GROWS, bool FAST, bool E5>
static __device__ __forceinline__ void qt_codes_group(const tk_quant_args &a, const qt_group &g, int t,
                                                      const qt_chunk *c, float s, float r, int e5, bool special)
{
    /* (a 128 x 128 block keeps the checked stores: the unchecked ones'
     * eight row addresses cost ptxas a spill at its 128 registers) */
    if (GROWS == 1 && a.vec_q && qt_whole<TEAM, CACHE, GROWS>(g)) {
        int dr, dc;
        qt_offset<TEAM, GROWS>(t, 0, &dr, &dc);
        uint8_t *p = (uint8_t *)a.q + (g.r0 + dr) * a.ldq + g.c0 + dc;
#pragma unroll
        for (int j = 0; j < CACHE; j++)
            *(uint2 *)(p + j * qt_step<TEAM, GROWS>(a.ldq)) = qt_codes<FAST, E5>(c[j], s, r, e5, special);
    } else {
#pragma unroll
        for (int j = 0; j < CACHE; j++) {
            int dr, dc;
            qt_offset<TEAM, GROWS>(t, j, &dr, &dc);
            if (dr < g.rows && dc < g.cols)
                qt_store(a, g.r0 + dr, g.c0 + dc, qt_codes<FAST, E5>(c[j], s, r, e5, special));
        }
    }
    if (GROWS == 1)
        for (int64_t i = t + (int64_t)CACHE * TEAM; i * 8 < g.cols; i += TEAM)
            qt_store(a, g.r0, g.c0 + i * 8, qt_codes<FAST, E5>(qt_load(a, g.r0, g.c0 + i * 8), s, r, e5, special));
}

/* The codes with the scale s: the fast division where s allows it, in the
 * call's format (a branch per group, the same for the whole team). */
template <int TEAM, int CACHE, int GROWS>
static __device__ __forceinline__ void qt_codes_any(const tk_quant_args &a, const qt_group &g, int t,
                                                    const qt_chunk *c, float s, float r, int e5)
{
    if (tk_qdiv_fits(s) && e5)
        qt_codes_group<TEAM, CACHE, GROWS, true, true>(a, g, t, c, s, r, e5, false);
    else if (tk_qdiv_fits(s))
        qt_codes_group<TEAM, CACHE, GROWS, true, false>(a, g, t, c, s, r, e5, false);
    else
        qt_codes_group<TEAM, CACHE, GROWS, false, false>(a, g, t, c, s, r, e5,
                                                         !(fabsf(s) < __uint_as_float(0x7f800000u)));
}

/* Registers allow this many blocks an SM (the launch bound, so that a
 * spill fails the build) and the grid is that many an SM: every block
 * resident from the start, the walk strides over the groups. */
static constexpr int qt_min_blocks(int cache) { return cache <= 4 ? 3 : 2; }

/* TEAM, CACHE, GROWS and PHASE are template parameters because they size
 * the register arrays of chunks, the reduction's shuffles and the chunks'
 * layout, and decide which steps exist (QT_AMAX writes no codes, QT_CODES
 * reads its scale): compile-time, with the instances listed in the
 * launcher below.
 * The pipeline: the loads of the team's next group (c's successor n) are
 * issued before this group's reduction, scale and codes, so that every
 * thread keeps CACHE 16-byte loads in flight while it computes, and a
 * barrier of the reduction (TEAM > 32) stalls no memory. */
template <int TEAM, int CACHE, int GROWS, int PHASE>
static __global__ void __launch_bounds__(QT_THREADS, qt_min_blocks(CACHE))
    qt_kernel(const __grid_constant__ tk_quant_args a, const qt_geom gm)
{
    static_assert(GROWS == 1 || (TEAM == QT_THREADS && TEAM * CACHE == GROWS * QT_BLOCK_CPR),
                  "a 128 x 128 group is one block's");
    constexpr int TEAMS = QT_THREADS / TEAM;
    __shared__ uint32_t red[2][QT_THREADS / 32];
    const int t = threadIdx.x % TEAM, team = threadIdx.x / TEAM;
    const int e5 = a.format == TK_FP8_E5M2;
    const float fmax = e5 ? 57344.0f : 448.0f;
    const int64_t groups = gm.ngr * gm.ngc;
    float s = 0.0f, r = 0.0f;
    if (PHASE == QT_CODES) {
        const uint32_t w = __ldcg((const unsigned int *)a.scale);
        const uint32_t sb = __float_as_uint(w >> 31 ? qt_scale(w & 0x7fffffffu, fmax) : __uint_as_float(w));
        s = __uint_as_float(sb & 0x7fffffffu);   /* a NaN's sign too: the word must read as a scale */
        r = tk_qdiv_fits(s) ? tk_qdiv_recip(s) : 0.0f;
        if (threadIdx.x == 0)
            a.scale[0] = s;
    }
    /* The team's group (gf along the walk's fast index, gs its slow one)
     * and the step to its next one, with no division per group. The grid's
     * teams number less than 2^32, so 32-bit divisions do (a 64-bit one is
     * a call, which made ptxas spill around it). */
    const int64_t nf = gm.rowwise ? gm.ngc : gm.ngr;
    const uint32_t stride = gridDim.x * TEAMS, gi0 = blockIdx.x * TEAMS + team;
    const bool wide = nf > (int64_t)UINT32_MAX;   /* then every team's group and step lie within one line */
    const uint32_t nf32 = wide ? 1u : (uint32_t)nf;
    const int64_t step_f = wide ? stride : stride % nf32, step_s = wide ? 0 : stride / nf32;
    int64_t gf = wide ? gi0 : gi0 % nf32, gs = wide ? 0 : gi0 / nf32;
    int64_t g0 = (int64_t)blockIdx.x * TEAMS;   /* the block's first group this step: the same for its teams */
    qt_group g = qt_group_at(a, gm, gf, gs, g0 + team < groups, PHASE == QT_CODES);
    qt_chunk c[CACHE];
    qt_load_group<TEAM, CACHE, GROWS>(a, g, t, c);
    uint32_t mt = 0;   /* QT_AMAX: the largest magnitudes over the thread's groups */
    int parity = 0;
    for (;;) {
        g0 += stride;
        gf += step_f;
        gs += step_s + (gf >= nf);
        gf -= gf >= nf ? nf : 0;
        const qt_group gn = qt_group_at(a, gm, gf, gs, g0 + team < groups, PHASE == QT_CODES);
        qt_chunk n[CACHE];
        qt_load_group<TEAM, CACHE, GROWS>(a, gn, t, n);   /* in flight during what follows */
        if (PHASE != QT_CODES) {
            uint32_t m = 0;
#pragma unroll
            for (int j = 0; j < CACHE; j++)
                m = qt_amax2(c[j], m);
            if (GROWS == 1)   /* past the chunks held (ROW's longest rows): read again, from L2 */
                for (int64_t i = t + (int64_t)CACHE * TEAM; i * 8 < g.cols; i += TEAM)
                    m = qt_amax2(qt_load(a, g.r0, g.c0 + i * 8), m);
            if (PHASE == QT_AMAX) {
                mt = __vmaxu2(mt, m);
            } else {
                const uint32_t amax = qt_team_max<TEAM>(qt_amax_bits(m), red[parity]);
                parity ^= 1;
                s = qt_scale(amax, fmax);
                r = tk_qdiv_fits(s) ? tk_qdiv_recip(s) : 0.0f;
                if (t == 0 && g.rows)
                    a.scale[g.si] = s;
            }
        }
        if (PHASE != QT_AMAX)
            qt_codes_any<TEAM, CACHE, GROWS>(a, g, t, c, s, r, e5);
        if (g0 >= groups)   /* that was the block's last step */
            break;
        g = gn;
#pragma unroll
        for (int j = 0; j < CACHE; j++)
            c[j] = n[j];
    }
    if (PHASE == QT_AMAX) {
        const uint32_t amax = qt_team_max<QT_THREADS>(qt_amax_bits(mt), red[parity]);
        if (threadIdx.x == 0)
            atomicMax((unsigned int *)a.scale, 0x80000000u | amax);
    }
}

template <int TEAM, int CACHE, int GROWS, int PHASE>
static cudaError_t qt_launch(const tk_quant_args *a, const qt_geom *g, cudaStream_t stream)
{
    const int64_t teams = QT_THREADS / TEAM, need = (g->ngr * g->ngc + teams - 1) / teams;
    const int64_t cap = (int64_t)a->sm_count * qt_min_blocks(CACHE);
    qt_kernel<TEAM, CACHE, GROWS, PHASE><<<(unsigned)(need < cap ? need : cap), QT_THREADS, 0, stream>>>(*a, *g);
    return cudaGetLastError();
}

extern "C" tk_status tk_launch_quantize_fp8(const tk_quant_args *a, cudaStream_t stream, char *why, size_t len)
{
    const int64_t rb = (a->rows + 127) / 128, cb = (a->cols + 127) / 128;
    cudaError_t e = cudaSuccess;
    switch (a->mode) {
    case TK_QUANT_1X128: {
        const qt_geom g = { 1, 128, a->rows, cb, 1 };
        e = qt_launch<4, 4, 1, QT_GROUPS>(a, &g, stream);
        break;
    }
    case TK_QUANT_ROW: {
        const qt_geom g = { 1, a->cols, a->rows, 1, 1 };
        e = a->cols <= QT_ROW_WARP_COLS    ? qt_launch<32, 4, 1, QT_GROUPS>(a, &g, stream)
            : a->cols <= QT_ROW_HALF_COLS  ? qt_launch<128, 4, 1, QT_GROUPS>(a, &g, stream)
            : a->cols <= QT_ROW_BLOCK_COLS ? qt_launch<256, 4, 1, QT_GROUPS>(a, &g, stream)
                                           : qt_launch<256, 8, 1, QT_GROUPS>(a, &g, stream);
        break;
    }
    case TK_QUANT_128X128: {
        const qt_geom g = { 128, 128, rb, cb, 1 };
        e = qt_launch<256, 8, 128, QT_GROUPS>(a, &g, stream);
        break;
    }
    case TK_QUANT_TENSOR: {
        const qt_geom g = { 1, 128, a->rows, cb, 1 };
        e = cudaMemsetAsync(a->scale, 0, sizeof(float), stream);
        if (e == cudaSuccess)
            e = qt_launch<4, 4, 1, QT_AMAX>(a, &g, stream);
        if (e == cudaSuccess)
            e = qt_launch<4, 4, 1, QT_CODES>(a, &g, stream);
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
