"""Issue 38's bindings, gemm_batched and gemm_grouped, without a GPU: the
checked call each makes (tilekit._plan with form="batched" or "grouped")
for fake __cuda_array_interface__ objects that point at no memory: the
kind, count, strides and ops that reach the library, and every refusal
before it. tests/run_cpu.sh runs this file on both backends; the tests
marked below need the library (its statuses as exceptions).
"""
import tilekit
from tilekit import _lib

from test_wrapper import F32, Fake, raises

I32 = "<i4"
KIND_BATCHED, KIND_ROWS, KIND_K, KIND_MASKED = 1, 2, 3, 4   # tk_group_kind


def plan(A, B, out=None, **kw):
    """The checked call of gemm_batched (no offs) or gemm_grouped (offs=)."""
    args = dict(alpha=1.0, beta=0.0, trans_a=False, trans_b=False, out_dtype=None, kernel=None, stream=None,
                offs=None, group_error=None, query=False)
    args.update(kw)
    form = args.pop("form", "grouped" if args["offs"] is not None else "batched")
    return tilekit._plan(A, B, out, args["alpha"], args["beta"], args["trans_a"], args["trans_b"],
                         args["out_dtype"], args["kernel"], args["stream"], offs=args["offs"],
                         group_error=args["group_error"], query=args["query"], form=form)


def fields(p, *names):
    return tuple(getattr(p, n) for n in names)


# ---- batched ----

def test_batched_strides_and_ops():
    """3-D stacks: the batch strides pass through; transposed matrices (a
    view of count x N x K weights) are op T, never copied; batch stride 0
    (an expanded tensor) is one matrix for all."""
    G, M, N, K = 3, 8, 6, 4
    p = plan(Fake((G, M, K)), Fake((G, K, N)), Fake((G, M, N), F32))
    assert fields(p, "form", "kind", "count", "m", "n", "k") == ("batched", KIND_BATCHED, G, M, N, K), p
    assert fields(p, "stride_a", "stride_b", "stride_c", "op_a", "op_b", "lda", "ldb", "ldc") == \
        (M * K, K * N, M * N, _lib.OP_N, _lib.OP_N, K, N, N), p
    assert p.offs_ptr is None and p.error_ptr is None
    # B as w.transpose(-2, -1) of a G x N x K tensor: strides (N*K, 1, K)
    p = plan(Fake((G, M, K)), Fake((G, K, N), strides=(N * K, 1, K)), Fake((G, M, N), F32))
    assert fields(p, "op_b", "ldb", "stride_b") == (_lib.OP_T, K, N * K), p
    # the same memory as G x N x K with trans_b
    q = plan(Fake((G, M, K)), Fake((G, N, K)), Fake((G, M, N), F32), trans_b=True)
    assert fields(q, "op_b", "ldb", "stride_b") == fields(p, "op_b", "ldb", "stride_b")
    # broadcast: stride 0 for B; padded batch strides
    p = plan(Fake((G, M, K), strides=(M * K + 64, K, 1)), Fake((G, K, N), strides=(0, N, 1)),
             Fake((G, M, N), F32, strides=(M * N + 8, N, 1)))
    assert fields(p, "stride_a", "stride_b", "stride_c") == (M * K + 64, 0, M * N + 8), p
    # a column-major out makes a column-major problem (the library swaps A and B)
    p = plan(Fake((G, M, K)), Fake((G, K, N)), Fake((G, M, N), F32, strides=(M * N, 1, M)))
    assert fields(p, "layout", "op_a", "op_b", "ldc", "stride_c") == (_lib.COL_MAJOR, _lib.OP_T, _lib.OP_T, M,
                                                                       M * N), p


def test_batched_refusals():
    G, M, N, K = 3, 8, 6, 4
    A, B, C = Fake((G, M, K)), Fake((G, K, N)), Fake((G, M, N), F32)
    raises(ValueError, plan, Fake((M, K)), B, C, match=("A", "3-D stack", "2 dimensions", "(8, 4)"))
    raises(ValueError, plan, A, B, Fake((M, N), F32), match=("out", "3-D stack"))
    raises(ValueError, plan, A, Fake((2, K, N)), C, match=("count mismatch", "A holds 3", "B 2"))
    raises(ValueError, plan, A, B, Fake((2, M, N), F32), match=("out", "shape 2 x 8 x 6", "expected 3 x 8 x 6",
                                                                "count x M x N"))
    raises(ValueError, plan, A, Fake((G, 5, N)), C, match="shape mismatch")
    raises(TypeError, plan, Fake((G, M, K), F32), B, C, match=("A", "bfloat16"))
    raises(ValueError, plan, A, Fake((G, K, N), strides=(K * N, 2, 2 * K)), C, match=("B", "neither"))
    raises(ValueError, plan, Fake((G, M, K), strides=(-M * K, K, 1)), B, C, match=("A", "negative strides",
                                                                                  "(-32, 4, 1)"))
    raises(ValueError, plan, Fake((G, M, K), ptr=0), B, C, match=("A", "NULL", "3 matrices of 8 x 4"))
    raises(ValueError, plan, Fake((G, M, K), strides=(M * K, K)), B, C, match=("A", "2 strides for a 3-D shape"))
    raises(TypeError, plan, A, B, C, offs=None, group_error=Fake((1,), I32), form="batched",
           match=("offs", "batched product takes no offsets"))
    raises(TypeError, plan, A, B, None, match=("out", "required"))
    # out may not overlap an input: the whole stacks are compared
    base = A.__cuda_array_interface__["data"][0]
    raises(ValueError, plan, A, B, Fake((G, M, N), F32, ptr=base + 2 * M * K * 2 - 4), match=("out overlaps A",))
    assert plan(A, B, Fake((G, M, N), F32, ptr=base + G * M * K * 2)).count == G   # just past A's last byte
    # an empty stack needs no memory
    assert plan(Fake((0, M, K), ptr=0), Fake((0, K, N), ptr=0), Fake((0, M, N), F32, ptr=0)).count == 0


# ---- grouped ----

def test_grouped_kinds():
    """The kind follows from the ranks of A and B (torch._grouped_mm's rule);
    the strides it does not use are 0; offs' pointer passes through."""
    G, M, N, K = 4, 20, 6, 8
    offs = Fake((G,), I32)
    optr = offs.__cuda_array_interface__["data"][0]
    # 2-D x 3-D: rows split, B one per group (nn.Linear weights G x N x K, transposed view: op T)
    p = plan(Fake((M, K)), Fake((G, K, N), strides=(N * K, 1, K)), Fake((M, N), F32), offs=offs)
    assert fields(p, "form", "kind", "count", "m", "n", "k", "op_a", "op_b", "ldb") == \
        ("grouped", KIND_ROWS, G, M, N, K, _lib.OP_N, _lib.OP_T, K), p
    assert fields(p, "stride_a", "stride_b", "stride_c", "offs_ptr", "error_ptr") == (0, N * K, 0, optr, None), p
    # 2-D x 2-D: K split, out one per group; A as the transposed view of a K x M tensor (x.t()): op T
    p = plan(Fake((M, K), strides=(1, M)), Fake((K, N)), Fake((G, M, N), F32), offs=offs)
    assert fields(p, "kind", "count", "op_a", "lda", "stride_a", "stride_b", "stride_c") == \
        (KIND_K, G, _lib.OP_T, M, 0, 0, M * N), p
    # ... with out None: the count is offs' length, out allocated G x M x N
    p = plan(Fake((M, K)), Fake((K, N)), None, offs=offs, query=True)
    assert fields(p, "count", "stride_c", "ldc") == (G, M * N, N), p
    # 3-D x 3-D with offs: masked (row counts)
    p = plan(Fake((G, M, K)), Fake((G, K, N)), Fake((G, M, N), F32), offs=offs)
    assert fields(p, "kind", "count", "stride_a", "stride_b", "stride_c") == (KIND_MASKED, G, M * K, K * N, M * N), p
    err = Fake((1,), I32)
    p = plan(Fake((M, K)), Fake((G, K, N)), Fake((M, N), F32), offs=offs, group_error=err)
    assert p.error_ptr == err.__cuda_array_interface__["data"][0], p


def test_grouped_refusals():
    G, M, N, K = 4, 20, 6, 8
    A, B, C, offs = Fake((M, K)), Fake((G, K, N)), Fake((M, N), F32), Fake((G,), I32)
    raises(TypeError, plan, A, B, C, form="grouped", match=("offs", "required"))
    raises(ValueError, plan, Fake((G, M, K)), Fake((K, N)), Fake((M, N), F32), offs=offs,
           match=("3-D stack and B a 2-D matrix", "transposes"))
    raises(ValueError, plan, A, B, C, offs=Fake((G - 1,), I32), match=("offs", "3 offsets for 4 groups",
                                                                       "B's matrices"))
    raises(ValueError, plan, A, Fake((K, N)), Fake((G, M, N), F32), offs=Fake((G + 1,), I32),
           match=("offs", "5 offsets for 4 groups", "out's matrices"))
    raises(TypeError, plan, A, B, C, offs=Fake((G,), "<i8"), match=("offs", "'<i8'", "int64", "int32 '<i4'"))
    raises(TypeError, plan, A, B, C, offs=Fake((G,)), match=("offs", "'<V2'", "int32"))
    raises(ValueError, plan, A, B, C, offs=Fake((1, G), I32), match=("offs", "1-D array", "2 dimensions"))
    raises(ValueError, plan, A, B, C, offs=Fake((G,), I32, strides=(2,)), match=("offs", "stride 2", "contiguous"))
    raises(TypeError, plan, A, B, C, offs=[0, 5, 10, 20], match=("offs", "host memory"))
    raises(ValueError, plan, A, B, C, offs=Fake((G,), I32, ptr=0), match=("offs", "NULL", "an array of 4"))
    raises(ValueError, plan, A, B, Fake((G, M, N), F32), offs=offs, match=("out", "2-D matrix", "3 dimensions"))
    raises(ValueError, plan, A, B, Fake((M + 1, N), F32), offs=offs, match=("out", "shape 21 x 6",
                                                                             "expected 20 x 6"))
    raises(ValueError, plan, A, B, Fake((M, N), F32, strides=(1, M)), offs=offs,
           match=("out", "TK_GROUP_ROWS writes row-major"))
    raises(ValueError, plan, Fake((G, M, K)), Fake((G - 1, K, N)), Fake((G, M, N), F32), offs=offs,
           match="count mismatch")
    # out may not overlap offs (the kernel reads them while it writes out)
    optr = offs.__cuda_array_interface__["data"][0]
    raises(ValueError, plan, A, B, Fake((M, N), F32, ptr=optr), offs=offs, match="out overlaps offs")
    # group_error: int32, 1-D, one element at least, writable, not over offs
    raises(ValueError, plan, A, B, C, offs=offs, group_error=Fake((0,), I32), match=("group_error", "empty"))
    raises(ValueError, plan, A, B, C, offs=offs, group_error=Fake((1,), I32, readonly=True),
           match=("group_error", "read-only"))
    raises(TypeError, plan, A, B, C, offs=offs, group_error=Fake((1,), F32), match=("group_error", "int32"))
    raises(ValueError, plan, A, B, C, offs=offs, group_error=Fake((1,), I32, ptr=optr + 4),
           match="group_error overlaps offs")
    raises(ValueError, tilekit._plan, A, B, C, form="ragged", match=("form", "'ragged'"))


def test_grouped_streams():
    """offs is an operand like the others: its CAI stream is used or joined."""
    G, M, N, K = 4, 20, 6, 8
    A, B, C = Fake((M, K)), Fake((G, K, N)), Fake((M, N), F32)
    p = plan(A, B, C, offs=Fake((G,), I32, stream=7))
    assert p.stream == 7 and p.joins == (), p
    p = plan(A, B, Fake((M, N), F32, stream=5), offs=Fake((G,), I32, stream=7), group_error=Fake((1,), I32, stream=9))
    assert p.stream == 5 and p.joins == (7, 9), p


def test_grouped_dlpack_offs():
    """offs through DLPack (int32: code 0, bits 32); the extension alone."""
    if tilekit.backend() != "extension":
        return
    from test_backends import DLFake
    G, M, N, K = 4, 20, 6, 8
    offs = DLFake((G,), dtype=(0, 32))
    p = plan(Fake((M, K)), Fake((G, K, N)), Fake((M, N), F32), offs=offs)
    assert p.offs_ptr == offs.ptr and p.kind == KIND_ROWS, p
    raises(TypeError, plan, Fake((M, K)), Fake((G, K, N)), Fake((M, N), F32), offs=DLFake((G,), dtype=(0, 64)),
           match=("offs", "DLPack dtype", "code 0, bits 64", "int32"))
    p = plan(DLFake((G, M, K)), DLFake((G, K, N)), DLFake((G, M, N), dtype=(2, 32)))
    assert fields(p, "kind", "count", "stride_a", "stride_b", "stride_c") == (KIND_BATCHED, G, M * K, K * N, M * N), p


# ---- need libtilekit (fail, not skip, when it cannot be loaded) ----

def test_lib_statuses():
    """What the library refuses arrives as the gemm binding's classes: an
    unknown kernel, overlapping outputs (a stride_c below one C), offsets
    not 4-byte aligned; a valid call then meets the missing GPU (or, with
    one, this is no place to run it: only the refusals are checked)."""
    G, M, N, K = 3, 8, 6, 4
    A, B, C = Fake((G, M, K)), Fake((G, K, N)), Fake((G, M, N), F32)
    e = raises(tilekit.InvalidValueError, tilekit.gemm_batched, A, B, C, kernel="k99_nope", match="k99_nope")
    assert str(e).startswith("tilekit.gemm_batched: kernel: unknown kernel") and isinstance(e, ValueError), str(e)
    raises(tilekit.InvalidValueError, tilekit.gemm_batched, A, B, Fake((G, M, N), F32, strides=(N, N, 1)),
           match=("stride_c", "outputs would overlap"))
    offs = Fake((G,), I32, ptr=0x7f0000000002)
    e = raises(tilekit.InvalidValueError, tilekit.gemm_grouped, Fake((20, K)), B, offs, Fake((20, N), F32),
               match=("offs", "4-byte aligned"))
    assert str(e).startswith("tilekit.gemm_grouped: "), str(e)
    if tilekit.supports(Fake((M, K)), Fake((K, N)), Fake((M, N), F32)).status == _lib.NO_DEVICE:
        raises(tilekit.NoDeviceError, tilekit.gemm_batched, A, B, C)
        raises(tilekit.NoDeviceError, tilekit.gemm_grouped, Fake((20, K)), B, Fake((G,), I32), Fake((20, N), F32))


def test_argument_binding():
    G, M, N, K = 3, 8, 6, 4
    A, B, C, offs = Fake((M, K)), Fake((G, K, N)), Fake((M, N), F32), Fake((G,), I32)
    raises(TypeError, tilekit.gemm_grouped, A, B, match=("missing", "'offs'"))
    raises(TypeError, tilekit.gemm_grouped, A, B, offs, C, bogus=1, match="unexpected keyword argument 'bogus'")
    raises(TypeError, tilekit.gemm_grouped, A, B, offs, C, out=C, match="multiple values for argument 'out'")
    raises(TypeError, tilekit.gemm_grouped, A, B, offs, C, 1.0, 0.0, False, False, None, None, 0, match="positional")
    raises(TypeError, tilekit.gemm_batched, A, match=("missing", "'B'"))
    raises(TypeError, tilekit.gemm_batched, A, B, C, offs=offs, match="unexpected keyword argument 'offs'")
