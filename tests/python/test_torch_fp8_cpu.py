"""Issue 40's torch side on the CPU, no GPU.

First the pure-torch reference of tests/python/fp8_ref.py against the lab's
C reference (tk_lab_fp8_quantize, src/lab/lab_num.c, built here as a
shared library and called through ctypes), bit for bit at edge shapes with
zeros, NaNs, infinities, saturating and subnormal-range groups: the GPU
test (tests/gpu/test_torch.py) compares tilekit with that reference.

Then tilekit.quantize_fp8, tilekit.scaled_mm and tilekit.nn.Linear(fp8=...)
on CPU tensors, with "cpu" among the ops' devices and the library's two
calls replaced by a double that reads and writes the memory their fields
point at (through ctypes, on the tensors' real host addresses): the
quantizer's by fp8_ref's rules, tk_gemm_run's by include/tilekit.h's FP8
formula in float64 from the descriptor alone (its ops, leading dimensions,
scale modes and scale strides; for scaled_grouped_mm the group kind,
offsets, batch strides and each product's scales). So the descriptors the
ops build are checked end to end: views and padded leading dimensions,
every scale layout, bias, the Linear's weight cache, groups empty, of one
row or past M, and torch.compile(fullgraph=True, backend="aot_eager")
through the custom ops.

Needs torch (.ci/run's torch-cpu step); without it the file defines no test.
"""
import ctypes
import os

try:
    import torch
except ImportError as e:
    torch = None
    print("test_torch_fp8_cpu: skipped (%s; .ci/run's torch-cpu step runs it with torch)" % e)

import fakes

if torch is not None:
    import tilekit
    import tilekit.nn
    from tilekit import _fp8, _torch_fp8
    from fp8_ref import dequant, grouped_operands, quantize_ref, same_bits, special_input
    from test_wrapper import raises

    E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
    MODE_NAMES = {v: k for k, v in _fp8.MODES.items()}
    FORMAT_TYPES = {1: E4M3, 2: E5M2}


# ---- the reference against the lab's ----

def _lab():
    path = fakes.build_c("liblab_num.so", ["-shared", "-fPIC", "-D_GNU_SOURCE", "-O1",
                                           os.path.join(fakes.ROOT, "src", "lab", "lab_num.c"), "-lm", "-lpthread"])
    lib = ctypes.CDLL(path)
    lib.tk_lab_fp8_quantize.restype = None
    lib.tk_lab_fp8_quantize.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int,
                                        ctypes.c_int, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    lib.tk_lab_fp8_nscales.restype = ctypes.c_int64
    lib.tk_lab_fp8_nscales.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    return lib


def lab_quantize(lib, x, dtype, mode):
    """The lab's codes (rows x cols uint8) and scales (in its layout, flat)."""
    rows, cols = x.shape
    xf = x.float().contiguous()
    m = _fp8.MODES[mode] - 1   # tk_lab_qmode
    q = torch.empty((rows, cols), dtype=torch.uint8)
    s = torch.empty(lib.tk_lab_fp8_nscales(m, rows, cols), dtype=torch.float32)
    lib.tk_lab_fp8_quantize(xf.data_ptr(), rows, cols, max(cols, 1), 0 if dtype == E4M3 else 1, m, q.data_ptr(),
                            max(cols, 1), s.data_ptr())
    return q, s


def test_reference_is_the_labs():
    lib = _lab()
    n = 0
    for dtype in (E4M3, E5M2):
        for mode in _fp8.MODES:
            for rows in (1, 7, 129, 300):
                for cols in (1, 5, 128, 200, 1500, 4100):
                    for specials in (False, True):
                        x = special_input(rows, cols, rows * 7 + cols) if specials else \
                            (torch.rand(rows, cols) * 8 - 4).to(torch.bfloat16)
                        q, s = quantize_ref(x, dtype, mode)
                        lq, ls = lab_quantize(lib, x, dtype, mode)
                        label = "%s %s %dx%d%s" % (dtype, mode, rows, cols, " specials" if specials else "")
                        bad = (q.view(torch.uint8) != lq).nonzero()
                        assert not len(bad), "%s: codes differ first at %s: 0x%02x, the lab's 0x%02x" % (
                            label, tuple(bad[0].tolist()), q.view(torch.uint8)[tuple(bad[0])], lq[tuple(bad[0])])
                        flat = s.t().reshape(-1) if s.dim() == 2 else s.reshape(-1)   # the lab's order
                        assert same_bits(flat, ls), "%s: scales %s, the lab's %s" % (label, flat[:8], ls[:8])
                        n += 1
    assert n == 384, n


# ---- the ops on the CPU, the library's calls replaced ----

def _mem(ptr, shape, strides, dtype):
    """A tensor over host memory at ptr (the fields' pointer), no copy."""
    if not all(shape):   # nothing there (an empty group's rows)
        return torch.empty(shape, dtype=dtype)
    size = torch.tensor([], dtype=dtype).element_size()
    span = 1 + sum((d - 1) * s for d, s in zip(shape, strides))
    buf = (ctypes.c_char * (span * size)).from_address(ptr)
    return torch.frombuffer(buf, dtype=torch.uint8).view(dtype).as_strided(shape, strides)


class Double:
    """The two library calls, on the memory the fields point at; .calls
    counts them by kind."""

    def __init__(self):
        self.calls = {"quantize": 0, "gemm": 0}

    def quantize(self, device, stream, f):
        rows, cols, x, ldx, fmt, mode, q, ldq, scale, ld_scale = f
        self.calls["quantize"] += 1
        name = MODE_NAMES[mode]
        rq, rs = quantize_ref(_mem(x, (rows, cols), (ldx, 1), torch.bfloat16).clone(), FORMAT_TYPES[fmt], name)
        _mem(q, (rows, cols), (ldq, 1), torch.uint8).copy_(rq.view(torch.uint8))
        if name in ("1x128", "128x128"):
            first = rs.shape[0]
            _mem(scale, rs.shape, (1, ld_scale or first), torch.float32).copy_(rs)
        else:
            _mem(scale, (rs.numel(),), (1,), torch.float32).copy_(rs.reshape(-1))

    def gemm(self, device, stream, kernel, f):
        """include/tilekit.h's FP8 products in float64, from the fields
        alone: one (33 fields) or many (42: TK_GROUP_ROWS, TK_GROUP_BATCHED,
        "Many FP8 products": the scales follow their operand)."""
        layout, op_a, op_b, m, n, k, alpha, beta, a, lda, b, ldb, c, ldc, c_type = f[:15]
        assert layout == 0 and op_a == 0 and f[15:26] == (0,) * 11, f
        fa, fb, mode, sa, sb, lsa, lsb = f[26:33]
        self.calls["gemm"] += 1
        one = (n, k, b, ldb, op_b, ldc, c_type, alpha, fa, fb, mode, lsa, lsb)
        if len(f) == 33:
            return _product(m, a, lda, c, sa, sb, *one)
        ssa, ssb, kind, count, stride_a, stride_b, stride_c, offs, group_error = f[33:]
        assert kind in (1, 2) and count >= (kind == 2) and group_error == 0, f
        sets = {1: (1, 1), 2: (m, n), 3: (lsa * (k // 128), lsb * (k // 128))}[mode]
        ssa = ssa or (sets[0] if stride_a else 0)   # 0: one set per product (the default) or one for all
        ssb = ssb or (sets[1] if stride_b else 0)
        csize = 4 if c_type == 0 else 2
        if kind == 1:
            for z in range(count):
                one = one[:2] + (b + z * stride_b,) + one[3:]
                _product(m, a + z * stride_a, lda, c + z * stride_c * csize, sa + 4 * z * ssa, sb + 4 * z * ssb, *one)
            return
        assert stride_a == stride_c == ssa == 0, f
        ends = _mem(offs, (count,), (1,), torch.int32).tolist()
        for g, end in enumerate(ends):   # rows start .. end-1: A's, C's and (but per tensor) scale_a's
            start = ends[g - 1] if g else 0
            if not 0 <= start <= end <= m:
                continue   # the library skips a bad group
            one = one[:2] + (b + g * stride_b,) + one[3:]
            _product(end - start, a + start * lda, lda, c + start * ldc * csize, sa + (4 * start if mode > 1 else 0),
                     sb + 4 * g * ssb, *one)


def _product(m, a, lda, c, sa, sb, n, k, b, ldb, op_b, ldc, c_type, alpha, fa, fb, mode, lsa, lsb):
    """C (m x n at c) = alpha sum_k (sa a)(sb b), one product's scales at sa and sb."""
    A = _mem(a, (m, k), (lda, 1), FORMAT_TYPES[fa]).double()
    B = (_mem(b, (n, k), (ldb, 1), FORMAT_TYPES[fb]).t() if op_b else
         _mem(b, (k, n), (ldb, 1), FORMAT_TYPES[fb])).double()
    if mode == 1:
        P = A @ B * _mem(sa, (1,), (1,), torch.float32).double() * _mem(sb, (1,), (1,), torch.float32).double()
    elif mode == 2:
        P = A @ B * _mem(sa, (m, 1), (1, 1), torch.float32).double() * _mem(sb, (1, n), (1, 1), torch.float32).double()
    else:
        kb, nb = k // 128, -(-n // 128)
        SA = _mem(sa, (m, kb), (1, lsa), torch.float32).double()
        SB = _mem(sb, (nb, kb), (1, lsb), torch.float32).double().repeat_interleave(128, 0)[:n]
        P = sum(A[:, j * 128:(j + 1) * 128] @ B[j * 128:(j + 1) * 128] * SA[:, j:j + 1] * SB[None, :, j]
                for j in range(kb))
    _mem(c, (m, n), (ldc, 1), torch.float32 if c_type == 0 else torch.bfloat16).copy_(alpha * P)


class on_cpu:
    """The ops take CPU tensors and call the Double while active."""

    def __enter__(self):
        self.double = Double()
        self.saved = (_torch_fp8.DEVICES, _fp8.run_quantize, _fp8.run_gemm)
        _torch_fp8.DEVICES = ("cuda", "cpu")
        _fp8.run_quantize, _fp8.run_gemm = self.double.quantize, lambda d, s, f: self.double.gemm(d, s, None, f)
        return self.double

    def __exit__(self, *exc):
        _torch_fp8.DEVICES, _fp8.run_quantize, _fp8.run_gemm = self.saved
        return False


def test_quantize_layouts():
    """Every mode's scales in their shapes and strides, x a padded view."""
    with on_cpu():
        wide = special_input(300, 4200, 3)
        x = wide[:, :4100]   # ldx 4200
        for dtype in (E4M3, E5M2):
            for mode, shape, strides in (("tensor", (), ()), ("row", (300, 1), (1, 1)),
                                         ("1x128", (300, 33), (1, 300)), ("128x128", (3, 33), (1, 3))):
                q, s = tilekit.quantize_fp8(x, dtype, mode)
                assert q.dtype == dtype and q.shape == x.shape and q.is_contiguous(), (q.dtype, q.shape)
                assert tuple(s.shape) == shape and s.stride() == strides and s.dtype == torch.float32, (mode, s.stride())
                rq, rs = quantize_ref(x, dtype, mode)
                assert torch.equal(q.view(torch.uint8), rq.view(torch.uint8)), mode
                assert same_bits(s, rs), mode
        # a transposed view is copied first; empty inputs get scales of 1 without a call
        q, s = tilekit.quantize_fp8(x[:64, :64].t(), E4M3, "row")
        rq, rs = quantize_ref(x[:64, :64].t().contiguous(), E4M3, "row")
        assert torch.equal(q.view(torch.uint8), rq.view(torch.uint8)) and same_bits(s, rs)
        q, s = tilekit.quantize_fp8(torch.zeros((5, 0), dtype=torch.bfloat16), E4M3, "row")
        assert q.shape == (5, 0) and torch.equal(s, torch.ones(5, 1))


def test_quantize_refusals():
    x = torch.zeros(4, 8, dtype=torch.bfloat16)
    raises(TypeError, tilekit.quantize_fp8, x, E4M3, "row", match=("x:", "CUDA"))   # the CPU, not taken
    with on_cpu():
        raises(TypeError, tilekit.quantize_fp8, x.float(), E4M3, "row", match=("x:", "bfloat16"))
        raises(TypeError, tilekit.quantize_fp8, x, torch.bfloat16, "row", match=("dtype", "float8_e4m3fn"))
        raises(ValueError, tilekit.quantize_fp8, x, E4M3, "block", match=("mode", "'128x128'"))
        raises(ValueError, tilekit.quantize_fp8, x[None], E4M3, "row", match=("x:", "2-D"))


def _operands(m, n, k, fa, fb, mode, seed):
    """FP8 a (M x K), b (K x N column-major) and their scales for `mode`
    (tensor, row, block), quantized by the reference; their dequantized
    float64 product."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(m, k, generator=g) * 3).to(torch.bfloat16)
    w = (torch.randn(n, k, generator=g) / 2).to(torch.bfloat16)
    ma, mw = {"tensor": ("tensor", "tensor"), "row": ("row", "row"), "block": ("1x128", "128x128")}[mode]
    qa, sa = quantize_ref(x, fa, ma)
    qw, sw = quantize_ref(w, fb, mw)
    want = dequant(qa, sa, ma) @ dequant(qw, sw, mw).t()
    return qa, qw.t(), sa, (sw.t() if mode == "row" else sw), want


def test_scaled_mm_modes():
    """Each scale mode and format pairing, b column-major (torch's) and
    row-major, fp32 and bf16 out, a bias: the double's product from the
    descriptor against the dequantized float64 product."""
    with on_cpu() as d:
        for mode, (m, n, k) in (("tensor", (7, 9, 40)), ("row", (33, 20, 72)), ("block", (130, 257, 384))):
            for fa, fb in ((E4M3, E4M3), (E5M2, E4M3), (E4M3, E5M2)):
                a, b, sa, sb, want = _operands(m, n, k, fa, fb, mode, m + n)
                y = tilekit.scaled_mm(a, b, sa, sb, out_dtype=torch.float32)
                assert y.shape == (m, n) and y.dtype == torch.float32
                assert torch.allclose(y.double(), want, rtol=1e-5, atol=1e-5), (mode, (y.double() - want).abs().max())
                y = tilekit.scaled_mm(a, b.contiguous(), sa, sb, out_dtype=torch.float32)   # row-major b: op N
                assert torch.allclose(y.double(), want, rtol=1e-5, atol=1e-5), mode
                bias = torch.randn(n).to(torch.bfloat16)
                y = tilekit.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, bias=bias)
                assert y.dtype == torch.bfloat16
                assert torch.equal(y, (want.float() + bias.float()).to(torch.bfloat16)) or \
                    torch.allclose(y.double(), want + bias.double(), rtol=1e-2, atol=1e-2), mode
        assert d.calls["gemm"] == 27, d.calls
        # block scales with padded strides: ld_scale_a, ld_scale_b from stride(1)
        a, b, sa, sb, want = _operands(64, 200, 256, E4M3, E4M3, "block", 5)
        pa = torch.zeros(2, 70)[:, :64].t()   # (64, 2), strides (1, 70)
        pa.copy_(sa)
        pb = torch.zeros(2, 5)[:, :2].t()     # (2, 2), strides (1, 5)
        pb.copy_(sb)
        assert pa.stride() == (1, 70) and pb.stride() == (1, 5)
        y = tilekit.scaled_mm(a, b, pa, pb, out_dtype=torch.float32)
        assert torch.allclose(y.double(), want, rtol=1e-5, atol=1e-5)


def test_scaled_mm_refusals():
    with on_cpu():
        a, b, sa, sb, _ = _operands(8, 6, 256, E4M3, E4M3, "row", 1)
        raises(TypeError, tilekit.scaled_mm, a.float(), b, sa, sb, match=("a:", "float8"))
        raises(ValueError, tilekit.scaled_mm, a[:, :128], b, sa, sb, match="shape mismatch")
        raises(TypeError, tilekit.scaled_mm, a, b, sa, sb, out_dtype=torch.float16, match="out_dtype")
        raises(TypeError, tilekit.scaled_mm, a, b, sa.double(), sb, match=("scale_a", "float32"))
        raises(ValueError, tilekit.scaled_mm, a, b, sa[:4], sb, match=("scale_a, scale_b", "(4, 1)"))
        raises(ValueError, tilekit.scaled_mm, a.t().contiguous().t(), b, sa, sb, match=("a:", "row"))
        raises(ValueError, tilekit.scaled_mm, a, b, sa, sb, bias=torch.zeros(5), match=("bias", "(6,)"))
        # block-shaped scales stored row by row
        sa2, sb2 = torch.ones(8, 2), torch.ones(1, 2)
        raises(ValueError, tilekit.scaled_mm, a, b, sa2, sb2, match=("scale_a", "first dimension"))


def _close(y, want, label, tol=1e-5):
    assert y.shape == want.shape, (label, y.shape, want.shape)
    assert torch.allclose(y.double(), want, rtol=tol, atol=tol), (label, (y.double() - want).abs().max())


def _padded(s):
    """A copy of G sets of scales (G, ...) one set and 3 more apart: stride(0) matters."""
    p = torch.empty_strided(s.shape, (2 * s.stride(0) + 3,) + s.stride()[1:])
    return p.copy_(s)


def test_scaled_grouped_mm_modes():
    """Rows grouped (empty groups, a 1-row group, rows past offs[-1]) and
    batched, each scale mode and format pairing, b torch's transposed
    view and row-major, packed and padded scales, fp32 and bf16 out: the double's products from the
    descriptor against the dequantized float64 products group by group."""
    with on_cpu() as d:
        for mode, (n, k) in (("tensor", (24, 40)), ("row", (20, 72)), ("block", (257, 256))):
            for fa, fb in ((E4M3, E4M3), (E5M2, E4M3), (E4M3, E5M2)):
                label = "%s %s x %s" % (mode, fa, fb)
                a, b, sa, sb, offs, want = grouped_operands([0, 5, 1, 0, 9, 3], n, k, fa, fb, mode, n + k)
                _close(tilekit.scaled_grouped_mm(a, b, sa, sb, offs, out_dtype=torch.float32), want, label)
                _close(tilekit.scaled_grouped_mm(a, b.contiguous(), sa, sb, offs, torch.float32), want, label + " op N")
                y = tilekit.scaled_grouped_mm(a, b, sa, sb, offs)
                assert y.dtype == torch.bfloat16
                _close(y, want, label + " bf16", 1e-2)
                _close(tilekit.scaled_grouped_mm(a, b, sa, _padded(sb), offs, torch.float32), want, label + " padded")
                short = offs.clone()
                short[-1] -= 2   # the last 2 rows belong to no group: not written
                _close(tilekit.scaled_grouped_mm(a, b, sa, sb, short, torch.float32)[:16], want[:16], label + " short")
                a, b, sa, sb, offs, want = grouped_operands((3, 7), n, k, fa, fb, mode, n * k)
                assert offs is None and a.shape == (3, 7, k)
                _close(tilekit.scaled_grouped_mm(a, b, sa, sb, out_dtype=torch.float32), want, label + " batched")
                _close(tilekit.scaled_grouped_mm(a, b, _padded(sa), _padded(sb), out_dtype=torch.float32), want,
                       label + " batched padded")
        assert d.calls["gemm"] == 63, d.calls
        # M = 0, no group, K = 0: no call (K = 0: zeros)
        a, b, sa, sb, offs, want = grouped_operands([0, 0, 0], 20, 72, E4M3, E4M3, "row", 1)
        y = tilekit.scaled_grouped_mm(a, b, sa, sb, offs, torch.float32)
        assert y.shape == (0, 20), y.shape
        y = tilekit.scaled_grouped_mm(torch.zeros(5, 72).to(E4M3), b[:0], torch.ones(5), torch.ones(0, 20),
                                      torch.zeros(0, dtype=torch.int32))
        assert y.shape == (5, 20), y.shape
        y = tilekit.scaled_grouped_mm(torch.zeros(4, 0).to(E4M3), torch.zeros(2, 0, 3).to(E4M3), torch.ones(4),
                                      torch.ones(2, 3), torch.tensor([1, 4], dtype=torch.int32))
        assert torch.equal(y, torch.zeros(4, 3, dtype=torch.bfloat16)), y
        assert d.calls["gemm"] == 63, d.calls


def test_scaled_grouped_mm_refusals():
    a, b, sa, sb, offs, _ = grouped_operands([3, 0, 5], 16, 128, E4M3, E4M3, "row", 2)
    raises(TypeError, tilekit.scaled_grouped_mm, a, b, sa, sb, offs, match=("a:", "CUDA"))   # the CPU, not taken
    with on_cpu() as d:
        raises(TypeError, tilekit.scaled_grouped_mm, a, b, sa, sb, offs.long(), match=("offs:", "torch.int32"))
        raises(ValueError, tilekit.scaled_grouped_mm, a, b, sa, sb, None, match=("offs:", "required"))
        raises(ValueError, tilekit.scaled_grouped_mm, a, b, sa, sb.t(), offs, match=("scale_a, scale_b", "(G, N)"))
        raises(TypeError, tilekit.scaled_grouped_mm, a, b, sa, sb, offs, torch.float16, match="out_dtype")
        # offs' values are read on the host unless check_offs=False (the library then skips the bad group)
        bad = torch.tensor([3, 2, 8], dtype=torch.int32)
        raises(ValueError, tilekit.scaled_grouped_mm, a, b, sa, sb, bad, match=("offs:", "offs[1] = 2"))
        raises(ValueError, tilekit.scaled_grouped_mm, a, b, sa, sb, offs + 1, match=("offs:", "past a's 8 rows"))
        assert d.calls["gemm"] == 0, d.calls
        tilekit.scaled_grouped_mm(a, b, sa, sb, bad, check_offs=False)
        assert d.calls["gemm"] == 1, d.calls


def test_scaled_grouped_mm_fake():
    """The fake implementation's shapes and dtypes (FakeTensorMode: no
    data, no call) and its refusals; torch.compile(fullgraph=True) through
    tilekit::scaled_grouped_mm gives the eager values."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    rows = grouped_operands([2, 0, 7], 40, 256, E4M3, E5M2, "block", 3)[:5]
    batched = grouped_operands((3, 5), 40, 256, E5M2, E4M3, "tensor", 4)[:5]
    with on_cpu() as d:
        with FakeTensorMode() as mode:
            fake = [None if t is None else mode.from_tensor(t) for t in rows]
            y = torch.ops.tilekit.scaled_grouped_mm(*fake, torch.bfloat16)
            assert (tuple(y.shape), y.dtype) == ((9, 40), torch.bfloat16), (y.shape, y.dtype)
            fake3 = [None if t is None else mode.from_tensor(t) for t in batched]
            y = torch.ops.tilekit.scaled_grouped_mm(*fake3, torch.float32)
            assert (tuple(y.shape), y.dtype) == ((3, 5, 40), torch.float32), (y.shape, y.dtype)
            raises(ValueError, torch.ops.tilekit.scaled_grouped_mm, fake[0], fake[1], fake[2][:, :1], fake[3],
                   fake[4], torch.bfloat16, match="scale_a, scale_b")
        assert d.calls["gemm"] == 0, d.calls
        torch._dynamo.reset()

        def f(a, b, sa, sb, offs):
            return tilekit.scaled_grouped_mm(a, b, sa, sb, offs, out_dtype=torch.float32)

        for args in (rows, batched):
            want = f(*args)
            got = torch.compile(f, fullgraph=True, backend="aot_eager")(*args)
            assert torch.equal(got, want)


def test_linear_fp8():
    """tilekit.nn.Linear(fp8=...) against the bf16 Linear within FP8's
    error; the weight quantized once and again after it changes; forward only."""
    torch.manual_seed(0)
    with on_cpu() as d, torch.no_grad():
        for fmt, scale in (("e4m3", "row"), ("e4m3", "tensor"), ("e5m2", "block")):
            lin = tilekit.nn.Linear(256, 96, bias=True, dtype=torch.bfloat16, fp8=fmt, scale=scale)
            ref = torch.nn.Linear(256, 96, bias=True, dtype=torch.bfloat16)
            ref.load_state_dict(lin.state_dict())
            x = torch.randn(3, 5, 256).to(torch.bfloat16)
            n0 = dict(d.calls)
            y = lin(x)
            assert y.shape == (3, 5, 96) and y.dtype == torch.bfloat16
            err = ((y.double() - ref(x).double()).norm() / ref(x).double().norm()).item()
            assert err < (0.05 if fmt == "e4m3" else 0.1), (fmt, scale, err)
            lin(x)
            assert d.calls["quantize"] - n0["quantize"] == 3, d.calls   # the weight once, x twice
            lin.weight.mul_(2)                                          # a new version: quantized again
            assert torch.allclose(lin(x).float(), 2 * y.float() - lin.bias.float(), rtol=0.1, atol=0.1)
            assert d.calls["quantize"] - n0["quantize"] == 5, d.calls
            assert "fp8='%s'" % fmt in repr(lin)
        lin = tilekit.nn.Linear(64, 8, dtype=torch.bfloat16, fp8="e4m3", activation="relu")
        assert bool((lin(torch.randn(4, 64).to(torch.bfloat16)) >= 0).all())
    with on_cpu():
        lin = tilekit.nn.Linear(64, 8, dtype=torch.bfloat16, fp8="e4m3")
        raises(RuntimeError, lin, torch.randn(4, 64).to(torch.bfloat16), match="forward only")
    raises(ValueError, tilekit.nn.Linear, 100, 8, fp8="e4m3", scale="block", match="multiple of 128")
    raises(ValueError, tilekit.nn.Linear, 64, 8, fp8="e3m4", match="fp8")


def test_compile_fullgraph():
    """torch.compile(fullgraph=True) through tilekit::quantize_fp8 and
    tilekit::scaled_mm (aot_eager: the fake implementations trace, the real
    ones run): the eager values."""
    torch._dynamo.reset()

    def f(x, w, bias):
        qx, sx = tilekit.quantize_fp8(x, E4M3, "1x128")
        qw, sw = tilekit.quantize_fp8(w, E4M3, "128x128")
        return tilekit.scaled_mm(qx, qw.t(), sx, sw, out_dtype=torch.bfloat16, bias=bias)

    with on_cpu():
        x, w, bias = (torch.randn(33, 256).to(torch.bfloat16), torch.randn(200, 256).to(torch.bfloat16),
                      torch.randn(200).to(torch.bfloat16))
        want = f(x, w, bias)
        got = torch.compile(f, fullgraph=True, backend="aot_eager")(x, w, bias)
        assert torch.equal(got, want)
        lin = tilekit.nn.Linear(256, 200, dtype=torch.bfloat16, fp8="e4m3", scale="block")
        with torch.no_grad():   # compiled: the weight quantized inside the graph, the same bits
            want = lin(x)
            got = torch.compile(lin, fullgraph=True, backend="aot_eager")(x)
        assert torch.equal(got, want)


if torch is None:   # the file then defines no test
    for _name in [n for n in list(globals()) if n.startswith("test_")]:
        del globals()[_name]
