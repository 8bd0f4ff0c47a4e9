/* util.cu - C = beta * C, the K == 0 case of the GEMM (no products to add).
 * beta == 0 writes zeros without reading C (BLAS semantics). */
#include <stdio.h>
#include "../host/kernel.h"
#include "../tiles/epilogue.cuh"

static __global__ void scale_c_kernel(void *c, int64_t m, int64_t n, int64_t ldc, tk_dtype c_type, float beta)
{
    for (int64_t i = blockIdx.y; i < m; i += gridDim.y)
        for (int64_t j = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x)
            tk_epilogue_store(c, i * ldc + j, c_type, 0.0f, 0.0f, beta);
}

extern "C" tk_status tk_launch_scale_c(const tk_args *a, cudaStream_t stream, char *why, size_t len)
{
    int64_t bx = (a->n + 255) / 256;
    dim3 grid((unsigned)(bx < 1024 ? bx : 1024), (unsigned)(a->m < 65535 ? a->m : 65535));
    scale_c_kernel<<<grid, 256, 0, stream>>>(a->c, a->m, a->n, a->ldc, a->c_type, a->beta);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        snprintf(why, len, "launch: %s", cudaGetErrorString(e));
        return TK_ERR_CUDA;
    }
    return TK_SUCCESS;
}
