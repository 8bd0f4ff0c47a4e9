"""GPU tests of tilekit inside PyTorch: torch.ops.tilekit.mm, tilekit.matmul,
tilekit.nn.Linear and tilekit.patch against torch on the same bf16 inputs
(values and gradients), torch.compile(fullgraph=True), CUDA-graph capture
and replay, streams and devices, CuPy and DLPack producers, and the errors.
The model is a transformers Llama with small random weights (no download).
Issue 39: tilekit.linear (each activation, with and without bias),
tilekit.gated_mlp and tilekit.mlp against float64 autograd, and
tilekit.patch(fuse_mlp=True) on tiny Llama, Mistral, Qwen2, Qwen3, GPT-2
and BERT models against their unpatched copies, eager, compiled and captured.
Issue 40: tilekit.quantize_fp8 bit for bit against tests/python/fp8_ref.py,
tilekit.scaled_mm, tilekit.scaled_grouped_mm (rows grouped and batched,
every scale mode) and tilekit.nn.Linear(fp8=...) against float64 products
of the dequantized operands and against torch._scaled_mm /
torch._scaled_grouped_mm where torch takes the call.
Issue 38: tilekit.grouped_mm (every form of torch._grouped_mm) and
tilekit.bmm against float64 loops and torch._grouped_mm, their gradients,
compiled and captured, and transformers' Mixtral and Qwen3-MoE sparse
blocks with their experts' loop replaced by tilekit's grouped products.
Needs torch with CUDA, transformers and cupy; the tilekit package from this
checkout (make builds its extension) or an installed one
(TILEKIT_TEST_INSTALLED=1: the checkout's python/ is then not put on the path).
Prints "N passed, N failed" last; exits non-zero on any failure.

    python3 tests/gpu/test_torch.py [name-substring]
"""
import copy
import itertools
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if not os.environ.get("TILEKIT_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "python"))

import torch      # noqa: E402
import tilekit    # noqa: E402
import tilekit.nn  # noqa: E402
from gpu_runner import raises, run_tests  # noqa: E402 (tests/gpu is on sys.path)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import tiny_models  # noqa: E402

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
    """Counts the calls of tilekit functions (default: tilekit.gemm and
    tilekit.gemm_epilogue; the ops look them up per call) while active, so a
    test can tell that tilekit, not torch, computed a result; .calls keeps
    (name, args) of each, .kinds the epilogue of each (None: a product alone)."""
    def __init__(self, *names):
        self.names = names or ("gemm", "gemm_epilogue")

    @property
    def kinds(self):
        return [kw.get("epilogue") for _, _, kw in self.full]

    def __enter__(self):
        self.n, self.calls, self.full = 0, [], []
        self.orig = {name: getattr(tilekit, name) for name in self.names}
        for name, fn in self.orig.items():
            setattr(tilekit, name, self._counted(name, fn))
        return self

    def _counted(self, name, fn):
        def wrapped(*a, **kw):
            self.n += 1
            self.calls.append((name, a))
            self.full.append((name, a, kw))
            return fn(*a, **kw)
        return wrapped

    def __exit__(self, *exc):
        for name, fn in self.orig.items():
            setattr(tilekit, name, fn)


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


def graph_replays(fn, static_in, make_input, ref_fn, what, rounds=3):
    """fn(static_in) warmed up on a side stream (workspaces and caches
    before the capture, as torch asks), captured into a CUDA graph, then
    replayed `rounds` times on new inputs copied into static_in, each output
    compared with ref_fn(input). Returns the Counting of the capture (what
    tilekit calls the graph holds)."""
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                fn(static_in)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with Counting() as c:
            with torch.cuda.graph(g):
                static_out = fn(static_in)
        for i in range(rounds):
            x = make_input()
            static_in.copy_(x)
            g.replay()
            close(static_out, ref_fn(x), TOL_LOGITS, "%s replay %d" % (what, i))
    return c


def test_cuda_graph_linear():
    """A stack of tilekit Linears (a split-K sized one among them) captured
    into a CUDA graph, replayed on new inputs."""
    torch.manual_seed(2)
    net = torch.nn.Sequential(torch.nn.Linear(4096, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 4096))
    net = net.to(DEV, torch.bfloat16)
    ref = copy.deepcopy(net)
    tilekit.patch(net)
    c = graph_replays(net, bf16(128, 4096), lambda: bf16(128, 4096), ref, "linear", rounds=4)
    assert c.n == 2, c.n


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


def random_ids():
    """A batch of 2 x 64 token ids of llama()'s vocabulary, on the GPU."""
    return torch.randint(0, 1000, (2, 64), device=DEV)


def test_llama_cuda_graph():
    """The patched forward captured into a CUDA graph and replayed on new ids."""
    ref = llama(seed=4)
    pat = tilekit.patch(copy.deepcopy(ref))
    graph_replays(lambda ids: pat(ids, use_cache=False).logits, random_ids(), random_ids,
                  lambda ids: ref(ids, use_cache=False).logits, "llama")


# ---- issue 39: fused epilogues (tilekit.linear, the MLPs, patch(fuse_mlp=True)) ----

ACTS = (None, "relu", "gelu", "gelu_tanh", "silu")


class GatedEpilogue:
    """tilekit's gated MLP, forward and backward, through the gated
    epilogue kinds (True) or unfused (False: plain products, torch's
    elementwise kernels), while active; a (forward, backward) pair for each
    half (tilekit._torch_fused.GATED_FORWARD, GATED_BACKWARD; the default
    is (True, True))."""

    def __init__(self, flag):
        self.flag = flag if isinstance(flag, tuple) else (flag, flag)

    def __enter__(self):
        from tilekit import _torch_fused
        self.mod, self.saved = _torch_fused, (_torch_fused.GATED_FORWARD, _torch_fused.GATED_BACKWARD)
        _torch_fused.GATED_FORWARD, _torch_fused.GATED_BACKWARD = self.flag
        return self

    def __exit__(self, *exc):
        self.mod.GATED_FORWARD, self.mod.GATED_BACKWARD = self.saved


def act64(x, act):
    """The activation in float64, by torch's own functions (the reference)."""
    F = torch.nn.functional
    return {None: lambda v: v, "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda v: F.gelu(v, approximate="tanh"),
            "silu": F.silu}[act](x)


def leaves(*ts):
    """Float64 leaf copies of bf16 leaves (None stays None), for the reference's autograd."""
    return [t.detach().double().requires_grad_() if t is not None else None for t in ts]


def compare_grads(pairs, tol, label):
    for name, got, want in pairs:
        if want is None:
            continue
        assert got is not None, "%s: no gradient for %s" % (label, name)
        close(got, want, tol, "%s d%s" % (label, name))


def test_linear_epilogue():
    """tilekit.linear for each activation, without bias and with a bf16 or
    fp32 bias, at odd shapes and batch dimensions: values and the gradients
    of x, weight and bias against float64 autograd of the same inputs; the
    weight's gradient contiguous; one tilekit call forward (bias_act with
    aux = z only where a backward will need it; the plain product where
    TMA cannot take the strides)."""
    shapes = ((1, 64, 64), (7, 13, 5), (127, 129, 65), (3 * 41, 256, 384), (1000, 1000, 1000))
    for act, bias_dtype, (m, k, n) in itertools.product(ACTS, (None, torch.bfloat16, torch.float32), shapes):
        label = "linear %s bias=%s %dx%dx%d" % (act, bias_dtype, m, n, k)
        x = bf16(m, k).requires_grad_()
        w = (bf16(n, k) * 0.2).requires_grad_()
        b = (torch.rand(n, device=DEV) - 0.5).to(bias_dtype).requires_grad_() if bias_dtype else None
        if m == 3 * 41:
            x = x.detach().view(3, 41, k).requires_grad_()
        with Counting() as c:
            y = tilekit.linear(x, w, b, act)
        assert c.n == 1, "%s: %d tilekit calls" % (label, c.n)
        if k % 8 or n % 8:   # strides TMA cannot take: the plain product, bias and act in torch (_linear_fwd)
            assert c.full[0][2].get("epilogue") is None, label + ": a fused call on strides TMA cannot take"
        elif act is not None:
            assert c.full[0][2].get("aux") is not None, label + ": no aux for the backward"
        assert y.shape == x.shape[:-1] + (n,) and y.dtype == torch.bfloat16
        x64, w64, b64 = leaves(x, w, b)
        y64 = act64(torch.nn.functional.linear(x64, w64, b64), act)
        close(y, y64, TOL_OP, label)
        g = bf16(*y.shape)
        y.backward(g)
        y64.backward(g.double())
        compare_grads([("x", x.grad, x64.grad), ("w", w.grad, w64.grad), ("b", b.grad if b is not None else None,
                                                                       b64.grad if b is not None else None)],
                      TOL_OP * 2, label)
        assert w.grad.is_contiguous() and (b is None or b.grad.dtype == bias_dtype)
    with torch.no_grad(), Counting() as c:
        tilekit.linear(bf16(8, 32), bf16(16, 32), bf16(16), "gelu")
    assert c.full[0][2].get("aux") is None, "aux stored without a gradient to compute"
    raises(ValueError, tilekit.linear, bf16(8, 32), bf16(16, 32), None, "tanh", match="activation")
    raises(TypeError, tilekit.linear, bf16(8, 32).float(), bf16(16, 32), bf16(16), "gelu", match="bfloat16")


def gated_ref(x, wg, wu, wd, bg, bu, bd, act):
    lin = torch.nn.functional.linear
    return lin(act64(lin(x, wg, bg), act) * lin(x, wu, bu), wd, bd)


def test_gated_mlp():
    """tilekit.gated_mlp (SwiGLU, GeGLU both ways; biases or none; odd sizes
    and batch dimensions) against float64 autograd, through the gated kinds
    and unfused (GatedEpilogue); fused: two calls forward (gated, down), six
    backward (gated_backward and five products); unfused: the gate and up
    products plain; the weights' gradients contiguous."""
    for fused, act, biased, (t, hid, inter) in itertools.product(
            (True, False), ("silu", "gelu", "gelu_tanh"), (False, True),
            ((1, 64, 128), (37, 96, 200), (2 * 300, 512, 1376))):
        with GatedEpilogue(fused):
            gated_mlp_case(fused, act, biased, t, hid, inter)


def gated_mlp_case(fused, act, biased, t, hid, inter):
    label = "gated_mlp %s %s bias=%s %d tokens %d -> %d" % ("fused" if fused else "unfused", act, biased, t,
                                                            hid, inter)
    x = bf16(t, hid).requires_grad_()
    if t == 600:
        x = x.detach().view(2, 300, hid).requires_grad_()
    wg, wu, wd = ((bf16(*s) * 0.3).requires_grad_() for s in ((inter, hid), (inter, hid), (hid, inter)))
    bg, bu, bd = ((bf16(s) * 0.3).requires_grad_() for s in (inter, inter, hid)) if biased else (None,) * 3
    with Counting() as c:
        y = tilekit.gated_mlp(x, wg, wu, wd, act, bg, bu, bd)
    down = "bias_act" if biased else None
    assert c.kinds == (["gated", down] if fused else ["bias_act" if biased else None] * 2 + [down]), \
        (label, c.kinds)
    ref = leaves(x, wg, wu, wd, bg, bu, bd)
    y64 = gated_ref(*ref, act)
    close(y, y64, TOL_OP * 2, label)
    g = bf16(*y.shape)
    with Counting() as c:
        y.backward(g)
    assert sorted(map(str, c.kinds)) == sorted(["gated_backward" if fused else "None"] + ["None"] * 5), \
        (label, c.kinds)
    y64.backward(g.double())
    names = ("x", "w_gate", "w_up", "w_down", "b_gate", "b_up", "b_down")
    mine = (x, wg, wu, wd, bg, bu, bd)
    compare_grads([(nm, a.grad if a is not None else None, r.grad if r is not None else None)
                   for nm, a, r in zip(names, mine, ref)], TOL_OP * 4, label)
    assert all(w.grad.is_contiguous() for w in (wg, wu, wd))


def mlp_ref(x, w1, b1, w2, b2, act, transposed):
    if transposed:
        return act64(x @ w1 + b1, act) @ w2 + b2
    lin = torch.nn.functional.linear
    return lin(act64(lin(x, w1, b1), act), w2, b2)


def test_mlp():
    """tilekit.mlp in nn.Linear's layout and in Conv1D's (transposed=True:
    weights in x out, read as they are), with and without biases, against
    float64 autograd; db1 from the backward epilogue's bias_grad; the
    weights' gradients in their parameters' layouts."""
    for act, transposed, (t, hid, inter) in itertools.product(("gelu", "gelu_tanh", "relu", "silu"), (False, True),
                                                              ((1, 64, 256), (45, 96, 200), (512, 768, 3072))):
        label = "mlp %s transposed=%s %d tokens %d -> %d" % (act, transposed, t, hid, inter)
        shapes = ((hid, inter), (inter, hid)) if transposed else ((inter, hid), (hid, inter))
        w1, w2 = ((bf16(*s) * 0.2).requires_grad_() for s in shapes)
        b1, b2 = ((bf16(s) * 0.2).requires_grad_() for s in (inter, hid))
        x = bf16(t, hid).requires_grad_()
        with Counting() as c:
            y = tilekit.mlp(x, w1, b1, w2, b2, act, transposed=transposed)
        assert c.kinds == ["bias_act", "bias_act"], (label, c.kinds)
        ref = leaves(x, w1, b1, w2, b2)
        y64 = mlp_ref(*ref, act, transposed)
        close(y, y64, TOL_OP * 2, label)
        g = bf16(*y.shape)
        with Counting() as c:
            y.backward(g)
        assert c.kinds.count("backward") == 1 and c.n == 4, (label, c.kinds)
        y64.backward(g.double())
        compare_grads([(nm, a.grad, r.grad) for nm, a, r in zip(("x", "w1", "b1", "w2", "b2"), (x, w1, b1, w2, b2),
                                                                   ref)], TOL_OP * 4, label)
        assert w1.grad.is_contiguous() and w2.grad.is_contiguous()
    x = bf16(9, 64).requires_grad_()   # no biases
    w1, w2 = (bf16(128, 64) * 0.2).requires_grad_(), (bf16(64, 128) * 0.2).requires_grad_()
    y = tilekit.mlp(x, w1, None, w2, None, "gelu")
    ref = leaves(x, w1, w2)
    y64 = mlp_ref(ref[0], ref[1], None, ref[2], None, "gelu", False)
    close(y, y64, TOL_OP * 2, "mlp without biases")
    g = bf16(9, 64)
    y.backward(g)
    y64.backward(g.double())
    compare_grads([(nm, a.grad, r.grad) for nm, a, r in zip(("x", "w1", "w2"), (x, w1, w2), ref)], TOL_OP * 4,
                  "mlp without biases")


def tiny_model(name, seed=0, **kw):
    """A tiny transformers model (2 layers, tiny_models.py's "gpu" widths) with random weights on the GPU
    in bf16: the CPU test's families (tests/python/test_torch_cpu.py)."""
    return tiny_models.build(name, "gpu", seed, **kw).to(DEV, torch.bfloat16)


FUSED_KIND = tiny_models.FUSED_KIND


def model_output(model, ids):
    out = model(input_ids=ids, use_cache=False) if hasattr(model, "lm_head") else model(input_ids=ids)
    return out.logits if hasattr(out, "logits") else out.last_hidden_state


def key_bias_floor(name, grads):
    """The key projection's bias (BERT's, Qwen2's) has a zero gradient in
    exact arithmetic (softmax does not see a constant added to a row's
    scores): rounding noise in both models, judged against a tenth of the
    key weight's gradient."""
    if name.endswith(("key.bias", "k_proj.bias")):
        return 0.1 * torch.linalg.norm(grads[name[:-4] + "weight"].double()).item()
    return 0.0


def test_patch_fuse_mlp_models():
    """patch(fuse_mlp=True) on tiny Llama, Mistral, Qwen2, Qwen3, GPT-2 and
    BERT: each layer's MLP fused (its epilogue kinds called; the gated ones
    also unfused, GatedEpilogue), outputs and every parameter's gradient
    against the unpatched deep copy."""
    for name in FUSED_KIND:
        for fused in (((True, True), (False, False), (True, False)) if FUSED_KIND[name] == "FusedGatedMLP"
                      else ((True, True),)):
            with GatedEpilogue(fused):
                patch_model_case(name, fused)


def patch_model_case(name, fused):
    ref = tiny_model(name, seed=list(FUSED_KIND).index(name))
    pat = tilekit.patch(copy.deepcopy(ref), fuse_mlp=True)
    mods = [m for m in pat.modules() if type(m).__mro__[1].__name__ == FUSED_KIND[name]]
    assert len(mods) == 2, "%s: %d fused modules" % (name, len(mods))
    ids = torch.randint(0, 1000, (2, 64), device=DEV)
    y_ref = model_output(ref, ids)
    with Counting() as c:
        y = model_output(pat, ids)
    want = ("gated",) if FUSED_KIND[name] == "FusedGatedMLP" else ("bias_act",)
    fwd, bwd = fused
    if not fwd:   # the gated MLP's forward unfused: two plain gate/up products a layer, no gated kind
        assert "gated" not in c.kinds and c.kinds.count(None) >= 6, (name, c.kinds)
    else:
        assert c.kinds.count(want[0]) >= 2, (name, c.kinds)
    close(y, y_ref, TOL_LOGITS, name + " output")
    g = bf16(*y.shape)
    (y_ref.float() * g).sum().backward()
    with Counting() as c:
        (y.float() * g).sum().backward()
    back = "gated_backward" if want[0] == "gated" else "backward"
    assert c.kinds.count(back) == (2 if bwd else 0), (name, c.kinds)
    grads = {k: p.grad for k, p in ref.named_parameters()}
    for k, p in pat.named_parameters():
        if grads[k] is None:
            continue
        den = max(torch.linalg.norm(grads[k].double()).item(), key_bias_floor(k, grads))
        e = torch.linalg.norm((p.grad - grads[k]).double()).item() / den
        assert e < TOL_GRAD, "%s grad %s: relative error %.3e > %.0e" % (name, k, e, TOL_GRAD)
        assert p.grad.stride() == p.stride(), "%s %s: gradient strides %s" % (name, k, p.grad.stride())


def test_fused_compile_fullgraph():
    """torch.compile(fullgraph=True) of gated_mlp, mlp and linear forward and
    backward, and of a patched Llama with fuse_mlp=True: no graph break,
    tilekit called from the compiled graphs, values and gradients as eager
    (the gated MLP through the gated kinds)."""
    with GatedEpilogue(True):
        fused_compile_fullgraph()


def fused_compile_fullgraph():
    wg, wu = (bf16(512, 256) * 0.2).requires_grad_(), (bf16(512, 256) * 0.2).requires_grad_()
    wd, b = (bf16(256, 512) * 0.2).requires_grad_(), bf16(512).requires_grad_()

    def f(x):
        h = tilekit.gated_mlp(x, wg, wu, wd)
        h = tilekit.mlp(h, wg, b, wd, None, "gelu_tanh")
        return tilekit.linear(h, wu, b, "silu").float().square().sum()

    x = bf16(2, 64, 256).requires_grad_()
    params = (x, wg, wu, wd, b)
    eager = f(x)
    eager.backward()
    grads = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    torch._dynamo.reset()
    comp = torch.compile(f, fullgraph=True)
    comp(x).backward()   # compiles
    for p in params:
        p.grad = None
    with Counting() as c:
        out = comp(x)
        out.backward()
    assert {"gated", "gated_backward", "bias_act", "backward"} <= set(c.kinds), c.kinds
    close(out, eager, TOL_LOGITS, "compiled")
    for p, want, name in zip(params, grads, ("x", "wg", "wu", "wd", "b")):
        close(p.grad, want, TOL_GRAD, "compiled d" + name)

    ref = llama(seed=5)
    pat = tilekit.patch(copy.deepcopy(ref), fuse_mlp=True)
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
    # per layer: q k v o and the gated MLP's two calls; the LM head
    assert c.n == 2 * 6 + 1 and c.kinds.count("gated") == 2, (c.n, c.kinds)
    close(out.logits, out_ref.logits, TOL_LOGITS, "compiled fused logits")
    out.loss.backward()
    pr, pp = projections(ref), projections(pat)
    for k in pr:
        close(pp[k].grad, pr[k].grad, TOL_GRAD, "compiled fused grad " + k)


def test_fused_cuda_graph():
    """A fused Llama forward (patch(fuse_mlp=True)) captured into a CUDA
    graph and replayed on new ids: gemm_epilogue allocates through torch on
    the capture stream and never synchronizes."""
    with GatedEpilogue(True):   # the gated kinds in the graph
        ref = llama(seed=6)
        pat = tilekit.patch(copy.deepcopy(ref), fuse_mlp=True)
        c = graph_replays(lambda ids: pat(ids, use_cache=False).logits, random_ids(), random_ids,
                          lambda ids: ref(ids, use_cache=False).logits, "fused")
        assert c.kinds.count("gated") == 2, c.kinds


# ---- issue 38: grouped and batched products, a mixture of experts ----

GROUPED = ("gemm_grouped", "gemm_batched")


def offsets(sizes):
    """int32 cumulative ends of groups of these sizes, on the GPU."""
    return torch.tensor(sizes, device=DEV).cumsum(0).to(torch.int32)


def loop(a, b, offs):
    """torch._grouped_mm's semantics as a loop of torch.matmul per group, in
    the inputs' dtype (fp64 for a reference; offs read on the host)."""
    if offs is None:
        return a @ b
    ends = [0] + offs.tolist()
    groups = range(len(ends) - 1)
    if a.dim() == 2 and b.dim() == 3:
        return torch.cat([a[ends[g]:ends[g + 1]] @ b[g] for g in groups])
    if a.dim() == 3 and b.dim() == 2:
        return torch.cat([a[g] @ b[:, ends[g]:ends[g + 1]] for g in groups], 1)
    return torch.stack([a[:, ends[g]:ends[g + 1]] @ b[ends[g]:ends[g + 1]] for g in groups])


def forms(sizes=(5, 0, 130, 17, 1), M=33, N=72, K=40):
    """The four forms of grouped_mm, {name: (a, b, offs)}, with an empty
    group, a group of one and sizes that are no tile multiple; b of the
    2-D x 3-D form as nn.Linear-style weights seen transposed (op T), a of
    the 2-D x 2-D form as x.t() (op T)."""
    G, total, offs = len(sizes), sum(sizes), offsets(sizes)
    return {
        "2-D x 3-D (rows)": (bf16(total, K), bf16(G, N, K).transpose(-2, -1), offs),
        "2-D x 2-D (K)": (bf16(total, M).t(), bf16(total, N), offs),
        "3-D x 2-D (N)": (bf16(G, M, K), bf16(K, total), offs),
        "3-D x 3-D (batched)": (bf16(G, M, K), bf16(G, K, N), None),
    }


def test_grouped_mm_values():
    """Each form: one tilekit call, the shape, dtype and values of a float64
    loop of torch.matmul; fp32 out; the operands' views used as they are
    (no copy: the pointers tilekit got are the tensors'). Then sizes that
    are multiples of 16 against torch._grouped_mm, where this torch and GPU
    have it (a form it refuses here is left to the loop)."""
    for name, (a, b, offs) in forms().items():
        with Counting(*GROUPED) as c:
            y = tilekit.grouped_mm(a, b, offs)
        assert c.n == 1, "%s: %d tilekit calls" % (name, c.n)
        args = c.calls[0][1]
        assert {t.data_ptr() for t in args[:2]} == {a.data_ptr(), b.data_ptr()}, "%s: an operand was copied" % name
        ref = loop(a.double(), b.double(), offs)
        assert y.shape == ref.shape and y.dtype == torch.bfloat16, (name, y.shape, y.dtype)
        close(y, ref, TOL_OP, name)
        y32 = tilekit.grouped_mm(a, b, offs, out_dtype=torch.float32)
        assert y32.dtype == torch.float32
        close(y32, ref, 3e-5, name + ", fp32 out")
    theirs = getattr(torch, "_grouped_mm", None)
    if theirs is None:
        print("     (this torch has no _grouped_mm: compared with the loop alone)")
        return
    for name, (a, b, offs) in forms((16, 0, 128, 32), 32, 64, 48).items():
        try:
            want = theirs(a, b, offs=offs)
        except RuntimeError as e:   # unsupported here (GPU, layout): the loop is the reference
            print("     (torch._grouped_mm refused %s: %s)" % (name, str(e).splitlines()[0]))
            continue
        close(tilekit.grouped_mm(a, b, offs), want.double(), TOL_OP * 2, name + " vs torch._grouped_mm")


def test_grouped_mm_empty_and_odd():
    """Sizes of 1, no rows at all, every group but one empty, one group; an
    empty group of the K split gives zeros; rows past offs[-1] are not
    computed (the reference covers the rest)."""
    for sizes, (M, N, K) in (((1, 1, 1), (1, 1, 1)), ((0, 0), (3, 5, 7)), ((0, 9, 0, 0), (5, 3, 2)),
                             ((13,), (7, 9, 11))):
        for name, (a, b, offs) in forms(sizes, M, N, K).items():
            y = tilekit.grouped_mm(a, b, offs)
            ref = loop(a.double(), b.double(), offs)
            label = "%s, sizes %s" % (name, sizes)
            assert y.shape == ref.shape, (label, y.shape, ref.shape)
            if bool((ref != 0).any()):
                close(y, ref, TOL_OP, label)
            else:   # every group empty: zeros (K split) or nothing at all
                assert bool((y == 0).all()), "%s: not zero" % label
    a, b, offs = forms((4, 0, 6), 5, 3, 8)["2-D x 2-D (K)"]
    assert bool((tilekit.grouped_mm(a, b, offs)[1] == 0).all()), "the empty group's product is not zero"
    x, w = bf16(20, 8), bf16(2, 6, 8)
    y = tilekit.grouped_mm(x, w.transpose(-2, -1), offsets([4, 10]))   # rows 14..19 belong to no group
    close(y[:14], loop(x.double(), w.double().transpose(-2, -1), offsets([4, 10])), TOL_OP, "rows past offs[-1]")


def test_grouped_mm_autograd():
    """Each form's gradients (the op again on transposed views: 3 tilekit
    calls) against float64 autograd through the loop; a weight leaf seen
    transposed gets its gradient in its own layout; an fp32 out's. Both
    eager paths: tilekit.grouped_mm (an autograd.Function) and the custom
    op torch.ops.tilekit.grouped_mm (its registered autograd formula)."""
    for (name, (a, b, offs)), fn in itertools.product(forms().items(),
                                                      (tilekit.grouped_mm, torch.ops.tilekit.grouped_mm)):
        name = "%s %s" % (name, "op" if fn is not tilekit.grouped_mm else "eager")
        a = a.detach().requires_grad_()
        b = b.detach().requires_grad_()
        y = fn(a, b, offs)
        g = bf16(*y.shape)
        with Counting(*GROUPED) as c:
            y.backward(g)
        assert c.n == 2, "%s: %d tilekit calls in backward" % (name, c.n)
        a64 = a.detach().double().requires_grad_()
        b64 = b.detach().double().requires_grad_()
        loop(a64, b64, offs).backward(g.double())
        close(a.grad, a64.grad, TOL_OP * 2, name + " da")
        close(b.grad, b64.grad, TOL_OP * 2, name + " db")
    w = bf16(5, 72, 40).requires_grad_()
    x = bf16(153, 40).requires_grad_()
    y = tilekit.grouped_mm(x, w.transpose(-2, -1), offsets([5, 0, 130, 17, 1]), out_dtype=torch.float32)
    y.backward(torch.randn_like(y))
    assert y.dtype == torch.float32 and w.grad.dtype == torch.bfloat16
    assert w.grad.is_contiguous(), "the weight's gradient arrives with strides %s" % (w.grad.stride(),)


def test_bmm():
    """torch.bmm's semantics: values, an expanded operand (batch stride 0)
    taken as it is, transposed matrices, fp32 out, and the gradients (two
    bmm's; autograd sums the expanded operand's)."""
    B, M, N, K = 6, 33, 40, 24
    base = bf16(M, K).requires_grad_()
    wt = bf16(B, N, K).requires_grad_()
    a = base.unsqueeze(0).expand(B, M, K)
    with Counting("gemm_batched") as c:
        y = tilekit.bmm(a, wt.transpose(-2, -1))
    assert c.n == 1 and c.calls[0][1][0].stride(0) == 0, "the expanded operand was copied"
    ref = a.double() @ wt.double().transpose(-2, -1)
    close(y, ref, TOL_OP, "bmm")
    close(tilekit.bmm(a, wt.transpose(-2, -1), out_dtype=torch.float32), ref, 3e-5, "bmm fp32 out")
    g = bf16(B, M, N)
    y.backward(g)
    b64 = base.detach().double().requires_grad_()
    w64 = wt.detach().double().requires_grad_()
    torch.bmm(b64.unsqueeze(0).expand(B, M, K), w64.transpose(-2, -1)).backward(g.double())
    close(base.grad, b64.grad, TOL_OP * 2, "bmm d(expanded a)")
    close(wt.grad, w64.grad, TOL_OP * 2, "bmm db")
    assert wt.grad.is_contiguous()
    base.grad = wt.grad = None   # the custom op's own autograd formula (tilekit.bmm skips its dispatch)
    torch.ops.tilekit.bmm(a, wt.transpose(-2, -1)).backward(g)
    close(base.grad, b64.grad, TOL_OP * 2, "op bmm d(expanded a)")
    close(wt.grad, w64.grad, TOL_OP * 2, "op bmm db")


def test_grouped_errors():
    x, w, offs = bf16(20, 8), bf16(3, 6, 8), offsets([5, 5, 10])
    raises(TypeError, tilekit.grouped_mm, x.float(), w.transpose(-2, -1), offs, match=("a", "bfloat16"))
    raises(TypeError, tilekit.grouped_mm, x, w.transpose(-2, -1), offs.long(), match=("offs", "torch.int32"))
    raises(TypeError, tilekit.grouped_mm, x, w.transpose(-2, -1), offs.cpu(), match=("offs", "cpu"))
    raises(ValueError, tilekit.grouped_mm, x, w.transpose(-2, -1), match=("offs", "required"))
    raises(ValueError, tilekit.grouped_mm, x, w.transpose(-2, -1), offs[:2], match=("2 offsets", "3 matrices"))
    raises(ValueError, tilekit.grouped_mm, x, w, offs, match="shape mismatch")
    raises(ValueError, tilekit.grouped_mm, bf16(3, 4, 8), w.transpose(-2, -1), offs, match=("offs", "batched"))
    raises(ValueError, tilekit.grouped_mm, x, w.transpose(-2, -1), offs.view(1, 3), match=("offs", "1-D"))
    raises(TypeError, tilekit.grouped_mm, x, w.transpose(-2, -1), offs, torch.float16, match="out_dtype")
    raises(ValueError, tilekit.bmm, x, w, match="3-D")
    raises(ValueError, tilekit.bmm, bf16(2, 4, 8), w.transpose(-2, -1), match=("2 matrices", "3"))


def route(tokens, experts, top_k, seed):
    """A router's choice: top_k distinct experts per token, and weights."""
    gen = torch.Generator(device=DEV).manual_seed(seed)
    logits = torch.randn(tokens, experts, device=DEV, generator=gen)
    w, idx = torch.topk(logits.softmax(-1), top_k, dim=-1)
    return idx, w / w.sum(-1, keepdim=True)


def moe(x, top_k_index, top_k_weights, w_gate_up, w_down, act=None):
    """A sparse MoE layer's experts on tilekit (tilekit.nn.moe_experts'
    docstring), device ops alone."""
    order, offs = tilekit.nn.sort_by_expert(top_k_index, w_gate_up.shape[0])
    token = order // top_k_index.shape[1]
    y = tilekit.nn.moe_experts(x[token], offs, w_gate_up, w_down, act)
    y = y * top_k_weights.reshape(-1)[order, None]
    return torch.zeros_like(x).index_add_(0, token, y.to(x.dtype))


def moe_loop(x, top_k_index, top_k_weights, w_gate_up, w_down):
    """The same in float64, token by token (transformers' eager experts)."""
    out = torch.zeros(x.shape, dtype=torch.float64, device=DEV)
    for t, (experts, weights) in enumerate(zip(top_k_index.tolist(), top_k_weights.tolist())):
        for e, wt in zip(experts, weights):
            gate, up = (x[t].double() @ w_gate_up[e].double().t()).chunk(2)
            out[t] += wt * ((torch.nn.functional.silu(gate) * up) @ w_down[e].double().t())
    return out


def test_grouped_compile_fullgraph():
    """torch.compile(fullgraph=True) of a MoE layer (routing by device ops,
    grouped_mm twice), a GroupedLinear with bias and a bmm: no graph break,
    tilekit called from the compiled graph, forward and gradients as eager."""
    E, H, I, top_k, T = 4, 64, 96, 2, 40
    lin = tilekit.nn.GroupedLinear(E, H, 48, bias=True, device=DEV, dtype=torch.bfloat16)
    w_gate_up = (bf16(E, 2 * I, H) * 0.2).requires_grad_()
    w_down = (bf16(E, H, I) * 0.2).requires_grad_()
    idx, wts = route(T, E, top_k, seed=5)

    def layer(x, b3):
        y = moe(x, idx, wts, w_gate_up, w_down)
        order, offs = tilekit.nn.sort_by_expert(idx[:, :1], E)
        z = lin(x[order], offs)
        return y.float().sum() + z.float().square().sum() + tilekit.bmm(b3, b3.mT).float().sum()

    x, b3 = bf16(T, H).requires_grad_(), bf16(3, 16, 8).requires_grad_()
    eager = layer(x, b3)
    eager.backward()
    grads = [t.grad.clone() for t in (x, w_gate_up, w_down, lin.weight, lin.bias, b3)]
    for t in (x, w_gate_up, w_down, lin.weight, lin.bias, b3):
        t.grad = None
    torch._dynamo.reset()
    comp = torch.compile(layer, fullgraph=True)
    comp(x, b3)   # compiles
    with Counting(*GROUPED) as c:
        out = comp(x, b3)
    assert c.n == 4, "%d tilekit calls from the compiled forward, expected 4" % c.n
    close(out, eager, TOL_LOGITS, "compiled forward")
    out.backward()
    for t, ref, label in zip((x, w_gate_up, w_down, lin.weight, lin.bias, b3), grads,
                             ("dx", "d w_gate_up", "d w_down", "d lin.weight", "d lin.bias", "d b3")):
        close(t.grad, ref, TOL_GRAD, "compiled " + label)


def test_grouped_cuda_graph():
    """A MoE layer (sort_by_expert's routing and two grouped products)
    captured into a CUDA graph, which fails on any host sync, and replayed
    on new tokens and a new routing: offs is never read on the host."""
    E, H, I, top_k, T = 4, 64, 96, 2, 48
    w_gate_up, w_down = bf16(E, 2 * I, H) * 0.2, bf16(E, H, I) * 0.2
    static_x = bf16(T, H)
    static_idx, static_w = route(T, E, top_k, seed=1)
    with torch.no_grad():
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                moe(static_x, static_idx, static_w, w_gate_up, w_down)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with Counting(*GROUPED) as c:
            with torch.cuda.graph(g):
                static_y = moe(static_x, static_idx, static_w, w_gate_up, w_down)
        assert c.n == 2, c.n
        for i in range(3):
            idx, wts = route(T, E, top_k, seed=10 + i)
            static_x.copy_(bf16(T, H))
            static_idx.copy_(idx)
            static_w.copy_(wts)
            g.replay()
            close(static_y, moe_loop(static_x, idx, wts, w_gate_up, w_down), TOL_LOGITS, "replay %d" % i)


def _moe_blocks():
    """(name, block) for the sparse MoE blocks of transformers that keep
    their experts as 3-D gate_up_proj (E x 2I x H) and down_proj (E x H x I)
    tensors, tiny and randomly initialized; [] without transformers."""
    try:
        import transformers
    except ImportError:
        return []
    blocks = []
    for cfg_name, block_path, kw in (
            ("MixtralConfig", "models.mixtral.modeling_mixtral.MixtralSparseMoeBlock",
             dict(num_local_experts=4, intermediate_size=96)),
            ("Qwen3MoeConfig", "models.qwen3_moe.modeling_qwen3_moe.Qwen3MoeSparseMoeBlock",
             dict(num_experts=4, moe_intermediate_size=96, norm_topk_prob=True))):
        cfg_cls = getattr(transformers, cfg_name, None)
        module, _, cls_name = block_path.rpartition(".")
        try:
            block_cls = getattr(__import__("transformers." + module, fromlist=[cls_name]), cls_name)
        except (ImportError, AttributeError):
            continue
        if cfg_cls is None:
            continue
        cfg = cfg_cls(hidden_size=64, num_experts_per_tok=2, num_attention_heads=4, num_key_value_heads=4,
                      num_hidden_layers=1, vocab_size=100, hidden_act="silu", **kw)
        if hasattr(cfg, "_experts_implementation"):   # a standalone block has none set: the stock loop
            cfg._experts_implementation = "eager"
        torch.manual_seed(7)
        block = block_cls(cfg).to(DEV, torch.bfloat16)
        with torch.no_grad():
            for p in block.parameters():
                p.normal_(0, 0.1)
        experts = getattr(block, "experts", None)
        gu, down = getattr(experts, "gate_up_proj", None), getattr(experts, "down_proj", None)
        if not (isinstance(gu, torch.Tensor) and isinstance(down, torch.Tensor) and gu.dim() == 3
                and gu.shape[1:] == (2 * 96, 64) and down.shape[1:] == (64, 96)):
            print("     (%s keeps its experts another way in transformers %s: not compared)"
                  % (block_cls.__name__, transformers.__version__))
            continue
        blocks.append((block_cls.__name__, block))
    return blocks


def tilekit_experts(experts):
    """A forward for transformers' experts module (hidden_states, top_k_index,
    top_k_weights), its loop over experts replaced by two grouped products."""
    def forward(hidden_states, top_k_index, top_k_weights):
        return moe(hidden_states, top_k_index, top_k_weights, experts.gate_up_proj, experts.down_proj,
                   getattr(experts, "act_fn", None))
    return forward


def test_moe_block_transformers():
    """transformers' MixtralSparseMoeBlock and Qwen3MoeSparseMoeBlock (tiny,
    random weights) with their experts' loop replaced by tilekit's grouped
    products: the block's output and the gradients of its input, router
    and experts match the stock block's."""
    blocks = _moe_blocks()
    if not blocks:
        print("     (transformers is not installed, or has neither block: not run)")
        return
    for name, ref in blocks:
        pat = copy.deepcopy(ref)
        pat.experts.forward = tilekit_experts(pat.experts)
        x = (torch.randn(2, 24, 64, device=DEV) * 0.5).to(torch.bfloat16)
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        out_ref = ref(x1)
        with Counting(*GROUPED) as c:
            out = pat(x2)
        out_ref, out = (o[0] if isinstance(o, tuple) else o for o in (out_ref, out))
        assert c.n == 2, "%s: %d tilekit calls, expected 2" % (name, c.n)
        close(out, out_ref, TOL_LOGITS, name + " output")
        g = bf16(*out.shape)
        out_ref.backward(g)
        out.backward(g)
        close(x2.grad, x1.grad, TOL_GRAD, name + " d input")
        for (k, p_ref), (_, p) in zip(ref.named_parameters(), pat.named_parameters()):
            want = p_ref.grad if p_ref.grad is not None else torch.zeros_like(p_ref)
            close(p.grad, want, TOL_GRAD, "%s d %s" % (name, k))


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


# ---- issue 40: FP8 quantization and products ----

from fp8_ref import dequant, grouped_operands, quantize_ref, same_bits, special_input  # noqa: E402 (tests/python is on sys.path)

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2
FP8_MODES = ("tensor", "row", "1x128", "128x128")


def fp8_same(q, s, rq, rs, label):
    """tilekit's (q, s) against the reference's, bit for bit (scales' NaNs alike)."""
    qb, rb = q.view(torch.uint8).cpu(), rq.view(torch.uint8)
    bad = (qb != rb).nonzero()
    assert not len(bad), "%s: code %s is 0x%02x, the reference's 0x%02x" % (
        label, tuple(bad[0].tolist()), qb[tuple(bad[0])], rb[tuple(bad[0])])
    # strides of dimensions of one element say nothing about the layout
    assert tuple(s.shape) == tuple(rs.shape) and all(
        a == b for a, b, n in zip(s.stride(), rs.stride(), s.shape) if n > 1), (label, s.shape, s.stride(), rs.stride())
    assert same_bits(s.cpu(), rs), "%s: scales differ" % label


def test_fp8_quantize_bit_exact():
    """tilekit.quantize_fp8 against fp8_ref.quantize_ref (on the CPU; itself
    checked against the lab's C reference by tests/python/test_torch_fp8_cpu.py),
    bit for bit: every mode and format at edge shapes, random and special
    inputs (zero, NaN, infinite, saturating, subnormal-range groups), a
    padded view and a transposed one."""
    n = 0
    for dtype in (E4M3, E5M2):
        for mode in FP8_MODES:
            for rows in (1, 7, 129, 300):
                for cols in (1, 5, 128, 200, 1500, 4100):
                    for specials in (False, True):
                        x = special_input(rows, cols, rows + cols) if specials else \
                            (torch.rand(rows, cols) * 8 - 4).to(torch.bfloat16)
                        q, s = tilekit.quantize_fp8(x.to(DEV), dtype, mode)
                        rq, rs = quantize_ref(x, dtype, mode)
                        fp8_same(q, s, rq, rs, "%s %s %dx%d%s" % (dtype, mode, rows, cols, " specials" * specials))
                        n += 1
    wide = special_input(300, 4200, 9).to(DEV)
    for mode in FP8_MODES:
        q, s = tilekit.quantize_fp8(wide[:, 3:4103], E4M3, mode)   # ldx 4200, x 6 bytes past the row: narrow loads
        rq, rs = quantize_ref(wide[:, 3:4103].cpu(), E4M3, mode)
        fp8_same(q, s, rq, rs, "%s padded view" % mode)
        q, s = tilekit.quantize_fp8(wide[:200, :300].t(), E5M2, mode)
        rq, rs = quantize_ref(wide[:200, :300].t().contiguous().cpu(), E5M2, mode)
        fp8_same(q, s, rq, rs, "%s transposed view" % mode)
    print("     %d shapes x modes x formats exact" % n)


def fp8_operands(m, n, k, fa, fb, mode):
    """tilekit-quantized a (M x K) and b = w.t() (K x N column-major) with
    scales for `mode`, and the float64 product of their dequantized values."""
    x = (torch.randn(m, k, device=DEV) * 2).to(torch.bfloat16)
    w = (torch.randn(n, k, device=DEV) / 4).to(torch.bfloat16)
    ma, mw = {"tensor": ("tensor", "tensor"), "row": ("row", "row"), "block": ("1x128", "128x128")}[mode]
    qa, sa = tilekit.quantize_fp8(x, fa, ma)
    qw, sw = tilekit.quantize_fp8(w, fb, mw)
    want = dequant(qa, sa, ma) @ dequant(qw, sw, mw).t()
    return qa, qw.t(), sa, (sw.t() if mode == "row" else sw), want


# FP8 products on Hopper's fast kernels sum each 128 of K in the FP8
# accumulator (13 bits after the largest addend) before the fp32
# promotion: 1.1e-4 norm-wise on uniform data at every K (tests/gpu/fp8_mma,
# docs/NOTES.md session 29); k01_naive's fp32 sums are far inside.
FP8_TOL_F32 = 1e-3


def test_fp8_scaled_mm():
    """tilekit.scaled_mm against the float64 product of the dequantized
    operands (fp32 out: the FP8 accumulator's error, FP8_TOL_F32; bf16 out: one rounding more),
    and against torch._scaled_mm where torch takes the call (tensor- and
    row-wise scales, sizes multiples of 16) within bf16's rounding; bias."""
    for mode, shapes in (("tensor", [(64, 96, 256), (7, 9, 40)]), ("row", [(128, 256, 512), (33, 20, 72)]),
                         ("block", [(128, 256, 512), (130, 257, 384)])):
        for m, n, k in shapes:
            for fa, fb in ((E4M3, E4M3), (E5M2, E4M3), (E4M3, E5M2)):
                label = "%s %s x %s %dx%dx%d" % (mode, fa, fb, m, n, k)
                a, b, sa, sb, want = fp8_operands(m, n, k, fa, fb, mode)
                close(tilekit.scaled_mm(a, b, sa, sb, out_dtype=torch.float32), want, FP8_TOL_F32, label + " fp32")
                y = tilekit.scaled_mm(a, b, sa, sb)
                assert y.dtype == torch.bfloat16 and y.shape == (m, n), (y.dtype, y.shape)
                close(y, want, TOL_OP, label + " bf16")
                bias = torch.randn(n, device=DEV).to(torch.bfloat16)
                close(tilekit.scaled_mm(a, b, sa, sb, bias=bias), want + bias.double(), TOL_OP, label + " bias")
                if mode != "block" and m % 16 == 0 and n % 16 == 0 and k % 16 == 0 and (fa, fb) != (E5M2, E5M2):
                    ref = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
                    close(y, ref.double(), 1e-2, label + " against torch._scaled_mm")
    a, b, sa, sb, _ = fp8_operands(64, 96, 256, E4M3, E4M3, "row")
    raises(ValueError, tilekit.scaled_mm, a, b, sa[:32], sb, match="scale_a, scale_b")
    raises(TypeError, tilekit.scaled_mm, a.cpu(), b, sa, sb, match="CUDA")


def test_fp8_linear():
    """tilekit.nn.Linear(fp8=...) against the bf16 torch.nn.Linear of the
    same weights, within FP8's error, for each scale option; the weight
    quantized again after an in-place update; forward only."""
    for fmt, scale, tol in (("e4m3", "row", 0.05), ("e4m3", "tensor", 0.06), ("e4m3", "block", 0.05),
                            ("e5m2", "row", 0.1)):
        lin = tilekit.nn.Linear(512, 384, dtype=torch.bfloat16, device=DEV, fp8=fmt, scale=scale)
        ref = torch.nn.Linear(512, 384, dtype=torch.bfloat16, device=DEV)
        ref.load_state_dict(lin.state_dict())
        x = torch.randn(4, 33, 512, device=DEV).to(torch.bfloat16)
        with torch.no_grad():
            y, want = lin(x), ref(x)
            close(y, want, tol, "Linear fp8=%s scale=%s" % (fmt, scale))
            lin.weight.mul_(-1)
            ref.weight.mul_(-1)
            close(lin(x), ref(x), tol, "Linear fp8=%s scale=%s after an update" % (fmt, scale))
    raises(RuntimeError, lin, x, match="forward only")


def test_fp8_compile_fullgraph():
    """torch.compile(fullgraph=True) through tilekit::quantize_fp8 and
    tilekit::scaled_mm (inductor): the eager bits; a Linear(fp8) compiled
    (its weight quantized inside the graph) gives its eager output."""
    torch._dynamo.reset()

    def f(x, w, bias):
        qx, sx = tilekit.quantize_fp8(x, E4M3, "1x128")
        qw, sw = tilekit.quantize_fp8(w, E4M3, "128x128")
        return tilekit.scaled_mm(qx, qw.t(), sx, sw, bias=bias)

    x, w = bf16(130, 256), bf16(200, 256)
    bias = bf16(200)
    want = f(x, w, bias)
    got = torch.compile(f, fullgraph=True)(x, w, bias)
    assert torch.equal(got, want), (got - want).abs().max()
    lin = tilekit.nn.Linear(256, 200, dtype=torch.bfloat16, device=DEV, fp8="e4m3", scale="row")
    with torch.no_grad():
        want = lin(x)
        got = torch.compile(lin, fullgraph=True)(x)
    assert torch.equal(got, want), (got - want).abs().max()


def test_fp8_cuda_graph():
    """quantize_fp8 ("tensor": the memset and both kernels) and scaled_mm
    captured in a CUDA graph, replayed on new inputs: the eager results."""
    x, w = bf16(64, 512), bf16(96, 512)

    def f():
        qx, sx = tilekit.quantize_fp8(x, E4M3, "tensor")
        qw, sw = tilekit.quantize_fp8(w, E4M3, "tensor")
        return tilekit.scaled_mm(qx, qw.t(), sx, sw)

    f()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = f()
    for _ in range(2):
        x.copy_(bf16(64, 512) * 3)
        w.copy_(bf16(96, 512))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(y, f()), "replay differs from eager"


def grouped_close(y, want, offs, tol, label):
    """y against want group by group (rows grouped: each group's rows, so
    that a wrong 1-row group is not lost in the norm; batched: each batch)."""
    want = want.to(y.device)
    if offs is None:
        for z in range(y.shape[0]):
            close(y[z], want[z], tol, "%s batch %d" % (label, z))
        return
    start = 0
    for g, end in enumerate(offs.tolist()):
        if end > start:
            close(y[start:end], want[start:end], tol, "%s group %d (rows %d..%d)" % (label, g, start, end - 1))
        start = end


def test_fp8_scaled_grouped_mm():
    """tilekit.scaled_grouped_mm against the float64 products of the
    dequantized operands group by group (fp32 out: FP8_TOL_F32; bf16 out:
    TOL_OP): rows grouped with empty groups, a 1-row group and rows past
    offs[-1] (not compared: not written), and batched; every scale mode,
    e4m3 and e5m2 in each pairing, b as torch's transposed view and
    row-major, padded scale sets. Then against torch._scaled_grouped_mm
    where torch takes the call (row-wise, e4m3, groups of multiples of
    16): a refusal of torch's is printed and skipped, not failed."""
    for mode, n, k in (("tensor", 130, 200), ("row", 258, 200), ("block", 258, 384)):
        for fa, fb in ((E4M3, E4M3), (E5M2, E4M3), (E4M3, E5M2), (E5M2, E5M2)):
            label = "%s %s x %s" % (mode, fa, fb)
            a, b, sa, sb, offs, want = grouped_operands([0, 37, 1, 0, 130, 5, 0], n, k, fa, fb, mode, n + k, DEV)
            y = tilekit.scaled_grouped_mm(a, b, sa, sb, offs, out_dtype=torch.float32)
            assert y.shape == (173, n) and y.dtype == torch.float32, (y.shape, y.dtype)
            grouped_close(y, want, offs, FP8_TOL_F32, label + " fp32")
            y = tilekit.scaled_grouped_mm(a, b, sa, sb, offs)
            assert y.dtype == torch.bfloat16
            grouped_close(y, want, offs, TOL_OP, label + " bf16")
            grouped_close(tilekit.scaled_grouped_mm(a, b.contiguous(), sa, sb, offs, torch.float32), want, offs,
                          FP8_TOL_F32, label + " b row-major")
            padded = torch.empty_strided(sb.shape, (2 * sb.stride(0) + 3,) + sb.stride()[1:], device=DEV).copy_(sb)
            grouped_close(tilekit.scaled_grouped_mm(a, b, sa, padded, offs, torch.float32), want, offs,
                          FP8_TOL_F32, label + " padded scale_b")
            short = offs.clone()
            short[-2:] = 170   # the 5-row group cut to 2 rows: the last 3 rows in no group
            grouped_close(tilekit.scaled_grouped_mm(a, b, sa, sb, short, torch.float32), want, short,
                          FP8_TOL_F32, label + " rows past offs[-1]")
            a, b, sa, sb, _, want = grouped_operands((3, 33), n, k, fa, fb, mode, n * k, DEV)
            grouped_close(tilekit.scaled_grouped_mm(a, b, sa, sb, out_dtype=torch.float32), want, None,
                          FP8_TOL_F32, label + " batched")
    # empty: M = 0, no group, K = 0
    a, b, sa, sb, offs, _ = grouped_operands([0, 0], 64, 128, E4M3, E4M3, "row", 1, DEV)
    assert tilekit.scaled_grouped_mm(a, b, sa, sb, offs).shape == (0, 64)
    z = torch.zeros(4, 0, device=DEV).to(E4M3)
    y = tilekit.scaled_grouped_mm(z, torch.zeros(2, 0, 8, device=DEV).to(E4M3), torch.ones(4, device=DEV),
                                  torch.ones(2, 8, device=DEV), torch.tensor([1, 4], dtype=torch.int32, device=DEV))
    assert torch.equal(y, torch.zeros(4, 8, dtype=torch.bfloat16, device=DEV))
    # torch's own, where it takes the call
    for sizes in ([0, 32, 16, 0, 144], (4, 64)):
        a, b, sa, sb, offs, want = grouped_operands(sizes, 256, 512, E4M3, E4M3, "row", 5, DEV)
        y = tilekit.scaled_grouped_mm(a, b, sa, sb, offs)
        try:
            ref = torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16)
        except (RuntimeError, NotImplementedError, AttributeError) as e:
            print("     torch._scaled_grouped_mm %s: skipped (torch refused: %s)" % (
                "rows" if offs is not None else "batched", str(e).splitlines()[0][:160]))
            continue
        grouped_close(y, ref.double(), offs, 1e-2, "against torch._scaled_grouped_mm %s" % (sizes,))
    a, b, sa, sb, offs, _ = grouped_operands([3, 0, 5], 64, 128, E4M3, E4M3, "row", 2, DEV)
    raises(ValueError, tilekit.scaled_grouped_mm, a, b, sa, sb, offs.flip(0), match=("offs:", "is below"))
    raises(ValueError, tilekit.scaled_grouped_mm, a, b, sa, sb, offs + 1, match=("offs:", "past a's 8 rows"))
    raises(TypeError, tilekit.scaled_grouped_mm, a.cpu(), b, sa, sb, offs, match=("a:", "CUDA"))
    raises(TypeError, tilekit.scaled_grouped_mm, a, b, sa, sb, offs.cpu(), match=("offs:", "CUDA"))
    raises(ValueError, tilekit.scaled_grouped_mm, a, b, sa, sb[:, :32], offs, match="scale_a, scale_b")
    tilekit.scaled_grouped_mm(a, b, sa, sb, offs.flip(0), check_offs=False)   # the library skips the bad groups
    torch.cuda.synchronize()


def test_fp8_scaled_grouped_mm_compile_and_graph():
    """torch.compile(fullgraph=True) (inductor) through
    tilekit::scaled_grouped_mm, and a CUDA graph capturing it (offs not read
    on the host) replayed on new offsets: the eager bits."""
    a, b, sa, sb, offs, _ = grouped_operands([5, 0, 40, 1], 96, 256, E4M3, E4M3, "block", 7, DEV)
    torch._dynamo.reset()

    def f(a, b, sa, sb, offs):
        return tilekit.scaled_grouped_mm(a, b, sa, sb, offs, out_dtype=torch.float32)

    want = f(a, b, sa, sb, offs)
    got = torch.compile(f, fullgraph=True)(a, b, sa, sb, offs)
    assert torch.equal(got, want), (got - want).abs().max()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = f(a, b, sa, sb, offs)
    for ends in ([46, 46, 46, 46], [0, 10, 20, 46]):
        offs.copy_(torch.tensor(ends, dtype=torch.int32))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(y[:46], f(a, b, sa, sb, offs)[:46]), "replay differs from eager, offs %s" % ends


def main():
    torch.manual_seed(0)
    print("tilekit %s from %s (backend: %s), torch %s" % (tilekit.__version__, os.path.dirname(tilekit.__file__),
                                                          tilekit.backend(), torch.__version__))
    return run_tests(globals(), sys.argv)


if __name__ == "__main__":
    sys.exit(main())
