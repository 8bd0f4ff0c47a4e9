/* tiles_test - the tile primitives on the GPU, each against the host model
 * of src/tiles/layout.h, and the seed kernels k02..k13 end to end.
 *
 *   gpucu_tiles_test [name-substring]
 *
 * Primitive tests: fragment ownership of ldmatrix / ldmatrix.trans / mma
 * (every lane's registers dumped and compared with tk_frag_*), sub-tile
 * offsets, swap_layout both ways, register -> shared stores, global ->
 * shared loads (sync, cp.async, through registers; one warp and a group of
 * warps) at matrix edges with zero fill, mma_AB / mma_ABt with the bounded
 * alpha/beta epilogue, warp ids and named barriers.
 * Kernel tests: every seed kernel through tk_gemm_ex against a host
 * reference at edge shapes (M, N, K not multiples of any tile, K below one
 * K-step, 1 x 1 x 1), fp32 and bf16 C, beta 0 (C poisoned with NaN) and
 * 0.5, the B layout each kernel supports. Inputs are small integers / 4, so
 * every fp32 sum is exact and results must match bit for bit (bf16 C after
 * the same round-to-nearest-even); C's padding columns hold a sentinel that
 * must survive (no writes outside M x N).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <cuda_runtime.h>
#include "tilekit.h"
#include "tiles/tiles.cuh"
extern "C" {
#include "../host/check.h"
}

/* ---------------- host helpers ---------------- */

static int gpu_ok(void)
{
    static int state = -1;
    if (state < 0) {
        int n = 0;
        state = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
        cudaGetLastError();
    }
    CHECK(state, "no CUDA device");
    return state;
}

#define CUDA_OK(call)                                                              \
    do {                                                                           \
        cudaError_t e_ = (call);                                                   \
        CHECK(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));         \
    } while (0)

static uint16_t h_f2bf(float f)   /* round to nearest even, as __float2bfloat16_rn */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float h_bf2f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t h_rand(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(*s >> 33);
}

/* ---------------- fragment ownership: ldmatrix and ldmatrix.trans ---------------- */

typedef struct { TK_ST_BF(s, 16, 16); } frag_smem;

/* A 16x16 tile with element (r, c) = 16r + c (exact in bf16 up to 255)
 * loaded as a row tile and as a column tile; each lane dumps its values. */
static __global__ void frag_kernel(const uint16_t *src, uint16_t *out_a, uint16_t *out_b)
{
    __shared__ frag_smem sm;
    tk_gl g = tk_gl_make(src, 16, 16, 16);
    tk_load_g2s(TK_TILE(sm.s), g, 0, 0, tk_laneid(), 32);
    __syncwarp();
    TK_RT_BF(a, 16, 16);
    TK_RT_BF_COL(b, 16, 16);
    tk_load_rt(a, TK_TILE(sm.s));
    tk_load_rt_col(b, TK_TILE(sm.s));
    const int lane = tk_laneid();
    for (int r = 0; r < 4; r++)
        for (int h = 0; h < 2; h++)
            out_a[lane * 8 + r * 2 + h] = (uint16_t)(a[0][0].x[r] >> (16 * h));
    for (int nb = 0; nb < 2; nb++)
        for (int r = 0; r < 2; r++)
            for (int h = 0; h < 2; h++)
                out_b[lane * 8 + nb * 4 + r * 2 + h] = (uint16_t)(b[0][nb].x[r] >> (16 * h));
}

static void test_fragment_ownership(void)
{
    if (!gpu_ok())
        return;
    uint16_t h[256], ha[256], hb[256];
    for (int i = 0; i < 256; i++)
        h[i] = h_f2bf((float)i);
    uint16_t *d, *da, *db;
    CUDA_OK(cudaMalloc(&d, 512));
    CUDA_OK(cudaMalloc(&da, 512));
    CUDA_OK(cudaMalloc(&db, 512));
    CUDA_OK(cudaMemcpy(d, h, 512, cudaMemcpyHostToDevice));
    frag_kernel<<<1, 32>>>(d, da, db);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(ha, da, 512, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hb, db, 512, cudaMemcpyDeviceToHost));
    for (int lane = 0; lane < 32; lane++) {
        for (int r = 0; r < 4; r++)
            for (int hf = 0; hf < 2; hf++) {
                float want = (float)(16 * tk_frag_a_row(lane, r) + tk_frag_a_col(lane, r, hf));
                float got = h_bf2f(ha[lane * 8 + r * 2 + hf]);
                CHECK(got == want, "row tile: lane %d reg %d half %d holds %g, model says %g", lane, r, hf, got, want);
            }
        for (int nb = 0; nb < 2; nb++)
            for (int r = 0; r < 2; r++)
                for (int hf = 0; hf < 2; hf++) {
                    float want = (float)(16 * tk_frag_b_k(lane, r, hf) + 8 * nb + tk_frag_b_n(lane));
                    float got = h_bf2f(hb[lane * 8 + nb * 4 + r * 2 + hf]);
                    CHECK(got == want, "col tile: lane %d n-block %d reg %d half %d holds %g, model says %g", lane, nb,
                          r, hf, got, want);
                }
    }
    cudaFree(d);
    cudaFree(da);
    cudaFree(db);
}

/* ---------------- sub-tiles ---------------- */

typedef struct { TK_ST_BF(s, 64, 64); } sub_smem;

/* Element (r, c) of the 64x64 tile = (64r + c) % 251. Loads sub-tile
 * (ai, aj) of 16x32 as a row tile and (bi, bj) of 32x16 as a column tile. */
static __global__ void subtile_kernel(const uint16_t *src, int ai, int aj, int bi, int bj, uint16_t *out_a,
                                      uint16_t *out_b)
{
    __shared__ sub_smem sm;
    tk_gl g = tk_gl_make(src, 64, 64, 64);
    tk_load_g2s(TK_TILE(sm.s), g, 0, 0, tk_laneid(), 32);
    __syncwarp();
    TK_RT_BF(a, 16, 32);
    TK_RT_BF_COL(b, 32, 16);
    tk_load_rt(a, TK_SUBTILE(sm.s, 16, 32, ai, aj));
    tk_load_rt_col(b, TK_SUBTILE(sm.s, 32, 16, bi, bj));
    const int lane = tk_laneid();
    for (int cb = 0; cb < 2; cb++)
        for (int r = 0; r < 4; r++)
            for (int h = 0; h < 2; h++)
                out_a[lane * 16 + cb * 8 + r * 2 + h] = (uint16_t)(a[0][cb].x[r] >> (16 * h));
    for (int kb = 0; kb < 2; kb++)
        for (int nb = 0; nb < 2; nb++)
            for (int r = 0; r < 2; r++)
                for (int h = 0; h < 2; h++)
                    out_b[lane * 16 + kb * 8 + nb * 4 + r * 2 + h] = (uint16_t)(b[kb][nb].x[r] >> (16 * h));
}

static void test_subtile_views(void)
{
    if (!gpu_ok())
        return;
    static uint16_t h[64 * 64], ha[512], hb[512];
    for (int i = 0; i < 64 * 64; i++)
        h[i] = h_f2bf((float)(i % 251));
    uint16_t *d, *da, *db;
    CUDA_OK(cudaMalloc(&d, sizeof h));
    CUDA_OK(cudaMalloc(&da, 1024));
    CUDA_OK(cudaMalloc(&db, 1024));
    CUDA_OK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    /* (ai, aj) in 4 x 2 sub-tiles of 16x32, (bi, bj) in 2 x 4 of 32x16 */
    const int coords[][4] = { { 0, 0, 0, 0 }, { 1, 1, 1, 1 }, { 3, 0, 0, 3 }, { 2, 1, 1, 2 } };
    for (int t = 0; t < 4; t++) {
        int ai = coords[t][0], aj = coords[t][1], bi = coords[t][2], bj = coords[t][3];
        subtile_kernel<<<1, 32>>>(d, ai, aj, bi, bj, da, db);
        CUDA_OK(cudaDeviceSynchronize());
        CUDA_OK(cudaMemcpy(ha, da, 1024, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(hb, db, 1024, cudaMemcpyDeviceToHost));
        int bad = 0;
        for (int lane = 0; lane < 32; lane++) {
            for (int cb = 0; cb < 2; cb++)
                for (int r = 0; r < 4; r++)
                    for (int hf = 0; hf < 2; hf++) {
                        int row = 16 * ai + tk_frag_a_row(lane, r), col = 32 * aj + 16 * cb + tk_frag_a_col(lane, r, hf);
                        float want = (float)((64 * row + col) % 251);
                        if (h_bf2f(ha[lane * 16 + cb * 8 + r * 2 + hf]) != want)
                            bad++;
                    }
            for (int kb = 0; kb < 2; kb++)
                for (int nb = 0; nb < 2; nb++)
                    for (int r = 0; r < 2; r++)
                        for (int hf = 0; hf < 2; hf++) {
                            int row = 32 * bi + 16 * kb + tk_frag_b_k(lane, r, hf);
                            int col = 16 * bj + 8 * nb + tk_frag_b_n(lane);
                            float want = (float)((64 * row + col) % 251);
                            if (h_bf2f(hb[lane * 16 + kb * 8 + nb * 4 + r * 2 + hf]) != want)
                                bad++;
                        }
        }
        CHECK(bad == 0, "sub-tiles (%d, %d) / (%d, %d): %d values differ from the model", ai, aj, bi, bj, bad);
    }
    cudaFree(d);
    cudaFree(da);
    cudaFree(db);
}

/* ---------------- swap_layout, register -> shared ---------------- */

typedef struct {
    TK_ST_BF(s, 32, 32);
    TK_ST_BF(t, 32, 32);
} swap_smem;

/* out[0]: row -> col swap differs from ldmatrix.trans; out[1]: col -> row
 * differs from ldmatrix; out[2]: tk_store_rt round trip differs. */
static __global__ void swap_kernel(const uint16_t *src, int *out)
{
    __shared__ swap_smem sm;
    tk_gl g = tk_gl_make(src, 32, 32, 32);
    tk_load_g2s(TK_TILE(sm.s), g, 0, 0, tk_laneid(), 32);
    __syncwarp();
    TK_RT_BF(row, 32, 32);
    TK_RT_BF_COL(col, 32, 32);
    TK_RT_BF_COL(col2, 32, 32);
    TK_RT_BF(row2, 32, 32);
    tk_load_rt(row, TK_TILE(sm.s));
    tk_load_rt_col(col, TK_TILE(sm.s));
    tk_swap_layout_to_col(col2, row);
    tk_swap_layout_to_row(row2, col);
    int bad_col = 0, bad_row = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int r = 0; r < 2; r++)
                bad_col += col2[i][j].x[r] != col[i][j].x[r];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int r = 0; r < 4; r++)
                bad_row += row2[i][j].x[r] != row[i][j].x[r];
    tk_store_rt(TK_TILE(sm.t), row2);
    __syncwarp();
    int bad_store = 0;
    for (int e = tk_laneid(); e < 32 * 32; e += 32)
        bad_store += sm.t[e / 32][e % 32] != sm.s[e / 32][e % 32];
    atomicAdd(&out[0], bad_col);
    atomicAdd(&out[1], bad_row);
    atomicAdd(&out[2], bad_store);
}

static void test_swap_layout_and_store(void)
{
    if (!gpu_ok())
        return;
    static uint16_t h[32 * 32];
    uint64_t seed = 7;
    for (int i = 0; i < 32 * 32; i++)
        h[i] = (uint16_t)(h_rand(&seed) & 0x7f7f);   /* arbitrary finite bit patterns */
    uint16_t *d;
    int *dout, hout[3];
    CUDA_OK(cudaMalloc(&d, sizeof h));
    CUDA_OK(cudaMalloc(&dout, sizeof hout));
    CUDA_OK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dout, 0, sizeof hout));
    swap_kernel<<<1, 32>>>(d, dout);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost));
    CHECK(hout[0] == 0, "swap_layout row -> col: %d registers differ from ldmatrix.trans", hout[0]);
    CHECK(hout[1] == 0, "swap_layout col -> row: %d registers differ from ldmatrix", hout[1]);
    CHECK(hout[2] == 0, "store_rt: %d elements differ after register -> shared", hout[2]);
    cudaFree(d);
    cudaFree(dout);
}

/* ---------------- global -> shared at the edges ---------------- */

typedef struct { TK_ST_BF(s, 32, 64); } g2s_smem;

/* Loads the 32x64 tile (trow, tcol) of a rows x cols matrix (ld 72) with
 * `method` (0 sync, 1 cp.async, 2 through registers) by the block's
 * nthreads threads, then dumps the tile (without padding) to out. */
template <int NT>   /* the group size must be a compile-time constant for the unrolled chunk loop */
static __global__ void g2s_kernel(const uint16_t *src, int rows, int cols, int trow, int tcol, int method,
                                  uint16_t *out)
{
    __shared__ g2s_smem sm;
    for (int e = threadIdx.x; e < 32 * 72; e += NT)
        (&sm.s[0][0])[e] = 0xdead;   /* poison: every element must be overwritten */
    __syncthreads();
    tk_gl g = tk_gl_make(src, rows, cols, 72);
    const int tid = threadIdx.x;
    if (method == 0) {
        tk_load_g2s(TK_TILE(sm.s), g, trow, tcol, tid, NT);
    } else if (method == 1) {
        tk_load_g2s_async(TK_TILE(sm.s), g, trow, tcol, tid, NT);
        tk_cp_async_commit();
        tk_cp_async_wait(0);
    } else {
        uint4 buf[TK_CHUNKS_PER_THREAD(32, 64, NT)];
        tk_load_g2r(buf, TK_TILE(sm.s), g, trow, tcol, tid, NT);
        tk_store_r2s(TK_TILE(sm.s), buf, tid, NT);
    }
    __syncthreads();
    for (int e = threadIdx.x; e < 32 * 64; e += NT)
        out[e] = sm.s[e / 64][e % 64];
}

static void test_g2s_edges(void)
{
    if (!gpu_ok())
        return;
    const int rows = 37, cols = 43, ld = 72;
    static uint16_t h[48 * 72], hout[32 * 64];
    for (int r = 0; r < 48; r++)
        for (int c = 0; c < ld; c++)
            h[r * ld + c] = h_f2bf((float)(1 + (r * 43 + c) % 200));   /* nonzero, also beyond the matrix */
    uint16_t *d, *dout;
    CUDA_OK(cudaMalloc(&d, sizeof h));
    CUDA_OK(cudaMalloc(&dout, sizeof hout));
    CUDA_OK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
    const int tiles[][2] = { { 0, 0 }, { 1, 0 }, { 0, 1 }, { 1, 1 }, { 2, 0 } };
    for (int method = 0; method < 3; method++)
        for (int nt = 32; nt <= 64; nt += 32)
            for (int t = 0; t < 5; t++) {
                int tr = tiles[t][0], tc = tiles[t][1];
                if (nt == 32)
                    g2s_kernel<32><<<1, 32>>>(d, rows, cols, tr, tc, method, dout);
                else
                    g2s_kernel<64><<<1, 64>>>(d, rows, cols, tr, tc, method, dout);
                CUDA_OK(cudaDeviceSynchronize());
                CUDA_OK(cudaMemcpy(hout, dout, sizeof hout, cudaMemcpyDeviceToHost));
                int bad = 0, first = -1;
                for (int r = 0; r < 32; r++)
                    for (int c = 0; c < 64; c++) {
                        int gr = 32 * tr + r, gc = 64 * tc + c;
                        uint16_t want = gr < rows && gc < cols ? h[gr * ld + gc] : 0;
                        if (hout[r * 64 + c] != want) {
                            bad++;
                            if (first < 0)
                                first = r * 64 + c;
                        }
                    }
                CHECK(bad == 0, "method %d, %d threads, tile (%d, %d): %d elements wrong, first at (%d, %d)", method, nt,
                      tr, tc, bad, first / 64, first % 64);
            }
    cudaFree(d);
    cudaFree(dout);
}

/* ---------------- mma_AB / mma_ABt + the epilogue ---------------- */

typedef struct {
    TK_ST_BF(a, 32, 32);
    TK_ST_BF(b, 32, 32);
} mma_smem;

/* C (m x n, ld ldc) = alpha * A(32x32) * op(B) + beta * C for the 32x32
 * output tile (0, 0), 1 warp; transb: B stored N x K (mma_ABt). */
static __global__ void mma_kernel(const uint16_t *a, const uint16_t *b, int transb, int m, int n, void *c, int ldc,
                                  tk_dtype ct, float alpha, float beta, uint16_t *shared_out)
{
    __shared__ mma_smem sm;
    const int lane = tk_laneid();
    tk_gl ga = tk_gl_make(a, m, 32, 32), gb = tk_gl_make(b, transb ? n : 32, transb ? 32 : n, 32);
    tk_load_g2s(TK_TILE(sm.a), ga, 0, 0, lane, 32);
    tk_load_g2s(TK_TILE(sm.b), gb, 0, 0, lane, 32);
    __syncwarp();
    TK_RT_FL(acc, 32, 32);
    tk_zero(acc);
    TK_RT_BF(ra, 32, 16);
    for (int kk = 0; kk < 2; kk++) {   /* two K slices of 16 exercise accumulation */
        tk_load_rt(ra, TK_SUBTILE(sm.a, 32, 16, 0, kk));
        if (transb) {
            TK_RT_BF(rb, 32, 16);
            tk_load_rt(rb, TK_SUBTILE(sm.b, 32, 16, 0, kk));
            tk_mma_ABt(acc, ra, rb, acc);
        } else {
            TK_RT_BF_COL(rb, 16, 32);
            tk_load_rt_col(rb, TK_SUBTILE(sm.b, 16, 32, kk, 0));
            tk_mma_AB(acc, ra, rb, acc);
        }
    }
    tk_store_g(tk_gl_out_make(c, m, n, ldc, ct), acc, 0, 0, alpha, beta);
    __syncwarp();
    tk_store_rt_fl(TK_TILE(sm.a), acc);   /* fp32 -> bf16 register -> shared */
    __syncwarp();
    for (int e = lane; e < 32 * 32; e += 32)
        shared_out[e] = sm.a[e / 32][e % 32];
}

static void test_mma_and_epilogue(void)
{
    if (!gpu_ok())
        return;
    static uint16_t ha[32 * 32], hb[32 * 32], hs[32 * 32];
    static float ref[32 * 32];
    uint64_t seed = 11;
    for (int i = 0; i < 32 * 32; i++) {
        ha[i] = h_f2bf((float)((int)(h_rand(&seed) % 9) - 4) * 0.25f);
        hb[i] = h_f2bf((float)((int)(h_rand(&seed) % 9) - 4) * 0.25f);
    }
    uint16_t *da, *db, *ds;
    void *dc;
    CUDA_OK(cudaMalloc(&da, sizeof ha));
    CUDA_OK(cudaMalloc(&db, sizeof hb));
    CUDA_OK(cudaMalloc(&ds, sizeof hs));
    CUDA_OK(cudaMalloc(&dc, 33 * 36 * 4));
    CUDA_OK(cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice));
    const int shapes[][3] = { { 32, 32, 36 }, { 30, 27, 35 }, { 17, 9, 9 } };   /* m, n, ldc */
    for (int s = 0; s < 3; s++)
        for (int transb = 0; transb < 2; transb++)
            for (int ct = 0; ct < 2; ct++)
                for (int bi = 0; bi < 2; bi++) {
                    int m = shapes[s][0], n = shapes[s][1], lc = shapes[s][2];
                    float alpha = bi ? -0.5f : 1.0f, beta = bi ? 0.5f : 0.0f;
                    size_t es = ct == TK_F32 ? 4 : 2;
                    static unsigned char hc[33 * 36 * 4], hc0[33 * 36 * 4];
                    for (int i = 0; i < 33 * lc; i++) {
                        float v = bi ? (float)(i % 7 - 3) : NAN;
                        if (ct == TK_F32)
                            memcpy(hc0 + 4 * i, &v, 4);
                        else {
                            uint16_t bv = h_f2bf(v);
                            memcpy(hc0 + 2 * i, &bv, 2);
                        }
                    }
                    CUDA_OK(cudaMemcpy(dc, hc0, 33 * lc * es, cudaMemcpyHostToDevice));
                    mma_kernel<<<1, 32>>>(da, db, transb, m, n, dc, lc, (tk_dtype)ct, alpha, beta, ds);
                    CUDA_OK(cudaDeviceSynchronize());
                    CUDA_OK(cudaMemcpy(hc, dc, 33 * lc * es, cudaMemcpyDeviceToHost));
                    CUDA_OK(cudaMemcpy(hs, ds, sizeof hs, cudaMemcpyDeviceToHost));
                    int bad = 0, bad_sh = 0;
                    for (int i = 0; i < 32; i++)
                        for (int j = 0; j < 32; j++) {
                            double acc = 0;
                            for (int k = 0; k < 32; k++) {
                                /* rows >= m of A and columns >= n of B were loaded as zero */
                                double av = i < m ? h_bf2f(ha[i * 32 + k]) : 0;
                                double bv = j < n ? h_bf2f(transb ? hb[j * 32 + k] : hb[k * 32 + j]) : 0;
                                acc += av * bv;
                            }
                            ref[i * 32 + j] = (float)acc;
                            bad_sh += hs[i * 32 + j] != h_f2bf((float)acc);
                        }
                    for (int i = 0; i < 33; i++)
                        for (int j = 0; j < lc; j++) {
                            int idx = i * lc + j;
                            float old, got;
                            if (ct == TK_F32) {
                                memcpy(&old, hc0 + 4 * idx, 4);
                                memcpy(&got, hc + 4 * idx, 4);
                            } else {
                                uint16_t o16, g16;
                                memcpy(&o16, hc0 + 2 * idx, 2);
                                memcpy(&g16, hc + 2 * idx, 2);
                                old = h_bf2f(o16);
                                got = h_bf2f(g16);
                            }
                            int inside = i < m && j < n;
                            float want = old;
                            if (inside) {
                                want = alpha * ref[i * 32 + j];
                                if (beta != 0.0f)
                                    want += beta * old;
                                if (ct == TK_BF16)
                                    want = h_bf2f(h_f2bf(want));
                            }
                            int same = (isnan(want) && isnan(got)) || want == got;
                            bad += !same;
                        }
                    CHECK(bad == 0, "m %d n %d ldc %d %s %s alpha %g beta %g: %d C elements wrong", m, n, lc,
                          transb ? "ABt" : "AB", ct == TK_F32 ? "fp32" : "bf16", alpha, beta, bad);
                    CHECK(bad_sh == 0, "store_rt_fl: %d shared elements wrong (%s)", bad_sh, transb ? "ABt" : "AB");
                }
    cudaFree(da);
    cudaFree(db);
    cudaFree(ds);
    cudaFree(dc);
}

/* ---------------- ids and named barriers ---------------- */

/* 8 warps: warps 0-3 write a value, sync among themselves on barrier 1,
 * and read each other's; warps 4-7 do the same on barrier 2. */
static __global__ void ids_kernel(int *ids, int *bad)
{
    __shared__ int vals[256];
    const int w = tk_warpid();
    ids[threadIdx.x * 3 + 0] = tk_laneid();
    ids[threadIdx.x * 3 + 1] = w;
    ids[threadIdx.x * 3 + 2] = tk_warpgroupid();
    vals[threadIdx.x] = (int)threadIdx.x * 3 + 1;
    tk_sync_warps(1 + tk_warpgroupid(), 4);
    int partner = (threadIdx.x + 32) % 128 + 128 * tk_warpgroupid();
    if (vals[partner] != partner * 3 + 1)
        atomicAdd(bad, 1);
}

static void test_ids_and_barriers(void)
{
    if (!gpu_ok())
        return;
    int *d, *dbad, h[256 * 3], hbad = 0;
    CUDA_OK(cudaMalloc(&d, sizeof h));
    CUDA_OK(cudaMalloc(&dbad, sizeof(int)));
    CUDA_OK(cudaMemset(dbad, 0, sizeof(int)));
    ids_kernel<<<1, 256>>>(d, dbad);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&hbad, dbad, sizeof(int), cudaMemcpyDeviceToHost));
    for (int t = 0; t < 256; t++)
        CHECK(h[3 * t] == t % 32 && h[3 * t + 1] == t / 32 && h[3 * t + 2] == t / 128,
              "thread %d: lane %d warp %d warpgroup %d", t, h[3 * t], h[3 * t + 1], h[3 * t + 2]);
    CHECK(hbad == 0, "named barriers: %d threads read a value their group had not written", hbad);
    cudaFree(d);
    cudaFree(dbad);
}

/* ---------------- the seed kernels end to end ---------------- */

static tk_handle g_h;

typedef struct gemm_case { int m, n, k; } gemm_case;

/* A, B: integers -4..4 / 4 (bf16-exact; sums of up to a few thousand
 * products of multiples of 1/16 stay exact in fp32); C: NaN (beta 0) or
 * integers / 4. Returns the number of wrong elements of C (incl. padding). */
static int run_gemm_case(const char *kernel, gemm_case gc, tk_op op_b, tk_dtype ct, float alpha, float beta,
                         int ldc_pad, char *msg, size_t msg_len)
{
    const int m = gc.m, n = gc.n, k = gc.k;
    const int lda = (k + 7) / 8 * 8 + 8;
    const int bcols = op_b == TK_OP_N ? n : k, brows = op_b == TK_OP_N ? k : n;
    const int ldb = (bcols + 7) / 8 * 8 + 8;
    const int ldc = n + ldc_pad;
    const size_t es = ct == TK_F32 ? 4 : 2;
    uint16_t *ha = (uint16_t *)malloc((size_t)m * lda * 2), *hb = (uint16_t *)malloc((size_t)brows * ldb * 2);
    unsigned char *hc0 = (unsigned char *)malloc((size_t)m * ldc * es), *hc = (unsigned char *)malloc((size_t)m * ldc * es);
    uint64_t seed = (uint64_t)m * 1000003u + (uint64_t)n * 1009u + (uint64_t)k;
    for (size_t i = 0; i < (size_t)m * lda; i++)
        ha[i] = h_f2bf((float)((int)(h_rand(&seed) % 9) - 4) * 0.25f);
    for (size_t i = 0; i < (size_t)brows * ldb; i++)
        hb[i] = h_f2bf((float)((int)(h_rand(&seed) % 9) - 4) * 0.25f);
    for (size_t i = 0; i < (size_t)m * ldc; i++) {
        /* padding columns of C hold a sentinel whatever beta is */
        int pad = (int)(i % ldc) >= n;
        float v = pad ? 12345.0f : (beta == 0.0f ? NAN : (float)((int)(i % 7) - 3) * 0.25f);
        if (ct == TK_F32)
            memcpy(hc0 + 4 * i, &v, 4);
        else {
            uint16_t b16 = h_f2bf(v);
            memcpy(hc0 + 2 * i, &b16, 2);
        }
    }
    void *da = NULL, *db = NULL, *dc = NULL;
    int bad = -1;
    if (cudaMalloc(&da, (size_t)m * lda * 2) || cudaMalloc(&db, (size_t)brows * ldb * 2) ||
        cudaMalloc(&dc, (size_t)m * ldc * es)) {
        snprintf(msg, msg_len, "cudaMalloc failed");
        goto done;
    }
    cudaMemcpy(da, ha, (size_t)m * lda * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(db, hb, (size_t)brows * ldb * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dc, hc0, (size_t)m * ldc * es, cudaMemcpyHostToDevice);
    {
        tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, op_b, m, n, k, alpha, beta, da, lda, db, ldb, dc, ldc, ct };
        tk_status st = tk_gemm_ex(g_h, &p, kernel, NULL);
        cudaError_t e = cudaDeviceSynchronize();
        if (st != TK_SUCCESS || e != cudaSuccess) {
            snprintf(msg, msg_len, "tk_gemm_ex: %s (%s); sync: %s", tk_status_string(st), tk_last_error(g_h),
                     cudaGetErrorString(e));
            goto done;
        }
    }
    cudaMemcpy(hc, dc, (size_t)m * ldc * es, cudaMemcpyDeviceToHost);
    bad = 0;
    msg[0] = '\0';
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ldc; j++) {
            size_t idx = (size_t)i * ldc + j;
            float old, got;
            if (ct == TK_F32) {
                memcpy(&old, hc0 + 4 * idx, 4);
                memcpy(&got, hc + 4 * idx, 4);
            } else {
                uint16_t o16, g16;
                memcpy(&o16, hc0 + 2 * idx, 2);
                memcpy(&g16, hc + 2 * idx, 2);
                old = h_bf2f(o16);
                got = h_bf2f(g16);
            }
            float want = old;
            if (j < n) {
                double acc = 0;
                for (int kk = 0; kk < k; kk++)
                    acc += (double)h_bf2f(ha[(size_t)i * lda + kk]) *
                           h_bf2f(op_b == TK_OP_N ? hb[(size_t)kk * ldb + j] : hb[(size_t)j * ldb + kk]);
                want = alpha * (float)acc;
                if (beta != 0.0f)
                    want += beta * old;
                if (ct == TK_BF16)
                    want = h_bf2f(h_f2bf(want));
            }
            if (!(want == got)) {
                if (!bad)
                    snprintf(msg, msg_len, "first wrong C(%d, %d): got %g, want %g%s", i, j, got, want,
                             j >= n ? " (padding column: written outside N)" : "");
                bad++;
            }
        }
done:
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    free(ha);
    free(hb);
    free(hc0);
    free(hc);
    return bad;
}

static void check_kernel(const char *kernel)
{
    if (!gpu_ok())
        return;
    if (!g_h && tk_create(&g_h) != TK_SUCCESS) {
        CHECK(0, "tk_create: %s", tk_last_error(NULL));
        return;
    }
    static const gemm_case cases[] = {
        { 1, 1, 1 }, { 127, 129, 65 }, { 64, 64, 64 }, { 128, 256, 128 }, { 130, 258, 33 },
        { 257, 129, 200 }, { 16, 8, 8 }, { 33, 17, 300 }, { 300, 260, 15 }, { 8, 520, 72 },
    };
    int ran = 0;
    for (int ob = 0; ob < 2; ob++) {
        tk_op op_b = (tk_op)ob;
        tk_gemm_problem probe = { TK_ROW_MAJOR, TK_OP_N, op_b, 64, 64, 64, 1.0f, 0.0f, NULL, 72, NULL, 72, NULL, 64, TK_F32 };
        if (tk_kernel_supports(g_h, kernel, &probe) != TK_SUCCESS)
            continue;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
            for (int ct = 0; ct < 2; ct++)
                for (int bi = 0; bi < 2; bi++) {
                    char msg[512];
                    float alpha = bi ? -0.5f : 1.0f, beta = bi ? 0.5f : 0.0f;
                    int pad = (int)(c % 3);   /* ldc = n, n + 1 (odd: single stores), n + 2 */
                    int bad = run_gemm_case(kernel, cases[c], op_b, (tk_dtype)ct, alpha, beta, pad, msg, sizeof msg);
                    CHECK(bad == 0, "%s op_b %s %dx%dx%d %s alpha %g beta %g ldc n+%d: %d wrong; %s", kernel,
                          ob ? "T" : "N", cases[c].m, cases[c].n, cases[c].k, ct ? "bf16" : "fp32", alpha, beta, pad,
                          bad, msg);
                    ran++;
                }
    }
    CHECK(ran > 0, "%s supports neither op_b N nor T (%s)", kernel, tk_last_error(g_h));
    /* a leading dimension that breaks the 16-byte loads must be refused */
    tk_gemm_problem odd = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 64, 64, 60, 1.0f, 0.0f, NULL, 60 + 1, NULL, 72, NULL, 64, TK_F32 };
    tk_status st = tk_kernel_supports(g_h, kernel, &odd);
    CHECK(st == TK_ERR_NOT_SUPPORTED, "%s: lda 61 should be refused, got %s", kernel, tk_status_string(st));
}

#define KERNEL_TEST(name) \
    static void test_##name(void) { check_kernel(#name); }
#define TK_SEED_KERNELS(X) \
    X(k02_warp_64x64) \
    X(k03_wg_64x64_k16) \
    X(k04_wg_64x64_k32) \
    X(k05_wg_64x64_k64) \
    X(k06_pc_64x128) \
    X(k07_pc_64x128_single) \
    X(k08_4w_128x128_abt) \
    X(k09_8w_128x128_abt) \
    X(k10_4w_128x128_k32) \
    X(k11_4w_128x128_kunroll4) \
    X(k12_8w_256x128_gregs) \
    X(k13_pc_128x256_superm)
TK_SEED_KERNELS(KERNEL_TEST)

void tk_tests(void)
{
    TK_TEST(test_fragment_ownership);
    TK_TEST(test_subtile_views);
    TK_TEST(test_swap_layout_and_store);
    TK_TEST(test_g2s_edges);
    TK_TEST(test_mma_and_epilogue);
    TK_TEST(test_ids_and_barriers);
#define RUN_KERNEL_TEST(name) TK_TEST(test_##name);
    TK_SEED_KERNELS(RUN_KERNEL_TEST)
    if (g_h)
        tk_destroy(g_h);
}
