"""bench/torch_bench.py - tilekit inside PyTorch: per-call host overhead and a
patched Llama's step time, against torch on the same GPU.

overhead: back-to-back calls on small problems, where the host's cost of a
  call (argument checks, dispatch, launch) is what limits them. Each sample
  issues CALLS calls without waiting and times the host until the last one
  has been issued (host us/call), then until the GPU has finished them (wall
  us/call); the median of SAMPLES samples is printed, with p20-p80. Rows:
  torch.matmul (allocating its bf16 result), torch.matmul(out=), tilekit.gemm
  allocating a bf16 out, tilekit.gemm(out=), the same through the ctypes
  fallback, and tilekit.matmul (the torch custom op, autograd off).
llama: a transformers Llama with Llama-3-8B layer widths (hidden 4096,
  intermediate 14336, 32 heads, 8 KV heads, vocab 128256), random weights,
  bf16, LAYERS layers, batch x seq tokens: forward (no grad) and
  forward + backward (loss on random labels) times, median of STEPS steps
  between CUDA events after warm-up, unpatched and then tilekit.patch()ed.

    python3 bench/torch_bench.py [overhead|llama|all] [--calls N] [--samples N] [--layers N] [--seq N]
                                 [--batch N] [--steps N] [--compile]
Run from the repository root after `make` (or with tilekit installed).
"""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not os.environ.get("TILEKIT_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "python"))

import torch      # noqa: E402
import tilekit    # noqa: E402
from tilekit import _fallback  # noqa: E402


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def overhead(args):
    print("## per-call host overhead, back to back (%d calls per sample, %d samples; us per call)"
          % (args.calls, args.samples))
    print("| shape MxNxK | call | host us/call (median) | p20-p80 | wall us/call (median) |")
    print("|---|---|--:|--:|--:|")
    for (m, n, k) in ((64, 64, 64), (1, 4096, 4096)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        c16 = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        rows = [
            ("torch.matmul(a, b)", lambda: torch.matmul(a, b)),
            ("torch.matmul(a, b, out=c)", lambda: torch.matmul(a, b, out=c16)),
            ("tilekit.gemm(a, b, out_dtype=bf16)", lambda: tilekit.gemm(a, b, out_dtype=torch.bfloat16)),
            ("tilekit.gemm(a, b, c)", lambda: tilekit.gemm(a, b, c16)),
            ("tilekit.gemm(a, b, c), ctypes fallback", lambda: _fallback.gemm(a, b, c16)),
            ("tilekit.matmul(a, b) (torch op)", lambda: tilekit.matmul(a, b)),
        ]
        with torch.no_grad():
            for name, fn in rows:
                for _ in range(args.calls):   # warm-up: handles, caches, allocator
                    fn()
                torch.cuda.synchronize()
                host, wall = [], []
                for _ in range(args.samples):
                    t0 = time.perf_counter()
                    for _ in range(args.calls):
                        fn()
                    t1 = time.perf_counter()
                    torch.cuda.synchronize()
                    t2 = time.perf_counter()
                    host.append((t1 - t0) / args.calls * 1e6)
                    wall.append((t2 - t0) / args.calls * 1e6)
                print("| %dx%dx%d | `%s` | %.2f | %.2f-%.2f | %.2f |" % (
                    m, n, k, name, statistics.median(host), pct(host, 20), pct(host, 80), statistics.median(wall)))
    print()


def llama_model(args):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                      num_hidden_layers=args.layers, vocab_size=128256, max_position_embeddings=8192)
    torch.manual_seed(0)
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    return model


def time_steps(fn, steps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(steps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ms.append(e0.elapsed_time(e1))
    return statistics.median(ms), pct(ms, 20), pct(ms, 80)


def llama(args):
    model = llama_model(args)
    ids = torch.randint(0, 128256, (args.batch, args.seq), device="cuda")
    print("## Llama-3-8B widths, %d layers, batch %d x seq %d, bf16, random weights (ms, median of %d; p20-p80)"
          % (args.layers, args.batch, args.seq, args.steps))
    print("| model | forward | forward + backward |")
    print("|---|--:|--:|")
    results = {}
    for label in ("torch (unpatched)", "tilekit.patch"):
        if label == "tilekit.patch":
            tilekit.patch(model)
        run = torch.compile(model, fullgraph=True) if args.compile else model
        if args.compile:
            torch._dynamo.reset()

        def fwd():
            with torch.no_grad():
                run(ids, use_cache=False)

        def fwd_bwd():
            out = run(ids, labels=ids, use_cache=False)
            out.loss.backward()
            model.zero_grad(set_to_none=True)
        f = time_steps(fwd, args.steps)
        fb = time_steps(fwd_bwd, args.steps)
        results[label] = (f, fb)
        print("| %s%s | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) |" % (label, ", compiled" if args.compile else "",
                                                              *f, *fb))
    (f0, fb0), (f1, fb1) = results["torch (unpatched)"], results["tilekit.patch"]
    print("\npatched / unpatched: forward %.3f, forward + backward %.3f (below 1: tilekit faster)\n"
          % (f1[0] / f0[0], fb1[0] / fb0[0]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", nargs="?", default="all", choices=["overhead", "llama", "all"])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--compile", action="store_true", help="llama: time torch.compile(fullgraph=True) models")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    print("%s, torch %s, tilekit %s (backend: %s, %s)\n" % (torch.cuda.get_device_name(), torch.__version__,
                                                             tilekit.__version__, tilekit.backend(),
                                                             os.path.dirname(tilekit.__file__)))
    if args.what in ("overhead", "all"):
        overhead(args)
    if args.what in ("llama", "all"):
        llama(args)


if __name__ == "__main__":
    main()
