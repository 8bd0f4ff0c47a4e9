/* _tilekit.c - the Python wrapper's hot path as a CPython extension (the C
 * API only: no torch headers, no C++).
 *
 * tilekit.gemm, gemm_batched and gemm_grouped, and the argument checks they
 * share with supports() and select_kernel(), run here: the caller's
 * matrices (3-D stacks of them, int32 offsets) are read (torch tensors
 * through a few attribute reads, other objects through
 * __cuda_array_interface__ or DLPack), checked, mapped to a tk_gemm_problem
 * (and the strides and offsets of its products) and handed to the library.
 * Every check raises the exception type and the message of the pure-Python
 * fallback (tilekit/_fallback.py and _arrays.py, the reference for both;
 * tests/python/test_backends.py compares the two call for call).
 *
 * libtilekit.so is not linked: bind(path) dlopen()s it on first use, the path
 * chosen by tilekit/_lib.py ($TILEKIT_LIB, the package's copy, or the
 * checkout's build/), so this module imports on a machine without CUDA and
 * both backends load the same library. torch is never imported here: its
 * types are looked up in sys.modules once the caller has imported it.
 *
 * Handles: one per thread and device, as the library asks (a handle serves
 * one thread at a time), created on first use and destroyed when the
 * thread's Python state is deleted (at the end of a threading.Thread), never
 * at interpreter shutdown (that would race the CUDA runtime's own teardown):
 * see thread_handles. The GIL is released around the library call. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include "tilekit.h"

/* ---- the library, bound by bind(path) ---- */

static struct {
    void *dl;
    int (*version)(void);
    tk_status (*create)(tk_handle *);
    const char *(*last_error)(tk_handle);
    tk_status (*gemm_ex)(tk_handle, const tk_gemm_problem *, const char *, void *);
    tk_status (*gemm_batched)(tk_handle, const tk_gemm_problem *, int64_t, int64_t, int64_t, int64_t, const char *,
                              void *);
    tk_status (*gemm_grouped)(tk_handle, const tk_gemm_problem *, tk_group_kind, int, const int32_t *, int64_t,
                              int64_t, int64_t, int32_t *, const char *, void *);
    int (*kernel_count)(void);
    tk_status (*kernel_get)(int, tk_kernel_props *);
    tk_status (*kernel_supports)(tk_handle, const char *, const tk_gemm_problem *);
    const char *(*select_kernel)(tk_handle, const tk_gemm_problem *);
    tk_status (*destroy)(tk_handle);
    /* issue 37 */
    tk_status (*set_workspace)(tk_handle, void *, size_t);
    tk_status (*set_workspace_limit)(tk_handle, size_t);
    tk_status (*workspace_size)(tk_handle, const tk_gemm_problem *, const char *, size_t *);
    tk_status (*workspace_release)(tk_handle, void *);
    tk_status (*set_split_k)(tk_handle, tk_split_k);
    tk_status (*get_handle_info)(tk_handle, tk_handle_info *);
    tk_status (*candidates)(tk_handle, const tk_gemm_problem *, tk_candidate *, int, int *);
    tk_status (*plan_create)(tk_handle, const tk_gemm_problem *, const char *, tk_plan *);
    tk_status (*plan_run)(tk_handle, tk_plan, const void *, const void *, void *, void *);
    const char *(*plan_kernel)(tk_plan);
    tk_status (*plan_destroy)(tk_plan);
    tk_status (*last_cuda_error)(tk_handle, tk_cuda_error *);
    tk_status (*get_build_info)(tk_build_info *);
    /* issue 39 */
    tk_status (*gemm_run)(tk_handle, const tk_gemm_desc *, const char *, void *);
    /* issue 40 */
    tk_status (*quantize_fp8)(tk_handle, const tk_quantize_desc *, void *);
    /* From the CUDA runtime the library links, so both agree (cudaError_t is
     * an int-sized enum; streams and events are pointers): */
    int (*get_device)(int *);                        /* cudaGetDevice */
    int (*set_device)(int);                          /* cudaSetDevice */
    int (*event_create)(void **, unsigned);          /* cudaEventCreateWithFlags */
    int (*event_record)(void *, void *);             /* cudaEventRecord(event, stream) */
    int (*stream_wait_event)(void *, void *, unsigned);   /* cudaStreamWaitEvent(stream, event, 0) */
    int (*event_destroy)(void *);                    /* cudaEventDestroy */
    int (*stream_is_capturing)(void *, int *);       /* cudaStreamIsCapturing (status: an int-sized enum) */
} L;

/* The pointer types above are the header's: checked without referencing the
 * symbols, which this module must not link. */
#define SAME_TYPE(fn, member) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), __typeof__(L.member)), #fn "'s type")
SAME_TYPE(tk_version, version);
SAME_TYPE(tk_create, create);
SAME_TYPE(tk_destroy, destroy);
SAME_TYPE(tk_last_error, last_error);
SAME_TYPE(tk_gemm_ex, gemm_ex);
SAME_TYPE(tk_gemm_batched, gemm_batched);
SAME_TYPE(tk_gemm_grouped, gemm_grouped);
SAME_TYPE(tk_kernel_count, kernel_count);
SAME_TYPE(tk_kernel_get, kernel_get);
SAME_TYPE(tk_kernel_supports, kernel_supports);
SAME_TYPE(tk_select_kernel, select_kernel);
SAME_TYPE(tk_set_workspace, set_workspace);
SAME_TYPE(tk_set_workspace_limit, set_workspace_limit);
SAME_TYPE(tk_workspace_size, workspace_size);
SAME_TYPE(tk_workspace_release, workspace_release);
SAME_TYPE(tk_set_split_k, set_split_k);
SAME_TYPE(tk_get_handle_info, get_handle_info);
SAME_TYPE(tk_candidates, candidates);
SAME_TYPE(tk_plan_create, plan_create);
SAME_TYPE(tk_plan_run, plan_run);
SAME_TYPE(tk_plan_kernel, plan_kernel);
SAME_TYPE(tk_plan_destroy, plan_destroy);
SAME_TYPE(tk_last_cuda_error, last_cuda_error);
SAME_TYPE(tk_get_build_info, get_build_info);
SAME_TYPE(tk_gemm_run, gemm_run);
SAME_TYPE(tk_quantize_fp8, quantize_fp8);

/* ---- module state: Python objects looked up once ---- */

#define MAX_DEVICES 64

static struct {
    PyObject *loader;            /* _lib.load: binds the library or raises LibraryNotFound */
    PyObject *error_for;         /* _lib.error_for(status, detail, where) -> exception */
    PyObject *real;              /* numbers.Real */
    PyTypeObject *plan_type;     /* Plan, what plan() returns */
    /* torch, once the caller has imported it */
    PyObject *tensor_type, *dtype_type, *strided, *bf16, *f32, *i32, *empty, *cuda, *raw_stream, *current_stream;
    PyObject *devices[MAX_DEVICES];   /* torch.device("cuda", i), made on first use */
} S;

enum { DT_F32 = TK_F32, DT_BF16 = TK_BF16, DT_I32 };   /* DT_I32: offsets */
static const char *const dt_name[3] = { "fp32", "bf16", "i32" };
static const int dt_size[3] = { 4, 2, 4 };

/* interned names */
static PyObject *s_layout, *s_is_cuda, *s_dtype, *s_shape, *s_stride, *s_data_ptr, *s_get_device, *s_device,
    *s_cai, *s_dlpack, *s_dlpack_device, *s_array_interface, *s_array, *s_cuda_stream, *s_name, *s_stream,
    *s_max_version, *s_lower, *s_get, *s_torch, *s_raw_stream, *s_typestr, *s_data, *s_strides, *s_mask,
    *s_version, *s_torch_prefix, *s_descr, *s_handles_key;

/* ---- small helpers ---- */

/* 1 and *res when o has the attribute, 0 when getting it raises
 * AttributeError (hasattr's False), -1 on any other error. */
static int get_attr(PyObject *o, PyObject *name, PyObject **res)
{
    *res = PyObject_GetAttr(o, name);
    if (*res)
        return 1;
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

static PyObject *call_method0(PyObject *o, PyObject *name)
{
    return PyObject_VectorcallMethod(name, &o, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* The exception being raised, taken (normalized; the API of 3.12 where it
 * exists: PyErr_Fetch is deprecated there). */
static PyObject *take_exc(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (v && tb)
        PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return v;
#endif
}

/* Raises type("NAME: WHAT raised E: e") chained to the exception e being
 * raised now, as Python's `raise type(...) from e`. */
static void raise_wrapped(PyObject *type, const char *name, const char *what)
{
    PyObject *cause = take_exc();
    if (!cause)
        return;
    PyObject *tn = PyObject_GetAttr((PyObject *)Py_TYPE(cause), s_name);
    PyObject *msg = tn ? PyUnicode_FromFormat("%s: %s raised %S: %S", name, what, tn, cause) : NULL;
    Py_XDECREF(tn);
    PyObject *exc = msg ? PyObject_CallOneArg(type, msg) : NULL;
    Py_XDECREF(msg);
    if (!exc) {
        Py_DECREF(cause);
        return;
    }
    PyException_SetContext(exc, Py_NewRef(cause));
    PyException_SetCause(exc, cause);   /* steals; sets __suppress_context__ */
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
}

/* The library's failure as the matching TilekitError. */
static void raise_status(tk_status st, const char *detail, const char *where)
{
    PyObject *e = PyObject_CallFunction(S.error_for, "iss", (int)st, detail ? detail : "", where);
    if (e) {
        PyErr_SetObject((PyObject *)Py_TYPE(e), e);
        Py_DECREF(e);
    }
}

/* Binds the library through _lib.load (which calls bind()) on first use. */
static int need_lib(void)
{
    if (L.dl)
        return 0;
    if (!S.loader) {
        PyErr_SetString(PyExc_RuntimeError, "tilekit._tilekit: setup() was not called");
        return -1;
    }
    PyObject *r = PyObject_CallNoArgs(S.loader);
    if (!r)
        return -1;
    Py_DECREF(r);
    if (!L.dl) {
        PyErr_SetString(PyExc_RuntimeError, "tilekit._tilekit: the loader did not bind the library");
        return -1;
    }
    return 0;
}

/* v as int64; an int beyond it sets *big (-1 or 1) instead. */
static int as_i64(PyObject *v, int64_t *out, int *big)
{
    long long x = PyLong_AsLongLongAndOverflow(v, big);
    if (x == -1 && PyErr_Occurred())
        return -1;
    *out = (int64_t)x;
    return 0;
}

/* _int: v must be an int and not a bool. */
static int check_int(PyObject *v, const char *what)
{
    if (PyBool_Check(v) || !PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s: %R is not an integer", what, v);
        return -1;
    }
    return 0;
}

/* ---- torch, found in sys.modules (never imported here) ---- */

/* 1 when torch is imported (S's torch entries set), 0 when not, -1 on error.
 * Every lookup goes to a local first and S is filled only when all of them
 * succeeded: a failure part-way (a torch still importing, or not torch at
 * all) keeps no reference and leaves S as it was, so the next call starts
 * over. */
static int torch_ready(void)
{
    if (S.tensor_type)
        return 1;
    PyObject *torch = PyImport_GetModule(s_torch);
    if (!torch)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *dtype = NULL, *strided = NULL, *bf16 = NULL, *f32 = NULL, *i32 = NULL, *empty = NULL, *cuda = NULL,
             *current_stream = NULL, *c = NULL, *raw_stream = NULL, *tensor = NULL;
    int ok = (dtype = PyObject_GetAttrString(torch, "dtype")) && (strided = PyObject_GetAttrString(torch, "strided")) &&
             (bf16 = PyObject_GetAttrString(torch, "bfloat16")) && (f32 = PyObject_GetAttrString(torch, "float32")) &&
             (i32 = PyObject_GetAttrString(torch, "int32")) &&
             (empty = PyObject_GetAttrString(torch, "empty")) && (cuda = PyObject_GetAttrString(torch, "cuda")) &&
             (current_stream = PyObject_GetAttrString(cuda, "current_stream")) &&
             (c = PyObject_GetAttrString(torch, "_C")) &&
             /* torch's current stream as an int without building a
              * torch.cuda.Stream; current_stream(d).cuda_stream where missing */
             get_attr(c, s_raw_stream, &raw_stream) >= 0 && (tensor = PyObject_GetAttrString(torch, "Tensor"));
    Py_XDECREF(c);
    Py_DECREF(torch);
    if (!ok) {
        Py_XDECREF(dtype);
        Py_XDECREF(strided);
        Py_XDECREF(bf16);
        Py_XDECREF(f32);
        Py_XDECREF(i32);
        Py_XDECREF(empty);
        Py_XDECREF(cuda);
        Py_XDECREF(current_stream);
        Py_XDECREF(raw_stream);
        return -1;   /* tensor is the last lookup: NULL here */
    }
    S.dtype_type = dtype;
    S.strided = strided;
    S.bf16 = bf16;
    S.f32 = f32;
    S.i32 = i32;
    S.empty = empty;
    S.cuda = cuda;
    S.current_stream = current_stream;
    S.raw_stream = raw_stream;
    S.tensor_type = tensor;   /* last: it marks S as ready */
    return 1;
}

static int is_torch_tensor(PyObject *x)
{
    return S.tensor_type && PyObject_TypeCheck(x, (PyTypeObject *)S.tensor_type);
}

/* torch.device("cuda", d), kept (borrowed reference). */
static PyObject *torch_device(int d)
{
    if (d < 0 || d >= MAX_DEVICES) {
        PyErr_Format(PyExc_ValueError, "tilekit: CUDA device %d is beyond the %d this module handles", d,
                     MAX_DEVICES);
        return NULL;
    }
    if (!S.devices[d]) {
        PyObject *torch = PyImport_GetModule(s_torch);
        if (!torch)
            return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_RuntimeError, "tilekit: torch is not imported");
        S.devices[d] = PyObject_CallMethod(torch, "device", "si", "cuda", d);
        Py_DECREF(torch);
    }
    return S.devices[d];
}

/* torch's current stream on device d, as a pointer value. */
static int torch_stream(int d, void **out)
{
    PyObject *dev = PyLong_FromLong(d), *r = NULL;
    if (!dev)
        return -1;
    if (S.raw_stream) {
        r = PyObject_CallOneArg(S.raw_stream, dev);
    } else {
        PyObject *s = PyObject_CallOneArg(S.current_stream, dev);
        if (s) {
            r = PyObject_GetAttr(s, s_cuda_stream);
            Py_DECREF(s);
        }
    }
    Py_DECREF(dev);
    if (!r)
        return -1;
    *out = PyLong_AsVoidPtr(r);
    Py_DECREF(r);
    return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

/* ---- DLPack (dlpack.h's ABI: the layouts are the standard's) ---- */

enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_MANAGED = 13, DL_INT = 0, DL_FLOAT = 2, DL_BFLOAT = 4, DL_READ_ONLY = 1 };

typedef struct { int32_t device_type, device_id; } dl_device;
typedef struct { uint8_t code, bits; uint16_t lanes; } dl_dtype;
typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape, *strides;    /* strides in elements; NULL: compact row-major */
    uint64_t byte_offset;
} dl_tensor;
typedef struct { dl_tensor t; void *manager_ctx; void (*deleter)(void *); } dl_managed;   /* "dltensor" */
typedef struct {                                                                         /* "dltensor_versioned" */
    uint32_t major, minor;
    void *manager_ctx;
    void (*deleter)(void *);
    uint64_t flags;
    dl_tensor t;
} dl_managed_v1;

/* ---- one operand ---- */

/* The ranks an operand may have (mat.ranks; 0: a 2-D matrix), and how the
 * messages name them (_arrays._RANK_TEXT). */
enum { R1 = 1 << 1, R2 = 1 << 2, R3 = 1 << 3 };

static const char *rank_text(unsigned ranks)
{
    switch (ranks) {
    case R1: return "a 1-D array";
    case R3: return "a 3-D stack of matrices (count x rows x cols)";
    case R2 | R3: return "a 2-D matrix or a 3-D stack of matrices";
    }
    return "a 2-D matrix";
}

typedef struct mat {
    const char *name;            /* "A", "B", "out", "offs", "group_error" */
    unsigned ranks;              /* set before describe: R1..R3 bits; 0: R2 */
    int index;                   /* set before describe: int32 elements (offsets), not bf16/fp32 */
    PyObject *obj;               /* borrowed: the caller's object */
    PyObject *stream;            /* owned: the CAI 'stream' entry, or NULL */
    PyObject *capsule;           /* owned: a DLPack capsule, kept until the call is made */
    uint64_t ptr;
    int64_t rows, cols, srow, scol;
    int64_t count, sbatch;       /* a 3-D stack: count matrices sbatch elements apart; else 1, 0 */
    int ndim;                    /* 1-D: one row (rows 1, cols its length, scol its stride) */
    int dtype, device;           /* device -1: not known */
    int readonly, torch, dlpack, tr;   /* tr: the transposed view (name + ".T") */
    void *dl_for;                /* DLPack: the stream its producer readied it for */
} mat;

/* _arrays._rank: 0 when ndim is one of m's ranks, else -1 with ValueError
 * (the shape printed from `shape`, a tuple). */
static int check_rank(const mat *m, Py_ssize_t ndim, PyObject *shape)
{
    if (ndim >= 0 && ndim <= 3 && ((m->ranks ? m->ranks : R2) & (1u << ndim)))
        return 0;
    PyErr_Format(PyExc_ValueError, "%s: expected %s, got %zd dimensions (shape %S)", m->name, rank_text(m->ranks),
                 ndim, shape);
    return -1;
}

/* _arrays._shaped: m's fields from its dims and strides (elements), of a
 * rank check_rank took. */
static void set_dims(mat *m, int ndim, const int64_t *dims, const int64_t *strides)
{
    m->ndim = ndim;
    m->count = 1;
    m->sbatch = 0;
    if (ndim == 1) {
        m->rows = 1;
        m->cols = dims[0];
        m->srow = dims[0] > 1 ? dims[0] : 1;
        m->scol = strides[0];
        return;
    }
    if (ndim == 3) {
        m->count = dims[0];
        m->sbatch = strides[0];
    }
    m->rows = dims[ndim - 2];
    m->cols = dims[ndim - 1];
    m->srow = strides[ndim - 2];
    m->scol = strides[ndim - 1];
}

static void mat_release(mat *m)
{
    Py_CLEAR(m->stream);
    Py_CLEAR(m->capsule);   /* the producer's capsule destructor frees the DLPack tensor */
}

static mat mat_t(const mat *m)
{
    mat t = *m;
    t.tr = !m->tr;
    t.rows = m->cols;
    t.cols = m->rows;
    t.srow = m->scol;
    t.scol = m->srow;
    return t;
}

enum { ROW = 0, COL = 1 };

/* _arrays.Matrix.storage: ROW or COL with *ld, -1 when neither. A dimension
 * of size 1 takes any stride, and its ld is then the smallest valid one. */
static int storage(const mat *m, int prefer, int64_t *ld)
{
    int64_t r = m->rows, c = m->cols;
    int64_t c1 = c > 1 ? c : 1, r1 = r > 1 ? r : 1;
    if (r == 0 || c == 0) {
        *ld = prefer == ROW ? c1 : r1;
        return prefer;
    }
    int ok[2];
    int64_t lds[2];
    ok[ROW] = (c <= 1 || m->scol == 1) && (r <= 1 || m->srow >= c1);
    lds[ROW] = r > 1 ? m->srow : c1;
    ok[COL] = (r <= 1 || m->srow == 1) && (c <= 1 || m->scol >= r1);
    lds[COL] = c > 1 ? m->scol : r1;
    for (int i = 0; i < 2; i++) {
        int kind = i == 0 ? prefer : !prefer;
        if (ok[kind]) {
            *ld = lds[kind];
            return kind;
        }
    }
    return -1;
}

/* [first, last] bytes touched, last saturated far above any pointer (which
 * keeps every comparison with another range exact); 0 when empty. Strides
 * are non-negative here. */
static int byte_range(const mat *m, unsigned __int128 *first, unsigned __int128 *last)
{
    if (m->rows == 0 || m->cols == 0 || m->count == 0)
        return 0;
    unsigned __int128 span = (unsigned __int128)(uint64_t)(m->rows - 1) * (uint64_t)m->srow +
                             (unsigned __int128)(uint64_t)(m->cols - 1) * (uint64_t)m->scol +
                             (unsigned __int128)(uint64_t)(m->count - 1) * (uint64_t)m->sbatch;
    const unsigned __int128 cap = (unsigned __int128)1 << 80;
    if (span > cap)
        span = cap;
    unsigned size = (unsigned)dt_size[m->dtype];
    *first = m->ptr;
    *last = m->ptr + span * size + size - 1;
    return 1;
}

static int overlaps(const mat *x, const mat *y)
{
    unsigned __int128 x0, x1, y0, y1;
    return byte_range(x, &x0, &x1) && byte_range(y, &y0, &y1) && x0 <= y1 && y0 <= x1;
}

/* ---- torch tensors: attribute reads, in _arrays._from_torch's order ---- */

static int from_torch(PyObject *x, mat *m)
{
    PyObject *v = PyObject_GetAttr(x, s_layout);
    if (!v)
        return -1;
    if (v != S.strided) {
        PyErr_Format(PyExc_TypeError, "%s: %S tensors are not supported (expected a dense, strided CUDA tensor)",
                     m->name, v);
        Py_DECREF(v);
        return -1;
    }
    Py_DECREF(v);
    if (!(v = PyObject_GetAttr(x, s_is_cuda)))
        return -1;
    int cuda = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (cuda < 0)
        return -1;
    if (!cuda) {
        PyObject *dev = PyObject_GetAttr(x, s_device);
        if (dev) {
            PyErr_Format(PyExc_TypeError, "%s: tensor is on %S; tilekit needs CUDA tensors (move it with .cuda())",
                         m->name, dev);
            Py_DECREF(dev);
        }
        return -1;
    }
    if (!(v = PyObject_GetAttr(x, s_dtype)))
        return -1;
    m->dtype = m->index ? (v == S.i32 ? DT_I32 : -1) : v == S.bf16 ? DT_BF16 : v == S.f32 ? DT_F32 : -1;
    if (m->dtype < 0) {
        PyErr_Format(PyExc_TypeError, "%s: dtype %S is not supported (expected %s)", m->name, v,
                     m->index ? "torch.int32" : "torch.bfloat16, or torch.float32 for out");
        Py_DECREF(v);
        return -1;
    }
    Py_DECREF(v);
    PyObject *shape = PyObject_GetAttr(x, s_shape), *t = shape ? PySequence_Tuple(shape) : NULL;
    Py_XDECREF(shape);
    if (!t || check_rank(m, PyTuple_GET_SIZE(t), t)) {
        Py_XDECREF(t);
        return -1;
    }
    int64_t dims[3], strides[3];
    const int ndim = (int)PyTuple_GET_SIZE(t);
    for (int i = 0; i < ndim; i++)
        dims[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(t, i));
    Py_DECREF(t);
    PyObject *st = PyErr_Occurred() ? NULL : call_method0(x, s_stride);
    if (!st)
        return -1;
    if (!PyTuple_Check(st) || PyTuple_GET_SIZE(st) != ndim) {
        Py_DECREF(st);
        PyErr_Format(PyExc_TypeError, "%s: stride() did not return %d strides", m->name, ndim);
        return -1;
    }
    for (int i = 0; i < ndim; i++)
        strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(st, i));
    Py_DECREF(st);
    if (PyErr_Occurred())
        return -1;
    set_dims(m, ndim, dims, strides);
    if (!(v = call_method0(x, s_data_ptr)))
        return -1;
    m->ptr = PyLong_AsUnsignedLongLong(v);
    Py_DECREF(v);
    if (PyErr_Occurred() || !(v = call_method0(x, s_get_device)))
        return -1;
    m->device = (int)PyLong_AsLong(v);
    Py_DECREF(v);
    if (PyErr_Occurred())
        return -1;
    m->torch = 1;
    return 0;
}

/* ---- __cuda_array_interface__, in _arrays._from_cai's order ---- */

/* cai.get(key) as a new reference (None when missing). */
static PyObject *cai_get(PyObject *cai, PyObject *key)
{
    if (PyDict_CheckExact(cai)) {
        PyObject *v = PyDict_GetItemWithError(cai, key);
        return v ? Py_NewRef(v) : PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    }
    return PyObject_CallMethodOneArg(cai, s_get, key);
}

/* The element types taken through CAI (_arrays._TYPESTRS says why): bf16 is
 * '<V2', torch's and ml_dtypes' type string for it; '|V2' is numpy's for a
 * void or structured type and is refused. */
static const struct { const char *typestr; int dtype; } cai_types[] = {
    { "<f4", DT_F32 }, { "=f4", DT_F32 }, { "<V2", DT_BF16 }, { "bfloat16", DT_BF16 },
};
static const struct { const char *typestr; int dtype; } cai_index_types[] = { { "<i4", DT_I32 }, { "=i4", DT_I32 } };
static const struct { const char *typestr, *hint; } cai_hints[] = {
    { "<f2", "float16" }, { "<f8", "float64" }, { "<i2", "int16" }, { "<i4", "int32" },
    { "<i8", "int64" },   { "|i1", "int8" },    { "|u1", "uint8" },  { "<u2", "uint16" },
    { "|V2", "a void or structured type" },
};

/* The element type of a str typestr (index: an offsets array's), -1 when
 * not taken; raises nothing. */
static int cai_lookup(PyObject *typestr, int index)
{
    if (index) {
        for (size_t i = 0; i < sizeof cai_index_types / sizeof cai_index_types[0]; i++)
            if (PyUnicode_CompareWithASCIIString(typestr, cai_index_types[i].typestr) == 0)
                return cai_index_types[i].dtype;
        return -1;
    }
    for (size_t i = 0; i < sizeof cai_types / sizeof cai_types[0]; i++)
        if (PyUnicode_CompareWithASCIIString(typestr, cai_types[i].typestr) == 0)
            return cai_types[i].dtype;
    return -1;
}

/* The element type of a CAI typestr; -1 with TypeError when unsupported. */
static int cai_dtype(PyObject *typestr, const char *name, int index)
{
    if (!PyUnicode_Check(typestr)) {
        PyErr_Format(PyExc_TypeError, "%s: typestr %R is not a string", name, typestr);
        return -1;
    }
    int dt = cai_lookup(typestr, index);
    if (dt >= 0)
        return dt;
    const char *hint = "";
    for (size_t i = 0; i < sizeof cai_hints / sizeof cai_hints[0]; i++)
        if (PyUnicode_CompareWithASCIIString(typestr, cai_hints[i].typestr) == 0)
            hint = cai_hints[i].hint;
    PyErr_Format(PyExc_TypeError, "%s: element type %R%s%s%s is not supported (expected %s)", name, typestr,
                 *hint ? " (" : "", hint, *hint ? ")" : "",
                 index ? "int32 '<i4'" : "bfloat16 '<V2', or float32 '<f4' for out");
    return -1;
}

/* _arrays._plain_descr: whether a CAI 'descr' is one unnamed field of
 * element type dtype (what numpy and CuPy write for an array that is not
 * structured). */
static int plain_descr(PyObject *descr, int dtype, int index)
{
    if (!(PyList_Check(descr) || PyTuple_Check(descr)) || PySequence_Fast_GET_SIZE(descr) != 1)
        return 0;
    PyObject *f = PySequence_Fast_GET_ITEM(descr, 0);
    if (!(PyList_Check(f) || PyTuple_Check(f)) || PySequence_Fast_GET_SIZE(f) != 2)
        return 0;
    PyObject *fname = PySequence_Fast_GET_ITEM(f, 0), *ftype = PySequence_Fast_GET_ITEM(f, 1);
    return PyUnicode_Check(fname) && PyUnicode_GetLength(fname) == 0 && PyUnicode_Check(ftype) &&
           cai_lookup(ftype, index) == dtype;
}

static int from_cai(PyObject *cai, mat *m)
{
    const char *name = m->name;
    char what[64];
    if (!PyDict_Check(cai)) {
        PyObject *tn = PyObject_GetAttr((PyObject *)Py_TYPE(cai), s_name);
        if (tn) {
            PyErr_Format(PyExc_TypeError, "%s: __cuda_array_interface__ is a %S, expected a dict", name, tn);
            Py_DECREF(tn);
        }
        return -1;
    }
    PyObject *const keys[4] = { s_shape, s_typestr, s_data, s_version };
    for (int i = 0; i < 4; i++) {
        int has = PySequence_Contains(cai, keys[i]);
        if (has <= 0) {
            if (has == 0)
                PyErr_Format(PyExc_TypeError, "%s: __cuda_array_interface__ has no '%U' entry", name, keys[i]);
            return -1;
        }
    }
    int rc = -1, big = 0;
    PyObject *v = NULL, *shape = NULL, *strides = NULL, *readonly = NULL;
    if (!(v = PyObject_GetItem(cai, s_typestr)) || (m->dtype = cai_dtype(v, name, m->index)) < 0)
        goto out;
    Py_CLEAR(v);
    if (!(v = cai_get(cai, s_descr)))
        goto out;
    if (v != Py_None && !plain_descr(v, m->dtype, m->index)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: descr %R describes a structured type (expected one unnamed field of the typestr's type)",
                     name, v);
        goto out;
    }
    Py_CLEAR(v);
    if (!(v = cai_get(cai, s_mask)))
        goto out;
    if (v != Py_None) {
        PyErr_Format(PyExc_TypeError, "%s: masked arrays are not supported", name);
        goto out;
    }
    Py_CLEAR(v);
    if (!(v = PyObject_GetItem(cai, s_shape)) || !(shape = PySequence_Tuple(v)))
        goto out;
    Py_CLEAR(v);
    snprintf(what, sizeof what, "%s: shape entry", name);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); i++)
        if (check_int(PyTuple_GET_ITEM(shape, i), what))
            goto out;
    const int ndim = (int)PyTuple_GET_SIZE(shape);
    if (check_rank(m, ndim, shape))
        goto out;
    int64_t dims[3], elems[3];
    int big_d[3] = { 0 }, neg = 0, large = 0;
    for (int i = 0; i < ndim; i++) {
        if (as_i64(PyTuple_GET_ITEM(shape, i), &dims[i], &big_d[i]))
            goto out;
        neg |= big_d[i] < 0 || (!big_d[i] && dims[i] < 0);
        large |= big_d[i] > 0;
    }
    if (neg) {
        PyErr_Format(PyExc_ValueError, "%s: negative shape %S", name, shape);
        goto out;
    }
    if (large) {
        PyErr_Format(PyExc_ValueError, "%s: shape %S is too large (each dimension must be below 2**63)", name, shape);
        goto out;
    }
    if (!(v = PyObject_GetItem(cai, s_data)))
        goto out;
    if (!PyTuple_Check(v) || PyTuple_GET_SIZE(v) != 2) {
        PyErr_Format(PyExc_TypeError, "%s: 'data' must be a (pointer, read_only) tuple, got %R", name, v);
        goto out;
    }
    PyObject *ptr = PyTuple_GET_ITEM(v, 0);
    m->ptr = 0;
    if (ptr != Py_None) {
        snprintf(what, sizeof what, "%s: data pointer", name);
        if (check_int(ptr, what))
            goto out;
        m->ptr = PyLong_AsUnsignedLongLong(ptr);
        if (m->ptr == (uint64_t)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            long long sv = PyLong_AsLongLongAndOverflow(ptr, &big);
            if (PyErr_Occurred())
                goto out;
            if (big < 0 || (!big && sv < 0))
                PyErr_Format(PyExc_ValueError, "%s: data pointer %S is negative", name, ptr);
            else
                PyErr_Format(PyExc_ValueError, "%s: data pointer %S does not fit in 64 bits", name, ptr);
            goto out;
        }
    }
    readonly = Py_NewRef(PyTuple_GET_ITEM(v, 1));
    Py_CLEAR(v);
    if (!(v = cai_get(cai, s_strides)))
        goto out;
    int size = dt_size[m->dtype];
    if (v == Py_None) {   /* C-contiguous */
        int64_t step = 1;   /* saturated: no array is that large, and the call is refused then */
        for (int i = ndim - 1; i >= 0; i--) {
            elems[i] = step;
            step = dims[i] && step > INT64_MAX / dims[i] ? INT64_MAX : step * dims[i];
        }
    } else {
        if (!(strides = PySequence_Tuple(v)))
            goto out;
        if (PyTuple_GET_SIZE(strides) != ndim) {
            PyErr_Format(PyExc_ValueError, "%s: %zd strides for a %d-D shape", name, PyTuple_GET_SIZE(strides), ndim);
            goto out;
        }
        snprintf(what, sizeof what, "%s: stride", name);
        int64_t sb[3];
        int big_s[3], any_big = 0, split = 0;
        for (int i = 0; i < ndim; i++) {
            if (check_int(PyTuple_GET_ITEM(strides, i), what) ||
                as_i64(PyTuple_GET_ITEM(strides, i), &sb[i], &big_s[i]))
                goto out;
            any_big |= big_s[i];
        }
        if (any_big) {
            /* beyond int64: first whether they split an element, as Python's % would say */
            PyObject *sz = PyLong_FromLong(size);
            if (!sz)
                goto out;
            for (int i = 0; i < ndim && !split; i++) {
                PyObject *r = PyNumber_Remainder(PyTuple_GET_ITEM(strides, i), sz);
                if (!r) {
                    Py_DECREF(sz);
                    goto out;
                }
                split = PyObject_IsTrue(r);
                Py_DECREF(r);
            }
            Py_DECREF(sz);
        }
        for (int i = 0; i < ndim && !any_big; i++)
            split |= sb[i] % size != 0;
        if (split) {
            PyErr_Format(PyExc_ValueError, "%s: strides %S (bytes) are not multiples of the %d-byte element", name,
                         strides, size);
            goto out;
        }
        if (any_big) {
            PyErr_Format(PyExc_ValueError, "%s: strides %S (bytes) do not fit in 64 bits", name, strides);
            goto out;
        }
        for (int i = 0; i < ndim; i++)
            elems[i] = sb[i] / size;
    }
    set_dims(m, ndim, dims, elems);
    Py_CLEAR(v);
    if (!(v = cai_get(cai, s_stream)))
        goto out;
    if (v != Py_None) {
        snprintf(what, sizeof what, "%s: stream", name);
        if (check_int(v, what))
            goto out;
        int zero = PyLong_AsLongLongAndOverflow(v, &big) == 0 && !big;
        if (PyErr_Occurred())
            goto out;
        if (zero) {
            PyErr_Format(PyExc_ValueError,
                         "%s: stream 0 is not allowed by __cuda_array_interface__ (use 1 or 2)", name);
            goto out;
        }
        m->stream = Py_NewRef(v);
    }
    m->device = -1;
    if ((m->readonly = PyObject_IsTrue(readonly)) >= 0)
        rc = 0;
out:
    Py_XDECREF(readonly);
    Py_XDECREF(v);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return rc;
}

/* ---- DLPack producers (objects with __dlpack__ and a CUDA __dlpack_device__) ---- */

/* The stream a DLPack producer is asked to make its data ready on: the
 * stream argument; else, with torch operands, torch's current stream on the
 * producer's device; else the legacy default stream. *for_stream is that
 * stream as the library will get it (NULL: legacy default), *arg what
 * __dlpack__ gets (None, or an int: 1 is the legacy default stream). */
typedef struct dl_ctx {
    PyObject *stream;            /* the stream argument (NULL or None: not given) */
    int any_torch;
} dl_ctx;

static int dl_consumer_stream(const dl_ctx *ctx, int device, void **for_stream, PyObject **arg)
{
    *for_stream = NULL;
    PyObject *s = ctx->stream;
    if (s && s != Py_None) {
        PyObject *v = NULL;
        if (PyLong_Check(s))
            v = Py_NewRef(s);
        else if (get_attr(s, s_cuda_stream, &v) < 0)
            return -1;
        if (v && PyLong_Check(v)) {
            *for_stream = PyLong_AsVoidPtr(v);
            Py_DECREF(v);
            if (PyErr_Occurred())
                return -1;
            *arg = PyLong_FromVoidPtr(*for_stream ? *for_stream : (void *)1);
            return *arg ? 0 : -1;
        }
        Py_XDECREF(v);   /* not a stream: plan() raises for it later */
    } else if (ctx->any_torch) {
        if (torch_stream(device, for_stream))
            return -1;
        *arg = PyLong_FromVoidPtr(*for_stream ? *for_stream : (void *)1);
        return *arg ? 0 : -1;
    }
    *arg = Py_NewRef(Py_None);
    return 0;
}

/* 1: x is a CUDA DLPack producer and m describes it (its capsule kept in m);
 * 0: it is not one (no __dlpack__, or its memory is not CUDA device memory);
 * -1: error. */
static int from_dlpack(PyObject *x, mat *m, const dl_ctx *ctx)
{
    PyObject *fn = NULL, *dev = NULL;
    int r = get_attr(x, s_dlpack, &fn);
    if (r <= 0)
        return r;
    Py_DECREF(fn);
    if ((r = get_attr(x, s_dlpack_device, &fn)) <= 0)
        return r;
    dev = PyObject_CallNoArgs(fn);
    Py_DECREF(fn);
    long type = 0, id = 0;
    if (!dev || !PyTuple_Check(dev) || PyTuple_GET_SIZE(dev) != 2 ||
        ((type = PyLong_AsLong(PyTuple_GET_ITEM(dev, 0))) == -1 && PyErr_Occurred()) ||
        ((id = PyLong_AsLong(PyTuple_GET_ITEM(dev, 1))) == -1 && PyErr_Occurred())) {
        if (!dev || PyErr_Occurred())
            raise_wrapped(PyExc_TypeError, m->name, "__dlpack_device__()");
        else
            PyErr_Format(PyExc_TypeError, "%s: __dlpack_device__() returned %R, expected (device_type, device_id)",
                         m->name, dev);
        Py_XDECREF(dev);
        return -1;
    }
    Py_DECREF(dev);
    if (type != DL_CUDA && type != DL_CUDA_MANAGED)
        return 0;
    void *for_stream;
    PyObject *sarg = NULL;
    if (dl_consumer_stream(ctx, (int)id, &for_stream, &sarg))
        return -1;
    /* DLPack 1.x first (read-only flag); older producers take no max_version */
    PyObject *args[3] = { x, sarg, NULL };
    PyObject *kw = Py_BuildValue("(OO)", s_stream, s_max_version), *ver = Py_BuildValue("(ii)", 1, 0);
    PyObject *cap = NULL;
    if (kw && ver) {
        args[2] = ver;
        cap = PyObject_VectorcallMethod(s_dlpack, args, 1, kw);
        if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyObject *kw1 = PyTuple_GetSlice(kw, 0, 1);
            if (kw1) {
                cap = PyObject_VectorcallMethod(s_dlpack, args, 1, kw1);
                Py_DECREF(kw1);
            }
        }
    }
    Py_XDECREF(kw);
    Py_XDECREF(ver);
    Py_DECREF(sarg);
    if (!cap) {
        if (PyErr_ExceptionMatches(PyExc_Exception))
            raise_wrapped(PyExc_TypeError, m->name, "__dlpack__");
        return -1;
    }
    const dl_tensor *t = NULL;
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        const dl_managed_v1 *v1 = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (v1->major != 1) {
            PyErr_Format(PyExc_TypeError, "%s: DLPack version %u.%u is not supported (expected 1.x)", m->name,
                         (unsigned)v1->major, (unsigned)v1->minor);
            Py_DECREF(cap);
            return -1;
        }
        t = &v1->t;
        m->readonly = (v1->flags & DL_READ_ONLY) != 0;
    } else if (PyCapsule_IsValid(cap, "dltensor")) {
        t = &((const dl_managed *)PyCapsule_GetPointer(cap, "dltensor"))->t;
    } else {
        PyErr_Format(PyExc_TypeError, "%s: __dlpack__ did not return a DLPack capsule", m->name);
        Py_DECREF(cap);
        return -1;
    }
    m->capsule = cap;   /* released with m */
    m->dlpack = 1;
    m->device = t->device.device_id;
    m->dl_for = for_stream;
    const int lanes1 = t->dtype.lanes == 1;
    if (m->index)
        m->dtype = lanes1 && t->dtype.code == DL_INT && t->dtype.bits == 32 ? DT_I32 : -1;
    else
        m->dtype = lanes1 && t->dtype.code == DL_BFLOAT && t->dtype.bits == 16  ? DT_BF16
                   : lanes1 && t->dtype.code == DL_FLOAT && t->dtype.bits == 32 ? DT_F32
                                                                                : -1;
    if (m->dtype < 0) {
        PyErr_Format(PyExc_TypeError, "%s: DLPack dtype (code %u, bits %u, lanes %u) is not supported (expected %s)",
                     m->name, (unsigned)t->dtype.code, (unsigned)t->dtype.bits, (unsigned)t->dtype.lanes,
                     m->index ? "int32" : "bfloat16, or float32 for out");
        return -1;
    }
    const int ndim = t->shape && t->ndim > 0 ? t->ndim : 0;
    PyObject *shape = PyTuple_New(ndim);
    for (int i = 0; shape && i < ndim; i++) {
        PyObject *d = PyLong_FromLongLong(t->shape[i]);
        if (d)
            PyTuple_SET_ITEM(shape, i, d);
        else
            Py_CLEAR(shape);   /* formatting a tuple with a NULL item would crash */
    }
    if (!shape || check_rank(m, t->shape ? t->ndim : 0, shape)) {
        Py_XDECREF(shape);
        return -1;
    }
    int neg = 0;
    for (int i = 0; i < ndim; i++)
        neg |= t->shape[i] < 0;
    if (neg) {
        PyErr_Format(PyExc_ValueError, "%s: negative shape %S", m->name, shape);
        Py_DECREF(shape);
        return -1;
    }
    Py_DECREF(shape);
    int64_t elems[3], step = 1;   /* strides NULL: compact row-major */
    for (int i = ndim - 1; i >= 0; i--) {
        elems[i] = t->strides ? t->strides[i] : step;
        step = t->shape[i] && step > INT64_MAX / t->shape[i] ? INT64_MAX : step * t->shape[i];
    }
    set_dims(m, ndim, t->shape, elems);
    m->ptr = (uint64_t)(uintptr_t)t->data + t->byte_offset;
    return 1;
}

/* ---- describe: _arrays.describe ---- */

static const char host_msg[] = "%s: %S is host memory; tilekit needs device memory (a CUDA tensor or an object with "
                                "__cuda_array_interface__)";

static int describe(PyObject *x, mat *m, const dl_ctx *ctx)
{
    const char *name = m->name;
    m->device = -1;
    if (x == Py_None) {
        PyErr_Format(PyExc_TypeError, "%s: got None (expected a CUDA tensor or an object with __cuda_array_interface__)",
                     name);
        return -1;
    }
    m->obj = x;
    if (is_torch_tensor(x)) {
        if (from_torch(x, m))
            return -1;
    } else {
        PyObject *cai = NULL;
        int has;
        if (PyObject_HasAttr((PyObject *)Py_TYPE(x), s_cai)) {
            cai = PyObject_GetAttr(x, s_cai);
            if (!cai) {   /* a producer may refuse (torch, for a tensor that requires grad) */
                if (PyErr_ExceptionMatches(PyExc_Exception))
                    raise_wrapped(PyExc_TypeError, name, "__cuda_array_interface__");
                return -1;
            }
            has = 1;
        } else if ((has = get_attr(x, s_cai, &cai)) < 0) {
            return -1;
        }
        if (has) {
            int r = from_cai(cai, m);
            Py_DECREF(cai);
            if (r)
                return -1;
        } else {
            int r = from_dlpack(x, m, ctx);
            if (r < 0)
                return -1;
            if (r == 0) {
                PyObject *v;
                int host = PyList_Check(x) || PyTuple_Check(x);
                if (!host && (host = get_attr(x, s_array_interface, &v)) > 0)
                    Py_DECREF(v);
                if (!host && (host = get_attr(x, s_array, &v)) > 0)
                    Py_DECREF(v);
                if (host < 0)
                    return -1;
                PyObject *tn = PyObject_GetAttr((PyObject *)Py_TYPE(x), s_name);
                if (tn) {
                    if (host)
                        PyErr_Format(PyExc_TypeError, host_msg, name, tn);
                    else
                        PyErr_Format(PyExc_TypeError, "%s: %S is not a CUDA tensor and has no __cuda_array_interface__",
                                     name, tn);
                    Py_DECREF(tn);
                }
                return -1;
            }
        }
    }
    if (m->srow < 0 || m->scol < 0 || m->sbatch < 0) {
        if (m->ndim == 3)
            PyErr_Format(PyExc_ValueError, "%s: negative strides (%lld, %lld, %lld) are not supported", name,
                         (long long)m->sbatch, (long long)m->srow, (long long)m->scol);
        else
            PyErr_Format(PyExc_ValueError, "%s: negative strides (%lld, %lld) are not supported", name,
                         (long long)m->srow, (long long)m->scol);
        return -1;
    }
    if (m->ptr == 0 && m->rows > 0 && m->cols > 0 && m->count > 0) {
        if (m->ndim == 1)
            PyErr_Format(PyExc_ValueError, "%s: data pointer is NULL for an array of %lld", name, (long long)m->cols);
        else if (m->ndim == 3)
            PyErr_Format(PyExc_ValueError, "%s: data pointer is NULL for %lld matrices of %lld x %lld", name,
                         (long long)m->count, (long long)m->rows, (long long)m->cols);
        else
            PyErr_Format(PyExc_ValueError, "%s: data pointer is NULL for a %lld x %lld matrix", name,
                         (long long)m->rows, (long long)m->cols);
        return -1;
    }
    return 0;
}

/* ---- the checked call: _fallback._plan ---- */

enum {
    A_A, A_B, A_OUT, A_ALPHA, A_BETA, A_TA, A_TB, A_OUT_DTYPE, A_KERNEL, A_STREAM, A_OFFS, A_GROUP_ERROR, A_QUERY,
    A_FORM, NARG
};
static const char *const arg_cnames[NARG] = { "A",      "B",    "out",         "alpha", "beta",
                                              "trans_a", "trans_b", "out_dtype", "kernel", "stream",
                                              "offs",   "group_error", "query", "form" };
static PyObject *arg_names[NARG];

/* The call's form (plan()'s form=): gemm, gemm_batched or gemm_grouped. */
enum { F_GEMM, F_BATCHED, F_GROUPED };
static const char *const form_name[3] = { "gemm", "batched", "grouped" };
#define NOPS 5   /* operands: A, B, out, offs, group_error */

typedef struct plan {
    mat a, b, c, offs, err;
    int has_c, has_offs, has_err, c_dtype, layout, op_a, op_b, ta, tb, device, any_torch;
    int form, kind, out_ndim;    /* kind: tk_group_kind (0 for gemm); out_ndim: 2 or 3 */
    int64_t m, n, k, lda, ldb, ldc;
    int64_t count, stride_a, stride_b, stride_c;   /* the products; the strides a kind does not use are 0 */
    double alpha, beta;
    const char *kernel;          /* NULL: auto; else the UTF-8 of the caller's str (alive for the call) */
    Py_ssize_t kernel_len;
    PyObject *stream;            /* owned: the value of the stream the call runs on; NULL: the legacy default */
    PyObject *joins[NOPS];       /* owned: the other streams named by CAI 'stream' entries */
    int njoins;
} plan;

static void plan_release(plan *p)
{
    mat_release(&p->a);
    mat_release(&p->b);
    mat_release(&p->c);
    mat_release(&p->offs);
    mat_release(&p->err);
    Py_CLEAR(p->stream);
    for (int i = 0; i < p->njoins; i++)
        Py_CLEAR(p->joins[i]);
    p->njoins = 0;
}

/* _fallback._legacy: whether a stream value (NULL: none) is the legacy
 * default stream: none, 0 (the NULL stream, torch's default stream) or 1
 * (cudaStreamLegacy, as CAI writes it). */
static int legacy_stream(PyObject *v)
{
    if (!v || v == Py_None)
        return 1;
    int big = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &big);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return !big && (x == 0 || x == 1);
}

/* _fallback._same_stream: whether two stream values name one stream. */
static int same_stream(PyObject *x, PyObject *y)
{
    int lx = legacy_stream(x), ly = legacy_stream(y);
    if (lx || ly)
        return lx && ly;
    int r = PyObject_RichCompareBool(x, y, Py_EQ);
    if (r < 0)
        PyErr_Clear();
    return r > 0;
}

/* _real: a real number that is not a bool, as a float; `dflt` when absent. */
static int real_arg(PyObject *v, const char *what, double dflt, double *out)
{
    if (!v) {
        *out = dflt;
        return 0;
    }
    int ok = 0;
    if (!PyBool_Check(v)) {
        ok = PyFloat_Check(v) || PyLong_Check(v);
        if (!ok && (ok = PyObject_IsInstance(v, S.real)) < 0)
            return -1;
    }
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: %R is not a real number", what, v);
        return -1;
    }
    if (PyFloat_CheckExact(v)) {
        *out = PyFloat_AS_DOUBLE(v);
        return 0;
    }
    PyObject *f = PyNumber_Float(v);
    if (!f)
        return -1;
    *out = PyFloat_AS_DOUBLE(f);
    Py_DECREF(f);
    return 0;
}

/* _arrays.parse_dtype: DT_F32 or DT_BF16, -1 with TypeError. */
static int parse_dtype(PyObject *d)
{
    if (S.f32 && d == S.f32)
        return DT_F32;
    if (S.bf16 && d == S.bf16)
        return DT_BF16;
    if (PyUnicode_Check(d)) {
        PyObject *key = call_method0(d, s_lower);
        if (!key)
            return -1;
        if (PyUnicode_Tailmatch(key, s_torch_prefix, 0, PY_SSIZE_T_MAX, -1) == 1) {
            PyObject *k2 = PyUnicode_Substring(key, 6, PY_SSIZE_T_MAX);
            Py_DECREF(key);
            if (!(key = k2))
                return -1;
        }
        static const struct { const char *name; int dt; } names[] = {
            { "fp32", DT_F32 }, { "float32", DT_F32 }, { "f32", DT_F32 }, { "bf16", DT_BF16 }, { "bfloat16", DT_BF16 },
        };
        int dt = -1;
        for (size_t i = 0; i < sizeof names / sizeof names[0] && dt < 0; i++)
            if (PyUnicode_CompareWithASCIIString(key, names[i].name) == 0)
                dt = names[i].dt;
        Py_DECREF(key);
        if (dt < 0)
            PyErr_Format(PyExc_TypeError, "out_dtype: %R is not a supported output type (expected 'fp32' or 'bf16')", d);
        return dt;
    }
    if (S.dtype_type) {
        int r = PyObject_IsInstance(d, S.dtype_type);
        if (r < 0)
            return -1;
        if (r) {
            PyErr_Format(PyExc_TypeError, "out_dtype: %S is not supported (expected torch.float32 or torch.bfloat16)",
                         d);
            return -1;
        }
    }
    PyErr_Format(PyExc_TypeError, "out_dtype: %R is not a dtype (expected torch.float32, torch.bfloat16, 'fp32' or 'bf16')",
                 d);
    return -1;
}

/* _operand: (op, ld) of the logical operand x in a `layout` problem. */
static int operand(const mat *x, int layout, int *op, int64_t *ld)
{
    int kind = storage(x, layout, ld);
    if (kind < 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s%s: strides (%lld, %lld) of its %lld x %lld storage are neither row- nor column-contiguous "
                     "(one dimension must have stride 1 and the other must not overlap it); make a contiguous copy "
                     "first",
                     x->name, x->tr ? ".T" : "", (long long)x->srow, (long long)x->scol, (long long)x->rows,
                     (long long)x->cols);
        return -1;
    }
    *op = kind == layout ? TK_OP_N : TK_OP_T;
    return 0;
}

static const char *const kind_name[5] = { "", "TK_GROUP_BATCHED", "TK_GROUP_ROWS", "TK_GROUP_K", "TK_GROUP_MASKED" };

/* _fallback._group_kind: a grouped call's kind from the ranks of A and B. */
static int group_kind(const plan *p)
{
    const int a = p->a.ndim, b = p->b.ndim;
    if (a == 2)
        return b == 3 ? TK_GROUP_ROWS : TK_GROUP_K;
    if (b == 3)
        return TK_GROUP_MASKED;
    PyErr_SetString(PyExc_ValueError, "A is a 3-D stack and B a 2-D matrix: no group kind splits N (the columns of B "
                                      "and out); multiply the transposes, out.T = B.T x A.T grouped by rows "
                                      "(TK_GROUP_ROWS)");
    return -1;
}

/* _fallback._index_array: offs or group_error, a contiguous 1-D int32 array. */
static int index_array(PyObject *x, mat *v, const dl_ctx *ctx)
{
    v->ranks = R1;
    v->index = 1;
    if (describe(x, v, ctx))
        return -1;
    if (v->cols > 1 && v->scol != 1) {
        PyErr_Format(PyExc_ValueError, "%s: stride %lld: the int32 elements must be contiguous (stride 1)", v->name,
                     (long long)v->scol);
        return -1;
    }
    return 0;
}

/* _fallback._groups: a grouped call's count (from B, out or offs), offsets
 * and error flag. */
static int groups(plan *p, PyObject *offs, PyObject *group_error, const dl_ctx *ctx)
{
    if (!offs || offs == Py_None) {
        PyErr_SetString(PyExc_TypeError, "offs: required for a grouped product (int32 cumulative end offsets, or row "
                                         "counts for 3-D A and B, in device memory)");
        return -1;
    }
    if (index_array(offs, &p->offs, ctx))
        return -1;
    p->has_offs = 1;
    p->count = p->kind == TK_GROUP_ROWS ? p->b.count : p->kind == TK_GROUP_MASKED ? p->a.count
               : p->has_c                ? p->c.count
                                         : p->offs.cols;
    if (p->offs.cols != p->count) {
        PyErr_Format(PyExc_ValueError, "offs: %lld offsets for %lld groups (one per group: %s)", (long long)p->offs.cols,
                     (long long)p->count, p->kind == TK_GROUP_ROWS ? "B's matrices" : p->kind == TK_GROUP_K
                                                                                     ? "out's matrices"
                                                                                     : "A's and B's matrices");
        return -1;
    }
    if (group_error && group_error != Py_None) {
        if (index_array(group_error, &p->err, ctx))
            return -1;
        p->has_err = 1;
        if (p->err.cols < 1) {
            PyErr_SetString(PyExc_ValueError, "group_error: empty (expected at least one int32 element)");
            return -1;
        }
        if (p->err.readonly) {
            PyErr_SetString(PyExc_ValueError, "group_error: the array is read-only");
            return -1;
        }
    }
    return 0;
}

/* out's shape as a message writes it: "8 x 6" or "3 x 8 x 6". */
static void shape_str(char *buf, size_t len, int ndim, int64_t count, int64_t rows, int64_t cols)
{
    if (ndim == 3)
        snprintf(buf, len, "%lld x %lld x %lld", (long long)count, (long long)rows, (long long)cols);
    else
        snprintf(buf, len, "%lld x %lld", (long long)rows, (long long)cols);
}

/* _fallback.plan: the checked call of `form`. */
static int make_plan(plan *p, PyObject *const *arg, int query, int form)
{
    memset(p, 0, sizeof *p);
    p->a.name = "A";
    p->b.name = "B";
    p->c.name = "out";
    p->offs.name = "offs";
    p->err.name = "group_error";
    p->a.ranks = p->b.ranks = form == F_GEMM ? R2 : form == F_BATCHED ? R3 : R2 | R3;
    p->form = form;
    p->kind = form == F_BATCHED ? TK_GROUP_BATCHED : 0;
    p->count = 1;
    p->device = -1;
    if (torch_ready() < 0)
        return -1;
    PyObject *A = arg[A_A], *B = arg[A_B], *out = arg[A_OUT] == Py_None ? NULL : arg[A_OUT];
    dl_ctx ctx = { arg[A_STREAM], is_torch_tensor(A) || is_torch_tensor(B) || (out && is_torch_tensor(out)) };
    if (describe(A, &p->a, &ctx) || describe(B, &p->b, &ctx))
        return -1;
    const mat *ab[2] = { &p->a, &p->b };
    for (int i = 0; i < 2; i++)
        if (ab[i]->dtype != DT_BF16) {
            PyErr_Format(PyExc_TypeError,
                         "%s: dtype %s is not supported: tilekit multiplies bfloat16 inputs (convert with "
                         ".to(torch.bfloat16))",
                         ab[i]->name, dt_name[ab[i]->dtype]);
            return -1;
        }
    if (real_arg(arg[A_ALPHA], "alpha", 1.0, &p->alpha) || real_arg(arg[A_BETA], "beta", 0.0, &p->beta))
        return -1;
    PyObject *kernel = arg[A_KERNEL];
    if (kernel && kernel != Py_None) {
        if (!PyUnicode_Check(kernel)) {
            PyErr_Format(PyExc_TypeError,
                         "kernel: %R is not a name (expected a string such as 'k01_naive', or None for auto)", kernel);
            return -1;
        }
        if (PyUnicode_GetLength(kernel) > 0 && PyUnicode_CompareWithASCIIString(kernel, "auto") != 0 &&
            !(p->kernel = PyUnicode_AsUTF8AndSize(kernel, &p->kernel_len)))
            return -1;
    }
    if ((arg[A_TA] && (p->ta = PyObject_IsTrue(arg[A_TA])) < 0) || (arg[A_TB] && (p->tb = PyObject_IsTrue(arg[A_TB])) < 0))
        return -1;
    mat oa = p->ta ? mat_t(&p->a) : p->a, ob = p->tb ? mat_t(&p->b) : p->b;   /* op(A) M x K, op(B) K x N */
    if (oa.cols != ob.rows) {
        PyErr_Format(PyExc_ValueError,
                     "shape mismatch: op(A) is %lld x %lld but op(B) is %lld x %lld (inner dimensions differ; "
                     "trans_a=%s, trans_b=%s)",
                     (long long)oa.rows, (long long)oa.cols, (long long)ob.rows, (long long)ob.cols,
                     p->ta ? "True" : "False", p->tb ? "True" : "False");
        return -1;
    }
    p->m = oa.rows;
    p->k = oa.cols;
    p->n = ob.cols;
    if (form == F_GROUPED && (p->kind = group_kind(p)) < 0)
        return -1;
    PyObject *offs = arg[A_OFFS], *group_error = arg[A_GROUP_ERROR];
    if (form != F_GROUPED && ((offs && offs != Py_None) || (group_error && group_error != Py_None))) {
        PyErr_Format(PyExc_TypeError, "offs: a %s product takes no offsets", form_name[form]);
        return -1;
    }
    if ((p->kind == TK_GROUP_BATCHED || p->kind == TK_GROUP_MASKED) && p->a.count != p->b.count) {
        PyErr_Format(PyExc_ValueError, "count mismatch: A holds %lld matrices but B %lld", (long long)p->a.count,
                     (long long)p->b.count);
        return -1;
    }
    int want = -1;
    if (arg[A_OUT_DTYPE] && arg[A_OUT_DTYPE] != Py_None && (want = parse_dtype(arg[A_OUT_DTYPE])) < 0)
        return -1;
    p->out_ndim = p->kind == 0 || p->kind == TK_GROUP_ROWS ? 2 : 3;
    mat *c = &p->c;
    if (out) {
        c->ranks = p->out_ndim == 2 ? R2 : R3;
        if (describe(out, c, &ctx))
            return -1;
        p->has_c = 1;
        if (want >= 0 && c->dtype != want) {
            PyErr_Format(PyExc_ValueError, "out: dtype %s does not match out_dtype %s", dt_name[c->dtype], dt_name[want]);
            return -1;
        }
    }
    if (p->kind == TK_GROUP_BATCHED)
        p->count = p->a.count;
    if (form == F_GROUPED && groups(p, offs, group_error, &ctx))
        return -1;
    if (p->count > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "count: %lld products is more than 2**31 - 1", (long long)p->count);
        return -1;
    }
    int64_t stride_c;
    if (out) {
        if (c->rows != p->m || c->cols != p->n || (p->out_ndim == 3 && c->count != p->count)) {
            char got[80], expected[80];
            shape_str(got, sizeof got, p->out_ndim, c->count, c->rows, c->cols);
            shape_str(expected, sizeof expected, p->out_ndim, p->count, p->m, p->n);
            PyErr_Format(PyExc_ValueError, "out: shape %s, expected %s (%s)", got, expected,
                         p->out_ndim == 2 ? "M x N" : "count x M x N");
            return -1;
        }
        if (c->readonly) {
            PyErr_SetString(PyExc_ValueError, "out: the array is read-only");
            return -1;
        }
        const mat *read[4] = { &p->a, &p->b, p->has_offs ? &p->offs : NULL, p->has_err ? &p->err : NULL };
        for (int i = 0; i < 4; i++)
            if (read[i] && overlaps(c, read[i])) {
                PyErr_Format(PyExc_ValueError, "out overlaps %s in memory: the kernel would read what it overwrites",
                             read[i]->name);
                return -1;
            }
        if (p->has_err && overlaps(&p->err, &p->offs)) {
            PyErr_SetString(PyExc_ValueError, "group_error overlaps offs in memory: the kernel would read what it "
                                              "overwrites");
            return -1;
        }
        int kind = storage(c, ROW, &p->ldc);
        if (kind < 0) {
            PyErr_Format(PyExc_ValueError,
                         "out: strides (%lld, %lld) are neither row- nor column-contiguous (one dimension must have "
                         "stride 1 and the other must not overlap it)",
                         (long long)c->srow, (long long)c->scol);
            return -1;
        }
        if (kind != ROW && p->kind >= TK_GROUP_ROWS) {
            PyErr_Format(PyExc_ValueError,
                         "out: strides (%lld, %lld): %s writes row-major matrices (out's rows must be contiguous)",
                         (long long)c->srow, (long long)c->scol, kind_name[p->kind]);
            return -1;
        }
        p->layout = kind == ROW ? TK_ROW_MAJOR : TK_COL_MAJOR;
        p->c_dtype = c->dtype;
        stride_c = c->sbatch;
    } else {
        if (!query && p->beta != 0.0) {
            char *g = PyOS_double_to_string(p->beta, 'g', 6, 0, NULL);
            if (g) {
                PyErr_Format(PyExc_ValueError, "beta is %s but out is None: beta scales an existing out, so pass out",
                             g);
                PyMem_Free(g);
            }
            return -1;
        }
        if (!query && !(p->a.torch || p->b.torch)) {
            PyErr_SetString(PyExc_TypeError, "out: required when neither A nor B is a torch tensor (tilekit allocates "
                                             "the result only through torch)");
            return -1;
        }
        p->layout = TK_ROW_MAJOR;
        p->ldc = p->n > 1 ? p->n : 1;
        p->c_dtype = want >= 0 ? want : DT_F32;
        stride_c = p->m && p->n > INT64_MAX / p->m ? INT64_MAX : p->m * p->n;   /* saturated: refused then */
    }
    int layout = p->layout == TK_ROW_MAJOR ? ROW : COL;
    if (operand(&oa, layout, &p->op_a, &p->lda) || operand(&ob, layout, &p->op_b, &p->ldb))
        return -1;
    /* the strides a kind uses (tilekit.h); the others are 0 */
    const int k = p->kind;
    p->stride_a = k == TK_GROUP_BATCHED || k == TK_GROUP_MASKED ? p->a.sbatch : 0;
    p->stride_b = k == TK_GROUP_BATCHED || k == TK_GROUP_ROWS || k == TK_GROUP_MASKED ? p->b.sbatch : 0;
    p->stride_c = k == TK_GROUP_BATCHED || k == TK_GROUP_K || k == TK_GROUP_MASKED ? stride_c : 0;

    /* the operands, out's first (the order of the CAI streams) */
    const mat *ops[NOPS] = { p->has_c ? &p->c : NULL, &p->a, &p->b, p->has_offs ? &p->offs : NULL,
                             p->has_err ? &p->err : NULL };
    /* one device: of the torch operands (the Python fallback's rule) and of the DLPack ones */
    int devs[NOPS], nd = 0;
    for (int i = 0; i < NOPS; i++)
        if (ops[i] && (ops[i]->torch || ops[i]->dlpack)) {
            int d = ops[i]->device, seen = 0;
            for (int j = 0; j < nd; j++)
                seen |= devs[j] == d;
            if (!seen)
                devs[nd++] = d;
        }
    if (nd > 1) {
        for (int i = 1; i < nd; i++)   /* sorted, as the fallback prints them */
            for (int j = i; j > 0 && devs[j - 1] > devs[j]; j--) {
                int t = devs[j];
                devs[j] = devs[j - 1];
                devs[j - 1] = t;
            }
        char list[160] = "";
        size_t used = 0;
        for (int i = 0; i < nd && used < sizeof list; i++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%scuda:%d", i ? ", " : "", devs[i]);
        PyErr_Format(PyExc_TypeError, "%s must be on one CUDA device, got %s",
                     form != F_GROUPED ? "A, B and out" : p->has_err ? "A, B, out, offs and group_error"
                                                                     : "A, B, out and offs",
                     list);
        return -1;
    }
    p->device = nd ? devs[0] : -1;
    for (int i = 0; i < NOPS; i++)
        p->any_torch |= ops[i] && ops[i]->torch;

    /* The stream the call runs on: stream=; else, with a torch operand,
     * torch's current stream on the operands' device; else the CAI 'stream'
     * entry of out, then of A, B, offs and group_error; else the legacy
     * default stream. */
    PyObject *stream = arg[A_STREAM];
    if (stream && stream != Py_None) {
        if (PyLong_Check(stream)) {
            p->stream = Py_NewRef(stream);
        } else {
            int r = get_attr(stream, s_cuda_stream, &p->stream);
            if (r <= 0) {
                if (r == 0)
                    PyErr_Format(PyExc_TypeError,
                                 "stream: %R is neither a cudaStream_t value (int) nor a torch.cuda.Stream", stream);
                return -1;
            }
            if (!PyLong_Check(p->stream)) {
                PyErr_Format(PyExc_TypeError, "stream: the cuda_stream of %R is %R, not an integer", stream,
                             p->stream);
                return -1;
            }
        }
    } else if (p->any_torch) {
        void *s;
        if (torch_stream(p->device, &s) || !(p->stream = PyLong_FromVoidPtr(s)))
            return -1;
    } else {
        for (int i = 0; i < NOPS && !p->stream; i++)
            if (ops[i] && ops[i]->stream)
                p->stream = Py_NewRef(ops[i]->stream);
    }
    /* Every other stream a CAI operand names is joined with the call (gemm's
     * join_streams), each once. */
    for (int i = 0; i < NOPS; i++) {
        PyObject *s = ops[i] ? ops[i]->stream : NULL;
        if (!s || same_stream(s, p->stream))
            continue;
        int seen = 0;
        for (int j = 0; j < p->njoins; j++)
            seen |= same_stream(s, p->joins[j]);
        if (!seen)
            p->joins[p->njoins++] = Py_NewRef(s);
    }
    return 0;
}

/* ---- handles: one per thread and device ---- */

/* A thread's handles are kept by a small object in the dict of its Python
 * thread state (PyThreadState_GetDict). Python clears that dict when it
 * deletes the thread state: at the end of a threading.Thread, before join()
 * returns, and for a thread Python did not start, at its last
 * PyGILState_Release. Deallocated then, the object destroys its handles
 * (tk_destroy may run while their GEMMs do: the library frees the workspaces
 * after them), so short-lived threads leave no workspace on the GPU. It
 * destroys nothing at interpreter shutdown, which clears the main thread's
 * state and the daemon threads' (that would race the CUDA runtime's own
 * teardown), nor when another thread clears the state (after fork(), the
 * child clears those of the parent's other threads, whose handles belong to
 * the parent's CUDA context): those handles are left as they are. */
typedef struct thread_handles {
    PyObject_HEAD
    unsigned long owner;             /* PyThread_get_thread_ident() of its thread */
    tk_handle h[MAX_DEVICES + 1];    /* [d + 1]: device d; [0]: no device (-1) */
} thread_handles;

/* The calling thread's, found without a dict lookup while its thread state
 * is the one it was found for (borrowed: that state's dict holds it). */
static _Thread_local thread_handles *tl_handles;
static _Thread_local PyThreadState *tl_tstate;

static int interpreter_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

static void thread_handles_dealloc(PyObject *o)
{
    thread_handles *t = (thread_handles *)o;
    if (tl_handles == t) {
        tl_handles = NULL;
        tl_tstate = NULL;
    }
    if (t->owner == PyThread_get_thread_ident() && !interpreter_finalizing() && L.destroy) {
        Py_BEGIN_ALLOW_THREADS   /* tk_destroy waits for the device (cudaFree) */
        for (int i = 0; i <= MAX_DEVICES; i++)
            if (t->h[i])
                L.destroy(t->h[i]);
        Py_END_ALLOW_THREADS
    }
    PyObject_Free(o);
}

static PyTypeObject thread_handles_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilekit._tilekit.ThreadHandles",
    .tp_basicsize = sizeof(thread_handles),
    .tp_dealloc = thread_handles_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The library handles of one thread, destroyed with its thread state.",
};

static int current_device(void)
{
    int d = -1;
    return L.get_device(&d) == 0 ? d : -1;
}

/* The calling thread's handles: its thread state's, made on first use. */
static thread_handles *thread_handles_get(void)
{
    PyThreadState *ts = PyThreadState_Get();
    if (tl_handles && tl_tstate == ts)
        return tl_handles;
    PyObject *dict = PyThreadState_GetDict();
    if (!dict) {
        PyErr_SetString(PyExc_RuntimeError, "tilekit: the thread state has no dict for its handles");
        return NULL;
    }
    PyObject *o = PyDict_GetItemWithError(dict, s_handles_key);
    if (!o) {
        if (PyErr_Occurred())
            return NULL;
        thread_handles *t = PyObject_New(thread_handles, &thread_handles_type);
        if (!t)
            return NULL;
        t->owner = PyThread_get_thread_ident();
        memset(t->h, 0, sizeof t->h);
        int r = PyDict_SetItem(dict, s_handles_key, (PyObject *)t);
        Py_DECREF(t);   /* the dict holds it */
        if (r)
            return NULL;
        o = (PyObject *)t;
    } else if (!Py_IS_TYPE(o, &thread_handles_type)) {
        PyErr_SetString(PyExc_RuntimeError, "tilekit: the thread state's handle entry was replaced");
        return NULL;
    }
    tl_handles = (thread_handles *)o;
    tl_tstate = ts;
    return tl_handles;
}

static tk_handle get_handle(int device)
{
    if (device < -1 || device >= MAX_DEVICES) {
        PyErr_Format(PyExc_ValueError, "tilekit: CUDA device %d is beyond the %d this module handles", device,
                     MAX_DEVICES);
        return NULL;
    }
    thread_handles *t = thread_handles_get();
    if (!t)
        return NULL;
    tk_handle *slot = &t->h[device + 1];
    if (!*slot) {
        tk_status st = L.create(slot);
        if (st) {
            raise_status(st, L.last_error(NULL), "tk_create");
            *slot = NULL;
            return NULL;
        }
        /* a TILEKIT_TUNE file the library ignored: its reason as a warning */
        const char *why = L.last_error(NULL);
        if (why && *why && PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "tilekit: %s", why) < 0)
            return NULL;
    }
    return *slot;
}

/* Makes the operands' device current for the call (launches go to the
 * current device); skipped when it already is. *prev: the device to go back
 * to, -1 for none. */
static int enter_dev(int device, int *prev)
{
    *prev = -1;
    if (device < 0)
        return 0;
    int cur = -1;
    if (L.get_device(&cur) != 0 || cur == device)   /* no usable GPU: the library will say so */
        return 0;
    int e = L.set_device(device);
    if (e) {
        char msg[96];
        snprintf(msg, sizeof msg, "cudaSetDevice(%d) failed with CUDA error %d", device, e);
        raise_status(TK_ERR_CUDA, msg, "tilekit");
        return -1;
    }
    *prev = cur;
    return 0;
}

static int enter_device(const plan *p, int *prev)
{
    return enter_dev(p->device, prev);
}

static void leave_device(int prev)
{
    if (prev >= 0)
        L.set_device(prev);
}

static tk_gemm_problem problem(const plan *p)
{
    tk_gemm_problem q = {
        .layout = (tk_layout)p->layout, .op_a = (tk_op)p->op_a, .op_b = (tk_op)p->op_b,
        .m = p->m, .n = p->n, .k = p->k, .alpha = (float)p->alpha, .beta = (float)p->beta,
        .a = (const void *)(uintptr_t)p->a.ptr, .lda = p->lda,
        .b = (const void *)(uintptr_t)p->b.ptr, .ldb = p->ldb,
        .c = p->has_c ? (void *)(uintptr_t)p->c.ptr : NULL, .ldc = p->ldc,
        .c_type = (tk_dtype)p->c_dtype,
    };
    return q;
}

/* ---- argument binding (fastcall) ---- */

/* A fastcall signature: fn's arguments names[0..nmax), the first npos of
 * them positional or keyword, the first nreq required. keys: the names
 * interned (NULL: none), matched by identity before the text. */
typedef struct fast_sig {
    const char *fn;
    const char *const *names;
    PyObject *const *keys;
    int nreq, npos, nmax;
} fast_sig;

/* Binds args to sig's names in out[0..nmax); absent ones are NULL. */
static int bind_sig(const fast_sig *sig, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject **out)
{
    const int nmax = sig->nmax;
    for (int i = 0; i < nmax; i++)
        out[i] = NULL;
    if (nargs > sig->npos) {
        PyErr_Format(PyExc_TypeError, "%s() takes from %d to %d positional arguments but %zd were given", sig->fn,
                     sig->nreq, sig->npos, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        out[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t j = 0; j < nkw; j++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, j);
        int i = nmax;
        if (sig->keys)
            for (i = 0; i < nmax && key != sig->keys[i]; i++)
                ;
        if (i == nmax)   /* not interned the same: compare the text */
            for (i = 0; i < nmax && PyUnicode_CompareWithASCIIString(key, sig->names[i]) != 0; i++)
                ;
        if (i == nmax) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", sig->fn, key);
            return -1;
        }
        if (out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", sig->fn, sig->names[i]);
            return -1;
        }
        out[i] = args[nargs + j];
    }
    for (int i = 0; i < sig->nreq; i++)
        if (!out[i]) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", sig->fn, sig->names[i]);
            return -1;
        }
    return 0;
}

/* Binds args to arg_names[0..nmax): the first npos may be positional; A and
 * B are required; absent ones are NULL, out[nmax..NARG) too. */
static int bind_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int npos, int nmax,
                     PyObject **out)
{
    const fast_sig sig = { fn, arg_cnames, arg_names, 2, npos, nmax };
    for (int i = nmax; i < NARG; i++)
        out[i] = NULL;
    return bind_sig(&sig, args, nargs, kwnames, out);
}

/* ---- the module's functions ---- */

/* The exception taken by take_exc raised again (NULL: none). */
static void restore_exc(PyObject *e)
{
    if (!e)
        return;
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(e);
#else
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(e)), e, PyException_GetTraceback(e));
#endif
}

/* The torch stream object to make current for an allocation on the stream
 * `run` of device dev: the caller's own torch.cuda.Stream if it is dev's;
 * torch's default stream for the legacy default stream (torch's is the NULL
 * stream, and torch takes an external handle of 1 for one of its pool
 * streams); else torch.cuda.ExternalStream(run) on dev. */
static PyObject *torch_stream_object(PyObject *stream_arg, void *run, int dev, PyObject *devobj)
{
    PyObject *cls = PyObject_GetAttrString(S.cuda, "Stream");
    int mine = cls ? PyObject_IsInstance(stream_arg, cls) : -1;
    Py_XDECREF(cls);
    if (mine > 0) {
        PyObject *d = PyObject_GetAttrString(stream_arg, "device_index");
        mine = d ? PyLong_Check(d) && PyLong_AsLong(d) == dev : -1;
        Py_XDECREF(d);
    }
    if (mine < 0)
        return NULL;
    if (mine)
        return Py_NewRef(stream_arg);
    if (run == NULL || run == (void *)1)
        return PyObject_CallMethod(S.cuda, "default_stream", "i", dev);
    PyObject *fn = PyObject_GetAttrString(S.cuda, "ExternalStream");
    PyObject *args = fn ? Py_BuildValue("(N)", PyLong_FromVoidPtr(run)) : NULL;
    PyObject *kw = args ? Py_BuildValue("{s:O}", "device", devobj) : NULL;
    PyObject *r = kw ? PyObject_Call(fn, args, kw) : NULL;
    Py_XDECREF(fn);
    Py_XDECREF(args);
    Py_XDECREF(kw);
    return r;
}

/* out for a call with out=None (p has a torch operand: make_plan's rule):
 * torch.empty on the operands' device, allocated on the stream the call
 * runs on, `run`; sets p's C pointer. torch's caching allocator keeps a
 * pool per stream and gives a freed block to the next allocation on the
 * same stream at once, ordered by that stream alone: a block taken from
 * another stream's pool may still be in use by that stream's pending
 * kernels, and, freed by the caller, be given out again on that stream
 * while this call still writes it. So where the call runs on a stream other
 * than torch's current one (stream=), that stream is made current around
 * torch.empty, as `with torch.cuda.stream(s)` would make it. */
static PyObject *alloc_out(plan *p, PyObject *stream_arg, void *run)
{
    int dev = p->a.torch ? p->a.device : p->b.device;
    PyObject *devobj = torch_device(dev), *prev = NULL, *out = NULL;
    if (!devobj)
        return NULL;
    if (stream_arg && stream_arg != Py_None) {
        void *cur;
        if (torch_stream(dev, &cur))
            return NULL;
        int cur_legacy = cur == NULL || cur == (void *)1, run_legacy = run == NULL || run == (void *)1;
        if (cur_legacy ? !run_legacy : cur != run) {
            PyObject *s = torch_stream_object(stream_arg, run, dev, devobj), *r = NULL;
            PyObject *d = s ? PyLong_FromLong(dev) : NULL;
            if (d && (prev = PyObject_CallOneArg(S.current_stream, d)))
                r = PyObject_CallMethod(S.cuda, "set_stream", "O", s);
            Py_XDECREF(d);
            Py_XDECREF(s);
            if (!r) {
                Py_XDECREF(prev);
                return NULL;
            }
            Py_DECREF(r);
        }
    }
    PyObject *size = p->out_ndim == 3 ? Py_BuildValue("(LLL)", (long long)p->count, (long long)p->m, (long long)p->n)
                                      : Py_BuildValue("(LL)", (long long)p->m, (long long)p->n),
             *kw = NULL;
    if (size && (kw = Py_BuildValue("(ss)", "dtype", "device"))) {
        PyObject *call[3] = { size, p->c_dtype == DT_F32 ? S.f32 : S.bf16, devobj };
        out = PyObject_Vectorcall(S.empty, call, 1, kw);
    }
    Py_XDECREF(size);
    Py_XDECREF(kw);
    if (prev) {   /* torch's current stream back, whatever happened */
        PyObject *exc = take_exc();
        PyObject *r = PyObject_CallMethod(S.cuda, "set_stream", "O", prev);
        Py_DECREF(prev);
        if (r) {
            Py_DECREF(r);
        } else if (exc) {
            PyErr_Clear();   /* the first failure is the one to report */
        } else {
            Py_CLEAR(out);
        }
        restore_exc(exc);
    }
    PyObject *ptr = out ? call_method0(out, s_data_ptr) : NULL;
    if (ptr) {
        p->c.ptr = PyLong_AsUnsignedLongLong(ptr);
        p->has_c = 1;
        Py_DECREF(ptr);
    }
    if (!ptr || PyErr_Occurred())
        Py_CLEAR(out);
    return out;
}

/* Orders the call with the other streams its CAI operands name, which a
 * consumer must (CAI v3: the 'stream' entry is the stream the data is
 * ready on). Before the call (after == 0) `run` waits for the work enqueued
 * on each of them so far; after it, each of them waits for the call, so that
 * what their producers enqueue next (reading out, reusing an input's memory)
 * comes after it. Each wait is an event recorded on one stream and waited
 * for by the other. None while any of these streams is being captured into
 * a CUDA graph (an event recorded outside a capture cannot be waited for
 * inside it; the graph's launches are ordered where it is launched). */
static int join_streams(void *run, void *const *others, int n, int after)
{
    int status = 0;
    if (L.stream_is_capturing(run, &status) || status)
        return 0;
    for (int i = 0; i < n; i++)
        if (L.stream_is_capturing(others[i], &status) || status)
            return 0;
    for (int i = 0; i < n; i++) {
        void *from = after ? run : others[i], *to = after ? others[i] : run, *ev = NULL;
        const char *what = "cudaEventCreateWithFlags";
        int e = L.event_create(&ev, 2 /* cudaEventDisableTiming */);
        if (!e) {
            what = "cudaEventRecord";
            if (!(e = L.event_record(ev, from))) {
                what = "cudaStreamWaitEvent";
                e = L.stream_wait_event(to, ev, 0);
            }
            L.event_destroy(ev);   /* released once the wait no longer needs it */
        }
        if (e) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s failed with CUDA error %d (ordering stream 0x%lx after stream 0x%lx)", what,
                     e, (unsigned long)(uintptr_t)to, (unsigned long)(uintptr_t)from);
            raise_status(TK_ERR_CUDA, msg, "tilekit.gemm");
            return -1;
        }
    }
    return 0;
}

/* The stream p's call runs on and those it joins, as pointers; -1 with an
 * exception set when one is no pointer. */
static int call_streams(const plan *p, void **stream, void *joins[NOPS])
{
    *stream = NULL;
    if (p->stream && !(*stream = PyLong_AsVoidPtr(p->stream)) && PyErr_Occurred())
        return -1;
    for (int i = 0; i < p->njoins; i++)
        if (!(joins[i] = PyLong_AsVoidPtr(p->joins[i])) && PyErr_Occurred())
            return -1;
    return 0;
}

/* A DLPack operand was exported for one stream: the call must run on it
 * (ValueError and -1 when not). */
static int check_dlpack_streams(const plan *p, void *stream)
{
    const mat *dl[NOPS] = { &p->a, &p->b, &p->c, &p->offs, &p->err };
    void *const legacy = (void *)1;   /* cudaStreamLegacy: the NULL stream */
    for (int i = 0; i < NOPS; i++)
        if (dl[i]->dlpack && (dl[i]->dl_for ? dl[i]->dl_for : legacy) != (stream ? stream : legacy)) {
            PyErr_Format(PyExc_ValueError,
                         "%s: the DLPack object was exported for stream %p but the call runs on stream %p (the "
                         "__cuda_array_interface__ 'stream' of another argument); pass stream=",
                         dl[i]->name, dl[i]->dl_for, stream);
            return -1;
        }
    return 0;
}

/* After the library's call on h (status st; `where` names it for an
 * error): a failure raised, else the joined streams ordered after the
 * call; the device entered for it (prev) left either way. 0, or -1 with
 * an exception set. */
static int end_call(tk_status st, tk_handle h, const char *where, const plan *p, void *stream, void *const *joins,
                    int prev)
{
    if (st) {
        leave_device(prev);
        raise_status(st, L.last_error(h), where);
        return -1;
    }
    int joined = !p->njoins || !join_streams(stream, joins, p->njoins, 1);
    leave_device(prev);
    return joined ? 0 : -1;
}

PyDoc_STRVAR(gemm_doc,
"gemm($module, A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None,\n"
"     kernel=None, *, stream=None)\n--\n\n"
"out = alpha * op(A) @ op(B) + beta * out, with op(X) = X.T if trans_x.\n\n"
"A, B: bf16, 2-D, torch CUDA tensors, __cuda_array_interface__ objects or\n"
"DLPack producers of CUDA memory. out: M x N, fp32 or bf16; allocated when\n"
"None (torch.empty, row-major, on the stream the call runs on), which needs\n"
"beta == 0 and a torch input. out_dtype: torch.float32 (default) or\n"
"torch.bfloat16, or \"fp32\"/\"bf16\". kernel: a registry name (see kernels())\n"
"or None for auto-dispatch. stream: a cudaStream_t value or torch stream;\n"
"default: torch's current stream on the operands' device when any of them\n"
"is a torch tensor, else the CAI 'stream' entry (out's, then A's, then B's),\n"
"else the legacy default stream. Every other stream a CAI 'stream' entry\n"
"names is joined with the call: the call waits for the work enqueued on it\n"
"before, and work enqueued on it afterwards waits for the call. Returns out.\n"
"Asynchronous with respect to the host.");

/* p's product on the library: tk_gemm_ex, tk_gemm_batched or
 * tk_gemm_grouped by its form, the GIL released. */
static tk_status launch(const plan *p, tk_handle h, void *stream)
{
    const tk_gemm_problem q = problem(p);
    const int32_t *offs = p->has_offs ? (const int32_t *)(uintptr_t)p->offs.ptr : NULL;
    int32_t *err = p->has_err ? (int32_t *)(uintptr_t)p->err.ptr : NULL;
    tk_status st;
    Py_BEGIN_ALLOW_THREADS
    if (p->form == F_GEMM)
        st = L.gemm_ex(h, &q, p->kernel, stream);
    else if (p->form == F_BATCHED)
        st = L.gemm_batched(h, &q, p->count, p->stride_a, p->stride_b, p->stride_c, p->kernel, stream);
    else
        st = L.gemm_grouped(h, &q, (tk_group_kind)p->kind, (int)p->count, offs, p->stride_a, p->stride_b, p->stride_c,
                            err, p->kernel, stream);
    Py_END_ALLOW_THREADS
    return st;
}

/* gemm, gemm_batched and gemm_grouped once their arguments are bound (arg,
 * indexed by A_*): checked (make_plan), out allocated when None, the CAI
 * streams joined around the library's call (`where` names it). */
static PyObject *run_call(PyObject *const *arg, int form, const char *where)
{
    PyObject *out = NULL;
    plan p;
    void *stream, *joins[NOPS];
    int prev;
    if (make_plan(&p, arg, 0, form) || need_lib() || call_streams(&p, &stream, joins) || enter_device(&p, &prev))
        goto fail;
    if (p.has_c)
        out = Py_NewRef(arg[A_OUT]);
    else if (!(out = alloc_out(&p, arg[A_STREAM], stream))) {
        leave_device(prev);
        goto fail;
    }
    tk_handle h = get_handle(p.device >= 0 ? p.device : current_device());
    if (!h || check_dlpack_streams(&p, stream) || (p.njoins && join_streams(stream, joins, p.njoins, 0))) {
        leave_device(prev);
        goto fail;
    }
    if (end_call(launch(&p, h, stream), h, where, &p, stream, joins, prev))
        goto fail;
    plan_release(&p);
    return out;
fail:
    plan_release(&p);
    Py_XDECREF(out);
    return NULL;
}

/* py_NAME: the module function NAME with gemm's signature (A to kernel by
 * position or name, stream by name alone), run_call as `form`. */
#define GEMM_FUNCTION(name, form)                                                                               \
    static PyObject *py_##name(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)     \
    {                                                                                                            \
        (void)mod;                                                                                               \
        PyObject *arg[NARG];                                                                                     \
        return bind_args(#name, args, nargs, kwnames, 9, 10, arg) ? NULL : run_call(arg, form, "tilekit." #name); \
    }

GEMM_FUNCTION(gemm, F_GEMM)

PyDoc_STRVAR(gemm_batched_doc,
"gemm_batched($module, A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,\n"
"             out_dtype=None, kernel=None, *, stream=None)\n--\n\n"
"out[i] = alpha * op(A[i]) @ op(B[i]) + beta * out[i] for each of the count\n"
"matrices of 3-D stacks (tk_gemm_batched, TK_GROUP_BATCHED).\n\n"
"A: count x M x K (trans_a: count x K x M), B: count x K x N (trans_b:\n"
"count x N x K), bf16; out: count x M x N, fp32 or bf16, allocated when None\n"
"as gemm allocates it. Each stack's matrices are row- or column-contiguous\n"
"(transposed views are op T, never copied) at any batch stride: 0 makes one\n"
"matrix of A or B serve every product (an expanded tensor); out's matrices\n"
"may not overlap. Arguments, streams and errors as for gemm. Returns out.");

GEMM_FUNCTION(gemm_batched, F_BATCHED)

PyDoc_STRVAR(gemm_grouped_doc,
"gemm_grouped($module, A, B, offs, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False,\n"
"             out_dtype=None, kernel=None, *, stream=None, group_error=None)\n--\n\n"
"Many products of one call, split by int32 offsets in device memory that are\n"
"never read on the host (tk_gemm_grouped), the kind following from the ranks\n"
"of A and B (torch._grouped_mm's rule):\n\n"
"2-D A, 3-D B (TK_GROUP_ROWS): A is M x K, B G x K x N, out M x N; group g\n"
"  is rows offs[g-1] .. offs[g]-1 of A and out, times B[g].\n"
"2-D A, 2-D B (TK_GROUP_K): A is M x K, B K x N, out G x M x N; out[g]\n"
"  reduces k = offs[g-1] .. offs[g]-1 (an empty group: beta * out[g]).\n"
"3-D A, 3-D B (TK_GROUP_MASKED): as gemm_batched, product g on its first\n"
"  offs[g] rows (row counts, not cumulative).\n\n"
"offs: 1-D, contiguous, int32, one per group (G). Rows of out past\n"
"offs[G-1] (ROWS) are not written. group_error: None, or a 1-D int32 array\n"
"whose first element is set to 1 on the device when offsets are bad (never\n"
"cleared). The operands as for gemm_batched (shapes after trans_a/trans_b);\n"
"out's matrices are row-major. Returns out.");

static PyObject *py_gemm_grouped(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)mod;
    /* offs third: its own order of the names, each bound to its A_* slot */
    static const int slot[12] = { A_A,      A_B,  A_OFFS,        A_OUT,      A_ALPHA,  A_BETA,
                                  A_TA,     A_TB, A_OUT_DTYPE,   A_KERNEL,   A_STREAM, A_GROUP_ERROR };
    static const char *names[12];
    static const fast_sig sig = { "gemm_grouped", names, NULL, 3, 10, 12 };
    PyObject *bound[12], *arg[NARG] = { NULL };
    for (int i = 0; i < 12; i++)
        names[i] = arg_cnames[slot[i]];
    if (bind_sig(&sig, args, nargs, kwnames, bound))
        return NULL;
    for (int i = 0; i < 12; i++)
        arg[slot[i]] = bound[i];
    return run_call(arg, F_GROUPED, "tilekit.gemm_grouped");
}

PyDoc_STRVAR(plan_doc,
"plan($module, A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None,\n"
"     kernel=None, stream=None, offs=None, group_error=None, query=False, form='gemm')\n--\n\n"
"The checked call gemm() (query=True: supports(); form 'batched':\n"
"gemm_batched(), 'grouped': gemm_grouped()) would make, as a Plan; raises\n"
"what they raise for their arguments. Loads nothing (for tests).");

static PyStructSequence_Field plan_fields[] = {
    { "m", NULL }, { "n", NULL }, { "k", NULL }, { "layout", NULL }, { "op_a", NULL }, { "op_b", NULL },
    { "lda", NULL }, { "ldb", NULL }, { "ldc", NULL }, { "c_dtype", NULL }, { "alpha", NULL }, { "beta", NULL },
    { "kernel", NULL }, { "device", NULL }, { "stream", NULL }, { "joins", NULL }, { "form", NULL },
    { "kind", NULL }, { "count", NULL }, { "stride_a", NULL }, { "stride_b", NULL }, { "stride_c", NULL },
    { "offs_ptr", NULL }, { "error_ptr", NULL }, { NULL, NULL },
};
#define PLAN_FIELDS 24
static PyStructSequence_Desc plan_desc = { "tilekit._tilekit.Plan", "A checked call.", plan_fields, PLAN_FIELDS };

static PyObject *py_plan(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)mod;
    PyObject *arg[NARG];
    plan p;
    if (bind_args("plan", args, nargs, kwnames, NARG, NARG, arg))
        return NULL;
    int query = arg[A_QUERY] ? PyObject_IsTrue(arg[A_QUERY]) : 0;
    if (query < 0)
        return NULL;
    int form = -1;
    PyObject *f = arg[A_FORM];
    for (int i = 0; i < 3 && form < 0; i++)
        if (!f || f == Py_None || (PyUnicode_Check(f) && PyUnicode_CompareWithASCIIString(f, form_name[i]) == 0))
            form = i;
    if (form < 0) {
        PyErr_Format(PyExc_ValueError, "form: %R is not 'gemm', 'batched' or 'grouped'", f);
        return NULL;
    }
    if (make_plan(&p, arg, query, form)) {
        plan_release(&p);
        return NULL;
    }
    PyObject *r = PyStructSequence_New(S.plan_type);
    if (r) {
        PyObject *joins = PyTuple_New(p.njoins);
        for (int i = 0; joins && i < p.njoins; i++)
            PyTuple_SET_ITEM(joins, i, Py_NewRef(p.joins[i]));
        PyObject *v[PLAN_FIELDS] = {
            PyLong_FromLongLong(p.m), PyLong_FromLongLong(p.n), PyLong_FromLongLong(p.k), PyLong_FromLong(p.layout),
            PyLong_FromLong(p.op_a), PyLong_FromLong(p.op_b), PyLong_FromLongLong(p.lda), PyLong_FromLongLong(p.ldb),
            PyLong_FromLongLong(p.ldc), PyUnicode_FromString(dt_name[p.c_dtype]), PyFloat_FromDouble(p.alpha),
            PyFloat_FromDouble(p.beta),
            p.kernel ? PyBytes_FromStringAndSize(p.kernel, p.kernel_len) : Py_NewRef(Py_None),
            p.device >= 0 ? PyLong_FromLong(p.device) : Py_NewRef(Py_None),
            Py_NewRef(p.stream ? p.stream : Py_None), joins, PyUnicode_FromString(form_name[form]),
            PyLong_FromLong(p.kind), PyLong_FromLongLong(p.count), PyLong_FromLongLong(p.stride_a),
            PyLong_FromLongLong(p.stride_b), PyLong_FromLongLong(p.stride_c),
            p.has_offs && p.offs.ptr ? PyLong_FromUnsignedLongLong(p.offs.ptr) : Py_NewRef(Py_None),
            p.has_err && p.err.ptr ? PyLong_FromUnsignedLongLong(p.err.ptr) : Py_NewRef(Py_None),
        };
        int ok = 1;
        for (int i = 0; i < PLAN_FIELDS; i++) {
            ok &= v[i] != NULL;
            PyStructSequence_SetItem(r, i, v[i] ? v[i] : Py_NewRef(Py_None));
        }
        if (!ok)
            Py_CLEAR(r);
    }
    plan_release(&p);
    return r;
}

/* The queries' shared frame: arguments bound and checked, the device
 * entered, the handle found; then answer(h, plan, problem) builds the
 * result (NULL with an exception set). */
typedef PyObject *(*query_answer)(tk_handle h, const plan *p, const tk_gemm_problem *q);

static PyObject *run_query(const char *fn, int nargs_max, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames, query_answer answer)
{
    PyObject *arg[NARG], *r = NULL;
    plan p;
    int prev;
    if (bind_args(fn, args, nargs, kwnames, nargs_max, nargs_max, arg))
        return NULL;
    if (make_plan(&p, arg, 1, F_GEMM) || need_lib() || enter_device(&p, &prev))
        goto done;
    tk_handle h = get_handle(p.device >= 0 ? p.device : current_device());
    if (h) {
        tk_gemm_problem q = problem(&p);
        r = answer(h, &p, &q);
    }
    leave_device(prev);
done:
    plan_release(&p);
    return r;
}

/* The gemm arguments of every query's text signature, less kernel=None
 * (the queries that take a kernel name add it). */
#define QUERY_ARGS "A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None"

/* py_NAME: the module function NAME, run_query with NAME_answer; nargs_max
 * is 9 with kernel=, 8 without. */
#define QUERY_FUNCTION(name, nargs_max)                                                                        \
    static PyObject *py_##name(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)     \
    {                                                                                                            \
        (void)mod;                                                                                               \
        return run_query(#name, nargs_max, args, nargs, kwnames, name##_answer);                                 \
    }

PyDoc_STRVAR(supports_doc,
"supports($module, " QUERY_ARGS ",\n"
"         kernel=None)\n--\n\n"
"(status, reason): whether `kernel` (None: auto-dispatch) can run this gemm\n"
"on the device, launching nothing; tilekit.supports wraps it.");

static PyObject *supports_answer(tk_handle h, const plan *p, const tk_gemm_problem *q)
{
    tk_status st = L.kernel_supports(h, p->kernel, q);
    if (st == TK_ERR_INVALID_VALUE) {   /* a bad argument (unknown kernel, ...) is an error, not a refusal */
        raise_status(st, L.last_error(h), "tilekit.supports");
        return NULL;
    }
    return Py_BuildValue("(is)", (int)st, st ? L.last_error(h) : "");
}

QUERY_FUNCTION(supports, 9)

PyDoc_STRVAR(select_kernel_doc,
"select_kernel($module, " QUERY_ARGS ")\n--\n\n"
"The kernel name auto-dispatch would run for this gemm on the current device;\n"
"raises the library's error when none can.");

static PyObject *select_kernel_answer(tk_handle h, const plan *p, const tk_gemm_problem *q)
{
    (void)p;
    /* tk_kernel_supports(NULL kernel) runs the same choice and returns its status */
    tk_status st = L.kernel_supports(h, NULL, q);
    const char *name = st ? NULL : L.select_kernel(h, q);
    if (st || !name) {
        raise_status(st ? st : TK_ERR_NOT_SUPPORTED, L.last_error(h), "tilekit.select_kernel");
        return NULL;
    }
    return PyUnicode_FromString(name);
}

QUERY_FUNCTION(select_kernel, 8)

static PyObject *py_kernels(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    if (need_lib())
        return NULL;
    int n = L.kernel_count();
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < n; i++) {
        tk_kernel_props k;
        tk_status st = L.kernel_get(i, &k);
        if (st) {
            raise_status(st, L.last_error(NULL), "tk_kernel_get");
            Py_CLEAR(list);
            break;
        }
        PyObject *d = Py_BuildValue("{s:s,s:s,s:i,s:i,s:i}", "name", k.name, "description", k.description, "min_sm",
                                    k.min_sm, "bm", k.bm, "bn", k.bn);
        if (!d || PyList_Append(list, d))
            Py_CLEAR(list);
        Py_XDECREF(d);
    }
    return list;
}

static PyObject *py_version(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return need_lib() ? NULL : PyLong_FromLong(L.version());
}

static PyObject *py_current_device(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return need_lib() ? NULL : PyLong_FromLong(current_device());
}

/* bind(path): dlopen()s libtilekit and finds its functions; OSError with
 * dlerror()'s message (what ctypes.CDLL would say) when it cannot. Binding
 * once: later calls return at once. */
static PyObject *py_bind(PyObject *mod, PyObject *path)
{
    (void)mod;
    if (L.dl)
        Py_RETURN_NONE;
    PyObject *bytes = NULL;
    if (!PyUnicode_FSConverter(path, &bytes))
        return NULL;
    void *dl = dlopen(PyBytes_AS_STRING(bytes), RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *e = dlerror();
        PyErr_SetString(PyExc_OSError, e ? e : "dlopen failed");
        Py_DECREF(bytes);
        return NULL;
    }
    static const struct { const char *name; size_t off; } syms[] = {
#define SYM(n, m) { #n, offsetof(__typeof__(L), m) }
        SYM(tk_version, version),           SYM(tk_create, create),
        SYM(tk_last_error, last_error),     SYM(tk_gemm_ex, gemm_ex),
        SYM(tk_gemm_batched, gemm_batched), SYM(tk_gemm_grouped, gemm_grouped),
        SYM(tk_kernel_count, kernel_count), SYM(tk_kernel_get, kernel_get),
        SYM(tk_kernel_supports, kernel_supports), SYM(tk_select_kernel, select_kernel),
        SYM(tk_destroy, destroy),
        SYM(tk_set_workspace, set_workspace), SYM(tk_set_workspace_limit, set_workspace_limit),
        SYM(tk_workspace_size, workspace_size), SYM(tk_workspace_release, workspace_release),
        SYM(tk_set_split_k, set_split_k),   SYM(tk_get_handle_info, get_handle_info),
        SYM(tk_candidates, candidates),     SYM(tk_plan_create, plan_create),
        SYM(tk_plan_run, plan_run),         SYM(tk_plan_kernel, plan_kernel),
        SYM(tk_plan_destroy, plan_destroy), SYM(tk_last_cuda_error, last_cuda_error),
        SYM(tk_get_build_info, get_build_info), SYM(tk_gemm_run, gemm_run),
        SYM(tk_quantize_fp8, quantize_fp8),
        SYM(cudaGetDevice, get_device),     SYM(cudaSetDevice, set_device),
        SYM(cudaEventCreateWithFlags, event_create), SYM(cudaEventRecord, event_record),
        SYM(cudaStreamWaitEvent, stream_wait_event), SYM(cudaEventDestroy, event_destroy),
        SYM(cudaStreamIsCapturing, stream_is_capturing),
#undef SYM
    };
    __typeof__(L) l = { .dl = dl };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *f = dlsym(dl, syms[i].name);
        if (!f) {
            PyErr_Format(PyExc_OSError, "%s: undefined symbol %s", PyBytes_AS_STRING(bytes), syms[i].name);
            dlclose(dl);
            Py_DECREF(bytes);
            return NULL;
        }
        memcpy((char *)&l + syms[i].off, &f, sizeof f);
    }
    Py_DECREF(bytes);
    L = l;
    Py_RETURN_NONE;
}

static PyObject *py_setup(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *loader, *error_for;
    if (!PyArg_ParseTuple(args, "OO:setup", &loader, &error_for))
        return NULL;
    Py_XSETREF(S.loader, Py_NewRef(loader));
    Py_XSETREF(S.error_for, Py_NewRef(error_for));
    Py_RETURN_NONE;
}

/* ---- issue 37: the thread's handle settings, candidates, plans, errors,
 * build info (the fallback's functions of the same names) ---- */

static PyObject *utf8(const char *s)
{
    return PyUnicode_DecodeUTF8(s ? s : "", s ? (Py_ssize_t)strlen(s) : 0, "replace");
}

/* 1 when the library's call on h failed (st), its error raised as where's;
 * 0 when it succeeded. */
static int failed(tk_status st, tk_handle h, const char *where)
{
    if (st)
        raise_status(st, L.last_error(h), where);
    return st != TK_SUCCESS;
}

static PyObject *py_build_info(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    if (need_lib())
        return NULL;
    tk_build_info b = TK_BUILD_INFO_INIT;
    tk_status st = L.get_build_info(&b);
    if (failed(st, NULL, "tilekit.build_info"))
        return NULL;
    return Py_BuildValue("{s:i,s:N,s:N,s:i,s:i,s:i,s:i,s:i}", "version", b.version, "version_string",
                         utf8(b.version_string), "archs", utf8(b.archs), "cuda_runtime_built", b.cuda_runtime_built,
                         "cuda_runtime_loaded", b.cuda_runtime_loaded, "cuda_driver", b.cuda_driver, "cublas_built",
                         b.cublas_built, "cublas_loaded", b.cublas_loaded);
}

/* The thread's handle for `device` (-1: none known), the library bound. */
static tk_handle device_handle(int device)
{
    return need_lib() ? NULL : get_handle(device);
}

static PyObject *py_handle_info(PyObject *mod, PyObject *args)
{
    (void)mod;
    int device;
    if (!PyArg_ParseTuple(args, "i:handle_info", &device))
        return NULL;
    tk_handle h = device_handle(device);
    if (!h)
        return NULL;
    tk_handle_info i = TK_HANDLE_INFO_INIT;
    tk_status st = L.get_handle_info(h, &i);
    if (failed(st, h, "tilekit.handle_info"))
        return NULL;
    return Py_BuildValue("{s:i,s:i,s:N,s:N,s:N,s:N,s:N}", "device", i.device, "sm", i.sm, "workspace",
                         i.workspace ? PyLong_FromVoidPtr(i.workspace) : Py_NewRef(Py_None), "workspace_bytes",
                         PyLong_FromSize_t(i.workspace_bytes), "workspace_limit",
                         i.workspace_limit == TK_WORKSPACE_UNLIMITED ? Py_NewRef(Py_None)
                                                                     : PyLong_FromSize_t(i.workspace_limit),
                         "workspace_held", PyLong_FromSize_t(i.workspace_held), "split_k",
                         PyBool_FromLong(i.split_k == TK_SPLIT_K_AUTO));
}

/* A pointer argument: None or 0 is NULL, else an int. */
static int ptr_arg(PyObject *v, void **out)
{
    *out = NULL;
    if (v == Py_None)
        return 0;
    *out = PyLong_AsVoidPtr(v);
    return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

static PyObject *settled(tk_status st, tk_handle h, const char *where)
{
    if (failed(st, h, where))
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_set_workspace(PyObject *mod, PyObject *args)
{
    (void)mod;
    int device;
    PyObject *ptr, *nbytes;
    void *p;
    if (!PyArg_ParseTuple(args, "iOO:set_workspace", &device, &ptr, &nbytes) || ptr_arg(ptr, &p))
        return NULL;
    size_t n = PyLong_AsSize_t(nbytes);
    if (n == (size_t)-1 && PyErr_Occurred())
        return NULL;
    tk_handle h = device_handle(device);
    return h ? settled(L.set_workspace(h, p, n), h, "tilekit.set_workspace") : NULL;
}

static PyObject *py_set_workspace_limit(PyObject *mod, PyObject *args)
{
    (void)mod;
    int device;
    PyObject *nbytes;
    if (!PyArg_ParseTuple(args, "iO:set_workspace_limit", &device, &nbytes))
        return NULL;
    size_t n = TK_WORKSPACE_UNLIMITED;
    if (nbytes != Py_None && (n = PyLong_AsSize_t(nbytes)) == (size_t)-1 && PyErr_Occurred())
        return NULL;
    tk_handle h = device_handle(device);
    return h ? settled(L.set_workspace_limit(h, n), h, "tilekit.set_workspace_limit") : NULL;
}

static PyObject *py_set_split_k(PyObject *mod, PyObject *args)
{
    (void)mod;
    int device, allowed;
    if (!PyArg_ParseTuple(args, "ip:set_split_k", &device, &allowed))
        return NULL;
    tk_handle h = device_handle(device);
    return h ? settled(L.set_split_k(h, allowed ? TK_SPLIT_K_AUTO : TK_SPLIT_K_NEVER), h, "tilekit.set_split_k")
             : NULL;
}

static PyObject *py_release_workspaces(PyObject *mod, PyObject *args)
{
    (void)mod;
    int device, prev;
    PyObject *stream;
    void *s;
    if (!PyArg_ParseTuple(args, "iO:release_workspaces", &device, &stream) || ptr_arg(stream, &s))
        return NULL;
    tk_handle h = device_handle(device);
    if (!h || enter_dev(device, &prev))
        return NULL;
    tk_status st = L.workspace_release(h, s);
    leave_device(prev);
    return settled(st, h, "tilekit.release_workspaces");
}

static PyObject *py_last_cuda_error(PyObject *mod, PyObject *args)
{
    (void)mod;
    PyObject *device;
    if (!PyArg_ParseTuple(args, "O:last_cuda_error", &device) || need_lib())
        return NULL;
    tk_handle h = NULL;
    if (device != Py_None) {
        long d = PyLong_AsLong(device);
        if ((d == -1 && PyErr_Occurred()) || !(h = get_handle((int)d)))
            return NULL;
    }
    tk_cuda_error e = TK_CUDA_ERROR_INIT;
    tk_status st = L.last_cuda_error(h, &e);
    if (failed(st, h, "tilekit.last_cuda_error"))
        return NULL;
    return Py_BuildValue("{s:i,s:N,s:i,s:N}", "cuda_error", e.cuda_error, "cuda_name", utf8(e.cuda_name),
                         "cublas_status", e.cublas_status, "cublas_name", utf8(e.cublas_name));
}

PyDoc_STRVAR(candidates_doc,
"candidates($module, " QUERY_ARGS ")\n--\n\n"
"tk_candidates for this gemm: a list of dicts (name, rank, status, est_us,\n"
"workspace_bytes, copies), best first.");

static PyObject *candidates_answer(tk_handle h, const plan *p, const tk_gemm_problem *q)
{
    (void)p;
    const int cap = L.kernel_count() + 1;   /* every kernel, and auto-dispatch's copy route */
    tk_candidate *arr = PyMem_Calloc((size_t)cap, sizeof *arr);
    if (!arr)
        return PyErr_NoMemory();
    arr[0].size = sizeof arr[0];
    int n = 0;
    tk_status st = L.candidates(h, q, arr, cap, &n);
    PyObject *list = NULL;
    if (!failed(st, h, "tilekit.candidates") && (list = PyList_New(0))) {
        for (int i = 0; i < n && i < cap; i++) {
            const tk_candidate *c = &arr[i];
            PyObject *d = Py_BuildValue("{s:N,s:i,s:i,s:d,s:N,s:I}", "name", utf8(c->name), "rank", c->rank, "status",
                                        (int)c->status, "est_us", c->est_us, "workspace_bytes",
                                        PyLong_FromSize_t(c->workspace_bytes), "copies", c->copies);
            if (!d || PyList_Append(list, d)) {
                Py_XDECREF(d);
                Py_CLEAR(list);
                break;
            }
            Py_DECREF(d);
        }
    }
    PyMem_Free(arr);
    return list;
}

QUERY_FUNCTION(candidates, 8)

PyDoc_STRVAR(workspace_size_doc,
"workspace_size($module, " QUERY_ARGS ",\n"
"               kernel=None)\n--\n\n"
"tk_workspace_size for this gemm, in bytes.");

static PyObject *workspace_size_answer(tk_handle h, const plan *p, const tk_gemm_problem *q)
{
    size_t n = 0;
    tk_status st = L.workspace_size(h, q, p->kernel, &n);
    if (failed(st, h, "tilekit.workspace_size"))
        return NULL;
    return PyLong_FromSize_t(n);
}

QUERY_FUNCTION(workspace_size, 9)

/* ---- GemmPlan: the fallback's class of that name ---- */

typedef struct gemm_plan {
    PyObject_HEAD
    tk_plan plan;                /* NULL once closed */
    tk_handle h;                 /* the thread's handle it was made with */
    unsigned long owner;         /* PyThread_get_thread_ident() of that thread */
    int device;                  /* the handle's device; -1: none */
    int64_t m, n, k, lda, ldb, ldc;
    int layout, op_a, op_b, c_dtype, ta, tb;
    PyObject *alpha, *beta;      /* floats, as make_plan reads them */
    PyObject *kernel;            /* str: tk_plan_kernel's */
} gemm_plan;

static PyTypeObject gemm_plan_type;

/* _fallback._shape_text of a problem's fixed part. */
static PyObject *shape_text(int64_t m, int64_t n, int64_t k, int layout, int op_a, int op_b, int64_t lda, int64_t ldb,
                            int64_t ldc, int c_dtype)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%lld x %lld x %lld, %s-major, op_a %c, op_b %c, lda %lld, ldb %lld, ldc %lld, %s C",
             (long long)m, (long long)n, (long long)k, layout == TK_ROW_MAJOR ? "row" : "column", "NT"[op_a & 1],
             "NT"[op_b & 1], (long long)lda, (long long)ldb, (long long)ldc, dt_name[c_dtype]);
    return PyUnicode_FromString(buf);
}

static PyObject *plan_shape(const gemm_plan *g)
{
    return shape_text(g->m, g->n, g->k, g->layout, g->op_a, g->op_b, g->lda, g->ldb, g->ldc, g->c_dtype);
}

static void gemm_plan_close_now(gemm_plan *g)
{
    if (g->plan && L.plan_destroy)
        L.plan_destroy(g->plan);
    g->plan = NULL;
}

static void gemm_plan_dealloc(PyObject *o)
{
    gemm_plan *g = (gemm_plan *)o;
    gemm_plan_close_now(g);
    Py_CLEAR(g->alpha);
    Py_CLEAR(g->beta);
    Py_CLEAR(g->kernel);
    PyObject_Free(o);
}

/* run(A, B, out, stream=None): A, B and out required, positional or by name. */
static int plan_run_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject *out[4])
{
    static const char *const names[4] = { "A", "B", "out", "stream" };
    static const fast_sig sig = { "run", names, NULL, 3, 4, 4 };
    return bind_sig(&sig, args, nargs, kwnames, out);
}

static PyObject *gemm_plan_run(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    gemm_plan *g = (gemm_plan *)self;
    PyObject *a4[4], *arg[NARG];
    if (plan_run_args(args, nargs, kwnames, a4))
        return NULL;
    if (!g->plan) {
        PyErr_SetString(PyExc_ValueError, "plan: it was closed");
        return NULL;
    }
    if (PyThread_get_thread_ident() != g->owner) {
        PyErr_SetString(PyExc_RuntimeError, "plan: it was made in another thread, and runs on that thread's handle only");
        return NULL;
    }
    if (a4[2] == Py_None) {
        PyErr_SetString(PyExc_TypeError, "out: required (a plan runs into an out of its shape)");
        return NULL;
    }
    for (int i = 0; i < NARG; i++)
        arg[i] = NULL;
    arg[A_A] = a4[0];
    arg[A_B] = a4[1];
    arg[A_OUT] = a4[2];
    arg[A_ALPHA] = g->alpha;
    arg[A_BETA] = g->beta;
    arg[A_TA] = g->ta ? Py_True : Py_False;
    arg[A_TB] = g->tb ? Py_True : Py_False;
    arg[A_STREAM] = a4[3];
    plan p;
    if (make_plan(&p, arg, 0, F_GEMM))
        goto fail;
    if (p.m != g->m || p.n != g->n || p.k != g->k || p.layout != g->layout || p.op_a != g->op_a || p.op_b != g->op_b ||
        p.lda != g->lda || p.ldb != g->ldb || p.ldc != g->ldc || p.c_dtype != g->c_dtype) {
        PyObject *got = shape_text(p.m, p.n, p.k, p.layout, p.op_a, p.op_b, p.lda, p.ldb, p.ldc, p.c_dtype);
        PyObject *want = plan_shape(g);
        if (got && want)
            PyErr_Format(PyExc_ValueError, "plan: A, B and out make %U; the plan is for %U", got, want);
        Py_XDECREF(got);
        Py_XDECREF(want);
        goto fail;
    }
    if (p.device >= 0 && g->device >= 0 && p.device != g->device) {
        PyErr_Format(PyExc_ValueError, "plan: A, B and out are on cuda:%d, the plan's handle on cuda:%d", p.device,
                     g->device);
        goto fail;
    }
    void *stream, *joins[NOPS];
    int prev;
    if (call_streams(&p, &stream, joins) || check_dlpack_streams(&p, stream) || enter_device(&p, &prev))
        goto fail;
    if (p.njoins && join_streams(stream, joins, p.njoins, 0)) {
        leave_device(prev);
        goto fail;
    }
    tk_status st;
    const void *pa = (const void *)(uintptr_t)p.a.ptr, *pb = (const void *)(uintptr_t)p.b.ptr;
    void *pc = (void *)(uintptr_t)p.c.ptr;
    Py_BEGIN_ALLOW_THREADS
    st = L.plan_run(g->h, g->plan, pa, pb, pc, stream);
    Py_END_ALLOW_THREADS
    if (end_call(st, g->h, "tilekit.Plan.run", &p, stream, joins, prev))
        goto fail;
    plan_release(&p);
    return Py_NewRef(a4[2]);
fail:
    plan_release(&p);
    return NULL;
}

static PyObject *gemm_plan_call(PyObject *self, PyObject *args, PyObject *kw)
{
    PyObject *run = PyObject_GetAttrString(self, "run");
    PyObject *r = run ? PyObject_Call(run, args, kw) : NULL;
    Py_XDECREF(run);
    return r;
}

static PyObject *gemm_plan_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    gemm_plan_close_now((gemm_plan *)self);
    Py_RETURN_NONE;
}

static PyObject *gemm_plan_repr(PyObject *self)
{
    gemm_plan *g = (gemm_plan *)self;
    PyObject *shape = plan_shape(g);
    PyObject *r = shape ? PyUnicode_FromFormat("<tilekit plan %U, kernel %R%s>", shape, g->kernel,
                                               g->plan ? "" : ", closed")
                        : NULL;
    Py_XDECREF(shape);
    return r;
}

static PyMethodDef gemm_plan_methods[] = {
    { "run", (PyCFunction)(void (*)(void))gemm_plan_run, METH_FASTCALL | METH_KEYWORDS,
      "run(A, B, out, stream=None): out = alpha * op(A) @ op(B) + beta * out with the plan's shape, on `stream`\n"
      "(as gemm chooses it); returns out." },
    { "close", gemm_plan_close, METH_NOARGS, "Frees the plan (host memory); run() raises afterwards." },
    { NULL, NULL, 0, NULL },
};

static PyMemberDef gemm_plan_members[] = {
    { "kernel", T_OBJECT_EX, offsetof(gemm_plan, kernel), READONLY, "the kernel it runs (\"\" for none)" },
    { NULL, 0, 0, 0, NULL },
};

static PyTypeObject gemm_plan_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilekit._tilekit.GemmPlan",
    .tp_basicsize = sizeof(gemm_plan),
    .tp_dealloc = gemm_plan_dealloc,
    .tp_repr = gemm_plan_repr,
    .tp_call = gemm_plan_call,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A plan (tk_plan) for one gemm shape: run(A, B, out, stream=None), or call it; .kernel; close().\n"
              "It runs on the handle of the thread that made it, in that thread only.",
    .tp_methods = gemm_plan_methods,
    .tp_members = gemm_plan_members,
};

PyDoc_STRVAR(plan_create_doc,
"plan_create($module, " QUERY_ARGS ",\n"
"            kernel=None)\n--\n\n"
"tk_plan_create for this gemm (out may be None: row-major of out_dtype), as a GemmPlan.");

static PyObject *plan_create_answer(tk_handle h, const plan *p, const tk_gemm_problem *q)
{
    tk_plan tp = NULL;
    tk_status st = L.plan_create(h, q, p->kernel, &tp);
    if (failed(st, h, "tilekit.plan"))
        return NULL;
    gemm_plan *g = PyObject_New(gemm_plan, &gemm_plan_type);
    if (!g) {
        L.plan_destroy(tp);
        return NULL;
    }
    g->plan = tp;
    g->h = h;
    g->owner = PyThread_get_thread_ident();
    g->device = p->device >= 0 ? p->device : current_device();
    g->m = p->m;
    g->n = p->n;
    g->k = p->k;
    g->lda = p->lda;
    g->ldb = p->ldb;
    g->ldc = p->ldc;
    g->layout = p->layout;
    g->op_a = p->op_a;
    g->op_b = p->op_b;
    g->c_dtype = p->c_dtype;
    g->ta = p->ta;
    g->tb = p->tb;
    g->alpha = PyFloat_FromDouble(p->alpha);
    g->beta = PyFloat_FromDouble(p->beta);
    g->kernel = utf8(L.plan_kernel(tp));
    if (!g->alpha || !g->beta || !g->kernel)
        Py_CLEAR(g);
    return (PyObject *)g;
}

QUERY_FUNCTION(plan_create, 9)

/* ---- issue 39: a descriptor with an epilogue ---- */

PyDoc_STRVAR(gemm_run_doc,
"gemm_run($module, device, stream, kernel, fields)\n--\n\n"
"tk_gemm_run of a tk_gemm_desc (TK_GEMM_DESC_INIT: size = sizeof) holding\n"
"fields: the problem's 15 values (layout, op_a, op_b, m, n, k, alpha, beta,\n"
"a, lda, b, ldb, c, ldc, c_type), then the epilogue's 11 (epilogue,\n"
"activation, bias, bias_type, bias_along, b_up, d, ldd, aux, ldaux,\n"
"bias_grad), pointers as ints, as tilekit/_epilogue.py checked them, and\n"
"optionally the FP8 fields' 7 (a_fp8, b_fp8, scale_mode, scale_a, scale_b,\n"
"ld_scale_a, ld_scale_b: tilekit/_fp8.py's), and after those optionally\n"
"version 5's 2 (stride_scale_a, stride_scale_b) and the group fields' 7\n"
"(group_kind, count, stride_a, stride_b, stride_c, offs, group_error:\n"
"tilekit.scaled_grouped_mm's) (the fallback's gemm_run takes the same).\n"
"On the thread's handle for device\n"
"(-1: the current one), made current; kernel: bytes or None; stream: a\n"
"cudaStream_t value or None. The library's refusal raises as\n"
"tilekit.gemm_epilogue's.");

/* One descriptor's call on a handle: tk_gemm_run's or tk_quantize_fp8's. */
static tk_status call_gemm_run(tk_handle h, const void *d, const char *kernel, void *stream)
{
    return L.gemm_run(h, (const tk_gemm_desc *)d, kernel, stream);
}

static tk_status call_quantize(tk_handle h, const void *d, const char *kernel, void *stream)
{
    (void)kernel;
    return L.quantize_fp8(h, (const tk_quantize_desc *)d, stream);
}

/* call(h, d, kernel, stream) on the thread's handle for device (-1: the
 * current one), made current, the GIL released; a refusal raised as
 * where's. 0, or -1 with an exception set. */
static int run_on_handle(int device, tk_status (*call)(tk_handle, const void *, const char *, void *), const void *d,
                    const char *kernel, void *stream, const char *where)
{
    int prev;
    if (need_lib() || enter_dev(device, &prev))
        return -1;
    tk_handle h = get_handle(device >= 0 ? device : current_device());
    if (!h) {
        leave_device(prev);
        return -1;
    }
    tk_status st;
    Py_BEGIN_ALLOW_THREADS
    st = call(h, d, kernel, stream);
    Py_END_ALLOW_THREADS
    leave_device(prev);
    return failed(st, h, where) ? -1 : 0;
}

/* tk_gemm_run of d, refusals raised as tilekit.gemm_epilogue's. */
static int run_desc(int device, const tk_gemm_desc *d, const char *kernel, void *stream)
{
    return run_on_handle(device, call_gemm_run, d, kernel, stream, "tilekit.gemm_epilogue");
}

/* The stream and kernel arguments of gemm_run and quantize_run: a
 * cudaStream_t value or None, bytes or None. 0, or -1 with an exception set. */
static int stream_kernel_args(PyObject *stream_arg, PyObject *kernel_arg, void **stream, const char **kernel)
{
    *stream = NULL;
    if (stream_arg != Py_None && !(*stream = PyLong_AsVoidPtr(stream_arg)) && PyErr_Occurred())
        return -1;
    *kernel = NULL;
    if (kernel_arg != Py_None && !(*kernel = PyBytes_AsString(kernel_arg)))
        return -1;
    return 0;
}

static PyObject *py_gemm_run(PyObject *mod, PyObject *args)
{
    (void)mod;
    int device, layout, op_a, op_b, c_type, epilogue, activation, bias_type, bias_along;
    int a_fp8 = 0, b_fp8 = 0, scale_mode = 0, group_kind = 0, count = 0;
    PyObject *stream_arg, *kernel_arg, *fields;
    unsigned long long a, b, c, bias, b_up, dp, aux, bias_grad, scale_a = 0, scale_b = 0, offs = 0, group_error = 0;
    long long m, n, k, lda, ldb, ldc, ldd, ldaux, ld_scale_a = 0, ld_scale_b = 0;
    long long stride_scale_a = 0, stride_scale_b = 0, stride_a = 0, stride_b = 0, stride_c = 0;
    float alpha, beta;
    if (!PyArg_ParseTuple(args, "iOOO!:gemm_run", &device, &stream_arg, &kernel_arg, &PyTuple_Type, &fields))
        return NULL;
    /* the problem's 15 and the epilogue's 11 fields, then optionally the FP8 fields' 7 (version 4), and after
     * them optionally version 5's 2 and the group fields' 7 (version 2): many FP8 products */
    const Py_ssize_t nf = PyTuple_GET_SIZE(fields);
    const int fp8 = nf >= 33, grouped = nf == 42;
    if (!PyArg_ParseTuple(fields,
                          grouped ? "iiiLLLffKLKLKLiiiKiiKKLKLKiiiKKLLLLiiLLLKK:gemm_run"
                          : fp8   ? "iiiLLLffKLKLKLiiiKiiKKLKLKiiiKKLL:gemm_run"
                                  : "iiiLLLffKLKLKLiiiKiiKKLKLK:gemm_run",
                          &layout, &op_a, &op_b, &m, &n, &k, &alpha, &beta, &a, &lda, &b, &ldb, &c, &ldc, &c_type,
                          &epilogue, &activation, &bias, &bias_type, &bias_along, &b_up, &dp, &ldd, &aux, &ldaux,
                          &bias_grad, &a_fp8, &b_fp8, &scale_mode, &scale_a, &scale_b, &ld_scale_a, &ld_scale_b,
                          &stride_scale_a, &stride_scale_b, &group_kind, &count, &stride_a, &stride_b, &stride_c,
                          &offs, &group_error))
        return NULL;
    void *stream;
    const char *kernel;
    if (stream_kernel_args(stream_arg, kernel_arg, &stream, &kernel))
        return NULL;
    tk_gemm_desc d = TK_GEMM_DESC_INIT;
    d.problem = (tk_gemm_problem){
        .layout = (tk_layout)layout, .op_a = (tk_op)op_a, .op_b = (tk_op)op_b, .m = m, .n = n, .k = k,
        .alpha = alpha, .beta = beta, .a = (const void *)(uintptr_t)a, .lda = lda,
        .b = (const void *)(uintptr_t)b, .ldb = ldb, .c = (void *)(uintptr_t)c, .ldc = ldc,
        .c_type = (tk_dtype)c_type,
    };
    d.epilogue = epilogue;
    d.activation = activation;
    d.bias = (const void *)(uintptr_t)bias;
    d.bias_type = bias_type;
    d.bias_along = bias_along;
    d.b_up = (const void *)(uintptr_t)b_up;
    d.d = (void *)(uintptr_t)dp;
    d.ldd = ldd;
    d.aux = (void *)(uintptr_t)aux;
    d.ldaux = ldaux;
    d.bias_grad = (float *)(uintptr_t)bias_grad;
    d.a_fp8 = a_fp8;
    d.b_fp8 = b_fp8;
    d.scale_mode = scale_mode;
    d.scale_a = (const float *)(uintptr_t)scale_a;
    d.scale_b = (const float *)(uintptr_t)scale_b;
    d.ld_scale_a = ld_scale_a;
    d.ld_scale_b = ld_scale_b;
    d.stride_scale_a = stride_scale_a;
    d.stride_scale_b = stride_scale_b;
    d.group_kind = group_kind;
    d.count = count;
    d.stride_a = stride_a;
    d.stride_b = stride_b;
    d.stride_c = stride_c;
    d.offs = (const int32_t *)(uintptr_t)offs;
    d.group_error = (int32_t *)(uintptr_t)group_error;
    if (run_on_handle(device, call_gemm_run, &d, kernel, stream,
                      grouped ? "tilekit.scaled_grouped_mm" : fp8 ? "tilekit.scaled_mm" : "tilekit.gemm_epilogue"))
        return NULL;
    Py_RETURN_NONE;
}

/* ---- issue 40: the FP8 quantizer ---- */

PyDoc_STRVAR(quantize_run_doc,
"quantize_run($module, device, stream, fields)\n--\n\n"
"tk_quantize_fp8 of a tk_quantize_desc (TK_QUANTIZE_DESC_INIT) holding\n"
"fields: rows, cols, x, ldx, format, mode, q, ldq, scale, ld_scale (pointers\n"
"as ints), as tilekit/_fp8.py checked them (the fallback's quantize_run\n"
"takes the same). On the thread's handle for device (-1: the current one),\n"
"made current; stream: a cudaStream_t value or None. The library's refusal\n"
"raises as tilekit.quantize_fp8's.");

static PyObject *py_quantize_run(PyObject *mod, PyObject *args)
{
    (void)mod;
    int device, format, mode;
    PyObject *stream_arg;
    unsigned long long x, q, scale;
    long long rows, cols, ldx, ldq, ld_scale;
    if (!PyArg_ParseTuple(args, "iO(LLKLiiKLKL):quantize_run", &device, &stream_arg, &rows, &cols, &x, &ldx, &format,
                          &mode, &q, &ldq, &scale, &ld_scale))
        return NULL;
    void *stream;
    const char *kernel;
    if (stream_kernel_args(stream_arg, Py_None, &stream, &kernel))
        return NULL;
    tk_quantize_desc d = TK_QUANTIZE_DESC_INIT;
    d.rows = rows;
    d.cols = cols;
    d.x = (const void *)(uintptr_t)x;
    d.ldx = ldx;
    d.format = format;
    d.mode = mode;
    d.q = (void *)(uintptr_t)q;
    d.ldq = ldq;
    d.scale = (float *)(uintptr_t)scale;
    d.ld_scale = ld_scale;
    if (run_on_handle(device, call_quantize, &d, NULL, stream, "tilekit.quantize_fp8"))
        return NULL;
    Py_RETURN_NONE;
}

/* ---- issue 39: gemm_epilogue's fast path, for torch tensors ---- */

/* tilekit.gemm_epilogue with the extension: the calls whose operands are
 * all torch tensors and whose other arguments are plain (exact ints,
 * floats, bools and strs) are checked here and run (epi_plan, run_desc),
 * with _epilogue.plan's rules and the tk_gemm_desc it and gemm_run make.
 * Every other call, and every call one of those rules refuses, goes to
 * _epilogue.gemm_epilogue (registered by setup_epilogue) with its
 * arguments as given, so its exceptions and messages are the only ones a
 * caller sees: this path raises nothing of its own before the library. */

enum {
    E_A, E_B, E_OUT, E_ALPHA, E_BETA, E_TA, E_TB, E_KERNEL, E_EPILOGUE, E_ACTIVATION, E_BIAS, E_BIAS_ALONG, E_B_UP,
    E_D, E_AUX, E_BIAS_GRAD, E_STREAM, NEPI
};
static const char *const epi_cnames[NEPI] = { "A",        "B",          "out",  "alpha",      "beta",
                                              "trans_a",  "trans_b",    "kernel", "epilogue", "activation",
                                              "bias",     "bias_along", "b_up", "d",          "aux",
                                              "bias_grad", "stream" };
static PyObject *epi_names[NEPI];
static PyObject *epi_fallback;   /* _epilogue.gemm_epilogue */

/* _epilogue.EPILOGUES, ACTIVATIONS (None: 0, then the names from 1) and BIAS_ALONG (from 0) */
static const char *const epi_kind_names[] = { "bias_act", "gated", "backward", "gated_backward" };
static const char *const epi_act_names[] = { "relu", "gelu", "gelu_tanh", "silu" };
static const char *const epi_along_names[] = { "columns", "rows" };

#define GIVEN(x) ((x) && (x) != Py_None)

/* _epilogue._choice for a table whose names are `names` numbered from
 * `first` (1: None is 0 as well): the value, `dflt` when absent, -1 when
 * not a plain str of the table (not taken). */
static int epi_choice(PyObject *v, const char *const *names, int n, int first, int dflt)
{
    if (!v)
        return dflt;
    if (v == Py_None)
        return first ? 0 : -1;
    if (!PyUnicode_CheckExact(v))
        return -1;
    for (int i = 0; i < n; i++)
        if (PyUnicode_CompareWithASCIIString(v, names[i]) == 0)
            return first + i;
    return -1;
}

/* _fallback._real of an exact float or int (absent: dflt); -1 otherwise. */
static int epi_real(PyObject *v, double dflt, double *out)
{
    if (!v)
        *out = dflt;
    else if (PyFloat_CheckExact(v))
        *out = PyFloat_AS_DOUBLE(v);
    else if (!PyLong_CheckExact(v) || ((*out = PyLong_AsDouble(v)) == -1.0 && PyErr_Occurred()))
        return -1;
    return 0;
}

/* The truth of trans_a or trans_b: absent, None, a bool or an exact int
 * (no __bool__ of the caller's to call); -1 otherwise. */
static int epi_flag(PyObject *v)
{
    if (!v || v == Py_None || v == Py_False)
        return 0;
    if (v == Py_True)
        return 1;
    if (!PyLong_CheckExact(v))
        return -1;
    int big = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &big);
    return x == -1 && PyErr_Occurred() ? -1 : big || x != 0;
}

/* _arrays.describe of a torch tensor of `ranks`; -1 for anything else or
 * anything describe refuses. A torch operand owns no reference (no CAI
 * stream, no capsule): nothing to release. */
static int epi_operand(PyObject *x, mat *m, const char *name, unsigned ranks)
{
    static const dl_ctx no_dlpack = { NULL, 1 };
    m->name = name;
    m->ranks = ranks;
    return is_torch_tensor(x) ? describe(x, m, &no_dlpack) : -1;
}

/* _epilogue._vector: a 1-D tensor of `length` contiguous elements. */
static int epi_vector(PyObject *x, mat *v, const char *name, int64_t length)
{
    return epi_operand(x, v, name, R1) || v->cols != length || (v->cols > 1 && v->scol != 1) ? -1 : 0;
}

/* _epilogue._row_major: x's leading dimension when its rows are contiguous. */
static int epi_row_major(const mat *x, int64_t *ld)
{
    return storage(x, ROW, ld) == ROW ? 0 : -1;
}

/* A checked gemm_epilogue call: the descriptor gemm_run would fill, and
 * where it runs. */
typedef struct epi_plan {
    tk_gemm_desc desc;
    int device;
    void *stream;
    const char *kernel;          /* NULL: auto; else the UTF-8 of the caller's str (alive for the call) */
    PyObject *result;            /* borrowed: d, else out */
} epi_plan;

/* _epilogue.plan of the bound arguments (arg, indexed by E_*), for the
 * calls this path takes: 0 with e filled, or -1 (an exception may be set)
 * for the Python path to check and raise. */
static int epi_make_plan(epi_plan *e, PyObject *const *arg)
{
    mat a = { 0 }, b = { 0 }, up = { 0 }, c = { 0 }, d = { 0 }, vm = { 0 }, xm = { 0 }, gm = { 0 };
    const int kind = epi_choice(arg[E_EPILOGUE], epi_kind_names, 4, 1, TK_EPI_NONE),
              act = epi_choice(arg[E_ACTIVATION], epi_act_names, 4, 1, TK_ACT_NONE),
              along = epi_choice(arg[E_BIAS_ALONG], epi_along_names, 2, 0, TK_BIAS_COLUMNS);
    const int has_up = GIVEN(arg[E_B_UP]), has_c = GIVEN(arg[E_OUT]), has_d = GIVEN(arg[E_D]),
              has_bias = GIVEN(arg[E_BIAS]), has_aux = GIVEN(arg[E_AUX]), has_grad = GIVEN(arg[E_BIAS_GRAD]);
    double alpha, beta;
    const int ta = epi_flag(arg[E_TA]), tb = epi_flag(arg[E_TB]);
    if (kind < 0 || act < 0 || along < 0 || ta < 0 || tb < 0 || (!has_c && !has_d) || torch_ready() <= 0 ||
        epi_real(arg[E_ALPHA], 1.0, &alpha) || epi_real(arg[E_BETA], 0.0, &beta))
        return -1;
    if (epi_operand(arg[E_A], &a, "A", R2) || epi_operand(arg[E_B], &b, "B", R2) ||
        (has_up && epi_operand(arg[E_B_UP], &up, "b_up", R2)) || a.dtype != DT_BF16 || b.dtype != DT_BF16 ||
        (has_up && up.dtype != DT_BF16))
        return -1;
    PyObject *kernel = arg[E_KERNEL];
    e->kernel = NULL;
    if (GIVEN(kernel)) {
        if (!PyUnicode_CheckExact(kernel))
            return -1;
        if (PyUnicode_GetLength(kernel) > 0 && PyUnicode_CompareWithASCIIString(kernel, "auto") != 0 &&
            !(e->kernel = PyUnicode_AsUTF8(kernel)))
            return -1;
    }
    const mat oa = ta ? mat_t(&a) : a, ob = tb ? mat_t(&b) : b;   /* op(A) M x K, op(B) K x N (N/2 with b_up) */
    int op_a, op_b, op_up;
    int64_t lda, ldb, ld_up;
    if (oa.cols != ob.rows || operand(&oa, ROW, &op_a, &lda) || operand(&ob, ROW, &op_b, &ldb))
        return -1;
    const int64_t m = oa.rows, k = oa.cols;
    int64_t n = ob.cols;
    if (has_up) {   /* the up projection: B's shape, op and leading dimension */
        const mat ou = tb ? mat_t(&up) : up;
        if (ou.rows != ob.rows || ou.cols != ob.cols || operand(&ou, ROW, &op_up, &ld_up) || op_up != op_b ||
            ld_up != ldb)
            return -1;
        n *= 2;
    }
    if (n > INT64_MAX / 4 || (kind == TK_EPI_GATED && n % 2))
        return -1;
    /* D's columns: N, N/2 (gated) or 2N (gated_backward); aux's: N, or 2N (gated_backward) */
    const int64_t width = kind == TK_EPI_GATED ? n / 2 : kind == TK_EPI_GATED_BACKWARD ? 2 * n : n;
    const int64_t aux_width = kind == TK_EPI_GATED_BACKWARD ? 2 * n : n;
    if ((has_d && (epi_operand(arg[E_D], &d, "d", R2) || d.rows != m || d.cols != width)) ||
        (has_c && (epi_operand(arg[E_OUT], &c, "out", R2) || c.rows != m || c.cols != width)))
        return -1;
    const mat *dst = has_d ? &d : &c;   /* D */
    int64_t ldd, ldc, ldaux = 0;
    if (epi_row_major(dst, &ldd))
        return -1;
    ldc = ldd;   /* C's: D's when C is D or absent */
    if (has_c && has_d) {
        if (c.dtype != d.dtype || epi_row_major(&c, &ldc))
            return -1;
    } else if (!has_c && beta != 0.0) {
        return -1;
    }
    const mat *reads[5] = { &a, &b, has_up ? &up : NULL }, *written[3] = { dst };
    int nr = 3, nw = 1;
    if (has_bias) {
        if (epi_vector(arg[E_BIAS], &vm, "bias", along ? m : n))
            return -1;
        reads[nr++] = &vm;
    }
    if (has_aux) {
        if (epi_operand(arg[E_AUX], &xm, "aux", R2) || xm.dtype != DT_BF16 || xm.rows != m ||
            xm.cols != aux_width || epi_row_major(&xm, &ldaux))
            return -1;
        if (kind == TK_EPI_BACKWARD || kind == TK_EPI_GATED_BACKWARD)
            reads[nr++] = &xm;
        else
            written[nw++] = &xm;
    }
    if (has_grad) {
        if (epi_vector(arg[E_BIAS_GRAD], &gm, "bias_grad", width) || gm.dtype != DT_F32)
            return -1;
        written[nw++] = &gm;
    }
    for (int i = 0; i < nw; i++)   /* a torch tensor is never read-only */
        for (int j = 0; j < nr; j++)
            if (reads[j] && overlaps(written[i], reads[j]))
                return -1;
    const mat *ops[8] = { &a, &b, &up, &c, &d, &vm, &xm, &gm };
    for (int i = 1; i < 8; i++)   /* one device (the operands not given have no name) */
        if (ops[i]->name && ops[i]->device != a.device)
            return -1;
    e->device = a.device;
    PyObject *stream = arg[E_STREAM];
    if (!GIVEN(stream)) {
        if (torch_stream(e->device, &e->stream))
            return -1;
    } else if (!PyLong_CheckExact(stream) || (!(e->stream = PyLong_AsVoidPtr(stream)) && PyErr_Occurred())) {
        return -1;
    }
    e->result = has_d ? arg[E_D] : arg[E_OUT];
    tk_gemm_desc q = TK_GEMM_DESC_INIT;
    q.problem = (tk_gemm_problem){
        .layout = TK_ROW_MAJOR, .op_a = (tk_op)op_a, .op_b = (tk_op)op_b, .m = m, .n = n, .k = k,
        .alpha = (float)alpha, .beta = (float)beta, .a = (const void *)(uintptr_t)a.ptr, .lda = lda,
        .b = (const void *)(uintptr_t)b.ptr, .ldb = ldb, .c = has_c ? (void *)(uintptr_t)c.ptr : NULL, .ldc = ldc,
        .c_type = (tk_dtype)dst->dtype,
    };
    q.epilogue = kind;
    q.activation = act;
    q.bias = has_bias ? (const void *)(uintptr_t)vm.ptr : NULL;
    q.bias_type = has_bias ? vm.dtype : 0;
    q.bias_along = along;
    q.b_up = has_up ? (const void *)(uintptr_t)up.ptr : NULL;
    q.d = has_d ? (void *)(uintptr_t)d.ptr : NULL;
    q.ldd = has_d ? ldd : 0;
    q.aux = has_aux ? (void *)(uintptr_t)xm.ptr : NULL;
    q.ldaux = ldaux;
    q.bias_grad = has_grad ? (float *)(uintptr_t)gm.ptr : NULL;
    e->desc = q;
    return 0;
}

/* Binds gemm_epilogue's arguments (A to kernel by position or name, the
 * rest by name) and plans the call: 0, or -1 with no exception set for
 * the Python path to take it. */
static int epi_bind_plan(epi_plan *e, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    static const fast_sig sig = { "gemm_epilogue", epi_cnames, epi_names, 2, 8, NEPI };
    PyObject *arg[NEPI];
    if (bind_sig(&sig, args, nargs, kwnames, arg) == 0 && epi_make_plan(e, arg) == 0)
        return 0;
    PyErr_Clear();
    return -1;
}

PyDoc_STRVAR(gemm_epilogue_doc,
"gemm_epilogue($module, A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, kernel=None, *,\n"
"              epilogue=None, activation=None, bias=None, bias_along='columns', b_up=None, d=None, aux=None,\n"
"              bias_grad=None, stream=None)\n--\n\n"
"D = epilogue(alpha * op(A) @ op(B)) + beta * C in the kernel's own epilogue\n"
"(tk_gemm_run); returns D. Calls on torch tensors are checked and run in C;\n"
"every other call, and every call a check refuses, runs through\n"
"tilekit._epilogue.gemm_epilogue, whose docstring has the arguments.");

static PyObject *py_gemm_epilogue(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)mod;
    epi_plan e;
    if (epi_bind_plan(&e, args, nargs, kwnames)) {
        if (!epi_fallback)
            return PyErr_Format(PyExc_RuntimeError, "tilekit._tilekit: setup_epilogue() was not called");
        return PyObject_Vectorcall(epi_fallback, args, (size_t)nargs, kwnames);
    }
    return run_desc(e.device, &e.desc, e.kernel, e.stream) ? NULL : Py_NewRef(e.result);
}

PyDoc_STRVAR(epilogue_plan_doc,
"epilogue_plan($module, A, B, out=None, alpha=1.0, beta=0.0, trans_a=False, trans_b=False, kernel=None, *,\n"
"              epilogue=None, activation=None, bias=None, bias_along='columns', b_up=None, d=None, aux=None,\n"
"              bias_grad=None, stream=None)\n--\n\n"
"The fast path's plan of a gemm_epilogue call, loading nothing (for tests):\n"
"None where the call goes to the Python path, else (fields, device, stream,\n"
"kernel): the tk_gemm_desc's values in gemm_run's order (alpha and beta as\n"
"stored, float32), the device, the stream (None: the legacy default) and\n"
"the kernel (bytes, None: auto).");

static PyObject *py_epilogue_plan(PyObject *mod, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    (void)mod;
    epi_plan e;
    if (epi_bind_plan(&e, args, nargs, kwnames))
        Py_RETURN_NONE;
    const tk_gemm_desc *q = &e.desc;
    const tk_gemm_problem *p = &q->problem;
#define PTR(x) (unsigned long long)(uintptr_t)(x)
    return Py_BuildValue("((iiiLLLddKLKLKLiiiKiiKKLKLK)iNN)", (int)p->layout, (int)p->op_a, (int)p->op_b,
                         (long long)p->m, (long long)p->n, (long long)p->k, (double)p->alpha, (double)p->beta,
                         PTR(p->a), (long long)p->lda, PTR(p->b), (long long)p->ldb, PTR(p->c), (long long)p->ldc,
                         (int)p->c_type, (int)q->epilogue, (int)q->activation, PTR(q->bias), (int)q->bias_type,
                         (int)q->bias_along, PTR(q->b_up), PTR(q->d), (long long)q->ldd, PTR(q->aux),
                         (long long)q->ldaux, PTR(q->bias_grad), e.device,
                         e.stream ? PyLong_FromVoidPtr(e.stream) : Py_NewRef(Py_None),
                         e.kernel ? PyBytes_FromString(e.kernel) : Py_NewRef(Py_None));
#undef PTR
}

static PyObject *py_setup_epilogue(PyObject *mod, PyObject *fallback)
{
    (void)mod;
    if (!PyCallable_Check(fallback))
        return PyErr_Format(PyExc_TypeError, "setup_epilogue: %R is not callable", fallback);
    Py_XSETREF(epi_fallback, Py_NewRef(fallback));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    { "gemm", (PyCFunction)(void (*)(void))py_gemm, METH_FASTCALL | METH_KEYWORDS, gemm_doc },
    { "gemm_batched", (PyCFunction)(void (*)(void))py_gemm_batched, METH_FASTCALL | METH_KEYWORDS, gemm_batched_doc },
    { "gemm_grouped", (PyCFunction)(void (*)(void))py_gemm_grouped, METH_FASTCALL | METH_KEYWORDS, gemm_grouped_doc },
    { "plan", (PyCFunction)(void (*)(void))py_plan, METH_FASTCALL | METH_KEYWORDS, plan_doc },
    { "supports", (PyCFunction)(void (*)(void))py_supports, METH_FASTCALL | METH_KEYWORDS, supports_doc },
    { "select_kernel", (PyCFunction)(void (*)(void))py_select_kernel, METH_FASTCALL | METH_KEYWORDS,
      select_kernel_doc },
    { "kernels", py_kernels, METH_NOARGS, "The registry: a dict per kernel (name, description, min_sm, bm, bn)." },
    { "version", py_version, METH_NOARGS, "TILEKIT_VERSION of the bound library." },
    { "current_device", py_current_device, METH_NOARGS, "cudaGetDevice through the library's runtime; -1 if none." },
    { "bind", py_bind, METH_O, "bind(path): dlopen libtilekit (OSError with dlerror's message)." },
    { "setup", py_setup, METH_VARARGS, "setup(loader, error_for): the Python side's loader and error factory." },
    { "build_info", py_build_info, METH_NOARGS, "tk_get_build_info as a dict." },
    { "handle_info", py_handle_info, METH_VARARGS, "handle_info(device): tk_get_handle_info of the thread's handle." },
    { "set_workspace", py_set_workspace, METH_VARARGS,
      "set_workspace(device, ptr, nbytes): tk_set_workspace (ptr None: the handle's own)." },
    { "set_workspace_limit", py_set_workspace_limit, METH_VARARGS,
      "set_workspace_limit(device, nbytes): tk_set_workspace_limit (None: no cap)." },
    { "set_split_k", py_set_split_k, METH_VARARGS, "set_split_k(device, allowed): tk_set_split_k." },
    { "release_workspaces", py_release_workspaces, METH_VARARGS,
      "release_workspaces(device, stream): tk_workspace_release with the handle's device current." },
    { "last_cuda_error", py_last_cuda_error, METH_VARARGS,
      "last_cuda_error(device): tk_last_cuda_error of the thread's handle (None: the thread's last failure)." },
    { "candidates", (PyCFunction)(void (*)(void))py_candidates, METH_FASTCALL | METH_KEYWORDS, candidates_doc },
    { "workspace_size", (PyCFunction)(void (*)(void))py_workspace_size, METH_FASTCALL | METH_KEYWORDS,
      workspace_size_doc },
    { "plan_create", (PyCFunction)(void (*)(void))py_plan_create, METH_FASTCALL | METH_KEYWORDS, plan_create_doc },
    { "gemm_run", py_gemm_run, METH_VARARGS, gemm_run_doc },
    { "quantize_run", py_quantize_run, METH_VARARGS, quantize_run_doc },
    { "gemm_epilogue", (PyCFunction)(void (*)(void))py_gemm_epilogue, METH_FASTCALL | METH_KEYWORDS,
      gemm_epilogue_doc },
    { "epilogue_plan", (PyCFunction)(void (*)(void))py_epilogue_plan, METH_FASTCALL | METH_KEYWORDS,
      epilogue_plan_doc },
    { "setup_epilogue", py_setup_epilogue, METH_O,
      "setup_epilogue(fn): the Python gemm_epilogue, for the calls the fast path does not take." },
    { NULL, NULL, 0, NULL },
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_tilekit", .m_doc = "tilekit's hot path in C (see tilekit/__init__.py).",
    .m_size = -1, .m_methods = methods,
};

PyMODINIT_FUNC PyInit__tilekit(void)
{
    static const struct { PyObject **var; const char *text; } names[] = {
        { &s_layout, "layout" }, { &s_is_cuda, "is_cuda" }, { &s_dtype, "dtype" }, { &s_shape, "shape" },
        { &s_stride, "stride" }, { &s_data_ptr, "data_ptr" }, { &s_get_device, "get_device" },
        { &s_device, "device" }, { &s_cai, "__cuda_array_interface__" }, { &s_dlpack, "__dlpack__" },
        { &s_dlpack_device, "__dlpack_device__" }, { &s_array_interface, "__array_interface__" },
        { &s_array, "__array__" }, { &s_cuda_stream, "cuda_stream" }, { &s_name, "__name__" },
        { &s_stream, "stream" }, { &s_max_version, "max_version" }, { &s_lower, "lower" }, { &s_get, "get" },
        { &s_torch, "torch" }, { &s_raw_stream, "_cuda_getCurrentRawStream" }, { &s_typestr, "typestr" },
        { &s_data, "data" }, { &s_strides, "strides" }, { &s_mask, "mask" }, { &s_version, "version" },
        { &s_torch_prefix, "torch." }, { &s_descr, "descr" }, { &s_handles_key, "tilekit._tilekit.handles" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!*names[i].var && !(*names[i].var = PyUnicode_InternFromString(names[i].text)))
            return NULL;
    for (int i = 0; i < NARG; i++)
        if (!arg_names[i] && !(arg_names[i] = PyUnicode_InternFromString(arg_cnames[i])))
            return NULL;
    for (int i = 0; i < NEPI; i++)
        if (!epi_names[i] && !(epi_names[i] = PyUnicode_InternFromString(epi_cnames[i])))
            return NULL;
    if (!S.real) {
        PyObject *numbers = PyImport_ImportModule("numbers");
        if (!numbers)
            return NULL;
        S.real = PyObject_GetAttrString(numbers, "Real");
        Py_DECREF(numbers);
        if (!S.real)
            return NULL;
    }
    if (!S.plan_type && !(S.plan_type = PyStructSequence_NewType(&plan_desc)))
        return NULL;
    if (PyType_Ready(&thread_handles_type) < 0 || PyType_Ready(&gemm_plan_type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && (PyModule_AddObjectRef(m, "Plan", (PyObject *)S.plan_type) < 0 ||
              PyModule_AddObjectRef(m, "GemmPlan", (PyObject *)&gemm_plan_type) < 0))
        Py_CLEAR(m);
    return m;
}
