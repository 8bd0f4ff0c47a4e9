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

A, B and out of gemm() are torch CUDA tensors, objects with
__cuda_array_interface__ or DLPack producers of CUDA memory, 2-D, each row- or
column-contiguous (a transposed view is fine: it becomes op T or a
column-major problem, never a copy). The call is asynchronous on the caller's
current stream, like a torch operation (gemm's `stream` and the CAI 'stream'
entries: see gemm's docstring). torch is never imported by
`import tilekit`; it is used only when the caller passes torch tensors, and
imported by tilekit.matmul, tilekit.nn and tilekit.patch.

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
                   CudaError, CublasError, OutOfResourcesError, AllocError, InternalError, LibraryNotFound)

if _lib.EXT is not None:
    _impl = _lib.EXT
else:
    from . import _fallback as _impl

__version__ = "0.1.0"
__all__ = ["gemm", "matmul", "patch", "nn", "supports", "select_kernel", "kernels", "version", "library_path",
           "backend", "Support", "TilekitError", "InvalidValueError", "NotSupportedError", "ArchMismatchError",
           "NoDeviceError", "CudaError", "CublasError", "OutOfResourcesError", "AllocError", "InternalError",
           "LibraryNotFound"]

# The hot path is the backend's own function: no Python frame in between.
gemm = _impl.gemm
_plan = _impl.plan   # the checked call without the library (tests)


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


def __getattr__(name):
    """tilekit.matmul, tilekit.patch and tilekit.nn import torch, so they are
    loaded on first use, not by `import tilekit`."""
    if name in ("matmul", "patch"):
        _lib.need_torch("tilekit." + name)
        from . import _torch_ops
        return getattr(_torch_ops, name)
    if name == "nn":
        _lib.need_torch("tilekit.nn")
        import importlib
        return importlib.import_module(__name__ + ".nn")
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
