/* test_quantize.c - tk_quantize_fp8's argument checks on the CPU (issue
 * 40): each bad field refused with TK_ERR_INVALID_VALUE and a message that
 * starts with its name; the descriptor's versioned-struct rule; valid calls
 * of every mode and format (odd code pointers, x only 2-byte aligned)
 * pass every check and reach the device check, which a stand-in handle of
 * device 0 with device 1 current refuses before any launch; an empty
 * matrix succeeds without a device. The kernels' division (tk_qdiv,
 * src/tiles/qdiv.h) against IEEE's on every scale it takes. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tilekit.h"
#include "lib/internal.h"
#include "lab/lab.h"
#include "tiles/qdiv.h"
#include "check.h"
#include "fake_handle.h"

#define FAKE(i) ((void *)(uintptr_t)((uintptr_t)(i) << 28))

enum { ROWS = 300, COLS = 4100, LDX = 4104, LDQ = 4112 };

static tk_quantize_desc qdesc(int mode, int format)
{
    tk_quantize_desc d = TK_QUANTIZE_DESC_INIT;
    d.rows = ROWS;
    d.cols = COLS;
    d.x = FAKE(1);
    d.ldx = LDX;
    d.format = format;
    d.mode = mode;
    d.q = FAKE(2);
    d.ldq = LDQ;
    d.scale = (float *)FAKE(3);
    return d;
}

static void expect(tk_handle h, const tk_quantize_desc *d, tk_status want, const char *label, const char *field,
                   const char *word)
{
    const char *const words[] = { word, NULL };
    fh_check_outcome(h, tk_quantize_fp8(h, d, NULL), want, label, "tk_quantize_fp8", field, word ? words : words + 1);
}

/* A stand-in handle of device 0 while device 1 is current: a call that
 * passes its checks is refused at the device check, naming h. */
static void other_device(struct tk_handle_s *h)
{
    fh_init(h, 90);
    h->get_device = fh_current_is_1;
}

static void test_valid_calls_reach_the_device(void)
{
    struct tk_handle_s fake;
    other_device(&fake);
    for (int mode = TK_QUANT_TENSOR; mode <= TK_QUANT_128X128; mode++)
        for (int f = TK_FP8_E4M3; f <= TK_FP8_E5M2; f++) {
            tk_quantize_desc d = qdesc(mode, f);
            expect(&fake, &d, TK_ERR_INVALID_VALUE, "valid", "h:", "device 1 is current");
            d.x = (const void *)((uintptr_t)FAKE(1) + 2);   /* element-aligned only: narrower loads */
            d.q = (void *)((uintptr_t)FAKE(2) + 1);         /* codes are bytes: any address */
            d.ldx = COLS;
            d.ldq = COLS;
            expect(&fake, &d, TK_ERR_INVALID_VALUE, "valid, odd pointers", "h:", "device 1 is current");
        }
    tk_quantize_desc d = qdesc(TK_QUANT_1X128, TK_FP8_E4M3);
    d.ld_scale = ROWS + 4;   /* padded scale columns */
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "1x128, padded ld_scale", "h:", "device 1 is current");
    d = qdesc(TK_QUANT_128X128, TK_FP8_E4M3);
    d.ld_scale = (ROWS + 127) / 128;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "128x128, least ld_scale", "h:", "device 1 is current");
    if (!have_gpu()) {   /* a real handle without a GPU: NO_DEVICE once the checks pass */
        tk_handle h = make_handle();
        d = qdesc(TK_QUANT_ROW, TK_FP8_E5M2);
        const tk_status st = tk_quantize_fp8(h, &d, NULL);
        CHECK(st == TK_ERR_NO_DEVICE, "no GPU: %s (%s)", tk_status_string(st), tk_last_error(h));
        tk_destroy(h);
    }
}

/* rows or cols 0: nothing to write, no device needed, NULL pointers allowed. */
static void test_empty(void)
{
    tk_handle h = make_handle();
    for (int mode = TK_QUANT_TENSOR; mode <= TK_QUANT_128X128; mode++) {
        tk_quantize_desc d = qdesc(mode, TK_FP8_E4M3);
        d.rows = 0;
        d.x = NULL;
        d.q = NULL;
        d.scale = NULL;
        tk_status st = tk_quantize_fp8(h, &d, NULL);
        CHECK(st == TK_SUCCESS, "mode %d, rows 0: %s (%s)", mode, tk_status_string(st), tk_last_error(h));
        d = qdesc(mode, TK_FP8_E4M3);
        d.cols = 0;
        st = tk_quantize_fp8(h, &d, NULL);
        CHECK(st == TK_SUCCESS, "mode %d, cols 0: %s (%s)", mode, tk_status_string(st), tk_last_error(h));
    }
    tk_destroy(h);
}

static void test_descriptor_rule(void)
{
    struct tk_handle_s fake;
    other_device(&fake);
    CHECK(tk_quantize_fp8(NULL, NULL, NULL) == TK_ERR_INVALID_VALUE && starts(tk_last_error(NULL), "h:"),
          "NULL handle: %s", tk_last_error(NULL));
    expect(&fake, NULL, TK_ERR_INVALID_VALUE, "NULL d", "d:", "tk_quantize_desc");
    tk_quantize_desc d = qdesc(TK_QUANT_ROW, TK_FP8_E4M3);
    d.size = 8;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "size 8", "d->size:", "TK_QUANTIZE_DESC_INIT");
    /* a caller of a newer header: its zero bytes past ours are accepted, a set one refused */
    struct {
        tk_quantize_desc d;
        int64_t newer;
    } big;
    memset(&big, 0, sizeof big);
    big.d = qdesc(TK_QUANT_ROW, TK_FP8_E4M3);
    big.d.size = sizeof big;
    expect(&fake, &big.d, TK_ERR_INVALID_VALUE, "newer, zeros", "h:", "device 1 is current");
    big.newer = 1;
    expect(&fake, &big.d, TK_ERR_NOT_SUPPORTED, "newer, set", "d:", "newer version");
}

static void test_bad_fields(void)
{
    struct tk_handle_s fake;
    other_device(&fake);
    tk_quantize_desc d;
    for (int mode = TK_QUANT_TENSOR; mode <= TK_QUANT_128X128; mode++) {
        d = qdesc(mode, TK_FP8_E4M3);
        d.rows = -1;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "rows -1", "rows:", "negative");
        d = qdesc(mode, TK_FP8_E4M3);
        d.cols = -5;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "cols -5", "cols:", "negative");
        d = qdesc(mode, TK_FP8_NONE);
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "format 0", "format:", "TK_FP8_E4M3");
        d = qdesc(mode, 3);
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "format 3", "format:", "TK_FP8_E5M2");
        d = qdesc(mode, TK_FP8_E4M3);
        d.x = NULL;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "x NULL", "x:", "NULL");
        d = qdesc(mode, TK_FP8_E4M3);
        d.q = NULL;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "q NULL", "q:", "NULL");
        d = qdesc(mode, TK_FP8_E4M3);
        d.scale = NULL;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "scale NULL", "scale:", "NULL");
        d = qdesc(mode, TK_FP8_E4M3);
        d.ldx = COLS - 1;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "ldx < cols", "ldx:", "too small");
        d = qdesc(mode, TK_FP8_E4M3);
        d.ldq = 0;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "ldq 0", "ldq:", "too small");
        d = qdesc(mode, TK_FP8_E4M3);
        d.x = (const void *)((uintptr_t)FAKE(1) + 1);
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "x odd", "x:", "2-byte aligned");
        d = qdesc(mode, TK_FP8_E4M3);
        d.scale = (float *)((uintptr_t)FAKE(3) + 2);
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "scale misaligned", "scale:", "4-byte aligned");
        d = qdesc(mode, TK_FP8_E4M3);
        d.ldx = INT64_MAX / 2;
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "x spans too much", "ldx:", "INT64_MAX");
        /* overlaps: the codes or the scales over the input, the scales over the codes */
        d = qdesc(mode, TK_FP8_E4M3);
        d.q = (void *)((uintptr_t)FAKE(1) + 2 * LDX * 10);
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "q over x", "q:", "overlaps x");
        d = qdesc(mode, TK_FP8_E4M3);
        d.scale = (float *)((uintptr_t)FAKE(1) + 4 * 1000);
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "scale over x", "scale:", "overlaps x");
        d = qdesc(mode, TK_FP8_E4M3);
        d.scale = (float *)((uintptr_t)FAKE(2) + (uintptr_t)LDQ * (ROWS - 1));
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "scale over q", "scale:", "overlaps q");
        d = qdesc(mode, TK_FP8_E4M3);
        d.scale = (float *)((uintptr_t)FAKE(2) + (uintptr_t)LDQ * (ROWS - 1) + COLS);   /* just past q */
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "scale right after q", "h:", "device 1 is current");
    }
    for (int mode = 0; mode <= 5; mode += 5) {
        d = qdesc(mode, TK_FP8_E4M3);
        expect(&fake, &d, TK_ERR_INVALID_VALUE, "mode 0 or 5", "mode:", "TK_QUANT_128X128");
    }
    d = qdesc(TK_QUANT_TENSOR, TK_FP8_E4M3);
    d.ld_scale = 1;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "tensor with ld_scale", "ld_scale:", "TK_QUANT_TENSOR");
    d = qdesc(TK_QUANT_ROW, TK_FP8_E4M3);
    d.ld_scale = ROWS;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "row with ld_scale", "ld_scale:", "no column blocks");
    d = qdesc(TK_QUANT_1X128, TK_FP8_E4M3);
    d.ld_scale = ROWS - 1;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "1x128, ld_scale < rows", "ld_scale:", "below rows");
    d = qdesc(TK_QUANT_128X128, TK_FP8_E4M3);
    d.ld_scale = 2;   /* ceil(300 / 128) = 3 */
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "128x128, ld_scale < ceil(rows / 128)", "ld_scale:", "ceil(rows / 128)");
    d = qdesc(TK_QUANT_1X128, TK_FP8_E4M3);
    d.ld_scale = INT64_MAX / 8;
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "1x128, huge ld_scale", "ld_scale:", "too large");
    /* the 1x128 scales span ld_scale x 33 column blocks: one placed ld_scale * 32 floats before q reaches it */
    d = qdesc(TK_QUANT_1X128, TK_FP8_E4M3);
    d.ld_scale = 1000;
    d.scale = (float *)((uintptr_t)FAKE(2) - 4 * 1000 * 32);
    expect(&fake, &d, TK_ERR_INVALID_VALUE, "1x128 scales' last block over q", "scale:", "overlaps q");
}

static float f32_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* tk_qdiv against fl32(x / s) as the kernels use it: every scale s =
 * fl32(amax / fmax) of a positive finite bf16 amax, both formats, that
 * tk_qdiv_fits; x of either sign up to amax over amax's top four binades
 * (while nothing underflows, both quotients scale exactly with x's
 * exponent, so these stand for the binades between), every 37th bf16
 * below, the binades around 2^-100 (where the residual stops being exact)
 * and the subnormals; every x with TK_QDIV_ALL set (1.9e9 pairs, ~15 s).
 * The bits must match where either quotient reaches 2^-20; below, both
 * must have x's sign and give the same code (zero). */
static void test_division(void)
{
    static const float fmax[2] = { 448.0f, 57344.0f };
    const int all = getenv("TK_QDIV_ALL") != NULL;
    long long pairs = 0, bad = 0;
    for (int f = 0; f < 2; f++)
        for (uint32_t ab = 1; ab <= 0x7f7f; ab++) {
            const float amax = f32_bits(ab << 16), s = amax / fmax[f];
            if (!tk_qdiv_fits(s))
                continue;
            const float r = tk_qdiv_recip(s);
            for (uint32_t xb = 0; xb <= ab; xb++) {
                const int near_amax = xb + 0x200 >= ab, near_edge = xb >= 0x0c80 && xb < 0x0e00;
                if (!all && !near_amax && !near_edge && xb > 0x100 && xb % 37)
                    continue;
                for (uint32_t sign = 0; sign <= 0x8000; sign += 0x8000) {
                    const float x = f32_bits((xb | sign) << 16), want = x / s, got = tk_qdiv(x, s, r);
                    const uint32_t w = bits_f32(want), g = bits_f32(got);
                    pairs++;
                    if (w == g)
                        continue;
                    const int small = fabsf(want) < 0x1p-20f && fabsf(got) < 0x1p-20f && (w ^ g) >> 31 == 0 &&
                                      tk_lab_fp8_encode(want, (tk_lab_fp8)f, 1) ==
                                          tk_lab_fp8_encode(got, (tk_lab_fp8)f, 1);
                    if (!small && bad++ < 5)
                        CHECK(0, "fmax %g amax %a x %a: tk_qdiv %a (0x%08x), x / s %a (0x%08x)", fmax[f], amax, x,
                              got, g, want, w);
                }
            }
        }
    CHECK(bad == 0, "%lld of %lld quotients differ", bad, pairs);
    CHECK(pairs > 100000000, "only %lld quotients checked", pairs);
}

void tk_tests(void)
{
    TK_TEST(test_division);
    TK_TEST(test_valid_calls_reach_the_device);
    TK_TEST(test_empty);
    TK_TEST(test_descriptor_rule);
    TK_TEST(test_bad_fields);
}
