/* handle.c - the handle: device description, cuBLAS handle, workspaces,
 * and the order of the calls that share them.
 *
 * The workspaces (cuBLAS's, the split workspace kws, the copies of route.c)
 * are used on the GPU by the stream of each call. Two calls naming different
 * streams could then run at the same time and write the same bytes: two
 * splits would overwrite each other's partial sums and flags (a last slice
 * waiting for its launch's number would wait forever), two copies each
 * other's operands. Rather than a workspace per stream (unbounded memory, and
 * a stream handle cannot say when it was destroyed) or a rule users must
 * keep, the handle orders these calls: once it has seen a second stream,
 * each such call records an event where it ends and the next one makes its
 * stream wait for it. Calls on one stream, the common case, are ordered by
 * the stream already and cost nothing more; the switch from one stream to
 * several synchronizes the device once, because the calls before it
 * recorded no event (and their stream may be gone). Calls that use no
 * workspace are not ordered: they share nothing on the GPU (tensor maps
 * travel in the launch parameters). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include "internal.h"

/* cuBLAS recommends 32 MiB of workspace on Hopper for its fastest kernels. */
#define TK_CUBLAS_WORKSPACE (32u << 20)

tk_status tk_create(tk_handle *out)
{
    if (!out)
        return tk_fail(NULL, TK_ERR_INVALID_VALUE, "out: pointer is NULL (tk_create expects a tk_handle* to fill)");
    *out = NULL;
    tk_handle h = calloc(1, sizeof *h);
    if (!h)
        return tk_fail(NULL, TK_ERR_ALLOC, "tk_create: out of host memory");
    tk_status st = tk_device_query(&h->dev, h->device_error, sizeof h->device_error);
    h->have_device = (st == TK_SUCCESS);
    if (st != TK_SUCCESS && st != TK_ERR_NO_DEVICE) {
        tk_status r = tk_fail(NULL, st, "tk_create: %s", h->device_error);
        free(h);
        return r;
    }
    const char *tune = getenv(TK_TUNE_ENV);
    if (tune && *tune && h->have_device) {
        char why[TK_MSG_LEN];
        if (tk_tune_load(tune, &h->dev, &h->tune, &h->ntune, why, sizeof why))
            fprintf(stderr, "tilekit: %s=%s ignored: %s; auto-dispatch uses its shape rules\n", TK_TUNE_ENV, tune,
                    why);
    }
    *out = h;
    return TK_SUCCESS;
}

tk_status tk_destroy(tk_handle h)
{
    if (!h)
        return TK_SUCCESS;
    if (h->cublas)
        cublasDestroy((cublasHandle_t)h->cublas);
    if (h->workspace)
        cudaFree(h->workspace);
    if (h->kws)
        cudaFree(h->kws);
    free(h->tune);
    if (h->copy_ws)
        cudaFree(h->copy_ws);
    if (h->ws_event)
        cudaEventDestroy(h->ws_event);
    free(h);
    return TK_SUCCESS;
}

tk_status tk_handle_cublas(tk_handle h)
{
    if (h->cublas)
        return TK_SUCCESS;
    cublasHandle_t cb = NULL;
    cublasStatus_t s = cublasCreate(&cb);
    if (s != CUBLAS_STATUS_SUCCESS)
        return tk_fail(h, TK_ERR_CUBLAS, "cublasCreate: %s", cublasGetStatusString(s));
    void *ws = NULL;
    cudaError_t e = tk_handle_malloc(h, &ws, TK_CUBLAS_WORKSPACE);
    if (e != cudaSuccess) {
        cublasDestroy(cb);
        return tk_fail(h, TK_ERR_ALLOC, "cudaMalloc(cuBLAS workspace, %u bytes): %s",
                       TK_CUBLAS_WORKSPACE, cudaGetErrorString(e));
    }
    s = cublasSetWorkspace(cb, ws, TK_CUBLAS_WORKSPACE);
    if (s != CUBLAS_STATUS_SUCCESS) {
        cudaFree(ws);
        cublasDestroy(cb);
        return tk_fail(h, TK_ERR_CUBLAS, "cublasSetWorkspace: %s", cublasGetStatusString(s));
    }
    h->cublas = cb;
    h->workspace = ws;
    h->workspace_bytes = TK_CUBLAS_WORKSPACE;
    return TK_SUCCESS;
}

void tk_handle_kernel_ws(tk_handle h, tk_args *a, size_t bytes, cudaStream_t stream)
{
    a->kws = NULL;
    a->kws_bytes = 0;
    if (h->kws_bytes < bytes) {
        /* cudaFree waits for the launches still using the old buffer. */
        if (h->kws)
            cudaFree(h->kws);
        h->kws = NULL;
        h->kws_bytes = 0;
        void *p = NULL;
        if (tk_handle_malloc(h, &p, bytes) != cudaSuccess)
            return;
        if (cudaMemsetAsync(p, 0, bytes, stream) != cudaSuccess) {
            cudaGetLastError();
            cudaFree(p);
            return;
        }
        h->kws = p;
        h->kws_bytes = bytes;
        h->seq = 0;
    }
    if (++h->seq == 0) {
        /* seq wrapped: clear the flags of the old numbering, in stream order. */
        if (cudaMemsetAsync(h->kws, 0, h->kws_bytes, stream) != cudaSuccess) {
            cudaGetLastError();
            return;
        }
        h->seq = 1;
    }
    a->kws = h->kws;
    a->kws_bytes = h->kws_bytes;
    a->seq = h->seq;
}

/* The test hook: 1 when this allocation is the one h->fail_alloc named. */
static int alloc_fails(tk_handle h)
{
    return h->fail_alloc > 0 && --h->fail_alloc == 0;
}

cudaError_t tk_handle_malloc(tk_handle h, void **p, size_t bytes)
{
    /* An injected failure is a real failed cudaMalloc (no GPU has 2^62
     * bytes), so the runtime is left as a real one leaves it. */
    cudaError_t e = cudaMalloc(p, alloc_fails(h) ? (size_t)1 << 62 : bytes);
    if (e != cudaSuccess) {
        cudaGetLastError();
        *p = NULL;
    }
    return e;
}

/* Whether s may be another stream than the last one that used a workspace.
 * cudaStreamPerThread names a different stream in each host thread. */
static int other_stream(const tk_handle h, cudaStream_t s)
{
    return s != h->ws_stream || s == cudaStreamPerThread;
}

/* From one stream to several: the event the calls will record, and the
 * device idle, so that the calls before (which recorded nothing) are over. */
static tk_status order_streams(tk_handle h)
{
    cudaError_t e;
    if (!h->ws_event) {   /* the test hook counts it as an allocation */
        e = alloc_fails(h) ? cudaErrorMemoryAllocation : cudaEventCreateWithFlags(&h->ws_event, cudaEventDisableTiming);
        if (e != cudaSuccess) {
            cudaGetLastError();
            h->ws_event = NULL;
            return tk_fail(h, TK_ERR_ALLOC, "cudaEventCreate (to order the handle's workspaces on a second stream): %s",
                           cudaGetErrorString(e));
        }
    }
    if ((e = cudaDeviceSynchronize()) != cudaSuccess) {
        cudaGetLastError();
        return tk_fail(h, TK_ERR_CUDA, "cudaDeviceSynchronize (before the handle's first call on a second stream): %s",
                       cudaGetErrorString(e));
    }
    h->ws_streams = 2;
    return TK_SUCCESS;
}

tk_status tk_handle_ws_begin(tk_handle h, cudaStream_t s)
{
    if (h->ws_streams == 0) {   /* the first use: nothing to wait for */
        h->ws_streams = 1;
        h->ws_stream = s;
        return TK_SUCCESS;
    }
    if (!other_stream(h, s))
        return TK_SUCCESS;
    if (h->ws_streams == 1)
        return order_streams(h);
    cudaError_t e = cudaStreamWaitEvent(s, h->ws_event, 0);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return tk_fail(h, TK_ERR_CUDA, "cudaStreamWaitEvent (ordering the handle's workspaces): %s",
                       cudaGetErrorString(e));
    }
    return TK_SUCCESS;
}

void tk_handle_ws_end(tk_handle h, cudaStream_t s)
{
    h->ws_stream = s;
    /* An event that cannot be recorded leaves the handle as on one stream:
     * the next call on another stream synchronizes the device instead. */
    if (h->ws_streams == 2 && cudaEventRecord(h->ws_event, s) != cudaSuccess) {
        cudaGetLastError();
        h->ws_streams = 1;
    }
}
