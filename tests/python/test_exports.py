"""libtilekit.so exports the public API and nothing else (issue 36): its
defined dynamic symbols, as nm lists them, against the functions that
include/tilekit.h declares; and the CUDA runtime functions that the Python
package looks up through the library's handle are still found there (they
come from libcudart, a dependency of the library, not from its own exports).
Needs nm (binutils) and no GPU; fails, never skips, without nm.
"""
import ctypes
import os
import re
import shutil
import subprocess

from tilekit import _lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def header_functions():
    """The tk_* functions include/tilekit.h declares: each name followed by
    "(" once comments and preprocessor lines are gone, less function-pointer
    types ("tk_x (*name)(...)")."""
    with open(os.path.join(ROOT, "include", "tilekit.h")) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    return set(re.findall(r"\b(tk_\w+)\s*\((?!\s*\*)", text))


def exported_symbols(lib):
    """The symbols lib defines in its dynamic symbol table (nm -D), without
    version suffixes."""
    nm = shutil.which("nm")
    assert nm, "nm (binutils) not found: it lists the library's exports"
    out = subprocess.run([nm, "-D", "--defined-only", lib], capture_output=True, text=True)
    assert out.returncode == 0, "nm -D %s: %s" % (lib, out.stderr.strip())
    names = set()
    for line in out.stdout.splitlines():
        fields = line.split()
        if len(fields) >= 2:
            names.add(fields[-1].split("@")[0])
    return names


def test_exports_are_the_header():
    lib = _lib.library_path()
    declared = header_functions()
    assert len(declared) >= 10, "include/tilekit.h parsed to %d functions: %s" % (len(declared), sorted(declared))
    exported = exported_symbols(lib)
    extra = sorted(exported - declared)
    missing = sorted(declared - exported)
    assert not extra, "%s exports %d names include/tilekit.h does not declare: %s" % (lib, len(extra), extra)
    assert not missing, "%s does not export %d functions include/tilekit.h declares: %s" % (lib, len(missing),
                                                                                             missing)


def test_cuda_runtime_found_through_the_library():
    """What the extension (bind() in _tilekit.c) and the ctypes fallback
    (_lib._CUDART_PROTOTYPES) look up on the library's handle."""
    with open(os.path.join(ROOT, "python", "tilekit", "_tilekit.c")) as f:
        names = set(re.findall(r"\bSYM\((cuda\w+),", f.read()))
    assert names, "no SYM(cuda...) in python/tilekit/_tilekit.c"
    names |= set(_lib._CUDART_PROTOTYPES)
    lib = ctypes.CDLL(_lib.library_path())
    missing = sorted(n for n in names if not hasattr(lib, n))
    assert not missing, "not found through %s: %s" % (_lib.library_path(), missing)
