#!/usr/bin/env bash
# The CPU test suite: every build/tests/test_* binary, the host-only part of
# the Hopper check (k31's split-wave plan), the kernels' register spills
# (tests/check_spills.py, from the build's ptxas reports), the README's C program installed
# and built with pkg-config (tests/install_app.sh) and the Python tests (on
# the C extension, then the wrapper's again on the ctypes fallback).
# Prints one "N passed, N failed" line last; exits non-zero on any failure.
set -u
build=${1:-build}
cd "$(dirname "$0")/.."
pass=0; fail=0
for t in "$build"/tests/test_* "$build/tests/gpucu_k30_check k30_split_plan"; do
    [ -x "${t%% *}" ] || continue
    echo "== $t"
    out=$($t 2>&1); rc=$?
    echo "$out"
    line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "   (no summary line: counted as one failure, exit $rc)"; fail=$((fail + 1)); continue
    fi
    p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
    pass=$((pass + p)); fail=$((fail + f))
    [ $rc -ne 0 ] && [ "$f" -eq 0 ] && { echo "   (exit $rc with no failed test: counted as a failure)"; fail=$((fail + 1)); }
done
# count NAME OUTPUT RC: adds OUTPUT's summary line to the totals; a missing
# summary, or a non-zero exit with no failed test, counts as a failure.
count() {
    local line p f
    line=$(echo "$2" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "   ($1: no summary line: counted as one failure, exit $3)"; fail=$((fail + 1)); return
    fi
    p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
    pass=$((pass + p)); fail=$((fail + f))
    [ "$3" -ne 0 ] && [ "$f" -eq 0 ] && { echo "   ($1: exit $3 with no failed test: counted as a failure)"; fail=$((fail + 1)); }
}
# Register spills in the kernels, from ptxas's reports of this build.
echo "== tests/check_spills.py (ptxas -v of every kernel)"
out=$(python3 tests/check_spills.py "$build" 2>&1); rc=$?
echo "$out" | grep -v '^ok '
count "tests/check_spills.py" "$out" $rc
# The README's C program: make install into a temporary prefix, the example
# app built with the README's pkg-config line and run (it must start and,
# without a GPU, report TK_ERR_NO_DEVICE).
echo "== tests/install_app.sh (the README's C program, installed)"
out=$(bash tests/install_app.sh "$build" 2>&1); rc=$?
echo "$out"
count "tests/install_app.sh" "$out" $rc
if [ -d tests/python ]; then
    # Every Python test on the C extension that make built (a missing one
    # fails them all), then the wrapper's tests again on the ctypes fallback.
    suffix=$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    echo "== python tests (the C extension, $build/python/_tilekit$suffix)"
    out=$(TILEKIT_LIB="$PWD/$build/libtilekit.so" TILEKIT_EXT="$PWD/$build/python/_tilekit$suffix" \
          python3 tests/python/run.py 2>&1); rc=$?
    echo "$out"
    count "python tests (extension)" "$out" $rc
    echo "== python tests (the ctypes fallback)"
    out=$(TILEKIT_LIB="$PWD/$build/libtilekit.so" TILEKIT_EXT=off python3 tests/python/run.py test_wrapper 2>&1); rc=$?
    echo "$out"
    count "python tests (fallback)" "$out" $rc
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
