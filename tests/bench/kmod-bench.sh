#!/usr/bin/env bash
# Benchmark recordmcount against the kernel's own (linux-kbuild-6.1) on the
# Debian amd64 module corpus that kmod-oracle caches.  Not a test: prints
# ratios measured in this run.
#   per-module: one process per module, as a Makefile runs it
#   batch:      all modules in one process
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
tool=${RECORDMCOUNT:-$here/build/recordmcount/recordmcount}
peer=$(ls /usr/lib/linux-kbuild-*/scripts/recordmcount | sort -V | tail -1)
corpus=${MCLOC_KMOD_CACHE:-$HOME/.cache/mcloc-kmod}/amd64/stripped
limit=${1:-1000}
[ -d "$corpus" ] || { echo "no corpus: run ../shared/oracle/kmod-oracle --arch amd64 --limit 1 -- true"; exit 2; }
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
mapfile -t mods < <(ls "$corpus" | sort | head -n "$limit")
fresh() { rm -rf "$w/m"; mkdir "$w/m"; for m in "${mods[@]}"; do cp "$corpus/$m" "$w/m/"; done; }
TIMEFORMAT='%R %U %S'
t() { { time "$@" >/dev/null 2>&1; } 2>&1; }
for mode in per-module batch; do
	for round in 1 2 3; do
		fresh; if [ $mode = batch ]; then read -r wo uo so < <(t "$tool" --kernel "$w"/m/*)
		else read -r wo uo so < <(t bash -c 'for m in "$@"; do "$0" --kernel "$m"; done' "$tool" "$w"/m/*); fi
		fresh; if [ $mode = batch ]; then read -r wp up sp < <(t "$peer" "$w"/m/*)
		else read -r wp up sp < <(t bash -c 'for m in "$@"; do "$0" "$m"; done' "$peer" "$w"/m/*); fi
		echo "$mode round $round: ours ${wo}s wall, kernel ${wp}s wall; ours/kernel recordmcount = $(echo "scale=2; $wo / $wp" | bc)"
	done
done
