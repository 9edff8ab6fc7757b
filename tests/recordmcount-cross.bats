#!/usr/bin/env bats
# Cross-compiled -pg objects.  Each architecture is checked against the
# strongest peer it has: GCC's -mrecord-mcount (s390x), the kernel's own
# recordmcount from linux-kbuild (aarch64, arm, ppc64le, mips64el), or, for
# riscv64 which the kernel's tool does not know, by decoding every entry.
# --nop objects are linked and run under qemu-user.
load helpers

vs_kernel() {
	local cc=$1; shift
	need "$cc"
	[ -x "$KERNEL_RECORDMCOUNT" ] || skip "linux-kbuild's recordmcount is not installed"
	build_objs ours "$cc" "$@"
	build_objs kern "$cc" "$@"
	run "$RECORDMCOUNT" "$T"/ours/*.o
	assert_success
	for o in "$T"/kern/*.o; do "$KERNEL_RECORDMCOUNT" "$o"; done
	run same_tables "$T/ours" "$T/kern"
	assert_success
}

@test "aarch64 bl _mcount matches the kernel's recordmcount" { vs_kernel aarch64-linux-gnu-gcc -O2 -pg; }
@test "arm (ARM) push {lr}; bl __gnu_mcount_nc matches the kernel's recordmcount" { vs_kernel arm-linux-gnueabihf-gcc -O2 -pg -marm; }
@test "arm (Thumb-2) matches the kernel's recordmcount" { vs_kernel arm-linux-gnueabihf-gcc -O2 -pg -mthumb; }
@test "ppc64le -mprofile-kernel matches the kernel's recordmcount" { vs_kernel powerpc64le-linux-gnu-gcc -O2 -pg -mprofile-kernel; }
@test "mips64el jal _mcount matches the kernel's recordmcount" { vs_kernel mips64el-linux-gnuabi64-gcc -O2 -pg -mno-abicalls -fno-pic; }
@test "mips64el long calls (lui/daddiu pairs) match the kernel's recordmcount" { vs_kernel mips64el-linux-gnuabi64-gcc -O2 -pg -mno-abicalls -fno-pic -mlong-calls; }

@test "s390x brasl matches gcc -mrecord-mcount" {
	need s390x-linux-gnu-gcc
	build_objs ours s390x-linux-gnu-gcc -O2 -pg -mfentry
	build_objs gcc s390x-linux-gnu-gcc -O2 -pg -mfentry -mrecord-mcount
	run "$RECORDMCOUNT" "$T"/ours/*.o
	assert_success
	run same_tables "$T/ours" "$T/gcc"
	assert_success
}

@test "riscv64: every entry decodes as auipc+jalr to _mcount, one per call" {
	need riscv64-linux-gnu-gcc
	build_objs ours riscv64-linux-gnu-gcc -O2 -pg
	for o in "$T"/ours/*.o; do
		calls=$(riscv64-linux-gnu-readelf -rW "$o" | grep -E 'R_RISCV_CALL(_PLT)? .* _mcount' | wc -l)
		run "$RECORDMCOUNT" --print "$o"
		assert_success
		[ "$(echo -n "$output" | grep -c .)" -eq "$calls" ]
		# Cross-check with objdump: each recorded offset is an auipc
		# followed by a jalr through the same register.
		while read -r _ at _; do
			off=$((${at#*+}))
			riscv64-linux-gnu-objdump -d --start-address=$off --stop-address=$((off + 8)) "$o" |
				grep -A1 auipc | grep -q jalr
		done <<< "$output"
	done
}

nop_runs() {
	local cc=$1 qemu=$2; shift 2
	need "$cc"
	need "$qemu"
	build_objs plain "$cc" -O2 "$@"
	build_objs nop "$cc" -O2 -pg "$@"
	rm "$T"/{plain,nop}/shapes.o
	run "$RECORDMCOUNT" --nop "$T"/nop/*.o
	assert_success
	"$cc" -static "$T"/plain/*.o -o "$T/plain.bin"
	"$cc" -static "$T"/nop/*.o -o "$T/nop.bin"
	diff <("$qemu" "$T/plain.bin") <("$qemu" "$T/nop.bin")
	run bash -c "${cc%gcc}objdump -d '$T/nop.bin' | grep -cE '(bl|jalr|call)[[:space:]].*<_?mcount>'"
	assert_output 0
}

@test "aarch64 --nop objects link and run under qemu with the same output" { nop_runs aarch64-linux-gnu-gcc qemu-aarch64; }
@test "riscv64 --nop objects link and run under qemu with the same output" { nop_runs riscv64-linux-gnu-gcc qemu-riscv64; }
@test "arm --nop objects (push and bl both NOPed) run under qemu" { nop_runs arm-linux-gnueabihf-gcc qemu-arm -marm; }

# nop_checks CC FLAGS...: recordmcount --nop's objects pass objpatch check,
# which must know the NOPs the backend wrote (not only a table of them).
nop_checks() {
	local cc=$1; shift
	need "$cc"
	build_objs nop "$cc" -O2 -pg "$@"
	run "$RECORDMCOUNT" --nop "$T"/nop/*.o
	assert_success
	run "$OBJPATCH" check "$T"/nop/*.o
	assert_success
	run "$OBJPATCH" -j inspect "$T"/nop/*.o
	assert_output --partial '"state":"nop"'
}

@test "arm (ARM) --nop objects pass objpatch check" { nop_checks arm-linux-gnueabihf-gcc -marm; }
@test "arm (Thumb-2) --nop objects pass objpatch check" { nop_checks arm-linux-gnueabihf-gcc -mthumb; }
@test "mips64el --nop objects pass objpatch check" { nop_checks mips64el-linux-gnuabi64-gcc -mno-abicalls -fno-pic; }
