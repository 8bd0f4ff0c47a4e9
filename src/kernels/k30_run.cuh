/* k30_run.cuh - the body of k30_wgmma_tma's kernels (k30_run) and its
 * fused-epilogue kernel (k30_epi_kernel), shared by k30_wgmma_tma.cu (the
 * dense and grouped instances, the launchers) and k30_epi_nn.cu ..
 * k30_epi_tt.cu (the fused-epilogue instances, one translation unit per
 * operand layout: each is as long to compile as all the dense instances
 * together, and make builds the five files in parallel).
 */
#ifndef TK_K30_RUN_CUH
#define TK_K30_RUN_CUH

#include "k30_core.cuh"

#define K30_GROUP_M 16                 /* block rows per super-tile */

/* The kernel's body (k30_kernel, k30_epi_kernel). A template because the
 * operand majors are wgmma immediates and fix the TMA box pattern: A_MN = 1
 * for M-major A (op_a T), B_MN = 1 for N-major B (op_b N); BM and BN, the
 * tile rows of A and B, fix the instruction and the accumulator count
 * (k30_wgmma_tma 128 x 256, k33 128 x 128, k34 128 x 64, k35 128 x 192;
 * k42 64 x 128..192, one consumer); SWAP (k36) swaps the operands' roles;
 * GRP = 1 (k43) walks the units of many products (k30_gwalk_next) instead
 * of one product's tiles; EPI = 2 (k30_epi_kernel) runs ping-pong
 * consumers and applies the fused epilogue (k30_epi_store, the gated
 * kinds' k30_epi_transform) to each tile's final sum before storing it;
 * the dense and grouped instances have EPI = 0. F8 (k30_fp8_kernel):
 * FP8 operands, K-major both, k-tiles of 128 promoted to fp32 one by one
 * (k30_consume_fp8) and the final scales applied before the store
 * (k30_fp8_finish); 0 for bf16. F8 with SWAP = 1 (k30_fp8_swap.cu): k36's
 * swapped tiles, m64nBMk32 of B's rows by the tokens (k30_consume_fp8_swap,
 * k30_fp8_finish_swap). */
template <int A_MN, int B_MN, int BM, int BN, int SWAP, int GRP, int EPI, int F8 = 0>
static __device__ __forceinline__ void k30_run(const k30_params &p)
{
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(!EPI || (!SWAP && !GRP), "the fused epilogue takes the unswapped one-product tiles alone");
    /* PP (EPI == 2): ping-pong consumers, two warpgroups that own
     * alternate BM x BN tiles (BM 64) of the CTA's walk: one runs its
     * tile's epilogue while the other multiplies (K30_PP_SMEM). */
    constexpr bool PP = EPI == 2;
    static_assert(!PP || BM == 64, "ping-pong tiles are 64 rows, one warpgroup's");
    constexpr int CONS = PP ? 2 : K30_CONS(BM, SWAP);
    constexpr int CHUNK_BYTES = PP ? 2 * 2 * K30_EPI_CHUNK : K30_EPI_CFG(BM, BN, SWAP);
    constexpr int EPI_BYTES = CHUNK_BYTES + (PP ? K30_PP_BIAS_BYTES : 0);   /* PP: then the staged bias */
    extern __shared__ __align__(1024) uint8_t k30_smem[];
    /* The ring, then the epilogue chunk buffers, then the barriers. */
    const uint32_t ring = k30_ring(k30_smem);
    const uint32_t epi = ring + K30_RING_BYTES_MNA(BM, BN, K30_KA(SWAP));
    const uint32_t full_bar = epi + EPI_BYTES;
    const uint32_t empty_bar = full_bar + 8 * K30_STAGES_MNA(BM, BN, K30_KA(SWAP));
    const int wg = threadIdx.x / 128;

    /* a stage is released by each warp of the consumers that read it: all
     * of them, or (PP) those of the one warpgroup whose tile it holds */
    if (threadIdx.x == 0)
        k30_init(&p, full_bar, empty_bar, 4 * (PP ? 1 : CONS), K30_STAGES_MNA(BM, BN, K30_KA(SWAP)));
    __syncthreads();

    if (wg == 0) {
        /* Producer warpgroup: one thread issues every load. */
        if (PP || K30_REALLOC(BM, SWAP))
            tk_setmaxnreg_dec(K30_PRODUCER_REGS);
        if (GRP && threadIdx.x < 32) {
            /* the walk needs the whole warp; lane 0 issues the loads */
            const int lane = threadIdx.x;
            k30_gwalk w = { (int)blockIdx.x, 0, 0 };
            k30_unit u;
            int s = 0;
            uint32_t phase = 0;
            while (k30_gwalk_next<BM, BN>(&p, &w, &u, lane, K30_GROUP_M)) {
                if (lane == 0)
                    k30_produce_tile<A_MN, B_MN, BM, BN, K30_KA(SWAP), 1, 0, F8>(&p, ring, full_bar, empty_bar, 0, 0,
                                                                                 0, u.k_tiles, 1, 0, &s, &phase, &u);
                __syncwarp();
            }
        } else if (!GRP && threadIdx.x == 0) {
            k30_walk w = { (int)blockIdx.x, (int)blockIdx.x };
            int s = 0, t, tm, tn, kb, ke, v;
            uint32_t phase = 0;
            while (k30_walk_tile(&p, &w, p.tiles_m, K30_GROUP_M, &t, &tm, &tn, &kb, &ke, &v))
                k30_produce_tile<A_MN, B_MN, BM, BN, K30_KA(SWAP), 0, EPI, F8>(&p, ring, full_bar, empty_bar, tm, tn,
                                                                               kb, ke, 1, 0, &s, &phase);
        }
    } else {
        /* Consumer warpgroup c: rows 64c..64c+63 of each tile (SWAP: the
         * whole 64 x BM tile of C^T; PP: every other tile, from the c-th). */
        if (PP || K30_REALLOC(BM, SWAP))
            tk_setmaxnreg_inc(K30_CONSUMER_REGS);
        const int c = CONS == 1 ? 0 : wg - 1;   /* one consumer: known at compile time */
        const int rc = PP ? 0 : c;             /* the consumer's 64-row part of a tile */
        const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
        const uint32_t empty[1] = { empty_bar };
        float acc[(SWAP ? BM : BN) / 2];
#pragma unroll
        for (int i = 0; i < (SWAP ? BM : BN) / 2; i++)
            acc[i] = 0.0f;
        const int tid = threadIdx.x % 128;
        /* the consumer's share of the C buffers (SWAP: a BM x 64 fp32 tile, else two chunks) */
        const uint32_t ebuf = epi + c * (CHUNK_BYTES / CONS);
        uint8_t *epp = k30_smem + (ebuf - tk_smem_u32(k30_smem));
        /* PP with a column bias: the consumer's tile of it, fp32 (k30_epi_stage_bias) */
        float *const sbias = (float *)(k30_smem + (epi + CHUNK_BYTES - tk_smem_u32(k30_smem))) + c * BN;
        const bool stage_bias = PP && p.epi_bias && !p.epi_bias_rows && !p.epi_gated;
        k30_walk w = { (int)blockIdx.x, (int)blockIdx.x };
        int s = 0, t, tm, tn, kb, ke, v;
        uint32_t phase = 0;
        int nchunk = 0;                /* staged chunks so far (k30_epilogue_staged) */
        int turn = 0;                  /* PP: the walk's units so far; this consumer's are turn % 2 == c */
        if (GRP) {
            k30_gwalk gw = { (int)blockIdx.x, 0, 0 };
            k30_unit u;
            while (k30_gwalk_next<BM, BN>(&p, &gw, &u, lane, K30_GROUP_M)) {
                /* Zeroed every unit (an empty group of TK_GROUP_K stores
                 * beta * C from them): the last unit's sums are dead during
                 * the walk, which without this held all 128 accumulators of
                 * a 128 x 256 tile and spilled 124 bytes a thread (ptxas -v;
                 * local memory traffic in ncu, docs/NOTES.md session 25). */
#pragma unroll
                for (int i = 0; i < (SWAP ? BM : BN) / 2; i++)
                    acc[i] = 0.0f;
                if constexpr (F8) {
                    /* the unit's product's scales (one set where the operand is shared: stride 0); K
                     * groups are refused (k43_supports), so every unit has all of K's k-tiles */
                    const float *sa = p.f8_sa + u.za * p.f8_sstride_a, *sb = p.f8_sb + u.zb * p.f8_sstride_b;
                    if constexpr (SWAP) {
                        k30_consume_fp8_swap<BM, F8>(&p, sa, sb, acc, ring, full_bar, empty, u.k_tiles, 0, lane, u.m0,
                                                     u.n0, &s, &phase);
                        k30_fp8_finish_swap<BM>(&p, sa, sb, acc, u.m0, u.n0, warp, lane);
                    } else {
                        k30_consume_fp8<BM, BN, F8>(&p, sa, sb, acc, ring, full_bar, empty, 1, u.k_tiles, 0, c, warp,
                                                    lane, u.m0, u.n0, &s, &phase);
                        k30_fp8_finish<BN>(&p, sa, sb, acc, u.m0 + 64 * c, u.n0, warp, lane);
                    }
                } else if (u.k_tiles > 0) {
                    k30_consume_tile<A_MN, B_MN, BM, BN, SWAP, K30_KA(SWAP), 1>(acc, ring, full_bar, empty, 1, u.k_tiles,
                                                                                c, lane, &s, &phase, u.k_valid, tid,
                                                                                u.k_head);
                }
                if (SWAP)
                    k30_epilogue_swap_at<BM>(&p, acc, u.m0, u.n0 + 64 * c, warp, lane, u.c, u.m_end);
                else if (p.c_staged)   /* beta 0: TMA stores into the 3-D map of C, or row by row */
                    k30_epilogue_staged<BN, 1>(&p, acc, u.m0 + 64 * c, u.n0, warp, lane, ebuf, epp, 1 + c, &nchunk,
                                               u.z, u.c, u.m_end);
                else
                    k30_epilogue_direct<BN, 1>(&p, acc, u.m0 + 64 * c, u.n0, warp, lane, u.c, u.m_end);
            }
        }
        while (!GRP && k30_walk_tile(&p, &w, p.tiles_m, K30_GROUP_M, &t, &tm, &tn, &kb, &ke, &v)) {
            if (PP && (turn & 1) != c) {
                /* the other consumer's unit: its stages pass this one by (k30_pp_wait says why no wait) */
                turn++;
                k30_pp_skip(ke - kb, K30_STAGES_MNA(BM, BN, 1), &s, &phase);
                continue;
            }
            /* the unit's column bias, read now and staged after its products (k30_epi_stage_bias) */
            float2 bias2 = make_float2(0.0f, 0.0f);
            if constexpr (PP)
                if (stage_bias)
                    bias2 = k30_epi_bias_pair<BN>(&p, tn * BN, tid);
            if (PP && turn++ > 0)
                k30_pp_wait(c);        /* the other consumer's previous unit issued */
            if constexpr (F8 && SWAP)
                k30_consume_fp8_swap<BM, F8>(&p, p.f8_sa, p.f8_sb, acc, ring, full_bar, empty, ke - kb, kb, lane,
                                             tm * BM, tn * BN, &s, &phase);
            else if constexpr (F8)
                k30_consume_fp8<BM, BN, F8>(&p, p.f8_sa, p.f8_sb, acc, ring, full_bar, empty, 1, ke - kb, kb, rc, warp,
                                            lane, tm * BM, tn * BN, &s, &phase);
            else
                k30_consume_tile<A_MN, B_MN, BM, BN, SWAP, K30_KA(SWAP)>(acc, ring, full_bar, empty, 1, ke - kb, rc,
                                                                         lane, &s, &phase);
            if (PP) {                  /* the next unit, if any, is the other consumer's */
                k30_walk nw = w;
                int nt, nkb, nke, nv;
                if (k30_walk_next(&p, &nw, &nt, &nkb, &nke, &nv))
                    k30_pp_signal(c);
            }
            if (v >= 0) {
                /* slot and sub: a unit's consumer, or (PP) sub 0 of the
                 * one warpgroup that holds the whole unit */
                if (v < p.sk_tiles * (p.sk_slices - 1)) {
                    /* Not the tile's last slice: leave the sum to its owner. */
                    k30_sk_save<SWAP ? BM : BN>(&p, acc, v * CONS + rc, tid, 1 + c);
                    continue;
                }
                k30_sk_gather<SWAP ? BM : BN>(&p, acc, t - p.sk_first, rc, CONS, tid, 1 + c);
            }
            if constexpr (F8 && SWAP)
                k30_fp8_finish_swap<BM>(&p, p.f8_sa, p.f8_sb, acc, tm * BM, tn * BN, warp, lane);
            else if constexpr (F8)
                k30_fp8_finish<BN>(&p, p.f8_sa, p.f8_sb, acc, tm * BM + 64 * rc, tn * BN, warp, lane);
            if constexpr (EPI) {   /* the tile's final sum, on its owner (if constexpr: BN 256 alone) */
                if constexpr (PP)
                    if (stage_bias)
                        k30_epi_stage_bias<BN>(sbias, bias2, tid, 1 + c);
                if (!p.epi_gated) {
                    k30_epi_store<BN, K30_EPI_PLAIN | K30_EPI_GBWD>(&p, acc, tm * BM + 64 * rc, tn * BN, warp, lane,
                                                                    ebuf, epp, 1 + c, &nchunk,
                                                                    stage_bias ? sbias : nullptr);
                    continue;
                }
                k30_epi_transform<BN, K30_EPI_GFWD>(&p, acc, tm * BM + 64 * rc, tn * BN, warp, lane);
            }
            if (EPI && p.epi_gated) {   /* a BN / 2-wide tile of D (k30_epi_gated) */
                if (p.c_staged)
                    k30_epilogue_staged<BN / 2>(&p, acc, tm * BM + 64 * rc, tn * (BN / 2), warp, lane, ebuf, epp, 1 + c,
                                                &nchunk);
                else
                    k30_epilogue_direct<BN / 2>(&p, acc, tm * BM + 64 * rc, tn * (BN / 2), warp, lane);
            } else if (SWAP && p.c_tma)
                k30_epilogue_swap_staged<BM>(&p, acc, tm * BM, tn * BN + 64 * c, warp, lane, ebuf, epp, 1 + c);
            else if (SWAP)
                k30_epilogue_swap<BM>(&p, acc, tm * BM, tn * BN + 64 * c, warp, lane);
            else if (p.c_staged)
                k30_epilogue_staged<BN>(&p, acc, tm * BM + 64 * rc, tn * BN, warp, lane, ebuf, epp, 1 + c, &nchunk);
            else
                k30_epilogue_direct<BN>(&p, acc, tm * BM + 64 * rc, tn * BN, warp, lane);
        }
        /* The last TMA stores must have read shared memory before it goes. */
        if (p.c_tma && tid == 0)
            tk_tma_store_wait_read(0);
    }
#endif
}

/* With a fused epilogue (tk_epi_args; issue 39): the unswapped one-product
 * tiles of k30_run with ping-pong consumers (EPI = 2): 64 x BN tiles, each
 * owned by one of the two consumer warpgroups, so that one's epilogue
 * (the transform and the C stores: as long as the tile's products at
 * GPT-2's K, docs/NOTES.md session 27) runs while the other multiplies.
 * A kernel of its own rather than another template argument of
 * k30_kernel: a default argument is still part of the mangled name, so the
 * dense instances would change name (and every tool that follows them by
 * name: tests/check_spills.py, bench/sass_compare.py). */
template <int A_MN, int B_MN, int BM, int BN>
static __global__ void __launch_bounds__(K30_PP_THREADS, 1) k30_epi_kernel(const __grid_constant__ k30_params p)
{
    k30_run<A_MN, B_MN, BM, BN, 0, 0, 2>(p);
}

/* The fused-epilogue instances' functions, defined by K30_EPI_UNIT in
 * k30_epi_<op_a><op_b>.cu, and the one for a's operand majors. */
extern "C" const void *k30_epi_func_nn(void);
extern "C" const void *k30_epi_func_nt(void);
extern "C" const void *k30_epi_func_tn(void);
extern "C" const void *k30_epi_func_tt(void);
#define K30_EPI_UNIT(tag, a_mn, b_mn)                                                                                 \
    extern "C" const void *k30_epi_func_##tag(void)                                                                  \
    {                                                                                                                \
        return (const void *)k30_epi_kernel<a_mn, b_mn, K30_PP_BM, K30_BN>;                                             \
    }
/* The FP8 instances (k30_fp8.cu): K-major A and B of formats fa, fb
 * (tk_fp8_format), 128 x 128 tiles; k31's (k31_wgmma_cluster.cu) 128 x 256
 * in 2-CTA clusters. */
extern "C" const void *k30_fp8_func(int fa, int fb);
/* An FP8 instance for formats fa, fb (tk_fp8_format): INSTANCE(F8), F8 =
 * 4 * fa + fb, for each of the four pairings. */
#define K30_FP8_SELECT(fa, fb, INSTANCE)                                                                             \
    ((fa) == TK_FP8_E4M3 ? ((fb) == TK_FP8_E4M3 ? INSTANCE(4 * TK_FP8_E4M3 + TK_FP8_E4M3)                            \
                                                : INSTANCE(4 * TK_FP8_E4M3 + TK_FP8_E5M2))                           \
                         : ((fb) == TK_FP8_E4M3 ? INSTANCE(4 * TK_FP8_E5M2 + TK_FP8_E4M3)                            \
                                                : INSTANCE(4 * TK_FP8_E5M2 + TK_FP8_E5M2)))
/* k43's FP8 instances (k43_fp8.cu): the k43 lines of K43_HAS_FP8, many
 * products of K-major A and B; NULL for another line. */
#define K43_HAS_FP8(bm, bn, swap) (((swap) == 0 && (bm) == K30_BM && (bn) % 128 == 0) || ((swap) == 1 && (bn) == 64))
extern "C" const void *k43_fp8_func(int bm, int bn, int swap, int fa, int fb);
/* k36_swap_*'s FP8 instances (k30_fp8_swap.cu): swapped bm x 64 tiles,
 * bm = 16, 32, 48, 64 or 72; NULL for another bm. */
extern "C" const void *k30_fp8_swap_func(int bm, int fa, int fb);
static inline const void *k30_epi_func(tk_op op_a, tk_op op_b)
{
    if (op_a == TK_OP_N)
        return op_b == TK_OP_N ? k30_epi_func_nn() : k30_epi_func_nt();
    return op_b == TK_OP_N ? k30_epi_func_tn() : k30_epi_func_tt();
}

#endif
