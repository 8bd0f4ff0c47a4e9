"""Issue 40's bindings against the fake libtilekit (fake_tilekit.c logs
every field of the tk_gemm_desc given to tk_gemm_run and of the
tk_quantize_desc given to tk_quantize_fp8), on both backends, each in a
fresh interpreter with the fake torch (test_fake_lib.run): the descriptors
tilekit/_fp8.py builds for scaled_mm and quantize_fp8 (the problem's
mapping of torch._scaled_mm's operands, each scale mode and its strides,
the quantizer's leading dimensions and scale layouts; scaled_grouped_mm's
group kind, offsets, batch strides and the scales' strides per product),
the stream they run on, what the wrapper refuses before the library, and a library refusal
raised as its status's class with its message. Also the ctypes mirror of
tk_quantize_desc against the C compiler's layout of the header's struct.
"""

import fakes
from test_fake_lib import run

# After PRELUDE: the fake torch with tilekit, _fp8, calls(n) (the library
# calls since log entry n, as dicts), one(fn, ...) (a call and the fields
# of the one library call it made), T (a fake tensor), refused(...).
BODY = """
    torch = fakes.fake_torch()
    sys.modules["torch"] = torch
    import tilekit
    from tilekit import _fp8
    from test_wrapper import raises
    torch.current[0] = 0x100
    E4, E5, BF, F32 = torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float32

    def T(shape, dtype, strides=None):
        return torch.Tensor(shape, dtype, strides=strides)

    def calls(n):
        return [dict(f, call=name) for name, f, _ in log()[n:] if name in ("gemm_run", "quantize")]

    def ints(d, *keys):
        return tuple(int(d[k], 0) if isinstance(d[k], str) else d[k] for k in keys)

    def gemm(a, b, sa, sb, out):
        n = len(log())
        _fp8.run_gemm(0, 0x100, _fp8.scaled_mm_fields(a, b, sa, sb, out))
        got = calls(n)
        assert len(got) == 1, got
        return got[0]

    def grouped(a, b, sa, sb, offs, out):
        n = len(log())
        _fp8.run_gemm(0, 0x100, _fp8.scaled_grouped_mm_fields(a, b, sa, sb, offs, out))
        got = calls(n)
        assert len(got) == 1, got
        return got[0]

    def quantize(x, q, s, mode):
        n = len(log())
        _fp8.run_quantize(0, 0x100, _fp8.quantize_fields(x, q, s, mode))
        got = calls(n)
        assert len(got) == 1, got
        return got[0]

    def refused(exc, match, fn, *args):
        n = len(log())
        raises(exc, fn, *args, match=match)
        assert calls(n) == [], calls(n)
"""


def test_qdesc_layout_matches_header():
    """_lib.QuantizeDesc's offsets, field sizes and size are the C
    compiler's for the header's tk_quantize_desc."""
    from tilekit import _lib
    c, py = fakes.struct_layouts("fake_qdesc_layout", _lib.QuantizeDesc)
    assert c == py, (c, py)


def test_scaled_mm_descriptor():
    body = BODY + """
    M, N, K = 8, 200, 256
    a, b, out = T((M, K), E4), T((K, N), E5, strides=(1, K)), T((M, N), BF)   # b column-major: torch's
    # tensor-wise: one value each (shape () or (1, 1))
    sa, sb = T((), F32), T((1, 1), F32)
    c = gemm(a, b, sa, sb, out)
    assert ints(c, "size", "layout", "op_a", "op_b", "m", "n", "k", "lda", "ldb", "ldc", "c_type") == \\
        (ctypes.sizeof(tilekit._lib.GemmDesc), 0, 0, 1, M, N, K, K, K, N, 1), c
    assert (c["a"], c["b"], c["c"], c["scale_a"], c["scale_b"]) == \\
        (a.data_ptr(), b.data_ptr(), out.data_ptr(), sa.data_ptr(), sb.data_ptr()), c
    assert ints(c, "a_fp8", "b_fp8", "scale_mode", "ld_scale_a", "ld_scale_b") == (1, 2, 1, 0, 0), c
    assert ints(c, "epilogue", "bias", "d", "aux", "group_kind", "count") == (0,) * 6, c
    assert (c["alpha"], c["beta"], c["stream"], c["kernel"]) == ("1", 0, 0x100, "auto"), c
    # row-wise: (M, 1) and (1, N); fp32 out with a padded row; b row-major (op N)
    out32 = T((M, N), F32, strides=(N + 8, 1))
    c = gemm(a, T((K, N), E4, strides=(N, 1)), T((M, 1), F32), T((1, N), F32), out32)
    assert ints(c, "op_b", "ldb", "ldc", "c_type", "a_fp8", "b_fp8", "scale_mode") == (0, N, N + 8, 0, 1, 1, 2), c
    # block: (M, K/128) and (ceil(N/128), K/128), first dimension contiguous, padded
    sa, sb = T((M, 2), F32, strides=(1, M + 4)), T((2, 2), F32, strides=(1, 3))
    c = gemm(a, b, sa, sb, out)
    assert ints(c, "scale_mode", "ld_scale_a", "ld_scale_b") == (3, M + 4, 3), c
    # a with a padded row (lda from stride(0)), b a view with ldb > K
    c = gemm(T((M, K), E4, strides=(K + 16, 1)), T((K, N), E4, strides=(1, K + 32)), T((M, 1), F32),
             T((1, N), F32), out)
    assert ints(c, "lda", "ldb", "op_b") == (K + 16, K + 32, 1), c
    print("OK")
"""
    run(body)


def test_scaled_mm_refusals():
    body = BODY + """
    M, N, K = 8, 6, 256
    a, b, out = T((M, K), E4), T((K, N), E4, strides=(1, K)), T((M, N), BF)
    one = T((), F32)
    f = _fp8.scaled_mm_fields
    refused(TypeError, ("a:", "float8_e4m3fn"), f, T((M, K), BF), b, one, one, out)
    refused(TypeError, ("b:", "float8"), f, a, T((K, N), F32), one, one, out)
    refused(ValueError, ("shape mismatch", "8 x 256", "128 x 6"), f, a, T((128, N), E4), one, one, out)
    refused(ValueError, ("a:", "2-D"), f, T((2, M, K), E4), b, one, one, out)
    refused(TypeError, ("out_dtype", "float16"), f, a, b, one, one, T((M, N), torch.float16))
    refused(TypeError, ("scale_a", "float32"), f, a, b, T((), BF), one, out)
    refused(ValueError, ("scale_a, scale_b", "(8, 3)", "(1, 6)"), f, a, b, T((M, 3), F32), T((1, N), F32), out)
    refused(ValueError, ("scale_b", "contiguous"), f, a, b, T((M, 1), F32), T((1, N), F32, strides=(N, 2)), out)
    refused(ValueError, ("scale_a", "first dimension"), f, a, b, T((M, 2), F32), T((1, 2), F32), out)
    refused(ValueError, ("a:", "row-major"), f, T((M, K), E4, strides=(1, M)), b, one, one, out)
    refused(ValueError, ("b:", "neither"), f, a, T((K, N), E4, strides=(2 * N, 2)), one, one, out)
    refused(ValueError, ("out:", "(8, 6)"), f, a, b, one, one, T((N, M), BF))
    # K not a multiple of 128: block-shaped scales fit nothing
    refused(ValueError, ("scale_a, scale_b", "multiple of 128"), f, T((M, 200), E4), T((200, N), E4), T((M, 2), F32),
            T((1, 2), F32), out)
    gemm(a, b, one, one, out)   # and a valid call reaches the library
    print("OK")
"""
    run(body)


def test_scaled_grouped_mm_descriptor():
    """scaled_grouped_mm's descriptor in each form and scale mode: TK_GROUP_ROWS
    (2-D a, 3-D b, offs) and TK_GROUP_BATCHED (3-D a and b), b as torch's
    transposed view of G x N x K weights (op T) or row-major (op N), the
    scales' strides from one product's set to the next (0 where the
    operand is one for all), offs passed through, no group_error."""
    body = BODY + """
    G, M, N, K = 5, 40, 200, 256
    I32 = torch.int32
    a, offs, out = T((M, K), E4), T((G,), I32), T((M, N), BF)
    b = T((G, K, N), E5, strides=(N * K, 1, K))   # w.transpose(-2, -1) of G x N x K weights
    # rows, row-wise (torch._scaled_grouped_mm's): scale_a (M,), scale_b (G, N)
    sa, sb = T((M,), F32), T((G, N), F32)
    c = grouped(a, b, sa, sb, offs, out)
    assert ints(c, "size", "layout", "op_a", "op_b", "m", "n", "k", "lda", "ldb", "ldc", "c_type") == \\
        (ctypes.sizeof(tilekit._lib.GemmDesc), 0, 0, 1, M, N, K, K, K, N, 1), c
    assert ints(c, "group_kind", "count", "stride_a", "stride_b", "stride_c", "group_error") == (2, G, 0, N * K, 0, 0), c
    assert (c["a"], c["b"], c["c"], c["offs"], c["scale_a"], c["scale_b"]) == \\
        (a.data_ptr(), b.data_ptr(), out.data_ptr(), offs.data_ptr(), sa.data_ptr(), sb.data_ptr()), c
    assert ints(c, "a_fp8", "b_fp8", "scale_mode", "ld_scale_a", "ld_scale_b", "stride_scale_a", "stride_scale_b") == \\
        (1, 2, 2, 0, 0, 0, N), c
    assert ints(c, "epilogue", "bias", "d", "aux") == (0,) * 4 and (c["stream"], c["kernel"]) == (0x100, "auto"), c
    # (M, 1) scale_a (quantize_fp8's "row"), padded scale_b rows: stride_scale_b N + 8; b row-major: op N
    c = grouped(a, T((G, K, N), E4), T((M, 1), F32), T((G, N), F32, strides=(N + 8, 1)), offs, out)
    assert ints(c, "op_b", "ldb", "b_fp8", "scale_mode", "stride_scale_a", "stride_scale_b", "stride_b") == \\
        (0, N, 1, 2, 0, N + 8, K * N), c
    # per tensor: scale_a one value, scale_b one per expert (strided: stride_scale_b 3)
    for one in (T((), F32), T((1,), F32), T((1, 1), F32)):
        c = grouped(a, b, one, T((G,), F32, strides=(3,)), offs, T((M, N), F32, strides=(N + 4, 1)))
        assert ints(c, "scale_mode", "stride_scale_a", "stride_scale_b", "c_type", "ldc") == (1, 0, 3, 0, N + 4), c
    # block: scale_a (M, K/128) M's dimension contiguous, scale_b (G, ceil(N/128), K/128) n-blocks contiguous
    sa, sb = T((M, 2), F32, strides=(1, M + 4)), T((G, 2, 2), F32, strides=(9, 1, 3))
    c = grouped(a, b, sa, sb, offs, out)
    assert ints(c, "scale_mode", "ld_scale_a", "ld_scale_b", "stride_scale_a", "stride_scale_b") == \\
        (3, M + 4, 3, 0, 9), c
    # one weight for all groups (an expanded b): its scales one set too, every stride 0
    c = grouped(a, T((G, K, N), E4, strides=(0, 1, K)), T((M,), F32), T((G, N), F32, strides=(0, 1)), offs, out)
    assert ints(c, "stride_b", "stride_scale_b", "op_b") == (0, 0, 1), c
    # one group: no strides at all
    c = grouped(a, T((1, K, N), E4, strides=(N * K, 1, K)), T((M,), F32), T((1, N), F32), T((1,), I32), out)
    assert ints(c, "count", "stride_b", "stride_scale_b") == (1, 0, 0), c
    # batched: G x M x K times G x K x N, offs none, out G x M x N
    a3, o3 = T((G, M, K), E5), T((G, M, N), F32)
    c = grouped(a3, b, T((G, M), F32), T((G, N), F32), None, o3)
    assert ints(c, "group_kind", "count", "m", "n", "k", "lda", "ldb", "ldc", "c_type") == (1, G, M, N, K, K, K, N, 0), c
    assert ints(c, "stride_a", "stride_b", "stride_c", "offs", "a_fp8", "b_fp8") == (M * K, N * K, M * N, 0, 2, 2), c
    assert ints(c, "scale_mode", "stride_scale_a", "stride_scale_b") == (2, M, N), c
    c = grouped(a3, b, T((G,), F32), T((G,), F32), None, o3)
    assert ints(c, "scale_mode", "stride_scale_a", "stride_scale_b") == (1, 1, 1), c
    c = grouped(a3, b, T((G, M, 2), F32, strides=(2 * M + 6, 1, M + 3)), T((G, 2, 2), F32, strides=(4, 1, 2)), None,
                o3)
    assert ints(c, "scale_mode", "ld_scale_a", "ld_scale_b", "stride_scale_a", "stride_scale_b") == \\
        (3, M + 3, 2, 2 * M + 6, 4), c
    # an expanded a (one matrix for all products) with its scales expanded alike
    c = grouped(T((G, M, K), E4, strides=(0, K, 1)), b, T((G, M), F32, strides=(0, 1)), T((G, N), F32), None, o3)
    assert ints(c, "stride_a", "stride_scale_a", "stride_b", "stride_scale_b") == (0, 0, N * K, N), c
    print("OK")
"""
    run(body)


def test_scaled_grouped_mm_refusals():
    """What scaled_grouped_mm refuses before the library, naming the
    argument and what was expected; offs' values (check_offs) too."""
    body = BODY + """
    G, M, N, K = 3, 16, 64, 256
    I32 = torch.int32
    a, offs, out = T((M, K), E4), T((G,), I32), T((M, N), BF)
    b = T((G, K, N), E4, strides=(N * K, 1, K))
    sa, sb = T((M,), F32), T((G, N), F32)
    f = _fp8.scaled_grouped_mm_fields
    refused(TypeError, ("a:", "float8_e4m3fn"), f, T((M, K), BF), b, sa, sb, offs, out)
    refused(TypeError, ("b:", "float8"), f, a, T((G, K, N), F32), sa, sb, offs, out)
    refused(ValueError, ("b:", "groups of K", "(G, K, N)"), f, a, T((K, N), E4), sa, sb, offs, out)
    refused(ValueError, ("b:", "groups of N"), f, T((G, M, K), E4), T((K, N), E4), sa, sb, offs, out)
    refused(ValueError, ("a:", "2-D or 3-D"), f, T((1, G, M, K), E4), b, sa, sb, offs, out)
    refused(ValueError, ("shape mismatch", "(16, 128)"), f, T((M, 128), E4), b, sa, sb, offs, out)
    refused(ValueError, ("offs:", "required"), f, a, b, sa, sb, None, out)
    refused(TypeError, ("offs:", "torch.int32"), f, a, b, sa, sb, T((G,), torch.float32), out)
    refused(ValueError, ("offs:", "(3,)"), f, a, b, sa, sb, T((G + 1,), I32), out)
    refused(ValueError, ("offs:", "contiguous"), f, a, b, sa, sb, T((G,), I32, strides=(2,)), out)
    refused(ValueError, ("offs:", "batched"), f, T((G, M, K), E4), b, T((G, M), F32), sb, offs, T((G, M, N), BF))
    refused(ValueError, ("shape mismatch", "3 matrices but b 2"), f, T((G, M, K), E4), T((2, K, N), E4), sa, sb,
            None, T((G, M, N), BF))
    refused(TypeError, ("out_dtype", "float16"), f, a, b, sa, sb, offs, T((M, N), torch.float16))
    refused(ValueError, ("out:", "(16, 64)"), f, a, b, sa, sb, offs, T((M, N + 1), BF))
    refused(TypeError, ("scale_b", "float32"), f, a, b, sa, T((G, N), BF), offs, out)
    refused(ValueError, ("scale_a, scale_b", "(16, 2)", "(3, 64)", "(M,) and (G, N)"), f, a, b, T((M, 2), F32), sb,
            offs, out)
    refused(ValueError, ("scale_a, scale_b", "(3, 16)", "(G, N)"), f, a, b, T((G, M), F32), sb, offs, out)
    refused(ValueError, ("scale_a, scale_b", "(G,)"), f, T((G, M, K), E4), b, T((), F32), T((G,), F32), None,
            T((G, M, N), BF))
    refused(ValueError, ("scale_a", "row scales must be contiguous"), f, a, b, T((M,), F32, strides=(2,)), sb, offs,
            out)
    refused(ValueError, ("scale_b", "contiguous"), f, a, b, sa, T((G, N), F32, strides=(2 * N, 2)), offs, out)
    # block: K a multiple of 128; the dimension of rows / n-blocks contiguous
    refused(ValueError, ("multiple of 128", "K=200"), f, T((M, 200), E4), T((G, 200, N), E4, strides=(N * 200, 1, 200)),
            T((M, 2), F32, strides=(1, M)), T((G, 1, 2), F32), offs, out)
    refused(ValueError, ("scale_a", "first dimension contiguous"), f, a, b, T((M, 2), F32), T((G, 1, 2), F32), offs,
            out)
    refused(ValueError, ("scale_b", "second dimension contiguous"), f, a, T((G, K, 300), E4, strides=(300 * K, 1, K)),
            T((M, 2), F32, strides=(1, M)), T((G, 3, 2), F32), offs, T((M, 300), BF))
    # the scales' sets against the operand's: overlapping sets, or per-product scales of a shared operand
    refused(ValueError, ("scale_b", "stride(0) 0 is below", "64 values"), f, a, b, sa,
            T((G, N), F32, strides=(0, 1)), offs, out)
    refused(ValueError, ("scale_b", "stride(0) 6 is below", "8 values"), f, a, b, T((M, 2), F32, strides=(1, M)),
            T((G, 1, 2), F32, strides=(6, 1, 4)), offs, out)
    refused(ValueError, ("scale_b", "b is one matrix for all"), f, a, T((G, K, N), E4, strides=(0, 1, K)), sa, sb,
            offs, out)
    refused(ValueError, ("scale_a", "a is one matrix for all"), f, T((G, M, K), E4, strides=(0, K, 1)), b,
            T((G, M), F32), sb, None, T((G, M, N), BF))
    refused(ValueError, ("scale_a", "stride(0) 1 is below", "16 values"), f, T((G, M, K), E4), b,
            T((G, M), F32, strides=(1, 1)), sb, None, T((G, M, N), BF))
    # layouts: a's rows (its matrices' rows) contiguous, b's matrices column- or row-major
    refused(ValueError, ("a:", "rows must be contiguous"), f, T((M, K), E4, strides=(1, M)), b, sa, sb, offs, out)
    refused(ValueError, ("a:", "rows must be contiguous"), f, T((G, M, K), E4, strides=(M * K, 1, M)), b,
            T((G, M), F32), sb, None, T((G, M, N), BF))
    refused(ValueError, ("b:", "neither"), f, a, T((G, K, N), E4, strides=(4 * N * K, 2 * N, 2)), sa, sb, offs, out)
    grouped(a, b, sa, sb, offs, out)   # and a valid call reaches the library
    # offs' values, read on the host (check_offs): non-decreasing from 0, ending at M at most
    _fp8.check_offs([0, 0, 5, 16], 16)
    _fp8.check_offs([], 0)
    raises(ValueError, _fp8.check_offs, [4, 2, 9], 16, match=("offs:", "offs[1] = 2 is below offs[0] = 4"))
    raises(ValueError, _fp8.check_offs, [-1, 3], 16, match=("offs:", "offs[0] = -1 is below 0"))
    raises(ValueError, _fp8.check_offs, [3, 17], 16, match=("offs:", "17", "past a's 16 rows"))
    print("OK")
"""
    run(body)


def test_quantize_descriptor():
    body = BODY + """
    R, C = 300, 4100
    x, q = T((R, C), BF, strides=(C + 4, 1)), T((R, C), E5)
    for mode, shape, strides, fmode, ld in (("tensor", (), (), 1, 0), ("row", (R, 1), (1, 1), 2, 0),
                                            ("1x128", (R, 33), (1, R), 3, R), ("128x128", (3, 33), (1, 3), 4, 3)):
        assert _fp8.scale_layout(R, C, mode) == (shape, strides), mode
        s = T(shape, F32, strides=strides)
        c = quantize(x, q, s, mode)
        assert ints(c, "size", "rows", "cols", "ldx", "format", "mode", "ldq", "ld_scale") == \\
            (ctypes.sizeof(tilekit._lib.QuantizeDesc), R, C, C + 4, 2, fmode, C, ld), (mode, c)
        assert (c["x"], c["q"], c["scale"], c["stream"]) == (x.data_ptr(), q.data_ptr(), s.data_ptr(), 0x100), c
    # padded block scales: ld_scale is their stride(1)
    c = quantize(x, T((R, C), E4), T((R, 33), F32, strides=(1, R + 5)), "1x128")
    assert ints(c, "format", "ld_scale") == (1, R + 5), c
    f = _fp8.quantize_fields
    s = T((R, 1), F32)
    refused(TypeError, ("x:", "bfloat16"), f, T((R, C), F32), q, s, "row")
    refused(TypeError, ("dtype", "float8"), f, x, T((R, C), BF), s, "row")
    refused(ValueError, ("mode", "'block'"), f, x, q, s, "block")
    refused(ValueError, ("x:", "2-D"), f, T((2, R, C), BF), q, s, "row")
    refused(ValueError, ("x:", "rows must be contiguous"), f, T((R, C), BF, strides=(1, R)), q, s, "row")
    refused(ValueError, ("q:", "shape"), f, x, T((R, C - 1), E4), s, "row")
    refused(ValueError, ("scale:", "(300, 33)"), f, x, q, s, "1x128")
    refused(ValueError, ("scale:", "first dimension contiguous"), f, x, q, T((R, 33), F32), "1x128")
    print("OK")
"""
    run(body)


def test_library_refusals_raise():
    """A refusal of tk_gemm_run or tk_quantize_fp8 raises its status's
    class with the library's message, as tilekit.scaled_mm's,
    tilekit.scaled_grouped_mm's or tilekit.quantize_fp8's."""
    body = BODY + """
    x, q, s = T((4, 8), BF), T((4, 8), E4), T((4, 1), F32)
    e = raises(tilekit.InvalidValueError, quantize, x, q, s, "row", match=("tilekit.quantize_fp8", "ld_scale: bad"))
    assert e.status == 1, e.status
    a, b = T((4, 128), E4), T((128, 8), E4, strides=(1, 128))
    e = raises(tilekit.InvalidValueError, gemm, a, b, T((), F32), T((), F32), T((4, 8), BF),
               match=("tilekit.scaled_mm", "ld_scale: bad"))
    e = raises(tilekit.InvalidValueError, grouped, a, T((2, 128, 8), E4, strides=(1024, 1, 128)), T((), F32),
               T((2,), F32), T((2,), torch.int32), T((4, 8), BF), match=("tilekit.scaled_grouped_mm", "ld_scale: bad"))
    print("OK")
"""
    run(body, env={"FAKE_TILEKIT_RUN_FAIL": "1:ld_scale: bad"})
