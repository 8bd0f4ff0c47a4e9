"""GPU tests of tilekit inside PyTorch: torch.ops.tilekit.mm, tilekit.matmul,
tilekit.nn.Linear and tilekit.patch against torch on the same bf16 inputs
(values and gradients), torch.compile(fullgraph=True), CUDA-graph capture
and replay, streams and devices, CuPy and DLPack producers, and the errors.
The model is a transformers Llama with small random weights (no download).
Needs torch with CUDA, transformers and cupy; the tilekit package from this
checkout (make builds its extension) or an installed one
(TILEKIT_TEST_INSTALLED=1: the checkout's python/ is then not put on the path).
Prints "N passed, N failed" last; exits non-zero on any failure.

    python3 tests/gpu/test_torch.py [name-substring]
"""
import copy
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not os.environ.get("TILEKIT_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "python"))

import torch      # noqa: E402
import tilekit    # noqa: E402
import tilekit.nn  # noqa: E402
from gpu_runner import raises, run_tests  # noqa: E402 (tests/gpu is on sys.path)

DEV = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
# Tolerances, relative Frobenius error against the fp64 product of the same
# bf16 inputs: one bf16 rounding of the result (2^-9 relative per element).
TOL_OP = 8e-3
# The patched model against the unpatched one: both round every projection
# to bf16, at different places in the sum, and the differences go through
# two layers, softmax and the LM head.
TOL_LOGITS = 2e-2
TOL_GRAD = 5e-2


def bf16(*shape):
    return (torch.rand(*shape, device=DEV) * 2 - 1).to(torch.bfloat16)


def rel(x, ref):
    x, ref = x.double(), ref.double()
    assert bool(torch.isfinite(x).all()), "NaN/Inf"
    return (torch.linalg.norm(x - ref) / torch.linalg.norm(ref)).item()


def close(x, ref, tol, label):
    e = rel(x, ref)
    assert e < tol, "%s: relative error %.3e > %.0e" % (label, e, tol)


class Counting:
    """Counts tilekit.gemm calls (the op looks it up per call) while active,
    so a test can tell that tilekit, not torch, computed a result."""
    def __enter__(self):
        self.n, self.orig = 0, tilekit.gemm

        def wrapped(*a, **kw):
            self.n += 1
            return self.orig(*a, **kw)
        tilekit.gemm = wrapped
        return self

    def __exit__(self, *exc):
        tilekit.gemm = self.orig


# ---- the op, matmul and Linear ----

def test_backend_is_extension():
    assert tilekit.backend() == "extension", "tilekit runs on its %s fallback: the C extension was not built " \
        "or not found" % tilekit.backend()


def test_matmul_values():
    """Shapes (tiny, decode, ragged, split-K sized), batch dims, 1-D a, views."""
    for (m, k, n) in ((1, 64, 64), (64, 64, 64), (127, 129, 65), (128, 4096, 4096), (1000, 1000, 1000)):
        a, b = bf16(m, k), bf16(k, n)
        close(tilekit.matmul(a, b), a.double() @ b.double(), TOL_OP, "%dx%dx%d" % (m, n, k))
    a, w = bf16(2, 3, 5, 96), bf16(80, 96)
    y = tilekit.matmul(a, w.t())   # weight.t(): op T, no copy
    assert y.shape == (2, 3, 5, 80) and y.dtype == torch.bfloat16
    close(y, a.double() @ w.double().t(), TOL_OP, "batch dims, w.t()")
    v = bf16(96)
    close(tilekit.matmul(v, w.t()), v.double() @ w.double().t(), TOL_OP, "1-D a")
    at = bf16(96, 40).t()          # a transposed view: op T
    close(tilekit.matmul(at, w.t()), at.double() @ w.double().t(), TOL_OP, "a.t()")
    ax = bf16(40, 1).expand(40, 96)   # strides (1, 0): copied inside the op
    close(tilekit.matmul(ax, w.t()), ax.double() @ w.double().t(), TOL_OP, "expanded a")


def test_matmul_autograd():
    """Gradients through the op's op-T products against the fp64 formulas."""
    for (m, k, n) in ((64, 64, 64), (256, 512, 384), (128, 4096, 1024)):
        a = bf16(m, k).requires_grad_()
        b = bf16(k, n).requires_grad_()
        g = bf16(m, n)
        with Counting() as c:
            tilekit.matmul(a, b).backward(g)
        assert c.n == 3, "%d tilekit calls for forward + backward, expected 3" % c.n
        close(a.grad, g.double() @ b.double().t(), TOL_OP, "dA %dx%dx%d" % (m, n, k))
        close(b.grad, a.double().t() @ g.double(), TOL_OP, "dB %dx%dx%d" % (m, n, k))
    # column-major leaves (transposed views): each gradient in its input's layout
    a0 = bf16(96, 40).requires_grad_()
    b0 = bf16(72, 96).requires_grad_()
    g = bf16(40, 72)
    tilekit.matmul(a0.t(), b0.t()).backward(g)
    close(a0.grad, (g.double() @ b0.double()).t(), TOL_OP, "dA of a.t()")
    close(b0.grad, (a0.double() @ g.double()).t(), TOL_OP, "dB of b.t()")
    assert a0.grad.is_contiguous() and b0.grad.is_contiguous(), "strides %s %s" % (a0.grad.stride(), b0.grad.stride())
    # an expanded gradient (sum's): strides (0, 0), copied inside the op
    a = bf16(32, 48).requires_grad_()
    w = bf16(16, 48)
    tilekit.matmul(a, w.t()).sum().backward()
    close(a.grad, torch.ones(32, 16, device=DEV, dtype=torch.float64) @ w.double(), TOL_OP, "expanded grad")


def test_linear_dropin():
    """tilekit.nn.Linear against torch.nn.Linear with the same parameters."""
    torch.manual_seed(1)
    ref = torch.nn.Linear(96, 80, device=DEV, dtype=torch.bfloat16)
    lin = tilekit.nn.Linear(96, 80, device=DEV, dtype=torch.bfloat16)
    lin.load_state_dict(ref.state_dict())
    assert isinstance(lin, torch.nn.Linear) and set(lin.state_dict()) == {"weight", "bias"}
    x1 = bf16(4, 7, 96).requires_grad_()
    x2 = x1.detach().clone().requires_grad_()
    with Counting() as c:
        y = lin(x1)
    assert c.n == 1 and y.shape == (4, 7, 80) and y.dtype == torch.bfloat16
    y_ref = ref(x2)
    close(y, y_ref, TOL_OP * 2, "Linear forward")
    g = bf16(4, 7, 80)
    y.backward(g)
    y_ref.backward(g)
    close(x1.grad, x2.grad, TOL_OP * 2, "Linear dx")
    close(lin.weight.grad, ref.weight.grad, TOL_OP * 2, "Linear dW")
    # computed in the weight's layout: AccumulateGrad then copies nothing
    assert lin.weight.grad.is_contiguous(), "Linear dW arrives with strides %s" % (lin.weight.grad.stride(),)
    close(lin.bias.grad, ref.bias.grad, TOL_OP * 2, "Linear db")
    nob = tilekit.nn.Linear(96, 80, bias=False, device=DEV, dtype=torch.bfloat16)
    assert nob.bias is None and nob(x1).shape == (4, 7, 80)


def test_errors():
    a, b = bf16(8, 4), bf16(4, 6)
    raises(TypeError, tilekit.matmul, a.float(), b, match="bfloat16")
    raises(TypeError, tilekit.matmul, a.cpu(), b.cpu(), match="cpu")
    raises(ValueError, tilekit.matmul, a, bf16(5, 6), match="shape mismatch")
    raises(ValueError, tilekit.matmul, a, bf16(2, 4, 6), match="2-D")
    lin = tilekit.nn.Linear(4, 6, device=DEV)   # fp32 weights: not tilekit's
    raises(TypeError, lin, a.float(), match="bfloat16")


def test_stream_and_device():
    """Runs on torch's current stream, and on the tensors' device."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        a, b = bf16(512, 256), bf16(256, 384)   # produced on s
        y = tilekit.matmul(a, b)
        ref = a.double() @ b.double()
    s.synchronize()
    close(y, ref, TOL_OP, "side stream")
    if torch.cuda.device_count() < 2:
        print("     (one GPU: the other-device half of this test did not run)")
        return
    before = torch.cuda.current_device()
    d = torch.device("cuda", 1 - before if before < 2 else 0)
    a, b = bf16(256, 128).to(d), bf16(128, 64).to(d)
    y = tilekit.matmul(a, b)
    assert y.device == d and torch.cuda.current_device() == before
    close(y, a.double() @ b.double(), TOL_OP, "other device")


def test_cuda_graph_linear():
    """A stack of tilekit Linears (a split-K sized one among them) captured
    into a CUDA graph, replayed on new inputs."""
    torch.manual_seed(2)
    net = torch.nn.Sequential(torch.nn.Linear(4096, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 4096))
    net = net.to(DEV, torch.bfloat16)
    ref = copy.deepcopy(net)
    tilekit.patch(net)
    static_x = bf16(128, 4096)
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):   # warm-up: workspaces and caches before the capture
            for _ in range(3):
                net(static_x)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with Counting() as c:
            with torch.cuda.graph(g):
                static_y = net(static_x)
        assert c.n == 2, c.n
        for i in range(4):
            x = bf16(128, 4096)
            static_x.copy_(x)
            g.replay()
            close(static_y, ref(x), TOL_LOGITS, "replay %d" % i)


# ---- the Llama ----

def llama(hidden=256, layers=2, inter=512, heads=4, vocab=1000, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    cfg = LlamaConfig(hidden_size=hidden, num_hidden_layers=layers, intermediate_size=inter,
                      num_attention_heads=heads, num_key_value_heads=heads, vocab_size=vocab,
                      max_position_embeddings=512)
    return LlamaForCausalLM(cfg).to(DEV, torch.bfloat16)


def projections(model):
    return {k: p for k, p in model.named_parameters() if k.endswith("proj.weight") or k.startswith("lm_head")}


def test_llama_patched_matches():
    """Logits, loss and the gradient of every projection: patched vs unpatched."""
    ref = llama()
    pat = tilekit.patch(copy.deepcopy(ref))
    lin = [m for m in pat.modules() if isinstance(m, torch.nn.Linear)]
    assert lin and all(type(m) is tilekit.nn.Linear for m in lin), [type(m) for m in lin]
    assert len(lin) == 2 * 7 + 1, len(lin)   # q k v o gate up down per layer, lm_head
    ids = torch.randint(0, 1000, (2, 64), device=DEV)
    out_ref = ref(ids, labels=ids, use_cache=False)
    with Counting() as c:
        out = pat(ids, labels=ids, use_cache=False)
    assert c.n == len(lin), "%d tilekit calls for %d Linears" % (c.n, len(lin))
    close(out.logits, out_ref.logits, TOL_LOGITS, "logits")
    assert abs(out.loss.item() - out_ref.loss.item()) < TOL_LOGITS * abs(out_ref.loss.item()), \
        (out.loss.item(), out_ref.loss.item())
    out_ref.loss.backward()
    with Counting() as c:
        out.loss.backward()
    assert c.n >= len(lin), "%d tilekit calls in backward" % c.n
    pr, pp = projections(ref), projections(pat)
    assert len(pr) == len(lin)
    for k in pr:
        close(pp[k].grad, pr[k].grad, TOL_GRAD, "grad " + k)


def test_llama_compile_fullgraph():
    """torch.compile(fullgraph=True) of the patched model: no graph break,
    tilekit called from the compiled graph, forward and gradients match."""
    ref = llama(seed=3)
    pat = tilekit.patch(copy.deepcopy(ref))
    ids = torch.randint(0, 1000, (2, 64), device=DEV)
    out_ref = ref(ids, labels=ids, use_cache=False)
    out_ref.loss.backward()
    torch._dynamo.reset()
    comp = torch.compile(pat, fullgraph=True)
    comp(ids, labels=ids, use_cache=False)   # compiles
    for p in pat.parameters():
        p.grad = None
    with Counting() as c:
        out = comp(ids, labels=ids, use_cache=False)
    assert c.n == 15, "%d tilekit calls from the compiled forward, expected 15" % c.n
    close(out.logits, out_ref.logits, TOL_LOGITS, "compiled logits")
    out.loss.backward()
    pr, pp = projections(ref), projections(pat)
    for k in pr:
        close(pp[k].grad, pr[k].grad, TOL_GRAD, "compiled grad " + k)


def test_llama_cuda_graph():
    """The patched forward captured into a CUDA graph and replayed on new ids."""
    ref = llama(seed=4)
    pat = tilekit.patch(copy.deepcopy(ref))
    static_ids = torch.randint(0, 1000, (2, 64), device=DEV)
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                pat(static_ids, use_cache=False)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_logits = pat(static_ids, use_cache=False).logits
        for i in range(3):
            ids = torch.randint(0, 1000, (2, 64), device=DEV)
            static_ids.copy_(ids)
            g.replay()
            close(static_logits, ref(ids, use_cache=False).logits, TOL_LOGITS, "replay %d" % i)


# ---- other producers ----

class DLOnly:
    """Only the DLPack protocol of an array (its __cuda_array_interface__ hidden)."""
    def __init__(self, x):
        self.x = x

    def __dlpack__(self, **kw):
        return self.x.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


def test_cupy():
    """A CuPy fp32 out (its __cuda_array_interface__, with CuPy's stream) of
    a product of torch bf16 inputs; the same out through DLPack only; and a
    CuPy-only product where CuPy has a bfloat16 dtype."""
    import cupy
    M, N, K = 200, 120, 96
    a, b = bf16(M, K), bf16(K, N)
    ref = a.double() @ b.double()
    torch.cuda.synchronize()
    c = cupy.full((M, N), cupy.nan, dtype=cupy.float32)
    assert tilekit.gemm(a, b, out=c) is c
    cupy.cuda.get_current_stream().synchronize()
    close(torch.as_tensor(c, device=DEV), ref, 3e-5, "CuPy out")
    c2 = cupy.full((M, N), cupy.nan, dtype=cupy.float32)
    tilekit.gemm(a, b, out=DLOnly(c2))
    torch.cuda.synchronize()
    close(torch.as_tensor(c2, device=DEV), ref, 3e-5, "CuPy out through DLPack")
    raises(TypeError, tilekit.gemm, a, b, out=cupy.zeros((M, N), dtype=cupy.float16), match=("out", "float16"))
    bf = getattr(cupy, "bfloat16", None)
    if bf is None:
        print("     (this CuPy has no bfloat16 dtype: the CuPy-only product did not run)")
        return
    ca = cupy.asarray(torch.as_tensor(a.float()).cpu().numpy()).astype(bf)
    cb = cupy.asarray(torch.as_tensor(b.float()).cpu().numpy()).astype(bf)
    cc = cupy.empty((M, N), dtype=cupy.float32)
    tilekit.gemm(ca, cb, out=cc)
    cupy.cuda.get_current_stream().synchronize()
    close(torch.as_tensor(cc, device=DEV), ref, 3e-5, "CuPy-only product")


def test_dlpack_torch():
    """torch tensors seen only through DLPack (the capsule path on real memory)."""
    M, N, K = 96, 80, 64
    a, bt = bf16(M, K), bf16(N, K)
    c = torch.full((M, N), float("nan"), device=DEV)
    torch.cuda.synchronize()
    tilekit.gemm(DLOnly(a), DLOnly(bt), out=DLOnly(c), trans_b=True)
    torch.cuda.synchronize()
    close(c, a.double() @ bt.double().t(), 3e-5, "DLPack operands")
    c16 = torch.full((N, M), float("nan"), device=DEV, dtype=torch.bfloat16).t()   # column-major bf16 out
    tilekit.gemm(DLOnly(a), DLOnly(bt.t()), out=DLOnly(c16))
    torch.cuda.synchronize()
    close(c16, a.double() @ bt.double().t(), TOL_OP, "DLPack column-major bf16 out")


def main():
    torch.manual_seed(0)
    print("tilekit %s from %s (backend: %s), torch %s" % (tilekit.__version__, os.path.dirname(tilekit.__file__),
                                                          tilekit.backend(), torch.__version__))
    return run_tests(globals(), sys.argv)


if __name__ == "__main__":
    sys.exit(main())
