#!/usr/bin/env bash
# tests/install_app.sh BUILD - the README's C path, run as a newcomer would
# (issue 37: the README's `cc app.c $(pkg-config --cflags --libs tilekit)`
# gave a program that did not start, "error while loading shared libraries:
# libtilekit.so.0", and did not link where it called cudaMalloc).
#
# Runs the shell block of README.md that follows the line
# `<!-- tests/install_app.sh runs the block below -->`, line by line as
# written, in an empty directory with HOME pointing there (so
# `make install PREFIX=$HOME/tilekit` installs into it) and
# LD_LIBRARY_PATH unset. Only `make` is wrapped: it runs in this checkout
# with its build folder (BUILD, CUDA), so nothing is compiled again.
# `examples` is linked into the directory so the block's paths resolve.
# Then checks: the program starts (no loader error), and reports
# TK_ERR_NO_DEVICE with exit 1 on a machine without a GPU, or checks its
# product (exit 0, "ok:") on one; examples/app.c also compiles cleanly
# with -std=c11 -Wall -Wextra -Werror and the same pkg-config flags.
# Prints "N passed, N failed" last (tests/run_cpu.sh counts it).
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cuda=${CUDA:-/usr/local/cuda}
pass=0; fail=0
ok() { echo "ok   $1"; pass=$((pass + 1)); }
bad() { echo "FAIL $1"; shift; printf '    %s\n' "$@"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit; }

command -v pkg-config >/dev/null || { bad "pkg-config" "pkg-config is not installed (apt-get install pkg-config)"; finish; }
block=$(awk '/<!-- tests\/install_app.sh runs the block below -->/ { want = 1; next }
             want && /^```/ { if (inside) exit; inside = 1; next }
             inside { print }' "$root/README.md")
[ -n "$block" ] || { bad "README block" "no shell block after '<!-- tests/install_app.sh runs the block below -->' in README.md"; finish; }
echo "the README's block:"; echo "$block" | sed 's/^/    /'

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ln -s "$root/examples" "$tmp/examples"
out=$(cd "$tmp" && env -u LD_LIBRARY_PATH -u PKG_CONFIG_PATH HOME="$tmp" ROOT="$root" BUILD="$build" CUDA="$cuda" bash -c '
make() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$ROOT" BUILD="$BUILD" CUDA="$CUDA" "$@"; }
'"$block" 2>&1); rc=$?
echo "$out" | sed 's/^/    | /'

pc="$tmp/tilekit/lib/pkgconfig/tilekit.pc"
[ -f "$pc" ] && ok "make install PREFIX=\$HOME/tilekit wrote tilekit.pc" || bad "install" "no $pc"
[ -x "$tmp/tilekit-app" ] && ok "the app built with the README's pkg-config line" || bad "build" "no tilekit-app built"
if echo "$out" | grep -q "error while loading shared libraries"; then
    bad "start" "the program did not start: $(echo "$out" | grep 'error while loading')"
elif [ -x "$tmp/tilekit-app" ]; then
    ok "the program starts without LD_LIBRARY_PATH"
fi
if echo "$out" | grep -q "TK_ERR_NO_DEVICE"; then
    [ $rc -eq 1 ] && ok "no GPU: TK_ERR_NO_DEVICE reported, exit 1" || bad "no GPU" "exit $rc (expected 1)"
    echo "$out" | grep -q "^  reason: no CUDA device: " &&
        ok "the reason follows the status" || bad "no GPU" "no reason after the status"
    first=$(echo "$out" | grep "TK_ERR_NO_DEVICE" | head -n 1)
    grep -qxF "$first" "$root/README.md" && ok "README.md shows that line as the program prints it" ||
        bad "README" "README.md does not show the program's line: $first"
elif echo "$out" | grep -q "^ok: 0 of"; then
    [ $rc -eq 0 ] && ok "a GPU: the product matches the CPU dot product" || bad "GPU" "exit $rc"
else
    bad "run" "neither TK_ERR_NO_DEVICE nor a checked product (exit $rc)"
fi
if [ -f "$pc" ]; then
    flags=$(PKG_CONFIG_PATH="$tmp/tilekit/lib/pkgconfig" pkg-config --cflags --libs tilekit)
    warn=$(cc -std=c11 -Wall -Wextra -Werror "$root/examples/app.c" -o "$tmp/app-strict" $flags 2>&1) &&
        ok "examples/app.c compiles with -std=c11 -Wall -Wextra -Werror" || bad "strict compile" "$warn"
fi
finish
