/* dist.h - internals of libtilekit_dist (tilekit_dist.h): the NCCL table,
 * the context, the pure planning and argument checks (CPU-tested by
 * tests/host/test_dist.c), and the fixed-order sum kernel's launch. */
#ifndef TK_DIST_INTERNAL_H
#define TK_DIST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include "tilekit_dist.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TKD_ERR_LEN 2048
#define TKD_MAX_CHUNKS 16       /* the planner's most chunks per block; desc->chunks may ask up to 64 */
#define TKD_MAX_CHUNKS_ASKED 64
#define TKD_CHUNK_ROWS 128      /* the planner's least rows per chunk: one tile's height */
#define TKD_DEFAULT_TIMEOUT_MS 60000

/* ---- NCCL, loaded at run time (nccl_load.c) ----
 * The functions the library and its tests call, resolved from one dlopen.
 * ncclGetLastError and the copy-engine transport's six are optional (NULL
 * where the NCCL loaded predates them). Those six are typed here without
 * the types of NCCL 2.27/2.28 (ncclConfig_t *, ncclWindow_t: pointers), so
 * that the table compiles against an older nccl.h too. */
typedef struct tkd_nccl {
    void *lib;
    ncclResult_t (*GetVersion)(int *);
    const char *(*GetErrorString)(ncclResult_t);
    const char *(*GetLastError)(ncclComm_t);
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*CommCount)(const ncclComm_t, int *);
    ncclResult_t (*CommCuDevice)(const ncclComm_t, int *);
    ncclResult_t (*CommUserRank)(const ncclComm_t, int *);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*ReduceScatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                  cudaStream_t);
    ncclResult_t (*AllReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
    /* optional: the copy-engine transport (tkd_ce_missing) */
    ncclResult_t (*CommSplit)(ncclComm_t, int, int, ncclComm_t *, void *config);
    ncclResult_t (*MemAlloc)(void **, size_t);
    ncclResult_t (*MemFree)(void *);
    ncclResult_t (*CommWindowRegister)(ncclComm_t, void *, size_t, void **win, int);
    ncclResult_t (*CommWindowDeregister)(ncclComm_t, void *win);
} tkd_nccl;

/* The name of the first function of the copy-engine transport that t
 * lacks ("ncclCommSplit", ...), or NULL where it has all five. */
const char *tkd_ce_missing(const tkd_nccl *t);

/* Opens `file` (dlopen, RTLD_NOW | RTLD_GLOBAL) and resolves the table.
 * 0, or -1 with why (which file or symbol, dlerror's words) and t cleared. */
int tkd_nccl_open(const char *file, tkd_nccl *t, char *why, size_t len);

/* The process's table, opened once ($TK_DIST_NCCL_LIB, else
 * "libnccl.so.2"): NULL with why when that failed (and it is not tried
 * again: the first answer stays). */
const tkd_nccl *tkd_nccl_get(char *why, size_t len);

/* ---- the chunk plan (plan.c): pure ---- */
typedef struct tkd_plan_in {
    tk_dist_op op;
    int nranks;
    int64_t block_rows;          /* M / R */
    double row_bytes;            /* bytes one row of a block moves (all-gather: K bf16; reduce-scatter: N partials) */
    double seq_row_bytes;        /* the same for the sequential baseline's collective (0: row_bytes) */
    double link_bytes_per_us;    /* the link estimate */
    double gemm_us;              /* the whole local product (all M rows) */
    int64_t m;                   /* its rows, for per-row time */
    double sum_us;               /* reduce-scatter: the sum kernel (same for every chunk count) */
    double gemm_launch_us;       /* per GEMM call */
    double comm_launch_us;       /* per NCCL transfer */
} tkd_plan_in;

/* The model's time of the operation with `chunks` chunks per block, us. */
double tkd_plan_time(const tkd_plan_in *in, int chunks);
/* The model's time of the sequential baseline (one exchange, one product). */
double tkd_plan_sequential(const tkd_plan_in *in);
/* The fastest chunk count of 1..TKD_MAX_CHUNKS with no chunk under
 * TKD_CHUNK_ROWS rows (1 where the block is smaller), the fewer on a tie
 * (within 1%); *est its time. */
int tkd_plan_chunks(const tkd_plan_in *in, double *est);

/* Where the chunks of a block of `rows` rows split: bounds[0] = 0 <
 * bounds[1] < ... < bounds[n] = rows, each inner bound i * rows / chunks
 * rounded down to a multiple of TKD_CHUNK_ROWS where every chunk keeps at
 * least that many rows, else to a multiple of 8 where chunks keep 8, else
 * unrounded; empty chunks dropped. Returns n (1..chunks; 0 for rows 0).
 * bounds has room for chunks + 1. */
int tkd_chunk_bounds(int64_t rows, int chunks, int64_t *bounds);

/* The chunk count of a call: desc's (1), else $TK_DIST_CHUNKS's (2), else
 * `planned` (0); *from says which. env is the variable's value (NULL:
 * unset). -1 with why for a bad value (not an integer 1..64). */
int tkd_chunks_choose(int32_t asked, const char *env, int planned, int *from, char *why, size_t len);

/* ---- argument checks (check.c): pure ---- */
typedef struct tkd_call {
    tk_dist_op op;
    int rank, nranks;
    int comm_device;             /* ncclCommCuDevice */
    int device;                  /* the context's (current at create) */
    int current_device;          /* cudaGetDevice now */
    int stream_device;           /* the stream's device; -1: unknown */
    const tk_dist_desc *desc;    /* read by the versioned rule already */
    int transport;               /* the transport asked (tk_dist_transport; AUTO resolves alike on every rank) */
} tkd_call;

/* Checks what the library can check without the GPU and before any
 * communication: the ranks, devices, desc's fields, M divisible by R, the
 * row layout the all-gather needs, partial_type, chunks. The problem's own
 * checks (pointers, leading dimensions) are tk_gemm_ex's, asked before
 * anything is enqueued (tk_kernel_supports on each chunk's problem).
 * TK_SUCCESS or the refusal with why naming the field. */
tk_status tkd_check_call(const tkd_call *c, char *why, size_t len);

/* The shape signature every rank must share (check_shapes): op, layout,
 * ops, M, K, N (reduce-scatter; -1 for all-gather), C's type, partial
 * type, chunks, the transport asked. */
#define TKD_SIG_WORDS 11
void tkd_signature(const tkd_call *c, int chunks, int64_t sig[TKD_SIG_WORDS]);
/* Compares the R signatures all (R x TKD_SIG_WORDS) against rank `self`'s:
 * 0, or 1 with why naming the first rank and field that differ. */
int tkd_signature_compare(const int64_t *all, int nranks, int self, char *why, size_t len);

/* ---- the transport (transport.c): pure ---- */
#define TKD_CE_GRAIN ((size_t)32 << 20)   /* windows are sized in multiples of 32 MiB */

/* "auto", "p2p", "ce"; "?" for another value. */
const char *tkd_transport_name(int t);
/* The transport a call asks for: d's setting (>= 0; *from 1), else $TK_DIST_TRANSPORT's
 * value env (auto, p2p or ce; *from 2), else AUTO (*from 0). -1 with why for a bad value. */
int tkd_transport_choose(int setting, const char *env, int *from, char *why, size_t len);

/* The copy-engine transport's windows are chunk-major: region i (chunk i,
 * rows_i = bounds[i+1] - bounds[i]) holds R slots of rows_i rows, slot j
 * for rank j (all-gather: rank j's rows of chunk i; reduce-scatter: the
 * partials of rank j's rows), so that each chunk is one collective over one
 * contiguous region at the same offset on every rank. The byte offset of
 * slot j of region i for rows of row_bytes: */
size_t tkd_ce_slot(const int64_t *bounds, int nranks, int i, int j, size_t row_bytes);
/* A window's size for a block of block_rows rows a rank: R x block_rows x
 * row_bytes rounded up to TKD_CE_GRAIN (0 for none), so that ranks with
 * the same shapes grow their windows alike. */
size_t tkd_ce_window_bytes(int nranks, int64_t block_rows, size_t row_bytes);

/* ---- the fixed-order sum (sum.cu) ----
 * out (rows x n, layout, ldc, c_type) = alpha * sum_{s = 0..R-1} P_s +
 * beta * out, where P_s is `own` for s == rank and otherwise, row-major
 * rows x n blocks of partial_type, recv + ((rank - s + R) % R - 1) * rows *
 * n (the P2P transport's ring order) or, with by_source, recv + s * rows *
 * n (a region of the copy-engine transport's window).
 * Summed in fp32 in the order s = 0, 1, ..., R-1, then tk_gemm's epilogue
 * (alpha, beta read only when not 0, one rounding). */
typedef struct tkd_sum_args {
    const void *own, *recv;
    int rank, nranks;
    int by_source;               /* 1: P_s at recv + s * rows * n; 0: in ring order */
    int64_t rows, n;
    tk_dtype partial_type;
    void *c;
    int64_t ldc;
    tk_layout layout;
    tk_dtype c_type;
    float alpha, beta;
} tkd_sum_args;

cudaError_t tkd_launch_sum(const tkd_sum_args *a, cudaStream_t stream);

/* SMs the copy-engine transport's GEMMs leave to its barriers (tkd_run) */
#define TKD_CE_SMS 1

/* ---- the context ---- */
struct tk_dist_s {
    const tkd_nccl *nccl;
    ncclComm_t comm;
    int rank, nranks, device, sm, sm_count;
    double hbm_bytes_per_us;     /* DRAM bandwidth, for the sum kernel's estimate */
    tk_handle h;
    cudaStream_t cs;             /* the communication stream (greatest priority) */
    cudaEvent_t start;           /* on the caller's stream where a call begins */
    cudaEvent_t cs_end;          /* on cs where a call's exchange ends */
    cudaEvent_t end;             /* on the caller's stream where a call ends */
    int end_recorded;
    cudaEvent_t *ev;             /* one per chunk of a call */
    int nev;
    void *ws;                    /* the workspace (cudaMallocAsync), ws_bytes */
    size_t ws_bytes;
    int64_t *sig_dev;            /* check_shapes and the CE set-up's agreements: R x TKD_SIG_WORDS words, device */
    double link_gbps;            /* 0: the default */
    int comm_sms, timeout_ms, last_chunks;
    /* the copy-engine transport (ce.c) */
    int transport;               /* tk_dist_set_transport's; -1: not set ($TK_DIST_TRANSPORT, else AUTO) */
    int ce_state;                /* 0: not set up yet; 1: ready; -1: unavailable on this context (ce_why) */
    char ce_why[512];
    ncclComm_t ce_comm;          /* split from comm, one CTA a kernel: the barriers, the windows */
    void *win_buf[2];            /* ncclMemAlloc'd, registered symmetric as win[i], win_bytes[i] each */
    void *win[2];                /* ncclWindow_t */
    size_t win_bytes[2];
    void **peer[2];              /* peer[i][j]: rank j's part of win[i] in this process (cudaMemcpyAsync's) */
    char err[TKD_ERR_LEN];
};

/* Records a failure on d (may be NULL) and on the calling thread; returns st. */
tk_status tkd_fail(tk_dist d, tk_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Clears d's message at the start of a call. */
void tkd_begin(tk_dist d);
/* TK_ERR_COMM for a failed NCCL call r of `what`, with NCCL's words. */
tk_status tkd_nccl_fail(tk_dist d, ncclResult_t r, const char *what);
/* TK_ERR_CUDA for a failed CUDA call e of `what`. */
tk_status tkd_cuda_fail(tk_dist d, cudaError_t e, const char *what);
/* The link estimate in force, GB/s: d's setting, $TK_DIST_LINK_GBPS, or by SM version. */
double tkd_link_gbps(const tk_dist d);
/* The default link estimate for a GPU of compute capability sm (10 * major + minor). */
double tkd_default_link_gbps(int sm);

/* Polls ev until it completes, NCCL reports an error on d's communicator,
 * or timeout_ms pass (then TK_ERR_COMM naming `what`). */
tk_status tkd_wait_event(tk_dist d, cudaEvent_t ev, int timeout_ms, const char *what);
/* Every rank's `words` int64 (mine) into all (R x words, rank order): one
 * ncclAllGather on comm and cs, waited for on the host (d's timeout).
 * words <= TKD_SIG_WORDS. */
tk_status tkd_allgather_words(tk_dist d, const int64_t *mine, int words, int64_t *all, const char *what);

/* Reads a caller's desc by the versioned rule into *out (zeros past its size). */
tk_status tkd_read_desc(tk_dist d, const tk_dist_desc *in, tk_dist_desc *out);

/* A call's preparation, shared by both operations and tk_dist_plan: the
 * checks, the chunk count and bounds, and the model (its GEMM estimate,
 * tk_candidates, asked only where the chunks are planned or `model`). */
typedef struct tkd_prep {
    tk_dist_desc desc;
    tkd_call call;
    int64_t block_rows;
    int chunks, chunks_from;
    int64_t bounds[TKD_MAX_CHUNKS_ASKED + 1];
    tkd_plan_in model;
    double est_us;
    size_t ws_bytes;             /* the P2P transport's workspace */
    int transport_from;          /* the transport asked (call.transport) came from: 0 default, 1 d, 2 $TK_DIST_TRANSPORT */
    size_t ce_ws_bytes;          /* the CE transport's workspace */
    size_t win_need[2];          /* the CE transport's windows */
    int noop;
} tkd_prep;

tk_status tkd_prepare(tk_dist d, tk_dist_op op, const tk_dist_desc *desc, void *stream, int model, tkd_prep *p);

/* Makes the caller's stream wait for d's previous call, gets a workspace of
 * at least `bytes`, records d->start on it and makes cs wait for it; events
 * for `nev` chunks. */
tk_status tkd_call_begin(tk_dist d, cudaStream_t stream, size_t bytes, int nev);
/* Before anything is enqueued: would tk_gemm_ex (kernel; NULL or "auto":
 * auto-dispatch) take this chunk's problem q on d's handle? `what` names
 * the chunk in the refusal. */
tk_status tkd_preflight(tk_dist d, const tk_gemm_problem *q, const char *kernel, const char *what);
/* The kernel of every chunk of a call: `asked` where it names one, else
 * the one auto-dispatch picks for `whole` (the local product of all M
 * rows), so that each chunk runs the kernel, tile and bits the whole
 * product would instead of auto-dispatch's pick for its own height; NULL
 * (auto-dispatch chunk by chunk) where none is picked. */
const char *tkd_whole_kernel(tk_dist d, const tk_gemm_problem *whole, const char *asked);
/* One transport's enqueueing of a call (the operations' *_p2p, *_ce): a
 * failure to enqueue returned (the call then ends there), a GEMM's failure
 * in *gst (the exchange enqueued whole all the same). */
typedef tk_status (*tkd_path)(tk_dist d, const tkd_prep *p, const char *kernel, cudaStream_t stream, tk_status *gst);
/* The rest of a call once its arguments and GEMMs passed: check_shapes
 * (where asked), the transport (tkd_transport_for), tkd_call_begin with
 * its workspace and events, the path, then the end: the caller's stream
 * waits for the exchange, d->end recorded. */
tk_status tkd_run(tk_dist d, const tkd_prep *p, const char *kernel, cudaStream_t stream, tkd_path p2p, tkd_path ce);
/* The exchange of check_shapes on cs, waited for on the host. */
tk_status tkd_check_shapes(tk_dist d, const tkd_prep *p, cudaStream_t stream);
/* Waits for NCCL's group to be done on a non-blocking communicator (r ==
 * ncclInProgress), up to d's timeout; other r returned as they are. */
ncclResult_t tkd_nccl_settle(tk_dist d, ncclResult_t r);
/* One chunk of a send/recv transport on cs: send bytes to rank `to` and
 * receive as many from `from` in one NCCL group. The group is closed even
 * where the send or the receive fails (an open group would queue every
 * later NCCL call of this thread, the abort's included); NCCL's error is
 * reported as "what: NCCL error ...". */
tk_status tkd_p2p_chunk(tk_dist d, const void *send, int to, void *recv, int from, size_t bytes, const char *what);

/* ---- the copy-engine transport's set-up (ce.c) ---- */
/* The transport a call runs (TK_DIST_TRANSPORT_P2P or _CE) for p's asked
 * one: where CE may be used, it is set up (once: collective) and its
 * windows grown to p->win_need (collective); AUTO where CE is unavailable
 * on this context: P2P; CE asked there: TK_ERR_NOT_SUPPORTED saying why.
 * TK_ERR_COMM where an agreement between the ranks failed (a timeout). */
tk_status tkd_transport_for(tk_dist d, const tkd_prep *p, int *t);
/* What tk_dist_plan reports, without communicating: the transport a call
 * would run and why; TK_ERR_NOT_SUPPORTED where CE is asked and known
 * unavailable. */
tk_status tkd_transport_predict(tk_dist d, const tkd_prep *p, int *t, char *why, size_t len);
/* Frees the windows and destroys the split communicator (d's last call done). */
void tkd_ce_release(tk_dist d);
/* The ranks are out of step (a wait timed out): a CE barrier may wait for
 * ever, and its kernel would keep ncclCommAbort(comm) from freeing
 * (cudaFree waits for the device). The split communicator is the
 * context's own: aborted (its kernels end), and the copy engines are gone
 * from this context (why recorded). 1 where there was one to abort. */
int tkd_ce_abort(tk_dist d, const char *why);
/* d->sig_dev allocated (R x TKD_SIG_WORDS words) where it is not yet. */
cudaError_t tkd_sig_words(tk_dist d);
/* Every rank reaches this point of cs before any goes on: a one-word
 * ncclAllReduce on the caller's communicator (an SM for a moment). */
tk_status tkd_barrier(tk_dist d, const char *what);
/* peers[j] = rank j's part of the symmetric window win (an ncclWindow_t)
 * in this process's address space (peers.cu); 0, else 1 with why. */
int tkd_window_peers(void *win, int nranks, void **peers, cudaStream_t stream, char *why, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* TK_DIST_INTERNAL_H */
