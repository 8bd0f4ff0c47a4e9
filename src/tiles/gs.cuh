/* gs.cuh - global -> shared tile loads by a group of threads (the seeds'
 * load / G::load), synchronous or with cp.async, and the two halves of a
 * load split through registers (global -> register now, register -> shared
 * later) for kernels that overlap the global latency with compute.
 *
 *   tk_load_g2s(view, gl, trow, tcol, tid, nthreads)
 *   tk_load_g2s_async(view, gl, trow, tcol, tid, nthreads)  + tk_cp_async_commit/wait
 *   tk_load_g2r(buf, view, gl, trow, tcol, tid, nthreads)
 *   tk_store_r2s(view, buf, tid, nthreads)
 *
 * The view's shape R x C is the tile unit: the tile loaded is rows
 * trow*R .. +R-1, columns tcol*C .. +C-1 of gl. The group is nthreads
 * threads (one warp: 32; N warps: 32*N; a compile-time constant), tid the
 * caller's index in it. Chunk c of the tile goes to thread c % nthreads, so
 * consecutive lanes read consecutive 16 bytes of a row: coalesced.
 * Edges: elements outside gl are written as zero (layout.h tk_chunk_valid).
 * Alignment contract: gl.p 16-byte aligned and gl.ld % 8 == 0 (the
 * kernels' supports() refuse anything else), so every chunk that starts
 * inside gl is a whole aligned 16-byte vector or a tail of the row.
 */
#ifndef TK_TILES_GS_CUH
#define TK_TILES_GS_CUH

#include "types.cuh"
#include "ptx/common.cuh"
#include "ptx/cp_async.cuh"

/* The chunk at global (grow, gcol) with `valid` leading elements in bounds,
 * the rest zero. */
static __device__ __forceinline__ uint4 tk_gload_chunk(const tk_gl *g, int64_t grow, int64_t gcol, int valid)
{
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (valid == TK_CHUNK_ELEMS) {
        v = *(const uint4 *)(g->p + grow * g->ld + gcol);
    } else if (valid > 0) {
        const uint16_t *src = g->p + grow * g->ld + gcol;
        uint32_t w[4] = { 0u, 0u, 0u, 0u };
#pragma unroll
        for (int e = 0; e < TK_CHUNK_ELEMS; e++)
            if (e < valid)
                w[e / 2] |= (uint32_t)src[e] << (16 * (e % 2));
        v = make_uint4(w[0], w[1], w[2], w[3]);
    }
    return v;
}

/* Global row/column of chunk c of an R x C tile whose element (0, 0) is
 * global (r0, c0). */
#define TK_CHUNK_GROW_(r0, c, C) ((r0) + tk_chunk_row(c, C))
#define TK_CHUNK_GCOL_(c0, c, C) ((c0) + tk_chunk_col(c, C))

static __device__ __forceinline__ void tk_g2s_frags(uint16_t *dst, int pitch, int R, int C, tk_gl g, int64_t r0,
                                                    int64_t c0, int tid, int nthreads)
{
    const int total = R * C / TK_CHUNK_ELEMS;
    /* Interior tiles (all but the last row and column of blocks) skip the
     * per-chunk predicate. */
    const bool inside = r0 + R <= g.rows && c0 + C <= g.cols;
#pragma unroll
    for (int it = 0; it < TK_CHUNKS_PER_THREAD(R, C, nthreads); it++) {
        const int c = it * nthreads + tid;
        if (total % nthreads == 0 || c < total) {
            int64_t grow = TK_CHUNK_GROW_(r0, c, C), gcol = TK_CHUNK_GCOL_(c0, c, C);
            int valid = inside ? TK_CHUNK_ELEMS : tk_chunk_valid(grow, gcol, g.rows, g.cols);
            *(uint4 *)(dst + tk_st_offset(tk_chunk_row(c, C), tk_chunk_col(c, C), pitch)) =
                tk_gload_chunk(&g, grow, gcol, valid);
        }
    }
}

/* cp.async form: the copies are only issued; the caller commits them as a
 * group and waits (tk_cp_async_commit, tk_cp_async_wait) and then needs a
 * barrier before other threads read the tile. src_bytes < 16 zero-fills
 * the rest of the chunk, src_bytes == 0 reads nothing (the base pointer is
 * passed so the address is still valid). */
static __device__ __forceinline__ void tk_g2s_async_frags(uint16_t *dst, int pitch, int R, int C, tk_gl g,
                                                          int64_t r0, int64_t c0, int tid, int nthreads)
{
    const int total = R * C / TK_CHUNK_ELEMS;
    const bool inside = r0 + R <= g.rows && c0 + C <= g.cols;
    const uint32_t base = tk_smem_u32(dst);
#pragma unroll
    for (int it = 0; it < TK_CHUNKS_PER_THREAD(R, C, nthreads); it++) {
        const int c = it * nthreads + tid;
        if (total % nthreads == 0 || c < total) {
            int64_t grow = TK_CHUNK_GROW_(r0, c, C), gcol = TK_CHUNK_GCOL_(c0, c, C);
            int valid = inside ? TK_CHUNK_ELEMS : tk_chunk_valid(grow, gcol, g.rows, g.cols);
            const uint16_t *src = valid ? g.p + grow * g.ld + gcol : g.p;
            tk_cp_async_16(base + 2u * (uint32_t)tk_st_offset(tk_chunk_row(c, C), tk_chunk_col(c, C), pitch), src,
                           2u * (uint32_t)valid);
        }
    }
}

/* The global half of a load split through registers: this thread's chunks
 * into buf (TK_CHUNKS_PER_THREAD entries). */
static __device__ __forceinline__ void tk_g2r_frags(uint4 *buf, int R, int C, tk_gl g, int64_t r0, int64_t c0,
                                                    int tid, int nthreads)
{
    const int total = R * C / TK_CHUNK_ELEMS;
    const bool inside = r0 + R <= g.rows && c0 + C <= g.cols;
#pragma unroll
    for (int it = 0; it < TK_CHUNKS_PER_THREAD(R, C, nthreads); it++) {
        const int c = it * nthreads + tid;
        if (total % nthreads == 0 || c < total) {
            int64_t grow = TK_CHUNK_GROW_(r0, c, C), gcol = TK_CHUNK_GCOL_(c0, c, C);
            int valid = inside ? TK_CHUNK_ELEMS : tk_chunk_valid(grow, gcol, g.rows, g.cols);
            buf[it] = tk_gload_chunk(&g, grow, gcol, valid);
        }
    }
}

/* The shared half: buf (from tk_g2r_frags with the same shape and group)
 * into the tile. */
static __device__ __forceinline__ void tk_r2s_frags(uint16_t *dst, int pitch, int R, int C, const uint4 *buf,
                                                    int tid, int nthreads)
{
    const int total = R * C / TK_CHUNK_ELEMS;
#pragma unroll
    for (int it = 0; it < TK_CHUNKS_PER_THREAD(R, C, nthreads); it++) {
        const int c = it * nthreads + tid;
        if (total % nthreads == 0 || c < total)
            *(uint4 *)(dst + tk_st_offset(tk_chunk_row(c, C), tk_chunk_col(c, C), pitch)) = buf[it];
    }
}

#define TK_G2S_CHECK_(st, R, C, nthreads)                                                       \
    TK_VIEW_CHECK_(st, R, C);                                                                   \
    static_assert((nthreads) % TK_WARP_THREADS == 0, "a load group is made of whole warps")

#define TK_LOAD_G2S_(fn, st, R, C, i, j, gl, trow, tcol, tid, nthreads)                                          \
    do {                                                                                                         \
        TK_G2S_CHECK_(st, R, C, nthreads);                                                                       \
        fn(TK_VIEW_PTR_(st, R, C, i, j), TK_ST_PITCH(st), R, C, gl, (int64_t)(trow) * (R), (int64_t)(tcol) * (C), \
           tid, nthreads);                                                                                       \
    } while (0)
#define tk_load_g2s(view, gl, trow, tcol, tid, nthreads) \
    TK_LOAD_G2S_(tk_g2s_frags, view, gl, trow, tcol, tid, nthreads)
#define tk_load_g2s_async(view, gl, trow, tcol, tid, nthreads) \
    TK_LOAD_G2S_(tk_g2s_async_frags, view, gl, trow, tcol, tid, nthreads)

#define TK_BUF_CHECK_(buf, R, C, nthreads)                                                                  \
    static_assert(sizeof(buf) == sizeof(uint4) * TK_CHUNKS_PER_THREAD(R, C, nthreads),                      \
                  "register staging buffer must hold TK_CHUNKS_PER_THREAD(R, C, nthreads) 16-byte chunks")

#define TK_LOAD_G2R_(buf, st, R, C, i, j, gl, trow, tcol, tid, nthreads)                                    \
    do {                                                                                                    \
        TK_G2S_CHECK_(st, R, C, nthreads);                                                                  \
        TK_BUF_CHECK_(buf, R, C, nthreads);                                                                 \
        tk_g2r_frags(buf, R, C, gl, (int64_t)(trow) * (R), (int64_t)(tcol) * (C), tid, nthreads);            \
    } while (0)
/* The view only names the shape (and later the destination of tk_store_r2s). */
#define tk_load_g2r(buf, view, gl, trow, tcol, tid, nthreads) TK_LOAD_G2R_(buf, view, gl, trow, tcol, tid, nthreads)

#define TK_STORE_R2S_(st, R, C, i, j, buf, tid, nthreads)                                                   \
    do {                                                                                                    \
        TK_G2S_CHECK_(st, R, C, nthreads);                                                                  \
        TK_BUF_CHECK_(buf, R, C, nthreads);                                                                 \
        tk_r2s_frags(TK_VIEW_PTR_(st, R, C, i, j), TK_ST_PITCH(st), R, C, buf, tid, nthreads);              \
    } while (0)
#define tk_store_r2s(view, buf, tid, nthreads) TK_STORE_R2S_(view, buf, tid, nthreads)

#endif /* TK_TILES_GS_CUH */
