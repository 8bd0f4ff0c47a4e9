#!/usr/bin/env bash
# The GPU suite: every build/tests/gpu_* and gpucu_* binary, then the Python
# GPU tests when tests/gpu/test_python.py exists. Sums their
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
if [ -f tests/gpu/test_python.py ]; then
    echo "== tests/gpu/test_python.py"
    out=$(TILEKIT_LIB="$PWD/$build/libtilekit.so" python3 tests/gpu/test_python.py 2>&1); rc=$?
    echo "$out"
    count tests/gpu/test_python.py "$out" $rc
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
