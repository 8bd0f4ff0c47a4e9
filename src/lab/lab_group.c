/* lab_group.c - batched and grouped cases (lab.h): the --groups spec and
 * its distributions, and where every group's A, B and C lie. Pure host
 * code: verify, bench, fuzz and the suites build on it, the CPU tests
 * check it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lab.h"

/* ---- the spec ---- */

/* A decimal integer 0..max, digits only (no sign, no space, no 0x). 0, or
 * -1 with why ("G 'x' is not an integer"). */
static int parse_count(const char *s, size_t n, int64_t lo, int64_t max, const char *what, const char *text,
                       int64_t *out, char *why, size_t len)
{
    int64_t v = 0;
    if (n == 0) {
        snprintf(why, len, "'%s': %s is empty (expected an integer %lld..%lld)", text, what, (long long)lo,
                 (long long)max);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            snprintf(why, len, "'%s': %s '%.*s' is not an integer (expected %lld..%lld)", text, what, (int)n, s,
                     (long long)lo, (long long)max);
            return -1;
        }
        if (v <= max)   /* past max it stays past max: no overflow */
            v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > max) {
        snprintf(why, len, "'%s': %s %.*s is out of range (expected %lld..%lld)", text, what, (int)n, s,
                 (long long)lo, (long long)max);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_list(const char *text, tk_lab_group_spec *s, char *why, size_t len)
{
    s->dist = TK_LAB_DIST_LIST;
    s->count = 0;
    s->total = 0;
    for (const char *at = text;; at++) {
        const char *end = at + strcspn(at, ",");
        char what[32];
        snprintf(what, sizeof what, "size %d", s->count + 1);
        if (s->count == TK_LAB_GROUPS_MAX) {
            snprintf(why, len, "'%.40s..': more than %d sizes (expected at most %d groups)", text, TK_LAB_GROUPS_MAX,
                     TK_LAB_GROUPS_MAX);
            return -1;
        }
        int64_t v;
        if (end == at) {
            snprintf(why, len, "'%s': %s is empty (expected SIZE[,SIZE..] or G:TOTAL:balanced|skewed|empty)", text,
                     what);
            return -1;
        }
        if (parse_count(at, (size_t)(end - at), 0, TK_LAB_SIZE_MAX, what, text, &v, why, len))
            return -1;
        s->list[s->count++] = v;
        s->total += v;
        if (!*end)
            break;
        at = end;
    }
    if (s->total < 1 || s->total > TK_LAB_SIZE_MAX) {
        snprintf(why, len, "'%s': the sizes sum to %lld (expected 1..%lld)", text, (long long)s->total,
                 (long long)TK_LAB_SIZE_MAX);
        return -1;
    }
    return 0;
}

int tk_lab_group_spec_parse(const char *text, tk_lab_group_spec *s, char *why, size_t len)
{
    memset(s, 0, sizeof *s);
    const char *c1 = strchr(text, ':');
    if (!c1)
        return parse_list(text, s, why, len);
    const char *c2 = strchr(c1 + 1, ':');
    if (!c2 || strchr(c2 + 1, ':')) {
        snprintf(why, len, "'%s' is not G:TOTAL:balanced|skewed|empty (or a list SIZE[,SIZE..])", text);
        return -1;
    }
    int64_t g, total;
    if (parse_count(text, (size_t)(c1 - text), 1, TK_LAB_GROUPS_MAX, "G", text, &g, why, len) ||
        parse_count(c1 + 1, (size_t)(c2 - c1 - 1), 1, TK_LAB_SIZE_MAX, "TOTAL", text, &total, why, len))
        return -1;
    const char *name = c2 + 1;
    if (!strcmp(name, "balanced"))
        s->dist = TK_LAB_DIST_BALANCED;
    else if (!strcmp(name, "skewed"))
        s->dist = TK_LAB_DIST_SKEWED;
    else if (!strcmp(name, "empty"))
        s->dist = TK_LAB_DIST_EMPTY;
    else {
        snprintf(why, len, "'%s': '%s' is not balanced, skewed or empty", text, name);
        return -1;
    }
    if (s->dist == TK_LAB_DIST_SKEWED && g < 2) {
        snprintf(why, len, "'%s': skewed needs G >= 2 (a quarter of the groups, at least one, get none)", text);
        return -1;
    }
    if (s->dist == TK_LAB_DIST_EMPTY && g < 4) {
        snprintf(why, len, "'%s': empty needs G >= 4 (every 4th group is empty)", text);
        return -1;
    }
    s->count = (int)g;
    s->total = total;
    return 0;
}

void tk_lab_group_spec_str(const tk_lab_group_spec *s, char *buf, size_t len)
{
    static const char *const names[] = { "", "balanced", "skewed", "empty" };
    if (s->dist != TK_LAB_DIST_LIST) {
        snprintf(buf, len, "%d:%lld:%s", s->count, (long long)s->total, names[s->dist]);
        return;
    }
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->count; i++) {
        char item[24];
        int n = snprintf(item, sizeof item, "%s%lld", i ? "," : "", (long long)s->list[i]);
        if (used + (size_t)n + 3 > len) {   /* room for ".." and the terminator */
            snprintf(buf + used, len - used, "..");
            return;
        }
        memcpy(buf + used, item, (size_t)n + 1);
        used += (size_t)n;
    }
}

/* ---- distributions ---- */

/* floor(sqrt(v)), exact for every uint64 v. */
static uint64_t isqrt(uint64_t v)
{
    uint64_t x = (uint64_t)sqrt((double)v);
    while (x > 0 && x * x > v)
        x--;
    while ((x + 1) * (x + 1) <= v)
        x++;
    return x;
}

/* total split over n shares in proportion to w[0..n) (sum W > 0), in
 * integers: floors first, then one more to the largest remainders (the
 * earlier share on a tie), so the parts sum to total exactly. total * w
 * stays below 2^63: total <= 2^24, w <= 2^30. */
static void apportion(int64_t total, const uint64_t *w, int n, int64_t *out)
{
    uint64_t sum = 0, rem[TK_LAB_GROUPS_MAX];
    for (int i = 0; i < n; i++)
        sum += w[i];
    int64_t given = 0;
    for (int i = 0; i < n; i++) {
        out[i] = (int64_t)((uint64_t)total * w[i] / sum);
        rem[i] = (uint64_t)total * w[i] % sum;
        given += out[i];
    }
    for (; given < total; given++) {
        int best = 0;
        for (int i = 1; i < n; i++)
            if (rem[i] > rem[best])
                best = i;
        out[best]++;
        rem[best] = 0;
    }
}

/* Skewed: ne = G - max(1, G/4) groups get shares 1/r^1.5 of the total (r
 * = 1, 2, ...: a few groups take most), the rest none; which group gets
 * which share is a permutation drawn from the seed. The weights are
 * integers (2^30 / r^1.5 through an integer square root), so every machine
 * makes the same sizes. */
static void skewed(const tk_lab_group_spec *s, uint64_t seed, int64_t *sizes)
{
    const int g = s->count, none = g / 4 > 1 ? g / 4 : 1, ne = g - none;
    uint64_t w[TK_LAB_GROUPS_MAX];
    int64_t share[TK_LAB_GROUPS_MAX];
    int perm[TK_LAB_GROUPS_MAX];
    for (int r = 0; r < ne; r++) {
        const uint64_t q = (uint64_t)r + 1;   /* q * sqrt(q) * 2^15 = q * isqrt(q * 2^30) */
        w[r] = ((uint64_t)1 << 45) / (q * isqrt(q << 30));
    }
    apportion(s->total, w, ne, share);
    for (int i = 0; i < g; i++)
        perm[i] = i;
    uint64_t ctr = tk_lab_mix64(seed ^ 0x5e3d);
    for (int i = g - 1; i > 0; i--) {   /* Fisher-Yates */
        const int j = (int)(tk_lab_mix64(++ctr) % (uint64_t)(i + 1));
        const int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int r = 0; r < g; r++)
        sizes[perm[r]] = r < ne ? share[r] : 0;
}

void tk_lab_group_sizes(const tk_lab_group_spec *s, uint64_t seed, int64_t *sizes)
{
    const int g = s->count;
    if (s->dist == TK_LAB_DIST_LIST) {
        memcpy(sizes, s->list, (size_t)g * sizeof *sizes);
        return;
    }
    if (s->dist == TK_LAB_DIST_SKEWED) {
        skewed(s, seed, sizes);
        return;
    }
    /* balanced over every group, or over all but every 4th (empty) */
    const int skip = s->dist == TK_LAB_DIST_EMPTY;
    const int ne = skip ? g - g / 4 : g;
    int64_t q = s->total / ne, r = s->total % ne;
    for (int i = 0, t = 0; i < g; i++) {
        if (skip && i % 4 == 3)
            sizes[i] = 0;
        else
            sizes[i] = q + (t++ < r);
    }
}

/* ---- kinds ---- */

const char *tk_lab_group_kind_name(int kind)
{
    switch (kind) {
    case TK_GROUP_BATCHED: return "batch";
    case TK_GROUP_ROWS: return "rows";
    case TK_GROUP_K: return "k";
    case TK_GROUP_MASKED: return "masked";
    }
    return "dense";
}

int tk_lab_group_kind_parse(const char *word)
{
    return !strcmp(word, "rows") ? TK_GROUP_ROWS : !strcmp(word, "k") ? TK_GROUP_K
                                                 : !strcmp(word, "masked") ? TK_GROUP_MASKED : 0;
}

/* ---- where the groups lie ---- */

/* Elements one stored r x c matrix spans with leading dimension ld in
 * layout l: lines * ld (tk_lab_ld keeps ld >= the line). */
static int64_t span(tk_layout l, int64_t r, int64_t c, int64_t ld)
{
    return (l == TK_ROW_MAJOR ? r : c) * ld;
}

void tk_lab_gcase_desc(const tk_lab_gcase *g, const void *a, const void *b, void *c, tk_gemm_desc *d, size_t *na,
                       size_t *nb, size_t *nc)
{
    const tk_lab_case *x = &g->c;
    memset(d, 0, sizeof *d);
    d->size = sizeof *d;
    tk_lab_problem(x, a, b, c, &d->problem);
    d->group_kind = g->kind;
    d->count = g->count;
    const tk_gemm_problem *p = &d->problem;
    const int64_t ea = span(p->layout, p->op_a == TK_OP_N ? x->m : x->k, p->op_a == TK_OP_N ? x->k : x->m, p->lda);
    const int64_t eb = span(p->layout, p->op_b == TK_OP_N ? x->k : x->n, p->op_b == TK_OP_N ? x->n : x->k, p->ldb);
    const int64_t ec = span(p->layout, x->m, x->n, p->ldc);
    const int per_a = g->kind == TK_GROUP_BATCHED || g->kind == TK_GROUP_MASKED;
    const int per_b = g->kind != TK_GROUP_K, per_c = g->kind != TK_GROUP_ROWS;
    d->stride_a = per_a && !g->broadcast_a ? ea : 0;
    d->stride_b = per_b && !g->broadcast_b ? eb : 0;
    d->stride_c = per_c ? ec : 0;
    const int64_t cnt = g->count;
    if (na) *na = (size_t)(d->stride_a ? cnt * ea : ea);
    if (nb) *nb = (size_t)(d->stride_b ? cnt * eb : eb);
    if (nc) *nc = (size_t)(per_c ? cnt * ec : ec);
}

/* The first row (ROWS) or K index (K) of group i: the sizes before it. */
static int64_t group_start(const tk_lab_gcase *g, int i)
{
    int64_t lo = 0;
    for (int j = 0; j < i; j++)
        lo += g->sizes[j];
    return lo;
}

void tk_lab_gcase_part(const tk_lab_gcase *g, const tk_gemm_desc *d, int i, tk_lab_gpart *pt)
{
    const tk_gemm_problem *p = &d->problem;
    *pt = (tk_lab_gpart){ p->m, p->n, p->k, i * d->stride_a, i * d->stride_b, i * d->stride_c };
    /* ROWS and K are row-major (tilekit.h): op(A)(i, kk) is A[i * lda + kk]
     * for op N, A[kk * lda + i] for op T; op(B)(kk, j) likewise. */
    const int64_t a_row = p->op_a == TK_OP_N ? p->lda : 1, a_k = p->op_a == TK_OP_N ? 1 : p->lda;
    const int64_t b_k = p->op_b == TK_OP_N ? p->ldb : 1;
    if (g->kind == TK_GROUP_ROWS) {
        const int64_t lo = group_start(g, i);
        pt->m = g->sizes[i];
        pt->a_off = lo * a_row;
        pt->c_off = lo * p->ldc;
    } else if (g->kind == TK_GROUP_K) {
        const int64_t lo = group_start(g, i);
        pt->k = g->sizes[i];
        pt->a_off = lo * a_k;
        pt->b_off = lo * b_k;
    } else if (g->kind == TK_GROUP_MASKED) {
        pt->m = g->sizes[i];
    }
}

void tk_lab_gpart_problem(const tk_gemm_desc *d, const tk_lab_gpart *pt, const void *a, const void *b, void *c,
                          tk_gemm_problem *p)
{
    const size_t cb = d->problem.c_type == TK_F32 ? 4 : 2;
    *p = d->problem;
    p->m = pt->m;
    p->n = pt->n;
    p->k = pt->k;
    p->a = a ? (const uint16_t *)a + pt->a_off : NULL;
    p->b = b ? (const uint16_t *)b + pt->b_off : NULL;
    p->c = c ? (char *)c + (size_t)pt->c_off * cb : NULL;
}

void tk_lab_gcase_offs(const tk_lab_gcase *g, int32_t *offs)
{
    int64_t end = 0;
    for (int i = 0; g->sizes && i < g->count; i++) {
        end += g->sizes[i];
        offs[i] = (int32_t)(g->kind == TK_GROUP_MASKED ? g->sizes[i] : end);
    }
}

double tk_lab_gcase_flop(const tk_lab_gcase *g)
{
    tk_gemm_desc d;
    tk_lab_gcase_desc(g, NULL, NULL, NULL, &d, NULL, NULL, NULL);
    double flop = 0;
    for (int i = 0; i < g->count; i++) {
        tk_lab_gpart pt;
        tk_lab_gcase_part(g, &d, i, &pt);
        flop += 2.0 * (double)pt.m * (double)pt.n * (double)pt.k;
    }
    return flop;
}

double tk_lab_gcase_read_bytes(const tk_lab_gcase *g)
{
    tk_gemm_desc d;
    tk_lab_gcase_desc(g, NULL, NULL, NULL, &d, NULL, NULL, NULL);
    double elems = 0;
    int a_read = 0, b_read = 0;   /* a broadcast matrix, once */
    for (int i = 0; i < g->count; i++) {
        tk_lab_gpart pt;
        tk_lab_gcase_part(g, &d, i, &pt);
        if (pt.m == 0 || pt.k == 0)
            continue;
        const int shared_a = g->kind == TK_GROUP_BATCHED && g->broadcast_a;
        const int shared_b = g->kind == TK_GROUP_BATCHED && g->broadcast_b;
        if (!shared_a || !a_read++)
            elems += (double)pt.m * (double)pt.k;
        if (!shared_b || !b_read++)
            elems += (double)pt.k * (double)pt.n;
    }
    return 2.0 * elems;
}

/* Element e of C's buffer as (product or group z, logical row, col),
 * where z is 0 for ROWS (one C). Coordinates past C's lines land in
 * col >= n (row-major) or row >= m (column-major): padding. */
static void locate(const tk_gemm_desc *d, int64_t e, int64_t *z, int64_t *row, int64_t *col)
{
    const tk_gemm_problem *p = &d->problem;
    const int64_t r = d->stride_c ? e % d->stride_c : e;
    *z = d->stride_c ? e / d->stride_c : 0;
    const int64_t line = r / p->ldc, at = r % p->ldc;
    *row = p->layout == TK_ROW_MAJOR ? line : at;
    *col = p->layout == TK_ROW_MAJOR ? at : line;
}

/* The rows of C the groups own: ROWS, the sizes' sum; MASKED, product z's. */
static int64_t owned_rows(const tk_lab_gcase *g, const tk_gemm_desc *d, int64_t z)
{
    if (g->kind == TK_GROUP_ROWS)
        return group_start(g, g->count);
    return g->kind == TK_GROUP_MASKED ? g->sizes[z] : d->problem.m;
}

int tk_lab_gcase_owned(const tk_lab_gcase *g, const tk_gemm_desc *d, int64_t e)
{
    int64_t z, row, col;
    locate(d, e, &z, &row, &col);
    return z < g->count && row < owned_rows(g, d, z) && col < d->problem.n;
}

int64_t tk_lab_gcase_untouched(const tk_lab_gcase *g, const tk_gemm_desc *d, const void *got, const void *img,
                               size_t nc, int64_t *first)
{
    const size_t esz = d->problem.c_type == TK_F32 ? 4 : 2;
    const int64_t rows = g->kind == TK_GROUP_ROWS ? group_start(g, g->count) : 0;
    const tk_gemm_problem *p = &d->problem;
    int64_t bad = 0;
    *first = -1;
    for (size_t e = 0; e < nc; e++) {
        if (memcmp((const char *)got + e * esz, (const char *)img + e * esz, esz) == 0)
            continue;
        /* ROWS' test inline: one C, row-major (the common large case) */
        const int owned = g->kind == TK_GROUP_ROWS
                              ? (int64_t)e / p->ldc < rows && (int64_t)e % p->ldc < p->n
                              : tk_lab_gcase_owned(g, d, (int64_t)e);
        if (!owned && bad++ == 0)
            *first = (int64_t)e;
    }
    return bad;
}

void tk_lab_gcase_where(const tk_lab_gcase *g, const tk_gemm_desc *d, int64_t e, char *buf, size_t len)
{
    int64_t z, row, col;
    locate(d, e, &z, &row, &col);
    const tk_gemm_problem *p = &d->problem;
    const int64_t rows = owned_rows(g, d, z);
    char what[96];
    if (col >= p->n || row >= p->m)
        snprintf(what, sizeof what, "C's padding, past its %s", col >= p->n ? "N columns" : "M rows");
    else if (row >= rows)
        snprintf(what, sizeof what, "past the %s%lld rows", g->kind == TK_GROUP_ROWS ? "groups' " : "product's ",
                 (long long)rows);
    else
        snprintf(what, sizeof what, "owned");
    if (g->kind == TK_GROUP_ROWS)
        snprintf(buf, len, "row %lld col %lld (%s)", (long long)row, (long long)col, what);
    else
        snprintf(buf, len, "%s %lld row %lld col %lld (%s)", g->kind == TK_GROUP_K ? "group" : "product",
                 (long long)z, (long long)row, (long long)col, what);
}

void tk_lab_gcase_form(const tk_lab_gcase *g, char *buf, size_t len)
{
    if (g->kind == TK_GROUP_BATCHED)
        snprintf(buf, len, "batch %d%s%s", g->count, g->broadcast_a ? " bcast-a" : "", g->broadcast_b ? " bcast-b" : "");
    else
        snprintf(buf, len, "%s %s", tk_lab_group_kind_name(g->kind), g->label);
}

void tk_lab_gcase_list_label(tk_lab_gcase *g)
{
    tk_lab_group_spec s;
    s.dist = TK_LAB_DIST_LIST;
    s.count = g->count;
    memcpy(s.list, g->sizes, (size_t)g->count * sizeof *g->sizes);
    tk_lab_group_spec_str(&s, g->label, sizeof g->label);
}

void tk_lab_gcase_name(const tk_lab_gcase *g, char *buf, size_t len)
{
    char form[96], dense[160];
    tk_lab_gcase_form(g, form, sizeof form);
    tk_lab_case_name(&g->c, dense, sizeof dense);
    snprintf(buf, len, "%s %s", form, dense);
}
