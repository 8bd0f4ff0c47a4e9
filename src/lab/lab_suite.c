/* lab_suite.c - shape suites: finding and reading the files of
 * bench/shapes/ (format in lab.h), and the arithmetic of a suite run's summary.
 * Pure host code. Every message names the file and line it is about, since
 * a suite is read before any GPU work and its errors end the CLI at once. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lab.h"

#define LINE_LEN 1024           /* longest line read, newline included */
#define SEP " \t\r\n\v\f"

/* ---- finding a suite ---- */

static int is_path(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') || (n >= 4 && !strcmp(s + n - 4, ".txt"));
}

/* dir = <the running program's folder>/rel made canonical (so a path reads
 * /x/bench/shapes rather than /x/build/../bench/shapes), or "" when there is
 * no such folder. */
static void exe_relative(const char *rel, char *dir, size_t len)
{
    char exe[PATH_MAX], joined[PATH_MAX + 64], canon[PATH_MAX];
    dir[0] = '\0';
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    snprintf(joined, sizeof joined, "%s/%s", exe, rel);
    if (realpath(joined, canon))
        snprintf(dir, len, "%s", canon);
}

int tk_lab_suite_find(const char *name, char *path, size_t len, char *why, size_t wlen)
{
    if (!name || !*name) {
        snprintf(why, wlen, "suite: empty name (expected a suite name such as 'odd', or a file path)");
        return -1;
    }
    if (is_path(name)) {
        snprintf(path, len, "%s", name);
        return 0;
    }
    /* The places in search order; a missing place is skipped. */
    char dirs[4][PATH_MAX];
    const char *env = getenv("TILEKIT_SHAPES");
    snprintf(dirs[0], sizeof dirs[0], "%s", env ? env : "");
    exe_relative("../bench/shapes", dirs[1], sizeof dirs[1]);
    exe_relative("../share/tilekit/shapes", dirs[2], sizeof dirs[2]);
    snprintf(dirs[3], sizeof dirs[3], "bench/shapes");
    for (int i = 0; i < 4; i++) {
        if (!dirs[i][0])
            continue;
        char cand[PATH_MAX + 64];
        int w = snprintf(cand, sizeof cand, "%s/%s.txt", dirs[i], name);
        if (w > 0 && (size_t)w < sizeof cand && access(cand, R_OK) == 0) {
            snprintf(path, len, "%s", cand);
            return 0;
        }
    }
    snprintf(why, wlen,
             "suite '%s': no %s.txt in $TILEKIT_SHAPES (%s), <program dir>/../bench/shapes (%s), "
             "<program dir>/../share/tilekit/shapes (%s) or ./bench/shapes (a file path needs a '/' or .txt)",
             name, name, env ? env : "not set", dirs[1][0] ? dirs[1] : "none", dirs[2][0] ? dirs[2] : "none");
    return -1;
}

/* ---- reading a suite ---- */

typedef struct loader {
    tk_lab_shape *v;
    int n, cap;
    int depth;                                      /* files open now */
    char canon[TK_LAB_SUITE_DEPTH + 1][PATH_MAX];   /* their canonical paths, outermost first */
    char stem[TK_LAB_SUITE_DEPTH + 1][32];          /* and suite names, for the cycle message */
    char *why;
    size_t len;
} loader;

/* The suite name of a path: its last component without the extension. */
static void stem_of(const char *path, char *out, size_t len)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    if (n >= len)
        n = len - 1;
    memcpy(out, base, n);
    out[n] = '\0';
}

/* A size field: an integer in 1..2^24, like the CLI's --m/--n/--k. */
static int parse_size(loader *L, const char *at, const char *field, const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end) {
        snprintf(L->why, L->len, "%s: %s: '%s' is not an integer", at, field, s);
        return -1;
    }
    if (errno == ERANGE || v < 1 || v > (1ll << 24)) {
        snprintf(L->why, L->len, "%s: %s: %s is out of range (expected 1..%lld)", at, field, s, 1ll << 24);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_op(loader *L, const char *at, const char *field, const char *s, tk_op *out)
{
    if (!strcmp(s, "n") || !strcmp(s, "t")) {
        *out = s[0] == 'n' ? TK_OP_N : TK_OP_T;
        return 0;
    }
    snprintf(L->why, L->len, "%s: %s: '%s' is not n or t", at, field, s);
    return -1;
}

static int load_file(loader *L, const char *path);
static int add_shape(loader *L, const char *at, int lineno, const char *stem, tk_lab_shape *sp);

/* A grouped line's fields after its form (tok[1..nt)) into s: the form
 * says where the groups' SPEC (BATCHED: the COUNT), M, N and K are; -1:
 * the SPEC gives that size. */
static int parse_grouped(loader *L, const char *at, const char *shown, char **tok, int nt, tk_lab_shape *s)
{
    static const struct { const char *form; int kind, fields, spec, m, n, k; const char *usage; } forms[] = {
        { "rows", TK_GROUP_ROWS, 5, 0, -1, 1, 2, "rows SPEC N K opA opB" },
        { "k", TK_GROUP_K, 5, 2, 0, 1, -1, "k M N SPEC opA opB" },
        { "masked", TK_GROUP_MASKED, 6, 0, 1, 2, 3, "masked SPEC M N K opA opB" },
        { "batch", TK_GROUP_BATCHED, 6, 0, 1, 2, 3, "batch COUNT M N K opA opB" },
    };
    int f = 0;
    while (strcmp(tok[0], forms[f].form))
        f++;
    if (nt - 1 != forms[f].fields) {
        snprintf(L->why, L->len, "%s: '%s' expected, got '%s'", at, forms[f].usage, shown);
        return -1;
    }
    char **x = tok + 1, why[512];
    s->kind = forms[f].kind;
    if (s->kind == TK_GROUP_BATCHED) {
        int64_t count;
        if (parse_size(L, at, "COUNT", x[0], &count))
            return -1;
        if (count > TK_LAB_BATCH_MAX) {
            snprintf(L->why, L->len, "%s: COUNT: %s is out of range (expected 1..%d)", at, x[0], TK_LAB_BATCH_MAX);
            return -1;
        }
        s->count = (int)count;
    } else {
        const char *spec = x[forms[f].spec];
        tk_lab_group_spec gs;
        if (strlen(spec) >= sizeof s->groups) {
            snprintf(L->why, L->len, "%s: groups: '%.40s..' is longer than %zu characters", at, spec,
                     sizeof s->groups - 1);
            return -1;
        }
        if (tk_lab_group_spec_parse(spec, &gs, why, sizeof why)) {
            snprintf(L->why, L->len, "%s: groups: %s", at, why);
            return -1;
        }
        snprintf(s->groups, sizeof s->groups, "%s", spec);
        s->count = gs.count;
        s->m = gs.total;    /* ROWS' M, K's K: the sizes' sum */
        s->k = gs.total;
    }
    if ((forms[f].m >= 0 && parse_size(L, at, "M", x[forms[f].m], &s->m)) ||
        parse_size(L, at, "N", x[forms[f].n], &s->n) ||
        (forms[f].k >= 0 && parse_size(L, at, "K", x[forms[f].k], &s->k)))
        return -1;
    return parse_op(L, at, "opA", x[forms[f].fields - 2], &s->op_a) ||
           parse_op(L, at, "opB", x[forms[f].fields - 1], &s->op_b);
}

/* `include NAME` on line `at` of `from`: NAME.txt in from's folder. */
static int include(loader *L, const char *from, const char *at, const char *name)
{
    if (strchr(name, '/')) {
        snprintf(L->why, L->len, "%s: include '%s': name a suite of the same folder (no '/')", at, name);
        return -1;
    }
    char path[PATH_MAX + 64];
    const char *slash = strrchr(from, '/');
    int dirlen = slash ? (int)(slash - from) + 1 : 0;
    size_t n = strlen(name);
    snprintf(path, sizeof path, "%.*s%s%s", dirlen, from, name, n >= 4 && !strcmp(name + n - 4, ".txt") ? "" : ".txt");
    char canon[PATH_MAX];
    if (!realpath(path, canon)) {
        snprintf(L->why, L->len, "%s: include '%s': cannot open %s: %s", at, name, path, strerror(errno));
        return -1;
    }
    for (int i = 0; i < L->depth; i++)
        if (!strcmp(L->canon[i], canon)) {
            char chain[512] = "";
            for (int j = i; j < L->depth; j++)
                snprintf(chain + strlen(chain), sizeof chain - strlen(chain), "%s -> ", L->stem[j]);
            snprintf(L->why, L->len, "%s: include '%s': include cycle (%s%s)", at, name, chain, L->stem[i]);
            return -1;
        }
    if (L->depth >= TK_LAB_SUITE_DEPTH) {
        snprintf(L->why, L->len, "%s: include '%s': includes nested more than %d deep", at, name,
                 TK_LAB_SUITE_DEPTH);
        return -1;
    }
    return load_file(L, path);
}

/* One line (comment already cut) of `path`; at = "path:line". */
static int parse_line(loader *L, const char *path, const char *at, int lineno, char *text, const char *stem)
{
    char shown[LINE_LEN];       /* the line as written, trimmed, for messages */
    size_t b = strspn(text, SEP), e = strlen(text);
    while (e > b && strchr(SEP, text[e - 1]))
        e--;
    snprintf(shown, sizeof shown, "%.*s", (int)(e - b), text + b);
    char *tok[8], *save = NULL;
    int nt = 0;
    for (char *t = strtok_r(text, SEP, &save); t && nt < 8; t = strtok_r(NULL, SEP, &save))
        tok[nt++] = t;
    if (nt == 0)
        return 0;
    if (!strcmp(tok[0], "include")) {
        if (nt != 2) {
            snprintf(L->why, L->len, "%s: 'include NAME' expected, got '%s'", at, shown);
            return -1;
        }
        return include(L, path, at, tok[1]);
    }
    tk_lab_shape s = { 0 };
    const int grouped = !strcmp(tok[0], "rows") || !strcmp(tok[0], "k") || !strcmp(tok[0], "masked") ||
                        !strcmp(tok[0], "batch");
    if (grouped) {
        if (parse_grouped(L, at, shown, tok, nt, &s))
            return -1;
        return add_shape(L, at, lineno, stem, &s);
    }
    if (!strchr("0123456789+-", tok[0][0])) {
        snprintf(L->why, L->len, "%s: '%s' is neither M (an integer) nor a form (rows, k, masked, batch)", at, tok[0]);
        return -1;
    }
    if (nt < 5) {
        snprintf(L->why, L->len, "%s: 'M N K opA opB' expected, got '%s'", at, shown);
        return -1;
    }
    if (nt > 5) {
        snprintf(L->why, L->len, "%s: extra field '%s' after 'M N K opA opB' (comments start with '#')", at,
                 tok[5]);
        return -1;
    }
    if (parse_size(L, at, "M", tok[0], &s.m) || parse_size(L, at, "N", tok[1], &s.n) ||
        parse_size(L, at, "K", tok[2], &s.k) || parse_op(L, at, "opA", tok[3], &s.op_a) ||
        parse_op(L, at, "opB", tok[4], &s.op_b))
        return -1;
    return add_shape(L, at, lineno, stem, &s);
}

/* Appends shape s, read at line lineno of suite stem. */
static int add_shape(loader *L, const char *at, int lineno, const char *stem, tk_lab_shape *sp)
{
    tk_lab_shape s = *sp;
    snprintf(s.suite, sizeof s.suite, "%s", stem);
    s.line = lineno;
    if (L->n == TK_LAB_SUITE_MAX) {
        snprintf(L->why, L->len, "%s: more than %d shapes in the suite", at, TK_LAB_SUITE_MAX);
        return -1;
    }
    if (L->n == L->cap) {
        int cap = L->cap ? 2 * L->cap : 64;
        tk_lab_shape *v = realloc(L->v, (size_t)cap * sizeof *v);
        if (!v) {
            snprintf(L->why, L->len, "%s: out of host memory", at);
            return -1;
        }
        L->v = v;
        L->cap = cap;
    }
    L->v[L->n++] = s;
    return 0;
}

static int load_file(loader *L, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(L->why, L->len, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    int me = L->depth++;
    if (!realpath(path, L->canon[me]))
        snprintf(L->canon[me], sizeof L->canon[me], "%s", path);
    stem_of(path, L->stem[me], sizeof L->stem[me]);
    int first = L->n, lineno = 0, rc = 0;
    char line[LINE_LEN], at[PATH_MAX + 32];
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        snprintf(at, sizeof at, "%s:%d", path, lineno);
        size_t n = strlen(line);
        if (n == sizeof line - 1 && line[n - 1] != '\n') {   /* a full buffer: the end of the file, or too long */
            int ch = getc(f);
            if (ch != EOF) {
                snprintf(L->why, L->len, "%s: line longer than %d characters", at, LINE_LEN - 2);
                rc = -1;
                break;
            }
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        rc = parse_line(L, path, at, lineno, line, L->stem[me]);
    }
    if (!rc && ferror(f)) {
        snprintf(L->why, L->len, "%s:%d: read error: %s", path, lineno + 1, strerror(errno));
        rc = -1;
    }
    if (!rc && L->n == first) {
        snprintf(L->why, L->len, "%s:%d: end of file without a shape (empty suite; lines are 'M N K opA opB')",
                 path, lineno);
        rc = -1;
    }
    fclose(f);
    L->depth--;
    return rc;
}

int tk_lab_suite_load(const char *name_or_path, tk_lab_shape **out, int *n, char *why, size_t len)
{
    *out = NULL;
    *n = 0;
    char path[PATH_MAX + 64];
    if (tk_lab_suite_find(name_or_path, path, sizeof path, why, len))
        return -1;
    loader *L = calloc(1, sizeof *L);
    if (!L) {
        snprintf(why, len, "%s: out of host memory", path);
        return -1;
    }
    L->why = why;
    L->len = len;
    int rc = load_file(L, path);
    if (rc)
        free(L->v);
    else {
        *out = L->v;
        *n = L->n;
    }
    free(L);
    return rc;
}

/* ---- the summary ---- */

static void stat_add(tk_lab_suite_stat *s, double r, int i, double threshold)
{
    s->shapes++;
    if (!(isfinite(r) && r > 0))
        return;
    /* geomean holds the sum of logs until the end */
    s->geomean = s->measured ? s->geomean + log(r) : log(r);
    if (!s->measured || r < s->min) {
        s->min = r;
        s->min_index = i;
    }
    s->measured++;
    s->below += r < threshold;
}

int tk_lab_suite_summary(const double *ratio, const char *const *suite, int n, double threshold,
                         tk_lab_suite_stat *out, int max)
{
    int ns = 0;
    for (int i = 0; i < n; i++) {
        const char *name = suite && suite[i] ? suite[i] : "";
        int j = 0;
        while (j < ns && strncmp(out[j].suite, name, sizeof out[j].suite - 1))
            j++;
        if (j == ns) {
            if (ns + 1 >= max)          /* the overall entry needs a slot too */
                return -1;
            memset(&out[ns], 0, sizeof out[ns]);
            snprintf(out[ns].suite, sizeof out[ns].suite, "%s", name);
            ns++;
        }
        stat_add(&out[j], ratio[i], i, threshold);
    }
    if (ns >= max)
        return -1;
    tk_lab_suite_stat *all = &out[ns];
    memset(all, 0, sizeof *all);
    for (int i = 0; i < n; i++)
        stat_add(all, ratio[i], i, threshold);
    for (int j = 0; j <= ns; j++) {
        tk_lab_suite_stat *s = &out[j];
        s->not_measured = s->shapes - s->measured;
        s->geomean = s->measured ? exp(s->geomean / s->measured) : NAN;
        if (!s->measured) {
            s->min = NAN;
            s->min_index = -1;
        }
    }
    return ns + 1;
}
