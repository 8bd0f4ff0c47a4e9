"""gemm_epilogue's fast path in the extension (_tilekit.c, py_gemm_epilogue)
against the Python path it stands in for (_epilogue.gemm_epilogue: plan()
and gemm_run), on the fake torch and the fake libtilekit, each in a fresh
interpreter: for random calls, mostly on torch tensors, the same
tk_gemm_desc logged by the library or the same exception and message; the
fast path's own plan (epilogue_plan) equal to plan()'s where it takes a
call, and None (the Python path) where plan() refuses; the calls it must
take taken, and the calls it must hand over (CAI objects, unusual
argument types, refusals) handed to the Python function as they came.
"""
import fakes
from test_fake_lib_epilogue import CALLS


def run_extension(body):
    """PRELUDE + CALLS + body on the extension with the fake library."""
    from test_fake_lib import PRELUDE
    rc, out = fakes.run(PRELUDE + CALLS + body, fakes.extension_file(), lib=fakes.fake_lib())
    assert rc == 0 and out.rstrip().endswith("OK"), "extension backend:\n%s" % out


# After CALLS: outcome(fn, args, kw) is ("ok", the object returned, the
# tk_gemm_run fields logged) or ("raise", type name, message); fast(args,
# kw) the fast path's plan; python_plan(args, kw) plan()'s in the same form
# (alpha and beta rounded to float32, as the descriptor stores them).
HELPERS = """
    import math, random, struct
    from tilekit import _epilogue, _lib
    EXT = _lib.EXT
    bf, fp = torch.bfloat16, torch.float32

    def outcome(fn, args, kw):
        n = len(log())
        try:
            r = fn(*args, **kw)
        except Exception as e:
            assert calls(n) == [], calls(n)
            return ("raise", type(e).__name__, str(e))
        got = calls(n)
        assert len(got) == 1, got
        return ("ok", id(r), got[0])

    def f32(v):
        return repr(struct.unpack("f", struct.pack("f", v))[0])

    def fast(args, kw):
        p = EXT.epilogue_plan(*args, **kw)
        if p is None:
            return None
        fields = list(p[0])
        fields[6], fields[7] = repr(fields[6]), repr(fields[7])
        return tuple(fields), p[1], p[2], p[3]

    def python_plan(args, kw):
        p = _epilogue.plan(*args, **kw)
        fields = list(p.fields)
        fields[6], fields[7] = f32(fields[6]), f32(fields[7])
        return tuple(fields), p.device, p.stream or None, p.kernel

    def same(args, kw, what):
        want = outcome(_epilogue.gemm_epilogue, args, kw)
        got = outcome(tilekit.gemm_epilogue, args, kw)
        assert got == want, "%s: fast %r, python %r" % (what, got, want)
        p = fast(args, kw)
        if p is not None:
            assert want[0] == "ok", "%s: taken by the fast path, refused by plan(): %r" % (what, want)
            assert p == python_plan(args, kw), "%s: fast %r, plan() %r" % (what, p, python_plan(args, kw))
        return want[0], p is not None
"""


def test_fast_path_matches_python_fuzz():
    """Random calls through both paths: the same descriptor or the same
    exception, and the fast path's plan equal to plan()'s where it takes
    the call; it takes most of the valid ones (all on torch tensors here
    but the CAI ones) and none that plan() refuses."""
    body = HELPERS + """
    rng = random.Random(39)
    assert tilekit.gemm_epilogue is EXT.gemm_epilogue

    def pick(*choices):
        return rng.choice(choices)

    def odd(usual, *others):
        # usual, or now and then (5%) one of others: most calls valid, each rule refused now and then
        return rng.choice(others) if rng.random() < 0.05 else usual

    def mat(rows, cols, dtype=bf, **kw):
        if rng.random() < 0.03:
            return Fake((rows, cols), "<V2" if dtype is bf else "<f4")   # CAI: the Python path's
        strides = odd(pick(None, None, (cols + 8, 1), (1, rows)), (2 * cols, 2), (cols, 2))
        return torch.Tensor((rows, cols), dtype, strides=strides, **kw)

    def vec(n, dtype):
        return torch.Tensor((n + odd(0, 1),), odd(dtype, bf, fp), strides=odd(None, (2,)), device=odd(0, 1))

    counts = {}
    for i in range(500):
        M, N, K = pick(1, 3, 8), pick(1, 2, 6, 8), pick(1, 4, 16)
        kind = odd(pick(None, "bias_act", "bias_act", "gated", "backward", "gated_backward"), "swiglu", 3)
        kw = {} if kind is None and rng.random() < 0.5 else {"epilogue": kind}
        act = odd(pick(None, "relu", "gelu", "gelu_tanh", "silu"), "tanh", 1)
        if act is not None or rng.random() < 0.3:
            kw["activation"] = act
        ta, tb = pick(False, False, True, 1), pick(False, True, True)
        if ta or rng.random() < 0.3:
            kw["trans_a"] = ta
        if tb:
            kw["trans_b"] = tb
        A = mat(*((K, M) if ta else (M, K)), dtype=odd(bf, fp))
        B = mat(*((N, K) if tb else (K, N)))
        n = N
        if rng.random() < (0.5 if kind == "gated" else 0.05):
            like = B.stride() if isinstance(B, torch.Tensor) else None
            kw["b_up"] = torch.Tensor(odd((N, K) if tb else (K, N), (N + 1, K + 1)), bf, strides=pick(like, like, like, None))
            n = 2 * N
        width = n // 2 if kind == "gated" else 2 * n if kind == "gated_backward" else n
        width = odd(width, width + 1)
        where = pick("out", "out", "d", "both")
        dt = pick(bf, fp)
        out = mat(M, width, dt) if where != "d" else None
        if where != "out":
            kw["d"] = mat(M, width, odd(dt, bf, fp), device=odd(0, 1))
        if rng.random() < 0.5:
            along = odd(pick(None, "columns", "columns", "rows"), "cols", None)
            if along is not None:
                kw["bias_along"] = along
            kw["bias"] = vec(M if along == "rows" else n, pick(bf, fp))
        if rng.random() < 0.4:
            aux_width = 2 * n if kind == "gated_backward" else n
            kw["aux"] = odd(mat(M, aux_width, odd(bf, fp)),
                            torch.Tensor((M, aux_width), bf, ptr=A.data_ptr() if isinstance(A, torch.Tensor) else None))
        if rng.random() < 0.3:
            kw["bias_grad"] = vec(width, fp)
        for name, values in (("alpha", (1.0, 0.5, 2, True, 1e40, float("nan"))), ("beta", (0.0, 1.0, 0, 2.5)),
                             ("kernel", (None, "", "auto", "k30_wgmma_tma", 5)),
                             ("stream", (None, 0, 0x300, "s"))):
            if rng.random() < 0.2:
                kw[name] = rng.choice(values)
        args = (A, B) if out is None and rng.random() < 0.5 else (A, B, out)
        got = same(args, kw, "case %d: %r" % (i, kw))
        counts[got] = counts.get(got, 0) + 1
    # (python outcome, taken): valid calls taken and handed over, refusals all handed over
    assert counts.get(("ok", True), 0) >= 100 and counts.get(("raise", False), 0) >= 100, counts
    assert ("raise", True) not in counts, counts
    print(counts)
    print("OK")
"""
    run_extension(body)


def test_fast_path_takes_the_plain_calls():
    """The calls the fused ops make, and the keyword forms of the fast
    path's arguments, are taken (never handed to the Python function) and
    give plan()'s descriptor."""
    body = HELPERS + """
    seen = []

    def spy(*args, **kw):
        seen.append(kw)
        return _epilogue.gemm_epilogue(*args, **kw)

    EXT.setup_epilogue(spy)
    M, N, K = 8, 6, 16
    x, w, y = torch.Tensor((M, K), bf), torch.Tensor((K, N), bf, strides=(1, K)), torch.Tensor((M, N), bf)
    wt = torch.Tensor((N, K), bf)
    z, b = torch.Tensor((M, N), bf), torch.Tensor((N,), fp)
    h, zz, wu = torch.Tensor((M, N // 2), bf), torch.Tensor((M, N), bf), torch.Tensor((K, N // 2), bf, strides=(1, K))
    taken = [
        ((x, w, y), dict(epilogue="bias_act", activation="gelu_tanh", bias=b)),              # tilekit.linear
        ((x, w, y), dict(epilogue="bias_act", activation="silu", bias=torch.Tensor((N,), bf), aux=z)),
        ((x, wt, y, 0.5, 1.0, False, True, "k30_wgmma_tma"), dict(epilogue="bias_act", d=z)),   # positional
        ((x, wt), dict(out=y, trans_b=1, epilogue="bias_act", bias=torch.Tensor((M,), fp), bias_along="rows")),
        ((x, torch.Tensor((K, N // 2), bf, strides=(1, K)), h), dict(epilogue="gated", activation="silu", b_up=wu,
                                                                  aux=zz, bias=torch.Tensor((N,), fp))),
        ((x, w, h), dict(epilogue="gated", activation="gelu", kernel="auto", stream=0x500)),
        ((torch.Tensor((K, M), bf), w, torch.Tensor((M, N), fp)), dict(trans_a=True, epilogue="backward",
                                                                      activation="relu", aux=z,
                                                                      bias_grad=torch.Tensor((N,), fp))),
        ((x, torch.Tensor((K, N // 2), bf)), dict(d=torch.Tensor((M, N), bf), epilogue="gated_backward",
                                                   activation="silu", aux=torch.Tensor((M, N), bf))),
        ((x, w, torch.Tensor((M, N), fp, strides=(N + 2, 1))), dict(alpha=2, beta=0)),           # no epilogue
    ]
    for i, (args, kw) in enumerate(taken):
        assert same(args, kw, "call %d" % i) == ("ok", True), (i, kw, fast(args, kw))
    assert seen == [], seen
    print("OK")
"""
    run_extension(body)


def test_fast_path_hands_over():
    """Calls with operands other than torch tensors, arguments of other
    types than the plain ones and calls plan() refuses go to the Python
    function as they came (its arguments, its result or exception)."""
    body = HELPERS + """
    import fractions
    seen = []

    def spy(*args, **kw):
        seen.append((args, kw))
        return _epilogue.gemm_epilogue(*args, **kw)

    EXT.setup_epilogue(spy)
    M, N, K = 8, 6, 16
    x, w, y = torch.Tensor((M, K), bf), torch.Tensor((K, N), bf), torch.Tensor((M, N), bf)
    cpu = torch.Tensor((M, K), bf)
    cpu.is_cuda = False
    handed = [
        ((Fake((M, K)), w, y), dict(epilogue="bias_act")),                    # a CAI operand
        ((x, w, Fake((M, N))), dict(epilogue="bias_act")),
        ((x, w, y), dict(epilogue="bias_act", bias=Fake((N,), "<f4"))),
        ((x, w, y), dict(alpha=fractions.Fraction(1, 2))),                     # a numbers.Real, not a float
        ((x, w, y), dict(trans_b="")),                                         # a flag that is no bool or int
        ((x, w, y), dict(stream=torch.cuda.Stream(0x700))),                    # a stream object
        ((x, w, y), dict(kernel=b"k01_naive")),
        ((x, w, y), dict(epilogue="bias_act", bias_along=None)),              # refusals: plan()'s messages
        ((x, w, y), dict(epilogue="swiglu")),
        ((cpu, w, y), dict(epilogue="bias_act")),
        ((x, w, y), dict(epilogue="bias_act", bias=torch.Tensor((N,), fp, device=1))),
        ((x, w, y), dict(epilogue="bias_act", aux=torch.Tensor((M, N), bf, ptr=x.data_ptr()))),
        ((x, w), dict(epilogue="bias_act")),
        ((x, torch.Tensor((K, 3), bf), torch.Tensor((M, 3), bf)), dict(epilogue="gated", activation="silu",
                                                                       b_up=torch.Tensor((K, 3), bf, strides=(8, 1)))),
        ((x, torch.Tensor((K, 5), bf), torch.Tensor((M, 2), bf)), dict(epilogue="gated", activation="silu")),
        ((x, w, y, 1.0, 0.0, False, False, None, "bias_act"), {}),            # too many positionals
        ((x, w, y), dict(epilogue="bias_act", bogus=1)),                       # an unknown keyword
        ((x,), dict(out=y)),                                                   # B missing
    ]
    for i, (args, kw) in enumerate(handed):
        del seen[:]
        kind, taken = same(args, kw, "call %d" % i)
        assert not taken and fast(args, kw) is None, (i, kw)
        assert len(seen) == 1 and seen[0] == (args, kw), (i, seen)   # tilekit.gemm_epilogue's call, as it came
    EXT.setup_epilogue(_epilogue.gemm_epilogue)
    print("OK")
"""
    run_extension(body)


def test_backend_function():
    """tilekit.gemm_epilogue is the extension's where it is loaded, else
    the Python function (the ctypes fallback)."""
    body = """if True:
    import tilekit
    from tilekit import _epilogue, _lib
    want = _lib.EXT.gemm_epilogue if _lib.EXT is not None else _epilogue.gemm_epilogue
    assert tilekit.gemm_epilogue is want, (tilekit.gemm_epilogue, tilekit.backend())
    print("OK")
"""
    for name, ext in fakes.backends():
        rc, out = fakes.run(body, ext)
        assert rc == 0 and out.rstrip().endswith("OK"), "%s backend:\n%s" % (name, out)
