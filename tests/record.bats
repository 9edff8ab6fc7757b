#!/usr/bin/env bats
# mcloc record and the offline tools: a program of known call tree
# (fixtures/runtime/recorded.c) is recorded, and its replay, report, graph
# and flame graph compared with golden text (times masked: they vary);
# the lossless recorder is made to wait; the Chrome and Perfetto outputs
# are read back by a JSON parser and by protoc; bad recordings get one
# line and exit 1.

load helpers
bats_require_minimum_version 1.5.0

RT=$SRC/tests/fixtures/runtime

setup() {
	runtime_setup
	traced_fixture recorded
}

# The recording's graph, every call hooked (none "cannot be hooked"),
# times masked, without the header.
hooked_graph() {
	"$MCLOC" replay > replay.txt
	[ "$(grep -c 'cannot be hooked' replay.txt)" -eq 0 ]
	mask_times < replay.txt | grep -v '^#'
}


@test "record, then replay: ftrace's function_graph text of the whole call tree" {
	run "$MCLOC" record -- ./recorded
	assert_success
	assert_line "18"
	assert_line --regexp '^mcloc: mcloc.data: [0-9]+ \(recorded\): 1 thread, [0-9]+ KiB of events, 0 lost$'
	"$MCLOC" replay | mask_times > replay.txt
	cat > want.txt <<'EOF'
# tracer: function_graph
#
# CPU  DURATION                  FUNCTION CALLS
# |     |   |                     |   |   |   |
 C)      |  main() {
 C)      |    top() {
 C)      |      mid() {
 C) D us |        leaf();
 C) D us |        leaf();
 C) D us |      }
 C)      |      mid() {
 C) D us |        leaf();
 C) D us |        leaf();
 C) D us |      }
 C)      |      mid() {
 C) D us |        leaf();
 C) D us |        leaf();
 C) D us |      }
 C) D us |    }
 C) D us |  }
EOF
	diff -u want.txt replay.txt
	# The function tracer's view of the same recording: each call with
	# the function it was called from.
	"$MCLOC" replay --function | mask_times | grep -v '^#' | sed -E 's/^ +recorded-[0-9]+ +//' > fn.txt
	printf '%s\n' '[CPU] S: main <-?' '[CPU] S: top <-main' '[CPU] S: mid <-top' \
		'[CPU] S: leaf <-mid' '[CPU] S: leaf <-mid' '[CPU] S: mid <-top' \
		'[CPU] S: leaf <-mid' '[CPU] S: leaf <-mid' '[CPU] S: mid <-top' \
		'[CPU] S: leaf <-mid' '[CPU] S: leaf <-mid' > want.txt
	diff -u want.txt fn.txt
}

@test "report, graph and the flame graph of a recording: counts golden, times that add up" {
	"$MCLOC" record -- ./recorded
	run "$MCLOC" report
	assert_success
	echo "$output" | awk 'NR > 2 { print $1, $2 }' > got.txt
	printf '%s\n' 'main 1' 'top 1' 'mid 3' 'leaf 6' > want.txt
	diff -u want.txt got.txt
	# Self time is total time less the callees': leaf's are equal, and
	# every function's self is at most its total.
	echo "$output" | awk 'NR > 2 && ($5 > $3 + 0.0005) { print "self above total: " $0; bad = 1 }
			      $1 == "leaf" && $3 != $5 { print "leaf: " $0; bad = 1 } END { exit bad }'
	run "$MCLOC" report --sort calls
	assert_success
	[ "$(echo "$output" | awk 'NR == 3 { print $1 }')" = leaf ]
	# JSON rows name the process (a recording of a fork holds several).
	pid=$("$MCLOC" info | awk '$2 == "process" { print $3; exit }')
	"$MCLOC" -j report --per-thread > rows.json
	$PY - rows.json "$pid" <<'EOF2'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [(r["function"], r["calls"]) for r in rows] == \
    [("main", 1), ("top", 1), ("mid", 3), ("leaf", 6)], rows
assert all(r["pid"] == int(sys.argv[2]) and r["tid"] > 0 for r in rows), rows
assert all(r["total_ns"] >= r["self_ns"] > 0 for r in rows), rows
EOF2
	run "$MCLOC" graph mid
	assert_success
	# (A time and the padding before it are one T: a slow machine's
	# 12.345 us takes a column's space that 1.234 leaves blank.)
	echo "$output" | sed -E 's/ +[0-9]+\.[0-9]{3}/ T/g' > got.txt
	cat > want.txt <<'EOF'
mid: 3 calls, T us, T us of its own

Called by:
       Calls      Time (us)  Function
           3 T  top

Calls:
       Calls      Time (us)  Function
           6 T  leaf
EOF
	diff -u want.txt got.txt
	run "$MCLOC" graph nosuchfunction
	assert_failure 1
	assert_output "mcloc: mcloc.data: no call of nosuchfunction recorded"
	# Folded stacks: one line per path with time of its own, and those
	# times are the report's self times.
	"$MCLOC" dump --flame-graph flame.txt
	awk '{ print $1 }' flame.txt > got.txt
	printf '%s\n' 'main' 'main;top' 'main;top;mid' 'main;top;mid;leaf' > want.txt
	diff -u want.txt got.txt
	awk '$2 !~ /^[1-9][0-9]*$/ { exit 1 }' flame.txt
	leaf_ns=$(awk '$1 == "main;top;mid;leaf" { print $2 }' flame.txt)
	leaf_us=$("$MCLOC" report | awk '$1 == "leaf" { print $5 }')
	[ "$(awk -v a="$leaf_ns" 'BEGIN { printf "%.3f", a / 1000 }')" = "$leaf_us" ]
}

@test "replay's filters: -F and -N with what they call, --depth, --tid, --time-range, -t" {
	"$MCLOC" record -- ./recorded
	calls() { grep -cE '\|  +[a-z]+\(\)( \{|;)$' || true; }
	[ "$("$MCLOC" replay | calls)" -eq 11 ]
	# -F mid: the three calls of mid and the six of leaf in them.
	[ "$("$MCLOC" replay -F mid | calls)" -eq 9 ]
	[ "$("$MCLOC" replay -F 'mid' | grep -c 'main\|top')" -eq 0 ]
	# -N mid: mid and what it calls hidden; top becomes a leaf.
	run "$MCLOC" replay -N mid
	assert_output --partial "top();"
	refute_output --partial "leaf"
	# A list of globs.
	[ "$("$MCLOC" replay -F 'nothing,le*' | calls)" -eq 6 ]
	# One that names nothing recorded is said (the headers alone, exit 0).
	run "$MCLOC" report -F 'nothing*'
	assert_failure 1
	assert_output "mcloc: mcloc.data: -F 'nothing*': matches no function of the recording"
	# So is a --tid of no thread (it printed nothing, exit 0).
	run "$MCLOC" replay --tid 999999
	assert_failure 1
	assert_output "mcloc: mcloc.data: --tid 999999: no thread of the recording"
	[ "$("$MCLOC" replay --depth 2 | calls)" -eq 2 ]
	# Under -F, depth counts from the -F call, as set_graph_function's
	# and uftrace's -F -D do, and so does the indentation (mid was at
	# depth 2: nothing was shown).
	run "$MCLOC" replay -F mid --depth 1
	[ "$(echo "$output" | grep -cE '[0-9] us \|  mid\(\);$')" -eq 3 ]
	refute_output --partial leaf
	tid=$("$MCLOC" info | awk '/^  [0-9]/ { print $1; exit }')
	[ "$("$MCLOC" replay --tid "$tid" | calls)" -eq 11 ]
	[ "$("$MCLOC" replay --tid 1 | calls)" -eq 0 ]
	# A range that starts after everything, and one that holds it all.
	[ "$("$MCLOC" replay --time-range '999999999~' | calls)" -eq 0 ]
	[ "$("$MCLOC" replay --time-range '0~999999999' | calls)" -eq 11 ]
	# A threshold of a minute hides every call; with one of a
	# nanosecond, each call is one line at its end, as ftrace's
	# tracing_thresh prints them: no brace is left open.
	[ "$("$MCLOC" replay -t 60000000 | grep -vc '^#')" -eq 0 ]
	run "$MCLOC" replay -t 0.001
	[ "$(echo "$output" | grep -c '[a-z]();$')" -eq 6 ]
	[ "$(echo "$output" | grep -cE '\} /\* (main|top|mid) \*/$')" -eq 5 ]
	refute_output --partial "{"
	# START alone is START~, as the message says.
	[ "$("$MCLOC" replay --time-range 999999999 | calls)" -eq 0 ]
	run "$MCLOC" replay --time-range 5x
	assert_failure 2
	assert_output "mcloc: replay: --time-range: START~END in seconds, as replay prints them (END may be left out)"
	# Numbers are checked whole, in one line.
	run "$MCLOC" replay -t abc
	assert_failure 2
	assert_output "mcloc: replay: -t 'abc': a number from 0"
	run "$MCLOC" report --tid 12x
	assert_failure 2
	assert_output "mcloc: report: --tid '12x': a whole number from 1 to 4294967295"
	run "$MCLOC" replay --help
	assert_success
	assert_line --partial "usage: mcloc"
}

@test "short events (one 8-byte unit) read as the whole slots they stand for: every time, site and depth" {
	"$MCLOC" record -- ./recorded 20000 2
	"$MCLOC" replay > short.txt
	"$MCLOC" replay --function > short-fn.txt
	"$MCLOC" report > short-report.txt
	cp -r mcloc.data wide.data
	# A reading of the format apart from mcloc's own writes each short
	# event out as its slot: most are short, and some are not.
	run $PY "$SRC/tests/lib/widen-events.py" wide.data/*.events
	echo "$output"
	read -r shorts _ slots _ <<<"$output"
	[ "$shorts" -gt 100000 ] && [ "$slots" -gt 0 ] && [ "$shorts" -gt $((10 * slots)) ]
	"$MCLOC" replay -d wide.data > wide.txt
	"$MCLOC" replay -d wide.data --function > wide-fn.txt
	"$MCLOC" report -d wide.data > wide-report.txt
	[ "$(wc -l < short.txt)" -gt 60000 ]
	diff -q short.txt wide.txt
	diff -q short-fn.txt wide-fn.txt
	diff -q short-report.txt wide-report.txt
	# And the bytes: an entry and an exit in one unit each, where a
	# whole slot takes two.
	s=$(du -bc mcloc.data/*.events | tail -1 | cut -f1)
	w=$(du -bc wide.data/*.events | tail -1 | cut -f1)
	[ $((2 * s)) -lt $((w + w / 10)) ]
}

# -pg without -mfentry (x86_64): mcount is called in the frame the
# prologue built, where the word above the return address into the
# function is no caller's.  Before, the function tracer named that word
# as the parent, and function_graph and the profile tracer could not time
# the calls ("-"); now the frame pointer says where the return lies.
@test "-pg without -mfentry: callers named, calls timed, stack arguments read, as an -mfentry build's" {
	cc -O1 -g -pg "${SAN[@]}" -c "$RT/pgframe.c" -o pgframe.o
	objdump -dr pgframe.o | grep -q 'R_X86_64_.*mcount'
	"$RECORDMCOUNT" pgframe.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" pgframe.o -o pgframe -L"$LIBDIR" -lmcloc
	run "$MCLOC" run function -- ./pgframe
	assert_success
	assert_line 71
	[ "$(echo "$output" | grep -cE ': leaf <-mid$')" -eq 4 ]
	[ "$(echo "$output" | grep -cE ': mid <-top$')" -eq 2 ]
	assert_line --regexp ': top <-main$'
	assert_line --regexp ': use <-aligned$'
	MCLOC_TRACER=profile MCLOC_OUTPUT="$PWD/prof.txt" \
		run "$MCLOC" record -A 'leaf@arg1,arg7' -R 'leaf@retval' -- ./pgframe
	assert_success
	hooked_graph > got.txt
	cat > want.txt <<'EOF2'
 C)      |  main() {
 C)      |    top() {
 C)      |      mid() {
 C) D us |        leaf(1, 0); /* = 16 */
 C) D us |        leaf(1, 1); /* = 17 */
 C) D us |      }
 C)      |      mid() {
 C) D us |        leaf(2, 0); /* = 17 */
 C) D us |        leaf(2, 1); /* = 18 */
 C) D us |      }
 C) D us |    }
 C)      |    aligned() {
 C) D us |      use();
 C) D us |    }
 C) D us |  }
EOF2
	diff -u want.txt got.txt
	# The profile tracer, beside the session, timed every call too.
	printf '%s\n' 'aligned 1' 'leaf 4' 'main 1' 'mid 2' 'top 1' 'use 1' > want.txt
	awk 'NR > 4 && NF >= 4 && $3 != "-" { print $1, $2 }' prof.txt | sort > got.txt
	diff -u want.txt got.txt
}

# A program that leaves through exit() from inside calls: replay closed
# nothing (main() { left open), and report and graph gave main 0.000 us,
# then no time at all, where dump --chrome ended the calls at the
# thread's last event and uftrace times them to the exit.
@test "calls still open when the events end (exit() inside them): closed saying so, timed to the thread's last event" {
	traced_fixture exits
	run "$MCLOC" record -- ./exits
	assert_success
	assert_line 3
	"$MCLOC" replay | mask_times | grep -v '^#' > got.txt
	cat > want.txt <<'EOF2'
 C)      |  main() {
 C) D us |    leaf();
 C)      |    fin() {
 C) D us |      leaf();
 C) D us |    } /* fin: not returned when the trace ended */
 C) D us |  } /* main: not returned when the trace ended */
EOF2
	diff -u want.txt got.txt
	# Each ends at the last event, the second leaf()'s return: fin()
	# took that leaf() and more, main() its first leaf() and fin().
	"$MCLOC" report -j > rep.json
	python3 - rep.json <<'PY'
import json, sys
rows = {r["function"]: r for r in map(json.loads, open(sys.argv[1]))}
m, f, l = rows["main"], rows["fin"], rows["leaf"]
assert m["timed"] == 1 and m["unreturned"] == 1 and f["unreturned"] == 1, rows
assert "unreturned" not in l and l["calls"] == 2 and l["timed"] == 2, rows
assert 0 < f["self_ns"] < f["total_ns"], rows
assert m["total_ns"] >= f["total_ns"] + 1 and m["total_ns"] > l["total_ns"], rows
assert m["self_ns"] == m["total_ns"] - f["total_ns"] - (l["total_ns"] - (f["total_ns"] - f["self_ns"])), rows
PY
	run "$MCLOC" report
	assert_line --regexp '^main +1 +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$'
	assert_line --regexp '^fin +1 +[0-9]+\.[0-9]{3} '
	assert_line "# not returned when the trace ended, timed to their thread's last event: main fin (2 calls)"
	run "$MCLOC" graph main
	assert_line --regexp "^main: 1 call \(1 not returned when the trace ended: timed to its thread's last event\), [0-9.]+ us"
	refute_line --regexp '^main: .*, 0\.000 us'
	# Filtered, they still end at the thread's last event, not at the
	# last one shown (--depth 1 shows main alone); with a threshold
	# they are shown at that end, as any call long enough.
	total=$(python3 -c 'import json,sys; print(next(r["total_ns"] for r in map(json.loads, open(sys.argv[1])) if r["function"] == "main"))' rep.json)
	"$MCLOC" replay > all.txt
	"$MCLOC" replay -D 1 > d1.txt
	grep -E '\} /\* main: not returned' all.txt | sed -E 's/^ +[0-9]+\) +//' > want.txt
	grep -E '\} /\* main: not returned' d1.txt | sed -E 's/^ +[0-9]+\) +//' > got.txt
	diff -u want.txt got.txt
	grep -Eq "^ *[0-9]+\) [ +!#*@\$] +$(printf '%d.%03d' $((total / 1000)) $((total % 1000))) us \|  \} /\* main: not returned" all.txt
	run "$MCLOC" replay -t 0.001
	assert_line --regexp '\|    \} /\* fin: not returned when the trace ended \*/$'
	assert_line --regexp '\|  \} /\* main: not returned when the trace ended \*/$'
	run "$MCLOC" report --per-thread
	assert_line --regexp "^# not returned when the trace ended, timed to their thread's last event: main\[[0-9]+\] fin\[[0-9]+\] \(2 calls\)$"
	# The flame graph gives them their own time too.
	"$MCLOC" dump --flame-graph flame.txt
	grep -Eq '^main [1-9][0-9]*$' flame.txt
	grep -Eq '^main;fin [1-9][0-9]*$' flame.txt
}

# fin() never returns, so main's call of it is main's last instruction and
# the return address lies past main: the function tracer named fin's
# caller by that address (or by the function after main).
@test "the function tracer names the caller of a function that never returns: recorded, live and in the library's own tracer" {
	traced_fixture exits
	run "$MCLOC" record function -- ./exits
	assert_success
	run "$MCLOC" replay
	assert_line --regexp ' fin <-main$'
	assert_line --regexp ' leaf <-fin$'
	run "$MCLOC" run function -- ./exits
	assert_line --regexp ' fin <-main$'
	run env MCLOC_TRACER=function ./exits
	assert_line --regexp ' fin <-main$'
}

# Frames a longjmp left were found only when an older hooked call
# returned: in a loop that recovers by longjmp, every later call was drawn
# inside them, and past 128 of them none was timed.
@test "a loop that recovers by longjmp: the calls it left end there, later calls are drawn and timed where they are" {
	cc -O2 -pg -mfentry "${SAN[@]}" -c "$RT/ljloop.c" -o ljloop.o
	"$RECORDMCOUNT" ljloop.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" ljloop.o -o ljloop -L"$LIBDIR" -lmcloc
	run "$MCLOC" record -- ./ljloop 2 2
	assert_success
	"$MCLOC" replay | mask_times | grep -v '^#' > got.txt
	{
		echo ' C)      |  main() {'
		for round in 1 2; do
			cat <<'EOF2'
 C)      |    jumper() {
 C)      |      jumper() {
 C)      |        jumper(); /* left early (an exception or longjmp): not timed */
 C)      |      } /* jumper: left early (an exception or longjmp) */
 C)      |    } /* jumper: left early (an exception or longjmp) */
 C) D us |    work();
EOF2
		done
		echo ' C) D us |  }'
	} > want.txt
	diff -u want.txt got.txt
	# 200 rounds of 41 calls left: far past the shadow stack's 128.
	run "$MCLOC" record -- ./ljloop 40 200
	assert_success
	run "$MCLOC" replay
	refute_output --partial "cannot be hooked"
	[ "$(echo "$output" | grep -cE '[0-9] us \|    work\(\);$')" -eq 200 ]
	run "$MCLOC" report
	assert_line --regexp '^work +200 +[0-9.]+ '
	assert_line --regexp '^jumper +8200 +- '
	# A handler's calls on an alternate stack above the thread's are no
	# calls left: the thread's live ones keep their frames (aborted).
	traced_fixture altstack
	run "$MCLOC" record -- ./altstack
	assert_success
	assert_line 100
	run "$MCLOC" report
	assert_line --regexp '^inh +50 +[0-9.]+ '
	assert_line --regexp '^spin +50 +[0-9.]+ '
}

# A frame below the new call in the stack was taken for one a longjmp
# left, and ended: a coroutine's live calls lie there, on a stack of its
# own, and their returns then found no record (aborted).
@test "coroutines: live calls on another stack below a new call keep their frames" {
	traced_fixture coroutine
	./coroutine > want.txt
	run "$MCLOC" record -- ./coroutine
	assert_success
	refute_output --partial "no record of its caller"
	diff -u want.txt <(printf '%s\n' 42 0 2 4 ok)
	for p in 42 0 2 4 ok; do assert_line "$p"; done
	run "$MCLOC" report
	assert_line --regexp '^run +1 +[0-9.]+ '
	assert_line --regexp '^yield_val +3 +[0-9.]+ '
	assert_line --regexp '^consume +3 +[0-9.]+ '
	assert_line --regexp '^gen +1 +[0-9.]+ '
}

@test "tail calls are timed, also where the library's own tracer hooked the same calls first" {
	# -O2: each of these returns is a jump, which leaves the trampoline's
	# address where the callee's return address goes.
	cc -O2 -pg -mfentry "${SAN[@]}" -c "$RT/tailcall.c" -o tailcall.o
	[ "$(objdump -d --no-show-raw-insn tailcall.o | grep -cE 'jmp +[0-9a-f]+ <t_(leaf|ping|pong)>')" -eq 3 ]
	"$RECORDMCOUNT" tailcall.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" tailcall.o -o tailcall -L"$LIBDIR" -lmcloc
	# Two users of each call's return: the profile tracer and the
	# recording's session.
	MCLOC_TRACER=profile MCLOC_OUTPUT="$PWD/prof.txt" run "$MCLOC" record -- ./tailcall
	assert_success
	assert_line 1503500
	hooked_graph | head -11 > got.txt
	cat > want.txt <<'EOF2'
 C)      |  main() {
 C)      |    t_tail() {
 C) D us |      t_leaf();
 C) D us |    }
 C)      |    t_ping() {
 C)      |      t_pong() {
 C)      |        t_ping() {
 C) D us |          t_pong();
 C) D us |        }
 C) D us |      }
 C) D us |    }
EOF2
	diff -u want.txt got.txt
	printf '%s\n' 'main 1' 't_ping 2000' 't_pong 2000' 't_tail 1000' 't_leaf 1000' > want.txt
	"$MCLOC" report --sort name | awk 'NR > 2 { print $1, $2 }' | sort > got.txt
	sort want.txt | diff -u - got.txt
	awk 'NR > 4 && NF >= 4 { print $1, $2 }' prof.txt | sort > got.txt
	sort want.txt | diff -u - got.txt
	# t_ping runs inside t_ping (through t_pong): report's total is its
	# outermost calls', as graph's (each level was added again).
	for f in t_ping t_pong; do
		r=$("$MCLOC" report | awk -v f="$f" '$1 == f { print $3 }')
		g=$("$MCLOC" graph "$f" | sed -nE "1s/^$f: [0-9]+ calls?, ([0-9.]+) us, .*/\1/p")
		echo "$f: report $r, graph $g"
		[ -n "$r" ] && [ "$r" = "$g" ]
	done
}

@test "a thread given an exited thread's tid is recorded in a file of its own, and both are read" {
	[ "$(id -u)" = 0 ] && [ -w /proc/sys/kernel/ns_last_pid ] ||
		skip "giving a tid again needs root (ns_last_pid)"
	traced_fixture tidreuse
	run "$MCLOC" record -- ./tidreuse
	assert_success
	assert_line 1999
	echo "$output" | grep -qx reused || skip "another process took the tid first: nothing tested"
	# (It failed whole before: the second file's name was taken.)  The
	# main thread's, the first's, and the second's.
	[ "$(ls mcloc.data/*.events | wc -l)" -eq 3 ]
	ls mcloc.data/*-1.events
	run "$MCLOC" report
	assert_success
	assert_line --regexp '^first_leaf +1000 '
	assert_line --regexp '^second_leaf +2000 '
	run "$MCLOC" info
	assert_line --regexp '^threads: +3$'
}

@test "lossless: with rings too small to keep up, threads wait and every event is kept" {
	# 4 threads and main, 200000 calls of leaf each, into 4 KiB rings.
	run "$MCLOC" record --buffer 4 -- ./recorded 200000 4
	assert_success
	assert_line --regexp '^mcloc: mcloc.data: [0-9]+ \(recorded\): 5 threads, [0-9]+ [KM]iB of events, 0 lost$'
	run "$MCLOC" info
	assert_line --regexp '^lost: +0$'
	waits=$(echo "$output" | awk '$1 == "waits:" { print $2 }')
	[ "$waits" -gt 0 ]
	run "$MCLOC" report
	assert_line --regexp '^leaf +1000006 '
	assert_line --regexp '^load +5 '
	# Per thread: each load thread's table has its 200000 calls.
	[ "$("$MCLOC" report --per-thread | grep -cE '^leaf +200000 ')" -eq 4 ]
}

@test "a recording that loses events (more threads than --rings) says so in its one line, and nothing on the program's stdout" {
	"$MCLOC" record --rings 1 -- ./recorded 1000 2 > out.txt 2> err.txt
	# (stdout is the program's: its result alone.)
	assert_equal "$(cat out.txt)" 18
	[ "$(wc -l < err.txt)" -eq 1 ]
	grep -E '^mcloc: mcloc.data: [0-9]+ \(recorded\): 1 thread, [0-9]+ [KM]iB of events, [1-9][0-9]* lost$' err.txt
}

@test "record -p PID attaches to a running program, and detaches it unharmed" {
	cat > loop.c <<'EOF'
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
static volatile sig_atomic_t done;
static void stop(int s) { (void)s; done = 1; }
__attribute__((noinline)) int tick(int i) { return i + 1; }
int main(void)
{
	int i = 0;
	signal(SIGUSR1, stop);
	while (!done) { i = tick(i); usleep(1000); }
	printf("%d\n", i > 0);
	return 0;
}
EOF
	cc -O1 -pg -mfentry "${SAN[@]}" -c loop.c -o loop.o
	"$RECORDMCOUNT" loop.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" loop.o -o loop -L"$LIBDIR" -lmcloc
	MCLOC_CONTROL=1 ./loop > loop.out &
	pid=$!
	for _ in $(seq 100); do [ -S "$XDG_RUNTIME_DIR/mcloc/$pid" ] && break; sleep 0.05; done
	run "$MCLOC" record -p "$pid" --duration 0.3
	assert_success
	run "$MCLOC" enabled "$pid"
	assert_output ""
	kill -USR1 "$pid"
	wait "$pid"
	assert_equal "$(cat loop.out)" 1
	run "$MCLOC" report
	assert_line --regexp '^tick +[0-9]+ '
	run "$MCLOC" info
	# (The process's own command line, not its pid.)
	assert_line --regexp "^command: +\./loop\$"
}

# withlib: $T/withlib, a traced program calling into $T/libtraced.so, a
# traced shared library (fixtures/runtime/withlib.c and shlib.c, -g).
# The library's constructor registers it first; \`mcloc record -- ...\`
# holds the program where the program itself registers, after it, and
# its text is patched after the recorder first read the maps.
withlib() {
	cc -g -O1 -fPIC -pg -mfentry "${SAN[@]}" -c "$RT/shlib.c" -o shlib.o
	"$RECORDMCOUNT" shlib.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" -shared shlib.o -o libtraced.so \
		-L"$LIBDIR" -lmcloc
	cc -g -O1 -pg -mfentry "${SAN[@]}" -c "$RT/withlib.c" -o withlib.o
	"$RECORDMCOUNT" withlib.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" withlib.o -o withlib \
		-L. -ltraced -Wl,-rpath,"$T" -L"$LIBDIR" -lmcloc
}

# A shell script that runs traced programs: the script offers no control,
# and before, record waited 5 s for it, gave up with no recording, and
# left each program it ran held 10 s by MCLOC_CONTROL=wait.
@test "record -- a shell script: each program it runs that carries the runtime is recorded, none held" {
	traced_fixture exits
	traced_fixture recorded
	printf '#!/bin/sh\n./exits\n./recorded\necho done\n' > wrap.sh
	chmod +x wrap.sh
	run "$MCLOC" record -- ./wrap.sh
	assert_success
	assert_line "done"
	assert_line "mcloc: ./wrap.sh: offers no control (is it linked with libmcloc, or given --preload?); recording the programs it starts that do"
	refute_line --partial "no controller started a trace"
	run "$MCLOC" info
	assert_line --regexp '^command: +\./exits$'
	assert_line --regexp '^command: +\./recorded$'
	run "$MCLOC" report
	assert_line --regexp '^leaf +6 '
	# A wrapper that starts a traced program in the background and exits
	# first, or exits before its child even starts it: the orphans are
	# mcloc's (its subreaper), and followed (nothing was recorded, and
	# each program held 10 s).
	printf '#!/bin/sh
./exits > bg.out &
sleep 0.05
' > bg.sh
	printf '#!/bin/sh
(sleep 0.5; ./recorded > late.out) &
exit 0
' > late.sh
	chmod +x bg.sh late.sh
	for w in bg late; do
		rm -rf mcloc.data
		run "$MCLOC" record -- ./$w.sh
		assert_success
		refute_line --partial "no controller started a trace"
		run "$MCLOC" info
		assert_line --regexp "^command: +\./$([ $w = bg ] && echo exits || echo recorded)\$"
	done
	# None that any program it started could be traced: an error.
	run "$MCLOC" record --graph-function nosuch -- ./wrap.sh
	assert_failure 1
	assert_line --regexp "^mcloc: [0-9]+: nothing recorded: no program it started could be traced\$"
}

# A program the script execs answers before its own image registers:
# its trace was asked at once, and a --graph-function or --trigger, which
# must match at the start, matched nothing now and then ("matches no
# traced function", the program not recorded).  --graph-function takes
# comma-separated globs, as --filter does (before, one fnmatch(3) of the
# whole list, which matched nothing).
@test "record -- a shell script with --graph-function GLOB,GLOB and --trigger: each program it runs is recorded" {
	traced_fixture recorded
	printf '#!/bin/sh\n./recorded\n./recorded\n./recorded\n' > wrap.sh
	chmod +x wrap.sh
	for i in 1 2 3; do
		run "$MCLOC" record --graph-function 'mid,nosuch_*x,leaf' --trigger 'leaf:backtrace' -- ./wrap.sh
		assert_line "mcloc: ./wrap.sh: offers no control (is it linked with libmcloc, or given --preload?); recording the programs it starts that do"
		assert_line --partial "--graph-function 'nosuch_*x': matches no traced function"
		run "$MCLOC" record --graph-function 'mid,leaf' --trigger 'leaf:backtrace' -- ./wrap.sh
		assert_success
		refute_line --partial "matches no traced function"
		run "$MCLOC" report
		[ "$(grep -cE '^mid +3 ' <<< "$output")" -eq 3 ]
		[ "$(grep -cE '^leaf +6 ' <<< "$output")" -eq 3 ]
		run grep -c '^# process ' <<< "$output"
		assert_output 3
		run grep -cE '\|  +main\(\)|top\(\)' <<< "$("$MCLOC" replay)"
		assert_output 0
	done
}

@test "a program and its traced shared library: the recording names the program's functions too, though it registered after the library" {
	# (At exit the images leave, by the fini arrays, before the recorder
	# asks the names again.)
	withlib
	run "$MCLOC" record -- ./withlib
	assert_success
	assert_line "12"
	"$MCLOC" replay | mask_times | grep -v '^#' > replay.txt
	printf '%s\n' ' C)      |  main() {' ' C)      |    main_e() {' ' C)      |      lib_d() {' \
		' C) D us |        lib_a();' ' C) D us |      }' ' C) D us |    }' ' C) D us |  }' > want.txt
	diff -u want.txt replay.txt
}

# The hold waited for the program, not only its library: a filter, -A and
# -R name its functions (before, "matches no traced function").  Stripped
# too: its .dynsym still names mcloc_register_image.
@test "a program linked with a traced library: filters, -A and -R name the program's own functions, stripped or not" {
	withlib
	strip withlib -o stripped
	# A constructor that sleeps before the program registers: the
	# controller asked for the sites at the library's registration and
	# was refused (the hold is the program's).
	cc -g -O1 -pg -mfentry -DSLOW_CTOR "${SAN[@]}" -c "$RT/withlib.c" -o slow.o
	"$RECORDMCOUNT" slow.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" slow.o -o slow \
		-L. -ltraced -Wl,-rpath,"$T" -L"$LIBDIR" -lmcloc
	for prog in ./withlib ./stripped ./slow; do
		run "$MCLOC" run function --filter main_e -- "$prog"
		assert_success
		assert_line "12"
		assert_line --regexp ': main_e <-main$'
		"$MCLOC" record -A 'main_e@arg1' -R 'main_e@retval' -- "$prog"
		run "$MCLOC" replay
		assert_success
		assert_line --regexp '\|    main_e\(1\) \{$'
		assert_line --regexp '\|    \} /\* main_e = 12 \*/$'
	done
}

@test "--srcline of a program whose text was patched after the maps were first read: its own lines too, not the library's alone" {
	# (A patched text mapping splits in two; the maps file keeps every
	# line seen, so the program's file shows up again after the others.)
	withlib
	"$MCLOC" record -- ./withlib
	# (The line an entry's code is at: the brace after main_e's name;
	# lib_d is written on one line.)
	line() { awk -v f="$2" 'index($0, " " f "(") { print NR; exit }' "$RT/$1"; }
	run "$MCLOC" replay --srcline
	assert_success
	assert_line --regexp "\\|    main_e\\(\\) \\{ /\\* .*withlib\\.c:$(($(line withlib.c main_e) + 1)) \\*/\$"
	assert_line --regexp "\\|      lib_d\\(\\) \\{ /\\* .*shlib\\.c:$(line shlib.c lib_d) \\*/\$"
}

@test "dump --chrome and --perfetto: a JSON parser and protoc read them back, every begin ended" {
	"$MCLOC" record -- ./recorded 1000 2
	"$MCLOC" dump --chrome t.json
	$PY - t.json <<'EOF'
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
# The process and each thread named, as the viewers label their tracks.
meta = [(e["name"], e["args"]["name"]) for e in ev if e["ph"] == "M"]
assert ("process_name", "recorded") in meta and \
    sum(1 for m in meta if m[0] == "thread_name") == len({e["tid"] for e in ev if e["ph"] == "B"}), meta
b = collections.Counter(e["tid"] for e in ev if e["ph"] == "B")
e = collections.Counter(e["tid"] for e in ev if e["ph"] == "E")
assert b == e and sum(b.values()) == 3 * 1000 + 11 + 3, (b, e)
assert sum(1 for x in ev if x["name"] == "leaf") == 2 * (3 * 1000 + 6)
EOF
	# (Nothing on stderr: under UBSan, an empty annotation appended as
	# memcpy(..., NULL, 0) said "null pointer passed" for every slice.)
	run --separate-stderr "$MCLOC" dump --perfetto t.pb
	assert_success
	[ -z "$stderr" ]
	command -v protoc >/dev/null || skip "protoc (protobuf-compiler) is not installed"
	protoc --decode_raw < t.pb > raw.txt
	# Tracks: the process (a ProcessDescriptor, field 3) and its three
	# threads (ThreadDescriptors, field 4).
	[ "$(grep -c '^  60 {' raw.txt)" -eq 4 ]
	# Slices: as many begins (type 1) as ends (type 2), one per call.
	begins=$(grep -c '^    9: 1$' raw.txt)
	ends=$(grep -c '^    9: 2$' raw.txt)
	[ "$begins" -eq $((3 * 1000 + 11 + 3)) ]
	[ "$begins" -eq "$ends" ]
	# Each function's name is interned once in the sequence.
	[ "$(grep -c '^      2: "leaf"$' raw.txt)" -eq 1 ]
}

@test "bad recordings, and a directory that is not one: one line naming the file, exit 1" {
	mkdir empty
	run "$MCLOC" replay -d empty
	assert_failure 1
	assert_output "mcloc: empty: no recording here (mcloc record makes one)"
	run "$MCLOC" replay -d nosuchdir
	assert_failure 1
	assert_output "mcloc: nosuchdir: No such file or directory"
	"$MCLOC" record -- ./recorded
	pid=$(ls mcloc.data | sed -n 's/\.info$//p')
	cp -r mcloc.data good
	# A thread file cut mid-event: the whole events before the cut are
	# replayed, and no more.
	f=$(ls good/*.events)
	truncate -s -8 "$f"
	run "$MCLOC" replay -d good
	assert_success
	# ... and said (a call it leaves open read as one that had not
	# returned when the trace ended).
	assert_line --regexp "^mcloc: good: $pid\.info: [0-9]+ units of events, the thread files [0-9]+: cut short, read as far as they go$"
	# Another version, a broken info, garbage names, a thread file of
	# another recording, one without its info, and one whose thread file
	# is gone (its calls were replayed as if there had been none).
	for what in version info names shortnames thread noinfo nothread; do
		rm -rf bad && cp -r mcloc.data bad
		case $what in
		version) printf '\x09' | dd of=bad/$pid.info bs=1 seek=8 conv=notrunc status=none ;;
		info) truncate -s 20 bad/$pid.info ;;
		names) printf 'garbage that is no name entry' >> bad/$pid.names ;;
		# (Fewer bytes than an entry: they were read as none.)
		shortnames) printf 'abcde' > bad/$pid.names ;;
		thread) printf 'x' | dd of="bad/$(basename "$f")" bs=1 seek=0 conv=notrunc status=none ;;
		noinfo) rm bad/$pid.info ;;
		nothread) rm "bad/$(basename "$f")" ;;
		esac
		run "$MCLOC" replay -d bad
		echo "$what: $output"
		assert_failure 1
		[ "${#lines[@]}" -eq 1 ]
		[[ "$output" == "mcloc: bad: "* ]]
	done
}

@test "record's directory: a recording of before moves to DIR.old; anything else is left alone" {
	"$MCLOC" record -- ./recorded
	first=$(ls mcloc.data)
	"$MCLOC" record -- ./recorded
	[ "$(ls mcloc.data.old)" = "$first" ]
	[ "$(ls mcloc.data)" != "$first" ]
	# A directory holding anything else is not written over, nor is a
	# DIR.old that holds more than a recording.
	mkdir mine && echo keep > mine/notes
	run "$MCLOC" record -d mine -- ./recorded
	assert_failure 1
	assert_output "mcloc: mine: exists and is not a recording (or cannot be read): not written over"
	[ "$(cat mine/notes)" = keep ]
	echo keep > mcloc.data.old/notes
	run "$MCLOC" record -- ./recorded
	assert_failure 1
	assert_output "mcloc: mcloc.data.old: holds more than a recording: mcloc.data is not moved there"
	[ "$(cat mcloc.data.old/notes)" = keep ]
	# A symlink planted as the directory is not followed.
	ln -s mine link
	run "$MCLOC" record -d link -- ./recorded
	assert_failure 1
	[ "$(ls mine)" = notes ]
}

@test "callers are named from the files the program mapped, though it exited first; --srcline says file:line" {
	# (-g: the line table --srcline reads.)
	cc -g -O1 -pg -mfentry "${SAN[@]}" -c "$RT/recorded.c" -o recorded.o
	"$RECORDMCOUNT" recorded.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" recorded.o -o recorded -lpthread \
		-L"$LIBDIR" -lmcloc
	"$MCLOC" record function -- ./recorded
	ls mcloc.data/*.maps
	run "$MCLOC" replay
	assert_success
	assert_line --regexp ': top <-main$'
	assert_line --regexp ': mid <-top$'
	[ "$(echo "$output" | grep -c ': leaf <-mid$')" -eq 6 ]
	refute_output --regexp '<-0x'
	# No times to fold: said, and no file made.
	run "$MCLOC" dump --flame-graph flame.txt
	assert_failure 1
	assert_output --regexp "^mcloc: mcloc.data: process [0-9]+ was recorded with the function tracer: no times to fold \(record function_graph\)\$"
	[ ! -e flame.txt ]
	# The line each function's body starts at, from the source.
	line() { awk -v f="$1" '/^N / && index($0, " " f "(") { print NR + 1; exit }' "$RT/recorded.c"; }
	run "$MCLOC" replay --srcline
	assert_line --regexp ": leaf <-mid /\\* .*recorded\\.c:$(line leaf) \\*/\$"
	"$MCLOC" record -- ./recorded
	run "$MCLOC" replay --srcline
	assert_line --regexp "\\|      mid\\(\\) \\{ /\\* .*recorded\\.c:$(line mid) \\*/\$"
	assert_line --regexp "\\|        leaf\\(\\); /\\* .*recorded\\.c:$(line leaf) \\*/\$"
	# The live trace names them the same way, from the maps it read.
	run "$MCLOC" run function -- ./recorded
	assert_line --regexp ': mid <-top$'
	refute_output --regexp '<-0x'
}

@test "fork and exec are followed: each child, and each program a child execs that carries the runtime, recorded whole" {
	cc -O1 -pg -mfentry "${SAN[@]}" -c "$RT/forkexec.c" -o forkexec.o
	"$RECORDMCOUNT" forkexec.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" forkexec.o -o forkexec -L"$LIBDIR" -lmcloc
	run "$MCLOC" record -- ./forkexec ./recorded
	assert_success
	assert_line "children 0 0"
	assert_line "18"
	# Four recordings: the parent, two children, and the program the
	# first exec'd (its pid's second image: PID-1).
	[ "$(echo "$output" | grep -cE '^mcloc: mcloc.data: [0-9-]+ \((forkexec|recorded)\): 1 thread, [0-9]+ KiB of events, 0 lost$')" -eq 4 ]
	[ "$(ls mcloc.data/*.info | wc -l)" -eq 4 ]
	ls mcloc.data | grep -qE '^[0-9]+-1\.info$'
	# Each process's calls, exactly, in the order they were traced.
	run "$MCLOC" report --sort name
	assert_success
	echo "$output" | awk '/^# process/ { p = $4 } /^(main|work|top|mid|leaf) / { print p, $1, $2 }' > got.txt
	printf '%s\n' '(forkexec) main 1' '(forkexec) work 2' '(forkexec) work 2' \
		'(recorded) leaf 6' '(recorded) main 1' '(recorded) mid 3' '(recorded) top 1' \
		'(forkexec) work 1' | sort > want.txt
	sort got.txt | diff -u want.txt -
	# The tree: each child names its parent (the exec'd program too,
	# under its pid).
	parent=$(ls mcloc.data | sed -n 's/^\([0-9]*\)\.info$/\1/p' | sort -n | head -1)
	run "$MCLOC" info
	[ "$(echo "$output" | grep -c "^parent: *$parent\$")" -eq 3 ]
	assert_line --regexp "^image: +1 \\(exec'd by pid [0-9]+\\)\$"
	# --no-follow: the parent alone.
	rm -rf mcloc.data
	run "$MCLOC" record --no-follow -- ./forkexec ./recorded
	assert_success
	[ "$(ls mcloc.data/*.info | wc -l)" -eq 1 ]
}

@test "triggers: trace_on, trace_off and backtrace at a function's calls; a bad trigger is one line" {
	"$MCLOC" record --trigger 'leaf:backtrace' -- ./recorded
	run "$MCLOC" replay
	[ "$(echo "$output" | grep -cE '\|          /\* backtrace: leaf <- mid <- top <- main \*/$')" -eq 6 ]
	"$MCLOC" replay -j | grep -F '"type":"backtrace","stack":["leaf","mid","top","main"]}'
	# trace_on: nothing before mid's first call (tracing starts off).
	"$MCLOC" record --trigger 'mid:trace_on' -- ./recorded
	run "$MCLOC" report
	echo "$output" | awk 'NR > 2 { print $1, $2 }' | sort > got.txt
	printf '%s\n' 'leaf 6' 'mid 3' > want.txt
	diff -u want.txt got.txt
	# trace_off: mid's first call is the last traced, and its return is
	# kept: every brace closes.
	"$MCLOC" record --trigger 'mid:trace_off' -- ./recorded
	run "$MCLOC" replay
	echo "$output" | grep -v '^#' | sed -E 's/^ +[0-9]+\) +[ +!#*@$]? *([0-9.]+ us)? *\| //' > got.txt
	printf '%s\n' ' main() {' '   top() {' '     mid();' '   }' ' }' > want.txt
	diff -u want.txt got.txt
	# --trigger given twice: both (the second replaced the first).
	"$MCLOC" record --trigger 'mid:trace_on' --trigger 'leaf:backtrace' -- ./recorded
	run "$MCLOC" replay
	refute_line --regexp '(main|top)\(\)'
	[ "$(echo "$output" | grep -cE '/\* backtrace: leaf <- mid')" -eq 6 ]
	run "$MCLOC" record --trigger 'mid:explode' -- ./recorded
	assert_failure 1
	assert_line --regexp "^mcloc: [0-9]+: --trigger 'mid:explode': not FUNC:ACTION, ACTION one of trace_on, trace_off, backtrace, snapshot\$"
	run "$MCLOC" record --trigger 'nosuch:backtrace' -- ./recorded
	assert_failure 1
	assert_line --regexp "^mcloc: [0-9]+: --trigger 'nosuch': matches no traced function\$"
}

@test "record --overwrite: a flight recorder, saved at the end, on a snapshot trigger, on mcloc snapshot PID and on SIGUSR1" {
	# 4 KiB rings: at the end, the last 256 slots (512 units) of each thread.
	run "$MCLOC" record --overwrite --buffer 4 -- ./recorded 200000 2
	assert_success
	assert_line --regexp '^mcloc: [0-9]+: [0-9]+ events overwritten before they were read \(--overwrite\)$'
	run "$MCLOC" info
	assert_line --regexp '^kept: +flight recorder, 1 snapshot$'
	[ "$(echo "$output" | grep -cE '^  [0-9]+ +recorded +512 units ')" -eq 3 ]
	run "$MCLOC" replay
	assert_line --partial "[LOST EVENTS]"
	# A call entered before the window closes unnamed, as "?", never as a
	# site 0, nor with the name of an earlier call at its depth.
	assert_line --regexp '^ +[0-9]+\) .*\|  \} /\* \? \*/$'
	refute_output --regexp '\} /\* 0[ *]'
	run "$MCLOC" report
	assert_success
	refute_line --regexp '^0 '
	# A snapshot trigger: saved there, and at the end.
	"$MCLOC" record --overwrite --trigger 'top:snapshot' -- ./recorded
	run "$MCLOC" info
	assert_line --regexp '^kept: +flight recorder, 2 snapshots$'
	# mcloc snapshot PID, and SIGUSR1 to the recorder, on a program that
	# runs until told.
	cat > loop.c <<'EOF2'
#include <signal.h>
#include <unistd.h>
static volatile sig_atomic_t done;
static void stop(int s) { (void)s; done = 1; }
__attribute__((noinline)) int tick(int i) { return i + 1; }
int main(void) { int i = 0; signal(SIGUSR1, stop); while (!done) { i = tick(i); usleep(1000); } return i < 0; }
EOF2
	cc -O1 -pg -mfentry "${SAN[@]}" -c loop.c -o loop.o
	"$RECORDMCOUNT" loop.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" loop.o -o loop -L"$LIBDIR" -lmcloc
	rm -rf mcloc.data
	"$MCLOC" record --overwrite --buffer 4 -- ./loop &
	rp=$!
	for _ in $(seq 200); do pid=$(pgrep -x loop) && [ -S "$XDG_RUNTIME_DIR/mcloc/$pid" ] && break; sleep 0.05; done
	sleep 0.3
	run "$MCLOC" snapshot "$pid"
	assert_success
	sleep 0.1
	kill -USR1 "$rp"
	sleep 0.1
	kill -USR1 "$pid"
	wait "$rp"
	run "$MCLOC" info
	assert_line --regexp '^kept: +flight recorder, 3 snapshots$'
	run "$MCLOC" snapshot 999999999
	assert_failure 1
	# A program that no flight recorder traces: said, not done (it
	# answered as if saved).
	rm -rf mcloc.data
	"$MCLOC" record -- ./loop &
	rp=$!
	for _ in $(seq 200); do pid=$(pgrep -x loop) && [ -S "$XDG_RUNTIME_DIR/mcloc/$pid" ] && break; sleep 0.05; done
	sleep 0.3
	run "$MCLOC" snapshot "$pid"
	kill -USR1 "$pid"
	wait "$rp"
	assert_failure 1
	assert_output "mcloc: $pid: no flight recorder (mcloc record --overwrite) traces this program"
}

@test "a FIFO or a symlink planted in a recording is refused, not waited on nor followed" {
	"$MCLOC" record -- ./recorded
	pid=$(ls mcloc.data | sed -n 's/\.info$//p')
	ev=$(cd mcloc.data && ls *.events)
	for f in $pid.info $pid.names $pid.maps $ev; do
		rm -rf bad && cp -r mcloc.data bad
		rm bad/$f && mkfifo bad/$f
		# (timeout only ends a hang, which is the failure looked for)
		run timeout 60 "$MCLOC" replay -d bad
		echo "$f: $output"
		assert_failure 1
		assert_output "mcloc: bad: $f: not a regular file"
		rm -rf bad && cp -r mcloc.data bad
		rm bad/$f && ln -s ../mcloc.data/$f bad/$f
		run timeout 60 "$MCLOC" info -d bad
		assert_failure 1
		assert_output "mcloc: bad: $f: a symbolic link (not followed)"
	done
}

@test "record's directory: one planted by another user is not written into, nor is its DIR.old replaced" {
	[ "$(id -u)" = 0 ] || skip "needs root to make a directory of another user's"
	other=$(id -u nobody) || skip "no user nobody"
	mkdir -m 777 planted
	chown "$other" planted
	run "$MCLOC" record -d planted -- ./recorded
	assert_failure 1
	assert_output "mcloc: planted: belongs to another user: not written into"
	[ -z "$(ls planted)" ]
	# Our own recording, with a DIR.old planted beside it.
	"$MCLOC" record -d mine -- ./recorded
	first=$(ls mine)
	mkdir -m 777 mine.old
	echo theirs > mine.old/1.info
	chown -R "$other" mine.old
	run "$MCLOC" record -d mine -- ./recorded
	assert_failure 1
	assert_output "mcloc: mine.old: belongs to another user: mine is not moved there"
	[ "$(ls mine)" = "$first" ]
	[ "$(cat mine.old/1.info)" = theirs ]
}

@test "names, process names and command lines of a recording are data: no control byte or broken UTF-8 reaches the output" {
	"$MCLOC" record -- ./recorded
	pid=$(ls mcloc.data | sed -n 's/\.info$//p')
	# Every name rewritten to one with a newline, an escape sequence, a
	# ';', a quote and bytes of no UTF-8; so is the process's name.
	$PY - mcloc.data/$pid.names mcloc.data/$pid.info <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
out, at = b"", 0
while at + 24 <= len(b):
    addr, off, kind, n = struct.unpack_from("<QQII", b, at)
    name = b'f\n9 x;y"\\\x1b[31m\xff\xc3'
    e = struct.pack("<QQII", addr, off, kind, len(name)) + name + b"\0"
    out += e + b"\0" * (-len(e) % 8)
    at += (24 + n + 1 + 7) & ~7
open(sys.argv[1], "wb").write(out)
info = bytearray(open(sys.argv[2], "rb").read())
info[112:128] = b"\x1b]0;pwned\x07\n\0\0\0\0\0"
open(sys.argv[2], "wb").write(info)
EOF
	"$MCLOC" dump --chrome t.json
	$PY -c 'import json, sys; json.load(open(sys.argv[1], encoding="utf-8"))' t.json
	"$MCLOC" replay --json > j.txt
	$PY -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]' j.txt
	# Folded stacks: each line still one path and its count.
	"$MCLOC" dump --flame-graph flame.txt
	[ "$(wc -l < flame.txt)" -eq 4 ]
	awk '$NF !~ /^[0-9]+$/ { exit 1 }' flame.txt
	for cmd in replay report info; do
		"$MCLOC" $cmd > out.txt
		if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' out.txt; then false; fi
		iconv -f UTF-8 -t UTF-8 out.txt > /dev/null
	done
}

@test "record of a program that exits before it offers control: one line, exit 1, nothing leaked" {
	# (Under the sanitizers, LeakSanitizer would add its report.)
	ASAN_OPTIONS=detect_leaks=1 run "$MCLOC" record -- /bin/true
	assert_failure 1
	assert_output "mcloc: /bin/true: exited before it offered control (is it linked with libmcloc, or given --preload?)"
	# A program that cannot be started: one line, its reason, as a
	# shell's exit status.
	run -127 "$MCLOC" record -- ./no-such-program
	assert_failure 127
	assert_output "mcloc: ./no-such-program: No such file or directory"
	printf 'x\n' > notexec
	run -126 "$MCLOC" record -- ./notexec
	assert_failure 126
	assert_output "mcloc: ./notexec: Permission denied"
}

@test "a forged thread file of calls nested without end: the call tree stays as deep as an event can say" {
	"$MCLOC" record -- ./recorded
	ev=$(ls mcloc.data/*.events)
	# 3000 entries of one site, each inside the last, then their exits:
	# no program's (the runtime hooks 128 calls deep at most).
	$PY - "$ev" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
ip = struct.unpack_from("<Q", b, 56)[0] & ((1 << 48) - 1)
n, out = 3000, []
for i in range(n):
    out.append(struct.pack("<QQ", 2 << 59 | min(i, 0x7ff) << 48 | ip, 1000 + i))
for i in reversed(range(n)):
    out.append(struct.pack("<QQ", 3 << 59 | min(i, 0x7ff) << 48 | (n - i) * 10**6, 10000 + n - i))
open(sys.argv[1], "wb").write(b[:56] + b"".join(out))
EOF
	"$MCLOC" dump --flame-graph flame.txt
	awk -F';' '{ if (NF > max) max = NF } END { print max; exit !(max > 0 && max <= 2048) }' flame.txt
	run "$MCLOC" report
	assert_success
}

@test "a recording of many thousand threads is read in memory that grows with its depth, not its thread count" {
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "the address-space limit below is the sanitizers' to take"
	"$MCLOC" record -- ./recorded
	ev=$(ls mcloc.data/*.events)
	# 20000 thread files of one entry each: 1.4 MB of events.
	$PY - "$ev" <<'EOF'
import os, struct, sys
ev = sys.argv[1]
b = open(ev, "rb").read()[:56]
d, pid = os.path.dirname(ev), os.path.basename(ev).split(".")[0]
os.unlink(ev)
for tid in range(1, 20001):
    h = bytearray(b)
    struct.pack_into("<I", h, 20, tid)
    open(f"{d}/{pid}.{tid}.events", "wb").write(bytes(h) + struct.pack("<QQ", 2 << 59 | 0x1234, 1000 + tid))
# (The info counts the thread files.)
info = bytearray(open(f"{d}/{pid}.info", "rb").read())
struct.pack_into("<I", info, 96, 20000)
open(f"{d}/{pid}.info", "wb").write(info)
EOF
	run bash -c 'ulimit -v 320000 && "$0" report' "$MCLOC"
	assert_success
	assert_line --regexp '^0x1234 +20000 '
	# With too little memory for them all, it says so and fails: it had
	# left the threads past its memory out without a word.
	run bash -c 'ulimit -v 150000 && "$0" report' "$MCLOC"
	assert_failure 1
	assert_line --regexp "^mcloc: mcloc.data: out of memory for the 20000 threads of process [0-9]+$"
	refute_line --regexp '^0x1234 '
}

@test "a thread file cut short while replay reads it: one line and exit 1, not SIGBUS" {
	# Enough events that replay's output fills a FIFO nobody reads yet:
	# replay waits there, half way, while the file is cut.
	"$MCLOC" record -- ./recorded 100000
	f=$(ls mcloc.data/*.events)
	mkfifo out
	"$MCLOC" replay > out 2> err &
	rp=$!
	exec 9< out
	sleep 0.5
	kill -0 "$rp"
	truncate -s 64 "$f"
	cat <&9 > /dev/null
	exec 9<&-
	status=0
	wait "$rp" || status=$?
	cat err
	[ "$status" -eq 1 ]
	[ "$(cat err)" = "mcloc: mcloc.data: a file of the recording was cut short while it was read" ]
}
