/* lab_ncu.c - running Nsight Compute (ncu) for `tilekit profile`: finding
 * it, running `tilekit launch` under it with the metric table of
 * lab_profile.c, and telling "ncu cannot profile here" (no permission to
 * read the GPU's counters, its library not loaded) from "it ran but
 * profiled nothing" (the kernel refused the problem, no GPU).
 *
 * ncu runs as a child process with its stdout and stderr in one temporary
 * file: the program's own lines, ncu's ==PROF== / ==ERROR== lines, then
 * (at the end, once the program has exited) the CSV. Only the range
 * between cudaProfilerStart and cudaProfilerStop is profiled
 * (--profile-from-start off), which `tilekit launch` puts around the calls
 * it is asked for, so the input fills and warm-up calls are not in it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "lab.h"

#define OUTPUT_MAX (64u << 20)      /* bytes of ncu output read at most */

static int executable_file(const char *path)
{
    struct stat sb;
    return !stat(path, &sb) && S_ISREG(sb.st_mode) && !access(path, X_OK);
}

int tk_lab_ncu_find(char *path, size_t len, char *why, size_t wlen)
{
    const char *env = getenv("NCU");
    if (env && *env) {
        if (!executable_file(env)) {
            snprintf(why, wlen, "NCU is '%s', which is not an executable file: point NCU at Nsight Compute's ncu "
                                "(e.g. NCU=/usr/local/cuda/bin/ncu) or unset it to look for ncu on PATH", env);
            return -1;
        }
        snprintf(path, len, "%s", env);
        return 0;
    }
    const char *dirs = getenv("PATH");
    for (const char *d = dirs ? dirs : ""; *d;) {
        size_t n = strcspn(d, ":");
        char cand[4096];
        /* an empty entry of PATH is the current directory */
        snprintf(cand, sizeof cand, "%.*s/ncu", n ? (int)n : 1, n ? d : ".");
        if (executable_file(cand)) {
            snprintf(path, len, "%s", cand);
            return 0;
        }
        d += n + (d[n] == ':');
    }
    snprintf(why, wlen, "Nsight Compute's ncu was not found: it is not on PATH and NCU is not set. Install Nsight "
                        "Compute (the CUDA toolkit ships it as bin/ncu; or developer.nvidia.com/nsight-compute), then "
                        "put its folder on PATH (export PATH=/usr/local/cuda/bin:$PATH) or set NCU=/path/to/ncu");
    return -1;
}

/* The line of text holding `at`, at most 200 characters of it. */
static void line_of(const char *text, const char *at, char *buf, size_t len)
{
    const char *b = at, *e = at;
    while (b > text && b[-1] != '\n')
        b--;
    while (*e && *e != '\n' && *e != '\r')
        e++;
    int n = (int)(e - b) < 200 ? (int)(e - b) : 200;
    snprintf(buf, len, "%.*s", n, b);
}

/* The two ways ncu refuses to profile: the phrases it prints for each, and
 * what to tell the user (a format taking ncu's line). */
static const struct {
    const char *said[2];
    const char *fix;
} ncu_refusals[] = {
    { { "ERR_NVGPUCTRPERM", "does not have permission" },
      "ncu may not read the GPU's performance counters; it said:\n  %s\n"
      "Fix: run as root (sudo -E build/tilekit profile ...), or let every user profile: add the line\n"
      "  options nvidia NVreg_RestrictProfilingToAdminUsers=0\n"
      "to a file in /etc/modprobe.d/ and reload the nvidia module (or reboot); in a container, start it\n"
      "with --cap-add=SYS_ADMIN. See https://developer.nvidia.com/ERR_NVGPUCTRPERM" },
    { { "LibraryNotLoaded", "Failed to initialize the profiler" },
      "ncu could not start profiling; it said:\n  %s\n"
      "Fix: check that a GPU is visible (nvidia-smi), that the driver is at least as new as this ncu\n"
      "(ncu --version; ncu's release notes name the driver it needs), and that no other profiler\n"
      "(nsys, DCGM profiling) holds the GPU's counters" },
};

int tk_lab_ncu_blocked(const char *text, char *why, size_t len)
{
    char line[256];
    for (size_t r = 0; r < sizeof ncu_refusals / sizeof ncu_refusals[0]; r++)
        for (size_t i = 0; i < 2; i++) {
            const char *at = strstr(text, ncu_refusals[r].said[i]);
            if (!at)
                continue;
            line_of(text, at, line, sizeof line);
            snprintf(why, len, ncu_refusals[r].fix, line);
            return 1;
        }
    return 0;
}

/* Reads the file at fd (from its start) into a NUL-terminated buffer. */
static char *slurp(int fd)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf || lseek(fd, 0, SEEK_SET) < 0) {
        free(buf);
        return NULL;
    }
    for (;;) {
        if (n == cap) {
            if (cap >= OUTPUT_MAX)
                break;
            char *b = realloc(buf, 2 * cap + 1);
            if (!b)
                break;
            buf = b;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    return buf;
}

/* Runs argv[0] with its stdout and stderr into the (open, empty) file fd;
 * returns its exit status, 127 when it could not be run, -1 when no child
 * could be made. */
static int run_into(char *const *argv, int fd)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(127);
        execv(argv[0], argv);
        fprintf(stderr, "tilekit profile: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The last `keep` characters of text, from a line start where possible. */
static const char *tail_of(const char *text, size_t keep)
{
    size_t n = strlen(text);
    if (n <= keep)
        return text;
    const char *t = text + n - keep, *nl = strchr(t, '\n');
    return nl && nl[1] ? nl + 1 : t;
}

int tk_lab_ncu_profile(const char *ncu, const char *self, const char *kernel, const char *const *args,
                       tk_lab_profile *p, char *why, size_t len)
{
    enum { FIXED = 16, MAX_ARGS = 64 };
    size_t mlen = tk_lab_metric_list(NULL, 0) + 1;
    char *metrics = malloc(mlen);
    char *argv[FIXED + MAX_ARGS + 1];
    int n = 0, rc = 1;
    if (!metrics) {
        snprintf(why, len, "out of host memory");
        return 1;
    }
    tk_lab_metric_list(metrics, mlen);
    /* --clock-control none: ncu's default locks the SM clock to the base
     * clock while it profiles; the GPU's settings are left as found. */
    const char *fixed[] = { ncu, "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
                            "--profile-from-start", "off", "--metrics", metrics, self, "launch", "--kernel", kernel };
    _Static_assert(sizeof fixed / sizeof fixed[0] <= FIXED, "argv has room for FIXED fixed arguments");
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        argv[n++] = (char *)fixed[i];
    for (int i = 0; args && args[i] && i < MAX_ARGS; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;

    const char *tmpdir = getenv("TMPDIR");
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s/tilekit-ncu-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(why, len, "cannot create a temporary file %s for ncu's output: %s", tmp, strerror(errno));
        free(metrics);
        return 1;
    }
    unlink(tmp);    /* the open descriptor keeps it until closed */
    int st = run_into(argv, fd);
    char *out = slurp(fd);
    close(fd);
    free(metrics);
    memset(p, 0, sizeof *p);
    snprintf(p->kernel, sizeof p->kernel, "%s", kernel);
    if (st < 0 || !out) {
        snprintf(why, len, "cannot run %s: %s", ncu, st < 0 ? strerror(errno) : "out of host memory");
        rc = 2;
    } else if (tk_lab_ncu_blocked(out, why, len))
        rc = 2;
    else if (tk_lab_profile_parse(out, p, why, len) == 0)
        rc = 0;
    else if (st == 127 && !strstr(out, "==PROF==")) {
        snprintf(why, len, "%s could not be run (exit 127): %s", ncu, tail_of(out, 400));
        rc = 2;
    } else {
        size_t w = strlen(why);
        snprintf(why + w, len > w ? len - w : 0, " (ncu exit status %d); its output ends:\n%s", st,
                 tail_of(out, 1500));
    }
    free(out);
    return rc;
}
