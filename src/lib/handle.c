/* handle.c - the handle: device description, cuBLAS handle, workspaces,
 * and the order of the calls that share them.
 *
 * The workspaces (cuBLAS's, the split workspace with its flags, the copies
 * of route.c) are used on the GPU by the stream of each call. Two calls
 * naming different streams could then run at the same time and write the
 * same bytes: two splits would overwrite each other's partial sums and
 * flags, two copies each other's operands. Rather than a workspace per
 * stream (unbounded memory) or a rule users must keep, the handle orders
 * these calls: each records ws_event on its stream where it ends, and the
 * next one, on another stream, makes its stream wait for that event first.
 * Streams are told apart by cudaStreamGetId, unique for the life of the
 * process, not by handle value: a stream destroyed while its work is still
 * pending often gives its value to the next stream created (6 times in 6 on
 * an H200 with CUDA 13.0, tests/gpu/test_handle.c), which must still wait
 * for that work; its id differed every time. No call synchronizes the host
 * or the device.
 *
 * Memory comes from the stream-ordered allocator (cudaMallocAsync and
 * cudaFreeAsync on the call's stream, which the event wait has already
 * ordered after every earlier user): growing a workspace never waits for
 * the device. CUDA still counts these calls as unsafe while another thread
 * captures a graph in global mode (refused, and the capture invalidated:
 * seen on an H200), so they run in relaxed capture mode, as the event and
 * cuBLAS handle creation do. Calls that use
 * no workspace are not ordered: they share nothing on the GPU (tensor maps
 * travel in the launch parameters). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include "internal.h"

/* Calls that are not stream operations (creating an event or a cuBLAS
 * handle, freeing at destruction) run with the thread's capture mode
 * relaxed: in the default global mode CUDA counts them as unsafe while any
 * thread captures a graph, and they would invalidate that capture. None of
 * them touches a capturing stream. */
static enum cudaStreamCaptureMode relax(void)
{
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess) {
        cudaGetLastError();
        m = cudaStreamCaptureModeRelaxed;   /* nothing changed: restoring it is a no-op */
    }
    return m;
}

static void restore(enum cudaStreamCaptureMode m)
{
    if (cudaThreadExchangeStreamCaptureMode(&m) != cudaSuccess)
        cudaGetLastError();
}

/* cuBLAS handles of destroyed tk handles, kept for the next tk handle of
 * the same device instead of being destroyed: cublasDestroy synchronizes
 * the device (cuBLAS's documentation says so), which CUDA refuses while any
 * thread captures a graph, and the refusal invalidates that capture (seen
 * on an H200: tests/gpu/test_handle.c, test_destroy_during_capture). A tk
 * handle may be destroyed at any time (Python destroys a thread's handles
 * when the thread ends), so it never calls cublasDestroy; the pool holds at
 * most as many cuBLAS handles as tk handles that used cuBLAS were alive at
 * once, up to TK_CUBLAS_POOL (past that, a handle is destroyed after all).
 * Process-wide and keyed by device: a cuBLAS handle belongs to the device
 * current at its creation and is used by one tk handle at a time. */
#define TK_CUBLAS_POOL 64
static struct {
    pthread_mutex_t mu;
    int n;
    struct { int device; void *cublas; } e[TK_CUBLAS_POOL];
} cublas_pool = { PTHREAD_MUTEX_INITIALIZER, 0, { { 0, NULL } } };

static void *cublas_pool_take(int device)
{
    void *cb = NULL;
    pthread_mutex_lock(&cublas_pool.mu);
    for (int i = cublas_pool.n - 1; i >= 0 && !cb; i--)
        if (cublas_pool.e[i].device == device) {
            cb = cublas_pool.e[i].cublas;
            cublas_pool.e[i] = cublas_pool.e[--cublas_pool.n];
        }
    pthread_mutex_unlock(&cublas_pool.mu);
    return cb;
}

/* 0 when kept; 1 when the pool is full (the caller destroys it). */
static int cublas_pool_give(int device, void *cb)
{
    pthread_mutex_lock(&cublas_pool.mu);
    int full = cublas_pool.n == TK_CUBLAS_POOL;
    if (!full) {
        cublas_pool.e[cublas_pool.n].device = device;
        cublas_pool.e[cublas_pool.n++].cublas = cb;
    }
    pthread_mutex_unlock(&cublas_pool.mu);
    return full;
}

tk_status tk_create(tk_handle *out)
{
    tk_call_begin(NULL);
    if (!out)
        return tk_fail(NULL, TK_ERR_INVALID_VALUE, "out: pointer is NULL (tk_create expects a tk_handle* to fill)");
    *out = NULL;
    tk_handle h = calloc(1, sizeof *h);
    if (!h)
        return tk_fail(NULL, TK_ERR_ALLOC, "tk_create: out of host memory");
    h->get_device = cudaGetDevice;
    h->ws_limit = TK_WORKSPACE_UNLIMITED;
    tk_status st = tk_device_query(&h->dev, h->device_error, sizeof h->device_error);
    h->have_device = (st == TK_SUCCESS);
    h->sm_count_full = h->have_device ? h->dev.sm_count : 0;
    if (st != TK_SUCCESS && st != TK_ERR_NO_DEVICE) {
        tk_status r = tk_fail(NULL, st, "tk_create: %s", h->device_error);
        free(h);
        return r;
    }
    /* An unusable TILEKIT_TUNE file is ignored and tk_create succeeds; the
     * library never prints, so the thread's message says why ("" else). */
    char why[TK_ERR_LEN] = "";
    if (h->have_device)
        tk_tune_from_env(&h->dev, &h->tune, &h->ntune, why, sizeof why);
    tk_fail(NULL, TK_SUCCESS, "%s", why);
    *out = h;
    return TK_SUCCESS;
}

tk_status tk_destroy(tk_handle h)
{
    if (!h)
        return TK_SUCCESS;
    enum cudaStreamCaptureMode m = relax();
    /* The frees below are the handle's device's (its per-thread stream, its
     * memory pool): that device is made current for them, then put back. */
    int cur = -1;
    int switched = h->have_device && cudaGetDevice(&cur) == cudaSuccess && cur != h->dev.id &&
                   cudaSetDevice(h->dev.id) == cudaSuccess;
    cudaGetLastError();
    /* Every call that used a workspace recorded ws_event where it ends (or,
     * where that failed, left ws_unordered): once it has completed, nothing
     * on the GPU uses the memory any more. */
    if (h->ws_event && !h->ws_unordered) {
        if (cudaEventSynchronize(h->ws_event) != cudaSuccess)
            cudaGetLastError();
    } else if (h->ws_unordered && cudaDeviceSynchronize() != cudaSuccess) {
        cudaGetLastError();
    }
    if (h->cublas && cublas_pool_give(h->dev.id, h->cublas))
        cublasDestroy((cublasHandle_t)h->cublas);
    void *bufs[4] = { h->workspace, h->kws, h->flags, h->copy_ws };
    for (int i = 0; i < 4; i++)
        if (bufs[i] && cudaFreeAsync(bufs[i], cudaStreamPerThread) != cudaSuccess)
            cudaGetLastError();
    if (h->ws_event)
        cudaEventDestroy(h->ws_event);
    if (switched && cudaSetDevice(cur) != cudaSuccess)
        cudaGetLastError();
    restore(m);
    free(h->tune);
    free(h);
    return TK_SUCCESS;
}

tk_status tk_handle_cublas(tk_handle h)
{
    /* a pooled one gets its stream and workspace set by every launch (cublas.c) */
    if (!h->cublas)
        h->cublas = cublas_pool_take(h->dev.id);
    if (!h->cublas) {
        cublasHandle_t cb = NULL;
        enum cudaStreamCaptureMode m = relax();
        cublasStatus_t st = cublasCreate(&cb);
        restore(m);
        if (st != CUBLAS_STATUS_SUCCESS) {
            tk_note_cublas_status((int)st);
            return tk_fail(h, TK_ERR_CUBLAS, "cublasCreate: %s", cublasGetStatusString(st));
        }
        h->cublas = cb;
    }
    return TK_SUCCESS;
}

size_t tk_handle_held(const struct tk_handle_s *h)
{
    return h->workspace_bytes + h->kws_bytes + h->flags_bytes + h->copy_ws_bytes;
}

/* The test hook: 1 when this allocation is the one h->fail_alloc named. */
static int alloc_fails(tk_handle h)
{
    return h->fail_alloc > 0 && --h->fail_alloc == 0;
}

cudaError_t tk_handle_malloc(tk_handle h, void **p, size_t bytes, cudaStream_t s)
{
    /* An injected failure is a real failed allocation (no GPU has 2^62
     * bytes), so the runtime is left as a real one leaves it. */
    enum cudaStreamCaptureMode m = relax();
    cudaError_t e = cudaMallocAsync(p, alloc_fails(h) ? (size_t)1 << 62 : bytes, s);
    restore(m);
    if (e != cudaSuccess) {
        cudaGetLastError();
        tk_note_cuda_error((int)e);   /* the call's, if it fails for it */
        *p = NULL;
    }
    return e;
}

void tk_handle_free(tk_handle h, void *p, cudaStream_t s)
{
    (void)h;
    if (!p)
        return;
    enum cudaStreamCaptureMode m = relax();
    if (cudaFreeAsync(p, s) != cudaSuccess)
        cudaGetLastError();
    restore(m);
}

/* The stream's process-wide id in *id; 0 when it has none to give (then
 * it is treated as another stream than the last). cudaStreamPerThread names
 * a different stream in each host thread, and a handle may pass from thread
 * to thread: it is always treated as another stream. */
static int stream_id(cudaStream_t s, unsigned long long *id)
{
    if (s == cudaStreamPerThread)
        return 0;
    if (cudaStreamGetId(s, id) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return 1;
}

tk_status tk_handle_ws_begin(tk_handle h, cudaStream_t s)
{
    cudaError_t e;
    if (!h->ws_event) {   /* the test hook counts it as an allocation */
        enum cudaStreamCaptureMode m = relax();
        e = alloc_fails(h) ? cudaErrorMemoryAllocation : cudaEventCreateWithFlags(&h->ws_event, cudaEventDisableTiming);
        restore(m);
        if (e != cudaSuccess) {
            cudaGetLastError();
            h->ws_event = NULL;
            tk_note_cuda_error((int)e);
            return tk_fail(h, TK_ERR_ALLOC, "cudaEventCreate (to order the calls that share the handle's "
                           "workspaces): %s", cudaGetErrorString(e));
        }
    }
    unsigned long long id = 0;
    const int known = stream_id(s, &id);
    if (h->ws_unordered) {
        /* The last call's event could not be recorded: wait for everything. */
        if ((e = cudaDeviceSynchronize()) != cudaSuccess) {
            cudaGetLastError();
            tk_note_cuda_error((int)e);
            return tk_fail(h, TK_ERR_CUDA, "cudaDeviceSynchronize (ordering the handle's workspaces): %s",
                           cudaGetErrorString(e));
        }
        h->ws_unordered = 0;
    } else if (h->ws_recorded && !(known && h->ws_known && id == h->ws_stream_id) &&
               (e = cudaStreamWaitEvent(s, h->ws_event, 0)) != cudaSuccess) {
        cudaGetLastError();
        tk_note_cuda_error((int)e);
        return tk_fail(h, TK_ERR_CUDA, "cudaStreamWaitEvent (ordering the handle's workspaces): %s",
                       cudaGetErrorString(e));
    }
    h->ws_known = known;
    h->ws_stream_id = id;
    return TK_SUCCESS;
}

void tk_handle_ws_end(tk_handle h, cudaStream_t s)
{
    if (cudaEventRecord(h->ws_event, s) != cudaSuccess) {
        cudaGetLastError();
        h->ws_unordered = 1;
        h->ws_recorded = 0;
        return;
    }
    h->ws_recorded = 1;
}
