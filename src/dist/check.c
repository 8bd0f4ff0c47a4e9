/* check.c - what a call can be refused for before anything is enqueued,
 * and the signature the ranks compare (check_shapes). Pure: no GPU, no
 * NCCL; tests/host/test_dist.c checks every refusal. */
#include <stdio.h>
#include <string.h>
#include "dist.h"

tk_status tkd_check_call(const tkd_call *c, char *why, size_t len)
{
    const tk_dist_desc *d = c->desc;
    const tk_gemm_problem *p = &d->problem;
    if (c->op != TK_DIST_ALL_GATHER_GEMM && c->op != TK_DIST_GEMM_REDUCE_SCATTER) {
        snprintf(why, len, "op: %d is not TK_DIST_ALL_GATHER_GEMM (1) or TK_DIST_GEMM_REDUCE_SCATTER (2)", (int)c->op);
        return TK_ERR_INVALID_VALUE;
    }
    if (c->nranks < 1 || c->rank < 0 || c->rank >= c->nranks) {
        snprintf(why, len, "comm: rank %d of %d ranks (ncclCommUserRank, ncclCommCount) is not a rank", c->rank,
                 c->nranks);
        return TK_ERR_INVALID_VALUE;
    }
    if (c->comm_device != c->device) {
        snprintf(why, len, "comm: it belongs to device %d (ncclCommCuDevice), the context to device %d",
                 c->comm_device, c->device);
        return TK_ERR_INVALID_VALUE;
    }
    if (c->current_device != c->device) {
        snprintf(why, len, "the current device is %d, but the context and its communicator are device %d's "
                 "(cudaSetDevice(%d) first)", c->current_device, c->device, c->device);
        return TK_ERR_INVALID_VALUE;
    }
    if (c->stream_device >= 0 && c->stream_device != c->device) {
        snprintf(why, len, "stream: it belongs to device %d, the communicator to device %d", c->stream_device,
                 c->device);
        return TK_ERR_INVALID_VALUE;
    }
    if (d->reserved) {
        snprintf(why, len, "desc->reserved: %d (expected 0)", (int)d->reserved);
        return TK_ERR_INVALID_VALUE;
    }
    if (d->check_shapes != 0 && d->check_shapes != 1) {
        snprintf(why, len, "desc->check_shapes: %d (expected 0 or 1)", (int)d->check_shapes);
        return TK_ERR_INVALID_VALUE;
    }
    if (d->chunks < 0 || d->chunks > TKD_MAX_CHUNKS_ASKED) {
        snprintf(why, len, "desc->chunks: %d is out of range (0: planned, or 1..%d)", (int)d->chunks,
                 TKD_MAX_CHUNKS_ASKED);
        return TK_ERR_INVALID_VALUE;
    }
    if (p->layout != TK_ROW_MAJOR && p->layout != TK_COL_MAJOR) {
        snprintf(why, len, "problem.layout: %d is not TK_ROW_MAJOR or TK_COL_MAJOR", (int)p->layout);
        return TK_ERR_INVALID_VALUE;
    }
    if ((p->op_a != TK_OP_N && p->op_a != TK_OP_T) || (p->op_b != TK_OP_N && p->op_b != TK_OP_T)) {
        snprintf(why, len, "problem.%s: %d is not TK_OP_N or TK_OP_T", p->op_a != TK_OP_N && p->op_a != TK_OP_T ?
                 "op_a" : "op_b", p->op_a != TK_OP_N && p->op_a != TK_OP_T ? (int)p->op_a : (int)p->op_b);
        return TK_ERR_INVALID_VALUE;
    }
    if (p->c_type != TK_F32 && p->c_type != TK_BF16) {
        snprintf(why, len, "problem.c_type: %d is not TK_F32 or TK_BF16", (int)p->c_type);
        return TK_ERR_INVALID_VALUE;
    }
    if (p->m < 0 || p->n < 0 || p->k < 0) {
        snprintf(why, len, "problem.%s: %lld is negative", p->m < 0 ? "m" : p->n < 0 ? "n" : "k",
                 (long long)(p->m < 0 ? p->m : p->n < 0 ? p->n : p->k));
        return TK_ERR_INVALID_VALUE;
    }
    if (p->m % c->nranks) {
        snprintf(why, len, "problem.m: %lld is not a multiple of the rank count %d (M counts the rows of all ranks; "
                 "each holds M / %d)", (long long)p->m, c->nranks, c->nranks);
        return TK_ERR_INVALID_VALUE;
    }
    if (c->op == TK_DIST_ALL_GATHER_GEMM) {
        int rows_contiguous = (p->layout == TK_ROW_MAJOR && p->op_a == TK_OP_N) ||
                              (p->layout == TK_COL_MAJOR && p->op_a == TK_OP_T);
        if (!rows_contiguous) {
            snprintf(why, len, "problem.op_a: the all-gather moves rows of op(A), which must each be K contiguous "
                     "elements: TK_ROW_MAJOR with op_a TK_OP_N, or TK_COL_MAJOR with op_a TK_OP_T (this is %s with "
                     "%s)", p->layout == TK_ROW_MAJOR ? "TK_ROW_MAJOR" : "TK_COL_MAJOR",
                     p->op_a == TK_OP_N ? "TK_OP_N" : "TK_OP_T");
            return TK_ERR_NOT_SUPPORTED;
        }
        if (d->gathered && ((uintptr_t)d->gathered & 1)) {
            snprintf(why, len, "desc->gathered: %p is not 2-byte aligned (bf16)", d->gathered);
            return TK_ERR_INVALID_VALUE;
        }
        if (d->partial_type != TK_F32) {
            snprintf(why, len, "desc->partial_type: %d, but the all-gather has no partial products (0 expected)",
                     (int)d->partial_type);
            return TK_ERR_INVALID_VALUE;
        }
    } else {
        if (d->gathered) {
            snprintf(why, len, "desc->gathered: the reduce-scatter gathers nothing (NULL expected)");
            return TK_ERR_INVALID_VALUE;
        }
        if (d->partial_type != TK_F32 && d->partial_type != TK_BF16) {
            snprintf(why, len, "desc->partial_type: %d is not TK_F32 or TK_BF16", (int)d->partial_type);
            return TK_ERR_INVALID_VALUE;
        }
    }
    return TK_SUCCESS;
}

void tkd_signature(const tkd_call *c, int chunks, int64_t sig[TKD_SIG_WORDS])
{
    const tk_gemm_problem *p = &c->desc->problem;
    int rs = c->op == TK_DIST_GEMM_REDUCE_SCATTER;
    int64_t v[TKD_SIG_WORDS] = { (int64_t)c->op, (int64_t)p->layout, (int64_t)p->op_a, rs ? (int64_t)p->op_b : -1,
                                 p->m, p->k, rs ? p->n : -1, (int64_t)p->c_type,
                                 rs ? (int64_t)c->desc->partial_type : -1, (int64_t)chunks, (int64_t)c->transport };
    memcpy(sig, v, sizeof v);
}

int tkd_signature_compare(const int64_t *all, int nranks, int self, char *why, size_t len)
{
    static const char *const names[TKD_SIG_WORDS] = { "operation", "problem.layout", "problem.op_a", "problem.op_b",
                                                      "problem.m", "problem.k", "problem.n", "problem.c_type",
                                                      "desc->partial_type", "chunks",
                                                      "the transport asked (tk_dist_set_transport, $TK_DIST_TRANSPORT)" };
    const int64_t *mine = all + (size_t)self * TKD_SIG_WORDS;
    for (int r = 0; r < nranks; r++)
        for (int w = 0; w < TKD_SIG_WORDS; w++)
            if (all[(size_t)r * TKD_SIG_WORDS + w] != mine[w]) {
                snprintf(why, len, "check_shapes: %s is %lld on rank %d but %lld on rank %d (this one): every rank "
                         "must make the same call", names[w], (long long)all[(size_t)r * TKD_SIG_WORDS + w], r,
                         (long long)mine[w], self);
                return 1;
            }
    return 0;
}
