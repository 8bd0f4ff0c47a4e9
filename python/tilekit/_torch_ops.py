"""tilekit as a PyTorch operator: torch.ops.tilekit.mm, tilekit.matmul and
tilekit.patch; torch.ops.tilekit.grouped_mm, tilekit.grouped_mm,
torch.ops.tilekit.bmm and tilekit.bmm (issue 38, below). Imported on first
use of those names (it imports torch). Issue 39's fused ops (tilekit.linear,
tilekit.gated_mlp, tilekit.mlp) are in _torch_fused.py, the MLP modules
patch(fuse_mlp=True) recognizes in _torch_patch.py.

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
from typing import Optional

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
    """x itself when one dimension of its matrices is contiguous and the
    other does not overlap it (what tilekit takes, views included, at any
    batch stride), else a contiguous copy."""
    r, c = x.shape[-2:]
    sr, sc = x.stride()[-2:]
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
    """A tensor whose matrices are stored column by column (a transposed
    view such as weight.t()), with more than one column."""
    return t.shape[-1] > 1 and t.stride(-2) == 1 and t.stride(-1) >= max(1, t.shape[-2])


def _mm_backward(ctx, grad):
    """dA = dC B^T and dB = A^T dC, each computed in its input's layout: for
    b = weight.t() (nn.Linear), dB is computed as (dC^T A)^T, so that the
    weight's gradient arrives contiguous. Computed as A^T dC it is a
    transposed view, which AccumulateGrad copies into the weight's layout:
    7.2 of 14.4 ms of GPU time in a 2-layer Llama step on the H100
    (docs/NOTES.md, session 6). Every transpose here is a view (op T)."""
    a, b = ctx.saved_tensors
    return _grads(a, b, ctx.needs_input_grad, grad, mm)


def _grads(a, b, needs, grad, product):
    """The two gradients of product(a, b), each by product() (the op, the
    eager path, or a grouped or batched op) and only where needed (needs:
    ctx.needs_input_grad). .mT transposes the matrices (the last two
    dimensions): dA = dC B^T and dB = A^T dC hold per group and per batch
    too, with the ranks of the operands making the form (_grouped_form)."""
    ga = gb = None
    if needs[0]:
        ga = product(b, grad.mT).mT if _col_major(a) else product(grad, b.mT)
    if needs[1]:
        gb = product(grad.mT, a).mT if _col_major(b) else product(a.mT, grad)
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
        a, b = ctx.saved_tensors
        return _grads(a, b, ctx.needs_input_grad, grad, _mm_eager)


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


def patch(model, fuse_mlp=False):
    """Makes every torch.nn.Linear of model (model itself included) a
    tilekit.nn.Linear, in place: the same module objects with the same
    parameters, buffers, hooks and state_dict keys, only their class (and so
    their forward) changed, so optimizers and references to them keep
    working. Subclasses of torch.nn.Linear, which may have their own forward,
    are left alone. With fuse_mlp=True, first the MLP modules it recognizes
    (transformers' Llama, Mistral, Qwen2 and Qwen3 gated MLPs, GPT-2's MLP,
    BERT's feed-forward; Sequential(Linear, activation, Linear)) get a fused
    forward the same way (tilekit.gated_mlp, tilekit.mlp; see
    tilekit/_torch_patch.py for the rules and the bf16-on-CUDA condition),
    and the Linears inside them stay torch.nn.Linear. Returns model."""
    from .nn import Linear
    from ._torch_patch import fuse_mlps
    keep = fuse_mlps(model, fuse_mlp)
    for m in model.modules():
        if type(m) is torch.nn.Linear and id(m) not in keep:
            m.__class__ = Linear
    return model


# ---- issue 38: grouped and batched products ----
#
# torch.ops.tilekit.grouped_mm(a, b, offs=None, out_dtype=None) has
# torch._grouped_mm's shapes; torch.ops.tilekit.bmm(a, b, out_dtype=None)
# torch.bmm's. Both are custom ops as mm is: a fake implementation (shapes,
# strides, dtype), an autograd formula made of the op itself on transposed
# views (_grads), and a body that never reads offs on the host and
# allocates its result with torch.empty on the current stream, so a call
# is traced by torch.compile(fullgraph=True) and captured in a CUDA graph.


def _out_dtype(out_dtype, where):
    if out_dtype is None or out_dtype == torch.bfloat16:
        return torch.bfloat16
    if out_dtype == torch.float32:
        return torch.float32
    raise TypeError("%s: out_dtype %s is not supported (expected torch.bfloat16 or torch.float32)"
                    % (where, out_dtype))


def _grouped_form(a, b, offs, where):
    """The rules of grouped_mm, the same for real and fake tensors: the
    ranks of a and b, and the result's shape."""
    for name, x in (("a", a), ("b", b)):
        if x.dtype != torch.bfloat16:
            raise TypeError("%s: %s has dtype %s; tilekit multiplies bfloat16 tensors (convert with "
                            ".to(torch.bfloat16))" % (where, name, x.dtype))
        if x.dim() not in (2, 3):
            raise ValueError("%s: %s must be 2-D or 3-D, got shape %s" % (where, name, tuple(x.shape)))
    if a.device != b.device:
        raise TypeError("%s: a is on %s but b on %s" % (where, a.device, b.device))
    if a.shape[-1] != b.shape[-2]:
        raise ValueError("%s: shape mismatch: a is %s and b %s (a's last dimension must be b's next to last)"
                         % (where, tuple(a.shape), tuple(b.shape)))
    form = (a.dim(), b.dim())
    if form == (3, 3):
        if offs is not None:
            raise ValueError("%s: offs given for 3-D a and 3-D b: a batched product (every group the same size) "
                             "takes none" % where)
        if a.shape[0] != b.shape[0]:
            raise ValueError("%s: a holds %d matrices but b %d" % (where, a.shape[0], b.shape[0]))
        return form, (a.shape[0], a.shape[1], b.shape[2])
    if offs is None:
        raise ValueError("%s: offs is required for %d-D a and %d-D b (int32 cumulative group ends on a's device, "
                         "one per group)" % (where, a.dim(), b.dim()))
    if offs.dtype != torch.int32:
        raise TypeError("%s: offs has dtype %s; expected torch.int32 (cumulative group ends, e.g. "
                        "torch.cumsum(counts, 0, dtype=torch.int32))" % (where, offs.dtype))
    if offs.dim() != 1:
        raise ValueError("%s: offs must be 1-D (one end offset per group), got shape %s" % (where, tuple(offs.shape)))
    if offs.device != a.device:
        raise TypeError("%s: offs is on %s but a on %s" % (where, offs.device, a.device))
    groups = offs.shape[0]
    if form == (2, 3):
        if b.shape[0] != groups:
            raise ValueError("%s: %d offsets but b holds %d matrices (G x K x N: one per group)"
                             % (where, groups, b.shape[0]))
        return form, (a.shape[0], b.shape[2])
    if form == (3, 2):
        if a.shape[0] != groups:
            raise ValueError("%s: %d offsets but a holds %d matrices (G x M x K: one per group)"
                             % (where, groups, a.shape[0]))
        return form, (a.shape[1], b.shape[1])
    return form, (groups, a.shape[0], b.shape[1])


def _col_major_strides(shape):
    """The strides of a column-major M x N result (3-D x 2-D: tilekit writes
    its transpose row by row)."""
    return (1, torch.sym_max(shape[0], 1))


def _grouped_impl(a, b, offs, out_dtype, where):
    """The products themselves: the ops' body."""
    form, shape = _grouped_form(a, b, offs, where)
    dtype = _out_dtype(out_dtype, where)
    a, b = _usable(a), _usable(b)
    if form == (3, 3):
        out = torch.empty(shape, dtype=dtype, device=a.device)
        tilekit.gemm_batched(a, b, out)   # looked up per call: tests may wrap it
        return out
    offs = offs.contiguous()
    if form == (3, 2):
        # group g: out[:, cols g] = a[g] @ b[:, cols g]. tilekit has no split
        # of N: out.T = b.T @ a[g].T grouped by rows, written into a
        # column-major out (no copy, as a transposed view costs nothing).
        out = torch.empty_strided(shape, _col_major_strides(shape), dtype=dtype, device=a.device)
        if offs.shape[0]:
            tilekit.gemm_grouped(b.t(), a.mT, offs, out.t())
        return out
    out = torch.empty(shape, dtype=dtype, device=a.device)
    if offs.shape[0]:   # no group: nothing to compute (the library wants one at least)
        tilekit.gemm_grouped(a, b, offs, out)
    return out


def _grouped_fake(a, b, offs, out_dtype, where):
    form, shape = _grouped_form(a, b, offs, where)
    dtype = _out_dtype(out_dtype, where)
    if form == (3, 2):
        return a.new_empty_strided(shape, _col_major_strides(shape), dtype=dtype)
    return a.new_empty(shape, dtype=dtype)


def _bmm_check(a, b):
    if a.dim() != 3 or b.dim() != 3:
        raise ValueError("tilekit.bmm: expected 3-D a and b (batch x rows x cols), got shapes %s and %s"
                         % (tuple(a.shape), tuple(b.shape)))


@torch.library.custom_op("tilekit::grouped_mm", mutates_args=())
def grouped_mm_op(a: torch.Tensor, b: torch.Tensor, offs: Optional[torch.Tensor] = None,
                  out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """tilekit.grouped_mm as a torch op (see grouped_mm)."""
    return _grouped_impl(a, b, offs, out_dtype, "tilekit.grouped_mm")


@grouped_mm_op.register_fake
def _grouped_mm_fake(a, b, offs=None, out_dtype=None):
    return _grouped_fake(a, b, offs, out_dtype, "tilekit.grouped_mm")


@torch.library.custom_op("tilekit::bmm", mutates_args=())
def bmm_op(a: torch.Tensor, b: torch.Tensor, out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """tilekit.bmm as a torch op (see bmm)."""
    _bmm_check(a, b)
    return _grouped_impl(a, b, None, out_dtype, "tilekit.bmm")


@bmm_op.register_fake
def _bmm_fake(a, b, out_dtype=None):
    _bmm_check(a, b)
    return _grouped_fake(a, b, None, out_dtype, "tilekit.bmm")


def _saved_setup(ctx, inputs, output):
    """Both ops save their tensor inputs (a, b and grouped_mm's offs)."""
    ctx.save_for_backward(*inputs[:-1])


def _bf16(grad):
    """The incoming gradient as tilekit takes it (an fp32 out_dtype's is rounded to bf16)."""
    return grad if grad.dtype == torch.bfloat16 else grad.to(torch.bfloat16)


def _grouped_mm_backward(ctx, grad):
    """dA = dC B^T and dB = A^T dC per group, by the op on transposed views
    (_grads): for 2-D a x 3-D b (rows split) dA is again split by rows and
    dB by K (2-D x 2-D), and so on around the four forms; each gradient is
    computed in its input's layout (for b = w.transpose(-2, -1) of
    nn.Linear-style G x N x K weights, dB arrives in w's layout)."""
    a, b, offs = ctx.saved_tensors
    ga, gb = _grads(a, b, ctx.needs_input_grad, _bf16(grad), lambda x, y: grouped_mm_op(x, y, offs))
    return ga, gb, None, None


def _bmm_backward(ctx, grad):
    """Two bmm's: dA = dC B^T, dB = A^T dC (for a broadcast operand, autograd
    sums the batch through its expand)."""
    a, b = ctx.saved_tensors
    ga, gb = _grads(a, b, ctx.needs_input_grad, _bf16(grad), bmm_op)
    return ga, gb, None


grouped_mm_op.register_autograd(_grouped_mm_backward, setup_context=_saved_setup)
bmm_op.register_autograd(_bmm_backward, setup_context=_saved_setup)


# The eager path, as for mm (_MMFunction): outside torch.compile the custom
# op's dispatch costs more host time than a small grouped call takes on the
# GPU, so grouped_mm and bmm call the body directly, through an
# autograd.Function when a gradient will be needed (the same formulas as
# the ops'). docs/NOTES.md session 25 has the host times.

class _GroupedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, offs, out_dtype):
        ctx.save_for_backward(a, b, offs)
        return _grouped_impl(a, b, offs, out_dtype, "tilekit.grouped_mm")

    @staticmethod
    def backward(ctx, grad):
        a, b, offs = ctx.saved_tensors
        ga, gb = _grads(a, b, ctx.needs_input_grad, _bf16(grad), lambda x, y: _grouped_eager(x, y, offs, None))
        return ga, gb, None, None


class _BmmFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b, out_dtype):
        ctx.save_for_backward(a, b)
        return _grouped_impl(a, b, None, out_dtype, "tilekit.bmm")

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ga, gb = _grads(a, b, ctx.needs_input_grad, _bf16(grad), lambda x, y: _bmm_eager(x, y, None))
        return ga, gb, None


def _needs_grad(a, b):
    return torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)


def _grouped_eager(a, b, offs, out_dtype):
    if torch.compiler.is_compiling():
        return grouped_mm_op(a, b, offs, out_dtype)
    if _needs_grad(a, b):
        return _GroupedFunction.apply(a, b, offs, out_dtype)
    return _grouped_impl(a, b, offs, out_dtype, "tilekit.grouped_mm")


def _bmm_eager(a, b, out_dtype):
    _bmm_check(a, b)
    if torch.compiler.is_compiling():
        return bmm_op(a, b, out_dtype)
    if _needs_grad(a, b):
        return _BmmFunction.apply(a, b, out_dtype)
    return _grouped_impl(a, b, None, out_dtype, "tilekit.bmm")


def grouped_mm(a, b, offs=None, out_dtype=None):
    """torch._grouped_mm on tilekit: many products in one call, a torch op
    (autograd, torch.compile(fullgraph=True), CUDA graphs: offs is never read
    on the host). a and b: bf16 CUDA tensors, 2-D or 3-D; offs: 1-D int32 on
    their device, the cumulative end of each of the G groups along the split
    dimension (offs[g-1] .. offs[g]-1 is group g, offs[-1] = 0), required
    unless both are 3-D; out_dtype: torch.bfloat16 (default) or
    torch.float32.

    2-D a (M x K), 3-D b (G x K x N): rows split (a mixture of experts'
      tokens sorted by expert): out (M x N), rows of group g = a's rows of
      group g @ b[g]. b as w.transpose(-2, -1) of nn.Linear-style G x N x K
      weights is op T, not copied. Rows past offs[-1] are not written.
    2-D a (M x K), 2-D b (K x N): K split (the weight gradient): out
      (G x M x N), out[g] = a[:, group g] @ b[group g, :]; an empty group
      gives zeros. a as x.t() of a K x M tensor is op T.
    3-D a (G x M x K), 2-D b (K x N): N split: out (M x N), columns of group
      g = a[g] @ b's columns of group g. Computed as its transpose (rows
      split), so out is column-major (out.t() is contiguous).
    3-D a, 3-D b (G x M x K, G x K x N), no offs: batched, out G x M x N.

    Each matrix may be row- or column-major (transposed views are op T) at
    any batch stride; a tensor whose matrices are neither (an expanded or
    sliced view) is copied first. The gradients are the op again on
    transposed views (an fp32 out's gradient is rounded to bf16 first).
    TypeError for dtypes and devices, ValueError for shapes, naming the
    argument."""
    return _grouped_eager(a, b, offs, out_dtype)


def bmm(a, b, out_dtype=None):
    """torch.bmm on tilekit, a torch op (autograd, torch.compile, CUDA
    graphs): bf16 a (B x M x K) and b (B x K x N), one launch for the batch
    (tk_gemm_batched with the tensors' batch strides: an expanded operand,
    batch stride 0, is one matrix for all, not copied; transposed matrices
    are op T). Returns (B x M x N) of out_dtype, torch.bfloat16 (default) or
    torch.float32. The gradients are two bmm's."""
    return _bmm_eager(a, b, out_dtype)
