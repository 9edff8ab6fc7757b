#!/usr/bin/env bash
# `objpatch sort --kernel`, atomic and --in-place, against the kernel's
# own scripts/sorttable, on a real kernel: Debian's linux-source-6.1 (the
# default) or linux-source-6.12 built for x86_64 as tinyconfig plus
# function tracing, ORC and KASLR (so __mcount_loc, __ex_table, the ORC
# tables and --emit-relocs are all there), each cached in its own
# directory, ${MCLOC_KERNEL_CACHE:-~/.cache/mcloc-kernel}/VERSION (the
# first run builds it: about ten minutes on two cores).  The build's own
# sorttable is wrapped so that the image it is given, before sorting, is
# kept, with what it reads beside it (6.1: System.map; 6.12: the nm -S
# file of its -s): both tools then sort copies of that same image.
#
# Prints whether each mode's output is byte-identical to sorttable's,
# what check --kernel and inspect say of sorttable's output, then the
# CPU-time ratios ours/sorttable (user + system, children included: 6.1's
# sorttable runs `grep | awk` through popen() twice to read
# __start/__stop_mcount_loc from System.map, and those processes are part
# of its cost), the median of ROUNDS alternating rounds of REPS runs each.
# Goal: at most 0.5 for --in-place.  The drop-in (objpatch sorttable -i,
# given sorttable's own arguments, -s nm-sort on 6.12) is timed too: it
# reads the nm -S listing sorttable reads, where sort --kernel makes one
# from the image's symbols.
#
# Floors are timed in the same rounds.  The atomic sort writes a new file
# and renames it over the old one (a tool stopped half-way leaves the old
# image): "replace" is that alone, with no sorting, a copy of the image to
# a temporary name and a mv over the old file.  --in-place writes only
# the changed bytes, as sorttable does through mmap: its floor is
# objpatch's own start-up ("objpatch --version").  6.1: "lookups" is
# sorttable's two popen() pipelines alone; 6.12: "nm -S" is the listing
# link-vmlinux.sh makes for sorttable -s (not counted in its figure).
# Not a test: it asserts nothing.
# Usage: sorttable-bench.sh [6.1|6.12] [ROUNDS [REPS]]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
op=${OBJPATCH:-$here/build/objpatch/objpatch}
ver=6.1
case ${1:-} in 6.*) ver=$1; shift ;; esac
rounds=${1:-5} reps=${2:-10}
src=$(ls /usr/src/linux-source-"$ver".tar.* 2>/dev/null | head -1 || true)
[ -n "$src" ] || { echo "skipped: linux-source-$ver is not installed (apt-get install linux-source-$ver)"; exit 0; }
cache=${MCLOC_KERNEL_CACHE:-$HOME/.cache/mcloc-kernel}/$ver
k=$cache/linux-source-$ver

# The build's sorttable, wrapped: keep the image it is given (its last
# argument) and what it reads beside it (6.1: System.map from the current
# directory; 6.12: the `nm -S` file of -s, which link-vmlinux.sh deletes
# afterwards), then sort.
wrap_sorttable() {
	mv "$k/scripts/sorttable" "$cache/sorttable"
	cat > "$k/scripts/sorttable" <<EOF
#!/bin/sh
for img; do :; done
if [ "\$1" = -s ]; then cp "\$2" "$cache/nm-sort"; fi
if [ -f System.map ]; then cp System.map "$cache/System.map"; fi
cp "\$img" "$cache/vmlinux.presort.tmp" && mv "$cache/vmlinux.presort.tmp" "$cache/vmlinux.presort"
exec "$cache/sorttable" "\$@"
EOF
	chmod +x "$k/scripts/sorttable"
}

if [ ! -f "$cache/vmlinux.built" ]; then
	echo "building a tinyconfig x86_64 $ver kernel with FTRACE and ORC in $k (once)..."
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
	wrap_sorttable
	mk vmlinux
	cp "$k/vmlinux" "$cache/vmlinux.built.tmp" && mv "$cache/vmlinux.built.tmp" "$cache/vmlinux.built"
fi
# sorttable's command line for an image in the bench's directory.
st=("$cache/sorttable")
# objpatch's drop-in for it, in place (-i): sorttable's own arguments and
# inputs, its own way of writing.
drop=("$op" sorttable -i)
[ ! -f "$cache/nm-sort" ] || { st+=(-s nm-sort); drop+=(-s nm-sort); }

w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
# What sorttable reads beside the image, from the current directory.
for f in System.map nm-sort; do [ ! -f "$cache/$f" ] || cp "$cache/$f" "$w/$f"; done
pre=$cache/vmlinux.presort
printf 'image (%s): %s bytes; ' "$ver" "$(stat -c %s "$pre")"
"$op" inspect "$pre" | sed -n 's/^\(summary\|__ex_table\|\.orc_unwind_ip\): //p' | paste -sd';' - || true

# The same bytes, from both modes?
for o in theirs ours ours-in-place drop-in; do cp "$pre" "$w/$o"; done
(cd "$w" && "${st[@]}" theirs)
"$op" sort --kernel "$w/ours" || true
"$op" sort --kernel --in-place "$w/ours-in-place" || true
(cd "$w" && "${drop[@]}" drop-in) || true
for o in ours ours-in-place drop-in; do
	case $o in
	ours) mode="sort --kernel" ;;
	ours-in-place) mode="sort --kernel --in-place" ;;
	*) mode="${drop[*]:1}" ;;
	esac
	if cmp -s "$w/theirs" "$w/$o"; then
		echo "byte-identical: yes (objpatch $mode and the $ver sorttable, same pre-sort vmlinux)"
	else
		echo "byte-identical: NO, objpatch $mode ($(cmp "$w/theirs" "$w/$o" 2>&1 | head -1))"
	fi
done
cmp -s "$w/theirs" "$cache/vmlinux.built" && echo "  (and sorttable's is the vmlinux the kernel build made)"
# What check --kernel and inspect say of sorttable's output.
for c in "check --kernel" inspect; do
	if out=$("$op" $c "$w/theirs" 2>&1); then
		echo "$c on sorttable's output: clean"
	else
		echo "$c on sorttable's output: FAILS ($(printf '%s\n' "$out" | wc -l) lines; first: $(printf '%s\n' "$out" | head -1))"
	fi
done

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
	# What 6.1's sorttable's System.map lookups cost by themselves: the
	# same two popen()ed pipelines, run as it runs them.  (6.12's reads
	# the image's own symbol table instead.)
	sh -c " grep start_mcount System.map | awk '{print \$1}' " >/dev/null
	sh -c " grep stop_mcount System.map | awk '{print \$1}' " >/dev/null
}
nmlist() {
	# What link-vmlinux.sh runs to feed 6.12's sorttable -s (sort
	# --kernel reads the image's own symbols instead): not in sorttable's
	# figure, timed beside it.
	nm -S "$1" >/dev/null
}
start() {
	# objpatch's start-up and exit, with no file opened: the floor of
	# --in-place, which copies nothing.
	"$op" --version >/dev/null
}
r() { echo "scale=3; $1 / $2" | bc; }
ratios=() ipratios=() dratios=() floors=() looks=() starts=()
for i in $(seq "$rounds"); do
	o=$(cpu "$op" sort --kernel)
	p=$(cpu "$op" sort --kernel --in-place)
	d=$(cpu "${drop[@]}")
	t=$(cpu "${st[@]}")
	f=$(cpu replace)
	s=$(cpu start)
	ratios+=("$(r "$o" "$t")") ipratios+=("$(r "$p" "$t")") dratios+=("$(r "$d" "$t")")
	floors+=("$(r "$f" "$t")") starts+=("$(r "$s" "$t")")
	l=
	if [ "$ver" = 6.1 ]; then
		l=$(cpu lookups)
		looks+=("$(r "$l" "$t")")
		l=" (its System.map lookups alone ${l}s)"
	else
		l=$(cpu nmlist)
		looks+=("$(r "$l" "$t")")
		l=" (plus nm -S before it ${l}s)"
	fi
	printf '  round %d: ours %.3fs, ours --in-place %.3fs, drop-in -i %.3fs, sorttable %.3fs%s, replace alone %.3fs, objpatch --version %.3fs (CPU, %d runs each)\n' \
		"$i" "$o" "$p" "$d" "$t" "$l" "$f" "$s" "$reps"
done
[ "$rounds" -gt 0 ] || exit 0
med() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
if [ "$ver" = 6.1 ]; then
	echo "sorttable's System.map lookups / sorttable = $(med "${looks[@]}") (median)"
else
	echo "nm -S (link-vmlinux.sh's step before sorttable -s; not counted) / sorttable = $(med "${looks[@]}") (median)"
fi
echo "floor of the atomic sort: replace (cp + mv over the image, no sorting) / sorttable = $(med "${floors[@]}") (median)"
echo "floor of --in-place: objpatch --version (start-up alone) / sorttable = $(med "${starts[@]}") (median)"
echo "ours/sorttable = $(med "${ratios[@]}") CPU, atomic sort (median of $rounds rounds of $reps runs)"
echo "ours --in-place/sorttable = $(med "${ipratios[@]}") CPU (median of $rounds rounds of $reps runs; goal <= 0.5)"
echo "ours as the drop-in, ${drop[*]:1}/sorttable = $(med "${dratios[@]}") CPU (the same inputs as sorttable; goal <= 0.5)"
