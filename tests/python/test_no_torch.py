"""Without PyTorch: tilekit.matmul, tilekit.patch and tilekit.nn used to end
in a bare `ModuleNotFoundError: No module named 'torch'`. Each now says it
needs PyTorch and that tilekit.gemm works without it (so do issue 38's
tilekit.grouped_mm and tilekit.bmm, and issue 39's tilekit.linear,
tilekit.gated_mlp and tilekit.mlp). Run in a fresh
interpreter with torch made unimportable (sys.modules["torch"] = None), so
the answer is the same on a machine that has torch.
"""
import fakes

NO_TORCH = """if True:
    import sys
    sys.modules["torch"] = None      # `import torch` now fails as if PyTorch were not installed
"""


def check(what, msg):
    assert msg.startswith(what + " needs PyTorch, which is not installed"), msg
    assert "tilekit.gemm works without it" in msg and "No module named" not in msg, msg


def test_torch_parts_say_they_need_pytorch():
    code = NO_TORCH + """
    import tilekit
    cases = [("tilekit.matmul", lambda: tilekit.matmul), ("tilekit.patch", lambda: tilekit.patch),
             ("tilekit.nn", lambda: tilekit.nn), ("tilekit.matmul", lambda: __import__("tilekit").matmul)]
    def import_nn():
        import tilekit.nn
    def from_nn():
        from tilekit.nn import Linear
    def from_matmul():
        from tilekit import matmul
    cases += [("tilekit.nn", import_nn), ("tilekit.nn", from_nn), ("tilekit.matmul", from_matmul),
              ("tilekit.grouped_mm", lambda: tilekit.grouped_mm), ("tilekit.bmm", lambda: tilekit.bmm),
              ("tilekit.linear", lambda: tilekit.linear), ("tilekit.gated_mlp", lambda: tilekit.gated_mlp),
              ("tilekit.mlp", lambda: tilekit.mlp)]
    for what, fn in cases:
        try:
            fn()
        except ImportError as e:
            assert isinstance(e, ModuleNotFoundError) and e.name == "torch", repr(e)
            print("MSG", what, "|", e)
        else:
            raise AssertionError(what + ": no error without torch")
    assert callable(tilekit.gemm) and callable(tilekit.gemm_grouped) and tilekit.kernels()   # the rest still works
    print("OK")
"""
    for name, ext in fakes.backends():
        rc, out = fakes.run(code, ext)
        assert rc == 0 and out.rstrip().endswith("OK"), "%s backend:\n%s" % (name, out)
        lines = [l[4:] for l in out.splitlines() if l.startswith("MSG ")]
        assert len(lines) == 12, out
        for line in lines:
            what, msg = line.split(" | ", 1)
            check(what, msg)


def test_uncaught_error_reads_cleanly():
    """What a user sees when the error is not caught: one line, no chained
    'No module named torch' traceback above it."""
    rc, out = fakes.run(NO_TORCH + """
    import tilekit
    y = tilekit.matmul
""", "off")
    assert rc == 1, out
    last = out.rstrip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: "), out
    check("tilekit.matmul", last[len("ModuleNotFoundError: "):])
    assert "During handling" not in out and "No module named" not in out, out
