"""Stand-ins for the Python tests without a GPU (not a test file: run.py
skips it). fake_torch() is a module to put in sys.modules["torch"]: just
what tilekit reads of torch (tensors described by attributes, dtypes,
devices, the current stream per device, torch.empty), with a log of the
allocations and of the stream changes. fake_lib() builds fake_tilekit.c, a
libtilekit.so whose calls succeed and are logged (handles created and
destroyed, the stream of each GEMM, events recorded and waited for), and
log() reads that log; build_c() builds other C helpers (tests/python/*.c,
the lab's host sources). run() runs a script in a fresh interpreter on one
backend, so a fake torch or library never reaches the test process.
"""
import atexit
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
INSTALLED = bool(os.environ.get("TILEKIT_TEST_INSTALLED"))


def fake_torch(missing=()):
    """A module that passes for torch where tilekit looks. Tensors are CUDA,
    strided, of a made-up address; t.current maps a device to its current
    stream (0, the default stream, unless set); t.log lists ("empty", shape,
    dtype name, device, current stream of that device) per torch.empty and
    ("set_stream", device, stream) per torch.cuda.set_stream; t.fail_empty
    makes torch.empty raise. `missing`: top-level names left out (a torch
    that is still importing)."""
    t = types.ModuleType("torch")
    t.log = []
    current = {}                 # device -> its current stream (an int, 0: the default stream)
    next_ptr = [0x7d0000000000]

    class dtype:
        def __init__(self, name):
            self.name = name

        def __repr__(self):
            return "torch." + self.name

    class layout:
        def __repr__(self):
            return "torch.strided"

    class device:
        def __init__(self, type, index=None):
            self.type, self.index = type, index

        def __eq__(self, other):
            return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

        def __hash__(self):
            return hash((self.type, self.index))

        def __repr__(self):
            return "device(type=%r, index=%r)" % (self.type, self.index)

    def index_of(d):
        if d is None:
            return 0
        return d if isinstance(d, int) else d.index

    class Tensor:
        is_cuda = True

        def __init__(self, shape, dtype, strides=None, device=0, ptr=None):
            if ptr is None:
                ptr = next_ptr[0]
                next_ptr[0] += 1 << 24
            self.shape, self.dtype, self.device = tuple(shape), dtype, t.device("cuda", device)
            if not strides:   # C-contiguous, of any rank
                strides, step = [], 1
                for d in reversed(self.shape):
                    strides.insert(0, step)
                    step *= d
            self._strides = tuple(strides)
            self._ptr = ptr
            self.layout = t.strided

        def dim(self):
            return len(self.shape)

        def stride(self):
            return self._strides

        def data_ptr(self):
            return self._ptr

        def get_device(self):
            return self.device.index

    def empty(size, dtype=None, device=None):
        d = index_of(device)
        if t.fail_empty:
            raise RuntimeError("CUDA out of memory (fake)")
        t.log.append(("empty", tuple(size), dtype.name, d, current.get(d, 0)))
        return Tensor(size, dtype, device=d)

    cuda = types.ModuleType("torch.cuda")

    class Stream:
        def __init__(self, cuda_stream=0, device=0):
            self.cuda_stream, self.device_index = cuda_stream, index_of(device)

        def __repr__(self):
            return "<fake torch.cuda.Stream %#x on cuda:%d>" % (self.cuda_stream, self.device_index)

    class ExternalStream(Stream):
        def __init__(self, stream_ptr, device=None):
            Stream.__init__(self, stream_ptr, device)

    def current_stream(device=None):
        d = index_of(device)
        return Stream(current.get(d, 0), d)

    def set_stream(s):
        t.log.append(("set_stream", s.device_index, s.cuda_stream))
        current[s.device_index] = s.cuda_stream

    class _device_ctx:
        def __init__(self, d):
            self.d = d

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    cuda.Stream, cuda.ExternalStream, cuda.current_stream, cuda.set_stream = Stream, ExternalStream, current_stream, \
        set_stream
    cuda.default_stream = lambda device=None: Stream(0, index_of(device))
    cuda.current_device = lambda: 0
    cuda.device = _device_ctx
    t.dtype, t.device, t.Tensor, t.empty, t.cuda = dtype, device, Tensor, empty, cuda
    t.bfloat16, t.float32, t.float16, t.int32 = dtype("bfloat16"), dtype("float32"), dtype("float16"), dtype("int32")
    t.float8_e4m3fn, t.float8_e5m2 = dtype("float8_e4m3fn"), dtype("float8_e5m2")
    t.strided = layout()
    t._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda d: current.get(d, 0))
    t.current = current          # tests set and read the current streams here
    t.fail_empty = False         # True: torch.empty raises
    for name in missing:
        delattr(t, name)
    return t


def extension_file():
    """The extension the test process uses, else the one make builds."""
    from tilekit import _lib
    if _lib.EXT is not None:
        return _lib.EXT.__file__
    return os.path.join(ROOT, "build", "python", "_tilekit" + sysconfig.get_config_var("EXT_SUFFIX"))


def backends():
    """(name, TILEKIT_EXT value) for both backends."""
    return [("extension", extension_file()), ("ctypes", "off")]


def run(code, ext, lib=None, env=None, timeout=120):
    """Runs `code` in a fresh python3 on backend `ext` (a TILEKIT_EXT value)
    with libtilekit `lib` (default: the test process's); this directory is on
    its path (fakes, test_wrapper's Fake), and the checkout's python/ unless
    the installed package is tested. Returns (returncode, stdout + stderr)."""
    from tilekit import _lib
    e = dict(os.environ, TILEKIT_EXT=ext, TILEKIT_LIB=lib or _lib.library_path())
    paths = [HERE] if INSTALLED else [os.path.join(ROOT, "python"), HERE]
    e["PYTHONPATH"] = os.pathsep.join(paths + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    e.update(env or {})
    out = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=timeout,
                         cwd=HERE if INSTALLED else ROOT)
    return out.returncode, out.stdout + out.stderr


_built = {}


def build_c(name, args):
    """A C build (once per process, with $CC or cc, -std=c11 -Wall -Wextra
    -Werror, the checkout's include/ and src/ on the include path) of args
    (sources and flags) into a temporary directory as name: its path."""
    if name not in _built:
        if "dir" not in _built:
            _built["dir"] = tempfile.mkdtemp(prefix="tilekit-fake-")
            atexit.register(shutil.rmtree, _built["dir"], True)
        path = os.path.join(_built["dir"], name)
        cmd = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror",
               "-I" + os.path.join(ROOT, "include"), "-I" + os.path.join(ROOT, "src"), "-o", path] + list(args)
        out = subprocess.run(cmd, capture_output=True, text=True)
        assert out.returncode == 0, "building %s failed: %s\n%s" % (name, " ".join(cmd), out.stderr)
        _built[name] = path
    return _built[name]


def fake_lib():
    """fake_tilekit.c built against the checkout's include/tilekit.h: the
    path of the library."""
    return build_c("libtilekit_fake.so", ["-shared", "-fPIC", os.path.join(HERE, "fake_tilekit.c"), "-lpthread"])


def log(text):
    """The fake library's log as (event, {key: value}, thread) tuples; values
    in hex are ints, a bare first argument is under key ""."""
    entries = []
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        fields = {}
        for w in words[1:]:
            k, _, v = w.rpartition("=") if "=" in w else ("", "", w)
            fields[k] = int(v, 16) if v.startswith("0x") or v == "0" else v
        entries.append((words[0], fields, int(fields.pop("thread"))))
    return entries


def struct_layouts(c_function, cls):
    """(the C compiler's, ctypes') layout of a struct as "offset:size" per
    field and "sizeof": c_function is the fake library's text of it
    (fake_desc_layout, fake_qdesc_layout), cls the ctypes mirror."""
    import ctypes
    fn = getattr(ctypes.CDLL(fake_lib()), c_function)
    fn.restype = ctypes.c_char_p
    c = dict(w.split("=") for w in fn().decode().split())
    py = {name: "%d:%d" % (getattr(cls, name).offset, getattr(cls, name).size) for name, _ in cls._fields_}
    py["sizeof"] = str(ctypes.sizeof(cls))
    return c, py
