/* test_lab_cli.c - the CLI rejects bad arguments with a message and exit 2
 * before it touches a GPU, so this runs on CPU-only machines. The CLI is
 * the build's tilekit, found beside this test's directory. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lib/kernel.h"
#include "check.h"

static char cli[PATH_MAX];

/* Runs the shell command cmd, returns its exit status; its output goes to
 * out. */
static int run_cmd(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs `cli args` in directory dir. */
static int run_in(const char *dir, const char *args, char *out, size_t len)
{
    char cmd[2 * PATH_MAX + 512];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>&1", dir, cli, args);
    return run_cmd(cmd, out, len);
}

static int run(const char *args, char *out, size_t len) { return run_in(".", args, out, len); }

/* Expects exit 2 (bad arguments, before any GPU work: without a GPU that
 * work would end in exit 1) and a message containing `says`. */
static void expect_exit_2(const char *dir, const char *args, const char *says)
{
    char out[4096];
    int rc = run_in(dir, args, out, sizeof out);
    CHECK(rc == 2, "'tilekit %s' exited %d (expected 2): %s", args, rc, out);
    CHECK(strstr(out, says) != NULL, "'tilekit %s' does not mention '%s': %s", args, says, out);
}

static void test_bad_arguments_exit_2(void)
{
    static const struct { const char *args, *says; } cases[] = {
        { "", "usage" },
        { "frobnicate", "unknown command" },
        { "bench --frob", "--frob" },
        { "bench --m abc", "--m" },
        { "bench --m -5", "--m" },
        { "verify --n 0", "--n" },
        { "verify --k 1.5", "--k" },
        { "verify --m 99999999999", "--m" },
        { "bench --kernel no_such_kernel", "no_such_kernel" },
        { "verify --kernel cublas,nope", "nope" },
        { "bench --layout diag", "--layout" },
        { "bench --op-a x", "--op-a" },
        { "bench --op-b N", "--op-b" },
        { "verify --out fp16", "--out" },
        { "verify --alpha nan", "--alpha" },
        { "verify --beta 1e999", "--beta" },
        { "verify --seed -1", "--seed" },
        { "bench --shapes 1x2", "--shapes" },
        { "bench --shapes 4x4x0", "--shapes" },
        { "bench --m 64 --shapes 8x8x8", "either" },
        { "bench --json", "missing value" },
        { "bench --budget 0", "--budget" },
        { "bench --hot=1", "--hot" },
        { "verify --hot", "--hot" },
        { "verify --csv x.csv", "--csv" },
        { "info --m 64", "--m" },
        { "verify --pad=1", "takes no value" },
        { "bench --pad=1", "takes no value" },
        { "info --pad", "--pad" },
        { "bench --suite nope", "suite 'nope'" },
        { "bench --suite", "missing value" },
        { "bench --suite odd --m 5", "--m" },
        { "bench --suite odd --shapes 8x8x8", "--shapes" },
        { "bench --op-a t --suite llm", "--op-a" },
        { "bench --suite llm --op-b n", "--op-b" },
        { "bench --suite square --no-cublas", "--no-cublas" },
        { "bench --suite /no/such/dir/x.txt", "/no/such/dir/x.txt: cannot open" },
        { "verify --suite odd", "unknown option" },
        { "info --suite odd", "--suite" },
        { "tune", "--suite NAME|FILE is required" },
        { "tune --suite odd --kernel k31_wgmma_cluster", "--kernel" },
        { "tune --suite odd --m 64", "--m" },
        { "tune --suite odd --out fp16", "--out" },
        { "tune --suite nope", "suite 'nope'" },
        { "tune --suite odd --file", "missing value" },
        { "bench --file x.txt", "--file" },
        { "verify --no-cublas=1", "takes no value" },
        { "info --no-cublas", "--no-cublas" },
        { "fuzz --cases 0", "--cases" },
        { "fuzz --cases x", "--cases" },
        { "fuzz --budget -1", "--budget" },
        { "fuzz --cases 5 --budget 3", "one or the other" },
        { "fuzz --case -1", "--case" },
        { "fuzz --case 3 --cases 4", "--case replays one case" },
        { "fuzz --budget 9 --case 4", "--case replays one case" },
        { "fuzz --kernel cublas", "cublas" },
        { "fuzz --kernel auto,nope", "nope" },
        { "fuzz --max-size 0", "--max-size" },
        { "fuzz --max-size 6001", "--max-size" },
        { "fuzz --max-volume 0", "--max-volume" },
        { "fuzz --seed x", "--seed" },
        { "fuzz --m 64", "--m" },
        { "fuzz --pad", "--pad" },
        { "fuzz --json", "missing value" },
        { "fuzz --json /no/such/dir/f.json", "--json: cannot create '/no/such/dir/f.json'" },
        { "verify --cases 5", "--cases" },
        { "bench --max-size 5", "--max-size" },
        { "profile", "--kernel NAME is required" },
        { "profile --kernel all", "one kernel" },
        { "profile --kernel k31_wgmma_cluster,cublas", "one kernel" },
        { "profile --kernel nope", "nope" },
        { "profile --kernel cublas --vs nope", "--vs: unknown kernel 'nope'" },
        { "profile --kernel cublas --vs", "missing value" },
        { "profile --kernel cublas --shapes 8x8x8,16x16x16", "--shapes: profile takes one problem" },
        { "profile --kernel cublas --hot", "--hot" },
        { "profile --kernel cublas --png x.png", "--png" },
        { "profile --kernel cublas --json /nonexistent/dir/p.json", "--json: cannot create" },
        { "profile --kernel cublas --calls 2", "--calls" },
        { "launch", "--kernel NAME is required" },
        { "launch --kernel cublas --calls 0", "--calls" },
        { "launch --kernel cublas --calls 1001", "--calls" },
        { "launch --kernel cublas --vs k01_naive", "--vs" },
        { "launch --kernel cublas --json x.json", "--json" },
        { "verify --png x.png", "--png: draws one case" },
        { "verify --png x.png --kernel cublas --shapes 8x8x8,16x16x16", "--png: draws one case" },
        { "verify --png /nonexistent/dir/x.png --kernel cublas", "--png: cannot create" },
        { "bench --png x.png", "--png" },
        { "verify --plant 5", "--plant: '5' is not ROW,COL" },
        { "verify --plant a,1", "--plant (ROW)" },
        { "verify --plant 1,-1", "--plant (COL)" },
        { "verify --plant 100,0 --m 64 --n 64 --k 64", "--plant: (100, 0) is outside the 64 x 64 C" },
        { "verify --plant 0,64 --shapes 128x128x8,64x64x8", "outside the 64 x 64 C" },
        { "verify --smem-limit 0", "--smem-limit" },
        { "verify --smem-limit lots", "--smem-limit" },
        { "bench --smem-limit 1024", "--smem-limit" },
        /* many products in one call */
        { "verify --groups 8:4096:zipf", "--groups: '8:4096:zipf': 'zipf' is not balanced, skewed or empty" },
        { "bench --groups 0,,7", "--groups: '0,,7': size 2 is empty" },
        { "verify --groups 8:4096", "--groups: '8:4096' is not G:TOTAL:balanced|skewed|empty" },
        { "verify --groups 0,0", "--groups: '0,0': the sizes sum to 0" },
        { "verify --groups 2:64:empty", "--groups: '2:64:empty': empty needs G >= 4" },
        { "verify --groups 2000:64:balanced", "--groups: '2000:64:balanced': G 2000 is out of range" },
        { "verify --group-kind k", "--group-kind: needs --groups" },
        { "verify --groups 3,4 --group-kind diag", "--group-kind: 'diag' is not rows, k or masked" },
        { "verify --groups 3,4 --m 5", "--m: 5 is less than the groups' 7 rows" },
        { "verify --groups 3,4 --group-kind k --k 6", "--k: 6 is less than the groups' K 7" },
        { "verify --groups 3,4 --group-kind masked --m 3", "--m: 3 is less than the largest group's 4 rows" },
        { "bench --batch 0", "--batch: 0 is out of range (expected 1..65536)" },
        { "bench --batch 2 --groups 3", "--batch and --groups: give one or the other" },
        { "bench --stride-b 0", "--stride-b: needs --batch" },
        { "bench --batch 2 --stride-a 3", "--stride-a: '3' is not 0" },
        { "bench --vs-dense", "--vs-dense: needs --batch or --groups" },
        { "verify --batch 2 --vs-dense", "--vs-dense: unknown option for 'verify'" },
        { "verify --groups 3,4 --layout col", "--layout: col is for dense and --batch problems" },
        { "verify --groups 3,4 --shapes 8x8x8", "--groups: takes one problem" },
        { "verify --batch 2 --offset 1", "--offset: dense problems only" },
        { "verify --batch 2 --plant 0,0", "--plant: dense problems only" },
        { "verify --groups 3 --png x.png --kernel cublas", "--png: dense problems only" },
        { "bench --groups 3 --groups 4", "--groups: given twice" },
        { "bench --suite moe --batch 4", "--batch: --suite gives the shapes" },
        { "bench --groups 3 --suite moe", "--groups: --suite gives the shapes" },
        { "tune --suite moe", "a rows line: tune takes single products" },
        { "info --groups 3", "--groups: unknown option for 'info'" },
        { "fuzz --batch 3", "--batch: unknown option for 'fuzz'" },
        { "profile --kernel auto --groups 3", "--groups: unknown option for 'profile'" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_exit_2(".", cases[i].args, cases[i].says);
}

/* Hostile values: each refused with a message naming the option. */
static void test_hostile_values_exit_2(void)
{
    static const struct { const char *args, *says; } cases[] = {
        /* empty items in lists are refused, not skipped */
        { "bench --kernel ,", "--kernel: ',' has an empty item" },
        { "bench --kernel k01_naive,,cublas", "--kernel: 'k01_naive,,cublas' has an empty item" },
        { "verify --kernel k01_naive,", "--kernel: 'k01_naive,' has an empty item" },
        { "info --kernel ,k01_naive", "--kernel: ',k01_naive' has an empty item" },
        { "bench --kernel ''", "--kernel: '' has an empty item" },
        { "verify --kernel=", "--kernel: '' has an empty item" },
        { "bench --shapes 8x8x8,,16x16x16", "--shapes: '8x8x8,,16x16x16' has an empty item" },
        { "bench --shapes 8x8x8,", "--shapes: '8x8x8,' has an empty item" },
        { "info --kernel K01_NAIVE", "unknown kernel 'K01_NAIVE'" },
        { "bench --kernel 'k01_naive '", "unknown kernel 'k01_naive '" },
        { "bench --kernel auto,all", "unknown kernel 'all'" },
        /* an option given twice: the first would be silently dropped */
        { "bench --m 64 --m 128", "--m: given twice" },
        { "verify --kernel cublas --kernel k01_naive", "--kernel: given twice" },
        { "bench --hot --hot", "--hot: given twice" },
        { "verify --out=bf16 --out fp32", "--out: given twice" },
        { "tune --suite odd --suite llm", "--suite: given twice" },
        /* a missing value, also where the next argument is another option */
        { "bench --m", "--m: missing value" },
        { "bench --json --csv x.csv", "--json: missing value (got the option '--csv'" },
        { "verify --kernel --m 64", "--kernel: missing value" },
        { "bench --seed", "--seed: missing value" },
        /* numbers: not numbers, out of range, not finite */
        { "bench --m -1", "--m: -1 is out of range" },
        { "bench --m 99999999999999999999", "--m: 99999999999999999999 is out of range" },
        { "bench --n 16777217", "--n: 16777217 is out of range" },
        { "bench --k ''", "--k: '' is not an integer" },
        { "bench --k 0x40", "--k: '0x40' is not an integer" },
        { "bench --budget nan", "--budget: 'nan' is not a finite number" },
        { "bench --budget inf", "--budget: 'inf' is not a finite number" },
        { "bench --budget -1", "--budget: -1 must be > 0" },
        { "tune --suite odd --budget 0", "--budget: 0 must be > 0" },
        { "verify --seed garbage", "--seed: 'garbage' is not a non-negative integer" },
        { "verify --seed ' -1'", "--seed: ' -1' is not a non-negative integer" },
        { "verify --seed 18446744073709551616", "--seed: '18446744073709551616'" },
        { "verify --offset 8", "--offset: '8' is not an integer in 0..7" },
        { "verify --offset -1", "--offset: '-1'" },
        { "verify --alpha 1e39", "--alpha: 1e39 is out of the float range" },
        { "verify --beta -1e39", "--beta: -1e39 is out of the float range" },
        { "verify --alpha ''", "--alpha: '' is not a finite number" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_exit_2(".", cases[i].args, cases[i].says);
}

/* Output files are checked before any GPU work, not after the run. */
static void test_unwritable_output_exit_2(void)
{
    static const struct { const char *args, *says; } cases[] = {
        { "bench --json /nonexistent/dir/x.json", "--json: cannot create '/nonexistent/dir/x.json'" },
        { "verify --json /nonexistent/dir/x.json", "--json: cannot create" },
        { "bench --csv /nonexistent/dir/x.csv", "--csv: cannot create '/nonexistent/dir/x.csv'" },
        { "bench --json /tmp", "--json: '/tmp' is a directory" },
        { "bench --csv=/", "--csv: '/' is a directory" },
        { "bench --json ''", "--json: cannot create ''" },
        { "tune --suite odd --file /nonexistent/dir/t.txt", "--file: cannot create '/nonexistent/dir/t.txt'" },
        { "tune --suite odd --file /tmp", "--file: '/tmp' is a directory" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_exit_2(".", cases[i].args, cases[i].says);
    /* tune's default file, in a directory nobody (not even root) can create files in */
    expect_exit_2("/proc", "tune --suite odd", "--file: cannot create 'tilekit-tune.txt'");
}

/* A new file made from the template path (mkstemps: XXXXXX, then suffix
 * characters) holding text. 0, or -1 after a failed check. */
static int temp_file(char *path, int suffix, const char *text)
{
    int fd = mkstemps(path, suffix);
    CHECK(fd >= 0, "mkstemps %s failed", path);
    if (fd < 0)
        return -1;
    const ssize_t n = (ssize_t)strlen(text);
    CHECK(write(fd, text, (size_t)n) == n, "write to %s failed", path);
    close(fd);
    return 0;
}

/* The check of an output file leaves no trace: a new file is removed again
 * and an existing one keeps its contents (here the run stops at --m abc). */
static void test_output_check_leaves_files_alone(void)
{
    char path[] = "/tmp/tk_cli_out_XXXXXX", args[128];
    static const char text[] = "earlier results\n";
    if (temp_file(path, 0, text))
        return;
    snprintf(args, sizeof args, "bench --json %s --m abc", path);
    expect_exit_2(".", args, "--m: 'abc' is not an integer");
    char got[64] = "";
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
    got[n] = '\0';
    if (f)
        fclose(f);
    CHECK(!strcmp(got, text), "%s changed by the check: '%s'", path, got);
    unlink(path);
    snprintf(args, sizeof args, "bench --csv %s --m abc", path);
    expect_exit_2(".", args, "--m: 'abc' is not an integer");
    CHECK(access(path, F_OK) != 0, "%s left behind by the check", path);
    unlink(path);
}

/* A suite's masked line whose groups (skewed: in --seed's order) have more
 * rows than its M: exit 2 before any GPU work, naming the line. */
static void test_masked_suite_line_exit_2(void)
{
    char path[] = "/tmp/tk_cli_masked_XXXXXX.txt", args[128], out[4096];
    if (temp_file(path, 4, "masked 4:40:balanced 10 8 8 n n\nmasked 8:400:skewed 100 8 8 n t\n"))
        return;
    snprintf(args, sizeof args, "bench --suite %s", path);
    int rc = run(args, out, sizeof out);
    CHECK(rc == 2 && strstr(out, ".txt:2: masked: group") && strstr(out, "rows, more than M 100"),
          "'tilekit %s' exited %d: %s", args, rc, out);
    unlink(path);
}

/* A suite file with a bad line ends the CLI with exit 2 and the file:line
 * message before any GPU work (this machine may have none). */
static void test_bad_suite_file_exit_2(void)
{
    char path[] = "/tmp/tk_cli_suite_XXXXXX", args[64], out[4096], want[64];
    if (temp_file(path, 0, "# fine\n128 128 128 n n\n4096 x 4096\n"))
        return;
    snprintf(args, sizeof args, "bench --suite %s", path);
    snprintf(want, sizeof want, "%s:3: 'M N K opA opB' expected, got '4096 x 4096'", path);
    int rc = run(args, out, sizeof out);
    CHECK(rc == 2 && strstr(out, want), "'tilekit %s' exited %d (expected 2 and '%s'): %s", args, rc, want, out);
    unlink(path);
}

static void test_help_exits_0(void)
{
    static const char *const args[] = { "--help", "bench --help", "verify --help", "info --help",
                                         "bench --m 64 --help", "tune --help", "fuzz --help", "profile --help",
                                         "launch --help" };
    static char out[1 << 14];
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        int rc = run(args[i], out, sizeof out);
        CHECK(rc == 0 && strstr(out, "usage") != NULL, "'tilekit %s' exited %d: %s", args[i], rc, out);
    }
    int rc = run("verify --help", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "--pad") != NULL, "'tilekit verify --help' does not document --pad: %s", out);
    rc = run("bench --help", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "--suite") != NULL, "'tilekit bench --help' does not document --suite: %s", out);
    rc = run("--help", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "fuzz") != NULL, "'tilekit --help' does not list fuzz: %s", out);
    rc = run("verify --help", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "--png FILE") && strstr(out, "--plant ROW,COL") && strstr(out, "--smem-limit"),
          "'tilekit verify --help' does not document --png, --plant and --smem-limit: %s", out);
    rc = run("profile --help", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "--vs NAME") && strstr(out, "NCU"), "'tilekit profile --help': %s", out);
    rc = run("--help", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "profile") && strstr(out, "launch"), "'tilekit --help' lacks profile, launch: %s",
          out);
    for (int v = 0; v < 2; v++) {
        rc = run(v ? "verify --help" : "bench --help", out, sizeof out);
        CHECK(rc == 0 && strstr(out, "--batch N") && strstr(out, "--groups SPEC") && strstr(out, "--group-kind") &&
                  strstr(out, "--stride-a 0") && (v || strstr(out, "--vs-dense")),
              "'tilekit %s --help' does not document the grouped options: %s", v ? "verify" : "bench", out);
    }
    rc = run("fuzz --help", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "--case I") && strstr(out, "--budget") && strstr(out, "--max-size"),
          "'tilekit fuzz --help' does not document --case, --budget and --max-size: %s", out);
}

/* FP8 operands (--dtype, --dtype-b, --scale, --exact): bad words, options
 * without --dtype, options that do not apply to FP8 cases or to the
 * command, block scales at a K that is not a multiple of 128, --exact
 * where the sums would not be exact, suites of grouped lines, and the
 * fuzz's narrowing options and FP8 replays. */
static void test_fp8_arguments_exit_2(void)
{
    static const struct { const char *args, *says; } cases[] = {
        { "verify --dtype fp16", "--dtype: 'fp16' is not e4m3 or e5m2" },
        { "bench --dtype E4M3", "--dtype: 'E4M3' is not e4m3 or e5m2" },
        { "verify --dtype e4m3 --dtype-b fp8", "--dtype-b: 'fp8' is not e4m3 or e5m2" },
        { "verify --dtype e4m3 --scale rows", "--scale: 'rows' is not tensor, row or block" },
        { "verify --dtype e4m3 --dtype e5m2", "--dtype: given twice" },
        { "verify --scale row", "--scale: needs --dtype" },
        { "bench --dtype-b e5m2", "--dtype-b: needs --dtype" },
        { "verify --exact", "--exact: needs --dtype" },
        { "bench --dtype e4m3 --exact", "--exact: unknown option for 'bench'" },
        { "verify --dtype e4m3 --exact --beta 0.5", "--exact: needs --beta 0 and --alpha a power of two" },
        { "verify --dtype e4m3 --exact --alpha 0.75", "--exact: needs --beta 0 and --alpha a power of two" },
        { "verify --dtype e4m3 --exact --m 64 --n 64 --k 4097", "--exact: K 4097 of 64x64x4097 is over 4096" },
        { "verify --dtype e4m3 --scale block --shapes 64x64x128,64x64x200",
          "--scale block: K 200 of 64x64x200 is not a multiple of 128" },
        { "bench --dtype e5m2 --scale block --m 64 --n 64 --k 100", "--scale block: K 100" },
        { "verify --dtype e4m3", "--dtype: 8192x8192x8192 is over 2^33 multiply-adds" },
        { "verify --dtype e5m2 --shapes 64x64x64,4096x4096x1024", "--dtype: 4096x4096x1024 is over 2^33" },
        { "verify --dtype e4m3 --batch 2", "--dtype: one product only (not with --batch" },
        { "bench --dtype e4m3 --groups 3,4", "--dtype: one product only (not with --groups" },
        { "verify --dtype e4m3 --epilogue bias_act", "--dtype: not with --epilogue" },
        { "verify --dtype e4m3 --act relu", "--act: needs --epilogue" },
        { "verify --dtype e4m3 --offset 1", "--offset: bf16 problems only (not with --dtype)" },
        { "verify --dtype e4m3 --kernel auto --png x.png", "--png: bf16 problems only" },
        { "verify --dtype e4m3 --plant 0,0", "--plant: bf16 problems only" },
        { "verify --dtype e4m3 --smem-limit 1024", "--smem-limit: bf16 problems only" },
        { "bench --dtype e4m3 --suite moe", "moe.txt:39: a rows line: --dtype takes single products" },
        { "bench --dtype e4m3 --suite llm --op-b n", "--op-b: --suite gives the shapes" },
        { "profile --kernel auto --dtype e4m3", "--dtype: unknown option for 'profile'" },
        { "launch --kernel auto --dtype e4m3", "--dtype: unknown option for 'launch'" },
        { "tune --suite odd --dtype e4m3", "--dtype: unknown option for 'tune'" },
        { "info --scale row", "--scale: unknown option for 'info'" },
        { "fuzz --scale row", "--scale: needs --dtype e4m3|e5m2 or fp8 in --forms" },
        { "fuzz --forms fp8 --dtype-b e5m2", "--dtype-b: needs --dtype (A's format)" },
        { "fuzz --dtype e4m3 --exact", "--exact: unknown option for 'fuzz'" },
        { "fuzz --forms dense,fp16",
          "--forms: 'fp16' in 'dense,fp16' is not dense, batched, grouped, epilogue or fp8" },
        { "fuzz --case f3", "--case f3 replays an FP8 case: add --forms ...,fp8 or --dtype" },
        { "fuzz --case fx --dtype e4m3", "--case (after f): 'x' is not an integer" },
        { "fuzz --dtype e4m3 --forms fp8 --case 3", "--case 3 replays a dense case" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_exit_2(".", cases[i].args, cases[i].says);
    static char out[1 << 14];
    for (int v = 0; v < 2; v++) {
        int rc = run(v ? "verify --help" : "bench --help", out, sizeof out);
        CHECK(rc == 0 && strstr(out, "--dtype e4m3|e5m2") && strstr(out, "--dtype-b e4m3|e5m2") &&
                  strstr(out, "--scale tensor|row|block") &&
                  (v ? strstr(out, "--exact") != NULL : strstr(out, "cuBLASLt") != NULL),
              "'tilekit %s --help' does not document the FP8 options: %s", v ? "verify" : "bench", out);
    }
    int rc = run("fuzz --help", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "--dtype e4m3|e5m2") && strstr(out, "--case fI"),
          "'tilekit fuzz --help' does not document the FP8 cases: %s", out);
}

/* A valid fuzz run: without a GPU it exits 1 naming the missing device (no
 * crash, no summary of cases that never ran); with one, a few small cases
 * pass and the summary line closes the output. */
static void test_fuzz_without_gpu_fails_cleanly(void)
{
    char out[8192];
    int rc = run("fuzz --cases 2 --max-size 16 --kernel auto", out, sizeof out);
    if (rc == 0) {
        CHECK(strstr(out, "fuzz: seed 1, 2 cases") != NULL, "a passing fuzz run without its summary line: %s", out);
        return;
    }
    CHECK(rc == 1 && strstr(out, "TK_ERR_NO_DEVICE") != NULL, "'tilekit fuzz' without a GPU exited %d: %s", rc, out);
}

/* ---- info: the table without a GPU, --json, the columns ---- */

/* Checks one table of `tilekit info` in out: its header is the first line
 * that starts with `first` and contains `then`; in each row after it (up
 * to a blank line) the first field, the kernel or family name, ends before
 * the header's second column starts, so long names do not push the figures
 * out of their columns. Returns the rows seen, -1 without such a table. */
static int check_columns(const char *out, const char *first, const char *then)
{
    const char *h = out;
    for (; h && *h; h = strchr(h, '\n') ? strchr(h, '\n') + 1 : NULL) {
        const char *eol = strchr(h, '\n'), *t = strstr(h, then);
        if (!strncmp(h, first, strlen(first)) && t && (!eol || t < eol))
            break;
    }
    if (!h || !*h)
        return -1;
    const char *second = h + strcspn(h, " ");
    second += strspn(second, " ");
    size_t col = (size_t)(second - h);
    int rows = 0;
    for (const char *line = strchr(h, '\n'); line && line[1] && line[1] != '\n'; line = strchr(line + 1, '\n')) {
        const char *row = line + 1;
        size_t name = strcspn(row, " \n");
        CHECK(name < col, "'%.*s' runs into the next column (at %zu) of the table '%s ... %s'", (int)name, row, col,
              first, then);
        rows++;
    }
    return rows;
}

/* Issue 37: without a GPU `info` exited 1 after printing the registry; the
 * table is what was asked, so it exits 0 and lists every kernel, the
 * longest names within their column (they were printed %-20s). */
static void test_info_without_gpu_exits_0(void)
{
    static char out[1 << 16];
    int rc = run("info", out, sizeof out);
    int gpu = strstr(out, "no usable CUDA device") == NULL;
    CHECK(rc == 0, "'tilekit info' exited %d%s: %.400s", rc, gpu ? " on a GPU" : " without a GPU", out);
    int n = tk_registry_count();
    CHECK(strstr(out, tk_registry_at(n - 1)->name) != NULL, "info lacks the last kernel %s", tk_registry_at(n - 1)->name);
    int rows = check_columns(out, "family ", "min_sm");
    CHECK(rows == tk_family_count(), "the families table: %d rows", rows);
    rows = check_columns(out, "kernel ", "family");
    CHECK(rows == n, "the kernel table: %d rows for %d kernels", rows, n);
    rows = check_columns(out, "kernel ", "regs");
    CHECK(gpu ? rows == n : rows == -1, "the resource table: %d rows (%s GPU)", rows, gpu ? "a" : "no");
}

/* info --json FILE: one JSON document (checked by python3's json module)
 * with the device (null and device_error without one), the families, every
 * configuration with its table fields, and the resources ([] without a
 * GPU); --kernel narrows the configurations and resources. */
static void test_info_json(void)
{
    char dir[] = "/tmp/tk_cli_info_XXXXXX", path[PATH_MAX], args[PATH_MAX + 64], cmd[2 * PATH_MAX + 256];
    static char out[1 << 16];
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    snprintf(path, sizeof path, "%s/info.json", dir);
    snprintf(args, sizeof args, "info --json %s", path);
    int rc = run(args, out, sizeof out);
    CHECK(rc == 0, "'tilekit %s' exited %d: %.400s", args, rc, out);
    /* valid JSON, with the fields of every configuration */
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json, sys\n"
             "d = json.load(open(sys.argv[1]))\n"
             "keys = {\"name\", \"family\", \"min_sm\", \"bm\", \"bn\", \"bk\", \"swap\", \"auto_rank\", \"description\"}\n"
             "assert d[\"tool\"] == \"tilekit info\" and all(set(k) == keys for k in d[\"kernels\"]), d\n"
             "assert all({\"name\", \"min_sm\", \"accepts\", \"description\"} <= set(f) for f in d[\"families\"])\n"
             "assert (d[\"device\"] is None) == (d[\"resources\"] == []) and (d[\"device\"] or d[\"device_error\"])\n"
             "print(len(d[\"kernels\"]), len(d[\"families\"]), d[\"kernels\"][-1][\"name\"], len(d[\"resources\"]))' '%s' 2>&1",
             path);
    char got[4096], want[256];
    int prc = run_cmd(cmd, got, sizeof got);
    int n = tk_registry_count();
    int gpu = strstr(out, "no usable CUDA device") == NULL;
    snprintf(want, sizeof want, "%d %d %s %d\n", n, tk_family_count(), tk_registry_at(n - 1)->name, gpu ? n : 0);
    CHECK(prc == 0 && !strcmp(got, want), "info --json: python3 says (exit %d) '%s', expected '%s'", prc, got, want);
    /* one kernel */
    snprintf(args, sizeof args, "info --kernel k01_naive --json %s", path);
    rc = run(args, out, sizeof out);
    prc = run_cmd(cmd, got, sizeof got);
    snprintf(want, sizeof want, "1 %d k01_naive %d\n", tk_family_count(), gpu ? 1 : 0);
    CHECK(rc == 0 && prc == 0 && !strcmp(got, want), "info --kernel k01_naive --json: exit %d, '%s'", rc, got);
    unlink(path);
    rmdir(dir);
    expect_exit_2(".", "info --json /nonexistent/dir/i.json", "--json: cannot create '/nonexistent/dir/i.json'");
    expect_exit_2(".", "info --json", "--json: missing value");
    expect_exit_2(".", "info --csv x.csv", "--csv");
}

/* ---- profile: ncu missing, refused, failing, and a fake ncu replaying saved output ---- */

/* Runs `env ENV cli args` (ENV: variable settings, -u NAME to unset). */
static int run_env(const char *env, const char *args, char *out, size_t len)
{
    char cmd[4 * PATH_MAX + 1024];
    snprintf(cmd, sizeof cmd, "env %s '%s' %s 2>&1", env, cli, args);
    return run_cmd(cmd, out, len);
}

/* Writes an executable shell script `dir/name` with the given body. */
static int write_script(const char *dir, const char *name, const char *body)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "#!/bin/sh\n%s", body);
    fclose(f);
    return chmod(path, 0755);
}

static void test_profile_without_ncu(void)
{
    char out[8192], empty[] = "/tmp/tk_cli_empty_XXXXXX";
    if (!mkdtemp(empty)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    char env[PATH_MAX + 64];
    /* not on PATH, NCU unset */
    snprintf(env, sizeof env, "-u NCU PATH=%s", empty);
    int rc = run_env(env, "profile --kernel k31_wgmma_cluster --vs cublas --m 4096 --n 4096 --k 4096", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "ncu was not found") && strstr(out, "PATH") && strstr(out, "NCU=/path/to/ncu"),
          "no ncu: exit %d: %s", rc, out);
    /* NCU naming nothing, or a directory */
    rc = run_env("NCU=/nonexistent/ncu", "profile --kernel cublas", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "NCU is '/nonexistent/ncu', which is not an executable file"), "bad NCU: %d: %s",
          rc, out);
    snprintf(env, sizeof env, "NCU=%s", empty);
    rc = run_env(env, "profile --kernel cublas", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "not an executable file"), "NCU a directory: %d: %s", rc, out);
    /* an `ncu` on PATH that is not executable does not count */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/ncu", empty);
    FILE *f = fopen(path, "w");
    if (f)
        fclose(f);
    snprintf(env, sizeof env, "-u NCU PATH=%s", empty);
    rc = run_env(env, "profile --kernel cublas", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "ncu was not found"), "non-executable ncu on PATH: %d: %s", rc, out);
    unlink(path);
    rmdir(empty);
}

/* Fake ncu scripts: refusals of the counters, a profiled nothing, and
 * saved H100 output (the fixtures) with the launch line before it. */
static void test_profile_with_fake_ncu(void)
{
    char dir[] = "/tmp/tk_cli_ncu_XXXXXX", fixtures[PATH_MAX], body[4 * PATH_MAX], env[2 * PATH_MAX], out[16384];
    if (!mkdtemp(dir) || !realpath("tests/host/fixtures", fixtures)) {
        CHECK(0, "mkdtemp or the fixtures (run from the repository root) failed");
        return;
    }
    snprintf(env, sizeof env, "-u NCU PATH=%s:/usr/bin:/bin", dir);
    /* no permission to read the counters: exit 2 with the fix */
    write_script(dir, "ncu", "echo '==PROF== Connected to process 1'\n"
                             "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA "
                             "GPU Performance Counters on the target device 0.'\nexit 1\n");
    int rc = run_env(env, "profile --kernel k31_wgmma_cluster", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "ERR_NVGPUCTRPERM - The user does not have permission") &&
              strstr(out, "NVreg_RestrictProfilingToAdminUsers=0") && strstr(out, "sudo"),
          "permission: exit %d: %s", rc, out);
    write_script(dir, "ncu", "echo '==ERROR== Failed to initialize the profiler: LibraryNotLoaded'\nexit 1\n");
    rc = run_env(env, "profile --kernel k31_wgmma_cluster", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "could not start profiling") && strstr(out, "LibraryNotLoaded"),
          "library not loaded: exit %d: %s", rc, out);
    /* ncu ran, the launch refused the problem: exit 1 with the launch's words */
    write_script(dir, "ncu", "echo '==PROF== Connected to process 1'\n"
                             "echo 'tilekit launch: k10_4w_128x128_k32: op_b N is not supported' >&2\n"
                             "echo '==PROF== Disconnected from process 1'\n"
                             "echo '==WARNING== No kernels were profiled.'\nexit 1\n");
    rc = run_env(env, "profile --kernel k10_4w_128x128_k32", out, sizeof out);
    CHECK(rc == 1 && strstr(out, "op_b N is not supported") && strstr(out, "No kernels were profiled"),
          "nothing profiled: exit %d: %s", rc, out);
    /* saved output: the screen, the JSON, and what ncu was asked to run */
    snprintf(body, sizeof body,
             "echo \"$@\" > %s/args\n"
             "case \"$*\" in\n"
             "  *k11*) f=ncu_k11_4w_128x128_kunroll4.csv; r=204 ;;\n"
             "  *k10*) f=ncu_k10_4w_128x128_k32.csv; r=198 ;;\n"
             "  *k31*) f=ncu_k31_wgmma_cluster.csv; r=168 ;;\n"
             "  *) f=ncu_cublas.csv; r=-1 ;;\n"
             "esac\n"
             "echo \"tilekit launch: kernel x regs $r local_bytes 0 static_smem 0 dyn_smem 0 threads 128 "
             "blocks_per_sm 2 occupancy 12.5 ran saved\"\n"
             "cat %s/$f\n",
             dir, fixtures);
    write_script(dir, "ncu", body);
    char json[64], args[4096];
    snprintf(json, sizeof json, "%s/p.json", dir);
    snprintf(args, sizeof args, "profile --kernel k10_4w_128x128_k32 --vs k11_4w_128x128_kunroll4 --m 2048 --n 2048 "
                                "--k 2048 --op-b t --json %s", json);
    rc = run_env(env, args, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "k10_kernel") && strstr(out, "k11_kernel") && strstr(out, "16.00 (ideal") &&
              strstr(out, "registers, shared memory: 2/SM") && strstr(out, "0 B"),
          "saved k10 vs k11: exit %d: %s", rc, out);
    char got[8192] = "";
    snprintf(body, sizeof body, "%s/args", dir);
    FILE *f = fopen(body, "r");
    size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
    got[n] = '\0';
    if (f)
        fclose(f);
    static const char *const asked[] = { "--csv", "--page raw", "--print-units base", "--clock-control none",
                                         "--profile-from-start off",
                                         "gpu__time_duration.sum,", "launch --kernel k11_4w_128x128_kunroll4",
                                         "--m 2048 --n 2048 --k 2048", "--op-b t", "--seed 1" };
    for (size_t i = 0; i < sizeof asked / sizeof asked[0]; i++)
        CHECK(strstr(got, asked[i]) != NULL, "ncu was not given '%s': %s", asked[i], got);
    f = fopen(json, "r");
    n = f ? fread(got, 1, sizeof got - 1, f) : 0;
    got[n] = '\0';
    if (f)
        fclose(f);
    CHECK(strstr(got, "\"tool\":\"tilekit profile\"") && strstr(got, "\"kernel\":\"k11_4w_128x128_kunroll4\"") &&
              strstr(got, "\"tilekit\":{\"regs\":204"),
          "the JSON: %.600s", got);
    /* NCU instead of PATH, cuBLAS beside k31 */
    snprintf(env, sizeof env, "PATH=/usr/bin:/bin NCU=%s/ncu", dir);
    rc = run_env(env, "profile --kernel k31_wgmma_cluster --vs cublas --m 4096 --n 4096 --k 4096", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "k31_kernel<0, 1>") && strstr(out, "nvjet_sm90") && strstr(out, "barrier 8.58") &&
              strstr(out, "- (a library's kernel)"),
          "saved k31 vs cublas: exit %d: %s", rc, out);
    unlink(json);
    unlink(body);
    snprintf(body, sizeof body, "%s/ncu", dir);
    unlink(body);
    rmdir(dir);
}

void tk_tests(void)
{
    /* this test is BUILD/tests/test_lab_cli; the CLI is BUILD/tilekit */
    ssize_t n = readlink("/proc/self/exe", cli, sizeof cli - 16);
    if (n > 0) {
        cli[n] = '\0';
        char *slash = strrchr(cli, '/');
        if (slash)
            strcpy(slash, "/../tilekit");
    }
    /* a missing CLI shows up as exit 127 in every case */
    TK_TEST(test_bad_arguments_exit_2);
    TK_TEST(test_hostile_values_exit_2);
    TK_TEST(test_unwritable_output_exit_2);
    TK_TEST(test_output_check_leaves_files_alone);
    TK_TEST(test_bad_suite_file_exit_2);
    TK_TEST(test_masked_suite_line_exit_2);
    TK_TEST(test_help_exits_0);
    TK_TEST(test_fp8_arguments_exit_2);
    TK_TEST(test_fuzz_without_gpu_fails_cleanly);
    TK_TEST(test_info_without_gpu_exits_0);
    TK_TEST(test_info_json);
    TK_TEST(test_profile_without_ncu);
    TK_TEST(test_profile_with_fake_ncu);
}
