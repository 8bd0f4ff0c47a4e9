/* build.c - tk_get_build_info: how this library was built and what it runs
 * on. TK_ARCHS is the Makefile's ARCHS, passed to this file alone as a
 * define; a build that does not pass it says "unknown". */
#include <stdio.h>
#include <cuda_runtime_api.h>
#include <cublas_v2.h>
#include "internal.h"

#ifndef TK_ARCHS
#define TK_ARCHS "unknown"
#endif

#define TK_STR2(x) #x
#define TK_STR(x) TK_STR2(x)

/* The first version of tk_build_info: up to cublas_loaded. */
#define TK_BUILD_INFO_V1_SIZE (offsetof(tk_build_info, cublas_loaded) + sizeof(int))

tk_status tk_get_build_info(tk_build_info *out)
{
    tk_call_begin(NULL);
    tk_build_info b = { .size = sizeof b };
    b.version = TILEKIT_VERSION;
    b.version_string = TK_STR(TILEKIT_VERSION_MAJOR) "." TK_STR(TILEKIT_VERSION_MINOR) "." TK_STR(
        TILEKIT_VERSION_PATCH);
    b.archs = TK_ARCHS;
    b.cuda_runtime_built = CUDART_VERSION;
    b.cublas_built = CUBLAS_VERSION;
    /* each needs neither a GPU nor a driver; a failure leaves 0 ("cannot say") */
    int v = 0;
    if (cudaRuntimeGetVersion(&v) == cudaSuccess)
        b.cuda_runtime_loaded = v;
    v = 0;
    if (cudaDriverGetVersion(&v) == cudaSuccess)
        b.cuda_driver = v;
    int major = 0, minor = 0, patch = 0;
    if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
        b.cublas_loaded = major * 10000 + minor * 100 + patch;
    cudaGetLastError();   /* nothing left for a later launch to report as its own */
    return tk_fill_versioned(NULL, "out", out, &b, sizeof b, TK_BUILD_INFO_V1_SIZE);
}
