#!/usr/bin/env bash
# bench/device_run.sh - the one GPU job: build, GPU test suite, sanitizers,
# resource report, benchmarks, Python bench; a short table printed last.
#
#   bash bench/device_run.sh [OUTDIR]        (OUTDIR default: $OUT, else out/)
#
# PART=all (default) | test | bench | suite   run part of it (separate calls
#                                      fit the device tool's 10-minute limit)
# PART=suite (also in all): `tilekit bench --suite $SUITE` (default all),
# auto-dispatch against cuBLAS on every shape, fp32 and bf16 C, JSON in
# OUTDIR/suite_fp32.json and suite_bf16.json for bench/plot.py.
# Environment: BUILD (default build), KERNELS (default all), SHAPES (default
# 4096x4096x4096,8192x8192x8192), NT_KERNELS (kernels that only take B as
# N x K, benched again with --op-b t), EXTRA_KERNELS / EXTRA_SHAPES /
# PAD_SHAPES (the fast kernels at the issues' other shapes; PAD_SHAPES with
# padded leading dimensions).
# Everything is logged under OUTDIR; bench/readme_table.py turns
# OUTDIR/bench.json, OUTDIR/bench_nt.json and OUTDIR/info.txt into the
# README and docs/seeds.md tables.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-${OUT:-out}}
mkdir -p "$out"
BUILD=${BUILD:-build}
PART=${PART:-all}
KERNELS=${KERNELS:-all}
SHAPES=${SHAPES:-4096x4096x4096,8192x8192x8192}
NT_KERNELS=${NT_KERNELS:-cublas,k08_4w_128x128_abt,k09_8w_128x128_abt,k10_4w_128x128_k32,k11_4w_128x128_kunroll4,k12_8w_256x128_gregs}
EXTRA_KERNELS=${EXTRA_KERNELS:-cublas,k21_mma_fastload,k30_wgmma_tma,k31_wgmma_cluster}
EXTRA_SHAPES=${EXTRA_SHAPES:-2048x2048x2048,4096x14336x4096,8192x8192x1024,16384x16384x16384}
PAD_SHAPES=${PAD_SHAPES:-8191x8193x8190}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
tk="$BUILD/tilekit"
summary=()

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader \
    | tee "$out/gpu.txt"
t0=$(date +%s)
if ! make -j"$(nproc)" BUILD="$BUILD" all > "$out/build.log" 2>&1; then
    tail -n 60 "$out/build.log"; echo "BUILD FAILED"; exit 1
fi
summary+=("build: ok in $(( $(date +%s) - t0 )) s")

if [ "$PART" = all ] || [ "$PART" = test ]; then
    t0=$(date +%s)
    bash tests/run_gpu.sh "$BUILD" > "$out/gpu-test.log" 2>&1
    summary+=("gpu-test: $(tail -n 1 "$out/gpu-test.log") in $(( $(date +%s) - t0 )) s")
    huge=$(grep -m 1 '^huge: largest verified' "$out/gpu-test.log")
    [ -n "$huge" ] && summary+=("$huge")
    grep -E '^(FAIL|   \()' "$out/gpu-test.log" | head -n 20
    # Every registry kernel under memcheck, racecheck, synccheck and initcheck
    # at three odd shapes, tight and padded (bench/sanitize.sh).
    t0=$(date +%s)
    bash bench/sanitize.sh "$BUILD" "$out" > "$out/sanitize.txt" 2>&1
    summary+=("sanitize sweep (bench/sanitize.sh): exit $? in $(( $(date +%s) - t0 )) s, $(grep -c ': exit 0 ' "$out/sanitize.txt") of $(grep -c '^sanitize ' "$out/sanitize.txt") runs clean")
    cat "$out/sanitize.txt"
    # The Hopper kernels under memcheck and racecheck at a small and a medium
    # shape, against k01_naive (racecheck flags cuBLAS's own kernels).
    if [ -x "$BUILD/tests/gpucu_k30_check" ]; then
        for tool in memcheck racecheck; do
            TK_K30_REF=k01_naive compute-sanitizer --tool $tool --error-exitcode 9 \
                "$BUILD/tests/gpucu_k30_check" k30_sanitize > "$out/sanitize-$tool.log" 2>&1
            summary+=("compute-sanitizer $tool (k30_sanitize): exit $? -- $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-$tool.log" | tail -n 1)")
        done
    fi
fi
if [ "$PART" = suite ] || [ "$PART" = all ]; then
    for o in fp32 bf16; do
        t0=$(date +%s)
        echo "$tk bench --suite ${SUITE:-all} --out $o" > "$out/suite_$o.cmd"
        "$tk" bench --suite "${SUITE:-all}" --out $o --json "$out/suite_$o.json" > "$out/suite_$o.txt" \
            2> "$out/suite_$o.err"
        summary+=("suite $o: exit $? in $(( $(date +%s) - t0 )) s")
    done
fi
if [ "$PART" = all ] || [ "$PART" = bench ]; then
    "$tk" info --kernel "$KERNELS" > "$out/info.txt" 2>&1
    run_bench() {   # run_bench NAME ARGS...: one bench, JSON to OUTDIR/NAME.json
        local name=$1; shift
        echo "$tk bench $*" > "$out/$name.cmd"
        "$tk" bench "$@" --json "$out/$name.json" > "$out/$name.txt" 2> "$out/$name.err"
        summary+=("$name: exit $?")
    }
    run_bench bench --kernel "$KERNELS" --shapes "$SHAPES"
    run_bench bench_nt --kernel "$NT_KERNELS" --shapes "$SHAPES" --op-b t
    run_bench bench_extra --kernel "$EXTRA_KERNELS" --shapes "$EXTRA_SHAPES"
    run_bench bench_pad --kernel "$EXTRA_KERNELS" --shapes "$PAD_SHAPES" --pad
    run_bench bench_bf16 --kernel "$EXTRA_KERNELS" --shapes 8192x8192x8192 --out bf16
    TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" python3 python/bench.py --m 4096 --n 4096 --k 4096 \
        > "$out/python_bench.txt" 2>&1
    summary+=("python bench: exit $?")
    # PyTorch: host time per call against torch.matmul, and a Llama step
    # patched through tilekit.patch against the unpatched model.
    for w in overhead llama; do
        TILEKIT_LIB="$PWD/$BUILD/libtilekit.so" python3 bench/torch_bench.py $w > "$out/torch_$w.txt" 2>&1
        summary+=("torch_bench $w: exit $?")
    done
    echo "=== info"; cat "$out/info.txt"
    for f in bench bench_nt bench_extra bench_pad bench_bf16 python_bench torch_overhead torch_llama; do
        [ -f "$out/$f.txt" ] && { echo "=== $f"; cat "$out/$f.txt"; }
    done
fi
for o in fp32 bf16; do
    # the suite's summary: everything after the table
    [ -f "$out/suite_$o.txt" ] && { echo "=== suite $o"; sed -n '/^summary/,$p' "$out/suite_$o.txt"; }
done
echo "=== summary"; printf '%s\n' "${summary[@]}"
