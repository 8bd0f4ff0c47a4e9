/* test_lab_profile.c - `tilekit profile`'s metric table, its parser of
 * ncu's CSV and the figures it derives, on ncu output saved from an H100
 * (tests/host/fixtures/ncu_*.csv: the stdout of `ncu --csv --page raw
 * --print-units base --metrics ...` over `tilekit bench`, one row per
 * profiled launch; the device-attribute columns of all but the k10 file
 * trimmed) and on small CSV texts made here for what those files lack.
 * The expected values are the fixtures' own cells. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lab/lab.h"
#include "check.h"

static const char *fixture_dir(void)
{
    const char *d = getenv("TK_FIXTURES");
    return d && *d ? d : "tests/host/fixtures";
}

/* The fixture's text (malloc'ed), NULL after a failed CHECK. */
static char *read_fixture(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fixture_dir(), name);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "cannot open %s (run from the repository root, or set TK_FIXTURES)", path);
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    size_t got = text ? fread(text, 1, (size_t)n, f) : 0;
    fclose(f);
    if (text)
        text[got] = '\0';
    return text;
}

static int near(double x, double want) { return fabs(x - want) <= 1e-9 * fabs(want) + 1e-12; }

static double value(const tk_lab_profile *p, const char *name) { return tk_lab_profile_value(p, name); }

static void test_metric_table(void)
{
    int n = tk_lab_metric_count();
    CHECK(n == TK_LAB_METRICS, "%d metrics, TK_LAB_METRICS %d", n, TK_LAB_METRICS);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const tk_lab_metric *m = tk_lab_metric_at(i);
        CHECK(m && m->ncu && m->key && m->meaning && *m->ncu && *m->key && *m->meaning, "entry %d is incomplete", i);
        if (!m || !m->ncu || !m->key)
            continue;
        CHECK(strchr(m->ncu, ',') == NULL && strchr(m->ncu, ' ') == NULL, "'%s' would break the --metrics list",
              m->ncu);
        CHECK(tk_lab_metric_find(m->ncu) == i, "'%s' found at %d, is %d", m->ncu, tk_lab_metric_find(m->ncu), i);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(m->key, tk_lab_metric_at(j)->key) != 0, "JSON key '%s' twice", m->key);
        total += strlen(m->ncu) + (i > 0);
    }
    CHECK(tk_lab_metric_at(-1) == NULL && tk_lab_metric_at(n) == NULL, "out-of-range entries");
    CHECK(tk_lab_metric_find("no__such_metric.sum") == -1, "an unknown metric was found");
    /* the --metrics list: every name once, comma-separated, cut cleanly when short */
    size_t need = tk_lab_metric_list(NULL, 0);
    CHECK(need == total, "list needs %zu characters, the names take %zu", need, total);
    char *list = malloc(need + 1);
    if (!list)
        return;
    CHECK(tk_lab_metric_list(list, need + 1) == need && strlen(list) == need, "list: '%s'", list);
    int fields = 1;
    for (char *c = list; *c; c++)
        fields += *c == ',';
    CHECK(fields == n, "the list has %d names, the table %d", fields, n);
    char small[16];
    CHECK(tk_lab_metric_list(small, sizeof small) == need && strlen(small) == sizeof small - 1, "short buffer");
    free(list);
}

/* k10 at 2048^3: the seed-style kernel of seed 002, mma.sync, four warps. */
static void test_parse_k10(void)
{
    char *text = read_fixture("ncu_k10_4w_128x128_k32.csv");
    if (!text)
        return;
    tk_lab_profile *p = calloc(1, sizeof *p);
    char why[512] = "";
    snprintf(p->kernel, sizeof p->kernel, "k10_4w_128x128_k32");
    int rc = tk_lab_profile_parse(text, p, why, sizeof why);
    CHECK(rc == 0, "parse: %s", why);
    if (rc == 0) {
        CHECK(!strcmp(p->kernel, "k10_4w_128x128_k32"), "the kernel name was lost: '%s'", p->kernel);
        CHECK(p->nkernels == 2, "%d kernel rows, the file has 2 launches", p->nkernels);
        CHECK(!strcmp(p->k[0].function, "k10_kernel(tk_args)"), "function '%s'", p->k[0].function);
        CHECK(!strcmp(p->device, "NVIDIA H100 80GB HBM3"), "device '%s'", p->device);
        /* the longer launch (290,496 ns against 290,304) is the one shown */
        CHECK(p->main == 0 && near(value(p, "gpu__time_duration.sum"), 290496), "main %d, duration %g", p->main,
              value(p, "gpu__time_duration.sum"));
        /* thousands separators, percentages, counts, units row skipped */
        CHECK(near(value(p, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"), 8388608), "ld sectors %g",
              value(p, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"));
        CHECK(near(value(p, "dram__bytes.sum.per_second"), 66048028200.04), "DRAM B/s %.2f",
              value(p, "dram__bytes.sum.per_second"));
        CHECK(near(value(p, "lts__t_sector_hit_rate.pct"), 81.45), "L2 hit %g", value(p, "lts__t_sector_hit_rate.pct"));
        CHECK(near(value(p, "launch__registers_per_thread"), 198), "regs %g", value(p, "launch__registers_per_thread"));
        CHECK(near(p->k[1].v[tk_lab_metric_find("gpu__time_duration.sum")], 290304), "second launch's duration");
        /* metrics the probe did not ask for are not reported */
        CHECK(isnan(value(p, "smsp__sass_data_bytes_mem_global_op_ld.sum")), "bytes asked: %g",
              value(p, "smsp__sass_data_bytes_mem_global_op_ld.sum"));
        tk_lab_prof_derived d;
        tk_lab_profile_derive(&p->k[p->main], &d);
        /* 16 sectors per request: 16 bytes per thread, 512 per warp */
        CHECK(near(d.ld_spr, 16.0) && isnan(d.ld_ideal), "ld %g ideal %g", d.ld_spr, d.ld_ideal);
        CHECK(near(d.st_spr, 8.0), "st %g", d.st_spr);
        CHECK(isnan(d.cp_spr), "no cp.async metrics, yet %g", d.cp_spr);
        /* registers allow 2 blocks per SM, shared memory 4, warps 16 */
        CHECK(d.limit_blocks == 2 && !strcmp(d.limiter, "registers"), "limit %d by '%s'", d.limit_blocks, d.limiter);
        CHECK(near(d.occ_achieved, 12.12) && near(d.occ_theoretical, 12.5), "occupancy %g / %g", d.occ_achieved,
              d.occ_theoretical);
        CHECK(near(d.sh_ld_conflict_pct, 100.0 * 303 / 4194607), "shared ld conflicts %g %%", d.sh_ld_conflict_pct);
        /* stalls, largest first, "selected" (1.00, third largest) left out */
        static const char *const want[] = { "long_scoreboard", "wait", "no_instruction", "barrier" };
        CHECK(d.nstalls == TK_LAB_TOP_STALLS, "%d stalls", d.nstalls);
        for (int s = 0; s < d.nstalls && s < 4; s++) {
            const char *key = tk_lab_metric_at(d.stall[s])->key;
            CHECK(!strcmp(key + strlen("stall_"), want[s]), "stall #%d is %s, expected %s", s + 1, key, want[s]);
        }
    }
    free(p);
    free(text);
}

/* k31 (wgmma, clusters) and cuBLAS: the limiter ties, the wgmma count. */
static void test_parse_hopper(void)
{
    static const char *const files[] = { "ncu_k31_wgmma_cluster.csv", "ncu_cublas.csv",
                                         "ncu_k11_4w_128x128_kunroll4.csv" };
    static const char *const function[] = { "void k31_kernel<0, 1>(k30_params)",
                                            "nvjet_sm90_tss_256x128_64x4_1x2_h_bz_coopA_TNT", "k11_kernel(tk_args)" };
    static const char *const limiter[] = { "registers, shared memory", "registers, shared memory",
                                            "registers, shared memory" };
    static const int blocks[] = { 1, 1, 2 };
    for (int f = 0; f < 3; f++) {
        char *text = read_fixture(files[f]);
        if (!text)
            continue;
        tk_lab_profile *p = calloc(1, sizeof *p);
        char why[512] = "";
        int rc = tk_lab_profile_parse(text, p, why, sizeof why);
        CHECK(rc == 0, "%s: %s", files[f], why);
        if (rc == 0) {
            CHECK(p->nkernels == 2 && !strcmp(p->k[p->main].function, function[f]), "%s: %d rows, '%s'", files[f],
                  p->nkernels, p->k[p->main].function);
            tk_lab_prof_derived d;
            tk_lab_profile_derive(&p->k[p->main], &d);
            CHECK(d.limit_blocks == blocks[f] && !strcmp(d.limiter, limiter[f]), "%s: %d blocks/SM by '%s'", files[f],
                  d.limit_blocks, d.limiter);
            double wgmma = value(p, "sm__inst_executed_pipe_tensor_op_gmma.sum");
            CHECK(f == 2 ? wgmma == 0 : wgmma > 0, "%s: %g wgmma instructions", files[f], wgmma);
            CHECK(f == 2 || isnan(d.ld_spr), "%s: global loads through LSU? %g", files[f], d.ld_spr);
        }
        free(p);
        free(text);
    }
}

/* What the fixtures lack: other units, n/a cells, quoted commas, the
 * bytes asked for (the ideal sectors), the launch line, a missing column. */
static void test_parse_made_up(void)
{
    const char *text =
        "==PROF== Connected to process 1 (/x/tilekit)\n"
        "tilekit launch: kernel auto regs 168 local_bytes 8 static_smem 0 dyn_smem 1024 threads 384 blocks_per_sm 1 "
        "occupancy 18.8 ran k31_wgmma_cluster (copies A, B)\n"
        "==PROF== Disconnected from process 1\n"
        "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\",\"dram__bytes_read.sum\",\"dram__bytes.sum.per_second\","
        "\"l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum\",\"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum\","
        "\"smsp__sass_data_bytes_mem_global_op_ld.sum\",\"l1tex__t_sector_hit_rate.pct\",\"unknown__metric\"\r\n"
        "\"\",\"\",\"usecond\",\"Kbyte\",\"Gbyte/second\",\"sector\",\"\",\"byte\",\"%\",\"\"\r\n"
        "\"0\",\"void k<0, 1>(p, \"\"q\"\")\",\"1.5\",\"2,000\",\"1.25\",\"64\",\"2\",\"1,024\",\"n/a\",\"7\"\r\n"
        "\"1\",\"copy(x)\",\"0.5\",\"1\",\"1\",\"0\",\"0\",\"0\",\"no data\",\"7\"\r\n"
        "==WARNING== Found outstanding GPU clock reset, trying to revert...Success.\n";
    tk_lab_profile *p = calloc(1, sizeof *p);
    char why[512] = "";
    int rc = tk_lab_profile_parse(text, p, why, sizeof why);
    CHECK(rc == 0, "parse: %s", why);
    if (rc == 0) {
        CHECK(p->nkernels == 2 && p->main == 0, "%d rows, main %d", p->nkernels, p->main);
        CHECK(!strcmp(p->k[0].function, "void k<0, 1>(p, \"q\")"), "quoted name: '%s'", p->k[0].function);
        CHECK(near(value(p, "gpu__time_duration.sum"), 1500), "1.5 usecond -> %g ns",
              value(p, "gpu__time_duration.sum"));
        CHECK(near(value(p, "dram__bytes_read.sum"), 2e6), "2,000 Kbyte -> %g", value(p, "dram__bytes_read.sum"));
        CHECK(near(value(p, "dram__bytes.sum.per_second"), 1.25e9), "1.25 Gbyte/s -> %g",
              value(p, "dram__bytes.sum.per_second"));
        CHECK(isnan(value(p, "l1tex__t_sector_hit_rate.pct")), "n/a -> %g", value(p, "l1tex__t_sector_hit_rate.pct"));
        CHECK(isnan(value(p, "lts__t_sector_hit_rate.pct")), "a metric without a column");
        tk_lab_prof_derived d;
        tk_lab_profile_derive(&p->k[0], &d);
        /* 1024 bytes asked in 2 requests: 16 sectors ideal; 64 touched: 32 */
        CHECK(near(d.ld_spr, 32.0) && near(d.ld_ideal, 16.0), "ld %g ideal %g", d.ld_spr, d.ld_ideal);
        CHECK(d.limit_blocks == -1 && !d.limiter[0], "no limits reported, yet %d '%s'", d.limit_blocks, d.limiter);
        CHECK(d.nstalls == 0, "%d stalls from no stall metrics", d.nstalls);
        /* the launch line of `tilekit launch` */
        CHECK(!strcmp(p->ran, "k31_wgmma_cluster (copies A, B)"), "ran '%s'", p->ran);
        CHECK(p->ki.regs == 168 && p->ki.local_bytes == 8 && p->ki.dyn_smem == 1024 && p->ki.threads == 384 &&
                  p->ki.blocks_per_sm == 1 && near(p->ki.occupancy, 18.8),
              "launch line: regs %d local %zu dyn %zu threads %d blocks %d occ %g", p->ki.regs, p->ki.local_bytes,
              p->ki.dyn_smem, p->ki.threads, p->ki.blocks_per_sm, p->ki.occupancy);
    }
    /* tk_lab_launch_line writes what the parser reads */
    tk_lab_kinfo ki = { 255, 64, 128, 65536, 256, 2, 25.0 };
    char line[512];
    tk_lab_launch_line(line, sizeof line, "k12_8w_256x128_gregs", "k12_8w_256x128_gregs", &ki);
    char *again = malloc(strlen(line) + 64);
    if (again) {
        sprintf(again, "%s\n\"ID\",\"Kernel Name\"\n\"0\",\"k12_kernel\"\n", line);
        rc = tk_lab_profile_parse(again, p, why, sizeof why);
        CHECK(rc == 0 && p->ki.regs == 255 && p->ki.local_bytes == 64 && p->ki.static_smem == 128 &&
                  p->ki.dyn_smem == 65536 && p->ki.threads == 256 && p->ki.blocks_per_sm == 2 &&
                  near(p->ki.occupancy, 25.0) && !strcmp(p->ran, "k12_8w_256x128_gregs"),
              "launch line round trip: %s -> rc %d regs %d local %zu ran '%s'", line, rc, p->ki.regs, p->ki.local_bytes,
              p->ran);
        free(again);
    }
    free(p);
}

static void test_parse_refusals(void)
{
    static const struct { const char *text, *says; } cases[] = {
        { "", "no CSV" },
        { "tilekit launch: k10_4w_128x128_k32: op_b N is not supported\n==PROF== Disconnected\n", "no CSV" },
        { "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"ns\"\n", "no kernel row" },
        { "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"0\",\"k\"\n", "line 2" },
        { "\"ID\",\"Name\"\n\"0\",\"k\"\n", "Kernel Name" },
    };
    tk_lab_profile *p = calloc(1, sizeof *p);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char why[512] = "";
        int rc = tk_lab_profile_parse(cases[i].text, p, why, sizeof why);
        CHECK(rc == -1 && strstr(why, cases[i].says), "case %zu: rc %d, '%s' (expected '%s')", i, rc, why,
              cases[i].says);
    }
    free(p);
}

static void test_blocked(void)
{
    static const struct { const char *text, *says; } cases[] = {
        { "==PROF== Connected to process 7\n==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access "
          "NVIDIA GPU Performance Counters on the target device 0.\n",
          "NVreg_RestrictProfilingToAdminUsers=0" },
        { "==ERROR== The user does not have permission to profile on the target device.\n", "sudo" },
        { "==ERROR== Failed to initialize the profiler: LibraryNotLoaded\n", "could not start profiling" },
        { "==ERROR== Failed to initialize the profiler\n", "driver" },
    };
    char why[2048];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        why[0] = '\0';
        int b = tk_lab_ncu_blocked(cases[i].text, why, sizeof why);
        CHECK(b == 1 && strstr(why, cases[i].says), "case %zu: %d '%s' (expected '%s')", i, b, why, cases[i].says);
        /* the line ncu printed is quoted */
        CHECK(strstr(why, "==ERROR==") != NULL, "case %zu: ncu's line is not quoted: %s", i, why);
    }
    char *k10 = read_fixture("ncu_k10_4w_128x128_k32.csv");
    if (k10) {
        CHECK(tk_lab_ncu_blocked(k10, why, sizeof why) == 0, "a good profile taken as blocked: %s", why);
        free(k10);
    }
}

static void test_screen_and_json(void)
{
    char *a = read_fixture("ncu_k10_4w_128x128_k32.csv"), *b = read_fixture("ncu_k11_4w_128x128_kunroll4.csv");
    tk_lab_profile *p = calloc(2, sizeof *p);
    char why[512];
    if (!a || !b || !p || tk_lab_profile_parse(a, &p[0], why, sizeof why) ||
        tk_lab_profile_parse(b, &p[1], why, sizeof why)) {
        CHECK(0, "fixtures did not load");
        free(a); free(b); free(p);
        return;
    }
    snprintf(p[0].kernel, sizeof p[0].kernel, "k10_4w_128x128_k32");
    snprintf(p[1].kernel, sizeof p[1].kernel, "k11_4w_128x128_kunroll4");
    tk_lab_case c = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, 2048, 2048, 2048, 1.0f, 0.0f, TK_F32, 1, 0, 0 };
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&out, &n);
    tk_lab_profile_print(f, &c, p, 2);
    fclose(f);
    static const char *const says[] = {
        "2048x2048x2048 row NT fp32", "NVIDIA H100 80GB HBM3", "k10_4w_128x128_k32", "k11_4w_128x128_kunroll4",
        "k10_kernel", "290.5 us", "11.4 %", "12.1 % / 12.5 %", "registers: 2/SM", "registers, shared memory: 2/SM",
        "16.00 (ideal n/a)", "20.00 (ideal n/a)", "303 / 4,194,607 (0.0 %)", "long_scoreboard 9.93", "81.5 %",
        "66.0 GB/s", "sectors/request", "waiting for a global/local memory result",
    };
    for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
        CHECK(strstr(out, says[i]) != NULL, "the screen lacks '%s':\n%s", says[i], out);
    CHECK(strstr(out, "selected 1.00") == NULL, "'selected' shown as a stall:\n%s", out);
    free(out);
    out = NULL;
    f = open_memstream(&out, &n);
    int rc = tk_lab_profile_write_json(f, &c, p, 2);
    fclose(f);
    static const char *const keys[] = {
        "\"tool\":\"tilekit profile\"", "\"kernel\":\"k11_4w_128x128_kunroll4\"", "\"global_ld_sectors\":8388608",
        "\"global_ld_sectors_per_request\":16,", "\"global_ld_sectors_per_request_ideal\":null",
        "\"occupancy_limiter\":\"registers\"", "\"blocks_per_sm\":2", "{\"reason\":\"long_scoreboard\",",
        "\"op_b\":\"t\"", "\"tilekit\":null", "\"ran\":null",
    };
    CHECK(rc == 0, "JSON write failed");
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK(strstr(out, keys[i]) != NULL, "the JSON lacks '%s':\n%.2000s", keys[i], out);
    /* JSON has no NaN or inf */
    CHECK(strstr(out, "nan") == NULL && strstr(out, "inf") == NULL, "NaN or inf in the JSON");
    free(out);
    free(a); free(b); free(p);
}

void tk_tests(void)
{
    TK_TEST(test_metric_table);
    TK_TEST(test_parse_k10);
    TK_TEST(test_parse_hopper);
    TK_TEST(test_parse_made_up);
    TK_TEST(test_parse_refusals);
    TK_TEST(test_blocked);
    TK_TEST(test_screen_and_json);
}
