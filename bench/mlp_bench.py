"""bench/mlp_bench.py - issue 39's fused epilogues in PyTorch against torch
eager on the same GPU, in the same process: three markdown tables with the
device's name, and --json.

linear: (a) Linear + bias + GELU, tilekit.linear(x, w, b, act) against
  F.gelu(F.linear(x, w, b)) (approximate="tanh" for GPT-2, whose
  activation is gelu_new; erf for BERT), forward, at GPT-2 small and XL and
  BERT base and large MLP widths (hidden -> 4 x hidden), TOKENS tokens.
gated: (b) Llama-3-8B's gate/up + SwiGLU (4096 -> 2 x 14336):
  tilekit.gemm_epilogue(x, Wg, h, trans_b=True, epilogue="gated",
  activation="silu", b_up=Wu) (the fused MLP's forward 1, without aux as in
  inference) against torch's two matmuls and F.silu(g) * u, tokens 1, 16,
  512, 2048, 8192; decode rows (<= 16 tokens) add the read rate of Wg + Wu
  (the bytes that matter there) as a % of the DRAM read bandwidth, measured
  at start as the lab measures it (1 GiB read once, median of 10; `tilekit
  bench` prints its own probe's figure as "DRAM read: N GB/s measured": pass
  it with --dram-gbs to use it instead).
llama: (c) a transformers LlamaForCausalLM with Llama-3-8B's layer widths
  (hidden 4096, intermediate 14336, 32 heads, 8 KV heads), --layers 2,
  vocab --vocab 32000 (smaller than Llama-3's 128256 so that the LM head
  does not dominate), batch --batch 2 x --seq 1024 tokens, random weights,
  bf16, eager: forward (no grad) and forward + backward (loss on the ids as
  labels) times, median of --steps steps between CUDA events after 3
  warm-ups (torch_bench.py's time_steps), stock torch against a deep copy
  patched with tilekit.patch(fuse_mlp=True) (its MLPs fused, its other
  Linears on tilekit); the max abs and max rel (max |a - b| / max |b|)
  error of the logits and, over all parameters, of the gradients.
host: the host's cost of one call issued back to back (torch_bench.py's
  overhead method) at decode sizes: tilekit.linear with bias and GELU,
  gemm_epilogue's gated call, tilekit.gated_mlp, against torch's.

(a) and (b) are timed as torch_bench.py's grouped mode times (its
helpers): each call checked once against torch (max |tilekit - torch| /
max |torch|, TOL), then the two interleaved, --samples rounds, the L2
flushed by a 256 MiB read before each call and the GPU held ~100 us, or
four times the host's time to issue the flush and the call where that is
longer (torch_bench.py's time_interleaved), so that the events time the
GPU's work; x torch = torch median / tilekit median
(> 1: tilekit faster).

    python3 bench/mlp_bench.py [linear|gated|llama|host|all] [--samples N] [--steps N] [--layers N]
                               [--batch N] [--seq N] [--vocab N] [--dram-gbs X] [--json FILE]

Run from the repository root after `make` (or with tilekit installed); needs
torch with CUDA, and transformers for llama.
"""
import argparse
import copy
import json
import os
import shlex
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not os.environ.get("TILEKIT_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch      # noqa: E402
import tilekit    # noqa: E402
import torch_bench as tb  # noqa: E402 (its timing helpers)

F = torch.nn.functional
TOL = 2e-2            # tilekit rounds once from fp32; torch rounds g, u (and z) to bf16 first
TOKENS = (512, 1024, 2048, 4096, 8192)
LINEAR_WIDTHS = (("GPT-2 small", 768, "gelu_tanh"), ("GPT-2 XL", 1600, "gelu_tanh"),
                 ("BERT base", 768, "gelu"), ("BERT large", 1024, "gelu"))
GATED_TOKENS = (1, 16, 512, 2048, 8192)
HIDDEN, INTER = 4096, 14336          # Llama-3-8B
DECODE = 16                          # rows at or below: decode (the DRAM read rate reported)


def randn(*shape, scale=1.0):
    return (torch.randn(*shape, device="cuda") * scale).to(torch.bfloat16)


def dram_read_gbs():
    """GB/s of one read of 1 GiB, median of 10 after 2 (the lab's probe's
    method, src/lab/lab_bench.c, with torch's sum as the reader)."""
    buf = torch.ones((1 << 30) // 4, device="cuda", dtype=torch.float32)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for i in range(12):
        e0.record()
        buf.sum()
        e1.record()
        e1.synchronize()
        if i >= 2:
            ms.append(e0.elapsed_time(e1))
    gbs = buf.numel() * 4 / (statistics.median(ms) * 1e6)
    del buf
    torch.cuda.empty_cache()
    return gbs


def compare(label, yard, mine, flop, samples, flush, extra=None):
    """One line: both results checked once, then timed interleaved."""
    r = {"label": label, "flop": flop, "note": ""}
    ref, got = yard(), mine()
    torch.cuda.synchronize()
    r["max_rel_err"] = tb.rel_err(got, ref)
    if not r["max_rel_err"] <= TOL:
        r["note"] = "MISMATCH: max rel err %.3g (tolerance %g)" % (r["max_rel_err"], TOL)
    del ref, got
    info = {}
    ms = tb.time_interleaved([("torch", yard), ("tilekit", mine)], samples, flush, info=info)
    for name, xs in ms.items():
        med = statistics.median(xs)
        r[name] = {"ms_median": med, "ms_p20": tb.pct(xs, 20), "ms_p80": tb.pct(xs, 80),
                   "tflops": flop / med / 1e9, "host_us": info["host_us"][name]}
    r["gpu_hold_cycles"] = info["hold_cycles"]
    r["ratio_torch"] = r["torch"]["ms_median"] / r["tilekit"]["ms_median"]
    r.update(extra or {})
    return r


def linear_table(args, flush):
    print("## (a) Linear + bias + GELU, forward: tilekit.linear(x, w, b, act) against F.gelu(F.linear(x, w, b))")
    print("| model | tokens | K -> N | act | torch ms | tilekit ms | x torch | torch TFLOP/s | tilekit TFLOP/s "
          "| max rel err | note |")
    print("|---|--:|---|---|--:|--:|--:|--:|--:|--:|---|")
    rows = []
    with torch.no_grad():
        for model, hidden, act in LINEAR_WIDTHS:
            n = 4 * hidden
            w, b = randn(n, hidden, scale=hidden ** -0.5), randn(n, scale=0.1)
            approx = "tanh" if act == "gelu_tanh" else "none"
            for t in TOKENS:
                x = randn(t, hidden)
                r = compare("%s %d" % (model, t), lambda: F.gelu(F.linear(x, w, b), approximate=approx),
                            lambda: tilekit.linear(x, w, b, act), 2 * t * hidden * n, args.samples, flush,
                            {"model": model, "tokens": t, "k": hidden, "n": n, "activation": act})
                rows.append(r)
                print("| %s | %d | %d -> %d | %s | %.3f | %.3f | %.2f | %.1f | %.1f | %.1e | %s |" % (
                    model, t, hidden, n, act, r["torch"]["ms_median"], r["tilekit"]["ms_median"], r["ratio_torch"],
                    r["torch"]["tflops"], r["tilekit"]["tflops"], r["max_rel_err"], r["note"]))
                sys.stdout.flush()
                del x
    print()
    return rows


def gated_table(args, flush, dram):
    print("## (b) Llama-3-8B gate/up + SwiGLU (%d -> 2 x %d), forward, against torch's two matmuls and "
          "F.silu(g) * u" % (HIDDEN, INTER))
    print("(decode rows, <= %d tokens: Wg + Wu bytes / time as a %% of the DRAM read bandwidth, %.0f GB/s %s)"
          % (DECODE, dram, "given (--dram-gbs)" if args.dram_gbs else "measured at start"))
    print("| tokens | torch ms | tilekit ms | x torch | torch TFLOP/s | tilekit TFLOP/s | torch DRAM % "
          "| tilekit DRAM % | max rel err | note |")
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|")
    from tilekit import _torch_fused
    fused = _torch_fused.GATED_FORWARD
    print("(tilekit: %s)" % ("one gemm_epilogue(epilogue=\"gated\"), gated_mlp's forward" if fused else
                             "gated_mlp's unfused forward (--unfused): two tilekit.gemm into z's halves, then "
                             "F.silu(zg) * zu"))
    wg, wu = randn(INTER, HIDDEN, scale=HIDDEN ** -0.5), randn(INTER, HIDDEN, scale=HIDDEN ** -0.5)
    weight_bytes = 2 * INTER * HIDDEN * 2
    rows = []
    with torch.no_grad():
        for t in GATED_TOKENS:
            x = randn(t, HIDDEN)
            h = torch.empty(t, INTER, device="cuda", dtype=torch.bfloat16)

            if fused:
                def mine():
                    return tilekit.gemm_epilogue(x, wg, h, trans_b=True, epilogue="gated", activation="silu",
                                                 b_up=wu)
            else:   # gated_mlp's unfused forward (_torch_fused.GATED_FORWARD): two products into z, torch's SwiGLU
                z = torch.empty(t, 2 * INTER, device="cuda", dtype=torch.bfloat16)

                def mine():
                    tilekit.gemm(x, wg, z[:, :INTER], trans_b=True)
                    tilekit.gemm(x, wu, z[:, INTER:], trans_b=True)
                    return F.silu(z[:, :INTER]) * z[:, INTER:]
            r = compare("gate/up %d" % t, lambda: F.silu(x @ wg.t()) * (x @ wu.t()), mine, 2 * t * HIDDEN * 2 * INTER,
                        args.samples, flush, {"tokens": t, "k": HIDDEN, "n": 2 * INTER, "weight_bytes": weight_bytes})
            cells = ["", ""]
            if t <= DECODE:
                for i, name in enumerate(("torch", "tilekit")):
                    pct = 100.0 * weight_bytes / (r[name]["ms_median"] * 1e6) / dram
                    r[name]["dram_pct"] = pct
                    cells[i] = "%.1f" % pct
            rows.append(r)
            print("| %d | %.3f | %.3f | %.2f | %.1f | %.1f | %s | %s | %.1e | %s |" % (
                t, r["torch"]["ms_median"], r["tilekit"]["ms_median"], r["ratio_torch"], r["torch"]["tflops"],
                r["tilekit"]["tflops"], cells[0], cells[1], r["max_rel_err"], r["note"]))
            sys.stdout.flush()
    print()
    return rows


def max_errors(a, b):
    """(max |a - b|, max |a - b| / max |b|)."""
    diff = (a.float() - b.float()).abs().max().item()
    top = b.float().abs().max().item()
    return diff, diff / top if top else float("inf") if diff else 0.0


def llama_table(args):
    ref = tb.llama_model(args, args.vocab)   # Llama-3-8B's widths (HIDDEN, INTER)
    pat = tilekit.patch(copy.deepcopy(ref), fuse_mlp=True)
    fused = sum(isinstance(m, tilekit.nn.FusedGatedMLP) for m in pat.modules())
    from tilekit import _torch_fused
    print("(the gated MLP's route: forward %s, backward %s)"
          % ("fused (\"gated\")" if _torch_fused.GATED_FORWARD else "unfused",
             "fused (\"gated_backward\")" if _torch_fused.GATED_BACKWARD else "unfused"))
    ids = torch.randint(0, args.vocab, (args.batch, args.seq), device="cuda")
    print("## (c) LlamaForCausalLM, Llama-3-8B widths (hidden %d, intermediate %d, 32 heads, 8 KV heads), %d layers, "
          "vocab %d, batch %d x %d tokens, bf16, eager (ms, median of %d steps; p20-p80)"
          % (HIDDEN, INTER, args.layers, args.vocab, args.batch, args.seq, args.steps))
    print("| model | forward | forward + backward |")
    print("|---|--:|--:|")
    times = {}
    for label, model in (("torch (stock)", ref), ("tilekit.patch(fuse_mlp=True), %d MLPs fused" % fused, pat)):
        def fwd(model=model):
            with torch.no_grad():
                model(ids, use_cache=False)

        def fwd_bwd(model=model):
            model(ids, labels=ids, use_cache=False).loss.backward()
            model.zero_grad(set_to_none=True)
        f, fb = tb.time_steps(fwd, args.steps), tb.time_steps(fwd_bwd, args.steps)
        times[label] = {"forward_ms": f[0], "forward_p20": f[1], "forward_p80": f[2], "forward_backward_ms": fb[0],
                        "forward_backward_p20": fb[1], "forward_backward_p80": fb[2]}
        print("| %s | %.2f (%.2f-%.2f) | %.2f (%.2f-%.2f) |" % (label, *f, *fb))
    (t0, t1) = times.values()
    ratio = {"forward": t0["forward_ms"] / t1["forward_ms"],
             "forward_backward": t0["forward_backward_ms"] / t1["forward_backward_ms"]}
    print("\nx torch (stock median / patched median, > 1: patched faster): forward %.3f, forward + backward %.3f"
          % (ratio["forward"], ratio["forward_backward"]))
    out_ref = ref(ids, labels=ids, use_cache=False)
    out_ref.loss.backward()
    out = pat(ids, labels=ids, use_cache=False)
    out.loss.backward()
    logits = max_errors(out.logits, out_ref.logits)
    grads = dict(ref.named_parameters())
    worst = (0.0, 0.0, None)
    for k, p in pat.named_parameters():
        if grads[k].grad is not None:
            e = max_errors(p.grad, grads[k].grad)
            if e[1] > worst[1]:
                worst = (e[0], e[1], k)
    print("logits: max abs err %.3g, max rel err %.3g; gradients: worst max rel err %.3g (max abs %.3g) at %s; "
          "loss %.5f (stock %.5f)\n" % (logits[0], logits[1], worst[1], worst[0], worst[2], out.loss.item(),
                                        out_ref.loss.item()))
    return {"layers": args.layers, "vocab": args.vocab, "batch": args.batch, "seq": args.seq, "steps": args.steps,
            "fused_mlps": fused, "times": times, "ratio_torch": ratio,
            "logits_max_abs_err": logits[0], "logits_max_rel_err": logits[1], "grad_worst_max_rel_err": worst[1],
            "grad_worst_max_abs_err": worst[0], "grad_worst_param": worst[2], "loss": out.loss.item(),
            "loss_stock": out_ref.loss.item()}


def host_table(args):
    """Host us per call issued back to back (no wait), 200 calls a sample, median of 30."""
    print("## host cost per call, back to back (us; median of 30 samples of 200 calls)")
    print("| case | call | host us/call | wall us/call |")
    print("|---|---|--:|--:|")
    i = INTER // 4   # the weights' sizes matter little here: the host's work does not depend on them
    x, w, b = randn(1, HIDDEN), randn(HIDDEN, HIDDEN, scale=0.02), randn(HIDDEN)
    wg, wu, wd = randn(i, HIDDEN, scale=0.02), randn(i, HIDDEN, scale=0.02), randn(HIDDEN, i, scale=0.02)
    h = torch.empty(1, i, device="cuda", dtype=torch.bfloat16)
    cases = [("1 x %d -> %d, bias, gelu" % (HIDDEN, HIDDEN), [
        ("F.gelu(F.linear(x, w, b))", lambda: F.gelu(F.linear(x, w, b))),
        ("tilekit.linear(x, w, b, 'gelu')", lambda: tilekit.linear(x, w, b, "gelu")),
        ("tilekit.linear(x, w) (no epilogue: tilekit::mm)", lambda: tilekit.linear(x, w))]),
        ("1 x %d -> 2 x %d, gated" % (HIDDEN, i), [
            ("F.silu(x @ wg.T) * (x @ wu.T)", lambda: F.silu(x @ wg.t()) * (x @ wu.t())),
            ("tilekit.gemm_epilogue(epilogue='gated')",
             lambda: tilekit.gemm_epilogue(x, wg, h, trans_b=True, epilogue="gated", activation="silu", b_up=wu))]),
        ("1 x %d, gated MLP (I = %d)" % (HIDDEN, i), [
            ("torch: down(silu(gate(x)) * up(x))", lambda: F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd)),
            ("tilekit.gated_mlp", lambda: tilekit.gated_mlp(x, wg, wu, wd))])]
    rows = []
    with torch.no_grad():
        for case, calls in cases:
            for name, fn in calls:
                for _ in range(200):
                    fn()
                torch.cuda.synchronize()
                host, wall = [], []
                for _ in range(30):
                    t0 = time.perf_counter()
                    for _ in range(200):
                        fn()
                    t1 = time.perf_counter()
                    torch.cuda.synchronize()
                    host.append((t1 - t0) / 200 * 1e6)
                    wall.append((time.perf_counter() - t0) / 200 * 1e6)
                rows.append({"case": case, "call": name, "host_us": statistics.median(host),
                             "wall_us": statistics.median(wall)})
                print("| %s | `%s` | %.1f | %.1f |" % (case, name, rows[-1]["host_us"], rows[-1]["wall_us"]))
    print()
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", nargs="?", default="all", choices=["linear", "gated", "llama", "host", "all"])
    ap.add_argument("--samples", type=int, default=20, help="linear, gated: timed rounds")
    ap.add_argument("--steps", type=int, default=10, help="llama: timed steps")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--gated-epilogue", action="store_true",
                    help="gated, llama: the gated MLP's forward and backward through the gated epilogue kinds "
                         "(tilekit._torch_fused.GATED_FORWARD, GATED_BACKWARD = True: the default)")
    ap.add_argument("--unfused", action="store_true",
                    help="gated, llama: the gated MLP unfused both ways (GATED_FORWARD, GATED_BACKWARD = False)")
    ap.add_argument("--dram-gbs", type=float, default=0.0, help="gated: the DRAM read GB/s (default: measured)")
    ap.add_argument("--json", help="every row and figure, the command and the gated routes "
                                   "(bench/mlp_readme.py writes README.md's section from it)")
    args = ap.parse_args()
    from tilekit import _torch_fused
    if args.gated_epilogue or args.unfused:
        _torch_fused.GATED_FORWARD = _torch_fused.GATED_BACKWARD = bool(args.gated_epilogue)
    torch.backends.cuda.matmul.allow_tf32 = False
    device = torch.cuda.get_device_name()
    print("%s, torch %s, tilekit %s (backend: %s, %s)\n" % (device, torch.__version__, tilekit.__version__,
                                                             tilekit.backend(), os.path.dirname(tilekit.__file__)))
    doc = {"tool": "mlp_bench.py " + args.what, "device": device, "torch": torch.__version__,
           "tilekit": tilekit.__version__, "backend": tilekit.backend(), "samples": args.samples,
           "l2_flush_bytes": tb.FLUSH_BYTES, "gpu_hold_cycles_min": tb.HOLD_CYCLES, "tolerance": TOL,
           "command": "python3 bench/mlp_bench.py " + " ".join(shlex.quote(x) for x in sys.argv[1:]),
           "gated_routes": {"forward": _torch_fused.GATED_FORWARD, "backward": _torch_fused.GATED_BACKWARD}}
    try:
        if args.what in ("linear", "gated", "all"):
            flush = tb.flusher()
            if args.what in ("linear", "all"):
                doc["linear_bias_gelu"] = linear_table(args, flush)
            if args.what in ("gated", "all"):
                doc["dram_read_gbs"] = args.dram_gbs or dram_read_gbs()
                doc["dram_read_source"] = "--dram-gbs" if args.dram_gbs else "measured (1 GiB read by torch.sum)"
                doc["gate_up_swiglu"] = gated_table(args, flush, doc["dram_read_gbs"])
            del flush
            torch.cuda.empty_cache()
        if args.what in ("host", "all"):
            doc["host"] = host_table(args)
        if args.what in ("llama", "all"):
            doc["llama"] = llama_table(args)
    finally:
        if args.json:
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=1)
    bad = [r["label"] for key in ("linear_bias_gelu", "gate_up_swiglu") for r in doc.get(key, []) if r["note"]]
    for label in bad:
        print("mismatch: " + label)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
