"""tilekit_build - the PEP 517 / PEP 660 build backend of `pip install .`.

It drives the Makefile, the project's one build: `make lib python` (the CUDA
library with the project's flags, ARCHS and ptxas checks, and the extension
for the interpreter pip runs) into build/ (or $TILEKIT_BUILD, or
--config-settings build=DIR), a no-op when that is up to date, as in CI after
`make`. Then it zips the wheel itself: the tilekit package, its extension
and libtilekit.so, which the package loads from beside itself. No build
dependency (not even setuptools or wheel): it installs offline, with or
without build isolation. An editable install (`pip install -e .`) builds the
same and puts the checkout's python/ on sys.path (a .pth file): the package
then finds the extension and the library in the checkout's build/, as when
run from the checkout.

Environment: CUDA, ARCHS, CC, NVCC (make variables) pass through; MAKEJOBS
sets make's -j (default: the CPU count).
"""
import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG_DIR = os.path.join(ROOT, "python", "tilekit")


def _project():
    """name, version, description, requires-python of pyproject.toml's [project]."""
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    section = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S).group(1)
    fields = dict(re.findall(r'^([\w-]+)\s*=\s*"([^"]*)"\s*$', section, re.M))
    return fields["name"], fields["version"], fields.get("description", ""), fields.get("requires-python", "")


def _tag():
    impl = "cp" if sys.implementation.name == "cpython" else sys.implementation.name[:2]
    ver = "%d%d" % sys.version_info[:2]
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s%s-%s%s%s-%s" % (impl, ver, impl, ver, getattr(sys, "abiflags", ""), plat)


def _dist_info(name, version):
    return "%s-%s.dist-info" % (name, version)


def _metadata(name, version, summary, requires):
    lines = ["Metadata-Version: 2.1", "Name: " + name, "Version: " + version]
    if summary:
        lines.append("Summary: " + summary)
    if requires:
        lines.append("Requires-Python: " + requires)
    return "\n".join(lines) + "\n"


def _wheel_file():
    return "Wheel-Version: 1.0\nGenerator: tilekit_build\nRoot-Is-Purelib: false\nTag: %s\n" % _tag()


def _build_dir(config_settings):
    d = (config_settings or {}).get("build") or os.environ.get("TILEKIT_BUILD") or "build"
    return d if os.path.isabs(d) else os.path.join(ROOT, d)


def _make(build):
    """make lib python dist into build; returns (extension, library) paths."""
    jobs = os.environ.get("MAKEJOBS") or str(os.cpu_count() or 1)
    cmd = ["make", "-C", ROOT, "-j" + jobs, "lib", "python", "dist", "BUILD=" + build, "PYTHON=" + sys.executable]
    # pip shows nothing for minutes while nvcc runs: say what is happening
    # first (pip passes a backend's output on with -v, or when it fails).
    print("tilekit_build: building the CUDA kernels of libtilekit.so and the Python extension with make into %s: "
          "1 to 2 minutes from scratch on 2 CPU cores (measured: 66 s and 120 s for make -j2; ARCHS=%s, -j%s here), "
          "seconds when it is up to date" % (build, os.environ.get("ARCHS", "80 90a"), jobs), file=sys.stderr,
          flush=True)
    print("tilekit_build: " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    ext = os.path.join(build, "python", "_tilekit" + sysconfig.get_config_var("EXT_SUFFIX"))
    lib = os.path.realpath(os.path.join(build, "libtilekit.so"))
    if not os.path.exists(ext):
        raise RuntimeError("tilekit_build: %s was not built: the Python headers of %s are missing (install "
                           "python3-dev, or the -dev package of this Python)" % (ext, sys.executable))
    return ext, lib


class _Wheel:
    """A wheel being written: files with their RECORD lines."""

    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.record = []

    def add(self, arcname, data, executable=False):
        info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o755 if executable else 0o644) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append("%s,sha256=%s,%d" % (arcname, digest, len(data)))

    def add_file(self, arcname, path, executable=False):
        with open(path, "rb") as f:
            self.add(arcname, f.read(), executable)

    def close(self, dist_info):
        rec = dist_info + "/RECORD"
        self.zip.writestr(zipfile.ZipInfo(rec, date_time=(2020, 1, 1, 0, 0, 0)),
                          "\n".join(self.record + [rec + ",,"]) + "\n")
        self.zip.close()


def _write_wheel(wheel_directory, files):
    """files: (arcname, bytes or a path, executable) in the package; returns the wheel's name."""
    name, version, summary, requires = _project()
    dist = _dist_info(name, version)
    fname = "%s-%s-%s.whl" % (name, version, _tag())
    w = _Wheel(os.path.join(wheel_directory, fname))
    for arcname, src, exe in files:
        if isinstance(src, bytes):
            w.add(arcname, src, exe)
        else:
            w.add_file(arcname, src, exe)
    w.add(dist + "/METADATA", _metadata(name, version, summary, requires).encode())
    w.add(dist + "/WHEEL", _wheel_file().encode())
    w.add(dist + "/top_level.txt", b"tilekit\n")
    w.close(dist)
    return fname


# ---- PEP 517 hooks ----

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name, version, summary, requires = _project()
    dist = _dist_info(name, version)
    os.makedirs(os.path.join(metadata_directory, dist), exist_ok=True)
    with open(os.path.join(metadata_directory, dist, "METADATA"), "w") as f:
        f.write(_metadata(name, version, summary, requires))
    with open(os.path.join(metadata_directory, dist, "WHEEL"), "w") as f:
        f.write(_wheel_file())
    return dist


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    ext, lib = _make(_build_dir(config_settings))
    files = [("tilekit/" + f, os.path.join(PKG_DIR, f), False) for f in sorted(os.listdir(PKG_DIR))
             if f.endswith(".py")]
    files.append(("tilekit/" + os.path.basename(ext), ext, True))
    files.append(("tilekit/libtilekit.so", lib, True))
    # tilekit.distributed's library, where make built it (it needs NCCL's header): it finds
    # libtilekit.so.0 as the package's libtilekit.so, which tilekit.distributed loads first
    dist_lib = os.path.join(os.path.dirname(lib), "libtilekit_dist.so")
    if os.path.exists(dist_lib):
        files.append(("tilekit/libtilekit_dist.so", os.path.realpath(dist_lib), True))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    build = _build_dir(config_settings)
    if os.path.normpath(build) != os.path.join(ROOT, "build"):
        raise RuntimeError("tilekit_build: an editable install uses the checkout's build/ (where the package "
                           "looks), not %s" % build)
    _make(build)
    pth = (os.path.join(ROOT, "python") + "\n").encode()
    return _write_wheel(wheel_directory, [("__editable__.tilekit.pth", pth, False)])


def build_sdist(sdist_directory, config_settings=None):
    """The tracked files (git ls-files; without git, the tree less build
    outputs) under tilekit-VERSION/, with PKG-INFO."""
    name, version, summary, requires = _project()
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], check=True, capture_output=True).stdout
        paths = [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = []
        for d, dirs, fs in os.walk(ROOT):
            dirs[:] = [x for x in dirs if not (x.startswith("build") or x.startswith(".git") or x == "__pycache__")]
            paths += [os.path.relpath(os.path.join(d, f), ROOT) for f in fs]
    base = "%s-%s" % (name, version)
    fname = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, fname), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for p in sorted(paths):
            full = os.path.join(ROOT, p)
            if os.path.isfile(full):
                tar.add(full, arcname=base + "/" + p, recursive=False)
        info = _metadata(name, version, summary, requires).encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(info)
        tar.addfile(ti, io.BytesIO(info))
    return fname
