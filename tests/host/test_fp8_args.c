/* test_fp8_args.c - the argument checks of FP8 operands (issue 40,
 * tk_gemm_desc version 4) on the CPU: each bad field refused with
 * TK_ERR_INVALID_VALUE and a message that starts with its name, for each
 * scale mode; scales with bf16 operands refused; a valid FP8 call passes
 * them and reaches auto-dispatch, which runs K-major operands on the FP8
 * kernels and the other layouts and alignments on K-major copies
 * (test_route_copies), a named bf16 kernel refuses it; an epilogue, K or
 * masked groups, or block scales with a column-major problem refused with
 * TK_ERR_NOT_SUPPORTED; a bf16 call unchanged. Many FP8 products
 * (version 5: TK_GROUP_ROWS, _BATCHED) pass to auto-dispatch, each bad
 * group or scale-stride field refused by name (test_grouped_*); auto runs
 * them on k43's FP8 instances where those take them (K-major, K % 16 ==
 * 0, 16-byte strides; the tile by the rows a group), else on k01_naive,
 * with no copies, and each k43 line named refuses what it cannot run with
 * its reason (test_grouped_route). */
#include <stdint.h>
#include <string.h>
#include "tilekit.h"
#include "lib/internal.h"
#include "check.h"
#include "fake_handle.h"

#define FAKE(i) ((void *)(uintptr_t)((i) << 20))

enum { M = 64, N = 256, K = 384 };

/* A valid FP8 call of the given mode: row-major, op_b T, fp32 C. */
static tk_gemm_desc fp8_desc(int mode)
{
    tk_gemm_desc d = TK_GEMM_DESC_INIT;
    d.problem = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_T, M, N, K, 1.0f, 0.0f, FAKE(1), K, FAKE(2), K,
                                   FAKE(3), N, TK_F32 };
    d.a_fp8 = TK_FP8_E4M3;
    d.b_fp8 = TK_FP8_E4M3;
    d.scale_mode = mode;
    d.scale_a = (const float *)FAKE(4);
    d.scale_b = (const float *)FAKE(5);
    if (mode == TK_SCALE_BLOCK) {
        d.ld_scale_a = M;
        d.ld_scale_b = (N + 127) / 128;
    }
    return d;
}

static void expect(tk_handle h, const tk_gemm_desc *d, tk_status want, const char *label, const char *field,
                   const char *word)
{
    const char *const words[] = { word, NULL };
    fh_check_outcome(h, tk_gemm_run(h, d, NULL, NULL), want, label, "tk_gemm_run", field, word ? words : words + 1);
}

/* A valid call passes every check and reaches auto-dispatch (on this
 * stand-in handle every kernel is then refused: cudaFuncGetAttributes has
 * no GPU; test_route asks the route with the attributes stood in); FP8
 * pointers need no 2-byte alignment (one-byte elements). */
static int reached_dispatch(tk_handle h, tk_status st)
{
    return st != TK_ERR_INVALID_VALUE && (st != TK_ERR_NOT_SUPPORTED || !strncmp(tk_last_error(h), "auto:", 5));
}

static void test_valid_calls_pass(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++) {
        tk_gemm_desc d = fp8_desc(mode);
        tk_status st = tk_gemm_run(&fake, &d, NULL, NULL);
        CHECK(reached_dispatch(&fake, st), "mode %d: %s (%s)", mode,
              tk_status_string(st), tk_last_error(&fake));
        d.a_fp8 = TK_FP8_E5M2;   /* the gradient-side pairing */
        d.problem.a = (const void *)((uintptr_t)FAKE(1) + 1);
        st = tk_gemm_run(&fake, &d, NULL, NULL);
        CHECK(reached_dispatch(&fake, st), "mode %d, e5m2 x e4m3, odd A: %s (%s)", mode,
              tk_status_string(st), tk_last_error(&fake));
        d = fp8_desc(mode);
        d.epilogue = TK_EPI_BIAS_ACT;
        expect(&fake, &d, TK_ERR_NOT_SUPPORTED, "FP8 + epilogue", "epilogue:", "not supported yet");
        d = fp8_desc(mode);
        d.group_kind = TK_GROUP_K;
        d.count = 2;
        d.offs = (const int32_t *)FAKE(6);
        expect(&fake, &d, TK_ERR_NOT_SUPPORTED, "FP8 + K groups", "group_kind:", "not supported yet");
    }
    tk_gemm_desc d = fp8_desc(TK_SCALE_BLOCK);
    d.problem.layout = TK_COL_MAJOR;
    d.problem.lda = M;   /* column-major op_a N: A is M x K, ld >= M */
    d.problem.ldb = N;   /* op_b T: B is N x K */
    d.problem.ldc = M;
    expect(&fake, &d, TK_ERR_NOT_SUPPORTED, "column-major, block scales", "layout:", "row-major problem");
}

/* Auto-dispatch sends FP8 operands with K-major A and B to the FP8
 * instance of k31_wgmma_cluster on sm_90 where its 128 x 256 tiles fill
 * the waves, to k45_cluster_128x128's where they leave most of the last
 * wave empty (per tensor and per row; block scales always to k31), and to
 * k01_naive elsewhere when it may not copy (the other layouts, sm_80;
 * test_route_copies has the copy route); a bf16 family asked by
 * name refuses them, and k30's configurations without FP8 instances say
 * which one has them. */
static void test_route(void)
{
    const int64_t shapes[][3] = { { 1, 4096, 4096 }, { 4096, 4096, 4096 }, { 7, 130, 256 } };
    for (int sm = 80; sm <= 90; sm += 10)
        for (int op_a = 0; op_a < 2; op_a++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                struct tk_handle_s fake;
                fh_init(&fake, sm);
                tk_gemm_desc d = fp8_desc(TK_SCALE_ROW);
                d.problem.m = shapes[s][0];
                d.problem.n = shapes[s][1];
                d.problem.k = shapes[s][2];
                d.problem.op_a = op_a ? TK_OP_T : TK_OP_N;
                d.problem.op_b = TK_OP_T;
                d.problem.lda = op_a ? shapes[s][0] : shapes[s][2];
                d.problem.ldb = shapes[s][2];
                d.problem.ldc = shapes[s][1];
                tk_args a;
                int noop = 0;
                const tk_kernel *named = NULL;
                const tk_widths w = { d.problem.n, d.problem.n, 0, 1 };
                CHECK(tk_prepare_widths(&fake, &d.problem, NULL, &a, &noop, &named, 1, &w) == TK_SUCCESS,
                      "prepare: %s", tk_last_error(&fake));
                tk_fp8_args f = { TK_FP8_E4M3, TK_FP8_E4M3, TK_SCALE_ROW, d.scale_a, d.scale_b, 0, 0, 0, 0 };
                a.fp8 = &f;
                fh_attrs_args(&fake, &a);
                tk_route r;
                /* M <= 128 fitting one wave of swapped tiles (1 x 4096 x 4096: 64 of 16 x 64; 7 x 130 x
                 * 256: 3): k36_swap_16x64's FP8 instance in every mode */
                const int swapped = shapes[s][0] <= 128;
                if (sm == 90 && !op_a) {   /* block scales: k31's FP8 instance, measured faster there */
                    f.mode = TK_SCALE_BLOCK;
                    const int okb = tk_route_choose(&fake, &a, &r, 0);
                    const char *wantb = swapped ? "k36_swap_16x64" : "k31_wgmma_cluster";
                    CHECK(okb && r.k && !strcmp(r.k->name, wantb), "block scales: auto picked %s (expected %s)",
                          okb && r.k ? r.k->name : "nothing", wantb);
                    f.mode = TK_SCALE_ROW;
                }
                const int ok = tk_route_choose(&fake, &a, &r, 0);
                /* K-major on sm_90: k31's FP8 instance where its 16 x 16 cluster tiles fill the waves */
                const char *want = sm != 90 || op_a ? "k01_naive"
                                   : swapped        ? "k36_swap_16x64"
                                                    : "k31_wgmma_cluster";
                CHECK(ok && r.k && !strcmp(r.k->name, want), "sm_%d op_a %s %lldx%lldx%lld: auto picked %s (expected %s)",
                      sm, op_a ? "T" : "N", (long long)shapes[s][0], (long long)shapes[s][1],
                      (long long)shapes[s][2], ok && r.k ? r.k->name : "nothing", want);
                char why[TK_MSG_LEN] = "";
                tk_status st = tk_kernel_check(&fake, tk_registry_find("k21_mma_fastload"), &a, why, sizeof why);
                CHECK(st == TK_ERR_NOT_SUPPORTED && strstr(why, "FP8 A and B"), "k21 named: %s (%s)",
                      tk_status_string(st), why);
                if (sm == 90) {
                    st = tk_kernel_check(&fake, tk_registry_find("k30_wgmma_tma"), &a, why, sizeof why);
                    CHECK(st == TK_ERR_NOT_SUPPORTED && strstr(why, "only k33_wgmma_128x128 and the swapped k36_swap_* have FP8"),
                          "k30 named: %s (%s)", tk_status_string(st), why);
                    st = tk_kernel_check(&fake, tk_registry_find("k33_wgmma_128x128"), &a, why, sizeof why);
                    CHECK(op_a ? st == TK_ERR_NOT_SUPPORTED && strstr(why, "K-major only") : st == TK_SUCCESS,
                          "k33 named, op_a %s: %s (%s)", op_a ? "T" : "N", tk_status_string(st), why);
                }
            }
}

/* The swapped small-M FP8 instances (k36_swap_*, k30_fp8_swap.cu) on sm_90:
 * auto takes them where k30_pick_swap_fp8 finds a tile set that fits one
 * wave at M <= 128 (FP8's 128-deep k-tiles), in every scale mode, and
 * leaves the others to k31's and k45's clusters; named, they take K-major
 * A and B alone, and a configuration not picked still runs when named. */
static void test_route_swap(void)
{
    static const struct {
        int64_t m, n, k;
        const char *want;   /* NULL: not a swapped tile */
        int block;          /* the same with block scales (k30_pick_swap_fp8's measured rule) */
    } cases[] = {
        { 64, 2112, 7168, "k36_swap_32x64", 1 },    /* 66 tiles x 2 slices of 28 k-tiles (16 x 64: 132 of 56) */
        { 128, 2112, 7168, "k36_swap_32x64", 0 },   /* 132 tiles of 56 k-tiles; block: M > 64, k31 */
        { 64, 7168, 2048, "k36_swap_64x64", 1 },    /* 112 tiles: narrower ones need more than a wave */
        { 16, 4096, 4096, "k36_swap_16x64", 1 },    /* B a DRAM stream: the narrowest tiles that fit, unsplit */
        { 72, 7168, 2048, "k36_swap_72x64", 0 },    /* 112 tiles of 72 rows; block: M > 64 */
        { 64, 4096, 7168, "k36_swap_32x64", 0 },    /* block: N > 2304 and K > 4096, k31 */
        { 128, 7168, 2048, NULL, 0 },               /* 224 tiles of 64 x 64: beyond one wave */
        { 256, 2112, 7168, NULL, 0 },               /* M > 128: the clusters' tiles fill */
        { 4096, 4096, 4096, NULL, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++) {
            const char *want = mode == TK_SCALE_BLOCK && !cases[i].block ? NULL : cases[i].want;
            struct tk_handle_s fake;
            fh_init(&fake, 90);
            tk_gemm_desc d = fp8_desc(mode);
            d.problem.m = cases[i].m;
            d.problem.n = cases[i].n;
            d.problem.k = cases[i].k;
            d.problem.lda = d.problem.ldb = cases[i].k;
            d.problem.ldc = cases[i].n;
            tk_args a;
            int noop = 0;
            const tk_kernel *named = NULL;
            const tk_widths w = { d.problem.n, d.problem.n, 0, 1 };
            CHECK(tk_prepare_widths(&fake, &d.problem, NULL, &a, &noop, &named, 1, &w) == TK_SUCCESS, "prepare: %s",
                  tk_last_error(&fake));
            tk_fp8_args f = { TK_FP8_E4M3, TK_FP8_E5M2, mode, d.scale_a, d.scale_b,
                              mode == TK_SCALE_BLOCK ? cases[i].m : 0,
                              mode == TK_SCALE_BLOCK ? (cases[i].n + 127) / 128 : 0, 0, 0 };
            a.fp8 = &f;
            fh_attrs_args(&fake, &a);
            tk_route r;
            const int ok = tk_route_choose(&fake, &a, &r, 0);
            const char *got = ok && r.k ? r.k->name : "nothing";
            if (want)
                CHECK(!strcmp(got, want), "%lldx%lldx%lld mode %d: auto picked %s (expected %s)",
                      (long long)cases[i].m, (long long)cases[i].n, (long long)cases[i].k, mode, got, want);
            else
                CHECK(strncmp(got, "k36_swap", 8) && strcmp(got, "k01_naive"),
                      "%lldx%lldx%lld mode %d: auto picked %s (expected a cluster instance)", (long long)cases[i].m,
                      (long long)cases[i].n, (long long)cases[i].k, mode, got);
            char why[TK_MSG_LEN] = "";
            /* every swapped line has an FP8 instance: named, it runs any shape */
            tk_status st = tk_kernel_check(&fake, tk_registry_find("k36_swap_48x64"), &a, why, sizeof why);
            CHECK(st == TK_SUCCESS, "k36_swap_48x64 named: %s (%s)", tk_status_string(st), why);
            /* the swapped tile reads A K-major: op_a T refused (k01 takes it) */
            a.op_a = TK_OP_T;
            st = tk_kernel_check(&fake, tk_registry_find("k36_swap_32x64"), &a, why, sizeof why);
            CHECK(st == TK_ERR_NOT_SUPPORTED, "k36_swap_32x64 named, op_a T: %s (%s)", tk_status_string(st), why);
            /* k38's two-consumer swapped tiles and the grouped swapped lines have none */
            a.op_a = TK_OP_N;
            st = tk_kernel_check(&fake, tk_registry_find("k38_swap_144x128"), &a, why, sizeof why);
            CHECK(st == TK_ERR_NOT_SUPPORTED && strstr(why, "k36_swap_*"), "k38 named: %s (%s)",
                  tk_status_string(st), why);
        }
}

/* The stand-in handle's attributes for every kernel entry the FP8 call d
 * may reach: as it is and through each copy route (fh_attrs for FP8). */
static void fp8_attrs(struct tk_handle_s *h, const tk_gemm_desc *d)
{
    tk_args a;
    int noop = 0;
    const tk_kernel *named = NULL;
    const tk_widths w = { d->problem.n, d->problem.n, 0, 1 };
    h->nattrs = 0;
    if (tk_prepare_widths(h, &d->problem, NULL, &a, &noop, &named, 0, &w) != TK_SUCCESS)
        return;
    const int col = d->problem.layout == TK_COL_MAJOR;
    tk_fp8_args f = { col ? d->b_fp8 : d->a_fp8, col ? d->a_fp8 : d->b_fp8, d->scale_mode, NULL, NULL, 0, 0, 0, 0 };
    a.fp8 = &f;
    fh_attrs_args(h, &a);
    for (int stage_c = 0; stage_c < 2; stage_c++) {
        tk_route r;
        tk_route_plan(&a, 1, stage_c, &r);
        fh_attrs_args(h, &r.run);
    }
}

/* An FP8 call of M x N x K in the given layout and ops, operands packed
 * (each line its length: lda K or M, ldb N or K), fp32 C. */
static tk_gemm_desc fp8_call(int mode, tk_layout layout, tk_op op_a, tk_op op_b, int64_t m, int64_t n, int64_t k)
{
    tk_gemm_desc d = fp8_desc(mode);
    tk_gemm_problem *p = &d.problem;
    p->layout = layout;
    p->op_a = op_a;
    p->op_b = op_b;
    p->m = m, p->n = n, p->k = k;
    const int row = layout == TK_ROW_MAJOR;
    /* a stored line runs along the second index of op(X) (row-major, op N) or the first */
    p->lda = (op_a == TK_OP_N) == row ? k : m;
    p->ldb = (op_b == TK_OP_N) == row ? n : k;
    p->ldc = row ? n : m;
    d.b_fp8 = TK_FP8_E5M2;   /* the formats differ, so a swap shows */
    if (mode == TK_SCALE_BLOCK) {
        d.ld_scale_a = m;
        d.ld_scale_b = (n + 127) / 128;
    }
    return d;
}

/* FP8 through the copy route (route.c): auto-dispatch with copies on the
 * sm_90 stand-in runs every layout on a fast kernel, transposing the
 * operands that are not K-major and repacking the misaligned ones into
 * lines of 16 codes, the run made op_a N, op_b T with the call's formats
 * and scales untouched (a column-major call's swapped with its operands);
 * tiny problems and sm_80 stay on k01_naive without copies. */
static void test_route_copies(void)
{
    const tk_op N = TK_OP_N, T = TK_OP_T;
    const tk_layout R = TK_ROW_MAJOR, C = TK_COL_MAJOR;
    static const struct {
        int sm, mode;
        tk_layout layout;
        tk_op op_a, op_b;
        int64_t m, n, k;
        const char *want;   /* the route's name */
        unsigned copies;    /* tk_route_copies, the public A 1, B 2 */
    } cases[] = {
        /* row-major at 4096^3: the layouts that are not K-major, through transposed copies */
        { 90, TK_SCALE_ROW, R, N, N, 4096, 4096, 4096, "k31_wgmma_cluster (copies B^T)", 2 },
        { 90, TK_SCALE_ROW, R, T, T, 4096, 4096, 4096, "k31_wgmma_cluster (copies A^T)", 1 },
        { 90, TK_SCALE_ROW, R, T, N, 4096, 4096, 4096, "k31_wgmma_cluster (copies A^T, B^T)", 3 },
        { 90, TK_SCALE_TENSOR, R, T, N, 4096, 4096, 4096, "k31_wgmma_cluster (copies A^T, B^T)", 3 },
        { 90, TK_SCALE_ROW, R, N, T, 4096, 4096, 4096, "k31_wgmma_cluster", 0 },
        /* K = 1000 and 3000 codes a line: not 16-byte lines, repacked */
        { 90, TK_SCALE_TENSOR, R, N, T, 1000, 1000, 1000, "(copies A, B)", 3 },
        { 90, TK_SCALE_TENSOR, R, N, T, 3000, 3000, 3000, "(copies A, B)", 3 },
        /* and not K-major besides: transposed, which aligns them too */
        { 90, TK_SCALE_TENSOR, R, N, N, 1000, 1000, 1000, "(copies A, B^T)", 3 },
        /* column-major: C = op(A) op(B) runs as row-major C^T = op(B)^T op(A)^T, so op_a T and op_b N are
         * K-major and the normalized B is the public A */
        { 90, TK_SCALE_ROW, C, T, N, 4096, 4096, 4096, "k31_wgmma_cluster", 0 },
        { 90, TK_SCALE_ROW, C, N, N, 4096, 4096, 4096, "k31_wgmma_cluster (copies B^T)", 1 },
        { 90, TK_SCALE_TENSOR, C, N, T, 4096, 4096, 4096, "k31_wgmma_cluster (copies A^T, B^T)", 3 },
        /* block scales with op_a T (K a multiple of 128): A transposed, the scales those of op(A) */
        { 90, TK_SCALE_BLOCK, R, T, T, 4096, 4096, 4096, "k31_wgmma_cluster (copies A^T)", 1 },
        { 90, TK_SCALE_BLOCK, R, T, N, 512, 2048, 1024, "(copies A^T, B^T)", 3 },
        /* tiny (2 M N K < 2^22): no copies */
        { 90, TK_SCALE_ROW, R, N, N, 64, 64, 64, "k01_naive", 0 },
        { 90, TK_SCALE_ROW, R, N, T, 64, 64, 100, "k01_naive", 0 },
        /* sm_80: no FP8 kernel but k01_naive, so no copies */
        { 80, TK_SCALE_ROW, R, N, N, 4096, 4096, 4096, "k01_naive", 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tk_handle_s fake;
        fh_init(&fake, cases[i].sm);
        tk_gemm_desc d =
            fp8_call(cases[i].mode, cases[i].layout, cases[i].op_a, cases[i].op_b, cases[i].m, cases[i].n, cases[i].k);
        char label[96];
        snprintf(label, sizeof label, "sm_%d %s %c%c %lldx%lldx%lld mode %d", cases[i].sm,
                 cases[i].layout == R ? "row" : "col", cases[i].op_a == N ? 'N' : 'T', cases[i].op_b == N ? 'N' : 'T',
                 (long long)cases[i].m, (long long)cases[i].n, (long long)cases[i].k, cases[i].mode);
        fp8_attrs(&fake, &d);
        tk_fp8_args f;
        tk_route r;
        tk_status st = tk_fp8_route(&fake, &d, &f, NULL, &r);
        CHECK(st == TK_SUCCESS && r.k, "%s: %s (%s)", label, tk_status_string(st), tk_last_error(&fake));
        if (st != TK_SUCCESS || !r.k)
            continue;
        char name[96];
        tk_route_name(&r, name, sizeof name);
        const char *want = cases[i].want;
        /* a want that starts with "(" names the copies of any fast kernel */
        const size_t kl = strlen(r.k->name);
        const int ok = want[0] == '(' ? strcmp(r.k->name, "k01_naive") && strlen(name) > kl &&
                                            !strcmp(name + kl + 1, want)
                                      : !strcmp(name, want);
        CHECK(ok, "%s: auto runs %s (expected %s%s)", label, name, want[0] == '(' ? "a fast kernel " : "", want);
        CHECK(tk_route_copies(&r, cases[i].layout) == cases[i].copies, "%s: copies %u (expected %u)", label,
              tk_route_copies(&r, cases[i].layout), cases[i].copies);
        /* the FP8 arguments pass through the copies as they are, swapped with the operands where column-major */
        const int col = cases[i].layout == C;
        CHECK(r.run.fp8 == &f && f.fa == (col ? d.b_fp8 : d.a_fp8) && f.fb == (col ? d.a_fp8 : d.b_fp8) &&
                  f.sa == (col ? d.scale_b : d.scale_a) && f.sb == (col ? d.scale_a : d.scale_b) &&
                  f.mode == d.scale_mode && f.ld_sa == d.ld_scale_a && f.ld_sb == d.ld_scale_b,
              "%s: the FP8 arguments changed", label);
        if (r.copy[0] || r.copy[1]) {
            /* the run is K-major, its copies' lines 16 codes, their bytes the workspace's */
            CHECK(r.run.op_a == N && r.run.op_b == T && r.run.lda % 16 == 0 && r.run.ldb % 16 == 0,
                  "%s: run op_a %d op_b %d, lda %lld ldb %lld", label, (int)r.run.op_a, (int)r.run.op_b,
                  (long long)r.run.lda, (long long)r.run.ldb);
            const int64_t mm = r.run.m, nn = r.run.n, kk = r.run.k, kp = (kk + 15) / 16 * 16;
            const size_t a_bytes = r.copy[0] ? ((size_t)(mm * kp) + 255) / 256 * 256 : 0;
            const size_t b_bytes = r.copy[1] ? ((size_t)(nn * kp) + 255) / 256 * 256 : 0;
            CHECK(r.bytes == a_bytes + b_bytes && tk_route_ws_bytes(&fake, &r) >= r.bytes,
                  "%s: workspace %zu (expected %zu), with the split's %zu", label, r.bytes, a_bytes + b_bytes,
                  tk_route_ws_bytes(&fake, &r));
        } else {
            CHECK(r.bytes == 0, "%s: %zu bytes of copies", label, r.bytes);
        }
    }
    /* a named fast kernel still takes the operands as they are: op_a T refused, k01_naive runs it */
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_gemm_desc d = fp8_call(TK_SCALE_ROW, R, T, T, 4096, 4096, 4096);
    fp8_attrs(&fake, &d);
    tk_args a;
    int noop = 0;
    const tk_kernel *named = NULL;
    const tk_widths w = { d.problem.n, d.problem.n, 0, 1 };
    CHECK(tk_prepare_widths(&fake, &d.problem, "k31_wgmma_cluster", &a, &noop, &named, 0, &w) == TK_SUCCESS && named,
          "prepare: %s", tk_last_error(&fake));
    tk_fp8_args f = { d.a_fp8, d.b_fp8, d.scale_mode, d.scale_a, d.scale_b, 0, 0, 0, 0 };
    a.fp8 = &f;
    tk_route r;
    tk_status st = tk_route_for(&fake, &a, named, &r, 1);
    CHECK(st == TK_ERR_NOT_SUPPORTED && !r.copy[0] && strstr(tk_last_error(&fake), "K-major"),
          "k31 named, op_a T: %s (%s)", tk_status_string(st), tk_last_error(&fake));
}

static void test_bad_fields(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_gemm_desc d;
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++) {
        d = fp8_desc(mode);
        d.a_fp8 = 3;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "a_fp8 3", "a_fp8:", "not a tk_fp8_format");
        d = fp8_desc(mode);
        d.b_fp8 = -1;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "b_fp8 -1", "b_fp8:", "not a tk_fp8_format");
        d = fp8_desc(mode);
        d.b_fp8 = TK_FP8_NONE;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "one operand bf16", "b_fp8:", "both operands in FP8");
        d = fp8_desc(mode);
        d.scale_a = NULL;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "no scale_a", "scale_a:", "NULL");
        d = fp8_desc(mode);
        d.scale_b = NULL;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "no scale_b", "scale_b:", "NULL");
        d = fp8_desc(mode);
        d.scale_b = (const float *)((uintptr_t)FAKE(5) + 2);
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "scale_b misaligned", "scale_b:", "4-byte aligned");
    }
    d = fp8_desc(TK_SCALE_NONE);
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "no scale mode", "scale_mode:", "with FP8 operands");
    d = fp8_desc(TK_SCALE_BLOCK + 1);
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "scale mode 4", "scale_mode:", "with FP8 operands");
    d = fp8_desc(TK_SCALE_ROW);
    d.ld_scale_a = M;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "ld with row scales", "ld_scale_a:", "only TK_SCALE_BLOCK");
    /* block scales: K a multiple of 128, the strides at least the scales' extents */
    d = fp8_desc(TK_SCALE_BLOCK);
    d.problem.k = K + 64;
    d.problem.lda = d.problem.ldb = K + 64;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "block, K % 128", "k:", "not a multiple of 128");
    d = fp8_desc(TK_SCALE_BLOCK);
    d.ld_scale_a = M - 1;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "block, ld_scale_a < M", "ld_scale_a:", "below M");
    d = fp8_desc(TK_SCALE_BLOCK);
    d.ld_scale_b = 1;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "block, ld_scale_b < ceil(N / 128)", "ld_scale_b:", "ceil(N / 128)");
}

/* ---- many FP8 products (tk_gemm_desc version 5) ---- */

enum { G = 4 };

/* d passes every check and reaches auto-dispatch. */
static void expect_dispatch(tk_handle h, const tk_gemm_desc *d, const char *label, int mode)
{
    const tk_status st = tk_gemm_run(h, d, NULL, NULL);
    CHECK(reached_dispatch(h, st), "%s, mode %d: %s (%s)", label, mode, tk_status_string(st), tk_last_error(h));
}

/* One product's set of B's scales in mode (the default stride_scale_b). */
static int64_t set_b(int mode)
{
    return mode == TK_SCALE_TENSOR ? 1 : mode == TK_SCALE_ROW ? N : (N + 127) / 128 * (K / 128);
}

/* A mixture of experts' forward: M token rows of G groups, G weights N x K
 * (op_b T) packed, each expert's scales at the default stride. */
static tk_gemm_desc moe_desc(int mode)
{
    tk_gemm_desc d = fp8_desc(mode);
    d.group_kind = TK_GROUP_ROWS;
    d.count = G;
    d.offs = (const int32_t *)FAKE(6);
    d.stride_b = (int64_t)N * K;
    return d;
}

/* The kernels' arguments of the grouped FP8 call d into *a, *f, *g (a
 * column-major call's formats and scales swapped with its operands; the
 * scales' strides 0), and the stand-in attributes of every entry they may
 * reach on h; 0 if the problem's checks refuse d. */
static int grouped_args(struct tk_handle_s *h, const tk_gemm_desc *d, tk_args *a, tk_fp8_args *f, tk_group_args *g)
{
    int noop = 0;
    const tk_kernel *named = NULL;
    const tk_widths w = { d->problem.n, d->problem.n, 0, 1 };
    h->nattrs = 0;
    if (tk_prepare_widths(h, &d->problem, NULL, a, &noop, &named, 1, &w) != TK_SUCCESS)
        return 0;
    const int col = d->problem.layout == TK_COL_MAJOR;
    *f = (tk_fp8_args){ col ? d->b_fp8 : d->a_fp8, col ? d->a_fp8 : d->b_fp8, d->scale_mode,
                        col ? d->scale_b : d->scale_a, col ? d->scale_a : d->scale_b, d->ld_scale_a, d->ld_scale_b,
                        0, 0 };
    tk_group_args_of(d, g);
    a->fp8 = f;
    a->grp = g;
    fh_attrs_args(h, a);
    return 1;
}

/* Valid grouped calls pass every check and reach auto-dispatch (which
 * kernel then runs them: test_grouped_route); the dense FP8 instances of
 * k31, k33 and k36 refuse many products. */
static void test_grouped_valid(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++) {
        tk_gemm_desc d = moe_desc(mode);
        expect_dispatch(&fake, &d, "rows", mode);
        d.stride_scale_b = set_b(mode) + 5;   /* padded sets */
        expect_dispatch(&fake, &d, "rows, padded scale sets", mode);
        d = fp8_desc(mode);   /* batched: A, B and C per product; A shared in a second call */
        d.group_kind = TK_GROUP_BATCHED;
        d.count = G;
        d.stride_a = (int64_t)M * K, d.stride_b = (int64_t)N * K, d.stride_c = (int64_t)M * N;
        expect_dispatch(&fake, &d, "batched", mode);
        d.stride_a = 0;
        expect_dispatch(&fake, &d, "batched, A shared", mode);
        d.count = 0;   /* a batch of none: a no-op, operands may be NULL */
        d.problem.a = d.problem.b = NULL;
        d.problem.c = NULL;
        const tk_status st = tk_gemm_run(&fake, &d, NULL, NULL);
        CHECK(st == TK_SUCCESS, "batched, count 0, mode %d: %s (%s)", mode, tk_status_string(st),
              tk_last_error(&fake));
    }
    /* the dense FP8 kernels named refuse many products */
    const tk_gemm_desc d = moe_desc(TK_SCALE_ROW);
    tk_args a;
    tk_fp8_args f;
    tk_group_args g;
    CHECK(grouped_args(&fake, &d, &a, &f, &g), "prepare: %s", tk_last_error(&fake));
    static const char *const fast[] = { "k31_wgmma_cluster", "k33_wgmma_128x128", "k36_swap_16x64",
                                        "k45_cluster_128x128" };
    for (size_t i = 0; i < sizeof fast / sizeof fast[0]; i++) {
        const tk_kernel *k = tk_registry_find(fast[i]);
        if (!k)
            continue;
        char why[TK_MSG_LEN] = "";
        const tk_status st = tk_kernel_check(&fake, k, &a, why, sizeof why);
        CHECK(st == TK_ERR_NOT_SUPPORTED, "%s named on grouped FP8: %s (%s)", fast[i], tk_status_string(st), why);
    }
}

/* The grouped FP8 call d as auto-dispatch runs it on the stand-in handle
 * h (sm 90 or 80; the attributes of every entry it may reach stood in),
 * through tk_fp8_route: the kernel's name, or the refusal. The route must
 * take no copies and carry the call's group and FP8 arguments, the scales'
 * strides resolved (checked here). */
static const char *grouped_route(struct tk_handle_s *h, const tk_gemm_desc *d, const char *label)
{
    static char msg[TK_MSG_LEN + 32];
    tk_args a;
    tk_fp8_args f;
    tk_group_args g;
    (void)grouped_args(h, d, &a, &f, &g);   /* a refused problem is refused by the route too */
    tk_route r;
    const tk_status st = tk_fp8_route(h, d, &f, &g, &r);
    if (st != TK_SUCCESS || !r.k) {
        snprintf(msg, sizeof msg, "refused: %s (%s)", tk_status_string(st), tk_last_error(h));
        return msg;
    }
    CHECK(!r.copy[0] && !r.copy[1] && !r.copy[2] && r.bytes == 0, "%s: the route copies (%d %d %d)", label,
          r.copy[0], r.copy[1], r.copy[2]);
    CHECK(r.run.grp == &g && r.run.fp8 == &f && g.count == d->count, "%s: the route lost its arguments", label);
    return r.k->name;
}

/* Auto-dispatch of many FP8 products: k43's FP8 instances by the rows a
 * group (ROWS: M / count; BATCHED: M) where they take the call, k01_naive
 * where none does (K % 16, strides off 16 bytes, not K-major, sm_80); each
 * k43 line named accepts or refuses with its reason. */
static void test_grouped_route(void)
{
    static const struct {
        int kind, mode;
        int64_t m, n, k;
        const char *want;
    } cases[] = {
        /* ROWS, 4 groups: 16, 32, 64 rows a group; N 4096 over 1024-row groups (128 x 256 tiles fill the SMs) */
        { TK_GROUP_ROWS, TK_SCALE_ROW, 64, N, K, "k43_swap_16x64" },
        /* block scales: no swapped tiles (half the rate of 128-row tiles: moe_time, session 32); 4 tiles */
        { TK_GROUP_ROWS, TK_SCALE_BLOCK, 64, N, K, "k43_grouped_128x128" },
        { TK_GROUP_ROWS, TK_SCALE_BLOCK, 64, 4096, 7168, "k43_grouped_128x128" },   /* 64 tiles of 128 x 256 */
        { TK_GROUP_ROWS, TK_SCALE_TENSOR, 128, N, K, "k43_swap_32x64" },
        { TK_GROUP_ROWS, TK_SCALE_BLOCK, 256, N, K, "k43_grouped_128x128" },   /* bf16 takes 64 x 128: no FP8 one */
        { TK_GROUP_ROWS, TK_SCALE_ROW, 256, N, K, "k43_grouped_128x128" },
        { TK_GROUP_ROWS, TK_SCALE_ROW, 4096, 4096, 2048, "k43_grouped_128x256" },
        { TK_GROUP_ROWS, TK_SCALE_BLOCK, 4096, 4096, 2048, "k43_grouped_128x256" },
        { TK_GROUP_ROWS, TK_SCALE_ROW, 4096, 128, 2048, "k43_grouped_128x128" },
        { TK_GROUP_ROWS, TK_SCALE_ROW, 4096, 64, 2048, "k43_grouped_128x128" },   /* bf16 takes 128 x 64 */
        { TK_GROUP_BATCHED, TK_SCALE_TENSOR, 1024, 4096, 512, "k43_grouped_128x256" },
        { TK_GROUP_BATCHED, TK_SCALE_TENSOR, 512, 4096, 512, "k43_grouped_128x128" },   /* 256 tiles of 128 x 256 */
        { TK_GROUP_BATCHED, TK_SCALE_ROW, 16, N, K, "k43_swap_16x64" },
        { TK_GROUP_BATCHED, TK_SCALE_ROW, 48, N, K, "k43_grouped_128x128" },
        /* K not a multiple of 16 (lines of codes off TMA's 16 bytes): k01_naive */
        { TK_GROUP_ROWS, TK_SCALE_ROW, 512, N, 200, "k01_naive" },
        { TK_GROUP_BATCHED, TK_SCALE_TENSOR, 64, N, 45, "k01_naive" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct tk_handle_s fake;
        fh_init(&fake, 90);
        tk_gemm_desc d = fp8_desc(cases[i].mode);
        tk_gemm_problem *p = &d.problem;
        p->m = cases[i].m, p->n = cases[i].n, p->k = cases[i].k;
        p->lda = p->ldb = p->k, p->ldc = p->n;
        d.group_kind = cases[i].kind;
        d.count = G;
        if (cases[i].kind == TK_GROUP_ROWS) {
            d.offs = (const int32_t *)FAKE(6);
        } else {
            d.stride_a = p->m * p->k;
            d.stride_c = p->m * p->n;
        }
        d.stride_b = p->n * p->k;
        if (cases[i].mode == TK_SCALE_BLOCK) {
            d.ld_scale_a = p->m;
            d.ld_scale_b = (p->n + 127) / 128;
        }
        char label[128];
        snprintf(label, sizeof label, "%s, mode %d, %lld x %lld x %lld, %d groups",
                 cases[i].kind == TK_GROUP_ROWS ? "rows" : "batched", cases[i].mode, (long long)p->m,
                 (long long)p->n, (long long)p->k, G);
        const char *got = grouped_route(&fake, &d, label);
        CHECK(!strcmp(got, cases[i].want), "%s: auto runs %s (expected %s)", label, got, cases[i].want);
        fh_init(&fake, 80);   /* sm_80: no k43 */
        got = grouped_route(&fake, &d, label);
        CHECK(!strcmp(got, "k01_naive"), "%s, sm_80: auto runs %s (expected k01_naive)", label, got);
    }

    /* the scales' strides as the kernels get them: B's per expert (default one set, or the caller's), A's
     * shared (0); BATCHED column-major: swapped with the operands (public op_a T, op_b N: K-major) */
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_gemm_desc d = moe_desc(TK_SCALE_ROW);
    d.stride_scale_b = N + 16;
    tk_fp8_args f;
    tk_group_args g;
    tk_route r;
    (void)grouped_route(&fake, &d, "rows, scale strides");
    tk_status st = tk_fp8_route(&fake, &d, &f, &g, &r);
    CHECK(st == TK_SUCCESS && f.sstride_a == 0 && f.sstride_b == N + 16 && g.kind == TK_GROUP_ROWS,
          "rows: sstride_a %lld, sstride_b %lld (expected 0, %d)", (long long)f.sstride_a, (long long)f.sstride_b,
          N + 16);
    d = fp8_desc(TK_SCALE_ROW);
    d.problem.layout = TK_COL_MAJOR;
    d.problem.op_a = TK_OP_T, d.problem.op_b = TK_OP_N;
    d.problem.lda = K, d.problem.ldb = K, d.problem.ldc = M;
    d.group_kind = TK_GROUP_BATCHED;
    d.count = G;
    d.stride_a = (int64_t)M * K, d.stride_b = (int64_t)N * K, d.stride_c = (int64_t)M * N;
    d.stride_scale_a = M + 3;   /* the public A's: the normalized B's */
    const char *got = grouped_route(&fake, &d, "batched, column-major");
    CHECK(!strncmp(got, "k43_", 4), "batched, column-major T N: auto runs %s (expected a k43 FP8 instance)", got);
    st = tk_fp8_route(&fake, &d, &f, &g, &r);
    CHECK(st == TK_SUCCESS && f.sstride_a == N && f.sstride_b == M + 3 && g.stride_a == (int64_t)N * K &&
              g.stride_b == (int64_t)M * K && r.run.m == N && r.run.n == M,
          "batched, column-major: sstride_a %lld, sstride_b %lld (expected %d, %d), run %lld x %lld",
          (long long)f.sstride_a, (long long)f.sstride_b, N, M + 3, (long long)r.run.m, (long long)r.run.n);
    /* a caller without tk_group_args storage is refused, not run on a dangling one */
    st = tk_fp8_route(&fake, &d, &f, NULL, &r);
    CHECK(st == TK_ERR_INVALID_VALUE && strstr(tk_last_error(&fake), "group_kind:"), "route, g NULL: %s (%s)",
          tk_status_string(st), tk_last_error(&fake));

    /* k43's lines named on a call they take (K-major, K % 16 == 0) and what each must refuse */
    d = moe_desc(TK_SCALE_BLOCK);
    d.b_fp8 = TK_FP8_E5M2;
    tk_args a;
    CHECK(grouped_args(&fake, &d, &a, &f, &g), "prepare: %s", tk_last_error(&fake));
    f.sstride_b = set_b(TK_SCALE_BLOCK);
    static const struct {
        const char *kernel;
        int ok;
    } lines[] = { { "k43_grouped_128x128", 1 }, { "k43_grouped_128x256", 1 }, { "k43_swap_16x64", 1 },
                  { "k43_swap_32x64", 1 },      { "k43_grouped_64x128", 0 },  { "k43_grouped_128x64", 0 } };
    char why[TK_MSG_LEN];
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        const tk_kernel *k = tk_registry_find(lines[i].kernel);
        CHECK(k != NULL, "%s: not in the registry", lines[i].kernel);
        if (!k)
            continue;
        why[0] = '\0';
        tk_resources res;
        tk_kernel_resources(k, &a, &fake.dev, &res);
        st = tk_kernel_check(&fake, k, &a, why, sizeof why);
        if (lines[i].ok)
            CHECK(st == TK_SUCCESS && res.func, "%s on rows, block, e4m3 x e5m2: %s (%s)", lines[i].kernel,
                  tk_status_string(st), why);
        else
            CHECK(st == TK_ERR_NOT_SUPPORTED && !res.func && strstr(why, "only k43_grouped_128x128"),
                  "%s on FP8: %s (%s), entry %p (expected a refusal naming the lines with FP8 instances)",
                  lines[i].kernel, tk_status_string(st), why, res.func);
    }
    /* the FP8 entry differs from the bf16 one, and by formats */
    const tk_kernel *k128 = tk_registry_find("k43_grouped_128x128");
    tk_resources r8, r8b, r16;
    tk_kernel_resources(k128, &a, &fake.dev, &r8);
    f.fb = TK_FP8_E4M3;
    tk_kernel_resources(k128, &a, &fake.dev, &r8b);
    a.fp8 = NULL;
    tk_kernel_resources(k128, &a, &fake.dev, &r16);
    a.fp8 = &f;
    CHECK(r8.func && r8b.func && r16.func && r8.func != r8b.func && r8.func != r16.func && r8b.func != r16.func,
          "k43_grouped_128x128: entries e4m3 x e5m2 %p, e4m3 x e4m3 %p, bf16 %p (expected three)", r8.func, r8b.func,
          r16.func);
    /* each refusal, with its reason (the arguments changed one at a time, then restored) */
    static const struct {
        const char *what, *word;
    } refusals[] = {
        { "K groups", "TK_GROUP_ROWS and TK_GROUP_BATCHED" },
        { "masked", "TK_GROUP_ROWS and TK_GROUP_BATCHED" },
        { "K % 16", "not a multiple of 16" },
        { "block, K % 128", "not a multiple of 128" },
        { "op_b N", "K-major" },
        { "op_a T, batched", "K-major" },
        { "stride_b off 16 bytes", "stride_b" },
        { "K 0", "k: 0" },
    };
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        tk_args b = a;
        tk_group_args gb = g;
        tk_fp8_args fb = f;
        b.grp = &gb;
        b.fp8 = &fb;
        switch (i) {
        case 0: gb.kind = TK_GROUP_K; break;
        case 1: gb.kind = TK_GROUP_MASKED; break;
        case 2: fb.mode = TK_SCALE_ROW; b.k = 200; break;
        case 3: b.k = 400; break;
        case 4: b.op_b = TK_OP_N; b.ldb = N; break;
        case 5: gb.kind = TK_GROUP_BATCHED; gb.stride_a = (int64_t)M * K; gb.stride_c = (int64_t)M * N;
                b.op_a = TK_OP_T; b.lda = M; break;
        case 6: gb.stride_b = (int64_t)N * K + 8; break;
        case 7: b.k = 0; break;
        }
        for (size_t j = 0; j < 4; j++) {
            const tk_kernel *k = tk_registry_find(lines[j].kernel);
            why[0] = '\0';
            st = tk_kernel_check(&fake, k, &b, why, sizeof why);
            CHECK(st == TK_ERR_NOT_SUPPORTED && strstr(why, refusals[i].word), "%s on %s: %s (%s; expected \"%s\")",
                  lines[j].kernel, refusals[i].what, tk_status_string(st), why, refusals[i].word);
        }
    }
}

/* Every bad field of a grouped FP8 call refused before the device, naming
 * the field. */
static void test_grouped_bad_fields(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_gemm_desc d;
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++) {
        d = moe_desc(mode);
        d.scale_b = NULL;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "rows, no scale_b", "scale_b:", "NULL");
        d = moe_desc(mode);
        d.offs = NULL;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "rows, no offs", "offs:", "NULL");
        d = moe_desc(mode);
        d.stride_scale_b = -1;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "rows, negative scale stride", "stride_scale_b:", "negative");
        const int64_t set = set_b(mode);
        if (set > 1) {
            d = moe_desc(mode);
            d.stride_scale_b = set - 1;
            expect(&fake, &d, TK_ERR_INVALID_VALUE, "rows, overlapping scale sets", "stride_scale_b:",
                   "below one product's scales");
        }
        d = moe_desc(mode);
        d.stride_scale_b = INT64_MAX / 8;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "rows, scale sets past INT64_MAX", "stride_scale_b:", "INT64_MAX");
        d = moe_desc(mode);
        d.stride_scale_a = 1;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "rows, stride_scale_a", "stride_scale_a:", "stacked");
        d = moe_desc(mode);
        d.stride_a = (int64_t)M * K;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "rows, stride_a", "stride_a:", "does not use it");
        d = moe_desc(mode);
        d.stride_b = 0;   /* one weight for all: its scales one set too */
        d.stride_scale_b = 2 * set;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "rows, shared B with scale stride", "stride_scale_b:",
               "stride_b is 0");
        d = moe_desc(mode);
        d.group_kind = TK_GROUP_MASKED;
        expect(&fake, &d, TK_ERR_NOT_SUPPORTED, "masked", "group_kind:", "not supported yet");
        d = moe_desc(mode);
        d.problem.layout = TK_COL_MAJOR;
        d.problem.lda = M, d.problem.ldc = M;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "rows, column-major", "layout:", "TK_ROW_MAJOR alone");
        d = fp8_desc(mode);   /* one product: no scale strides, no group fields */
        d.stride_scale_b = set;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "one product, stride_scale_b", "stride_scale_b:", "TK_GROUP_NONE");
        d = fp8_desc(mode);
        d.count = 2;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "one product, count", "count:", "TK_GROUP_NONE");
    }
    d = moe_desc(TK_SCALE_BLOCK);
    d.problem.k = K + 64;
    d.problem.lda = d.problem.ldb = K + 64;
    d.stride_b = (int64_t)N * (K + 64);
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "rows, block, K % 128", "k:", "not a multiple of 128");
    d = moe_desc(TK_SCALE_ROW);
    d.stride_b = 1;   /* the experts' weights overlap: as for bf16, allowed (B is read only) */
    expect_dispatch(&fake, &d, "rows, overlapping B", TK_SCALE_ROW);
    /* batched, column-major: normalized (A and B, their scales and strides swapped) for tensor and row
     * scales, refused for block scales */
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++) {
        d = fp8_desc(mode);
        d.problem.layout = TK_COL_MAJOR;
        d.problem.lda = M, d.problem.ldb = N, d.problem.ldc = M;
        d.group_kind = TK_GROUP_BATCHED;
        d.count = G;
        d.stride_a = (int64_t)M * K, d.stride_b = (int64_t)N * K, d.stride_c = (int64_t)M * N;
        d.stride_scale_a = mode == TK_SCALE_ROW ? M : 0;
        if (mode == TK_SCALE_BLOCK)
            expect(&fake, &d, TK_ERR_NOT_SUPPORTED, "batched, column-major, block", "layout:", "row-major problem");
        else
            expect_dispatch(&fake, &d, "batched, column-major", mode);
    }
    d = fp8_desc(TK_SCALE_ROW);
    d.group_kind = TK_GROUP_BATCHED;
    d.count = G;
    d.stride_a = (int64_t)M * K;
    d.stride_scale_a = M - 1;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "batched, overlapping scale_a sets", "stride_scale_a:", "below");
    /* bf16 operands take no scale strides */
    d = fp8_desc(TK_SCALE_TENSOR);
    d.a_fp8 = d.b_fp8 = TK_FP8_NONE;
    d.scale_mode = 0;
    d.scale_a = d.scale_b = NULL;
    d.stride_scale_b = 1;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "bf16 with stride_scale_b", "stride_scale_b:", "take no scales");
}

/* bf16 operands take none of the version-4 fields, and run as before. */
static void test_bf16_takes_no_scales(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_gemm_desc d = fp8_desc(TK_SCALE_TENSOR);
    d.a_fp8 = d.b_fp8 = TK_FP8_NONE;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "bf16 with scales", "scale_mode:", "take no scales");
    d.scale_mode = 0;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "bf16 with scale_a", "scale_a:", "take no scales");
    d.scale_a = d.scale_b = NULL;
    d.problem.c = FAKE(3);
    /* with every version-4 field 0 the call is the plain product: it passes the checks and asks for the
     * device, which this stand-in handle refuses (as test_epilogue's valid calls) */
    const tk_status st = tk_gemm_run(&fake, &d, NULL, NULL);
    CHECK(st != TK_ERR_INVALID_VALUE, "plain bf16 desc refused as invalid: %s", tk_last_error(&fake));
}

void tk_tests(void)
{
    TK_TEST(test_valid_calls_pass);
    TK_TEST(test_route);
    TK_TEST(test_route_swap);
    TK_TEST(test_route_copies);
    TK_TEST(test_bad_fields);
    TK_TEST(test_bf16_takes_no_scales);
    TK_TEST(test_grouped_valid);
    TK_TEST(test_grouped_route);
    TK_TEST(test_grouped_bad_fields);
}
