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
#
# FP8 mode (issue 40): SAN_DTYPE=e4m3 or e5m2 (SAN_DTYPE_B: B's other
# format) runs `tilekit verify --dtype` instead, once per scale mode of
# SAN_SCALE (default tensor,row,block), with the same four tools and runs,
# on the kernels whose family takes FP8 operands (TK_ACCEPT_AB_FP8 in
# src/kernels/table.def; SAN_KERNELS overrides) and auto-dispatch; block
# scales at SAN_BLOCK_SHAPES (default 127x129x128,136x264x2048,17x312x1024,
# 5x312x1024: K a multiple of 128), the other modes at the shapes above.
#
#   SAN_DTYPE=e4m3 bash bench/sanitize.sh
#   SAN_DTYPE=e5m2 SAN_DTYPE_B=e4m3 SAN_SCALE=row bash bench/sanitize.sh
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
out=${2:-${OUT:-out}}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
SHAPES=${SAN_SHAPES:-127x129x65,136x264x2056,17x312x1000,5x312x1000}
BLOCK_SHAPES=${SAN_BLOCK_SHAPES:-127x129x128,136x264x2048,17x312x1024,5x312x1024}
DTYPE=${SAN_DTYPE:-}
if [ -n "$DTYPE" ]; then
    # the families whose TK_FAMILY line has TK_ACCEPT_AB_FP8 (a line may go on to the next), then their configurations
    fams=$(tr '\n' ' ' < src/kernels/table.def | grep -o 'TK_FAMILY([a-z0-9_]*,[^)]*TK_ACCEPT_AB_FP8' |
           sed 's/TK_FAMILY(\([a-z0-9_]*\),.*/\1/')
    KERNELS=${SAN_KERNELS:-$(sed -n 's/^TK_CONFIG(\([a-z0-9_]*\), *\([a-z0-9_]*\),.*/\1 \2/p' src/kernels/table.def |
                             awk -v fams="$fams" 'BEGIN { n = split(fams, f, " "); for (i = 1; i <= n; i++) ok[f[i]] = 1 }
                                                  ok[$2] { print $1 }' | paste -sd,)}
    MODES=${SAN_SCALE:-tensor,row,block}
    fp8=(--dtype "$DTYPE")
    [ -n "${SAN_DTYPE_B:-}" ] && fp8+=(--dtype-b "$SAN_DTYPE_B")
else
    KERNELS=${SAN_KERNELS:-$(sed -n 's/^TK_CONFIG(\([a-z0-9_]*\),.*/\1/p' src/kernels/table.def | grep -v '^cublas$' | paste -sd,)}
    MODES=bf16
    fp8=()
fi
# cuBLAS's kernels: nvjet_*, sm90_xmma_*, sm80_xmma_*, cutlass_*, gemv*, splitKreduce*, ...
EXCLUDE=${SAN_EXCLUDE:-kns=nvjet,kns=xmma,kns=cutlass,kns=gemv,kns=splitK,kns=cublas,kns=gemmk}
excl=()
IFS=, read -ra parts <<< "$EXCLUDE"
for p in "${parts[@]}"; do excl+=(--kernel-name-exclude "$p"); done
rc=0
for mode in ${MODES//,/ }; do
    # bf16: the logs as they always were; FP8: one set per scale mode
    tag=""; scale=(); shapes=$SHAPES
    if [ -n "$DTYPE" ]; then
        tag="fp8-$mode-"; scale=(--scale "$mode")
        [ "$mode" = block ] && shapes=$BLOCK_SHAPES
    fi
    for tool in memcheck racecheck synccheck initcheck; do
        for run in all-tight all-padded all-padded-nt auto-tight; do
            kernels=$KERNELS; [ "${run%%-*}" = auto ] && kernels=auto
            flag=""
            case $run in *padded*) flag="--pad" ;; esac
            case $run in *-nt) flag="$flag --op-b t" ;; esac
            log="$out/sanitize-$tag$tool-$run.log"
            t0=$(date +%s)
            compute-sanitizer --tool "$tool" --error-exitcode 9 "${excl[@]}" \
                "$BUILD/tilekit" verify --no-cublas --kernel "$kernels" --shapes "$shapes" $flag \
                ${fp8[@]+"${fp8[@]}"} ${scale[@]+"${scale[@]}"} > "$log" 2>&1
            r=$?
            summary=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -n 1)
            echo "sanitize $tag$tool $run: exit $r in $(( $(date +%s) - t0 )) s -- $(grep -E '^verify:' "$log" | tail -n 1) -- $summary"
            [ $r -eq 0 ] || rc=1
        done
    done
done
n=0; total=0
for k in ${KERNELS//,/ }; do
    total=$((total + 1))
    ok=1
    for mode in ${MODES//,/ }; do
        tag=""; [ -n "$DTYPE" ] && tag="fp8-$mode-"
        for tool in memcheck racecheck synccheck initcheck; do
            cat "$out"/sanitize-$tag$tool-all-*.log | grep -q "^ok   $k " || ok=0
        done
    done
    [ $ok = 1 ] && n=$((n + 1)) || echo "sanitize: $k passed no case under some tool${DTYPE:+ and scale mode}"
done
echo "sanitize: $n of $total kernels passed cases under all four tools${DTYPE:+ (FP8 $DTYPE${SAN_DTYPE_B:+ x $SAN_DTYPE_B}, scales $MODES)}"
[ "$n" = "$total" ] || rc=1
exit $rc
