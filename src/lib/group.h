/* group.h - one group's range of a grouped problem, read from its device
 * offsets (tilekit.h, tk_group_kind): the one rule of every kernel that
 * walks groups, host and device. */
#ifndef TK_GROUP_H
#define TK_GROUP_H

#include <stdint.h>
#include "tilekit.h"

#ifdef __CUDACC__
#define TK_GROUP_FN static __host__ __device__ __forceinline__
#else
#define TK_GROUP_FN static inline
#endif

/* Group g's range [*lo, *hi) of `total` (ROWS: rows of M; K: the K
 * dimension; MASKED: rows 0 .. offs[g]; BATCHED: all of it), 1 if valid;
 * 0 when the offsets make it bad (not 0 <= lo <= hi <= total): the group
 * is skipped and reported through tk_group_bad. */
TK_GROUP_FN int tk_group_range(int kind, const int32_t *offs, int g, int64_t total, int64_t *lo, int64_t *hi)
{
    *lo = 0;
    *hi = total;
    if (kind == TK_GROUP_BATCHED)
        return 1;
    *hi = offs[g];
    if (kind == TK_GROUP_ROWS || kind == TK_GROUP_K)
        *lo = g > 0 ? offs[g - 1] : 0;
    return *lo >= 0 && *lo <= *hi && *hi <= total;
}

/* A bad group seen: the caller's flag, if any, set (never cleared here). */
TK_GROUP_FN void tk_group_bad(int32_t *error)
{
    if (error)
        *(volatile int32_t *)error = 1;
}

#endif /* TK_GROUP_H */
