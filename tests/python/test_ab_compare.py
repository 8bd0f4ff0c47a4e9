"""bench/ab_compare.py on fake bench files (made-up figures in a temporary
directory): medians over rounds, x cuBLAS per build, B / A, the geometric
mean over shapes every build measured, and the refusals (no files, a file
that is not bench JSON)."""
import contextlib
import importlib.util
import io
import json
import os
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("ab_compare", os.path.join(ROOT, "bench", "ab_compare.py"))
ab = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ab)


def bench_file(path, rows):
    """rows: (kernel, m, n, k, ms_median, chosen)."""
    results = [{"kernel": k, "m": m, "n": n, "k": kk, "layout": "row", "op_a": "n", "op_b": "t", "out": "fp32",
                "status": "ok", "ms_median": ms, "chosen": ch} for k, m, n, kk, ms, ch in rows]
    with open(path, "w") as f:
        json.dump({"tool": "tilekit bench", "device": {"name": "fake", "sm": 90, "sm_count": 132,
                                                        "clock_mhz": 1980}, "results": results}, f)


def run(argv):
    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        rc = ab.main(argv)
    return rc, buf.getvalue(), err.getvalue()


def test_table():
    with tempfile.TemporaryDirectory() as d:
        # A: auto 0.020 and 0.022 ms (median 21 us), cuBLAS 0.010 -> 0.476x
        # B: auto 0.010 both rounds, cuBLAS 0.010 -> 1.0x; B / A = 10 / 21
        bench_file(os.path.join(d, "ab_A_1.json"), [("cublas", 64, 768, 3072, 0.010, None),
                                                    ("auto", 64, 768, 3072, 0.020, "k34_wgmma_128x64"),
                                                    ("cublas", 1, 8, 8, 0.004, None),
                                                    ("auto", 1, 8, 8, 0.004, "k40_skinny")])
        bench_file(os.path.join(d, "ab_A_2.json"), [("cublas", 64, 768, 3072, 0.010, None),
                                                    ("auto", 64, 768, 3072, 0.022, "k34_wgmma_128x64")])
        bench_file(os.path.join(d, "ab_B_1.json"), [("cublas", 64, 768, 3072, 0.010, None),
                                                    ("auto", 64, 768, 3072, 0.010, "k36_wgmma_128x64_kx")])
        bench_file(os.path.join(d, "ab_B_2.json"), [("cublas", 64, 768, 3072, 0.010, None),
                                                    ("auto", 64, 768, 3072, 0.010, "k36_wgmma_128x64_kx")])
        rc, out, _ = run(["ab_compare.py", d])
        assert rc == 0, out
        lines = out.strip().splitlines()
        row = [l for l in lines if l.startswith("64x768x3072 nt fp32")]
        assert len(row) == 1, out
        assert "21.0 (0.476) k34_wgmma_" in row[0] and "10.0 (1.000) k36_wgmma_" in row[0], row[0]
        assert row[0].endswith("%.3f" % (10 / 21)), row[0]
        # 1x8x8 was measured by A only: not in the table, not in the means
        assert not any(l.startswith("1x8x8") for l in lines), out
        assert lines[-1] == "geomean x cuBLAS: A %.4f  B 1.0000" % (10 / 21), lines[-1]


def test_refusals():
    with tempfile.TemporaryDirectory() as d:
        rc, _, err = run(["ab_compare.py", d])
        assert rc == 1 and "no ab_<build>_<round>.json" in err, err
        with open(os.path.join(d, "ab_A_1.json"), "w") as f:
            f.write('{"tool": "tilekit verify"}')
        rc, _, err = run(["ab_compare.py", d])
        assert rc == 1 and "ab_A_1.json" in err and "tilekit bench" in err, err
        rc, _, err = run(["ab_compare.py"])
        assert rc == 2 and "ab_compare.py DIR" in err, err
