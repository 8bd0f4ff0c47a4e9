/* workspace.c - where a call's workspaces come from, and the public
 * functions that set them (tilekit.h, "workspaces").
 *
 * A call may use three kinds of device memory besides its operands: copies
 * of misaligned operands (route.c), a split's partial sums with their
 * completion flags (tk_args.kws, .flags), and cuBLAS's workspace. By
 * default the handle allocates each in a buffer of its own (handle.c's
 * tk_handle_malloc, stream-ordered), grown when a call needs more, within
 * the cap of tk_set_workspace_limit.
 *
 * With a caller's workspace (tk_set_workspace) they come from that memory
 * instead, laid out afresh by each call:
 *
 *   [0, F)                 completion flags, kept between calls (F = uws_flags)
 *   [F, F + copies)        the copies of this call's misaligned operands
 *   [F + copies, ...)      this call's partial sums
 *
 * The flags must hold nothing but zeros and earlier launch numbers
 * (kernel.h), so their area is zeroed, in stream order, when a call first
 * needs it or more of it than before; a call that splits with fewer flags
 * keeps the start of the area (F shrinks to what it needs, so the call
 * fits the bytes tk_workspace_size gave); everything after it is scratch
 * of one call. Copies come first: a call runs unsplit before it refuses its
 * copies. cuBLAS takes the memory from its start (its own layout) and the
 * flags are zeroed again by the next call that splits. Every offset is a
 * multiple of 256 bytes: the base is 256-byte aligned (checked), as cuBLAS
 * and the TMA kernels need.
 *
 * The calls that use a workspace are ordered one after the other by the
 * handle (handle.c, tk_handle_ws_begin) whatever the memory, so one call's
 * scratch is never another's at the same time. */
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "internal.h"

static size_t round256(size_t x) { return (x + 255) / 256 * 256; }

/* Whether h may hold `want` bytes in a buffer that now holds `have`,
 * within its cap. */
static int fits(const struct tk_handle_s *h, size_t have, size_t want)
{
    const size_t others = tk_handle_held(h) - have;
    return others <= h->ws_limit && want <= h->ws_limit - others;
}

/* Replaces *buf (of *have bytes) by a new buffer of `bytes` on stream s,
 * zeroed when zero is set; the old one is freed in stream order. On failure
 * *buf is NULL and *have 0, and the failure is not noted as the call's
 * (the call goes on without it, or says why itself). */
static cudaError_t regrow(tk_handle h, void **buf, size_t *have, size_t bytes, int zero, cudaStream_t s)
{
    tk_handle_free(h, *buf, s);
    *buf = NULL;
    *have = 0;
    void *p = NULL;
    cudaError_t e = tk_handle_malloc(h, &p, bytes, s);
    if (e == cudaSuccess && zero && (e = cudaMemsetAsync(p, 0, bytes, s)) != cudaSuccess) {
        cudaGetLastError();
        tk_handle_free(h, p, s);
        p = NULL;
    }
    if (e == cudaSuccess) {
        *buf = p;
        *have = bytes;
    }
    return e;
}

/* Numbers the launch that gets the flags `flags` (bytes of them:
 * flag_bytes): 0 when they cannot be used (seq wrapped and they could not
 * be cleared). Where seq wraps to 1 the flags of the old numbering are
 * cleared, in stream order, and those of the other memory forgotten: the
 * caller's area is zeroed again at its next use, the handle's freed. */
static uint32_t next_seq(tk_handle h, void *flags, size_t flag_bytes, cudaStream_t s)
{
    if (++h->seq != 0)
        return h->seq;
    if (cudaMemsetAsync(flags, 0, flag_bytes, s) != cudaSuccess) {
        cudaGetLastError();
        h->seq = 0;   /* try again next time; this launch runs unsplit */
        return 0;
    }
    if (flags == h->flags) {
        h->uws_flags = 0;
    } else {
        tk_handle_free(h, h->flags, s);
        h->flags = NULL;
        h->flags_bytes = 0;
    }
    return h->seq = 1;
}

/* The handle's own memory, within its cap. */
static tk_status own_ws(tk_handle h, size_t copy_bytes, size_t kws, size_t nflags, int cublas, tk_call_ws *w,
                        cudaStream_t s)
{
    if (copy_bytes && h->copy_ws_bytes < copy_bytes) {
        if (h->copy_ws_limit && copy_bytes > h->copy_ws_limit)
            return tk_fail(h, TK_ERR_OUT_OF_RESOURCES,
                           "auto: %zu bytes of workspace are needed to copy misaligned operands, over the handle's "
                           "limit of %zu",
                           copy_bytes, h->copy_ws_limit);
        if (!fits(h, h->copy_ws_bytes, copy_bytes))
            return tk_fail(h, TK_ERR_OUT_OF_RESOURCES,
                           "auto: %zu bytes of workspace are needed to copy misaligned operands, over the handle's "
                           "cap of %zu (tk_set_workspace_limit; %zu held; a named kernel runs them as they are)",
                           copy_bytes, h->ws_limit, tk_handle_held(h));
        cudaError_t e = regrow(h, &h->copy_ws, &h->copy_ws_bytes, copy_bytes, 0, s);
        if (e != cudaSuccess) {
            tk_note_cuda_error((int)e);
            return tk_fail(h, TK_ERR_OUT_OF_RESOURCES,
                           "auto: cudaMallocAsync of %zu bytes of workspace to copy misaligned operands failed: %s",
                           copy_bytes, cudaGetErrorString(e));
        }
    }
    w->copy = copy_bytes ? h->copy_ws : NULL;
    if (kws) {
        /* both grown only when both fit: a split needs the two */
        const size_t fb = nflags * sizeof(uint32_t);
        const size_t nf = h->flags_bytes > fb ? h->flags_bytes : fb;
        const size_t nk = h->kws_bytes > kws ? h->kws_bytes : kws;
        const size_t others = tk_handle_held(h) - h->flags_bytes - h->kws_bytes;
        int ok = others <= h->ws_limit && nf <= h->ws_limit - others && nk <= h->ws_limit - others - nf;
        /* A new flag area is all zeros: every flag is older than any seq. */
        if (ok && h->flags_bytes < fb)
            ok = regrow(h, (void **)&h->flags, &h->flags_bytes, fb, 1, s) == cudaSuccess;
        if (ok && h->kws_bytes < kws)
            ok = regrow(h, &h->kws, &h->kws_bytes, kws, 0, s) == cudaSuccess;
        if (ok && (w->seq = next_seq(h, h->flags, h->flags_bytes, s)) != 0) {
            w->kws = h->kws;
            w->kws_bytes = h->kws_bytes;
            w->flags = h->flags;
            w->nflags = h->flags_bytes / sizeof(uint32_t);
        }
        tk_note_clear();   /* a split that could not be had is no failure */
    }
    if (cublas) {
        /* Over the cap cuBLAS runs without one (as under capture); a failed
         * allocation is the call's failure, as it always was. */
        if (!h->workspace && fits(h, 0, TK_CUBLAS_WORKSPACE)) {
            void *p = NULL;
            cudaError_t e = tk_handle_malloc(h, &p, TK_CUBLAS_WORKSPACE, s);
            if (e != cudaSuccess)
                return tk_fail(h, TK_ERR_ALLOC, "cudaMallocAsync(cuBLAS workspace, %zu bytes): %s",
                               TK_CUBLAS_WORKSPACE, cudaGetErrorString(e));
            h->workspace = p;
            h->workspace_bytes = TK_CUBLAS_WORKSPACE;
        }
        w->cublas = h->workspace;
        w->cublas_bytes = h->workspace_bytes;
    }
    return TK_SUCCESS;
}

/* The caller's memory, laid out as the top of this file says. */
static tk_status caller_ws(tk_handle h, size_t copy_bytes, size_t kws, size_t nflags, int cublas, tk_call_ws *w,
                           cudaStream_t s)
{
    char *base = h->uws;
    const size_t have = h->uws_bytes;
    if (cublas) {   /* cuBLAS runs alone: no copies, no split (named kernel, no workspace of its own) */
        w->cublas = have ? base : NULL;
        w->cublas_bytes = have < TK_CUBLAS_WORKSPACE ? have : TK_CUBLAS_WORKSPACE;
        if (w->cublas_bytes)   /* it may write over the flags: set up again when next needed */
            h->uws_flags = 0;
        return TK_SUCCESS;
    }
    /* The flags take what this call needs, no more, so a workspace of
     * tk_workspace_size's bytes always serves it: an area set up before
     * keeps its first fb bytes (flags still), a smaller one is zeroed anew. */
    size_t flags_end = h->uws_flags;
    const size_t fb = round256(nflags * sizeof(uint32_t));
    int split = kws && fb <= have && copy_bytes <= have - fb && kws <= have - fb - copy_bytes;
    if (split && fb > flags_end) {
        if (cudaMemsetAsync(base, 0, fb, s) == cudaSuccess) {
            h->uws_flags = flags_end = fb;
        } else {
            cudaGetLastError();
            split = 0;
        }
    } else if (split) {
        h->uws_flags = flags_end = fb;
    }
    if (split && (w->seq = next_seq(h, base, flags_end, s)) != 0) {
        w->flags = (uint32_t *)base;
        w->nflags = flags_end / sizeof(uint32_t);
        w->kws = base + flags_end + copy_bytes;
        w->kws_bytes = have - flags_end - copy_bytes;
    }
    if (copy_bytes) {
        if (flags_end > have || copy_bytes > have - flags_end) {
            if (copy_bytes > have)
                return tk_fail(h, TK_ERR_OUT_OF_RESOURCES,
                               "auto: %zu bytes of workspace are needed to copy misaligned operands, over the %zu of "
                               "the caller's workspace (tk_set_workspace; a named kernel runs them as they are)",
                               copy_bytes, have);
            h->uws_flags = flags_end = 0;   /* the copies take the flags' place: zeroed again when next needed */
        }
        w->copy = base + flags_end;
    }
    return TK_SUCCESS;
}

tk_status tk_handle_call_ws(tk_handle h, size_t copy_bytes, size_t kws, size_t nflags, int cublas, tk_call_ws *w,
                            cudaStream_t s)
{
    memset(w, 0, sizeof *w);
    return h->uws ? caller_ws(h, copy_bytes, kws, nflags, cublas, w, s)
                  : own_ws(h, copy_bytes, kws, nflags, cublas, w, s);
}

/* ---- the public functions ---- */

static tk_status need_handle(tk_handle h)
{
    if (!h)
        return tk_fail(NULL, TK_ERR_INVALID_VALUE, "h: handle is NULL (expected one from tk_create)");
    tk_call_begin(h);
    return TK_SUCCESS;
}

tk_status tk_set_workspace(tk_handle h, void *ptr, size_t bytes)
{
    tk_status st = need_handle(h);
    if (st)
        return st;
    if (!ptr && bytes)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "ptr: NULL with bytes = %zu (expected device memory, or NULL with 0 bytes to go back to the "
                       "handle's own workspaces)",
                       bytes);
    if ((uintptr_t)ptr % 256)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "ptr: %p is not 256-byte aligned (expected the start of an allocation, as cudaMalloc gives, "
                       "or an offset into one that is a multiple of 256)",
                       ptr);
    if (ptr && h->have_device) {
        struct cudaPointerAttributes at;
        cudaError_t e = cudaPointerGetAttributes(&at, ptr);
        if (e != cudaSuccess) {
            cudaGetLastError();
            return tk_fail(h, TK_ERR_INVALID_VALUE, "ptr: %p is not device memory (cudaPointerGetAttributes: %s)",
                           ptr, cudaGetErrorString(e));
        }
        if (at.type != cudaMemoryTypeDevice && at.type != cudaMemoryTypeManaged)
            return tk_fail(h, TK_ERR_INVALID_VALUE, "ptr: %p is %s memory (expected device memory of device %d)",
                           ptr, at.type == cudaMemoryTypeHost ? "pinned host" : "host", h->dev.id);
        if (at.type == cudaMemoryTypeDevice && at.device != h->dev.id)
            return tk_fail(h, TK_ERR_INVALID_VALUE,
                           "ptr: %p is memory of device %d, but the handle belongs to device %d", ptr, at.device,
                           h->dev.id);
    }
    h->uws = ptr;
    h->uws_bytes = ptr ? bytes : 0;
    h->uws_flags = 0;   /* set up again by the first call that splits */
    return TK_SUCCESS;
}

tk_status tk_set_workspace_limit(tk_handle h, size_t bytes)
{
    tk_status st = need_handle(h);
    if (!st)
        h->ws_limit = bytes;
    return st;
}

tk_status tk_set_split_k(tk_handle h, tk_split_k mode)
{
    tk_status st = need_handle(h);
    if (st)
        return st;
    if (mode != TK_SPLIT_K_AUTO && mode != TK_SPLIT_K_NEVER)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "mode: %d is not TK_SPLIT_K_AUTO (0) or TK_SPLIT_K_NEVER (1)", (int)mode);
    h->split_never = mode == TK_SPLIT_K_NEVER;
    return TK_SUCCESS;
}

/* The cap goes to the two places the kernels read the SM count from: the
 * device description (grids of one CTA per SM, wave and split plans, the
 * cost model) and the launch cache (the clusters that fit co-resident). */
tk_status tk_set_sm_count(tk_handle h, int sms)
{
    tk_status st = need_handle(h);
    if (st)
        return st;
    if (sms < 0)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "sms: %d is negative (expected 0: every SM, or a count)", sms);
    h->sm_cap = sms;
    if (h->sm_count_full > 0)
        h->dev.sm_count = sms > 0 && sms < h->sm_count_full ? sms : h->sm_count_full;
    h->lc.max_sms = sms > 0 && sms < h->sm_count_full ? sms : 0;
    return TK_SUCCESS;
}

tk_status tk_workspace_release(tk_handle h, void *stream)
{
    tk_status st = need_handle(h);
    if (st || !tk_handle_held(h))
        return st;
    if ((st = tk_check_device(h)))
        return st;
    cudaStream_t s = (cudaStream_t)stream;
    if (tk_stream_capturing(s))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "stream: it is being captured into a CUDA graph (the handle's workspaces are freed in stream "
                       "order on a stream that is not)");
    /* after the last call that used them, whatever its stream */
    if ((st = tk_handle_ws_begin(h, s)))
        return st;
    void **bufs[4] = { &h->workspace, &h->kws, (void **)&h->flags, &h->copy_ws };
    size_t *sizes[4] = { &h->workspace_bytes, &h->kws_bytes, &h->flags_bytes, &h->copy_ws_bytes };
    for (int i = 0; i < 4; i++) {
        tk_handle_free(h, *bufs[i], s);
        *bufs[i] = NULL;
        *sizes[i] = 0;
    }
    tk_handle_ws_end(h, s);
    return TK_SUCCESS;
}

/* The first version of tk_handle_info: up to split_k. */
#define TK_HANDLE_INFO_V1_SIZE (offsetof(tk_handle_info, split_k) + sizeof(tk_split_k))

tk_status tk_get_handle_info(tk_handle h, tk_handle_info *out)
{
    tk_status st = need_handle(h);
    if (st)
        return st;
    tk_handle_info i = { .size = sizeof i };
    i.device = h->have_device ? h->dev.id : -1;
    i.sm = h->have_device ? h->dev.sm : 0;
    i.workspace = h->uws;
    i.workspace_bytes = h->uws_bytes;
    i.workspace_limit = h->ws_limit;
    i.workspace_held = tk_handle_held(h);
    i.split_k = h->split_never ? TK_SPLIT_K_NEVER : TK_SPLIT_K_AUTO;
    return tk_fill_versioned(h, "out", out, &i, sizeof i, TK_HANDLE_INFO_V1_SIZE);
}
