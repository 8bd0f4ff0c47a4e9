/* kernel.h - the one launch contract every GEMM kernel fills in.
 *
 * Included by host C (src/lib) and by CUDA C (the .cu files of src/kernels), so it is
 * plain C. The public problem (tilekit.h) is checked and normalized to a
 * row-major problem (tk_args) by src/lib/gemm.c before any kernel sees it:
 * a column-major C = op(A) op(B) is the row-major C^T = op(B)^T op(A)^T, so
 * normalization swaps the operands and M/N and keeps each op. Kernels
 * therefore only ever see row-major A (M x K, or K x M if op_a is T),
 * B (K x N, or N x K if op_b is T) and C (M x N).
 */
#ifndef TK_KERNEL_H
#define TK_KERNEL_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a kernel's support check and the resource check need to know about
 * the GPU. Filled once per handle by tk_device_query (device.c); tests fill
 * it by hand to model other GPUs. */
typedef struct tk_device {
    int id;                      /* CUDA ordinal, -1 if none */
    int sm;                      /* 10*major + minor: 80, 86, 89, 90 */
    int sm_count;
    int max_threads_per_block;
    int max_threads_per_sm;
    int regs_per_block;
    int regs_per_sm;
    size_t smem_per_block_optin; /* bytes a block may opt in to */
    size_t smem_per_sm;
    int l2_bytes;
    int clock_khz;               /* max SM clock */
    int mem_clock_khz;
    int mem_bus_bits;
    char name[256];
} tk_device;

/* A problem after normalization: row-major, all sizes > 0 unless noted. */
typedef struct tk_args {
    int64_t m, n, k;             /* k may be 0 only for kernels never reached with it */
    const void *a; int64_t lda; tk_op op_a;   /* bf16 */
    const void *b; int64_t ldb; tk_op op_b;   /* bf16 */
    void *c; int64_t ldc; tk_dtype c_type;
    float alpha, beta;
    void *cublas;                /* cublasHandle_t owned by the handle (cublas entry only) */
    /* The launch's workspaces, owned by the handle: for a kernel with a
     * tk_kernel.workspace, kws holds its partial sums (contents undefined)
     * and flags its completion flags (nflags words, each 0 or the seq of an
     * earlier launch of the handle: nothing else is ever stored there, so
     * "flag == seq" means "written by this launch"); for cuBLAS, kws is its
     * workspace. NULL when none was asked for or it could not be allocated
     * (the kernel must then run without it). seq: this launch's number on
     * the handle, never 0, increasing until it wraps (the flags are cleared
     * then, in stream order). The struct keeps its size and the offsets of
     * the fields the sm_80 kernels read (they take it by value). */
    uint32_t *flags; size_t nflags;
    void *kws; size_t kws_bytes;
    uint32_t seq;
    /* The handle's launch cache (launch_cache.h: tensor maps, shared memory
     * grants, cluster occupancy); NULL: nothing cached. */
    struct tk_launch_cache *lc;
    /* Many products in one launch (tk_group_args); NULL: one. */
    const struct tk_group_args *grp;
    /* Work fused after the product (tk_epi_args); NULL: none. */
    const struct tk_epi_args *epi;
    /* FP8 operands (tk_fp8_args): a and b then point at one-byte codes; NULL: bf16. */
    const struct tk_fp8_args *fp8;
} tk_args;

/* FP8 operands (tilekit.h, tk_gemm_desc version 4; issue 40) of the
 * row-major problem tk_args holds (fp8.c swaps a column-major call's
 * formats and scales with its operands): fa, fb the tk_fp8_format of a
 * and b; mode the tk_scale_mode; sa, sb the fp32 scales in device memory,
 * ld_sa, ld_sb their k-block strides (TK_SCALE_BLOCK); with many products
 * (tk_args.grp), sstride_a, sstride_b the elements from product g's scales
 * to product g + 1's, resolved by fp8.c (0: one set for all; else
 * tilekit.h's version-5 default or the caller's). */
typedef struct tk_fp8_args {
    int fa, fb;
    int mode;
    const float *sa, *sb;
    int64_t ld_sa, ld_sb;
    int64_t sstride_a, sstride_b;
} tk_fp8_args;

/* An epilogue (tilekit.h, tk_epilogue_kind), checked by epilogue.c: the
 * problem is row-major, so these are the public fields as they are. The
 * kernel writes D (d, ldd: c_type; d == c, ldd == ldc for in place) with
 * out_cols columns (N, N/2 for GATED, 2N for GATED_BACKWARD) and reads C
 * (tk_args.c, ldc) as the residual when beta != 0. b_up: the up half's B
 * (GATED; with B's op and ldb), resolved by epilogue.c: never NULL for
 * GATED (B + N/2 columns when the caller gave none), so a kernel's op(B)
 * gate half is B's first N/2 columns and its up half op(b_up)'s. */
typedef struct tk_epi_args {
    int kind;                    /* tk_epilogue_kind, not TK_EPI_NONE */
    int act;                     /* tk_activation */
    const void *bias; int bias_bf16; int bias_rows;   /* NULL: none; bf16 else fp32; per row else per column */
    const void *b_up;
    void *d; int64_t ldd;
    void *aux; int64_t ldaux;    /* bf16; NULL: none (forward kinds only) */
    float *bias_grad;            /* NULL: none */
    int64_t out_cols;            /* D's columns */
} tk_epi_args;

/* The batched and grouped forms (tilekit.h, tk_group_kind), in the
 * row-major terms of tk_args: m, n, k are BATCHED's and MASKED's sizes of
 * each product, ROWS' total rows of A and C, K's total K. Strides in
 * elements; offs in device memory (NULL for BATCHED); error: where a
 * kernel reports bad offsets (device memory or NULL). */
typedef struct tk_group_args {
    int kind;                    /* TK_GROUP_BATCHED, _ROWS, _K, _MASKED */
    int count;
    int64_t stride_a, stride_b, stride_c;
    const int32_t *offs;
    int32_t *error;
} tk_group_args;

/* What one launch needs; checked against tk_device before launching. */
typedef struct tk_resources {
    const void *func;            /* the __global__ entry, or NULL for library calls */
    int threads;                 /* threads per block */
    size_t dyn_smem;             /* dynamic shared memory per block, bytes */
} tk_resources;

/* Size of the message buffer support checks and launchers write into. */
#define TK_MSG_LEN 512

/* What a problem asks of a kernel family beyond its shape: the types of its
 * operands and output and its form. A family declares the bits it accepts
 * (tk_family.accepts); auto-dispatch and named kernels refuse a problem
 * whose bits (tk_args_needs) it lacks before asking the family anything.
 * The next axes (grouped and batched forms, epilogues, FP8 operands) are new
 * bits here and new fields in tk_args, not new kernel names. A problem
 * with an epilogue needs TK_ACCEPT_EPILOGUE besides its form's bit. */
enum {
    TK_ACCEPT_AB_BF16 = 1 << 0,  /* bf16 A and B */
    TK_ACCEPT_C_F32 = 1 << 1,    /* fp32 C */
    TK_ACCEPT_C_BF16 = 1 << 2,   /* bf16 C */
    TK_ACCEPT_DENSE = 1 << 3,    /* one GEMM */
    TK_ACCEPT_BATCHED = 1 << 4,  /* TK_GROUP_BATCHED: products of one shape, sizes known on the host */
    TK_ACCEPT_GROUPED = 1 << 5,  /* TK_GROUP_ROWS, _K, _MASKED: sizes in device memory */
    TK_ACCEPT_EPILOGUE = 1 << 6, /* tk_epi_args: every tk_epilogue_kind and activation */
    TK_ACCEPT_AB_FP8 = 1 << 7,   /* tk_fp8_args: FP8 A and B with their scales, every format and mode */
};
#define TK_ACCEPTS_BF16_GEMM (TK_ACCEPT_AB_BF16 | TK_ACCEPT_C_F32 | TK_ACCEPT_C_BF16 | TK_ACCEPT_DENSE)
#define TK_ACCEPTS_ALL_FORMS (TK_ACCEPTS_BF16_GEMM | TK_ACCEPT_BATCHED | TK_ACCEPT_GROUPED)

static inline unsigned tk_args_needs(const tk_args *a)
{
    unsigned form = !a->grp ? TK_ACCEPT_DENSE : a->grp->kind == TK_GROUP_BATCHED ? TK_ACCEPT_BATCHED : TK_ACCEPT_GROUPED;
    return (a->fp8 ? TK_ACCEPT_AB_FP8 : TK_ACCEPT_AB_BF16) | form |
           (a->c_type == TK_F32 ? TK_ACCEPT_C_F32 : TK_ACCEPT_C_BF16) | (a->epi ? TK_ACCEPT_EPILOGUE : 0u);
}

typedef struct tk_kernel tk_kernel;

/* A kernel family: one core (a .cu file's kernel template, or cuBLAS) and
 * the functions that run any of its configurations. Each function gets the
 * configuration (the registry row, k) and reads its parameters from it:
 * tile, K step, swap. Defined as `tk_ops_<family>` in src/kernels/; its name,
 * minimum SM and accepted bits are its TK_FAMILY line in
 * src/kernels/table.def. */
typedef struct tk_family_ops {
    /* TK_SUCCESS, or the refusal status with the reason written to why.
     * a's pointers may be NULL (introspection): then judge alignment on the
     * leading dimensions alone. dev->sm >= min_sm is checked by the caller. */
    tk_status (*supports)(const tk_kernel *k, const tk_args *a, const tk_device *dev, char *why, size_t len);
    /* The launch's resources. a may be NULL: report the default configuration. */
    void (*resources)(const tk_kernel *k, const tk_args *a, const tk_device *dev, tk_resources *r);
    /* Enqueue on stream. Returns TK_SUCCESS or an error with why filled. */
    tk_status (*launch)(const tk_kernel *k, const tk_args *a, const tk_device *dev, cudaStream_t stream, char *why,
                        size_t len);
    /* Optional (NULL: none): bytes of workspace for partial sums the launch
     * can use (a->kws), and in *nflags the completion flags it needs with
     * them (a->flags); 0 = none for this problem. Called before each launch. */
    size_t (*workspace)(const tk_kernel *k, const tk_args *a, const tk_device *dev, size_t *nflags);
    /* Optional (NULL: auto_rank): the auto-dispatch preference for this
     * problem, so a configuration can step forward where its tile fits the
     * shape (first_rank) or back where it is known to be slow. Only called
     * when auto_rank > 0. */
    int (*rank)(const tk_kernel *k, const tk_args *a, const tk_device *dev);
} tk_family_ops;

typedef struct tk_family {
    const char *name;            /* "k30": the core's number */
    const char *description;     /* one line */
    int min_sm;                  /* 80, 90, ... */
    unsigned accepts;            /* TK_ACCEPT_* bits */
    const tk_family_ops *ops;
    double est_pct;              /* the cost model's share of the dense bf16 tensor peak, % (tk_candidates) */
} tk_family;

/* A configuration of a family: one TK_CONFIG line of src/kernels/table.def,
 * the registry's entry. */
struct tk_kernel {
    const char *name;            /* kNN_snake_case; the registry key */
    const char *description;     /* one line */
    const tk_family *family;
    int min_sm;                  /* the family's */
    int bm, bn, bk;              /* block tile and K step (0 = n/a); bm, bn also draw error maps */
    int wm, wn;                  /* warp tile inside it; 0 = n/a */
    int swap;                    /* k30 family: 0, 1 (A and B swapped, one consumer), 2 (swapped, two) */
    int first_rank;              /* the rank where the family's rule picks this configuration */
    int auto_rank;               /* auto-dispatch preference, higher first; 0 = never auto */
};

/* The family's functions for configuration k (tk_family_ops). */
static inline tk_status tk_kernel_supports_args(const tk_kernel *k, const tk_args *a, const tk_device *dev,
                                                char *why, size_t len)
{
    return k->family->ops->supports(k, a, dev, why, len);
}
static inline void tk_kernel_resources(const tk_kernel *k, const tk_args *a, const tk_device *dev, tk_resources *r)
{
    k->family->ops->resources(k, a, dev, r);
}
static inline tk_status tk_kernel_launch(const tk_kernel *k, const tk_args *a, const tk_device *dev,
                                         cudaStream_t stream, char *why, size_t len)
{
    return k->family->ops->launch(k, a, dev, stream, why, len);
}
static inline size_t tk_kernel_workspace(const tk_kernel *k, const tk_args *a, const tk_device *dev, size_t *nflags)
{
    *nflags = 0;
    return k->family->ops->workspace ? k->family->ops->workspace(k, a, dev, nflags) : 0;
}
static inline int tk_kernel_rank(const tk_kernel *k, const tk_args *a, const tk_device *dev)
{
    return k->family->ops->rank ? k->family->ops->rank(k, a, dev) : k->auto_rank;
}

/* The CUDA runtime error (a cudaError_t) or cuBLAS status (a
 * cublasStatus_t) behind a failure a launcher or the library is about to
 * report (TK_ERR_CUDA, TK_ERR_CUBLAS, a failed allocation): noted for the
 * calling host thread, and recorded on the handle with the failure's
 * message by the library's tk_fail, for tk_last_cuda_error (status.c).
 * The note is per thread and lives from one public call's start to its
 * failure: launchers, which see no handle, note what they return. */
void tk_note_cuda_error(int e);
void tk_note_cublas_status(int s);

/* Registry (registry.c): the TK_CONFIG lines of src/kernels/table.def, in
 * their order; families: its TK_FAMILY lines. */
int tk_registry_count(void);
const tk_kernel *tk_registry_at(int i);
const tk_kernel *tk_registry_find(const char *name);
int tk_family_count(void);
const tk_family *tk_family_at(int i);

/* Device description of the current CUDA device. */
tk_status tk_device_query(tk_device *dev, char *why, size_t len);

/* Checks r against dev (threads, static + dynamic shared memory, registers
 * as compiled for this GPU). Pure apart from cudaFuncGetAttributes on
 * r->func when func_attrs is NULL; tests pass attributes directly. */
typedef struct tk_func_attrs {
    int num_regs;
    size_t static_smem;
    size_t local_bytes;          /* spills / stack */
    int max_threads;             /* as the compiled function allows */
} tk_func_attrs;
tk_status tk_check_resources(const tk_kernel *k, const tk_resources *r, const tk_device *dev,
                             const tk_func_attrs *func_attrs, char *why, size_t len);
tk_status tk_func_attrs_get(const void *func, tk_func_attrs *out, char *why, size_t len);

/* Shared support-check helpers. Each returns TK_SUCCESS or writes why.
 * tk_check_align: A and B leading dimensions multiples of ab_elems and
 * pointers aligned to ab_elems bf16 elements (8: 16-byte vector loads); the
 * same for C with c_elems of its type (c_elems <= 1: no requirement on C).
 * NULL pointers (introspection) pass the pointer checks. */
tk_status tk_check_align(const tk_args *a, int ab_elems, int c_elems, char *why, size_t len);
/* tk_check_b_up: a TK_EPI_GATED epilogue's up half (a->epi->b_up) 16-byte
 * aligned, as `unit` (TMA, cp.async) loads it; anything else passes. */
tk_status tk_check_b_up(const tk_args *a, const char *unit, char *why, size_t len);

/* C = beta * C on stream (the K == 0 case); util.cu. */
tk_status tk_launch_scale_c(const tk_args *a, cudaStream_t stream, char *why, size_t len);

/* dst <- src on stream: rows x cols elements of elem_bytes (1, 2 or 4)
 * with leading dimensions ldd and lds (elements); any addresses and leading
 * dimensions aligned to the element (2-byte ones for 4-byte elements);
 * the columns of dst past cols are not written; util.cu. */
tk_status tk_launch_copy_2d(void *dst, int64_t ldd, const void *src, int64_t lds, int64_t rows, int64_t cols,
                            size_t elem_bytes, cudaStream_t stream, char *why, size_t len);

/* Several such copies in one launch (at most TK_COPY_JOBS; jobs with no
 * rows or columns are skipped), moved in 2-byte units, or in bytes where a
 * job has 1-byte elements; util.cu. */
#define TK_COPY_JOBS 3
typedef struct tk_copy_job {
    void *dst; int64_t ldd;
    const void *src; int64_t lds;
    int64_t rows, cols;
    size_t elem_bytes;
} tk_copy_job;
tk_status tk_launch_copy_2d_jobs(const tk_copy_job *job, int n, cudaStream_t stream, char *why, size_t len);

/* Transposing copies of 1-byte elements (FP8 codes made K-major, route.c),
 * at most TK_TRANSPOSE_JOBS in one launch: job q's src, rows x cols with
 * leading dimension lds, becomes dst, cols x rows with leading dimension
 * ldd (>= rows); elem_bytes must be 1; any addresses and leading
 * dimensions; the columns of dst past rows are not written; jobs with no
 * rows or columns are skipped; util.cu. */
#define TK_TRANSPOSE_JOBS 2
tk_status tk_launch_transpose_2d_jobs(const tk_copy_job *job, int n, cudaStream_t stream, char *why, size_t len);

/* tk_quantize_fp8's call (tilekit.h), checked by quantize.c: x rows x cols
 * bf16 (ldx), q the codes (ldq), scale with ld_scale resolved (1X128:
 * >= rows, 128X128: >= ceil(rows / 128), else unused); rows, cols > 0.
 * vec_x: x 16-byte aligned and ldx a multiple of 8 (16-byte loads);
 * vec_q: q 8-byte aligned and ldq a multiple of 8 (8-byte stores).
 * sm_count sizes the grids. quantize.cu. */
typedef struct tk_quant_args {
    int64_t rows, cols;
    const void *x; int64_t ldx;
    void *q; int64_t ldq;
    float *scale; int64_t ld_scale;
    int format;                  /* tk_fp8_format */
    int mode;                    /* tk_quant_mode */
    int vec_x, vec_q;
    int sm_count;
} tk_quant_args;
tk_status tk_launch_quantize_fp8(const tk_quant_args *a, cudaStream_t stream, char *why, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* TK_KERNEL_H */
