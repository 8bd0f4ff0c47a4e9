#!/usr/bin/env bash
# bench/ab.sh - A/B timing of a change in one device call: the tree with
# PATCH reverse-applied (A, the base) against the tree as it is (B), plus
# optional variants of B built with extra compiler defines (C, D, ...); the
# same `tilekit bench` on each, ROUNDS rounds in alternating order (A B C,
# then C B A, ...), as docs/NOTES.md's comparisons are taken. A variant
# written @FILE is instead the base with the patch FILE applied (several
# independent changes timed apart in one call: PATCH = all of them, then
# @one.patch @two.patch ...).
#
#   bash bench/ab.sh PATCH "BENCH ARGS" [ROUNDS [DEFINES_C | @PATCH_C ...]]
#   e.g. git diff > /tmp/x.patch; bash bench/ab.sh /tmp/x.patch \
#            "--suite bench/shapes/square.txt" 2 "-DK30_MAX_STAGES=6"
#
# Builds the library and CLI for sm_90a only (ARCHS) in /tmp/tk_ab_<name>, in
# parallel; JSON and text per build and round in OUTDIR (default $OUT, else
# out) as ab_<name>_<round>.json; then prints bench/ab_compare.py's table.
# Each bench run is limited to AB_TIMEOUT seconds (default 150): a hung
# variant shows as a failed run, not a stuck device call.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
[ $# -ge 2 ] || { sed -n '2,20p' "$0"; exit 2; }
patch=$(realpath "$1"); args=$2; rounds=${3:-2}; shift 2; [ $# -gt 0 ] && shift
out=${OUT:-out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
ARCHS=${ARCHS:-90a}
base=/tmp/tk_ab_base
rm -rf "$base" && mkdir -p "$base"
tar --exclude=./.git --exclude='./build*' --exclude=./out -cf - . | tar -C "$base" -xf -
if ! (cd "$base" && git apply -R "$patch"); then
    echo "ab.sh: $1 does not reverse-apply to this tree"; exit 2
fi
(cd "$base" && make -j8 BUILD=/tmp/tk_ab_A ARCHS="$ARCHS" /tmp/tk_ab_A/tilekit > /tmp/tk_ab_A.log 2>&1) &
make -j8 BUILD=/tmp/tk_ab_B ARCHS="$ARCHS" /tmp/tk_ab_B/tilekit > /tmp/tk_ab_B.log 2>&1 &
names=(A B)
letters=(C D E F G H)
for defines in "$@"; do
    n=${letters[$((${#names[@]} - 2))]}
    names+=("$n")
    if [ "${defines:0:1}" = @ ]; then
        vp=$(realpath "${defines:1}")
        src="/tmp/tk_ab_src_$n"
        rm -rf "$src" && mkdir -p "$src"
        tar --exclude=./.git --exclude='./build*' --exclude=./out -cf - . | tar -C "$src" -xf -
        if ! (cd "$src" && git apply -R "$patch" && git apply "$vp"); then
            echo "ab.sh: ${defines:1} does not apply to the base"; exit 2
        fi
        echo "ab.sh: $n = A with ${defines:1} applied"
        (cd "$src" && make -j8 BUILD="/tmp/tk_ab_$n" ARCHS="$ARCHS" "/tmp/tk_ab_$n/tilekit" > "/tmp/tk_ab_$n.log" 2>&1) &
    else
        echo "ab.sh: $n = B with $defines"
        make -j8 BUILD="/tmp/tk_ab_$n" ARCHS="$ARCHS" NVCC="nvcc $defines" "/tmp/tk_ab_$n/tilekit" \
            > "/tmp/tk_ab_$n.log" 2>&1 &
    fi
done
wait
for n in "${names[@]}"; do
    [ -x "/tmp/tk_ab_$n/tilekit" ] || { echo "ab.sh: build $n failed"; tail -n 30 "/tmp/tk_ab_$n.log"; exit 1; }
done
for r in $(seq 1 "$rounds"); do
    order=("${names[@]}")
    [ $((r % 2)) = 0 ] && mapfile -t order < <(printf '%s\n' "${names[@]}" | tac)
    for n in "${order[@]}"; do
        # shellcheck disable=SC2086  # args is a list of bench options
        timeout "${AB_TIMEOUT:-150}" "/tmp/tk_ab_$n/tilekit" bench $args --json "$out/ab_${n}_$r.json" \
            > "$out/ab_${n}_$r.txt" 2>&1
        echo "round $r $n: exit $?"
    done
done
python3 bench/ab_compare.py "$out"
