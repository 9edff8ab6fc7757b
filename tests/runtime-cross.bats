#!/usr/bin/env bats
# libmcloc on aarch64 and riscv64, under qemu-user (whose guest threads are
# host threads, so they run in parallel): the fixtures of runtime.bats
# built with each architecture's flags for an ops slot before every
# function (-fpatchable-function-entry=4,2 or =8,4, -falign-functions=8),
# linked through objpatch link --nop --runtime, against a libmcloc
# cross-built for the architecture (libmcloc/cross/ARCH.ini) in
# setup_file.  And what each change writes into text, counted by the
# library and decoded apart from it.

load helpers

RT=$SRC/tests/fixtures/runtime

setup_file() {
	# The plain build runs these; the sanitized build would run the same
	# unsanitized cross library again.
	[ -z "${MCLOC_SANITIZED:-}" ] || return 0
	for a in aarch64 riscv64; do
		command -v "$a-linux-gnu-gcc" >/dev/null && command -v "qemu-$a" >/dev/null || continue
		local b=$BATS_FILE_TMPDIR/lib-$a
		# (No descriptor of bats' goes to the build: a compiler cache's
		# server that meson starts would keep it open, and bats would
		# wait for it forever.)
		{ meson setup "$b" "$SRC" --cross-file "$SRC/libmcloc/cross/$a.ini" \
			-Dtools=false && ninja -C "$b"; } >"$BATS_FILE_TMPDIR/build-$a.log" 2>&1 3>&- ||
			echo "cross build for $a failed" > "$BATS_FILE_TMPDIR/failed-$a"
	done
}

# cross ARCH: skip without its toolchain; set CC, FLAGS, QEMU, LIB.
cross() {
	local a=$1
	need "$a-linux-gnu-gcc"
	need "qemu-$a"
	[ ! -e "$BATS_FILE_TMPDIR/failed-$a" ] || fail "$(cat "$BATS_FILE_TMPDIR/failed-$a")"
	CC=$a-linux-gnu-gcc
	QEMU=(qemu-"$a" -L /usr/"$a"-linux-gnu)
	LIB=$BATS_FILE_TMPDIR/lib-$a/libmcloc
	case $a in
	aarch64) FLAGS=(-fpatchable-function-entry=4,2 -falign-functions=8) ;;
	riscv64) FLAGS=(-fpatchable-function-entry=8,4 -falign-functions=8) ;;
	esac
}

plain_only() {
	[ -z "${MCLOC_SANITIZED:-}" ] ||
		skip "the cross library is not sanitized: the plain build runs this"
}

# build_cross ARCH DRIVER NFUNCS [CFLAGS...]: $T/DRIVER for ARCH.
build_cross() {
	local a=$1 d=$2 n=$3; shift 3
	cross "$a"
	$PY "$RT/gen.py" "$T/gen.c" "$n"
	$CC -O1 "${FLAGS[@]}" -c "$T/gen.c" -o "$T/gen.o"
	$CC -O1 "$@" -I"$SRC/include" -c "$RT/$d.c" -o "$T/$d.o"
	"$OBJPATCH" link --nop --runtime --check -- $CC "$@" "$T/$d.o" "$T/gen.o" \
		-o "$T/$d" -L"$LIB" -lmcloc -lpthread
}

run_cross() {
	run env LD_LIBRARY_PATH="$LIB" timeout -s KILL 900 "${QEMU[@]}" "$@"
}

rt_test() {
	plain_only
	build_cross "$1" rt_test 2000
	run_cross "$T/rt_test"
	echo "$output"
	assert_success
	assert_line "ok: its site calls the regs trampoline, not a direct stub"
	assert_line --partial "redirect: "
	assert_line "PASSED: 0 failures"
	refute_line --partial "FAIL"
}

@test "aarch64: live patching while threads run: counts, filters, ops slots, redirect, races" {
	rt_test aarch64
}

@test "riscv64: live patching while threads run: counts, filters, ops slots, redirect, races" {
	rt_test riscv64
}

stress() {
	plain_only
	build_cross "$1" stress 10000
	run_cross "$T/stress" 20 1000
	echo "$output"
	echo "# $1: ${lines[-3]}" >&3
	assert_success
	assert_line "PASSED"
	assert_line --partial "mismatches: 0, api errors: 0, enabled at end: 0"
}

@test "aarch64 stress: 8 threads, 10,000 functions, 1,000+ overlapping toggles, exact per call" {
	stress aarch64
}

@test "riscv64 stress: 8 threads, 10,000 functions, 1,000+ overlapping toggles, exact per call" {
	stress riscv64
}

# The dispatcher loads a site's word with acquire, then its ops slot
# (libmcloc/dispatch.c, slot_call): with a plain load first, a weakly
# ordered CPU or the compiler may take the slot before the word, and pair
# a new call with an old slot whose ops is gone.  qemu-user on an x86_64
# host never lets a load pass an earlier one, so no run shows it; the
# code built does.  aarch64: the word's load is ldar or ldapr, and no plain
# 32-bit load at the site remains.  riscv64: it is one lw, then a fence
# before any other access or branch.
ordered_load() {
	plain_only
	cross "$1"
	need "$1-linux-gnu-objdump"
	local fn
	fn=$("$1-linux-gnu-objdump" -d --no-show-raw-insn "$LIB/libmcloc.so" |
		awk '/<mcr_args_dispatch>:$/ { on = 1 } on && /^$/ { exit } on')
	echo "$fn"
	[ -n "$fn" ]
	case $1 in
	aarch64)
		grep -A1 -E '\ssub\s+x[0-9]+, x[0-9]+, #0x4$' <<< "$fn" |
			grep -Eq '\slda(p)?r\s+w[0-9]+, \[x[0-9]+\]'
		! grep -Eq '\sldu?r\s+w[0-9]+, \[x[0-9]+, #-4\]' <<< "$fn" ;;
	riscv64)
		awk '/\tlw\t[a-z0-9]+,-4\(/ { at = 1; next }
		     at && /\tfence/ { ok = 1; at = 0 }
		     at && /\t(l[bhwd]u?|s[bhwd]|b[a-z]*|j|jal|jalr|ret)\t/ { at = 0 }
		     END { exit !ok }' <<< "$fn" ;;
	esac
}

@test "aarch64: the dispatcher loads the site's call with acquire before its ops slot" {
	ordered_load aarch64
}

@test "riscv64: the dispatcher loads the site's call with acquire before its ops slot" {
	ordered_load riscv64
}

# A kernel without membarrier SYNC_CORE (before 4.16): the host kernel
# qemu-user calls on is made to refuse it by tests/lib/nomembarrier, the
# whole system call (ENOSYS) or its SYNC_CORE commands (EINVAL).  Sites
# still change, exactly; the log says how; and the stress test, with
# slots changing under its calls, holds without the sync.
nomembarrier() {
	plain_only
	cross "$1"
	cc -O2 "$SRC/tests/lib/nomembarrier.c" -o "$T/nomembarrier"
	build_cross "$1" nosync 20 "${FLAGS[@]}"
	local mode errno
	for mode in enosys nosynccore; do
		case $mode in
		enosys) errno="Function not implemented" ;;
		nosynccore) errno="Invalid argument" ;;
		esac
		run env LD_LIBRARY_PATH="$LIB" "$T/nomembarrier" $mode "${QEMU[@]}" "$T/nosync"
		echo "$output"
		assert_success
		assert_line --partial "sync-core $errno"
		assert_line "libmcloc[1]: membarrier(PRIVATE_EXPEDITED_SYNC_CORE) is not available ($errno): sites change without it, and a thread may run a site's old instruction for a moment after its batch"
		assert_line "traced 1000 of 1000"
		assert_line "after: 1000"
	done
	build_cross "$1" stress 2000
	run env LD_LIBRARY_PATH="$LIB" timeout -s KILL 900 "$T/nomembarrier" enosys \
		"${QEMU[@]}" "$T/stress" 10 300
	echo "$output"
	assert_success
	assert_line "PASSED"
	assert_line --partial "mismatches: 0, api errors: 0, enabled at end: 0"
}

@test "aarch64: no membarrier SYNC_CORE: sites change all the same, the log says how" {
	nomembarrier aarch64
}

@test "riscv64: no membarrier SYNC_CORE: sites change all the same, the log says how" {
	nomembarrier riscv64
}

# cross_shlib ARCH: $T/libtraced.so from fixtures/runtime/shlib.c.
cross_shlib() {
	plain_only
	cross "$1"
	$CC -O2 -fPIC "${FLAGS[@]}" -c "$RT/shlib.c" -o "$T/shlib.o"
	"$OBJPATCH" link --nop --runtime --check -- $CC -shared "$T/shlib.o" -o "$T/libtraced.so"
}

dlloop() {
	cross_shlib "$1"
	$CC -O2 -I"$SRC/include" "$RT/dlloop.c" -o "$T/dlloop" -Wl,--no-as-needed \
		-L"$LIB" -lmcloc -ldl
	run_cross "$T/dlloop" "$T/libtraced.so"
	echo "$output"
	assert_success
	assert_line "300 cycles"
	assert_line "PASSED"
}

@test "aarch64: dlopen/dlclose 300 times, ops across an unload" {
	dlloop aarch64
}

@test "riscv64: dlopen/dlclose 300 times, ops across an unload" {
	dlloop riscv64
}

# dlthreads ARCH: tests/hostile.bats's dlopen/dlclose while threads call
# into the library, under qemu.
dlthreads() {
	cross_shlib "$1"
	$CC -O2 -I"$SRC/include" "$RT/dlthreads.c" -o "$T/dlthreads" -Wl,--no-as-needed \
		-L"$LIB" -lmcloc -ldl -lpthread
	run_cross "$T/dlthreads" "$T/libtraced.so"
	echo "$output"
	assert_success
	assert_line "PASSED"
}

@test "aarch64: dlopen/dlclose 200 times while 4 threads call into the library, exact" {
	dlthreads aarch64
}

@test "riscv64: dlopen/dlclose 200 times while 4 threads call into the library, exact" {
	dlthreads riscv64
}

# stores ARCH NOP CALL: the fixture's lines, decoded with tests/lib/decode.py.
stores() {
	plain_only
	build_cross "$1" stores 20
	run_cross "$T/stores"
	echo "$output"
	assert_success
	local step insn slot site sv dec
	while read -r step insn slot site sv; do
		[ "$step" != list: ] || continue
		local before=${site#site=} after
		after=${before#*->}
		before=${before%->*}
		dec=$($PY "$SRC/tests/lib/decode.py" "$1" "$before" "$after" | tr '\n' '|')
		echo "$step $insn $slot $sv: $dec"
		case $step in
		enable)		[ "$insn $slot $sv" = "insn=1 slot=1 slot=old->new" ]
				[[ $dec == "$2|$3"* ]] ;;
		second)		[ "$insn $slot $sv" = "insn=0 slot=1 slot=old->new" ]
				[[ $dec == "$3"*"|$3"* ]] ;;
		first-alone)	[ "$insn $slot $sv" = "insn=0 slot=1 slot=old->new" ]
				[[ $dec == "$3"*"|$3"* ]] ;;
		disable)	[ "$insn $slot $sv" = "insn=1 slot=0 slot=same->same" ]
				[[ $dec == "$3"*"|$2|" ]] ;;
		*)		false ;;
		esac
	done <<< "$output"
	# A site with one ops reaches it through its slot; with two, the list.
	assert_line "list: one=0 two=1000"
}

@test "aarch64: a site changes with one 4-byte store (nop <-> bl), an ops change only its slot" {
	stores aarch64 nop bl
}

@test "riscv64: a site changes with one 4-byte store (nop <-> jalr t0), an ops change only its slot" {
	stores riscv64 nop "jalr x5"
}

direct() {
	plain_only
	build_cross "$1" direct 20
	run_cross "$T/direct"
	echo "$output"
	assert_success
	assert_line "ok: shared: callback, then trampoline, each call"
	assert_line "ok: redirected: the trampoline, then fn2"
	assert_line "PASSED: 0 failures"
}

@test "aarch64: direct calls, itself or through the list, exact" {
	direct aarch64
}

@test "riscv64: direct calls, itself or through the list, exact" {
	direct riscv64
}

# The ops lifetime under AddressSanitizer: stress.c frees every ops as
# soon as unregister returns; a callback through a stale slot or set would
# be a use after free.
@test "aarch64 ops lifetime under ASan: ops freed at unregister are never called" {
	plain_only
	cross aarch64
	local b=$BATS_FILE_TMPDIR/asan-aarch64
	meson setup "$b" "$SRC" --cross-file "$SRC/libmcloc/cross/aarch64.ini" -Dtools=false \
		-Db_sanitize=address -Db_lundef=false >"$b.log" 2>&1 3>&- || { cat "$b.log"; false; }
	ninja -C "$b" >"$b.log" 2>&1 3>&- || { cat "$b.log"; false; }
	LIB=$b/libmcloc
	build_cross aarch64 stress 2000 -fsanitize=address
	# (LeakSanitizer cannot run under qemu-user.  No forks: a child forked
	# while another thread is in libasan's malloc can hang on its lock,
	# which this test is not about; the plain stress tests fork.)
	run env ASAN_OPTIONS=detect_leaks=0 STRESS_NO_FORK=1 LD_LIBRARY_PATH="$LIB" timeout -s KILL 900 \
		"${QEMU[@]}" "$T/stress" 10 200
	echo "$output"
	assert_success
	refute_output --partial "AddressSanitizer"
	assert_line "PASSED"
}

@test "riscv64 ops lifetime under ASan" {
	skip "ASan's allocator fails under qemu-riscv64 (CHECK failed: sanitizer_allocator_primary32.h: kNumPossibleRegions), before main"
}

demo() {
	plain_only
	cross "$1"
	run "$SRC/examples/runtime/run.sh" "${MCLOC_BUILD:-$SRC/build}" "$1" "$LIB"
	echo "$output"
	assert_success
	assert_line --regexp '^ +[^ ]+-[0-9]+ +\[[0-9]{3}\] +[0-9]+\.[0-9]{6}: work_(sum|hash) <-app_worker$'
	assert_line --regexp '^work_hash +[0-9]+ +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$'
	assert_line --regexp '^calc_square +[0-9]+ +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$'
	assert_line --regexp '^profile off: +0 of 5 sites enabled'
}

@test "aarch64: examples/runtime traces and profiles as on x86_64" {
	demo aarch64
}

@test "riscv64: examples/runtime traces and profiles as on x86_64" {
	demo riscv64
}

# objpatch check on a runtime image: the fixed first instructions are
# there, and ops slots are 8-byte aligned (without -falign-functions=8
# some are not, and a store to them would not be atomic).
check_slots() {
	need "$1-linux-gnu-gcc"
	local cc=$1-linux-gnu-gcc
	$PY "$RT/gen.py" "$T/gen.c" 40
	echo 'int main(void) { return 0; }' > "$T/main.c"
	$cc -O2 "$2" -c "$T/gen.c" -o "$T/gen.o"
	$cc -O2 -c "$T/main.c" -o "$T/main.o"
	run "$OBJPATCH" link --nop --runtime --check -- $cc "$T/main.o" "$T/gen.o" -o "$T/prog"
	assert_failure
	assert_output --partial "not 8-byte aligned: compile with -falign-functions=8"
	[ ! -e "$T/prog" ]
	$cc -O2 "$2" -falign-functions=8 -c "$T/gen.c" -o "$T/gen.o"
	run "$OBJPATCH" link --nop --runtime --check -- $cc "$T/main.o" "$T/gen.o" -o "$T/prog"
	assert_success
	# And on its own, after the link.
	run "$OBJPATCH" check "$T/prog"
	assert_success
}

@test "aarch64: objpatch check verifies run-time sites and ops slot alignment" {
	check_slots aarch64 -fpatchable-function-entry=4,2
}

@test "riscv64: objpatch check verifies run-time sites and ops slot alignment" {
	check_slots riscv64 -fpatchable-function-entry=8,4
}

# A program that never heard of mcloc, built with the architecture's
# patchable entry and linked as usual: MCLOC_TRACER through LD_PRELOAD
# (qemu -E, so that qemu itself does not preload it).  libmcloc writes the
# sites' fixed first instruction itself, while the program is still
# alone, against a page of jump stubs near its text.
# unlinked_flags ARCH: FLAGS for a program libmcloc finds itself (no slot).
unlinked_flags() {
	case $1 in
	aarch64) FLAGS=(-fpatchable-function-entry=2) ;;
	riscv64) FLAGS=(-fpatchable-function-entry=4 -falign-functions=4) ;;
	esac
}

preload() {
	plain_only
	cross "$1"
	unlinked_flags "$1"
	$CC -O2 "${FLAGS[@]}" "$DEMO"/{main,fib,stats}.c -o "$T/demo"
	local env=(-E LD_PRELOAD="$LIB/libmcloc.so")
	run "${QEMU[@]}" "${env[@]}" -E MCLOC_TRACER=function -E MCLOC_FILTER='stats_*' \
		-E MCLOC_NOTRACE=stats_mean -E MCLOC_OUTPUT="$T/trace" "$T/demo"
	assert_success
	assert_output "sum=143 max=55 mean=14.30"
	run cat "$T/trace"
	assert_line --regexp '^ +[^ ]+-[0-9]+ +\[[0-9]{3}\] +[0-9]+\.[0-9]{6}: stats_add <-main$'
	assert_line --regexp ': stats_clamp <-stats_add$'
	refute_line --partial ": fib "
	refute_line --partial ": stats_mean "
	[ "$(grep -c ': stats_add <-main' "$T/trace")" -eq 10 ]
	[ "$(grep -c ': stats_clamp <-stats_add' "$T/trace")" -eq 10 ]
	run "${QEMU[@]}" "${env[@]}" -E MCLOC_TRACER=profile "$T/demo"
	assert_success
	assert_line --regexp '^fib +10 +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$'
	assert_line --regexp '^stats_mean +1 +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$'
	run "${QEMU[@]}" "${env[@]}" "$T/demo"
	assert_success
	assert_output "sum=143 max=55 mean=14.30"
}

@test "aarch64: MCLOC_TRACER on a program that never heard of mcloc, through LD_PRELOAD" {
	preload aarch64
}

@test "riscv64: MCLOC_TRACER on a program that never heard of mcloc, through LD_PRELOAD" {
	preload riscv64
}

# The same kind of program, but it starts a thread before libmcloc
# initialises: its sites are left alone, with the reason, and it runs on.
late() {
	plain_only
	cross "$1"
	$CC -O2 -fpatchable-function-entry=4 -falign-functions=8 -I"$SRC/include" \
		"$RT/late.c" -o "$T/late" -L"$LIB" -lmcloc -lpthread
	run_cross "$T/late"
	assert_success
	assert_line --partial "libmcloc: the main program's sites are left alone: it has started threads"
	assert_line "records 0, told 1, work 7"
}

@test "aarch64: a program that started threads first is left untraced, and told why" {
	late aarch64
}

@test "riscv64: a program that started threads first is left untraced, and told why" {
	late riscv64
}

# build_rawclone ARCH: $T/rawclone, linked without objpatch.
build_rawclone() {
	cross "$1"
	unlinked_flags "$1"
	$CC -O2 "${FLAGS[@]}" -I"$SRC/include" "$RT/rawclone.c" -o "$T/rawclone" \
		-L"$LIB" -lmcloc
}

# As late(), with a thread made by a raw clone(), which glibc does not count
# (qemu-user runs the guest's CLONE_VM threads as host threads): the
# kernel's list of the process's tasks does.  The same program with no
# thread has its sites taken, so the refusal is the thread's.
rawclone() {
	plain_only
	build_rawclone "$1"
	run_cross "$T/rawclone" alone
	echo "$output"
	assert_success
	refute_line --partial "left alone"
	assert_line --regexp '^records [1-9][0-9]*, told 0, work 7$'
	run_cross "$T/rawclone"
	echo "$output"
	assert_success
	assert_line "libmcloc: the main program's sites are left alone: it has started threads (link it with objpatch link --runtime, or initialise libmcloc first)"
	assert_line "records 0, told 1, work 7"
}

@test "aarch64: a program with a raw clone() thread is left untraced, and told why" {
	rawclone aarch64
}

@test "riscv64: a program with a raw clone() thread is left untraced, and told why" {
	rawclone riscv64
}

# Without /proc (a chroot, a container) the threads cannot be counted:
# the sites are left alone even with no thread, and the log says why.
# qemu-user itself runs without /proc.
noproc() {
	plain_only
	[ "$(id -u)" = 0 ] || skip "needs root, for a mount namespace with no /proc"
	need unshare
	build_rawclone "$1"
	run unshare -m sh -c 'mount -t tmpfs none /proc && exec "$@"' sh \
		env LD_LIBRARY_PATH="$LIB" timeout -s KILL 900 "${QEMU[@]}" "$T/rawclone" alone
	echo "$output"
	assert_success
	assert_line --partial "left alone: its threads cannot be counted (no /proc/self/task)"
	assert_line "records 0, told 1, work 7"
}

@test "aarch64: no /proc: the main program's sites are left alone, and told why" {
	noproc aarch64
}

@test "riscv64: no /proc: the main program's sites are left alone, and told why" {
	noproc riscv64
}

# -pg: recordmcount finds the calls to _mcount, and objpatch link
# --runtime makes each a site after the prologue, spelt apart from an
# entry's: aarch64 "add x9, x30, #0" over GCC's "mov x0, x30", then the
# NOP that toggles; riscv64 "auipc t1, hi" over the first of the 8 bytes
# of NOPs recordmcount --nop left (so that the linker could not relax the
# call to 4 bytes), built without compressed instructions so that the
# site is 4-byte aligned.  No ops slot, and no moving the function: its
# frame is built when the site runs.
pg() {
	plain_only
	cross "$1"
	local cflags=(-pg) rflags=() fixed
	case $1 in
	aarch64) fixed='add	x9, x30, #0x0' ;;
	riscv64) cflags+=(-march=rv64g) rflags=(--nop) fixed='auipc	t1,' ;;
	esac
	$PY "$RT/gen.py" "$T/gen.c" 2000
	$CC -O1 "${cflags[@]}" -c "$T/gen.c" -o "$T/gen.o"
	"$RECORDMCOUNT" "${rflags[@]}" "$T/gen.o"
	$CC -O1 -I"$SRC/include" -c "$RT/rt_test.c" -o "$T/rt_test.o"
	run "$OBJPATCH" link --nop --runtime --check -- $CC "$T/rt_test.o" "$T/gen.o" \
		-o "$T/rt_test" -L"$LIB" -lmcloc -lpthread
	assert_success
	refute_output --partial "plain NOP"
	[ "$($1-linux-gnu-objdump -d "$T/rt_test" | grep -c "$fixed")" -ge 2000 ]
	run_cross "$T/rt_test" late
	echo "$output"
	assert_success
	assert_line "ok: a -pg site's function is not moved (its frame is built)"
	assert_line "ok: mcloc_redirect of a -pg site: -EOPNOTSUPP"
	assert_line "PASSED: 0 failures"
}

@test "aarch64 -pg: sites after the prologue, live: counts, filters, races; no redirect" {
	pg aarch64
}

@test "riscv64 -pg: sites after the prologue, live: counts, filters, races; no redirect" {
	pg riscv64
}

# The /proc/self/mem fallback (tests/fixtures/runtime/wxdeny.c, which
# refuses writable text) cannot be checked under qemu-user: a write there
# goes to qemu's own memory behind its translation cache, so the guest
# keeps running the code it had (500 of 500 functions uncounted, seen
# 2026-11-23).  On x86_64 runtime.bats runs it natively.
@test "aarch64: text the kernel will not make writable: patched through /proc/self/mem" {
	skip "qemu-user does not see writes to /proc/self/mem (its translated code is not invalidated)"
}

@test "riscv64: text the kernel will not make writable: patched through /proc/self/mem" {
	skip "qemu-user does not see writes to /proc/self/mem (its translated code is not invalidated)"
}

# args ARCH: mcloc record of fixtures/runtime/argsfix.c under qemu-user
# (its sockets and shared memory are the host's): every kind of argument
# and result, by hand and from DWARF, the same as on x86_64 (args.bats).
# Strings there are read by /proc/self/maps: qemu-user has no
# process_vm_readv.
args_cross() {
	plain_only
	cross "$1"
	local mcloc=${MCLOC_CMD:-$(dirname "$OBJPATCH")/../mcloc/mcloc}
	export XDG_RUNTIME_DIR=$T/run
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	$CC -O1 -g "${FLAGS[@]}" -c "$RT/argsfix.c" -o "$T/argsfix.o"
	"$OBJPATCH" link --nop --runtime -- $CC "$T/argsfix.o" -o "$T/argsfix" -L"$LIB" -lmcloc
	cd "$T"
	mapfile -t byhand < "$RT/argsfix.spec"
	run timeout -s KILL 300 "$mcloc" record "${byhand[@]}" -- \
		env LD_LIBRARY_PATH="$LIB" "${QEMU[@]}" ./argsfix
	echo "$output"
	assert_success
	assert_line "4660"
	"$mcloc" replay | mask_times | diff -u "$RT/argsfix.want" -
	run timeout -s KILL 300 "$mcloc" record --auto-args -- \
		env LD_LIBRARY_PATH="$LIB" "${QEMU[@]}" ./argsfix
	assert_success
	"$mcloc" replay | mask_times | sed -n '5,$p' | diff -u "$RT/argsfix-auto.want" -
	# The function tracer: its ops asks for the registers there.
	run timeout -s KILL 300 "$mcloc" record function -A 'many@arg1,arg9,arg10' \
		-A 'floats@fparg2' -A 'strings@arg1/s' -- \
		env LD_LIBRARY_PATH="$LIB" "${QEMU[@]}" ./argsfix
	assert_success
	run "$mcloc" replay
	assert_line --regexp ': many\(1, 9, 10\) <-main$'
	assert_line --regexp ': floats\(-2.25\) <-main$'
	assert_line --regexp ': strings\("hello \\"world\\"\\n"\) <-main$'
}

@test "aarch64: arguments and return values of every kind, by hand and from DWARF (mcloc record under qemu-user)" {
	args_cross aarch64
}

@test "riscv64: arguments and return values of every kind, by hand and from DWARF (mcloc record under qemu-user)" {
	args_cross riscv64
}
