/* internal.h - host-side internals shared by the files of src/host. */
#ifndef TK_INTERNAL_H
#define TK_INTERNAL_H

#include <stdarg.h>
#include "kernel.h"

struct tk_handle_s {
    int have_device;             /* 0: no GPU/driver found at create time */
    tk_device dev;
    char device_error[TK_MSG_LEN];
    void *cublas;                /* cublasHandle_t, created on first use */
    void *workspace;             /* device workspace for cuBLAS */
    size_t workspace_bytes;
    void *kws;                   /* kernels' workspace (tk_kernel.workspace), zeroed */
    size_t kws_bytes;
    uint32_t seq;                /* launches that got kws; 0 = none yet */
    char err[TK_MSG_LEN];        /* last error of this handle */
};

/* Records a failure on h (may be NULL) and on the calling thread, and
 * returns st, so checks read `return tk_fail(h, TK_ERR_..., "fmt", ...)`. */
tk_status tk_fail(tk_handle h, tk_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks the public problem and normalizes it to row-major tk_args.
 * Pure: touches no GPU. Sets *noop when M or N is 0. */
tk_status tk_problem_normalize(tk_handle h, const tk_gemm_problem *p, tk_args *out, int *noop);

/* Creates the cuBLAS handle and workspace on first use. */
tk_status tk_handle_cublas(tk_handle h);

/* Points a->kws at a zeroed workspace of at least `bytes` (allocated on first
 * use, grown when too small) and numbers the launch (a->seq). Leaves a->kws
 * NULL if the memory cannot be had: the kernel then runs without it. */
void tk_handle_kernel_ws(tk_handle h, tk_args *a, size_t bytes, cudaStream_t stream);

#endif /* TK_INTERNAL_H */
