"""GPU tests of the Python wrapper with torch: tilekit.gemm against an fp32
product of the same bf16 inputs, for every op combination, both output
types, alpha/beta, transposed and padded views, column-major out, a shape
that is no tile multiple, side streams (where out is allocated, the streams
of CAI operands joined), handles of short-lived threads freed; and the
errors a caller can provoke. gemm_batched and gemm_grouped (issue 38) on
real memory, every kind and the group error flag.
Needs torch with CUDA and libtilekit ($TILEKIT_LIB or build/libtilekit.so).
Prints "N passed, N failed" last; exits non-zero on any failure.

    TILEKIT_LIB=$PWD/build/libtilekit.so python3 tests/gpu/test_python.py [name-substring]
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import torch      # noqa: E402
import tilekit    # noqa: E402
from gpu_runner import raises, run_tests  # noqa: E402 (tests/gpu is on sys.path)

DEV = torch.device("cuda")
KERNELS = [None, "cublas", "k01_naive"]   # None: auto-dispatch
torch.backends.cuda.matmul.allow_tf32 = False


def bf16(*shape):
    # values in [-1, 1) spread over many exponents; never zeros
    return (torch.rand(*shape, device=DEV) * 2 - 1).to(torch.bfloat16)


def reference(opA, opB, alpha=1.0, beta=0.0, C0=None):
    r = alpha * (opA.double() @ opB.double())
    if beta != 0.0:
        r = r + beta * C0.double()
    return r


def assert_close(C, ref, label):
    """Relative Frobenius error against an fp64 product of the same inputs:
    fp32 C differs by summation order only, bf16 C by one rounding."""
    tol = 3e-5 if C.dtype == torch.float32 else 8e-3
    c = C.double()
    assert bool(torch.isfinite(c).all()), "%s: NaN/Inf in C" % label
    err = (torch.linalg.norm(c - ref) / torch.linalg.norm(ref)).item()
    assert err < tol, "%s: relative error %.3e > %.0e" % (label, err, tol)


def nan_like(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device=DEV)


# ---- correctness ----

def test_ops_and_out_types():
    """NN, NT, TN, TT through trans_a/trans_b, fp32 and bf16 out, each kernel."""
    M, N, K = 96, 80, 72
    for ta in (False, True):
        for tb in (False, True):
            A = bf16(K, M) if ta else bf16(M, K)
            B = bf16(N, K) if tb else bf16(K, N)
            ref = reference(A.t() if ta else A, B.t() if tb else B)
            for dt in (torch.float32, torch.bfloat16):
                for k in KERNELS:
                    C = nan_like((M, N), dt)   # beta = 0 must overwrite the poison
                    got = tilekit.gemm(A, B, out=C, trans_a=ta, trans_b=tb, kernel=k)
                    assert got is C
                    torch.cuda.synchronize()
                    assert_close(C, ref, "op_a=%s op_b=%s %s %s" % ("NT"[ta], "NT"[tb], dt, k))


def test_transposed_views():
    """Non-contiguous transposed views are used in place (op T / column-major), not copied."""
    M, N, K = 64, 48, 40
    At, Bt = bf16(K, M), bf16(N, K)
    A, B = At.t(), Bt.t()          # M x K and K x N views with unit row stride
    assert not A.is_contiguous() and not B.is_contiguous()
    ref = reference(A, B)
    for k in KERNELS:
        C = nan_like((M, N), torch.float32)
        tilekit.gemm(A, B, out=C, kernel=k)
        torch.cuda.synchronize()
        assert_close(C, ref, "views, %s" % k)
        # column-major out: a transposed view of an N x M tensor
        Cc = nan_like((N, M), torch.float32).t()
        tilekit.gemm(A, B, out=Cc, kernel=k)
        torch.cuda.synchronize()
        assert_close(Cc, ref, "column-major out, %s" % k)
        Cc = nan_like((N, M), torch.bfloat16).t()
        tilekit.gemm(bf16(M, K).copy_(A), B, out=Cc, kernel=k)   # row-major A in a column-major problem
        torch.cuda.synchronize()
        assert_close(Cc, ref, "column-major bf16 out, row-major A, %s" % k)


def test_padded_leading_dims():
    M, N, K = 33, 17, 29
    A = bf16(M, K + 7)[:, :K]
    B = bf16(K, N + 3)[:, 1:N + 1]
    Cbig = nan_like((M, N + 5), torch.float32)
    C = Cbig[:, 2:N + 2]
    ref = reference(A, B)
    tilekit.gemm(A, B, out=C, kernel="k01_naive")
    torch.cuda.synchronize()
    assert_close(C, ref, "padded")
    assert bool(torch.isnan(Cbig[:, :2]).all()) and bool(torch.isnan(Cbig[:, N + 2:]).all()), \
        "wrote outside the out view"


def test_alpha_beta():
    M, N, K = 130, 70, 50
    A, B = bf16(M, K), bf16(K, N)
    for dt in (torch.float32, torch.bfloat16):
        C0 = bf16(M, N).to(dt)
        ref = reference(A, B, 0.5, 0.75, C0)
        for k in KERNELS:
            C = C0.clone()
            tilekit.gemm(A, B, out=C, alpha=0.5, beta=0.75, kernel=k)
            torch.cuda.synchronize()
            assert_close(C, ref, "alpha/beta %s %s" % (dt, k))


def test_non_tile_multiple():
    M, N, K = 127, 129, 65
    A, B = bf16(M, K), bf16(N, K)
    ref = reference(A, B.t())
    for k in KERNELS:
        C = tilekit.gemm(A, B, trans_b=True, kernel=k)   # out allocated, fp32 by default
        assert C.shape == (M, N) and C.dtype == torch.float32 and C.device == A.device
        torch.cuda.synchronize()
        assert_close(C, ref, "127x129x65 %s" % k)
    C = tilekit.gemm(A, B, trans_b=True, out_dtype=torch.bfloat16)
    torch.cuda.synchronize()
    assert C.dtype == torch.bfloat16
    assert_close(C, ref, "127x129x65 bf16 out")


def test_large_auto():
    M = N = K = 1024
    A, B = bf16(M, K), bf16(K, N)
    C = tilekit.gemm(A, B)
    torch.cuda.synchronize()
    assert_close(C, reference(A, B), "1024^3 auto")


def test_k_zero_and_empty():
    C0 = bf16(8, 6).float()
    C = C0.clone()
    tilekit.gemm(bf16(8, 0), bf16(0, 6), out=C, beta=0.5)   # K = 0: C = beta * C
    torch.cuda.synchronize()
    assert torch.equal(C, C0 * 0.5)
    C = nan_like((8, 6), torch.float32)
    tilekit.gemm(bf16(8, 0), bf16(0, 6), out=C)             # beta = 0 overwrites, even NaN
    torch.cuda.synchronize()
    assert bool((C == 0).all())
    E = tilekit.gemm(bf16(0, 5), bf16(5, 6))                # M = 0: nothing to do
    assert E.shape == (0, 6)


def test_side_stream():
    """Runs on torch's current stream: queued after work on that stream."""
    M = N = K = 256
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        A, B = bf16(M, K), bf16(K, N)   # produced on s
        C = tilekit.gemm(A, B, kernel="k01_naive")
        ref = reference(A, B)
    s.synchronize()
    assert_close(C, ref, "side stream")


# torch.cuda._sleep's argument: GPU clock cycles, about 50 ms at 2 GHz, long
# enough for the host to queue what follows before the stream it holds back
# moves on.
HOLD = 100_000_000


def test_out_allocated_on_call_stream():
    """out=None with stream=s2, another stream than torch's current one (s1):
    out comes from s2's pool of torch's caching allocator. From s1's pool, it
    could be (1) a block just freed on s1 whose last writer on s1 has not run
    yet, or (2), freed by the caller after the call, be handed out again on
    s1 while the GEMM on s2 has not run yet. A long kernel holds one stream
    back in each case: the result and the other stream's data must both be
    right. As an int, a torch.cuda.Stream and on the legacy default stream."""
    M = N = K = 512
    A, B = bf16(M, K), bf16(K, N)
    ref = reference(A, B)
    s2 = torch.cuda.Stream()
    for k in KERNELS:
        for stream in (s2, s2.cuda_stream):
            torch.cuda.synchronize()
            X = torch.empty(M, N, device=DEV)   # out's size: the block s1 hands out next
            torch.cuda._sleep(HOLD)              # s1 held back ...
            X.fill_(7.0)                         # ... then writes X's block
            del X                                # free on s1's pool at once (ordered by s1)
            C = tilekit.gemm(A, B, kernel=k, stream=stream)
            torch.cuda.synchronize()
            assert_close(C, ref, "(1) out=None on %s while s1 writes a freed block, %s" % (type(stream).__name__, k))

            with torch.cuda.stream(s2):
                torch.cuda._sleep(HOLD)          # s2 held back: the GEMM waits behind it
            C = tilekit.gemm(A, B, kernel=k, stream=stream)
            ptr = C.data_ptr()
            del C                                # the caller drops the result before it is computed
            Y = torch.empty(M, N, device=DEV)    # on s1
            Y.fill_(3.0)
            torch.cuda.synchronize()
            assert bool((Y == 3.0).all()), "(2) s1's data overwritten by the GEMM on s2 (%s, block %s), %s" % (
                type(stream).__name__, "reused" if Y.data_ptr() == ptr else "not reused", k)
    s3 = torch.cuda.Stream()
    with torch.cuda.stream(s3):   # the legacy default stream from another current stream: torch's default stream
        torch.cuda.synchronize()
        C = tilekit.gemm(A, B, stream=0)
        assert torch.cuda.current_stream() == s3, "torch's current stream was not put back"
        torch.cuda.synchronize()
        assert_close(C, ref, "out=None on the legacy default stream")


def test_streams_torch_and_cai():
    """A torch A and a CAI B whose 'stream' is s2: the call runs on torch's
    current stream s1, where A is produced, after the work enqueued on s2,
    where B is; a CAI out whose 'stream' is s3 then holds the result for the
    work enqueued on s3 after the call. Each producer is held back by a long
    kernel, so a call that waited for neither would read NaN. The same
    without torch operands: on out's stream s3, after A's s2."""
    M, N, K = 256, 192, 128
    srcA, srcB = bf16(M, K), bf16(K, N)
    ref = reference(srcA, srcB)
    s2, s3 = torch.cuda.Stream(), torch.cuda.Stream()
    for k in KERNELS:
        A, B = nan_like((M, K), torch.bfloat16), nan_like((K, N), torch.bfloat16)
        C = nan_like((M, N), torch.float32)
        torch.cuda.synchronize()
        torch.cuda._sleep(HOLD)
        A.copy_(srcA)                     # A ready late on s1
        with torch.cuda.stream(s2):
            torch.cuda._sleep(HOLD)
            B.copy_(srcB)                 # B ready late on s2
        tilekit.gemm(A, CAIView(B, stream=s2.cuda_stream), out=CAIView(C, stream=s3.cuda_stream), kernel=k)
        with torch.cuda.stream(s3):
            D = C.clone()                 # out's producer reads it next, on s3
        torch.cuda.synchronize()
        assert_close(C, ref, "torch A, CAI B on s2, CAI out on s3, %s" % k)
        assert_close(D, ref, "out read on its CAI stream after the call, %s" % k)

        A, C = nan_like((M, K), torch.bfloat16), nan_like((M, N), torch.float32)
        torch.cuda.synchronize()
        with torch.cuda.stream(s2):
            torch.cuda._sleep(HOLD)
            A.copy_(srcA)                 # A ready late on s2
        tilekit.gemm(CAIView(A, stream=s2.cuda_stream), CAIView(srcB), out=CAIView(C, stream=s3.cuda_stream),
                     kernel=k)
        with torch.cuda.stream(s3):
            D = C.clone()
        torch.cuda.synchronize()
        assert_close(D, ref, "CAI A on s2, CAI out on s3, %s" % k)


def test_every_kernel_that_supports():
    """Every registered kernel that accepts a problem computes it right
    (the wrapper's layout mapping must hold for kernels added later too)."""
    M, N, K = 256, 192, 128
    A, Bt = bf16(M, K), bf16(N, K)
    ref = reference(A, Bt.t())
    for k in tilekit.kernels():
        for tb, B in ((False, Bt.t().contiguous()), (True, Bt)):
            if not tilekit.supports(A, B, trans_b=tb, kernel=k["name"]):
                continue
            C = nan_like((M, N), torch.float32)
            tilekit.gemm(A, B, out=C, trans_b=tb, kernel=k["name"])
            torch.cuda.synchronize()
            assert_close(C, ref, "%s trans_b=%s" % (k["name"], tb))


class CAIView:
    """torch memory seen only through __cuda_array_interface__ (v3), bf16 as
    '<V2': exercises the non-torch path on real device memory."""
    def __init__(self, t, stream=None):
        size = t.element_size()
        self.__cuda_array_interface__ = {
            "shape": tuple(t.shape), "typestr": "<V2" if t.dtype == torch.bfloat16 else "<f4",
            "strides": tuple(s * size for s in t.stride()), "data": (t.data_ptr(), False), "version": 3,
            "stream": stream}


def test_cuda_array_interface():
    M, N, K = 100, 60, 40
    A, Bt = bf16(M, K), bf16(N, K)
    C = nan_like((M, N), torch.float32)
    torch.cuda.synchronize()   # inputs ready before a call on another stream
    out = CAIView(C, stream=1)   # the legacy default stream
    got = tilekit.gemm(CAIView(A), CAIView(Bt.t()), out=out, kernel="k01_naive")
    assert got is out
    torch.cuda.synchronize()
    assert_close(C, reference(A, Bt.t()), "CAI objects")
    C16 = nan_like((N, M), torch.bfloat16).t()   # column-major bf16 out through CAI
    tilekit.gemm(CAIView(A), CAIView(Bt), out=CAIView(C16), trans_b=True)
    torch.cuda.synchronize()
    assert_close(C16, reference(A, Bt.t()), "CAI objects, column-major bf16 out, auto")


# ---- threads ----

def test_thread_handles_freed():
    """A thread's library handle (cuBLAS's handle and 32 MiB workspace, the
    split tiles' workspace, the copies of misaligned operands) is destroyed
    when the thread ends: 50 threads, one after the other, each running
    GEMMs that take those workspaces, leave the GPU's free memory where it
    was after the first five (within 8 MiB; before, each thread left at
    least 32 MiB behind)."""
    import threading
    A, B = bf16(256, 16384), bf16(16384, 256)   # few output tiles, long K: split over K where a kernel can
    Am = bf16(64 * 64 + 8).narrow(0, 1, 64 * 64).view(64, 64)   # misaligned: auto-dispatch copies it
    Bm = bf16(64, 64)
    C, Cm = nan_like((256, 256), torch.float32), nan_like((64, 64), torch.float32)
    failures = []

    def work():
        try:
            tilekit.gemm(A, B, out=C, kernel="cublas")
            tilekit.gemm(A, B, out=C)
            tilekit.gemm(Am, Bm, out=Cm)
            torch.cuda.current_stream().synchronize()
        except Exception as e:   # reported by the main thread
            failures.append(e)

    free = []
    for i in range(50):
        t = threading.Thread(target=work)
        t.start()
        t.join()
        assert not failures, failures
        torch.cuda.synchronize()
        free.append(torch.cuda.mem_get_info()[0])
    assert_close(C, reference(A, B), "threads, auto")
    assert_close(Cm, reference(Am, Bm), "threads, misaligned")
    lost = (free[4] - min(free[5:])) / 2 ** 20
    assert lost < 8, "free GPU memory fell by %.1f MiB over threads 6..50 (after 5: %.0f MiB, after 50: %.0f MiB)" \
        % (lost, free[4] / 2 ** 20, free[-1] / 2 ** 20)


# ---- errors ----

def test_errors():
    A, B = bf16(8, 4), bf16(4, 6)
    raises(TypeError, tilekit.gemm, A.cpu(), B, match=("A", "cpu"))
    raises(TypeError, tilekit.gemm, A, B.float(), match=("B", "bfloat16"))
    raises(TypeError, tilekit.gemm, A.half(), B, match=("A", "float16"))
    raises(ValueError, tilekit.gemm, A.unsqueeze(0), B, match="2-D")
    raises(ValueError, tilekit.gemm, A, bf16(5, 6), match="shape mismatch")
    raises(ValueError, tilekit.gemm, A, B, out=torch.empty(6, 8, device=DEV), match="out")
    raises(TypeError, tilekit.gemm, A, B, out=torch.empty(8, 6, device=DEV, dtype=torch.float16), match="out")
    raises(ValueError, tilekit.gemm, A, B, out=torch.empty(8, 6, device=DEV), out_dtype=torch.bfloat16)
    raises(ValueError, tilekit.gemm, bf16(8, 8)[::2, ::2], B, match="neither")
    raises(ValueError, tilekit.gemm, A, B, beta=1.0, match="beta")
    e = raises(tilekit.InvalidValueError, tilekit.gemm, A, B, kernel="k99_nope", match=("k01_naive", "cublas"))
    assert e.status == 1


def test_misaligned():
    """A view starting one element in: k01_naive takes any alignment; a
    kernel that needs 16-byte alignment refuses with NotSupportedError (a
    ValueError) carrying the library's reason, and C stays untouched."""
    M, N, K = 64, 64, 64
    A = bf16(M * K + 8).narrow(0, 1, M * K).view(M, K)
    B = bf16(K, N)
    assert A.data_ptr() % 16 != 0
    C = nan_like((M, N), torch.float32)
    tilekit.gemm(A, B, out=C, kernel="k01_naive")
    torch.cuda.synchronize()
    assert_close(C, reference(A, B), "misaligned A, k01_naive")
    for k in tilekit.kernels():
        s = tilekit.supports(A, B, out=C, kernel=k["name"])
        if s or s.status_name != "TK_ERR_NOT_SUPPORTED":
            continue
        C = nan_like((M, N), torch.float32)
        raises(tilekit.NotSupportedError, tilekit.gemm, A, B, out=C, kernel=k["name"], match=k["name"])
        torch.cuda.synchronize()
        assert bool(torch.isnan(C).all()), "%s: refused call wrote C" % k["name"]


# ---- issue 38: gemm_batched and gemm_grouped (torch._grouped_mm and the nn side: test_torch.py) ----

def _ranges(offs):
    """(g, lo, hi) of each group of cumulative ends (read on the host: a test)."""
    ends = offs.tolist()
    return [(g, ends[g - 1] if g else 0, hi) for g, hi in enumerate(ends)]


def test_batched_and_grouped():
    """The bindings on real memory: a batched product with a broadcast A
    (batch stride 0) and transposed B's (op T) into an fp32 out with
    alpha and beta; the three grouped kinds against loops, an empty group
    included (zeros for K, nothing for rows), rows past a masked count
    not written; bad offsets skipped and reported in group_error."""
    G, M, N, K = 3, 40, 24, 32
    A = bf16(M, K).unsqueeze(0).expand(G, M, K)
    W = bf16(G, N, K)
    C0 = bf16(G, M, N).float()
    C = C0.clone()
    assert tilekit.gemm_batched(A, W.transpose(-2, -1), C, alpha=0.5, beta=0.75) is C
    torch.cuda.synchronize()
    assert_close(C, 0.5 * (A.double() @ W.double().transpose(-2, -1)) + 0.75 * C0.double(), "batched")

    G = 4
    offs = torch.tensor([7, 7, 32, 33], dtype=torch.int32, device=DEV)   # sizes 7, 0, 25, 1
    Mt = 33
    x, W, dy = bf16(Mt, K), bf16(G, N, K), bf16(Mt, N)
    err = torch.zeros(1, dtype=torch.int32, device=DEV)
    y = tilekit.gemm_grouped(x, W.transpose(-2, -1), offs, group_error=err)   # rows; fp32 out by default
    ref = torch.cat([x[lo:hi].double() @ W[g].double().t() for g, lo, hi in _ranges(offs)])
    torch.cuda.synchronize()
    assert y.shape == (Mt, N) and err.item() == 0
    assert_close(y, ref, "rows")
    dW = nan_like((G, K, N), torch.float32)
    tilekit.gemm_grouped(x.t(), dy, offs, dW)   # K: x.t() is op T
    ref = torch.stack([x[lo:hi].double().t() @ dy[lo:hi].double() for g, lo, hi in _ranges(offs)])
    torch.cuda.synchronize()
    assert bool((dW[1] == 0).all()), "the empty group's out is not zero"
    assert_close(dW, ref, "K")

    counts = torch.tensor([3, 0, M], dtype=torch.int32, device=DEV)
    A3, B3, C3 = bf16(3, M, K), bf16(3, K, N), nan_like((3, M, N), torch.bfloat16)
    tilekit.gemm_grouped(A3, B3, counts, C3)   # masked: row counts
    torch.cuda.synchronize()
    for g, rows in enumerate(counts.tolist()):
        if rows:
            assert_close(C3[g, :rows], A3[g, :rows].double() @ B3[g].double(), "masked %d" % g)
        assert bool(torch.isnan(C3[g, rows:]).all()), "masked: rows past the count were written"

    bad = torch.tensor([10, 5, Mt + 1, Mt], dtype=torch.int32, device=DEV)   # decreasing, then past M
    tilekit.gemm_grouped(x, W.transpose(-2, -1), bad, group_error=err)
    torch.cuda.synchronize()
    assert err.item() == 1, "bad offsets were not reported"


def main():
    torch.manual_seed(0)
    return run_tests(globals(), sys.argv)


if __name__ == "__main__":
    sys.exit(main())
