/* all_gather.c - all-gather + GEMM (column-parallel Linear).
 *
 * Rank r of R holds block r (M/R rows of op(A)), cut into chunks. Two
 * transports (tk_dist_set_transport): P2P, below, and CE (ag_ce: the
 * copy engines move each chunk of every rank at once). P2P: on the
 * communication stream cs, a ring: at step s = 1..R-1 rank r sends block
 * r-s+1 (its own at step 1, else the one it received at step s-1) to r+1
 * and receives block r-s from r-1, chunk by chunk, each chunk one grouped
 * ncclSend/ncclRecv, an event recorded after it. On the caller's stream:
 * the product of its own block first (one GEMM: nothing to wait for), then
 * each received chunk's rows as soon as its event says they landed. So
 * NCCL moves chunk i + 1 while the GEMM computes chunk i, and the GEMM is
 * idle only before the first chunk arrives (hidden behind the own block's
 * product where that is longer than one chunk's transfer). Received blocks
 * land in `gathered` (or the context's workspace); the own block is copied
 * there too when the caller asked for the gathered A (last, on cs: a copy
 * engine's work, no SM). */
#include <stdio.h>
#include <string.h>
#include "dist.h"

/* rows of width bytes from src (pitch spitch) to dst (pitch dpitch): one
 * plain copy where both are packed. A packed 2-D copy ran far slower on the
 * copy engines (16 MB beside a GEMM, 2 x H200: 108 us against 9.5 us; qkv
 * 8192 920 -> 884 us, 32768 3773 -> 3605; docs/NOTES.md session 33). */
static cudaError_t copy_rows(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows,
                             enum cudaMemcpyKind kind, cudaStream_t s)
{
    if (dpitch == width && spitch == width)
        return cudaMemcpyAsync(dst, src, width * rows, kind, s);
    return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, s);
}

/* The caller's problem restricted to rows row0 .. row0 + rows - 1 of op(A)
 * and C, op(A)'s first such row at a (leading dimension lda). */
static tk_gemm_problem rows_problem(const tk_gemm_problem *pb, const void *a, int64_t lda, int64_t row0,
                                    int64_t rows)
{
    tk_gemm_problem q = *pb;
    const size_t cs = pb->c_type == TK_BF16 ? 2 : 4;
    q.m = rows;
    q.a = a;
    q.lda = lda;
    if (pb->c)
        q.c = (char *)pb->c + (size_t)(pb->layout == TK_ROW_MAJOR ? row0 * pb->ldc : row0) * cs;
    return q;
}

/* Would every GEMM of the call take `kernel` (NULL: auto-dispatch)? One
 * check per distinct row count: the own block, then the received chunks
 * (their rows of `gathered`, NULL where it is the workspace). */
static tk_status check_chunks(tk_dist d, const tkd_prep *p, const char *kernel, const char *g0)
{
    const tk_gemm_problem *pb = &p->desc.problem;
    const int R = d->nranks, r = d->rank;
    const int64_t mb = p->block_rows, K = pb->k, ldg = K > 0 ? K : 1;
    const size_t row_bytes = (size_t)K * 2;
    tk_gemm_problem q = rows_problem(pb, pb->a, pb->lda, (int64_t)r * mb, mb);
    tk_status st = tkd_preflight(d, &q, kernel, "the own block's product");
    for (int i = 0; i < p->chunks && !st; i++) {
        int64_t rows = p->bounds[i + 1] - p->bounds[i];
        if (i > 0 && rows == p->bounds[i] - p->bounds[i - 1])
            continue;
        const int64_t row0 = (int64_t)((r + R - 1) % R) * mb + p->bounds[i];
        q = rows_problem(pb, g0 ? g0 + (size_t)row0 * row_bytes : NULL, ldg, row0, rows);
        st = tkd_preflight(d, &q, kernel, "a received chunk's product");
    }
    return st;
}

/* The P2P transport: the ring above, grouped ncclSend/ncclRecv per chunk
 * on cs, received rows in G (gathered, or the workspace). A failed GEMM is
 * *gst; the exchange is enqueued whole whatever it. */
static tk_status ag_p2p(tk_dist d, const tkd_prep *p, const char *kernel, cudaStream_t stream, tk_status *gst)
{
    const tk_gemm_problem *pb = &p->desc.problem;
    const int R = d->nranks, r = d->rank, c = p->chunks;
    const int64_t mb = p->block_rows, K = pb->k, ldg = K > 0 ? K : 1;
    const size_t row_bytes = (size_t)K * 2;
    char *G = p->desc.gathered ? (char *)p->desc.gathered : (char *)d->ws;
    const char *A = (const char *)pb->a;
    tk_status st;
    cudaError_t e;

    /* the exchange, on cs */
    const int next = (r + 1) % R, prev = (r - 1 + R) % R;
    const int contiguous = pb->lda == K;
    char *own_in_g = G + (size_t)r * mb * row_bytes;
    if (K > 0 && !contiguous && (R > 1 || p->desc.gathered) &&
        (e = cudaMemcpy2DAsync(own_in_g, row_bytes, A, (size_t)pb->lda * 2, row_bytes, (size_t)mb,
                               cudaMemcpyDeviceToDevice, d->cs)))
        return tkd_cuda_fail(d, e, "cudaMemcpy2DAsync (the own rows into the gathered A)");
    for (int s = 1; s < R && K > 0; s++) {
        const int sb = (r - s + 1 + R) % R, rb = (r - s + R) % R;
        for (int i = 0; i < c; i++) {
            const int64_t b0 = p->bounds[i], rows = p->bounds[i + 1] - b0;
            const char *src = s == 1 && contiguous ? A + (size_t)b0 * row_bytes
                                                   : G + ((size_t)sb * mb + b0) * row_bytes;
            char *dst = G + ((size_t)rb * mb + b0) * row_bytes;
            const size_t bytes = (size_t)rows * row_bytes;
            if ((st = tkd_p2p_chunk(d, src, next, dst, prev, bytes, "ncclSend/ncclRecv (a chunk of the all-gather)")))
                return st;
            if ((e = cudaEventRecord(d->ev[(s - 1) * c + i], d->cs)))
                return tkd_cuda_fail(d, e, "cudaEventRecord (a chunk's arrival)");
        }
    }
    if (K > 0 && contiguous && p->desc.gathered &&
        (e = cudaMemcpyAsync(own_in_g, A, (size_t)mb * row_bytes, cudaMemcpyDeviceToDevice, d->cs)))
        return tkd_cuda_fail(d, e, "cudaMemcpyAsync (the own rows into the gathered A)");
    if ((e = cudaEventRecord(d->cs_end, d->cs)))
        return tkd_cuda_fail(d, e, "cudaEventRecord (the exchange's end)");

    /* the products, on the caller's stream: own rows, then each chunk as it lands */
    if (pb->n > 0) {
        tk_gemm_problem q = rows_problem(pb, A, pb->lda, (int64_t)r * mb, mb);
        if ((st = tk_gemm_ex(d->h, &q, kernel, stream)))
            *gst = tkd_fail(d, st, "the own block's product: %s", tk_last_error(d->h));
        for (int s = 1; s < R && !*gst; s++) {
            const int rb = (r - s + R) % R;
            for (int i = 0; i < c && !*gst; i++) {
                const int64_t row0 = (int64_t)rb * mb + p->bounds[i];
                if (K > 0 && (e = cudaStreamWaitEvent(stream, d->ev[(s - 1) * c + i], 0))) {
                    *gst = tkd_cuda_fail(d, e, "cudaStreamWaitEvent (a chunk's arrival)");
                    break;
                }
                q = rows_problem(pb, G + (size_t)row0 * row_bytes, ldg, row0, p->bounds[i + 1] - p->bounds[i]);
                if ((st = tk_gemm_ex(d->h, &q, kernel, stream)))
                    *gst = tkd_fail(d, st, "the product of rows %lld..: %s", (long long)row0, tk_last_error(d->h));
            }
        }
    }
    return TK_SUCCESS;
}

/* The CE transport: window 0 chunk-major (transport.c), region i = R slots
 * of chunk i's rows, the same offsets on every rank. On the caller's
 * stream first the own block's product (it needs nothing from the peers),
 * so that it starts before the host has enqueued the rest. On cs: a
 * barrier (every rank has finished with its window: the last call's
 * products and copies out of it), then per chunk one copy (copy_rows) per
 * peer from A's rows straight into slot r of the peer's window (its
 * address here: peers.cu; the copy engines, no SM, beside the product) and
 * a barrier (every rank's chunk has landed), then the chunk's event. The
 * barriers are one-word all-reduces on the split communicator (one CTA),
 * and the GEMMs leave it an SM (tkd_run), so they do not wait for the GEMM
 * either. Then per
 * chunk, once it landed, one GEMM per peer's slot in ring order: the same
 * GEMMs as P2P's (each peer chunk's rows, ld K), so the same bits. The
 * gathered A, where asked, is filled on cs after the last barrier, beside
 * those GEMMs: its own rows from A, the peers' from the window (the own
 * rows' copy moved there from the caller's stream, where it came before
 * the first GEMM: qkv 8192 963 -> 928 us; docs/NOTES.md, session 33). */
static tk_status ag_ce(tk_dist d, const tkd_prep *p, const char *kernel, cudaStream_t stream, tk_status *gst)
{
    const tk_gemm_problem *pb = &p->desc.problem;
    const int R = d->nranks, r = d->rank, c = p->chunks;
    const int64_t mb = p->block_rows, K = pb->k, ldg = K > 0 ? K : 1;
    const size_t row_bytes = (size_t)K * 2, lda_bytes = (size_t)pb->lda * 2;
    char *W = (char *)d->win_buf[0], *G = (char *)p->desc.gathered;
    const char *A = (const char *)pb->a;
    tk_gemm_problem q;
    tk_status st;
    cudaError_t e;

    if (pb->n > 0) {
        q = rows_problem(pb, A, pb->lda, (int64_t)r * mb, mb);
        if ((st = tk_gemm_ex(d->h, &q, kernel, stream)))
            *gst = tkd_fail(d, st, "the own block's product: %s", tk_last_error(d->h));
    }
    if (K > 0 && (st = tkd_barrier(d, "the all-gather (copy engines): every rank's window free")))
        return st;
    for (int i = 0; i < c && K > 0; i++) {
        const int64_t b0 = p->bounds[i], rows = p->bounds[i + 1] - b0;
        for (int s = 1; s < R; s++) {
            const int j = (r + s) % R;
            if ((e = copy_rows((char *)d->peer[0][j] + tkd_ce_slot(p->bounds, R, i, r, row_bytes), row_bytes,
                               A + (size_t)b0 * lda_bytes, lda_bytes, row_bytes, (size_t)rows, cudaMemcpyDefault,
                               d->cs)))
                return tkd_cuda_fail(d, e, "cudaMemcpy(2D)Async (a chunk of the own rows into a peer's window, copy "
                                     "engines)");
        }
        if ((st = tkd_barrier(d, "the all-gather (copy engines): every rank's chunk landed")))
            return st;
        if ((e = cudaEventRecord(d->ev[i], d->cs)))
            return tkd_cuda_fail(d, e, "cudaEventRecord (a chunk's arrival)");
    }
    /* the gathered A asked for: the own rows from A, the peers' from the window */
    if (G && K > 0 && (e = copy_rows(G + (size_t)r * mb * row_bytes, row_bytes, A, lda_bytes, row_bytes,
                                     (size_t)mb, cudaMemcpyDeviceToDevice, d->cs)))
        return tkd_cuda_fail(d, e, "cudaMemcpy(2D)Async (the own rows into the gathered A)");
    for (int i = 0; i < c && G && K > 0; i++)
        for (int j = 0; j < R; j++) {
            const int64_t b0 = p->bounds[i], rows = p->bounds[i + 1] - b0;
            if (j != r && (e = cudaMemcpyAsync(G + ((size_t)j * mb + b0) * row_bytes,
                                               W + tkd_ce_slot(p->bounds, R, i, j, row_bytes), (size_t)rows * row_bytes,
                                               cudaMemcpyDeviceToDevice, d->cs)))
                return tkd_cuda_fail(d, e, "cudaMemcpyAsync (received rows into the gathered A)");
        }
    if ((e = cudaEventRecord(d->cs_end, d->cs)))
        return tkd_cuda_fail(d, e, "cudaEventRecord (the exchange's end)");

    for (int i = 0; i < c && pb->n > 0 && !*gst; i++) {
        const int64_t b0 = p->bounds[i], rows = p->bounds[i + 1] - b0;
        if (K > 0 && (e = cudaStreamWaitEvent(stream, d->ev[i], 0))) {
            *gst = tkd_cuda_fail(d, e, "cudaStreamWaitEvent (a chunk's arrival)");
            break;
        }
        for (int s = 1; s < R && !*gst; s++) {
            const int j = (r - s + R) % R;
            const int64_t row0 = (int64_t)j * mb + b0;
            q = rows_problem(pb, K > 0 ? W + tkd_ce_slot(p->bounds, R, i, j, row_bytes) : NULL, ldg, row0, rows);
            if ((st = tk_gemm_ex(d->h, &q, kernel, stream)))
                *gst = tkd_fail(d, st, "the product of rows %lld..: %s", (long long)row0, tk_last_error(d->h));
        }
    }
    return TK_SUCCESS;
}

tk_status tk_dist_all_gather_gemm(tk_dist d, const tk_dist_desc *desc, void *stream_)
{
    tkd_prep p;
    tk_status st = tkd_prepare(d, TK_DIST_ALL_GATHER_GEMM, desc, stream_, 0, &p);
    if (st || p.noop)
        return st;
    cudaStream_t stream = (cudaStream_t)stream_;
    const tk_gemm_problem *pb = &p.desc.problem;
    const int64_t mb = p.block_rows, K = pb->k, ldg = K > 0 ? K : 1;
    if (!pb->a && mb > 0 && K > 0)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "problem.a: NULL (this rank's %lld rows of A)", (long long)mb);
    if (pb->lda < K)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "problem.lda: %lld is less than K = %lld (a row of op(A))",
                        (long long)pb->lda, (long long)K);

    /* One kernel for every chunk: the one the whole product (all M rows of
     * the gathered A) would run, unless a chunk refuses it; then every
     * chunk's GEMM checked (one per distinct row count), so a refusal
     * enqueues nothing on any stream. Where the copy engines may serve,
     * the chunks' rows are read from the window (not `gathered`): checked
     * there too. */
    const char *g0 = p.desc.gathered, *kernel = p.desc.kernel;
    const int ce_maybe = p.call.transport != TK_DIST_TRANSPORT_P2P && g0;
    if (pb->n > 0) {
        const tk_gemm_problem whole = rows_problem(pb, g0, ldg, 0, pb->m);
        kernel = tkd_whole_kernel(d, &whole, p.desc.kernel);
        if (kernel != p.desc.kernel &&
            (check_chunks(d, &p, kernel, g0) || (ce_maybe && check_chunks(d, &p, kernel, NULL)))) {
            tkd_begin(d);
            kernel = p.desc.kernel;
        }
        if ((st = check_chunks(d, &p, kernel, g0)) || (ce_maybe && (st = check_chunks(d, &p, kernel, NULL))))
            return st;
    }
    return tkd_run(d, &p, kernel, stream, ag_p2p, ag_ce);
}
