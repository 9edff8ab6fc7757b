#!/usr/bin/env bash
# Cost per call of one hot function, from the same source built several
# ways and measured in the same run (best of 5 runs of N calls each):
#   plain                 no instrumentation
#   mcloc, disabled       -pg -mfentry, recordmcount, objpatch link --nop --runtime:
#                         the site is a NOP (goal: <= 1.02x plain).  Judged
#                         by the paired build: both hot()s in one process,
#                         alternating 400 times (xray/pair_main.c); separate
#                         runs are printed too but swing by +-40% here
#   mcloc, parked         the same site once enabled and disabled: x86_64
#                         leaves it "test $rel32, %eax", not the NOP
#                         (paired as above; goal the same)
#   mcloc, empty callback one ops with an empty callback enabled on it
#                         (goal: <= 3 ns added per call)
#   mcloc, direct         mcloc_register_direct with an empty trampoline
#                         (endbr64; ret): the site calls it, nothing of
#                         ours between (goal: <= 1.5 ns added per call)
#   floor                 hot() calling a trampoline that saves exactly our
#                         argument frame and calls an empty C function: the
#                         least any ABI-keeping tracer of C callbacks does
#   gcc -pg               glibc's always-on mcount
#   XRay, unpatched / patched with an empty handler
# Not a test: prints ns per call and the ratios.
# Usage: call-bench.sh [N]  (RUNS=K alternating runs of each, default 5)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$here/build}
n=${1:-200000000}
x=$here/tests/bench/xray
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
cc -O2 -c "$x/loop.c" -o "$w/loop.o"	# one timed loop for every build
cc -O2 -c "$x/hot.c" -o "$w/hot_plain.o"
cc -O2 -c "$x/call_main.c" -o "$w/main_plain.o"
cc "$w/main_plain.o" "$w/loop.o" "$w/hot_plain.o" -o "$w/plain"

cc -O2 -pg -mfentry -c "$x/hot.c" -o "$w/hot_mc.o"
"$build/recordmcount/recordmcount" "$w/hot_mc.o"
cc -O2 -DWITH_MCLOC -I"$here/include" -c "$x/call_main.c" -o "$w/main_mc.o"
"$build/objpatch/objpatch" link --nop --runtime -- cc "$w/main_mc.o" "$w/loop.o" "$w/hot_mc.o" \
	-L"$build/libmcloc" -lmcloc -o "$w/mcloc"

cc -O2 -Dhot=hot_plain -c "$x/hot.c" -o "$w/hot_pp.o"
cc -O2 -Dhot=hot_plain -Dcall_hot=call_hot_plain -c "$x/loop.c" -o "$w/loop_pp.o"
cc -O2 -I"$here/include" -c "$x/pair_main.c" -o "$w/pair_main.o"
"$build/objpatch/objpatch" link --nop --runtime -- cc "$w/pair_main.o" "$w/loop.o" "$w/loop_pp.o" \
	"$w/hot_mc.o" "$w/hot_pp.o" -L"$build/libmcloc" -lmcloc -o "$w/pair"

cc -O2 -c "$x/floor.c" -o "$w/floor.o"
cc "$w/main_plain.o" "$w/loop.o" "$w/floor.o" -o "$w/floor"

cc -O2 -pg -c "$x/hot.c" -o "$w/hot_pg.o"
cc -pg "$w/main_plain.o" "$w/loop.o" "$w/hot_pg.o" -o "$w/gprof"

clang -O2 -fxray-instrument -fxray-instruction-threshold=1 -c "$x/hot.c" -o "$w/hot_x.o"
clang -O2 -DWITH_XRAY -x c++ -c "$x/call_main.c" -o "$w/main_x.o"
clang++ -fxray-instrument "$w/main_x.o" "$w/loop.o" "$w/hot_x.o" -o "$w/xray"

export LD_LIBRARY_PATH=$build/libmcloc
cd "$w"
# Each binary keeps its best of 5 loops; the machine's speed drifts by
# tens of percent between runs, so the seven run in turn, RUNS times, and
# each keeps its fastest run: interference only ever adds time.
runs=${RUNS:-5}
best() { /usr/bin/python3 -c 'import sys; print(min(map(float, sys.argv[1:])))' "$@"; }
P=() D=() E=() DT=() F=() G=() XU=() XP=() R=() RP=()
for ((k = 0; k < runs; k++)); do
	P+=("$(./plain "$n")")
	D+=("$(./mcloc "$n")")
	E+=("$(./mcloc "$n" enable)")
	DT+=("$(./mcloc "$n" direct)")
	F+=("$(./floor "$n")")
	R+=("$(./pair | awk '{ printf "%.4f", $2 / $1 }')")
	RP+=("$(./pair 2000000 400 parked | awk '{ printf "%.4f", $2 / $1 }')")
	G+=("$(./gprof "$n")")
	XU+=("$(XRAY_OPTIONS=patch_premain=false ./xray "$n")")
	XP+=("$(XRAY_OPTIONS=patch_premain=false ./xray "$n" enable)")
done
plain=$(best "${P[@]}") dis=$(best "${D[@]}") en=$(best "${E[@]}") fl=$(best "${F[@]}")
dt=$(best "${DT[@]}")
pg=$(best "${G[@]}") xu=$(best "${XU[@]}") xp=$(best "${XP[@]}")
echo "fastest of $runs alternating runs each (each run: best of 5 loops of $n calls)"
printf '%-28s %8s ns/call\n' "plain" "$plain" "mcloc, disabled (NOP)" "$dis" \
	"mcloc, empty callback" "$en" "mcloc, direct, empty tramp" "$dt" "floor (frame, empty call)" "$fl" "gcc -pg (glibc mcount)" "$pg" \
	"XRay, unpatched" "$xu" "XRay, patched, empty handler" "$xp"
paired=$(printf '%s\n' "${R[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
echo "mcloc disabled / plain, separate runs = $(echo "scale=3; $dis / $plain" | bc)"
echo "mcloc disabled / plain, paired in one process = $paired (median of $runs: ${R[*]}; goal <= 1.02)"
pparked=$(printf '%s\n' "${RP[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
echo "mcloc parked / plain, paired in one process = $pparked (median of $runs: ${RP[*]}; goal <= 1.02)"
echo "mcloc enabled - plain = $(echo "scale=2; $en - $plain" | bc) ns per call (goal <= 3)"
dmed=$(for ((k = 0; k < runs; k++)); do echo "${DT[k]} - ${P[k]}" | bc; done | sort -n |
	sed -n "$(( (runs + 1) / 2 ))p")
echo "mcloc direct - plain = $(echo "scale=2; $dt - $plain" | bc) ns per call, fastest runs;" \
	"median of the $runs paired runs $dmed (goal <= 1.5)"
echo "floor - plain = $(echo "scale=2; $fl - $plain" | bc) ns per call (no ABI-keeping design adds less)"
echo "XRay patched - plain = $(echo "scale=2; $xp - $plain" | bc) ns per call"
