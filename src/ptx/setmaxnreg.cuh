/* setmaxnreg.cuh - per-warpgroup register reallocation (sm_90a).
 *
 * setmaxnreg.{inc,dec}.sync.aligned.u32 N
 *   Raises (inc) or lowers (dec) the per-thread register count of the
 *   executing warpgroup to N (24..256, a multiple of 8); dec returns registers
 *   to the SM's pool, inc blocks until the pool can supply them. All threads of
 *   the warpgroup execute the same instruction. Takes effect only when the
 *   kernel starts with a register cap (__launch_bounds__(threads, 1) or
 *   -maxrregcount) and the roles are the two branches of one if/else;
 *   otherwise ptxas ignores it with warning C7508 (an error in this build).
 *   N is an immediate, hence macros.
 * Clobbers: none (register contents below N are preserved).
 */
#ifndef TK_PTX_SETMAXNREG_CUH
#define TK_PTX_SETMAXNREG_CUH

#define tk_setmaxnreg_inc(N) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N))
#define tk_setmaxnreg_dec(N) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N))

#endif
