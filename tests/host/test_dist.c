/* test_dist.c - the distributed part (issue 41) on the CPU: the chunk plan
 * (bounds, the pipeline model's choices on the Llama-3-70B shapes, the
 * override order), every argument refusal of the pure check, the ranks'
 * signature comparison, the descriptor's versioned rule, the NCCL loader
 * (a missing library named with dlopen's words; a present one resolved
 * whole), and the public calls that need no GPU.
 *
 *   build/tests/test_dist [name-substring]
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "dist/dist.h"
#include "check.h"

static int contains(const char *s, const char *sub) { return s && strstr(s, sub) != NULL; }

static void test_bounds(void)
{
    int64_t b[TKD_MAX_CHUNKS_ASKED + 1];
    int n = tkd_chunk_bounds(4096, 4, b);
    CHECK(n == 4 && b[0] == 0 && b[1] == 1024 && b[2] == 2048 && b[3] == 3072 && b[4] == 4096,
          "4096 / 4: %d chunks, %lld %lld %lld %lld %lld", n, (long long)b[0], (long long)b[1], (long long)b[2],
          (long long)b[3], (long long)b[4]);
    /* 1000 rows in 4: bounds at multiples of 128 (250 -> 128, 500 -> 384, 750 -> 640) */
    n = tkd_chunk_bounds(1000, 4, b);
    CHECK(n == 4 && b[1] == 128 && b[2] == 384 && b[3] == 640 && b[4] == 1000, "1000 / 4: %d: %lld %lld %lld",
          n, (long long)b[1], (long long)b[2], (long long)b[3]);
    /* 100 rows in 4: multiples of 8 */
    n = tkd_chunk_bounds(100, 4, b);
    CHECK(n == 4 && b[1] == 24 && b[2] == 48 && b[3] == 72 && b[4] == 100, "100 / 4: %d: %lld %lld %lld", n,
          (long long)b[1], (long long)b[2], (long long)b[3]);
    /* fewer rows than chunks: empty chunks dropped */
    n = tkd_chunk_bounds(3, 4, b);
    CHECK(n == 3 && b[0] == 0 && b[1] == 1 && b[2] == 2 && b[3] == 3, "3 / 4: %d chunks", n);
    CHECK(tkd_chunk_bounds(0, 4, b) == 0, "0 rows");
    CHECK(tkd_chunk_bounds(7, 0, b) == 1 && b[1] == 7, "0 chunks taken as 1");
    /* every split: strictly increasing from 0 to rows, at most `chunks` */
    for (int64_t rows = 1; rows < 3000; rows += 37)
        for (int c = 1; c <= TKD_MAX_CHUNKS_ASKED; c += 3) {
            n = tkd_chunk_bounds(rows, c, b);
            int ok = n >= 1 && n <= c && b[0] == 0 && b[n] == rows;
            for (int i = 0; i < n && ok; i++)
                ok = b[i + 1] > b[i];
            CHECK(ok, "rows %lld, chunks %d: %d chunks, a bound out of order", (long long)rows, c, n);
        }
}

/* The model of one Llama-3-70B projection on 2 ranks of an H100 pair: the
 * GEMM at 600 TFLOP/s, the link at 300 GB/s. */
static tkd_plan_in llama(tk_dist_op op, int64_t tokens, int64_t n, int64_t k)
{
    tkd_plan_in in = { .op = op, .nranks = 2, .block_rows = tokens / 2, .m = tokens,
                       .link_bytes_per_us = 300e3, .gemm_launch_us = 4.0, .comm_launch_us = 12.0 };
    in.gemm_us = 2.0 * (double)tokens * (double)n * (double)k / 600e6;
    in.row_bytes = op == TK_DIST_ALL_GATHER_GEMM ? 2.0 * k : 4.0 * n;
    in.seq_row_bytes = op == TK_DIST_ALL_GATHER_GEMM ? 2.0 * k : 2.0 * n;
    in.sum_us = op == TK_DIST_ALL_GATHER_GEMM ? 0.0 : 3.0 + 10.0 * (double)in.block_rows * n / 3e6;
    return in;
}

static void test_plan_model(void)
{
    /* where the transfer is short against the product, chunking pays little:
     * one or a few chunks, and the model beats the sequential baseline */
    static const struct { tk_dist_op op; int64_t tokens, n, k; } cases[] = {
        { TK_DIST_ALL_GATHER_GEMM, 2048, 28672, 8192 },      /* gate+up, ffn / 2 x 2 */
        { TK_DIST_ALL_GATHER_GEMM, 32768, 28672, 8192 },
        { TK_DIST_ALL_GATHER_GEMM, 4096, 5120, 8192 },       /* q, k, v: (64 + 2 x 8) heads x 128 / 2 */
        { TK_DIST_GEMM_REDUCE_SCATTER, 2048, 8192, 14336 },  /* down */
        { TK_DIST_GEMM_REDUCE_SCATTER, 32768, 8192, 14336 },
        { TK_DIST_GEMM_REDUCE_SCATTER, 8192, 8192, 4096 },   /* o */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tkd_plan_in in = llama(cases[i].op, cases[i].tokens, cases[i].n, cases[i].k);
        double est = 0;
        int c = tkd_plan_chunks(&in, &est);
        double seq = tkd_plan_sequential(&in), one = tkd_plan_time(&in, 1);
        CHECK(c >= 1 && c <= TKD_MAX_CHUNKS && in.block_rows / c >= TKD_CHUNK_ROWS, "case %zu: %d chunks", i, c);
        CHECK(est <= one + 1e-9 && est < seq, "case %zu: %d chunks, %.1f us; 1 chunk %.1f us; sequential %.1f us",
              i, c, est, one, seq);
        for (int k = 1; k <= TKD_MAX_CHUNKS && in.block_rows / k >= TKD_CHUNK_ROWS; k++)
            CHECK(tkd_plan_time(&in, k) >= est * 0.99 - 1e-9, "case %zu: %d chunks (%.1f us) beat the choice %d "
                  "(%.1f us) by more than 1%%", i, k, tkd_plan_time(&in, k), c, est);
    }
    /* a transfer as long as the product: chunks hide it (more than one) */
    tkd_plan_in in = llama(TK_DIST_ALL_GATHER_GEMM, 16384, 1024, 8192);
    in.link_bytes_per_us = 20e3;
    int c = tkd_plan_chunks(&in, NULL);
    CHECK(c > 1, "comm ~ GEMM: %d chunk(s) (%.0f us at 1, %.0f at 4)", c, tkd_plan_time(&in, 1),
          tkd_plan_time(&in, 4));
    /* a block under two tiles' rows: one chunk */
    in = llama(TK_DIST_GEMM_REDUCE_SCATTER, 400, 8192, 8192);
    CHECK(tkd_plan_chunks(&in, NULL) == 1, "200-row block: more than one chunk");
    /* one rank: nothing to move; the model is the product (and the sum) */
    in = llama(TK_DIST_ALL_GATHER_GEMM, 4096, 4096, 4096);
    in.nranks = 1;
    in.block_rows = 4096;
    CHECK(tkd_plan_chunks(&in, NULL) == 1, "one rank: chunks");
    /* four ranks: the ring's three steps are in the model */
    in = llama(TK_DIST_ALL_GATHER_GEMM, 8192, 8192, 8192);
    double t2 = tkd_plan_time(&in, 2);
    in.nranks = 4;
    in.block_rows = 2048;
    CHECK(tkd_plan_time(&in, 2) > 0 && tkd_plan_sequential(&in) > tkd_plan_time(&in, 2) * 0.5,
          "4 ranks: %.1f us (2 ranks %.1f)", tkd_plan_time(&in, 2), t2);
}

static void test_chunks_choose(void)
{
    char why[256];
    int from = -1;
    CHECK(tkd_chunks_choose(3, "5", 2, &from, why, sizeof why) == 3 && from == 1, "desc first");
    CHECK(tkd_chunks_choose(0, "5", 2, &from, why, sizeof why) == 5 && from == 2, "then TK_DIST_CHUNKS");
    CHECK(tkd_chunks_choose(0, NULL, 2, &from, why, sizeof why) == 2 && from == 0, "then the plan");
    CHECK(tkd_chunks_choose(0, "", 2, &from, why, sizeof why) == 2 && from == 0, "empty variable: the plan");
    CHECK(tkd_chunks_choose(0, "x", 2, &from, why, sizeof why) == -1 && contains(why, "TK_DIST_CHUNKS"),
          "'x': %s", why);
    CHECK(tkd_chunks_choose(0, "65", 2, &from, why, sizeof why) == -1, "65 taken");
    CHECK(tkd_chunks_choose(0, "0", 2, &from, why, sizeof why) == -1, "0 taken");
    CHECK(tkd_chunks_choose(-1, NULL, 2, &from, why, sizeof why) == -1 && contains(why, "desc->chunks"),
          "-1: %s", why);
}

/* A valid reduce-scatter of rank 1 of 2 on device 0, for the refusals to spoil. */
static tk_dist_desc good_desc(void)
{
    tk_dist_desc d = TK_DIST_DESC_INIT;
    d.problem = (tk_gemm_problem){ TK_ROW_MAJOR, TK_OP_N, TK_OP_T, 256, 128, 64, 1.0f, 0.0f,
                                   (void *)0x1000, 64, (void *)0x2000, 64, (void *)0x3000, 128, TK_BF16 };
    return d;
}

static void expect(tk_dist_op op, const tk_dist_desc *d, int cur, int sdev, tk_status want, const char *word,
                   const char *label)
{
    tkd_call c = { .op = op, .rank = 1, .nranks = 2, .comm_device = 0, .device = 0, .current_device = cur,
                   .stream_device = sdev, .desc = d };
    char why[TKD_ERR_LEN] = "";
    tk_status st = tkd_check_call(&c, why, sizeof why);
    CHECK(st == want && (!word || contains(why, word)), "%s: %s '%s' (expected %s naming '%s')", label,
          tk_status_string(st), why, tk_status_string(want), word ? word : "");
}

static void test_checks(void)
{
    const tk_dist_op AG = TK_DIST_ALL_GATHER_GEMM, RS = TK_DIST_GEMM_REDUCE_SCATTER;
    tk_dist_desc d = good_desc();
    expect(RS, &d, 0, -1, TK_SUCCESS, NULL, "reduce-scatter");
    expect(AG, &d, 0, 0, TK_SUCCESS, NULL, "all-gather");
    expect((tk_dist_op)3, &d, 0, 0, TK_ERR_INVALID_VALUE, "op", "op 3");
    expect(RS, &d, 1, -1, TK_ERR_INVALID_VALUE, "current device is 1", "another current device");
    expect(RS, &d, 0, 1, TK_ERR_INVALID_VALUE, "stream", "a stream of another device");
    tkd_call c = { .op = RS, .rank = 0, .nranks = 2, .comm_device = 1, .device = 0, .current_device = 0,
                   .stream_device = -1, .desc = &d };
    char why[TKD_ERR_LEN];
    CHECK(tkd_check_call(&c, why, sizeof why) == TK_ERR_INVALID_VALUE && contains(why, "comm") &&
              contains(why, "device 1"), "comm of another device: %s", why);
    c.comm_device = 0;
    c.rank = 2;
    CHECK(tkd_check_call(&c, why, sizeof why) == TK_ERR_INVALID_VALUE && contains(why, "rank 2 of 2"),
          "rank 2 of 2: %s", why);

    d.problem.m = 255;
    expect(RS, &d, 0, -1, TK_ERR_INVALID_VALUE, "problem.m: 255 is not a multiple of the rank count 2", "M odd");
    expect(AG, &d, 0, -1, TK_ERR_INVALID_VALUE, "problem.m", "M odd (all-gather)");
    d = good_desc();
    d.problem.k = -1;
    expect(RS, &d, 0, -1, TK_ERR_INVALID_VALUE, "problem.k", "K < 0");
    d = good_desc();
    d.problem.layout = (tk_layout)2;
    expect(RS, &d, 0, -1, TK_ERR_INVALID_VALUE, "problem.layout", "layout 2");
    d = good_desc();
    d.problem.op_b = (tk_op)7;
    expect(RS, &d, 0, -1, TK_ERR_INVALID_VALUE, "problem.op_b", "op_b 7");
    d = good_desc();
    d.problem.c_type = (tk_dtype)5;
    expect(RS, &d, 0, -1, TK_ERR_INVALID_VALUE, "problem.c_type", "c_type 5");
    /* the all-gather moves rows of op(A): they must be contiguous */
    d = good_desc();
    d.problem.op_a = TK_OP_T;
    expect(AG, &d, 0, -1, TK_ERR_NOT_SUPPORTED, "contiguous", "all-gather, row-major op_a T");
    expect(RS, &d, 0, -1, TK_SUCCESS, NULL, "reduce-scatter, row-major op_a T");
    d.problem.layout = TK_COL_MAJOR;
    expect(AG, &d, 0, -1, TK_SUCCESS, NULL, "all-gather, column-major op_a T");
    d.problem.op_a = TK_OP_N;
    expect(AG, &d, 0, -1, TK_ERR_NOT_SUPPORTED, "TK_COL_MAJOR with TK_OP_N", "all-gather, column-major op_a N");
    d = good_desc();
    d.gathered = (void *)0x4000;
    expect(RS, &d, 0, -1, TK_ERR_INVALID_VALUE, "desc->gathered", "gathered with reduce-scatter");
    expect(AG, &d, 0, -1, TK_SUCCESS, NULL, "gathered with all-gather");
    d.gathered = (void *)0x4001;
    expect(AG, &d, 0, -1, TK_ERR_INVALID_VALUE, "2-byte aligned", "gathered odd");
    d = good_desc();
    d.partial_type = TK_BF16;
    expect(RS, &d, 0, -1, TK_SUCCESS, NULL, "bf16 partials");
    expect(AG, &d, 0, -1, TK_ERR_INVALID_VALUE, "partial_type", "partial_type with all-gather");
    d.partial_type = 3;
    expect(RS, &d, 0, -1, TK_ERR_INVALID_VALUE, "partial_type", "partial_type 3");
    d = good_desc();
    d.chunks = 65;
    expect(RS, &d, 0, -1, TK_ERR_INVALID_VALUE, "desc->chunks", "65 chunks");
    d = good_desc();
    d.check_shapes = 2;
    expect(RS, &d, 0, -1, TK_ERR_INVALID_VALUE, "check_shapes", "check_shapes 2");
    d = good_desc();
    d.reserved = 1;
    expect(RS, &d, 0, -1, TK_ERR_INVALID_VALUE, "reserved", "reserved");
    /* M = 0 passes: a no-op on every rank */
    d = good_desc();
    d.problem.m = 0;
    expect(RS, &d, 0, -1, TK_SUCCESS, NULL, "M = 0");
}

static void test_signature(void)
{
    tk_dist_desc d = good_desc();
    tkd_call c = { .op = TK_DIST_GEMM_REDUCE_SCATTER, .rank = 0, .nranks = 3, .desc = &d };
    int64_t all[3 * TKD_SIG_WORDS];
    char why[TKD_ERR_LEN] = "";
    for (int r = 0; r < 3; r++)
        tkd_signature(&c, 4, all + r * TKD_SIG_WORDS);
    CHECK(tkd_signature_compare(all, 3, 1, why, sizeof why) == 0, "equal signatures: %s", why);
    d.problem.m = 512;
    tkd_signature(&c, 4, all + 2 * TKD_SIG_WORDS);
    CHECK(tkd_signature_compare(all, 3, 1, why, sizeof why) == 1 && contains(why, "problem.m") &&
              contains(why, "rank 2"), "M differs on rank 2: %s", why);
    CHECK(tkd_signature_compare(all, 3, 2, why, sizeof why) == 1 && contains(why, "rank 0"),
          "seen from rank 2: %s", why);
    d.problem.m = 256;
    tkd_signature(&c, 2, all + 2 * TKD_SIG_WORDS);
    CHECK(tkd_signature_compare(all, 3, 0, why, sizeof why) == 1 && contains(why, "chunks"), "chunks: %s", why);
    /* the transport asked is part of it: one rank on p2p, another on ce is a clear error */
    tkd_signature(&c, 4, all);
    tkd_signature(&c, 4, all + TKD_SIG_WORDS);
    c.transport = TK_DIST_TRANSPORT_CE;
    tkd_signature(&c, 4, all + 2 * TKD_SIG_WORDS);
    CHECK(tkd_signature_compare(all, 3, 0, why, sizeof why) == 1 && contains(why, "transport") &&
              contains(why, "rank 2"), "transport differs on rank 2: %s", why);
    c.transport = TK_DIST_TRANSPORT_AUTO;
    /* the all-gather's N and op_b may differ between ranks */
    c.op = TK_DIST_ALL_GATHER_GEMM;
    tkd_signature(&c, 4, all);
    d.problem.n = 999;
    d.problem.op_b = TK_OP_N;
    tkd_signature(&c, 4, all + TKD_SIG_WORDS);
    CHECK(tkd_signature_compare(all, 2, 0, why, sizeof why) == 0, "all-gather, another N: %s", why);
}

static void test_transport_choose(void)
{
    char why[256] = "";
    int from = -1;
    /* d's setting first, then $TK_DIST_TRANSPORT, then auto */
    CHECK(tkd_transport_choose(TK_DIST_TRANSPORT_P2P, "ce", &from, why, sizeof why) == TK_DIST_TRANSPORT_P2P &&
              from == 1, "the setting first");
    CHECK(tkd_transport_choose(TK_DIST_TRANSPORT_AUTO, "p2p", &from, why, sizeof why) == TK_DIST_TRANSPORT_AUTO &&
              from == 1, "auto set overrides the variable");
    CHECK(tkd_transport_choose(-1, "ce", &from, why, sizeof why) == TK_DIST_TRANSPORT_CE && from == 2, "ce");
    CHECK(tkd_transport_choose(-1, "p2p", &from, why, sizeof why) == TK_DIST_TRANSPORT_P2P && from == 2, "p2p");
    CHECK(tkd_transport_choose(-1, "auto", &from, why, sizeof why) == TK_DIST_TRANSPORT_AUTO && from == 2, "auto");
    CHECK(tkd_transport_choose(-1, NULL, &from, why, sizeof why) == TK_DIST_TRANSPORT_AUTO && from == 0, "unset");
    CHECK(tkd_transport_choose(-1, "", &from, why, sizeof why) == TK_DIST_TRANSPORT_AUTO && from == 0, "empty");
    static const char *const bad[] = { "CE", "nvls", "ce ", "1", "p2p,ce" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        why[0] = '\0';
        CHECK(tkd_transport_choose(-1, bad[i], &from, why, sizeof why) == -1 && contains(why, "$TK_DIST_TRANSPORT") &&
                  contains(why, bad[i]) && contains(why, "auto, p2p or ce"), "'%s' taken: %s", bad[i], why);
    }
    CHECK(!strcmp(tkd_transport_name(TK_DIST_TRANSPORT_CE), "ce") && !strcmp(tkd_transport_name(7), "?"), "names");
}

static void test_ce_layout(void)
{
    /* 1000 rows in 4 chunks (0, 128, 384, 640, 1000), 3 ranks, rows of 10 bytes: region i begins at 3 x
     * bounds[i] rows, slot j at j x rows_i rows into it */
    int64_t b[TKD_MAX_CHUNKS_ASKED + 1];
    int n = tkd_chunk_bounds(1000, 4, b);
    CHECK(n == 4, "%d chunks", n);
    CHECK(tkd_ce_slot(b, 3, 0, 0, 10) == 0 && tkd_ce_slot(b, 3, 0, 2, 10) == 2 * 128 * 10 &&
              tkd_ce_slot(b, 3, 1, 0, 10) == 3 * 128 * 10 && tkd_ce_slot(b, 3, 1, 1, 10) == (3 * 128 + 256) * 10 &&
              tkd_ce_slot(b, 3, 3, 2, 10) == (3 * 640 + 2 * 360) * 10,
          "slot offsets");
    /* the slots tile the window: each begins where the one before ends, the last ends at R x rows */
    for (int R = 1; R <= 5; R++)
        for (int c = 1; c <= 9; c += 2) {
            n = tkd_chunk_bounds(777, c, b);
            size_t at = 0;
            int ok = 1;
            for (int i = 0; i < n; i++)
                for (int j = 0; j < R; j++) {
                    ok &= tkd_ce_slot(b, R, i, j, 6) == at;
                    at += (size_t)(b[i + 1] - b[i]) * 6;
                }
            CHECK(ok && at == (size_t)R * 777 * 6, "R %d, %d chunks: the slots do not tile the window", R, n);
        }
    /* windows: R x rows x row bytes, rounded up to 32 MiB; qkv at 8192 tokens on 2 ranks: 128 MiB */
    CHECK(tkd_ce_window_bytes(2, 4096, 8192 * 2) == ((size_t)128 << 20), "qkv window %zu",
          tkd_ce_window_bytes(2, 4096, 8192 * 2));
    CHECK(tkd_ce_window_bytes(2, 1, 2) == TKD_CE_GRAIN && tkd_ce_window_bytes(2, 0, 2) == 0 &&
              tkd_ce_window_bytes(3, 1000, 1000) == TKD_CE_GRAIN &&
              tkd_ce_window_bytes(2, (int64_t)TKD_CE_GRAIN / 4 + 1, 2) == 2 * TKD_CE_GRAIN,
          "window rounding");
}

static void test_desc_versions(void)
{
    tk_dist_desc in = good_desc(), out;
    CHECK(tkd_read_desc(NULL, &in, &out) == TK_SUCCESS && out.problem.m == 256 && out.size == sizeof out,
          "read: %s", tk_dist_last_error(NULL));
    in.size = 8;
    CHECK(tkd_read_desc(NULL, &in, &out) == TK_ERR_INVALID_VALUE && contains(tk_dist_last_error(NULL), "size"),
          "size 8: %s", tk_dist_last_error(NULL));
    CHECK(tkd_read_desc(NULL, NULL, &out) == TK_ERR_INVALID_VALUE, "NULL desc");
    /* a newer caller's struct: zero tail accepted, a set byte refused */
    struct { tk_dist_desc d; int64_t more; } big;
    memset(&big, 0, sizeof big);
    big.d = good_desc();
    big.d.size = sizeof big;
    CHECK(tkd_read_desc(NULL, &big.d, &out) == TK_SUCCESS, "zero tail: %s", tk_dist_last_error(NULL));
    big.more = 1;
    CHECK(tkd_read_desc(NULL, &big.d, &out) == TK_ERR_NOT_SUPPORTED && contains(tk_dist_last_error(NULL), "byte"),
          "set tail: %s", tk_dist_last_error(NULL));
}

static void test_loader(void)
{
    tkd_nccl t;
    char why[512] = "";
    CHECK(tkd_nccl_open("libtilekit-no-such-nccl.so.2", &t, why, sizeof why) == -1 && t.lib == NULL &&
              contains(why, "NCCL cannot be loaded") && contains(why, "libtilekit-no-such-nccl.so.2"),
          "a missing file: %s", why);
    if (tkd_nccl_open("libnccl.so.2", &t, why, sizeof why) == 0) {
        int v = 0;
        CHECK(t.GetVersion && t.GetVersion(&v) == ncclSuccess && v >= 2700 && t.Send && t.Recv && t.GroupEnd &&
                  t.CommCuDevice && t.CommGetAsyncError && t.AllGather,
              "libnccl.so.2 loaded, version %d, a function missing", v);
        CHECK(contains(t.GetErrorString(ncclInvalidArgument), "invalid"), "ncclGetErrorString: %s",
              t.GetErrorString(ncclInvalidArgument));
        /* the copy-engine transport's functions: all five from NCCL 2.28 on, else optional */
        CHECK(v < 22800 || tkd_ce_missing(&t) == NULL, "NCCL %d lacks %s", v, tkd_ce_missing(&t));
        printf("     (NCCL %d loaded from libnccl.so.2; copy-engine functions: %s)\n", v,
               tkd_ce_missing(&t) ? tkd_ce_missing(&t) : "all");
    } else {
        printf("     (no libnccl.so.2 here: %s)\n", why);
    }
    /* an NCCL without them: the first missing one is named */
    memset(&t, 0, sizeof t);
    CHECK(tkd_ce_missing(&t) && !strcmp(tkd_ce_missing(&t), "ncclCommSplit"), "empty table: %s", tkd_ce_missing(&t));
    t.CommSplit = (ncclResult_t (*)(ncclComm_t, int, int, ncclComm_t *, void *))1;
    t.MemAlloc = (ncclResult_t (*)(void **, size_t))1;
    t.MemFree = (ncclResult_t (*)(void *))1;
    t.CommWindowRegister = (ncclResult_t (*)(ncclComm_t, void *, size_t, void **, int))1;
    CHECK(tkd_ce_missing(&t) && !strcmp(tkd_ce_missing(&t), "ncclCommWindowDeregister"), "4 of 5: %s",
          tkd_ce_missing(&t));
}

/* In a child (the loader's answer is the process's, once): with
 * $TK_DIST_NCCL_LIB naming a missing file, every call that needs NCCL
 * says so with TK_ERR_COMM. */
static void test_no_nccl(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TK_DIST_NCCL_LIB", "/nonexistent/libnccl.so.2", 1);
        tk_dist d = NULL;
        unsigned char id[TK_DIST_UNIQUE_ID_BYTES];
        int bad = tk_dist_create(&d, (struct ncclComm *)0x1000) != TK_ERR_COMM || d != NULL ||
                  !contains(tk_dist_last_error(NULL), "/nonexistent/libnccl.so.2") ||
                  tk_dist_unique_id(id) != TK_ERR_COMM || !contains(tk_dist_last_error(NULL), "NCCL cannot be loaded");
        if (bad)
            fprintf(stderr, "    child: %s\n", tk_dist_last_error(NULL));
        _exit(bad);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child saw another answer (status %d)", status);
}

static void test_public_without_gpu(void)
{
    tk_dist d = NULL;
    CHECK(tk_dist_create(NULL, NULL) == TK_ERR_INVALID_VALUE && contains(tk_dist_last_error(NULL), "out"),
          "NULL out: %s", tk_dist_last_error(NULL));
    CHECK(tk_dist_create(&d, NULL) == TK_ERR_INVALID_VALUE && contains(tk_dist_last_error(NULL), "comm") && !d,
          "NULL comm: %s", tk_dist_last_error(NULL));
    CHECK(tk_dist_destroy(NULL) == TK_SUCCESS && tk_dist_handle(NULL) == NULL, "NULL context");
    CHECK(tk_dist_set_timeout(NULL, 5) == TK_ERR_INVALID_VALUE && tk_dist_set_comm_sms(NULL, 5) ==
              TK_ERR_INVALID_VALUE && tk_dist_set_link_gbps(NULL, 5) == TK_ERR_INVALID_VALUE &&
              tk_dist_sync(NULL, 0) == TK_ERR_INVALID_VALUE &&
              tk_dist_set_transport(NULL, TK_DIST_TRANSPORT_CE) == TK_ERR_INVALID_VALUE,
          "NULL context taken by a setter");
    tk_dist_desc g = good_desc();
    CHECK(tk_dist_all_gather_gemm(NULL, &g, NULL) == TK_ERR_INVALID_VALUE &&
              tk_dist_gemm_reduce_scatter(NULL, &g, NULL) == TK_ERR_INVALID_VALUE,
          "NULL context taken by an operation");
    tk_dist_plan_info pi = TK_DIST_PLAN_INFO_INIT;
    CHECK(tk_dist_plan(NULL, TK_DIST_ALL_GATHER_GEMM, &g, &pi) == TK_ERR_INVALID_VALUE, "NULL context: plan");
    CHECK(tk_dist_comm_init(NULL, 2, "", 0) == TK_ERR_INVALID_VALUE, "comm_init NULL out");
    struct ncclComm *comm = (struct ncclComm *)0x1;
    unsigned char id[TK_DIST_UNIQUE_ID_BYTES] = { 0 };
    CHECK(tk_dist_comm_init(&comm, 2, id, 2) == TK_ERR_INVALID_VALUE && comm == NULL, "rank 2 of 2 taken");
    CHECK(tk_dist_comm_destroy(NULL) == TK_SUCCESS && tk_dist_comm_abort(NULL) == TK_SUCCESS, "NULL comm");
    /* with NCCL here and no GPU: NO_DEVICE before the communicator is touched */
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    cudaGetLastError();
    if (e != cudaSuccess || n == 0) {
        tk_status st = tk_dist_create(&d, (struct ncclComm *)0x1000);
        CHECK((st == TK_ERR_NO_DEVICE && contains(tk_dist_last_error(NULL), "no CUDA device")) ||
                  (st == TK_ERR_COMM && contains(tk_dist_last_error(NULL), "NCCL cannot be loaded")),
              "no GPU: %s: %s", tk_status_string(st), tk_dist_last_error(NULL));
    }
    CHECK(strcmp(tk_status_string(TK_ERR_COMM), "TK_ERR_COMM: communication (NCCL) failed") == 0, "status name %s",
          tk_status_string(TK_ERR_COMM));
}

void tk_tests(void)
{
    TK_TEST(test_bounds);
    TK_TEST(test_plan_model);
    TK_TEST(test_chunks_choose);
    TK_TEST(test_checks);
    TK_TEST(test_signature);
    TK_TEST(test_transport_choose);
    TK_TEST(test_ce_layout);
    TK_TEST(test_desc_versions);
    TK_TEST(test_loader);
    TK_TEST(test_no_nccl);
    TK_TEST(test_public_without_gpu);
}
