#!/usr/bin/env bats
# Link-time optimisation through the README's recipe (-pg -mfentry,
# recordmcount after each compile, objpatch link --nop --runtime) with
# -flto added to the compiles and the links: recordmcount passes the LTO
# objects through, and objpatch link records the code the LTO step made
# (from the relocations --emit-relocs keeps), NOPs it and lets the runtime
# trace it, for an executable and a shared library, with gcc (bfd, gold)
# and clang (-flto and -flto=thin, lld).

load helpers


setup_file() {
	export LTO_SRC="$BATS_FILE_TMPDIR/src"
	mkdir -p "$LTO_SRC"
	# lib_work is small enough for the LTO step to inline into
	# lib_entry, and work_a into work_b, across files or not: the tables
	# must follow what it did, not what the compiles saw.
	cat > "$LTO_SRC/lib.c" <<-'C'
	__attribute__((noinline)) int lib_work(int x) { return x * 3 + 1; }
	int lib_entry(int x) { return lib_work(x) + 2; }
	C
	cat > "$LTO_SRC/helper.c" <<-'C'
	int tiny(int x) { return x + 1; }
	C
	cat > "$LTO_SRC/main.c" <<-'C'
	#include <stdio.h>
	int lib_entry(int x);
	int tiny(int x);
	__attribute__((noinline)) int work_a(int x) { return tiny(x) + 7; }
	__attribute__((noinline)) int work_b(int x) { return work_a(x) * 2; }
	int main(int argc, char **argv)
	{
		(void)argv;
		for (int i = 0; i < 3; i++)
			argc += work_b(i) + lib_entry(i);
		printf("%d\n", argc);
		return 0;
	}
	C
}

need_ld() {
	need "$1"
	command -v "ld.$2" >/dev/null 2>&1 || skip "ld.$2 is not installed"
}

# lto_build CC LTOFLAG LD: $T/libl.so and $T/prog through the recipe.
lto_build() {
	local cc=$1 lto=$2 ld=$3
	local cflags=(-O2 -pg -mfentry "$lto")
	cd "$T"
	"$cc" "${cflags[@]}" -fPIC -c "$LTO_SRC/lib.c" -o lib.o
	"$cc" "${cflags[@]}" -c "$LTO_SRC/helper.c" -o helper.o
	"$cc" "${cflags[@]}" -c "$LTO_SRC/main.c" -o main.o
	"$RECORDMCOUNT" lib.o helper.o main.o
	"$OBJPATCH" link --nop --runtime --check -- "$cc" "$lto" -fuse-ld="$ld" -shared lib.o \
		-o libl.so -L"$LIBDIR" -lmcloc
	"$OBJPATCH" link --nop --runtime --check -- "$cc" "$lto" -fuse-ld="$ld" main.o helper.o \
		-o prog -L. -ll -Wl,-rpath,"$T" -L"$LIBDIR" -lmcloc
}

# gcc_lto_inputs: in $T, main.o and helper.o (GCC LTO, -pg) and a plain
# libl.so.
gcc_lto_inputs() {
	cd "$T"
	gcc -O2 -pg -mfentry -flto -c "$LTO_SRC/main.c" -o main.o
	gcc -O2 -pg -mfentry -flto -c "$LTO_SRC/helper.c" -o helper.o
	gcc -O2 -fPIC -c "$LTO_SRC/lib.c" -o lib.o
	gcc -shared lib.o -o libl.so
}

# summary FILE: "entries nop call" of objpatch inspect.
summary() {
	"$OBJPATCH" -j inspect "$1" | $PY -c 'import json,sys; s=json.load(sys.stdin)[0]["summary"]; print(s["entries"], s["nop"], s["call"])'
}

# assert_lto_traced: both images recorded (one entry per __fentry__ call
# the LTO step left, every one NOPed), checked clean, traced call by
# call, no gmon.out, and no relocation section but the dynamic ones.
assert_lto_traced() {
	local f n
	for f in libl.so prog; do
		# What the LTO step compiled with -pg: a call per function left,
		# NOPed now; the functions it inlined have none.
		n=$(objdump -d "$T/$f" | grep -cE '^[0-9a-f]+ <(work_[ab]|main|lib_work|lib_entry|tiny)[.>]')
		run summary "$T/$f"
		assert_output "$n $n 0"
		[ "$n" -gt 0 ]
		run "$OBJPATCH" check "$T/$f"
		assert_success
		run sh -c "readelf -SW '$T/$f' | awk '\$2 ~ /^\\.rel/ && \$2 !~ /(dyn|plt)\$/ && \$6 != \"000000\"'"
		assert_output ""
	done
	run env LD_LIBRARY_PATH="$LIBDIR" LD_PRELOAD="$(san_preload)" ASAN_OPTIONS=detect_leaks=0 MCLOC_TRACER=function MCLOC_OUTPUT="$T/trace.txt" "$T/prog"
	assert_success
	assert_output 73
	[ ! -e "$T/gmon.out" ]
	# Every call of a traced function that the LTO step kept: work_b,
	# lib_entry three times each (and what was not inlined into them).
	run grep -c ': work_b <-main$' "$T/trace.txt"
	assert_output 3
	run grep -c ': lib_entry <-main$' "$T/trace.txt"
	assert_output 3
	run grep -c ': main <-' "$T/trace.txt"
	assert_output 1
}

@test "recordmcount passes GCC LTO objects and LLVM bitcode through, with a note, exit 0" {
	need clang
	gcc -O2 -pg -mfentry -flto -c "$LTO_SRC/lib.c" -o "$T/g.o"
	clang -O2 -pg -mfentry -flto -c "$LTO_SRC/lib.c" -o "$T/c.o"
	clang -O2 -pg -mfentry -flto=thin -c "$LTO_SRC/lib.c" -o "$T/t.o"
	for o in g c t; do
		cp "$T/$o.o" "$T/$o.orig"
		run "$RECORDMCOUNT" -v "$T/$o.o"
		assert_success
		assert_output --partial "its code is made at the link, where objpatch link records it; left unchanged"
		cmp "$T/$o.o" "$T/$o.orig"
		run "$RECORDMCOUNT" -o "$T/$o.out" "$T/$o.o"
		assert_success
		cmp "$T/$o.out" "$T/$o.orig"
	done
	run "$RECORDMCOUNT" -- clang -O2 -pg -mfentry -flto -c "$LTO_SRC/lib.c" -o "$T/w.o"
	assert_success
}

@test "objpatch check and inspect pass over LTO objects (README's check of every *.o), a note with -v" {
	need clang
	gcc -O2 -pg -mfentry -flto -c "$LTO_SRC/lib.c" -o "$T/g.o"
	clang -O2 -pg -mfentry -flto -c "$LTO_SRC/lib.c" -o "$T/c.o"
	clang -O2 -pg -mfentry -flto=thin -c "$LTO_SRC/lib.c" -o "$T/t.o"
	run "$OBJPATCH" check "$T/g.o" "$T/c.o" "$T/t.o"
	assert_success
	assert_output ""
	run "$OBJPATCH" check -v "$T/c.o"
	assert_success
	assert_output "$T/c.o: note: objpatch: LLVM bitcode (LTO): no machine code until the link, nothing to check"
	run "$OBJPATCH" inspect "$T/c.o" "$T/t.o"
	assert_success
}

@test "gcc -flto with ld.bfd: program and shared library recorded, NOPed, traced, no gmon.out" {
	need_ld gcc bfd
	lto_build gcc -flto bfd
	assert_lto_traced
}

@test "gcc -flto with gold: program and shared library recorded, NOPed, traced, no gmon.out" {
	need_ld gcc gold
	lto_build gcc -flto gold
	assert_lto_traced
}

@test "clang -flto with lld: program and shared library recorded, NOPed, traced" {
	need_ld clang lld
	lto_build clang -flto lld
	assert_lto_traced
}

@test "clang -flto=thin with lld: program and shared library recorded, NOPed, traced" {
	need_ld clang lld
	lto_build clang -flto=thin lld
	assert_lto_traced
}

@test "a user's own --emit-relocs stays; only what objpatch link added goes" {
	gcc_lto_inputs
	"$OBJPATCH" link --nop -- gcc -flto -Wl,--emit-relocs main.o helper.o -o prog -L. -ll
	run sh -c "readelf -SW prog | awk '\$2 == \".rela.text\" { print \$6 }'"
	refute_output ""
	refute_output "000000"
	run summary prog
	refute_output --regexp "^0 "
}

@test "no silent emptiness: traced inputs and no table in the output warn, and fail with --check" {
	gcc_lto_inputs
	# -s leaves no symbols for the relocations to name: nothing to record.
	run "$OBJPATCH" link -- gcc -flto -s main.o helper.o -o prog -L. -ll
	assert_success
	assert_output "prog: warning: objpatch: its GCC LTO inputs were compiled with -pg, but it has no call-site table: -s leaves no symbols for the LTO step's relocations to name"
	run "$OBJPATCH" link --check -- gcc -flto -s main.o helper.o -o prog2 -L. -ll
	assert_failure 1
	assert_output "prog2: error: objpatch: its GCC LTO inputs were compiled with -pg, but it has no call-site table: -s leaves no symbols for the LTO step's relocations to name; output removed"
	[ ! -e prog2 ]
	# Objects compiled with -pg that recordmcount never saw, no LTO.
	gcc -O2 -pg -mfentry -c "$LTO_SRC/helper.c" -o unrec.o
	gcc -O2 -c "$LTO_SRC/main.c" -o plain.o
	run "$OBJPATCH" link -- gcc plain.o unrec.o -o prog3 -L. -ll
	assert_success
	assert_output "prog3: warning: objpatch: its inputs were compiled for tracing, but it has no call-site table: nothing in it can be traced"
	# Nothing compiled for tracing: nothing said.
	gcc -O2 -c "$LTO_SRC/helper.c" -o plainh.o
	run "$OBJPATCH" link --check -- gcc plain.o plainh.o -o prog4 -L. -ll
	assert_success
	assert_output ""
}

# plant_cc: $T/plantcc, a gcc that, the first time it runs, plants
# symlinks to $T/victim.s and $T/victim.o where the old LTO temporaries
# went (beside each temporary output in $T/shared), and with FAIL2 set
# fails any link given the table object.
plant_cc() {
	mkdir -p "$T/shared"
	chmod 1777 "$T/shared"
	echo precious > "$T/victim.s"
	echo precious > "$T/victim.o"
	cat > "$T/plantcc" <<-SH
	#!/bin/bash
	if [ ! -e $T/planted ]; then
		touch $T/planted
		for t in $T/shared/.prog.mcloc-*; do
			ln -sf $T/victim.s "\$t.lto.s"; ln -sf $T/victim.o "\$t.lto.o"
		done
	elif [ -n "\${FAIL2:-}" ] && [[ "\$*" == *lto.*/t.o* ]]; then
		exit 1
	fi
	exec gcc "\$@"
	SH
	chmod +x "$T/plantcc"
}

@test "LTO table temporaries: planted symlinks not followed, nothing left behind, on success or failure" {
	gcc_lto_inputs
	plant_cc
	run "$OBJPATCH" link --nop -- "$T/plantcc" -flto main.o helper.o -o shared/prog -L. -ll
	assert_success
	run cat "$T/victim.s" "$T/victim.o"
	assert_output $'precious\nprecious'
	run summary shared/prog
	refute_output --regexp "^0 "
	find shared -type l -delete
	run ls -A shared
	assert_output prog
	# The second link (with the table object) fails: nothing is left.
	rm -f "$T/planted" shared/prog
	run env FAIL2=1 "$OBJPATCH" link --nop -- "$T/plantcc" -flto main.o helper.o -o shared/prog -L. -ll
	assert_failure
	run cat "$T/victim.s" "$T/victim.o"
	assert_output $'precious\nprecious'
	find shared -type l -delete
	run ls -A shared
	assert_output ""
}

@test "LTO table object assembled by the driver behind a launcher (ccache gcc)" {
	gcc_lto_inputs
	# A stand-in for ccache: an option first is its own (-c: --cleanup).
	mkdir "$T/bin"
	cat > "$T/bin/ccache" <<-'SH'
	#!/bin/sh
	case $1 in -*) echo "ccache: own option $1" >&2; exit 1;; esac
	exec "$@"
	SH
	chmod +x "$T/bin/ccache"
	run "$OBJPATCH" link --nop --check -- "$T/bin/ccache" gcc -flto main.o helper.o -o prog -L. -ll
	assert_success
	run summary prog
	refute_output --regexp "^0 "
}

@test "a user's own --emit-relocs through -Xlinker stays; -q keeps no placeholder relocation of the table" {
	gcc_lto_inputs
	for form in "-Xlinker --emit-relocs" "-Xlinker -q"; do
		# shellcheck disable=SC2086
		"$OBJPATCH" link --nop -- gcc -flto $form main.o helper.o -o prog -L. -ll
		run sh -c "readelf -SW prog | awk '\$2 == \".rela.text\" { print \$6 }'"
		refute_output ""
		refute_output "000000"
		run summary prog
		refute_output --regexp "^0 "
	done
	"$OBJPATCH" link --nop -- gcc -flto -Wl,-q main.o helper.o -o prog -L. -ll
	run summary prog
	refute_output --regexp "^0 "
	# The words hold the sites: no relocation still says "the table + 0".
	run sh -c "readelf -rW prog | sed -n '/rela__mcount_loc/,/^\$/p' | grep -E '^[0-9a-f]{8,} ' | grep -v _NONE"
	assert_output ""
}

@test "LTO objects through a response file or an archive (named, or -lNAME in an -L directory) are recorded" {
	gcc_lto_inputs
	mkdir "sub dir"
	mv main.o "sub dir/"
	# GCC's quoting: "..." groups, a backslash takes the next character.
	printf '"sub dir/main.o"\n  helper\\.o\n' > objs.rsp
	run "$OBJPATCH" link --nop --check -- gcc -flto @objs.rsp -o p1 -L. -ll
	assert_success
	run summary p1
	refute_output --regexp "^0 "
	gcc-ar rcs libx.a "sub dir/main.o" helper.o
	run "$OBJPATCH" link --nop --check -- gcc -flto -Wl,--whole-archive libx.a -Wl,--no-whole-archive -o p2 -L. -ll
	assert_success
	run summary p2
	refute_output --regexp "^0 "
	mkdir lib
	mv libx.a lib/
	run "$OBJPATCH" link --nop --check -- gcc -flto -Wl,--whole-archive -Llib -lx -Wl,--no-whole-archive -o p3 -L. -ll
	assert_success
	run summary p3
	refute_output --regexp "^0 "
}

@test "an archive that could not be inspected (thin) and no table: one warning line" {
	gcc_lto_inputs
	gcc-ar rcsT libthin.a main.o helper.o
	run "$OBJPATCH" link --nop -- gcc -flto libthin.a -o p -L. -ll
	assert_success
	assert_output "p: warning: objpatch: it has no call-site table, and the archive libthin.a could not be inspected for inputs compiled for tracing"
}

@test "an -lNAME archive of LTO objects that only the driver's search path finds: no table warns" {
	gcc_lto_inputs
	mkdir lp
	gcc-ar rcs lp/libx.a main.o helper.o
	run env LIBRARY_PATH="$T/lp" "$OBJPATCH" link --nop -- gcc -flto -Wl,--whole-archive -lx -Wl,--no-whole-archive -o p -L. -ll
	assert_success
	assert_output "p: warning: objpatch: its GCC LTO inputs were compiled with -pg, but it has no call-site table: nothing in it can be traced"
}
