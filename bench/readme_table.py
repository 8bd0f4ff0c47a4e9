#!/usr/bin/env python3
"""bench/readme_table.py - renders bench JSON into README.md's results section
and, with --docs, into the generated tables of docs/seeds.md.

    build/tilekit bench --kernel all --shapes 4096x4096x4096,8192x8192x8192 --json out/bench.json
    build/tilekit info > out/info.txt              # optional: resource columns
    python3 bench/readme_table.py out/bench.json [more.json ...] [--info out/info.txt] \
        [--command "the exact command" ...] [--date YYYY-MM-DD] [--readme README.md] \
        [--docs docs/seeds.md] [--no-readme] [--stdout]

README.md, between `<!-- bench:begin -->` and `<!-- bench:end -->`: one row
per kernel with its seed step (SEEDS below), then for each problem size in
the files (4096^3 and 8192^3 in the device run) the median TFLOP/s and the
ratio to cuBLAS, and with --info the registers, shared memory and occupancy;
below it, per input file, a line naming the device, its SM count and clock,
the date and the command, and which kernels spill registers.

Give the main run's file first: a cell is the first measured result of that
kernel and size in the files' order, so a second file (e.g. the same run with
--op-b t, for the seed kernels that take B as N x K and refuse op_b n) only
fills the cells the first left unmeasured. When rows come from different
configurations, a `layout ops C` column says which.

docs/seeds.md (--docs), between `<!-- seeds:begin -->` and `<!-- seeds:end -->`:
the seeds' run (the SEEDS kernels in story order) with the same figures and
each step's change against the row before; between
`<!-- seeds-compare:begin -->` and `<!-- seeds-compare:end -->`: the
comparisons the docs page discusses (COMPARISONS below), measured as the
change in TFLOP/s of one kernel against another at each size. The
comparisons are also printed on stdout.

Every figure comes from the files: nothing here is typed by hand. Nothing is
written unless every target has its markers. The bench JSON schema is the one
`tilekit bench --json` writes (src/lab/lab_report.c). --info takes
`tilekit info` output as text (src/lab/lab_info.c), or a JSON list of
{kernel, regs, local_bytes, static_smem, dyn_smem, threads, blocks_per_sm,
occupancy}, or the same as CSV with a header line. Standard library only.
"""
import argparse
import csv
import datetime
import io
import json
import os
import re
import sys

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
DOCS_BEGIN, DOCS_END = "<!-- seeds:begin -->", "<!-- seeds:end -->"
CMP_BEGIN, CMP_END = "<!-- seeds-compare:begin -->", "<!-- seeds-compare:end -->"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INFO_KEYS = ("regs", "local_bytes", "static_smem", "dyn_smem", "threads", "blocks_per_sm", "occupancy")

# The seed step each kernel rebuilds, keyed by the kernel number (the name up
# to the first '_'), in the order of the seeds' run. The labels are the
# "seed step" column of the design table in docs/seeds.md (a test keeps the
# two equal). Kernels not listed (cublas, k01, k20, k21, k30_*) get "-".
SEEDS = (
    ("k02", '000 "clean code"'),
    ("k03", '000 "starting point", K-step 16'),
    ("k04", '000 "starting point", K-step 32'),
    ("k05", '000 "starting point", K-step 64'),
    ("k06", "000 first kernel: producer/consumer, tic/toc"),
    ("k07", "000 single buffer, two barriers"),
    ("k08", "001 four warps, register double buffer"),
    ("k09", "001 the user's eight-warp split"),
    ("k10", "002 coalesced loads"),
    ("k11", "002 K_UNROLL = 4 panels"),
    ("k12", "003 global -> register prefetch, 8 accumulators"),
    ("k13", "004 the port, SUPER_M order"),
)

# The questions docs/seeds.md asks of the run: (comparison, kernel, base).
# The change is kernel's median TFLOP/s over base's, minus one.
COMPARISONS = (
    ("one warpgroup instead of one warp on a 64x64 block", "k05", "k02"),
    ("K-step 32 instead of 16", "k04", "k03"),
    ("K-step 64 instead of 16", "k05", "k03"),
    ("K-step 64 instead of 32", "k05", "k04"),
    ("single shared buffer (two barriers) instead of double (tic/toc)", "k07", "k06"),
    ("wave specialization (4 producer + 8 consumer warps, 64x128) instead of 4 warps all computing (64x64)",
     "k06", "k05"),
    ("wave specialization (4 producer + 8 consumer warps, 128x256) instead of 8 warps all computing (256x128)",
     "k13", "k12"),
    ("register double buffer and K-step 64 instead of neither (K-step 32), four warps on 128x128", "k08", "k10"),
    ("eight warps with two accumulators each instead of four with four", "k09", "k08"),
    ("K_UNROLL = 4 panels instead of one 32-wide K-step", "k11", "k10"),
)


class InputError(Exception):
    """A file that is missing, malformed, or not of the expected schema."""


def load_tool_json(path, tool, what):
    """The JSON document of `tilekit TOOL --json` at path (a dict whose
    "tool" is "tilekit TOOL"); InputError naming the file otherwise."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError("%s: %s" % (path, e))
    if not isinstance(data, dict) or data.get("tool") != "tilekit " + tool:
        raise InputError("%s: not %s (no \"tool\": \"tilekit %s\")" % (path, what, tool))
    return data


def load_bench(path):
    data = load_tool_json(path, "bench", "a `tilekit bench --json` file")
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


def _occupancy_pct(v):
    """Occupancy in percent: '50%' and 50 are percent, a bare 0.5 a fraction."""
    if v is None or v == "":
        return None
    if isinstance(v, str) and v.strip().endswith("%"):
        return _num(v)
    x = _num(v)
    return x * 100 if x <= 1 else x


# A figures row of `tilekit info` (src/lab/lab_info.c, print_kernel): name,
# regs, local bytes, static smem, dynamic smem, threads, blocks/SM, "NN%".
# Other rows under the header carry a message instead ("needs sm_90",
# "library (...)", a CUDA error) and give no figures.
_INFO_ROW = re.compile(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+(?:\.\d+)?)%\s*$")


def load_info(path):
    """{kernel: {regs, ...}} from a JSON list, a CSV with a header, or the
    text `tilekit info` prints (the rows after its 'kernel regs ...' header)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise InputError("%s: %s" % (path, e))
    rows = []
    stripped = text.lstrip()
    try:
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
                if line.split()[:2] == ["kernel", "regs"]:
                    in_table = True
                    continue
                m = _INFO_ROW.match(line.strip()) if in_table else None
                if m:
                    rows.append(dict(zip(("kernel",) + INFO_KEYS, [m.group(1)] + [m.group(i) + ("%" if i == 8 else "")
                                                                                   for i in range(2, 9)])))
            if not in_table:
                raise InputError("%s: no JSON list, CSV header or `tilekit info` table found" % path)
        out = {}
        for r in rows:
            if "kernel" not in r:
                raise InputError("%s: an entry has no 'kernel'" % path)
            i = {k: _num(r.get(k)) for k in INFO_KEYS if k != "occupancy"}
            i["occupancy"] = _occupancy_pct(r.get("occupancy"))
            out[r["kernel"]] = i
    except ValueError as e:
        raise InputError("%s: %s" % (path, e))
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


def number_of(kernel):
    """'k03' for 'k03_wg_64x64_k16'; the whole name for 'cublas'."""
    return kernel.split("_")[0]


def seed_of(kernel):
    return dict(SEEDS).get(number_of(kernel), "-")


class Table:
    """The results of all files, pivoted: kernels in the order they first
    appear, one column per problem size (ordered by M*N*K). A cell is the
    first measured result of that kernel and size in the files' order, so
    the main run goes first and a later file (another B layout, say) fills
    only the cells the earlier ones could not: the seeds' kernels with B
    stored N x K refuse the default op_b n and are measured with op_b t."""

    def __init__(self, datasets):
        self.kernels, self.all = [], {}
        cols = {}
        for data in datasets:
            for r in data["results"]:
                if r["kernel"] not in self.kernels:
                    self.kernels.append(r["kernel"])
                cols[shape_of(r)] = r["m"] * r["n"] * r["k"]
                self.all.setdefault((r["kernel"], shape_of(r)), []).append(r)
        self.cols = sorted(cols, key=lambda c: (cols[c], c))
        self.chosen = {}
        for key, rs in self.all.items():
            ok = [r for r in rs if r["status"] == "ok" and r.get("tflops") is not None]
            if ok:
                self.chosen[key] = ok[0]
        configs = sorted(set(config_of(r) for r in self.chosen.values()))
        self.one_config = configs[0] if len(configs) == 1 else None

    def label(self, col):
        m, n, k = col.split("x")
        return ("%s³" % m) if m == n == k else col

    def result(self, kernel, col):
        """The measured result of the cell, or None."""
        return self.chosen.get((kernel, col))

    def config_cell(self, kernel):
        """The configurations the row's figures were measured in."""
        seen = []
        for col in self.cols:
            r = self.result(kernel, col)
            if r and config_of(r) not in seen:
                seen.append(config_of(r))
        return " / ".join(seen) if seen else "-"

    def tflops_cell(self, kernel, col):
        if (kernel, col) not in self.all:
            return "-"
        r = self.result(kernel, col)
        return fmt(r["tflops"], ".1f") if r else "n/a"

    def ratio_cell(self, kernel, col):
        r = self.result(kernel, col)
        return fmt(r.get("ratio_cublas"), ".3f") if r else "-"

    def change(self, kernel, base, col, against=""):
        """'+12.3%' (then `against`): kernel's TFLOP/s over base's at col,
        with both configurations named when they differ; '-' if either is
        missing."""
        a, b = self.result(kernel, col), self.result(base, col)
        if not a or not b or not b["tflops"]:
            return "-"
        s = "%+.1f%%" % (100.0 * (a["tflops"] / b["tflops"] - 1.0)) + against
        if config_of(a) != config_of(b):
            s += " (%s vs %s)" % (config_of(a), config_of(b))
        return s

    def find(self, number):
        """The kernels whose number is `number` ('k03'), in table order."""
        return [k for k in self.kernels if number_of(k) == number]

    def failures(self):
        """'kernel at 4096³: status' for each cell with no measured result
        (the status of its first result)."""
        out = []
        for kernel in self.kernels:
            for col in self.cols:
                rs = self.all.get((kernel, col))
                if rs and not self.result(kernel, col):
                    out.append("`%s` at %s: %s" % (kernel, self.label(col),
                                                   str(rs[0]["status"]).replace("|", "/").replace("\n", " ")))
        return out


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


def device_lines(datasets, commands=(), date=None):
    """One line per file: device, clock, peak, L2 flush, date, command
    (commands[i] for the i-th file where given)."""
    notes = []
    for i, data in enumerate(datasets):
        if not data["results"]:
            continue
        command = commands[i] if i < len(commands) else None
        dev = data["device"]
        day = data.get("date") or date or datetime.datetime.fromtimestamp(
            os.path.getmtime(data["_path"]), datetime.timezone.utc).strftime("%Y-%m-%d")
        cmd = data.get("command") or command or reconstructed_command(data)
        peak = data.get("peak_tflops")
        notes.append("Measured on %s (sm_%d, %d SMs, max SM clock %d MHz%s), L2 %s, %s, with `%s`."
                     % (dev["name"], dev["sm"], dev["sm_count"], dev["clock_mhz"],
                        ", peak %.1f TFLOP/s dense bf16 at that clock" % peak if peak else "",
                        "flushed before each sample" if data.get("l2_flush", True) else "hot (--hot)", day, cmd))
    return notes


def common_notes(table):
    notes = []
    if table.one_config:
        notes.append("Every result: `%s` (layout, op(A) op(B), type of C), bf16 A and B, fp32 accumulation."
                     % table.one_config)
    else:
        notes.append("Column `layout ops C`: the layout, op(A) op(B) and type of C each row was measured in "
                     "(the first file's where the kernel supports it); bf16 A and B, fp32 accumulation.")
    fails = table.failures()
    if fails:
        notes.append("Not measured (n/a): " + "; ".join(fails) + ".")
    return notes


def _row(cells):
    return "| " + " | ".join(cells) + " |"


def _smem(i):
    if i["static_smem"] is None and i["dyn_smem"] is None:
        return "-"
    return "%d" % ((i["static_smem"] or 0) + (i["dyn_smem"] or 0))


def _info_cells(info, kernel, keys):
    i = info.get(kernel)
    if i is None:
        return ["-"] * len(keys)
    cells = []
    for key in keys:
        if key == "smem":
            cells.append(_smem(i))
        elif key == "occupancy":
            cells.append("-" if i["occupancy"] is None else "%.0f%%" % i["occupancy"])
        else:
            cells.append(fmt(i[key], "d"))
    return cells


def spill_note(info, kernels):
    known = [k for k in kernels if info.get(k) and info[k]["local_bytes"] is not None]
    spills = ["`%s` %d B" % (k, info[k]["local_bytes"]) for k in known if info[k]["local_bytes"]]
    if spills:
        return "Register spills (local memory per thread, `tilekit info`): " + ", ".join(spills) + "."
    if known:
        return "No kernel in the table spills registers (local memory 0 B in `tilekit info`)."
    return None


def render(datasets, info=None, commands=(), date=None):
    """The README section: one row per kernel."""
    t = Table(datasets)
    head, align = ["kernel"], ["---"]
    if not t.one_config:
        head.append("layout ops C")
        align.append("---")
    for col in t.cols:
        head += ["TFLOP/s %s" % t.label(col), "x cuBLAS %s" % t.label(col)]
        align += ["--:", "--:"]
    keys = ("regs", "smem", "occupancy")
    if info is not None:
        head += ["regs", "shared mem (B/block)", "occupancy"]
        align += ["--:"] * 3
    lines = [_row(head), "|" + "|".join(align) + "|"]
    for kernel in t.kernels:
        cells = ["`%s`" % kernel]
        if not t.one_config:
            cells.append(t.config_cell(kernel))
        for col in t.cols:
            cells += [t.tflops_cell(kernel, col), t.ratio_cell(kernel, col)]
        if info is not None:
            cells += _info_cells(info, kernel, keys)
        lines.append(_row(cells))
    notes = device_lines(datasets, commands, date) + common_notes(t)
    if info is not None:
        s = spill_note(info, t.kernels)
        if s:
            notes.append(s)
    return "\n\n".join(["\n".join(lines)] + notes + [
        "TFLOP/s = 2·M·N·K / (median ms · 1e9); x cuBLAS = cuBLAS median / kernel median in the same run; "
        "registers, shared memory (static + dynamic) and occupancy (theoretical, from blocks per SM) from "
        "`tilekit info`. Generated by `bench/readme_table.py`; do not edit by hand."])


def seed_kernels(t):
    out = []
    for number, _ in SEEDS:
        out += t.find(number)
    return out


def render_docs_run(datasets, info=None, commands=(), date=None):
    """docs/seeds.md's run: the seed kernels in story order, each step's change."""
    t = Table(datasets)
    head, align = ["kernel", "seed step"], ["---", "---"]
    if not t.one_config:
        head.append("layout ops C")
        align.append("---")
    for col in t.cols:
        head += ["TFLOP/s %s" % t.label(col), "x cuBLAS %s" % t.label(col)]
        align += ["--:", "--:"]
    for col in t.cols:
        head.append("vs previous row %s" % t.label(col))
        align.append("--:")
    keys = ("regs", "occupancy")
    if info is not None:
        head += ["regs", "occupancy"]
        align += ["--:"] * 2
    lines = [_row(head), "|" + "|".join(align) + "|"]
    prev = None
    for kernel in seed_kernels(t):
        cells = ["`%s`" % kernel]
        if not t.one_config:
            cells.append(t.config_cell(kernel))
        for col in t.cols:
            cells += [t.tflops_cell(kernel, col), t.ratio_cell(kernel, col)]
        for col in t.cols:
            cells.append(t.change(kernel, prev, col, " vs " + number_of(prev)) if prev else "-")
        if info is not None:
            cells += _info_cells(info, kernel, keys)
        lines.append(_row(cells))
        prev = kernel
    notes = device_lines(datasets, commands, date) + common_notes(t)
    ref = []
    for col in t.cols:
        for r in t.all.get(("cublas", col), []):
            if r["status"] == "ok" and r.get("tflops") is not None:
                ref.append("%s TFLOP/s at %s%s" % (fmt(r["tflops"], ".1f"), t.label(col),
                                                   "" if t.one_config else " (%s)" % config_of(r)))
    if ref:
        notes.append("cuBLAS in the same run: " + ", ".join(ref) + ".")
    return "\n\n".join(["\n".join(lines)] + notes + [
        "vs previous row: change in median TFLOP/s against the kernel one row up. "
        "Generated by `bench/readme_table.py --docs`; do not edit by hand."])


def render_docs_compare(datasets):
    """The comparisons docs/seeds.md discusses, largest size first."""
    t = Table(datasets)
    cols = list(reversed(t.cols))
    head = ["comparison", "kernels"] + ["measured change %s" % t.label(c) if i == 0 else "at %s" % t.label(c)
                                        for i, c in enumerate(cols)]
    lines = [_row(head), "|" + "|".join(["---", "---"] + ["--:"] * len(cols)) + "|"]
    for what, number, base in COMPARISONS:
        a, b = t.find(number), t.find(base)
        if not a or not b:
            lines.append(_row([what, "%s vs %s" % (number, base)] + ["not in this run"] * len(cols)))
            continue
        for ka in a:
            for kb in b:
                lines.append(_row([what, "`%s` vs `%s`" % (ka, kb)] + [t.change(ka, kb, c) for c in cols]))
    return "\n".join(lines + [
        "",
        "Change: the first kernel's median TFLOP/s over the second's, minus one (positive: the first is faster). "
        "Generated by `bench/readme_table.py --docs`; do not edit by hand."])


def replace_section(text, body, begin=BEGIN, end=END, what="README"):
    b, e = text.find(begin), text.find(end)
    if b < 0 or e < 0 or e < b:
        raise InputError("%s has no '%s' ... '%s' section" % (what, begin, end))
    return text[:b + len(begin)] + "\n" + body.rstrip("\n") + "\n" + text[e:]


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_section(path, section, body):
    """Rewrites the `<!-- section:begin -->` ... `<!-- section:end -->` part
    of the file at path with body (InputError where it has none)."""
    with open(path) as f:
        text = f.read()
    _write(path, replace_section(text, body, "<!-- %s:begin -->" % section, "<!-- %s:end -->" % section, path))


def emit_section(tool, readme, section, body, show=True):
    """The section scripts' output: body written into readme's section
    (saying so), or printed where no readme is named (and show)."""
    if readme:
        write_section(readme, section, body)
        print("%s: wrote the %s section of %s" % (tool, section, readme))
    elif show:
        print(body)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Render tilekit bench JSON into README.md's results section "
                                             "(and docs/seeds.md's tables with --docs).")
    ap.add_argument("bench_json", nargs="+", help="files written by `tilekit bench --json`")
    ap.add_argument("--info", help="`tilekit info` output, or a JSON list / CSV of kernel resources")
    ap.add_argument("--command", action="append", default=[],
                    help="the exact command that produced a file; repeat once per file, in the files' order "
                         "(default: from the file, or reconstructed from its results)")
    ap.add_argument("--date", help="the date of the run (default: from the file, else its modification time)")
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--no-readme", action="store_true", help="leave the README alone")
    ap.add_argument("--docs", help="also rewrite the seeds:begin/end and seeds-compare:begin/end sections of "
                                   "this file (docs/seeds.md)")
    ap.add_argument("--stdout", action="store_true", help="print the sections instead of rewriting files")
    a = ap.parse_args(argv)
    try:
        datasets = [load_bench(p) for p in a.bench_json]
        if not any(d["results"] for d in datasets):
            raise InputError("no results in %s" % ", ".join(a.bench_json))
        info = load_info(a.info) if a.info else None
        sections = []     # (path, [(begin, end, body)])
        if not a.no_readme:
            sections.append((a.readme, [(BEGIN, END, render(datasets, info, a.command, a.date))]))
        compare = None
        if a.docs:
            compare = render_docs_compare(datasets)
            sections.append((a.docs, [(DOCS_BEGIN, DOCS_END, render_docs_run(datasets, info, a.command, a.date)),
                                      (CMP_BEGIN, CMP_END, compare)]))
        if a.stdout:
            for path, parts in sections:
                for begin, _, body in parts:
                    print("%s (%s)\n%s\n" % (begin, os.path.basename(path), body))
            return 0
        new = []
        for path, parts in sections:      # every file checked before any is written
            with open(path) as f:
                text = f.read()
            for begin, end, body in parts:
                text = replace_section(text, body, begin, end, path)
            new.append((path, text))
        for path, text in new:
            _write(path, text)
    except (InputError, OSError) as e:
        print("readme_table: %s" % e, file=sys.stderr)
        return 1
    n = sum(len(d["results"]) for d in datasets)
    for path, _ in new:
        print("readme_table: wrote %d result(s) into %s" % (n, path))
    if compare:
        print(compare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
