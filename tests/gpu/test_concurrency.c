/* test_concurrency.c - GEMMs from many host threads and streams at once, every
 * result checked bit for bit (int_gemm.h: integer operands, a seed per
 * thread and shape, alpha changing from call to call, C filled with NaN
 * before each call).
 *
 *   per_thread_handles: 8 threads, each with its own handle and stream, 50
 *     calls each over its own set of shapes (decode, tiny, the Hopper
 *     kernels' split tiles, operands auto-dispatch copies because lda is odd
 *     or A starts one element in, fp32 and bf16 C), through auto-dispatch
 *     and the named kernels that take them.
 *   shared_handle: the same through one handle, each call under a mutex
 *     (tilekit.h: one thread at a time), each thread still on its own stream:
 *     the handle's workspaces are then used from 8 streams.
 *   ping_pong: two threads take strict turns on one handle, each on its own
 *     stream, with the same shape and kernel in each round on different
 *     operands, so the tensor-map cache, the split workspace and the copy
 *     workspace are reused back to back while the other call still runs.
 *   two_streams_one_thread: one thread alternates two streams on one
 *     handle with no wait between the calls (the Python wrapper's handle per
 *     thread whatever torch's current stream).
 * The last three are built to catch calls on one handle that overlap on
 * the GPU (as they did before the handle ordered its workspaces across
 * streams, handle.c): a copy overwritten under a running kernel gives wrong
 * entries, and a split whose partial sums and flags another launch
 * overwrote waits forever, which the watchdog turns into a failure after
 * WATCHDOG_S seconds. A race, so likely over their rounds, not certain.
 *
 * Expected to take a few seconds on an H100, most of it the host's setup
 * (operands, references) and checks; the watchdog's limit is far above.
 *   build/tests/gpu_test_concurrency [name-substring]
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cuda_runtime_api.h>
#include "lib/internal.h"
#include "../host/check.h"
#include "int_gemm.h"

#define NT 8                     /* worker threads */
#define CALLS 50                 /* calls per worker */
#define WATCHDOG_S 25            /* seconds one test may take */
#define MSG 512

static const ig_shape shapes[] = {
    { "1x768x768", 1, 768, 768, TK_OP_N, 0, TK_F32 },
    { "64x64x64 bf16", 64, 64, 64, TK_OP_N, 0, TK_BF16 },
    { "128x4096x4096 NT (split)", 128, 4096, 4096, TK_OP_T, 0, TK_F32 },
    { "512x4096x4096 NT bf16 (split)", 512, 4096, 4096, TK_OP_T, 0, TK_BF16 },
    { "4096x4096x4095 (lda odd: A copied)", 4096, 4096, 4095, TK_OP_N, 0, TK_F32 },
    { "1024x1024x1024 bf16, A at +1 (A copied)", 1024, 1024, 1024, TK_OP_N, 1, TK_BF16 },
    { "1000x1000x1000", 1000, 1000, 1000, TK_OP_N, 0, TK_F32 },
};
#define NS ((int)(sizeof shapes / sizeof shapes[0]))
enum { DECODE, TINY, SPLIT_F32, SPLIT_BF16, LDA_ODD, A_PLUS_1, RAGGED };

/* Each thread's shapes, -1 ending the list: all different, every shape in
 * several (the 4096^2 one in two: 200 MB each); threads 0 and 1 have the
 * ping-pong shapes. */
static const int thread_shapes[NT][5] = {
    { SPLIT_F32, SPLIT_BF16, A_PLUS_1, DECODE, -1 }, { SPLIT_F32, SPLIT_BF16, A_PLUS_1, TINY, -1 },
    { LDA_ODD, DECODE, RAGGED, -1 },                  { LDA_ODD, TINY, SPLIT_F32, -1 },
    { SPLIT_BF16, RAGGED, DECODE, -1 },               { A_PLUS_1, RAGGED, TINY, -1 },
    { SPLIT_F32, RAGGED, TINY, -1 },                  { SPLIT_BF16, A_PLUS_1, DECODE, RAGGED, -1 },
};

static const char *const kernels[] = { "auto", "k31_wgmma_cluster", "k34_wgmma_128x64", "k21_mma_fastload",
                                       "cublas" };
#define NK ((int)(sizeof kernels / sizeof kernels[0]))

/* alpha of call i of thread t: exact times any integer sum here */
static const float alphas[] = { 1.0f, -2.0f, 3.0f, 0.5f, -1.0f, 2.0f, -0.5f };
#define NALPHA ((int)(sizeof alphas / sizeof alphas[0]))
static float alpha_of(int t, int i) { return alphas[(i + 3 * t) % NALPHA]; }

typedef struct job { int shape; const char *kernel; } job;

static tk_handle ref_h;          /* the references' handle */
static int sm;                   /* the device's sm_XY */
static ig_set sets[NT][NS];      /* thread t's operands of shape s (where it has that shape) */
static job jobs[NT][NS * NK];    /* thread t's calls, in turn */
static int njobs[NT];

/* ping-pong and two_streams_one_thread: these (shape, kernel) pairs, each
 * for PP_ROUNDS rounds, on the sets of threads 0 and 1 */
static const job pp_all[] = {
    { SPLIT_F32, "auto" },   { SPLIT_F32, "k34_wgmma_128x64" },  { SPLIT_F32, "k31_wgmma_cluster" },
    { SPLIT_F32, "cublas" }, { SPLIT_BF16, "k31_wgmma_cluster" }, { SPLIT_BF16, "k34_wgmma_128x64" },
    { SPLIT_BF16, "auto" },  { A_PLUS_1, "auto" },
};
#define PP_ROUNDS 8
static job pp_jobs[sizeof pp_all / sizeof pp_all[0]];
static int npp;

/* ---- the watchdog: a test that never ends is a failure, not a hang ---- */

static pthread_mutex_t wd_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wd_cv = PTHREAD_COND_INITIALIZER;
static const char *wd_test;      /* the test being watched; NULL: none */
static struct timespec wd_deadline;

static void *watchdog(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&wd_mu);
    for (;;) {
        int r = wd_test ? pthread_cond_timedwait(&wd_cv, &wd_mu, &wd_deadline) : pthread_cond_wait(&wd_cv, &wd_mu);
        if (r == ETIMEDOUT && wd_test) {
            printf("FAIL %s: not finished after %d s: a GEMM that never ends (a split waiting for partial sums "
                   "another call overwrote?)\n0 passed, 1 failed\n",
                   wd_test, WATCHDOG_S);
            fflush(stdout);
            _exit(1);
        }
    }
    return NULL;
}

static void watch(const char *test)
{
    pthread_mutex_lock(&wd_mu);
    wd_test = test;
    clock_gettime(CLOCK_REALTIME, &wd_deadline);
    wd_deadline.tv_sec += WATCHDOG_S;
    pthread_cond_signal(&wd_cv);
    pthread_mutex_unlock(&wd_mu);
}

static void unwatch(void) { watch(NULL); }

/* ---- one worker's calls ---- */

typedef struct outcome {
    int checked, wrong;          /* calls checked; calls refused or wrong */
    char first[MSG];             /* the first of those */
} outcome;

static void note(outcome *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(outcome *o, const char *fmt, ...)
{
    if (!o->wrong++) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(o->first, sizeof o->first, fmt, ap);
        va_end(ap);
    }
}

/* Checks the call just made (status st) of set o with alpha. */
static void judge(outcome *out, int call, ig_set *o, const char *kernel, float alpha, tk_status st, cudaStream_t s)
{
    char why[MSG];
    if (st != TK_SUCCESS)
        note(out, "call %d (%s, %s): %s: %s", call, o->s.name, kernel, tk_status_string(st), tk_last_error(NULL));
    else if (ig_check(o, alpha, s, why, sizeof why))
        note(out, "call %d (%s, %s, alpha %g): %s", call, o->s.name, kernel, (double)alpha, why);
    out->checked++;
}

typedef struct worker {
    int t;
    tk_handle shared;            /* NULL: the worker makes its own handle */
    pthread_mutex_t *mu;         /* taken around each call on shared */
    outcome out;
    int used_split, used_copies; /* its own handle had the split / copy workspace at the end */
} worker;

static void *run_worker(void *arg)
{
    worker *w = arg;
    cudaStream_t s = NULL;
    tk_handle h = w->shared;
    int ok = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess;
    if (!ok)
        s = NULL;
    if (ok && !h)
        ok = tk_create(&h) == TK_SUCCESS;
    if (!ok)
        note(&w->out, "thread %d: no stream or handle: %s / %s", w->t, cudaGetErrorString(cudaGetLastError()),
             tk_last_error(NULL));
    for (int i = 0; ok && i < CALLS; i++) {
        const job *j = &jobs[w->t][i % njobs[w->t]];
        ig_set *o = &sets[w->t][j->shape];
        float alpha = alpha_of(w->t, i);
        ig_poison(o, s);
        if (w->mu)
            pthread_mutex_lock(w->mu);
        tk_status st = ig_gemm(h, o, alpha, j->kernel, s);
        if (w->mu)
            pthread_mutex_unlock(w->mu);
        judge(&w->out, i, o, j->kernel, alpha, st, s);
    }
    if (h && !w->shared) {
        w->used_split = h->kws != NULL;
        w->used_copies = h->copy_ws != NULL;
        tk_destroy(h);
    }
    if (s)
        cudaStreamDestroy(s);
    return NULL;
}

/* NT workers on their own handles (shared NULL) or all on shared. */
static void run_workers(tk_handle shared, worker *w)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_t tid[NT];
    int started[NT];
    for (int t = 0; t < NT; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].t = t;
        w[t].shared = shared;
        w[t].mu = shared ? &mu : NULL;
        started[t] = pthread_create(&tid[t], NULL, run_worker, &w[t]) == 0;
    }
    for (int t = 0; t < NT; t++)
        if (started[t])
            pthread_join(tid[t], NULL);
    int checked = 0, wrong = 0;
    for (int t = 0; t < NT; t++) {
        CHECK(started[t], "thread %d: pthread_create failed", t);
        CHECK(started[t] && w[t].out.wrong == 0 && w[t].out.checked == CALLS,
              "thread %d: %d of %d calls checked, %d refused or wrong; the first: %s", t, w[t].out.checked, CALLS,
              w[t].out.wrong, w[t].out.first);
        checked += w[t].out.checked;
        wrong += w[t].out.wrong;
    }
    printf("     (%d threads x %d calls, %s: %d checked bit for bit, %d wrong)\n", NT, CALLS,
           shared ? "one shared handle" : "a handle each", checked, wrong);
}

static void test_per_thread_handles(void)
{
    worker w[NT];
    watch("test_per_thread_handles");
    run_workers(NULL, w);
    unwatch();
    int split = 0, copies = 0;
    for (int t = 0; t < NT; t++) {
        split += w[t].used_split;
        copies += w[t].used_copies;
    }
    /* the test is only worth its name if the workspaces were in use */
    CHECK(sm != 90 || split > 0, "no handle used the split workspace");
    CHECK(copies > 0, "no handle copied an operand");
}

/* The handle after a shared test: both workspaces used, from several streams. */
static void check_shared_use(tk_handle h)
{
    CHECK(sm != 90 || h->kws != NULL, "the shared handle never used its split workspace");
    CHECK(h->copy_ws != NULL, "the shared handle never copied an operand");
    CHECK(h->ws_event != NULL && h->ws_recorded && !h->ws_unordered,
          "the shared handle's workspace calls were not ordered by its event (recorded %d, unordered %d)",
          h->ws_recorded, h->ws_unordered);
}

static void test_shared_handle(void)
{
    tk_handle h = NULL;
    CHECK(tk_create(&h) == TK_SUCCESS, "tk_create: %s", tk_last_error(NULL));
    if (!h)
        return;
    worker w[NT];
    watch("test_shared_handle");
    run_workers(h, w);
    unwatch();
    check_shared_use(h);
    tk_destroy(h);
}

/* ---- ping-pong: strict turns on one handle ---- */

typedef struct pp_state {
    tk_handle h;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int turn;                    /* the thread whose call comes next */
} pp_state;

typedef struct pp_worker {
    pp_state *pp;
    int me;                      /* 0 or 1: also whose operand sets */
    outcome out;
} pp_worker;

static void *pp_run(void *arg)
{
    pp_worker *w = arg;
    cudaStream_t s = NULL;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        note(&w->out, "thread %d: cudaStreamCreate: %s", w->me, cudaGetErrorString(cudaGetLastError()));
        s = NULL;
    }
    for (int r = 0; r < npp * PP_ROUNDS; r++) {
        const job *j = &pp_jobs[r / PP_ROUNDS];
        ig_set *o = &sets[w->me][j->shape];
        float alpha = alpha_of(w->me, r);
        if (s)
            ig_poison(o, s);
        pthread_mutex_lock(&w->pp->mu);
        while (w->pp->turn != w->me)
            pthread_cond_wait(&w->pp->cv, &w->pp->mu);
        /* without a stream the turn is still taken and passed, so the
         * other thread does not wait forever */
        tk_status st = s ? ig_gemm(w->pp->h, o, alpha, j->kernel, s) : TK_ERR_CUDA;
        w->pp->turn = 1 - w->me;
        pthread_cond_broadcast(&w->pp->cv);
        pthread_mutex_unlock(&w->pp->mu);
        if (s)
            judge(&w->out, r, o, j->kernel, alpha, st, s);
    }
    if (s)
        cudaStreamDestroy(s);
    return NULL;
}

static void test_ping_pong(void)
{
    pp_state pp = { NULL, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
    CHECK(tk_create(&pp.h) == TK_SUCCESS, "tk_create: %s", tk_last_error(NULL));
    if (!pp.h)
        return;
    pp_worker w[2] = { { &pp, 0, { 0, 0, "" } }, { &pp, 1, { 0, 0, "" } } };
    pthread_t tid;
    watch("test_ping_pong");
    int started = pthread_create(&tid, NULL, pp_run, &w[1]) == 0;
    CHECK(started, "pthread_create failed");
    if (started) {
        pp_run(&w[0]);
        pthread_join(tid, NULL);
    }
    unwatch();
    for (int t = 0; t < 2 && started; t++)
        CHECK(w[t].out.wrong == 0 && w[t].out.checked == npp * PP_ROUNDS,
              "thread %d: %d of %d calls checked, %d refused or wrong; the first: %s", t, w[t].out.checked,
              npp * PP_ROUNDS, w[t].out.wrong, w[t].out.first);
    check_shared_use(pp.h);
    tk_destroy(pp.h);
}

/* ---- one thread, one handle, two streams ---- */

static void test_two_streams_one_thread(void)
{
    tk_handle h = NULL;
    cudaStream_t s[2] = { NULL, NULL };
    CHECK(tk_create(&h) == TK_SUCCESS, "tk_create: %s", tk_last_error(NULL));
    for (int i = 0; i < 2; i++)
        CHECK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate");
    outcome out = { 0, 0, "" };
    watch("test_two_streams_one_thread");
    for (int r = 0; h && s[0] && s[1] && r < npp * PP_ROUNDS; r++) {
        const job *j = &pp_jobs[r / PP_ROUNDS];
        tk_status st[2];
        for (int i = 0; i < 2; i++) {   /* both enqueued before either is waited for */
            ig_poison(&sets[i][j->shape], s[i]);
            st[i] = ig_gemm(h, &sets[i][j->shape], alpha_of(i, r), j->kernel, s[i]);
        }
        for (int i = 0; i < 2; i++)
            judge(&out, 2 * r + i, &sets[i][j->shape], j->kernel, alpha_of(i, r), st[i], s[i]);
    }
    unwatch();
    CHECK(out.wrong == 0 && out.checked == 2 * npp * PP_ROUNDS, "%d of %d calls checked, %d refused or wrong; the "
          "first: %s", out.checked, 2 * npp * PP_ROUNDS, out.wrong, out.first);
    if (h)
        check_shared_use(h);
    for (int i = 0; i < 2; i++)
        if (s[i])
            cudaStreamDestroy(s[i]);
    tk_destroy(h);
}

/* ---- setup ---- */

/* Whether kernel takes set o (auto takes everything; cuBLAS is compared
 * with fp32 C only: int_gemm.h). */
static int takes(const char *kernel, const ig_set *o)
{
    if (!strcmp(kernel, "auto"))
        return 1;
    if (!strcmp(kernel, "cublas") && o->s.c_type != TK_F32)
        return 0;
    tk_gemm_problem p = ig_problem(o, 1.0f);
    return tk_kernel_supports(ref_h, kernel, &p) == TK_SUCCESS;
}

static int setup_failed;
static char setup_why[MSG];

/* The operand sets and their references, and each thread's jobs: every
 * kernel that takes each of its shapes, kernels outermost so that calls
 * in a row change shape. */
static void setup(void)
{
    for (int t = 0; t < NT && !setup_failed; t++) {
        for (int i = 0; thread_shapes[t][i] >= 0 && !setup_failed; i++) {
            int si = thread_shapes[t][i];
            setup_failed = ig_make(&sets[t][si], &shapes[si], (uint32_t)(1 + t * NS + si), ref_h, setup_why,
                                   sizeof setup_why);
        }
        for (int k = 0; k < NK && !setup_failed; k++)
            for (int i = 0; thread_shapes[t][i] >= 0; i++) {
                int si = thread_shapes[t][i];
                if (takes(kernels[k], &sets[t][si]))
                    jobs[t][njobs[t]++] = (job){ si, kernels[k] };
            }
    }
    for (size_t i = 0; i < sizeof pp_all / sizeof pp_all[0] && !setup_failed; i++) {
        if (takes(pp_all[i].kernel, &sets[0][pp_all[i].shape]))
            pp_jobs[npp++] = pp_all[i];
        else
            printf("     (ping-pong: %s does not take %s here: left out)\n", pp_all[i].kernel,
                   shapes[pp_all[i].shape].name);
    }
}

static void test_setup(void)
{
    CHECK(!setup_failed, "%s", setup_why);
}

static void no_gpu(void) { CHECK(0, "a GPU suite without a GPU fails"); }

void tk_tests(void)
{
    if (tk_create(&ref_h) != TK_SUCCESS || !ref_h->have_device) {
        printf("no GPU: %s\n", ref_h ? ref_h->device_error : tk_last_error(NULL));
        tk_run_test("concurrency_needs_a_gpu", no_gpu);
        tk_destroy(ref_h);
        return;
    }
    sm = ref_h->dev.sm;
    pthread_t wd;
    if (pthread_create(&wd, NULL, watchdog, NULL) == 0)
        pthread_detach(wd);
    setup();
    TK_TEST(test_setup);
    if (!setup_failed) {
        TK_TEST(test_per_thread_handles);
        TK_TEST(test_shared_handle);
        TK_TEST(test_ping_pong);
        TK_TEST(test_two_streams_one_thread);
    }
    for (int t = 0; t < NT; t++)
        for (int s = 0; s < NS; s++)
            ig_free(&sets[t][s]);
    tk_destroy(ref_h);
}
