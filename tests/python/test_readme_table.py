"""bench/readme_table.py on small fake bench files (made-up figures that
never leave the temporary directory): the table, the device line, the
resource columns, and that only the marked section of the README changes."""
import contextlib
import importlib.util
import io
import json
import os
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

BENCH = {
    "tool": "tilekit bench", "version": "0.1.0",
    "device": {"name": "Fake GPU", "sm": 90, "sm_count": 132, "clock_mhz": 1980, "l2_bytes": 52428800},
    "peak_tflops": 1070.5, "l2_flush": True,
    "results": [
        {"kernel": "cublas", "m": 512, "n": 256, "k": 128, "layout": "row", "op_a": "n", "op_b": "t",
         "out": "fp32", "alpha": 1, "beta": 0, "samples": 10, "ms_min": 0.01, "ms_median": 0.0125,
         "ms_p20": 0.012, "ms_p80": 0.013, "tflops": 2.68435, "pct_peak": 0.25, "ratio_cublas": 1.0,
         "status": "ok"},
        {"kernel": "k01_naive", "m": 512, "n": 256, "k": 128, "layout": "row", "op_a": "n", "op_b": "t",
         "out": "fp32", "alpha": 1, "beta": 0, "samples": 10, "ms_min": 0.5, "ms_median": 0.55,
         "ms_p20": 0.54, "ms_p80": 0.56, "tflops": 0.061, "pct_peak": 0.0057, "ratio_cublas": 0.0227,
         "status": "ok"},
        {"kernel": "k30_x", "m": 512, "n": 256, "k": 128, "layout": "row", "op_a": "n", "op_b": "t",
         "out": "fp32", "alpha": 1, "beta": 0, "samples": 0, "ms_min": None, "ms_median": None,
         "ms_p20": None, "ms_p80": None, "tflops": None, "pct_peak": None, "ratio_cublas": None,
         "status": "kernel k30_x needs sm_90 | newer"},
    ],
}

INFO_TEXT = """device: Fake GPU
kernel                regs  local_B static_smem  dyn_smem  threads  blocks/SM occupancy
cublas               library (resources chosen by the library)
k01_naive               38        0           0         0      256          8      100%
k30_x                needs sm_90
"""


def run_in_tmp(bench=BENCH, readme=README, extra=(), info=None, info_name="info.txt"):
    """Writes the files, runs main(); returns (status, README text, stderr)."""
    with tempfile.TemporaryDirectory() as d:
        bj = os.path.join(d, "bench.json")
        with open(bj, "w") as f:
            f.write(bench if isinstance(bench, str) else json.dumps(bench))
        rd = os.path.join(d, "README.md")
        with open(rd, "w") as f:
            f.write(readme)
        args = [bj, "--readme", rd] + list(extra)
        if info is not None:
            ip = os.path.join(d, info_name)
            with open(ip, "w") as f:
                f.write(info)
            args += ["--info", ip]
        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            st = rt.main(args)
        with open(rd) as f:
            return st, f.read(), err.getvalue()


def section(text):
    return text[text.index(rt.BEGIN) + len(rt.BEGIN):text.index(rt.END)]


def test_table_and_device_line():
    st, text, err = run_in_tmp(extra=["--command", "build/tilekit bench --kernel all --m 512 --n 256 --k 128"])
    assert st == 0, err
    sec = section(text)
    assert "not yet measured" not in sec
    rows = [l for l in sec.splitlines() if l.startswith("| ")]
    assert rows[0].startswith("| kernel | shape (MxNxK) | layout ops out | TFLOP/s (median) | % of peak | x cuBLAS")
    assert rows[1] == "| cublas | 512x256x128 | row NT fp32 | 2.7 | 0.2 | 1.000 | 0.0120-0.0130 |", rows[1]
    assert rows[2] == "| k01_naive | 512x256x128 | row NT fp32 | 0.1 | 0.0 | 0.023 | 0.5400-0.5600 |", rows[2]
    assert "not run: kernel k30_x needs sm_90 / newer" in rows[3], rows[3]
    assert "Fake GPU (sm_90, 132 SMs, max SM clock 1980 MHz, peak 1070.5 TFLOP/s" in sec
    assert "`build/tilekit bench --kernel all --m 512 --n 256 --k 128`" in sec
    assert "L2 flushed" in sec


def test_only_section_changes():
    st, text, _ = run_in_tmp()
    assert st == 0
    assert text.startswith("# project\n\nintro text\n\n" + rt.BEGIN + "\n")
    assert text.endswith(rt.END + "\n\nafter the table\n")
    # idempotent: a second run over its own output gives the same file
    st2, text2, _ = run_in_tmp(readme=text)
    assert st2 == 0 and section(text2) == section(text)


def test_reconstructed_command_and_date():
    bench = dict(BENCH, l2_flush=False, date="2026-01-02")
    st, text, _ = run_in_tmp(bench=bench)
    assert st == 0
    sec = section(text)
    assert ("`build/tilekit bench --kernel cublas,k01_naive,k30_x --m 512 --n 256 --k 128 --layout row --op-a n "
            "--op-b t --out fp32 --hot --json bench.json`") in sec, sec
    assert "2026-01-02" in sec and "hot (--hot)" in sec


def test_info_columns_from_text_json_csv():
    for name, info in (("info.txt", INFO_TEXT),
                       ("info.json", json.dumps([{"kernel": "k01_naive", "regs": 38, "local_bytes": 0,
                                                  "static_smem": 0, "dyn_smem": 0, "threads": 256,
                                                  "blocks_per_sm": 8, "occupancy": 1.0}])),
                       ("info.csv", "kernel,regs,local_bytes,static_smem,dyn_smem,threads,blocks_per_sm,occupancy\n"
                                    "k01_naive,38,0,0,0,256,8,100\n")):
        st, text, err = run_in_tmp(info=info, info_name=name)
        assert st == 0, (name, err)
        rows = [l for l in section(text).splitlines() if l.startswith("| ")]
        assert rows[0].endswith("| regs | spill B | smem B (static+dyn) | threads | blocks/SM | occupancy |"), name
        assert rows[2].endswith("| 38 | 0 | 0+0 | 256 | 8 | 100% |"), (name, rows[2])
        assert rows[1].endswith("| - | - | - | - | - | - |"), (name, rows[1])   # cublas: a library call


def test_bad_inputs():
    st, _, err = run_in_tmp(readme="# no markers here\n")
    assert st == 1 and "bench:begin" in err
    st, text, err = run_in_tmp(bench="{not json")
    assert st == 1 and "bench.json" in err and "not yet measured" in text
    st, _, err = run_in_tmp(bench={"tool": "something else"})
    assert st == 1 and "tilekit bench" in err
    broken = json.loads(json.dumps(BENCH))
    del broken["results"][0]["m"]
    st, _, err = run_in_tmp(bench=broken)
    assert st == 1 and "results[0]" in err and "'m'" in err
    st, _, err = run_in_tmp(info="nothing useful\n")
    assert st == 1 and "info" in err


def test_real_readme_has_markers():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    assert text.count(rt.BEGIN) == 1 and text.count(rt.END) == 1 and text.index(rt.BEGIN) < text.index(rt.END)
