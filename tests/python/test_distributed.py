"""tilekit.distributed (issue 41) without a GPU: it imports without torch
and says torch is needed when used; its ctypes structs lay out as the C
compiler lays out tilekit_dist.h's; libtilekit_dist.so exports the
header's functions and nothing else, and loads without NCCL being asked
for; its refusals come back as the package's exceptions (TK_ERR_COMM as
CommError). The 2-GPU side is tests/gpu/test_torch_dist.py (torchrun).
"""
import ctypes
import os
import shutil
import subprocess
import tempfile

import fakes
import tilekit
from tilekit import _lib
import tilekit.distributed as tkd

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _have_torch():
    try:
        import torch  # noqa: F401
        return True
    except ModuleNotFoundError:
        return False


def test_imports_without_torch():
    assert callable(tkd.all_gather_matmul) and callable(tkd.matmul_reduce_scatter)
    assert "distributed" in tilekit.__all__
    if _have_torch():
        return
    for fn, args in ((tkd.all_gather_matmul, (None, None)), (tkd.matmul_reduce_scatter, (None, None))):
        try:
            fn(*args)
        except ModuleNotFoundError as e:
            assert "PyTorch" in str(e), e
        else:
            raise AssertionError("%s ran without torch" % fn.__name__)
    try:
        tkd.ColumnParallelLinear
    except ModuleNotFoundError as e:
        assert "tilekit.distributed.ColumnParallelLinear needs PyTorch" in str(e), e
    else:
        raise AssertionError("ColumnParallelLinear without torch")


def test_struct_offsets_match_c():
    code = r'''
#include <stddef.h>
#include <stdio.h>
#include "tilekit_dist.h"
#define F(s, f) printf("%s.%s %zu\n", #s, #f, offsetof(s, f))
int main(void)
{
    printf("tk_dist_desc %zu\n", sizeof(tk_dist_desc));
    F(tk_dist_desc, problem); F(tk_dist_desc, gathered); F(tk_dist_desc, chunks); F(tk_dist_desc, partial_type);
    F(tk_dist_desc, check_shapes); F(tk_dist_desc, reserved); F(tk_dist_desc, kernel);
    printf("tk_dist_info %zu\n", sizeof(tk_dist_info));
    F(tk_dist_info, rank); F(tk_dist_info, nranks); F(tk_dist_info, device); F(tk_dist_info, nccl_version);
    F(tk_dist_info, link_gbps); F(tk_dist_info, comm_sms); F(tk_dist_info, gemm_sms); F(tk_dist_info, last_chunks);
    F(tk_dist_info, workspace_bytes);
    return 0;
}
'''
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "dist_offsets.c")
        with open(path, "w") as f:
            f.write(code)
        exe = fakes.build_c("dist_offsets", [path])
    out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout.split()
    c = dict(zip(out[0::2], (int(x) for x in out[1::2])))
    assert c["tk_dist_desc"] == ctypes.sizeof(tkd.DistDesc), (c["tk_dist_desc"], ctypes.sizeof(tkd.DistDesc))
    assert c["tk_dist_info"] == ctypes.sizeof(tkd.DistInfo), (c["tk_dist_info"], ctypes.sizeof(tkd.DistInfo))
    for struct, cls in (("tk_dist_desc", tkd.DistDesc), ("tk_dist_info", tkd.DistInfo)):
        for name, _ in cls._fields_:
            if name == "size":
                continue
            assert c["%s.%s" % (struct, name)] == getattr(cls, name).offset, (struct, name)


def test_library_path():
    old = os.environ.pop("TILEKIT_DIST_LIB", None)
    try:
        assert tkd.library_path() == os.path.join(os.path.dirname(_lib.library_path()), "libtilekit_dist.so")
        os.environ["TILEKIT_DIST_LIB"] = "/somewhere/libtilekit_dist.so"
        assert tkd.library_path() == "/somewhere/libtilekit_dist.so"
    finally:
        os.environ.pop("TILEKIT_DIST_LIB", None)
        if old is not None:
            os.environ["TILEKIT_DIST_LIB"] = old


def _header_functions():
    import re
    with open(os.path.join(ROOT, "include", "tilekit_dist.h")) as f:
        text = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    return set(re.findall(r"\b(tk_dist_\w+)\s*\((?!\s*\*)", text))


def test_library_exports_the_header():
    """libtilekit_dist.so (built where nccl.h is: make says so otherwise)
    exports tilekit_dist.h's functions alone, links no NCCL, and its
    prototypes here are all found."""
    path = tkd.library_path()
    assert os.path.exists(path), "%s is not built (make dist needs NCCL's nccl.h)" % path
    nm = shutil.which("nm")
    assert nm, "nm (binutils) not found"
    out = subprocess.run([nm, "-D", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1].split("@")[0] for line in out.splitlines() if len(line.split()) >= 2}
    assert exported == _header_functions(), sorted(exported ^ _header_functions())
    readelf = shutil.which("readelf")
    if readelf:
        needed = subprocess.run([readelf, "-d", path], capture_output=True, text=True).stdout
        assert "libnccl" not in needed, "libtilekit_dist.so links NCCL: %s" % needed
        # C++ runtime symbols (sum.cu's objects) must come from a library it names: loaded by ctypes into a
        # process without libstdc++ global (torchrun's), it failed with __gxx_personality_v0 undefined
        undef = subprocess.run([nm, "-D", "--undefined-only", path], capture_output=True, text=True).stdout
        if "__gxx_personality" in undef or "_ZSt" in undef:
            assert "libstdc++" in needed, "libtilekit_dist.so uses the C++ runtime but does not link it: %s" % needed
    assert set(tkd.PROTOTYPES) <= exported, sorted(set(tkd.PROTOTYPES) - exported)


def test_refusals_are_the_package_exceptions():
    lib = tkd.load()
    ctx = ctypes.c_void_p()
    st = lib.tk_dist_create(ctypes.byref(ctx), None)
    assert st == _lib.INVALID_VALUE and ctx.value is None, st
    try:
        tkd._check(st, None, "tilekit.distributed: tk_dist_create")
    except tilekit.InvalidValueError as e:
        assert "comm: NULL" in str(e), e
    else:
        raise AssertionError("no exception")
    e = _lib.error_for(_lib.COMM, "ncclSend: NCCL error 3", "tilekit.distributed.all_gather_matmul")
    assert isinstance(e, tilekit.CommError) and e.status_name == "TK_ERR_COMM", e
