#!/usr/bin/env bash
# Benchmark recordmcount against the kernel's own (linux-kbuild-6.1) on the
# Debian amd64 module corpus that kmod-oracle caches.  Not a test: prints
# wall-time ratios measured in this run, ours and the kernel's tool
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
[ -d "$corpus" ] || { echo "no corpus: run ../shared/oracle/kmod-oracle --arch amd64 --limit 1 -- true"; exit 2; }
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
mapfile -t mods < <(ls "$corpus" | sort | head -n "$limit")
fresh() { rm -rf "$w/m"; mkdir "$w/m"; for m in "${mods[@]}"; do cp "$corpus/$m" "$w/m/"; done; }
TIMEFORMAT='%R'
wall() { { time "$@" >/dev/null 2>&1; } 2>&1; }
each() { local t=$1; shift; for m in "$w"/m/*; do $t "$@" "$m"; done; }
for mode in per-module batch; do
	for flags in "--kernel" "--kernel --in-place"; do
		ratios=()
		for round in $(seq "$rounds"); do
			fresh
			if [ $mode = batch ]; then o=$(wall "$tool" $flags "$w"/m/*); else o=$(wall each "$tool" $flags); fi
			fresh
			if [ $mode = batch ]; then k=$(wall "$peer" "$w"/m/*); else k=$(wall each "$peer"); fi
			ratios+=("$(echo "scale=2; $o / $k" | bc)")
			echo "  $mode $flags round $round: ours ${o}s, kernel ${k}s"
		done
		med=$(printf '%s\n' "${ratios[@]}" | sort -n | sed -n "$(( (rounds + 1) / 2 ))p")
		echo "$mode, recordmcount $flags: ours/kernel recordmcount = $med (median of $rounds, ${#mods[@]} modules)"
	done
done
