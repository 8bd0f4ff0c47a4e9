/* k30_core.cuh - the parts k30_wgmma_tma and k31_wgmma_cluster share: tile
 * configuration, shared-memory ring layout, barrier setup, super-tile order,
 * the TMA producer loop, the wgmma consumer loop of one tile, the direct
 * epilogue, and the host-side support check and tensor maps.
 *
 * The loops take the cluster size as an argument (1 for k30_wgmma_tma): with
 * one CTA the B tile is loaded whole and stages are released with a local
 * arrival; with more, each CTA multicasts its share of B and every consumer
 * warp arrives on the empty barrier of every CTA. The arguments are
 * compile-time constants at each call, so the unused path compiles away.
 * The header comments of k30_wgmma_tma.cu and k31_wgmma_cluster.cu explain
 * the design in short, with the figure and the command; docs/kernels/k30.md
 * records the design in full and the measurements.
 */
#ifndef TK_K30_CORE_CUH
#define TK_K30_CORE_CUH

#include <stdio.h>
#include <string.h>
#include <cuda.h>
#include "../lib/kernel.h"
#include "../lib/group.h"
#include "../lib/tma.h"
#include "../ptx/common.cuh"
#include "../ptx/cluster.cuh"
#include "../ptx/fence.cuh"
#include "../ptx/bar.cuh"
#include "../ptx/flag.cuh"
#include "../ptx/mbarrier.cuh"
#include "../ptx/setmaxnreg.cuh"
#include "../ptx/shfl.cuh"
#include "../ptx/stmatrix.cuh"
#include "../ptx/tma.cuh"
#include "../ptx/wgmma.cuh"
#include "../tiles/epi_formula.cuh"
#include "../tiles/epilogue.cuh"

#define K30_BM 128
#define K30_BN 256                     /* k30_wgmma_tma and k31; k33 has 128, k34 64 */
#define K30_BK 64                      /* 64 bf16 = 128 bytes = the swizzle span */
/* Stages of the ring: as many as the 192 KB ring budget holds, at most
 * K30_MAX_STAGES (BN 256: 4 stages of 48 KB, 128: 6 of 32 KB, 64: 8 of 24
 * KB). Small tiles finish a k-tile quickly, so they need more loads in
 * flight to hide the load latency (measurements: docs/NOTES.md). */
#define K30_RING_BUDGET (192 * 1024)
#ifndef K30_MAX_STAGES
#define K30_MAX_STAGES 8
#endif
/* Timing diagnostics, never in a normal build (results are wrong; for
 * bench/ab.sh define variants, e.g. "-DK30_DIAG_LOADS_ONLY"):
 * K30_DIAG_LOADS_ONLY: consumers hand each stage back unread (the loads and
 * the rest of the kernel, no wgmma); K30_DIAG_MMA_ONLY: the producer marks
 * each stage full without loading (the wgmma loop, no loads);
 * K30_DIAG_NO_EPI: the epilogues store nothing (what storing C costs).
 * Measured with them: docs/NOTES.md, sessions 9 and 16. */
/* Stages for A tiles of bm rows and B tiles of bn: the narrow tiles of
 * k36_swap_* (bm < K30_BM) may keep up to K30_NARROW_MAX_STAGES. */
#ifndef K30_NARROW_MAX_STAGES
#define K30_NARROW_MAX_STAGES 16
#endif
#define K30_STAGE_CAP(bm) ((bm) < K30_BM ? K30_NARROW_MAX_STAGES : K30_MAX_STAGES)
/* ka: k-tiles (64-deep swizzle atoms) a stage holds: 1, but K36_KA (2) for
 * the swapped narrow tiles; the cap counts k-tiles. */
/* A tile taller than K30_BM (k38's swapped 144 rows) stages one TMA box of
 * C (bm rows x 128 bytes) a consumer (bn / 64 of them) in shared memory
 * (k30_epilogue_swap_staged); the ring gets what is left of 226 KB (k38:
 * 190 KB, 5 stages; with the whole fp32 C tile staged, 72 KB, it had 4). */
#define K30_RING_BUDGET_MN(bm, bn) ((bm) > K30_BM ? 226 * 1024 - (bm) * 128 * ((bn) / 64) : K30_RING_BUDGET)
#define K30_STAGES_MNA(bm, bn, ka)                                                                                     \
    (K30_RING_BUDGET_MN(bm, bn) / K30_STAGE_BYTES_MNA(bm, bn, ka) < K30_STAGE_CAP(bm) / (ka)                           \
         ? K30_RING_BUDGET_MN(bm, bn) / K30_STAGE_BYTES_MNA(bm, bn, ka)                                               \
         : K30_STAGE_CAP(bm) / (ka))
#define K30_STAGES K30_STAGES_MNA(K30_BM, K30_BN, 1)
#define K30_CONSUMERS 2                /* consumer warpgroups, 64 rows of the tile each */
#define K30_THREADS (128 * (1 + K30_CONSUMERS))
#define K30_PRODUCER_REGS 40
#define K30_CONSUMER_REGS 232
#define K30_BOX 8192                   /* one 64 x 64 bf16 TMA box (MN-major tiles) */
/* Sizes for A tiles of bm rows and B tiles of bn (the loops take BM and BN
 * as template arguments) in stages of ka k-tiles. A B tile's room is whole
 * 64-wide boxes (bn 144: an N-major tile is three 64 x 64 boxes, the third
 * one 48 columns wider than the tile), so every stage stays 1024-aligned;
 * K30_B_TX is what its loads bring (a K-major tile: bn rows). */
#define K30_A_BYTES_M(bm) ((bm) * K30_BK * 2)
#define K30_B_BYTES_N(bn) (((bn) + 63) / 64 * 64 * K30_BK * 2)
#define K30_B_TX(b_mn, bn) ((b_mn) ? K30_B_BYTES_N(bn) : (bn) * K30_BK * 2)
#define K30_STAGE_BYTES_MN(bm, bn) (K30_A_BYTES_M(bm) + K30_B_BYTES_N(bn))
#define K30_STAGE_BYTES_MNA(bm, bn, ka) ((ka) * K30_STAGE_BYTES_MN(bm, bn))
#define K30_RING_BYTES_MNA(bm, bn, ka) (K30_STAGES_MNA(bm, bn, ka) * K30_STAGE_BYTES_MNA(bm, bn, ka))
/* Dynamic shared memory with `extra` bytes between the ring and the barriers:
 * + 1024 to align the ring to the 128B-swizzle pattern, + the full and empty
 * barriers. */
#define K30_SMEM_MNA(bm, bn, ka, extra)                                                                                \
    (1024 + K30_RING_BYTES_MNA(bm, bn, ka) + (extra) + 2 * 8 * K30_STAGES_MNA(bm, bn, ka))
/* The staged epilogue's two 8 KB chunk buffers per consumer warpgroup (a
 * chunk: 64 rows x 128 bytes, one TMA store box). */
#define K30_EPI_CHUNK 8192
#define K30_EPI_BYTES (K30_CONSUMERS * 2 * K30_EPI_CHUNK)
#define K30_RING_BYTES K30_RING_BYTES_MNA(K30_BM, K30_BN, 1)
#define K30_SMEM_WITH(extra) K30_SMEM_MNA(K30_BM, K30_BN, 1, extra)

/* Consumer warpgroups and threads of an instance (k30_wgmma_tma's
 * configurations, and k31's with swap 0): SWAP is the number of
 * consumer warpgroups of a swapped tile (k36_swap_*: 1, k38: 2, 64 rows of
 * B each), 0 for the others: one per 64 rows of A (k42's 64-row tiles: one,
 * the 128-row tiles: two). */
#define K30_CONS(bm, swap) ((swap) ? (swap) : (bm) / 64)
#define K30_THREADS_CFG(bm, swap) (128 * (1 + K30_CONS(bm, swap)))
/* setmaxnreg moves registers from the producer to the consumers of the
 * unswapped 128-row tiles (up to 128 accumulators a thread in 384
 * threads); one consumer (256 threads) has 255 registers a thread anyway. */
#define K30_REALLOC(bm, swap) (!(swap) && (bm) == K30_BM)
/* 64-deep k-tiles a stage holds: k36's narrow tiles take two (K36_KA),
 * eight wgmma a full/empty hand-over instead of four (docs/NOTES.md,
 * session 12: 3-6% faster at the one-wave k36 shapes); the others one. */
#ifndef K36_KA
#define K36_KA 2
#endif
#define K30_KA(swap) ((swap) == 1 ? K36_KA : 1)
/* Shared memory of an instance: the ring, the epilogue's C buffers (the
 * staged chunks; a swapped tile's whole bm x bn fp32 C tile, or where it
 * is taller than K30_BM one bm x 128-byte box a consumer,
 * k30_epilogue_swap_staged), the barriers. */
#define K30_EPI_CFG(bm, bn, swap)                                                                                    \
    ((swap) ? ((bm) > K30_BM ? (bm) * 128 * (swap) : (bm) * (bn) * 4) : (bm) / 64 * 2 * K30_EPI_CHUNK)
#define K30_SMEM_CFG(bm, bn, swap) K30_SMEM_MNA(bm, bn, K30_KA(swap), K30_EPI_CFG(bm, bn, swap))
/* The fused-epilogue instances' ping-pong tiles (k30_epi_kernel): two
 * consumer warpgroups owning alternate 64 x K30_BN tiles, each with its
 * two chunk buffers; the ring of 64-row stages (40 KB: 4 of them). */
#define K30_PP_BM 64
#define K30_PP_THREADS (128 * 3)
#define K30_PP_BIAS_BYTES (2 * K30_BN * 4)   /* each consumer's tile of column bias, fp32 (k30_epi_stage_bias) */
#define K30_PP_SMEM K30_SMEM_MNA(K30_PP_BM, K30_BN, 1, 2 * 2 * K30_EPI_CHUNK + K30_PP_BIAS_BYTES)

static_assert(K30_BM == 64 * K30_CONSUMERS, "each consumer warpgroup owns 64 rows (one wgmma M)");
static_assert(K30_STAGE_BYTES_MN(K30_BM, 256) % 1024 == 0 && K30_STAGE_BYTES_MN(K30_BM, 192) % 1024 == 0 &&
                  K30_STAGE_BYTES_MN(K30_BM, 128) % 1024 == 0 && K30_STAGE_BYTES_MN(K30_BM, 64) % 1024 == 0,
              "stages must keep the 1024-byte swizzle alignment");
static_assert(K30_PRODUCER_REGS * 128 + K30_CONSUMER_REGS * 128 * K30_CONSUMERS <= 65536,
              "register reallocation exceeds the SM's 64K registers");

/* A split slot: one consumer's partial sums, 64 x BN <= 128 x 128 fp32. */
#define K30_SK_SLOT_FLOATS (128 * 128)
#define K30_SK_SLOT_BYTES (K30_SK_SLOT_FLOATS * sizeof(float))

typedef struct k30_params {
    CUtensorMap map_a;                 /* A: box BM x BK (K-major) or 64 x 64 (M-major) */
    CUtensorMap map_b;                 /* B: box BN/cluster x BK (K-major) or 64 x 64 (N-major) */
    CUtensorMap map_c;                 /* C: box 64 rows x 128 bytes, 128B swizzle (k31, when c_tma) */
    void *c;
    int64_t ldc;
    int m, n;
    int tiles_m, tiles_n, k_tiles;
    float alpha, beta;
    /* A's rows loaded per stage: BM, or with one CTA and M < BM (decode)
     * only M rounded up to 8 (K-major A: a box of a_rows rows) or to 64
     * (M-major A: a_boxes boxes of 64): rows past them keep stale shared
     * memory, which only reaches C's rows past M, never stored. TMA's zero
     * fill of 120 rows of A per stage measured slower than reading them. */
    int a_rows, a_boxes, a_bytes;
    int c_bf16;
    int c_pairs;                       /* C rows allow 2-element stores (ldc even, C aligned to a pair) */
    int c_staged;                      /* beta == 0: epilogue through shared memory, then ... */
    int c_tma;                         /* ... TMA stores (else row-by-row stores) */
    /* Split tiles (sk_slices > 0): the walk's last sk_tiles
     * tiles, from sk_first on, are split into sk_slices equal k-ranges dealt
     * out like tiles; sk_slices == 0: sk_first is the number of tiles. */
    int num_clusters;
    int sk_first, sk_tiles, sk_slices;
    float *sk_part;                    /* partial accumulators: a slot per unit, CTA and consumer */
    uint32_t *sk_flag;                 /* a flag per slot: seq once it holds this launch's partial */
    uint32_t seq;
    int c_vec4;                        /* C rows allow 4-element stores (ldc % 4 == 0, C aligned to four) */
    /* Many products (k43, the GRP instances; tk_group_args): maps A and B
     * are 3-D (the product or group as the third coordinate), C of product
     * z at c + z * grp_stride_c elements; k is the K of every product, or
     * K's total (TK_GROUP_K); units past grp_units are none. */
    int grp_kind, grp_count;
    const int32_t *grp_offs;
    int32_t *grp_error;
    int64_t grp_stride_c;
    int k;
    int grp_units;
    int grp_za, grp_zb;                /* A, B one matrix per product or group (else z = 0: shared) */
    int grp_kalign;                    /* TK_GROUP_K with a K-major operand: k-tiles start 16-byte aligned */
    /* A fused epilogue (the EPI instances, k30_epi_transform; tk_epi_args):
     * TK_EPI_BIAS_ACT or TK_EPI_BACKWARD, its activation, the bias (NULL:
     * none; bf16 else fp32; per row else per column) and aux (bf16, ldaux;
     * NULL: none). epi_alpha is the problem's alpha: the launcher sets
     * alpha to 1, so the C epilogue after the transform adds beta * C and
     * rounds once, as for a plain product. Appended last: the offsets of
     * the fields above, which the dense instances read, stay as they were. */
    int epi_kind, epi_act;
    const void *epi_bias;
    int epi_bias_bf16, epi_bias_rows;
    uint16_t *epi_aux;
    int64_t epi_ldaux;
    int epi_aux_pairs;                 /* aux rows allow 2-element accesses (ldaux even, aux 4-byte aligned) */
    float epi_alpha;
    /* TK_EPI_GATED (k30_fill_gated): a tile is BN / 2 output columns, its
     * B stage the gate's BN / 2 columns (map_b, over op(B)'s N / 2) then
     * the up half's (map_bu, over op(b_up)); n is then D's N / 2 columns. */
    int epi_gated;
    CUtensorMap map_bu;
    /* FP8 operands (k30_fp8_kernel; tk_fp8_args): the scale mode and the
     * scales, in the row-major problem's terms (tilekit.h, version 4) */
    int f8_mode;
    const float *f8_sa, *f8_sb;
    int64_t f8_ld_sa, f8_ld_sb;
    /* FP8 with many products (k43's FP8 instances; tk_fp8_args' sstride_a,
     * sstride_b): elements from product z's scales to z + 1's, 0 for an
     * operand shared by all; the consumers read product z's at f8_sa +
     * za * f8_sstride_a, f8_sb + zb * f8_sstride_b (k30_unit). Appended
     * last, as the epilogue's fields were. */
    int64_t f8_sstride_a, f8_sstride_b;
} k30_params;

/* The device helpers exist only in the sm_90a pass (the sm_80 pass compiles
 * an empty kernel body and would warn that they are unused). */
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* The ring's shared address: stage s holds A at ring + s * STAGE_BYTES and B
 * right after it, each tile on a 1024-byte boundary as the 128B swizzle
 * requires. Same offsets in every CTA, as multicast requires. */
static __device__ __forceinline__ uint32_t k30_ring(const uint8_t *smem)
{
    return (tk_smem_u32(smem) + 1023u) & ~1023u;
}

/* One thread: prefetch the tensor maps, initialise the barriers (the full
 * barrier expects the producer's arrival, the empty one `empty_arrivals`). */
static __device__ __forceinline__ void k30_init(const k30_params *p, uint32_t full_bar, uint32_t empty_bar,
                                                uint32_t empty_arrivals, int stages)
{
    tk_tma_prefetch_map(&p->map_a);
    tk_tma_prefetch_map(&p->map_b);
    for (int s = 0; s < stages; s++) {
        tk_mbarrier_init(full_bar + 8 * s, 1);
        tk_mbarrier_init(empty_bar + 8 * s, empty_arrivals);
    }
    tk_fence_mbarrier_init();
}

/* Tile t -> (tile row, tile column) in super-tile order: `group` tile rows
 * per group, down each column of the group first, so the tiles running at
 * once share A rows and B columns in L2. */
static __device__ __forceinline__ void k30_tile_coords(int t, int rows_total, int tiles_n, int group, int *tr, int *tn)
{
    int per_group = group * tiles_n;
    int g = t / per_group;
    int first = g * group;
    int rows = min(rows_total - first, group);
    int r = t - g * per_group;
    *tr = first + r % rows;
    *tn = r / rows;
}

/* One unit of a grouped launch (GRP, k43): a tile of one product or
 * group. Rows m0.. of A (and C, at c), at most up to m_end; k-tiles of K
 * from element k0 (a group of TK_GROUP_K: its tokens), of which the first
 * begins with k_head elements before the group and the last has k_valid
 * elements of it (the others, the neighbours', are zeroed in shared
 * memory before use); za and zb: A's and B's matrix. */
typedef struct k30_unit {
    int z;                             /* the product or group: C's matrix in a 3-D C map */
    int m0, n0, m_end;
    int k0, k_tiles, k_valid, k_head;
    int za, zb;
    char *c;
} k30_unit;

/* A warp's walk over the units of a grouped launch: unit t, then t + the
 * number of CTAs, ...; for TK_GROUP_ROWS the cursor g (the group the last
 * unit was in) and `before` (the units of the groups before it). */
typedef struct k30_gwalk {
    int t;
    int g, before;
} k30_gwalk;

/* TK_GROUP_ROWS: the group of unit t (t never below the last call's): its
 * rows [*lo, *hi) and t's index among its units. The 32 lanes read 32
 * groups' offsets at once and scan their unit counts (ceil(rows / BM) row
 * tiles x tiles_n each), so a warp passes 32 groups per round; 0 when t
 * is past every group's units. A bad group (group.h) has none. */
template <int BM>
static __device__ __forceinline__ int k30_rows_find(const k30_params *p, k30_gwalk *w, int t, int lane, int *lo,
                                                    int *hi, int *local)
{
    const unsigned full = 0xFFFFFFFFu;
    while (w->g < p->grp_count) {
        const int g = w->g + lane;
        int glo = 0, ghi = 0, cnt = 0;
        if (g < p->grp_count) {
            int64_t l, h;
            if (tk_group_range(TK_GROUP_ROWS, p->grp_offs, g, p->m, &l, &h)) {
                glo = (int)l;
                ghi = (int)h;
                cnt = (ghi - glo + BM - 1) / BM * p->tiles_n;
            } else {
                tk_group_bad(p->grp_error);
            }
        }
        int incl = cnt;
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
            const int v = __shfl_up_sync(full, incl, d);
            if (lane >= d)
                incl += v;
        }
        const int total = __shfl_sync(full, incl, 31);
        if (t < w->before + total) {
            const int L = __ffs(__ballot_sync(full, w->before + incl > t)) - 1;
            const int excl = __shfl_sync(full, incl - cnt, L);
            *lo = __shfl_sync(full, glo, L);
            *hi = __shfl_sync(full, ghi, L);
            w->g += L;
            w->before += excl;
            *local = t - w->before;
            return 1;
        }
        w->before += total;
        w->g += 32;
    }
    return 0;
}

/* The next unit of a warp's walk (every lane calls it with the same walk):
 * 1 with *u, 0 at the end. Units of a bad group or product (group.h), and
 * a MASKED product's tiles past its rows, are passed over. Within a group
 * of TK_GROUP_ROWS the units go down each column of tiles first (its few
 * row tiles share B's tile in L2); elsewhere in super-tile order of `group`
 * tile rows. */
template <int BM, int BN>
static __device__ __forceinline__ int k30_gwalk_next(const k30_params *p, k30_gwalk *w, k30_unit *u, int lane,
                                                     int group)
{
    const int esz = p->c_bf16 ? 2 : 4;
    for (; w->t < p->grp_units; w->t += p->num_clusters) {
        const int t = w->t;
        int tr, tn;
        u->k0 = 0;
        u->k_tiles = p->k_tiles;
        u->k_valid = K30_BK;
        u->k_head = 0;
        if (p->grp_kind == TK_GROUP_ROWS) {
            int lo, hi, local;
            if (!k30_rows_find<BM>(p, w, t, lane, &lo, &hi, &local))
                return 0;
            const int rows = (hi - lo + BM - 1) / BM;
            tr = local % rows;
            tn = local / rows;
            u->z = w->g;
            u->m0 = lo + tr * BM;
            u->m_end = hi;
            u->za = 0;
            u->zb = p->grp_zb ? w->g : 0;
            u->c = (char *)p->c;
        } else {
            const int per = p->tiles_m * p->tiles_n;
            const int z = t / per;
            k30_tile_coords(t - z * per, p->tiles_m, p->tiles_n, group, &tr, &tn);
            int64_t lo, hi;
            if (!tk_group_range(p->grp_kind, p->grp_offs, z, p->grp_kind == TK_GROUP_K ? p->k : p->m, &lo, &hi)) {
                if (lane == 0)
                    tk_group_bad(p->grp_error);
                continue;
            }
            u->m0 = tr * BM;
            u->m_end = p->grp_kind == TK_GROUP_MASKED ? (int)hi : p->m;
            if (u->m0 >= u->m_end)
                continue;
            u->z = z;
            u->za = p->grp_za ? z : 0;
            u->zb = p->grp_zb ? z : 0;
            u->c = (char *)p->c + (int64_t)z * p->grp_stride_c * esz;
            if (p->grp_kind == TK_GROUP_K) {
                /* A K-major box must start on a 16-byte boundary of K (a
                 * group at an odd token faulted: illegal instruction, H200):
                 * from the 8-element boundary below, the head zeroed */
                const int64_t from = p->grp_kalign ? lo & ~(int64_t)7 : lo;
                u->k0 = (int)from;
                u->k_head = (int)(lo - from);
                u->k_tiles = hi == lo ? 0 : (int)((hi - from + K30_BK - 1) / K30_BK);
                u->k_valid = (int)(hi - from) - (u->k_tiles - 1) * K30_BK;
            }
        }
        u->n0 = tn * BN;
        w->t += p->num_clusters;
        return 1;
    }
    return 0;
}

/* The producer thread's loads for k-tiles kb..ke-1 of one tile: tile row tr
 * (cluster rows when cluster > 1; CTA `rank` of the cluster computes tile row
 * tr * cluster + rank and loads its share of B for all CTAs), tile column
 * tn, into the ring from stage *s / parity *phase on.
 * A template because the operand majors fix the TMA box pattern (A_MN: op_a
 * T, B_MN: op_b N) and the tile rows of A and B (BM, BN) the sizes. */
template <int A_MN, int B_MN, int BM, int BN, int KA, int GRP = 0, int GATE = 0, int F8 = 0>
static __device__ __forceinline__ void k30_produce_tile(const k30_params *p, uint32_t ring, uint32_t full_bar,
                                                        uint32_t empty_bar, int tr, int tn, int kb, int ke,
                                                        int cluster, uint32_t rank, int *s, uint32_t *phase,
                                                        const struct k30_unit *u = nullptr)
{
    const uint16_t all = (uint16_t)((1u << cluster) - 1);
    static_assert(!A_MN || BM % 64 == 0, "M-major A tiles are whole 64-wide boxes");
    /* GATE: the EPI instances, whose B stage holds BN / 2 gate and BN / 2
     * up columns where p->epi_gated (k30_params.map_bu) */
    const bool gated = GATE && p->epi_gated;
    const int m0 = GRP ? u->m0 : (tr * cluster + (int)rank) * BM, n0 = GRP ? u->n0 : tn * (gated ? BN / 2 : BN);
    for (int kt = kb; kt < ke; kt += KA) {
        const uint32_t fb = full_bar + 8 * *s;
        const uint32_t s0 = ring + *s * K30_STAGE_BYTES_MNA(BM, BN, KA);
        /* Wait until every consumer warp (of every CTA: a peer's multicast
         * writes here too) has released the stage. Passes at once in the
         * first round: parity 1 of a fresh barrier reads as completed. */
        tk_mbarrier_wait_parity(empty_bar + 8 * *s, *phase ^ 1);
        /* Out-of-bounds box parts are zero-filled and still counted, so
         * the byte count is always the full boxes, B's shares included. */
#ifdef K30_DIAG_MMA_ONLY
        /* Timing diagnostic (wrong results): the stage counts as loaded. */
        tk_mbarrier_arrive(fb);
        (void)s0, (void)all, (void)m0, (void)n0;
#else
        tk_mbarrier_arrive_expect_tx(fb, KA * (p->a_bytes + K30_B_TX(B_MN, BN)));
#pragma unroll
        for (int ka = 0; ka < KA; ka++) {
            /* A k-tile past the unit's range (KA > 1) is loaded from past K:
             * zeros, which add nothing. */
            /* a k-tile is one 128-byte row: 64 bf16 or 128 FP8 values of K */
            const int k0 = (KA == 1 || kt + ka < ke ? kt + ka : p->k_tiles) * (F8 ? 2 * K30_BK : K30_BK) +
                           (GRP ? u->k0 : 0);
            const uint32_t sa = s0 + ka * K30_A_BYTES_M(BM);
            const uint32_t sb = s0 + KA * K30_A_BYTES_M(BM) + ka * K30_B_BYTES_N(BN);
            if (GRP) {
                /* 3-D maps: one product's or group's matrices (u->za, u->zb) */
                if (A_MN) {
#pragma unroll
                    for (int j = 0; j < BM / 64; j++)
                        tk_tma_load_3d(sa + j * K30_BOX, &p->map_a, m0 + 64 * j, k0, u->za, fb);
                } else {
                    tk_tma_load_3d(sa, &p->map_a, k0, m0, u->za, fb);
                }
                if (B_MN) {
#pragma unroll
                    for (int j = 0; j < (BN + 63) / 64; j++)
                        tk_tma_load_3d(sb + j * K30_BOX, &p->map_b, n0 + 64 * j, k0, u->zb, fb);
                } else {
                    tk_tma_load_3d(sb, &p->map_b, k0, n0, u->zb, fb);
                }
                continue;
            }
            if (A_MN) {
#pragma unroll
                for (int j = 0; j < BM / 64; j++)
                    if (j < p->a_boxes)
                        tk_tma_load_2d(sa + j * K30_BOX, &p->map_a, m0 + 64 * j, k0, fb);
            } else {
                tk_tma_load_2d(sa, &p->map_a, k0, m0, fb);
            }
            if (gated && cluster == 1) {
                /* the gate's BN / 2 columns, then up's: two loads */
                static_assert(!GATE || BN % 128 == 0, "a gated tile is whole 64-wide boxes of each half");
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const CUtensorMap *mb = h ? &p->map_bu : &p->map_b;
                    if (B_MN) {
#pragma unroll
                        for (int j = 0; j < BN / 128; j++)
                            tk_tma_load_2d(sb + (h * (BN / 128) + j) * K30_BOX, mb, n0 + 64 * j, k0, fb);
                    } else {
                        tk_tma_load_2d(sb + h * (BN / 2) * K30_BK * 2, mb, k0, n0, fb);
                    }
                }
            } else if (cluster == 1) {
                if (B_MN) {
#pragma unroll
                    for (int j = 0; j < (BN + 63) / 64; j++)
                        tk_tma_load_2d(sb + j * K30_BOX, &p->map_b, n0 + 64 * j, k0, fb);
                } else {
                    tk_tma_load_2d(sb, &p->map_b, k0, n0, fb);
                }
            } else {
                /* This CTA's share of B, part `rank` of the stage; gated
                 * (a pair: BN / cluster = BN / 2), the part is the gate's
                 * or the up half's same columns. */
                const CUtensorMap *mb = gated && rank ? &p->map_bu : &p->map_b;
                const int part = BN / cluster, n1 = gated ? n0 : n0 + part * (int)rank;
                if (B_MN) {
#pragma unroll
                    for (int j = 0; j < BN / 64 / cluster; j++) {
                        const int box = (int)rank * (BN / 64 / cluster) + j;
                        tk_tma_load_2d_multicast(sb + box * K30_BOX, mb, n1 + 64 * j, k0, fb, all);
                    }
                } else {
                    tk_tma_load_2d_multicast(sb + rank * (K30_B_BYTES_N(BN) / cluster), mb, k0, n1, fb, all);
                }
            }
        }
#endif
        if (++*s == K30_STAGES_MNA(BM, BN, KA)) {
            *s = 0;
            *phase ^= 1;
        }
    }
}

/* The walk of one cluster (one CTA where cluster = 1): its data-parallel
 * tiles (cluster_id, + the number of clusters, ...) below sk_first, then,
 * the same way, its units of the split tiles: unit v is slice v / sk_tiles
 * of tile sk_first + v % sk_tiles. Producer and consumers walk it alike. */
typedef struct k30_walk {
    int t;                             /* next data-parallel tile */
    int v;                             /* next split unit */
} k30_walk;

/* The next unit of work: tile *t, k-tiles *kb..*ke-1, split unit *v (-1 for
 * a whole tile); 0 at the end. */
static __device__ __forceinline__ int k30_walk_next(const k30_params *p, k30_walk *w, int *t, int *kb, int *ke,
                                                    int *v)
{
    if (w->t < p->sk_first) {
        *t = w->t;
        *kb = 0;
        *ke = p->k_tiles;
        *v = -1;
        w->t += p->num_clusters;
        return 1;
    }
    if (w->v >= p->sk_tiles * p->sk_slices)
        return 0;
    const int slice = w->v / p->sk_tiles;
    *t = p->sk_first + (w->v - slice * p->sk_tiles);
    *kb = slice * p->k_tiles / p->sk_slices;
    *ke = (slice + 1) * p->k_tiles / p->sk_slices;
    *v = w->v;
    w->v += p->num_clusters;
    return 1;
}

/* k30_walk_next, and the unit's tile as (tile row, tile column) of a
 * rows_total-row tile grid in super-tile order of `group` rows. */
static __device__ __forceinline__ int k30_walk_tile(const k30_params *p, k30_walk *w, int rows_total, int group,
                                                    int *t, int *tr, int *tn, int *kb, int *ke, int *v)
{
    if (!k30_walk_next(p, w, t, kb, ke, v))
        return 0;
    k30_tile_coords(*t, rows_total, p->tiles_n, group, tr, tn);
    return 1;
}

/* A split unit other than a tile's last slice leaves its sum in its slot
 * (consumer thread tid's BN / 2 values as float4s, warp-contiguous) and
 * publishes it by setting the slot's flag to this launch's number. No fence
 * per thread: the barrier orders the warpgroup's stores before thread 0's
 * release store, and a release is cumulative (PTX memory model; CUTLASS's
 * semaphore release is the same barrier-then-release pattern). */
template <int BN>
static __device__ __forceinline__ void k30_sk_save(const k30_params *p, const float *acc, int slot, int tid,
                                                   int bar_id)
{
    float4 *dst = (float4 *)(p->sk_part + (size_t)slot * K30_SK_SLOT_FLOATS);
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
        __stcg(dst + j * 128 + tid, make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
    tk_bar_sync(bar_id, 128);
    if (tid == 0)
        tk_flag_store_release(p->sk_flag + slot, p->seq);
}

/* a[0..3] += v: one float4 of a partial sum into the accumulators. */
static __device__ __forceinline__ void k30_add4(float *a, float4 v)
{
    a[0] += v.x;
    a[1] += v.y;
    a[2] += v.z;
    a[3] += v.w;
}

/* The unit of a tile's last slice adds the other slices' partial sums (for
 * this CTA rank and consumer, `sub` of `subs` per unit) in slice order: a
 * fixed order, so results are the same run to run. Thread i < slices - 1
 * waits for slice i's flag, all at once (one flag round trip and barrier
 * instead of one per slice); then the slices are read and added in order.
 * They are units of lower number, and every cluster walks its units in
 * rising order, waiting only on lower ones: the waits cannot deadlock.
 * The next slice is read ahead where the registers allow: with BN <= 64,
 * acc and two slices' BN / 2 values each fit in the 168 registers ptxas
 * gives the kernel (setmaxnreg does not raise that); with more, the spills
 * would cost more than the round trips. */
#define K30_SK_PREFETCH(BN) ((BN) <= 64)
#define K30_SK_PF_N(BN) (K30_SK_PREFETCH(BN) ? (BN) / 8 : 1)
template <int BN>
static __device__ __forceinline__ void k30_sk_gather(const k30_params *p, float *acc, int tile_in_wave, int sub,
                                                     int subs, int tid, int bar_id)
{
    const int others = p->sk_slices - 1;
    if (tid < others) {
        const int slot = (tid * p->sk_tiles + tile_in_wave) * subs + sub;
        while (tk_flag_load_acquire(p->sk_flag + slot) != p->seq)
            __nanosleep(32);
    }
    tk_bar_sync(bar_id, 128);
    const float4 *src =
        (const float4 *)(p->sk_part + ((size_t)tile_in_wave * subs + sub) * K30_SK_SLOT_FLOATS) + tid;
    const size_t slice_f4 = (size_t)p->sk_tiles * subs * K30_SK_SLOT_FLOATS / 4;
    if (K30_SK_PREFETCH(BN)) {
        float4 cur[K30_SK_PF_N(BN)], nxt[K30_SK_PF_N(BN)];
#pragma unroll
        for (int j = 0; j < K30_SK_PF_N(BN); j++)
            cur[j] = __ldcg(src + j * 128);
        for (int slice = 0; slice < others; slice++) {
            const bool more = slice + 1 < others;
            if (more) {
#pragma unroll
                for (int j = 0; j < K30_SK_PF_N(BN); j++)
                    nxt[j] = __ldcg(src + (slice + 1) * slice_f4 + j * 128);
            }
#pragma unroll
            for (int j = 0; j < K30_SK_PF_N(BN); j++) {
                k30_add4(acc + 4 * j, cur[j]);
                if (more)
                    cur[j] = nxt[j];
            }
        }
    } else {
        for (int slice = 0; slice < others; slice++) {
#pragma unroll
            for (int j = 0; j < BN / 8; j++)
                k30_add4(acc + 4 * j, __ldcg(src + slice * slice_f4 + j * 128));
        }
    }
}

/* Ping-pong consumers (k30_run's PP): a consumer issues a unit's products
 * only after the other consumer has issued all of its previous unit's
 * (k30_pp_wait on its barrier, which the other's k30_pp_signal completes:
 * named barriers 3 and 4, 128 threads each side). So the two take the
 * tensor cores in turn, one's epilogue running beside the other's
 * products, and when a consumer moves its ring position past the other's
 * unit (k30_pp_skip, no wait) every round before its own unit's first
 * stage has completed: a parity wait cannot tell a phase from the one two
 * rounds later, and without the order a consumer busy in its epilogue
 * could find the other several rounds of the ring ahead. */
#define K30_PP_BAR 3
static __device__ __forceinline__ void k30_pp_wait(int c) { tk_barrier_sync(K30_PP_BAR + c, 256); }
static __device__ __forceinline__ void k30_pp_signal(int c) { tk_barrier_arrive(K30_PP_BAR + (1 - c), 256); }
static __device__ __forceinline__ void k30_pp_skip(int n, int stages, int *s, uint32_t *phase)
{
    const int t = *s + n;
    *phase ^= (uint32_t)(t / stages) & 1u;
    *s = t % stages;
}

/* Hands stage `stage` back: each consumer warp arrives once on the empty
 * barrier of every CTA of the cluster (empty[r]: CTA r's empty barriers, a
 * cluster address; with one CTA the local shared address). */
static __device__ __forceinline__ void k30_release(const uint32_t *empty, int cluster, int stage, int lane)
{
    if (lane == 0) {
        if (cluster == 1) {
            tk_mbarrier_arrive(empty[0] + 8 * stage);
        } else {
#pragma unroll
            for (int r = 0; r < cluster; r++)
                tk_mbarrier_arrive_cluster(empty[r] + 8 * stage);
        }
    }
}

/* A TK_GROUP_K unit's k-tile holds its group's elements k_from..k_to-1
 * and its neighbours' around them: consumer c zeroes those in its 64 rows
 * of A (rows of 128 bytes: M-major A's K rows; K-major A's elements of each
 * row, 16-byte units placed by the 128B swizzle, unit u of row r at
 * (u ^ r % 8) * 16), so they add nothing; then makes the writes visible to
 * wgmma (the async proxy) and waits for its warpgroup. */
template <int A_MN>
static __device__ __forceinline__ void k30_zero_k_outside(uint32_t sa, int k_from, int k_to, int tid, int c)
{
    const int gone = K30_BK - (k_to - k_from);
    if (A_MN) {
        for (int i = tid; i < gone * 8; i += 128) {
            const int j = i / 8, k = j < k_from ? j : k_to + j - k_from;
            tk_st_shared_zero16(sa + k * 128 + (i % 8) * 16);
        }
    } else {
        for (int i = tid; i < 64 * gone; i += 128) {
            const int r = i / gone, j = i % gone, k = j < k_from ? j : k_to + j - k_from;
            tk_st_shared_zero2(sa + r * 128 + ((((k >> 3) ^ (r & 7)) << 4) | ((k & 7) << 1)));
        }
    }
    tk_fence_proxy_async_shared();
    tk_bar_sync(1 + c, 128);
}

/* Consumer warpgroup c: the 64 x BN accumulators (acc[BN / 2]) of one tile over all
 * k-tiles, reading the ring from stage *s / parity *phase on. One wgmma group
 * stays in flight while the next stage is awaited; a stage is released as
 * soon as the group reading it is done. On return acc holds the result.
 * SWAP (k36_swap_*): the roles change: the B tile (64 rows of N) is
 * wgmma's A and the A tile (BM rows of M, K-major) its B, so acc[BM / 2]
 * holds the 64 x BM tile of C^T. A template because the operand majors are
 * wgmma immediates and the tile sizes pick the instruction. */
template <int A_MN, int B_MN, int BM, int BN, int SWAP, int KA, int GRP = 0>
static __device__ __forceinline__ void k30_consume_tile(float *acc, uint32_t ring, uint32_t full_bar,
                                                        const uint32_t *empty, int cluster, int k_tiles, int c,
                                                        int lane, int *s, uint32_t *phase, int k_valid = K30_BK,
                                                        int tid = 0, int k_head = 0)
{
    /* K-major tiles: row r (M or N) at 128r, K steps of 16 = 32 bytes inside
     * the row. MN-major tiles: K row k at 128k within 64-wide boxes 8 KB apart
     * (LBO), K steps of 16 rows = 2048 bytes. Both: SBO = 1024 bytes per 8
     * rows. A's 64-row half c starts 8 KB in either way (64 K-major rows, or
     * the c-th M-major box). */
    static_assert(!SWAP || (!A_MN && BN == 64 * SWAP), "swapped: K-major A, 64 rows of B (wgmma M) a consumer");
    const uint32_t a_lbo = A_MN ? K30_BOX : 16, b_lbo = B_MN ? K30_BOX : 16;
    const uint32_t a_kstep = A_MN ? 2048 : 32, b_kstep = B_MN ? 2048 : 32;
    int prev = 0;
    for (int kt = 0; kt < k_tiles; kt += KA) {
        /* Consumer c's 64 rows: of A, or swapped of B (64 K-major rows or
         * the c-th N-major box, 8 KB in either way). */
        const uint32_t sa = ring + *s * K30_STAGE_BYTES_MNA(BM, BN, KA) + (SWAP ? 0 : c * K30_BOX);
        const uint32_t sb = ring + *s * K30_STAGE_BYTES_MNA(BM, BN, KA) + KA * K30_A_BYTES_M(BM) + (SWAP ? c * K30_BOX : 0);
        tk_mbarrier_wait_parity(full_bar + 8 * *s, *phase);
        if (GRP && ((kt == 0 && k_head > 0) || (kt == k_tiles - 1 && k_valid < K30_BK)))
            k30_zero_k_outside<A_MN>(sa, kt == 0 ? k_head : 0, kt == k_tiles - 1 ? k_valid : K30_BK, tid, c);
#ifdef K30_DIAG_LOADS_ONLY
        /* Timing diagnostic (wrong results): the stage goes back unread. */
        k30_release(empty, cluster, *s, lane);
        (void)sa, (void)sb, (void)prev, (void)a_lbo, (void)b_lbo, (void)a_kstep, (void)b_kstep;
#else
        tk_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < KA * K30_BK / 16; kk++) {
            const int ka = kk / (K30_BK / 16), k16 = kk % (K30_BK / 16);
            uint64_t da = tk_wgmma_desc_sw128(sa + ka * K30_A_BYTES_M(BM) + k16 * a_kstep, a_lbo, 1024);
            uint64_t db = tk_wgmma_desc_sw128(sb + ka * K30_B_BYTES_N(BN) + k16 * b_kstep, b_lbo, 1024);
            /* The first product of a tile overwrites the accumulators. */
            tk_wgmma_m64nNk16_f32_bf16<SWAP ? BM : BN, SWAP ? B_MN : A_MN, SWAP ? A_MN : B_MN>(
                acc, SWAP ? db : da, SWAP ? da : db, kt > 0 || kk > 0);
        }
        tk_wgmma_commit();
        if (kt > 0) {
            /* The previous stage's group is done: release it. */
            tk_wgmma_wait(1);
            k30_release(empty, cluster, prev, lane);
        }
        prev = *s;
#endif
        if (++*s == K30_STAGES_MNA(BM, BN, KA)) {
            *s = 0;
            *phase ^= 1;
        }
    }
    tk_wgmma_wait(0);
#ifndef K30_DIAG_LOADS_ONLY
    k30_release(empty, cluster, prev, lane);
#endif
    /* The epilogue must read the accumulators after the wait. */
#pragma unroll
    for (int i = 0; i < (SWAP ? BM : BN) / 2; i++)
        tk_wgmma_reg_fence(acc[i]);
}

/* FP8 operands (k30_fp8_kernel, k31_fp8_kernel; F8 = 4 * format of A +
 * format of B, tk_fp8_format): consumer warpgroup c's 64 x BN tile over
 * k_tiles k-tiles of 128 (one 128-byte row of K-major A and B), from the
 * unit's k-tile kt0 on, reading the ring as k30_consume_tile does (a stage
 * released to every CTA of the cluster). The FP8 wgmma keeps 13 bits
 * after the largest magnitude it adds (tests/gpu/fp8_mma; lab_compare.c),
 * so each k-tile's products are summed alone in the tensor core (d) and
 * then added to fp32 registers (acc): the promotion every 128 of K, where
 * TK_SCALE_BLOCK's scales are applied (row r's 1 x 128 scale times the
 * 128 x 128 block's); the other modes scale the final sum
 * (k30_fp8_finish). The tile goes by 128-column halves (four m64n128k32
 * each, then their promotion), so d is 64 registers whatever BN: with acc
 * that is 192 a thread at BN 256. A half waits for its products before its
 * promotion; the other consumer's products keep the tensor cores busy
 * meanwhile. m0, n0: the tile's corner. */
/* k30_consume_fp8's pieces for 128-column tiles (k33's FP8 instance),
 * pipelined: a k-tile's four m64n128k32 into d, issued (one commit group)
 * once stage *s has arrived; and a promotion of d into acc with the
 * thread's two rows' scales. */
template <int BM, int BN, int F8>
static __device__ __forceinline__ void k30_fp8_issue(float *d, uint32_t ring, uint32_t full_bar, int c, int *s,
                                                     uint32_t *phase)
{
    /* ring's descriptors plus the stage's offset: a sum, not the
     * descriptor's masks and shifts again for each instruction */
    const uint32_t off = (uint32_t)(*s * K30_STAGE_BYTES_MNA(BM, BN, 1)) >> 4;
    const uint64_t da = tk_wgmma_desc_sw128(ring + c * K30_BOX, 16, 1024);
    const uint64_t db = tk_wgmma_desc_sw128(ring + K30_A_BYTES_M(BM), 16, 1024);
    tk_mbarrier_wait_parity(full_bar + 8 * *s, *phase);
    tk_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; kk++)   /* K steps of 32 bytes: 2 in the descriptor's 16-byte units */
        tk_wgmma_m64n128k32_f32_fp8<F8 / 4, F8 % 4>(d, tk_wgmma_desc_add(da, off + 2 * kk),
                                                    tk_wgmma_desc_add(db, off + 2 * kk), kk > 0);
    tk_wgmma_commit();
    if (++*s == K30_STAGES_MNA(BM, BN, 1)) {
        *s = 0;
        *phase ^= 1;
    }
}

static __device__ __forceinline__ void k30_fp8_promote(float *acc, float *d, float s0, float s1)
{
#pragma unroll
    for (int i = 0; i < 64; i++)
        tk_wgmma_reg_fence(d[i]);
#pragma unroll
    for (int i = 0; i < 64; i++)
        acc[i] = fmaf(d[i], i & 2 ? s1 : s0, acc[i]);
}

/* The block scales of k-tile kb for rows r0, r1 and n-block nb (1 elsewhere).
 * sa, sb: the product's scales (p->f8_sa, p->f8_sb for one product; the
 * FP8 readers below take them the same way, so k43's units pass theirs). */
static __device__ __forceinline__ void k30_fp8_scales(const k30_params *p, const float *sa, const float *sb, int kb,
                                                      int r0, int r1, int nb, float *s0, float *s1)
{
    *s0 = *s1 = 1.0f;
    if (p->f8_mode == TK_SCALE_BLOCK) {
        const float b = __ldg(sb + nb + kb * p->f8_ld_sb);
        *s0 = __ldg(sa + r0 + kb * p->f8_ld_sa) * b;
        *s1 = __ldg(sa + r1 + kb * p->f8_ld_sa) * b;
    }
}

/* The 128-column tile's loop: k-tile kt + 1 issued into the other d before
 * kt's promotion, so a warpgroup's tensor-core work runs under its own
 * promotions (two d of 64 registers and acc's 64: 192 a thread). */
template <int BM, int BN, int F8>
static __device__ __forceinline__ void k30_consume_fp8_pipe(const k30_params *p, const float *sa, const float *sb,
                                                            float *acc, uint32_t ring,
                                                            uint32_t full_bar, const uint32_t *empty, int cluster,
                                                            int k_tiles, int kt0, int c, int warp, int lane, int m0,
                                                            int n0, int *s, uint32_t *phase)
{
    float d0[64], d1[64];
    const int r0 = min(m0 + 64 * c + 16 * warp + lane / 4, p->m - 1), r1 = min(r0 + 8, p->m - 1);
    const int nb = n0 / 128;
    int rs = *s;                       /* the stage of the k-tile to release next */
    float s0, s1;
    /* Zeroed here, once a tile, so that every promotion is one fma (a
     * select of 0 for the first k-tile cost one more instruction an
     * element: docs/NOTES.md session 30). */
#pragma unroll
    for (int i = 0; i < 64; i++)
        acc[i] = 0.0f;
    /* Each issue is on the loop's straight path (ptxas serializes wgmma
     * issued under a branch: C7518); the exits are the only branches. */
    for (int kt = 0;; kt += 2) {
        k30_fp8_issue<BM, BN, F8>(d0, ring, full_bar, c, s, phase);
        if (kt > 0) {                  /* k-tile kt - 1 (in d1) is done once kt's is the one in flight */
            tk_wgmma_wait(1);
            k30_release(empty, cluster, rs, lane);
            rs = rs + 1 == K30_STAGES_MNA(BM, BN, 1) ? 0 : rs + 1;
            k30_fp8_scales(p, sa, sb, kt0 + kt - 1, r0, r1, nb, &s0, &s1);
            k30_fp8_promote(acc, d1, s0, s1);
        }
        if (kt + 1 >= k_tiles) {
            tk_wgmma_wait(0);
            k30_release(empty, cluster, rs, lane);
            k30_fp8_scales(p, sa, sb, kt0 + kt, r0, r1, nb, &s0, &s1);
            k30_fp8_promote(acc, d0, s0, s1);
            break;
        }
        k30_fp8_issue<BM, BN, F8>(d1, ring, full_bar, c, s, phase);
        tk_wgmma_wait(1);
        k30_release(empty, cluster, rs, lane);
        rs = rs + 1 == K30_STAGES_MNA(BM, BN, 1) ? 0 : rs + 1;
        k30_fp8_scales(p, sa, sb, kt0 + kt, r0, r1, nb, &s0, &s1);
        k30_fp8_promote(acc, d0, s0, s1);
        if (kt + 2 >= k_tiles) {
            tk_wgmma_wait(0);
            k30_release(empty, cluster, rs, lane);
            k30_fp8_scales(p, sa, sb, kt0 + kt + 1, r0, r1, nb, &s0, &s1);
            k30_fp8_promote(acc, d1, s0, s1);
            break;
        }
    }
}

/* k-tile kb's block scales for rows r0, r1 and the tile's HALVES 128-column
 * blocks from n0 (past N: the last block's, never stored). */
template <int HALVES>
static __device__ __forceinline__ void k30_fp8_block_scales(const k30_params *p, const float *sa, const float *sb,
                                                            int kb, int r0, int r1, int n0, float *a0, float *a1,
                                                            float *bs)
{
    *a0 = __ldg(sa + r0 + kb * p->f8_ld_sa);
    *a1 = __ldg(sa + r1 + kb * p->f8_ld_sa);
#pragma unroll
    for (int h = 0; h < HALVES; h++)
        bs[h] = __ldg(sb + min(n0 / 128 + h, (p->n - 1) / 128) + kb * p->f8_ld_sb);
}

template <int BM, int BN, int F8>
static __device__ __forceinline__ void k30_consume_fp8(const k30_params *p, const float *sa, const float *sb,
                                                       float *acc, uint32_t ring,
                                                       uint32_t full_bar, const uint32_t *empty, int cluster,
                                                       int k_tiles, int kt0, int c, int warp, int lane, int m0, int n0,
                                                       int *s, uint32_t *phase)
{
    static_assert(BN % 128 == 0, "an FP8 tile is whole 128 x 128 blocks of B's scales (TK_SCALE_BLOCK)");
    if constexpr (BN == 128) {
        k30_consume_fp8_pipe<BM, BN, F8>(p, sa, sb, acc, ring, full_bar, empty, cluster, k_tiles, kt0, c, warp, lane, m0, n0,
                                         s, phase);
        return;
    }
    constexpr int HALVES = BN / 128;
    float d[64];
    const bool block = p->f8_mode == TK_SCALE_BLOCK;
    /* the thread's two rows (d[4j + 2h + e]: row 16 warp + lane / 4 + 8 h),
     * held inside M for the scales' reads */
    const int r0 = min(m0 + 64 * c + 16 * warp + lane / 4, p->m - 1), r1 = min(r0 + 8, p->m - 1);
#pragma unroll
    for (int i = 0; i < BN / 2; i++)   /* zeroed once a tile: each promotion one fma (as the pipelined loop's) */
        acc[i] = 0.0f;
    /* TK_SCALE_BLOCK: k-tile kt + 1's scales are read during kt's products
     * (read at kt's own start, their latency showed in the promotion) */
    float a0n = 1.0f, a1n = 1.0f, sbn[HALVES];
#pragma unroll
    for (int h = 0; h < HALVES; h++)
        sbn[h] = 1.0f;
    if (block)
        k30_fp8_block_scales<HALVES>(p, sa, sb, kt0, r0, r1, n0, &a0n, &a1n, sbn);
    for (int kt = 0; kt < k_tiles; kt++) {
        const float a0 = a0n, a1 = a1n;
        float sbh[HALVES];
#pragma unroll
        for (int h = 0; h < HALVES; h++)
            sbh[h] = sbn[h];
        if (block && kt + 1 < k_tiles)
            k30_fp8_block_scales<HALVES>(p, sa, sb, kt0 + kt + 1, r0, r1, n0, &a0n, &a1n, sbn);
        const uint32_t off = (uint32_t)(*s * K30_STAGE_BYTES_MNA(BM, BN, 1)) >> 4;
        const uint64_t da = tk_wgmma_desc_sw128(ring + c * K30_BOX, 16, 1024);
        const uint64_t db = tk_wgmma_desc_sw128(ring + K30_A_BYTES_M(BM), 16, 1024);
        tk_mbarrier_wait_parity(full_bar + 8 * *s, *phase);
#pragma unroll
        for (int h = 0; h < HALVES; h++) {
            tk_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++)   /* B's rows 128 h on: 128 rows of 128 bytes a half (16384 / 16) */
                tk_wgmma_m64n128k32_f32_fp8<F8 / 4, F8 % 4>(d, tk_wgmma_desc_add(da, off + 2 * kk),
                                                            tk_wgmma_desc_add(db, off + 1024 * h + 2 * kk), kk > 0);
            tk_wgmma_commit();
            tk_wgmma_wait(0);
#pragma unroll
            for (int i = 0; i < 64; i++)
                tk_wgmma_reg_fence(d[i]);
            if (h == HALVES - 1)
                k30_release(empty, cluster, *s, lane);
            const float s0 = a0 * sbh[h], s1 = a1 * sbh[h];
#pragma unroll
            for (int i = 0; i < 64; i++)
                acc[64 * h + i] = fmaf(d[i], i & 2 ? s1 : s0, acc[64 * h + i]);
        }
        if (++*s == K30_STAGES_MNA(BM, BN, 1)) {
            *s = 0;
            *phase ^= 1;
        }
    }
}

/* The per-tensor and row-wise scales of an FP8 tile's final sum (r0, c0:
 * the consumer's 64 x BN corner); rows and columns past M and N read
 * their last scale (their values are never stored). */
template <int BN>
static __device__ __forceinline__ void k30_fp8_finish(const k30_params *p, const float *sa, const float *sb,
                                                      float *acc, int r0, int c0, int warp, int lane)
{
    if (p->f8_mode == TK_SCALE_TENSOR) {
        const float t = __ldg(sa) * __ldg(sb);
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            acc[i] *= t;
    } else if (p->f8_mode == TK_SCALE_ROW) {
        const int r = r0 + 16 * warp + lane / 4;
        const float a0 = __ldg(sa + min(r, p->m - 1)), a1 = __ldg(sa + min(r + 8, p->m - 1));
#pragma unroll
        for (int j = 0; j < BN / 8; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float b = __ldg(sb + min(c0 + 8 * j + 2 * (lane % 4) + e, p->n - 1));
                acc[4 * j + e] *= a0 * b;
                acc[4 * j + 2 + e] *= a1 * b;
            }
    }
}

/* ---- FP8 on the swapped tiles (k36_swap_*'s FP8 instances) ----
 * C^T = B^T A^T as in k30_consume_tile's SWAP: the B tile's 64 rows (N of
 * C) are wgmma's m side, the A tile's BM rows (tokens, M of C) its n, so
 * the FP8 instruction is m64nBMk32 with B's format first. Thread (warp w,
 * lane l) holds d[4j + 2h + e] = D[16w + l/4 + 8h][8j + 2(l%4) + e]: B row
 * n0 + 16w + l/4 + 8h by token m0 + 8j + 2(l%4) + e. So TK_SCALE_BLOCK's
 * A scale (1 x 128 a token) varies along j and e (BM / 4 tokens a thread,
 * shared by both h) and B's (128 x 128) is one a k-tile for the whole
 * consumer (its 64 rows lie in one 128-row block: n0 is a multiple of 64);
 * the scale of d[4j + 2h + e] is sa[token(j, e)] * sb, BM / 4 products a
 * k-tile. */

/* k-tile kb's scales of the thread's tokens times B's block scale, or ones
 * outside TK_SCALE_BLOCK. Interior tiles read at constant offsets from one
 * address; a tile past M reads row M - 1's scale for its missing tokens
 * (their sums are never stored). */
template <int BM>
static __device__ __forceinline__ void k30_fp8_swap_scales(const k30_params *p, const float *sa, const float *sb,
                                                           int kb, int m0, int n0, int lane, float *s)
{
#pragma unroll
    for (int i = 0; i < BM / 4; i++)
        s[i] = 1.0f;
    if (p->f8_mode != TK_SCALE_BLOCK)
        return;
    const float b = __ldg(sb + n0 / 128 + (int64_t)kb * p->f8_ld_sb);
    const float *row = sa + (int64_t)kb * p->f8_ld_sa;
    const int t0 = m0 + 2 * (lane % 4);
    if (m0 + BM <= p->m) {
#pragma unroll
        for (int j = 0; j < BM / 8; j++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                s[2 * j + e] = __ldg(row + t0 + 8 * j + e) * b;
    } else {
#pragma unroll
        for (int j = 0; j < BM / 8; j++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                s[2 * j + e] = __ldg(row + min(t0 + 8 * j + e, p->m - 1)) * b;
    }
}

/* d (one k-tile's sum in the tensor core) into acc with the scales of
 * k30_fp8_swap_scales: acc[4j + 2h + e] += d[4j + 2h + e] * s[2j + e]. */
template <int BM>
static __device__ __forceinline__ void k30_fp8_swap_promote(float *acc, float *d, const float *s)
{
#pragma unroll
    for (int i = 0; i < BM / 2; i++)
        tk_wgmma_reg_fence(d[i]);
#pragma unroll
    for (int i = 0; i < BM / 2; i++)
        acc[i] = fmaf(d[i], s[2 * (i / 4) + i % 2], acc[i]);
}

/* One k-tile (128 of K) of the stage at `st` (its half ka: A's BM rows at
 * ka * K30_A_BYTES_M(BM), B's 64 after both A halves) into d: four
 * m64nBMk32, B's rows as wgmma's A, one commit group. */
template <int BM, int F8>
static __device__ __forceinline__ void k30_fp8_swap_issue(float *d, uint32_t ring, int st, int ka)
{
    constexpr int KA = K30_KA(1);
    const uint32_t s0 = ring + st * K30_STAGE_BYTES_MNA(BM, 64, KA);
    const uint64_t db = tk_wgmma_desc_sw128(s0 + KA * K30_A_BYTES_M(BM) + ka * K30_B_BYTES_N(64), 16, 1024);
    const uint64_t da = tk_wgmma_desc_sw128(s0 + ka * K30_A_BYTES_M(BM), 16, 1024);
    tk_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; kk++)   /* K steps of 32 bytes: 2 in the descriptor's 16-byte units */
        tk_wgmma_m64nNk32_f32_fp8<BM, F8 % 4, F8 / 4>(d, tk_wgmma_desc_add(db, 2 * kk), tk_wgmma_desc_add(da, 2 * kk),
                                                     kk > 0);
    tk_wgmma_commit();
}

/* The swapped tile's loop (one consumer warpgroup): a stage holds K30_KA(1)
 * = 2 k-tiles; the first goes into d0, the second into d1, and each is
 * promoted while the next one is in the tensor core (the previous stage's
 * d1 after this stage's d0 is issued, d0 after d1 is issued): 3 x BM / 2
 * registers of sums. A unit with an odd number of k-tiles has a last stage
 * whose second half is past K (zeros, k30_produce_tile), never multiplied.
 * The scales
 * of a k-tile are read as it is issued, used after the next one's issue.
 * m0, n0: C's corner of the tile (tokens, B's rows). */
template <int BM, int F8>
static __device__ __forceinline__ void k30_consume_fp8_swap(const k30_params *p, const float *sa, const float *sb,
                                                            float *acc, uint32_t ring,
                                                            uint32_t full_bar, const uint32_t *empty, int k_tiles,
                                                            int kt0, int lane, int m0, int n0, int *s,
                                                            uint32_t *phase)
{
    static_assert(K30_KA(1) == 2, "the swapped FP8 loop takes stages of two k-tiles");
    constexpr int ST = K30_STAGES_MNA(BM, 64, 2);
    float d0[BM / 2], d1[BM / 2], s0[BM / 4], s1[BM / 4];
#pragma unroll
    for (int i = 0; i < BM / 2; i++)   /* zeroed once a tile: each promotion one fma */
        acc[i] = 0.0f;
    /* As k30_consume_fp8_pipe: each issue on the loop's straight path
     * (ptxas serializes wgmma issued under a branch: C7518), the exits the
     * only branches (with the second k-tile always issued, ptxas found the
     * promotions inside a pipeline stage and serialized every wgmma: C7514). */
    for (int kt = 0;; kt += 2) {
        k30_fp8_swap_scales<BM>(p, sa, sb, kt0 + kt, m0, n0, lane, s0);
        tk_mbarrier_wait_parity(full_bar + 8 * *s, *phase);
        k30_fp8_swap_issue<BM, F8>(d0, ring, *s, 0);
        if (kt > 0) {                  /* the previous stage's second k-tile (d1) is done: promote, release */
            tk_wgmma_wait(1);
            k30_release(empty, 1, *s == 0 ? ST - 1 : *s - 1, lane);
            k30_fp8_swap_promote<BM>(acc, d1, s1);
        }
        if (kt + 1 >= k_tiles) {       /* odd: the stage's second half is past K, never multiplied */
            tk_wgmma_wait(0);
            k30_release(empty, 1, *s, lane);
            k30_fp8_swap_promote<BM>(acc, d0, s0);
            break;
        }
        k30_fp8_swap_scales<BM>(p, sa, sb, kt0 + kt + 1, m0, n0, lane, s1);
        k30_fp8_swap_issue<BM, F8>(d1, ring, *s, 1);
        tk_wgmma_wait(1);
        k30_fp8_swap_promote<BM>(acc, d0, s0);
        if (kt + 2 >= k_tiles) {
            tk_wgmma_wait(0);
            k30_release(empty, 1, *s, lane);
            k30_fp8_swap_promote<BM>(acc, d1, s1);
            break;
        }
        if (++*s == ST) {
            *s = 0;
            *phase ^= 1;
        }
    }
    if (++*s == ST) {                  /* past the unit's last stage */
        *s = 0;
        *phase ^= 1;
    }
#pragma unroll
    for (int i = 0; i < BM / 2; i++)
        tk_wgmma_reg_fence(acc[i]);
}

/* The per-tensor and row-wise scales of a swapped FP8 tile's final sum
 * (k30_fp8_finish with rows and columns exchanged): m0, n0 as
 * k30_consume_fp8_swap's; A's row scale by token (along j, e), B's by B
 * row (along h). */
template <int BM>
static __device__ __forceinline__ void k30_fp8_finish_swap(const k30_params *p, const float *sa, const float *sb,
                                                           float *acc, int m0, int n0, int warp, int lane)
{
    if (p->f8_mode == TK_SCALE_TENSOR) {
        const float t = __ldg(sa) * __ldg(sb);
#pragma unroll
        for (int i = 0; i < BM / 2; i++)
            acc[i] *= t;
    } else if (p->f8_mode == TK_SCALE_ROW) {
        const int r = n0 + 16 * warp + lane / 4;
        const float b0 = __ldg(sb + min(r, p->n - 1)), b1 = __ldg(sb + min(r + 8, p->n - 1));
#pragma unroll
        for (int j = 0; j < BM / 8; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float a = __ldg(sa + min(m0 + 8 * j + 2 * (lane % 4) + e, p->m - 1));
                acc[4 * j + e] *= a * b0;
                acc[4 * j + 2 + e] *= a * b1;
            }
    }
}

static __device__ __forceinline__ uint32_t k30_pack_bf16x2(float lo, float hi)
{
    return (uint32_t)tk_f32_to_bf16(lo) | ((uint32_t)tk_f32_to_bf16(hi) << 16);
}

/* Direct epilogue: stores one consumer's 64 x BN accumulators at rows r0..,
 * columns c0.. (the warpgroup tile's corner); alpha/beta (C read only when
 * beta != 0), fp32 or bf16, bounds-checked. Pairs of columns per store when
 * p->c_pairs, else one element per store: then ldc may be odd and C only
 * element-aligned (a view into a larger tensor, a vocabulary of 50257).
 * Thread (warp w, lane l) holds rows r0 + 16w + l/4 (+8) and column pairs
 * c0 + 8j + 2(l%4). GRP (k43): C of the unit's product at c_at, rows below
 * m_end (p->c and p->m are read in place otherwise: the one product's
 * machine code stays as it was). */
template <int BN, int GRP = 0>
static __device__ __forceinline__ void k30_epilogue_direct(const k30_params *p, const float *acc, int r0, int c0,
                                                           int warp, int lane, void *c_at = nullptr, int m_end = 0)
{
    const int row = r0 + 16 * warp + (lane >> 2);
    const int col = c0 + 2 * (lane & 3);
    const bool pairs = p->c_pairs;
    const bool interior = pairs && r0 + 64 <= (GRP ? m_end : p->m) && c0 + BN <= p->n;
    const float alpha = p->alpha, beta = p->beta;
    const tk_dtype ct = p->c_bf16 ? TK_BF16 : TK_F32;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = row + 8 * h;
        const bool row_ok = interior || r < (GRP ? m_end : p->m);
        const int64_t base = (int64_t)r * p->ldc + col;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            const float a0 = acc[4 * j + 2 * h], a1 = acc[4 * j + 2 * h + 1];
            const int cc = col + 8 * j;
            if (interior || (pairs && row_ok && cc + 1 < p->n)) {
                if (p->c_bf16) {
                    uint32_t *q = (uint32_t *)((uint16_t *)(GRP ? c_at : p->c) + base + 8 * j);
                    float v0 = alpha * a0, v1 = alpha * a1;
                    if (beta != 0.0f) {
                        uint32_t old = *q;
                        v0 = fmaf(beta, tk_bf16_to_f32((uint16_t)(old & 0xFFFF)), v0);
                        v1 = fmaf(beta, tk_bf16_to_f32((uint16_t)(old >> 16)), v1);
                    }
                    *q = k30_pack_bf16x2(v0, v1);
                } else {
                    float2 *q = (float2 *)((float *)(GRP ? c_at : p->c) + base + 8 * j);
                    float2 v = make_float2(alpha * a0, alpha * a1);
                    if (beta != 0.0f) {
                        float2 old = *q;
                        v.x = fmaf(beta, old.x, v.x);
                        v.y = fmaf(beta, old.y, v.y);
                    }
                    *q = v;
                }
            } else if (row_ok) {
                if (cc < p->n)
                    tk_epilogue_store(GRP ? c_at : p->c, base + 8 * j, ct, a0, alpha, beta);
                if (cc + 1 < p->n)
                    tk_epilogue_store(GRP ? c_at : p->c, base + 8 * j + 1, ct, a1, alpha, beta);
            }
        }
    }
}


/* A bias value, bf16 or fp32, at element `at` of p->epi_bias. */
static __device__ __forceinline__ float k30_epi_bias(const k30_params *p, int at)
{
    return p->epi_bias_bf16 ? tk_bf16_to_f32(((const uint16_t *)p->epi_bias)[at]) : ((const float *)p->epi_bias)[at];
}

/* The ping-pong consumers' column bias (k30_epi_kernel): a tile's BN
 * values are read when its unit starts, thread tid holding columns c0 +
 * 2 tid, + 1 (clamped to N - 1, as k30_epi_forward's reads: those columns
 * are never stored), so that the reads' latency passes under the unit's
 * products, and after them staged in shared memory for k30_epi_forward.
 * Read per column pair inside the epilogue instead, the loads' latency
 * was the fused kernel's largest stall (ncu, 2048 x 3072 x 768 bias +
 * GELU, H100: long scoreboard on the bias conversions, a third of the
 * not-issued samples; docs/NOTES.md session 28). */
template <int BN>
static __device__ __forceinline__ float2 k30_epi_bias_pair(const k30_params *p, int c0, int tid)
{
    static_assert(BN == 2 * 128, "a column pair per consumer thread");
    const int i = c0 + 2 * tid, last = p->n - 1;
    return make_float2(k30_epi_bias(p, min(i, last)), k30_epi_bias(p, min(i + 1, last)));
}

/* Stages the pair in sb (the consumer's BN floats), between two barriers
 * of the consumer warpgroup (bar_id, 128 threads): the first so that no
 * thread still reads the previous tile's values, the second so that every
 * value is there before any is read. */
template <int BN>
static __device__ __forceinline__ void k30_epi_stage_bias(float *sb, float2 v, int tid, int bar_id)
{
    tk_barrier_sync(bar_id, 128);
    *(float2 *)(sb + 2 * tid) = v;
    tk_barrier_sync(bar_id, 128);
}

/* k30_epi_transform: the fused epilogue of the EPI instances, on one
 * consumer's 64 x BN accumulators at rows r0.., columns c0.. (the fragment
 * layout of k30_epilogue_direct: thread (warp w, lane l) holds rows r0 +
 * 16w + l/4 (+8) and column pairs c0 + 8j + 2(l%4)), before the C
 * epilogue, which then runs with alpha 1 (k30_params.epi_alpha) and clips
 * the tile to M x N. Per element, with P = epi_alpha * acc rounded as
 * k01_naive rounds it (__fmul_rn, __fadd_rn: no contraction):
 * TK_EPI_BIAS_ACT: z = P + bias, z stored to aux as bf16 where aux is set,
 * acc = act(z); TK_EPI_BACKWARD: acc = P * act'(aux) (aux read as bf16, 0
 * outside M x N: those elements are never stored). aux is touched inside
 * its M x N alone, a 32-bit access where both columns exist and
 * p->epi_aux_pairs, else one element. Runs on a tile's final sum only:
 * after k30_sk_gather, on the unit that owns the tile.
 *
 * The code is straight-line, 128 elements a thread unrolled (the
 * accumulators are registers, indexed by constants only), and executed
 * once a tile: its length is what it costs. So everything that is uniform
 * is decided outside the element loop: the kind and the activation
 * (k30_epi_transform's switch: with the activation's switch per element,
 * the loop held every activation's body per element, about 680 KB an
 * instance, and the tile's epilogue took 3-5x its product in
 * instruction-cache misses), aux or none (AUX), the per-row values (row_ok,
 * rbias, arow; recomputed per element, the 128 x 256 instances spilled),
 * and per column pair only the bias (bounds-clamped reads, no branch) and
 * aux's bounds. BN is a template argument for the reason
 * k30_epilogue_direct's is. */
template <int BN, int ACT, int AUX>
static __device__ __forceinline__ void k30_epi_forward(const k30_params *p, float *acc, int row, int col,
                                                       const float *sb)
{
    const int N = p->n;
    const float alpha = p->epi_alpha;
    const bool bias = p->epi_bias != nullptr, bias_rows = p->epi_bias_rows, bias_bf16 = p->epi_bias_bf16;
    const bool col_bias = bias && !bias_rows;
    const bool row_ok0 = row < p->m, row_ok1 = row + 8 < p->m;
    const float rbias0 = bias && bias_rows && row_ok0 ? k30_epi_bias(p, row) : 0.0f;
    const float rbias1 = bias && bias_rows && row_ok1 ? k30_epi_bias(p, row + 8) : 0.0f;
    uint16_t *const arow = AUX ? p->epi_aux + (int64_t)(row_ok0 ? row : 0) * p->epi_ldaux : nullptr;
    const float *const bf32 = (const float *)p->epi_bias;
    const uint16_t *const bb16 = (const uint16_t *)p->epi_bias;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        const int cc = col + 8 * j;
        /* the pair's column bias (0: none, or per row); columns past N read
         * column N - 1's (in bounds; those elements are never stored) */
        float cb0 = 0.0f, cb1 = 0.0f;
        if (col_bias && sb) {   /* staged in shared memory by the tile's owner (k30_epi_stage_bias) */
            const float2 b = *(const float2 *)(sb + 8 * j);
            cb0 = b.x;
            cb1 = b.y;
        } else if (col_bias) {
            const int i0 = min(cc, N - 1), i1 = min(cc + 1, N - 1);
            if (bias_bf16) {
                cb0 = tk_bf16_to_f32(bb16[i0]);
                cb1 = tk_bf16_to_f32(bb16[i1]);
            } else {
                cb0 = bf32[i0];
                cb1 = bf32[i1];
            }
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float *v = acc + 4 * j + 2 * h;
            const float z0 = tk_epi_z(__fmul_rn(alpha, v[0]), h ? rbias1 + cb0 : rbias0 + cb0);
            const float z1 = tk_epi_z(__fmul_rn(alpha, v[1]), h ? rbias1 + cb1 : rbias0 + cb1);
            if (AUX) {
                const bool ok = h ? row_ok1 : row_ok0;
                const bool in0 = ok && cc < N, in1 = ok && cc + 1 < N;
                uint16_t *const q = arow + (h ? 8 * p->epi_ldaux : 0) + cc;
                if (p->epi_aux_pairs && in1) {
                    *(uint32_t *)q = k30_pack_bf16x2(z0, z1);
                } else {
                    if (in0)
                        q[0] = tk_f32_to_bf16(z0);
                    if (in1)
                        q[1] = tk_f32_to_bf16(z1);
                }
            }
            v[0] = tk_act(ACT, z0);
            v[1] = tk_act(ACT, z1);
        }
    }
}

template <int BN, int ACT>
static __device__ __forceinline__ void k30_epi_backward(const k30_params *p, float *acc, int row, int col)
{
    const int N = p->n;
    const float alpha = p->epi_alpha;
    const bool row_ok0 = row < p->m, row_ok1 = row + 8 < p->m;
    const uint16_t *const arow = p->epi_aux + (int64_t)(row_ok0 ? row : 0) * p->epi_ldaux;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        const int cc = col + 8 * j;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float *v = acc + 4 * j + 2 * h;
            const bool ok = h ? row_ok1 : row_ok0;
            const bool in0 = ok && cc < N, in1 = ok && cc + 1 < N;
            const uint16_t *const q = arow + (h ? 8 * p->epi_ldaux : 0) + cc;
            float z0 = 0.0f, z1 = 0.0f;
            if (p->epi_aux_pairs && in1) {
                const uint32_t w = *(const uint32_t *)q;
                z0 = tk_bf16_to_f32((uint16_t)(w & 0xFFFF));
                z1 = tk_bf16_to_f32((uint16_t)(w >> 16));
            } else {
                if (in0)
                    z0 = tk_bf16_to_f32(q[0]);
                if (in1)
                    z1 = tk_bf16_to_f32(q[1]);
            }
            v[0] = tk_epi_dact(ACT, __fmul_rn(alpha, v[0]), z0);
            v[1] = tk_epi_dact(ACT, __fmul_rn(alpha, v[1]), z1);
        }
    }
}

/* TK_EPI_GATED: the tile's BN / 2 output columns from its gate half
 * (accumulator chunks j < BN / 16: columns col + 8j of the gate's) and up
 * half (chunks j + BN / 16, the same columns of the up projection): z =
 * alpha acc + bias (bias: the gate's N / 2 values, then the up half's),
 * z_gate and z_up stored to aux (columns col.. and N / 2 + col..), and
 * act(z_gate) z_up left in the first BN / 4 accumulators, which the C
 * epilogue stores as a BN / 2-wide tile. p->n is D's N / 2 columns. */
template <int BN, int ACT, int AUX>
static __device__ __forceinline__ void k30_epi_gated(const k30_params *p, float *acc, int row, int col)
{
    const int N = p->n;
    const float alpha = p->epi_alpha;
    const bool bias = p->epi_bias != nullptr, bias_rows = p->epi_bias_rows, bias_bf16 = p->epi_bias_bf16;
    const bool col_bias = bias && !bias_rows;
    const bool row_ok0 = row < p->m, row_ok1 = row + 8 < p->m;
    const float rbias0 = bias && bias_rows && row_ok0 ? k30_epi_bias(p, row) : 0.0f;
    const float rbias1 = bias && bias_rows && row_ok1 ? k30_epi_bias(p, row + 8) : 0.0f;
    uint16_t *const arow = AUX ? p->epi_aux + (int64_t)(row_ok0 ? row : 0) * p->epi_ldaux : nullptr;
    const float *const bf32 = (const float *)p->epi_bias;
    const uint16_t *const bb16 = (const uint16_t *)p->epi_bias;
#pragma unroll
    for (int j = 0; j < BN / 16; j++) {
        const int cc = col + 8 * j;
        float cb[2][2] = { { 0.0f, 0.0f }, { 0.0f, 0.0f } };   /* [gate, up][column] */
        if (col_bias) {
#pragma unroll
            for (int u = 0; u < 2; u++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int at = u * N + min(cc + e, N - 1);
                    cb[u][e] = bias_bf16 ? tk_bf16_to_f32(bb16[at]) : bf32[at];
                }
        }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float *g = acc + 4 * j + 2 * h, *v = acc + 4 * (j + BN / 16) + 2 * h;
            const float rb = h ? rbias1 : rbias0;
            float zg[2], zu[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                zg[e] = tk_epi_z(__fmul_rn(alpha, g[e]), rb + cb[0][e]);
                zu[e] = tk_epi_z(__fmul_rn(alpha, v[e]), rb + cb[1][e]);
            }
            if (AUX) {
                const bool ok = h ? row_ok1 : row_ok0;
                const bool in0 = ok && cc < N, in1 = ok && cc + 1 < N;
#pragma unroll
                for (int u = 0; u < 2; u++) {
                    uint16_t *const q = arow + (h ? 8 * p->epi_ldaux : 0) + u * N + cc;
                    const float *z = u ? zu : zg;
                    if (p->epi_aux_pairs && in1 && N % 2 == 0) {
                        *(uint32_t *)q = k30_pack_bf16x2(z[0], z[1]);
                    } else {
                        if (in0)
                            q[0] = tk_f32_to_bf16(z[0]);
                        if (in1)
                            q[1] = tk_f32_to_bf16(z[1]);
                    }
                }
            }
            g[0] = tk_epi_glu(ACT, zg[0], zu[0]);
            g[1] = tk_epi_glu(ACT, zg[1], zu[1]);
        }
    }
}

/* TK_EPI_GATED_BACKWARD: P = alpha acc is the gradient of the gated
 * output h (dy Wd); aux holds z = [z_gate | z_up] (M x 2N); D is M x 2N:
 * dz_up = P act(z_gate) is stored here, at columns N + col.. of D (p->c,
 * p->ldc: D in C's place), and dz_gate = P z_up act'(z_gate) left in the
 * accumulators for the C epilogue (columns col.., p->n = N). */
template <int BN, int ACT>
static __device__ __forceinline__ void k30_epi_gated_backward(const k30_params *p, float *acc, int row, int col)
{
    const int N = p->n;
    const float alpha = p->epi_alpha;
    const bool row_ok0 = row < p->m, row_ok1 = row + 8 < p->m;
    const int64_t r0 = row_ok0 ? row : 0;
    const uint16_t *const arow = p->epi_aux + r0 * p->epi_ldaux;
    const int esz = p->c_bf16 ? 2 : 4;
    uint8_t *const drow = (uint8_t *)p->c + (r0 * p->ldc + N) * esz;
    const bool apairs = p->epi_aux_pairs && N % 2 == 0, dpairs = p->c_pairs && N % 2 == 0;
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        const int cc = col + 8 * j;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            float *v = acc + 4 * j + 2 * h;
            const bool ok = h ? row_ok1 : row_ok0;
            const bool in0 = ok && cc < N, in1 = ok && cc + 1 < N;
            const uint16_t *const q = arow + (h ? 8 * p->epi_ldaux : 0) + cc;
            float zg[2] = { 0.0f, 0.0f }, zu[2] = { 0.0f, 0.0f };
            if (apairs && in1) {
                const uint32_t wg = *(const uint32_t *)q, wu = *(const uint32_t *)(q + N);
                zg[0] = tk_bf16_to_f32((uint16_t)(wg & 0xFFFF));
                zg[1] = tk_bf16_to_f32((uint16_t)(wg >> 16));
                zu[0] = tk_bf16_to_f32((uint16_t)(wu & 0xFFFF));
                zu[1] = tk_bf16_to_f32((uint16_t)(wu >> 16));
            } else {
                if (in0) {
                    zg[0] = tk_bf16_to_f32(q[0]);
                    zu[0] = tk_bf16_to_f32(q[N]);
                }
                if (in1) {
                    zg[1] = tk_bf16_to_f32(q[1]);
                    zu[1] = tk_bf16_to_f32(q[N + 1]);
                }
            }
            float du[2];
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const float dh = __fmul_rn(alpha, v[e]);
                du[e] = tk_epi_dup(ACT, dh, zg[e]);
                v[e] = tk_epi_dgate(ACT, dh, zg[e], zu[e]);
            }
            uint8_t *const d = drow + ((h ? 8 * p->ldc : 0) + cc) * esz;
            if (dpairs && in1) {
                if (p->c_bf16)
                    *(uint32_t *)d = k30_pack_bf16x2(du[0], du[1]);
                else
                    *(float2 *)d = make_float2(du[0], du[1]);
            } else {
#pragma unroll
                for (int e = 0; e < 2; e++)
                    if (e ? in1 : in0) {
                        if (p->c_bf16)
                            ((uint16_t *)d)[e] = tk_f32_to_bf16(du[e]);
                        else
                            ((float *)d)[e] = du[e];
                    }
            }
        }
    }
}

/* The kinds an instance of k30_epi_transform takes (GATE, a mask): the
 * plain ones (bias_act, backward), gated_backward, gated. Each arm is
 * compiled only where it can run: k30_epi_store's chunks take the first
 * two (k31's the first alone: its consumers, with the cluster's state
 * live, spilled 12 bytes with a gated arm), k30's gated tiles the third. */
#define K30_EPI_PLAIN 1
#define K30_EPI_GBWD 2
#define K30_EPI_GFWD 4

/* Row and column of the thread's first accumulator, then the kind's pass
 * with its activation (and aux or none) as constants: one branch a tile. */
template <int BN, int ACT, int GATE>
static __device__ __forceinline__ void k30_epi_arm(const k30_params *p, float *acc, int row, int col, const float *sb)
{
    if ((GATE & K30_EPI_GFWD) && ACT != TK_ACT_NONE && p->epi_gated) {   /* gated needs an activation */
        p->epi_aux ? k30_epi_gated<BN, ACT, 1>(p, acc, row, col) : k30_epi_gated<BN, ACT, 0>(p, acc, row, col);
        return;
    }
    if (!(GATE & K30_EPI_PLAIN))
        return;
    if (ACT != TK_ACT_NONE && p->epi_kind == TK_EPI_BACKWARD)   /* so do the backward kinds */
        k30_epi_backward<BN, ACT>(p, acc, row, col);
    else if ((GATE & K30_EPI_GBWD) && ACT != TK_ACT_NONE && p->epi_kind == TK_EPI_GATED_BACKWARD)
        k30_epi_gated_backward<BN, ACT>(p, acc, row, col);
    else if (p->epi_aux)
        k30_epi_forward<BN, ACT, 1>(p, acc, row, col, sb);
    else
        k30_epi_forward<BN, ACT, 0>(p, acc, row, col, sb);
}

/* GATE: the kinds this instance takes (K30_EPI_PLAIN, ...). sb: the
 * column bias of columns c0.. staged in shared memory as fp32
 * (k30_epi_stage_bias), or null: read from global memory per column pair. */
template <int BN, int GATE>
static __device__ __forceinline__ void k30_epi_transform(const k30_params *p, float *acc, int r0, int c0, int warp,
                                                         int lane, const float *sb = nullptr)
{
    const int row = r0 + 16 * warp + (lane >> 2);
    /* c0: the tile's first product column (tn BN); gated, its output's (tn BN / 2) */
    const int col = ((GATE & K30_EPI_GFWD) && p->epi_gated ? c0 / 2 : c0) + 2 * (lane & 3);
    if (sb)
        sb += 2 * (lane & 3);
    switch (p->epi_act) {
    case TK_ACT_RELU:
        k30_epi_arm<BN, TK_ACT_RELU, GATE>(p, acc, row, col, sb);
        break;
    case TK_ACT_GELU_ERF:
        k30_epi_arm<BN, TK_ACT_GELU_ERF, GATE>(p, acc, row, col, sb);
        break;
    case TK_ACT_GELU_TANH:
        k30_epi_arm<BN, TK_ACT_GELU_TANH, GATE>(p, acc, row, col, sb);
        break;
    case TK_ACT_SILU:
        k30_epi_arm<BN, TK_ACT_SILU, GATE>(p, acc, row, col, sb);
        break;
    default:
        k30_epi_arm<BN, TK_ACT_NONE, GATE>(p, acc, row, col, sb);
        break;
    }
}

/* A swapped tile's accumulators (k36_swap_*, k38) as quads of C: acc
 * holds the consumer's 64 x BM tile of C^T, thread (warp w, lane l) C
 * columns 16w + l/4 (+8) of rows 8j + 2(l%4) (+1). Two exchanges between
 * lanes (xor 4: the row pair, xor 8: the column halves) leave lane l with
 * four consecutive columns k30_swap_col(w, l) .. + 3 of row 8j +
 * k30_swap_row(l) in out[4j .. 4j + 3], so a warp covers 8 rows x 16
 * columns a j (tk_shfl_xor_f32: inline PTX, see src/ptx/shfl.cuh). */
static __device__ __forceinline__ int k30_swap_col(int warp, int lane)
{
    return 16 * warp + 4 * (lane >> 4) + 8 * ((lane >> 3) & 1);
}
static __device__ __forceinline__ int k30_swap_row(int lane)
{
    return 2 * (lane & 3) + ((lane >> 2) & 1);
}
template <int BM>
static __device__ __forceinline__ void k30_swap_quads(const float *acc, int lane, float *out)
{
    const int odd = (lane >> 2) & 1, hi = (lane >> 3) & 1;
#pragma unroll
    for (int j = 0; j < BM / 8; j++) {
        const float *a = acc + 4 * j;          /* a[2h + e]: column + 8h, row + e */
        /* xor 4: keep row e = odd, trade the other row's values */
        const float r0 = tk_shfl_xor_f32(odd ? a[0] : a[1], 4), r1 = tk_shfl_xor_f32(odd ? a[2] : a[3], 4);
        const float k0 = odd ? a[1] : a[0], k1 = odd ? a[3] : a[2];
        /* columns 2 (i / 2) and 2 (i / 2) + 1 of the lane's group of four, halves h = 0, 1 */
        const float p00 = odd ? r0 : k0, p01 = odd ? k0 : r0;
        const float p10 = odd ? r1 : k1, p11 = odd ? k1 : r1;
        /* xor 8: keep half h = hi, trade the other half's pair */
        const float u0 = tk_shfl_xor_f32(hi ? p00 : p10, 8), u1 = tk_shfl_xor_f32(hi ? p01 : p11, 8);
        const float q0 = hi ? p10 : p00, q1 = hi ? p11 : p01;
        out[4 * j] = hi ? u0 : q0;
        out[4 * j + 1] = hi ? u1 : q1;
        out[4 * j + 2] = hi ? q0 : u0;
        out[4 * j + 3] = hi ? q1 : u1;
    }
}

/* Direct epilogue of a swapped tile at C's rows m0.., columns n0..: each
 * lane's quads stored as one 16-byte (fp32) or 8-byte (bf16) vector where C
 * allows (p->c_vec4), element by element elsewhere and at the edges;
 * alpha/beta, bounds-checked. The parameters are read into registers
 * first (a store through p->c may alias *p). */
template <int BM>
static __device__ __forceinline__ void k30_epilogue_swap_at(const k30_params *p, const float *acc, int m0, int n0,
                                                            int warp, int lane, void *c_at, int m_end)
{
#ifdef K30_DIAG_NO_EPI
    return;
#endif
    const int M = m_end, N = p->n, bf16 = p->c_bf16, vec = p->c_vec4;
    const int64_t ldc = p->ldc;
    const float alpha = p->alpha, beta = p->beta;
    char *const c = (char *)c_at;
    const int n = n0 + k30_swap_col(warp, lane);
    float out[BM / 2];
    k30_swap_quads<BM>(acc, lane, out);
#pragma unroll
    for (int j = 0; j < BM / 8; j++) {
        float *v = out + 4 * j;
        const int m = m0 + 8 * j + k30_swap_row(lane);
        if (m >= M)
            continue;
        const int64_t idx = (int64_t)m * ldc + n;
        if (vec && n + 3 < N) {
            if (bf16) {
                uint2 *q = (uint2 *)((uint16_t *)c + idx);
                if (beta != 0.0f) {
                    const uint2 old = *q;
                    v[0] = fmaf(beta, tk_bf16_to_f32((uint16_t)(old.x & 0xFFFF)), alpha * v[0]);
                    v[1] = fmaf(beta, tk_bf16_to_f32((uint16_t)(old.x >> 16)), alpha * v[1]);
                    v[2] = fmaf(beta, tk_bf16_to_f32((uint16_t)(old.y & 0xFFFF)), alpha * v[2]);
                    v[3] = fmaf(beta, tk_bf16_to_f32((uint16_t)(old.y >> 16)), alpha * v[3]);
                } else {
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        v[e] *= alpha;
                }
                *q = make_uint2(k30_pack_bf16x2(v[0], v[1]), k30_pack_bf16x2(v[2], v[3]));
            } else {
                float4 *q = (float4 *)((float *)c + idx);
                float4 w = make_float4(alpha * v[0], alpha * v[1], alpha * v[2], alpha * v[3]);
                if (beta != 0.0f) {
                    const float4 old = *q;
                    w.x = fmaf(beta, old.x, w.x);
                    w.y = fmaf(beta, old.y, w.y);
                    w.z = fmaf(beta, old.z, w.z);
                    w.w = fmaf(beta, old.w, w.w);
                }
                *q = w;
            }
        } else {
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (n + e < N)
                    tk_epilogue_store(c, idx + e, bf16 ? TK_BF16 : TK_F32, v[e], alpha, beta);
        }
    }
}

/* The swapped epilogue of a tile of the one product: C at p->c, M rows. */
template <int BM>
static __device__ __forceinline__ void k30_epilogue_swap(const k30_params *p, const float *acc, int m0, int n0,
                                                         int warp, int lane)
{
    k30_epilogue_swap_at<BM>(p, acc, m0, n0, warp, lane, p->c, p->m);
}

/* Staged epilogue of a swapped tile (p->c_tma: beta == 0, C stored by TMA):
 * the quads go into this consumer's buffer as TMA boxes of BM rows x 128
 * bytes (fp32: two boxes of 32 columns, bf16: one of 64), 128B-swizzled
 * (the 16-byte unit u of row r at r * 128 + (u ^ r % 8) * 16), and leave by
 * one thread's TMA stores, whole 128-byte row segments instead of a warp's
 * 8 rows x 64 bytes. The buffer is rewritten only after the previous
 * stores have read it. A tile taller than K30_BM (k38) has room for one
 * box (K30_RING_BUDGET_MN): fp32 C's two boxes go one after the other,
 * which leaves its ring a fifth stage (H100, docs/NOTES.md session 20,
 * three rounds: 1536^3 bf16 16.1 -> 15.7 us, fp32 17.5 both; 1536 x 1536 x
 * 3072 bf16 25.1 -> 24.1, fp32 26.0 -> 25.8). */
template <int BM>
static __device__ __forceinline__ void k30_epilogue_swap_staged(const k30_params *p, const float *acc, int m0,
                                                                int n0, int warp, int lane, uint32_t ebuf,
                                                                uint8_t *epp, int bar_id)
{
#ifdef K30_DIAG_NO_EPI
    return;
#endif
    const int tid = warp * 32 + lane;
    const float alpha = p->alpha;
    const int bf16 = p->c_bf16;
    const int col = k30_swap_col(warp, lane);
    constexpr int ONE_BOX = BM > K30_BM;       /* room for one box */
    float out[BM / 2];
    k30_swap_quads<BM>(acc, lane, out);
    /* one round, or one a box of fp32 C where there is room for one */
    const int rounds = ONE_BOX && !bf16 ? 2 : 1;
    for (int b = 0; b < rounds; b++) {
        if (tid == 0)
            tk_tma_store_wait_read(0);
        tk_bar_sync(bar_id, 128);
#pragma unroll
        for (int j = 0; j < BM / 8; j++) {
            const float *v = out + 4 * j;
            const int r = 8 * j + k30_swap_row(lane);
            if (bf16) {
                /* one box of 64 columns: unit col / 8, half (col / 4) % 2 */
                uint2 *q = (uint2 *)(epp + r * 128 + ((((col >> 3) ^ r) & 7) << 4) + ((col >> 2) & 1) * 8);
                *q = make_uint2(k30_pack_bf16x2(alpha * v[0], alpha * v[1]),
                                k30_pack_bf16x2(alpha * v[2], alpha * v[3]));
            } else if (!ONE_BOX || (col >> 5) == b) {
                /* box col / 32 (ONE_BOX: round b's box in the one room), unit (col % 32) / 4 */
                float4 *q = (float4 *)(epp + (ONE_BOX ? 0 : (col >> 5) * (BM * 128)) + r * 128 +
                                       (((((col & 31) >> 2) ^ r) & 7) << 4));
                *q = make_float4(alpha * v[0], alpha * v[1], alpha * v[2], alpha * v[3]);
            }
        }
        tk_fence_proxy_async_shared();
        tk_bar_sync(bar_id, 128);
        if (tid == 0) {
            tk_tma_store_2d(&p->map_c, ebuf, n0 + 32 * b, m0);
            if (!ONE_BOX && !bf16)
                tk_tma_store_2d(&p->map_c, ebuf + BM * 128, n0 + 32, m0);
            tk_tma_store_commit();
        }
    }
}

/* Before writing chunk buffer `buf`: the TMA store that last read it (two
 * chunks ago) must be done reading; then the whole consumer may write. */
static __device__ __forceinline__ void k30_chunk_acquire(int tid, int bar_id)
{
    if (tid == 0)
        tk_tma_store_wait_read(1);
    tk_bar_sync(bar_id, 128);
}

/* Where TMA cannot store C (p->c_tma == 0 with beta == 0: C misaligned, an
 * odd ldc, or rows not ending on 16 bytes), the consumer's 128 threads store
 * the staged 64-row chunk row by row: warp w rows w, w + 4, ..., lane l
 * column l (fp32, 32 per chunk) or columns 2l and 2l + 1 (bf16, 64 per
 * chunk), so each warp access covers 128 contiguous bytes of one row of C
 * where the direct epilogue's covered 8 rows (with it 4096 x 4097 x 4096 NT
 * took 0.288 ms, with this 0.234, against 0.204 for 4096 x 4104 x 4096).
 * The logical 16-byte unit u of staged row r sits at r * 128 + (u ^ r % 8) * 16. */
template <int GRP = 0>
static __device__ __forceinline__ void k30_chunk_store_rows(const k30_params *p, const uint8_t *bp, int col0,
                                                              int row0, int tid, void *c_at = nullptr, int m_end = 0)
{
    const int warp = tid >> 5, lane = tid & 31;
    /* Few live values (the 128 accumulators are still live here): a row
     * pointer stepped by 4 rows, this lane's columns left, rows left. */
    const int bf16 = p->c_bf16, esz = bf16 ? 2 : 4;
    const int gc = col0 + (bf16 ? 2 * lane : lane);
    const int cols_left = p->n - gc;   /* > 0: column gc exists; > 1: gc + 1 too */
    const int rows = min(64, (GRP ? m_end : p->m) - row0);
    char *q = (char *)(GRP ? c_at : p->c) + ((int64_t)(row0 + warp) * p->ldc + gc) * esz;
    const int64_t step = (int64_t)4 * p->ldc * esz;
    const uint8_t *src = bp + (lane & 3) * 4;
#pragma unroll 1
    for (int r = warp; r < rows; r += 4, q += step) {
        const uint32_t v = *(const uint32_t *)(src + r * 128 + (((lane >> 2) ^ (r & 7)) << 4));
        if (bf16) {
            if (cols_left > 1 && p->c_pairs) {
                *(uint32_t *)q = v;
            } else {
                if (cols_left > 0)
                    ((uint16_t *)q)[0] = (uint16_t)(v & 0xFFFF);
                if (cols_left > 1)
                    ((uint16_t *)q)[1] = (uint16_t)(v >> 16);
            }
        } else if (cols_left > 0) {
            *(uint32_t *)q = v;   /* beta == 0 (c_staged): C is not read */
        }
    }
}

/* After writing a chunk: meet, then store it, either by one thread's TMA
 * store of the 64 x 128-byte box (after making the generic-proxy writes
 * visible to the copy engine) or row by row. GRP (k43): into matrix z of
 * a 3-D map of C, or row by row into C at c_at, rows below m_end. */
template <int GRP = 0>
static __device__ __forceinline__ void k30_chunk_release(const k30_params *p, int tid, int bar_id, uint32_t buf,
                                                           const uint8_t *bp, int col, int row, int z = 0,
                                                           void *c_at = nullptr, int m_end = 0)
{
    if (p->c_tma) {
        tk_fence_proxy_async_shared();
        tk_bar_sync(bar_id, 128);
        if (tid == 0) {
            if (GRP)
                tk_tma_store_3d(&p->map_c, buf, col, row, z);
            else
                tk_tma_store_2d(&p->map_c, buf, col, row);
            tk_tma_store_commit();
        }
    } else {
        tk_bar_sync(bar_id, 128);
        k30_chunk_store_rows<GRP>(p, bp, col, row, tid, c_at, m_end);
    }
}

/* Staged epilogue (p->c_staged): 64 x BN through two 8 KB chunk buffers at
 * ebuf (generic pointer epp), 128B-swizzled like the TMA box expects: the
 * 16-byte chunk c of row r sits at r * 128 + ((c ^ (r % 8)) * 16); each
 * chunk then leaves by k30_chunk_release. *nchunk counts the consumer's
 * chunks over all its tiles: chunk i uses buffer i % 2, so the buffer
 * k30_chunk_acquire waits for is always the one written two chunks ago,
 * also across tiles when a tile has an odd number of chunks (bf16 C with BN
 * 64 or 192: restarting at buffer 0 each tile overwrote a buffer its last
 * TMA store could still be reading; found by `tilekit fuzz`). Columns past
 * the last whole chunk (BN 144: 16) go straight from the accumulators
 * (k30_epilogue_direct): a chunk's TMA box would write into the next tile. */
template <int BN, int GRP = 0>
static __device__ __forceinline__ void k30_epilogue_staged(const k30_params *p, const float *acc, int r0, int c0,
                                                          int warp, int lane, uint32_t ebuf, uint8_t *epp, int bar_id,
                                                          int *nchunk, int z = 0, void *c_at = nullptr, int m_end = 0)
{
#ifdef K30_DIAG_NO_EPI
    return;
#endif
    const int tid = warp * 32 + lane;
    const float alpha = p->alpha;
    if (p->c_bf16) {
        /* BN / 64 chunks of 64 columns; stmatrix x4 stores the 8x8 blocks (h, j),
         * (h+1, j), (h, j+1), (h+1, j+1); lanes 8i..8i+7 address block i. */
        const int i = lane >> 3;
        const int srow = 16 * warp + 8 * (i & 1) + (lane & 7);
#pragma unroll
        for (int q = 0; q < BN / 64; q++) {
            const int odd = (*nchunk)++ & 1;
            const uint32_t buf = ebuf + odd * K30_EPI_CHUNK;
            const uint8_t *bp = epp + odd * K30_EPI_CHUNK;
            k30_chunk_acquire(tid, bar_id);
#pragma unroll
            for (int jp = 0; jp < 4; jp++) {
                const int j = 8 * q + 2 * jp;
                const int jl = 2 * jp + (i >> 1);
                tk_stmatrix_x4(buf + srow * 128 + ((jl ^ (lane & 7)) << 4),
                               k30_pack_bf16x2(alpha * acc[4 * j], alpha * acc[4 * j + 1]),
                               k30_pack_bf16x2(alpha * acc[4 * j + 2], alpha * acc[4 * j + 3]),
                               k30_pack_bf16x2(alpha * acc[4 * j + 4], alpha * acc[4 * j + 5]),
                               k30_pack_bf16x2(alpha * acc[4 * j + 6], alpha * acc[4 * j + 7]));
            }
            k30_chunk_release<GRP>(p, tid, bar_id, buf, bp, c0 + 64 * q, r0, z, c_at, m_end);
        }
        if (BN % 64)
            k30_epilogue_direct<BN % 64, GRP>(p, acc + BN / 64 * 32, r0, c0 + BN / 64 * 64, warp, lane, c_at, m_end);
    } else {
        /* BN / 32 chunks of 32 columns; each thread writes 8-byte pairs. */
#pragma unroll
        for (int q = 0; q < BN / 32; q++) {
            const int odd = (*nchunk)++ & 1;
            const uint32_t buf = ebuf + odd * K30_EPI_CHUNK;
            uint8_t *bp = epp + odd * K30_EPI_CHUNK;
            k30_chunk_acquire(tid, bar_id);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int srow = 16 * warp + 8 * h + (lane >> 2);
#pragma unroll
                for (int jj = 0; jj < 4; jj++) {
                    const int j = 4 * q + jj;
                    const int c16 = 2 * jj + ((lane & 3) >> 1);
                    float2 *dst = (float2 *)(bp + srow * 128 + ((c16 ^ (lane >> 2)) << 4) + (lane & 1) * 8);
                    *dst = make_float2(alpha * acc[4 * j + 2 * h], alpha * acc[4 * j + 2 * h + 1]);
                }
            }
            k30_chunk_release<GRP>(p, tid, bar_id, buf, bp, c0 + 32 * q, r0, z, c_at, m_end);
        }
        if (BN % 32)
            k30_epilogue_direct<BN % 32, GRP>(p, acc + BN / 32 * 16, r0, c0 + BN / 32 * 32, warp, lane, c_at, m_end);
    }
}

/* A fused epilogue's tile (the EPI instances, every kind but gated):
 * k30_epi_transform and the C epilogue 64 columns at a time, in a loop
 * that is not unrolled, the next chunk's accumulators moved down into
 * acc[0..31] (96 moves a chunk). Unrolled, the transform of 128
 * accumulators is 40-50 KB of straight-line code run once a tile, fetched
 * cold on most tiles: ncu's warp states at 2048 x 3072 x 768 (GPT-2's
 * bias + GELU, H200) were 41% no_instruction against 8% in the plain
 * kernel (docs/NOTES.md session 27); a quarter of it, run four times,
 * stays in the instruction cache. */
template <int BN, int GATE>
static __device__ __forceinline__ void k30_epi_store(const k30_params *p, float *acc, int r0, int c0, int warp,
                                                     int lane, uint32_t ebuf, uint8_t *epp, int bar_id, int *nchunk,
                                                     const float *sb = nullptr)
{
    static_assert(BN % 64 == 0, "whole 64-column chunks");
#pragma unroll 1
    for (int q = 0; q < BN / 64; q++) {
        k30_epi_transform<64, GATE>(p, acc, r0, c0 + 64 * q, warp, lane, sb ? sb + 64 * q : nullptr);
        if (p->c_staged)
            k30_epilogue_staged<64>(p, acc, r0, c0 + 64 * q, warp, lane, ebuf, epp, bar_id, nchunk);
        else
            k30_epilogue_direct<64>(p, acc, r0, c0 + 64 * q, warp, lane);
#pragma unroll
        for (int i = 0; i < BN / 2 - 32; i++)
            acc[i] = acc[i + 32];
    }
}
#endif

/* The kernel instance for the operand majors of a problem. */
#define K30_SELECT(kernel, op_a, op_b)                                                                               \
    ((op_a) == TK_OP_T ? ((op_b) == TK_OP_N ? (const void *)kernel<1, 1> : (const void *)kernel<1, 0>)             \
                       : ((op_b) == TK_OP_N ? (const void *)kernel<0, 1> : (const void *)kernel<0, 0>))
/* The same for a kernel with more template arguments after the majors. */
#define K30_SELECT_CFG(kernel, op_a, op_b, ...)                                                                      \
    ((op_a) == TK_OP_T                                                                                             \
         ? ((op_b) == TK_OP_N ? (const void *)kernel<1, 1, __VA_ARGS__> : (const void *)kernel<1, 0, __VA_ARGS__>) \
         : ((op_b) == TK_OP_N ? (const void *)kernel<0, 1, __VA_ARGS__> : (const void *)kernel<0, 0, __VA_ARGS__>))

/* Support check shared by the family. Tile corners and TMA coordinates
 * are 32-bit ints: a CTA's last tile reaches m_slack rows past M at most
 * (K30_BM; a cluster's last row of tiles, K31_CLUSTER * K30_BM) and up to
 * K30_BN columns past N (the direct epilogue compares r0 + 64 with M and
 * c0 + BN with N), so those ends must stay below 2^31 too. */
static inline tk_status k30_supports_common(const tk_args *a, const tk_device *dev, int64_t m_slack, char *why,
                                            size_t len)
{
    if (dev->sm != 90) {
        snprintf(why, len,
                 "needs sm_90a (wgmma, setmaxnreg and TMA code built for sm_90a runs only on sm_90); this GPU is "
                 "sm_%d",
                 dev->sm);
        return TK_ERR_NOT_SUPPORTED;
    }
    if (a->m > INT32_MAX - m_slack || a->n > INT32_MAX - K30_BN || a->k > INT32_MAX) {
        snprintf(why, len,
                 "tile corners and TMA coordinates are 32-bit: M must be at most 2^31 - 1 - %lld, N at most "
                 "2^31 - 1 - %d and K below 2^31",
                 (long long)m_slack, K30_BN);
        return TK_ERR_NOT_SUPPORTED;
    }
    /* C has no requirement: the direct epilogue stores single elements
     * where pairs would be misaligned (k30_epilogue_direct). */
    const size_t es = a->fp8 ? 1 : 2;   /* FP8: one-byte elements */
    tk_status st = tk_tma_check("A", a->a, a->lda, es, why, len);
    if (st == TK_SUCCESS)
        st = tk_tma_check("B", a->b, a->ldb, es, why, len);
    return st;
}

/* Support check of a fused epilogue (a->epi; nothing to check without
 * one). The EPI instances (k30_epi_transform) exist for the unswapped
 * configurations auto-dispatch gives MLP-like shapes (has_instance: the
 * configuration is one; `none` says why not where it is not) and do
 * TK_EPI_BIAS_ACT and TK_EPI_BACKWARD so far; the rest is refused here
 * with its reason, and k01_naive takes it. */
static inline tk_status k30_supports_epi(const tk_args *a, int has_instance, int gated, const char *none, char *why,
                                         size_t len)
{
    const tk_epi_args *e = a->epi;
    if (!e)
        return TK_SUCCESS;
    if (!has_instance) {
        snprintf(why, len, "epilogue: %s", none);
        return TK_ERR_NOT_SUPPORTED;
    }
    if ((e->kind == TK_EPI_GATED || e->kind == TK_EPI_GATED_BACKWARD) && !gated) {
        snprintf(why, len, "epilogue: the gated kinds are not fused in this kernel yet (k30_wgmma_tma fuses them)");
        return TK_ERR_NOT_SUPPORTED;
    }
    tk_status st = tk_check_b_up(a, "TMA", why, len);
    if (st)
        return st;
    if (e->bias_grad) {
        snprintf(why, len, "bias_grad: its column sums are not fused yet (k01_naive computes them)");
        return TK_ERR_NOT_SUPPORTED;
    }
    if (a->beta != 0.0f && (e->d != a->c || e->ldd != a->ldc)) {
        snprintf(why, len,
                 "d: a D apart from C with beta != 0 (C read as the residual, D written) is not supported yet "
                 "(the C epilogue reads and writes one matrix; expected d == c, or beta == 0)");
        return TK_ERR_NOT_SUPPORTED;
    }
    if (a->k == 0) {
        snprintf(why, len, "k: 0 with an epilogue (the tile loop needs a k-tile; k01_naive applies the formula to P = 0)");
        return TK_ERR_NOT_SUPPORTED;
    }
    return TK_SUCCESS;
}

/* The problem as an EPI instance stores it: D (tk_epi_args.d, ldd) in C's
 * place, which is C itself where beta != 0 (k30_supports_epi), and where
 * beta == 0 C is not read. Without an epilogue, a itself. */
static inline const tk_args *k30_epi_target(const tk_args *a, tk_args *t)
{
    if (!a->epi)
        return a;
    *t = *a;
    t->c = a->epi->d;
    t->ldc = a->epi->ldd;
    /* GATED: D's N / 2 (the maps of B are made again, k30_fill_gated);
     * GATED_BACKWARD: the product's N, the tile of dz_gate (D has 2N) */
    t->n = a->epi->kind == TK_EPI_GATED ? a->epi->out_cols : a->n;
    return t;
}

/* The epilogue's fields of p (k30_params, after k30_fill_params): alpha
 * moves to epi_alpha, applied by k30_epi_transform, and the C epilogue
 * runs with alpha 1. */
static inline void k30_fill_epi(k30_params *p, const tk_args *a)
{
    const tk_epi_args *e = a->epi;
    p->epi_kind = e->kind;
    p->epi_act = e->act;
    p->epi_bias = e->bias;
    p->epi_bias_bf16 = e->bias_bf16;
    p->epi_bias_rows = e->bias_rows;
    p->epi_aux = (uint16_t *)e->aux;
    p->epi_ldaux = e->ldaux;
    p->epi_aux_pairs = e->ldaux % 2 == 0 && (uintptr_t)e->aux % 4 == 0;
    p->epi_alpha = p->alpha;
    p->alpha = 1.0f;
}

/* TK_EPI_GATED's B (k30_params.epi_gated): the gate's N / 2 columns of
 * op(B) (map_b) and the up half's of op(b_up) (map_bu), each a box of 128
 * rows (K-major; k31's pair: one box a CTA) or 64 x 64 boxes (N-major),
 * and tiles of 128 output columns. a: the call's arguments (N the
 * product's width); p filled by k30_fill_params and k30_fill_epi. */
static inline tk_status k30_fill_gated(k30_params *p, const tk_args *a, int bn, char *why, size_t len)
{
    const tk_epi_args *e = a->epi;
    const int64_t half = a->n / 2;
    p->epi_gated = 1;
    p->tiles_n = (int)((half + bn / 2 - 1) / (bn / 2));
    for (int u = 0; u < 2; u++) {
        CUtensorMap *map = u ? &p->map_bu : &p->map_b;
        const void *base = u ? e->b_up : a->b;
        tk_status st = a->op_b == TK_OP_T
                           ? tk_tma_map_2d(a->lc, map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, half, a->k, a->ldb,
                                           (uint32_t)(bn / 2), K30_BK, CU_TENSOR_MAP_SWIZZLE_128B, why, len)
                           : tk_tma_map_2d(a->lc, map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, a->k, half, a->ldb,
                                           K30_BK, 64, CU_TENSOR_MAP_SWIZZLE_128B, why, len);
        if (st)
            return st;
    }
    return TK_SUCCESS;
}

/* FP8 operands' fields of p: the scale mode, the scales and their
 * k-block strides (one product's; k43_launch sets the strides between
 * products' scales after this). */
static inline void k30_fill_fp8(k30_params *p, const tk_fp8_args *f)
{
    p->f8_mode = f->mode;
    p->f8_sa = f->sa;
    p->f8_sb = f->sb;
    p->f8_ld_sa = f->ld_sa;
    p->f8_ld_sb = f->ld_sb;
}

/* Tensor maps of A and B and the sizes of a launch with A tiles of bm rows
 * and B tiles of bn; B's K-major box is bn / cluster rows (each CTA of a
 * cluster loads that share). */
static inline tk_status k30_fill_params(k30_params *p, const tk_args *a, int cluster, int bm, int bn, char *why,
                                        size_t len)
{
    memset(p, 0, sizeof *p);
    tk_status st;
    p->a_rows = bm;
    p->a_boxes = (bm + 63) / 64;
    if (cluster == 1 && a->m < bm) {
        p->a_rows = (int)((a->m + 7) / 8 * 8);
        p->a_boxes = (int)((a->m + 63) / 64);
    }
    p->a_bytes = (a->op_a == TK_OP_N ? p->a_rows : 64 * p->a_boxes) * K30_BK * 2;
    /* FP8 (K-major only, k30_supports_fp8): one-byte codes, 128 of K a
     * 128-byte row, so the boxes' bytes are bf16's */
    const CUtensorMapDataType kt = a->fp8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const size_t es = a->fp8 ? 1 : 2;
    const uint32_t bk = a->fp8 ? 2 * K30_BK : K30_BK;
    /* A: M x K (K-major, box a_rows x BK) or stored K x M (M-major, 64 x 64 boxes). */
    if (a->op_a == TK_OP_N)
        st = tk_tma_map_2d(a->lc, &p->map_a, kt, es, a->a, a->m, a->k, a->lda, (uint32_t)p->a_rows, bk,
                           CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    else
        st = tk_tma_map_2d(a->lc, &p->map_a, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a->a, a->k, a->m, a->lda, K30_BK, 64,
                           CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    if (st)
        return st;
    /* B: stored N x K (op T, K-major) or K x N (op N, N-major, 64 x 64 boxes). */
    if (a->op_b == TK_OP_T)
        st = tk_tma_map_2d(a->lc, &p->map_b, kt, es, a->b, a->n, a->k, a->ldb, (uint32_t)(bn / cluster), bk,
                           CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    else
        st = tk_tma_map_2d(a->lc, &p->map_b, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a->b, a->k, a->n, a->ldb, K30_BK, 64,
                           CU_TENSOR_MAP_SWIZZLE_128B, why, len);
    if (st)
        return st;
    p->c = a->c;
    p->ldc = a->ldc;
    p->m = (int)a->m;
    p->n = (int)a->n;
    p->tiles_m = (int)((a->m + bm - 1) / bm);
    p->tiles_n = (int)((a->n + bn - 1) / bn);
    p->k_tiles = (int)((a->k + bk - 1) / bk);
    p->alpha = a->alpha;
    p->beta = a->beta;
    p->c_bf16 = a->c_type == TK_BF16;
    p->c_pairs = a->ldc % 2 == 0 && (uintptr_t)a->c % (a->c_type == TK_F32 ? 8 : 4) == 0;
    p->c_vec4 = a->ldc % 4 == 0 && (uintptr_t)a->c % (a->c_type == TK_F32 ? 16 : 8) == 0;
    if (a->fp8)
        k30_fill_fp8(p, a->fp8);
    return TK_SUCCESS;
}

/* Support check of FP8 operands (a->fp8; nothing to check without them):
 * the configurations with an FP8 instance (has_instance; k30_fp8.cu) and
 * the layout FP8 wgmma reads. */
static inline tk_status k30_supports_fp8(const tk_args *a, int has_instance, char *why, size_t len)
{
    if (!a->fp8)
        return TK_SUCCESS;
    if (!has_instance) {
        snprintf(why, len,
                 "FP8 operands: only k33_wgmma_128x128 and the swapped k36_swap_* have FP8 instances among k30's "
                 "configurations (k31_wgmma_cluster and k45_cluster_128x128 have them too)");
        return TK_ERR_NOT_SUPPORTED;
    }
    if (a->op_a != TK_OP_N || a->op_b != TK_OP_T) {
        snprintf(why, len,
                 "FP8 operands: wgmma reads 8-bit A and B K-major only: op_a N (A stored M x K) and op_b T (B "
                 "stored N x K) in the row-major problem; this call has op_a %s, op_b %s",
                 a->op_a == TK_OP_N ? "N" : "T", a->op_b == TK_OP_N ? "N" : "T");
        return TK_ERR_NOT_SUPPORTED;
    }
    if (a->k == 0) {
        snprintf(why, len, "k: 0 with FP8 operands (the tile loop needs a k-tile; k01_naive stores beta * C)");
        return TK_ERR_NOT_SUPPORTED;
    }
    return TK_SUCCESS;
}

/* Launch errors -> TK_ERR_CUDA with the message. */
static inline tk_status k30_launch_status(cudaError_t e, char *why, size_t len)
{
    if (e == cudaSuccess)
        e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "launch: %s", cudaGetErrorString(e));
        cudaGetLastError();
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}

/* Split workspace (every kernel of the family): one slot of 128 x 128
 * fp32 partial accumulators (64 KB) per partial unit, CTA and consumer
 * warpgroup, each with a flag in the handle's flag area (tk_args.flags,
 * which holds launch numbers alone: a flag of an older launch of any
 * kernel is below seq). Fewer than max_clusters tiles are split, into at
 * most K30_SK_MAX_SLICES slices of which all but the last leave a partial. */
#define K30_SK_MAX_SLICES 3
#ifndef K30_SK_MIN_SLICE_KTILES
#define K30_SK_MIN_SLICE_KTILES 16
#endif
/* A last wave's slices (k30_plan_split_wave) may be shorter: their
 * fix-up (two partial sums read back) costs a few k-tiles of a 128 x 256
 * tile. k31 at 3000^3 (47 k-tiles, 12 of 144 cluster tiles in the last
 * wave), H100, fp32 C, the same run: 2 slices 92.4 us, 3 slices of 15-16
 * k-tiles 90.3, 4 or 5 slices 90.1 (docs/NOTES.md, session 17). */
#define K30_SK_WAVE_MIN_SLICE_KTILES 12
/* Fewer tiles than clusters (512 x 4096 x 4096: 32 cluster tiles for 66
 * clusters): every tile split into up to 4 slices, again of at least
 * K30_SK_MIN_SLICE_KTILES k-tiles. Measured on the H100 (k31 alone, medians
 * of two runs, ms, unsplit / 2 / 3 / 4 slices of >= 4 k-tiles): 1000^3
 * 0.0189 / 0.0198 / 0.0200 / 0.0221 and 1024^3 0.0196 / 0.0199 / 0.0204 /
 * 0.0222 (16 k-tiles: the partial sums cost more than they save), 1536^3
 * 0.025 for all, 2048 x 1024 x 2048 0.0291 / 0.0256, 300 x 600 x 4000
 * 0.0456 / 0.0321 / 0.0278 / 0.0269, 512 x 4096 x 4096 0.0478 / 0.0391,
 * 256 x 4096 x 14336 0.138 / 0.0835 / 0.0680 / 0.0677: slices of 16
 * k-tiles or more win, shorter ones lose. */
#ifndef K30_SK_FEW_MAX_SLICES
#define K30_SK_FEW_MAX_SLICES 4
#endif
/* subs: slots a unit (consumer warpgroups x CTAs of a cluster). Bytes of
 * partial slots, and in *nflags their completion flags (one a slot). */
static inline size_t k30_sk_bytes(int max_clusters, int subs, size_t *nflags)
{
    /* enough for both plans: a few-tile split has tiles * (s - 1) <
     * max_clusters partial units, a last-wave split fewer than
     * max_clusters * (K30_SK_MAX_SLICES - 1) */
    size_t slots = (size_t)max_clusters * (K30_SK_MAX_SLICES - 1) * subs;
    *nflags = slots;
    return slots * K30_SK_SLOT_BYTES;
}

/* The block N auto-dispatch gives a problem among the k30 family (256:
 * k31, or k30 where k31 steps back; 192: k35_wgmma_128x192; 128:
 * k33_wgmma_128x128; 64: k34_wgmma_128x64), for sms SMs. Rules read off one H100 run of the `all`
 * suite with every configuration timed (docs/NOTES.md, session 4, "Pick
 * rules rewritten"): over its 189 shapes they picked a configuration on
 * average 0.1% slower than the best of the four, where the rules before
 * split-K and short A boxes lost 8%; after the staged epilogue came to all
 * configurations, 0.73% (misses listed in NOTES). Decode (M <= 128: one block row): k34, whose 128 x 64
 * tiles give the most CTAs and whose few-tile split then fills the SMs
 * (1 x 28672 x 4096: k34 0.098 ms, k33 0.099, k30 0.105, k31 0.135;
 * 1 x 6144 x 4096: 0.031 / 0.034 / 0.044 / 0.044). Small problems whose
 * 128 x 64 tiles fit one wave: k34 (1024^3 0.0103 / 0.0136 / 0.0220 /
 * 0.0181). One wave of 128 x 128 tiles, or two of 128 x 256 with short K:
 * k33 (512 x 4096 x 14336 0.087 against k31's 0.091), and so are up to four
 * waves of them with K of at most 16 k-tiles. Else k31. A stand-in for a
 * cost model. */
/* The share of the launched waves that tiles fill: tiles on `slots`
 * CTAs (or clusters) run in ceil(tiles / slots) waves. */
static inline double k30_wave_fill(long long tiles, int slots)
{
    const long long waves = (tiles + slots - 1) / slots;
    return waves > 0 ? (double)tiles / (double)(waves * slots) : 0.0;
}

/* Rows of A or B that are not 128-byte multiples (1000^3: 2000 B) split
 * each TMA row into several L2 requests: ncu, k34 at 1000^3 904K L2 read
 * requests against 197K at 1024^3; the 128 x 128 tiles read A half as
 * often (1000^3: k33 0.0130 ms, k34 0.0138-0.0141). */
static inline int k30_ragged(const tk_args *a)
{
    return (a->lda * 2) % 128 != 0 || (a->ldb * 2) % 128 != 0;
}

/* k30_pick_bn's first rules, for problems of few tiles: 64 or 128, or 0
 * where none of them applies. */
static inline int k30_pick_small(const tk_args *a, int sms)
{
    const long long rows = (a->m + K30_BM - 1) / K30_BM;
    const long long t64 = rows * ((a->n + 63) / 64), t128 = rows * ((a->n + 127) / 128);
    const long long t256 = rows * ((a->n + 255) / 256);
    const long long k_tiles = (a->k + K30_BK - 1) / K30_BK;
    if (a->n <= 64 || rows == 1)
        return 64;
    if (t64 <= sms && k_tiles < 200)
        return k30_ragged(a) && t128 <= sms ? 128 : 64;
    if (a->n <= 128 || t128 <= sms)
        return 128;
    if (2 * t256 <= sms && k_tiles < 8 * K30_SK_MIN_SLICE_KTILES)
        return 128;
    return 0;
}

static inline int k30_pick_bn(const tk_args *a, int sms)
{
    const int small = k30_pick_small(a, sms);
    if (small)
        return small;
    const long long rows = (a->m + K30_BM - 1) / K30_BM;
    const long long t128 = rows * ((a->n + 127) / 128);
    const long long k_tiles = (a->k + K30_BK - 1) / K30_BK;
    const int ragged = k30_ragged(a);
    /* 128 x 144 tiles where at most two waves of them are almost full and
     * both 128 x 128 and 128 x 192 leave much of their last wave empty
     * (H100, x cuBLAS: 512 x 4608 x 3584 NT k37 0.883, k35 0.845, k33 0.803;
     * 2048 x 2304 x 768 NT k37 0.931, k33 0.828; NOTES, session 13). Only
     * op_b T: an N-major B tile loads three 64-wide boxes (1536^3 NN: 132
     * tiles, k37 0.770, k35 0.810; k30_pick_tall gives such shapes k38). */
    const long long t144 = rows * ((a->n + 143) / 144), t192 = rows * ((a->n + 191) / 192);
    const double f144 = k30_wave_fill(t144, sms);
    if (a->op_b == TK_OP_T && !ragged && t144 <= 2 * sms && f144 >= 0.9 &&
        f144 >= fmax(k30_wave_fill(t128, sms), k30_wave_fill(t192, sms)) + 0.15)
        return 144;
    /* Short K on a few waves of 128 x 128 tiles: k31's 128 x 256 tiles
     * spend most of their time outside the main loop (2048 x 2304 x 768 NT:
     * k31 0.0276 ms, k33 0.0228; 2048 x 3072 x 768 NT 0.0286 / 0.0243). */
    if (k_tiles <= 16 && t128 <= 4 * sms)
        return 128;
    /* 128 x 192 tiles where their last wave is much fuller than that of
     * k31's 256 x 256 cluster tiles (1536^3: 96 tiles on 132 SMs against 36
     * cluster tiles on 66 clusters; 3072^3: 2.91 waves against 2.18): k35
     * 1.07-1.23x faster on the 7 suite shapes where this holds (NOTES,
     * session 5). Not with ragged rows, where k31's multicast of B matters
     * more (3000^3: k35 0.1345 ms, k31 0.1012). */
    const long long ct256 = ((rows + 1) / 2) * ((a->n + 255) / 256);
    if (!ragged && k30_wave_fill(t192, sms) >= k30_wave_fill(ct256, sms / 2) + 0.1)
        return 192;
    return 256;
}

/* Whether auto-dispatch gives a problem to k38_swap_144x128: where 128 x
 * 144 tiles would fill the waves as k30_pick_bn's 144 rule asks (at most
 * two, the last at least 0.9 full and 0.15 fuller than with 128 x 128 and
 * 128 x 192 tiles), but B is N-major (op_b N), so k37's 144-wide B tile
 * would load three 64-wide boxes a stage. k38 computes the product swapped
 * in 144 x 128 tiles: A's 144 rows one K-major box (op_a N), B's 128
 * columns two boxes. Measured (H100, x cuBLAS in the same run; NOTES,
 * session 16): 1536^3 NN fp32 17.5 us against k35's 19.0 (0.90x against
 * 0.83x), bf16 16.2 / 17.5; 1536 x 1536 x 768 NN 13.6 / 14.2. */
static inline int k30_pick_tall(const tk_args *a, int sms)
{
    if (a->op_a != TK_OP_N || a->op_b != TK_OP_N || k30_ragged(a) || k30_pick_small(a, sms))
        return 0;
    const long long rows = (a->m + K30_BM - 1) / K30_BM;
    const long long t128 = rows * ((a->n + 127) / 128), t192 = rows * ((a->n + 191) / 192);
    const long long tall = (a->m + 143) / 144 * ((a->n + 127) / 128);
    const double f = k30_wave_fill(tall, sms);
    return tall <= 2 * sms && f >= 0.9 && f >= fmax(k30_wave_fill(t128, sms), k30_wave_fill(t192, sms)) + 0.15;
}

/* Whether k30_plan_split_wave may split a problem of `tiles` (cluster)
 * tiles and k_tiles k-tiles on max_clusters clusters, i.e. whether its
 * launch should get the workspace. */
static inline int k30_sk_may_split(long long tiles, int k_tiles, int max_clusters)
{
    return tiles > max_clusters ||
           (2 * tiles <= max_clusters && k_tiles >= 2 * K30_SK_MIN_SLICE_KTILES);
}

/* Slices of each tile where tiles < clusters (k30_plan_split_wave): the
 * most s <= K30_SK_FEW_MAX_SLICES with tiles * s <= clusters and slices of
 * at least K30_SK_MIN_SLICE_KTILES k-tiles; 1: unsplit. */
static inline int k30_few_slices(long long tiles, int k_tiles, int clusters)
{
    int sl = K30_SK_FEW_MAX_SLICES;
    while (sl > 1 && (tiles * sl > clusters || k_tiles < sl * K30_SK_MIN_SLICE_KTILES))
        sl--;
    return sl;
}

/* The tile rows (16, 32, 48, 64 or 72) auto-dispatch gives k36_swap_*, or 0 where
 * the k30 family's tiles are better, for sms SMs; pure host arithmetic
 * (CPU-tested). Measured on the H100 (docs/NOTES.md, session 11): the
 * narrow tiles win where they fit one wave (16 x 64: 32 x 768 x 768 NT 7.1
 * us against k40's 8.4, 64 x 768 x 768 7.2 against k34's 8.2, 256^3 6.6
 * against 7.0; 32 x 64: 64 x 4096 x 4096 NT 22.3 against 23.6, 512^3 7.9
 * against 8.4) and lose badly beyond it (1024^3 k36_swap_32x64 20.4 against
 * 10.3: their loop takes ~400 cycles a k-tile even with no loads, where
 * k34's tiles do four times the work a k-tile). Of the configurations
 * that fit, the one whose longest unit (k-tiles after k30_few_slices) reads
 * the fewest bytes, each extra slice counted as K30_SWAP_SLICE_COST more
 * (the fix-up: ~5000 cycles in session 9's trace, ~10 k-tiles): 128 x 768 x
 * 3072 NT 16 x 64 96 tiles of 48 k-tiles (12.9 us) against 32 x 64 48 tiles
 * in 2 slices of 24 (11.9); 64 x 768 x 3072 NT 16 x 64 in 2 slices of 24
 * (11.6) against 32 x 64 in 3 of 16 (12.0). Where B is a DRAM stream
 * (K30_SWAP_STREAM_BYTES or more), splits do not pay: the narrowest tiles
 * that fit one wave unsplit (32 x 3584 x 3584 NT: 16 x 64, 112 tiles, 19.0
 * us; 32 x 64 in 2 slices, 20.5). Only op_a N (k36's A tile is K-major),
 * N >= 64, units of at most K30_SWAP_MAX_UNIT_KTILES k-tiles (longer ones
 * are DRAM-bound streams, k34's or k40's). 72-row tiles (k36_swap_72x64)
 * only where no other one fits one wave (H100, fp32 C, us; NOTES, session
 * 21): 768^3 NN in 132 of them 7.8 against k42's 64 x 128 tiles' 8.1
 * (three rounds), 129 x 4096 x 4096 NT 18.1-18.3 against k42's 20.7-21.7
 * (cuBLAS 18.6-18.8), 768 x 768 x 776 NT (rows of 1552 bytes) 10.1-10.3
 * against k33's 11.1. */
#define K30_SWAP_MAX_UNIT_KTILES 64
#define K30_SWAP_SLICE_COST 768        /* 128-byte rows: ~10 k-tiles of 16 x 64 */
#define K30_SWAP_STREAM_BYTES (16LL << 20)
/* Whether B (2 N K bytes) is a DRAM stream in k30_pick_swap's sense. */
static inline int k30_swap_stream(const tk_args *a)
{
    return 2 * a->n * a->k >= K30_SWAP_STREAM_BYTES;
}
/* k30_pick_swap for elements of es bytes (bf16 2, FP8 1): the rule counts
 * 128-byte rows, so a k-tile is 128 / es values of K (FP8's are 128) and
 * B's stream es N K bytes. */
static inline int k30_pick_swap_es(const tk_args *a, int sms, int es)
{
    /* N < 64 leaves most of wgmma's 64 rows of B empty (4096 x 8 x 4096:
     * k40's swapped form) */
    if (a->op_a != TK_OP_N || a->n < 64)
        return 0;
    const int k_tiles = (int)((a->k * es + 127) / 128);
    const long long tn = (a->n + 63) / 64;
    const int stream = es * a->n * a->k >= K30_SWAP_STREAM_BYTES;
    int best = 0;
    long long best_cost = 0;
    for (int bm = 16; bm <= 72; bm += bm < 64 ? 16 : 8) {
        /* 64-row tiles only where no narrower one fits a wave: split in
         * two they lost to 32-row tiles unsplit (128 x 2048 x 2048 NT 11.3
         * us against 10.1, 100 x 2000 x 2048 10.6 / 9.3; NOTES, session 16);
         * 72-row tiles only where no other one does */
        if (bm >= 64 && best)
            break;
        const long long tiles = (a->m + bm - 1) / bm * tn;
        if (tiles > sms)
            continue;
        if (stream)
            return k_tiles <= K30_SWAP_MAX_UNIT_KTILES ? bm : 0;
        const int sl = k30_few_slices(tiles, k_tiles, sms);
        const long long unit = (k_tiles + sl - 1) / sl;
        /* rows of 128 bytes a k-tile: 64 of B and bm of A */
        const long long cost = unit * (64 + bm) + (sl - 1) * K30_SWAP_SLICE_COST;
        if (unit <= K30_SWAP_MAX_UNIT_KTILES && (!best || cost < best_cost)) {
            best = bm;
            best_cost = cost;
        }
    }
    return best;
}
static inline int k30_pick_swap(const tk_args *a, int sms)
{
    return k30_pick_swap_es(a, sms, 2);
}

/* The tile rows of k36_swap_*'s FP8 instance auto-dispatch gives an FP8
 * problem, or 0 (K-major A and B only). The bf16 rule in FP8's bytes: a
 * swapped tile set that fits one wave against k31's and k45's 2-CTA
 * clusters of 128-row tiles, which at M <= 128 are half or more zero fill
 * and, with 17-56 cluster tiles on 66 cluster slots (64 x 2112 x 7168: 17),
 * need split-K to fill the SMs; the swapped tiles fill the wave with
 * useful rows (64 x 2112 x 7168: 66 tiles of 32 x 64 in 2 slices) and read
 * 64 + bm rows a k-tile where a 128 x 128 cluster CTA reads 128 + 64.
 * Where none fits one wave (128 x 7168 x 2048: 224 tiles of 64 x 64) the
 * 128-row tiles stay: beyond a wave the narrow tiles lost for bf16
 * (k30_pick_swap). M <= 128 only: there the second CTA of every k31 or
 * k45 cluster (rows 128-255) is all zero fill, half the SMs; past 128
 * rows the clusters' tiles fill, and a 128 x 128 CTA reads 192 rows of 128
 * bytes (B multicast) for 128 x 128 x 128 products where a swapped 64 x 64
 * tile reads 128 for 64 x 64 x 128: 2.7 times the L2 bytes a product
 * (unmeasured: 256 x 2112 x 7168 would take 64 x 64 tiles by the bf16
 * rule). Unlike bf16, no k40 below them: k40 takes no FP8. */
#define K30_SWAP_FP8_MAX_M 128
/* Block scales: the swapped tiles run at about half their per-tensor rate
 * (reading the scales a stage ahead did not change that: NOTES session 31),
 * so k31 (split along K) stays where its tiles were faster. Measured (H200,
 * TFLOP/s, swapped / k31; `tilekit bench --dtype e4m3 --scale block`):
 * 16x4096x4096 31/21, 32x2112x7168 47/33, 64x2112x7168 85/68, 64x7168x2048
 * 110/92 (swapped); 64x4096x7168 97/124, 128x2112x7168 107/133,
 * 128x4096x7168 173/252, 128x7168x2048 176/176 (k31). */
#define K30_SWAP_FP8_BLOCK_MAX_M 64
static inline int k30_pick_swap_fp8(const tk_args *a, int sms)
{
    if (!a->fp8 || a->op_b != TK_OP_T || a->m > K30_SWAP_FP8_MAX_M)
        return 0;
    if (a->fp8->mode == TK_SCALE_BLOCK && (a->m > K30_SWAP_FP8_BLOCK_MAX_M || (a->n > 2304 && a->k > 4096)))
        return 0;
    return k30_pick_swap_es(a, sms, 1);
}

/* The block N of k42_wgmma_64x* (64-row tiles, one consumer warpgroup)
 * auto-dispatch gives a problem, or 0: where 64-row tiles of 128, 144
 * (K-major B only: an N-major 144-wide tile loads three boxes) or 192
 * columns fill one wave at least half full, the one with the most tiles
 * (ties: the narrower). A 64 x BN tile reads A once and B once a k-step
 * (wgmma m64nBNk16), where k34's two consumers read 64 x 64 each from B's
 * shared tile twice: the same work per k-tile from fewer shared-memory
 * bytes, and more, smaller tiles than k33 where BN is 192. M > 64 (smaller
 * M: k40's and k34's decode rules; k36 ranks above where it fits) and rows
 * of 128-byte multiples: with 2000-byte rows (1000^3) k33 stays faster
 * (13.6 us against 14.3). Measured on the H100 (fp32 C, us, x cuBLAS, the
 * previous pick; NOTES session 17):
 * 768^3 7.9 (0.91x; k34 8.5), 1024^3 9.3 (0.97x; k34 9.7), 512 x 2304 x 768
 * NT 9.5 (0.92x; k33 10.4), 2048 x 768 x 3072 NT 19.4 (0.96x; k33 22.4),
 * 2048 x 768 x 768 NT 9.7 (0.97x; k33 11.0), 512 x 3072 x 768 NT 10.5
 * (0.96x; k33 11.6); with B a DRAM stream too: 128 x 4608 x 3584 NT 18.4
 * (0.91x; k34 18.9), 128 x 6144 x 4096 NT 23.7 (0.95x; k34 24.4), 192 x
 * 4096 x 4096 NT 20.1 (0.93x; k34 31.8: its second 128-row tile is half
 * TMA zero fill). */
static inline int k30_pick_rows64(const tk_args *a, int sms)
{
    static const int bns[3] = { 128, 144, 192 };
    if (a->m <= 64 || k30_ragged(a))
        return 0;
    const long long rows = (a->m + 63) / 64;
    int best = 0;
    long long best_tiles = 0;
    for (int i = 0; i < 3; i++) {
        const long long tiles = rows * ((a->n + bns[i] - 1) / bns[i]);
        if ((bns[i] != 144 || a->op_b == TK_OP_T) && tiles <= sms && tiles > best_tiles) {
            best = bns[i];
            best_tiles = tiles;
        }
    }
    return 2 * best_tiles > sms ? best : 0;
}

/* k39_cluster_64x128 (k31's cluster kernel, 64 x 128 tiles a CTA, B
 * multicast to the CTA pair) where rows are ragged (k30_ragged: each
 * 128-byte TMA row is two L2 requests) and its cluster tiles fill at least
 * 3/4 of one wave: the multicast halves B's requests, which made the
 * unclustered 64-row tiles lose to k33 there. Measured on the H100 (fp32 C,
 * us): 1000^3 NN k39 12.2-12.3, k33 13.7, k42 14.5, cuBLAS 11.7; NT 12.0-12.1,
 * k33 13.2. Rows of 128-byte multiples keep k42 (768^3 k39 8.5 against
 * 7.9, 1024^3 10.0-10.2 against 9.1; docs/NOTES.md session 19). */
static inline int k30_pick_cluster64(const tk_args *a, int sms)
{
    if (a->m <= 64 || a->n <= 64 || !k30_ragged(a))
        return 0;
    const long long ctiles = ((a->m + 127) / 128) * ((a->n + 127) / 128);
    return 2 * ctiles <= sms && 8 * ctiles >= 3 * sms;
}

/* The split workspace of a one-CTA launch with bm x bn tiles: none where no
 * split can apply. */
static inline size_t k30_workspace_mn(int bm, int bn, int subs, const tk_args *a, const tk_device *dev,
                                      size_t *nflags)
{
    const long long tiles = ((a->m + bm - 1) / bm) * ((a->n + bn - 1) / bn);
    const int k_tiles = (int)((a->k + K30_BK - 1) / K30_BK);
    *nflags = 0;
    return k30_sk_may_split(tiles, k_tiles, dev->sm_count) ? k30_sk_bytes(dev->sm_count, subs, nflags) : 0;
}

/* The last wave: with T tiles on C clusters (T > C) a data-parallel walk
 * ends with T % C tiles while the other clusters idle. Split into s slices
 * of their k-tiles, those tiles give s (T % C) units dealt out like tiles,
 * ceil(s (T % C) / C) rounds of 1/s tile each. Split when some s <=
 * K30_SK_MAX_SLICES ends the wave in at most 0.8 of a tile time, with slices
 * of at least K30_SK_WAVE_MIN_SLICE_KTILES k-tiles; the unit that computes a
 * tile's last slice adds the others' partial sums before storing it.
 * The units of a round cover few k positions, so the clusters still read
 * the same A and B k-tiles at about the same time (L2 reuse): a stream-K
 * split into one contiguous k-range per cluster lost that and measured 1-13%
 * slower than no split (docs/kernels/k30.md).
 * With fewer tiles than clusters (T < C) every tile is split instead, into
 * the most slices s <= K30_SK_FEW_MAX_SLICES with T s <= C, each of at least
 * K30_SK_MIN_SLICE_KTILES k-tiles: one round of T s units.
 * subs: the partial-sum slots a unit takes (consumer warpgroups x CTAs of a
 * cluster). Sets p->num_clusters, the clusters to launch. */
static inline void k30_plan_split_wave(k30_params *p, const tk_args *a, int subs, long long tiles, int clusters)
{
    p->num_clusters = tiles < clusters ? (int)tiles : clusters;
    p->sk_first = (int)tiles;
    p->sk_tiles = 0;
    p->sk_slices = 0;
    if (!a->kws || !a->flags)
        return;
    /* partial slots the workspace holds, each with its flag */
    const size_t cap = a->kws_bytes / K30_SK_SLOT_BYTES < a->nflags ? a->kws_bytes / K30_SK_SLOT_BYTES : a->nflags;
    p->sk_flag = a->flags;
    p->sk_part = (float *)a->kws;
    p->seq = a->seq;
    if (tiles < clusters) {
        /* Few tiles: the most slices that still fit the clusters (and the workspace). */
        int sl = k30_few_slices(tiles, p->k_tiles, clusters);
        while (sl > 1 && (size_t)tiles * (sl - 1) * subs > cap)
            sl--;
        if (sl > 1) {
            p->sk_first = 0;
            p->sk_tiles = (int)tiles;
            p->sk_slices = sl;
            p->num_clusters = (int)tiles * sl;
        }
        return;
    }
    const long long rem = tiles % clusters;
    if (rem == 0)
        return;
    int best = 0;
    double best_span = 0.8;            /* tile times the last wave takes; 1 unsplit */
    for (int sl = 2; sl <= K30_SK_MAX_SLICES; sl++) {
        double span = (double)((rem * sl + clusters - 1) / clusters) / sl;
        const size_t slots = (size_t)rem * (sl - 1) * subs;
        if (p->k_tiles >= sl * K30_SK_WAVE_MIN_SLICE_KTILES && span <= best_span - 1e-9 &&
            slots <= cap) {
            best = sl;
            best_span = span;
        }
    }
    if (!best)
        return;
    p->sk_tiles = (int)rem;
    p->sk_slices = best;
    p->sk_first = (int)(tiles - rem);
}

/* The launch of a one-CTA kernel of the family (k30, k33-k35, k36) with
 * parameters p: one CTA per SM (the ring takes most of the shared memory),
 * tiles split as k30_plan_split_wave plans where a->kws is given. */
static inline tk_status k30_launch_one(const tk_resources *r, k30_params *p, const tk_args *a, const tk_device *dev,
                                       cudaStream_t stream, char *why, size_t len)
{
    cudaError_t e = tk_lc_func_smem(a->lc, r->func, (int)r->dyn_smem);
    if (e == cudaSuccess) {
        k30_plan_split_wave(p, a, r->threads / 128 - 1, (long long)p->tiles_m * p->tiles_n, dev->sm_count);
        void *args[] = { p };
        e = cudaLaunchKernel(r->func, dim3((unsigned)p->num_clusters), dim3((unsigned)r->threads), args, r->dyn_smem,
                             stream);
    }
    return k30_launch_status(e, why, len);
}

/* How the epilogue stores C (both launchers): staged through shared
 * memory when beta == 0, leaving by TMA stores where TMA can store C
 * (p->c_tma, its tensor map encoded here) and row by row elsewhere; the
 * direct epilogue when beta != 0. */
static inline tk_status k30_plan_c(k30_params *p, const tk_args *a, int box_rows, char *why, size_t len)
{
    size_t cs = a->c_type == TK_F32 ? 4 : 2;
    char ignore[TK_MSG_LEN];
    /* A TMA store writes whole 16-byte units at the right edge (seen on the
     * H100: columns past N up to the next 16 bytes were overwritten), so
     * rows must end on a 16-byte boundary too. */
    p->c_tma = a->beta == 0.0f && (a->n * (int64_t)cs) % 16 == 0 &&
              tk_tma_check("C", a->c, a->ldc, cs, ignore, sizeof ignore) == TK_SUCCESS;
    /* With beta == 0 always staged (stored row by row where TMA cannot);
     * beta != 0 takes the direct epilogue: the row-by-row store reading C
     * measured 0.394 ms at 4096^3 fp32 (0.55x cuBLAS; each row's load waits
     * for the last), and staged bf16 values would be rounded twice. */
    p->c_staged = a->beta == 0.0f;
    if (p->c_tma) {
        tk_status st = tk_tma_map_2d(a->lc, &p->map_c, a->c_type == TK_F32 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                                           : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                           cs, a->c, a->m, a->n, a->ldc, (uint32_t)box_rows, (uint32_t)(128 / cs), CU_TENSOR_MAP_SWIZZLE_128B, why,
                           len);
        if (st)
            return st;
    }
    return TK_SUCCESS;
}

/* The launch of the cluster kernel (k31): parameters, the C
 * tensor map when the epilogue can store C with TMA (p.c_tma), the cluster
 * launch configuration and a persistent grid of as many clusters as fit
 * co-resident, with a split last wave (k30_plan_split_wave).
 * r: the kernel instance for the problem's operand majors, its threads and
 * shared memory. */
static inline tk_status k30_launch_cluster_tma_c(const tk_resources *r, int cluster, int bm, int bn, const tk_args *a,
                                                 cudaStream_t stream, char *why, size_t len)
{
    const void *func = r->func;
    const int smem = (int)r->dyn_smem;
    if (!func) {
        snprintf(why, len, "epilogue: this configuration has no instance with a fused epilogue");
        return TK_ERR_NOT_SUPPORTED;
    }
    k30_params p;
    tk_args t;
    const tk_args *ta = k30_epi_target(a, &t);   /* D in C's place where an epilogue writes it */
    tk_status st = k30_fill_params(&p, ta, cluster, bm, bn, why, len);
    if (!st)
        st = k30_plan_c(&p, ta, 64, why, len);
    if (st)
        return st;
    if (a->epi)
        k30_fill_epi(&p, a);
    if (a->epi && a->epi->kind == TK_EPI_GATED && (st = k30_fill_gated(&p, a, bn, why, len)))
        return st;

    cudaError_t e = tk_lc_func_smem(a->lc, func, smem);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = cluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cudaLaunchConfig_t cfg = {};
    long long ctiles = (long long)((p.tiles_m + cluster - 1) / cluster) * p.tiles_n;
    cfg.gridDim = dim3((unsigned)(cluster * (ctiles < 1024 ? ctiles : 1024)));
    cfg.blockDim = dim3((unsigned)r->threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    if (e == cudaSuccess)
        e = tk_lc_max_clusters(a->lc, func, &cfg, cluster, &clusters);
    if (e == cudaSuccess && clusters < 1) {
        snprintf(why, len, "no cluster of %d CTAs with %d bytes of shared memory fits on this GPU", cluster,
                 smem);
        return TK_ERR_OUT_OF_RESOURCES;
    }
    if (e == cudaSuccess) {
        k30_plan_split_wave(&p, a, cluster * (r->threads / 128 - 1), ctiles, clusters);
        cfg.gridDim = dim3((unsigned)(cluster * p.num_clusters));
        void *args[] = { &p };
        e = cudaLaunchKernelExC(&cfg, func, args);
    }
    return k30_launch_status(e, why, len);
}

#endif
