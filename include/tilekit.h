/* tilekit.h - the one public C header of tilekit.
 *
 * tilekit computes C = alpha * op(A) * op(B) + beta * C with bf16 A and B,
 * fp32 accumulation, and fp32 or bf16 C, on NVIDIA GPUs (sm_80 and newer;
 * Hopper kernels on sm_90a). Every call names a CUDA stream and returns a
 * status; the library never prints and never exits.
 *
 *   tk_handle h;  tk_create(&h);
 *   tk_status st = tk_gemm(h, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, M, N, K, 1.0f, A, K, B, N,
 *                          0.0f, C, TK_F32, N, NULL, stream);
 *   if (st != TK_SUCCESS) fprintf(stderr, "%s: %s\n", tk_status_string(st), tk_last_error(h));
 *   tk_destroy(h);
 *
 * A complete program (bf16 inputs from the host, the check on the CPU):
 * examples/app.c.
 */
#ifndef TILEKIT_H
#define TILEKIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TILEKIT_VERSION_MAJOR 0
#define TILEKIT_VERSION_MINOR 1
#define TILEKIT_VERSION_PATCH 0
#define TILEKIT_VERSION \
    (TILEKIT_VERSION_MAJOR * 10000 + TILEKIT_VERSION_MINOR * 100 + TILEKIT_VERSION_PATCH)

/* Returns TILEKIT_VERSION of the library actually loaded. */
int tk_version(void);

typedef enum tk_status {
    TK_SUCCESS = 0,
    TK_ERR_INVALID_VALUE = 1,     /* a bad argument: the message names it */
    TK_ERR_NOT_SUPPORTED = 2,     /* valid problem the chosen kernel cannot do */
    TK_ERR_ARCH_MISMATCH = 3,     /* kernel needs a newer GPU than this one */
    TK_ERR_NO_DEVICE = 4,         /* no CUDA device (or no driver) */
    TK_ERR_CUDA = 5,              /* a CUDA runtime call failed */
    TK_ERR_CUBLAS = 6,            /* a cuBLAS call failed */
    TK_ERR_OUT_OF_RESOURCES = 7,  /* threads/shared memory/registers over the device limit */
    TK_ERR_ALLOC = 8,             /* host or device allocation failed */
    TK_ERR_INTERNAL = 9           /* a bug in tilekit */
} tk_status;

/* A static English name for a status ("TK_ERR_INVALID_VALUE: invalid value"). */
const char *tk_status_string(tk_status s);

typedef struct tk_handle_s *tk_handle;

/* Creates a handle bound to the current CUDA device. Succeeds without a GPU
 * (calls that need one then return TK_ERR_NO_DEVICE), so argument checks can
 * be used and tested anywhere. It owns device workspaces (cuBLAS's; up to
 * about 35 MB for the Hopper kernels' split tiles; and, for auto-dispatch of
 * operands whose leading dimension or address is not 16-byte aligned,
 * aligned copies of them, as large as those operands: all allocated on first
 * use and kept). When the environment variable TILEKIT_TUNE names a tune
 * cache written by `tilekit tune` on this GPU, auto-dispatch runs the
 * kernels it lists for those problems. A file that cannot be used (missing,
 * malformed, measured on another GPU): tk_create succeeds and ignores the
 * file; tk_last_error(NULL) then says why. After a successful tk_create,
 * tk_last_error(NULL) is "" otherwise.
 *
 * Threads and streams:
 * - A handle is used by one host thread at a time: threads that share one
 *   must take turns (a mutex around each call), and the handle's device must
 *   be current in the calling thread (a call made where another device is
 *   current is refused with TK_ERR_INVALID_VALUE). Different handles, and
 *   the functions that take none (tk_status_string, tk_kernel_count, ...),
 *   may be used by any number of threads at once.
 * - Any call may name any stream. A GEMM runs after the work enqueued on its
 *   stream before it. Calls on one handle that use one of its workspaces
 *   (copies, split tiles, cuBLAS) also run after the previous such call on
 *   that handle, whatever its stream: each records an event where it ends,
 *   and the next, on another stream (told apart by cudaStreamGetId, so also
 *   a new stream that got the handle value of a destroyed one whose work is
 *   still pending), makes its stream wait for it. No
 *   call synchronizes the host or the device, and workspaces are allocated
 *   and freed in stream order (cudaMallocAsync), so a CUDA graph may be
 *   captured in another thread meanwhile. So one handle
 *   on several streams is always correct; GEMMs that should run at the same
 *   time on the GPU need a handle each.
 * - A call made on a stream that is being captured into a CUDA graph uses
 *   none of the handle's workspaces (no split over K, no copies, cuBLAS
 *   without a workspace), so its replays stay right whatever the handle
 *   does next.
 * - A call that fails leaves the handle usable. One refused with
 *   INVALID_VALUE, NOT_SUPPORTED, ARCH_MISMATCH, NO_DEVICE, OUT_OF_RESOURCES
 *   or ALLOC has not written C.
 * - tk_destroy may be called while its GEMMs still run: it waits for the
 *   last call that used a workspace, then frees them. */
tk_status tk_create(tk_handle *out);
tk_status tk_destroy(tk_handle h);

/* The detailed message of the last failed call on h (which argument, what
 * was expected); "" after a successful one. With h == NULL: the last
 * failure of the calling host thread on any handle, or of a call that had
 * no usable handle ("" if none): each thread has its own, so it reads right
 * while other threads fail on their own handles. */
const char *tk_last_error(tk_handle h);

typedef enum tk_layout { TK_ROW_MAJOR = 0, TK_COL_MAJOR = 1 } tk_layout;
typedef enum tk_op { TK_OP_N = 0, TK_OP_T = 1 } tk_op;
typedef enum tk_dtype { TK_F32 = 0, TK_BF16 = 1 } tk_dtype;

/* One GEMM problem. op(A) is M x K, op(B) is K x N, C is M x N; all three
 * stored in `layout` (CBLAS convention). With TK_OP_T the stored matrix is
 * the transpose: e.g. row-major B with TK_OP_T is stored N x K (the seeds'
 * mma_ABt). Leading dimensions count elements. M or N == 0 is a no-op;
 * K == 0 gives C = beta * C. With beta == 0, C is never read (may hold NaN).
 * Every pointer given must be a multiple of its element size (2 bytes for
 * bf16, 4 for fp32 C), else the call is refused with TK_ERR_INVALID_VALUE
 * before the GPU is touched (a misaligned access would fault and poison the
 * CUDA context). */
typedef struct tk_gemm_problem {
    tk_layout layout;
    tk_op op_a, op_b;
    int64_t m, n, k;
    float alpha, beta;
    const void *a; int64_t lda;   /* bf16 */
    const void *b; int64_t ldb;   /* bf16 */
    void *c; int64_t ldc;         /* c_type */
    tk_dtype c_type;
} tk_gemm_problem;

/* Runs the problem on `stream` (a cudaStream_t; NULL = legacy default).
 * kernel: a registry name ("cublas", "k01_naive", ...), which refuses what
 * it cannot take (TK_ERR_NOT_SUPPORTED), or NULL/"auto" for the best
 * supported kernel: any leading dimension and element-aligned pointer then
 * runs on a fast kernel, on copies of the misaligned operands where needed
 * (TK_ERR_OUT_OF_RESOURCES when their workspace cannot be allocated).
 * Asynchronous: returns after the launch. */
tk_status tk_gemm_ex(tk_handle h, const tk_gemm_problem *p, const char *kernel,
                     void *stream);

/* The same, CBLAS-style. */
tk_status tk_gemm(tk_handle h, tk_layout layout, tk_op op_a, tk_op op_b,
                  int64_t m, int64_t n, int64_t k, float alpha,
                  const void *a, int64_t lda, const void *b, int64_t ldb,
                  float beta, void *c, tk_dtype c_type, int64_t ldc,
                  const char *kernel, void *stream);

/* ---- the problem description that grows ----
 * tk_gemm_problem is frozen as it is. The axes to come (operand types,
 * epilogues, grouped and batched forms) are fields appended to
 * tk_gemm_desc, whose first field is its size as the caller compiled it:
 *
 *   tk_gemm_desc d = TK_GEMM_DESC_INIT;   // d.size = sizeof d; every other field 0
 *   d.problem = p;
 *   st = tk_gemm_run(h, &d, NULL, stream);
 *
 * The rule: fields are only ever appended, never moved or removed, and a
 * zero field means its default (what tk_gemm_ex does). The library reads
 * the fields within d->size alone and gives the others their defaults, so
 * a program built against an older header runs unchanged on a newer
 * library. A program newer than the library is refused with
 * TK_ERR_NOT_SUPPORTED (the message names the first byte the library does
 * not know) when it sets a field the library does not know, and accepted
 * when those bytes are zero. A size below the first version's is
 * TK_ERR_INVALID_VALUE. */
typedef struct tk_gemm_desc {
    size_t size;                 /* sizeof(tk_gemm_desc) where the caller was compiled */
    tk_gemm_problem problem;     /* the product, as tk_gemm_ex takes it */
    /* later versions append here */
} tk_gemm_desc;

#define TK_GEMM_DESC_INIT { .size = sizeof(tk_gemm_desc) }

/* Runs d's problem as tk_gemm_ex does (kernel, stream, status and
 * messages the same). */
tk_status tk_gemm_run(tk_handle h, const tk_gemm_desc *d, const char *kernel, void *stream);

/* ---- registry introspection ---- */
typedef struct tk_kernel_props {
    const char *name;         /* e.g. "k01_naive" */
    const char *description;  /* one line */
    int min_sm;               /* e.g. 80 for sm_80, 90 for sm_90a */
    int bm, bn;               /* output block tile (for error maps); 0 if n/a */
} tk_kernel_props;

int tk_kernel_count(void);
tk_status tk_kernel_get(int index, tk_kernel_props *out);

/* TK_SUCCESS if `kernel` can run p on h's device; otherwise the refusal
 * status (NOT_SUPPORTED, ARCH_MISMATCH, OUT_OF_RESOURCES, ...) with the
 * reason in tk_last_error(h). p's pointers may be NULL here: alignment is
 * then judged on the leading dimensions alone. */
tk_status tk_kernel_supports(tk_handle h, const char *kernel, const tk_gemm_problem *p);

/* The name auto-dispatch would choose for p, or NULL (see tk_last_error).
 * As for tk_kernel_supports, p's pointers may be NULL. */
const char *tk_select_kernel(tk_handle h, const tk_gemm_problem *p);

#ifdef __cplusplus
}
#endif
#endif /* TILEKIT_H */
