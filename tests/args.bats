#!/usr/bin/env bats
# Arguments and return values (-A, -R, --auto-args) on x86_64:
# fixtures/runtime/argsfix.c calls functions of every kind with known
# values, and mcloc record, replay, its JSON and the live trace show them
# exactly.  (aarch64 and riscv64: runtime-cross.bats, under qemu-user.)

load helpers

RT=$SRC/tests/fixtures/runtime

setup() {
	runtime_setup
	traced_fixture argsfix -g
}

# Every kind by hand, as uftrace's -A and -R say them (one option a line
# in argsfix.spec; what replay shows, times masked, in argsfix.want; with
# --auto-args, in argsfix-auto.want: the same on every architecture).
mapfile -t BYHAND < "$RT/argsfix.spec"

@test "-A and -R: integers of each size, stack arguments, floats, strings (NULL, unreadable, cut), characters, pointers" {
	run "$MCLOC" record "${BYHAND[@]}" -- ./argsfix
	assert_success
	assert_line "4660"
	"$MCLOC" replay | mask_times | diff -u "$RT/argsfix.want" -
}

@test "--auto-args: every parameter and result from DWARF, the same values" {
	run "$MCLOC" record --auto-args -- ./argsfix
	assert_success
	"$MCLOC" replay | mask_times | sed -n '5,$p' | diff -u "$RT/argsfix-auto.want" -
	# -A overrides what DWARF says for the functions it names.
	run "$MCLOC" record --auto-args -A 'ints@arg2/x' -- ./argsfix
	assert_success
	run "$MCLOC" replay
	assert_line --partial "ints(0xc8); /* = 5 */"
	assert_line --partial "many(1, 2, 3, 4, 5, 6, 7, 8, 9, 10); /* = 55 */"
}

@test "-A options naming one function add up; without a format a value shows as uftrace shows it" {
	run "$MCLOC" record -A 'ints@arg1' -A 'ints@arg3,arg1/x8' -A 'i*@arg7' \
		-A 'letter@arg2' -R 'letter@retval' -- ./argsfix
	assert_success
	run "$MCLOC" replay
	# (-5 as int8_t, and -1000 as int16_t, in registers whose upper half
	# is zero: small negative numbers; -5000000000: hex.)
	assert_line --regexp "ints\\(0xfb, -1000, 0xfffffffed5fa0e00\\);$"
	assert_line --partial "letter(4660); /* = 66 */"
	run "$MCLOC" record -R 'ints@arg1' -- ./argsfix
	assert_failure
	assert_output "mcloc: -R: 'ints@arg1': -R takes FUNC@retval[/FORMAT] (arguments are -A's)"
	# A program without DWARF: said, and traced without arguments.
	cc -O1 -pg -mfentry -c "$RT/argsfix.c" -o nodw.o
	"$RECORDMCOUNT" nodw.o
	"$OBJPATCH" link --nop --runtime -- cc nodw.o -o nodw -L"$LIBDIR" -lmcloc
	run "$MCLOC" record --auto-args -- ./nodw
	assert_success
	assert_line "mcloc: record: --auto-args: no traced function has DWARF that describes it (build with -g)"
}

@test "JSON lines and the Chrome file carry the values as JSON: numbers, strings, null" {
	"$MCLOC" record --auto-args -- ./argsfix
	"$MCLOC" replay -j > out.json
	$PY - out.json <<'EOF2'
import json, sys
got = {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e["type"] == "entry" and "args" in e:
        got[e["function"]] = e["args"]
    if e["type"] == "exit" and "retval" in e:
        got[e["function"] + "="] = e["retval"]
want = {
    "ints": [-5, 200, -1000, 60000, -100000, 4000000000, -5000000000, 10000000000], "ints=": 5,
    "many": list(range(1, 11)), "many=": 55,
    "floats": [1.5, -2.25, 7, 1e10], "floats=": 9999999999.25,
    "half": [3.0], "half=": 1.5,
    "strings": ["hello \"world\"\n", None, "0x10", "0123456789abcdef" * 4], "strings=": "llo \"world\"\n",
    "letter": ["A", "0x1234"], "letter=": "B", "main=": 0,
}
for k, v in want.items():
    assert got.get(k) == v, (k, got.get(k), v)
print("ok")
EOF2
	# The Chrome file: a call's arguments on its B event, its value on E.
	"$MCLOC" dump --chrome c.json
	$PY - c.json <<'EOF2'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
b = {e["name"]: e["args"] for e in ev if e["ph"] == "B" and "args" in e}
e = {e["name"]: e["args"] for e in ev if e["ph"] == "E" and "args" in e}
assert b["strings"] == {"args": ["hello \"world\"\n", None, "0x10", "0123456789abcdef" * 4]}, b["strings"]
assert e["half"] == {"retval": 1.5} and e["main"] == {"retval": 0}, e
print("ok")
EOF2
}

@test "the function tracer shows arguments; the live trace (mcloc run) shows them too" {
	"$MCLOC" record function -A 'ints@arg1/d8,arg7/d' -A 'strings@arg1/s' -- ./argsfix
	run "$MCLOC" replay
	assert_line --regexp '^ +argsfix-[0-9]+ +\[[0-9]{3}\] [0-9.]+: ints\(-5, -5000000000\) <-main$'
	assert_line --regexp ': strings\("hello \\"world\\"\\n"\) <-main$'
	run "$MCLOC" run function_graph -o trace.txt --auto-args -- ./argsfix
	assert_success
	run grep -c 'strings("hello' trace.txt
	assert_output 1
	grep -q 'many(1, 2, 3, 4, 5, 6, 7, 8, 9, 10); /\* = 55 \*/' trace.txt
	grep -q '} /\* main = 0 \*/' trace.txt
}

@test "bad -A and -R get one line naming the problem, and exit 1" {
	for spec in 'ints@arg0' 'ints@arg33' 'ints@arg1/z' 'ints@arg1/d12' 'ints@fparg9' \
		'ints@' '@arg1' 'ints@arg1/s32'; do
		run "$MCLOC" record -A "$spec" -- ./argsfix
		assert_failure
		assert_output --regexp "^mcloc: -A: '.*': "
		[ "${#lines[@]}" -eq 1 ]
	done
	run "$MCLOC" record -A 'floats@arg1/f' -- ./argsfix
	assert_failure
	assert_output "mcloc: -A: 'floats@arg1/f': 'arg1/f': a floating-point argument is fpargN"
	run "$MCLOC" record -A 'nosuch@arg1' -- ./argsfix
	assert_failure
	assert_line "mcloc: record: 'nosuch@arg1': matches no traced function"
	run "$MCLOC" record function -R 'ints@retval' -- ./argsfix
	assert_failure
	assert_line "mcloc: record: 'ints@retval': a return value needs function_graph"
	run "$MCLOC" run profile -A 'ints@arg1' -- ./argsfix
	assert_failure
	assert_line "mcloc: run: -A, -R and --auto-args show values in events: profile keeps none"
}

@test "-A that matches nothing releases the program it holds, as a refused --filter does" {
	# record follows children by default: its program waits to be traced
	# until released, and the failed -A must say no trace is coming.
	for cmd in "record" "record --no-follow" "run function_graph"; do
		run $MCLOC $cmd -A 'nosuch@arg1' -- ./argsfix
		assert_failure
		assert_line --regexp "^mcloc: [a-z]+: 'nosuch@arg1': matches no traced function$"
		refute_line --partial "no controller started a trace"
	done
	# Named by the subcommand the user typed.
	assert_line "mcloc: run: 'nosuch@arg1': matches no traced function"
}

@test "JSON strings keep UTF-8 as characters; text escapes every byte past ASCII" {
	traced_fixture argsstr
	run "$MCLOC" record -A 'word@arg1/s' -- ./argsstr
	assert_success
	run "$MCLOC" replay
	assert_line --partial 'word("w\xc3\xb6rld \xe2\x82\xac \xff");'
	assert_line --partial 'word("\x02\x33\x66");'
	"$MCLOC" replay -j > out.json
	$PY - out.json <<'EOF2'
import json, sys
events = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
args = [e["args"] for e in events if e["function"] == "word" and e["type"] == "entry"]
assert len(args) == 3 and args[1] == ["a /* b */ c"] and args[2] == ["\x023f"], args
assert args[0][0].startswith("w\u00f6rld \u20ac "), ascii(args[0])
print("ok")
EOF2
}

@test "the usage of record, run and trace names -A, -R and --auto-args" {
	for cmd in "record" "run" "trace"; do
		run $MCLOC $cmd --bogus
		assert_failure 2
		assert_line --regexp "^mcloc: $cmd: usage: mcloc $cmd .*\[-A FUNC@ARGS\] \[-R FUNC@retval\] \[--auto-args\]"
	done
}

@test "a string's star-slash does not end the comment its return value is shown in" {
	traced_fixture argsstr
	run "$MCLOC" record -A 'word@arg1/s' -R 'word@retval/s' -- ./argsstr
	assert_success
	run "$MCLOC" replay
	assert_line --partial 'word("a /* b *\x2f c"); /* = "a /* b *\x2f c" */'
}
