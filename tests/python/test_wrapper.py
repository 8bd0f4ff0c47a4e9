"""The Python wrapper's checks, without a GPU: fake objects that carry a
__cuda_array_interface__ but point at no memory. Every call that could reach
a kernel with them must be refused first; the tests that need the library
(the C statuses as exceptions) are marked below and fail if it cannot load.
"""
import os
import subprocess
import sys
import threading

import tilekit
from tilekit import _lib

BF16, F32 = "<V2", "<f4"
SIZE = {BF16: 2, F32: 4, "<f2": 2, "<i4": 4}


class Fake:
    """A device array as CAI describes one. strides in elements (converted
    to bytes), None = C-contiguous. Pointers are distinct and 256-byte aligned
    by default so nothing overlaps."""
    _next = [0x7f0000000000]

    def __init__(self, shape, typestr=BF16, strides=None, ptr="auto", readonly=False, stream=None, version=3,
                 **extra):
        if ptr == "auto":
            ptr = Fake._next[0]
            Fake._next[0] += 1 << 24
        cai = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, readonly), "version": version,
               "strides": None if strides is None else tuple(s * SIZE.get(typestr, 1) for s in strides)}
        if version >= 3:
            cai["stream"] = stream
        cai.update(extra)
        self.__cuda_array_interface__ = cai


def raises(exc, fn, *args, match=(), **kw):
    """Calls fn and returns the exception, which must be an exc whose message
    contains every string in match."""
    try:
        fn(*args, **kw)
    except exc as e:
        msg = str(e)
        for m in ((match,) if isinstance(match, str) else match):
            assert m in msg, "message %r lacks %r" % (msg, m)
        return e
    except Exception as e:   # the wrong kind of error
        raise AssertionError("expected %s, got %s: %s" % (exc.__name__, type(e).__name__, e)) from e
    raise AssertionError("expected %s, nothing raised" % exc.__name__)


def runtime_errors_in_a_thread(fn, *args):
    """Calls fn in a new thread and waits for it; returns the messages of
    the RuntimeError it raised ([] for none)."""
    got = []

    def target():
        try:
            fn(*args)
        except RuntimeError as e:
            got.append(str(e))
    t = threading.Thread(target=target)
    t.start()
    t.join()
    return got


def plan(A, B, out=None, **kw):
    """The checked call gemm() (or with query=True, supports()) would make,
    without loading the library."""
    args = dict(alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None, stream=None,
                query=False)
    args.update(kw)
    return tilekit._plan(A, B, out, args["alpha"], args["beta"], args["trans_a"], args["trans_b"],
                         args["out_dtype"], args["kernel"], args["stream"], query=args["query"])


def abc(m=8, n=6, k=4):
    return Fake((m, k)), Fake((k, n)), Fake((m, n), F32)


# ---- pure Python: these raise before the library is loaded ----

def test_rank():
    A, B, C = abc()
    raises(ValueError, plan, Fake((8,)), B, C, match=("A", "2-D", "1 dimensions"))
    raises(ValueError, plan, A, Fake((2, 4, 6)), C, match=("B", "2-D"))
    raises(ValueError, plan, A, B, Fake((8, 6, 1), F32), match=("out", "2-D"))


def test_dtype():
    A, B, C = abc()
    raises(TypeError, plan, Fake((8, 4), F32), B, C, match=("A", "bfloat16"))
    raises(TypeError, plan, A, Fake((4, 6), "<f2"), C, match=("B", "float16"))
    raises(TypeError, plan, A, B, Fake((8, 6), "<i4"), match=("out", "int32"))
    raises(TypeError, plan, A, B, C, out_dtype="fp16", match="out_dtype")
    raises(TypeError, plan, A, B, C, out_dtype=3, match="out_dtype")
    raises(ValueError, plan, A, B, C, out_dtype="bf16", match=("out", "out_dtype"))
    assert plan(A, B, Fake((8, 6)), out_dtype="bfloat16").c_dtype == "bf16"
    assert plan(A, B, None, out_dtype="bf16", query=True).c_dtype == "bf16"


def test_bf16_typestr():
    """bf16 through CAI is '<V2' (torch's, and ml_dtypes.bfloat16's dtype.str,
    which CuPy and numba arrays of it carry, with descr [('', '<V2')]). '|V2'
    is numpy's void or structured 2-byte type, and a '<V2' whose descr names
    fields is structured too: both refused, not read as bf16."""
    A, B, C = abc()
    assert plan(Fake((8, 4), descr=[("", BF16)]), B, C).m == 8
    assert plan(A, Fake((4, 6), typestr="bfloat16"), C).n == 6
    assert plan(A, B, Fake((8, 6), F32, descr=[("", F32)])).c_dtype == "fp32"
    raises(TypeError, plan, Fake((8, 4), typestr="|V2"), B, C, match=("A", "'|V2'", "void or structured", "'<V2'"))
    raises(TypeError, plan, A, B, Fake((8, 6), typestr="|V2"), match=("out", "'|V2'"))
    raises(TypeError, plan, A, Fake((4, 6), descr=[("hi", "|u1"), ("lo", "|u1")]), C,
           match=("B", "descr", "structured"))
    raises(TypeError, plan, A, Fake((4, 6), descr=[("x", BF16)]), C, match=("B", "structured"))
    raises(TypeError, plan, A, Fake((4, 6), descr=[("", "<i2")]), C, match=("B", "structured"))
    raises(TypeError, plan, A, B, Fake((8, 6), F32, descr=[("", BF16)]), match=("out", "structured"))


def test_not_device_memory():
    A, B, C = abc()
    raises(TypeError, plan, None, B, C, match=("A", "None"))
    raises(TypeError, plan, A, [[1.0] * 6] * 4, C, match=("B", "host memory"))
    raises(TypeError, plan, A, object(), C, match=("B", "__cuda_array_interface__"))

    class HostArray:
        __array_interface__ = {"shape": (4, 6), "typestr": BF16, "data": (1, False), "version": 3}
    raises(TypeError, plan, A, HostArray(), C, match=("B", "host memory"))

    class Refusing:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("requires grad")
    raises(TypeError, plan, Refusing(), B, C, match=("A", "requires grad"))


def test_malformed_interface():
    A, B, C = abc()
    bad = Fake((8, 4))
    del bad.__cuda_array_interface__["typestr"]
    raises(TypeError, plan, bad, B, C, match="typestr")
    raises(TypeError, plan, Fake((8, 4), mask=Fake((8, 4))), B, C, match="masked")
    raises(TypeError, plan, Fake((8, 4), data=[1, 2]), B, C, match="data")
    raises(TypeError, plan, Fake((8, 4.0)), B, C, match="shape")
    raises(ValueError, plan, Fake((8, 4), stream=0), B, C, match="stream 0")


def test_shape_mismatch():
    A, B, C = abc()
    raises(ValueError, plan, A, Fake((5, 6)), C, match=("shape mismatch", "8 x 4", "5 x 6"))
    raises(ValueError, plan, A, B, C, trans_a=True, match="shape mismatch")
    p = plan(A, Fake((6, 4)), C, trans_b=True)   # B stored N x K: op T
    assert (p.m, p.n, p.k) == (8, 6, 4)
    raises(ValueError, plan, A, B, Fake((6, 8), F32), match=("out", "6 x 8", "expected 8 x 6"))


def test_bad_strides():
    A, B, C = abc()
    # neither dimension contiguous
    raises(ValueError, plan, Fake((8, 4), strides=(8, 2)), B, C, match=("A", "neither row- nor column"))
    # rows overlap (row stride < row length), e.g. a broadcast
    raises(ValueError, plan, Fake((8, 4), strides=(0, 1)), B, C, match=("A", "neither"))
    raises(ValueError, plan, A, Fake((4, 6), strides=(3, 1)), C, match=("B", "neither"))
    # byte strides that split an element
    bad = Fake((8, 4))
    bad.__cuda_array_interface__["strides"] = (9, 2)
    raises(ValueError, plan, bad, B, C, match=("A", "multiples"))
    raises(ValueError, plan, Fake((8, 4), strides=(-4, 1)), B, C, match=("A", "negative"))
    raises(ValueError, plan, A, B, Fake((8, 6), F32, strides=(12, 2)), match=("out", "neither"))


def test_null_pointers():
    A, B, C = abc()
    raises(ValueError, plan, Fake((8, 4), ptr=0), B, C, match=("A", "NULL"))
    raises(ValueError, plan, A, Fake((4, 6), ptr=None), C, match=("B", "NULL"))
    raises(ValueError, plan, A, B, Fake((8, 6), F32, ptr=0), match=("out", "NULL"))
    # an empty matrix may have no memory
    p = plan(Fake((0, 4), ptr=0), B, Fake((0, 6), F32, ptr=0))
    assert p.m == 0


def test_out_checks():
    A, B, C = abc()
    raises(TypeError, plan, A, B, None, match=("out", "required"))
    raises(TypeError, plan, A, B, C, alpha="2", match="alpha")
    raises(TypeError, plan, A, B, C, beta=None, match="beta")
    raises(TypeError, plan, A, B, C, kernel=3, match="kernel")
    raises(ValueError, plan, A, B, Fake((8, 6), F32, readonly=True), match="read-only")
    # out aliasing an input
    base = A.__cuda_array_interface__["data"][0]
    raises(ValueError, plan, A, B, Fake((8, 6), F32, ptr=base + 8), match=("out", "overlaps A"))
    raises(ValueError, plan, A, B, Fake((8, 6), F32, ptr=base - 8 * 6 * 4 + 4), match="overlaps A")
    assert plan(A, B, Fake((8, 6), F32, ptr=base + 8 * 4 * 2)) is not None   # just past A's last byte
    # beta needs an out to scale
    raises(ValueError, plan, A, B, None, beta=0.5, match=("beta", "out"))


def test_layout_mapping():
    """Row/column-contiguous storage becomes layout, op and ld, never a copy."""
    M, N, K = 8, 6, 4
    A, B, C = abc(M, N, K)
    p = plan(A, B, C)
    assert (p.layout, p.op_a, p.lda, p.op_b, p.ldb, p.ldc) == (_lib.ROW_MAJOR, _lib.OP_N, K, _lib.OP_N, N, N)
    # A.T of a K x M row-major tensor: strides (1, M) -> op T with lda = M
    At = Fake((M, K), strides=(1, M))
    p = plan(At, B, C)
    assert (p.layout, p.op_a, p.lda, p.op_b) == (_lib.ROW_MAJOR, _lib.OP_T, M, _lib.OP_N)
    # the same memory described as K x M with trans_a: the same call
    q = plan(Fake((K, M)), B, C, trans_a=True)
    assert (q.layout, q.op_a, q.lda) == (p.layout, p.op_a, p.lda)
    # B.T view and trans_b
    p = plan(A, Fake((K, N), strides=(1, K)), C)
    assert (p.op_b, p.ldb) == (_lib.OP_T, K)
    p = plan(A, Fake((N, K)), C, trans_b=True)
    assert (p.op_b, p.ldb) == (_lib.OP_T, K)
    # both transposed: TT
    p = plan(Fake((K, M)), Fake((N, K)), C, trans_a=True, trans_b=True)
    assert (p.op_a, p.lda, p.op_b, p.ldb) == (_lib.OP_T, M, _lib.OP_T, K)
    # padded leading dimensions pass through
    p = plan(Fake((M, K), strides=(K + 8, 1)), Fake((K, N), strides=(N + 2, 1)), Fake((M, N), F32,
                                                                                       strides=(N + 10, 1)))
    assert (p.lda, p.ldb, p.ldc) == (K + 8, N + 2, N + 10)
    # column-major out: a column-major problem; column-contiguous inputs are then op N
    Cc = Fake((M, N), F32, strides=(1, M))
    p = plan(Fake((M, K), strides=(1, M)), Fake((K, N), strides=(1, K)), Cc)
    assert (p.layout, p.op_a, p.lda, p.op_b, p.ldb, p.ldc) == (_lib.COL_MAJOR, _lib.OP_N, M, _lib.OP_N, K, M)
    # ... and row-contiguous inputs op T in it
    p = plan(A, B, Cc)
    assert (p.layout, p.op_a, p.lda, p.op_b, p.ldb) == (_lib.COL_MAJOR, _lib.OP_T, K, _lib.OP_T, N)


def test_size_one_dims():
    """A size-1 dimension may carry any stride (torch views do): still usable."""
    p = plan(Fake((1, 4), strides=(12345, 1)), Fake((4, 6)), Fake((1, 6), F32, strides=(0, 1)))
    assert (p.layout, p.op_a, p.lda, p.ldc) == (_lib.ROW_MAJOR, _lib.OP_N, 4, 6)
    p = plan(Fake((8, 1), strides=(1, 0)), Fake((1, 6), strides=(7, 1)), Fake((8, 6), F32))
    assert (p.op_a, p.lda, p.op_b, p.ldb) == (_lib.OP_N, 1, _lib.OP_N, 6)
    p = plan(Fake((1, 1), strides=(0, 0)), Fake((1, 1), strides=(0, 0)), Fake((1, 1), F32, strides=(0, 0)))
    assert (p.lda, p.ldb, p.ldc) == (1, 1, 1)


def test_streams():
    """The stream a call runs on (stream=, else torch's current one with a
    torch operand, test_fake_lib; else the CAI 'stream' of out, A, B; else
    the legacy default) and the other CAI streams joined with it, each once,
    the legacy default stream (None, 0, 1) being one."""
    A, B, C = abc()
    p = plan(A, B, C)
    assert p.stream is None and p.joins == ()          # -> the legacy default stream
    p = plan(A, Fake((4, 6), stream=2), C)
    assert p.stream == 2 and p.joins == ()
    p = plan(Fake((8, 4), stream=5), B, Fake((8, 6), F32, stream=7))
    assert p.stream == 7 and p.joins == (5,)           # out's stream first; A's joined
    p = plan(Fake((8, 4), stream=5), Fake((4, 6), stream=5), Fake((8, 6), F32, stream=7))
    assert p.stream == 7 and p.joins == (5,)
    p = plan(Fake((8, 4), stream=5), Fake((4, 6), stream=1), C, stream=1234)
    assert p.stream == 1234 and p.joins == (5, 1)
    p = plan(Fake((8, 4), stream=1), Fake((4, 6), stream=9), C, stream=0)
    assert p.stream == 0 and p.joins == (9,)           # 0 and 1 are both the legacy default stream
    assert plan(A, B, C, stream=1234).stream == 1234

    class TorchLikeStream:
        cuda_stream = 99
    p = plan(A, Fake((4, 6), stream=99), C, stream=TorchLikeStream())
    assert p.stream == 99 and p.joins == ()
    raises(TypeError, plan, A, B, C, stream="default", match="stream")
    TorchLikeStream.cuda_stream = "s"
    raises(TypeError, plan, A, B, C, stream=TorchLikeStream(), match=("stream", "'s'", "not an integer"))


def test_cai_version2():
    A = Fake((8, 4), version=2)
    assert "stream" not in A.__cuda_array_interface__
    p = plan(A, Fake((4, 6), version=2), Fake((8, 6), F32, version=2))
    assert p.stream is None and p.lda == 4


def test_exception_classes():
    assert issubclass(tilekit.InvalidValueError, ValueError)
    assert issubclass(tilekit.NotSupportedError, ValueError)
    assert issubclass(tilekit.NotSupportedError, tilekit.TilekitError)
    assert issubclass(tilekit.TilekitError, RuntimeError)
    e = _lib.error_for(_lib.ARCH_MISMATCH, "needs sm_90", "here")
    assert isinstance(e, tilekit.ArchMismatchError) and e.status == 3 and e.status_name == "TK_ERR_ARCH_MISMATCH"
    assert "needs sm_90" in str(e) and "here" in str(e)


def test_exceptions_print_as_tilekit():
    """Issue 37: they printed as tilekit._lib.NoDeviceError (a private
    path); each is tilekit.<Name>, where the package exports it."""
    import traceback
    for name in ("TilekitError", "InvalidValueError", "NotSupportedError", "ArchMismatchError", "NoDeviceError",
                 "CudaError", "CublasError", "OutOfResourcesError", "AllocError", "InternalError", "CommError",
                 "LibraryNotFound"):
        cls = getattr(tilekit, name)
        assert cls.__module__ == "tilekit" and cls.__qualname__ == name, (cls.__module__, cls.__qualname__)
    e = _lib.error_for(_lib.NO_DEVICE, "no CUDA device: why", "tilekit.gemm")
    line = traceback.format_exception_only(type(e), e)[-1]
    assert line.startswith("tilekit.NoDeviceError: tilekit.gemm: no CUDA device: why"), line


def test_lib_exceptions_print_as_tilekit():
    """The same for what the library's statuses raise, on this backend."""
    import traceback
    A, B, C = abc()
    e = raises(tilekit.InvalidValueError, tilekit.gemm, A, B, C, kernel="k99_nope")
    line = traceback.format_exception_only(type(e), e)[-1]
    assert line.startswith("tilekit.InvalidValueError: tilekit.gemm: kernel: unknown kernel"), line
    if tilekit.supports(A, B, C).status == _lib.NO_DEVICE:
        e = raises(tilekit.NoDeviceError, tilekit.gemm, A, B, C)
        line = traceback.format_exception_only(type(e), e)[-1]
        assert line.startswith("tilekit.NoDeviceError: tilekit.gemm: no CUDA device"), line


def test_missing_library_message():
    """Without a library, import works and the first call says how to get one."""
    env = dict(os.environ, TILEKIT_LIB="/nonexistent/libtilekit.so")
    code = ("import tilekit\n"
            "try:\n    tilekit.kernels()\n"
            "except tilekit.LibraryNotFound as e:\n    print('MSG', e)\n")
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=here if os.environ.get("TILEKIT_TEST_INSTALLED") else os.path.join(here, "..", "..",
                                                                                                "python"))
    assert out.returncode == 0, out.stderr
    assert "MSG" in out.stdout and "/nonexistent/libtilekit.so" in out.stdout and "TILEKIT_LIB" in out.stdout, \
        out.stdout


# ---- need libtilekit (fail, not skip, when it cannot be loaded) ----

def test_lib_version_and_registry():
    assert tilekit.version() == tilekit.__version__
    ks = tilekit.kernels()
    names = [k["name"] for k in ks]
    assert "cublas" in names and "k01_naive" in names, names
    for k in ks:
        assert set(k) == {"name", "description", "min_sm", "bm", "bn"} and k["min_sm"] >= 80, k


def test_lib_unknown_kernel():
    """Refused by the C library before any device work, on any machine."""
    A, B, C = abc()
    e = raises(tilekit.InvalidValueError, tilekit.gemm, A, B, C, kernel="k99_nope",
               match=("k99_nope", "cublas", "k01_naive"))
    assert isinstance(e, ValueError) and e.status == _lib.INVALID_VALUE
    raises(tilekit.InvalidValueError, tilekit.supports, A, B, C, kernel="k99_nope", match="k99_nope")


def test_lib_unknown_kernel_lists_all():
    """Issue 37: the list of valid names was cut at 511 characters, so the
    last kernels never showed. Every registered name is in the message, the
    last one closing the list."""
    A, B, C = abc()
    names = [k["name"] for k in tilekit.kernels()]
    e = raises(tilekit.InvalidValueError, tilekit.gemm, A, B, C, kernel="k99_nope", match=tuple(names))
    assert e.detail.endswith(", %s)" % names[-1]), e.detail
    assert str(e).endswith(", %s) (TK_ERR_INVALID_VALUE)" % names[-1]), str(e)


def test_lib_noop():
    """M = 0 is a no-op in the library: succeeds with no memory and no GPU."""
    out = Fake((0, 6), F32, ptr=0)
    assert tilekit.gemm(Fake((0, 4), ptr=0), Fake((4, 6)), out) is out
    out = Fake((8, 0), F32, ptr=0)
    assert tilekit.gemm(Fake((8, 4)), Fake((4, 0), ptr=0), out, kernel="k01_naive") is out


def test_lib_no_device_or_supported():
    """A valid problem passes every check. Without a GPU the library then
    says so (NoDeviceError); with one, only the launch-free query is made."""
    A, B, C = abc()
    s = tilekit.supports(A, B, C, kernel="k01_naive")
    if s.status == _lib.NO_DEVICE:
        assert not s and s.reason
        raises(tilekit.NoDeviceError, tilekit.gemm, A, B, C, kernel="k01_naive", match="TK_ERR_NO_DEVICE")
        raises(tilekit.NoDeviceError, tilekit.select_kernel, A, B, C)
    else:
        assert s, s
        assert tilekit.select_kernel(A, B, C)
    # out is optional for the query: its alignment is judged on ldc alone
    assert tilekit.supports(A, B, kernel="k01_naive").status == s.status


def _random_fake(rng, rows, cols):
    """A device array description with some of its fields mangled."""
    typestr = rng.choice([BF16] * 12 + [F32, "<f2", "<i4", "|u1", ">V2", "|V2", "", 5])
    shape = rng.choice([(rows, cols)] * 8 + [(rows,), (rows, cols, 1), (-rows, cols), (rows, 2 ** 63),
                                             (rows, 2.5), (rows, None), ()])
    strides = rng.choice([None, None, (cols, 1), (1, rows), (cols + 8, 1), (0, 1), (-cols, 1), (2 ** 62, 1),
                          (1,), (cols, 1, 1), ("a", 1)])
    ptr = rng.choice(["auto"] * 6 + [0, None, 1, 2 ** 64 + 5, -16, "x", 0x7f0000000001])
    f = Fake((1, 1), strides=None)
    cai = f.__cuda_array_interface__
    cai["shape"] = shape
    cai["typestr"] = typestr
    if isinstance(shape, tuple) and strides is not None and isinstance(typestr, str) and typestr in SIZE:
        try:
            strides = tuple(s * SIZE[typestr] for s in strides)
        except TypeError:
            pass
    cai["strides"] = strides
    if ptr != "auto":
        cai["data"] = (ptr, rng.random() < 0.1)
    cai["version"] = rng.choice([3, 3, 2, 0, 4, "3"])
    if rng.random() < 0.1:
        cai["stream"] = rng.choice([0, 1, 2, -1, "s", 2 ** 70])
    if rng.random() < 0.1:
        cai["descr"] = rng.choice([[("", typestr)], [("", BF16)], [("", F32)], [("a", typestr)], (("", typestr),),
                                   [("", typestr), ("b", "|u1")], [], [["", typestr]], "x", 3, [("", 5)], [(1, 2)]])
    if rng.random() < 0.05:
        del cai[rng.choice(list(cai))]
    return f


def test_plan_fuzz():
    """Random, often hostile descriptions and arguments: the wrapper's checks
    either accept the call or raise TypeError / ValueError, never another
    exception (an AttributeError or OverflowError would be a crash in
    disguise). Only the pure-Python checks run: nothing reaches the library."""
    import random
    rng = random.Random(11)
    odd = [0, 1, -1, 0.5, float("nan"), float("inf"), 2 ** 70, "2", None, True, 1 + 2j]
    accepted = 0
    for _ in range(3000):
        m, n, k = (rng.choice([1, 2, 7, 8, 64, 65, 4096]) for _ in range(3))
        A = _random_fake(rng, m, k) if rng.random() < 0.5 else Fake((m, k))
        B = _random_fake(rng, k, n) if rng.random() < 0.5 else Fake((k, n))
        C = rng.choice([Fake((m, n), F32), Fake((m, n)), None, _random_fake(rng, m, n), "C", 3])
        kw = dict(alpha=rng.choice(odd + [1.0] * 6), beta=rng.choice(odd + [0.0] * 6),
                  trans_a=rng.choice([False, False, True, 0, 1, "yes", None]),
                  trans_b=rng.choice([False, False, True, 0, 1, None]),
                  out_dtype=rng.choice([None, None, "float32", "bfloat16", "int8", 7]),
                  kernel=rng.choice([None, None, "auto", "", "k01_naive", 3, "x" * 1000, "k01_naive\0"]),
                  stream=rng.choice([None, None, 0, 7, -3, 2 ** 70, "s", 1.5]),
                  query=rng.random() < 0.3)
        try:
            plan(A, B, C, **kw)
            accepted += 1
        except (TypeError, ValueError):
            pass
        except Exception as e:   # any other kind is a bug in the checks
            raise AssertionError("%s: %s, args A=%r B=%r C=%r %r" % (
                type(e).__name__, e, getattr(A, "__cuda_array_interface__", A),
                getattr(B, "__cuda_array_interface__", B), getattr(C, "__cuda_array_interface__", C), kw)) from e
    assert 0 < accepted < 3000, accepted
