"""Issue 39's binding, tilekit.gemm_epilogue, against the fake libtilekit
(fake_tilekit.c logs every field of the tk_gemm_desc given to tk_gemm_run),
on both backends, each in a fresh interpreter (test_fake_lib.run): each
keyword reaching its descriptor field, the shapes the wrapper derives, the
refusals it makes before the library, and a library refusal raised as its
status's class with its message. Also the ctypes mirror of tk_gemm_desc
against the C compiler's layout of the header's struct.
"""

import fakes
from test_fake_lib import run
from test_fake_lib_grouped import CALLS as GROUPED_CALLS

# After PRELUDE and ON_TORCH, test_fake_lib_grouped's one(fn, ...) (a call
# and the fields of the one library call it made), ints and ptr; then
# refused(exc, match, ...): gemm_epilogue raises exc naming `match` and
# reaches no library call.
CALLS = GROUPED_CALLS + """
    from test_wrapper import raises, F32
    epi = tilekit.gemm_epilogue

    def refused(exc, match, *args, **kw):
        n = len(log())
        e = raises(exc, epi, *args, match=match, **kw)
        assert calls(n) == [], calls(n)
        return e
"""


def test_desc_layout_matches_header():
    """_lib.GemmDesc's offsets, field sizes and size are the C compiler's
    for the header's tk_gemm_desc (a field added, moved or retyped on
    either side fails)."""
    from tilekit import _lib
    c, py = fakes.struct_layouts("fake_desc_layout", _lib.GemmDesc)
    assert c == py, (c, py)


def test_keywords_reach_the_descriptor():
    body = CALLS + """
    M, N, K = 8, 6, 4
    # bias_act: D = d (bf16), out the residual C (beta 1), fp32 bias per column, z stored in aux; x W^T (op T)
    x, w = Fake((M, K)), Fake((N, K))
    out, d, bias, aux = Fake((M, N)), Fake((M, N)), Fake((N,), F32), Fake((M, N))
    r, c = one(epi, x, w, out, alpha=0.5, beta=1.0, trans_b=True, kernel="k01_naive", epilogue="bias_act",
               activation="gelu_tanh", bias=bias, d=d, aux=aux)
    assert r is d, r
    assert ints(c, "size", "layout", "op_a", "op_b", "m", "n", "k", "lda", "ldb", "ldc", "c_type") == \\
        (ctypes.sizeof(tilekit._lib.GemmDesc), 0, 0, 1, M, N, K, K, K, N, 1), c
    assert (c["a"], c["b"], c["c"], c["d"], c["bias"], c["aux"]) == \\
        (ptr(x), ptr(w), ptr(out), ptr(d), ptr(bias), ptr(aux)), c
    assert ints(c, "epilogue", "activation", "bias_type", "bias_along", "ldd", "ldaux", "b_up", "bias_grad") == \\
        (1, 3, 0, 0, N, N, 0, 0), c
    assert ints(c, "group_kind", "count", "stride_a", "stride_b", "stride_c", "offs", "group_error") == (0,) * 7, c
    assert (c["alpha"], c["beta"], c["kernel"], c["stream"]) == ("0.5", "1", "k01_naive", 0), c
    # D in place (d None: ldd 0), a bf16 bias per row, leading dimensions from strides (out a view of 16 columns)
    out = Fake((M, N), F32, strides=(16, 1))
    r, c = one(epi, x, Fake((K, N)), out, epilogue="bias_act", activation="relu", bias=Fake((M,)), bias_along="rows")
    assert r is out and ints(c, "op_b", "ldb", "ldc", "c_type", "d", "ldd", "activation") == (0, N, 16, 0, 0, 0, 1), c
    assert ints(c, "bias_type", "bias_along", "aux", "ldaux") == (1, 1, 0, 0), c
    # gated with b_up: B and b_up N/2 columns each, the product's N = 2 x 3; D M x 3; z (aux) M x 6
    wg, wu, h, z = Fake((3, K)), Fake((3, K)), Fake((M, 3)), Fake((M, 6))
    r, c = one(epi, x, wg, h, trans_b=True, epilogue="gated", activation="silu", b_up=wu, aux=z, bias=Fake((6,)))
    assert r is h and ints(c, "epilogue", "activation", "n", "ldb", "ldc", "ldaux") == (2, 4, 6, K, 3, 6), c
    assert ints(c, "bias_type", "bias_along") == (1, 0), c
    assert (c["b"], c["b_up"], c["c"], c["aux"]) == (ptr(wg), ptr(wu), ptr(h), ptr(z)), c
    # gated, one weight holding both halves: B N columns, out N/2
    r, c = one(epi, x, Fake((K, N)), Fake((M, N // 2)), epilogue="gated", activation="gelu")
    assert ints(c, "epilogue", "activation", "n", "ldc", "b_up") == (2, 2, N, N // 2, 0), c
    # backward: aux read, bias_grad N fp32
    dz, g = Fake((M, N), F32), Fake((N,), F32)
    r, c = one(epi, x, Fake((K, N)), dz, epilogue="backward", activation="relu", aux=aux, bias_grad=g)
    assert ints(c, "epilogue", "activation", "aux", "bias_grad", "ldaux") == (3, 1, ptr(aux), ptr(g), N), c
    # gated_backward: D and aux 2N columns, bias_grad 2N
    dz2, z2, g2 = Fake((M, 2 * N)), Fake((M, 2 * N)), Fake((2 * N,), F32)
    r, c = one(epi, x, Fake((K, N)), d=dz2, epilogue="gated_backward", activation="silu", aux=z2, bias_grad=g2)
    assert r is dz2 and ints(c, "epilogue", "n", "c", "ldc", "d", "ldd", "ldaux", "bias_grad") == \\
        (4, N, 0, 2 * N, ptr(dz2), 2 * N, 2 * N, ptr(g2)), c
    # no epilogue: the product alone, every epilogue field 0
    r, c = one(epi, x, Fake((K, N)), Fake((M, N), F32))
    assert ints(c, "epilogue", "activation", "bias", "bias_type", "bias_along", "b_up", "d", "ldd", "aux", "ldaux",
                "bias_grad") == (0,) * 11, c
    # torch operands: torch's current stream; stream= wins
    xt, wt, yt = torch.Tensor((M, K), torch.bfloat16), torch.Tensor((K, N), torch.bfloat16), \\
        torch.Tensor((M, N), torch.bfloat16)
    r, c = one(epi, xt, wt, yt, epilogue="bias_act", bias=torch.Tensor((N,), torch.float32))
    assert r is yt and c["stream"] == 0x100 and c["c"] == yt.data_ptr(), c
    r, c = one(epi, xt, wt, yt, epilogue="bias_act", stream=0x200)
    assert c["stream"] == 0x200, c
    print("OK")
"""
    run(body)


def test_wrapper_refusals():
    """What the wrapper sees is refused before the library, naming the argument."""
    body = CALLS + """
    M, N, K = 8, 6, 4
    x, w, y = Fake((M, K)), Fake((K, N)), Fake((M, N), F32)
    refused(ValueError, ("epilogue", "'swiglu'", "'gated'"), x, w, y, epilogue="swiglu")
    refused(TypeError, ("epilogue", "is not a name"), x, w, y, epilogue=2)
    refused(ValueError, ("activation", "'tanh'"), x, w, y, epilogue="bias_act", activation="tanh")
    refused(ValueError, ("bias_along", "'cols'"), x, w, y, epilogue="bias_act", bias_along="cols")
    refused(ValueError, ("bias", "1-D"), x, w, y, epilogue="bias_act", bias=Fake((1, N), F32))
    refused(ValueError, ("bias", "4 values, expected 6"), x, w, y, epilogue="bias_act", bias=Fake((4,), F32))
    refused(ValueError, ("bias", "6 values, expected 8", "row"), x, w, y, epilogue="bias_act", bias=Fake((N,)),
            bias_along="rows")
    refused(ValueError, ("bias", "stride 2"), x, w, y, epilogue="bias_act", bias=Fake((N,), F32, strides=(2,)))
    refused(TypeError, ("aux", "fp32", "bfloat16"), x, w, y, epilogue="bias_act", aux=Fake((M, N), F32))
    refused(ValueError, ("aux", "8 x 6, expected 8 x 12"), x, w, Fake((M, 2 * N)), epilogue="gated_backward",
            activation="silu", aux=Fake((M, N)))
    refused(ValueError, ("aux", "row-major"), x, w, y, epilogue="backward", activation="relu",
            aux=Fake((M, N), strides=(1, M)))
    refused(TypeError, ("bias_grad", "bf16", "float32"), x, w, y, epilogue="backward", activation="relu",
            aux=Fake((M, N)), bias_grad=Fake((N,)))
    refused(ValueError, ("bias_grad", "6 values, expected 12"), x, w, Fake((M, 2 * N)), epilogue="gated_backward",
            activation="silu", aux=Fake((M, 2 * N)), bias_grad=Fake((N,), F32))
    refused(ValueError, ("out", "8 x 6, expected 8 x 3", "M x N/2"), x, w, y, epilogue="gated", activation="silu")
    refused(ValueError, ("d", "8 x 6, expected 8 x 12", "M x 2N"), x, w, d=Fake((M, N)), epilogue="gated_backward",
            activation="silu", aux=Fake((M, 2 * N)))
    refused(ValueError, ("B", "N = 5", "odd"), x, Fake((K, 5)), Fake((M, 2), F32), epilogue="gated",
            activation="silu")
    refused(ValueError, ("b_up", "op(b_up) is 4 x 2 but op(B) is 4 x 3"), x, Fake((K, 3)), Fake((M, 3), F32),
            epilogue="gated", activation="silu", b_up=Fake((K, 2)))
    refused(ValueError, ("b_up", "differ from B's"), x, Fake((K, 3)), Fake((M, 3), F32), epilogue="gated",
            activation="silu", b_up=Fake((K, 3), strides=(8, 1)))
    refused(TypeError, ("b_up", "fp32"), x, Fake((K, 3)), Fake((M, 3), F32), epilogue="gated", activation="silu",
            b_up=Fake((K, 3), F32))
    refused(ValueError, ("out", "row-major"), x, w, Fake((M, N), F32, strides=(1, M)), epilogue="bias_act")
    refused(TypeError, ("out", "required"), x, w, epilogue="bias_act")
    refused(ValueError, ("beta is 1", "out is None"), x, w, d=y, beta=1.0, epilogue="bias_act")
    refused(ValueError, ("out", "dtype bf16 differs from d's fp32"), x, w, Fake((M, N)), d=y, epilogue="bias_act")
    refused(ValueError, ("d", "read-only"), x, w, d=Fake((M, N), readonly=True), epilogue="bias_act")
    refused(ValueError, ("aux overlaps A",), x, w, y, epilogue="bias_act", aux=Fake((M, N), ptr=ptr(x)))
    refused(ValueError, ("out overlaps bias",), x, w, y, epilogue="bias_act", bias=Fake((N,), F32, ptr=ptr(y)))
    refused(ValueError, ("shape mismatch",), x, Fake((K + 1, N)), y, epilogue="bias_act")
    xt, wt = torch.Tensor((M, K), torch.bfloat16), torch.Tensor((K, N), torch.bfloat16)
    e = refused(TypeError, ("must be on one CUDA device", "cuda:0, cuda:1"), xt, wt,
                torch.Tensor((M, N), torch.float32), epilogue="bias_act",
                bias=torch.Tensor((N,), torch.float32, device=1))
    assert "out, A, B, bias" in str(e), e
    one(epi, x, w, y, epilogue="bias_act")   # the same arguments, corrected, do reach it
    print("OK")
"""
    run(body)


def test_library_refusal_raises_its_status():
    """The library's status and message come back as gemm's do: the class of
    the status, the message as given, the call named."""
    body = CALLS + """
    x, w, y = Fake((8, 4)), Fake((4, 6)), Fake((8, 6), F32)
    e = raises(tilekit.NotSupportedError, tilekit.gemm_epilogue, x, w, y, epilogue="bias_act",
               kernel="k01_naive", match="kernel: k01_naive does not take epilogues")
    assert isinstance(e, ValueError) and e.status == 2, e
    assert str(e).startswith("tilekit.gemm_epilogue: kernel: k01_naive does not take epilogues"), str(e)
    assert e.status_name == "TK_ERR_NOT_SUPPORTED", e.status_name
    print("OK")
"""
    run(body, env={"FAKE_TILEKIT_RUN_FAIL": "2:kernel: k01_naive does not take epilogues"})


def test_real_library_refusals():
    """The library's own checks of the version-3 fields run before it asks
    for a device, so they answer here without a GPU, on both backends."""
    body = """if True:
    import tilekit
    from test_wrapper import Fake, raises, F32
    M, N, K = 8, 6, 4
    x, w, y = Fake((M, K)), Fake((K, N)), Fake((M, N // 2), F32)
    e = raises(tilekit.InvalidValueError, tilekit.gemm_epilogue, x, w, y, epilogue="gated",
               match=("tilekit.gemm_epilogue: activation: TK_ACT_NONE (0) is not valid",))
    assert e.status_name == "TK_ERR_INVALID_VALUE", e
    raises(tilekit.InvalidValueError, tilekit.gemm_epilogue, x, w, Fake((M, 2 * N), F32), beta=1.0,
           epilogue="gated_backward", activation="silu", aux=Fake((M, 2 * N)), match=("beta: 1 is not 0",))
    raises(tilekit.InvalidValueError, tilekit.gemm_epilogue, x, w, Fake((M, N), F32), epilogue="backward",
           activation="relu", aux=Fake((M, N)), bias=Fake((N,), F32), match=("bias: is set, but",))
    raises(tilekit.InvalidValueError, tilekit.gemm_epilogue, x, w, Fake((M, N), F32), bias=Fake((N,), F32),
           match=("bias",))
    print("OK")
"""
    for name, ext in fakes.backends():
        rc, out = fakes.run(body, ext)
        assert rc == 0 and out.rstrip().endswith("OK"), "%s backend:\n%s" % (name, out)


def test_cai_streams_joined():
    """The CAI 'stream' entries of every operand, bias and aux included, are
    gemm's: the call runs on D's, and the others are joined before and after."""
    body = CALLS + """
    M, N, K = 8, 6, 4
    n = len(log())
    epi(Fake((M, K)), Fake((K, N)), d=Fake((M, N), F32, stream=0x900), epilogue="bias_act",
        bias=Fake((N,), F32, stream=0x700), aux=Fake((M, N), stream=0x900))
    t = [(e, f.get("stream")) for e, f, _ in log()[n:] if e in ("record", "wait", "gemm_run")]
    assert t == [("record", 0x700), ("wait", 0x900), ("gemm_run", 0x900), ("record", 0x900), ("wait", 0x700)], t
    print("OK")
"""
    run(body)
