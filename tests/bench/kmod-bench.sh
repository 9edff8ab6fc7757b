#!/usr/bin/env bash
# Benchmark recordmcount against the kernel's own (linux-kbuild-6.1) on the
# Debian amd64 module corpus (tests/corpus/fetch.sh).  Not a test: prints
# CPU-time (user + system) and wall-time ratios measured in this run, ours
# and the kernel's tool
# alternating within each round (the file system's state drifts as a run
# creates and deletes thousands of inodes, so compare within a round).
#   per-module: one process per module, as a Makefile runs it
#   batch:      all modules in one process
# each in the default (temp file + rename) and --in-place write modes.
# Usage: kmod-bench.sh [NMODULES [ROUNDS]]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tool=${RECORDMCOUNT:-$here/build/recordmcount/recordmcount}
peer=$(ls /usr/lib/linux-kbuild-*/scripts/recordmcount | sort -V | tail -1)
corpus=${MCLOC_KMOD_CACHE:-$HOME/.cache/mcloc-kmod}/amd64/stripped
limit=${1:-1000} rounds=${2:-3}
[ -d "$corpus" ] || { echo "no corpus: run tests/corpus/fetch.sh amd64"; exit 2; }
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
floor=()
mapfile -t mods < <(ls "$corpus" | sort | head -n "$limit")
fresh() { rm -rf "$w/m"; mkdir "$w/m"; for m in "${mods[@]}"; do cp "$corpus/$m" "$w/m/"; done; }
TIMEFORMAT='%R %U %S'
# "WALL CPU" of a command (CPU: user + system of it and its children).
timed() { local r u s; read -r r u s < <({ time "$@" >/dev/null 2>&1; } 2>&1); echo "$r $(echo "$u + $s" | bc)"; }
each() { local t=$1; shift; for m in "$w"/m/*; do $t "$@" "$m"; done; }
# The floor of the ordinary build, measured in the same run: Debian ships
# Zydis only as a shared library, so every exec of recordmcount also maps
# and relocates libZydis.so, which the kernel's tool (libc only) does not.
# Two empty programs, with and without libZydis, time what that costs.
printf 'int main(void) { return 0; }\n' > "$w/e.c"
cc -O2 "$w/e.c" -o "$w/e_libc"
cc -O2 "$w/e.c" -o "$w/e_zydis" -Wl,--no-as-needed -lZydis
execs() { local i; for i in $(seq "${#mods[@]}"); do "$1"; done; }
for round in $(seq "$rounds"); do
	read -r _ zc <<<"$(timed execs "$w/e_zydis")"
	read -r _ lc <<<"$(timed execs "$w/e_libc")"
	echo "  floor round $round: empty program ${lc}s cpu, with libZydis.so ${zc}s cpu (${#mods[@]} execs each)"
	floor+=("$(echo "scale=1; ($zc - $lc) * 1000000 / ${#mods[@]}" | bc)")
done
fm=$(printf '%s\n' "${floor[@]}" | sort -n | sed -n "$(( (rounds + 1) / 2 ))p")
echo "floor: loading libZydis.so costs $fm us of CPU per exec (median of $rounds)"

for mode in per-module batch; do
	for flags in "--kernel" "--kernel --in-place"; do
		walls=() cpus=()
		for round in $(seq "$rounds"); do
			fresh
			if [ $mode = batch ]; then o=$(timed "$tool" $flags "$w"/m/*); else o=$(timed each "$tool" $flags); fi
			fresh
			if [ $mode = batch ]; then k=$(timed "$peer" "$w"/m/*); else k=$(timed each "$peer"); fi
			read -r ow oc <<<"$o"
			read -r kw kc <<<"$k"
			walls+=("$(echo "scale=3; $ow / $kw" | bc)")
			cpus+=("$(echo "scale=3; $oc / $kc" | bc)")
			echo "  $mode $flags round $round: ours ${ow}s wall ${oc}s cpu, kernel ${kw}s wall ${kc}s cpu"
		done
		mid=$(( (rounds + 1) / 2 ))
		cm=$(printf '%s\n' "${cpus[@]}" | sort -n | sed -n "${mid}p")
		wm=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n "${mid}p")
		echo "$mode, recordmcount $flags: ours/kernel recordmcount = $cm CPU, $wm wall (median of $rounds, ${#mods[@]} modules)"
	done
done
