/* lab_fuzz.c - the seeded GPU fuzzer behind `tilekit fuzz` (lab.h's fuzz
 * section): the case generator, pure host code that the CPU tests check,
 * and the engine that runs each case on every kernel accepting it.
 *
 * Per case the engine fills A, B (and C0 when beta != 0) on the GPU, copies
 * them back once, and computes the fp64 reference once at the points it
 * judges. Then, for each kernel, C's whole buffer (guard bands, offset,
 * padding) is reset from a host image, the kernel runs, and the buffer
 * comes back to be judged. The library is used through tilekit.h only. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime_api.h>
#include "lab.h"
#include "lab_rand.h"

/* ---- the generator ---- */

/* splitmix64: a Weyl sequence through the finalizer. Each case seeds its
 * own from (seed, index), so case i needs none of the cases before it. */
typedef struct fuzz_rng {
    uint64_t s;
} fuzz_rng;

static uint64_t rng_next(fuzz_rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    return tk_lab_mix64(r->s);
}

/* Uniform in 0..n-1 for n >= 1 (the modulo bias is below 2^-50 for the n used here). */
static int64_t rng_below(fuzz_rng *r, int64_t n) { return (int64_t)(rng_next(r) % (uint64_t)n); }

/* Log-uniform in 1..hi: a bit length, then a value of that length, so every
 * octave is as likely as any other (most sizes small or medium, cases
 * quick) with integer arithmetic alone: the same case on every machine. */
static int64_t rng_log(fuzz_rng *r, int64_t hi)
{
    int top_bit = 0;
    while (hi >> (top_bit + 1))
        top_bit++;
    int64_t lo = (int64_t)1 << rng_below(r, top_bit + 1);
    int64_t up = 2 * lo - 1 < hi ? 2 * lo - 1 : hi;
    return lo + rng_below(r, up - lo + 1);
}

static int is_prime(int64_t v)
{
    for (int64_t d = 2; d * d <= v; d++)
        if (v % d == 0)
            return 0;
    return v >= 2;
}

/* One of M, N, K in 1..bound. Kernels go wrong at tile edges, so multiples
 * of the tile sizes and the values one off them come often; primes share no
 * factor with any tile; small values are below one MMA or one K-step. */
static int64_t draw_dim(fuzz_rng *r, int64_t bound)
{
    static const int64_t units[] = { 8, 16, 32, 64, 128, 256 };
    int64_t kind = rng_below(r, 20);
    if (kind < 3 || bound <= 16)
        return 1 + rng_below(r, bound < 16 ? bound : 16);
    if (kind < 9) {
        int64_t unit = units[rng_below(r, 6)];
        while (unit > bound)
            unit /= 2;
        int64_t v = rng_log(r, bound / unit) * unit + rng_below(r, 3) - 1;
        return v < 1 ? 1 : v > bound ? bound : v;
    }
    if (kind < 11) {
        int64_t v = rng_log(r, bound);
        while (v > 2 && !is_prime(v))
            v--;
        return v < 2 ? 2 : v;
    }
    return rng_log(r, bound);
}

/* M, N, K drawn in a random order, each within what the volume cap leaves
 * (so M*N*K <= max_volume), so that no one of them is always the squeezed one. */
static void draw_dims(fuzz_rng *r, const tk_lab_fuzz_params *p, int64_t dim[3])
{
    static const int order[6][3] = { { 0, 1, 2 }, { 0, 2, 1 }, { 1, 0, 2 }, { 1, 2, 0 }, { 2, 0, 1 }, { 2, 1, 0 } };
    const int *o = order[rng_below(r, 6)];
    int64_t volume = 1;
    for (int i = 0; i < 3; i++) {
        int64_t left = p->max_volume / volume;
        dim[o[i]] = draw_dim(r, left < p->max_size ? left : p->max_size);
        volume *= dim[o[i]];
    }
}

/* A "random" alpha or beta. Exact mode: small integers or powers of two of
 * either sign, whose products with integers stay exact; else any float in
 * [-4, 4). */
static float random_scalar(fuzz_rng *r, int exact)
{
    if (!exact)
        return (float)((double)(rng_next(r) >> 40) * 0x1p-24 * 8.0 - 4.0);
    if (rng_below(r, 2))
        return (float)(rng_below(r, 9) - 4);
    return (float)((rng_below(r, 2) ? -1.0 : 1.0) * ldexp(1.0, (int)rng_below(r, 7) - 3));
}

static float draw_alpha(fuzz_rng *r, int exact)
{
    static const float fixed[] = { 1.0f, 1.0f, 1.0f, -1.0f, 0.5f, 2.0f, -3.0f, 0.0f, 65536.0f };
    int64_t i = rng_below(r, 10);
    return i < 9 ? fixed[i] : random_scalar(r, exact);
}

/* beta == 0 in four cases of ten: C must then not be read (it starts as NaN). */
static float draw_beta(fuzz_rng *r, int exact)
{
    static const float fixed[] = { 0.0f, 0.0f, 0.0f, 0.0f, 1.0f, -1.0f, 0.5f, 2.0f, -3.0f };
    int64_t i = rng_below(r, 10);
    return i < 9 ? fixed[i] : random_scalar(r, exact);
}

/* e such that x (!= 0) is an odd multiple of 2^e. */
static int low_exp(float x)
{
    int e;
    uint32_t sig = (uint32_t)ldexp(frexp(fabs((double)x), &e), 24);   /* fp32's 24-bit significand */
    while (!(sig & 1)) {
        sig >>= 1;
        e++;
    }
    return e - 24;
}

/* Whether every value of alpha * acc + beta * c0 is exact in fp32, for any
 * integer sum acc of K products of inputs in [-3, 3] (|acc| <= 9K, itself
 * exact: 9 * 6000 < 2^24) and c0 in [-3, 3]: those values, and any partial
 * sums a split-K kernel makes of them, are multiples of 2^q (q the lowest bit
 * of alpha and beta) below the bound in magnitude; they fit fp32's 24-bit
 * significand when the bound is below 2^(24 + q). */
static int exact_scalars(float alpha, float beta, int64_t k)
{
    const double im = TK_LAB_RAND_INT_MAX;
    if (alpha == 0.0f && beta == 0.0f)
        return 1;
    int q = alpha != 0.0f ? low_exp(alpha) : low_exp(beta);
    if (alpha != 0.0f && beta != 0.0f && low_exp(beta) < q)
        q = low_exp(beta);
    double bound = fabs((double)alpha) * im * im * (double)k + fabs((double)beta) * im;
    return bound < ldexp(1.0, 24 + q);
}

static int64_t round8(int64_t x) { return (x + 7) / 8 * 8; }

/* A leading dimension for lines of len elements. vec: a multiple of 8 (rows
 * of whole 16-byte vectors, what the vector and TMA kernels need); else
 * tight, one or seven over (odd rows, misaligned ones), eight over, or a
 * multiple of 8 plus any extra. */
static int64_t draw_ld(fuzz_rng *r, int64_t len, int vec)
{
    if (vec)
        return round8(len) + (rng_below(r, 3) ? 0 : 8 * rng_below(r, 8));
    switch (rng_below(r, 10)) {
    case 0: case 1: case 2: case 3: return len;
    case 4: return len + 1;
    case 5: return len + 7;
    case 6: return len + 8;
    default: return round8(len) + rng_below(r, 64);
    }
}

void tk_lab_fuzz_extent(const tk_lab_fuzz_case *c, tk_lab_fuzz_operand x, int64_t *lines, int64_t *len)
{
    /* the stored matrix: A is M x K (op N) or K x M (op T); B K x N or N x K; C M x N */
    int64_t rows = c->m, cols = c->n;
    if (x == TK_LAB_FUZZ_A) {
        rows = c->op_a == TK_OP_N ? c->m : c->k;
        cols = c->op_a == TK_OP_N ? c->k : c->m;
    } else if (x == TK_LAB_FUZZ_B) {
        rows = c->op_b == TK_OP_N ? c->k : c->n;
        cols = c->op_b == TK_OP_N ? c->n : c->k;
    }
    *lines = c->layout == TK_ROW_MAJOR ? rows : cols;
    *len = c->layout == TK_ROW_MAJOR ? cols : rows;
}

void tk_lab_fuzz_case_gen(const tk_lab_fuzz_params *p, uint64_t seed, int64_t index, tk_lab_fuzz_case *c)
{
    fuzz_rng r = { tk_lab_mix64(tk_lab_mix64(seed) + (uint64_t)index) };
    memset(c, 0, sizeof *c);
    c->seed = seed;
    c->index = index;
    c->exact = (int)rng_below(&r, 2);
    c->layout = (tk_layout)rng_below(&r, 2);
    c->op_a = (tk_op)rng_below(&r, 2);
    c->op_b = (tk_op)rng_below(&r, 2);
    c->out = (tk_dtype)rng_below(&r, 2);
    int64_t dim[3];
    draw_dims(&r, p, dim);
    c->m = dim[0];
    c->n = dim[1];
    c->k = dim[2];
    c->alpha = draw_alpha(&r, c->exact);
    c->beta = draw_beta(&r, c->exact);
    /* alpha = 65536 with beta != 0 can need more than 24 bits: keep the
     * rarer alpha and drop beta, so the case stays exact */
    if (c->exact && !exact_scalars(c->alpha, c->beta, c->k))
        c->beta = 0.0f;
    /* Half the cases are 16-byte aligned throughout (offsets 0, leading
     * dimensions multiples of 8), the layout most kernels require, so each
     * of them gets cases to run; in the other half mostly auto-dispatch
     * (and the kernels that take anything) run. */
    int vec = (int)rng_below(&r, 2);
    int64_t lines, len;
    tk_lab_fuzz_extent(c, TK_LAB_FUZZ_A, &lines, &len);
    c->lda = draw_ld(&r, len, vec);
    tk_lab_fuzz_extent(c, TK_LAB_FUZZ_B, &lines, &len);
    c->ldb = draw_ld(&r, len, vec);
    tk_lab_fuzz_extent(c, TK_LAB_FUZZ_C, &lines, &len);
    c->ldc = draw_ld(&r, len, vec);
    if (!vec) {
        c->off_a = (int)rng_below(&r, TK_LAB_OFFSET_MAX + 1);
        c->off_b = (int)rng_below(&r, TK_LAB_OFFSET_MAX + 1);
        c->off_c = (int)rng_below(&r, TK_LAB_OFFSET_MAX + 1);
    }
    c->data_seed = rng_next(&r);
}

void tk_lab_fuzz_problem(const tk_lab_fuzz_case *c, const void *a, const void *b, void *cc, tk_gemm_problem *p)
{
    memset(p, 0, sizeof *p);
    p->layout = c->layout;
    p->op_a = c->op_a;
    p->op_b = c->op_b;
    p->m = c->m;
    p->n = c->n;
    p->k = c->k;
    p->alpha = c->alpha;
    p->beta = c->beta;
    p->a = a ? (const uint16_t *)a + c->off_a : NULL;
    p->lda = c->lda;
    p->b = b ? (const uint16_t *)b + c->off_b : NULL;
    p->ldb = c->ldb;
    p->c = cc ? (char *)cc + (size_t)c->off_c * (c->out == TK_F32 ? 4 : 2) : NULL;
    p->ldc = c->ldc;
    p->c_type = c->out;
}

void tk_lab_fuzz_case_name(const tk_lab_fuzz_case *c, char *buf, size_t len)
{
    snprintf(buf, len, "%lldx%lldx%lld %s %c%c %s %s a=%g b=%g lda=%lld ldb=%lld ldc=%lld off=%d,%d,%d",
             (long long)c->m, (long long)c->n, (long long)c->k, c->layout == TK_ROW_MAJOR ? "row" : "col",
             c->op_a == TK_OP_N ? 'N' : 'T', c->op_b == TK_OP_N ? 'N' : 'T', c->out == TK_F32 ? "fp32" : "bf16",
             c->exact ? "exact" : "random", (double)c->alpha, (double)c->beta, (long long)c->lda, (long long)c->ldb,
             (long long)c->ldc, c->off_a, c->off_b, c->off_c);
}

/* ---- batched and grouped cases ---- */

/* One of the kinds forms allows, in a fixed order. */
static int draw_kind(fuzz_rng *r, unsigned forms)
{
    int kinds[4], n = 0;
    if (forms & TK_LAB_FORM_BATCHED)
        kinds[n++] = TK_GROUP_BATCHED;
    if (forms & TK_LAB_FORM_GROUPED) {
        kinds[n++] = TK_GROUP_ROWS;
        kinds[n++] = TK_GROUP_K;
        kinds[n++] = TK_GROUP_MASKED;
    }
    if (!n)   /* forms without either: the callers never ask */
        kinds[n++] = TK_GROUP_BATCHED;
    return kinds[rng_below(r, n)];
}

/* x * y within budget (>= 1): the larger halved until it fits. */
static void fit(int64_t *x, int64_t *y, int64_t budget)
{
    while (*x * *y > budget)
        *(*x >= *y ? x : y) = (*x >= *y ? *x : *y) / 2;
}

void tk_lab_fuzz_gcase_gen(const tk_lab_fuzz_params *p, unsigned forms, uint64_t seed, int64_t index,
                           tk_lab_fuzz_gcase *f)
{
    /* a stream of its own ("many"): the dense cases' draws stay as they were */
    fuzz_rng r = { tk_lab_mix64(tk_lab_mix64(seed ^ 0x6d616e79ull) + (uint64_t)index) };
    memset(f, 0, sizeof *f);
    f->seed = seed;
    f->index = index;
    tk_lab_gcase *g = &f->g;
    g->kind = draw_kind(&r, forms);
    tk_lab_case *c = &g->c;
    /* the grouped kinds are row-major (tilekit.h) */
    c->layout = g->kind == TK_GROUP_BATCHED ? (tk_layout)rng_below(&r, 2) : TK_ROW_MAJOR;
    c->op_a = (tk_op)rng_below(&r, 2);
    c->op_b = (tk_op)rng_below(&r, 2);
    c->out = (tk_dtype)rng_below(&r, 2);
    c->pad = (int)rng_below(&r, 2);
    c->alpha = draw_alpha(&r, 0);
    c->beta = draw_beta(&r, 0);
    const int64_t bound = p->max_size < 1024 ? p->max_size : 1024;
    const int64_t budget = p->max_volume < TK_LAB_FUZZ_MANY_VOLUME ? p->max_volume : TK_LAB_FUZZ_MANY_VOLUME;
    if (g->kind == TK_GROUP_BATCHED) {
        g->count = (int)(1 + rng_below(&r, 8));
        g->broadcast_a = rng_below(&r, 4) == 0;
        g->broadcast_b = rng_below(&r, 4) == 0;
        const tk_lab_fuzz_params each = { bound, budget / g->count > 0 ? budget / g->count : 1 };
        int64_t dim[3];
        draw_dims(&r, &each, dim);
        c->m = dim[0];
        c->n = dim[1];
        c->k = dim[2];
    } else {
        /* sizes of every kind draw_dim makes (one off tile multiples, primes,
         * small), a quarter of them empty */
        g->count = (int)(1 + rng_below(&r, TK_LAB_FUZZ_GROUPS));
        int64_t total = 0, most = 0;
        for (int i = 0; i < g->count; i++) {
            f->sizes[i] = rng_below(&r, 4) == 0 ? 0 : draw_dim(&r, bound);
            total += f->sizes[i];
            most = f->sizes[i] > most ? f->sizes[i] : most;
        }
        /* the two dimensions the groups leave whole, and at times rows
         * (ROWS, MASKED) or K (K) that no group owns past the groups' */
        int64_t x = draw_dim(&r, bound), y = draw_dim(&r, bound);
        const int64_t each = budget / (total > 0 ? total : 1);   /* the groups themselves may take it all */
        fit(&x, &y, each > 0 ? each : 1);
        const int64_t tail = rng_below(&r, 4) == 0 ? 1 + rng_below(&r, 16) : 0;
        const int64_t split = (g->kind == TK_GROUP_MASKED ? most : total) + tail;
        c->m = g->kind == TK_GROUP_K ? x : split > 0 ? split : 1;
        c->n = g->kind == TK_GROUP_K ? y : x;
        c->k = g->kind == TK_GROUP_K ? (split > 0 ? split : 1) : y;
        g->sizes = f->sizes;
        tk_lab_gcase_list_label(g);
        g->sizes = NULL;   /* f is copied: tk_lab_fuzz_gcase_view points a copy at its sizes */
    }
    c->seed = rng_next(&r);
}

void tk_lab_fuzz_gcase_view(const tk_lab_fuzz_gcase *f, tk_lab_gcase *g)
{
    *g = f->g;
    if (g->kind != TK_GROUP_BATCHED)
        g->sizes = f->sizes;
}

/* M, N, K of a case whose reference is all of C on the CPU (epilogue and
 * FP8 cases): as the dense cases draw them within max_size and 1024, the
 * volume within max_volume and TK_LAB_FUZZ_MANY_VOLUME, as the many cases'. */
static void draw_whole_dims(fuzz_rng *r, const tk_lab_fuzz_params *p, tk_lab_case *c)
{
    tk_lab_fuzz_params q = *p;
    if (q.max_size > 1024)
        q.max_size = 1024;
    if (q.max_volume > TK_LAB_FUZZ_MANY_VOLUME)
        q.max_volume = TK_LAB_FUZZ_MANY_VOLUME;
    int64_t dim[3];
    draw_dims(r, &q, dim);
    c->m = dim[0];
    c->n = dim[1];
    c->k = dim[2];
}

void tk_lab_fuzz_ecase_gen(const tk_lab_fuzz_params *p, int kind, uint64_t seed, int64_t index,
                           tk_lab_fuzz_ecase *x)
{
    /* a stream of its own ("epi"): the other cases' draws stay as they were */
    fuzz_rng r = { tk_lab_mix64(tk_lab_mix64(seed ^ 0x657069ull) + (uint64_t)index) };
    memset(x, 0, sizeof *x);
    x->seed = seed;
    x->index = index;
    tk_lab_epi *e = &x->e;
    e->kind = kind >= TK_EPI_BIAS_ACT && kind <= TK_EPI_GATED_BACKWARD ? kind
                                                                        : TK_EPI_BIAS_ACT + (int)rng_below(&r, 4);
    const int backward = e->kind == TK_EPI_BACKWARD || e->kind == TK_EPI_GATED_BACKWARD;
    /* bias_act alone takes no activation; the others need one */
    e->act = e->kind == TK_EPI_BIAS_ACT ? (int)rng_below(&r, 5) : 1 + (int)rng_below(&r, 4);
    e->bias = backward ? 0 : (int)rng_below(&r, 3);
    e->bias_bf16 = e->bias && rng_below(&r, 2);
    e->d_apart = (int)rng_below(&r, 2);
    e->aux = backward || rng_below(&r, 2);
    e->bias_grad = backward && rng_below(&r, 2);
    e->up_split = e->kind == TK_EPI_GATED && rng_below(&r, 2);
    tk_lab_case *c = &x->c;
    c->layout = TK_ROW_MAJOR;      /* tilekit.h: the epilogues are row-major */
    c->op_a = (tk_op)rng_below(&r, 2);
    c->op_b = (tk_op)rng_below(&r, 2);
    c->out = (tk_dtype)rng_below(&r, 2);
    c->pad = (int)rng_below(&r, 2);
    c->alpha = draw_alpha(&r, 0);
    c->beta = e->kind == TK_EPI_GATED_BACKWARD ? 0.0f : draw_beta(&r, 0);
    draw_whole_dims(&r, p, c);
    if (e->kind == TK_EPI_GATED && c->n % 2)   /* N even: its gate and up halves */
        c->n = c->n > 1 ? c->n - 1 : 2;
    c->seed = rng_next(&r);
}

void tk_lab_fuzz_fcase_gen(const tk_lab_fuzz_params *p, int fa, int fb, int mode, uint64_t seed, int64_t index,
                           tk_lab_fuzz_fcase *x)
{
    /* a stream of its own ("f8"): the other cases' draws stay as they were */
    fuzz_rng r = { tk_lab_mix64(tk_lab_mix64(seed ^ 0x6638ull) + (uint64_t)index) };
    memset(x, 0, sizeof *x);
    x->seed = seed;
    x->index = index;
    tk_lab_f8 *f = &x->f;
    /* every draw is made whatever fa, fb and mode say, so they narrow a run without moving its other draws */
    const int dfa = (int)rng_below(&r, 2), dfb = (int)rng_below(&r, 2), dmode = TK_SCALE_TENSOR + (int)rng_below(&r, 3);
    f->fa = (tk_lab_fp8)(fa >= 0 ? fa : dfa);
    f->fb = (tk_lab_fp8)(fb >= 0 ? fb : dfb);
    f->scale_mode = mode ? mode : dmode;
    f->exact = (int)rng_below(&r, 2);
    tk_lab_case *c = &x->c;
    const int col = (int)rng_below(&r, 2);
    c->layout = col && f->scale_mode != TK_SCALE_BLOCK ? TK_COL_MAJOR : TK_ROW_MAJOR;   /* block: row-major alone */
    c->op_a = (tk_op)rng_below(&r, 2);
    c->op_b = (tk_op)rng_below(&r, 2);
    c->out = (tk_dtype)rng_below(&r, 2);
    c->pad = (int)rng_below(&r, 2);
    /* exact: integer sums times powers of two, alpha a power of two, no C read: exact in fp32 */
    static const float exact_alpha[] = { 1.0f, 2.0f, 0.5f, -1.0f };
    const float alpha = draw_alpha(&r, 0), beta = draw_beta(&r, 0), ealpha = exact_alpha[rng_below(&r, 4)];
    c->alpha = f->exact ? ealpha : alpha;
    c->beta = f->exact ? 0.0f : beta;
    draw_whole_dims(&r, p, c);
    if (f->scale_mode == TK_SCALE_BLOCK)   /* K a multiple of 128 (tilekit.h), at most 1024 */
        c->k = c->k > 1024 - 127 ? 1024 : (c->k + 127) / 128 * 128;
    c->seed = rng_next(&r);
}

static const char *const form_names[] = { "dense", "batched", "grouped", "epilogue", "fp8" };
#define NFORMS 5

int tk_lab_fuzz_parse_forms(const char *list, unsigned *forms, char *why, size_t len)
{
    *forms = 0;
    for (const char *at = list;; at++) {
        const size_t n = strcspn(at, ",");
        unsigned bit = 0;
        for (int i = 0; i < NFORMS; i++)
            if (n == strlen(form_names[i]) && !strncmp(at, form_names[i], n))
                bit = 1u << i;
        if (!bit) {
            snprintf(why, len, "--forms: '%.*s' in '%s' is not dense, batched, grouped, epilogue or fp8 (expected a "
                     "comma-separated list of them)", (int)n, at, list);
            return -1;
        }
        *forms |= bit;
        at += n;
        if (!*at)
            return 0;
    }
}

/* ---- options ---- */

void tk_lab_fuzz_defaults(tk_lab_fuzz_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->cases = TK_LAB_FUZZ_CASES;
    o->only_case = -1;
    o->gen.max_size = TK_LAB_FUZZ_MAX_SIZE;
    o->gen.max_volume = TK_LAB_FUZZ_MAX_VOLUME;
    o->log = stdout;
    o->forms = TK_LAB_FORM_ALL;
    o->fp8_a = o->fp8_b = -1;
}

static int in_registry(const char *name)
{
    tk_kernel_props p;
    for (int i = 0; i < tk_kernel_count(); i++)
        if (tk_kernel_get(i, &p) == TK_SUCCESS && !strcmp(p.name, name))
            return 1;
    return 0;
}

static int check_kernels(const char *const *k, char *why, size_t len)
{
    int n = 0;
    for (; k[n]; n++) {
        if (!strcmp(k[n], "cublas")) {
            snprintf(why, len, "--kernel: cublas is verify's yardstick, not a fuzz subject");
            return -1;
        }
        if (strcmp(k[n], "auto") && !in_registry(k[n])) {
            snprintf(why, len, "--kernel: unknown kernel '%s' (tilekit info lists them)", k[n]);
            return -1;
        }
    }
    if (n == 0 || n > TK_LAB_FUZZ_KERNELS) {
        snprintf(why, len, "--kernel: %d names (expected 1..%d)", n, TK_LAB_FUZZ_KERNELS);
        return -1;
    }
    return 0;
}

int tk_lab_fuzz_check(const tk_lab_fuzz_opts *o, char *why, size_t len)
{
    if (o->gen.max_size < 1 || o->gen.max_size > TK_LAB_FUZZ_MAX_SIZE) {
        snprintf(why, len, "--max-size: %lld is out of range (expected 1..%d)", (long long)o->gen.max_size,
                 TK_LAB_FUZZ_MAX_SIZE);
        return -1;
    }
    if (o->gen.max_volume < 1) {
        snprintf(why, len, "--max-volume: %lld is out of range (expected >= 1)", (long long)o->gen.max_volume);
        return -1;
    }
    if (o->only_case < -1) {
        snprintf(why, len, "--case: %lld is negative", (long long)o->only_case);
        return -1;
    }
    if (!o->forms || (o->forms & ~(unsigned)TK_LAB_FORM_ANY)) {
        snprintf(why, len, "--forms: no form (expected dense, batched, grouped, epilogue or fp8)");
        return -1;
    }
    if (o->only_case >= 0 && !o->only_many && !o->only_epi && !o->only_f8 && !(o->forms & TK_LAB_FORM_DENSE)) {
        snprintf(why, len, "--case %lld replays a dense case, which --forms leaves out (a batched or grouped case "
                 "is --case g%lld, an epilogue case --case e%lld, an FP8 case --case f%lld)", (long long)o->only_case,
                 (long long)o->only_case, (long long)o->only_case, (long long)o->only_case);
        return -1;
    }
    if (o->only_f8 && !(o->forms & TK_LAB_FORM_FP8)) {
        snprintf(why, len, "--case f%lld replays an FP8 case: add --forms ...,fp8 or --dtype", (long long)o->only_case);
        return -1;
    }
    if (o->fp8_a < -1 || o->fp8_a > TK_LAB_E5M2 || o->fp8_b < -1 || o->fp8_b > TK_LAB_E5M2) {
        snprintf(why, len, "--dtype: format %d is not e4m3 (%d) or e5m2 (%d)", o->fp8_a < -1 || o->fp8_a > 1 ? o->fp8_a
                 : o->fp8_b, TK_LAB_E4M3, TK_LAB_E5M2);
        return -1;
    }
    if (o->fp8_mode < 0 || o->fp8_mode > TK_SCALE_BLOCK) {
        snprintf(why, len, "--scale: mode %d is not tensor, row or block (1..%d)", o->fp8_mode, TK_SCALE_BLOCK);
        return -1;
    }
    if (o->only_epi && !(o->forms & TK_LAB_FORM_EPILOGUE)) {
        snprintf(why, len, "--case e%lld replays an epilogue case: add --forms ...,epilogue or --epilogue",
                 (long long)o->only_case);
        return -1;
    }
    if (o->epi_kind < 0 || o->epi_kind > TK_EPI_GATED_BACKWARD) {
        snprintf(why, len, "--epilogue: kind %d is not one of tilekit.h's (1..%d)", o->epi_kind,
                 TK_EPI_GATED_BACKWARD);
        return -1;
    }
    if (o->only_many && !(o->forms & (TK_LAB_FORM_BATCHED | TK_LAB_FORM_GROUPED))) {
        snprintf(why, len, "--case g%lld replays a batched or grouped case, which --forms leaves out",
                 (long long)o->only_case);
        return -1;
    }
    if (o->only_case == -1) {
        if (!isfinite(o->budget_s) || o->budget_s < 0) {
            snprintf(why, len, "--budget: %g is not a number of seconds > 0", o->budget_s);
            return -1;
        }
        if (o->budget_s > 0 && o->cases > 0) {
            snprintf(why, len, "--cases and --budget: give one or the other");
            return -1;
        }
        if (o->budget_s == 0 && o->cases < 1) {
            snprintf(why, len, "--cases: %lld is out of range (expected >= 1)", (long long)o->cases);
            return -1;
        }
    }
    return o->kernels ? check_kernels(o->kernels, why, len) : 0;
}

/* Appends to the string in buf, as far as it fits. */
static void appendf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t len, const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, len - used, fmt, ap);
    va_end(ap);
}

static void replay(const tk_lab_fuzz_opts *o, const char *prefix, int64_t index, const char *kernel, char *buf,
                   size_t len)
{
    snprintf(buf, len, "tilekit fuzz --seed %llu --case %s%lld --kernel %s", (unsigned long long)o->seed, prefix,
             (long long)index, kernel);
    /* the sizes shape every case, the forms a many case's kind: a replay
     * must draw with the same ones */
    if (o->gen.max_size != TK_LAB_FUZZ_MAX_SIZE)
        appendf(buf, len, " --max-size %lld", (long long)o->gen.max_size);
    if (o->gen.max_volume != TK_LAB_FUZZ_MAX_VOLUME)
        appendf(buf, len, " --max-volume %lld", (long long)o->gen.max_volume);
    if (o->forms != TK_LAB_FORM_ALL) {
        appendf(buf, len, " --forms ");
        for (int i = 0, n = 0; i < NFORMS; i++)
            if (o->forms & (1u << i))
                appendf(buf, len, "%s%s", n++ ? "," : "", form_names[i]);
    }
    if (o->epi_kind)
        appendf(buf, len, " --epilogue %s", tk_lab_epi_kind_name(o->epi_kind));
    /* an FP8 case's formats and mode: drawn, or these */
    if (o->fp8_a >= 0)
        appendf(buf, len, " --dtype %s", tk_lab_fp8_format_name((tk_lab_fp8)o->fp8_a));
    if (o->fp8_b >= 0 && o->fp8_b != o->fp8_a)
        appendf(buf, len, " --dtype-b %s", tk_lab_fp8_format_name((tk_lab_fp8)o->fp8_b));
    if (o->fp8_mode)
        appendf(buf, len, " --scale %s", tk_lab_scale_mode_name(o->fp8_mode));
}

void tk_lab_fuzz_replay(const tk_lab_fuzz_opts *o, int64_t index, const char *kernel, char *buf, size_t len)
{
    replay(o, "", index, kernel, buf, len);
}

void tk_lab_fuzz_replay_many(const tk_lab_fuzz_opts *o, int64_t index, const char *kernel, char *buf, size_t len)
{
    replay(o, "g", index, kernel, buf, len);
}

void tk_lab_fuzz_replay_epi(const tk_lab_fuzz_opts *o, int64_t index, const char *kernel, char *buf, size_t len)
{
    replay(o, "e", index, kernel, buf, len);
}

void tk_lab_fuzz_replay_f8(const tk_lab_fuzz_opts *o, int64_t index, const char *kernel, char *buf, size_t len)
{
    replay(o, "f", index, kernel, buf, len);
}

/* ---- the engine ---- */

#define FULL_MAX 65536                  /* C of at most this many elements is judged whole ... */
#define FULL_WORK (INT64_C(1) << 25)    /* ... when its reference costs at most this many multiply-adds */
#define EDGE_POINTS 512                 /* points of the last row, and of the last column, at most */
#define RANDOM_POINTS 512
#define POINTS_MAX FULL_MAX             /* >= 4 + 2 * EDGE_POINTS + RANDOM_POINTS */

typedef struct fuzz_ctx {
    tk_handle h;
    cudaStream_t stream;
    void *da, *db, *dc;                 /* device buffers; they only grow */
    void *ha, *hb;                      /* host copies of A and B */
    void *himg;                         /* C's buffer as each kernel gets it: C0 or NaN, sentinels around */
    void *hgot;                         /* C's buffer as a kernel left it */
    size_t cap_a, cap_b, cap_c;         /* bytes of each */
    int64_t *prow, *pcol;               /* the judged points of C and their reference */
    double *pwant, *ps;
    const char *names[TK_LAB_FUZZ_KERNELS];
    int nnames;
    tk_lab_verify *v;                   /* the batched, grouped and epilogue cases' (opened on the first) */
    tk_lab_gverify_result *gr;
} fuzz_ctx;

/* A case's buffers, in elements: A's and B's from their start; C's region
 * (off_c elements, then lines * ldc) between two guard bands. */
typedef struct case_bufs {
    size_t na, nb, nc;
    size_t esz;                         /* bytes of one element of C */
    size_t guard;                       /* elements in each guard band */
    size_t c_bytes;                     /* C's whole buffer, guards included */
} case_bufs;

static void case_bufs_of(const tk_lab_fuzz_case *c, case_bufs *b)
{
    int64_t lines, len;
    tk_lab_fuzz_extent(c, TK_LAB_FUZZ_A, &lines, &len);
    b->na = (size_t)c->off_a + (size_t)(lines * c->lda);
    tk_lab_fuzz_extent(c, TK_LAB_FUZZ_B, &lines, &len);
    b->nb = (size_t)c->off_b + (size_t)(lines * c->ldb);
    tk_lab_fuzz_extent(c, TK_LAB_FUZZ_C, &lines, &len);
    b->nc = (size_t)c->off_c + (size_t)(lines * c->ldc);
    b->esz = c->out == TK_F32 ? 4 : 2;
    b->guard = TK_LAB_FUZZ_GUARD_BYTES / b->esz;
    b->c_bytes = (2 * b->guard + b->nc) * b->esz;
}

static void subjects(const tk_lab_fuzz_opts *o, fuzz_ctx *x, tk_lab_fuzz_summary *s)
{
    tk_kernel_props p;
    if (o->kernels) {
        for (int i = 0; o->kernels[i] && x->nnames < TK_LAB_FUZZ_KERNELS; i++)
            x->names[x->nnames++] = o->kernels[i];
    } else {
        x->names[x->nnames++] = "auto";
        /* cuBLAS is the yardstick elsewhere, not a subject */
        for (int i = 0; i < tk_kernel_count() && x->nnames < TK_LAB_FUZZ_KERNELS; i++)
            if (tk_kernel_get(i, &p) == TK_SUCCESS && strcmp(p.name, "cublas"))
                x->names[x->nnames++] = p.name;
    }
    s->nkernels = x->nnames;
    for (int i = 0; i < x->nnames; i++)
        snprintf(s->kernel[i].name, sizeof s->kernel[i].name, "%s", x->names[i]);
}

static void ctx_close(fuzz_ctx *x)
{
    cudaFree(x->da); cudaFree(x->db); cudaFree(x->dc);
    free(x->ha); free(x->hb); free(x->himg); free(x->hgot);
    free(x->prow); free(x->pcol); free(x->pwant); free(x->ps);
    if (x->stream)
        cudaStreamDestroy(x->stream);
    tk_destroy(x->h);
    tk_lab_verify_close(x->v);
    free(x->gr);
}

static tk_status ctx_open(fuzz_ctx *x, char *why, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(why, len, "no CUDA device to fuzz on: %s", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return TK_ERR_NO_DEVICE;
    }
    tk_status st = tk_create(&x->h);
    if (st != TK_SUCCESS) {
        snprintf(why, len, "tk_create: %s", tk_last_error(NULL));
        return st;
    }
    if (*tk_last_error(NULL))   /* an unusable TILEKIT_TUNE file, ignored */
        fprintf(stderr, "tilekit: %s\n", tk_last_error(NULL));
    if ((e = cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        snprintf(why, len, "creating a stream: %s", cudaGetErrorString(e));
        return TK_ERR_CUDA;
    }
    x->prow = malloc(POINTS_MAX * sizeof *x->prow);
    x->pcol = malloc(POINTS_MAX * sizeof *x->pcol);
    x->pwant = malloc(POINTS_MAX * sizeof *x->pwant);
    x->ps = malloc(POINTS_MAX * sizeof *x->ps);
    if (!x->prow || !x->pcol || !x->pwant || !x->ps) {
        snprintf(why, len, "out of host memory");
        return TK_ERR_ALLOC;
    }
    return TK_SUCCESS;
}

/* Makes *dev and its host copies (host2 may be NULL) at least bytes big.
 * Buffers only grow, so a run allocates a few times, not once per case. */
static int grow(void **dev, void **host, void **host2, size_t *cap, size_t bytes)
{
    if (bytes <= *cap)
        return 0;
    cudaFree(*dev);
    free(*host);
    *dev = *host = NULL;
    if (host2) {
        free(*host2);
        *host2 = NULL;
    }
    *cap = 0;
    if (cudaMalloc(dev, bytes) != cudaSuccess) {
        *dev = NULL;
        /* not sticky, but the next kernel's launch check would report it */
        cudaGetLastError();
        return -1;
    }
    *host = malloc(bytes);
    if (host2)
        *host2 = malloc(bytes);
    if (!*host || (host2 && !*host2))
        return -1;
    *cap = bytes;
    return 0;
}

static cudaError_t fill(void *x, tk_dtype t, size_t n, uint64_t seed, int exact, cudaStream_t s)
{
    return (cudaError_t)(exact ? tk_lab_fill_int_device(x, t, n, seed, s) : tk_lab_fill_device(x, t, n, seed, s));
}

/* Everything in C's buffer that is not C gets the sentinel: the guard
 * bands, the offset's elements before C, each line's padding. */
static void image_sentinels(const tk_lab_fuzz_case *c, const case_bufs *b, char *img)
{
    /* a run of sentinels is one line of length 0 and leading dimension `count` */
    tk_lab_pad_fill(img, c->out, TK_ROW_MAJOR, 1, 0, (int64_t)(b->guard + (size_t)c->off_c));
    tk_lab_pad_fill(img + (b->guard + b->nc) * b->esz, c->out, TK_ROW_MAJOR, 1, 0, (int64_t)b->guard);
    tk_lab_pad_fill(img + (b->guard + (size_t)c->off_c) * b->esz, c->out, c->layout, c->m, c->n, c->ldc);
}

/* Inputs of the case, on the GPU and copied back, and C's image. The whole
 * of A's and B's buffers gets values, padding and offset included: a kernel
 * that reads those as data gets garbage, not zeros that could hide it. */
static tk_status prepare_case(fuzz_ctx *x, const tk_lab_fuzz_case *c, const case_bufs *b, char *why, size_t len)
{
    if (grow(&x->da, &x->ha, NULL, &x->cap_a, b->na * 2) || grow(&x->db, &x->hb, NULL, &x->cap_b, b->nb * 2) ||
        grow(&x->dc, &x->himg, &x->hgot, &x->cap_c, b->c_bytes)) {
        snprintf(why, len, "allocating %zu + %zu + %zu bytes", b->na * 2, b->nb * 2, b->c_bytes);
        return TK_ERR_ALLOC;
    }
    const uint64_t ds = tk_lab_mix64(c->data_seed);
    char *dreg = (char *)x->dc + b->guard * b->esz, *hreg = (char *)x->himg + b->guard * b->esz;
    cudaError_t e = fill(x->da, TK_BF16, b->na, ds ^ 0xa, c->exact, x->stream);
    if (!e) e = fill(x->db, TK_BF16, b->nb, ds ^ 0xb, c->exact, x->stream);
    if (!e && c->beta != 0.0f) e = fill(dreg, c->out, b->nc, ds ^ 0xc, c->exact, x->stream);
    if (!e) e = cudaMemcpyAsync(x->ha, x->da, b->na * 2, cudaMemcpyDeviceToHost, x->stream);
    if (!e) e = cudaMemcpyAsync(x->hb, x->db, b->nb * 2, cudaMemcpyDeviceToHost, x->stream);
    if (!e && c->beta != 0.0f) e = cudaMemcpyAsync(hreg, dreg, b->nc * b->esz, cudaMemcpyDeviceToHost, x->stream);
    if (!e) e = cudaStreamSynchronize(x->stream);
    if (e) {
        snprintf(why, len, "preparing the inputs: %s", cudaGetErrorString(e));
        return TK_ERR_CUDA;
    }
    if (c->beta == 0.0f)
        memset(hreg, 0xff, b->nc * b->esz);   /* all-ones bytes are NaN in both types: a read of C shows */
    image_sentinels(c, b, x->himg);
    return TK_SUCCESS;
}

static size_t add_point(fuzz_ctx *x, size_t t, int64_t i, int64_t j)
{
    x->prow[t] = i;
    x->pcol[t] = j;
    return t + 1;
}

/* The points judged against the reference: all of a small C; otherwise the
 * corners, the last row and the last column (where the edge tiles end;
 * strided to EDGE_POINTS each) and RANDOM_POINTS random ones. *full says
 * which. Returns their number. */
static size_t pick_points(fuzz_ctx *x, const tk_lab_fuzz_case *c, int *full)
{
    const int64_t m = c->m, n = c->n;
    size_t t = 0;
    *full = m * n <= FULL_MAX && m * n * c->k <= FULL_WORK;
    if (*full) {
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++)
                t = add_point(x, t, i, j);
        return t;
    }
    t = add_point(x, t, 0, 0);
    t = add_point(x, t, 0, n - 1);
    t = add_point(x, t, m - 1, 0);
    t = add_point(x, t, m - 1, n - 1);
    const int64_t sj = (n + EDGE_POINTS - 1) / EDGE_POINTS, si = (m + EDGE_POINTS - 1) / EDGE_POINTS;
    for (int64_t j = n - 1; j >= 0; j -= sj)
        t = add_point(x, t, m - 1, j);
    for (int64_t i = m - 1; i >= 0; i -= si)
        t = add_point(x, t, i, n - 1);
    uint64_t ctr = tk_lab_mix64(c->data_seed ^ 0x5a5a);
    for (int q = 0; q < RANDOM_POINTS; q++) {
        int64_t i = (int64_t)(tk_lab_mix64(++ctr) % (uint64_t)m);
        t = add_point(x, t, i, (int64_t)(tk_lab_mix64(++ctr) % (uint64_t)n));
    }
    return t;
}

/* What one kernel did wrong in one case. */
typedef struct verdict {
    int64_t wrong;                      /* judged points off the reference */
    int64_t wi, wj;                     /* the first of them */
    double got, want, tol;
    int64_t nonfinite, ni, nj;          /* non-finite elements anywhere in C; the first */
    int64_t before, before_at;          /* sentinels changed before C (guard, offset); the first, < 0 */
    int64_t after, after_at;            /* after C's last line; the first, >= 0 */
    int64_t pad, pad_row, pad_col;      /* in C's padding; the first */
} verdict;

/* The value a kernel must store in exact mode: the exact result (exact in
 * fp64, and in fp32 by the generator's choice of alpha and beta) rounded
 * to C's type, bf16 to nearest even. */
static double exact_value(double want, tk_dtype out)
{
    float f = (float)want;
    return out == TK_F32 ? (double)f : (double)tk_lab_bf16_to_f32(tk_lab_f32_to_bf16(f));
}

static void judge_points(const fuzz_ctx *x, const tk_lab_fuzz_case *c, const char *got_c, const char *c0, size_t np,
                         verdict *v)
{
    for (size_t t = 0; t < np; t++) {
        int64_t i = x->prow[t], j = x->pcol[t], idx = tk_lab_index(c->layout, c->ldc, i, j);
        double got = tk_lab_load(got_c, c->out, idx), want = x->pwant[t], tol = 0.0;
        int ok;
        if (c->exact) {
            want = exact_value(want, c->out);
            ok = got == want;   /* +0 and -0 compare equal: the sign of an exact zero depends on the order of the sum */
        } else {
            double c0v = c->beta != 0.0f ? tk_lab_load(c0, c->out, idx) : 0.0;
            tol = tk_lab_tolerance(c->k, c->alpha, c->beta, x->ps[t], c0v, want, c->out, 1);
            ok = isfinite(got) && fabs(got - want) <= tol;
        }
        if (!ok && v->wrong++ == 0) {
            v->wi = i;
            v->wj = j;
            v->got = got;
            v->want = want;
            v->tol = tol;
        }
    }
}

/* Inputs, alpha and beta are finite and bounded, so a non-finite element
 * anywhere in C (sampled or not) is one left unwritten (C starts as NaN
 * when beta == 0) or garbage. */
static void judge_finite(const tk_lab_fuzz_case *c, const char *got_c, verdict *v)
{
    int64_t lines, len;
    tk_lab_fuzz_extent(c, TK_LAB_FUZZ_C, &lines, &len);
    for (int64_t l = 0; l < lines; l++)
        for (int64_t e = 0; e < len; e++)
            if (!isfinite(tk_lab_load(got_c, c->out, l * c->ldc + e)) && v->nonfinite++ == 0) {
                v->ni = c->layout == TK_ROW_MAJOR ? l : e;
                v->nj = c->layout == TK_ROW_MAJOR ? e : l;
            }
}

static void judge_sentinels(const tk_lab_fuzz_case *c, const case_bufs *b, const char *got, verdict *v)
{
    int64_t row = 0, col = 0, lead = (int64_t)(b->guard + (size_t)c->off_c);
    v->before = tk_lab_pad_check(got, c->out, TK_ROW_MAJOR, 1, 0, lead, &row, &col);
    v->before_at = col - lead;
    col = 0;
    v->after = tk_lab_pad_check(got + (b->guard + b->nc) * b->esz, c->out, TK_ROW_MAJOR, 1, 0, (int64_t)b->guard,
                                &row, &col);
    v->after_at = col;
    v->pad = tk_lab_pad_check(got + (size_t)lead * b->esz, c->out, c->layout, c->m, c->n, c->ldc, &v->pad_row,
                              &v->pad_col);
}

/* The verdict in words ("" when the kernel did nothing wrong). */
static void describe(const tk_lab_fuzz_case *c, size_t np, int full, const verdict *v, char *buf, size_t len)
{
    buf[0] = '\0';
    if (v->wrong) {
        appendf(buf, len, "%lld of %zu %s points wrong, first (%lld, %lld): got %.9g want %.9g", (long long)v->wrong,
                np, full ? "(all)" : "sampled", (long long)v->wi, (long long)v->wj, v->got, v->want);
        if (c->exact)
            appendf(buf, len, " (exact)");
        else
            appendf(buf, len, " tol %.3g", v->tol);
    }
    if (v->nonfinite)
        appendf(buf, len, "%s%lld non-finite elements of C (unwritten?), first (%lld, %lld)", *buf ? "; " : "",
                (long long)v->nonfinite, (long long)v->ni, (long long)v->nj);
    if (v->before)
        appendf(buf, len, "%s%lld writes before C, first %lld elements before it", *buf ? "; " : "",
                (long long)v->before, (long long)-v->before_at);
    if (v->after)
        appendf(buf, len, "%s%lld writes after C's last line, first %lld elements past it", *buf ? "; " : "",
                (long long)v->after, (long long)v->after_at);
    if (v->pad)
        appendf(buf, len, "%s%lld writes into C's padding, first at (%lld, %lld) with ldc %lld", *buf ? "; " : "",
                (long long)v->pad, (long long)v->pad_row, (long long)v->pad_col, (long long)c->ldc);
}

/* One failure line, with the command that replays just this kernel-case. */
/* A failure of subject ki on case `id` ("17", "g4"): the counts, its line
 * on the log, and the entry kept for the summary (NULL once
 * TK_LAB_FUZZ_KEEP are), which the caller completes with the case. */
static tk_lab_fuzz_failure *note_failure(const tk_lab_fuzz_opts *o, tk_lab_fuzz_summary *s, int ki, const char *shown,
                                         const char *id, const char *cname, const char *what, const char *replay)
{
    s->kernel[ki].failed++;
    s->total.failed++;
    if (o->log) {
        fprintf(o->log, "FAIL %s case %s: %s: %s | replay: %s\n", shown, id, cname, what, replay);
        fflush(o->log);
    }
    if (s->nkept >= TK_LAB_FUZZ_KEEP)
        return NULL;
    tk_lab_fuzz_failure *f = &s->kept[s->nkept++];
    memset(f, 0, sizeof *f);
    snprintf(f->kernel, sizeof f->kernel, "%s", shown);
    snprintf(f->what, sizeof f->what, "%s", what);
    return f;
}

static void record_failure(fuzz_ctx *x, const tk_lab_fuzz_opts *o, tk_lab_fuzz_summary *s, const tk_lab_fuzz_case *c,
                           int ki, const tk_gemm_problem *p, const char *what)
{
    const char *name = x->names[ki];
    char shown[80], cname[192], replay[256], id[32];
    /* auto-dispatch's failure is the kernel's it ran */
    const char *ran = strcmp(name, "auto") ? NULL : tk_select_kernel(x->h, p);
    if (ran)
        snprintf(shown, sizeof shown, "%s -> %s", name, ran);
    else
        snprintf(shown, sizeof shown, "%s", name);
    tk_lab_fuzz_case_name(c, cname, sizeof cname);
    tk_lab_fuzz_replay(o, c->index, name, replay, sizeof replay);
    snprintf(id, sizeof id, "%lld", (long long)c->index);
    tk_lab_fuzz_failure *f = note_failure(o, s, ki, shown, id, cname, what, replay);
    if (f)
        f->c = *c;
}

/* Kernels named k0* and k1* are the seeds' simple ones (k01_naive: 4.7
 * TFLOP/s at 4096^3 on the H100, less with transposed operands), too slow
 * to run on every large case. */
static int is_slow(const char *name) { return name[0] == 'k' && (name[1] == '0' || name[1] == '1'); }

/* What kernel left in C's buffer (x->hgot), in words: "" when all is well. */
static void judge(const fuzz_ctx *x, const tk_lab_fuzz_case *c, const case_bufs *b, size_t np, int full, char *what,
                  size_t len)
{
    verdict v;
    memset(&v, 0, sizeof v);
    const size_t lead = (b->guard + (size_t)c->off_c) * b->esz;   /* bytes before C */
    const char *got = x->hgot;
    judge_points(x, c, got + lead, (const char *)x->himg + lead, np, &v);
    judge_finite(c, got + lead, &v);
    judge_sentinels(c, b, got, &v);
    describe(c, np, full, &v, what, len);
}

/* Runs kernel ki on the prepared case and judges it. Returns 0, or -1 when
 * a CUDA error ends the run (after one, the context may be lost). */
static int run_kernel(fuzz_ctx *x, const tk_lab_fuzz_opts *o, const tk_lab_fuzz_case *c, const case_bufs *b,
                      size_t np, int full, int ki, tk_lab_fuzz_summary *s)
{
    const char *name = x->names[ki];
    tk_lab_fuzz_stat *ks = &s->kernel[ki];
    tk_gemm_problem p;
    char what[TK_LAB_MSG_LEN] = "";
    tk_lab_fuzz_problem(c, x->da, x->db, (char *)x->dc + b->guard * b->esz, &p);
    if (is_slow(name) && c->m * c->n * c->k > TK_LAB_FUZZ_SLOW_VOLUME) {
        ks->capped++;
        s->total.capped++;
        return 0;
    }
    tk_status st = tk_kernel_supports(x->h, name, &p);
    /* a kernel may refuse a problem; auto-dispatch promises to run any (tilekit.h) */
    const int refused = st == TK_ERR_NOT_SUPPORTED || st == TK_ERR_ARCH_MISMATCH || st == TK_ERR_OUT_OF_RESOURCES;
    if (refused && strcmp(name, "auto")) {
        ks->skipped++;
        s->total.skipped++;
        return 0;
    }
    ks->checked++;
    s->total.checked++;
    ks->exact += c->exact;
    s->total.exact += c->exact;
    if (st != TK_SUCCESS) {
        snprintf(what, sizeof what, "tk_kernel_supports: %s", tk_last_error(x->h));
        record_failure(x, o, s, c, ki, &p, what);
        return 0;
    }
    cudaError_t e = cudaMemcpyAsync(x->dc, x->himg, b->c_bytes, cudaMemcpyHostToDevice, x->stream);
    if (!e && (st = tk_gemm_ex(x->h, &p, name, x->stream)) != TK_SUCCESS)
        snprintf(what, sizeof what, "tk_gemm_ex: %s", tk_last_error(x->h));
    if (!e) e = cudaMemcpyAsync(x->hgot, x->dc, b->c_bytes, cudaMemcpyDeviceToHost, x->stream);
    if (!e) e = cudaStreamSynchronize(x->stream);
    if (e) {
        snprintf(what, sizeof what, "CUDA error: %s (the run stops here)", cudaGetErrorString(e));
        snprintf(s->error, sizeof s->error, "case %lld, kernel %s: CUDA error: %s", (long long)c->index, name,
                 cudaGetErrorString(e));
        record_failure(x, o, s, c, ki, &p, what);
        return -1;
    }
    if (st == TK_SUCCESS)
        judge(x, c, b, np, full, what, sizeof what);
    if (what[0])
        record_failure(x, o, s, c, ki, &p, what);
    return 0;
}

static int64_t volume(const tk_lab_fuzz_case *c) { return c->m * c->n * c->k; }

/* One case on every subject. A status other than TK_SUCCESS ends the run,
 * with s->error saying why. */
static tk_status run_case(fuzz_ctx *x, const tk_lab_fuzz_opts *o, const tk_lab_fuzz_case *c, tk_lab_fuzz_summary *s)
{
    case_bufs b;
    case_bufs_of(c, &b);
    char why[TK_LAB_MSG_LEN / 2];
    tk_status st = prepare_case(x, c, &b, why, sizeof why);
    if (st != TK_SUCCESS) {
        snprintf(s->error, sizeof s->error, "case %lld: %s", (long long)c->index, why);
        return st;
    }
    int full;
    size_t np = pick_points(x, c, &full);
    tk_gemm_problem hp;
    tk_lab_fuzz_problem(c, x->ha, x->hb, (char *)x->himg + b.guard * b.esz, &hp);
    tk_lab_ref_points(&hp, np, x->prow, x->pcol, x->pwant, x->ps);
    s->cases++;
    if (s->largest.index < 0 || volume(c) > volume(&s->largest))
        s->largest = *c;
    for (int ki = 0; ki < x->nnames; ki++)
        if (run_kernel(x, o, c, &b, np, full, ki, s))
            return TK_ERR_CUDA;
    return TK_SUCCESS;
}

/* After a failure of case `id` on kernel `name`: a CUDA error may have
 * lost the context, so the run stops (TK_ERR_CUDA, s->error saying why), as
 * for a dense case. */
static tk_status stop_on_cuda_error(tk_lab_fuzz_summary *s, const char *id, const char *name)
{
    cudaError_t e = cudaDeviceSynchronize();
    if (e == cudaSuccess)
        return TK_SUCCESS;
    snprintf(s->error, sizeof s->error, "case %s, kernel %s: CUDA error: %s", id, name, cudaGetErrorString(e));
    return TK_ERR_CUDA;
}

/* What a batched or grouped verdict found wrong, in words ("" if nothing). */
static void describe_many(const tk_lab_gcase *g, const tk_lab_gverify_result *r, char *buf, size_t len)
{
    const char *unit = g->kind == TK_GROUP_ROWS || g->kind == TK_GROUP_K ? "group" : "product";
    buf[0] = '\0';
    if (r->outcome < 0 || r->outcome == 2) {   /* an error, or auto-dispatch refusing */
        appendf(buf, len, "%s: %s", r->outcome < 0 ? "error" : "refused", r->msg);
        return;
    }
    if (r->failed) {
        const tk_lab_gverdict *v = &r->group[r->worst];
        appendf(buf, len, "%d of %d %ss wrong, first %s %d (%lldx%lldx%lld): %lld of %lld checked off the fp64 "
                "reference (%lld non-finite), max_rel %.3g", r->failed, r->count, unit, unit, r->worst,
                (long long)v->m, (long long)v->n, (long long)v->k, (long long)(v->over + v->nonfinite),
                (long long)v->checked, (long long)v->nonfinite, v->max_rel);
    }
    if (r->untouched_writes)
        appendf(buf, len, "%s%lld writes where no %s owns C, first at %s", *buf ? "; " : "",
                (long long)r->untouched_writes, unit, r->first_write);
    if (r->group_error)
        appendf(buf, len, "%sgroup_error set, yet every offset is valid", *buf ? "; " : "");
}

/* The verify context of the batched, grouped and epilogue cases: cuBLAS off, the
 * fp64 reference judges (as the dense cases are judged). */
static tk_status open_verify(fuzz_ctx *x, char *why, size_t len)
{
    if (x->v)
        return TK_SUCCESS;
    tk_status st = tk_lab_verify_open(&x->v, why, len);
    if (st != TK_SUCCESS)
        return st;
    tk_lab_verify_set_cublas(x->v, 0);
    if (!(x->gr = malloc(sizeof *x->gr))) {
        snprintf(why, len, "out of host memory");
        return TK_ERR_ALLOC;
    }
    return TK_SUCCESS;
}

/* One subject's verdict on a case of the batched/grouped, epilogue or FP8
 * stream: what is wrong in words ("" if nothing; a refusal is "refused:
 * ..."). Returns 1 when the subject refused the case as a kernel may (a
 * skip, but for auto-dispatch, which must take every case), else 0. */
typedef int (*subject_check)(fuzz_ctx *x, const char *name, const void *kase, char *what, size_t len);

/* The case `index` of the stream with replay prefix `prefix` ("g", "e",
 * "f") on every subject: the counts, each failure's line with its replay,
 * the first failures kept with proto's case; a CUDA error ends the run (a
 * status other than TK_SUCCESS, s->error saying why). */
static tk_status run_subjects(fuzz_ctx *x, const tk_lab_fuzz_opts *o, tk_lab_fuzz_summary *s, const char *prefix,
                              int64_t index, const char *cname, subject_check check, const void *kase, int exact,
                              const tk_lab_fuzz_failure *proto)
{
    char what[TK_LAB_MSG_LEN], replay_cmd[256], id[32];
    snprintf(id, sizeof id, "%s%lld", prefix, (long long)index);
    for (int ki = 0; ki < x->nnames; ki++) {
        const char *name = x->names[ki];
        if (check(x, name, kase, what, sizeof what) && strcmp(name, "auto")) {
            s->kernel[ki].skipped++;
            s->total.skipped++;
            continue;
        }
        s->kernel[ki].checked++;
        s->total.checked++;
        s->kernel[ki].exact += exact;
        s->total.exact += exact;
        if (!what[0])
            continue;
        replay(o, prefix, index, name, replay_cmd, sizeof replay_cmd);
        tk_lab_fuzz_failure *kept = note_failure(o, s, ki, name, id, cname, what, replay_cmd);
        if (kept) {
            kept->many = proto->many, kept->epi = proto->epi, kept->fp8 = proto->fp8;
            kept->g = proto->g, kept->e = proto->e, kept->fc = proto->fc;
        }
        tk_status st = stop_on_cuda_error(s, id, name);
        if (st)
            return st;
    }
    return TK_SUCCESS;
}

/* verify's grouped path on a batched or grouped case; a kernel may refuse
 * a form, auto-dispatch runs every one (k01_naive at least). */
static int check_many(fuzz_ctx *x, const char *name, const void *kase, char *what, size_t len)
{
    const tk_lab_gcase *g = kase;
    tk_lab_gverify_run(x->v, name, g, x->gr);
    describe_many(g, x->gr, what, len);
    const int refused = x->gr->outcome == 2;
    tk_lab_gverify_free(x->gr);
    return refused;
}

/* The verify context of the batched, grouped, epilogue and FP8 cases ... */
static tk_status open_stream(fuzz_ctx *x, tk_lab_fuzz_summary *s, const char *prefix, int64_t index)
{
    char why[TK_LAB_MSG_LEN / 2];
    tk_status st = open_verify(x, why, sizeof why);
    if (st != TK_SUCCESS)
        snprintf(s->error, sizeof s->error, "case %s%lld: %s", prefix, (long long)index, why);
    return st;
}

/* Batched or grouped case `index` on every subject. */
static tk_status run_many(fuzz_ctx *x, const tk_lab_fuzz_opts *o, int64_t index, tk_lab_fuzz_summary *s)
{
    tk_lab_fuzz_failure proto;
    memset(&proto, 0, sizeof proto);
    tk_lab_gcase g;
    char cname[256];
    tk_lab_fuzz_gcase_gen(&o->gen, o->forms, o->seed, index, &proto.g);
    tk_lab_fuzz_gcase_view(&proto.g, &g);
    tk_status st = open_stream(x, s, "g", index);
    if (st != TK_SUCCESS)
        return st;
    s->many++;
    proto.many = 1;
    tk_lab_gcase_name(&g, cname, sizeof cname);
    return run_subjects(x, o, s, "g", index, cname, check_many, &g, 0, &proto);
}

/* What an epilogue verdict found wrong, in words ("" if nothing). */
static void describe_epi(const tk_lab_epi_result *r, char *buf, size_t len)
{
    buf[0] = '\0';
    if (r->outcome < 0 || r->outcome == 2) {   /* an error, or a refusal of a valid case */
        appendf(buf, len, "%s: %s", r->outcome < 0 ? "error" : "refused", r->msg);
        return;
    }
    const char *const names[] = { "D", "aux", "bias_grad" };
    const tk_lab_epi_cmp *const parts[] = { &r->d, &r->aux, &r->grad };
    for (int i = 0; i < 3; i++)
        if (parts[i]->over)
            appendf(buf, len, "%s%s: %lld of %lld off the fp64 reference, first (%lld, %lld): %.6g, want %.6g +- %.3g",
                    *buf ? "; " : "", names[i], (long long)parts[i]->over, (long long)parts[i]->checked,
                    (long long)parts[i]->bad_row, (long long)parts[i]->bad_col, parts[i]->bad_got,
                    parts[i]->bad_want, parts[i]->bad_tol);
    if (r->guard_writes)
        appendf(buf, len, "%s%lld writes where nothing may be written, first at %s", *buf ? "; " : "",
                (long long)r->guard_writes, r->guard_where);
}

/* verify --epilogue's check (fp64 reference of D, aux and bias_grad,
 * NaN-poisoned outputs, guard bands). A kernel without the case's epilogue
 * refuses it (TK_ERR_NOT_SUPPORTED: a skip); any other refusal of a valid
 * case (a TK_ERR_INVALID_VALUE) is a failure. */
static int check_epi(fuzz_ctx *x, const char *name, const void *kase, char *what, size_t len)
{
    const tk_lab_fuzz_ecase *f = kase;
    tk_lab_epi_result r;
    tk_lab_epi_verify_run(x->v, name, &f->c, &f->e, &r);
    describe_epi(&r, what, len);
    return r.outcome == 2 && r.status == TK_ERR_NOT_SUPPORTED;
}

/* Epilogue case `index` on every subject. */
static tk_status run_epi(fuzz_ctx *x, const tk_lab_fuzz_opts *o, int64_t index, tk_lab_fuzz_summary *s)
{
    tk_lab_fuzz_failure proto;
    memset(&proto, 0, sizeof proto);
    tk_lab_fuzz_ecase_gen(&o->gen, o->epi_kind, o->seed, index, &proto.e);
    char cname[256], epi[128];
    tk_status st = open_stream(x, s, "e", index);
    if (st != TK_SUCCESS)
        return st;
    s->epi++;
    proto.epi = 1;
    tk_lab_case_name(&proto.e.c, cname, sizeof cname);
    tk_lab_epi_name(&proto.e.e, epi, sizeof epi);
    appendf(cname, sizeof cname, " | %s", epi);
    return run_subjects(x, o, s, "e", index, cname, check_epi, &proto.e, 0, &proto);
}

/* verify --dtype's check (fp64 reference of the dequantized terms, C
 * NaN-poisoned between guard bands, untouched on a refusal). A kernel
 * without FP8 operands (or without this case's) refuses it
 * (TK_ERR_NOT_SUPPORTED: a skip); any other refusal of a valid case is a
 * failure. */
static int check_f8(fuzz_ctx *x, const char *name, const void *kase, char *what, size_t len)
{
    const tk_lab_fuzz_fcase *f = kase;
    tk_lab_f8_result r;
    tk_lab_f8_verify_run(x->v, name, &f->c, &f->f, &r);
    what[0] = '\0';
    if (r.outcome < 0 || (r.outcome == 2 && r.status != TK_ERR_NOT_SUPPORTED))
        appendf(what, len, "%s: %s", r.outcome < 0 ? "error" : "refused", r.msg);
    else if (r.outcome == 2 && !strcmp(name, "auto"))
        appendf(what, len, "refused: %s", r.msg);
    if (r.over)
        appendf(what, len, "%lld of %lld off the fp64 reference, first (%lld, %lld): %.9g, want %.9g +- %.3g",
                (long long)r.over, (long long)r.checked, (long long)r.bad_row, (long long)r.bad_col, r.bad_got,
                r.bad_want, r.bad_tol);
    if (r.guard_writes)
        appendf(what, len, "%s%lld writes outside C's M x N%s, first at %s", *what ? "; " : "",
                (long long)r.guard_writes, r.status ? " (refused)" : "", r.guard_where);
    return r.outcome == 2 && r.status == TK_ERR_NOT_SUPPORTED;
}

/* FP8 case `index` on every subject. */
static tk_status run_f8(fuzz_ctx *x, const tk_lab_fuzz_opts *o, int64_t index, tk_lab_fuzz_summary *s)
{
    tk_lab_fuzz_failure proto;
    memset(&proto, 0, sizeof proto);
    tk_lab_fuzz_fcase_gen(&o->gen, o->fp8_a, o->fp8_b, o->fp8_mode, o->seed, index, &proto.fc);
    char cname[256], fn[64];
    tk_status st = open_stream(x, s, "f", index);
    if (st != TK_SUCCESS)
        return st;
    s->fp8++;
    proto.fp8 = 1;
    tk_lab_case_name(&proto.fc.c, cname, sizeof cname);
    tk_lab_f8_name(&proto.fc.f, fn, sizeof fn);
    appendf(cname, sizeof cname, " | %s", fn);
    return run_subjects(x, o, s, "f", index, cname, check_f8, &proto.fc, proto.fc.f.exact, &proto);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Whether the run goes on to case i (the first case always runs). */
static int more_cases(const tk_lab_fuzz_opts *o, int64_t i, double t0)
{
    if (o->only_case >= 0)
        return i == o->only_case;
    if (o->budget_s > 0)
        return i == 0 || now_s() - t0 < o->budget_s;
    return i < o->cases;
}

tk_status tk_lab_fuzz_run(const tk_lab_fuzz_opts *o, tk_lab_fuzz_summary *s, char *why, size_t len)
{
    memset(s, 0, sizeof *s);
    s->largest.index = -1;
    if (tk_lab_fuzz_check(o, why, len))
        return TK_ERR_INVALID_VALUE;
    fuzz_ctx x;
    memset(&x, 0, sizeof x);
    subjects(o, &x, s);
    tk_status st = ctx_open(&x, why, len);
    if (st != TK_SUCCESS)
        snprintf(s->error, sizeof s->error, "%s", why);
    const double t0 = now_s();
    const int dense = o->forms & TK_LAB_FORM_DENSE, many = o->forms & (TK_LAB_FORM_BATCHED | TK_LAB_FORM_GROUPED);
    const int epi = o->forms & TK_LAB_FORM_EPILOGUE, f8 = o->forms & TK_LAB_FORM_FP8;
    for (int64_t i = o->only_case >= 0 ? o->only_case : 0; st == TK_SUCCESS && more_cases(o, i, t0); i++) {
        tk_lab_fuzz_case c;
        if (o->only_case >= 0 && o->only_f8) {   /* --case fI */
            st = run_f8(&x, o, i, s);
        } else if (o->only_case >= 0 && o->only_epi) {   /* --case eI */
            st = run_epi(&x, o, i, s);
        } else if (o->only_case >= 0 && o->only_many) {   /* --case gI */
            st = run_many(&x, o, i, s);
        } else if (dense) {
            tk_lab_fuzz_case_gen(&o->gen, o->seed, i, &c);
            st = run_case(&x, o, &c, s);
        }
        /* many case i / 4 after dense case i = 3, 7, ... (case i without dense cases) */
        if (st == TK_SUCCESS && many && o->only_case < 0 && (!dense || i % 4 == 3))
            st = run_many(&x, o, dense ? i / 4 : i, s);
        /* epilogue case i / 4 after dense case i = 1, 5, ... (case i without dense cases) */
        if (st == TK_SUCCESS && epi && o->only_case < 0 && (!dense || i % 4 == 1))
            st = run_epi(&x, o, dense ? i / 4 : i, s);
        /* FP8 case i / 4 after dense case i = 2, 6, ... (case i without dense cases) */
        if (st == TK_SUCCESS && f8 && o->only_case < 0 && (!dense || i % 4 == 2))
            st = run_f8(&x, o, dense ? i / 4 : i, s);
        if (st != TK_SUCCESS)
            snprintf(why, len, "%s", s->error);
    }
    s->seconds = now_s() - t0;
    ctx_close(&x);
    return st;
}

/* ---- the report ---- */

void tk_lab_fuzz_print_summary(FILE *f, const tk_lab_fuzz_opts *o, const tk_lab_fuzz_summary *s)
{
    fprintf(f, "%-24s %9s %9s %9s %9s %7s\n", "kernel", "checked", "exact", "skipped", "capped", "failed");
    for (int i = 0; i < s->nkernels; i++) {
        const tk_lab_fuzz_stat *k = &s->kernel[i];
        fprintf(f, "%-24s %9lld %9lld %9lld %9lld %7lld\n", k->name, (long long)k->checked, (long long)k->exact,
                (long long)k->skipped, (long long)k->capped, (long long)k->failed);
    }
    if (s->total.capped)
        fprintf(f, "fuzz: capped: the k0* and k1* kernels were left out of cases above M*N*K = 2^28 (too slow there)\n");
    if (s->error[0])
        fprintf(f, "fuzz: stopped early: %s\n", s->error);
    char largest[192] = "none";
    if (s->largest.index >= 0)
        snprintf(largest, sizeof largest, "%lldx%lldx%lld (case %lld)", (long long)s->largest.m,
                 (long long)s->largest.n, (long long)s->largest.k, (long long)s->largest.index);
    const tk_lab_fuzz_stat *t = &s->total;
    char many[96] = "";
    if (s->many)
        snprintf(many, sizeof many, " + %lld batched/grouped", (long long)s->many);
    if (s->epi)
        appendf(many, sizeof many, " + %lld epilogue", (long long)s->epi);
    if (s->fp8)
        appendf(many, sizeof many, " + %lld fp8", (long long)s->fp8);
    fprintf(f, "fuzz: seed %llu, %lld cases%s in %.1f s: %lld kernel-cases checked (%lld exact), %lld skipped "
               "(refused), %lld capped (slow), %lld failures; largest problem %s\n",
            (unsigned long long)o->seed, (long long)s->cases, many, s->seconds, (long long)t->checked,
            (long long)t->exact, (long long)t->skipped, (long long)t->capped, (long long)t->failed, largest);
}

static void json_stat(FILE *f, const tk_lab_fuzz_stat *k)
{
    fprintf(f, "\"checked\":%lld,\"exact\":%lld,\"skipped\":%lld,\"capped\":%lld,\"failed\":%lld",
            (long long)k->checked, (long long)k->exact, (long long)k->skipped, (long long)k->capped,
            (long long)k->failed);
}

static void json_case(FILE *f, const tk_lab_fuzz_case *c)
{
    char name[192];
    tk_lab_fuzz_case_name(c, name, sizeof name);
    fprintf(f, "\"case\":%lld,\"m\":%lld,\"n\":%lld,\"k\":%lld,\"problem\":", (long long)c->index,
            (long long)c->m, (long long)c->n, (long long)c->k);
    tk_lab_json_str(f, name);
}

/* A batched or grouped case: "many":true, its index in the many stream. */
static void json_gcase(FILE *f, const tk_lab_fuzz_gcase *x)
{
    char name[256];
    tk_lab_gcase g;
    tk_lab_fuzz_gcase_view(x, &g);
    tk_lab_gcase_name(&g, name, sizeof name);
    fprintf(f, "\"case\":%lld,\"many\":true,\"m\":%lld,\"n\":%lld,\"k\":%lld,\"problem\":", (long long)x->index,
            (long long)g.c.m, (long long)g.c.n, (long long)g.c.k);
    tk_lab_json_str(f, name);
}

/* An FP8 case: "fp8":true, its index in the FP8 stream. */
static void json_fcase(FILE *f, const tk_lab_fuzz_fcase *x)
{
    char name[256], fn[64];
    tk_lab_case_name(&x->c, name, sizeof name);
    tk_lab_f8_name(&x->f, fn, sizeof fn);
    appendf(name, sizeof name, " | %s", fn);
    fprintf(f, "\"case\":%lld,\"fp8\":true,\"m\":%lld,\"n\":%lld,\"k\":%lld,\"problem\":", (long long)x->index,
            (long long)x->c.m, (long long)x->c.n, (long long)x->c.k);
    tk_lab_json_str(f, name);
}

/* An epilogue case: "epilogue":true, its index in the epilogue stream. */
static void json_ecase(FILE *f, const tk_lab_fuzz_ecase *x)
{
    char name[256], epi[128];
    tk_lab_case_name(&x->c, name, sizeof name);
    tk_lab_epi_name(&x->e, epi, sizeof epi);
    appendf(name, sizeof name, " | %s", epi);
    fprintf(f, "\"case\":%lld,\"epilogue\":true,\"m\":%lld,\"n\":%lld,\"k\":%lld,\"problem\":",
            (long long)x->index, (long long)x->c.m, (long long)x->c.n, (long long)x->c.k);
    tk_lab_json_str(f, name);
}

int tk_lab_fuzz_write_json(FILE *f, const tk_lab_fuzz_opts *o, const tk_lab_fuzz_summary *s)
{
    fprintf(f, "{\"tool\":\"tilekit fuzz\",\"version\":\"%d.%d.%d\",\"seed\":%llu,\"max_size\":%lld,"
               "\"max_volume\":%lld,\"cases\":%lld,\"many_cases\":%lld,\"epilogue_cases\":%lld,"
               "\"fp8_cases\":%lld,\"seconds\":%.3f,",
            TILEKIT_VERSION_MAJOR, TILEKIT_VERSION_MINOR, TILEKIT_VERSION_PATCH, (unsigned long long)o->seed,
            (long long)o->gen.max_size, (long long)o->gen.max_volume, (long long)s->cases, (long long)s->many,
            (long long)s->epi, (long long)s->fp8, s->seconds);
    json_stat(f, &s->total);
    fputs(",\"largest\":", f);
    if (s->largest.index >= 0) {
        fputc('{', f);
        json_case(f, &s->largest);
        fputc('}', f);
    } else {
        fputs("null", f);
    }
    fputs(",\"error\":", f);
    if (s->error[0])
        tk_lab_json_str(f, s->error);
    else
        fputs("null", f);
    fputs(",\"kernels\":[", f);
    for (int i = 0; i < s->nkernels; i++) {
        fprintf(f, "%s\n {\"name\":", i ? "," : "");
        tk_lab_json_str(f, s->kernel[i].name);
        fputc(',', f);
        json_stat(f, &s->kernel[i]);
        fputc('}', f);
    }
    fputs("],\"failures\":[", f);
    for (int i = 0; i < s->nkept; i++) {
        const tk_lab_fuzz_failure *x = &s->kept[i];
        char replay[256], subject[80];
        /* the replay names the subject, "auto" for "auto -> kNN" */
        snprintf(subject, sizeof subject, "%s", x->kernel);
        subject[strcspn(subject, " ")] = '\0';
        if (x->fp8)
            tk_lab_fuzz_replay_f8(o, x->fc.index, subject, replay, sizeof replay);
        else if (x->epi)
            tk_lab_fuzz_replay_epi(o, x->e.index, subject, replay, sizeof replay);
        else if (x->many)
            tk_lab_fuzz_replay_many(o, x->g.index, subject, replay, sizeof replay);
        else
            tk_lab_fuzz_replay(o, x->c.index, subject, replay, sizeof replay);
        fprintf(f, "%s\n {\"kernel\":", i ? "," : "");
        tk_lab_json_str(f, x->kernel);
        fputc(',', f);
        if (x->fp8)
            json_fcase(f, &x->fc);
        else if (x->epi)
            json_ecase(f, &x->e);
        else if (x->many)
            json_gcase(f, &x->g);
        else
            json_case(f, &x->c);
        fputs(",\"what\":", f);
        tk_lab_json_str(f, x->what);
        fputs(",\"replay\":", f);
        tk_lab_json_str(f, replay);
        fputc('}', f);
    }
    fputs("\n]}\n", f);
    return ferror(f) ? -1 : 0;
}
