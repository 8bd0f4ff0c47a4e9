/* lab_f8bench.c - bench of FP8 cases (lab.h, "bench of FP8 cases"): the
 * codes and scales verify makes (tk_lab_f8_data_make) uploaded once per
 * case, C random; the tilekit call through tk_gemm_run with the
 * version-4 fields and cuBLASLt's FP8 matmul of the same buffers
 * (lab_cublaslt.c), both timed by tk_lab_bench_time (L2 flushed before
 * each sample, warm-up, median and spread, timed again when unstable). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "lab.h"
#include "../lib/internal.h"

double tk_lab_fp8_peak_tflops(const tk_lab_bench_info *in)
{
    /* Hopper's tensor cores do twice the bf16 flops per clock on FP8 (dense, fp32 accumulation) */
    return in->sm == 90 ? 2.0 * in->peak_tflops : 0.0;
}

/* A case's buffers: the host inputs and their device copies, C. */
typedef struct f8bufs {
    tk_lab_f8_data in;
    void *a, *b, *c;
    float *sa, *sb;
} f8bufs;

static void bufs_free(f8bufs *x)
{
    tk_lab_f8_data_free(&x->in);
    cudaFree(x->a), cudaFree(x->b), cudaFree(x->c), cudaFree(x->sa), cudaFree(x->sb);
    memset(x, 0, sizeof *x);
}

static cudaError_t upload(void **dev, const void *host, size_t bytes)
{
    cudaError_t e = cudaMalloc(dev, bytes ? bytes : 1);
    return e || !bytes ? e : cudaMemcpy(*dev, host, bytes, cudaMemcpyHostToDevice);
}

/* 0, or -1 with why. */
static int bufs_make(f8bufs *x, const tk_lab_case *c, const tk_lab_f8 *f, void *stream, char *why, size_t len)
{
    memset(x, 0, sizeof *x);
    if (tk_lab_f8_data_make(c, f, &x->in)) {
        snprintf(why, len, "out of host memory for the codes");
        return -1;
    }
    const int64_t c_lines = c->layout == TK_ROW_MAJOR ? c->m : c->n;
    const size_t nc = (size_t)(c_lines * x->in.p.ldc), cb = c->out == TK_F32 ? 4 : 2;
    cudaError_t e = upload(&x->a, x->in.a, x->in.na);
    if (!e) e = upload(&x->b, x->in.b, x->in.nb);
    if (!e) e = upload((void **)&x->sa, x->in.sa, x->in.nsa * sizeof(float));
    if (!e) e = upload((void **)&x->sb, x->in.sb, x->in.nsb * sizeof(float));
    if (!e) e = cudaMalloc(&x->c, nc * cb);
    if (!e) e = (cudaError_t)tk_lab_fill_device(x->c, c->out, nc, tk_lab_mix64(c->seed) ^ 0xc, stream);
    if (!e) e = cudaStreamSynchronize((cudaStream_t)stream);
    if (e) {
        snprintf(why, len, "preparing inputs: %s", cudaGetErrorString(e));
        cudaGetLastError();
        bufs_free(x);
        return -1;
    }
    return 0;
}

/* The route auto-dispatch runs the call on, "k31_wgmma_cluster (copies
 * A^T)" ("" if none). */
static void auto_choice(tk_handle h, const tk_gemm_desc *d, char *buf, size_t len)
{
    tk_fp8_args f;
    tk_route r;
    buf[0] = '\0';
    if (tk_fp8_route(h, d, &f, NULL, &r) == TK_SUCCESS && r.k)
        tk_route_name(&r, buf, len);
}

typedef struct f8call {
    tk_gemm_desc d;
    const char *kernel;
    tk_lab_cublaslt *lt;
} f8call;

static int run_tilekit(tk_lab_bench *b, void *ctx, char *why, size_t len)
{
    const f8call *c = ctx;
    const tk_handle h = tk_lab_bench_handle(b);
    const tk_status st = tk_gemm_run(h, &c->d, c->kernel, tk_lab_bench_stream(b));
    if (st == TK_SUCCESS)
        return 0;
    snprintf(why, len, "%s: %s", tk_status_string(st), tk_last_error(h));
    return -1;
}

static int run_cublaslt(tk_lab_bench *b, void *ctx, char *why, size_t len)
{
    const f8call *c = ctx;
    return tk_lab_cublaslt_run(c->lt, tk_lab_bench_stream(b), why, len);
}

/* The cuBLASLt row's timing: 0, or -1 with r->status saying why not. */
static int time_cublaslt(tk_lab_bench *b, f8call *call, const f8bufs *x, tk_lab_bench_row *r)
{
    char why[TK_LAB_MSG_LEN - 32];
    if (!(call->lt = tk_lab_bench_cublaslt(b, why, sizeof why)) ||
        tk_lab_cublaslt_prepare(call->lt, &call->d, x->in.sb, why, sizeof why)) {
        snprintf(r->status, sizeof r->status, "no cuBLASLt baseline: %s", why);
        return -1;
    }
    return tk_lab_bench_time(b, run_cublaslt, call, r);
}

int tk_lab_f8_bench_case(tk_lab_bench *b, const tk_lab_case *c, const tk_lab_f8 *f, const char *const *kernels,
                         int nkernels, int no_cublas, FILE *out, tk_lab_bench_row *rows)
{
    f8bufs x;
    f8call call;
    char why[TK_LAB_MSG_LEN] = "";
    const int ok = bufs_make(&x, c, f, tk_lab_bench_stream(b), why, sizeof why) == 0;
    if (ok)
        tk_lab_f8_desc(f, &x.in, x.a, x.b, x.c, x.sa, x.sb, &call.d);
    const double peak = tk_lab_fp8_peak_tflops(tk_lab_bench_get_info(b));
    const tk_lab_bench_row *yard = NULL;   /* the timed cuBLASLt row */
    int n = 0;
    for (int i = -1; i < nkernels; i++) {
        if (i < 0 && no_cublas)
            continue;
        tk_lab_bench_row *r = &rows[n++];
        memset(r, 0, sizeof *r);
        snprintf(r->kernel, sizeof r->kernel, "%s", i < 0 ? TK_LAB_CUBLASLT : kernels[i]);
        r->c = *c;
        r->ratio_cublas = r->ratio_grouped = r->ratio_dense = NAN;
        r->pct_peak = NAN;
        r->f8_set = 1;
        r->f8 = *f;
        r->flop = 2.0 * (double)c->m * (double)c->n * (double)c->k;
        int timed = 0;
        if (!ok) {
            snprintf(r->status, sizeof r->status, "%s", why);
        } else if (i < 0) {
            timed = time_cublaslt(b, &call, &x, r) == 0;
            yard = timed ? r : NULL;
        } else {
            call.kernel = kernels[i];
            if (!strcmp(kernels[i], "auto"))   /* the row names the kernel auto-dispatch runs, and its copies */
                auto_choice(tk_lab_bench_handle(b), &call.d, r->chosen, sizeof r->chosen);
            timed = tk_lab_bench_time(b, run_tilekit, &call, r) == 0;
        }
        if (timed && r->ms_median > 0) {
            r->tflops = r->flop / (r->ms_median * 1e9);
            r->pct_peak = peak > 0 ? 100.0 * r->tflops / peak : NAN;
            if (i >= 0 && yard)
                r->ratio_cublas = yard->ms_median / r->ms_median;
        }
        if (out) {
            tk_lab_bench_print_row(out, r);
            fflush(out);
        }
    }
    if (ok)
        bufs_free(&x);
    return n;
}
