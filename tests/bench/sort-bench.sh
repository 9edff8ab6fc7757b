#!/usr/bin/env bash
# `objpatch sort` on a vmlinux-like image with 1,000,000 table entries,
# against `cp` of the same file in the same run (tests/lib/gen-image.py
# --asm writes it as assembly, half the functions placed first so the
# table is out of order).  Not a test: prints the ratio; the goal is at
# most 3.  Each round sorts a fresh unsorted copy.
#
# sort replaces the image atomically (temp file, rename), which costs
# more than the copy cp makes: renaming over an existing file makes ext4
# start writing the new file back at once (auto_da_alloc, its guard
# against zero-length files after a crash), and freeing the old inode on
# a file system mounted with `discard`, as here, waits for the device
# behind that writeback.  Each round therefore also times that floor by
# itself, with no objpatch at all: cp to a temporary name, then mv over a
# synced copy ("replace").  sort's own work is what it adds to that.
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
ratios=() floors=()
for r in $(seq "$rounds"); do
	cp "$w/vmlinux" "$w/work"
	cp "$w/vmlinux" "$w/old"
	sync
	c=$(wall cp "$w/vmlinux" "$w/copy")
	s=$(wall "$op" sort "$w/work")
	sync
	f=$(wall sh -c "cp '$w/vmlinux' '$w/new' && mv '$w/new' '$w/old'")
	ratios+=("$(echo "scale=2; $s / $c" | bc)")
	floors+=("$(echo "scale=2; $f / $c" | bc)")
	echo "  round $r: cp ${c}s, objpatch sort ${s}s, replace (cp + mv over a file) ${f}s"
	sync
	rm -f "$w/copy" "$w/old"
done
"$op" check "$w/work" >/dev/null && echo "sorted image: check clean"
med=$(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(( (rounds + 1) / 2 ))p")
fmed=$(printf '%s\n' "${floors[@]}" | sort -n | sed -n "$(( (rounds + 1) / 2 ))p")
echo "replace (cp + mv over a file) / cp = $fmed (the atomic replace alone, median)"
echo "objpatch sort / cp = $med (median of $rounds, $n entries; goal <= 3)"
