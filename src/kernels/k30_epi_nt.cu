/* k30_epi_nt - k30_wgmma_tma's fused-epilogue kernel for op_a N, op_b T (both K-major): a
 * translation unit of its own so that it compiles beside the others
 * (k30_run.cuh says why). Figures: k30_wgmma_tma.cu. */
#include "k30_run.cuh"

K30_EPI_UNIT(nt, 0, 0)
