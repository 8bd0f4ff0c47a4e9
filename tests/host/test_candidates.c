/* test_candidates.c - tk_candidates and its cost model (issue 37, item 3)
 * on the CPU: the argument checks, the list's order against auto-dispatch
 * (rank 1 is tk_select_kernel's choice, its other candidates next, the
 * kernels it never picks by estimate, the refused last), the copy route's
 * entry, the versioned array, and the model's arithmetic on a modeled H100
 * against the README's measurements. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lib/internal.h"
#include "check.h"
#include "fake_handle.h"

static tk_gemm_problem square(int64_t n, tk_op op_b)
{
    tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, op_b, n, n, n, 1.0f, 0.0f, NULL, n, NULL, n, NULL, n, TK_F32 };
    return p;
}

/* The route a named kernel runs p on (as is), normalized. */
static void named_route(struct tk_handle_s *h, const tk_gemm_problem *p, const char *name, tk_route *r, tk_args *a)
{
    int noop = 0;
    const tk_kernel *k = NULL;
    CHECK(tk_prepare(h, p, name, a, &noop, &k, 0) == TK_SUCCESS && k, "prepare %s: %s", name, h->err);
    tk_route_plan(a, 0, 0, r);
    r->k = k;
}

static double est_of(struct tk_handle_s *h, const tk_gemm_problem *p, const char *name)
{
    tk_route r;
    tk_args a;
    named_route(h, p, name, &r, &a);
    return tk_cost_us(&r, &a, &h->dev);
}

static void test_cost_model(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    /* 8192^3 on k31: 16 waves of 128 x 256 tiles at 74.1% of 4096 flop/clk x
     * 1.98 GHz an SM; measured 1.386 ms (README, 793 TFLOP/s) */
    tk_gemm_problem p = square(8192, TK_OP_N);
    double est = est_of(&fake, &p, "k31_wgmma_cluster");
    double want = 3.0 + 1e6 * 16 * 2.0 * 128 * 256 * 8192 / (4096 * 1.98e9 * 0.741);
    CHECK(fabs(est - want) < 1e-6 * want, "k31 8192^3: %.1f us, the formula %.1f", est, want);
    CHECK(est > 1300 && est < 1600, "k31 8192^3: %.1f us, measured 1386", est);
    /* k01_naive: 4.6 TFLOP/s measured; the model within 2x of it */
    double naive = est_of(&fake, &p, "k01_naive");
    CHECK(naive > 0.5 * 239000 && naive < 2 * 239000, "k01_naive 8192^3: %.0f us, measured about 239000", naive);
    /* decode: memory-bound, the bytes over 2 x 2619 MHz x 640 bytes */
    tk_gemm_problem d = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, 1, 4096, 4096, 1.0f, 0.0f, NULL, 4096, NULL, 4096, NULL,
                          4096, TK_F32 };
    const double bytes = 2.0 * (4096 + 4096.0 * 4096) + 4.0 * 4096, bw = 2.0 * 2619e6 * 640;
    est = est_of(&fake, &d, "k40_skinny");
    CHECK(fabs(est - (3.0 + 1e6 * bytes / bw)) < 1e-3, "k40 decode: %.3f us, the bytes' %.3f", est,
          3.0 + 1e6 * bytes / bw);
    /* beta != 0 reads C too */
    d.beta = 1.0f;
    CHECK(est_of(&fake, &d, "k40_skinny") > est, "beta != 0 costs nothing more");
    /* whole waves: 12 x 11 = 132 tiles of 128 x 256 are one, 12 x 12 two
     * (K long enough for compute to dominate) */
    tk_gemm_problem w = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 128 * 12, 256 * 11, 16384, 1.0f, 0.0f, NULL, 16384, NULL,
                          256 * 11, NULL, 256 * 11, TK_BF16 };
    double one = est_of(&fake, &w, "k30_wgmma_tma");
    w.n = w.ldb = w.ldc = 256 * 11 + 1;
    double two = est_of(&fake, &w, "k30_wgmma_tma");
    CHECK(two > 1.8 * (one - 3) && two < 2.2 * one, "one wave %.1f us, two %.1f", one, two);
    /* copies: a launch and the operand's bytes twice more */
    tk_route r;
    tk_args a;
    named_route(&fake, &p, "k31_wgmma_cluster", &r, &a);
    const double plain = tk_cost_us(&r, &a, &fake.dev);
    r.copy[0] = 1;
    CHECK(tk_cost_us(&r, &a, &fake.dev) >= plain + 3.0, "a copy of A costs no launch");
    /* a device it cannot describe: no estimate */
    r.copy[0] = 0;
    fake.dev.mem_bus_bits = 0;
    CHECK(tk_cost_us(&r, &a, &fake.dev) == 0.0, "no memory bus: an estimate");
    fake.dev = fh_device(75);
    CHECK(tk_cost_us(&r, &a, &fake.dev) == 0.0, "sm_75: an estimate");
    fake.dev = fh_device(80);
    CHECK(tk_cost_us(&r, &a, &fake.dev) > 1.9 * (plain - 3), "sm_80 is not half the throughput");
}

static void test_args(void)
{
    tk_handle h = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS, "tk_create");
    tk_gemm_problem p = square(256, TK_OP_N);
    tk_candidate out[4] = { TK_CANDIDATE_INIT };
    int count = -1;
    CHECK(tk_candidates(NULL, &p, out, 4, &count) == TK_ERR_INVALID_VALUE && starts(tk_last_error(NULL), "h:"),
          "NULL h: %s", tk_last_error(NULL));
    CHECK(tk_candidates(h, &p, out, 4, NULL) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "count:"),
          "NULL count: %s", tk_last_error(h));
    CHECK(tk_candidates(h, &p, out, -1, &count) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "capacity:") &&
              count == 0,
          "capacity -1: %s, count %d", tk_last_error(h), count);
    CHECK(tk_candidates(h, &p, NULL, 4, &count) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "out:"),
          "NULL out: %s", tk_last_error(h));
    tk_candidate small = { .size = 8 };
    CHECK(tk_candidates(h, &p, &small, 1, &count) == TK_ERR_INVALID_VALUE &&
              starts(tk_last_error(h), "out[0].size:") && contains(tk_last_error(h), "TK_CANDIDATE_INIT"),
          "small stride: %s", tk_last_error(h));
    CHECK(tk_candidates(h, NULL, out, 4, &count) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "problem:"),
          "NULL problem: %s", tk_last_error(h));
    p.ldb = 1;
    CHECK(tk_candidates(h, &p, out, 4, &count) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "ldb:"),
          "bad ldb: %s", tk_last_error(h));
    p = square(256, TK_OP_N);
    if (!have_gpu()) {
        tk_status st = tk_candidates(h, &p, out, 4, &count);
        CHECK(st == TK_ERR_NO_DEVICE && count == 0, "no device: %s", tk_status_string(st));
    }
    /* no GEMM kernel runs: no candidates, no device needed */
    p.n = 0;
    count = -1;
    CHECK(tk_candidates(h, &p, out, 4, &count) == TK_SUCCESS && count == 0, "N = 0: %d (%s)", count,
          tk_last_error(h));
    tk_destroy(h);
}

#define MAXC 64

static int find(const tk_candidate *c, int n, const char *name, unsigned copies)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(c[i].name, name) && c[i].copies == copies)
            return i;
    return -1;
}

/* The list against auto-dispatch on a modeled H100 and A100. */
static void check_list(struct tk_handle_s *h, const tk_gemm_problem *p, const char *label)
{
    fh_attrs(h, p);
    tk_candidate c[MAXC];
    c[0] = (tk_candidate)TK_CANDIDATE_INIT;
    int n = -1;
    tk_status st = tk_candidates(h, p, c, MAXC, &n);
    CHECK(st == TK_SUCCESS && !*tk_last_error(h), "%s: %s (%s)", label, tk_status_string(st), tk_last_error(h));
    if (st)
        return;
    tk_args a;
    int noop = 0;
    const tk_kernel *none = NULL;
    CHECK(tk_prepare(h, p, NULL, &a, &noop, &none, 0) == TK_SUCCESS, "%s: prepare", label);
    const char *chosen = tk_select_kernel(h, p);
    CHECK(chosen && n >= tk_registry_count() && n <= tk_registry_count() + 1, "%s: %d entries, chose %s", label, n,
          chosen ? chosen : "none");
    CHECK(chosen && !strcmp(c[0].name, chosen) && c[0].rank == 1 && c[0].status == TK_SUCCESS, "%s: first %s, auto %s",
          label, c[0].name, chosen ? chosen : "none");
    int last_group = 0, last_pref = 1 << 30, seen_refused = 0, last_index = -1;
    double last_est = 0;
    for (int i = 0; i < n; i++) {
        CHECK(c[i].size == sizeof c[i] && c[i].name, "%s: entry %d: size %zu", label, i, c[i].size);
        const tk_kernel *k = tk_registry_find(c[i].name);
        CHECK(k != NULL, "%s: %s is not in the registry", label, c[i].name);
        if (!k)
            continue;
        tk_status s = tk_kernel_supports(h, c[i].name, p);
        if (c[i].copies) {   /* auto's route through copies: first, and the kernel refuses the operands as they are */
            CHECK(i == 0 && s != TK_SUCCESS, "%s: a copy entry at %d (%s)", label, i, c[i].name);
            continue;
        }
        CHECK(s == c[i].status, "%s: %s: status %s, tk_kernel_supports %s", label, c[i].name,
              tk_status_string(c[i].status), tk_status_string(s));
        if (c[i].status) {
            CHECK(c[i].rank == 0 && c[i].est_us == 0 && c[i].workspace_bytes == 0, "%s: refused %s ranked %d", label,
                  c[i].name, c[i].rank);
            int index = 0;
            while (tk_registry_at(index) != k)
                index++;
            CHECK(index > last_index, "%s: refused ones out of registry order at %s", label, c[i].name);
            last_index = index;
            seen_refused = 1;
            continue;
        }
        CHECK(!seen_refused && c[i].rank == i + 1 && c[i].est_us > 0, "%s: %s at %d ranked %d, est %g", label,
              c[i].name, i, c[i].rank, c[i].est_us);
        size_t ws = 0;
        CHECK(tk_workspace_size(h, p, c[i].name, &ws) == TK_SUCCESS && ws == c[i].workspace_bytes,
              "%s: %s: workspace %zu, tk_workspace_size %zu", label, c[i].name, c[i].workspace_bytes, ws);
        /* auto-dispatch's candidates by its preference, then the others by estimate */
        const int pref = tk_auto_rank(h, k, NULL, &a);
        const int group = pref > 0 ? 1 : 2;
        CHECK(group >= last_group, "%s: %s (never auto: %d) after the other group", label, c[i].name, group == 2);
        if (group == 1 && last_group == 1)
            CHECK(pref <= last_pref, "%s: %s (preference %d) after %d", label, c[i].name, pref, last_pref);
        if (group == 2 && last_group == 2)
            CHECK(c[i].est_us >= last_est, "%s: %s (%g us) after %g us", label, c[i].name, c[i].est_us, last_est);
        last_group = group;
        last_pref = pref;
        last_est = c[i].est_us;
    }
    int cub = find(c, n, "cublas", 0);
    CHECK(cub > 0 && c[cub].status == TK_SUCCESS && c[cub].rank > 1, "%s: cublas at %d", label, cub);
}

static void test_order(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_gemm_problem p = square(4096, TK_OP_N);
    check_list(&fake, &p, "4096^3 NN on sm_90");
    tk_gemm_problem d = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, 9, 1000, 16360, 1.0f, 0.0f, NULL, 16360, NULL, 16360,
                          NULL, 1000, TK_F32 };
    check_list(&fake, &d, "9 x 1000 x 16360 NT on sm_90");
    tk_candidate c[MAXC] = { TK_CANDIDATE_INIT };
    int n = 0;
    fh_attrs(&fake, &d);
    CHECK(tk_candidates(&fake, &d, c, MAXC, &n) == TK_SUCCESS && !strcmp(c[0].name, "k40_skinny") &&
              c[0].workspace_bytes > 0,
          "decode: %s first, workspace %zu", c[0].name, c[0].workspace_bytes);
    fh_init(&fake, 80);
    check_list(&fake, &p, "4096^3 NN on sm_80");
    fh_attrs(&fake, &p);
    CHECK(tk_candidates(&fake, &p, c, MAXC, &n) == TK_SUCCESS, "sm_80");
    int k31 = find(c, n, "k31_wgmma_cluster", 0);
    CHECK(k31 >= 0 && c[k31].status == TK_ERR_ARCH_MISMATCH && c[k31].rank == 0, "sm_80: k31 %s",
          k31 >= 0 ? tk_status_string(c[k31].status) : "missing");
}

/* A misaligned A: auto-dispatch's route through a copy of it comes first;
 * the kernel by its name (A as it is) is refused further down. */
static void test_copy_route(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    for (int col = 0; col < 2; col++) {
        /* row-major: lda 4095; column-major: A is M x K stored with lda >= M: M = lda = 4095 */
        tk_gemm_problem p = square(4096, TK_OP_N);
        if (col) {
            p.layout = TK_COL_MAJOR;
            p.m = p.lda = p.ldc = 4095;
        } else {
            p.k = p.lda = p.ldb = 4095;
            p.ldb = 4096;
        }
        fh_attrs(&fake, &p);
        tk_candidate c[MAXC] = { TK_CANDIDATE_INIT };
        int n = 0;
        CHECK(tk_candidates(&fake, &p, c, MAXC, &n) == TK_SUCCESS, "%s: %s", col ? "col" : "row", fake.err);
        const char *chosen = tk_select_kernel(&fake, &p);
        CHECK(chosen && c[0].copies == 1 && !strcmp(c[0].name, chosen) && c[0].rank == 1 &&
                  c[0].workspace_bytes >= (size_t)4096 * 4096 * 2,
              "%s: first %s copies %u ws %zu (auto %s)", col ? "col" : "row", c[0].name, c[0].copies,
              c[0].workspace_bytes, chosen ? chosen : "none");
        int again = find(c, n, c[0].name, 0);
        CHECK(again > 0 && c[again].status == TK_ERR_NOT_SUPPORTED && c[again].rank == 0, "%s: %s as it is: %d",
              col ? "col" : "row", c[0].name, again);
        CHECK(n == tk_registry_count() + 1, "%s: %d entries", col ? "col" : "row", n);
        check_list(&fake, &p, col ? "lda 4095, column-major" : "lda 4095, row-major");
    }
}

/* Counting, a short array, a longer stride (a newer caller's struct). */
static void test_array(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_gemm_problem p = square(2048, TK_OP_T);
    fh_attrs(&fake, &p);
    int n = -1;
    CHECK(tk_candidates(&fake, &p, NULL, 0, &n) == TK_SUCCESS && n == tk_registry_count(), "count only: %d", n);
    tk_candidate c[4];
    memset(c, 0x5a, sizeof c);
    c[0].size = sizeof c[0];
    int m = -1;
    CHECK(tk_candidates(&fake, &p, c, 3, &m) == TK_SUCCESS && m == n, "capacity 3: count %d", m);
    const unsigned char *tail = (const unsigned char *)&c[3];
    int untouched = 1;
    for (size_t i = 0; i < sizeof c[3]; i++)
        untouched &= tail[i] == 0x5a;
    CHECK(untouched && c[2].size == sizeof c[2] && c[2].rank == 3, "the 4th entry written, or the 3rd not");
    struct big { tk_candidate c; double future[3]; } b[MAXC];
    memset(b, 0x5a, sizeof b);
    b[0].c.size = sizeof b[0];
    CHECK(tk_candidates(&fake, &p, &b[0].c, MAXC, &m) == TK_SUCCESS && m == n, "stride %zu", sizeof b[0]);
    tk_candidate plain[MAXC] = { TK_CANDIDATE_INIT };
    CHECK(tk_candidates(&fake, &p, plain, MAXC, &m) == TK_SUCCESS, "plain");
    for (int i = 0; i < n; i++) {
        CHECK(b[i].c.size == sizeof b[0] && b[i].future[0] == 0 && b[i].future[2] == 0 &&
                  !strcmp(b[i].c.name, plain[i].name) && b[i].c.rank == plain[i].rank,
              "entry %d at a longer stride: size %zu, %s", i, b[i].c.size, b[i].c.name);
    }
}

void tk_tests(void)
{
    TK_TEST(test_cost_model);
    TK_TEST(test_args);
    TK_TEST(test_order);
    TK_TEST(test_copy_route);
    TK_TEST(test_array);
}
