/* status.c - status strings, last-error bookkeeping (the message and the
 * CUDA error or cuBLAS status behind it), version, the versioned structs'
 * rule. */
#include <stdio.h>
#include <string.h>
#include <cublas_v2.h>
#include "internal.h"

int tk_version(void) { return TILEKIT_VERSION; }

const char *tk_status_string(tk_status s)
{
    switch (s) {
    case TK_SUCCESS: return "TK_SUCCESS: success";
    case TK_ERR_INVALID_VALUE: return "TK_ERR_INVALID_VALUE: invalid argument";
    case TK_ERR_NOT_SUPPORTED: return "TK_ERR_NOT_SUPPORTED: problem not supported by this kernel";
    case TK_ERR_ARCH_MISMATCH: return "TK_ERR_ARCH_MISMATCH: kernel needs a newer GPU architecture";
    case TK_ERR_NO_DEVICE: return "TK_ERR_NO_DEVICE: no CUDA device available";
    case TK_ERR_CUDA: return "TK_ERR_CUDA: CUDA runtime error";
    case TK_ERR_CUBLAS: return "TK_ERR_CUBLAS: cuBLAS error";
    case TK_ERR_OUT_OF_RESOURCES: return "TK_ERR_OUT_OF_RESOURCES: launch exceeds device limits";
    case TK_ERR_ALLOC: return "TK_ERR_ALLOC: allocation failed";
    case TK_ERR_INTERNAL: return "TK_ERR_INTERNAL: internal error";
    case TK_ERR_COMM: return "TK_ERR_COMM: communication (NCCL) failed";
    }
    return "TK_ERR_?: unknown status value";
}

/* The per-thread copy of the last message: the only way to report a failure
 * of a call that has no usable handle (tk_create, a NULL handle). */
static _Thread_local char tl_err[TK_ERR_LEN];

/* The CUDA error and cuBLAS status: tl_cuda/tl_cublas as tl_err (the last
 * failure's, per thread); noted_* what a launcher or the library noted
 * during the call in progress on this thread (kernel.h), taken by tk_fail
 * and forgotten at the start of the next call. */
static _Thread_local int tl_cuda, tl_cublas, noted_cuda, noted_cublas;

void tk_note_cuda_error(int e) { noted_cuda = e; }
void tk_note_cublas_status(int s) { noted_cublas = s; }
void tk_note_clear(void) { noted_cuda = noted_cublas = 0; }

void tk_call_begin(tk_handle h)
{
    tk_note_clear();
    if (h) {
        h->err[0] = '\0';
        h->cuda_error = h->cublas_status = 0;
    }
}

tk_status tk_fail(tk_handle h, tk_status st, const char *fmt, ...)
{
    char msg[TK_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(tl_err, sizeof tl_err, "%s", msg);
    tl_cuda = noted_cuda;
    tl_cublas = noted_cublas;
    if (h) {
        snprintf(h->err, sizeof h->err, "%s", msg);
        h->cuda_error = noted_cuda;
        h->cublas_status = noted_cublas;
    }
    tk_note_clear();
    return st;
}

const char *tk_last_error(tk_handle h)
{
    return h ? h->err : tl_err;
}

tk_status tk_fill_versioned(tk_handle h, const char *arg, void *out, const void *src, size_t known, size_t first)
{
    if (!out)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "%s: pointer is NULL (expected a struct to fill, its size set)", arg);
    size_t size;
    memcpy(&size, out, sizeof size);
    if (size < first)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "%s->size: %zu is smaller than the struct's first version (%zu bytes): initialize it with its "
                       "_INIT macro",
                       arg, size, first);
    const size_t n = size < known ? size : known;
    memcpy((char *)out + sizeof size, (const char *)src + sizeof size, n - sizeof size);
    if (size > n)
        memset((char *)out + n, 0, size - n);
    return TK_SUCCESS;
}

tk_status tk_read_versioned(tk_handle h, const char *arg, const char *type, const char *init, const void *in,
                            void *out, size_t known, size_t first)
{
    if (!in)
        return tk_fail(h, TK_ERR_INVALID_VALUE, "%s: pointer is NULL (expected a %s)", arg, type);
    size_t size;
    memcpy(&size, in, sizeof size);
    if (size < first)
        return tk_fail(h, TK_ERR_INVALID_VALUE,
                       "%s->size: %zu is smaller than the first %s (%zu bytes): initialize the descriptor with %s", arg,
                       size, type, first, init);
    memset(out, 0, known);
    memcpy(out, in, size < known ? size : known);
    for (size_t i = known; i < size; i++)
        if (((const unsigned char *)in)[i])
            return tk_fail(h, TK_ERR_NOT_SUPPORTED,
                           "%s: byte %zu of the descriptor is set, but this library (tilekit %d.%d.%d) knows %zu "
                           "bytes of %s: a field of a newer version, which this one cannot honour",
                           arg, i, TILEKIT_VERSION_MAJOR, TILEKIT_VERSION_MINOR, TILEKIT_VERSION_PATCH, known, type);
    memcpy(out, &known, sizeof known);
    return TK_SUCCESS;
}

/* The first version of tk_cuda_error: up to cublas_name. */
#define TK_CUDA_ERROR_V1_SIZE (offsetof(tk_cuda_error, cublas_name) + sizeof(const char *))

tk_status tk_last_cuda_error(tk_handle h, tk_cuda_error *out)
{
    /* read before anything is recorded: this call's own refusal below must
     * not replace what it reports */
    tk_cuda_error e = { .size = sizeof e };
    e.cuda_error = h ? h->cuda_error : tl_cuda;
    e.cublas_status = h ? h->cublas_status : tl_cublas;
    e.cuda_name = e.cuda_error ? cudaGetErrorName((cudaError_t)e.cuda_error) : "";
    e.cublas_name = e.cublas_status ? cublasGetStatusName((cublasStatus_t)e.cublas_status) : "";
    if (!e.cuda_name)
        e.cuda_name = "";
    if (!e.cublas_name)
        e.cublas_name = "";
    tk_note_clear();
    return tk_fill_versioned(NULL, "out", out, &e, sizeof e, TK_CUDA_ERROR_V1_SIZE);
}
