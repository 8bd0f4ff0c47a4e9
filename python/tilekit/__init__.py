"""tilekit: bf16 GEMM on NVIDIA GPUs from Python.

    import torch, tilekit
    A = torch.randn(4096, 1024, dtype=torch.bfloat16, device="cuda")
    B = torch.randn(2048, 1024, dtype=torch.bfloat16, device="cuda")
    C = tilekit.gemm(A, B, trans_b=True)            # fp32 C = A @ B.T
    tilekit.gemm(A, B.T, out=C, alpha=0.5, beta=1)  # C = 0.5 A B^T + C: same memory, no copy

    x = torch.randn(8, 4096, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(1024, 4096, dtype=torch.bfloat16, device="cuda")
    y = tilekit.matmul(x, w.T)                      # a torch op (autograd, torch.compile)
    lin = tilekit.nn.Linear(4096, 1024, dtype=torch.bfloat16, device="cuda")
    model = torch.nn.Sequential(torch.nn.Linear(4096, 1024, dtype=torch.bfloat16, device="cuda"))
    model = tilekit.patch(model)                    # every torch.nn.Linear runs on tilekit

    # many products in one call (issue 38): offs are int32 cumulative ends, read on the device only
    x = torch.randn(300, 4096, dtype=torch.bfloat16, device="cuda")          # tokens sorted by expert
    ws = torch.randn(8, 1024, 4096, dtype=torch.bfloat16, device="cuda")     # 8 experts' weights
    offs = torch.tensor([40, 80, 80, 150, 200, 250, 290, 300], dtype=torch.int32, device="cuda")
    y = tilekit.grouped_mm(x, ws.transpose(-2, -1), offs)  # torch._grouped_mm's semantics
    z = tilekit.bmm(x.view(3, 100, 4096), ws[:3].transpose(-2, -1))   # torch.bmm's

    # a fused epilogue (issue 39): h = silu(x Wg^T) * (x Wu^T), z kept for the backward
    wg = torch.randn(1024, 4096, dtype=torch.bfloat16, device="cuda")
    wu = torch.randn(1024, 4096, dtype=torch.bfloat16, device="cuda")
    h = torch.empty(8, 1024, dtype=torch.bfloat16, device="cuda")
    z = torch.empty(8, 2048, dtype=torch.bfloat16, device="cuda")
    x = torch.randn(8, 4096, dtype=torch.bfloat16, device="cuda")
    tilekit.gemm_epilogue(x, wg, h, trans_b=True, epilogue="gated", activation="silu", b_up=wu, aux=z)

    # FP8 (issue 40): codes and scales in one pass, the product with torch._scaled_mm's conventions
    qx, sx = tilekit.quantize_fp8(x, torch.float8_e4m3fn, mode="row")       # sx: (8, 1)
    qw, sw = tilekit.quantize_fp8(w, torch.float8_e4m3fn, mode="row")       # sw: (1024, 1)
    y = tilekit.scaled_mm(qx, qw.t(), sx, sw.t(), out_dtype=torch.bfloat16)
    # per expert, torch._scaled_grouped_mm's conventions: x's 8 rows grouped by offs over ws's 8 experts
    qe, se = tilekit.quantize_fp8(ws.view(-1, 4096), torch.float8_e4m3fn, mode="row")   # se: (8 * 1024, 1)
    ends = torch.tensor([2, 2, 5, 8, 8, 8, 8, 8], dtype=torch.int32, device="cuda")
    y = tilekit.scaled_grouped_mm(qx, qe.view(8, 1024, 4096).transpose(-2, -1), sx.view(-1), se.view(8, 1024), ends)

A, B and out of gemm() are torch CUDA tensors, objects with
__cuda_array_interface__ or DLPack producers of CUDA memory, 2-D, each row- or
column-contiguous (a transposed view is fine: it becomes op T or a
column-major problem, never a copy); gemm_batched() and gemm_grouped() take
3-D stacks of such matrices too, and gemm_grouped() its int32 offsets. The
call is asynchronous on the caller's current stream, like a torch operation
(gemm's `stream` and the CAI 'stream' entries: see gemm's docstring). torch
is never imported by `import tilekit`; it is used only when the caller
passes torch tensors, and imported by tilekit.matmul, tilekit.grouped_mm,
tilekit.bmm, tilekit.linear, tilekit.gated_mlp, tilekit.mlp, tilekit.nn,
tilekit.patch, tilekit.quantize_fp8, tilekit.scaled_mm and
tilekit.scaled_grouped_mm (these three take torch tensors only).

Backends: the C extension tilekit._tilekit (backend() == "extension") does
the checks and the call; without it, a pure-Python fallback through ctypes
("ctypes"), with the same exceptions and messages (DLPack needs the
extension).

Errors: TypeError (not device memory, wrong dtype), ValueError (rank, shapes,
strides, aliasing), and the library's statuses as TilekitError subclasses
(InvalidValueError and NotSupportedError are also ValueErrors), each with the
library's message (which argument, what was expected).
"""
from . import _lib
from ._lib import (TilekitError, InvalidValueError, NotSupportedError, ArchMismatchError, NoDeviceError,
                   CudaError, CublasError, OutOfResourcesError, AllocError, InternalError, CommError,
                   LibraryNotFound)

if _lib.EXT is not None:
    _impl = _lib.EXT
else:
    from . import _fallback as _impl

__version__ = "0.1.0"
__all__ = ["gemm", "gemm_batched", "gemm_grouped", "gemm_epilogue", "matmul", "grouped_mm", "bmm", "patch", "linear",
           "gated_mlp", "mlp", "quantize_fp8", "scaled_mm", "scaled_grouped_mm", "nn", "supports", "select_kernel", "kernels", "version", "library_path",
           "backend", "Support", "candidates", "workspace_size", "plan", "set_workspace", "set_workspace_limit",
           "set_split_k", "release_workspaces", "handle_info", "last_cuda_error", "build_info", "TilekitError", "InvalidValueError", "NotSupportedError", "ArchMismatchError",
           "NoDeviceError", "CudaError", "CublasError", "OutOfResourcesError", "AllocError", "InternalError", "CommError",
           "LibraryNotFound", "distributed"]

# The hot path is the backend's own function: no Python frame in between.
gemm = _impl.gemm
gemm_batched = _impl.gemm_batched
gemm_grouped = _impl.gemm_grouped
_plan = _impl.plan   # the checked call without the library (tests)
# Issue 39: one product with a fused epilogue (bias, activation, gating, their
# gradients), checked in Python (tilekit/_epilogue.py); with the extension,
# its C entry point, which checks and runs the calls on torch tensors and
# hands the others to the Python one.
from . import _epilogue
gemm_epilogue = _lib.EXT.gemm_epilogue if _lib.EXT is not None else _epilogue.gemm_epilogue


def backend():
    """"extension" (the C module tilekit._tilekit) or "ctypes" (the fallback)."""
    return "extension" if _lib.EXT is not None else "ctypes"


def library_path():
    """The shared library tilekit loads: $TILEKIT_LIB, else the installed
    package's copy, else build/libtilekit.so of this checkout."""
    return _lib.library_path()


def version():
    """The version of the loaded library, "major.minor.patch"."""
    v = _impl.version()
    return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)


def kernels():
    """The registry: one dict per kernel with name, description, min_sm, bm, bn
    (output block tile; 0 when not applicable), in registry order."""
    return _impl.kernels()


class Support:
    """The answer of supports(): true when the kernel can run the problem;
    else .status (a tk_status value), .status_name and .reason say why."""
    __slots__ = ("ok", "status", "status_name", "reason")

    def __init__(self, status, reason):
        self.ok = status == _lib.SUCCESS
        self.status = status
        self.status_name = _lib._STATUS_NAMES.get(status, "TK_ERR_?")
        self.reason = reason

    def __bool__(self):
        return self.ok

    def __repr__(self):
        return "Support(ok=%s, status=%s, reason=%r)" % (self.ok, self.status_name, self.reason)


def supports(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None):
    """Whether `kernel` (None: auto-dispatch) can run this gemm on the current
    device, launching nothing. Arguments as for gemm(); out may be None (its
    alignment is then judged on its leading dimension alone). Argument errors
    (including an unknown kernel) raise; a refusal (not supported, arch
    mismatch, out of resources, no device) returns a false Support with the
    reason."""
    return Support(*_impl.supports(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, kernel))


def select_kernel(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None):
    """The kernel name auto-dispatch would run for this gemm on the current
    device; raises the library's error when none can."""
    return _impl.select_kernel(A, B, out, alpha, beta, trans_a, trans_b, out_dtype)


# ---- issue 37: workspaces, split-K, candidates, plans, CUDA errors, build info ----
# The settings act on the calling thread's handle for a device (tilekit keeps
# one per thread and device; device None: the current one), as gemm() uses it.

def _device(device):
    if device is None:
        return _impl.current_device()
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError("device: %r is not a CUDA device index (an int, or None for the current device)" % (device,))
    if device < -1:
        raise ValueError("device: %d is negative" % device)
    return device


def _nbytes(n, what="nbytes"):
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError("%s: %r is not a byte count (an int)" % (what, n))
    if n < 0 or n >= 1 << 64:
        raise ValueError("%s: %d is out of range (0 to 2**64 - 1)" % (what, n))
    return n


def _stream_value(stream):
    """A cudaStream_t value from an int, None (the legacy default stream) or a torch stream."""
    if stream is None or (isinstance(stream, int) and not isinstance(stream, bool)):
        return stream
    value = getattr(stream, "cuda_stream", None)
    if isinstance(value, int):
        return value
    raise TypeError("stream: %r is neither a cudaStream_t value (int) nor a torch.cuda.Stream" % (stream,))


_ITEMSIZES = {"1": 1, "2": 2, "4": 4, "8": 8, "16": 16}


def _buffer(buf):
    """(pointer, bytes, device or None) of a workspace buffer: a contiguous
    torch CUDA tensor or a C-contiguous __cuda_array_interface__ object."""
    from ._arrays import is_torch_tensor
    if is_torch_tensor(buf):
        if not buf.is_cuda:
            raise TypeError("buffer: tensor is on %s; a workspace is device memory" % (buf.device,))
        if not buf.is_contiguous():
            raise ValueError("buffer: the tensor is not contiguous")
        return buf.data_ptr(), buf.numel() * buf.element_size(), buf.get_device()
    cai = getattr(buf, "__cuda_array_interface__", None)
    if not isinstance(cai, dict):
        raise TypeError("buffer: %s is neither an int pointer, a CUDA tensor nor an object with "
                        "__cuda_array_interface__" % type(buf).__name__)
    typestr, shape, data = cai.get("typestr"), cai.get("shape"), cai.get("data")
    size = _ITEMSIZES.get(typestr[2:] if isinstance(typestr, str) else None)
    if size is None or not isinstance(shape, tuple) or not isinstance(data, tuple) or not data:
        raise TypeError("buffer: __cuda_array_interface__ %r does not describe a plain array" % (cai,))
    if cai.get("strides") is not None:
        raise ValueError("buffer: its __cuda_array_interface__ has strides: a workspace is one contiguous block")
    n = 1
    for d in shape:
        n *= d
    return data[0] or 0, n * size, None


# The workspace objects set per (thread, device), kept alive while set.
import threading as _threading
_kept = _threading.local()


def set_workspace(buffer, nbytes=None, device=None):
    """Gives the thread's handle for `device` this device memory for every
    workspace instead of allocating its own (tk_set_workspace), or with None
    gives it back its own. buffer: an int pointer (nbytes required), a
    contiguous torch CUDA tensor or a C-contiguous __cuda_array_interface__
    object (nbytes: its size by default, at most that). The memory must be
    256-byte aligned, is the handle's while set (do not use it), and must
    stay allocated until the GPU work that used it is done, also after it is
    replaced: the object is kept alive while set, not after."""
    kept = _kept.__dict__.setdefault("by_device", {})
    if buffer is None:
        if nbytes not in (None, 0):
            raise ValueError("nbytes: %r with no buffer" % (nbytes,))
        d = _device(device)
        _impl.set_workspace(d, None, 0)
        kept.pop(d, None)
        return
    if isinstance(buffer, int) and not isinstance(buffer, bool):
        if nbytes is None:
            raise TypeError("nbytes: required with a pointer")
        ptr, size, dev = buffer, _nbytes(nbytes), None
    else:
        ptr, size, dev = _buffer(buffer)
        if nbytes is not None:
            if _nbytes(nbytes) > size:
                raise ValueError("nbytes: %d is more than the buffer's %d bytes" % (nbytes, size))
            size = nbytes
    if dev is not None and device is not None and _device(device) != dev:
        raise ValueError("buffer: it is on cuda:%d, not device %d" % (dev, device))
    d = _device(device if device is not None or dev is None else dev)
    _impl.set_workspace(d, ptr, size)
    kept[d] = buffer


def set_workspace_limit(nbytes, device=None):
    """Caps what the thread's handle for `device` allocates for its
    workspaces, all together (tk_set_workspace_limit); None: no cap, 0: none.
    Over it a split runs unsplit, cuBLAS without a workspace, and auto's
    copies of misaligned operands are refused (OutOfResourcesError)."""
    _impl.set_workspace_limit(_device(device), None if nbytes is None else _nbytes(nbytes))


def set_split_k(allowed, device=None):
    """Whether the thread's handle for `device` may split K (tk_set_split_k).
    With False no kernel gets a workspace and no call splits: a call's bits
    then depend only on the problem, the kernel and the device."""
    _impl.set_split_k(_device(device), bool(allowed))


def release_workspaces(stream=None, device=None):
    """Frees the workspaces the thread's handle for `device` allocated, in
    stream order on `stream` (tk_workspace_release)."""
    _impl.release_workspaces(_device(device), _stream_value(stream))


def handle_info(device=None):
    """The thread's handle for `device`: a dict of device, sm, workspace
    (the caller's pointer or None), workspace_bytes, workspace_limit (None:
    no cap), workspace_held (bytes it allocated) and split_k (allowed)."""
    return _impl.handle_info(_device(device))


def last_cuda_error(device=None):
    """The CUDA runtime error or cuBLAS status behind the last failure of the
    thread's handle for `device` (tk_last_cuda_error), or with device None
    the thread's last failure on any handle: a dict of cuda_error,
    cuda_name, cublas_status and cublas_name (0 and "" for none)."""
    return _impl.last_cuda_error(None if device is None else _device(device))


def build_info():
    """How the loaded library was built (tk_get_build_info): version,
    version_string, archs (the compiled GPU architectures), the CUDA runtime
    and cuBLAS it was built with and runs with, and the driver's CUDA."""
    return _impl.build_info()


def candidates(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None):
    """The kernels that could run this gemm on the current device, best first
    (tk_candidates): a list of dicts with name, rank (1 = what auto-dispatch
    runs; 0 = refused), status and status_name, est_us (a rough cost model's
    estimate, not a measurement), workspace_bytes and copies (auto's copies
    of misaligned operands: 1 A, 2 B, 4 C). Arguments as for supports()."""
    out_list = _impl.candidates(A, B, out, alpha, beta, trans_a, trans_b, out_dtype)
    for c in out_list:
        c["status_name"] = _lib._STATUS_NAMES.get(c["status"], "TK_ERR_?")
    return out_list


def workspace_size(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None):
    """The workspace bytes this gemm would use (tk_workspace_size): what a
    buffer given to set_workspace needs for it to run as with unlimited
    memory."""
    return _impl.workspace_size(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, kernel)


def plan(A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None):
    """A plan for this gemm's shape (tk_plan_create): checked once, its kernel
    chosen once. Call it (or .run(A, B, out, stream=None)) with operands of
    the same shapes, strides and types, out required: each run skips the
    library's checks and choice, and gives the bits gemm gives with that
    kernel. .kernel names it; .close() frees it. It runs in the thread that
    made it. Arguments as for gemm (out may be None: row-major of
    out_dtype); the operands' pointers decide the choice where alignment
    matters, and a run's must be as aligned."""
    return _impl.plan_create(A, B, out, alpha, beta, trans_a, trans_b, out_dtype, kernel)


def __getattr__(name):
    """tilekit.matmul, tilekit.grouped_mm, tilekit.bmm, tilekit.patch,
    tilekit.linear, tilekit.gated_mlp, tilekit.mlp, tilekit.quantize_fp8,
    tilekit.scaled_mm, tilekit.scaled_grouped_mm and tilekit.nn import torch, so they are loaded on
    first use, not by `import tilekit`; so is tilekit.distributed (its
    library, libtilekit_dist.so, is loaded at its first call)."""
    if name in ("matmul", "grouped_mm", "bmm", "patch"):
        _lib.need_torch("tilekit." + name)
        from . import _torch_ops
        return getattr(_torch_ops, name)
    if name in ("linear", "gated_mlp", "mlp"):
        _lib.need_torch("tilekit." + name)
        from . import _torch_fused
        return getattr(_torch_fused, name)
    if name in ("quantize_fp8", "scaled_mm", "scaled_grouped_mm"):
        _lib.need_torch("tilekit." + name)
        from . import _torch_fp8
        return getattr(_torch_fp8, name)
    if name == "distributed":   # issue 41: needs torch only when used
        import importlib
        return importlib.import_module(__name__ + ".distributed")
    if name == "nn":
        _lib.need_torch("tilekit.nn")
        import importlib
        return importlib.import_module(__name__ + ".nn")
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
