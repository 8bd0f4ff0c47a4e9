"""Issue 40 in Python, the library side: the checks and descriptor fields of
tilekit.scaled_mm (tk_gemm_run with tk_gemm_desc's version-4 fields) and
tilekit.quantize_fp8 (tk_quantize_fp8), whose torch ops are in
_torch_fp8.py. Pure Python that imports no torch: it reads tensors through
shape, stride(), dtype (by its name), data_ptr() and device, so the CPU
tests run it on the fake torch against the fake library.

The product is the library's row-major problem C (M x N) = op(A) op(B):
A = a, M x K with its rows contiguous (lda = a.stride()[0], op N); B = b,
K x N column-major as torch._scaled_mm takes it (b.t() contiguous: stored
N x K, op T, ldb = b.stride()[1]) or, which torch does not take, row-major
(op N, ldb = b.stride()[0]); C the M x N output, row-major. The scales, fp32,
by their shapes (the first that fits):
  tensor: scale_a and scale_b one value each (shape (), (1,) or (1, 1));
  row:    scale_a (M, 1), scale_b (1, N) (torch._scaled_mm's row-wise);
  block:  tilekit's (DeepSeek-V3's), K a multiple of 128: scale_a
          (M, K/128), one per row and 128 k, and scale_b (ceil(N/128),
          K/128), one per 128 x 128 block of b, both stored with their
          first dimension contiguous (stride(0) == 1: quantize_fp8's
          "1x128" and "128x128" scales are), ld_scale_a = scale_a.stride()[1],
          ld_scale_b = scale_b.stride()[1].
Where two readings fit (M, N or K/128 of 1) they give the same product.
"""
from . import _lib
from . import _fallback

# torch dtype names (str(dtype)) -> tk_fp8_format; the quantizer's modes -> tk_quant_mode
FORMATS = {"torch.float8_e4m3fn": 1, "torch.float8_e5m2": 2}
MODES = {"tensor": 1, "row": 2, "1x128": 3, "128x128": 4}
SCALE_TENSOR, SCALE_ROW, SCALE_BLOCK = 1, 2, 3   # tk_scale_mode
_OUT_TYPES = {"torch.float32": _lib.F32, "torch.bfloat16": _lib.BF16}


def fp8_format(dtype, what):
    """tk_fp8_format of a torch FP8 dtype; TypeError for another."""
    f = FORMATS.get(str(dtype))
    if f is None:
        raise TypeError("%s: dtype %s is not an FP8 type tilekit takes (expected torch.float8_e4m3fn or "
                        "torch.float8_e5m2)" % (what, dtype))
    return f


def mode_of(mode):
    """tk_quant_mode of a quantize_fp8 mode name."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError("mode: %r is not one of %s" % (mode, ", ".join(repr(m) for m in MODES)))
    return MODES[mode]


def _blocks(n):
    return -(-n // 128)


def scale_layout(rows, cols, mode):
    """(shape, strides) of quantize_fp8's scales for a rows x cols input:
    "tensor" () (one value), "row" (rows, 1), "1x128" (rows, ceil(cols/128))
    and "128x128" (ceil(rows/128), ceil(cols/128)), the block modes stored
    with their first dimension contiguous (tk_quantize_fp8's layouts)."""
    mode_of(mode)
    if mode == "tensor":
        return (), ()
    if mode == "row":
        return (rows, 1), (1, 1)
    first = rows if mode == "1x128" else _blocks(rows)
    return (first, _blocks(cols)), (1, max(first, 1))


def _ld_rows(x, what, why):
    """The leading dimension of a 2-D tensor (or of the matrices of a 3-D
    one) whose rows are contiguous."""
    r, c = x.shape[-2:]
    if c > 1 and x.stride()[-1] != 1:
        raise ValueError("%s: strides %s: %s (its rows must be contiguous)" % (what, tuple(x.stride()), why))
    return x.stride()[-2] if r > 1 else max(c, 1)


def _dim2(x, what):
    if x.dim() != 2:
        raise ValueError("%s: expected a 2-D matrix, got shape %s" % (what, tuple(x.shape)))


def check_quantize(x, dtype, mode):
    """The argument rules of quantize_fp8 (real and fake tensors): x a 2-D
    bf16 matrix, dtype an FP8 type, mode a name. Returns the format."""
    _dim2(x, "x")
    if str(x.dtype) != "torch.bfloat16":
        raise TypeError("x: dtype %s is not supported: tilekit quantizes bfloat16 (convert with "
                        ".to(torch.bfloat16))" % (x.dtype,))
    mode_of(mode)
    return fp8_format(dtype, "dtype")


def quantize_fields(x, q, scale, mode):
    """tk_quantize_desc's fields (rows, cols, x, ldx, format, mode, q, ldq,
    scale, ld_scale) for x (rows x cols bf16, rows contiguous), q (its codes,
    rows contiguous) and scale (scale_layout's shape, any strides the layout
    allows: ld_scale is the block modes' stride(1))."""
    fmt = check_quantize(x, q.dtype, mode)
    rows, cols = x.shape
    if tuple(q.shape) != (rows, cols):
        raise ValueError("q: shape %s, expected %s (x's)" % (tuple(q.shape), (rows, cols)))
    shape, _ = scale_layout(rows, cols, mode)
    if tuple(scale.shape) != shape or str(scale.dtype) != "torch.float32":
        raise ValueError("scale: %s of shape %s, expected torch.float32 of shape %s for mode %r"
                         % (scale.dtype, tuple(scale.shape), shape, mode))
    ld_scale = 0
    if mode in ("1x128", "128x128") and shape[1] > 1:
        if shape[0] > 1 and scale.stride()[0] != 1:
            raise ValueError("scale: strides %s: the %s scales are stored with their first dimension contiguous"
                             % (tuple(scale.stride()), mode))
        ld_scale = scale.stride()[1]
    elif mode == "row" and rows > 1 and scale.stride()[0] != 1:
        raise ValueError("scale: strides %s: the row scales must be contiguous" % (tuple(scale.stride()),))
    ldx = _ld_rows(x, "x", "quantize_fp8 reads x row by row")
    ldq = _ld_rows(q, "q", "quantize_fp8 writes q row by row")
    return (rows, cols, x.data_ptr(), ldx, fmt, MODES[mode], q.data_ptr(), ldq, scale.data_ptr(), ld_scale)


def _shape(t):
    return tuple(t.shape)


def scale_mode(m, n, k, scale_a, scale_b):
    """(tk_scale_mode, ld_scale_a, ld_scale_b) read from the scales' shapes
    and strides (the module's docstring has the rules); ValueError naming
    what was expected when no reading fits."""
    sa, sb = _shape(scale_a), _shape(scale_b)
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if str(s.dtype) != "torch.float32":
            raise TypeError("%s: dtype %s is not supported (expected torch.float32)" % (name, s.dtype))
    numel = [1, 1]
    for i, shape in enumerate((sa, sb)):
        for d in shape:
            numel[i] *= d
    if numel == [1, 1] and len(sa) <= 2 and len(sb) <= 2:
        return SCALE_TENSOR, 0, 0
    if sa == (m, 1) and sb == (1, n):
        if m > 1 and scale_a.stride()[0] != 1:
            raise ValueError("scale_a: strides %s: the M row scales must be contiguous" % (tuple(scale_a.stride()),))
        if n > 1 and scale_b.stride()[1] != 1:
            raise ValueError("scale_b: strides %s: the N column scales must be contiguous"
                             % (tuple(scale_b.stride()),))
        return SCALE_ROW, 0, 0
    kb, nb = _blocks(k), _blocks(n)
    if k % 128 == 0 and sa == (m, kb) and sb == (nb, kb):
        lds = []
        for name, s, first in (("scale_a", scale_a, m), ("scale_b", scale_b, nb)):
            if first > 1 and kb > 1 and s.stride()[0] != 1:
                raise ValueError("%s: strides %s: block scales are stored with their first dimension contiguous "
                                 "(as quantize_fp8's '1x128' and '128x128' scales are)" % (name, tuple(s.stride())))
            lds.append(s.stride()[1] if kb > 1 else max(first, 1))
        return SCALE_BLOCK, lds[0], lds[1]
    raise ValueError("scale_a, scale_b: shapes %s and %s fit no scale mode for M=%d, N=%d, K=%d (expected one value "
                     "each; (M, 1) and (1, N) row-wise; or with K a multiple of 128, (M, K/128) and (ceil(N/128), "
                     "K/128) block-wise)" % (sa, sb, m, n, k))


def check_scaled_mm(a, b, scale_a, scale_b, out_dtype):
    """The argument rules of scaled_mm (real and fake tensors): (m, n, k,
    tk_scale_mode, ld_scale_a, ld_scale_b, c_type)."""
    _dim2(a, "a")
    _dim2(b, "b")
    fp8_format(a.dtype, "a")
    fp8_format(b.dtype, "b")
    if a.shape[1] != b.shape[0]:
        raise ValueError("shape mismatch: a is %d x %d but b is %d x %d" % (a.shape[0], a.shape[1], b.shape[0],
                                                                            b.shape[1]))
    c_type = _OUT_TYPES.get(str(out_dtype))
    if c_type is None:
        raise TypeError("out_dtype: %s is not supported (expected torch.bfloat16 or torch.float32)" % (out_dtype,))
    m, k = a.shape
    n = b.shape[1]
    mode, lda_s, ldb_s = scale_mode(m, n, k, scale_a, scale_b)
    return m, n, k, mode, lda_s, ldb_s, c_type


def scaled_mm_fields(a, b, scale_a, scale_b, out):
    """tk_gemm_desc's 33 fields (the problem's 15, the epilogue's 11, all 0,
    the FP8 fields' 7) of out = (scale_a a)(scale_b b), out M x N with its
    rows contiguous (fp32 or bf16)."""
    m, n, k, mode, ld_sa, ld_sb, c_type = check_scaled_mm(a, b, scale_a, scale_b, out.dtype)
    if _shape(out) != (m, n):
        raise ValueError("out: shape %s, expected %s" % (_shape(out), (m, n)))
    return _fp8_fields(a, b, scale_a, scale_b, out, m, n, k, c_type, mode, ld_sa, ld_sb)


def _fp8_fields(a, b, scale_a, scale_b, out, m, n, k, c_type, mode, ld_sa, ld_sb):
    """The 33 fields of one product of the (last two dimensions of the)
    operands: a's matrices row-major, b's column-major (op T) or row-major."""
    lda = _ld_rows(a, "a", "a is read row by row (row-major M x K, torch._scaled_mm's convention)")
    sk, sn = b.stride()[-2:]
    if k <= 1 or sk == 1:   # column-major K x N: stored N x K, op T
        op_b, ldb = _lib.OP_T, (sn if n > 1 else max(k, 1))
    elif n <= 1 or sn == 1:
        op_b, ldb = _lib.OP_N, sk
    else:
        raise ValueError("b: strides %s: its K x N matrices are neither column-major (torch's b, b.transpose(-2, -1) "
                         "contiguous) nor row-major" % (tuple(b.stride()),))
    ldc = _ld_rows(out, "out", "the output is written row by row")
    return ((_lib.ROW_MAJOR, _lib.OP_N, op_b, m, n, k, 1.0, 0.0, a.data_ptr(), lda, b.data_ptr(), ldb,
             out.data_ptr(), ldc, c_type) + (0,) * 11 +
            (fp8_format(a.dtype, "a"), fp8_format(b.dtype, "b"), mode, scale_a.data_ptr(), scale_b.data_ptr(), ld_sa,
             ld_sb))


# ---- many FP8 products (issue 40 for mixtures of experts: tk_gemm_desc version 5) ----
GROUP_BATCHED, GROUP_ROWS = 1, 2   # tk_group_kind


def grouped_form(a, b, offs, out_dtype):
    """The argument rules of scaled_grouped_mm but the scales' (real and
    fake tensors): (tk_group_kind, count, m, n, k, the output's shape,
    c_type). 2-D a (M x K) and 3-D b (G x K x N) with offs: TK_GROUP_ROWS;
    3-D a (G x M x K) and b, no offs: TK_GROUP_BATCHED."""
    for name, x in (("a", a), ("b", b)):
        fp8_format(x.dtype, name)
        if x.dim() not in (2, 3):
            raise ValueError("%s: expected a 2-D or 3-D tensor, got shape %s" % (name, _shape(x)))
    if b.dim() == 2:
        raise ValueError("b: 2-D (shape %s): %s are not supported with FP8 operands (expected b of shape (G, K, N))"
                         % (_shape(b), "groups of K (2-D a and b, the weight gradient)" if a.dim() == 2
                            else "groups of N (3-D a, 2-D b)"))
    if a.shape[-1] != b.shape[1]:
        raise ValueError("shape mismatch: a is %s and b %s (a's last dimension is K, b's (G, K, N))"
                         % (_shape(a), _shape(b)))
    c_type = _OUT_TYPES.get(str(out_dtype))
    if c_type is None:
        raise TypeError("out_dtype: %s is not supported (expected torch.bfloat16 or torch.float32)" % (out_dtype,))
    g, n = b.shape[0], b.shape[2]
    if a.dim() == 3:
        if offs is not None:
            raise ValueError("offs: given for 3-D a and 3-D b: a batched product (G x M x K times G x K x N) takes "
                             "none")
        if a.shape[0] != g:
            raise ValueError("shape mismatch: a holds %d matrices but b %d" % (a.shape[0], g))
        m, k = a.shape[1:]
        return GROUP_BATCHED, g, m, n, k, (g, m, n), c_type
    if offs is None:
        raise ValueError("offs: required for 2-D a and 3-D b (int32 cumulative ends of the groups' rows, one per "
                         "matrix of b)")
    if str(offs.dtype) != "torch.int32":
        raise TypeError("offs: dtype %s is not supported (expected torch.int32: cumulative ends, e.g. "
                        "torch.cumsum(counts, 0, dtype=torch.int32))" % (offs.dtype,))
    if offs.dim() != 1 or offs.shape[0] != g:
        raise ValueError("offs: shape %s, expected (%d,) (one end per matrix of b)" % (_shape(offs), g))
    if g > 1 and offs.stride()[0] != 1:
        raise ValueError("offs: strides %s: the offsets must be contiguous" % (tuple(offs.stride()),))
    m, k = a.shape
    return GROUP_ROWS, g, m, n, k, (m, n), c_type


def check_offs(values, m):
    """offs' values, read on the host, against a's M rows: ValueError unless
    0 <= offs[0] <= offs[1] <= ... <= M (where the library would skip a
    group on the device, its rows not written)."""
    prev = 0
    for g, v in enumerate(values):
        if v < prev:
            raise ValueError("offs: offs[%d] = %d is below %s (expected cumulative ends: 0 <= offs[0] <= offs[1] "
                             "<= ... <= M = %d)" % (g, v, "offs[%d] = %d" % (g - 1, prev) if g else "0", m))
        prev = v
    if prev > m:
        raise ValueError("offs: the last end, %d, is past a's %d rows (expected offs[-1] <= M)" % (prev, m))


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _first_contiguous(s, what, lines, kb):
    """The stride from one k-block's scales to the next of block scales
    whose dimension of `lines` (next to last but one) is contiguous."""
    if lines > 1 and kb > 1 and s.stride()[-2] != 1:
        raise ValueError("%s: strides %s: block scales are stored with their %s dimension contiguous (stride 1, as "
                         "quantize_fp8's are)" % (what, tuple(s.stride()), "first" if s.dim() == 2 else "second"))
    return s.stride()[-1] if kb > 1 else max(lines, 1)


def _set_stride(s, what, operand, stride, set_size, count):
    """stride_scale_a or _b: the scales' stride(0), one set per product of
    an operand with a batch stride, 0 for one set for all."""
    if count <= 1:
        return 0
    st = s.stride()[0]
    if not stride:
        if st:
            raise ValueError("%s: strides %s: %s is one matrix for all products (stride(0) 0), so its scales must be "
                             "one set for all too (stride(0) 0: an expanded tensor)" % (what, tuple(s.stride()),
                                                                                         operand))
        return 0
    if st < set_size:
        raise ValueError("%s: stride(0) %d is below one product's scales (%d values), so the sets would overlap "
                         "(expected stride(0) >= %d: an expanded %s is copied with .contiguous())"
                         % (what, st, set_size, set_size, what))
    return st


def grouped_strides(kind, count, a, b):
    """(stride_a, stride_b): the operands' batch strides, 0 where one
    matrix serves every product (ROWS' a always; any with one product)."""
    if count <= 1:
        return 0, 0
    return (a.stride()[0] if kind == GROUP_BATCHED else 0), b.stride()[0]


def grouped_scales(kind, count, m, n, k, a, b, scale_a, scale_b):
    """(tk_scale_mode, ld_scale_a, ld_scale_b, stride_scale_a,
    stride_scale_b) of scaled_grouped_mm's scales, fp32, by their shapes
    (G groups; ROWS' scale_a spans all M rows, BATCHED's one set per
    product): tensor: scale_a one value (ROWS) or (G,), scale_b (G,);
    row: scale_a (M,) or (M, 1) (ROWS) or (G, M), scale_b (G, N); block,
    K a multiple of 128: scale_a (M, K/128) (ROWS) or (G, M, K/128),
    scale_b (G, ceil(N/128), K/128), the dimension of M or of N blocks
    contiguous. ValueError naming what was expected when none fits."""
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if str(s.dtype) != "torch.float32":
            raise TypeError("%s: dtype %s is not supported (expected torch.float32)" % (name, s.dtype))
    rows = kind == GROUP_ROWS
    sa, sb = _shape(scale_a), _shape(scale_b)
    kb, nb = _blocks(k), _blocks(n)
    if sb == (count,) and (sa == (count,) if not rows else len(sa) <= 2 and _numel(sa) == 1):
        mode, ld_sa, ld_sb, sets = SCALE_TENSOR, 0, 0, (1, 1)
    elif sb == (count, n) and sa in (((m,), (m, 1)) if rows else ((count, m),)):
        if m > 1 and scale_a.stride()[0 if rows else 1] != 1:
            raise ValueError("scale_a: strides %s: the row scales must be contiguous" % (tuple(scale_a.stride()),))
        if n > 1 and scale_b.stride()[1] != 1:
            raise ValueError("scale_b: strides %s: each group's N column scales must be contiguous"
                             % (tuple(scale_b.stride()),))
        mode, ld_sa, ld_sb, sets = SCALE_ROW, 0, 0, (m, n)
    elif sb == (count, nb, kb) and sa == ((m, kb) if rows else (count, m, kb)):
        if k % 128:
            raise ValueError("scale_a, scale_b: block scales need K a multiple of 128, got K=%d" % k)
        ld_sa = _first_contiguous(scale_a, "scale_a", m, kb)
        ld_sb = _first_contiguous(scale_b, "scale_b", nb, kb)
        mode, sets = SCALE_BLOCK, (ld_sa * kb, ld_sb * kb)
    else:
        a1 = ("one value", "(M,)", "(M, K/128)") if rows else ("(G,)", "(G, M)", "(G, M, K/128)")
        raise ValueError("scale_a, scale_b: shapes %s and %s fit no scale mode for G=%d, M=%d, N=%d, K=%d (expected "
                         "scale_a %s and scale_b (G,) per tensor; %s and (G, N) row-wise; or with K a multiple of "
                         "128, %s and (G, ceil(N/128), K/128) block-wise)" % ((sa, sb, count, m, n, k) + a1))
    stride_a, stride_b = grouped_strides(kind, count, a, b)
    return (mode, ld_sa, ld_sb, 0 if rows else _set_stride(scale_a, "scale_a", "a", stride_a, sets[0], count),
            _set_stride(scale_b, "scale_b", "b", stride_b, sets[1], count))


def scaled_grouped_mm_fields(a, b, scale_a, scale_b, offs, out):
    """tk_gemm_desc's 42 fields for gemm_run (scaled_mm_fields' 33, then
    version 5's stride_scale_a, stride_scale_b, then the group fields'
    group_kind, count, stride_a, stride_b, stride_c, offs, group_error)
    of out = the products of grouped_form's kind, out of its shape with
    its rows contiguous (fp32 or bf16)."""
    kind, count, m, n, k, shape, c_type = grouped_form(a, b, offs, out.dtype)
    if _shape(out) != shape:
        raise ValueError("out: shape %s, expected %s" % (_shape(out), shape))
    mode, ld_sa, ld_sb, ss_a, ss_b = grouped_scales(kind, count, m, n, k, a, b, scale_a, scale_b)
    stride_a, stride_b = grouped_strides(kind, count, a, b)
    stride_c = out.stride()[0] if kind == GROUP_BATCHED and count > 1 else 0
    return (_fp8_fields(a, b, scale_a, scale_b, out, m, n, k, c_type, mode, ld_sa, ld_sb) + (ss_a, ss_b) +
            (kind, count, stride_a, stride_b, stride_c, offs.data_ptr() if offs is not None else 0, 0))


def _backend():
    lib = _lib.load()   # the extension bound, or the ctypes library
    return lib if lib is _lib.EXT else _fallback


def run_gemm(device, stream, fields):
    """tk_gemm_run of scaled_mm_fields' or scaled_grouped_mm_fields' fields
    on `stream` of `device`."""
    _backend().gemm_run(device, stream, None, fields)


def run_quantize(device, stream, fields):
    """tk_quantize_fp8 of quantize_fields' fields on `stream` of `device`."""
    _backend().quantize_run(device, stream, fields)
