/* handle.c - the handle: device description, cuBLAS handle, workspace. */
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
    cudaError_t e = cudaMalloc(&ws, TK_CUBLAS_WORKSPACE);
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
        if (cudaMalloc(&p, bytes) != cudaSuccess) {
            cudaGetLastError();
            return;
        }
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
