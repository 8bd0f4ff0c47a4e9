/* tune.c - reading the tune cache (tune.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tune.h"

static int cmp_key(int64_t m, int64_t n, int64_t k, int oa, int ob, int ct, const tk_tune_entry *e)
{
    const int64_t x[6] = { m, n, k, oa, ob, ct };
    const int64_t y[6] = { e->m, e->n, e->k, e->op_a, e->op_b, e->c_type };
    for (int i = 0; i < 6; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

static int cmp_entries(const void *p, const void *q)
{
    const tk_tune_entry *a = p;
    return cmp_key(a->m, a->n, a->k, a->op_a, a->op_b, a->c_type, q);
}

/* The next line of text into buf (without its newline); NULL at the end. */
static const char *next_line(const char *s, char *buf, size_t len, int *too_long)
{
    if (!*s)
        return NULL;
    size_t i = 0;
    *too_long = 0;
    for (; *s && *s != '\n'; s++) {
        if (i + 1 < len)
            buf[i++] = *s;
        else
            *too_long = 1;
    }
    buf[i] = '\0';
    return *s ? s + 1 : s;
}

static int blank_or_comment(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\r')
        s++;
    return !*s || *s == '#';
}

static int fail(char *why, size_t len, int line, const char *fmt, const char *a1, const char *a2)
{
    char msg[2 * TK_MSG_LEN + 128];
    snprintf(msg, sizeof msg, fmt, a1, a2);
    if (line)
        snprintf(why, len, "line %d: %s", line, msg);
    else
        snprintf(why, len, "%s", msg);
    return -1;
}

static int parse_entry(const char *s, tk_tune_entry *e, char *why, size_t len, int line)
{
    long long m, n, k;
    char oa[8], ob[8], out[8], name[64], extra[2];
    int got = sscanf(s, "%lld %lld %lld %7s %7s %7s %63s %1s", &m, &n, &k, oa, ob, out, name, extra);
    if (got != 7)
        return fail(why, len, line, "expected 'M N K OPA OPB OUT KERNEL' (7 fields), got '%s'%s", s, "");
    if (m < 1 || n < 1 || k < 1)
        return fail(why, len, line, "sizes must be at least 1 in '%s'%s", s, "");
    if ((strcmp(oa, "n") && strcmp(oa, "t")) || (strcmp(ob, "n") && strcmp(ob, "t")))
        return fail(why, len, line, "ops must be n or t in '%s'%s", s, "");
    if (strcmp(out, "fp32") && strcmp(out, "bf16"))
        return fail(why, len, line, "OUT must be fp32 or bf16, got '%s'%s", out, "");
    const tk_kernel *kern = tk_registry_find(name);
    if (!kern || kern->auto_rank <= 0)
        return fail(why, len, line, "'%s' is not a kernel auto-dispatch may run%s", name, "");
    e->m = m;
    e->n = n;
    e->k = k;
    e->op_a = oa[0] == 't' ? TK_OP_T : TK_OP_N;
    e->op_b = ob[0] == 't' ? TK_OP_T : TK_OP_N;
    e->c_type = out[0] == 'b' ? TK_BF16 : TK_F32;
    e->kernel = kern;
    return 0;
}

int tk_tune_parse(const char *text, const tk_device *dev, tk_tune_entry **out, int *n, char *why, size_t len)
{
    *out = NULL;
    *n = 0;
    char buf[512];
    int line = 0, state = 0, cap = 0, count = 0, too_long = 0;
    tk_tune_entry *v = NULL;
    const char *s = text;
    while ((s = next_line(s, buf, sizeof buf, &too_long))) {
        line++;
        if (too_long) {
            free(v);
            return fail(why, len, line, "longer than %s characters%s", "511", "");
        }
        if (blank_or_comment(buf))
            continue;
        char *cr = strchr(buf, '\r');
        if (cr)
            *cr = '\0';
        if (state == 0) {
            if (strcmp(buf, TK_TUNE_MAGIC)) {
                free(v);
                return fail(why, len, line, "expected '%s' first, got '%s'", TK_TUNE_MAGIC, buf);
            }
            state = 1;
        } else if (state == 1) {
            int sms = 0, sm = 0, off = 0;
            if (sscanf(buf, "device %d %d %n", &sms, &sm, &off) != 2 || !off || !buf[off]) {
                free(v);
                return fail(why, len, line, "expected 'device SMS SM NAME', got '%s'%s", buf, "");
            }
            if (sms != dev->sm_count || sm != dev->sm || strcmp(buf + off, dev->name)) {
                char have[TK_MSG_LEN];
                snprintf(have, sizeof have, "%s (sm_%d, %d SMs)", dev->name, dev->sm, dev->sm_count);
                free(v);
                return fail(why, len, 0, "stale: measured on '%.300s', this GPU is %.300s", buf + 7, have);
            }
            state = 2;
        } else {
            if (count == cap) {
                cap = cap ? 2 * cap : 64;
                tk_tune_entry *w = realloc(v, (size_t)cap * sizeof *v);
                if (!w) {
                    free(v);
                    return fail(why, len, 0, "out of host memory%s%s", "", "");
                }
                v = w;
            }
            if (parse_entry(buf, &v[count], why, len, line)) {
                free(v);
                return -1;
            }
            count++;
        }
    }
    if (state < 2) {
        free(v);
        return fail(why, len, 0, state ? "no 'device' line after '%s'%s" : "empty: no '%s' line%s", TK_TUNE_MAGIC,
                    "");
    }
    if (count)
        qsort(v, (size_t)count, sizeof *v, cmp_entries);
    *out = v;
    *n = count;
    return 0;
}

int tk_tune_load(const char *path, const tk_device *dev, tk_tune_entry **out, int *n, char *why, size_t len)
{
    *out = NULL;
    *n = 0;
    /* Opened without blocking and checked to be a regular file before
     * anything is read: a FIFO would block tk_create until a writer came,
     * /dev/zero would be read to the size limit. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return fail(why, len, 0, "cannot read %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return fail(why, len, 0, "cannot read %s: %s", path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return fail(why, len, 0, "%s is not a regular file%s", path,
                    S_ISFIFO(sb.st_mode)  ? " (a FIFO)"
                    : S_ISCHR(sb.st_mode) ? " (a character device)"
                    : S_ISDIR(sb.st_mode) ? " (a directory)"
                                          : "");
    }
    if (sb.st_size > (64 << 20)) {
        close(fd);
        return fail(why, len, 0, "%s is over 64 MB: not a tune file%s", path, "");
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int err = errno;
        close(fd);
        return fail(why, len, 0, "cannot read %s: %s", path, strerror(err));
    }
    size_t cap = 1 << 16, used = 0;
    char *text = malloc(cap);
    int rc = -1;
    while (text) {
        used += fread(text + used, 1, cap - 1 - used, f);
        if (ferror(f)) {
            fail(why, len, 0, "cannot read %s: %s", path, strerror(errno));
            break;
        }
        if (feof(f)) {
            text[used] = '\0';
            rc = strlen(text) != used ? fail(why, len, 0, "%s holds a NUL byte: not a tune file%s", path, "")
                                      : tk_tune_parse(text, dev, out, n, why, len);
            break;
        }
        if (cap > (64u << 20)) {
            fail(why, len, 0, "%s is over 64 MB: not a tune file%s", path, "");
            break;
        }
        char *w = realloc(text, cap *= 2);
        if (!w) {
            fail(why, len, 0, "out of host memory reading %s%s", path, "");
            break;
        }
        text = w;
    }
    if (!text)
        fail(why, len, 0, "out of host memory reading %s%s", path, "");
    free(text);
    fclose(f);
    return rc;
}

const tk_kernel *tk_tune_find(const tk_tune_entry *e, int n, const tk_args *a)
{
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = cmp_key(a->m, a->n, a->k, a->op_a, a->op_b, a->c_type, &e[mid]);
        if (!c)
            return e[mid].kernel;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return NULL;
}

int tk_tune_from_env(const tk_device *dev, tk_tune_entry **out, int *n, char *why, size_t len)
{
    *out = NULL;
    *n = 0;
    if (len)
        why[0] = '\0';
    const char *path = getenv(TK_TUNE_ENV);
    if (!path || !*path)
        return 0;
    char reason[TK_MSG_LEN];
    if (!tk_tune_load(path, dev, out, n, reason, sizeof reason))
        return 0;
    snprintf(why, len, "%s=%s ignored: %s; auto-dispatch uses its shape rules", TK_TUNE_ENV, path, reason);
    return -1;
}
