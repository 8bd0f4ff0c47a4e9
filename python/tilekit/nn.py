"""tilekit.nn: torch modules whose products run on tilekit.

Linear: a subclass of torch.nn.Linear with the same constructor (and an
optional activation), parameters and state_dict; only forward differs:
y = act(x @ weight.T + bias) through tilekit.linear, the bias and the
activation in the product's epilogue (autograd, torch.compile, CUDA graphs;
see tilekit/_torch_fused.py); without bias, torch.ops.tilekit.mm. x of any
leading batch dimensions. bf16 x and weight (as torch.nn.Linear, a bf16
result): TypeError otherwise. tilekit.patch(model) turns a model's
torch.nn.Linear modules into these.

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
from ._torch_fused import ACTIVATIONS, linear  # noqa: E402
from ._torch_patch import FusedConv1DMLP, FusedFeedForward, FusedGatedMLP, FusedSequentialMLP  # noqa: E402

__all__ = ["Linear", "GroupedLinear", "moe_experts", "sort_by_expert", "FusedGatedMLP", "FusedConv1DMLP",
           "FusedFeedForward", "FusedSequentialMLP"]


class Linear(torch.nn.Linear):
    """torch.nn.Linear(in_features, out_features, bias=True, device=None,
    dtype=None, activation=None) whose forward runs on tilekit (bf16 only):
    act(x @ weight.T + bias), bias and activation fused (tilekit.linear;
    activation: None, "relu", "gelu", "gelu_tanh" or "silu")."""
    activation = None   # what a torch.nn.Linear made one by tilekit.patch has

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None, activation=None):
        super().__init__(in_features, out_features, bias, device, dtype)
        if activation is not None and activation not in ACTIVATIONS:
            raise ValueError("tilekit.nn.Linear: activation %r is not one of %s or None"
                             % (activation, ", ".join(map(repr, ACTIVATIONS))))
        self.activation = activation

    def forward(self, x):
        return linear(x, self.weight, self.bias, self.activation)

    def extra_repr(self):
        return super().extra_repr() + ("" if self.activation is None else ", activation=%r" % self.activation)


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
