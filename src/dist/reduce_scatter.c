/* reduce_scatter.c - GEMM + reduce-scatter (row-parallel Linear).
 *
 * Two transports (tk_dist_set_transport): P2P, below, and CE (rs_ce: per
 * chunk one all-to-all on the copy engines between two windows, each
 * chunk summed as it lands). P2P: rank r computes, on the caller's
 * stream, the partial products of the rows the other ranks keep first, in
 * ring order (rank r+1's rows, then r+2's, ...), chunk by chunk, each into
 * the send area of the workspace with an event after it; then the
 * partial of its own rows. On the communication stream, each chunk waits
 * for its event and goes out with one grouped ncclSend (to r+j) /
 * ncclRecv (from r-j) as soon as it is computed, so the transfer of chunk
 * i overlaps the GEMM of chunk i + 1.
 * Once every partial has arrived, one kernel (sum.cu) adds the R partials
 * of each element in rank order 0..R-1 in fp32 and rounds once to C's
 * type, with alpha and beta: the result does not depend on the chunk count
 * or on the arrival order.
 *
 * The partial products are row-major (rows x N, fp32 or bf16 as
 * partial_type says) whatever the caller's layout: a column-major operand
 * is read as the row-major transpose (its op flipped), so each chunk's
 * partial is one contiguous run of bytes to send. Workspace: R-1 blocks
 * to send, R-1 received, the own block: (2R - 1) x M/R x N partials (CE:
 * the own block; the rest in its windows). */
#include <stdio.h>
#include <string.h>
#include "dist.h"

static tk_op flip(tk_op o) { return o == TK_OP_N ? TK_OP_T : TK_OP_N; }

/* The row-major partial product of rows row0 .. row0 + rows - 1 of op(A)
 * into P (rows x N, leading dimension N, type pt). */
static tk_gemm_problem part_problem(const tk_gemm_problem *pb, int64_t row0, int64_t rows, void *P, tk_dtype pt)
{
    const int col = pb->layout == TK_COL_MAJOR;
    const tk_op oa = col ? flip(pb->op_a) : pb->op_a, ob = col ? flip(pb->op_b) : pb->op_b;
    /* row i of op(A) in the row-major reading: row i of A (op N) or column i (op T) */
    const char *a = pb->a ? (const char *)pb->a + (size_t)(oa == TK_OP_N ? row0 * pb->lda : row0) * 2 : NULL;
    tk_gemm_problem q = { TK_ROW_MAJOR, oa, ob, rows, pb->n, pb->k, 1.0f, 0.0f, a, pb->lda, pb->b, pb->ldb,
                          P, pb->n > 0 ? pb->n : 1, pt };
    return q;
}

/* Would every GEMM of the call take `kernel` (NULL: auto-dispatch)? The
 * own block, then one chunk per distinct row count. */
static tk_status check_chunks(tk_dist d, const tkd_prep *p, const char *kernel)
{
    const tk_gemm_problem *pb = &p->desc.problem;
    const int R = d->nranks, r = d->rank;
    const int64_t mb = p->block_rows;
    const tk_dtype pt = (tk_dtype)p->desc.partial_type;
    tk_gemm_problem q = part_problem(pb, (int64_t)r * mb, mb, NULL, pt);
    tk_status st = tkd_preflight(d, &q, kernel, "the own rows' partial product");
    for (int i = 0; i < p->chunks && !st; i++) {
        const int64_t rows = p->bounds[i + 1] - p->bounds[i];
        if (i > 0 && rows == p->bounds[i] - p->bounds[i - 1])
            continue;
        q = part_problem(pb, (int64_t)((r + 1) % R) * mb + p->bounds[i], rows, NULL, pt);
        st = tkd_preflight(d, &q, kernel, "a chunk's partial product");
    }
    return st;
}

/* C's rows row0.. of this rank's block (rows x N, the caller's layout). */
static void *c_rows(const tk_gemm_problem *pb, int64_t row0)
{
    const size_t cs = pb->c_type == TK_BF16 ? 2 : 4;
    return (char *)pb->c + (size_t)(pb->layout == TK_ROW_MAJOR ? row0 * pb->ldc : row0) * cs;
}

/* The P2P transport: ring-ordered blocks in the workspace (send, receive,
 * own), grouped ncclSend/ncclRecv per chunk, one sum at the end. A failed
 * GEMM is *gst; the exchange is enqueued whole whatever it. */
static tk_status rs_p2p(tk_dist d, const tkd_prep *p, const char *kernel, cudaStream_t stream, tk_status *gst)
{
    const tk_gemm_problem *pb = &p->desc.problem;
    const int R = d->nranks, r = d->rank, c = p->chunks;
    const int64_t mb = p->block_rows, N = pb->n;
    const tk_dtype pt = (tk_dtype)p->desc.partial_type;
    const size_t psize = pt == TK_BF16 ? 2 : 4;
    const size_t blk = (size_t)mb * (size_t)N * psize, row_bytes = (size_t)N * psize;
    char *send = (char *)d->ws, *recv = send + (size_t)(R - 1) * blk, *own = recv + (size_t)(R - 1) * blk;
    tk_gemm_problem q;
    tk_status st;
    cudaError_t e;

    /* the peers' partials, chunk by chunk, each followed by its event. A
     * failed GEMM still records the events, so that the exchange (which
     * the peers wait on) completes; the call then returns the failure. */
    for (int j = 1; j < R; j++) {
        const int dest = (r + j) % R;
        for (int i = 0; i < c; i++) {
            const int64_t b0 = p->bounds[i], rows = p->bounds[i + 1] - b0;
            q = part_problem(pb, (int64_t)dest * mb + b0, rows, send + (size_t)(j - 1) * blk + (size_t)b0 * row_bytes,
                             pt);
            if (!*gst && (st = tk_gemm_ex(d->h, &q, kernel, stream)))
                *gst = tkd_fail(d, st, "the partial product for rank %d: %s", dest, tk_last_error(d->h));
            if ((e = cudaEventRecord(d->ev[(j - 1) * c + i], stream)))
                return tkd_cuda_fail(d, e, "cudaEventRecord (a chunk's partial)");
        }
    }
    /* the exchange, on cs: chunk (j, i) once computed */
    for (int j = 1; j < R; j++) {
        const int to = (r + j) % R, from = (r - j + R) % R;
        for (int i = 0; i < c; i++) {
            const int64_t b0 = p->bounds[i], rows = p->bounds[i + 1] - b0;
            const size_t off = (size_t)(j - 1) * blk + (size_t)b0 * row_bytes, bytes = (size_t)rows * row_bytes;
            if ((e = cudaStreamWaitEvent(d->cs, d->ev[(j - 1) * c + i], 0)))
                return tkd_cuda_fail(d, e, "cudaStreamWaitEvent (a chunk's partial)");
            if ((st = tkd_p2p_chunk(d, send + off, to, recv + off, from, bytes,
                                    "ncclSend/ncclRecv (a chunk of the reduce-scatter)")))
                return st;
        }
    }
    if ((e = cudaEventRecord(d->cs_end, d->cs)))
        return tkd_cuda_fail(d, e, "cudaEventRecord (the exchange's end)");
    /* the own rows' partial meanwhile, then the sum once everything has arrived */
    q = part_problem(pb, (int64_t)r * mb, mb, own, pt);
    if (!*gst && (st = tk_gemm_ex(d->h, &q, kernel, stream)))
        *gst = tkd_fail(d, st, "the own rows' partial product: %s", tk_last_error(d->h));
    if ((e = cudaStreamWaitEvent(stream, d->cs_end, 0)))
        return tkd_cuda_fail(d, e, "ordering the caller's stream after the exchange");
    if (!*gst) {
        tkd_sum_args sa = { .own = own, .recv = recv, .rank = r, .nranks = R, .rows = mb, .n = N,
                            .partial_type = pt, .c = pb->c, .ldc = pb->ldc, .layout = pb->layout,
                            .c_type = pb->c_type, .alpha = pb->alpha, .beta = pb->beta };
        if ((e = tkd_launch_sum(&sa, stream)))
            *gst = tkd_cuda_fail(d, e, "the sum of the partial products (launch)");
    }
    return TK_SUCCESS;
}

/* The CE transport: windows S (0) and V (1), chunk-major (transport.c):
 * region i = R slots of chunk i's rows x N partials, slot j for rank j's
 * rows, the same offsets on every rank. On cs first a barrier (every rank
 * has summed the last call's V). On the caller's stream, per chunk, the
 * partials of every peer's rows (ring order) into S's region, then its
 * event; on cs, per chunk once computed, one cudaMemcpyAsync per peer from
 * S's slot for it into slot r of the peer's V (its address here: peers.cu;
 * the copy engines, no SM, beside the next GEMM), then a second barrier
 * (every rank's partials have landed), then the arrival events. The
 * barriers are one-word all-reduces on the split communicator (one CTA;
 * the GEMMs leave it an SM: tkd_run). The own rows' partial goes to the
 * workspace, then each chunk is summed (its rows of C): the same partials
 * and the same fixed-order sum per element as P2P's, so the same bits. */
static tk_status rs_ce(tk_dist d, const tkd_prep *p, const char *kernel, cudaStream_t stream, tk_status *gst)
{
    const tk_gemm_problem *pb = &p->desc.problem;
    const int R = d->nranks, r = d->rank, c = p->chunks;
    const int64_t mb = p->block_rows, N = pb->n;
    const tk_dtype pt = (tk_dtype)p->desc.partial_type;
    const size_t row_bytes = (size_t)N * (pt == TK_BF16 ? 2 : 4);
    char *S = (char *)d->win_buf[0], *V = (char *)d->win_buf[1], *own = (char *)d->ws;
    tk_gemm_problem q;
    tk_status st;
    cudaError_t e;

    if ((st = tkd_barrier(d, "the reduce-scatter (copy engines): every rank's receiving window free")))
        return st;
    /* As P2P, a failed GEMM still records the events. */
    for (int i = 0; i < c; i++) {
        const int64_t b0 = p->bounds[i], rows = p->bounds[i + 1] - b0;
        for (int j = 1; j < R; j++) {
            const int dest = (r + j) % R;
            q = part_problem(pb, (int64_t)dest * mb + b0, rows, S + tkd_ce_slot(p->bounds, R, i, dest, row_bytes), pt);
            if (!*gst && (st = tk_gemm_ex(d->h, &q, kernel, stream)))
                *gst = tkd_fail(d, st, "the partial product for rank %d: %s", dest, tk_last_error(d->h));
        }
        if ((e = cudaEventRecord(d->ev[i], stream)))
            return tkd_cuda_fail(d, e, "cudaEventRecord (a chunk's partials)");
    }
    for (int i = 0; i < c; i++) {
        const int64_t rows = p->bounds[i + 1] - p->bounds[i];
        if ((e = cudaStreamWaitEvent(d->cs, d->ev[i], 0)))
            return tkd_cuda_fail(d, e, "cudaStreamWaitEvent (a chunk's partials)");
        for (int j = 1; j < R; j++) {
            const int dest = (r + j) % R;
            if ((e = cudaMemcpyAsync((char *)d->peer[1][dest] + tkd_ce_slot(p->bounds, R, i, r, row_bytes),
                                     S + tkd_ce_slot(p->bounds, R, i, dest, row_bytes), (size_t)rows * row_bytes,
                                     cudaMemcpyDefault, d->cs)))
                return tkd_cuda_fail(d, e, "cudaMemcpyAsync (a chunk's partial into its rank's window, copy engines)");
        }
    }
    if ((st = tkd_barrier(d, "the reduce-scatter (copy engines): every rank's partials landed")))
        return st;
    for (int i = 0; i < c; i++)
        if ((e = cudaEventRecord(d->ev[c + i], d->cs)))
            return tkd_cuda_fail(d, e, "cudaEventRecord (a chunk's arrival)");
    if ((e = cudaEventRecord(d->cs_end, d->cs)))
        return tkd_cuda_fail(d, e, "cudaEventRecord (the exchange's end)");
    q = part_problem(pb, (int64_t)r * mb, mb, own, pt);
    if (!*gst && (st = tk_gemm_ex(d->h, &q, kernel, stream)))
        *gst = tkd_fail(d, st, "the own rows' partial product: %s", tk_last_error(d->h));
    for (int i = 0; i < c; i++) {
        const int64_t b0 = p->bounds[i], rows = p->bounds[i + 1] - b0;
        if ((e = cudaStreamWaitEvent(stream, d->ev[c + i], 0)))
            return tkd_cuda_fail(d, e, "cudaStreamWaitEvent (a chunk's arrival)");
        tkd_sum_args sa = { .own = own + (size_t)b0 * row_bytes, .recv = V + tkd_ce_slot(p->bounds, R, i, 0, row_bytes),
                            .rank = r, .nranks = R, .by_source = 1, .rows = rows, .n = N, .partial_type = pt,
                            .c = c_rows(pb, b0), .ldc = pb->ldc, .layout = pb->layout, .c_type = pb->c_type,
                            .alpha = pb->alpha, .beta = pb->beta };
        if (!*gst && (e = tkd_launch_sum(&sa, stream)))
            *gst = tkd_cuda_fail(d, e, "the sum of a chunk's partial products (launch)");
    }
    return TK_SUCCESS;
}

tk_status tk_dist_gemm_reduce_scatter(tk_dist d, const tk_dist_desc *desc, void *stream_)
{
    tkd_prep p;
    tk_status st = tkd_prepare(d, TK_DIST_GEMM_REDUCE_SCATTER, desc, stream_, 0, &p);
    if (st || p.noop)
        return st;
    cudaStream_t stream = (cudaStream_t)stream_;
    const tk_gemm_problem *pb = &p.desc.problem;
    const int64_t mb = p.block_rows, N = pb->n;
    const tk_dtype pt = (tk_dtype)p.desc.partial_type;
    const size_t csize = pb->c_type == TK_BF16 ? 2 : 4;

    /* C: this rank's M/R x N rows (the sum kernel writes it; tk_gemm_ex never sees it) */
    const int64_t ldc_min = pb->layout == TK_ROW_MAJOR ? N : mb;
    if (!pb->c)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "problem.c: NULL (this rank's %lld x %lld rows of the sum)",
                        (long long)mb, (long long)N);
    if ((uintptr_t)pb->c % csize)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "problem.c: %p is not %zu-byte aligned (C's type)", pb->c, csize);
    if (pb->ldc < (ldc_min > 0 ? ldc_min : 1))
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "problem.ldc: %lld is less than %lld (C here is this rank's %lld x "
                        "%lld rows, %s)", (long long)pb->ldc, (long long)(ldc_min > 0 ? ldc_min : 1), (long long)mb,
                        (long long)N, pb->layout == TK_ROW_MAJOR ? "row-major" : "column-major");

    /* One kernel for every chunk: the one the whole local product (all M
     * rows, into partials) would run, unless a chunk refuses it; then every
     * chunk's GEMM checked (one per distinct row count, and the own block) */
    tk_gemm_problem q = part_problem(pb, 0, pb->m, NULL, pt);
    const char *kernel = tkd_whole_kernel(d, &q, p.desc.kernel);
    if (kernel != p.desc.kernel && check_chunks(d, &p, kernel)) {
        tkd_begin(d);
        kernel = p.desc.kernel;
    }
    if ((st = check_chunks(d, &p, kernel)))
        return st;
    return tkd_run(d, &p, kernel, stream, rs_p2p, rs_ce);
}
