#!/usr/bin/env bats
# The control channel: a multi-threaded program (fixtures/runtime/served.c)
# runs with MCLOC_CONTROL=1 while the mcloc command, and a raw client
# written apart from it (tests/lib/control-client.py), talk to it.  Each
# test uses its own XDG_RUNTIME_DIR, so that sockets of other runs never
# mix in.

load helpers

RT=$SRC/tests/fixtures/runtime
CLIENT="$PY $SRC/tests/lib/control-client.py"

setup() {
	# (The programs link libmcloc, sanitized in the sanitized build, and
	# they with it, so that ASan and UBSan watch the control channel and
	# the rings from both ends: mcloc is that build's too.)
	runtime_setup
	traced_c served "$RT/served.c" -lpthread
}

# traced_c NAME SOURCE [LINK ARGS]: $T/NAME from SOURCE (C or C++, by its
# suffix), -pg -mfentry, recordmcount, objpatch link --nop --runtime,
# linked with libmcloc.
traced_c() {
	local name=$1 src=$2 cc=cc
	shift 2
	case $src in *.cc) cc=g++ ;; esac
	$cc -O1 -pg -mfentry "${SAN[@]}" -I"$SRC/include" -c "$src" -o "$T/$name.o"
	"$RECORDMCOUNT" "$T/$name.o"
	"$OBJPATCH" link --nop --runtime -- $cc "${SAN[@]}" "$T/$name.o" -o "$T/$name" \
		"$@" -L"$LIBDIR" -lmcloc
}

teardown() {
	# (A fake server or client left by a failed test would hold bats'
	# output open: bats would wait for it forever.)
	local p
	for p in "${PID:-}" "${CPID:-}" "${FP:-}" "${CP:-}"; do
		[ -z "$p" ] || kill -KILL "$p" 2>/dev/null || true
	done
}

# start_served [VAR=VALUE...]: the program in the background, with control
# on and the environment given; PID, once its socket is there and its
# threads run (the socket comes first: control starts when libmcloc loads,
# before the program's own image registers).
start_served() {
	start_program "$T/served" "$@"
}

# start_program BINARY [VAR=VALUE...]: as start_served, for another program
# that prints "running" when ready.
start_program() {
	local bin=$1
	shift
	env MCLOC_CONTROL=1 "$@" "$bin" \
		>"$T/served.out" 2>"$T/served.err" &
	PID=$!
	for _ in $(seq 200); do
		[ -S "$XDG_RUNTIME_DIR/mcloc/$PID" ] && grep -q running "$T/served.out" && return 0
		sleep 0.05
	done
	echo "no control socket appeared"; cat "$T/served.err"; return 1
}

# stop_served_plain: SIGTERM, for a program that prints no counts.
stop_served_plain() {
	kill -TERM "$PID"
	wait "$PID"
	PID=
}

# stop_served: SIGTERM; it prints its own counts, which must hold together:
# work_a calls work_b once, work_b calls work_rare for one x in ten.
stop_served() {
	kill -TERM "$PID"
	wait "$PID"
	PID=
	a=$(awk '$1 == "work_a" { print $2 }' "$T/served.out")
	b=$(awk '$1 == "work_b" { print $2 }' "$T/served.out")
	r=$(awk '$1 == "work_rare" { print $2 }' "$T/served.out")
	[ -n "$a" ] && [ "$a" -gt 0 ] && [ "$a" = "$b" ]
	[ $(( r * 10 - b )) -le 40 ] && [ $(( b - r * 10 )) -le 40 ]
}

@test "list, funcs, enabled and stats while the program's four threads run" {
	start_served MCLOC_TRACER=function MCLOC_FILTER='work_b' MCLOC_OUTPUT=/dev/null
	run "$MCLOC" list
	assert_success
	assert_line --index 0 --regexp '^PID +COMMAND +IMAGES +FUNCTIONS +ENABLED +TRACER$'
	assert_line --regexp "^$PID +served +[0-9]+ +8 +1 +function\$"
	run "$MCLOC" -j list
	assert_line --partial "{\"pid\":$PID,\"command\":\"served\","
	run "$MCLOC" funcs "$PID"
	assert_success
	assert_equal "$output" "burst_inner
burst_outer
fib
main
work_a
work_b
work_rare
worker"
	run "$MCLOC" funcs "$PID" 'work_[ab]'
	assert_equal "$output" "work_a
work_b"
	# As enabled_functions: only work_b's site is in use, by one ops.
	run "$MCLOC" enabled "$PID"
	assert_success
	assert_output --regexp "^work_b \\(1\\)( R)?( D)?	0x[0-9a-f]+ enabled\$"
	run "$MCLOC" -j enabled "$PID"
	assert_output --partial '"function":"work_b","ops":1,'
	run "$MCLOC" stats "$PID"
	assert_success
	assert_line --regexp '^records +8$'
	assert_line --regexp '^enabled +1$'
	stop_served
}

# trace_start ARGS...: mcloc trace PID ARGS in the background, its output
# in $T/trace.out and $T/trace.err; TP, once the program says it traces.
trace_start() {
	"$MCLOC" trace "$PID" "$@" >"$T/trace.out" 2>"$T/trace.err" &
	TP=$!
	for _ in $(seq 200); do
		"$MCLOC" list | grep -Eq "^$PID .* (function|function_graph)\$" && return 0
		sleep 0.05
	done
	echo "the trace did not start"; cat "$T/trace.err"; return 1
}

# trace_stop: Ctrl-C for mcloc, which stops the tracer and exits 0.
trace_stop() {
	kill -INT "$TP"
	wait "$TP"
}

# trigger SIGNAL WHAT: make the program do WHAT (burst, fib) and wait for it.
trigger() {
	local n
	n=$(grep -c "^$2 " "$T/served.out" || true)
	kill "-$1" "$PID"
	for _ in $(seq 400); do
		[ "$(grep -c "^$2 " "$T/served.out" || true)" -gt "$n" ] && return 0
		sleep 0.05
	done
	echo "no '$2 done'"; return 1
}

# all_sites_off: no site of the program calls anything: none is in use
# (mcloc enabled lists nothing), and every site that was ever enabled (as
# the program lists them) is read back from /proc/PID/mem and decoded,
# and is a 5-byte NOP or parked (x86_64's
# disabled form: the call's first byte made 0xa9, "test $imm32, %eax",
# which does nothing a caller relies on).
all_sites_off() {
	run "$MCLOC" enabled "$PID"
	assert_success
	assert_output ""
	addrs=$($CLIENT sites "$XDG_RUNTIME_DIR/mcloc/$PID")
	[ -z "$addrs" ] && return 0
	run $PY "$SRC/tests/lib/site-bytes.py" "$PID" $addrs
	assert_success
	echo "$output" | awk '$2 !~ /^(0f1f440000|a9)/ { print "a call left: " $0; bad = 1 } END { exit bad }'
}

# tampered.c: spare()'s site holds an int3 libmcloc did not write (as a
# debugger's breakpoint would).  Before, the refusal said strerror(EILSEQ):
# "Invalid or incomplete multibyte or wide character".
@test "a site changed behind libmcloc's back: a trace that needs it is refused whole, saying why; others run" {
	traced_c tampered "$RT/tampered.c"
	start_program "$T/tampered"
	run "$MCLOC" trace "$PID" function --filter spare --duration 0.1
	assert_failure
	assert_output --partial "cannot enable the sites: one does not hold what libmcloc left there (a debugger's breakpoint on it, or another tool's code), so none was changed"
	run "$MCLOC" trace "$PID" function --filter work --duration 0.3
	assert_success
	assert_output --partial "work <-main"
	stop_served_plain
}

@test "trace function: every call of a burst, exactly, from four threads; then every site off" {
	start_served
	trace_start function --filter 'burst_*'
	trigger USR1 burst
	trace_stop
	[ ! -s "$T/trace.err" ] || { cat "$T/trace.err"; false; }
	run head -1 "$T/trace.out"
	assert_output "# tracer: function"
	# Four threads, 1000 calls of burst_outer each, two of burst_inner
	# in each: ftrace's line format, counted exactly.
	[ "$(grep -cE '^ +served-[0-9]+ +\[[0-9]{3}\] +[0-9]+\.[0-9]{6}: burst_outer <-worker$' "$T/trace.out")" -eq 4000 ]
	[ "$(grep -c ': burst_inner <-burst_outer$' "$T/trace.out")" -eq 8000 ]
	[ "$(grep -vc '^#' "$T/trace.out")" -eq 12000 ]
	[ "$(grep -v '^#' "$T/trace.out" | awk '{ print $1 }' | sort -u | wc -l)" -eq 4 ]
	run "$MCLOC" list
	assert_line --regexp "^$PID +served +[0-9]+ +8 +0 +nop\$"
	all_sites_off
	stop_served
}

@test "full rings: dropped or (--overwrite) overwritten events are marked and counted, exactly" {
	start_served
	# 4 KiB rings hold 256 slots: 128 calls of two slots each; a burst
	# writes 3000 per thread long before mcloc reads: most are lost.  What is printed and what is
	# reported lost add up to the 12000 calls, in either mode.
	for mode in drop overwrite; do
		opt=()
		[ "$mode" = drop ] || opt=(--overwrite)
		trace_start function --filter 'burst_*' --buffer 4 "${opt[@]}"
		trigger USR1 burst
		trace_stop
		cat "$T/trace.err"
		calls=$(grep -cE ': burst_(outer|inner) <-' "$T/trace.out")
		if [ "$mode" = drop ]; then
			lost=$(sed -n 's/.*: \([0-9]*\) events lost (rings full.*/\1/p' "$T/trace.err")
			# (said in the trace itself too)
			grep -q "^# $PID: $lost events lost: the rings were full" "$T/trace.out"
		else
			lost=$(sed -n 's/.*: \([0-9]*\) events overwritten before they were read.*/\1/p' "$T/trace.err")
		fi
		[ -n "$lost" ] && [ "$lost" -gt 0 ]
		[ "$calls" -ge 512 ]			# at least a ringful per thread
		[ $(( calls + lost )) -eq 12000 ]
		grep -qE '^ +served-[0-9]+ +\[[0-9]{3}\] \[LOST EVENTS\]$' "$T/trace.out"
		# every other line is a call's
		[ "$(grep -v '^#' "$T/trace.out" | grep -vc 'LOST EVENTS\|: burst_')" -eq 0 ]
	done
	# The graph across gaps: the Chrome file still pairs every begin.
	trace_start function_graph --filter 'burst_*' --buffer 4 --overwrite --chrome "$T/t.json"
	trigger USR1 burst
	trace_stop
	grep -q 'overwritten before they were read' "$T/trace.err"
	$PY - "$T/t.json" <<'EOF'
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
b = collections.Counter(e["tid"] for e in ev if e["ph"] == "B")
e = collections.Counter(e["tid"] for e in ev if e["ph"] == "E")
assert 0 < sum(b.values()) < 12000 and b == e, (b, e)
EOF
	all_sites_off
	stop_served
}

@test "trace function_graph of a recursive call equals its golden file; profile counts exactly" {
	start_served
	trace_start function_graph --filter fib
	trigger USR2 fib
	trace_stop
	[ ! -s "$T/trace.err" ]
	# Durations and CPU numbers vary: masked.
	sed -E 's/^ +[0-9]+\)/ C)/; s/\) [ +!#*@$] +[0-9]+\.[0-9]{3} us \|/)    DURATION     |/' \
		"$T/trace.out" > "$T/graph"
	diff -u "$RT/served-fib.graph" "$T/graph"
	all_sites_off

	trace_start profile --filter 'burst_*'
	trigger USR1 burst
	trace_stop
	run cat "$T/trace.out"
	assert_line --index 0 --regexp '^Function +Hit +Time \(us\) +Avg \(us\) +Self \(us\)$'
	assert_line --regexp '^burst_outer +4000 +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$'
	assert_line --regexp '^burst_inner +8000 '
	# Self time is what the callees' time leaves: below the total.
	awk '$1 == "burst_outer" { exit !($5 < $3) }' "$T/trace.out"
	all_sites_off
	# Per thread, by calls: each worker's own table, its counts exact.
	trace_start profile --filter 'burst_*' --per-thread --sort calls
	trigger USR1 burst
	trace_stop
	[ "$(grep -c '^# thread [0-9]* (served)$' "$T/trace.out")" -eq 4 ]
	[ "$(grep -cE '^burst_inner +2000 ' "$T/trace.out")" -eq 4 ]
	[ "$(grep -cE '^burst_outer +1000 ' "$T/trace.out")" -eq 4 ]
	# (by calls: burst_inner's row before burst_outer's in each table)
	run awk '/^burst_/ { print $1 }' "$T/trace.out"
	assert_equal "$(echo "$output" | paste -sd' ')" \
		"burst_inner burst_outer burst_inner burst_outer burst_inner burst_outer burst_inner burst_outer"
	stop_served
}

@test "trace --graph-function, --max-depth, --tid and -j: what ftrace's options select" {
	start_served
	# Every function traced, but only what fib calls is shown: the four
	# threads' work_a/work_b never appear.
	trace_start function_graph --graph-function fib
	trigger USR2 fib
	trace_stop
	[ "$(grep -cE '\|  +fib\(\)( \{|;)$' "$T/trace.out")" -eq 9 ]
	run grep -c 'work_' "$T/trace.out"
	assert_output 0
	# Two levels of fib(4): fib(4) and its two calls.
	trace_start function_graph --filter fib --max-depth 2
	trigger USR2 fib
	trace_stop
	[ "$(grep -cE '\|  +fib\(\)( \{|;)$' "$T/trace.out")" -eq 3 ]
	# The main thread alone (its id is the pid): fib, and no worker's
	# burst, though both ran.
	trace_start -j function --filter 'fib,burst_outer' --tid "$PID"
	trigger USR2 fib
	trigger USR1 burst
	trace_stop
	$PY - "$T/trace.out" "$PID" <<'EOF'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
assert len(ev) == 9, len(ev)
assert all(e["type"] == "call" and e["function"] == "fib" and e["tid"] == int(sys.argv[2])
           for e in ev), ev[:3]
assert [e["parent"] for e in ev].count("main") == 1
EOF
	stop_served
}

@test "trace function names callers in untraced objects by their .symtab, static functions too" {
	# An untraced library whose static function calls back into the
	# traced program: dladdr() alone would name the exported function
	# before it, or nothing.
	printf '%s\n' '__attribute__((noinline)) static void helper(void (*f)(int), int i) { f(i); f(i + 1); }' \
		'void lib_call(void (*f)(int)) { for (int i = 0; i < 5; i++) helper(f, i); }' > "$T/lib.c"
	cc -O1 -shared -fPIC "$T/lib.c" -o "$T/libx.so"
	printf '%s\n' '#include <signal.h>' '#include <stdio.h>' 'void lib_call(void (*f)(int));' \
		'volatile int sink;' '__attribute__((noinline)) void cb(int i) { sink += i; }' \
		'int main(void) { sigset_t s; int sig; sigemptyset(&s); sigaddset(&s, SIGUSR1);' \
		'  sigaddset(&s, SIGTERM); sigprocmask(SIG_BLOCK, &s, 0); printf("running\n"); fflush(stdout);' \
		'  for (int n = 1; !sigwait(&s, &sig) && sig == SIGUSR1; n++) {' \
		'    lib_call(cb); printf("call %d done\n", n); fflush(stdout); } return 0; }' > "$T/cbmain.c"
	traced_c cbmain "$T/cbmain.c" -L"$T" -lx -Wl,-rpath,"$T"
	start_program "$T/cbmain"
	trace_start function --filter cb
	trigger USR1 call
	trace_stop
	[ "$(grep -c ': cb <-helper$' "$T/trace.out")" -eq 10 ]
	stop_served_plain
}

@test "trace --chrome: valid JSON with one begin and one end per call" {
	start_served
	trace_start function_graph --filter 'burst_*' --chrome "$T/trace.json"
	trigger USR1 burst
	trace_stop
	$PY - "$T/trace.json" <<'EOF'
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
b = collections.Counter((e["tid"], e["name"]) for e in ev if e["ph"] == "B")
e = collections.Counter(e["tid"] for e in ev if e["ph"] == "E")
assert sum(b.values()) == 12000, sum(b.values())
assert sum(n for (tid, name), n in b.items() if name == "burst_outer") == 4000
for tid in set(t for t, _ in b):
    assert sum(n for (t, _), n in b.items() if t == tid) == e[tid], tid
EOF
	stop_served
}

@test "exceptions and longjmps through traced, timed calls: the program's results hold, the graph says where calls were left" {
	traced_c unwind "$RT/unwind.cc"
	start_program "$T/unwind"
	trace_start function_graph --filter 'level*,jump*'
	trigger USR1 round
	trace_stop
	grep -qx "round 1 done: caught 50 jumped 34" "$T/served.out"
	# Each of the 50 throws leaves level3, level2 and level1; each of the
	# 34 longjmps leaves jump3 and jump2 (jump1 returns, from setjmp).
	[ "$(grep -c 'level3(); /\* left early (an exception or longjmp): not timed \*/$' "$T/trace.out")" -eq 50 ]
	[ "$(grep -c '} /\* level1: left early (an exception or longjmp) \*/$' "$T/trace.out")" -eq 50 ]
	[ "$(grep -c 'jump3(); /\* left early' "$T/trace.out")" -eq 34 ]
	[ "$(grep -c '} /\* jump2: left early' "$T/trace.out")" -eq 34 ]
	[ "$(grep -cE '\|  jump1\(\) \{$' "$T/trace.out")" -eq 100 ]
	all_sites_off
	# Traced no more, the program runs as before.
	trigger USR1 round
	grep -qx "round 2 done: caught 50 jumped 34" "$T/served.out"
	kill -TERM "$PID"; wait "$PID"; PID=

	# The profile from the environment times the same calls from the
	# program's start: every call counted, the left ones not timed.
	start_program "$T/unwind" MCLOC_TRACER=profile MCLOC_FILTER='level*,jump*' \
		MCLOC_OUTPUT="$T/prof"
	trigger USR1 round
	kill -TERM "$PID"; wait "$PID"; PID=
	grep -qx "round 1 done: caught 50 jumped 34" "$T/served.out"
	for f in level1 level2 level3 jump1 jump2 jump3; do
		grep -Eq "^$f +100 " "$T/prof" || { cat "$T/prof"; false; }
	done
}

@test "mcloc run --preload adds libmcloc to the user's LD_PRELOAD, after it, where it replaced it" {
	# A library of the user's, preloaded, that says it was loaded into
	# the program (which alone has MCLOC_CONTROL), not into mcloc.
	printf '%s\n' '#include <stdio.h>' '#include <stdlib.h>' \
		'__attribute__((constructor)) static void mark(void)' \
		'{ FILE *f = getenv("MCLOC_CONTROL") ? fopen(getenv("MARK"), "w") : NULL;' \
		'  if (f) fclose(f); }' > "$T/mark.c"
	cc -shared -fPIC "$T/mark.c" -o "$T/libmark.so"
	printf '%s\n' '#include <stdio.h>' \
		'__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }' \
		'int main(void) { printf("fib(5)=%d\n", fib(5)); return 0; }' > "$T/hello.c"
	traced_c hello "$T/hello.c"
	# (In the sanitized build ASan's runtime must stay first: it is the
	# user's preload too.)
	run env LD_PRELOAD="$(san_preload) $T/libmark.so" MARK="$T/mark" \
		"$MCLOC" run profile --preload "$LIBDIR/libmcloc.so" -- "$T/hello"
	assert_success
	assert_line "fib(5)=5"
	assert_line --regexp '^fib +15 '
	[ -e "$T/mark" ]
}

@test "mcloc run -o FILE: the trace in FILE, the program's own output on stdout; a FILE that cannot be written stops it first" {
	printf '%s\n' '#include <stdio.h>' \
		'__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }' \
		'int main(void) { printf("fib(5)=%d\n", fib(5)); return 0; }' > "$T/hello.c"
	traced_c hello "$T/hello.c"
	run "$MCLOC" run function -o "$T/trace" -- "$T/hello"
	assert_success
	assert_output "fib(5)=5"
	run head -1 "$T/trace"
	assert_output "# tracer: function"
	[ "$(grep -c ': fib <-' "$T/trace")" -eq 15 ]
	run "$MCLOC" run function_graph --output "$T/graph" -j -- "$T/hello"
	assert_success
	assert_output "fib(5)=5"
	grep -q '"depth":' "$T/graph"
	# Nothing is started, or asked of a program, when FILE cannot be made.
	run "$MCLOC" run function -o "$T/no/such" -- "$T/hello"
	assert_failure 1
	assert_output "mcloc: $T/no/such: No such file or directory"
	run "$MCLOC" trace 1 function -o "$T/no/such"
	assert_failure 1
	assert_output "mcloc: $T/no/such: No such file or directory"
}

# A program that ends before the program's first clock tick (10 ms), and
# without its destructors, published no clock pair: the live trace
# waited for one and printed nothing, not even a loss.
@test "mcloc run of a program that ends at once, by _exit() or SIGKILL: its calls are shown" {
	traced_c quickexit "$RT/quickexit.c"
	run "$MCLOC" run function -- "$T/quickexit"
	assert_success
	assert_line 5
	[ "$(echo "$output" | grep -cE ' leaf <-')" -eq 2 ]
	run "$MCLOC" run function_graph -- "$T/quickexit" kill
	assert_failure 137
	[ "$(echo "$output" | grep -cE '\|    leaf\(\);$')" -eq 2 ]
	assert_line --regexp '\|  \} /\* main: not returned when the trace ended \*/$'
}

@test "mcloc run traces a program from main() on and exits as it did" {
	printf '%s\n' '#include <stdio.h>' \
		'__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }' \
		'int main(void) { printf("fib(5)=%d\n", fib(5)); return 3; }' > "$T/hello.c"
	traced_c hello "$T/hello.c"
	# (--preload is for programs not linked with libmcloc; this one is,
	# so it changes nothing, but in the sanitized build, where ASan
	# must load first.)
	pre=(--preload "$LIBDIR/libmcloc.so")
	[ -z "${MCLOC_SANITIZED:-}" ] || pre=()
	run "$MCLOC" run function_graph "${pre[@]}" -- "$T/hello"
	assert_equal "$status" 3
	assert_line "fib(5)=5"
	assert_line --regexp '^ +[0-9]+\) +\|  main\(\) \{$'
	# fib(5) is 15 calls, each a leaf line or an opening one.
	[ "$(echo "$output" | grep -cE '\|  +fib\(\)( \{|;)$')" -eq 15 ]
	run "$MCLOC" run profile "${pre[@]}" -- "$T/hello"
	assert_equal "$status" 3
	assert_line --regexp '^fib +15 '
	assert_line --regexp '^main +1 '
	# A program that never offers control: said, and its own status.
	run "$MCLOC" run function -- /bin/true
	assert_failure 1
	assert_output "mcloc: /bin/true: exited before it offered control (is it linked with libmcloc, or given --preload?)"
}

@test "a controller that dies leaves no site enabled within a second" {
	start_served
	trace_start function --filter 'work_*'
	run "$MCLOC" list
	assert_line --regexp "^$PID +served +[0-9]+ +8 +3 +function\$"
	kill -KILL "$TP"
	wait "$TP" || true
	sleep 1
	run "$MCLOC" list
	assert_line --regexp "^$PID +served +[0-9]+ +8 +0 +nop\$"
	all_sites_off
	stop_served
}

# Several controllers at once, each its own session (ftrace's instances):
# its own tracer, filter and rings, and no event of one in another's.
# burst_in_two FIRST -- SECOND: a burst (USR1) of the served program under
# two sessions at once, started with mcloc trace's arguments FIRST (into
# $T/trace.out) and SECOND (into $T/t2.out); both stopped, and neither
# said anything on stderr.
burst_in_two() {
	local first=() second=()

	while [ "$1" != -- ]; do first+=("$1"); shift; done
	shift
	second=("$@")
	trace_start "${first[@]}"
	"$MCLOC" trace "$PID" "${second[@]}" >"$T/t2.out" 2>"$T/t2.err" &
	T2=$!
	for _ in $(seq 200); do
		[ "$("$MCLOC" -j list | grep -o '"controller":"[^"]*"' | grep -o 'pid' | wc -l)" -eq 2 ] && break
		sleep 0.05
	done
	trigger USR1 burst
	trace_stop
	kill -INT "$T2"
	wait "$T2"
	[ ! -s "$T/trace.err" ] && [ ! -s "$T/t2.err" ] || { cat "$T/trace.err" "$T/t2.err"; false; }
}

@test "two sessions at once: each its own tracer and filter, every event of each exact; a fifth controller is told who traces" {
	start_served
	burst_in_two function --filter 'burst_outer' -- function_graph --filter 'burst_inner'
	# The function session: each of the 4000 calls of burst_outer, and
	# nothing else.
	[ "$(grep -cE ': burst_outer <-worker$' "$T/trace.out")" -eq 4000 ]
	[ "$(grep -vc '^#' "$T/trace.out")" -eq 4000 ]
	# The graph session: each of the 8000 calls of burst_inner, timed.
	[ "$(grep -cE '[0-9] us \|  burst_inner\(\);$' "$T/t2.out")" -eq 8000 ]
	[ "$(grep -v '^#' "$T/t2.out" | grep -vc 'burst_inner();\|=>\|------\|^$')" -eq 0 ]
	# MCLOC_SESSIONS_MAX (4) controllers, then a fifth is refused.
	pids=()
	for k in 1 2 3 4; do
		"$MCLOC" trace "$PID" function --filter 'work_b' >/dev/null 2>"$T/s$k.err" &
		pids+=($!)
		for _ in $(seq 200); do
			[ "$("$MCLOC" -j list | grep -o 'pid [0-9]*' | wc -l)" -eq "$k" ] && break
			sleep 0.05
		done
	done
	run "$MCLOC" trace "$PID" function --duration 0.1
	assert_failure 1
	assert_output --regexp "^mcloc: $PID: pid [0-9]+, pid [0-9]+, pid [0-9]+, pid [0-9]+ trace this program already \(4 at most\)\$"
	kill -INT "${pids[@]}"
	wait "${pids[@]}"
	all_sites_off
	stop_served
}

@test "two function_graph sessions on the same functions: each call timed in both, at the same depth" {
	start_served
	burst_in_two function_graph --filter 'burst_*' -- function_graph --filter 'burst_*'
	# Both: the 4000 calls of burst_outer, each with its two of
	# burst_inner inside, timed (the second session's returns were
	# untimed when one user alone could hook a call).
	for f in "$T/trace.out" "$T/t2.out"; do
		[ "$(grep -c 'cannot be hooked' "$f")" -eq 0 ]
		[ "$(grep -cE '^ +[0-9]+\) +\|  burst_outer\(\) \{$' "$f")" -eq 4000 ]
		[ "$(grep -cE '[0-9] us \|    burst_inner\(\);$' "$f")" -eq 8000 ]
		[ "$(grep -cE '[0-9] us \|  \}$' "$f")" -eq 4000 ]
	done
	all_sites_off
	stop_served
}

# A child forked while its parent is traced (tests/fixtures/runtime/forked.c)
# is a process of its own: no session, so no site the session enabled
# calls anything there and nothing it runs reaches the parent's rings; its
# own ops still counts; it answers on a socket of its own pid and can be
# traced by itself.
@test "a child forked during a trace: no session, no live site, nothing in the parent's rings; traced on its own" {
	CPATH=$SRC/include traced_c forked "$RT/forked.c" -lpthread
	start_program "$T/forked"
	trace_start function --filter 'work_a,child_work'
	run "$MCLOC" -j enabled "$PID"
	sites=$(echo "$output" | sed -n 's/^{"site":\([0-9]*\),"function":"\(work_a\|child_work\)".*/\1/p')
	[ "$(echo "$sites" | wc -w)" -eq 2 ]
	kill -USR1 "$PID"
	CPID=
	for _ in $(seq 200); do
		CPID=$(sed -n 's/^child \([0-9]*\)$/\1/p' "$T/served.out")
		[ -n "$CPID" ] && [ -S "$XDG_RUNTIME_DIR/mcloc/$CPID" ] && break
		sleep 0.05
	done
	[ -n "$CPID" ] || { echo "no child"; cat "$T/served.err"; false; }
	grep -qx 'child: own ops counted 1000 of 1000' "$T/served.out"
	[ -S "$XDG_RUNTIME_DIR/mcloc/$CPID" ] || { echo "the child has no socket"; false; }
	# Its own ops's site alone is enabled; no tracer.
	run "$MCLOC" list
	assert_line --regexp "^$CPID +forked +[0-9]+ +[0-9]+ +1 +nop\$"
	run "$MCLOC" enabled "$CPID"
	assert_line --regexp "^own_fn \\(1\\)( D)?	0x[0-9a-f]+ enabled\$"
	[ "$(echo "$output" | grep -c ' enabled$')" -eq 1 ]
	# The session's sites, read back from the child's memory: none calls.
	run $PY "$SRC/tests/lib/site-bytes.py" "$CPID" $sites
	assert_success
	echo "$output" | awk '$2 !~ /^(0f1f440000|a9)/ { print "a call left: " $0; bad = 1 } END { exit bad }'
	# Traced by itself while its parent's trace runs on.
	run "$MCLOC" trace "$CPID" function --filter child_work --duration 0.3
	assert_success
	assert_line --regexp '^ +forked-[0-9]+ +\[[0-9]{3}\] +[0-9]+\.[0-9]{6}: child_work <-worker$'
	sleep 0.2
	trace_stop
	[ ! -s "$T/trace.err" ] || { cat "$T/trace.err"; false; }
	# The parent's trace: its own calls, and not one of the child's.
	grep -q ': work_a <-worker$' "$T/trace.out"
	run grep -c child_work "$T/trace.out"
	assert_output 0
	kill -TERM "$CPID"
	stop_served_plain
	[ ! -s "$T/served.err" ] || { cat "$T/served.err"; false; }
}

@test "44 malformed requests each get an error and a closed connection; the program runs on" {
	start_served
	run $CLIENT malformed "$XDG_RUNTIME_DIR/mcloc/$PID"
	echo "$output"
	assert_success
	assert_line "44 malformed requests, 44 answered with an error"
	# Still answering, and still counting.
	run $CLIENT hello "$XDG_RUNTIME_DIR/mcloc/$PID"
	assert_output "$PID"
	run "$MCLOC" list
	assert_line --regexp "^$PID +served "
	stop_served
	[ ! -s "$T/served.err" ]
}

@test "the socket gets its name only once it listens: a client that finds it is never refused" {
	command -v strace >/dev/null || skip "strace is not installed"
	printf 'int main(void) { return 0; }\n' > "$T/quick.c"
	traced_c quick "$T/quick.c"
	MCLOC_CONTROL=1 strace -f -qq -e trace=bind,listen,rename -o "$T/st" "$T/quick"
	cat "$T/st"
	dir="$XDG_RUNTIME_DIR/mcloc"
	# (mcloc run found the file that bind() makes, connected before
	# listen(), and was refused.)
	run grep -nE "bind\\(.*sun_path=\"$dir/[0-9]+\"" "$T/st"
	assert_failure
	b=$(grep -nE "bind\\(.*sun_path=\"$dir/\\.[0-9]+\".* = 0" "$T/st" | cut -d: -f1)
	l=$(grep -nE "listen\\(.* = 0" "$T/st" | cut -d: -f1)
	r=$(grep -nE "rename\\(\"$dir/\\.[0-9]+\", \"$dir/[0-9]+\"\\) = 0" "$T/st" | cut -d: -f1)
	[ -n "$b" ] && [ -n "$l" ] && [ -n "$r" ]
	[ "$b" -lt "$l" ] && [ "$l" -lt "$r" ]
}

@test "the socket's directory is the user's alone; another uid is refused, and the refusal logged" {
	start_served
	run stat -c '%a %U' "$XDG_RUNTIME_DIR/mcloc" "$XDG_RUNTIME_DIR/mcloc/$PID"
	assert_equal "$output" "700 $(id -un)
600 $(id -un)"
	[ "$(id -u)" = 0 ] || skip "changing to another uid needs root"
	command -v setpriv >/dev/null || skip "setpriv is not installed"
	other="setpriv --reuid=65534 --regid=65534 --clear-groups"
	# The directory keeps another user out (and her mcloc trusts no
	# directory but her own)...
	run $other "$MCLOC" stats "$PID"
	assert_failure 1
	assert_output "mcloc: $XDG_RUNTIME_DIR/mcloc: not a directory of this user's that only it may enter; not trusted"
	# ...and where it would not, the program itself refuses (a raw
	# client: mcloc would not go in).
	chmod 711 "$BATS_RUN_TMPDIR" "$T" "$XDG_RUNTIME_DIR" "$XDG_RUNTIME_DIR/mcloc"
	chmod 666 "$XDG_RUNTIME_DIR/mcloc/$PID"
	# (a copy it can read wherever the checkout lies)
	install -m 644 "$SRC/tests/lib/control-client.py" "$T/client.py"
	run $other $PY "$T/client.py" hello "$XDG_RUNTIME_DIR/mcloc/$PID"
	assert_failure
	grep -q "^libmcloc: control: refused a connection from uid 65534 " "$T/served.err"
	# (mcloc itself trusts the directory only while others cannot enter)
	run "$MCLOC" stats "$PID"
	assert_failure 1
	chmod 700 "$XDG_RUNTIME_DIR/mcloc"
	run "$MCLOC" stats "$PID"
	assert_success
	stop_served
}

@test "a control directory that others may enter, or a bad MCLOC_CONTROL: one line, no control, the program runs" {
	mkdir -m 755 "$XDG_RUNTIME_DIR/mcloc"
	env MCLOC_CONTROL=1 "$T/served" >"$T/served.out" \
		2>"$T/served.err" &
	PID=$!
	sleep 0.5
	[ ! -e "$XDG_RUNTIME_DIR/mcloc/$PID" ]
	stop_served
	run cat "$T/served.err"
	assert_output "libmcloc: control: $XDG_RUNTIME_DIR/mcloc: not a directory of this user's that only it may enter; no control"
	run env MCLOC_CONTROL=yes "$T/served" 0
	assert_equal "$status" 2
	assert_output "libmcloc: control: MCLOC_CONTROL=yes: 1, wait or 0; no control"
}

@test "mcloc: one line and exit 1 for a program without control; usage errors exit 2" {
	"$T/served" >/dev/null &
	PID=$!
	run "$MCLOC" stats "$PID"
	assert_failure 1
	assert_output "mcloc: $PID: No such file or directory (is it running with MCLOC_CONTROL=1, as this user?)"
	kill -TERM "$PID"; wait "$PID" || true; PID=
	run "$MCLOC" stats abc
	assert_failure 1
	assert_output "mcloc: abc: not a process id"
	run "$MCLOC" frobnicate
	assert_failure 2
	assert_output "mcloc: unknown command 'frobnicate' (list, funcs, enabled, stats, trace, run, record, replay, report, graph, dump, info, snapshot)"
	run "$MCLOC" funcs
	assert_failure 2
	run "$MCLOC" list
	assert_success
	assert_output --regexp '^PID +COMMAND'
}

@test "at exit the trace's session is freed by the control thread, which alone ticks it" {
	need strace
	traced_c exitctl "$RT/exitctl.c"
	# (LeakSanitizer cannot run under ptrace.)
	env MCLOC_CONTROL=1 ASAN_OPTIONS=detect_leaks=0 strace -ff -o "$T/st" \
		-e trace=mmap,munmap,poll,ppoll "$T/exitctl" "$T/go" >"$T/served.out" 2>"$T/served.err" &
	SP=$!
	for _ in $(seq 200); do
		PID=$(awk '$1 == "running" { print $2 }' "$T/served.out")
		[ -n "$PID" ] && [ -S "$XDG_RUNTIME_DIR/mcloc/$PID" ] && break
		sleep 0.05
	done
	trace_start function
	touch "$T/go"
	wait "$SP"
	PID=
	wait "$TP"
	grep -q ': tick_work <-' "$T/trace.out"
	# The rings' mapping, and the threads that unmapped it and that
	# polled (the control thread): one and the same.
	# (The program's one shared mapping of a descriptor: the memfd.)
	ring=$(grep -l 'PROT_READ|PROT_WRITE, MAP_SHARED, [0-9]' "$T"/st.* | head -1)
	addr=$(sed -n 's/.*PROT_READ|PROT_WRITE, MAP_SHARED, [0-9].* = \(0x[0-9a-f]*\)$/\1/p' \
		"$ring" | head -1)
	[ -n "$addr" ]
	unmapper=$(grep -l "^munmap($addr," "$T"/st.*)
	pollers=$(grep -lE '^p?poll\(' "$T"/st.*)
	echo "unmapped by $unmapper; polled by $pollers"
	[ -n "$unmapper" ] && [ "$unmapper" = "$pollers" ]
}

# ---- hostile peers: the shared memory, the replies, the directory --------

@test "a controller that writes over the rings' geometry: the program still writes inside its rings, and runs on" {
	start_served
	# (stdin held open by a fifo until the test lets the trace go)
	mkfifo "$T/hold"
	$CLIENT scribble "$XDG_RUNTIME_DIR/mcloc/$PID" <"$T/hold" >"$T/scribble.out" 2>&1 &
	CP=$!
	exec 8>"$T/hold"
	for _ in $(seq 200); do grep -q scribbled "$T/scribble.out" && break; sleep 0.05; done
	grep -q scribbled "$T/scribble.out"
	# Every worker now takes a ring and writes: where the program's own
	# geometry says, never where the header now says.
	trigger USR1 burst
	exec 8>&-
	wait "$CP"
	kill -0 "$PID"
	all_sites_off
	stop_served
}

# fake_server SCENARIO: tests/lib/fake-server.py in the control directory,
# posing as a program; FP, once it listens.
fake_server() {
	mkdir -p -m 700 "$XDG_RUNTIME_DIR/mcloc"
	$PY "$SRC/tests/lib/fake-server.py" "$XDG_RUNTIME_DIR/mcloc" "$1" >"$T/fake.out" 2>&1 &
	FP=$!
	for _ in $(seq 200); do [ -S "$XDG_RUNTIME_DIR/mcloc/$FP" ] && return 0; sleep 0.05; done
	cat "$T/fake.out"; return 1
}

fake_stop() {
	kill "$FP"; wait "$FP" || true
}

@test "mcloc trace checks the rings' memfd and header once, each field: one line and exit 1 for each fault" {
	while read -r scenario why; do
		fake_server "$scenario"
		run "$MCLOC" trace "$FP" function --duration 0.3
		fake_stop
		echo "$scenario: $output"
		assert_failure 1
		assert_output "mcloc: $FP: $why"
	done <<'EOF2'
magic the trace's shared memory: bad magic
version the trace's shared memory: another version
rings0 the trace's shared memory: not 1 to 4096 rings
rings4097 the trace's shared memory: not 1 to 4096 rings
ringsize-npow2 the trace's shared memory: a ring size that is not a power of 2 from 4 KiB to 64 MiB
ringsize-small the trace's shared memory: a ring size that is not a power of 2 from 4 KiB to 64 MiB
ringsize-huge the trace's shared memory: a ring size that is not a power of 2 from 4 KiB to 64 MiB
total the trace's shared memory: rings larger than the most a trace may ask for
offset-small the trace's shared memory: rings that overlap the header, or are misaligned
offset-misaligned the trace's shared memory: rings that overlap the header, or are misaligned
stride-small the trace's shared memory: rings that overlap each other, or are misaligned
stride-misaligned the trace's shared memory: rings that overlap each other, or are misaligned
past-end the trace's shared memory: rings past its end
flags the trace's shared memory: unknown flags
ticks the trace's shared memory: unknown flags
pipe the trace's shared memory: not a memfd
unsealed the trace's shared memory: not sealed against shrinking
truncated the trace's shared memory: a size larger than the memfd's, or too small for a header
tiny the trace's shared memory: a size larger than the memfd's, or too small for a header
nofd an unexpected reply to the trace request
shortrep an unexpected reply to the trace request
trace-type an unexpected reply to the trace request
EOF2
	# The same server with good rings: traced, and nothing said.
	fake_server good
	run "$MCLOC" trace "$FP" function --duration 0.3
	fake_stop
	assert_success
	assert_output --partial "# tracer: function"
}

@test "mcloc trace reads rings that the peer writes garbage over, geometry and heads and clock, as data: no fault" {
	fake_server scribble
	for mode in function function_graph profile; do
		# (a reader that loops on the peer's clock_seq is killed, and fails)
		run timeout -k 5 60 "$MCLOC" trace "$FP" "$mode" --duration 1 --chrome "$T/s.json"
		echo "$mode: $status"
		assert_success
		$PY -c 'import json, sys; json.load(open(sys.argv[1]))' "$T/s.json"
	done
	run timeout -k 5 60 "$MCLOC" -j trace "$FP" function_graph --duration 1
	assert_success
	fake_stop
}

@test "mcloc refuses replies that break the protocol, each check: one line and exit 1" {
	while read -r scenario cmd why; do
		fake_server "$scenario"
		run "$MCLOC" "$cmd" "$FP"
		fake_stop
		echo "$scenario: $output"
		assert_failure 1
		assert_output "mcloc: $FP: $why"
	done <<'EOF2'
rep-short-len stats a malformed reply (8 bytes, version 1)
rep-long-len stats a malformed reply (65537 bytes, version 1)
rep-version stats a malformed reply (88 bytes, version 2)
rep-error stats refused, as a test
stats-type stats an unexpected reply (type 0x101, 88 bytes)
stats-short stats an unexpected reply (type 0x104, 24 bytes)
sites-type enabled an unexpected reply (type 0x102)
sites-namelen enabled a malformed site entry
sites-nonul enabled a malformed site entry
funcs-nonul funcs an unexpected reply (type 0x102)
EOF2
}

@test "each value check of a trace request gets an error and keeps the connection; mcloc checks its options the same" {
	start_served
	run $CLIENT badtrace "$XDG_RUNTIME_DIR/mcloc/$PID"
	echo "$output"
	assert_success
	assert_line "a good trace request: started"
	refute_line --partial FAIL
	assert_line "a STOP from a connection not tracing: refused, and answered on"
	assert_line --partial "ok a site twice: site 0x1000 has two argument entries"
	assert_line --partial "ok 13 arguments: argument entry 0 (site 0x1000) is not one this library knows"
	assert_line "ok an argument glob of format 9: the entry of argument glob '*' is not one this library knows"
	assert_line "ok an argument glob naming a site: an argument glob's entry names a site"
	[ "${#lines[@]}" -eq 18 ]
	run "$MCLOC" trace "$PID" function_graph --graph-function nosuch --duration 0.1
	assert_failure 1
	assert_output "mcloc: $PID: --graph-function 'nosuch': matches no traced function"
	for opt in "--buffer 2" "--buffer 6" "--buffer 131072" "--rings 0" "--rings 4097" \
		"--buffer 1024 --rings 1025"; do
		run "$MCLOC" trace "$PID" function $opt
		assert_failure 2
		assert_output "mcloc: trace: --buffer: a power of 2 from 4 to 65536 KiB; --rings: 1 to 4096; --buffer times --rings: at most 1024 MiB"
	done
	# A number is read whole (strtoul read "abc" as 0: every thread).
	for opt in "--tid abc" "--max-depth 3x" "--duration soon" "-t -5" "--buffer 0x10"; do
		run "$MCLOC" trace "$PID" function_graph $opt
		assert_failure 2
		assert_output --regexp "^mcloc: trace: ${opt%% *} '${opt#* }': a (whole )?number from [01]"
	done
	stop_served
}

@test "connections that send nothing are closed after 5 s: 8 of them lock no controller out" {
	start_served
	run $CLIENT silent "$XDG_RUNTIME_DIR/mcloc/$PID"
	echo "$output"
	assert_success
	assert_line "8 of 8 silent connections closed by the program"
	assert_line "$PID"
	stop_served
}

@test "mcloc run fails fast and holds no program: control that cannot start, a filter that matches nothing, wrappers" {
	printf '%s\n' '#include <stdio.h>' \
		'__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }' \
		'int main(void) { printf("fib(5)=%d\n", fib(5)); return 3; }' > "$T/hello.c"
	traced_c hello "$T/hello.c"
	held='no controller started a trace within 10 s'
	# A filter that matches nothing: one line, and the program runs on
	# at once.
	run "$MCLOC" run function --filter nosuch -- "$T/hello"
	assert_failure 1
	assert_line "fib(5)=5"
	assert_line --regexp "^mcloc: [0-9]+: --filter 'nosuch': matches no traced function\$"
	refute_output --partial "$held"
	# The notrace pattern is named when it is the one that matched nothing.
	run "$MCLOC" run function --filter fib --notrace nosuch -- "$T/hello"
	assert_line --regexp "^mcloc: [0-9]+: --notrace 'nosuch': matches no traced function\$"
	refute_output --partial "$held"
	# A wrapper that starts the program as a child: the child is not held.
	run "$MCLOC" run function -- sh -c "\"$T/hello\"; exit 4"
	assert_line "fib(5)=5"
	refute_output --partial "$held"
	# A wrapper traced (given libmcloc) that execs the program late (after
	# mcloc run's 2 s wait for call sites, so that the trace goes to the
	# wrapper): the program is released, with one line.  (On ext4 its new
	# socket has the inode number of the wrapper's, which it removed.)
	if [ -z "${MCLOC_SANITIZED:-}" ]; then
		run "$MCLOC" run function --filter fib --preload "$LIBDIR/libmcloc.so" -- \
			sh -c "sleep 4; exec \"$T/hello\""
		echo "$output"
		assert_line "fib(5)=5"
		refute_output --partial "$held"
	fi
	# A control directory that cannot be used: mcloc run says so in one
	# line and starts nothing; the program alone, with wait, is not held.
	chmod 755 "$XDG_RUNTIME_DIR/mcloc"
	run "$MCLOC" run function -- "$T/hello"
	assert_failure 1
	assert_output "mcloc: $XDG_RUNTIME_DIR/mcloc: not a directory of this user's that only it may enter; not trusted"
	run env MCLOC_CONTROL=wait "$T/hello"
	assert_equal "$status" 3
	refute_output --partial "$held"
	assert_line "libmcloc: control: $XDG_RUNTIME_DIR/mcloc: not a directory of this user's that only it may enter; no control"
}

@test "after a detach mcloc enabled lists nothing; --chrome writes the file instead of the text" {
	start_served
	trace_start function_graph --filter 'burst_*' --chrome "$T/c.json"
	trigger USR1 burst
	trace_stop
	[ ! -s "$T/trace.out" ] || { head "$T/trace.out"; false; }
	$PY -c 'import json, sys; json.load(open(sys.argv[1]))' "$T/c.json"
	run "$MCLOC" enabled "$PID"
	assert_success
	assert_output ""
	stop_served
}

# other_user: the setpriv prefix that runs a command as nobody, or skip.
other_user() {
	[ "$(id -u)" = 0 ] || skip "a second user needs root"
	command -v setpriv >/dev/null || skip "setpriv is not installed"
	other="setpriv --reuid=65534 --regid=65534 --clear-groups"
	chmod 711 "$BATS_RUN_TMPDIR" "$T"
}

@test "a control directory another user made, or a symlink: mcloc trusts neither, lists nothing, unlinks nothing" {
	other_user
	# Hers, with her forged program in it.
	fake_server good
	chown -R 65534:65534 "$XDG_RUNTIME_DIR/mcloc"
	run "$MCLOC" list
	assert_failure 1
	assert_output "mcloc: $XDG_RUNTIME_DIR/mcloc: not a directory of this user's that only it may enter; not trusted"
	run "$MCLOC" trace "$FP" function --duration 0.3
	assert_failure 1
	assert_output "mcloc: $XDG_RUNTIME_DIR/mcloc: not a directory of this user's that only it may enter; not trusted"
	fake_stop
	# The library refuses it too.
	env MCLOC_CONTROL=1 "$T/served" >"$T/served.out" 2>"$T/served.err" &
	PID=$!
	for _ in $(seq 200); do grep -q running "$T/served.out" && break; sleep 0.05; done
	stop_served
	run cat "$T/served.err"
	assert_output "libmcloc: control: $XDG_RUNTIME_DIR/mcloc: not a directory of this user's that only it may enter; no control"
	# A symlink to a directory of root's with a numeric name of no
	# process in it: left alone.
	rm -rf "$XDG_RUNTIME_DIR/mcloc"
	mkdir -m 700 "$T/victim"
	touch "$T/victim/999999999"
	ln -s "$T/victim" "$XDG_RUNTIME_DIR/mcloc"
	run "$MCLOC" list
	assert_failure 1
	assert_output "mcloc: $XDG_RUNTIME_DIR/mcloc: not a directory of this user's that only it may enter; not trusted"
	[ -e "$T/victim/999999999" ]
}

@test "a server of another user in the control directory: refused by SO_PEERCRED, whatever it says" {
	other_user
	mkdir -m 700 "$XDG_RUNTIME_DIR/mcloc" "$T/hers"
	chown 65534:65534 "$T/hers"
	install -m 644 "$SRC/tests/lib/fake-server.py" "$T/fake-server.py"
	$other $PY "$T/fake-server.py" "$T/hers" good >"$T/fake.out" 2>&1 &
	FP=$!
	for _ in $(seq 200); do [ -S "$T/hers/$FP" ] && break; sleep 0.05; done
	mv "$T/hers/$FP" "$XDG_RUNTIME_DIR/mcloc/$FP"
	for cmd in stats enabled funcs; do
		run "$MCLOC" "$cmd" "$FP"
		assert_failure 1
		assert_output "mcloc: $FP: its socket's server runs as uid 65534, not this user or root: refused"
	done
	run "$MCLOC" list
	assert_success
	refute_output --partial "$FP"
	fake_stop
}

@test "without XDG_RUNTIME_DIR, root's mcloc does not trust a /tmp/mcloc-0 that nobody made" {
	other_user
	command -v unshare >/dev/null || skip "unshare is not installed"
	unshare -m true 2>/dev/null || skip "no mount namespace here"
	install -m 644 "$SRC/tests/lib/fake-server.py" "$T/fake-server.py"
	cat >"$T/inner.sh" <<EOF2
set -e
# (The tmpfs hides \$T, and the checkout too where it lies under /tmp:
# the server and mcloc are run through descriptors opened before.)
exec 4<"$T/fake-server.py" 5<"$MCLOC"
mount -t tmpfs tmpfs /tmp
$other mkdir -m 700 /tmp/mcloc-0
$other $PY /dev/fd/4 /tmp/mcloc-0 good >/dev/null &
for i in \$(seq 200); do [ -S /tmp/mcloc-0/\$! ] && break; sleep 0.05; done
env -u XDG_RUNTIME_DIR /proc/self/fd/5 list || echo "status \$?"
kill \$!
EOF2
	run unshare -m sh "$T/inner.sh"
	assert_output "mcloc: /tmp/mcloc-0: not a directory of this user's that only it may enter; not trusted
status 1"
}

# A filter pattern may name a function of a library the program loads
# later: it is kept, and applied when the library registers.  A program
# not linked with libmcloc, given it by --preload, is held at its start
# (its table found at once) and traced from main() on.
@test "a filter may name functions of a library loaded later; a program given libmcloc by --preload is held and traced from main()" {
	cc -O1 -pg -mfentry -fPIC "${SAN[@]}" -c "$RT/plugfn.c" -o "$T/plug.o"
	"$RECORDMCOUNT" "$T/plug.o"
	"$OBJPATCH" link --nop --runtime -- cc -shared "${SAN[@]}" "$T/plug.o" -o "$T/libplug.so" \
		-L"$LIBDIR" -lmcloc
	traced_c host "$RT/plughost.c" -ldl
	run "$MCLOC" run function --filter 'main_fn,plugin_fn' -- "$T/host" "$T/libplug.so"
	assert_success
	assert_line "9"
	[ "$(echo "$output" | grep -cE ': main_fn <-main$')" -eq 3 ]
	[ "$(echo "$output" | grep -cE ': plugin_fn <-main$')" -eq 3 ]
	# A filter none of whose patterns matches a function now is still
	# refused, as ftrace refuses it: a typo does not trace everything.
	run "$MCLOC" run function --filter 'plugin_fn' -- "$T/host" "$T/libplug.so"
	assert_line --partial "--filter 'plugin_fn': matches no traced function"
	# Not linked with libmcloc: GCC's table, found when libmcloc loads.
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "a preloaded libmcloc must follow ASan's runtime"
	printf '%s\n' '#include <stdio.h>' \
		'__attribute__((noinline)) int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }' \
		'int main(void) { printf("fib(5)=%d\n", fib(5)); return 0; }' > "$T/plain.c"
	cc -O1 -pg -mfentry -mrecord-mcount -c "$T/plain.c" -o "$T/plain.o"
	cc "$T/plain.o" -o "$T/plain"
	run "$MCLOC" run function --filter fib --preload "$LIBDIR/libmcloc.so" -- "$T/plain"
	assert_success
	assert_line "fib(5)=5"
	[ "$(echo "$output" | grep -cE ': fib <-(fib|main)$')" -eq 15 ]
}

# The names of an image that leaves while a trace runs stay for the
# controller (its events name them still).  One loaded and unloaded at the
# same place over and over leaves them once, not once a cycle; another
# loaded at that place after it, with other functions at other offsets,
# leaves its own beside them.
@test "plugins loaded and unloaded four times at one place under a trace leave each site's name once" {
	cat > "$T/alpha.c" <<-'C'
	__attribute__((noinline)) long alpha_one(long x) { return x + 1; }
	long entry(long x) { return alpha_one(x) * 2; }
	C
	cat > "$T/beta.c" <<-'C'
	__attribute__((noinline)) void beta_pad(void) { __asm__ volatile(".skip 64, 0x90"); }
	__attribute__((noinline)) long beta_one(long x) { beta_pad(); return x + 2; }
	long entry(long x) { return beta_one(x) * 3; }
	C
	for p in alpha beta; do
		cc -O2 -fPIC -pg -mfentry "${SAN[@]}" -c "$T/$p.c" -o "$T/$p.o"
		"$RECORDMCOUNT" "$T/$p.o"
		"$OBJPATCH" link --nop --runtime -- cc -shared "${SAN[@]}" "$T/$p.o" -o "$T/lib$p.so"
	done
	traced_c departed "$RT/departed.c" -ldl
	start_program "$T/departed" PLUGIN="$T/libalpha.so" PLUGIN2="$T/libbeta.so"
	trace_start function
	trigger USR1 cycle
	$CLIENT allsites "$XDG_RUNTIME_DIR/mcloc/$PID" | sort > "$T/one"
	for _ in 1 2 3; do trigger USR1 cycle; done
	$CLIENT allsites "$XDG_RUNTIME_DIR/mcloc/$PID" | sort > "$T/four"
	trace_stop
	stop_served_plain
	# (Both at the same place each time: else each cycle's names would
	# be others, and rightly kept apart.)
	[ "$(awk '$1 == "cycle" { print $4, $5 }' "$T/served.out" | sort -u | wc -l)" -eq 1 ]
	[ "$(awk '$1 == "cycle" && $4 == $5' "$T/served.out" | wc -l)" -eq 4 ]
	# Every function of both, once, after one cycle as after four.
	# (entry: one of each.)
	local f want
	for f in alpha_one entry beta_pad beta_one; do
		want=1
		[ $f != entry ] || want=2
		[ "$(awk -v f=$f '$2 == f' "$T/four" | wc -l)" -eq $want ] ||
			{ echo "$f:"; cat "$T/four"; false; }
	done
	run diff "$T/one" "$T/four"
	assert_success
}
