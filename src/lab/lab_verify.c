/* lab_verify.c - runs one case of a kernel on the GPU and judges it twice:
 * every element against cuBLAS run on the same inputs (with S_ij for every
 * element from a cuBLAS GEMM of |A| and |B|), and sampled elements (all of
 * them for small C) against the fp64 CPU reference; with padded leading
 * dimensions, also that C's padding still holds its sentinel. Inputs are
 * cached per shape and seed, sized for the padded case, so a matrix of
 * ops/layouts/outputs/pads reuses them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "../lib/internal.h"
#include "lab.h"

#define FULL_REF_MAX 65536      /* C with at most this many entries is checked whole */
#define SAMPLES_MIN 4096
#define SAMPLES_MAX 16384

struct tk_lab_verify {
    tk_handle h;
    cudaStream_t stream;
    int64_t m, n, k;            /* the cached shape; m = 0: none */
    uint64_t seed;
    uint16_t *ha, *hb;          /* host A and B: tk_lab_buf_elems(m, k) and (k, n), all random */
    void *da, *db, *da_abs, *db_abs;
    size_t c_elems;             /* capacity of the C-sized buffers */
    void *dc, *dc_cublas, *ds;  /* device: kernel's C, cuBLAS's C, S (fp32) */
    void *hc0, *hgot, *hwant, *hs;
    size_t pts_cap;
    int64_t *prow, *pcol;
    double *pwant, *ps;
    int no_cublas;              /* tk_lab_verify_set_cublas(v, 0): the fp64 reference alone */
    int64_t plant_row, plant_col;   /* tk_lab_verify_set_plant; row < 0: none */
    tk_lab_cublas *baselines;   /* batched and grouped cases' cuBLAS (lab_gverify.c); opened on first use */
    tk_lab_gcache *gcache;      /* the last batched or grouped case (lab_gverify.c) */
};

tk_lab_gcache **tk_lab_verify_gcache(tk_lab_verify *v) { return &v->gcache; }

tk_handle tk_lab_verify_handle(const tk_lab_verify *v) { return v->h; }
void *tk_lab_verify_stream(const tk_lab_verify *v) { return v->stream; }
int tk_lab_verify_cublas_on(const tk_lab_verify *v) { return !v->no_cublas; }

tk_lab_cublas *tk_lab_verify_baselines(tk_lab_verify *v, char *why, size_t len)
{
    if (!v->baselines && tk_lab_cublas_open(&v->baselines, v->stream, why, len))
        v->baselines = NULL;
    return v->baselines;
}

void tk_lab_verify_set_cublas(tk_lab_verify *v, int on)
{
    v->no_cublas = !on;
}

void tk_lab_verify_set_plant(tk_lab_verify *v, int64_t row, int64_t col)
{
    v->plant_row = row < 0 || col < 0 ? -1 : row;
    v->plant_col = col;
}

void tk_lab_verify_set_smem_limit(tk_lab_verify *v, size_t bytes)
{
    if (bytes < v->h->dev.smem_per_block_optin)
        v->h->dev.smem_per_block_optin = bytes;
}

const tk_lab_report *tk_lab_verify_map_report(const tk_lab_verify_result *r)
{
    return r->no_cublas || r->cublas_off ? &r->vs_ref : &r->vs_cublas;
}

tk_status tk_lab_verify_open(tk_lab_verify **out, char *why, size_t len)
{
    tk_lab_verify *v = calloc(1, sizeof *v);
    *out = NULL;
    if (!v) {
        snprintf(why, len, "out of host memory");
        return TK_ERR_ALLOC;
    }
    v->plant_row = -1;
    tk_status st = tk_create(&v->h);
    if (st == TK_SUCCESS && *tk_last_error(NULL))   /* an unusable TILEKIT_TUNE file, ignored */
        fprintf(stderr, "tilekit: %s\n", tk_last_error(NULL));
    if (st == TK_SUCCESS && !v->h->have_device)
        st = TK_ERR_NO_DEVICE;
    if (st == TK_SUCCESS && cudaStreamCreateWithFlags(&v->stream, cudaStreamNonBlocking) != cudaSuccess)
        st = TK_ERR_CUDA;
    if (st != TK_SUCCESS) {
        snprintf(why, len, "%s", v->h && !v->h->have_device ? v->h->device_error : tk_last_error(NULL));
        tk_lab_verify_close(v);
        return st;
    }
    *out = v;
    return TK_SUCCESS;
}

static void free_inputs(tk_lab_verify *v)
{
    free(v->ha); free(v->hb);
    cudaFree(v->da); cudaFree(v->db); cudaFree(v->da_abs); cudaFree(v->db_abs);
    v->ha = v->hb = NULL;
    v->da = v->db = v->da_abs = v->db_abs = NULL;
    v->m = 0;
}

static void free_c(tk_lab_verify *v)
{
    cudaFree(v->dc); cudaFree(v->dc_cublas); cudaFree(v->ds);
    free(v->hc0); free(v->hgot); free(v->hwant); free(v->hs);
    v->dc = v->dc_cublas = v->ds = v->hc0 = v->hgot = v->hwant = v->hs = NULL;
    v->c_elems = 0;
}

void tk_lab_verify_close(tk_lab_verify *v)
{
    if (!v)
        return;
    free_inputs(v);
    free_c(v);
    free(v->prow); free(v->pcol); free(v->pwant); free(v->ps);
    tk_lab_gcache_free(v->gcache);
    tk_lab_cublas_close(v->baselines);
    if (v->stream)
        cudaStreamDestroy(v->stream);
    tk_destroy(v->h);
    free(v);
}

/* Host and device copies of A, B, |A|, |B| for the case's shape and seed,
 * big enough for every op and layout with padded ld. The whole buffer is
 * random, padding included: a kernel that reads padding as data gets
 * non-zero garbage and fails, where zeros could let it pass. */
static int ensure_inputs(tk_lab_verify *v, const tk_lab_case *c, char *why, size_t len)
{
    if (v->m == c->m && v->n == c->n && v->k == c->k && v->seed == c->seed)
        return 0;
    free_inputs(v);
    size_t na = tk_lab_buf_elems(c->m, c->k), nb = tk_lab_buf_elems(c->k, c->n);
    size_t nmax = na > nb ? na : nb;
    uint16_t *tmp = malloc(nmax * 2);
    v->ha = malloc(na * 2);
    v->hb = malloc(nb * 2);
    if (!tmp || !v->ha || !v->hb || cudaMalloc(&v->da, na * 2) || cudaMalloc(&v->db, nb * 2) ||
        cudaMalloc(&v->da_abs, na * 2) || cudaMalloc(&v->db_abs, nb * 2)) {
        snprintf(why, len, "allocating inputs for %lldx%lldx%lld: %s", (long long)c->m, (long long)c->n,
                 (long long)c->k, cudaGetErrorString(cudaGetLastError()));
        free(tmp);
        free_inputs(v);
        return -1;
    }
    tk_lab_fill(v->ha, TK_BF16, na, tk_lab_mix64(c->seed) ^ 0xa);
    tk_lab_fill(v->hb, TK_BF16, nb, tk_lab_mix64(c->seed) ^ 0xb);
    /* Copies on the (non-blocking) stream the kernels run on: a plain
     * cudaMemcpy from pageable memory may return before its DMA is done,
     * unordered with that stream. tmp is reused, so wait before refilling. */
    cudaError_t e = cudaMemcpyAsync(v->da, v->ha, na * 2, cudaMemcpyHostToDevice, v->stream);
    if (!e) e = cudaMemcpyAsync(v->db, v->hb, nb * 2, cudaMemcpyHostToDevice, v->stream);
    /* |x| of a bf16 is x with the sign bit cleared */
    for (size_t i = 0; i < na && !e; i++)
        tmp[i] = v->ha[i] & 0x7fff;
    if (!e) e = cudaMemcpyAsync(v->da_abs, tmp, na * 2, cudaMemcpyHostToDevice, v->stream);
    if (!e) e = cudaStreamSynchronize(v->stream);
    for (size_t i = 0; i < nb && !e; i++)
        tmp[i] = v->hb[i] & 0x7fff;
    if (!e) e = cudaMemcpyAsync(v->db_abs, tmp, nb * 2, cudaMemcpyHostToDevice, v->stream);
    if (!e) e = cudaStreamSynchronize(v->stream);
    free(tmp);
    if (e) {
        snprintf(why, len, "copying inputs: %s", cudaGetErrorString(e));
        free_inputs(v);
        return -1;
    }
    v->m = c->m; v->n = c->n; v->k = c->k; v->seed = c->seed;
    return 0;
}

static int ensure_c(tk_lab_verify *v, size_t elems, char *why, size_t len)
{
    if (elems <= v->c_elems)
        return 0;
    free_c(v);
    size_t b = elems * 4;
    if (cudaMalloc(&v->dc, b) || cudaMalloc(&v->dc_cublas, b) || cudaMalloc(&v->ds, b) || !(v->hc0 = malloc(b)) ||
        !(v->hgot = malloc(b)) || !(v->hwant = malloc(b)) || !(v->hs = malloc(b))) {
        snprintf(why, len, "allocating C (%zu elements): %s", elems, cudaGetErrorString(cudaGetLastError()));
        free_c(v);
        return -1;
    }
    /* cuBLAS writes S only inside the view; the rest (the offset, each
     * line's padding) is copied back with it, so give it defined bytes
     * (compute-sanitizer's initcheck reported the copy). */
    if (cudaMemset(v->ds, 0, b)) {
        snprintf(why, len, "clearing S (%zu elements): %s", elems, cudaGetErrorString(cudaGetLastError()));
        free_c(v);
        return -1;
    }
    v->c_elems = elems;
    return 0;
}

/* The points checked against the CPU reference: every entry of a small C;
 * otherwise the four corners, one random entry in each tile (so each map
 * cell is looked at) and random entries up to SAMPLES_MIN. */
static int pick_points(tk_lab_verify *v, const tk_lab_case *c, int tr, int tc, size_t *np)
{
    int64_t mn = c->m * c->n;
    int64_t tiles = ((c->m + tr - 1) / tr) * ((c->n + tc - 1) / tc);
    size_t want = mn <= FULL_REF_MAX ? (size_t)mn : 4 + (size_t)(tiles <= SAMPLES_MAX ? tiles : 0) + SAMPLES_MIN;
    if (want > v->pts_cap) {
        free(v->prow); free(v->pcol); free(v->pwant); free(v->ps);
        v->prow = malloc(want * sizeof(int64_t));
        v->pcol = malloc(want * sizeof(int64_t));
        v->pwant = malloc(want * sizeof(double));
        v->ps = malloc(want * sizeof(double));
        v->pts_cap = want;
        if (!v->prow || !v->pcol || !v->pwant || !v->ps) {
            v->pts_cap = 0;
            return -1;
        }
    }
    size_t t = 0;
    if (mn <= FULL_REF_MAX) {
        for (int64_t i = 0; i < c->m; i++)
            for (int64_t j = 0; j < c->n; j++, t++) {
                v->prow[t] = i;
                v->pcol[t] = j;
            }
        *np = t;
        return 1;
    }
    int64_t corner_r[4] = { 0, 0, c->m - 1, c->m - 1 }, corner_c[4] = { 0, c->n - 1, 0, c->n - 1 };
    for (; t < 4; t++) {
        v->prow[t] = corner_r[t];
        v->pcol[t] = corner_c[t];
    }
    uint64_t ctr = tk_lab_mix64(c->seed ^ 0x5a5a);
    if (tiles <= SAMPLES_MAX)
        for (int64_t i0 = 0; i0 < c->m; i0 += tr)
            for (int64_t j0 = 0; j0 < c->n; j0 += tc, t++) {
                int64_t h = c->m - i0 < tr ? c->m - i0 : tr, w = c->n - j0 < tc ? c->n - j0 : tc;
                v->prow[t] = i0 + (int64_t)(tk_lab_mix64(++ctr) % (uint64_t)h);
                v->pcol[t] = j0 + (int64_t)(tk_lab_mix64(++ctr) % (uint64_t)w);
            }
    for (; t < want; t++) {
        v->prow[t] = (int64_t)(tk_lab_mix64(++ctr) % (uint64_t)c->m);
        v->pcol[t] = (int64_t)(tk_lab_mix64(++ctr) % (uint64_t)c->n);
    }
    if (v->plant_row >= 0 && v->plant_row < c->m && v->plant_col < c->n) {
        v->prow[t - 1] = v->plant_row;      /* the planted element is among the checked ones */
        v->pcol[t - 1] = v->plant_col;
    }
    *np = t;
    return 0;
}

/* verify --plant: element (i, j) of C moves by at least 1 and by more than
 * its own magnitude (x -> x + 1 + |x|), so its relative error exceeds 1. */
static void plant(const tk_lab_case *c, void *hc, int64_t ldc, int64_t i, int64_t j)
{
    int64_t at = tk_lab_index(c->layout, ldc, i, j);
    double x = tk_lab_load(hc, c->out, at);
    double y = x + 1.0 + fabs(x);
    if (c->out == TK_F32)
        ((float *)hc)[at] = (float)y;
    else
        ((uint16_t *)hc)[at] = tk_lab_f32_to_bf16((float)y);
}

void tk_lab_map_dims(const char *kernel, tk_layout layout, int *tile_rows, int *tile_cols, int *warp_rows,
                     int *warp_cols)
{
    const tk_kernel *k = tk_registry_find(kernel);
    int bm = k && k->bm > 0 ? k->bm : 128, bn = k && k->bn > 0 ? k->bn : 128;
    int wm = k ? k->wm : 0, wn = k ? k->wn : 0;
    /* kernels tile the normalized row-major problem: for a column-major C
     * their BM x BN block is BN logical rows by BM logical columns */
    int row = layout == TK_ROW_MAJOR;
    *tile_rows = row ? bm : bn;
    *tile_cols = row ? bn : bm;
    *warp_rows = row ? wm : wn;
    *warp_cols = row ? wn : wm;
}

static void set_err(tk_lab_verify_result *r, int outcome, const char *what, const char *msg)
{
    r->outcome = outcome;
    snprintf(r->msg, sizeof r->msg, "%s%s%s", what, *what ? ": " : "", msg);
}

void tk_lab_verify_run(tk_lab_verify *v, const char *kernel, const tk_lab_case *c, tk_lab_verify_result *r)
{
    memset(r, 0, sizeof *r);
    if (strcmp(kernel, "auto") && !tk_registry_find(kernel)) {
        set_err(r, -1, kernel, "unknown kernel");
        return;
    }
    if (c->offset < 0 || c->offset > TK_LAB_OFFSET_MAX) {
        set_err(r, -1, "offset", "out of range");
        return;
    }
    if (ensure_inputs(v, c, r->msg, sizeof r->msg) ||
        ensure_c(v, tk_lab_buf_elems(c->m, c->n), r->msg, sizeof r->msg)) {
        r->outcome = -1;
        return;
    }
    tk_gemm_problem p, pc, ps;
    tk_lab_problem(c, v->da, v->db, v->dc, &p);
    /* C's storage: the offset's elements before it (guarded like padding),
     * then its lines (rows of a row-major C) times ldc, padding included */
    int64_t line = c->layout == TK_ROW_MAJOR ? c->n : c->m;
    size_t esz = c->out == TK_F32 ? 4 : 2, off = (size_t)c->offset;
    size_t celems = (size_t)((c->layout == TK_ROW_MAJOR ? c->m : c->n) * p.ldc);
    size_t cbytes = (off + celems) * esz;
    tk_status st = tk_kernel_supports(v->h, kernel, &p);
    if (st == TK_ERR_NOT_SUPPORTED || st == TK_ERR_ARCH_MISMATCH || st == TK_ERR_OUT_OF_RESOURCES) {
        set_err(r, 2, "", tk_last_error(v->h));
        return;
    }
    if (st) {
        set_err(r, -1, "supports", tk_last_error(v->h));
        return;
    }
    pc = p;
    pc.c = (char *)v->dc_cublas + off * esz;   /* the same offset as the kernel's C */
    tk_lab_case cs = *c;
    cs.alpha = 1.0f;
    cs.beta = 0.0f;
    cs.out = TK_F32;
    tk_lab_problem(&cs, v->da_abs, v->db_abs, v->ds, &ps);
    /* beta == 0: all-ones bytes are NaN in fp32 and in bf16, so an unwritten
     * element shows; beta != 0: random C0 (bf16-exact values), the same for
     * both. Padding (ldc > line) gets the sentinel, checked after the run. */
    cudaError_t e;
    char *hc0 = (char *)v->hc0 + off * esz, *hgot = (char *)v->hgot + off * esz;
    if (c->beta == 0.0f && p.ldc == line && !off) {
        e = cudaMemsetAsync(v->dc, 0xff, cbytes, v->stream);
        if (!e) e = cudaMemsetAsync(v->dc_cublas, 0xff, cbytes, v->stream);
    } else {
        if (c->beta != 0.0f)
            tk_lab_fill(hc0, c->out, celems, tk_lab_mix64(c->seed) ^ 0xc);
        else
            memset(hc0, 0xff, celems * esz);
        tk_lab_pad_fill(hc0, c->out, c->layout, c->m, c->n, p.ldc);
        /* the elements before C: one line of sentinel padding */
        tk_lab_pad_fill(v->hc0, c->out, TK_ROW_MAJOR, 1, 0, (int64_t)off);
        e = cudaMemcpyAsync(v->dc, v->hc0, cbytes, cudaMemcpyHostToDevice, v->stream);
        if (!e) e = cudaMemcpyAsync(v->dc_cublas, v->hc0, cbytes, cudaMemcpyHostToDevice, v->stream);
    }
    if (e) {
        set_err(r, -1, "preparing C", cudaGetErrorString(e));
        return;
    }
    if ((st = tk_gemm_ex(v->h, &p, kernel, v->stream))) {
        set_err(r, -1, kernel, tk_last_error(v->h));
        return;
    }
    if (!v->no_cublas &&
        ((st = tk_gemm_ex(v->h, &pc, "cublas", v->stream)) || (st = tk_gemm_ex(v->h, &ps, "cublas", v->stream)))) {
        set_err(r, -1, "cublas", tk_last_error(v->h));
        return;
    }
    e = cudaStreamSynchronize(v->stream);
    if (!e) e = cudaMemcpy(v->hgot, v->dc, cbytes, cudaMemcpyDeviceToHost);
    if (!e && !v->no_cublas) e = cudaMemcpy(v->hwant, v->dc_cublas, cbytes, cudaMemcpyDeviceToHost);
    if (!e && !v->no_cublas) e = cudaMemcpy(v->hs, v->ds, (off + celems) * 4, cudaMemcpyDeviceToHost);
    if (e) {
        set_err(r, -1, "running the case", cudaGetErrorString(e));
        return;
    }
    if (v->plant_row >= 0 && v->plant_row < c->m && v->plant_col < c->n) {
        plant(c, hgot, p.ldc, v->plant_row, v->plant_col);
        r->planted = 1;
        r->plant_row = v->plant_row;
        r->plant_col = v->plant_col;
    }

    tk_lab_cmp_spec s = { 0 };
    s.layout = c->layout;
    s.m = c->m; s.n = c->n; s.k = c->k;
    s.alpha = c->alpha; s.beta = c->beta; s.out = c->out;
    s.got = (tk_lab_mat){ hgot, c->out, p.ldc };
    s.c0 = (tk_lab_mat){ hc0, c->out, p.ldc };
    const char *mapk = strcmp(kernel, "auto") ? kernel : tk_select_kernel(v->h, &p);
    tk_lab_map_dims(mapk ? mapk : kernel, c->layout, &s.tile_rows, &s.tile_cols, &s.warp_rows, &s.warp_cols);
    s.want = (tk_lab_mat){ (char *)v->hwant + off * esz, c->out, p.ldc };
    s.s = (tk_lab_mat){ (float *)v->hs + off, TK_F32, p.ldc };
    s.exact_ref = 0;
    int bad = v->no_cublas ? 0 : tk_lab_compare(&s, &r->vs_cublas);

    size_t np = 0;
    int full = pick_points(v, c, s.tile_rows, s.tile_cols, &np);
    if (full < 0) {
        set_err(r, -1, "", "out of host memory for the sample points");
        return;
    }
    r->ref_full = full;
    tk_gemm_problem hp;
    tk_lab_problem(c, v->ha, v->hb, v->hc0, &hp);
    tk_lab_ref_points(&hp, np, v->prow, v->pcol, v->pwant, v->ps);
    s.want = (tk_lab_mat){ 0 };
    s.npts = np;
    s.prow = v->prow; s.pcol = v->pcol; s.pwant = v->pwant; s.ps = v->ps;
    s.exact_ref = 1;
    int bad_ref = tk_lab_compare(&s, &r->vs_ref);
    s.got = (tk_lab_mat){ (char *)v->hwant + off * esz, c->out, p.ldc };
    r->cublas_off = v->no_cublas ? 0 : tk_lab_compare(&s, &r->cublas_vs_ref);
    r->no_cublas = v->no_cublas;
    bad = bad_ref || (bad && !r->cublas_off);
    r->pad_writes = tk_lab_pad_check(hgot, c->out, c->layout, c->m, c->n, p.ldc, &r->pad_row, &r->pad_col);
    if (off) {
        /* a write before C shows as a changed sentinel at row -1 */
        int64_t pr, pc, before = tk_lab_pad_check(v->hgot, c->out, TK_ROW_MAJOR, 1, 0, (int64_t)off, &pr, &pc);
        if (before && !r->pad_writes) {
            r->pad_row = -1;
            r->pad_col = pc - (int64_t)off;
        }
        r->pad_writes += before;
    }
    r->outcome = bad || r->pad_writes;
}

static void print_summary(FILE *f, const char *what, const tk_lab_report *r)
{
    fprintf(f, "%s max_abs %.3g max_rel %.3g sim %.3g over %lld nan %lld", what, r->max_abs, r->max_rel,
            r->similarity, (long long)r->over, (long long)r->nonfinite);
}

int tk_lab_verdict_head(FILE *f, const char *kernel, const char *name, int outcome, const char *msg)
{
    static const char *tag[] = { "ok  ", "FAIL", "skip" };
    if (outcome < 0) {
        fprintf(f, "ERR  %s %s: %s\n", kernel, name, msg);
        return 1;
    }
    fprintf(f, "%s %s %s", tag[outcome], kernel, name);
    if (outcome == 2)
        fprintf(f, ": %s\n", msg);
    return outcome == 2;
}

void tk_lab_verify_print(FILE *f, const char *kernel, const tk_lab_case *c, const tk_lab_verify_result *r)
{
    char name[128];
    tk_lab_case_name(c, name, sizeof name);
    if (tk_lab_verdict_head(f, kernel, name, r->outcome, r->msg))
        return;
    if (r->no_cublas)
        fprintf(f, " | vs cuBLAS: not run");
    else
        print_summary(f, " | vs cuBLAS:", &r->vs_cublas);
    char what[64];
    snprintf(what, sizeof what, " | vs fp64 (%s %lld):", r->ref_full ? "all" : "sampled",
             (long long)r->vs_ref.checked);
    print_summary(f, what, &r->vs_ref);
    fputc('\n', f);
    if (r->planted)
        fprintf(f, "  planted (verify --plant, a lab demonstration): C(%lld, %lld) was changed after the kernel ran\n",
                (long long)r->plant_row, (long long)r->plant_col);
    if (r->pad_writes) {
        tk_gemm_problem p;
        tk_lab_problem(c, NULL, NULL, NULL, &p);
        fprintf(f, "  write outside C at (%lld, %lld): %lld element(s) of the padding beyond the %s changed "
                   "(M %lld, N %lld, ldc %lld)\n", (long long)r->pad_row, (long long)r->pad_col,
                (long long)r->pad_writes, c->layout == TK_ROW_MAJOR ? "N columns" : "M rows", (long long)c->m,
                (long long)c->n, (long long)p.ldc);
    }
    if (r->cublas_off && (r->vs_cublas.over || r->vs_cublas.nonfinite))
        fprintf(f, "  cuBLAS itself is off the fp64 reference at %lld of %lld checked elements (max_rel %.3g): "
                   "the fp64 reference alone judges this case\n",
                (long long)(r->cublas_vs_ref.over + r->cublas_vs_ref.nonfinite), (long long)r->cublas_vs_ref.checked,
                r->cublas_vs_ref.max_rel);
    if (r->vs_cublas.over || r->vs_cublas.nonfinite) {
        fprintf(f, "  vs cuBLAS, every element:\n");
        tk_lab_report_print(f, &r->vs_cublas, "    ");
    }
    if (r->vs_ref.over || r->vs_ref.nonfinite) {
        fprintf(f, "  vs the fp64 CPU reference, checked elements:\n");
        tk_lab_report_print(f, &r->vs_ref, "    ");
    }
}
