/* lab_info.c - what the device offers and what each kernel asks of it:
 * registers, spills, shared memory, threads, and the occupancy that follows. */
#include <stdlib.h>
#include <string.h>
#include <cuda_runtime_api.h>
#include "../lib/internal.h"
#include "lab.h"

static int wanted(const char *name, const char *const *kernels)
{
    if (!kernels)
        return 1;
    for (; *kernels; kernels++)
        if (!strcmp(*kernels, name))
            return 1;
    return 0;
}

/* The width of a name column: the longest name printed, at least min
 * (names longer than a fixed width would push the figures out of their
 * columns). */
static int kernel_width(const char *const *kernels, int min)
{
    int w = min;
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (wanted(k->name, kernels) && (int)strlen(k->name) > w)
            w = (int)strlen(k->name);
    }
    return w;
}

static int family_width(int min)
{
    int w = min;
    for (int i = 0; i < tk_family_count(); i++)
        if ((int)strlen(tk_family_at(i)->name) > w)
            w = (int)strlen(tk_family_at(i)->name);
    return w;
}

/* The problem bits a family accepts, as info prints them ("bf16->f32,bf16 dense"). */
static void accepts_str(unsigned accepts, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s%s%s%s%s%s", accepts & TK_ACCEPT_AB_BF16 ? "bf16" : "",
             accepts & TK_ACCEPT_AB_FP8 ? ",fp8" : "", accepts & TK_ACCEPT_C_F32 ? "->f32" : "",
             accepts & TK_ACCEPT_C_BF16 ? ",bf16" : "", accepts & TK_ACCEPT_DENSE ? " dense" : "",
             accepts & TK_ACCEPT_BATCHED ? " batched" : "", accepts & TK_ACCEPT_GROUPED ? " grouped" : "",
             accepts & TK_ACCEPT_EPILOGUE ? " epilogue" : "");
}

static void print_registry(FILE *f, const char *const *kernels)
{
    /* the table's families (src/kernels/table.def), then its configurations */
    const int fw = family_width(6), kw = kernel_width(kernels, 6);
    int aw = 7;   /* the accepts column: as wide as its longest entry */
    char acc[64];
    for (int i = 0; i < tk_family_count(); i++) {
        accepts_str(tk_family_at(i)->accepts, acc, sizeof acc);
        aw = (int)strlen(acc) > aw ? (int)strlen(acc) : aw;
    }
    fprintf(f, "%-*s %6s %-*s %s\n", fw, "family", "min_sm", aw, "accepts", "description");
    for (int i = 0; i < tk_family_count(); i++) {
        const tk_family *fam = tk_family_at(i);
        accepts_str(fam->accepts, acc, sizeof acc);
        fprintf(f, "%-*s %6d %-*s %s\n", fw, fam->name, fam->min_sm, aw, acc, fam->description);
    }
    fprintf(f, "\n%-*s %-*s %6s %11s %4s %5s  %s\n", kw, "kernel", fw, "family", "min_sm", "BMxBNxBK", "swap", "rank",
            "description");
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (!wanted(k->name, kernels))
            continue;
        char tile[32] = "-";
        if (k->bm && k->bn)
            snprintf(tile, sizeof tile, "%dx%dx%d", k->bm, k->bn, k->bk);
        fprintf(f, "%-*s %-*s %6d %11s %4d %5d  %s\n", kw, k->name, fw, k->family->name, k->min_sm, tile, k->swap,
                k->auto_rank, k->description);
    }
}

static void print_device(FILE *f, const tk_device *d)
{
    /* double data rate: two transfers per memory clock */
    double gbs = 2.0 * d->mem_clock_khz * 1e3 * (d->mem_bus_bits / 8) / 1e9;
    fprintf(f, "device %d: %s, sm_%d, %d SMs\n", d->id, d->name, d->sm, d->sm_count);
    fprintf(f, "  clocks: max SM %d MHz, memory %d MHz x %d-bit bus (%.0f GB/s theoretical)\n", d->clock_khz / 1000,
            d->mem_clock_khz / 1000, d->mem_bus_bits, gbs);
    fprintf(f, "  L2 %.1f MiB; shared memory %zu KiB per block (opt-in), %zu KiB per SM\n", d->l2_bytes / 1048576.0,
            d->smem_per_block_optin / 1024, d->smem_per_sm / 1024);
    fprintf(f, "  registers %d per block, %d per SM; threads %d per block, %d per SM\n", d->regs_per_block,
            d->regs_per_sm, d->max_threads_per_block, d->max_threads_per_sm);
    double peak = tk_lab_peak_tflops(d->sm, d->sm_count, d->clock_khz);
    if (peak > 0)
        fprintf(f, "  peak dense bf16: %.1f TFLOP/s (%d SMs x %d flop/clk x %d MHz)\n", peak, d->sm_count,
                tk_lab_flop_per_clk(d->sm), d->clock_khz / 1000);
}

int tk_lab_kernel_info(const tk_kernel *k, const tk_device *d, tk_lab_kinfo *ki, char *why, size_t len)
{
    memset(ki, 0, sizeof *ki);
    ki->regs = -1;
    tk_resources r;
    tk_kernel_resources(k, NULL, d, &r);
    if (!r.func)
        return 1;
    tk_func_attrs fa;
    if (tk_func_attrs_get(r.func, &fa, why, len))
        return -1;
    cudaError_t e = cudaSuccess;
    if (r.dyn_smem > 0)
        e = cudaFuncSetAttribute(r.func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)r.dyn_smem);
    int blocks = 0;
    if (!e)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, r.func, r.threads, r.dyn_smem);
    if (e) {
        snprintf(why, len, "%s", cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    int warps = (r.threads + 31) / 32;
    ki->regs = fa.num_regs;
    ki->local_bytes = fa.local_bytes;
    ki->static_smem = fa.static_smem;
    ki->dyn_smem = r.dyn_smem;
    ki->threads = r.threads;
    ki->blocks_per_sm = blocks;
    ki->occupancy = 100.0 * blocks * warps * 32 / d->max_threads_per_sm;
    return 0;
}

/* One kernel's resources on d, as info prints and writes them. */
typedef struct info_row {
    int st;                      /* 0 figures in ki; 1 a library call (no figures of its own);
                                    2 the GPU is older than the kernel's min_sm; -1 a CUDA error (why) */
    tk_lab_kinfo ki;
    char why[TK_MSG_LEN];
} info_row;

static void kernel_row(const tk_kernel *k, const tk_device *d, info_row *r)
{
    r->why[0] = '\0';
    r->st = d->sm < k->min_sm ? 2 : tk_lab_kernel_info(k, d, &r->ki, r->why, sizeof r->why);
}

static void print_kernel(FILE *f, const tk_kernel *k, const info_row *r, int width)
{
    fprintf(f, "%-*s ", width, k->name);
    if (r->st == 2)
        fprintf(f, "needs sm_%d\n", k->min_sm);
    else if (r->st == 1)
        fprintf(f, "library (resources chosen by the library)\n");
    else if (r->st < 0)
        fprintf(f, "%s\n", r->why);
    else
        fprintf(f, "%5d %8zu %11zu %9zu %8d %10d %8.0f%%\n", r->ki.regs, r->ki.local_bytes, r->ki.static_smem,
                r->ki.dyn_smem, r->ki.threads, r->ki.blocks_per_sm, r->ki.occupancy);
}

/* ---- info --json ---- */

static void json_key_str(FILE *f, const char *key, const char *s, int first)
{
    fprintf(f, "%s\"%s\":", first ? "" : ",", key);
    tk_lab_json_str(f, s);
}

static void write_device_json(FILE *f, const tk_device *d)
{
    fprintf(f, "{\"id\":%d", d->id);
    json_key_str(f, "name", d->name, 0);
    fprintf(f, ",\"sm\":%d,\"sm_count\":%d,\"clock_mhz\":%d,\"mem_clock_mhz\":%d,\"mem_bus_bits\":%d,"
               "\"l2_bytes\":%d,\"smem_per_block_optin\":%zu,\"smem_per_sm\":%zu,\"regs_per_block\":%d,"
               "\"regs_per_sm\":%d,\"max_threads_per_block\":%d,\"max_threads_per_sm\":%d",
            d->sm, d->sm_count, d->clock_khz / 1000, d->mem_clock_khz / 1000, d->mem_bus_bits, d->l2_bytes,
            d->smem_per_block_optin, d->smem_per_sm, d->regs_per_block, d->regs_per_sm, d->max_threads_per_block,
            d->max_threads_per_sm);
    double peak = tk_lab_peak_tflops(d->sm, d->sm_count, d->clock_khz);
    if (peak > 0)
        fprintf(f, ",\"peak_tflops\":%.1f", peak);
    else
        fputs(",\"peak_tflops\":null", f);
    fputc('}', f);
}

/* The device the kernels' checks are asked about: dev, or without one an
 * sm_90 device of 132 SMs and an H100's shared memory (the checks read the
 * device, never the GPU). */
static const tk_device *check_device(const tk_device *dev, tk_device *h100)
{
    if (dev)
        return dev;
    memset(h100, 0, sizeof *h100);
    h100->id = -1;
    h100->sm = 90;
    h100->sm_count = 132;
    h100->smem_per_block_optin = 227 * 1024;   /* k20 and k21 size their stages by it */
    h100->smem_per_sm = 228 * 1024;
    return h100;
}

/* The problem info asks the kernels' checks about: 1024^3 row-major, A M x
 * K, B N x K (op_b T), bf16 C, alpha 1, beta 0, at stand-in addresses
 * (aligned, apart, never dereferenced by a check) from INFO_BASE. */
#define INFO_N 1024
#define INFO_BASE ((char *)(uintptr_t)(UINT64_C(1) << 40))

static void stand_in_args(tk_args *a)
{
    memset(a, 0, sizeof *a);
    a->m = a->n = a->k = INFO_N;
    a->a = INFO_BASE;
    a->lda = INFO_N;
    a->op_a = TK_OP_N;
    a->b = INFO_BASE + (UINT64_C(1) << 30);
    a->ldb = INFO_N;
    a->op_b = TK_OP_T;
    a->c = INFO_BASE + (UINT64_C(2) << 30);
    a->ldc = INFO_N;
    a->c_type = TK_BF16;
    a->alpha = 1.0f;
}

/* Which scale modes (bit m: tk_scale_mode m) kernel k's own check
 * (tk_kernel_supports_args) takes with FP8 operands of formats fa x fb
 * (tk_fp8_format) on a 1024^3 row-major problem, A M x K and B N x K
 * (op_b T: the K-major layout of the FP8 tensor cores), bf16 C, beta 0,
 * 16-byte aligned operands, block scales' strides M and ceil(N / 128); 0
 * for a family without FP8 operands or a device below its minimum. */
static unsigned fp8_modes(const tk_kernel *k, const tk_device *dev, int fa, int fb)
{
    if (!(k->family->accepts & TK_ACCEPT_AB_FP8) || dev->sm < k->min_sm)
        return 0;
    const int64_t n = INFO_N;
    char *const base = INFO_BASE;
    unsigned modes = 0;
    for (int mode = TK_SCALE_TENSOR; mode <= TK_SCALE_BLOCK; mode++) {
        tk_args a;
        stand_in_args(&a);
        const tk_fp8_args f = { fa, fb, mode, (const float *)(base + (UINT64_C(3) << 30)),
                                (const float *)(base + (UINT64_C(4) << 30)), mode == TK_SCALE_BLOCK ? n : 0,
                                mode == TK_SCALE_BLOCK ? n / 128 : 0, 0, 0 };
        a.fp8 = &f;
        char why[TK_MSG_LEN];
        if (tk_kernel_supports_args(k, &a, dev, why, sizeof why) == TK_SUCCESS)
            modes |= 1u << mode;
    }
    return modes;
}

static const int fp8_formats[2] = { TK_FP8_E4M3, TK_FP8_E5M2 };
static const char *fp8_format_word(int f) { return f == TK_FP8_E4M3 ? "e4m3" : "e5m2"; }

/* Which FP8 operands each kernel takes (fp8_modes for the four pairings of
 * formats): a line per kernel of a family with TK_ACCEPT_AB_FP8 that takes
 * any, the pairings grouped by the modes they take ("any pairing" when all
 * four take the same ones). */
static void print_fp8(FILE *f, const tk_device *dev, const char *const *kernels)
{
    tk_device h100;
    dev = check_device(dev, &h100);
    const int kw = kernel_width(kernels, 6);
    int header = 0;
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (!wanted(k->name, kernels))
            continue;
        unsigned modes[4], any = 0;
        for (int p = 0; p < 4; p++)
            any |= modes[p] = fp8_modes(k, dev, fp8_formats[p >> 1], fp8_formats[p & 1]);
        if (!any)
            continue;
        char line[256] = "";
        for (int p = 0; p < 4; p++) {
            int first = 1;   /* the first pairing with these modes names them all */
            for (int q = 0; q < p; q++)
                first &= modes[q] != modes[p];
            if (!first || !modes[p])
                continue;
            int same = 0;
            for (int q = p; q < 4; q++)
                same += modes[q] == modes[p];
            size_t at = strlen(line);
            if (same == 4)
                snprintf(line + at, sizeof line - at, "any pairing:");
            for (int q = p; q < 4 && same < 4; q++)
                if (modes[q] == modes[p]) {
                    at = strlen(line);
                    snprintf(line + at, sizeof line - at, "%s%s x %s", at ? (q == p ? "; " : ", ") : "",
                             fp8_format_word(fp8_formats[q >> 1]), fp8_format_word(fp8_formats[q & 1]));
                }
            if (same < 4) {
                at = strlen(line);
                snprintf(line + at, sizeof line - at, ":");
            }
            for (int m = TK_SCALE_TENSOR; m <= TK_SCALE_BLOCK; m++)
                if (modes[p] & (1u << m)) {
                    at = strlen(line);
                    snprintf(line + at, sizeof line - at, " %s", tk_lab_scale_mode_name(m));
                }
        }
        if (!header++)
            fprintf(f, "\n%-*s %s\n", kw, "kernel", "FP8 operands (tilekit.h's tk_gemm_desc version 4): A x B formats "
                                                   "and scale modes its check takes");
        fprintf(f, "%-*s %s\n", kw, k->name, line);
    }
}

/* ,"fp8":[...]: per kernel that takes FP8 operands, each pairing of formats with the scale modes it takes. */
static void write_fp8_json(FILE *f, const tk_device *dev, const char *const *kernels)
{
    tk_device h100;
    dev = check_device(dev, &h100);
    fputs(",\n\"fp8\":[", f);
    for (int i = 0, n = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (!wanted(k->name, kernels) || !(k->family->accepts & TK_ACCEPT_AB_FP8))
            continue;
        fprintf(f, "%s\n {", n++ ? "," : "");
        json_key_str(f, "kernel", k->name, 1);
        fputs(",\"takes\":{", f);
        for (int p = 0; p < 4; p++) {
            const unsigned modes = fp8_modes(k, dev, fp8_formats[p >> 1], fp8_formats[p & 1]);
            fprintf(f, "%s\"%sx%s\":[", p ? "," : "", fp8_format_word(fp8_formats[p >> 1]),
                    fp8_format_word(fp8_formats[p & 1]));
            for (int m = TK_SCALE_TENSOR, c = 0; m <= TK_SCALE_BLOCK; m++)
                if (modes & (1u << m))
                    fprintf(f, "%s\"%s\"", c++ ? "," : "", tk_lab_scale_mode_name(m));
            fputc(']', f);
        }
        fputs("}}", f);
    }
    fputc(']', f);
}

/* The document: tool, version, device (null without one, with
 * device_error saying why), the table's families and configurations, and
 * each wanted kernel's resources on the device ([] without one). */
static void write_json(FILE *f, const tk_device *d, const char *device_error, const char *const *kernels,
                       const info_row *rows)
{
    fprintf(f, "{\"tool\":\"tilekit info\",\"version\":\"%d.%d.%d\",\n\"device\":", TILEKIT_VERSION_MAJOR,
            TILEKIT_VERSION_MINOR, TILEKIT_VERSION_PATCH);
    if (d)
        write_device_json(f, d);
    else {
        fputs("null,\n", f);
        json_key_str(f, "device_error", device_error, 1);
    }
    fputs(",\n\"families\":[", f);
    static const struct { unsigned bit; const char *name; } bits[] = {
        { TK_ACCEPT_AB_BF16, "ab_bf16" }, { TK_ACCEPT_C_F32, "c_f32" }, { TK_ACCEPT_C_BF16, "c_bf16" },
        { TK_ACCEPT_DENSE, "dense" }, { TK_ACCEPT_BATCHED, "batched" }, { TK_ACCEPT_GROUPED, "grouped" },
        { TK_ACCEPT_EPILOGUE, "epilogue" }, { TK_ACCEPT_AB_FP8, "ab_fp8" },
    };
    for (int i = 0; i < tk_family_count(); i++) {
        const tk_family *fam = tk_family_at(i);
        fprintf(f, "%s\n {", i ? "," : "");
        json_key_str(f, "name", fam->name, 1);
        fprintf(f, ",\"min_sm\":%d,\"accepts\":[", fam->min_sm);
        for (size_t b = 0, n = 0; b < sizeof bits / sizeof bits[0]; b++)
            if (fam->accepts & bits[b].bit)
                fprintf(f, "%s\"%s\"", n++ ? "," : "", bits[b].name);
        fputc(']', f);
        json_key_str(f, "description", fam->description, 0);
        fputc('}', f);
    }
    fputs("],\n\"kernels\":[", f);
    int n = 0;
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (!wanted(k->name, kernels))
            continue;
        fprintf(f, "%s\n {", n++ ? "," : "");
        json_key_str(f, "name", k->name, 1);
        json_key_str(f, "family", k->family->name, 0);
        fprintf(f, ",\"min_sm\":%d,\"bm\":%d,\"bn\":%d,\"bk\":%d,\"swap\":%d,\"auto_rank\":%d", k->min_sm, k->bm,
                k->bn, k->bk, k->swap, k->auto_rank);
        json_key_str(f, "description", k->description, 0);
        fputc('}', f);
    }
    fputc(']', f);
    write_fp8_json(f, d, kernels);
    fputs(",\n\"resources\":[", f);
    n = 0;
    for (int i = 0; d && i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (!wanted(k->name, kernels))
            continue;
        const info_row *r = &rows[i];
        fprintf(f, "%s\n {", n++ ? "," : "");
        json_key_str(f, "kernel", k->name, 1);
        if (r->st == 0)
            fprintf(f, ",\"status\":\"ok\",\"regs\":%d,\"local_bytes\":%zu,\"static_smem\":%zu,\"dyn_smem\":%zu,"
                       "\"threads\":%d,\"blocks_per_sm\":%d,\"occupancy\":%.1f",
                    r->ki.regs, r->ki.local_bytes, r->ki.static_smem, r->ki.dyn_smem, r->ki.threads,
                    r->ki.blocks_per_sm, r->ki.occupancy);
        else if (r->st == 1)
            fputs(",\"status\":\"library\"", f);
        else if (r->st == 2)
            fprintf(f, ",\"status\":\"needs sm_%d\"", k->min_sm);
        else
            json_key_str(f, "status", r->why, 0);
        fputc('}', f);
    }
    fputs("]}\n", f);
}

/* Which fused epilogues (tilekit.h, tk_epilogue_kind) each kernel takes,
 * as its family's own check answers (tk_kernel_supports_args) for each
 * kind on a 1024^3 row-major problem (op_b T, bf16 D in place, 16-byte
 * aligned operands, beta 0, silu, a bf16 column bias for the forward
 * kinds, aux where the kind reads or may store it) on this device, or
 * without one on check_device's H100. Kernels of families without
 * epilogues, and those that refuse every kind, are not listed. */
static void print_epilogues(FILE *f, const tk_device *dev, const char *const *kernels)
{
    static const struct { int kind; const char *name; } kinds[] = {
        { TK_EPI_BIAS_ACT, "bias_act" }, { TK_EPI_GATED, "gated" }, { TK_EPI_BACKWARD, "backward" },
        { TK_EPI_GATED_BACKWARD, "gated_backward" },
    };
    tk_device h100;
    dev = check_device(dev, &h100);
    const int64_t n = INFO_N;
    char *const base = INFO_BASE;
    const int kw = kernel_width(kernels, 6);
    int header = 0;
    for (int i = 0; i < tk_registry_count(); i++) {
        const tk_kernel *k = tk_registry_at(i);
        if (!wanted(k->name, kernels) || !(k->family->accepts & TK_ACCEPT_EPILOGUE) || dev->sm < k->min_sm)
            continue;
        char line[160] = "";
        for (size_t j = 0; j < sizeof kinds / sizeof kinds[0]; j++) {
            const int kind = kinds[j].kind;
            tk_args a;
            stand_in_args(&a);
            a.ldc = kind == TK_EPI_GATED ? n / 2 : kind == TK_EPI_GATED_BACKWARD ? 2 * n : n;
            tk_epi_args e;
            memset(&e, 0, sizeof e);
            e.kind = kind;
            e.act = TK_ACT_SILU;
            const int backward = kind == TK_EPI_BACKWARD || kind == TK_EPI_GATED_BACKWARD;
            e.bias = backward ? NULL : base + (UINT64_C(3) << 30);
            e.bias_bf16 = 1;
            e.b_up = kind == TK_EPI_GATED ? base + (UINT64_C(1) << 30) + n : NULL;
            e.d = a.c;
            e.ldd = a.ldc;
            e.aux = base + (UINT64_C(4) << 30);
            e.ldaux = kind == TK_EPI_GATED_BACKWARD ? 2 * n : n;
            e.out_cols = a.ldc;
            a.epi = &e;
            char why[TK_MSG_LEN];
            if (tk_kernel_supports_args(k, &a, dev, why, sizeof why) == TK_SUCCESS)
                snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s", line[0] ? " " : "",
                         kinds[j].name);
        }
        if (!line[0])
            continue;
        if (!header++)
            fprintf(f, "\n%-*s %s\n", kw, "kernel", "fused epilogues (tilekit.h's tk_epilogue_kind; auto-dispatch "
                                                      "sends the others to k01_naive)");
        fprintf(f, "%-*s %s\n", kw, k->name, line);
    }
}

int tk_lab_info(FILE *f, const char *const *kernels, FILE *json)
{
    tk_device d;
    char why[TK_MSG_LEN];
    const int have = tk_device_query(&d, why, sizeof why) == TK_SUCCESS;
    info_row *rows = calloc((size_t)tk_registry_count(), sizeof *rows);
    if (!rows) {
        fprintf(f, "info: out of host memory\n");
        return 1;
    }
    if (have) {
        print_device(f, &d);
        fputc('\n', f);
    } else {
        fprintf(f, "no usable CUDA device (%s); the registry:\n", why);
    }
    print_registry(f, kernels);
    print_epilogues(f, have ? &d : NULL, kernels);
    print_fp8(f, have ? &d : NULL, kernels);
    int bad = 0;
    if (have) {
        const int kw = kernel_width(kernels, 6);
        fprintf(f, "\n%-*s %5s %8s %11s %9s %8s %10s %9s\n", kw, "kernel", "regs", "local_B", "static_smem",
                "dyn_smem", "threads", "blocks/SM", "occupancy");
        for (int i = 0; i < tk_registry_count(); i++) {
            const tk_kernel *k = tk_registry_at(i);
            if (!wanted(k->name, kernels))
                continue;
            kernel_row(k, &d, &rows[i]);
            print_kernel(f, k, &rows[i], kw);
            bad |= rows[i].st < 0;
        }
    }
    if (json)
        write_json(json, have ? &d : NULL, why, kernels, rows);
    free(rows);
    return bad;
}
