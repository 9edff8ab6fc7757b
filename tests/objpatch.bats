#!/usr/bin/env bats
# objpatch inspect and check on relocatable objects.
load helpers

entries() { $PY -c 'import json,sys; print(sum(f["summary"]["entries"] for f in json.load(sys.stdin)))'; }

@test "check is clean on recordmcount's tables, and inspect counts every entry" {
	build_objs o gcc -O2 -pg -mfentry
	"$RECORDMCOUNT" "$T"/o/*.o
	run "$OBJPATCH" check "$T"/o/*.o
	assert_success
	assert_output ""
	want=$(for o in "$T"/o/*.o; do $MCTABLE "$o"; done | wc -l)
	[ "$("$OBJPATCH" -j inspect "$T"/o/*.o | entries)" -eq "$want" ]
}

@test "check is clean on gcc -mrecord-mcount and -pg (mcount in the prologue) tables" {
	build_objs g gcc -O2 -pg -mfentry -mrecord-mcount
	build_objs p gcc -O2 -pg -mrecord-mcount
	run "$OBJPATCH" check "$T"/g/*.o "$T"/p/*.o
	assert_success
}

@test "check accepts NOPed sites and inspect reports them as NOPs" {
	build_objs n gcc -O2 -pg -mfentry
	"$RECORDMCOUNT" --nop "$T"/n/*.o
	run "$OBJPATCH" check "$T"/n/*.o
	assert_success
	run "$OBJPATCH" inspect "$T/n/stats.o"
	assert_output --partial "nop (6 bytes)"
	refute_output --partial "call __fentry__"
}

@test "aarch64 -fpatchable-function-entry=2 entries are patchable NOP pairs" {
	need aarch64-linux-gnu-gcc
	build_objs a aarch64-linux-gnu-gcc -O2 -fpatchable-function-entry=2
	run "$OBJPATCH" check "$T"/a/*.o
	assert_success
	run "$OBJPATCH" inspect "$T/a/stats.o"
	assert_output --partial "patchable nops (8 bytes)"
}

@test "inspect --functions prints one name per traced function" {
	gcc -O2 -pg -mfentry -c "$DEMO/stats.c" -I"$DEMO" -o "$T/s.o"
	"$RECORDMCOUNT" "$T/s.o"
	run "$OBJPATCH" inspect --functions "$T/s.o"
	assert_success
	assert_output "stats_clamp
stats_add
stats_mean"
}

# slot_layout ARCH FLAG: inspect of a program whose NOP runs start before
# their functions, as compiled and after objpatch link --runtime (which makes
# an ops slot of the NOPs before each function): each entry is named after
# its own function, which --functions lists.
slot_layout() {
	need "$1-linux-gnu-gcc"
	local cc=$1-linux-gnu-gcc n len
	$PY "$SRC/tests/fixtures/runtime/gen.py" "$T/gen.c" 5
	echo 'int main(void) { return 0; }' > "$T/main.c"
	$cc -O2 "$2" -falign-functions=8 -c "$T/gen.c" -o "$T/gen.o"
	$cc -O2 -c "$T/main.c" -o "$T/main.o"
	$cc "$T/main.o" "$T/gen.o" -o "$T/plain"
	"$OBJPATCH" link --nop --runtime -- $cc "$T/main.o" "$T/gen.o" -o "$T/prog"
	for f in gen.o plain prog; do
		len=16
		[ $f != prog ] || len=8	# (the slot alone)
		run "$OBJPATCH" inspect --functions "$T/$f"
		assert_success
		assert_output "$(printf 'fn%d\n' 0 1 2 3 4)"
		run "$OBJPATCH" inspect "$T/$f"
		assert_success
		for n in 0 1 2 3 4; do
			assert_line --regexp " fn$n-0x8 +patchable nops \($len bytes\)$"
		done
	done
}

@test "aarch64 -fpatchable-function-entry=4,2: inspect names each entry after its function, slot or not" {
	slot_layout aarch64 -fpatchable-function-entry=4,2
}

@test "riscv64 -fpatchable-function-entry=8,4: inspect names each entry after its function, slot or not" {
	slot_layout riscv64 -fpatchable-function-entry=8,4
}

@test "inspect --functions lists no function for an entry past its end (a replaced weak definition)" {
	# quiet has no site of its own; the weak hook's code follows it, and
	# its entry stays in an unsorted link once the strong hook wins.
	printf '%s\n' '__attribute__((noinline, no_instrument_function)) int quiet(int x) { return x * 3; }' \
		'__attribute__((weak, noinline)) int hook(int x) { return x + 1; }' > "$T/w.c"
	echo 'int hook(int x) { return x + 2; }' > "$T/s.c"
	echo 'int quiet(int), hook(int); int main(int c, char **v) { (void)v; return quiet(c) + hook(c) == 0; }' > "$T/m.c"
	for o in w s m; do
		gcc -O2 -pg -mfentry -c "$T/$o.c" -o "$T/$o.o"
	done
	"$RECORDMCOUNT" "$T"/{w,s,m}.o
	run "$OBJPATCH" link --no-sort -- gcc "$T"/{w,s,m}.o -o "$T/prog"
	assert_success
	run "$OBJPATCH" check "$T/prog"
	assert_output --partial "quiet+0x"
	assert_output --partial "lies in no function"
	run "$OBJPATCH" inspect --functions "$T/prog"
	assert_success
	assert_output "hook
main"
	# The kernel's conventions: check --kernel takes the entry in no
	# function as a note but still fails on the disorder; sort --kernel
	# sorts it in, as 6.1's sorttable does, and adds no symbol.
	run "$OBJPATCH" check --kernel "$T/prog"
	assert_failure 1
	refute_output --partial "lies in no function"
	assert_output --partial "the table is not sorted"
	run "$OBJPATCH" check --kernel -v "$T/prog"
	assert_output --partial "note: objpatch: quiet+0x"
	cp "$T/prog" "$T/kern"
	run "$OBJPATCH" sort --kernel -v "$T/kern"
	assert_success
	assert_output --partial "3 of 3 entries kept"
	run "$OBJPATCH" check --kernel "$T/kern"
	assert_success
	run "$OBJPATCH" check "$T/kern"
	assert_failure 1
	assert_output --partial "lies in no function"
	run "$OBJPATCH" -j inspect "$T/kern"
	assert_output --partial '"entries":3'
	[ "$(nm "$T/kern" | grep -c mcount_loc)" = "$(nm "$T/prog" | grep -c mcount_loc)" ]
	run "$OBJPATCH" sort -v "$T/prog"
	assert_output --partial "2 of 3 entries kept"
}

@test "-j and -p print the same JSON, before or after the subcommand" {
	gcc -O2 -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	"$RECORDMCOUNT" "$T/f.o"
	a=$("$OBJPATCH" -j inspect "$T/f.o" | $PY -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))')
	b=$("$OBJPATCH" inspect -p "$T/f.o" | $PY -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))')
	[ "$a" = "$b" ]
	run "$OBJPATCH" -j check "$T/f.o"
	assert_success
	assert_output --partial '"problems":[]'
}

@test "check finds every planted defect: deleted, shifted, duplicate, into data, on a non-call" {
	cat > "$T/pl.c" <<'C'
int data_word = 42;
int one(int x) { return x + data_word; }
int two(int x) { return one(x) * 2 + 1; }
int three(int x) { return two(x) - one(x); }
C
	gcc -O2 -pg -mfentry -c "$T/pl.c" -o "$T/pl.o"
	"$RECORDMCOUNT" "$T/pl.o"
	assert_finds_planted "$T/pl.o"
	for d in "$T"/planted/*.o; do
		run "$OBJPATCH" check "$d"
		assert_output --partial "two+0x0: call to __fentry__ missing from the table"
	done
}

@test "a site whose first byte became 0xa9 (the runtime's parked form) in an object is damage: check and inspect say so" {
	# What a kernel or a module is built from: no objpatch link --runtime
	# parks its sites, and the kernel's ftrace refuses anything but the
	# call or the NOP at one.
	printf 'int one(int x) { return x + 1; }\nint two(int x) { return one(x) * 2; }\n' > "$T/p.c"
	gcc -O2 -pg -mfentry -mrecord-mcount -mnop-mcount -fno-pie -c "$T/p.c" -o "$T/nop.o"
	gcc -O2 -pg -mfentry -fno-pie -c "$T/p.c" -o "$T/call.o"
	"$RECORDMCOUNT" "$T/call.o"
	for o in nop call; do
		$PY - "$T/$o.o" "$T/$o-a9.o" <<-'PY'
		import sys
		from elftools.elf.elffile import ELFFile
		src, dst = sys.argv[1:]
		elf = ELFFile(open(src, "rb"))
		text = elf.get_section_by_name(".text")
		two = next(s for s in elf.get_section_by_name(".symtab").iter_symbols() if s.name == "two")
		b = bytearray(open(src, "rb").read())
		at = text["sh_offset"] + two["st_value"]
		assert b[at] in (0x0f, 0xe8), hex(b[at])
		b[at] = 0xa9
		open(dst, "wb").write(b)
		PY
		run "$OBJPATCH" check "$T/$o-a9.o"
		assert_failure 1
		assert_output --partial "two+0x0: __mcount_loc entry 1: neither a call to an mcount symbol nor a NOP (a9 "
		run "$OBJPATCH" inspect "$T/$o-a9.o"
		assert_line --regexp '^  \.text\+0x[0-9a-f]+ +two\+0x0 +other: a9 '
		refute_output --partial "parked"
	done
	# Linked, by a link that made no direct stubs (a kernel's, say), the
	# same.
	cc -shared "$T/nop-a9.o" -o "$T/a9.so"
	run "$OBJPATCH" check "$T/a9.so"
	assert_failure 1
	assert_output --partial "two+0x0: __mcount_loc entry 1: neither a call to an mcount symbol nor a NOP (a9 "
}

@test "an object without calls and without a table is clean; calls without a table are not" {
	gcc -O2 -c "$DEMO/fib.c" -I"$DEMO" -o "$T/plain.o"
	run "$OBJPATCH" check "$T/plain.o"
	assert_success
	gcc -O2 -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/untabled.o"
	run "$OBJPATCH" check "$T/untabled.o"
	assert_failure 1
	assert_output --partial "no __mcount_loc or __patchable_function_entries table"
}

@test "malformed objects get one diagnostic line and exit 1 from inspect and check" {
	gcc -O2 -pg -mfentry -c "$DEMO/stats.c" -I"$DEMO" -o "$T/good.o"
	mkdir "$T/bad"
	$PY "$SRC/tests/lib/corrupt.py" "$T/good.o" "$T/bad"
	[ "$(ls "$T"/bad/*.o | wc -l)" -ge 20 ]
	for f in "$T"/bad/*.o; do
		cp "$f" "$f.orig"
		for cmd in inspect check; do
			run timeout 20 "$OBJPATCH" "$cmd" "$f"
			assert_failure 1
			[ "${#lines[@]}" -eq 1 ] || { echo "$cmd $f: $output"; false; }
			assert_output --regexp "^$f: error: objpatch: "
		done
		cmp "$f.orig" "$f"
	done
}

@test "usage errors exit 2; commands match by prefix" {
	run "$OBJPATCH"
	assert_failure 2
	run "$OBJPATCH" frobnicate x.o
	assert_failure 2
	run "$OBJPATCH" check
	assert_failure 2
	gcc -O2 -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	"$RECORDMCOUNT" "$T/f.o"
	run "$OBJPATCH" ch "$T/f.o"
	assert_success
}

@test "inspect --lines: the source line of every site, in an object and a linked image" {
	mkdir "$T/g"
	for c in main fib stats; do
		cc -g -O2 -pg -mfentry -c "$DEMO/$c.c" -o "$T/g/$c.o"
		"$RECORDMCOUNT" "$T/g/$c.o"
	done
	run "$OBJPATCH" inspect --lines "$T/g/stats.o"
	assert_success
	assert_line --regexp 'stats_add\+0x0 .*stats\.c:[0-9]+$'
	"$OBJPATCH" link -- cc "$T"/g/*.o -o "$T/g/prog"
	run "$OBJPATCH" -j inspect --lines "$T/g/prog"
	assert_success
	run $PY -c 'import json,sys; d=json.load(sys.stdin)[0]; print(sorted(s["line"].rsplit("/",1)[1].split(":")[0] for s in d["sites"]))' <<< "$output"
	assert_output "['fib.c', 'main.c', 'stats.c', 'stats.c', 'stats.c']"
	# Without DWARF: one line saying so, exit 1.
	cc -O2 -pg -mfentry -c "$DEMO/fib.c" -o "$T/nodebug.o"
	"$RECORDMCOUNT" "$T/nodebug.o"
	run "$OBJPATCH" inspect --lines "$T/nodebug.o"
	assert_failure 1
	assert_output --partial "no line information"
}

@test "check, inspect and nop take two linked images in one run" {
	# Each input's decoding state must be its own: a memo of the last
	# call target, kept process-wide and keyed by the (reused) address of
	# the file's struct, once crashed on the second image.
	cc -O2 -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	cc -O2 -pg -mfentry -c "$DEMO/main.c" -I"$DEMO" -o "$T/m.o"
	cc -O2 -pg -mfentry -c "$DEMO/stats.c" -I"$DEMO" -o "$T/s.o"
	"$RECORDMCOUNT" "$T"/{f,m,s}.o
	"$OBJPATCH" link -- cc -pie "$T"/{f,m,s}.o -o "$T/prog1"
	head -c 3000000 /dev/zero > "$T/junk"
	objcopy --add-section .junk="$T/junk" "$T/prog1" "$T/prog2"
	run "$OBJPATCH" check "$T/prog1" "$T/prog2"
	assert_success
	run "$OBJPATCH" -j inspect "$T/prog1" "$T/prog2"
	assert_success
	[ "$(echo "$output" | entries)" -eq $((2 * $("$OBJPATCH" -j inspect "$T/prog1" | entries))) ]
	run "$OBJPATCH" nop "$T/prog1" "$T/prog2"
	assert_success
	run "$OBJPATCH" -j inspect "$T/prog1" "$T/prog2"
	[ "$(echo "$output" | $PY -c 'import json,sys; print(sum(f["summary"]["call"] for f in json.load(sys.stdin)))')" -eq 0 ]
}

@test "x86_64 -fpatchable-function-entry=5: check accepts GCC's five 0x90 with a note; nop and link --nop make them one NOP5" {
	[ "$(uname -m)" = x86_64 ] || skip "x86_64 only"
	cat > "$T/pf.c" <<-'C'
	int work(int x) { return x + 1; }
	int main(int c, char **v) { (void)v; return work(c) - 2; }
	C
	cc -O2 -fpatchable-function-entry=7 -c "$T/pf.c" -o "$T/pf.o"
	run "$OBJPATCH" check -v "$T/pf.o"
	assert_success
	assert_output --partial "2 patchable entries are the compiler's NOPs: objpatch nop (or link --nop) makes the first 5 bytes the one NOP the runtime patches"
	"$OBJPATCH" link --nop --check -- cc "$T/pf.o" -o "$T/pf"
	run "$OBJPATCH" inspect "$T/pf"
	assert_success
	assert_output --partial "summary: 0 call, 2 nop, 0 patchable, 0 other; sorted"
	# The first five bytes are the one NOP5, the other two stay.
	run sh -c "objdump -d --disassemble=work '$T/pf' | grep -A3 '<work>:' | tail -3 | cut -f2 | tr -d ' '"
	assert_output - <<-'OUT'
	0f1f440000
	90
	90
	OUT
	cp "$T/pf.o" "$T/pf2.o"
	run "$OBJPATCH" nop -v "$T/pf2.o"
	assert_success
	assert_output --partial "2 patchable entries of the compiler's NOPs made the site's NOP"
	run "$OBJPATCH" check "$T/pf2.o"
	assert_success
	run "$OBJPATCH" -j inspect "$T/pf2.o"
	[ "$(echo "$output" | $PY -c 'import json,sys; print(json.load(sys.stdin)[0]["summary"]["nop"])')" -eq 2 ]
	# clang pads with one long NOP with a displacement (0f 1f 80 00 02 00 00).
	command -v clang >/dev/null || skip "clang is not installed (its long NOPs)"
	clang -O2 -fpatchable-function-entry=7 -c "$T/pf.c" -o "$T/pfc.o"
	run "$OBJPATCH" check -v "$T/pfc.o"
	assert_success
	assert_output --partial "2 patchable entries are the compiler's NOPs"
	"$OBJPATCH" link --nop --check -- clang "$T/pfc.o" -o "$T/pfc"
	run sh -c "objdump -d --disassemble=work '$T/pfc' | grep -A3 '<work>:' | tail -3 | cut -f2 | tr -d ' '"
	assert_output - <<-'OUT'
	0f1f440000
	90
	90
	OUT
}

# work_source FILE: the patchable-entry tests' program, work() called once.
work_source() {
	cat > "$1" <<-'C'
	#include <stdio.h>
	__attribute__((noinline)) int work(int x) { return x + 1; }
	int main(int c, char **v) { (void)v; printf("%d\n", work(c)); return 0; }
	C
}

@test "x86_64 -fpatchable-function-entry=N,M with M>0: nop, link --nop and check refuse in one line; nothing is broken" {
	[ "$(uname -m)" = x86_64 ] || skip "x86_64 only"
	work_source "$T/pm.c"
	want="-fpatchable-function-entry=N,M with M>0 (the entry"
	for cc in $(installed_ccs); do
		for nm in 5,3 6,1 7,2 10,5; do
			o="$T/pm-$cc-${nm/,/-}"
			$cc -O2 -fpatchable-function-entry=$nm -c "$T/pm.c" -o "$o.o"
			run "$OBJPATCH" check "$o.o"
			assert_failure 1
			[ "${#lines[@]}" -eq 1 ]
			[[ $output == "$o.o: error: objpatch: "*": $want ${nm#*,} bytes before its function, at work): on x86_64 use -fpatchable-function-entry=5 (M=0) or -pg -mfentry" ]]
			$cc "$o.o" -o "$o"
			cp "$o" "$o.orig"
			run "$OBJPATCH" nop "$o"
			assert_failure 1
			[ "${#lines[@]}" -eq 1 ]
			assert_output --partial "$want ${nm#*,} bytes before its function, at work)"
			cmp "$o" "$o.orig"
			run "$o"
			assert_success
			assert_output 2
			run "$OBJPATCH" link --nop -- $cc "$o.o" -o "$o.linked"
			assert_failure 1
			[ "${#lines[@]}" -eq 1 ]
			assert_output --partial "$want ${nm#*,} bytes before its function, at work)"
			[ ! -e "$o.linked" ] || { run "$o.linked"; assert_success; assert_output 2; }
		done
	done
}

@test "x86_64 -fpatchable-function-entry=3 and =4: too few NOPs for the site, refused by check and link --nop in one line" {
	[ "$(uname -m)" = x86_64 ] || skip "x86_64 only"
	work_source "$T/ps.c"
	for cc in $(installed_ccs); do
		for n in 3 4 4,2; do
			o="$T/ps-$cc-${n/,/-}"
			$cc -O2 -fpatchable-function-entry=$n -c "$T/ps.c" -o "$o.o"
			run "$OBJPATCH" check "$o.o"
			assert_failure 1
			[ "${#lines[@]}" -eq 1 ]
			assert_output --partial ": on x86_64 use -fpatchable-function-entry=5 (M=0) or -pg -mfentry"
			run "$OBJPATCH" link --nop -- $cc "$o.o" -o "$o"
			assert_failure 1
			[ "${#lines[@]}" -eq 1 ]
			assert_output --partial ": on x86_64 use -fpatchable-function-entry=5 (M=0) or -pg -mfentry"
		done
	done
}
