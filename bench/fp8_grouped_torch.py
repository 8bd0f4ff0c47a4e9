"""bench/fp8_grouped_torch.py - tilekit.scaled_grouped_mm (issue 40: a
mixture of experts' FP8 forward) against torch._scaled_grouped_mm and a
Python loop of per-expert tilekit.scaled_mm, e4m3 with row-wise scales
(torch's mode), bf16 out, on MoE shapes.

A line is G experts, TOTAL routed tokens split over them by --dist (the
lab's sizes: bench/grouped_suite.py, skewed by default, order from --seed),
each size rounded down to a multiple of --align (torch's grouped kernels
may ask 16; 1 leaves them), and the experts' N x K weights (nn.Linear's,
K-major: b = W.transpose(-2, -1)). x (M x K) and W are random bf16
quantized by tilekit.quantize_fp8(mode="row"). Each call is checked first
against an fp32 product of the dequantized operands, group by group (max
|y - ref| / max |ref| <= torch_bench.TOL; a call torch refuses or that
mismatches is reported and not timed), then the three are timed as
torch_bench.py's grouped mode times them (interleaved, L2 flushed, the GPU
held so that the events time the GPU's work; WARMUP calls, median of
--samples). tilekit runs with check_offs=False (no host read of offs); the
loop's group bounds are read on the host once, before timing (an MoE layer
would wait for them), and its outputs are left per group (no copy into one
tensor): the loop's figures are a bound it would not reach. TFLOP/s count
the real rows: sum over groups of 2 m_g N K.

    python3 bench/fp8_grouped_torch.py [--shapes G:TOTAL:NxK,...] [--dist skewed|balanced|empty]
                                       [--align N] [--seed S] [--samples N] [--lines N] [--json FILE]

Default shapes: DeepSeek-V3-like (N x K 4096x7168, 7168x2048, 2112x7168;
8 experts 4096 tokens, 64 experts 16384, 256 experts 32768) and
Mixtral-like (8 experts, 14336x4096 at 4096 and 16384 tokens, 4096x14336
at 16384). Run from the repository root after `make` (or with tilekit
installed).
"""
import argparse
import json
import statistics
import sys

import torch_bench as tb   # puts python/ and bench/ on the path, imports torch and tilekit
from torch_bench import tilekit, torch
import grouped_suite

DSV3 = [(g, t, n, k) for n, k in ((4096, 7168), (7168, 2048), (2112, 7168))
        for g, t in ((8, 4096), (64, 16384), (256, 32768))]
MIXTRAL = [(8, 4096, 14336, 4096), (8, 16384, 14336, 4096), (8, 16384, 4096, 14336)]


def parse_shapes(text):
    """[(G, TOTAL, N, K)] of "G:TOTAL:NxK,..."."""
    out = []
    for item in text.split(","):
        g, t, nk = item.split(":")
        n, k = nk.split("x")
        out.append((int(g), int(t), int(n), int(k)))
    return out


def operands(g, sizes, n, k):
    """e4m3 x (M x K) and W (G x N x K) with their row scales, as
    scaled_grouped_mm takes them, and offs."""
    m = sum(sizes)
    x = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    w = (torch.randn(g * n, k, device="cuda") / 8).to(torch.bfloat16)
    qa, sa = tilekit.quantize_fp8(x, torch.float8_e4m3fn, mode="row")
    qw, sw = tilekit.quantize_fp8(w, torch.float8_e4m3fn, mode="row")
    offs = torch.tensor(sizes, device="cuda").cumsum(0).to(torch.int32)
    return qa, qw.view(g, n, k).transpose(-2, -1), sa.view(-1), sw.view(g, n), offs


def reference(a, b, sa, sb, bounds):
    """fp32 products of the dequantized operands, group by group (rows no group owns: 0)."""
    out = torch.zeros(a.shape[0], b.shape[2], device="cuda")
    for e, (s, t) in enumerate(bounds):
        if t > s:
            out[s:t] = (a[s:t].float() * sa[s:t, None]) @ (b[e].float() * sb[e][None, :])
    return out


def loop_call(a, b, sa, sb, bounds):
    """One tilekit.scaled_mm per non-empty group (bounds read on the host)."""
    parts = [(a[s:t], b[e], sa[s:t, None], sb[e][None, :]) for e, (s, t) in enumerate(bounds) if t > s]
    return lambda: [tilekit.scaled_mm(*p) for p in parts]


def line(g, total, n, k, args):
    sizes = [s // args.align * args.align for s in grouped_suite.group_sizes("%d:%d:%s" % (g, total, args.dist),
                                                                             args.seed)]
    a, b, sa, sb, offs = operands(g, sizes, n, k)
    ends = offs.tolist()
    bounds = list(zip([0] + ends[:-1], ends))
    ref = reference(a, b, sa, sb, bounds)
    calls = [("tilekit", lambda: tilekit.scaled_grouped_mm(a, b, sa, sb, offs, check_offs=False)),
             ("torch", lambda: torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16)),
             ("loop", loop_call(a, b, sa, sb, bounds))]
    r = {"G": g, "M": sum(sizes), "N": n, "K": k, "sizes": sizes, "flop": 2.0 * sum(sizes) * n * k}
    timed = []
    for name, fn in calls:
        y, refused = tb.attempt(fn)
        if y is not None:
            y = torch.cat(y) if isinstance(y, list) else y
            err = tb.rel_err(y, torch.cat([ref[s:t] for s, t in bounds if t > s]) if name == "loop" else ref)
            r[name + "_err"] = err
            if not err <= tb.TOL:
                refused = "mismatch: max rel err %.3g > %g" % (err, tb.TOL)
        if refused:
            r[name + "_not_timed"] = refused
            continue
        timed.append((name, fn))
    ms = tb.time_interleaved(timed, args.samples, tb.flusher()) if timed else {}
    for name, xs in ms.items():
        r[name + "_ms"] = statistics.median(xs)
        r[name + "_tflops"] = r["flop"] / (r[name + "_ms"] * 1e-3) / 1e12
    return r


def cell(r, name):
    if name + "_ms" in r:
        return "%.3f | %.1f" % (r[name + "_ms"], r[name + "_tflops"])
    return "- | -"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", help="G:TOTAL:NxK,... (default: DeepSeek-V3-like and Mixtral-like lines)")
    ap.add_argument("--dist", default="skewed", choices=grouped_suite.DISTS)
    ap.add_argument("--align", type=int, default=16, help="each group's rows rounded down to a multiple of this")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--lines", type=int, default=0, help="the first N lines only (0: all)")
    ap.add_argument("--json", help="every line's figures and refusals")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(args.seed)
    shapes = parse_shapes(args.shapes) if args.shapes else DSV3 + MIXTRAL
    shapes = shapes[:args.lines] if args.lines else shapes
    print("%s, torch %s, tilekit %s (backend: %s); e4m3, row-wise scales, bf16 out, %s groups, align %d\n"
          % (torch.cuda.get_device_name(), torch.__version__, tilekit.__version__, tilekit.backend(), args.dist,
             args.align))
    print("| G | M | N x K | tilekit ms | TFLOP/s | torch ms | TFLOP/s | loop ms | TFLOP/s | x torch | x loop |")
    print("|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    rows, bad = [], 0
    for g, total, n, k in shapes:
        r = line(g, total, n, k, args)
        rows.append(r)
        ratio = ["%.2f" % (r[o + "_ms"] / r["tilekit_ms"]) if "tilekit_ms" in r and o + "_ms" in r else "-"
                 for o in ("torch", "loop")]
        print("| %d | %d | %dx%d | %s | %s | %s | %s | %s |" % (g, r["M"], n, k, cell(r, "tilekit"), cell(r, "torch"),
                                                                cell(r, "loop"), ratio[0], ratio[1]))
        for name in ("tilekit", "torch", "loop"):
            if name + "_not_timed" in r:
                print("  %s not timed: %s" % (name, r[name + "_not_timed"]))
        bad += "tilekit_ms" not in r
        sys.stdout.flush()
    print("\nx torch, x loop: their median / tilekit's (> 1: tilekit faster); TFLOP/s from the rows routed.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "args": vars(args),
                       "lines": rows}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
