/* peers.cu - where each rank's part of a symmetric window lies in this
 * process's address space, from NCCL's device API (ncclGetPeerPointer, a
 * header-only device function: one tiny kernel at set-up). The copy-engine
 * transport hands those addresses to cudaMemcpyAsync, which moves the
 * bytes over NVLink on the copy engines, with no SM: beside a GEMM that
 * holds every SM. NCCL's own copy-engine collectives (ncclAllGather on a
 * zero-CTA communicator) waited for such a GEMM to end on 2 x H200 (NCCL
 * 2.28.3 and 2.28.9, dist_bench --probe, docs/NOTES.md session 32). */
#include <stdio.h>
#include "dist.h"
#if defined(__has_include)
#if __has_include(<nccl_device.h>)
#include <nccl_device.h>
#define TKD_DEVICE_API 1
#endif
#endif

#ifdef TKD_DEVICE_API
static __global__ void peers_kernel(ncclWindow_t w, int nranks, void **out)
{
    for (int j = threadIdx.x; j < nranks; j += blockDim.x)
        out[j] = ncclGetPeerPointer(w, 0, j);
}
#endif

extern "C" int tkd_window_peers(void *win, int nranks, void **peers, cudaStream_t stream, char *why, size_t len)
{
#ifdef TKD_DEVICE_API
    void **dev = NULL;
    cudaError_t e = cudaMallocAsync((void **)&dev, sizeof(void *) * (size_t)nranks, stream);
    if (!e) {
        peers_kernel<<<1, 32, 0, stream>>>((ncclWindow_t)win, nranks, dev);
        if (!(e = cudaGetLastError()))
            e = cudaMemcpyAsync(peers, dev, sizeof(void *) * (size_t)nranks, cudaMemcpyDeviceToHost, stream);
        cudaFreeAsync(dev, stream);
        if (!e)
            e = cudaStreamSynchronize(stream);
    }
    if (e) {
        cudaGetLastError();
        snprintf(why, len, "the window's peer addresses (ncclGetPeerPointer): %s", cudaGetErrorString(e));
        return 1;
    }
    return 0;
#else
    (void)win; (void)nranks; (void)peers; (void)stream;
    snprintf(why, len, "libtilekit_dist was built without nccl_device.h (NCCL 2.28's device API, beside nccl.h): "
             "the copy engines cannot address a peer's window");
    return 1;
#endif
}
