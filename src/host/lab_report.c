/* lab_report.c - bench's outputs: the header and table on stdout, and the
 * --json / --csv files. The JSON schema is read by the README table script:
 * change it only together with that script. */
#include <math.h>
#include <string.h>
#include "lab.h"

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
    if (in->l2_flush)
        fprintf(f, "L2 flush: on (cudaMemsetAsync of %.1f MiB before each sample)\n", in->flush_bytes / 1048576.0);
    else
        fprintf(f, "L2 flush: off (--hot)\n");
    fprintf(f, "%-20s %-20s %-4s %-3s %-4s %6s %6s %7s %9s %9s %9s %9s %8s %6s %8s %5s\n", "kernel", "m x n x k",
            "lay", "op", "out", "alpha", "beta", "samples", "min_ms", "median_ms", "p20_ms", "p80_ms", "TFLOP/s",
            "%peak", "xcuBLAS", "MHz");
}

void tk_lab_bench_print_row(FILE *f, const tk_lab_bench_row *r)
{
    char shape[64];
    snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)r->c.m, (long long)r->c.n, (long long)r->c.k);
    fprintf(f, "%-20s %-20s %-4s %c%c  %-4s %6g %6g", r->kernel, shape, r->c.layout == TK_ROW_MAJOR ? "row" : "col",
            r->c.op_a == TK_OP_N ? 'N' : 'T', r->c.op_b == TK_OP_N ? 'N' : 'T', r->c.out == TK_F32 ? "fp32" : "bf16",
            (double)r->c.alpha, (double)r->c.beta);
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

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_str(FILE *f, const char *s)
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

int tk_lab_bench_write_json(FILE *f, const tk_lab_bench_info *in, const tk_lab_bench_row *rows, int n)
{
    fprintf(f, "{\"tool\":\"tilekit bench\",\"version\":\"%d.%d.%d\",\"device\":{\"name\":", TILEKIT_VERSION_MAJOR,
            TILEKIT_VERSION_MINOR, TILEKIT_VERSION_PATCH);
    json_str(f, in->name);
    fprintf(f, ",\"sm\":%d,\"sm_count\":%d,\"clock_mhz\":%d,\"l2_bytes\":%d},\n", in->sm, in->sm_count,
            in->clock_mhz, in->l2_bytes);
    fprintf(f, " \"peak_tflops\":%.6g,\"l2_flush\":%s,\n \"results\":[", in->peak_tflops,
            in->l2_flush ? "true" : "false");
    for (int i = 0; i < n; i++) {
        const tk_lab_bench_row *r = &rows[i];
        int ok = !strcmp(r->status, "ok");
        fprintf(f, "%s\n  {\"kernel\":", i ? "," : "");
        json_str(f, r->kernel);
        fprintf(f, ",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"layout\":\"%s\",\"op_a\":\"%s\",\"op_b\":\"%s\",\"out\":\"%s\"",
                (long long)r->c.m, (long long)r->c.n, (long long)r->c.k, r->c.layout == TK_ROW_MAJOR ? "row" : "col",
                r->c.op_a == TK_OP_N ? "n" : "t", r->c.op_b == TK_OP_N ? "n" : "t",
                r->c.out == TK_F32 ? "fp32" : "bf16");
        fprintf(f, ",\"alpha\":%.9g,\"beta\":%.9g,\"pad\":%d,\"samples\":%d", (double)r->c.alpha,
                (double)r->c.beta, r->c.pad, r->samples);
        json_num(f, "ms_min", r->ms_min, ok);
        json_num(f, "ms_median", r->ms_median, ok);
        json_num(f, "ms_p20", r->ms_p20, ok);
        json_num(f, "ms_p80", r->ms_p80, ok);
        json_num(f, "tflops", r->tflops, ok);
        json_num(f, "pct_peak", r->pct_peak, ok);
        json_num(f, "ratio_cublas", r->ratio_cublas, ok);
        fputs(",\"status\":", f);
        json_str(f, r->status);
        fputc('}', f);
    }
    fputs("\n ]}\n", f);
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
    fputs("device,kernel,m,n,k,layout,op_a,op_b,out,alpha,beta,samples,ms_min,ms_median,ms_p20,ms_p80,tflops,"
          "pct_peak,ratio_cublas,status\n", f);
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
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}
