/* test_lab_fuzz.c - the fuzzer's case generator and option check, on the
 * CPU: a case depends on (seed, index) alone; sizes, leading dimensions and
 * offsets stay in bounds; every mode, op, layout, type of C and offset
 * occurs; exact cases keep every fp32 value exact; and the check names the
 * bad option. The GPU run is tests/gpu/test_fuzz.c. */
#include <math.h>
#include <string.h>
#include "lab/lab.h"
#include "check.h"

#define NCASES 2000
#define DENSE_DIGEST 0xa8383dac1e610634ull   /* test_dense_stream_unchanged: seed 1, cases 0..199 */

static const tk_lab_fuzz_params defaults = { TK_LAB_FUZZ_MAX_SIZE, TK_LAB_FUZZ_MAX_VOLUME };

static void test_same_seed_and_index_same_case(void)
{
    tk_lab_fuzz_params small = { 300, 1 << 20 };
    for (int64_t i = 0; i < 200; i++) {
        tk_lab_fuzz_case a, b, c;
        tk_lab_fuzz_case_gen(&defaults, 7, i, &a);
        /* another case drawn in between changes nothing: no hidden state */
        tk_lab_fuzz_case_gen(&defaults, 7, i + 1000, &c);
        tk_lab_fuzz_case_gen(&defaults, 7, i, &b);
        CHECK(!memcmp(&a, &b, sizeof a), "seed 7 case %lld differs between two draws", (long long)i);
        CHECK(a.seed == 7 && a.index == i, "case %lld does not record its seed and index", (long long)i);
        tk_lab_fuzz_case_gen(&small, 7, i, &c);
        CHECK(c.m <= 300 && c.n <= 300 && c.k <= 300, "case %lld ignores max_size", (long long)i);
    }
    int differ = 0;
    for (int64_t i = 0; i < 50; i++) {
        tk_lab_fuzz_case a, b;
        tk_lab_fuzz_case_gen(&defaults, 1, i, &a);
        tk_lab_fuzz_case_gen(&defaults, 2, i, &b);
        differ += a.m != b.m || a.n != b.n || a.k != b.k || a.data_seed != b.data_seed;
    }
    CHECK(differ >= 45, "seeds 1 and 2 give the same cases (%d of 50 differ)", differ);
}

/* The stored line count and length, worked out independently of tk_lab_fuzz_extent. */
static void want_extent(const tk_lab_fuzz_case *c, int x, int64_t *lines, int64_t *len)
{
    int64_t r = x == 0 ? (c->op_a == TK_OP_N ? c->m : c->k) : x == 1 ? (c->op_b == TK_OP_N ? c->k : c->n) : c->m;
    int64_t q = x == 0 ? (c->op_a == TK_OP_N ? c->k : c->m) : x == 1 ? (c->op_b == TK_OP_N ? c->n : c->k) : c->n;
    *lines = c->layout == TK_ROW_MAJOR ? r : q;
    *len = c->layout == TK_ROW_MAJOR ? q : r;
}

static void test_cases_within_bounds(void)
{
    const tk_lab_fuzz_params ps[] = { defaults, { 1, 1 }, { 17, 1000 }, { 6000, 1 << 20 } };
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++)
        for (int64_t i = 0; i < NCASES; i++) {
            tk_lab_fuzz_case c;
            tk_lab_fuzz_case_gen(&ps[pi], 3, i, &c);
            const int64_t mx = ps[pi].max_size;
            CHECK(c.m >= 1 && c.n >= 1 && c.k >= 1 && c.m <= mx && c.n <= mx && c.k <= mx,
                  "params %zu case %lld: %lldx%lldx%lld outside 1..%lld", pi, (long long)i, (long long)c.m,
                  (long long)c.n, (long long)c.k, (long long)mx);
            CHECK(c.m * c.n * c.k <= ps[pi].max_volume, "params %zu case %lld: volume over the cap", pi,
                  (long long)i);
            const int64_t ld[3] = { c.lda, c.ldb, c.ldc };
            const int off[3] = { c.off_a, c.off_b, c.off_c };
            for (int x = 0; x < 3; x++) {
                int64_t lines, len, wl, wn;
                tk_lab_fuzz_extent(&c, (tk_lab_fuzz_operand)x, &lines, &len);
                want_extent(&c, x, &wl, &wn);
                CHECK(lines == wl && len == wn, "case %lld operand %d: extent %lld x %lld, want %lld x %lld",
                      (long long)i, x, (long long)lines, (long long)len, (long long)wl, (long long)wn);
                CHECK(ld[x] >= len && ld[x] <= ((len + 7) / 8 * 8) + 63,
                      "case %lld operand %d: ld %lld for lines of %lld", (long long)i, x, (long long)ld[x],
                      (long long)len);
                CHECK(off[x] >= 0 && off[x] <= TK_LAB_OFFSET_MAX, "case %lld: offset %d", (long long)i, off[x]);
            }
            CHECK(isfinite(c.alpha) && isfinite(c.beta), "case %lld: alpha %g beta %g", (long long)i,
                  (double)c.alpha, (double)c.beta);
        }
}

/* Counts of what 2000 cases of seed 1 cover. */
typedef struct coverage {
    int mode[2], layout[2], op_a[2], op_b[2], out[2], off[TK_LAB_OFFSET_MAX + 1];
    int beta0, alpha_huge, alpha_zero, mult64, off_by_one, prime, small, odd_ld, vec;
    int64_t largest;
} coverage;

static int prime(int64_t v)
{
    for (int64_t d = 2; d * d <= v; d++)
        if (v % d == 0)
            return 0;
    return v >= 2;
}

static void cover_dim(coverage *cv, int64_t d)
{
    cv->mult64 += d % 64 == 0;
    cv->off_by_one += d > 64 && (d % 64 == 1 || d % 64 == 63);
    cv->prime += d > 100 && prime(d);
    cv->small += d <= 16;
}

static void cover(coverage *cv, const tk_lab_fuzz_case *c)
{
    cv->mode[c->exact]++;
    cv->layout[c->layout]++;
    cv->op_a[c->op_a]++;
    cv->op_b[c->op_b]++;
    cv->out[c->out]++;
    cv->off[c->off_a]++;
    cv->off[c->off_b]++;
    cv->off[c->off_c]++;
    cv->beta0 += c->beta == 0.0f;
    cv->alpha_huge += c->alpha == 65536.0f;
    cv->alpha_zero += c->alpha == 0.0f;
    cover_dim(cv, c->m);
    cover_dim(cv, c->n);
    cover_dim(cv, c->k);
    cv->odd_ld += c->lda % 2 == 1 || c->ldb % 2 == 1 || c->ldc % 2 == 1;
    cv->vec += c->lda % 8 == 0 && c->ldb % 8 == 0 && c->ldc % 8 == 0 && !c->off_a && !c->off_b && !c->off_c;
    if (c->m * c->n * c->k > cv->largest)
        cv->largest = c->m * c->n * c->k;
}

static void test_everything_occurs(void)
{
    coverage cv;
    memset(&cv, 0, sizeof cv);
    for (int64_t i = 0; i < NCASES; i++) {
        tk_lab_fuzz_case c;
        tk_lab_fuzz_case_gen(&defaults, 1, i, &c);
        cover(&cv, &c);
    }
    for (int v = 0; v < 2; v++) {
        CHECK(cv.mode[v] > NCASES / 4, "mode %d in %d of %d cases", v, cv.mode[v], NCASES);
        CHECK(cv.layout[v] > NCASES / 4, "layout %d in %d cases", v, cv.layout[v]);
        CHECK(cv.op_a[v] > NCASES / 4 && cv.op_b[v] > NCASES / 4, "op %d: op_a %d, op_b %d cases", v, cv.op_a[v],
              cv.op_b[v]);
        CHECK(cv.out[v] > NCASES / 4, "out %d in %d cases", v, cv.out[v]);
    }
    for (int o = 0; o <= TK_LAB_OFFSET_MAX; o++)
        CHECK(cv.off[o] > (o ? 50 : NCASES), "pointer offset %d drawn %d times", o, cv.off[o]);
    CHECK(cv.beta0 > NCASES / 4, "beta == 0 in %d cases", cv.beta0);
    CHECK(cv.alpha_huge > 20 && cv.alpha_zero > 20, "alpha 65536 in %d cases, 0 in %d", cv.alpha_huge,
          cv.alpha_zero);
    CHECK(cv.mult64 > 200 && cv.off_by_one > 100 && cv.prime > 50 && cv.small > 600,
          "sizes: %d multiples of 64, %d one off them, %d primes > 100, %d small", cv.mult64, cv.off_by_one, cv.prime,
          cv.small);
    CHECK(cv.odd_ld > 200 && cv.vec > NCASES / 3, "%d cases with an odd ld, %d 16-byte aligned throughout",
          cv.odd_ld, cv.vec);
    CHECK(cv.largest > (int64_t)1 << 28, "the largest case has only %lld multiply-adds", (long long)cv.largest);
}

/* An exact case's values must all be exact in fp32: with |acc| <= 9K and
 * |c0| <= 3, |alpha| 9K + |beta| 3 must fit 24 bits above the lowest bit of
 * alpha and beta (recomputed here with frexp, not the generator's code). */
static int lowest_bit(float x)
{
    int e;
    double f = frexp(fabs((double)x), &e);
    while (f != floor(f)) {
        f *= 2;
        e--;
    }
    return e;
}

static void test_exact_cases_stay_exact(void)
{
    int exact = 0, with_beta = 0;
    for (int64_t i = 0; i < NCASES; i++) {
        tk_lab_fuzz_case c;
        tk_lab_fuzz_case_gen(&defaults, 5, i, &c);
        if (!c.exact)
            continue;
        exact++;
        with_beta += c.beta != 0.0f;
        double bound = fabs((double)c.alpha) * 9.0 * (double)c.k + fabs((double)c.beta) * 3.0;
        int q = 1000;
        if (c.alpha != 0.0f)
            q = lowest_bit(c.alpha);
        if (c.beta != 0.0f && lowest_bit(c.beta) < q)
            q = lowest_bit(c.beta);
        CHECK(q == 1000 || bound < ldexp(1.0, 24 + q), "case %lld: alpha %g beta %g K %lld not exact in fp32",
              (long long)i, (double)c.alpha, (double)c.beta, (long long)c.k);
        /* small integers or powers of two, nothing else */
        const float ab[2] = { c.alpha, c.beta };
        for (int j = 0; j < 2; j++) {
            float v = fabsf(ab[j]);
            int e, pow2 = v > 0 && frexpf(v, &e) == 0.5f;
            CHECK(v == floorf(v) || pow2, "case %lld: exact-mode scalar %g", (long long)i, (double)ab[j]);
        }
    }
    CHECK(exact > NCASES / 4 && with_beta > exact / 4, "%d exact cases, %d of them with beta != 0", exact, with_beta);
}

static void test_problem_applies_offsets(void)
{
    tk_lab_fuzz_case c;
    for (int64_t i = 0; i < 200; i++) {
        tk_lab_fuzz_case_gen(&defaults, 11, i, &c);
        static char a[64], b[64], cc[64];
        tk_gemm_problem p;
        tk_lab_fuzz_problem(&c, a, b, cc, &p);
        size_t esz = c.out == TK_F32 ? 4 : 2;
        CHECK((const char *)p.a == a + 2 * c.off_a && (const char *)p.b == b + 2 * c.off_b &&
                  (char *)p.c == cc + esz * (size_t)c.off_c,
              "case %lld: pointers not offset by %d, %d, %d elements", (long long)i, c.off_a, c.off_b, c.off_c);
        CHECK(p.m == c.m && p.n == c.n && p.k == c.k && p.lda == c.lda && p.ldb == c.ldb && p.ldc == c.ldc &&
                  p.layout == c.layout && p.op_a == c.op_a && p.op_b == c.op_b && p.c_type == c.out &&
                  p.alpha == c.alpha && p.beta == c.beta,
              "case %lld: the problem is not the case", (long long)i);
        tk_lab_fuzz_problem(&c, NULL, NULL, NULL, &p);
        CHECK(!p.a && !p.b && !p.c, "NULL buffers must stay NULL");
    }
    char name[192];
    tk_lab_fuzz_case_name(&c, name, sizeof name);
    CHECK(strstr(name, c.exact ? "exact" : "random") && strstr(name, "lda="), "case name '%s'", name);
}

static void test_check_names_the_option(void)
{
    static const char *const bad_kernel[] = { "cublas", NULL }, *const unknown[] = { "auto", "k99_nope", NULL };
    static const char *const empty[] = { NULL }, *const good[] = { "auto", "k01_naive", NULL };
    static const struct { const char *says; int field; double v; const char *const *k; } cases[] = {
        { "--max-size", 0, 0, NULL },  { "--max-size", 0, TK_LAB_FUZZ_MAX_SIZE + 1, NULL },
        { "--max-volume", 1, 0, NULL }, { "--case", 2, -2, NULL },
        { "--cases", 3, 0, NULL },      { "--budget", 4, -1, NULL },
        { "--budget", 4, NAN, NULL },   { "--cases and --budget", 4, 10, NULL },
        { "cublas", 5, 0, bad_kernel }, { "k99_nope", 5, 0, unknown },
        { "--kernel", 5, 0, empty },
    };
    char why[TK_LAB_MSG_LEN];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_lab_fuzz_opts o;
        tk_lab_fuzz_defaults(&o);
        switch (cases[i].field) {
        case 0: o.gen.max_size = (int64_t)cases[i].v; break;
        case 1: o.gen.max_volume = (int64_t)cases[i].v; break;
        case 2: o.only_case = (int64_t)cases[i].v; break;
        case 3: o.cases = (int64_t)cases[i].v; break;
        case 4: o.budget_s = cases[i].v; break;
        default: o.kernels = cases[i].k; break;
        }
        why[0] = '\0';
        CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == -1 && strstr(why, cases[i].says),
              "case %zu: expected a refusal naming '%s', got '%s'", i, cases[i].says, why);
    }
    tk_lab_fuzz_opts o;
    tk_lab_fuzz_defaults(&o);
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == 0, "the defaults are refused: %s", why);
    o.kernels = good;
    o.cases = 0;
    o.budget_s = 2.5;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == 0, "a budget run of auto and k01_naive is refused: %s", why);
    o.only_case = 12;
    o.cases = 5;   /* ignored by a replay */
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == 0, "a replay is refused: %s", why);
}

static void test_replay_command(void)
{
    tk_lab_fuzz_opts o;
    tk_lab_fuzz_defaults(&o);
    o.seed = 42;
    char buf[256];
    tk_lab_fuzz_replay(&o, 17, "k30_wgmma_tma", buf, sizeof buf);
    CHECK(!strcmp(buf, "tilekit fuzz --seed 42 --case 17 --kernel k30_wgmma_tma"), "replay '%s'", buf);
    o.gen.max_size = 512;
    o.gen.max_volume = 1 << 24;
    tk_lab_fuzz_replay(&o, 3, "auto", buf, sizeof buf);
    CHECK(!strcmp(buf, "tilekit fuzz --seed 42 --case 3 --kernel auto --max-size 512 --max-volume 16777216"),
          "replay with sizes '%s'", buf);
}

/* The dense stream is the one it was before batched and grouped cases
 * came (they draw from their own): a digest of seed 1's first 200 cases,
 * taken from the generator of issue 37. A change here breaks every replay
 * command printed before it. */
static void test_dense_stream_unchanged(void)
{
    uint64_t h = 0;
    for (int64_t i = 0; i < 200; i++) {
        tk_lab_fuzz_case c;
        tk_lab_fuzz_case_gen(&defaults, 1, i, &c);
        const uint64_t v[] = { (uint64_t)c.m, (uint64_t)c.n, (uint64_t)c.k, (uint64_t)c.lda, (uint64_t)c.ldb,
                               (uint64_t)c.ldc, (uint64_t)c.layout, (uint64_t)c.op_a, (uint64_t)c.op_b,
                               (uint64_t)c.out, (uint64_t)c.exact, (uint64_t)c.off_a, (uint64_t)c.off_c,
                               c.data_seed };
        for (size_t j = 0; j < sizeof v / sizeof v[0]; j++)
            h = tk_lab_mix64(h ^ v[j]);
    }
    CHECK(h == DENSE_DIGEST, "seed 1's dense cases changed: digest %#llx", (unsigned long long)h);
}

static int64_t sum_sizes(const tk_lab_gcase *g)
{
    int64_t t = 0;
    for (int i = 0; g->sizes && i < g->count; i++)
        t += g->sizes[i];
    return t;
}

/* Batched and grouped cases: deterministic, within their bounds, the
 * grouped kinds row-major with M (K) covering the groups, and over many
 * draws every kind, empty groups, odd sizes, rows past the groups and
 * broadcasts; --forms picks the kinds. */
static void test_many_cases(void)
{
    const tk_lab_fuzz_params small = { 300, 1 << 20 };
    int kinds[5] = { 0 }, empty = 0, odd = 0, tail = 0, bcast = 0, col = 0, bad = 0;
    for (int64_t i = 0; i < NCASES; i++) {
        tk_lab_fuzz_gcase f, h;
        tk_lab_fuzz_gcase_gen(&defaults, TK_LAB_FORM_ALL, 3, i, &f);
        tk_lab_fuzz_gcase_gen(&defaults, TK_LAB_FORM_ALL, 3, i + 5000, &h);
        tk_lab_fuzz_gcase_gen(&defaults, TK_LAB_FORM_ALL, 3, i, &h);
        CHECK(!memcmp(&f, &h, sizeof f), "many case %lld differs between two draws", (long long)i);
        tk_lab_gcase g;
        tk_lab_fuzz_gcase_view(&f, &g);
        kinds[g.kind]++;
        const double work = tk_lab_gcase_flop(&g) / 2;
        const int64_t total = sum_sizes(&g);
        int64_t most = 0;
        for (int j = 0; g.sizes && j < g.count; j++) {
            empty += g.sizes[j] == 0;
            odd += g.sizes[j] % 8 != 0;
            most = g.sizes[j] > most ? g.sizes[j] : most;
            bad += g.sizes[j] < 0 || g.sizes[j] > 1024;
        }
        bad += work > (double)TK_LAB_FUZZ_MANY_VOLUME || g.c.m < 1 || g.c.n < 1 || g.c.k < 1 || g.c.n > 1024;
        bad += g.count < 1 || g.count > (g.kind == TK_GROUP_BATCHED ? 8 : TK_LAB_FUZZ_GROUPS);
        bad += g.kind != TK_GROUP_BATCHED && (g.c.layout != TK_ROW_MAJOR || !g.label[0]);
        bad += (g.kind == TK_GROUP_ROWS && g.c.m < total) || (g.kind == TK_GROUP_K && g.c.k < total) ||
               (g.kind == TK_GROUP_MASKED && g.c.m < most);
        tail += (g.kind == TK_GROUP_ROWS && g.c.m > total) || (g.kind == TK_GROUP_K && g.c.k > total);
        bcast += g.broadcast_a || g.broadcast_b;
        col += g.c.layout == TK_COL_MAJOR;
        CHECK(!bad, "many case %lld out of bounds (%s count %d, %lldx%lldx%lld, work %g)", (long long)i,
              tk_lab_group_kind_name(g.kind), g.count, (long long)g.c.m, (long long)g.c.n, (long long)g.c.k, work);
        bad = 0;
        /* max_size bounds each size and the dimensions the groups leave whole */
        tk_lab_fuzz_gcase_gen(&small, TK_LAB_FORM_ALL, 3, i, &h);
        tk_lab_fuzz_gcase_view(&h, &g);
        int over = g.c.n > 300 || (g.kind != TK_GROUP_ROWS && g.kind != TK_GROUP_MASKED && g.c.m > 300) ||
                   (g.kind != TK_GROUP_K && g.c.k > 300);
        for (int j = 0; g.sizes && j < g.count; j++)
            over += g.sizes[j] > 300;
        CHECK(!over, "many case %lld ignores max_size: %s %lldx%lldx%lld", (long long)i,
              tk_lab_group_kind_name(g.kind), (long long)g.c.m, (long long)g.c.n, (long long)g.c.k);
    }
    for (int k = TK_GROUP_BATCHED; k <= TK_GROUP_MASKED; k++)
        CHECK(kinds[k] > NCASES / 8, "kind %s drawn %d times of %d", tk_lab_group_kind_name(k), kinds[k], NCASES);
    CHECK(empty > NCASES / 4 && odd > NCASES && tail > NCASES / 20 && bcast > NCASES / 20 && col > NCASES / 20,
          "%d empty groups, %d odd sizes, %d tails, %d broadcasts, %d column-major", empty, odd, tail, bcast, col);
    /* the smallest limits still make cases of sizes >= 1 */
    const tk_lab_fuzz_params tiny = { 1, 1 };
    for (int64_t i = 0; i < 200; i++) {
        tk_lab_fuzz_gcase f;
        tk_lab_fuzz_gcase_gen(&tiny, TK_LAB_FORM_ALL, 3, i, &f);
        CHECK(f.g.c.m >= 1 && f.g.c.n == 1 && f.g.c.k >= 1, "max-size 1, max-volume 1: %lldx%lldx%lld",
              (long long)f.g.c.m, (long long)f.g.c.n, (long long)f.g.c.k);
    }
    for (int64_t i = 0; i < 200; i++) {
        tk_lab_fuzz_gcase f;
        tk_lab_fuzz_gcase_gen(&defaults, TK_LAB_FORM_BATCHED, 3, i, &f);
        CHECK(f.g.kind == TK_GROUP_BATCHED, "--forms batched drew %s", tk_lab_group_kind_name(f.g.kind));
        tk_lab_fuzz_gcase_gen(&defaults, TK_LAB_FORM_GROUPED | TK_LAB_FORM_DENSE, 3, i, &f);
        CHECK(f.g.kind != TK_GROUP_BATCHED, "--forms dense,grouped drew a batch");
    }
}

/* FP8 cases (tk_lab_fuzz_fcase_gen): the same case for the same seed and
 * index; every format pairing and mode, exact or not, both layouts drawn;
 * each case a valid one (block scales row-major with K a multiple of 128,
 * exact cases with beta 0 and alpha a power of two, sizes within 1024 and
 * the volume); --dtype, --dtype-b and --scale fix their fields and leave
 * the other draws as they were; the replay names them. */
static void test_fp8_cases(void)
{
    int seen[2][2][4] = { { { 0 } } }, exact = 0, col = 0, bf16 = 0, beta = 0;
    for (int64_t i = 0; i < 1000; i++) {
        tk_lab_fuzz_fcase x, y, r;
        tk_lab_fuzz_fcase_gen(&defaults, -1, -1, 0, 9, i, &x);
        tk_lab_fuzz_fcase_gen(&defaults, -1, -1, 0, 9, i + 7000, &y);
        tk_lab_fuzz_fcase_gen(&defaults, -1, -1, 0, 9, i, &y);
        CHECK(!memcmp(&x, &y, sizeof x), "case %lld drawn twice differs", (long long)i);
        const tk_lab_case *c = &x.c;
        const tk_lab_f8 *f = &x.f;
        seen[f->fa][f->fb][f->scale_mode]++;
        exact += f->exact;
        col += c->layout == TK_COL_MAJOR;
        bf16 += c->out == TK_BF16;
        beta += c->beta != 0;
        CHECK(c->m >= 1 && c->n >= 1 && c->k >= 1 && c->m <= 1024 && c->n <= 1024 && c->k <= 1024 &&
                  c->m * c->n * c->k <= 2 * TK_LAB_FUZZ_MANY_VOLUME,
              "case %lld: %lldx%lldx%lld", (long long)i, (long long)c->m, (long long)c->n, (long long)c->k);
        if (f->scale_mode == TK_SCALE_BLOCK)
            CHECK(c->k % 128 == 0 && c->layout == TK_ROW_MAJOR, "case %lld: block scales with K %lld, layout %d",
                  (long long)i, (long long)c->k, c->layout);
        if (f->exact)
            CHECK(c->beta == 0 && (c->alpha == 1 || c->alpha == 2 || c->alpha == 0.5f || c->alpha == -1),
                  "case %lld: exact with alpha %g beta %g", (long long)i, (double)c->alpha, (double)c->beta);
        tk_lab_fuzz_fcase_gen(&defaults, TK_LAB_E5M2, TK_LAB_E4M3, TK_SCALE_ROW, 9, i, &r);
        CHECK(r.f.fa == TK_LAB_E5M2 && r.f.fb == TK_LAB_E4M3 && r.f.scale_mode == TK_SCALE_ROW &&
                  r.f.exact == f->exact && r.c.m == c->m && r.c.n == c->n && r.c.op_a == c->op_a &&
                  r.c.op_b == c->op_b && r.c.seed == c->seed && r.c.alpha == c->alpha,
              "case %lld: --dtype e5m2 --dtype-b e4m3 --scale row moved other draws", (long long)i);
    }
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int m = TK_SCALE_TENSOR; m <= TK_SCALE_BLOCK; m++)
                CHECK(seen[a][b][m] > 0, "never drawn: %s x %s, scale %s", tk_lab_fp8_format_name((tk_lab_fp8)a),
                      tk_lab_fp8_format_name((tk_lab_fp8)b), tk_lab_scale_mode_name(m));
    CHECK(exact > 300 && exact < 700 && col > 100 && bf16 > 300 && beta > 100, "exact %d, col %d, bf16 %d, beta %d",
          exact, col, bf16, beta);
    /* small sizes: block scales still get K = 128 */
    const tk_lab_fuzz_params tiny = { 1, 1 };
    tk_lab_fuzz_fcase t;
    tk_lab_fuzz_fcase_gen(&tiny, -1, -1, TK_SCALE_BLOCK, 9, 3, &t);
    CHECK(t.c.m == 1 && t.c.n == 1 && t.c.k == 128, "max-size 1, block: %lldx%lldx%lld", (long long)t.c.m,
          (long long)t.c.n, (long long)t.c.k);
    tk_lab_fuzz_opts o;
    tk_lab_fuzz_defaults(&o);
    char buf[256], why[TK_LAB_MSG_LEN];
    o.seed = 42;
    o.forms = TK_LAB_FORM_DENSE | TK_LAB_FORM_FP8;
    o.fp8_a = TK_LAB_E5M2;
    o.fp8_b = TK_LAB_E4M3;
    o.fp8_mode = TK_SCALE_BLOCK;
    tk_lab_fuzz_replay_f8(&o, 5, "auto", buf, sizeof buf);
    CHECK(!strcmp(buf, "tilekit fuzz --seed 42 --case f5 --kernel auto --forms dense,fp8 --dtype e5m2 --dtype-b "
                       "e4m3 --scale block"), "replay '%s'", buf);
    o.fp8_b = TK_LAB_E5M2;
    o.fp8_mode = 0;
    tk_lab_fuzz_replay_f8(&o, 5, "auto", buf, sizeof buf);
    CHECK(!strcmp(buf, "tilekit fuzz --seed 42 --case f5 --kernel auto --forms dense,fp8 --dtype e5m2"),
          "replay '%s'", buf);
    o.only_case = 5;
    o.only_f8 = 1;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == 0, "--case f5: %s", why);
    o.forms = TK_LAB_FORM_DENSE;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == -1 && strstr(why, "--case f5 replays an FP8 case"), "%s", why);
    o.only_f8 = 0;
    o.forms = TK_LAB_FORM_FP8;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == -1 && strstr(why, "an FP8 case --case f5"), "%s", why);
    tk_lab_fuzz_defaults(&o);
    o.fp8_mode = 4;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == -1 && strstr(why, "--scale"), "%s", why);
}

static void test_forms(void)
{
    char why[TK_LAB_MSG_LEN];
    unsigned f = 0;
    CHECK(!tk_lab_fuzz_parse_forms("dense,batched,grouped", &f, why, sizeof why) && f == TK_LAB_FORM_ALL, "all");
    CHECK(!tk_lab_fuzz_parse_forms("grouped", &f, why, sizeof why) && f == TK_LAB_FORM_GROUPED, "grouped");
    CHECK(!tk_lab_fuzz_parse_forms("dense,epilogue", &f, why, sizeof why) &&
              f == (TK_LAB_FORM_DENSE | TK_LAB_FORM_EPILOGUE), "dense,epilogue");
    CHECK(!tk_lab_fuzz_parse_forms("fp8,dense", &f, why, sizeof why) && f == (TK_LAB_FORM_DENSE | TK_LAB_FORM_FP8),
          "fp8,dense");
    static const char *const bad[] = { "", "dense,", ",dense", "dense,,grouped", "Dense", "batch", "dense grouped" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(tk_lab_fuzz_parse_forms(bad[i], &f, why, sizeof why) == -1 && strstr(why, "--forms:") &&
                  strstr(why, "is not dense, batched, grouped, epilogue or fp8"),
              "'%s': %s", bad[i], why);
    tk_lab_fuzz_opts o;
    tk_lab_fuzz_defaults(&o);
    CHECK(o.forms == TK_LAB_FORM_ALL, "default forms %u", o.forms);
    o.only_case = 3;
    o.forms = TK_LAB_FORM_GROUPED;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == -1 && strstr(why, "--case 3 replays a dense case"), "%s", why);
    o.only_many = 1;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == 0, "--case g3 --forms grouped: %s", why);
    o.forms = TK_LAB_FORM_DENSE;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == -1 && strstr(why, "--case g3 replays a batched or grouped"),
          "%s", why);
    o.forms = 0;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == -1 && strstr(why, "--forms"), "no forms: %s", why);
    o.only_many = 0;
    o.only_epi = 1;
    o.forms = TK_LAB_FORM_ALL;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == -1 && strstr(why, "--case e3 replays an epilogue case"), "%s",
          why);
    o.forms = TK_LAB_FORM_EPILOGUE;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == 0, "--case e3 --forms epilogue: %s", why);
    o.epi_kind = 9;
    CHECK(tk_lab_fuzz_check(&o, why, sizeof why) == -1 && strstr(why, "--epilogue"), "kind 9: %s", why);
    char buf[256];
    tk_lab_fuzz_defaults(&o);
    o.seed = 9;
    tk_lab_fuzz_replay_many(&o, 4, "auto", buf, sizeof buf);
    CHECK(!strcmp(buf, "tilekit fuzz --seed 9 --case g4 --kernel auto"), "replay '%s'", buf);
    o.forms = TK_LAB_FORM_DENSE | TK_LAB_FORM_GROUPED;
    tk_lab_fuzz_replay_many(&o, 4, "k01_naive", buf, sizeof buf);
    CHECK(!strcmp(buf, "tilekit fuzz --seed 9 --case g4 --kernel k01_naive --forms dense,grouped"), "replay '%s'",
          buf);
    o.forms = TK_LAB_FORM_ALL | TK_LAB_FORM_EPILOGUE;
    o.epi_kind = TK_EPI_GATED;
    tk_lab_fuzz_replay_epi(&o, 7, "auto", buf, sizeof buf);
    CHECK(!strcmp(buf, "tilekit fuzz --seed 9 --case e7 --kernel auto --forms dense,batched,grouped,epilogue "
                       "--epilogue gated"), "replay '%s'", buf);
}

/* Epilogue cases: deterministic, a stream of their own, every one valid by
 * tilekit.h's rules (an activation where the kind needs one, no bias on the
 * backward kinds, N even for gated, beta 0 for gated_backward, row-major),
 * within the sizes, and over many draws every kind, activation, bias form
 * and option; --epilogue KIND draws that kind alone. */
static void test_epi_cases(void)
{
    int kinds[5] = { 0 }, acts[5] = { 0 }, bias[3] = { 0 }, b16 = 0, apart = 0, aux = 0, grad = 0, split = 0;
    int beta = 0, pad = 0, opa = 0, opb = 0, bf16 = 0, bad = 0;
    for (int64_t i = 0; i < NCASES; i++) {
        tk_lab_fuzz_ecase x, y;
        tk_lab_fuzz_ecase_gen(&defaults, 0, 3, i, &x);
        tk_lab_fuzz_ecase_gen(&defaults, 0, 3, i + 7000, &y);
        tk_lab_fuzz_ecase_gen(&defaults, 0, 3, i, &y);
        CHECK(!memcmp(&x, &y, sizeof x), "epilogue case %lld differs between two draws", (long long)i);
        const tk_lab_epi *e = &x.e;
        const tk_lab_case *c = &x.c;
        const int backward = e->kind == TK_EPI_BACKWARD || e->kind == TK_EPI_GATED_BACKWARD;
        bad += e->kind < TK_EPI_BIAS_ACT || e->kind > TK_EPI_GATED_BACKWARD;
        bad += e->act < TK_ACT_NONE || e->act > TK_ACT_SILU || (e->kind != TK_EPI_BIAS_ACT && e->act == TK_ACT_NONE);
        bad += (backward && (e->bias || !e->aux)) || (!backward && e->bias_grad);
        bad += e->kind == TK_EPI_GATED && c->n % 2;
        bad += e->kind == TK_EPI_GATED_BACKWARD && c->beta != 0.0f;
        bad += e->up_split && e->kind != TK_EPI_GATED;
        bad += c->layout != TK_ROW_MAJOR || c->m < 1 || c->n < 1 || c->k < 1 || c->m > 1024 || c->n > 1024 ||
               c->k > 1024 || c->m * c->n * c->k > TK_LAB_FUZZ_MANY_VOLUME;
        CHECK(!bad, "epilogue case %lld invalid: kind %d act %d bias %d aux %d grad %d up %d %lldx%lldx%lld beta %g",
              (long long)i, e->kind, e->act, e->bias, e->aux, e->bias_grad, e->up_split, (long long)c->m,
              (long long)c->n, (long long)c->k, c->beta);
        bad = 0;
        kinds[e->kind]++;
        acts[e->act]++;
        bias[e->bias]++;
        b16 += e->bias_bf16;
        apart += e->d_apart;
        aux += e->aux && !backward;
        grad += e->bias_grad;
        split += e->up_split;
        beta += c->beta != 0.0f;
        pad += c->pad;
        opa += c->op_a == TK_OP_T;
        opb += c->op_b == TK_OP_T;
        bf16 += c->out == TK_BF16;
    }
    for (int k = TK_EPI_BIAS_ACT; k <= TK_EPI_GATED_BACKWARD; k++)
        CHECK(kinds[k] > NCASES / 8, "kind %s drawn %d times of %d", tk_lab_epi_kind_name(k), kinds[k], NCASES);
    for (int a = TK_ACT_NONE; a <= TK_ACT_SILU; a++)
        /* none: bias_act's alone */
        CHECK(acts[a] > NCASES / 40, "activation %s drawn %d times", tk_lab_act_name(a), acts[a]);
    CHECK(bias[1] > NCASES / 10 && bias[2] > NCASES / 10 && b16 > NCASES / 10, "bias: %d col, %d row, %d bf16",
          bias[1], bias[2], b16);
    CHECK(apart > NCASES / 5 && aux > NCASES / 10 && grad > NCASES / 10 && split > NCASES / 20 && beta > NCASES / 5 &&
              pad > NCASES / 5 && opa > NCASES / 5 && opb > NCASES / 5 && bf16 > NCASES / 5,
          "apart %d aux %d grad %d split %d beta %d pad %d op_a T %d op_b T %d bf16 %d", apart, aux, grad, split, beta,
          pad, opa, opb, bf16);
    for (int64_t i = 0; i < 200; i++) {
        tk_lab_fuzz_ecase x;
        tk_lab_fuzz_ecase_gen(&defaults, TK_EPI_GATED_BACKWARD, 3, i, &x);
        CHECK(x.e.kind == TK_EPI_GATED_BACKWARD && x.c.beta == 0.0f, "--epilogue gated_backward drew %s",
              tk_lab_epi_kind_name(x.e.kind));
        const tk_lab_fuzz_params tiny = { 1, 1 };
        tk_lab_fuzz_ecase_gen(&tiny, TK_EPI_GATED, 3, i, &x);
        CHECK(x.c.m == 1 && x.c.n == 2 && x.c.k == 1, "max-size 1, gated: %lldx%lldx%lld", (long long)x.c.m,
              (long long)x.c.n, (long long)x.c.k);
    }
}

/* Without a GPU the run fails cleanly (no case, TK_ERR_NO_DEVICE); with one,
 * a single small case of auto-dispatch passes. */
static void test_run_without_gpu_fails_cleanly(void)
{
    static const char *const k[] = { "auto", NULL };
    tk_lab_fuzz_opts o;
    tk_lab_fuzz_defaults(&o);
    o.cases = 1;
    o.gen.max_size = 8;
    o.kernels = k;
    o.log = NULL;
    static tk_lab_fuzz_summary s;
    char why[TK_LAB_MSG_LEN] = "";
    tk_status st = tk_lab_fuzz_run(&o, &s, why, sizeof why);
    if (st == TK_SUCCESS) {
        CHECK(s.cases == 1 && s.total.failed == 0, "one small case: %lld cases, %lld failures", (long long)s.cases,
              (long long)s.total.failed);
        return;
    }
    CHECK(st == TK_ERR_NO_DEVICE && s.cases == 0 && why[0], "no GPU: status %d, %lld cases, why '%s'", (int)st,
          (long long)s.cases, why);
}

void tk_tests(void)
{
    TK_TEST(test_same_seed_and_index_same_case);
    TK_TEST(test_dense_stream_unchanged);
    TK_TEST(test_many_cases);
    TK_TEST(test_epi_cases);
    TK_TEST(test_forms);
    TK_TEST(test_cases_within_bounds);
    TK_TEST(test_everything_occurs);
    TK_TEST(test_exact_cases_stay_exact);
    TK_TEST(test_problem_applies_offsets);
    TK_TEST(test_check_names_the_option);
    TK_TEST(test_replay_command);
    TK_TEST(test_fp8_cases);
    TK_TEST(test_run_without_gpu_fails_cleanly);
}
