"""Describing the caller's matrices, in pure Python (no GPU, no library).

A matrix is a torch CUDA tensor or any object with __cuda_array_interface__
(CAI, versions 2 and 3). Each is reduced to a Matrix: data pointer, shape,
strides in elements, dtype ("bf16" or "fp32"), and where known its device and
stream. A batched or grouped call also takes 3-D stacks of matrices (count x
rows x cols, a batch stride) and 1-D int32 arrays (its offsets): a Matrix of
count matrices, or of one row. Everything wrong with an argument is found
here, before the library is loaded or the GPU touched: TypeError for what the
argument is (type, dtype, device), ValueError for how it is shaped (rank,
strides, NULL data).
"""
import sys

# CAI type strings. bfloat16 has no numpy type code: torch exports it as
# "<V2", which is also ml_dtypes.bfloat16's dtype.str (so CuPy and numba
# arrays of that dtype say "<V2", with descr [('', '<V2')]), and that is read
# as bf16. "|V2" is what numpy writes for a void or a structured 2-byte type
# (np.dtype("V2"), np.dtype([("a", "u1"), ("b", "u1")])): refused, as is a
# "<V2" whose descr names fields (_plain_descr).
_TYPESTRS = {"<f4": "fp32", "=f4": "fp32", "<V2": "bf16", "bfloat16": "bf16"}
_INDEX_TYPESTRS = {"<i4": "i32", "=i4": "i32"}   # offsets and the group error flag
_ITEMSIZE = {"bf16": 2, "fp32": 4, "i32": 4}
# What an operand may be, by its ranks (describe's `ranks`), for the messages.
_RANK_TEXT = {(2,): "a 2-D matrix", (3,): "a 3-D stack of matrices (count x rows x cols)",
              (2, 3): "a 2-D matrix or a 3-D stack of matrices", (1,): "a 1-D array"}
_TYPE_HINTS = {"<f2": "float16", "<f8": "float64", "<i2": "int16", "<i4": "int32", "<i8": "int64", "|i1": "int8",
               "|u1": "uint8", "<u2": "uint16", "|V2": "a void or structured type"}

_DTYPE_NAMES = {"fp32": "fp32", "float32": "fp32", "f32": "fp32", "bf16": "bf16", "bfloat16": "bf16"}


def _torch():
    """The torch module if the caller imported it (tilekit never imports it itself)."""
    return sys.modules.get("torch")


def is_torch_tensor(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def parse_dtype(d, what="out_dtype"):
    """"fp32" or "bf16" from a string or a torch dtype; TypeError otherwise."""
    if isinstance(d, str):
        key = d.lower()
        if key.startswith("torch."):
            key = key[6:]
        if key in _DTYPE_NAMES:
            return _DTYPE_NAMES[key]
        raise TypeError("%s: %r is not a supported output type (expected 'fp32' or 'bf16')" % (what, d))
    t = _torch()
    if t is not None and isinstance(d, t.dtype):
        if d == t.float32:
            return "fp32"
        if d == t.bfloat16:
            return "bf16"
        raise TypeError("%s: %s is not supported (expected torch.float32 or torch.bfloat16)" % (what, d))
    raise TypeError("%s: %r is not a dtype (expected torch.float32, torch.bfloat16, 'fp32' or 'bf16')" % (what, d))


class Matrix:
    """One operand: ptr (int), rows, cols, row/col strides in elements,
    dtype ("bf16"/"fp32", "i32" for offsets), device (int or None if
    unknown), stream (int or None), readonly, obj (the caller's object),
    torch (bool); ndim (1, 2 or 3), count matrices sbatch elements apart (a
    3-D stack; else 1 and 0). A 1-D array is one row: rows 1, cols its
    length, scol its stride."""

    __slots__ = ("name", "ptr", "rows", "cols", "srow", "scol", "dtype", "device", "stream", "readonly", "obj",
                 "torch", "ndim", "count", "sbatch")

    def __init__(self, name, ptr, rows, cols, srow, scol, dtype, device, stream, readonly, obj, torch, ndim=2,
                 count=1, sbatch=0):
        self.name, self.ptr, self.rows, self.cols = name, ptr, rows, cols
        self.srow, self.scol, self.dtype, self.device = srow, scol, dtype, device
        self.stream, self.readonly, self.obj, self.torch = stream, readonly, obj, torch
        self.ndim, self.count, self.sbatch = ndim, count, sbatch

    def t(self):
        """The transposed view (same memory, the matrices' strides swapped)."""
        return Matrix(self.name + ".T", self.ptr, self.cols, self.rows, self.scol, self.srow, self.dtype,
                      self.device, self.stream, self.readonly, self.obj, self.torch, self.ndim, self.count,
                      self.sbatch)

    def byte_range(self):
        """[first, last] byte addresses touched, or None when empty."""
        if self.rows == 0 or self.cols == 0 or self.count == 0:
            return None
        size = _ITEMSIZE[self.dtype]
        span = (self.count - 1) * self.sbatch + (self.rows - 1) * self.srow + (self.cols - 1) * self.scol
        return self.ptr, self.ptr + span * size + size - 1

    def storage(self, prefer="row"):
        """("row", ld) if rows are contiguous (unit column stride) and do not
        overlap, ("col", ld) if columns are; `prefer` decides when both hold
        (a dimension of size 1); None if neither. A dimension of size 1
        accepts any stride, and the leading dimension then reported is the
        smallest valid one, so size-1 views of larger tensors still work."""
        r, c = self.rows, self.cols
        if r == 0 or c == 0:   # nothing is addressed: any strides will do
            return prefer, (max(c, 1) if prefer == "row" else max(r, 1))
        found = {}
        if (c <= 1 or self.scol == 1) and (r <= 1 or self.srow >= max(c, 1)):
            found["row"] = self.srow if r > 1 else max(c, 1)
        if (r <= 1 or self.srow == 1) and (c <= 1 or self.scol >= max(r, 1)):
            found["col"] = self.scol if c > 1 else max(r, 1)
        for kind in (prefer, "col" if prefer == "row" else "row"):
            if kind in found:
                return kind, found[kind]
        return None


def _cai_type(typestr, index):
    """The element type of a CAI typestr: bf16/fp32 for a matrix, i32 for an
    index array (offsets); None when not taken."""
    return (_INDEX_TYPESTRS if index else _TYPESTRS).get(typestr)


def _plain_descr(descr, dtype, index=False):
    """Whether a CAI 'descr' is one unnamed field of element type dtype (what
    numpy and CuPy write for an array that is not structured)."""
    if not isinstance(descr, (list, tuple)) or len(descr) != 1:
        return False
    f = descr[0]
    return (isinstance(f, (list, tuple)) and len(f) == 2 and isinstance(f[0], str) and f[0] == ""
            and isinstance(f[1], str) and _cai_type(f[1], index) == dtype)


def _int(v, what):
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("%s: %r is not an integer" % (what, v))
    return v


def _rank(name, shape, ranks):
    """ValueError unless the shape's rank is one of `ranks`."""
    if len(shape) not in ranks:
        raise ValueError("%s: expected %s, got %d dimensions (shape %s)" % (name, _RANK_TEXT[ranks], len(shape),
                                                                           tuple(shape)))


def _shaped(shape, strides):
    """(ndim, count, rows, cols, sbatch, srow, scol) of an operand's shape and
    strides (elements), of a rank _rank took."""
    if len(shape) == 1:
        return 1, 1, 1, shape[0], 0, max(shape[0], 1), strides[0]
    if len(shape) == 2:
        return (2, 1) + tuple(shape) + (0,) + tuple(strides)
    return (3,) + tuple(shape) + tuple(strides)


def _from_torch(x, name, ranks, index):
    t = _torch()
    if x.layout != t.strided:
        raise TypeError("%s: %s tensors are not supported (expected a dense, strided CUDA tensor)"
                        % (name, x.layout))
    if not x.is_cuda:
        raise TypeError("%s: tensor is on %s; tilekit needs CUDA tensors (move it with .cuda())" % (name, x.device))
    if index:
        if x.dtype != t.int32:
            raise TypeError("%s: dtype %s is not supported (expected torch.int32)" % (name, x.dtype))
        dtype = "i32"
    elif x.dtype == t.bfloat16:
        dtype = "bf16"
    elif x.dtype == t.float32:
        dtype = "fp32"
    else:
        raise TypeError("%s: dtype %s is not supported (expected torch.bfloat16, or torch.float32 for out)"
                        % (name, x.dtype))
    shape = tuple(x.shape)
    _rank(name, shape, ranks)
    ndim, count, rows, cols, sbatch, srow, scol = _shaped(shape, x.stride())
    return Matrix(name, x.data_ptr(), rows, cols, srow, scol, dtype, x.device.index, None, False, x, True, ndim,
                  count, sbatch)


def _from_cai(x, name, ranks, index):
    try:
        cai = x.__cuda_array_interface__
    except Exception as e:   # a producer may refuse (e.g. torch for a tensor that requires grad)
        raise TypeError("%s: __cuda_array_interface__ raised %s: %s" % (name, type(e).__name__, e)) from e
    if not isinstance(cai, dict):
        raise TypeError("%s: __cuda_array_interface__ is a %s, expected a dict" % (name, type(cai).__name__))
    for key in ("shape", "typestr", "data", "version"):
        if key not in cai:
            raise TypeError("%s: __cuda_array_interface__ has no '%s' entry" % (name, key))
    typestr = cai["typestr"]
    if not isinstance(typestr, str):
        raise TypeError("%s: typestr %r is not a string" % (name, typestr))
    dtype = _cai_type(typestr, index)
    if dtype is None:
        hint = _TYPE_HINTS.get(typestr)
        raise TypeError("%s: element type %r%s is not supported (expected %s)"
                        % (name, typestr, " (%s)" % hint if hint else "",
                           "int32 '<i4'" if index else "bfloat16 '<V2', or float32 '<f4' for out"))
    descr = cai.get("descr")
    if descr is not None and not _plain_descr(descr, dtype, index):
        raise TypeError("%s: descr %r describes a structured type (expected one unnamed field of the typestr's type)"
                        % (name, descr))
    if cai.get("mask") is not None:
        raise TypeError("%s: masked arrays are not supported" % name)
    shape = tuple(cai["shape"])
    for s in shape:
        _int(s, name + ": shape entry")
    _rank(name, shape, ranks)
    if any(d < 0 for d in shape):
        raise ValueError("%s: negative shape %s" % (name, shape))
    if any(d >= 2 ** 63 for d in shape):   # the library's sizes are int64
        raise ValueError("%s: shape %s is too large (each dimension must be below 2**63)" % (name, shape))
    data = cai["data"]
    if not isinstance(data, tuple) or len(data) != 2:
        raise TypeError("%s: 'data' must be a (pointer, read_only) tuple, got %r" % (name, data))
    ptr, readonly = data
    if ptr is None:
        ptr = 0
    _int(ptr, name + ": data pointer")
    if ptr < 0:
        raise ValueError("%s: data pointer %d is negative" % (name, ptr))
    if ptr >= 2 ** 64:
        raise ValueError("%s: data pointer %d does not fit in 64 bits" % (name, ptr))
    size = _ITEMSIZE[dtype]
    strides = cai.get("strides")
    if strides is None:   # C-contiguous
        elems, step = [], 1
        for d in reversed(shape):
            elems.insert(0, step)
            step = min(step * d, 2 ** 63 - 1)   # saturated as the extension's int64
    else:
        strides = tuple(strides)
        if len(strides) != len(shape):
            raise ValueError("%s: %d strides for a %d-D shape" % (name, len(strides), len(shape)))
        for s in strides:
            _int(s, name + ": stride")
        if any(s % size for s in strides):
            raise ValueError("%s: strides %s (bytes) are not multiples of the %d-byte element"
                             % (name, strides, size))
        if not all(-2 ** 63 <= s < 2 ** 63 for s in strides):
            raise ValueError("%s: strides %s (bytes) do not fit in 64 bits" % (name, strides))
        elems = [s // size for s in strides]
    ndim, count, rows, cols, sbatch, srow, scol = _shaped(shape, elems)
    stream = cai.get("stream")
    if stream is not None:
        _int(stream, name + ": stream")
        if stream == 0:   # CAI v3 forbids 0: ambiguous between the legacy and per-thread default streams
            raise ValueError("%s: stream 0 is not allowed by __cuda_array_interface__ (use 1 or 2)" % name)
    return Matrix(name, ptr, rows, cols, srow, scol, dtype, None, stream, bool(readonly), x, False, ndim, count,
                  sbatch)


def describe(x, name, ranks=(2,), index=False):
    """The Matrix for a caller's object, or TypeError/ValueError saying what
    is wrong. ranks: the dimensions it may have (_RANK_TEXT's keys); index:
    an int32 array (offsets), not a bf16/fp32 matrix."""
    if x is None:
        raise TypeError("%s: got None (expected a CUDA tensor or an object with __cuda_array_interface__)" % name)
    if is_torch_tensor(x):
        m = _from_torch(x, name, ranks, index)
    elif hasattr(type(x), "__cuda_array_interface__") or hasattr(x, "__cuda_array_interface__"):
        m = _from_cai(x, name, ranks, index)
    elif hasattr(x, "__array_interface__") or hasattr(x, "__array__") or isinstance(x, (list, tuple)):
        raise TypeError("%s: %s is host memory; tilekit needs device memory (a CUDA tensor or an object with "
                        "__cuda_array_interface__)" % (name, type(x).__name__))
    else:
        raise TypeError("%s: %s is not a CUDA tensor and has no __cuda_array_interface__"
                        % (name, type(x).__name__))
    if m.srow < 0 or m.scol < 0 or m.sbatch < 0:
        if m.ndim == 3:
            raise ValueError("%s: negative strides (%d, %d, %d) are not supported" % (name, m.sbatch, m.srow, m.scol))
        raise ValueError("%s: negative strides (%d, %d) are not supported" % (name, m.srow, m.scol))
    if m.ptr == 0 and m.rows > 0 and m.cols > 0 and m.count > 0:
        raise ValueError("%s: data pointer is NULL for %s" % (name, _shape_text(m)))
    return m


def _shape_text(m):
    """"a 8 x 4 matrix", "3 matrices of 8 x 4" or "an array of 5" (ints) for messages."""
    if m.ndim == 1:
        return "an array of %d" % m.cols
    if m.ndim == 3:
        return "%d matrices of %d x %d" % (m.count, m.rows, m.cols)
    return "a %d x %d matrix" % (m.rows, m.cols)
