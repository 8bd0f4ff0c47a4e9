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
    /* The caller's workspace (tk_set_workspace, workspace.c): when uws is
     * set every workspace comes from it and none of the above is allocated
     * or used. Its first uws_flags bytes hold completion flags (zeros or
     * launch numbers, as h->flags does); 0: none set up since it was set. */
    void *uws;
    size_t uws_bytes;
    size_t uws_flags;
    size_t ws_limit;             /* cap on the bytes of the workspaces above (tk_set_workspace_limit) */
    int split_never;             /* tk_set_split_k(TK_SPLIT_K_NEVER): kernels get no workspace */
    /* tk_set_sm_count: dev.sm_count is the SMs kernels may fill; sm_count_full
     * the device's own count (0 without a device), sm_cap the caller's cap (0: none). */
    int sm_count_full, sm_cap;
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
    int cuda_error;              /* the cudaError_t behind it (tk_last_cuda_error); 0: none */
    int cublas_status;           /* the cublasStatus_t behind it; 0: none */
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
 * returns st, so checks read `return tk_fail(h, TK_ERR_..., "fmt", ...)`.
 * The CUDA error or cuBLAS status noted since the call began
 * (tk_note_cuda_error, kernel.h) is recorded with it, then forgotten. */
tk_status tk_fail(tk_handle h, tk_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The start of every public call on h (h may be NULL): h's last error and
 * CUDA error cleared, the thread's noted CUDA error forgotten (status.c). */
void tk_call_begin(tk_handle h);
/* Forgets the noted CUDA error (a refused auto-dispatch candidate's). */
void tk_note_clear(void);

/* The versioned structs' rule (tilekit.h) for a struct the library fills:
 * `arg` names out in messages; out->size (its first field) must be at least
 * `first` (the first version's size); the `known` bytes of src (a struct
 * of this library's version) are copied within out->size, its size field
 * excepted, and the bytes past them up to out->size zeroed. */
tk_status tk_fill_versioned(tk_handle h, const char *arg, void *out, const void *src, size_t known, size_t first);

/* The versioned structs' rule (tilekit.h) for a descriptor the caller
 * fills (tk_gemm_desc, tk_quantize_desc): `arg` names it, `type` and
 * `init` its struct and _INIT macro in messages; in->size at least `first`
 * (else TK_ERR_INVALID_VALUE); out (this library's struct, `known` bytes)
 * gets the fields within in->size and zeros past them, its size `known`;
 * a set byte of in past `known` is TK_ERR_NOT_SUPPORTED. */
tk_status tk_read_versioned(tk_handle h, const char *arg, const char *type, const char *init, const void *in,
                            void *out, size_t known, size_t first);

/* Checks the public problem and normalizes it to row-major tk_args.
 * Pure: touches no GPU. Sets *noop when M or N is 0. */
tk_status tk_problem_normalize(tk_handle h, const tk_gemm_problem *p, tk_args *out, int *noop);

/* Checks one stored matrix (gemm.c): `what` has op(X) of r x c (logical),
 * stored as r x c (op N) or c x r (op T) in `layout` with leading
 * dimension `ldname` = ld (>= its line, at least 1) and elements of esz
 * bytes, spanning at most INT64_MAX bytes; ptr element-aligned, and not
 * NULL when `used`. Refusals recorded on h, naming what or ldname. */
tk_status tk_check_matrix(tk_handle h, const char *what, const char *ldname, tk_layout layout, tk_op op, int64_t r,
                          int64_t c, int64_t ld, int64_t esz, const void *ptr, int used);

/* Creates the cuBLAS handle on first use (its workspace comes from
 * tk_handle_call_ws). */
tk_status tk_handle_cublas(tk_handle h);

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

/* cuBLAS's workspace: what cuBLAS recommends on Hopper for its fastest kernels. */
#define TK_CUBLAS_WORKSPACE ((size_t)32 << 20)

/* Device bytes h holds in the workspaces it allocated itself. */
size_t tk_handle_held(const struct tk_handle_s *h);

/* The workspaces one call gets (tk_handle_call_ws, workspace.c). */
typedef struct tk_call_ws {
    void *copy;                  /* base of the copies of misaligned operands (route.c); NULL: none */
    void *kws;                   /* the split's partial sums (tk_args.kws); NULL: the kernel runs unsplit */
    size_t kws_bytes;
    uint32_t *flags;             /* their completion flags (tk_args.flags) */
    size_t nflags;
    uint32_t seq;                /* the launch's number (tk_args.seq) */
    void *cublas;                /* cuBLAS's workspace; NULL: none */
    size_t cublas_bytes;
} tk_call_ws;

/* The workspaces of one call on stream s, after tk_handle_ws_begin: copies
 * of copy_bytes (a failure to get them is the call's:
 * TK_ERR_OUT_OF_RESOURCES), a split workspace of kws bytes with nflags
 * flags (allocated on first use, grown when too small, the flags zeroed
 * then and whenever seq wraps to 1; the launch numbered; none when it
 * cannot be had: the kernel then runs unsplit) and, with `cublas`, cuBLAS's
 * (none when it does not fit the cap; TK_ERR_ALLOC when its allocation
 * fails). From the caller's workspace when one is set (tk_set_workspace),
 * else from the handle's own within its cap. */
tk_status tk_handle_call_ws(tk_handle h, size_t copy_bytes, size_t kws, size_t nflags, int cublas, tk_call_ws *w,
                            cudaStream_t s);

/* ---- routes (route.c): running a problem on aligned copies ---- */

/* Problems of fewer flops (2^22: a 128^3 product) take no copies (route.c). */
#define TK_ROUTE_TINY_FLOP (1 << 22)

typedef struct tk_route {
    const tk_kernel *k;          /* the kernel that runs `run` */
    tk_args run;                 /* the problem it sees: copied operands point into the workspace */
    int copy[3];                 /* A, B, C copied (C: staged, copied back after the product) */
    int transposed[2];           /* FP8: A's, B's copy transposed (made K-major; route.c) */
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
 * they are misaligned, and FP8 A and B where they are not K-major
 * (transposed; run's op_a N, op_b T); r->k is left NULL; run's copied
 * pointers are NULL until tk_route_bind. Pure. */
void tk_route_plan(const tk_args *a, int pack_ab, int stage_c, tk_route *r);
void tk_route_bind(tk_route *r, void *ws);
/* "k31_wgmma_cluster" or "k31_wgmma_cluster (copies A, B)"; a transposed
 * copy (FP8) is "A^T", "B^T". */
void tk_route_name(const tk_route *r, char *buf, size_t len);
/* Auto-dispatch's choice for the problem p (a kernel and its copies), as
 * tk_gemm_ex would run it; p's pointers may be NULL as for
 * tk_select_kernel. Needs a device. */
tk_status tk_select_route(tk_handle h, const tk_gemm_problem *p, tk_route *r);
/* Before the kernel: binds r to the workspace ws (tk_handle_call_ws's
 * copy), copies A, B (and C when staged and beta != 0) in; after it: C
 * back. On stream. */
tk_status tk_route_copy_in(tk_handle h, tk_route *r, const tk_args *a, void *ws, cudaStream_t stream);
tk_status tk_route_copy_out(tk_handle h, const tk_route *r, const tk_args *a, cudaStream_t stream);
/* Which operands r copies: 1 A, 2 B, 4 C (tk_candidate.copies), in the
 * public problem's terms (a column-major problem's A is the normalized B). */
unsigned tk_route_copies(const tk_route *r, tk_layout layout);

/* ---- gemm.c's steps, shared with the plans (plan.c) and the candidates
 * (candidates.c) ---- */

/* The front half of every problem call: h and p checked (h's last error
 * cleared first), p normalized into *a (need_ptrs 0: introspection, NULL
 * pointers allowed), the kernel looked up into *k (NULL: auto); *noop for
 * M or N == 0, which passes without a device; otherwise a device, h's,
 * current. */
tk_status tk_prepare(tk_handle h, const tk_gemm_problem *p, const char *kernel, tk_args *a, int *noop,
                     const tk_kernel **k, int need_ptrs);
/* tk_prepare in two steps, for calls whose no-ops are more than M or N ==
 * 0 (grouped.c: a batch of none): the checks and the kernel's lookup, which
 * need no device, then h's device, present and current. */
tk_status tk_prepare_args(tk_handle h, const tk_gemm_problem *p, const char *kernel, tk_args *a, int *noop,
                          const tk_kernel **k, int need_ptrs);
/* The columns the problem's checks measure B and C by where they are not
 * N (epilogue.c): B holds b_cols (N/2 for a gated product with its own
 * b_up), C c_cols (the epilogue's output columns), or C is neither read
 * nor written (c_unused: a separate D and beta == 0) and is not checked;
 * ab_bytes: A's and B's element size (0: 2, bf16; FP8: 1, fp8.c). */
typedef struct tk_widths {
    int64_t b_cols, c_cols;
    int c_unused;
    int ab_bytes;
} tk_widths;
/* tk_prepare_args with those widths (w NULL: N for both). */
tk_status tk_prepare_widths(tk_handle h, const tk_gemm_problem *p, const char *kernel, tk_args *a, int *noop,
                            const tk_kernel **k, int need_ptrs, const tk_widths *w);
tk_status tk_device_ready(tk_handle h);
/* Support and resource check of k for a on h's device: the refusal's
 * reason in why, nothing recorded on h (auto-dispatch asks every kernel). */
tk_status tk_kernel_check(tk_handle h, const tk_kernel *k, const tk_args *a, char *why, size_t len);
/* Auto-dispatch's preference for k on a: the tune cache's kernel (`tuned`,
 * tk_tune_find's) above all, else the kernel's rank; 0: never. */
int tk_auto_rank(tk_handle h, const tk_kernel *k, const tk_kernel *tuned, const tk_args *a);
/* Auto-dispatch's route for a; copies: whether the copy route may be taken
 * (not under capture). TK_ERR_NOT_SUPPORTED, recorded, when none fits. */
tk_status tk_route_select(tk_handle h, const tk_args *a, tk_route *r, int copies);
/* The same, recording nothing: 1 with *r, or 0 when no kernel fits. */
int tk_route_choose(tk_handle h, const tk_args *a, tk_route *r, int copies);
/* The route of a call: the kernel k the caller named (tk_prepare's *k) on
 * the problem as it is, its refusal recorded as the call's failure; or,
 * k NULL, tk_route_select's. */
tk_status tk_route_for(tk_handle h, const tk_args *a, const tk_kernel *k, tk_route *r, int copies);
/* Runs route r (r->k set, copied operands unbound) for the problem a on s:
 * copies in, the kernel, C back, with the workspaces and ordering of the
 * handle; graph: s is being captured (no workspace at all). */
tk_status tk_route_run(tk_handle h, tk_route *r, const tk_args *a, cudaStream_t s, int graph);
/* TK_SUCCESS when h's device is the current one (else recorded: another
 * device, or cudaGetDevice's failure). */
tk_status tk_check_device(tk_handle h);

/* K == 0: C = beta * C on s, failures recorded on h (gemm.c). */
tk_status tk_scale_c_only(tk_handle h, const tk_args *a, cudaStream_t s);

/* Runs the normalized a, one product or many (a->grp), on named kernel k
 * (checked first) or, k NULL, on auto-dispatch's choice. */
tk_status tk_run_args(tk_handle h, const tk_args *a, const tk_kernel *k, cudaStream_t s);

/* A descriptor's field and whether the caller set it (not 0 or NULL). */
typedef struct tk_field {
    const char *name;
    int set;
} tk_field;
/* The fields a descriptor's choice leaves unused must be 0: the first of
 * the n that is set is refused (TK_ERR_INVALID_VALUE), "<name>: is set,
 * but <because> (expected 0, or <fix>)". */
tk_status tk_fields_unset(tk_handle h, const tk_field *f, size_t n, const char *because, const char *fix);

/* tk_gemm_run of a descriptor with group_kind set (grouped.c). */
tk_status tk_grouped_run(tk_handle h, const tk_gemm_desc *d, const char *kernel, void *stream);
/* One without: its group fields must be 0 (a count or offsets set with
 * group_kind left 0 would run one product silently). */
tk_status tk_group_none_check(tk_handle h, const tk_gemm_desc *d);
/* Its steps, shared with fp8.c (grouped FP8): tk_group_check, the kind's
 * fields (count, offsets, unused strides, layout), before the problem's
 * checks; tk_group_check_strides, after them, the strides against the
 * matrices they step over (ab_bytes: A's and B's element size, 2 bf16, 1
 * FP8); tk_group_args_of, the kernels' form (a column-major BATCHED
 * problem's strides of A and B swapped with its operands). */
tk_status tk_group_check(tk_handle h, const tk_gemm_desc *d);
tk_status tk_group_check_strides(tk_handle h, const tk_gemm_desc *d, int ab_bytes);
void tk_group_args_of(const tk_gemm_desc *d, tk_group_args *g);
/* tk_gemm_run of a descriptor with an epilogue set (epilogue.c): the
 * version-3 fields checked (all before the device is asked for), then one
 * product with tk_args.epi on a kernel that takes epilogues, operands as
 * they are (no copies). */
tk_status tk_epilogue_run(tk_handle h, const tk_gemm_desc *d, const char *kernel, void *stream);
/* The kernels' form of a descriptor that tk_epilogue_run accepted: D
 * resolved (C where d is NULL), b_up (B's up half where NULL, GATED), D's
 * columns. Pure. */
void tk_epi_args_of(const tk_gemm_desc *d, tk_epi_args *e);
/* One without: its other epilogue fields must be 0 (a bias or D set with
 * the epilogue forgotten would run a plain product silently). */
tk_status tk_epi_none_check(tk_handle h, const tk_gemm_desc *d);
/* fp8.c: tk_gemm_desc's version-4 fields. tk_fp8_none_check: none of
 * them set (bf16 operands); tk_fp8_run: FP8 operands, checked, then run
 * as any problem (tk_run_args, a->fp8 set). */
tk_status tk_fp8_none_check(tk_handle h, const tk_gemm_desc *d);
tk_status tk_fp8_run(tk_handle h, const tk_gemm_desc *d, const char *kernel, void *stream);
/* Auto-dispatch's route for the FP8 call d (a kernel and its copies), as
 * tk_gemm_run(h, d, NULL, stream) would run it outside a graph capture; d's
 * pointers may be NULL, as for tk_select_kernel. r->run.fp8 points at *f,
 * and for many products (d->group_kind; never copies) r->run.grp at *g (g
 * may be NULL for one product).
 * r->k NULL for a no-op (M or N == 0). The lab's bench rows and the GPU
 * tests name it; needs a device. */
tk_status tk_fp8_route(tk_handle h, const tk_gemm_desc *d, tk_fp8_args *f, tk_group_args *g, tk_route *r);
/* Whether the work enqueued on s is being captured into a CUDA graph. */
int tk_stream_capturing(cudaStream_t s);
/* The split workspace k asks of h for a (0 where h never splits), *nflags
 * its flags. */
size_t tk_call_kws(tk_handle h, const tk_kernel *k, const tk_args *a, size_t *nflags);
/* The workspace route r takes on h with no cap (tk_workspace_size). */
size_t tk_route_ws_bytes(tk_handle h, const tk_route *r);

/* The cost model of tk_candidates (cost.c): GPU microseconds of route r
 * (the problem of a, r->k running r->run) on dev; 0 where the device is
 * not described enough to say (no clock, SMs or memory bus). Pure. */
double tk_cost_us(const tk_route *r, const tk_args *a, const tk_device *dev);

#endif /* TK_INTERNAL_H */
