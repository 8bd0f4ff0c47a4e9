"""tilekit.nn: torch modules whose products run on tilekit.

Linear: a subclass of torch.nn.Linear with the same constructor (and an
optional activation), parameters and state_dict; only forward differs:
y = act(x @ weight.T + bias) through tilekit.linear, the bias and the
activation in the product's epilogue (autograd, torch.compile, CUDA graphs;
see tilekit/_torch_fused.py); without bias, torch.ops.tilekit.mm. x of any
leading batch dimensions. bf16 x and weight (as torch.nn.Linear, a bf16
result): TypeError otherwise. tilekit.patch(model) turns a model's
torch.nn.Linear modules into these. With fp8="e4m3" or "e5m2" (issue 40) the
product runs in FP8: the weight quantized once and kept (again when it
changes), the activations quantized at each call, forward only.

FusedGatedMLP, FusedConv1DMLP, FusedFeedForward, FusedSequentialMLP: the
fused forwards tilekit.patch(model, fuse_mlp=True) gives the MLP modules it
recognizes (isinstance tells which were fused; tilekit/_torch_patch.py).

GroupedLinear, moe_experts and sort_by_expert (issue 38): a mixture of
experts' layers as grouped products (torch.ops.tilekit.grouped_mm), tokens
sorted by expert and split by int32 offsets that stay on the device.
"""
import math

from ._lib import need_torch

torch = need_torch("tilekit.nn")

from ._torch_ops import grouped_mm  # noqa: E402
from ._torch_fused import ACTIVATIONS, _act_bf16, linear  # noqa: E402
from ._torch_patch import FusedConv1DMLP, FusedFeedForward, FusedGatedMLP, FusedSequentialMLP  # noqa: E402

__all__ = ["Linear", "GroupedLinear", "moe_experts", "sort_by_expert", "FusedGatedMLP", "FusedConv1DMLP",
           "FusedFeedForward", "FusedSequentialMLP"]


# Linear's fp8 option: its formats, and for each scale option the
# quantize_fp8 modes of the activations and of the weight.
FP8_FORMATS = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
FP8_SCALES = {"tensor": ("tensor", "tensor"), "row": ("row", "row"), "block": ("1x128", "128x128")}


class Linear(torch.nn.Linear):
    """torch.nn.Linear(in_features, out_features, bias=True, device=None,
    dtype=None, activation=None, fp8=None, scale="row") whose forward runs
    on tilekit (bf16 only): act(x @ weight.T + bias), bias and activation
    fused (tilekit.linear; activation: None, "relu", "gelu", "gelu_tanh" or
    "silu").

    fp8="e4m3" or "e5m2": the product in FP8 (tilekit.scaled_mm), with
    scale "tensor" (one scale for x, one for the weight), "row" (one per
    row of x and per output feature) or "block" (x by 1 x 128 groups, the
    weight by 128 x 128 blocks; in_features a multiple of 128). The weight
    is quantized on the first call and kept (not in the state_dict),
    quantized again when it changes (its version counter, storage or
    device); under torch.compile it is quantized inside the graph at each
    call instead. The activations are quantized at each call. The bias is
    added to the fp32 product, rounded to bf16 once; the activation then
    runs in torch on the bf16 result. Forward only: a call that would need
    a gradient (grad enabled and x or a parameter requiring one) raises
    RuntimeError; run it under torch.no_grad() or torch.inference_mode(),
    or with fp8=None to train."""
    activation = None   # what a torch.nn.Linear made one by tilekit.patch has
    fp8 = None
    fp8_scale = "row"
    _fp8_weight = None

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, activation=None, fp8=None,
                 scale="row"):
        super().__init__(in_features, out_features, bias, device, dtype)
        if activation is not None and activation not in ACTIVATIONS:
            raise ValueError("tilekit.nn.Linear: activation %r is not one of %s or None"
                             % (activation, ", ".join(map(repr, ACTIVATIONS))))
        if fp8 is not None and fp8 not in FP8_FORMATS:
            raise ValueError("tilekit.nn.Linear: fp8 %r is not one of %s or None"
                             % (fp8, ", ".join(map(repr, FP8_FORMATS))))
        if scale not in FP8_SCALES:
            raise ValueError("tilekit.nn.Linear: scale %r is not one of %s" % (scale, ", ".join(map(repr, FP8_SCALES))))
        if fp8 is not None and scale == "block" and in_features % 128:
            raise ValueError("tilekit.nn.Linear: scale 'block' needs in_features a multiple of 128, got %d"
                             % in_features)
        self.activation = activation
        self.fp8, self.fp8_scale = fp8, scale
        self._fp8_weight = None   # (key, codes, scale_b) of the last quantization

    def forward(self, x):
        if self.fp8 is None:
            return linear(x, self.weight, self.bias, self.activation)
        return self._fp8_forward(x)

    def _fp8_weight_operands(self):
        """(b, scale_b) of scaled_mm for the weight: quantized once, again when it changed."""
        from ._torch_fp8 import quantize_fp8
        w, dtype, mode = self.weight, FP8_FORMATS[self.fp8], FP8_SCALES[self.fp8_scale][1]
        if torch.compiler.is_compiling():
            q, s = quantize_fp8(w.detach(), dtype, mode)
        else:
            key = (w._version, w.data_ptr(), w.device, self.fp8, self.fp8_scale)
            if self._fp8_weight is None or self._fp8_weight[0] != key:
                with torch.no_grad():
                    self._fp8_weight = (key,) + quantize_fp8(w.detach(), dtype, mode)
            q, s = self._fp8_weight[1:]
        return q.t(), (s.t() if mode == "row" else s)

    def _fp8_forward(self, x):
        from ._torch_fp8 import quantize_fp8, scaled_mm
        if torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in self.parameters())):
            raise RuntimeError("tilekit.nn.Linear(fp8=%r) is forward only: no gradient flows through its FP8 "
                               "product (run it under torch.no_grad() or torch.inference_mode(), or use fp8=None "
                               "to train)" % self.fp8)
        if x.dtype != torch.bfloat16 or self.weight.dtype != torch.bfloat16:
            raise TypeError("tilekit.nn.Linear(fp8=%r): x and weight must be bfloat16, got %s and %s"
                            % (self.fp8, x.dtype, self.weight.dtype))
        x2 = x.reshape(-1, x.shape[-1])
        qx, sx = quantize_fp8(x2, FP8_FORMATS[self.fp8], FP8_SCALES[self.fp8_scale][0])
        b, sb = self._fp8_weight_operands()
        y = scaled_mm(qx, b, sx, sb, out_dtype=torch.bfloat16, bias=self.bias)
        if self.activation is not None:
            y = _act_bf16(y, self.activation)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self):
        return (super().extra_repr() + ("" if self.activation is None else ", activation=%r" % self.activation) +
                ("" if self.fp8 is None else ", fp8=%r, scale=%r" % (self.fp8, self.fp8_scale)))


class GroupedLinear(torch.nn.Module):
    """num_groups nn.Linear layers, each applied to its own rows of x.

    weight: num_groups x out_features x in_features (nn.Linear's layout,
    group by group; initialized as nn.Linear initializes each), bias:
    num_groups x out_features or None. forward(x, offs): x (rows x
    in_features, bf16) holds the groups' rows one group after the other,
    offs (int32, num_groups, on x's device) their cumulative ends; returns
    rows x out_features: row r of group g is x[r] @ weight[g].T (+ bias[g]).
    One grouped product, weight read as a transposed view (no copy); rows
    past offs[-1] are not computed (their values are undefined)."""

    def __init__(self, num_groups, in_features, out_features, bias=False, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.num_groups, self.in_features, self.out_features = num_groups, in_features, out_features
        self.weight = torch.nn.Parameter(torch.empty((num_groups, out_features, in_features), **factory))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty((num_groups, out_features), **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """nn.Linear's initialization for each group: kaiming_uniform_ with
        a = sqrt(5), which is U(-1/sqrt(in), 1/sqrt(in)), and the bias alike."""
        bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
        torch.nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            torch.nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x, offs):
        y = grouped_mm(x, self.weight.transpose(-2, -1), offs)
        if self.bias is None:
            return y
        # each row's group, found on the device (no host sync): the number of ends at or before the row
        rows = torch.arange(x.shape[0], device=offs.device, dtype=offs.dtype)
        group = torch.searchsorted(offs, rows, right=True).clamp_(max=self.num_groups - 1)
        return y + self.bias[group]

    def extra_repr(self):
        return "num_groups=%d, in_features=%d, out_features=%d, bias=%s" % (
            self.num_groups, self.in_features, self.out_features, self.bias is not None)


def sort_by_expert(top_k_index, num_experts):
    """The routing of a mixture of experts as grouped products take it:
    (order, offs) for top_k_index (tokens x top_k expert ids, the router's
    choice). order: the flat (token * top_k + slot) positions sorted by
    expert, stably (row i of the sorted input is token order[i] // top_k);
    offs: int32, num_experts, the cumulative ends of each expert's rows.
    Device ops alone (argsort, searchsorted): no host sync, CUDA-graph safe."""
    flat = top_k_index.reshape(-1)
    order = torch.argsort(flat, stable=True)
    experts = torch.arange(num_experts, device=flat.device, dtype=flat.dtype)
    offs = torch.searchsorted(flat[order], experts, right=True, out_int32=True)
    return order, offs


def moe_experts(x, offs, w_gate_up, w_down, act=None):
    """A mixture of experts' gated MLPs (Mixtral, Qwen3-MoE, ...) on x sorted
    by expert, as two grouped products.

    x: rows x hidden, bf16, each expert's rows one after the other; offs:
    int32 (experts,) their cumulative ends; w_gate_up: experts x
    2*intermediate x hidden (gate rows, then up rows: transformers'
    gate_up_proj), w_down: experts x hidden x intermediate; act: the gate's
    activation (default torch.nn.functional.silu). Returns rows x hidden:
    down(act(gate(x)) * up(x)) per expert. With the router's top_k_index and
    top_k_weights (tokens x top_k), a whole sparse MoE layer is

        order, offs = tilekit.nn.sort_by_expert(top_k_index, num_experts)
        token = order // top_k
        y = tilekit.nn.moe_experts(x[token], offs, w_gate_up, w_down)
        y = y * top_k_weights.reshape(-1)[order, None]
        out = torch.zeros_like(x).index_add_(0, token, y.to(x.dtype))

    with no host sync (tests/gpu/test_torch.py runs it in place of
    transformers' experts loop and compares values and gradients)."""
    h = grouped_mm(x, w_gate_up.transpose(-2, -1), offs)
    gate, up = h.chunk(2, dim=-1)
    h = (act or torch.nn.functional.silu)(gate) * up
    return grouped_mm(h, w_down.transpose(-2, -1), offs)
