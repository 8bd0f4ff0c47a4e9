/* test_lab_cli.c - the CLI rejects bad arguments with a message and exit 2
 * before it touches a GPU, so this runs on CPU-only machines. The CLI is
 * the build's tilekit, found beside this test's directory. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static char cli[PATH_MAX];

/* Runs `cli args`, returns its exit status; its output goes to out. */
static int run(const char *args, char *out, size_t len)
{
    char cmd[PATH_MAX + 512];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", cli, args);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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
        { "fuzz --json /no/such/dir/f.json", "--json: cannot write /no/such/dir/f.json" },
        { "verify --cases 5", "--cases" },
        { "bench --max-size 5", "--max-size" },
    };
    char out[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = run(cases[i].args, out, sizeof out);
        CHECK(rc == 2, "'tilekit %s' exited %d (expected 2): %s", cases[i].args, rc, out);
        CHECK(strstr(out, cases[i].says) != NULL, "'tilekit %s' does not mention '%s': %s", cases[i].args,
              cases[i].says, out);
    }
}

/* A suite file with a bad line ends the CLI with exit 2 and the file:line
 * message before any GPU work (this machine may have none). */
static void test_bad_suite_file_exit_2(void)
{
    char path[] = "/tmp/tk_cli_suite_XXXXXX", args[64], out[4096], want[64];
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp failed");
    if (fd < 0)
        return;
    static const char text[] = "# fine\n128 128 128 n n\n4096 x 4096\n";
    CHECK(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1), "write failed");
    close(fd);
    snprintf(args, sizeof args, "bench --suite %s", path);
    snprintf(want, sizeof want, "%s:3: 'M N K opA opB' expected, got '4096 x 4096'", path);
    int rc = run(args, out, sizeof out);
    CHECK(rc == 2 && strstr(out, want), "'tilekit %s' exited %d (expected 2 and '%s'): %s", args, rc, want, out);
    unlink(path);
}

static void test_help_exits_0(void)
{
    static const char *const args[] = { "--help", "bench --help", "verify --help", "info --help",
                                         "bench --m 64 --help", "tune --help", "fuzz --help" };
    char out[4096];
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
    rc = run("fuzz --help", out, sizeof out);
    CHECK(rc == 0 && strstr(out, "--case I") && strstr(out, "--budget") && strstr(out, "--max-size"),
          "'tilekit fuzz --help' does not document --case, --budget and --max-size: %s", out);
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
    TK_TEST(test_bad_suite_file_exit_2);
    TK_TEST(test_help_exits_0);
    TK_TEST(test_fuzz_without_gpu_fails_cleanly);
}
