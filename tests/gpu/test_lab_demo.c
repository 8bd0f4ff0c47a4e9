/* test_lab_demo.c - the lab's demonstrations on a GPU: verify --plant
 * makes exactly the planted tile fail (in the map against cuBLAS and in the
 * fp64 check, which samples the planted element) and draws it; without it
 * the same case passes; verify --smem-limit makes every kernel that needs
 * more shared memory than the modelled GPU offers be refused before launch
 * with the library's message, and no other kernel refused for shared
 * memory. */
#include <stdlib.h>
#include <string.h>
#include "tilekit.h"
#include "lib/internal.h"
#include "lab/lab.h"
#include "../host/check.h"

static void test_plant(void)
{
    char why[TK_LAB_MSG_LEN];
    tk_lab_verify *v;
    if (tk_lab_verify_open(&v, why, sizeof why)) {
        CHECK(0, "no GPU: %s", why);
        return;
    }
    tk_lab_verify_result *r = malloc(sizeof *r);
    const int64_t pr = 700, pc = 1100;
    static const char *const kernels[] = { "auto", "cublas", "k01_naive" };
    for (size_t i = 0; r && i < sizeof kernels / sizeof kernels[0]; i++)
        for (int layout = 0; layout < 2; layout++) {
            tk_lab_case c = { (tk_layout)layout, TK_OP_N, TK_OP_N, 1000, 1300, 64, 1.0f, 0.0f, TK_F32, 1, 0, 0 };
            tk_lab_verify_set_plant(v, pr, pc);
            tk_lab_verify_run(v, kernels[i], &c, r);
            const tk_lab_map *m = &r->vs_cublas.tiles;
            int at = (int)(pr / m->cell_rows) * m->cols + (int)(pc / m->cell_cols), others = 0;
            for (int t = 0; t < m->rows * m->cols; t++)
                others += t != at && m->cell[t] != '.';
            CHECK(r->outcome == 1 && r->planted && r->vs_cublas.over == 1 && r->vs_ref.over == 1,
                  "%s layout %d: outcome %d, planted %d, over %lld vs cuBLAS, %lld vs fp64", kernels[i], layout,
                  r->outcome, r->planted, (long long)r->vs_cublas.over, (long long)r->vs_ref.over);
            CHECK(m->cell[at] != '.' && m->rel[at] >= 1.0f && others == 0,
                  "%s layout %d: tile of (%lld, %lld) '%c' rel %g, %d other tiles failing", kernels[i], layout,
                  (long long)pr, (long long)pc, m->cell[at], (double)m->rel[at], others);
            char *png = NULL;
            size_t n = 0;
            FILE *f = open_memstream(&png, &n);
            int rc = f ? tk_lab_errmap_png(f, tk_lab_verify_map_report(r) == &r->vs_cublas ? m : &r->vs_ref.tiles,
                                           "plant")
                       : -1;
            if (f)
                fclose(f);
            CHECK(rc == 0 && n > 8 && !memcmp(png, "\x89PNG", 4), "%s: the picture: rc %d, %zu bytes", kernels[i], rc,
                  n);
            free(png);
            tk_lab_verify_set_plant(v, -1, 0);
            tk_lab_verify_run(v, kernels[i], &c, r);
            CHECK(r->outcome == 0 && !r->planted, "%s layout %d without the plant: outcome %d", kernels[i], layout,
                  r->outcome);
        }
    free(r);
    tk_lab_verify_close(v);
}

static void test_smem_limit(void)
{
    char why[TK_LAB_MSG_LEN];
    tk_device d;
    tk_lab_verify *v;
    if (tk_device_query(&d, why, sizeof why) || tk_lab_verify_open(&v, why, sizeof why)) {
        CHECK(0, "no GPU: %s", why);
        return;
    }
    /* about what a GPU with 100 KiB of shared memory per SM lets a block opt
     * in to; kernels that size their stages to the device (k20) see it too */
    const size_t limit = 99 * 1024;
    tk_lab_verify_set_smem_limit(v, limit);
    tk_device small = d;
    small.smem_per_block_optin = limit;
    char lim[32];
    snprintf(lim, sizeof lim, "%zu", limit);
    tk_lab_verify_result *r = malloc(sizeof *r);
    int refused = 0;
    for (int i = 0; r && i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        tk_lab_kinfo ki;
        if (k->min_sm > d.sm || tk_lab_kernel_info(k, &small, &ki, why, sizeof why) != 0)
            continue;   /* not for this GPU, or a library call */
        size_t need = ki.static_smem + ki.dyn_smem;
        /* both B layouts: every seed kernel takes one, and refuses the other for its ops */
        for (int op_b = 0; op_b < 2; op_b++) {
            tk_lab_case c = { TK_ROW_MAJOR, TK_OP_N, (tk_op)op_b, 256, 256, 256, 1.0f, 0.0f, TK_F32, 1, 0, 0 };
            tk_lab_verify_run(v, k->name, &c, r);
            /* the library's check ("... exceed the device limit of L per
             * block") or the kernel's own ("needs N bytes ..., this GPU allows L") */
            int smem_refusal = r->outcome == 2 && strstr(r->msg, "shared memory") && strstr(r->msg, lim);
            if (need > limit) {
                CHECK(smem_refusal || (r->outcome == 2 && !strstr(r->msg, "shared memory")),
                      "%s needs %zu bytes: outcome %d, '%s'", k->name, need, r->outcome, r->msg);
                refused += smem_refusal;
            } else
                CHECK(!smem_refusal, "%s needs %zu bytes, within %zu, yet: %s", k->name, need, limit, r->msg);
        }
    }
    CHECK(refused > 0, "no kernel was refused for shared memory under %zu bytes", limit);
    free(r);
    tk_lab_verify_close(v);
}

void tk_tests(void)
{
    TK_TEST(test_plant);
    TK_TEST(test_smem_limit);
}
