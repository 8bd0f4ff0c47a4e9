/* test_tune.c - the tune cache's reader (tune.c) on the CPU: a good file
 * gives the kernel of each listed problem and nothing for others; a file
 * from another GPU (stale), a malformed one and a missing one are refused
 * whole with a message naming the cause and the line. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lib/internal.h"
#include "check.h"

static tk_device h100(void)
{
    tk_device d;
    memset(&d, 0, sizeof d);
    d.sm = 90;
    d.sm_count = 132;
    snprintf(d.name, sizeof d.name, "NVIDIA H100 80GB HBM3");
    return d;
}

static tk_args prob(int64_t m, int64_t n, int64_t k, tk_op oa, tk_op ob, tk_dtype ct)
{
    tk_args a;
    memset(&a, 0, sizeof a);
    a.m = m; a.n = n; a.k = k; a.op_a = oa; a.op_b = ob; a.c_type = ct;
    return a;
}

static const char *good =
    "# measured by tilekit tune\n"
    "tilekit-tune 1\n"
    "device 132 90 NVIDIA H100 80GB HBM3\n"
    "\n"
    "4096 4096 4096 n t fp32 k31_wgmma_cluster\n"
    "1 4096 4096 n t bf16 k33_wgmma_128x128\r\n"
    "1000 1000 1000 n n fp32 k34_wgmma_128x64   # a comment is not allowed here\n";

static void test_good(void)
{
    tk_device d = h100();
    tk_tune_entry *e = NULL;
    int n = 0;
    char why[TK_MSG_LEN] = "";
    /* the trailing comment makes line 7 have 8+ fields: malformed */
    CHECK(tk_tune_parse(good, &d, &e, &n, why, sizeof why) == -1 && strstr(why, "line 7"), "got '%s'", why);
    const char *ok = "tilekit-tune 1\ndevice 132 90 NVIDIA H100 80GB HBM3\n"
                     "4096 4096 4096 n t fp32 k31_wgmma_cluster\n"
                     "1 4096 4096 n t bf16 k33_wgmma_128x128\r\n"
                     "1000 1000 1000 n n fp32 k34_wgmma_128x64\n";
    CHECK(tk_tune_parse(ok, &d, &e, &n, why, sizeof why) == 0 && n == 3, "parse: %s (n %d)", why, n);
    tk_args a = prob(1, 4096, 4096, TK_OP_N, TK_OP_T, TK_BF16);
    const tk_kernel *k = tk_tune_find(e, n, &a);
    CHECK(k && !strcmp(k->name, "k33_wgmma_128x128"), "1x4096x4096 NT bf16 -> %s", k ? k->name : "(none)");
    a.c_type = TK_F32;
    CHECK(tk_tune_find(e, n, &a) == NULL, "the fp32 problem is not listed");
    a = prob(1000, 1000, 1000, TK_OP_N, TK_OP_N, TK_F32);
    k = tk_tune_find(e, n, &a);
    CHECK(k && !strcmp(k->name, "k34_wgmma_128x64"), "1000^3 -> %s", k ? k->name : "(none)");
    a.op_b = TK_OP_T;
    CHECK(tk_tune_find(e, n, &a) == NULL, "another op: not listed");
    a = prob(4096, 4096, 4096, TK_OP_N, TK_OP_T, TK_F32);
    k = tk_tune_find(e, n, &a);
    CHECK(k && !strcmp(k->name, "k31_wgmma_cluster"), "4096^3 NT -> %s", k ? k->name : "(none)");
    free(e);
}

static void expect_refused(const char *text, const tk_device *d, const char *needle)
{
    tk_tune_entry *e = (tk_tune_entry *)(uintptr_t)1;
    int n = 5;
    char why[TK_MSG_LEN] = "";
    int rc = tk_tune_parse(text, d, &e, &n, why, sizeof why);
    CHECK(rc == -1 && e == NULL && n == 0, "refused with nothing allocated (rc %d)", rc);
    CHECK(strstr(why, needle) != NULL, "message '%s' should contain '%s'", why, needle);
}

static void test_stale(void)
{
    tk_device d = h100();
    const char *body = "4096 4096 4096 n t fp32 k31_wgmma_cluster\n";
    char text[512];
    snprintf(text, sizeof text, "tilekit-tune 1\ndevice 114 90 NVIDIA H100 PCIe\n%s", body);
    expect_refused(text, &d, "stale: measured on '114 90 NVIDIA H100 PCIe'");
    snprintf(text, sizeof text, "tilekit-tune 1\ndevice 132 80 NVIDIA H100 80GB HBM3\n%s", body);
    expect_refused(text, &d, "stale");
    snprintf(text, sizeof text, "tilekit-tune 1\ndevice 132 90 NVIDIA H200\n%s", body);
    expect_refused(text, &d, "this GPU is NVIDIA H100 80GB HBM3 (sm_90, 132 SMs)");
}

static void test_malformed(void)
{
    tk_device d = h100();
    const char *hdr = "tilekit-tune 1\ndevice 132 90 NVIDIA H100 80GB HBM3\n";
    expect_refused("", &d, "empty");
    expect_refused("# only a comment\n", &d, "empty");
    expect_refused("tilekit-tune 2\n", &d, "line 1: expected 'tilekit-tune 1'");
    expect_refused("tilekit-tune 1\n", &d, "no 'device' line");
    expect_refused("tilekit-tune 1\ndevice x\n", &d, "line 2: expected 'device SMS SM NAME'");
    const struct { const char *line, *needle; } bad[] = {
        { "4096 4096 n t fp32 k31_wgmma_cluster\n", "line 3: expected 'M N K OPA OPB OUT KERNEL'" },
        { "0 4096 4096 n t fp32 k31_wgmma_cluster\n", "line 3: sizes must be at least 1" },
        { "4096 4096 4096 x t fp32 k31_wgmma_cluster\n", "line 3: ops must be n or t" },
        { "4096 4096 4096 n t fp16 k31_wgmma_cluster\n", "line 3: OUT must be fp32 or bf16" },
        { "4096 4096 4096 n t fp32 k99_nothing\n", "line 3: 'k99_nothing' is not a kernel" },
        { "4096 4096 4096 n t fp32 cublas\n", "line 3: 'cublas' is not a kernel auto-dispatch may run" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[512];
        snprintf(text, sizeof text, "%s%s", hdr, bad[i].line);
        expect_refused(text, &d, bad[i].needle);
    }
    char *big = malloc(2048);
    if (big) {
        snprintf(big, 2048, "%s", hdr);
        size_t l = strlen(big);
        memset(big + l, '9', 900);
        big[l + 900] = '\0';
        expect_refused(big, &d, "line 3: longer than 511 characters");
        free(big);
    }
}

static void test_files(void)
{
    tk_device d = h100();
    tk_tune_entry *e = NULL;
    int n = 0;
    char why[TK_MSG_LEN] = "";
    CHECK(tk_tune_load("/nonexistent/tilekit-tune.txt", &d, &e, &n, why, sizeof why) == -1 &&
              strstr(why, "cannot read /nonexistent/tilekit-tune.txt"),
          "missing file: '%s'", why);
    char path[] = "/tmp/tk_tune_testXXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "w");
    fputs("tilekit-tune 1\ndevice 132 90 NVIDIA H100 80GB HBM3\n512 512 512 n n bf16 k34_wgmma_128x64\n", f);
    fclose(f);
    CHECK(tk_tune_load(path, &d, &e, &n, why, sizeof why) == 0 && n == 1, "load: %s", why);
    tk_args a = prob(512, 512, 512, TK_OP_N, TK_OP_N, TK_BF16);
    CHECK(e && tk_tune_find(e, n, &a) == tk_registry_find("k34_wgmma_128x64"), "512^3 bf16 -> k34");
    free(e);
    unlink(path);
}

/* Issue 35, item 10: TILEKIT_TUNE naming a FIFO blocked tk_create until a
 * writer came; /dev/zero was read to the size limit (128 MB) before being
 * refused. Only regular files are opened for reading now. An alarm turns a
 * blocking open into a failure of this test instead of a hang. */
static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_special_files: tk_tune_load blocked on a FIFO\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

static void test_special_files(void)
{
    tk_device d = h100();
    tk_tune_entry *e = NULL;
    int n = 0;
    char why[TK_MSG_LEN] = "";
    char dir[] = "/tmp/tk_tune_fifoXXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char fifo[sizeof dir + 8];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    signal(SIGALRM, on_alarm);
    alarm(10);
    CHECK(tk_tune_load(fifo, &d, &e, &n, why, sizeof why) == -1 && strstr(why, "not a regular file") &&
              strstr(why, "FIFO"),
          "FIFO: '%s'", why);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(tk_tune_load("/dev/zero", &d, &e, &n, why, sizeof why) == -1 && strstr(why, "not a regular file"),
          "/dev/zero: '%s'", why);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    CHECK(s < 0.05, "/dev/zero took %.3f s to refuse (read before the check?)", s);
    CHECK(tk_tune_load("/tmp", &d, &e, &n, why, sizeof why) == -1 && strstr(why, "not a regular file"),
          "a directory: '%s'", why);
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    CHECK(e == NULL && n == 0, "nothing loaded");
    unlink(fifo);
    rmdir(dir);
}

/* Issue 37: tk_create printed a warning on stderr for an unusable
 * TILEKIT_TUNE file, though the library never prints. It succeeds, ignores
 * the file and leaves the reason in tk_last_error(NULL) ("" when there is
 * nothing to say). Without a GPU tk_create reads no tune file (nothing to
 * check it against), so the reading is also driven through
 * tk_tune_from_env with a made-up H100; stderr must stay empty throughout. */
static int stderr_to(const char *path)
{
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
    return saved;
}

static void stderr_back(int saved)
{
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
}

static void test_unusable_file_is_reported_not_printed(void)
{
    char err_path[] = "/tmp/tk_tune_stderrXXXXXX", tune[] = "/tmp/tk_tune_staleXXXXXX";
    int fd = mkstemp(err_path), tfd = mkstemp(tune);
    CHECK(fd >= 0 && tfd >= 0, "mkstemp");
    if (fd < 0 || tfd < 0)
        return;
    close(fd);
    FILE *f = fdopen(tfd, "w");
    fputs("tilekit-tune 1\ndevice 114 90 NVIDIA H100 PCIe\n512 512 512 n n bf16 k34_wgmma_128x64\n", f);
    fclose(f);
    const char *saved_env = getenv(TK_TUNE_ENV);
    int saved = stderr_to(err_path);

    tk_device d = h100();
    tk_tune_entry *e = NULL;
    int n = 0;
    char why[TK_ERR_LEN];
    unsetenv(TK_TUNE_ENV);
    int rc_unset = tk_tune_from_env(&d, &e, &n, why, sizeof why);
    int unset_ok = rc_unset == 0 && !e && n == 0 && !why[0];
    setenv(TK_TUNE_ENV, tune, 1);
    int rc_stale = tk_tune_from_env(&d, &e, &n, why, sizeof why);
    char stale_why[TK_ERR_LEN];
    snprintf(stale_why, sizeof stale_why, "%s", why);

    /* the real tk_create: succeeds; the thread's message is cleared, then
     * (with a GPU, which the file was not measured on) says why */
    tk_create(NULL);   /* leaves "out: ..." in the thread's message */
    tk_handle h = NULL;
    tk_status st = tk_create(&h);
    char after[TK_ERR_LEN];
    snprintf(after, sizeof after, "%s", tk_last_error(NULL));
    int have_device = h && h->have_device;
    tk_destroy(h);

    stderr_back(saved);
    if (saved_env)
        setenv(TK_TUNE_ENV, saved_env, 1);
    else
        unsetenv(TK_TUNE_ENV);

    CHECK(unset_ok, "TILEKIT_TUNE unset: rc %d, why '%s'", rc_unset, why);
    char want[256];
    snprintf(want, sizeof want, "TILEKIT_TUNE=%s ignored: stale", tune);
    CHECK(rc_stale == -1 && !e && n == 0 && strstr(stale_why, want) && strstr(stale_why, "shape rules"),
          "stale file: rc %d, why '%s'", rc_stale, stale_why);
    CHECK(st == TK_SUCCESS, "tk_create with an unusable TILEKIT_TUNE: %s", tk_status_string(st));
    if (have_device)
        CHECK(strstr(after, want) != NULL, "after tk_create on a GPU: tk_last_error(NULL) is '%s'", after);
    else
        CHECK(!strcmp(after, ""), "after tk_create without a GPU: tk_last_error(NULL) is '%s' (expected \"\")",
              after);
    f = fopen(err_path, "r");
    char printed[512] = "";
    size_t got = f ? fread(printed, 1, sizeof printed - 1, f) : 0;
    printed[got] = '\0';
    if (f)
        fclose(f);
    CHECK(got == 0, "the library printed on stderr: '%s'", printed);
    unlink(err_path);
    unlink(tune);
}

void tk_tests(void)
{
    TK_TEST(test_good);
    TK_TEST(test_stale);
    TK_TEST(test_malformed);
    TK_TEST(test_files);
    TK_TEST(test_special_files);
    TK_TEST(test_unusable_file_is_reported_not_printed);
}
