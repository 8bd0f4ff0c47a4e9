/* bench/host_cost.c - host time per tk_gemm_ex call, enqueue only: 200
 * back-to-back calls on one stream after a warm-up, the median of 15 such
 * samples, for calls that use no workspace (256^3 NT, auto), that use the
 * split workspace (9 x 1000 x 16360 NT on k40_skinny, four splits) and
 * cuBLAS through its entry (its workspace); then the CUDA calls the
 * handle's ordering adds, alone. Public API only, so the same
 * file builds against an older library for an A/B in one device call.
 *
 *   cc -Iinclude bench/host_cost.c -Lbuild -ltilekit -L$CUDA/lib64 -lcudart -o host_cost && ./host_cost
 */
#include <stdio.h>
#include <cuda_runtime_api.h>
#include "tilekit.h"
#include "host_time.h"

#define CALLS 200
#define SAMPLES 15

int main(void)
{
    tk_handle h;
    if (tk_create(&h) != TK_SUCCESS) {
        fprintf(stderr, "tk_create: %s\n", tk_last_error(NULL));
        return 1;
    }
    void *a, *b, *c;
    cudaStream_t s;
    const size_t n = (size_t)1000 * 16360;   /* elements of the largest operand */
    if (cudaMalloc(&a, n * 2) || cudaMalloc(&b, n * 2) || cudaMalloc(&c, n * 4) || cudaMemset(a, 0x3c, n * 2) ||
        cudaMemset(b, 0x3c, n * 2) ||
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) {
        fprintf(stderr, "setup: %s\n", cudaGetErrorString(cudaGetLastError()));
        return 1;
    }
    const struct { const char *name; int64_t m, n, k; const char *kernel; } cases[] = {
        { "256^3 NT auto (no workspace)", 256, 256, 256, NULL },
        { "9x1000x16360 NT k40_skinny (split workspace)", 9, 1000, 16360, "k40_skinny" },
        { "256^3 NT cublas (its workspace)", 256, 256, 256, "cublas" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, TK_OP_T, cases[i].m, cases[i].n, cases[i].k, 1.0f, 0.0f,
                              a, cases[i].k, b, cases[i].k, c, cases[i].n, TK_F32 };
        double t[SAMPLES], us[3];
        for (int r = -1; r < SAMPLES; r++) {
            double t0 = host_now_us();
            for (int j = 0; j < CALLS; j++)
                if (tk_gemm_ex(h, &p, cases[i].kernel, s) != TK_SUCCESS) {
                    fprintf(stderr, "%s: %s\n", cases[i].name, tk_last_error(h));
                    return 1;
                }
            double t1 = host_now_us();
            cudaStreamSynchronize(s);
            if (r >= 0)
                t[r] = (t1 - t0) / CALLS;
        }
        host_spread(t, SAMPLES, us);
        printf("host_cost %-40s %.2f us/call (min %.2f, max %.2f)\n", cases[i].name, us[0], us[1], us[2]);
    }
    /* the CUDA calls alone: cudaGetDevice, cudaStreamGetId, cudaEventRecord,
     * cudaStreamWaitEvent on the same stream */
    cudaEvent_t ev;
    cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    for (int what = 0; what < 4; what++) {
        static const char *names[4] = { "cudaGetDevice", "cudaStreamGetId", "cudaEventRecord",
                                        "cudaStreamWaitEvent" };
        double t[SAMPLES], us[3];
        for (int r = -1; r < SAMPLES; r++) {
            double t0 = host_now_us();
            for (int j = 0; j < CALLS; j++) {
                int d;
                unsigned long long id;
                if (what == 0)
                    cudaGetDevice(&d);
                else if (what == 1)
                    cudaStreamGetId(s, &id);
                else if (what == 2)
                    cudaEventRecord(ev, s);
                else
                    cudaStreamWaitEvent(s, ev, 0);
            }
            double t1 = host_now_us();
            cudaStreamSynchronize(s);
            if (r >= 0)
                t[r] = (t1 - t0) / CALLS;
        }
        host_spread(t, SAMPLES, us);
        printf("host_cost %-40s %.2f us/call (min %.2f, max %.2f)\n", names[what], us[0], us[1], us[2]);
    }
    cudaEventDestroy(ev);
    tk_destroy(h);
    return 0;
}
