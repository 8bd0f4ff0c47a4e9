/* test_lab_group.c - batched and grouped cases without a GPU (lab_group.c):
 * the --groups spec and its messages; the distributions (deterministic,
 * summing to TOTAL, empty groups where promised); where each group's A, B
 * and C lie, checked by computing every group's product through them
 * against loops written from tilekit.h's words; the flops and bytes
 * counted; what no group owns; and the bench's ratios between the rows of
 * one case. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lab/lab.h"
#include "check.h"

static tk_lab_group_spec spec;   /* 8 KB: not on the stack of every test */

static void test_spec_parse(void)
{
    char why[512];
    CHECK(!tk_lab_group_spec_parse("0,7,128,1,300", &spec, why, sizeof why), "list: %s", why);
    CHECK(spec.dist == TK_LAB_DIST_LIST && spec.count == 5 && spec.total == 436 && spec.list[2] == 128,
          "list: dist %d count %d total %lld", spec.dist, spec.count, (long long)spec.total);
    CHECK(!tk_lab_group_spec_parse("9", &spec, why, sizeof why) && spec.count == 1 && spec.total == 9, "one size");
    CHECK(!tk_lab_group_spec_parse("256:16384:skewed", &spec, why, sizeof why), "skewed: %s", why);
    CHECK(spec.dist == TK_LAB_DIST_SKEWED && spec.count == 256 && spec.total == 16384, "skewed fields");
    CHECK(!tk_lab_group_spec_parse("8:4096:balanced", &spec, why, sizeof why) && spec.dist == TK_LAB_DIST_BALANCED,
          "balanced");
    CHECK(!tk_lab_group_spec_parse("4:3:empty", &spec, why, sizeof why) && spec.dist == TK_LAB_DIST_EMPTY, "empty");
    CHECK(!tk_lab_group_spec_parse("1024:16777216:balanced", &spec, why, sizeof why), "the limits: %s", why);
    static const struct { const char *text, *says; } bad[] = {
        { "", "'': size 1 is empty" },
        { "0,,7", "'0,,7': size 2 is empty" },
        { "3,", "'3,': size 2 is empty" },
        { ",3", "size 1 is empty" },
        { "3,x", "'3,x': size 2 'x' is not an integer" },
        { "3,-1", "size 2 '-1' is not an integer" },
        { "3, 4", "size 2 ' 4' is not an integer" },
        { "16777217", "size 1 16777217 is out of range (expected 0..16777216)" },
        { "99999999999999999999999", "size 1 99999999999999999999999 is out of range" },
        { "16777216,1", "the sizes sum to 16777217 (expected 1..16777216)" },
        { "0,0,0", "the sizes sum to 0" },
        { "8:4096", "'8:4096' is not G:TOTAL:balanced|skewed|empty" },
        { "8:4096:skewed:1", "is not G:TOTAL:balanced|skewed|empty" },
        { "x:4096:balanced", "G 'x' is not an integer (expected 1..1024)" },
        { "0:4096:balanced", "G 0 is out of range (expected 1..1024)" },
        { "1025:4096:balanced", "G 1025 is out of range" },
        { ":4096:balanced", "G is empty" },
        { "8:0:balanced", "TOTAL 0 is out of range (expected 1..16777216)" },
        { "8:16777217:balanced", "TOTAL 16777217 is out of range" },
        { "8:4096:zipf", "'zipf' is not balanced, skewed or empty" },
        { "8:4096:", "'' is not balanced, skewed or empty" },
        { "1:100:skewed", "skewed needs G >= 2" },
        { "3:100:empty", "empty needs G >= 4" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        int rc = tk_lab_group_spec_parse(bad[i].text, &spec, why, sizeof why);
        CHECK(rc == -1 && strstr(why, bad[i].says), "'%s': rc %d, '%s' (expected '%s')", bad[i].text, rc, why,
              bad[i].says);
    }
    /* more than TK_LAB_GROUPS_MAX sizes */
    char *many = malloc(2 * (TK_LAB_GROUPS_MAX + 1));
    many[0] = '1';
    for (int i = 1; i <= TK_LAB_GROUPS_MAX; i++)
        memcpy(many + 2 * i - 1, ",1", 2);
    many[2 * TK_LAB_GROUPS_MAX + 1] = '\0';
    CHECK(tk_lab_group_spec_parse(many, &spec, why, sizeof why) == -1 && strstr(why, "more than 1024 sizes"),
          "1025 sizes: %s", why);
    free(many);
}

static void test_spec_str(void)
{
    static const char *const texts[] = { "0,7,128,1,300", "8:4096:skewed", "16:100:empty", "3:5:balanced" };
    char why[512], back[64];
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        CHECK(!tk_lab_group_spec_parse(texts[i], &spec, why, sizeof why), "%s: %s", texts[i], why);
        tk_lab_group_spec_str(&spec, back, sizeof back);
        CHECK(!strcmp(back, texts[i]), "'%s' back as '%s'", texts[i], back);
    }
    /* a long list is cut, with "..", within the buffer */
    CHECK(!tk_lab_group_spec_parse("1000,2000,3000,4000,5000,6000,7000", &spec, why, sizeof why), "%s", why);
    char small[16];
    tk_lab_group_spec_str(&spec, small, sizeof small);
    CHECK(!strcmp(small, "1000,2000.."), "cut to '%s'", small);
}

static int64_t sum_of(const int64_t *x, int n)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++)
        s += x[i];
    return s;
}

static int zeros_of(const int64_t *x, int n)
{
    int z = 0;
    for (int i = 0; i < n; i++)
        z += x[i] == 0;
    return z;
}

static void test_distributions(void)
{
    static int64_t a[TK_LAB_GROUPS_MAX], b[TK_LAB_GROUPS_MAX];
    char why[512];
    static const char *const texts[] = { "1:1:balanced", "8:4096:balanced", "7:100:balanced", "1024:16:balanced",
                                         "8:16:skewed", "8:4096:skewed", "2:5:skewed", "256:16:skewed",
                                         "256:16384:skewed", "1024:16777216:skewed", "4:1:empty", "8:4096:empty",
                                         "10:999:empty", "1024:100000:empty", "128:128:skewed" };
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        CHECK(!tk_lab_group_spec_parse(texts[t], &spec, why, sizeof why), "%s: %s", texts[t], why);
        const int g = spec.count;
        tk_lab_group_sizes(&spec, 1, a);
        tk_lab_group_sizes(&spec, 1, b);
        CHECK(!memcmp(a, b, (size_t)g * sizeof *a), "%s: two draws of seed 1 differ", texts[t]);
        CHECK(sum_of(a, g) == spec.total, "%s: sizes sum to %lld", texts[t], (long long)sum_of(a, g));
        int64_t lo = a[0], hi = a[0];
        for (int i = 0; i < g; i++) {
            CHECK(a[i] >= 0, "%s: size %d is %lld", texts[t], i, (long long)a[i]);
            lo = a[i] < lo ? a[i] : lo;
            hi = a[i] > hi ? a[i] : hi;
        }
        if (spec.dist == TK_LAB_DIST_BALANCED)
            CHECK(hi - lo <= 1, "%s: balanced sizes from %lld to %lld", texts[t], (long long)lo, (long long)hi);
        if (spec.dist == TK_LAB_DIST_EMPTY) {
            int64_t nlo = INT64_MAX, nhi = 0;
            for (int i = 0; i < g; i++) {
                if (i % 4 == 3) {
                    CHECK(a[i] == 0, "%s: group %d (every 4th) has %lld", texts[t], i, (long long)a[i]);
                    continue;
                }
                nlo = a[i] < nlo ? a[i] : nlo;
                nhi = a[i] > nhi ? a[i] : nhi;
            }
            CHECK(nhi - nlo <= 1, "%s: the others from %lld to %lld", texts[t], (long long)nlo, (long long)nhi);
        }
        if (spec.dist == TK_LAB_DIST_SKEWED) {
            const int none = g / 4 > 1 ? g / 4 : 1;
            CHECK(zeros_of(a, g) >= none, "%s: %d empty groups (expected at least %d)", texts[t], zeros_of(a, g), none);
            /* a few take most: the largest quarter of the non-empty groups (at least one) over half */
            int64_t *sorted = malloc((size_t)g * sizeof *sorted);
            memcpy(sorted, a, (size_t)g * sizeof *sorted);
            for (int i = 1; i < g; i++)   /* insertion sort, descending */
                for (int j = i; j > 0 && sorted[j] > sorted[j - 1]; j--) {
                    int64_t x = sorted[j];
                    sorted[j] = sorted[j - 1];
                    sorted[j - 1] = x;
                }
            const int few = (g - none) / 4 > 1 ? (g - none) / 4 : 1;
            CHECK(2 * sum_of(sorted, few) > spec.total, "%s: the largest %d groups hold %lld of %lld", texts[t], few,
                  (long long)sum_of(sorted, few), (long long)spec.total);
            free(sorted);
            /* another seed: another order of the same sizes */
            tk_lab_group_sizes(&spec, 2, b);
            if (g >= 8 && spec.total >= 1000)
                CHECK(memcmp(a, b, (size_t)g * sizeof *a), "%s: seeds 1 and 2 give one order", texts[t]);
            CHECK(sum_of(b, g) == spec.total && zeros_of(b, g) == zeros_of(a, g), "%s: seed 2's sizes differ in sum "
                  "or empties", texts[t]);
        }
    }
    /* fixed figures: a change of the rule shows here (and moves the moe suite's shapes) */
    CHECK(!tk_lab_group_spec_parse("10:999:empty", &spec, why, sizeof why), "%s", why);
    tk_lab_group_sizes(&spec, 1, a);
    /* 8 groups share 999: the first 7 of them get 125, the last 124 */
    static const int64_t want_empty[10] = { 125, 125, 125, 0, 125, 125, 125, 0, 125, 124 };
    CHECK(!memcmp(a, want_empty, sizeof want_empty), "10:999:empty: %lld %lld %lld %lld .. %lld", (long long)a[0],
          (long long)a[1], (long long)a[2], (long long)a[3], (long long)a[9]);
    CHECK(!tk_lab_group_spec_parse("8:4096:skewed", &spec, why, sizeof why), "%s", why);
    tk_lab_group_sizes(&spec, 1, a);
    int64_t most = 0;
    for (int i = 0; i < 8; i++)
        most = a[i] > most ? a[i] : most;
    /* 6 non-empty shares 1/r^1.5: the first 1 / (1 + 0.354 + 0.192 + 0.125 + 0.089 + 0.068) = 54.6% */
    CHECK(most >= 2230 && most <= 2245 && zeros_of(a, 8) == 2, "8:4096:skewed: largest %lld, %d empty",
          (long long)most, zeros_of(a, 8));
    /* a list is itself */
    CHECK(!tk_lab_group_spec_parse("0,7,128,1,300", &spec, why, sizeof why), "%s", why);
    tk_lab_group_sizes(&spec, 99, a);
    CHECK(a[0] == 0 && a[1] == 7 && a[2] == 128 && a[3] == 1 && a[4] == 300, "the list's sizes");
}

static void test_kind_names(void)
{
    CHECK(tk_lab_group_kind_parse("rows") == TK_GROUP_ROWS && tk_lab_group_kind_parse("k") == TK_GROUP_K &&
              tk_lab_group_kind_parse("masked") == TK_GROUP_MASKED && !tk_lab_group_kind_parse("batch") &&
              !tk_lab_group_kind_parse("Rows"),
          "--group-kind words");
    CHECK(!strcmp(tk_lab_group_kind_name(TK_GROUP_BATCHED), "batch") &&
              !strcmp(tk_lab_group_kind_name(TK_GROUP_K), "k") && !strcmp(tk_lab_group_kind_name(0), "dense"),
          "kind names");
}

/* ---- where the groups lie ---- */

static double at_bf16(const uint16_t *x, int64_t i) { return tk_lab_bf16_to_f32(x[i]); }

/* op(X)(r, c) of a matrix stored row-major from x with ld (tilekit.h's
 * convention, written out here independently of lab_group.c). */
static double op_at(const uint16_t *x, tk_op op, int64_t ld, int64_t r, int64_t c)
{
    return op == TK_OP_N ? at_bf16(x, r * ld + c) : at_bf16(x, c * ld + r);
}

/* C of the whole case from tilekit.h's words, alpha 1, beta 0, row-major:
 * want[z][i][j] (z: product or group with its own C; 0 for ROWS), NaN
 * where no group owns the element. */
static void naive_case(const tk_lab_gcase *g, const tk_gemm_desc *d, const uint16_t *a, const uint16_t *b,
                       double *want, size_t nc)
{
    const tk_gemm_problem *p = &d->problem;
    for (size_t e = 0; e < nc; e++)
        want[e] = NAN;
    int64_t lo = 0;
    for (int z = 0; z < g->count; z++) {
        const int64_t size = g->sizes ? g->sizes[z] : 0, hi = lo + size;
        /* the product's A, B, C and ranges of rows and K */
        const uint16_t *az = a, *bz = b;
        double *cz = want;
        int64_t r0 = 0, r1 = p->m, k0 = 0, k1 = p->k;
        if (g->kind == TK_GROUP_ROWS) {
            bz += z * (p->op_b == TK_OP_N ? p->k : p->n) * p->ldb;
            r0 = lo;
            r1 = hi;
        } else if (g->kind == TK_GROUP_K) {
            cz += z * p->m * p->ldc;
            k0 = lo;
            k1 = hi;
        } else {   /* BATCHED, MASKED: everything per product, but a broadcast operand */
            az += g->broadcast_a ? 0 : z * (p->op_a == TK_OP_N ? p->m : p->k) * p->lda;
            bz += g->broadcast_b ? 0 : z * (p->op_b == TK_OP_N ? p->k : p->n) * p->ldb;
            cz += z * p->m * p->ldc;
            r1 = g->kind == TK_GROUP_MASKED ? size : p->m;
        }
        for (int64_t i = r0; i < r1; i++)
            for (int64_t j = 0; j < p->n; j++) {
                double acc = 0;
                for (int64_t kk = k0; kk < k1; kk++)
                    acc += op_at(az, p->op_a, p->lda, i, kk) * op_at(bz, p->op_b, p->ldb, kk, j);
                cz[i * p->ldc + j] = acc;
            }
        lo = hi;
    }
}

static void check_case(const tk_lab_gcase *g, const char *what)
{
    tk_gemm_desc d;
    size_t na, nb, nc;
    tk_lab_gcase_desc(g, NULL, NULL, NULL, &d, &na, &nb, &nc);
    uint16_t *a = malloc(na * 2), *b = malloc(nb * 2);
    double *want = malloc(nc * sizeof *want), *got = malloc(nc * sizeof *got), *part = malloc(nc * sizeof *part);
    tk_lab_fill(a, TK_BF16, na, 5);
    tk_lab_fill(b, TK_BF16, nb, 6);
    naive_case(g, &d, a, b, want, nc);
    for (size_t e = 0; e < nc; e++)
        got[e] = NAN;
    /* every group's product through its part, the fp64 reference's way */
    int64_t owned = 0;
    for (int i = 0; i < g->count; i++) {
        tk_lab_gpart pt;
        tk_gemm_problem sub;
        tk_lab_gcase_part(g, &d, i, &pt);
        tk_lab_gpart_problem(&d, &pt, a, b, NULL, &sub);
        sub.alpha = 1.0f;
        sub.beta = 0.0f;
        tk_lab_ref_full(&sub, part, NULL);
        for (int64_t r = 0; r < pt.m; r++)
            for (int64_t c = 0; c < pt.n; c++, owned++)
                got[pt.c_off + r * d.problem.ldc + c] = part[r * pt.n + c];
    }
    int64_t wrong = 0, first = -1, owned_wrong = 0;
    for (size_t e = 0; e < nc; e++) {
        const int same = (isnan(want[e]) && isnan(got[e])) || want[e] == got[e];
        if (!same && wrong++ == 0)
            first = (int64_t)e;
        owned_wrong += tk_lab_gcase_owned(g, &d, (int64_t)e) == isnan(want[e]);
    }
    CHECK(wrong == 0, "%s: %lld elements of C differ from tilekit.h's words, the first at %lld (want %g got %g)",
          what, (long long)wrong, (long long)first, first >= 0 ? want[first] : 0.0, first >= 0 ? got[first] : 0.0);
    CHECK(owned_wrong == 0, "%s: tk_lab_gcase_owned is wrong about %lld elements", what, (long long)owned_wrong);
    free(a); free(b); free(want); free(got); free(part);
}

static void test_parts_follow_tilekit_h(void)
{
    static const int64_t rows[] = { 0, 7, 13, 1, 0, 30 };      /* an empty first group, odd sizes */
    static const int64_t ks[] = { 5, 0, 17, 1 };                /* an empty K group */
    static const int64_t masked[] = { 3, 0, 9, 9 };
    for (int pad = 0; pad < 2; pad++)
        for (int op = 0; op < 4; op++) {
            char what[96];
            tk_lab_gcase g = { 0 };
            g.c = (tk_lab_case){ TK_ROW_MAJOR, (tk_op)(op & 1), (tk_op)(op >> 1), 0, 11, 9, 1.0f, 0.0f, TK_F32, 1,
                                 pad, 0 };
            /* ROWS, with 3 rows past the groups */
            g.kind = TK_GROUP_ROWS;
            g.count = 6;
            g.sizes = rows;
            g.c.m = 51 + 3;
            snprintf(what, sizeof what, "rows op %d pad %d", op, pad);
            check_case(&g, what);
            /* K, with 2 K past the groups */
            g.kind = TK_GROUP_K;
            g.count = 4;
            g.sizes = ks;
            g.c.m = 10;
            g.c.k = 23 + 2;
            snprintf(what, sizeof what, "k op %d pad %d", op, pad);
            check_case(&g, what);
            /* MASKED */
            g.kind = TK_GROUP_MASKED;
            g.sizes = masked;
            g.c.m = 9;
            g.c.k = 12;
            snprintf(what, sizeof what, "masked op %d pad %d", op, pad);
            check_case(&g, what);
            /* BATCHED, every broadcast */
            g.kind = TK_GROUP_BATCHED;
            g.sizes = NULL;
            g.count = 3;
            g.c.m = 6;
            for (int bc = 0; bc < 4; bc++) {
                g.broadcast_a = bc & 1;
                g.broadcast_b = bc >> 1;
                snprintf(what, sizeof what, "batch op %d pad %d broadcast %d", op, pad, bc);
                check_case(&g, what);
            }
        }
}

/* A rows-grouped case of the given sizes, row-major, alpha 1, beta 0. */
static tk_lab_gcase rows_case(const int64_t *sizes, int count, int64_t m, int64_t n, int64_t k, tk_op op_b,
                              tk_dtype out, int pad)
{
    tk_lab_gcase g = { 0 };
    g.c = (tk_lab_case){ TK_ROW_MAJOR, TK_OP_N, op_b, m, n, k, 1.0f, 0.0f, out, 1, pad, 0 };
    g.kind = TK_GROUP_ROWS;
    g.count = count;
    g.sizes = sizes;
    return g;
}

static void test_desc_strides(void)
{
    static const int64_t sizes[] = { 4, 0, 4 };
    tk_lab_gcase g = rows_case(sizes, 3, 8, 16, 32, TK_OP_T, TK_BF16, 0);
    tk_gemm_desc d;
    size_t na, nb, nc;
    tk_lab_gcase_desc(&g, NULL, NULL, NULL, &d, &na, &nb, &nc);
    CHECK(d.size == sizeof d && d.group_kind == TK_GROUP_ROWS && d.count == 3, "rows: desc header");
    CHECK(d.stride_a == 0 && d.stride_b == 16 * 32 && d.stride_c == 0, "rows strides %lld %lld %lld",
          (long long)d.stride_a, (long long)d.stride_b, (long long)d.stride_c);
    CHECK(na == 8 * 32 && nb == 3 * 16 * 32 && nc == 8 * 16, "rows buffers %zu %zu %zu", na, nb, nc);
    int32_t offs[3];
    tk_lab_gcase_offs(&g, offs);
    CHECK(offs[0] == 4 && offs[1] == 4 && offs[2] == 8, "rows offs %d %d %d", offs[0], offs[1], offs[2]);
    g.kind = TK_GROUP_MASKED;
    tk_lab_gcase_offs(&g, offs);
    CHECK(offs[0] == 4 && offs[1] == 0 && offs[2] == 4, "masked offs %d %d %d", offs[0], offs[1], offs[2]);
    tk_lab_gcase_desc(&g, NULL, NULL, NULL, &d, &na, &nb, &nc);
    CHECK(d.stride_a == 8 * 32 && d.stride_b == 16 * 32 && d.stride_c == 8 * 16 && nc == 3 * 8 * 16,
          "masked strides");
    g.kind = TK_GROUP_K;
    g.c.k = 8;
    tk_lab_gcase_desc(&g, NULL, NULL, NULL, &d, &na, &nb, &nc);
    CHECK(d.stride_a == 0 && d.stride_b == 0 && d.stride_c == 8 * 16 && na == 8 * 8 && nb == 16 * 8 &&
              nc == 3 * 8 * 16,
          "k strides %lld %lld %lld", (long long)d.stride_a, (long long)d.stride_b, (long long)d.stride_c);
    g.kind = TK_GROUP_BATCHED;
    g.sizes = NULL;
    g.broadcast_b = 1;
    g.c.layout = TK_COL_MAJOR;
    tk_lab_gcase_desc(&g, NULL, NULL, NULL, &d, &na, &nb, &nc);
    CHECK(d.stride_a == 8 * 8 && d.stride_b == 0 && d.stride_c == 8 * 16 && nb == 16 * 8, "batch bcast-b strides");
    char name[256];
    tk_lab_gcase_name(&g, name, sizeof name);
    CHECK(!strcmp(name, "batch 3 bcast-b 8x16x8 col NT bf16 a=1 b=0"), "name '%s'", name);
}

static void test_flop_and_bytes(void)
{
    static const int64_t sizes[] = { 0, 7, 128, 1, 300 };
    tk_lab_gcase g = rows_case(sizes, 5, 436, 256, 128, TK_OP_T, TK_F32, 0);
    CHECK(tk_lab_gcase_flop(&g) == 2.0 * 436 * 256 * 128, "rows flop %g", tk_lab_gcase_flop(&g));
    /* A's 436 rows once, B of the 4 groups with rows (not the empty one's) */
    CHECK(tk_lab_gcase_read_bytes(&g) == 2.0 * (436.0 * 128 + 4.0 * 128 * 256), "rows bytes %g",
          tk_lab_gcase_read_bytes(&g));
    g.c.m = 500;   /* rows past the groups: neither flops nor bytes */
    CHECK(tk_lab_gcase_flop(&g) == 2.0 * 436 * 256 * 128, "rows with a tail: flop %g", tk_lab_gcase_flop(&g));
    g.kind = TK_GROUP_K;   /* dW = dY^T X: M x N per group, K = the tokens */
    g.c = (tk_lab_case){ TK_ROW_MAJOR, TK_OP_T, TK_OP_N, 64, 32, 436, 1.0f, 0.0f, TK_F32, 1, 0, 0 };
    CHECK(tk_lab_gcase_flop(&g) == 2.0 * 64 * 32 * 436, "k flop %g", tk_lab_gcase_flop(&g));
    CHECK(tk_lab_gcase_read_bytes(&g) == 2.0 * (64.0 + 32) * 436, "k bytes %g", tk_lab_gcase_read_bytes(&g));
    g.kind = TK_GROUP_MASKED;
    g.c.m = 300;
    CHECK(tk_lab_gcase_flop(&g) == 2.0 * 436 * 32 * 436, "masked flop %g", tk_lab_gcase_flop(&g));
    g.kind = TK_GROUP_BATCHED;
    g.sizes = NULL;
    g.count = 16;
    g.c = (tk_lab_case){ TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 128, 64, 32, 1.0f, 0.0f, TK_F32, 1, 0, 0 };
    CHECK(tk_lab_gcase_flop(&g) == 16 * 2.0 * 128 * 64 * 32, "batch flop %g", tk_lab_gcase_flop(&g));
    g.broadcast_b = 1;   /* one B read once */
    CHECK(tk_lab_gcase_read_bytes(&g) == 2.0 * (16.0 * 128 * 32 + 32 * 64), "batch bcast-b bytes %g",
          tk_lab_gcase_read_bytes(&g));
    CHECK(tk_lab_tflops(128, 64, 32, 1.0) * 16 == tk_lab_gcase_flop(&g) / 1e9, "flop and tk_lab_tflops agree");
}

/* Elements no group owns: a change there is counted and located; a
 * change inside a group's C is not (the comparison's business). */
static void test_untouched(void)
{
    static const int64_t sizes[] = { 2, 0, 3 };
    tk_lab_gcase g = rows_case(sizes, 3, 7, 5, 4, TK_OP_N, TK_F32, 1);
    tk_gemm_desc d;
    size_t nc;
    tk_lab_gcase_desc(&g, NULL, NULL, NULL, &d, NULL, NULL, &nc);
    CHECK(d.problem.ldc == 16 && nc == 7 * 16, "padded ldc %lld, %zu elements", (long long)d.problem.ldc, nc);
    float *img = malloc(nc * 4), *got = malloc(nc * 4);
    memset(img, 0xff, nc * 4);
    memcpy(got, img, nc * 4);
    int64_t first;
    CHECK(tk_lab_gcase_untouched(&g, &d, got, img, nc, &first) == 0 && first == -1, "nothing changed");
    got[4 * 16 + 3] = 1.0f;   /* row 4, inside group 2 */
    CHECK(tk_lab_gcase_untouched(&g, &d, got, img, nc, &first) == 0, "an owned element counted");
    got[5 * 16 + 0] = 2.0f;   /* row 5: past the groups' 5 rows */
    got[1 * 16 + 5] = 3.0f;   /* row 1, col 5: padding */
    CHECK(tk_lab_gcase_untouched(&g, &d, got, img, nc, &first) == 2 && first == 1 * 16 + 5, "two writes, first %lld",
          (long long)first);
    char where[128];
    tk_lab_gcase_where(&g, &d, first, where, sizeof where);
    CHECK(!strcmp(where, "row 1 col 5 (C's padding, past its N columns)"), "where: '%s'", where);
    tk_lab_gcase_where(&g, &d, 5 * 16, where, sizeof where);
    CHECK(!strcmp(where, "row 5 col 0 (past the groups' 5 rows)"), "where: '%s'", where);
    /* MASKED: product 2's rows past its own */
    g.kind = TK_GROUP_MASKED;
    g.c.pad = 0;
    g.c.m = 3;
    tk_lab_gcase_desc(&g, NULL, NULL, NULL, &d, NULL, NULL, &nc);
    memcpy(got, img, nc * 4);
    got[0 * 15 + 1 * 5 + 0] = 1.0f;   /* product 0 (2 rows), row 1: owned */
    got[1 * 15 + 2 * 5 + 1] = 1.0f;   /* product 1 (no rows), row 2 */
    CHECK(tk_lab_gcase_untouched(&g, &d, got, img, nc, &first) == 1 && first == 1 * 15 + 2 * 5 + 1,
          "masked: first %lld", (long long)first);
    tk_lab_gcase_where(&g, &d, first, where, sizeof where);
    CHECK(!strcmp(where, "product 1 row 2 col 1 (past the product's 0 rows)"), "where: '%s'", where);
    free(img);
    free(got);
}

/* ---- bench: the ratios between the rows of one case ---- */

static void row(tk_lab_bench_row *r, const char *kernel, double ms)
{
    memset(r, 0, sizeof *r);
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    snprintf(r->status, sizeof r->status, "%s", ms > 0 ? "ok" : "refused");
    snprintf(r->form, sizeof r->form, "rows 8:4096:skewed");
    r->ms_median = ms;
}

static void test_gbench_ratios(void)
{
    tk_lab_bench_row r[5];
    row(&r[0], TK_LAB_CUBLAS_LOOP, 2.0);
    row(&r[1], TK_LAB_CUBLAS_GROUPED, 1.0);
    row(&r[2], TK_LAB_DENSE_LOOP, 4.0);
    row(&r[3], "auto", 0.5);
    row(&r[4], "k01_naive", 0);   /* not timed */
    tk_lab_gbench_ratios(r, 5);
    CHECK(r[3].ratio_cublas == 4.0 && r[3].ratio_grouped == 2.0 && r[3].ratio_dense == 8.0, "auto: %g %g %g",
          r[3].ratio_cublas, r[3].ratio_grouped, r[3].ratio_dense);
    CHECK(isnan(r[0].ratio_cublas) && r[0].ratio_grouped == 0.5 && r[0].ratio_dense == 2.0,
          "the loop against itself: %g", r[0].ratio_cublas);
    CHECK(r[1].ratio_cublas == 2.0 && isnan(r[1].ratio_grouped), "cuBLAS grouped against the loop: %g",
          r[1].ratio_cublas);
    CHECK(isnan(r[4].ratio_cublas) && isnan(r[4].ratio_grouped) && isnan(r[4].ratio_dense), "an untimed row");
    /* without the loop (--no-cublas): no ratio_cublas */
    tk_lab_gbench_ratios(r + 2, 3);
    CHECK(isnan(r[3].ratio_cublas) && isnan(r[3].ratio_grouped) && r[3].ratio_dense == 8.0, "no cuBLAS rows");
    CHECK(tk_lab_is_yardstick("cublas") && tk_lab_is_yardstick(TK_LAB_CUBLAS_LOOP) &&
              tk_lab_is_yardstick(TK_LAB_DENSE_LOOP) && !tk_lab_is_yardstick("auto"),
          "yardsticks");
}

/* The files of a grouped run: the form, flops, bytes and ratios in the
 * JSON (checked by python3's json module) and the CSV; the suite summary
 * leaves the yardsticks out. */
static void test_gbench_files(void)
{
    tk_lab_bench_row r[3];
    row(&r[0], TK_LAB_CUBLAS_LOOP, 2.0);
    row(&r[1], "auto", 1.0);
    row(&r[2], "k01_naive", 0);
    for (int i = 0; i < 3; i++) {
        r[i].flop = 1e9;
        r[i].read_bytes = 2e6;
        r[i].read_gbs = r[i].ms_median > 0 ? 2e6 / (r[i].ms_median * 1e6) : NAN;
        r[i].tflops = r[i].ms_median > 0 ? 1e9 / (r[i].ms_median * 1e9) : NAN;
        snprintf(r[i].suite, sizeof r[i].suite, "moe");
    }
    tk_lab_gbench_ratios(r, 3);
    tk_lab_bench_info info = { .name = "test", .sm = 90, .sm_count = 132, .dram_read_gbs = 3000 };
    char path[] = "/tmp/tk_gbench_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "w+");
    CHECK(tk_lab_bench_write_json(f, &info, r, 3) == 0, "json write");
    fclose(f);
    char cmd[512], out[512];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, sys\n"
             "d = json.load(open(sys.argv[1])); r = d[\"results\"]\n"
             "print(r[1][\"form\"], r[1][\"ratio_cublas\"], r[1][\"flop\"], r[1][\"read_gbs\"], r[2][\"read_gbs\"],"
             " r[0][\"ratio_cublas\"], [k[\"kernel\"] for k in d[\"summary\"][\"kernels\"]])' %s 2>&1",
             path);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(out, 1, sizeof out - 1, p) : 0;
    out[n] = '\0';
    if (p)
        pclose(p);
    CHECK(!strcmp(out, "rows 8:4096:skewed 2 1000000000 2 None None ['auto', 'k01_naive']\n"), "json: %s", out);
    f = fopen(path, "w");
    CHECK(tk_lab_bench_write_csv(f, &info, r, 3) == 0, "csv write");
    fclose(f);
    f = fopen(path, "r");
    char line[1024] = "";
    CHECK(f && fgets(line, sizeof line, f), "csv read");
    CHECK(strstr(line, ",suite,chosen,form,flop,read_bytes,read_gbs,ratio_cublas_grouped,ratio_dense\n") != NULL,
          "csv header: %s", line);
    if (f)
        fclose(f);
    unlink(path);
}

void tk_tests(void)
{
    TK_TEST(test_spec_parse);
    TK_TEST(test_spec_str);
    TK_TEST(test_distributions);
    TK_TEST(test_kind_names);
    TK_TEST(test_parts_follow_tilekit_h);
    TK_TEST(test_desc_strides);
    TK_TEST(test_flop_and_bytes);
    TK_TEST(test_untouched);
    TK_TEST(test_gbench_ratios);
    TK_TEST(test_gbench_files);
}
