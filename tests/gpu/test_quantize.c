/* test_quantize - tk_quantize_fp8 on the device (issue 40) against the lab's
 * tk_lab_fp8_quantize on the host, bit for bit: every code, and every
 * scale (a NaN scale matches any NaN: the host keeps the input's payload,
 * the GPU writes its canonical NaN).
 *
 *   gpu_test_quantize [name-substring]
 *
 * shapes: both formats x the four modes x rows 1, 7, 129, 300 x cols 1, 5,
 * 128, 200, 1500, 4100, 16500 (ROW's four instances, the last with chunks
 * read again past the 16384 it holds), each in three layouts (tight; padded with 16-byte aligned
 * rows, the vector path, and a padded ld_scale for the block modes; padded
 * with odd leading dimensions and addresses, the narrow path) and two
 * inputs (random bf16 of rows' exponents from 2^-15 to 2^15; the same with
 * the specials: the last 128 x 128 block and the last row zero, a NaN at
 * (0, 0) and a negative NaN further on, +inf at (1, 0), bf16's largest
 * magnitudes, a row of subnormal-range values, a row of values near
 * 2^-50 with every third one a bf16 subnormal: the fast division's
 * smallest quotients); codes, row padding and
 * guard bands before and after q and the scales poisoned, and every
 * poisoned byte checked unchanged. refusal: a bad ld_scale refused with
 * every output untouched. graph: TENSOR and 1X128 captured in a CUDA graph
 * (the memset and both kernels), replayed twice, each replay exact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lab/lab.h"
#include "../host/check.h"

#define GUARD 256            /* poisoned bytes before and after each output */
#define POISON 0xA5

static tk_handle h;

typedef struct qcase {
    int64_t rows, cols, ldx, ldq, ld_scale;   /* ld_scale 0: the least */
    size_t x_off, q_off;     /* bytes past an aligned base (odd addresses) */
    int format, mode, specials;
} qcase;

static const char *mode_name(int m)
{
    static const char *const n[] = { "none", "tensor", "row", "1x128", "128x128" };
    return n[m];
}

static int64_t least_ld(const qcase *c)
{
    return c->mode == TK_QUANT_1X128 ? c->rows : (c->rows + 127) / 128;
}

/* How many scale slots the call's layout spans (its ld_scale, padded). */
static int64_t scale_slots(const qcase *c)
{
    const int64_t cb = (c->cols + 127) / 128, ld = c->ld_scale ? c->ld_scale : least_ld(c);
    switch (c->mode) {
    case TK_QUANT_TENSOR:
        return 1;
    case TK_QUANT_ROW:
        return c->rows;
    default:
        return ld * cb;
    }
}

static uint16_t bf16_of(float v) { return tk_lab_f32_to_bf16(v); }

/* The input, row-major with ldx (padding random too: it must not matter). */
static void make_input(const qcase *c, uint16_t *x, uint64_t seed)
{
    const size_t n = (size_t)((c->rows - 1) * c->ldx + c->cols);
    for (size_t i = 0; i < n; i++) {
        const int64_t r = (int64_t)(i / (size_t)c->ldx);
        const float v = tk_lab_bf16_to_f32(tk_lab_rand_bf16(seed, i));
        x[i] = bf16_of(ldexpf(v, (int)(r % 7) * 5 - 15));
    }
    if (!c->specials)
        return;
    const int64_t rb = (c->rows - 1) / 128 * 128, cb = (c->cols - 1) / 128 * 128;
    for (int64_t r = rb; r < c->rows; r++)   /* the last 128 x 128 block: a zero group */
        for (int64_t k = cb; k < c->cols; k++)
            x[r * c->ldx + k] = (r + k) % 3 ? 0x0000 : 0x8000;   /* +0 and -0 */
    for (int64_t k = 0; k < c->cols; k++)    /* the last row: zero */
        x[(c->rows - 1) * c->ldx + k] = 0;
    if (c->rows > 2)                         /* a row of subnormal-range values: fp32-subnormal scales */
        for (int64_t k = 0; k < c->cols; k++)
            x[2 * c->ldx + k] = bf16_of(ldexpf(tk_lab_bf16_to_f32(tk_lab_rand_bf16(seed + 1, (uint64_t)k)), -128));
    if (c->rows > 4)                         /* near 2^-50, every third a subnormal: tk_qdiv's smallest quotients */
        for (int64_t k = 0; k < c->cols; k++)
            x[4 * c->ldx + k] = bf16_of(ldexpf(tk_lab_bf16_to_f32(tk_lab_rand_bf16(seed + 2, (uint64_t)k)),
                                               k % 3 ? -50 : -130));
    if (c->rows > 3)                         /* bf16's largest magnitudes: saturating quotients */
        for (int64_t k = 0; k < c->cols; k += 3)
            x[3 * c->ldx + k] = k % 2 ? 0xff7f : 0x7f7f;
    x[0] = 0x7fc0;                           /* NaN */
    if (c->rows > 1)
        x[c->ldx] = 0x7f80;                  /* +inf */
    if (c->cols > 200)
        x[c->ldx * (c->rows / 2) + 200] = 0xffc1;   /* a negative NaN with a payload */
}

/* The reference: the lab's quantizer on the fp32 values, its scales moved
 * to the call's ld_scale. */
static void reference(const qcase *c, const uint16_t *x, uint8_t *q, float *scale)
{
    const size_t n = (size_t)((c->rows - 1) * c->ldx + c->cols);
    float *xf = malloc(n * sizeof *xf);
    const int64_t ns = tk_lab_fp8_nscales((tk_lab_qmode)(c->mode - 1), c->rows, c->cols);
    float *s = malloc((size_t)ns * sizeof *s);
    for (size_t i = 0; i < n; i++)
        xf[i] = tk_lab_bf16_to_f32(x[i]);
    tk_lab_fp8_quantize(xf, c->rows, c->cols, c->ldx, (tk_lab_fp8)(c->format - 1), (tk_lab_qmode)(c->mode - 1), q,
                        c->ldq, s);
    const int64_t least = c->mode >= TK_QUANT_1X128 ? least_ld(c) : ns;
    const int64_t ld = c->ld_scale ? c->ld_scale : least;
    for (int64_t i = 0; i < ns; i++)
        scale[i % least + i / least * ld] = s[i];
    free(xf);
    free(s);
}

static void case_name(const qcase *c, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s %lldx%lld ldx %lld ldq %lld ld_scale %lld x+%zu q+%zu%s",
             c->format == TK_FP8_E4M3 ? "e4m3" : "e5m2", mode_name(c->mode), (long long)c->rows, (long long)c->cols,
             (long long)c->ldx, (long long)c->ldq, (long long)c->ld_scale, c->x_off, c->q_off,
             c->specials ? " specials" : "");
}

typedef struct qbufs {
    void *x;                 /* device: x_off + the input */
    uint8_t *q;              /* device: GUARD + q_off + the codes + GUARD */
    uint8_t *s;              /* device: GUARD + the scales + GUARD */
    size_t xb, qb, sb;
} qbufs;

static int alloc_bufs(const qcase *c, qbufs *b)
{
    b->xb = c->x_off + (size_t)((c->rows - 1) * c->ldx + c->cols) * 2;
    b->qb = 2 * GUARD + c->q_off + (size_t)((c->rows - 1) * c->ldq + c->cols);
    b->sb = 2 * GUARD + (size_t)scale_slots(c) * 4;
    return cudaMalloc(&b->x, b->xb) || cudaMalloc((void **)&b->q, b->qb) || cudaMalloc((void **)&b->s, b->sb);
}

static void free_bufs(qbufs *b)
{
    cudaFree(b->x);
    cudaFree(b->q);
    cudaFree(b->s);
}

static tk_quantize_desc desc_of(const qcase *c, const qbufs *b)
{
    tk_quantize_desc d = TK_QUANTIZE_DESC_INIT;
    d.rows = c->rows;
    d.cols = c->cols;
    d.x = (const char *)b->x + c->x_off;
    d.ldx = c->ldx;
    d.format = c->format;
    d.mode = c->mode;
    d.q = b->q + GUARD + c->q_off;
    d.ldq = c->ldq;
    d.scale = (float *)(b->s + GUARD);
    d.ld_scale = c->ld_scale;
    return d;
}

/* Compares the device's outputs with the reference (want_q, want_s: NULL
 * for "all poison", a refusal's); returns the number of differences and
 * reports the first. */
static int64_t compare(const qcase *c, const qbufs *b, const uint16_t *x, const uint8_t *want_q, const float *want_s,
                       const char *what)
{
    uint8_t *gq = malloc(b->qb), *gs = malloc(b->sb);
    int64_t bad = 0;
    char name[200];
    case_name(c, name, sizeof name);
    if (cudaMemcpy(gq, b->q, b->qb, cudaMemcpyDeviceToHost) || cudaMemcpy(gs, b->s, b->sb, cudaMemcpyDeviceToHost)) {
        CHECK(0, "%s: %s: copy back failed", what, name);
        free(gq);
        free(gs);
        return 1;
    }
    for (size_t i = 0; i < b->qb; i++) {   /* every byte of q's buffer: a code or poison */
        const int64_t off = (int64_t)i - GUARD - (int64_t)c->q_off;
        const int64_t r = off >= 0 ? off / c->ldq : -1, k = off >= 0 ? off % c->ldq : -1;
        const int in = want_q && off >= 0 && r < c->rows && k < c->cols;
        const uint8_t want = in ? want_q[r * c->ldq + k] : POISON;
        if (gq[i] != want && !bad++) {
            if (in)
                CHECK(0, "%s: %s: code (%lld, %lld) is 0x%02x, want 0x%02x (x = bf16 0x%04x)", what, name,
                      (long long)r, (long long)k, gq[i], want, x[r * c->ldx + k]);
            else
                CHECK(0, "%s: %s: q's buffer byte %zu (row %lld, col %lld of q) written: 0x%02x", what, name, i,
                      (long long)r, (long long)k, gq[i]);
        }
    }
    const int64_t slots = scale_slots(c), least = c->mode >= TK_QUANT_1X128 ? least_ld(c) : slots;
    const int64_t ld = c->ld_scale ? c->ld_scale : least;
    for (size_t i = 0; i < b->sb; i += 4) {   /* the scales, their padding and guards */
        const int64_t slot = ((int64_t)i - GUARD) / 4;
        const int in = want_s && (int64_t)i >= GUARD && slot < slots && slot % ld < least;
        float g;
        uint32_t gb;
        memcpy(&g, gs + i, 4);
        memcpy(&gb, gs + i, 4);
        int ok;
        if (in) {
            const float w = want_s[slot];
            ok = (isnan(w) && isnan(g)) || !memcmp(&w, &g, 4);
        } else {
            ok = gs[i] == POISON && gs[i + 1] == POISON && gs[i + 2] == POISON && gs[i + 3] == POISON;
        }
        if (!ok && !bad++)
            CHECK(0, "%s: %s: scale slot %lld is %a (0x%08x), want %s%a", what, name, (long long)slot, (double)g, gb, in ? "" : "poison, not ", in ? (double)want_s[slot] : (double)g);
    }
    free(gq);
    free(gs);
    return bad;
}

/* Runs one case: 1 when it ran and matched. */
static int run_case(const qcase *c, uint64_t seed)
{
    qbufs b;
    memset(&b, 0, sizeof b);
    if (alloc_bufs(c, &b)) {
        CHECK(0, "cudaMalloc failed");
        free_bufs(&b);
        return 0;
    }
    const size_t n = (size_t)((c->rows - 1) * c->ldx + c->cols);
    uint16_t *x = malloc(n * 2);
    uint8_t *wq = malloc((size_t)((c->rows - 1) * c->ldq + c->cols));
    float *ws = malloc((size_t)scale_slots(c) * 4);
    make_input(c, x, seed);
    reference(c, x, wq, ws);
    cudaMemcpy((char *)b.x + c->x_off, x, n * 2, cudaMemcpyHostToDevice);
    cudaMemset(b.q, POISON, b.qb);
    cudaMemset(b.s, POISON, b.sb);
    const tk_quantize_desc d = desc_of(c, &b);
    const tk_status st = tk_quantize_fp8(h, &d, NULL);
    const cudaError_t e = cudaDeviceSynchronize();
    char name[200];
    case_name(c, name, sizeof name);
    int ok = st == TK_SUCCESS && e == cudaSuccess;
    CHECK(ok, "%s: %s (%s), sync %s", name, tk_status_string(st), tk_last_error(h), cudaGetErrorString(e));
    if (ok)
        ok = compare(c, &b, x, wq, ws, "shapes") == 0;
    free(x);
    free(wq);
    free(ws);
    free_bufs(&b);
    return ok;
}

static void shapes(void)
{
    static const int64_t R[] = { 1, 7, 129, 300 }, C[] = { 1, 5, 128, 200, 1500, 4100, 16500 };
    int ran = 0, passed = 0;
    uint64_t seed = 77;
    for (int f = TK_FP8_E4M3; f <= TK_FP8_E5M2; f++)
        for (int mode = TK_QUANT_TENSOR; mode <= TK_QUANT_128X128; mode++)
            for (size_t ri = 0; ri < sizeof R / sizeof R[0]; ri++)
                for (size_t ci = 0; ci < sizeof C / sizeof C[0]; ci++)
                    for (int lay = 0; lay < 3; lay++)
                        for (int sp = 0; sp < 2; sp++) {
                            qcase c;
                            memset(&c, 0, sizeof c);
                            c.rows = R[ri], c.cols = C[ci], c.format = f, c.mode = mode, c.specials = sp;
                            const int64_t up8 = (c.cols + 7) / 8 * 8;
                            if (lay == 0) {          /* tight */
                                c.ldx = c.ldq = c.cols;
                            } else if (lay == 1) {   /* aligned rows: 16-byte loads, 8-byte stores */
                                c.ldx = up8 + 8;
                                c.ldq = up8 + 16;
                                c.ld_scale = mode >= TK_QUANT_1X128 ? least_ld(&c) + 3 : 0;
                            } else {                 /* odd leading dimensions and addresses */
                                c.ldx = c.cols + 3;
                                c.ldq = c.cols + 5;
                                c.x_off = 2;
                                c.q_off = 1;
                            }
                            ran++;
                            passed += run_case(&c, seed++);
                        }
    printf("  shapes: %d of %d cases exact\n", passed, ran);
}

/* A refused call writes nothing: a bad ld_scale on real buffers. */
static void refusal(void)
{
    qcase c = { 129, 200, 200, 200, 0, 0, 0, TK_FP8_E4M3, TK_QUANT_1X128, 0 };
    qbufs b;
    memset(&b, 0, sizeof b);
    if (alloc_bufs(&c, &b)) {
        CHECK(0, "cudaMalloc failed");
        free_bufs(&b);
        return;
    }
    uint16_t *x = malloc((size_t)(c.rows * c.ldx) * 2);
    make_input(&c, x, 5);
    cudaMemcpy(b.x, x, (size_t)(c.rows * c.ldx) * 2, cudaMemcpyHostToDevice);
    cudaMemset(b.q, POISON, b.qb);
    cudaMemset(b.s, POISON, b.sb);
    tk_quantize_desc d = desc_of(&c, &b);
    d.ld_scale = c.rows - 1;
    const tk_status st = tk_quantize_fp8(h, &d, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && !strncmp(tk_last_error(h), "ld_scale:", 9), "bad ld_scale: %s (%s)",
          tk_status_string(st), tk_last_error(h));
    cudaDeviceSynchronize();
    compare(&c, &b, x, NULL, NULL, "refusal");
    free(x);
    free_bufs(&b);
}

/* Captured in a CUDA graph (TENSOR: the memset and both kernels), replayed
 * twice: exact each time, so nothing of one replay leaks into the next. */
static void graph(void)
{
    for (int mode = TK_QUANT_TENSOR; mode <= TK_QUANT_1X128; mode += 2) {
        qcase c = { 300, 4100, 4104, 4112, 0, 0, 0, TK_FP8_E4M3, mode, 0 };
        qbufs b;
        memset(&b, 0, sizeof b);
        cudaStream_t s = NULL;
        cudaGraph_t g = NULL;
        cudaGraphExec_t ge = NULL;
        if (alloc_bufs(&c, &b) || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) {
            CHECK(0, "setup failed");
            free_bufs(&b);
            return;
        }
        const size_t n = (size_t)((c.rows - 1) * c.ldx + c.cols);
        uint16_t *x = malloc(n * 2);
        uint8_t *wq = malloc((size_t)((c.rows - 1) * c.ldq + c.cols));
        float *ws = malloc((size_t)scale_slots(&c) * 4);
        make_input(&c, x, 99);
        reference(&c, x, wq, ws);
        cudaMemcpy(b.x, x, n * 2, cudaMemcpyHostToDevice);
        const tk_quantize_desc d = desc_of(&c, &b);
        tk_status st = TK_SUCCESS;
        cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
        if (!e) {
            st = tk_quantize_fp8(h, &d, s);
            e = cudaStreamEndCapture(s, &g);
        }
        if (!e && !st)
            e = cudaGraphInstantiate(&ge, g, 0);
        CHECK(!e && !st, "%s: capture: %s, %s (%s)", mode_name(mode), cudaGetErrorString(e), tk_status_string(st),
              tk_last_error(h));
        for (int rep = 0; rep < 2 && !e && !st; rep++) {
            cudaMemset(b.q, POISON, b.qb);
            cudaMemset(b.s, POISON, b.sb);
            e = cudaGraphLaunch(ge, s);
            if (!e)
                e = cudaStreamSynchronize(s);
            CHECK(!e, "%s: replay %d: %s", mode_name(mode), rep, cudaGetErrorString(e));
            if (!e)
                compare(&c, &b, x, wq, ws, rep ? "graph replay 2" : "graph replay 1");
        }
        if (ge)
            cudaGraphExecDestroy(ge);
        if (g)
            cudaGraphDestroy(g);
        cudaStreamDestroy(s);
        free(x);
        free(wq);
        free(ws);
        free_bufs(&b);
    }
}

void tk_tests(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError();
        printf("no GPU: nothing to run\n");
        return;
    }
    if (tk_create(&h) != TK_SUCCESS) {
        CHECK(0, "tk_create: %s", tk_last_error(NULL));
        return;
    }
    TK_TEST(shapes);
    TK_TEST(refusal);
    TK_TEST(graph);
    tk_destroy(h);
}
