/* test_plan.c - plans (issue 37, item 4) on the CPU: the argument checks of
 * tk_plan_create and tk_plan_run, the choice a plan fixes (auto-dispatch's,
 * on a modeled H100), and what a run still checks: the handle, NULL
 * pointers, and each pointer's alignment against what the plan's kernel
 * was chosen for, in the public problem's names (a column-major problem
 * swaps A and B inside). The bits of a run against tk_gemm_ex are checked
 * on the GPU (tests/gpu/test_plan.c).
 *
 * No run reaches a launch: the fake handles say another device is current,
 * which a run checks after the pointers. */
#include <stdint.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lib/internal.h"
#include "check.h"
#include "fake_handle.h"

#define FAKE_A ((const char *)(uintptr_t)0x100000)
#define FAKE_B ((const char *)(uintptr_t)0x200000)
#define FAKE_C ((char *)(uintptr_t)0x300000)

static tk_gemm_problem square(int64_t n)
{
    tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, n, n, n, 1.0f, 0.0f, NULL, n, NULL, n, NULL, n, TK_F32 };
    return p;
}

static void test_create_args(void)
{
    tk_handle h = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS, "tk_create");
    tk_gemm_problem p = square(64);
    tk_plan plan = (tk_plan)(uintptr_t)1;
    CHECK(tk_plan_create(h, &p, NULL, NULL) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "out:"),
          "NULL out: %s", tk_last_error(h));
    CHECK(tk_plan_create(NULL, &p, NULL, &plan) == TK_ERR_INVALID_VALUE && !plan &&
              starts(tk_last_error(NULL), "h:"),
          "NULL h: %s", tk_last_error(NULL));
    plan = (tk_plan)(uintptr_t)1;
    CHECK(tk_plan_create(h, NULL, NULL, &plan) == TK_ERR_INVALID_VALUE && !plan &&
              starts(tk_last_error(h), "problem:"),
          "NULL problem: %s", tk_last_error(h));
    p.op_b = (tk_op)3;
    CHECK(tk_plan_create(h, &p, NULL, &plan) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "op_b:"),
          "op_b 3: %s", tk_last_error(h));
    p = square(64);
    p.a = FAKE_A + 1;   /* a misaligned example is refused as by tk_gemm_ex */
    CHECK(tk_plan_create(h, &p, NULL, &plan) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "A:"),
          "A + 1: %s", tk_last_error(h));
    p = square(64);
    CHECK(tk_plan_create(h, &p, "k99_nope", &plan) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "kernel:"),
          "unknown kernel: %s", tk_last_error(h));
    if (!have_gpu()) {
        tk_status st = tk_plan_create(h, &p, NULL, &plan);
        CHECK(st == TK_ERR_NO_DEVICE && !plan, "no device: %s", tk_status_string(st));
    }
    CHECK(tk_plan_destroy(NULL) == TK_SUCCESS && tk_plan_kernel(NULL) == NULL, "NULL plan");
    tk_destroy(h);
}

/* A no-op needs no device: its plan is made and run anywhere, and a run
 * still checks what it is given. */
static void test_noop_plan(void)
{
    tk_handle h = NULL, other = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS && tk_create(&other) == TK_SUCCESS, "tk_create");
    tk_gemm_problem p = square(64);
    p.m = 0;
    tk_plan plan = NULL;
    tk_status st = tk_plan_create(h, &p, NULL, &plan);
    CHECK(st == TK_SUCCESS && plan && !*tk_last_error(h), "no-op plan: %s (%s)", tk_status_string(st),
          tk_last_error(h));
    if (!plan)
        return;
    CHECK(!strcmp(tk_plan_kernel(plan), ""), "a no-op's kernel: '%s'", tk_plan_kernel(plan));
    CHECK(tk_plan_run(h, plan, NULL, NULL, NULL, NULL) == TK_SUCCESS && !*tk_last_error(h), "run: %s",
          tk_last_error(h));
    CHECK(tk_plan_run(NULL, plan, NULL, NULL, NULL, NULL) == TK_ERR_INVALID_VALUE &&
              starts(tk_last_error(NULL), "h:"),
          "NULL h: %s", tk_last_error(NULL));
    CHECK(tk_plan_run(h, NULL, NULL, NULL, NULL, NULL) == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "plan:"),
          "NULL plan: %s", tk_last_error(h));
    CHECK(tk_plan_run(other, plan, NULL, NULL, NULL, NULL) == TK_ERR_INVALID_VALUE &&
              starts(tk_last_error(other), "h:") && contains(tk_last_error(other), "another handle"),
          "another handle: %s", tk_last_error(other));
    st = tk_plan_run(h, plan, NULL, NULL, FAKE_C + 2, NULL);   /* fp32 C at 2 mod 4 */
    CHECK(st == TK_ERR_INVALID_VALUE && starts(tk_last_error(h), "c:") && contains(tk_last_error(h), "4-byte"),
          "C + 2: %s", tk_last_error(h));
    CHECK(tk_plan_run(h, plan, FAKE_A + 1, NULL, NULL, NULL) == TK_ERR_INVALID_VALUE &&
              starts(tk_last_error(h), "a:"),
          "A + 1: %s", tk_last_error(h));
    CHECK(tk_plan_destroy(plan) == TK_SUCCESS, "destroy");
    tk_destroy(h);
    tk_destroy(other);
}

/* Made on a modeled H100 (and run where another device is current, so the
 * checks a run makes before the device's are seen, and no launch). */
static void test_fixed_choice(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_gemm_problem p = square(4096);
    fh_attrs(&fake, &p);
    tk_plan plan = NULL;
    tk_status st = tk_plan_create(&fake, &p, NULL, &plan);
    const char *chosen = tk_select_kernel(&fake, &p);
    CHECK(st == TK_SUCCESS && plan && chosen && !strcmp(tk_plan_kernel(plan), chosen), "auto plan: %s, %s, chose %s",
          tk_status_string(st), plan ? tk_plan_kernel(plan) : "-", chosen ? chosen : "-");
    if (!plan)
        return;
    fake.get_device = fh_current_is_1;
    /* NULL examples: the kernel was chosen for 16-byte aligned operands */
    st = tk_plan_run(&fake, plan, FAKE_A + 2, FAKE_B, FAKE_C, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(fake.err, "a:") && contains(fake.err, "16-byte"), "A + 2: %s",
          fake.err);
    st = tk_plan_run(&fake, plan, FAKE_A, FAKE_B + 8, FAKE_C, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(fake.err, "b:") && contains(fake.err, "16-byte"), "B + 8: %s",
          fake.err);
    st = tk_plan_run(&fake, plan, FAKE_A, NULL, FAKE_C, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(fake.err, "b:") && contains(fake.err, "NULL"), "NULL B: %s",
          fake.err);
    st = tk_plan_run(&fake, plan, FAKE_A + 256, FAKE_B + 16, FAKE_C + 32, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(fake.err, "h:") && contains(fake.err, "device 1"),
          "good pointers: past their checks to the device's: %s", fake.err);
    tk_plan_destroy(plan);

    /* a named kernel: that one, refused where it cannot run p */
    fake.get_device = fh_current_is_0;
    st = tk_plan_create(&fake, &p, "k20_mma_sync", &plan);
    CHECK(st == TK_SUCCESS && !strcmp(tk_plan_kernel(plan), "k20_mma_sync"), "named: %s", fake.err);
    tk_plan_destroy(plan);
    tk_gemm_problem odd = p;
    odd.k = odd.lda = 4095;
    fh_attrs(&fake, &odd);
    plan = (tk_plan)(uintptr_t)1;
    st = tk_plan_create(&fake, &odd, "k31_wgmma_cluster", &plan);
    CHECK(st == TK_ERR_NOT_SUPPORTED && !plan && contains(fake.err, "k31_wgmma_cluster"), "k31 on lda 4095: %s (%s)",
          tk_status_string(st), fake.err);
    /* auto on lda 4095: through a copy of A, so A's pointer needs only be a bf16 address */
    st = tk_plan_create(&fake, &odd, NULL, &plan);
    CHECK(st == TK_SUCCESS && !strcmp(tk_plan_kernel(plan), tk_select_kernel(&fake, &odd)), "copy plan: %s",
          fake.err);
    fake.get_device = fh_current_is_1;
    st = tk_plan_run(&fake, plan, FAKE_A + 2, FAKE_B, FAKE_C, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(fake.err, "h:"), "copied A at + 2: %s", fake.err);
    st = tk_plan_run(&fake, plan, FAKE_A + 1, FAKE_B, FAKE_C, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(fake.err, "a:") && contains(fake.err, "2-byte"), "A + 1: %s",
          fake.err);
    tk_plan_destroy(plan);

    /* K == 0: C = beta C, A and B never read */
    fake.get_device = fh_current_is_0;
    tk_gemm_problem k0 = square(64);
    k0.k = 0;
    k0.lda = 1;
    st = tk_plan_create(&fake, &k0, NULL, &plan);
    CHECK(st == TK_SUCCESS && !strcmp(tk_plan_kernel(plan), ""), "K = 0: %s '%s'", fake.err,
          plan ? tk_plan_kernel(plan) : "-");
    fake.get_device = fh_current_is_1;
    st = tk_plan_run(&fake, plan, NULL, NULL, FAKE_C, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(fake.err, "h:"), "K = 0, A and B NULL: %s", fake.err);
    st = tk_plan_run(&fake, plan, NULL, NULL, NULL, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(fake.err, "c:"), "K = 0, C NULL: %s", fake.err);
    tk_plan_destroy(plan);
}

/* Column-major: the normalized problem swaps A and B; a run's pointers and
 * messages keep the caller's names. */
static void test_column_major_names(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 80);
    tk_gemm_problem p = { TK_COL_MAJOR, TK_OP_N, TK_OP_N, 256, 256, 256, 1.0f, 0.0f, FAKE_A + 2, 256, FAKE_B, 256,
                          FAKE_C, 256, TK_F32 };
    fh_attrs(&fake, &p);
    tk_plan plan = NULL;
    tk_status st = tk_plan_create(&fake, &p, "k01_naive", &plan);
    CHECK(st == TK_SUCCESS, "k01_naive plan: %s", fake.err);
    if (!plan)
        return;
    fake.get_device = fh_current_is_1;
    st = tk_plan_run(&fake, plan, FAKE_A + 2, FAKE_B + 2, FAKE_C, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(fake.err, "b:") && contains(fake.err, "16-byte"),
          "B less aligned than its example: %s", fake.err);
    st = tk_plan_run(&fake, plan, FAKE_A + 6, FAKE_B + 16, FAKE_C + 4, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(fake.err, "c:") && contains(fake.err, "16-byte"),
          "C less aligned than its example: %s", fake.err);
    st = tk_plan_run(&fake, plan, FAKE_A + 6, FAKE_B + 16, FAKE_C + 16, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && starts(fake.err, "h:"), "A at + 6 like its example's + 2: %s", fake.err);
    tk_plan_destroy(plan);
}

void tk_tests(void)
{
    TK_TEST(test_create_args);
    TK_TEST(test_noop_plan);
    TK_TEST(test_fixed_choice);
    TK_TEST(test_column_major_names);
}
