/* test_lab.c - the harness's arithmetic without a GPU: bf16 rounding, the
 * random inputs, the fp64 reference against a naive triple loop, the
 * tolerance, percentiles and TFLOP/s. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lab/lab.h"
#include "lib/kernel.h"
#include "check.h"

static void test_bf16_rounding(void)
{
    CHECK(tk_lab_f32_to_bf16(1.0f) == 0x3f80, "1.0 -> %04x", tk_lab_f32_to_bf16(1.0f));
    /* ties go to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 */
    CHECK(tk_lab_f32_to_bf16(1.0f + 0x1p-8f) == 0x3f80, "tie down");
    CHECK(tk_lab_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82, "tie up");
    CHECK(tk_lab_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3f81, "above half");
    CHECK(tk_lab_f32_to_bf16(-2.5f) == 0xc020, "-2.5");
    uint16_t nan = tk_lab_f32_to_bf16(NAN);
    CHECK(isnan(tk_lab_bf16_to_f32(nan)), "NaN lost: %04x", nan);
    CHECK(isinf(tk_lab_bf16_to_f32(tk_lab_f32_to_bf16(INFINITY))), "inf lost");
    for (uint32_t x = 0; x < 0x7f80; x += 7)   /* every finite positive bf16 survives a round trip */
        CHECK(tk_lab_f32_to_bf16(tk_lab_bf16_to_f32((uint16_t)x)) == x, "round trip %04x", x);
}

static void test_random_inputs(void)
{
    enum { N = 3 << 20 };   /* large enough for the threaded path */
    uint16_t *x = malloc(N * 2), *y = malloc(N * 2);
    float *f = malloc(N * 4);
    tk_lab_fill(x, TK_BF16, N, 7);
    tk_lab_fill(y, TK_BF16, N, 8);
    tk_lab_fill(f, TK_F32, N, 7);
    double sum = 0;
    int zeros = 0, out = 0, same = 0, mism = 0;
    for (int i = 0; i < N; i++) {
        float v = tk_lab_bf16_to_f32(x[i]);
        zeros += v == 0.0f;
        out += !(v >= -1.0f && v <= 1.0f);
        same += x[i] == y[i];
        mism += f[i] != v || (i % 9973 == 0 && tk_lab_rand_bf16(7, (uint64_t)i) != x[i]);
        sum += v;
    }
    CHECK(zeros == 0, "%d zeros", zeros);
    CHECK(out == 0, "%d outside [-1, 1]", out);
    CHECK(fabs(sum / N) < 2e-3, "mean %g", sum / N);
    CHECK(same < N / 50, "seeds 7 and 8 agree on %d of %d", same, N);
    CHECK(mism == 0, "%d elements differ between fp32/bf16/per-element fills", mism);
    free(x); free(y); free(f);
}

/* op(X)(r, c) of a stored matrix, written out independently of lab_cpuref.c. */
static double naive_at(const uint16_t *x, tk_layout l, tk_op op, int64_t ld, int64_t r, int64_t c)
{
    int64_t sr = op == TK_OP_N ? r : c, sc = op == TK_OP_N ? c : r;   /* stored row, col */
    return tk_lab_bf16_to_f32(x[l == TK_ROW_MAJOR ? sr * ld + sc : sc * ld + sr]);
}

static void test_reference_vs_triple_loop(void)
{
    const int64_t shapes[][3] = { { 1, 1, 1 }, { 5, 7, 3 }, { 17, 9, 33 }, { 40, 33, 64 } };
    for (int sh = 0; sh < 4; sh++)
        for (int combo = 0; combo < 16; combo++) {
            tk_lab_case c = { (tk_layout)(combo & 1), (tk_op)(combo >> 1 & 1), (tk_op)(combo >> 2 & 1),
                              shapes[sh][0], shapes[sh][1], shapes[sh][2], 1.5f, combo >> 3 ? 0.5f : 0.0f,
                              combo & 8 ? TK_BF16 : TK_F32, 3, 0, 0 };
            size_t pad = 3;   /* leading dimensions larger than needed */
            uint16_t *a = malloc((size_t)((c.m + pad) * (c.k + pad)) * 2);
            uint16_t *b = malloc((size_t)((c.k + pad) * (c.n + pad)) * 2);
            float *c0 = malloc((size_t)((c.m + pad) * (c.n + pad)) * 4);
            tk_lab_fill(a, TK_BF16, (size_t)((c.m + pad) * (c.k + pad)), 1);
            tk_lab_fill(b, TK_BF16, (size_t)((c.k + pad) * (c.n + pad)), 2);
            tk_lab_fill(c0, c.out, (size_t)((c.m + pad) * (c.n + pad)), 3);
            tk_gemm_problem p;
            tk_lab_problem(&c, a, b, c0, &p);
            p.lda += (int64_t)pad; p.ldb += (int64_t)pad; p.ldc += (int64_t)pad;
            double *want = malloc((size_t)(c.m * c.n) * 8), *s = malloc((size_t)(c.m * c.n) * 8);
            tk_lab_ref_full(&p, want, s);
            int bad = 0;
            for (int64_t i = 0; i < c.m; i++)
                for (int64_t j = 0; j < c.n; j++) {
                    double acc = 0, sa = 0;
                    for (int64_t kk = 0; kk < c.k; kk++) {
                        double x = naive_at(a, c.layout, c.op_a, p.lda, i, kk) *
                                   naive_at(b, c.layout, c.op_b, p.ldb, kk, j);
                        acc += x;
                        sa += fabs(x);
                    }
                    double cv = tk_lab_load(c0, c.out, tk_lab_index(c.layout, p.ldc, i, j));
                    double w = 1.5 * acc + (c.beta != 0 ? 0.5 * cv : 0.0);
                    double got = want[i * c.n + j], gs = s[i * c.n + j];
                    double pw = 0, ps = 0;
                    tk_lab_ref_points(&p, 1, &i, &j, &pw, &ps);
                    bad += fabs(got - w) > 1e-12 * (1 + fabs(w)) || fabs(gs - sa) > 1e-12 * sa || pw != got ||
                           ps != gs;
                }
            char name[128];
            tk_lab_case_name(&c, name, sizeof name);
            CHECK(bad == 0, "%s: %d entries differ from the triple loop", name, bad);
            free(a); free(b); free(c0); free(want); free(s);
        }
}

static void test_tolerance_formula(void)
{
    /* K = 4096, S = 1024: 16 sqrt(K) u S = 2^4 2^6 2^-24 2^10 = 1/16, plus 2 u S */
    double t = tk_lab_tolerance(4096, 1.0f, 0.0f, 1024.0, 0.0, 20.0, TK_F32, 1);
    CHECK(fabs(t - (0.0625 + 2048 * 0x1p-24)) < 1e-15, "fp32: %.17g", t);
    CHECK(tk_lab_tolerance(4096, 1.0f, 0.0f, 1024.0, 0.0, 20.0, TK_F32, 0) == 2 * t, "cuBLAS doubles it");
    double tb = tk_lab_tolerance(4096, 1.0f, 0.0f, 1024.0, 0.0, 20.0, TK_BF16, 1);
    CHECK(fabs(tb - (t + (20.0 + t) / 256)) < 1e-15, "bf16: %.17g", tb);
    CHECK(tk_lab_tolerance(4096, 2.0f, 0.0f, 1024.0, 0.0, 20.0, TK_F32, 1) == 2 * t, "alpha scales S");
    double tc = tk_lab_tolerance(1, 1.0f, 0.5f, 1.0, 8.0, 5.0, TK_F32, 1);
    CHECK(fabs(tc - (16 * 0x1p-24 + 2 * 0x1p-24 * 5.0)) < 1e-18, "beta*c0 term: %.17g", tc);
    CHECK(tk_lab_tolerance(1, 1.0f, 0.0f, 1.0, NAN, 5.0, TK_F32, 1) == 18 * 0x1p-24, "C0 ignored at beta 0");
    CHECK(tk_lab_tolerance(16384, 1, 0, 1, 0, 0, TK_F32, 1) > tk_lab_tolerance(1024, 1, 0, 1, 0, 0, TK_F32, 1),
          "grows with K");
}

/* The tolerance must pass honest fp32 accumulation in the worst order
 * (sequential) and still catch a single dropped product most of the time. */
static void test_tolerance_fits_fp32(void)
{
    enum { K = 4096, E = 300 };
    uint16_t *a = malloc(K * E * 2), *b = malloc(K * E * 2);
    tk_lab_fill(a, TK_BF16, K * E, 11);
    tk_lab_fill(b, TK_BF16, K * E, 12);
    int over = 0, caught = 0;
    double worst = 0;
    for (int e = 0; e < E; e++) {
        float acc = 0.0f, acc_drop = 0.0f;
        double ref = 0, s = 0;
        for (int k = 0; k < K; k++) {
            float x = tk_lab_bf16_to_f32(a[e * K + k]) * tk_lab_bf16_to_f32(b[e * K + k]);
            acc += x;
            acc_drop += k == K / 2 ? 0.0f : x;
            ref += x;
            s += fabs(x);
        }
        double tol = tk_lab_tolerance(K, 1.0f, 0.0f, s, 0.0, ref, TK_F32, 1);
        over += fabs(acc - ref) > tol;
        caught += fabs(acc_drop - ref) > tol;
        worst = fmax(worst, fabs(acc - ref) / tol);
    }
    CHECK(over == 0, "%d of %d honest fp32 sums over tolerance", over, E);
    CHECK(worst < 0.25, "honest fp32 sums use %.2f of the tolerance", worst);
    CHECK(caught > E / 2, "a dropped product caught in only %d of %d", caught, E);
    free(a); free(b);
}

static void test_percentiles(void)
{
    double x[10] = { 7, 3, 10, 1, 9, 2, 8, 4, 6, 5 };
    CHECK(tk_lab_percentile(x, 10, 0.5) == 5.5, "median %g", tk_lab_percentile(x, 10, 0.5));
    CHECK(fabs(tk_lab_percentile(x, 10, 0.2) - 2.8) < 1e-12, "p20 %g", tk_lab_percentile(x, 10, 0.2));
    CHECK(fabs(tk_lab_percentile(x, 10, 0.8) - 8.2) < 1e-12, "p80 %g", tk_lab_percentile(x, 10, 0.8));
    CHECK(tk_lab_percentile(x, 10, 0.0) == 1 && tk_lab_percentile(x, 10, 1.0) == 10, "min/max");
    double y[3] = { 3, 1, 2 }, z[1] = { 4 };
    CHECK(tk_lab_percentile(y, 3, 0.5) == 2, "odd median");
    CHECK(tk_lab_percentile(z, 1, 0.8) == 4, "one sample");
}

/* bench's retry rule: a row is timed again when its p80 is over 1.25x its
 * p20, and the attempt with the smaller relative spread is kept, even when
 * a wider one has the faster median. */
static void test_unstable_rows(void)
{
    tk_lab_bench_row quiet = { .ms_median = 1.00, .ms_p20 = 0.99, .ms_p80 = 1.02 };
    tk_lab_bench_row edge = { .ms_median = 1.10, .ms_p20 = 1.00, .ms_p80 = 1.25 };
    tk_lab_bench_row slow_phase = { .ms_median = 3.00, .ms_p20 = 1.00, .ms_p80 = 4.00 };
    tk_lab_bench_row wide_fast = { .ms_median = 0.90, .ms_p20 = 0.80, .ms_p80 = 1.20 };
    CHECK(!tk_lab_row_unstable(&quiet), "p80 / p20 = 1.03 is stable");
    CHECK(!tk_lab_row_unstable(&edge), "p80 = 1.25 p20 is still stable");
    CHECK(tk_lab_row_unstable(&slow_phase), "p80 = 4 p20 is timed again");
    CHECK(tk_lab_attempt_better(&quiet, &slow_phase) && !tk_lab_attempt_better(&slow_phase, &quiet),
          "the quiet attempt replaces the slow-phase one, not the reverse");
    CHECK(tk_lab_attempt_better(&quiet, &wide_fast) && !tk_lab_attempt_better(&wide_fast, &quiet),
          "the smaller spread wins over the faster median");
    CHECK(!tk_lab_attempt_better(&quiet, &quiet), "a tie keeps the earlier attempt");
}

static void test_tflops_and_peak(void)
{
    double t = tk_lab_tflops(8192, 8192, 8192, 1.0);
    CHECK(fabs(t - 1099.511627776) < 1e-9, "8192^3 in 1 ms: %.9f", t);
    CHECK(fabs(tk_lab_tflops(4096, 4096, 4096, 0.25) - 549.755813888) < 1e-9, "4096^3 in 0.25 ms");
    CHECK(tk_lab_flop_per_clk(90) == 4096 && tk_lab_flop_per_clk(80) == 2048 && tk_lab_flop_per_clk(89) == 1024 &&
              tk_lab_flop_per_clk(86) == 1024 && tk_lab_flop_per_clk(75) == 0,
          "flop/clk table");
    /* H100 SXM: 132 SMs x 4096 x 1830 MHz = 989.4 TFLOP/s (the datasheet figure) */
    CHECK(fabs(tk_lab_peak_tflops(90, 132, 1830000) - 989.42976) < 1e-6, "H100 peak %.5f",
          tk_lab_peak_tflops(90, 132, 1830000));
    CHECK(tk_lab_peak_tflops(75, 80, 1500000) == 0, "unknown arch has no peak");
}

static void test_bench_files(void)
{
    tk_lab_bench_info in = { .name = "Fake \"GPU\"", .sm = 90, .sm_count = 132, .clock_mhz = 1980,
                             .l2_bytes = 52428800, .peak_tflops = 1070.5, .l2_flush = 1 };
    tk_lab_bench_row rows[2] = { { .kernel = "cublas", .c = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, 8192, 8192, 8192,
                                                               1.0f, 0.0f, TK_F32, 1, 0 },
                                   .samples = 10, .attempts = 2, .ms_min = 1.4, .ms_median = 1.5, .ms_p20 = 1.45,
                                   .ms_p80 = 1.55, .tflops = 733.0, .pct_peak = 68.5, .ratio_cublas = 1.0,
                                   .status = "ok" },
                                 { .kernel = "k99", .c = { TK_COL_MAJOR, TK_OP_T, TK_OP_N, 8, 8, 8, 1.5f, 0.5f,
                                                           TK_BF16, 1, 0 },
                                   .ratio_cublas = NAN, .status = "kernel k99: needs \"aligned\" ld" } };
    char buf[4096];
    FILE *f = tmpfile();
    CHECK(tk_lab_bench_write_json(f, &in, rows, 2) == 0, "json write");
    rewind(f);
    buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
    fclose(f);
    static const char *const want[] = {
        "{\"tool\":\"tilekit bench\",\"version\":\"0.1.0\",\"device\":{\"name\":\"Fake \\\"GPU\\\"\",\"sm\":90,",
        "\"sm_count\":132,\"clock_mhz\":1980,\"l2_bytes\":52428800}", "\"peak_tflops\":1070.5,\"l2_flush\":true",
        "\"kernel\":\"cublas\",\"m\":8192,\"n\":8192,\"k\":8192,\"layout\":\"row\",\"op_a\":\"n\",\"op_b\":\"t\"",
        "\"out\":\"fp32\",\"alpha\":1,\"beta\":0,\"pad\":0,\"samples\":10,\"attempts\":2,\"ms_min\":1.4",
        "\"ms_median\":1.5",
        "\"tflops\":733,\"pct_peak\":68.5,\"ratio_cublas\":1,\"status\":\"ok\"}",
        "\"layout\":\"col\",\"op_a\":\"t\",\"op_b\":\"n\",\"out\":\"bf16\",\"alpha\":1.5,\"beta\":0.5",
        "\"ms_median\":null", "\"ratio_cublas\":null,\"status\":\"kernel k99: needs \\\"aligned\\\" ld\"}",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK(strstr(buf, want[i]) != NULL, "JSON lacks %s:\n%s", want[i], buf);
    f = tmpfile();
    CHECK(tk_lab_bench_write_csv(f, &in, rows, 2) == 0, "csv write");
    rewind(f);
    buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
    fclose(f);
    CHECK(strstr(buf, "device,kernel,m,n,k,layout,op_a,op_b,out,alpha,beta,samples,ms_min,ms_median,ms_p20,"
                      "ms_p80,tflops,pct_peak,ratio_cublas,status\n") == buf, "CSV header: %s", buf);
    CHECK(strstr(buf, "\"Fake \"\"GPU\"\"\",\"cublas\",8192,8192,8192,row,n,t,fp32,1,0,10,1.4,1.5,1.45,1.55,733,68.5,1,\"ok\"\n"),
          "CSV row: %s", buf);
    CHECK(strstr(buf, ",,,,,,,\"kernel k99: needs \"\"aligned\"\" ld\"\n"), "CSV refused row: %s", buf);
}

/* FP8 rows (lab_f8bench.c): their own table line (formats, scale mode,
 * the ratio to cuBLASLt), dtype, dtype_b and scale in the files once a
 * row is an FP8 one (bf16 and null in the others), the suite summary
 * against cuBLASLt without its row, and the FP8 peak (sm_90: twice the
 * bf16 one; unknown elsewhere). */
static void test_bench_f8_rows(void)
{
    tk_lab_bench_info in = { .name = "Fake", .sm = 90, .sm_count = 132, .clock_mhz = 1980, .peak_tflops = 1000 };
    const tk_lab_case c = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, 4096, 4096, 4096, 1.0f, 0.0f, TK_BF16, 1, 0, 0 };
    const tk_lab_f8 f = { TK_LAB_E4M3, TK_LAB_E5M2, TK_SCALE_ROW, 0 };
    tk_lab_bench_row rows[3] = {
        { .kernel = TK_LAB_CUBLASLT, .c = c, .samples = 10, .ms_median = 0.2, .tflops = 687.2, .pct_peak = 34.4,
          .ratio_cublas = NAN, .status = "ok", .suite = "square", .f8_set = 1, .f8 = f },
        { .kernel = "auto", .c = c, .samples = 10, .ms_median = 0.16, .tflops = 859.0, .pct_peak = 42.9,
          .ratio_cublas = 1.25, .status = "ok", .suite = "square", .f8_set = 1, .f8 = f },
        { .kernel = "k99", .c = c, .ratio_cublas = NAN, .status = "TK_ERR_NOT_SUPPORTED: no FP8", .suite = "square",
          .f8_set = 1, .f8 = f },
    };
    CHECK(tk_lab_fp8_peak_tflops(&in) == 2000, "sm_90's FP8 peak: %g", tk_lab_fp8_peak_tflops(&in));
    in.sm = 80;
    CHECK(tk_lab_fp8_peak_tflops(&in) == 0, "sm_80's FP8 peak: %g", tk_lab_fp8_peak_tflops(&in));
    static char buf[1 << 14];
    FILE *fp = tmpfile();
    tk_lab_bench_print_f8header(fp);
    for (int i = 0; i < 3; i++)
        tk_lab_bench_print_row(fp, &rows[i]);
    tk_lab_bench_print_summary(fp, rows, 3);
    rewind(fp);
    buf[fread(buf, 1, sizeof buf - 1, fp)] = '\0';
    fclose(fp);
    CHECK(strstr(buf, "xcuBLASLt") && strstr(buf, "e4m3xe5m2 row") && strstr(buf, "    1.250") &&
              strstr(buf, "TK_ERR_NOT_SUPPORTED: no FP8") && strstr(buf, "against cuBLASLt's FP8 matmul"),
          "the FP8 table:\n%s", buf);
    const char *sum = strstr(buf, "summary:");
    CHECK(sum && strstr(sum, "auto") && !strstr(strstr(sum, "\n") ? strstr(sum, "\n") : sum, TK_LAB_CUBLASLT " "),
          "the summary lists cuBLASLt's row or lacks auto:\n%s", sum ? sum : buf);
    tk_lab_bench_row mixed[2] = { rows[1], { .kernel = "cublas", .c = c, .ratio_cublas = NAN, .status = "ok" } };
    fp = tmpfile();
    CHECK(tk_lab_bench_write_json(fp, &in, mixed, 2) == 0, "json write");
    rewind(fp);
    buf[fread(buf, 1, sizeof buf - 1, fp)] = '\0';
    fclose(fp);
    CHECK(strstr(buf, "\"ratio_cublas\":1.25") &&
              strstr(buf, "\"dtype\":\"e4m3\",\"dtype_b\":\"e5m2\",\"scale\":\"row\"}") &&
              strstr(buf, "\"dtype\":\"bf16\",\"dtype_b\":\"bf16\",\"scale\":null}"),
          "JSON of FP8 rows:\n%s", buf);
    fp = tmpfile();
    CHECK(tk_lab_bench_write_csv(fp, &in, mixed, 2) == 0, "csv write");
    rewind(fp);
    buf[fread(buf, 1, sizeof buf - 1, fp)] = '\0';
    fclose(fp);
    CHECK(strstr(buf, ",status,suite,chosen,dtype,dtype_b,scale\n") && strstr(buf, ",e4m3,e5m2,row\n") &&
              strstr(buf, ",bf16,bf16,\n"), "CSV of FP8 rows:\n%s", buf);
}

/* Each row of the table of `tilekit info` (tk_lab_info, all kernels)
 * whose header contains title, to row(line, ctx), up to the next table's
 * header (with a GPU: the resources). Returns whether the header was seen. */
static int info_table(const char *title, void (*row)(const char *line, void *ctx), void *ctx)
{
    FILE *f = tmpfile();
    CHECK(f != NULL, "tmpfile");
    if (!f)
        return 0;
    tk_lab_info(f, NULL, NULL);
    rewind(f);
    char line[512];
    int header = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, title)) {
            header = 1;
            continue;
        }
        if (header == 1 && !strncmp(line, "kernel ", 7))
            header = 2;
        if (header == 1 && line[0] != '\n')
            row(line, ctx);
    }
    fclose(f);
    return header > 0;
}

typedef struct epi_seen { int k01, k30, k31, k40, k20, k21, other; } epi_seen;

static void epi_row(const char *line, void *ctx)
{
    epi_seen *e = ctx;
    if (!strncmp(line, "k01_naive ", 10))
        e->k01 = strstr(line, " bias_act gated backward gated_backward\n") != NULL;
    else if (!strncmp(line, "k30_wgmma_tma ", 14))
        e->k30 = strstr(line, " bias_act gated backward gated_backward\n") != NULL;
    else if (!strncmp(line, "k31_wgmma_cluster ", 18))
        e->k31 = strstr(line, " bias_act backward\n") != NULL;
    else if (!strncmp(line, "k40_skinny ", 11))
        e->k40 = strstr(line, " bias_act gated backward gated_backward\n") != NULL;
    else if (!strncmp(line, "k20_mma_sync ", 13))
        e->k20 = strstr(line, " bias_act gated backward gated_backward\n") != NULL;
    else if (!strncmp(line, "k21_mma_fastload ", 17))
        e->k21 = strstr(line, " bias_act gated backward gated_backward\n") != NULL;
    else if (line[0] == 'k')
        e->other++;
}

/* tilekit info's fused-epilogue table, asked of the kernels' own checks
 * (on this machine's device, or an sm_90 stand-in without one): k01_naive,
 * k30_wgmma_tma, k40_skinny, k20_mma_sync and k21_mma_fastload take every
 * kind, k31_wgmma_cluster the plain ones, and the configurations without
 * fused instances are not listed. */
static void test_info_lists_epilogues(void)
{
    epi_seen e = { 0, 0, 0, 0, 0, 0, 0 };
    const int header = info_table("fused epilogues (", epi_row, &e);
    CHECK(header && e.k01 && e.k30 && e.k31 && e.k40 && e.k20 && e.k21 && !e.other,
          "info's epilogue table: header %d, k01 %d, k30 %d, k31 %d, k40 %d, k20 %d, k21 %d, %d others", header, e.k01,
          e.k30, e.k31, e.k40, e.k20, e.k21, e.other);
}

typedef struct fp8_seen { int k01, bad; } fp8_seen;

static void fp8_row(const char *line, void *ctx)
{
    fp8_seen *x = ctx;
    char name[128];
    if (sscanf(line, "%127s", name) != 1)
        return;
    const tk_kernel *k = tk_registry_find(name);
    x->bad += !k || !(k->family->accepts & TK_ACCEPT_AB_FP8);
    if (!strcmp(name, "k01_naive"))
        x->k01 = strstr(line, " any pairing: tensor row block\n") != NULL;
}

/* tilekit info's FP8 table, asked of the kernels' own checks as the
 * epilogue one: k01_naive takes every pairing of formats in every scale
 * mode, and only kernels of families with TK_ACCEPT_AB_FP8 are listed. */
static void test_info_lists_fp8(void)
{
    fp8_seen x = { 0, 0 };
    const int header = info_table("FP8 operands (", fp8_row, &x);
    CHECK(header && x.k01 && !x.bad, "info's FP8 table: header %d, k01 %d, %d without FP8", header, x.k01, x.bad);
}

void tk_tests(void)
{
    TK_TEST(test_info_lists_epilogues);
    TK_TEST(test_info_lists_fp8);
    TK_TEST(test_bf16_rounding);
    TK_TEST(test_random_inputs);
    TK_TEST(test_reference_vs_triple_loop);
    TK_TEST(test_tolerance_formula);
    TK_TEST(test_tolerance_fits_fp32);
    TK_TEST(test_percentiles);
    TK_TEST(test_unstable_rows);
    TK_TEST(test_tflops_and_peak);
    TK_TEST(test_bench_files);
    TK_TEST(test_bench_f8_rows);
}
