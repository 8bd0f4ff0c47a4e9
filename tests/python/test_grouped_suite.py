"""bench/grouped_suite.py, the part of torch_bench.py's grouped and bmm modes
that needs no torch: the group sizes against the lab's own C (src/lab/
lab_group.c and lab_num.c built with lab_group_sizes.c here, $CC or cc) for
every SPEC of bench/shapes/moe.txt and the edge cases of
tests/host/test_lab_group.c at several seeds, and the specs both refuse,
with the lab's words; the suite reader on moe.txt and on made-up suites;
the summary math and the table rows."""
import importlib.util
import math
import os
import subprocess
import tempfile

import fakes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("grouped_suite", os.path.join(ROOT, "bench", "grouped_suite.py"))
gs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gs)
MOE = os.path.join(ROOT, "bench", "shapes", "moe.txt")

EDGES = ["1:1:balanced", "7:100:balanced", "1024:16:balanced", "8:16:skewed", "2:5:skewed", "3:2:skewed",
         "1024:16777216:skewed", "1024:1:skewed", "128:128:skewed", "4:1:empty", "10:999:empty",
         "1024:100000:empty", "0,7,128,1,300", "9"]
BAD = ["", "0,,7", "3,", ",3", "3,x", "3,-1", "3, 4", "16777217", "99999999999999999999999", "16777216,1",
       "0,0,0", "8:4096", "8:4096:skewed:1", "x:4096:balanced", "0:4096:balanced", "1025:4096:balanced",
       ":4096:balanced", "8:0:balanced", "8:16777217:balanced", "8:4096:zipf", "8:4096:", "1:100:skewed",
       "3:100:empty", ",".join(["1"] * 1025), ",".join(["1"] * 1024 + ["x"])]


def lab_sizes(seed, specs):
    """The lab's answer per spec: a list of sizes, or 'error ' and its message."""
    exe = fakes.build_c("lab_group_sizes", ["-D_GNU_SOURCE", "-O1", os.path.join(fakes.HERE, "lab_group_sizes.c"),
                                            os.path.join(ROOT, "src", "lab", "lab_group.c"),
                                            os.path.join(ROOT, "src", "lab", "lab_num.c"), "-lm", "-lpthread"])
    out = subprocess.run([exe, str(seed)] + specs, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == len(specs), out.stdout
    return [l if l.startswith("error ") else [int(x) for x in l.split(",")] for l in lines]


def test_sizes_as_the_lab():
    specs = sorted({e["groups"] for e in gs.read_suite(MOE) if e["groups"]}) + EDGES
    assert len(specs) > len(EDGES) + 20, specs      # moe.txt's 30 SPECs
    for seed in (1, 2, 0, 7, 12345, 2 ** 64 - 1):
        want = lab_sizes(seed, specs)
        for spec, w in zip(specs, want):
            got = gs.group_sizes(spec, seed)
            assert got == w, "%s seed %d: python %s, the lab %s" % (spec, seed, got[:16], w[:16])
    # the orders move with the seed (so the comparison above covers the permutation)
    assert gs.group_sizes("8:4096:skewed", 1) != gs.group_sizes("8:4096:skewed", 2)


def test_sizes_fixed():
    """Figures of the lab at --seed 1 (the suite's default), kept here too:
    a change of the rule on both sides shows."""
    assert gs.group_sizes("8:16:skewed") == [2, 0, 1, 0, 3, 1, 9, 0]
    assert gs.group_sizes("8:4096:skewed") == [431, 0, 200, 0, 792, 280, 2240, 153]
    assert gs.group_sizes("10:999:empty") == [125, 125, 125, 0, 125, 125, 125, 0, 125, 124]
    assert gs.group_sizes("7:100:balanced") == [15, 15, 14, 14, 14, 14, 14]
    assert gs.mix64(0) == 0 and gs.mix64(1) == 0x5692161d100b05e5, hex(gs.mix64(1))


def test_refusals_as_the_lab():
    want = lab_sizes(1, BAD)
    for spec, w in zip(BAD, want):
        assert isinstance(w, str), "the lab takes '%s'" % spec[:40]
        try:
            gs.parse_spec(spec)
        except ValueError as e:
            assert str(e) == w[len("error "):], "'%s': python '%s', the lab '%s'" % (spec[:40], e, w)
        else:
            raise AssertionError("python takes '%s'" % spec[:40])


def test_read_moe():
    lines = gs.read_suite(MOE)
    assert len(lines) == 120, len(lines)
    forms = [e["form"] for e in lines]
    assert forms.count("rows") == 60 and forms.count("k") == 60, forms
    first = lines[0]
    assert (first["suite"], first["text"], first["count"], first["m"], first["n"], first["k"], first["op_a"],
            first["op_b"]) == ("moe", "rows 8:16:balanced 28672 4096 n t", 8, 16, 28672, 4096, "n", "t"), first
    dw = [e for e in lines if e["form"] == "k" and e["groups"] == "256:16384:skewed" and e["m"] == 4096][0]
    assert (dw["m"], dw["n"], dw["k"], dw["op_a"], dw["op_b"]) == (4096, 7168, 16384, "t", "n"), dw
    assert gs.flop(dw) == 2.0 * 4096 * 7168 * 16384
    with open(MOE) as f:
        assert f.read().splitlines()[first["line"] - 1].startswith(first["text"] + " "), first["line"]


def test_read_made_up():
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "inner.txt"), "w") as f:
            f.write("batch 32 128 64 96 n t  # a comment\n\n  masked 4:100:empty 40 8 16 n n\n")
        with open(os.path.join(d, "outer.txt"), "w") as f:
            f.write("# only a comment\n64 32 16 t n\ninclude inner\nk 7 9 3,0,4 t n\n")
        lines = gs.read_suite(os.path.join(d, "outer.txt"))
        assert [(e["suite"], e["line"], e["form"]) for e in lines] == [
            ("outer", 2, "dense"), ("inner", 1, "batch"), ("inner", 3, "masked"), ("outer", 4, "k")], lines
        b, m, k = lines[1], lines[2], lines[3]
        assert (b["count"], b["m"], b["n"], b["k"], b["text"]) == (32, 128, 64, 96, "batch 32 128 64 96 n t"), b
        assert gs.flop(b) == 32 * 2.0 * 128 * 64 * 96
        assert (m["count"], m["m"], m["n"], m["k"], m["groups"]) == (4, 40, 8, 16, "4:100:empty"), m
        assert (k["count"], k["m"], k["n"], k["k"], k["groups"]) == (3, 7, 9, 7, "3,0,4"), k
        bad = [("rows 8:16:balanced 4096 n t", "'rows SPEC N K opA opB' expected"),
               ("k 7 9 8:16:zipf t n", "groups: '8:16:zipf': 'zipf' is not balanced, skewed or empty"),
               ("rows 8:16:balanced 4096 4096 n x", "opB: 'x' is not n or t"),
               ("rows 8:16:balanced 0 4096 n t", "N: 0 is out of range"),
               ("batch 65537 8 8 8 n n", "COUNT: 65537 is out of range"),
               ("64 32 1_6 n n", "K: '1_6' is not an integer"),
               ("grouped 8 8 8 n n", "'grouped' is neither M"),
               ("include ../x", "'include NAME' expected"),
               ("include outer", "include cycle")]
        for text, says in bad:
            with open(os.path.join(d, "outer.txt"), "w") as f:
                f.write("64 32 16 n n\n" + text + "\n")
            try:
                gs.read_suite(os.path.join(d, "outer.txt"))
            except ValueError as e:
                assert says in str(e) and "outer.txt:2" in str(e), "%s: %s" % (text, e)
            else:
                raise AssertionError("read: " + text)


def test_summary():
    rows = [{"label": "a", "ratio_torch": 2.0}, {"label": "b", "ratio_torch": 0.5},
            {"label": "c", "ratio_torch": None}, {"label": "d", "ratio_torch": 0.8},
            {"label": "e", "ratio_torch": 0.5}]
    s = gs.summarize(rows)
    assert (s["lines"], s["measured"], s["not_measured"], s["below"]) == (5, 4, 1, 3), s
    assert math.isclose(s["geomean"], (2.0 * 0.5 * 0.8 * 0.5) ** 0.25), s
    assert (s["min"], s["min_line"]) == (0.5, "b"), s          # the first of equal minima
    assert gs.summary_line(s, "torch") == "summary: geomean x torch %.3f over 4 of 5 lines; min 0.500 (b); " \
                                          "3 below 0.9x" % s["geomean"]
    none = gs.summarize([{"label": "c", "ratio_torch": None}])
    assert none["geomean"] is None and none["min_line"] is None and none["below"] == 0, none
    assert gs.summary_line(none, "torch.bmm") == "summary: no line measured against torch.bmm (1 lines)"


def test_table_row():
    r = {"label": "moe:39 rows 8:16:skewed 4096 14336 n t", "groups_cell": gs.groups_cell(
         {"form": "rows"}, [2, 0, 1, 0, 3, 1, 9, 0]), "torch": {"tflops": 12.345},
         "tilekit": {"tflops": 20.0}, "ratio_torch": 1.62, "max_rel_err": 0.0031, "note": ""}
    assert gs.table_row(r) == "| moe:39 rows 8:16:skewed 4096 14336 n t | 8 (3 empty) | 12.3 | 20.0 | 1.620 " \
                              "| 3.1e-03 |  |", gs.table_row(r)
    r.update(torch={"tflops": None}, ratio_torch=None, note="torch refused: expected ...")
    assert gs.table_row(r).endswith("| - | 20.0 | - | 3.1e-03 | torch refused: expected ... |"), gs.table_row(r)
    r["note"] = "tilekit failed: a | b"     # a refusal's words keep the table's columns
    assert gs.table_row(r).endswith("| tilekit failed: a \\| b |"), gs.table_row(r)
    assert gs.groups_cell({"form": "batch", "count": 32}, None) == "batch 32"
    assert gs.groups_cell({"form": "k"}, [5, 5]) == "2"
