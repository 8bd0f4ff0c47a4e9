/* test_plan.c - plans on the GPU (issue 37, item 4): a plan's runs against
 * fresh tk_gemm_ex calls of the same problem, bit for bit, 1000 of each,
 * with the pointers swapped between two operand sets of one shape every
 * run; the plan's kernel is tk_select_kernel's (or the one named); the
 * results exact (int_gemm.h). Then what a run still refuses (a pointer less
 * aligned than the plan's, leaving C untouched and the context healthy), a
 * plan under CUDA graph capture (replays exact; a plan through copies
 * refused), runs under the workspace settings (split-K off; a caller's
 * workspace, from which the handle allocates nothing; a cap of 0), and the
 * host time per call of tk_plan_run against tk_gemm_ex, enqueue only, the
 * median of SAMPLES samples of CALLS back-to-back calls (printed, not
 * checked: a figure for the lead's notes).
 *
 *   build/tests/gpu_test_plan [name-substring]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "lib/internal.h"
#include "../host/check.h"
#include "../../bench/host_time.h"
#include "int_gemm.h"

#define MSG 512
#define RUNS 1000          /* plan runs checked against tk_gemm_ex, over all shapes */
#define CALLS 200          /* back-to-back calls in one timing sample */
#define SAMPLES 15

static tk_handle ref_h;
static int sm;
static const char *only;   /* argv[1]: run the tests whose name holds it */

/* One per route: auto on an aligned product (k31 / k20), the split decode
 * (k40 on sm_90, four splits), a misaligned A (copied), bf16 C on few
 * tiles (k31's few-tile split on sm_90), a small product (no workspace). */
static const ig_shape shapes[] = {
    { "1024x1024x1024 (auto, aligned)", 1024, 1024, 1024, TK_OP_N, 0, TK_F32 },
    { "9x1000x16360 NT (k40 split)", 9, 1000, 16360, TK_OP_T, 0, TK_F32 },
    { "1024x1024x1024 bf16, A at +1 (copied)", 1024, 1024, 1024, TK_OP_N, 1, TK_BF16 },
    { "512x4096x4096 NT bf16 (few-tile split)", 512, 4096, 4096, TK_OP_T, 0, TK_BF16 },
    { "256x256x256 NT (small)", 256, 256, 256, TK_OP_T, 0, TK_F32 },
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static int make(ig_set *o, const ig_shape *s, uint32_t seed)
{
    char why[MSG];
    int bad = ig_make(o, s, seed, ref_h, why, sizeof why);
    CHECK(!bad, "setup %s: %s", s->name, why);
    return bad;
}

/* C of o read back into host memory dst (c_bytes). 0 when read. */
static int read_c(ig_set *o, void *dst, cudaStream_t s)
{
    char why[MSG];
    if (ig_read(o, s, why, sizeof why)) {
        CHECK(0, "%s", why);
        return 1;
    }
    memcpy(dst, o->host_c, o->c_bytes);
    return 0;
}

/* The plan's run with o's pointers, then tk_gemm_ex of the same problem
 * (kernel: the plan's; NULL: auto), each into a poisoned C, compared byte
 * for byte; with `exact`, the plan's result against the reference too.
 * 0 when all agree. */
static int pair(tk_handle h, tk_plan plan, ig_set *o, float alpha, const char *kernel, cudaStream_t s, void *buf,
                int exact, const char *label)
{
    tk_gemm_problem p = ig_problem(o, alpha);
    tk_status st = ig_poison(o, s) ? TK_ERR_CUDA : tk_plan_run(h, plan, p.a, p.b, p.c, s);
    if (st) {
        CHECK(0, "%s: %s: tk_plan_run: %s (%s)", label, o->s.name, tk_status_string(st), tk_last_error(h));
        return 1;
    }
    if (read_c(o, buf, s))
        return 1;
    char why[MSG];
    if (exact && ig_check(o, alpha, s, why, sizeof why)) {
        CHECK(0, "%s: %s: the plan's result: %s", label, o->s.name, why);
        return 1;
    }
    st = ig_poison(o, s) ? TK_ERR_CUDA : tk_gemm_ex(h, &p, kernel, s);
    if (st) {
        CHECK(0, "%s: %s: tk_gemm_ex: %s (%s)", label, o->s.name, tk_status_string(st), tk_last_error(h));
        return 1;
    }
    if (ig_read(o, s, why, sizeof why)) {
        CHECK(0, "%s", why);
        return 1;
    }
    if (memcmp(buf, o->host_c, o->c_bytes)) {
        size_t i = 0;
        while (((const unsigned char *)buf)[i] == ((const unsigned char *)o->host_c)[i])
            i++;
        CHECK(0, "%s: %s: the plan's C and tk_gemm_ex's differ at byte %zu of %zu", label, o->s.name, i, o->c_bytes);
        return 1;
    }
    return 0;
}

/* RUNS plan runs against RUNS tk_gemm_ex calls: the shapes in turn, two
 * operand sets each (the pointers swapped every run), auto plans and, for
 * the decode, a plan naming k40_skinny. */
static void test_plan_bits(void)
{
    tk_handle h = NULL;
    cudaStream_t s = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess,
          "setup");
    ig_set set[NSHAPES][2];
    tk_plan plan[NSHAPES];
    const char *kernel[NSHAPES];
    memset(set, 0, sizeof set);
    memset(plan, 0, sizeof plan);
    size_t most = 0;
    int ok = 1;
    for (int i = 0; i < NSHAPES && ok; i++) {
        ok = !make(&set[i][0], &shapes[i], 100 + 2 * (uint32_t)i) && !make(&set[i][1], &shapes[i], 101 + 2 * (uint32_t)i);
        if (!ok)
            break;
        kernel[i] = i == 1 && sm >= 80 ? "k40_skinny" : NULL;
        tk_gemm_problem p = ig_problem(&set[i][0], i % 2 ? 2.0f : 1.0f);
        tk_status st = tk_plan_create(h, &p, kernel[i], &plan[i]);
        const char *chosen = kernel[i] ? kernel[i] : tk_select_kernel(h, &p);
        CHECK(st == TK_SUCCESS && chosen && !strcmp(tk_plan_kernel(plan[i]), chosen), "%s: plan %s, kernel %s, auto %s",
              shapes[i].name, tk_status_string(st), plan[i] ? tk_plan_kernel(plan[i]) : "-", chosen ? chosen : "-");
        ok = st == TK_SUCCESS;
        if (set[i][0].c_bytes > most)
            most = set[i][0].c_bytes;
        printf("     %-40s plan runs %s\n", shapes[i].name, ok ? tk_plan_kernel(plan[i]) : "-");
    }
    void *buf = ok ? malloc(most) : NULL;
    int wrong = 0, runs = 0;
    for (int r = 0; r < RUNS && buf && wrong < 5; r++, runs++) {
        const int i = r % NSHAPES;
        /* every 50th run of a shape also against the reference */
        wrong += pair(h, plan[i], &set[i][(r / NSHAPES) % 2], i % 2 ? 2.0f : 1.0f, kernel[i], s, buf,
                      (r / NSHAPES) % 50 == 0, "bits");
    }
    CHECK(ok && runs == RUNS && !wrong, "%d of %d runs differed (stopped after %d)", wrong, RUNS, runs);
    printf("     %d plan runs equal to tk_gemm_ex, bit for bit (%d shapes, two pointer sets each)\n", runs - wrong,
           NSHAPES);
    free(buf);
    for (int i = 0; i < NSHAPES; i++) {
        tk_plan_destroy(plan[i]);
        ig_free(&set[i][0]);
        ig_free(&set[i][1]);
    }
    cudaStreamDestroy(s);
    tk_destroy(h);
}

/* A pointer less aligned than the plan's (16 bytes, A read by a TMA or
 * vector kernel) is refused before the GPU is touched: C untouched, the
 * context healthy, the next run right. */
static void test_plan_misaligned(void)
{
    ig_set o;
    if (make(&o, &shapes[0], 201))
        return;
    tk_handle h = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS, "tk_create");
    tk_gemm_problem p = ig_problem(&o, 1.0f);
    tk_plan plan = NULL;
    CHECK(tk_plan_create(h, &p, NULL, &plan) == TK_SUCCESS, "plan: %s", tk_last_error(h));
    char why[MSG];
    ig_poison(&o, NULL);
    tk_status st = tk_plan_run(h, plan, (const char *)p.a + 2, p.b, p.c, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE && strstr(tk_last_error(h), "16-byte"), "A at +2: %s (%s)", tk_status_string(st),
          tk_last_error(h));
    st = tk_plan_run(h, plan, p.a, p.b, (char *)p.c + 2, NULL);
    CHECK(st == TK_ERR_INVALID_VALUE, "C at +2: %s", tk_status_string(st));
    CHECK(!ig_untouched(&o, NULL, why, sizeof why), "%s", why);
    cudaError_t e = cudaDeviceSynchronize();
    CHECK(e == cudaSuccess && cudaGetLastError() == cudaSuccess, "the context: %s", cudaGetErrorString(e));
    CHECK(tk_plan_run(h, plan, p.a, p.b, p.c, NULL) == TK_SUCCESS && !ig_check(&o, 1.0f, NULL, why, sizeof why),
          "the run after: %s %s", tk_last_error(h), why);
    tk_plan_destroy(plan);
    tk_destroy(h);
    ig_free(&o);
}

/* Under capture: a plan without copies is captured and its replays are
 * exact (no workspace: unsplit); one through copies is refused. */
static void test_plan_capture(void)
{
    ig_set o, c;
    if (make(&o, &shapes[1], 301) || make(&c, &shapes[2], 302))
        return;
    tk_handle h = NULL;
    cudaStream_t s = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "setup");
    tk_gemm_problem p = ig_problem(&o, 1.0f), pc = ig_problem(&c, 1.0f);
    tk_plan plan = NULL, copies = NULL;
    CHECK(tk_plan_create(h, &p, NULL, &plan) == TK_SUCCESS && tk_plan_create(h, &pc, NULL, &copies) == TK_SUCCESS,
          "plans: %s", tk_last_error(h));
    cudaGraph_t graph = NULL;
    cudaGraphExec_t exec = NULL;
    tk_status st = TK_ERR_CUDA, st_copies = TK_ERR_CUDA;
    if (cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        st = tk_plan_run(h, plan, p.a, p.b, p.c, s);
        st_copies = tk_plan_run(h, copies, pc.a, pc.b, pc.c, s);
        CHECK(cudaStreamEndCapture(s, &graph) == cudaSuccess, "end capture");
    }
    CHECK(st == TK_SUCCESS, "captured run: %s (%s)", tk_status_string(st), tk_last_error(h));
    CHECK(st_copies == TK_ERR_NOT_SUPPORTED, "a plan through copies under capture: %s", tk_status_string(st_copies));
    if (graph && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
        for (int r = 0; r < 3; r++) {
            char why[MSG];
            ig_poison(&o, s);
            CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "replay %d", r);
            CHECK(!ig_check(&o, 1.0f, s, why, sizeof why), "replay %d: %s", r, why);
        }
        cudaGraphExecDestroy(exec);
    }
    if (graph)
        cudaGraphDestroy(graph);
    tk_plan_destroy(plan);
    tk_plan_destroy(copies);
    cudaStreamDestroy(s);
    tk_destroy(h);
    ig_free(&o);
    ig_free(&c);
}

/* The workspace settings on the GPU: split-K off (no kernel workspace,
 * plan and tk_gemm_ex equal, exact), a caller's workspace of
 * tk_workspace_size bytes (the handle allocates nothing; exact), a cap of
 * 0 (unsplit, exact; the copy route refused). */
static void test_plan_workspace_settings(void)
{
    ig_set o, c;
    if (make(&o, &shapes[1], 401) || make(&c, &shapes[2], 402))
        return;
    tk_handle h = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS, "tk_create");
    tk_gemm_problem p = ig_problem(&o, 1.0f);
    size_t need = 0, need_off = 1;
    CHECK(tk_workspace_size(h, &p, NULL, &need) == TK_SUCCESS, "workspace size: %s", tk_last_error(h));
    void *buf = malloc(o.c_bytes);
    tk_plan plan = NULL;
    CHECK(tk_plan_create(h, &p, NULL, &plan) == TK_SUCCESS, "plan: %s", tk_last_error(h));
    /* split-K off */
    CHECK(tk_set_split_k(h, TK_SPLIT_K_NEVER) == TK_SUCCESS && tk_workspace_size(h, &p, NULL, &need_off) == 0 &&
              need_off == 0,
          "split-K off: %zu bytes", need_off);
    const uint32_t seq = h->seq;
    CHECK(!pair(h, plan, &o, 1.0f, NULL, NULL, buf, 1, "split-K off") && h->seq == seq,
          "split-K off: %u launches got a split workspace", h->seq - seq);
    tk_set_split_k(h, TK_SPLIT_K_AUTO);
    CHECK(!pair(h, plan, &o, 1.0f, NULL, NULL, buf, 1, "split-K on") && (need == 0 || (h->seq > seq && h->kws)),
          "split-K on: %u split launches, kws %p", h->seq - seq, h->kws);
    /* the caller's workspace */
    void *ws = NULL;
    CHECK(cudaMalloc(&ws, need ? need : 256) == cudaSuccess, "cudaMalloc(%zu)", need);
    tk_handle h2 = NULL;
    tk_plan plan2 = NULL;
    CHECK(tk_create(&h2) == TK_SUCCESS && tk_set_workspace(h2, ws, need) == TK_SUCCESS, "caller workspace: %s",
          tk_last_error(h2));
    CHECK(tk_plan_create(h2, &p, NULL, &plan2) == TK_SUCCESS, "plan on h2");
    CHECK(!pair(h2, plan2, &o, 1.0f, NULL, NULL, buf, 1, "caller's workspace"), "caller's workspace");
    CHECK(!h2->kws && !h2->flags && tk_handle_held(h2) == 0 && (need == 0 || h2->seq > 0),
          "the handle allocated (%zu held) or never split (seq %u)", tk_handle_held(h2), h2->seq);
    printf("     %s: %zu bytes of workspace (split-K off: %zu); the caller's served %u split launches\n",
           shapes[1].name, need, need_off, h2->seq);
    tk_plan_destroy(plan2);
    tk_destroy(h2);   /* waits for its last call: then ws may go */
    cudaFree(ws);
    /* a cap of 0 */
    tk_handle h3 = NULL;
    CHECK(tk_create(&h3) == TK_SUCCESS && tk_set_workspace_limit(h3, 0) == TK_SUCCESS, "cap");
    char why[MSG];
    CHECK(ig_poison(&o, NULL) == cudaSuccess && tk_gemm_ex(h3, &p, NULL, NULL) == TK_SUCCESS &&
              !ig_check(&o, 1.0f, NULL, why, sizeof why) && tk_handle_held(h3) == 0,
          "cap 0: %s %s, %zu held", tk_last_error(h3), why, tk_handle_held(h3));
    tk_gemm_problem pc = ig_problem(&c, 1.0f);
    tk_status st = tk_gemm_ex(h3, &pc, NULL, NULL);
    CHECK(st == TK_ERR_OUT_OF_RESOURCES && strstr(tk_last_error(h3), "cap"), "copies over a cap of 0: %s (%s)",
          tk_status_string(st), tk_last_error(h3));
    tk_destroy(h3);
    /* release: the handle's workspaces freed in stream order, then allocated again */
    const size_t held = tk_handle_held(h);
    CHECK(tk_workspace_release(h, NULL) == TK_SUCCESS && tk_handle_held(h) == 0, "release: %s", tk_last_error(h));
    CHECK(!pair(h, plan, &o, 1.0f, NULL, NULL, buf, 1, "after release") && tk_handle_held(h) == held,
          "after release: %zu held, %zu before", tk_handle_held(h), held);
    tk_plan_destroy(plan);
    tk_destroy(h);
    free(buf);
    ig_free(&o);
    ig_free(&c);
}

/* Host microseconds per call, enqueue only: SAMPLES samples of CALLS calls
 * (tk_plan_run when plan is set, else tk_gemm_ex), the stream synchronized
 * between samples; the median, min and max in out[3]. 0 when all ran. */
static int host_time(tk_handle h, tk_plan plan, const tk_gemm_problem *p, cudaStream_t s, double out[3])
{
    double t[SAMPLES];
    for (int r = -1; r < SAMPLES; r++) {
        const double t0 = host_now_us();
        for (int j = 0; j < CALLS; j++) {
            tk_status st = plan ? tk_plan_run(h, plan, p->a, p->b, p->c, s) : tk_gemm_ex(h, p, NULL, s);
            if (st) {
                CHECK(0, "timing: %s (%s)", tk_status_string(st), tk_last_error(h));
                return 1;
            }
        }
        const double t1 = host_now_us();
        cudaStreamSynchronize(s);
        if (r >= 0)
            t[r] = (t1 - t0) / CALLS;
    }
    host_spread(t, SAMPLES, out);
    return 0;
}

static void test_plan_host_time(void)
{
    tk_handle h = NULL;
    cudaStream_t s = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess, "setup");
    const int which[] = { 4, 1, 2 };   /* small (no workspace), split decode, copied A */
    for (int w = 0; w < 3; w++) {
        ig_set o;
        if (make(&o, &shapes[which[w]], 501 + (uint32_t)w))
            continue;
        tk_gemm_problem p = ig_problem(&o, 1.0f);
        tk_plan plan = NULL;
        double ex[3], pl[3];
        if (tk_plan_create(h, &p, NULL, &plan) == TK_SUCCESS && !host_time(h, NULL, &p, s, ex) &&
            !host_time(h, plan, &p, s, pl))
            printf("     host time %-40s tk_gemm_ex %6.2f us/call (min %.2f, max %.2f), tk_plan_run %6.2f us/call "
                   "(min %.2f, max %.2f), %s; median of %d samples of %d calls\n",
                   o.s.name, ex[0], ex[1], ex[2], pl[0], pl[1], pl[2], tk_plan_kernel(plan), SAMPLES, CALLS);
        else
            CHECK(0, "%s: %s", o.s.name, tk_last_error(h));
        tk_plan_destroy(plan);
        ig_free(&o);
    }
    cudaStreamDestroy(s);
    tk_destroy(h);
}

static void no_gpu(void) { CHECK(0, "a GPU suite without a GPU fails"); }

static void maybe(const char *name, void (*fn)(void))
{
    if (!only || strstr(name, only))
        tk_run_test(name, fn);
}

void tk_tests(void)
{
    only = getenv("TK_PLAN_ONLY");
    if (tk_create(&ref_h) != TK_SUCCESS || !ref_h->have_device) {
        printf("no GPU: %s\n", ref_h ? ref_h->device_error : tk_last_error(NULL));
        tk_run_test("plan_needs_a_gpu", no_gpu);
        tk_destroy(ref_h);
        return;
    }
    sm = ref_h->dev.sm;
    maybe("test_plan_bits", test_plan_bits);
    maybe("test_plan_misaligned", test_plan_misaligned);
    maybe("test_plan_capture", test_plan_capture);
    maybe("test_plan_workspace_settings", test_plan_workspace_settings);
    maybe("test_plan_host_time", test_plan_host_time);
    tk_destroy(ref_h);
}
