"""bench/plot.py on two small fake suite runs (fp32 and bf16 C; made-up
figures that never leave the temporary directory): the summary arithmetic,
the Markdown table, the README section between its markers, the refusals.
None of it needs matplotlib; the PNG is checked only where matplotlib is
installed (else the test says it skipped that part)."""
import contextlib
import importlib.util
import io
import json
import math
import os
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("suite_plot", os.path.join(ROOT, "bench", "plot.py"))
pl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pl)

README = """# project

<!-- bench:begin -->
kernel table
<!-- bench:end -->

<!-- suite:begin -->
not yet measured
<!-- suite:end -->

after
"""


def row(kernel, suite, m, n, k, ratio, out, ops="nn", status="ok", chosen=None):
    ok = status == "ok"
    return {"kernel": kernel, "m": m, "n": n, "k": k, "layout": "row", "op_a": ops[0], "op_b": ops[1], "out": out,
            "alpha": 1, "beta": 0, "pad": 0, "samples": 5 if ok else 0, "ms_min": 1.0 if ok else None,
            "ms_median": 1.0 if ok else None, "ms_p20": None, "ms_p80": None, "tflops": None, "pct_peak": None,
            "ratio_cublas": ratio if ok else None, "status": status, "suite": suite,
            "chosen": chosen if kernel == "auto" else None}


# (suite, m, n, k, ops, auto's x cuBLAS in fp32, in bf16); None = auto refused the shape
SHAPES = (
    ("square", 128, 128, 128, "nn", 0.5, 1.0),
    ("square", 4096, 4096, 4096, "nn", 2.0, 1.0),
    ("odd", 17, 33, 9, "nn", 0.25, 0.81),
    ("odd", 4096, 4097, 4096, "nt", None, 1.0),
)


def run_file(out):
    results = []
    for suite, m, n, k, ops, r32, r16 in SHAPES:
        ratio = r32 if out == "fp32" else r16
        results.append(row("cublas", suite, m, n, k, 1.0, out, ops))
        if ratio is None:
            results.append(row("auto", suite, m, n, k, None, out, ops, status="auto: no kernel supports this"))
        else:
            results.append(row("auto", suite, m, n, k, ratio, out, ops, chosen="k31_wgmma_cluster"))
    return {"tool": "tilekit bench", "version": "0.1.0",
            "device": {"name": "Fake GPU", "sm": 90, "sm_count": 132, "clock_mhz": 1980, "l2_bytes": 52428800},
            "peak_tflops": 1070.5, "l2_flush": True, "results": results}


def run_in_tmp(args, readme=README, files=None):
    """Writes fp32.json and bf16.json (or `files`), runs main() in a
    temporary folder with args (FP32/BF16/DIR replaced); returns
    (status, README text, stdout, stderr, folder listing)."""
    with tempfile.TemporaryDirectory() as d:
        files = files if files is not None else {"fp32.json": run_file("fp32"), "bf16.json": run_file("bf16")}
        for name, body in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(body if isinstance(body, str) else json.dumps(body))
        rd = os.path.join(d, "README.md")
        with open(rd, "w") as f:
            f.write(readme)
        real = [a.replace("DIR", d) for a in args]
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            st = pl.main(real)
        with open(rd) as f:
            text = f.read().replace(d, "DIR")     # the generated-by line names the folder
        listing = {}
        for root, _, names in os.walk(d):
            for name in names:
                p = os.path.join(root, name)
                with open(p, "rb") as f:
                    listing[os.path.relpath(p, d)] = f.read()
        return st, text, out.getvalue(), err.getvalue(), listing


def test_summary_arithmetic():
    data = run_file("fp32")
    data["_path"] = "fp32.json"
    s = pl.summarize(pl.rows_of(data, "auto"))
    assert [name for name, _ in s] == ["square", "odd", None], s
    sq, odd, overall = (st for _, st in s)
    # square: 0.5 and 2.0 -> geomean 1, min 0.5 at 128^3, one below 0.9
    assert sq["shapes"] == 2 and sq["measured"] == 2 and abs(sq["geomean"] - 1.0) < 1e-12
    assert sq["min"] == 0.5 and sq["min_shape"] == "128x128x128 n n" and sq["below"] == 1
    # odd: 0.25 and a refusal -> geomean 0.25, one not measured
    assert odd["shapes"] == 2 and odd["measured"] == 1 and odd["not_measured"] == 1
    assert abs(odd["geomean"] - 0.25) < 1e-12 and odd["min_shape"] == "17x33x9 n n" and odd["below"] == 1
    # overall: 0.5 * 2 * 0.25 = 0.25 over 3 shapes
    assert overall["shapes"] == 4 and overall["not_measured"] == 1 and overall["below"] == 2
    assert abs(overall["geomean"] - 0.25 ** (1 / 3.0)) < 1e-12 and overall["min"] == 0.25
    # not measured: null, NaN, inf, zero and negative ratios, and any status but ok
    for bad in (None, float("nan"), float("inf"), 0.0, -1.0):
        assert pl.ratio_of({"status": "ok", "ratio_cublas": bad}) is None, bad
    assert pl.ratio_of({"status": "CUDA: out of memory", "ratio_cublas": 1.0}) is None
    # 0.9 itself is not below 0.9; equal minima keep the first shape
    rows = [row("auto", "a", 1, 1, 1, 0.9, "fp32"), row("auto", "a", 2, 2, 2, 0.9, "fp32")]
    st = pl.stat(rows)
    assert st["below"] == 0 and st["min_shape"] == "1x1x1 n n" and math.isclose(st["geomean"], 0.9)


def test_table():
    st, _, out, err, _ = run_in_tmp(["DIR/fp32.json", "DIR/bf16.json", "--table", "--no-png"])
    assert st == 0, err
    lines = [l for l in out.splitlines() if l.startswith("| ")]
    assert lines[0] == ("| suite | run | shapes | geomean x cuBLAS | min x cuBLAS (shape) | below 0.9x "
                        "| not measured |"), lines[0]
    assert lines[1:] == [
        "| square | fp32 C | 2 | 1.000 | 0.500 (`128x128x128 n n`) | 1 | 0 |",
        "| square | bf16 C | 2 | 1.000 | 1.000 (`128x128x128 n n`) | 0 | 0 |",
        "| odd | fp32 C | 2 | 0.250 | 0.250 (`17x33x9 n n`) | 1 | 1 |",
        "| odd | bf16 C | 2 | 0.900 | 0.810 (`17x33x9 n n`) | 1 | 0 |",
        "| **overall** | fp32 C | 4 | 0.630 | 0.250 (`17x33x9 n n`) | 2 | 1 |",
        "| **overall** | bf16 C | 4 | 0.949 | 0.810 (`17x33x9 n n`) | 1 | 0 |",
    ], lines
    # --table FILE writes the same table there
    st, _, _, err, listing = run_in_tmp(["DIR/fp32.json", "--table", "DIR/table.md", "--no-png"])
    assert st == 0, err
    assert b"| **overall** | fp32 C | 4 | 0.630 |" in listing["table.md"]


def test_readme_section():
    args = ["DIR/fp32.json", "DIR/bf16.json", "--readme", "DIR/README.md", "--png", "DIR/docs/suite.png",
            "--no-png", "--date", "2026-01-02", "--command", "build/tilekit bench --suite all --json fp32.json"]
    st, text, _, err, _ = run_in_tmp(args)
    assert st == 0, err
    assert text.startswith("# project\n\n<!-- bench:begin -->\nkernel table\n<!-- bench:end -->\n\n" + pl.BEGIN)
    assert text.endswith(pl.END + "\n\nafter\n")
    sec = text[text.index(pl.BEGIN):text.index(pl.END)]
    assert "not yet measured" not in sec
    assert "| **overall** | bf16 C | 4 | 0.949 | 0.810 (`17x33x9 n n`) | 1 | 0 |" in sec
    assert "![x cuBLAS of every suite shape](docs/suite.png)" in sec
    # each run: device, date, command (given for the first, reconstructed for the second)
    assert ("fp32 C: measured on Fake GPU (sm_90, 132 SMs), L2 flushed before each sample, 2026-01-02, "
            "with `build/tilekit bench --suite all --json fp32.json`.") in sec, sec
    assert "bf16 C: measured on Fake GPU" in sec
    assert "`build/tilekit bench --suite FILE --out bf16 --json bf16.json`" in sec, sec
    assert "do not edit by hand" in sec
    assert "Generated by `python3 bench/plot.py DIR/fp32.json DIR/bf16.json --readme DIR/README.md" in sec
    # run again on its own output: the same text
    st2, text2, _, _, _ = run_in_tmp(args, readme=text)
    assert st2 == 0 and text2 == text


def test_refusals():
    st, text, _, err, _ = run_in_tmp(["DIR/fp32.json", "--readme", "DIR/README.md", "--no-png"],
                                     readme="# no markers\n")
    assert st == 1 and "suite:begin" in err and text == "# no markers\n"
    st, _, _, err, _ = run_in_tmp(["DIR/x.json", "--no-png"], files={"x.json": "{broken"})
    assert st == 1 and "x.json" in err
    plain = run_file("fp32")
    for r in plain["results"]:
        r.pop("suite")
    st, _, _, err, _ = run_in_tmp(["DIR/x.json", "--no-png"], files={"x.json": plain})
    assert st == 1 and "--suite" in err, err
    st, _, _, err, _ = run_in_tmp(["DIR/x.json", "--no-png", "--kernel", "k99"], files={"x.json": run_file("fp32")})
    assert st == 1 and "k99" in err, err


def test_png():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("skip test_plot.test_png: matplotlib is not installed (the PNG is not checked)")
        st, text, _, err, listing = run_in_tmp(["DIR/fp32.json", "--png", "DIR/s.png", "--readme",
                                                "DIR/README.md"])
        # without matplotlib a PNG request fails cleanly and rewrites nothing
        assert st == 1 and "matplotlib" in err and text == README and "s.png" not in listing, err
        return
    st, _, _, err, listing = run_in_tmp(["DIR/fp32.json", "DIR/bf16.json", "--png", "DIR/docs/suite.png"])
    assert st == 0, err
    png = listing.get(os.path.join("docs", "suite.png"))
    assert png and png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000, len(png or b"")
    st, _, _, err, listing = run_in_tmp(["DIR/moe.json", "--png", "DIR/docs/moe.png"], files={"moe.json": moe_file()})
    assert st == 0, err
    png = listing.get(os.path.join("docs", "moe.png"))
    assert png and png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000, len(png or b"")


def test_real_readme_has_markers():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    assert text.count(pl.BEGIN) == 1 and text.count(pl.END) == 1 and text.index(pl.BEGIN) < text.index(pl.END)


# grouped lines (bench/shapes/moe.txt): each timed against a host loop of cuBLAS GEMMs ("cublas-loop")
def grouped_row(kernel, form, m, n, k, ops, ratio, status="ok"):
    r = row(kernel, "moe", m, n, k, ratio if kernel == "auto" else None, "bf16", ops, status)
    r.update(form=form, ratio_cublas_grouped=None, ratio_dense=None)
    return r


# (form, m, n, k, ops, auto's x cuBLAS loop): rows: 2.0, 0.5; k: 0.8, None (refused); all: 0.8^(1/3) = 0.928
GROUPED = (("rows 8:16:balanced", 16, 28672, 4096, "nt", 2.0), ("rows 8:16:skewed", 16, 28672, 4096, "nt", 0.5),
           ("k 8:16:balanced", 28672, 4096, 16, "tn", 0.8), ("k 8:16:skewed", 28672, 4096, 16, "tn", None))


def moe_file():
    results = []
    for form, m, n, k, ops, ratio in GROUPED:
        results.append(grouped_row("cublas-loop", form, m, n, k, ops, None))
        results.append(grouped_row("auto", form, m, n, k, ops, ratio,
                                   "ok" if ratio is not None else "auto: no kernel supports this"))
    return dict(run_file("bf16"), results=results)


MOE_README = README.replace("after\n", "<!-- moe:begin -->\nold moe\n<!-- moe:end -->\n\nafter\n")


def test_grouped_table():
    st, _, out, err, _ = run_in_tmp(["DIR/moe.json", "--table", "--no-png"], files={"moe.json": moe_file()})
    assert st == 0, err
    lines = [l for l in out.splitlines() if l.startswith("| ")]
    # the wording follows the file: its yardstick rows are cublas-loop, every row a grouped line
    assert lines[0] == ("| suite | run | lines | geomean x cuBLAS loop | min x cuBLAS loop (line) | below 0.9x "
                        "| not measured |"), lines[0]
    # a row per form before the suite's; one suite: no overall row (it would repeat the suite's)
    assert lines[1:] == [
        "| moe, rows split | bf16 C | 2 | 1.000 | 0.500 (`rows 8:16:skewed 16x28672x4096 n t`) | 1 | 0 |",
        "| moe, K split | bf16 C | 2 | 0.800 | 0.800 (`k 8:16:balanced 28672x4096x16 t n`) | 1 | 1 |",
        "| moe | bf16 C | 4 | 0.928 | 0.500 (`rows 8:16:skewed 16x28672x4096 n t`) | 2 | 1 |",
    ], lines
    assert "x cuBLAS loop = the median of a host loop of cublasGemmEx over the groups" in out, out
    # a file with plain and grouped suites: x cuBLAS, each row against its own yardstick
    mixed = run_file("bf16")
    mixed["results"] += moe_file()["results"]
    st, _, out, err, _ = run_in_tmp(["DIR/mixed.json", "--table", "--no-png"], files={"mixed.json": mixed})
    assert st == 0, err
    assert "| suite | run | shapes | geomean x cuBLAS | min x cuBLAS (shape) |" in out, out
    assert "| moe, K split | bf16 C | 2 | 0.800 |" in out and "| **overall** | bf16 C | 8 |" in out, out
    assert "for a grouped or batched line a host loop of cublasGemmEx" in out, out
    # the reconstructed command leaves the yardstick rows out
    assert pl.reconstructed_command(dict(moe_file(), _path="m.json"), "auto") == \
        "build/tilekit bench --suite moe --out bf16 --json m.json"


def test_section_option():
    args = ["DIR/moe.json", "--readme", "DIR/README.md", "--section", "moe", "--no-png", "--png", "DIR/docs/moe.png",
            "--date", "2026-11-27", "--command", "build/tilekit bench --suite moe --json out/suite_moe.json"]
    st, text, _, err, _ = run_in_tmp(args, readme=MOE_README, files={"moe.json": moe_file()})
    assert st == 0, err
    # the suite section and everything else as they were; the moe section rewritten
    assert text.startswith(MOE_README[:MOE_README.index("<!-- moe:begin -->")]), text
    assert "not yet measured" in text and "old moe" not in text
    assert text.endswith("<!-- moe:end -->\n\nafter\n")
    sec = text[text.index("<!-- moe:begin -->"):text.index("<!-- moe:end -->")]
    assert "| moe, rows split | bf16 C | 2 | 1.000 |" in sec, sec
    assert "![x cuBLAS loop of every suite line](docs/moe.png)" in sec, sec
    assert "2026-11-27, with `build/tilekit bench --suite moe --json out/suite_moe.json`." in sec, sec
    # the generated-by line quotes what needs quoting: it can be pasted into a shell as it is
    assert ("Generated by `python3 bench/plot.py DIR/moe.json --readme DIR/README.md --section moe --no-png "
            "--png DIR/docs/moe.png --date 2026-11-27 --command "
            "'build/tilekit bench --suite moe --json out/suite_moe.json'`; do not edit by hand.") in sec, sec
    # the default section is still suite; a missing section is named and nothing is written
    st, text, _, err, _ = run_in_tmp(args[:3] + ["--no-png"], readme=MOE_README, files={"moe.json": moe_file()})
    assert st == 0 and "old moe" in text and "not yet measured" not in text, err
    st, text, _, err, _ = run_in_tmp(args, files={"moe.json": moe_file()})
    assert st == 1 and "<!-- moe:begin -->" in err and text == README, err


def test_form_names():
    r = grouped_row("auto", "rows 256:4096:skewed", 4096, 7168, 2048, "nt", 1.0)
    assert pl.shape_of(r) == "rows 256:4096:skewed 4096x7168x2048 n t"     # as lab_report.c's shape_str
    assert pl.form_kind(r) == "rows" and pl.form_block(r) == "rows, G=256"
    assert pl.form_block(dict(r, form="k 3,0,5")) == "k, G=3"
    assert pl.form_block(dict(r, form="batch 16 bcast-b")) == "batch, 16"
    assert pl.form_kind(row("auto", "llm", 1, 2, 3, 1.0, "fp32")) is None


# --kernels: plain bench runs, the main one and the --op-b t one (made-up figures)
def bench_file(rows, op_b="n"):
    results = []
    for kernel, m, tflops, status in rows:
        ok = status == "ok"
        results.append({"kernel": kernel, "m": m, "n": m, "k": m, "layout": "row", "op_a": "n", "op_b": op_b,
                        "out": "fp32", "alpha": 1, "beta": 0, "pad": 0, "samples": 10 if ok else 0,
                        "ms_min": 1.0 if ok else None, "ms_median": 1.0 if ok else None, "ms_p20": None,
                        "ms_p80": None, "tflops": tflops if ok else None, "pct_peak": None,
                        "ratio_cublas": None, "status": status})
    return {"tool": "tilekit bench", "version": "0.1.0",
            "device": {"name": "Fake GPU", "sm": 90, "sm_count": 132, "clock_mhz": 1980, "l2_bytes": 52428800},
            "peak_tflops": 1070.5, "l2_flush": True, "results": results}


MAIN = bench_file([("cublas", 4096, 700.0, "ok"), ("k01_naive", 4096, 5.0, "ok"),
                   ("k10_4w_128x128_k32", 4096, None, "op_b N is not supported"), ("k30_wgmma_tma", 4096, 690.0, "ok"),
                   ("cublas", 8192, 750.0, "ok"), ("k01_naive", 8192, 4.0, "ok"),
                   ("k10_4w_128x128_k32", 8192, None, "op_b N is not supported"),
                   ("k30_wgmma_tma", 8192, 760.0, "ok")])
NT = bench_file([("cublas", 4096, 690.0, "ok"), ("k10_4w_128x128_k32", 4096, 60.0, "ok"),
                 ("cublas", 8192, 740.0, "ok"), ("k10_4w_128x128_k32", 8192, 65.0, "ok")], op_b="t")


def test_kernel_series():
    main, nt = dict(MAIN, _path="bench.json"), dict(NT, _path="bench_nt.json")
    kernels, sizes, tflops, other = pl.kernel_series([main, nt])
    # story order is the files' row order; the NT file only fills what the main one could not measure
    assert kernels == ["cublas", "k01_naive", "k10_4w_128x128_k32", "k30_wgmma_tma"], kernels
    assert sizes == ["4096x4096x4096", "8192x8192x8192"], sizes
    assert tflops[("cublas", "4096x4096x4096")] == 700.0 and tflops[("k30_wgmma_tma", "8192x8192x8192")] == 760.0
    assert tflops[("k10_4w_128x128_k32", "8192x8192x8192")] == 65.0
    assert other["k10_4w_128x128_k32"] == "row NT fp32" and other["cublas"] is None and other["k01_naive"] is None
    # a kernel never measured is left out
    only_refused = dict(bench_file([("k10_4w_128x128_k32", 4096, None, "refused"), ("cublas", 4096, 1.0, "ok")]),
                        _path="x.json")
    assert pl.kernel_series([only_refused])[0] == ["cublas"]


def test_kernels_refusals():
    st, _, _, err, _ = run_in_tmp(["--kernels", "DIR/fp32.json", "--png", "DIR/k.png"])
    assert st == 1 and "--suite run" in err, err
    st, _, _, err, _ = run_in_tmp(["--kernels", "DIR/main.json", "--table"], files={"main.json": MAIN})
    assert st == 2 and "--kernels draws the kernel plot only" in err, err
    empty = bench_file([("k10_4w_128x128_k32", 4096, None, "refused")])
    st, _, _, err, _ = run_in_tmp(["--kernels", "DIR/e.json", "--png", "DIR/k.png"], files={"e.json": empty})
    assert st == 1 and "no measured result" in err, err


def test_kernels_png():
    args = ["--kernels", "DIR/main.json", "DIR/nt.json", "--png", "DIR/docs/kernels.png"]
    files = {"main.json": MAIN, "nt.json": NT}
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("skip test_plot.test_kernels_png: matplotlib is not installed (the PNG is not checked)")
        st, _, _, err, listing = run_in_tmp(args, files=files)
        assert st == 1 and "matplotlib" in err and os.path.join("docs", "kernels.png") not in listing, err
        return
    st, _, out, err, listing = run_in_tmp(args, files=files)
    assert st == 0 and "kernels.png" in out, err
    png = listing.get(os.path.join("docs", "kernels.png"))
    assert png and png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000, len(png or b"")
