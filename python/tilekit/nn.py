"""tilekit.nn.Linear: torch.nn.Linear with its product on tilekit.

A subclass of torch.nn.Linear with the same constructor, parameters and
state_dict; only forward differs: y = x @ weight.T + bias through
torch.ops.tilekit.mm (autograd, torch.compile, CUDA graphs; see
tilekit/_torch_ops.py), x of any leading batch dimensions. bf16 x and
weight (as torch.nn.Linear, a bf16 result): TypeError otherwise.
tilekit.patch(model) turns a model's torch.nn.Linear modules into these.
"""
from ._lib import need_torch

torch = need_torch("tilekit.nn")

from ._torch_ops import linear  # noqa: E402

__all__ = ["Linear"]


class Linear(torch.nn.Linear):
    """torch.nn.Linear(in_features, out_features, bias=True, device=None,
    dtype=None) whose forward runs on tilekit (bf16 only)."""

    def forward(self, x):
        return linear(x, self.weight, self.bias)
