/* test_fp8_args.c - the argument checks of FP8 operands (issue 40,
 * tk_gemm_desc version 4) on the CPU: each bad field refused with
 * TK_ERR_INVALID_VALUE and a message that starts with its name, for each
 * scale mode; scales with bf16 operands refused; a valid FP8 call refused
 * with TK_ERR_NOT_SUPPORTED (no kernel takes FP8 operands yet), and so are
 * an epilogue or many products with FP8; a bf16 call unchanged. */
#include <stdint.h>
#include <string.h>
#include "tilekit.h"
#include "lib/internal.h"
#include "check.h"
#include "fake_handle.h"

#define FAKE(i) ((void *)(uintptr_t)((i) << 20))

enum { M = 64, N = 256, K = 384 };

/* A valid FP8 call of the given mode: row-major, op_b T, fp32 C. */
static tk_gemm_desc fp8_desc(int mode)
{
    tk_gemm_desc d = TK_GEMM_DESC_INIT;
    d.problem = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_T, M, N, K, 1.0f, 0.0f, FAKE(1), K, FAKE(2), K,
                                   FAKE(3), N, TK_F32 };
    d.a_fp8 = TK_FP8_E4M3;
    d.b_fp8 = TK_FP8_E4M3;
    d.scale_mode = mode;
    d.scale_a = (const float *)FAKE(4);
    d.scale_b = (const float *)FAKE(5);
    if (mode == TK_SCALE_BLOCK) {
        d.ld_scale_a = M;
        d.ld_scale_b = (N + 127) / 128;
    }
    return d;
}

static void expect(tk_handle h, const tk_gemm_desc *d, tk_status want, const char *label, const char *field,
                   const char *word)
{
    const char *const words[] = { word, NULL };
    fh_check_outcome(h, tk_gemm_run(h, d, NULL, NULL), want, label, "tk_gemm_run", field, word ? words : words + 1);
}

static void test_valid_calls_refused_for_now(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++) {
        tk_gemm_desc d = fp8_desc(mode);
        expect(&fake, &d, TK_ERR_NOT_SUPPORTED, "valid FP8 call", "a_fp8, b_fp8:", "no tilekit kernel does yet");
        d.a_fp8 = TK_FP8_E5M2;   /* the gradient-side pairing */
        expect(&fake, &d, TK_ERR_NOT_SUPPORTED, "e5m2 x e4m3", "a_fp8, b_fp8:", "TK_FP8_E5M2 x TK_FP8_E4M3");
        d = fp8_desc(mode);
        d.epilogue = TK_EPI_BIAS_ACT;
        expect(&fake, &d, TK_ERR_NOT_SUPPORTED, "FP8 + epilogue", "epilogue:", "not supported yet");
        d = fp8_desc(mode);
        d.group_kind = TK_GROUP_BATCHED;
        d.count = 2;
        expect(&fake, &d, TK_ERR_NOT_SUPPORTED, "FP8 + batched", "group_kind:", "not supported yet");
    }
}

static void test_bad_fields(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_gemm_desc d;
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++) {
        d = fp8_desc(mode);
        d.a_fp8 = 3;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "a_fp8 3", "a_fp8:", "not a tk_fp8_format");
        d = fp8_desc(mode);
        d.b_fp8 = -1;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "b_fp8 -1", "b_fp8:", "not a tk_fp8_format");
        d = fp8_desc(mode);
        d.b_fp8 = TK_FP8_NONE;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "one operand bf16", "b_fp8:", "both operands in FP8");
        d = fp8_desc(mode);
        d.scale_a = NULL;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "no scale_a", "scale_a:", "NULL");
        d = fp8_desc(mode);
        d.scale_b = NULL;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "no scale_b", "scale_b:", "NULL");
        d = fp8_desc(mode);
        d.scale_b = (const float *)((uintptr_t)FAKE(5) + 2);
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "scale_b misaligned", "scale_b:", "4-byte aligned");
    }
    d = fp8_desc(TK_SCALE_NONE);
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "no scale mode", "scale_mode:", "with FP8 operands");
    d = fp8_desc(TK_SCALE_BLOCK + 1);
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "scale mode 4", "scale_mode:", "with FP8 operands");
    d = fp8_desc(TK_SCALE_ROW);
    d.ld_scale_a = M;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "ld with row scales", "ld_scale_a:", "only TK_SCALE_BLOCK");
    /* block scales: K a multiple of 128, the strides at least the scales' extents */
    d = fp8_desc(TK_SCALE_BLOCK);
    d.problem.k = K + 64;
    d.problem.lda = d.problem.ldb = K + 64;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "block, K % 128", "k:", "not a multiple of 128");
    d = fp8_desc(TK_SCALE_BLOCK);
    d.ld_scale_a = M - 1;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "block, ld_scale_a < M", "ld_scale_a:", "below M");
    d = fp8_desc(TK_SCALE_BLOCK);
    d.ld_scale_b = 1;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "block, ld_scale_b < ceil(N / 128)", "ld_scale_b:", "ceil(N / 128)");
}

/* bf16 operands take none of the version-4 fields, and run as before. */
static void test_bf16_takes_no_scales(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_gemm_desc d = fp8_desc(TK_SCALE_TENSOR);
    d.a_fp8 = d.b_fp8 = TK_FP8_NONE;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "bf16 with scales", "scale_mode:", "take no scales");
    d.scale_mode = 0;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "bf16 with scale_a", "scale_a:", "take no scales");
    d.scale_a = d.scale_b = NULL;
    d.problem.c = FAKE(3);
    /* with every version-4 field 0 the call is the plain product: it passes the checks and asks for the
     * device, which this stand-in handle refuses (as test_epilogue's valid calls) */
    const tk_status st = tk_gemm_run(&fake, &d, NULL, NULL);
    CHECK(st != TK_ERR_INVALID_VALUE, "plain bf16 desc refused as invalid: %s", tk_last_error(&fake));
}

void tk_tests(void)
{
    TK_TEST(test_valid_calls_refused_for_now);
    TK_TEST(test_bad_fields);
    TK_TEST(test_bf16_takes_no_scales);
}
