"""Issue 39's torch side on the CPU, no GPU: tilekit.patch(model,
fuse_mlp=True) on tiny transformers models built from configs (Llama,
Mistral, Qwen2, Qwen3, GPT-2, BERT; random weights, no download), and the
fused ops' forward and backward formulas.

Which modules patch fuses and which it leaves alone (unrecognized
activations, hooks, other modules), with state_dict keys, parameter objects
and an optimizer made before the patch unchanged. Then the formulas:
tilekit's two entry points, tilekit.gemm and tilekit.gemm_epilogue (looked
up per call by the ops), are replaced by Float64Tilekit, a double that
computes include/tilekit.h's epilogue formulas in float64 torch on the
operands as given (views, transposes and strides included: it refuses what
the library refuses, D or aux not row-major, overlaps, shapes) and rounds
once into the outputs; with "cpu" among the fused devices the patched
models run their fused forward on the CPU, and their logits and every
parameter's gradient are compared with the stock model's (bf16 both) in
bf16 tolerance, as tests/gpu/test_torch.py does on the GPU. Also
tilekit.linear, gated_mlp and mlp against float64 autograd, and
torch.compile(fullgraph=True, backend="aot_eager") through the custom ops.

Needs torch and transformers (.ci/run's torch-cpu step installs them into a
virtual environment); without them the file defines no test and says so.
"""
import copy
import itertools
import math

try:
    import torch
    import transformers  # noqa: F401 (tiny_models needs it: the tests are defined only with it)
except ImportError as e:
    torch = None
    print("test_torch_cpu: skipped (%s; .ci/run's torch-cpu step runs it with torch and transformers)" % e)

if torch is not None:
    import tilekit
    import tilekit.nn
    from tilekit import _torch_fused
    from test_wrapper import raises
import tiny_models   # noqa: E402 (its lists need no torch)

# Relative Frobenius errors, patched against stock, both bf16 (the GPU test's).
TOL_LOGITS = 2e-2
TOL_GRAD = 5e-2
TOL_OP = 1e-2        # one op against float64 autograd of the same bf16 inputs: a few bf16 roundings


# ---- the double of tilekit's two entry points ----

SQRT1_2 = 1 / math.sqrt(2)


def act64(x, act):
    """act(x), include/tilekit.h's tk_activation, in float64."""
    if act == "relu":
        return x.clamp(min=0)
    if act == "gelu":
        return 0.5 * x * (1 + torch.erf(x * SQRT1_2))
    if act == "gelu_tanh":
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if act == "silu":
        return x * torch.sigmoid(x)
    assert act is None, act
    return x


def act_grad64(x, act):
    """act'(x) in float64, include/tilekit.h's derivatives (written here
    again, not the ops' act_grad under test: the standalone linear's
    backward is compared with torch's autograd)."""
    if act == "relu":
        return (x > 0).double()
    if act == "gelu":
        return 0.5 * (1 + torch.erf(x * SQRT1_2)) + x * torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    if act == "gelu_tanh":
        c = math.sqrt(2 / math.pi)
        t = torch.tanh(c * (x + 0.044715 * x ** 3))
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x)
    if act == "silu":
        s = torch.sigmoid(x)
        return s * (1 + x * (1 - s))
    raise AssertionError(act)


def storage(t):
    return t.untyped_storage().data_ptr()


class Float64Tilekit:
    """tilekit.gemm and tilekit.gemm_epilogue as float64 torch on CPU
    tensors, while active; the fused ops run on the CPU too. .calls lists
    the epilogue kind of each call (None: a plain product). gated: the
    gated MLP's (forward, backward) through the gated epilogue kinds
    (_torch_fused.GATED_FORWARD, GATED_BACKWARD) or unfused; one bool: both."""

    def __init__(self, gated=True):
        self.gated = gated if isinstance(gated, tuple) else (gated, gated)

    def __enter__(self):
        self.calls = []
        self.saved = (tilekit.gemm, tilekit.gemm_epilogue, _torch_fused.FUSED_DEVICES, _torch_fused.GATED_FORWARD,
                      _torch_fused.GATED_BACKWARD)
        tilekit.gemm, tilekit.gemm_epilogue = self.gemm, self.gemm_epilogue
        _torch_fused.FUSED_DEVICES = ("cuda", "cpu")
        _torch_fused.GATED_FORWARD, _torch_fused.GATED_BACKWARD = self.gated
        return self

    def __exit__(self, *exc):
        (tilekit.gemm, tilekit.gemm_epilogue, _torch_fused.FUSED_DEVICES, _torch_fused.GATED_FORWARD,
         _torch_fused.GATED_BACKWARD) = self.saved

    def gemm(self, A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None,
             *, stream=None):
        assert out is not None, "the ops pass out"
        return self.run(A, B, out, alpha, beta, trans_a, trans_b, None)

    def gemm_epilogue(self, A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, kernel=None, *,
                      epilogue=None, activation=None, bias=None, bias_along="columns", b_up=None, d=None, aux=None,
                      bias_grad=None, stream=None):
        return self.run(A, B, out, alpha, beta, trans_a, trans_b, epilogue, activation, bias, bias_along, b_up, d,
                        aux, bias_grad)

    def run(self, A, B, out, alpha, beta, trans_a, trans_b, kind, act=None, bias=None, bias_along="columns",
            b_up=None, d=None, aux=None, bias_grad=None):
        self.calls.append(kind)
        for name, x in (("A", A), ("B", B), ("b_up", b_up)):
            if x is not None:
                assert x.dtype == torch.bfloat16 and x.dim() == 2, "%s: %s %s" % (name, x.dtype, tuple(x.shape))
        a = A.double().t() if trans_a else A.double()
        b = B.double().t() if trans_b else B.double()
        assert a.shape[1] == b.shape[0], "inner dimensions %s %s" % (tuple(a.shape), tuple(b.shape))
        if b_up is not None:
            assert kind == "gated" and b_up.shape == B.shape and b_up.stride() == B.stride(), \
                "b_up: shape %s strides %s, B's %s %s" % (tuple(b_up.shape), b_up.stride(), tuple(B.shape), B.stride())
            b = torch.cat([b, b_up.double().t() if trans_b else b_up.double()], 1)
        p = alpha * (a @ b)
        m, n = p.shape
        width = n // 2 if kind == "gated" else 2 * n if kind == "gated_backward" else n
        dst = d if d is not None else out
        assert dst.shape == (m, width), "D: %s, expected %d x %d (%s)" % (tuple(dst.shape), m, width, kind)
        assert dst.dtype in (torch.bfloat16, torch.float32)
        reads, written = [A, B] + ([b_up] if b_up is not None else []), [dst]
        if kind is not None:
            assert dst.stride(1) == 1 or m <= 1, "D strides %s: epilogues take row-major D" % (dst.stride(),)
        if bias is not None:
            assert kind in ("bias_act", "gated") and bias_along == "columns", (kind, bias_along)
            assert bias.shape == (n,) and bias.dtype in (torch.bfloat16, torch.float32), tuple(bias.shape)
            p = p + bias.double()
            reads.append(bias)
        if aux is not None:
            assert aux.dtype == torch.bfloat16 and aux.stride(1) == 1, "aux: %s %s" % (aux.dtype, aux.stride())
            assert aux.shape == (m, 2 * n if kind == "gated_backward" else n), tuple(aux.shape)
            (reads if kind in ("backward", "gated_backward") else written).append(aux)
        if kind is None:
            r = p
        elif kind == "bias_act":
            r = act64(p, act)
        elif kind == "gated":
            assert act is not None and n % 2 == 0
            r = act64(p[:, :n // 2], act) * p[:, n // 2:]
        elif kind == "backward":
            assert act is not None and aux is not None, "backward needs its activation and aux"
            r = p * act_grad64(aux.double(), act)
        elif kind == "gated_backward":
            assert act is not None and aux is not None and beta == 0, "gated_backward: act, aux, beta 0"
            zg, zu = aux.double()[:, :n], aux.double()[:, n:]
            r = torch.cat([p * zu * act_grad64(zg, act), p * act64(zg, act)], 1)
        else:
            raise AssertionError("epilogue %r" % kind)
        if beta:
            assert out is not None
            r = r + beta * out.double()
        if bias_grad is not None:
            assert kind in ("backward", "gated_backward") and bias_grad.dtype == torch.float32
            assert bias_grad.shape == (width,), tuple(bias_grad.shape)
            written.append(bias_grad)
        for w in written:
            for x in reads:
                assert storage(w) != storage(x), "an output overlaps an input"
        if aux is not None and kind in ("bias_act", "gated"):
            aux.copy_(p.to(torch.bfloat16))
        if bias_grad is not None:
            bias_grad.copy_(r.sum(0))
        dst.copy_(r.to(dst.dtype))
        return dst


# ---- tiny transformers models ----


def build(name, seed=0, **kw):
    """A tiny random transformers model (2 layers, tiny_models.py's "cpu" widths) on the CPU in bf16, kw
    into its config."""
    model = tiny_models.build(name, "cpu", seed, **kw)
    with torch.no_grad():   # weights larger than the 0.02 std init, so every path carries signal
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.15)
            else:
                p.add_(torch.randn_like(p) * 0.05)
    return model.to(torch.bfloat16)


MODELS = tiny_models.MODELS
EXPECTED = tiny_models.FUSED_KIND   # the fused class each model's MLPs get (one per layer)


def run_model(model, ids, g):
    """(the output compared, a scalar to backpropagate)."""
    out = model(input_ids=ids)
    y = out.logits if hasattr(out, "logits") else out.last_hidden_state
    return y, (y.float() * g).sum()


def fused_modules(model):
    fused = (tilekit.nn.FusedGatedMLP, tilekit.nn.FusedConv1DMLP, tilekit.nn.FusedFeedForward,
             tilekit.nn.FusedSequentialMLP)
    return [m for m in model.modules() if isinstance(m, fused)]


def rel(x, ref, floor=0.0):
    """||x - ref|| / max(||ref||, floor)."""
    x, ref = x.double(), ref.double()
    assert bool(torch.isfinite(x).all()), "NaN/Inf"
    return (torch.linalg.norm(x - ref) / max(torch.linalg.norm(ref).item(), floor)).item()


def close(x, ref, tol, label, floor=0.0):
    e = rel(x, ref, floor)
    assert e < tol, "%s: relative error %.3e > %.0e" % (label, e, tol)
    return e


# ---- which modules patch fuses ----


def test_activation_names():
    """What patch recognizes as an activation (ACT2FN's entries, torch's modules and functions), and what not."""
    from transformers.activations import ACT2FN
    from tilekit._torch_patch import activation_name as name
    F = torch.nn.functional
    known = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu_tanh",
             "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu"}
    for key, want in known.items():
        assert name(ACT2FN[key]) == want, (key, name(ACT2FN[key]))
    for m, want in ((torch.nn.SiLU(), "silu"), (torch.nn.GELU(), "gelu"), (torch.nn.GELU("tanh"), "gelu_tanh"),
                    (torch.nn.ReLU(inplace=True), "relu"), (F.silu, "silu"), (F.gelu, "gelu"), (F.relu, "relu"),
                    (torch.relu, "relu")):
        assert name(m) == want, (m, name(m))
    for key in ("gelu_fast", "quick_gelu", "relu2", "gelu_10", "mish", "tanh", "leaky_relu", "linear"):
        assert name(ACT2FN[key]) is None, key
    for m in (torch.nn.Tanh(), torch.nn.Identity(), None, torch.sigmoid, lambda x: x):
        assert name(m) is None, m


def test_patch_fuses_the_mlps():
    """Each model: its MLPs fused (the right kind, one per layer), their
    Linears left torch.nn.Linear, every other torch.nn.Linear a
    tilekit.nn.Linear; state_dict keys, parameter objects and an
    optimizer made before the patch unchanged; a second patch changes nothing."""
    for name in MODELS:
        model = build(name)
        keys = list(model.state_dict())
        params = [(k, id(p)) for k, p in model.named_parameters()]
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        before = {id(m): type(m) for m in model.modules()}
        assert tilekit.patch(model, fuse_mlp=True) is model
        fused = fused_modules(model)
        assert len(fused) == 2 and all(type(m).__mro__[1].__name__ == EXPECTED[name] for m in fused), \
            "%s: %s" % (name, [type(m).__name__ for m in fused])
        for m in fused:
            assert isinstance(m, before[id(m)]) and type(m).__name__ == "Tilekit" + before[id(m)].__name__
        parts = {id(p) for m in fused for p in m.tilekit_parts()}
        for m in model.modules():
            if id(m) in parts:
                assert type(m) is before[id(m)], "%s: a fused module's part became %s" % (name, type(m))
            elif before[id(m)] is torch.nn.Linear:
                assert type(m) is tilekit.nn.Linear, "%s: %s" % (name, type(m))
            elif m not in fused:
                assert type(m) is before[id(m)], "%s: %s changed class" % (name, before[id(m)].__name__)
        assert list(model.state_dict()) == keys, name
        assert [(k, id(p)) for k, p in model.named_parameters()] == params, name
        held = [id(p) for group in opt.param_groups for p in group["params"]]
        assert held == [i for _, i in params], name
        snapshot = {id(m): type(m) for m in model.modules()}
        tilekit.patch(model, fuse_mlp=True)
        tilekit.patch(model)
        assert {id(m): type(m) for m in model.modules()} == snapshot, "%s: a second patch changed classes" % name


def test_patch_leaves_others_alone():
    """Unrecognized activations, hooks on a fused module's parts,
    Sequentials of another shape, fuse_mlp=False: not fused."""
    model = build("llama", hidden_act="relu2")
    tilekit.patch(model, fuse_mlp=True)
    assert not fused_modules(model)
    assert all(type(m.mlp.gate_proj) is tilekit.nn.Linear for m in model.model.layers)
    model = build("gpt2", activation_function="quick_gelu")
    tilekit.patch(model, fuse_mlp=True)
    assert not fused_modules(model)
    model = build("llama")
    model.model.layers[0].mlp.up_proj.register_forward_hook(lambda *a: None)
    tilekit.patch(model, fuse_mlp=True)
    assert [type(m).__name__ for m in fused_modules(model)] == ["TilekitLlamaMLP"]
    assert type(model.model.layers[0].mlp).__name__ == "LlamaMLP"
    model = build("qwen3")
    tilekit.patch(model)
    assert not fused_modules(model)
    assert all(type(m.mlp.down_proj) is tilekit.nn.Linear for m in model.model.layers)
    L = torch.nn.Linear
    seqs = [torch.nn.Sequential(L(8, 16), torch.nn.GELU("tanh"), L(16, 8)),
            torch.nn.Sequential(L(8, 16), torch.nn.Tanh(), L(16, 8)),
            torch.nn.Sequential(L(8, 16), torch.nn.GELU(), L(16, 8), torch.nn.ReLU()),
            torch.nn.Sequential(L(8, 16), torch.nn.SiLU(), torch.nn.Dropout(0.1))]
    net = torch.nn.Sequential(*seqs)
    tilekit.patch(net, fuse_mlp=True)
    assert [isinstance(s, tilekit.nn.FusedSequentialMLP) for s in net] == [True, False, False, False]
    assert net[0].tilekit_activation == "gelu_tanh" and type(net[0][0]) is torch.nn.Linear
    assert type(net[1][0]) is tilekit.nn.Linear and type(net[3][0]) is tilekit.nn.Linear


def test_stock_forward_off_cuda():
    """The fused modules run their own forward where the rule says so:
    on the CPU (without the tests' "cpu" among the fused devices) and in
    fp32: the stock model's results, bit for bit, and no tilekit call."""
    for dtype in (torch.bfloat16, torch.float32):
        ref = build("llama").to(dtype)
        pat = tilekit.patch(copy.deepcopy(ref), fuse_mlp=True)
        for m in pat.modules():   # the attention's Linears back to torch's: this test is about the MLPs
            if type(m) is tilekit.nn.Linear:
                m.__class__ = torch.nn.Linear
        ids = torch.randint(0, 96, (2, 9))
        called = []
        saved = tilekit.gemm_epilogue
        tilekit.gemm_epilogue = lambda *a, **k: called.append(1)
        try:
            y = pat(input_ids=ids).logits
        finally:
            tilekit.gemm_epilogue = saved
        assert not called and torch.equal(y, ref(input_ids=ids).logits), dtype


def model_case(name, gated=True):
    def test():
        """The patched model's fused forward and backward (tilekit's
        calls by the float64 double) against the stock model: logits and
        every parameter's gradient."""
        ref = build(name, seed=MODELS.index(name))
        pat = tilekit.patch(copy.deepcopy(ref), fuse_mlp=True)
        ids = torch.randint(0, 96, (2, 13), generator=torch.Generator().manual_seed(1))
        g = torch.randn(ids.shape + (pat.config.hidden_size if name == "bert" else pat.config.vocab_size,),
                        generator=torch.Generator().manual_seed(2))
        y_ref, loss_ref = run_model(ref, ids, g)
        loss_ref.backward()
        with Float64Tilekit(gated) as fake:
            y, loss = run_model(pat, ids, g)
            forward = list(fake.calls)
            loss.backward()
        kinds = {"gpt2": ("bias_act", "backward"), "bert": ("bias_act", "backward")}.get(name,
                                                                                        ("gated", "gated_backward"))
        fwd, bwd = gated if isinstance(gated, tuple) else (gated, gated)
        if name in ("gpt2", "bert"):
            assert forward.count(kinds[0]) >= 2 and fake.calls.count(kinds[1]) == 2, (forward, fake.calls)
        else:   # the gated MLP, each half fused or not: the gated kinds, or plain gate/up products
            assert forward.count("gated") == (2 if fwd else 0) and (fwd or forward.count(None) >= 4), forward
            assert fake.calls.count("gated_backward") == (2 if bwd else 0), fake.calls
        errs = [close(y, y_ref, TOL_LOGITS, name + " output")]
        grads = dict(ref.named_parameters())
        for k, p in pat.named_parameters():
            want = grads[k].grad
            if want is None:
                assert p.grad is None or not p.grad.any(), k
                continue
            assert p.grad is not None, "%s: no gradient for %s" % (name, k)
            assert p.grad.shape == p.shape and p.grad.stride() == p.stride(), \
                "%s %s: gradient strides %s, parameter's %s" % (name, k, p.grad.stride(), p.stride())
            # the key projection's bias (BERT's, Qwen2's): a zero gradient in exact arithmetic (softmax does
            # not see a constant added to every score of a row), rounding noise in both; judged against a
            # tenth of their weight's gradient
            key_bias = k.endswith(("key.bias", "k_proj.bias"))
            floor = 0.1 * grads[k[:-4] + "weight"].grad.double().norm().item() if key_bias else 0.0
            errs.append(close(p.grad, want, TOL_GRAD, "%s grad %s" % (name, k), floor))
        print("     %s: output rel err %.2e, max grad rel err %.2e over %d parameters"
              % (name, errs[0], max(errs[1:]), len(errs) - 1))
    test.__name__ = "test_model_" + name + {True: "", False: "_unfused"}.get(gated, "_default")
    return test


def test_act_grad_is_torch_derivative():
    """The standalone linear's act'(z) (fp32, the kernels' tk_act_grad
    formulas) against torch's autograd of its own activations in float64."""
    F = torch.nn.functional
    z = torch.linspace(-9, 9, 2001).to(torch.bfloat16)   # z as the forward stores it
    for act, fn in (("relu", F.relu), ("gelu", F.gelu), ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
                    ("silu", F.silu)):
        x = z.double().requires_grad_()
        want, = torch.autograd.grad(fn(x).sum(), x)
        err = (_torch_fused.act_grad(z, act).double() - want).abs().max().item()
        assert err < 2e-6, "%s: act' differs from torch's by %.2e" % (act, err)
    raises(ValueError, _torch_fused.act_grad, z, "tanh", match="activation")


def test_linear_vs_float64():
    """tilekit.linear for each activation, with and without bias, at odd
    shapes and batch dimensions: values and gradients against float64
    autograd of the same bf16 inputs; the weight's gradient in its layout."""
    gen = torch.Generator().manual_seed(3)
    with Float64Tilekit() as fake:
        for act in (None,) + _torch_fused.ACTIVATIONS:
            for has_bias in (False, True):
                for shape, k, n in (((7,), 13, 5), ((2, 3, 17), 17, 9), ((33,), 64, 1)):
                    shape = shape[:-1] + (k,) if len(shape) > 1 else shape + (k,)
                    x = torch.randn(shape, generator=gen).to(torch.bfloat16).requires_grad_()
                    w = (torch.randn(n, k, generator=gen) * 0.4).to(torch.bfloat16).requires_grad_()
                    b = torch.randn(n, generator=gen).to(torch.bfloat16).requires_grad_() if has_bias else None
                    y = tilekit.linear(x, w, b, act)
                    assert y.shape == shape[:-1] + (n,) and y.dtype == torch.bfloat16
                    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
                    b64 = b.detach().double().requires_grad_() if has_bias else None
                    y64 = act64(torch.nn.functional.linear(x64, w64, b64), act)
                    label = "linear %s bias=%s %s" % (act, has_bias, shape)
                    close(y, y64, TOL_OP, label)
                    dy = torch.randn(y.shape, generator=gen).to(torch.bfloat16)
                    y.backward(dy)
                    y64.backward(dy.double())
                    close(x.grad, x64.grad, TOL_OP * 2, label + " dx")
                    close(w.grad, w64.grad, TOL_OP * 2, label + " dw")
                    assert w.grad.is_contiguous(), w.grad.stride()
                    if has_bias:
                        close(b.grad, b64.grad, TOL_OP * 2, label + " db")
    assert "bias_act" in fake.calls and None in fake.calls
    raises(ValueError, tilekit.linear, x, w, None, "tanh", match=("activation", "'tanh'"))
    raises(TypeError, tilekit.linear, x.float(), w, b, "gelu", match="bfloat16")
    raises(ValueError, tilekit.linear, x, w[:, :3], b, "gelu", match="shape mismatch")


def test_linear_route_by_strides():
    """tilekit.linear fuses the bias and the activation ("bias_act") where
    TMA takes the strides (multiples of 8 elements), and otherwise runs the
    plain product (routed by tilekit to a fast kernel) with the bias and
    the activation in torch, never k01_naive's fused call."""
    gen = torch.Generator().manual_seed(5)
    cases = ((16, 24, ["bias_act"]), (13, 24, [None]), (16, 5, [None]))
    for (k, n, want), bias_dtype in itertools.product(cases, (torch.bfloat16, torch.float32)):
        x = torch.randn(7, k, generator=gen).to(torch.bfloat16)
        w = torch.randn(n, k, generator=gen).to(torch.bfloat16)
        b = torch.randn(n, generator=gen).to(bias_dtype)
        with Float64Tilekit() as fake:
            y = tilekit.linear(x, w, b, "gelu")
        assert fake.calls == want, (k, n, fake.calls)
        assert y.dtype == torch.bfloat16 and y.shape == (7, n), (k, n, bias_dtype, y.dtype, tuple(y.shape))
        close(y, act64(torch.nn.functional.linear(x.double(), w.double(), b.double()), "gelu"), TOL_OP,
              "linear %d -> %d" % (k, n))


def test_linear_eager_no_grad():
    """tilekit.linear without a gradient: one gemm_epilogue call and no
    check of its own (_check_linear, _usable) for a valid call, 2-D or
    3-D; a call gemm_epilogue refuses goes the full way (_linear_fwd) and
    raises tilekit.linear's messages; strides TMA cannot take too (x
    copied, then fused)."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(6, 16, generator=gen).to(torch.bfloat16)
    w = torch.randn(24, 16, generator=gen).to(torch.bfloat16)
    b = torch.randn(24, generator=gen)
    want = act64(torch.nn.functional.linear(x.double(), w.double(), b.double()), "gelu_tanh")
    checks = []
    check, usable = _torch_fused._check_linear, _torch_fused._usable
    _torch_fused._check_linear = lambda *a: checks.append("check") or check(*a)
    _torch_fused._usable = lambda t: checks.append("usable") or usable(t)
    try:
        with Float64Tilekit() as fake, torch.no_grad():
            close(tilekit.linear(x, w, b, "gelu_tanh"), want, TOL_OP, "linear 2-D")
            y3 = tilekit.linear(x.view(2, 3, 16), w, b, "gelu_tanh")
            assert y3.shape == (2, 3, 24), y3.shape
            close(y3.reshape(6, 24), want, TOL_OP, "linear 3-D")
            assert fake.calls == ["bias_act"] * 2 and checks == [], (fake.calls, checks)
            for exc, args, match in ((TypeError, (x.float(), w, b), "tilekit.linear: x has dtype torch.float32"),
                                     (TypeError, (x, w.float(), b), "tilekit.linear: weight has dtype"),
                                     (ValueError, (x, w, b[:5]), "tilekit.linear: bias has shape (5,)"),
                                     (TypeError, (x, w, b.int()), "tilekit.linear: bias has dtype torch.int32")):
                del checks[:]
                raises(exc, tilekit.linear, *args, "gelu_tanh", match=match)
                assert checks == ["check"], checks
            del checks[:], fake.calls[:]
            xs = torch.randn(6, 32, generator=gen).to(torch.bfloat16)[:, ::2]   # stride 2: copied by _usable
            close(tilekit.linear(xs, w, b, "gelu_tanh"),
                  act64(torch.nn.functional.linear(xs.double(), w.double(), b.double()), "gelu_tanh"), TOL_OP,
                  "linear strided")
            assert checks == ["check", "usable", "usable"] and fake.calls == ["bias_act"], (checks, fake.calls)
    finally:
        _torch_fused._check_linear, _torch_fused._usable = check, usable
    # tilekit's own gemm_epilogue: CPU tensors refused with its message (the Python path's), after linear's checks
    with torch.no_grad():
        raises(TypeError, tilekit.linear, x, w, b, "gelu_tanh", match="A: tensor is on cpu")


def test_mlps_vs_float64():
    """gated_mlp with and without biases and mlp in both weight layouts
    (nn.Linear's and Conv1D's), against float64 autograd: values, every
    gradient, and the weights' gradients in their parameters' layouts."""
    mlps_vs_float64(True)


def test_mlps_vs_float64_unfused():
    """The same with the gated MLP unfused (GATED_FORWARD and
    GATED_BACKWARD False: plain products and torch's elementwise kernels)."""
    mlps_vs_float64(False)


def mlps_vs_float64(gated):
    gen = torch.Generator().manual_seed(4)

    def r(*shape, s=0.3):
        return (torch.randn(*shape, generator=gen) * s).to(torch.bfloat16).requires_grad_()

    T, H, I = 19, 24, 40
    cases = []
    for act in ("silu", "gelu", "gelu_tanh"):
        for biased in (False, True):
            ws = [r(I, H), r(I, H), r(H, I)]
            bs = [r(I), r(I), r(H)] if biased else [None, None, None]

            def ref(x, wg, wu, wd, bg, bu, bd, act=act):
                lin = torch.nn.functional.linear
                return lin(act64(lin(x, wg, bg), act) * lin(x, wu, bu), wd, bd)
            cases.append(("gated_mlp %s bias=%s" % (act, biased), ws + bs, ref,
                          lambda x, wg, wu, wd, bg, bu, bd, act=act: tilekit.gated_mlp(x, wg, wu, wd, act, bg, bu,
                                                                                        bd)))
    for act in ("gelu", "gelu_tanh", "relu"):
        for transposed in (False, True):
            w1, w2 = (r(H, I), r(I, H)) if transposed else (r(I, H), r(H, I))
            ps = [w1, r(I), w2, r(H)]

            def ref(x, w1, b1, w2, b2, act=act, transposed=transposed):
                if transposed:
                    return act64(x @ w1 + b1, act) @ w2 + b2
                lin = torch.nn.functional.linear
                return lin(act64(lin(x, w1, b1), act), w2, b2)
            cases.append(("mlp %s transposed=%s" % (act, transposed), ps, ref,
                          lambda x, w1, b1, w2, b2, act=act, t=transposed: tilekit.mlp(x, w1, b1, w2, b2, act,
                                                                                        transposed=t)))
    with Float64Tilekit(gated) as fake:
        for label, params, ref, fn in cases:
            x = r(3, T, H, s=1.0)
            y = fn(x, *params)
            x64 = x.detach().double().requires_grad_()
            p64 = [p.detach().double().requires_grad_() if p is not None else None for p in params]
            y64 = ref(x64, *p64)
            close(y, y64, TOL_OP, label)
            dy = torch.randn(y.shape, generator=gen).to(torch.bfloat16)
            y.backward(dy)
            y64.backward(dy.double())
            close(x.grad, x64.grad, TOL_OP * 2, label + " dx")
            for i, (p, q) in enumerate(zip(params, p64)):
                if p is not None:
                    close(p.grad, q.grad, TOL_OP * 2, "%s d(param %d)" % (label, i))
                    assert p.grad.stride() == p.stride(), "%s param %d: %s" % (label, i, p.grad.stride())
    want = {"gated", "gated_backward", "bias_act", "backward", None} if gated else {"bias_act", "backward", None}
    assert want <= set(fake.calls) and (gated or not {"gated", "gated_backward"} & set(fake.calls)), set(fake.calls)
    x = r(4, H)
    raises(ValueError, tilekit.gated_mlp, x, r(I, H), r(I, H), r(H, I), None, match="activation")
    raises(ValueError, tilekit.gated_mlp, x, r(I, H), r(I + 1, H), r(H, I), match=("w_up", "shape mismatch"))
    raises(ValueError, tilekit.mlp, x, r(I, H), None, r(H, I), None, "swish", match="activation")


def test_gated_calls_and_no_aux_without_grad():
    """The gated MLP's calls: forward one "gated" (aux given only when a
    gradient will be needed) and one plain product; backward one
    "gated_backward" and five plain products (dWd, dx in two, dWg, dWu)."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(5, 16, generator=gen).to(torch.bfloat16)
    wg, wu, wd = (torch.randn(s, generator=gen).to(torch.bfloat16) for s in ((24, 16), (24, 16), (16, 24)))
    seen = []
    with Float64Tilekit() as fake:
        inner = fake.gemm_epilogue
        fake.gemm_epilogue = tilekit.gemm_epilogue = lambda *a, **k: seen.append(k.get("aux")) or inner(*a, **k)
        tilekit.gated_mlp(x, wg, wu, wd)
        assert fake.calls == ["gated", None] and seen == [None], (fake.calls, seen)
        for t in (x, wg, wu, wd):
            t.requires_grad_()
        y = tilekit.gated_mlp(x, wg, wu, wd)
        assert seen[-1] is not None and seen[-1].shape == (5, 48)
        del fake.calls[:]
        y.backward(torch.ones_like(y))
        assert sorted(fake.calls, key=str) == sorted(["gated_backward"] + [None] * 5, key=str), fake.calls


def test_compile_fullgraph():
    """torch.compile(fullgraph=True, backend="aot_eager") of linear,
    gated_mlp and mlp forward and backward: the custom ops' fake
    implementations and autograd formulas traced, the same values and
    gradients as eager."""
    gen = torch.Generator().manual_seed(6)

    def r(*shape):
        return (torch.randn(*shape, generator=gen) * 0.3).to(torch.bfloat16).requires_grad_()

    x, wg, wu, wd, b, w1 = r(2, 7, 16), r(24, 16), r(24, 16), r(16, 24), r(24), r(16, 24)

    def f(x, wg, wu, wd, b, w1):
        h = tilekit.gated_mlp(x, wg, wu, wd)
        h = tilekit.mlp(h, wg, b, wd, None, "gelu_tanh")
        return tilekit.linear(h, wu, b, "silu").float().square().sum()

    params = (x, wg, wu, wd, b, w1)
    with Float64Tilekit():
        eager = f(*params)
        eager.backward()
        grads = [p.grad.clone() if p.grad is not None else None for p in params]
        for p in params:
            p.grad = None
        torch._dynamo.reset()
        comp = torch.compile(f, fullgraph=True, backend="aot_eager")
        with Float64Tilekit() as fake:
            out = comp(*params)
            out.backward()
        assert {"gated", "gated_backward", "bias_act", "backward"} <= set(fake.calls), fake.calls
    close(out, eager, 1e-3, "compiled")
    for p, want, name in zip(params, grads, ("x", "wg", "wu", "wd", "b", "w1")):
        if want is None:
            assert p.grad is None, name
        else:
            close(p.grad, want, 1e-3, "compiled d" + name)

# one test per model
for _name in MODELS:
    globals()["test_model_" + _name] = model_case(_name)
    if _name not in ("gpt2", "bert"):
        globals()["test_model_" + _name + "_unfused"] = model_case(_name, gated=False)
        # the library's default: forward fused, backward unfused
        globals()["test_model_" + _name + "_default"] = model_case(_name, gated=(True, False))

if torch is None:   # no test without torch: run.py counts none
    for _name in [n for n in globals() if n.startswith("test_")]:
        del globals()[_name]
