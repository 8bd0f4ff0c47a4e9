/* wgmma.cuh - warpgroup-level asynchronous MMA (sm_90a only).
 *
 * A warpgroup is 4 consecutive warps starting at a warp index divisible by 4;
 * every wgmma instruction below is executed by all 128 of its threads.
 *
 * Shared-memory matrix descriptor (64 bits; tk_wgmma_desc builds it):
 *   bits 0-13 start address >> 4, 16-29 leading byte offset (LBO) >> 4,
 *   32-45 stride byte offset (SBO) >> 4, 49-51 base offset (0: the tile starts
 *   on a 1024-byte boundary), 62-63 swizzle mode (1 = 128B swizzle).
 *   With the 128B swizzle used here (as written by TMA with
 *   CU_TENSOR_MAP_SWIZZLE_128B, rows of 64 bf16 = 128 bytes, 16-byte chunks
 *   XOR-ed by row % 8):
 *   - K-major operand (rows along M/N, 64 K values per 128-byte row):
 *     SBO = 1024 (from one group of 8 rows to the next), LBO unused (16).
 *     Step K by 16 inside the 64-wide row by adding 32 bytes to the start.
 *   - MN-major operand (rows along K, 64 M/N values per 128-byte row):
 *     SBO = 1024 (from one group of 8 K rows to the next), LBO = distance
 *     from one block of 64 M/N values to the next. Step K by 16 by adding
 *     16 rows = 2048 bytes to the start.
 *   Adding (bytes >> 4) to a descriptor moves its start address, as long as
 *   the address stays below 256 KB (it always does in shared memory).
 *
 * wgmma.fence.sync.aligned
 *   Orders earlier register writes (accumulators, e.g. the epilogue's reads
 *   and zeroing) before later wgmma; needed before the first wgmma of a batch.
 * wgmma.commit_group.sync.aligned / wgmma.wait_group.sync.aligned N
 *   Close the wgmma issued so far into a group / wait until at most N groups
 *   are pending. Accumulators must not be touched, and the shared operands
 *   not overwritten, until the group that uses them has been waited for.
 * wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 d, descA, descB, p, 1, 1, tA, tB
 *   D(64x256, f32) = A(64x16, bf16, smem) * B(16x256, bf16, smem) + (p ? D : 0)
 *   (and m64n192k16 ... m64n16k16, m64n72k16 among them: D 64x192 ... 64x16,
 *   j in 0..N/8-1 below).
 *   tA/tB = 0: K-major operand, 1: MN-major (transposed; bf16 allows both).
 *   D fragment of thread t (warp w = t/32 of the warpgroup, lane l):
 *   d[4j + 2h + e] = D[16w + l/4 + 8h][8j + 2(l%4) + e], j in 0..31, h, e in 0..1.
 * Clobbers: d (read-write) and "memory" (the operands are read from shared
 * memory asynchronously; the wait/fence carry the ordering).
 */
#ifndef TK_PTX_WGMMA_CUH
#define TK_PTX_WGMMA_CUH

#include <stdint.h>

/* 128B-swizzle descriptor of the tile at shared address addr (1024-aligned). */
static __device__ __forceinline__ uint64_t tk_wgmma_desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo & 0x3FFFF) >> 4) << 16) |
           ((uint64_t)((sbo & 0x3FFFF) >> 4) << 32) | ((uint64_t)1 << 62);
}

/* desc moved bytes / 16 further on: the start address is the low word's
 * 14-bit field, which a tile inside shared memory never carries out of, so
 * the sum is the low word's alone (one 32-bit add; the high word stays a
 * constant the compiler can keep in a uniform register). */
static __device__ __forceinline__ uint64_t tk_wgmma_desc_add(uint64_t desc, uint32_t units)
{
    return (desc & 0xFFFFFFFF00000000ull) | (uint32_t)((uint32_t)desc + units);
}

static __device__ __forceinline__ void tk_wgmma_fence(void)
{
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}

static __device__ __forceinline__ void tk_wgmma_commit(void)
{
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

/* N: an immediate. */
#define tk_wgmma_wait(N) asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory")

/* Keeps the compiler from moving accumulator reads or writes across a point
 * (after wgmma.wait, before the epilogue reads them). */
#define tk_wgmma_reg_fence(r) asm volatile("" : "+f"(r)::"memory")

/* A template only because the transpose flags are instruction immediates. */
template <int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void tk_wgmma_m64n256k16_f32_bf16(float d[128], uint64_t desc_a, uint64_t desc_b,
                                                                    int scale_d)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %130, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
                 "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
                 "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
                 "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
                 "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
                 "}, %128, %129, p, 1, 1, %131, %132;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
                   "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
                   "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                 : "memory");
}

/* The same with N = 192: D(64x192) = A(64x16) * B(16x192), d[96], j in 0..23. */
template <int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void tk_wgmma_m64n192k16_f32_bf16(float d[96], uint64_t desc_a, uint64_t desc_b,
                                                                    int scale_d)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %98, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
                 "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
                 "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"
                 "}, %96, %97, p, 1, 1, %99, %100;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
                   "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
                   "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                 : "memory");
}

/* The same with N = 144: D(64x144) = A(64x16) * B(16x144), d[72], j in 0..17. */
template <int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void tk_wgmma_m64n144k16_f32_bf16(float d[72], uint64_t desc_a, uint64_t desc_b,
                                                                    int scale_d)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %74, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n144k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
                 "%64,%65,%66,%67,%68,%69,%70,%71"
                 "}, %72, %73, p, 1, 1, %75, %76;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                 : "memory");
}

/* The same with N = 128: D(64x128) = A(64x16) * B(16x128), d[64], j in 0..15. */
template <int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void tk_wgmma_m64n128k16_f32_bf16(float d[64], uint64_t desc_a, uint64_t desc_b,
                                                                    int scale_d)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
                 "}, %64, %65, p, 1, 1, %67, %68;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                 : "memory");
}

/* The same with N = 72: D(64x72) = A(64x16) * B(16x72), d[36], j in 0..8. */
template <int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void tk_wgmma_m64n72k16_f32_bf16(float d[36], uint64_t desc_a, uint64_t desc_b,
                                                                   int scale_d)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %38, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n72k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
                 "%32,%33,%34,%35"
                 "}, %36, %37, p, 1, 1, %39, %40;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                 : "memory");
}

/* The same with N = 64: D(64x64) = A(64x16) * B(16x64), d[32], j in 0..7. */
template <int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void tk_wgmma_m64n64k16_f32_bf16(float d[32], uint64_t desc_a, uint64_t desc_b,
                                                                   int scale_d)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
                 "}, %32, %33, p, 1, 1, %35, %36;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                 : "memory");
}

/* The same with N = 48: D(64x48) = A(64x16) * B(16x48), d[24], j in 0..5. */
template <int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void tk_wgmma_m64n48k16_f32_bf16(float d[24], uint64_t desc_a, uint64_t desc_b,
                                                                   int scale_d)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %26, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n48k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23"
                 "}, %24, %25, p, 1, 1, %27, %28;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                 : "memory");
}

/* The same with N = 32: D(64x32) = A(64x16) * B(16x32), d[16], j in 0..3. */
template <int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void tk_wgmma_m64n32k16_f32_bf16(float d[16], uint64_t desc_a, uint64_t desc_b,
                                                                   int scale_d)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
                 "}, %16, %17, p, 1, 1, %19, %20;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                 : "memory");
}

/* The same with N = 16: D(64x16) = A(64x16) * B(16x16), d[8], j in 0..1. */
template <int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void tk_wgmma_m64n16k16_f32_bf16(float d[8], uint64_t desc_a, uint64_t desc_b,
                                                                   int scale_d)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %10, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7"
                 "}, %8, %9, p, 1, 1, %11, %12;\n"
                 "}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B)
                 : "memory");
}

/* m64nNk16 for N = 256, 192, 144, 128, 72, 64, 48, 32 or 16, chosen at compile time: a
 * template because N fixes the instruction and the accumulator count (N / 2
 * per thread). */
template <int N, int TRANS_A, int TRANS_B>
static __device__ __forceinline__ void tk_wgmma_m64nNk16_f32_bf16(float *d, uint64_t desc_a, uint64_t desc_b,
                                                                  int scale_d)
{
    static_assert(N == 256 || N == 192 || N == 144 || N == 128 || N == 72 || N == 64 || N == 48 || N == 32 || N == 16,
                  "wgmma wrappers exist for N = 256, 192, 144, 128, 72, 64, 48, 32 and 16");
    if (N == 256)
        tk_wgmma_m64n256k16_f32_bf16<TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
    else if (N == 192)
        tk_wgmma_m64n192k16_f32_bf16<TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
    else if (N == 144)
        tk_wgmma_m64n144k16_f32_bf16<TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
    else if (N == 128)
        tk_wgmma_m64n128k16_f32_bf16<TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
    else if (N == 72)
        tk_wgmma_m64n72k16_f32_bf16<TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
    else if (N == 64)
        tk_wgmma_m64n64k16_f32_bf16<TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
    else if (N == 48)
        tk_wgmma_m64n48k16_f32_bf16<TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
    else if (N == 32)
        tk_wgmma_m64n32k16_f32_bf16<TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
    else
        tk_wgmma_m64n16k16_f32_bf16<TRANS_A, TRANS_B>(d, desc_a, desc_b, scale_d);
}


/* ---- 8-bit operands (issue 40) ----
 * wgmma.mma_async.sync.aligned.m64nNk32.f32.<ta>.<tb> d, descA, descB, p, 1, 1
 *   D(64xN, f32) = A(64x32, ta, smem) * B(32xN, tb, smem) + (p ? D : 0),
 *   ta, tb in e4m3, e5m2 (any pairing). Both operands K-major (8-bit types
 *   take no transpose); in the 128B swizzle a 128-byte row holds 128 K
 *   values, so one k32 step is 32 bytes, as one k16 step of bf16. D's
 *   fragment is bf16's above. FP8_A, FP8_B: tk_fp8_format (1 E4M3, 2 E5M2):
 *   a template because the types are part of the instruction's name. */
/* The instruction of FP8_A, FP8_B's formats: ASM(ta, tb) is a wrapper's asm
 * statement for one pairing of type names. */
#define TK_WGMMA_FP8_BY_FORMAT(ASM)                                                                           \
    do {                                                                                                      \
        if constexpr (FP8_A == 1 && FP8_B == 1)                                                               \
            ASM("e4m3", "e4m3");                                                                              \
        else if constexpr (FP8_A == 1)                                                                        \
            ASM("e4m3", "e5m2");                                                                              \
        else if constexpr (FP8_B == 1)                                                                        \
            ASM("e5m2", "e4m3");                                                                              \
        else                                                                                                  \
            ASM("e5m2", "e5m2");                                                                              \
    } while (0)
#define TK_WGMMA_FP8_N8(ta, tb)                                                                               \
    "wgmma.mma_async.sync.aligned.m64n8k32.f32." ta "." tb " {%0,%1,%2,%3}, %4, %5, p, 1, 1;\n"
template <int FP8_A, int FP8_B>
static __device__ __forceinline__ void tk_wgmma_m64n8k32_f32_fp8(float d[4], uint64_t desc_a, uint64_t desc_b,
                                                                 int scale_d)
{
#define TK_WGMMA_FP8_N8_ASM(ta, tb)                                                                           \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n" TK_WGMMA_FP8_N8(ta, tb) "}\n"                \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                             \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d)                                                     \
                 : "memory")
    TK_WGMMA_FP8_BY_FORMAT(TK_WGMMA_FP8_N8_ASM);
#undef TK_WGMMA_FP8_N8_ASM
}
#undef TK_WGMMA_FP8_N8


/* The same with N = 128: D(64x128) = A(64x32) * B(32x128), d[64], j in 0..15. */
#define TK_WGMMA_FP8_N128_ASM(ta, tb)                                                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                         \
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32." ta "." tb " {"                                 \
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"\
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"\
                 "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"\
                 "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"   \
                 "}, %64, %65, p, 1, 1;\n}\n"                                                         \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),\
                   "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),\
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),\
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])                                                                           \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d)                                                     \
                 : "memory")
template <int FP8_A, int FP8_B>
static __device__ __forceinline__ void tk_wgmma_m64n128k32_f32_fp8(float d[64], uint64_t desc_a, uint64_t desc_b,
                                                                   int scale_d)
{
    TK_WGMMA_FP8_BY_FORMAT(TK_WGMMA_FP8_N128_ASM);
}
#undef TK_WGMMA_FP8_N128_ASM

/* The same with N = 72: D(64x72) = A(64x32) * B(32x72), d[36], j in 0..8 (the swapped
 * tiles' instruction: k36_swap_*'s FP8 instances, B's 64 rows by 72 tokens). */
#define TK_WGMMA_FP8_N72_ASM(ta, tb)                                                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %38, 0;\n"                                              \
                 "wgmma.mma_async.sync.aligned.m64n72k32.f32." ta "." tb " {"                                  \
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31," \
                 "%32,%33,%34,%35" \
                 "}, %36, %37, p, 1, 1;\n}\n"                                                         \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),\
                   "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35])\
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d)                                                     \
                 : "memory")
template <int FP8_A, int FP8_B>
static __device__ __forceinline__ void tk_wgmma_m64n72k32_f32_fp8(float d[36], uint64_t desc_a, uint64_t desc_b,
                                                                  int scale_d)
{
    TK_WGMMA_FP8_BY_FORMAT(TK_WGMMA_FP8_N72_ASM);
}
#undef TK_WGMMA_FP8_N72_ASM

/* The same with N = 64: D(64x64) = A(64x32) * B(32x64), d[32], j in 0..7 (the swapped
 * tiles' instruction: k36_swap_*'s FP8 instances, B's 64 rows by 64 tokens). */
#define TK_WGMMA_FP8_N64_ASM(ta, tb)                                                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                              \
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32." ta "." tb " {"                                  \
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31" \
                 "}, %32, %33, p, 1, 1;\n}\n"                                                         \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),\
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])\
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d)                                                     \
                 : "memory")
template <int FP8_A, int FP8_B>
static __device__ __forceinline__ void tk_wgmma_m64n64k32_f32_fp8(float d[32], uint64_t desc_a, uint64_t desc_b,
                                                                  int scale_d)
{
    TK_WGMMA_FP8_BY_FORMAT(TK_WGMMA_FP8_N64_ASM);
}
#undef TK_WGMMA_FP8_N64_ASM

/* The same with N = 48: D(64x48) = A(64x32) * B(32x48), d[24], j in 0..5 (the swapped
 * tiles' instruction: k36_swap_*'s FP8 instances, B's 64 rows by 48 tokens). */
#define TK_WGMMA_FP8_N48_ASM(ta, tb)                                                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %26, 0;\n"                                              \
                 "wgmma.mma_async.sync.aligned.m64n48k32.f32." ta "." tb " {"                                  \
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
                 "%16,%17,%18,%19,%20,%21,%22,%23" \
                 "}, %24, %25, p, 1, 1;\n}\n"                                                         \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),\
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])\
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d)                                                     \
                 : "memory")
template <int FP8_A, int FP8_B>
static __device__ __forceinline__ void tk_wgmma_m64n48k32_f32_fp8(float d[24], uint64_t desc_a, uint64_t desc_b,
                                                                  int scale_d)
{
    TK_WGMMA_FP8_BY_FORMAT(TK_WGMMA_FP8_N48_ASM);
}
#undef TK_WGMMA_FP8_N48_ASM

/* The same with N = 32: D(64x32) = A(64x32) * B(32x32), d[16], j in 0..3 (the swapped
 * tiles' instruction: k36_swap_*'s FP8 instances, B's 64 rows by 32 tokens). */
#define TK_WGMMA_FP8_N32_ASM(ta, tb)                                                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"                                              \
                 "wgmma.mma_async.sync.aligned.m64n32k32.f32." ta "." tb " {"                                  \
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15" \
                 "}, %16, %17, p, 1, 1;\n}\n"                                                         \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),\
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])\
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d)                                                     \
                 : "memory")
template <int FP8_A, int FP8_B>
static __device__ __forceinline__ void tk_wgmma_m64n32k32_f32_fp8(float d[16], uint64_t desc_a, uint64_t desc_b,
                                                                  int scale_d)
{
    TK_WGMMA_FP8_BY_FORMAT(TK_WGMMA_FP8_N32_ASM);
}
#undef TK_WGMMA_FP8_N32_ASM

/* The same with N = 16: D(64x16) = A(64x32) * B(32x16), d[8], j in 0..1 (the swapped
 * tiles' instruction: k36_swap_*'s FP8 instances, B's 64 rows by 16 tokens). */
#define TK_WGMMA_FP8_N16_ASM(ta, tb)                                                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"                                              \
                 "wgmma.mma_async.sync.aligned.m64n16k32.f32." ta "." tb " {"                                  \
                 "%0,%1,%2,%3,%4,%5,%6,%7" \
                 "}, %8, %9, p, 1, 1;\n}\n"                                                         \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])\
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d)                                                     \
                 : "memory")
template <int FP8_A, int FP8_B>
static __device__ __forceinline__ void tk_wgmma_m64n16k32_f32_fp8(float d[8], uint64_t desc_a, uint64_t desc_b,
                                                                  int scale_d)
{
    TK_WGMMA_FP8_BY_FORMAT(TK_WGMMA_FP8_N16_ASM);
}
#undef TK_WGMMA_FP8_N16_ASM

/* m64nNk32 for N = 128, 72, 64, 48, 32 or 16, chosen at compile time (as
 * tk_wgmma_m64nNk16_f32_bf16): N / 2 accumulators a thread. */
template <int N, int FP8_A, int FP8_B>
static __device__ __forceinline__ void tk_wgmma_m64nNk32_f32_fp8(float *d, uint64_t desc_a, uint64_t desc_b,
                                                                 int scale_d)
{
    static_assert(N == 128 || N == 72 || N == 64 || N == 48 || N == 32 || N == 16,
                  "FP8 wgmma wrappers exist for N = 128, 72, 64, 48, 32 and 16");
    if constexpr (N == 128)
        tk_wgmma_m64n128k32_f32_fp8<FP8_A, FP8_B>(d, desc_a, desc_b, scale_d);
    else if constexpr (N == 72)
        tk_wgmma_m64n72k32_f32_fp8<FP8_A, FP8_B>(d, desc_a, desc_b, scale_d);
    else if constexpr (N == 64)
        tk_wgmma_m64n64k32_f32_fp8<FP8_A, FP8_B>(d, desc_a, desc_b, scale_d);
    else if constexpr (N == 48)
        tk_wgmma_m64n48k32_f32_fp8<FP8_A, FP8_B>(d, desc_a, desc_b, scale_d);
    else if constexpr (N == 32)
        tk_wgmma_m64n32k32_f32_fp8<FP8_A, FP8_B>(d, desc_a, desc_b, scale_d);
    else
        tk_wgmma_m64n16k32_f32_fp8<FP8_A, FP8_B>(d, desc_a, desc_b, scale_d);
}

#endif
