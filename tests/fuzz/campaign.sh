#!/usr/bin/env bash
# A fuzzing campaign: each libFuzzer harness of BUILD_DIR runs for SECONDS
# with JOBS processes (default: the cores), on a working corpus under
# $MCLOC_FUZZ_WORK (default ~/.cache/mcloc-fuzz/NAME) that starts from the
# saved one, tests/fuzz/corpus/NAME.  At the end, the inputs that reach
# code no saved input reaches are merged into the saved corpus (what make
# check replays), and crashes are in tests/fuzz/crashes/NAME.  Prints per
# harness the executions, the coverage (edges, libFuzzer's "cov") and the
# crash files, and appends the same line to $MCLOC_FUZZ_WORK/log.
# Usage: campaign.sh BUILD_DIR [SECONDS [JOBS [HARNESS...]]]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: campaign.sh BUILD_DIR [SECONDS [JOBS [HARNESS...]]]}" && pwd)
secs=${2:-600} jobs=${3:-$(nproc)}
shift $(( $# < 3 ? $# : 3 ))
names=("$@")
[ ${#names[@]} -gt 0 ] || names=($(cd "$build/tests/fuzz" && ls fuzz-* | sed 's/^fuzz-//'))
work=${MCLOC_FUZZ_WORK:-$HOME/.cache/mcloc-fuzz}
mkdir -p "$work"
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

for name in "${names[@]}"; do
	fz=$build/tests/fuzz/fuzz-$name
	saved=$here/corpus/$name crashes=$here/crashes/$name wc=$work/$name
	mkdir -p "$saved" "$crashes" "$wc"
	cp -n "$saved"/* "$wc"/ 2>/dev/null || true
	log=$work/$name.$(date +%Y%m%d-%H%M%S).log
	export MCLOC_FUZZ_LOG=$log.harness
	# The tools print a diagnostic per bad input: their standard error
	# is closed.  The runtime's harnesses print little, and say why they
	# abort there, which a crash's log then shows.
	mask=3 timeout=10
	case $name in tables) mask=1 ;; control) mask=1 timeout=30 ;; esac
	"$fz" "$wc" -dict="$here/elf.dict" -max_total_time="$secs" -fork="$jobs" \
		-ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
		-artifact_prefix="$crashes/" -max_len=65536 -timeout=$timeout -rss_limit_mb=3072 \
		-close_fd_mask=$mask > "$log" 2>&1 || true
	# -fork's status lines: "#N: cov: C ft: F corp: ... exec/s: E ..."
	last=$(grep -E '^#[0-9]+: cov: ' "$log" | tail -1)
	execs=$(sed -E 's/^#([0-9]+):.*/\1/' <<<"$last")
	edges=$(sed -E 's/.* cov: ([0-9]+) .*/\1/' <<<"$last")
	# Keep what reaches new edges in the saved corpus (edges only, as
	# minimize.sh keeps it: hit counts would grow it back to megabytes).
	"$fz" -merge=1 -use_counters=0 -close_fd_mask=3 "$saved" "$wc" > "$log.merge" 2>&1 || true
	line=$(printf '%s %-14s %6ss x%s: executions %s, edges %s, crash files %s, saved inputs %s' \
		"$(date -u +%F)" "$name" "$secs" "$jobs" "${execs:-?}" "${edges:-?}" \
		"$(find "$crashes" -type f ! -name ".*" | wc -l)" "$(ls "$saved" | wc -l)")
	echo "$line" | tee -a "$work/log"
done
