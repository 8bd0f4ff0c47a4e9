/* fake_handle.h - a handle made by hand (src/lib/internal.h) for a modeled
 * GPU, for the CPU tests of what needs a device but launches nothing:
 * kernel choice, candidates, workspace sizes, plans. The kernels' compiled
 * attributes, which cudaFuncGetAttributes would give, are filled in by
 * hand (fh_attrs), so every kernel's resource check passes on the model.
 * Nothing made with it may reach a launch: its pointers are fake. */
#ifndef TK_TESTS_FAKE_HANDLE_H
#define TK_TESTS_FAKE_HANDLE_H

#include <stdio.h>
#include <string.h>
#include "lib/internal.h"
#include "check.h"

/* Whether this machine has a GPU (the tests that need one skip otherwise). */
static inline int have_gpu(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    cudaGetLastError();
    return e == cudaSuccess && n > 0;
}

static inline int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }
static inline int starts(const char *s, const char *prefix) { return s && !strncmp(s, prefix, strlen(prefix)); }

/* An H100 SXM as tk_device_query describes it (sm_90: 132 SMs, 1980 MHz,
 * HBM3 at 2619 MHz on a 5120-bit bus), or the same with another sm. */
static inline tk_device fh_device(int sm)
{
    tk_device d;
    memset(&d, 0, sizeof d);
    d.id = 0;
    d.sm = sm;
    d.sm_count = 132;
    d.max_threads_per_block = 1024;
    d.max_threads_per_sm = 2048;
    d.regs_per_block = 65536;
    d.regs_per_sm = 65536;
    d.smem_per_block_optin = 227 * 1024;
    d.smem_per_sm = 228 * 1024;
    d.l2_bytes = 50 << 20;
    d.clock_khz = 1980000;
    d.mem_clock_khz = 2619000;
    d.mem_bus_bits = 5120;
    snprintf(d.name, sizeof d.name, "fake sm_%d", sm);
    return d;
}

/* A real handle (tk_create: it succeeds without a GPU), a failure checked. */
static inline tk_handle make_handle(void)
{
    tk_handle h = NULL;
    tk_status st = tk_create(&h);
    CHECK(st == TK_SUCCESS && h, "tk_create: %s (%s)", tk_status_string(st), tk_last_error(NULL));
    return h;
}

/* Stand-ins for cudaGetDevice in hand-made handles (tk_handle_s.get_device):
 * device 0 current, or device 1 (then a handle of device 0 refuses every
 * call that gets past its argument checks, before any launch). */
static inline cudaError_t fh_current_is_0(int *dev)
{
    *dev = 0;
    return cudaSuccess;
}

static inline cudaError_t fh_current_is_1(int *dev)
{
    *dev = 1;
    return cudaSuccess;
}

/* A handle of device 0, current in the calling thread, on the model. */
static inline void fh_init(struct tk_handle_s *h, int sm)
{
    memset(h, 0, sizeof *h);
    h->have_device = 1;
    h->dev = fh_device(sm);
    h->get_device = fh_current_is_0;
    h->ws_limit = TK_WORKSPACE_UNLIMITED;
}

/* A handle of device 0 while device 1 is current: every call that passes
 * the argument checks is refused after them, naming h, before any launch. */
static inline void fh_other_device(struct tk_handle_s *h)
{
    fh_init(h, 90);
    h->get_device = fh_current_is_1;
}

/* Checks one call's outcome: status want and, for an argument error, a
 * message that starts with `arg` (the argument's name and a colon) and
 * holds each of the NULL-terminated words; label and how (the call) name
 * it in failures. */
static inline void fh_check_outcome(tk_handle h, tk_status st, tk_status want, const char *label, const char *how,
                                    const char *arg, const char *const *words)
{
    const char *msg = tk_last_error(h);
    CHECK(st == want, "%s (%s): got %s, want %s (%s)", label, how, tk_status_string(st), tk_status_string(want), msg);
    if (st != want || !arg)
        return;
    CHECK(starts(msg, arg), "%s (%s): message '%s' does not start with '%s'", label, how, msg, arg);
    for (const char *const *w = words; *w; w++)
        CHECK(contains(msg, *w), "%s (%s): message '%s' lacks '%s'", label, how, msg, *w);
}

/* Adds the attributes of the entry every kernel would launch for a (128
 * registers, 1024 threads: fits any configuration) to h's cache. */
static inline void fh_attrs_args(struct tk_handle_s *h, const tk_args *a)
{
    for (int i = 0; i < tk_registry_count(); i++) {
        tk_resources r;
        tk_kernel_resources(tk_registry_at(i), a, &h->dev, &r);
        int seen = !r.func;
        for (int j = 0; j < h->nattrs && !seen; j++)
            seen = h->attrs[j].func == r.func;
        if (seen || h->nattrs == TK_ATTR_CACHE)
            continue;
        h->attrs[h->nattrs].func = r.func;
        h->attrs[h->nattrs].fa = (tk_func_attrs){ 128, 0, 0, 1024 };
        h->nattrs++;
    }
}

/* The cache made afresh for problem p: as it is and as each copy route
 * runs it (route.c), so auto-dispatch finds every attribute it asks for. */
static inline void fh_attrs(struct tk_handle_s *h, const tk_gemm_problem *p)
{
    tk_args a;
    int noop = 0;
    const tk_kernel *k = NULL;
    h->nattrs = 0;
    if (tk_prepare(h, p, NULL, &a, &noop, &k, 0) != TK_SUCCESS)
        return;
    fh_attrs_args(h, &a);
    for (int stage_c = 0; stage_c < 2; stage_c++) {
        tk_route r;
        tk_route_plan(&a, 1, stage_c, &r);
        fh_attrs_args(h, &r.run);
    }
}

#endif
