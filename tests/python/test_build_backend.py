"""The build backend of `pip install .` (python/tilekit_build.py) says, on
stderr and before make starts, that it is building the CUDA kernels and
how long that takes (issue 37: `pip install .` was silent for two minutes).
make itself is replaced by a recorder here: nothing is built.
"""
import contextlib
import importlib.util
import io
import os
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load_backend():
    spec = importlib.util.spec_from_file_location("tilekit_build_under_test",
                                                  os.path.join(ROOT, "python", "tilekit_build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_says_what_it_builds_before_make():
    tkb = load_backend()
    err = io.StringIO()
    said_before_make = []

    def fake_run(cmd, **kw):
        said_before_make.append(err.getvalue())
        assert cmd[0] == "make" and "lib" in cmd and "python" in cmd, cmd

    tkb.subprocess = types.SimpleNamespace(run=fake_run)   # this module's subprocess only
    build = os.path.join(ROOT, "build")
    with contextlib.redirect_stderr(err):
        try:
            tkb._make(build)
        except RuntimeError:
            pass   # no extension in this build folder: not what is tested here
    assert len(said_before_make) == 1, said_before_make
    first = said_before_make[0].splitlines()[0]
    assert first.startswith("tilekit_build: building the CUDA kernels of libtilekit.so"), first
    assert "minutes from scratch" in first and build in first, first
