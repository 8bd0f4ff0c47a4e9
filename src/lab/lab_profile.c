/* lab_profile.c - `tilekit profile`'s metrics: the one table of Nsight
 * Compute metric names it asks for, the parser of ncu's CSV, the figures
 * derived from them (occupancy limiter, sectors per request against the
 * ideal, bank conflicts per wavefront, the largest stall reasons), the
 * screen and the JSON. Pure host code: the CPU tests feed it saved ncu
 * output. Running ncu is lab_ncu.c's.
 *
 * Every name below was checked against `ncu --query-metrics --chip gh100`
 * (or, for launch__*, ncu's raw page) of Nsight Compute 2025.3. A metric
 * another GPU or ncu version lacks is left out of ncu's CSV and shows as
 * "-" on the screen and null in the JSON. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lab.h"

enum {
    M_DURATION, M_SM_HZ,
    M_TENSOR_PCT, M_TENSOR_INST, M_WGMMA_INST, M_SM_PCT,
    M_WARPS_ACHIEVED, M_WARPS_THEORETICAL,
    M_LIMIT_REGS, M_LIMIT_SMEM, M_LIMIT_WARPS, M_LIMIT_BLOCKS, M_LIMIT_BARRIERS,
    M_REGS, M_BLOCK, M_GRID, M_CLUSTER, M_SMEM_BLOCK,
    M_DRAM_READ, M_DRAM_WRITE, M_DRAM_BPS, M_L2_HIT, M_L1_HIT,
    M_LD_SECTORS, M_LD_REQUESTS, M_LD_BYTES,
    M_ST_SECTORS, M_ST_REQUESTS, M_ST_BYTES,
    M_CP_SECTORS, M_CP_REQUESTS, M_CP_BYTES,
    M_SH_LD_CONFLICTS, M_SH_LD_WAVEFRONTS, M_SH_ST_CONFLICTS, M_SH_ST_WAVEFRONTS,
    M_LOCAL_LD, M_LOCAL_ST,
    M_STALL_BARRIER, M_STALL_BRANCH, M_STALL_DISPATCH, M_STALL_DRAIN, M_STALL_GMMA, M_STALL_IMC_MISS,
    M_STALL_LG_THROTTLE, M_STALL_LONG_SCOREBOARD, M_STALL_MATH, M_STALL_MEMBAR, M_STALL_MIO, M_STALL_MISC,
    M_STALL_NO_INSTRUCTION, M_STALL_NOT_SELECTED, M_STALL_SELECTED, M_STALL_SHORT_SCOREBOARD, M_STALL_SLEEPING,
    M_STALL_TEX, M_STALL_WAIT,
    M_COUNT
};
_Static_assert(M_COUNT == TK_LAB_METRICS, "TK_LAB_METRICS in lab.h counts the table");

#define PCT TK_LAB_MU_PCT
#define NS TK_LAB_MU_NS
#define HZ TK_LAB_MU_HZ
#define BYTES TK_LAB_MU_BYTES
#define BPS TK_LAB_MU_BYTES_PER_S
#define COUNT TK_LAB_MU_COUNT
#define RATIO TK_LAB_MU_RATIO
/* stall reasons: warps stalled for the reason, per issued instruction */
#define STALL(reason) "smsp__average_warps_issue_stalled_" reason "_per_issue_active.ratio", "stall_" reason, RATIO

static const tk_lab_metric table[M_COUNT] = {
    /* wall time of the kernel on the GPU */
    [M_DURATION] = { "gpu__time_duration.sum", "duration_ns", NS, "kernel duration" },
    /* the SM clock while profiled (lab_ncu.c runs ncu with --clock-control
     * none: the clock as found, moving with power as in bench) */
    [M_SM_HZ] = { "sm__cycles_elapsed.avg.per_second", "sm_clock_hz", HZ, "SM clock during the profile" },
    /* cycles the tensor pipe was busy, % of its peak over the cycles the SM
     * was active; on sm_90 the "hmma" pipe runs both mma.sync (HMMA) and
     * wgmma (HGMMA) */
    [M_TENSOR_PCT] = { "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor_pipe_pct",
                       PCT, "tensor pipe busy, % of peak while the SM is active" },
    /* warp instructions the tensor pipe executed: HMMA and HGMMA */
    [M_TENSOR_INST] = { "sm__inst_executed_pipe_tensor_op_hmma.sum", "tensor_inst", COUNT,
                        "tensor instructions (mma.sync and wgmma)" },
    /* of them, warpgroup MMAs (wgmma: HGMMA and the other GMMA types) */
    [M_WGMMA_INST] = { "sm__inst_executed_pipe_tensor_op_gmma.sum", "wgmma_inst", COUNT, "wgmma instructions" },
    /* the busiest of the SM's units, % of its peak over the elapsed time */
    [M_SM_PCT] = { "sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm_throughput_pct", PCT,
                   "SM throughput, % of peak (its busiest unit)" },
    /* achieved occupancy: warps resident per active cycle, % of the SM's maximum */
    [M_WARPS_ACHIEVED] = { "sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy_achieved_pct", PCT,
                           "achieved occupancy (resident warps, % of the SM's maximum)" },
    /* theoretical occupancy: what the launch's resources allow */
    [M_WARPS_THEORETICAL] = { "sm__maximum_warps_per_active_cycle_pct", "occupancy_theoretical_pct", PCT,
                              "theoretical occupancy (what the launch's resources allow)" },
    /* blocks per SM each resource allows; the smallest limits occupancy */
    [M_LIMIT_REGS] = { "launch__occupancy_limit_registers", "blocks_limit_registers", COUNT,
                       "blocks per SM the register file allows" },
    [M_LIMIT_SMEM] = { "launch__occupancy_limit_shared_mem", "blocks_limit_shared_mem", COUNT,
                       "blocks per SM shared memory allows" },
    [M_LIMIT_WARPS] = { "launch__occupancy_limit_warps", "blocks_limit_warps", COUNT,
                        "blocks per SM the warp slots allow" },
    [M_LIMIT_BLOCKS] = { "launch__occupancy_limit_blocks", "blocks_limit_blocks", COUNT,
                         "blocks per SM the hardware allows at most" },
    [M_LIMIT_BARRIERS] = { "launch__occupancy_limit_barriers", "blocks_limit_barriers", COUNT,
                           "blocks per SM the named barriers allow" },
    [M_REGS] = { "launch__registers_per_thread", "registers_per_thread", COUNT, "registers per thread" },
    [M_BLOCK] = { "launch__block_size", "block_threads", COUNT, "threads per block" },
    [M_GRID] = { "launch__grid_size", "grid_blocks", COUNT, "blocks in the grid" },
    /* blocks per cluster; 0: no clusters */
    [M_CLUSTER] = { "launch__cluster_size", "cluster_blocks", COUNT, "blocks per cluster (0: none)" },
    /* static + dynamic + the driver's reserved shared memory of a block */
    [M_SMEM_BLOCK] = { "launch__shared_mem_per_block", "shared_mem_per_block_bytes", BYTES,
                       "shared memory per block, the driver's share included" },
    [M_DRAM_READ] = { "dram__bytes_read.sum", "dram_read_bytes", BYTES, "bytes read from DRAM" },
    [M_DRAM_WRITE] = { "dram__bytes_write.sum", "dram_write_bytes", BYTES, "bytes written to DRAM" },
    [M_DRAM_BPS] = { "dram__bytes.sum.per_second", "dram_bytes_per_second", BPS, "DRAM bytes per second" },
    /* sectors found in the cache, % of sectors asked of it */
    [M_L2_HIT] = { "lts__t_sector_hit_rate.pct", "l2_hit_pct", PCT, "L2 hit rate (sectors)" },
    [M_L1_HIT] = { "l1tex__t_sector_hit_rate.pct", "l1_hit_pct", PCT, "L1 hit rate (sectors)" },
    /* global loads (LDG): the 32-byte sectors and the warp-level requests
     * that asked for them, and the bytes the threads actually asked for */
    [M_LD_SECTORS] = { "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "global_ld_sectors", COUNT,
                       "32-byte sectors of global loads" },
    [M_LD_REQUESTS] = { "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "global_ld_requests", COUNT,
                        "global load requests (one per warp instruction)" },
    [M_LD_BYTES] = { "smsp__sass_data_bytes_mem_global_op_ld.sum", "global_ld_bytes_asked", BYTES,
                     "bytes the threads' global loads asked for" },
    /* global stores (STG), the same three */
    [M_ST_SECTORS] = { "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "global_st_sectors", COUNT,
                       "32-byte sectors of global stores" },
    [M_ST_REQUESTS] = { "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "global_st_requests", COUNT,
                        "global store requests" },
    [M_ST_BYTES] = { "smsp__sass_data_bytes_mem_global_op_st.sum", "global_st_bytes_asked", BYTES,
                     "bytes the threads' global stores asked for" },
    /* cp.async through L1 (LDGSTS.ACCESS, cp.async.ca); the 16-byte
     * cp.async.cg bypasses L1's tag stage and has no request count */
    [M_CP_SECTORS] = { "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access.sum", "cp_async_sectors", COUNT,
                       "32-byte sectors of cp.async (through L1)" },
    [M_CP_REQUESTS] = { "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts_cache_access.sum", "cp_async_requests",
                        COUNT, "cp.async requests (through L1)" },
    [M_CP_BYTES] = { "smsp__sass_data_bytes_mem_global_op_ldgsts_cache_access.sum", "cp_async_bytes_asked", BYTES,
                     "bytes the threads' cp.async (through L1) asked for" },
    /* shared memory: extra wavefronts caused by bank conflicts, and all
     * wavefronts (one per conflict-free pass over the banks) */
    [M_SH_LD_CONFLICTS] = { "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", "shared_ld_bank_conflicts",
                            COUNT, "bank conflicts of shared loads (LDS, LDSM)" },
    [M_SH_LD_WAVEFRONTS] = { "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum", "shared_ld_wavefronts", COUNT,
                             "wavefronts of shared loads" },
    [M_SH_ST_CONFLICTS] = { "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", "shared_st_bank_conflicts",
                            COUNT, "bank conflicts of shared stores (STS)" },
    [M_SH_ST_WAVEFRONTS] = { "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum", "shared_st_wavefronts", COUNT,
                             "wavefronts of shared stores" },
    /* local memory traffic: register spills (and local arrays) */
    [M_LOCAL_LD] = { "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "local_ld_bytes", BYTES,
                     "bytes loaded from local memory (spills)" },
    [M_LOCAL_ST] = { "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum", "local_st_bytes", BYTES,
                     "bytes stored to local memory (spills)" },
    /* Stall reasons: for each instruction issued, how many warps were
     * waiting for that reason; the reasons of one kernel sum to the cycles
     * between a warp's consecutive instructions. */
    [M_STALL_BARRIER] = { STALL("barrier"), "waiting at a block barrier (__syncthreads, bar.sync)" },
    [M_STALL_BRANCH] = { STALL("branch_resolving"), "waiting for a branch target" },
    [M_STALL_DISPATCH] = { STALL("dispatch_stall"), "picked, but the dispatcher could not issue it" },
    [M_STALL_DRAIN] = { STALL("drain"), "at exit, waiting for its stores to drain" },
    [M_STALL_GMMA] = { STALL("gmma"), "waiting for a wgmma (operands or results)" },
    [M_STALL_IMC_MISS] = { STALL("imc_miss"), "immediate constant cache miss" },
    [M_STALL_LG_THROTTLE] = { STALL("lg_throttle"), "local/global memory queue full" },
    [M_STALL_LONG_SCOREBOARD] = { STALL("long_scoreboard"), "waiting for a global/local memory result (L1TEX)" },
    [M_STALL_MATH] = { STALL("math_pipe_throttle"), "the math pipe it needs is busy" },
    [M_STALL_MEMBAR] = { STALL("membar"), "waiting at a memory fence" },
    [M_STALL_MIO] = { STALL("mio_throttle"), "shared-memory/special-math queue (MIO) full" },
    [M_STALL_MISC] = { STALL("misc"), "other reasons" },
    [M_STALL_NO_INSTRUCTION] = { STALL("no_instruction"), "no instruction fetched yet (icache miss, branch)" },
    [M_STALL_NOT_SELECTED] = { STALL("not_selected"), "ready, but another warp was issued" },
    [M_STALL_SELECTED] = { STALL("selected"), "issuing (not a stall)" },
    [M_STALL_SHORT_SCOREBOARD] = { STALL("short_scoreboard"), "waiting for a shared-memory or MUFU result" },
    [M_STALL_SLEEPING] = { STALL("sleeping"), "sleeping (nanosleep, or all threads blocked)" },
    [M_STALL_TEX] = { STALL("tex_throttle"), "texture queue full" },
    [M_STALL_WAIT] = { STALL("wait"), "a fixed-latency dependency" },
};

int tk_lab_metric_count(void) { return M_COUNT; }
const tk_lab_metric *tk_lab_metric_at(int i) { return i >= 0 && i < M_COUNT ? &table[i] : NULL; }

int tk_lab_metric_find(const char *name)
{
    for (int i = 0; i < M_COUNT; i++)
        if (!strcmp(table[i].ncu, name))
            return i;
    return -1;
}

size_t tk_lab_metric_list(char *buf, size_t len)
{
    size_t n = 0;
    for (int i = 0; i < M_COUNT; i++) {
        int w = snprintf(len > n ? buf + n : NULL, len > n ? len - n : 0, "%s%s", i ? "," : "", table[i].ncu);
        n += (size_t)(w > 0 ? w : 0);
    }
    return n;
}

/* ---- parsing ---- */

/* Splits one CSV line in place: fields quoted or not, "" inside quotes for
 * a quote. Returns the number of fields (at most max). */
static int csv_split(char *line, char **field, int max)
{
    int n = 0;
    char *r = line;
    while (n < max) {
        char *w = r;
        field[n++] = w;
        if (*r == '"') {
            r++;
            for (;;) {
                if (!*r)
                    break;
                if (*r == '"' && r[1] == '"') {
                    *w++ = '"';
                    r += 2;
                } else if (*r == '"') {
                    r++;
                    break;
                } else
                    *w++ = *r++;
            }
        }
        while (*r && *r != ',')
            *w++ = *r++;
        int more = *r == ',';
        *w = '\0';
        if (!more)
            break;
        r++;
    }
    return n;
}

/* What one of a unit's values is in base units: Kbyte -> 1e3, usecond ->
 * 1e3 (ns), Mbyte/second -> 1e6, Ghz -> 1e9; 1 for base and unknown units. */
static double unit_scale(const char *unit, tk_lab_metric_unit want)
{
    if (want == TK_LAB_MU_NS) {
        if (!strcmp(unit, "us") || !strcmp(unit, "usecond"))
            return 1e3;
        if (!strcmp(unit, "ms") || !strcmp(unit, "msecond"))
            return 1e6;
        if (!strcmp(unit, "s") || !strcmp(unit, "second"))
            return 1e9;
        return 1.0;
    }
    if (want != TK_LAB_MU_BYTES && want != TK_LAB_MU_BYTES_PER_S && want != TK_LAB_MU_HZ)
        return 1.0;
    static const struct { char p; double x; } prefix[] = { { 'K', 1e3 }, { 'M', 1e6 }, { 'G', 1e9 }, { 'T', 1e12 } };
    int base = unit[0] ? tolower((unsigned char)unit[1]) : 0;   /* 'b'yte or 'h'z after the prefix */
    for (size_t i = 0; i < sizeof prefix / sizeof prefix[0]; i++)
        if (unit[0] == prefix[i].p && (base == 'b' || base == 'h'))
            return prefix[i].x;
    return 1.0;
}

/* "1,651,200.00" -> 1651200; "n/a", "no data", "" -> NaN. */
static double number(const char *s)
{
    char buf[64];
    size_t n = 0;
    for (; *s && n < sizeof buf - 1; s++)
        if (*s != ',')
            buf[n++] = *s;
    buf[n] = '\0';
    char *end;
    double v = strtod(buf, &end);
    return end == buf || *end ? NAN : v;
}

static void parse_launch_line(const char *line, tk_lab_profile *p)
{
    tk_lab_kinfo k;
    char kernel[64];
    int ran_at = 0;
    if (sscanf(line, "tilekit launch: kernel %63s regs %d local_bytes %zu static_smem %zu dyn_smem %zu threads %d "
                     "blocks_per_sm %d occupancy %lf ran %n",
               kernel, &k.regs, &k.local_bytes, &k.static_smem, &k.dyn_smem, &k.threads, &k.blocks_per_sm,
               &k.occupancy, &ran_at) < 8 || !ran_at)
        return;
    p->ki = k;
    snprintf(p->ran, sizeof p->ran, "%s", line + ran_at);
}

void tk_lab_launch_line(char *buf, size_t len, const char *kernel, const char *ran, const tk_lab_kinfo *ki)
{
    snprintf(buf, len, "tilekit launch: kernel %s regs %d local_bytes %zu static_smem %zu dyn_smem %zu threads %d "
                       "blocks_per_sm %d occupancy %.1f ran %s",
             kernel, ki->regs, ki->local_bytes, ki->static_smem, ki->dyn_smem, ki->threads, ki->blocks_per_sm,
             ki->occupancy, ran);
}

#define MAX_COLS 4096

int tk_lab_profile_parse(const char *text, tk_lab_profile *p, char *why, size_t len)
{
    char kernel[sizeof p->kernel];
    memcpy(kernel, p->kernel, sizeof kernel);
    memset(p, 0, sizeof *p);
    memcpy(p->kernel, kernel, sizeof kernel);
    p->ki.regs = -1;
    char *copy = strdup(text);
    char **field = malloc(MAX_COLS * sizeof *field);
    int *col_metric = malloc(MAX_COLS * sizeof *col_metric);
    double *scale = malloc(MAX_COLS * sizeof *scale);
    int rc = -1, ncols = 0, c_name = -1, c_device = -1, line_no = 0, header_line = 0;
    if (!copy || !field || !col_metric || !scale) {
        snprintf(why, len, "out of host memory");
        goto out;
    }
    for (char *line = copy, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        line_no++;
        size_t l = strlen(line);
        if (l && line[l - 1] == '\r')
            line[l - 1] = '\0';
        if (!ncols) {
            if (!strncmp(line, "tilekit launch: ", 16))
                parse_launch_line(line, p);
            if (strncmp(line, "\"ID\",", 5))
                continue;   /* the program's own output and ncu's ==PROF== lines */
            header_line = line_no;
            ncols = csv_split(line, field, MAX_COLS);
            for (int c = 0; c < ncols; c++) {
                col_metric[c] = tk_lab_metric_find(field[c]);
                scale[c] = 1.0;
                if (!strcmp(field[c], "Kernel Name"))
                    c_name = c;
                if (!strcmp(field[c], "device__attribute_display_name"))
                    c_device = c;
            }
            if (c_name < 0) {
                snprintf(why, len, "ncu's CSV header (line %d) has no \"Kernel Name\" column", line_no);
                goto out;
            }
            continue;
        }
        /* after the header: rows start with a quote; ncu's own messages
         * (==WARNING== ..., which can follow the table) are skipped */
        if (*line != '"')
            continue;
        int n = csv_split(line, field, MAX_COLS);
        if (n != ncols) {
            snprintf(why, len, "line %d of ncu's output has %d fields, its CSV header (line %d) %d", line_no, n,
                     header_line, ncols);
            goto out;
        }
        if (!field[0][0]) {     /* the units row: no ID */
            for (int c = 0; c < ncols; c++)
                if (col_metric[c] >= 0)
                    scale[c] = unit_scale(field[c], table[col_metric[c]].unit);
            continue;
        }
        if (p->nkernels == TK_LAB_PROF_KERNELS)
            continue;
        tk_lab_prof_kernel *k = &p->k[p->nkernels++];
        snprintf(k->function, sizeof k->function, "%s", field[c_name]);
        for (int m = 0; m < M_COUNT; m++)
            k->v[m] = NAN;
        for (int c = 0; c < ncols; c++)
            if (col_metric[c] >= 0)
                k->v[col_metric[c]] = number(field[c]) * scale[c];
        if (c_device >= 0 && !p->device[0])
            snprintf(p->device, sizeof p->device, "%s", field[c_device]);
    }
    if (!ncols)
        snprintf(why, len, "no CSV in ncu's output (no line starting with \"ID\")");
    else if (!p->nkernels)
        snprintf(why, len, "ncu's CSV has no kernel row: nothing was profiled");
    else {
        for (int i = 1; i < p->nkernels; i++) {
            double d = p->k[i].v[M_DURATION], best = p->k[p->main].v[M_DURATION];
            if (d > best || (isnan(best) && !isnan(d)))
                p->main = i;
        }
        rc = 0;
    }
out:
    free(copy);
    free(field);
    free(col_metric);
    free(scale);
    return rc;
}

double tk_lab_profile_value(const tk_lab_profile *p, const char *name)
{
    int m = tk_lab_metric_find(name);
    return m < 0 || p->nkernels <= 0 ? NAN : p->k[p->main].v[m];
}

/* ---- derived figures ---- */

static double ratio(double a, double b) { return b > 0 && isfinite(a) ? a / b : NAN; }

void tk_lab_profile_derive(const tk_lab_prof_kernel *k, tk_lab_prof_derived *d)
{
    memset(d, 0, sizeof *d);
    const double *v = k->v;
    d->occ_achieved = v[M_WARPS_ACHIEVED];
    d->occ_theoretical = v[M_WARPS_THEORETICAL];
    static const struct { int m; const char *what; } limit[] = {
        { M_LIMIT_REGS, "registers" }, { M_LIMIT_SMEM, "shared memory" }, { M_LIMIT_WARPS, "warps" },
        { M_LIMIT_BLOCKS, "blocks per SM" }, { M_LIMIT_BARRIERS, "barriers" },
    };
    double least = INFINITY;
    for (size_t i = 0; i < sizeof limit / sizeof limit[0]; i++)
        if (v[limit[i].m] < least)
            least = v[limit[i].m];
    d->limit_blocks = isfinite(least) ? (int)least : -1;
    for (size_t i = 0; i < sizeof limit / sizeof limit[0] && isfinite(least); i++)
        if (v[limit[i].m] == least) {
            size_t at = strlen(d->limiter);
            snprintf(d->limiter + at, sizeof d->limiter - at, "%s%s", at ? ", " : "", limit[i].what);
        }
    d->ld_spr = ratio(v[M_LD_SECTORS], v[M_LD_REQUESTS]);
    /* No bytes asked for under requests that touched sectors: ncu did not
     * count that access's bytes (k11's cp.async.cg copies, counted as loads
     * on the H100), so there is no ideal, not an ideal of 0. */
    d->ld_ideal = v[M_LD_BYTES] > 0 ? ratio(v[M_LD_BYTES] / 32.0, v[M_LD_REQUESTS]) : NAN;
    d->st_spr = ratio(v[M_ST_SECTORS], v[M_ST_REQUESTS]);
    d->st_ideal = v[M_ST_BYTES] > 0 ? ratio(v[M_ST_BYTES] / 32.0, v[M_ST_REQUESTS]) : NAN;
    d->cp_spr = ratio(v[M_CP_SECTORS], v[M_CP_REQUESTS]);
    d->cp_ideal = v[M_CP_BYTES] > 0 ? ratio(v[M_CP_BYTES] / 32.0, v[M_CP_REQUESTS]) : NAN;
    d->sh_ld_conflict_pct = 100.0 * ratio(v[M_SH_LD_CONFLICTS], v[M_SH_LD_WAVEFRONTS]);
    d->sh_st_conflict_pct = 100.0 * ratio(v[M_SH_ST_CONFLICTS], v[M_SH_ST_WAVEFRONTS]);
    /* the largest stall reasons, "selected" (issuing) left out */
    for (int m = M_STALL_BARRIER; m <= M_STALL_WAIT; m++) {
        if (m == M_STALL_SELECTED || !(v[m] > 0))
            continue;
        int at = d->nstalls < TK_LAB_TOP_STALLS ? d->nstalls++ : TK_LAB_TOP_STALLS;
        while (at > 0 && v[d->stall[at - 1]] < v[m]) {
            if (at < TK_LAB_TOP_STALLS)
                d->stall[at] = d->stall[at - 1];
            at--;
        }
        if (at < TK_LAB_TOP_STALLS)
            d->stall[at] = m;
    }
}

/* ---- the screen ---- */

#define LABEL_W 34      /* two spaces, then the label */
#define CELL_W 37
#define CELL 96

/* 8388608 -> "8,388,608"; NaN -> "-" */
static void fmt_count(char *b, size_t n, double x)
{
    if (!isfinite(x)) {
        snprintf(b, n, "-");
        return;
    }
    char digits[40];
    snprintf(digits, sizeof digits, "%.0f", fabs(x));
    size_t nd = strlen(digits), at = 0;
    if (x < 0 && at + 1 < n)
        b[at++] = '-';
    for (size_t i = 0; i < nd && at + 2 < n; i++) {
        b[at++] = digits[i];
        if ((nd - i - 1) % 3 == 0 && i + 1 < nd)
            b[at++] = ',';
    }
    b[at] = '\0';
}

static void fmt_bytes(char *b, size_t n, double x)
{
    if (!isfinite(x))
        snprintf(b, n, "-");
    else if (x < 1e4)
        snprintf(b, n, "%.0f B", x);
    else if (x < 1e6)
        snprintf(b, n, "%.1f KB", x / 1e3);
    else if (x < 1e9)
        snprintf(b, n, "%.1f MB", x / 1e6);
    else
        snprintf(b, n, "%.2f GB", x / 1e9);
}

static void fmt(char *b, size_t n, const char *spec, double x)
{
    if (isfinite(x))
        snprintf(b, n, spec, x);
    else
        snprintf(b, n, "-");
}

/* "void k31_kernel<0, 1>(k30_params)" -> "k31_kernel<0, 1>" */
static void short_function(char *b, size_t n, const char *f)
{
    if (!strncmp(f, "void ", 5))
        f += 5;
    size_t l = strcspn(f, "(");
    snprintf(b, n, "%.*s", (int)(l < n - 1 ? l : n - 1), f);
}

static void row(FILE *f, const char *label, char (*cell)[CELL], int n)
{
    fprintf(f, "  %-*s", LABEL_W - 2, label);
    for (int i = 0; i < n; i++) {
        if (i + 1 < n)
            fprintf(f, "%-*.*s ", CELL_W - 1, CELL_W - 1, cell[i]);
        else
            fprintf(f, "%.*s", CELL_W - 1, cell[i]);
    }
    fputc('\n', f);
}

static void sectors_cell(char *b, size_t n, double spr, double ideal, double requests)
{
    if (!(requests > 0))
        snprintf(b, n, "- (none)");
    else if (isfinite(ideal))
        snprintf(b, n, "%.2f (ideal %.2f)", spr, ideal);
    else
        snprintf(b, n, "%.2f (ideal n/a)", spr);
}

static void conflicts_cell(char *b, size_t n, double conflicts, double wavefronts, double pct)
{
    char c[32], w[32];
    fmt_count(c, sizeof c, conflicts);
    fmt_count(w, sizeof w, wavefronts);
    if (isfinite(pct))
        snprintf(b, n, "%s / %s (%.1f %%)", c, w, pct);
    else
        snprintf(b, n, "%s / %s", c, w);
}

static const char *stall_name(int m) { return table[m].key + strlen("stall_"); }

void tk_lab_profile_print(FILE *f, const tk_lab_case *c, const tk_lab_profile *p, int n)
{
    char name[128], cell[2][CELL];
    n = n < 1 ? 1 : n > 2 ? 2 : n;
    tk_lab_case_name(c, name, sizeof name);
    fprintf(f, "tilekit profile: %s, one call of each kernel under Nsight Compute\n", name);
    fprintf(f, "device: %s\n\n", p[0].device[0] ? p[0].device : "(not reported)");
    const tk_lab_prof_kernel *k[2];
    tk_lab_prof_derived d[2];
    for (int i = 0; i < n; i++) {
        k[i] = &p[i].k[p[i].main];
        tk_lab_profile_derive(k[i], &d[i]);
    }
    /* one row: the code (after the label) fills b, the cell of profile i,
     * whose metrics are v */
#define ROWF(label, ...)                                          \
    do {                                                          \
        for (int i = 0; i < n; i++) {                             \
            char *b = cell[i];                                    \
            const double *v = k[i]->v;                            \
            (void)v;                                              \
            __VA_ARGS__;                                          \
        }                                                         \
        row(f, label, cell, n);                                   \
    } while (0)
    for (int i = 0; i < n; i++)
        snprintf(cell[i], CELL, "%s", p[i].kernel);
    row(f, "", cell, n);
    ROWF("ran", snprintf(b, CELL, "%s", p[i].ran[0] ? p[i].ran : p[i].kernel));
    ROWF("function", short_function(b, CELL, k[i]->function));
    ROWF("kernels in the call", snprintf(b, CELL, p[i].nkernels > 1 ? "%d (the longest shown)" : "%d",
                                         p[i].nkernels));
    ROWF("grid x block (cluster)", {
        char g[32], t[32];
        fmt_count(g, sizeof g, v[M_GRID]);
        fmt_count(t, sizeof t, v[M_BLOCK]);
        if (v[M_CLUSTER] > 0)
            snprintf(b, CELL, "%s x %s (%.0f)", g, t, v[M_CLUSTER]);
        else
            snprintf(b, CELL, "%s x %s", g, t);
    });
    ROWF("duration", fmt(b, CELL, "%.1f us", v[M_DURATION] / 1e3));
    ROWF("SM clock while profiled", fmt(b, CELL, "%.2f GHz", v[M_SM_HZ] / 1e9));
    fprintf(f, "compute\n");
    ROWF("tensor pipe busy", fmt(b, CELL, "%.1f %%", v[M_TENSOR_PCT]));
    ROWF("tensor instructions (wgmma)", {
        char a[32], w[32];
        fmt_count(a, sizeof a, v[M_TENSOR_INST]);
        fmt_count(w, sizeof w, v[M_WGMMA_INST]);
        snprintf(b, CELL, "%s (%s)", a, w);
    });
    ROWF("SM throughput", fmt(b, CELL, "%.1f %%", v[M_SM_PCT]));
    fprintf(f, "occupancy\n");
    ROWF("warps: achieved / theoretical", {
        char a[32], t[32];
        fmt(a, sizeof a, "%.1f %%", d[i].occ_achieved);
        fmt(t, sizeof t, "%.1f %%", d[i].occ_theoretical);
        snprintf(b, CELL, "%s / %s", a, t);
    });
    ROWF("blocks/SM allowed by", {
        char x[5][16];
        const int lm[5] = { M_LIMIT_REGS, M_LIMIT_SMEM, M_LIMIT_WARPS, M_LIMIT_BARRIERS, M_LIMIT_BLOCKS };
        for (int j = 0; j < 5; j++)
            fmt(x[j], sizeof x[j], "%.0f", v[lm[j]]);
        snprintf(b, CELL, "regs %s, smem %s, warps %s, bar %s", x[0], x[1], x[2], x[3]);
    });
    ROWF("limited by", {
        if (d[i].limit_blocks < 0)
            snprintf(b, CELL, "-");
        else
            snprintf(b, CELL, "%s: %d/SM", d[i].limiter, d[i].limit_blocks);
    });
    ROWF("registers per thread", fmt(b, CELL, "%.0f", v[M_REGS]));
    ROWF("spills: local bytes/thread", {
        if (p[i].ki.regs >= 0)
            snprintf(b, CELL, "%zu B", p[i].ki.local_bytes);
        else
            snprintf(b, CELL, p[i].ran[0] ? "- (a library's kernel)" : "-");
    });
    ROWF("local memory traffic ld / st", {
        char l[32], s[32];
        fmt_bytes(l, sizeof l, v[M_LOCAL_LD]);
        fmt_bytes(s, sizeof s, v[M_LOCAL_ST]);
        snprintf(b, CELL, "%s / %s", l, s);
    });
    ROWF("shared memory per block", fmt_bytes(b, CELL, v[M_SMEM_BLOCK]));
    fprintf(f, "memory\n");
    ROWF("DRAM read / written", {
        char r[32], w[32];
        fmt_bytes(r, sizeof r, v[M_DRAM_READ]);
        fmt_bytes(w, sizeof w, v[M_DRAM_WRITE]);
        snprintf(b, CELL, "%s / %s", r, w);
    });
    ROWF("DRAM bandwidth", fmt(b, CELL, "%.1f GB/s", v[M_DRAM_BPS] / 1e9));
    ROWF("L2 hit rate", fmt(b, CELL, "%.1f %%", v[M_L2_HIT]));
    ROWF("L1 hit rate", fmt(b, CELL, "%.1f %%", v[M_L1_HIT]));
    ROWF("global loads: sectors/request", sectors_cell(b, CELL, d[i].ld_spr, d[i].ld_ideal, v[M_LD_REQUESTS]));
    ROWF("global stores: sectors/request", sectors_cell(b, CELL, d[i].st_spr, d[i].st_ideal, v[M_ST_REQUESTS]));
    ROWF("cp.async (via L1): sectors/req", sectors_cell(b, CELL, d[i].cp_spr, d[i].cp_ideal, v[M_CP_REQUESTS]));
    ROWF("shared ld: conflicts/wavefronts",
         conflicts_cell(b, CELL, v[M_SH_LD_CONFLICTS], v[M_SH_LD_WAVEFRONTS], d[i].sh_ld_conflict_pct));
    ROWF("shared st: conflicts/wavefronts",
         conflicts_cell(b, CELL, v[M_SH_ST_CONFLICTS], v[M_SH_ST_WAVEFRONTS], d[i].sh_st_conflict_pct));
    fprintf(f, "stalls (warps waiting per issued instruction)\n");
    int shown[M_COUNT] = { 0 };
    for (int s = 0; s < TK_LAB_TOP_STALLS; s++) {
        char label[16];
        snprintf(label, sizeof label, "#%d", s + 1);
        ROWF(label, {
            if (s < d[i].nstalls) {
                snprintf(b, CELL, "%s %.2f", stall_name(d[i].stall[s]), v[d[i].stall[s]]);
                shown[d[i].stall[s]] = 1;
            } else
                snprintf(b, CELL, "-");
        });
    }
#undef ROWF
    fprintf(f, "\nlegend:\n");
    for (int m = M_STALL_BARRIER; m <= M_STALL_WAIT; m++)
        if (shown[m])
            fprintf(f, "  %-20s %s\n", stall_name(m), table[m].meaning);
    fprintf(f, "  sectors/request      32-byte sectors a warp's access touched per instruction; ideal = the bytes\n"
               "                       its threads asked for / 32 (16 for 16 bytes a thread, 4 for 4): above\n"
               "                       ideal, the warp's addresses are not coalesced\n"
               "  conflicts/wavefronts extra shared-memory passes caused by bank conflicts / all passes\n"
               "  limited by           the resource allowing the fewest blocks per SM (launch__occupancy_limit_*;\n"
               "                       the hardware's own blocks-per-SM maximum counts too)\n"
               "  -                    not reported: no such access, or ncu lacks the metric on this GPU\n"
               "  ncu runs each kernel several times (one pass per metric group) at the clock as found\n"
               "  (--clock-control none), with caches flushed before each: compare durations with bench's only\n"
               "  roughly. The metric names: tilekit profile --metrics.\n");
}

/* ---- JSON ---- */

static void json_num(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.10g", x);
    else
        fputs("null", f);
}

static void json_kv(FILE *f, const char *key, double x, int first)
{
    fprintf(f, "%s\"%s\":", first ? "" : ",", key);
    json_num(f, x);
}

int tk_lab_profile_write_json(FILE *f, const tk_lab_case *c, const tk_lab_profile *p, int n)
{
    fprintf(f, "{\"tool\":\"tilekit profile\",\"version\":\"%d.%d.%d\",\n \"problem\":{"
               "\"m\":%lld,\"n\":%lld,\"k\":%lld,\"layout\":\"%s\",\"op_a\":\"%s\",\"op_b\":\"%s\",\"out\":\"%s\",\"alpha\":%.9g,\"beta\":%.9g,"
               "\"pad\":%d,\"offset\":%d,\"seed\":%llu},\n \"profiles\":[",
            TILEKIT_VERSION_MAJOR, TILEKIT_VERSION_MINOR, TILEKIT_VERSION_PATCH, (long long)c->m, (long long)c->n,
            (long long)c->k, c->layout == TK_ROW_MAJOR ? "row" : "col", c->op_a == TK_OP_N ? "n" : "t",
            c->op_b == TK_OP_N ? "n" : "t", c->out == TK_F32 ? "fp32" : "bf16", (double)c->alpha, (double)c->beta,
            c->pad, c->offset, (unsigned long long)c->seed);
    for (int i = 0; i < n; i++) {
        const tk_lab_profile *q = &p[i];
        const tk_lab_prof_kernel *k = &q->k[q->main];
        tk_lab_prof_derived d;
        tk_lab_profile_derive(k, &d);
        fprintf(f, "%s\n  {\"kernel\":", i ? "," : "");
        tk_lab_json_str(f, q->kernel);
        fputs(",\"ran\":", f);
        if (q->ran[0])
            tk_lab_json_str(f, q->ran);
        else
            fputs("null", f);
        fputs(",\"device\":", f);
        tk_lab_json_str(f, q->device);
        fputs(",\"function\":", f);
        tk_lab_json_str(f, k->function);
        fputs(",\"functions\":[", f);
        for (int j = 0; j < q->nkernels; j++) {
            fputs(j ? "," : "", f);
            tk_lab_json_str(f, q->k[j].function);
        }
        fputs("],\n   \"metrics\":{", f);
        for (int m = 0; m < M_COUNT; m++)
            json_kv(f, table[m].key, k->v[m], m == 0);
        fputs("},\n   \"derived\":{", f);
        json_kv(f, "occupancy_achieved_pct", d.occ_achieved, 1);
        json_kv(f, "occupancy_theoretical_pct", d.occ_theoretical, 0);
        json_kv(f, "blocks_per_sm", d.limit_blocks >= 0 ? d.limit_blocks : NAN, 0);
        fputs(",\"occupancy_limiter\":", f);
        if (d.limiter[0])
            tk_lab_json_str(f, d.limiter);
        else
            fputs("null", f);
        json_kv(f, "global_ld_sectors_per_request", d.ld_spr, 0);
        json_kv(f, "global_ld_sectors_per_request_ideal", d.ld_ideal, 0);
        json_kv(f, "global_st_sectors_per_request", d.st_spr, 0);
        json_kv(f, "global_st_sectors_per_request_ideal", d.st_ideal, 0);
        json_kv(f, "cp_async_sectors_per_request", d.cp_spr, 0);
        json_kv(f, "cp_async_sectors_per_request_ideal", d.cp_ideal, 0);
        json_kv(f, "shared_ld_conflict_pct", d.sh_ld_conflict_pct, 0);
        json_kv(f, "shared_st_conflict_pct", d.sh_st_conflict_pct, 0);
        fputs(",\"top_stalls\":[", f);
        for (int s = 0; s < d.nstalls; s++) {
            fprintf(f, "%s{\"reason\":\"%s\",\"warps_per_issue\":", s ? "," : "", stall_name(d.stall[s]));
            json_num(f, k->v[d.stall[s]]);
            fputc('}', f);
        }
        fputs("]},\n   \"tilekit\":", f);
        if (q->ki.regs >= 0)
            fprintf(f, "{\"regs\":%d,\"local_bytes\":%zu,\"static_smem\":%zu,\"dyn_smem\":%zu,\"threads\":%d,"
                       "\"blocks_per_sm\":%d,\"occupancy_pct\":%.1f}",
                    q->ki.regs, q->ki.local_bytes, q->ki.static_smem, q->ki.dyn_smem, q->ki.threads,
                    q->ki.blocks_per_sm, q->ki.occupancy);
        else
            fputs("null", f);
        fputc('}', f);
    }
    fputs("\n ]}\n", f);
    return ferror(f) ? -1 : 0;
}
