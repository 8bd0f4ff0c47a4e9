/* registry.c - the table of kernel families and their configurations
 * (src/kernels/table.def), and the checks every kernel shares: alignment
 * and the resource budget. */
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "internal.h"

/* Each family's functions, defined beside its core in src/kernels/. */
#define TK_FAMILY(f, min_sm, accepts, est_pct, description) extern const tk_family_ops tk_ops_##f;
#include "../kernels/table.def"

/* Family indices, and their minimum SM as constants for the rows below. */
enum {
#define TK_FAMILY(f, min_sm, accepts, est_pct, description) TK_FAM_##f,
#include "../kernels/table.def"
    TK_NFAMILIES
};
enum {
#define TK_FAMILY(f, min_sm, accepts, est_pct, description) TK_MIN_SM_##f = min_sm,
#include "../kernels/table.def"
};

static const tk_family families[TK_NFAMILIES] = {
#define TK_FAMILY(f, min_sm, accepts, est_pct, description) { #f, description, min_sm, accepts, &tk_ops_##f, est_pct },
#include "../kernels/table.def"
};

static const tk_kernel registry[] = {
#define TK_CONFIG(name, f, bm, bn, bk, wm, wn, swap, first_rank, auto_rank, description) \
    { #name, description, &families[TK_FAM_##f], TK_MIN_SM_##f, bm, bn, bk, wm, wn, swap, first_rank, auto_rank },
#include "../kernels/table.def"
};

int tk_registry_count(void) { return (int)(sizeof registry / sizeof registry[0]); }

const tk_kernel *tk_registry_at(int i)
{
    return i >= 0 && i < tk_registry_count() ? &registry[i] : NULL;
}

const tk_kernel *tk_registry_find(const char *name)
{
    if (!name)
        return NULL;
    for (int i = 0; i < tk_registry_count(); i++)
        if (!strcmp(registry[i].name, name))
            return &registry[i];
    return NULL;
}

int tk_family_count(void) { return TK_NFAMILIES; }

const tk_family *tk_family_at(int i)
{
    return i >= 0 && i < TK_NFAMILIES ? &families[i] : NULL;
}

tk_status tk_check_align(const tk_args *a, int ab_elems, int c_elems, char *why, size_t len)
{
    /* elems elements of A/B (2 bytes) and of C (2 or 4 bytes) per vector access */
    size_t cb = a->c_type == TK_F32 ? 4 : 2;
    struct { const char *name; const void *p; int64_t ld; size_t esz; int elems; } m[] = {
        { "A", a->a, a->lda, 2, ab_elems }, { "B", a->b, a->ldb, 2, ab_elems }, { "C", a->c, a->ldc, cb, c_elems },
    };
    for (int i = 0; i < 3; i++) {
        int elems = m[i].elems;
        if (elems <= 1)
            continue;
        size_t bytes = (size_t)elems * m[i].esz;
        if (m[i].ld % elems) {
            snprintf(why, len, "leading dimension of %s (%lld) must be a multiple of %d elements", m[i].name,
                     (long long)m[i].ld, elems);
            return TK_ERR_NOT_SUPPORTED;
        }
        if ((uintptr_t)m[i].p % bytes) {
            snprintf(why, len, "%s pointer %p must be %zu-byte aligned", m[i].name, m[i].p, bytes);
            return TK_ERR_NOT_SUPPORTED;
        }
    }
    return TK_SUCCESS;
}

tk_status tk_check_b_up(const tk_args *a, const char *unit, char *why, size_t len)
{
    if (!a->epi || a->epi->kind != TK_EPI_GATED || (uintptr_t)a->epi->b_up % 16 == 0)
        return TK_SUCCESS;
    snprintf(why, len,
             "b_up: %s needs the up half's base 16-byte aligned (without b_up: B's first up column, so N / 2 a "
             "multiple of 8 for op_b N)", unit);
    return TK_ERR_NOT_SUPPORTED;
}

tk_status tk_func_attrs_get(const void *func, tk_func_attrs *out, char *why, size_t len)
{
    struct cudaFuncAttributes fa;
    cudaError_t e = cudaFuncGetAttributes(&fa, func);
    if (e != cudaSuccess) {
        snprintf(why, len, "cudaFuncGetAttributes: %s (is the kernel built for this GPU?)", cudaGetErrorString(e));
        cudaGetLastError();
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    out->num_regs = fa.numRegs;
    out->static_smem = fa.sharedSizeBytes;
    out->local_bytes = fa.localSizeBytes;
    out->max_threads = fa.maxThreadsPerBlock;
    return TK_SUCCESS;
}

tk_status tk_check_resources(const tk_kernel *k, const tk_resources *r, const tk_device *dev,
                             const tk_func_attrs *fa_in, char *why, size_t len)
{
    (void)k;
    if (r->threads > dev->max_threads_per_block) {
        snprintf(why, len, "%d threads per block exceed the device limit of %d", r->threads,
                 dev->max_threads_per_block);
        return TK_ERR_OUT_OF_RESOURCES;
    }
    if (!r->func)   /* a library call (cuBLAS) checks its own resources */
        return TK_SUCCESS;
    tk_func_attrs fa;
    if (fa_in)
        fa = *fa_in;
    else {
        tk_status st = tk_func_attrs_get(r->func, &fa, why, len);
        if (st)
            return st;
    }
    size_t smem = fa.static_smem + r->dyn_smem;
    if (smem > dev->smem_per_block_optin) {
        snprintf(why, len, "%zu bytes of shared memory (%zu static + %zu dynamic) exceed the device limit of %zu per block",
                 smem, fa.static_smem, r->dyn_smem, dev->smem_per_block_optin);
        return TK_ERR_OUT_OF_RESOURCES;
    }
    if (r->threads > fa.max_threads) {
        snprintf(why, len, "%d threads per block exceed the %d this kernel can run with %d registers per thread",
                 r->threads, fa.max_threads, fa.num_regs);
        return TK_ERR_OUT_OF_RESOURCES;
    }
    if ((long long)fa.num_regs * r->threads > dev->regs_per_block) {
        snprintf(why, len, "%d registers x %d threads exceed the device's %d registers per block", fa.num_regs,
                 r->threads, dev->regs_per_block);
        return TK_ERR_OUT_OF_RESOURCES;
    }
    return TK_SUCCESS;
}
