#!/usr/bin/env bash
# What `objpatch link` adds to a link, on a generated 100,000-function
# program built with -pg -mfentry and recordmcount.  Not a test: prints
# wall-time ratios measured in this run, the plain link and the wrapped one
# alternating within each round.  The goal is at most 1.10.
# Usage: link-bench.sh [NFUNCS [ROUNDS]]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
op=${OBJPATCH:-$here/build/objpatch/objpatch}
rm_=${RECORDMCOUNT:-$here/build/recordmcount/recordmcount}
n=${1:-100000} rounds=${2:-5} files=20
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
echo "generating and compiling $n functions in $files files..."
/usr/bin/python3 "$here/tests/lib/gen-funcs.py" "$w" "$n" "$files"
ls "$w"/*.c | xargs -P"$(nproc)" -I{} sh -c 'cc -O1 -pg -mfentry -c "$1" -o "${1%.c}.o" && "$2" "${1%.c}.o"' _ {} "$rm_"
TIMEFORMAT='%R'
wall() { { time "$@" >/dev/null 2>&1; } 2>&1; }
for mode in "" "--nop"; do
	ratios=()
	for r in $(seq "$rounds"); do
		p=$(wall cc "$w"/*.o -o "$w/plain")
		o=$(wall "$op" link $mode -- cc "$w"/*.o -o "$w/wrapped")
		ratios+=("$(echo "scale=3; $o / $p" | bc)")
		echo "  round $r: plain link ${p}s, objpatch link $mode ${o}s"
	done
	"$op" check "$w/wrapped" >/dev/null
	med=$(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(( (rounds + 1) / 2 ))p")
	echo "objpatch link ${mode:+$mode }/ plain link = $med (median of $rounds, $n functions; goal <= 1.10)"
done
