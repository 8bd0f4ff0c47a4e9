"""Issue 39 in PyTorch: products with a fused epilogue as torch ops.

tilekit.linear(x, w, bias, activation): act(x w^T + bias), the bias and the
  activation in the product's epilogue ("bias_act"); backward: dz = dy *
  act'(z) elementwise in torch (no product precedes it to fuse it into),
  then dx = dz w, dw = dz^T x, db = the column sums of dz.
tilekit.gated_mlp(x, w_gate, w_up, w_down, activation): SwiGLU (GeGLU with
  a GELU), y = (act(x Wg^T) * (x Wu^T)) Wd^T: one "gated" call for both
  projections and act(g) * u, then the plain down product; backward: the
  down product's gradient dh = dy Wd goes through "gated_backward", which
  writes dz = [dzg | dzu] (T x 2I) from the stored z, so dh, act(g) and
  act'(g) never reach memory; dx = dzg Wg + dzu Wu (two products into one
  output, the second with beta = 1) and dWg, dWu from the column halves of
  dz as they are (views with leading dimension 2I).
tilekit.mlp(x, w1, b1, w2, b2, activation): GPT-2's and BERT's MLP,
  y = act(x W1^T + b1) W2^T + b2: two "bias_act" calls; backward: dy W2
  through "backward" with the stored u = x W1^T + b1, which gives du and db1
  (bias_grad) in the same pass; dW1, dx, dW2 plain products, db2 dy's sums.
(docs/NOTES.md, "Issue 39: the torch side".)

The pre-activation (z, u) is stored in bf16 (the header's aux) only when a
gradient will be needed. Every product goes through _gemm: tilekit.gemm,
or tilekit.gemm_epilogue for an epilogue, both looked up per call (the CPU
tests put a float64 double of the header's formulas in their place). The
weights are taken as the forward product's operand op(B), K x N: a Linear's
weight.t() (a transposed view: op T, no copy) or a transformers Conv1D's
weight as it is; each weight gradient is allocated with its operand's
strides (torch.empty_like) and computed into it, so it arrives in the
parameter's own layout (AccumulateGrad then copies nothing). Outputs are
allocated by torch on the current stream; nothing synchronizes the host.

Each function is two torch.library custom ops, forward and backward
(tilekit::linear, tilekit::gated_mlp, tilekit::mlp and their _backward),
with fake implementations, the forward's autograd formula calling the
backward op: torch.compile(fullgraph=True) traces them without a graph
break. In eager mode the same bodies run through a torch.autograd.Function
(or directly without autograd): the custom op's dispatch costs ~10 us of
host time a call (tilekit.matmul's reason, docs/NOTES.md session 6).
tilekit.linear without autograd makes no check of its own before its one
gemm_epilogue call, which checks the same (_linear_eager).
Custom ops return tensors only: an output that is not needed (z without a
backward, a gradient nobody asked for) is an empty tensor, never used.
"""
from typing import List, Optional, Tuple

from ._lib import need_torch

torch = need_torch("tilekit.linear")

import tilekit  # noqa: E402
from ._torch_ops import _col_major, _usable, matmul  # noqa: E402

Tensor = torch.Tensor
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")   # tilekit.gemm_epilogue's names (tk_activation)

# Where the fused MLP modules of tilekit.patch run fused: bf16 on these
# device types; elsewhere (another dtype, the CPU) their stock forward runs.
# The CPU tests add "cpu" with tilekit's products replaced by a double.
FUSED_DEVICES = ("cuda",)

# Whether gated_mlp's forward runs its gate/up product through the "gated"
# epilogue kind (GATED_FORWARD) and its backward through "gated_backward"
# (GATED_BACKWARD), or the same formulas unfused: z = [x Wg | x Wu] by two
# plain products into z's column halves and act(zg) * zu by torch's
# kernels; backward dh = dy Wd, then dz from dh and z by torch's activation
# backward (z is stored either way). Chosen by measurement (docs/NOTES.md
# session 26, H200, Llama-3-8B's 4096 -> 2 x 14336): the fused forward
# (k30_wgmma_tma) 1.07-1.12x torch's two matmuls and SwiGLU at 512-8192
# tokens, 0.95-0.97x at 1-16; "gated_backward" fused on k30 since session
# 27 (H100, 2-layer Llama-3-8B widths, 2 x 1024 tokens, one call: forward +
# backward 19.37 ms with the unfused backward, 17.09 fused; torch 16.83).
# The tests run every combination (tests/gpu/test_torch.py,
# tests/python/test_torch_cpu.py).
GATED_FORWARD = True
GATED_BACKWARD = True


def _act_bf16(z, activation):
    """act(z) for bf16 z as torch computes it (bf16 result): the unfused
    gated MLP's (GATED_FORWARD, GATED_BACKWARD)."""
    F = torch.nn.functional
    if activation == "relu":
        return F.relu(z)
    if activation == "gelu":
        return F.gelu(z)
    if activation == "gelu_tanh":
        return F.gelu(z, approximate="tanh")
    if activation == "silu":
        return F.silu(z)
    raise ValueError("activation: %r is not one of %s" % (activation, ACTIVATIONS))


def _act_backward_bf16(g, z, activation):
    """g * act'(z) for bf16 g and z, by torch's own backward kernels."""
    aten = torch.ops.aten
    if activation == "relu":
        return aten.threshold_backward(g, z, 0)
    if activation == "gelu":
        return aten.gelu_backward(g, z)
    if activation == "gelu_tanh":
        return aten.gelu_backward(g, z, approximate="tanh")
    if activation == "silu":
        return aten.silu_backward(g, z)
    raise ValueError("activation: %r is not one of %s" % (activation, ACTIVATIONS))


def fusable(*tensors):
    """Whether a patched MLP module runs fused: every tensor given (None
    skipped) bf16 on a device of FUSED_DEVICES (the rule of tilekit.patch)."""
    return all(t is None or (t.dtype == torch.bfloat16 and t.device.type in FUSED_DEVICES) for t in tensors)


# ---- the products ----

def _gemm(a, b, out, beta=0.0, **epilogue):
    """out = epilogue(a @ b) (+ beta * out): the one place the fused ops
    call tilekit. a, b, out 2-D; out bf16 (row-major with an epilogue)."""
    if epilogue:
        tilekit.gemm_epilogue(a, b, out, beta=beta, **epilogue)
    elif beta:
        tilekit.gemm(a, b, out, beta=beta)
    else:
        tilekit.gemm(a, b, out)


def _empty(like, rows, cols):
    return torch.empty((rows, cols), dtype=torch.bfloat16, device=like.device)


def _none(like):
    """The output that stands for a gradient not asked for."""
    return like.new_empty(0)


def _product(a, b):
    out = _empty(a, a.shape[0], b.shape[1])
    _gemm(a, b, out)
    return out


def _bias_product(a, b, bias):
    """a @ b + bias (bias None: the plain product)."""
    out = _empty(a, a.shape[0], b.shape[1])
    if bias is None:
        _gemm(a, b, out)
    else:
        _gemm(a, b, out, epilogue="bias_act", bias=bias)
    return out


def _wgrad(x, dz, w):
    """d(w) = x^T dz for the forward operand w (K x N), with w's strides:
    for w = weight.t() (column-major), weight's gradient dz^T x is computed
    row-major into the transpose (the _grads rule of _torch_ops)."""
    g = torch.empty_like(w)
    if _col_major(g):
        _gemm(dz.t(), x, g.t())
    else:
        _gemm(x.t(), dz, g)
    return g


def _pair(wg, wu):
    """The gate and up operands with one op and leading dimension (b_up's
    rule): as they are when their strides agree, else contiguous copies."""
    wg, wu = _usable(wg), _usable(wu)
    if wg.stride() != wu.stride():
        wg, wu = wg.contiguous(), wu.contiguous()
    return wg, wu


# act'(z) in fp32, the formulas of src/tiles/activation.cuh (tk_act_grad)
_SQRT1_2 = 0.70710678118654752440
_INV_SQRT_2PI = 0.39894228040143267794
_SQRT_2_PI = 0.79788456080286535588
_GELU_CUBIC = 0.044715


def act_grad(z, activation):
    """act'(z) as the kernels compute it (tk_act_grad), in fp32."""
    z = z.float()
    if activation == "relu":
        return (z > 0).float()
    if activation == "gelu":
        return 0.5 * (1.0 + torch.erf(z * _SQRT1_2)) + z * _INV_SQRT_2PI * torch.exp(-0.5 * z * z)
    if activation == "gelu_tanh":
        t = torch.tanh(_SQRT_2_PI * (z + _GELU_CUBIC * z * z * z))
        du = _SQRT_2_PI * (1.0 + 3.0 * _GELU_CUBIC * z * z)
        return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * du
    if activation == "silu":
        s = torch.sigmoid(z)
        return s * (1.0 + z * (1.0 - s))
    raise ValueError("activation: %r is not one of %s" % (activation, ACTIVATIONS))


# ---- argument rules (the same for real and fake tensors) ----

def _activation(activation, where, optional):
    if activation is None and optional:
        return None
    if activation not in ACTIVATIONS:
        raise ValueError("%s: activation %r is not one of %s%s" % (where, activation, ", ".join(map(repr, ACTIVATIONS)),
                                                                   " or None" if optional else ""))
    return activation


def _check(where, x, weights, biases):
    """x (T x K) and the forward operands (name, w, rows, cols): bf16 2-D on
    x's device, each rows x cols; biases (name, b, length): 1-D fp32 or
    bf16 on that device, or None."""
    if x.dtype != torch.bfloat16:
        raise TypeError("%s: x has dtype %s; tilekit multiplies bfloat16 tensors (convert with .to(torch.bfloat16))"
                        % (where, x.dtype))
    for name, w, rows, cols in weights:
        if w.dtype != torch.bfloat16:
            raise TypeError("%s: %s has dtype %s; tilekit multiplies bfloat16 tensors" % (where, name, w.dtype))
        if w.dim() != 2:
            raise ValueError("%s: %s must be 2-D, got shape %s" % (where, name, tuple(w.shape)))
        if tuple(w.shape) != (rows, cols):
            raise ValueError("%s: shape mismatch: %s is %s, expected %d x %d" % (where, name, tuple(w.shape), rows,
                                                                                 cols))
        if w.device != x.device:
            raise TypeError("%s: x is on %s but %s on %s" % (where, x.device, name, w.device))
    for name, b, length in biases:
        if b is None:
            continue
        if b.dtype not in (torch.bfloat16, torch.float32):
            raise TypeError("%s: %s has dtype %s (expected torch.bfloat16 or torch.float32)" % (where, name, b.dtype))
        if tuple(b.shape) != (length,):
            raise ValueError("%s: %s has shape %s, expected (%d,)" % (where, name, tuple(b.shape), length))
        if b.device != x.device:
            raise TypeError("%s: x is on %s but %s on %s" % (where, x.device, name, b.device))


def _flat(x, k, where):
    """x as a 2-D T x K matrix (its leading dimensions flattened; x itself
    when 2-D) and those dimensions."""
    if x.dim() < 1 or x.shape[-1] != k:
        raise ValueError("%s: shape mismatch: x is %s but the weight takes %d input features"
                         % (where, tuple(x.shape), k))
    return (x if x.dim() == 2 else x.reshape(-1, k)), x.shape[:-1]


def _needs_grad(*tensors):
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def _pick(needs, grads):
    """The gradients autograd gets: None where not asked for."""
    return tuple(g if n else None for n, g in zip(needs, grads))


def _cast(g, like):
    """A bias gradient (fp32 sums) in its bias's dtype."""
    return None if g is None or like is None else g.to(like.dtype)


# ---- tilekit.linear: act(x w + b) ----

def _check_linear(x, w, bias):
    _check("tilekit.linear", x, [("weight", w, x.shape[1], w.shape[1] if w.dim() == 2 else -1)],
           [("bias", bias, w.shape[-1])])


def _tma_strides(*ts):
    """Whether the fused Hopper kernels can take these 2-D operands: every
    stride other than 1 (of a dimension longer than 1) a multiple of 8
    elements (16 bytes) and every base 16-byte aligned (TMA's rule); else an
    epilogue runs on k01_naive."""
    for t in ts:
        (r, c), (sr, sc) = t.shape, t.stride()
        if t.data_ptr() % 16 or (sr % 8 and sr != 1 and r > 1) or (sc % 8 and sc != 1 and c > 1):
            return False
    return True


def _linear_fwd(x, w, bias, activation, save):
    """(y, z): y = act(x w + bias), z = x w + bias stored when save and act.
    Where TMA cannot take the strides (_tma_strides), the fused call would
    run on k01_naive, tens of times slower: the plain product (which
    tilekit routes through copies to a fast kernel) and the bias and the
    activation in torch instead (z rounded to bf16 before act, as torch's
    own Linear and activation do)."""
    _check_linear(x, w, bias)
    x, w = _usable(x), _usable(w)
    keep = save and activation is not None
    y = _empty(x, x.shape[0], w.shape[1])
    if not _tma_strides(x, w, y):
        if bias is not None:   # the product in fp32 and the sum rounded once to bf16, as the fused kernels do
            y32 = torch.empty((x.shape[0], w.shape[1]), dtype=torch.float32, device=x.device)
            _gemm(x, w, y32)
            y = (y32 + bias.float()).to(torch.bfloat16)
        else:
            _gemm(x, w, y)
        if activation is None:
            return y, _none(x)
        return _act_bf16(y, activation), (y if keep else _none(x))
    z = _empty(x, x.shape[0], w.shape[1]) if keep else _none(x)
    _gemm(x, w, y, epilogue="bias_act", activation=activation, bias=bias, aux=z if keep else None)
    return y, z


def _linear_bwd(dy, x, w, z, activation, needs):
    """(dx, dw, db) for needs (x, w, bias); db in fp32."""
    if activation is None:
        dz = dz32 = _usable(dy)
    else:   # db from dz before its rounding, as the kernels' bias_grad
        dz32 = dy.float() * act_grad(z, activation)
        dz = dz32.to(torch.bfloat16)
    x, wu = _usable(x), _usable(w)
    dx = _product(dz, wu.t()) if needs[0] else _none(x)
    dw = _wgrad(x, dz, w) if needs[1] else _none(x)
    db = dz32.float().sum(0) if needs[2] else _none(x)
    return dx, dw, db


@torch.library.custom_op("tilekit::linear", mutates_args=())
def linear_op(x: Tensor, w: Tensor, bias: Optional[Tensor], activation: Optional[str],
              save: bool) -> Tuple[Tensor, Tensor]:
    """(act(x @ w + bias), the pre-activation or an empty tensor): x T x K, w K x N."""
    return _linear_fwd(x, w, bias, activation, save)


@linear_op.register_fake
def _linear_fake(x, w, bias, activation, save):
    _check_linear(x, w, bias)
    y = x.new_empty((x.shape[0], w.shape[1]))
    return y, (x.new_empty((x.shape[0], w.shape[1])) if save and activation is not None else x.new_empty(0))


@torch.library.custom_op("tilekit::linear_backward", mutates_args=())
def linear_backward_op(dy: Tensor, x: Tensor, w: Tensor, z: Tensor, activation: Optional[str],
                       needs: List[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    """(dx, dw, db fp32) of tilekit::linear; empty where needs is False."""
    return _linear_bwd(dy, x, w, z, activation, needs)


@linear_backward_op.register_fake
def _linear_backward_fake(dy, x, w, z, activation, needs):
    out = (x.new_empty(x.shape), torch.empty_like(w), x.new_empty((w.shape[1],), dtype=torch.float32))
    return tuple(o if n else x.new_empty(0) for o, n in zip(out, needs))


def _linear_setup(ctx, inputs, output):
    x, w, bias, activation, save = inputs
    ctx.save_for_backward(x, w, output[1], bias)
    ctx.activation = activation
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)


def _linear_backward(ctx, dy, _dz):
    x, w, z, bias = ctx.saved_tensors
    needs = list(ctx.needs_input_grad[:3])
    if dy is None:
        return None, None, None, None, None
    dx, dw, db = linear_backward_op(dy, x, w, z, ctx.activation, needs)
    return _pick(needs, (dx, dw, _cast(db, bias))) + (None, None)


linear_op.register_autograd(_linear_backward, setup_context=_linear_setup)


class _LinearFunction(torch.autograd.Function):
    """The eager path of tilekit::linear: the same bodies, no op dispatch."""

    @staticmethod
    def forward(ctx, x, w, bias, activation):
        y, z = _linear_fwd(x, w, bias, activation, True)
        ctx.save_for_backward(x, w, z, bias)
        ctx.activation = activation
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w, z, bias = ctx.saved_tensors
        needs = ctx.needs_input_grad[:3]
        dx, dw, db = _linear_bwd(dy, x, w, z, ctx.activation, needs)
        return _pick(needs, (dx, dw, _cast(db, bias))) + (None,)


def _linear_eager(x, w, bias, activation):
    """y of the eager call without a gradient, checked by gemm_epilogue
    alone: it checks what _check_linear and _usable would (dtypes, shapes,
    devices, strides; the extension in C), so a valid call makes no check
    of its own. Any refusal, and strides TMA cannot take, go to
    _linear_fwd, which checks first and so raises tilekit.linear's own
    messages (a refused call wrote nothing)."""
    y = torch.empty((x.shape[0], w.shape[1]), dtype=torch.bfloat16, device=x.device)
    if _tma_strides(x, w, y):
        try:
            tilekit.gemm_epilogue(x, w, y, epilogue="bias_act", activation=activation, bias=bias)
            return y
        except Exception:
            pass
    return _linear_fwd(x, w, bias, activation, False)[0]


def _linear_call(x, w, bias, activation):
    if torch.compiler.is_compiling():
        return linear_op(x, w, bias, activation, _needs_grad(x, w, bias))[0]
    if _needs_grad(x, w, bias):
        return _LinearFunction.apply(x, w, bias, activation)
    return _linear_eager(x, w, bias, activation)


def linear(x, weight, bias=None, activation=None):
    """act(x @ weight.T + bias) on tilekit (torch.nn.functional.linear, and
    an activation), a torch op (autograd, torch.compile, CUDA graphs).

    x: bf16 (..., in_features); weight: bf16 out_features x in_features
    (nn.Linear's layout, read as op T: no copy); bias: out_features values,
    bf16 or fp32, or None; activation: None, "relu", "gelu" (erf),
    "gelu_tanh" or "silu". Returns bf16 (..., out_features): the bias and the
    activation applied to the fp32 product before its one rounding. Without
    bias and activation it is tilekit.matmul(x, weight.T). The backward
    computes dz = dy * act'(z) in torch (fp32, the kernels' formulas) from
    the bf16 pre-activation z stored by the forward. TypeError for another
    dtype or device, ValueError for shapes and unknown activations."""
    activation = _activation(activation, "tilekit.linear", True)
    if weight.dim() != 2:
        raise ValueError("tilekit.linear: weight must be 2-D (out_features x in_features), got shape %s"
                         % (tuple(weight.shape),))
    if activation is None and bias is None:
        return matmul(x, weight.t())
    x2, lead = _flat(x, weight.shape[1], "tilekit.linear")
    y = _linear_call(x2, weight.t(), bias, activation)
    return y if x2 is x else y.reshape(*lead, weight.shape[0])


# ---- tilekit.gated_mlp: (act(x wg) * (x wu)) wd ----

def _check_gated(x, wg, wu, wd, bias_gu, bias_d):
    i, h = wg.shape[-1], wd.shape[-1]
    _check("tilekit.gated_mlp", x, [("w_gate", wg, x.shape[1], i), ("w_up", wu, x.shape[1], i),
                                    ("w_down", wd, i, h)],
           [("bias_gate_up", bias_gu, 2 * i), ("bias_down", bias_d, h)])


def _gated_fwd(x, wg, wu, wd, bias_gu, bias_d, activation, save):
    """(y, z, h): h = act(x wg + bg) * (x wu + bu) (one "gated" call), z =
    [x wg + bg | x wu + bu] stored when save, y = h wd + bias_d."""
    _check_gated(x, wg, wu, wd, bias_gu, bias_d)
    x, wd = _usable(x), _usable(wd)
    wg, wu = _pair(wg, wu)
    t, i = x.shape[0], wg.shape[1]
    if GATED_FORWARD:
        h = _empty(x, t, i)
        z = _empty(x, t, 2 * i) if save else _none(x)
        _gemm(x, wg, h, epilogue="gated", activation=activation, b_up=wu, bias=bias_gu, aux=z if save else None)
    else:   # unfused (GATED_FORWARD): the products plain, act(zg) * zu by torch
        zz = _empty(x, t, 2 * i)
        for half, w in ((0, wg), (1, wu)):
            out = zz[:, half * i:(half + 1) * i]
            if bias_gu is None:
                _gemm(x, w, out)
            else:
                _gemm(x, w, out, epilogue="bias_act", bias=bias_gu[half * i:(half + 1) * i])
        h = _act_bf16(zz[:, :i], activation) * zz[:, i:]
        z = zz if save else _none(x)
    return _bias_product(h, wd, bias_d), z, h


def _gated_bwd(dy, x, wg, wu, wd, z, h, activation, needs):
    """(dx, dwg, dwu, dwd, dbias_gu, dbias_d) for needs in that order; the
    bias gradients fp32."""
    dy, x = _usable(dy), _usable(x)
    t, i = h.shape
    dx, dwg, dwu, dwd, dbgu, dbd = (_none(x) for _ in range(6))   # distinct: a custom op's outputs may not alias
    if needs[3]:
        dwd = _wgrad(h, dy, wd)
    if needs[5]:
        dbd = dy.float().sum(0)
    if needs[0] or needs[1] or needs[2] or needs[4]:
        dz = _empty(dy, t, 2 * i)
        if needs[4]:
            dbgu = torch.empty(2 * i, dtype=torch.float32, device=dy.device)
        if GATED_BACKWARD:
            _gemm(dy, _usable(wd).t(), dz, epilogue="gated_backward", activation=activation, aux=z,
                  bias_grad=dbgu if needs[4] else None)
        else:   # the same formulas by torch, on dh = dy Wd (GATED_BACKWARD)
            dh = _product(dy, _usable(wd).t())
            zg, zu = z[:, :i], z[:, i:]
            dz[:, :i].copy_(_act_backward_bf16(dh * zu, zg, activation))
            torch.mul(dh, _act_bf16(zg, activation), out=dz[:, i:])
            if needs[4]:
                dbgu.copy_(dz.float().sum(0))
        dzg, dzu = dz[:, :i], dz[:, i:]   # the column halves, leading dimension 2I: no copy
        if needs[0]:
            dx = _product(dzg, _usable(wg).t())
            _gemm(dzu, _usable(wu).t(), dx, beta=1.0)
        if needs[1]:
            dwg = _wgrad(x, dzg, wg)
        if needs[2]:
            dwu = _wgrad(x, dzu, wu)
    return dx, dwg, dwu, dwd, dbgu, dbd


@torch.library.custom_op("tilekit::gated_mlp", mutates_args=())
def gated_mlp_op(x: Tensor, w_gate: Tensor, w_up: Tensor, w_down: Tensor, bias_gate_up: Optional[Tensor],
                 bias_down: Optional[Tensor], activation: str, save: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """(y, z or an empty tensor, h) of the gated MLP: x T x K, w_gate and
    w_up K x I, w_down I x H (forward operands)."""
    return _gated_fwd(x, w_gate, w_up, w_down, bias_gate_up, bias_down, activation, save)


@gated_mlp_op.register_fake
def _gated_fake(x, w_gate, w_up, w_down, bias_gate_up, bias_down, activation, save):
    _check_gated(x, w_gate, w_up, w_down, bias_gate_up, bias_down)
    t, i = x.shape[0], w_gate.shape[1]
    return (x.new_empty((t, w_down.shape[1])), x.new_empty((t, 2 * i)) if save else x.new_empty(0),
            x.new_empty((t, i)))


@torch.library.custom_op("tilekit::gated_mlp_backward", mutates_args=())
def gated_mlp_backward_op(dy: Tensor, x: Tensor, w_gate: Tensor, w_up: Tensor, w_down: Tensor, z: Tensor, h: Tensor,
                          activation: str, needs: List[bool]) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(dx, dw_gate, dw_up, dw_down, dbias_gate_up, dbias_down) of tilekit::gated_mlp."""
    return _gated_bwd(dy, x, w_gate, w_up, w_down, z, h, activation, needs)


@gated_mlp_backward_op.register_fake
def _gated_backward_fake(dy, x, w_gate, w_up, w_down, z, h, activation, needs):
    i, f32 = w_gate.shape[1], torch.float32
    out = (x.new_empty(x.shape), torch.empty_like(w_gate), torch.empty_like(w_up), torch.empty_like(w_down),
           x.new_empty((2 * i,), dtype=f32), x.new_empty((w_down.shape[1],), dtype=f32))
    return tuple(o if n else x.new_empty(0) for o, n in zip(out, needs))


def _gated_setup(ctx, inputs, output):
    x, wg, wu, wd, bias_gu, bias_d, activation, save = inputs
    y, z, h = output
    ctx.save_for_backward(x, wg, wu, wd, z, h, bias_gu, bias_d)
    ctx.activation = activation
    ctx.mark_non_differentiable(z, h)
    ctx.set_materialize_grads(False)


def _gated_backward(ctx, dy, _dz, _dh):
    x, wg, wu, wd, z, h, bias_gu, bias_d = ctx.saved_tensors
    needs = list(ctx.needs_input_grad[:6])
    if dy is None:
        return (None,) * 8
    g = gated_mlp_backward_op(dy, x, wg, wu, wd, z, h, ctx.activation, needs)
    return _pick(needs, g[:4] + (_cast(g[4], bias_gu), _cast(g[5], bias_d))) + (None, None)


gated_mlp_op.register_autograd(_gated_backward, setup_context=_gated_setup)


class _GatedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wg, wu, wd, bias_gu, bias_d, activation):
        y, z, h = _gated_fwd(x, wg, wu, wd, bias_gu, bias_d, activation, True)
        ctx.save_for_backward(x, wg, wu, wd, z, h, bias_gu, bias_d)
        ctx.activation = activation
        return y

    @staticmethod
    def backward(ctx, dy):
        x, wg, wu, wd, z, h, bias_gu, bias_d = ctx.saved_tensors
        needs = ctx.needs_input_grad[:6]
        g = _gated_bwd(dy, x, wg, wu, wd, z, h, ctx.activation, needs)
        return _pick(needs, g[:4] + (_cast(g[4], bias_gu), _cast(g[5], bias_d))) + (None,)


def _gated_call(x, wg, wu, wd, bias_gu, bias_d, activation):
    if torch.compiler.is_compiling():
        return gated_mlp_op(x, wg, wu, wd, bias_gu, bias_d, activation,
                            _needs_grad(x, wg, wu, wd, bias_gu, bias_d))[0]
    if _needs_grad(x, wg, wu, wd, bias_gu, bias_d):
        return _GatedFunction.apply(x, wg, wu, wd, bias_gu, bias_d, activation)
    return _gated_fwd(x, wg, wu, wd, bias_gu, bias_d, activation, False)[0]


def gated_mlp(x, w_gate, w_up, w_down, activation="silu", bias_gate=None, bias_up=None, bias_down=None):
    """down(act(gate(x)) * up(x)) on tilekit: Llama's, Mistral's and Qwen's
    MLP (SwiGLU; GeGLU with activation "gelu" or "gelu_tanh"), a torch op
    (autograd, torch.compile, CUDA graphs).

    x: bf16 (..., hidden); w_gate, w_up: bf16 intermediate x hidden, w_down:
    bf16 hidden x intermediate (nn.Linear's layout, each read as op T, no
    copy, no concatenated [w_gate; w_up]); optional biases of their output
    sizes (bf16 or fp32; the gate's and up's are joined into one vector of
    2 x intermediate per call). Returns bf16 (..., hidden). Three kernels
    forward with a gradient (one without: z is not stored), seven backward
    (docs/NOTES.md); h = act(g) * u is rounded to bf16 once, as torch's
    product of bf16 g and u is, and g, u are kept in bf16 (z) for the
    backward, as torch keeps them."""
    activation = _activation(activation, "tilekit.gated_mlp", False)
    for name, w in (("w_gate", w_gate), ("w_up", w_up), ("w_down", w_down)):
        if w.dim() != 2:
            raise ValueError("tilekit.gated_mlp: %s must be 2-D, got shape %s" % (name, tuple(w.shape)))
    bias_gu = None
    if bias_gate is not None or bias_up is not None:
        i = w_gate.shape[0]
        bias_gu = torch.cat([b if b is not None else torch.zeros(i, dtype=(bias_gate if bias_gate is not None
                                                                            else bias_up).dtype, device=x.device)
                             for b in (bias_gate, bias_up)])
    x2, lead = _flat(x, w_gate.shape[1], "tilekit.gated_mlp")
    y = _gated_call(x2, w_gate.t(), w_up.t(), w_down.t(), bias_gu, bias_down, activation)
    return y.reshape(*lead, w_down.shape[0])


# ---- tilekit.mlp: act(x w1 + b1) w2 + b2 ----

def _check_mlp(x, w1, b1, w2, b2):
    i, n = w1.shape[-1], w2.shape[-1]
    _check("tilekit.mlp", x, [("w1", w1, x.shape[1], i), ("w2", w2, i, n)], [("b1", b1, i), ("b2", b2, n)])


def _mlp_fwd(x, w1, b1, w2, b2, activation, save):
    """(y, u, h): u = x w1 + b1 stored when save, h = act(u), y = h w2 + b2."""
    _check_mlp(x, w1, b1, w2, b2)
    x, w1, w2 = _usable(x), _usable(w1), _usable(w2)
    t, i = x.shape[0], w1.shape[1]
    h = _empty(x, t, i)
    u = _empty(x, t, i) if save else _none(x)
    _gemm(x, w1, h, epilogue="bias_act", activation=activation, bias=b1, aux=u if save else None)
    return _bias_product(h, w2, b2), u, h


def _mlp_bwd(dy, x, w1, w2, u, h, activation, needs):
    """(dx, dw1, db1, dw2, db2) for needs in that order; the bias gradients fp32."""
    dy, x = _usable(dy), _usable(x)
    dx, dw1, db1, dw2, db2 = (_none(x) for _ in range(5))   # distinct: a custom op's outputs may not alias
    if needs[3]:
        dw2 = _wgrad(h, dy, w2)
    if needs[4]:
        db2 = dy.float().sum(0)
    if needs[0] or needs[1] or needs[2]:
        du = _empty(dy, *u.shape)
        if needs[2]:
            db1 = torch.empty(u.shape[1], dtype=torch.float32, device=dy.device)
        _gemm(dy, _usable(w2).t(), du, epilogue="backward", activation=activation, aux=u,
              bias_grad=db1 if needs[2] else None)
        if needs[0]:
            dx = _product(du, _usable(w1).t())
        if needs[1]:
            dw1 = _wgrad(x, du, w1)
    return dx, dw1, db1, dw2, db2


@torch.library.custom_op("tilekit::mlp", mutates_args=())
def mlp_op(x: Tensor, w1: Tensor, b1: Optional[Tensor], w2: Tensor, b2: Optional[Tensor], activation: str,
           save: bool) -> Tuple[Tensor, Tensor, Tensor]:
    """(y, u or an empty tensor, h) of the MLP: x T x K, w1 K x I, w2 I x N (forward operands)."""
    return _mlp_fwd(x, w1, b1, w2, b2, activation, save)


@mlp_op.register_fake
def _mlp_fake(x, w1, b1, w2, b2, activation, save):
    _check_mlp(x, w1, b1, w2, b2)
    t, i = x.shape[0], w1.shape[1]
    return x.new_empty((t, w2.shape[1])), x.new_empty((t, i)) if save else x.new_empty(0), x.new_empty((t, i))


@torch.library.custom_op("tilekit::mlp_backward", mutates_args=())
def mlp_backward_op(dy: Tensor, x: Tensor, w1: Tensor, w2: Tensor, u: Tensor, h: Tensor, activation: str,
                    needs: List[bool]) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(dx, dw1, db1, dw2, db2) of tilekit::mlp."""
    return _mlp_bwd(dy, x, w1, w2, u, h, activation, needs)


@mlp_backward_op.register_fake
def _mlp_backward_fake(dy, x, w1, w2, u, h, activation, needs):
    f32 = torch.float32
    out = (x.new_empty(x.shape), torch.empty_like(w1), x.new_empty((w1.shape[1],), dtype=f32), torch.empty_like(w2),
           x.new_empty((w2.shape[1],), dtype=f32))
    return tuple(o if n else x.new_empty(0) for o, n in zip(out, needs))


def _mlp_setup(ctx, inputs, output):
    x, w1, b1, w2, b2, activation, save = inputs
    y, u, h = output
    ctx.save_for_backward(x, w1, b1, w2, b2, u, h)
    ctx.activation = activation
    ctx.mark_non_differentiable(u, h)
    ctx.set_materialize_grads(False)


def _mlp_backward(ctx, dy, _du, _dh):
    x, w1, b1, w2, b2, u, h = ctx.saved_tensors
    needs = list(ctx.needs_input_grad[:5])
    if dy is None:
        return (None,) * 7
    dx, dw1, db1, dw2, db2 = mlp_backward_op(dy, x, w1, w2, u, h, ctx.activation, needs)
    return _pick(needs, (dx, dw1, _cast(db1, b1), dw2, _cast(db2, b2))) + (None, None)


mlp_op.register_autograd(_mlp_backward, setup_context=_mlp_setup)


class _MLPFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2, activation):
        y, u, h = _mlp_fwd(x, w1, b1, w2, b2, activation, True)
        ctx.save_for_backward(x, w1, b1, w2, b2, u, h)
        ctx.activation = activation
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w1, b1, w2, b2, u, h = ctx.saved_tensors
        needs = ctx.needs_input_grad[:5]
        dx, dw1, db1, dw2, db2 = _mlp_bwd(dy, x, w1, w2, u, h, ctx.activation, needs)
        return _pick(needs, (dx, dw1, _cast(db1, b1), dw2, _cast(db2, b2))) + (None,)


def _mlp_call(x, w1, b1, w2, b2, activation):
    if torch.compiler.is_compiling():
        return mlp_op(x, w1, b1, w2, b2, activation, _needs_grad(x, w1, b1, w2, b2))[0]
    if _needs_grad(x, w1, b1, w2, b2):
        return _MLPFunction.apply(x, w1, b1, w2, b2, activation)
    return _mlp_fwd(x, w1, b1, w2, b2, activation, False)[0]


def mlp(x, w1, b1, w2, b2, activation="gelu", transposed=False):
    """act(x @ w1.T + b1) @ w2.T + b2 on tilekit: GPT-2's and BERT's MLP
    (Linear, bias, activation, Linear, bias), a torch op (autograd,
    torch.compile, CUDA graphs).

    x: bf16 (..., in); w1: bf16 hidden x in, w2: bf16 out x hidden
    (nn.Linear's layout, read as op T), or with transposed=True in x hidden
    and hidden x out (transformers' Conv1D, GPT-2's: y = x @ w + b, read as
    they are); b1, b2: their output sizes, bf16 or fp32, or None;
    activation: "relu", "gelu" (erf), "gelu_tanh" or "silu". Returns bf16
    (..., out). Two kernels forward (the first stores u = x w1 + b1 in bf16
    when a gradient will be needed); backward, dy w2 goes through the
    "backward" epilogue with u, which gives du and db1 in the same pass."""
    activation = _activation(activation, "tilekit.mlp", False)
    for name, w in (("w1", w1), ("w2", w2)):
        if w.dim() != 2:
            raise ValueError("tilekit.mlp: %s must be 2-D, got shape %s" % (name, tuple(w.shape)))
    f1, f2 = (w1, w2) if transposed else (w1.t(), w2.t())
    x2, lead = _flat(x, f1.shape[0], "tilekit.mlp")
    return _mlp_call(x2, f1, b1, f2, b2, activation).reshape(*lead, f2.shape[1])
