/* k30_epi_nn - k30_wgmma_tma's fused-epilogue kernel for op_a N, op_b N (A K-major, B N-major): a
 * translation unit of its own so that it compiles beside the others
 * (k30_run.cuh says why). Figures: k30_wgmma_tma.cu. */
#include "k30_run.cuh"

K30_EPI_UNIT(nn, 0, 1)
