/* lab_gbench.c - bench of one batched or grouped case (lab.h): tilekit's one
 * call on the whole case against the yardsticks of the same run, on the
 * same buffers: the cuBLAS loop and cublasGemmGroupedBatchedEx
 * (lab_cublas.c) and the loop of dense tilekit calls a caller without the
 * grouped API would write. Timing is tk_lab_bench_time's (L2 flushed,
 * median, retries); TFLOP/s count the flops the groups do. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "../lib/internal.h"
#include "lab.h"

/* What the timed calls need. */
typedef struct gcall {
    tk_gemm_desc d;             /* the whole case over the buffers */
    const char *kernel;         /* tk_gemm_run's */
    tk_lab_cublas *x;           /* the cuBLAS yardsticks, prepared (NULL: not run) */
    tk_gemm_problem *parts;     /* the dense loop's problems: every group with rows */
    int nparts;
} gcall;

static int run_whole(tk_lab_bench *b, void *ctx, char *why, size_t len)
{
    const gcall *c = ctx;
    const tk_handle h = tk_lab_bench_handle(b);
    if (tk_gemm_run(h, &c->d, c->kernel, tk_lab_bench_stream(b)) == TK_SUCCESS)
        return 0;
    snprintf(why, len, "%s", tk_last_error(h));
    return -1;
}

static int run_loop(tk_lab_bench *b, void *ctx, char *why, size_t len)
{
    (void)b;
    return tk_lab_cublas_loop(((const gcall *)ctx)->x, why, len);
}

static int run_grouped(tk_lab_bench *b, void *ctx, char *why, size_t len)
{
    (void)b;
    return tk_lab_cublas_grouped(((const gcall *)ctx)->x, why, len) ? -1 : 0;
}

static int run_dense(tk_lab_bench *b, void *ctx, char *why, size_t len)
{
    const gcall *c = ctx;
    const tk_handle h = tk_lab_bench_handle(b);
    for (int i = 0; i < c->nparts; i++)
        if (tk_gemm_ex(h, &c->parts[i], NULL, tk_lab_bench_stream(b)) != TK_SUCCESS) {
            snprintf(why, len, "group %d: %s", i, tk_last_error(h));
            return -1;
        }
    return 0;
}

int tk_lab_is_yardstick(const char *kernel)
{
    return !strcmp(kernel, "cublas") || !strcmp(kernel, TK_LAB_CUBLAS_LOOP) ||
           !strcmp(kernel, TK_LAB_CUBLAS_GROUPED) || !strcmp(kernel, TK_LAB_DENSE_LOOP) ||
           !strcmp(kernel, TK_LAB_CUBLASLT);
}

/* The median of the row of rows[0..n) named `name`, 0 if none was timed. */
static double yardstick_ms(const tk_lab_bench_row *rows, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].kernel, name) && !strcmp(rows[i].status, "ok") && rows[i].ms_median > 0)
            return rows[i].ms_median;
    return 0;
}

void tk_lab_gbench_ratios(tk_lab_bench_row *rows, int n)
{
    const double loop = yardstick_ms(rows, n, TK_LAB_CUBLAS_LOOP);
    const double grouped = yardstick_ms(rows, n, TK_LAB_CUBLAS_GROUPED);
    const double dense = yardstick_ms(rows, n, TK_LAB_DENSE_LOOP);
    for (int i = 0; i < n; i++) {
        tk_lab_bench_row *r = &rows[i];
        const int timed = !strcmp(r->status, "ok") && r->ms_median > 0;
        r->ratio_cublas = timed && loop > 0 && strcmp(r->kernel, TK_LAB_CUBLAS_LOOP) ? loop / r->ms_median : NAN;
        r->ratio_grouped =
            timed && grouped > 0 && strcmp(r->kernel, TK_LAB_CUBLAS_GROUPED) ? grouped / r->ms_median : NAN;
        r->ratio_dense = timed && dense > 0 && strcmp(r->kernel, TK_LAB_DENSE_LOOP) ? dense / r->ms_median : NAN;
    }
}

/* "k01_naive", the kernel auto-dispatch runs the whole case on ("" if none). */
static void auto_choice(tk_handle h, const tk_gemm_desc *d, char *buf, size_t len)
{
    tk_args a;
    int noop = 0;
    const tk_kernel *k = NULL;
    buf[0] = '\0';
    if (tk_prepare(h, &d->problem, NULL, &a, &noop, &k, 1) || noop)
        return;
    /* as grouped.c hands it to the kernels: a column-major BATCHED case swaps A and B */
    const int col = d->problem.layout == TK_COL_MAJOR;
    tk_group_args g = { d->group_kind, d->count, col ? d->stride_b : d->stride_a, col ? d->stride_a : d->stride_b,
                        d->stride_c, d->offs, d->group_error };
    a.grp = &g;
    tk_route r;
    if (tk_route_choose(h, &a, &r, 0))
        tk_route_name(&r, buf, len);
}

/* The case's buffers (random A, B and C, never zero; the offsets) and the
 * calls' arguments; 0, or -1 with why. */
typedef struct gdata {
    void *da, *db, *dc;
    int32_t *doffs, *derr;
} gdata;

static int make_data(tk_lab_bench *b, const tk_lab_gcase *g, gdata *m, gcall *c, char *why, size_t len)
{
    size_t na, nb, nc;
    tk_lab_gcase_desc(g, NULL, NULL, NULL, &c->d, &na, &nb, &nc);
    const cudaStream_t s = tk_lab_bench_stream(b);
    const uint64_t seed = tk_lab_mix64(g->c.seed);
    int32_t *offs = malloc((size_t)g->count * 4);
    cudaError_t e = offs ? cudaSuccess : cudaErrorMemoryAllocation;
    if (!e) e = cudaMalloc(&m->da, na * 2);
    if (!e) e = cudaMalloc(&m->db, nb * 2);
    if (!e) e = cudaMalloc(&m->dc, nc * (g->c.out == TK_F32 ? 4 : 2));
    if (!e) e = cudaMalloc((void **)&m->doffs, (size_t)g->count * 4);
    if (!e) e = cudaMalloc((void **)&m->derr, 4);
    if (!e) e = (cudaError_t)tk_lab_fill_device(m->da, TK_BF16, na, seed ^ 0xa, s);
    if (!e) e = (cudaError_t)tk_lab_fill_device(m->db, TK_BF16, nb, seed ^ 0xb, s);
    if (!e) e = (cudaError_t)tk_lab_fill_device(m->dc, g->c.out, nc, seed ^ 0xc, s);
    if (!e && g->kind != TK_GROUP_BATCHED) {
        tk_lab_gcase_offs(g, offs);
        e = cudaMemcpyAsync(m->doffs, offs, (size_t)g->count * 4, cudaMemcpyHostToDevice, s);
    }
    if (!e) e = cudaMemsetAsync(m->derr, 0, 4, s);
    if (!e) e = cudaStreamSynchronize(s);
    free(offs);
    if (e) {
        snprintf(why, len, "preparing inputs (A %zu, B %zu, C %zu elements): %s", na, nb, nc, cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    tk_lab_gcase_desc(g, m->da, m->db, m->dc, &c->d, NULL, NULL, NULL);
    if (g->kind != TK_GROUP_BATCHED) {
        c->d.offs = m->doffs;
        c->d.group_error = m->derr;
    }
    if (!(c->parts = malloc((size_t)g->count * sizeof *c->parts))) {
        snprintf(why, len, "out of host memory");
        return -1;
    }
    for (int i = 0; i < g->count; i++) {
        tk_lab_gpart pt;
        tk_lab_gcase_part(g, &c->d, i, &pt);
        if (pt.m > 0 && pt.n > 0)
            tk_lab_gpart_problem(&c->d, &pt, m->da, m->db, m->dc, &c->parts[c->nparts++]);
    }
    return 0;
}

static void free_data(gdata *m, gcall *c)
{
    cudaFree(m->da); cudaFree(m->db); cudaFree(m->dc); cudaFree(m->doffs); cudaFree(m->derr);
    free(c->parts);
}

int tk_lab_gbench_case(tk_lab_bench *b, const tk_lab_gcase *g, const char *const *kernels, int nkernels,
                       const tk_lab_gbench_opts *o, FILE *out, tk_lab_bench_row *rows)
{
    /* the rows, in order: yardsticks first, so every later row has its ratios */
    const char *what[TK_LAB_GBENCH_ROWS];
    int n = 0;
    if (!o->no_cublas)
        what[n++] = TK_LAB_CUBLAS_LOOP;
    if (!o->no_cublas && !o->no_grouped)
        what[n++] = TK_LAB_CUBLAS_GROUPED;
    if (o->vs_dense)
        what[n++] = TK_LAB_DENSE_LOOP;
    for (int i = 0; i < nkernels && n < TK_LAB_GBENCH_ROWS; i++)
        what[n++] = kernels[i];
    const tk_lab_bench_info *info = tk_lab_bench_get_info(b);
    char form[80], why[TK_LAB_MSG_LEN / 2] = "";
    tk_lab_gcase_form(g, form, sizeof form);
    for (int i = 0; i < n; i++) {
        tk_lab_bench_row *r = &rows[i];
        memset(r, 0, sizeof *r);
        snprintf(r->kernel, sizeof r->kernel, "%s", what[i]);
        snprintf(r->form, sizeof r->form, "%s", form);
        r->c = g->c;
        r->flop = tk_lab_gcase_flop(g);
        r->read_bytes = tk_lab_gcase_read_bytes(g);
        r->tflops = r->pct_peak = r->read_gbs = NAN;
    }
    gdata m = { 0 };
    gcall c = { 0 };
    int bad = make_data(b, g, &m, &c, why, sizeof why);
    if (!bad && !o->no_cublas &&
        (!(c.x = tk_lab_bench_baselines(b, why, sizeof why)) || tk_lab_cublas_prepare(c.x, g, &c.d, why, sizeof why)))
        bad = 1;
    for (int i = 0; i < n; i++) {
        tk_lab_bench_row *r = &rows[i];
        const char *k = what[i];
        if (bad) {
            snprintf(r->status, sizeof r->status, "%s", why);
        } else {
            tk_lab_call call = !strcmp(k, TK_LAB_CUBLAS_LOOP)      ? run_loop
                               : !strcmp(k, TK_LAB_CUBLAS_GROUPED) ? run_grouped
                               : !strcmp(k, TK_LAB_DENSE_LOOP)     ? run_dense
                                                                   : run_whole;
            c.kernel = k;
            if (!strcmp(k, "auto"))
                auto_choice(tk_lab_bench_handle(b), &c.d, r->chosen, sizeof r->chosen);
            if (!tk_lab_bench_time(b, call, &c, r)) {
                r->tflops = r->flop / (r->ms_median * 1e9);
                r->pct_peak = info->peak_tflops > 0 ? 100.0 * r->tflops / info->peak_tflops : NAN;
                r->read_gbs = r->read_bytes / (r->ms_median * 1e6);
            }
        }
        tk_lab_gbench_ratios(rows, i + 1);
        if (out) {
            tk_lab_bench_print_row(out, r);
            fflush(out);
        }
    }
    free_data(&m, &c);
    return n;
}
