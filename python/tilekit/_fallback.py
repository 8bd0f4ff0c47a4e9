"""The pure-Python backend of tilekit: the argument checks in Python and the
library through ctypes. The fallback for a build without the C extension
(tilekit/_tilekit.c), and the reference the extension's checks are compared
with (tests/python/test_backends.py): both raise the same exceptions with the
same messages. Its functions are the extension's: gemm, plan, supports,
select_kernel, kernels, version, current_device.
"""
import contextlib
import ctypes
import numbers

from . import _lib
from ._arrays import describe, parse_dtype, _torch

_C_TYPES = {"fp32": _lib.F32, "bf16": _lib.BF16}


def version():
    """TILEKIT_VERSION of the loaded library."""
    return _lib.load_ctypes().tk_version()


def current_device():
    return _lib.current_device()


def kernels():
    """The registry: one dict per kernel with name, description, min_sm, bm, bn."""
    lib = _lib.load_ctypes()
    out = []
    for i in range(lib.tk_kernel_count()):
        p = _lib.KernelProps()
        _lib.check(lib.tk_kernel_get(i, ctypes.byref(p)), None, "tk_kernel_get")
        out.append({"name": p.name.decode(), "description": p.description.decode(), "min_sm": p.min_sm,
                    "bm": p.bm, "bn": p.bn})
    return out


def _real(v, what):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError("%s: %r is not a real number" % (what, v))
    return float(v)


class _Plan:
    """A checked call: everything tk_gemm needs except, when out is to be
    allocated, C's pointer."""
    __slots__ = ("a", "b", "c", "m", "n", "k", "layout", "op_a", "lda", "op_b", "ldb", "ldc", "c_dtype", "alpha",
                 "beta", "kernel", "device", "stream")


def _operand(x, layout, what):
    """(op, ld) of a logical operand x (already op()-applied) in a `layout`
    problem: stored in the problem's layout -> op N; stored in the other
    layout -> the stored matrix is x^T in the problem's layout -> op T."""
    st = x.storage(prefer=layout)
    if st is None:
        raise ValueError("%s: strides (%d, %d) of its %d x %d storage are neither row- nor column-contiguous "
                         "(one dimension must have stride 1 and the other must not overlap it); "
                         "make a contiguous copy first" % (what, x.srow, x.scol, x.rows, x.cols))
    kind, ld = st
    return (_lib.OP_N if kind == layout else _lib.OP_T), ld


def _overlaps(x, y):
    rx, ry = x.byte_range(), y.byte_range()
    return rx is not None and ry is not None and rx[0] <= ry[1] and ry[0] <= rx[1]


def plan(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, kernel, stream, query=False):
    a, b = describe(A, "A"), describe(B, "B")
    for x in (a, b):
        if x.dtype != "bf16":
            raise TypeError("%s: dtype %s is not supported: tilekit multiplies bfloat16 inputs "
                            "(convert with .to(torch.bfloat16))" % (x.name, x.dtype))
    p = _Plan()
    p.alpha, p.beta = _real(alpha, "alpha"), _real(beta, "beta")
    if kernel is not None and not isinstance(kernel, str):
        raise TypeError("kernel: %r is not a name (expected a string such as 'k01_naive', or None for auto)"
                        % (kernel,))
    p.kernel = None if kernel in (None, "", "auto") else kernel.encode()
    oa = a.t() if trans_a else a   # op(A), M x K
    ob = b.t() if trans_b else b   # op(B), K x N
    if oa.cols != ob.rows:
        raise ValueError("shape mismatch: op(A) is %d x %d but op(B) is %d x %d (inner dimensions differ; "
                         "trans_a=%s, trans_b=%s)" % (oa.rows, oa.cols, ob.rows, ob.cols, bool(trans_a),
                                                      bool(trans_b)))
    p.m, p.k, p.n = oa.rows, oa.cols, ob.cols
    want = parse_dtype(out_dtype) if out_dtype is not None else None

    c = None
    if out is not None:
        c = describe(out, "out")
        if want is not None and c.dtype != want:
            raise ValueError("out: dtype %s does not match out_dtype %s" % (c.dtype, want))
        if (c.rows, c.cols) != (p.m, p.n):
            raise ValueError("out: shape %d x %d, expected %d x %d (M x N)" % (c.rows, c.cols, p.m, p.n))
        if c.readonly:
            raise ValueError("out: the array is read-only")
        for x in (a, b):
            if _overlaps(c, x):
                raise ValueError("out overlaps %s in memory: the kernel would read what it overwrites" % x.name)
        st = c.storage("row")
        if st is None:
            raise ValueError("out: strides (%d, %d) are neither row- nor column-contiguous (one dimension must "
                             "have stride 1 and the other must not overlap it)" % (c.srow, c.scol))
        p.layout, p.ldc = (_lib.ROW_MAJOR if st[0] == "row" else _lib.COL_MAJOR), st[1]
        p.c_dtype = c.dtype
    else:
        if not query and p.beta != 0.0:
            raise ValueError("beta is %g but out is None: beta scales an existing out, so pass out" % p.beta)
        if not query and not (a.torch or b.torch):
            raise TypeError("out: required when neither A nor B is a torch tensor (tilekit allocates the result "
                            "only through torch)")
        p.layout, p.ldc = _lib.ROW_MAJOR, max(p.n, 1)
        p.c_dtype = want or "fp32"
    layout = "row" if p.layout == _lib.ROW_MAJOR else "col"
    p.op_a, p.lda = _operand(oa, layout, "A" + (".T" if trans_a else ""))
    p.op_b, p.ldb = _operand(ob, layout, "B" + (".T" if trans_b else ""))
    p.a, p.b, p.c = a, b, c

    devices = {x.device for x in (a, b, c) if x is not None and x.torch}
    if len(devices) > 1:
        raise TypeError("A, B and out must be on one CUDA device, got %s"
                        % ", ".join("cuda:%d" % d for d in sorted(devices)))
    p.device = devices.pop() if devices else None

    if stream is not None and not isinstance(stream, int):
        if hasattr(stream, "cuda_stream"):
            stream = stream.cuda_stream
        else:
            raise TypeError("stream: %r is neither a cudaStream_t value (int) nor a torch.cuda.Stream" % (stream,))
    if stream is None:
        cai_streams = [x.stream for x in (c, a, b) if x is not None and x.stream is not None]
        stream = cai_streams[0] if cai_streams else None
    p.stream = stream
    return p


def _device_context(p):
    """Makes the tensors' device current for the call (launches go to the
    current device); skipped, as it costs microseconds, when it already is."""
    if p.device is None or p.device == _torch().cuda.current_device():
        return contextlib.nullcontext()
    return _torch().cuda.device(p.device)


def _stream(p):
    if p.stream is not None:
        return p.stream
    if p.device is not None:   # torch tensors: the caller's current stream on their device
        return _torch().cuda.current_stream(p.device).cuda_stream
    return 0                   # the legacy default stream


def _handle(p):
    return _lib.handle(p.device if p.device is not None else _lib.current_device())


def gemm(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None, *,
         stream=None):
    """out = alpha * op(A) @ op(B) + beta * out, with op(X) = X.T if trans_x.

    A, B: bf16, 2-D, torch CUDA tensors or __cuda_array_interface__ objects.
    out: M x N, fp32 or bf16; allocated (torch, row-major) when None, which
    needs beta == 0 and a torch input. out_dtype: torch.float32 (default) or
    torch.bfloat16, or "fp32"/"bf16". kernel: a registry name (see kernels())
    or None for auto-dispatch. stream: a cudaStream_t value or torch stream;
    default: torch's current stream for torch inputs, else the CAI 'stream'
    entry (out's, then A's, then B's), else the legacy default stream.
    Returns out. Asynchronous with respect to the host."""
    p = plan(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, kernel, stream)
    lib = _lib.load_ctypes()
    with _device_context(p):
        if out is None:
            t = _torch()
            out = t.empty((p.m, p.n), dtype=t.float32 if p.c_dtype == "fp32" else t.bfloat16,
                          device=(p.a.obj if p.a.torch else p.b.obj).device)
            p.c = describe(out, "out")
        h = _handle(p)
        st = lib.tk_gemm(h, p.layout, p.op_a, p.op_b, p.m, p.n, p.k, p.alpha, p.a.ptr or None, p.lda,
                         p.b.ptr or None, p.ldb, p.beta, p.c.ptr or None, _C_TYPES[p.c_dtype], p.ldc, p.kernel,
                         _stream(p) or None)
        _lib.check(st, h, "tilekit.gemm")
    return out


def _problem(p):
    return _lib.GemmProblem(p.layout, p.op_a, p.op_b, p.m, p.n, p.k, p.alpha, p.beta, p.a.ptr or None, p.lda,
                            p.b.ptr or None, p.ldb, (p.c.ptr or None) if p.c is not None else None, p.ldc,
                            _C_TYPES[p.c_dtype])


def supports(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None):
    """(status, reason): whether `kernel` (None: auto-dispatch) can run this
    gemm on the device, launching nothing (tilekit.supports wraps it)."""
    p = plan(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, kernel, None, query=True)
    lib = _lib.load_ctypes()
    with _device_context(p):
        h = _handle(p)
        prob = _problem(p)
        st = lib.tk_kernel_supports(h, p.kernel, ctypes.byref(prob))
        if st == _lib.INVALID_VALUE:   # a bad argument (unknown kernel, ...) is an error, not a refusal
            _lib.check(st, h, "tilekit.supports")
        return st, (_lib.last_error(h) if st else "")


def select_kernel(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None):
    """The kernel name auto-dispatch would run for this gemm on the current
    device; raises the library's error when none can."""
    p = plan(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, None, None, query=True)
    lib = _lib.load_ctypes()
    with _device_context(p):
        h = _handle(p)
        prob = _problem(p)
        # tk_kernel_supports(NULL kernel) runs the same choice and returns its status.
        _lib.check(lib.tk_kernel_supports(h, None, ctypes.byref(prob)), h, "tilekit.select_kernel")
        name = lib.tk_select_kernel(h, ctypes.byref(prob))
        if not name:
            raise _lib.error_for(_lib.NOT_SUPPORTED, _lib.last_error(h), "tilekit.select_kernel")
        return name.decode()
