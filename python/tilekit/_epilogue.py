"""tilekit.gemm_epilogue: one product with issue 39's fused epilogue
(tk_gemm_desc's version-3 fields, include/tilekit.h).

The arguments are checked here, in Python, for both backends: what the
wrapper can see and the library cannot (shapes, ranks, dtypes, the length of
a vector, devices, streams) raises TypeError or ValueError naming the
argument; the rest (a kind without its activation, beta with
"gated_backward", misaligned pointers, overlaps of D with aux) is the
library's to refuse, its status raised as the matching TilekitError with its
message. The backend then fills a tk_gemm_desc and calls tk_gemm_run: the
extension's gemm_run in C (the GIL released, the thread's handle), or the
fallback's through ctypes (_lib.GemmDesc). It is a function of its own, not
keywords of gemm(), so that gemm keeps its C entry point without a Python
frame and its checks (out M x N, beta with out None) stay as they are.

With the extension, tilekit.gemm_epilogue is the extension's own
(_tilekit.c, py_gemm_epilogue): calls on torch tensors with plain
arguments are checked and run in C by these rules, giving the same
descriptor; it hands every other call, and every call a rule refuses, to
gemm_epilogue here as it came (setup_epilogue below), so the checks and
messages of this file are the only ones.
"""
from . import _lib
from . import _fallback
from ._arrays import describe

WHERE = "tilekit.gemm_epilogue"

# tk_epilogue_kind, tk_activation, tk_bias_along (include/tilekit.h)
EPILOGUES = {None: 0, "bias_act": 1, "gated": 2, "backward": 3, "gated_backward": 4}
ACTIVATIONS = {None: 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}
BIAS_ALONG = {"columns": 0, "rows": 1}
_DTYPES = {"fp32": _lib.F32, "bf16": _lib.BF16}


def _choice(value, table, what):
    """table[value]: TypeError for a value that is no string, ValueError for one it does not hold."""
    if value is not None and not isinstance(value, str):
        raise TypeError("%s: %r is not a name (expected one of %s)" % (what, value, _names(table)))
    if value not in table:
        raise ValueError("%s: %r is not one of %s" % (what, value, _names(table)))
    return table[value]


def _names(table):
    return ", ".join(repr(k) for k in table)


def _row_major(x, what):
    """ld of a matrix the epilogue writes or reads row by row: its rows must be contiguous."""
    st = x.storage("row")
    if st is None or st[0] != "row":
        raise ValueError("%s: strides (%d, %d): epilogues take row-major matrices (%s's rows must be contiguous)"
                         % (what, x.srow, x.scol, what))
    return st[1]


def _shape(x, rows, cols, what, meaning):
    if (x.rows, x.cols) != (rows, cols):
        raise ValueError("%s: shape %d x %d, expected %d x %d (%s)" % (what, x.rows, x.cols, rows, cols, meaning))


def _vector(x, name, length, meaning):
    """A 1-D, contiguous vector of `length` elements."""
    v = describe(x, name, (1,))
    if v.cols != length:
        raise ValueError("%s: %d values, expected %d (%s)" % (name, v.cols, length, meaning))
    if v.cols > 1 and v.scol != 1:
        raise ValueError("%s: stride %d: the elements must be contiguous (stride 1)" % (name, v.scol))
    return v


class _EpiPlan:
    """A checked gemm_epilogue call: `fields`, tk_gemm_desc's values in
    gemm_run's order (the problem's, then the epilogue's), with the
    device, stream and joined streams of the call, and the returned array."""
    __slots__ = ("fields", "device", "stream", "joins", "kernel", "result")


def plan(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, kernel=None, epilogue=None,
         activation=None, bias=None, bias_along="columns", b_up=None, d=None, aux=None, bias_grad=None, stream=None):
    """The checked call of gemm_epilogue (loads nothing: the tests read it)."""
    kind = _choice(epilogue, EPILOGUES, "epilogue")
    act = _choice(activation, ACTIVATIONS, "activation")
    along = _choice(bias_along, BIAS_ALONG, "bias_along")
    a, b = describe(A, "A"), describe(B, "B")
    ups = [describe(b_up, "b_up")] if b_up is not None else []
    for x in [a, b] + ups:
        if x.dtype != "bf16":
            raise TypeError("%s: dtype %s is not supported: tilekit multiplies bfloat16 inputs "
                            "(convert with .to(torch.bfloat16))" % (x.name, x.dtype))
    alpha, beta = _fallback._real(alpha, "alpha"), _fallback._real(beta, "beta")
    if kernel is not None and not isinstance(kernel, str):
        raise TypeError("kernel: %r is not a name (expected a string such as 'k01_naive', or None for auto)"
                        % (kernel,))
    oa = a.t() if trans_a else a   # op(A), M x K
    ob = b.t() if trans_b else b   # op(B), K x N (K x N/2 with b_up)
    if oa.cols != ob.rows:
        raise ValueError("shape mismatch: op(A) is %d x %d but op(B) is %d x %d (inner dimensions differ; "
                         "trans_a=%s, trans_b=%s)" % (oa.rows, oa.cols, ob.rows, ob.cols, bool(trans_a),
                                                      bool(trans_b)))
    m, k = oa.rows, oa.cols
    op_a, lda = _fallback._operand(oa, "row", "A" + (".T" if trans_a else ""))
    op_b, ldb = _fallback._operand(ob, "row", "B" + (".T" if trans_b else ""))
    n = ob.cols
    if ups:   # the up projection: B's shape, op and leading dimension (one op and ldb for both)
        ou = ups[0].t() if trans_b else ups[0]
        if (ou.rows, ou.cols) != (ob.rows, ob.cols):
            raise ValueError("b_up: op(b_up) is %d x %d but op(B) is %d x %d (the up half has the gate's shape)"
                             % (ou.rows, ou.cols, ob.rows, ob.cols))
        if _fallback._operand(ou, "row", "b_up" + (".T" if trans_b else "")) != (op_b, ldb):
            raise ValueError("b_up: strides (%d, %d) differ from B's (%d, %d): the library takes one op and leading "
                             "dimension for both" % (ups[0].srow, ups[0].scol, b.srow, b.scol))
        n *= 2
    if kind == EPILOGUES["gated"] and n % 2:
        raise ValueError("B: N = %d columns is odd: 'gated' splits them into a gate half and an up half" % n)
    # D's columns: N, N/2 (gated) or 2N (gated_backward); aux's: N, or 2N (gated_backward)
    width = n // 2 if kind == EPILOGUES["gated"] else 2 * n if kind == EPILOGUES["gated_backward"] else n
    aux_width = 2 * n if kind == EPILOGUES["gated_backward"] else n
    what = "M x N" if width == n else "M x N/2" if width < n else "M x 2N"

    if d is None and out is None:
        raise TypeError("out: required (the output D, or with d= the residual C; gemm_epilogue allocates nothing)")
    written = []
    dm = describe(d, "d") if d is not None else None
    cm = describe(out, "out") if out is not None else None
    for x in (dm, cm):
        if x is not None:
            _shape(x, m, width, x.name, what)
    dst = dm if dm is not None else cm   # D
    ldd = ldc = _row_major(dst, dst.name)   # C's: D's when C is D or absent
    written.append(dst)
    if cm is not None and dm is not None:
        if cm.dtype != dm.dtype:
            raise ValueError("out: dtype %s differs from d's %s (C and D share one type)" % (cm.dtype, dm.dtype))
        ldc = _row_major(cm, "out")
    elif cm is None and beta != 0.0:
        raise ValueError("beta is %g but out is None: beta scales the residual out, so pass out" % beta)
    reads = [a, b] + ups
    vm = None
    if bias is not None:
        vm = _vector(bias, "bias", m if along else n, "one per %s of z: %s" % (("row", "M") if along else
                                                                              ("column", "N")))
        reads.append(vm)
    xm = None
    if aux is not None:
        xm = describe(aux, "aux")
        if xm.dtype != "bf16":
            raise TypeError("aux: dtype %s is not supported: aux holds z in bfloat16" % xm.dtype)
        _shape(xm, m, aux_width, "aux", "M x 2N" if aux_width > n else "M x N")
        ldaux = _row_major(xm, "aux")
        if kind in (EPILOGUES["backward"], EPILOGUES["gated_backward"]):
            reads.append(xm)
        else:
            written.append(xm)
    gm = None
    if bias_grad is not None:
        gm = _vector(bias_grad, "bias_grad", width, "D's column sums")
        if gm.dtype != "fp32":
            raise TypeError("bias_grad: dtype %s is not supported: the column sums are float32" % gm.dtype)
        written.append(gm)
    for w in written:
        if w.readonly:
            raise ValueError("%s: the array is read-only" % w.name)
        for r in reads:
            if _fallback._overlaps(w, r):
                raise ValueError("%s overlaps %s in memory: the kernel would read what it overwrites"
                                 % (w.name, r.name))

    operands = [x for x in (dm, cm, a, b, *ups, vm, xm, gm) if x is not None]   # D's first (the CAI streams)
    devices = {x.device for x in operands if x.torch}
    if len(devices) > 1:
        raise TypeError("%s must be on one CUDA device, got %s" % (", ".join(x.name for x in operands),
                                                                   ", ".join("cuda:%d" % v for v in sorted(devices))))
    p = _EpiPlan()
    p.device = devices.pop() if devices else None
    p.stream, p.joins = _fallback._streams(stream, operands, p.device)
    p.kernel = None if kernel in (None, "", "auto") else kernel.encode()
    p.result = d if d is not None else out
    p.fields = (_lib.ROW_MAJOR, op_a, op_b, m, n, k, alpha, beta, a.ptr, lda, b.ptr, ldb,
                cm.ptr if cm is not None else 0, ldc, _DTYPES[dst.dtype],
                kind, act, vm.ptr if vm else 0, _DTYPES[vm.dtype] if vm else 0, along,
                ups[0].ptr if ups else 0, dm.ptr if dm else 0, ldd if dm else 0,
                xm.ptr if xm else 0, ldaux if xm else 0, gm.ptr if gm else 0)
    return p


def gemm_epilogue(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, kernel=None, *, epilogue=None,
                  activation=None, bias=None, bias_along="columns", b_up=None, d=None, aux=None, bias_grad=None,
                  stream=None):
    """D = epilogue(alpha * op(A) @ op(B)) + beta * C in the kernel's own
    epilogue (tk_gemm_run with tk_gemm_desc's version-3 fields; the formulas
    are include/tilekit.h's "epilogues" block). Returns D.

    epilogue: None (the product alone), "bias_act" (act(z + bias)),
    "gated" (act(z_gate) * z_up: SwiGLU, GeGLU), "backward" (P * act'(aux)),
    "gated_backward" (the gradient of z from a gated output's).
    activation: None, "relu", "gelu" (erf), "gelu_tanh" or "silu".
    A, B: bf16 2-D as for gemm (trans_a, trans_b the same); M, N, K from
    op(A) (M x K) and op(B) (K x N). D is `d` when given (`out` is then the
    residual C read when beta != 0, and may be None with beta 0), else `out`
    (in place); both fp32 or bf16, row-major, M x N; "gated": M x N/2;
    "gated_backward": M x 2N. b_up ("gated"): the up projection, B's shape
    and strides; op(B) then holds the gate's N/2 columns. bias: 1-D, fp32 or
    bf16, N values (bias_along="columns") or M ("rows"). aux: bf16 M x N (M x
    2N for "gated_backward"): z stored by the forward kinds, read by the
    backward ones. bias_grad: 1-D fp32, D's column sums (backward kinds).
    kernel and stream as for gemm. Torch tensors and
    __cuda_array_interface__ objects (no DLPack). Asynchronous."""
    p = plan(A, B, out, alpha, beta, trans_a, trans_b, kernel, epilogue, activation, bias, bias_along, b_up, d, aux,
             bias_grad, stream)
    lib = _lib.load()   # the extension bound, or the ctypes library
    run = p.stream or None
    with _fallback._device_context(p):
        if p.joins:
            _fallback._join(run, p.joins, False)
        (lib if lib is _lib.EXT else _fallback).gemm_run(-1 if p.device is None else p.device, run, p.kernel,
                                                          p.fields)
        if p.joins:
            _fallback._join(run, p.joins, True)
    return p.result


if _lib.EXT is not None:
    _lib.EXT.setup_epilogue(gemm_epilogue)
