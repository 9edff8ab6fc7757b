#!/usr/bin/env bash
# Patch-all and unpatch-all of a generated 100,000-function program:
# libmcloc (mcloc_register_ops / mcloc_unregister_ops of an ops covering
# every site) against LLVM XRay (__xray_patch / __xray_unpatch) on the same
# generated source, built with clang -fxray-instrument
# -fxray-instruction-threshold=1.  Not a test: prints medians and the
# ratios ours/XRay measured in this run; the goal is <= 1.0.
# Usage: patch-bench.sh [NFUNCS [ROUNDS]]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$here/build}
n=${1:-100000} rounds=${2:-9}
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
/usr/bin/python3 "$here/tests/fixtures/runtime/gen.py" "$w/gen.c" "$n"
echo "building $n functions twice..."
cc -O1 -pg -mfentry -c "$w/gen.c" -o "$w/gen.o" &
clang -O1 -fxray-instrument -fxray-instruction-threshold=1 -c "$w/gen.c" -o "$w/xgen.o" &
wait
"$build/recordmcount/recordmcount" "$w/gen.o"
cc -O1 -I"$here/libmcloc" -c "$here/tests/bench/xray/mcloc_main.c" -o "$w/main.o"
"$build/objpatch/objpatch" link --nop --runtime -- cc "$w/main.o" "$w/gen.o" \
	-L"$build/libmcloc" -lmcloc -o "$w/ours"
clang++ -O1 -fxray-instrument "$here/tests/bench/xray/xray_main.cpp" "$w/xgen.o" -o "$w/xray"
read -r op ou opb oub recs < <(LD_LIBRARY_PATH=$build/libmcloc "$w/ours" "$rounds")
read -r xp xu < <(XRAY_OPTIONS="patch_premain=false" "$w/xray" "$rounds")
echo "sites: ours $recs"
echo "patch all:   ours ${op} ms (batch ${opb} ms), XRay ${xp} ms"
echo "unpatch all: ours ${ou} ms (batch ${oub} ms), XRay ${xu} ms"
echo "patch-all ours/XRay = $(echo "scale=2; $op / $xp" | bc)"
echo "unpatch-all ours/XRay = $(echo "scale=2; $ou / $xu" | bc)"
