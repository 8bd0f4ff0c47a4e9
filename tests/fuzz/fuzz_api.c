/* fuzz_api.c - a CPU fuzz of the public C API (tilekit.h), built with
 * AddressSanitizer and UndefinedBehaviorSanitizer by `make asan-fuzz`, which
 * runs it (CI's api-fuzz step).
 *
 * Every public function is called with random and hostile arguments (issue
 * 37's too: workspaces, split-K, candidates, plans, CUDA errors, build
 * info): NULL
 * handles, problems and pointers; negative and huge sizes and leading
 * dimensions, around the int64 byte-span limit too; enum values out of
 * range; NULL, empty, unknown, garbage and very long kernel names; NaN and
 * infinite alpha and beta; bad kernel indices and status values; handles
 * created and destroyed in random order. Besides the absence of crashes and
 * sanitizer reports (any one aborts the run), each answer is checked
 * against an independent model of the argument rules, for a machine
 * without a GPU: an invalid argument gives TK_ERR_INVALID_VALUE with a
 * message that starts with the name of an argument that is in fact invalid;
 * a valid no-op (M or N == 0) succeeds; any other valid call gives
 * TK_ERR_NO_DEVICE with a message. Nothing ever returns TK_SUCCESS where it
 * must not, and no call touches the host memory posing as A, B or C.
 *
 * usage: fuzz_api [--seed S] [--iters N] [--seconds T]
 * Stops after N iterations or T seconds (default 30), whichever comes
 * first. The random stream depends on S alone, so a failure in iteration i
 * is replayed by --seed S --iters i+1, the command printed with it. */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "tilekit.h"

__extension__ typedef __int128 i128;   /* the model's exact arithmetic */

/* ---- the random stream (splitmix64) ---- */

static uint64_t rng_state;

static uint64_t next_u64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int pick(int n) { return (int)(next_u64() % (uint64_t)n); }

/* ---- run state and reporting ---- */

static unsigned long long seed = 1, iteration, calls, wrong_answers;

/* Every sanitizer report ends in abort(), caught by on_abort to name the
 * iteration to replay: UBSan's fatal reports exit without calling the
 * death callback (__sanitizer_set_death_callback) that ASan's call. */
const char *__asan_default_options(void) { return "abort_on_error=1"; }
const char *__ubsan_default_options(void) { return "abort_on_error=1:print_stacktrace=1"; }

/* Append a string and a number to *p: a signal handler may not printf. */
static void put_str(char **p, const char *s)
{
    while (*s)
        *(*p)++ = *s++;
}

static void put_u64(char **p, unsigned long long v)
{
    char d[20];
    int n = 0;
    do d[n++] = (char)('0' + v % 10); while (v /= 10);
    while (n)
        *(*p)++ = d[--n];
}

static void on_abort(int sig)
{
    char msg[160], *p = msg;
    put_str(&p, "fuzz_api: died in iteration ");
    put_u64(&p, iteration);
    put_str(&p, "; replay: fuzz_api --seed ");
    put_u64(&p, seed);
    put_str(&p, " --iters ");
    put_u64(&p, iteration + 1);
    put_str(&p, "\n");
    ssize_t written = write(STDERR_FILENO, msg, (size_t)(p - msg));
    (void)written;   /* nothing to do about a failure while dying */
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Records a wrong answer; the first few are printed with their replay. */
static void wrong(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void wrong(const char *fmt, ...)
{
    if (wrong_answers++ >= 20)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fuzz_api: iteration %llu: ", iteration);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (replay: fuzz_api --seed %llu --iters %llu)\n", seed, iteration + 1);
    va_end(ap);
}

/* ---- hostile values ---- */

#define P2(n) (INT64_C(1) << (n))

static int64_t hostile_i64(void)
{
    static const int64_t edge[] = {
        0, 1, 2, 7, 8, 9, 63, 64, 65, 4095, 4096, 4097, INT32_MAX, P2(31), P2(32), P2(32) + 1,
        3037000499, 3037000500,   /* around sqrt(2^63) */
        P2(53), P2(59) - 1, P2(59), P2(60) - 1, P2(60), P2(61) - 1, P2(61), P2(62) - 2, P2(62) - 1, P2(62),
        P2(62) + 1, INT64_MAX / 3, INT64_MAX - 1, INT64_MAX, -1, -2, -4096, INT32_MIN, INT64_MIN, INT64_MIN + 1,
    };
    switch (pick(4)) {
    case 0: return edge[pick(sizeof edge / sizeof edge[0])];
    case 1: return (int64_t)next_u64();
    case 2: return P2(pick(63)) + pick(5) - 2;   /* a power of two, give or take 2 */
    default: return -(int64_t)(next_u64() >> 1);
    }
}

/* A size of a valid problem: mostly small, sometimes 0 (a no-op) or larger. */
static int64_t small_dim(void)
{
    int r = pick(16);
    return r == 0 ? 0 : r == 1 ? 1 + pick(5000) : 1 + pick(64);
}

static float random_float(void)
{
    static const float edge[] = { 0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1e-45f, 1.17549435e-38f, 3.40282347e38f };
    uint32_t bits;
    float f;
    switch (pick(6)) {
    case 0: return NAN;
    case 1: return pick(2) ? INFINITY : -INFINITY;
    case 2:
        bits = (uint32_t)next_u64();
        memcpy(&f, &bits, sizeof f);
        return f;
    default: return edge[pick(sizeof edge / sizeof edge[0])];
    }
}

/* An enum's value: mostly valid (0 or 1), sometimes anything. */
static int random_enum(void)
{
    static const int edge[] = { 2, 3, -1, 255, 256, INT32_MAX, INT32_MIN };
    int r = pick(12);
    if (r < 10) return r & 1;
    return r == 10 ? edge[pick(sizeof edge / sizeof edge[0])] : (int)next_u64();
}

/* Host memory posing as A, B or C: no call may touch it (there is no GPU),
 * so a write shows up in the sentinel and a read past it in ASan. */
#define HOST_BYTES 64
static unsigned char *host_buf;

static int host_intact(void)
{
    for (int i = 0; i < HOST_BYTES; i++)
        if (host_buf[i] != 0xA5)
            return 0;
    return 1;
}

/* Stand-ins for device pointers, never dereferenced: aligned, 2-byte
 * aligned, odd, near the top of the address space, host memory, NULL. */
static void *random_pointer(void)
{
    static const uintptr_t fake[] = { 0x100000, 0x100002, 0x100001, UINTPTR_MAX - 15 };
    int r = pick(8);
    if (r == 0) return NULL;
    if (r == 1) return host_buf;
    return (void *)fake[r % 4];
}

/* ---- kernel names ---- */

#define MAX_NAMES 64
static const char *registry[MAX_NAMES];   /* from tk_kernel_get */
static int nregistry;
static char long_name[100001];            /* a registry name, then 'x' to 100000 characters */

static int kernel_valid(const char *name)
{
    if (!name || !*name || !strcmp(name, "auto"))
        return 1;
    for (int i = 0; i < nregistry; i++)
        if (!strcmp(name, registry[i]))
            return 1;
    return 0;
}

/* NULL, "", "auto", a registry name, or a hostile one; garbage goes to buf. */
static const char *random_kernel(char *buf, size_t len)
{
    static const char *const hostile[] = {
        "AUTO", "auto ", " auto", "Auto", "k01_naive\n", " k01_naive", "k01_naive,cublas", "k99_missing",
        "cublas\x01", "%s%s%s%n", "%99999999999d", "all", "k01", "\xff\xfe", "../../etc/passwd",
    };
    switch (pick(8)) {
    case 0: return NULL;
    case 1: return pick(2) ? "" : "auto";
    case 2: case 3: return registry[pick(nregistry)];
    case 4: return hostile[pick(sizeof hostile / sizeof hostile[0])];
    case 5: return long_name;
    case 6: {   /* a registry name cut short or extended by one character */
        const char *r = registry[pick(nregistry)];
        size_t n = strlen(r);
        snprintf(buf, len, "%.*s%s", (int)(pick(2) ? n - 1 : n), r, pick(2) ? "x" : "");
        return buf;
    }
    default: {   /* 1..40 random non-zero bytes */
        size_t n = 1 + (size_t)pick(40);
        for (size_t i = 0; i < n && i + 1 < len; i++)
            buf[i] = (char)(1 + pick(255));
        buf[n < len ? n : len - 1] = '\0';
        return buf;
    }
    }
}

/* ---- the model of the argument rules ---- */

/* What a call must answer: the invalid arguments (the message must start
 * with one of their names), and whether the problem is a no-op. */
typedef struct expect {
    const char *bad[16];
    int nbad;
    int noop;
} expect;

static void flag(expect *e, const char *name) { e->bad[e->nbad++] = name; }

/* op(X) = r x c is stored r x c (op N) or c x r (op T): as `lines` lines
 * (rows in row-major) of `len` elements each. */
static void line_shape(tk_layout layout, int op, int64_t r, int64_t c, int64_t *lines, int64_t *len)
{
    int64_t sr = op == TK_OP_N ? r : c, sc = op == TK_OP_N ? c : r;
    *lines = layout == TK_ROW_MAJOR ? sr : sc;
    *len = layout == TK_ROW_MAJOR ? sc : sr;
}

/* One stored matrix: op(X) is r x c; refused when its leading dimension is
 * below max(1, line length), when its last byte lies past INT64_MAX, when
 * (used) its pointer is NULL, or when its pointer is not a multiple of the
 * element size (used or not). Computed exactly in 128 bits. */
static void model_matrix(expect *e, const char *what, const char *ldname, tk_layout layout, int op, int64_t r,
                         int64_t c, int64_t ld, int esz, const void *ptr, int used)
{
    int64_t lines, len;
    line_shape(layout, op, r, c, &lines, &len);
    i128 span = lines && len ? ((i128)lines - 1) * ld + len : 0;
    if (ld < (len > 1 ? len : 1) || span > INT64_MAX / esz)   /* span * esz > INT64_MAX */
        flag(e, ldname);
    if ((used && !ptr) || (uintptr_t)ptr % (uintptr_t)esz)
        flag(e, what);
}

static void model_problem(const tk_gemm_problem *p, int need_ptrs, expect *e)
{
    int enums_ok = 1, dims_ok = 1;
    if (p->layout != TK_ROW_MAJOR && p->layout != TK_COL_MAJOR) { flag(e, "layout"); enums_ok = 0; }
    if (p->op_a != TK_OP_N && p->op_a != TK_OP_T) { flag(e, "op_a"); enums_ok = 0; }
    if (p->op_b != TK_OP_N && p->op_b != TK_OP_T) { flag(e, "op_b"); enums_ok = 0; }
    if (p->c_type != TK_F32 && p->c_type != TK_BF16) { flag(e, "c_type"); enums_ok = 0; }
    if (p->m < 0) { flag(e, "m"); dims_ok = 0; }
    if (p->n < 0) { flag(e, "n"); dims_ok = 0; }
    if (p->k < 0) { flag(e, "k"); dims_ok = 0; }
    e->noop = p->m == 0 || p->n == 0;
    if (!enums_ok || !dims_ok)
        return;   /* the matrices' shapes are undefined */
    int mn = need_ptrs && p->m > 0 && p->n > 0, mnk = mn && p->k > 0;
    model_matrix(e, "A", "lda", p->layout, p->op_a, p->m, p->k, p->lda, 2, p->a, mnk);
    model_matrix(e, "B", "ldb", p->layout, p->op_b, p->k, p->n, p->ldb, 2, p->b, mnk);
    model_matrix(e, "C", "ldc", p->layout, TK_OP_N, p->m, p->n, p->ldc, p->c_type == TK_F32 ? 4 : 2, p->c, mn);
}

/* ---- random problems ---- */

/* The smallest leading dimension of op(X) = r x c (as the model has it). */
static int64_t min_ld(tk_layout layout, int op, int64_t r, int64_t c)
{
    int64_t lines, len;
    line_shape(layout, op, r, c, &lines, &len);
    return len > 1 ? len : 1;
}

/* a + d for a small d, held inside int64 */
static int64_t nudge(int64_t a, int d)
{
    return d > 0 && a > INT64_MAX - d ? INT64_MAX : d < 0 && a < INT64_MIN - d ? INT64_MIN : a + d;
}

/* A leading dimension near the current one (ld), or anything. */
static int64_t random_ld(int64_t ld)
{
    switch (pick(8)) {
    case 0: case 1: case 2: return ld;
    case 3: return nudge(ld, pick(16));
    case 4: return nudge(ld, -1 - pick(2));
    case 5: return INT64_MAX - pick(2);
    default: return hostile_i64();
    }
}

/* A leading dimension that puts X's last byte just below, at or just past
 * INT64_MAX: (lines - 1) * ld + len = INT64_MAX / esz, give or take. */
static int64_t span_edge_ld(int64_t lines, int64_t len, int esz)
{
    if (lines < 2 || len < 1 || len > INT64_MAX / esz)
        return len;
    return (INT64_MAX / esz - len) / (lines - 1) + pick(3) - 1;
}

static void span_edge(tk_gemm_problem *p)
{
    int64_t lines, len;
    switch (pick(3)) {
    case 0:
        line_shape(p->layout, p->op_a, p->m, p->k, &lines, &len);
        p->lda = span_edge_ld(lines, len, 2);
        break;
    case 1:
        line_shape(p->layout, p->op_b, p->k, p->n, &lines, &len);
        p->ldb = span_edge_ld(lines, len, 2);
        break;
    default:
        line_shape(p->layout, TK_OP_N, p->m, p->n, &lines, &len);
        p->ldc = span_edge_ld(lines, len, p->c_type == TK_F32 ? 4 : 2);
    }
}

/* One size set to a power of two near the limits, the leading dimensions
 * left minimal: spans grow through the sizes rather than the strides. */
static void big_size(tk_gemm_problem *p)
{
    int64_t v = P2(20 + pick(43)) + pick(3) - 1;
    int w = pick(3);
    if (w == 0) p->m = v; else if (w == 1) p->n = v; else p->k = v;
    p->lda = min_ld(p->layout, p->op_a, p->m, p->k);
    p->ldb = min_ld(p->layout, p->op_b, p->k, p->n);
    p->ldc = min_ld(p->layout, TK_OP_N, p->m, p->n);
}

static void mutate(tk_gemm_problem *p)
{
    switch (pick(12)) {
    case 0: p->layout = (tk_layout)random_enum(); break;
    case 1: if (pick(2)) p->op_a = (tk_op)random_enum(); else p->op_b = (tk_op)random_enum(); break;
    case 2: p->c_type = (tk_dtype)random_enum(); break;
    case 3: p->m = hostile_i64(); break;
    case 4: p->n = hostile_i64(); break;
    case 5: p->k = hostile_i64(); break;
    case 6: p->lda = random_ld(p->lda); break;
    case 7: p->ldb = random_ld(p->ldb); break;
    case 8: p->ldc = random_ld(p->ldc); break;
    case 9: span_edge(p); break;
    case 10: big_size(p); break;
    default: { int w = pick(3); if (w == 0) p->a = NULL; else if (w == 1) p->b = NULL; else p->c = NULL; }
    }
}

/* A valid problem of random shape, then up to three random mutations. */
static tk_gemm_problem random_problem(void)
{
    tk_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.layout = (tk_layout)pick(2);
    p.op_a = (tk_op)pick(2);
    p.op_b = (tk_op)pick(2);
    p.c_type = (tk_dtype)pick(2);
    p.m = small_dim();
    p.n = small_dim();
    p.k = small_dim();
    p.alpha = random_float();
    p.beta = random_float();
    p.a = random_pointer();
    p.b = random_pointer();
    p.c = random_pointer();
    p.lda = min_ld(p.layout, p.op_a, p.m, p.k) + (pick(4) ? 0 : pick(9));
    p.ldb = min_ld(p.layout, p.op_b, p.k, p.n) + (pick(4) ? 0 : pick(9));
    p.ldc = min_ld(p.layout, TK_OP_N, p.m, p.n) + (pick(4) ? 0 : pick(9));
    for (int i = pick(4); i > 0; i--)
        mutate(&p);
    return p;
}

/* ---- checking the answers ---- */

static void describe(const tk_gemm_problem *p, char *buf, size_t len)
{
    snprintf(buf, len,
             "{layout %d, op_a %d, op_b %d, m %lld, n %lld, k %lld, alpha %g, beta %g, a %p, lda %lld, b %p, "
             "ldb %lld, c %p, ldc %lld, c_type %d}",
             (int)p->layout, (int)p->op_a, (int)p->op_b, (long long)p->m, (long long)p->n, (long long)p->k,
             (double)p->alpha, (double)p->beta, p->a, (long long)p->lda, p->b, (long long)p->ldb, p->c,
             (long long)p->ldc, (int)p->c_type);
}

/* 1 when msg starts with "NAME:" for one of e's invalid arguments. */
static int names_bad_arg(const char *msg, const expect *e)
{
    for (int i = 0; i < e->nbad; i++) {
        size_t n = strlen(e->bad[i]);
        if (!strncmp(msg, e->bad[i], n) && msg[n] == ':')
            return 1;
    }
    return 0;
}

/* Checks status got (of a call on handle h) against the model: want is
 * what a valid call answers. what: the call and its arguments. */
static void check(const char *what, tk_status got, tk_status want, const expect *e, tk_handle h)
{
    calls += 2;
    const char *msg = tk_last_error(h), *thread_msg = tk_last_error(NULL);
    if (!msg || !thread_msg) {
        wrong("%s: tk_last_error returned NULL", what);
        return;
    }
    if (e->nbad)
        want = TK_ERR_INVALID_VALUE;
    if (got != want) {
        wrong("%s: got %s, want %s; message '%s'", what, tk_status_string(got), tk_status_string(want), msg);
        return;
    }
    if (got == TK_SUCCESS) {   /* a success clears its handle's message (not the thread's) */
        if (h && *msg)
            wrong("%s: succeeded with the message '%s' left on the handle", what, msg);
        return;
    }
    if (strcmp(msg, thread_msg))
        wrong("%s: the handle's message '%s' differs from the thread's '%s'", what, msg, thread_msg);
    if (got == TK_ERR_INVALID_VALUE && !names_bad_arg(msg, e)) {
        char names[256] = "";
        for (int i = 0; i < e->nbad; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", e->bad[i]);
        wrong("%s: message '%s' does not start with an invalid argument's name (%s)", what, msg, names);
    } else if (!*msg)
        wrong("%s: %s with an empty message", what, tk_status_string(got));
}

/* The model of a call on handle h, problem p (NULL allowed) and a kernel
 * name: e flags a NULL handle and p's invalid arguments (model_problem,
 * need_ptrs as there), ek the same and an invalid kernel name; d[len]
 * gets p described, or "NULL". */
static void model_call(tk_handle h, const tk_gemm_problem *p, int need_ptrs, const char *kernel, expect *e,
                       expect *ek, char *d, size_t len)
{
    *e = (expect){ .nbad = 0 };
    snprintf(d, len, "NULL");
    if (!h)
        flag(e, "h");
    if (p) {
        model_problem(p, need_ptrs, e);
        describe(p, d, len);
    } else
        flag(e, "problem");
    *ek = *e;
    if (!kernel_valid(kernel))
        flag(ek, "kernel");
}

/* tk_gemm_ex and tk_gemm on p (p == NULL: the former only). */
static void fuzz_gemm(tk_handle h, const tk_gemm_problem *p, const char *kernel)
{
    char what[1024], d[512];
    expect without_kernel, e;   /* both calls take the kernel name */
    model_call(h, p, 1, kernel, &without_kernel, &e, d, sizeof d);
    tk_status want = p && e.noop ? TK_SUCCESS : TK_ERR_NO_DEVICE;
    void *stream = pick(4) ? NULL : (void *)(uintptr_t)0xdead0;   /* never used without a GPU */
    snprintf(what, sizeof what, "tk_gemm_ex(%s, %s, kernel %.40s, stream %p)", h ? "h" : "NULL", d,
             kernel ? kernel : "NULL", stream);
    calls++;
    check(what, tk_gemm_ex(h, p, kernel, stream), want, &e, h);
    if (!p)
        return;
    snprintf(what, sizeof what, "tk_gemm(%s, %s, kernel %.40s, stream %p)", h ? "h" : "NULL", d,
             kernel ? kernel : "NULL", stream);
    calls++;
    check(what, tk_gemm(h, p->layout, p->op_a, p->op_b, p->m, p->n, p->k, p->alpha, p->a, p->lda, p->b, p->ldb,
                        p->beta, p->c, p->c_type, p->ldc, kernel, stream),
          want, &e, h);
}

/* Introspection: pointers may be NULL; nothing succeeds but a no-op, and
 * tk_select_kernel names nothing without a GPU. */
static void fuzz_introspection(tk_handle h, const tk_gemm_problem *p, const char *kernel)
{
    char what[1024], d[512];
    expect e, ek;
    model_call(h, p, 0, kernel, &e, &ek, d, sizeof d);
    snprintf(what, sizeof what, "tk_kernel_supports(%s, kernel %.40s, %s)", h ? "h" : "NULL",
             kernel ? kernel : "NULL", d);
    calls++;
    check(what, tk_kernel_supports(h, kernel, p), p && ek.noop ? TK_SUCCESS : TK_ERR_NO_DEVICE, &ek, h);
    snprintf(what, sizeof what, "tk_select_kernel(%s, %s)", h ? "h" : "NULL", d);
    calls++;
    const char *name = tk_select_kernel(h, p);
    if (name)
        wrong("%s: returned '%s' without a GPU", what, name);
    else   /* as a status: the refusal it must have recorded */
        check(what, e.nbad ? TK_ERR_INVALID_VALUE : TK_ERR_NO_DEVICE, TK_ERR_NO_DEVICE, &e, h);
}

static void fuzz_registry(void)
{
    static const int edge[] = { -1, INT32_MIN, INT32_MAX, 64, 65, 1000 };
    int n = tk_kernel_count(), index;
    switch (pick(3)) {
    case 0: index = pick(n); break;
    case 1: index = n + pick(2) - 1; break;
    default: index = pick(2) ? edge[pick(sizeof edge / sizeof edge[0])] : (int)next_u64();
    }
    tk_kernel_props props, *out = pick(8) ? &props : NULL;
    expect e = { .nbad = 0 };
    if (!out)
        flag(&e, "out");
    if (index < 0 || index >= n)
        flag(&e, "index");
    char what[64];
    snprintf(what, sizeof what, "tk_kernel_get(%d, %s)", index, out ? "&props" : "NULL");
    calls++;
    tk_status st = tk_kernel_get(index, out);
    check(what, st, TK_SUCCESS, &e, NULL);
    if (st == TK_SUCCESS && (!props.name || strcmp(props.name, registry[index]) || !props.description ||
                             !*props.description || props.min_sm < 80 || props.bm < 0 || props.bn < 0))
        wrong("%s: properties differ from the first call's, or are empty", what);
}

static void fuzz_status_and_version(void)
{
    int s = pick(2) ? pick(12) - 1 : (int)next_u64();
    calls += 3;
    const char *str = tk_status_string((tk_status)s);
    if (!str || strncmp(str, "TK_", 3))
        wrong("tk_status_string(%d) = '%s' (expected 'TK_...')", s, str ? str : "NULL");
    else if ((s < TK_SUCCESS || s > TK_ERR_COMM) && !strstr(str, "unknown"))
        wrong("tk_status_string(%d) = '%s' does not say unknown", s, str);
    if (tk_version() != TILEKIT_VERSION)
        wrong("tk_version() = %d, header %d", tk_version(), TILEKIT_VERSION);
    if (tk_kernel_count() != nregistry)
        wrong("tk_kernel_count() = %d, was %d", tk_kernel_count(), nregistry);
}

/* ---- issue 37: workspaces, split-K, candidates, plans, CUDA errors, build info ---- */

static size_t hostile_size(void)
{
    return pick(2) ? (size_t)hostile_i64() : (size_t)pick(1 << 20);
}

/* The settings: each succeeds on a handle (no device needed) unless an
 * argument is invalid. A caller workspace set here (fake memory) is never
 * touched: every call that could use one stops at NO_DEVICE first. */
static void fuzz_settings(tk_handle h)
{
    char what[160];
    expect e = { .nbad = 0 };
    if (!h)
        flag(&e, "h");
    switch (pick(6)) {
    case 0: {
        void *ptr = pick(4) ? random_pointer() : NULL;
        size_t bytes = ptr || pick(2) ? hostile_size() : 0;
        if (h && !ptr && bytes)
            flag(&e, "ptr");
        if (h && (uintptr_t)ptr % 256)
            flag(&e, "ptr");
        snprintf(what, sizeof what, "tk_set_workspace(%s, %p, %zu)", h ? "h" : "NULL", ptr, bytes);
        calls++;
        check(what, tk_set_workspace(h, ptr, bytes), TK_SUCCESS, &e, h);
        break;
    }
    case 1: {
        size_t bytes = pick(4) ? hostile_size() : TK_WORKSPACE_UNLIMITED;
        snprintf(what, sizeof what, "tk_set_workspace_limit(%s, %zu)", h ? "h" : "NULL", bytes);
        calls++;
        check(what, tk_set_workspace_limit(h, bytes), TK_SUCCESS, &e, h);
        break;
    }
    case 2: {
        int mode = random_enum();
        if (h && mode != TK_SPLIT_K_AUTO && mode != TK_SPLIT_K_NEVER)
            flag(&e, "mode");
        snprintf(what, sizeof what, "tk_set_split_k(%s, %d)", h ? "h" : "NULL", mode);
        calls++;
        check(what, tk_set_split_k(h, (tk_split_k)mode), TK_SUCCESS, &e, h);
        break;
    }
    case 3: {   /* nothing is held without a device: nothing to do */
        void *stream = pick(2) ? NULL : (void *)(uintptr_t)0xdead0;
        snprintf(what, sizeof what, "tk_workspace_release(%s, %p)", h ? "h" : "NULL", stream);
        calls++;
        check(what, tk_workspace_release(h, stream), TK_SUCCESS, &e, h);
        break;
    }
    case 4: {
        tk_handle_info info = TK_HANDLE_INFO_INIT, *out = pick(8) ? &info : NULL;
        if (out && !pick(4))
            info.size = (size_t)pick((int)sizeof info + 1);
        if (h && !out)
            flag(&e, "out");
        else if (h && info.size < offsetof(tk_handle_info, split_k) + sizeof(tk_split_k))
            flag(&e, "out->size");
        snprintf(what, sizeof what, "tk_get_handle_info(%s, %s, size %zu)", h ? "h" : "NULL", out ? "&info" : "NULL",
                 info.size);
        calls++;
        tk_status st = tk_get_handle_info(h, out);
        check(what, st, TK_SUCCESS, &e, h);
        if (st == TK_SUCCESS && info.size == sizeof info && (info.device != -1 || info.sm != 0))
            wrong("%s: device %d, sm %d without a GPU", what, info.device, info.sm);
        break;
    }
    default: {   /* the thread's (NULL) or h's: nothing behind any failure without a GPU */
        tk_cuda_error ce = TK_CUDA_ERROR_INIT, *out = pick(8) ? &ce : NULL;
        if (out && !pick(4))
            ce.size = (size_t)pick((int)sizeof ce + 1);
        expect ee = { .nbad = 0 };
        if (!out)
            flag(&ee, "out");
        else if (ce.size < offsetof(tk_cuda_error, cublas_name) + sizeof(const char *))
            flag(&ee, "out->size");
        snprintf(what, sizeof what, "tk_last_cuda_error(%s, %s, size %zu)", h ? "h" : "NULL", out ? "&e" : "NULL",
                 ce.size);
        calls++;
        tk_status st = tk_last_cuda_error(h, out);
        check(what, st, TK_SUCCESS, &ee, NULL);   /* recorded on the thread alone */
        if (st == TK_SUCCESS && ce.size == sizeof ce &&
            (ce.cuda_error || ce.cublas_status || !ce.cuda_name || !ce.cublas_name || *ce.cuda_name))
            wrong("%s: %d '%s' / %d without a GPU", what, ce.cuda_error, ce.cuda_name ? ce.cuda_name : "NULL",
                  ce.cublas_status);
    }
    }
}

/* tk_workspace_size, tk_candidates and plans on p: introspection's model
 * (NULL pointers allowed); valid no-ops succeed (a plan of one is made,
 * run with random pointers and destroyed), anything else is NO_DEVICE. */
static void fuzz_queries(tk_handle h, const tk_gemm_problem *p, const char *kernel)
{
    char what[1024], d[512];
    expect e, ek;
    model_call(h, p, 0, kernel, &e, &ek, d, sizeof d);
    const tk_status valid = p && e.noop ? TK_SUCCESS : TK_ERR_NO_DEVICE;
    switch (pick(3)) {
    case 0: {
        size_t bytes = 7, *out = pick(8) ? &bytes : NULL;
        expect eb = ek;
        if (!out)
            flag(&eb, "bytes");
        snprintf(what, sizeof what, "tk_workspace_size(%s, %s, kernel %.40s)", h ? "h" : "NULL", d,
                 kernel ? kernel : "NULL");
        calls++;
        tk_status st = tk_workspace_size(h, p, kernel, out);
        check(what, st, valid, &eb, h);
        if (st == TK_SUCCESS && bytes != 0)
            wrong("%s: %zu bytes for a no-op", what, bytes);
        break;
    }
    case 1: {
        tk_candidate arr[4];
        memset(arr, 0xA5, sizeof arr);
        arr[0].size = pick(4) ? sizeof arr[0] : (size_t)pick((int)sizeof arr[0] + 1);
        static const int caps[] = { -1, 0, 1, 4, INT32_MIN };
        int capacity = caps[pick(5)], count = -7, *cnt = pick(8) ? &count : NULL;
        tk_candidate *out = pick(8) ? arr : NULL;
        expect ec = e;
        if (!cnt)
            flag(&ec, "count");
        if (capacity < 0)
            flag(&ec, "capacity");
        if (capacity > 0 && !out)
            flag(&ec, "out");
        if (capacity > 0 && out && arr[0].size < offsetof(tk_candidate, copies) + sizeof(unsigned))
            flag(&ec, "out[0].size");
        snprintf(what, sizeof what, "tk_candidates(%s, %s, %s, %d, %s)", h ? "h" : "NULL", d, out ? "arr" : "NULL",
                 capacity, cnt ? "&count" : "NULL");
        calls++;
        tk_status st = tk_candidates(h, p, out, capacity, cnt);
        check(what, st, valid, &ec, h);
        if (st == TK_SUCCESS && count != 0)
            wrong("%s: %d candidates for a no-op", what, count);
        break;
    }
    default: {
        tk_plan plan = (tk_plan)(uintptr_t)1, *out = pick(8) ? &plan : NULL;
        expect ep = ek;
        if (!out)
            flag(&ep, "out");
        snprintf(what, sizeof what, "tk_plan_create(%s, %s, kernel %.40s)", h ? "h" : "NULL", d,
                 kernel ? kernel : "NULL");
        calls++;
        tk_status st = tk_plan_create(h, p, kernel, out);
        check(what, st, valid, &ep, h);
        if (st != TK_SUCCESS) {
            if (out && plan)
                wrong("%s: failed with a plan", what);
            break;
        }
        if (!plan || !tk_plan_kernel(plan) || *tk_plan_kernel(plan))
            wrong("%s: a no-op's plan %p runs '%s'", what, (void *)plan, plan ? tk_plan_kernel(plan) : "NULL");
        /* runs: another handle, or NULL, or pointers aligned or not (a no-op reads nothing) */
        for (int r = pick(4); r > 0; r--) {
            tk_handle hr = pick(6) ? h : NULL;
            tk_plan pr = pick(8) ? plan : NULL;
            const void *a = random_pointer(), *b = random_pointer();
            void *c = random_pointer();
            expect er = { .nbad = 0 };
            if (!hr)
                flag(&er, "h");
            else if (!pr)
                flag(&er, "plan");
            else {
                if ((uintptr_t)a % 2)
                    flag(&er, "a");
                if ((uintptr_t)b % 2)
                    flag(&er, "b");
                if ((uintptr_t)c % (p->c_type == TK_F32 ? 4 : 2))
                    flag(&er, "c");
            }
            snprintf(what, sizeof what, "tk_plan_run(%s, %s, %p, %p, %p)", hr ? "h" : "NULL", pr ? "plan" : "NULL",
                     a, b, (void *)c);
            calls++;
            check(what, tk_plan_run(hr, pr, a, b, c, NULL), TK_SUCCESS, &er, hr);
        }
        calls += 2;
        if (tk_plan_kernel(NULL) != NULL || tk_plan_destroy(plan) != TK_SUCCESS)
            wrong("tk_plan_kernel(NULL) or tk_plan_destroy(plan)");
    }
    }
}

static void fuzz_build_info(void)
{
    tk_build_info b = TK_BUILD_INFO_INIT, *out = pick(8) ? &b : NULL;
    if (out && !pick(4))
        b.size = (size_t)pick((int)sizeof b + 1);
    expect e = { .nbad = 0 };
    if (!out)
        flag(&e, "out");
    else if (b.size < offsetof(tk_build_info, cublas_loaded) + sizeof(int))
        flag(&e, "out->size");
    char what[96];
    snprintf(what, sizeof what, "tk_get_build_info(%s, size %zu)", out ? "&b" : "NULL", b.size);
    calls++;
    tk_status st = tk_get_build_info(out);
    check(what, st, TK_SUCCESS, &e, NULL);
    if (st == TK_SUCCESS && b.size == sizeof b &&
        (b.version != TILEKIT_VERSION || !b.version_string || !b.archs || !*b.archs))
        wrong("%s: version %d, strings %p %p", what, b.version, (const void *)b.version_string, (const void *)b.archs);
}

/* ---- handles ---- */

#define NHANDLES 4
static tk_handle handles[NHANDLES];

static void create_into(int slot)
{
    calls++;
    tk_status st = tk_create(&handles[slot]);
    if (st != TK_SUCCESS || !handles[slot])
        wrong("tk_create: %s (%s); it must succeed without a GPU", tk_status_string(st), tk_last_error(NULL));
    else if (*tk_last_error(handles[slot]))
        wrong("tk_create: new handle has the message '%s'", tk_last_error(handles[slot]));
}

/* Creates or destroys a handle now and then (never one twice: destroying
 * a destroyed handle is the caller's bug), calls tk_create(NULL) and
 * tk_destroy(NULL); returns a live handle, or NULL one time in eight. */
static tk_handle some_handle(void)
{
    int slot = pick(NHANDLES);
    switch (pick(16)) {
    case 0:
        calls++;
        if (tk_destroy(handles[slot]) != TK_SUCCESS)
            wrong("tk_destroy(%s) failed", handles[slot] ? "h" : "NULL");
        handles[slot] = NULL;
        break;
    case 1: {
        expect e = { .nbad = 0 };
        flag(&e, "out");
        calls++;
        check("tk_create(NULL)", tk_create(NULL), TK_SUCCESS, &e, NULL);
        break;
    }
    }
    if (!handles[slot])
        create_into(slot);
    return pick(8) ? handles[slot] : NULL;
}

/* ---- main ---- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int parse(int argc, char **argv, unsigned long long *iters, double *seconds)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        char *end;
        if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], &end, 0);
        else if (!strcmp(argv[i], "--iters"))
            *iters = strtoull(argv[i + 1], &end, 0);
        else if (!strcmp(argv[i], "--seconds"))
            *seconds = strtod(argv[i + 1], &end);
        else
            return 0;
        if (end == argv[i + 1] || *end)
            return 0;
    }
    return argc % 2 == 1;
}

/* The model is of a machine without a GPU, and the fake device pointers
 * must never reach a kernel: refuse to run where the library finds one
 * (tk_kernel_supports launches nothing). */
static void refuse_a_gpu(void)
{
    tk_handle h = NULL;
    tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 8, 8, 8, 1.0f, 0.0f, NULL, 8, NULL, 8, NULL, 8, TK_F32 };
    tk_status st = tk_create(&h) ? TK_ERR_INTERNAL : tk_kernel_supports(h, "k01_naive", &p);
    tk_destroy(h);
    if (st != TK_ERR_NO_DEVICE) {
        fprintf(stderr, "fuzz_api: a GPU is visible (or tk_create failed: %s); the fuzz needs none: run it with "
                        "CUDA_VISIBLE_DEVICES=-1, as `make asan-fuzz` does\n", tk_status_string(st));
        exit(2);
    }
}

static void init(void)
{
    refuse_a_gpu();
    nregistry = tk_kernel_count();
    if (nregistry < 1 || nregistry > MAX_NAMES) {
        fprintf(stderr, "fuzz_api: tk_kernel_count() = %d (expected 1..%d)\n", nregistry, MAX_NAMES);
        exit(1);
    }
    for (int i = 0; i < nregistry; i++) {
        tk_kernel_props kp;
        if (tk_kernel_get(i, &kp) != TK_SUCCESS || !kp.name || !*kp.name) {
            fprintf(stderr, "fuzz_api: tk_kernel_get(%d) failed: %s\n", i, tk_last_error(NULL));
            exit(1);
        }
        registry[i] = kp.name;
    }
    memset(long_name, 'x', sizeof long_name - 1);
    memcpy(long_name, registry[0], strlen(registry[0]));
    host_buf = malloc(HOST_BYTES);   /* from the heap, so ASan puts red zones around it */
    if (!host_buf)
        exit(1);
    memset(host_buf, 0xA5, HOST_BYTES);
}

int main(int argc, char **argv)
{
    unsigned long long iters = UINT64_MAX;
    double seconds = 30;
    if (!parse(argc, argv, &iters, &seconds)) {
        fprintf(stderr, "usage: fuzz_api [--seed S] [--iters N] [--seconds T]\n");
        return 2;
    }
    signal(SIGABRT, on_abort);
    printf("fuzz_api: seed %llu, for %.0f s", seed, seconds);
    if (iters != UINT64_MAX)
        printf(" or %llu iterations", iters);
    printf(" (replay: fuzz_api --seed %llu --iters N)\n", seed);
    fflush(stdout);
    rng_state = seed;
    init();
    const double t0 = now_s();
    for (iteration = 0; iteration < iters && now_s() - t0 < seconds; iteration++) {
        char buf[64];
        tk_handle h = some_handle();
        tk_gemm_problem p = random_problem();
        const char *kernel = random_kernel(buf, sizeof buf);
        fuzz_gemm(h, pick(16) ? &p : NULL, kernel);
        fuzz_introspection(h, pick(16) ? &p : NULL, kernel);
        fuzz_registry();
        fuzz_status_and_version();
        fuzz_settings(h);
        fuzz_queries(h, pick(16) ? &p : NULL, kernel);
        fuzz_build_info();
        if (!host_intact()) {
            wrong("host memory posing as A, B or C was written");
            memset(host_buf, 0xA5, HOST_BYTES);
        }
    }
    for (int i = 0; i < NHANDLES; i++)
        tk_destroy(handles[i]);
    free(host_buf);
    printf("fuzz_api: %llu calls, 0 crashes, %llu wrong answers (seed %llu, %llu iterations, %.1f s)\n", calls,
           wrong_answers, seed, iteration, now_s() - t0);
    return wrong_answers ? 1 : 0;
}
