/* quant_bench.c - tk_quantize_fp8's DRAM rate (issue 40: at least 80% of
 * the DRAM rate, counted as bytes read + written / time).
 *
 *   build/quant_bench [--shapes 8192x8192,4096x7168] [--format e4m3|e5m2] [--samples N]
 *
 * For each shape and mode: the median of N samples (default 30), each one
 * call timed by events with L2 flushed before it (a read of twice the L2
 * through L2-allocating loads, the lab bench's flush); bytes = the input
 * (2 a value), the codes (1 a value) and the scales, each counted once.
 * TENSOR reads x twice (two kernels, tilekit.h), which the count leaves
 * out, as the definition does. Measured in the same run, the
 * yardsticks: the DRAM copy rate (cudaMemcpyAsync device to device of 1
 * GiB, read + write counted, median of 10) and the lab's read probe
 * (tk_lab_dram_read). Prints one line per case with GB/s and the percent
 * of both; exits non-zero when a call fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lab/lab.h"

#define MAX_SHAPES 16
#define MAX_SAMPLES 200

static const char *const mode_names[] = { "", "tensor", "row", "1x128", "128x128" };

/* The DRAM copy rate in GB/s (read + written bytes over time). */
static double copy_rate(cudaStream_t s)
{
    const size_t bytes = (size_t)1 << 30;
    void *a = NULL, *b = NULL;
    cudaEvent_t e0, e1;
    double ms[10], gbs = 0;
    if (cudaMalloc(&a, bytes) || cudaMalloc(&b, bytes)) {
        cudaGetLastError();
        cudaFree(a);
        return 0;
    }
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaMemsetAsync(a, 1, bytes, s);
    int ok = 1;
    for (int i = 0; i < 12 && ok; i++) {
        float t = 0;
        cudaEventRecord(e0, s);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s);
        cudaEventRecord(e1, s);
        ok = cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&t, e0, e1) == cudaSuccess;
        if (i >= 2)
            ms[i - 2] = t;
    }
    if (ok) {
        const double med = tk_lab_percentile(ms, 10, 0.5);
        gbs = med > 0 ? 2.0 * (double)bytes / (med * 1e6) : 0;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    return gbs;
}

static int parse_shapes(const char *s, int64_t (*out)[2])
{
    int n = 0;
    while (*s && n < MAX_SHAPES) {
        long long r, c;
        int used = 0;
        if (sscanf(s, "%lldx%lld%n", &r, &c, &used) != 2 || r <= 0 || c <= 0)
            return -1;
        out[n][0] = r, out[n][1] = c, n++;
        s += used;
        if (*s == ',')
            s++;
    }
    return n;
}

int main(int argc, char **argv)
{
    int64_t shapes[MAX_SHAPES][2];
    int nshapes = parse_shapes("8192x8192,4096x7168,16384x4096", shapes), samples = 30, format = TK_FP8_E4M3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shapes") && i + 1 < argc) {
            nshapes = parse_shapes(argv[++i], shapes);
        } else if (!strcmp(argv[i], "--samples") && i + 1 < argc) {
            samples = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            const char *f = argv[++i];
            format = !strcmp(f, "e5m2") ? TK_FP8_E5M2 : !strcmp(f, "e4m3") ? TK_FP8_E4M3 : -1;
        } else {
            fprintf(stderr, "usage: %s [--shapes RxC,...] [--format e4m3|e5m2] [--samples N]\n", argv[0]);
            return 2;
        }
    }
    if (nshapes <= 0 || samples < 1 || samples > MAX_SAMPLES || format < 0) {
        fprintf(stderr, "quant_bench: bad --shapes, --samples (1 to %d) or --format\n", MAX_SAMPLES);
        return 2;
    }
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        fprintf(stderr, "quant_bench: no GPU\n");
        return 1;
    }
    tk_handle h;
    cudaStream_t s;
    if (tk_create(&h) || cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) {
        fprintf(stderr, "quant_bench: setup failed: %s\n", tk_last_error(NULL));
        return 1;
    }
    char why[256] = "";
    const double copy = copy_rate(s), read = tk_lab_dram_read(prop.multiProcessorCount, why, sizeof why);
    printf("device: %s, %d SMs; DRAM copy rate %.0f GB/s (read + write), read probe %.0f GB/s%s%s\n", prop.name,
           prop.multiProcessorCount, copy, read, *why ? ": " : "", why);
    const size_t flush_bytes = 2 * (size_t)prop.l2CacheSize;
    void *flush = NULL, *sink = NULL;
    cudaEvent_t e0, e1;
    if (cudaMalloc(&flush, flush_bytes) || cudaMalloc(&sink, (size_t)prop.multiProcessorCount * 16) ||
        cudaMemset(flush, 0, flush_bytes) || cudaEventCreate(&e0) || cudaEventCreate(&e1)) {
        fprintf(stderr, "quant_bench: setup failed\n");
        return 1;
    }
    int rc = 0;
    for (int si = 0; si < nshapes; si++) {
        const int64_t rows = shapes[si][0], cols = shapes[si][1];
        void *x = NULL, *q = NULL;
        float *scale = NULL;
        const int64_t nmax = rows * ((cols + 127) / 128);   /* the most scales of any mode: 1X128's */
        if (cudaMalloc(&x, (size_t)(rows * cols) * 2) || cudaMalloc(&q, (size_t)(rows * cols)) ||
            cudaMalloc((void **)&scale, (size_t)nmax * 4) ||
            tk_lab_fill_device(x, TK_BF16, (size_t)(rows * cols), 11, s)) {
            fprintf(stderr, "quant_bench: %lldx%lld: allocation failed\n", (long long)rows, (long long)cols);
            rc = 1;
            cudaGetLastError();
            cudaFree(x);
            cudaFree(q);
            continue;
        }
        for (int mode = TK_QUANT_TENSOR; mode <= TK_QUANT_128X128; mode++) {
            tk_quantize_desc d = TK_QUANTIZE_DESC_INIT;
            d.rows = rows, d.cols = cols, d.x = x, d.ldx = cols, d.format = format, d.mode = mode;
            d.q = q, d.ldq = cols, d.scale = scale;
            const int64_t ns = mode == TK_QUANT_TENSOR ? 1
                               : mode == TK_QUANT_ROW  ? rows
                               : mode == TK_QUANT_1X128 ? nmax
                                                        : (rows + 127) / 128 * ((cols + 127) / 128);
            double ms[MAX_SAMPLES];
            tk_status st = tk_quantize_fp8(h, &d, s);   /* warm-up */
            for (int i = 0; i < samples && !st; i++) {
                float t = 0;
                tk_lab_flush_read_device(flush, flush_bytes, sink, prop.multiProcessorCount, s);
                cudaEventRecord(e0, s);
                st = tk_quantize_fp8(h, &d, s);
                cudaEventRecord(e1, s);
                if (cudaEventSynchronize(e1) || cudaEventElapsedTime(&t, e0, e1))
                    st = TK_ERR_CUDA;
                ms[i] = t;
            }
            if (st) {
                printf("quantize %lldx%lld %s %s: %s (%s)\n", (long long)rows, (long long)cols,
                       format == TK_FP8_E4M3 ? "e4m3" : "e5m2", mode_names[mode], tk_status_string(st),
                       tk_last_error(h));
                rc = 1;
                continue;
            }
            const double lo = tk_lab_percentile(ms, samples, 0.0), hi = tk_lab_percentile(ms, samples, 1.0);
            const double med = tk_lab_percentile(ms, samples, 0.5);
            const double bytes = (double)(rows * cols) * 3.0 + (double)ns * 4.0, gbs = bytes / (med * 1e6);
            printf("quantize %lldx%lld %s %-7s: %8.1f us (min %.1f, max %.1f), %6.0f GB/s, %5.1f%% of copy, "
                   "%5.1f%% of read\n",
                   (long long)rows, (long long)cols, format == TK_FP8_E4M3 ? "e4m3" : "e5m2", mode_names[mode],
                   med * 1e3, lo * 1e3, hi * 1e3, gbs, copy > 0 ? 100.0 * gbs / copy : 0.0,
                   read > 0 ? 100.0 * gbs / read : 0.0);
        }
        cudaFree(x);
        cudaFree(q);
        cudaFree(scale);
    }
    tk_destroy(h);
    return rc;
}
