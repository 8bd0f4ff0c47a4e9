/* k30_epi_tn - k30_wgmma_tma's fused-epilogue kernel for op_a T, op_b N (both MN-major): a
 * translation unit of its own so that it compiles beside the others
 * (k30_run.cuh says why). Figures: k30_wgmma_tma.cu. */
#include "k30_run.cuh"

K30_EPI_UNIT(tn, 1, 1)
