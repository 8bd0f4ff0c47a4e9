/* tilekit_dist.h - tensor-parallel GEMMs over NCCL, with the communication
 * hidden under the product (issue 41). The library is libtilekit_dist.so,
 * apart from libtilekit.so (which needs no NCCL): it links libtilekit and
 * loads NCCL itself, dlopen("libnccl.so.2") at first use ($TK_DIST_NCCL_LIB
 * names another file), so in a process that already loaded NCCL (PyTorch)
 * it uses that one. Callers need no nccl.h: a communicator is NCCL's
 * ncclComm_t, `struct ncclComm *`.
 *
 * Two operations of a Linear split over R ranks (one GPU each), on the
 * caller's communicator and stream:
 *
 *   all-gather + GEMM (column-parallel Linear): rank r holds rows
 *     r*M/R .. (r+1)*M/R - 1 of op(A) (tokens) and its own B (a column
 *     shard of the weight); every rank gets C = op(A_all) op(B), M x N,
 *     and, if asked, A_all (what torch's fused all-gather matmul returns).
 *   GEMM + reduce-scatter (row-parallel Linear): rank r holds its op(A_r),
 *     M x K_r (a column shard of the activations), and its op(B_r), K_r x N;
 *     the products are summed over the ranks and rank r keeps rows
 *     r*M/R .. (r+1)*M/R - 1 of C = alpha * sum_r op(A_r) op(B_r) + beta * C.
 *
 *   tk_dist d;  tk_dist_create(&d, comm);          // comm: ncclComm_t of the current device
 *   tk_dist_desc g = TK_DIST_DESC_INIT;
 *   g.problem = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_T, M, N, K, 1.0f, 0.0f,
 *                                  x_shard, K, w_shard, K, y, N, TK_BF16 };   // M: all ranks' tokens
 *   tk_status st = tk_dist_all_gather_gemm(d, &g, stream);
 *   if (st) fprintf(stderr, "%s: %s\n", tk_status_string(st), tk_dist_last_error(d));
 *   tk_dist_destroy(d);
 *
 * How the communication hides (docs/ARCHITECTURE.md, "More than one GPU"):
 * each rank's block of M/R rows is cut into chunks; NCCL moves one chunk
 * on the context's own stream (of the highest priority) while tk_gemm
 * computes, on the caller's stream, the chunk that has arrived
 * (all-gather: own rows first, from A itself, then each chunk as its
 * event says it landed) or the next chunk to send (reduce-scatter: the
 * rows of the peers first, so that sends start early; then its own rows;
 * then the fixed-order sum of the R partial products). Events order each
 * chunk; the call returns once everything is enqueued, with the caller's
 * stream made to wait for the end of the exchange: work enqueued after
 * the call on that stream sees the results, and the operands may be
 * reused then. Nothing synchronizes the host (but check_shapes and the
 * copy-engine set-up below).
 *
 * The transport (tk_dist_set_transport) is what moves a chunk:
 * - CE, the default where NCCL 2.28+ can give it: the copy engines move
 *   the bytes (cudaMemcpyAsync between windows of symmetric memory, each
 *   rank's window mapped into every rank's address space by NCCL:
 *   ncclMemAlloc, ncclCommWindowRegister, the peers' addresses from NCCL's
 *   device API), with no SM, beside the GEMMs. The all-gather pulls each
 *   peer's chunk out of its window; the reduce-scatter pushes each chunk's
 *   partials into its rank's window, each chunk summed once every rank's
 *   have landed. The ranks meet at one-word all-reduces (two a call) on a
 *   communicator split from comm with one CTA a kernel, and the GEMMs of
 *   a CE call leave one SM to them (tk_dist_set_comm_sms unset). The
 *   windows (the gathered A or the partials of every rank, rounded up to
 *   32 MiB; tk_dist_plan's window_bytes) are held until tk_dist_destroy,
 *   grown (after waiting for the last call) when a call needs more. It
 *   needs the ranks on one node with P2P and cuMem, and libtilekit_dist
 *   built with NCCL's nccl_device.h.
 * - P2P: grouped ncclSend/ncclRecv in a ring, chunk by chunk. NCCL's
 *   kernels need SMs, and the persistent GEMMs hold every SM until they
 *   end, so the transfers mostly wait (docs/NOTES.md, issue 41); a
 *   reservation (tk_dist_set_comm_sms) gives them room at the GEMMs' cost.
 * Both give the same bits. Every rank must ask for the same transport (a
 * setting like the chunk count; check_shapes compares it), and the CE
 * set-up is collective: each of its steps ends with the ranks agreeing,
 * so that a failure on one rank makes all fall back to P2P (AUTO) or
 * refuse (CE) alike.
 *
 * The bits: each rank's GEMMs run on the context's tk_handle with split-K
 * off (TK_SPLIT_K_NEVER), so a chunk's product is tk_gemm_ex's for that
 * chunk's problem, the same on every run. The reduce-scatter's partial
 * products are fp32 (partial_type) and summed by one kernel (P2P: once;
 * CE: per chunk, each element the same way) in rank order 0, 1, ..., R-1,
 * in fp32, then alpha, beta and the one rounding to C's type, as
 * tk_gemm's epilogue does: the order depends on neither the chunk count,
 * the transport nor the arrival order. The same call gives the same bits
 * on every run. Every chunk runs one kernel: desc.kernel, else the one
 * auto-dispatch picks for the whole local product (all M rows), not its
 * pick for each chunk's height (auto-dispatch chunk by chunk only where a
 * chunk refuses that kernel: operands misaligned at a chunk's rows). A tile
 * kernel's sums run over K in one order whatever M when nothing is split,
 * so the bits do not change with the chunk count (tests/gpu/test_dist.c
 * checks 1, 2 and 4 chunks with named kernels, and CE against P2P).
 *
 * Rules:
 * - One host thread uses a context at a time (a tk_handle's rule). Calls on
 *   one context run one after the other whatever their streams (its
 *   workspaces and its communication stream are shared).
 * - Every rank makes the same calls in the same order with the same shapes,
 *   chunk count and transport, as NCCL requires. check_shapes = 1 compares
 *   the ranks' shapes (and chunk counts, transports) first, so that a
 *   mismatch is a clear TK_ERR_INVALID_VALUE on every rank instead of a
 *   hang or garbage; it costs one small all-gather and a host wait (at
 *   most the context's timeout). The chunk count agrees by itself where
 *   the ranks' GPUs are of one model, TK_DIST_CHUNKS and TK_DIST_LINK_GBPS
 *   are set alike and the shapes agree; the transport where
 *   TK_DIST_TRANSPORT (or tk_dist_set_transport) is. An all-gather whose N
 *   differs between ranks should name its chunk count (desc.chunks), since
 *   the plan weighs N.
 * - Argument errors are found before anything is enqueued, on each rank
 *   (a rank that refuses enqueues nothing: its peers then wait in NCCL; use
 *   tk_dist_sync's timeout, or check_shapes, to see it). A GEMM that fails
 *   after the exchange began still lets the exchange complete (C undefined)
 *   and returns its status. An NCCL call that fails is TK_ERR_COMM with
 *   NCCL's words; tk_dist_sync reports an asynchronous NCCL error or a
 *   timeout, after which the caller should ncclCommAbort the communicator.
 * - Not under CUDA graph capture (TK_ERR_NOT_SUPPORTED): the workspace is
 *   allocated and the shape check waits on the host.
 * - The library never prints or exits. No NVLink multicast is used (no
 *   cuMulticast*, no NVLS): only ncclSend/ncclRecv (P2P), copies between
 *   symmetric windows and one-word ncclAllReduces (CE; no multicast), and
 *   small ncclAllGathers for check_shapes and the CE set-up's agreements.
 * - tk_dist_destroy is collective where CE was set up (it deregisters the
 *   windows and destroys the split communicator): every rank destroys its
 *   context. Where the last call never completed (a rank that did not
 *   make it), destroy aborts the split communicator (its kernels end) and
 *   frees the rest; abort comm too (ncclCommAbort).
 * - A rank's first P2P call to a peer sets up NCCL's connection to it,
 *   inside ncclGroupEnd, which on a blocking communicator waits for the
 *   peer without a timeout: if the peer never makes that call, the rank
 *   hangs there (NCCL's behaviour). Later calls enqueue and return, and
 *   tk_dist_sync's timeout reports a peer that does not follow. A
 *   non-blocking communicator (ncclConfig_t.blocking = 0) returns instead,
 *   and the context's timeout bounds the wait.
 */
#ifndef TILEKIT_DIST_H
#define TILEKIT_DIST_H

#include "tilekit.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ncclComm;                       /* NCCL's communicator (ncclComm_t) */

typedef struct tk_dist_s *tk_dist;

/* A context for comm, bound to the current device, which must be comm's
 * (ncclCommCuDevice; else TK_ERR_INVALID_VALUE naming both). It holds a
 * tk_handle (split-K off), a communication stream, events and a workspace
 * (allocated on first use, in stream order). TK_ERR_COMM when NCCL cannot
 * be loaded (the message says which file and why). */
tk_status tk_dist_create(tk_dist *out, struct ncclComm *comm);

/* Waits for the context's last call to complete (so that its workspace can
 * be freed), then frees everything but the communicator, which stays the
 * caller's. NULL: nothing to do. */
tk_status tk_dist_destroy(tk_dist d);

/* The message of d's last failed call ("" after a successful one); with
 * d == NULL the calling thread's last failure of any context or of a call
 * without one (tk_dist_create). */
const char *tk_dist_last_error(tk_dist d);

/* The handle d's GEMMs run on: its settings (workspace, split-K, SM count,
 * a tune cache) apply to them. Owned by d. NULL for a NULL d. */
tk_handle tk_dist_handle(tk_dist d);

/* One call of either operation. Versioned as tk_gemm_desc (size first,
 * fields appended, zero the default). */
typedef struct tk_dist_desc {
    size_t size;                 /* sizeof(tk_dist_desc) where the caller was compiled */
    /* The local problem, as tk_gemm_ex takes it, with M the rows of all
     * ranks together (a multiple of the rank count):
     *  all-gather: a is this rank's M/R rows of op(A), stored so that each
     *    row of op(A) is K contiguous elements (TK_ROW_MAJOR with op_a N, or
     *    TK_COL_MAJOR with op_a T; lda >= K); b this rank's B; c is M x N.
     *  reduce-scatter: a is M x K (this rank's K columns of the sum), any
     *    layout and op; b K x N; c is this rank's M/R rows of the sum, its
     *    ldc counting as for an M/R x N matrix. */
    tk_gemm_problem problem;
    void *gathered;              /* all-gather: bf16, M x K, row i of op(A_all) at gathered + i * K (device
                                  * memory of this device), filled by the call; NULL: a workspace of d */
    int32_t chunks;              /* chunks per rank's block: 0 = $TK_DIST_CHUNKS, else planned (tk_dist_plan) */
    int32_t partial_type;        /* reduce-scatter: tk_dtype of the exchanged partial products: TK_F32
                                  * (0, the default) or TK_BF16 (half the bytes; rounded once more) */
    int32_t check_shapes;        /* 1: compare shapes and chunk counts across ranks first (the host waits) */
    int32_t reserved;            /* 0 */
    const char *kernel;          /* the tk_gemm kernel of every chunk; NULL: auto-dispatch */
    /* later versions append here */
} tk_dist_desc;

#define TK_DIST_DESC_INIT { .size = sizeof(tk_dist_desc) }

/* The operations (above). M or N == 0 with no gathered buffer: no-op.
 * K == 0 gives C = beta * C. All ranks call with the same M, K (and, for
 * reduce-scatter, N), op, layout, C type, partial type and chunk count;
 * the all-gather's N and B may differ between ranks. gathered, A, B and C
 * may not overlap. */
tk_status tk_dist_all_gather_gemm(tk_dist d, const tk_dist_desc *desc, void *stream);
tk_status tk_dist_gemm_reduce_scatter(tk_dist d, const tk_dist_desc *desc, void *stream);

typedef enum tk_dist_op {
    TK_DIST_ALL_GATHER_GEMM = 1,
    TK_DIST_GEMM_REDUCE_SCATTER = 2,
} tk_dist_op;

/* What a call would do: the chunk count and where it came from, and the
 * model behind the plan. The model: per chunk, a GEMM of the chunk's rows
 * (tk_candidates' estimate for the whole local product, by rows rounded up
 * to 128, plus a launch) and an NCCL transfer of its bytes over the link
 * estimate (plus a fixed cost per transfer); the pipeline of the operation
 * replayed for 1..16 chunks (no chunk under 128 rows), the fastest kept
 * (the fewer chunks on a tie). */
typedef struct tk_dist_plan_info {
    size_t size;                 /* sizeof(tk_dist_plan_info) where the caller was compiled */
    int chunks;                  /* chunks per rank's block the call would use */
    int chunks_from;             /* 0: planned, 1: desc->chunks, 2: $TK_DIST_CHUNKS */
    int64_t block_rows;          /* M / R */
    double link_gbps;            /* the link estimate used, GB/s each way */
    double gemm_us;              /* the local product at once (no chunks), the model's estimate */
    double comm_us;              /* the bytes this rank receives, over the link, in one transfer */
    double sequential_us;        /* the model: the exchange, then the product (or the product, then it) */
    double overlapped_us;        /* the model at `chunks` */
    size_t workspace_bytes;      /* device memory the call needs in d's workspace */
    /* version 2 (the copy-engine transport) */
    int transport;               /* TK_DIST_TRANSPORT_P2P or TK_DIST_TRANSPORT_CE: the one the call would use */
    char transport_why[96];      /* why that one (where CE is not set up yet: a forecast, see tk_dist_set_transport) */
    size_t window_bytes;         /* CE: the windows' device memory the call needs (apart from workspace_bytes) */
} tk_dist_plan_info;

#define TK_DIST_PLAN_INFO_INIT { .size = sizeof(tk_dist_plan_info) }

/* Fills *out for op and desc as the call would run them (the same checks;
 * nothing enqueued, no communication). */
tk_status tk_dist_plan(tk_dist d, tk_dist_op op, const tk_dist_desc *desc, tk_dist_plan_info *out);

/* Settings of d (each rank should set the same):
 * - the link estimate for planning, GB/s each way per rank (0: the default:
 *   $TK_DIST_LINK_GBPS, else 300 on sm_90 and newer, 200 on sm_80, 16 on
 *   other GPUs, a PCIe guess);
 * - the SMs left to communication: d's handle gets tk_set_sm_count(device
 *   SMs - sms) (0, the default: $TK_DIST_COMM_SMS, else none: the GEMMs
 *   take every SM). Give NCCL no more than that (ncclConfig_t's maxCTAs
 *   or NCCL_MAX_CTAS);
 * - the timeout of the host waits (check_shapes, tk_dist_destroy), ms (0:
 *   the default, 60000). */
tk_status tk_dist_set_link_gbps(tk_dist d, double gbps);
tk_status tk_dist_set_comm_sms(tk_dist d, int sms);
tk_status tk_dist_set_timeout(tk_dist d, int timeout_ms);

/* How the rows move between the GPUs (the top of this file). Every rank
 * must set the same, as with the chunk count: check_shapes compares the
 * transport asked, and ranks that ask for different ones hang or fail.
 * - P2P: grouped ncclSend/ncclRecv on d's stream, chunk by chunk: NCCL's
 *   kernels, which need SMs that the GEMMs' persistent grids hold.
 * - CE: the copy engines (NCCL 2.28 and newer, one node with P2P and
 *   cuMem, libtilekit_dist built with nccl_device.h): per chunk one
 *   cudaMemcpyAsync per peer between windows registered symmetric
 *   (ncclMemAlloc'd device memory that d holds, grown to the largest call,
 *   in 32 MiB steps; the peers' windows addressed through NCCL's device
 *   API), the ranks meeting at one-word ncclAllReduces on a communicator
 *   split from d's with one CTA a kernel; the call's GEMMs leave one SM to
 *   those (unless tk_dist_set_comm_sms set more aside). The copies take
 *   no SM, so they run beside the GEMMs.
 * - AUTO (0, the default): CE where the NCCL loaded has its functions and
 *   its set-up succeeded on every rank, else P2P.
 * Without a call to this, $TK_DIST_TRANSPORT (auto, p2p or ce; another
 * value: TK_ERR_INVALID_VALUE at each call) else AUTO. CE is set up at the
 * first call that may use it: a collective (every rank reaches it, as
 * every rank makes the same calls) that ends with the ranks agreeing
 * (small all-gathers on comm, host waits of at most d's timeout), so that
 * a set-up failing on one rank makes every rank fall back (AUTO) or
 * refuse (CE) alike. Growing a window waits on the host for d's last call
 * and agrees again. CE asked where it cannot be had: TK_ERR_NOT_SUPPORTED
 * naming the missing function or the NCCL call that failed (here, for a
 * missing function; else at the call). The results have the same bits
 * with either transport (the same GEMMs, the same fixed-order sum). */
typedef enum tk_dist_transport {
    TK_DIST_TRANSPORT_AUTO = 0,
    TK_DIST_TRANSPORT_P2P = 1,
    TK_DIST_TRANSPORT_CE = 2,
} tk_dist_transport;

tk_status tk_dist_set_transport(tk_dist d, tk_dist_transport t);

/* Waits on the host, up to timeout_ms (0: d's timeout), for d's last call
 * to complete on the GPU, polling NCCL for an asynchronous error meanwhile:
 * TK_SUCCESS, or TK_ERR_COMM (NCCL's error, or the timeout: the message
 * says which; the communicator should then be aborted, ncclCommAbort or
 * tk_dist_comm_abort), or TK_ERR_CUDA. */
tk_status tk_dist_sync(tk_dist d, int timeout_ms);

typedef struct tk_dist_info {
    size_t size;                 /* sizeof(tk_dist_info) where the caller was compiled */
    int rank, nranks, device;
    int nccl_version;            /* ncclGetVersion of the NCCL loaded: 22803 for 2.28.3 */
    double link_gbps;            /* the link estimate in force */
    int comm_sms;                /* SMs left to communication */
    int gemm_sms;                /* SMs d's GEMMs may fill */
    int last_chunks;             /* the chunk count of the last call; 0 before one */
    size_t workspace_bytes;      /* device memory d holds */
} tk_dist_info;

#define TK_DIST_INFO_INIT { .size = sizeof(tk_dist_info) }

tk_status tk_dist_get_info(tk_dist d, tk_dist_info *out);

/* ---- communicators, for callers without nccl.h (Python, the tests) ----
 * Through the NCCL the library loaded. A unique id is NCCL's 128 bytes:
 * made by one rank, given to the others by any means, then every rank
 * calls tk_dist_comm_init with its rank on its own device (current).
 * tk_dist_comm_init blocks until every rank has joined (NCCL's
 * ncclCommInitRank). TK_ERR_COMM with NCCL's words on a failure. */
#define TK_DIST_UNIQUE_ID_BYTES 128
tk_status tk_dist_unique_id(void *id);
tk_status tk_dist_comm_init(struct ncclComm **out, int nranks, const void *id, int rank);
tk_status tk_dist_comm_destroy(struct ncclComm *comm);
tk_status tk_dist_comm_abort(struct ncclComm *comm);

#ifdef __cplusplus
}
#endif
#endif /* TILEKIT_DIST_H */
