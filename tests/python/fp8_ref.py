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
