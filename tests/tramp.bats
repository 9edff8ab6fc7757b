#!/usr/bin/env bats
# objpatch tramp: the args and regs trampolines, linked into a program and
# called through, natively and under qemu-user.  The program checks that the
# handlers read every argument, that arguments, return values and callee-
# saved registers survive handlers that trash every caller-saved register,
# that the regs handler redirects the call, and that the constructor
# registers the image (tests/fixtures/tramp/tramp_test.c).

load helpers

PROG=$SRC/tests/fixtures/tramp/tramp_test.c

through() {
	local arch=$1 cc=$2 run=$3
	need "$cc"
	run "$OBJPATCH" tramp --arch "$arch" -o "$T/tramp.S"
	assert_success
	grep -q mcloc_tramp_regs "$T/tramp.S"
	CC=$cc run "$OBJPATCH" tramp --arch "$arch" -o "$T/tramp.o"
	assert_success
	"$cc" -O2 -Wall -Werror -I"$SRC/include" "$PROG" "$T/tramp.o" -o "$T/prog"
	run $run "$T/prog"
	assert_success
	assert_line "args: result 116 (want 116), callee-saved intact"
	assert_line "regs: result -1116 (want -1116 from the redirect), callee-saved intact"
	assert_line "direct: 2 entries, results intact, callee-saved intact"
	assert_line "PASSED: 0 failures"
}

@test "x86_64 trampolines: arguments, redirect and callee-saved registers" {
	through x86_64 cc ""
}

@test "aarch64 trampolines under qemu" {
	need qemu-aarch64
	through aarch64 aarch64-linux-gnu-gcc "qemu-aarch64 -L /usr/aarch64-linux-gnu"
}

@test "riscv64 trampolines under qemu" {
	need qemu-riscv64
	through riscv64 riscv64-linux-gnu-gcc "qemu-riscv64 -L /usr/riscv64-linux-gnu"
}

@test "the test notices a trampoline that loses an argument register" {
	"$OBJPATCH" tramp --arch x86_64 -o "$T/tramp.S"
	# Drop the args trampoline's restore of %rsi.
	sed -i '0,/movq	8(%rsp), %rsi/{/movq	8(%rsp), %rsi/d}' "$T/tramp.S"
	cc -c "$T/tramp.S" -o "$T/broken.o"
	cc -O2 -I"$SRC/include" "$PROG" "$T/broken.o" -o "$T/prog"
	run "$T/prog"
	assert_failure
	assert_output --partial "FAIL: arguments reach the function intact"
}

@test "tramp: usage errors exit 2, an unknown architecture is named" {
	run "$OBJPATCH" tramp -o "$T/x.o"
	assert_failure 2
	run "$OBJPATCH" tramp --arch sparc -o "$T/x.o"
	assert_failure 2
	assert_output --partial "sparc"
	[ ! -e "$T/x.o" ]
}

@test "tramp -o never writes through a name planted beside its output" {
	# The old temporary name was FILE.tmp<pid>, opened with fopen("w"):
	# a symlink planted there was followed.  sh's $$ is the pid that exec
	# hands on to objpatch.
	echo precious > "$T/victim"
	for out in x.S x.o; do
		run sh -c 'ln -s "$1/victim" "$1/$2.tmp$$"; exec "$0" tramp --arch x86_64 -o "$1/$2"' \
			"$OBJPATCH" "$T" "$out"
		assert_success
		[ "$(cat "$T/victim")" = precious ]
		[ -f "$T/$out" ] && [ ! -L "$T/$out" ]
	done
	grep -q mcloc_tramp_args "$T/x.S"
	nm "$T/x.o" | grep -q mcloc_tramp_args
	[ -z "$(find "$T" -name '.tramp.*')" ]
}

@test "link --runtime: the image registers itself and still runs without the runtime" {
	demo_objs "$T/o" record
	run "$OBJPATCH" link --nop --runtime --check -- cc "$T"/o/*.o -o "$T/demo"
	assert_success
	run nm "$T/demo"
	assert_output --partial mcloc_tramp_args
	assert_output --partial __mcloc_image
	run "$T/demo"
	assert_success
	assert_output "sum=143 max=55 mean=14.30"
}
