"""The pure-Python backend of tilekit: the argument checks in Python and the
library through ctypes. The fallback for a build without the C extension
(tilekit/_tilekit.c), and the reference the extension's checks are compared
with (tests/python/test_backends.py): both raise the same exceptions with the
same messages. Its functions are the extension's: gemm, plan, supports,
select_kernel, kernels, version, current_device, gemm_batched and
gemm_grouped (issue 38), and issue 37's: the
thread's handle settings (set_workspace, set_workspace_limit, set_split_k,
release_workspaces, handle_info, last_cuda_error), build_info, candidates,
workspace_size and plan_create (a GemmPlan).
"""
import contextlib
import ctypes
import numbers
import threading

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
    """A checked call: everything the library's call needs except, when out
    is to be allocated, C's pointer. form: "gemm", "batched" or "grouped";
    kind: its tk_group_kind (0 for gemm); count and the strides of the
    products (0 where unused); offs, err: the offsets and group error flag
    (Matrix or None) and their pointers; out_shape: what out is (allocated)."""
    __slots__ = ("a", "b", "c", "m", "n", "k", "layout", "op_a", "lda", "op_b", "ldb", "ldc", "c_dtype", "alpha",
                 "beta", "kernel", "device", "stream", "joins", "form", "kind", "count", "stride_a", "stride_b",
                 "stride_c", "offs", "err", "offs_ptr", "error_ptr", "out_shape")


# tk_group_kind (include/tilekit.h)
GROUP_NONE, GROUP_BATCHED, GROUP_ROWS, GROUP_K, GROUP_MASKED = 0, 1, 2, 3, 4
_KIND_NAMES = {GROUP_BATCHED: "TK_GROUP_BATCHED", GROUP_ROWS: "TK_GROUP_ROWS", GROUP_K: "TK_GROUP_K",
               GROUP_MASKED: "TK_GROUP_MASKED"}
# The ranks of A, B and out a form takes; a grouped call's kind follows from A's and B's (_group_kind).
_FORM_RANKS = {"gemm": ((2,), (2,)), "batched": ((3,), (3,)), "grouped": ((2, 3), (2, 3))}
_COUNT_MAX = 2 ** 31 - 1   # count is an int32 in tk_gemm_desc


def _legacy(s):
    """Whether a stream value is the legacy default stream: None, 0 (the
    NULL stream, torch's default stream) or 1 (cudaStreamLegacy, as CAI
    writes it)."""
    return s is None or (isinstance(s, int) and s in (0, 1))


def _same_stream(x, y):
    """Whether two stream values name one stream."""
    if _legacy(x) or _legacy(y):
        return _legacy(x) and _legacy(y)
    return x == y


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


def _group_kind(a, b):
    """A grouped call's kind from the ranks of A and B (torch._grouped_mm's
    rule): 2-D x 3-D splits the rows, 2-D x 2-D splits K, 3-D x 3-D is
    masked; 3-D x 2-D (a split of N) has no kind."""
    kind = {(2, 3): GROUP_ROWS, (2, 2): GROUP_K, (3, 3): GROUP_MASKED}.get((a.ndim, b.ndim))
    if kind is None:
        raise ValueError("A is a 3-D stack and B a 2-D matrix: no group kind splits N (the columns of B and out); "
                         "multiply the transposes, out.T = B.T x A.T grouped by rows (TK_GROUP_ROWS)")
    return kind


def _index_array(x, name):
    """offs or group_error: a contiguous 1-D int32 array in device memory."""
    v = describe(x, name, (1,), index=True)
    if v.cols > 1 and v.scol != 1:
        raise ValueError("%s: stride %d: the int32 elements must be contiguous (stride 1)" % (name, v.scol))
    return v


def _groups(p, a, b, c, offs, group_error):
    """A grouped call's count (from B, out or offs), offsets and error flag."""
    if offs is None:
        raise TypeError("offs: required for a grouped product (int32 cumulative end offsets, or row counts for "
                        "3-D A and B, in device memory)")
    o = _index_array(offs, "offs")
    count = {GROUP_ROWS: b.count, GROUP_MASKED: a.count}.get(p.kind, c.count if c is not None else o.cols)
    if o.cols != count:
        raise ValueError("offs: %d offsets for %d groups (one per group: %s)" % (
            o.cols, count, {GROUP_ROWS: "B's matrices", GROUP_K: "out's matrices",
                            GROUP_MASKED: "A's and B's matrices"}[p.kind]))
    p.offs, p.offs_ptr = o, o.ptr or None
    if group_error is not None:
        e = _index_array(group_error, "group_error")
        if e.cols < 1:
            raise ValueError("group_error: empty (expected at least one int32 element)")
        if e.readonly:
            raise ValueError("group_error: the array is read-only")
        p.err, p.error_ptr = e, e.ptr or None
    return count


def plan(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None, stream=None,
         offs=None, group_error=None, query=False, form="gemm"):
    """The checked call of gemm (form "gemm"), gemm_batched ("batched": A, B
    and out 3-D stacks) or gemm_grouped ("grouped": offs required, the kind
    from the ranks of A and B)."""
    form = "gemm" if form is None else form
    ranks = _FORM_RANKS.get(form) if isinstance(form, str) else None
    if ranks is None:
        raise ValueError("form: %r is not 'gemm', 'batched' or 'grouped'" % (form,))
    a, b = describe(A, "A", ranks[0]), describe(B, "B", ranks[1])
    for x in (a, b):
        if x.dtype != "bf16":
            raise TypeError("%s: dtype %s is not supported: tilekit multiplies bfloat16 inputs "
                            "(convert with .to(torch.bfloat16))" % (x.name, x.dtype))
    p = _Plan()
    p.form, p.kind = form, {"gemm": GROUP_NONE, "batched": GROUP_BATCHED}.get(form)
    p.offs = p.err = p.offs_ptr = p.error_ptr = None
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
    if p.kind is None:
        p.kind = _group_kind(a, b)
    if form != "grouped" and (offs is not None or group_error is not None):
        raise TypeError("offs: a %s product takes no offsets" % form)
    if p.kind in (GROUP_BATCHED, GROUP_MASKED) and a.count != b.count:
        raise ValueError("count mismatch: A holds %d matrices but B %d" % (a.count, b.count))
    want = parse_dtype(out_dtype) if out_dtype is not None else None
    out_ndim = 2 if p.kind in (GROUP_NONE, GROUP_ROWS) else 3

    c = None
    if out is not None:
        c = describe(out, "out", (out_ndim,))
        if want is not None and c.dtype != want:
            raise ValueError("out: dtype %s does not match out_dtype %s" % (c.dtype, want))
    p.count = 1 if p.kind == GROUP_NONE else a.count if p.kind == GROUP_BATCHED else None
    if form == "grouped":
        p.count = _groups(p, a, b, c, offs, group_error)
    if p.count > _COUNT_MAX:
        raise ValueError("count: %d products is more than 2**31 - 1" % p.count)
    p.out_shape = (p.m, p.n) if out_ndim == 2 else (p.count, p.m, p.n)
    if c is not None:
        if (c.rows, c.cols) != (p.m, p.n) or (out_ndim == 3 and c.count != p.count):
            got = (c.rows, c.cols) if out_ndim == 2 else (c.count, c.rows, c.cols)
            raise ValueError("out: shape %s, expected %s (%s)" % (" x ".join(map(str, got)),
                                                                 " x ".join(map(str, p.out_shape)),
                                                                 "M x N" if out_ndim == 2 else "count x M x N"))
        if c.readonly:
            raise ValueError("out: the array is read-only")
        for x in (a, b, p.offs, p.err):
            if x is not None and _overlaps(c, x):
                raise ValueError("out overlaps %s in memory: the kernel would read what it overwrites" % x.name)
        if p.err is not None and p.offs is not None and _overlaps(p.err, p.offs):
            raise ValueError("group_error overlaps offs in memory: the kernel would read what it overwrites")
        st = c.storage("row")
        if st is None:
            raise ValueError("out: strides (%d, %d) are neither row- nor column-contiguous (one dimension must "
                             "have stride 1 and the other must not overlap it)" % (c.srow, c.scol))
        if st[0] != "row" and p.kind in (GROUP_ROWS, GROUP_K, GROUP_MASKED):
            raise ValueError("out: strides (%d, %d): %s writes row-major matrices (out's rows must be contiguous)"
                             % (c.srow, c.scol, _KIND_NAMES[p.kind]))
        p.layout, p.ldc = (_lib.ROW_MAJOR if st[0] == "row" else _lib.COL_MAJOR), st[1]
        p.c_dtype = c.dtype
        stride_c = c.sbatch
    else:
        if not query and p.beta != 0.0:
            raise ValueError("beta is %g but out is None: beta scales an existing out, so pass out" % p.beta)
        if not query and not (a.torch or b.torch):
            raise TypeError("out: required when neither A nor B is a torch tensor (tilekit allocates the result "
                            "only through torch)")
        p.layout, p.ldc = _lib.ROW_MAJOR, max(p.n, 1)
        p.c_dtype = want or "fp32"
        stride_c = min(p.m * p.n, 2 ** 63 - 1)   # saturated as the extension's int64 (refused then)
    layout = "row" if p.layout == _lib.ROW_MAJOR else "col"
    p.op_a, p.lda = _operand(oa, layout, "A" + (".T" if trans_a else ""))
    p.op_b, p.ldb = _operand(ob, layout, "B" + (".T" if trans_b else ""))
    # the strides a kind uses (tilekit.h); the others are 0
    p.stride_a = a.sbatch if p.kind in (GROUP_BATCHED, GROUP_MASKED) else 0
    p.stride_b = b.sbatch if p.kind in (GROUP_BATCHED, GROUP_ROWS, GROUP_MASKED) else 0
    p.stride_c = stride_c if p.kind in (GROUP_BATCHED, GROUP_K, GROUP_MASKED) else 0
    p.a, p.b, p.c = a, b, c

    operands = [x for x in (c, a, b, p.offs, p.err) if x is not None]   # the CAI streams: out's first
    devices = {x.device for x in operands if x.torch}
    if len(devices) > 1:
        raise TypeError("%s must be on one CUDA device, got %s"
                        % ("A, B and out" if form != "grouped" else
                           "A, B, out, offs and group_error" if p.err is not None else "A, B, out and offs",
                           ", ".join("cuda:%d" % d for d in sorted(devices))))
    p.device = devices.pop() if devices else None

    p.stream, p.joins = _streams(stream, operands, p.device)
    return p


def _streams(stream, operands, device):
    """(the stream the call runs on, the other CAI streams it joins): stream=;
    else, with a torch operand, torch's current stream on the operands'
    device; else the first CAI 'stream' entry of the operands, in their order
    (out's first); else the legacy default stream (None). Every other stream
    a CAI operand names is joined with the call (_join), each once."""
    if stream is not None and not isinstance(stream, int):
        if hasattr(stream, "cuda_stream"):
            value = stream.cuda_stream
            if not isinstance(value, int):
                raise TypeError("stream: the cuda_stream of %r is %r, not an integer" % (stream, value))
            stream = value
        else:
            raise TypeError("stream: %r is neither a cudaStream_t value (int) nor a torch.cuda.Stream" % (stream,))
    cai_streams = [x.stream for x in operands if x.stream is not None]
    if stream is None:
        if any(x.torch for x in operands):
            stream = _torch().cuda.current_stream(device).cuda_stream
        elif cai_streams:
            stream = cai_streams[0]
    joins = []
    for s in cai_streams:
        if not _same_stream(s, stream) and not any(_same_stream(s, j) for j in joins):
            joins.append(s)
    return stream, tuple(joins)


def _device_context(p):
    """Makes the tensors' device current for the call (launches go to the
    current device); skipped, as it costs microseconds, when it already is."""
    if p.device is None or p.device == _torch().cuda.current_device():
        return contextlib.nullcontext()
    return _torch().cuda.device(p.device)


def _alloc_out(p, stream_arg):
    """out for a call with out=None (p has a torch operand: plan's rule):
    torch.empty on the operands' device, allocated on the stream the call
    runs on. torch's caching allocator keeps a pool per stream and gives a
    freed block to the next allocation on the same stream at once, ordered by
    that stream alone: a block taken from another stream's pool may still be
    in use by that stream's pending kernels, and, freed by the caller, be
    given out again on that stream while this call still writes it. So where
    the call runs on a stream other than torch's current one (stream=), that
    stream is made current around torch.empty: the caller's torch.cuda.Stream
    if it is the operands' device's, torch's default stream for the legacy
    default stream (torch's is the NULL stream, and torch takes an external
    handle of 1 for one of its pool streams), else torch.cuda.ExternalStream
    of it on that device."""
    t = _torch()
    x = p.a if p.a.torch else p.b
    dev = x.obj.device
    prev = None
    if stream_arg is not None:
        cur = t.cuda.current_stream(x.device)
        if not _same_stream(cur.cuda_stream, p.stream):
            if isinstance(stream_arg, t.cuda.Stream) and stream_arg.device_index == x.device:
                s = stream_arg
            elif _legacy(p.stream):
                s = t.cuda.default_stream(x.device)
            else:
                s = t.cuda.ExternalStream(p.stream, device=dev)
            t.cuda.set_stream(s)
            prev = cur
    try:
        return t.empty(p.out_shape, dtype=t.float32 if p.c_dtype == "fp32" else t.bfloat16, device=dev)
    finally:
        if prev is not None:
            t.cuda.set_stream(prev)


def _join(run, others, after):
    """Orders the call with the other streams its CAI operands name, which a
    consumer must (CAI v3: the 'stream' entry is the stream the data is ready
    on). Before the call `run` waits for the work enqueued on each of them so
    far; after it, each of them waits for the call, so that what their
    producers enqueue next (reading out, reusing an input's memory) comes
    after it. Each wait is an event recorded on one stream and waited for by
    the other. None while any of these streams is being captured into a CUDA
    graph (an event recorded outside a capture cannot be waited for inside
    it; the graph's launches are ordered where it is launched)."""
    status = ctypes.c_int(0)
    capturing = _lib.cudart("cudaStreamIsCapturing")
    for s in (run,) + tuple(others):
        if capturing(s, ctypes.byref(status)) or status.value:
            return
    for o in others:
        src, dst = (run, o) if after else (o, run)
        ev = ctypes.c_void_p()
        what = "cudaEventCreateWithFlags"
        e = _lib.cudart(what)(ctypes.byref(ev), 2)   # cudaEventDisableTiming
        if not e:
            what = "cudaEventRecord"
            e = _lib.cudart(what)(ev, src)
            if not e:
                what = "cudaStreamWaitEvent"
                e = _lib.cudart(what)(dst, ev, 0)
            _lib.cudart("cudaEventDestroy")(ev)   # released once the wait no longer needs it
        if e:
            raise _lib.error_for(_lib.CUDA, "%s failed with CUDA error %d (ordering stream 0x%x after stream 0x%x)"
                                 % (what, e, dst or 0, src or 0), "tilekit.gemm")


def _handle(p):
    return _lib.handle(p.device if p.device is not None else _lib.current_device())


def _call(p, out, stream_arg, launch, where):
    """Runs a checked call: out allocated when None (_alloc_out), the
    streams of CAI operands joined around launch(lib, handle, stream),
    whose status raises as `where`'s; returns out."""
    lib = _lib.load_ctypes()
    run = p.stream or None   # a cudaStream_t; None: the legacy default stream
    with _device_context(p):
        if out is None:
            out = _alloc_out(p, stream_arg)
            p.c = describe(out, "out", (len(p.out_shape),))
        h = _handle(p)
        if p.joins:
            _join(run, p.joins, False)
        _lib.check(launch(lib, h, run), h, where)
        if p.joins:
            _join(run, p.joins, True)
    return out


def gemm(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None, *,
         stream=None):
    """out = alpha * op(A) @ op(B) + beta * out, with op(X) = X.T if trans_x.

    A, B: bf16, 2-D, torch CUDA tensors or __cuda_array_interface__ objects.
    out: M x N, fp32 or bf16; allocated when None (torch.empty, row-major, on
    the stream the call runs on), which needs beta == 0 and a torch input.
    out_dtype: torch.float32 (default) or torch.bfloat16, or "fp32"/"bf16".
    kernel: a registry name (see kernels()) or None for auto-dispatch.
    stream: a cudaStream_t value or torch stream; default: torch's current
    stream on the operands' device when any of them is a torch tensor, else
    the CAI 'stream' entry (out's, then A's, then B's), else the legacy
    default stream. Every other stream a CAI 'stream' entry names is joined
    with the call: the call waits for the work enqueued on it before, and
    work enqueued on it afterwards waits for the call. Returns out.
    Asynchronous with respect to the host."""
    p = plan(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, kernel, stream)
    return _call(p, out, stream, lambda lib, h, run: lib.tk_gemm(
        h, p.layout, p.op_a, p.op_b, p.m, p.n, p.k, p.alpha, p.a.ptr or None, p.lda, p.b.ptr or None, p.ldb, p.beta,
        p.c.ptr or None, _C_TYPES[p.c_dtype], p.ldc, p.kernel, run), "tilekit.gemm")


def gemm_batched(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None, *,
                 stream=None):
    """out[i] = alpha * op(A[i]) @ op(B[i]) + beta * out[i] for each of the
    count matrices of 3-D stacks (tk_gemm_batched, TK_GROUP_BATCHED).

    A: count x M x K (trans_a: count x K x M), B: count x K x N (trans_b:
    count x N x K), bf16; out: count x M x N, fp32 or bf16, allocated when
    None as gemm allocates it. Each stack's matrices are row- or
    column-contiguous (transposed views are op T, never copied) at any batch
    stride: 0 makes one matrix of A or B serve every product (an expanded
    tensor); out's matrices may not overlap. Arguments, streams and errors
    as for gemm. Returns out."""
    p = plan(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, kernel, stream, form="batched")
    return _call(p, out, stream, lambda lib, h, run: lib.tk_gemm_batched(
        h, ctypes.byref(_problem(p)), p.count, p.stride_a, p.stride_b, p.stride_c, p.kernel, run),
        "tilekit.gemm_batched")


def gemm_grouped(A, B, offs, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None,
                 kernel=None, *, stream=None, group_error=None):
    """Many products of one call, split by int32 offsets in device memory
    that are never read on the host (tk_gemm_grouped), the kind following
    from the ranks of A and B (torch._grouped_mm's rule):

    2-D A, 3-D B (TK_GROUP_ROWS): A is M x K, B G x K x N, out M x N; group
      g is rows offs[g-1] .. offs[g]-1 of A and out, times B[g].
    2-D A, 2-D B (TK_GROUP_K): A is M x K, B K x N, out G x M x N; out[g]
      reduces k = offs[g-1] .. offs[g]-1 (an empty group: beta * out[g]).
    3-D A, 3-D B (TK_GROUP_MASKED): as gemm_batched, product g on its first
      offs[g] rows (row counts, not cumulative).

    offs: 1-D, contiguous, int32, one per group (G). Rows of out past
    offs[G-1] (ROWS) are not written. group_error: None, or a 1-D int32
    array whose first element is set to 1 on the device when offsets are
    bad (never cleared). The operands as for gemm_batched (shapes after
    trans_a/trans_b); out's matrices are row-major. Returns out."""
    p = plan(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, kernel, stream, offs=offs, group_error=group_error,
             form="grouped")
    return _call(p, out, stream, lambda lib, h, run: lib.tk_gemm_grouped(
        h, ctypes.byref(_problem(p)), p.kind, p.count, p.offs_ptr, p.stride_a, p.stride_b, p.stride_c, p.error_ptr,
        p.kernel, run), "tilekit.gemm_grouped")


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


# ---- issue 37: workspaces, split-K, candidates, plans, errors, build info ----

def _text(b):
    return b.decode("utf-8", "replace") if b else ""


def build_info():
    """tk_get_build_info as a dict."""
    lib = _lib.load_ctypes()
    b = _lib.BuildInfo()
    b.size = ctypes.sizeof(b)
    _lib.check(lib.tk_get_build_info(ctypes.byref(b)), None, "tilekit.build_info")
    return {"version": b.version, "version_string": _text(b.version_string), "archs": _text(b.archs),
            "cuda_runtime_built": b.cuda_runtime_built, "cuda_runtime_loaded": b.cuda_runtime_loaded,
            "cuda_driver": b.cuda_driver, "cublas_built": b.cublas_built, "cublas_loaded": b.cublas_loaded}


@contextlib.contextmanager
def _on_device(device):
    """Makes `device` current around a call that checks it (the handle's),
    when a device is known and another is current."""
    prev = -1
    if device >= 0:
        cur = _lib.current_device()
        if cur >= 0 and cur != device:
            e = _lib.cudart("cudaSetDevice")(device)
            if e:
                raise _lib.error_for(_lib.CUDA, "cudaSetDevice(%d) failed with CUDA error %d" % (device, e),
                                     "tilekit")
            prev = cur
    try:
        yield
    finally:
        if prev >= 0:
            _lib.cudart("cudaSetDevice")(prev)


def handle_info(device):
    """tk_get_handle_info of the thread's handle for `device`, as a dict."""
    lib = _lib.load_ctypes()
    h = _lib.handle(device)
    i = _lib.HandleInfo()
    i.size = ctypes.sizeof(i)
    _lib.check(lib.tk_get_handle_info(h, ctypes.byref(i)), h, "tilekit.handle_info")
    return {"device": i.device, "sm": i.sm, "workspace": i.workspace or None, "workspace_bytes": i.workspace_bytes,
            "workspace_limit": None if i.workspace_limit == _lib.WORKSPACE_UNLIMITED else i.workspace_limit,
            "workspace_held": i.workspace_held, "split_k": i.split_k == _lib.SPLIT_K_AUTO}


def set_workspace(device, ptr, nbytes):
    """tk_set_workspace on the thread's handle for `device` (ptr None: the handle's own)."""
    lib = _lib.load_ctypes()
    h = _lib.handle(device)
    _lib.check(lib.tk_set_workspace(h, ptr or None, nbytes), h, "tilekit.set_workspace")


def set_workspace_limit(device, nbytes):
    """tk_set_workspace_limit (None: no cap)."""
    lib = _lib.load_ctypes()
    h = _lib.handle(device)
    _lib.check(lib.tk_set_workspace_limit(h, _lib.WORKSPACE_UNLIMITED if nbytes is None else nbytes), h,
               "tilekit.set_workspace_limit")


def set_split_k(device, allowed):
    """tk_set_split_k: TK_SPLIT_K_AUTO when allowed, else TK_SPLIT_K_NEVER."""
    lib = _lib.load_ctypes()
    h = _lib.handle(device)
    _lib.check(lib.tk_set_split_k(h, _lib.SPLIT_K_AUTO if allowed else _lib.SPLIT_K_NEVER), h,
               "tilekit.set_split_k")


def release_workspaces(device, stream):
    """tk_workspace_release on `stream` (None: the legacy default stream), with the handle's device current."""
    lib = _lib.load_ctypes()
    h = _lib.handle(device)
    with _on_device(device):
        _lib.check(lib.tk_workspace_release(h, stream or None), h, "tilekit.release_workspaces")


def last_cuda_error(device):
    """tk_last_cuda_error of the thread's handle for `device`, or with None the thread's last failure."""
    lib = _lib.load_ctypes()
    h = _lib.handle(device) if device is not None else None
    e = _lib.CudaErrorInfo()
    e.size = ctypes.sizeof(e)
    _lib.check(lib.tk_last_cuda_error(h, ctypes.byref(e)), h, "tilekit.last_cuda_error")
    return {"cuda_error": e.cuda_error, "cuda_name": _text(e.cuda_name), "cublas_status": e.cublas_status,
            "cublas_name": _text(e.cublas_name)}


def candidates(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None):
    """tk_candidates for this gemm: a list of dicts (name, rank, status, est_us, workspace_bytes, copies)."""
    p = plan(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, None, None, query=True)
    lib = _lib.load_ctypes()
    with _device_context(p):
        h = _handle(p)
        prob = _problem(p)
        cap = lib.tk_kernel_count() + 1   # every kernel, and auto-dispatch's copy route
        arr = (_lib.Candidate * cap)()
        arr[0].size = ctypes.sizeof(_lib.Candidate)
        n = ctypes.c_int(0)
        _lib.check(lib.tk_candidates(h, ctypes.byref(prob), arr, cap, ctypes.byref(n)), h, "tilekit.candidates")
        return [{"name": _text(c.name), "rank": c.rank, "status": c.status, "est_us": c.est_us,
                 "workspace_bytes": c.workspace_bytes, "copies": c.copies} for c in arr[:min(n.value, cap)]]


def workspace_size(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None):
    """tk_workspace_size for this gemm, in bytes."""
    p = plan(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, kernel, None, query=True)
    lib = _lib.load_ctypes()
    with _device_context(p):
        h = _handle(p)
        prob = _problem(p)
        n = ctypes.c_size_t(0)
        _lib.check(lib.tk_workspace_size(h, ctypes.byref(prob), p.kernel, ctypes.byref(n)), h,
                   "tilekit.workspace_size")
        return n.value


_LAYOUTS = {_lib.ROW_MAJOR: "row", _lib.COL_MAJOR: "column"}


def _shape_text(key):
    m, n, k, layout, op_a, op_b, lda, ldb, ldc, c_dtype = key
    return "%d x %d x %d, %s-major, op_a %s, op_b %s, lda %d, ldb %d, ldc %d, %s C" % (
        m, n, k, _LAYOUTS[layout], "NT"[op_a], "NT"[op_b], lda, ldb, ldc, c_dtype)


class GemmPlan:
    """A plan (tk_plan) for one gemm shape: run(A, B, out, stream=None), or
    call it, with operands of the plan's shape, strides and types; .kernel
    is the kernel it runs ("" for none); close() frees it (also when it is
    collected). It runs on the handle of the thread that made it, in that
    thread only."""
    __slots__ = ("_plan", "_h", "_owner", "_device", "_key", "_alpha", "_beta", "_ta", "_tb", "kernel")

    def __init__(self, plan_ptr, h, device, p, trans_a, trans_b):
        self._plan, self._h, self._owner, self._device = plan_ptr, h, threading.get_ident(), device
        self._key = (p.m, p.n, p.k, p.layout, p.op_a, p.op_b, p.lda, p.ldb, p.ldc, p.c_dtype)
        self._alpha, self._beta, self._ta, self._tb = p.alpha, p.beta, bool(trans_a), bool(trans_b)
        self.kernel = _text(_lib.load_ctypes().tk_plan_kernel(plan_ptr))

    def run(self, A, B, out, stream=None):
        """out = alpha * op(A) @ op(B) + beta * out with the plan's shape,
        on `stream` (as gemm chooses it); returns out."""
        if self._plan is None:
            raise ValueError("plan: it was closed")
        if threading.get_ident() != self._owner:
            raise RuntimeError("plan: it was made in another thread, and runs on that thread's handle only")
        if out is None:
            raise TypeError("out: required (a plan runs into an out of its shape)")
        p = plan(A, B, out, self._alpha, self._beta, self._ta, self._tb, None, None, stream)
        key = (p.m, p.n, p.k, p.layout, p.op_a, p.op_b, p.lda, p.ldb, p.ldc, p.c_dtype)
        if key != self._key:
            raise ValueError("plan: A, B and out make %s; the plan is for %s" % (_shape_text(key),
                                                                                _shape_text(self._key)))
        if p.device is not None and self._device >= 0 and p.device != self._device:
            raise ValueError("plan: A, B and out are on cuda:%d, the plan's handle on cuda:%d"
                             % (p.device, self._device))
        lib = _lib.load_ctypes()
        run = p.stream or None
        with _device_context(p):
            if p.joins:
                _join(run, p.joins, False)
            st = lib.tk_plan_run(self._h, self._plan, p.a.ptr or None, p.b.ptr or None, p.c.ptr or None, run)
            _lib.check(st, self._h, "tilekit.Plan.run")
            if p.joins:
                _join(run, p.joins, True)
        return out

    __call__ = run

    def close(self):
        """Frees the plan (host memory); run() raises afterwards."""
        if self._plan is not None:
            _lib.load_ctypes().tk_plan_destroy(self._plan)
            self._plan = None

    def __del__(self):
        try:
            self.close()
        except Exception:   # interpreter shutdown: nothing to report to
            pass

    def __repr__(self):
        return "<tilekit plan %s, kernel %r%s>" % (_shape_text(self._key), self.kernel,
                                                  "" if self._plan is not None else ", closed")


def plan_create(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None):
    """tk_plan_create for this gemm (out may be None: row-major of out_dtype), as a GemmPlan."""
    p = plan(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, kernel, None, query=True)
    lib = _lib.load_ctypes()
    with _device_context(p):
        device = p.device if p.device is not None else _lib.current_device()
        h = _lib.handle(device)
        prob = _problem(p)
        ptr = ctypes.c_void_p()
        _lib.check(lib.tk_plan_create(h, ctypes.byref(prob), p.kernel, ctypes.byref(ptr)), h, "tilekit.plan")
    return GemmPlan(ptr.value, h, device, p, trans_a, trans_b)


def gemm_run(device, stream, kernel, fields):
    """tk_gemm_run of a tk_gemm_desc (size = sizeof, TK_GEMM_DESC_INIT's)
    holding `fields`: the problem's 15 values, then the epilogue's 11, then
    optionally the FP8 fields' 7, then optionally version 5's 2 and the
    group fields' 7, in the header's order but for those last 7
    (tilekit/_epilogue.py and _fp8.py check them; the extension's gemm_run
    takes the same), on the thread's handle for `device` (-1: the current
    one). kernel: bytes or None; stream: a cudaStream_t or None."""
    lib = _lib.load_ctypes()
    desc = _lib.GemmDesc(size=ctypes.sizeof(_lib.GemmDesc))
    desc.problem = _lib.GemmProblem(*fields[:15])
    names = [name for name, _ in _lib.GemmDesc._fields_]
    # the epilogue's 11 fields (version 3), the FP8 fields' 7 (version 4), the scales' strides (version 5),
    # then the group fields (version 2)
    for name, value in zip(names[names.index("epilogue"):] + names[names.index("group_kind"):names.index("epilogue")],
                           fields[15:]):
        setattr(desc, name, value)
    h = _lib.handle(device if device >= 0 else _lib.current_device())
    where = ("tilekit.scaled_grouped_mm" if len(fields) > 33 else "tilekit.scaled_mm" if len(fields) > 26
             else "tilekit.gemm_epilogue")
    _lib.check(lib.tk_gemm_run(h, ctypes.byref(desc), kernel, stream), h, where)


def quantize_run(device, stream, fields):
    """tk_quantize_fp8 of a tk_quantize_desc (TK_QUANTIZE_DESC_INIT's size)
    holding `fields` (rows, cols, x, ldx, format, mode, q, ldq, scale,
    ld_scale: tilekit/_fp8.py checks them; the extension's quantize_run
    takes the same), on the thread's handle for `device` (-1: the current
    one). stream: a cudaStream_t or None."""
    lib = _lib.load_ctypes()
    desc = _lib.QuantizeDesc(ctypes.sizeof(_lib.QuantizeDesc), *fields)
    h = _lib.handle(device if device >= 0 else _lib.current_device())
    _lib.check(lib.tk_quantize_fp8(h, ctypes.byref(desc), stream), h, "tilekit.quantize_fp8")
