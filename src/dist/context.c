/* context.c - the context of tilekit_dist.h: creation on a communicator,
 * messages, settings, the host waits (with a timeout and NCCL's
 * asynchronous errors), the preparation both operations share (checks,
 * chunk count, workspace), and the communicator helpers. */
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "dist.h"

_Static_assert(sizeof(ncclUniqueId) == TK_DIST_UNIQUE_ID_BYTES, "NCCL's unique id is 128 bytes");

/* The calling thread's last message (tk_dist_last_error(NULL)). */
static _Thread_local char tl_err[TKD_ERR_LEN];

tk_status tkd_fail(tk_dist d, tk_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_err, sizeof tl_err, fmt, ap);
    va_end(ap);
    if (d)
        snprintf(d->err, sizeof d->err, "%s", tl_err);
    return st;
}

void tkd_begin(tk_dist d)
{
    tl_err[0] = '\0';
    if (d)
        d->err[0] = '\0';
}

const char *tk_dist_last_error(tk_dist d) { return d ? d->err : tl_err; }

tk_status tkd_nccl_fail(tk_dist d, ncclResult_t r, const char *what)
{
    const tkd_nccl *n = d ? d->nccl : NULL;
    const char *s = n ? n->GetErrorString(r) : "";
    const char *last = n && n->GetLastError && d ? n->GetLastError(d->comm) : NULL;
    return tkd_fail(d, TK_ERR_COMM, "%s: NCCL error %d (%s)%s%s", what, (int)r, s ? s : "",
                    last && *last ? ": " : "", last && *last ? last : "");
}

tk_status tkd_cuda_fail(tk_dist d, cudaError_t e, const char *what)
{
    cudaGetLastError();
    return tkd_fail(d, e == cudaErrorMemoryAllocation ? TK_ERR_ALLOC : TK_ERR_CUDA, "%s: %s (%s)", what,
                    cudaGetErrorString(e), cudaGetErrorName(e));
}

double tkd_default_link_gbps(int sm)
{
    return sm >= 90 ? 300.0 : sm >= 80 && sm != 86 && sm != 87 && sm != 89 ? 200.0 : 16.0;
}

double tkd_link_gbps(const tk_dist d)
{
    if (d->link_gbps > 0)
        return d->link_gbps;
    const char *env = getenv("TK_DIST_LINK_GBPS");
    if (env && *env) {
        char *end = NULL;
        double v = strtod(env, &end);
        if (end && !*end && v > 0 && isfinite(v))
            return v;
    }
    return tkd_default_link_gbps(d->sm);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

tk_status tkd_wait_event(tk_dist d, cudaEvent_t ev, int timeout_ms, const char *what)
{
    const double t0 = now_ms();
    for (;;) {
        cudaError_t e = cudaEventQuery(ev);
        if (e == cudaSuccess)
            return TK_SUCCESS;
        if (e != cudaErrorNotReady)
            return tkd_cuda_fail(d, e, what);
        ncclResult_t ar = ncclSuccess;
        ncclResult_t r = d->nccl->CommGetAsyncError(d->comm, &ar);
        if (r != ncclSuccess)
            return tkd_nccl_fail(d, r, "ncclCommGetAsyncError");
        if (ar != ncclSuccess && ar != ncclInProgress)
            return tkd_nccl_fail(d, ar, what);
        if (now_ms() - t0 > timeout_ms)
            return tkd_fail(d, TK_ERR_COMM, "%s: not complete after %d ms (a rank that did not make the same call, "
                            "or died?): abort the communicator (ncclCommAbort)", what, timeout_ms);
        struct timespec nap = { 0, 100000 };
        nanosleep(&nap, NULL);
    }
}

ncclResult_t tkd_nccl_settle(tk_dist d, ncclResult_t r)
{
    const double t0 = now_ms();
    while (r == ncclInProgress) {
        if (d->nccl->CommGetAsyncError(d->comm, &r) != ncclSuccess || now_ms() - t0 > d->timeout_ms)
            return r == ncclInProgress ? ncclInternalError : r;
        if (r == ncclInProgress) {
            struct timespec nap = { 0, 20000 };
            nanosleep(&nap, NULL);
        }
    }
    return r;
}

tk_status tkd_p2p_chunk(tk_dist d, const void *send, int to, void *recv, int from, size_t bytes, const char *what)
{
    ncclResult_t nr = d->nccl->GroupStart();
    if (nr)
        return tkd_nccl_fail(d, nr, what);
    if ((nr = d->nccl->Send(send, bytes, ncclInt8, to, d->comm, d->cs)) == ncclInProgress)
        nr = ncclSuccess;
    if (!nr && (nr = d->nccl->Recv(recv, bytes, ncclInt8, from, d->comm, d->cs)) == ncclInProgress)
        nr = ncclSuccess;
    const ncclResult_t end = tkd_nccl_settle(d, d->nccl->GroupEnd());   /* always: the group closed */
    return nr || end ? tkd_nccl_fail(d, nr ? nr : end, what) : TK_SUCCESS;
}

static void destroy_parts(tk_dist d)
{
    for (int i = 0; i < d->nev; i++)
        cudaEventDestroy(d->ev[i]);
    free(d->ev);
    if (d->start)
        cudaEventDestroy(d->start);
    if (d->cs_end)
        cudaEventDestroy(d->cs_end);
    if (d->end)
        cudaEventDestroy(d->end);
    if (d->ws)
        cudaFree(d->ws);
    if (d->sig_dev)
        cudaFree(d->sig_dev);
    tkd_ce_release(d);
    if (d->cs)
        cudaStreamDestroy(d->cs);
    if (d->h)
        tk_destroy(d->h);
    cudaGetLastError();
    free(d);
}

tk_status tk_dist_create(tk_dist *out, struct ncclComm *comm)
{
    tkd_begin(NULL);
    if (!out)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "out: pointer is NULL (expected a tk_dist* to fill)");
    *out = NULL;
    if (!comm)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "comm: NULL (expected an initialized ncclComm_t)");
    char why[512];
    const tkd_nccl *n = tkd_nccl_get(why, sizeof why);
    if (!n)
        return tkd_fail(NULL, TK_ERR_COMM, "%s", why);
    int dev = -1, count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        cudaGetLastError();
        return tkd_fail(NULL, TK_ERR_NO_DEVICE, "no CUDA device: %s", e ? cudaGetErrorString(e) : "none visible");
    }
    if ((e = cudaGetDevice(&dev)) != cudaSuccess)
        return tkd_cuda_fail(NULL, e, "cudaGetDevice");
    tk_dist d = calloc(1, sizeof *d);
    if (!d)
        return tkd_fail(NULL, TK_ERR_ALLOC, "tk_dist_create: out of host memory");
    d->nccl = n;
    d->comm = comm;
    d->device = dev;
    d->timeout_ms = TKD_DEFAULT_TIMEOUT_MS;
    d->transport = -1;
    ncclResult_t r;
    int cdev = -1;
    if ((r = n->CommCuDevice(comm, &cdev)) || (r = n->CommUserRank(comm, &d->rank)) ||
        (r = n->CommCount(comm, &d->nranks))) {
        tk_status st = tkd_nccl_fail(d, r, "comm: asking its device, rank and size");
        free(d);
        return st;
    }
    if (cdev != dev) {
        free(d);
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "comm: it belongs to device %d (ncclCommCuDevice), but device "
                        "%d is current: cudaSetDevice(%d) before tk_dist_create", cdev, dev, cdev);
    }
    int major = 0, minor = 0, mem_khz = 0, bus = 0, least = 0, greatest = 0;
    if ((e = cudaDeviceGetAttribute(&d->sm_count, cudaDevAttrMultiProcessorCount, dev)) ||
        (e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) ||
        (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) ||
        (e = cudaDeviceGetStreamPriorityRange(&least, &greatest))) {
        free(d);
        return tkd_cuda_fail(NULL, e, "tk_dist_create: the device's attributes");
    }
    d->sm = 10 * major + minor;
    /* DRAM bandwidth for the sum's estimate (an attribute CUDA may not report: a guess then) */
    if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, dev) == cudaSuccess && mem_khz > 0 && bus > 0)
        d->hbm_bytes_per_us = 2.0 * mem_khz * 1e3 * bus / 8.0 / 1e6;
    else
        d->hbm_bytes_per_us = 2e6;
    cudaGetLastError();
    tk_status st = tk_create(&d->h);
    if (st) {
        tk_status r2 = tkd_fail(NULL, st, "tk_create: %s", tk_last_error(NULL));
        free(d);
        return r2;
    }
    tk_set_split_k(d->h, TK_SPLIT_K_NEVER);
    /* The exchange's stream outranks the GEMMs': as their blocks retire, the
     * SMs go to the NCCL kernels waiting for one first. */
    if ((e = cudaStreamCreateWithPriority(&d->cs, cudaStreamNonBlocking, greatest)) ||
        (e = cudaEventCreateWithFlags(&d->start, cudaEventDisableTiming)) ||
        (e = cudaEventCreateWithFlags(&d->cs_end, cudaEventDisableTiming)) ||
        (e = cudaEventCreateWithFlags(&d->end, cudaEventDisableTiming))) {
        st = tkd_cuda_fail(NULL, e, "tk_dist_create: a stream or event");
        destroy_parts(d);
        return st;
    }
    const char *env = getenv("TK_DIST_COMM_SMS");
    if (env && *env) {
        char *end = NULL;
        long v = strtol(env, &end, 10);
        if (!end || *end || v < 0 || v >= d->sm_count) {
            st = tkd_fail(NULL, TK_ERR_INVALID_VALUE, "$TK_DIST_COMM_SMS: '%s' is not a count of SMs (0..%d)", env,
                          d->sm_count - 1);
            destroy_parts(d);
            return st;
        }
        tk_dist_set_comm_sms(d, (int)v);
    }
    *out = d;
    return TK_SUCCESS;
}

tk_status tk_dist_destroy(tk_dist d)
{
    if (!d)
        return TK_SUCCESS;
    tkd_begin(d);
    if (d->end_recorded) {
        tk_status st = tkd_wait_event(d, d->end, d->timeout_ms, "tk_dist_destroy: the last call");
        if (st && tkd_ce_abort(d, "tk_dist_destroy's wait for the last call timed out"))
            st = tkd_wait_event(d, d->end, d->timeout_ms, "tk_dist_destroy: the last call, after aborting the "
                                "copy-engine transport's communicator");
        if (st)
            return st;   /* nothing freed: abort the communicator, then destroy again */
    }
    destroy_parts(d);
    return TK_SUCCESS;
}

tk_handle tk_dist_handle(tk_dist d) { return d ? d->h : NULL; }

tk_status tk_dist_set_link_gbps(tk_dist d, double gbps)
{
    if (!d)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "d: NULL");
    tkd_begin(d);
    if (!(gbps >= 0) || !isfinite(gbps))
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "gbps: %g (expected 0: the default, or a bandwidth > 0)", gbps);
    d->link_gbps = gbps;
    return TK_SUCCESS;
}

tk_status tk_dist_set_comm_sms(tk_dist d, int sms)
{
    if (!d)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "d: NULL");
    tkd_begin(d);
    if (sms < 0 || sms >= d->sm_count)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "sms: %d (expected 0..%d: the device has %d SMs)", sms,
                        d->sm_count - 1, d->sm_count);
    tk_status st = tk_set_sm_count(d->h, sms ? d->sm_count - sms : 0);
    if (st)
        return tkd_fail(d, st, "tk_set_sm_count: %s", tk_last_error(d->h));
    d->comm_sms = sms;
    return TK_SUCCESS;
}

tk_status tk_dist_set_timeout(tk_dist d, int timeout_ms)
{
    if (!d)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "d: NULL");
    tkd_begin(d);
    if (timeout_ms < 0)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "timeout_ms: %d is negative (0: the default, %d)", timeout_ms,
                        TKD_DEFAULT_TIMEOUT_MS);
    d->timeout_ms = timeout_ms ? timeout_ms : TKD_DEFAULT_TIMEOUT_MS;
    return TK_SUCCESS;
}

tk_status tk_dist_set_transport(tk_dist d, tk_dist_transport t)
{
    if (!d)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "d: NULL");
    tkd_begin(d);
    if (t != TK_DIST_TRANSPORT_AUTO && t != TK_DIST_TRANSPORT_P2P && t != TK_DIST_TRANSPORT_CE)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "t: %d is not TK_DIST_TRANSPORT_AUTO (0), _P2P (1) or _CE (2)",
                        (int)t);
    const char *missing = tkd_ce_missing(d->nccl);
    if (t == TK_DIST_TRANSPORT_CE && missing) {
        int v = 0;
        d->nccl->GetVersion(&v);
        return tkd_fail(d, TK_ERR_NOT_SUPPORTED, "t: the copy-engine transport needs NCCL 2.28 or newer: NCCL %d "
                        "has no %s", v, missing);
    }
    d->transport = (int)t;
    return TK_SUCCESS;
}

tk_status tk_dist_sync(tk_dist d, int timeout_ms)
{
    if (!d)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "d: NULL");
    tkd_begin(d);
    if (timeout_ms < 0)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "timeout_ms: %d is negative", timeout_ms);
    if (!d->end_recorded)
        return TK_SUCCESS;
    tk_status st = tkd_wait_event(d, d->end, timeout_ms ? timeout_ms : d->timeout_ms, "tk_dist_sync: the last call");
    if (st == TK_ERR_COMM)
        tkd_ce_abort(d, "tk_dist_sync's wait for the last call timed out");
    return st;
}

/* The versioned structs' rule (tilekit.h) for a struct the library fills:
 * at least its first version (`first` bytes), the fields the caller's
 * size holds of the `known` ones, zeros past them. */
static tk_status fill_versioned(tk_dist d, const char *arg, void *out, const void *src, size_t first, size_t known)
{
    if (!out)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "%s: pointer is NULL (expected a struct to fill, its size set)", arg);
    size_t size;
    memcpy(&size, out, sizeof size);
    if (size < first)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "%s->size: %zu is smaller than the struct's first version (%zu "
                        "bytes): initialize it with its _INIT macro", arg, size, first);
    const size_t n = size < known ? size : known;
    memcpy((char *)out + sizeof size, (const char *)src + sizeof size, n - sizeof size);
    memset((char *)out + n, 0, size - n);
    return TK_SUCCESS;
}

tk_status tk_dist_get_info(tk_dist d, tk_dist_info *out)
{
    if (!d)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "d: NULL");
    tkd_begin(d);
    tk_dist_info i = { .size = sizeof i, .rank = d->rank, .nranks = d->nranks, .device = d->device,
                       .link_gbps = tkd_link_gbps(d), .comm_sms = d->comm_sms,
                       .gemm_sms = d->sm_count - d->comm_sms, .last_chunks = d->last_chunks,
                       .workspace_bytes = d->ws_bytes };
    d->nccl->GetVersion(&i.nccl_version);
    return fill_versioned(d, "out", out, &i, sizeof i, sizeof i);
}

tk_status tkd_read_desc(tk_dist d, const tk_dist_desc *in, tk_dist_desc *out)
{
    if (!in)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "desc: pointer is NULL (expected a tk_dist_desc)");
    size_t size;
    memcpy(&size, in, sizeof size);
    if (size < sizeof *out)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "desc->size: %zu is smaller than the first tk_dist_desc (%zu "
                        "bytes): initialize it with TK_DIST_DESC_INIT", size, sizeof *out);
    memcpy(out, in, sizeof *out);
    for (size_t i = sizeof *out; i < size; i++)
        if (((const unsigned char *)in)[i])
            return tkd_fail(d, TK_ERR_NOT_SUPPORTED, "desc: byte %zu is set, but this library knows %zu bytes of "
                            "tk_dist_desc: a field of a newer version, which it cannot honour", i, sizeof *out);
    out->size = sizeof *out;
    return TK_SUCCESS;
}

/* The model's time of the whole local product: tk_candidates' estimate of
 * what auto-dispatch (or the named kernel) would run, on d's handle (its SM
 * count); the flops at 400 TFLOP/s where it cannot say. */
static double gemm_estimate(tk_dist d, const tk_gemm_problem *p, const char *kernel)
{
    tk_candidate c[64];
    c[0].size = sizeof c[0];
    int count = 0;
    double flops = 2.0 * (double)p->m * (double)p->n * (double)p->k;
    if (tk_candidates(d->h, p, c, 64, &count) == TK_SUCCESS)
        for (int i = 0; i < count && i < 64; i++)
            if (c[i].rank > 0 && c[i].est_us > 0 && (!kernel || !strcmp(kernel, "auto") || !strcmp(c[i].name, kernel)))
                return c[i].est_us;
    return flops / 4e8;
}

tk_status tkd_prepare(tk_dist d, tk_dist_op op, const tk_dist_desc *in, void *stream, int model, tkd_prep *p)
{
    if (!d)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "d: NULL (expected a context from tk_dist_create)");
    tkd_begin(d);
    memset(p, 0, sizeof *p);
    tk_status st = tkd_read_desc(d, in, &p->desc);
    if (st)
        return st;
    char why[TKD_ERR_LEN];
    int cur = -1, sdev = -1;
    cudaError_t e = cudaGetDevice(&cur);
    if (e)
        return tkd_cuda_fail(d, e, "cudaGetDevice");
#if CUDART_VERSION >= 13000   /* cudaStreamGetDevice; older runtimes: the stream is not checked */
    if (cudaStreamGetDevice((cudaStream_t)stream, &sdev) != cudaSuccess) {
        cudaGetLastError();
        sdev = -1;
    }
#endif
    p->call = (tkd_call){ .op = op, .rank = d->rank, .nranks = d->nranks, .comm_device = d->device,
                          .device = d->device, .current_device = cur, .stream_device = sdev, .desc = &p->desc };
    if ((st = tkd_check_call(&p->call, why, sizeof why)))
        return tkd_fail(d, st, "%s", why);
    p->call.transport = tkd_transport_choose(d->transport, getenv("TK_DIST_TRANSPORT"), &p->transport_from, why,
                                             sizeof why);
    if (p->call.transport < 0)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "%s", why);
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing((cudaStream_t)stream, &cap) != cudaSuccess) {
        cudaGetLastError();
        cap = cudaStreamCaptureStatusNone;
    }
    if (cap != cudaStreamCaptureStatusNone)
        return tkd_fail(d, TK_ERR_NOT_SUPPORTED, "stream: it is being captured into a CUDA graph, which the "
                        "distributed GEMMs do not support yet (a workspace allocation, the shape check's host wait)");
    const tk_gemm_problem *pb = &p->desc.problem;
    const int R = d->nranks;
    p->block_rows = pb->m / R;
    const int rs = op == TK_DIST_GEMM_REDUCE_SCATTER;
    p->noop = pb->m == 0 || (pb->n == 0 && (rs || !p->desc.gathered));
    const size_t psize = p->desc.partial_type == TK_BF16 ? 2 : 4, csize = pb->c_type == TK_BF16 ? 2 : 4;

    tk_gemm_problem whole = *pb;   /* the local product at once, for the estimate */
    whole.a = whole.b = whole.c = NULL;
    if (rs)
        whole.c_type = (tk_dtype)p->desc.partial_type;
    p->model = (tkd_plan_in){ .op = op, .nranks = R, .block_rows = p->block_rows,
                              .row_bytes = rs ? (double)pb->n * psize : (double)pb->k * 2,
                              .seq_row_bytes = rs ? (double)pb->n * csize : (double)pb->k * 2,
                              .link_bytes_per_us = tkd_link_gbps(d) * 1e3, .m = pb->m,
                              .gemm_launch_us = 4.0, .comm_launch_us = 12.0 };
    if (rs && !p->noop)
        p->model.sum_us = 3.0 + ((double)R * psize + (pb->beta != 0.0f ? 2.0 : 1.0) * csize) * (double)p->block_rows *
                                    (double)pb->n / d->hbm_bytes_per_us;
    int planned = 1;
    const char *env = getenv("TK_DIST_CHUNKS");
    int need_plan = p->desc.chunks == 0 && !(env && *env);
    if (!p->noop && pb->k > 0 && (need_plan || model)) {
        p->model.gemm_us = gemm_estimate(d, &whole, p->desc.kernel);
        planned = tkd_plan_chunks(&p->model, NULL);
    }
    p->chunks = tkd_chunks_choose(p->desc.chunks, env, planned, &p->chunks_from, why, sizeof why);
    if (p->chunks < 0)
        return tkd_fail(d, TK_ERR_INVALID_VALUE, "%s", why);
    p->est_us = p->noop ? 0.0 : tkd_plan_time(&p->model, p->chunks);
    int n = tkd_chunk_bounds(p->block_rows, p->chunks, p->bounds);
    p->chunks = n > 0 ? n : p->chunks;   /* rows fewer than chunks: fewer chunks, the same on every rank */
    if (!p->noop) {
        p->ws_bytes = rs ? (size_t)(2 * R - 1) * (size_t)p->block_rows * (size_t)pb->n * psize
                         : p->desc.gathered ? 0 : (size_t)pb->m * (size_t)pb->k * 2;
        /* CE: the all-gather lands in window 0; the reduce-scatter sends from
         * window 0 and receives in window 1, its own rows' partial in the workspace */
        p->ce_ws_bytes = rs ? (size_t)p->block_rows * (size_t)pb->n * psize : 0;
        p->win_need[0] = tkd_ce_window_bytes(R, p->block_rows, rs ? (size_t)pb->n * psize : (size_t)pb->k * 2);
        p->win_need[1] = rs ? p->win_need[0] : 0;
    }
    return TK_SUCCESS;
}

tk_status tkd_preflight(tk_dist d, const tk_gemm_problem *q, const char *kernel, const char *what)
{
    if (kernel && strcmp(kernel, "auto")) {
        tk_status st = tk_kernel_supports(d->h, kernel, q);
        return st ? tkd_fail(d, st, "%s: %s", what, tk_last_error(d->h)) : TK_SUCCESS;
    }
    if (!tk_select_kernel(d->h, q)) {
        const char *why = tk_last_error(d->h);
        return tkd_fail(d, strstr(why, "no CUDA device") ? TK_ERR_NO_DEVICE : TK_ERR_INVALID_VALUE, "%s: %s", what,
                        why);
    }
    return TK_SUCCESS;
}

const char *tkd_whole_kernel(tk_dist d, const tk_gemm_problem *whole, const char *asked)
{
    if (asked && strcmp(asked, "auto"))
        return asked;
    const char *k = tk_select_kernel(d->h, whole);
    tkd_begin(d);   /* a refusal here is no failure: the chunks then go to auto-dispatch */
    return k;
}

tk_status tk_dist_plan(tk_dist d, tk_dist_op op, const tk_dist_desc *desc, tk_dist_plan_info *out)
{
    tkd_prep p;
    tk_status st = tkd_prepare(d, op, desc, NULL, 1, &p);
    if (st)
        return st;
    tk_dist_plan_info i = { .size = sizeof i, .chunks = p.chunks, .chunks_from = p.chunks_from,
                            .block_rows = p.block_rows, .link_gbps = tkd_link_gbps(d),
                            .gemm_us = p.model.gemm_us,
                            .comm_us = p.noop ? 0.0 : (double)(d->nranks - 1) * p.block_rows * p.model.row_bytes /
                                                          (p.model.link_bytes_per_us > 0 ? p.model.link_bytes_per_us : 1),
                            .sequential_us = p.noop ? 0.0 : tkd_plan_sequential(&p.model),
                            .overlapped_us = p.est_us, .workspace_bytes = p.ws_bytes };
    if ((st = tkd_transport_predict(d, &p, &i.transport, i.transport_why, sizeof i.transport_why)))
        return st;
    if (i.transport == TK_DIST_TRANSPORT_CE) {
        i.workspace_bytes = p.ce_ws_bytes;
        i.window_bytes = p.win_need[0] + p.win_need[1];
    }
    return fill_versioned(d, "out", out, &i, offsetof(tk_dist_plan_info, transport), sizeof i);
}

tk_status tkd_call_begin(tk_dist d, cudaStream_t stream, size_t bytes, int nev)
{
    cudaError_t e;
    if (d->end_recorded && (e = cudaStreamWaitEvent(stream, d->end, 0)))
        return tkd_cuda_fail(d, e, "cudaStreamWaitEvent (the context's previous call)");
    if (nev > d->nev) {
        cudaEvent_t *ev = realloc(d->ev, (size_t)nev * sizeof *ev);
        if (!ev)
            return tkd_fail(d, TK_ERR_ALLOC, "out of host memory (%d events)", nev);
        d->ev = ev;
        for (; d->nev < nev; d->nev++)
            if ((e = cudaEventCreateWithFlags(&d->ev[d->nev], cudaEventDisableTiming)))
                return tkd_cuda_fail(d, e, "cudaEventCreateWithFlags");
    }
    if (bytes > d->ws_bytes) {
        /* stream order: the stream has waited for every earlier user of the old one */
        if (d->ws && (e = cudaFreeAsync(d->ws, stream)))
            return tkd_cuda_fail(d, e, "cudaFreeAsync (the workspace, to grow it)");
        d->ws = NULL;
        d->ws_bytes = 0;
        if ((e = cudaMallocAsync(&d->ws, bytes, stream))) {
            d->ws = NULL;
            return tkd_cuda_fail(d, e, "cudaMallocAsync (the workspace)");
        }
        d->ws_bytes = bytes;
    }
    if ((e = cudaEventRecord(d->start, stream)) || (e = cudaStreamWaitEvent(d->cs, d->start, 0)))
        return tkd_cuda_fail(d, e, "ordering the communication stream after the caller's");
    return TK_SUCCESS;
}

cudaError_t tkd_sig_words(tk_dist d)
{
    cudaError_t e = cudaSuccess;
    if (!d->sig_dev && (e = cudaMalloc((void **)&d->sig_dev, TKD_SIG_WORDS * sizeof(int64_t) * (size_t)d->nranks)))
        d->sig_dev = NULL;
    return e;
}

tk_status tkd_allgather_words(tk_dist d, const int64_t *mine, int words, int64_t *all, const char *what)
{
    const int R = d->nranks;
    const size_t row = (size_t)words * sizeof(int64_t);
    cudaError_t e;
    ncclResult_t r;
    char where[160];
    snprintf(where, sizeof where, "%s: ncclAllGather", what);
    if ((e = tkd_sig_words(d)))
        return tkd_cuda_fail(d, e, where);
    int64_t *slot = d->sig_dev + (size_t)d->rank * words;
    if ((e = cudaMemcpyAsync(slot, mine, row, cudaMemcpyHostToDevice, d->cs)))
        return tkd_cuda_fail(d, e, where);
    if ((r = tkd_nccl_settle(d, d->nccl->AllGather(slot, d->sig_dev, (size_t)words, ncclInt64, d->comm, d->cs))))
        return tkd_nccl_fail(d, r, where);
    if ((e = cudaMemcpyAsync(all, d->sig_dev, row * (size_t)R, cudaMemcpyDeviceToHost, d->cs)) ||
        (e = cudaEventRecord(d->cs_end, d->cs)))
        return tkd_cuda_fail(d, e, where);
    return tkd_wait_event(d, d->cs_end, d->timeout_ms, what);
}

tk_status tkd_check_shapes(tk_dist d, const tkd_prep *p, cudaStream_t stream)
{
    (void)stream;
    const int R = d->nranks;
    int64_t mine[TKD_SIG_WORDS], *all = malloc(TKD_SIG_WORDS * sizeof(int64_t) * (size_t)R);
    if (!all)
        return tkd_fail(d, TK_ERR_ALLOC, "out of host memory (check_shapes)");
    tkd_signature(&p->call, p->chunks, mine);
    tk_status st = tkd_allgather_words(d, mine, TKD_SIG_WORDS, all, "check_shapes: the ranks' shapes");
    char why[TKD_ERR_LEN];
    if (!st && tkd_signature_compare(all, R, d->rank, why, sizeof why))
        st = tkd_fail(d, TK_ERR_INVALID_VALUE, "%s", why);
    free(all);
    return st;
}

tk_status tkd_run(tk_dist d, const tkd_prep *p, const char *kernel, cudaStream_t stream, tkd_path p2p, tkd_path ce)
{
    tk_status st, gst = TK_SUCCESS;
    int t = TK_DIST_TRANSPORT_P2P;
    if (p->desc.check_shapes && (st = tkd_check_shapes(d, p, stream)))
        return st;
    if ((st = tkd_transport_for(d, p, &t)))
        return st;
    const int is_ce = t == TK_DIST_TRANSPORT_CE, c = p->chunks;
    /* events: P2P one per chunk of each peer; CE two per chunk (computed or sent, arrived) */
    if ((st = tkd_call_begin(d, stream, is_ce ? p->ce_ws_bytes : p->ws_bytes, is_ce ? 2 * c : (d->nranks - 1) * c)))
        return st;
    /* CE: the GEMMs leave an SM to the barriers' one-CTA kernels (where
     * tk_dist_set_comm_sms has not set aside more), so that a barrier never
     * waits for a GEMM that holds every SM */
    const int cap = is_ce && d->comm_sms == 0;
    if (cap && (st = tk_set_sm_count(d->h, d->sm_count - TKD_CE_SMS)))
        return tkd_fail(d, st, "tk_set_sm_count: %s", tk_last_error(d->h));
    st = (is_ce ? ce : p2p)(d, p, kernel, stream, &gst);
    if (cap)
        tk_set_sm_count(d->h, 0);
    if (st)
        return st;
    /* the call ends where both streams have: the caller's stream waits for the exchange */
    cudaError_t e;
    if ((e = cudaStreamWaitEvent(stream, d->cs_end, 0)) || (e = cudaEventRecord(d->end, stream)))
        return tkd_cuda_fail(d, e, "ordering the caller's stream after the exchange");
    d->end_recorded = 1;
    d->last_chunks = c;
    return gst;
}

tk_status tk_dist_unique_id(void *id)
{
    tkd_begin(NULL);
    if (!id)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "id: NULL (expected %d bytes to fill)", TK_DIST_UNIQUE_ID_BYTES);
    char why[512];
    const tkd_nccl *n = tkd_nccl_get(why, sizeof why);
    if (!n)
        return tkd_fail(NULL, TK_ERR_COMM, "%s", why);
    ncclUniqueId u;
    ncclResult_t r = n->GetUniqueId(&u);
    if (r)
        return tkd_fail(NULL, TK_ERR_COMM, "ncclGetUniqueId: NCCL error %d (%s)", (int)r, n->GetErrorString(r));
    memcpy(id, &u, sizeof u);
    return TK_SUCCESS;
}

tk_status tk_dist_comm_init(struct ncclComm **out, int nranks, const void *id, int rank)
{
    tkd_begin(NULL);
    if (!out || !id)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "%s: NULL", !out ? "out" : "id");
    *out = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return tkd_fail(NULL, TK_ERR_INVALID_VALUE, "rank %d of %d ranks is not a rank", rank, nranks);
    char why[512];
    const tkd_nccl *n = tkd_nccl_get(why, sizeof why);
    if (!n)
        return tkd_fail(NULL, TK_ERR_COMM, "%s", why);
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = n->CommInitRank(out, nranks, u, rank);
    if (r) {
        *out = NULL;
        return tkd_fail(NULL, TK_ERR_COMM, "ncclCommInitRank (rank %d of %d): NCCL error %d (%s)", rank, nranks,
                        (int)r, n->GetErrorString(r));
    }
    return TK_SUCCESS;
}

static tk_status comm_end(struct ncclComm *comm, int abort_it)
{
    tkd_begin(NULL);
    if (!comm)
        return TK_SUCCESS;
    char why[512];
    const tkd_nccl *n = tkd_nccl_get(why, sizeof why);
    if (!n)
        return tkd_fail(NULL, TK_ERR_COMM, "%s", why);
    ncclResult_t r = abort_it ? n->CommAbort(comm) : n->CommDestroy(comm);
    if (r)
        return tkd_fail(NULL, TK_ERR_COMM, "%s: NCCL error %d (%s)", abort_it ? "ncclCommAbort" : "ncclCommDestroy",
                        (int)r, n->GetErrorString(r));
    return TK_SUCCESS;
}

tk_status tk_dist_comm_destroy(struct ncclComm *comm) { return comm_end(comm, 0); }
tk_status tk_dist_comm_abort(struct ncclComm *comm) { return comm_end(comm, 1); }
