#!/usr/bin/env python3
"""bench/torch_readme.py - README.md's comparison with torch's grouped and
batched products, from the JSON of torch_bench.py's grouped and bmm modes.

    python3 bench/torch_bench.py grouped --json out/torch_grouped.json
    python3 bench/torch_bench.py bmm --json out/torch_bmm.json
    python3 bench/torch_readme.py out/torch_grouped.json out/torch_bmm.json --readme README.md \\
        --command "python3 bench/torch_bench.py grouped --json out/torch_grouped.json" \\
        --command "python3 bench/torch_bench.py bmm --json out/torch_bmm.json" [--date YYYY-MM-DD] [--table]

Writes between `<!-- torch-grouped:begin -->` and `<!-- torch-grouped:end -->`
(--section NAME: `<!-- NAME:begin -->` ...) a table with one row per
yardstick and form: a grouped file's rows-split lines, its K-split lines
(the weight gradients), all its lines; a bmm file's lines. Columns: the
lines, the geometric mean of x torch (torch median / tilekit median, > 1:
tilekit faster), the min and its line, the lines below 0.9x, over the lines
both measured and agreed on (grouped_suite.summarize: the figures of
torch_bench.py's summary line). Then how the lines were timed (the GPU hold
after the L2 flush, `gpu_hold_cycles`, 0 in files written before it was
added), the device, date and command of each file, and the command that
wrote the section. Without --readme the section goes to stdout; --table
prints the table alone. Every figure comes from the files. Standard library
only (no torch, no GPU).
"""
import argparse
import datetime
import json
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import grouped_suite  # noqa: E402
from readme_table import InputError, emit_section  # noqa: E402

THRESHOLD = grouped_suite.THRESHOLD
SECTION = "torch-grouped"
TOOL = "torch_bench.py "          # the "tool" of a file: "torch_bench.py grouped" or "torch_bench.py bmm"
YARDSTICK = {"rows": "torch._grouped_mm", "k": "torch._grouped_mm", "batch": "torch.bmm"}
FORMS = (("rows", "grouped, rows split (MoE forward)"), ("k", "grouped, K split (weight gradients)"),
         ("batch", "batch lines of the suite"))


def load(path):
    """The JSON of `torch_bench.py grouped|bmm --json`, checked; InputError naming the file otherwise."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError("%s: %s" % (path, e))
    if not isinstance(data, dict) or data.get("tool") not in (TOOL + "grouped", TOOL + "bmm"):
        raise InputError("%s: not the JSON of `torch_bench.py grouped|bmm --json` (no \"tool\": \"%sgrouped\" "
                         "or \"%sbmm\")" % (path, TOOL, TOOL))
    if not isinstance(data.get("results"), list) or not data["results"]:
        raise InputError("%s: no 'results'" % path)
    for i, r in enumerate(data["results"]):
        for key in ("label", "ratio_torch"):
            if not isinstance(r, dict) or key not in r:
                raise InputError("%s: results[%d] has no '%s'" % (path, i, key))
    data["_path"] = path
    return data


def mode(data):
    return data["tool"][len(TOOL):]


def yardsticks(data, lines):
    """The torch calls the lines were timed against, in order of appearance."""
    out = []
    for r in lines:
        call = (r.get("torch") or {}).get("call") or YARDSTICK.get(r.get("form"), "torch")
        if call not in out:
            out.append(call)
    return ", ".join("`%s`" % c for c in out)


def groups(data):
    """[(yardstick, what, lines)]: a bmm file's lines; a grouped file's per
    form (rows, k, then any other), then all of them when forms differ."""
    res = data["results"]
    if mode(data) == "bmm":
        return [(yardsticks(data, res), "bmm (attention-like Q K^T and P V)", res)]
    out = []
    kinds = [k for k, _ in FORMS] + [f for f in (r.get("form") for r in res) if f not in dict(FORMS)]
    for kind in dict.fromkeys(kinds):
        mine = [r for r in res if r.get("form") == kind]
        if mine:
            out.append((yardsticks(data, mine), dict(FORMS).get(kind, "%s lines of the suite" % kind), mine))
    if len(out) > 1:
        out.append((yardsticks(data, res), "grouped, all lines", res))
    return out


def fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def render_table(datasets, threshold=THRESHOLD):
    lines = ["| yardstick | form | lines | geomean x torch | min x torch (line) | below %gx |" % threshold,
             "|---|---|--:|--:|---|--:|"]
    for d in datasets:
        for yard, what, res in groups(d):
            s = grouped_suite.summarize(res, threshold)
            count = str(s["lines"])
            failed = sum(1 for r in res if r.get("failed"))
            if s["not_measured"]:
                count = "%d of %d" % (s["measured"], s["lines"]) + (" (%d failed)" % failed if failed else "")
            mn = "-" if s["min"] is None else "%s (`%s`)" % (fmt(s["min"]), s["min_line"])
            lines.append("| %s | %s | %s | %s | %s | %d |" % (yard, what, count, fmt(s["geomean"]), mn, s["below"]))
    return "\n".join(lines)


def hold_cycles(data):
    """The GPU's hold after the L2 flush, in cycles: 0 where the file has no
    such key (written before torch_bench.py held the GPU) or it is null."""
    return int(data.get("gpu_hold_cycles") or 0)


def timing(data):
    """How the file's lines were timed, from its keys."""
    hold = hold_cycles(data)
    flush = data.get("l2_flush_bytes")
    return ("median of %s samples after %s warm-up calls of each, torch's and tilekit's calls interleaved, L2 "
            "flushed before every call%s, %s"
            % (data.get("samples", "?"), data.get("warmup", "?"),
               " by a %d MiB read" % (flush >> 20) if isinstance(flush, int) else "",
               "then the GPU held %d cycles after the L2 flush so the events time the GPU's work" % hold if hold
               else "no GPU hold after the flush (the host's time issuing a call can count)"))


def day_of(data, date=None):
    return data.get("date") or date or datetime.datetime.fromtimestamp(
        os.path.getmtime(data["_path"]), datetime.timezone.utc).strftime("%Y-%m-%d")


def reconstructed_command(data):
    """The torch_bench.py call that writes the file, when --command does not say."""
    cmd = "python3 bench/torch_bench.py %s" % mode(data)
    if data.get("seed", 1) != 1:
        cmd += " --seed %d" % data["seed"]
    if data.get("samples", 10) != 10:
        cmd += " --samples %d" % data["samples"]
    if "gpu_hold_cycles" in data and not hold_cycles(data):
        cmd += " --host-timed"
    return cmd + " --json %s" % data["_path"]


def render_section(datasets, generated_by, commands=(), date=None, threshold=THRESHOLD):
    parts = [render_table(datasets, threshold)]
    ways = [timing(d) for d in datasets]
    notes = ["x torch = torch median / tilekit median on the same line in the same process (> 1: tilekit is "
             "faster); geomean and min over the lines both measured and agreed on (each line's results checked "
             "against each other first); lines: how many, or how many of them were measured."]
    if len(set(ways)) == 1:
        notes.append("Each line: the %s." % ways[0])
    else:
        notes += ["%s: each line the %s." % (mode(d), w) for d, w in zip(datasets, ways)]
    parts.append(" ".join(notes))
    for i, d in enumerate(datasets):
        cmd = (commands[i] if i < len(commands) else None) or reconstructed_command(d)
        parts.append("%s: measured on %s, torch %s, tilekit %s (%s backend), %s, with `%s`."
                     % (mode(d), d.get("device", "?"), d.get("torch", "?"), d.get("tilekit", "?"),
                        d.get("backend", "?"), day_of(d, date), cmd))
    parts.append("Generated by `%s`; do not edit by hand." % generated_by)
    return "\n\n".join(parts)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = argparse.ArgumentParser(description="Write README.md's torch-grouped section from the JSON of "
                                             "`torch_bench.py grouped|bmm --json`.")
    ap.add_argument("json", nargs="+", help="files written by `python3 bench/torch_bench.py grouped|bmm --json F`")
    ap.add_argument("--readme", help="rewrite the section of this file (README.md); without it the section "
                                     "goes to stdout")
    ap.add_argument("--section", default=SECTION, help="the section: <!-- NAME:begin --> ... <!-- NAME:end --> "
                                                       "(default %s)" % SECTION)
    ap.add_argument("--command", action="append", default=[],
                    help="the exact command that produced a file; once per file, in the files' order")
    ap.add_argument("--date", help="the date of the runs (default: the file's modification time)")
    ap.add_argument("--table", action="store_true", help="print the table")
    a = ap.parse_args(argv)
    try:
        datasets = [load(p) for p in a.json]
        body = render_section(datasets, "python3 bench/torch_readme.py " + shlex.join(argv), a.command, a.date)
        if a.table:
            print(render_table(datasets))
        emit_section("torch_readme", a.readme, a.section, body, not a.table)
    except (InputError, OSError) as e:
        print("torch_readme: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
