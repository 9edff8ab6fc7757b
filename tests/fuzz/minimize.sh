#!/usr/bin/env bash
# Shrink each saved corpus, tests/fuzz/corpus/NAME, to the seed inputs
# (seeds.sh) and the fewest other inputs that reach every edge the whole
# corpus reaches: libFuzzer's -merge=1 into a copy of the seeds, counting
# edges only (-use_counters=0: an input that only runs a loop more times
# adds nothing).  Prints, per harness, the files, bytes, edges (libFuzzer's
# "cov") and features ("ft", hit counts included) before and after, as
# the harness reports them replaying the corpus (-runs=0).
# Usage: minimize.sh BUILD_DIR [HARNESS...]   (BUILD_DIR as for campaign.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: minimize.sh BUILD_DIR [HARNESS...]}" && pwd)
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=($(cd "$build/tests/fuzz" && ls fuzz-* | sed 's/^fuzz-//'))
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT

# replay DIR: "cov ft" as the harness reports them after replaying DIR.
replay() {
	"$fz" "${opts[@]}" -runs=0 "$1" 2>&1 | grep -E '^#[0-9]+.*INITED' | tail -1 |
		sed -E 's/.* cov: ([0-9]+) ft: ([0-9]+) .*/\1 \2/'
}

# measure DIR: its files, bytes, edges and features.
measure() {
	local r
	r=($(replay "$1"))
	printf '%s files, %s bytes, cov %s, ft %s' "$(ls "$1" | wc -l)" "$(cat "$1"/* | wc -c)" \
		"${r[0]}" "${r[1]}"
}

for name in "${names[@]}"; do
	fz=$build/tests/fuzz/fuzz-$name saved=$here/corpus/$name min=$w/$name
	mask=3 timeout=10
	case $name in tables) mask=1 ;; control) mask=1 timeout=30 ;; esac
	opts=(-close_fd_mask=$mask -timeout=$timeout -rss_limit_mb=3072)
	before=$(measure "$saved")
	want=$(replay "$saved" | cut -d' ' -f1)
	mkdir "$min"
	cp "$saved"/seed-* "$min"/ 2>/dev/null || true
	"$fz" "${opts[@]}" -merge=1 -use_counters=0 "$min" "$saved" > "$w/$name.log" 2>&1 ||
		{ echo "$name: the merge failed:"; tail -5 "$w/$name.log"; exit 1; }
	# An edge that only the whole corpus reaches, by the state one input
	# leaves to the next (libmcloc's pool of names), can be lost: add
	# back the smallest inputs that raise the edges until they match.
	got=$(replay "$min" | cut -d' ' -f1)
	for f in $(ls -Sr "$saved"); do
		[ "$got" -lt "$want" ] || break
		[ ! -e "$min/$f" ] || continue
		cp "$saved/$f" "$min/"
		n=$(replay "$min" | cut -d' ' -f1)
		if [ "$n" -gt "$got" ]; then got=$n; else rm "$min/$f"; fi
	done
	after=$(measure "$min")
	rm -f "$saved"/*
	cp "$min"/* "$saved"/
	printf '%-13s before: %s\n%-13s after:  %s\n' "$name" "$before" "" "$after"
done
