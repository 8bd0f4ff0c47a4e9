/* status.c - status strings, last-error bookkeeping, version. */
#include <stdio.h>
#include <string.h>
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
    }
    return "TK_ERR_?: unknown status value";
}

/* The per-thread copy of the last message: the only way to report a failure
 * of a call that has no usable handle (tk_create, a NULL handle). */
static _Thread_local char tl_err[TK_ERR_LEN];

tk_status tk_fail(tk_handle h, tk_status st, const char *fmt, ...)
{
    char msg[TK_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(tl_err, sizeof tl_err, "%s", msg);
    if (h)
        snprintf(h->err, sizeof h->err, "%s", msg);
    return st;
}

const char *tk_last_error(tk_handle h)
{
    return h ? h->err : tl_err;
}
