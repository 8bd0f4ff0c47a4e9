#!/usr/bin/env bash
# The GPU suite: every build/tests/gpu_* and gpucu_* binary, then the Python
# GPU tests (tests/gpu/test_python.py on both backends), the README's C path
# (tests/install_app.sh), then test_torch.py. Sums their
# "N passed, N failed" lines like run_cpu.sh; prints the total last and
# exits non-zero on any failure.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
pass=0; fail=0

# count NAME OUTPUT RC: adds the summary line of OUTPUT to the totals; a
# missing summary, or a non-zero exit with no failed test, counts as a failure.
count() {
    local line p f
    line=$(echo "$2" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "   ($1: no summary line: counted as one failure, exit $3)"; fail=$((fail + 1)); return
    fi
    p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
    pass=$((pass + p)); fail=$((fail + f))
    if [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "   ($1: exit $3 with no failed test: counted as a failure)"; fail=$((fail + 1))
    fi
}

for t in "$build"/tests/gpu_* "$build"/tests/gpucu_*; do
    [ -x "$t" ] || continue
    echo "== $t"
    out=$("$t" 2>&1); rc=$?
    echo "$out"
    count "$t" "$out" $rc
done
# The Python GPU tests: the wrapper's on the C extension that make built (a
# missing one fails them) and on the ctypes fallback, then tilekit in
# PyTorch (matmul, nn.Linear, patch, torch.compile, CUDA graphs, CuPy).
suffix=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
for backend in "$PWD/$build/python/_tilekit$suffix" off; do
    echo "== tests/gpu/test_python.py (TILEKIT_EXT=$backend)"
    out=$(TILEKIT_LIB="$PWD/$build/libtilekit.so" TILEKIT_EXT="$backend" python3 tests/gpu/test_python.py 2>&1); rc=$?
    echo "$out"
    count "tests/gpu/test_python.py ($backend)" "$out" $rc
done
# The README's C path (make install, pkg-config, examples/app.c) on a GPU:
# the program checks its product (exit 0).
echo "== tests/install_app.sh"
out=$(bash tests/install_app.sh "$build" 2>&1); rc=$?
echo "$out"
count tests/install_app.sh "$out" $rc
echo "== tests/gpu/test_torch.py"
out=$(TILEKIT_LIB="$PWD/$build/libtilekit.so" TILEKIT_EXT="$PWD/$build/python/_tilekit$suffix" \
      python3 tests/gpu/test_torch.py 2>&1); rc=$?
echo "$out"
count tests/gpu/test_torch.py "$out" $rc
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
