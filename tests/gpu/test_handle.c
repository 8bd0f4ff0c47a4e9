/* test_handle.c - the handle's workspaces on the GPU (issue 35): the order of
 * calls across streams (also when a destroyed stream's value comes back),
 * the completion flags, CUDA-graph capture while another thread's handle
 * grows its workspaces, cuBLAS first used under capture, misaligned real
 * pointers refused with the context left healthy, and the device check.
 * Every product is exact (int_gemm.h) and checked bit for bit.
 *
 *   build/tests/gpu_test_handle [name-substring]
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "lib/internal.h"
#include "../host/check.h"
#include "int_gemm.h"

#define MSG 512

static tk_handle ref_h;
static int sm;
static const char *only;   /* argv[1]: run the tests whose name holds it */

/* Shapes that use the split workspace on sm_90 (k40's split decode, k31's
 * few-tile split, a k34 split), one that copies a misaligned A, and the long
 * product that keeps a stream busy. */
static const ig_shape s_decode = { "9x1000x16360 NT (k40 split)", 9, 1000, 16360, TK_OP_T, 0, TK_F32 };
static const ig_shape s_few = { "512x4096x4096 NT bf16 (k31 few-tile split)", 512, 4096, 4096, TK_OP_T, 0,
                                TK_BF16 };
static const ig_shape s_wave = { "3000x3000x3000 (k31 last-wave split)", 3000, 3000, 3000, TK_OP_N, 0, TK_F32 };
static const ig_shape s_copy = { "1024x1024x1024 bf16, A at +1 (copied)", 1024, 1024, 1024, TK_OP_N, 1, TK_BF16 };
static const ig_shape s_long = { "8192x8192x8192 bf16 (delay)", 8192, 8192, 8192, TK_OP_N, 0, TK_BF16 };

static int make(ig_set *o, const ig_shape *s, uint32_t seed)
{
    char why[MSG];
    int bad = ig_make(o, s, seed, ref_h, why, sizeof why);
    CHECK(!bad, "setup %s: %s", s->name, why);
    return bad;
}

/* Runs o on h (kernel; NULL auto) on stream s with C poisoned first, and
 * checks the result exactly. 0 when right. */
static int run_check(tk_handle h, ig_set *o, float alpha, const char *kernel, cudaStream_t s, const char *label)
{
    char why[MSG] = "";
    tk_status st = ig_poison(o, s) ? TK_ERR_CUDA : ig_gemm(h, o, alpha, kernel, s);
    if (st) {
        CHECK(0, "%s: %s: %s (%s)", label, o->s.name, tk_status_string(st), tk_last_error(h));
        return 1;
    }
    if (ig_check(o, alpha, s, why, sizeof why)) {
        CHECK(0, "%s: %s: %s", label, o->s.name, why);
        return 1;
    }
    return 0;
}

/* A handle and a stream of its own for a test; close_hs ends both. */
static void open_hs(tk_handle *h, cudaStream_t *s)
{
    CHECK(tk_create(h) == TK_SUCCESS && cudaStreamCreateWithFlags(s, cudaStreamNonBlocking) == cudaSuccess,
          "setup: %s", cudaGetErrorString(cudaGetLastError()));
}

/* Instantiates graph (if the capture gave one: e), replays it `replays`
 * times on s with o's C poisoned before each, checks each result, and
 * destroys graph and its instance. */
static void replay_check(cudaError_t e, cudaGraph_t graph, int replays, ig_set *o, float alpha, cudaStream_t s)
{
    cudaGraphExec_t exec = NULL;
    if (e == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
        for (int r = 0; r < replays; r++) {
            char why[MSG];
            ig_poison(o, s);
            CHECK(cudaGraphLaunch(exec, s) == cudaSuccess, "replay %d", r);
            CHECK(!ig_check(o, alpha, s, why, sizeof why), "replay %d: %s", r, why);
        }
    } else if (e == cudaSuccess) {
        CHECK(0, "instantiate: %s", cudaGetErrorString(cudaGetLastError()));
    }
    if (exec)
        cudaGraphExecDestroy(exec);
    if (graph)
        cudaGraphDestroy(graph);
}

/* Item 8: a stream destroyed while its GEMM is pending may give its handle
 * value to the next stream created. Each round: the stream s1 is kept busy
 * for milliseconds (a long product on another handle), then a call of h that
 * uses the split workspace is queued behind it, an event e1 recorded, and s1
 * destroyed; a new stream s2 (often the same value) runs another workspace
 * call of h. s2's call must wait for s1's: when its event e2 has completed,
 * e1 must have too. (Ordering by stream value skipped the wait exactly when
 * the value came back.) Both results exact. */
static void test_stream_reuse(void)
{
    if (sm < 90)
        return;
    ig_set lg, d1, d2;
    if (make(&lg, &s_long, 11) || make(&d1, &s_decode, 12) || make(&d2, &s_decode, 13))
        return;
    tk_handle h = NULL, hl = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS && tk_create(&hl) == TK_SUCCESS, "tk_create");
    int reused = 0, busy = 0, same_id = 0;
    const int rounds = 6;
    /* a first call of each handle: its allocations (event, workspaces) are
     * made here, not inside the timed window of round 0 */
    run_check(h, &d1, 1.0f, "k40_skinny", NULL, "warm-up");
    run_check(hl, &lg, 1.0f, NULL, NULL, "warm-up");
    for (int r = 0; r < rounds; r++) {
        cudaStream_t s1 = NULL, s2 = NULL;
        cudaEvent_t e1 = NULL, e2 = NULL;
        CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess &&
                  cudaEventCreateWithFlags(&e1, cudaEventDisableTiming) == cudaSuccess &&
                  cudaEventCreateWithFlags(&e2, cudaEventDisableTiming) == cudaSuccess,
              "stream/event creation");
        ig_poison(&d1, s1);
        for (int i = 0; i < 4; i++)
            ig_gemm(hl, &lg, 1.0f, NULL, s1);
        unsigned long long id1 = 0, id2 = 0;
        cudaStreamGetId(s1, &id1);
        uint32_t seq = h->seq;
        tk_status st = ig_gemm(h, &d1, 2.0f, "k40_skinny", s1);
        CHECK(st == TK_SUCCESS && h->seq == seq + 1, "round %d, call on s1: %s (seq %u -> %u: a split expected)", r,
              tk_last_error(h), seq, h->seq);
        cudaEventRecord(e1, s1);
        cudaStream_t old = s1;
        cudaStreamDestroy(s1);
        CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess, "s2");
        reused += s2 == old;
        cudaStreamGetId(s2, &id2);
        same_id += id1 == id2;
        ig_poison(&d2, s2);
        st = ig_gemm(h, &d2, -1.0f, "k40_skinny", s2);
        CHECK(st == TK_SUCCESS && h->seq == seq + 2, "round %d, call on s2: %s (seq %u: a split expected)", r,
              tk_last_error(h), h->seq);
        busy += cudaEventQuery(e1) == cudaErrorNotReady;   /* s1 still busy after s2's call was queued */
        cudaGetLastError();
        cudaEventRecord(e2, s2);
        cudaEventSynchronize(e2);
        cudaError_t q = cudaEventQuery(e1);
        CHECK(q == cudaSuccess, "round %d (s2 %s s1's value): s2's call ended before s1's (%s)", r,
              s2 == old ? "took" : "did not take", cudaGetErrorString(q));
        cudaGetLastError();
        char why[MSG];
        cudaDeviceSynchronize();
        CHECK(!ig_check(&d1, 2.0f, s2, why, sizeof why), "round %d, s1's result: %s", r, why);
        CHECK(!ig_check(&d2, -1.0f, s2, why, sizeof why), "round %d, s2's result: %s", r, why);
        cudaStreamDestroy(s2);
        cudaEventDestroy(e1);
        cudaEventDestroy(e2);
    }
    printf("     (stream values reused in %d of %d rounds, cudaStreamGetId equal in %d; s1 still busy when s2's call "
           "was queued in %d)\n", reused, rounds, same_id, busy);
    /* Under compute-sanitizer (TK_UNDER_SANITIZER set) launches are serialized and s1 is always done
     * first: the run is for memory errors then, and the order cannot be shown. */
    if (!getenv("TK_UNDER_SANITIZER"))
        CHECK(busy == rounds, "s1 finished before s2's call was queued in %d of %d rounds: the test shows nothing",
              rounds - busy, rounds);
    tk_destroy(h);
    tk_destroy(hl);
    ig_free(&lg);
    ig_free(&d1);
    ig_free(&d2);
}

/* Reads h's flag area and checks that every word is a launch number this
 * handle has given (0 .. h->seq; 0 where never written), and that it is
 * apart from the partial sums. */
static int flags_ok(tk_handle h, const char *label)
{
    if (!h->flags)
        return 0;
    size_t n = h->flags_bytes / 4;
    uint32_t *f = malloc(h->flags_bytes);
    int bad = !f || cudaMemcpy(f, h->flags, h->flags_bytes, cudaMemcpyDeviceToHost) != cudaSuccess;
    CHECK(!bad, "%s: reading the flags", label);
    size_t over = 0, first = 0;
    for (size_t i = 0; !bad && i < n; i++)
        if (f[i] > h->seq && !over++)
            first = i;
    CHECK(over == 0, "%s: %zu of %zu flags above seq %u (flag %zu = %u)", label, over, n, h->seq, first,
          f ? f[first] : 0);
    const char *fa = h->flags, *ka = h->kws;
    CHECK(!ka || fa + h->flags_bytes <= ka || ka + h->kws_bytes <= fa, "%s: the flags overlap the partial sums",
          label);
    free(f);
    return bad || over;
}

/* Item 9: the completion flags live apart from the partial sums and hold
 * launch numbers alone, whatever mix of split kernels used the handle (k40's
 * flags and partials used to share one area with the k30 family's, at
 * offsets of each kernel's own, so a flag word could hold an fp32 partial of
 * another kernel). Then the numbering is run across its wrap. */
static void test_flags(void)
{
    if (sm < 90)
        return;
    ig_set o[3];
    if (make(&o[0], &s_decode, 21) || make(&o[1], &s_few, 22) || make(&o[2], &s_wave, 23))
        return;
    const char *kernels[3] = { "k40_skinny", "k31_wgmma_cluster", "k31_wgmma_cluster" };
    tk_handle h = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS, "tk_create");
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    char label[64];
    for (int i = 0; i < 12; i++) {
        snprintf(label, sizeof label, "call %d", i);
        uint32_t seq = h->seq;
        if (run_check(h, &o[i % 3], (float)(1 + i % 4), kernels[i % 3], s, label) || flags_ok(h, label))
            break;
        CHECK(h->seq == seq + 1, "%s (%s on %s) used no split workspace", label,
              kernels[i % 3] ? kernels[i % 3] : "auto", o[i % 3].s.name);
    }
    CHECK(h->flags && h->kws && h->seq == 12, "the calls did not split (flags %p, seq %u)", h->flags, h->seq);
    h->seq = UINT32_MAX - 4;   /* the next calls number up to the wrap, clear the flags, go on from 1 */
    for (int i = 0; i < 9; i++) {
        snprintf(label, sizeof label, "across the wrap, call %d (seq %u)", i, h->seq + 1);
        if (run_check(h, &o[i % 3], -2.0f, kernels[i % 3], s, label) || flags_ok(h, label))
            break;
    }
    CHECK(h->seq >= 1 && h->seq < 10, "seq after the wrap: %u", h->seq);
    cudaStreamDestroy(s);
    tk_destroy(h);
    for (int i = 0; i < 3; i++)
        ig_free(&o[i]);
}

/* Item 6: a graph captured in global mode by one thread while another
 * thread's handle makes its first allocations (split workspace and flags, a
 * copy workspace, cuBLAS's handle and workspace) and grows them.
 * Synchronous allocation or device synchronization in the second thread
 * would invalidate the capture. */
typedef struct cap_sync {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stage;                   /* 1: capture begun; 2: the other thread's calls made; 3: capture ended */
    int grow_failed;
    char why[MSG];
    ig_set *sets;                /* the growing thread's: decode, few tiles, copy, decode for cuBLAS */
} cap_sync;

static void set_stage(cap_sync *c, int stage)
{
    pthread_mutex_lock(&c->mu);
    c->stage = stage;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void wait_stage(cap_sync *c, int stage)
{
    pthread_mutex_lock(&c->mu);
    while (c->stage < stage)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

/* The thread that allocates while the other captures. During the capture
 * it makes only tilekit calls and asynchronous stream work (C poisoned on
 * its stream); it reads its results back once the capture has ended (a
 * synchronizing read-back is itself unsafe under a global capture). */
static void *grow_thread(void *arg)
{
    cap_sync *c = arg;
    tk_handle h = NULL;
    cudaStream_t s = NULL;
    int bad = tk_create(&h) != TK_SUCCESS || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess;
    if (bad)
        snprintf(c->why, sizeof c->why, "setup: %s", cudaGetErrorString(cudaGetLastError()));
    wait_stage(c, 1);            /* everything below until stage 2 runs while the other thread captures */
    /* decode (split workspace and flags), few tiles on k31 (both regrown),
     * a copy of a misaligned A, and cuBLAS's first use (handle, workspace) */
    const char *kernels[4] = { "k40_skinny", "k31_wgmma_cluster", NULL, "cublas" };
    for (int i = 0; i < 4 && !bad; i++) {
        ig_set *o = &c->sets[i];
        tk_status st = ig_poison(o, s) ? TK_ERR_CUDA : ig_gemm(h, o, 3.0f, kernels[i], s);
        if (st) {
            snprintf(c->why, sizeof c->why, "%s on %s: %s (%s)", kernels[i] ? kernels[i] : "auto", o->s.name,
                     tk_status_string(st), tk_last_error(h));
            bad = 1;
        }
    }
    if (!bad && (!h->kws || !h->flags || !h->copy_ws || !h->cublas || !h->workspace || h->seq != 2)) {
        snprintf(c->why, sizeof c->why, "the handle did not allocate every workspace (kws %p, flags %p, copy %p, "
                 "cublas %p, %u split launches of 2)", h->kws, (void *)h->flags, h->copy_ws, h->cublas, h->seq);
        bad = 1;
    }
    set_stage(c, 2);
    wait_stage(c, 3);
    tk_destroy(h);
    for (int i = 0; i < 4 && !bad; i++)
        bad = ig_check(&c->sets[i], 3.0f, s, c->why, sizeof c->why);
    c->grow_failed = bad;
    if (s)
        cudaStreamDestroy(s);
    return NULL;
}

static void test_capture_while_growing(void)
{
    if (sm < 90)
        return;
    ig_set g[4], cap;
    if (make(&g[0], &s_decode, 31) || make(&g[1], &s_few, 32) || make(&g[2], &s_copy, 33) ||
        make(&g[3], &s_decode, 35) || make(&cap, &s_decode, 34))
        return;
    cap_sync c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    c.sets = g;
    tk_handle h = NULL;
    cudaStream_t s = NULL;
    open_hs(&h, &s);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, grow_thread, &c) == 0, "pthread_create");
    cudaGraph_t graph = NULL;
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    CHECK(e == cudaSuccess, "begin capture: %s", cudaGetErrorString(e));
    tk_status st = ig_poison(&cap, s) ? TK_ERR_CUDA : ig_gemm(h, &cap, 2.0f, NULL, s);
    CHECK(st == TK_SUCCESS, "captured call: %s (%s)", tk_status_string(st), tk_last_error(h));
    set_stage(&c, 1);
    wait_stage(&c, 2);           /* the other thread allocates, grows, destroys meanwhile */
    st = ig_gemm(h, &cap, 2.0f, "cublas", s);   /* cuBLAS's handle created under capture */
    CHECK(st == TK_SUCCESS, "captured cublas call: %s (%s)", tk_status_string(st), tk_last_error(h));
    e = cudaStreamEndCapture(s, &graph);
    CHECK(e == cudaSuccess, "end capture after the other thread's allocations: %s", cudaGetErrorString(e));
    cudaGetLastError();
    set_stage(&c, 3);
    pthread_join(t, NULL);
    CHECK(!c.grow_failed, "the growing thread: %s", c.why);
    replay_check(e, graph, 2, &cap, 2.0f, s);
    /* after the capture, an eager cuBLAS call gets its workspace */
    CHECK(!run_check(h, &cap, -1.0f, "cublas", s, "eager cublas after capture") && h->workspace,
          "cuBLAS workspace after the eager call: %p", h->workspace);
    cudaStreamDestroy(s);
    tk_destroy(h);
    for (int i = 0; i < 4; i++)
        ig_free(&g[i]);
    ig_free(&cap);
}

/* tk_destroy in one thread while another captures in global mode (Python
 * destroys a thread's handles when the thread ends, whatever other threads
 * do): a handle that used its split and copy workspaces, and one that used
 * cuBLAS too. */
typedef struct destroy_job {
    tk_handle h;
    cap_sync *c;
} destroy_job;

static void *destroy_thread(void *arg)
{
    destroy_job *j = arg;
    wait_stage(j->c, 1);
    tk_destroy(j->h);
    set_stage(j->c, 2);
    return NULL;
}

static void test_destroy_during_capture(void)
{
    if (sm < 90)
        return;
    ig_set o[3], cap;
    if (make(&o[0], &s_decode, 71) || make(&o[1], &s_copy, 72) || make(&o[2], &s_decode, 73) ||
        make(&cap, &s_decode, 74))
        return;
    for (int with_cublas = 0; with_cublas < 2; with_cublas++) {
        tk_handle hd = NULL, h = NULL;
        cudaStream_t s = NULL;
        CHECK(tk_create(&hd) == TK_SUCCESS && tk_create(&h) == TK_SUCCESS &&
                  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess,
              "setup");
        run_check(hd, &o[0], 1.0f, "k40_skinny", s, "split before");
        run_check(hd, &o[1], 1.0f, NULL, s, "copy before");
        if (with_cublas)   /* fp32 C: cuBLAS's bf16 C may round partial sums (int_gemm.h) */
            run_check(hd, &o[2], 1.0f, "cublas", s, "cublas before");
        cap_sync c;
        memset(&c, 0, sizeof c);
        pthread_mutex_init(&c.mu, NULL);
        pthread_cond_init(&c.cv, NULL);
        destroy_job j = { hd, &c };
        pthread_t t;
        CHECK(pthread_create(&t, NULL, destroy_thread, &j) == 0, "pthread_create");
        cudaGraph_t graph = NULL;
        cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
        tk_status st = ig_gemm(h, &cap, 2.0f, NULL, s);
        set_stage(&c, 1);
        wait_stage(&c, 2);
        e = cudaStreamEndCapture(s, &graph);
        CHECK(st == TK_SUCCESS && e == cudaSuccess, "%s: capture across the other thread's tk_destroy: %s, %s",
              with_cublas ? "with cuBLAS" : "without cuBLAS", tk_status_string(st), cudaGetErrorString(e));
        cudaGetLastError();
        pthread_join(t, NULL);
        if (graph)
            cudaGraphDestroy(graph);
        cudaStreamDestroy(s);
        tk_destroy(h);
    }
    for (int i = 0; i < 3; i++)
        ig_free(&o[i]);
    ig_free(&cap);
}

/* Item 6: a named cublas call captured on a fresh handle (cuBLAS's handle
 * not made yet) in global mode, alone in the process. */
static void test_cublas_first_under_capture(void)
{
    ig_set o;
    if (make(&o, &s_copy, 41))
        return;
    tk_handle h = NULL;
    cudaStream_t s = NULL;
    open_hs(&h, &s);
    cudaGraph_t graph = NULL;
    ig_poison(&o, s);
    cudaStreamSynchronize(s);
    cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    tk_status st = ig_gemm(h, &o, 1.0f, "cublas", s);
    CHECK(st == TK_SUCCESS, "captured first cublas call: %s (%s)", tk_status_string(st), tk_last_error(h));
    e = cudaStreamEndCapture(s, &graph);
    CHECK(e == cudaSuccess, "end capture: %s", cudaGetErrorString(e));
    cudaGetLastError();
    CHECK(h->cublas && !h->workspace, "under capture: cuBLAS handle %p, workspace %p (expected none)", h->cublas,
          h->workspace);
    replay_check(e, graph, 1, &o, 1.0f, s);
    cudaStreamDestroy(s);
    tk_destroy(h);
    ig_free(&o);
}

/* Item 4 on the device: real buffers at an address that is not a multiple
 * of the element size are refused before anything is launched; C is
 * untouched, the CUDA context stays healthy (no sticky misaligned-address
 * error), and the next call is right. */
static void test_misaligned_real(void)
{
    ig_set o;
    if (make(&o, &s_copy, 51))
        return;
    tk_handle h = NULL;
    cudaStream_t s = NULL;
    open_hs(&h, &s);
    const char *kernels[] = { NULL, "k01_naive", "cublas", "k21_mma_fastload" };
    for (int w = 0; w < 3; w++)
        for (int k = 0; k < 4; k++) {
            tk_gemm_problem p = ig_problem(&o, 1.0f);
            if (w == 0)
                p.a = (const char *)o.a_buf + 1;
            else if (w == 1)
                p.b = (const char *)o.b + 3;
            else
                p.c = (char *)o.c + 1;
            char why[MSG];
            ig_poison(&o, s);
            tk_status st = tk_gemm_ex(h, &p, kernels[k], s);
            CHECK(st == TK_ERR_INVALID_VALUE && strstr(tk_last_error(h), "aligned"), "%s misaligned, %s: %s (%s)",
                  w == 0 ? "A" : w == 1 ? "B" : "C", kernels[k] ? kernels[k] : "auto", tk_status_string(st),
                  tk_last_error(h));
            CHECK(!ig_untouched(&o, s, why, sizeof why), "%s", why);
        }
    tk_gemm_problem p = ig_problem(&o, 1.0f);
    p.c_type = TK_F32;
    p.c = (char *)o.c + 2;   /* 2 mod 4: an fp32 C at a bf16 address */
    tk_status st = tk_gemm_ex(h, &p, NULL, s);
    CHECK(st == TK_ERR_INVALID_VALUE, "fp32 C at +2 bytes: %s", tk_status_string(st));
    cudaError_t e = cudaDeviceSynchronize();
    CHECK(e == cudaSuccess && cudaGetLastError() == cudaSuccess, "the context after the refusals: %s",
          cudaGetErrorString(e));
    run_check(h, &o, 1.0f, NULL, s, "the call after the refusals");
    cudaStreamDestroy(s);
    tk_destroy(h);
    ig_free(&o);
}

/* Item 5: a handle is refused on a thread where another device is current.
 * With two GPUs, for real; with one, the handle is told it belongs to
 * device 1 while device 0 is current (the check reads the real
 * cudaGetDevice either way). */
static void test_device_check(void)
{
    ig_set o;
    if (make(&o, &s_copy, 61))
        return;
    int count = 0;
    cudaGetDeviceCount(&count);
    tk_handle h = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS, "tk_create");
    tk_gemm_problem p = ig_problem(&o, 1.0f);
    char why[MSG];
    ig_poison(&o, NULL);
    if (count >= 2) {
        cudaSetDevice(1);
        tk_status st = tk_gemm_ex(h, &p, NULL, NULL);
        CHECK(st == TK_ERR_INVALID_VALUE && strstr(tk_last_error(h), "device 0"), "device 1 current: %s (%s)",
              tk_status_string(st), tk_last_error(h));
        cudaSetDevice(0);
        printf("     (two GPUs: the handle of device 0 refused on device 1)\n");
    } else {
        int id = h->dev.id;
        h->dev.id = id + 1;
        tk_status st = tk_gemm_ex(h, &p, NULL, NULL);
        CHECK(st == TK_ERR_INVALID_VALUE && strstr(tk_last_error(h), "current in this thread"),
              "handle of another device: %s (%s)", tk_status_string(st), tk_last_error(h));
        h->dev.id = id;
        printf("     (one GPU: the check shown with a handle marked as device %d's)\n", id + 1);
    }
    CHECK(!ig_untouched(&o, NULL, why, sizeof why), "%s", why);
    run_check(h, &o, 1.0f, NULL, NULL, "on its own device");
    tk_destroy(h);
    ig_free(&o);
}

static void no_gpu(void) { CHECK(0, "a GPU suite without a GPU fails"); }

static void maybe(const char *name, void (*fn)(void))
{
    if (!only || strstr(name, only))
        tk_run_test(name, fn);
}

void tk_tests(void)
{
    only = getenv("TK_HANDLE_ONLY");
    if (tk_create(&ref_h) != TK_SUCCESS || !ref_h->have_device) {
        printf("no GPU: %s\n", ref_h ? ref_h->device_error : tk_last_error(NULL));
        tk_run_test("handle_needs_a_gpu", no_gpu);
        tk_destroy(ref_h);
        return;
    }
    sm = ref_h->dev.sm;
    maybe("test_stream_reuse", test_stream_reuse);
    maybe("test_flags", test_flags);
    maybe("test_capture_while_growing", test_capture_while_growing);
    maybe("test_destroy_during_capture", test_destroy_during_capture);
    maybe("test_cublas_first_under_capture", test_cublas_first_under_capture);
    maybe("test_misaligned_real", test_misaligned_real);
    maybe("test_device_check", test_device_check);
    tk_destroy(ref_h);
}
