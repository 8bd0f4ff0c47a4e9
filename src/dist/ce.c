/* ce.c - the copy-engine transport's set-up (tk_dist_set_transport).
 *
 * The bytes move by cudaMemcpyAsync between windows of symmetric memory
 * (ncclMemAlloc, ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC: each
 * rank's window mapped into every rank's address space, the addresses from
 * NCCL's device API: peers.cu), on the copy engines: no SM, so beside a
 * GEMM that holds them all. The ranks meet at one-word all-reduces
 * (tkd_barrier) on a communicator split from the caller's with one CTA a
 * kernel (ncclCommSplit: the caller's keeps its own settings). NCCL's own
 * copy-engine collectives (ncclAllGather, ncclAlltoAll on a zero-CTA
 * communicator) were this transport in session 31; on 2 x H200 they did
 * not start until a GEMM holding every SM had ended (docs/NOTES.md
 * session 32). The windows are grown to the largest call.
 *
 * Every step is collective, and a step that fails on one rank only would
 * leave the others waiting in NCCL, or on another transport than theirs.
 * So each step ends with the ranks agreeing: every rank's outcome goes
 * round in a small ncclAllGather on the caller's communicator (its host
 * wait bounded by the context's timeout), and the copy engines are used
 * only where every rank succeeded; otherwise each rank marks them
 * unavailable on its context, alike (AUTO then runs P2P, CE refuses). What
 * cannot be made safe: a rank whose ncclCommSplit or window registration
 * never returns (NCCL waiting for a peer that failed before reaching it)
 * is NCCL's hang, not seen here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dist.h"

#ifndef NCCL_WIN_COLL_SYMMETRIC
#define NCCL_WIN_COLL_SYMMETRIC 0x01   /* an nccl.h before 2.27: set-up refuses anyway (not 2.28) */
#endif

/* Every rank's outcome of `step` (mine: 0 success) exchanged: *ok 1 where
 * every rank succeeded; else 0, with d->ce_why holding this rank's words
 * (why) or naming the first rank that failed. A failed exchange itself is
 * the call's failure (TK_ERR_COMM, a timeout or NCCL's error). */
static tk_status agree(tk_dist d, int mine, const char *step, const char *why, int *ok)
{
    const int R = d->nranks;
    int64_t me = mine != 0, *all = malloc(sizeof(int64_t) * (size_t)R);
    if (!all)
        return tkd_fail(d, TK_ERR_ALLOC, "out of host memory (the copy-engine transport's set-up)");
    char what[160];
    snprintf(what, sizeof what, "the copy-engine transport's set-up (%s): the ranks' agreement", step);
    tk_status st = tkd_allgather_words(d, &me, 1, all, what);
    int bad = -1;
    for (int r = 0; r < R && !st && bad < 0; r++)
        if (all[r])
            bad = r;
    free(all);
    *ok = !st && bad < 0;
    if (!st && bad >= 0) {
        d->ce_state = -1;
        if (mine)
            snprintf(d->ce_why, sizeof d->ce_why, "%s", why);
        else
            snprintf(d->ce_why, sizeof d->ce_why, "%s failed on rank %d (its tk_dist_last_error says why)", step, bad);
    }
    return st;
}

/* ncclCommSplit with one CTA a kernel (blocking), agreed. */
static tk_status setup(tk_dist d)
{
    const tkd_nccl *n = d->nccl;
    char why[sizeof d->ce_why] = "";
    int v = 0, ok = 0;
    n->GetVersion(&v);
    const char *missing = tkd_ce_missing(n);
#ifdef NCCL_CTA_POLICY_ZERO
    if (missing)
        snprintf(why, sizeof why, "NCCL %d has no %s (the copy-engine transport needs NCCL 2.28 or newer)", v,
                 missing);
#else
    (void)missing;
    snprintf(why, sizeof why, "libtilekit_dist was built with an nccl.h before 2.28 (no NCCL_CTA_POLICY_ZERO): "
             "rebuild it with NCCL_INCLUDE naming a newer one");
#endif
    tk_status st = agree(d, why[0] != 0, "the NCCL functions", why, &ok);
    if (st || !ok)
        return st;
#ifdef NCCL_CTA_POLICY_ZERO
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 1;
    cfg.minCTAs = cfg.maxCTAs = 1;   /* the barriers: one SM, which the GEMMs leave free */
    ncclResult_t r = n->CommSplit(d->comm, 0, d->rank, &d->ce_comm, &cfg);
    if (r != ncclSuccess) {
        const char *last = n->GetLastError ? n->GetLastError(d->comm) : NULL;
        snprintf(why, sizeof why, "ncclCommSplit (color 0, key %d, one CTA): NCCL error %d (%s)%s%s", d->rank, (int)r,
                 n->GetErrorString(r), last && *last ? ": " : "", last ? last : "");
        d->ce_comm = NULL;
    }
    if ((st = agree(d, r != ncclSuccess, "ncclCommSplit", why, &ok)))
        return st;
    if (!ok && d->ce_comm) {
        n->CommAbort(d->ce_comm);   /* local: a peer's split failed, this one is never used */
        d->ce_comm = NULL;
    }
    if (ok)
        d->ce_state = 1;
#endif
    return TK_SUCCESS;
}

/* Window w deregistered and freed (collective where it was registered). */
static void drop_window(tk_dist d, int w)
{
    if (d->win[w] && d->ce_comm)   /* none after tk_dist_destroy aborted it */
        d->nccl->CommWindowDeregister(d->ce_comm, d->win[w]);
    if (d->win_buf[w])
        d->nccl->MemFree(d->win_buf[w]);
    d->win[w] = d->win_buf[w] = NULL;
    d->win_bytes[w] = 0;
    free(d->peer[w]);
    d->peer[w] = NULL;
}

/* The windows grown to need[] (each rank alike: the same shapes, the same
 * sizes): after d's last call, the old ones dropped, the new allocated
 * (agreed), then registered (agreed). A failure leaves CE unavailable. */
static tk_status grow_windows(tk_dist d, const size_t need[2])
{
    const tkd_nccl *n = d->nccl;
    const int grow[2] = { need[0] > d->win_bytes[0], need[1] > d->win_bytes[1] };
    if (!grow[0] && !grow[1])
        return TK_SUCCESS;
    tk_status st;
    if (d->end_recorded &&
        (st = tkd_wait_event(d, d->end, d->timeout_ms, "the copy-engine windows' growth: the last call")))
        return st;
    char why[sizeof d->ce_why] = "";
    ncclResult_t r = ncclSuccess;
    for (int w = 0; w < 2; w++)
        if (grow[w])
            drop_window(d, w);
    for (int w = 0; w < 2 && r == ncclSuccess; w++)
        if (grow[w] && (r = n->MemAlloc(&d->win_buf[w], need[w])) != ncclSuccess) {
            d->win_buf[w] = NULL;
            snprintf(why, sizeof why, "ncclMemAlloc (a window of %zu bytes): NCCL error %d (%s)", need[w], (int)r,
                     n->GetErrorString(r));
        }
    int ok = 0;
    if ((st = agree(d, r != ncclSuccess, "ncclMemAlloc", why, &ok)) || !ok)
        goto out;
    for (int w = 0; w < 2 && r == ncclSuccess; w++)
        if (grow[w] && (r = n->CommWindowRegister(d->ce_comm, d->win_buf[w], need[w], &d->win[w],
                                                  NCCL_WIN_COLL_SYMMETRIC)) != ncclSuccess) {
            d->win[w] = NULL;
            snprintf(why, sizeof why, "ncclCommWindowRegister (%zu bytes, NCCL_WIN_COLL_SYMMETRIC): NCCL error %d "
                     "(%s)", need[w], (int)r, n->GetErrorString(r));
        }
    if ((st = agree(d, r != ncclSuccess, "ncclCommWindowRegister", why, &ok)) || !ok)
        goto out;
    int bad = 0;
    for (int w = 0; w < 2 && !bad; w++)
        if (grow[w]) {
            if (!(d->peer[w] = calloc((size_t)d->nranks, sizeof(void *)))) {
                snprintf(why, sizeof why, "out of host memory (the windows' peer addresses)");
                bad = 1;
            } else
                bad = tkd_window_peers(d->win[w], d->nranks, d->peer[w], d->cs, why, sizeof why);
        }
    if ((st = agree(d, bad, "the windows' peer addresses", why, &ok)) || !ok)
        goto out;
    for (int w = 0; w < 2; w++)
        if (grow[w])
            d->win_bytes[w] = need[w];
    return TK_SUCCESS;
out:
    for (int w = 0; w < 2; w++)
        if (grow[w])
            drop_window(d, w);
    if (st) {   /* the ranks could not agree: this context's CE is not to be trusted either */
        snprintf(d->ce_why, sizeof d->ce_why, "the windows' growth failed: %.400s", d->err);
        d->ce_state = -1;
    }
    return st;
}

/* Where the asked transport came from, for messages. */
static const char *from_name(int from)
{
    return from == 1 ? "tk_dist_set_transport" : from == 2 ? "$TK_DIST_TRANSPORT" : "the default";
}

tk_status tkd_transport_for(tk_dist d, const tkd_prep *p, int *t)
{
    *t = TK_DIST_TRANSPORT_P2P;
    const int asked = p->call.transport;
    if (asked == TK_DIST_TRANSPORT_P2P)
        return TK_SUCCESS;
    tk_status st;
    if (d->ce_state == 0 && (st = setup(d)))
        return st;
    if (d->ce_state == 1 && (st = grow_windows(d, p->win_need)))
        return st;
    if (d->ce_state == 1) {
        *t = TK_DIST_TRANSPORT_CE;
        return TK_SUCCESS;
    }
    if (asked == TK_DIST_TRANSPORT_CE)
        return tkd_fail(d, TK_ERR_NOT_SUPPORTED, "the copy-engine transport (asked by %s) is not available on this "
                        "context: %s", from_name(p->transport_from), d->ce_why);
    return TK_SUCCESS;
}

tk_status tkd_transport_predict(tk_dist d, const tkd_prep *p, int *t, char *why, size_t len)
{
    const int asked = p->call.transport;
    const char *missing = tkd_ce_missing(d->nccl);
    *t = TK_DIST_TRANSPORT_P2P;
    if (asked == TK_DIST_TRANSPORT_P2P) {
        snprintf(why, len, "p2p: asked by %s", from_name(p->transport_from));
        return TK_SUCCESS;
    }
    const char *no = d->ce_state < 0 ? d->ce_why : missing ? missing : NULL;
    if (no && asked == TK_DIST_TRANSPORT_CE)
        return tkd_fail(d, TK_ERR_NOT_SUPPORTED, "the copy-engine transport (asked by %s) is not available: %s%s",
                        from_name(p->transport_from), d->ce_state < 0 ? "" : "NCCL lacks ", no);
    if (no) {
        snprintf(why, len, "p2p: copy engines unavailable: %s%s", d->ce_state < 0 ? "" : "NCCL lacks ", no);
        return TK_SUCCESS;
    }
    *t = TK_DIST_TRANSPORT_CE;
    snprintf(why, len, d->ce_state > 0 ? "ce: copy engines, set up (asked by %s)"
                                       : "ce: copy engines, set up at the first call (asked by %s; p2p if that fails)",
             from_name(p->transport_from));
    return TK_SUCCESS;
}

tk_status tkd_barrier(tk_dist d, const char *what)
{
    cudaError_t e = tkd_sig_words(d);
    if (e)
        return tkd_cuda_fail(d, e, "cudaMalloc (the ranks' signal words)");
    ncclResult_t r = tkd_nccl_settle(d, d->nccl->AllReduce(d->sig_dev, d->sig_dev, 1, ncclInt64, ncclMax, d->ce_comm,
                                                           d->cs));
    return r ? tkd_nccl_fail(d, r, what) : TK_SUCCESS;
}

int tkd_ce_abort(tk_dist d, const char *why)
{
    if (!d->ce_comm)
        return 0;
    d->nccl->CommAbort(d->ce_comm);
    d->ce_comm = NULL;
    d->ce_state = -1;
    snprintf(d->ce_why, sizeof d->ce_why, "its communicator was aborted: %s", why);
    return 1;
}

void tkd_ce_release(tk_dist d)
{
    for (int w = 0; w < 2; w++)
        drop_window(d, w);
    if (d->ce_comm)
        d->nccl->CommDestroy(d->ce_comm);
    d->ce_comm = NULL;
}
