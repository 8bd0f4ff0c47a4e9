"""python/bench.py - tilekit against torch.matmul from Python: correctness, then speed.

What the seeds' Python harness set out to do, done correctly:
- the reference is the exact product of the same bf16 inputs (upcast to fp32,
  TF32 off), not a bf16-rounded torch result, and the comparison is a relative
  error with a tolerance that depends on the output type (not |diff| > 0.1);
- the output is poisoned with NaN before the checked run, so a kernel that
  skips elements fails;
- timing uses CUDA events around each call alone, after warm-up, with L2
  flushed before each sample (--hot to skip) and the GPU kept busy while the
  host issues the call (so Python's launch cost is not timed as GPU time),
  and reports the median (and min, p20-p80) of many samples, not a mean;
- TFLOP/s = 2*M*N*K / (ms * 1e9): ms -> s is 1e-3 and FLOP -> TFLOP is 1e-12
  (the seed divided by ms * 1e12, a factor 1000 too small).

The C harness (`build/tilekit bench`, `make bench`) is the authoritative
measurement; this script checks the Python path end to end.

    python3 python/bench.py --m 4096 --n 4096 --k 4096 [--kernel auto,k01_naive] [--out bf16]
"""
import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

NAIVE_MAX_FLOP = 2 * 4096 ** 3   # k01_naive is in the default list only up to this size


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--kernel", default=None,
                    help="comma-separated tilekit kernels ('auto' = auto-dispatch, 'all' = the whole registry); "
                         "default: auto, plus k01_naive up to 4096^3")
    ap.add_argument("--out", choices=["fp32", "bf16"], default="fp32", help="C type (default fp32)")
    ap.add_argument("--trans-a", action="store_true", help="A stored K x M, used as A.T")
    ap.add_argument("--trans-b", action="store_true", help="B stored N x K, used as B.T")
    ap.add_argument("--reps", type=int, default=20, help="timed samples per kernel (at most; default 20)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--budget", type=float, default=3.0, help="seconds of timing per kernel before stopping early")
    ap.add_argument("--hot", action="store_true", help="do not flush L2 between samples")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    for name in ("m", "n", "k", "reps"):
        if getattr(a, name) < 1:
            ap.error("--%s must be >= 1" % name)
    return a


def percentile(sorted_xs, q):
    """Linear-interpolated percentile, q in [0, 100]."""
    if len(sorted_xs) == 1:
        return sorted_xs[0]
    pos = (len(sorted_xs) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


# GPU cycles of busy-waiting queued before each sample's start event (about
# 0.25 ms): the host's Python-side cost of issuing the call (argument checks,
# ctypes; tens of microseconds) then overlaps the wait instead of showing up
# as idle GPU time between the events, so the events time the kernel alone.
SLEEP_CYCLES = 500000


def time_fn(torch, fn, args, flush_buf):
    """Median-centred timing: warm-up, then samples of fn alone between CUDA
    events (each preceded by an L2 flush unless --hot, and by a GPU sleep that
    hides the host's launch cost), until --reps or the time budget (with at
    least 5 samples)."""
    sleep = getattr(torch.cuda, "_sleep", None)
    for _ in range(args.warmup):
        fn()
    torch.cuda.synchronize()
    times, t0 = [], time.perf_counter()
    while len(times) < args.reps:
        if flush_buf is not None:
            flush_buf.zero_()   # overwrite 2x L2 so A and B start cold, as in the C harness
        if sleep is not None:
            sleep(SLEEP_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))   # ms
        if len(times) >= 5 and time.perf_counter() - t0 > args.budget:
            break
    times.sort()
    return {"median": percentile(times, 50), "min": times[0], "p20": percentile(times, 20),
            "p80": percentile(times, 80), "samples": len(times)}


def rel_error(torch, c, ref):
    """||c - ref||_F / ||ref||_F in fp64, and whether c holds any NaN/Inf."""
    c64, r64 = c.double(), ref.double()
    finite = bool(torch.isfinite(c64).all())
    return (torch.linalg.norm(c64 - r64) / torch.linalg.norm(r64)).item(), finite


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("python/bench.py needs PyTorch with CUDA (pip install torch)")
    if not torch.cuda.is_available():
        sys.exit("python/bench.py needs a CUDA GPU (torch.cuda.is_available() is False)")
    import tilekit

    torch.backends.cuda.matmul.allow_tf32 = False   # the fp32 reference must be a true fp32 product
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    M, N, K = args.m, args.n, args.k
    # Inputs scaled so the products stay O(1) whatever K is.
    A = (torch.randn(K, M) if args.trans_a else torch.randn(M, K)).to(dev, torch.bfloat16)
    B = (torch.randn(N, K) if args.trans_b else torch.randn(K, N)).div_(math.sqrt(K)).to(dev, torch.bfloat16)
    opA = A.t() if args.trans_a else A
    opB = B.t() if args.trans_b else B
    ref = torch.matmul(opA.float(), opB.float())
    out_dtype = torch.float32 if args.out == "fp32" else torch.bfloat16
    # The tolerance of the relative Frobenius error: fp32 out only differs in
    # summation order (~1e-6); bf16 out adds one rounding (2^-9 relative).
    tol = 1e-4 if args.out == "fp32" else 1e-2

    props = torch.cuda.get_device_properties(dev)
    l2 = getattr(props, "L2_cache_size", 0) or (50 << 20)
    flush_buf = None if args.hot else torch.empty(2 * l2 // 4 + 1, dtype=torch.float32, device=dev)

    if args.kernel is None:
        names = ["auto"] + (["k01_naive"] if 2 * M * N * K <= NAIVE_MAX_FLOP else [])
    elif args.kernel == "all":
        names = ["auto"] + [k["name"] for k in tilekit.kernels()]
    else:
        names = [s.strip() for s in args.kernel.split(",") if s.strip()]

    flop = 2.0 * M * N * K
    print("device: %s, %d SMs, torch %s, tilekit %s (%s)" % (props.name, props.multi_processor_count,
                                                             torch.__version__, tilekit.version(),
                                                             tilekit.library_path()))
    print("problem: C[%dx%d] %s = op(A) op(B), op_a=%s op_b=%s, K=%d, L2 %s, up to %d samples, median%s"
          % (M, N, args.out, "T" if args.trans_a else "N", "T" if args.trans_b else "N", K,
             "hot" if args.hot else "flushed", args.reps,
             "" if hasattr(torch.cuda, "_sleep") else " (no torch.cuda._sleep: host launch cost included)"))

    rows, failures = [], 0

    # torch.matmul on the same bf16 inputs: its output is bf16 (torch has no
    # bf16 x bf16 -> fp32 matmul), so its error is that of a bf16 rounding.
    t_out = torch.matmul(opA, opB)
    err, finite = rel_error(torch, t_out, ref)
    t = time_fn(torch, lambda: torch.matmul(opA, opB), args, flush_buf)
    rows.append(("torch.matmul (bf16 out)", t, err, "ok" if finite and err < 1e-2 else "FAIL"))
    torch_ms = t["median"]

    for name in names:
        kernel = None if name == "auto" else name
        label = name
        try:
            if kernel is None:
                label = "auto -> " + tilekit.select_kernel(opA, opB, out_dtype=out_dtype)
            s = tilekit.supports(opA, opB, out_dtype=out_dtype, kernel=kernel)
            if not s:
                rows.append((label, None, None, "skipped: " + s.reason))
                continue
            C = torch.full((M, N), float("nan"), dtype=out_dtype, device=dev)   # poison: beta = 0 must overwrite
            tilekit.gemm(opA, opB, out=C, kernel=kernel)
            torch.cuda.synchronize()
            err, finite = rel_error(torch, C, ref)
            ok = finite and err < tol
            failures += not ok
            t = time_fn(torch, lambda: tilekit.gemm(opA, opB, out=C, kernel=kernel), args, flush_buf)
            rows.append((label, t, err, "ok" if ok else "FAIL (tol %.0e%s)" % (tol, "" if finite else ", NaN/Inf")))
        except (tilekit.TilekitError, ValueError, TypeError) as e:
            failures += 1
            rows.append((label, None, None, "ERROR: %s" % e))

    head = ("kernel", "ms median", "ms min", "p20-p80 ms", "TFLOP/s", "x torch", "rel err", "check")
    table = []
    for label, t, err, status in rows:
        if t is None:
            table.append((label, "-", "-", "-", "-", "-", "-", status))
            continue
        table.append((label, "%.4f" % t["median"], "%.4f" % t["min"], "%.4f-%.4f" % (t["p20"], t["p80"]),
                      "%.1f" % (flop / (t["median"] * 1e9)), "%.3f" % (torch_ms / t["median"]),
                      "%.2e" % err, status))
    widths = [max(len(str(r[i])) for r in [head] + table) for i in range(len(head))]
    for r in [head] + table:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())
    print("TFLOP/s = 2*M*N*K / (median ms * 1e9); x torch = torch.matmul median / kernel median")
    if failures:
        print("%d kernel(s) failed the check against the fp32 product" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
