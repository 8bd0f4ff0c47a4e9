"""The code a newcomer copies first must run as written: the usage comment
at the top of include/tilekit.h compiles (C11, -Wall -Wextra -Werror) with
the names it assumes (M, N, K, A, B, C, stream) declared around it. Needs a
C compiler ($CC or cc); fails, never skips, without one.
"""
import os
import re
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# What a snippet may assume: the problem's sizes, device pointers, a stream.
C_CONTEXT = """#include <stdint.h>
#include <stdio.h>
#include "tilekit.h"

void snippet(int64_t M, int64_t N, int64_t K, const void *A, const void *B, void *C, void *stream);
void snippet(int64_t M, int64_t N, int64_t K, const void *A, const void *B, void *C, void *stream)
{
%s
}
"""


def compile_c(body, what):
    """Compiles body inside C_CONTEXT; fails with the compiler's words."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "snippet.c")
        with open(src, "w") as f:
            f.write(C_CONTEXT % body)
        cmd = [os.environ.get("CC", "cc"), "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
               "-I" + os.path.join(ROOT, "include"), src]
        out = subprocess.run(cmd, capture_output=True, text=True)
        assert out.returncode == 0, "%s does not compile as written:\n%s\n%s" % (what, body, out.stderr)


def header_snippet():
    """The lines of tilekit.h's opening comment from `tk_handle h;` to
    `tk_destroy(h);`, without the comment's ` *   ` margin."""
    with open(os.path.join(ROOT, "include", "tilekit.h")) as f:
        head = f.read().split("*/", 1)[0]
    lines = [re.sub(r"^ \*   ?", "", l) for l in head.splitlines()]
    start = next(i for i, l in enumerate(lines) if l.startswith("tk_handle h;"))
    end = next(i for i, l in enumerate(lines) if l.startswith("tk_destroy(h);"))
    return "\n".join(lines[start:end + 1])


def test_header_snippet_compiles():
    compile_c(header_snippet(), "the usage comment of include/tilekit.h")
