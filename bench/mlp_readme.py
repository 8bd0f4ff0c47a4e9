#!/usr/bin/env python3
"""bench/mlp_readme.py - README.md's fused-epilogue figures (issue 39's three
tables) from the JSON of bench/mlp_bench.py.

    python3 bench/mlp_bench.py linear --json out/mlp_linear.json     (and gated, llama: or all in one file)
    python3 bench/mlp_readme.py out/mlp_linear.json out/mlp_gated.json out/mlp_llama.json --readme README.md \\
        [--command "python3 bench/mlp_bench.py linear --json out/mlp_linear.json" ...] [--date YYYY-MM-DD]

Writes between `<!-- mlp:begin -->` and `<!-- mlp:end -->` (--section NAME)
whichever of the three tables the files hold:
(a) Linear + bias + GELU against F.gelu(F.linear(x, w, b)): per model, the
    geometric mean of x torch over its token counts, its min and max, then
    all rows together;
(b) Llama-3-8B gate/up + SwiGLU against torch's two matmuls and SwiGLU: per
    token count, both medians, x torch, and for decode rows each side's read
    rate of the two weights as a % of the measured DRAM read rate;
(c) the patched transformers Llama against stock: forward and forward +
    backward medians, x torch, and the logits' and gradients' max relative
    errors;
then each file's device, torch and tilekit versions, date and command, and
the command that wrote the section. x torch = torch median / tilekit median
(> 1: tilekit faster). A row whose results disagreed (mlp_bench.py's note)
is listed and left out of the means. Every figure comes from the files;
standard library only (no torch, no GPU).
"""
import argparse
import datetime
import math
import os
import shlex
import sys
import json

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readme_table import InputError, emit_section  # noqa: E402

SECTION = "mlp"
TOOL = "mlp_bench.py "
KEYS = ("linear_bias_gelu", "gate_up_swiglu", "llama")


def load(path):
    """The JSON of `mlp_bench.py ... --json`, checked; InputError naming the file otherwise."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError("%s: %s" % (path, e))
    if not isinstance(data, dict) or not str(data.get("tool", "")).startswith(TOOL):
        raise InputError("%s: not the JSON of `mlp_bench.py --json` (no \"tool\": \"%s...\")" % (path, TOOL))
    if not any(k in data for k in KEYS):
        raise InputError("%s: none of %s" % (path, ", ".join(KEYS)))
    for key in KEYS[:2]:
        for i, r in enumerate(data.get(key, [])):
            for field in ("label", "ratio_torch", "torch", "tilekit"):
                if not isinstance(r, dict) or field not in r:
                    raise InputError("%s: %s[%d] has no '%s'" % (path, key, i, field))
    if "llama" in data:
        for field in ("times", "ratio_torch"):
            if field not in data["llama"]:
                raise InputError("%s: llama has no '%s'" % (path, field))
    data["_path"] = path
    return data


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def good(rows):
    """The rows both sides measured and agreed on."""
    return [r for r in rows if not r.get("note") and isinstance(r.get("ratio_torch"), (int, float))
            and r["ratio_torch"] > 0]


def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def table_linear(rows):
    out = ["| model | activation | K -> N | tokens | geomean x torch | min | max |", "|---|---|---|---|--:|--:|--:|"]
    models = list(dict.fromkeys(r.get("model", r["label"]) for r in rows))
    for m in models:
        mine = [r for r in rows if r.get("model", r["label"]) == m]
        ok = good(mine)
        ratios = [r["ratio_torch"] for r in ok]
        first = mine[0]
        out.append("| %s | %s | %s -> %s | %s | %s | %s | %s |" % (
            m, first.get("activation", "?"), first.get("k", "?"), first.get("n", "?"),
            ", ".join(str(r.get("tokens", "?")) for r in mine), fmt(geomean(ratios)),
            fmt(min(ratios) if ratios else None), fmt(max(ratios) if ratios else None)))
    ratios = [r["ratio_torch"] for r in good(rows)]
    out.append("| all rows | | | %d of %d | %s | %s | %s |" % (
        len(ratios), len(rows), fmt(geomean(ratios)), fmt(min(ratios) if ratios else None),
        fmt(max(ratios) if ratios else None)))
    return "\n".join(out)


def table_gated(rows):
    out = ["| tokens | torch ms | tilekit ms | x torch | torch DRAM % | tilekit DRAM % |",
           "|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        bad = r.get("note")
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            r.get("tokens", r["label"]), fmt(r["torch"].get("ms_median"), ".3f"),
            fmt(r["tilekit"].get("ms_median"), ".3f"), "(%s)" % bad if bad else fmt(r["ratio_torch"]),
            fmt(r["torch"].get("dram_pct"), ".1f") if "dram_pct" in r["torch"] else "",
            fmt(r["tilekit"].get("dram_pct"), ".1f") if "dram_pct" in r["tilekit"] else ""))
    return "\n".join(out)


def table_llama(ll):
    times = ll["times"]
    names = list(times)
    out = ["| model | forward ms | forward + backward ms |", "|---|--:|--:|"]
    for n in names:
        out.append("| %s | %s | %s |" % (n, fmt(times[n].get("forward_ms"), ".2f"),
                                        fmt(times[n].get("forward_backward_ms"), ".2f")))
    rt = ll["ratio_torch"]
    out.append("| x torch | %s | %s |" % (fmt(rt.get("forward"), ".3f"), fmt(rt.get("forward_backward"), ".3f")))
    return "\n".join(out)


def day_of(data, date=None):
    return data.get("date") or date or datetime.datetime.fromtimestamp(
        os.path.getmtime(data["_path"]), datetime.timezone.utc).strftime("%Y-%m-%d")


def render_section(datasets, generated_by, commands=(), date=None):
    parts = []
    for d in datasets:
        if d.get("linear_bias_gelu"):
            parts.append("(a) Linear + bias + GELU, forward: `tilekit.linear(x, w, b, act)` against "
                         "`F.gelu(F.linear(x, w, b))` (%s):\n\n%s" % (d.get("device", "?"),
                                                                      table_linear(d["linear_bias_gelu"])))
        if d.get("gate_up_swiglu"):
            parts.append("(b) Llama-3-8B gate/up + SwiGLU (4096 -> 2 x 14336), forward: one `gated` call against "
                         "torch's two matmuls and `F.silu(g) * u`; DRAM %%: both weights' bytes / time against %s "
                         "GB/s (%s) (%s):\n\n%s" % (fmt(d.get("dram_read_gbs"), ".0f"),
                                                     d.get("dram_read_source", "?"), d.get("device", "?"),
                                                     table_gated(d["gate_up_swiglu"])))
        if d.get("llama"):
            ll = d["llama"]
            routes = d.get("gated_routes")
            how = "" if not routes else "; gated MLP forward %s, backward %s" % tuple(
                "fused" if routes.get(k) else "unfused" for k in ("forward", "backward"))
            parts.append("(c) transformers Llama, Llama-3-8B widths, %s layers, %s x %s tokens, `tilekit.patch(model, "
                         "fuse_mlp=True)` against stock eager (%s; median of %s steps%s); logits max rel err %s, "
                         "gradients %s:\n\n%s" % (
                             ll.get("layers", "?"), ll.get("batch", "?"), ll.get("seq", "?"), d.get("device", "?"),
                             ll.get("steps", "?"), how, fmt(ll.get("logits_max_rel_err"), ".4f"),
                             fmt(ll.get("grad_worst_max_rel_err", ll.get("grad_max_rel_err")), ".4f"),
                             table_llama(ll)))
    bad = ["`%s` (%s)" % (r["label"], r["note"]) for d in datasets for key in KEYS[:2]
           for r in d.get(key, []) if r.get("note")]
    if bad:
        parts.append("Left out (results disagreed): " + ", ".join(bad) + ".")
    parts.append("x torch = torch median / tilekit median in the same process (> 1: tilekit faster); rows "
                 "timed interleaved with the L2 flushed before each call (bench/mlp_bench.py).")
    for i, d in enumerate(datasets):
        cmd = (commands[i] if i < len(commands) else None) or d.get("command") or \
            "python3 bench/%s --json %s" % (d["tool"], d["_path"])
        parts.append("%s: measured on %s, torch %s, tilekit %s (%s backend), %s, with `%s`." % (
            d["tool"], d.get("device", "?"), d.get("torch", "?"), d.get("tilekit", "?"), d.get("backend", "?"),
            day_of(d, date), cmd))
    parts.append("Generated by `%s`; do not edit by hand." % generated_by)
    return "\n\n".join(parts)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(description="Write README.md's mlp section from the JSON of `mlp_bench.py --json`.")
    ap.add_argument("json", nargs="+", help="files written by `python3 bench/mlp_bench.py WHAT --json F`")
    ap.add_argument("--readme", help="rewrite the section of this file; without it the section goes to stdout")
    ap.add_argument("--section", default=SECTION, help="<!-- NAME:begin --> ... <!-- NAME:end --> (default %s)"
                    % SECTION)
    ap.add_argument("--command", action="append", default=[],
                    help="the exact command that produced a file; once per file, in the files' order")
    ap.add_argument("--date", help="the date of the runs (default: the file's modification time)")
    a = ap.parse_args(argv)
    try:
        datasets = [load(p) for p in a.json]
        body = render_section(datasets, "python3 bench/mlp_readme.py " + shlex.join(argv), a.command, a.date)
        emit_section("mlp_readme", a.readme, a.section, body)
    except (InputError, OSError) as e:
        print("mlp_readme: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
