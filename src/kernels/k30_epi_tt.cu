/* k30_epi_tt - k30_wgmma_tma's fused-epilogue kernel for op_a T, op_b T (A M-major, B K-major): a
 * translation unit of its own so that it compiles beside the others
 * (k30_run.cuh says why). Figures: k30_wgmma_tma.cu. */
#include "k30_run.cuh"

K30_EPI_UNIT(tt, 1, 0)
