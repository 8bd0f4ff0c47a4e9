/* fp8.cuh - the OCP 8-bit floating-point formats on the device (issue 40):
 * a code decoded to fp32 (exact: 4 or 3 significant bits), E4M3 (bias 7,
 * no infinities, S.1111.111 NaN, largest 448) and E5M2 (bias 15, IEEE-like
 * infinities and NaNs, largest 57344). The host's reference is the lab's
 * tk_lab_fp8_decode (lab_num.c), which tests every code. */
#ifndef TK_TILES_FP8_CUH
#define TK_TILES_FP8_CUH

#include <stdint.h>
#include "tilekit.h"

static __device__ __forceinline__ float tk_fp8_to_f32(uint8_t v, int fmt)
{
    const int e5 = fmt == TK_FP8_E5M2;
    const int mb = e5 ? 2 : 3, bias = e5 ? 15 : 7, emax = e5 ? 31 : 15;
    const int e = (v >> mb) & emax, m = v & ((1 << mb) - 1);
    float x;
    if ((!e5 && e == emax && m == 7) || (e5 && e == emax && m))
        x = __int_as_float(0x7fc00000);   /* NaN */
    else if (e5 && e == emax)
        x = __int_as_float(0x7f800000);   /* infinity */
    else   /* normal: (2^mb + m) 2^(e - bias - mb); subnormal: m 2^(1 - bias - mb) */
        x = e ? ldexpf((float)((1 << mb) + m), e - bias - mb) : ldexpf((float)m, 1 - bias - mb);
    return v & 0x80 ? -x : x;
}

#endif /* TK_TILES_FP8_CUH */
