"""tilekit.patch(model, fuse_mlp=True): the MLP modules it recognizes, and
the fused forwards it gives them (issue 39).

Recognized (the class by name, defined in transformers, and the parts it
must hold; the sets below can be extended):
- GATED_MLPS (LlamaMLP, MistralMLP, Qwen2MLP, Qwen3MLP): gate_proj, up_proj
  and down_proj torch.nn.Linear, act_fn a recognized activation; run as
  tilekit.gated_mlp (SwiGLU with SiLU).
- CONV1D_MLPS (GPT2MLP): c_fc and c_proj transformers Conv1D (weights in x
  out), act, dropout; run as tilekit.mlp(transposed=True), then the dropout.
- FEED_FORWARD_LAYERS (BertLayer): intermediate (BertIntermediate: dense
  torch.nn.Linear and intermediate_act_fn) and output (BertOutput: dense,
  dropout, LayerNorm); its feed_forward_chunk runs LayerNorm(dropout(
  tilekit.mlp(x)) + x): both dense layers, their biases and the GELU in one
  fused MLP (the act' of the backward in the second product's epilogue);
  the dropout, the residual add and the LayerNorm stay in torch.
- torch.nn.Sequential of exactly torch.nn.Linear, an activation module,
  torch.nn.Linear: tilekit.mlp.
An activation is recognized when it is torch.nn.SiLU, torch.nn.GELU
(approximate "none" or "tanh"), torch.nn.ReLU, transformers' SiLUActivation,
GELUActivation, GELUTanh / PytorchGELUTanh, NewGELUActivation, or the
functions F.silu, F.gelu, F.relu, torch.relu (ACT2FN's "silu", "swish",
"gelu", "gelu_new", "gelu_pytorch_tanh", "relu"). A module whose parts or
activation are anything else, or that has forward hooks or pre-hooks on
the parts its fused forward skips, is left alone (not an error).

A recognized module keeps its object, parameters, buffers, hooks and
state_dict keys: only its class changes, to a subclass of its own class
(made once per class) whose forward runs fused when the input and every
weight and bias it uses are bf16 on CUDA (_torch_fused.fusable), and is
the class's own forward otherwise (fp32, the CPU). The parts it fuses keep
their classes (torch.nn.Linear, not tilekit.nn.Linear), so that own
forward is the stock computation.
"""
import torch

from . import _torch_fused as fused

GATED_MLPS = {"LlamaMLP", "MistralMLP", "Qwen2MLP", "Qwen3MLP"}
CONV1D_MLPS = {"GPT2MLP"}
FEED_FORWARD_LAYERS = {"BertLayer"}

_TRANSFORMERS_ACTIVATIONS = {"SiLUActivation": "silu", "GELUActivation": "gelu", "GELUTanh": "gelu_tanh",
                             "PytorchGELUTanh": "gelu_tanh", "NewGELUActivation": "gelu_tanh"}


def activation_name(fn):
    """tilekit's name of the activation module or function fn, or None."""
    t = type(fn)
    if t is torch.nn.GELU:
        return {"none": "gelu", "tanh": "gelu_tanh"}.get(fn.approximate)
    if t is torch.nn.SiLU:
        return "silu"
    if t is torch.nn.ReLU:
        return "relu"
    if t.__module__.startswith("transformers.") and t.__name__ in _TRANSFORMERS_ACTIVATIONS:
        return _TRANSFORMERS_ACTIVATIONS[t.__name__]
    F = torch.nn.functional
    for f, name in ((F.silu, "silu"), (F.gelu, "gelu"), (F.relu, "relu"), (torch.relu, "relu")):
        if fn is f:
            return name
    return None


def _from_transformers(m, names):
    t = type(m)
    return t.__name__ in names and t.__module__.startswith("transformers.")


def _linear(m):
    return type(m) is torch.nn.Linear


def _conv1d(m):
    return type(m).__name__ == "Conv1D" and type(m).__module__.startswith("transformers.")


def _hooked(*modules):
    """Whether any of modules has forward hooks or pre-hooks, which a fused
    forward, not calling it, would skip."""
    return any(isinstance(m, torch.nn.Module) and (m._forward_hooks or m._forward_pre_hooks) for m in modules)


# ---- the fused forwards (mixins put before the module's own class) ----

class FusedGatedMLP:
    """A gated MLP (gate_proj, up_proj, down_proj, act_fn) run as tilekit.gated_mlp."""
    tilekit_activation = None

    def forward(self, x):
        g, u, d = self.gate_proj, self.up_proj, self.down_proj
        if not fused.fusable(x, g.weight, u.weight, d.weight, g.bias, u.bias, d.bias):
            return super().forward(x)
        return fused.gated_mlp(x, g.weight, u.weight, d.weight, self.tilekit_activation, g.bias, u.bias, d.bias)

    def tilekit_parts(self):
        return [self.gate_proj, self.up_proj, self.down_proj, self.act_fn]


class FusedConv1DMLP:
    """GPT-2's MLP (c_fc, act, c_proj: Conv1D, dropout) run as tilekit.mlp."""
    tilekit_activation = None

    def forward(self, x):
        a, b = self.c_fc, self.c_proj
        if not fused.fusable(x, a.weight, a.bias, b.weight, b.bias):
            return super().forward(x)
        return self.dropout(fused.mlp(x, a.weight, a.bias, b.weight, b.bias, self.tilekit_activation,
                                      transposed=True))

    def tilekit_parts(self):
        return [self.c_fc, self.c_proj, self.act]


class FusedFeedForward:
    """BERT's layer: feed_forward_chunk (intermediate, output) with both
    dense layers as one tilekit.mlp."""
    tilekit_activation = None

    def feed_forward_chunk(self, attention_output):
        a, b = self.intermediate.dense, self.output.dense
        if not fused.fusable(attention_output, a.weight, a.bias, b.weight, b.bias):
            return super().feed_forward_chunk(attention_output)
        y = fused.mlp(attention_output, a.weight, a.bias, b.weight, b.bias, self.tilekit_activation)
        return self.output.LayerNorm(self.output.dropout(y) + attention_output)

    def tilekit_parts(self):
        return [self.intermediate, self.output, self.intermediate.dense, self.output.dense,
                self.intermediate.intermediate_act_fn]


class FusedSequentialMLP:
    """torch.nn.Sequential(Linear, activation, Linear) run as tilekit.mlp."""
    tilekit_activation = None

    def forward(self, x):
        a, b = self[0], self[2]
        if not fused.fusable(x, a.weight, a.bias, b.weight, b.bias):
            return super().forward(x)
        return fused.mlp(x, a.weight, a.bias, b.weight, b.bias, self.tilekit_activation)

    def tilekit_parts(self):
        return list(self)


FUSED = (FusedGatedMLP, FusedConv1DMLP, FusedFeedForward, FusedSequentialMLP)


def _match(m):
    """(the mixin, the activation's name) for a module patch fuses, else None."""
    if _from_transformers(m, GATED_MLPS):
        parts = [getattr(m, k, None) for k in ("gate_proj", "up_proj", "down_proj")]
        if all(_linear(p) for p in parts) and not _hooked(*parts):
            return FusedGatedMLP, activation_name(getattr(m, "act_fn", None))
    elif _from_transformers(m, CONV1D_MLPS):
        parts = [getattr(m, k, None) for k in ("c_fc", "c_proj")]
        if all(_conv1d(p) for p in parts) and isinstance(getattr(m, "dropout", None), torch.nn.Dropout) \
                and not _hooked(*parts):
            return FusedConv1DMLP, activation_name(getattr(m, "act", None))
    elif _from_transformers(m, FEED_FORWARD_LAYERS) and hasattr(type(m), "feed_forward_chunk"):
        inter, out = getattr(m, "intermediate", None), getattr(m, "output", None)
        if type(inter).__name__ == "BertIntermediate" and type(out).__name__ == "BertOutput" \
                and _linear(getattr(inter, "dense", None)) and _linear(getattr(out, "dense", None)) \
                and isinstance(getattr(out, "dropout", None), torch.nn.Dropout) \
                and isinstance(getattr(out, "LayerNorm", None), torch.nn.LayerNorm) \
                and not _hooked(inter, out, inter.dense, out.dense):
            return FusedFeedForward, activation_name(getattr(inter, "intermediate_act_fn", None))
    elif type(m) is torch.nn.Sequential and len(m) == 3 and _linear(m[0]) and _linear(m[2]) and not _hooked(*m):
        return FusedSequentialMLP, activation_name(m[1])
    return None


_classes = {}


def _fused_class(mixin, cls):
    """The subclass of cls with mixin's forward, one per (mixin, cls)."""
    key = (mixin, cls)
    if key not in _classes:
        _classes[key] = type("Tilekit" + cls.__name__, (mixin, cls), {"__module__": __name__})
    return _classes[key]


def fuse_mlps(model, fuse=True):
    """With fuse, gives every recognized MLP module of model (model
    included) its fused class, in place. Returns the ids of the modules that
    patch must leave as they are: the parts of fused modules (an earlier
    patch's too, also without fuse)."""
    keep = set()
    for m in list(model.modules()):
        if not isinstance(m, FUSED):
            found = _match(m) if fuse else None
            if found is None or found[1] is None:
                continue
            mixin, act = found
            m.__class__ = _fused_class(mixin, type(m))
            m.tilekit_activation = act
        keep.update(id(p) for p in m.tilekit_parts())
    return keep
