"""Issue 37's Python API without a GPU, on whichever backend runs it
(tests/run_cpu.sh runs this file on the extension and, as its name holds
"test_wrapper", on the ctypes fallback): build_info, the thread's handle
settings (set_workspace, set_workspace_limit, set_split_k,
release_workspaces, handle_info), last_cuda_error, and candidates,
workspace_size and plan up to the library, whose answer without a GPU is
NoDeviceError (no-op problems need none: their plans run). Needs the
library; fails, never skips, when it cannot load.
"""
import tilekit
from tilekit import _lib

from test_wrapper import F32, Fake, raises, runtime_errors_in_a_thread


def _gpu():
    """Whether the library sees a GPU (the tests of the other case are skipped then)."""
    return tilekit.supports(Fake((8, 4)), Fake((4, 6)), Fake((8, 6), F32), kernel="k01_naive").status != _lib.NO_DEVICE


def test_build_info():
    b = tilekit.build_info()
    assert set(b) == {"version", "version_string", "archs", "cuda_runtime_built", "cuda_runtime_loaded",
                      "cuda_driver", "cublas_built", "cublas_loaded"}, b
    assert b["version_string"] == tilekit.version() and b["version"] == 100 * (b["version"] // 100), b
    assert b["archs"] and b["archs"] != "unknown" and all(w[:2].isdigit() for w in b["archs"].split()), b
    assert b["cuda_runtime_built"] >= 11000 and b["cuda_runtime_loaded"] >= 11000, b
    assert b["cublas_built"] // 10000 == b["cublas_loaded"] // 10000 > 10, b
    assert b["cuda_driver"] >= 0, b


def test_handle_settings():
    """The settings read back through handle_info, then put back."""
    try:
        i = tilekit.handle_info()
        assert i["workspace"] is None and i["workspace_limit"] is None and i["split_k"] is True, i
        if not _gpu():
            assert (i["device"], i["sm"], i["workspace_held"]) == (-1, 0, 0), i
        tilekit.set_workspace_limit(1 << 20)
        tilekit.set_split_k(False)
        i = tilekit.handle_info()
        assert i["workspace_limit"] == 1 << 20 and i["split_k"] is False, i
        tilekit.set_workspace_limit(0)
        assert tilekit.handle_info()["workspace_limit"] == 0
        tilekit.release_workspaces()   # nothing held: nothing to do
        tilekit.release_workspaces(stream=0)
        if not _gpu():   # no device to check the memory against: taken as given
            tilekit.set_workspace(0x10000000, 4096)
            i = tilekit.handle_info()
            assert (i["workspace"], i["workspace_bytes"]) == (0x10000000, 4096), i
            buf = Fake((1 << 16,), typestr="|u1", ptr=0x20000000)
            tilekit.set_workspace(buf, 1000)
            assert tilekit.handle_info()["workspace_bytes"] == 1000
            tilekit.set_workspace(buf)
            assert tilekit.handle_info()["workspace_bytes"] == 1 << 16
        e = raises(tilekit.InvalidValueError, tilekit.set_workspace, 0x10000010, 4096, match=("ptr:", "256-byte"))
        assert e.status == _lib.INVALID_VALUE
        tilekit.set_workspace(None)
        assert tilekit.handle_info()["workspace"] is None
    finally:
        tilekit.set_workspace(None)
        tilekit.set_workspace_limit(None)
        tilekit.set_split_k(True)
    assert tilekit.handle_info()["workspace_limit"] is None and tilekit.handle_info()["split_k"] is True


def test_settings_arguments():
    raises(TypeError, tilekit.set_workspace, 0x10000000, match="nbytes: required")
    raises(ValueError, tilekit.set_workspace, None, 16, match="nbytes")
    raises(TypeError, tilekit.set_workspace, 0x10000000, "16", match="nbytes")
    raises(ValueError, tilekit.set_workspace, 0x10000000, -1, match="nbytes")
    raises(ValueError, tilekit.set_workspace, 0x10000000, 1 << 64, match="nbytes")
    raises(TypeError, tilekit.set_workspace, [1, 2, 3], match=("buffer", "list"))
    raises(ValueError, tilekit.set_workspace, Fake((64, 64), strides=(1, 64)), match=("buffer", "strides"))
    raises(ValueError, tilekit.set_workspace, Fake((64,), typestr="|u1"), 65, match=("nbytes", "64"))
    raises(TypeError, tilekit.set_workspace_limit, 1.5, match="nbytes")
    raises(TypeError, tilekit.set_workspace_limit, True, match="nbytes")
    raises(TypeError, tilekit.handle_info, "0", match="device")
    raises(ValueError, tilekit.handle_info, -2, match="device")
    raises(TypeError, tilekit.release_workspaces, "s", match="stream")


def test_last_cuda_error():
    keys = {"cuda_error", "cuda_name", "cublas_status", "cublas_name"}
    e = tilekit.last_cuda_error()
    assert set(e) == keys, e
    A, B, C = Fake((8, 4)), Fake((4, 6)), Fake((8, 6), F32)
    raises(tilekit.InvalidValueError, tilekit.gemm, A, B, C, kernel="k99_nope")
    for e in (tilekit.last_cuda_error(), tilekit.last_cuda_error(tilekit.handle_info()["device"])):
        assert e == {"cuda_error": 0, "cuda_name": "", "cublas_status": 0, "cublas_name": ""}, e


def test_queries_reach_the_library():
    """Checked as supports() checks its arguments; without a GPU the library says so."""
    A, B, C = Fake((64, 32)), Fake((32, 48)), Fake((64, 48), F32)
    raises(ValueError, tilekit.candidates, A, Fake((31, 48)), match="shape mismatch")
    raises(TypeError, tilekit.workspace_size, A, B, C, kernel=3, match="kernel")
    raises(TypeError, tilekit.plan, Fake((64, 32), F32), B, C, match=("A", "bfloat16"))
    raises(tilekit.InvalidValueError, tilekit.workspace_size, A, B, C, kernel="k99_nope", match="k99_nope")
    raises(tilekit.InvalidValueError, tilekit.plan, A, B, C, kernel="k99_nope", match="k99_nope")
    if not _gpu():
        for fn in (tilekit.candidates, tilekit.workspace_size, tilekit.plan):
            raises(tilekit.NoDeviceError, fn, A, B, C)
            raises(tilekit.NoDeviceError, fn, A, B)   # out None: a row-major fp32 C
    # no GEMM kernel runs: no candidates, no workspace
    A0, C0 = Fake((0, 32)), Fake((0, 48), F32)
    assert tilekit.candidates(A0, B, C0) == []
    assert tilekit.workspace_size(A0, B, C0) == 0


def test_noop_plan():
    """A plan of a no-op (M = 0) is made and run without a GPU; a run checks
    its operands against the plan's shape, and only its own thread runs it."""
    A, B, C = Fake((0, 32)), Fake((32, 48)), Fake((0, 48), F32)
    p = tilekit.plan(A, B, C)
    assert p.kernel == "" and "0 x 48 x 32" in repr(p), repr(p)
    C2 = Fake((0, 48), F32)
    assert p(A, B, C2) is C2 and p.run(A, B, C) is C and p.run(A, B, C, stream=5) is C
    raises(TypeError, p.run, A, B, None, match="out: required")
    raises(ValueError, p.run, A, Fake((32, 40)), Fake((0, 40), F32),
           match=("0 x 40 x 32", "the plan is for 0 x 48 x 32"))
    raises(ValueError, p.run, A, B, Fake((0, 48)), match=("bf16 C", "fp32 C"))
    raises(ValueError, p.run, A, Fake((32, 48), strides=(1, 32)), C, match=("op_b T", "op_b N"))
    raises(ValueError, p.run, A, Fake((32, 48), strides=(64, 1)), C, match=("ldb 64", "ldb 48"))
    raises(ValueError, p.run, A, B, Fake((0, 48), F32, readonly=True), match="read-only")
    got = runtime_errors_in_a_thread(p.run, A, B, C)
    assert got and "another thread" in got[0], got
    p.close()
    p.close()
    raises(ValueError, p.run, A, B, C, match="closed")
    assert "closed" in repr(p)
    # trans_a / trans_b and alpha, beta are the plan's
    q = tilekit.plan(Fake((32, 0)), B, C, trans_a=True, alpha=2.0, beta=1.0)
    assert q(Fake((32, 0)), B, C) is C
    raises(ValueError, q.run, Fake((0, 32)), B, C, match="shape mismatch")
