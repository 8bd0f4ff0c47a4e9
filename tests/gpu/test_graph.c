/* test_graph.c - tilekit calls captured into CUDA graphs and replayed, every
 * result checked bit for bit (int_gemm.h: integer operands, C filled with
 * NaN before each replay).
 *
 * For each case (a shape and a kernel: auto-dispatch on shapes that split
 * over K when run eagerly, on an A one element off alignment that eager
 * auto-dispatch copies, decode and tiny shapes; named Hopper kernels and
 * cuBLAS) one handle is first used eagerly on two streams (its workspaces
 * allocated, its calls ordered across streams by an event), then one call is
 * captured on a third stream and the graph replayed six times. Between
 * replays the graph's input buffers are refilled from other operand sets
 * (so a replay that reused another replay's partial sums, as a captured
 * split would, gives wrong entries), and the handle runs eager calls of the
 * same problem on another stream (its split numbering and workspaces move
 * on under the graph). Last, an eager call after the replays must still be
 * right. The capture itself must succeed: a call that synchronized the
 * device or waited for an event recorded outside the capture would fail it.
 *
 *   build/tests/gpu_test_graph [name-substring]
 */
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "lib/internal.h"
#include "../host/check.h"
#include "int_gemm.h"

#define MSG 512
#define REPLAYS 6

static const ig_shape shapes[] = {
    { "128x4096x8192 NT (split)", 128, 4096, 8192, TK_OP_T, 0, TK_F32 },
    { "512x4096x4096 NT bf16 (split)", 512, 4096, 4096, TK_OP_T, 0, TK_BF16 },
    { "1024x1024x1024 bf16, A at +1 (copied when eager)", 1024, 1024, 1024, TK_OP_N, 1, TK_BF16 },
    { "1x768x768", 1, 768, 768, TK_OP_N, 0, TK_F32 },
    { "64x64x64 bf16", 64, 64, 64, TK_OP_N, 0, TK_BF16 },
};
enum { SPLIT_F32, SPLIT_BF16, A_PLUS_1, DECODE, TINY, NSHAPES };

static const struct { int shape; const char *kernel; } cases[] = {
    { SPLIT_F32, "auto" },   { SPLIT_BF16, "auto" }, { A_PLUS_1, "auto" },
    { DECODE, "auto" },      { TINY, "auto" },       { SPLIT_F32, "k31_wgmma_cluster" },
    { SPLIT_BF16, "k34_wgmma_128x64" }, { SPLIT_F32, "cublas" },
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static const float alphas[REPLAYS] = { 1.0f, -2.0f, 0.5f, 3.0f, -1.0f, 2.0f };

static tk_handle ref_h;

/* Bytes of a set's A (with its offset) and B buffers. */
static size_t a_bytes(const ig_set *o) { return (size_t)(o->s.m * o->lda + o->s.a_off) * 2; }
static size_t b_bytes(const ig_set *o) { return (size_t)((o->s.op_b == TK_OP_N ? o->s.k : o->s.n) * o->ldb) * 2; }

/* Whether kernel takes the set's problem on this device (else the case is skipped, said so). */
static int takes(tk_handle h, const char *kernel, const ig_set *o)
{
    tk_gemm_problem p = ig_problem(o, 1.0f);
    return tk_kernel_supports(h, strcmp(kernel, "auto") ? kernel : NULL, &p) == TK_SUCCESS;
}

/* One case: 0, or 1 with why. */
static int run_case(int c, char *why, size_t len)
{
    const ig_shape *s = &shapes[cases[c].shape];
    const char *kernel = cases[c].kernel;
    ig_set in, src[3];   /* in: the graph's buffers; src: the operands replays get */
    int bad = 0, made = 0;
    tk_handle h = NULL;
    cudaStream_t s1 = NULL, s2 = NULL, s3 = NULL;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    memset(&in, 0, sizeof in);
    bad = ig_make(&in, s, 100u + (uint32_t)c, ref_h, why, len);
    for (int i = 0; i < 3 && !bad; i++, made++)
        bad = ig_make(&src[i], s, 200u + 10u * (uint32_t)c + (uint32_t)i, ref_h, why, len);
    if (!bad && (tk_create(&h) || cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) ||
                 cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) ||
                 cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking))) {
        snprintf(why, len, "setup: %s", cudaGetErrorString(cudaGetLastError()));
        bad = 1;
    }
    if (!bad && !takes(h, kernel, &in)) {
        printf("     (%s does not take %s here: case skipped)\n", kernel, s->name);
        goto done;
    }
    /* eager first, on two streams: workspaces allocated, the handle ordering its calls */
    for (int i = 0; i < 2 && !bad; i++) {
        cudaStream_t st = i ? s3 : s1;
        tk_status r = ig_poison(&in, st) ? TK_ERR_CUDA : ig_gemm(h, &in, 1.0f, kernel, st);
        if (r)
            snprintf(why, len, "eager call %d: %s", i, tk_last_error(h));
        bad = r || ig_check(&in, 1.0f, st, why, len);
    }
    if (bad)
        goto done;
    /* the capture, on a third stream */
    cudaError_t e = cudaStreamBeginCapture(s2, cudaStreamCaptureModeGlobal);
    tk_status r = e ? TK_SUCCESS : ig_gemm(h, &in, 1.0f, kernel, s2);
    cudaError_t e2 = e ? e : cudaStreamEndCapture(s2, &g);
    if (e || r || e2) {
        snprintf(why, len, "capture: %s / %s", e ? cudaGetErrorString(e) : r ? tk_last_error(h) : "",
                 e2 ? cudaGetErrorString(e2) : "");
        cudaGetLastError();
        bad = 1;
        goto done;
    }
    if ((e = cudaGraphInstantiate(&ge, g, 0))) {
        snprintf(why, len, "cudaGraphInstantiate: %s", cudaGetErrorString(e));
        bad = 1;
        goto done;
    }
    /* replays on new operands, eager calls of the handle in between; the
     * captured alpha is 1 */
    for (int rep = 0; rep < REPLAYS && !bad; rep++) {
        ig_set *from = &src[rep % 3];
        e = cudaMemcpyAsync(in.a_buf, from->a_buf, a_bytes(&in), cudaMemcpyDeviceToDevice, s2);
        if (!e)
            e = cudaMemcpyAsync(in.b, from->b, b_bytes(&in), cudaMemcpyDeviceToDevice, s2);
        if (!e)
            e = ig_poison(&in, s2);
        if (!e)
            e = cudaGraphLaunch(ge, s2);
        if (e) {
            snprintf(why, len, "replay %d: %s", rep, cudaGetErrorString(e));
            bad = 1;
            break;
        }
        ig_set view = in;   /* the graph's C against the operands it was given */
        view.ref = from->ref;
        if (ig_check(&view, 1.0f, s2, why, len)) {
            char tmp[MSG];
            snprintf(tmp, sizeof tmp, "replay %d: %s", rep, why);
            snprintf(why, len, "%s", tmp);
            bad = 1;
            break;
        }
        ig_set *other = &src[(rep + 1) % 3];   /* an eager call of the same problem, another stream */
        r = ig_poison(other, s1) ? TK_ERR_CUDA : ig_gemm(h, other, alphas[rep], kernel, s1);
        if (r || ig_check(other, alphas[rep], s1, why, len)) {
            if (r)
                snprintf(why, len, "eager call after replay %d: %s", rep, tk_last_error(h));
            bad = 1;
        }
    }
    if (!bad) {   /* the handle is as good as before */
        r = ig_poison(&in, s3) ? TK_ERR_CUDA : ig_gemm(h, &in, -0.5f, kernel, s3);
        ig_set view = in;
        view.ref = src[(REPLAYS - 1) % 3].ref;   /* in holds the last replay's operands */
        if (r)
            snprintf(why, len, "eager call after the replays: %s", tk_last_error(h));
        bad = r || ig_check(&view, -0.5f, s3, why, len);
    }
done:
    if (ge)
        cudaGraphExecDestroy(ge);
    if (g)
        cudaGraphDestroy(g);
    cudaDeviceSynchronize();
    tk_destroy(h);
    if (s1) cudaStreamDestroy(s1);
    if (s2) cudaStreamDestroy(s2);
    if (s3) cudaStreamDestroy(s3);
    ig_free(&in);
    for (int i = 0; i < made; i++)
        ig_free(&src[i]);
    return bad;
}

static int current_case;

static void test_case(void)
{
    char why[MSG] = "";
    int bad = run_case(current_case, why, sizeof why);
    CHECK(!bad, "%s, %s: %s", shapes[cases[current_case].shape].name, cases[current_case].kernel, why);
}

static void no_gpu(void) { CHECK(0, "a GPU suite without a GPU fails"); }

void tk_tests(void)
{
    if (tk_create(&ref_h) != TK_SUCCESS || !ref_h->have_device) {
        printf("no GPU: %s\n", ref_h ? ref_h->device_error : tk_last_error(NULL));
        tk_run_test("graph_needs_a_gpu", no_gpu);
        tk_destroy(ref_h);
        return;
    }
    for (current_case = 0; current_case < NCASES; current_case++) {
        char name[128];
        snprintf(name, sizeof name, "capture_replay %s, %s", shapes[cases[current_case].shape].name,
                 cases[current_case].kernel);
        tk_run_test(name, test_case);
    }
    tk_destroy(ref_h);
}
