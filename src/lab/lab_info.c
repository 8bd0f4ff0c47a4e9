/* lab_info.c - what the device offers and what each kernel asks of it:
 * registers, spills, shared memory, threads, and the occupancy that follows. */
#include <string.h>
#include <cuda_runtime_api.h>
#include "../lib/internal.h"
#include "lab.h"

static int wanted(const char *name, const char *const *kernels)
{
    if (!kernels)
        return 1;
    for (; *kernels; kernels++)
        if (!strcmp(*kernels, name))
            return 1;
    return 0;
}

static void print_registry(FILE *f, const char *const *kernels)
{
    /* the table's families (src/kernels/table.def), then its configurations */
    fprintf(f, "%-8s %6s %-22s %s\n", "family", "min_sm", "accepts", "description");
    for (int i = 0; i < tk_family_count(); i++) {
        const tk_family *fam = tk_family_at(i);
        char acc[64];
        snprintf(acc, sizeof acc, "%s%s%s%s", fam->accepts & TK_ACCEPT_AB_BF16 ? "bf16" : "",
                 fam->accepts & TK_ACCEPT_C_F32 ? "->f32" : "", fam->accepts & TK_ACCEPT_C_BF16 ? ",bf16" : "",
                 fam->accepts & TK_ACCEPT_DENSE ? " dense" : "");
        fprintf(f, "%-8s %6d %-22s %s\n", fam->name, fam->min_sm, acc, fam->description);
    }
    fprintf(f, "\n%-24s %-7s %6s %11s %4s %5s  %s\n", "kernel", "family", "min_sm", "BMxBNxBK", "swap", "rank",
            "description");
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (!wanted(k->name, kernels))
            continue;
        char tile[32] = "-";
        if (k->bm && k->bn)
            snprintf(tile, sizeof tile, "%dx%dx%d", k->bm, k->bn, k->bk);
        fprintf(f, "%-24s %-7s %6d %11s %4d %5d  %s\n", k->name, k->family->name, k->min_sm, tile, k->swap,
                k->auto_rank, k->description);
    }
}

static void print_device(FILE *f, const tk_device *d)
{
    /* double data rate: two transfers per memory clock */
    double gbs = 2.0 * d->mem_clock_khz * 1e3 * (d->mem_bus_bits / 8) / 1e9;
    fprintf(f, "device %d: %s, sm_%d, %d SMs\n", d->id, d->name, d->sm, d->sm_count);
    fprintf(f, "  clocks: max SM %d MHz, memory %d MHz x %d-bit bus (%.0f GB/s theoretical)\n", d->clock_khz / 1000,
            d->mem_clock_khz / 1000, d->mem_bus_bits, gbs);
    fprintf(f, "  L2 %.1f MiB; shared memory %zu KiB per block (opt-in), %zu KiB per SM\n", d->l2_bytes / 1048576.0,
            d->smem_per_block_optin / 1024, d->smem_per_sm / 1024);
    fprintf(f, "  registers %d per block, %d per SM; threads %d per block, %d per SM\n", d->regs_per_block,
            d->regs_per_sm, d->max_threads_per_block, d->max_threads_per_sm);
    double peak = tk_lab_peak_tflops(d->sm, d->sm_count, d->clock_khz);
    if (peak > 0)
        fprintf(f, "  peak dense bf16: %.1f TFLOP/s (%d SMs x %d flop/clk x %d MHz)\n", peak, d->sm_count,
                tk_lab_flop_per_clk(d->sm), d->clock_khz / 1000);
}

int tk_lab_kernel_info(const tk_kernel *k, const tk_device *d, tk_lab_kinfo *ki, char *why, size_t len)
{
    memset(ki, 0, sizeof *ki);
    ki->regs = -1;
    tk_resources r;
    tk_kernel_resources(k, NULL, d, &r);
    if (!r.func)
        return 1;
    tk_func_attrs fa;
    if (tk_func_attrs_get(r.func, &fa, why, len))
        return -1;
    cudaError_t e = cudaSuccess;
    if (r.dyn_smem > 0)
        e = cudaFuncSetAttribute(r.func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)r.dyn_smem);
    int blocks = 0;
    if (!e)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, r.func, r.threads, r.dyn_smem);
    if (e) {
        snprintf(why, len, "%s", cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    int warps = (r.threads + 31) / 32;
    ki->regs = fa.num_regs;
    ki->local_bytes = fa.local_bytes;
    ki->static_smem = fa.static_smem;
    ki->dyn_smem = r.dyn_smem;
    ki->threads = r.threads;
    ki->blocks_per_sm = blocks;
    ki->occupancy = 100.0 * blocks * warps * 32 / d->max_threads_per_sm;
    return 0;
}

/* One kernel's row; returns 1 on a CUDA error. */
static int print_kernel(FILE *f, const tk_kernel *k, const tk_device *d)
{
    fprintf(f, "%-20s ", k->name);
    if (d->sm < k->min_sm) {
        fprintf(f, "needs sm_%d\n", k->min_sm);
        return 0;
    }
    tk_lab_kinfo ki;
    char why[TK_MSG_LEN];
    int st = tk_lab_kernel_info(k, d, &ki, why, sizeof why);
    if (st > 0) {
        fprintf(f, "library (resources chosen by the library)\n");
        return 0;
    }
    if (st < 0) {
        fprintf(f, "%s\n", why);
        return 1;
    }
    fprintf(f, "%5d %8zu %11zu %9zu %8d %10d %8.0f%%\n", ki.regs, ki.local_bytes, ki.static_smem, ki.dyn_smem,
            ki.threads, ki.blocks_per_sm, ki.occupancy);
    return 0;
}

int tk_lab_info(FILE *f, const char *const *kernels)
{
    tk_device d;
    char why[TK_MSG_LEN];
    tk_status st = tk_device_query(&d, why, sizeof why);
    if (st != TK_SUCCESS) {
        fprintf(f, "no usable CUDA device (%s); the registry:\n", why);
        print_registry(f, kernels);
        return 1;
    }
    print_device(f, &d);
    fputc('\n', f);
    print_registry(f, kernels);
    fprintf(f, "\n%-20s %5s %8s %11s %9s %8s %10s %9s\n", "kernel", "regs", "local_B", "static_smem", "dyn_smem",
            "threads", "blocks/SM", "occupancy");
    int bad = 0;
    for (int i = 0; i < tk_registry_count(); i++)
        if (wanted(tk_registry_at(i)->name, kernels))
            bad |= print_kernel(f, tk_registry_at(i), &d);
    return bad;
}
