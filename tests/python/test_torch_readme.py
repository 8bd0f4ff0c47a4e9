"""bench/torch_readme.py on small made-up torch_bench.py grouped and bmm
files (figures that never leave the temporary directory): the table's
numbers, the timing line with and without gpu_hold_cycles, the README
section between its markers, the refusals."""
import contextlib
import importlib.util
import io
import json
import os
import shlex
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("torch_readme", os.path.join(ROOT, "bench", "torch_readme.py"))
tr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tr)

README = """# project

<!-- suite:begin -->
suite table
<!-- suite:end -->

<!-- moe:begin -->
moe table
<!-- moe:end -->

<!-- torch-grouped:begin -->
old torch table
<!-- torch-grouped:end -->

after
"""


def line(label, form, ratio, call, failed=False):
    ok = ratio is not None
    return {"label": label, "form": form, "torch": {"call": call, "status": "ok", "ms_median": ratio if ok else None},
            "tilekit": {"status": "failed" if failed else "ok", "ms_median": 1.0 if ok else None},
            "ratio_torch": ratio, "failed": failed, "note": "MISMATCH" if failed else ""}


def doc(what, results, **extra):
    d = {"tool": "torch_bench.py " + what, "device": "Fake GPU", "torch": "2.9.0", "tilekit": "0.1.0",
         "backend": "extension", "seed": 1, "samples": 10, "warmup": 2, "l2_flush_bytes": 256 << 20,
         "tolerance": 0.01, "skipped": [], "results": results, "summary": None}
    d.update(extra)
    return d


# grouped: rows 2.0 and 0.5 (geomean 1, min 0.5, one below 0.9); k 0.8 and a failed line (not measured);
# all: (2 * 0.5 * 0.8)^(1/3) = 0.928 over 3 of 4. bmm: 1.0 and 0.85 (geomean 0.922, min 0.85, one below).
GROUPED = doc("grouped", [line("moe:1 rows 8:16:balanced 64 32 n t", "rows", 2.0, "torch._grouped_mm"),
                          line("moe:2 rows 8:16:skewed 64 32 n t", "rows", 0.5, "torch._grouped_mm"),
                          line("moe:3 k 64 32 8:16:balanced t n", "k", 0.8, "torch._grouped_mm"),
                          line("moe:4 k 64 32 8:16:skewed t n", "k", None, "torch._grouped_mm", failed=True)],
              gpu_hold_cycles=200000)
BMM = doc("bmm", [line("Q K^T 8 x 64x64x16 n t", "batch", 1.0, "torch.bmm"),
                  line("P V 8 x 64x16x64 n n", "batch", 0.85, "torch.bmm")])      # no gpu_hold_cycles: an old file


def run_in_tmp(args, readme=README, files=None):
    """Writes grouped.json and bmm.json (or `files`) and README.md in a
    temporary folder, runs main() with DIR replaced by it; returns (status,
    README text, stdout, stderr)."""
    with tempfile.TemporaryDirectory() as d:
        files = files if files is not None else {"grouped.json": GROUPED, "bmm.json": BMM}
        for name, body in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(body if isinstance(body, str) else json.dumps(body))
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write(readme)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            st = tr.main([a.replace("DIR", d) for a in args])
        with open(os.path.join(d, "README.md")) as f:
            text = f.read().replace(d, "DIR")
        return st, text, out.getvalue().replace(d, "DIR"), err.getvalue()


def test_table_numbers():
    st, _, out, err = run_in_tmp(["DIR/grouped.json", "DIR/bmm.json", "--table"])
    assert st == 0, err
    rows = [l for l in out.splitlines() if l.startswith("| ")]
    assert rows == [
        "| yardstick | form | lines | geomean x torch | min x torch (line) | below 0.9x |",
        "| `torch._grouped_mm` | grouped, rows split (MoE forward) | 2 | 1.000 | 0.500 "
        "(`moe:2 rows 8:16:skewed 64 32 n t`) | 1 |",
        "| `torch._grouped_mm` | grouped, K split (weight gradients) | 1 of 2 (1 failed) | 0.800 | 0.800 "
        "(`moe:3 k 64 32 8:16:balanced t n`) | 1 |",
        "| `torch._grouped_mm` | grouped, all lines | 3 of 4 (1 failed) | 0.928 | 0.500 "
        "(`moe:2 rows 8:16:skewed 64 32 n t`) | 2 |",
        "| `torch.bmm` | bmm (attention-like Q K^T and P V) | 2 | 0.922 | 0.850 (`P V 8 x 64x16x64 n n`) | 1 |",
    ], rows
    # 0.9 itself is not below; a file with one form has no "all lines" row
    one = doc("grouped", [line("a", "rows", 0.9, "torch._grouped_mm"), line("b", "rows", 1.6, "torch._grouped_mm")])
    st, _, out, err = run_in_tmp(["DIR/one.json", "--table"], files={"one.json": one})
    assert st == 0, err
    rows = [l for l in out.splitlines() if l.startswith("| `")]
    assert rows == ["| `torch._grouped_mm` | grouped, rows split (MoE forward) | 2 | 1.200 | 0.900 (`a`) | 0 |"], rows


def test_gpu_hold():
    assert tr.hold_cycles(GROUPED) == 200000
    assert tr.hold_cycles(BMM) == 0 and "gpu_hold_cycles" not in BMM     # missing: 0
    assert tr.hold_cycles(dict(BMM, gpu_hold_cycles=None)) == 0
    assert tr.timing(GROUPED).endswith(
        "then the GPU held 200000 cycles after the L2 flush so the events time the GPU's work"), tr.timing(GROUPED)
    assert "no GPU hold after the flush" in tr.timing(BMM) and "held" not in tr.timing(BMM)
    assert "L2 flushed before every call by a 256 MiB read" in tr.timing(BMM)
    # the two files timed differently: a line each; the same way: one line for both
    st, _, out, err = run_in_tmp(["DIR/grouped.json", "DIR/bmm.json"])
    assert st == 0, err
    assert "grouped: each line the median of 10 samples" in out and "bmm: each line the median" in out, out
    same = dict(BMM, gpu_hold_cycles=200000)
    st, _, out, err = run_in_tmp(["DIR/grouped.json", "DIR/bmm.json"], files={"grouped.json": GROUPED,
                                                                              "bmm.json": same})
    assert st == 0, err
    assert out.count("held 200000 cycles") == 1 and "Each line: the median of 10 samples" in out, out
    # the reconstructed command: --host-timed only where the file says the hold was off
    assert tr.reconstructed_command(dict(BMM, _path="b.json")) == "python3 bench/torch_bench.py bmm --json b.json"
    assert tr.reconstructed_command(dict(GROUPED, gpu_hold_cycles=0, _path="g.json")) == \
        "python3 bench/torch_bench.py grouped --host-timed --json g.json"


def test_readme_section():
    args = ["DIR/grouped.json", "DIR/bmm.json", "--readme", "DIR/README.md", "--date", "2026-11-27",
            "--command", "python3 bench/torch_bench.py grouped --json out/torch_grouped.json",
            "--command", "python3 bench/torch_bench.py bmm --json out/torch_bmm.json"]
    st, text, out, err = run_in_tmp(args)
    assert st == 0 and "wrote the torch-grouped section" in out, err
    # the other sections as they were
    head = README[:README.index("<!-- torch-grouped:begin -->")]
    assert text.startswith(head) and text.endswith("<!-- torch-grouped:end -->\n\nafter\n"), text
    sec = text[text.index("<!-- torch-grouped:begin -->"):text.index("<!-- torch-grouped:end -->")]
    assert "old torch table" not in sec and "| `torch.bmm` | bmm (attention-like Q K^T and P V) | 2 | 0.922 |" in sec, sec
    assert ("grouped: measured on Fake GPU, torch 2.9.0, tilekit 0.1.0 (extension backend), 2026-11-27, with "
            "`python3 bench/torch_bench.py grouped --json out/torch_grouped.json`.") in sec, sec
    gen = [l for l in sec.splitlines() if l.startswith("Generated by `")]
    assert len(gen) == 1 and gen[0].endswith("`; do not edit by hand."), gen
    # the generated-by command, pasted into a shell, is the same call
    cmd = shlex.split(gen[0][len("Generated by `"):-len("`; do not edit by hand.")])
    assert cmd[:2] == ["python3", "bench/torch_readme.py"] and cmd[2:] == args, cmd
    # run again on its own output: the same text
    st2, text2, _, _ = run_in_tmp(args, readme=text)
    assert st2 == 0 and text2 == text


def test_refusals():
    st, text, _, err = run_in_tmp(["DIR/grouped.json", "--readme", "DIR/README.md"], readme="# no markers\n")
    assert st == 1 and "torch-grouped:begin" in err and text == "# no markers\n", err
    st, _, _, err = run_in_tmp(["DIR/x.json"], files={"x.json": "{broken"})
    assert st == 1 and "x.json" in err, err
    st, _, _, err = run_in_tmp(["DIR/x.json"], files={"x.json": {"tool": "tilekit bench", "results": []}})
    assert st == 1 and "torch_bench.py grouped|bmm" in err, err
    st, _, _, err = run_in_tmp(["DIR/x.json"], files={"x.json": doc("grouped", [{"label": "a"}])})
    assert st == 1 and "ratio_torch" in err, err


def test_real_readme_has_markers():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    for name in ("moe", "torch-grouped"):
        b, e = "<!-- %s:begin -->" % name, "<!-- %s:end -->" % name
        assert text.count(b) == 1 and text.count(e) == 1 and text.index(b) < text.index(e), name
