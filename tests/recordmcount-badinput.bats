#!/usr/bin/env bats
# Malformed input: exit 1, exactly one diagnostic line naming the file,
# and the file byte-identical afterwards.  Never a crash or a hang.
load helpers

setup_file() {
	export BAD=$BATS_FILE_TMPDIR/bad
	mkdir -p "$BAD"
	gcc -O2 -pg -mfentry -c "$DEMO/stats.c" -I"$DEMO" -o "$BATS_FILE_TMPDIR/good.o"
	$PY "$SRC/tests/lib/corrupt.py" "$BATS_FILE_TMPDIR/good.o" "$BAD"
}

refused() {
	local f=$1
	cp "$f" "$f.orig"
	run timeout 20 "$RECORDMCOUNT" "$f"
	assert_failure 1
	[ "${#lines[@]}" -eq 1 ] || { echo "expected one line, got: $output"; false; }
	assert_output --regexp "^$f: error: recordmcount: "
	cmp "$f.orig" "$f"
	[ -z "$(find "$(dirname "$f")" -name ".$(basename "$f").*")" ]	# no temp file left
}

@test "at least 20 malformed objects are generated" {
	[ "$(ls "$BAD"/*.o | wc -l)" -ge 20 ]
}

@test "every malformed object is refused cleanly and left untouched" {
	for f in "$BAD"/*.o; do
		refused "$f"
	done
}

@test "every malformed object is refused the same way with --in-place" {
	for f in "$BAD"/*.o; do
		cp "$f" "$f.ip"
		run timeout 20 "$RECORDMCOUNT" --in-place "$f.ip"
		assert_failure 1
		[ "${#lines[@]}" -eq 1 ]
		cmp "$f" "$f.ip"
	done
}

@test "a directory is refused" {
	mkdir "$T/d.o"
	run "$RECORDMCOUNT" "$T/d.o"
	assert_failure 1
	assert_output "$T/d.o: error: recordmcount: is a directory"
}

@test "a missing file is refused" {
	run "$RECORDMCOUNT" "$T/nope.o"
	assert_failure 1
	assert_output --regexp "nope.o: error: recordmcount: cannot open"
}

@test "an unwritable directory fails the write and leaves the input intact" {
	[ "$(id -u)" != 0 ] || skip "root can write anywhere"
	mkdir "$T/ro"
	cp "$BATS_FILE_TMPDIR/good.o" "$T/ro/g.o"
	chmod 555 "$T/ro"
	run "$RECORDMCOUNT" "$T/ro/g.o"
	chmod 755 "$T/ro"
	assert_failure 1
	cmp "$BATS_FILE_TMPDIR/good.o" "$T/ro/g.o"
}

# A section symbol's st_value is 0 as compilers write it, but ld.bfd, gold
# and lld resolve a relocation against it to section + st_value + addend,
# and the kernel's recordmcount subtracts it: so must the table's addends.
# (Found by mutating real objects: the table was shifted, with exit 0.)
# $1: -m64 or -m32; the rest: the profiling flags; SECSYM_VALUE, the
# value given (0x20 by default).  The first site lies
# below the value, so its addend is negative.  The unwind tables' FDEs name
# .text's section symbol too, and would overlap once shifted: the link
# makes no .eh_frame_hdr.  Hidden stubs resolve the calls in the link.
secsym_value_case() {
	local m=$1
	gcc -O2 -fPIC "$@" -c "$DEMO/stats.c" -I"$DEMO" -o "$T/s.o"
	cp "$T/s.o" "$T/ref.o"
	"$RECORDMCOUNT" "$T/ref.o"
	$PY "$SRC/tests/lib/set-secsym.py" "$T/s.o" .text "${SECSYM_VALUE:-0x20}"
	run "$RECORDMCOUNT" "$T/s.o"
	assert_success
	$MCTABLE "$T/ref.o" > "$T/ref.tab"
	$MCTABLE "$T/s.o" > "$T/s.tab"
	diff "$T/ref.tab" "$T/s.tab"
	run "$OBJPATCH" check "$T/s.o"
	assert_success
	echo '__attribute__((visibility("hidden"))) void mcount(void) {}
	      __attribute__((visibility("hidden"))) void __fentry__(void) {}' |
		gcc "$m" -O2 -fPIC -x c -c - -o "$T/stub.o"
	gcc "$m" -shared -nostdlib -Wl,--no-eh-frame-hdr "$T/s.o" "$T/stub.o" -o "$T/s.so"
	run "$OBJPATCH" check "$T/s.so"
	assert_success
}

@test "a section symbol with a nonzero st_value: the table still names each call (RELA)" {
	secsym_value_case -m64 -pg -mfentry
}

@test "a section symbol with a nonzero st_value: the table still names each call (REL, i386)" {
	echo 'int x;' | gcc -m32 -x c -c - -o "$T/probe.o" 2>/dev/null || skip "gcc -m32 does not work here"
	secsym_value_case -m32 -pg
}

# (Found by the mutation campaign: objpatch read S + A in 64 bits, so a
# table correct for a 32-bit linker was rejected.)
@test "a section symbol whose st_value wraps a 32-bit address: S + A modulo 2^32, as the linker computes (REL, i386)" {
	echo 'int x;' | gcc -m32 -x c -c - -o "$T/probe.o" 2>/dev/null || skip "gcc -m32 does not work here"
	SECSYM_VALUE=0xfffffffc secsym_value_case -m32 -pg
}

@test "the kernel's recordmcount reads a section symbol's st_value the same way" {
	[ -n "$KERNEL_RECORDMCOUNT" ] || skip "the kernel's recordmcount is not installed"
	gcc -O2 -pg -mfentry -c "$DEMO/stats.c" -I"$DEMO" -o "$T/k.o"
	cp "$T/k.o" "$T/kref.o"
	"$KERNEL_RECORDMCOUNT" "$T/kref.o"
	$PY "$SRC/tests/lib/set-secsym.py" "$T/k.o" .text 0x20
	"$KERNEL_RECORDMCOUNT" "$T/k.o"
	diff <($MCTABLE "$T/kref.o") <($MCTABLE "$T/k.o")
}

# rename_table_relocs OBJ: the table's relocation sections renamed (same
# length), so that only their sh_info still says which table they are for.
rename_table_relocs() {
	$PY - "$1" <<'PY'
import sys
p = sys.argv[1]
b = open(p, "rb").read()
assert b.count(b".rela__mcount_loc\0") == 1
open(p, "wb").write(b.replace(b".rela__mcount_loc\0", b".oela__mcount_loc\0"))
PY
}

@test "--force drops an old table's relocations by what they apply to, not by their name" {
	gcc -O2 -pg -mfentry -ffunction-sections -c "$DEMO/stats.c" -I"$DEMO" -o "$T/a.o"
	"$RECORDMCOUNT" -g "$T/a.o"
	rename_table_relocs "$T/a.o"
	run "$OBJPATCH" check "$T/a.o"
	assert_success
	run "$RECORDMCOUNT" --force "$T/a.o"
	assert_success
	# Left behind, the renamed sections would relocate bytes of the
	# emptied tables, past their end.
	run "$OBJPATCH" check "$T/a.o"
	assert_success
}

@test "--force refuses a relocation section named as the table's that applies to code" {
	gcc -O2 -pg -mfentry -c "$DEMO/stats.c" -I"$DEMO" -o "$T/a.o"
	"$RECORDMCOUNT" "$T/a.o"
	$PY - "$T/a.o" <<'PY'
import struct, sys
from elftools.elf.elffile import ELFFile
p = sys.argv[1]
e = ELFFile(open(p, "rb"))
names = [s.name for s in e.iter_sections()]
at = e["e_shoff"] + names.index(".rela__mcount_loc") * e["e_shentsize"] + 44
b = bytearray(open(p, "rb").read())
struct.pack_into("<I", b, at, names.index(".text"))
open(p, "wb").write(b)
PY
	cp "$T/a.o" "$T/orig"
	run "$RECORDMCOUNT" --force "$T/a.o"
	assert_failure 1
	[ "${#lines[@]}" -eq 1 ]
	assert_output --regexp "^$T/a.o: error: recordmcount: .rela__mcount_loc applies to section [0-9]+, not to a __mcount_loc table"
	cmp "$T/orig" "$T/a.o"
}
