/* device.c - what tilekit needs to know about the current GPU. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "internal.h"

void tk_device_none_why(cudaError_t e, const char *driver, char *why, size_t len)
{
    if (e == cudaSuccess) {
        snprintf(why, len, "no CUDA device: device count is 0");
        return;
    }
    /* Where no NVIDIA driver is installed at all, the runtime answers
     * cudaErrorInsufficientDriver ("CUDA driver version is insufficient for
     * CUDA runtime version"), which sends the reader after a driver update
     * on a machine that has no driver. The driver is the library the
     * runtime loads: where it cannot be loaded, say that. */
    void *lib = dlopen(driver, RTLD_LAZY | RTLD_LOCAL);
    if (!lib) {
        dlerror();   /* nothing left for the caller's own dlerror() */
        snprintf(why, len, "no CUDA device: no NVIDIA driver found (%s cannot be loaded)", driver);
        return;
    }
    dlclose(lib);
    snprintf(why, len, "no CUDA device: %s", cudaGetErrorString(e));
}

tk_status tk_device_query(tk_device *dev, char *why, size_t len)
{
    memset(dev, 0, sizeof *dev);
    dev->id = -1;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        tk_device_none_why(e, TK_DRIVER_LIB, why, len);
        cudaGetLastError(); /* clear the sticky-free error so later calls start clean */
        return TK_ERR_NO_DEVICE;
    }
    int id = 0;
    if ((e = cudaGetDevice(&id)) != cudaSuccess) {
        snprintf(why, len, "cudaGetDevice: %s", cudaGetErrorString(e));
        cudaGetLastError();   /* every failure path: a later launch would report it as its own */
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    struct { enum cudaDeviceAttr attr; int *dst; } q[] = {
        { cudaDevAttrMultiProcessorCount, &dev->sm_count },
        { cudaDevAttrMaxThreadsPerBlock, &dev->max_threads_per_block },
        { cudaDevAttrMaxThreadsPerMultiProcessor, &dev->max_threads_per_sm },
        { cudaDevAttrMaxRegistersPerBlock, &dev->regs_per_block },
        { cudaDevAttrMaxRegistersPerMultiprocessor, &dev->regs_per_sm },
        { cudaDevAttrL2CacheSize, &dev->l2_bytes },
        { cudaDevAttrClockRate, &dev->clock_khz },
        { cudaDevAttrMemoryClockRate, &dev->mem_clock_khz },
        { cudaDevAttrGlobalMemoryBusWidth, &dev->mem_bus_bits },
    };
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        if ((e = cudaDeviceGetAttribute(q[i].dst, q[i].attr, id)) != cudaSuccess) {
            snprintf(why, len, "cudaDeviceGetAttribute(%d): %s", (int)q[i].attr, cudaGetErrorString(e));
            cudaGetLastError();
            tk_note_cuda_error((int)e);
            return TK_ERR_CUDA;
        }
    }
    int major = 0, minor = 0, optin = 0, smem_sm = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, id) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, id) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, id) != cudaSuccess ||
        cudaDeviceGetAttribute(&smem_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, id) != cudaSuccess) {
        e = cudaGetLastError();
        snprintf(why, len, "cudaDeviceGetAttribute: %s", cudaGetErrorString(e));
        tk_note_cuda_error((int)e);
        return TK_ERR_CUDA;
    }
    dev->sm = 10 * major + minor;
    dev->smem_per_block_optin = (size_t)optin;
    dev->smem_per_sm = (size_t)smem_sm;
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, id) == cudaSuccess)
        snprintf(dev->name, sizeof dev->name, "%s", prop.name);
    else
        cudaGetLastError();
    dev->id = id;
    return TK_SUCCESS;
}
