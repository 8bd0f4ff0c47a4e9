/* internal.h - host-side internals shared by the files of src/lib. */
#ifndef TK_INTERNAL_H
#define TK_INTERNAL_H

#include <stdarg.h>
#include "kernel.h"
#include "launch_cache.h"
#include "tune.h"

#define TK_ATTR_CACHE 64

/* Size of the messages tk_last_error returns (the handle's and the calling
 * thread's). Larger than TK_MSG_LEN, the size of a kernel's reason, so that
 * a reason with its context, or the list of every kernel name of an
 * unknown-kernel refusal, reaches the caller whole. */
#define TK_ERR_LEN 4096

struct tk_handle_s {
    int have_device;             /* 0: no GPU/driver found at create time */
    tk_device dev;
    char device_error[TK_MSG_LEN];
    /* cudaGetDevice; tests put a stand-in here to model another current device. */
    cudaError_t (*get_device)(int *dev);
    void *cublas;                /* cublasHandle_t, created on first use */
    void *workspace;             /* device workspace for cuBLAS */
    size_t workspace_bytes;
    void *kws;                   /* kernels' workspace for partial sums (tk_kernel.workspace) */
    size_t kws_bytes;
    void *flags;                 /* kernels' completion flags: only ever 0 or an earlier seq */
    size_t flags_bytes;
    uint32_t seq;                /* launches that got kws; 0 = none yet */
    void *copy_ws;               /* auto-dispatch's copies of misaligned operands (route.c) */
    size_t copy_ws_bytes;
    size_t copy_ws_limit;        /* 0: none; tests set one to see the refusal */
    /* The order of the calls that use the workspaces above (handle.c,
     * tk_handle_ws_begin): each records ws_event on its stream where it
     * ends; the next, on a stream of another id, waits for it first. */
    cudaEvent_t ws_event;        /* created by the first such call */
    int ws_recorded;             /* ws_event holds the end of the last such call */
    int ws_unordered;            /* recording failed: the next such call synchronizes the device */
    int ws_known;                /* ws_stream_id is the last such call's stream id (cudaStreamGetId) */
    unsigned long long ws_stream_id;
    /* Tests: n > 0 fails the n-th device allocation from now (tk_handle_malloc's,
     * or the creation of ws_event). */
    int fail_alloc;
    char err[TK_ERR_LEN];        /* last error of this handle */
    /* cudaFuncGetAttributes of the kernel entries seen so far: constant per
     * entry and device, and a few microseconds each, asked for every
     * candidate kernel of every auto-dispatched call otherwise. */
    struct { const void *func; tk_func_attrs fa; } attrs[TK_ATTR_CACHE];
    int nattrs;
    tk_launch_cache lc;          /* tensor maps, shared memory grants, occupancy */
    tk_tune_entry *tune;         /* the tune cache named by TILEKIT_TUNE (tune.h); NULL: none */
    int ntune;
};

/* The NVIDIA driver's library, which the CUDA runtime loads. */
#define TK_DRIVER_LIB "libcuda.so.1"

/* The reason no device can be used, when cudaGetDeviceCount returned e (or
 * a count of 0 with cudaSuccess): where the driver library `driver` cannot
 * be loaded, that no NVIDIA driver was found, else CUDA's own words
 * (device.c; tests pass another library name to model either machine). */
void tk_device_none_why(cudaError_t e, const char *driver, char *why, size_t len);

/* Records a failure on h (may be NULL) and on the calling thread, and
 * returns st, so checks read `return tk_fail(h, TK_ERR_..., "fmt", ...)`. */
tk_status tk_fail(tk_handle h, tk_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks the public problem and normalizes it to row-major tk_args.
 * Pure: touches no GPU. Sets *noop when M or N is 0. */
tk_status tk_problem_normalize(tk_handle h, const tk_gemm_problem *p, tk_args *out, int *noop);

/* Creates the cuBLAS handle on first use, and its workspace on the first
 * call that is not being captured (graph == 0), on stream s. */
tk_status tk_handle_cublas(tk_handle h, cudaStream_t s, int graph);

/* Stream-ordered allocation (cudaMallocAsync on s) for the handle's
 * workspaces: every device allocation of the library goes through here, so
 * the test hook h->fail_alloc reaches them all. On failure *p is NULL and
 * the runtime's last error is cleared (a later launch would report it as
 * its own). tk_handle_free frees in stream order on s (p may be NULL). */
cudaError_t tk_handle_malloc(tk_handle h, void **p, size_t bytes, cudaStream_t s);
void tk_handle_free(tk_handle h, void *p, cudaStream_t s);

/* Around the work of one call that uses a workspace of the handle (copies,
 * split workspace, cuBLAS's) on stream s: begin makes s wait for the
 * previous such call, whatever its stream; end (also after a failure, once
 * begin succeeded) marks where this call's work ends on s. */
tk_status tk_handle_ws_begin(tk_handle h, cudaStream_t s);
void tk_handle_ws_end(tk_handle h, cudaStream_t s);

/* Points a->kws at a workspace of at least `bytes` and a->flags at `flags`
 * completion flags (each allocated on first use, grown when too small, the
 * flags zeroed then and whenever seq wraps to 1), and numbers the launch
 * (a->seq). Leaves a->kws and a->flags NULL if the memory cannot be had:
 * the kernel then runs without them. */
void tk_handle_kernel_ws(tk_handle h, tk_args *a, size_t bytes, size_t flags, cudaStream_t stream);

/* ---- routes (route.c): running a problem on aligned copies ---- */

/* Problems of fewer flops (2^22: a 128^3 product) take no copies (route.c). */
#define TK_ROUTE_TINY_FLOP (1 << 22)

typedef struct tk_route {
    const tk_kernel *k;          /* the kernel that runs `run` */
    tk_args run;                 /* the problem it sees: copied operands point into the workspace */
    int copy[3];                 /* A, B, C copied (C: staged, copied back after the product) */
    int64_t ld[3];               /* their leading dimensions in the workspace (elements) */
    size_t off[3];               /* their offsets in the workspace (bytes, 256-aligned) */
    size_t bytes;                /* workspace needed */
} tk_route;

/* 1 when 2*m*n*k < TK_ROUTE_TINY_FLOP. */
int tk_route_tiny(const tk_args *a);
/* 1 when p and every line of a matrix with leading dimension ld are 16-byte
 * aligned (what the vector and TMA kernels need). */
int tk_route_aligned(const void *p, int64_t ld, size_t elem_bytes);
/* The route that copies A and B (when pack_ab) and C (when stage_c) where
 * they are misaligned; r->k is left NULL; run's copied pointers are NULL
 * until tk_route_bind. Pure. */
void tk_route_plan(const tk_args *a, int pack_ab, int stage_c, tk_route *r);
void tk_route_bind(tk_route *r, void *ws);
/* "k31_wgmma_cluster" or "k31_wgmma_cluster (copies A, B)". */
void tk_route_name(const tk_route *r, char *buf, size_t len);
/* Auto-dispatch's choice for the problem p (a kernel and its copies), as
 * tk_gemm_ex would run it; p's pointers may be NULL as for
 * tk_select_kernel. Needs a device. */
tk_status tk_select_route(tk_handle h, const tk_gemm_problem *p, tk_route *r);
/* Before the kernel: grows the workspace, binds r, copies A, B (and C when
 * staged and beta != 0) in; after it: C back. On stream. */
tk_status tk_route_copy_in(tk_handle h, tk_route *r, const tk_args *a, cudaStream_t stream);
tk_status tk_route_copy_out(tk_handle h, const tk_route *r, const tk_args *a, cudaStream_t stream);

#endif /* TK_INTERNAL_H */
