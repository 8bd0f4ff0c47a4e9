#!/usr/bin/env python3
"""bench/profile_docs.py - writes the profiling sections of docs/seeds.md
(and the error-map section of the README) from the files one device run
leaves behind (`PART=profile bash bench/device_run.sh OUTDIR`):

    python3 bench/profile_docs.py --docs docs/seeds.md --readme README.md \\
        --coalescing OUTDIR/profile_k10_k11.json \\
        --occupancy OUTDIR/profile_k03_k04.json OUTDIR/profile_k05.json \\
        --smem OUTDIR/verify_smem.txt --error-map OUTDIR/error_map.png [--date YYYY-MM-DD]

Sections (each between `<!-- NAME:begin -->` and `<!-- NAME:end -->`):
  profile-coalescing (docs)  from `tilekit profile --json` of the seed-style
      loads (k10) and the wide panels (k11): global load and store sectors
      per request against the ideal, cp.async's, L1 and L2 hit rates, DRAM
      bytes read, shared-memory bank conflicts, and one generated sentence per
      kernel saying how far its loads are from the ideal;
  profile-occupancy (docs)   from the profiles of k03, k04 and k05 (the
      K-step run): registers, shared memory, blocks per SM each resource
      allows, the limiter, theoretical and achieved occupancy, tensor pipe,
      the top stalls;
  smem-refusal (docs)        the `skip` lines of `tilekit verify
      --smem-limit` output: the pre-launch refusal, word for word;
  error-map (docs and README) the picture of `tilekit verify --plant ...
      --png`, copied to docs/error_map.png, with verify's summary line.
Each section names the device, the date and the command (from NAME.cmd
beside the file when there is one, else rebuilt from the JSON). Every
figure comes from the files; nothing is written unless every target has
its markers. Standard library only.
"""
import argparse
import datetime
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readme_table import InputError, _write, load_tool_json, replace_section  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTIONS = ("profile-coalescing", "profile-occupancy", "smem-refusal", "error-map")


def markers(name):
    return "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name


def load_profile(path):
    what = "the output of `tilekit profile --json`"
    data = load_tool_json(path, "profile", what)
    if not data.get("profiles"):
        raise InputError("%s: not %s (no \"profiles\")" % (path, what))
    data["_path"] = path
    return data


def command_of(path, rebuilt):
    """NAME.cmd beside the file (device_run.sh writes one), else `rebuilt`."""
    cmd = os.path.splitext(path)[0] + ".cmd"
    if os.path.exists(cmd):
        with open(cmd) as f:
            return f.read().strip()
    return rebuilt


def profile_command(data):
    p, ks = data["problem"], [q["kernel"] for q in data["profiles"]]
    cmd = "build/tilekit profile --kernel %s" % ks[0]
    if len(ks) > 1:
        cmd += " --vs %s" % ks[1]
    cmd += " --m %d --n %d --k %d" % (p["m"], p["n"], p["k"])
    for key, flag, default in (("layout", "--layout", "row"), ("op_a", "--op-a", "n"), ("op_b", "--op-b", "n"),
                               ("out", "--out", "fp32")):
        if p.get(key, default) != default:
            cmd += " %s %s" % (flag, p[key])
    return cmd + " --json %s" % os.path.basename(data["_path"])


def day_of(path, date=None):
    return date or datetime.datetime.fromtimestamp(os.path.getmtime(path), datetime.timezone.utc).strftime("%Y-%m-%d")


def num(x, spec=".1f", suffix=""):
    return "-" if x is None else format(x, spec) + suffix


def spr(d, what):
    """'16.00 (ideal 16.00)' for a kind of access ('global_ld', ...)."""
    x, ideal = d.get(what + "_sectors_per_request"), d.get(what + "_sectors_per_request_ideal")
    if ideal is not None and ideal <= 0:
        ideal = None   # no bytes counted for that access (older JSON): no ideal
    if x is None:
        return "-"
    return "%.2f (ideal %s)" % (x, "n/a" if ideal is None else "%.2f" % ideal)


def mb(x):
    return "-" if x is None else "%.1f MB" % (x / 1e6)


def verdict(q):
    """One sentence on how far a kernel's global loads are from the ideal."""
    d = q["derived"]
    x, ideal = d.get("global_ld_sectors_per_request"), d.get("global_ld_sectors_per_request_ideal")
    if ideal is not None and ideal <= 0:
        ideal = None
    name = "`%s`" % q["kernel"]
    if x is None:
        cp = d.get("cp_async_sectors_per_request")
        return "%s: no global loads through the load/store unit%s." % (
            name, "" if cp is None else "; its cp.async touches %.2f sectors per request" % cp)
    if ideal is None:
        return "%s: %.2f sectors per global-load request (ncu gave no bytes asked for: no ideal)." % (name, x)
    over = x / ideal - 1.0 if ideal > 0 else 0.0
    if abs(over) < 0.01:
        return ("%s: %.2f sectors per global-load request, the ideal for the bytes its threads ask for: every "
                "32-byte sector fetched is used whole." % (name, x))
    return ("%s: %.2f sectors per global-load request against an ideal of %.2f: %.0f%% more sectors than the "
            "bytes asked for need." % (name, x, ideal, 100.0 * over))


def profiles_of(datasets):
    """(profile, its file) for each kernel, the first occurrence."""
    seen, out = set(), []
    for d in datasets:
        for q in d["profiles"]:
            if q["kernel"] not in seen:
                seen.add(q["kernel"])
                out.append((q, d))
    return out


def source_lines(datasets, date):
    lines = []
    for d in datasets:
        p, dev = d["problem"], d["profiles"][0].get("device") or "?"
        lines.append("Profiled on %s, %s, %dx%dx%d (one call of each kernel under Nsight Compute, at the clock it "
                     "locks), with `%s`." % (dev, day_of(d["_path"], date), p["m"], p["n"], p["k"],
                                             command_of(d["_path"], profile_command(d))))
    return lines


def _row(cells):
    return "| " + " | ".join(cells) + " |"


def render_coalescing(datasets, date=None):
    head = ["kernel", "global loads: sectors/request", "global stores: sectors/request", "cp.async: sectors/request",
            "L1 hit", "L2 hit", "DRAM read", "shared ld / st bank conflicts", "duration"]
    lines = [_row(head), "|---|---|---|---|--:|--:|--:|---|--:|"]
    notes = []
    for q, _ in profiles_of(datasets):
        m, d = q["metrics"], q["derived"]
        lines.append(_row(["`%s`" % q["kernel"], spr(d, "global_ld"), spr(d, "global_st"), spr(d, "cp_async"),
                           num(m.get("l1_hit_pct"), ".1f", " %"), num(m.get("l2_hit_pct"), ".1f", " %"),
                           mb(m.get("dram_read_bytes")),
                           "%s / %s" % (num(d.get("shared_ld_conflict_pct"), ".1f", " %"),
                                        num(d.get("shared_st_conflict_pct"), ".1f", " %")),
                           num(None if m.get("duration_ns") is None else m["duration_ns"] / 1e3, ".1f", " us")]))
        notes.append(verdict(q))
    return "\n\n".join(["\n".join(lines), " ".join(notes)] + source_lines(datasets, date) + [
        "Sectors per request: 32-byte sectors one warp-wide load or store touched; ideal: the bytes its threads "
        "asked for / 32. Bank conflicts: extra shared-memory wavefronts, % of all. Generated by "
        "`bench/profile_docs.py` from `tilekit profile --json`; do not edit by hand."])


def render_occupancy(datasets, date=None):
    head = ["kernel", "regs", "shared mem/block", "blocks/SM by regs / smem / warps", "limited by",
            "occupancy theoretical / achieved", "tensor pipe busy", "top stalls (warps per issue)", "duration"]
    lines = [_row(head), "|---|--:|--:|---|---|---|--:|---|--:|"]
    for q, _ in profiles_of(datasets):
        m, d = q["metrics"], q["derived"]
        lim = " / ".join(num(m.get(k), ".0f") for k in ("blocks_limit_registers", "blocks_limit_shared_mem",
                                                         "blocks_limit_warps"))
        stalls = ", ".join("%s %.2f" % (s["reason"], s["warps_per_issue"]) for s in d.get("top_stalls", [])[:3])
        smem = m.get("shared_mem_per_block_bytes")
        lines.append(_row(["`%s`" % q["kernel"], num(m.get("registers_per_thread"), ".0f"),
                           "-" if smem is None else "%d B" % smem,
                           lim, "%s (%s/SM)" % (d.get("occupancy_limiter") or "-", num(d.get("blocks_per_sm"), ".0f")),
                           "%s / %s" % (num(d.get("occupancy_theoretical_pct"), ".1f", " %"),
                                        num(d.get("occupancy_achieved_pct"), ".1f", " %")),
                           num(m.get("tensor_pipe_pct"), ".1f", " %"), stalls or "-",
                           num(None if m.get("duration_ns") is None else m["duration_ns"] / 1e3, ".1f", " us")]))
    return "\n\n".join(["\n".join(lines)] + source_lines(datasets, date) + [
        "Blocks/SM by each resource: launch__occupancy_limit_*; the smallest (or the hardware's own block limit) "
        "limits occupancy. Shared memory per block includes the driver's reserve. Generated by "
        "`bench/profile_docs.py` from `tilekit profile --json`; do not edit by hand."])


def render_smem(path, date=None):
    try:
        with open(path) as f:
            text = f.read()
    except OSError as e:
        raise InputError("%s: %s" % (path, e))
    skips = [l for l in text.splitlines() if l.startswith("skip ") and "shared memory" in l]
    if not skips:
        raise InputError("%s: no `skip ...` line about shared memory (is it `tilekit verify --smem-limit` output?)"
                         % path)
    cmd = command_of(path, "build/tilekit verify --smem-limit ...")
    return "\n\n".join(["```\n$ %s\n%s\n```" % (cmd, "\n".join(skips)),
                        "Written by `tilekit verify` on the GPU machine, %s (the lines refusing a kernel for "
                        "shared memory). Generated by `bench/profile_docs.py`; do not edit by hand."
                        % day_of(path, date)])


def render_error_map(png_link, verify_txt, date=None):
    lines = []
    cmd = "build/tilekit verify --plant ... --png ..."
    if verify_txt:
        with open(verify_txt) as f:
            text = f.read()
        lines = [l for l in text.splitlines() if l.startswith(("FAIL ", "ok   ", "  planted"))][:2]
        cmd = command_of(verify_txt, cmd)
    parts = ["![verify's error map of a planted bug](%s)" % png_link]
    if lines:
        parts.append("```\n$ %s\n%s\n```" % (cmd, "\n".join(lines)))
    parts.append("Drawn by `tilekit verify --png` on the GPU machine, %s. Generated by `bench/profile_docs.py`; "
                 "do not edit by hand." % day_of(verify_txt or png_link, date))
    return "\n\n".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Write docs/seeds.md's profiling sections (and the README's error "
                                             "map) from one device run's files.")
    ap.add_argument("--docs", default=os.path.join(ROOT, "docs", "seeds.md"))
    ap.add_argument("--readme", help="also write the README's error-map section")
    ap.add_argument("--coalescing", nargs="+", help="`tilekit profile --json` of k10 and k11")
    ap.add_argument("--occupancy", nargs="+", help="`tilekit profile --json` files covering k03, k04, k05")
    ap.add_argument("--smem", help="`tilekit verify --smem-limit` output")
    ap.add_argument("--error-map", help="the PNG of `tilekit verify --plant ... --png` (copied to docs/)")
    ap.add_argument("--error-map-log", help="that verify's output (default: the PNG's name with .txt)")
    ap.add_argument("--date", help="the date of the run (default: the files' modification time)")
    a = ap.parse_args(argv)
    try:
        bodies = {}
        if a.coalescing:
            bodies["profile-coalescing"] = render_coalescing([load_profile(p) for p in a.coalescing], a.date)
        if a.occupancy:
            bodies["profile-occupancy"] = render_occupancy([load_profile(p) for p in a.occupancy], a.date)
        if a.smem:
            bodies["smem-refusal"] = render_smem(a.smem, a.date)
        png_dst = None
        if a.error_map:
            if not os.path.exists(a.error_map):
                raise InputError("%s: no such file" % a.error_map)
            log = a.error_map_log or os.path.splitext(a.error_map)[0] + ".txt"
            png_dst = os.path.join(os.path.dirname(os.path.abspath(a.docs)), "error_map.png")
            bodies["error-map"] = render_error_map("error_map.png", log if os.path.exists(log) else None, a.date)
        if not bodies:
            raise InputError("nothing to write: give --coalescing, --occupancy, --smem or --error-map")
        targets = [(a.docs, [s for s in SECTIONS if s in bodies])]
        if a.readme and "error-map" in bodies:
            targets.append((a.readme, ["error-map"]))
        new = []
        for path, names in targets:      # every target checked before any is written
            with open(path) as f:
                text = f.read()
            for name in names:
                body = bodies[name]
                if path == a.readme:     # the README links docs/error_map.png
                    rel = os.path.relpath(png_dst, os.path.dirname(os.path.abspath(path)))
                    body = body.replace("](error_map.png)", "](%s)" % rel)
                begin, end = markers(name)
                text = replace_section(text, body, begin, end, path)
            new.append((path, text))
        if png_dst and os.path.abspath(a.error_map) != os.path.abspath(png_dst):
            shutil.copyfile(a.error_map, png_dst)
        for path, text in new:
            _write(path, text)
            print("profile_docs: wrote %s" % path)
    except (InputError, OSError) as e:
        print("profile_docs: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
