/* fake_tilekit.c - a stand-in libtilekit.so for the Python tests without a
 * GPU (tests/python/fakes.py builds it; TILEKIT_LIB names it): the API the
 * wrapper binds and the CUDA runtime functions it calls through the library,
 * each of which succeeds and appends one line to a log ("create 0x..",
 * "gemm handle=0x.. stream=0x..", "wait stream=0x.. event=0x..", ... and
 * the calling thread; a batched or grouped product, tk_gemm_run and
 * tk_quantize_fp8 log every argument they were given, the problem's and the
 * descriptors' fields too),
 * kept in memory (fake_log(), read through ctypes) and, when
 * $FAKE_TILEKIT_LOG names a file, appended to it as well, so a test also
 * sees what ran while the interpreter shut down. The stream FAKE_CAPTURING
 * reports itself as being captured into a CUDA graph. With
 * $FAKE_TILEKIT_RUN_FAIL set to "STATUS:MESSAGE", tk_gemm_run refuses with
 * that status and tk_last_error(h) says MESSAGE, as the library's own
 * refusals do (tk_quantize_fp8 too). fake_desc_layout() and
 * fake_qdesc_layout() give tk_gemm_desc's and tk_quantize_desc's field
 * offsets and sizes as the header lays them out, for the ctypes mirrors' tests. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tilekit.h"

#define FAKE_CAPTURING 0xca0

struct tk_handle_s {
    int unused;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 20];
static size_t log_len;

static unsigned long addr(const void *p)
{
    return (unsigned long)(uintptr_t)p;
}

static void note(const char *fmt, ...)
{
    char line[1600];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, 1540, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= 1540)
        n = 1539;
    snprintf(line + n, sizeof line - (size_t)n, " thread=%lu\n", (unsigned long)pthread_self());
    size_t len = strlen(line);
    pthread_mutex_lock(&mu);
    if (log_len + len < sizeof log_text) {
        memcpy(log_text + log_len, line, len + 1);
        log_len += len;
    }
    const char *path = getenv("FAKE_TILEKIT_LOG");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (f) {
        fputs(line, f);
        fclose(f);
    }
    pthread_mutex_unlock(&mu);
}

const char *fake_log(void);
const char *fake_log(void)
{
    return log_text;
}

int tk_version(void)
{
    return TILEKIT_VERSION;
}

const char *tk_status_string(tk_status s)
{
    (void)s;
    return "fake";
}

tk_status tk_create(tk_handle *out)
{
    *out = calloc(1, sizeof **out);
    note("create %#lx", addr(*out));
    return *out ? TK_SUCCESS : TK_ERR_ALLOC;
}

tk_status tk_destroy(tk_handle h)
{
    note("destroy %#lx", addr(h));
    free(h);
    return TK_SUCCESS;
}

/* The message of the thread's last tk_gemm_run refused by
 * FAKE_TILEKIT_RUN_FAIL ("" after any other call of that thread). */
static _Thread_local char run_error[256];

/* The thread's message: run_error on a handle; without one, "" unless
 * FAKE_TILEKIT_LAST_ERROR models the one a real tk_create leaves after
 * ignoring a TILEKIT_TUNE file. */
const char *tk_last_error(tk_handle h)
{
    const char *note = getenv("FAKE_TILEKIT_LAST_ERROR");
    return h ? run_error : note ? note : "";
}

tk_status tk_gemm_ex(tk_handle h, const tk_gemm_problem *p, const char *kernel, void *stream)
{
    (void)kernel;
    note("gemm handle=%#lx stream=%#lx c=%#lx", addr(h), addr(stream), addr(p->c));
    return TK_SUCCESS;
}

tk_status tk_gemm(tk_handle h, tk_layout layout, tk_op op_a, tk_op op_b, int64_t m, int64_t n, int64_t k, float alpha,
                  const void *a, int64_t lda, const void *b, int64_t ldb, float beta, void *c, tk_dtype c_type,
                  int64_t ldc, const char *kernel, void *stream)
{
    tk_gemm_problem p = {
        .layout = layout, .op_a = op_a, .op_b = op_b, .m = m, .n = n, .k = k, .alpha = alpha, .beta = beta,
        .a = a, .lda = lda, .b = b, .ldb = ldb, .c = c, .ldc = ldc, .c_type = c_type,
    };
    return tk_gemm_ex(h, &p, kernel, stream);
}

/* A problem's fields as "layout=.. op_a=.. .. c_type=.." (the pointers in hex). */
static void problem_text(char *buf, size_t len, const tk_gemm_problem *p)
{
    snprintf(buf, len,
             "layout=%d op_a=%d op_b=%d m=%lld n=%lld k=%lld alpha=%g beta=%g a=%#lx lda=%lld b=%#lx ldb=%lld "
             "c=%#lx ldc=%lld c_type=%d",
             (int)p->layout, (int)p->op_a, (int)p->op_b, (long long)p->m, (long long)p->n, (long long)p->k,
             (double)p->alpha, (double)p->beta, addr(p->a), (long long)p->lda, addr(p->b), (long long)p->ldb,
             addr(p->c), (long long)p->ldc, (int)p->c_type);
}

/* Issue 38: logged with every argument; they run nothing (the fake's
 * pointers are no memory). */
tk_status tk_gemm_batched(tk_handle h, const tk_gemm_problem *p, int64_t count, int64_t stride_a, int64_t stride_b,
                          int64_t stride_c, const char *kernel, void *stream)
{
    char prob[320];
    problem_text(prob, sizeof prob, p);
    note("gemm_batched handle=%#lx stream=%#lx %s count=%lld stride_a=%lld stride_b=%lld stride_c=%lld kernel=%s",
         addr(h), addr(stream), prob, (long long)count, (long long)stride_a, (long long)stride_b, (long long)stride_c,
         kernel ? kernel : "auto");
    return TK_SUCCESS;
}

tk_status tk_gemm_grouped(tk_handle h, const tk_gemm_problem *p, tk_group_kind kind, int count, const int32_t *offs,
                          int64_t stride_a, int64_t stride_b, int64_t stride_c, int32_t *group_error,
                          const char *kernel, void *stream)
{
    char prob[320];
    problem_text(prob, sizeof prob, p);
    note("gemm_grouped handle=%#lx stream=%#lx %s kind=%d count=%d offs=%#lx stride_a=%lld stride_b=%lld "
         "stride_c=%lld group_error=%#lx kernel=%s",
         addr(h), addr(stream), prob, (int)kind, count, addr(offs), (long long)stride_a, (long long)stride_b,
         (long long)stride_c, addr(group_error), kernel ? kernel : "auto");
    return TK_SUCCESS;
}

/* TK_SUCCESS, or the refusal FAKE_TILEKIT_RUN_FAIL ("STATUS:MESSAGE") asks
 * for, its message the thread's run_error. */
static tk_status run_outcome(void)
{
    run_error[0] = 0;
    const char *fail = getenv("FAKE_TILEKIT_RUN_FAIL");
    if (!fail || !*fail)
        return TK_SUCCESS;
    char *colon = NULL;
    long st = strtol(fail, &colon, 10);
    snprintf(run_error, sizeof run_error, "%s", *colon == ':' ? colon + 1 : "");
    return (tk_status)st;
}

/* Issue 39: every field of the descriptor logged (pointers in hex); a
 * refusal when FAKE_TILEKIT_RUN_FAIL asks for one. */
tk_status tk_gemm_run(tk_handle h, const tk_gemm_desc *d, const char *kernel, void *stream)
{
    char prob[320];
    problem_text(prob, sizeof prob, &d->problem);
    note("gemm_run handle=%#lx stream=%#lx size=%zu %s group_kind=%d count=%d stride_a=%lld stride_b=%lld "
         "stride_c=%lld offs=%#lx group_error=%#lx epilogue=%d activation=%d bias=%#lx bias_type=%d bias_along=%d "
         "b_up=%#lx d=%#lx ldd=%lld aux=%#lx ldaux=%lld bias_grad=%#lx a_fp8=%d b_fp8=%d scale_mode=%d scale_a=%#lx "
         "scale_b=%#lx ld_scale_a=%lld ld_scale_b=%lld stride_scale_a=%lld stride_scale_b=%lld kernel=%s",
         addr(h), addr(stream), d->size, prob, (int)d->group_kind, (int)d->count, (long long)d->stride_a,
         (long long)d->stride_b, (long long)d->stride_c, addr(d->offs), addr(d->group_error), (int)d->epilogue,
         (int)d->activation, addr(d->bias), (int)d->bias_type, (int)d->bias_along, addr(d->b_up), addr(d->d),
         (long long)d->ldd, addr(d->aux), (long long)d->ldaux, addr(d->bias_grad), (int)d->a_fp8, (int)d->b_fp8,
         (int)d->scale_mode, addr(d->scale_a), addr(d->scale_b), (long long)d->ld_scale_a, (long long)d->ld_scale_b,
         (long long)d->stride_scale_a, (long long)d->stride_scale_b, kernel ? kernel : "auto");
    return run_outcome();
}

/* Issue 40: every field of the descriptor logged; a refusal when
 * FAKE_TILEKIT_RUN_FAIL asks for one (as tk_gemm_run's). */
tk_status tk_quantize_fp8(tk_handle h, const tk_quantize_desc *d, void *stream)
{
    note("quantize handle=%#lx stream=%#lx size=%zu rows=%lld cols=%lld x=%#lx ldx=%lld format=%d mode=%d q=%#lx "
         "ldq=%lld scale=%#lx ld_scale=%lld",
         addr(h), addr(stream), d->size, (long long)d->rows, (long long)d->cols, addr(d->x), (long long)d->ldx,
         (int)d->format, (int)d->mode, addr(d->q), (long long)d->ldq, addr(d->scale), (long long)d->ld_scale);
    return run_outcome();
}

/* tk_quantize_desc's layout, as fake_desc_layout gives tk_gemm_desc's. */
const char *fake_qdesc_layout(void);
const char *fake_qdesc_layout(void)
{
    static char text[512];
#define F(f) " " #f "=%zu:%zu"
#define V(f) offsetof(tk_quantize_desc, f), sizeof(((tk_quantize_desc *)0)->f)
    snprintf(text, sizeof text, "sizeof=%zu" F(size) F(rows) F(cols) F(x) F(ldx) F(format) F(mode) F(q) F(ldq)
                                    F(scale) F(ld_scale),
             sizeof(tk_quantize_desc), V(size), V(rows), V(cols), V(x), V(ldx), V(format), V(mode), V(q), V(ldq),
             V(scale), V(ld_scale));
#undef F
#undef V
    return text;
}

/* tk_gemm_desc's layout as this compiler lays out the header's struct:
 * "sizeof=N field=offset:size ..." in declaration order. */
const char *fake_desc_layout(void);
const char *fake_desc_layout(void)
{
    static char text[1024];
#define F(f) " " #f "=%zu:%zu"
#define V(f) offsetof(tk_gemm_desc, f), sizeof(((tk_gemm_desc *)0)->f)
    snprintf(text, sizeof text,
             "sizeof=%zu" F(size) F(problem) F(group_kind) F(count) F(stride_a) F(stride_b) F(stride_c) F(offs)
                 F(group_error) F(epilogue) F(activation) F(bias) F(bias_type) F(bias_along) F(b_up) F(d) F(ldd)
                     F(aux) F(ldaux) F(bias_grad) F(a_fp8) F(b_fp8) F(scale_mode) F(scale_a) F(scale_b)
                         F(ld_scale_a) F(ld_scale_b) F(stride_scale_a) F(stride_scale_b),
             sizeof(tk_gemm_desc), V(size), V(problem), V(group_kind), V(count), V(stride_a), V(stride_b),
             V(stride_c), V(offs), V(group_error), V(epilogue), V(activation), V(bias), V(bias_type), V(bias_along),
             V(b_up), V(d), V(ldd), V(aux), V(ldaux), V(bias_grad), V(a_fp8), V(b_fp8), V(scale_mode), V(scale_a),
             V(scale_b), V(ld_scale_a), V(ld_scale_b), V(stride_scale_a), V(stride_scale_b));
#undef F
#undef V
    return text;
}

int tk_kernel_count(void)
{
    return 1;
}

tk_status tk_kernel_get(int index, tk_kernel_props *out)
{
    if (index != 0 || !out)
        return TK_ERR_INVALID_VALUE;
    *out = (tk_kernel_props){ .name = "k01_naive", .description = "fake", .min_sm = 80 };
    return TK_SUCCESS;
}

tk_status tk_kernel_supports(tk_handle h, const char *kernel, const tk_gemm_problem *p)
{
    (void)h;
    (void)kernel;
    (void)p;
    return TK_SUCCESS;
}

const char *tk_select_kernel(tk_handle h, const tk_gemm_problem *p)
{
    (void)h;
    (void)p;
    return "k01_naive";
}

/* Issue 37's functions: settings succeed (and are logged), queries answer
 * with nothing, a plan is a logged allocation. */
tk_status tk_set_workspace(tk_handle h, void *ptr, size_t bytes)
{
    note("set_workspace handle=%#lx ptr=%#lx bytes=%zu", addr(h), addr(ptr), bytes);
    return TK_SUCCESS;
}

tk_status tk_set_workspace_limit(tk_handle h, size_t bytes)
{
    note("set_workspace_limit handle=%#lx bytes=%zu", addr(h), bytes);
    return TK_SUCCESS;
}

tk_status tk_workspace_size(tk_handle h, const tk_gemm_problem *p, const char *kernel, size_t *bytes)
{
    (void)h;
    (void)p;
    (void)kernel;
    *bytes = 0;
    return TK_SUCCESS;
}

tk_status tk_workspace_release(tk_handle h, void *stream)
{
    note("release handle=%#lx stream=%#lx", addr(h), addr(stream));
    return TK_SUCCESS;
}

tk_status tk_set_split_k(tk_handle h, tk_split_k mode)
{
    note("set_split_k handle=%#lx mode=%d", addr(h), (int)mode);
    return TK_SUCCESS;
}

/* Zeroes a caller's sized struct (tilekit.h: its first field, size, says
 * how many bytes the caller has) and puts the size back. */
static void zero_sized(void *out, size_t size)
{
    memset(out, 0, size);
    memcpy(out, &size, sizeof size);
}
_Static_assert(offsetof(tk_handle_info, size) == 0 && offsetof(tk_cuda_error, size) == 0 &&
                   offsetof(tk_build_info, size) == 0,
               "zero_sized: the size comes first");

tk_status tk_get_handle_info(tk_handle h, tk_handle_info *out)
{
    (void)h;
    zero_sized(out, out->size);
    out->device = -1;
    out->workspace_limit = TK_WORKSPACE_UNLIMITED;
    return TK_SUCCESS;
}

tk_status tk_candidates(tk_handle h, const tk_gemm_problem *p, tk_candidate *out, int capacity, int *count)
{
    (void)h;
    (void)p;
    (void)out;
    (void)capacity;
    *count = 0;
    return TK_SUCCESS;
}

struct tk_plan_s {
    int unused;
};

tk_status tk_plan_create(tk_handle h, const tk_gemm_problem *p, const char *kernel, tk_plan *out)
{
    (void)p;
    (void)kernel;
    *out = calloc(1, sizeof **out);
    note("plan_create handle=%#lx plan=%#lx", addr(h), addr(*out));
    return *out ? TK_SUCCESS : TK_ERR_ALLOC;
}

tk_status tk_plan_run(tk_handle h, tk_plan plan, const void *a, const void *b, void *c, void *stream)
{
    (void)a;
    (void)b;
    note("plan_run handle=%#lx plan=%#lx stream=%#lx c=%#lx", addr(h), addr(plan), addr(stream), addr(c));
    return TK_SUCCESS;
}

const char *tk_plan_kernel(tk_plan plan)
{
    return plan ? "k01_naive" : NULL;
}

tk_status tk_plan_destroy(tk_plan plan)
{
    note("plan_destroy %#lx", addr(plan));
    free(plan);
    return TK_SUCCESS;
}

tk_status tk_last_cuda_error(tk_handle h, tk_cuda_error *out)
{
    (void)h;
    zero_sized(out, out->size);
    out->cuda_name = out->cublas_name = "";
    return TK_SUCCESS;
}

tk_status tk_get_build_info(tk_build_info *out)
{
    zero_sized(out, out->size);
    out->version = TILEKIT_VERSION;
    out->version_string = "fake";
    out->archs = "fake";
    return TK_SUCCESS;
}

/* ---- the CUDA runtime's, as the wrapper declares them (cudaError_t: int) ---- */

int cudaGetDevice(int *d);
int cudaSetDevice(int d);
int cudaEventCreateWithFlags(void **event, unsigned flags);
int cudaEventRecord(void *event, void *stream);
int cudaStreamWaitEvent(void *stream, void *event, unsigned flags);
int cudaEventDestroy(void *event);
int cudaStreamIsCapturing(void *stream, int *status);

int cudaGetDevice(int *d)
{
    *d = 0;
    return 0;
}

int cudaSetDevice(int d)
{
    note("set_device %d", d);
    return 0;
}

int cudaEventCreateWithFlags(void **event, unsigned flags)
{
    *event = malloc(1);
    note("event_create %#lx flags=%u", addr(*event), flags);
    return 0;
}

int cudaEventRecord(void *event, void *stream)
{
    note("record event=%#lx stream=%#lx", addr(event), addr(stream));
    return 0;
}

int cudaStreamWaitEvent(void *stream, void *event, unsigned flags)
{
    note("wait stream=%#lx event=%#lx flags=%u", addr(stream), addr(event), flags);
    return 0;
}

int cudaEventDestroy(void *event)
{
    note("event_destroy %#lx", addr(event));
    free(event);
    return 0;
}

int cudaStreamIsCapturing(void *stream, int *status)
{
    *status = addr(stream) == FAKE_CAPTURING;
    return 0;
}
