"""Issue 38's bindings against the fake libtilekit (fake_tilekit.c logs
every argument of tk_gemm_batched and tk_gemm_grouped), on both backends,
each in a fresh interpreter (test_fake_lib.run): what reaches the library
without a GPU. The problem (layout, ops, sizes, leading dimensions,
pointers), the kind, count and strides, the offsets' and error flag's
pointers as given, the stream (torch's current one, stream=, CAI streams
joined), and out allocated through torch in the form's shape.
"""
from test_fake_lib import ON_TORCH, run

# After PRELUDE and ON_TORCH: calls(n) lists the batched and grouped calls
# (and issue 39's tk_gemm_run: test_fake_lib_epilogue.py) that reached the
# library since log entry n, as dicts of their fields.
CALLS = ON_TORCH + """
    def calls(n):
        return [dict(f, call=name) for name, f, _ in log()[n:] if name in ("gemm_batched", "gemm_grouped",
                                                                            "gemm_run")]

    def one(fn, *args, **kw):
        n = len(log())
        r = fn(*args, **kw)
        got = calls(n)
        assert len(got) == 1, got
        return r, got[0]

    def ints(d, *keys):
        return tuple(int(d[k], 0) if isinstance(d[k], str) else d[k] for k in keys)

    def ptr(x):
        return x.__cuda_array_interface__["data"][0]
"""


def test_batched_reaches_library():
    body = CALLS + """
    G, M, N, K = 3, 8, 6, 4
    A, B, C = Fake((G, M, K)), Fake((G, K, N), strides=(N * K, 1, K)), Fake((G, M, N), "<f4")
    r, c = one(tilekit.gemm_batched, A, B, C, alpha=0.5, beta=1.0, kernel="k01_naive")
    assert r is C and c["call"] == "gemm_batched", c
    assert ints(c, "layout", "op_a", "op_b", "m", "n", "k", "lda", "ldb", "ldc", "c_type") == \\
        (0, 0, 1, M, N, K, K, K, N, 0), c
    assert (c["a"], c["b"], c["c"]) == (ptr(A), ptr(B), ptr(C)), c
    assert ints(c, "count", "stride_a", "stride_b", "stride_c") == (G, M * K, N * K, M * N), c
    assert (c["alpha"], c["beta"], c["kernel"], c["stream"]) == ("0.5", "1", "k01_naive", 0), c
    # torch operands, out None: allocated G x M x N (bf16 asked) on torch's current stream, where the call runs
    At, Bt = torch.Tensor((G, M, K), torch.bfloat16), torch.Tensor((G, K, N), torch.bfloat16, strides=(0, N, 1))
    del torch.log[:]
    y, c = one(tilekit.gemm_batched, At, Bt, out_dtype="bf16")
    assert torch.log == [("empty", (G, M, N), "bfloat16", 0, 0x100)], torch.log
    assert c["c"] == y.data_ptr() and c["stream"] == 0x100 and ints(c, "count", "stride_b", "c_type") == (G, 0, 1), c
    print("OK")
"""
    run(body)


def test_grouped_reaches_library():
    body = CALLS + """
    G, M, N, K = 4, 20, 6, 8
    offs, err = Fake((G,), "<i4"), Fake((1,), "<i4")
    # rows: x (M x K) times G nn.Linear weights N x K seen as K x N (op T), offs and the error flag passed through
    x, w, y = Fake((M, K)), Fake((G, K, N), strides=(N * K, 1, K)), Fake((M, N))
    r, c = one(tilekit.gemm_grouped, x, w, offs, y, group_error=err)
    assert r is y and c["call"] == "gemm_grouped", c
    assert ints(c, "kind", "count", "layout", "op_a", "op_b", "m", "n", "k", "lda", "ldb", "ldc", "c_type") == \\
        (2, G, 0, 0, 1, M, N, K, K, K, N, 1), c
    assert (c["offs"], c["group_error"], c["a"], c["b"], c["c"]) == (ptr(offs), ptr(err), ptr(x), ptr(w), ptr(y)), c
    assert ints(c, "stride_a", "stride_b", "stride_c") == (0, N * K, 0), c
    # K: x.T (the transposed view of an M x K tensor: op T) times dy, one K x N per group
    xt, dy, dw = Fake((K, M), strides=(1, K)), Fake((M, N)), Fake((G, K, N), "<f4")
    r, c = one(tilekit.gemm_grouped, xt, dy, offs, dw)
    assert ints(c, "kind", "count", "op_a", "op_b", "m", "n", "k", "lda", "ldb", "ldc") == \\
        (3, G, 1, 0, K, N, M, K, N, N), c
    assert ints(c, "stride_a", "stride_b", "stride_c") == (0, 0, K * N) and c["group_error"] == 0, c
    # masked: row counts, every stride
    r, c = one(tilekit.gemm_grouped, Fake((G, M, K)), Fake((G, K, N)), offs, Fake((G, M, N), "<f4"))
    assert ints(c, "kind", "count", "stride_a", "stride_b", "stride_c") == (4, G, M * K, K * N, M * N), c
    # torch: int32 offs tensor, out None: the form's shape, on torch's current stream
    xt_, wt_ = torch.Tensor((M, K), torch.bfloat16), torch.Tensor((G, K, N), torch.bfloat16)
    ot = torch.Tensor((G,), torch.int32)
    del torch.log[:]
    y, c = one(tilekit.gemm_grouped, xt_, wt_, ot, out_dtype=torch.bfloat16)
    assert torch.log == [("empty", (M, N), "bfloat16", 0, 0x100)], torch.log
    assert (c["offs"], c["c"], c["stream"]) == (ot.data_ptr(), y.data_ptr(), 0x100), c
    del torch.log[:]
    y, c = one(tilekit.gemm_grouped, torch.Tensor((K, M), torch.bfloat16), torch.Tensor((M, N), torch.bfloat16), ot,
               stream=0x200)
    assert [e for e in torch.log if e[0] == "empty"] == [("empty", (G, K, N), "float32", 0, 0x200)], torch.log
    assert ints(c, "kind", "count", "stride_c") == (3, G, K * N) and c["stream"] == 0x200, c
    # offs on another device than the operands: refused before the library
    n = len(log())
    try:
        tilekit.gemm_grouped(xt_, wt_, torch.Tensor((G,), torch.int32, device=1))
    except TypeError as e:
        assert "A, B, out and offs must be on one CUDA device, got cuda:0, cuda:1" in str(e), e
    else:
        raise AssertionError("offs on another device was taken")
    assert calls(n) == [], calls(n)
    print("OK")
"""
    run(body)


def test_grouped_offs_stream_joined():
    """The CAI stream of offs is the call's stream's producer like any
    operand's: joined before and after (record on it, wait on the call's)."""
    body = CALLS + """
    G, M, N, K = 4, 20, 6, 8
    n = len(log())
    tilekit.gemm_grouped(Fake((M, K)), Fake((G, K, N)), Fake((G,), "<i4", stream=0x700), Fake((M, N), "<f4",
                                                                                                stream=0x900))
    t = [(e, f.get("stream")) for e, f, _ in log()[n:] if e in ("record", "wait", "gemm_grouped")]
    assert t == [("record", 0x700), ("wait", 0x900), ("gemm_grouped", 0x900), ("record", 0x900), ("wait", 0x700)], t
    print("OK")
"""
    run(body)
