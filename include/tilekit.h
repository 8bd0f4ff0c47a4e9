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
    TK_ERR_INTERNAL = 9,          /* a bug in tilekit */
    TK_ERR_COMM = 10              /* communication (libtilekit_dist, tilekit_dist.h): NCCL missing, or
                                   * one of its calls failed, was aborted or timed out */
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
 * use and kept; "workspaces" below says how to give it memory, cap it or
 * free it). When the environment variable TILEKIT_TUNE names a tune
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
    /* version 2: many products in one call (tk_group_kind below; 0: one) */
    int32_t group_kind;          /* tk_group_kind */
    int32_t count;               /* batches or groups */
    int64_t stride_a, stride_b, stride_c;   /* elements from one matrix to the next */
    const int32_t *offs;         /* device memory: the groups' offsets (tk_group_kind) */
    int32_t *group_error;        /* device memory or NULL: set to 1 when offs are bad */
    /* version 3: work fused after the product (tk_epilogue_kind below; 0: none) */
    int32_t epilogue;            /* tk_epilogue_kind */
    int32_t activation;          /* tk_activation */
    const void *bias;            /* device memory or NULL: the bias vector (bias_type) */
    int32_t bias_type;           /* tk_dtype of bias: TK_F32 or TK_BF16 */
    int32_t bias_along;          /* tk_bias_along: one value per column (0) or per row */
    const void *b_up;            /* TK_EPI_GATED: the up projection's B, or NULL (B's right half) */
    void *d; int64_t ldd;        /* the output D (c_type), or NULL: D is C (in place) */
    void *aux; int64_t ldaux;    /* bf16: the pre-activation z, stored (forward) or read (backward) */
    float *bias_grad;            /* fp32 device memory or NULL: D's column sums (backward kinds) */
    /* version 4: FP8 operands with scales (tk_fp8_format, tk_scale_mode below; 0: bf16) */
    int32_t a_fp8, b_fp8;        /* tk_fp8_format of A and of B: both 0 (bf16) or both set */
    int32_t scale_mode;          /* tk_scale_mode */
    const float *scale_a, *scale_b;     /* fp32 device memory: the operands' scales (scale_mode) */
    int64_t ld_scale_a, ld_scale_b;     /* TK_SCALE_BLOCK: elements from one k-block's scales to the next */
    /* version 5: many FP8 products (grouped FP8, below); 0: the default */
    int64_t stride_scale_a, stride_scale_b;   /* elements from one product's scales to the next */
    /* later versions append here */
} tk_gemm_desc;

#define TK_GEMM_DESC_INIT { .size = sizeof(tk_gemm_desc) }

/* Runs d's problem as tk_gemm_ex does (kernel, stream, status and
 * messages the same); with group_kind set, its many products (below). */
tk_status tk_gemm_run(tk_handle h, const tk_gemm_desc *d, const char *kernel, void *stream);

/* ---- many products in one call: batched and grouped ----
 * One launch for all the products, on the stream given, with no host
 * synchronisation and no host read of device memory: a call can be
 * captured in a CUDA graph. tk_gemm_desc's problem describes them (layout,
 * ops, alpha, beta, C's type and the leading dimensions are common to all);
 * group_kind says how its sizes and pointers split:
 *
 * TK_GROUP_BATCHED: `count` products of the problem's M x N x K; product i
 *   reads A + i * stride_a and B + i * stride_b and writes C + i * stride_c
 *   (torch.bmm, cublasGemmStridedBatchedEx). stride_a or stride_b may be 0
 *   (one matrix for all); C's matrices may not overlap. count 0: no-op.
 * TK_GROUP_ROWS: M split into `count` groups (a mixture of experts' tokens
 *   by expert: forward and input gradient). A (M x K) and C (M x N) are the
 *   rows of all groups stacked; group g is rows offs[g-1] .. offs[g]-1
 *   (offs[-1] = 0) and uses B + g * stride_b, the g-th of `count` K x N
 *   matrices (op_b T: stored N x K, nn.Linear's weights). Rows of C from
 *   offs[count-1] to M are not written.
 * TK_GROUP_K: K split into `count` groups (the weight gradient: a group's
 *   tokens reduced). op(A) is M x K and op(B) K x N with K the tokens of
 *   all groups; group g reduces k = offs[g-1] .. offs[g]-1 into
 *   C + g * stride_c (M x N). An empty group gets C = beta * C.
 * TK_GROUP_MASKED: as BATCHED, but product i has offs[i] rows (at most M):
 *   DeepGEMM's masked layout for decode, rows past offs[i] not written.
 *
 * offs: `count` int32 in device memory, 4-byte aligned: cumulative end
 * offsets (ROWS, K; torch._grouped_mm's `offs`) or row counts (MASKED);
 * NULL for BATCHED. Groups may be empty and of any size. ROWS, K and
 * MASKED take TK_ROW_MAJOR alone. The fields a kind does not use must be 0
 * (with TK_GROUP_NONE: all of them).
 * Bad offsets are only seen on the device: a group whose range is not
 * 0 <= offs[g-1] <= offs[g] <= M (ROWS; K for K; 0 <= offs[g] <= M for
 * MASKED) is skipped, its C not written, and if group_error is not NULL
 * *group_error is set to 1 (never cleared by the library). Nothing outside
 * the operands is read or written; where offsets decrease, the values of
 * rows that two groups' ranges share are undefined. */
typedef enum tk_group_kind {
    TK_GROUP_NONE = 0,           /* one product (tk_gemm_ex) */
    TK_GROUP_BATCHED = 1,
    TK_GROUP_ROWS = 2,
    TK_GROUP_K = 3,
    TK_GROUP_MASKED = 4,
} tk_group_kind;

/* TK_GROUP_BATCHED through tk_gemm_run. */
tk_status tk_gemm_batched(tk_handle h, const tk_gemm_problem *p, int64_t count, int64_t stride_a,
                          int64_t stride_b, int64_t stride_c, const char *kernel, void *stream);

/* TK_GROUP_ROWS, TK_GROUP_K or TK_GROUP_MASKED through tk_gemm_run. The
 * strides a kind uses: ROWS stride_b, K stride_c, MASKED all three; the
 * others must be 0. */
tk_status tk_gemm_grouped(tk_handle h, const tk_gemm_problem *p, tk_group_kind kind, int count,
                          const int32_t *offs, int64_t stride_a, int64_t stride_b, int64_t stride_c,
                          int32_t *group_error, const char *kernel, void *stream);

/* ---- epilogues: work fused after the product ----
 * tk_gemm_desc's version-3 fields apply a formula to each element of the
 * fp32 product P = alpha * op(A) op(B) (M x N) before the one rounding to
 * c_type, in the kernel's own epilogue (no extra pass over memory). D is
 * the output: d with ldd, or C itself when d is NULL (ldd then ignored);
 * C is read as the residual R when beta != 0 (cuBLASLt's C/D split: a
 * residual stream is not overwritten). TK_ROW_MAJOR alone; one product
 * (group_kind TK_GROUP_NONE). act(x) is the activation, act' its derivative:
 *
 * TK_EPI_BIAS_ACT: z = P + bias; D = act(z) + beta * C (M x N). bias may
 *   be NULL (none) and act TK_ACT_NONE: a Linear's bias alone, or D != C.
 *   aux (optional): z stored, bf16 (M x N), for the backward pass.
 * TK_EPI_GATED (SwiGLU with TK_ACT_SILU, GeGLU with TK_ACT_GELU_*): the
 *   product's N columns are a gate half and an up half: z = P + bias
 *   (bias: N values, the gate's then the up's); D (M x N/2) = act(z[:, j])
 *   * z[:, N/2 + j] + beta * C, C also M x N/2. The up half's columns are
 *   B's columns N/2 .. N-1 (one weight holding both, gate first), or with
 *   b_up set the first N/2 columns of op(b_up) (a second weight with B's op
 *   and ldb: gate_proj and up_proj as they are, no copy; B then needs only
 *   N/2 columns). N must be even. aux (optional): z (M x N) stored.
 * TK_EPI_BACKWARD: the gradient through act: D = P * act'(aux) + beta * C,
 *   aux (M x N, required) holding the forward's z (TK_ACT_RELU: 1 where
 *   z > 0). bias_grad (optional): N fp32 column sums of D.
 * TK_EPI_GATED_BACKWARD: P (M x N) is the gradient of a gated output h,
 *   aux (M x 2N, required) the forward's z (gate half, then up half); D
 *   (M x 2N) gets the gradient of z: D[:, j] = P * z_up * act'(z_gate),
 *   D[:, N + j] = P * act(z_gate) (j < N; z_gate = aux[:, j], z_up =
 *   aux[:, N + j]). beta must be 0. bias_grad (optional): 2N column sums.
 *
 * bias (the forward kinds alone): one value per column of z (bias_along TK_BIAS_COLUMNS, length N:
 * nn.Linear's bias) or per row (TK_BIAS_ROWS, length M), fp32 or bf16,
 * element-aligned, in device memory. bias_grad: the column sums over the M
 * rows of D's values before their rounding to c_type, summed in an order
 * fixed for a given kernel and problem (the same bits every run); M == 0
 * writes zeros. Columns of D are those of the formula: N, N/2 (GATED) or
 * 2N (GATED_BACKWARD); ldd, ldaux and ldc count elements as ldc does.
 * A bad combination is TK_ERR_INVALID_VALUE naming the field (an odd N for
 * TK_EPI_GATED, a missing aux, bias_grad with a forward kind, a column-
 * major problem), a kernel without epilogues TK_ERR_NOT_SUPPORTED; D, aux
 * and bias_grad are then untouched. */
/* ---- FP8 operands (tk_gemm_desc version 4; issue 40, in progress) ----
 * A and B in one of the OCP 8-bit formats (a_fp8, b_fp8: E4M3 or E5M2, in
 * any pairing), products summed in fp32, C fp32 or bf16 as c_type says,
 * alpha and beta as for bf16. The product is sum_k (sa a)(sb b) with the
 * scales (fp32, device memory) of scale_mode:
 *   TK_SCALE_TENSOR: scale_a and scale_b one value each;
 *   TK_SCALE_ROW: scale_a M values (one per row of op(A)), scale_b N (one
 *     per column of op(B)): torch._scaled_mm's row-wise mode;
 *   TK_SCALE_BLOCK: DeepSeek-V3's: scale_a one value per row of op(A) and
 *     128 consecutive k (row i, k-block j at scale_a[i + j * ld_scale_a],
 *     ld_scale_a >= M), scale_b one per 128 x 128 block of op(B) (n-block
 *     i, k-block j at scale_b[i + j * ld_scale_b], ld_scale_b >=
 *     ceil(N / 128)); K a multiple of 128.
 * Kernels: on sm_90a the FP8 instances of k31_wgmma_cluster (128 x 256
 * tiles), k45_cluster_128x128 and, at small M, the swapped k36_swap_*
 * tiles (k33_wgmma_128x128's by name), each 128 of K promoted to fp32.
 * They read A and B K-major (op_a N and op_b T in a row-major problem; op_a
 * T and op_b N in a column-major one), 16-byte aligned with leading
 * dimensions that are multiples of 16 (TMA). Auto-dispatch runs every
 * other layout and alignment on K-major copies, in the handle's workspace,
 * of the operands that need them (transposed where the layout is not
 * K-major, repacked where it is misaligned): one extra pass over each
 * copied operand, under the workspace rules of the copies of misaligned
 * operands (below); the scales stay those of op(A) and op(B). k01_naive
 * (any layout, any GPU: correct, slow) takes the rest: tiny problems (2 M
 * N K < 2^22), calls naming it (a named fast kernel refuses a layout it
 * does not read), calls captured in a CUDA graph on layouts the fast
 * kernels do not read (no workspace under capture), GPUs before sm_90.
 * Many FP8 products (tk_gemm_desc version 5): TK_GROUP_ROWS (a mixture of
 * experts' forward: A the M x K token rows of all groups, B + g * stride_b
 * the g-th expert's weight) and TK_GROUP_BATCHED, every scale mode. An
 * operand that is one per product (B always; A for BATCHED) has its
 * scales one set per product, the g-th at scale + g * stride_scale_*; an
 * operand shared by all (ROWS' A; BATCHED's with stride 0) one set for
 * all, its stride_scale 0. A set is what one product's mode asks for:
 *   TK_SCALE_TENSOR: one value (scale_b[g]: a tensor scale per expert);
 *   TK_SCALE_ROW: one per row of op(A) (ROWS: M values, token rows) or
 *     per column of op(B) (N values: scale_b[g * stride + j], torch.
 *     _scaled_grouped_mm's (count, N) scale_b);
 *   TK_SCALE_BLOCK: as for one product (ROWS: scale_a over all M rows,
 *     ld_scale_a >= M; DeepGEMM's grouped-contiguous layout), the g-th
 *     expert's ceil(N / 128) x K / 128 blocks at scale_b + g * stride,
 *     n-block i, k-block j at [i + j * ld_scale_b].
 * stride_scale_a, stride_scale_b 0: the default, the packed size of one
 * set (1, M or N, ld * K / 128) for an operand one per product, 0 for one
 * shared; set, at least that size (a set may not overlap the next), and
 * 0 where the operand is shared (ROWS' A: stride_scale_a must be 0). Not
 * yet: TK_GROUP_K and TK_GROUP_MASKED with FP8 (TK_ERR_NOT_SUPPORTED).
 * Kernels: k43's FP8 instances (k43_grouped_128x128, _128x256,
 * k43_swap_16x64, _32x64) where A and B are K-major (op_a N, op_b T), K a
 * multiple of 16 and the strides whole 16 bytes (no copies are made for
 * many products); k01_naive (correct, slow) the rest.
 * Not yet: an epilogue with FP8 (TK_ERR_NOT_SUPPORTED), block scales with
 * TK_COL_MAJOR (likewise). */
typedef enum tk_fp8_format { TK_FP8_NONE = 0, TK_FP8_E4M3 = 1, TK_FP8_E5M2 = 2 } tk_fp8_format;
typedef enum tk_scale_mode { TK_SCALE_NONE = 0, TK_SCALE_TENSOR = 1, TK_SCALE_ROW = 2, TK_SCALE_BLOCK = 3 } tk_scale_mode;

/* ---- FP8 quantization (issue 40): bf16 to codes and scales ----
 * tk_quantize_fp8 turns x, a bf16 rows x cols row-major matrix (leading
 * dimension ldx), into FP8 codes q (rows x cols bytes, row-major, ldq) and
 * fp32 scales, x ~ scale * decode(q), one scale per group of `mode`:
 *   TK_QUANT_TENSOR: one group, scale[0];
 *   TK_QUANT_ROW: one per row, scale[r];
 *   TK_QUANT_1X128: one per row and 128 columns (the last block of a row
 *     may be narrower), scale[r + (c / 128) * ld_scale], ld_scale >= rows;
 *   TK_QUANT_128X128: one per 128 x 128 block (edge blocks smaller),
 *     scale[r / 128 + (c / 128) * ld_scale], ld_scale >= ceil(rows / 128).
 * ld_scale 0 means its least value (rows, ceil(rows / 128)); TENSOR and ROW
 * take none (0). Those are tk_gemm_desc's (version 4) layouts: A (M x K)
 * by TK_QUANT_1X128 is TK_SCALE_BLOCK's scale_a with ld_scale_a = ld_scale;
 * a weight stored N x K (op_b T) by TK_QUANT_128X128 is its scale_b with
 * ld_scale_b = ld_scale; ROW gives TK_SCALE_ROW's (A by its rows, such a
 * weight by its N rows), TENSOR TK_SCALE_TENSOR's.
 * A group's scale is fl32(amax / fmax) (amax: the largest |x| of the group;
 * fmax: 448 for E4M3, 57344 for E5M2); 1 where amax is 0; NaN where the
 * group holds a NaN. Each code is fl32(x / scale) (an IEEE fp32 division)
 * rounded to the nearest code, ties to even, saturated to +-fmax (PTX's
 * cvt.rn.satfinite); a NaN quotient (every value of a NaN group; an
 * infinite x where amax is infinite) gives 0x7F. These are the lab's
 * tk_lab_fp8_quantize's rules, which the GPU test matches bit for bit.
 * Pointers: x 2-byte aligned, scale 4-byte aligned, q any; 16-byte loads
 * where x is 16-byte aligned and ldx a multiple of 8, 8-byte stores where
 * q is 8-byte aligned and ldq a multiple of 8, narrower accesses (the same
 * results, slower) otherwise. q and the scales may not overlap x or each
 * other. rows or cols 0: nothing is written (TK_SUCCESS, no device needed).
 * Launches, on `stream` (asynchronous; no workspace, no host
 * synchronisation, so it can be captured in a CUDA graph; the same bits
 * every run):
 *   ROW, 1X128, 128X128: one kernel, one pass over x: a group's values stay
 *     in registers between its amax and its codes (a ROW row longer than
 *     16384 columns is read again for its codes, from L2);
 *   TENSOR: two kernels after a 4-byte memset: the amax of x (into scale[0],
 *     as bits), then the codes, which read x again, walking it backward so
 *     that what the first left in L2 is read first.
 * A bad argument is TK_ERR_INVALID_VALUE naming the field (d's fields by
 * their names), before the device is touched and with nothing written; d
 * is read by the versioned structs' rule (tk_gemm_desc's: a size below the
 * first version's is INVALID_VALUE, a field past what this library knows
 * set is TK_ERR_NOT_SUPPORTED). */
typedef enum tk_quant_mode {
    TK_QUANT_NONE = 0,
    TK_QUANT_TENSOR = 1,
    TK_QUANT_ROW = 2,
    TK_QUANT_1X128 = 3,
    TK_QUANT_128X128 = 4,
} tk_quant_mode;

typedef struct tk_quantize_desc {
    size_t size;                 /* sizeof(tk_quantize_desc) where the caller was compiled */
    int64_t rows, cols;
    const void *x; int64_t ldx;  /* bf16, device memory */
    int32_t format;              /* tk_fp8_format of the codes: TK_FP8_E4M3 or TK_FP8_E5M2 */
    int32_t mode;                /* tk_quant_mode */
    void *q; int64_t ldq;        /* the codes, one byte each, device memory */
    float *scale;                /* fp32, device memory: the groups' scales */
    int64_t ld_scale;            /* 1X128, 128X128: elements from one column block's scales to the next; 0: least */
    /* later versions append here */
} tk_quantize_desc;

#define TK_QUANTIZE_DESC_INIT { .size = sizeof(tk_quantize_desc) }

tk_status tk_quantize_fp8(tk_handle h, const tk_quantize_desc *d, void *stream);

typedef enum tk_epilogue_kind {
    TK_EPI_NONE = 0,
    TK_EPI_BIAS_ACT = 1,
    TK_EPI_GATED = 2,
    TK_EPI_BACKWARD = 3,
    TK_EPI_GATED_BACKWARD = 4,
} tk_epilogue_kind;

typedef enum tk_activation {
    TK_ACT_NONE = 0,
    TK_ACT_RELU = 1,
    TK_ACT_GELU_ERF = 2,         /* x * Phi(x), torch's F.gelu */
    TK_ACT_GELU_TANH = 3,        /* F.gelu(approximate="tanh") */
    TK_ACT_SILU = 4,             /* x * sigmoid(x) */
} tk_activation;

typedef enum tk_bias_along {
    TK_BIAS_COLUMNS = 0,         /* bias[j] added to column j (length N) */
    TK_BIAS_ROWS = 1,            /* bias[i] added to row i (length M) */
} tk_bias_along;

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

/* ---- versioned structs ----
 * Every struct below begins, as tk_gemm_desc does, with its size as the
 * caller compiled it, which its _INIT macro sets; fields are only ever
 * appended. A struct the library fills (an "out" argument) is written up to
 * out->size: the fields this library knows, and zeros in the bytes past
 * them, so a program built against a newer header reads zeros (defaults) in
 * the fields this library predates. A size below the struct's first
 * version is TK_ERR_INVALID_VALUE, naming the argument. */

/* ---- workspaces ----
 * Besides its operands a call may use device memory of the handle: the
 * partial sums and completion flags of a split over K (the Hopper kernels
 * and k40_skinny, on problems of few output tiles), copies of misaligned
 * operands (auto-dispatch), and cuBLAS's workspace (the "cublas" kernel,
 * 32 MiB). By default the handle allocates them on first use in stream
 * order (cudaMallocAsync), grows them when a call needs more and keeps them
 * until tk_workspace_release or tk_destroy. The caller may instead give it
 * memory (tk_set_workspace), cap what it allocates (tk_set_workspace_limit),
 * ask what a problem needs (tk_workspace_size) and free the handle's now
 * (tk_workspace_release). A call on a stream being captured into a CUDA
 * graph uses no workspace at all, the caller's included (tk_create). */

/* The cap's default: no limit. */
#define TK_WORKSPACE_UNLIMITED SIZE_MAX

/* From the next call on, h takes every workspace from the caller's device
 * memory [ptr, ptr + bytes) and allocates none; ptr == NULL with
 * bytes == 0 goes back to the handle's own. ptr must be 256-byte aligned
 * (as cudaMalloc's are) and, where h has a device, device or managed
 * memory of that device (cudaPointerGetAttributes); bytes may be 0 (no
 * workspace at all).
 * - A call runs with what fits in `bytes`: a split that does not fit runs
 *   unsplit, cuBLAS gets up to 32 MiB of it, and copies of misaligned
 *   operands that do not fit are refused with TK_ERR_OUT_OF_RESOURCES
 *   (tk_workspace_size says what a call needs).
 * - The memory is h's while it is set: the caller must neither read nor
 *   write it, nor give it to another handle, and must keep it allocated
 *   until every call that used it has completed on the GPU, also after
 *   replacing it. h's calls that use a workspace run one after the other
 *   whatever their streams (tk_create), so an event recorded on the stream
 *   of the last of them tells when; tk_destroy waits for it.
 * - h keeps state there between calls (the completion flags of split
 *   reductions, which hold launch numbers): it is set up again, in stream
 *   order, by the first call that needs it after each tk_set_workspace.
 *   Setting the same pointer again is how to tell h its contents changed.
 * The workspaces h allocated before are kept, unused, until
 * tk_workspace_release or tk_destroy frees them. TK_ERR_INVALID_VALUE for a
 * NULL h, ptr NULL with bytes != 0, ptr misaligned or not device memory. */
tk_status tk_set_workspace(tk_handle h, void *ptr, size_t bytes);

/* Caps the device memory h holds in the workspaces it allocates itself, all
 * of them together, at `bytes` (TK_WORKSPACE_UNLIMITED, the default: no
 * cap; 0: none at all). A call whose workspace would take h past the cap
 * runs without the part that does not fit, as it does when an allocation
 * fails: a split over K runs unsplit (the same product, summed in another
 * order: see tk_set_split_k), cuBLAS runs without a workspace, and the copy
 * route of auto-dispatch is refused with TK_ERR_OUT_OF_RESOURCES (a named
 * kernel runs the operands as they are). Memory h already holds is kept and
 * used, also past a lower cap, until tk_workspace_release. A caller's
 * workspace (tk_set_workspace) is not counted: its size is its own cap. */
tk_status tk_set_workspace_limit(tk_handle h, size_t bytes);

/* In *bytes: the workspace tk_gemm_ex(h, p, kernel, stream) would use on
 * h's device, under h's split-K setting and with no cap: the copies of
 * misaligned operands auto-dispatch makes, the partial sums and flags of a
 * split, or cuBLAS's 32 MiB. A caller workspace of at least this size lets
 * the call run as it would with unlimited memory. 0 for a call that uses
 * none, a no-op (M or N == 0) and K == 0. p's pointers may be NULL, as for
 * tk_kernel_supports (alignment is then judged on the leading dimensions
 * alone: no copies). Needs a device (else TK_ERR_NO_DEVICE, after the
 * argument checks); a kernel that cannot run p gives the status
 * tk_kernel_supports gives, with *bytes 0. */
tk_status tk_workspace_size(tk_handle h, const tk_gemm_problem *p, const char *kernel, size_t *bytes);

/* Frees the workspaces h allocated itself (never a caller's) in stream
 * order on `stream` (a cudaStream_t; NULL = legacy default): the memory
 * goes back to the device's memory pool (cudaFreeAsync) once the work
 * enqueued on `stream` before and h's last call that used a workspace have
 * completed; the host does not wait. A later call that needs a workspace
 * allocates it again (within the cap). With nothing allocated (and so
 * without a device) it does nothing; otherwise refused on a stream being
 * captured into a CUDA graph (TK_ERR_INVALID_VALUE) and, like every call,
 * where another device than h's is current. */
tk_status tk_workspace_release(tk_handle h, void *stream);

typedef enum tk_split_k {
    TK_SPLIT_K_AUTO = 0,   /* the default: kernels split K where it pays (fixed-order sums) */
    TK_SPLIT_K_NEVER = 1   /* no split over K; kernels get no workspace, cuBLAS none */
} tk_split_k;

/* Whether h's calls may split the K dimension of a product. tilekit's
 * split reductions are deterministic: no atomics, partial sums added in a
 * fixed order, so a given problem, kernel, device and split give the same
 * bits on every run. But whether a call splits, and in how many parts,
 * depends on the workspace it gets (a cap, a caller's workspace, a failed
 * allocation, a CUDA graph capture), and a split adds in another order than
 * an unsplit run: two such calls of one problem may differ in the last
 * bits. With TK_SPLIT_K_NEVER no kernel is asked for a workspace, every
 * product runs unsplit, and cuBLAS runs without a workspace (as it does
 * under capture), so a call's bits depend only on the problem, the kernel
 * that runs and the device; copies of misaligned operands are still made
 * (they do not change the sums). Auto-dispatch chooses by the same rules
 * either way (for misaligned operands it chooses among other kernels under
 * capture): name the kernel, or use a plan, to fix it. Splits are faster
 * where they apply (few output tiles and long K: decode, 512 x 4096 x 4096),
 * often by 1.2-2x. TK_ERR_INVALID_VALUE for another value. */
tk_status tk_set_split_k(tk_handle h, tk_split_k mode);

/* How many of the device's SMs h's kernels may fill: sms > 0 caps it there
 * (at most the device's count; more is taken as all), 0 gives them all
 * back (the default). The persistent kernels (the Hopper families) size
 * their grids to it, and auto-dispatch and the split plans judge waves of
 * tiles by it; the kernels of one block per output tile (sm_80's, the
 * seeds') and cuBLAS do not take it, and neither does a grid of fewer
 * blocks than the cap. What it is for: work that runs at the same time on
 * the other SMs, e.g. the communication kernels of tilekit_dist.h (a
 * persistent GEMM holding every SM would keep them waiting for its end),
 * as cuBLASLt's CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET. The same problem on
 * fewer SMs may run another kernel or split: the bits of a result can
 * differ from those with every SM. TK_ERR_INVALID_VALUE for sms < 0; no
 * device needed (without one the setting is kept and does nothing). */
tk_status tk_set_sm_count(tk_handle h, int sms);

/* What tk_get_handle_info reports: h's device and settings. */
typedef struct tk_handle_info {
    size_t size;               /* sizeof(tk_handle_info) where the caller was compiled */
    int device;                /* CUDA ordinal of h's device; -1 without one */
    int sm;                    /* its compute capability, 10 * major + minor (90); 0 without one */
    void *workspace;           /* the caller's workspace (tk_set_workspace); NULL: h allocates its own */
    size_t workspace_bytes;    /* its size */
    size_t workspace_limit;    /* the cap (tk_set_workspace_limit); TK_WORKSPACE_UNLIMITED: none */
    size_t workspace_held;     /* device bytes h holds now in workspaces it allocated */
    tk_split_k split_k;        /* tk_set_split_k's setting */
} tk_handle_info;

#define TK_HANDLE_INFO_INIT { .size = sizeof(tk_handle_info) }

tk_status tk_get_handle_info(tk_handle h, tk_handle_info *out);

/* ---- candidates: the kernels for a problem, ranked, with estimates ---- */
typedef struct tk_candidate {
    size_t size;               /* out[0].size, set by the caller (TK_CANDIDATE_INIT): the array's stride */
    const char *name;          /* a registry name (static storage) */
    int rank;                  /* 1, 2, ...: the order of the list among those that can run; 0: refused */
    tk_status status;          /* TK_SUCCESS, or the refusal tk_kernel_supports(h, name, p) gives */
    double est_us;             /* the cost model's time on the GPU, microseconds; 0 when refused */
    size_t workspace_bytes;    /* as tk_workspace_size for this entry */
    unsigned copies;           /* auto-dispatch's copies this entry runs on: 1 A, 2 B, 4 C; 0: none */
} tk_candidate;

#define TK_CANDIDATE_INIT { .size = sizeof(tk_candidate) }

/* The kernels that could run p on h's device, best first, each with an
 * estimate of its time and the workspace it needs (as cuBLASLt's heuristic
 * lists algorithms). The list has one entry per kernel of the registry, as
 * tk_gemm_ex(h, p, name, ...) would run it, plus, first, auto-dispatch's
 * route when it runs on copies of misaligned operands. Order:
 * - rank 1 is what auto-dispatch runs, where it can run p (tk_gemm_ex with
 *   kernel NULL; the name tk_select_kernel gives). Where that is through
 *   copies (copies != 0) the entry is reached through auto-dispatch (or a
 *   plan made with kernel NULL) only: the kernel by its name runs the
 *   operands as they are, which its own entry, further down, says it may
 *   not take;
 * - then the other kernels auto-dispatch considers, in its order of
 *   preference (its shape rules and measurements; a tune cache's entry
 *   first), which the estimate does not change;
 * - then the kernels auto-dispatch never picks (cuBLAS, the seeds'
 *   kernels), by estimate;
 * - then the kernels that cannot run p (rank 0, their status), in registry
 *   order.
 * Fills min(capacity, *count) entries of out, whose stride is out[0].size
 * (each written entry gets that size); *count is the number of entries of
 * the list (capacity 0 with out NULL: count only). No-ops and K == 0 run no
 * GEMM kernel: *count 0. p's pointers may be NULL, as for
 * tk_kernel_supports. Needs a device (TK_ERR_NO_DEVICE).
 *
 * The estimate is a rough model, not a measurement: launch overhead (3 us a
 * launch, a copy being one) plus the longer of compute and memory time.
 * Compute: the device's dense bf16 tensor peak (SMs x clock x flop per
 * clock per SM: 4096 from sm_90, 2048 on sm_80, 1024 on sm_86/87/89) times
 * the share of it the kernel's family reached at 8192^3 on an H100 (a
 * column of the kernel table: 74% for the k30/k31 families and cuBLAS, 46%
 * for k21, under 1% for k01_naive), spent on whole waves of output tiles
 * (ceil(tiles / SMs) times one tile's flops per SM). Memory: A and B read
 * once, C written (and read when beta != 0), copies read and written once
 * more, over the DRAM bandwidth (2 x memory clock x bus width). It knows
 * nothing of L2 reuse, split-K, pipeline fill or clock throttling: trust
 * its ratios to an order of magnitude, and measure (tilekit bench) to choose
 * between close candidates. */
tk_status tk_candidates(tk_handle h, const tk_gemm_problem *p, tk_candidate *out, int capacity, int *count);

/* ---- plans: one problem shape, checked once, run many times ---- */
typedef struct tk_plan_s *tk_plan;

/* Checks p as tk_gemm_ex does and fixes how it will run: for kernel
 * NULL/"auto", auto-dispatch's choice made now (the kernel, and the copies
 * of misaligned operands if any), for a named kernel that kernel (refused,
 * and *out NULL, as tk_gemm_ex would refuse it). Everything of p but its
 * three pointers is fixed: layout, ops, sizes, leading dimensions, alpha,
 * beta, C's type. p's pointers are examples of the ones the plan will run
 * with; they decide the choice where alignment matters and may be NULL
 * (taken as 256-byte aligned). Nothing is launched or allocated on the
 * device. A plan belongs to h: it runs on h only, and must be destroyed
 * before h (it holds no device memory). A no-op problem (M or N == 0)
 * makes a plan without a device; any other needs one (TK_ERR_NO_DEVICE). */
tk_status tk_plan_create(tk_handle h, const tk_gemm_problem *p, const char *kernel, tk_plan *out);

/* Runs the plan's problem with A at a, B at b and C at c on `stream`,
 * without checking the problem or choosing a kernel again: what is checked
 * is h (the plan's handle), the pointers (not NULL where the problem reads
 * or writes them; each a multiple of its element size, as for tk_gemm_ex,
 * and of 16 bytes where the plan's example pointer was and the kernel reads
 * the operand itself: that alignment decided the choice), the current
 * device, and whether the stream is being captured. The launch is
 * tk_gemm_ex's: workspaces, splits and ordering by h's settings at the time
 * of the run. So a run gives the bits tk_gemm_ex gives for the same problem
 * and pointers, with the plan's kernel named; with kernel NULL, the bits
 * tk_gemm_ex(h, p, NULL, stream) gives as long as it would choose the same
 * kernel, as it does for pointers aligned as the plan's (modulo 16 bytes)
 * and no change of the tune cache, outside a capture. A plan that copies
 * operands does not run on a stream being captured
 * (TK_ERR_NOT_SUPPORTED: the copies need the handle's workspace). */
tk_status tk_plan_run(tk_handle h, tk_plan plan, const void *a, const void *b, void *c, void *stream);

/* The kernel a plan runs: its registry name, or "" when it launches no
 * GEMM kernel (M, N or K is 0); NULL for a NULL plan. */
const char *tk_plan_kernel(tk_plan plan);

/* Frees the plan (host memory; NULL: nothing to do). May be called after
 * its handle was destroyed. */
tk_status tk_plan_destroy(tk_plan plan);

/* ---- the CUDA or cuBLAS error behind a status ---- */
typedef struct tk_cuda_error {
    size_t size;               /* sizeof(tk_cuda_error) where the caller was compiled */
    int cuda_error;            /* the cudaError_t of the CUDA runtime call that failed; 0: none */
    const char *cuda_name;     /* its name ("cudaErrorMemoryAllocation"); "" for none */
    int cublas_status;         /* the cublasStatus_t of the cuBLAS call that failed; 0: none */
    const char *cublas_name;   /* its name ("CUBLAS_STATUS_ALLOC_FAILED"); "" for none */
} tk_cuda_error;

#define TK_CUDA_ERROR_INIT { .size = sizeof(tk_cuda_error) }

/* The CUDA runtime error or cuBLAS status that made the last failed call
 * on h fail, as numbers and names (static strings), where there was one:
 * TK_ERR_CUDA and TK_ERR_CUBLAS always carry theirs; TK_ERR_ALLOC and
 * TK_ERR_OUT_OF_RESOURCES carry that of a failed device allocation. Zeros
 * and "" after a successful call and after failures of another cause. With
 * h == NULL: the last failure of the calling host thread (on any handle, or
 * of tk_create), as tk_last_error(NULL). Fills *out by the versioned
 * structs' rule; TK_ERR_INVALID_VALUE for a NULL out or a size too small. */
tk_status tk_last_cuda_error(tk_handle h, tk_cuda_error *out);

/* ---- how the library was built ---- */
typedef struct tk_build_info {
    size_t size;               /* sizeof(tk_build_info) where the caller was compiled */
    int version;               /* TILEKIT_VERSION of the library */
    const char *version_string;   /* "0.1.0" */
    const char *archs;         /* the GPU architectures compiled in (the Makefile's ARCHS): "80 90a" */
    int cuda_runtime_built;    /* CUDART_VERSION it was compiled against: 12040 for 12.4 */
    int cuda_runtime_loaded;   /* cudaRuntimeGetVersion of the runtime loaded; 0 if it cannot say */
    int cuda_driver;           /* cudaDriverGetVersion: the newest CUDA the driver supports; 0: no driver */
    int cublas_built;          /* CUBLAS_VERSION it was compiled against: 120403 for 12.4.3 */
    int cublas_loaded;         /* the loaded cuBLAS's, the same way (cublasGetProperty); 0 if it cannot say */
} tk_build_info;

#define TK_BUILD_INFO_INIT { .size = sizeof(tk_build_info) }

/* Fills *out (the versioned structs' rule); needs no GPU, no driver and no
 * handle. TK_ERR_INVALID_VALUE for a NULL out or a size too small. */
tk_status tk_get_build_info(tk_build_info *out);

#ifdef __cplusplus
}
#endif
#endif /* TILEKIT_H */
