/* launch_cache.c - the per-handle launch cache (launch_cache.h). */
#include <string.h>
#include "launch_cache.h"

static int find_func(const tk_launch_cache *lc, const void *func, int cluster)
{
    for (int i = 0; i < lc->nfuncs; i++)
        if (lc->funcs[i].func == func && lc->funcs[i].cluster == cluster)
            return i;
    return -1;
}

int tk_lc_ring_slot(int *count, int *next, int n)
{
    if (*count < n)
        return (*count)++;
    unsigned i = (unsigned)*next % (unsigned)n;
    *next = (int)((i + 1) % (unsigned)n);
    return (int)i;
}

static int put_func(tk_launch_cache *lc, const void *func, int cluster)
{
    int i = tk_lc_ring_slot(&lc->nfuncs, &lc->next_func, TK_LC_FUNCS);
    lc->funcs[i].func = func;
    lc->funcs[i].cluster = cluster;
    lc->funcs[i].smem = -1;
    lc->funcs[i].clusters = -1;
    return i;
}

cudaError_t tk_lc_func_smem(tk_launch_cache *lc, const void *func, int smem)
{
    int i = lc ? find_func(lc, func, 0) : -1;
    if (i >= 0 && lc->funcs[i].smem >= smem)
        return cudaSuccess;
    cudaError_t e = cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e == cudaSuccess && lc) {
        if (i < 0)
            i = put_func(lc, func, 0);
        lc->funcs[i].smem = smem;
    }
    return e;
}

cudaError_t tk_lc_max_clusters(tk_launch_cache *lc, const void *func, const cudaLaunchConfig_t *cfg, int cluster,
                               int *clusters)
{
    int i = lc ? find_func(lc, func, cluster) : -1;
    cudaError_t e = cudaSuccess;
    if (i >= 0 && lc->funcs[i].smem == (int)cfg->dynamicSmemBytes && lc->funcs[i].clusters >= 0) {
        *clusters = lc->funcs[i].clusters;
    } else {
        e = cudaOccupancyMaxActiveClusters(clusters, func, cfg);
        if (e == cudaSuccess && lc) {
            if (i < 0)
                i = put_func(lc, func, cluster);
            lc->funcs[i].smem = (int)cfg->dynamicSmemBytes;
            lc->funcs[i].clusters = *clusters;
        }
    }
    /* tk_set_sm_count: the cached figure is the device's; the cap applies on the way out */
    if (e == cudaSuccess && lc && lc->max_sms > 0 && cluster > 0 && *clusters > lc->max_sms / cluster)
        *clusters = lc->max_sms / cluster > 0 ? lc->max_sms / cluster : 1;
    return e;
}

static int key_eq(const tk_tma_key *x, const tk_tma_key *y)
{
    return x->base == y->base && x->rows == y->rows && x->cols == y->cols && x->ld == y->ld &&
           x->box_rows == y->box_rows && x->box_cols == y->box_cols && x->dtype == y->dtype &&
           x->swizzle == y->swizzle && x->elem_bytes == y->elem_bytes && x->depth == y->depth &&
           x->zstride == y->zstride;
}

const CUtensorMap *tk_lc_map_find(tk_launch_cache *lc, const tk_tma_key *key)
{
    if (!lc)
        return NULL;
    for (int i = 0; i < lc->nmaps; i++)
        if (key_eq(&lc->maps[i].key, key)) {
            lc->map_hits++;
            return &lc->maps[i].map;
        }
    lc->map_misses++;
    return NULL;
}

void tk_lc_map_put(tk_launch_cache *lc, const tk_tma_key *key, const CUtensorMap *map)
{
    if (!lc)
        return;
    int i = tk_lc_ring_slot(&lc->nmaps, &lc->next_map, TK_LC_MAPS);
    lc->maps[i].key = *key;
    lc->maps[i].map = *map;
}
