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
	cc -O1 -pg -mfentry "${SAN[@]}" -c "$RT/argsfix.c" -o nodw.o
	"$RECORDMCOUNT" nodw.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" nodw.o -o nodw -L"$LIBDIR" -lmcloc
	run "$MCLOC" record --auto-args -- ./nodw
	assert_success
	assert_line "mcloc: record: --auto-args: no traced function has DWARF that describes it (build with -g)"
}

@test "JSON lines and the Chrome file carry the values as JSON: numbers, strings, null" {
	"$MCLOC" record --auto-args -- ./argsfix
	"$MCLOC" replay -j > out.json
	$PY - out.json <<'EOF2'
import json, sys
got, cut = {}, {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    if "cut" in e or "retval_cut" in e:
        cut[e["function"]] = (e.get("cut"), e.get("retval_cut"))
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
# The string cut to 64 bytes is said to be, apart from its value.
assert cut == {"strings": ([3], None)}, cut
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
assert b["strings"] == {"args": ["hello \"world\"\n", None, "0x10", "0123456789abcdef" * 4],
                        "cut": [3]}, b["strings"]
assert e["half"] == {"retval": 1.5} and e["main"] == {"retval": 0}, e
print("ok")
EOF2
	# Perfetto: the same values as debug annotations, typed (read by a
	# protobuf reader of the test's own).
	"$MCLOC" dump --perfetto p.pb
	$PY "$SRC/tests/lib/perfetto-events.py" p.pb > p.json
	$PY - p.json <<'EOF2'
import json, sys
stack, b, e = [], {}, {}
for line in open(sys.argv[1]):
    x = json.loads(line)
    if x["type"] == 1:
        stack.append(x["name"])
        if x["args"]:
            b[x["name"]] = x["args"]
    elif x["type"] == 2:
        name = stack.pop()
        if x["args"]:
            e[name] = x["args"]
P = lambda v: {"pointer": v}
assert b["ints"] == {f"args[{i}]": v for i, v in enumerate(
    [-5, 200, -1000, 60000, -100000, 4000000000, -5000000000, 10000000000])}, b["ints"]
assert b["floats"] == {"args[0]": 1.5, "args[1]": -2.25, "args[2]": 7, "args[3]": 1e10}, b["floats"]
assert b["strings"] == {"args[0]": "hello \"world\"\\x0a", "args[1]": P(0), "args[2]": P(0x10),
                        "args[3]": "0123456789abcdef" * 4, "cut": "3"}, b["strings"]
assert b["letter"] == {"args[0]": "A", "args[1]": P(0x1234)}, b["letter"]
assert e["ints"] == {"retval": 5} and e["half"] == {"retval": 1.5}, e
assert e["floats"] == {"retval": 9999999999.25} and e["many"] == {"retval": 55}, e
print("ok")
EOF2
}

# forged HOW: argsfix recorded with its spec, then its first return
# value's DATA rewritten by tests/lib/forge-data.py HOW.
forged() {
	mapfile -t spec < "$RT/argsfix.spec"
	"$MCLOC" record "${spec[@]}" -- ./argsfix
	$PY "$SRC/tests/lib/forge-data.py" "$(ls mcloc.data/*.events)" "$1"
}

@test "a forged DATA event of two return values: replay shows one, and its JSON lines stay JSON" {
	# The first exit's DATA rewritten: 5, then "ab", both return values.
	forged two-retvals
	run "$MCLOC" replay
	assert_line --partial "ints(-5, 200, -1000, 60000, -100000, 4000000000, -5000000000, 10000000000); /* = 5 */"
	"$MCLOC" replay -j > out.json
	$PY -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' out.json
}

@test "a forged return value of no bytes is shown unreadable, not read past" {
	forged int-len0
	# (Under the sanitizers, the shift by its width less one was
	# undefined.)
	run "$MCLOC" replay
	assert_success
	assert_line --partial "ints(-5, 200, -1000, 60000, -100000, 4000000000, -5000000000, 10000000000); /* = ? */"
	"$MCLOC" replay -j > out.json
	$PY -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' out.json
	grep -q '"retval":null' out.json
}

@test "a forged DATA event of 2^32 slots and more is one slot skipped: the thread's later events are still read" {
	# The first exit's DATA header: a payload whose slot count wraps 32
	# bits (its own slots stay, read as no event).
	forged huge
	run "$MCLOC" replay
	assert_success
	assert_line --regexp "ints\(-5, 200, -1000, 60000, -100000, 4000000000, -5000000000, 10000000000\);$"
	assert_line --partial "letter('A', 0x1234); /* = 'B' */"
}

@test "the function tracer shows arguments; the live trace (mcloc run) shows them too" {
	"$MCLOC" record function -A 'ints@arg1/d8,arg7/d' -A 'strings@arg1/s' -- ./argsfix
	run "$MCLOC" replay
	assert_line --regexp '^ +argsfix-[0-9]+ +\[[0-9]{3}\] +[0-9.]+: ints\(-5, -5000000000\) <-main$'
	assert_line --regexp ': strings\("hello \\"world\\"\\n"\) <-main$'
	run "$MCLOC" run function_graph -o trace.txt --auto-args -- ./argsfix
	assert_success
	run grep -c 'strings("hello' trace.txt
	assert_output 1
	grep -q 'many(1, 2, 3, 4, 5, 6, 7, 8, 9, 10); /\* = 55 \*/' trace.txt
	grep -q '} /\* main = 0 \*/' trace.txt
}

@test "strings that cannot be read whole: the bytes before the fault, or the pointer; never a fault, with process_vm_readv, refused it, or killed for it" {
	traced_fixture argsfault -g
	# (No argument: process_vm_readv; 1, 13: a seccomp filter refuses it
	# with EPERM, EACCES, and the runtime copies through a pipe; kill: the
	# filter kills for it, and a filtered thread never tries it.)
	for deny in "" 1 13 kill; do
		run "$MCLOC" record -A 'str@arg1/s,arg2/s' -- ./argsfault $deny
		assert_success
		assert_line done
		refute_output --partial 'runtime error'
		run "$MCLOC" replay
		# (The sanitized build's mcloc says where it went wrong.)
		refute_output --partial 'runtime error'
		assert_line --partial 'str("plain", "plain");'
		assert_line --partial 'str("null", NULL);'
		assert_line --regexp 'str\("prot_none", 0x[0-9a-f]+\);'
		assert_line --partial 'str("before_unmapped", "xxxxx"...);'
		assert_line --partial 'str("file", "file");'
		assert_line --regexp 'str\("past_eof", 0x[0-9a-f]+\);'
	done
}

@test "a call the program's own ops traces too, with or without its registers: the arguments all there, the return hooked" {
	traced_fixture argsshared -I"$SRC/include"
	# (Through the list by the args trampoline's frame, where the graph
	# reads them before it hooks the return; or by the registers that
	# the program's ops asked for and the session's did not.)
	for how in "" regs; do
		run "$MCLOC" record -A 'many@arg1,arg7,arg8,arg9,arg10' -R 'many@retval' -- \
			./argsshared $how
		assert_success
		assert_line "registered 0, counted 1"
		run "$MCLOC" replay
		assert_line --regexp " us \|    many\(1, 7, 8, 9, 10\); /\* = 55 \*/$"
		run "$MCLOC" record function -A 'many@arg1,arg7,arg8,arg9,arg10' -- ./argsshared $how
		assert_success
		run "$MCLOC" replay
		assert_line --regexp ": many\(1, 7, 8, 9, 10\) <-main$"
	done
}

@test "--auto-args captures no argument of a function that returns a struct: a hidden pointer may come first" {
	traced_fixture argsabi -g
	run "$MCLOC" record --auto-args -- ./argsabi
	assert_success
	assert_line 39
	run "$MCLOC" replay
	assert_line --partial "make();"
	assert_line --partial "after(5); /* = 6 */"
	# One of 16 bytes comes back in registers: its arguments are shown
	# (they were not), its result is not.
	assert_line --regexp "\\|    pair\\(7, -8\\);\$"
}

@test "traced calls of a signal handler that interrupts returns: every call of the thread once, each event whole" {
	traced_fixture argssignal -g -pthread
	run "$MCLOC" record --buffer 16384 -A 'outer@arg1/s' -A 'inner@arg1/s' -A 'in_handler@arg1/s' \
		-R 'outer@retval/s' -R 'inner@retval/s' -R 'in_handler@retval' -- ./argssignal
	assert_success
	assert_line done
	refute_output --regexp "[1-9][0-9]* (events )?lost"
	"$MCLOC" replay > out.txt
	[ "$(grep -c ' outer("main string") {$' out.txt)" -eq 20000 ]
	[ "$(grep -c '} /\* outer = "main string" \*/$' out.txt)" -eq 20000 ]
	[ "$(grep -c -E ' inner\("main string"\)(; /\* = "main string" \*/| \{)$' out.txt)" -eq 20000 ]
	# (The handler's calls, where traced, whole; nothing else.)
	run grep -v -E ' (outer\("main string"\) \{|\} /\* outer = "main string" \*/|inner\("main string"\)(; /\* = "main string" \*/| \{)|\} /\* inner = "main string" \*/|in_handler\("handler"\); /\* = 7 \*/|on_signal\(\) \{|\}|main\(\) \{|signaller\(\);)$' out.txt
	refute_output --regexp '^ +[0-9]+\) '
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
	# A glob that matches nothing now may match a library loaded later:
	# said in a line, kept, and the program traced (it was refused, also
	# where a dlopen()ed library alone was named, as uftrace does not).
	run "$MCLOC" record -A 'nosuch@arg1' -- ./argsfix
	assert_success
	assert_line "mcloc: record: 'nosuch@arg1': matches no traced function yet: kept for images that register later"
	assert_line "4660"
	run "$MCLOC" record function -R 'ints@retval' -- ./argsfix
	assert_failure
	assert_line "mcloc: record: 'ints@retval': a return value needs function_graph"
	run "$MCLOC" run profile -A 'ints@arg1' -- ./argsfix
	assert_failure
	assert_line "mcloc: run: -A, -R and --auto-args show values in events: profile keeps none"
}

@test "-R refused releases the program it holds, as a refused --filter does" {
	# record follows children by default: its program waits to be traced
	# until released, and the failed -R must say no trace is coming.
	for cmd in "record function" "record function --no-follow" "run function"; do
		run $MCLOC $cmd -R 'ints@retval' -- ./argsfix
		assert_failure
		assert_line --regexp "^mcloc: [a-z]+: 'ints@retval': a return value needs function_graph$"
		refute_line --partial "no controller started a trace"
	done
	# Named by the subcommand the user typed.
	assert_line "mcloc: run: 'ints@retval': a return value needs function_graph"
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
		# One line, which names the bad option (getopt's was a second).
		assert_output --regexp "^mcloc: $cmd: '--bogus': not an option here, or its value is missing; usage: mcloc $cmd .*\[-A FUNC@ARGS\] \[-R FUNC@retval\] \[--auto-args\]"
		[ "${#lines[@]}" -eq 1 ]
	done
}

@test "a string's star-slash does not end the comment its return value is shown in" {
	traced_fixture argsstr
	run "$MCLOC" record -A 'word@arg1/s' -R 'word@retval/s' -- ./argsstr
	assert_success
	run "$MCLOC" replay
	assert_line --partial 'word("a /* b *\x2f c"); /* = "a /* b *\x2f c" */'
}

@test "--auto-args and --srcline with gcc and clang: K&R floats read as the doubles they are, another calling convention left out, no .debug_aranges needed" {
	# (Built plain: clang's sanitizer runtime is not the sanitized
	# libmcloc's, which comes first by LD_PRELOAD instead.)
	for cc in $(installed_ccs); do
		$cc -g -O1 -pg -mfentry -c "$SRC/tests/fixtures/runtime/argsconv.c" -o "$T/ac-$cc.o"
		"$RECORDMCOUNT" "$T/ac-$cc.o"
		"$OBJPATCH" link --nop --runtime -- $cc "$T/ac-$cc.o" -o "$T/ac-$cc" \
			-L"$LIBDIR" -lmcloc
		cd "$T"
		rm -rf mcloc.data
		run env LD_PRELOAD="$(san_preload)" ASAN_OPTIONS=detect_leaks=0 \
			"$MCLOC" record --auto-args -- "./ac-$cc"
		assert_success
		refute_output --partial "no traced function has DWARF"
		run "$MCLOC" replay --srcline
		assert_success
		# (clang writes no .debug_aranges: the units' own ranges then.)
		assert_line --regexp "kr\(3, 2\.5\); /\* = 5\.5 \*/ /\* .*argsconv\.c:[0-9]+ \*/\$"
		# (clang says ms_abi in DWARF: the arguments are not where the
		# platform's go, so none are shown rather than wrong ones.)
		[ $cc != clang ] || assert_line --regexp "msabi\(\); /\* .*argsconv\.c:[0-9]+ \*/\$"
		assert_line --regexp "main\(\) \{ /\* .*argsconv\.c:[0-9]+ \*/\$"
	done
}

# The -A and -R globs go to the program as well: a plugin loaded with
# dlopen() while the trace runs gets its arguments and return values
# captured (before, the globs were resolved once, by the controller, and
# plugin_fn's were never captured).  A glob that matches nothing yet is
# said in one line each, and kept; one that matches nothing with no other
# matching is still refused.  The triggers' and set_graph_function's
# globs extend to the plugin as well.
@test "-A, -R, triggers and set_graph_function globs reach a plugin loaded while the trace runs" {
	cc -O1 -pg -mfentry -fPIC "${SAN[@]}" -c "$RT/plugfn.c" -o plug.o
	"$RECORDMCOUNT" plug.o
	"$OBJPATCH" link --nop --runtime -- cc -shared "${SAN[@]}" plug.o -o libplug.so \
		-L"$LIBDIR" -lmcloc
	traced_fixture plughost
	run "$MCLOC" record -A 'main_fn@arg1' -A 'plugin_fn@arg1' -R 'plugin_fn@retval' \
		-- ./plughost ./libplug.so
	assert_success
	assert_line "9"
	assert_line "mcloc: record: 'plugin_fn@arg1': matches no traced function yet: kept for images that register later"
	"$MCLOC" replay | mask_times | grep -v '^#' > replay.txt
	printf '%s\n' ' C)      |  main() {' \
		' C) D us |    main_fn(0);' ' C) D us |    plugin_fn(0); /* = 1 */' \
		' C) D us |    main_fn(1);' ' C) D us |    plugin_fn(2); /* = 3 */' \
		' C) D us |    main_fn(2);' ' C) D us |    plugin_fn(4); /* = 5 */' \
		' C) D us |  }' > want.txt
	diff -u want.txt replay.txt
	# The function tracer: arguments need the registers there too.
	run "$MCLOC" record function -A '*_fn@arg1' -- ./plughost ./libplug.so
	assert_success
	run "$MCLOC" replay
	assert_line --regexp ': plugin_fn\(4\) <-main$'
	# A glob that only the plugin will match, alone (it was refused).
	run "$MCLOC" record -A 'plugin_fn@arg1' -- ./plughost ./libplug.so
	assert_success
	run "$MCLOC" replay
	[ "$(echo "$output" | grep -cE '\|    plugin_fn\([024]\);$')" -eq 3 ]
	# set_graph_function and a trigger by globs matching main_fn now and
	# plugin_fn later: the graph keeps plugin_fn's calls, and its
	# backtraces are marked.
	run "$MCLOC" record --graph-function '*_fn' --trigger '*_fn:backtrace' \
		-- ./plughost ./libplug.so
	assert_success
	run "$MCLOC" replay
	assert_success
	[ "$(echo "$output" | grep -cE '\|  plugin_fn\(\) \{$')" -eq 3 ]
	[ "$(echo "$output" | grep -cE '\|    /\* backtrace: plugin_fn \*/$')" -eq 3 ]
	[ "$(echo "$output" | grep -cE '\|  main_fn\(\) \{$')" -eq 3 ]
	refute_line --regexp 'main\(\)'
}

# The argument globs' tables were made again at each registration and all
# kept to the session's end (a call's return read its entry): a program
# of 2000 functions that loaded and unloaded a plugin 2000 times grew by
# 285 MB under -A '*@arg1'.  Replaced tables are retired now, and one that
# would be the same is not made.
@test "a plugin loaded and unloaded 300 times under -A globs: the program's memory does not grow with the cycles" {
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "ASan's quarantine keeps what is freed: memory grows by design"
	cc -O1 -pg -mfentry -fPIC "${SAN[@]}" -c "$RT/plugfn.c" -o plug.o
	"$RECORDMCOUNT" plug.o
	"$OBJPATCH" link --nop --runtime -- cc -shared "${SAN[@]}" plug.o -o libplug.so \
		-L"$LIBDIR" -lmcloc
	{
		printf '#include <dlfcn.h>\n#include <stdio.h>\n'
		for i in $(seq 0 1999); do
			printf '__attribute__((noinline)) int f%d(int x) { return x + %d; }\n' "$i" "$i"
		done
		cat <<'C'
static long rss_kib(void)
{
	long a = 0, b = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f && fscanf(f, "%ld %ld", &a, &b) != 2)
		b = 0;
	if (f)
		fclose(f);
	return b * 4;
}

int main(int argc, char **argv)
{
	long s = f0(1) + f1999(1), first = 0;

	for (int i = 0; i < 300; i++) {
		void *h = dlopen(argv[1], RTLD_NOW);
		int (*g)(int) = h ? (int (*)(int))dlsym(h, "plugin_fn") : 0;

		if (!g)
			return 1;
		s += g(i);
		dlclose(h);
		if (i == 10)
			first = rss_kib();
	}
	printf("%ld grew %ld KiB\n", s, rss_kib() - first);
	return argc < 2;
}
C
	} > many.c
	cc -O1 -pg -mfentry "${SAN[@]}" -c many.c -o many.o
	"$RECORDMCOUNT" many.o
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" many.o -o many -L"$LIBDIR" -lmcloc -ldl
	for spec in '*@arg1' 'f1*@arg1'; do
		run "$MCLOC" run function -A "$spec" -o /dev/null -- ./many ./libplug.so
		assert_success
		grew=$(echo "$output" | sed -n 's/^[0-9]* grew \(-*[0-9]*\) KiB$/\1/p')
		echo "$spec: grew $grew KiB"
		[ -n "$grew" ] && [ "$grew" -lt 16384 ]
	done
}
