/* test_info.c - the CUDA error behind a status (tk_last_cuda_error) and the
 * build information (tk_get_build_info), issue 37 items 5 and 6, on the
 * CPU: what is recorded where the library fails for a CUDA runtime error,
 * an allocation or cuBLAS, what is cleared and when, per handle and per
 * thread, and the versioned structs' rule for both. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "lib/internal.h"
#include "check.h"
#include "fake_handle.h"

static tk_cuda_error last(tk_handle h)
{
    tk_cuda_error e = TK_CUDA_ERROR_INIT;
    tk_status st = tk_last_cuda_error(h, &e);
    CHECK(st == TK_SUCCESS, "tk_last_cuda_error: %s", tk_status_string(st));
    return e;
}

static cudaError_t current_fails(int *dev)
{
    *dev = -1;
    return cudaErrorNoDevice;
}

static void *thread_last(void *arg)
{
    *(tk_cuda_error *)arg = last(NULL);
    return NULL;
}

static void test_cuda_error_recorded(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    fake.get_device = current_fails;   /* cudaGetDevice fails: TK_ERR_CUDA from the device check */
    tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, 64, 64, 64, 1.0f, 0.0f, (void *)0x100000, 64,
                          (void *)0x200000, 64, (void *)0x300000, 64, TK_F32 };
    tk_status st = tk_gemm_ex(&fake, &p, "k01_naive", NULL);
    CHECK(st == TK_ERR_CUDA, "cudaGetDevice failing: %s", tk_status_string(st));
    tk_cuda_error e = last(&fake);
    CHECK(e.size == sizeof e && e.cuda_error == cudaErrorNoDevice && !strcmp(e.cuda_name, "cudaErrorNoDevice") &&
              e.cublas_status == 0 && !strcmp(e.cublas_name, ""),
          "recorded %d '%s', cuBLAS %d '%s'", e.cuda_error, e.cuda_name, e.cublas_status, e.cublas_name);
    e = last(NULL);
    CHECK(e.cuda_error == cudaErrorNoDevice, "the thread's: %d", e.cuda_error);
    /* another thread has its own: nothing failed there */
    tk_cuda_error other = { 0 };
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_last, &other) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(other.cuda_error == 0 && !strcmp(other.cuda_name, ""), "another thread read %d", other.cuda_error);
    /* the inspection itself refused (NULL out): the handle's record stays */
    CHECK(tk_last_cuda_error(&fake, NULL) == TK_ERR_INVALID_VALUE && starts(tk_last_error(NULL), "out:"),
          "NULL out: %s", tk_last_error(NULL));
    CHECK(last(&fake).cuda_error == cudaErrorNoDevice, "a refused inspection cleared the record");
    /* a failure of another cause: nothing behind it */
    p.lda = 1;
    CHECK(tk_gemm_ex(&fake, &p, NULL, NULL) == TK_ERR_INVALID_VALUE, "bad lda");
    e = last(&fake);
    CHECK(e.cuda_error == 0 && e.cublas_status == 0 && !strcmp(e.cuda_name, ""), "after an argument error: %d",
          e.cuda_error);
    /* a success clears it */
    p.lda = 64;
    CHECK(tk_gemm_ex(&fake, &p, NULL, NULL) == TK_ERR_CUDA && last(&fake).cuda_error == cudaErrorNoDevice,
          "again");
    p.m = 0;
    CHECK(tk_gemm_ex(&fake, &p, NULL, NULL) == TK_SUCCESS && last(&fake).cuda_error == 0, "after a success: %d",
          last(&fake).cuda_error);
}

/* A failed allocation (the test hook: a real cudaMallocAsync of 2^62
 * bytes, or the ordering event) carries cudaErrorMemoryAllocation. */
static void test_alloc_recorded(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_call_begin(&fake);
    fake.fail_alloc = 1;
    tk_status st = tk_handle_ws_begin(&fake, NULL);
    CHECK(st == TK_ERR_ALLOC, "event creation failed by the hook: %s", tk_status_string(st));
    tk_cuda_error e = last(&fake);
    CHECK(e.cuda_error == cudaErrorMemoryAllocation && !strcmp(e.cuda_name, "cudaErrorMemoryAllocation"),
          "recorded %d '%s'", e.cuda_error, e.cuda_name);
}

/* What a launcher notes is recorded with the call's failure; a note
 * without a failure is forgotten when the next call begins. */
static void test_notes(void)
{
    struct tk_handle_s fake;
    fh_init(&fake, 90);
    tk_call_begin(&fake);
    tk_note_cuda_error(cudaErrorLaunchFailure);
    tk_fail(&fake, TK_ERR_CUDA, "kernel x: launch: unspecified launch failure");
    CHECK(last(&fake).cuda_error == cudaErrorLaunchFailure, "launcher's note: %d", last(&fake).cuda_error);
    tk_call_begin(&fake);
    tk_note_cublas_status(CUBLAS_STATUS_EXECUTION_FAILED);
    tk_fail(&fake, TK_ERR_CUBLAS, "cublasGemmEx: execution failed");
    tk_cuda_error e = last(&fake);
    CHECK(e.cublas_status == CUBLAS_STATUS_EXECUTION_FAILED && !strcmp(e.cublas_name, "CUBLAS_STATUS_EXECUTION_FAILED") &&
              e.cuda_error == 0,
          "cuBLAS's note: %d '%s'", e.cublas_status, e.cublas_name);
    tk_call_begin(&fake);
    tk_note_cuda_error(cudaErrorInvalidValue);   /* noted, then the call succeeds */
    tk_call_begin(&fake);
    tk_fail(&fake, TK_ERR_NOT_SUPPORTED, "later call: no kernel");
    CHECK(last(&fake).cuda_error == 0, "a stale note was recorded: %d", last(&fake).cuda_error);
    if (!have_gpu()) {   /* cuBLAS without a GPU: cublasCreate fails, its status recorded */
        tk_handle h = NULL;
        CHECK(tk_create(&h) == TK_SUCCESS, "tk_create");
        tk_call_begin(h);
        tk_status st = tk_handle_cublas(h);
        e = last(h);
        CHECK(st == TK_ERR_CUBLAS && e.cublas_status != 0 && starts(e.cublas_name, "CUBLAS_STATUS_"),
              "cublasCreate without a GPU: %s, %d '%s'", tk_status_string(st), e.cublas_status, e.cublas_name);
        tk_destroy(h);
    }
}

static void test_cuda_error_struct(void)
{
    tk_cuda_error small = { .size = 4 };
    CHECK(tk_last_cuda_error(NULL, &small) == TK_ERR_INVALID_VALUE && starts(tk_last_error(NULL), "out->size:"),
          "small: %s", tk_last_error(NULL));
    struct { tk_cuda_error e; char future[8]; } big;
    memset(&big, 0x77, sizeof big);
    big.e.size = sizeof big;
    CHECK(tk_last_cuda_error(NULL, &big.e) == TK_SUCCESS && big.e.size == sizeof big && big.future[0] == 0 &&
              big.future[7] == 0 && big.e.cuda_name,
          "larger struct");
}

static void test_build_info(void)
{
    tk_build_info b = TK_BUILD_INFO_INIT;
    tk_status st = tk_get_build_info(&b);
    CHECK(st == TK_SUCCESS && b.size == sizeof b, "tk_get_build_info: %s", tk_status_string(st));
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", TILEKIT_VERSION_MAJOR, TILEKIT_VERSION_MINOR, TILEKIT_VERSION_PATCH);
    CHECK(b.version == TILEKIT_VERSION && b.version_string && !strcmp(b.version_string, want), "version %d '%s'",
          b.version, b.version_string ? b.version_string : "NULL");
    /* ARCHS as the Makefile passes it: words of digits and an optional letter ("80 90a") */
    int words = 0, ok = b.archs && *b.archs && strcmp(b.archs, "unknown");
    for (const char *s = ok ? b.archs : ""; *s && ok; words++) {
        int digits = 0;
        while (*s >= '0' && *s <= '9') {
            s++;
            digits++;
        }
        if (*s >= 'a' && *s <= 'z')
            s++;
        ok = digits >= 2 && (*s == ' ' || !*s);
        while (*s == ' ')
            s++;
    }
    CHECK(ok && words >= 1, "archs '%s'", b.archs ? b.archs : "NULL");
    CHECK(b.cuda_runtime_built == CUDART_VERSION && b.cublas_built == CUBLAS_VERSION, "built with %d / %d",
          b.cuda_runtime_built, b.cublas_built);
    /* the runtime and cuBLAS the tests link are the library's: the same versions */
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    CHECK(b.cuda_runtime_loaded == rt && rt > 0, "runtime loaded %d, %d", b.cuda_runtime_loaded, rt);
    CHECK(b.cublas_loaded / 10000 == CUBLAS_VER_MAJOR && b.cublas_loaded > 0, "cuBLAS loaded %d", b.cublas_loaded);
    CHECK(b.cuda_driver >= 0 && (b.cuda_driver > 0 || !have_gpu()), "driver %d", b.cuda_driver);
    if (have_gpu())   /* without a driver the runtime repeats its error for good */
        CHECK(cudaGetLastError() == cudaSuccess, "a runtime error left behind");
    /* the versioned rule */
    CHECK(tk_get_build_info(NULL) == TK_ERR_INVALID_VALUE && starts(tk_last_error(NULL), "out:"), "NULL: %s",
          tk_last_error(NULL));
    tk_build_info small = { .size = sizeof(size_t) + 1 };
    CHECK(tk_get_build_info(&small) == TK_ERR_INVALID_VALUE && starts(tk_last_error(NULL), "out->size:"),
          "small: %s", tk_last_error(NULL));
    struct { tk_build_info b; int future[4]; } big;
    memset(&big, 0x33, sizeof big);
    big.b.size = sizeof big;
    CHECK(tk_get_build_info(&big.b) == TK_SUCCESS && big.b.size == sizeof big && big.future[0] == 0 &&
              big.future[3] == 0 && big.b.version == TILEKIT_VERSION,
          "larger struct");
}

void tk_tests(void)
{
    TK_TEST(test_cuda_error_recorded);
    TK_TEST(test_alloc_recorded);
    TK_TEST(test_notes);
    TK_TEST(test_cuda_error_struct);
    TK_TEST(test_build_info);
}
