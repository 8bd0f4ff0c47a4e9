#!/usr/bin/env bash
# The CPU test suite: every build/tests/test_* binary, the host-only part of
# the Hopper check (k31's split-wave plan) and the Python tests.
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
if [ -d tests/python ]; then
    echo "== python tests"
    out=$(TILEKIT_LIB="$PWD/$build/libtilekit.so" python3 tests/python/run.py 2>&1); rc=$?
    echo "$out"
    line=$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then fail=$((fail + 1)); else
        p=${line%% passed*}; f=${line#*passed, }; f=${f%% failed*}
        pass=$((pass + p)); fail=$((fail + f))
        [ $rc -ne 0 ] && [ "$f" -eq 0 ] && fail=$((fail + 1))
    fi
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
