#!/usr/bin/env python3
"""Issue 40's comparison with DeepGEMM as a markdown table.

    python3 bench/peers/deepgemm_table.py [--peer OUT/deepgemm.jsonl] [--cli OUT/tk_deepseek.json]

--peer: the same-run measurement (one JSON line per shape: deepgemm_ms,
deepgemm_tflops, err, tilekit_ms, tilekit_tflops, tilekit_err, ratio),
written on the GPU machine by the peer's bench script that
bench/device_run.sh's PART=deepgemm runs when .peers/ is carried (the peer
itself is never committed: see that PART's comment). --cli: `tilekit bench
--kernel auto --dtype e4m3 --scale block --shapes ... --json` of the same
run (tilekit's own harness: its TFLOP/s and x cuBLASLt, a cross-check of
the in-process figures). Either may be missing.

Printed: (1) with --peer, per shape tilekit's and DeepGEMM's TFLOP/s from
the one process, their ratio (DeepGEMM's median time over tilekit's: above
1 tilekit is faster), both relative errors, and the geometric mean of the
ratio (issue 40's target: at least 1.0x); (2) always, tilekit's figures
(--peer's, else --cli's) against the figures DeepGEMM published for the
shapes it listed (README.md at deepseek-ai/DeepGEMM 327ec92, 2025-04-09,
the last one with the table: H800 SXM5, NVCC 12.8; M = 64, 128, 4096),
which is the fallback where DeepGEMM could not be built: a different GPU
(H800: H100's SMs and clocks, less NVLink) and not the same run.
"""
import argparse
import json
import math
import sys

# DeepGEMM's published "Normal GEMMs for dense models" (H800 SXM5, NVCC 12.8):
# (M, N, K) -> TFLOPS, from its README up to commit 327ec92 (2025-04-09).
PUBLISHED_H800 = {
    (64, 2112, 7168): 206, (64, 24576, 1536): 289, (64, 32768, 512): 219,
    (64, 7168, 16384): 336, (64, 4096, 7168): 287, (64, 7168, 2048): 295,
    (128, 2112, 7168): 352, (128, 24576, 1536): 535, (128, 32768, 512): 358,
    (128, 7168, 16384): 645, (128, 4096, 7168): 533, (128, 7168, 2048): 510,
    (4096, 2112, 7168): 1127, (4096, 24576, 1536): 1212, (4096, 32768, 512): 775,
    (4096, 7168, 16384): 1520, (4096, 4096, 7168): 1410, (4096, 7168, 2048): 1168,
}
PUBLISHED_SOURCE = ("DeepGEMM README (deepseek-ai/DeepGEMM 327ec92, 2025-04-09): H800 SXM5, NVCC 12.8, "
                    "the April 2025 kernels")


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def read_peer(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                r = json.loads(line)
                rows[(int(r["m"]), int(r["n"]), int(r["k"]))] = r
    return rows


def read_cli(path):
    """(m, n, k) -> {tflops, ms, ratio_cublaslt} of the auto rows of a tilekit bench JSON."""
    with open(path) as f:
        doc = json.load(f)
    out = {}
    for r in doc.get("results", []):
        if r.get("kernel") == "auto" and r.get("status") == "ok":
            out[(int(r["m"]), int(r["n"]), int(r["k"]))] = {
                "tflops": r.get("tflops"), "ms": r.get("ms_median"), "ratio_cublaslt": r.get("ratio_cublas")}
    return out, doc.get("device", {}).get("name")


def fmt(v, spec, none="-"):
    return spec % v if isinstance(v, (int, float)) else none


def same_run_table(peer, cli):
    lines = ["| M | N | K | tilekit TFLOP/s | DeepGEMM TFLOP/s | tilekit / DeepGEMM | tilekit err | DeepGEMM err |"
             + (" tilekit CLI TFLOP/s | CLI x cuBLASLt |" if cli else ""),
             "|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if cli else "")]
    ratios = []
    for key in sorted(peer, key=lambda s: (s[1], s[2], s[0])):
        r = peer[key]
        ratio = r.get("ratio")
        if isinstance(ratio, (int, float)):
            ratios.append(ratio)
        line = "| %d | %d | %d | %s | %s | %s | %s | %s |" % (
            key[0], key[1], key[2], fmt(r.get("tilekit_tflops"), "%.0f"), fmt(r.get("deepgemm_tflops"), "%.0f"),
            fmt(ratio, "%.2fx"), fmt(r.get("tilekit_err"), "%.1e"), fmt(r.get("err"), "%.1e"))
        if cli:
            c = cli.get(key, {})
            line += " %s | %s |" % (fmt(c.get("tflops"), "%.0f"), fmt(c.get("ratio_cublaslt"), "%.2fx"))
        lines.append(line)
    g = geomean(ratios)
    below = sum(1 for x in ratios if x < 1.0)
    lines.append("")
    lines.append("geometric mean tilekit / DeepGEMM over %d shapes: **%s** (%d below 1.0x; min %s, max %s)" % (
        len(ratios), fmt(g, "%.3fx"), below, fmt(min(ratios) if ratios else None, "%.2fx"),
        fmt(max(ratios) if ratios else None, "%.2fx")))
    return lines, g


def published_table(tk):
    """tk: (m, n, k) -> tilekit TFLOP/s (this run)."""
    lines = ["| M | N | K | tilekit TFLOP/s (this run) | DeepGEMM TFLOPS (published, H800) | tilekit / published |",
             "|---:|---:|---:|---:|---:|---:|"]
    ratios = []
    for key in sorted(PUBLISHED_H800, key=lambda s: (s[1], s[2], s[0])):
        t = tk.get(key)
        p = PUBLISHED_H800[key]
        ratio = t / p if isinstance(t, (int, float)) else None
        if ratio:
            ratios.append(ratio)
        lines.append("| %d | %d | %d | %s | %d | %s |" % (key[0], key[1], key[2], fmt(t, "%.0f", "not run"), p,
                                                           fmt(ratio, "%.2fx")))
    g = geomean(ratios)
    lines.append("")
    lines.append("geometric mean tilekit / published over the %d shapes run: %s (%s; not the same GPU or run)"
                 % (len(ratios), fmt(g, "%.3fx"), PUBLISHED_SOURCE))
    return lines, g


def main(argv=None):
    ap = argparse.ArgumentParser(description="issue 40: tilekit's block-scaled FP8 against DeepGEMM")
    ap.add_argument("--peer", help="the same-run JSON lines (deepgemm.jsonl)")
    ap.add_argument("--cli", help="tilekit bench --dtype e4m3 --scale block JSON of the same shapes")
    ap.add_argument("--env", help="the peer run's versions and GPU (deepgemm_env.json)")
    args = ap.parse_args(argv)
    peer, cli, device = {}, {}, None
    for what, path, reader in (("--peer", args.peer, read_peer), ("--cli", args.cli, read_cli)):
        if not path:
            continue
        try:
            got = reader(path)
        except (OSError, ValueError) as e:
            print("(%s %s: not read: %s)" % (what, path, e))
            continue
        if what == "--peer":
            peer = got
        else:
            cli, device = got
    env = {}
    if args.env:
        try:
            with open(args.env) as f:
                env = json.load(f)
        except (OSError, ValueError) as e:
            print("(--env %s: not read: %s)" % (args.env, e))
    if env.get("gpu"):
        device = env["gpu"]
    if env:
        print("versions: " + ", ".join("%s %s" % (k, v) for k, v in sorted(env.items())) + "\n")
    status = 0
    if peer:
        print("### tilekit against DeepGEMM, same process and GPU%s\n" % (" (%s)" % device if device else ""))
        lines, g = same_run_table(peer, cli)
        print("\n".join(lines))
        print()
        status = 0 if g is not None else 1
    else:
        print("No same-run DeepGEMM figures (no --peer file): DeepGEMM was not built or run here. "
              "The comparison below is with its published table only.\n")
        status = 1
    tk = {k: r.get("tilekit_tflops") for k, r in peer.items() if isinstance(r.get("tilekit_tflops"), (int, float))}
    src = "in-process (scaled_mm)"
    if not tk and cli:
        tk = {k: c["tflops"] for k, c in cli.items() if isinstance(c.get("tflops"), (int, float))}
        src = "tilekit bench CLI"
    print("### tilekit (%s) against DeepGEMM's published H800 figures\n" % src)
    lines, _ = published_table(tk)
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    sys.exit(main())
