/* test_huge.c - the host half of the huge-problem checks (the GPU half is
 * tests/gpu/test_huge.c): the lab's padding sentinel, fp64 reference and
 * comparison index matrices past 2^32 elements (host buffers reserved with
 * MAP_NORESERVE, so only the pages touched cost memory), the route's plan
 * for an operand over 4 GiB, and the kernels' refusals of problems their
 * 32-bit grids, tile corners or TMA strides cannot take. No GPU. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "lib/internal.h"
#include "lab/lab.h"
#include "check.h"

#define FAR (((int64_t)1 << 31) + 8)   /* a leading dimension: row 2 starts past 2^32 elements */

/* bytes of zeros that cost only the pages touched; NULL (with a note) when
 * the address space cannot be had. */
static void *sparse_alloc(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED)
        return p;
    printf("     (cannot reserve %.1f GB of address space: not checked)\n", (double)bytes / 1e9);
    return NULL;
}

static void test_index_arithmetic(void)
{
    CHECK(tk_lab_index(TK_ROW_MAJOR, 40000, 65535, 39999) == INT64_C(2621439999), "row-major (65535, 39999)");
    CHECK(tk_lab_index(TK_COL_MAJOR, 65536, 65535, 65600) == INT64_C(4299227135), "column-major (65535, 65600)");
    CHECK(tk_lab_buf_elems(65536, 65601) >= (size_t)65536 * 65601, "buffer of 65536 x 65601: %zu",
          tk_lab_buf_elems(65536, 65601));
}

/* A row-major bf16 C of 3 lines of FAR - 3 elements: line 2's padding lies
 * past 2^32 elements. The sentinel must land there, and a write there must
 * be seen (a 32-bit offset would fill and check the same wrong place). */
static void test_pad_past_2_32(void)
{
    const int64_t ld = FAR, n = FAR - 3;
    const size_t bytes = (size_t)(3 * ld) * 2;
    uint16_t *c = sparse_alloc(bytes);
    if (!c)
        return;
    int64_t row = -1, col = -1;
    tk_lab_pad_fill(c, TK_BF16, TK_ROW_MAJOR, 3, n, ld);
    CHECK(c[2 * ld + n] == TK_LAB_PAD_BF16 && c[2 * ld + ld - 1] == TK_LAB_PAD_BF16,
          "the sentinel is not at line 2's padding (offset %lld)", (long long)(2 * ld + n));
    CHECK(tk_lab_pad_check(c, TK_BF16, TK_ROW_MAJOR, 3, n, ld, &row, &col) == 0, "fresh padding reported written");
    c[2 * ld + n + 1] = 0;
    int64_t bad = tk_lab_pad_check(c, TK_BF16, TK_ROW_MAJOR, 3, n, ld, &row, &col);
    CHECK(bad == 1 && row == 2 && col == n + 1, "a write at (2, %lld): %lld found, first at (%lld, %lld)",
          (long long)(n + 1), (long long)bad, (long long)row, (long long)col);
    munmap(c, bytes);
}

/* The fp64 reference of C = A B^T with A (3 x 4) and B (stored 3 x 4) on
 * rows FAR elements apart: row 2 of each starts past 2^32 elements. */
static void test_reference_past_2_32(void)
{
    const size_t bytes = (size_t)(3 * FAR) * 2;
    uint16_t *a = sparse_alloc(bytes), *b = a ? sparse_alloc(bytes) : NULL;
    if (!b) {
        if (a)
            munmap(a, bytes);
        return;
    }
    for (int64_t i = 0; i < 3; i++)
        for (int64_t k = 0; k < 4; k++) {
            a[i * FAR + k] = tk_lab_f32_to_bf16((float)(i + 1 + k));
            b[i * FAR + k] = tk_lab_f32_to_bf16((float)(2 * i - k));
        }
    tk_gemm_problem hp = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, 3, 3, 4, 1.0f, 0.0f, a, FAR, b, FAR, NULL, 3, TK_F32 };
    const int64_t prow[3] = { 2, 0, 2 }, pcol[3] = { 2, 2, 0 };
    double want[3], s[3];
    tk_lab_ref_points(&hp, 3, prow, pcol, want, s);
    for (int t = 0; t < 3; t++) {
        double w = 0.0;
        for (int64_t k = 0; k < 4; k++)
            w += (double)(prow[t] + 1 + k) * (double)(2 * pcol[t] - k);
        CHECK(want[t] == w, "C(%lld, %lld) = %g, want %g", (long long)prow[t], (long long)pcol[t], want[t], w);
    }
    munmap(a, bytes);
    munmap(b, bytes);
}

/* Sampled comparison of an fp32 C whose row 2 starts past 2^32 elements:
 * a wrong value there must be found at its place. */
static void test_compare_past_2_32(void)
{
    const size_t bytes = (size_t)(3 * FAR) * 4;
    float *got = sparse_alloc(bytes);
    if (!got)
        return;
    const int64_t prow[2] = { 0, 2 }, pcol[2] = { 1, 3 };
    const double want[2] = { 1.5, -2.25 }, s[2] = { 4.0, 4.0 };
    got[0 * FAR + 1] = 1.5f;
    got[2 * FAR + 3] = -2.25f;
    tk_lab_cmp_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.layout = TK_ROW_MAJOR;
    sp.m = 3;
    sp.n = 4;
    sp.k = 4;
    sp.alpha = 1.0f;
    sp.out = TK_F32;
    sp.got = (tk_lab_mat){ got, TK_F32, FAR };
    sp.npts = 2;
    sp.prow = prow;
    sp.pcol = pcol;
    sp.pwant = want;
    sp.ps = s;
    sp.exact_ref = 1;
    tk_lab_report r;
    CHECK(tk_lab_compare(&sp, &r) == 0 && r.checked == 2, "right values failed (%lld over)", (long long)r.over);
    got[2 * FAR + 3] = 2.25f;
    CHECK(tk_lab_compare(&sp, &r) == 1 && r.over == 1 && r.bad[0].row == 2 && r.bad[0].col == 3,
          "a wrong C(2, 3): %lld over, first at (%lld, %lld)", (long long)r.over, (long long)r.bad[0].row,
          (long long)r.bad[0].col);
    munmap(got, bytes);
}

/* auto-dispatch's copy of a 4.7 GB A with an odd leading dimension: packed
 * tight (36000 is a multiple of 8), 4.72 GB of workspace, past 2^32 bytes. */
static void test_route_over_4gib(void)
{
    tk_args a;
    memset(&a, 0, sizeof a);
    a.m = 65536; a.n = 64; a.k = 36000;
    a.op_a = TK_OP_N; a.op_b = TK_OP_N;
    a.a = (const void *)(uintptr_t)0x10000;
    a.b = (const void *)(uintptr_t)0x20000;
    a.c = (void *)(uintptr_t)0x30000;
    a.lda = 36001; a.ldb = 64; a.ldc = 64;
    a.c_type = TK_F32;
    tk_route r;
    tk_route_plan(&a, 1, 0, &r);
    CHECK(r.copy[0] && !r.copy[1] && r.ld[0] == 36000, "copies %d %d, ld %lld", r.copy[0], r.copy[1],
          (long long)r.ld[0]);
    CHECK(r.bytes == (size_t)65536 * 36000 * 2, "workspace %zu bytes, want %zu", r.bytes, (size_t)65536 * 36000 * 2);
}

/* An sm_90 device like the H100's. */
static tk_device h100(void)
{
    tk_device d;
    memset(&d, 0, sizeof d);
    d.sm = 90;
    d.sm_count = 132;
    d.max_threads_per_block = 1024;
    d.max_threads_per_sm = 2048;
    d.regs_per_block = d.regs_per_sm = 65536;
    d.smem_per_block_optin = 227 * 1024;
    d.smem_per_sm = 228 * 1024;
    return d;
}

/* A row-major problem over 256-byte aligned fake pointers, tight leading
 * dimensions. */
static tk_args problem(int64_t m, int64_t n, int64_t k, tk_op ob)
{
    tk_args a;
    memset(&a, 0, sizeof a);
    a.m = m; a.n = n; a.k = k;
    a.op_a = TK_OP_N; a.op_b = ob;
    a.a = (const void *)(uintptr_t)0x10000;
    a.b = (const void *)(uintptr_t)0x20000;
    a.c = (void *)(uintptr_t)0x30000;
    a.lda = k;
    a.ldb = ob == TK_OP_N ? n : k;
    a.ldc = n;
    a.c_type = TK_F32;
    a.alpha = 1.0f;
    return a;
}

/* M = 2^24 needs more than 65535 block rows of 256 and less: every kernel
 * with its block rows on gridDim.y (k02 .. k12) refuses it, naming the
 * limit; the others take it where they take M = 4096. */
static void test_grid_y_refusals(void)
{
    const tk_device d = h100();
    char why[TK_MSG_LEN];
    int refused = 0;
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        for (int ob = 0; ob < 2; ob++) {
            tk_args small = problem(4096, 256, 64, (tk_op)ob), tall = problem(INT64_C(1) << 24, 256, 64, (tk_op)ob);
            if (tk_kernel_supports_args(k, &small, &d, why, sizeof why) != TK_SUCCESS)
                continue;
            if (tk_kernel_supports_args(k, &tall, &d, why, sizeof why) == TK_SUCCESS)
                continue;
            refused++;
            CHECK(strstr(why, "65535") != NULL, "%s refuses M = 2^24 for another reason: %s", k->name, why);
        }
    }
    CHECK(refused == 11, "%d kernels refused M = 2^24, want the 11 with a 2-D grid (k02 .. k12)", refused);
}

/* The Hopper kernels' tile corners and TMA coordinates are 32-bit: M and N
 * within a tile of 2^31 are refused, a little further down taken (k36's
 * tiles are bm = 16..72 rows of M: refused from 2^31 - bm on; k39's
 * pairs of 64-row tiles, like k31's pairs of 128, 2 bm rows); a TMA row
 * stride of 2^40 bytes is refused. The mma.sync kernels have their own
 * 2^31 - 257 limit; k01_naive takes everything. */
static void test_32bit_refusals(void)
{
    const tk_device d = h100();
    char why[TK_MSG_LEN];
    const int64_t near = INT32_MAX - 100, below = INT32_MAX - 300;
    int hopper = 0;
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (!(k->family->accepts & TK_ACCEPT_DENSE))
            continue;   /* k43: many products only (tests/host/test_grouped.c, tests/gpu/test_grouped.c) */
        const int narrow = k->min_sm == 90 && k->bm < 128 && strcmp(k->name, "k39_cluster_64x128");
        const int64_t m_near = narrow ? INT32_MAX - k->bm + 1 : near, m_below = narrow ? INT32_MAX - k->bm : below;
        const tk_args tall = problem(m_near, 8, 64, TK_OP_T), wide = problem(1, near, 64, TK_OP_T);
        const tk_args tall_ok = problem(m_below, 8, 64, TK_OP_T), wide_ok = problem(1, below, 64, TK_OP_T);
        tk_args far = problem(1, 256, 64, TK_OP_T), far_ok = far;
        far.lda = INT64_C(1) << 39;   /* 2^40 bytes */
        far_ok.lda = (INT64_C(1) << 39) - 8;
        if (k->min_sm == 90) {
            hopper++;
            CHECK(tk_kernel_supports_args(k, &tall, &d, why, sizeof why) == TK_ERR_NOT_SUPPORTED && strstr(why, "32-bit"),
                  "%s, M = %lld: %s", k->name, (long long)m_near, why);
            CHECK(tk_kernel_supports_args(k, &wide, &d, why, sizeof why) == TK_ERR_NOT_SUPPORTED && strstr(why, "32-bit"),
                  "%s, N = 2^31 - 101: %s", k->name, why);
            CHECK(tk_kernel_supports_args(k, &tall_ok, &d, why, sizeof why) == TK_SUCCESS, "%s, M = %lld: %s", k->name, (long long)m_below, why);
            CHECK(tk_kernel_supports_args(k, &wide_ok, &d, why, sizeof why) == TK_SUCCESS, "%s, N = 2^31 - 301: %s", k->name, why);
            CHECK(tk_kernel_supports_args(k, &far, &d, why, sizeof why) == TK_ERR_NOT_SUPPORTED && strstr(why, "2^40"),
                  "%s, lda of 2^40 bytes: %s", k->name, why);
            CHECK(tk_kernel_supports_args(k, &far_ok, &d, why, sizeof why) == TK_SUCCESS, "%s, lda of 2^40 - 16 bytes: %s",
                  k->name, why);
        } else if (!strcmp(k->name, "k20_mma_sync") || !strcmp(k->name, "k21_mma_fastload")) {
            CHECK(tk_kernel_supports_args(k, &tall, &d, why, sizeof why) == TK_ERR_NOT_SUPPORTED, "%s, M = 2^31 - 101", k->name);
            CHECK(tk_kernel_supports_args(k, &wide, &d, why, sizeof why) == TK_ERR_NOT_SUPPORTED, "%s, N = 2^31 - 101", k->name);
        } else if (!strcmp(k->name, "k01_naive")) {
            CHECK(tk_kernel_supports_args(k, &tall, &d, why, sizeof why) == TK_SUCCESS && tk_kernel_supports_args(k, &far, &d, why, sizeof why) ==
                  TK_SUCCESS, "k01_naive refused: %s", why);
        }
    }
    CHECK(hopper == 17,
          "%d Hopper kernels in the registry, want 17 (k30, k31, k33, k34, k35, five k36, k37, k38, k39, three k42, "
          "k45)",
          hopper);
}

void tk_tests(void)
{
    TK_TEST(test_index_arithmetic);
    TK_TEST(test_pad_past_2_32);
    TK_TEST(test_reference_past_2_32);
    TK_TEST(test_compare_past_2_32);
    TK_TEST(test_route_over_4gib);
    TK_TEST(test_grid_y_refusals);
    TK_TEST(test_32bit_refusals);
}
