"""bench/torch_bench.py - tilekit inside PyTorch: per-call host overhead, a
patched Llama's step time, and grouped and batched products, against torch
on the same GPU.

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

grouped: every rows and k line of a shape suite (default bench/shapes/moe.txt;
  masked lines are left out, torch having no such product, and said so;
  batch lines are timed as bmm's), its tensors as an MoE layer holds them:
  rows-grouped a = the tokens (total M x K, contiguous), b = W.transpose(-2,
  -1) of the experts' weights W (G x N x K, contiguous); k-grouped (the
  weight gradient, `t n`) a = dY.t() (dY total K x M), b = X (total K x N);
  offs the int32 cumulative ends on the GPU, the group sizes the lab's for
  the SPEC and --seed (grouped_suite.py). torch._grouped_mm(a, b, offs=offs,
  out_dtype=torch.bfloat16) and tilekit.grouped_mm(a, b, offs=offs) are
  checked against each other once (max |tilekit - torch| / max |torch|, a
  mismatch above TOL fails the line, not the run; where torch refuses a
  line, its refusal is recorded and tilekit is checked against a loop of
  torch.mm over the groups instead), then timed interleaved: WARMUP calls
  each, then SAMPLES rounds of one call each between CUDA events, L2
  flushed before every call by reading a 256 MiB buffer (as lab_bench.c's
  flush: a read, since a write leaves L2 full of dirty lines whose
  write-back the timed call would pay), then the GPU held for about 100 us
  (torch.cuda._sleep) so that the host has issued the call before the first
  event is reached: the events time the GPU's work, not a gap while the host
  is still issuing it (without it, tilekit's 10-30 us calls read up to 2.7x
  slower in some runs and not in others, its Python call costing 30 us of
  host time to torch's 20; docs/NOTES.md session 25; the host's cost is the
  overhead mode's; --host-timed leaves the hold out). Table: TFLOP/s of both (median),
  x torch = torch median / tilekit median (> 1: tilekit faster), the max
  relative error; summary: the geometric mean of x torch over the lines
  both measured and agreed on, the min and its line, the lines below 0.9x.
  --lines N: the first N lines only. Exit 1 when a line failed (mismatch,
  tilekit refused or failed).
bmm: attention-like batched products (batch x heads 8 to 256), for each
  (B, M, L, d) of BMM_SHAPES: Q K^T, a (B, M, d) @ b.transpose(-2, -1) of
  b (B, L, d), and P V, a (B, M, L) @ b (B, L, d); torch.bmm against
  tilekit.bmm, the same method and table, geomean x torch.bmm.

    python3 bench/torch_bench.py [overhead|llama|grouped|bmm|all] [--calls N] [--samples N] [--layers N]
                                 [--seq N] [--batch N] [--steps N] [--compile] [--suite FILE] [--seed S]
                                 [--lines N] [--json FILE] [--host-timed]
all: overhead and llama. --samples: 30 for overhead, 10 for grouped and bmm.
Run from the repository root after `make` (or with tilekit installed).
"""
import argparse
import itertools
import json
import math
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if not os.environ.get("TILEKIT_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch      # noqa: E402
import tilekit    # noqa: E402
from tilekit import _fallback  # noqa: E402
import grouped_suite  # noqa: E402

WARMUP = 2                  # grouped, bmm: untimed calls of each before the samples
FLUSH_BYTES = 256 << 20     # the L2 flush's read: over 4x an H100's or H200's L2
TOL = 1e-2                  # max |tilekit - torch| / max |torch|: two bf16 roundings of one fp32 sum differ by 2^-8
CHUNK = 1 << 28             # elements compared at once (a DeepSeek dW_up's C has 7.5e9)
BMM_SHAPES = ((8, 4096, 4096, 128), (32, 1024, 1024, 64), (64, 512, 512, 128), (128, 2048, 2048, 64),
              (256, 128, 128, 64), (256, 512, 512, 128), (16, 4096, 128, 64), (32, 128, 4096, 128))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def overhead_rows():
    """(case, [(call, fn)]): the dense calls at two shapes, then a grouped
    call (8 groups of 64 rows, 256 x 256 weights) and a bmm (8 x 64^3),
    each against its torch op; shapes small enough that the host's time,
    not the GPU's, is what back-to-back calls measure."""
    import tilekit._torch_ops  # noqa: F401 (registers torch.ops.tilekit)
    for (m, n, k) in ((64, 64, 64), (1, 4096, 4096)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        c16 = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        yield "%dx%dx%d" % (m, n, k), [
            ("torch.matmul(a, b)", lambda: torch.matmul(a, b)),
            ("torch.matmul(a, b, out=c)", lambda: torch.matmul(a, b, out=c16)),
            ("tilekit.gemm(a, b, out_dtype=bf16)", lambda: tilekit.gemm(a, b, out_dtype=torch.bfloat16)),
            ("tilekit.gemm(a, b, c)", lambda: tilekit.gemm(a, b, c16)),
            ("tilekit.gemm(a, b, c), ctypes fallback", lambda: _fallback.gemm(a, b, c16)),
            ("tilekit.matmul(a, b) (torch op)", lambda: tilekit.matmul(a, b)),
        ]
    g, rows, n, k = 8, 64, 256, 256
    x = torch.randn(g * rows, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(g, n, k, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)
    offs = torch.arange(1, g + 1, device="cuda", dtype=torch.int32) * rows
    y = torch.empty(g * rows, n, device="cuda", dtype=torch.bfloat16)
    yield "grouped %d x %d rows, %dx%d" % (g, rows, n, k), [
        ("torch._grouped_mm(x, w, offs)", lambda: torch._grouped_mm(x, w, offs)),
        ("tilekit.grouped_mm(x, w, offs)", lambda: tilekit.grouped_mm(x, w, offs)),
        ("torch.ops.tilekit.grouped_mm (custom op)", lambda: torch.ops.tilekit.grouped_mm(x, w, offs)),
        ("tilekit.gemm_grouped(x, w, offs, y)", lambda: tilekit.gemm_grouped(x, w, offs, y)),
    ]
    p = torch.randn(8, 64, 64, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(8, 64, 64, device="cuda", dtype=torch.bfloat16)
    yield "bmm 8 x 64x64x64", [
        ("torch.bmm(p, q)", lambda: torch.bmm(p, q)),
        ("tilekit.bmm(p, q)", lambda: tilekit.bmm(p, q)),
        ("torch.ops.tilekit.bmm (custom op)", lambda: torch.ops.tilekit.bmm(p, q)),
    ]


def overhead(args):
    print("## per-call host overhead, back to back (%d calls per sample, %d samples; us per call)"
          % (args.calls, args.samples))
    print("| case | call | host us/call (median) | p20-p80 | wall us/call (median) |")
    print("|---|---|--:|--:|--:|")
    for case, rows in overhead_rows():
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
                print("| %s | `%s` | %.2f | %.2f-%.2f | %.2f |" % (
                    case, name, statistics.median(host), pct(host, 20), pct(host, 80), statistics.median(wall)))
    print()


def llama_model(args, vocab=128256):
    """A LlamaForCausalLM of Llama-3-8B's widths, args.layers layers, bf16 on CUDA (random weights)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                      num_hidden_layers=args.layers, vocab_size=vocab, max_position_embeddings=8192)
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


def flusher():
    """The flush before each timed call: a read of FLUSH_BYTES, which evicts
    the last call's operands and writes its C back outside the timed window."""
    buf = torch.ones(FLUSH_BYTES // 4, device="cuda", dtype=torch.float32)
    return buf.sum


HOLD_CYCLES = 200000         # grouped, bmm: the GPU's hold after the flush (about 100 us at 2 GHz), at least
HOLD_MARGIN = 4              # the hold covers this many times the host's time to issue a flush and the call
HOLD_CLOCK_HZ = 2.0e9        # cycles a second for that (the sleep counts SM cycles: at a lower clock it holds longer)


def host_seconds(calls, flush, reps=5):
    """{name: s}: the host's time to issue flush() and then each call, the
    median of `reps` warm tries (the GPU is not waited for; the median, as
    one try in a session-28 run took 20 ms where the others took 0.2)."""
    out = {}
    for name, fn in calls:
        tries = []
        for _ in range(reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            flush()
            fn()
            tries.append(time.perf_counter() - t0)
        out[name] = statistics.median(tries)
    torch.cuda.synchronize()
    return out


def time_interleaved(calls, samples, flush, hold=True, info=None):
    """{name: [ms]} of calls [(name, fn)]: WARMUP calls of each, then
    `samples` rounds timing each once between CUDA events after flush()
    (and, with hold, a GPU sleep: the host is ahead when the first event is
    reached), the order turned every round so that neither always runs
    first. The sleep is HOLD_CYCLES, or HOLD_MARGIN times the host's time
    to issue a flush and the slowest call (host_seconds) where that is
    longer: a hold shorter than the host's work leaves the GPU idle between
    the events, and the host's time is then what they measure (session 28:
    tilekit.linear's 70 us of host work on a slow host against a 100 us
    hold, 0.046-0.095 ms for a 0.016 ms kernel). info, a dict: gets
    "hold_cycles" and "host_us" ({name: us})."""
    for _, fn in calls:
        for _ in range(WARMUP):
            fn()
    torch.cuda.synchronize()
    host = host_seconds(calls, flush)
    cycles = max(HOLD_CYCLES, int(HOLD_MARGIN * max(host.values()) * HOLD_CLOCK_HZ))
    if info is not None:
        info["hold_cycles"] = cycles if hold else 0
        info["host_us"] = {name: s * 1e6 for name, s in host.items()}
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = {name: [] for name, _ in calls}
    for i in range(samples):
        for name, fn in (calls if i % 2 == 0 else calls[::-1]):
            flush()
            if hold:
                torch.cuda._sleep(cycles)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            ms[name].append(e0.elapsed_time(e1))
    return ms


def attempt(fn):
    """(fn()'s result, None), or (None, the first line of what it raised):
    a refusal. A CUDA error that leaves the context unusable is raised again
    by the synchronize and ends the run."""
    try:
        out = fn()
        torch.cuda.synchronize()
        return out, None
    except Exception as ex:   # a refusal, whatever its type: recorded, the line goes on
        torch.cuda.synchronize()
        text = str(ex).strip()
        return None, "%s: %s" % (type(ex).__name__, text.splitlines()[0] if text else "")


def rel_err(x, ref):
    """max |x - ref| / max |ref| over every element, CHUNK at a time; nan
    where the shapes differ or either holds a NaN or an infinity."""
    if x.shape != ref.shape:
        return math.nan
    xf, rf = x.contiguous().view(-1), ref.contiguous().view(-1)
    num = den = 0.0
    for at in range(0, xf.numel(), CHUNK):
        xc, rc = xf[at:at + CHUNK].float(), rf[at:at + CHUNK].float()
        if not (torch.isfinite(xc).all() and torch.isfinite(rc).all()):
            return math.nan
        num = max(num, (xc - rc).abs().max().item())
        den = max(den, rc.abs().max().item())
    return num / den if den else (0.0 if num == 0 else math.inf)


def operand(lead, rows, cols, op, gen):
    """Random bf16 rows x cols matrices (lead of them unless None) stored as
    op says: n, row-major as they are; t, their transposes stored
    contiguous and handed over as transposed views (no copy: op T)."""
    shape = ((lead,) if lead else ()) + ((rows, cols) if op == "n" else (cols, rows))
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=gen)
    return x if op == "n" else x.transpose(-2, -1)


def case_calls(e, sizes, gen):
    """(the yardstick's name, its call, tilekit's call, a reference for when
    the yardstick refuses) of line e with group sizes `sizes`: rows, a (M x
    K) and b (G x K x N); k, a (M x K) and b (K x N), K split; batch, a
    (COUNT x M x K) and b (COUNT x K x N); op t operands transposed views."""
    m, n, k, op_a, op_b = e["m"], e["n"], e["k"], e["op_a"], e["op_b"]
    if e["form"] == "batch":
        a, b = operand(e["count"], m, k, op_a, gen), operand(e["count"], k, n, op_b, gen)
        return "torch.bmm", lambda: torch.bmm(a, b), lambda: tilekit.bmm(a, b), lambda: torch.bmm(a, b)
    ends = list(itertools.accumulate(sizes))
    spans = list(enumerate(zip([0] + ends[:-1], ends)))
    offs = torch.tensor(ends, dtype=torch.int32, device="cuda")
    a = operand(None, m, k, op_a, gen)
    if e["form"] == "rows":
        b = operand(len(sizes), k, n, op_b, gen)

        def loop():
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            for g, (lo, hi) in spans:
                out[lo:hi] = a[lo:hi] @ b[g]
            return out
    else:
        b = operand(None, k, n, op_b, gen)

        def loop():   # an empty group's product is M x 0 @ 0 x N: zeros, as torch._grouped_mm's
            out = torch.empty(len(sizes), m, n, device="cuda", dtype=torch.bfloat16)
            for g, (lo, hi) in spans:
                out[g] = a[:, lo:hi] @ b[lo:hi]
            return out
    return ("torch._grouped_mm", lambda: torch._grouped_mm(a, b, offs=offs, out_dtype=torch.bfloat16),
            lambda: tilekit.grouped_mm(a, b, offs=offs), loop)


def measure(e, sizes, gen, flush, samples, hold=True):
    """Line e's result: both calls checked against each other once, then
    timed interleaved (a mismatch, or tilekit refusing, fails the line
    and leaves it untimed)."""
    r = {key: e.get(key) for key in ("label", "suite", "line", "text", "form", "groups", "count", "m", "n", "k",
                                     "op_a", "op_b")}
    r.update(sizes=sizes, flop=grouped_suite.flop(e), groups_cell=grouped_suite.groups_cell(e, sizes),
             torch={}, tilekit={}, max_rel_err=None, check=None, checked_against=None, ratio_torch=None,
             failed=False, note="")
    notes = []
    built, why = attempt(lambda: case_calls(e, sizes, gen))
    if why:
        r.update(failed=True, note="inputs: " + why[:100])
        return r
    yname, yard, mine, loop = built
    r["torch"]["call"] = yname
    ref, why_t = attempt(yard)
    got, why_k = attempt(mine)
    r["torch"].update(status="refused" if why_t else "ok", message=why_t)
    r["tilekit"].update(status="failed" if why_k else "ok", message=why_k)
    if why_t:
        notes.append("torch refused: " + why_t[:100])
        ref, _ = attempt(loop)
        r["checked_against"] = "a loop of torch.mm" if ref is not None else None
    else:
        r["checked_against"] = yname
    if why_k:
        notes.append("tilekit failed: " + why_k[:100])
    elif ref is None:
        notes.append("unchecked (no reference)")
    else:
        err = rel_err(got, ref)
        r["max_rel_err"] = err if math.isfinite(err) else None     # JSON has no NaN
        r["check"] = "ok" if err <= TOL else "mismatch"
        if r["check"] == "mismatch":
            notes.append("MISMATCH against %s: max rel err %g (tolerance %g)" % (r["checked_against"], err, TOL))
        elif why_t:
            notes.append("checked against %s" % r["checked_against"])
    del ref, got
    r["failed"] = bool(why_k) or r["check"] == "mismatch"
    calls = [(name, fn) for name, fn, ok in (("torch", yard, not why_t), ("tilekit", mine, not r["failed"])) if ok]
    if calls and not r["failed"]:
        for name, ms in time_interleaved(calls, samples, flush, hold).items():
            med = statistics.median(ms)
            r[name].update(ms_median=med, ms_p20=pct(ms, 20), ms_p80=pct(ms, 80), tflops=r["flop"] / med / 1e9)
        if len(calls) == 2:
            r["ratio_torch"] = r["torch"]["ms_median"] / r["tilekit"]["ms_median"]
    r["note"] = "; ".join(notes)
    return r


def compare_table(title, yardstick, entries, args, skipped=(), extra=None):
    """Measures entries ((entry, sizes) pairs), printing a row as each is
    done, then the summary; the JSON file with every line when args.json
    (written also when the run stops on a CUDA error). 1 if a line failed."""
    print("## %s" % title)
    print("(median of %d samples after %d warm-up calls, the two interleaved, L2 flushed by a %d MiB read before "
          "each, %s; x torch = torch median / tilekit median, > 1: tilekit faster)"
          % (args.samples, WARMUP, FLUSH_BYTES >> 20,
             "no GPU hold: the host's issuing time can count" if args.host_timed
             else "then the GPU held at least %d cycles (more where the host's call is slower: "
                "time_interleaved) so that the events time the GPU's work" % HOLD_CYCLES))
    for label, why in skipped:
        print("skipped: %s (%s)" % (label, why))
    print("| line | groups | torch TFLOP/s | tilekit TFLOP/s | x torch | max rel err | note |")
    print("|---|--:|--:|--:|--:|--:|---|")
    sys.stdout.flush()
    results, summary = [], None
    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed)
    flush = flusher()
    try:
        with torch.no_grad():
            for e, sizes in entries:
                r = measure(e, sizes, gen, flush, args.samples, not args.host_timed)
                results.append(r)
                print(grouped_suite.table_row(r))
                sys.stdout.flush()
                torch.cuda.empty_cache()   # one line's 15 GB C must not crowd the next line's operands
        summary = grouped_suite.summarize(results)
        failed = [r["label"] for r in results if r["failed"]]
        print()
        for label in failed:
            print("failed: " + label)
        # last, for device_run.sh's summary of the step
        print(grouped_suite.summary_line(summary, yardstick) + ("; %d failed" % len(failed) if failed else ""))
    finally:
        if args.json:
            doc = {"tool": "torch_bench.py " + args.what, "device": torch.cuda.get_device_name(),
                   "torch": torch.__version__, "tilekit": tilekit.__version__, "backend": tilekit.backend(),
                   "seed": args.seed, "samples": args.samples, "warmup": WARMUP, "l2_flush_bytes": FLUSH_BYTES,
                   "gpu_hold_cycles": 0 if args.host_timed else HOLD_CYCLES,
                   "tolerance": TOL, "skipped": [{"label": lab, "why": why} for lab, why in skipped],
                   "results": results, "summary": summary}
            doc.update(extra or {})
            with open(args.json, "w") as f:
                json.dump(doc, f, indent=1, allow_nan=False)
    return 1 if any(r["failed"] for r in results) else 0


def grouped(args):
    entries, skipped = [], []
    for e in grouped_suite.read_suite(args.suite):
        e["label"] = "%s:%d %s" % (e["suite"], e["line"], e["text"])
        if e["form"] in ("masked", "dense"):
            skipped.append((e["label"], "torch has no masked grouped product" if e["form"] == "masked"
                            else "not a grouped line"))
        else:
            entries.append((e, grouped_suite.group_sizes(e["groups"], args.seed) if e["groups"] else None))
    if args.lines:
        entries = entries[:args.lines]
    return compare_table("%s: torch._grouped_mm (torch.bmm on batch lines) against tilekit.grouped_mm "
                         "(tilekit.bmm), bf16 C, group sizes of --seed %d" % (args.suite, args.seed),
                         "torch", entries, args, skipped, {"suite": args.suite})


def bmm(args):
    entries = []
    for (b, m, l, d) in BMM_SHAPES:
        for name, mnk, ops in (("Q K^T", (m, l, d), "nt"), ("P V", (m, d, l), "nn")):
            e = dict(form="batch", groups=None, count=b, m=mnk[0], n=mnk[1], k=mnk[2], op_a=ops[0], op_b=ops[1])
            e["label"] = "%s %d x %dx%dx%d %s %s" % (name, b, mnk[0], mnk[1], mnk[2], ops[0], ops[1])
            entries.append((e, None))
    return compare_table("attention-like batched products: torch.bmm against tilekit.bmm, bf16 C (B x MxNxK; "
                         "Q K^T: (B, M, d) @ (B, L, d)^T, P V: (B, M, L) @ (B, L, d))", "torch.bmm", entries, args)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", nargs="?", default="all", choices=["overhead", "llama", "grouped", "bmm", "all"])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--samples", type=int, default=None, help="30 for overhead, 10 for grouped and bmm")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--compile", action="store_true", help="llama: time torch.compile(fullgraph=True) models")
    ap.add_argument("--suite", default=os.path.join(ROOT, "bench", "shapes", "moe.txt"), help="grouped: the suite")
    ap.add_argument("--seed", type=int, default=1, help="grouped: skewed's order of sizes, and the inputs")
    ap.add_argument("--lines", type=int, default=0, help="grouped: the first N lines only (0: all)")
    ap.add_argument("--json", help="grouped, bmm: every line, the summary")
    ap.add_argument("--host-timed", action="store_true",
                    help="grouped, bmm: no GPU hold before the first event (the host's issuing time can count)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    print("%s, torch %s, tilekit %s (backend: %s, %s)\n" % (torch.cuda.get_device_name(), torch.__version__,
                                                             tilekit.__version__, tilekit.backend(),
                                                             os.path.dirname(tilekit.__file__)))
    if args.what in ("grouped", "bmm"):
        args.samples = args.samples or 10
        return grouped(args) if args.what == "grouped" else bmm(args)
    args.samples = args.samples or 30
    if args.what in ("overhead", "all"):
        overhead(args)
    if args.what in ("llama", "all"):
        llama(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
