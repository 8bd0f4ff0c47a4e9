/* lab_bench.c - timing one kernel on one case: warm-up, then cudaEvent
 * samples with L2 flushed before each, until the median is stable or the
 * time budget is spent. The output formats (table, JSON, CSV) are in
 * lab_report.c. */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>
#include "../lib/internal.h"
#include "lab.h"

#define WARMUP 2

struct tk_lab_bench {
    tk_handle h;
    cudaStream_t stream;
    cudaEvent_t ev0, ev1;
    tk_lab_bench_opts o;
    tk_lab_bench_info info;
    void *flush;                /* read before each sample to evict A, B, C from L2 */
    size_t flush_bytes;
    void *sink;                 /* the flush kernel's (never written) result */
    int64_t m, n, k;            /* the shape of da/db; m = 0: none */
    uint64_t seed;
    void *da, *db, *dc;
    size_t c_bytes;
    tk_dtype c_out;
    tk_lab_case cublas_case;    /* the last cuBLAS case timed, for the ratio */
    double cublas_ms;           /* its median; 0 = none */
    double *samples;
    tk_lab_cublas *baselines;   /* batched and grouped cases' cuBLAS (lab_gbench.c); opened on first use */
    tk_lab_cublaslt *lt;        /* FP8 cases' cuBLASLt (lab_f8bench.c); opened on first use */
};

/* The SM clock through NVML, loaded at run time so tilekit neither links
 * nor needs it; any failure just means "unknown" (0). */
int tk_lab_nvml_sm_clock(int cuda_device)
{
    char bus[32];
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, cuda_device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 0;
    typedef int (*init_fn)(void);
    typedef int (*by_bus_fn)(const char *, void **);
    typedef int (*clock_fn)(void *, int, unsigned *);
    init_fn init = (init_fn)dlsym(lib, "nvmlInit_v2");
    init_fn shutdown = (init_fn)dlsym(lib, "nvmlShutdown");
    by_bus_fn by_bus = (by_bus_fn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    clock_fn clock = (clock_fn)dlsym(lib, "nvmlDeviceGetClockInfo");
    unsigned mhz = 0;
    void *dev = NULL;
    if (init && shutdown && by_bus && clock && init() == 0) {
        if (by_bus(bus, &dev) == 0 && clock(dev, 1 /* NVML_CLOCK_SM */, &mhz) != 0)
            mhz = 0;
        shutdown();
    }
    dlclose(lib);
    return (int)mhz;
}

void tk_lab_bench_close(tk_lab_bench *b)
{
    if (!b)
        return;
    tk_lab_cublas_close(b->baselines);
    tk_lab_cublaslt_close(b->lt);
    cudaFree(b->flush); cudaFree(b->sink); cudaFree(b->da); cudaFree(b->db); cudaFree(b->dc);
    if (b->ev0) cudaEventDestroy(b->ev0);
    if (b->ev1) cudaEventDestroy(b->ev1);
    if (b->stream) cudaStreamDestroy(b->stream);
    tk_destroy(b->h);
    free(b->samples);
    free(b);
}

tk_status tk_lab_bench_open(tk_lab_bench **out, const tk_lab_bench_opts *o, char *why, size_t len)
{
    *out = NULL;
    tk_lab_bench *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(why, len, "out of host memory");
        return TK_ERR_ALLOC;
    }
    b->o = *o;
    if (b->o.budget_s <= 0) b->o.budget_s = 2.0;
    if (b->o.min_samples <= 0) b->o.min_samples = 10;
    if (b->o.max_samples <= 0) b->o.max_samples = 200;
    if (b->o.max_samples < b->o.min_samples) b->o.max_samples = b->o.min_samples;
    if (b->o.max_samples > 1024) b->o.max_samples = 1024;   /* summarize's buffer */
    if (b->o.min_samples > b->o.max_samples) b->o.min_samples = b->o.max_samples;
    if (b->o.spread <= 0) b->o.spread = 0.01;
    tk_status st = tk_create(&b->h);
    if (st == TK_SUCCESS && *tk_last_error(NULL))   /* an unusable TILEKIT_TUNE file, ignored */
        fprintf(stderr, "tilekit: %s\n", tk_last_error(NULL));
    if (st == TK_SUCCESS && !b->h->have_device) {
        snprintf(why, len, "%s", b->h->device_error);
        tk_lab_bench_close(b);
        return TK_ERR_NO_DEVICE;
    }
    const tk_device *d = st == TK_SUCCESS ? &b->h->dev : NULL;
    if (d) {
        b->flush_bytes = o->hot ? 0 : 2 * (size_t)d->l2_bytes;
        if (!(b->samples = malloc((size_t)b->o.max_samples * sizeof *b->samples)))
            st = TK_ERR_ALLOC;
        else if (cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking) || cudaEventCreate(&b->ev0) ||
                 cudaEventCreate(&b->ev1) || (b->flush_bytes && cudaMalloc(&b->flush, b->flush_bytes)) ||
                 (b->flush_bytes && cudaMalloc(&b->sink, (size_t)d->sm_count * 4 * sizeof(uint32_t))) ||
                 (b->flush_bytes && tk_lab_fill_device(b->flush, TK_BF16, b->flush_bytes / 2, 11, b->stream)))
            st = TK_ERR_CUDA;
    }
    if (st != TK_SUCCESS) {
        snprintf(why, len, "%s", d ? cudaGetErrorString(cudaGetLastError()) : tk_last_error(NULL));
        tk_lab_bench_close(b);
        return st;
    }
    tk_lab_bench_info *in = &b->info;
    snprintf(in->name, sizeof in->name, "%s", d->name);
    in->sm = d->sm;
    in->sm_count = d->sm_count;
    in->clock_mhz = d->clock_khz / 1000;
    in->mem_clock_mhz = d->mem_clock_khz / 1000;
    in->l2_bytes = d->l2_bytes;
    in->peak_tflops = tk_lab_peak_tflops(d->sm, d->sm_count, d->clock_khz);
    in->l2_flush = !o->hot;
    in->flush_bytes = b->flush_bytes;
    in->nvml_mhz = tk_lab_nvml_sm_clock(d->id);
    char bw_why[TK_LAB_MSG_LEN];
    in->dram_read_gbs = o->no_probe ? 0 : tk_lab_dram_read(d->sm_count, bw_why, sizeof bw_why);
    *out = b;
    return TK_SUCCESS;
}

double tk_lab_dram_read(int sm_count, char *why, size_t len)
{
    size_t bytes = (size_t)1 << 30;
    void *x = NULL, *sink = NULL;
    cudaStream_t s = NULL;
    cudaEvent_t e0 = NULL, e1 = NULL;
    double gbs = 0;
    if (cudaMalloc(&x, bytes) != cudaSuccess) {
        cudaGetLastError();
        bytes >>= 1;
        x = NULL;
        if (cudaMalloc(&x, bytes) != cudaSuccess)
            x = NULL;
    }
    cudaError_t e = x ? cudaSuccess : cudaErrorMemoryAllocation;
    if (!e) e = cudaMalloc(&sink, (size_t)sm_count * 4 * 4);
    if (!e) e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (!e) e = cudaEventCreate(&e0);
    if (!e) e = cudaEventCreate(&e1);
    if (!e) e = (cudaError_t)tk_lab_fill_device(x, TK_BF16, bytes / 2, 7, s);
    double ms[10];
    for (int i = 0; i < 12 && !e; i++) {
        float t = 0;
        if (!e) e = cudaEventRecord(e0, s);
        if (!e) e = (cudaError_t)tk_lab_read_device(x, bytes, sink, sm_count, s);
        if (!e) e = cudaEventRecord(e1, s);
        if (!e) e = cudaEventSynchronize(e1);
        if (!e && i >= 2 && !(e = cudaEventElapsedTime(&t, e0, e1)))
            ms[i - 2] = t;
    }
    if (!e) {
        const double med = tk_lab_percentile(ms, 10, 0.5);
        gbs = med > 0 ? (double)bytes / (med * 1e6) : 0;
    } else {
        snprintf(why, len, "DRAM read probe: %s", cudaGetErrorString(e));
        cudaGetLastError();
    }
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    if (s) cudaStreamDestroy(s);
    cudaFree(sink);
    cudaFree(x);
    return gbs;
}

const tk_lab_bench_info *tk_lab_bench_get_info(const tk_lab_bench *b) { return &b->info; }
tk_handle tk_lab_bench_handle(const tk_lab_bench *b) { return b->h; }
void *tk_lab_bench_stream(const tk_lab_bench *b) { return b->stream; }

tk_lab_cublas *tk_lab_bench_baselines(tk_lab_bench *b, char *why, size_t len)
{
    if (!b->baselines && tk_lab_cublas_open(&b->baselines, b->stream, why, len))
        b->baselines = NULL;
    return b->baselines;
}

tk_lab_cublaslt *tk_lab_bench_cublaslt(tk_lab_bench *b, char *why, size_t len)
{
    if (!b->lt && tk_lab_cublaslt_open(&b->lt, why, len))
        b->lt = NULL;
    return b->lt;
}

/* Random (never zero) A, B and C for the case, kept while the shape lasts;
 * made on the GPU (the values tk_lab_fill would make), so a suite's large
 * shapes cost no host time. */
static int ensure_data(tk_lab_bench *b, const tk_lab_case *c, char *why, size_t len)
{
    /* sized for padded leading dimensions and offsets too (tk_lab_buf_elems covers them) */
    size_t na = tk_lab_buf_elems(c->m, c->k), nb = tk_lab_buf_elems(c->k, c->n), nc = tk_lab_buf_elems(c->m, c->n);
    size_t cb = nc * (c->out == TK_F32 ? 4 : 2);
    int new_ab = b->m != c->m || b->n != c->n || b->k != c->k || b->seed != c->seed;
    int new_c = new_ab || b->c_out != c->out || b->c_bytes != cb;
    cudaError_t e = cudaSuccess;
    if (new_ab) {
        cudaFree(b->da); cudaFree(b->db);
        b->da = b->db = NULL;
        b->m = 0;
        e = cudaMalloc(&b->da, na * 2);
        if (!e) e = cudaMalloc(&b->db, nb * 2);
        if (!e) e = (cudaError_t)tk_lab_fill_device(b->da, TK_BF16, na, tk_lab_mix64(c->seed) ^ 0xa, b->stream);
        if (!e) e = (cudaError_t)tk_lab_fill_device(b->db, TK_BF16, nb, tk_lab_mix64(c->seed) ^ 0xb, b->stream);
    }
    if (!e && new_c) {
        cudaFree(b->dc);
        b->dc = NULL;
        b->c_bytes = 0;
        e = cudaMalloc(&b->dc, cb);
        if (!e) e = (cudaError_t)tk_lab_fill_device(b->dc, c->out, nc, tk_lab_mix64(c->seed) ^ 0xc, b->stream);
    }
    if (!e) e = cudaStreamSynchronize(b->stream);
    if (e) {
        cudaGetLastError();
        snprintf(why, len, "preparing inputs: %s", cudaGetErrorString(e));
        b->m = 0;
        b->c_bytes = 0;
        return -1;
    }
    b->m = c->m; b->n = c->n; b->k = c->k; b->seed = c->seed;
    b->c_bytes = cb;
    b->c_out = c->out;
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Fills p20, median, p80 and min from the samples so far. */
static void summarize(const tk_lab_bench *b, int n, tk_lab_bench_row *row)
{
    double tmp[1024];
    int nn = n < 1024 ? n : 1024;
    memcpy(tmp, b->samples, (size_t)nn * sizeof *tmp);
    row->ms_min = tk_lab_percentile(tmp, nn, 0.0);
    row->ms_p20 = tk_lab_percentile(tmp, nn, 0.2);
    row->ms_median = tk_lab_percentile(tmp, nn, 0.5);
    row->ms_p80 = tk_lab_percentile(tmp, nn, 0.8);
    row->samples = n;
}

static int same_case(const tk_lab_case *x, const tk_lab_case *y)
{
    return x->layout == y->layout && x->op_a == y->op_a && x->op_b == y->op_b && x->m == y->m && x->n == y->n &&
           x->k == y->k && x->alpha == y->alpha && x->beta == y->beta && x->out == y->out && x->pad == y->pad &&
           x->offset == y->offset;
}

/* Rows timed again when tk_lab_row_unstable (tk_lab_bench_run). */
#define UNSTABLE_RETRIES 2

/* Samples of call into b->samples (*n of them) until the median is
 * stable or the budget is spent; -1 (row->status set) when a call is
 * refused, *e a CUDA error. */
static int take_samples(tk_lab_bench *b, tk_lab_call call, void *ctx, tk_lab_bench_row *row, int *n_out,
                        cudaError_t *e_out)
{
    double t0 = now_s();
    int n = 0;
    cudaError_t e = cudaStreamSynchronize(b->stream);
    while (!e && n < b->o.max_samples) {
        /* The flush reads twice L2's size with loads that allocate in L2:
         * A, B and C are evicted (the last sample's C written back here,
         * outside the timed window) and L2 is left holding clean lines. A
         * write (cudaMemset) left it full of dirty lines whose write-back
         * the timed kernel paid for: 4-6 us of a 117 MB decode read
         * (docs/NOTES.md, session 14). */
        if (b->flush)
            e = (cudaError_t)tk_lab_flush_read_device(b->flush, b->flush_bytes, b->sink, b->info.sm_count, b->stream);
        if (!e) e = cudaEventRecord(b->ev0, b->stream);
        if (!e && call(b, ctx, row->status, sizeof row->status))
            return -1;
        if (!e) e = cudaEventRecord(b->ev1, b->stream);
        if (!e) e = cudaEventSynchronize(b->ev1);
        float ms = 0.0f;
        if (!e) e = cudaEventElapsedTime(&ms, b->ev0, b->ev1);
        if (e)
            break;
        b->samples[n++] = ms;
        if (n < b->o.min_samples)
            continue;
        summarize(b, n, row);
        if ((row->ms_p80 - row->ms_p20) <= b->o.spread * row->ms_median || now_s() - t0 >= b->o.budget_s)
            break;
    }
    *n_out = n;
    *e_out = e;
    return 0;
}

int tk_lab_bench_time(tk_lab_bench *b, tk_lab_call call, void *ctx, tk_lab_bench_row *row)
{
    cudaError_t e = cudaSuccess;
    for (int w = 0; w < WARMUP; w++)
        if (call(b, ctx, row->status, sizeof row->status))
            return -1;
    /* A row whose samples spread widely was timed through a slow phase of
     * the machine (seen on the H100: medians 3-6x too long, cuBLAS and
     * tilekit alike, a row at a time); it is timed again, up to
     * UNSTABLE_RETRIES times, and the attempt with the smallest relative
     * spread is kept (not the fastest), the same rule for every kernel. */
    tk_lab_bench_row best = *row;
    for (int attempt = 0; attempt <= UNSTABLE_RETRIES; attempt++) {
        int n = 0;
        if (take_samples(b, call, ctx, row, &n, &e))
            return -1;
        if (e)
            break;
        summarize(b, n, row);
        row->attempts = attempt + 1;
        if (attempt == 0 || tk_lab_attempt_better(row, &best))
            best = *row;
        if (!tk_lab_row_unstable(row))
            break;
    }
    if (e) {
        snprintf(row->status, sizeof row->status, "CUDA: %s", cudaGetErrorString(e));
        return -1;
    }
    best.attempts = row->attempts;
    *row = best;
    row->nvml_mhz = tk_lab_nvml_sm_clock(b->h->dev.id);
    snprintf(row->status, sizeof row->status, "ok");
    return 0;
}

/* A dense case's call: tk_gemm_ex of the kernel. */
typedef struct dense_call {
    const tk_gemm_problem *p;
    const char *kernel;
} dense_call;

static int run_dense(tk_lab_bench *b, void *ctx, char *why, size_t len)
{
    const dense_call *d = ctx;
    if (tk_gemm_ex(b->h, d->p, d->kernel, b->stream) == TK_SUCCESS)
        return 0;
    snprintf(why, len, "%s", tk_last_error(b->h));
    return -1;
}

int tk_lab_bench_run(tk_lab_bench *b, const char *kernel, const tk_lab_case *cin, tk_lab_bench_row *row)
{
    const tk_lab_case *c = cin;
    memset(row, 0, sizeof *row);
    snprintf(row->kernel, sizeof row->kernel, "%s", kernel);
    row->c = *c;
    row->ratio_cublas = NAN;
    if (ensure_data(b, c, row->status, sizeof row->status))
        return -1;
    tk_gemm_problem p;
    tk_lab_problem(c, b->da, b->db, b->dc, &p);
    if (!strcmp(kernel, "auto")) {  /* the row names the kernel auto-dispatch runs, and its copies */
        tk_route r;
        if (tk_select_route(b->h, &p, &r) == TK_SUCCESS)
            tk_route_name(&r, row->chosen, sizeof row->chosen);
    }
    if (tk_kernel_supports(b->h, kernel, &p) != TK_SUCCESS) {
        snprintf(row->status, sizeof row->status, "%s", tk_last_error(b->h));
        return -1;
    }
    dense_call dc = { &p, kernel };
    if (tk_lab_bench_time(b, run_dense, &dc, row))
        return -1;
    row->tflops = tk_lab_tflops(c->m, c->n, c->k, row->ms_median);
    row->pct_peak = b->info.peak_tflops > 0 ? 100.0 * row->tflops / b->info.peak_tflops : NAN;
    if (!strcmp(kernel, "cublas")) {
        b->cublas_case = *c;
        b->cublas_ms = row->ms_median;
    }
    if (b->cublas_ms > 0 && same_case(&b->cublas_case, c))
        row->ratio_cublas = b->cublas_ms / row->ms_median;
    return 0;
}

int tk_lab_bench_launch(tk_lab_bench *b, const char *kernel, const tk_lab_case *c, int calls, tk_lab_bench_row *row,
                        tk_lab_kinfo *ki)
{
    memset(row, 0, sizeof *row);
    memset(ki, 0, sizeof *ki);
    ki->regs = -1;
    snprintf(row->kernel, sizeof row->kernel, "%s", kernel);
    row->c = *c;
    if (ensure_data(b, c, row->status, sizeof row->status))
        return -1;
    tk_gemm_problem p;
    tk_lab_problem(c, b->da, b->db, b->dc, &p);
    const tk_kernel *k = tk_registry_find(kernel);
    if (!strcmp(kernel, "auto")) {
        tk_route r;
        if (tk_select_route(b->h, &p, &r) == TK_SUCCESS) {
            tk_route_name(&r, row->chosen, sizeof row->chosen);
            k = r.k;
        }
    }
    if (tk_kernel_supports(b->h, kernel, &p) != TK_SUCCESS) {
        snprintf(row->status, sizeof row->status, "%s", tk_last_error(b->h));
        return -1;
    }
    char why[TK_LAB_MSG_LEN];
    if (k && tk_lab_kernel_info(k, &b->h->dev, ki, why, sizeof why) < 0) {
        snprintf(row->status, sizeof row->status, "%s", why);
        return -1;
    }
    /* the first calls load modules, create cuBLAS and the workspaces: outside the range */
    for (int w = 0; w < WARMUP; w++)
        if (tk_gemm_ex(b->h, &p, kernel, b->stream) != TK_SUCCESS) {
            snprintf(row->status, sizeof row->status, "%s", tk_last_error(b->h));
            return -1;
        }
    cudaError_t e = cudaStreamSynchronize(b->stream);
    if (!e) e = cudaProfilerStart();
    for (int i = 0; i < calls && !e; i++)
        if (tk_gemm_ex(b->h, &p, kernel, b->stream) != TK_SUCCESS) {
            snprintf(row->status, sizeof row->status, "%s", tk_last_error(b->h));
            cudaProfilerStop();
            return -1;
        }
    if (!e) e = cudaStreamSynchronize(b->stream);
    cudaError_t e2 = cudaProfilerStop();
    if (!e) e = e2;
    if (e) {
        snprintf(row->status, sizeof row->status, "CUDA: %s", cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    snprintf(row->status, sizeof row->status, "ok");
    return 0;
}
