/* test_epilogue.c - the argument checks of fused epilogues (issue 39:
 * tk_gemm_desc version 3; src/lib/epilogue.c) on the CPU: each refusal's
 * status and the field its message names, with the value and what was
 * expected; all before the device is asked for (without a GPU a bad call
 * is TK_ERR_INVALID_VALUE, a good one TK_ERR_NO_DEVICE, a no-op
 * TK_SUCCESS); the fields set with TK_EPI_NONE; a version-2 descriptor;
 * the widths of B, C and D per kind; overlaps; the kernels' form
 * (tk_epi_args_of); the accept bit and the kernels that lack it. The
 * formulas are checked on the GPU (tests/gpu).
 *
 * Safe on a GPU machine too: the fake pointers reach no launch. A call the
 * checks must accept is made on a hand-made handle whose device is not the
 * current one (refused after every argument check, naming h), and on a
 * real handle only where cudaGetDeviceCount finds no GPU. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lib/internal.h"
#include "check.h"
#include "fake_handle.h"

/* Stand-ins for device pointers, never dereferenced; 256-byte aligned and
 * 1 MiB apart (every matrix here is smaller). */
#define FAKE(i) ((void *)(uintptr_t)((i) << 20))
#define FAKE_A FAKE(1)
#define FAKE_B FAKE(2)
#define FAKE_C FAKE(3)
#define FAKE_D FAKE(4)
#define FAKE_AUX FAKE(5)
#define FAKE_BIAS FAKE(6)
#define FAKE_BG ((float *)FAKE(7))
#define FAKE_UP FAKE(8)
/* p moved by `bytes`. */
#define AT(p, bytes) ((void *)((uintptr_t)(p) + (uintptr_t)(bytes)))

/* The products here: op(A) M x K, op(B) K x N. */
enum { M = 64, N = 32, K = 16 };

static const int kinds[] = { TK_EPI_BIAS_ACT, TK_EPI_GATED, TK_EPI_BACKWARD, TK_EPI_GATED_BACKWARD };
#define NKINDS ((int)(sizeof kinds / sizeof kinds[0]))

static const char *kind_str(int kind)
{
    switch (kind) {
    case TK_EPI_NONE: return "NONE";
    case TK_EPI_BIAS_ACT: return "BIAS_ACT";
    case TK_EPI_GATED: return "GATED";
    case TK_EPI_BACKWARD: return "BACKWARD";
    case TK_EPI_GATED_BACKWARD: return "GATED_BACKWARD";
    }
    return "?";
}

static int backward(int kind) { return kind == TK_EPI_BACKWARD || kind == TK_EPI_GATED_BACKWARD; }

/* D's and aux's columns per kind (tilekit.h). */
static int64_t out_cols(int kind) { return kind == TK_EPI_GATED ? N / 2 : kind == TK_EPI_GATED_BACKWARD ? 2 * N : N; }
static int64_t aux_cols(int kind) { return kind == TK_EPI_GATED_BACKWARD ? 2 * N : N; }

/* A valid descriptor of kind: row-major NN, fp32 C written in place (D is
 * C, ldc its columns), beta 0; the backward kinds with their aux (tight),
 * the others with none; an activation where the kind needs one. */
static tk_gemm_desc desc_of(int kind)
{
    tk_gemm_desc d = TK_GEMM_DESC_INIT;
    d.problem = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_N, M, N, K, 1.0f, 0.0f, FAKE_A, K, FAKE_B, N, FAKE_C,
                                   out_cols(kind), TK_F32 };
    d.epilogue = kind;
    d.activation = kind == TK_EPI_BIAS_ACT ? TK_ACT_NONE : TK_ACT_SILU;
    if (backward(kind)) {
        d.aux = FAKE_AUX;
        d.ldaux = aux_cols(kind);
    }
    return d;
}

/* d through tk_gemm_run, its outcome checked as fh_check_outcome does,
 * words[0] the field (NULL: the status alone). */
static void expect(tk_handle h, const tk_gemm_desc *d, tk_status want, const char *what, const char *const *words)
{
    char label[160];
    snprintf(label, sizeof label, "%s: %s", kind_str(d->epilogue), what);
    fh_check_outcome(h, tk_gemm_run(h, d, NULL, NULL), want, label, "tk_gemm_run", words[0], words + 1);
}

/* REFUSED(h, d, what, "field:", words...): d refused with
 * TK_ERR_INVALID_VALUE, the message starting with the field's name and
 * holding the words. */
#define REFUSED(h, d, what, ...)                                    \
    do {                                                            \
        const char *const words_[] = { __VA_ARGS__, NULL };         \
        expect((h), (d), TK_ERR_INVALID_VALUE, (what), words_);     \
    } while (0)

static const char *const status_only[] = { NULL };

/* Expects d to pass every argument check and to ask for the device: on a
 * handle whose device is not the current one, the refusal naming h; on a
 * real handle without a GPU, TK_ERR_NO_DEVICE. */
static void accepted(tk_handle h, const tk_gemm_desc *d, const char *what)
{
    const char *const h_arg[] = { "h:", NULL };
    struct tk_handle_s fake;
    fh_other_device(&fake);
    expect(&fake, d, TK_ERR_INVALID_VALUE, what, h_arg);
    if (!have_gpu())
        expect(h, d, TK_ERR_NO_DEVICE, what, status_only);
}

/* Expects d to be a no-op: TK_SUCCESS with no GPU asked for (on the real
 * handle, GPU or none, and on one whose device is not current), no
 * message left. */
static void noop(tk_handle h, const tk_gemm_desc *d, const char *what)
{
    struct tk_handle_s fake;
    fh_other_device(&fake);
    tk_handle hs[2] = { h, &fake };
    for (int i = 0; i < 2; i++) {
        expect(hs[i], d, TK_SUCCESS, what, status_only);
        CHECK(!strcmp(tk_last_error(hs[i]), ""), "%s %s: a no-op left '%s'", kind_str(d->epilogue), what,
              tk_last_error(hs[i]));
    }
}

/* The descriptors every test starts from are valid, and so are the
 * fields' other uses. */
static void test_valid_descs(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS; i++) {
        const int kind = kinds[i];
        tk_gemm_desc d = desc_of(kind);
        accepted(h, &d, "as made");
        d.problem.c_type = TK_BF16;
        accepted(h, &d, "bf16 C");
        d = desc_of(kind);
        d.d = FAKE_D;   /* D apart, C not read (beta 0): C and ldc anything */
        d.ldd = out_cols(kind) + 8;
        d.problem.c = NULL;
        d.problem.ldc = 0;
        accepted(h, &d, "D apart, C unused");
        if (kind != TK_EPI_GATED_BACKWARD) {   /* it takes no residual */
            d.problem.c = FAKE_C;
            d.problem.ldc = out_cols(kind);
            d.problem.beta = 1.0f;
            accepted(h, &d, "D apart, C the residual");
            d.d = FAKE_C;   /* in place, the same matrix */
            d.ldd = d.problem.ldc;
            accepted(h, &d, "d == c, ldd == ldc");
        }
        d = desc_of(kind);
        d.problem.op_b = TK_OP_T;   /* B stored N x K */
        d.problem.ldb = K;
        d.problem.op_a = TK_OP_T;   /* A stored K x M */
        d.problem.lda = M;
        accepted(h, &d, "op_a T, op_b T");
        if (backward(kind)) {
            d = desc_of(kind);
            d.bias_grad = FAKE_BG;
            accepted(h, &d, "bias_grad");
        } else {
            d = desc_of(kind);
            d.bias = FAKE_BIAS;
            accepted(h, &d, "fp32 bias per column");
            d.bias_type = TK_BF16;
            d.bias_along = TK_BIAS_ROWS;
            d.bias = AT(FAKE_BIAS, 2);   /* bf16: 2-byte aligned is enough */
            accepted(h, &d, "bf16 bias per row");
            d.aux = AT(FAKE_AUX, 2);
            d.ldaux = aux_cols(kind);
            accepted(h, &d, "aux stored");
        }
    }
    tk_destroy(h);
}

/* epilogue 0 with another version-3 field set: refused, naming it (a bias
 * or D set with the epilogue forgotten would run the product alone). */
static void test_none_with_fields(void)
{
    tk_handle h = make_handle();
    static const char *const fields[] = { "activation:", "bias:", "bias_type:", "bias_along:", "b_up:",
                                          "d:",          "ldd:",  "aux:",       "ldaux:",      "bias_grad:" };
    for (int f = 0; f < 10; f++) {
        for (int grouped = 0; grouped < 2; grouped++) {
            tk_gemm_desc d = desc_of(TK_EPI_BIAS_ACT);
            d.epilogue = TK_EPI_NONE;
            d.problem.ldc = N;
            if (grouped) {   /* a valid batch: the epilogue fields are checked first */
                d.group_kind = TK_GROUP_BATCHED;
                d.count = 2;
                d.stride_a = M * K;
                d.stride_b = K * N;
                d.stride_c = M * N;
            }
            switch (f) {
            case 0: d.activation = TK_ACT_RELU; break;
            case 1: d.bias = FAKE_BIAS; break;
            case 2: d.bias_type = TK_BF16; break;
            case 3: d.bias_along = TK_BIAS_ROWS; break;
            case 4: d.b_up = FAKE_UP; break;
            case 5: d.d = FAKE_D; break;
            case 6: d.ldd = N; break;
            case 7: d.aux = FAKE_AUX; break;
            case 8: d.ldaux = -1; break;
            case 9: d.bias_grad = FAKE_BG; break;
            }
            REFUSED(h, &d, fields[f], fields[f], "is set", "TK_EPI_NONE", "expected 0");
        }
    }
    /* all 0: the plain product */
    tk_gemm_desc d = desc_of(TK_EPI_BIAS_ACT);
    d.epilogue = TK_EPI_NONE;
    d.problem.ldc = N;
    accepted(h, &d, "NONE, fields 0");
    tk_destroy(h);
}

static void test_kind_and_activation(void)
{
    tk_handle h = make_handle();
    const int32_t bad_kinds[] = { -1, 5, 100 };
    for (int i = 0; i < 3; i++) {
        tk_gemm_desc d = desc_of(TK_EPI_BIAS_ACT);
        d.epilogue = bad_kinds[i];
        char num[16];
        snprintf(num, sizeof num, "%d", bad_kinds[i]);
        REFUSED(h, &d, "bad kind", "epilogue:", num, "TK_EPI_GATED_BACKWARD (4)");
    }
    const int32_t bad_acts[] = { -1, 5, 1000 };
    for (int i = 0; i < NKINDS; i++)
        for (int j = 0; j < 3; j++) {
            tk_gemm_desc d = desc_of(kinds[i]);
            d.activation = bad_acts[j];
            char num[16];
            snprintf(num, sizeof num, "%d", bad_acts[j]);
            REFUSED(h, &d, "bad activation", "activation:", num, "TK_ACT_SILU (4)");
        }
    /* BIAS_ACT takes every activation, none included; the others need one */
    for (int act = TK_ACT_NONE; act <= TK_ACT_SILU; act++)
        for (int i = 0; i < NKINDS; i++) {
            tk_gemm_desc d = desc_of(kinds[i]);
            d.activation = act;
            if (act == TK_ACT_NONE && kinds[i] != TK_EPI_BIAS_ACT)
                REFUSED(h, &d, "TK_ACT_NONE", "activation:", "TK_ACT_NONE", kind_str(kinds[i]), "TK_ACT_RELU");
            else
                accepted(h, &d, "an activation");
        }
    tk_destroy(h);
}

/* One row-major product: the grouped forms are not supported yet. */
static void test_form(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS; i++) {
        for (int g = TK_GROUP_BATCHED; g <= TK_GROUP_MASKED; g++) {
            tk_gemm_desc d = desc_of(kinds[i]);
            d.group_kind = g;
            d.count = 2;
            const char *const words[] = { "group_kind:", "not supported yet", "batched or grouped", NULL };
            expect(h, &d, TK_ERR_NOT_SUPPORTED, "a group kind", words);
        }
        tk_gemm_desc d = desc_of(kinds[i]);
        d.group_kind = 9;
        REFUSED(h, &d, "group_kind 9", "group_kind:", "9", "TK_GROUP_NONE");
        d = desc_of(kinds[i]);
        d.count = 3;   /* a group field with TK_GROUP_NONE */
        REFUSED(h, &d, "count with no group kind", "count:", "TK_GROUP_NONE");
        d = desc_of(kinds[i]);
        d.problem.layout = TK_COL_MAJOR;
        REFUSED(h, &d, "column-major", "layout:", "1", "TK_ROW_MAJOR");
        d.problem.layout = (tk_layout)7;
        REFUSED(h, &d, "layout 7", "layout:", "7", "TK_ROW_MAJOR");
    }
    tk_destroy(h);
}

/* TK_EPI_GATED halves N: an odd N is refused; GATED_BACKWARD doubles it. */
static void test_n(void)
{
    tk_handle h = make_handle();
    tk_gemm_desc d = desc_of(TK_EPI_GATED);
    d.problem.n = N + 1;
    d.problem.ldb = N + 1;
    REFUSED(h, &d, "odd N", "n:", "33", "even");
    d.problem.n = -3;   /* negative: the problem's own check */
    REFUSED(h, &d, "N -3", "n:", "negative");
    d = desc_of(TK_EPI_GATED_BACKWARD);
    d.problem.n = INT64_MAX / 2 + 1;
    REFUSED(h, &d, "N huge", "n:", "too large", "2N");
    /* the other kinds take an odd N */
    for (int i = 0; i < NKINDS; i++) {
        if (kinds[i] == TK_EPI_GATED)
            continue;
        d = desc_of(kinds[i]);
        d.problem.n = N - 1;
        d.problem.ldb = N - 1;
        d.problem.ldc = out_cols(kinds[i]) - (kinds[i] == TK_EPI_GATED_BACKWARD ? 2 : 1);
        d.ldaux = backward(kinds[i]) ? d.problem.ldc : 0;
        accepted(h, &d, "odd N");
    }
    tk_destroy(h);
}

static void test_bias(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS; i++) {
        const int kind = kinds[i];
        tk_gemm_desc d = desc_of(kind);
        d.bias_type = 2;
        REFUSED(h, &d, "bias_type 2", "bias_type:", "2", "TK_F32", "TK_BF16");
        d = desc_of(kind);
        d.bias_along = -1;
        REFUSED(h, &d, "bias_along -1", "bias_along:", "-1", "TK_BIAS_COLUMNS", "TK_BIAS_ROWS");
        d.bias_along = 2;
        REFUSED(h, &d, "bias_along 2", "bias_along:", "2");
        d = desc_of(kind);
        d.bias = FAKE_BIAS;
        if (backward(kind)) {
            REFUSED(h, &d, "bias with a backward kind", "bias:", "adds no bias", kind_str(kind), "expected NULL");
            continue;
        }
        for (int off = 1; off < 4; off++) {
            d.bias = AT(FAKE_BIAS, off);
            d.bias_type = TK_F32;
            REFUSED(h, &d, "fp32 bias misaligned", "bias:", "4-byte", "TK_F32");
            d.bias_type = TK_BF16;
            if (off % 2)
                REFUSED(h, &d, "bf16 bias misaligned", "bias:", "2-byte", "TK_BF16");
            else
                accepted(h, &d, "bf16 bias at 2 mod 4");
        }
    }
    tk_destroy(h);
}

static void test_bias_grad(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS; i++) {
        const int kind = kinds[i];
        tk_gemm_desc d = desc_of(kind);
        d.bias_grad = FAKE_BG;
        if (!backward(kind)) {
            REFUSED(h, &d, "bias_grad with a forward kind", "bias_grad:", "is set", kind_str(kind),
                    "TK_EPI_BACKWARD");
            continue;
        }
        for (int off = 1; off < 4; off++) {
            d.bias_grad = AT(FAKE_BG, off);
            REFUSED(h, &d, "bias_grad misaligned", "bias_grad:", "4-byte");
        }
        /* inside D (here C, in place), or its last column sum on D's first element */
        d.bias_grad = AT(FAKE_C, 4 * 8);
        REFUSED(h, &d, "bias_grad inside D", "bias_grad:", "overlaps D", "disjoint");
        d.bias_grad = AT(FAKE_C, -4 * (out_cols(kind) - 1));
        REFUSED(h, &d, "bias_grad's end on D", "bias_grad:", "overlaps D");
        d.bias_grad = AT(FAKE_C, -4 * out_cols(kind));   /* just before D */
        accepted(h, &d, "bias_grad just before D");
        d.bias_grad = AT(FAKE_C, 4 * ((M - 1) * out_cols(kind) + out_cols(kind)));   /* just after */
        accepted(h, &d, "bias_grad just after D");
    }
    tk_destroy(h);
}

static void test_aux(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS; i++) {
        const int kind = kinds[i];
        char need[32];
        snprintf(need, sizeof need, ">= %lld", (long long)aux_cols(kind));
        tk_gemm_desc d = desc_of(kind);
        if (backward(kind)) {
            d.aux = NULL;
            REFUSED(h, &d, "aux NULL", "aux:", "NULL", kind_str(kind), "z");
            d.ldaux = 0;
            REFUSED(h, &d, "aux NULL, ldaux 0", "aux:", "NULL");
        } else {
            d.ldaux = aux_cols(kind);
            REFUSED(h, &d, "ldaux without aux", "ldaux:", "aux is NULL", "expected 0");
        }
        d = desc_of(kind);
        d.aux = AT(FAKE_AUX, 1);
        d.ldaux = aux_cols(kind);
        REFUSED(h, &d, "aux misaligned", "aux:", "2-byte");
        d.aux = FAKE_AUX;
        d.ldaux = aux_cols(kind) - 1;   /* GATED's z holds both halves: N, not N/2 */
        REFUSED(h, &d, "ldaux short", "ldaux:", "too small", need);
        d.ldaux = INT64_MAX / 4;
        REFUSED(h, &d, "ldaux huge", "ldaux:", "INT64_MAX");
        d.ldaux = aux_cols(kind) + 3;   /* any larger one: 2-byte elements */
        accepted(h, &d, "ldaux padded");
        d.ldaux = aux_cols(kind);
        d.aux = AT(FAKE_C, 2 * 10);   /* D is C here */
        REFUSED(h, &d, "aux inside D", "aux:", "overlaps D", "disjoint");
        d.aux = AT(FAKE_C, -2 * ((M - 1) * aux_cols(kind) + aux_cols(kind)));   /* ends where D starts */
        accepted(h, &d, "aux just before D");
        d = desc_of(kind);
        d.d = FAKE_D;
        d.ldd = out_cols(kind);
        d.aux = AT(FAKE_D, 4 * out_cols(kind) * (M - 1));
        d.ldaux = aux_cols(kind);
        REFUSED(h, &d, "aux on D's last row", "aux:", "overlaps D");
        d.aux = FAKE_C;   /* C is not read: free */
        accepted(h, &d, "aux on the unused C");
    }
    tk_destroy(h);
}

/* D: d with ldd >= its columns, or C (ldd 0); C read as the residual when
 * beta != 0, with D's columns; for GATED_BACKWARD beta must be 0. */
static void test_d_and_c(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS; i++) {
        const int kind = kinds[i];
        const int64_t cols = out_cols(kind);
        char need[32];
        snprintf(need, sizeof need, ">= %lld", (long long)cols);
        tk_gemm_desc d = desc_of(kind);
        d.ldd = cols;
        REFUSED(h, &d, "ldd without d", "ldd:", "d is NULL", "expected 0");
        /* D is C: C has D's columns (GATED N/2, GATED_BACKWARD 2N), not N */
        d = desc_of(kind);
        d.problem.ldc = cols - 1;
        REFUSED(h, &d, "D = C, ldc short", "ldc:", need);
        d.problem.c = NULL;
        d.problem.ldc = cols;
        REFUSED(h, &d, "D = C, C NULL", "C:", "NULL");
        d.problem.c = AT(FAKE_C, 2);
        REFUSED(h, &d, "D = C, C misaligned", "C:", "4-byte");
        /* D apart */
        d = desc_of(kind);
        d.d = FAKE_D;
        d.ldd = cols - 1;
        REFUSED(h, &d, "ldd short", "ldd:", "too small", need);
        d.ldd = cols;
        d.d = AT(FAKE_D, 2);
        REFUSED(h, &d, "D misaligned", "D:", "4-byte");
        d.problem.c_type = TK_BF16;
        accepted(h, &d, "bf16 D at 2 mod 4");
        d.d = AT(FAKE_D, 1);
        REFUSED(h, &d, "bf16 D misaligned", "D:", "2-byte");
        d = desc_of(kind);
        d.d = FAKE_D;
        d.ldd = cols;
        d.problem.c = AT(FAKE_C, 1);   /* beta 0: C is not read, not checked */
        d.problem.ldc = -5;
        accepted(h, &d, "C unused, anything");
        if (kind == TK_EPI_GATED_BACKWARD) {
            d = desc_of(kind);
            d.problem.beta = 0.5f;
            REFUSED(h, &d, "beta 0.5", "beta:", "0.5", "expected 0");
            continue;
        }
        /* the residual: beta != 0 */
        d = desc_of(kind);
        d.d = FAKE_D;
        d.ldd = cols;
        d.problem.beta = 1.0f;
        d.problem.c = NULL;
        REFUSED(h, &d, "residual NULL", "C:", "NULL");
        d.problem.c = FAKE_C;
        d.problem.ldc = cols - 1;
        REFUSED(h, &d, "residual ldc short", "ldc:", need);
        d.problem.ldc = cols;
        accepted(h, &d, "residual");
    }
    /* the plain product's C keeps N columns */
    tk_gemm_desc d = desc_of(TK_EPI_GATED);
    d.epilogue = TK_EPI_NONE;
    d.activation = TK_ACT_NONE;
    REFUSED(h, &d, "plain product, ldc N/2", "ldc:", ">= 32");
    tk_destroy(h);
}

/* D and C with beta != 0: the same matrix or apart. */
static void test_overlap_d_c(void)
{
    tk_handle h = make_handle();
    tk_gemm_desc d = desc_of(TK_EPI_BIAS_ACT);
    d.problem.beta = 1.0f;
    d.d = AT(FAKE_C, 4 * N);   /* one row on */
    d.ldd = N;
    REFUSED(h, &d, "D a row into C", "d:", "partly overlaps C", "ldd == ldc", "disjoint");
    d.d = FAKE_C;
    d.ldd = 2 * N;   /* the same start, another pitch */
    REFUSED(h, &d, "d == c, ldd != ldc", "d:", "partly overlaps C");
    d.problem.beta = 0.0f;   /* C not read: no residual to spoil */
    accepted(h, &d, "d == c, ldd != ldc, beta 0");
    d.problem.beta = 1.0f;
    d.ldd = N;
    accepted(h, &d, "d == c, ldd == ldc");
    d.d = AT(FAKE_C, 4 * M * N);   /* just past C */
    accepted(h, &d, "D just past C");
    d.d = AT(FAKE_C, -4 * M * N);   /* just before */
    accepted(h, &d, "D just before C");
    d.d = AT(FAKE_C, -4 * M * N + 4);
    REFUSED(h, &d, "D's last element on C's first", "d:", "partly overlaps C");
    tk_destroy(h);
}

/* b_up: GATED only; B's op and ldb, K x N/2; B then needs N/2 columns. */
static void test_b_up(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS; i++) {
        if (kinds[i] == TK_EPI_GATED)
            continue;
        tk_gemm_desc d = desc_of(kinds[i]);
        d.b_up = FAKE_UP;
        REFUSED(h, &d, "b_up with another kind", "b_up:", "is set", kind_str(kinds[i]), "TK_EPI_GATED");
    }
    tk_gemm_desc d = desc_of(TK_EPI_GATED);
    d.b_up = AT(FAKE_UP, 1);
    REFUSED(h, &d, "b_up misaligned", "b_up:", "2-byte");
    /* op_b N: B and b_up stored K x N/2 */
    d.b_up = FAKE_UP;
    d.problem.ldb = N / 2;
    accepted(h, &d, "b_up, ldb N/2");
    d.b_up = NULL;
    REFUSED(h, &d, "no b_up, ldb N/2", "ldb:", ">= 32");
    d.b_up = FAKE_UP;
    d.problem.ldb = N / 2 - 1;
    REFUSED(h, &d, "b_up, ldb short", "ldb:", ">= 16");
    /* op_b T: stored N/2 x K with b_up, N x K without: ldb >= K either way */
    d = desc_of(TK_EPI_GATED);
    d.problem.op_b = TK_OP_T;
    d.problem.ldb = K;
    d.b_up = FAKE_UP;
    accepted(h, &d, "b_up, op_b T");
    d.problem.b = NULL;
    REFUSED(h, &d, "b_up, B NULL", "B:", "NULL");
    tk_destroy(h);
}

/* The kernels' form: D resolved, b_up resolved to B's up half, D's columns. */
static void test_epi_args(void)
{
    tk_epi_args e;
    tk_gemm_desc d = desc_of(TK_EPI_GATED);
    tk_epi_args_of(&d, &e);
    CHECK(e.kind == TK_EPI_GATED && e.act == TK_ACT_SILU && e.out_cols == N / 2, "GATED: kind %d act %d cols %lld",
          e.kind, e.act, (long long)e.out_cols);
    CHECK(e.d == FAKE_C && e.ldd == N / 2, "D is C: %p, ldd %lld", e.d, (long long)e.ldd);
    CHECK(e.b_up == AT(FAKE_B, 2 * (N / 2)), "op_b N: the up half N/2 elements on: %p", e.b_up);
    d.problem.op_b = TK_OP_T;
    d.problem.ldb = K + 8;
    tk_epi_args_of(&d, &e);
    CHECK(e.b_up == AT(FAKE_B, 2 * (N / 2) * (K + 8)), "op_b T: the up half N/2 rows on: %p", e.b_up);
    d.b_up = FAKE_UP;
    tk_epi_args_of(&d, &e);
    CHECK(e.b_up == FAKE_UP, "b_up given: %p", e.b_up);
    d.problem.b = NULL;   /* K == 0: B is not read */
    d.b_up = NULL;
    tk_epi_args_of(&d, &e);
    CHECK(e.b_up == NULL, "B NULL: b_up %p", e.b_up);

    d = desc_of(TK_EPI_BIAS_ACT);
    d.bias = FAKE_BIAS;
    d.bias_type = TK_BF16;
    d.bias_along = TK_BIAS_ROWS;
    d.d = FAKE_D;
    d.ldd = N + 8;
    d.aux = FAKE_AUX;
    d.ldaux = N;
    tk_epi_args_of(&d, &e);
    CHECK(e.bias == FAKE_BIAS && e.bias_bf16 && e.bias_rows && e.d == FAKE_D && e.ldd == N + 8 && e.aux == FAKE_AUX &&
              e.ldaux == N && !e.b_up && !e.bias_grad && e.out_cols == N,
          "BIAS_ACT: fields not carried");
    d.bias_type = TK_F32;
    d.bias_along = TK_BIAS_COLUMNS;
    tk_epi_args_of(&d, &e);
    CHECK(!e.bias_bf16 && !e.bias_rows, "fp32 bias per column");

    d = desc_of(TK_EPI_GATED_BACKWARD);
    d.bias_grad = FAKE_BG;
    tk_epi_args_of(&d, &e);
    CHECK(e.out_cols == 2 * N && e.bias_grad == FAKE_BG && e.aux == FAKE_AUX && e.ldaux == 2 * N,
          "GATED_BACKWARD: cols %lld", (long long)e.out_cols);
}

/* M or N == 0 writes nothing and needs no device, but for bias_grad's
 * zeros (M == 0); K == 0 is no no-op: the formula on P = 0, on a kernel. */
static void test_noops(void)
{
    tk_handle h = make_handle();
    for (int i = 0; i < NKINDS; i++) {
        const int kind = kinds[i];
        tk_gemm_desc d = desc_of(kind);
        d.problem.m = 0;
        noop(h, &d, "M 0");
        d.problem.a = d.problem.b = NULL;
        d.problem.c = NULL;
        d.aux = NULL;
        d.ldaux = backward(kind) ? 0 : d.ldaux;
        noop(h, &d, "M 0, NULL operands");
        d = desc_of(kind);
        d.problem.n = 0;
        d.problem.ldb = 1;
        d.problem.ldc = 1;
        noop(h, &d, "N 0");
        if (backward(kind)) {
            d.bias_grad = FAKE_BG;   /* no columns: nothing to zero */
            noop(h, &d, "N 0, bias_grad");
            d = desc_of(kind);
            d.problem.m = 0;
            d.bias_grad = FAKE_BG;   /* zeros: on the device */
            accepted(h, &d, "M 0, bias_grad");
        }
        /* a no-op's fields are still checked */
        d = desc_of(kind);
        d.problem.m = 0;
        d.bias_type = 7;
        REFUSED(h, &d, "M 0, bias_type 7", "bias_type:");
        d = desc_of(kind);
        d.problem.m = 0;
        d.problem.ldc = out_cols(kind) - 1;
        REFUSED(h, &d, "M 0, ldc short", "ldc:");
        d = desc_of(kind);
        d.problem.m = 0;
        d.aux = FAKE_AUX;
        d.ldaux = 1;   /* aux's extent is not measured without rows */
        noop(h, &d, "M 0, ldaux short");
        /* K == 0: A and B not read, but D is written */
        d = desc_of(kind);
        d.problem.k = 0;
        accepted(h, &d, "K 0");
        d.problem.a = d.problem.b = NULL;
        accepted(h, &d, "K 0, A and B NULL");
    }
    tk_destroy(h);
}

/* A caller compiled against version 2 (size up to group_error) runs as
 * before: the version-3 bytes past its size are not read. */
static void test_version2_desc(void)
{
    tk_handle h = make_handle();
    tk_gemm_desc d = desc_of(TK_EPI_GATED);
    d.size = offsetof(tk_gemm_desc, group_error) + sizeof d.group_error;
    d.problem.ldc = N;
    d.activation = -9;   /* garbage, unread */
    d.bias = AT(FAKE_BIAS, 1);
    d.ldd = -4;
    d.bias_grad = AT(FAKE_BG, 3);
    accepted(h, &d, "version 2");
    d.problem.ldc = N / 2;   /* checked as a plain product: N columns */
    REFUSED(h, &d, "version 2, ldc N/2", "ldc:", ">= 32");
    d.problem.ldc = N;
    d.problem.m = 0;
    noop(h, &d, "version 2, M 0");
    /* and its group fields still work */
    d = desc_of(TK_EPI_GATED);
    d.size = offsetof(tk_gemm_desc, epilogue);
    d.problem.ldc = N;
    d.group_kind = TK_GROUP_BATCHED;
    d.count = 2;
    d.stride_a = M * K;
    d.stride_b = K * N;
    d.stride_c = M * N;
    accepted(h, &d, "version 2, batched");
    tk_destroy(h);
}

/* Refused calls leave C, D, aux and bias_grad as they were (host buffers
 * stand in: the checks read no memory), and so do calls refused at the
 * device. */
static void test_untouched(void)
{
    static float c[M * 2 * N], dd[M * 2 * N], bg[2 * N];
    static uint16_t aux[M * 2 * N];
    memset(c, 0x11, sizeof c);
    memset(dd, 0x22, sizeof dd);
    memset(bg, 0x33, sizeof bg);
    memset(aux, 0x44, sizeof aux);
    tk_handle h = make_handle();
    struct tk_handle_s fake;
    fh_other_device(&fake);
    for (int i = 0; i < NKINDS; i++) {
        const int kind = kinds[i];
        for (int bad = 0; bad < 5; bad++) {
            tk_gemm_desc d = desc_of(kind);
            d.problem.c = c;
            d.d = dd;
            d.ldd = out_cols(kind);
            d.aux = aux;
            d.ldaux = aux_cols(kind);
            d.bias_grad = backward(kind) ? bg : NULL;
            switch (bad) {
            case 0: d.activation = 77; break;
            case 1: d.ldd = 1; break;
            case 2: d.ldaux = 1; break;
            case 3: d.problem.layout = TK_COL_MAJOR; break;
            case 4: break;   /* valid: refused at the device */
            }
            tk_status st;
            if (!have_gpu()) {   /* a GPU would run the valid case on these host buffers */
                st = tk_gemm_run(h, &d, NULL, NULL);
                CHECK(st != TK_SUCCESS, "%s case %d ran", kind_str(kind), bad);
            }
            st = tk_gemm_run(&fake, &d, NULL, NULL);
            CHECK(st != TK_SUCCESS, "%s case %d ran on the fake handle", kind_str(kind), bad);
        }
    }
    const float *fs[] = { c, dd };
    const unsigned char *bytes;
    for (int b = 0; b < 2; b++) {
        bytes = (const unsigned char *)fs[b];
        for (size_t j = 0; j < sizeof c; j++)
            if (bytes[j] != (b ? 0x22 : 0x11)) {
                CHECK(0, "%s written at byte %zu", b ? "D" : "C", j);
                break;
            }
    }
    bytes = (const unsigned char *)bg;
    for (size_t j = 0; j < sizeof bg; j++)
        if (bytes[j] != 0x33) {
            CHECK(0, "bias_grad written at byte %zu", j);
            break;
        }
    bytes = (const unsigned char *)aux;
    for (size_t j = 0; j < sizeof aux; j++)
        if (bytes[j] != 0x44) {
            CHECK(0, "aux written at byte %zu", j);
            break;
        }
    tk_destroy(h);
}

/* tk_args_needs asks for TK_ACCEPT_EPILOGUE with an epilogue. */
static void test_needs_bit(void)
{
    tk_args a;
    memset(&a, 0, sizeof a);
    a.c_type = TK_F32;
    CHECK(!(tk_args_needs(&a) & TK_ACCEPT_EPILOGUE), "a plain product needs TK_ACCEPT_EPILOGUE");
    tk_epi_args e;
    memset(&e, 0, sizeof e);
    e.kind = TK_EPI_BIAS_ACT;
    a.epi = &e;
    const unsigned need = tk_args_needs(&a);
    CHECK((need & TK_ACCEPT_EPILOGUE) && (need & TK_ACCEPT_DENSE) && (need & TK_ACCEPT_C_F32),
          "an epilogue's needs: 0x%x", need);
}

/* Only a kernel whose family takes epilogues runs one: a named kernel
 * without the bit is refused (before any launch, on a modeled H100), the
 * message naming it and epilogues. The kernels with the bit would launch
 * on these fake pointers: their own check is asked instead, which must not
 * give that refusal. Auto-dispatch with no kernel that takes epilogues
 * refuses the call. Holds whichever families have the bit. */
static void test_kernels_and_bit(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    int refused = 0, takes = 0, auto_takes = 0;
    for (int i = 0; i < NKINDS; i++) {
        tk_gemm_desc d = desc_of(kinds[i]);
        for (int j = 0; j < tk_registry_count(); j++) {
            const tk_kernel *k = tk_registry_at(j);
            if (k->family->accepts & TK_ACCEPT_EPILOGUE) {
                tk_args a;
                int noop_ = 0;
                const tk_kernel *named = NULL;
                tk_epi_args e;
                const tk_widths w = { N, out_cols(kinds[i]), 0, 0 };
                CHECK(tk_prepare_widths(&fake, &d.problem, k->name, &a, &noop_, &named, 1, &w) == TK_SUCCESS,
                      "prepare: %s", tk_last_error(&fake));
                tk_epi_args_of(&d, &e);
                a.epi = &e;
                fh_attrs_args(&fake, &a);
                char why[TK_MSG_LEN] = "";
                tk_kernel_check(&fake, k, &a, why, sizeof why);
                CHECK(!contains(why, "epilogues"), "%s takes epilogues, but: %s", k->name, why);
                takes++;
                auto_takes += k->auto_rank > 0;
                continue;
            }
            tk_status st = tk_gemm_run(&fake, &d, k->name, NULL);
            const char *msg = tk_last_error(&fake);
            CHECK(st == TK_ERR_NOT_SUPPORTED && contains(msg, k->name) && contains(msg, "does not take epilogues"),
                  "%s on %s: %s (%s)", k->name, kind_str(kinds[i]), tk_status_string(st), msg);
            refused++;
        }
        if (!auto_takes) {
            tk_status st = tk_gemm_run(&fake, &d, NULL, NULL);
            CHECK(st == TK_ERR_NOT_SUPPORTED && starts(tk_last_error(&fake), "auto:"),
                  "auto-dispatch with no kernel taking epilogues: %s (%s)", tk_status_string(st),
                  tk_last_error(&fake));
        }
    }
    CHECK(refused + takes == NKINDS * tk_registry_count(), "kernels counted: %d + %d", refused, takes);
    CHECK(refused > 0, "every kernel takes epilogues: the refusal is not shown");
    /* the plain product is still taken by the kernels that take it */
    tk_gemm_desc d = desc_of(TK_EPI_BIAS_ACT);
    d.epilogue = TK_EPI_NONE;
    d.problem.ldc = N;
    tk_args a;
    int noop_ = 0;
    const tk_kernel *named = NULL;
    CHECK(tk_prepare_args(&fake, &d.problem, NULL, &a, &noop_, &named, 1) == TK_SUCCESS, "prepare plain");
    fh_attrs_args(&fake, &a);
    char why[TK_MSG_LEN] = "";
    const tk_kernel *k01 = tk_registry_find("k01_naive");
    CHECK(k01 && tk_kernel_check(&fake, k01, &a, why, sizeof why) == TK_SUCCESS, "k01_naive, plain: %s", why);
}

/* The Hopper kernels' own checks of a fused epilogue (k30_supports_epi;
 * asked directly, whether or not their families have the accept bit yet):
 * k31_wgmma_cluster and k30_wgmma_tma (128 x 256 tiles, the EPI instances)
 * take every kind (the gated ones on k30 only so far), with a D apart from
 * C where beta == 0, and refuse with a reason bias_grad, a misaligned up
 * half, a D apart with beta != 0 and K == 0; the configurations without
 * EPI instances refuse every epilogue. Never with the word "epilogues" of the accept
 * bit's refusal (test_kernels_and_bit). */
static void test_k30_fused(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    const tk_device dev = fake.dev;
    static const char *const with[] = { "k31_wgmma_cluster", "k30_wgmma_tma" };
    static const char *const without[] = { "k33_wgmma_128x128", "k35_wgmma_128x192", "k36_swap_16x64",
                                           "k38_swap_144x128", "k39_cluster_64x128", "k42_wgmma_64x128",
                                           "k45_cluster_128x128" };
    for (int i = 0; i < NKINDS; i++) {
        tk_gemm_desc d = desc_of(kinds[i]);
        tk_args a;
        int noop_ = 0;
        const tk_kernel *named = NULL;
        const tk_widths w = { N, out_cols(kinds[i]), 0, 0 };
        CHECK(tk_prepare_widths(&fake, &d.problem, "k01_naive", &a, &noop_, &named, 1, &w) == TK_SUCCESS,
              "prepare: %s", tk_last_error(&fake));
        tk_epi_args e;
        tk_epi_args_of(&d, &e);
        a.epi = &e;
        const int fused = 1;   /* every kind: k30; the gated ones not on k31 yet */
        char why[TK_MSG_LEN];
        for (int j = 0; j < 2; j++) {
            const tk_kernel *k = tk_registry_find(with[j]);
            CHECK(k != NULL, "%s registered", with[j]);
            if (!k)
                continue;
            why[0] = 0;
            /* k31 does not fuse the gated kinds yet (k30_epi_transform's GATE) */
            const int here = fused && !((kinds[i] == TK_EPI_GATED || kinds[i] == TK_EPI_GATED_BACKWARD) && j == 0);
            tk_status st = tk_kernel_supports_args(k, &a, &dev, why, sizeof why);
            CHECK(here ? st == TK_SUCCESS : st == TK_ERR_NOT_SUPPORTED && contains(why, "not fused"),
                  "%s, %s: %s (%s)", with[j], kind_str(kinds[i]), tk_status_string(st), why);
            CHECK(!contains(why, "epilogues"), "%s: %s", with[j], why);
            if (!here)
                continue;
            /* D apart from C: with beta 0 taken, with beta != 0 refused */
            tk_epi_args e2 = e;
            e2.d = FAKE_D;
            a.epi = &e2;
            st = tk_kernel_supports_args(k, &a, &dev, why, sizeof why);
            CHECK(st == TK_SUCCESS, "%s, %s, D apart, beta 0: %s (%s)", with[j], kind_str(kinds[i]),
                  tk_status_string(st), why);
            a.beta = 1.0f;
            st = tk_kernel_supports_args(k, &a, &dev, why, sizeof why);
            CHECK(st == TK_ERR_NOT_SUPPORTED && starts(why, "d:"), "%s, D apart, beta 1: %s (%s)", with[j],
                  tk_status_string(st), why);
            a.epi = &e;   /* in place: beta taken */
            st = tk_kernel_supports_args(k, &a, &dev, why, sizeof why);
            CHECK(st == TK_SUCCESS, "%s, in place, beta 1: %s (%s)", with[j], tk_status_string(st), why);
            a.beta = 0.0f;
            /* bias_grad (BACKWARD's option), K == 0 */
            e2 = e;
            e2.bias_grad = FAKE_BG;
            a.epi = &e2;
            st = tk_kernel_supports_args(k, &a, &dev, why, sizeof why);
            CHECK(kinds[i] == TK_EPI_GATED || (st == TK_ERR_NOT_SUPPORTED && starts(why, "bias_grad:")),
                  "%s, bias_grad: %s (%s)", with[j], tk_status_string(st), why);
            if (kinds[i] == TK_EPI_GATED) {   /* the up half's base must suit TMA */
                e2 = e;
                e2.b_up = AT(FAKE_UP, 2);
                st = tk_kernel_supports_args(k, &a, &dev, why, sizeof why);
                CHECK(st == TK_ERR_NOT_SUPPORTED && starts(why, "b_up:"), "%s, b_up misaligned: %s (%s)", with[j],
                      tk_status_string(st), why);
            }
            a.epi = &e;
            a.k = 0;
            st = tk_kernel_supports_args(k, &a, &dev, why, sizeof why);
            CHECK(st == TK_ERR_NOT_SUPPORTED && starts(why, "k:"), "%s, K == 0: %s (%s)", with[j],
                  tk_status_string(st), why);
            a.k = K;
            /* the plain product still taken */
            a.epi = NULL;
            st = tk_kernel_supports_args(k, &a, &dev, why, sizeof why);
            CHECK(st == TK_SUCCESS, "%s, plain: %s (%s)", with[j], tk_status_string(st), why);
            a.epi = &e;
        }
        for (size_t j = 0; j < sizeof without / sizeof without[0]; j++) {
            const tk_kernel *k = tk_registry_find(without[j]);
            CHECK(k != NULL, "%s registered", without[j]);
            if (!k)
                continue;
            why[0] = 0;
            tk_status st = tk_kernel_supports_args(k, &a, &dev, why, sizeof why);
            CHECK(st == TK_ERR_NOT_SUPPORTED && starts(why, "epilogue:") && !contains(why, "epilogues"),
                  "%s, %s: %s (%s)", without[j], kind_str(kinds[i]), tk_status_string(st), why);
        }
    }
}

/* MLP_M x MLP_N x MLP_K (GPT-2's c_fc: 2048 tokens, 768 -> 3072): desc_of
 * at that shape, op_b T (nn.Linear's weight) or N, D in place. */
enum { MLP_M = 2048, MLP_N = 3072, MLP_K = 768 };

static tk_gemm_desc mlp_desc(int kind, int op_b_t)
{
    tk_gemm_desc d = desc_of(kind);
    d.problem.m = MLP_M;
    d.problem.n = MLP_N;
    d.problem.k = MLP_K;
    d.problem.op_b = op_b_t ? TK_OP_T : TK_OP_N;
    d.problem.lda = MLP_K;
    d.problem.ldb = op_b_t ? MLP_K : MLP_N;
    d.problem.ldc = kind == TK_EPI_GATED ? MLP_N / 2 : kind == TK_EPI_GATED_BACKWARD ? 2 * MLP_N : MLP_N;
    if (d.aux)
        d.ldaux = kind == TK_EPI_GATED_BACKWARD ? 2 * MLP_N : MLP_N;
    return d;
}

/* Auto-dispatch with an epilogue (the fused kinds: bias_act, gated,
 * backward) picks a fused Hopper kernel at an MLP's shape (GPT-2's c_fc:
 * 2048 tokens, 768 -> 3072, nn.Linear's op T weight; and the NN form):
 * k30_wgmma_tma's ping-pong instance (K30_EPI_RANK, above k31's), never
 * k01_naive. */
static void test_auto_pick(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < NKINDS; i++) {
            if (kinds[i] == TK_EPI_GATED_BACKWARD)
                continue;
            const int gated = kinds[i] == TK_EPI_GATED;
            const int64_t n = MLP_N;
            tk_gemm_desc d = mlp_desc(kinds[i], t);
            tk_args a;
            int noop_ = 0;
            const tk_kernel *named = NULL;
            const tk_widths w = { n, gated ? n / 2 : n, 0, 0 };
            CHECK(tk_prepare_widths(&fake, &d.problem, NULL, &a, &noop_, &named, 1, &w) == TK_SUCCESS, "prepare: %s",
                  tk_last_error(&fake));
            tk_epi_args e;
            tk_epi_args_of(&d, &e);
            a.epi = &e;
            fh_attrs_args(&fake, &a);
            tk_route r;
            int ok = tk_route_choose(&fake, &a, &r, 0);
            CHECK(ok && r.k && !strcmp(r.k->name, "k30_wgmma_tma"),
                  "%s op_b %s: auto picked %s", kind_str(kinds[i]), t ? "T" : "N", ok && r.k ? r.k->name : "nothing");
        }
}

/* kind at m x n x k with op_b T (nn.Linear's weights, the layout
 * k40_skinny reads) as the library hands it to a kernel: tk_args with
 * the epilogue e (D in place, beta 0; the backward kinds with aux; up: a
 * b_up of its own for GATED, else B's second half). */
static void prep_nt(struct tk_handle_s *fake, int kind, int act, int64_t m, int64_t n, int64_t k, int up, tk_args *a,
                    tk_epi_args *e)
{
    tk_gemm_desc d = desc_of(kind);
    const int64_t cols = kind == TK_EPI_GATED ? n / 2 : kind == TK_EPI_GATED_BACKWARD ? 2 * n : n;
    d.activation = act;
    d.problem.m = m;
    d.problem.n = n;
    d.problem.k = k;
    d.problem.op_b = TK_OP_T;
    d.problem.lda = k;
    d.problem.ldb = k;
    d.problem.ldc = cols;
    if (d.aux)
        d.ldaux = kind == TK_EPI_GATED_BACKWARD ? 2 * n : n;
    if (up && kind == TK_EPI_GATED)
        d.b_up = FAKE_UP;
    int noop_ = 0;
    const tk_kernel *named = NULL;
    const tk_widths w = { kind == TK_EPI_GATED && up ? n / 2 : n, cols, 0, 2 };
    CHECK(tk_prepare_widths(fake, &d.problem, NULL, a, &noop_, &named, 1, &w) == TK_SUCCESS, "prepare %s: %s",
          kind_str(kind), tk_last_error(fake));
    tk_epi_args_of(&d, e);
    a->epi = e;
}

/* k40_skinny's own check of a fused epilogue (k40_supports_epi): every
 * kind in both orientations (the weights on B, or on A where N < M),
 * with D apart from C at any beta and K == 0; refused with a reason:
 * bias_grad, GATED with N < M (its row pairs are the streamed weights'),
 * and as without an epilogue op_b N. The epilogue's instance is not the
 * dense one, and a misaligned up half takes the element-load instance. */
static void test_k40_fused(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    const tk_device dev = fake.dev;
    const tk_kernel *k40 = tk_registry_find("k40_skinny");
    CHECK(k40 && (k40->family->accepts & TK_ACCEPT_EPILOGUE), "k40_skinny takes epilogues (table.def)");
    if (!k40)
        return;
    char why[TK_MSG_LEN];
    for (int i = 0; i < NKINDS; i++)
        for (int sw = 0; sw < 2; sw++) {
            tk_args a;
            tk_epi_args e;
            prep_nt(&fake, kinds[i], TK_ACT_SILU, sw ? 4096 : 16, sw ? 16 : 4096, 1000, 0, &a, &e);
            why[0] = 0;
            tk_status st = tk_kernel_supports_args(k40, &a, &dev, why, sizeof why);
            const int here = !(sw && kinds[i] == TK_EPI_GATED);
            CHECK(here ? st == TK_SUCCESS : st == TK_ERR_NOT_SUPPORTED && starts(why, "epilogue:") && contains(why, "N >= M"),
                  "%s%s: %s (%s)", kind_str(kinds[i]), sw ? ", swapped" : "", tk_status_string(st), why);
            CHECK(!contains(why, "epilogues"), "%s: %s", kind_str(kinds[i]), why);
            if (!here)
                continue;
            tk_resources r, rd;
            tk_kernel_resources(k40, &a, &dev, &r);
            tk_args plain = a;
            plain.epi = NULL;
            tk_kernel_resources(k40, &plain, &dev, &rd);
            CHECK(r.func && rd.func && r.func != rd.func, "%s: the epilogue's instance is the dense one",
                  kind_str(kinds[i]));
            /* D apart from C with beta != 0: C read, D written */
            tk_epi_args e2 = e;
            e2.d = FAKE_D;
            a.epi = &e2;
            a.beta = kinds[i] == TK_EPI_GATED_BACKWARD ? 0.0f : 1.0f;
            st = tk_kernel_supports_args(k40, &a, &dev, why, sizeof why);
            CHECK(st == TK_SUCCESS, "%s, D apart, beta %g: %s (%s)", kind_str(kinds[i]), a.beta, tk_status_string(st),
                  why);
            a.beta = 0.0f;
            /* bias_grad refused; K == 0 taken */
            e2 = e;
            e2.bias_grad = FAKE_BG;
            st = tk_kernel_supports_args(k40, &a, &dev, why, sizeof why);
            CHECK(st == TK_ERR_NOT_SUPPORTED && starts(why, "bias_grad:"), "%s, bias_grad: %s (%s)",
                  kind_str(kinds[i]), tk_status_string(st), why);
            a.epi = &e;
            a.k = 0;
            st = tk_kernel_supports_args(k40, &a, &dev, why, sizeof why);
            CHECK(st == TK_SUCCESS, "%s, K == 0: %s (%s)", kind_str(kinds[i]), tk_status_string(st), why);
            a.k = 1000;
            a.op_b = TK_OP_N;
            st = tk_kernel_supports_args(k40, &a, &dev, why, sizeof why);
            CHECK(st == TK_ERR_NOT_SUPPORTED && contains(why, "op_b T"), "%s, op_b N: %s (%s)", kind_str(kinds[i]),
                  tk_status_string(st), why);
        }
    /* GATED's up half: 16-byte loads need its base aligned like B's */
    tk_args a;
    tk_epi_args e;
    prep_nt(&fake, TK_EPI_GATED, TK_ACT_SILU, 1, 4096, 1024, 1, &a, &e);
    tk_resources r, ru;
    tk_kernel_resources(k40, &a, &dev, &r);
    tk_epi_args e2 = e;
    e2.b_up = AT(FAKE_UP, 2);
    a.epi = &e2;
    CHECK(tk_kernel_supports_args(k40, &a, &dev, why, sizeof why) == TK_SUCCESS, "misaligned b_up: %s", why);
    tk_kernel_resources(k40, &a, &dev, &ru);
    CHECK(r.func != ru.func, "a misaligned b_up takes the 16-byte-load instance");
}

/* Auto-dispatch with an epilogue at decode (issue 39's priority: Llama's
 * gate/up + SwiGLU, M = 1..16, K = 4096, N = 2 x 14336, op_b T, the up
 * half in B or apart; Linear + bias + GELU) picks k40_skinny where the
 * dense product of the same shape gets it, and where the dense choice is
 * a configuration without fused epilogues (k36's swapped tiles) and k40
 * ranks next; elsewhere (long streams, 33 to 64 tokens) the fused k30. */
static void test_auto_pick_decode(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    static const struct { int kind, act; int64_t m, n, k; const char *want; } cases[] = {
        { TK_EPI_GATED, TK_ACT_SILU, 1, 28672, 4096, "k40_skinny" },   /* Llama-3 8B's gate/up */
        { TK_EPI_GATED, TK_ACT_SILU, 7, 28672, 4096, "k40_skinny" },
        { TK_EPI_GATED, TK_ACT_SILU, 16, 28672, 4096, "k40_skinny" },
        { TK_EPI_GATED, TK_ACT_SILU, 16, 57344, 8192, "k40_skinny" },  /* 70B's */
        { TK_EPI_GATED, TK_ACT_GELU_TANH, 4, 2 * 4096, 4096, "k40_skinny" },
        { TK_EPI_BIAS_ACT, TK_ACT_GELU_TANH, 1, 4096, 4096, "k40_skinny" },
        { TK_EPI_BIAS_ACT, TK_ACT_GELU_ERF, 16, 4096, 14336, "k40_skinny" },
        { TK_EPI_BIAS_ACT, TK_ACT_GELU_TANH, 16, 3072, 768, "k40_skinny" },   /* dense: k36_swap_16x64 */
        { TK_EPI_BIAS_ACT, TK_ACT_GELU_TANH, 32, 28672, 4096, "k40_skinny" },
        { TK_EPI_BACKWARD, TK_ACT_RELU, 8, 4096, 4096, "k40_skinny" },
        { TK_EPI_BIAS_ACT, TK_ACT_GELU_TANH, 1, 128256, 4096, "k30_wgmma_tma" },   /* dense: k34's long stream */
        { TK_EPI_BIAS_ACT, TK_ACT_GELU_TANH, 64, 3072, 768, "k30_wgmma_tma" },     /* dense: k36 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int up = 0; up < 1 + (cases[i].kind == TK_EPI_GATED); up++) {
            tk_args a;
            tk_epi_args e;
            prep_nt(&fake, cases[i].kind, cases[i].act, cases[i].m, cases[i].n, cases[i].k, up, &a, &e);
            fake.nattrs = 0;
            fh_attrs_args(&fake, &a);
            tk_route r;
            int ok = tk_route_choose(&fake, &a, &r, 0);
            const char *got = ok && r.k ? r.k->name : "nothing";
            CHECK(!strcmp(got, cases[i].want), "%s %lld x %lld x %lld%s: auto picked %s, expected %s",
                  kind_str(cases[i].kind), (long long)a.m, (long long)a.n, (long long)a.k, up ? " (b_up apart)" : "",
                  got, cases[i].want);
            /* the dense product's pick: k40 there means k40 here */
            tk_args plain = a;
            plain.epi = NULL;
            fake.nattrs = 0;
            fh_attrs_args(&fake, &plain);
            ok = tk_route_choose(&fake, &plain, &r, 0);
            CHECK(!(ok && r.k && !strcmp(r.k->name, "k40_skinny")) || !strcmp(got, "k40_skinny"),
                  "%s %lld x %lld x %lld: dense picks k40_skinny, the epilogue %s", kind_str(cases[i].kind),
                  (long long)a.m, (long long)a.n, (long long)a.k, got);
        }
}

/* D's columns of kind at the MLP shape (mlp_desc). */
static int64_t mlp_cols(int kind)
{
    return kind == TK_EPI_GATED ? MLP_N / 2 : kind == TK_EPI_GATED_BACKWARD ? 2 * MLP_N : MLP_N;
}

/* d at the MLP shape as the library hands it to a kernel on fake: tk_args
 * a with the epilogue e, and the attributes of every entry it would
 * launch in fake's cache. */
static void mlp_args(struct tk_handle_s *fake, const tk_gemm_desc *d, tk_args *a, tk_epi_args *e)
{
    int noop_ = 0;
    const tk_kernel *named = NULL;
    const tk_widths w = { MLP_N, mlp_cols(d->epilogue), 0, 0 };
    CHECK(tk_prepare_widths(fake, &d->problem, NULL, a, &noop_, &named, 1, &w) == TK_SUCCESS, "prepare: %s",
          tk_last_error(fake));
    tk_epi_args_of(d, e);
    a->epi = e;
    fh_attrs_args(fake, a);
}

/* Whether each of the n kernels names[] takes a on fake (take), or
 * refuses it with a reason that contains `reason` (NULL: any); label
 * names the case in failures. */
static void check_takes(struct tk_handle_s *fake, const char *const *names, int n, const tk_args *a, int take,
                        const char *reason, const char *label)
{
    for (int j = 0; j < n; j++) {
        const tk_kernel *kk = tk_registry_find(names[j]);
        char why[TK_MSG_LEN] = "";
        tk_status st = kk ? tk_kernel_check(fake, kk, a, why, sizeof why) : TK_ERR_INVALID_VALUE;
        CHECK(take ? st == TK_SUCCESS : st == TK_ERR_NOT_SUPPORTED && (!reason || contains(why, reason)),
              "%s: %s %s: %s (%s)", label, names[j], take ? "refuses" : "takes", tk_status_string(st), why);
    }
}

static const char *const sm80_fused[] = { "k20_mma_sync", "k21_mma_fastload" };

/* On an sm_80 GPU (an A100 as modeled: 108 SMs, 164 KB of shared memory
 * an SM) auto-dispatch gives every epilogue kind, at an MLP's shape (op_b
 * N and T), with bias_grad for the backward kinds and with a D apart from
 * C read as beta * C, to the fused sm_80+ instances (k21_mma_fastload,
 * above k20_mma_sync), never k01_naive; k20 and k21 take them themselves;
 * and a case they refuse (a misaligned up half) is refused with its
 * reason, so that auto-dispatch still runs it, on k01_naive. */
static void test_sm80_auto_pick(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 80);
    fake.dev.sm_count = 108;
    fake.dev.smem_per_sm = 164 * 1024;
    fake.dev.smem_per_block_optin = 163 * 1024;
    snprintf(fake.dev.name, sizeof fake.dev.name, "fake A100 (sm_80)");
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < NKINDS; i++)
            for (int apart = 0; apart < 2; apart++) {
                const int kind = kinds[i], gated = kind == TK_EPI_GATED, gbwd = kind == TK_EPI_GATED_BACKWARD;
                const int64_t cols = mlp_cols(kind);
                tk_gemm_desc d = mlp_desc(kind, t);
                if (backward(kind))
                    d.bias_grad = FAKE_BG;
                if (apart && !gbwd) {   /* D apart, C read as the residual */
                    d.d = FAKE_D;
                    d.ldd = cols;
                    d.problem.beta = 0.5f;
                }
                tk_args a;
                tk_epi_args e;
                mlp_args(&fake, &d, &a, &e);
                char label[96];
                snprintf(label, sizeof label, "sm_80 %s op_b %s%s", kind_str(kind), t ? "T" : "N",
                         apart ? " D apart" : "");
                check_takes(&fake, sm80_fused, 2, &a, 1, NULL, label);
                tk_route r;
                int ok = tk_route_choose(&fake, &a, &r, 0);
                CHECK(ok && r.k && !strcmp(r.k->name, "k21_mma_fastload"), "%s: auto picked %s", label,
                      ok && r.k ? r.k->name : "nothing");
                /* bias_grad's partial sums: a workspace of a float per tile row and column of D */
                size_t nflags = 0;
                const size_t ws = ok && r.k ? tk_kernel_workspace(r.k, &a, &fake.dev, &nflags) : 0;
                const size_t want = backward(kind) ? (size_t)((MLP_M + 127) / 128) * (size_t)cols * sizeof(float) : 0;
                CHECK(ws == want && nflags == 0, "%s: workspace %zu bytes, %zu flags (want %zu, 0)", label, ws, nflags,
                      want);
                if (!gated || apart)
                    continue;
                /* the up half misaligned for cp.async: refused with the reason, auto falls back to k01_naive */
                e.b_up = AT(FAKE_UP, 2);
                check_takes(&fake, sm80_fused, 2, &a, 0, "b_up:", "sm_80 gated, b_up misaligned");
                ok = tk_route_choose(&fake, &a, &r, 0);
                CHECK(ok && r.k && !strcmp(r.k->name, "k01_naive"), "sm_80 gated, b_up misaligned: auto picked %s",
                      ok && r.k ? r.k->name : "nothing");
            }
}

/* On sm_90, at the MLP shape (op_b N and T), the cases the fused Hopper
 * kernels refuse (k30_supports_epi: bias_grad; a D apart from C with beta
 * != 0) go to the fused sm_80+ instances (k21_mma_fastload), not
 * k01_naive; a case those refuse too (A's rows not 16-byte aligned, which
 * neither TMA nor cp.async takes; an epilogue takes no copy route) to
 * k01_naive. */
static void test_sm90_refused_pick(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    static const char *const hopper[] = { "k30_wgmma_tma", "k31_wgmma_cluster" };
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < NKINDS; i++)
            for (int c = 0; c < 3; c++) {
                const int kind = kinds[i];
                tk_gemm_desc d = mlp_desc(kind, t);
                const char *what = c == 0 ? "bias_grad" : c == 1 ? "D apart, beta 0.5" : "lda K + 1";
                if (c == 0 && !backward(kind))
                    continue;
                if (c == 0)
                    d.bias_grad = FAKE_BG;
                if (c == 1 && kind == TK_EPI_GATED_BACKWARD)
                    continue;   /* its beta must be 0 (tilekit.h) */
                if (c == 1) {
                    d.d = FAKE_D;
                    d.ldd = mlp_cols(kind);
                    d.problem.beta = 0.5f;
                }
                if (c == 2)
                    d.problem.lda = MLP_K + 1;
                tk_args a;
                tk_epi_args e;
                mlp_args(&fake, &d, &a, &e);
                char label[96];
                snprintf(label, sizeof label, "sm_90 %s op_b %s, %s", kind_str(kind), t ? "T" : "N", what);
                check_takes(&fake, hopper, 2, &a, 0, NULL, label);
                check_takes(&fake, sm80_fused, 2, &a, c < 2, c < 2 ? NULL : "leading dimension of A", label);
                tk_route r;
                const int ok = tk_route_choose(&fake, &a, &r, 0);
                const char *want = c < 2 ? "k21_mma_fastload" : "k01_naive";
                CHECK(ok && r.k && !strcmp(r.k->name, want), "%s: auto picked %s, expected %s", label,
                      ok && r.k ? r.k->name : "nothing", want);
            }
}

void tk_tests(void)
{
    TK_TEST(test_valid_descs);
    TK_TEST(test_none_with_fields);
    TK_TEST(test_kind_and_activation);
    TK_TEST(test_form);
    TK_TEST(test_n);
    TK_TEST(test_bias);
    TK_TEST(test_bias_grad);
    TK_TEST(test_aux);
    TK_TEST(test_d_and_c);
    TK_TEST(test_overlap_d_c);
    TK_TEST(test_b_up);
    TK_TEST(test_epi_args);
    TK_TEST(test_noops);
    TK_TEST(test_version2_desc);
    TK_TEST(test_untouched);
    TK_TEST(test_needs_bit);
    TK_TEST(test_kernels_and_bit);
    TK_TEST(test_k30_fused);
    TK_TEST(test_auto_pick);
    TK_TEST(test_k40_fused);
    TK_TEST(test_auto_pick_decode);
    TK_TEST(test_sm80_auto_pick);
    TK_TEST(test_sm90_refused_pick);
}
