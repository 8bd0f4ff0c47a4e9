/* lab_report.c - bench's outputs: the header and table on stdout, and the
 * --json / --csv files. The JSON schema is read by the README table script:
 * change it only together with that script. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lab.h"

/* Wide enough for "auto -> k31_wgmma_cluster", the kernel of a suite's rows. */
#define KERNEL_W 40

void tk_lab_bench_print_header(FILE *f, const tk_lab_bench_info *in)
{
    fprintf(f, "tilekit bench %d.%d.%d: %s, sm_%d, %d SMs, L2 %.1f MiB\n", TILEKIT_VERSION_MAJOR,
            TILEKIT_VERSION_MINOR, TILEKIT_VERSION_PATCH, in->name, in->sm, in->sm_count,
            in->l2_bytes / 1048576.0);
    fprintf(f, "clocks: max SM %d MHz (cudaDevAttrClockRate; used for the peak), memory %d MHz", in->clock_mhz,
            in->mem_clock_mhz);
    if (in->nvml_mhz)
        fprintf(f, ", SM now %d MHz (NVML)", in->nvml_mhz);
    fputc('\n', f);
    if (in->peak_tflops > 0)
        fprintf(f, "peak: %.1f TFLOP/s dense bf16 = %d SMs x %d flop/clk x %d MHz\n", in->peak_tflops, in->sm_count,
                tk_lab_flop_per_clk(in->sm), in->clock_mhz);
    else
        fprintf(f, "peak: unknown for sm_%d (no %%peak column)\n", in->sm);
    if (in->dram_read_gbs > 0)
        fprintf(f, "DRAM read: %.0f GB/s measured (1 GiB read once, median of 10; the yardstick for decode)\n",
                in->dram_read_gbs);
    if (in->l2_flush)
        fprintf(f, "L2 flush: on (a read of %.1f MiB that allocates in L2 before each sample)\n", in->flush_bytes / 1048576.0);
    else
        fprintf(f, "L2 flush: off (--hot)\n");
    fprintf(f, "%-*s %-20s %-4s %-3s %-4s %6s %6s %7s %9s %9s %9s %9s %8s %6s %8s %5s\n", KERNEL_W, "kernel",
            "m x n x k", "lay", "op", "out", "alpha", "beta", "samples", "min_ms", "median_ms", "p20_ms", "p80_ms",
            "TFLOP/s", "%peak", "xcuBLAS", "MHz");
}

/* Wide enough for "rows 256:16384:skewed". */
#define FORM_W 24

void tk_lab_bench_print_gheader(FILE *f)
{
    fprintf(f, "%-*s %-*s %-20s %-3s %-4s %7s %9s %9s %9s %8s %6s %8s %8s %8s %9s %5s\n", KERNEL_W, "kernel", FORM_W,
            "form", "m x n x k", "op", "out", "samples", "median_ms", "p20_ms", "p80_ms", "TFLOP/s", "%peak", "xloop",
            "xgrouped", "xdense", "read_GB/s", "MHz");
}

/* Wide enough for "e4m3xe5m2". */
#define F8_W 9

void tk_lab_bench_print_f8header(FILE *f)
{
    fprintf(f, "FP8 rows: A x B formats and scale mode (tk_gemm_desc version 4); %%peak of the dense FP8 peak; "
               "xcuBLASLt = cuBLASLt's FP8 matmul median / the row's\n");
    fprintf(f, "%-*s %-20s %-4s %-3s %-4s %-*s %-6s %7s %9s %9s %9s %9s %8s %6s %9s %5s\n", KERNEL_W, "kernel",
            "m x n x k", "lay", "op", "out", F8_W, "ab", "scale", "samples", "min_ms", "median_ms", "p20_ms", "p80_ms",
            "TFLOP/s", "%peak", "xcuBLASLt", "MHz");
}

/* A number, or "-" where there is none. */
static void print_opt(FILE *f, int width, int prec, double x)
{
    if (isfinite(x))
        fprintf(f, " %*.*f", width, prec, x);
    else
        fprintf(f, " %*s", width, "-");
}

/* A batched or grouped row: the form, the real flops' TFLOP/s, the ratios
 * to each yardstick of the case and the rate at which A and B were read. */
static void print_grow(FILE *f, const tk_lab_bench_row *r, const char *kernel, const char *shape)
{
    fprintf(f, "%-*s %-*s %-20s %c%c  %-4s", KERNEL_W, kernel, FORM_W, r->form, shape, r->c.op_a == TK_OP_N ? 'N' : 'T',
            r->c.op_b == TK_OP_N ? 'N' : 'T', r->c.out == TK_F32 ? "fp32" : "bf16");
    if (strcmp(r->status, "ok")) {
        fprintf(f, "  %s\n", r->status);
        return;
    }
    fprintf(f, " %7d %9.4f %9.4f %9.4f", r->samples, r->ms_median, r->ms_p20, r->ms_p80);
    print_opt(f, 8, 1, r->tflops);
    print_opt(f, 6, 1, r->pct_peak);
    print_opt(f, 8, 3, r->ratio_cublas);
    print_opt(f, 8, 3, r->ratio_grouped);
    print_opt(f, 8, 3, r->ratio_dense);
    print_opt(f, 9, 0, r->read_gbs);
    if (r->nvml_mhz) fprintf(f, " %5d\n", r->nvml_mhz);
    else fprintf(f, " %5s\n", "-");
}

/* "e4m3" when both operands have it, else "e4m3xe5m2". */
static void ab_str(const tk_lab_f8 *f8, char *buf, size_t len)
{
    if (f8->fa == f8->fb)
        snprintf(buf, len, "%s", tk_lab_fp8_format_name(f8->fa));
    else
        snprintf(buf, len, "%sx%s", tk_lab_fp8_format_name(f8->fa), tk_lab_fp8_format_name(f8->fb));
}

/* An FP8 row: the dense row's columns with the formats and scale mode,
 * the ratio against cuBLASLt's FP8 matmul. */
static void print_f8row(FILE *f, const tk_lab_bench_row *r, const char *kernel, const char *shape)
{
    char ab[32];
    ab_str(&r->f8, ab, sizeof ab);
    fprintf(f, "%-*s %-20s %-4s %c%c  %-4s %-*s %-6s", KERNEL_W, kernel, shape,
            r->c.layout == TK_ROW_MAJOR ? "row" : "col", r->c.op_a == TK_OP_N ? 'N' : 'T',
            r->c.op_b == TK_OP_N ? 'N' : 'T', r->c.out == TK_F32 ? "fp32" : "bf16", F8_W, ab,
            tk_lab_scale_mode_name(r->f8.scale_mode));
    if (strcmp(r->status, "ok")) {
        fprintf(f, "  %s\n", r->status);
        return;
    }
    fprintf(f, " %7d %9.4f %9.4f %9.4f %9.4f", r->samples, r->ms_min, r->ms_median, r->ms_p20, r->ms_p80);
    print_opt(f, 8, 1, r->tflops);
    print_opt(f, 6, 1, r->pct_peak);
    print_opt(f, 9, 3, r->ratio_cublas);
    if (r->nvml_mhz) fprintf(f, " %5d\n", r->nvml_mhz);
    else fprintf(f, " %5s\n", "-");
}

void tk_lab_bench_print_row(FILE *f, const tk_lab_bench_row *r)
{
    char shape[64], kernel[sizeof r->kernel + sizeof r->chosen + 4];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)r->c.m, (long long)r->c.n, (long long)r->c.k);
    snprintf(kernel, sizeof kernel, "%s%s%s", r->kernel, r->chosen[0] ? " -> " : "", r->chosen);
    if (r->form[0]) {
        print_grow(f, r, kernel, shape);
        return;
    }
    if (r->f8_set) {
        print_f8row(f, r, kernel, shape);
        return;
    }
    fprintf(f, "%-*s %-20s %-4s %c%c  %-4s %6g %6g", KERNEL_W, kernel, shape,
            r->c.layout == TK_ROW_MAJOR ? "row" : "col", r->c.op_a == TK_OP_N ? 'N' : 'T',
            r->c.op_b == TK_OP_N ? 'N' : 'T', r->c.out == TK_F32 ? "fp32" : "bf16", (double)r->c.alpha,
            (double)r->c.beta);
    if (strcmp(r->status, "ok")) {
        fprintf(f, "  %s\n", r->status);
        return;
    }
    fprintf(f, " %7d %9.4f %9.4f %9.4f %9.4f %8.1f", r->samples, r->ms_min, r->ms_median, r->ms_p20, r->ms_p80,
            r->tflops);
    if (isnan(r->pct_peak)) fprintf(f, " %6s", "-");
    else fprintf(f, " %6.1f", r->pct_peak);
    if (isnan(r->ratio_cublas)) fprintf(f, " %8s", "-");
    else fprintf(f, " %8.3f", r->ratio_cublas);
    if (r->nvml_mhz) fprintf(f, " %5d\n", r->nvml_mhz);
    else fprintf(f, " %5s\n", "-");
}

void tk_lab_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* A number, or null where there is none (JSON has no NaN). */
static void json_num(FILE *f, const char *key, double x, int ok)
{
    fprintf(f, ",\"%s\":", key);
    if (ok && isfinite(x))
        fprintf(f, "%.6g", x);
    else
        fputs("null", f);
}

/* Whether the files get the suite and chosen fields: only when some row has
 * one (a suite run, or kernel "auto"), so a plain run's files stay as they
 * were; then every row has both, empty ones null (JSON) or "" (CSV). */
static int has_suite_fields(const tk_lab_bench_row *rows, int n)
{
    for (int i = 0; i < n; i++)
        if (rows[i].suite[0] || rows[i].chosen[0])
            return 1;
    return 0;
}

/* Whether the files get the batched and grouped fields: only when some
 * row is of such a case, so the files of dense runs stay as they were. */
static int has_group_fields(const tk_lab_bench_row *rows, int n)
{
    for (int i = 0; i < n; i++)
        if (rows[i].form[0])
            return 1;
    return 0;
}

/* Whether the files get the FP8 fields (dtype, dtype_b, scale): only when
 * some row is an FP8 one, so the files of other runs stay as they were;
 * then the other rows get dtype "bf16" and no scale. */
static int has_f8_fields(const tk_lab_bench_row *rows, int n)
{
    for (int i = 0; i < n; i++)
        if (rows[i].f8_set)
            return 1;
    return 0;
}

/* ",key":"s", or null when s is "" (no suite, not "auto"). */
static void json_opt_str(FILE *f, const char *key, const char *s)
{
    fprintf(f, ",\"%s\":", key);
    if (*s)
        tk_lab_json_str(f, s);
    else
        fputs("null", f);
}

/* "4096x4097x4096 n n"; a grouped row's led by its form ("rows 8:4096:skewed 4096x28672x4096 n t") */
static void shape_str(const tk_lab_bench_row *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%lldx%lldx%lld %s %s", r->form, r->form[0] ? " " : "", (long long)r->c.m,
             (long long)r->c.n, (long long)r->c.k, r->c.op_a == TK_OP_N ? "n" : "t", r->c.op_b == TK_OP_N ? "n" : "t");
}

/* The suite summary of one kernel: its suite rows' ratios to cuBLAS (a row
 * without timing counts as not measured) through tk_lab_suite_summary.
 * Returns the entries in st (min_index made an index into rows), 0 when the
 * kernel has no suite rows, -1 when out of memory. st holds n + 1 entries. */
static int kernel_summary(const tk_lab_bench_row *rows, int n, const char *kernel, tk_lab_suite_stat *st)
{
    double *ratio = malloc((size_t)(n ? n : 1) * sizeof *ratio);
    const char **suite = malloc((size_t)(n ? n : 1) * sizeof *suite);
    int *at = malloc((size_t)(n ? n : 1) * sizeof *at);
    int m = 0, ns = -1;
    if (ratio && suite && at) {
        for (int i = 0; i < n; i++)
            if (rows[i].suite[0] && !strcmp(rows[i].kernel, kernel)) {
                ratio[m] = strcmp(rows[i].status, "ok") ? NAN : rows[i].ratio_cublas;
                suite[m] = rows[i].suite;
                at[m++] = i;
            }
        ns = m ? tk_lab_suite_summary(ratio, suite, m, TK_LAB_SUITE_BELOW, st, n + 1) : 0;
        for (int j = 0; j < ns; j++)
            if (st[j].min_index >= 0)
                st[j].min_index = at[st[j].min_index];
    }
    free(ratio);
    free(suite);
    free(at);
    return ns;
}

/* The kernels with suite rows, the yardsticks (cuBLAS, its loop) excepted, in row
 * order: kernels[i] points into rows. Returns their number. */
static int suite_kernels(const tk_lab_bench_row *rows, int n, const char **kernels)
{
    int nk = 0;
    for (int i = 0; i < n; i++) {
        if (!rows[i].suite[0] || tk_lab_is_yardstick(rows[i].kernel))
            continue;
        int j = 0;
        while (j < nk && strcmp(kernels[j], rows[i].kernel))
            j++;
        if (j == nk)
            kernels[nk++] = rows[i].kernel;
    }
    return nk;
}

void tk_lab_bench_print_summary(FILE *f, const tk_lab_bench_row *rows, int n)
{
    const char **kernels = malloc((size_t)(n ? n : 1) * sizeof *kernels);
    tk_lab_suite_stat *st = malloc((size_t)(n + 1) * sizeof *st);
    int nk = kernels && st ? suite_kernels(rows, n, kernels) : 0;
    char below[32];
    snprintf(below, sizeof below, "below %gx", TK_LAB_SUITE_BELOW);
    /* grouped rows' shapes lead with their form: a wider column */
    const int shape_w = has_group_fields(rows, n) ? 48 : 28;
    if (nk)
        fprintf(f, "\nsummary: x cuBLAS = cuBLAS median / kernel median, same shape, same run (> 1: faster)%s%s\n"
                   "%-*s %-10s %6s %16s %8s  %-*s %10s %12s\n",
                has_group_fields(rows, n) ? "; grouped and batched rows: against the cuBLAS loop" : "",
                has_f8_fields(rows, n) ? "; FP8 rows: against cuBLASLt's FP8 matmul of the same codes and scales" : "",
                KERNEL_W,
                "kernel", "suite", "shapes", "geomean x cuBLAS", "min", shape_w, "(shape)", below, "not measured");
    for (int k = 0; k < nk; k++) {
        int ns = kernel_summary(rows, n, kernels[k], st);
        for (int j = 0; j < ns; j++) {
            char shape[160] = "-";
            if (st[j].min_index >= 0)
                shape_str(&rows[st[j].min_index], shape, sizeof shape);
            fprintf(f, "%-*s %-10s %6d", KERNEL_W, kernels[k], j == ns - 1 ? "overall" : st[j].suite, st[j].shapes);
            if (st[j].measured)
                fprintf(f, " %16.3f %8.3f  %-*s", st[j].geomean, st[j].min, shape_w, shape);
            else
                fprintf(f, " %16s %8s  %-*s", "-", "-", shape_w, "-");
            fprintf(f, " %10d %12d\n", st[j].below, st[j].not_measured);
        }
    }
    free(kernels);
    free(st);
}

static void json_stat(FILE *f, const tk_lab_bench_row *rows, const tk_lab_suite_stat *s, int overall)
{
    fputc('{', f);
    if (!overall) {
        fputs("\"suite\":", f);
        tk_lab_json_str(f, s->suite);
        fputc(',', f);
    }
    fprintf(f, "\"shapes\":%d,\"measured\":%d,\"not_measured\":%d", s->shapes, s->measured, s->not_measured);
    json_num(f, "geomean", s->geomean, s->measured);
    json_num(f, "min", s->min, s->measured);
    fputs(",\"min_shape\":", f);
    if (s->min_index >= 0) {
        char shape[160];
        shape_str(&rows[s->min_index], shape, sizeof shape);
        tk_lab_json_str(f, shape);
    } else
        fputs("null", f);
    fprintf(f, ",\"below\":%d}", s->below);
}

/* ,"summary":{...} when there are suite rows: per kernel, per suite and overall. */
static void json_summary(FILE *f, const tk_lab_bench_row *rows, int n)
{
    const char **kernels = malloc((size_t)(n ? n : 1) * sizeof *kernels);
    tk_lab_suite_stat *st = malloc((size_t)(n + 1) * sizeof *st);
    int nk = kernels && st ? suite_kernels(rows, n, kernels) : 0;
    if (nk)
        fprintf(f, ",\n \"summary\":{\"threshold\":%g,\"kernels\":[", TK_LAB_SUITE_BELOW);
    for (int k = 0; k < nk; k++) {
        int ns = kernel_summary(rows, n, kernels[k], st);
        fprintf(f, "%s\n  {\"kernel\":", k ? "," : "");
        tk_lab_json_str(f, kernels[k]);
        fputs(",\"suites\":[", f);
        for (int j = 0; j < ns - 1; j++) {
            fputs(j ? ",\n   " : "\n   ", f);
            json_stat(f, rows, &st[j], 0);
        }
        fputs("],\n   \"overall\":", f);
        if (ns > 0)
            json_stat(f, rows, &st[ns - 1], 1);
        else
            fputs("null", f);
        fputc('}', f);
    }
    if (nk)
        fputs("\n ]}", f);
    free(kernels);
    free(st);
}

int tk_lab_bench_write_json(FILE *f, const tk_lab_bench_info *in, const tk_lab_bench_row *rows, int n)
{
    int extra = has_suite_fields(rows, n), group = has_group_fields(rows, n), f8 = has_f8_fields(rows, n);
    fprintf(f, "{\"tool\":\"tilekit bench\",\"version\":\"%d.%d.%d\",\"device\":{\"name\":", TILEKIT_VERSION_MAJOR,
            TILEKIT_VERSION_MINOR, TILEKIT_VERSION_PATCH);
    tk_lab_json_str(f, in->name);
    fprintf(f, ",\"sm\":%d,\"sm_count\":%d,\"clock_mhz\":%d,\"l2_bytes\":%d},\n", in->sm, in->sm_count,
            in->clock_mhz, in->l2_bytes);
    fprintf(f, " \"peak_tflops\":%.6g,\"l2_flush\":%s,\"dram_read_gbs\":%.6g,\n \"results\":[", in->peak_tflops,
            in->l2_flush ? "true" : "false", in->dram_read_gbs);
    for (int i = 0; i < n; i++) {
        const tk_lab_bench_row *r = &rows[i];
        int ok = !strcmp(r->status, "ok");
        fprintf(f, "%s\n  {\"kernel\":", i ? "," : "");
        tk_lab_json_str(f, r->kernel);
        fprintf(f, ",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"layout\":\"%s\",\"op_a\":\"%s\",\"op_b\":\"%s\",\"out\":\"%s\"",
                (long long)r->c.m, (long long)r->c.n, (long long)r->c.k, r->c.layout == TK_ROW_MAJOR ? "row" : "col",
                r->c.op_a == TK_OP_N ? "n" : "t", r->c.op_b == TK_OP_N ? "n" : "t",
                r->c.out == TK_F32 ? "fp32" : "bf16");
        fprintf(f, ",\"alpha\":%.9g,\"beta\":%.9g,\"pad\":%d,\"samples\":%d,\"attempts\":%d", (double)r->c.alpha,
                (double)r->c.beta, r->c.pad, r->samples, r->attempts);
        json_num(f, "ms_min", r->ms_min, ok);
        json_num(f, "ms_median", r->ms_median, ok);
        json_num(f, "ms_p20", r->ms_p20, ok);
        json_num(f, "ms_p80", r->ms_p80, ok);
        json_num(f, "tflops", r->tflops, ok);
        json_num(f, "pct_peak", r->pct_peak, ok);
        json_num(f, "ratio_cublas", r->ratio_cublas, ok);
        fputs(",\"status\":", f);
        tk_lab_json_str(f, r->status);
        if (extra) {
            json_opt_str(f, "suite", r->suite);
            json_opt_str(f, "chosen", r->chosen);
        }
        if (group) {
            json_opt_str(f, "form", r->form);
            /* whole numbers, written whole (%.6g would round them) */
            fprintf(f, r->form[0] ? ",\"flop\":%.0f,\"read_bytes\":%.0f" : ",\"flop\":null,\"read_bytes\":null",
                    r->flop, r->read_bytes);
            json_num(f, "read_gbs", r->read_gbs, ok);
            json_num(f, "ratio_cublas_grouped", r->ratio_grouped, ok);
            json_num(f, "ratio_dense", r->ratio_dense, ok);
        }
        if (f8) {   /* ratio_cublas of an FP8 row is against cuBLASLt's FP8 matmul */
            fprintf(f, ",\"dtype\":\"%s\",\"dtype_b\":\"%s\"", r->f8_set ? tk_lab_fp8_format_name(r->f8.fa) : "bf16",
                    r->f8_set ? tk_lab_fp8_format_name(r->f8.fb) : "bf16");
            json_opt_str(f, "scale", r->f8_set ? tk_lab_scale_mode_name(r->f8.scale_mode) : "");
        }
        fputc('}', f);
    }
    fputs("\n ]", f);
    json_summary(f, rows, n);
    fputs("}\n", f);
    return ferror(f) ? -1 : 0;
}

/* A CSV field: quoted, with quotes doubled. */
static void csv_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s == '\n' ? ' ' : *s, f);
    }
    fputc('"', f);
}

static void csv_num(FILE *f, double x, int ok)
{
    if (ok && isfinite(x))
        fprintf(f, ",%.6g", x);
    else
        fputc(',', f);
}

int tk_lab_bench_write_csv(FILE *f, const tk_lab_bench_info *in, const tk_lab_bench_row *rows, int n)
{
    int extra = has_suite_fields(rows, n), group = has_group_fields(rows, n), f8 = has_f8_fields(rows, n);
    fputs("device,kernel,m,n,k,layout,op_a,op_b,out,alpha,beta,samples,ms_min,ms_median,ms_p20,ms_p80,tflops,"
          "pct_peak,ratio_cublas,status", f);
    fputs(extra ? ",suite,chosen" : "", f);
    fputs(group ? ",form,flop,read_bytes,read_gbs,ratio_cublas_grouped,ratio_dense" : "", f);
    fputs(f8 ? ",dtype,dtype_b,scale\n" : "\n", f);
    for (int i = 0; i < n; i++) {
        const tk_lab_bench_row *r = &rows[i];
        int ok = !strcmp(r->status, "ok");
        csv_str(f, in->name);
        fputc(',', f);
        csv_str(f, r->kernel);
        fprintf(f, ",%lld,%lld,%lld,%s,%s,%s,%s,%.9g,%.9g,%d", (long long)r->c.m, (long long)r->c.n,
                (long long)r->c.k, r->c.layout == TK_ROW_MAJOR ? "row" : "col", r->c.op_a == TK_OP_N ? "n" : "t",
                r->c.op_b == TK_OP_N ? "n" : "t", r->c.out == TK_F32 ? "fp32" : "bf16", (double)r->c.alpha,
                (double)r->c.beta, r->samples);
        csv_num(f, r->ms_min, ok);
        csv_num(f, r->ms_median, ok);
        csv_num(f, r->ms_p20, ok);
        csv_num(f, r->ms_p80, ok);
        csv_num(f, r->tflops, ok);
        csv_num(f, r->pct_peak, ok);
        csv_num(f, r->ratio_cublas, ok);
        fputc(',', f);
        csv_str(f, r->status);
        if (extra) {
            fputc(',', f);
            csv_str(f, r->suite);
            fputc(',', f);
            csv_str(f, r->chosen);
        }
        if (group) {
            fputc(',', f);
            csv_str(f, r->form);
            fprintf(f, r->form[0] ? ",%.0f,%.0f" : ",,", r->flop, r->read_bytes);
            csv_num(f, r->read_gbs, ok);
            csv_num(f, r->ratio_grouped, ok);
            csv_num(f, r->ratio_dense, ok);
        }
        if (f8)
            fprintf(f, ",%s,%s,%s", r->f8_set ? tk_lab_fp8_format_name(r->f8.fa) : "bf16",
                    r->f8_set ? tk_lab_fp8_format_name(r->f8.fb) : "bf16",
                    r->f8_set ? tk_lab_scale_mode_name(r->f8.scale_mode) : "");
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

void tk_lab_bench_print_decode_bw(FILE *f, const tk_lab_bench_info *info, const tk_lab_bench_row *rows, int n)
{
    int count = 0;
    double min_pct = 0, sum_pct = 0;
    const tk_lab_bench_row *worst = NULL;
    for (int i = 0; i < n; i++) {
        const tk_lab_bench_row *r = &rows[i];
        const double b_bytes = 2.0 * (double)r->c.n * (double)r->c.k;
        if (strcmp(r->kernel, "auto") || strcmp(r->status, "ok") || r->form[0] || r->f8_set || r->c.m > 16 ||
            b_bytes < 64e6 ||
            !(r->ms_median > 0))
            continue;
        const double bytes = b_bytes + 2.0 * (double)r->c.m * (double)r->c.k +
                             (r->c.out == TK_F32 ? 4.0 : 2.0) * (double)r->c.m * (double)r->c.n;
        const double pct = info->dram_read_gbs > 0 ? 100.0 * bytes / (r->ms_median * 1e6) / info->dram_read_gbs : 0;
        if (!worst || pct < min_pct) {
            worst = r;
            min_pct = pct;
        }
        sum_pct += pct;
        count++;
    }
    if (!count)
        return;
    if (info->dram_read_gbs <= 0) {
        fprintf(f, "decode (M <= 16, B >= 64 MB): %d rows; DRAM read bandwidth not measured\n", count);
        return;
    }
    fprintf(f, "decode (M <= 16, B >= 64 MB): %d rows, A + B + C bytes per second = %.1f%% of the measured DRAM "
               "read bandwidth (%.0f GB/s) on average, min %.1f%% (%lldx%lldx%lld)\n",
            count, sum_pct / count, info->dram_read_gbs, min_pct, (long long)worst->c.m, (long long)worst->c.n,
            (long long)worst->c.k);
}

void tk_lab_bench_print_read_rate(FILE *f, const tk_lab_bench_info *info, const tk_lab_bench_row *rows, int n)
{
    int header = 0;
    for (int i = 0; i < n; i++) {
        const tk_lab_bench_row *r = &rows[i];
        if (!r->form[0] || strcmp(r->status, "ok") || !isfinite(r->read_gbs))
            continue;
        if (!header++)
            fprintf(f, "\nread rate: bytes of A and B the groups multiply (%.3g MB) / median time", r->read_bytes / 1e6);
        if (header == 1 && info->dram_read_gbs > 0)
            fprintf(f, ", against the measured DRAM read bandwidth (%.0f GB/s)", info->dram_read_gbs);
        if (header == 1)
            fputc('\n', f);
        fprintf(f, "  %-*s %-*s %8.0f GB/s", KERNEL_W, r->kernel, FORM_W, r->form, r->read_gbs);
        if (info->dram_read_gbs > 0)
            fprintf(f, " = %5.1f%%", 100.0 * r->read_gbs / info->dram_read_gbs);
        fputc('\n', f);
    }
}
