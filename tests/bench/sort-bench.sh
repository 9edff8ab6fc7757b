#!/usr/bin/env bash
# `objpatch sort` on a vmlinux-like image with 1,000,000 table entries,
# against `cp` of the same file in the same run (tests/lib/gen-image.py
# --asm writes it as assembly, half the functions placed first so the
# table is out of order).  Not a test: prints the ratio; the goal is at
# most 3.  Each round sorts a fresh unsorted copy.
#
# sort replaces the image atomically (temp file, rename), so it also pays
# for freeing the old inode, which cp writing a new file does not.  On an
# ext4 mounted with `discard`, as here, that alone costs about what the
# copy does; each round prints it (rm of a synced copy) for the reader.
# Usage: sort-bench.sh [NENTRIES [ROUNDS]]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
op=${OBJPATCH:-$here/build/objpatch/objpatch}
n=${1:-1000000} rounds=${2:-5}
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
echo "generating a $n-entry image..."
/usr/bin/python3 "$here/tests/lib/gen-image.py" "$w" "$n" --asm
as "$w/gen.s" -o "$w/gen.o"
ld -T "$w/vmlinux.lds" "$w/gen.o" -o "$w/vmlinux"
ls -l "$w/vmlinux" | awk '{print "image: " $5 " bytes"}'
TIMEFORMAT='%R'
wall() { { time "$@" >/dev/null 2>&1; } 2>&1; }
ratios=()
for r in $(seq "$rounds"); do
	cp "$w/vmlinux" "$w/work"
	sync
	c=$(wall cp "$w/vmlinux" "$w/copy")
	s=$(wall "$op" sort "$w/work")
	ratios+=("$(echo "scale=2; $s / $c" | bc)")
	echo "  round $r: cp ${c}s, objpatch sort ${s}s"
	sync
	r=$(wall rm -f "$w/copy")
	echo "           (rm of the synced copy ${r}s: what replacing the image frees)"
done
"$op" check "$w/work" >/dev/null && echo "sorted image: check clean"
med=$(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(( (rounds + 1) / 2 ))p")
echo "objpatch sort / cp = $med (median of $rounds, $n entries; goal <= 3)"
