/* lab_rand.h - the lab's counter-based random numbers, for the host (lab_num.c)
 * and the device (lab_device.cu's fill kernel) alike: the same seed gives the same
 * matrix wherever it is made, so bench can fill its inputs on the GPU (seconds
 * saved per shape of a suite) with the values verify makes on the CPU. */
#ifndef TK_LAB_RAND_H
#define TK_LAB_RAND_H

#include <stdint.h>
#include <string.h>
#include "../tiles/layout.h"   /* TK_HD */

static inline TK_HD uint16_t tk_lab_rand_f32_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);   /* keep NaN a (quiet) NaN */
    /* Round to nearest even: add half an ulp of bf16, minus one on a tie
     * whose kept part is even, then truncate. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* The splitmix64 finalizer. */
static inline TK_HD uint64_t tk_lab_rand_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Element i of stream seed: uniform in (-1, 1), rounded to bf16, never 0. */
static inline TK_HD uint16_t tk_lab_rand_elem(uint64_t seed, uint64_t i)
{
    /* splitmix64: element i of the stream is mix(seed' + (i + 1) * golden). */
    uint64_t r = tk_lab_rand_mix(tk_lab_rand_mix(seed) + (i + 1) * 0x9e3779b97f4a7c15ull);
    /* (u + 0.5) / 2^23 - 1 with u < 2^24 lies in (-1, 1) and is never 0; the
     * smallest magnitude, 2^-24, is a normal bf16, so rounding keeps it non-zero. */
    double x = ((double)(r >> 40) + 0.5) / 8388608.0 - 1.0;
    return tk_lab_rand_f32_to_bf16((float)x);
}

/* The largest magnitude of tk_lab_rand_int: products of two such values and
 * their sums over K <= 6000 stay far below 2^24, so an fp32 GEMM of them is
 * exact (the fuzzer's exact mode). */
#define TK_LAB_RAND_INT_MAX 3

/* Element i of stream seed as an integer in [-TK_LAB_RAND_INT_MAX,
 * TK_LAB_RAND_INT_MAX], uniform, zero included. */
static inline TK_HD int tk_lab_rand_int(uint64_t seed, uint64_t i)
{
    uint64_t r = tk_lab_rand_mix(tk_lab_rand_mix(seed) + (i + 1) * 0x9e3779b97f4a7c15ull);
    return (int)(r % (2 * TK_LAB_RAND_INT_MAX + 1)) - TK_LAB_RAND_INT_MAX;
}

#endif /* TK_LAB_RAND_H */
