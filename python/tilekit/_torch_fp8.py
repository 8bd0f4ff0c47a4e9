"""Issue 40 in PyTorch: tilekit.quantize_fp8, tilekit.scaled_mm and
tilekit.scaled_grouped_mm, as torch.library custom ops
(torch.ops.tilekit.quantize_fp8, torch.ops.tilekit.scaled_mm,
torch.ops.tilekit.scaled_grouped_mm) with fake implementations (shapes, strides,
dtypes), so torch.compile(fullgraph=True) traces them without a graph
break; outside torch.compile the same bodies run directly (the custom op's
dispatch costs ~10 us of host time a call: tilekit.matmul's reason,
docs/NOTES.md session 6). Outputs are allocated by torch on the tensors'
device, the calls run on its current stream, nothing synchronizes the host.
The checks and the library's descriptors are _fp8.py's.

No autograd: FP8 products are forward only here (tilekit.nn.Linear's fp8
option raises when a gradient would be needed).
"""
from typing import Optional, Tuple

from ._lib import need_torch

torch = need_torch("tilekit.quantize_fp8, tilekit.scaled_mm and tilekit.scaled_grouped_mm")

from . import _fp8  # noqa: E402

Tensor = torch.Tensor

# The device types the ops take. The CPU tests add "cpu", with the
# library's two calls (_fp8.run_quantize, _fp8.run_gemm) replaced by a
# double that reads and writes the memory their fields point at
# (tests/python/test_torch_fp8_cpu.py).
DEVICES = ("cuda",)


def _on_device(*named):
    for name, t in named:
        if t is not None and t.device.type not in DEVICES:
            raise TypeError("%s: tensor is on %s; tilekit needs CUDA tensors (move it with .cuda())" % (name, t.device))


def _stream(device):
    return torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else None


def _index(device):
    return device.index if device.index is not None else -1


def _scales(x, mode):
    """The scales' tensor of quantize_fp8 for x: _fp8.scale_layout's shape and strides."""
    shape, strides = _fp8.scale_layout(x.shape[0], x.shape[1], mode)
    return torch.empty_strided(shape, strides, dtype=torch.float32, device=x.device)


def _quantize(x, dtype, mode):
    _fp8.check_quantize(x, dtype, mode)
    _on_device(("x", x))
    if x.shape[1] > 1 and x.stride(1) != 1:   # rows must be contiguous: a transposed view is copied
        x = x.contiguous()
    q = torch.empty(tuple(x.shape), dtype=dtype, device=x.device)
    scale = _scales(x, mode)
    if x.shape[0] == 0 or x.shape[1] == 0:   # the library writes nothing: empty groups' scale is 1
        return q, scale.fill_(1.0)
    _fp8.run_quantize(_index(x.device), _stream(x.device), _fp8.quantize_fields(x, q, scale, mode))
    return q, scale


@torch.library.custom_op("tilekit::quantize_fp8", mutates_args=())
def quantize_fp8_op(x: Tensor, dtype: torch.dtype, mode: str) -> Tuple[Tensor, Tensor]:
    """(codes, scales) of bf16 x: tilekit.quantize_fp8."""
    return _quantize(x, dtype, mode)


@quantize_fp8_op.register_fake
def _quantize_fake(x, dtype, mode):
    _fp8.check_quantize(x, dtype, mode)
    return x.new_empty(tuple(x.shape), dtype=dtype), _scales(x, mode)


def _scaled_mm(a, b, scale_a, scale_b, out_dtype, bias):
    m, n, k, _, _, _, _ = _fp8.check_scaled_mm(a, b, scale_a, scale_b, out_dtype)
    _check_bias(bias, n, a.device)
    _on_device(("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b))
    for name, t in (("b", b), ("scale_a", scale_a), ("scale_b", scale_b)):
        if t.device != a.device:
            raise TypeError("%s: on %s, but a is on %s" % (name, t.device, a.device))
    if k == 0:   # an empty sum: zeros (and the bias)
        out = torch.zeros((m, n), dtype=torch.float32, device=a.device)
    else:
        # with a bias the product stays fp32 and the sum is rounded once
        out = torch.empty((m, n), dtype=out_dtype if bias is None else torch.float32, device=a.device)
        if m and n:
            _fp8.run_gemm(_index(a.device), _stream(a.device), _fp8.scaled_mm_fields(a, b, scale_a, scale_b, out))
    if bias is not None:
        out = out + bias.float()
    return out.to(out_dtype)


def _check_bias(bias, n, device):
    if bias is None:
        return
    if bias.dim() != 1 or bias.shape[0] != n:
        raise ValueError("bias: shape %s, expected (%d,) (one value per column of the output)"
                         % (tuple(bias.shape), n))
    if bias.dtype not in (torch.bfloat16, torch.float32):
        raise TypeError("bias: dtype %s is not supported (expected torch.bfloat16 or torch.float32)" % (bias.dtype,))
    if bias.device != device:
        raise TypeError("bias: on %s, but a is on %s" % (bias.device, device))


@torch.library.custom_op("tilekit::scaled_mm", mutates_args=())
def scaled_mm_op(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, out_dtype: torch.dtype,
                 bias: Optional[Tensor]) -> Tensor:
    """(scale_a a)(scale_b b) (+ bias): tilekit.scaled_mm."""
    return _scaled_mm(a, b, scale_a, scale_b, out_dtype, bias)


@scaled_mm_op.register_fake
def _scaled_mm_fake(a, b, scale_a, scale_b, out_dtype, bias):
    m, n, _, _, _, _, _ = _fp8.check_scaled_mm(a, b, scale_a, scale_b, out_dtype)
    _check_bias(bias, n, a.device)
    return a.new_empty((m, n), dtype=out_dtype)


def _scaled_grouped_mm(a, b, scale_a, scale_b, offs, out_dtype, check_offs):
    kind, count, m, n, k, shape, _ = _fp8.grouped_form(a, b, offs, out_dtype)
    _fp8.grouped_scales(kind, count, m, n, k, a, b, scale_a, scale_b)
    _on_device(("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b), ("offs", offs))
    for name, t in (("b", b), ("scale_a", scale_a), ("scale_b", scale_b), ("offs", offs)):
        if t is not None and t.device != a.device:
            raise TypeError("%s: on %s, but a is on %s" % (name, t.device, a.device))
    if check_offs and offs is not None and not (a.device.type == "cuda" and torch.cuda.is_current_stream_capturing()):
        _fp8.check_offs(offs.tolist(), m)   # a host read: waits for the stream
    if k == 0:   # empty sums: zeros
        return torch.zeros(shape, dtype=out_dtype, device=a.device)
    out = torch.empty(shape, dtype=out_dtype, device=a.device)
    if m and n and count:   # the library takes one group at least
        _fp8.run_gemm(_index(a.device), _stream(a.device),
                      _fp8.scaled_grouped_mm_fields(a, b, scale_a, scale_b, offs, out))
    return out


@torch.library.custom_op("tilekit::scaled_grouped_mm", mutates_args=())
def scaled_grouped_mm_op(a: Tensor, b: Tensor, scale_a: Tensor, scale_b: Tensor, offs: Optional[Tensor],
                         out_dtype: torch.dtype) -> Tensor:
    """The products of each group (offs) or batch: tilekit.scaled_grouped_mm
    (offs never read on the host)."""
    return _scaled_grouped_mm(a, b, scale_a, scale_b, offs, out_dtype, False)


@scaled_grouped_mm_op.register_fake
def _scaled_grouped_mm_fake(a, b, scale_a, scale_b, offs, out_dtype):
    kind, count, m, n, k, shape, _ = _fp8.grouped_form(a, b, offs, out_dtype)
    _fp8.grouped_scales(kind, count, m, n, k, a, b, scale_a, scale_b)
    return a.new_empty(shape, dtype=out_dtype)


def quantize_fp8(x, dtype=torch.float8_e4m3fn, mode="tensor"):
    """(q, scale): bf16 x (a 2-D CUDA tensor; a view whose rows are not
    contiguous is copied first) as FP8 codes q (x's shape, dtype
    torch.float8_e4m3fn or torch.float8_e5m2, contiguous) and fp32 scales,
    x ~ scale * q.float() group by group (tk_quantize_fp8, include/tilekit.h:
    scale = amax / fmax in fp32, 1 for an all-zero group, NaN for a group
    holding a NaN; q the IEEE fp32 quotient x / scale rounded to nearest
    even, saturated to the format's largest finite). mode and the scales'
    shape: "tensor" () (one value); "row" (rows, 1); "1x128" (rows,
    ceil(cols/128)) and "128x128" (ceil(rows/128), ceil(cols/128)), both
    with stride(0) == 1 (the library's layouts). They are what scaled_mm
    takes: an activation by "1x128" as scale_a, a weight (out x in) by
    "128x128" as scale_b with b = q.t(); "row": x's scale_a as it is, a
    weight's scale.t() as scale_b; "tensor": both as they are. One kernel
    and one pass over x (two kernels for "tensor"); asynchronous on the
    current stream; a torch op (torch.compile, CUDA graphs)."""
    if torch.compiler.is_compiling():
        return quantize_fp8_op(x, dtype, mode)
    return _quantize(x, dtype, mode)


def scaled_mm(a, b, scale_a, scale_b, out_dtype=torch.bfloat16, bias=None):
    """(scale_a a)(scale_b b) + bias with FP8 a (M x K, rows contiguous) and
    b (K x N, column-major: b.t() contiguous, as torch._scaled_mm takes it;
    a row-major b is taken too), products summed in fp32, the result
    out_dtype (torch.bfloat16 or torch.float32), M x N. The scales, fp32:
    one value each (shape (), (1,) or (1, 1)); scale_a (M, 1) with scale_b
    (1, N) (row-wise, torch._scaled_mm's); or tilekit's block scales, K a
    multiple of 128: scale_a (M, K/128) for each row and 128 k, scale_b
    (ceil(N/128), K/128) for each 128 x 128 block of b, both with stride(0)
    == 1 (quantize_fp8's "1x128" and "128x128" scales; tilekit/_fp8.py has
    the exact rules). bias (N values, bf16 or fp32) is added in torch after
    the product, which is then kept in fp32 so that the sum is rounded to
    out_dtype once (the library has no FP8 epilogue yet). Runs on
    tk_gemm_run's FP8 path: on sm_90 its FP8 kernels, which read a row-major
    a and a column-major b as they are and other layouts through K-major
    copies (k01_naive, correct and slow, for those under CUDA graph capture
    and on older GPUs). A torch op (torch.compile, CUDA graphs); no
    autograd."""
    if torch.compiler.is_compiling():
        return scaled_mm_op(a, b, scale_a, scale_b, out_dtype, bias)
    return _scaled_mm(a, b, scale_a, scale_b, out_dtype, bias)


def scaled_grouped_mm(a, b, scale_a, scale_b, offs=None, out_dtype=torch.bfloat16, check_offs=True):
    """torch._scaled_grouped_mm on tilekit: many FP8 products in one call,
    a mixture of experts' forward. a and b FP8 (e4m3 or e5m2, any pairing),
    scales fp32, products summed in fp32, out_dtype torch.bfloat16 or
    torch.float32.

    2-D a (M x K, rows contiguous), 3-D b (G x K x N), offs (G,) int32:
      the experts' token rows stacked (tk_gemm_desc's TK_GROUP_ROWS): group
      g is a's rows offs[g-1] .. offs[g]-1 (offs[-1] = 0) times b[g]; out
      (M x N), rows past offs[-1] not written. b as w.transpose(-2, -1) of
      G x N x K (nn.Linear-style, K-major) weights, torch's layout, or
      row-major.
    3-D a (G x M x K), 3-D b, offs None: batched (TK_GROUP_BATCHED), out
      (G x M x N); a or b expanded (batch stride 0) is one matrix for all.

    The scales, read from their shapes (scale_b's rank says the mode),
    follow their operand: one set per matrix of b (and of a when batched),
    one over all M rows for 2-D a:
      row-wise (torch's): scale_a (M,) (or (M, 1), quantize_fp8's "row"),
        3-D a (G, M); scale_b (G, N);
      per tensor: scale_a one value, 3-D a (G,); scale_b (G,), one per
        expert;
      block (DeepSeek-V3's), K a multiple of 128: scale_a (M, K/128), 3-D
        a (G, M, K/128), per row and 128 k, M's dimension contiguous
        (quantize_fp8's "1x128"); scale_b (G, ceil(N/128), K/128) per
        128 x 128 block of b[g], stride(1) == 1 (each expert's
        quantize_fp8(w[g], mode="128x128") scales s[g] stacked:
        torch.stack([x.t() for x in s]).transpose(1, 2)).
    With check_offs (the default, outside CUDA graph capture) offs is read
    on the host, which waits for the stream, and must be non-decreasing
    from 0 with offs[-1] <= M (ValueError); check_offs=False reads nothing
    on the host, and a bad group is skipped on the device, its rows not
    written. TypeError for dtypes and devices, ValueError for shapes and
    strides, naming the argument. Runs on tk_gemm_run's grouped FP8 path:
    k43's FP8 instances where K % 16 == 0 (K-major operands), else
    k01_naive (correct, slow). A
    torch op (torch.compile, where offs is never read on the host; CUDA
    graphs); no autograd."""
    if torch.compiler.is_compiling():
        return scaled_grouped_mm_op(a, b, scale_a, scale_b, offs, out_dtype)
    return _scaled_grouped_mm(a, b, scale_a, scale_b, offs, out_dtype, check_offs)
