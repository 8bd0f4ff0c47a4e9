/* test_k40_plan.c - k40_skinny's launch plan (src/kernels/k40_plan.h) and
 * auto-dispatch's choice on a modeled H100, on the CPU.
 *
 * The plan: which side is streamed, the token blocks, a K split that fills
 * the SMs without slices under 4 chunks, and a workspace the split fits in
 * (none when it gets less). The dispatch table: the registry's rank and
 * support functions walked as auto-dispatch walks them (gemm.c best_fit,
 * without the compiled-resource check, which needs the GPU), expecting
 * k40 for decode in torch's F.linear layout and the wgmma configurations
 * elsewhere. */
#include <stdio.h>
#include <string.h>
#include "lib/internal.h"
#include "kernels/k40_plan.h"
#include "check.h"

static tk_args prob(int64_t m, int64_t n, int64_t k, tk_op oa, tk_op ob)
{
    tk_args a;
    memset(&a, 0, sizeof a);
    a.m = m; a.n = n; a.k = k; a.op_a = oa; a.op_b = ob; a.c_type = TK_F32;
    a.lda = oa == TK_OP_N ? k : m;
    a.ldb = ob == TK_OP_T ? k : n;
    a.ldc = n;
    return a;
}

static void test_plan_table(void)
{
    static const struct {
        int64_t m, n, k;
        int swap; int64_t r, t; int nj; int64_t rowblocks, tokblocks; int splits;
    } cases[] = {
        { 1, 4096, 4096, 0, 4096, 1, 1, 256, 1, 1 },       /* 256 slabs of 16 rows: enough CTAs, no split */
        { 16, 4096, 14336, 0, 4096, 16, 2, 256, 1, 1 },
        { 4096, 1, 4096, 1, 4096, 1, 1, 256, 1, 1 },        /* N is the token side: C stored transposed */
        { 16, 152064, 3584, 0, 152064, 16, 2, 9504, 1, 1 }, /* enough row blocks: no split */
        { 1, 768, 768, 0, 768, 1, 1, 48, 1, 1 },           /* 24 chunks: 6 a warp, too few to split */
        { 1, 768, 3072, 0, 768, 1, 1, 48, 1, 3 },      /* 8 chunks a warp */
        { 9, 1000, 3000, 0, 1000, 9, 2, 63, 1, 3 },     /* 2 rounded up: 94 chunks, 2 steps a warp */
        { 17, 1000, 3000, 0, 1000, 17, 4, 63, 1, 3 },
        { 33, 1000, 3000, 0, 1000, 33, 8, 63, 1, 3 },
        { 65, 1000, 3000, 0, 1000, 65, 8, 63, 2, 3 },     /* two token blocks of 64 */
        { 3, 5, 1, 0, 5, 3, 1, 1, 1, 1 },                  /* K = 1: one chunk */
        { 1, 64, 1000000, 0, 64, 1, 1, 4, 1, 64 },         /* capped at 64 splits */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_args a = prob(cases[i].m, cases[i].n, cases[i].k, TK_OP_N, TK_OP_T);
        k40_plan p;
        k40_make_plan(&a, 132, (size_t)-1, &p);
        CHECK(p.swap == cases[i].swap && p.r == cases[i].r && p.t == cases[i].t && p.nj == cases[i].nj &&
                  p.rowblocks == cases[i].rowblocks && p.tokblocks == cases[i].tokblocks &&
                  p.splits == cases[i].splits,
              "%lld x %lld x %lld: swap %d r %lld t %lld nj %d rowblocks %lld tokblocks %lld splits %d, expected "
              "%d %lld %lld %d %lld %lld %d",
              (long long)a.m, (long long)a.n, (long long)a.k, p.swap, (long long)p.r, (long long)p.t, p.nj,
              (long long)p.rowblocks, (long long)p.tokblocks, p.splits, cases[i].swap, (long long)cases[i].r,
              (long long)cases[i].t, cases[i].nj, (long long)cases[i].rowblocks, (long long)cases[i].tokblocks,
              cases[i].splits);
        const size_t want = p.splits > 1 ? (size_t)(p.rowblocks * p.tokblocks) * p.splits * k40_slot_bytes(p.nj) : 0;
        const int64_t want_flags = p.splits > 1 ? p.rowblocks * p.tokblocks * p.splits : 0;
        CHECK(p.ws_bytes == want && p.nflags == want_flags, "case %zu: workspace %zu with %lld flags, expected %zu "
              "with %lld", i, p.ws_bytes, (long long)p.nflags, want, (long long)want_flags);
    }
}

/* Four warps a 16-row slab, except where one warp a slab already gives
 * enough CTAs and K is short (two there). */
static void test_plan_slab_warps(void)
{
    static const struct { int64_t m, n, k; int wk; int64_t rowblocks; } cases[] = {
        { 1, 4096, 4096, 4, 256 }, { 1, 768, 768, 4, 48 }, { 16, 28672, 4096, 4, 1792 },
        { 1, 50257, 768, 4, 3142 }, { 8, 50257, 4096, 4, 3142 }, { 16, 20000, 768, 2, 625 },
        { 16, 50257, 768, 2, 1571 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_args a = prob(cases[i].m, cases[i].n, cases[i].k, TK_OP_N, TK_OP_T);
        k40_plan p;
        k40_make_plan(&a, 132, (size_t)-1, &p);
        CHECK(p.wk == cases[i].wk && p.rowblocks == cases[i].rowblocks, "%lld x %lld x %lld: wk %d rowblocks %lld, "
              "expected %d %lld", (long long)a.m, (long long)a.n, (long long)a.k, p.wk, (long long)p.rowblocks,
              cases[i].wk, (long long)cases[i].rowblocks);
    }
}

/* Six chunks a step for one token fragment, unsplit, where each warp takes
 * at most one such step or the grid is at most two CTAs an SM (K40_U_SHORT). */
static void test_plan_ushort(void)
{
    static const struct { int64_t m, n, k, ldb; int ushort; } cases[] = {
        { 1, 768, 768, 768, 1 },       /* 48 CTAs */
        { 8, 50257, 768, 768, 1 },     /* four warps a slab, six chunks each */
        { 1, 3584, 3584, 3584, 1 },    /* 224 CTAs */
        { 1, 768, 3072, 3072, 0 },     /* split in 3 */
        { 1, 28672, 4096, 4096, 0 },   /* 1792 CTAs of 32 chunks a warp */
        { 1, 6144, 4096, 4096, 0 },    /* 384 CTAs */
        { 16, 768, 768, 768, 0 },      /* two token fragments */
        { 1, 4096, 14336, 14336, 0 },  /* the ring */
        { 1, 768, 768, 770, 0 },       /* element loads */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_args a = prob(cases[i].m, cases[i].n, cases[i].k, TK_OP_N, TK_OP_T);
        a.ldb = cases[i].ldb;
        k40_plan p;
        k40_make_plan(&a, 132, (size_t)-1, &p);
        CHECK(p.ushort == cases[i].ushort, "%lld x %lld x %lld (ldb %lld): ushort %d (wk %d splits %d rowblocks %lld), "
              "expected %d", (long long)a.m, (long long)a.n, (long long)a.k, (long long)a.ldb, p.ushort, p.wk, p.splits,
              (long long)p.rowblocks, cases[i].ushort);
    }
}

/* Over a grid of shapes: a split leaves every warp at least one full
 * U-chunk step, every CTA of a split grid is resident at once, the grid fits CUDA's
 * limits, and with less workspace than the
 * plan wants the launch runs unsplit. */
static void test_plan_properties(void)
{
    static const int64_t ms[] = { 1, 2, 7, 8, 9, 16, 17, 63, 64, 65, 4096 };
    static const int64_t ns[] = { 1, 63, 64, 65, 768, 4096, 50257 };
    static const int64_t ks[] = { 1, 31, 32, 33, 127, 128, 768, 4096, 14336 };
    int bad = 0;
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
            for (size_t l = 0; l < sizeof ks / sizeof ks[0]; l++) {
                tk_args a = prob(ms[i], ns[j], ks[l], TK_OP_N, TK_OP_T);
                k40_plan p;
                k40_make_plan(&a, 132, (size_t)-1, &p);
                int ok = p.splits >= 1 && p.splits <= K40_MAX_SPLITS && p.tokblocks <= 65535 &&
                         (p.splits == 1 || p.rowblocks * p.tokblocks * p.splits <= K40_MAX_CTAS_PER_SM * 132) &&
                         (p.splits == 1 || p.chunks / ((int64_t)p.splits * p.wk) >= K40_U(p.nj, k40_aligned(&a))) &&
                         p.rowblocks * k40_rows(p.wk) >= p.r && p.tokblocks * 8 * p.nj >= p.t &&
                         p.t == (ms[i] < ns[j] ? ms[i] : ns[j]) && (p.splits > 1) == (p.ws_bytes > 0);
                if (p.splits > 1) {
                    k40_plan q;
                    k40_make_plan(&a, 132, p.ws_bytes - 1, &q);
                    ok = ok && q.splits == 1 && q.ws_bytes == 0;
                }
                if (!ok && bad++ < 5)
                    CHECK(0, "%lld x %lld x %lld: splits %d chunks %lld tokblocks %lld ws %zu", (long long)a.m,
                          (long long)a.n, (long long)a.k, p.splits, (long long)p.chunks, (long long)p.tokblocks,
                          p.ws_bytes);
            }
    CHECK(bad == 0, "%d plans broke a property", bad);
}

/* Auto-dispatch's walk over the registry on a modeled H100: the highest
 * rank among the kernels that support the problem (gemm.c best_fit). */
static const char *model_pick(const tk_args *a, const tk_device *dev)
{
    const tk_kernel *best = NULL;
    int best_rank = 0;
    char why[TK_MSG_LEN];
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (k->auto_rank <= 0 || k->min_sm > dev->sm)
            continue;
        int r = tk_kernel_rank(k, a, dev);
        if (r > best_rank && tk_kernel_supports_args(k, a, dev, why, sizeof why) == TK_SUCCESS) {
            best = k;
            best_rank = r;
        }
    }
    return best ? best->name : "none";
}

static void test_dispatch_table(void)
{
    tk_device h100;
    memset(&h100, 0, sizeof h100);
    h100.sm = 90;
    h100.sm_count = 132;
    static const struct { int64_t m, n, k; tk_op oa, ob; const char *want; } cases[] = {
        { 1, 4096, 4096, TK_OP_N, TK_OP_T, "k40_skinny" },
        { 16, 4096, 14336, TK_OP_N, TK_OP_T, "k40_skinny" },
        { 1, 152064, 3584, TK_OP_N, TK_OP_T, "k34_wgmma_128x64" },   /* long stream: k34's TMA ring */
        { 16, 50257, 768, TK_OP_N, TK_OP_T, "k40_skinny" },        /* many row blocks, short K */
        { 16, 3072, 768, TK_OP_N, TK_OP_T, "k36_swap_16x64" },     /* 9-16 tokens, B not a stream */
        { 16, 768, 3072, TK_OP_N, TK_OP_T, "k36_swap_16x64" },
        { 8, 3072, 768, TK_OP_N, TK_OP_T, "k40_skinny" },          /* up to 8 tokens: k40 */
        { 16, 4096, 4096, TK_OP_N, TK_OP_T, "k40_skinny" },        /* B a stream (32 MB): k40 */
        { 16, 37888, 3584, TK_OP_N, TK_OP_T, "k40_skinny" },       /* 592 slabs of 64 rows */
        { 1, 128256, 4096, TK_OP_N, TK_OP_T, "k34_wgmma_128x64" },
        { 8, 28672, 4096, TK_OP_N, TK_OP_T, "k40_skinny" },
        { 4096, 8, 4096, TK_OP_N, TK_OP_T, "k40_skinny" },   /* small N: the swapped form */
        { 17, 4096, 4096, TK_OP_N, TK_OP_T, "k36_swap_16x64" },     /* B a DRAM stream: 128 tiles, unsplit */
        { 32, 768, 3072, TK_OP_N, TK_OP_T, "k36_swap_16x64" },      /* 24 tiles of 16 x 64, 3 slices */
        { 32, 3072, 768, TK_OP_N, TK_OP_T, "k36_swap_16x64" },      /* 96 tiles of 16 x 64 */
        { 32, 768, 768, TK_OP_N, TK_OP_T, "k36_swap_16x64" },       /* 24 tiles of 16 x 64 */
        { 32, 37888, 3584, TK_OP_N, TK_OP_T, "k34_wgmma_128x64" },  /* 592 staged CTAs: 1.12 waves */
        { 32, 28672, 4096, TK_OP_N, TK_OP_T, "k40_skinny" },        /* 448: one wave */
        { 32, 128256, 4096, TK_OP_N, TK_OP_T, "k40_skinny" },       /* 2004: 3.8 waves */
        { 33, 4096, 4096, TK_OP_N, TK_OP_T, "k36_swap_32x64" },     /* 128 tiles of 32 x 64 */
        { 65, 4096, 4096, TK_OP_N, TK_OP_T, "k36_swap_48x64" },     /* 128 tiles of 48 x 64 (a stream) */
        { 97, 4096, 4096, TK_OP_N, TK_OP_T, "k36_swap_64x64" },     /* 97-128 tokens: 128 tiles of 64 x 64 */
        { 129, 4096, 4096, TK_OP_N, TK_OP_T, "k36_swap_72x64" },    /* 128 of 72 x 64; 64 x 64: 192 */
        { 192, 4096, 4096, TK_OP_N, TK_OP_T, "k42_wgmma_64x128" },  /* 96 of 64 x 128; 72 x 64: 192 */
        { 128, 3584, 3584, TK_OP_N, TK_OP_T, "k36_swap_64x64" },    /* 112 tiles */
        { 64, 4608, 3584, TK_OP_N, TK_OP_T, "k36_swap_64x64" },     /* 72 tiles; 48 x 64: 144 */
        { 128, 3072, 768, TK_OP_N, TK_OP_T, "k36_swap_64x64" },     /* 96 tiles */
        { 640, 768, 768, TK_OP_N, TK_OP_N, "k36_swap_64x64" },      /* 120 tiles */
        { 128, 4096, 8192, TK_OP_N, TK_OP_T, "k34_wgmma_128x64" },  /* units over 64 k-tiles: split k34 */
        { 1, 4096, 4096, TK_OP_N, TK_OP_N, "k36_swap_16x64" },     /* B along N: not k40's layout */
        { 16, 4096, 4096, TK_OP_T, TK_OP_N, "k34_wgmma_128x64" },  /* nor k36's (A along M) */
        { 64, 768, 768, TK_OP_N, TK_OP_T, "k36_swap_16x64" },
        { 32, 3584, 3584, TK_OP_N, TK_OP_T, "k36_swap_16x64" },   /* a stream: unsplit 16 x 64 */
        { 64, 2304, 768, TK_OP_N, TK_OP_T, "k36_swap_32x64" },     /* 144 tiles of 16 x 64: two waves */
        { 128, 768, 3072, TK_OP_N, TK_OP_T, "k36_swap_32x64" },    /* 2 slices of 24 k-tiles, not 48 */
        { 64, 768, 3072, TK_OP_N, TK_OP_T, "k36_swap_16x64" },     /* 2 slices, not 3 */
        { 128, 2304, 768, TK_OP_N, TK_OP_T, "k36_swap_48x64" },     /* 108 tiles of 48 x 64 */
        { 512, 768, 768, TK_OP_N, TK_OP_T, "k36_swap_48x64" },      /* 132 tiles of 48 x 64: one wave */
        { 512, 768, 3072, TK_OP_N, TK_OP_T, "k36_swap_48x64" },     /* the same, 48 k-tiles unsplit */
        { 128, 2048, 2048, TK_OP_N, TK_OP_T, "k36_swap_32x64" },   /* 128 tiles of 32 x 64, unsplit */
        { 128, 4096, 4096, TK_OP_N, TK_OP_T, "k36_swap_64x64" },    /* 128 tiles of 64 x 64 */
        { 256, 256, 256, TK_OP_N, TK_OP_N, "k36_swap_16x64" },
        { 512, 512, 512, TK_OP_N, TK_OP_N, "k36_swap_32x64" },
        { 768, 768, 768, TK_OP_N, TK_OP_N, "k36_swap_72x64" },        /* 132 tiles of 72 x 64; 64 x 64: 144 */
        { 792, 768, 768, TK_OP_N, TK_OP_N, "k36_swap_72x64" },
        { 800, 768, 768, TK_OP_N, TK_OP_N, "k42_wgmma_64x128" },      /* 72-row tiles: 144 */
        { 768, 768, 768, TK_OP_T, TK_OP_N, "k42_wgmma_64x128" },      /* M-major A: not swapped */
        { 1024, 1024, 1024, TK_OP_N, TK_OP_N, "k42_wgmma_64x128" },   /* 128 tiles */
        { 768, 768, 768, TK_OP_N, TK_OP_T, "k36_swap_72x64" },
        { 512, 2304, 768, TK_OP_N, TK_OP_T, "k42_wgmma_64x144" },     /* 128 tiles; 64 x 192: 96 */
        { 512, 2304, 768, TK_OP_N, TK_OP_N, "k42_wgmma_64x192" },     /* N-major B: no 144 */
        { 2048, 768, 3072, TK_OP_N, TK_OP_T, "k42_wgmma_64x192" },    /* 128 tiles; 64 x 128: 192 */
        { 512, 3072, 768, TK_OP_T, TK_OP_T, "k42_wgmma_64x192" },     /* M-major A too */
        { 2048, 1024, 768, TK_OP_N, TK_OP_T, "k33_wgmma_128x128" },   /* 64 x 192: 192 tiles */
        { 768, 768, 776, TK_OP_N, TK_OP_T, "k36_swap_72x64" },        /* rows of 1552 bytes: k33 before */
        { 768, 768, 776, TK_OP_T, TK_OP_T, "k33_wgmma_128x128" },     /* M-major A: not swapped */
        { 640, 512, 1024, TK_OP_T, TK_OP_T, "k34_wgmma_128x64" },     /* 40 tiles of 64 x 128: too few */
        { 192, 4096, 4096, TK_OP_T, TK_OP_T, "k42_wgmma_64x128" },    /* 96 tiles; k34's second half empty */
        { 128, 4608, 3584, TK_OP_N, TK_OP_T, "k42_wgmma_64x128" },    /* 72 tiles; 64 x 64: 144 */
        { 64, 4608, 3584, TK_OP_T, TK_OP_T, "k34_wgmma_128x64" },     /* M <= 64: decode rules */
        { 1000, 1000, 1000, TK_OP_N, TK_OP_N, "k39_cluster_64x128" },  /* rows of 2000 bytes: 64 cluster tiles */
        { 1000, 1000, 1000, TK_OP_N, TK_OP_T, "k39_cluster_64x128" },
        { 1000, 1000, 1000, TK_OP_T, TK_OP_N, "k39_cluster_64x128" },
        { 1000, 600, 1000, TK_OP_N, TK_OP_N, "k33_wgmma_128x128" },    /* 40 cluster tiles: under 3/4 of a wave */
        { 1024, 1000, 1024, TK_OP_N, TK_OP_N, "k39_cluster_64x128" },  /* B's rows of 2000 bytes */
        { 4096, 4096, 4096, TK_OP_N, TK_OP_N, "k31_wgmma_cluster" },
        { 1536, 1536, 1536, TK_OP_N, TK_OP_N, "k38_swap_144x128" },    /* N-major B: 132 swapped tiles */
        { 1536, 1536, 768, TK_OP_N, TK_OP_N, "k38_swap_144x128" },
        { 1536, 1536, 1536, TK_OP_N, TK_OP_T, "k37_wgmma_128x144" },   /* K-major B: 128 x 144 */
        { 1536, 1536, 1536, TK_OP_T, TK_OP_N, "k35_wgmma_128x192" },   /* M-major A: not swapped */
        { 1536, 1544, 1536, TK_OP_N, TK_OP_N, "k31_wgmma_cluster" },   /* ragged rows of B: not k38 */
        { 3072, 3072, 3072, TK_OP_N, TK_OP_N, "k35_wgmma_128x192" },   /* 528 tiles of 144 x 128 */
        { 512, 4608, 3584, TK_OP_N, TK_OP_T, "k37_wgmma_128x144" },    /* 128 tiles of 128 x 144 */
        { 2048, 2304, 768, TK_OP_N, TK_OP_T, "k37_wgmma_128x144" },    /* 256: two full waves */
        { 2048, 2304, 768, TK_OP_N, TK_OP_N, "k33_wgmma_128x128" },
        { 2048, 3072, 768, TK_OP_N, TK_OP_T, "k33_wgmma_128x128" },    /* 352 of 128 x 144: 0.89 */
        { 512, 6144, 4096, TK_OP_N, TK_OP_T, "k35_wgmma_128x192" },    /* 172 of 128 x 144 */
        { 16384, 4608, 3584, TK_OP_N, TK_OP_T, "k31_wgmma_cluster" },  /* full waves, but many */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_args a = prob(cases[i].m, cases[i].n, cases[i].k, cases[i].oa, cases[i].ob);
        const char *got = model_pick(&a, &h100);
        CHECK(!strcmp(got, cases[i].want), "%lld x %lld x %lld op %d%d: auto picks %s, expected %s",
              (long long)a.m, (long long)a.n, (long long)a.k, cases[i].oa, cases[i].ob, got, cases[i].want);
    }
    /* On an A100 the decode case still gets k40 (sm_80+), not k21. */
    tk_device a100 = h100;
    a100.sm = 80;
    a100.sm_count = 108;
    tk_args a = prob(1, 4096, 4096, TK_OP_N, TK_OP_T);
    CHECK(!strcmp(model_pick(&a, &a100), "k40_skinny"), "sm_80 decode: %s", model_pick(&a, &a100));
}

/* Tokens staged in shared memory: 17 to 64 tokens, 16-byte loads, at
 * least K40_XS_MIN_RK weight elements, unless the TMA ring takes them (a
 * full block of 32 tokens, test_plan_bulk); then one warp a slab. */
static void test_plan_xs(void)
{
    static const struct { int64_t m, n, k; int xs; } cases[] = {
        { 32, 4096, 4096, 0 /* a full block of 32: the TMA ring */ }, { 17, 4096, 4096, 1 }, { 64, 4096, 14336, 1 },
        { 4096, 40, 4096, 1 }, { 31, 4096, 4096, 1 },
        { 16, 4096, 4096, 0 }, { 65, 4096, 4096, 1 }, { 32, 3072, 768, 0 }, { 32, 4096, 4095, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_args a = prob(cases[i].m, cases[i].n, cases[i].k, TK_OP_N, TK_OP_T);
        k40_plan p;
        k40_make_plan(&a, 132, (size_t)-1, &p);
        CHECK(p.xs == cases[i].xs && (!p.xs || p.wk == 1), "%lld x %lld x %lld: xs %d wk %d, expected xs %d",
              (long long)a.m, (long long)a.n, (long long)a.k, p.xs, p.wk, cases[i].xs);
    }
}

/* The ring of TMA copies: up to 16 tokens, 16-byte loads, four warps a
 * slab, at most two CTAs an SM, at least 16 stages of 256 k a CTA
 * (k40_make_plan plans it for sm_90; k40_skinny.cu clears it before). */
static void test_plan_bulk(void)
{
    static const struct { int64_t m, n, k; int bulk; } cases[] = {
        { 1, 4096, 14336, 1 },   /* 256 CTAs, 56 stages */
        { 16, 4096, 14336, 1 },  /* two token fragments */
        { 4096, 16, 14336, 1 },  /* tokens on N */
        { 17, 4096, 14336, 0 },  /* 17 tokens: staged in shared memory (xs) */
        { 24, 4096, 14336, 0 },  /* 24: the same */
        { 32, 4096, 14336, 1 },  /* a full block of 32 tokens: the ring, not xs */
        { 32, 3584, 18944, 1 },
        { 64, 4096, 14336, 0 },  /* nj = 8 */
        { 8, 4096, 4096, 1 },    /* 16 stages */
        { 8, 4096, 4064, 0 },    /* 127 chunks: 15 stages */
        { 16, 3584, 3584, 0 },   /* 14 stages */
        { 16, 4608, 3584, 0 },   /* 288 CTAs: over two an SM */
        { 1, 4224, 14336, 1 },   /* 264 CTAs: two an SM */
        { 1, 4240, 14336, 0 },   /* 265 */
        { 1, 768, 3072, 0 },     /* 3 splits of 4 stages */
        { 1, 14336, 4096, 0 },   /* 896 CTAs */
        { 1, 50257, 768, 0 },    /* two warps a slab (short K, many slabs) */
        { 1, 4096, 14335, 0 },   /* rows not 16-byte aligned: element loads */
        { 1, 1024, 102400, 1 },  /* split: 64 x 4 CTAs, 100 stages each */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_args a = prob(cases[i].m, cases[i].n, cases[i].k, TK_OP_N, TK_OP_T);
        k40_plan p;
        k40_make_plan(&a, 132, (size_t)-1, &p);
        CHECK(p.bulk == cases[i].bulk, "%lld x %lld x %lld: bulk %d (splits %d wk %d nj %d), expected %d",
              (long long)a.m, (long long)a.n, (long long)a.k, p.bulk, p.splits, p.wk, p.nj, cases[i].bulk);
        CHECK(!p.bulk || (p.rowblocks * p.tokblocks * p.splits <= 2 * 132 && p.wk == K40_WK),
              "%lld x %lld x %lld: bulk with %lld CTAs, wk %d", (long long)a.m, (long long)a.n, (long long)a.k,
              (long long)(p.rowblocks * p.tokblocks * p.splits), p.wk);
    }
}

/* Refusals name the layout k40 reads, and too many tokens for grid.z. */
static void test_supports(void)
{
    const tk_kernel *k = tk_registry_find("k40_skinny");
    CHECK(k != NULL, "k40_skinny is not in the registry");
    if (!k)
        return;
    tk_device d;
    memset(&d, 0, sizeof d);
    d.sm = 90;
    d.sm_count = 132;
    char why[TK_MSG_LEN] = "";
    tk_args a = prob(1, 4096, 4096, TK_OP_N, TK_OP_N);
    CHECK(tk_kernel_supports_args(k, &a, &d, why, sizeof why) == TK_ERR_NOT_SUPPORTED && strstr(why, "op_b T"), "NN: %s", why);
    a = prob(1, 4096, 4096, TK_OP_T, TK_OP_T);
    CHECK(tk_kernel_supports_args(k, &a, &d, why, sizeof why) == TK_ERR_NOT_SUPPORTED, "TT accepted");
    a = prob(8192, 8192, 64, TK_OP_N, TK_OP_T);
    CHECK(tk_kernel_supports_args(k, &a, &d, why, sizeof why) == TK_SUCCESS, "8192 x 8192 refused: %s", why);
    a = prob((int64_t)1 << 23, (int64_t)1 << 23, 64, TK_OP_N, TK_OP_T);
    CHECK(tk_kernel_supports_args(k, &a, &d, why, sizeof why) == TK_ERR_NOT_SUPPORTED && strstr(why, "65535"), "2^23 square: %s",
          why);
}

void tk_tests(void)
{
    TK_TEST(test_plan_table);
    TK_TEST(test_plan_properties);
    TK_TEST(test_plan_xs);
    TK_TEST(test_plan_bulk);
    TK_TEST(test_plan_slab_warps);
    TK_TEST(test_plan_ushort);
    TK_TEST(test_dispatch_table);
    TK_TEST(test_supports);
}
