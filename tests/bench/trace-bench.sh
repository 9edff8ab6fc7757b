#!/usr/bin/env bash
# The cost of recording a traced call, ours against uftrace's `record`,
# on the same program in the same run: one thread calls an empty function
# N times and measures its own loop (clock_gettime around it), built
#   - plain (-O2): the floor, an untraced call;
#   - for uftrace (-pg -mfentry, calls kept), run under `uftrace record`;
#   - for us (-pg -mfentry, recordmcount, objpatch link --nop --runtime),
#     traced by `mcloc trace PID function_graph` (an event at entry and one
#     at exit, as uftrace records) and by `mcloc trace PID function`.
# The rings are made big enough to hold every event (64 MiB), so nothing
# is dropped: a dropped event would cost less than a recorded one.
# Prints, per tracer, ns per traced call above the plain build, and the
# ratio ours/uftrace (median of ROUNDS alternating rounds); goal: at most
# 0.5.  Also events per second recorded by the one thread, and a floor:
# MCLOC_TRACER=profile, which takes the same path (the trampoline, the
# return hook, a timestamp at entry and at exit) and records no event;
# and trace-floor.c, the least any tracer that hooks returns does.  And
# function_graph once more with the reader paused (see ours() below).
# Not a test.
# Usage: trace-bench.sh [N [ROUNDS]]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${MCLOC_BUILD:-$here/build}
rc=$build/recordmcount/recordmcount op=$build/objpatch/objpatch
lib=$build/libmcloc/libmcloc.so mcloc=$build/mcloc/mcloc
n=${1:-500000} rounds=${2:-5}
command -v uftrace >/dev/null || { echo "skipped: uftrace is not installed (apt-get install uftrace)"; exit 0; }
w=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$w"' EXIT
export XDG_RUNTIME_DIR=$w/run
mkdir -m 700 "$XDG_RUNTIME_DIR"

cat > "$w/tb.c" <<'EOF'
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) int leaf(int x) { __asm__ volatile(""); return x + 1; }
/* N [wait]: with "wait", print "ready" and wait for SIGUSR1 first. */
int main(int argc, char **argv)
{
	long n = atol(argv[1]);
	struct timespec a, b;
	int s = 0;

	if (argc > 2) {
		sigset_t set;
		int sig;

		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		sigprocmask(SIG_BLOCK, &set, NULL);
		printf("ready\n");
		fflush(stdout);
		sigwait(&set, &sig);
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++)
		s += leaf((int)i);
	clock_gettime(CLOCK_MONOTONIC, &b);
	printf("%.3f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
	return s == 42;
}
EOF
cc -O2 "$w/tb.c" -o "$w/plain"
cc -O2 "$here/tests/bench/trace-floor.c" -o "$w/floor"
cc -O2 -pg -mfentry "$w/tb.c" -o "$w/uft"
cc -O2 -pg -mfentry -c "$w/tb.c" -o "$w/tb.o"
"$rc" "$w/tb.o"
"$op" link --nop --runtime -- cc "$w/tb.o" -o "$w/ours"

# ours TRACER [paused]: ns per call of the loop, traced by mcloc trace;
# "paused": with mcloc stopped (SIGSTOP) until the program has exited,
# when it formats everything.  The traced thread's cost without a reader
# formatting text beside it: on a VM whose two vCPUs share a core, that
# reader's work slows the traced thread (a printf loop on the other vCPU
# makes the hooked-call floor of a hand-written trampoline 25% slower).
ours() {
	env LD_PRELOAD="$lib" MCLOC_CONTROL=1 "$w/ours" "$n" wait > "$w/out" &
	local pid=$!
	until [ -S "$XDG_RUNTIME_DIR/mcloc/$pid" ] && grep -q ready "$w/out"; do sleep 0.01; done
	"$mcloc" trace "$pid" "$1" --filter leaf --buffer 65536 --rings 4 > "$w/trace" 2> "$w/trace.err" &
	local tp=$!
	until "$mcloc" list | grep -Eq "^$pid .* $1\$"; do sleep 0.01; done
	[ "${2:-}" != paused ] || kill -STOP "$tp"
	kill -USR1 "$pid"
	wait "$pid"
	[ "${2:-}" != paused ] || kill -CONT "$tp"
	wait "$tp"
	if [ -s "$w/trace.err" ]; then cat "$w/trace.err" >&2; fi
	tail -1 "$w/out"
}
theirs() {
	(cd "$w" && uftrace record --no-libcall -d "$w/ut" ./uft "$n" | tail -1)
}
plain() { "$w/plain" "$n"; }
hook() {
	env LD_PRELOAD="$lib" MCLOC_TRACER=profile MCLOC_FILTER=leaf MCLOC_OUTPUT=/dev/null \
		"$w/ours" "$n"
}

g_ratios=() f_ratios=() h_ratios=() q_ratios=() z_ratios=() rows=()
for r in $(seq "$rounds"); do
	p=$(plain) u=$(theirs) g=$(ours function_graph) f=$(ours function) h=$(hook)
	q=$(ours function_graph paused) z=$("$w/floor" "$n")
	# the traces are whole: every call there
	calls=$(grep -c 'leaf()\?;\| leaf <-' "$w/trace" || true)
	ug=$(echo "$u - $p" | bc -l) og=$(echo "$g - $p" | bc -l) of=$(echo "$f - $p" | bc -l)
	oh=$(echo "$h - $p" | bc -l) oq=$(echo "$q - $p" | bc -l)
	g_ratios+=("$(echo "scale=3; $og / $ug" | bc -l)")
	f_ratios+=("$(echo "scale=3; $of / $ug" | bc -l)")
	h_ratios+=("$(echo "scale=3; $oh / $ug" | bc -l)")
	q_ratios+=("$(echo "scale=3; $oq / $ug" | bc -l)")
	z_ratios+=("$(echo "scale=3; $z / $ug" | bc -l)")
	printf '  round %d: plain %.2f ns/call; uftrace record +%.1f; mcloc function_graph +%.1f (reader paused +%.1f), function +%.1f; floors: profile (hook, no event) +%.1f, hand-written hook +%.1f (last trace: %d calls of %d)\n' \
		"$r" "$p" "$ug" "$og" "$oq" "$of" "$oh" "$z" "$calls" "$n"
	rows+=("$og")
done
med() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
mg=$(med "${rows[@]}")
echo "events per second recorded by one thread (function_graph, 2 per call): $(echo "2 * 1000000000 / ($mg + $(plain))" | bc)"
echo "floor: a hand-written return hook with its two events (trace-floor.c)/uftrace record = $(med "${z_ratios[@]}") (median)"
echo "floor: the return hook without events (profile)/uftrace record = $(med "${h_ratios[@]}") (median)"
echo "ours function/uftrace record = $(med "${f_ratios[@]}") per traced call (median of $rounds)"
echo "ours function_graph/uftrace record = $(med "${g_ratios[@]}") per traced call (median of $rounds; goal <= 0.5)"
echo "ours function_graph, reader paused/uftrace record = $(med "${q_ratios[@]}") (median)"
