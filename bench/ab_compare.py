#!/usr/bin/env python3
"""bench/ab_compare.py DIR [KERNEL]: the table of an A/B run (bench/ab.sh):
per shape, each build's median of its rounds' medians (us) for KERNEL
(default auto) with x cuBLAS of the same run and build in brackets (and, for
auto, the kernel it chose), then B / A; last, each build's geometric mean of
x cuBLAS over the shapes every build measured."""
import collections
import glob
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readme_table import InputError, load_bench  # noqa: E402


def collect(paths, kernel):
    """{shape key: {build: [(us, cuBLAS us)]}}, {(key, build): chosen}."""
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    chosen = {}
    for path in paths:
        build = os.path.basename(path).split("_")[1]
        rows = load_bench(path)["results"]
        key = lambda r: (r["m"], r["n"], r["k"], r["op_a"], r["op_b"], r["out"])  # noqa: E731
        cublas = {key(r): r["ms_median"] for r in rows if r["kernel"] == "cublas" and r["status"] == "ok"}
        for r in rows:
            if r["kernel"] == kernel and r["status"] == "ok":
                runs[key(r)][build].append((1000 * r["ms_median"], 1000 * cublas.get(key(r), float("nan"))))
                if r.get("chosen"):
                    chosen[(key(r), build)] = r["chosen"]
    return runs, chosen


def table(runs, chosen):
    builds = sorted({b for per in runs.values() for b in per})
    lines = ["%-28s %s  %s" % ("shape", " ".join("%26s" % ("%s us (x cuBLAS)" % b) for b in builds), "B/A")]
    ratios = collections.defaultdict(list)
    for key, per in runs.items():
        if any(b not in per for b in builds):
            continue
        med = {b: statistics.median(us for us, _ in per[b]) for b in builds}
        cub = {b: statistics.median(c for _, c in per[b]) for b in builds}
        cells = []
        for b in builds:
            ratios[b].append(cub[b] / med[b])
            cells.append("%8.1f (%5.3f) %-10s" % (med[b], cub[b] / med[b], (chosen.get((key, b)) or "")[:10]))
        ba = "%.3f" % (med["B"] / med["A"]) if "A" in med and "B" in med else "-"
        lines.append("%-28s %s  %s" % ("%dx%dx%d %s%s %s" % key, " ".join(cells), ba))
    lines.append("geomean x cuBLAS: " + "  ".join(
        "%s %.4f" % (b, math.exp(sum(math.log(x) for x in ratios[b]) / len(ratios[b])))
        for b in builds if ratios[b] and all(x > 0 for x in ratios[b])))
    return "\n".join(lines)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    paths = sorted(glob.glob(os.path.join(argv[1], "ab_*_*.json")))
    if not paths:
        print("ab_compare.py: no ab_<build>_<round>.json in %s" % argv[1], file=sys.stderr)
        return 1
    try:
        runs, chosen = collect(paths, argv[2] if len(argv) > 2 else "auto")
    except InputError as e:
        print("ab_compare.py: %s" % e, file=sys.stderr)
        return 1
    print(table(runs, chosen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
