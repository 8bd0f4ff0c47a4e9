"""bench/readme_table.py on small fake bench files and fake `tilekit info`
text (made-up figures that never leave the temporary directory): the README
table (one row per kernel, a column pair per size, resource columns), the docs page's run and comparison tables, the device line, and
that only the marked sections change."""
import contextlib
import importlib.util
import io
import json
import os
import re
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("readme_table", os.path.join(ROOT, "bench", "readme_table.py"))
rt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rt)

README = """# project

intro text

<!-- bench:begin -->
not yet measured
<!-- bench:end -->

after the table
"""

DOCS = """# seeds

<!-- seeds:begin -->
not yet measured
<!-- seeds:end -->

prose between

<!-- seeds-compare:begin -->
not yet measured
<!-- seeds-compare:end -->

the end
"""


def result(kernel, size, tflops=None, ratio=None, status="ok"):
    ok = status == "ok"
    ms = 2.0 * size ** 3 / (tflops * 1e9) if ok else None
    return {"kernel": kernel, "m": size, "n": size, "k": size, "layout": "row", "op_a": "n", "op_b": "n",
            "out": "fp32", "alpha": 1, "beta": 0, "samples": 10 if ok else 0, "ms_min": ms, "ms_median": ms,
            "ms_p20": ms, "ms_p80": ms, "tflops": tflops, "pct_peak": None, "ratio_cublas": ratio,
            "status": status}


# Figures chosen so that every ratio and change is exact in decimal.
FIGS = {  # kernel: (TFLOP/s at 4096^3, at 8192^3)
    "cublas": (600.0, 700.0),
    "k01_naive": (3.0, 2.0),
    "k03_wg_64x64_k16": (100.0, 140.0),
    "k04_wg_64x64_k32": (150.0, 175.0),
    "k05_wg_64x64_k64": (120.0, 210.0),
    "k06_pc_64x128": (90.0, 105.0),
    "k07_pc_64x128_single": (60.0, 84.0),
}
RESULTS = []
for _size, _i in ((4096, 0), (8192, 1)):
    for _k, _f in FIGS.items():
        RESULTS.append(result(_k, _size, _f[_i], _f[_i] / FIGS["cublas"][_i]))
    RESULTS.append(result("k30_x", _size, status="kernel k30_x needs sm_90 | newer"))

BENCH = {
    "tool": "tilekit bench", "version": "0.1.0",
    "device": {"name": "Fake GPU", "sm": 90, "sm_count": 132, "clock_mhz": 1980, "l2_bytes": 52428800},
    "peak_tflops": 1070.5, "l2_flush": True, "results": RESULTS,
}

# The shape of src/lab/lab_info.c's output: device block, registry, then the
# resource table (rows with figures, or a message instead of figures).
INFO_TEXT = """device 0: Fake GPU, sm_90, 132 SMs
  clocks: max SM 1980 MHz, memory 2619 MHz x 5120-bit bus (3352 GB/s theoretical)

kernel               min_sm     BMxBN  description
cublas                    0         -  cuBLAS GemmEx, 1 2 3 4 5 6 7
k01_naive                80     16x16  one thread per element

kernel                regs  local_B static_smem  dyn_smem  threads  blocks/SM occupancy
cublas               library (resources chosen by the library)
k01_naive               38        0           0         0      256          8      100%
k03_wg_64x64_k16        96        0           0      5120      128          9       56%
k04_wg_64x64_k32        96        0           0     10240      128          7       44%
k05_wg_64x64_k64        96       16           0     18432      128          4       25%
k06_pc_64x128          128        0        1024     30720      384          1       19%
k07_pc_64x128_single   128        0           0     15360      384          1       19%
k30_x                needs sm_90
k99_broken           cudaErrorInvalidDeviceFunction: invalid device function here now
"""


def run_in_tmp(bench=BENCH, readme=README, extra=(), info=None, info_name="info.txt", docs=None, more=()):
    """Writes the files, runs main(); returns (status, README text, stderr, docs text, stdout).
    `more`: further bench files, given after the first."""
    with tempfile.TemporaryDirectory() as d:
        bjs = []
        for i, b in enumerate((bench,) + tuple(more)):
            bjs.append(os.path.join(d, "bench%s.json" % ("" if i == 0 else str(i + 1))))
            with open(bjs[-1], "w") as f:
                f.write(b if isinstance(b, str) else json.dumps(b))
        rd = os.path.join(d, "README.md")
        with open(rd, "w") as f:
            f.write(readme)
        args = bjs + ["--readme", rd] + list(extra)
        if info is not None:
            ip = os.path.join(d, info_name)
            with open(ip, "w") as f:
                f.write(info)
            args += ["--info", ip]
        dp = os.path.join(d, "seeds.md")
        if docs is not None:
            with open(dp, "w") as f:
                f.write(docs)
            args += ["--docs", dp]
        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            st = rt.main(args)
        with open(rd) as f:
            text = f.read()
        docs_text = None
        if docs is not None:
            with open(dp) as f:
                docs_text = f.read()
        return st, text, err.getvalue(), docs_text, out.getvalue()


def section(text, begin=rt.BEGIN, end=rt.END):
    return text[text.index(begin) + len(begin):text.index(end)]


def table_rows(sec):
    return [l for l in sec.splitlines() if l.startswith("| ")]


def row_of(rows, kernel):
    found = [r for r in rows if r.startswith("| `%s` |" % kernel)]
    assert len(found) == 1, (kernel, rows)
    return found[0]


def test_readme_one_row_per_kernel_both_sizes():
    st, text, err, _, _ = run_in_tmp(extra=["--command", "build/tilekit bench --kernel all --shapes X"])
    assert st == 0, err
    sec = section(text)
    assert "not yet measured" not in sec
    rows = table_rows(sec)
    assert rows[0] == ("| kernel | TFLOP/s 4096³ | x cuBLAS 4096³ | TFLOP/s 8192³ | x cuBLAS 8192³ |"), rows[0]
    assert len(rows) == 1 + len(FIGS) + 1, rows          # header + kernels + k30_x; no per-size duplicates
    assert row_of(rows, "cublas") == "| `cublas` | 600.0 | 1.000 | 700.0 | 1.000 |"
    assert row_of(rows, "k01_naive") == "| `k01_naive` | 3.0 | 0.005 | 2.0 | 0.003 |"
    assert row_of(rows, "k04_wg_64x64_k32") == \
        '| `k04_wg_64x64_k32` | 150.0 | 0.250 | 175.0 | 0.250 |'
    assert row_of(rows, "k30_x") == "| `k30_x` | n/a | - | n/a | - |"
    assert "Not measured (n/a): `k30_x` at 4096³: kernel k30_x needs sm_90 / newer; `k30_x` at 8192³:" in sec
    assert "Fake GPU (sm_90, 132 SMs, max SM clock 1980 MHz, peak 1070.5 TFLOP/s" in sec
    assert "`build/tilekit bench --kernel all --shapes X`" in sec
    assert "Every result: `row NN fp32`" in sec
    assert "L2 flushed" in sec


def test_readme_info_columns():
    st, text, err, _, _ = run_in_tmp(info=INFO_TEXT)
    assert st == 0, err
    sec = section(text)
    rows = table_rows(sec)
    assert rows[0].endswith("| regs | shared mem (B/block) | occupancy |"), rows[0]
    assert row_of(rows, "k01_naive").endswith("| 38 | 0 | 100% |")
    assert row_of(rows, "k06_pc_64x128").endswith("| 128 | 31744 | 19% |")   # static + dynamic
    assert row_of(rows, "cublas").endswith("| - | - | - |")                    # a library call
    assert row_of(rows, "k30_x").endswith("| - | - | - |")                     # "needs sm_90"
    assert "Register spills (local memory per thread, `tilekit info`): `k05_wg_64x64_k64` 16 B." in sec


def test_info_text_json_csv_agree():
    want = {"regs": 38, "local_bytes": 0, "static_smem": 0, "dyn_smem": 0, "threads": 256, "blocks_per_sm": 8,
            "occupancy": 100}
    with tempfile.TemporaryDirectory() as d:
        for name, body in (("info.txt", INFO_TEXT),
                           ("info.json", json.dumps([dict(want, kernel="k01_naive", occupancy=1.0)])),
                           ("info.csv", "kernel,regs,local_bytes,static_smem,dyn_smem,threads,blocks_per_sm,"
                                        "occupancy\nk01_naive,38,0,0,0,256,8,100%\n")):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                f.write(body)
            got = rt.load_info(p)
            assert got["k01_naive"] == want, (name, got["k01_naive"])
            assert "cublas" not in got and "k30_x" not in got and "k99_broken" not in got, (name, got)
    # every figures row of the text (message rows give nothing)
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "info.txt")
        with open(p, "w") as f:
            f.write(INFO_TEXT)
        got = rt.load_info(p)
    assert sorted(got) == sorted(k for k in FIGS if k != "cublas"), sorted(got)
    assert got["k03_wg_64x64_k16"]["occupancy"] == 56 and got["k06_pc_64x128"]["static_smem"] == 1024


def test_docs_run_table():
    st, text, err, docs, out = run_in_tmp(docs=DOCS, info=INFO_TEXT)
    assert st == 0, err
    assert docs.startswith("# seeds\n\n" + rt.DOCS_BEGIN + "\n")
    assert "\nprose between\n" in docs and docs.endswith(rt.CMP_END + "\n\nthe end\n")
    sec = section(docs, rt.DOCS_BEGIN, rt.DOCS_END)
    rows = table_rows(sec)
    assert rows[0] == ("| kernel | seed step | TFLOP/s 4096³ | x cuBLAS 4096³ | TFLOP/s 8192³ | x cuBLAS 8192³ "
                       "| vs previous row 4096³ | vs previous row 8192³ | regs | occupancy |"), rows[0]
    # only the seeds' kernels, in story order
    assert [r.split(" | ")[0] for r in rows[1:]] == ["| `k03_wg_64x64_k16`", "| `k04_wg_64x64_k32`",
                                                      "| `k05_wg_64x64_k64`", "| `k06_pc_64x128`",
                                                      "| `k07_pc_64x128_single`"], rows
    assert rows[1].endswith("| 100.0 | 0.167 | 140.0 | 0.200 | - | - | 96 | 56% |"), rows[1]
    assert rows[2].endswith("| 150.0 | 0.250 | 175.0 | 0.250 | +50.0% vs k03 | +25.0% vs k03 | 96 | 44% |"), rows[2]
    assert rows[3].endswith("| 120.0 | 0.200 | 210.0 | 0.300 | -20.0% vs k04 | +20.0% vs k04 | 96 | 25% |"), rows[3]
    assert "cuBLAS in the same run: 600.0 TFLOP/s at 4096³, 700.0 TFLOP/s at 8192³." in sec
    assert "Fake GPU" in sec
    # the README was written too, with the same figures
    assert "| 150.0 | 0.250 | 175.0 | 0.250 |" in section(text)


def test_docs_comparisons():
    st, _, err, docs, out = run_in_tmp(docs=DOCS)
    assert st == 0, err
    sec = section(docs, rt.CMP_BEGIN, rt.CMP_END)
    rows = table_rows(sec)
    assert rows[0] == "| comparison | kernels | measured change 8192³ | at 4096³ |", rows[0]
    assert "| K-step 32 instead of 16 | `k04_wg_64x64_k32` vs `k03_wg_64x64_k16` | +25.0% | +50.0% |" in rows
    assert "| K-step 64 instead of 16 | `k05_wg_64x64_k64` vs `k03_wg_64x64_k16` | +50.0% | +20.0% |" in rows
    single = [r for r in rows if "`k07_pc_64x128_single` vs `k06_pc_64x128`" in r]
    assert len(single) == 1 and single[0].endswith("| -20.0% | -33.3% |"), single
    wave = [r for r in rows if "`k06_pc_64x128` vs `k05_wg_64x64_k64`" in r]
    assert len(wave) == 1 and wave[0].endswith("| -50.0% | -25.0% |"), wave
    # kernels absent from the run are named, not silently dropped
    assert "| k13 vs k12 | not in this run | not in this run |" in sec
    assert len(rows) == 1 + len(rt.COMPARISONS)
    # printed on stdout as well
    assert "| K-step 32 instead of 16 |" in out


def test_only_sections_change_and_idempotent():
    st, text, _, docs, _ = run_in_tmp(docs=DOCS)
    assert st == 0
    assert text.startswith("# project\n\nintro text\n\n" + rt.BEGIN + "\n")
    assert text.endswith(rt.END + "\n\nafter the table\n")
    st2, text2, _, docs2, _ = run_in_tmp(readme=text, docs=docs)
    assert st2 == 0 and text2 == text and docs2 == docs


def test_stdout_and_no_readme():
    st, text, _, docs, out = run_in_tmp(docs=DOCS, extra=["--stdout"])
    assert st == 0 and text == README and docs == DOCS
    assert rt.BEGIN in out and rt.DOCS_BEGIN in out and rt.CMP_BEGIN in out
    st, text, _, docs, _ = run_in_tmp(docs=DOCS, extra=["--no-readme"])
    assert st == 0 and text == README and "not yet measured" not in docs


def test_reconstructed_command_and_date():
    bench = dict(BENCH, l2_flush=False)
    st, text, _, _, _ = run_in_tmp(bench=bench, extra=["--date", "2026-01-02"])
    assert st == 0
    sec = section(text)
    assert ("`build/tilekit bench --kernel cublas,k01_naive,k03_wg_64x64_k16,k04_wg_64x64_k32,k05_wg_64x64_k64,"
            "k06_pc_64x128,k07_pc_64x128_single,k30_x --shapes 4096x4096x4096,8192x8192x8192 --layout row "
            "--op-a n --op-b n --out fp32 --hot --json bench.json`") in sec, sec
    assert "2026-01-02" in sec and "hot (--hot)" in sec


def test_second_file_fills_refused_cells():
    """The seeds' N x K kernels refuse op_b n in the main run; a second run
    with op_b t measures them, and only the cells the first left empty are
    taken from it."""
    main = json.loads(json.dumps(BENCH))
    refusal = "not supported: B must be stored N x K (op_b t)"
    main["results"] += [result("k08_4w_128x128_abt", s, status=refusal) for s in (4096, 8192)]
    nt = json.loads(json.dumps(BENCH))
    nt["results"] = []
    for size, cub, k08, k07 in ((4096, 500.0, 125.0, 999.0), (8192, 800.0, 168.0, 999.0)):
        for kernel, tf in (("cublas", cub), ("k07_pc_64x128_single", k07), ("k08_4w_128x128_abt", k08)):
            r = result(kernel, size, tf, tf / cub)
            r["op_b"] = "t"
            nt["results"].append(r)
    st, text, err, docs, out = run_in_tmp(bench=main, more=(nt,), docs=DOCS,
                                          extra=["--command", "bench NN", "--command", "bench NT"])
    assert st == 0, err
    sec = section(text)
    assert "with `bench NN`." in sec and "with `bench NT`." in sec, sec
    rows = table_rows(sec)
    assert rows[0].startswith("| kernel | layout ops C | TFLOP/s 4096³ |"), rows[0]
    # the first file wins where it measured (cuBLAS and k07 stay NN) ...
    assert row_of(rows, "cublas") == "| `cublas` | row NN fp32 | 600.0 | 1.000 | 700.0 | 1.000 |"
    assert row_of(rows, "k07_pc_64x128_single").endswith("| row NN fp32 | 60.0 | 0.100 | 84.0 | 0.120 |")
    # ... the second fills what it refused, with its own cuBLAS ratio
    assert row_of(rows, "k08_4w_128x128_abt") == \
        "| `k08_4w_128x128_abt` | row NT fp32 | 125.0 | 0.250 | 168.0 | 0.210 |"
    assert "k08_4w_128x128_abt` at" not in sec          # measured after all: not in the n/a note
    assert "Column `layout ops C`" in sec and "Every result:" not in sec
    assert sec.count("Measured on Fake GPU") == 2            # one line per file
    drows = table_rows(section(docs, rt.DOCS_BEGIN, rt.DOCS_END))
    assert row_of(drows, "k08_4w_128x128_abt").endswith(
        "| +108.3% vs k07 (row NT fp32 vs row NN fp32) | +100.0% vs k07 (row NT fp32 vs row NN fp32) |"), drows
    dsec = section(docs, rt.DOCS_BEGIN, rt.DOCS_END)
    assert ("cuBLAS in the same run: 600.0 TFLOP/s at 4096³ (row NN fp32), 500.0 TFLOP/s at 4096³ (row NT fp32), "
            "700.0 TFLOP/s at 8192³ (row NN fp32), 800.0 TFLOP/s at 8192³ (row NT fp32).") in dsec, dsec


def test_bad_inputs():
    st, _, err, _, _ = run_in_tmp(readme="# no markers here\n")
    assert st == 1 and "bench:begin" in err
    st, text, err, _, _ = run_in_tmp(bench="{not json")
    assert st == 1 and "bench.json" in err and "not yet measured" in text
    st, _, err, _, _ = run_in_tmp(bench={"tool": "something else"})
    assert st == 1 and "tilekit bench" in err
    broken = json.loads(json.dumps(BENCH))
    del broken["results"][0]["m"]
    st, _, err, _, _ = run_in_tmp(bench=broken)
    assert st == 1 and "results[0]" in err and "'m'" in err
    st, _, err, _, _ = run_in_tmp(info="nothing useful\n")
    assert st == 1 and "info" in err
    st, _, err, _, _ = run_in_tmp(info="kernel,regs\nk01,lots\n", info_name="info.csv")
    assert st == 1 and "info.csv" in err
    # docs without markers: nothing is written, the README included
    st, text, err, docs, _ = run_in_tmp(docs="# no markers\n")
    assert st == 1 and "seeds:begin" in err and text == README and docs == "# no markers\n"


def test_seed_mapping_matches_registry_and_docs():
    with open(os.path.join(ROOT, "src", "kernels", "table.def")) as f:
        names = re.findall(r"^TK_CONFIG\((\w+),", f.read(), re.M)
    numbers = [n.split("_")[0] for n in names]
    for number, _ in rt.SEEDS:
        assert number in numbers, number
    for n in names:   # the seeds' run is k02..k13; cublas, k01 and k20 on are tilekit's own
        num = n.split("_")[0]
        if re.match(r"^k\d\d$", num) and 2 <= int(num[1:]) <= 13:
            assert rt.seed_of(n) != "-", n
        else:
            assert rt.seed_of(n) == "-", n
    for _, number, base in rt.COMPARISONS:
        assert number in numbers and base in numbers, (number, base)
    # the design table of docs/seeds.md names the same seed step per kernel
    with open(os.path.join(ROOT, "docs", "seeds.md")) as f:
        docs = f.read()
    design = {}
    for line in docs.splitlines():
        m = re.match(r"^\| `(k\d\d_\w+)` \| ([^|]+) \|", line)
        if m and m.group(1) in names:
            design.setdefault(m.group(1), m.group(2).strip())
    assert sorted(design) == sorted(n for n in names if rt.seed_of(n) != "-"), sorted(design)
    for n, step in design.items():
        assert step == rt.seed_of(n), (n, step, rt.seed_of(n))


def test_real_files_have_markers():
    for path, pairs in (("README.md", ((rt.BEGIN, rt.END),)),
                        (os.path.join("docs", "seeds.md"), ((rt.DOCS_BEGIN, rt.DOCS_END), (rt.CMP_BEGIN, rt.CMP_END)))):
        with open(os.path.join(ROOT, path)) as f:
            text = f.read()
        for b, e in pairs:
            assert text.count(b) == 1 and text.count(e) == 1 and text.index(b) < text.index(e), (path, b)
