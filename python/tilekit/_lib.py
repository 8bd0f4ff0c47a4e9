"""Finding and loading libtilekit and the C extension; status codes and
exceptions; the C ABI through ctypes for the fallback backend.

The extension (tilekit/_tilekit.c, module tilekit._tilekit) is the fast path;
without it the pure-Python fallback (_fallback.py) calls the library through
ctypes. Either way the library is loaded on first use, not at import, so
`import tilekit` and the argument checks work on a machine where it was never
built. Every ctypes prototype is declared once, here.
"""
import ctypes
import importlib.util
import os
import sys
import sysconfig
import threading

# Mirrors of the enums in include/tilekit.h.
ROW_MAJOR, COL_MAJOR = 0, 1
OP_N, OP_T = 0, 1
F32, BF16 = 0, 1

SUCCESS = 0
INVALID_VALUE = 1
NOT_SUPPORTED = 2
ARCH_MISMATCH = 3
NO_DEVICE = 4
CUDA = 5
CUBLAS = 6
OUT_OF_RESOURCES = 7
ALLOC = 8
INTERNAL = 9
COMM = 10


class TilekitError(RuntimeError):
    """A tilekit call failed. .status is the tk_status value, .status_name its
    name (e.g. "TK_ERR_NOT_SUPPORTED"), .detail the library's message (which
    argument, what was expected)."""

    def __init__(self, status, detail, where="tilekit"):
        self.status = status
        self.status_name = _STATUS_NAMES.get(status, "TK_ERR_?")
        self.detail = detail
        super().__init__("%s: %s (%s)" % (where, detail or "(no detail)", self.status_name))


class InvalidValueError(TilekitError, ValueError):
    """TK_ERR_INVALID_VALUE: a bad argument (unknown kernel, bad leading dimension, ...)."""


class NotSupportedError(TilekitError, ValueError):
    """TK_ERR_NOT_SUPPORTED: the chosen kernel cannot do this problem (alignment, shape, ...)."""


class ArchMismatchError(TilekitError):
    """TK_ERR_ARCH_MISMATCH: the kernel needs a newer GPU."""


class NoDeviceError(TilekitError):
    """TK_ERR_NO_DEVICE: no CUDA device or driver."""


class CudaError(TilekitError):
    """TK_ERR_CUDA: a CUDA runtime call failed."""


class CublasError(TilekitError):
    """TK_ERR_CUBLAS: a cuBLAS call failed."""


class OutOfResourcesError(TilekitError):
    """TK_ERR_OUT_OF_RESOURCES: threads, shared memory or registers over the device limit."""


class AllocError(TilekitError, MemoryError):
    """TK_ERR_ALLOC: a host or device allocation failed."""


class InternalError(TilekitError):
    """TK_ERR_INTERNAL: a bug in tilekit."""


class CommError(TilekitError):
    """TK_ERR_COMM: communication (tilekit.distributed, NCCL) failed: NCCL missing, a call failed, was
    aborted or timed out."""


class LibraryNotFound(OSError):
    """libtilekit.so could not be loaded (not built, or $TILEKIT_LIB is wrong)."""


# The exceptions are the package's: they print as tilekit.NoDeviceError, not
# by this private module's path (both backends raise these classes).
for _cls in (TilekitError, InvalidValueError, NotSupportedError, ArchMismatchError, NoDeviceError, CudaError,
             CublasError, OutOfResourcesError, AllocError, InternalError, CommError, LibraryNotFound):
    _cls.__module__ = "tilekit"
del _cls


def need_torch(what):
    """torch, imported for `what` (tilekit.matmul, tilekit.patch,
    tilekit.nn); without PyTorch a ModuleNotFoundError that says so, and
    that tilekit.gemm works without it."""
    try:
        import torch
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        raise ModuleNotFoundError(
            "%s needs PyTorch, which is not installed (pip install torch); tilekit.gemm works without it, on "
            "any CUDA arrays (CuPy, DLPack producers, objects with __cuda_array_interface__)" % what,
            name="torch") from None
    return torch


_STATUS_NAMES = {
    SUCCESS: "TK_SUCCESS", INVALID_VALUE: "TK_ERR_INVALID_VALUE", NOT_SUPPORTED: "TK_ERR_NOT_SUPPORTED",
    ARCH_MISMATCH: "TK_ERR_ARCH_MISMATCH", NO_DEVICE: "TK_ERR_NO_DEVICE", CUDA: "TK_ERR_CUDA",
    CUBLAS: "TK_ERR_CUBLAS", OUT_OF_RESOURCES: "TK_ERR_OUT_OF_RESOURCES", ALLOC: "TK_ERR_ALLOC",
    INTERNAL: "TK_ERR_INTERNAL", COMM: "TK_ERR_COMM",
}
_STATUS_ERRORS = {
    INVALID_VALUE: InvalidValueError, NOT_SUPPORTED: NotSupportedError, ARCH_MISMATCH: ArchMismatchError,
    NO_DEVICE: NoDeviceError, CUDA: CudaError, CUBLAS: CublasError, OUT_OF_RESOURCES: OutOfResourcesError,
    ALLOC: AllocError, INTERNAL: InternalError, COMM: CommError,
}


def error_for(status, detail, where="tilekit"):
    """The exception object for a failed tk_status."""
    return _STATUS_ERRORS.get(status, TilekitError)(status, detail, where)


class GemmProblem(ctypes.Structure):
    """tk_gemm_problem (C enums are int-sized)."""
    _fields_ = [
        ("layout", ctypes.c_int), ("op_a", ctypes.c_int), ("op_b", ctypes.c_int),
        ("m", ctypes.c_int64), ("n", ctypes.c_int64), ("k", ctypes.c_int64),
        ("alpha", ctypes.c_float), ("beta", ctypes.c_float),
        ("a", ctypes.c_void_p), ("lda", ctypes.c_int64),
        ("b", ctypes.c_void_p), ("ldb", ctypes.c_int64),
        ("c", ctypes.c_void_p), ("ldc", ctypes.c_int64),
        ("c_type", ctypes.c_int),
    ]


class GemmDesc(ctypes.Structure):
    """tk_gemm_desc up to its version-5 fields (versioned: size first; the
    fields after the problem are laid out as the C compiler lays out the
    header's: tests/python/test_fake_lib_epilogue.py compares the offsets)."""
    _fields_ = [
        ("size", ctypes.c_size_t), ("problem", GemmProblem),
        # version 2: many products in one call
        ("group_kind", ctypes.c_int32), ("count", ctypes.c_int32),
        ("stride_a", ctypes.c_int64), ("stride_b", ctypes.c_int64), ("stride_c", ctypes.c_int64),
        ("offs", ctypes.c_void_p), ("group_error", ctypes.c_void_p),
        # version 3: the epilogue (tk_epilogue_kind, tk_activation, tk_bias_along)
        ("epilogue", ctypes.c_int32), ("activation", ctypes.c_int32),
        ("bias", ctypes.c_void_p), ("bias_type", ctypes.c_int32), ("bias_along", ctypes.c_int32),
        ("b_up", ctypes.c_void_p), ("d", ctypes.c_void_p), ("ldd", ctypes.c_int64),
        ("aux", ctypes.c_void_p), ("ldaux", ctypes.c_int64), ("bias_grad", ctypes.c_void_p),
        # version 4: FP8 operands and their scales (tk_fp8_format, tk_scale_mode)
        ("a_fp8", ctypes.c_int32), ("b_fp8", ctypes.c_int32), ("scale_mode", ctypes.c_int32),
        ("scale_a", ctypes.c_void_p), ("scale_b", ctypes.c_void_p),
        ("ld_scale_a", ctypes.c_int64), ("ld_scale_b", ctypes.c_int64),
        # version 5: many FP8 products (the scales' strides from one product to the next)
        ("stride_scale_a", ctypes.c_int64), ("stride_scale_b", ctypes.c_int64),
    ]


class QuantizeDesc(ctypes.Structure):
    """tk_quantize_desc (versioned: size first; issue 40)."""
    _fields_ = [
        ("size", ctypes.c_size_t), ("rows", ctypes.c_int64), ("cols", ctypes.c_int64),
        ("x", ctypes.c_void_p), ("ldx", ctypes.c_int64), ("format", ctypes.c_int32), ("mode", ctypes.c_int32),
        ("q", ctypes.c_void_p), ("ldq", ctypes.c_int64), ("scale", ctypes.c_void_p), ("ld_scale", ctypes.c_int64),
    ]


class KernelProps(ctypes.Structure):
    """tk_kernel_props."""
    _fields_ = [
        ("name", ctypes.c_char_p), ("description", ctypes.c_char_p),
        ("min_sm", ctypes.c_int), ("bm", ctypes.c_int), ("bn", ctypes.c_int),
    ]


class HandleInfo(ctypes.Structure):
    """tk_handle_info (versioned: size first)."""
    _fields_ = [
        ("size", ctypes.c_size_t), ("device", ctypes.c_int), ("sm", ctypes.c_int),
        ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("workspace_limit", ctypes.c_size_t), ("workspace_held", ctypes.c_size_t), ("split_k", ctypes.c_int),
    ]


class Candidate(ctypes.Structure):
    """tk_candidate (versioned: size first, the array's stride)."""
    _fields_ = [
        ("size", ctypes.c_size_t), ("name", ctypes.c_char_p), ("rank", ctypes.c_int), ("status", ctypes.c_int),
        ("est_us", ctypes.c_double), ("workspace_bytes", ctypes.c_size_t), ("copies", ctypes.c_uint),
    ]


class CudaErrorInfo(ctypes.Structure):
    """tk_cuda_error (versioned: size first); not the exception CudaError."""
    _fields_ = [
        ("size", ctypes.c_size_t), ("cuda_error", ctypes.c_int), ("cuda_name", ctypes.c_char_p),
        ("cublas_status", ctypes.c_int), ("cublas_name", ctypes.c_char_p),
    ]


class BuildInfo(ctypes.Structure):
    """tk_build_info (versioned: size first)."""
    _fields_ = [
        ("size", ctypes.c_size_t), ("version", ctypes.c_int), ("version_string", ctypes.c_char_p),
        ("archs", ctypes.c_char_p), ("cuda_runtime_built", ctypes.c_int), ("cuda_runtime_loaded", ctypes.c_int),
        ("cuda_driver", ctypes.c_int), ("cublas_built", ctypes.c_int), ("cublas_loaded", ctypes.c_int),
    ]


SPLIT_K_AUTO, SPLIT_K_NEVER = 0, 1
WORKSPACE_UNLIMITED = ctypes.c_size_t(-1).value   # TK_WORKSPACE_UNLIMITED (SIZE_MAX)

_status = ctypes.c_int
_handle = ctypes.c_void_p
_i64 = ctypes.c_int64
_vp = ctypes.c_void_p
_size = ctypes.c_size_t
_PROTOTYPES = {
    "tk_version": (ctypes.c_int, []),
    "tk_status_string": (ctypes.c_char_p, [_status]),
    "tk_create": (_status, [ctypes.POINTER(_handle)]),
    "tk_destroy": (_status, [_handle]),
    "tk_last_error": (ctypes.c_char_p, [_handle]),
    "tk_gemm": (_status, [_handle, ctypes.c_int, ctypes.c_int, ctypes.c_int, _i64, _i64, _i64, ctypes.c_float,
                          _vp, _i64, _vp, _i64, ctypes.c_float, _vp, ctypes.c_int, _i64, ctypes.c_char_p, _vp]),
    "tk_gemm_ex": (_status, [_handle, ctypes.POINTER(GemmProblem), ctypes.c_char_p, _vp]),
    "tk_gemm_batched": (_status, [_handle, ctypes.POINTER(GemmProblem), _i64, _i64, _i64, _i64, ctypes.c_char_p, _vp]),
    "tk_gemm_grouped": (_status, [_handle, ctypes.POINTER(GemmProblem), ctypes.c_int, ctypes.c_int, _vp, _i64, _i64,
                                  _i64, _vp, ctypes.c_char_p, _vp]),
    "tk_gemm_run": (_status, [_handle, ctypes.POINTER(GemmDesc), ctypes.c_char_p, _vp]),
    "tk_quantize_fp8": (_status, [_handle, ctypes.POINTER(QuantizeDesc), _vp]),
    "tk_kernel_count": (ctypes.c_int, []),
    "tk_kernel_get": (_status, [ctypes.c_int, ctypes.POINTER(KernelProps)]),
    "tk_kernel_supports": (_status, [_handle, ctypes.c_char_p, ctypes.POINTER(GemmProblem)]),
    "tk_select_kernel": (ctypes.c_char_p, [_handle, ctypes.POINTER(GemmProblem)]),
    "tk_set_workspace": (_status, [_handle, _vp, _size]),
    "tk_set_workspace_limit": (_status, [_handle, _size]),
    "tk_workspace_size": (_status, [_handle, ctypes.POINTER(GemmProblem), ctypes.c_char_p, ctypes.POINTER(_size)]),
    "tk_workspace_release": (_status, [_handle, _vp]),
    "tk_set_split_k": (_status, [_handle, ctypes.c_int]),
    "tk_get_handle_info": (_status, [_handle, ctypes.POINTER(HandleInfo)]),
    "tk_candidates": (_status, [_handle, ctypes.POINTER(GemmProblem), ctypes.POINTER(Candidate), ctypes.c_int,
                                ctypes.POINTER(ctypes.c_int)]),
    "tk_plan_create": (_status, [_handle, ctypes.POINTER(GemmProblem), ctypes.c_char_p, ctypes.POINTER(_vp)]),
    "tk_plan_run": (_status, [_handle, _vp, _vp, _vp, _vp, _vp]),
    "tk_plan_kernel": (ctypes.c_char_p, [_vp]),
    "tk_plan_destroy": (_status, [_vp]),
    "tk_last_cuda_error": (_status, [_handle, ctypes.POINTER(CudaErrorInfo)]),
    "tk_get_build_info": (_status, [ctypes.POINTER(BuildInfo)]),
}

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO_BUILD = os.path.normpath(os.path.join(_HERE, "..", "..", "build"))
_REPO_LIB = os.path.join(_REPO_BUILD, "libtilekit.so")
_PKG_LIB = os.path.join(_HERE, "libtilekit.so")   # an installed package's own copy
_lock = threading.Lock()
_lib = None


def library_path():
    """The file load() will open: $TILEKIT_LIB; else the installed package's
    own libtilekit.so; else build/libtilekit.so of this checkout."""
    env = os.environ.get("TILEKIT_LIB")
    if env:
        return env
    return _PKG_LIB if os.path.exists(_PKG_LIB) else _REPO_LIB


def _find_extension():
    """The C extension module, or None for the ctypes fallback.
    $TILEKIT_EXT names its file ("off": use the fallback); unset, the
    installed package's own tilekit._tilekit, else the checkout's
    build/python/_tilekit<EXT_SUFFIX> (what `make` builds), else None."""
    path = os.environ.get("TILEKIT_EXT")
    if path and path.lower() == "off":
        return None
    if not path:
        try:
            from . import _tilekit
            return _tilekit
        except ImportError:
            pass
        path = os.path.join(_REPO_BUILD, "python", "_tilekit" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not os.path.exists(path):
            return None
    spec = importlib.util.spec_from_file_location(__package__ + "._tilekit", path)
    if spec is None:
        raise ImportError("tilekit: %s is not a Python extension ($TILEKIT_EXT)" % path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules[spec.name] = mod
    return mod


EXT = _find_extension()


def load():
    """The loaded library for the backend in use: the extension bound to it,
    or the ctypes library (load_ctypes); raises LibraryNotFound with a hint."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            if EXT is None:
                _lib = load_ctypes()
            else:
                path = library_path()
                try:
                    EXT.bind(path)
                except OSError as e:
                    raise _not_found(path, e) from None
                _lib = EXT
    return _lib


def _not_found(path, e):
    how = ("$TILEKIT_LIB is set to it" if os.environ.get("TILEKIT_LIB")
           else "build it with `make lib` in the repository root, or set $TILEKIT_LIB")
    return LibraryNotFound("tilekit: cannot load %s (%s); %s" % (path, e, how))


_ctypes_lib = None


def load_ctypes():
    """The library through ctypes with its prototypes declared (the fallback
    backend; the same loaded library as the extension's, when both are used)."""
    global _ctypes_lib
    if _ctypes_lib is None:
        path = library_path()
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            raise _not_found(path, e) from None
        for name, (restype, argtypes) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = restype
            fn.argtypes = argtypes
        _ctypes_lib = lib
    return _ctypes_lib


def last_error(handle):
    msg = load_ctypes().tk_last_error(handle)
    return msg.decode("utf-8", "replace") if msg else ""


def check(status, handle, where):
    """Raises the matching TilekitError unless status is TK_SUCCESS."""
    if status != SUCCESS:
        raise error_for(status, last_error(handle), where)


# The CUDA runtime functions the fallback calls (cudaError_t is an int-sized
# enum; streams and events are pointers), from the runtime libtilekit links.
_CUDART_PROTOTYPES = {
    "cudaGetDevice": (ctypes.c_int, [ctypes.POINTER(ctypes.c_int)]),
    "cudaSetDevice": (ctypes.c_int, [ctypes.c_int]),
    "cudaEventCreateWithFlags": (ctypes.c_int, [ctypes.POINTER(_vp), ctypes.c_uint]),
    "cudaEventRecord": (ctypes.c_int, [_vp, _vp]),
    "cudaStreamWaitEvent": (ctypes.c_int, [_vp, _vp, ctypes.c_uint]),
    "cudaEventDestroy": (ctypes.c_int, [_vp]),
    "cudaStreamIsCapturing": (ctypes.c_int, [_vp, ctypes.POINTER(ctypes.c_int)]),
}


def cudart(name):
    """A CUDA runtime function, prototyped, from the runtime that libtilekit
    itself links (so both agree); AttributeError when it has none."""
    fn = getattr(load_ctypes(), name)
    fn.restype, fn.argtypes = _CUDART_PROTOTYPES[name]
    return fn


def current_device():
    """The calling thread's current CUDA device, read through the CUDA runtime
    that libtilekit itself links (so both agree); -1 when it cannot be read."""
    try:
        fn = cudart("cudaGetDevice")
    except AttributeError:
        return -1
    dev = ctypes.c_int(-1)
    return dev.value if fn(ctypes.byref(dev)) == 0 else -1


class _ThreadHandles:
    """One thread's handles by device, kept in a threading.local: Python drops
    the object when it deletes the thread's state (at the end of a
    threading.Thread, before join() returns), and its handles are destroyed
    then (tk_destroy may run while their GEMMs do: the library frees the
    workspaces after them), so short-lived threads leave no workspace on the
    GPU. Nothing is destroyed at interpreter shutdown, which drops the main
    thread's and the daemon threads' (that would race the CUDA runtime's own
    teardown), nor from another thread than the owner (after fork(), the
    child drops the parent's other threads': their handles belong to the
    parent's CUDA context). The extension does the same in C."""
    __slots__ = ("by_device", "owner")

    def __init__(self):
        self.by_device = {}
        self.owner = threading.get_ident()

    def __del__(self, _finalizing=sys.is_finalizing, _ident=threading.get_ident):
        if not self.by_device or _finalizing() or _ident() != self.owner:
            return
        destroy = load_ctypes().tk_destroy
        for h in self.by_device.values():
            destroy(h)


class _Handles(threading.local):
    def __init__(self):
        self.mine = _ThreadHandles()


_handles = _Handles()


def handle(device):
    """The calling thread's handle for `device` (a handle is bound to the
    device current at its creation and must not be shared by two threads),
    destroyed when the thread ends (_ThreadHandles)."""
    by_device = _handles.mine.by_device
    h = by_device.get(device)
    if h is None:
        lib = load_ctypes()
        out = _handle()
        check(lib.tk_create(ctypes.byref(out)), None, "tk_create")
        h = out.value
        by_device[device] = h
        warn_ignored_tune_file()
    return h


def warn_ignored_tune_file():
    """After a successful tk_create: the library's word on a TILEKIT_TUNE
    file it ignored (it never prints), as a RuntimeWarning."""
    msg = last_error(None)
    if msg:
        import warnings
        warnings.warn("tilekit: " + msg, RuntimeWarning, stacklevel=3)


if EXT is not None:
    EXT.setup(load, error_for)
