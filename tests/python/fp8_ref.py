"""Issue 40's rules in plain torch, on any device (not a test file: run.py
skips it; tests/python/test_torch_fp8_cpu.py checks it against the lab's C
reference, tk_lab_fp8_quantize, bit for bit, and tests/gpu/test_torch.py
checks tilekit against it):

quantize_ref(x, dtype, mode): tilekit.quantize_fp8's codes and scales,
  with its shapes and strides: a group's scale fl32(amax / fmax) (1 for
  amax 0, NaN for a group holding a NaN), each code the fp32 quotient
  x / scale rounded to nearest even and saturated to +-fmax (torch's own
  conversion rounds to nearest even but turns an overflow into NaN or
  infinity: the quotient is clamped first, which saturates the same), a
  NaN quotient 0x7F.
dequant(q, scale, mode): the float64 values scale * q of such a pair.
special_input(rows, cols, seed): bf16 test input with the groups that
  matter (the GPU test's specials, tests/gpu/test_quantize.c).
grouped_operands(...): scaled_grouped_mm's operands in each scale mode and
  the float64 products of their dequantized values, group by group.
"""
import torch

FMAX = {torch.float8_e4m3fn: 448.0, torch.float8_e5m2: 57344.0}


def _blocks(n):
    return -(-n // 128)


def group_amax(a, mode):
    """The groups' largest |x| of fp32 a (rows x cols, already |x|), NaN
    kept: () tensor, (rows, 1) row, (rows, ceil(cols/128)) 1x128,
    (ceil(rows/128), ceil(cols/128)) 128x128."""
    rows, cols = a.shape
    if mode == "tensor":
        return a.max() if a.numel() else a.new_zeros(())
    if mode == "row":
        return a.amax(dim=1, keepdim=True) if cols else a.new_zeros((rows, 1))
    rb = rows if mode == "1x128" else _blocks(rows)
    gr = 1 if mode == "1x128" else 128
    p = a.new_zeros((rb * gr, _blocks(cols) * 128))   # zeros never raise an amax
    p[:rows, :cols] = a
    return p.view(rb, gr, _blocks(cols), 128).amax(dim=(1, 3))


def expand(s, rows, cols, mode):
    """A group tensor's values at every element (rows x cols)."""
    if mode == "tensor":
        return s.expand(rows, cols)
    if mode == "row":
        return s.expand(rows, cols)
    gr = 1 if mode == "1x128" else 128
    return s.repeat_interleave(gr, 0)[:rows].repeat_interleave(128, 1)[:, :cols]


def quantize_ref(x, dtype, mode):
    """(q, scale) as tilekit.quantize_fp8 gives them, for bf16 x (2-D)."""
    fmax = FMAX[dtype]
    rows, cols = x.shape
    xf = x.float()
    amax = group_amax(xf.abs(), mode)
    scale = torch.where(amax == 0, torch.ones_like(amax), amax / torch.tensor(fmax, dtype=torch.float32))
    v = xf / expand(scale, rows, cols, mode)
    code = v.clamp(-fmax, fmax).to(dtype).view(torch.uint8)
    code = torch.where(torch.isnan(v), torch.full_like(code, 0x7F), code)
    if mode in ("1x128", "128x128"):   # stored with the first dimension contiguous
        scale = scale.t().contiguous().t()
    return code.view(dtype), scale


def dequant(q, scale, mode):
    """scale * q in float64, rows x cols."""
    rows, cols = q.shape
    return q.double() * expand(scale.double(), rows, cols, mode)


def same_bits(a, b):
    """Whether two fp32 tensors hold the same bits, any NaN matching any NaN."""
    a, b = a.float(), b.float()
    both_nan = torch.isnan(a) & torch.isnan(b)
    return bool(((a.view(torch.int32) == b.view(torch.int32)) | both_nan).all())


def special_input(rows, cols, seed):
    """Random bf16 over rows' exponents 2^-15 .. 2^15 with the GPU test's
    specials: a zero last row and last 128 x 128 block, NaN at (0, 0), +inf
    at (1, 0), a negative NaN, bf16's largest magnitudes in row 3, row 2 in
    the subnormal range."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(rows, cols, generator=g) * 2 - 1) * torch.pow(2.0, (torch.arange(rows) % 7 * 5 - 15).float())[:, None]
    x = x.to(torch.bfloat16)
    x[(rows - 1) // 128 * 128:, (cols - 1) // 128 * 128:] = 0
    x[-1] = 0
    if rows > 2:
        x[2] = ((torch.rand(cols, generator=g) * 2 - 1) * 2.0 ** -128).to(torch.bfloat16)
    if rows > 3:
        big = torch.tensor([3.3895e38, -3.3895e38]).to(torch.bfloat16)
        x[3, ::3] = big[torch.arange(0, cols, 3) % 2]
    bits = x.view(torch.int16)
    bits[0, 0] = 0x7fc0
    if rows > 1:
        bits[1, 0] = 0x7f80
    if cols > 200:
        bits[rows // 2, 200] = -0x3f   # 0xffc1: a negative NaN with a payload
    return x


def _stack_scales(scales, mode):
    """The scales of G matrices in scaled_grouped_mm's layout: "tensor"
    (G,), "row" (G, rows), block (G, first, K/128) with the first
    dimension contiguous (stride(1) == 1), as the library reads them."""
    if mode == "tensor":
        return torch.stack(scales)
    if mode == "row":
        return torch.stack([s[:, 0] for s in scales])
    return torch.stack([s.t() for s in scales]).transpose(1, 2)


def grouped_operands(sizes, n, k, fa, fb, mode, seed, device="cpu"):
    """(a, b, scale_a, scale_b, offs, want) for scaled_grouped_mm in mode
    "tensor", "row" or "block", quantized by quantize_ref, on `device`.
    sizes: a list of the G groups' row counts (rows grouped: a (M x K) the
    rows stacked, offs their int32 cumulative ends, want M x N) or a tuple
    (G, M) (batched: a (G x M x K), offs None, want G x M x N). b: the G
    experts' N x K weights as w.transpose(-2, -1) (torch's layout); want:
    the float64 product of the dequantized operands, group by group."""
    g = torch.Generator().manual_seed(seed)
    batched = isinstance(sizes, tuple)
    count = sizes[0] if batched else len(sizes)
    m = sizes[1] if batched else sum(sizes)
    x = (torch.randn((count, m, k) if batched else (m, k), generator=g) * 3).to(torch.bfloat16)
    w = (torch.randn(count, n, k, generator=g) / 2).to(torch.bfloat16)
    ma, mw = {"tensor": ("tensor", "tensor"), "row": ("row", "row"), "block": ("1x128", "128x128")}[mode]
    qw, sw = zip(*[quantize_ref(w[e], fb, mw) for e in range(count)])
    dw = [dequant(q, s, mw) for q, s in zip(qw, sw)]
    if batched:
        qa, sa = zip(*[quantize_ref(x[e], fa, ma) for e in range(count)])
        want = torch.stack([dequant(q, s, ma) @ d.t() for q, s, d in zip(qa, sa, dw)])
        a, scale_a, offs = torch.stack(qa), _stack_scales(list(sa), ma), None
    else:
        a, scale_a = quantize_ref(x, fa, ma)
        da = dequant(a, scale_a, ma)
        ends = torch.tensor(sizes, dtype=torch.int64).cumsum(0)
        want = torch.cat([da[e - c:e] @ d.t() for e, c, d in zip(ends.tolist(), sizes, dw)] +
                         [torch.zeros(0, n, dtype=torch.float64)])
        scale_a = scale_a.reshape(()) if mode == "tensor" else scale_a.view(-1) if mode == "row" else scale_a
        offs = ends.to(torch.int32).to(device)
    b = torch.stack(qw).transpose(-2, -1)
    return (a.to(device), b.to(device), scale_a.to(device), _stack_scales(list(sw), mw).to(device), offs, want)
