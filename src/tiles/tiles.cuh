/* tiles.cuh - the whole tile vocabulary in one include, for kernels:
 *   layout.h  index arithmetic (host and device)
 *   types.cuh global views, shared tiles and sub-tile views, smem layout, register tiles
 *   ids.cuh   lane / warp / warpgroup ids, barriers
 *   gs.cuh    global -> shared (sync, cp.async), global -> register -> shared
 *   sr.cuh    shared <-> register (ldmatrix, ldmatrix.trans, stores)
 *   rt.cuh    zero, swap_layout, mma_AB, mma_ABt
 *   rg.cuh    register -> global with alpha/beta (epilogue.cuh)
 */
#ifndef TK_TILES_TILES_CUH
#define TK_TILES_TILES_CUH

#include "layout.h"
#include "types.cuh"
#include "ids.cuh"
#include "gs.cuh"
#include "sr.cuh"
#include "rt.cuh"
#include "rg.cuh"

#endif /* TK_TILES_TILES_CUH */
