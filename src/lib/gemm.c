/* gemm.c - argument checks, normalization to row-major, kernel choice,
 * resource check, launch. Every refusal names the argument and what was
 * expected; nothing is launched (and C is not touched) unless all checks
 * pass. */
#include <stdio.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>
#include "internal.h"

static const char *op_name(tk_op op) { return op == TK_OP_N ? "N" : "T"; }

/* 1 when a matrix of `lines` lines of `len` elements, `ld` elements apart
 * (len <= ld), spans more than INT64_MAX bytes of esz-byte elements: the
 * byte offsets into it would not fit in int64 (nor ptrdiff_t), so it cannot
 * be addressed. Its span is the offset of its last element plus one,
 * (lines - 1) * ld + len elements; an empty matrix spans none. Written with
 * divisions so the test itself cannot overflow. */
static int span_overflows(int64_t lines, int64_t len, int64_t ld, int64_t esz)
{
    if (lines == 0 || len == 0)
        return 0;
    int64_t max_elems = INT64_MAX / esz;
    return len > max_elems || lines - 1 > (max_elems - len) / ld;
}

tk_status tk_check_matrix(tk_handle h, const char *what, const char *ldname, tk_layout layout, tk_op op,
                          int64_t r, int64_t c, int64_t ld, int64_t esz, const void *ptr, int used)
{
    int64_t sr = op == TK_OP_N ? r : c;   /* stored rows */
    int64_t sc = op == TK_OP_N ? c : r;   /* stored cols */
    int64_t len = layout == TK_ROW_MAJOR ? sc : sr;    /* elements per line */
    int64_t lines = layout == TK_ROW_MAJOR ? sr : sc;
    int64_t need = len < 1 ? 1 : len;
    const char *major = layout == TK_ROW_MAJOR ? "row" : "column";
    if (ld < need)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "%s: %" PRId64 " is too small: %s is stored %" PRId64 " x %" PRId64 " (%s-major, op %s), "
                       "so %s must be >= %" PRId64,
                       ldname, ld, what, sr, sc, major, op_name(op), ldname, need);
    if (span_overflows(lines, len, ld, esz))
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "%s: %s is too large: stored %" PRId64 " x %" PRId64 " (%s-major, op %s) with %s %" PRId64
                       " and %" PRId64 "-byte elements, it spans more than INT64_MAX bytes",
                       ldname, what, sr, sc, major, op_name(op), ldname, ld, esz);
    if (used && !ptr)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "%s: pointer is NULL (expected device memory)", what);
    /* A misaligned element address faults on the GPU (cudaErrorMisalignedAddress),
     * which poisons the whole CUDA context: refuse it here, before any device call. */
    if ((uintptr_t)ptr % (uintptr_t)esz)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "%s: pointer %p is not %" PRId64 "-byte aligned (expected the address of a %s element: a "
                       "multiple of %" PRId64 ")",
                       what, ptr, esz, esz == 2 ? "2-byte bf16" : "4-byte fp32", esz);
    return TK_SUCCESS;
}

/* need_ptrs = 0 for introspection (tk_kernel_supports, tk_select_kernel),
 * whose problems may carry NULL pointers. w: the columns of B and C where
 * they are not N (an epilogue's, tk_widths); NULL: a plain problem. */
static tk_status normalize(tk_handle h, const tk_gemm_problem *p, tk_args *o, int *noop, int need_ptrs,
                           const tk_widths *w)
{
    if (!p)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "problem: pointer is NULL");
    if (p->layout != TK_ROW_MAJOR && p->layout != TK_COL_MAJOR)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "layout: %d is not TK_ROW_MAJOR (0) or TK_COL_MAJOR (1)",
                       (int)p->layout);
    if (p->op_a != TK_OP_N && p->op_a != TK_OP_T)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "op_a: %d is not TK_OP_N (0) or TK_OP_T (1)", (int)p->op_a);
    if (p->op_b != TK_OP_N && p->op_b != TK_OP_T)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "op_b: %d is not TK_OP_N (0) or TK_OP_T (1)", (int)p->op_b);
    if (p->c_type != TK_F32 && p->c_type != TK_BF16)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "c_type: %d is not TK_F32 (0) or TK_BF16 (1)", (int)p->c_type);
    if (p->m < 0)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "m: %" PRId64 " is negative (expected >= 0)", p->m);
    if (p->n < 0)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "n: %" PRId64 " is negative (expected >= 0)", p->n);
    if (p->k < 0)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "k: %" PRId64 " is negative (expected >= 0)", p->k);
    int mn = need_ptrs && p->m > 0 && p->n > 0;
    int mnk = mn && p->k > 0;
    tk_status st;
    int64_t c_bytes = p->c_type == TK_F32 ? 4 : 2;
    const int64_t b_cols = w ? w->b_cols : p->n, c_cols = w ? w->c_cols : p->n;
    const int64_t ab = w && w->ab_bytes ? w->ab_bytes : 2;
    if ((st = tk_check_matrix(h, "A", "lda", p->layout, p->op_a, p->m, p->k, p->lda, ab, p->a, mnk)) ||
        (st = tk_check_matrix(h, "B", "ldb", p->layout, p->op_b, p->k, b_cols, p->ldb, ab, p->b, mnk)) ||
        (!(w && w->c_unused) &&
         (st = tk_check_matrix(h, "C", "ldc", p->layout, TK_OP_N, p->m, c_cols, p->ldc, c_bytes, p->c, mn))))
        return st;
    memset(o, 0, sizeof *o);
    o->k = p->k;
    o->c = p->c;
    o->ldc = p->ldc;
    o->c_type = p->c_type;
    o->alpha = p->alpha;
    o->beta = p->beta;
    if (p->layout == TK_ROW_MAJOR) {
        o->m = p->m; o->n = p->n;
        o->a = p->a; o->lda = p->lda; o->op_a = p->op_a;
        o->b = p->b; o->ldb = p->ldb; o->op_b = p->op_b;
    } else {
        /* column-major C = op(A) op(B)  <=>  row-major C^T = op(B)^T op(A)^T */
        o->m = p->n; o->n = p->m;
        o->a = p->b; o->lda = p->ldb; o->op_a = p->op_b;
        o->b = p->a; o->ldb = p->lda; o->op_b = p->op_a;
    }
    *noop = p->m == 0 || p->n == 0;
    return TK_SUCCESS;
}

tk_status tk_problem_normalize(tk_handle h, const tk_gemm_problem *p, tk_args *o, int *noop)
{
    return normalize(h, p, o, noop, 1, NULL);
}

static tk_status find_kernel(tk_handle h, const char *name, const tk_kernel **out)
{
    *out = tk_registry_find(name);
    if (*out)
        return TK_SUCCESS;
    /* Every name, never cut (tests/host/test_api.c checks the last one is
     * there): the list has half of a message (TK_ERR_LEN), the echo of the
     * caller's string at most 100 characters. */
    char known[TK_ERR_LEN / 2] = "";
    size_t used = 0;
    for (int i = 0; i < tk_registry_count() && used + 2 < sizeof known; i++) {
        int w = snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", tk_registry_at(i)->name);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    return tk_fail(h, TK_ERR_INVALID_VALUE, "kernel: unknown kernel '%.100s%s' (expected \"auto\" or one of: %s)",
                   name, strlen(name) > 100 ? "..." : "", known);
}

/* Support + resource check of one kernel on h's device; the reason of a
 * refusal in why (nothing recorded on h: auto-dispatch asks this of every
 * candidate, and a refused candidate is no failure of the call). */
tk_status tk_kernel_check(tk_handle h, const tk_kernel *k, const tk_args *a, char *why, size_t len)
{
    if (h->dev.sm < k->min_sm) {
        snprintf(why, len, "kernel %s needs sm_%d or newer; this GPU (%s) is sm_%d", k->name, k->min_sm,
                 h->dev.name, h->dev.sm);
        return TK_ERR_ARCH_MISMATCH;
    }
    const unsigned missing = tk_args_needs(a) & ~k->family->accepts;
    if (missing) {
        snprintf(why, len, "kernel %s (family %s) does not take %s", k->name, k->family->name,
                 missing & TK_ACCEPT_C_F32    ? "fp32 C"
                 : missing & TK_ACCEPT_C_BF16 ? "bf16 C"
                 : missing & TK_ACCEPT_AB_BF16 ? "bf16 A and B"
                 : missing & TK_ACCEPT_AB_FP8 ? "FP8 A and B (tk_gemm_desc's a_fp8, b_fp8)"
                 : missing & TK_ACCEPT_EPILOGUE ? "epilogues (tk_gemm_desc's epilogue fields)"
                 : missing & TK_ACCEPT_BATCHED ? "batched products (TK_GROUP_BATCHED)"
                 : missing & TK_ACCEPT_GROUPED ? "grouped products (offsets in device memory)"
                                               : "a single product");
        return TK_ERR_NOT_SUPPORTED;
    }
    char r_why[TK_MSG_LEN] = "";
    tk_status st = tk_kernel_supports_args(k, a, &h->dev, r_why, sizeof r_why);
    if (st != TK_SUCCESS) {
        snprintf(why, len, "kernel %s: %s", k->name, r_why);
        return st;
    }
    tk_resources r;
    tk_kernel_resources(k, a, &h->dev, &r);
    const tk_func_attrs *fa = NULL;
    if (r.func) {
        for (int i = 0; i < h->nattrs && !fa; i++)
            if (h->attrs[i].func == r.func)
                fa = &h->attrs[i].fa;
        if (!fa && h->nattrs < TK_ATTR_CACHE &&
            tk_func_attrs_get(r.func, &h->attrs[h->nattrs].fa, r_why, sizeof r_why) == TK_SUCCESS) {
            h->attrs[h->nattrs].func = r.func;
            fa = &h->attrs[h->nattrs++].fa;
        }
    }
    st = tk_check_resources(k, &r, &h->dev, fa, r_why, sizeof r_why);
    if (st != TK_SUCCESS)
        snprintf(why, len, "kernel %s: %s", k->name, r_why);
    return st;
}

/* kernel_check for a kernel the caller named: a refusal is the call's failure. */
static tk_status kernel_fits(tk_handle h, const tk_kernel *k, const tk_args *a)
{
    char why[TK_MSG_LEN] = "";
    tk_status st = tk_kernel_check(h, k, a, why, sizeof why);
    return st ? tk_fail(h, st, "%s", why) : TK_SUCCESS;
}

/* A kernel's auto-dispatch preference for a (0: never auto). */
static int rank_of(const tk_handle h, const tk_kernel *k, const tk_args *a)
{
    if (k->auto_rank <= 0)
        return 0;
    return tk_kernel_rank(k, a, &h->dev);
}

/* The rank of the kernel the tune cache names for a problem: above all. */
#define TK_TUNE_RANK 1000

int tk_auto_rank(tk_handle h, const tk_kernel *k, const tk_kernel *tuned, const tk_args *a)
{
    return k == tuned ? TK_TUNE_RANK : rank_of(h, k, a);
}

/* The highest-ranked kernel that fits a, or NULL; *rank its rank. */
static const tk_kernel *best_fit(tk_handle h, const tk_args *a, int *rank)
{
    const tk_kernel *best = NULL, *tuned = h->ntune ? tk_tune_find(h->tune, h->ntune, a) : NULL;
    int best_rank = 0;
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        int r = tk_auto_rank(h, k, tuned, a);
        if (r <= best_rank)
            continue;
        char why[TK_MSG_LEN];
        if (tk_kernel_check(h, k, a, why, sizeof why) == TK_SUCCESS) {
            best = k;
            best_rank = r;
        } else {
            tk_note_clear();   /* a refused candidate is no failure of the call */
        }
    }
    *rank = best_rank;
    return best;
}

/* Auto-dispatch: the best kernel for the problem as it is, or (copies != 0)
 * for copies of its misaligned operands (FP8: and of those not K-major)
 * when that gets a higher-ranked kernel (route.c). */
int tk_route_choose(tk_handle h, const tk_args *a, tk_route *r, int copies)
{
    int rank = 0, t_rank = 0;
    tk_route_plan(a, 0, 0, r);
    r->k = best_fit(h, a, &rank);
    if (copies && !tk_route_tiny(a)) {
        for (int stage_c = 0; stage_c < 2; stage_c++) {
            tk_route t;
            tk_route_plan(a, 1, stage_c, &t);
            /* a candidate only where it copies what the one before did not */
            if (stage_c ? !t.copy[2] : !t.copy[0] && !t.copy[1])
                continue;
            t.k = best_fit(h, &t.run, &t_rank);
            if (t.k && t_rank > rank) {
                *r = t;
                rank = t_rank;
            }
        }
    }
    return r->k != NULL;
}

tk_status tk_route_select(tk_handle h, const tk_args *a, tk_route *r, int copies)
{
    if (!tk_route_choose(h, a, r, copies))
        return tk_fail(h, TK_ERR_NOT_SUPPORTED, "auto: no kernel supports this problem on %s (sm_%d)", h->dev.name,
                       h->dev.sm);
    return TK_SUCCESS;
}

tk_status tk_route_for(tk_handle h, const tk_args *a, const tk_kernel *k, tk_route *r, int copies)
{
    if (!k)
        return tk_route_select(h, a, r, copies);
    tk_route_plan(a, 0, 0, r);   /* a named kernel runs the problem as it is */
    r->k = k;
    return kernel_fits(h, k, a);
}

/* The handle's workspaces, cuBLAS handle and cached attributes belong to
 * the device that was current at tk_create: a call from a thread where
 * another device is current is refused (switching devices behind the
 * caller's back would surprise the rest of its code). */
tk_status tk_check_device(tk_handle h)
{
    int cur = -1;
    cudaError_t e = h->get_device ? h->get_device(&cur) : cudaGetDevice(&cur);
    if (e != cudaSuccess) {
        cudaGetLastError();
        tk_note_cuda_error((int)e);
        return tk_fail(h, TK_ERR_CUDA, "cudaGetDevice: %s", cudaGetErrorString(e));
    }
    if (cur != h->dev.id)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "h: the handle belongs to device %d (current when tk_create made it), but device %d is "
                       "current in this thread (expected cudaSetDevice(%d) before the call, or a handle created "
                       "on device %d)",
                       h->dev.id, cur, h->dev.id, cur);
    return TK_SUCCESS;
}

static int is_auto(const char *name) { return !name || !*name || !strcmp(name, "auto"); }

tk_status tk_prepare_widths(tk_handle h, const tk_gemm_problem *p, const char *name, tk_args *a, int *noop,
                            const tk_kernel **k, int need_ptrs, const tk_widths *w)
{
    if (!h)
        return tk_fail(NULL, TK_ERR_INVALID_VALUE, "h: handle is NULL (expected one from tk_create)");
    tk_call_begin(h);
    tk_status st = normalize(h, p, a, noop, need_ptrs, w);
    if (st)
        return st;
    *k = NULL;
    return is_auto(name) ? TK_SUCCESS : find_kernel(h, name, k);
}

tk_status tk_prepare_args(tk_handle h, const tk_gemm_problem *p, const char *name, tk_args *a, int *noop,
                          const tk_kernel **k, int need_ptrs)
{
    return tk_prepare_widths(h, p, name, a, noop, k, need_ptrs, NULL);
}

tk_status tk_device_ready(tk_handle h)
{
    if (!h->have_device)
        return tk_fail(h, TK_ERR_NO_DEVICE, "%s", h->device_error);
    return tk_check_device(h);
}

/* Shared front half of tk_gemm_ex, tk_kernel_supports, tk_select_kernel
 * and the calls of plan.c and candidates.c. A no-op (M or N == 0) succeeds
 * here even without a GPU: it needs none. */
tk_status tk_prepare(tk_handle h, const tk_gemm_problem *p, const char *name, tk_args *a, int *noop,
                     const tk_kernel **k, int need_ptrs)
{
    tk_status st = tk_prepare_args(h, p, name, a, noop, k, need_ptrs);
    return st || *noop ? st : tk_device_ready(h);
}

/* The cuBLAS entry runs on the handle's cuBLAS handle and workspace. */
static int is_cublas(const tk_kernel *k) { return !strcmp(k->name, "cublas"); }

/* Whether the work enqueued on s is being captured into a CUDA graph. A
 * captured call is replayed as it was captured, any number of times, while
 * the handle goes on serving other calls, so it takes nothing from the
 * handle that replays could not share or that later calls change:
 * - no split workspace: its launch number would repeat, and the last slice
 *   of a replay, finding the flags already at that number, would add the
 *   previous replay's partial sums;
 * - no copies of misaligned operands: the copy workspace is freed and
 *   reallocated when a later call needs more (a replay would write freed
 *   memory); auto-dispatch picks among the kernels that take the operands
 *   as they are;
 * - no cuBLAS workspace (the same reason): cuBLAS runs without one (its
 *   handle is created on first use even under capture, in relaxed capture
 *   mode: cublasCreate enqueues nothing; handle.c);
 * - no ordering of the handle's workspaces across streams, as it uses none:
 *   a replay would wait for the event of a call long past, or re-record it
 *   behind the handle's back.
 * A capture that cannot be asked about (the legacy stream while another
 * captures) is treated as none: the launch then fails as CUDA decides. */
int tk_stream_capturing(cudaStream_t s)
{
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return cs != cudaStreamCaptureStatusNone;
}

size_t tk_call_kws(tk_handle h, const tk_kernel *k, const tk_args *a, size_t *nflags)
{
    *nflags = 0;
    return h->split_never ? 0 : tk_kernel_workspace(k, a, &h->dev, nflags);
}

size_t tk_route_ws_bytes(tk_handle h, const tk_route *r)
{
    if (is_cublas(r->k))
        return h->split_never ? 0 : TK_CUBLAS_WORKSPACE;
    size_t nflags = 0;
    const size_t kws = tk_call_kws(h, r->k, &r->run, &nflags);
    /* a caller's workspace lays them out so (workspace.c) */
    return r->bytes + (kws ? (nflags * sizeof(uint32_t) + 255) / 256 * 256 + kws : 0);
}

/* Launches kernel k on a with the workspaces w of the call (tk_call_ws):
 * cuBLAS gets its handle and its workspace, a kernel with a workspace
 * function its partial sums and flags (none: it runs unsplit). */
static tk_status launch(tk_handle h, const tk_kernel *k, tk_args *a, const tk_call_ws *w, cudaStream_t stream)
{
    tk_status st;
    if (is_cublas(k)) {
        if ((st = tk_handle_cublas(h)))
            return st;
        a->cublas = h->cublas;
        a->kws = w->cublas;
        a->kws_bytes = w->cublas_bytes;
    } else if (w->kws) {
        a->kws = w->kws;
        a->kws_bytes = w->kws_bytes;
        a->flags = w->flags;
        a->nflags = w->nflags;
        a->seq = w->seq;
    }
    a->lc = &h->lc;
    char why[TK_MSG_LEN] = "";
    st = tk_kernel_launch(k, a, &h->dev, stream, why, sizeof why);
    return st ? tk_fail(h, st, "kernel %s: %s", k->name, why) : TK_SUCCESS;
}

/* Copies in, the kernel, C back; ordered after the handle's previous call
 * that used a device workspace of the handle (copies of operands, the
 * kernel's own workspace, cuBLAS's), where this one uses one too (handle.c).
 * graph: the call is being captured (tk_stream_capturing()): no workspace
 * at all. Split-K off (tk_set_split_k): no kernel workspace, and cuBLAS
 * none either. */
tk_status tk_route_run(tk_handle h, tk_route *r, const tk_args *a, cudaStream_t s, int graph)
{
    size_t nflags = 0;
    const size_t kws = graph ? 0 : tk_call_kws(h, r->k, &r->run, &nflags);
    const int cublas_ws = is_cublas(r->k) && !graph && !h->split_never;
    const int ws = !graph && (r->bytes || kws || cublas_ws);
    tk_call_ws w;
    memset(&w, 0, sizeof w);
    tk_status st = ws ? tk_handle_ws_begin(h, s) : TK_SUCCESS;
    if (st)
        return st;
    if (ws)
        st = tk_handle_call_ws(h, r->bytes, kws, nflags, cublas_ws, &w, s);
    if (!st && r->bytes)
        st = tk_route_copy_in(h, r, a, w.copy, s);
    if (!st)
        st = launch(h, r->k, &r->run, &w, s);
    if (!st)
        st = tk_route_copy_out(h, r, a, s);
    if (ws)
        tk_handle_ws_end(h, s);
    return st;
}

/* K == 0: C = beta * C, the whole of the product (tk_gemm_ex and plans). */
tk_status tk_scale_c_only(tk_handle h, const tk_args *a, cudaStream_t s)
{
    char why[TK_MSG_LEN] = "";
    tk_status st = tk_launch_scale_c(a, s, why, sizeof why);
    return st ? tk_fail(h, st, "scale C by beta (K = 0): %s", why) : TK_SUCCESS;
}

tk_status tk_run_args(tk_handle h, const tk_args *a, const tk_kernel *k, cudaStream_t s)
{
    const int graph = tk_stream_capturing(s);
    tk_route r;
    /* many products take no copies: their operands are whole arrays of
     * matrices; nor does an epilogue (its D, aux, bias and b_up are more
     * operands than the copy route stages): a kernel that cannot take the
     * operands as they are refuses them */
    tk_status st = tk_route_for(h, a, k, &r, !graph && !a->grp && !a->epi);
    return st ? st : tk_route_run(h, &r, a, s, graph);
}

tk_status tk_gemm_ex(tk_handle h, const tk_gemm_problem *p, const char *kernel, void *stream)
{
    tk_args a;
    int noop = 0;
    const tk_kernel *k = NULL;
    tk_status st = tk_prepare(h, p, kernel, &a, &noop, &k, 1);
    if (st || noop)
        return st;
    cudaStream_t s = (cudaStream_t)stream;
    return a.k == 0 ? tk_scale_c_only(h, &a, s) : tk_run_args(h, &a, k, s);
}

/* The size of the first tk_gemm_desc: the size field and the problem. */
#define TK_DESC_V1_SIZE (offsetof(tk_gemm_desc, problem) + sizeof(tk_gemm_problem))

/* d read as this library knows it (tilekit.h's rule, tk_read_versioned). */
static tk_status read_desc(tk_handle h, const tk_gemm_desc *d, tk_gemm_desc *out)
{
    return tk_read_versioned(h, "d", "tk_gemm_desc", "TK_GEMM_DESC_INIT", d, out, sizeof *out, TK_DESC_V1_SIZE);
}

tk_status tk_fields_unset(tk_handle h, const tk_field *f, size_t n, const char *because, const char *fix)
{
    for (size_t i = 0; i < n; i++)
        if (f[i].set)
            return tk_fail(h, TK_ERR_INVALID_VALUE, "%s: is set, but %s (expected 0, or %s)", f[i].name, because, fix);
    return TK_SUCCESS;
}

tk_status tk_gemm_run(tk_handle h, const tk_gemm_desc *d, const char *kernel, void *stream)
{
    if (!h)
        return tk_fail(NULL, TK_ERR_INVALID_VALUE, "h: handle is NULL (expected one from tk_create)");
    tk_call_begin(h);
    tk_gemm_desc desc;
    tk_status st = read_desc(h, d, &desc);
    if (st)
        return st;
    if (desc.a_fp8 || desc.b_fp8)
        return tk_fp8_run(h, &desc, kernel, stream);
    if ((st = tk_fp8_none_check(h, &desc)))
        return st;
    if (desc.epilogue)
        return tk_epilogue_run(h, &desc, kernel, stream);
    if ((st = tk_epi_none_check(h, &desc)))
        return st;
    if (desc.group_kind)
        return tk_grouped_run(h, &desc, kernel, stream);
    return (st = tk_group_none_check(h, &desc)) ? st : tk_gemm_ex(h, &desc.problem, kernel, stream);
}

tk_status tk_gemm(tk_handle h, tk_layout layout, tk_op op_a, tk_op op_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const void *a, int64_t lda, const void *b, int64_t ldb, float beta, void *c,
                  tk_dtype c_type, int64_t ldc, const char *kernel, void *stream)
{
    tk_gemm_problem p = { layout, op_a, op_b, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc, c_type };
    return tk_gemm_ex(h, &p, kernel, stream);
}

tk_status tk_kernel_supports(tk_handle h, const char *kernel, const tk_gemm_problem *p)
{
    tk_args a;
    int noop = 0;
    const tk_kernel *k = NULL;
    tk_status st = tk_prepare(h, p, kernel, &a, &noop, &k, 0);
    if (st || noop || a.k == 0)   /* no-ops and C = beta*C never reach a kernel */
        return st;
    if (!k) {
        tk_route r;
        return tk_route_select(h, &a, &r, 1);
    }
    return kernel_fits(h, k, &a);
}

tk_status tk_select_route(tk_handle h, const tk_gemm_problem *p, tk_route *r)
{
    tk_args a;
    int noop = 0;
    const tk_kernel *k = NULL;
    memset(r, 0, sizeof *r);
    tk_status st = tk_prepare(h, p, NULL, &a, &noop, &k, 0);
    if (st)
        return st;
    if (!h->have_device)   /* a no-op passes prepare without one, but choosing needs the GPU */
        return tk_fail(h, TK_ERR_NO_DEVICE, "%s", h->device_error);
    return tk_route_select(h, &a, r, 1);
}

const char *tk_select_kernel(tk_handle h, const tk_gemm_problem *p)
{
    tk_route r;
    return tk_select_route(h, p, &r) ? NULL : r.k->name;
}

int tk_kernel_count(void) { return tk_registry_count(); }

tk_status tk_kernel_get(int index, tk_kernel_props *out)
{
    if (!out)
        return tk_fail(NULL, TK_ERR_INVALID_VALUE, "out: pointer is NULL");
    if (index < 0 || index >= tk_registry_count())
        return tk_fail(NULL, TK_ERR_INVALID_VALUE, "index: %d is out of range (expected 0..%d)", index,
                       tk_registry_count() - 1);
    const tk_kernel *k = tk_registry_at(index);
    out->name = k->name;
    out->description = k->description;
    out->min_sm = k->min_sm;
    out->bm = k->bm;
    out->bn = k->bn;
    return TK_SUCCESS;
}
