/* lab_gverify.c - verify of one batched or grouped case (lab.h): the
 * kernel's one call on the whole case, then every group judged on its own
 * against the fp64 reference and the cuBLAS yardsticks (lab_cublas.c), and
 * C's buffer scanned for writes where no group owns it. The lab made the
 * group sizes, so it reads them on the host; the kernel reads them from
 * device memory, as a caller's would be. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "lab.h"

#define FULL_REF_MAX 65536      /* a group's C of at most this many elements is checked whole */
#define GROUP_SAMPLES 1024      /* else its corners and this many random elements */
#define SHOW_GROUPS 16          /* group lines printed at most */

/* Host and device buffers of one case (freed at the end of the run). */
typedef struct gbufs {
    size_t na, nb, nc, esz;
    uint16_t *ha, *hb;
    void *himg, *hgot, *hloop, *hgrp;
    float *hs;
    void *da, *db, *da_abs, *db_abs, *dc, *dc_loop, *dc_grp, *ds;
    int32_t *hoffs, *doffs, *derr;
    int64_t *prow, *pcol;
    double *pwant, *ps;
    tk_lab_report *rep;         /* scratch reports: with the reference, the loop, the grouped call, cuBLAS's own */
} gbufs;

static void free_bufs(gbufs *b)
{
    free(b->ha); free(b->hb); free(b->himg); free(b->hgot); free(b->hloop); free(b->hgrp); free(b->hs);
    free(b->hoffs); free(b->prow); free(b->pcol); free(b->pwant); free(b->ps); free(b->rep);
    cudaFree(b->da); cudaFree(b->db); cudaFree(b->da_abs); cudaFree(b->db_abs); cudaFree(b->dc);
    cudaFree(b->dc_loop); cudaFree(b->dc_grp); cudaFree(b->ds); cudaFree(b->doffs); cudaFree(b->derr);
}

static int alloc_bufs(gbufs *b, int count)
{
    const size_t pts = FULL_REF_MAX > GROUP_SAMPLES + 4 ? FULL_REF_MAX : GROUP_SAMPLES + 4;
    b->ha = malloc(b->na * 2);
    b->hb = malloc(b->nb * 2);
    b->himg = malloc(b->nc * b->esz);
    b->hgot = malloc(b->nc * b->esz);
    b->hloop = malloc(b->nc * b->esz);
    b->hgrp = malloc(b->nc * b->esz);
    b->hs = malloc(b->nc * 4);
    b->hoffs = malloc((size_t)count * 4);
    b->prow = malloc(pts * sizeof *b->prow);
    b->pcol = malloc(pts * sizeof *b->pcol);
    b->pwant = malloc(pts * sizeof *b->pwant);
    b->ps = malloc(pts * sizeof *b->ps);
    b->rep = malloc(4 * sizeof *b->rep);
    if (!b->ha || !b->hb || !b->himg || !b->hgot || !b->hloop || !b->hgrp || !b->hs || !b->hoffs || !b->prow ||
        !b->pcol || !b->pwant || !b->ps || !b->rep)
        return -1;
    cudaError_t e = cudaMalloc(&b->da, b->na * 2);
    if (!e) e = cudaMalloc(&b->db, b->nb * 2);
    if (!e) e = cudaMalloc(&b->da_abs, b->na * 2);
    if (!e) e = cudaMalloc(&b->db_abs, b->nb * 2);
    if (!e) e = cudaMalloc(&b->dc, b->nc * b->esz);
    if (!e) e = cudaMalloc(&b->dc_loop, b->nc * b->esz);
    if (!e) e = cudaMalloc(&b->dc_grp, b->nc * b->esz);
    if (!e) e = cudaMalloc(&b->ds, b->nc * 4);
    if (!e) e = cudaMalloc((void **)&b->doffs, (size_t)count * 4);
    if (!e) e = cudaMalloc((void **)&b->derr, 4);
    return e ? -1 : 0;
}

/* C's image as every call gets it: NaN (all-ones bytes, in both types)
 * everywhere, and with beta != 0 random values (bf16-exact) in the groups'
 * C, so that an element left unwritten, or written outside, shows. The
 * random values go through hgot, free until the run. */
static void make_image(const tk_lab_gcase *g, const tk_gemm_desc *d, gbufs *b)
{
    memset(b->himg, 0xff, b->nc * b->esz);
    if (d->problem.beta == 0.0f)
        return;
    tk_lab_fill(b->hgot, d->problem.c_type, b->nc, tk_lab_mix64(g->c.seed) ^ 0xc);
    const tk_gemm_problem *p = &d->problem;
    for (int i = 0; i < g->count; i++) {
        tk_lab_gpart pt;
        tk_lab_gcase_part(g, d, i, &pt);
        const int64_t lines = p->layout == TK_ROW_MAJOR ? pt.m : pt.n, len = p->layout == TK_ROW_MAJOR ? pt.n : pt.m;
        for (int64_t l = 0; l < lines; l++) {
            const size_t at = (size_t)(pt.c_off + l * p->ldc) * b->esz;
            memcpy((char *)b->himg + at, (char *)b->hgot + at, (size_t)len * b->esz);
        }
    }
}

/* Host inputs (the whole of A's and B's buffers random, never 0), |A|,
 * |B|, and everything on the device. 0, or -1 with why. */
static int prepare(const tk_lab_gcase *g, const tk_gemm_desc *d, gbufs *b, cudaStream_t s, char *why, size_t len)
{
    if (alloc_bufs(b, g->count)) {
        snprintf(why, len, "allocating A %zu, B %zu, C %zu elements: %s", b->na, b->nb, b->nc,
                 cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    tk_lab_fill(b->ha, TK_BF16, b->na, tk_lab_mix64(g->c.seed) ^ 0xa);
    tk_lab_fill(b->hb, TK_BF16, b->nb, tk_lab_mix64(g->c.seed) ^ 0xb);
    make_image(g, d, b);
    tk_lab_gcase_offs(g, b->hoffs);
    cudaError_t e = cudaMemcpyAsync(b->da, b->ha, b->na * 2, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaMemcpyAsync(b->db, b->hb, b->nb * 2, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaMemcpyAsync(b->dc, b->himg, b->nc * b->esz, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaMemcpyAsync(b->dc_loop, b->himg, b->nc * b->esz, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaMemcpyAsync(b->dc_grp, b->himg, b->nc * b->esz, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaMemcpyAsync(b->doffs, b->hoffs, (size_t)g->count * 4, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaMemsetAsync(b->derr, 0, 4, s);
    if (!e) e = cudaMemsetAsync(b->ds, 0, b->nc * 4, s);
    if (!e) e = cudaStreamSynchronize(s);
    /* |x| of a bf16 is x with its sign bit cleared: S's inputs */
    uint16_t *tmp = malloc((b->na > b->nb ? b->na : b->nb) * 2);
    if (!tmp) {
        snprintf(why, len, "out of host memory");
        return -1;
    }
    for (size_t i = 0; i < b->na && !e; i++)
        tmp[i] = b->ha[i] & 0x7fff;
    if (!e) e = cudaMemcpyAsync(b->da_abs, tmp, b->na * 2, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaStreamSynchronize(s);
    for (size_t i = 0; i < b->nb && !e; i++)
        tmp[i] = b->hb[i] & 0x7fff;
    if (!e) e = cudaMemcpyAsync(b->db_abs, tmp, b->nb * 2, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaStreamSynchronize(s);
    free(tmp);
    if (e) {
        snprintf(why, len, "copying the inputs: %s", cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* The points of part pt's C judged against the fp64 reference: all of a
 * small C (returns 1), else the corners and GROUP_SAMPLES random ones. */
static int pick_points(const tk_lab_gcase *g, int i, const tk_lab_gpart *pt, gbufs *b, size_t *np)
{
    size_t t = 0;
    if (pt->m * pt->n <= FULL_REF_MAX) {
        for (int64_t r = 0; r < pt->m; r++)
            for (int64_t c = 0; c < pt->n; c++, t++) {
                b->prow[t] = r;
                b->pcol[t] = c;
            }
        *np = t;
        return 1;
    }
    const int64_t cr[4] = { 0, 0, pt->m - 1, pt->m - 1 }, cc[4] = { 0, pt->n - 1, 0, pt->n - 1 };
    for (; t < 4; t++) {
        b->prow[t] = cr[t];
        b->pcol[t] = cc[t];
    }
    uint64_t ctr = tk_lab_mix64(g->c.seed ^ 0x5a5a ^ ((uint64_t)i << 32));
    for (; t < 4 + GROUP_SAMPLES; t++) {
        b->prow[t] = (int64_t)(tk_lab_mix64(++ctr) % (uint64_t)pt->m);
        b->pcol[t] = (int64_t)(tk_lab_mix64(++ctr) % (uint64_t)pt->n);
    }
    *np = t;
    return 0;
}

static void stat_add(tk_lab_gstat *s, const tk_lab_report *r)
{
    s->checked += r->checked;
    s->over += r->over;
    s->nonfinite += r->nonfinite;
    s->max_abs = fmax(s->max_abs, r->max_abs);
    s->max_rel = r->nonfinite ? INFINITY : fmax(s->max_rel, r->max_rel);
}

/* One group: its verdict from the reports, the case's figures, and the
 * first failed group's report kept. */
static void judge_group(const tk_lab_gcase *g, const tk_gemm_desc *d, int i, const char *kernel, gbufs *b,
                        tk_lab_gverify_result *r)
{
    tk_lab_gpart pt;
    tk_lab_gcase_part(g, d, i, &pt);
    tk_lab_gverdict *v = &r->group[i];
    *v = (tk_lab_gverdict){ pt.m, pt.n, pt.k, 2, 0, 0, 0, 0, 0, NAN };
    if (pt.m == 0 || pt.n == 0) {
        r->empty++;
        return;
    }
    const tk_gemm_problem *p = &d->problem;
    const size_t at = (size_t)pt.c_off * b->esz;
    tk_lab_cmp_spec s = { 0 };
    s.layout = p->layout;
    s.m = pt.m; s.n = pt.n; s.k = pt.k;
    s.alpha = p->alpha; s.beta = p->beta; s.out = p->c_type;
    s.got = (tk_lab_mat){ (char *)b->hgot + at, p->c_type, p->ldc };
    s.c0 = (tk_lab_mat){ (char *)b->himg + at, p->c_type, p->ldc };
    tk_lab_map_dims(kernel, p->layout, &s.tile_rows, &s.tile_cols, &s.warp_rows, &s.warp_cols);
    /* the fp64 reference, at the group's points */
    size_t np = 0;
    r->ref_full &= pick_points(g, i, &pt, b, &np);
    tk_gemm_problem hp;
    tk_lab_gpart_problem(d, &pt, b->ha, b->hb, b->himg, &hp);
    tk_lab_ref_points(&hp, np, b->prow, b->pcol, b->pwant, b->ps);
    s.npts = np;
    s.prow = b->prow; s.pcol = b->pcol; s.pwant = b->pwant; s.ps = b->ps;
    s.exact_ref = 1;
    const int bad_ref = tk_lab_compare(&s, &b->rep[0]);
    stat_add(&r->vs_ref, &b->rep[0]);
    int bad = bad_ref, which = 0;
    /* each cuBLAS: every element (tolerance from S), judging where it
     * agrees with the reference itself */
    const tk_lab_mat base[2] = { { (char *)b->hloop + at, p->c_type, p->ldc },
                                 { (char *)b->hgrp + at, p->c_type, p->ldc } };
    tk_lab_gstat *st[2] = { &r->vs_loop, &r->vs_grouped };
    for (int y = 0; y < 2; y++) {
        if (!st[y]->ran)
            continue;
        tk_lab_cmp_spec own = s;   /* the cuBLAS result against the reference */
        own.got = base[y];
        const int off = tk_lab_compare(&own, &b->rep[3]);
        st[y]->off += off;
        tk_lab_cmp_spec all = s;
        all.npts = 0;
        all.want = base[y];
        all.s = (tk_lab_mat){ b->hs + pt.c_off, TK_F32, p->ldc };
        all.exact_ref = 0;
        const int bad_y = tk_lab_compare(&all, &b->rep[1 + y]);
        stat_add(st[y], &b->rep[1 + y]);
        if (y == 0)
            v->max_rel_loop = b->rep[1].nonfinite ? INFINITY : b->rep[1].max_rel;
        if (bad_y && !off) {
            v->over += b->rep[1 + y].over;
            v->nonfinite += b->rep[1 + y].nonfinite;
            if (!bad)
                which = 1 + y;
            bad = 1;
        }
    }
    v->outcome = bad;
    v->checked = b->rep[0].checked;
    v->over += b->rep[0].over;
    v->nonfinite += b->rep[0].nonfinite;
    v->max_abs = b->rep[0].max_abs;
    v->max_rel = b->rep[0].nonfinite ? INFINITY : b->rep[0].max_rel;
    if (bad && r->failed++ == 0) {
        r->worst = i;
        r->worst_report = b->rep[which];
    }
}

static void set_err(tk_lab_gverify_result *r, int outcome, const char *what, const char *msg)
{
    r->outcome = outcome;
    snprintf(r->msg, sizeof r->msg, "%s%s%s", what, *what ? ": " : "", msg);
}

/* One case's buffers and what stays true of them from kernel to kernel:
 * the inputs, C's image, the cuBLAS yardsticks' results. verify runs
 * several kernels on a case, fuzz every subject: each pays for the case
 * once. */
struct tk_lab_gcache {
    tk_lab_gcase g;             /* the case (sizes pointing into `sizes`) */
    int64_t sizes[TK_LAB_GROUPS_MAX];
    tk_gemm_desc d;             /* over the device buffers */
    gbufs b;
    int cublas;                 /* the yardsticks ran; their results are in hloop, hgrp, hs */
    int loop_ran, grouped_ran;
    char grouped_why[TK_LAB_MSG_LEN];
};

void tk_lab_gcache_free(tk_lab_gcache *c)
{
    if (!c)
        return;
    free_bufs(&c->b);
    free(c);
}

static int same_case(const tk_lab_gcase *x, const tk_lab_gcase *y)
{
    const tk_lab_case *a = &x->c, *b = &y->c;
    if (a->layout != b->layout || a->op_a != b->op_a || a->op_b != b->op_b || a->m != b->m || a->n != b->n ||
        a->k != b->k || memcmp(&a->alpha, &b->alpha, sizeof a->alpha) || memcmp(&a->beta, &b->beta, sizeof a->beta) ||
        a->out != b->out || a->seed != b->seed || a->pad != b->pad || a->offset != b->offset ||
        x->kind != y->kind || x->count != y->count || x->broadcast_a != y->broadcast_a ||
        x->broadcast_b != y->broadcast_b)
        return 0;
    return !x->sizes || !memcmp(x->sizes, y->sizes, (size_t)x->count * sizeof *x->sizes);
}

/* The cache holding case g: the one there, or a new one with g's inputs
 * made and copied (NULL with why). */
static tk_lab_gcache *cache_for(tk_lab_verify *v, const tk_lab_gcase *g, char *why, size_t len)
{
    tk_lab_gcache **slot = tk_lab_verify_gcache(v);
    if (*slot && same_case(&(*slot)->g, g))
        return *slot;
    tk_lab_gcache_free(*slot);
    tk_lab_gcache *c = *slot = calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, len, "out of host memory");
        return NULL;
    }
    c->g = *g;
    if (g->sizes) {
        memcpy(c->sizes, g->sizes, (size_t)g->count * sizeof *g->sizes);
        c->g.sizes = c->sizes;
    }
    tk_lab_gcase_desc(g, NULL, NULL, NULL, &c->d, &c->b.na, &c->b.nb, &c->b.nc);
    c->b.esz = g->c.out == TK_F32 ? 4 : 2;
    if (prepare(&c->g, &c->d, &c->b, (cudaStream_t)tk_lab_verify_stream(v), why, len)) {
        tk_lab_gcache_free(c);
        *slot = NULL;
        return NULL;
    }
    tk_lab_gcase_desc(g, c->b.da, c->b.db, c->b.dc, &c->d, NULL, NULL, NULL);
    if (g->kind != TK_GROUP_BATCHED) {
        c->d.offs = c->b.doffs;
        c->d.group_error = c->b.derr;
    }
    return c;
}

/* The cuBLAS yardsticks of the cached case, once: the loop into dc_loop
 * and S (the loop on |A| and |B|) into ds, cublasGemmGroupedBatchedEx into
 * dc_grp, all copied back. 0, or -1 with r's error set. */
static int run_cublas(tk_lab_verify *v, tk_lab_gcache *c, tk_lab_gverify_result *r)
{
    if (c->cublas)
        return 0;
    char why[TK_LAB_MSG_LEN / 2];
    tk_lab_cublas *x = tk_lab_verify_baselines(v, why, sizeof why);
    if (!x) {
        set_err(r, -1, "cuBLAS", why);
        return -1;
    }
    gbufs *b = &c->b;
    tk_gemm_desc dl = c->d, dg = c->d, ds = c->d;
    dl.problem.c = b->dc_loop;
    dg.problem.c = b->dc_grp;
    ds.problem.a = b->da_abs;
    ds.problem.b = b->db_abs;
    ds.problem.c = b->ds;
    ds.problem.alpha = 1.0f;
    ds.problem.beta = 0.0f;
    ds.problem.c_type = TK_F32;
    if (tk_lab_cublas_prepare(x, &c->g, &dl, why, sizeof why) || tk_lab_cublas_loop(x, why, sizeof why) ||
        tk_lab_cublas_prepare(x, &c->g, &ds, why, sizeof why) || tk_lab_cublas_loop(x, why, sizeof why)) {
        set_err(r, -1, "cuBLAS loop", why);
        return -1;
    }
    if (tk_lab_cublas_prepare(x, &c->g, &dg, why, sizeof why)) {
        set_err(r, -1, "cuBLAS grouped", why);
        return -1;
    }
    c->grouped_ran = tk_lab_cublas_grouped(x, c->grouped_why, sizeof c->grouped_why) == 0;
    cudaError_t e = cudaStreamSynchronize((cudaStream_t)tk_lab_verify_stream(v));
    if (!e) e = cudaMemcpy(b->hloop, b->dc_loop, b->nc * b->esz, cudaMemcpyDeviceToHost);
    if (!e) e = cudaMemcpy(b->hs, b->ds, b->nc * 4, cudaMemcpyDeviceToHost);
    if (!e && c->grouped_ran) e = cudaMemcpy(b->hgrp, b->dc_grp, b->nc * b->esz, cudaMemcpyDeviceToHost);
    if (e) {
        set_err(r, -1, "running cuBLAS", cudaGetErrorString(e));
        return -1;
    }
    c->cublas = c->loop_ran = 1;
    return 0;
}

void tk_lab_gverify_run(tk_lab_verify *v, const char *kernel, const tk_lab_gcase *g, tk_lab_gverify_result *r)
{
    memset(r, 0, sizeof *r);
    r->worst = -1;
    r->count = g->count;
    r->ref_full = 1;
    if (!(r->group = calloc((size_t)g->count, sizeof *r->group))) {
        set_err(r, -1, "", "out of host memory");
        return;
    }
    const tk_handle h = tk_lab_verify_handle(v);
    const cudaStream_t s = (cudaStream_t)tk_lab_verify_stream(v);
    tk_lab_gcache *c = cache_for(v, g, r->msg, sizeof r->msg);
    if (!c) {
        r->outcome = -1;
        return;
    }
    gbufs *b = &c->b;
    /* every kernel starts from the image, its flag from 0 */
    cudaError_t e = cudaMemcpyAsync(b->dc, b->himg, b->nc * b->esz, cudaMemcpyHostToDevice, s);
    if (!e) e = cudaMemsetAsync(b->derr, 0, 4, s);
    if (e) {
        set_err(r, -1, "preparing C", cudaGetErrorString(e));
        return;
    }
    tk_status st = tk_gemm_run(h, &c->d, kernel, s);
    if (st == TK_ERR_NOT_SUPPORTED || st == TK_ERR_ARCH_MISMATCH || st == TK_ERR_OUT_OF_RESOURCES)
        set_err(r, 2, "", tk_last_error(h));
    else if (st)
        set_err(r, -1, kernel, tk_last_error(h));
    if (st || (tk_lab_verify_cublas_on(v) && run_cublas(v, c, r)))
        return;
    if (tk_lab_verify_cublas_on(v)) {
        r->vs_loop.ran = c->loop_ran;
        r->vs_grouped.ran = c->grouped_ran;
        snprintf(r->grouped_why, sizeof r->grouped_why, "%s", c->grouped_why);
    }
    int32_t flag = 0;
    e = cudaStreamSynchronize(s);
    if (!e) e = cudaMemcpy(b->hgot, b->dc, b->nc * b->esz, cudaMemcpyDeviceToHost);
    if (!e) e = cudaMemcpy(&flag, b->derr, 4, cudaMemcpyDeviceToHost);
    if (e) {
        set_err(r, -1, "running the case", cudaGetErrorString(e));
        return;
    }
    for (int i = 0; i < g->count; i++)
        judge_group(&c->g, &c->d, i, kernel, b, r);
    int64_t first = -1;
    r->untouched_writes = tk_lab_gcase_untouched(&c->g, &c->d, b->hgot, b->himg, b->nc, &first);
    if (first >= 0)
        tk_lab_gcase_where(&c->g, &c->d, first, r->first_write, sizeof r->first_write);
    r->group_error = flag != 0;
    r->outcome = r->failed || r->untouched_writes || r->group_error;
}

void tk_lab_gverify_free(tk_lab_gverify_result *r)
{
    free(r->group);
    r->group = NULL;
}

static void print_stat(FILE *f, const char *what, const tk_lab_gstat *s)
{
    fprintf(f, "%s max_abs %.3g max_rel %.3g over %lld nan %lld", what, s->max_abs, s->max_rel, (long long)s->over,
            (long long)s->nonfinite);
}

void tk_lab_gverify_print(FILE *f, const char *kernel, const tk_lab_gcase *g, const tk_lab_gverify_result *r)
{
    char name[256];
    tk_lab_gcase_name(g, name, sizeof name);
    if (tk_lab_verdict_head(f, kernel, name, r->outcome, r->msg))
        return;
    const char *unit = g->kind == TK_GROUP_ROWS || g->kind == TK_GROUP_K ? "group" : "product";
    if (r->vs_loop.ran)
        print_stat(f, " | vs cuBLAS loop:", &r->vs_loop);
    else
        fprintf(f, " | vs cuBLAS: not run");
    if (r->vs_grouped.ran)
        print_stat(f, " | vs cuBLAS grouped:", &r->vs_grouped);
    char what[64];
    snprintf(what, sizeof what, " | vs fp64 (%s %lld):", r->ref_full ? "all" : "sampled", (long long)r->vs_ref.checked);
    print_stat(f, what, &r->vs_ref);
    fprintf(f, " | %d %ss: %d failed, %d empty; outside them: %s\n", r->count, unit, r->failed, r->empty,
            r->untouched_writes ? "WRITTEN" : "untouched");
    if (r->vs_loop.ran && !r->vs_grouped.ran && r->grouped_why[0])
        fprintf(f, "  cuBLAS grouped not run: %s\n", r->grouped_why);
    for (int k = 0; k < 2; k++) {
        const tk_lab_gstat *st = k ? &r->vs_grouped : &r->vs_loop;
        if (st->off)
            fprintf(f, "  cuBLAS %s itself is off the fp64 reference in %d %s(s): the reference alone judges them\n",
                    k ? "grouped" : "loop", st->off, unit);
    }
    for (int i = 0, shown = 0; i < r->count && shown < SHOW_GROUPS; i++) {
        const tk_lab_gverdict *v = &r->group[i];
        if (r->count > SHOW_GROUPS && v->outcome != 1)
            continue;
        shown++;
        fprintf(f, "  %s %d: %lldx%lldx%lld ", unit, i, (long long)v->m, (long long)v->n, (long long)v->k);
        if (v->outcome == 2) {
            fprintf(f, "empty (no rows): nothing to check\n");
            continue;
        }
        fprintf(f, "%s vs fp64 (%lld) max_abs %.3g max_rel %.3g", v->outcome ? "FAIL" : "ok", (long long)v->checked,
                v->max_abs, v->max_rel);
        if (!isnan(v->max_rel_loop))
            fprintf(f, " | vs cuBLAS loop max_rel %.3g", v->max_rel_loop);
        if (v->outcome)
            fprintf(f, " | over %lld nan %lld", (long long)v->over, (long long)v->nonfinite);
        fputc('\n', f);
    }
    if (r->count > SHOW_GROUPS && r->failed > SHOW_GROUPS)
        fprintf(f, "  ... %d more failed %ss\n", r->failed - SHOW_GROUPS, unit);
    if (r->untouched_writes)
        fprintf(f, "  write outside the %ss: %lld element(s) that no %s owns changed, the first at %s\n", unit,
                (long long)r->untouched_writes, unit, r->first_write);
    if (r->group_error)
        fprintf(f, "  group_error was set to 1, yet every offset is valid\n");
    if (r->worst >= 0) {
        fprintf(f, "  %s %d, checked elements:\n", unit, r->worst);
        tk_lab_report_print(f, &r->worst_report, "    ");
    }
}
