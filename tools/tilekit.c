/* tilekit - the kernel lab's command line: bench | verify | info | tune |
 * fuzz | profile | launch.
 *
 * Every argument is checked before the GPU is touched, so a bad one exits 2
 * with a message on any machine. Exit 1: a verify or fuzz failure, or a
 * runtime error (no GPU). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tilekit.h"
#include "lib/kernel.h"
#include "lab/lab.h"
#include "lib/internal.h"

#define MAX_LIST 64
/* verify --exact: codes in [-4, 4] and scales 2^-e (e <= 4) sum exactly in fp32 up to this K (16 K 2^8 <= 2^24) */
#define F8_EXACT_K 4096
/* verify --dtype checks every element of C against the fp64 reference on the CPU: M*N*K at most this */
#define F8_VERIFY_VOLUME 8589934592.0
/* bench --suite with --dtype: shapes of fewer rows are left out (issue 40's FP8 targets: M at least 64) */
#define F8_SUITE_MIN_M 64
#define TUNE_FILE_DEFAULT "tilekit-tune.txt"

enum {
    F_KERNEL = 1, F_SHAPE = 2, F_PROBLEM = 4, F_BENCH = 8, F_FILES = 16, F_VERIFY = 32, F_TUNE = 64, F_FUZZ = 128,
    F_PROFILE = 256, F_LAUNCH = 512, F_GROUP = 1024, F_EPI = 2048, F_FP8 = 4096
};

typedef struct shape { int64_t m, n, k; } shape;

typedef struct opts {
    const char *cmd;
    const char *kernels[MAX_LIST + 1];  /* NULL-terminated */
    int nkernels;
    int kernels_all;            /* --kernel all (or no --kernel) */
    shape shapes[MAX_LIST];
    int nshapes, mnk_set;
    tk_lab_case c;              /* layout, ops, out, alpha, beta, seed, pad */
    tk_lab_bench_opts bench;
    int no_cublas;
    const char *json, *csv;
    const char *suite;          /* --suite: its shapes replace --m/--n/--k and --shapes */
    tk_lab_shape *suite_shapes;
    int nsuite;
    const char *tune_file;      /* tune: --file, or TUNE_FILE_DEFAULT */
    int out_given;              /* tune: --out given (else both types of C) */
    tk_lab_fuzz_opts fuzz;      /* fuzz: its options (seed, kernels and budget copied in after parsing) */
    int cases_given, case_given, budget_given;
    int kernel_given;
    const char *png;            /* verify: --png FILE */
    int64_t plant_row, plant_col;   /* verify: --plant ROW,COL; row -1: none */
    int64_t smem_limit;         /* verify: --smem-limit BYTES; 0: none */
    const char *vs;             /* profile: --vs NAME */
    int list_metrics;           /* profile: --metrics */
    int64_t calls;              /* launch: --calls N */
    int m_given, k_given;       /* --m, --k given (grouped cases check them against the groups) */
    /* verify and bench: many products in one call */
    int64_t batch;              /* --batch N; 0: none */
    int bcast_a, bcast_b;       /* --stride-a 0, --stride-b 0 */
    const char *groups;         /* --groups SPEC as given; NULL: none */
    tk_lab_group_spec *gspec;   /* parsed (malloc'ed) */
    int group_kind;             /* --group-kind (default rows) */
    int group_kind_given;
    int vs_dense;               /* bench --vs-dense */
    int64_t *sizes;             /* the groups' sizes (--seed decides skewed's order) */
    const char *forms;          /* fuzz --forms LIST as given */
    const char *fuzz_epi;       /* fuzz --epilogue KIND|all as given */
    /* verify and bench: a fused epilogue (tilekit.h's tk_gemm_desc version 3) */
    tk_lab_epi epi;             /* kind TK_EPI_NONE: none */
    const char *epi_flag;       /* the last epilogue option given (checked against --epilogue) */
    /* verify, bench and fuzz: FP8 operands (tilekit.h's tk_gemm_desc version 4) */
    int fp8;                    /* --dtype given: the cases are FP8 ones (verify, bench) */
    int dtype_a, dtype_b;       /* --dtype, --dtype-b: tk_lab_fp8; -1: not given */
    int scale_mode;             /* --scale: tk_scale_mode; 0: not given */
    int exact;                  /* verify --exact */
    tk_lab_f8 f8;               /* with fp8: the formats, mode, exact (f8_args) */
    int ops_given;              /* --layout, --op-a or --op-b given (bench --dtype's default ops) */
} opts;

static const char *usage =
    "usage: tilekit bench|verify|info|tune|fuzz|profile|launch [options]   (tilekit CMD --help for each)\n"
    "  bench   time kernels (with cuBLAS in the same run) and print a table\n"
    "  verify  check kernels against cuBLAS (every element) and an fp64 CPU reference\n"
    "  info    device properties and each kernel's registers, shared memory, occupancy\n"
    "  tune    time every auto-dispatch candidate on a suite's shapes; write a tune cache\n"
    "  fuzz    seeded random problems on auto-dispatch and every kernel, checked bit for bit\n"
    "          (integer inputs) or against fp64, with guard bands around C\n"
    "  profile one kernel (or two, --vs) under Nsight Compute: tensor pipe, occupancy and its\n"
    "          limiter, DRAM, caches, coalescing, bank conflicts, stalls, on one screen\n"
    "  launch  one call of one kernel between cudaProfilerStart and Stop (for a profiler)\n";

/* The problem options but --kernel and --shapes (profile and launch take one kernel, one shape). */
#define HELP_ONE_PROBLEM                                                                           \
    "  --m M --n N --k K            problem size (default 8192 each)\n"                           \
    "  --layout row|col             storage of A, B, C (default row)\n"                           \
    "  --op-a n|t --op-b n|t        transpose A / B (default n)\n"                                \
    "  --out fp32|bf16              type of C (default fp32)\n"                                   \
    "  --alpha X --beta X           C = alpha*op(A)op(B) + beta*C (default 1, 0)\n"               \
    "  --seed S                     inputs' random seed (default 1)\n"                            \
    "  --offset E                   start A, B and C E elements (0..7) into their buffers:\n"     \
    "                               views off the 16-byte alignment\n"

static const char *help_problem =
    "  --kernel NAME[,NAME..]|all   kernels (default all; auto = auto-dispatch)\n"
    "  --m M --n N --k K            problem size (default 8192 each)\n"
    "  --shapes MxNxK[,MxNxK..]     several sizes instead of --m/--n/--k\n"
    "  --layout row|col             storage of A, B, C (default row)\n"
    "  --op-a n|t --op-b n|t        transpose A / B (default n)\n"
    "  --out fp32|bf16              type of C (default fp32)\n"
    "  --alpha X --beta X           C = alpha*op(A)op(B) + beta*C (default 1, 0)\n"
    "  --seed S                     inputs' random seed (default 1)\n"
    "  --offset E                   start A, B and C E elements (0..7) into their buffers:\n"
    "                               views off the 16-byte alignment\n"
    "many products in one call (tilekit.h, tk_group_kind), the fp64 reference and cuBLAS per group:\n"
    "  --batch N                    N products of the --m/--n/--k shape, packed (TK_GROUP_BATCHED)\n"
    "  --stride-a 0 --stride-b 0    with --batch: one A (or B) for every product\n"
    "  --groups SPEC                groups of sizes SIZE[,SIZE..] (the offsets are their cumulative\n"
    "                               sums), or G:TOTAL:balanced|skewed|empty: G groups sharing TOTAL\n"
    "                               (skewed: a quarter empty, the others 1/r^1.5 shares in an order\n"
    "                               drawn from --seed; empty: every 4th group empty)\n"
    "  --group-kind rows|k|masked   what the groups split (default rows): the rows of A and C (M =\n"
    "                               the sizes' sum; a larger --m leaves rows no group owns), K\n"
    "                               (likewise), or masked row counts (each at most --m)\n"
    "a fused epilogue (tilekit.h, tk_epilogue_kind; row-major, one product; --kernel all: auto\n"
    "and the kernels that take it; a refusal is reported as the verdict):\n"
    "  --epilogue none|bias_act|gated|backward|gated_backward\n"
    "  --act none|relu|gelu|gelu_tanh|silu  --bias none|col|row  --bias-type fp32|bf16\n"
    "  --d (D apart from C)  --aux (store z)  --bias-grad  --up split|halves (gated's up half)\n"
    "FP8 operands (tilekit.h, tk_gemm_desc version 4; one product; --kernel all: auto and the kernels\n"
    "that take them):\n"
    "  --dtype e4m3|e5m2            A's format, and B's unless --dtype-b\n"
    "  --dtype-b e4m3|e5m2          B's format (e5m2 x e4m3 and the like)\n"
    "  --scale tensor|row|block     the scales (default tensor): one per operand; one per row of op(A)\n"
    "                               and column of op(B); or DeepSeek-V3's 1 x 128 of A and 128 x 128 of\n"
    "                               B (K a multiple of 128, row-major)\n";

static void print_help(const char *cmd)
{
    if (!strcmp(cmd, "fuzz")) {
        printf("usage: tilekit fuzz [options]\n"
               "  --seed S                     the stream of cases (default 1): case I of seed S is always\n"
               "                               the same problem\n"
               "  --cases N                    run cases 0..N-1 (default %d)\n"
               "  --budget SECONDS             instead: run cases 0, 1, ... until SECONDS have passed\n"
               "  --case I                     run case I alone (the replay of a failure)\n"
               "  --kernel NAME[,NAME..]|all   subjects (default all: auto-dispatch and every kernel but\n"
               "                               cublas, the yardstick of verify)\n"
               "  --max-size N                 M, N and K at most (1..%d, default %d)\n"
               "  --max-volume V               M*N*K at most (default %lld)\n"
               "  --forms LIST                 which cases run: dense,batched,grouped,epilogue,fp8 (default the\n"
               "                               first three)\n"
               "  --epilogue KIND|all          add epilogue cases (bias_act, gated, backward, gated_backward,\n"
               "                               or all of them)\n"
               "  --dtype e4m3|e5m2            add FP8 cases of this format (--dtype-b e4m3|e5m2: B's other\n"
               "                               one; fp8 in --forms: any formats); --scale tensor|row|block:\n"
               "                               that mode alone\n"
               "  --json FILE                  also write the counts and the first failures there\n"
               "Each case draws M, N, K (tile multiples and one off them, primes, small values; most\n"
               "small or medium), ops, layout, type of C, alpha and beta (0 included: C then starts as\n"
               "NaN), leading dimensions (tight to padded) and pointer offsets 0..7. Half the cases\n"
               "have small-integer inputs, whose result every kernel must get bit for bit; the others\n"
               "random ones, judged against the fp64 reference with verify's tolerance. C lies between\n"
               "guard bands: a write there, before C's offset or into its padding fails. The k0* and\n"
               "k1* kernels are left out of cases above M*N*K = 2^28 (too slow). Each failure prints\n"
               "one line that ends with the command replaying it, e.g.\n"
               "  tilekit fuzz --seed 1 --case 17 --kernel k30_wgmma_tma\n"
               "Batched and grouped cases come from a stream of their own, so the dense cases are the\n"
               "ones they always were: after dense case 3, 7, 11, ... runs batched/grouped case gI (I =\n"
               "the dense index / 4; without dense in --forms, case gI in dense case I's place): up to 16\n"
               "groups, empty ones and odd sizes often, rows or K past the groups at times, or up to 8\n"
               "batched products; random inputs against the fp64 reference per group, and C where no\n"
               "group owns it must keep its poison. Its replay is --case gI, e.g.\n"
               "  tilekit fuzz --seed 1 --case g4 --kernel auto\n"
               "Epilogue cases (--epilogue, or epilogue in --forms) come from a third stream, after dense\n"
               "case 1, 5, 9, ...: a kind, its activation, bias (none, per column or row, fp32 or bf16),\n"
               "aux, D apart, bias_grad, the gated up half, ops, padding, alpha and beta, as `verify\n"
               "--epilogue` checks them (fp64 reference of D, aux and bias_grad, NaN-poisoned outputs,\n"
               "guard bands); a kernel without the case's epilogue skips it. Replay: --case eI.\n"
               "FP8 cases (--dtype, or fp8 in --forms) come from a fourth stream, after dense case 2, 6, ...:\n"
               "formats, scale mode, exact (integer codes, power-of-two scales: fp32 C bit for bit) or not,\n"
               "ops, layout, type of C, padding, alpha, beta, K a multiple of 128 for block scales, as `verify\n"
               "--dtype` checks them; a kernel without FP8 operands skips them. Replay: --case fI.\n"
               "exit status: 0 no failures, 1 a failure or no GPU, 2 bad arguments\n",
               TK_LAB_FUZZ_CASES, TK_LAB_FUZZ_MAX_SIZE, TK_LAB_FUZZ_MAX_SIZE, (long long)TK_LAB_FUZZ_MAX_VOLUME);
        return;
    }
    if (!strcmp(cmd, "tune")) {
        printf("usage: tilekit tune --suite NAME|FILE [options]\n"
               "  --suite NAME|FILE            the shapes (bench/shapes/NAME.txt or a file), row-major\n"
               "  --out fp32|bf16              only this type of C (default: both)\n"
               "  --budget SECONDS             sampling time per kernel and shape (default 0.25)\n"
               "  --file PATH                  the tune cache to write (default " TUNE_FILE_DEFAULT ")\n"
               "Times auto-dispatch and every kernel it may run (cuBLAS excluded) on each shape, L2\n"
               "flushed, and writes the fastest per shape and type of C. Auto-dispatch reads the\n"
               "file when the environment variable " TK_TUNE_ENV " names it (checked at tk_create: a\n"
               "file from another GPU, or a malformed one, is ignored with a warning).\n");
        return;
    }
    if (!strcmp(cmd, "profile")) {
        printf("usage: tilekit profile --kernel NAME [--vs NAME] [problem options] [--json FILE]\n"
               "  --kernel NAME                the kernel to profile (a registry name, cublas or auto)\n"
               "  --vs NAME                    a second kernel, side by side (e.g. --vs cublas)\n"
               HELP_ONE_PROBLEM
               "  --pad                        padded leading dimensions (as bench --pad)\n"
               "  --json FILE                  also write the figures there\n"
               "  --metrics                    list the Nsight Compute metrics used, with their meaning, and exit\n"
               "Runs `tilekit launch` under Nsight Compute (ncu from $NCU, else PATH) with one table of\n"
               "metrics (src/lab/lab_profile.c) and prints one screen: duration, tensor pipe busy,\n"
               "SM throughput, achieved vs theoretical occupancy and the resource limiting it, registers\n"
               "and spills, DRAM bytes and bandwidth, L2 and L1 hit rates, sectors per request of\n"
               "global loads and stores (actual and ideal), shared-memory bank conflicts, the top\n"
               "stall reasons. One call of each kernel is profiled, after two unprofiled warm-up calls.\n"
               "exit status: 0 printed, 1 nothing profiled (the kernel refused the problem, no GPU),\n"
               "2 bad arguments, or ncu missing or without permission to read the GPU's counters\n");
        return;
    }
    if (!strcmp(cmd, "launch")) {
        printf("usage: tilekit launch --kernel NAME [problem options] [--calls N]\n"
               "  --kernel NAME                the kernel (a registry name, cublas or auto)\n"
               HELP_ONE_PROBLEM
               "  --pad                        padded leading dimensions\n"
               "  --calls N                    calls in the profiled range (default 1)\n"
               "Makes the inputs, runs two warm-up calls, then N calls between cudaProfilerStart and\n"
               "cudaProfilerStop, for a profiler started with --profile-from-start off, e.g.\n"
               "  ncu --profile-from-start off --set full build/tilekit launch --kernel k31_wgmma_cluster\n"
               "Prints one line: the kernel's registers, local memory, shared memory and occupancy.\n");
        return;
    }
    if (!strcmp(cmd, "bench"))
        printf("usage: tilekit bench [options]\n%s"
               "  --hot                        do not flush L2 before each sample\n"
               "  --no-cublas                  do not time cuBLAS (no ratio column)\n"
               "  --budget SECONDS             sampling time per case (default 2; 0.25 with --suite)\n"
               "  --suite NAME|FILE            every shape of a suite (bench/shapes/NAME.txt: square, llm,\n"
               "                               odd, all, moe; or a file), with its ops: cuBLAS and auto-dispatch\n"
               "                               (plus the --kernel ones) timed on each, at most 100 samples,\n"
               "                               then x cuBLAS per suite: geomean, min, count below 0.9x\n"
               "  --pad                        padded leading dimensions (each tight ld rounded up to\n"
               "                               a multiple of 8, plus 8), e.g. for TMA kernels at odd K\n"
               "  --vs-dense                   with --batch or --groups: also time the loop of dense\n"
               "                               tk_gemm_ex calls over the groups\n"
               "  --json FILE --csv FILE       also write the results there\n"
               "With --dtype each case is one tk_gemm_run on random FP8 codes and scales (verify's), timed\n"
               "against cuBLASLt's FP8 matmul of the same buffers in the same run (xcuBLASLt; its modes:\n"
               "per-tensor, row-wise (outer vector) and 1 x 128 / 128 x 128 blocks, A and B K-major alone);\n"
               "the ops default to n t there (A M x K, B N x K: cuBLASLt's and torch._scaled_mm's layout)\n"
               "and C to bf16.\n"
               "--suite with --dtype: the shapes of M >= 64, as n t, auto against cuBLASLt.\n"
               "With --batch or --groups each case is one tilekit call, timed against a host loop of\n"
               "cublasGemmEx over the groups and one cublasGemmGroupedBatchedEx (cuBLAS >= 12.5) in the\n"
               "same run: TFLOP/s from the groups' flops, x loop, x grouped (and x dense), and the rate\n"
               "at which the A and B the groups multiply were read (GB/s; the figure for tiny groups).\n"
               "--suite moe: the expert layers of three MoE models, auto against the cuBLAS loop\n", help_problem);
    else if (!strcmp(cmd, "verify"))
        printf("usage: tilekit verify [options]\n%s"
               "  --pad                        padded leading dimensions: each ld is the tight one\n"
               "                               rounded up to a multiple of 8, plus 8; the padding of\n"
               "                               A and B holds random values, C's a sentinel that must\n"
               "                               survive the run (a change is a \"write outside C\")\n"
               "  --no-cublas                  do not run cuBLAS: the fp64 CPU reference alone judges\n"
               "                               (as under compute-sanitizer, bench/sanitize.sh)\n"
               "  --json FILE                  also write the results there\n"
               "  --png FILE                   also draw the error map (one cell per BM x BN tile, colour =\n"
               "                               worst relative error, failing tiles outlined) as a PNG;\n"
               "                               one kernel and one shape\n"
               "  --plant ROW,COL              lab demonstration: change C(ROW, COL) after the kernel ran,\n"
               "                               so the maps show one failing tile\n"
               "  --smem-limit BYTES           model a GPU offering at most BYTES of shared memory per\n"
               "                               block: kernels needing more are refused before launch\n"
               "  --exact                      with --dtype: integer codes in [-4, 4] and power-of-two scales,\n"
               "                               fp32 C checked bit for bit (alpha a power of two, beta 0, K <= %d)\n"
               "With --dtype: codes uniform over the format's range, scales in [2^-8, 2^-6), C NaN-poisoned\n"
               "between guard bands, against the fp64 reference of the dequantized terms within the FP8\n"
               "tolerance (tk_lab_tolerance_fp8); a refusal must leave C untouched (cuBLAS is not run);\n"
               "M*N*K at most 2^33 (the reference covers every element of C).\n"
               "With --batch or --groups: one call of each kernel on the whole case, C poisoned, then per\n"
               "group the fp64 reference and the cuBLAS loop (and cublasGemmGroupedBatchedEx), and what\n"
               "no group owns (rows past the groups, padding) must keep its poison; --kernel all (the\n"
               "default) means auto and the kernels whose family takes the form.\n"
               "exit status: 0 all passed (or skipped), 1 a case failed, 2 bad arguments\n", help_problem,
               F8_EXACT_K);
    else
        printf("usage: tilekit info [--kernel NAME[,NAME..]|all] [--json FILE]\n"
               "  --kernel NAME[,NAME..]|all   the kernels listed (default all)\n"
               "  --json FILE                  also write it all there as one JSON document: the device\n"
               "                               (null without one), the families, the configurations (name,\n"
               "                               family, min_sm, bm, bn, bk, swap, auto_rank, description) and\n"
               "                               each kernel's resources on the device ([] without one)\n"
               "Prints the device, the table of kernel families and configurations (every registered\n"
               "kernel; no GPU needed), then each kernel's registers, local memory, shared memory,\n"
               "threads and occupancy on the device.\n"
               "exit status: 0 printed (without a GPU: the table alone), 1 a kernel's resources could not\n"
               "be read on the GPU or FILE could not be written, 2 bad arguments\n");
}

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tilekit: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return 2;
}

static int parse_range(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end)
        return bad("%s: '%s' is not an integer", flag, s);
    if (errno == ERANGE || v < lo || v > hi)
        return bad("%s: %s is out of range (expected %lld..%lld)", flag, s, (long long)lo, (long long)hi);
    *out = v;
    return 0;
}

/* A size: 1..2^24. */
static int parse_i64(const char *flag, const char *s, int64_t *out) { return parse_range(flag, s, 1, 1ll << 24, out); }

static int parse_f(const char *flag, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return bad("%s: '%s' is not a finite number", flag, s);
    *out = v;
    return 0;
}

/* alpha and beta are floats: a finite double past FLT_MAX would become inf. */
static int parse_float(const char *flag, const char *s, float *out)
{
    double v;
    if (parse_f(flag, s, &v))
        return 2;
    if (fabs(v) > FLT_MAX)
        return bad("%s: %s is out of the float range (expected |x| <= %g)", flag, s, (double)FLT_MAX);
    *out = (float)v;
    return 0;
}

/* strtoull would take " -1" (leading space, then a sign) as 2^64 - 1. */
static int parse_seed(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (!isdigit((unsigned char)s[0]) || errno || *end)
        return bad("--seed: '%s' is not a non-negative integer below 2^64", s);
    *out = v;
    return 0;
}

/* Splits a comma-separated list (of `form`, for the message) in place into
 * at most MAX_LIST fields. An empty field ("", ",", "a,,b", "a,") is
 * refused, not skipped: it is a typo that would otherwise drop a name. */
static int split_list(const char *flag, const char *form, char *list, char **fields, int *n)
{
    size_t len = strlen(list);
    if (!len || list[0] == ',' || list[len - 1] == ',' || strstr(list, ",,"))
        return bad("%s: '%s' has an empty item (expected %s)", flag, list, form);
    *n = 0;
    for (char *t = list; t; (*n)++) {
        if (*n == MAX_LIST)
            return bad("%s: more than %d items", flag, MAX_LIST);
        fields[*n] = t;
        t = strchr(t, ',');
        if (t)
            *t++ = '\0';
    }
    return 0;
}

static int parse_kernels(opts *o, char *list)
{
    o->nkernels = 0;
    o->kernels_all = !strcmp(list, "all");
    if (o->kernels_all) {
        for (int i = 0; i < tk_registry_count() && i < MAX_LIST; i++)
            o->kernels[o->nkernels++] = tk_registry_at(i)->name;
    } else {
        char *names[MAX_LIST];
        if (split_list("--kernel", "NAME[,NAME..]", list, names, &o->nkernels))
            return 2;
        for (int i = 0; i < o->nkernels; i++) {
            if (strcmp(names[i], "auto") && !tk_registry_find(names[i])) {
                fprintf(stderr, "tilekit: --kernel: unknown kernel '%s'; known: all, auto", names[i]);
                for (int j = 0; j < tk_registry_count(); j++)
                    fprintf(stderr, ", %s", tk_registry_at(j)->name);
                fprintf(stderr, "\n");
                return 2;
            }
            o->kernels[i] = names[i];
        }
    }
    o->kernels[o->nkernels] = NULL;
    return 0;
}

static int parse_shapes(opts *o, char *list)
{
    char *items[MAX_LIST];
    if (split_list("--shapes", "MxNxK[,MxNxK..]", list, items, &o->nshapes))
        return 2;
    for (int i = 0; i < o->nshapes; i++) {
        char *t = items[i], *x1 = strchr(t, 'x'), *x2 = x1 ? strchr(x1 + 1, 'x') : NULL;
        if (!x2)
            return bad("--shapes: '%s' is not MxNxK", t);
        *x1 = *x2 = '\0';
        shape *s = &o->shapes[i];
        if (parse_i64("--shapes (M)", t, &s->m) || parse_i64("--shapes (N)", x1 + 1, &s->n) ||
            parse_i64("--shapes (K)", x2 + 1, &s->k))
            return 2;
    }
    return 0;
}

/* An output file must be writable before the run, not after minutes of it:
 * an existing file is checked without being truncated (its old results
 * stay until the new ones are written); a new one is created and removed. */
static int check_writable(const char *flag, const char *path)
{
    struct stat sb;
    if (!stat(path, &sb)) {
        if (S_ISDIR(sb.st_mode))
            return bad("%s: '%s' is a directory (expected a file to write)", flag, path);
        if (access(path, W_OK))
            return bad("%s: cannot write '%s': %s", flag, path, strerror(errno));
        return 0;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return bad("%s: cannot create '%s': %s", flag, path, strerror(errno));
    close(fd);
    unlink(path);
    return 0;
}

/* One of two spellings: returns 0 or 1 in *out, or 2 on error. */
static int parse_pick(const char *flag, const char *v, const char *w0, const char *w1, int *out)
{
    if (!strcmp(v, w0)) *out = 0;
    else if (!strcmp(v, w1)) *out = 1;
    else {
        fprintf(stderr, "tilekit: %s: '%s' is not %s or %s\n", flag, v, w0, w1);
        return 2;
    }
    return 0;
}

/* The options a suite decides itself: its shapes, its ops, the ratio. */
static int suite_clash(const char *name)
{
    static const char *const taken[] = { "--m", "--n", "--k", "--shapes", "--op-a", "--op-b", "--no-cublas",
                                         "--batch", "--groups", "--group-kind", "--stride-a", "--stride-b" };
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
        if (!strcmp(name, taken[i]))
            return 1;
    return 0;
}

/* The case of a suite's grouped line sh: o's type of C, scalars and seed
 * (skewed's order) with the line's form; sizes holds the groups' sizes. */
static void suite_gcase(const opts *o, const tk_lab_shape *sh, tk_lab_gcase *g, int64_t *sizes)
{
    memset(g, 0, sizeof *g);
    g->c = o->c;
    g->c.layout = TK_ROW_MAJOR;
    g->c.m = sh->m;
    g->c.n = sh->n;
    g->c.k = sh->k;
    g->c.op_a = sh->op_a;
    g->c.op_b = sh->op_b;
    g->kind = sh->kind;
    g->count = sh->count;
    if (sh->kind == TK_GROUP_BATCHED)
        return;
    tk_lab_group_spec spec;
    char why[TK_LAB_MSG_LEN];
    if (tk_lab_group_spec_parse(sh->groups, &spec, why, sizeof why) == 0) {   /* the loader parsed it already */
        tk_lab_group_sizes(&spec, o->c.seed, sizes);
        tk_lab_group_spec_str(&spec, g->label, sizeof g->label);
    }
    g->sizes = sizes;
}

/* A suite's masked lines: no group may have more rows than M (with
 * --seed's order of skewed sizes, known only now). 0, or 2 after a message. */
static int check_suite_groups(const opts *o)
{
    for (int s = 0; s < o->nsuite; s++) {
        const tk_lab_shape *sh = &o->suite_shapes[s];
        if (sh->kind != TK_GROUP_MASKED)
            continue;
        tk_lab_gcase g;
        int64_t sizes[TK_LAB_GROUPS_MAX];
        suite_gcase(o, sh, &g, sizes);
        for (int i = 0; i < g.count; i++)
            if (sizes[i] > sh->m)
                return bad("--suite: %s.txt:%d: masked: group %d has %lld rows, more than M %lld", sh->suite, sh->line,
                           i, (long long)sizes[i], (long long)sh->m);
    }
    return 0;
}

/* --suite: reads the suite (a bad line exits 2 here, before any GPU work);
 * kernels become auto-dispatch plus those --kernel names (cuBLAS is always
 * timed first, by cmd_bench); a shorter default budget and a sample cap keep
 * a few hundred shapes within minutes. */
static int suite_args(opts *o, const char *clash, int kernel_given)
{
    if (clash)
        return bad("%s: --suite gives the shapes, ops and cuBLAS ratio itself; use one or the other", clash);
    const char *extra[MAX_LIST];
    int nextra = 0;
    for (int i = 0; kernel_given && i < o->nkernels; i++)
        if (strcmp(o->kernels[i], "auto"))
            extra[nextra++] = o->kernels[i];
    if (nextra == MAX_LIST)
        return bad("--kernel: at most %d names with --suite (it adds auto)", MAX_LIST - 1);
    o->kernels[0] = "auto";
    for (int i = 0; i < nextra; i++)
        o->kernels[i + 1] = extra[i];
    o->nkernels = nextra + 1;
    o->kernels[o->nkernels] = NULL;
    if (o->bench.budget_s <= 0)
        o->bench.budget_s = 0.25;
    o->bench.min_samples = 5;
    o->bench.max_samples = 100;
    char why[1024];
    if (tk_lab_suite_load(o->suite, &o->suite_shapes, &o->nsuite, why, sizeof why))
        return bad("--suite: %s", why);
    for (int s = 0; o->fp8 && s < o->nsuite; s++)
        if (o->suite_shapes[s].kind)
            return bad("--suite: %s.txt:%d: a %s line: --dtype takes single products (M N K opA opB lines)",
                       o->suite_shapes[s].suite, o->suite_shapes[s].line,
                       tk_lab_group_kind_name(o->suite_shapes[s].kind));
    return check_suite_groups(o);
}

static const struct flag { const char *name; int group, has_val; } flags[] = {
    { "--help", F_KERNEL | F_TUNE, 0 }, { "--kernel", F_KERNEL, 1 }, { "--m", F_SHAPE, 1 }, { "--n", F_SHAPE, 1 },
    { "--k", F_SHAPE, 1 }, { "--shapes", F_SHAPE, 1 }, { "--layout", F_PROBLEM, 1 },
    { "--op-a", F_PROBLEM, 1 }, { "--op-b", F_PROBLEM, 1 }, { "--out", F_PROBLEM | F_TUNE, 1 },
    { "--alpha", F_PROBLEM, 1 }, { "--beta", F_PROBLEM, 1 }, { "--seed", F_PROBLEM | F_FUZZ, 1 },
    { "--hot", F_BENCH, 0 }, { "--no-cublas", F_BENCH | F_VERIFY, 0 }, { "--budget", F_BENCH | F_TUNE | F_FUZZ, 1 },
    { "--suite", F_BENCH | F_TUNE, 1 }, { "--file", F_TUNE, 1 },
    { "--json", F_FILES | F_FUZZ, 1 }, { "--csv", F_BENCH, 1 },
    { "--pad", F_VERIFY | F_BENCH | F_PROFILE | F_LAUNCH, 0 },
    { "--offset", F_PROBLEM, 1 }, { "--cases", F_FUZZ, 1 }, { "--case", F_FUZZ, 1 },
    { "--max-size", F_FUZZ, 1 }, { "--max-volume", F_FUZZ, 1 },
    { "--png", F_VERIFY, 1 }, { "--plant", F_VERIFY, 1 }, { "--smem-limit", F_VERIFY, 1 },
    { "--vs", F_PROFILE, 1 }, { "--metrics", F_PROFILE, 0 }, { "--calls", F_LAUNCH, 1 },
    { "--batch", F_GROUP, 1 }, { "--groups", F_GROUP, 1 }, { "--group-kind", F_GROUP, 1 },
    { "--stride-a", F_GROUP, 1 }, { "--stride-b", F_GROUP, 1 }, { "--vs-dense", F_BENCH, 0 },
    { "--forms", F_FUZZ, 1 }, { "--epilogue", F_EPI | F_FUZZ, 1 }, { "--act", F_EPI, 1 }, { "--bias", F_EPI, 1 },
    { "--bias-type", F_EPI, 1 }, { "--d", F_EPI, 0 }, { "--aux", F_EPI, 0 }, { "--bias-grad", F_EPI, 0 },
    { "--up", F_EPI, 1 }, { "--dtype", F_FP8 | F_FUZZ, 1 }, { "--dtype-b", F_FP8 | F_FUZZ, 1 },
    { "--scale", F_FP8 | F_FUZZ, 1 }, { "--exact", F_VERIFY, 0 },
};
#define NFLAGS ((int)(sizeof flags / sizeof flags[0]))

/* Reads the option at argv[*i] into *f (its index in flags) and its value
 * (after '=' or the next argument, which then must not be an option itself)
 * into *val; refuses an unknown option for cmd and a repeated one (seen:
 * times each was given). Returns 0, or 2 after a message. */
static int next_flag(int argc, char **argv, int *i, int allowed, const char *cmd, int *seen, int *f, char **val)
{
    char *flag = argv[*i], *eq = strchr(flag, '=');
    *val = NULL;
    if (eq && !strncmp(flag, "--", 2)) {
        *eq = '\0';
        *val = eq + 1;
    }
    *f = -1;
    for (int j = 0; j < NFLAGS; j++)
        if (!strcmp(flag, flags[j].name) && (flags[j].group & allowed))
            *f = j;
    if (*f < 0)
        return bad("%s: unknown option for '%s' (see tilekit %s --help)", flag, cmd, cmd);
    if (seen[*f]++)
        return bad("%s: given twice (expected at most once)", flag);
    if (flags[*f].has_val && !*val) {
        if (*i + 1 >= argc)
            return bad("%s: missing value", flag);
        *val = argv[++*i];
        if (!strncmp(*val, "--", 2))
            return bad("%s: missing value (got the option '%s'; write %s=VALUE for a value starting with --)",
                       flag, *val, flag);
    } else if (!flags[*f].has_val && *val)
        return bad("%s takes no value (got '%s')", flag, *val);
    return 0;
}

/* The options of many products in one call (and fuzz's --forms, checked
 * by fuzz_args). Returns 0, or 2 after a message. */
static int apply_group_flag(opts *o, const char *name, const char *val)
{
    char why[TK_LAB_MSG_LEN];
    if (!strcmp(name, "--batch"))
        return parse_range(name, val, 1, TK_LAB_BATCH_MAX, &o->batch);
    if (!strcmp(name, "--groups")) {
        o->groups = val;
        if (!(o->gspec = malloc(sizeof *o->gspec)))
            return bad("--groups: out of host memory");
        if (tk_lab_group_spec_parse(val, o->gspec, why, sizeof why))
            return bad("--groups: %s", why);
        return 0;
    }
    if (!strcmp(name, "--group-kind")) {
        o->group_kind_given = 1;
        if (!(o->group_kind = tk_lab_group_kind_parse(val)))
            return bad("--group-kind: '%s' is not rows, k or masked", val);
        return 0;
    }
    if (!strcmp(name, "--stride-a") || !strcmp(name, "--stride-b")) {
        if (strcmp(val, "0"))
            return bad("%s: '%s' is not 0 (0: one %c for every batched product; leave the option out for packed "
                       "matrices)", name, val, name[9] == 'a' ? 'A' : 'B');
        *(name[9] == 'a' ? &o->bcast_a : &o->bcast_b) = 1;
        return 0;
    }
    if (!strcmp(name, "--vs-dense"))
        o->vs_dense = 1;
    else if (!strcmp(name, "--forms"))
        o->forms = val;
    return 0;
}

/* The epilogue's options. Returns 0, or 2 after a message. */
static int apply_epi_flag(opts *o, const char *name, const char *val)
{
    tk_lab_epi *e = &o->epi;
    int pick = 0;
    if (strcmp(name, "--epilogue"))
        o->epi_flag = name;
    if (!strcmp(name, "--epilogue")) {
        if ((e->kind = tk_lab_epi_kind_parse(val)) < 0)
            return bad("--epilogue: '%s' is not none, bias_act, gated, backward or gated_backward", val);
    } else if (!strcmp(name, "--act")) {
        if ((e->act = tk_lab_act_parse(val)) < 0)
            return bad("--act: '%s' is not none, relu, gelu, gelu_tanh or silu", val);
    } else if (!strcmp(name, "--bias")) {
        if (!strcmp(val, "none")) e->bias = 0;
        else if (!strcmp(val, "col")) e->bias = 1;
        else if (!strcmp(val, "row")) e->bias = 2;
        else return bad("--bias: '%s' is not none, col or row", val);
    } else if (!strcmp(name, "--bias-type")) {
        if (parse_pick(name, val, "fp32", "bf16", &pick))
            return 2;
        e->bias_bf16 = pick;
    } else if (!strcmp(name, "--d")) e->d_apart = 1;
    else if (!strcmp(name, "--aux")) e->aux = 1;
    else if (!strcmp(name, "--bias-grad")) e->bias_grad = 1;
    else if (!strcmp(name, "--up")) {
        if (parse_pick(name, val, "halves", "split", &pick))
            return 2;
        e->up_split = pick;
    }
    return 0;
}

/* Applies option `name` with its value val (NULL for a switch) to o; --m,
 * --n and --k go to *mnk. Returns 0, or 2 after a message. */
static int apply_flag(opts *o, const char *name, char *val, shape *mnk)
{
    int pick = 0, rc = 0;
    double d = 0;
    if (!strcmp(name, "--help")) { print_help(o->cmd); exit(0); }
    else if (!strcmp(name, "--kernel")) rc = parse_kernels(o, val);
    else if (!strcmp(name, "--m")) { rc = parse_i64(name, val, &mnk->m); o->mnk_set = o->m_given = 1; }
    else if (!strcmp(name, "--n")) { rc = parse_i64(name, val, &mnk->n); o->mnk_set = 1; }
    else if (!strcmp(name, "--k")) { rc = parse_i64(name, val, &mnk->k); o->mnk_set = o->k_given = 1; }
    else if (!strcmp(name, "--shapes")) rc = parse_shapes(o, val);
    else if (!strcmp(name, "--layout")) {
        rc = parse_pick(name, val, "row", "col", &pick);
        o->c.layout = (tk_layout)pick;
        o->ops_given = 1;
    } else if (!strcmp(name, "--op-a")) {
        rc = parse_pick(name, val, "n", "t", &pick);
        o->c.op_a = (tk_op)pick;
        o->ops_given = 1;
    } else if (!strcmp(name, "--op-b")) {
        rc = parse_pick(name, val, "n", "t", &pick);
        o->c.op_b = (tk_op)pick;
        o->ops_given = 1;
    }
    else if (!strcmp(name, "--out")) {
        rc = parse_pick(name, val, "fp32", "bf16", &pick);
        o->c.out = (tk_dtype)pick;
        o->out_given = 1;
    }
    else if (!strcmp(name, "--alpha")) rc = parse_float(name, val, &o->c.alpha);
    else if (!strcmp(name, "--beta")) rc = parse_float(name, val, &o->c.beta);
    else if (!strcmp(name, "--budget")) {
        rc = parse_f(name, val, &d);
        if (!rc && d <= 0) rc = bad("--budget: %s must be > 0 seconds", val);
        o->bench.budget_s = d;
        o->budget_given = 1;
    } else if (!strcmp(name, "--seed")) {
        unsigned long long seed = 0;
        rc = parse_seed(val, &seed);
        o->c.seed = seed;
    } else if (!strcmp(name, "--hot")) o->bench.hot = 1;
    else if (!strcmp(name, "--no-cublas")) o->no_cublas = 1;
    else if (!strcmp(name, "--pad")) o->c.pad = 1;
    else if (!strcmp(name, "--offset")) {
        char *end;
        errno = 0;
        long v = strtol(val, &end, 10);
        if (errno || end == val || *end || v < 0 || v > TK_LAB_OFFSET_MAX)
            rc = bad("--offset: '%s' is not an integer in 0..%d", val, TK_LAB_OFFSET_MAX);
        o->c.offset = (int)v;
    }
    else if (!strcmp(name, "--json")) rc = check_writable(name, o->json = val);
    else if (!strcmp(name, "--csv")) rc = check_writable(name, o->csv = val);
    else if (!strcmp(name, "--suite")) o->suite = val;
    else if (!strcmp(name, "--file")) rc = check_writable(name, o->tune_file = val);
    else if (!strcmp(name, "--cases")) {
        rc = parse_range(name, val, 1, INT64_C(1) << 40, &o->fuzz.cases);
        o->cases_given = 1;
    } else if (!strcmp(name, "--case")) {
        /* gI: batched or grouped case I, eI: epilogue case I, fI: FP8 case I (their own streams) */
        o->fuzz.only_many = val[0] == 'g';
        o->fuzz.only_epi = val[0] == 'e';
        o->fuzz.only_f8 = val[0] == 'f';
        const int skip = o->fuzz.only_many || o->fuzz.only_epi || o->fuzz.only_f8;
        rc = parse_range(o->fuzz.only_many ? "--case (after g)" : o->fuzz.only_epi ? "--case (after e)"
                         : o->fuzz.only_f8 ? "--case (after f)" : name,
                         val + skip, 0, INT64_C(1) << 62, &o->fuzz.only_case);
        o->case_given = 1;
    } else if (!strcmp(name, "--max-size"))
        rc = parse_range(name, val, 1, TK_LAB_FUZZ_MAX_SIZE, &o->fuzz.gen.max_size);
    else if (!strcmp(name, "--max-volume"))
        rc = parse_range(name, val, 1, INT64_C(1) << 40, &o->fuzz.gen.max_volume);
    else if (!strcmp(name, "--png")) rc = check_writable(name, o->png = val);
    else if (!strcmp(name, "--plant")) {
        char *comma = strchr(val, ',');
        if (!comma)
            rc = bad("--plant: '%s' is not ROW,COL", val);
        else {
            *comma = '\0';
            rc = parse_range("--plant (ROW)", val, 0, (INT64_C(1) << 24) - 1, &o->plant_row) ||
                 parse_range("--plant (COL)", comma + 1, 0, (INT64_C(1) << 24) - 1, &o->plant_col);
        }
    } else if (!strcmp(name, "--smem-limit"))
        rc = parse_range(name, val, 1, INT64_C(1) << 31, &o->smem_limit);
    else if (!strcmp(name, "--vs")) {
        if (strcmp(val, "auto") && !tk_registry_find(val))
            rc = bad("--vs: unknown kernel '%s' (see tilekit info)", val);
        o->vs = val;
    } else if (!strcmp(name, "--metrics")) o->list_metrics = 1;
    else if (!strcmp(name, "--calls"))
        rc = parse_range(name, val, 1, 1000, &o->calls);
    else if (!strcmp(name, "--epilogue") && !strcmp(o->cmd, "fuzz"))
        o->fuzz_epi = val;
    else if (!strcmp(name, "--dtype") || !strcmp(name, "--dtype-b")) {
        const int f = tk_lab_fp8_format_parse(val);
        if (f < 0)
            rc = bad("%s: '%s' is not e4m3 or e5m2 (the FP8 formats of tilekit.h's tk_fp8_format)", name, val);
        *(name[7] ? &o->dtype_b : &o->dtype_a) = f;
        o->fp8 |= !name[7];
    } else if (!strcmp(name, "--scale")) {
        if ((o->scale_mode = tk_lab_scale_mode_parse(val)) < 0)
            rc = bad("--scale: '%s' is not tensor, row or block (tilekit.h's tk_scale_mode)", val);
    } else if (!strcmp(name, "--exact"))
        o->exact = 1;
    else if (!strncmp(name, "--epilogue", 10) || !strncmp(name, "--act", 5) || !strncmp(name, "--bias", 6) ||
             !strcmp(name, "--d") || !strcmp(name, "--aux") || !strcmp(name, "--up"))
        rc = apply_epi_flag(o, name, val);
    else
        rc = apply_group_flag(o, name, val);
    return rc ? 2 : 0;
}

/* fuzz: the parsed options into o->fuzz, checked whole (tk_lab_fuzz_check)
 * so that every bad value exits 2 before the GPU is touched. */
static int fuzz_args(opts *o)
{
    tk_lab_fuzz_opts *f = &o->fuzz;
    if (o->case_given && (o->cases_given || o->budget_given))
        return bad("--case replays one case: leave out --cases and --budget");
    if (o->cases_given && o->budget_given)
        return bad("--cases and --budget: give one or the other");
    if (o->budget_given) {
        f->budget_s = o->bench.budget_s;
        f->cases = 0;
    }
    f->seed = o->c.seed;
    f->kernels = o->kernels_all ? NULL : o->kernels;
    char why[TK_LAB_MSG_LEN];
    if (o->forms && tk_lab_fuzz_parse_forms(o->forms, &f->forms, why, sizeof why))
        return bad("%s", why);
    if (o->fuzz_epi) {
        const int kind = strcmp(o->fuzz_epi, "all") ? tk_lab_epi_kind_parse(o->fuzz_epi) : TK_EPI_NONE;
        if (kind < 0 || (kind == TK_EPI_NONE && strcmp(o->fuzz_epi, "all")))
            return bad("--epilogue: '%s' is not bias_act, gated, backward, gated_backward or all", o->fuzz_epi);
        f->epi_kind = kind;
        f->forms |= TK_LAB_FORM_EPILOGUE;
    }
    /* --dtype adds FP8 cases of its formats (--forms ...,fp8: any formats); --dtype-b and --scale narrow them */
    if ((o->dtype_b >= 0 || o->scale_mode) && !o->fp8 && !(f->forms & TK_LAB_FORM_FP8))
        return bad("%s: needs --dtype e4m3|e5m2 or fp8 in --forms (it narrows the FP8 cases)",
                   o->dtype_b >= 0 ? "--dtype-b" : "--scale");
    if (o->dtype_b >= 0 && !o->fp8)
        return bad("--dtype-b: needs --dtype (A's format)");
    if (o->fp8) {
        f->forms |= TK_LAB_FORM_FP8;
        f->fp8_a = o->dtype_a;
        f->fp8_b = o->dtype_b >= 0 ? o->dtype_b : o->dtype_a;
    }
    f->fp8_mode = o->scale_mode;
    if (tk_lab_fuzz_check(f, why, sizeof why))
        return bad("%s", why);
    return 0;
}

/* profile and launch: one kernel (--kernel is required, one name) and one
 * shape. */
static int one_kernel_args(opts *o)
{
    if (o->list_metrics)
        return 0;
    if (!o->kernel_given || o->nkernels != 1)
        return bad("%s: --kernel NAME is required, one kernel (a registry name, cublas or auto)", o->cmd);
    if (o->nshapes > 1)
        return bad("--shapes: %s takes one problem", o->cmd);
    return 0;
}

/* --batch and --groups: checked against each other and the other options,
 * the groups' sizes made (skewed's order from --seed) and M (rows,
 * masked) or K (k) taken from them where not given. */
static int group_args(opts *o, int shapes_given)
{
    if (o->group_kind_given && !o->groups)
        return bad("--group-kind: needs --groups (the sizes the kind splits the problem by)");
    if ((o->bcast_a || o->bcast_b) && !o->batch)
        return bad("%s: needs --batch (a broadcast operand is one matrix for every batched product)",
                   o->bcast_a ? "--stride-a" : "--stride-b");
    if (o->vs_dense && !o->batch && !o->groups)
        return bad("--vs-dense: needs --batch or --groups (it times their products one tk_gemm_ex at a time)");
    if (!o->batch && !o->groups)
        return 0;
    const char *form = o->batch ? "--batch" : "--groups";
    if (o->batch && o->groups)
        return bad("--batch and --groups: give one or the other");
    if (o->c.offset)
        return bad("--offset: dense problems only (%s's matrices start at their buffers)", form);
    if (o->png || o->plant_row >= 0)
        return bad("%s: dense problems only (with %s, verify prints each group's verdict)", o->png ? "--png" : "--plant",
                   form);
    if (!o->groups)
        return 0;
    if (shapes_given)
        return bad("--groups: takes one problem (--m, --n, --k), not --shapes");
    if (o->c.layout == TK_COL_MAJOR)
        return bad("--layout: col is for dense and --batch problems (the grouped kinds are row-major, tilekit.h)");
    if (!o->group_kind)
        o->group_kind = TK_GROUP_ROWS;
    const tk_lab_group_spec *g = o->gspec;
    if (!(o->sizes = malloc((size_t)g->count * sizeof *o->sizes)))
        return bad("--groups: out of host memory");
    tk_lab_group_sizes(g, o->c.seed, o->sizes);
    int64_t most = 0;
    for (int i = 0; i < g->count; i++)
        most = o->sizes[i] > most ? o->sizes[i] : most;
    shape *sh = &o->shapes[0];
    if (o->group_kind == TK_GROUP_K) {
        if (o->k_given && sh->k < g->total)
            return bad("--k: %lld is less than the groups' K %lld (expected at least the sizes' sum; leave --k out "
                       "to use it)", (long long)sh->k, (long long)g->total);
        sh->k = o->k_given ? sh->k : g->total;
        return 0;
    }
    const int64_t need = o->group_kind == TK_GROUP_ROWS ? g->total : most;
    if (o->m_given && sh->m < need)
        return bad(o->group_kind == TK_GROUP_ROWS
                       ? "--m: %lld is less than the groups' %lld rows (expected at least the sizes' sum; leave --m "
                         "out to use it)"
                       : "--m: %lld is less than the largest group's %lld rows (masked: each group has at most M "
                         "rows; leave --m out to use the largest)",
                   (long long)sh->m, (long long)need);
    sh->m = o->m_given ? sh->m : need;
    return 0;
}

/* The epilogue's options: checked against each other and the problem's
 * form (a refusal the library makes, such as an odd N for gated or
 * bias_grad with a forward kind, is left for verify to report). */
static int epi_args(opts *o)
{
    tk_lab_epi *e = &o->epi;
    if (!e->kind) {
        if (o->epi_flag)
            return bad("%s: needs --epilogue KIND (bias_act, gated, backward or gated_backward)", o->epi_flag);
        return 0;
    }
    if (o->batch || o->groups)
        return bad("--epilogue: one product only (not with %s: tilekit.h takes epilogues on TK_GROUP_NONE)",
                   o->batch ? "--batch" : "--groups");
    if (o->c.layout == TK_COL_MAJOR)
        return bad("--layout: col with --epilogue (epilogues are row-major, tilekit.h)");
    if (o->c.offset || o->png || o->plant_row >= 0 || o->smem_limit)
        return bad("%s: dense problems without an epilogue only", o->c.offset ? "--offset" : o->png ? "--png"
                                                                  : o->plant_row >= 0 ? "--plant" : "--smem-limit");
    if (e->up_split && e->kind != TK_EPI_GATED)
        return bad("--up: for --epilogue gated only");
    if (e->kind == TK_EPI_BACKWARD || e->kind == TK_EPI_GATED_BACKWARD)
        e->aux = 1;   /* their input */
    return 0;
}

/* FP8 operands (--dtype, --dtype-b, --scale, --exact): checked against
 * each other and the problem's form; the shapes' K where block scales need
 * a multiple of 128 (a suite's shapes are reported per row instead). A
 * refusal the library makes (block scales with a column-major problem) is
 * left for verify to report. */
static int f8_args(opts *o)
{
    if (!o->fp8) {
        if (o->dtype_b >= 0 || o->scale_mode || o->exact)
            return bad("%s: needs --dtype e4m3|e5m2 (FP8 operands)",
                       o->dtype_b >= 0 ? "--dtype-b" : o->scale_mode ? "--scale" : "--exact");
        return 0;
    }
    if (o->batch || o->groups)
        return bad("--dtype: one product only (not with %s: tilekit.h takes FP8 operands on TK_GROUP_NONE)",
                   o->batch ? "--batch" : "--groups");
    if (o->epi.kind || o->epi_flag)
        return bad("--dtype: not with %s (tilekit.h: no fused epilogue on FP8 products yet)",
                   o->epi.kind ? "--epilogue" : o->epi_flag);
    if (o->c.offset || o->png || o->plant_row >= 0 || o->smem_limit)
        return bad("%s: bf16 problems only (not with --dtype)", o->c.offset ? "--offset" : o->png ? "--png"
                                                                : o->plant_row >= 0 ? "--plant" : "--smem-limit");
    o->f8.fa = (tk_lab_fp8)o->dtype_a;
    o->f8.fb = (tk_lab_fp8)(o->dtype_b >= 0 ? o->dtype_b : o->dtype_a);
    o->f8.scale_mode = o->scale_mode ? o->scale_mode : TK_SCALE_TENSOR;
    o->f8.exact = o->exact;
    if (o->exact) {
        int e;
        if (o->c.beta != 0.0f || o->c.alpha == 0.0f || frexpf(o->c.alpha, &e) != (o->c.alpha < 0 ? -0.5f : 0.5f))
            return bad("--exact: needs --beta 0 and --alpha a power of two (got %g, %g): the sums of integer codes "
                       "with power-of-two scales are then exact in fp32", (double)o->c.alpha, (double)o->c.beta);
    }
    /* bench: torch._scaled_mm's call unless told otherwise: A and B K-major (cuBLASLt's FP8 layout), bf16 C */
    if (!strcmp(o->cmd, "bench") && !o->ops_given)
        o->c.op_b = TK_OP_T;
    if (!strcmp(o->cmd, "bench") && !o->out_given)
        o->c.out = TK_BF16;
    for (int s = 0; s < o->nshapes; s++) {
        const shape *sh = &o->shapes[s];
        if (!strcmp(o->cmd, "verify") && (double)sh->m * (double)sh->n * (double)sh->k > F8_VERIFY_VOLUME)
            return bad("--dtype: %lldx%lldx%lld is over 2^33 multiply-adds, the most verify's fp64 reference of "
                       "every element of C takes on the CPU (give --m/--n/--k or --shapes, e.g. 2048x2048x2048)",
                       (long long)sh->m, (long long)sh->n, (long long)sh->k);
        if (o->f8.scale_mode == TK_SCALE_BLOCK && sh->k % 128)
            return bad("--scale block: K %lld of %lldx%lldx%lld is not a multiple of 128 (block scales: 1 x 128 of "
                       "A, 128 x 128 of B; tilekit.h)", (long long)sh->k, (long long)sh->m, (long long)sh->n,
                       (long long)sh->k);
        if (o->exact && sh->k > F8_EXACT_K)
            return bad("--exact: K %lld of %lldx%lldx%lld is over %d (integer sums stay exact in fp32 up to that K)",
                       (long long)sh->k, (long long)sh->m, (long long)sh->n, (long long)sh->k, F8_EXACT_K);
    }
    return 0;
}

/* The kernels of a case that needs the accept bit `bit` (an epilogue, FP8
 * operands, a batched or grouped form): those --kernel names, or (--kernel
 * all, the default) auto and every kernel whose family takes it (the
 * table's accept bits). Returns their number. */
static int kernels_taking(const opts *o, unsigned bit, const char **out)
{
    int n = 0;
    if (!o->kernels_all) {
        for (; n < o->nkernels; n++)
            out[n] = o->kernels[n];
        return n;
    }
    out[n++] = "auto";
    for (int i = 0; i < tk_registry_count() && n < MAX_LIST; i++)
        if (tk_registry_at(i)->family->accepts & bit)
            out[n++] = tk_registry_at(i)->name;
    return n;
}

/* verify's picture and planted element: one case to draw, a planted
 * element inside every shape. */
static int verify_args(const opts *o)
{
    if (o->png && (o->nkernels != 1 || o->nshapes != 1))
        return bad("--png: draws one case: give one --kernel and one shape (got %d kernels, %d shapes)",
                   o->nkernels, o->nshapes);
    for (int s = 0; o->plant_row >= 0 && s < o->nshapes; s++)
        if (o->plant_row >= o->shapes[s].m || o->plant_col >= o->shapes[s].n)
            return bad("--plant: (%lld, %lld) is outside the %lld x %lld C of %lldx%lldx%lld",
                       (long long)o->plant_row, (long long)o->plant_col, (long long)o->shapes[s].m,
                       (long long)o->shapes[s].n, (long long)o->shapes[s].m, (long long)o->shapes[s].n,
                       (long long)o->shapes[s].k);
    return 0;
}

static int parse_args(int argc, char **argv, opts *o)
{
    int allowed = F_KERNEL;
    if (!strcmp(o->cmd, "bench")) allowed |= F_SHAPE | F_PROBLEM | F_BENCH | F_FILES | F_GROUP | F_EPI | F_FP8;
    if (!strcmp(o->cmd, "verify")) allowed |= F_SHAPE | F_PROBLEM | F_FILES | F_VERIFY | F_GROUP | F_EPI | F_FP8;
    if (!strcmp(o->cmd, "tune")) allowed = F_TUNE;
    if (!strcmp(o->cmd, "fuzz")) allowed |= F_FUZZ;
    if (!strcmp(o->cmd, "profile")) allowed |= F_SHAPE | F_PROBLEM | F_FILES | F_PROFILE;
    if (!strcmp(o->cmd, "launch")) allowed |= F_SHAPE | F_PROBLEM | F_LAUNCH;
    if (!strcmp(o->cmd, "info")) allowed |= F_FILES;
    shape mnk = { 8192, 8192, 8192 };
    const char *clash = NULL;   /* the last option given that --suite excludes */
    int seen[NFLAGS] = { 0 }, kernel_given = 0;
    char all[] = "all";
    if (parse_kernels(o, all))
        return 2;
    for (int i = 2; i < argc; i++) {
        char *val;
        int f;
        if (next_flag(argc, argv, &i, allowed, o->cmd, seen, &f, &val) || apply_flag(o, flags[f].name, val, &mnk))
            return 2;
        if (suite_clash(flags[f].name))
            clash = flags[f].name;
        kernel_given |= !strcmp(flags[f].name, "--kernel");
    }
    if (!strcmp(o->cmd, "fuzz"))
        return fuzz_args(o);
    if (!strcmp(o->cmd, "tune")) {
        if (!o->suite)
            return bad("tune: --suite NAME|FILE is required (the shapes to tune)");
        /* the default file too must be writable before the timings */
        if (!o->tune_file && check_writable("--file", o->tune_file = TUNE_FILE_DEFAULT))
            return 2;
        if (suite_args(o, NULL, 0))
            return 2;
        for (int s = 0; s < o->nsuite; s++)
            if (o->suite_shapes[s].kind)
                return bad("--suite: %s.txt:%d: a %s line: tune takes single products (M N K opA opB lines)",
                           o->suite_shapes[s].suite, o->suite_shapes[s].line,
                           tk_lab_group_kind_name(o->suite_shapes[s].kind));
        return 0;
    }
    if (o->suite && (o->epi.kind || o->epi_flag))
        return bad("--suite: not with an epilogue (give the shape with --m/--n/--k or --shapes)");
    if (o->suite)
        return f8_args(o) ? 2 : suite_args(o, clash, kernel_given);
    if (o->nshapes && o->mnk_set)
        return bad("use either --shapes or --m/--n/--k, not both");
    const int shapes_given = o->nshapes > 0;
    if (!o->nshapes)
        o->shapes[o->nshapes++] = mnk;
    o->kernel_given = kernel_given;
    if (group_args(o, shapes_given) || epi_args(o) || f8_args(o))
        return 2;
    if (!strcmp(o->cmd, "profile") || !strcmp(o->cmd, "launch"))
        return one_kernel_args(o);
    if (!strcmp(o->cmd, "verify"))
        return verify_args(o);
    return 0;
}

/* verify --png: the case's error map as a picture. 0, or 1 after a message. */
static int draw_map(const char *path, const char *kernel, const tk_lab_case *c, const tk_lab_verify_result *r)
{
    if (r->outcome < 0 || r->outcome == 2) {
        fprintf(stderr, "tilekit verify: --png: nothing drawn: %s\n",
                r->outcome == 2 ? "the kernel refused the case" : "the case did not run");
        return 1;
    }
    char name[128], title[256];
    tk_lab_case_name(c, name, sizeof name);
    snprintf(title, sizeof title, "%s %s", kernel, name);
    FILE *f = fopen(path, "wb");
    int bad_write = !f || tk_lab_errmap_png(f, &tk_lab_verify_map_report(r)->tiles, title);
    if ((f && fclose(f)) || bad_write) {
        fprintf(stderr, "tilekit verify: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    printf("verify: error map drawn in %s (%s)\n", path,
           tk_lab_verify_map_report(r) == &r->vs_cublas ? "against cuBLAS, every element"
                                                        : "against the fp64 reference, the checked elements");
    return 0;
}

/* The batched or grouped case of shape sh: o's problem options with
 * --batch's or --groups' form (the sizes group_args made). */
static void gcase_of(const opts *o, const shape *sh, tk_lab_gcase *g)
{
    memset(g, 0, sizeof *g);
    g->c = o->c;
    g->c.m = sh->m;
    g->c.n = sh->n;
    g->c.k = sh->k;
    if (o->batch) {
        g->kind = TK_GROUP_BATCHED;
        g->count = (int)o->batch;
        g->broadcast_a = o->bcast_a;
        g->broadcast_b = o->bcast_b;
        return;
    }
    g->kind = o->group_kind;
    g->count = o->gspec->count;
    g->sizes = o->sizes;
    tk_lab_group_spec_str(o->gspec, g->label, sizeof g->label);
}

/* The kernels a batched or grouped case runs (kernels_taking). */
static int form_kernels(const opts *o, int kind, const char **out)
{
    return kernels_taking(o, kind == TK_GROUP_BATCHED ? TK_ACCEPT_BATCHED : TK_ACCEPT_GROUPED, out);
}

/* verify --batch/--groups: each kernel on each case, judged group by
 * group; the counts go to *passed, *failed, *skipped, a row each to jf. */
static void verify_groups(const opts *o, tk_lab_verify *v, FILE *jf, int *passed, int *failed, int *skipped)
{
    static const char *outcome[] = { "error", "ok", "fail", "skip" };
    tk_lab_gverify_result *r = malloc(sizeof *r);
    if (!r) {
        fprintf(stderr, "tilekit verify: out of host memory\n");
        (*failed)++;
        return;
    }
    const char *kernels[MAX_LIST + 1];
    for (int s = 0, rows = 0; s < o->nshapes; s++) {
        tk_lab_gcase g;
        gcase_of(o, &o->shapes[s], &g);
        const int nk = form_kernels(o, g.kind, kernels);
        for (int i = 0; i < nk; i++) {
            tk_lab_gverify_run(v, kernels[i], &g, r);
            tk_lab_gverify_print(stdout, kernels[i], &g, r);
            fflush(stdout);
            *passed += r->outcome == 0;
            *failed += r->outcome == 1 || r->outcome < 0;
            *skipped += r->outcome == 2;
            if (jf) {
                char form[96];
                tk_lab_gcase_form(&g, form, sizeof form);
                fprintf(jf, "%s\n {\"kernel\":", rows++ ? "," : "");
                tk_lab_json_str(jf, kernels[i]);
                fputs(",\"form\":", jf);
                tk_lab_json_str(jf, form);
                fprintf(jf, ",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"layout\":\"%s\",\"op_a\":\"%s\",\"op_b\":\"%s\","
                            "\"out\":\"%s\",\"alpha\":%.9g,\"beta\":%.9g,\"pad\":%d,\"status\":\"%s\",\"count\":%d,"
                            "\"failed_groups\":%d,\"empty_groups\":%d,\"max_abs\":%.6g,\"max_rel\":%.6g,\"over\":%lld,"
                            "\"nan\":%lld,\"untouched_writes\":%lld,\"group_error\":%d,\"cublas_loop\":%s,"
                            "\"cublas_grouped\":%s}",
                        (long long)g.c.m, (long long)g.c.n, (long long)g.c.k, g.c.layout == TK_ROW_MAJOR ? "row" : "col",
                        g.c.op_a == TK_OP_N ? "n" : "t", g.c.op_b == TK_OP_N ? "n" : "t",
                        g.c.out == TK_F32 ? "fp32" : "bf16", (double)g.c.alpha, (double)g.c.beta, g.c.pad,
                        outcome[r->outcome + 1], r->count, r->failed, r->empty,
                        fmax(r->vs_ref.max_abs, r->vs_loop.max_abs), fmax(r->vs_ref.max_rel, r->vs_loop.max_rel),
                        (long long)(r->vs_ref.over + r->vs_loop.over + r->vs_grouped.over),
                        (long long)(r->vs_ref.nonfinite + r->vs_loop.nonfinite + r->vs_grouped.nonfinite),
                        (long long)r->untouched_writes, r->group_error, r->vs_loop.ran ? "true" : "false",
                        r->vs_grouped.ran ? "true" : "false");
            }
            tk_lab_gverify_free(r);
        }
    }
    free(r);
}

/* One verify row: kernel on case c, its verdict printed and (jf) its JSON
 * object written; returns the outcome (0 passed, 1 failed, 2 refused, -1
 * error). */
typedef int (*verify_row)(const opts *o, tk_lab_verify *v, const char *kernel, const tk_lab_case *c, FILE *jf);

static int epi_row(const opts *o, tk_lab_verify *v, const char *kernel, const tk_lab_case *c, FILE *jf)
{
    tk_lab_epi_result r;
    tk_lab_epi_verify_run(v, kernel, c, &o->epi, &r);
    tk_lab_epi_verify_print(stdout, kernel, c, &o->epi, &r);
    if (jf)
        tk_lab_epi_verify_json(jf, kernel, c, &o->epi, &r);
    return r.outcome;
}

static int f8_row(const opts *o, tk_lab_verify *v, const char *kernel, const tk_lab_case *c, FILE *jf)
{
    tk_lab_f8_result r;
    tk_lab_f8_verify_run(v, kernel, c, &o->f8, &r);
    tk_lab_f8_verify_print(stdout, kernel, c, &o->f8, &r);
    if (jf)
        tk_lab_f8_verify_json(jf, kernel, c, &o->f8, &r);
    return r.outcome;
}

/* verify --epilogue and --dtype: each of kernels[0..nk) on each shape
 * through row; the counts go to *passed, *failed, *skipped (a refusal),
 * a row each to jf. */
static void verify_rows(const opts *o, tk_lab_verify *v, FILE *jf, const char *const *kernels, int nk, verify_row row,
                        int *passed, int *failed, int *skipped)
{
    for (int s = 0, rows = 0; s < o->nshapes; s++)
        for (int i = 0; i < nk; i++) {
            tk_lab_case c = o->c;
            c.m = o->shapes[s].m; c.n = o->shapes[s].n; c.k = o->shapes[s].k;
            if (jf)
                fputs(rows++ ? ",\n " : "\n ", jf);
            const int outcome = row(o, v, kernels[i], &c, jf);
            fflush(stdout);
            *passed += outcome == 0;
            *failed += outcome == 1 || outcome < 0;
            *skipped += outcome == 2;
        }
}

static int cmd_verify(const opts *o)
{
    char why[TK_LAB_MSG_LEN];
    tk_lab_verify *v;
    if (tk_lab_verify_open(&v, why, sizeof why)) {
        fprintf(stderr, "tilekit verify: %s\n", why);
        return 1;
    }
    tk_lab_verify_set_cublas(v, !o->no_cublas);
    tk_lab_verify_set_plant(v, o->plant_row, o->plant_col);
    if (o->smem_limit)
        tk_lab_verify_set_smem_limit(v, (size_t)o->smem_limit);
    int png_rc = 0;
    FILE *jf = o->json ? fopen(o->json, "w") : NULL;
    if (o->json && !jf)
        fprintf(stderr, "tilekit verify: cannot write %s: %s\n", o->json, strerror(errno));
    if (jf)
        fprintf(jf, "{\"tool\":\"tilekit verify\",\"version\":\"%d.%d.%d\",\"results\":[", TILEKIT_VERSION_MAJOR,
                TILEKIT_VERSION_MINOR, TILEKIT_VERSION_PATCH);
    int passed = 0, failed = 0, skipped = 0, rows = 0;
    static const char *outcome[] = { "error", "ok", "fail", "skip" };
    if (o->batch || o->groups)
        verify_groups(o, v, jf, &passed, &failed, &skipped);
    const char *kernels[MAX_LIST + 1];
    if (o->epi.kind || o->fp8) {
        const int nk = kernels_taking(o, o->fp8 ? TK_ACCEPT_AB_FP8 : TK_ACCEPT_EPILOGUE, kernels);
        verify_rows(o, v, jf, kernels, nk, o->fp8 ? f8_row : epi_row, &passed, &failed, &skipped);
    }
    for (int s = 0; !o->batch && !o->groups && !o->epi.kind && !o->fp8 && s < o->nshapes; s++)
        for (int i = 0; i < o->nkernels; i++) {
            tk_lab_case c = o->c;
            c.m = o->shapes[s].m; c.n = o->shapes[s].n; c.k = o->shapes[s].k;
            tk_lab_verify_result r;
            tk_lab_verify_run(v, o->kernels[i], &c, &r);
            tk_lab_verify_print(stdout, o->kernels[i], &c, &r);
            if (o->png)
                png_rc = draw_map(o->png, o->kernels[i], &c, &r);
            fflush(stdout);
            passed += r.outcome == 0;
            failed += r.outcome == 1 || r.outcome < 0;
            skipped += r.outcome == 2;
            if (jf)
                fprintf(jf, "%s\n {\"kernel\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"layout\":\"%s\",\"op_a\":\"%s\","
                            "\"op_b\":\"%s\",\"out\":\"%s\",\"alpha\":%.9g,\"beta\":%.9g,\"pad\":%d,\"offset\":%d,\"status\":\"%s\","
                            "\"max_abs\":%.6g,\"max_rel\":%.6g,\"similarity\":%.6g,\"over\":%lld,\"nan\":%lld,"
                            "\"pad_writes\":%lld}",
                        rows++ ? "," : "", o->kernels[i], (long long)c.m, (long long)c.n, (long long)c.k,
                        c.layout == TK_ROW_MAJOR ? "row" : "col", c.op_a == TK_OP_N ? "n" : "t",
                        c.op_b == TK_OP_N ? "n" : "t", c.out == TK_F32 ? "fp32" : "bf16", (double)c.alpha,
                        (double)c.beta, c.pad, c.offset, outcome[r.outcome + 1], fmax(r.vs_cublas.max_abs, r.vs_ref.max_abs),
                        fmax(r.vs_cublas.max_rel, r.vs_ref.max_rel), r.vs_cublas.similarity,
                        (long long)(r.vs_cublas.over + r.vs_ref.over),
                        (long long)(r.vs_cublas.nonfinite + r.vs_ref.nonfinite), (long long)r.pad_writes);
        }
    if (jf) {
        fprintf(jf, "\n]}\n");
        fclose(jf);
    }
    tk_lab_verify_close(v);
    if (skipped)
        printf("verify: %d skipped (the kernel refused the case)\n", skipped);
    printf("verify: %d passed, %d failed\n", passed, failed);
    return failed || png_rc ? 1 : 0;
}

/* fuzz: the run, the failure lines as they come, then the counts. The JSON
 * file is opened first: a path that cannot be written exits 2 before any
 * GPU work. */
static int cmd_fuzz(const opts *o)
{
    FILE *jf = NULL;
    if (o->json && !(jf = fopen(o->json, "w")))
        return bad("--json: cannot write %s: %s", o->json, strerror(errno));
    tk_lab_fuzz_summary *s = malloc(sizeof *s);
    if (!s) {
        fprintf(stderr, "tilekit fuzz: out of host memory\n");
        if (jf)
            fclose(jf);
        return 1;
    }
    char why[TK_LAB_MSG_LEN];
    tk_status st = tk_lab_fuzz_run(&o->fuzz, s, why, sizeof why);
    if (st != TK_SUCCESS)
        fprintf(stderr, "tilekit fuzz: %s (%s)\n", why, tk_status_string(st));
    if (s->cases)
        tk_lab_fuzz_print_summary(stdout, &o->fuzz, s);
    int rc = st != TK_SUCCESS || s->total.failed ? 1 : 0;
    if (jf) {
        int werr = tk_lab_fuzz_write_json(jf, &o->fuzz, s);
        if (fclose(jf) || werr) {
            fprintf(stderr, "tilekit fuzz: cannot write %s: %s\n", o->json, strerror(errno));
            rc = 1;
        }
    }
    free(s);
    return rc;
}

/* The suite's shapes, each with its own ops: the kernels of `order` one
 * after the other (cuBLAS first, for the ratio). Returns the rows written. */
static int bench_suite(tk_lab_bench *b, const opts *o, const char *const *order, int norder, tk_lab_bench_row *rows)
{
    int nrows = 0, gheader = 0, f8header = 0, small = 0;
    for (int s = 0; s < o->nsuite; s++) {
        const tk_lab_shape *sh = &o->suite_shapes[s];
        if (o->fp8) {   /* auto (and --kernel's) against cuBLASLt's FP8 matmul, A and B K-major */
            if (sh->m < F8_SUITE_MIN_M) {
                small++;
                continue;
            }
            tk_lab_case c = o->c;
            c.layout = TK_ROW_MAJOR;
            c.m = sh->m; c.n = sh->n; c.k = sh->k;
            c.op_a = TK_OP_N; c.op_b = TK_OP_T;
            fprintf(stderr, "suite: [%d/%d] %s %lldx%lldx%lld n t (FP8: A and B K-major)\n", s + 1, o->nsuite,
                    sh->suite, (long long)c.m, (long long)c.n, (long long)c.k);
            if (!f8header++)
                tk_lab_bench_print_f8header(stdout);
            const int n = tk_lab_f8_bench_case(b, &c, &o->f8, o->kernels, o->nkernels, 0, stdout, rows + nrows);
            for (int i = 0; i < n; i++)
                snprintf(rows[nrows + i].suite, sizeof rows[nrows + i].suite, "%s", sh->suite);
            nrows += n;
            continue;
        }
        if (sh->kind) {   /* a grouped line: auto (and --kernel's) against the cuBLAS loop */
            tk_lab_gcase g;
            int64_t sizes[TK_LAB_GROUPS_MAX];
            char form[96];
            suite_gcase(o, sh, &g, sizes);
            tk_lab_gcase_form(&g, form, sizeof form);
            fprintf(stderr, "suite: [%d/%d] %s %s %lldx%lldx%lld %c %c\n", s + 1, o->nsuite, sh->suite, form,
                    (long long)g.c.m, (long long)g.c.n, (long long)g.c.k, g.c.op_a == TK_OP_N ? 'n' : 't',
                    g.c.op_b == TK_OP_N ? 'n' : 't');
            if (!gheader++)
                tk_lab_bench_print_gheader(stdout);
            const tk_lab_gbench_opts go = { 0, 1, o->vs_dense };
            const int n = tk_lab_gbench_case(b, &g, o->kernels, o->nkernels, &go, stdout, rows + nrows);
            for (int i = 0; i < n; i++)
                snprintf(rows[nrows + i].suite, sizeof rows[nrows + i].suite, "%s", sh->suite);
            nrows += n;
            continue;
        }
        tk_lab_case c = o->c;
        c.m = sh->m; c.n = sh->n; c.k = sh->k;
        c.op_a = sh->op_a; c.op_b = sh->op_b;
        fprintf(stderr, "suite: [%d/%d] %s %lldx%lldx%lld %c %c\n", s + 1, o->nsuite, sh->suite, (long long)c.m,
                (long long)c.n, (long long)c.k, c.op_a == TK_OP_N ? 'n' : 't', c.op_b == TK_OP_N ? 'n' : 't');
        for (int i = 0; i < norder; i++, nrows++) {
            tk_lab_bench_run(b, order[i], &c, &rows[nrows]);
            snprintf(rows[nrows].suite, sizeof rows[nrows].suite, "%s", sh->suite);
            tk_lab_bench_print_row(stdout, &rows[nrows]);
            fflush(stdout);
        }
    }
    if (small)
        printf("suite: %d shapes with M < %d left out of the FP8 run (issue 40's FP8 targets start at M = %d)\n",
               small, F8_SUITE_MIN_M, F8_SUITE_MIN_M);
    return nrows;
}

/* Opens the bench context of `cmd` and prints its header; NULL on failure
 * (message printed). */
static tk_lab_bench *open_bench(const opts *o, const char *cmd)
{
    char why[TK_LAB_MSG_LEN];
    tk_lab_bench *b;
    if (tk_lab_bench_open(&b, &o->bench, why, sizeof why)) {
        fprintf(stderr, "tilekit %s: %s\n", cmd, why);
        return NULL;
    }
    tk_lab_bench_print_header(stdout, tk_lab_bench_get_info(b));
    return b;
}

static int cmd_bench(const opts *o)
{
    tk_lab_bench *b = open_bench(o, "bench");
    if (!b)
        return 1;
    const tk_lab_bench_info *info = tk_lab_bench_get_info(b);
    /* cuBLAS first for each shape, so every later row has its ratio. */
    const char *order[MAX_LIST + 1];
    int norder = 0, has_cublas = 0;
    for (int i = 0; i < o->nkernels; i++)
        has_cublas |= !strcmp(o->kernels[i], "cublas");
    if (has_cublas || !o->no_cublas)
        order[norder++] = "cublas";
    for (int i = 0; i < o->nkernels; i++)
        if (strcmp(o->kernels[i], "cublas"))
            order[norder++] = o->kernels[i];
    /* a batched or grouped case's rows: its kernels after up to 3 yardsticks */
    const char *kernels[MAX_LIST + 1];
    const int many = o->batch || o->groups;
    const int nk = many     ? form_kernels(o, o->batch ? TK_GROUP_BATCHED : o->group_kind, kernels)
                   : o->fp8 ? kernels_taking(o, TK_ACCEPT_AB_FP8, kernels)
                            : o->nkernels;
    const int per = (norder > nk ? norder : nk) + 3;
    int total = per * (o->nshapes + o->nsuite), nrows = 0;
    tk_lab_bench_row *rows = calloc((size_t)total, sizeof *rows);
    if (!rows) {
        tk_lab_bench_close(b);
        return 1;
    }
    nrows = bench_suite(b, o, order, norder, rows);     /* --suite (then o->nshapes is 0) */
    if (o->epi.kind) {
        const int ne = kernels_taking(o, TK_ACCEPT_EPILOGUE, kernels);
        for (int s = 0; s < o->nshapes; s++) {
            tk_lab_case c = o->c;
            c.m = o->shapes[s].m; c.n = o->shapes[s].n; c.k = o->shapes[s].k;
            fprintf(stderr, "bench: [%d/%d] %lldx%lldx%lld with an epilogue\n", s + 1, o->nshapes, (long long)c.m,
                    (long long)c.n, (long long)c.k);
            nrows += tk_lab_epi_bench_case(b, &c, &o->epi, kernels, ne, o->no_cublas, stdout, rows + nrows);
        }
    }
    if (o->fp8 && o->nshapes)
        tk_lab_bench_print_f8header(stdout);
    for (int s = 0; o->fp8 && s < o->nshapes; s++) {
        tk_lab_case c = o->c;
        c.m = o->shapes[s].m; c.n = o->shapes[s].n; c.k = o->shapes[s].k;
        char fn[64];
        tk_lab_f8_name(&o->f8, fn, sizeof fn);
        fprintf(stderr, "bench: [%d/%d] %lldx%lldx%lld %s\n", s + 1, o->nshapes, (long long)c.m, (long long)c.n,
                (long long)c.k, fn);
        nrows += tk_lab_f8_bench_case(b, &c, &o->f8, kernels, nk, o->no_cublas, stdout, rows + nrows);
    }
    if (many)
        tk_lab_bench_print_gheader(stdout);
    for (int s = 0; many && s < o->nshapes; s++) {
        tk_lab_gcase g;
        char name[256];
        gcase_of(o, &o->shapes[s], &g);
        tk_lab_gcase_name(&g, name, sizeof name);
        fprintf(stderr, "bench: [%d/%d] %s\n", s + 1, o->nshapes, name);
        const tk_lab_gbench_opts go = { o->no_cublas, 0, o->vs_dense };
        nrows += tk_lab_gbench_case(b, &g, kernels, nk, &go, stdout, rows + nrows);
    }
    if (many)
        tk_lab_bench_print_read_rate(stdout, info, rows, nrows);
    for (int s = 0; !many && !o->epi.kind && !o->fp8 && s < o->nshapes; s++)
        for (int i = 0; i < norder; i++) {
            tk_lab_case c = o->c;
            c.m = o->shapes[s].m; c.n = o->shapes[s].n; c.k = o->shapes[s].k;
            fprintf(stderr, "bench: [%d/%d] %s %lldx%lldx%lld\n", nrows + 1, total, order[i], (long long)c.m,
                    (long long)c.n, (long long)c.k);
            tk_lab_bench_run(b, order[i], &c, &rows[nrows]);
            tk_lab_bench_print_row(stdout, &rows[nrows++]);
            fflush(stdout);
        }
    if (o->nsuite) {
        tk_lab_bench_print_summary(stdout, rows, nrows);
        tk_lab_bench_print_decode_bw(stdout, info, rows, nrows);
    }
    int rc = 0;
    const char *path[2] = { o->json, o->csv };
    for (int w = 0; w < 2; w++) {
        if (!path[w])
            continue;
        FILE *f = fopen(path[w], "w");
        if (!f || (w ? tk_lab_bench_write_csv(f, info, rows, nrows) : tk_lab_bench_write_json(f, info, rows, nrows))) {
            fprintf(stderr, "tilekit bench: cannot write %s: %s\n", path[w], strerror(errno));
            rc = 1;
        }
        if (f)
            fclose(f);
    }
    free(rows);
    tk_lab_bench_close(b);
    return rc;
}

/* tune: for each shape and type of C, auto-dispatch and every kernel it may
 * run, timed; the fastest goes to the tune cache (tune.h). */
static int cmd_tune(const opts *o)
{
    tk_lab_bench *b = open_bench(o, "tune");
    if (!b)
        return 1;
    const tk_lab_bench_info *info = tk_lab_bench_get_info(b);
    const tk_kernel *cand[256];
    int ncand = 0;
    for (int i = 0; i < tk_registry_count() && ncand < 256; i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (k->auto_rank > 0 && k->min_sm <= info->sm)
            cand[ncand++] = k;
    }
    const int ntypes = o->out_given ? 1 : 2;
    char *lines = calloc((size_t)o->nsuite * ntypes, 160);
    if (!lines) {
        tk_lab_bench_close(b);
        return 1;
    }
    int nlines = 0, changed = 0;
    double log_gain = 0;
    for (int s = 0; s < o->nsuite; s++)
        for (int t = 0; t < ntypes; t++) {
            const tk_lab_shape *sh = &o->suite_shapes[s];
            tk_lab_case c = o->c;
            c.layout = TK_ROW_MAJOR;
            c.m = sh->m; c.n = sh->n; c.k = sh->k;
            c.op_a = sh->op_a; c.op_b = sh->op_b;
            c.out = o->out_given ? o->c.out : (tk_dtype)t;
            fprintf(stderr, "tune: [%d/%d] %lldx%lldx%lld %c %c %s\n", s * ntypes + t + 1, o->nsuite * ntypes,
                    (long long)c.m, (long long)c.n, (long long)c.k, c.op_a == TK_OP_N ? 'n' : 't',
                    c.op_b == TK_OP_N ? 'n' : 't', c.out == TK_F32 ? "fp32" : "bf16");
            tk_lab_bench_row auto_row, row, best;
            memset(&best, 0, sizeof best);
            tk_lab_bench_run(b, "auto", &c, &auto_row);
            tk_lab_bench_print_row(stdout, &auto_row);
            const double flop = 2.0 * (double)c.m * (double)c.n * (double)c.k;
            for (int i = 0; i < ncand; i++) {
                /* the rank-1 fallback (k01_naive) only where auto-dispatch may take it */
                if (cand[i]->auto_rank <= 1 && flop > TK_ROUTE_TINY_FLOP)
                    continue;
                if (tk_lab_bench_run(b, cand[i]->name, &c, &row))
                    continue;   /* refused: not a candidate for this problem */
                tk_lab_bench_print_row(stdout, &row);
                if (!best.samples || row.ms_median < best.ms_median)
                    best = row;
            }
            fflush(stdout);
            if (!best.samples)
                continue;
            snprintf(lines + (size_t)nlines++ * 160, 160, "%lld %lld %lld %c %c %s %s\n", (long long)c.m,
                     (long long)c.n, (long long)c.k, c.op_a == TK_OP_N ? 'n' : 't', c.op_b == TK_OP_N ? 'n' : 't',
                     c.out == TK_F32 ? "fp32" : "bf16", best.kernel);
            if (auto_row.samples && strcmp(auto_row.chosen, best.kernel)) {
                changed++;
                log_gain += log(auto_row.ms_median / best.ms_median);
            }
        }
    const char *path = o->tune_file;
    FILE *f = fopen(path, "w");
    int rc = 0;
    if (!f) {
        fprintf(stderr, "tilekit tune: cannot write %s: %s\n", path, strerror(errno));
        rc = 1;
    } else {
        fprintf(f, "# tilekit tune cache: `tilekit tune --suite %s`, %d problems; auto-dispatch reads it\n"
                   "# when %s names this file. Fields: M N K op_a op_b C-type kernel (row-major).\n"
                   "%s\ndevice %d %d %s\n",
                o->suite, nlines, TK_TUNE_ENV, TK_TUNE_MAGIC, info->sm_count, info->sm, info->name);
        for (int i = 0; i < nlines; i++)
            fputs(lines + (size_t)i * 160, f);
        if (fclose(f)) {
            fprintf(stderr, "tilekit tune: cannot write %s: %s\n", path, strerror(errno));
            rc = 1;
        }
    }
    printf("\ntune: %d problems written to %s; the shape rules chose another kernel on %d of them, "
           "which the tuned choice runs %.3fx faster (geomean over those)\n",
           nlines, path, changed, changed ? exp(log_gain / changed) : 1.0);
    free(lines);
    tk_lab_bench_close(b);
    return rc;
}

/* launch: one call of one kernel in a profiled range, then its line. */
static int cmd_launch(const opts *o)
{
    tk_lab_bench_opts bo = { 0 };
    bo.hot = 1;
    bo.no_probe = 1;
    char why[TK_LAB_MSG_LEN];
    tk_lab_bench *b;
    if (tk_lab_bench_open(&b, &bo, why, sizeof why)) {
        fprintf(stderr, "tilekit launch: %s\n", why);
        return 1;
    }
    tk_lab_case c = o->c;
    c.m = o->shapes[0].m; c.n = o->shapes[0].n; c.k = o->shapes[0].k;
    tk_lab_bench_row row;
    tk_lab_kinfo ki;
    int rc = tk_lab_bench_launch(b, o->kernels[0], &c, o->calls ? (int)o->calls : 1, &row, &ki);
    if (rc)
        fprintf(stderr, "tilekit launch: %s: %s\n", o->kernels[0], row.status);
    else {
        char line[512];
        tk_lab_launch_line(line, sizeof line, o->kernels[0], row.chosen[0] ? row.chosen : o->kernels[0], &ki);
        puts(line);
    }
    tk_lab_bench_close(b);
    return rc ? 1 : 0;
}

/* profile: each kernel under ncu, then the screen (and the JSON). */
static int cmd_profile(const opts *o)
{
    if (o->list_metrics) {
        printf("tilekit profile asks Nsight Compute for these metrics (src/lab/lab_profile.c):\n");
        for (int i = 0; i < tk_lab_metric_count(); i++) {
            const tk_lab_metric *m = tk_lab_metric_at(i);
            printf("%s\n    %s (JSON key %s)\n", m->ncu, m->meaning, m->key);
        }
        return 0;
    }
    char ncu[PATH_MAX], self[PATH_MAX], why[8192];
    if (tk_lab_ncu_find(ncu, sizeof ncu, why, sizeof why))
        return bad("profile: %s", why);
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        fprintf(stderr, "tilekit profile: cannot find its own program (/proc/self/exe): %s\n", strerror(errno));
        return 1;
    }
    self[len] = '\0';
    tk_lab_case c = o->c;
    c.m = o->shapes[0].m; c.n = o->shapes[0].n; c.k = o->shapes[0].k;
    /* the problem, spelled out for `tilekit launch` */
    char num[7][40];
    snprintf(num[0], sizeof num[0], "%lld", (long long)c.m);
    snprintf(num[1], sizeof num[1], "%lld", (long long)c.n);
    snprintf(num[2], sizeof num[2], "%lld", (long long)c.k);
    snprintf(num[3], sizeof num[3], "%.9g", (double)c.alpha);
    snprintf(num[4], sizeof num[4], "%.9g", (double)c.beta);
    snprintf(num[5], sizeof num[5], "%llu", (unsigned long long)c.seed);
    snprintf(num[6], sizeof num[6], "%d", c.offset);
    const char *args[] = { "--m", num[0], "--n", num[1], "--k", num[2], "--layout",
                           c.layout == TK_ROW_MAJOR ? "row" : "col", "--op-a", c.op_a == TK_OP_N ? "n" : "t",
                           "--op-b", c.op_b == TK_OP_N ? "n" : "t", "--out", c.out == TK_F32 ? "fp32" : "bf16",
                           "--alpha", num[3], "--beta", num[4], "--seed", num[5], "--offset", num[6],
                           c.pad ? "--pad" : NULL, NULL };
    const char *names[2] = { o->kernels[0], o->vs };
    int n = o->vs ? 2 : 1, rc = 0;
    tk_lab_profile *p = calloc(2, sizeof *p);
    if (!p) {
        fprintf(stderr, "tilekit profile: out of host memory\n");
        return 1;
    }
    for (int i = 0; i < n && !rc; i++) {
        fprintf(stderr, "profile: [%d/%d] %s under %s\n", i + 1, n, names[i], ncu);
        rc = tk_lab_ncu_profile(ncu, self, names[i], args, &p[i], why, sizeof why);
        if (rc)
            fprintf(stderr, "tilekit profile: %s: %s\n", names[i], why);
    }
    if (!rc) {
        tk_lab_profile_print(stdout, &c, p, n);
        FILE *jf = o->json ? fopen(o->json, "w") : NULL;
        if (o->json && (!jf || tk_lab_profile_write_json(jf, &c, p, n) | fclose(jf))) {
            fprintf(stderr, "tilekit profile: cannot write %s: %s\n", o->json, strerror(errno));
            rc = 1;
        }
    }
    free(p);
    return rc;
}

/* info: the device, the table and the resources; --json writes them too.
 * No GPU is no failure: the table is printed all the same. */
static int cmd_info(const opts *o)
{
    FILE *jf = NULL;
    if (o->json && !(jf = fopen(o->json, "w"))) {
        fprintf(stderr, "tilekit info: cannot write %s: %s\n", o->json, strerror(errno));
        return 1;
    }
    int rc = tk_lab_info(stdout, o->kernels, jf);
    if (jf && (ferror(jf) | fclose(jf))) {
        fprintf(stderr, "tilekit info: cannot write %s: %s\n", o->json, strerror(errno));
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage, stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tilekit %d.%d.%d\n", TILEKIT_VERSION_MAJOR, TILEKIT_VERSION_MINOR, TILEKIT_VERSION_PATCH);
        return 0;
    }
    opts o = { 0 };
    o.cmd = argv[1];
    o.c = (tk_lab_case){ TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 0, 0, 0, 1.0f, 0.0f, TK_F32, 1, 0, 0 };
    tk_lab_fuzz_defaults(&o.fuzz);
    o.plant_row = -1;
    o.dtype_a = o.dtype_b = -1;
    if (strcmp(o.cmd, "bench") && strcmp(o.cmd, "verify") && strcmp(o.cmd, "info") && strcmp(o.cmd, "tune") &&
        strcmp(o.cmd, "fuzz") && strcmp(o.cmd, "profile") && strcmp(o.cmd, "launch")) {
        fprintf(stderr, "tilekit: unknown command '%s'\n%s", o.cmd, usage);
        return 2;
    }
    if (parse_args(argc, argv, &o))
        return 2;
    if (!strcmp(o.cmd, "info"))
        return cmd_info(&o);
    int rc = !strcmp(o.cmd, "verify")    ? cmd_verify(&o)
             : !strcmp(o.cmd, "tune")    ? cmd_tune(&o)
             : !strcmp(o.cmd, "fuzz")    ? cmd_fuzz(&o)
             : !strcmp(o.cmd, "profile") ? cmd_profile(&o)
             : !strcmp(o.cmd, "launch")  ? cmd_launch(&o)
                                         : cmd_bench(&o);
    free(o.suite_shapes);
    free(o.gspec);
    free(o.sizes);
    return rc;
}
