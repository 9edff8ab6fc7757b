#!/usr/bin/env bats
# A vmlinux-like image: 50,000 generated functions built with -pg -mfentry
# and recordmcount, linked by a kernel-shaped linker script that collects
# __mcount_loc into .init.data between __start_mcount_loc and
# __stop_mcount_loc (tests/lib/gen-image.py).  Half the functions are
# placed first, so the linked table is out of order, as a kernel's is.

load helpers

setup_file() {
	local d=$BATS_FILE_TMPDIR/vm
	/usr/bin/python3 "$BATS_TEST_DIRNAME/lib/gen-image.py" "$d" 50000
	# -O0: the same call sites, in half the compile time of -O1.
	cc -O0 -pg -mfentry -fno-pie -c "$d/gen.c" -o "$d/gen.o"
	"${RECORDMCOUNT:-$BATS_TEST_DIRNAME/../build/recordmcount/recordmcount}" "$d/gen.o"
	ld -T "$d/vmlinux.lds" "$d/gen.o" -o "$d/vmlinux"
}

@test "vmlinux-like: the linked table is found inside .init.data, and is unsorted" {
	run "$OBJPATCH" check "$BATS_FILE_TMPDIR/vm/vmlinux"
	assert_failure 1
	assert_output --partial "the table is not sorted"
	run "$OBJPATCH" -j inspect "$BATS_FILE_TMPDIR/vm/vmlinux"
	assert_output --partial '"section":".text"'
}

@test "vmlinux-like: sort, then check passes; sort again changes nothing" {
	cp "$BATS_FILE_TMPDIR/vm/vmlinux" "$T/vmlinux"
	run "$OBJPATCH" sort -v "$T/vmlinux"
	assert_success
	assert_output --partial "50000 of 50000 entries kept"
	run "$OBJPATCH" check "$T/vmlinux"
	assert_success
	# Both bound pairs, as the man page says: the GNU one is added
	# beside the kernel's, at the same addresses.
	nm "$T/vmlinux" > "$T/syms"
	for e in start stop; do
		k=$(awk -v s="__${e}_mcount_loc" '$3 == s { print $1 }' "$T/syms")
		g=$(awk -v s="__${e}___mcount_loc" '$3 == s { print $1 }' "$T/syms")
		[ -n "$k" ] && [ "$k" = "$g" ] || { echo "__${e}: kernel '$k' GNU '$g'"; false; }
	done
	cp "$T/vmlinux" "$T/again"
	run "$OBJPATCH" sort "$T/again"
	assert_success
	cmp "$T/vmlinux" "$T/again"
	# Only the table's bytes changed: the rest of the image is as linked.
	run bash -c "cmp -l '$BATS_FILE_TMPDIR/vm/vmlinux' '$T/vmlinux' 2>&1 | wc -l"
	[ "$output" -gt 0 ] && [ "$output" -le 400000 ]
}

@test "vmlinux-like: inspect lists every site with its function name" {
	cp "$BATS_FILE_TMPDIR/vm/vmlinux" "$T/vmlinux"
	"$OBJPATCH" sort "$T/vmlinux"
	run bash -c "'$OBJPATCH' inspect '$T/vmlinux' | grep -cE ' fn[0-9]+\+0x0 +call __fentry__ \(5 bytes\)$'"
	assert_output 50000
	run bash -c "'$OBJPATCH' inspect --functions '$T/vmlinux' | sort -u | wc -l"
	assert_output 50000
	run bash -c "'$OBJPATCH' inspect '$T/vmlinux' | tail -1"
	assert_output "summary: 50000 call, 0 nop, 0 patchable, 0 other; sorted; 0 duplicates"
}

@test "vmlinux-like: nop leaves no call to __fentry__, and check accepts the NOPs" {
	cp "$BATS_FILE_TMPDIR/vm/vmlinux" "$T/vmlinux"
	"$OBJPATCH" sort "$T/vmlinux"
	run "$OBJPATCH" nop "$T/vmlinux"
	assert_success
	run bash -c "objdump -d '$T/vmlinux' | grep -c 'call.*<__fentry__>'"
	assert_output 0
	run "$OBJPATCH" check "$T/vmlinux"
	assert_success
}
