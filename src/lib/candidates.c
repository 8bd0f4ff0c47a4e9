/* candidates.c - tk_workspace_size and tk_candidates: what a problem would
 * take, kernel by kernel, without running it (tilekit.h). Both go through
 * gemm.c's checks and choice (tk_prepare, tk_kernel_check,
 * tk_route_choose), so they answer for exactly the calls tk_gemm_ex
 * makes. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"

tk_status tk_workspace_size(tk_handle h, const tk_gemm_problem *p, const char *kernel, size_t *bytes)
{
    tk_call_begin(h);
    if (!bytes)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "bytes: pointer is NULL (expected a size_t to fill)");
    *bytes = 0;
    tk_args a;
    int noop = 0;
    const tk_kernel *k = NULL;
    tk_status st = tk_prepare(h, p, kernel, &a, &noop, &k, 0);
    if (st || noop || a.k == 0)   /* no-ops and C = beta*C use no workspace */
        return st;
    tk_route r;
    if ((st = tk_route_for(h, &a, k, &r, 1)))
        return st;
    *bytes = tk_route_ws_bytes(h, &r);
    return TK_SUCCESS;
}

/* One entry of the list, before it is written out. */
typedef struct entry {
    const tk_kernel *k;
    tk_status status;
    int group;                   /* 0 auto's copy route, 1 auto's order, 2 never auto (by estimate), 3 refused */
    int pref;                    /* auto-dispatch's preference (group 1) */
    int index;                   /* registry order: the ties' */
    double est_us;
    size_t ws;
    unsigned copies;
} entry;

static int before(const entry *x, const entry *y)
{
    if (x->group != y->group)
        return x->group < y->group;
    if (x->group == 1 && x->pref != y->pref)
        return x->pref > y->pref;
    if (x->group == 2 && x->est_us != y->est_us)
        return x->est_us < y->est_us;
    return x->index < y->index;
}

/* The first version of tk_candidate: up to copies. */
#define TK_CANDIDATE_V1_SIZE (offsetof(tk_candidate, copies) + sizeof(unsigned))

tk_status tk_candidates(tk_handle h, const tk_gemm_problem *p, tk_candidate *out, int capacity, int *count)
{
    tk_call_begin(h);
    if (!count)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "count: pointer is NULL (expected an int to fill)");
    *count = 0;
    if (capacity < 0)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "capacity: %d is negative (expected the entries out holds)",
                       capacity);
    if (capacity > 0 && !out)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "out: pointer is NULL with capacity %d (expected an array of %d "
                       "tk_candidate, or capacity 0 to count)", capacity, capacity);
    size_t stride = 0;
    if (capacity > 0) {
        memcpy(&stride, out, sizeof stride);
        if (stride < TK_CANDIDATE_V1_SIZE)
            return tk_fail(h, TK_ERR_INVALID_VALUE,
                           "out[0].size: %zu is smaller than the first tk_candidate (%zu bytes): initialize it with "
                           "TK_CANDIDATE_INIT (it is the array's stride)",
                           stride, (size_t)TK_CANDIDATE_V1_SIZE);
    }
    tk_args a;
    int noop = 0;
    const tk_kernel *named = NULL;
    tk_status st = tk_prepare(h, p, NULL, &a, &noop, &named, 0);
    if (st || noop || a.k == 0)   /* no GEMM kernel runs */
        return st;
    const int nk = tk_registry_count();
    entry *e = calloc((size_t)nk + 1, sizeof *e);
    if (!e)
        return tk_fail(h, TK_ERR_ALLOC, "tk_candidates: out of host memory");
    int n = 0;
    tk_route r;
    if (tk_route_choose(h, &a, &r, 1) && (r.copy[0] || r.copy[1] || r.copy[2]))
        e[n++] = (entry){ r.k, TK_SUCCESS, 0, 0, -1, tk_cost_us(&r, &a, &h->dev), tk_route_ws_bytes(h, &r),
                          tk_route_copies(&r, p->layout) };
    const tk_kernel *tuned = h->ntune ? tk_tune_find(h->tune, h->ntune, &a) : NULL;
    for (int i = 0; i < nk; i++) {
        const tk_kernel *k = tk_registry_at(i);
        char why[TK_MSG_LEN];
        entry *x = &e[n++];
        memset(x, 0, sizeof *x);
        x->k = k;
        x->index = i;
        tk_route_plan(&a, 0, 0, &r);
        r.k = k;
        x->status = tk_kernel_check(h, k, &a, why, sizeof why);
        if (x->status) {
            tk_note_clear();   /* a refusal of the list, not of the call */
            x->group = 3;
            continue;
        }
        x->pref = tk_auto_rank(h, k, tuned, &a);
        x->group = x->pref > 0 ? 1 : 2;
        x->est_us = tk_cost_us(&r, &a, &h->dev);
        x->ws = tk_route_ws_bytes(h, &r);
    }
    for (int i = 1; i < n; i++)   /* insertion sort: stable, a few dozen entries */
        for (int j = i; j > 0 && before(&e[j], &e[j - 1]); j--) {
            entry t = e[j];
            e[j] = e[j - 1];
            e[j - 1] = t;
        }
    for (int i = 0; i < n && i < capacity; i++) {
        tk_candidate c = { .size = sizeof c };
        c.name = e[i].k->name;
        c.rank = e[i].group < 3 ? i + 1 : 0;
        c.status = e[i].status;
        c.est_us = e[i].est_us;
        c.workspace_bytes = e[i].ws;
        c.copies = e[i].copies;
        char *dst = (char *)out + (size_t)i * stride;
        const size_t known = stride < sizeof c ? stride : sizeof c;
        memcpy(dst, &c, known);   /* the size field too: the stride */
        memcpy(dst, &stride, sizeof stride);
        if (stride > known)
            memset(dst + known, 0, stride - known);
    }
    *count = n;
    free(e);
    return TK_SUCCESS;
}
