"""bench/profile_docs.py on real `tilekit profile --json` output: the CLI is
run under a fake ncu that replays the H100 output saved in
tests/host/fixtures (so no GPU is needed), then the sections are written
into copies of docs/seeds.md and a README. Also the refusals: a file that
is not profile JSON, verify output without a refusal, a missing marker."""
import contextlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("profile_docs", os.path.join(ROOT, "bench", "profile_docs.py"))
pd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pd)
FIXTURES = os.path.join(ROOT, "tests", "host", "fixtures")


def cli():
    lib = os.environ.get("TILEKIT_LIB")
    path = os.path.join(os.path.dirname(lib), "tilekit") if lib else os.path.join(ROOT, "build", "tilekit")
    assert os.access(path, os.X_OK), "the CLI %s is not built (make)" % path
    return path


FAKE_NCU = """#!/bin/sh
case "$*" in
  *k11*) f=ncu_k11_4w_128x128_kunroll4.csv ;;
  *k10*) f=ncu_k10_4w_128x128_k32.csv ;;
  *k31*) f=ncu_k31_wgmma_cluster.csv ;;
  *) f=ncu_cublas.csv ;;
esac
echo "tilekit launch: kernel x regs 200 local_bytes 0 static_smem 0 dyn_smem 20480 threads 128 blocks_per_sm 2 \
occupancy 12.5 ran saved"
cat "%s/$f"
"""


def profile_json(d, name, args):
    """`tilekit profile ARGS --json d/name.json` under the fake ncu; the parsed JSON."""
    ncu = os.path.join(d, "ncu")
    with open(ncu, "w") as f:
        f.write(FAKE_NCU % FIXTURES)
    os.chmod(ncu, 0o755)
    env = dict(os.environ, NCU=ncu)
    path = os.path.join(d, name + ".json")
    p = subprocess.run([cli(), "profile"] + args + ["--json", path], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(path) as f:
        return path, json.load(f)


def run(args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        st = pd.main(args)
    return st, out.getvalue(), err.getvalue()


def docs_copy(d):
    dst = os.path.join(d, "docs")
    os.makedirs(dst)
    shutil.copyfile(os.path.join(ROOT, "docs", "seeds.md"), os.path.join(dst, "seeds.md"))
    readme = os.path.join(d, "README.md")
    with open(readme, "w") as f:
        f.write("# x\n\n<!-- error-map:begin -->\nnot yet\n<!-- error-map:end -->\n")
    return os.path.join(dst, "seeds.md"), readme


def test_real_docs_have_markers():
    with open(os.path.join(ROOT, "docs", "seeds.md")) as f:
        text = f.read()
    for name in pd.SECTIONS:
        b, e = pd.markers(name)
        assert text.count(b) == 1 and text.count(e) == 1 and text.index(b) < text.index(e), name
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    b, e = pd.markers("error-map")
    assert text.count(b) == 1 and text.count(e) == 1, "README lacks the error-map section"


def test_sections_from_profile_json():
    with tempfile.TemporaryDirectory() as d:
        seeds, readme = docs_copy(d)
        cpath, _ = profile_json(d, "profile_k10_k11", ["--kernel", "k10_4w_128x128_k32", "--vs",
                                                       "k11_4w_128x128_kunroll4", "--m", "2048", "--n", "2048",
                                                       "--k", "2048", "--op-b", "t"])
        with open(os.path.join(d, "profile_k10_k11.cmd"), "w") as f:
            f.write("build/tilekit profile --kernel k10_4w_128x128_k32 --vs k11_4w_128x128_kunroll4 --op-b t\n")
        opath, _ = profile_json(d, "profile_k31", ["--kernel", "k31_wgmma_cluster", "--vs", "cublas"])
        smem = os.path.join(d, "verify_smem.txt")
        with open(smem, "w") as f:
            f.write("ok   k10_4w_128x128_k32 1024x1024x1024 row NT fp32 a=1 b=0 | ...\n"
                    "skip k11_4w_128x128_kunroll4 1024x1024x1024 row NT fp32 a=1 b=0: needs 69632 bytes of shared "
                    "memory per block (A and B^T panels of 128 x 128), this GPU allows 32768\n"
                    "verify: 1 skipped (the kernel refused the case)\n")
        png = os.path.join(d, "error_map.png")
        with open(png, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\nnot really")
        with open(os.path.join(d, "error_map.txt"), "w") as f:
            f.write("FAIL k31_wgmma_cluster 2048x2048x512 row NN fp32 a=1 b=0 | vs cuBLAS: ...\n"
                    "  planted (verify --plant, a lab demonstration): C(1000, 1500) was changed after the kernel ran\n")
        st, out, err = run(["--docs", seeds, "--readme", readme, "--coalescing", cpath, "--occupancy", opath,
                            "--smem", smem, "--error-map", png, "--date", "2026-01-02"])
        assert st == 0, err
        with open(seeds) as f:
            text = f.read()
        sec = text[text.index("<!-- profile-coalescing:begin -->"):text.index("<!-- profile-coalescing:end -->")]
        assert "Not yet measured" not in sec
        assert "| `k10_4w_128x128_k32` | 16.00 (ideal n/a) | 8.00 (ideal n/a) | - |" in sec, sec
        assert "| `k11_4w_128x128_kunroll4` | 20.00 (ideal n/a) |" in sec, sec
        assert "ncu gave no bytes asked for" in sec and "NVIDIA H100 80GB HBM3, 2026-01-02, 2048x2048x2048" in sec
        assert "with `build/tilekit profile --kernel k10_4w_128x128_k32 --vs k11_4w_128x128_kunroll4 --op-b t`" in sec
        sec = text[text.index("<!-- profile-occupancy:begin -->"):text.index("<!-- profile-occupancy:end -->")]
        assert "| `k31_wgmma_cluster` | 168 |" in sec and "registers, shared memory (1/SM)" in sec, sec
        assert "barrier 8.58" in sec and "| `cublas` |" in sec, sec
        # rebuilt when there is no .cmd file
        assert "`build/tilekit profile --kernel k31_wgmma_cluster --vs cublas --m 8192 --n 8192 --k 8192 --json " \
               "profile_k31.json`" in sec, sec
        sec = text[text.index("<!-- smem-refusal:begin -->"):text.index("<!-- smem-refusal:end -->")]
        assert "this GPU allows 32768" in sec and "ok   k10" not in sec, sec
        sec = text[text.index("<!-- error-map:begin -->"):text.index("<!-- error-map:end -->")]
        assert "](error_map.png)" in sec and "C(1000, 1500) was changed" in sec, sec
        assert os.path.exists(os.path.join(d, "docs", "error_map.png"))
        with open(readme) as f:
            r = f.read()
        assert "](docs/error_map.png)" in r and "not yet" not in r, r
        # again on its own output: the same text
        st, _, err = run(["--docs", seeds, "--coalescing", cpath, "--date", "2026-01-02"])
        with open(seeds) as f:
            assert st == 0 and f.read() == text, err


def test_verdicts():
    q = {"kernel": "kx", "derived": {"global_ld_sectors_per_request": 16.0,
                                     "global_ld_sectors_per_request_ideal": 16.0}}
    assert "the ideal for the bytes its threads ask for" in pd.verdict(q)
    q["derived"]["global_ld_sectors_per_request"] = 20.0
    assert "against an ideal of 16.00: 25% more sectors" in pd.verdict(q), pd.verdict(q)
    q["derived"] = {"global_ld_sectors_per_request": None, "cp_async_sectors_per_request": 4.0}
    assert "no global loads" in pd.verdict(q) and "cp.async touches 4.00" in pd.verdict(q)


def test_refusals():
    with tempfile.TemporaryDirectory() as d:
        seeds, _ = docs_copy(d)
        with open(seeds) as f:
            before = f.read()
        bench = os.path.join(d, "bench.json")
        with open(bench, "w") as f:
            json.dump({"tool": "tilekit bench", "results": []}, f)
        st, _, err = run(["--docs", seeds, "--coalescing", bench])
        assert st == 1 and "not the output of `tilekit profile --json`" in err, err
        txt = os.path.join(d, "v.txt")
        with open(txt, "w") as f:
            f.write("ok   k10 ...\nverify: 1 passed, 0 failed\n")
        st, _, err = run(["--docs", seeds, "--smem", txt])
        assert st == 1 and "no `skip ...` line" in err, err
        st, _, err = run(["--docs", seeds])
        assert st == 1 and "nothing to write" in err, err
        nomark = os.path.join(d, "nomark.md")
        with open(nomark, "w") as f:
            f.write("# none\n")
        cpath, _ = profile_json(d, "p", ["--kernel", "k10_4w_128x128_k32", "--op-b", "t"])
        st, _, err = run(["--docs", nomark, "--coalescing", cpath])
        assert st == 1 and "profile-coalescing:begin" in err, err
        with open(seeds) as f:
            assert f.read() == before
