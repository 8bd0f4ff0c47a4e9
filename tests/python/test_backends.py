"""The C extension against the pure-Python fallback, without a GPU: the same
hostile calls through both must give the same plan, or raise the same
exception type with the same message. Also the extension's own paths: its
argument binding, DLPack producers (capsules made here with ctypes, pointing
at no memory) and the library's statuses. Needs the extension: fails, never
skips, when tilekit runs on the fallback (tests/run_cpu.sh runs this file
with the extension only).
"""
import ctypes
import math
import random

import tilekit
from tilekit import _fallback, _lib

from test_wrapper import BF16, F32, Fake, _random_fake, raises

EXT = _lib.EXT
FIELDS = ("m", "n", "k", "layout", "op_a", "op_b", "lda", "ldb", "ldc", "c_dtype", "alpha", "beta", "kernel",
          "stream", "joins", "form", "kind", "count", "stride_a", "stride_b", "stride_c", "offs_ptr", "error_ptr")


def outcome(fn, *args, **kw):
    """("ok", fields) or ("raise", type, message)."""
    try:
        p = fn(*args, **kw)
    except Exception as e:
        return ("raise", type(e).__name__, str(e))
    vals = []
    for f in FIELDS:
        v = getattr(p, f)
        vals.append(repr(v) if isinstance(v, float) and math.isnan(v) else v)
    return ("ok", tuple(vals))


def same(args, kw, what):
    want = outcome(_fallback.plan, *args, **kw)
    got = outcome(EXT.plan, *args, **kw)
    assert got == want, "%s: extension %r, fallback %r" % (what, got, want)
    return want


def test_extension_is_used():
    assert EXT is not None and tilekit.backend() == "extension", \
        "the C extension was not found (build it with make; TILEKIT_EXT names its file)"
    assert tilekit.gemm is EXT.gemm
    assert tilekit.gemm_batched is EXT.gemm_batched and tilekit.gemm_grouped is EXT.gemm_grouped


def test_signatures_match():
    """The extension's text signatures are the fallback's (issue 38's
    functions bind their own order: offs third, group_error by name)."""
    import inspect
    for name in ("gemm", "gemm_batched", "gemm_grouped", "plan"):
        ext, py = inspect.signature(getattr(EXT, name)), inspect.signature(getattr(_fallback, name))
        assert ext == py, "%s: extension %s, fallback %s" % (name, ext, py)


def test_plans_match_fuzz():
    """test_wrapper's hostile descriptions and arguments through both backends."""
    rng = random.Random(12)
    odd = [0, 1, -1, 0.5, float("nan"), float("inf"), 2 ** 70, "2", None, True, 1 + 2j, 10 ** 400]
    kinds = {}
    for i in range(4000):
        m, n, k = (rng.choice([0, 1, 2, 7, 8, 64, 65, 4096]) for _ in range(3))
        A = _random_fake(rng, m, k) if rng.random() < 0.5 else Fake((m, k), strides=rng.choice([None, (1, m)]))
        B = _random_fake(rng, k, n) if rng.random() < 0.5 else Fake((k, n), strides=rng.choice([None, (1, k)]))
        C = rng.choice([Fake((m, n), F32), Fake((m, n)), Fake((m, n), F32, strides=(1, m)), None,
                        _random_fake(rng, m, n), "C", 3, [1.0]])
        if rng.random() < 0.05:   # out aliasing A (whose 'data' the fuzz may have mangled or dropped)
            data = A.__cuda_array_interface__.get("data")
            C = Fake((m, n), F32, ptr=data[0] if isinstance(data, tuple) and data else 0x7f0000000000)
        kw = dict(alpha=rng.choice(odd + [1.0] * 6), beta=rng.choice(odd + [0.0] * 6),
                  trans_a=rng.choice([False, False, True, 0, 1, "yes", None]),
                  trans_b=rng.choice([False, False, True, 0, 1, None]),
                  out_dtype=rng.choice([None, None, "float32", "bfloat16", "BF16", "torch.float32", "int8", 7]),
                  kernel=rng.choice([None, None, "auto", "", "k01_naive", 3, "x" * 1000, "k01_naive\0", "\ud800"]),
                  stream=rng.choice([None, None, 0, 7, -3, 2 ** 70, "s", 1.5]))
        if rng.random() < 0.3:   # a valid call, transposes and views drawn
            ta, tb = rng.random() < 0.5, rng.random() < 0.5
            A = Fake((k, m) if ta else (m, k), strides=rng.choice([None, (1, k if ta else m)]))
            B = Fake((n, k) if tb else (k, n), strides=rng.choice([None, (1, n if tb else k)]))
            C = rng.choice([Fake((m, n), F32), Fake((m, n), strides=(1, m)), None])
            kw = dict(alpha=1.0, beta=0.0, trans_a=ta, trans_b=tb, out_dtype=None, kernel=None,
                      stream=rng.choice([None, 5]))
        args = (A, B, C, kw["alpha"], kw["beta"], kw["trans_a"], kw["trans_b"], kw["out_dtype"], kw["kernel"],
                kw["stream"])
        r = same(args, {"query": rng.random() < 0.3}, "call %d" % i)
        kinds[r[0] if r[0] == "ok" else r[1]] = kinds.get(r[0] if r[0] == "ok" else r[1], 0) + 1
    # the fuzz reached acceptance and both kinds of refusal
    assert kinds.get("ok", 0) > 100 and kinds.get("TypeError", 0) > 100 and kinds.get("ValueError", 0) > 100, kinds


def _random_array(rng, shape, typestr):
    """A device array of `shape` (any rank), often with a field mangled."""
    shape = tuple(shape)
    f = Fake(shape, typestr, strides=rng.choice([None] * 4 + [tuple(range(len(shape), 0, -1))]))
    cai = f.__cuda_array_interface__
    r = rng.random()
    if r < 0.1:
        cai["shape"] = rng.choice([shape[1:], (1,) + shape, shape[:-1] + (-1,), shape[:-1] + (2 ** 63,), ()])
    elif r < 0.2:
        cai["typestr"] = rng.choice([BF16, F32, "<i4", "<i8", "<f2", "|V2"])
    elif r < 0.3:
        cai["strides"] = rng.choice([(0,) * len(shape), tuple(-2 for _ in shape), (2,) * (len(shape) + 1), None])
    elif r < 0.35:
        cai["data"] = (rng.choice([0, 2, 2 ** 64]), False)
    elif r < 0.4:
        cai["stream"] = rng.choice([5, 7, 1])
    return f


def test_grouped_plans_match_fuzz():
    """Issue 38's forms through both backends: 3-D stacks and offsets, valid
    (every kind, transposed views, broadcast strides) and hostile."""
    rng = random.Random(38)
    kinds = {}
    for i in range(3000):
        g, m, n, k = (rng.choice([0, 1, 3, 8]) for _ in range(4))
        form = rng.choice(["batched", "grouped"])
        ra, rb = (3, 3) if form == "batched" else rng.choice([(2, 3), (2, 2), (3, 3), (3, 2)])
        ta, tb = rng.random() < 0.3, rng.random() < 0.3
        ashape = ((g,) if ra == 3 else ()) + ((k, m) if ta else (m, k))
        bshape = ((g,) if rb == 3 else ()) + ((n, k) if tb else (k, n))
        A = _random_array(rng, ashape, BF16) if rng.random() < 0.3 else Fake(ashape)
        B = _random_array(rng, bshape, BF16) if rng.random() < 0.3 else Fake(bshape, strides=rng.choice(
            [None, (0,) * (rb - 2) + ((1, k) if not tb else (1, n))]) if rb == 3 or rng.random() < 0.5 else None)
        oshape = (m, n) if (ra, rb) == (2, 3) and form == "grouped" else (g, m, n)
        C = rng.choice([Fake(oshape, F32)] * 4 + [Fake(oshape), None, _random_array(rng, oshape, F32),
                                                   Fake((m, n) if len(oshape) == 3 else (g, m, n), F32)])
        offs = rng.choice([Fake((g,), "<i4")] * 4 + [Fake((g,), "<i4", stream=9), None,
                                                     _random_array(rng, (g,), "<i4"), Fake((g + 1,), "<i4")]) \
            if form == "grouped" else None
        err = rng.choice([None, None, Fake((1,), "<i4"), Fake((0,), "<i4")]) if form == "grouped" else None
        kw = dict(alpha=rng.choice([1.0] * 8 + [0.5, "x"]), beta=rng.choice([0.0, 1.0]), trans_a=ta, trans_b=tb,
                  out_dtype=rng.choice([None] * 8 + ["bf16", "fp16"]),
                  kernel=rng.choice([None] * 8 + ["k01_naive", 3]),
                  stream=rng.choice([None, None, 5]), offs=offs, group_error=err, query=rng.random() < 0.2,
                  form=form)
        r = same((A, B, C), kw, "call %d" % i)
        key = r[0] if r[0] == "ok" else r[1]
        kinds[key] = kinds.get(key, 0) + 1
        if r[0] == "ok":
            kinds[("kind", r[1][FIELDS.index("kind")])] = kinds.get(("kind", r[1][FIELDS.index("kind")]), 0) + 1
    assert kinds.get("ok", 0) > 300 and kinds.get("TypeError", 0) > 100 and kinds.get("ValueError", 0) > 100, kinds
    assert all(kinds.get(("kind", kind), 0) > 30 for kind in (1, 2, 3, 4)), kinds


def test_library_statuses_match():
    """Calls that reach the library: the same TilekitError (class, status, message) from both."""
    A, B, C = Fake((8, 4)), Fake((4, 6)), Fake((8, 6), F32)
    cases = [
        (tilekit.gemm, _fallback.gemm, (A, B, C), {"kernel": "k99_nope"}),
        (tilekit.gemm, _fallback.gemm, (A, B, C), {"kernel": "k01_naive"}),
        (tilekit.gemm, _fallback.gemm, (A, B, C), {}),
        (tilekit.select_kernel, None, (A, B, C), {}),
    ]
    for ext_fn, py_fn, args, kw in cases:
        try:
            ext_fn(*args, **kw)
            got = None
        except tilekit.TilekitError as e:
            got = (type(e), e.status, str(e))
        if py_fn is None:
            # the fallback's select_kernel, through its own module
            try:
                _fallback.select_kernel(*args, **kw)
                want = None
            except tilekit.TilekitError as e:
                want = (type(e), e.status, str(e))
        else:
            try:
                py_fn(*args, **kw)
                want = None
            except tilekit.TilekitError as e:
                want = (type(e), e.status, str(e))
        assert got == want, (kw, got, want)
    assert EXT.supports(A, B, C, 1.0, 0.0, False, False, None, "k01_naive") == \
        _fallback.supports(A, B, C, 1.0, 0.0, False, False, None, "k01_naive")
    assert tilekit.kernels() == _fallback.kernels()
    assert EXT.version() == _fallback.version()


def test_argument_binding():
    A, B, C = Fake((8, 4)), Fake((4, 6)), Fake((8, 6), F32)
    raises(TypeError, tilekit.gemm, A, match="missing required argument 'B'")
    raises(TypeError, tilekit.gemm, A, B, C, bogus=1, match="unexpected keyword argument 'bogus'")
    raises(TypeError, tilekit.gemm, A, B, C, out=C, match="multiple values for argument 'out'")
    raises(TypeError, tilekit.gemm, A, B, C, 1.0, 0.0, False, False, None, None, 0, match="positional")
    p = tilekit._plan(B=B, A=A, out=C, query=False)
    assert (p.m, p.n, p.k, p.kernel) == (8, 6, 4, None)
    p = tilekit._plan(A, B, C, kernel="k01_naive", stream=5)
    assert p.kernel == b"k01_naive" and p.stream == 5


# ---- DLPack producers: capsules built here with ctypes ----

class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManaged(ctypes.Structure):
    _fields_ = [("t", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _DLManagedV1(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("t", _DLTensor)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class DLFake:
    """A DLPack producer of 'device memory' at a made-up address. versioned:
    DLPack 1.x capsules (and max_version accepted); dtype (code, bits);
    strides in elements or None; device_type 2 = CUDA, 1 = CPU."""
    _next = [0x7e0000000000]

    def __init__(self, shape, dtype=(4, 16), strides=None, versioned=True, readonly=False, device_type=2,
                 ptr="auto", offset=0):
        if ptr == "auto":
            ptr = DLFake._next[0]
            DLFake._next[0] += 1 << 24
        self.shape, self.dtype, self.strides, self.versioned = tuple(shape), dtype, strides, versioned
        self.readonly, self.device_type, self.ptr, self.offset = readonly, device_type, ptr, offset
        self.streams = []     # what each __dlpack__ call was asked for
        self.keep = []        # the structs the capsules point at

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None, max_version=None, **kw):
        if max_version is not None and not self.versioned:
            raise TypeError("max_version is not supported")   # an older producer
        self.streams.append(stream)
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        strides = (ctypes.c_int64 * 2)(*self.strides) if self.strides else None
        t = _DLTensor(self.ptr, self.device_type, 0, len(self.shape), self.dtype[0], self.dtype[1], 1,
                      ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)),
                      ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if strides else None, self.offset)
        if self.versioned and max_version is not None:
            m = _DLManagedV1(1, 0, None, None, 1 if self.readonly else 0, t)
            name = b"dltensor_versioned"
        else:
            m = _DLManaged(t, None, None)
            name = b"dltensor"
        self.keep.append((m, shape, strides))
        return _capsule_new(ctypes.addressof(m), name, None)


def test_dlpack_plan():
    """DLPack producers are read like CAI objects: strides, views, dtype, read-only out."""
    M, N, K = 8, 6, 4
    for versioned in (True, False):
        A, B = DLFake((M, K), versioned=versioned), DLFake((N, K), versioned=versioned)
        C = DLFake((M, N), (2, 32), versioned=versioned)
        p = tilekit._plan(A, B, C, trans_b=True)
        assert (p.m, p.n, p.k, p.op_a, p.lda, p.op_b, p.ldb, p.ldc, p.c_dtype) == \
            (M, N, K, _lib.OP_N, K, _lib.OP_T, K, N, "fp32"), p
        assert A.streams == [None], A.streams   # no stream argument, no torch: the legacy default stream
        p = tilekit._plan(DLFake((M, K), strides=(1, M)), DLFake((K, N), offset=64), C)   # a transposed view
        assert (p.op_a, p.lda) == (_lib.OP_T, M), p
    A, B = DLFake((M, K)), DLFake((K, N))
    tilekit._plan(A, B, DLFake((M, N), (2, 32)), stream=7)
    assert A.streams == [7], A.streams
    raises(ValueError, tilekit._plan, A, B, DLFake((M, N), (2, 32), readonly=True), match="read-only")
    raises(TypeError, tilekit._plan, DLFake((M, K), (2, 16)), B, None, match=("A", "DLPack dtype", "code 2, bits 16"))
    raises(ValueError, tilekit._plan, DLFake((2, M, K)), B, None, match=("A", "2-D", "(2, 8, 4)"))
    C = DLFake((M, N), (2, 32))
    raises(ValueError, tilekit._plan, DLFake((M, K), strides=(2, 2)), B, C, match=("A", "neither"))
    raises(ValueError, tilekit._plan, DLFake((M, K), ptr=0), B, C, match=("A", "NULL"))
    raises(TypeError, tilekit._plan, A, B, None, match=("out", "required"))
    # CPU memory is host memory, as for any other host array
    raises(TypeError, tilekit._plan, A, DLFake((K, N), device_type=1), None, match=("B", "is not a CUDA tensor"))

    class Failing(DLFake):
        def __dlpack__(self, stream=None, max_version=None):
            raise BufferError("cannot export")
    e = raises(TypeError, tilekit._plan, Failing((M, K)), B, None, match=("A", "__dlpack__ raised BufferError"))
    assert isinstance(e.__cause__, BufferError)


def test_dlpack_gemm_reaches_library():
    """A valid DLPack call passes every check; without a GPU the library says so."""
    A, B, C = DLFake((8, 4)), DLFake((4, 6)), DLFake((8, 6), (2, 32))
    s = tilekit.supports(A, B, C, kernel="k01_naive")
    if s.status == _lib.NO_DEVICE:
        raises(tilekit.NoDeviceError, tilekit.gemm, A, B, C, kernel="k01_naive")
    # a DLPack operand readied for the legacy default stream cannot run on another CAI stream
    raises(ValueError, tilekit.gemm, A, B, Fake((8, 6), F32, stream=5), match=("A", "DLPack", "stream="))
    assert tilekit.gemm(DLFake((0, 4), ptr=0), B, DLFake((0, 6), (2, 32), ptr=0)) is not None   # M = 0: a no-op


def test_torch_lookup_keeps_nothing_on_failure():
    """torch's names are looked up once torch is in sys.modules; when one of
    them is missing (a torch still importing) the call raises, and must keep
    no reference to the ones found before it: 200 failed calls leave their
    reference counts as they were, and the first call after torch is whole
    works."""
    import fakes
    code = """if True:
        import sys
        import fakes
        torch = fakes.fake_torch(missing=("Tensor",))
        sys.modules["torch"] = torch
        import tilekit
        from test_wrapper import Fake
        A, B, C = Fake((8, 4)), Fake((4, 6)), Fake((8, 6), "<f4")
        held = (torch.dtype, torch.strided, torch.bfloat16, torch.float32, torch.int32, torch.empty, torch.cuda,
                torch.cuda.current_stream, torch._C._cuda_getCurrentRawStream)
        before = [sys.getrefcount(x) for x in held]
        for _ in range(200):
            try:
                tilekit._plan(A, B, C)
            except AttributeError as e:
                assert "Tensor" in str(e), e
            else:
                raise AssertionError("a torch without Tensor was taken")
        after = [sys.getrefcount(x) for x in held]
        assert after == before, "references kept by failed lookups: %s -> %s" % (before, after)
        torch.Tensor = type("Tensor", (), {})
        assert tilekit._plan(A, B, C).m == 8
        print("OK")
    """
    rc, out = fakes.run(code, fakes.extension_file())
    assert rc == 0 and "OK" in out, out


def _answer(fn, *args, **kw):
    """("ok", value) with a GemmPlan as (its class name, kernel, repr), or ("raise", type, message)."""
    try:
        v = fn(*args, **kw)
    except Exception as e:
        return ("raise", type(e).__name__, str(e))
    if hasattr(v, "kernel") and hasattr(v, "close"):
        r = (type(v).__name__, v.kernel, repr(v))
        v.close()
        return ("ok", r)
    return ("ok", v)


def test_issue37_backends_agree():
    """Issue 37's functions through both backends: the same answers, or the
    same exception type and message, for hostile calls too."""
    assert EXT.build_info() == _fallback.build_info()
    dev = EXT.current_device()
    assert EXT.handle_info(dev) == _fallback.handle_info(dev)
    for mod in (EXT, _fallback):   # the same settings through each, on each backend's own handle
        mod.set_workspace_limit(dev, 12345)
        mod.set_split_k(dev, False)
    try:
        assert EXT.handle_info(dev) == _fallback.handle_info(dev)
        assert EXT.handle_info(dev)["workspace_limit"] == 12345
    finally:
        for mod in (EXT, _fallback):
            mod.set_workspace_limit(dev, None)
            mod.set_split_k(dev, True)
    assert EXT.last_cuda_error(None) == _fallback.last_cuda_error(None)
    assert _answer(EXT.set_workspace, dev, 0x10000010, 64) == _answer(_fallback.set_workspace, dev, 0x10000010, 64)
    rng = random.Random(37)
    kinds = {}
    for i in range(600):
        m, n, k = (rng.choice([0, 0, 1, 8, 64]) for _ in range(3))
        A = _random_fake(rng, m, k) if rng.random() < 0.4 else Fake((m, k))
        B = _random_fake(rng, k, n) if rng.random() < 0.4 else Fake((k, n))
        C = rng.choice([Fake((m, n), F32), Fake((m, n)), None, _random_fake(rng, m, n), "C"])
        args = (A, B, C, rng.choice([1.0, 0.5, "x", None]), rng.choice([0.0, 1.0, True]), rng.choice([False, True]),
                rng.choice([False, True]), rng.choice([None, "bf16", "fp16"]))
        kernel = rng.choice([None, "auto", "k01_naive", "k99_nope", 3])
        if rng.random() < 0.5:   # a valid call, often a no-op
            m = rng.choice([0, 0, 8])
            A, B, C = Fake((m, k)), Fake((k, n)), rng.choice([Fake((m, n), F32), Fake((m, n)), None])
            args = (A, B, C, 1.0, 0.0, False, False, None)
            kernel = rng.choice([None, "auto", "k01_naive"])
        for name, extra in (("candidates", ()), ("workspace_size", (kernel,)), ("plan_create", (kernel,))):
            got = _answer(getattr(EXT, name), *(args + extra))
            want = _answer(getattr(_fallback, name), *(args + extra))
            assert got == want, "call %d, %s: extension %r, fallback %r" % (i, name, got, want)
            key = (name, got[0] if got[0] == "ok" else got[1])
            kinds[key] = kinds.get(key, 0) + 1
    for name in ("candidates", "workspace_size", "plan_create"):   # accepted and refused both reached
        assert kinds.get((name, "ok"), 0) > 10 and kinds.get((name, "TypeError"), 0) > 10 and \
            kinds.get((name, "ValueError"), 0) > 10, kinds
    # a no-op plan's runs, hostile operands included
    plans = [mod.plan_create(Fake((0, 32)), Fake((32, 48)), Fake((0, 48), F32)) for mod in (EXT, _fallback)]
    runs = [(Fake((0, 32)), Fake((32, 48)), Fake((0, 48), F32)), (Fake((0, 32)), Fake((32, 40)), Fake((0, 40), F32)),
            (Fake((0, 32)), Fake((32, 48)), None), (Fake((0, 32)), Fake((32, 48)), Fake((0, 48))),
            (Fake((0, 32), F32), Fake((32, 48)), Fake((0, 48), F32)), ("A", Fake((32, 48)), Fake((0, 48), F32)),
            (Fake((0, 32)), Fake((32, 48), strides=(1, 32)), Fake((0, 48), F32))]
    for j, (a, b, c) in enumerate(runs):
        got, want = (_answer(pl.run, a, b, c) for pl in plans)
        if got[0] == want[0] == "ok":
            continue
        assert got == want, "run %d: extension %r, fallback %r" % (j, got, want)
    for pl in plans:
        pl.close()
    assert _answer(plans[0].run, *runs[0]) == _answer(plans[1].run, *runs[0])
