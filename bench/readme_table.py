#!/usr/bin/env python3
"""bench/readme_table.py - renders bench JSON into README.md's results section.

    build/tilekit bench --kernel all --json out/bench.json
    build/tilekit info > out/info.txt              # optional: resource columns
    python3 bench/readme_table.py out/bench.json [more.json ...] [--info out/info.txt] \
        [--command "the exact command"] [--readme README.md] [--stdout]

Rewrites what lies between the lines `<!-- bench:begin -->` and
`<!-- bench:end -->` of README.md with a markdown table (one row per result:
kernel, shape, layout/ops/out, median TFLOP/s, % of peak, ratio to cuBLAS,
p20-p80 ms, and with --info the registers, spills, shared memory, threads,
blocks per SM and occupancy) and, per input file, a line naming the device,
its SM count and clock, the peak used, the date and the command that produced
it. Every figure comes from the files: nothing here is typed by hand.

The bench JSON schema is the one `tilekit bench --json` writes
(src/host/lab_report.c). --info takes `tilekit info` output as text, or a
JSON list of {kernel, regs, local_bytes, static_smem, dyn_smem, threads,
blocks_per_sm, occupancy}, or the same as CSV with a header line.
Standard library only.
"""
import argparse
import csv
import datetime
import io
import json
import os
import sys

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INFO_KEYS = ("regs", "local_bytes", "static_smem", "dyn_smem", "threads", "blocks_per_sm", "occupancy")


class InputError(Exception):
    """A file that is missing, malformed, or not of the expected schema."""


def load_bench(path):
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError("%s: %s" % (path, e))
    if not isinstance(data, dict) or data.get("tool") != "tilekit bench":
        raise InputError("%s: not a `tilekit bench --json` file (no \"tool\": \"tilekit bench\")" % path)
    for key in ("device", "results"):
        if key not in data:
            raise InputError("%s: no '%s' entry" % (path, key))
    dev = data["device"]
    for key in ("name", "sm", "sm_count", "clock_mhz"):
        if key not in dev:
            raise InputError("%s: device has no '%s'" % (path, key))
    for i, r in enumerate(data["results"]):
        for key in ("kernel", "m", "n", "k", "layout", "op_a", "op_b", "out", "status"):
            if key not in r:
                raise InputError("%s: results[%d] has no '%s'" % (path, i, key))
    data["_path"] = path
    return data


def _num(v):
    if v is None or v == "":
        return None
    if isinstance(v, (int, float)):
        return v
    s = str(v).strip().rstrip("%")
    try:
        return int(s)
    except ValueError:
        return float(s)


def load_info(path):
    """{kernel: {regs, ...}} from a JSON list, a CSV with a header, or the
    table `tilekit info` prints (rows of 8 fields after the 'kernel regs' header)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise InputError("%s: %s" % (path, e))
    rows = []
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            rows = json.loads(text)
        except ValueError as e:
            raise InputError("%s: %s" % (path, e))
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise InputError("%s: expected a JSON list of objects" % path)
    elif stripped.startswith("kernel,"):
        rows = list(csv.DictReader(io.StringIO(stripped)))
    else:
        in_table = False
        for line in text.splitlines():
            f = line.split()
            if f[:2] == ["kernel", "regs"]:
                in_table = True
                continue
            if in_table and len(f) == 8:
                try:
                    rows.append(dict(zip(("kernel",) + INFO_KEYS, [f[0]] + [_num(x) for x in f[1:]])))
                except ValueError:
                    pass   # a kernel line with a message instead of figures ("needs sm_90", "library ...")
        if not in_table:
            raise InputError("%s: no JSON list, CSV header or `tilekit info` table found" % path)
    out = {}
    for r in rows:
        if "kernel" not in r:
            raise InputError("%s: an entry has no 'kernel'" % path)
        out[r["kernel"]] = {k: _num(r.get(k)) for k in INFO_KEYS}
    return out


def fmt(v, spec, none="-"):
    if v is None:
        return none
    return format(int(v) if spec == "d" else v, spec)


def shape_of(r):
    return "%dx%dx%d" % (r["m"], r["n"], r["k"])


def config_of(r):
    s = "%s %s%s %s" % (r["layout"], r["op_a"].upper(), r["op_b"].upper(), r["out"])
    alpha, beta = r.get("alpha", 1.0), r.get("beta", 0.0)
    if alpha not in (None, 1, 1.0) or beta not in (None, 0, 0.0):
        s += " a=%g b=%g" % (alpha, beta)
    return s


def reconstructed_command(data):
    """The CLI call that produces these results, when the file does not say."""
    rs = data["results"]
    kernels = []
    for r in rs:
        if r["kernel"] not in kernels:
            kernels.append(r["kernel"])
    shapes = []
    for r in rs:
        if shape_of(r) not in shapes:
            shapes.append(shape_of(r))
    r0 = rs[0]
    cmd = "build/tilekit bench --kernel %s" % ",".join(kernels)
    cmd += (" --m %d --n %d --k %d" % (r0["m"], r0["n"], r0["k"])) if len(shapes) == 1 else " --shapes " + ",".join(
        shapes)
    cmd += " --layout %s --op-a %s --op-b %s --out %s" % (r0["layout"], r0["op_a"], r0["op_b"], r0["out"])
    if r0.get("alpha", 1) != 1 or r0.get("beta", 0) != 0:
        cmd += " --alpha %g --beta %g" % (r0.get("alpha", 1), r0.get("beta", 0))
    if data.get("l2_flush") is False:
        cmd += " --hot"
    return cmd + " --json %s" % os.path.basename(data["_path"])


def render(datasets, info=None, command=None):
    head = ["kernel", "shape (MxNxK)", "layout ops out", "TFLOP/s (median)", "% of peak", "x cuBLAS",
            "p20-p80 ms"]
    align = ["---", "---", "---", "--:", "--:", "--:", "--:"]
    if info is not None:
        head += ["regs", "spill B", "smem B (static+dyn)", "threads", "blocks/SM", "occupancy"]
        align += ["--:"] * 6
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    notes = []
    for data in datasets:
        for r in data["results"]:
            ok = r["status"] == "ok"
            cells = [r["kernel"], shape_of(r), config_of(r)]
            if ok:
                cells += [fmt(r.get("tflops"), ".1f"), fmt(r.get("pct_peak"), ".1f"),
                          fmt(r.get("ratio_cublas"), ".3f"),
                          "%s-%s" % (fmt(r.get("ms_p20"), ".4f"), fmt(r.get("ms_p80"), ".4f"))]
            else:
                cells += ["not run: " + str(r["status"]).replace("|", "/").replace("\n", " "), "-", "-", "-"]
            if info is not None:
                i = info.get(r["kernel"])
                if i is None:
                    cells += ["-"] * 6
                else:
                    smem = ("%d+%d" % (i["static_smem"], i["dyn_smem"])
                            if i["static_smem"] is not None and i["dyn_smem"] is not None else "-")
                    occ = i["occupancy"]
                    cells += [fmt(i["regs"], "d"), fmt(i["local_bytes"], "d"), smem, fmt(i["threads"], "d"),
                              fmt(i["blocks_per_sm"], "d"),
                              "-" if occ is None else ("%.0f%%" % (occ * 100 if occ <= 1 else occ))]
            lines.append("| " + " | ".join(cells) + " |")
        dev = data["device"]
        date = data.get("date") or datetime.datetime.fromtimestamp(
            os.path.getmtime(data["_path"]), datetime.timezone.utc).strftime("%Y-%m-%d")
        cmd = data.get("command") or command or reconstructed_command(data)
        peak = data.get("peak_tflops")
        notes.append("Measured on %s (sm_%d, %d SMs, max SM clock %d MHz%s), L2 %s, %s, with `%s`."
                     % (dev["name"], dev["sm"], dev["sm_count"], dev["clock_mhz"],
                        ", peak %.1f TFLOP/s dense bf16 at that clock" % peak if peak else "",
                        "flushed before each sample" if data.get("l2_flush", True) else "hot (--hot)", date, cmd))
    return "\n".join(lines + [""] + notes + [
        "",
        "TFLOP/s = 2·M·N·K / (median ms · 1e9); x cuBLAS = cuBLAS median / kernel median in the same run. "
        "Generated by `bench/readme_table.py`; do not edit by hand."])


def replace_section(text, body):
    b, e = text.find(BEGIN), text.find(END)
    if b < 0 or e < 0 or e < b:
        raise InputError("README has no '%s' ... '%s' section" % (BEGIN, END))
    return text[:b + len(BEGIN)] + "\n" + body.rstrip("\n") + "\n" + text[e:]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Render tilekit bench JSON into README.md's results section.")
    ap.add_argument("bench_json", nargs="+", help="files written by `tilekit bench --json`")
    ap.add_argument("--info", help="`tilekit info` output, or a JSON list / CSV of kernel resources")
    ap.add_argument("--command", help="the exact command that produced the files (default: from the file, or "
                                      "reconstructed from its results)")
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--stdout", action="store_true", help="print the section instead of rewriting the README")
    a = ap.parse_args(argv)
    try:
        datasets = [load_bench(p) for p in a.bench_json]
        if not any(d["results"] for d in datasets):
            raise InputError("no results in %s" % ", ".join(a.bench_json))
        info = load_info(a.info) if a.info else None
        body = render(datasets, info, a.command)
        if a.stdout:
            print(body)
            return 0
        with open(a.readme) as f:
            text = f.read()
        new = replace_section(text, body)
        tmp = a.readme + ".tmp"
        with open(tmp, "w") as f:
            f.write(new)
        os.replace(tmp, a.readme)
    except (InputError, OSError) as e:
        print("readme_table: %s" % e, file=sys.stderr)
        return 1
    print("readme_table: wrote %d result(s) into %s" % (sum(len(d["results"]) for d in datasets), a.readme))
    return 0


if __name__ == "__main__":
    sys.exit(main())
