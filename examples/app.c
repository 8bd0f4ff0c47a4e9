/* app.c - a complete program on tilekit: C = A * B with bf16 A and B made
 * on the host, fp32 C, checked against a dot product on the CPU.
 *
 * Build and run it against an installed tilekit (README, "A C program"):
 *
 *   make install PREFIX=$HOME/tilekit
 *   export PKG_CONFIG_PATH=$HOME/tilekit/lib/pkgconfig
 *   cc examples/app.c -o tilekit-app $(pkg-config --cflags --libs tilekit)
 *   ./tilekit-app
 *
 * Exit status: 0 when every checked element matches, 1 otherwise (no GPU
 * included: it says why and stops before allocating anything).
 *
 * bf16 has no C type: a bf16 value is the upper 16 bits of the fp32 value
 * with the same sign and exponent, so the program keeps bf16 matrices as
 * uint16_t bit patterns and converts from float by rounding away the low
 * 16 bits (to nearest, ties to even). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include <tilekit.h>

/* float -> bf16 bits, rounded to nearest even; NaN stays a (quiet) NaN. */
static uint16_t bf16_from_float(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* bf16 bits -> float: exact. */
static float float_from_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

int main(void)
{
    /* Row-major, no transposes: A is M x K, B is K x N, C is M x N. */
    enum { M = 256, N = 192, K = 320 };
    tk_handle h;
    tk_status st = tk_create(&h);
    if (st != TK_SUCCESS) {
        fprintf(stderr, "tk_create: %s: %s\n", tk_status_string(st), tk_last_error(NULL));
        return 1;
    }
    /* Ask before allocating: can auto-dispatch run this product here? The
     * pointers may be NULL for the question. Without a GPU (or a driver)
     * the answer is TK_ERR_NO_DEVICE with the reason. */
    tk_gemm_problem p = { TK_ROW_MAJOR, TK_OP_N, TK_OP_N, M, N, K, 1.0f, 0.0f, NULL, K, NULL, N, NULL, N, TK_F32 };
    st = tk_kernel_supports(h, NULL, &p);
    if (st != TK_SUCCESS) {
        fprintf(stderr, "tilekit cannot run a %dx%dx%d product here: %s\n  reason: %s\n", M, N, K,
                tk_status_string(st), tk_last_error(h));
        tk_destroy(h);
        return 1;
    }
    printf("auto-dispatch runs %dx%dx%d on %s\n", M, N, K, tk_select_kernel(h, &p));

    /* Inputs on the host: small values, rounded to bf16 once; the CPU
     * reference below uses the same rounded values. */
    uint16_t *ha = malloc(sizeof *ha * M * K), *hb = malloc(sizeof *hb * K * N);
    float *hc = malloc(sizeof *hc * M * N);
    if (!ha || !hb || !hc) {
        fprintf(stderr, "out of host memory\n");
        return 1;
    }
    for (int i = 0; i < M * K; i++)
        ha[i] = bf16_from_float((float)((i * 7) % 13 - 6) / 8.0f);
    for (int i = 0; i < K * N; i++)
        hb[i] = bf16_from_float((float)((i * 5) % 11 - 5) / 4.0f + 0.1f);

    void *a = NULL, *b = NULL, *c = NULL;
    cudaError_t e = cudaMalloc(&a, sizeof *ha * M * K);
    if (!e) e = cudaMalloc(&b, sizeof *hb * K * N);
    if (!e) e = cudaMalloc(&c, sizeof *hc * M * N);
    if (!e) e = cudaMemcpy(a, ha, sizeof *ha * M * K, cudaMemcpyHostToDevice);
    if (!e) e = cudaMemcpy(b, hb, sizeof *hb * K * N, cudaMemcpyHostToDevice);
    if (e) {
        fprintf(stderr, "CUDA: %s\n", cudaGetErrorString(e));
        return 1;
    }

    /* C = 1 * A B + 0 * C on the legacy default stream (NULL), kernel NULL:
     * auto-dispatch. The call is asynchronous; the copy back waits for it. */
    st = tk_gemm(h, TK_ROW_MAJOR, TK_OP_N, TK_OP_N, M, N, K, 1.0f, a, K, b, N, 0.0f, c, TK_F32, N, NULL, NULL);
    if (st != TK_SUCCESS) {
        fprintf(stderr, "tk_gemm: %s: %s\n", tk_status_string(st), tk_last_error(h));
        return 1;
    }
    if ((e = cudaMemcpy(hc, c, sizeof *hc * M * N, cudaMemcpyDeviceToHost))) {
        fprintf(stderr, "CUDA: %s\n", cudaGetErrorString(e));
        return 1;
    }

    /* Every element against a dot product in double on the CPU; the inputs
     * are exact in bf16, so only fp32 accumulation order differs. */
    int bad = 0;
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double t = (double)float_from_bf16(ha[i * K + k]) * float_from_bf16(hb[k * N + j]);
                ref += t;
                mag += t < 0 ? -t : t;
            }
            double diff = hc[i * N + j] - ref, err = (diff < 0 ? -diff : diff) / (mag > 0 ? mag : 1);
            worst = err > worst ? err : worst;
            bad += err > 1e-4;   /* fp32 sums of K = 320 terms: at most about 2e-5 */
        }
    printf("C[0][0] = %g, C[1][2] = %g, C[%d][%d] = %g\n", hc[0], hc[1 * N + 2], M - 1, N - 1, hc[M * N - 1]);
    printf("%s: %d of %d elements off the CPU dot product (worst relative error %.2g)\n", bad ? "FAIL" : "ok", bad,
           M * N, worst);

    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    free(ha);
    free(hb);
    free(hc);
    tk_destroy(h);
    return bad ? 1 : 0;
}
