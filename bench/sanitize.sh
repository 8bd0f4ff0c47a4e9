#!/usr/bin/env bash
# bench/sanitize.sh - every tilekit kernel under compute-sanitizer's four
# tools (memcheck, racecheck, synccheck, initcheck) at three odd shapes, tight
# and padded leading dimensions, through `tilekit verify --no-cublas`.
#
#   bash bench/sanitize.sh [BUILD [OUTDIR]]     (defaults: build, $OUT or out)
#
# One process per tool and run (16 sanitizer start-ups): every registry
# kernel but cuBLAS (the configurations in src/kernels/table.def) with tight and
# with padded leading dimensions (op NN), padded with op_b T (k08-k12 take
# only that), and auto-dispatch with tight ones (its aligned-copy route for
# the first shape's odd K). The last line counts the kernels that passed a
# case under every tool. cuBLAS is left out and its
# launches excluded by name: under racecheck its kernels end in "Internal
# Sanitizer Error: failed to handle a hardware exception", which kills the
# context; so the fp64 CPU reference alone judges each case.
# Shapes: 127 x 129 x 65 (under one tile everywhere, a K tail; with tight
# leading dimensions most kernels refuse its odd K), 136 x 264 x 2056 (partial
# tiles, tight leading dimensions multiples of 8; the Hopper kernels split its
# few tiles over k, so the split-K workspace and fixup run), 17 x 312 x 1000
# (decode-like M: short A boxes), 5 x 312 x 1000 (decode: k40_skinny splits
# its K 8 ways in the padded NT run). Prints one line per run; exits non-zero
# when any run reports an error or a verify case fails.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
out=${2:-${OUT:-out}}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
SHAPES=${SAN_SHAPES:-127x129x65,136x264x2056,17x312x1000,5x312x1000}
KERNELS=${SAN_KERNELS:-$(sed -n 's/^TK_CONFIG(\([a-z0-9_]*\),.*/\1/p' src/kernels/table.def | grep -v '^cublas$' | paste -sd,)}
# cuBLAS's kernels: nvjet_*, sm90_xmma_*, sm80_xmma_*, cutlass_*, gemv*, splitKreduce*, ...
EXCLUDE=${SAN_EXCLUDE:-kns=nvjet,kns=xmma,kns=cutlass,kns=gemv,kns=splitK,kns=cublas,kns=gemmk}
excl=()
IFS=, read -ra parts <<< "$EXCLUDE"
for p in "${parts[@]}"; do excl+=(--kernel-name-exclude "$p"); done
rc=0
for tool in memcheck racecheck synccheck initcheck; do
    for run in all-tight all-padded all-padded-nt auto-tight; do
        kernels=$KERNELS; [ "${run%%-*}" = auto ] && kernels=auto
        flag=""
        case $run in *padded*) flag="--pad" ;; esac
        case $run in *-nt) flag="$flag --op-b t" ;; esac
        log="$out/sanitize-$tool-$run.log"
        t0=$(date +%s)
        compute-sanitizer --tool "$tool" --error-exitcode 9 "${excl[@]}" \
            "$BUILD/tilekit" verify --no-cublas --kernel "$kernels" --shapes "$SHAPES" $flag > "$log" 2>&1
        r=$?
        summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)
        echo "sanitize $tool $run: exit $r in $(( $(date +%s) - t0 )) s -- $(grep -E '^verify:' "$log" | tail -n 1) -- $summary"
        [ $r -eq 0 ] || rc=1
    done
done
n=0; total=0
for k in ${KERNELS//,/ }; do
    total=$((total + 1))
    ok=1
    for tool in memcheck racecheck synccheck initcheck; do
        cat "$out"/sanitize-$tool-all-*.log | grep -q "^ok   $k " || ok=0
    done
    [ $ok = 1 ] && n=$((n + 1)) || echo "sanitize: $k passed no case under some tool"
done
echo "sanitize: $n of $total kernels passed cases under all four tools"
[ "$n" = "$total" ] || rc=1
exit $rc
