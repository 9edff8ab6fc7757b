#!/usr/bin/env bash
# Patch-all and unpatch-all of a generated 100,000-function program:
# libmcloc (mcloc_register_ops / mcloc_unregister_ops of an ops covering
# every site) against LLVM XRay (__xray_patch / __xray_unpatch) on the same
# generated source, built with clang -fxray-instrument
# -fxray-instruction-threshold=1.  Not a test: prints medians and the
# ratios ours/XRay measured in this run (goal <= 0.5), and two floors: one
# pass that stores every site, with the text made writable around it, and
# the breakpoint protocol alone for a first-byte change (a parked site's
# toggle: int3 pass, sync, first-byte pass, sync), with nothing decided.
# Also the first enable alone, in each fresh process (the first write to
# each text page is a copy-on-write fault), against XRay's first patch,
# and its floor: a third fresh process that only makes the text writable
# and stores every site's first byte back once, the copy-on-write faults
# any patcher's first pass pays (XRay's included).  The benchmark's
# process is single-threaded, so libmcloc changes its sites at once (no
# other thread can run them); a fourth process runs the same with an idle
# second thread, each batch then the SMP-safe breakpoint protocol.
# PAIRS=N sets how many times the two alternate (default 5).
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
cc -O1 -I"$here/include" -c "$here/tests/bench/xray/mcloc_main.c" -o "$w/main.o"
"$build/objpatch/objpatch" link --nop --runtime -- cc "$w/main.o" "$w/gen.o" \
	-L"$build/libmcloc" -lmcloc -o "$w/ours"
clang++ -O1 -fxray-instrument "$here/tests/bench/xray/xray_main.cpp" "$w/xgen.o" -o "$w/xray"
# The machine's speed drifts by tens of percent within a minute, so the
# two sides alternate, PAIRS times, and each pair gives a ratio; the
# median ratio is printed beside each side's median times.
pairs=${PAIRS:-5}
export MCLOC_BENCH_SITES=$w/sites	# (mcloc_main.c: found once, not per process)
: > "$w/runs"
for ((k = 0; k < pairs; k++)); do
	read -r op ou opb oub recs fl fp of < <(LD_LIBRARY_PATH=$build/libmcloc "$w/ours" "$rounds")
	read -r xp xu xf < <(XRAY_OPTIONS="patch_premain=false" "$w/xray" "$rounds")
	read -r fw < <(LD_LIBRARY_PATH=$build/libmcloc "$w/ours" 1 first-write)
	read -r tp tu _ _ _ _ _ tf < <(LD_LIBRARY_PATH=$build/libmcloc "$w/ours" "$rounds" threaded)
	echo "$op $ou $opb $oub $xp $xu $fl $fp $of $xf $fw $tp $tu $tf" >> "$w/runs"
done
echo "sites: ours $recs; $pairs alternating pairs of $rounds rounds each"
/usr/bin/python3 - "$w/runs" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = lambda i: st.median(r[i] for r in rows)
rat = lambda i, j: st.median(r[i] / r[j] for r in rows)
print(f"patch all:   ours {med(0):.3f} ms (batch {med(2):.3f} ms), XRay {med(4):.3f} ms")
print(f"unpatch all: ours {med(1):.3f} ms (batch {med(3):.3f} ms), XRay {med(5):.3f} ms")
print(f"patch-all ours/XRay = {rat(0, 4):.2f} (pairs: {' '.join(f'{r[0] / r[4]:.2f}' for r in rows)})")
print(f"unpatch-all ours/XRay = {rat(1, 5):.2f} (pairs: {' '.join(f'{r[1] / r[5]:.2f}' for r in rows)})")
print(f"floor, one unsynchronised pass storing every site: {med(6):.3f} ms; "
      f"floor/XRay = {rat(6, 4):.2f}, ours/floor = {rat(0, 6):.2f} (goal ours/XRay <= 0.5)")
print(f"first enable in a fresh process: ours {med(8):.3f} ms, XRay {med(9):.3f} ms; "
      f"ours/XRay = {rat(8, 9):.2f} (pairs: {' '.join(f'{r[8] / r[9]:.2f}' for r in rows)}; goal <= 0.5)")
print(f"... with a second thread (the breakpoint protocol): ours {med(13):.3f} ms; "
      f"ours/XRay = {rat(13, 9):.2f} (pairs: {' '.join(f'{r[13] / r[9]:.2f}' for r in rows)}); "
      f"later patch-all {rat(11, 4):.2f}, unpatch-all {rat(12, 5):.2f}")
print(f"floor, a fresh process's first write of every site (its copy-on-write faults): "
      f"{med(10):.3f} ms; floor/XRay first = {rat(10, 9):.2f}, ours/floor = {rat(8, 10):.2f}")
print(f"floor, the breakpoint protocol alone (int3 pass, sync, first-byte pass, sync): "
      f"{med(7):.3f} ms; protocol/XRay = {rat(7, 4):.2f}, ours/protocol = {rat(0, 7):.2f}")
PY
