#!/usr/bin/env bash
# bench/device_run.sh - the one GPU job: build, GPU test suite, resource
# report, benchmarks, Python bench; a short table printed last.
#
#   bash bench/device_run.sh [OUTDIR]        (OUTDIR default: $OUT, else out/)
#
# Environment: BUILD (default build), KERNELS (default all), SHAPES (default
# 4096x4096x4096,8192x8192x8192), EXTRA_SHAPES (benched for KERNELS too, in a
# separate JSON), TESTS=0 to skip the GPU test suite, BENCH=0 to skip timing.
# Everything is logged under OUTDIR; bench/readme_table.py turns
# OUTDIR/bench*.json and OUTDIR/info.txt into the README table.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-out}}
mkdir -p "$out"
BUILD=${BUILD:-build}
KERNELS=${KERNELS:-all}
SHAPES=${SHAPES:-4096x4096x4096,8192x8192x8192}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
summary=()

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader \
    | tee "$out/gpu.txt"
t0=$(date +%s)
if ! make -j"$(nproc)" BUILD="$BUILD" all > "$out/build.log" 2>&1; then
    tail -n 60 "$out/build.log"; echo "BUILD FAILED"; exit 1
fi
summary+=("build: ok in $(( $(date +%s) - t0 )) s")

"$BUILD/tilekit" info --kernel "$KERNELS" > "$out/info.txt" 2>&1
if [ "${TESTS:-1}" != 0 ]; then
    t0=$(date +%s)
    bash tests/run_gpu.sh "$BUILD" > "$out/gpu-test.log" 2>&1
    summary+=("gpu-test: $(tail -n 1 "$out/gpu-test.log") in $(( $(date +%s) - t0 )) s")
    grep -E '^(FAIL|   \()' "$out/gpu-test.log" | head -n 20
fi
if [ "${BENCH:-1}" != 0 ]; then
    "$BUILD/tilekit" bench --kernel "$KERNELS" --shapes "$SHAPES" --json "$out/bench.json" \
        > "$out/bench.txt" 2> "$out/bench.err"
    summary+=("bench: exit $?")
    if [ -n "${EXTRA_SHAPES:-}" ]; then
        "$BUILD/tilekit" bench --kernel "$KERNELS" --shapes "$EXTRA_SHAPES" --json "$out/bench_extra.json" \
            > "$out/bench_extra.txt" 2> "$out/bench_extra.err"
        summary+=("bench extra: exit $?")
    fi
    TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" python3 python/bench.py --m 4096 --n 4096 --k 4096 \
        > "$out/python_bench.txt" 2>&1
    summary+=("python bench: exit $?")
fi

echo "=== info"; cat "$out/info.txt"
for f in "$out"/bench*.txt "$out/python_bench.txt"; do [ -f "$f" ] && { echo "=== $f"; cat "$f"; }; done
echo "=== summary"; printf '%s\n' "${summary[@]}"
