/* test_launch_cache.c - the handle's launch cache (launch_cache.c) on the
 * CPU: a tensor map is found only under exactly the key it was put with
 * (every field of the key matters, so no call gets another call's map),
 * the oldest entry goes when the cache is full, and NULL caches nothing;
 * tk_set_sm_count's cap on the device description and on the clusters
 * the cache reports. */
#include <limits.h>
#include <string.h>
#include "lib/launch_cache.h"
#include "fake_handle.h"

static tk_tma_key key0(void)
{
    tk_tma_key k;
    memset(&k, 0, sizeof k);
    k.base = (const void *)(uintptr_t)0x10000;
    k.rows = 4096;
    k.cols = 4096;
    k.ld = 4096;
    k.box_rows = 128;
    k.box_cols = 64;
    k.dtype = 10;
    k.swizzle = 3;
    k.elem_bytes = 2;
    return k;
}

static CUtensorMap map_of(unsigned char tag)
{
    CUtensorMap m;
    memset(&m, tag, sizeof m);
    return m;
}

static void test_map_key(void)
{
    static tk_launch_cache lc;
    memset(&lc, 0, sizeof lc);
    tk_tma_key k = key0();
    CHECK(tk_lc_map_find(&lc, &k) == NULL, "empty cache: miss");
    CUtensorMap m = map_of(7);
    tk_lc_map_put(&lc, &k, &m);
    const CUtensorMap *hit = tk_lc_map_find(&lc, &k);
    CHECK(hit && !memcmp(hit, &m, sizeof m), "the same key finds the map put with it");
    /* each field changed alone: a miss */
    for (int f = 0; f < 9; f++) {
        tk_tma_key x = key0();
        switch (f) {
        case 0: x.base = (const void *)(uintptr_t)0x10010; break;
        case 1: x.rows = 4095; break;
        case 2: x.cols = 4095; break;
        case 3: x.ld = 4104; break;
        case 4: x.box_rows = 8; break;
        case 5: x.box_cols = 32; break;
        case 6: x.dtype = 7; break;
        case 7: x.swizzle = 0; break;
        case 8: x.elem_bytes = 4; break;
        }
        CHECK(tk_lc_map_find(&lc, &x) == NULL, "key field %d changed: must miss", f);
    }
    CHECK(lc.map_hits == 1 && lc.map_misses == 10, "hits %llu misses %llu", (unsigned long long)lc.map_hits,
          (unsigned long long)lc.map_misses);
}

static void test_map_full(void)
{
    static tk_launch_cache lc;
    memset(&lc, 0, sizeof lc);
    for (int i = 0; i < TK_LC_MAPS + 3; i++) {
        tk_tma_key k = key0();
        k.rows = 100 + i;
        CUtensorMap m = map_of((unsigned char)i);
        tk_lc_map_put(&lc, &k, &m);
    }
    CHECK(lc.nmaps == TK_LC_MAPS, "%d entries, expected %d", lc.nmaps, TK_LC_MAPS);
    for (int i = 0; i < TK_LC_MAPS + 3; i++) {
        tk_tma_key k = key0();
        k.rows = 100 + i;
        const CUtensorMap *hit = tk_lc_map_find(&lc, &k);
        if (i < 3)
            CHECK(hit == NULL, "entry %d (among the oldest) replaced", i);
        else
            CHECK(hit && ((const unsigned char *)hit)[0] == (unsigned char)i, "entry %d kept with its own map", i);
    }
}

/* Issue 35, item 1: the replacement counter of a full cache stays in
 * range however many misses come: before, a signed int that only grew wrapped
 * after 2^31 misses to an index of -31..0, and the next put wrote before the
 * array (into the handle). Driven to the wrap point directly: the counter
 * set to INT_MAX (and to other values no put leaves there) on a full cache,
 * then puts. Every put must land in maps[] (the guard words around the
 * cache are untouched, the new key is found) and leave the counter in
 * 0..TK_LC_MAPS - 1; the same for the function table. */
static void test_counter_wrap(void)
{
    static struct { uint64_t before[64]; tk_launch_cache lc; uint64_t after[64]; } g;
    memset(&g, 0x5a, sizeof g);
    memset(&g.lc, 0, sizeof g.lc);
    for (int i = 0; i < TK_LC_MAPS; i++) {
        tk_tma_key k = key0();
        k.rows = 1000 + i;
        CUtensorMap m = map_of(1);
        tk_lc_map_put(&g.lc, &k, &m);
    }
    const int starts[] = { INT_MAX, INT_MAX - 1, INT_MIN, -1, -31, TK_LC_MAPS, 1 << 30 };
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        g.lc.next_map = starts[s];
        for (int j = 0; j < 3 * TK_LC_MAPS; j++) {
            tk_tma_key k = key0();
            k.rows = 5000 + 1000 * s + j;
            CUtensorMap m = map_of((unsigned char)j);
            tk_lc_map_put(&g.lc, &k, &m);
            const CUtensorMap *hit = tk_lc_map_find(&g.lc, &k);
            if (!hit || ((const unsigned char *)hit)[0] != (unsigned char)j ||
                g.lc.next_map < 0 || g.lc.next_map >= TK_LC_MAPS || g.lc.nmaps != TK_LC_MAPS) {
                CHECK(0, "counter from %d, put %d: found %p, next_map %d, nmaps %d", starts[s], j, (void *)hit,
                      g.lc.next_map, g.lc.nmaps);
                break;
            }
        }
    }
    /* the function table (shared memory grants, occupancy) fills its slots
     * through the same ring, here driven directly (its puts follow CUDA
     * calls that need a GPU) */
    int count = TK_LC_FUNCS, next = INT_MAX;
    for (int i = 0; i < 3 * TK_LC_FUNCS; i++) {
        int slot = tk_lc_ring_slot(&count, &next, TK_LC_FUNCS);
        if (slot < 0 || slot >= TK_LC_FUNCS || next < 0 || next >= TK_LC_FUNCS || count != TK_LC_FUNCS) {
            CHECK(0, "function ring, put %d: slot %d, next %d, count %d", i, slot, next, count);
            break;
        }
    }
    count = 0;
    next = 0;
    for (int i = 0; i < TK_LC_FUNCS; i++)
        CHECK(tk_lc_ring_slot(&count, &next, TK_LC_FUNCS) == i, "filling: slot %d", i);
    CHECK(tk_lc_ring_slot(&count, &next, TK_LC_FUNCS) == 0 && tk_lc_ring_slot(&count, &next, TK_LC_FUNCS) == 1,
          "full: the oldest first");
    int guards = 1;
    for (int i = 0; i < 64; i++)
        guards &= g.before[i] == 0x5a5a5a5a5a5a5a5aull && g.after[i] == 0x5a5a5a5a5a5a5a5aull;
    CHECK(guards, "a put wrote outside the cache");
}

static void test_null_cache(void)
{
    tk_tma_key k = key0();
    CUtensorMap m = map_of(1);
    tk_lc_map_put(NULL, &k, &m);
    CHECK(tk_lc_map_find(NULL, &k) == NULL, "no cache: always a miss");
}


/* tk_set_sm_count (issue 41): the cap reaches dev.sm_count (grids of one
 * CTA per SM, wave plans, the cost model) and the launch cache's cluster
 * count (k31's grid), 0 and counts past the device's give every SM back,
 * a negative count is refused, and a handle without a device keeps the
 * setting and does nothing with it. */
static void test_sm_count(void)
{
    CHECK(tk_set_sm_count(NULL, 8) == TK_ERR_INVALID_VALUE, "NULL handle taken");
    tk_handle h = make_handle();
    if (!h)
        return;
    CHECK(tk_set_sm_count(h, -1) == TK_ERR_INVALID_VALUE && contains(tk_last_error(h), "sms"),
          "-1: %s", tk_last_error(h));
    CHECK(tk_set_sm_count(h, 100) == TK_SUCCESS, "no device: %s", tk_last_error(h));
    /* the modeled H100 */
    h->have_device = 1;
    h->dev = fh_device(90);
    h->sm_count_full = 132;
    CHECK(tk_set_sm_count(h, 116) == TK_SUCCESS && h->dev.sm_count == 116 && h->lc.max_sms == 116,
          "116: sm_count %d, max_sms %d", h->dev.sm_count, h->lc.max_sms);
    /* a cached occupancy of 66 two-CTA clusters comes out as 58 (116 / 2); the cache keeps 66 */
    static const char func = 0;
    h->lc.funcs[0].func = &func;
    h->lc.funcs[0].cluster = 2;
    h->lc.funcs[0].smem = 1000;
    h->lc.funcs[0].clusters = 66;
    h->lc.nfuncs = 1;
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.dynamicSmemBytes = 1000;
    int clusters = 0;
    CHECK(tk_lc_max_clusters(&h->lc, &func, &cfg, 2, &clusters) == cudaSuccess && clusters == 58 &&
              h->lc.funcs[0].clusters == 66, "capped clusters %d (cache %d)", clusters, h->lc.funcs[0].clusters);
    CHECK(tk_set_sm_count(h, 1) == TK_SUCCESS && tk_lc_max_clusters(&h->lc, &func, &cfg, 2, &clusters) == cudaSuccess &&
              clusters == 1, "1 SM: %d clusters (expected 1: a cluster always fits)", clusters);
    CHECK(tk_set_sm_count(h, 0) == TK_SUCCESS && h->dev.sm_count == 132 && h->lc.max_sms == 0 &&
              tk_lc_max_clusters(&h->lc, &func, &cfg, 2, &clusters) == cudaSuccess && clusters == 66,
          "0: sm_count %d, max_sms %d, clusters %d", h->dev.sm_count, h->lc.max_sms, clusters);
    CHECK(tk_set_sm_count(h, 500) == TK_SUCCESS && h->dev.sm_count == 132 && h->lc.max_sms == 0,
          "500: sm_count %d, max_sms %d", h->dev.sm_count, h->lc.max_sms);
    h->have_device = 0;
    memset(&h->lc, 0, sizeof h->lc);
    tk_destroy(h);
}

void tk_tests(void)
{
    TK_TEST(test_map_key);
    TK_TEST(test_map_full);
    TK_TEST(test_null_cache);
    TK_TEST(test_counter_wrap);
    TK_TEST(test_sm_count);
}
