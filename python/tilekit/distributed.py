"""tilekit.distributed: tensor-parallel GEMMs over NCCL with the
communication hidden under the product (issue 41), on torch.distributed
process groups of the NCCL backend, one GPU per process.

    import torch, torch.distributed as dist, tilekit.distributed as tkd
    dist.init_process_group("nccl")                    # torchrun --nproc-per-node 2 ...
    torch.cuda.set_device(dist.get_rank())
    y = tkd.all_gather_matmul(x_shard, w)              # (R*m, N) = all_gather(x_shard) @ w
    z = tkd.matmul_reduce_scatter(x, w_shard)          # this rank's M/R rows of sum_r x_r @ w_r

Each process group gets tilekit's own NCCL communicator, created once (on
the first call with that group, on every rank of it: a collective) from a
unique id that the group's first rank makes and torch.distributed
broadcasts over the group; the library is libtilekit_dist.so (beside
libtilekit.so, or $TILEKIT_DIST_LIB), which uses the NCCL torch loaded.
Calls run on the current CUDA stream, like torch operations; both are
differentiable (the backward of one is the other), and ColumnParallelLinear,
RowParallelLinear and TensorParallelMLP build tensor-parallel layers on
them (sequence-parallel activations: each rank holds its rows of the
tokens between the layers).
"""
import ctypes
import os
import threading

from . import _lib

ALL_GATHER_GEMM, GEMM_REDUCE_SCATTER = 1, 2
UNIQUE_ID_BYTES = 128

__all__ = ["all_gather_matmul", "matmul_reduce_scatter", "ColumnParallelLinear", "RowParallelLinear",
           "TensorParallelMLP", "communicator", "library_path"]


class DistDesc(ctypes.Structure):
    """tk_dist_desc (versioned: size first; tests/python/test_distributed.py
    compares the offsets with the C compiler's)."""
    _fields_ = [
        ("size", ctypes.c_size_t), ("problem", _lib.GemmProblem), ("gathered", ctypes.c_void_p),
        ("chunks", ctypes.c_int32), ("partial_type", ctypes.c_int32), ("check_shapes", ctypes.c_int32),
        ("reserved", ctypes.c_int32), ("kernel", ctypes.c_char_p),
    ]


class DistInfo(ctypes.Structure):
    """tk_dist_info (versioned: size first)."""
    _fields_ = [
        ("size", ctypes.c_size_t), ("rank", ctypes.c_int), ("nranks", ctypes.c_int), ("device", ctypes.c_int),
        ("nccl_version", ctypes.c_int), ("link_gbps", ctypes.c_double), ("comm_sms", ctypes.c_int),
        ("gemm_sms", ctypes.c_int), ("last_chunks", ctypes.c_int), ("workspace_bytes", ctypes.c_size_t),
    ]


_vp = ctypes.c_void_p
_status = ctypes.c_int
PROTOTYPES = {
    "tk_dist_create": (_status, [ctypes.POINTER(_vp), _vp]),
    "tk_dist_destroy": (_status, [_vp]),
    "tk_dist_last_error": (ctypes.c_char_p, [_vp]),
    "tk_dist_all_gather_gemm": (_status, [_vp, ctypes.POINTER(DistDesc), _vp]),
    "tk_dist_gemm_reduce_scatter": (_status, [_vp, ctypes.POINTER(DistDesc), _vp]),
    "tk_dist_set_comm_sms": (_status, [_vp, ctypes.c_int]),
    "tk_dist_set_transport": (_status, [_vp, ctypes.c_int]),
    "tk_dist_sync": (_status, [_vp, ctypes.c_int]),
    "tk_dist_get_info": (_status, [_vp, ctypes.POINTER(DistInfo)]),
    "tk_dist_unique_id": (_status, [ctypes.c_char_p]),
    "tk_dist_comm_init": (_status, [ctypes.POINTER(_vp), ctypes.c_int, ctypes.c_char_p, ctypes.c_int]),
    "tk_dist_comm_destroy": (_status, [_vp]),
}

_lock = threading.Lock()
_dist_lib = None


def library_path():
    """$TILEKIT_DIST_LIB, else libtilekit_dist.so beside the libtilekit.so in use."""
    env = os.environ.get("TILEKIT_DIST_LIB")
    if env:
        return env
    return os.path.join(os.path.dirname(_lib.library_path()), "libtilekit_dist.so")


def load():
    """libtilekit_dist through ctypes, its prototypes declared; LibraryNotFound with a hint."""
    global _dist_lib
    if _dist_lib is None:
        with _lock:
            if _dist_lib is None:
                _lib.load_ctypes()   # the libtilekit.so the package uses, first: the dist library binds to it
                path = library_path()
                try:
                    lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                except OSError as e:
                    raise _lib.LibraryNotFound(
                        "tilekit.distributed: cannot load %s (%s); build it with `make dist` (it needs NCCL's "
                        "nccl.h) or set $TILEKIT_DIST_LIB" % (path, e)) from None
                for name, (restype, argtypes) in PROTOTYPES.items():
                    fn = getattr(lib, name)
                    fn.restype, fn.argtypes = restype, argtypes
                _dist_lib = lib
    return _dist_lib


def _check(status, ctx, where):
    if status != _lib.SUCCESS:
        msg = load().tk_dist_last_error(ctx)
        raise _lib.error_for(status, msg.decode("utf-8", "replace") if msg else "", where)


class Communicator:
    """tilekit's NCCL communicator and tk_dist context for one process group
    on this process's current device. Made by communicator(group)."""

    def __init__(self, group=None):
        torch = _lib.need_torch("tilekit.distributed")
        import torch.distributed as dist
        lib = load()
        self.group = group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)
        self.device = torch.cuda.current_device()
        uid = ctypes.create_string_buffer(UNIQUE_ID_BYTES)
        if self.rank == 0:
            _check(lib.tk_dist_unique_id(uid), None, "tilekit.distributed: tk_dist_unique_id")
        box = [uid.raw if self.rank == 0 else None]
        src = dist.get_global_rank(group, 0) if group is not None else 0
        dist.broadcast_object_list(box, src=src, group=group)
        comm = _vp()
        _check(lib.tk_dist_comm_init(ctypes.byref(comm), self.size, box[0], self.rank), None,
               "tilekit.distributed: tk_dist_comm_init")
        self.comm = comm.value
        ctx = _vp()
        _check(lib.tk_dist_create(ctypes.byref(ctx), self.comm), None, "tilekit.distributed: tk_dist_create")
        self.ctx = ctx.value

    def info(self):
        """tk_dist_get_info as a dict."""
        i = DistInfo(size=ctypes.sizeof(DistInfo))
        _check(load().tk_dist_get_info(self.ctx, ctypes.byref(i)), self.ctx, "tilekit.distributed.info")
        return {name: getattr(i, name) for name, _ in DistInfo._fields_ if name != "size"}

    def set_comm_sms(self, sms):
        """SMs left to NCCL beside the GEMMs (tk_dist_set_comm_sms)."""
        _check(load().tk_dist_set_comm_sms(self.ctx, int(sms)), self.ctx, "tilekit.distributed.set_comm_sms")

    def set_transport(self, name):
        """How NCCL moves the chunks (tk_dist_set_transport): "auto", "p2p"
        (ncclSend/ncclRecv) or "ce" (copy-engine copies between NCCL's
        symmetric windows). Every rank
        must ask for the same."""
        codes = {"auto": 0, "p2p": 1, "ce": 2}
        if name not in codes:
            raise ValueError("tilekit.distributed.set_transport: %r is not auto, p2p or ce" % (name,))
        _check(load().tk_dist_set_transport(self.ctx, codes[name]), self.ctx, "tilekit.distributed.set_transport")

    def close(self):
        """Waits for the last call, frees the context and destroys the communicator (every rank)."""
        if self.ctx:
            lib = load()
            _check(lib.tk_dist_destroy(self.ctx), self.ctx, "tilekit.distributed: tk_dist_destroy")
            self.ctx = None
            _check(lib.tk_dist_comm_destroy(self.comm), None, "tilekit.distributed: tk_dist_comm_destroy")
            self.comm = None


_comms = {}


def communicator(group=None):
    """The Communicator of group (None: the default group) on the current
    device, made on first use: every rank of the group must make that first
    call together."""
    torch = _lib.need_torch("tilekit.distributed")
    key = (id(group) if group is not None else None, torch.cuda.current_device())
    c = _comms.get(key)
    if c is None:
        c = _comms[key] = Communicator(group)
    return c


def _matrix(t, what, torch):
    """(pointer, op, ld) of a 2-D bf16 CUDA tensor read as it is (op N:
    rows contiguous) or as the transpose of a row-contiguous one (op T)."""
    if not isinstance(t, torch.Tensor) or not t.is_cuda:
        raise TypeError("tilekit.distributed: %s must be a CUDA tensor" % what)
    if t.dim() != 2:
        raise ValueError("tilekit.distributed: %s must be 2-D, got %s" % (what, tuple(t.shape)))
    if t.dtype != torch.bfloat16:
        raise TypeError("tilekit.distributed: %s must be bfloat16, got %s" % (what, t.dtype))
    rows, cols = t.shape
    if t.stride(1) == 1 or cols == 1:
        return t.data_ptr(), _lib.OP_N, max(t.stride(0), cols, 1)
    if t.stride(0) == 1 or rows == 1:
        return t.data_ptr(), _lib.OP_T, max(t.stride(1), rows, 1)
    raise ValueError("tilekit.distributed: %s (strides %s) is neither row- nor column-contiguous"
                     % (what, tuple(t.stride())))


def _run(op, x, w, out, gathered, group, chunks, kernel, partial_dtype, where):
    torch = _lib.need_torch(where)
    comm = communicator(group)
    if x.device.index != comm.device or w.device.index != comm.device:
        raise ValueError("%s: x and w must be on the current device (cuda:%d)" % (where, comm.device))
    pa, op_a, lda = _matrix(x, "x", torch)
    if op == ALL_GATHER_GEMM and op_a != _lib.OP_N:
        raise ValueError("%s: x_shard's rows must be contiguous (x_shard.stride(1) == 1)" % where)
    pb, op_b, ldb = _matrix(w, "w", torch)
    k = x.shape[1]
    if w.shape[0] != k:
        raise ValueError("%s: x is %s but w is %s (x @ w needs w.shape[0] == %d)" % (where, tuple(x.shape),
                                                                                     tuple(w.shape), k))
    m = x.shape[0] * (comm.size if op == ALL_GATHER_GEMM else 1)
    n = w.shape[1]
    rows_out = m if op == ALL_GATHER_GEMM else m // comm.size
    if op == GEMM_REDUCE_SCATTER and m % comm.size:
        raise ValueError("%s: x has %d rows, not a multiple of the group's %d ranks" % (where, m, comm.size))
    if out is None:
        out = torch.empty(rows_out, n, dtype=torch.bfloat16, device=x.device)
    elif (tuple(out.shape) != (rows_out, n) or out.dtype not in (torch.bfloat16, torch.float32) or not out.is_cuda
          or out.stride(1) != 1):
        raise ValueError("%s: out must be a row-contiguous (%d, %d) bfloat16 or float32 CUDA tensor"
                         % (where, rows_out, n))
    if gathered is not None and (tuple(gathered.shape) != (m, k) or gathered.dtype != torch.bfloat16 or
                                 not gathered.is_contiguous()):
        raise ValueError("%s: gathered must be a contiguous (%d, %d) bfloat16 tensor" % (where, m, k))
    c_type = _lib.F32 if out.dtype == torch.float32 else _lib.BF16
    d = DistDesc(size=ctypes.sizeof(DistDesc))
    d.problem = _lib.GemmProblem(_lib.ROW_MAJOR, op_a, op_b, m, n, k, 1.0, 0.0, pa, lda, pb, ldb, out.data_ptr(),
                                 max(out.stride(0), n, 1), c_type)
    d.gathered = gathered.data_ptr() if gathered is not None else None
    d.chunks = int(chunks)
    d.partial_type = _lib.BF16 if partial_dtype == torch.bfloat16 else _lib.F32
    d.kernel = kernel.encode() if kernel else None
    lib = load()
    fn = lib.tk_dist_all_gather_gemm if op == ALL_GATHER_GEMM else lib.tk_dist_gemm_reduce_scatter
    _check(fn(comm.ctx, ctypes.byref(d), torch.cuda.current_stream().cuda_stream), comm.ctx, where)
    return out


def _all_gather_matmul(x_shard, w, group=None, out=None, gathered=None, chunks=0, kernel=None):
    return _run(ALL_GATHER_GEMM, x_shard, w, out, gathered, group, chunks, kernel, None,
                "tilekit.distributed.all_gather_matmul")


def _matmul_reduce_scatter(x, w_shard, group=None, out=None, chunks=0, kernel=None, partial_dtype=None):
    return _run(GEMM_REDUCE_SCATTER, x, w_shard, out, None, group, chunks, kernel, partial_dtype,
                "tilekit.distributed.matmul_reduce_scatter")


_functions = {}


def _autograd(torch):
    """The two operations as autograd Functions, each the other's backward:
    y = all_gather(x) @ w gives dx = reduce_scatter(dy @ w^T) and dw =
    all_gather(x)^T dy; z = reduce_scatter(x @ w) gives dx = all_gather(dz) @
    w^T and dw = x^T all_gather(dz)."""
    if "ag" in _functions:   # _real_classes shares the dict: test the key, not the dict
        return _functions

    class AllGatherMatmul(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x_shard, w, group, chunks, kernel):
            gathered = torch.empty(x_shard.shape[0] * communicator(group).size, x_shard.shape[1],
                                   dtype=x_shard.dtype, device=x_shard.device)
            y = _all_gather_matmul(x_shard, w, group, gathered=gathered, chunks=chunks, kernel=kernel)
            ctx.mark_non_differentiable(gathered)
            ctx.save_for_backward(gathered, w)
            ctx.group = group
            return y, gathered

        @staticmethod
        def backward(ctx, dy, _dgathered):
            gathered, w = ctx.saved_tensors
            dy = dy.contiguous()
            dx = _matmul_reduce_scatter(dy, w.t(), ctx.group) if ctx.needs_input_grad[0] else None
            dw = gathered.t() @ dy if ctx.needs_input_grad[1] else None
            return dx, dw, None, None, None

    class MatmulReduceScatter(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w_shard, group, chunks, kernel):
            ctx.save_for_backward(x, w_shard)
            ctx.group = group
            return _matmul_reduce_scatter(x, w_shard, group, chunks=chunks, kernel=kernel)

        @staticmethod
        def backward(ctx, dz):
            x, w = ctx.saved_tensors
            dz = dz.contiguous()
            size = communicator(ctx.group).size
            gdz = torch.empty(dz.shape[0] * size, dz.shape[1], dtype=dz.dtype, device=dz.device)
            dx = _all_gather_matmul(dz, w.t(), ctx.group, gathered=gdz)
            dw = x.t() @ gdz if ctx.needs_input_grad[1] else None
            return (dx if ctx.needs_input_grad[0] else None), dw, None, None, None

    _functions["ag"] = AllGatherMatmul
    _functions["rs"] = MatmulReduceScatter
    return _functions


def all_gather_matmul(x_shard, w, group=None, *, chunks=0, kernel=None, return_gathered=False):
    """all_gather(x_shard) @ w on the group, the gather hidden under the
    product: x_shard (m, K) is this rank's rows (ranks in group order), w
    (K, N) bf16 (a transposed nn.Linear weight, w = weight.t(), is read in
    place). Returns (R*m, N) bf16, and the gathered (R*m, K) too with
    return_gathered (torch's fused all-gather matmul returns both).
    Differentiable. chunks: per rank's rows (0: planned); kernel: the
    tilekit kernel of every chunk (None: auto)."""
    torch = _lib.need_torch("tilekit.distributed.all_gather_matmul")
    y, gathered = _autograd(torch)["ag"].apply(x_shard, w, group, chunks, kernel)
    return (y, gathered) if return_gathered else y


def matmul_reduce_scatter(x, w_shard, group=None, *, chunks=0, kernel=None):
    """reduce_scatter(x @ w_shard) on the group: x (M, K_r) and w_shard
    (K_r, N) are this rank's parts of a product summed over the ranks;
    returns this rank's M/R rows of the sum, (M/R, N) bf16, summed in fp32
    in rank order (the same bits every run). Differentiable."""
    torch = _lib.need_torch("tilekit.distributed.matmul_reduce_scatter")
    return _autograd(torch)["rs"].apply(x, w_shard, group, chunks, kernel)


def _shard(t, dim, group):
    torch = _lib.need_torch("tilekit.distributed")
    import torch.distributed as dist
    r, size = dist.get_rank(group), dist.get_world_size(group)
    if t.shape[dim] % size:
        raise ValueError("tilekit.distributed: %d is not divisible by the %d ranks" % (t.shape[dim], size))
    return torch.nn.Parameter(t.detach().chunk(size, dim)[r].contiguous().clone())


def _real_classes(torch):
    if "ColumnParallelLinear" in _functions:
        return _functions

    class _ParallelLinear(torch.nn.Module):
        def __init__(self, weight, bias=None, group=None):
            super().__init__()
            self.weight = weight if isinstance(weight, torch.nn.Parameter) else torch.nn.Parameter(weight)
            self.bias = bias
            self.group = group

    class ColumnParallelLinear(_ParallelLinear):
        """A Linear whose output features are split over the group (this rank
        keeps out_features / R of them: weight (out/R, in)); input: this
        rank's rows of the tokens (T/R, in), output: every token's, this
        rank's features (T, out/R). from_linear(linear, group) takes this
        rank's share of an existing nn.Linear."""

        @classmethod
        def from_linear(cls, linear, group=None):
            bias = _shard(linear.bias, 0, group) if linear.bias is not None else None
            return cls(_shard(linear.weight, 0, group), bias, group)

        def forward(self, x):
            y = all_gather_matmul(x.reshape(-1, x.shape[-1]), self.weight.t(), self.group)
            return y + self.bias if self.bias is not None else y

    class RowParallelLinear(_ParallelLinear):
        """A Linear whose input features are split over the group (weight
        (out, in/R)); input: every token, this rank's features (T, in/R),
        output: this rank's rows of the sum, (T/R, out)."""

        @classmethod
        def from_linear(cls, linear, group=None):
            bias = torch.nn.Parameter(linear.bias.detach().clone()) if linear.bias is not None else None
            return cls(_shard(linear.weight, 1, group), bias, group)

        def forward(self, x):
            z = matmul_reduce_scatter(x.reshape(-1, x.shape[-1]), self.weight.t(), self.group)
            return z + self.bias if self.bias is not None else z

    class TensorParallelMLP(torch.nn.Module):
        """A Llama (transformers LlamaMLP, or any module with gate_proj,
        up_proj, down_proj and act_fn) split over the group: gate and up
        column-parallel in one all-gather product (this rank's gate rows,
        then its up rows), down row-parallel. Input and output: this rank's
        rows of the tokens, (T/R, hidden)."""

        def __init__(self, mlp, group=None):
            super().__init__()
            gate = _shard(mlp.gate_proj.weight, 0, group)
            up = _shard(mlp.up_proj.weight, 0, group)
            self.gate_up = ColumnParallelLinear(torch.cat([gate.detach(), up.detach()], 0), None, group)
            self.down = RowParallelLinear.from_linear(mlp.down_proj, group)
            self.act_fn = mlp.act_fn
            self.ffn = gate.shape[0]

        def forward(self, x):
            shape = x.shape
            h = self.gate_up(x.reshape(-1, shape[-1]))
            h = self.act_fn(h[:, :self.ffn]) * h[:, self.ffn:]
            return self.down(h).reshape(*shape[:-1], -1)

    _functions.update(ColumnParallelLinear=ColumnParallelLinear, RowParallelLinear=RowParallelLinear,
                      TensorParallelMLP=TensorParallelMLP)
    return _functions


def __getattr__(name):
    """ColumnParallelLinear, RowParallelLinear and TensorParallelMLP are
    torch.nn.Modules: made on first use, so that importing this module
    needs no torch."""
    if name in ("ColumnParallelLinear", "RowParallelLinear", "TensorParallelMLP"):
        return _real_classes(_lib.need_torch("tilekit.distributed." + name))[name]
    raise AttributeError("module 'tilekit.distributed' has no attribute '%s'" % name)
