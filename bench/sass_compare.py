#!/usr/bin/env python3
"""bench/sass_compare.py - machine code of every kernel function, before and after.

Compiles each src/kernels/*.cu of two trees to a cubin per architecture
(sm_80, sm_90a; the Makefile's flags) and compares the bytes of every
.text.<function> section, which hold the instructions alone (line tables
live in other sections, so edits that only move lines compare equal).
Needs nvcc, not cuobjdump or a GPU: the cubin is an ELF file read here.

    python3 bench/sass_compare.py BASE_TREE NEW_TREE [--jobs N]

Prints one line per file and architecture (functions compared, identical,
differing, only in one tree) and exits 1 when any function differs.
"""
import argparse
import concurrent.futures
import os
import struct
import subprocess
import sys
import tempfile

ARCHS = ("80", "90a")


def text_sections(path):
    """{section name: bytes} of the .text.* sections of an ELF64 file."""
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("%s: not an ELF64 file" % path)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = []
    for i in range(shnum):
        name, _type, _flags, _addr, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        secs.append((name, off, size))
    strtab_off = secs[shstrndx][1]
    out = {}
    for name, off, size in secs:
        end = data.index(b"\0", strtab_off + name)
        sname = data[strtab_off + name:end].decode()
        if sname.startswith(".text."):
            out[sname[6:]] = data[off:off + size]
    return out


def build(tree, src, arch, outdir, nvcc):
    cubin = os.path.join(outdir, "%s_%s_%s.cubin" % (os.path.basename(tree.rstrip("/")), os.path.basename(src), arch))
    cmd = [nvcc, "-I" + os.path.join(tree, "include"), "-I" + os.path.join(tree, "src"), "-O3", "-lineinfo",
           "-std=c++17", "--expt-relaxed-constexpr", "-gencode=arch=compute_%s,code=sm_%s" % (arch, arch),
           "-cubin", os.path.join(tree, src), "-o", cubin]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError("%s failed:\n%s" % (" ".join(cmd), r.stderr[-2000:]))
    return cubin


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--nvcc", default=os.path.join(os.environ.get("CUDA", "/usr/local/cuda"), "bin", "nvcc"))
    args = ap.parse_args()
    srcs = sorted("src/kernels/" + f for f in os.listdir(os.path.join(args.new, "src/kernels")) if f.endswith(".cu"))
    bad = 0
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        jobs = {(t, s, a): pool.submit(build, t, s, a, tmp, args.nvcc)
                for s in srcs for a in ARCHS for t in (args.base, args.new)
                if os.path.exists(os.path.join(t, s))}
        total = same_total = 0
        for s in srcs:
            for a in ARCHS:
                if (args.base, s, a) not in jobs:
                    print("%-40s sm_%-4s new file (no base)" % (s, a))
                    continue
                old = text_sections(jobs[(args.base, s, a)].result())
                new = text_sections(jobs[(args.new, s, a)].result())
                both = sorted(set(old) & set(new))
                same = sum(old[f] == new[f] for f in both)
                only = len(set(old) ^ set(new))
                total += len(both)
                same_total += same
                flag = "" if same == len(both) and not only else "  <-- DIFFERS"
                bad |= bool(flag)
                print("%-40s sm_%-4s %3d functions, %3d identical, %d differ, %d in one tree only%s"
                      % (s, a, len(both), same, len(both) - same, only, flag))
                for f in both:
                    if old[f] != new[f]:
                        print("    differs: %s (%d -> %d bytes)" % (f, len(old[f]), len(new[f])))
        print("total: %d of %d kernel functions byte-identical" % (same_total, total))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
