/* plan.c - plans (tilekit.h): a problem checked and its route chosen once
 * by tk_plan_create, then run with new pointers by tk_plan_run through the
 * very launch path of tk_gemm_ex (gemm.c's tk_route_run), so a run gives
 * tk_gemm_ex's bits. What a run still checks is what a new pointer can
 * change: NULL where the problem uses it, and alignment, since a
 * misaligned address faults on the GPU and poisons the CUDA context
 * (gemm.c's check_matrix), and a kernel chosen for a 16-byte aligned
 * operand may read it 16 bytes at a time. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

struct tk_plan_s {
    tk_handle h;                 /* the handle it was made with (never dereferenced by tk_plan_destroy) */
    tk_layout layout;            /* column-major: normalization swapped A and B */
    int noop;                    /* M or N == 0: a run does nothing */
    tk_args a;                   /* the normalized problem, with the example pointers */
    tk_route r;                  /* the route; r.k NULL where no GEMM kernel runs (K == 0) */
    size_t need[3];              /* public A, B, C: the alignment a run's pointer needs, bytes */
    int used[3];                 /* whether the problem reads (A, B) or writes (C) it: NULL refused */
};

static const char *const ptr_names[3] = { "a", "b", "c" };

tk_status tk_plan_create(tk_handle h, const tk_gemm_problem *p, const char *kernel, tk_plan *out)
{
    tk_call_begin(h);
    if (!out)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "out: pointer is NULL (expected a tk_plan* to fill)");
    *out = NULL;
    tk_args a;
    int noop = 0;
    const tk_kernel *k = NULL;
    /* the pointers are examples: NULL ones allowed, as for introspection */
    tk_status st = tk_prepare(h, p, kernel, &a, &noop, &k, 0);
    if (st)
        return st;
    struct tk_plan_s *pl = calloc(1, sizeof *pl);
    if (!pl)
        return tk_fail(h, TK_ERR_ALLOC, "tk_plan_create: out of host memory");
    pl->h = h;
    pl->layout = p->layout;
    pl->noop = noop;
    pl->a = a;
    tk_route_plan(&a, 0, 0, &pl->r);   /* no kernel: a no-op, or K == 0 */
    if (!noop && a.k > 0 && (st = tk_route_for(h, &a, k, &pl->r, 1))) {
        free(pl);
        return st;
    }
    /* What a run's pointers need: their element size where nothing reads
     * them but a copy or the K == 0 scaling (which take any element
     * address), else the alignment the kernel was judged with, up to 16
     * bytes (no kernel asks more: tk_check_align, tk_route_aligned); a NULL
     * example was judged as aligned. */
    const int swap = p->layout == TK_COL_MAJOR;
    const void *ptr[3] = { a.a, a.b, a.c };
    for (int w = 0; w < 3; w++) {
        const size_t esz = w < 2 ? 2 : a.c_type == TK_F32 ? 4 : 2;
        const uintptr_t v = (uintptr_t)ptr[w];
        size_t need = esz;
        if (pl->r.k && !pl->r.copy[w])
            need = !v || (v & -v) >= 16 ? 16 : (size_t)(v & -v);
        const int pub = swap && w < 2 ? 1 - w : w;
        pl->need[pub] = need;
    }
    pl->used[0] = pl->used[1] = !noop && a.k > 0;
    pl->used[2] = !noop;
    *out = pl;
    return TK_SUCCESS;
}

tk_status tk_plan_run(tk_handle h, tk_plan plan, const void *a, const void *b, void *c, void *stream)
{
    if (!h)
        return tk_fail(NULL, TK_ERR_INVALID_VALUE, "h: handle is NULL (expected the plan's)");
    tk_call_begin(h);
    if (!plan)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "plan: pointer is NULL (expected one from tk_plan_create)");
    if (plan->h != h)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "h: the plan was made with another handle (%p); a plan runs on its own handle only",
                       (void *)plan->h);
    const void *ptrs[3] = { a, b, c };
    for (int w = 0; w < 3; w++) {
        if (plan->used[w] && !ptrs[w])
            return tk_fail(h, TK_ERR_INVALID_VALUE, "%s: pointer is NULL (expected device memory)", ptr_names[w]);
        if ((uintptr_t)ptrs[w] % plan->need[w])
            return tk_fail(h, TK_ERR_INVALID_VALUE,
                           "%s: pointer %p is not %zu-byte aligned (the plan's %s: %s)", ptr_names[w], ptrs[w],
                           plan->need[w], w == 0 ? "A" : w == 1 ? "B" : "C",
                           plan->need[w] <= 4 ? "the address of an element"
                                              : "its kernel was chosen for an operand aligned so");
    }
    if (plan->noop)
        return TK_SUCCESS;
    if (!h->have_device)
        return tk_fail(h, TK_ERR_NO_DEVICE, "%s", h->device_error);
    tk_status st = tk_check_device(h);
    if (st)
        return st;
    tk_args args = plan->a;
    const int swap = plan->layout == TK_COL_MAJOR;
    args.a = swap ? b : a;
    args.b = swap ? a : b;
    args.c = c;
    cudaStream_t s = (cudaStream_t)stream;
    if (args.k == 0)
        return tk_scale_c_only(h, &args, s);
    const int graph = tk_stream_capturing(s);
    if (graph && plan->r.bytes) {
        char name[TK_MSG_LEN];
        tk_route_name(&plan->r, name, sizeof name);
        return tk_fail(h, TK_ERR_NOT_SUPPORTED,
                       "plan: it runs %s, and copies are not made on a stream being captured into a CUDA graph "
                       "(they need the handle's workspace); tk_gemm_ex chooses another kernel there",
                       name);
    }
    tk_route r = plan->r;
    if (!r.copy[0])
        r.run.a = args.a;
    if (!r.copy[1])
        r.run.b = args.b;
    if (!r.copy[2])
        r.run.c = args.c;
    return tk_route_run(h, &r, &args, s, graph);
}

const char *tk_plan_kernel(tk_plan plan)
{
    if (!plan)
        return NULL;
    return plan->r.k ? plan->r.k->name : "";
}

tk_status tk_plan_destroy(tk_plan plan)
{
    free(plan);
    return TK_SUCCESS;
}
