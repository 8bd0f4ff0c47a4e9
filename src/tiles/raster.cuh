/* raster.cuh - the L2 super-tile order of output tiles.
 *
 * A GEMM grid of tiles_m x tiles_n output tiles is walked as super-tiles of
 * group_m tile rows: block ids 0, 1, 2, ... go down the group_m rows of
 * column 0 of the first super-tile, then down column 1, and so on across all
 * tiles_n columns, before the next super-tile starts (the last one may have
 * fewer rows). Blocks resident at the same time then cover a roughly square
 * patch of C -- about group_m rows by (resident / group_m) columns -- so the
 * A panels (one per tile row) and B panels (one per tile column) they read
 * are shared in L2 instead of each being fetched from DRAM by every block.
 * Row-major order would instead keep one row of A against every B panel.
 * The best group_m is measured per kernel (it trades A-panel against
 * B-panel reuse for the number of blocks resident on the GPU).
 *
 * Plain C apart from TK_HD, so tests/host/test_swizzle.c checks it on the host.
 */
#ifndef TK_TILES_RASTER_CUH
#define TK_TILES_RASTER_CUH

#include <stdint.h>

/* Host-and-device marker: these functions are written `static inline TK_HD`. */
#ifndef TK_HD
#ifdef __CUDACC__
#define TK_HD __host__ __device__
#else
#define TK_HD
#endif
#endif

/* The tile (row *tm, column *tn) that block `id` (0 <= id < tiles_m * tiles_n)
 * computes in the super-tile order with group_m >= 1 tile rows per group. */
static inline TK_HD void tk_raster_supertile(int id, int tiles_m, int tiles_n, int group_m, int *tm, int *tn)
{
    int per_group = group_m * tiles_n;
    int group = id / per_group;
    int first_m = group * group_m;
    int rows = tiles_m - first_m < group_m ? tiles_m - first_m : group_m;
    int in_group = id - group * per_group;
    *tm = first_m + in_group % rows;
    *tn = in_group / rows;
}

#endif /* TK_TILES_RASTER_CUH */
