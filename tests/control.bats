#!/usr/bin/env bats
# The control channel: a multi-threaded program (fixtures/runtime/served.c)
# runs with MCLOC_CONTROL=1 while the mcloc command, and a raw client
# written apart from it (tests/lib/control-client.py), talk to it.  Each
# test uses its own XDG_RUNTIME_DIR, so that sockets of other runs never
# mix in.

load helpers

RT=$SRC/tests/fixtures/runtime
LIBDIR=${MCLOC_LIBDIR:-$(dirname "$OBJPATCH")/../libmcloc}
MCLOC=${MCLOC_CMD:-$LIBDIR/mcloc}
CLIENT="$PY $SRC/tests/lib/control-client.py"

setup() {
	T=$(mktemp -d "$BATS_RUN_TMPDIR/t.XXXXXX")
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	export XDG_RUNTIME_DIR=$T/run
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	cc -O1 -pg -mfentry -c "$RT/served.c" -o "$T/served.o"
	"$RECORDMCOUNT" "$T/served.o"
	"$OBJPATCH" link --nop --runtime -- cc "$T/served.o" -o "$T/served" -lpthread
}

teardown() {
	[ -z "${PID:-}" ] || kill -KILL "$PID" 2>/dev/null || true
}

# start_served [VAR=VALUE...]: the program in the background, with control
# on and the environment given; PID, once its socket is there and its
# threads run (the socket comes first: control starts when libmcloc loads,
# before the program's own image registers).
start_served() {
	env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_CONTROL=1 "$@" "$T/served" \
		>"$T/served.out" 2>"$T/served.err" &
	PID=$!
	for _ in $(seq 200); do
		[ -S "$XDG_RUNTIME_DIR/mcloc/$PID" ] && grep -q running "$T/served.out" && return 0
		sleep 0.05
	done
	echo "no control socket appeared"; cat "$T/served.err"; return 1
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
	assert_line --regexp "^$PID +served +[0-9]+ +5 +1 +function\$"
	run "$MCLOC" -j list
	assert_line --partial "{\"pid\":$PID,\"command\":\"served\","
	run "$MCLOC" funcs "$PID"
	assert_success
	assert_equal "$output" "main
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
	assert_line --regexp '^records +5$'
	assert_line --regexp '^enabled +1$'
	stop_served
}

@test "33 malformed requests each get an error and a closed connection; the program runs on" {
	start_served
	run $CLIENT malformed "$XDG_RUNTIME_DIR/mcloc/$PID"
	echo "$output"
	assert_success
	assert_line "33 malformed requests, 33 answered with an error"
	# Still answering, and still counting.
	run $CLIENT hello "$XDG_RUNTIME_DIR/mcloc/$PID"
	assert_output "$PID"
	run "$MCLOC" list
	assert_line --regexp "^$PID +served "
	stop_served
	[ ! -s "$T/served.err" ]
}

@test "the socket's directory is the user's alone; another uid is refused, and the refusal logged" {
	start_served
	run stat -c '%a %U' "$XDG_RUNTIME_DIR/mcloc" "$XDG_RUNTIME_DIR/mcloc/$PID"
	assert_equal "$output" "700 $(id -un)
600 $(id -un)"
	[ "$(id -u)" = 0 ] || skip "changing to another uid needs root"
	command -v setpriv >/dev/null || skip "setpriv is not installed"
	other="setpriv --reuid=65534 --regid=65534 --clear-groups"
	# The directory keeps another user out...
	run $other "$MCLOC" stats "$PID"
	assert_failure 1
	assert_output --partial "Permission denied"
	# ...and where it would not, the program itself refuses.
	chmod 711 "$BATS_RUN_TMPDIR" "$T" "$XDG_RUNTIME_DIR" "$XDG_RUNTIME_DIR/mcloc"
	chmod 666 "$XDG_RUNTIME_DIR/mcloc/$PID"
	run $other "$MCLOC" stats "$PID"
	assert_failure 1
	assert_output --partial "the program closed the connection"
	grep -q "^libmcloc: control: refused a connection from uid 65534 " "$T/served.err"
	run "$MCLOC" stats "$PID"
	assert_success
	stop_served
}

@test "a control directory that others may enter, or a bad MCLOC_CONTROL: one line, no control, the program runs" {
	mkdir -m 755 "$XDG_RUNTIME_DIR/mcloc"
	env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_CONTROL=1 "$T/served" >"$T/served.out" \
		2>"$T/served.err" &
	PID=$!
	sleep 0.5
	[ ! -e "$XDG_RUNTIME_DIR/mcloc/$PID" ]
	stop_served
	run cat "$T/served.err"
	assert_output "libmcloc: control: $XDG_RUNTIME_DIR/mcloc: not a directory of this user's that only it may enter; no control"
	run env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_CONTROL=yes "$T/served" 0
	assert_equal "$status" 2
	assert_output "libmcloc: control: MCLOC_CONTROL=yes: 1 or 0; no control"
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
	assert_output "mcloc: unknown command 'frobnicate' (list, funcs, enabled, stats, trace)"
	run "$MCLOC" funcs
	assert_failure 2
	run "$MCLOC" list
	assert_success
	assert_output --regexp '^PID +COMMAND'
}
