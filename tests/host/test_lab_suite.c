/* test_lab_suite.c - shape suites without a GPU: the real bench/shapes files
 * parse; every malformed line is refused naming its file and line; includes
 * resolve beside the including file, cycles and deep nesting are refused;
 * the summary arithmetic on hand-computed figures; the suite fields of the
 * bench table, JSON and CSV. Temporary files live in a mkdtemp folder.
 * Run from the repository root (tests/run_cpu.sh does). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "lab/lab.h"

static char tmp[PATH_MAX];      /* the temporary folder */
static char shapes[PATH_MAX];   /* the repository's bench/shapes */

static void write_file(const char *name, const char *text)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Loads tmp/name; returns the shape count, or -1 with why set. */
static int load_tmp(const char *name, tk_lab_shape **s, char *why, size_t len)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", tmp, name);
    int n = 0;
    return tk_lab_suite_load(path, s, &n, why, len) ? -1 : n;
}

/* Loads the repository's bench/shapes/NAME.txt into *s; returns the
 * shape count, or -1 after a failed check. */
static int load_real(const char *name, tk_lab_shape **s)
{
    char path[PATH_MAX + 64], why[1024];
    snprintf(path, sizeof path, "%s/%s.txt", shapes, name);
    int n = 0;
    if (tk_lab_suite_load(path, s, &n, why, sizeof why)) {
        CHECK(0, "%s: %s", name, why);
        return -1;
    }
    return n;
}

/* text written to tmp/name and loaded into *s: want shapes, else -1 after
 * a failed check. */
static int load_text(const char *name, const char *text, int want, tk_lab_shape **s)
{
    char why[1024];
    write_file(name, text);
    int n = load_tmp(name, s, why, sizeof why);
    CHECK(n == want, "%s: %d shapes (expected %d): %s", name, n, want, why);
    if (n >= 0 && n != want)
        free(*s);
    return n == want ? n : -1;
}

static int count_of(const char *name)
{
    tk_lab_shape *s;
    int n = load_real(name, &s);
    if (n >= 0)
        free(s);
    return n;
}

static void test_real_suites_parse(void)
{
    int square = count_of("square"), llm = count_of("llm"), odd = count_of("odd"), all = count_of("all");
    CHECK(square == 15, "square.txt: %d shapes (expected 15)", square);
    CHECK(llm == 3 * (4 * 11 + 10), "llm.txt: %d shapes (expected 3 models x (4 projections x 11 M + vocab x 10))",
          llm);
    CHECK(odd >= 25 && odd <= 30, "odd.txt: %d shapes (expected about 25-30)", odd);
    CHECK(all == square + llm + odd, "all.txt: %d shapes, not square + llm + odd = %d", all, square + llm + odd);

    char why[1024];
    tk_lab_shape *s;
    int n = load_real("all", &s);
    if (n < 0)
        return;
    int vocab16k = 0, bad_ops = 0;
    for (int i = 0; i < n; i++) {
        const char *want = i < square ? "square" : i < square + llm ? "llm" : "odd";
        CHECK(!strcmp(s[i].suite, want), "all.txt shape %d: suite '%s' (expected '%s')", i, s[i].suite, want);
        if (i < square)
            bad_ops += s[i].m != s[i].n || s[i].n != s[i].k || s[i].op_a != TK_OP_N || s[i].op_b != TK_OP_N;
        else if (i < square + llm) {
            bad_ops += s[i].op_a != TK_OP_N || s[i].op_b != TK_OP_T;
            vocab16k += s[i].m > 2048 && (s[i].n == 128256 || s[i].n == 152064 || s[i].n == 50257);
        }
    }
    CHECK(!bad_ops, "%d square shapes not M = N = K n n, or llm shapes not n t", bad_ops);
    CHECK(!vocab16k, "%d vocabulary projections above M = 2048 in llm.txt", vocab16k);
    CHECK(s[0].m == 128 && s[0].line > 1, "square.txt's first shape: %lld at line %d", (long long)s[0].m, s[0].line);
    free(s);

    /* by name through $TILEKIT_SHAPES */
    setenv("TILEKIT_SHAPES", shapes, 1);
    CHECK(tk_lab_suite_load("odd", &s, &n, why, sizeof why) == 0 && n == odd, "'odd' by name: %s", why);
    if (n == odd)
        free(s);
    unsetenv("TILEKIT_SHAPES");
}

static void test_malformed_lines(void)
{
    static const struct { const char *text; int line; const char *says; } cases[] = {
        { "4096 x 4096\n", 1, "'M N K opA opB' expected, got '4096 x 4096'" },
        { "# a comment\n\n1 2 3 n n\n1 2 n n   # short\n", 4, "expected, got '1 2 n n'" },
        { "0 1 1 n n\n", 1, "M: 0 is out of range (expected 1..16777216)" },
        { "1 16777217 1 n n\n", 1, "N: 16777217 is out of range" },
        { "1 1 -5 n n\n", 1, "K: -5 is out of range" },
        { "1 1 99999999999999999999 n n\n", 1, "K: 99999999999999999999 is out of range" },
        { "1 1 abc n n\n", 1, "K: 'abc' is not an integer" },
        { "1 1 1.5 n n\n", 1, "K: '1.5' is not an integer" },
        { "1 1 1 x n\n", 1, "opA: 'x' is not n or t" },
        { "1 1 1 n N\n", 1, "opB: 'N' is not n or t" },
        { "1 2 3 n n\n1 1 1 n n n\n", 2, "extra field 'n'" },
        { "1 1 1 n t 5 # trailing\n", 1, "extra field '5'" },
        { "include\n", 1, "'include NAME' expected, got 'include'" },
        { "include a b\n", 1, "'include NAME' expected" },
        { "include nope\n", 1, "include 'nope': cannot open" },
        { "include ../bad\n", 1, "no '/'" },
        { "", 0, "end of file without a shape" },
        { "# only comments\n\n", 2, "end of file without a shape" },
        /* grouped lines */
        { "rows 8:64:balanced 128 n t\n", 1, "'rows SPEC N K opA opB' expected, got 'rows 8:64:balanced 128 n t'" },
        { "k 64 128 8:64:skewed t n n\n", 1, "'k M N SPEC opA opB' expected" },
        { "masked 4:64:balanced 64 32 n t\n", 1, "'masked SPEC M N K opA opB' expected" },
        { "batch 16 8 8 n n\n", 1, "'batch COUNT M N K opA opB' expected" },
        { "rows 8:64:zipf 128 64 n t\n", 1, "groups: '8:64:zipf': 'zipf' is not balanced, skewed or empty" },
        { "rows 0,,3 128 64 n t\n", 1, "groups: '0,,3': size 2 is empty" },
        { "k 64 128 2:64:empty t n\n", 1, "groups: '2:64:empty': empty needs G >= 4" },
        { "rows 8:64:balanced 0 64 n t\n", 1, "N: 0 is out of range" },
        { "k 0 128 8:64:balanced t n\n", 1, "M: 0 is out of range" },
        { "rows 8:64:balanced 128 64 n x\n", 1, "opB: 'x' is not n or t" },
        { "batch 65537 8 8 8 n n\n", 1, "COUNT: 65537 is out of range (expected 1..65536)" },
        { "batch x 8 8 8 n n\n", 1, "COUNT: 'x' is not an integer" },
        { "Rows 8:64:balanced 128 64 n t\n", 1, "'Rows' is neither M (an integer) nor a form (rows, k, masked, batch)" },
    };
    char why[1024], want[PATH_MAX + 64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file("bad.txt", cases[i].text);
        tk_lab_shape *s = (tk_lab_shape *)&why;
        why[0] = '\0';
        int n = load_tmp("bad.txt", &s, why, sizeof why);
        snprintf(want, sizeof want, "%s/bad.txt:%d: ", tmp, cases[i].line);
        CHECK(n == -1 && s == NULL, "case %zu: loaded (%d shapes)", i, n);
        CHECK(!strncmp(why, want, strlen(want)), "case %zu: '%s' does not start with '%s'", i, why, want);
        CHECK(strstr(why, cases[i].says) != NULL, "case %zu: '%s' does not say '%s'", i, why, cases[i].says);
    }
    /* a line too long for the reader */
    char *line = malloc(3000);
    memset(line, '1', 2998);
    strcpy(line + 2998, "\n");
    write_file("bad.txt", line);
    free(line);
    tk_lab_shape *s;
    CHECK(load_tmp("bad.txt", &s, why, sizeof why) == -1 && strstr(why, "bad.txt:1: line longer than"), "%s", why);
}

/* Grouped lines: each form's fields where the format puts them, the sizes'
 * sum standing for the dimension the groups split. */
static void test_grouped_lines(void)
{
    tk_lab_shape *s;
    if (load_text("g.txt",
                  "rows 0,7,128,1,300 256 128 n t   # a list\n"
                  "k 64 32 8:4096:skewed t n\n"
                  "masked 4:100:empty 64 48 16 n n\n"
                  "batch 16 128 64 32 t t\n"
                  "512 512 512 n n                  # a dense line among them\n",
                  5, &s) < 0)
        return;
    CHECK(s[0].kind == TK_GROUP_ROWS && s[0].count == 5 && s[0].m == 436 && s[0].n == 256 && s[0].k == 128 &&
              s[0].op_a == TK_OP_N && s[0].op_b == TK_OP_T && !strcmp(s[0].groups, "0,7,128,1,300"),
          "rows: kind %d count %d %lldx%lldx%lld '%s'", s[0].kind, s[0].count, (long long)s[0].m, (long long)s[0].n,
          (long long)s[0].k, s[0].groups);
    CHECK(s[1].kind == TK_GROUP_K && s[1].count == 8 && s[1].m == 64 && s[1].n == 32 && s[1].k == 4096 &&
              s[1].op_a == TK_OP_T && s[1].op_b == TK_OP_N && !strcmp(s[1].groups, "8:4096:skewed"),
          "k: %lldx%lldx%lld", (long long)s[1].m, (long long)s[1].n, (long long)s[1].k);
    CHECK(s[2].kind == TK_GROUP_MASKED && s[2].count == 4 && s[2].m == 64 && s[2].n == 48 && s[2].k == 16,
          "masked: %lldx%lldx%lld", (long long)s[2].m, (long long)s[2].n, (long long)s[2].k);
    CHECK(s[3].kind == TK_GROUP_BATCHED && s[3].count == 16 && s[3].m == 128 && s[3].n == 64 && s[3].k == 32 &&
              s[3].op_a == TK_OP_T && !s[3].groups[0],
          "batch: count %d", s[3].count);
    CHECK(s[4].kind == 0 && s[4].m == 512 && s[4].line == 5, "the dense line: kind %d", s[4].kind);
    free(s);
}

/* bench/shapes/moe.txt: three models' four expert products at five token
 * counts, balanced and skewed, with the published sizes. */
static void test_moe_suite(void)
{
    tk_lab_shape *s;
    int n = load_real("moe", &s);
    if (n < 0)
        return;
    CHECK(n == 3 * 4 * 5 * 2, "moe.txt: %d shapes (expected 3 models x 4 products x 5 token counts x 2)", n);
    static const struct { int experts; int64_t hidden, ffn; } models[] = { { 8, 4096, 14336 }, { 256, 7168, 2048 },
                                                                          { 128, 2048, 768 } };
    static const int64_t tokens[] = { 16, 128, 1024, 4096, 16384 };
    int bad = 0;
    double flop = 0;
    for (int i = 0; i < n; i++) {
        const int model = i / 40, product = i / 10 % 4, skewed = i / 5 % 2;
        const int64_t t = tokens[i % 5], h = models[model].hidden, f = models[model].ffn;
        /* gate_up, down: rows-grouped x @ W^T; dW_up, dW_down: K-grouped dY^T X */
        const int64_t want_m = product < 2 ? t : product == 2 ? 2 * f : h;
        const int64_t want_n = product == 0 ? 2 * f : product == 1 ? h : product == 2 ? h : f;
        const int64_t want_k = product == 0 ? h : product == 1 ? f : t;
        char spec[64];
        snprintf(spec, sizeof spec, "%d:%lld:%s", models[model].experts, (long long)t, skewed ? "skewed" : "balanced");
        const int ok = s[i].kind == (product < 2 ? TK_GROUP_ROWS : TK_GROUP_K) && s[i].m == want_m &&
                       s[i].n == want_n && s[i].k == want_k && s[i].count == models[model].experts &&
                       !strcmp(s[i].groups, spec) && s[i].op_a == (product < 2 ? TK_OP_N : TK_OP_T) &&
                       s[i].op_b == (product < 2 ? TK_OP_T : TK_OP_N) && !strcmp(s[i].suite, "moe");
        CHECK(ok || bad++, "moe.txt line %d: kind %d %lldx%lldx%lld '%s' (expected %lldx%lldx%lld '%s')", s[i].line,
              s[i].kind, (long long)s[i].m, (long long)s[i].n, (long long)s[i].k, s[i].groups, (long long)want_m,
              (long long)want_n, (long long)want_k, spec);
        flop += 2.0 * (double)s[i].m * (double)s[i].n * (double)s[i].k;
    }
    /* the figure the file's header gives for its run time */
    CHECK(flop > 38.9e12 && flop < 39.0e12, "moe.txt: %.4g flop per pass (the header says about 39 TFLOP)", flop);
    free(s);
}

static void test_comments_blanks_crlf(void)
{
    tk_lab_shape *s;
    if (load_text("ok.txt", "# head\n\n  1 2 3 t n   # trailing\r\n\t4\t5\t6 n t\n#\n16777216 1 1 t t", 3, &s) < 0)
        return;
    CHECK(s[0].m == 1 && s[0].n == 2 && s[0].k == 3 && s[0].op_a == TK_OP_T && s[0].op_b == TK_OP_N &&
          s[0].line == 3, "shape 0: %lld %lld %lld line %d", (long long)s[0].m, (long long)s[0].n,
          (long long)s[0].k, s[0].line);
    CHECK(s[1].m == 4 && s[1].op_a == TK_OP_N && s[1].op_b == TK_OP_T && s[1].line == 4, "shape 1");
    CHECK(s[2].m == 16777216 && s[2].op_a == TK_OP_T && s[2].op_b == TK_OP_T && s[2].line == 6,
          "shape 2 (no final newline)");
    CHECK(!strcmp(s[0].suite, "ok"), "suite '%s' (expected the stem 'ok')", s[0].suite);
    free(s);
}

static void test_includes(void)
{
    write_file("top.txt", "include mid\n1 1 1 n n\n");
    write_file("mid.txt", "2 2 2 t t\ninclude leaf.txt   # the .txt may be written\n");
    write_file("leaf.txt", "3 3 3 n t\n");
    tk_lab_shape *s;
    char why[1024];
    /* the working directory is the repository root: includes resolve beside top.txt */
    int n = load_tmp("top.txt", &s, why, sizeof why);
    CHECK(n == 3, "top.txt: %d shapes: %s", n, why);
    if (n == 3) {
        CHECK(s[0].m == 2 && !strcmp(s[0].suite, "mid") && s[0].line == 1, "first: mid's line 1");
        CHECK(s[1].m == 3 && !strcmp(s[1].suite, "leaf") && s[1].line == 1, "second: leaf's line 1");
        CHECK(s[2].m == 1 && !strcmp(s[2].suite, "top") && s[2].line == 2, "third: top's line 2");
        free(s);
    }
    /* by name: $TILEKIT_SHAPES comes first */
    setenv("TILEKIT_SHAPES", tmp, 1);
    char path[PATH_MAX + 64], want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s/top.txt", tmp);
    CHECK(tk_lab_suite_find("top", path, sizeof path, why, sizeof why) == 0 && !strcmp(path, want),
          "find 'top': '%s' (expected %s): %s", path, want, why);
    n = 0;
    CHECK(tk_lab_suite_load("top", &s, &n, why, sizeof why) == 0 && n == 3, "'top' by name: %s", why);
    if (n == 3)
        free(s);
    CHECK(tk_lab_suite_load("nope", &s, &n, why, sizeof why) == -1 && strstr(why, "suite 'nope'") &&
          strstr(why, tmp), "'nope': %s", why);
    unsetenv("TILEKIT_SHAPES");
    /* a path is taken as is */
    CHECK(tk_lab_suite_find("x/y", path, sizeof path, why, sizeof why) == 0 && !strcmp(path, "x/y"), "x/y");
    CHECK(tk_lab_suite_find("y.txt", path, sizeof path, why, sizeof why) == 0 && !strcmp(path, "y.txt"), "y.txt");
    CHECK(tk_lab_suite_find("", path, sizeof path, why, sizeof why) == -1, "an empty name is refused");

    /* cycles, named with the chain */
    write_file("self.txt", "1 1 1 n n\ninclude self\n");
    CHECK(load_tmp("self.txt", &s, why, sizeof why) == -1 &&
          strstr(why, "self.txt:2: include 'self': include cycle (self -> self)"), "self: %s", why);
    write_file("ping.txt", "include pong\n");
    write_file("pong.txt", "1 1 1 n n\ninclude ping\n");
    CHECK(load_tmp("ping.txt", &s, why, sizeof why) == -1 &&
          strstr(why, "pong.txt:2: include 'ping': include cycle (ping -> pong -> ping)"), "ping: %s", why);
    /* a diamond is no cycle: both paths count */
    write_file("dia.txt", "include leaf\ninclude leaf\n");
    n = load_tmp("dia.txt", &s, why, sizeof why);
    CHECK(n == 2, "diamond: %d shapes: %s", n, why);
    if (n == 2)
        free(s);
    /* nesting: a chain of 8 files is read, 9 are refused */
    for (int i = 1; i <= 9; i++) {
        char name[32], text[64];
        snprintf(name, sizeof name, "d%d.txt", i);
        snprintf(text, sizeof text, i < 9 ? "%d 1 1 n n\ninclude d%d\n" : "%d 1 1 n n\n", i, i + 1);
        write_file(name, text);
    }
    n = load_tmp("d2.txt", &s, why, sizeof why);
    CHECK(n == 8, "d2..d9 (8 files): %d shapes: %s", n, why);
    if (n == 8)
        free(s);
    CHECK(load_tmp("d1.txt", &s, why, sizeof why) == -1 &&
          strstr(why, "d8.txt:2: include 'd9': includes nested more than 8"), "d1..d9: %s", why);
    /* an included file without shapes names itself */
    write_file("empty.txt", "# nothing yet\n");
    write_file("inc_empty.txt", "1 1 1 n n\ninclude empty\n");
    CHECK(load_tmp("inc_empty.txt", &s, why, sizeof why) == -1 &&
          strstr(why, "empty.txt:1: end of file without a shape"), "include of an empty file: %s", why);
    /* an error inside an included file names that file and line */
    write_file("inc_bad.txt", "include bad2\n");
    write_file("bad2.txt", "1 1 1 n n\n2 2 2 n q\n");
    CHECK(load_tmp("inc_bad.txt", &s, why, sizeof why) == -1 && strstr(why, "bad2.txt:2: opB: 'q'"), "%s", why);
}

static void test_summary_arithmetic(void)
{
    /* a: 2, 8, 0.5 -> geomean 2, min 0.5 (#3), 1 below
     * b: 0.5, NaN -> geomean 0.5, min #1, 1 below, 1 not measured
     * c: inf, 0.9 -> geomean 0.9, 0.9 is not below 0.9, 1 not measured
     * overall: 2 * 0.5 * 8 * 0.5 * 0.9 = 3.6 over 5 -> 3.6^(1/5); min the first 0.5 (#1) */
    const double r[] = { 2.0, 0.5, 8.0, 0.5, NAN, INFINITY, 0.9 };
    const char *const su[] = { "a", "b", "a", "a", "b", "c", "c" };
    tk_lab_suite_stat st[8];
    int ns = tk_lab_suite_summary(r, su, 7, 0.9, st, 8);
    CHECK(ns == 4, "%d entries (expected a, b, c, overall)", ns);
    if (ns != 4)
        return;
    static const struct { const char *suite; int shapes, measured, below, min_index; double geomean, min; } want[] = {
        { "a", 3, 3, 1, 3, 2.0, 0.5 },
        { "b", 2, 1, 1, 1, 0.5, 0.5 },
        { "c", 2, 1, 0, 6, 0.9, 0.9 },
        { "", 7, 5, 2, 1, 0.0, 0.5 },
    };
    for (int j = 0; j < 4; j++) {
        double g = j == 3 ? pow(3.6, 0.2) : want[j].geomean;
        CHECK(!strcmp(st[j].suite, want[j].suite), "entry %d: suite '%s'", j, st[j].suite);
        CHECK(st[j].shapes == want[j].shapes && st[j].measured == want[j].measured &&
              st[j].not_measured == want[j].shapes - want[j].measured, "entry %d: %d shapes, %d measured, %d not",
              j, st[j].shapes, st[j].measured, st[j].not_measured);
        CHECK(fabs(st[j].geomean - g) < 1e-12 * g, "entry %d: geomean %.15g (expected %.15g)", j, st[j].geomean, g);
        CHECK(st[j].min == want[j].min && st[j].min_index == want[j].min_index, "entry %d: min %g at %d", j,
              st[j].min, st[j].min_index);
        CHECK(st[j].below == want[j].below, "entry %d: %d below", j, st[j].below);
    }
    /* nothing measured: NaN figures, no min; 0 and negative ratios are not measured either */
    const double z[] = { 0.0, -1.0, NAN };
    ns = tk_lab_suite_summary(z, NULL, 3, 0.9, st, 8);
    CHECK(ns == 2 && !strcmp(st[0].suite, "") && st[1].shapes == 3 && st[1].measured == 0 && isnan(st[1].geomean) &&
          isnan(st[1].min) && st[1].min_index == -1 && st[1].below == 0, "unmeasured only: %d entries", ns);
    CHECK(tk_lab_suite_summary(r, su, 7, 0.9, st, 3) == -1, "3 slots for 4 entries must be refused");
    CHECK(tk_lab_suite_summary(r, su, 0, 0.9, st, 1) == 1 && st[0].shapes == 0, "no shapes: the overall entry only");
}

static tk_lab_bench_row row(const char *kernel, const char *chosen, const char *suite, int64_t m, double ratio,
                            const char *status)
{
    tk_lab_bench_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.kernel, sizeof r.kernel, "%s", kernel);
    snprintf(r.chosen, sizeof r.chosen, "%s", chosen);
    snprintf(r.suite, sizeof r.suite, "%s", suite);
    snprintf(r.status, sizeof r.status, "%s", status);
    r.c = (tk_lab_case){ TK_ROW_MAJOR, TK_OP_N, TK_OP_T, m, 4097, 64, 1.0f, 0.0f, TK_BF16, 1, 0, 0 };
    r.samples = 5;
    r.ms_min = r.ms_median = r.ms_p20 = r.ms_p80 = 1.0;
    r.tflops = 1.0;
    r.pct_peak = NAN;
    r.ratio_cublas = ratio;
    return r;
}

static FILE *tmpfile_checked(void)
{
    FILE *f = tmpfile();
    CHECK(f != NULL, "tmpfile failed");
    return f;
}

/* What f received since it was opened, into buf; closes f. */
static char *contents(FILE *f, char *buf, size_t len)
{
    size_t n = 0;
    if (f) {
        rewind(f);
        n = fread(buf, 1, len - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

static void test_report_suite_fields(void)
{
    tk_lab_bench_row rows[] = {
        row("cublas", "", "llm", 1, 1.0, "ok"),
        row("auto", "k31_wgmma_cluster", "llm", 1, 0.5, "ok"),
        row("cublas", "", "odd", 3, 1.0, "ok"),
        row("auto", "", "odd", 3, NAN, "auto: no kernel supports this problem"),
        row("auto", "k01_naive", "odd", 5, 2.0, "ok"),
    };
    tk_lab_bench_info info = { .name = "Fake GPU", .sm = 90, .sm_count = 132, .clock_mhz = 1980 };
    FILE *f;
    if (!(f = tmpfile_checked()))
        return;
    tk_lab_bench_print_row(f, &rows[1]);
    tk_lab_bench_print_summary(f, rows, 5);
    static char out[16384];
    contents(f, out, sizeof out);
    CHECK(strstr(out, "auto -> k31_wgmma_cluster "), "the row does not name the chosen kernel: %s", out);
    /* auto: llm 0.5 (1 below); odd 2.0 and one not measured; overall sqrt(0.5 * 2) = 1 */
    CHECK(strstr(out, "llm") && strstr(out, "0.500") && strstr(out, "1x4097x64 n t"), "summary: %s", out);
    CHECK(strstr(out, "overall") && strstr(out, "1.000"), "overall: %s", out);
    CHECK(!strstr(out, "cublas "), "cuBLAS is the reference, not summarized: %s", out);

    if (!(f = tmpfile_checked()))
        return;
    CHECK(tk_lab_bench_write_json(f, &info, rows, 5) == 0, "write_json failed");
    contents(f, out, sizeof out);
    static const char *const json_has[] = {
        "\"suite\":\"llm\"", "\"chosen\":\"k31_wgmma_cluster\"", "\"chosen\":null", "\"ratio_cublas\":0.5",
        "\"summary\":{\"threshold\":0.9,\"kernels\":[", "{\"kernel\":\"auto\",\"suites\":[",
        "{\"suite\":\"odd\",\"shapes\":2,\"measured\":1,\"not_measured\":1,\"geomean\":2,\"min\":2,"
        "\"min_shape\":\"5x4097x64 n t\",\"below\":0}",
        "\"overall\":{\"shapes\":3,\"measured\":2,\"not_measured\":1,\"geomean\":1,\"min\":0.5,"
        "\"min_shape\":\"1x4097x64 n t\",\"below\":1}",
    };
    for (size_t i = 0; i < sizeof json_has / sizeof json_has[0]; i++)
        CHECK(strstr(out, json_has[i]), "JSON lacks %s: %s", json_has[i], out);
    char *res = strstr(out, "\"results\""), *sum = strstr(out, "\"summary\"");
    CHECK(res && sum && res < sum, "the summary must follow the results");

    /* outside a suite: a plain run's rows as before; an auto row brings both fields, no summary */
    rows[0].suite[0] = rows[1].suite[0] = '\0';
    if (!(f = tmpfile_checked()))
        return;
    tk_lab_bench_write_json(f, &info, rows, 1);
    contents(f, out, sizeof out);
    CHECK(strstr(out, "\"status\":\"ok\"}") && !strstr(out, "\"suite\"") && !strstr(out, "chosen"), "plain: %s", out);
    if (!(f = tmpfile_checked()))
        return;
    tk_lab_bench_write_json(f, &info, rows, 2);
    contents(f, out, sizeof out);
    CHECK(strstr(out, "\"suite\":null,\"chosen\":null}") && !strstr(out, "summary") &&
          strstr(out, "\"suite\":null,\"chosen\":\"k31_wgmma_cluster\"}"), "auto outside a suite: %s", out);
    if (!(f = tmpfile_checked()))
        return;
    tk_lab_bench_write_csv(f, &info, rows, 1);
    contents(f, out, sizeof out);
    CHECK(strstr(out, "ratio_cublas,status\n") && !strstr(out, "chosen"), "plain CSV: %s", out);
    rows[1].suite[0] = 'l';

    if (!(f = tmpfile_checked()))
        return;
    tk_lab_bench_write_csv(f, &info, rows + 1, 1);
    contents(f, out, sizeof out);
    CHECK(strstr(out, "ratio_cublas,status,suite,chosen\n") &&
          strstr(out, "\"ok\",\"llm\",\"k31_wgmma_cluster\"\n"), "CSV: %s", out);
}

/* The decode line: only auto's ok rows with M <= 16 and B of at least 64 MB
 * count; bytes of A + B + C per second against the measured read rate. */
static void test_decode_bandwidth(void)
{
    tk_lab_bench_row rows[5];
    memset(rows, 0, sizeof rows);
    const struct { const char *k; int64_t m, n, k_; double ms; } r[5] = {
        { "auto", 1, 28672, 4096, 0.1 },      /* 235003904 bytes in 0.1 ms: 2350 GB/s */
        { "auto", 16, 4096, 14336, 0.1 },     /* 117440512 + 458752 + 262144 bytes: 1181.6 GB/s */
        { "cublas", 1, 28672, 4096, 0.05 },   /* not auto */
        { "auto", 32, 28672, 4096, 0.05 },    /* M > 16 */
        { "auto", 1, 4096, 4096, 0.01 },      /* B of 33.5 MB */
    };
    for (int i = 0; i < 5; i++) {
        snprintf(rows[i].kernel, sizeof rows[i].kernel, "%s", r[i].k);
        snprintf(rows[i].status, sizeof rows[i].status, "ok");
        rows[i].c.m = r[i].m; rows[i].c.n = r[i].n; rows[i].c.k = r[i].k_;
        rows[i].c.out = TK_F32;
        rows[i].ms_median = r[i].ms;
    }
    tk_lab_bench_info info;
    memset(&info, 0, sizeof info);
    info.dram_read_gbs = 3000;
    char buf[1024] = "";
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    CHECK(f != NULL, "fmemopen");
    if (!f)
        return;
    tk_lab_bench_print_decode_bw(f, &info, rows, 5);
    fclose(f);
    /* (78.33 + 39.39) / 2 = 58.86; min 39.39 at 16x4096x14336 */
    CHECK(strstr(buf, "2 rows") && strstr(buf, "58.9% ") && strstr(buf, "min 39.4% (16x4096x14336)") &&
              strstr(buf, "(3000 GB/s)"),
          "got '%s'", buf);
    info.dram_read_gbs = 0;
    f = fmemopen(buf, sizeof buf - 1, "w");
    if (!f)
        return;
    tk_lab_bench_print_decode_bw(f, &info, rows, 5);
    fclose(f);
    CHECK(strstr(buf, "not measured") != NULL, "unmeasured bandwidth: '%s'", buf);
}

void tk_tests(void)
{
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        cwd[0] = '\0';
    snprintf(shapes, sizeof shapes, "%.*s/bench/shapes", (int)sizeof shapes - 16, cwd);
    snprintf(tmp, sizeof tmp, "/tmp/tk_suite_XXXXXX");
    if (!mkdtemp(tmp))
        perror("mkdtemp");      /* every test below then fails on its files */
    unsetenv("TILEKIT_SHAPES");
    TK_TEST(test_decode_bandwidth);
    TK_TEST(test_real_suites_parse);
    TK_TEST(test_malformed_lines);
    TK_TEST(test_comments_blanks_crlf);
    TK_TEST(test_grouped_lines);
    TK_TEST(test_moe_suite);
    TK_TEST(test_includes);
    TK_TEST(test_summary_arithmetic);
    TK_TEST(test_report_suite_fields);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp);
}
