#!/usr/bin/env python3
"""bench/plot.py - the shape suites' results: a PNG of every shape's speed
against cuBLAS, grouped by suite, and a Markdown summary table, from the
JSON of `tilekit bench --suite`; with --kernels, the seed-kernel
progression from the JSON of `tilekit bench --kernel all`.

    build/tilekit bench --suite all --out fp32 --json out/suite_fp32.json
    build/tilekit bench --suite all --out bf16 --json out/suite_bf16.json
    python3 bench/plot.py out/suite_fp32.json out/suite_bf16.json [--png docs/suite.png | --no-png] \
        [--table [FILE]] [--readme README.md] [--kernel auto] [--command "the exact command" ...] \
        [--date YYYY-MM-DD]

The PNG (default docs/suite.png): x = the shapes in suite order, separated
and labelled by suite; y = x cuBLAS (cuBLAS median / kernel median, same
shape, same run) on a log scale, one marker series per file (labelled by its
type of C), a line at 1.0 and a dashed one at 0.9; the title names the
device. matplotlib is imported only to draw it, so everything else works
without it (--no-png).

--table prints the summary (or writes it to FILE): per suite and overall,
for each file, the shapes, the geometric mean of x cuBLAS, the slowest shape,
the shapes below 0.9x and those not measured (no ratio: excluded from the
figures). --readme replaces what is between `<!-- suite:begin -->` and
`<!-- suite:end -->` with that table, the image link and the lines naming
device, date and command of each run; --section NAME writes between
`<!-- NAME:begin -->` and `<!-- NAME:end -->` instead (README's moe
section). Every figure comes from the files.

Grouped and batched lines (bench/shapes/moe.txt) are named as the C summary
names them, led by their form ('rows 8:4096:balanced 4096x28672x4096 n t'),
and their x cuBLAS is against the yardstick the lab timed for them: a host
loop of cublasGemmEx over the groups, the `cublas-loop` rows of the file
(lab_gbench.c). The table's wording follows the files: "x cuBLAS loop" and
"lines" where every row shown is such a line, and a suite that mixes forms
(rows and k) gets a row per form above its own. The plot labels each run
of lines of one form and group count ('rows, G=8') under the axis.

    build/tilekit bench --suite moe --json out/suite_moe.json
    python3 bench/plot.py out/suite_moe.json --png docs/moe.png --readme README.md --section moe \
        --command "build/tilekit bench --suite moe --json out/suite_moe.json" --table

--kernel picks the rows (default auto, i.e. auto-dispatch: the kernel the
suite run always times besides cuBLAS). The figures are computed here from
the results, as the C summary (src/lab/lab_suite.c) computes them.

    python3 bench/plot.py --kernels out/bench.json out/bench_nt.json [--png docs/kernels.png]

--kernels: the files are plain bench runs (the README's: every kernel at
4096^3 and 8192^3, then the seed kernels that take B as N x K with --op-b
t). The PNG (default docs/kernels.png) has one group of bars per kernel in
story order (the order of the files' rows: the registry's), one bar per
problem size, median TFLOP/s; cuBLAS's bars are hatched and its figure at
each size drawn across as a dashed line; a kernel measured with another
B layout than the first file's is labelled with it. Each cell is the
first measured result of the kernel and size in the files' order
(readme_table.py's rule), so the second file only fills what the first
could not measure.
"""
import argparse
import datetime
import json
import math
import os
import shlex
import sys

BEGIN, END = "<!-- suite:begin -->", "<!-- suite:end -->"
CUBLAS, CUBLAS_LOOP = "cublas", "cublas-loop"   # the yardsticks of dense and of grouped lines (src/lab/lab.h)
YARDSTICKS = (CUBLAS, CUBLAS_LOOP, "cublas-grouped", "dense-loop")   # tk_lab_is_yardstick
FORM_NAMES = {"rows": "rows split", "k": "K split", "masked": "masked", "batch": "batched", "plain": "plain shapes"}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THRESHOLD = 0.9       # TK_LAB_SUITE_BELOW in src/lab/lab.h
ALL = ("square", "llm", "odd")   # what bench/shapes/all.txt includes


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The README section writer and the error type are readme_table.py's, shared.
from readme_table import InputError, Table, _write, config_of, load_bench  # noqa: E402
from readme_table import replace_section as _replace_section  # noqa: E402


def load_suite(path):
    """readme_table.py's checked bench JSON, which must come from a --suite run."""
    data = load_bench(path)
    if not any(r.get("suite") for r in data["results"]):
        raise InputError("%s: no result has a 'suite': not the output of `tilekit bench --suite`" % path)
    return data


def markers(section):
    """The README markers of a section: ('<!-- NAME:begin -->', '<!-- NAME:end -->')."""
    return "<!-- %s:begin -->" % section, "<!-- %s:end -->" % section


def shape_of(r):
    """'4096x4097x4096 n n', as the C summary names a shape; a grouped or
    batched line's led by its form: 'rows 8:4096:skewed 4096x28672x4096 n t'."""
    form = r.get("form") or ""
    return "%s%s%dx%dx%d %s %s" % (form, " " if form else "", r["m"], r["n"], r["k"], r["op_a"], r["op_b"])


def form_kind(r):
    """'rows', 'k', 'masked' or 'batch' for a grouped or batched line, None for a plain shape."""
    form = r.get("form") or ""
    return form.split(" ")[0] if form else None


def form_block(r):
    """The plot's label of a line's form and group count: 'rows, G=8', 'batch, 16'."""
    kind, _, spec = (r.get("form") or "").partition(" ")
    if kind == "batch":
        return "batch, %s" % spec.split(" ")[0]
    return "%s, G=%d" % (kind, len(spec.split(",")) if ":" not in spec else int(spec.split(":")[0]))


def baseline_of(datasets):
    """What x cuBLAS is against, as the files say: the yardstick rows they
    hold. 'loop': only `cublas-loop` rows (every line grouped or batched:
    its ratio is against that loop); 'cublas': only cuBLAS's (plain
    shapes); 'mixed': both (each row against its own)."""
    have = set(r["kernel"] for d in datasets for r in d["results"] if r.get("suite"))
    if CUBLAS_LOOP in have:
        return "mixed" if CUBLAS in have else "loop"
    return "cublas"


def against(baseline):
    return "cuBLAS loop" if baseline == "loop" else "cuBLAS"


def ratio_of(r):
    """x cuBLAS of a result, or None when it was not measured."""
    x = r.get("ratio_cublas")
    if r.get("status") != "ok" or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        return None
    return float(x)


def rows_of(data, kernel):
    return [r for r in data["results"] if r.get("suite") and r["kernel"] == kernel]


def stat(rows, threshold=THRESHOLD):
    """shapes, measured, not_measured, geomean, min, min_shape, below of rows."""
    ratios = [(ratio_of(r), r) for r in rows]
    got = [(x, r) for x, r in ratios if x is not None]
    s = {"shapes": len(rows), "measured": len(got), "not_measured": len(rows) - len(got), "geomean": None,
         "min": None, "min_shape": None, "below": sum(1 for x, _ in got if x < threshold)}
    if got:
        s["geomean"] = math.exp(sum(math.log(x) for x, _ in got) / len(got))
        x, r = min(got, key=lambda p: p[0])     # the first of equal minima, as in C
        s["min"], s["min_shape"] = x, shape_of(r)
    return s


def breakdown(rows, threshold=THRESHOLD):
    """summarize's entries as (suite, form kind, stat), with before each suite
    that mixes forms (moe: rows and k) an entry per form; kind None: the
    whole suite (suite None: overall)."""
    out = []
    for suite, st in summarize(rows, threshold):
        mine = [r for r in rows if suite is not None and r["suite"] == suite]
        kinds = []
        for r in mine:
            if (form_kind(r) or "plain") not in kinds:
                kinds.append(form_kind(r) or "plain")
        if len(kinds) > 1:
            out += [(suite, k, stat([r for r in mine if (form_kind(r) or "plain") == k], threshold)) for k in kinds]
        out.append((suite, None, st))
    return out


def summarize(rows, threshold=THRESHOLD):
    """[(suite, stat)] in the order suites first appear, then (None, overall)."""
    suites = []
    for r in rows:
        if r["suite"] not in suites:
            suites.append(r["suite"])
    out = [(s, stat([r for r in rows if r["suite"] == s], threshold)) for s in suites]
    return out + [(None, stat(rows, threshold))]


def labels(datasets):
    """One label per file: its type of C ('bf16 C'), with the layout, pad
    and L2 state where not the default, and the file name where two agree."""
    out = []
    for d in datasets:
        r = next(r for r in d["results"] if r.get("suite"))
        lab = "%s C" % r["out"]
        if r.get("dtype"):   # FP8 rows (--dtype): the formats and the scale mode first
            lab = "%s x %s, %s scales, %s" % (r["dtype"], r.get("dtype_b") or r["dtype"], r.get("scale", "tensor"), lab)
        if r.get("layout", "row") != "row":
            lab += ", %s-major" % r["layout"]
        if r.get("pad"):
            lab += ", padded"
        if d.get("l2_flush") is False:
            lab += ", hot L2"
        out.append(lab)
    for i, lab in enumerate(out):
        if out.count(lab) > 1:
            out[i] = "%s (%s)" % (lab, os.path.basename(datasets[i]["_path"]))
    return out


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def render_table(datasets, kernel="auto", threshold=THRESHOLD):
    """The Markdown summary: per suite (a suite mixing forms: per form
    first), then overall, one row per file."""
    labs = labels(datasets)
    sums = [breakdown(rows_of(d, kernel), threshold) for d in datasets]
    order = []
    for s in sums:
        for suite, kind, _ in s:
            if suite is not None and (suite, kind) not in order:
                order.append((suite, kind))
    base = against(baseline_of(datasets))
    unit = "line" if all(form_kind(r) for d in datasets for r in rows_of(d, kernel)) else "shape"
    head = ["suite", "run", unit + "s", "geomean x " + base, "min x %s (%s)" % (base, unit),
            "below %gx" % threshold, "not measured"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|--:|--:|---|--:|--:|"]
    # one suite in every file (the overall rows would repeat the suite rows): no overall rows
    many = any(len(set(su for su, _, _ in s if su is not None)) > 1 for s in sums)
    for key in order + ([(None, None)] if many else []):
        for lab, s in zip(labs, sums):
            st = next((st for su, k, st in s if (su, k) == key), None)
            if st is None:
                continue
            suite, kind = key
            name = "**overall**" if suite is None else suite if kind is None else "%s, %s" % (
                suite, FORM_NAMES.get(kind, kind))
            mn = "-" if st["min"] is None else "%s (`%s`)" % (fmt(st["min"]), st["min_shape"])
            lines.append("| " + " | ".join([name, lab, str(st["shapes"]), fmt(st["geomean"]), mn, str(st["below"]),
                                            str(st["not_measured"])]) + " |")
    what = "auto-dispatch" if kernel == "auto" else "`%s`" % kernel
    baseline = baseline_of(datasets)
    if baseline == "loop":
        ratio = ("x cuBLAS loop = the median of a host loop of cublasGemmEx over the groups (one call per group "
                 "with rows: `cublas-loop` in the JSON) / %s median of the line's one call, in the same run"
                 % what)
    elif baseline == "mixed":
        ratio = ("x cuBLAS = cuBLAS median / %s median on the same shape in the same run, for a grouped or "
                 "batched line a host loop of cublasGemmEx over its groups (`cublas-loop`) against its one call"
                 % what)
    elif all(any(r.get("dtype") for r in d["results"]) for d in datasets):
        ratio = ("x cuBLAS = cuBLASLt's FP8 matmul median (the same codes and scales, its per-tensor or row-wise "
                 "mode) / %s median on the same shape in the same run" % what)
    else:
        ratio = "x cuBLAS = cuBLAS median / %s median on the same shape in the same run" % what
    forms = sorted(set(k for s in sums for _, k, _ in s if k in FORM_NAMES and k != "plain"),
                   key=list(FORM_NAMES).index)
    split = ""
    if forms:
        named = {"rows": "rows split: the groups split M (the tokens of an MoE layer's forward)",
                 "k": "K split: the groups split K (its weight gradients)",
                 "masked": "masked: row counts within one M", "batch": "batched: equal products"}
        split = " " + "; ".join(named[k] for k in forms) + "."
    return "\n".join(lines) + (
        "\n\n%s (> 1: tilekit is faster); geomean and min over the measured %ss; not measured: no timing for "
        "the %s (a kernel refused it or failed), left out of the figures.%s" % (ratio, unit, unit, split))


def suite_arg(data):
    suites = []
    for r in data["results"]:
        if r.get("suite") and r["suite"] not in suites:
            suites.append(r["suite"])
    if len(suites) == 1:
        return suites[0]
    return "all" if tuple(suites) == ALL else "FILE"


def reconstructed_command(data, kernel):
    """The CLI call that produces the file, when neither it nor --command says."""
    rs = [r for r in data["results"] if r.get("suite")]
    r0 = rs[0]
    extra = []
    for r in rs:
        if r["kernel"] not in YARDSTICKS + ("auto",) + tuple(extra):
            extra.append(r["kernel"])
    cmd = "build/tilekit bench --suite %s --out %s" % (suite_arg(data), r0["out"])
    if r0.get("layout", "row") != "row":
        cmd += " --layout %s" % r0["layout"]
    if r0.get("alpha", 1) != 1 or r0.get("beta", 0) != 0:
        cmd += " --alpha %g --beta %g" % (r0.get("alpha", 1), r0.get("beta", 0))
    if r0.get("pad"):
        cmd += " --pad"
    if data.get("l2_flush") is False:
        cmd += " --hot"
    if extra:
        cmd += " --kernel " + ",".join(extra)
    return cmd + " --json %s" % os.path.basename(data["_path"])


def day_of(data, date=None):
    return data.get("date") or date or datetime.datetime.fromtimestamp(
        os.path.getmtime(data["_path"]), datetime.timezone.utc).strftime("%Y-%m-%d")


def device_lines(datasets, kernel, commands=(), date=None):
    notes = []
    for i, (d, lab) in enumerate(zip(datasets, labels(datasets))):
        dev = d["device"]
        cmd = (commands[i] if i < len(commands) else None) or d.get("command") or reconstructed_command(d, kernel)
        notes.append("%s: measured on %s (sm_%s, %s SMs), L2 %s, %s, with `%s`."
                     % (lab, dev.get("name", "?"), dev.get("sm", "?"), dev.get("sm_count", "?"),
                        "flushed before each sample" if d.get("l2_flush", True) else "hot (--hot)",
                        day_of(d, date), cmd))
    return notes


def render_section(datasets, png_link, generated_by, kernel="auto", commands=(), date=None,
                   threshold=THRESHOLD):
    """The README section: table, image, the runs, how it was generated."""
    parts = [render_table(datasets, kernel, threshold)]
    if png_link:
        grouped = all(form_kind(r) for d in datasets for r in rows_of(d, kernel))
        parts.append("![x %s of every suite %s](%s)" % (against(baseline_of(datasets)),
                                                        "line" if grouped else "shape", png_link))
    parts += device_lines(datasets, kernel, commands, date)
    parts.append("Generated by `%s`; do not edit by hand." % generated_by)
    return "\n\n".join(parts)


def plot(datasets, path, kernel="auto", threshold=THRESHOLD):
    """Writes the PNG. Imports matplotlib here, so nothing else needs it."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise InputError("matplotlib is not installed: cannot draw %s (install it, or pass --no-png)" % path)
    # x positions: the shapes of every file, grouped by suite in order of
    # appearance; a shape repeated in a suite (included twice) keeps each copy
    groups, xs = {}, {}
    for d in datasets:
        seen = {}
        for r in rows_of(d, kernel):
            key = (r["suite"], shape_of(r))
            seen[key] = seen.get(key, 0) + 1
            full = key + (seen[key],)
            if full not in xs:
                xs[full] = None
                groups.setdefault(r["suite"], []).append(full)
    x = 0
    bounds = []
    for suite, keys in groups.items():
        bounds.append((suite, x, x + len(keys)))
        for key in keys:
            xs[key] = x
            x += 1
    # grouped lines: runs of one form and group count ('rows, G=8'), labelled under the axis
    blocks = []
    for d in datasets:
        seen = {}
        for r in rows_of(d, kernel):
            key = (r["suite"], shape_of(r))
            seen[key] = seen.get(key, 0) + 1
            if not form_kind(r):
                continue
            at, name = xs[key + (seen[key],)], form_block(r)
            if blocks and blocks[-1][0] == name and blocks[-1][2] == at:
                blocks[-1][2] = at + 1
            elif not any(b[1] <= at < b[2] for b in blocks):
                blocks.append([name, at, at + 1])
        if blocks:
            break       # the first file with grouped lines names the blocks
    fig, ax = plt.subplots(figsize=(14, 5))
    markers = "osD^v<>ph"
    for i, (d, lab) in enumerate(zip(datasets, labels(datasets))):
        seen, px, py, missing = {}, [], [], 0
        for r in rows_of(d, kernel):
            key = (r["suite"], shape_of(r))
            seen[key] = seen.get(key, 0) + 1
            ratio = ratio_of(r)
            if ratio is None:
                missing += 1
                continue
            px.append(xs[key + (seen[key],)])
            py.append(ratio)
        ax.plot(px, py, markers[i % len(markers)], markersize=4, alpha=0.8, linestyle="none",
                label=lab + (" (%d not measured)" % missing if missing else ""))
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: "%g" % v)     # 0.5, 2 rather than 5x10^-1, 2x10^0
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.axhline(1.0, color="black", linewidth=1)
    ax.axhline(threshold, color="gray", linewidth=1, linestyle="--", label="%gx" % threshold)
    for suite, a, b in bounds:
        if a:
            ax.axvline(a - 0.5, color="gray", linewidth=0.8)
        ax.text((a + b - 1) / 2.0, 1.01, suite, transform=ax.get_xaxis_transform(), ha="center", va="bottom")
    ax.set_xlim(-0.5, max(x, 1) - 0.5)
    ax.set_xticks([(a + b - 1) / 2.0 for _, a, b in blocks])
    ax.set_xticklabels([name for name, _, _ in blocks], fontsize="small")
    ax.tick_params(axis="x", length=0)
    for _, a, _ in blocks:
        if all(a != start for _, start, _ in bounds):
            ax.axvline(a - 0.5, color="gray", linewidth=0.6, linestyle=":")
    base = against(baseline_of(datasets))
    unit = "lines" if blocks else "shapes"
    ax.set_xlabel("%s of each suite, in file order (bench/shapes/*.txt)" % unit)
    ax.set_ylabel("x %s (%s ms / %s ms)" % (base, base, kernel))
    names = sorted(set(d["device"].get("name", "?") for d in datasets))
    ax.set_title("tilekit %s vs %s per %s, %s" % ("auto-dispatch" if kernel == "auto" else kernel, base,
                                                   unit[:-1], ", ".join(names)), pad=22)
    ax.legend(loc="lower right", fontsize="small")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def kernel_series(datasets):
    """The kernel plot's data from plain bench files: (kernels in story
    order, sizes by M*N*K as 'MxNxK', {(kernel, size): TFLOP/s}, {kernel:
    its configuration where it differs from the first file's, else None})."""
    if any(r.get("suite") for d in datasets for r in d["results"]):
        raise InputError("%s: a --suite run; --kernels plots plain `tilekit bench --kernel ...` runs"
                         % next(d["_path"] for d in datasets if any(r.get("suite") for r in d["results"])))
    t = Table(datasets)
    tflops = {}
    for kernel in t.kernels:
        for col in t.cols:
            r = t.result(kernel, col)
            if r is not None:
                tflops[(kernel, col)] = float(r["tflops"])
    kernels = [k for k in t.kernels if any((k, c) in tflops for c in t.cols)]
    if not kernels:
        raise InputError("no measured result in %s" % ", ".join(d["_path"] for d in datasets))
    first = next((config_of(r) for r in datasets[0]["results"] if r["status"] == "ok"), None)
    other = {}
    for k in kernels:
        cfgs = [config_of(t.result(k, c)) for c in t.cols if t.result(k, c) is not None]
        other[k] = cfgs[0] if cfgs and cfgs[0] != first else None
    return kernels, t.cols, tflops, other


def plot_kernels(datasets, path):
    """Writes the kernel progression PNG. Imports matplotlib here."""
    kernels, sizes, tflops, other = kernel_series(datasets)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise InputError("matplotlib is not installed: cannot draw %s (install it)" % path)
    fig, ax = plt.subplots(figsize=(14, 5.5))
    handles = []
    width = 0.8 / max(len(sizes), 1)
    colors = ["#4a78b5", "#e0913a", "#5aa469", "#b55a8a"]
    for j, size in enumerate(sizes):
        m, n, k = size.split("x")
        label = ("%s³" % m) if m == n == k else size
        xs = [i + (j - (len(sizes) - 1) / 2.0) * width for i in range(len(kernels))]
        ys = [tflops.get((kern, size), 0.0) for kern in kernels]
        bars = ax.bar(xs, ys, width * 0.95, color=colors[j % len(colors)])
        handles.append(Patch(color=colors[j % len(colors)], label=label))
        for kern, bar in zip(kernels, bars):
            if kern == "cublas":
                bar.set_hatch("//")
                bar.set_edgecolor("black")
        if ("cublas", size) in tflops:
            handles.append(ax.axhline(tflops[("cublas", size)], color=colors[j % len(colors)], linestyle="--",
                                      linewidth=1, label="cuBLAS at %s%s" % (label, " (%s)" % other["cublas"]
                                                                              if other.get("cublas") else "")))
    names = [k + ("\n(%s)" % other[k] if other[k] else "") for k in kernels]
    ax.set_xticks(range(len(kernels)))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize="small")
    ax.set_ylabel("TFLOP/s (median, bf16 in, fp32 accumulate)")
    devs = sorted(set(d["device"].get("name", "?") for d in datasets))
    flush = "L2 flushed before each sample" if all(d.get("l2_flush", True) for d in datasets) else "hot L2"
    ax.set_title("tilekit kernels in story order (cuBLAS hatched), %s, %s" % (", ".join(devs), flush))
    ax.legend(handles=handles, loc="upper center", fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_xlim(-0.6, len(kernels) - 0.4)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replace_section(text, body, what, section="suite"):
    return _replace_section(text, body, *markers(section), what=what)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(description="Plot and tabulate `tilekit bench --suite` JSON files; with "
                                             "--kernels, plot plain bench runs kernel by kernel.")
    ap.add_argument("suite_json", nargs="+", help="files written by `tilekit bench --suite ... --json` "
                                                  "(with --kernels: by `tilekit bench --kernel ... --json`)")
    ap.add_argument("--kernels", action="store_true",
                    help="the seed-kernel progression: TFLOP/s per kernel in story order, cuBLAS marked")
    ap.add_argument("--png", help="the plot (default docs/suite.png, with --kernels docs/kernels.png)")
    ap.add_argument("--no-png", action="store_true", help="draw nothing (no matplotlib needed)")
    ap.add_argument("--no-image", action="store_true", help="with --readme: no link to a plot in the section")
    ap.add_argument("--table", nargs="?", const="-", metavar="FILE",
                    help="print the Markdown summary table (or write it to FILE)")
    ap.add_argument("--readme", help="rewrite the suite:begin/end section of this file (README.md)")
    ap.add_argument("--section", default="suite",
                    help="with --readme: the section between <!-- NAME:begin --> and <!-- NAME:end --> "
                         "(default suite)")
    ap.add_argument("--kernel", default="auto", help="the kernel whose rows are shown (default auto)")
    ap.add_argument("--command", action="append", default=[],
                    help="the exact command that produced a file; once per file, in the files' order")
    ap.add_argument("--date", help="the date of the runs (default: from the file, else its modification time)")
    a = ap.parse_args(argv)
    if a.png is None:
        a.png = os.path.join(ROOT, "docs", "kernels.png" if a.kernels else "suite.png")
    if a.kernels:
        if a.table or a.readme or a.no_png or a.command or a.date or a.kernel != "auto" or a.section != "suite":
            print("plot: --kernels draws the kernel plot only (no --table, --readme, --section, --no-png, --command, "
                  "--date, --kernel)", file=sys.stderr)
            return 2
        try:
            plot_kernels([load_bench(p) for p in a.suite_json], a.png)
        except (InputError, OSError) as e:
            print("plot: %s" % e, file=sys.stderr)
            return 1
        print("plot: wrote %s" % a.png)
        return 0
    try:
        datasets = [load_suite(p) for p in a.suite_json]
        for d in datasets:
            if not rows_of(d, a.kernel):
                raise InputError("%s: no suite rows of kernel '%s'" % (d["_path"], a.kernel))
        table = render_table(datasets, a.kernel)
        new = None
        if a.readme:
            with open(a.readme) as f:
                text = f.read()
            link = None if a.no_image else os.path.relpath(os.path.abspath(a.png),
                                                            os.path.dirname(os.path.abspath(a.readme)))
            generated = "python3 bench/plot.py " + shlex.join(argv)     # quoted: it can be pasted as it is
            new = replace_section(text, render_section(datasets, link, generated, a.kernel, a.command, a.date),
                                  a.readme, a.section)
        if not a.no_png:            # drawn before any file is rewritten: a failure changes nothing
            plot(datasets, a.png, a.kernel)
            print("plot: wrote %s" % a.png)
        if a.table == "-":
            print(table)
        elif a.table:
            _write(a.table, table + "\n")
            print("plot: wrote the table into %s" % a.table)
        if new is not None:
            _write(a.readme, new)
            print("plot: wrote the %s section of %s" % (a.section, a.readme))
    except (InputError, OSError) as e:
        print("plot: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
