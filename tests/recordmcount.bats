#!/usr/bin/env bats
# recordmcount on native x86_64 objects, compared with GCC's own
# -mrecord-mcount table, plus the behaviours a Makefile relies on.
load helpers

compare_with_gcc() {
	build_objs ours gcc "$@"
	build_objs gcc gcc -mrecord-mcount "$@"
	run "$RECORDMCOUNT" "$T"/ours/*.o
	assert_success
	run same_tables "$T/ours" "$T/gcc"
	assert_success
}

@test "x86_64 -O0 PIE (the default) matches gcc -mrecord-mcount" { compare_with_gcc -O0 -pg -mfentry; }
@test "x86_64 -O2 PIE matches gcc -mrecord-mcount" { compare_with_gcc -O2 -pg -mfentry; }
@test "x86_64 -O0 -fno-pie matches gcc -mrecord-mcount" { compare_with_gcc -O0 -fno-pie -pg -mfentry; }
@test "x86_64 -O2 -fno-pie matches gcc -mrecord-mcount" { compare_with_gcc -O2 -fno-pie -pg -mfentry; }
@test "x86_64 -O0 -fno-plt (call *__fentry__@GOTPCREL) matches gcc" { compare_with_gcc -O0 -fno-plt -pg -mfentry; }
@test "x86_64 -O2 -fno-plt (call *__fentry__@GOTPCREL) matches gcc" { compare_with_gcc -O2 -fno-plt -pg -mfentry; }
@test "x86_64 -O0 -fcf-protection=full (endbr64 first) matches gcc" { compare_with_gcc -O0 -fcf-protection=full -pg -mfentry; }
@test "x86_64 -O2 -fcf-protection=full (endbr64 first) matches gcc" { compare_with_gcc -O2 -fcf-protection=full -pg -mfentry; }
@test "x86_64 -O0 -ffunction-sections matches gcc" { compare_with_gcc -O0 -ffunction-sections -pg -mfentry; }
@test "x86_64 -O2 -ffunction-sections matches gcc" { compare_with_gcc -O2 -ffunction-sections -pg -mfentry; }
@test "x86_64 -pg without -mfentry (mcount after the prologue) matches gcc" { compare_with_gcc -O2 -pg; }

@test "i386 -pg -mfentry (REL) matches gcc -mrecord-mcount" {
	need i686-linux-gnu-gcc
	build_objs ours i686-linux-gnu-gcc -O2 -fno-pie -pg -mfentry
	build_objs gcc i686-linux-gnu-gcc -O2 -fno-pie -pg -mfentry -mrecord-mcount
	run "$RECORDMCOUNT" "$T"/ours/*.o
	assert_success
	run same_tables "$T/ours" "$T/gcc"
	assert_success
}

@test "the ff 15 site is recorded at its first byte, not one byte in" {
	gcc -O2 -fno-plt -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	run "$RECORDMCOUNT" --print "$T/f.o"
	assert_success
	assert_output --partial "fib+0x0: call: ff 15 00 00 00 00"
}

@test "a relocation against __fentry__ that is not a call is never recorded" {
	cat > "$T/a.s" <<'ASM'
	.text
	.globl f
	.type f, @function
f:	call __fentry__
	leaq __fentry__(%rip), %rax
	movq $__fentry__, %rdx
	ret
ASM
	gcc -c "$T/a.s" -o "$T/a.o"
	run "$RECORDMCOUNT" -v "$T/a.o"
	assert_success
	assert_output --partial "not a call"
	run $MCTABLE "$T/a.o"
	assert_output ".text+0x0"
}

@test "an object that already has a table is left byte-identical" {
	gcc -O2 -pg -mfentry -mrecord-mcount -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	cp "$T/f.o" "$T/orig.o"
	run "$RECORDMCOUNT" -v "$T/f.o"
	assert_success
	assert_output --partial "already has __mcount_loc"
	cmp "$T/orig.o" "$T/f.o"
}

@test "a second run is a no-op, and --force regenerates the same table" {
	gcc -O2 -pg -mfentry -c "$DEMO/stats.c" -I"$DEMO" -o "$T/s.o"
	"$RECORDMCOUNT" "$T/s.o"
	cp "$T/s.o" "$T/once.o"
	"$RECORDMCOUNT" "$T/s.o"
	cmp "$T/once.o" "$T/s.o"
	$MCTABLE "$T/s.o" > "$T/before"
	run "$RECORDMCOUNT" --force "$T/s.o"
	assert_success
	$MCTABLE "$T/s.o" > "$T/after"
	cmp "$T/before" "$T/after"
}

@test "an object without call sites is left byte-identical" {
	gcc -O2 -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	cp "$T/f.o" "$T/orig.o"
	run "$RECORDMCOUNT" "$T/f.o"
	assert_success
	cmp "$T/orig.o" "$T/f.o"
}

@test "a genuinely 2 MiB-aligned section is recorded, and the output stays its size" {
	# gas pads the file to the alignment, so the input already pays for
	# it; the rewrite may not add more than the table.
	printf '.section .huge,"a"\n.p2align 21\n.byte 1\n.section .note.GNU-stack,"",@progbits\n' > "$T/al.s"
	as "$T/al.s" -o "$T/al.o"
	gcc -O2 -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	ld -r "$T/al.o" "$T/f.o" -o "$T/both.o"
	before=$(stat -c %s "$T/both.o")
	run "$RECORDMCOUNT" "$T/both.o"
	assert_success
	[ "$($MCTABLE "$T/both.o" | wc -l)" -eq 1 ]
	[ "$(stat -c %s "$T/both.o")" -lt $((before + 4096)) ]
}

@test "output is deterministic" {
	gcc -O2 -pg -mfentry -c "$DEMO/stats.c" -I"$DEMO" -o "$T/a.o"
	cp "$T/a.o" "$T/b.o"
	"$RECORDMCOUNT" "$T/a.o"
	"$RECORDMCOUNT" "$T/b.o"
	cmp "$T/a.o" "$T/b.o"
}

@test "-o writes elsewhere, keeps the input and its mode" {
	gcc -O2 -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	chmod 640 "$T/f.o"
	cp "$T/f.o" "$T/orig.o"
	run "$RECORDMCOUNT" -o "$T/out.o" "$T/f.o"
	assert_success
	cmp "$T/orig.o" "$T/f.o"
	[ "$($MCTABLE "$T/out.o" | wc -l)" -eq 1 ]
	[ "$(stat -c %a "$T/f.o")" = 640 ]
}

@test "-o always creates its output: no call sites, or a table already there" {
	# A Makefile rule "recordmcount -o $@ $<" needs $@ whatever the input.
	gcc -O2 -c "$DEMO/fib.c" -I"$DEMO" -o "$T/plain.o"
	gcc -O2 -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/done.o"
	"$RECORDMCOUNT" "$T/done.o"
	printf 'int x;\n' > "$T/nosym.c" && gcc -c "$T/nosym.c" -o "$T/nosym.o"
	strip --strip-all "$T/nosym.o"
	for o in plain done nosym; do
		run "$RECORDMCOUNT" -o "$T/$o.out.o" "$T/$o.o"
		assert_success
		cmp "$T/$o.o" "$T/$o.out.o"
	done
	# A dry run still writes nothing.
	run "$RECORDMCOUNT" -N -o "$T/dry.o" "$T/plain.o"
	assert_success
	[ ! -e "$T/dry.o" ]
}

@test "the rewrite keeps the file's mode, whatever the umask" {
	gcc -O2 -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	# The temporary file is created with the mode itself where the umask
	# allows, and changed after creation where it does not.
	for m in 604:022 666:077 2755:022 4711:000 600:777; do
		cp "$T/f.o" "$T/g.o"
		chmod "${m%:*}" "$T/g.o"
		(umask "${m#*:}" && "$RECORDMCOUNT" "$T/g.o")
		[ "$(stat -c %a "$T/g.o")" = "${m%:*}" ] || { echo "mode ${m%:*} umask ${m#*:}: $(stat -c %a "$T/g.o")"; false; }
		[ "$($MCTABLE "$T/g.o" | wc -l)" -eq 1 ]
	done
	[ -z "$(find "$T" -name '.*.o.*')" ]
}

@test "-s writes the table under another name" {
	gcc -O2 -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	"$RECORDMCOUNT" -s __patchable_function_entries "$T/f.o"
	run $MCTABLE --section __patchable_function_entries "$T/f.o"
	assert_output ".text+0x0"
}

@test "every input is processed and one failure gives exit 1" {
	gcc -O2 -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	echo junk > "$T/bad.o"
	run "$RECORDMCOUNT" "$T/bad.o" "$T/f.o"
	assert_failure 1
	assert_output "$T/bad.o: error: recordmcount: not an ELF file"
	[ "$($MCTABLE "$T/f.o" | wc -l)" -eq 1 ]
}

@test "usage errors exit 2" {
	run "$RECORDMCOUNT"
	assert_failure 2
	run "$RECORDMCOUNT" --no-such-option x.o
	assert_failure 2
	run "$RECORDMCOUNT" -o out.o a.o b.o
	assert_failure 2
}

@test "--nop objects link and run with the un-NOPed output; no call to __fentry__ remains" {
	build_objs plain gcc -O2
	build_objs nop gcc -O2 -pg -mfentry
	run "$RECORDMCOUNT" --nop "$T"/nop/*.o
	assert_success
	for o in "$T"/nop/*.o; do
		run bash -c "objdump -dr '$o' | grep -E 'R_X86_64_(PLT32|PC32|GOTPCRELX)[[:space:]]+__fentry__'"
		assert_failure
	done
	rm "$T"/{plain,nop}/shapes.o
	gcc "$T"/plain/*.o -o "$T/plain.bin"
	gcc "$T"/nop/*.o -o "$T/nop.bin"
	diff <("$T/plain.bin") <("$T/nop.bin")
	run bash -c "objdump -d '$T/nop.bin' | grep -c 'call.*__fentry__'"
	assert_output 0
}

@test "-g tables linked with --gc-sections keep exactly the surviving functions" {
	build_objs g gcc -O2 -fno-pie -ffunction-sections -pg -mfentry
	run "$RECORDMCOUNT" -g "$T"/g/*.o
	assert_success
	gcc -no-pie -Wl,--gc-sections "$T"/g/*.o -o "$T/prog"
	"$T/prog" >/dev/null
	# Every entry lies in a function that survived; unused_function is gone.
	run bash -c "nm '$T/prog' | grep -w unused_function"
	assert_failure
	$MCTABLE --linked "$T/prog" | sort > "$T/entries"
	nm --defined-only "$T/prog" | awk '$2 ~ /[tTwW]/ {print $1, $3}' > "$T/funcs"
	want=$(for o in "$T"/g/*.o; do nm --defined-only "$o" | awk '$2 ~ /[tTwW]/ {print $3}'; done | sort -u |
		while read -r fn; do grep -qw "$fn" "$T/funcs" && echo "$fn"; done | wc -l)
	got=$(wc -l < "$T/entries")
	[ "$got" -eq "$want" ] || { echo "entries $got, surviving functions $want"; false; }
	if grep -qx 0x0 "$T/entries"; then false; fi
	[ "$(sort -u "$T/entries" | wc -l)" -eq "$got" ]
}

@test "--in-place gives the same table, links, and is idempotent" {
	build_objs a gcc -O2 -pg -mfentry
	cp -r "$T/a" "$T/b"
	run "$RECORDMCOUNT" "$T"/a/*.o
	assert_success
	run "$RECORDMCOUNT" --in-place "$T"/b/*.o
	assert_success
	run same_tables "$T/b" "$T/a"
	assert_success
	ino=$(stat -c %i "$T/b/stats.o")
	cp "$T/b/stats.o" "$T/once.o"
	"$RECORDMCOUNT" --in-place "$T/b/stats.o"
	cmp "$T/once.o" "$T/b/stats.o"
	[ "$(stat -c %i "$T/b/stats.o")" = "$ino" ]
	rm "$T"/b/shapes.o
	gcc "$T"/b/*.o -o "$T/prog" && "$T/prog"
}

@test "--in-place --nop moves the patched text instead of overwriting it" {
	gcc -O2 -pg -mfentry -c "$DEMO/fib.c" -I"$DEMO" -o "$T/f.o"
	size=$(stat -c %s "$T/f.o")
	head -c "$size" "$T/f.o" > "$T/prefix-before"
	run "$RECORDMCOUNT" --in-place --nop "$T/f.o"
	assert_success
	# Every old byte but the ELF header is untouched: a crash before the
	# header write leaves the old object.
	cmp -i 64 <(tail -c +65 "$T/prefix-before") <(head -c "$size" "$T/f.o" | tail -c +65)
	run bash -c "objdump -dr '$T/f.o' | grep -E 'R_X86_64_(PLT32|GOTPCRELX)[[:space:]]+__fentry__'"
	assert_failure
}

@test "--in-place: a failed header write leaves the old object, and the text claims no durability" {
	need strace
	gcc -O2 -pg -mfentry -c "$DEMO/stats.c" -I"$DEMO" -o "$T/s.o"
	cp "$T/s.o" "$T/orig.o"
	# The header is the one pwrite; failing it must truncate the
	# appended tail away again.
	run strace -qq -o /dev/null -e trace=pwrite64 -e inject=pwrite64:error=EIO "$RECORDMCOUNT" --in-place "$T/s.o"
	assert_failure 1
	assert_output --partial "cannot write the ELF header"
	cmp "$T/orig.o" "$T/s.o"
	# Nothing is synced, so nothing may promise crash consistency.
	run "$RECORDMCOUNT" --help
	refute_output --partial crash-consistent
	run grep -ci 'crash-consistent' "$SRC/man/recordmcount.1" "$SRC/README.md" "$SRC/common/mcelf.h"
	refute_output --regexp ':[1-9]'
}

@test "--in-place and --output exclude each other" {
	run "$RECORDMCOUNT" --in-place -o x.o y.o
	assert_failure 2
}

@test "an object with more than 65279 sections (SHN_XINDEX) matches gcc, with and without -g" {
	$PY -c "
n = 33000
print('\n'.join('int f%d(int x) { return x + %d; }' % (i, i) for i in range(n)))" > "$T/big.c"
	gcc -O0 -ffunction-sections -pg -mfentry -c "$T/big.c" -o "$T/ours.o"
	gcc -O0 -ffunction-sections -pg -mfentry -mrecord-mcount -c "$T/big.c" -o "$T/gcc.o"
	# e_shnum 0, the real count in section 0: the SHN_XINDEX encoding.
	readelf -h "$T/ours.o" | grep -q 'Number of section headers: *0 ('
	cp "$T/ours.o" "$T/ours-g.o"
	run "$RECORDMCOUNT" "$T/ours.o"
	assert_success
	run "$RECORDMCOUNT" -g "$T/ours-g.o"
	assert_success
	$MCTABLE "$T/gcc.o" > "$T/want"
	[ "$(wc -l < "$T/want")" -eq 33000 ]
	$MCTABLE "$T/ours.o" | cmp - "$T/want"
	$MCTABLE "$T/ours-g.o" | cmp - "$T/want"
}

@test "as a compiler wrapper: -c objects are recorded, one-step probes and -S run unchanged" {
	cd "$T"
	cp "$DEMO"/*.c "$DEMO"/*.h .
	# -c with -o, and -c of several sources without -o.
	run "$RECORDMCOUNT" -- gcc -O2 -pg -mfentry -c fib.c -o fib.o
	assert_success
	[ "$($MCTABLE fib.o | wc -l)" -eq 1 ]
	run "$RECORDMCOUNT" -g -- gcc -O2 -pg -mfentry -ffunction-sections -c main.c stats.c
	assert_success
	[ "$($MCTABLE stats.o | wc -l)" -eq 3 ]
	[ "$($MCTABLE main.o | wc -l)" -ge 1 ]
	# configure's compile-and-link probe, and -S: run as they are.
	printf 'int main(void) { return 0; }\n' > conftest.c
	run "$RECORDMCOUNT" -- gcc -O2 -pg -mfentry conftest.c -o conftest
	assert_success
	./conftest
	run "$RECORDMCOUNT" -- gcc -O2 -S fib.c -o fib.s
	assert_success
	grep -q fib fib.s
	# The compiler's failure is passed through, and nothing is recorded.
	printf 'int broken(void) { return }\n' > bad.c
	run "$RECORDMCOUNT" -- gcc -c bad.c -o bad.o
	assert_failure 1
	[ ! -e bad.o ]
	# Options that name an output of their own do not go with a command.
	run "$RECORDMCOUNT" -o x.o -- gcc -c fib.c
	assert_failure 2
}
