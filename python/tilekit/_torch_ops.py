"""tilekit as a PyTorch operator: torch.ops.tilekit.mm, tilekit.matmul and
tilekit.patch. Imported on first use of those names (it imports torch).

torch.ops.tilekit.mm(a, b) is a torch.library custom op: bf16 a (M x K) times
bf16 b (K x N), fp32 accumulation, bf16 result, on tilekit.gemm. It has a
fake-tensor implementation (shapes, dtype and device only), so torch.compile
traces through it without a graph break, and an autograd formula whose two
products are the op itself on transposed views (dA = dC B^T, dB = A^T dC):
tilekit runs them as op T problems, no copy. Inside the op, an operand whose
strides tilekit cannot take (neither dimension contiguous, e.g. an expanded
gradient) is copied with .contiguous(); the result is allocated by torch
(torch.empty), so the caching allocator and CUDA-graph memory pools apply.
The call runs on torch's current stream of the tensors' device and never
synchronizes the host.
"""
from ._lib import need_torch

torch = need_torch("tilekit.matmul and tilekit.patch")

import tilekit  # noqa: E402


def _check(a, b):
    """The op's argument rules, the same for real and fake tensors."""
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError("tilekit::mm: expected 2-D matrices, got %d-D and %d-D" % (a.dim(), b.dim()))
    for name, x in (("a", a), ("b", b)):
        if x.dtype != torch.bfloat16:
            raise TypeError("tilekit::mm: %s has dtype %s; tilekit multiplies bfloat16 tensors (convert with "
                            ".to(torch.bfloat16))" % (name, x.dtype))
    if a.shape[1] != b.shape[0]:
        raise ValueError("tilekit::mm: shape mismatch: a is %d x %d but b is %d x %d"
                         % (a.shape[0], a.shape[1], b.shape[0], b.shape[1]))
    if a.device != b.device:
        raise TypeError("tilekit::mm: a is on %s but b on %s" % (a.device, b.device))


def _usable(x):
    """x itself when one dimension is contiguous and the other does not
    overlap it (what tilekit takes, views included), else a contiguous copy."""
    r, c = x.shape
    sr, sc = x.stride()
    if (c <= 1 or sc == 1) and (r <= 1 or sr >= max(c, 1)):
        return x
    if (r <= 1 or sr == 1) and (c <= 1 or sc >= max(r, 1)):
        return x
    return x.contiguous()


def _mm_impl(a, b):
    """The product itself: the op's body and the eager path's."""
    _check(a, b)
    out = torch.empty((a.shape[0], b.shape[1]), dtype=torch.bfloat16, device=a.device)
    tilekit.gemm(_usable(a), _usable(b), out)   # looked up per call: tests may wrap it
    return out


@torch.library.custom_op("tilekit::mm", mutates_args=())
def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b with bf16 a (M x K) and b (K x N): a bf16 M x N tensor, on tilekit."""
    return _mm_impl(a, b)


@mm.register_fake
def _mm_fake(a, b):
    _check(a, b)
    return a.new_empty((a.shape[0], b.shape[1]))


def _mm_setup(ctx, inputs, output):
    a, b = inputs
    ctx.save_for_backward(a, b)


def _col_major(t):
    """A 2-D tensor stored column by column (a transposed view such as
    weight.t()), with more than one column."""
    return t.shape[1] > 1 and t.stride(0) == 1 and t.stride(1) >= max(1, t.shape[0])


def _mm_backward(ctx, grad):
    """dA = dC B^T and dB = A^T dC, each computed in its input's layout: for
    b = weight.t() (nn.Linear), dB is computed as (dC^T A)^T, so that the
    weight's gradient arrives contiguous. Computed as A^T dC it is a
    transposed view, which AccumulateGrad copies into the weight's layout:
    7.2 of 14.4 ms of GPU time in a 2-layer Llama step on the H100
    (docs/NOTES.md, session 6). Every transpose here is a view (op T)."""
    return _grads(ctx, grad, mm)


def _grads(ctx, grad, product):
    """The two gradients, each by product() (the op, or the eager path) and
    only where needed."""
    a, b = ctx.saved_tensors
    ga = gb = None
    if ctx.needs_input_grad[0]:
        ga = product(b, grad.t()).t() if _col_major(a) else product(grad, b.t())
    if ctx.needs_input_grad[1]:
        gb = product(grad.t(), a).t() if _col_major(b) else product(a.t(), grad)
    return ga, gb


mm.register_autograd(_mm_backward, setup_context=_mm_setup)


class _MMFunction(torch.autograd.Function):
    """The eager path's autograd: the same formulas as the op's, without the
    custom op's dispatch (about 13 us of host time per call on the H100
    machine: tilekit.matmul 24.7 us against tilekit.gemm's 6.7 at 64^3,
    docs/NOTES.md session 6)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return _mm_impl(a, b)

    @staticmethod
    def backward(ctx, grad):
        return _grads(ctx, grad, _mm_eager)


def _mm_eager(a, b):
    """torch.ops.tilekit.mm where torch.compile traces (no graph break), and
    outside it the product directly: through _MMFunction when a gradient
    will be needed, else as a plain call."""
    if torch.compiler.is_compiling():
        return mm(a, b)
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        return _MMFunction.apply(a, b)
    return _mm_impl(a, b)


def matmul(a, b):
    """a @ b on tilekit, as a torch op (autograd, torch.compile, CUDA graphs).

    a: bf16 (..., K), any number of leading batch dimensions (a 1-D a is one
    row, as in torch.matmul); b: bf16 K x N, 2-D (a transposed view such as
    weight.t() is used as it is). Returns bf16 (..., N): fp32 accumulation,
    rounded once. TypeError for another dtype or device, ValueError for
    shapes."""
    if b.dim() != 2:
        raise ValueError("tilekit.matmul: b must be 2-D (K x N), got shape %s" % (tuple(b.shape),))
    if a.dim() == 2:
        return _mm_eager(a, b)
    if a.dim() < 1:
        raise ValueError("tilekit.matmul: a must have at least one dimension")
    lead = a.shape[:-1]
    y = _mm_eager(a.reshape(-1, a.shape[-1]), b)
    return y.reshape(*lead, b.shape[1])


def linear(x, weight, bias=None):
    """torch.nn.functional.linear on tilekit: x @ weight.T (+ bias), bf16."""
    y = matmul(x, weight.t())
    return y if bias is None else y + bias


def patch(model):
    """Makes every torch.nn.Linear of model (model itself included) a
    tilekit.nn.Linear, in place: the same module objects with the same
    parameters, buffers, hooks and state_dict keys, only their class (and so
    their forward) changed, so optimizers and references to them keep
    working. Subclasses of torch.nn.Linear, which may have their own forward,
    are left alone. Returns model."""
    from .nn import Linear
    for m in model.modules():
        if type(m) is torch.nn.Linear:
            m.__class__ = Linear
    return model
