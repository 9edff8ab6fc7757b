#!/usr/bin/env bash
# `objpatch sort --kernel` against the kernel's own scripts/sorttable, on
# a real kernel: Debian's linux-source-6.1 built for x86_64 as tinyconfig
# plus function tracing, ORC and KASLR (so __mcount_loc, __ex_table, the
# ORC tables and --emit-relocs are all there), cached in
# ${MCLOC_KERNEL_CACHE:-~/.cache/mcloc-kernel} (the first run builds it:
# about ten minutes on two cores).  The build's own sorttable is wrapped so
# that the image it is given, before sorting, is kept: both tools then
# sort copies of that same pre-sort vmlinux.
#
# Prints whether the two outputs are byte-identical, then the CPU-time
# ratio ours/sorttable (user + system, children included: sorttable runs
# `grep | awk` through popen() twice to read __start/__stop_mcount_loc
# from System.map, and those processes are part of its cost), the median
# of ROUNDS alternating rounds of REPS runs each.  Goal: at most 0.5.
#
# Two floors are timed in the same rounds.  sorttable edits the image in
# place through mmap; objpatch never does (a tool stopped half-way would
# leave a torn kernel): it writes a new file and renames it over the old
# one.  "replace" is that alone, with no sorting: a copy of the image to
# a temporary name and a mv over the old file (the kernel copies the
# pages, and frees the old file's).  "lookups" is sorttable's two popen()
# pipelines alone.  Not a test: it asserts nothing.
# Usage: sorttable-bench.sh [ROUNDS [REPS]]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
op=${OBJPATCH:-$here/build/objpatch/objpatch}
rounds=${1:-5} reps=${2:-10}
src=$(ls /usr/src/linux-source-6.1.tar.* 2>/dev/null | head -1 || true)
[ -n "$src" ] || { echo "skipped: linux-source-6.1 is not installed (apt-get install linux-source-6.1)"; exit 0; }
cache=${MCLOC_KERNEL_CACHE:-$HOME/.cache/mcloc-kernel}
k=$cache/linux-source-6.1

if [ ! -f "$cache/vmlinux.presort" ]; then
	echo "building a tinyconfig x86_64 kernel with FTRACE and ORC in $k (once)..."
	mkdir -p "$cache"
	[ -d "$k" ] || tar -xf "$src" -C "$cache"
	mk() { make -s -C "$k" ARCH=x86_64 -j"$(nproc)" "$@"; }
	mk tinyconfig >/dev/null
	"$k/scripts/config" --file "$k/.config" --enable 64BIT --enable FTRACE \
		--enable FUNCTION_TRACER --enable DYNAMIC_FTRACE --disable UNWINDER_GUESS --enable UNWINDER_ORC \
		--enable RELOCATABLE --enable RANDOMIZE_BASE --enable PRINTK
	mk olddefconfig
	grep -q '^CONFIG_BUILDTIME_MCOUNT_SORT=y' "$k/.config"
	grep -q '^CONFIG_UNWINDER_ORC=y' "$k/.config"
	mk scripts
	# The build's sorttable, wrapped: keep what it is given, then sort.
	mv "$k/scripts/sorttable" "$cache/sorttable"
	cat > "$k/scripts/sorttable" <<EOF
#!/bin/sh
cp "\$1" "$cache/vmlinux.presort.tmp" && cp System.map "$cache/System.map" &&
	mv "$cache/vmlinux.presort.tmp" "$cache/vmlinux.presort"
exec "$cache/sorttable" "\$@"
EOF
	chmod +x "$k/scripts/sorttable"
	mk vmlinux
	cp "$k/vmlinux" "$cache/vmlinux.built"
fi

w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
cp "$cache/System.map" "$w/System.map"	# sorttable reads it from the current directory
pre=$cache/vmlinux.presort
printf 'image: %s bytes; ' "$(stat -c %s "$pre")"
"$op" inspect "$pre" | sed -n 's/^\(summary\|__ex_table\|\.orc_unwind_ip\): //p' | paste -sd';' -

# The same bytes?
cp "$pre" "$w/theirs"; cp "$pre" "$w/ours"
(cd "$w" && "$cache/sorttable" theirs)
"$op" sort --kernel "$w/ours"
if cmp -s "$w/theirs" "$w/ours"; then
	echo "byte-identical: yes (objpatch sort --kernel and the 6.1 sorttable, same pre-sort vmlinux)"
else
	echo "byte-identical: NO ($(cmp "$w/theirs" "$w/ours" | head -1))"
fi
cmp -s "$w/theirs" "$cache/vmlinux.built" && echo "  (and both are the vmlinux the kernel build made)"

TIMEFORMAT='%U %S'
# CPU seconds of REPS runs of a tool, each on a fresh copy (the copy untimed).
cpu() {
	local total=0 u s i
	for i in $(seq "$reps"); do
		cp "$pre" "$w/img"
		read -r u s < <({ time (cd "$w" && "$@" img >/dev/null 2>&1); } 2>&1)
		total=$(echo "$total + $u + $s" | bc)
	done
	echo "$total"
}
replace() {
	cp "$pre" .img.tmp && mv .img.tmp img
}
lookups() {
	# What sorttable's System.map lookups cost by themselves: the same
	# two popen()ed pipelines, run as it runs them.
	sh -c " grep start_mcount System.map | awk '{print \$1}' " >/dev/null
	sh -c " grep stop_mcount System.map | awk '{print \$1}' " >/dev/null
}
ratios=() floors=() looks=()
for r in $(seq "$rounds"); do
	o=$(cpu "$op" sort --kernel)
	t=$(cpu "$cache/sorttable")
	f=$(cpu replace)
	l=$(cpu lookups)
	ratios+=("$(echo "scale=3; $o / $t" | bc)")
	floors+=("$(echo "scale=3; $f / $t" | bc)")
	looks+=("$(echo "scale=3; $l / $t" | bc)")
	printf '  round %d: ours %.3fs, sorttable %.3fs (its System.map lookups alone %.3fs), replace alone %.3fs (CPU, %d runs each)\n' \
		"$r" "$o" "$t" "$l" "$f" "$reps"
done
med() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
echo "sorttable's System.map lookups / sorttable = $(med "${looks[@]}") (median)"
echo "floor: replace (cp + mv over the image, no sorting) / sorttable = $(med "${floors[@]}") (median)"
echo "ours/sorttable = $(med "${ratios[@]}") CPU (median of $rounds rounds of $reps runs; goal <= 0.5)"
