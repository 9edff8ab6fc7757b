#!/usr/bin/env bats
# libmcloc on x86_64: a multi-threaded program built through the whole
# toolchain (-pg -mfentry, recordmcount, objpatch link --nop --runtime)
# enables and disables tracing while its threads run
# (tests/fixtures/runtime/rt_test.c): exact counts over quiesced windows,
# glob filters and notrace, a redirect through the regs trampoline, 200
# enable/disable cycles under load, a batch refused whole over a site
# changed behind the library's back, page protections, record size; and
# the /proc/self/mem fallback where text may not become writable.

load helpers

RT=$SRC/tests/fixtures/runtime

# build_shlib: $T/libtraced.so from fixtures/runtime/shlib.c, through
# recordmcount and objpatch link --nop --runtime --check.
build_shlib() {
	cc -O2 -fPIC -pg -mfentry -c "$RT/shlib.c" -o "$T/shlib.o"
	"$RECORDMCOUNT" "$T/shlib.o"
	"$OBJPATCH" link --nop --runtime --check -- cc -shared "$T/shlib.o" -o "$T/libtraced.so"
}

# build_traced DRIVER NFUNCS: $T/DRIVER from fixtures/runtime/DRIVER.c and
# NFUNCS generated traced functions, through recordmcount and objpatch
# link --nop --runtime --check (sanitized in the sanitized build).
build_traced() {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	$PY "$RT/gen.py" "$T/gen.c" "$2"
	cc -O1 -pg -mfentry -c "$T/gen.c" -o "$T/gen.o"
	"$RECORDMCOUNT" "$T/gen.o"
	cc -O1 "${SAN[@]}" -I"$SRC/include" -c "$RT/$1.c" -o "$T/$1.o"
	"$OBJPATCH" link --nop --runtime --check -- cc "${SAN[@]}" "$T/$1.o" "$T/gen.o" \
		-o "$T/$1" -L"$LIBDIR" -lmcloc -lpthread
}

build_rt() {
	build_traced rt_test "$1"
	mv "$T/rt_test" "$T/rt"
}

@test "live patching while threads run: counts, filters, redirect, races, protections" {
	build_rt 2000
	run env LD_LIBRARY_PATH="$LIBDIR" timeout 120 "$T/rt"
	echo "$output"
	assert_success
	assert_line "PASSED: 0 failures"
	refute_line --partial "FAIL"
}

@test "one enable of every site is one batch of two syncs, whatever the count, or none alone: link --runtime parked every site" {
	need strace
	for n in 200 20000; do
		build_rt $n
		# (LeakSanitizer cannot run under ptrace.)
		run env LD_LIBRARY_PATH="$LIBDIR" ASAN_OPTIONS=detect_leaks=0 \
			strace -f -e trace=membarrier -o "$T/trace" \
			"$T/rt" oneshot threaded
		assert_success
		# Parked on the image's stub 0 at link time, every site is
		# enabled for the first ops by its first byte: breakpoint,
		# sync, first byte, sync; no tail step.
		assert_line "oneshot: $n sites enabled, 1 batch(es), 2 syncs"
		# Disable (parking again) and enable again, the same.
		assert_line "again: $n sites enabled, 2 batch(es), 4 syncs"
		# The core syncs themselves (the RCU registers for its own
		# PRIVATE_EXPEDITED barriers as well; those are not syncs).
		run grep -c 'membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE,' "$T/trace"
		assert_output 6
		# Alone in its process, the thread changes the text with no
		# other to run it: each site its new byte, no breakpoint, no
		# sync, as the kernel's text_poke_early() writes.
		run env LD_LIBRARY_PATH="$LIBDIR" ASAN_OPTIONS=detect_leaks=0 \
			strace -f -e trace=membarrier -o "$T/trace" \
			"$T/rt" oneshot
		assert_success
		assert_line "oneshot: $n sites enabled, 1 batch(es), 0 syncs"
		assert_line "again: $n sites enabled, 2 batch(es), 0 syncs"
		run grep -c 'membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE,' "$T/trace"
		assert_output 0
	done
}

@test "a descriptor naming as its direct stubs a page of other code gets a page of the library's: no site calls into that code" {
	build_rt 200
	# The descriptor's direct_stubs (its relocation's addend, in a PIE)
	# moved to the page before the stubs, and the sites made NOPs again,
	# which the library accepts whatever the descriptor says.
	$PY - "$T/rt" "$T/rt-forged" <<-'PY'
	import struct, sys
	from elftools.elf.elffile import ELFFile
	src, dst = sys.argv[1:]
	elf = ELFFile(open(src, "rb"))
	syms = {s.name: s["st_value"] for s in elf.get_section_by_name(".symtab").iter_symbols()}
	text = elf.get_section_by_name(".text")
	stubs = syms["mcloc_direct_stubs"]
	assert stubs - 4096 >= text["sh_addr"], hex(stubs)
	b = bytearray(open(src, "rb").read())
	rd = elf.get_section_by_name(".rela.dyn")
	at = [i for i, r in enumerate(rd.iter_relocations())
	      if r["r_offset"] == syms["__mcloc_image"] + 88]
	assert len(at) == 1, at
	struct.pack_into("<q", b, rd["sh_offset"] + 24 * at[0] + 16, stubs - 4096)
	for k in range(200):
	    o = syms["fn%d" % k] - text["sh_addr"] + text["sh_offset"]
	    assert b[o] == 0xa9
	    b[o:o + 5] = bytes.fromhex("0f1f440000")
	open(dst, "wb").write(b)
	PY
	chmod +x "$T/rt-forged"
	run env LD_LIBRARY_PATH="$LIBDIR" timeout 120 "$T/rt-forged"
	assert_success
	assert_line "PASSED: 0 failures"
}

@test "link --runtime parks every x86_64 site on its image's first stub; a site parked anywhere else is refused alone" {
	build_rt 200
	run "$OBJPATCH" inspect "$T/rt"
	assert_success
	[ "$(grep -c 'parked (' <<< "$output")" -eq 200 ]
	refute_output --partial "nop ("
	# Each site's bytes: a9 and the displacement of a call to the page of
	# stubs; fn7's is then moved to the next stub.
	$PY - "$T/rt" "$T/rt-bad" <<-'PY'
	import subprocess, struct, sys
	src, dst = sys.argv[1:]
	secs = subprocess.run(["readelf", "-SW", src], capture_output=True, text=True).stdout
	text = [l.split() for l in secs.splitlines() if " .text " in l][0]
	i = text.index(".text")
	addr, off = int(text[i + 2], 16), int(text[i + 3], 16)
	syms = {l.split()[2]: int(l.split()[0], 16) for l in
		subprocess.run(["nm", src], capture_output=True, text=True).stdout.splitlines()
		if len(l.split()) == 3}
	stubs = syms["mcloc_direct_stubs"]
	assert stubs % 4096 == 0, hex(stubs)
	b = bytearray(open(src, "rb").read())
	for k in range(200):
	    a = syms["fn%d" % k]
	    o = a - addr + off
	    rel = struct.unpack_from("<i", b, o + 1)[0]
	    assert b[o] == 0xa9 and a + 5 + rel == stubs, "fn%d: %s" % (k, b[o:o + 6].hex())
	o = syms["fn7"] - addr + off
	struct.pack_into("<i", b, o + 1, struct.unpack_from("<i", b, o + 1)[0] + 32)
	open(dst, "wb").write(b)
	PY
	chmod +x "$T/rt-bad"
	# objpatch check in CI says so before any run does.
	"$OBJPATCH" check "$T/rt"
	run "$OBJPATCH" check "$T/rt-bad"
	assert_failure 1
	assert_output --regexp "^.*rt-bad: error: objpatch: fn7\+0x0: parked on 0x[0-9a-f]+, not on the image's first direct stub \(0x[0-9a-f]+\): the runtime refuses it\$"
	run env LD_LIBRARY_PATH="$LIBDIR" ASAN_OPTIONS=detect_leaks=0 "$T/rt" oneshot threaded
	assert_success
	assert_line "oneshot: 200 sites enabled, 1 batch(es), 2 syncs"
	# The library cannot know what a site parked elsewhere would call:
	# refused, and the others all enabled in the same two syncs.
	run env LD_LIBRARY_PATH="$LIBDIR" ASAN_OPTIONS=detect_leaks=0 "$T/rt-bad" oneshot threaded
	assert_success
	assert_line "oneshot: 199 sites enabled, 1 batch(es), 2 syncs"
	# ... in one line that says why.
	assert_line --partial "1 site skipped: parked (0xa9) but not on the image's first direct stub"
}

# -pg without -mfentry: the sites follow the prologue (push %rbp; mov
# %rsp, %rbp), so a callback may not move the function and
# mcloc_redirect refuses it; everything else is as at the entry.
@test "-pg without -mfentry: sites after the prologue, live; never moved, no redirect" {
	[ "$(uname -m)" = x86_64 ] || skip "the x86_64 build"
	$PY "$RT/gen.py" "$T/gen.c" 2000
	cc -O1 -pg -c "$T/gen.c" -o "$T/gen.o"
	"$RECORDMCOUNT" "$T/gen.o"
	cc -O1 "${SAN[@]}" -I"$SRC/include" -c "$RT/rt_test.c" -o "$T/rt.o"
	"$OBJPATCH" link --nop --runtime --check -- cc "${SAN[@]}" "$T/rt.o" "$T/gen.o" \
		-o "$T/rt" -L"$LIBDIR" -lmcloc -lpthread
	run env LD_LIBRARY_PATH="$LIBDIR" timeout 120 "$T/rt" late
	echo "$output"
	assert_success
	assert_line "ok: a -pg site's function is not moved (its frame is built)"
	assert_line "ok: mcloc_redirect of a -pg site: -EOPNOTSUPP"
	assert_line "PASSED: 0 failures"
}

# The stress test of tests/fixtures/runtime/stress.c, for about 30 s: per
# call, the callbacks that fired must be exactly those of the ops
# registered for the whole call; ops are freed and poisoned right after
# unregister; threads come and go, signals and forks fly.  Longer runs:
# tests/bench/stress.sh.
@test "stress: 8 threads, 10,000 functions, 1,000+ enable/disable cycles, exact per call" {
	build_traced stress 10000
	run env LD_LIBRARY_PATH="$LIBDIR" timeout -s KILL 600 "$T/stress" 30 1000
	echo "$output"
	echo "# ${lines[-3]}" >&3
	assert_success
	assert_line "PASSED"
	assert_line --partial "mismatches: 0, api errors: 0, enabled at end: 0"
}

@test "fork while threads come, go and trace: each child traces, spawns and waits a grace period; none hangs" {
	build_traced forkreg 200
	# Under ASan the children spawn no thread: ASan's allocator is not
	# fork-safe, and a child's new thread blocked in its malloc.
	local spawn=1
	[ -z "${MCLOC_SANITIZED:-}" ] || spawn=0
	run env LD_LIBRARY_PATH="$LIBDIR" timeout -s KILL 300 "$T/forkreg" 10 $spawn
	echo "# $output" >&3
	assert_success
	assert_output --regexp '^forks [0-9]+, hung 0$'
}

# Every lock of the runtime is taken around fork(): children forked while
# other threads hold each of them (tests/fixtures/runtime/forkstorm.c), and
# while mcloc traces the program over and over, go through each one
# themselves and exit.
@test "fork storm: children forked while threads register ops, redirect, trace, load images and mcloc traces; none hangs" {
	# (GCC 12's libasan takes no lock around fork(): a child forked while
	# another thread is in its malloc waits forever, whatever libmcloc does.)
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "ASan's allocator is not fork-safe"
	build_shlib
	build_traced forkstorm 200
	export XDG_RUNTIME_DIR=$T/run
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	env LD_LIBRARY_PATH="$LIBDIR" MCLOC_CONTROL=1 timeout -s KILL 600 \
		"$T/forkstorm" "$T/libtraced.so" 200 >"$T/out" 2>"$T/err" &
	local pid=$! storm= traced=0
	while kill -0 $pid 2>/dev/null; do
		[ -n "$storm" ] || storm=$(sed -n 's/^pid //p' "$T/out" 2>/dev/null) || true
		if [ -n "$storm" ] && "${MCLOC_CMD:-$LIBDIR/../mcloc/mcloc}" trace $storm function \
				--filter 'fn3*' --duration 0.2 >/dev/null 2>&1; then
			traced=$((traced + 1))
		else
			sleep 0.05
		fi
	done
	wait $pid || true
	cat "$T/out" "$T/err"
	echo "# traced $traced times meanwhile" >&3
	[ "$traced" -gt 0 ]
	run tail -n 1 "$T/out"
	assert_output "forks 200, hung 0, failed 0"
}

@test "MCLOC_TRACER=function and =profile: ftrace's line format, filters, output file" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	demo_objs "$T/o" record
	"$OBJPATCH" link --nop --runtime -- cc "$T"/o/*.o -o "$T/demo"
	lib=$LIBDIR/libmcloc.so
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	run env LD_PRELOAD="$lib" MCLOC_TRACER=function MCLOC_FILTER='stats_*' \
		MCLOC_NOTRACE=stats_mean MCLOC_OUTPUT="$T/trace" "$T/demo"
	assert_success
	assert_output "sum=143 max=55 mean=14.30"
	run cat "$T/trace"
	assert_line --regexp '^ +demo-[0-9]+ +\[[0-9]{3}\] +[0-9]+\.[0-9]{6}: stats_add <-main$'
	assert_line --regexp ': stats_clamp <-stats_add$'
	refute_line --partial ": fib "
	refute_line --partial ": stats_mean "
	[ "$(grep -c ': stats_add <-main' "$T/trace")" -eq 10 ]
	run env LD_PRELOAD="$lib" MCLOC_TRACER=profile "$T/demo"
	assert_success
	assert_line --regexp '^fib +10 +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$'
	assert_line --regexp '^stats_mean +1 +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$'
	assert_line --regexp '^Function +Hit +Time \(us\) +Avg \(us\)$'
	# Without MCLOC_TRACER nothing is printed and every site stays a NOP.
	run env LD_PRELOAD="$lib" "$T/demo"
	assert_output "sum=143 max=55 mean=14.30"
}

@test "MCLOC_* mistakes get one line each, %p keeps each process's output, a signal keeps what was recorded" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	demo_objs "$T/o" record
	"$OBJPATCH" link --nop --runtime -- cc "$T"/o/*.o -o "$T/demo"
	lib=$LIBDIR/libmcloc.so
	run env LD_PRELOAD="$lib" MCLOC_TRACER=functoin "$T/demo"
	assert_success
	assert_equal "$output" "libmcloc: MCLOC_TRACER=functoin: no such tracer (function, profile); not tracing
sum=143 max=55 mean=14.30"
	run env LD_PRELOAD="$lib" MCLOC_TRACER=profile MCLOC_OUTPUT=/nonexistent/x "$T/demo"
	assert_success
	assert_equal "$output" "libmcloc: MCLOC_OUTPUT=/nonexistent/x: No such file or directory; not tracing
sum=143 max=55 mean=14.30"
	# One pattern of two matches nothing: traced by the other, and said.
	run env LD_PRELOAD="$lib" MCLOC_TRACER=function MCLOC_FILTER='stats_add,nosuch*' \
		MCLOC_OUTPUT="$T/f" "$T/demo"
	assert_success
	assert_line "libmcloc: MCLOC_FILTER: 'nosuch*' matched no traced function"
	[ "$(grep -c ': stats_add <-' "$T/f")" -eq 10 ]
	run head -2 "$T/f"
	assert_line --index 0 "# tracer: function"
	assert_line --index 1 --regexp '^# pid [0-9]+ \(demo\)$'
	# %p: both processes of a pipeline keep their profile, each headed
	# by its own pid.
	env LD_PRELOAD="$lib" MCLOC_TRACER=profile MCLOC_OUTPUT="$T/p.%p" "$T/demo" |
		env LD_PRELOAD="$lib" MCLOC_TRACER=profile MCLOC_OUTPUT="$T/p.%p" "$T/demo" >/dev/null
	[ "$(ls "$T"/p.* | wc -l)" -eq 2 ]
	for f in "$T"/p.*; do
		grep -qx "# pid ${f##*.} (demo)" "$f"
		grep -Eq '^fib +10 ' "$f"
	done

	# Killed by a signal: what was recorded is written, and the process
	# still dies of that signal.
	printf '%s\n' '#include <signal.h>' '#include <stdlib.h>' \
		'__attribute__((noinline)) int work(int x) { return x * 2; }' \
		'int main(int argc, char **argv)' '{' '	int s = 0;' \
		'	for (int i = 0; i < 5; i++)' '		s += work(i);' \
		'	if (argc > 1)' '		raise(atoi(argv[1]));' \
		'	*(volatile int *)0 = s;	/* SIGSEGV */' '	return 0;' '}' > "$T/sig.c"
	cc -O1 -pg -mfentry -c "$T/sig.c" -o "$T/sig.o"
	"$RECORDMCOUNT" "$T/sig.o"
	"$OBJPATCH" link --nop --runtime -- cc "$T/sig.o" -o "$T/sig"
	run env LD_PRELOAD="$lib" MCLOC_TRACER=profile MCLOC_OUTPUT="$T/term" "$T/sig" 15
	assert_equal "$status" 143
	grep -qx '# killed by signal 15: unsorted' "$T/term"
	grep -Eq '^work +5 +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$' "$T/term"
	run env LD_PRELOAD="$lib" MCLOC_TRACER=function MCLOC_OUTPUT="$T/segv" "$T/sig"
	assert_equal "$status" 139
	[ "$(grep -c ': work <-main$' "$T/segv")" -eq 5 ]
	# A signal the program ignores stays ignored: it goes on to SIGSEGV.
	run env LD_PRELOAD="$lib" MCLOC_TRACER=profile MCLOC_OUTPUT="$T/ign" \
		bash -c "trap '' TERM; exec '$T/sig' 15"
	assert_equal "$status" 139
}

# A child forked under the environment's tracer writes its own output,
# headed by its own pid and holding its own calls only: NAME.PID beside a
# MCLOC_OUTPUT file NAME, its own file for a name with %p, and its own
# header in a shared standard error.
# build_forker: $T/forker, which calls before() 3 times, then forks: the
# child calls in_child() 7 times, the parent in_parent() 5 times.
build_forker() {
	printf '%s\n' '#include <stdio.h>' '#include <sys/wait.h>' '#include <unistd.h>' \
		'__attribute__((noinline)) int before(int x) { return x + 1; }' \
		'__attribute__((noinline)) int in_child(int x) { return x * 2; }' \
		'__attribute__((noinline)) int in_parent(int x) { return x - 1; }' \
		'int main(void)' '{' '	int s = 0;' \
		'	for (int i = 0; i < 3; i++)' '		s += before(i);' \
		'	pid_t p = fork();' '	if (p == 0) {' \
		'		for (int i = 0; i < 7; i++)' '			s += in_child(i);' \
		'		printf("child %d\n", (int)getpid());' '		return s == 0;' '	}' \
		'	waitpid(p, NULL, 0);' '	for (int i = 0; i < 5; i++)' '		s += in_parent(i);' \
		'	printf("parent %d\n", (int)getpid());' '	return s == 0;' '}' > "$T/forker.c"
	cc -O1 -pg -mfentry -c "$T/forker.c" -o "$T/forker.o"
	"$RECORDMCOUNT" "$T/forker.o"
	"$OBJPATCH" link --nop --runtime -- cc "$T/forker.o" -o "$T/forker"
}

@test "MCLOC_TRACER in a forked child: its own output, named and headed by its pid, with its calls only" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	build_forker
	lib=$LIBDIR/libmcloc.so
	# forked_outputs PARENT_FILE CHILD_FILE: each headed by its pid, each
	# with its own calls.
	forked_outputs() {
		grep -qx "# pid $ppid (forker)" "$1"
		grep -qx "# pid $cpid (forker)" "$2"
		[ "$(grep -c '^# pid ' "$1")" -eq 1 ] && [ "$(grep -c '^# pid ' "$2")" -eq 1 ]
		[ "$(grep -c in_child "$1")" -eq 0 ]
		[ "$(grep -Ec '(^|: )(before|in_parent|main) ' "$2")" -eq 0 ]
	}
	run env LD_PRELOAD="$lib" MCLOC_TRACER=profile MCLOC_OUTPUT="$T/prof" "$T/forker"
	assert_success
	cpid=$(echo "$output" | sed -n 's/^child //p')
	ppid=$(echo "$output" | sed -n 's/^parent //p')
	forked_outputs "$T/prof" "$T/prof.$cpid"
	grep -Eq '^before +3 ' "$T/prof"
	grep -Eq '^in_parent +5 ' "$T/prof"
	grep -Eq '^in_child +7 ' "$T/prof.$cpid"
	# %p: the child's own name.
	run env LD_PRELOAD="$lib" MCLOC_TRACER=profile MCLOC_OUTPUT="$T/pp.%p" "$T/forker"
	assert_success
	cpid=$(echo "$output" | sed -n 's/^child //p')
	ppid=$(echo "$output" | sed -n 's/^parent //p')
	[ "$(ls "$T"/pp.* | wc -l)" -eq 2 ]
	forked_outputs "$T/pp.$ppid" "$T/pp.$cpid"
	grep -Eq '^in_child +7 ' "$T/pp.$cpid"
	# The function tracer: the child's lines in its own file.
	run env LD_PRELOAD="$lib" MCLOC_TRACER=function MCLOC_OUTPUT="$T/fn" "$T/forker"
	assert_success
	cpid=$(echo "$output" | sed -n 's/^child //p')
	ppid=$(echo "$output" | sed -n 's/^parent //p')
	forked_outputs "$T/fn" "$T/fn.$cpid"
	[ "$(grep -c ': in_parent <-main$' "$T/fn")" -eq 5 ]
	[ "$(grep -c ': in_child <-main$' "$T/fn.$cpid")" -eq 7 ]
	# Standard error, shared: each process's header, and its lines.
	env LD_PRELOAD="$lib" MCLOC_TRACER=function "$T/forker" >"$T/out" 2>"$T/err"
	cpid=$(sed -n 's/^child //p' "$T/out")
	ppid=$(sed -n 's/^parent //p' "$T/out")
	grep -qx "# pid $ppid (forker)" "$T/err"
	grep -qx "# pid $cpid (forker)" "$T/err"
	[ "$(grep -Ec "^ +forker-$cpid +.*: in_child <-main\$" "$T/err")" -eq 7 ]
	# ... and the profile: each table headed by the pid it is of.
	env LD_PRELOAD="$lib" MCLOC_TRACER=profile "$T/forker" >"$T/out" 2>"$T/err"
	cpid=$(sed -n 's/^child //p' "$T/out")
	ppid=$(sed -n 's/^parent //p' "$T/out")
	run awk '/^# pid / { pid = $3 } /^(in_child|in_parent) / { print $1, pid }' "$T/err"
	assert_output "in_child $cpid
in_parent $ppid"
}

# A program that carries the runtime but never started control forks
# children with their descriptors as they were: the child's copy of the
# control server closes no connection it never had (gawk's
# "cmd" | getline lost its child's standard input that way).
@test "a child forked without control keeps its standard input" {
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	printf '%s\n' '#include <fcntl.h>' '#include <stdio.h>' '#include <sys/wait.h>' \
		'#include <unistd.h>' 'int main(void)' '{' '	pid_t p = fork();' \
		'	if (p == 0) {' '		printf("child fd0 %s\n", fcntl(0, F_GETFD) < 0 ? "closed" : "open");' \
		'		fflush(stdout);' '		_exit(0);' '	}' '	waitpid(p, NULL, 0);' \
		'	return 0;' '}' > "$T/fd0.c"
	cc "$T/fd0.c" -o "$T/fd0"
	cc "$T/fd0.c" -o "$T/fd0-linked" -L"$LIBDIR" -Wl,-rpath,"$LIBDIR" -Wl,--no-as-needed -lmcloc
	run "$T/fd0-linked" </dev/null
	assert_success
	assert_output "child fd0 open"
	run env LD_PRELOAD="$LIBDIR/libmcloc.so" "$T/fd0" </dev/null
	assert_success
	assert_output "child fd0 open"
	run env MCLOC_CONTROL=1 "$T/fd0-linked" </dev/null
	assert_success
	assert_output "child fd0 open"
}

@test "a forked child's NAME.PID is made anew: a link planted under that name leads nowhere" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	[ "$(id -u)" = 0 ] || skip "a pid namespace (the child's pid known in advance) needs root"
	build_forker
	echo secret > "$T/victim"
	# In a pid namespace of its own the program is pid 1, and its child 2.
	ln -s "$T/victim" "$T/fn.2"
	run unshare --pid --fork env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_TRACER=function \
		MCLOC_OUTPUT="$T/fn" "$T/forker"
	assert_success
	assert_line "child 2"
	assert_line --partial "libmcloc: MCLOC_OUTPUT: $T/fn.2: "
	[ "$(cat "$T/victim")" = secret ]
	# The child wrote to its parent's file instead, after its own header.
	grep -qx "# pid 2 (forker)" "$T/fn"
	[ "$(grep -c ': in_child <-main$' "$T/fn")" -eq 7 ]
}

@test "profile of a -pg program (sites after the prologue): timed by the frame pointer, and the program unharmed" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	printf '%s\n' '#include <stdio.h>' \
		'__attribute__((noinline)) int leaf(int x) { __asm__ volatile(""); return x * 3; }' \
		'__attribute__((noinline)) int mid(int x) { return leaf(x) + leaf(x + 1); }' \
		'int main(void) { long s = 0; for (int i = 0; i < 1000; i++) s += mid(i); printf("%ld\n", s); return 0; }' \
		> "$T/pg.c"
	cc -O2 -pg -c "$T/pg.c" -o "$T/pg.o"
	"$RECORDMCOUNT" "$T/pg.o"
	"$OBJPATCH" link --nop --runtime -- cc "$T/pg.o" -o "$T/pg"
	# Hooking the word above the return address into the function
	# overwrote a word of its frame: wrong sums.  The return slot is at
	# 8(%rbp), in the frame -pg builds (mcr_site_framed()).
	run env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_TRACER=profile MCLOC_OUTPUT="$T/prof" "$T/pg"
	assert_success
	assert_output 3000000
	grep -Eq '^leaf +2000 +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}' "$T/prof"
	grep -Eq '^mid +1000 +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}' "$T/prof"
}

@test "-g tables, --gc-sections and link --runtime: unused functions go, the tracer sees the rest" {
	# A __start___mcount_loc reference in the descriptor once kept every
	# table section, and so every function, alive; link --runtime now
	# fills the descriptor's bounds after the link instead.
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	local fix=$SRC/tests/fixtures/link o
	for o in util main lib; do
		cc -O2 -pg -mfentry -ffunction-sections -c "$fix/$o.c" -o "$T/$o.o"
		"$RECORDMCOUNT" -g "$T/$o.o"
	done
	for pie in -pie -no-pie; do
		run "$OBJPATCH" link --nop --runtime --check -- cc $pie -Wl,--gc-sections \
			"$T"/{util,main,lib}.o -o "$T/prog"
		assert_success
		run "$OBJPATCH" inspect --functions "$T/prog"
		refute_line util_unused
		assert_line util_fib
		run env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_TRACER=function MCLOC_FILTER='util_*' \
			MCLOC_OUTPUT="$T/trace" "$T/prog"
		assert_success
		grep -q ': util_fib <-' "$T/trace"
	done
}

@test "link --runtime keeps -lmcloc under --as-needed, and the tracer runs without LD_PRELOAD" {
	# The image reaches libmcloc only through weak references, which
	# --as-needed takes as no need: the tracer would silently do nothing.
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "a sanitized libmcloc in a plain program"
	demo_objs "$T/o" record
	run "$OBJPATCH" link --nop --runtime -- cc -Wl,--as-needed "$T"/o/*.o -o "$T/demo" \
		-L"$LIBDIR" -lmcloc
	assert_success
	run readelf -d "$T/demo"
	assert_output --partial "Shared library: [libmcloc.so"
	run env LD_LIBRARY_PATH="$LIBDIR" MCLOC_TRACER=function MCLOC_FILTER=fib \
		MCLOC_OUTPUT="$T/trace" "$T/demo"
	assert_success
	[ "$(grep -c ': fib <-' "$T/trace")" -ge 1 ]
}

# Only the main program has to work without the wrapper: its table comes
# from GCC's own -mrecord-mcount, its sites still call glibc's __fentry__
# (through the GOT in a PIE, through a lazily bound PLT entry otherwise),
# and the library's own trampolines are reached through a page of stubs
# mapped near its text.
@test "a main program linked normally (GCC's -mrecord-mcount): the same checks, PIE and non-PIE" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	$PY "$RT/gen.py" "$T/gen.c" 2000
	for pie in -fpie -fno-pie; do
		local ld=-pie
		[ $pie = -fpie ] || ld=-no-pie
		cc -O1 $pie -pg -mfentry -mrecord-mcount -c "$T/gen.c" -o "$T/gen.o"
		cc -O1 $pie "${SAN[@]}" -I"$SRC/include" -c "$RT/rt_test.c" -o "$T/rt_test.o"
		cc $ld "${SAN[@]}" "$T/rt_test.o" "$T/gen.o" -o "$T/rt" -L"$LIBDIR" -lmcloc -lpthread \
			2>/dev/null	# (ld warns of DT_TEXTREL: GCC's table is read-only)
		run env LD_LIBRARY_PATH="$LIBDIR" timeout 120 "$T/rt"
		echo "$output"
		assert_success
		assert_line "PASSED: 0 failures"
	done
}

# The first batch over a dense image faults its text in with
# MADV_POPULATE_WRITE; a sparse image's text is left to fault page by
# page, even when the same batch writes both (the library's flips, the
# program's pokes after them).
@test "the first batch's prefault is the dense image's alone: a sparse program's text in the same batch is not copied" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	$PY "$RT/gen.py" "$T/gen.c" 4000
	cc -O1 -fPIC -pg -mfentry -c "$T/gen.c" -o "$T/gen.o"
	"$RECORDMCOUNT" "$T/gen.o"
	"$OBJPATCH" link --nop --runtime --check -- cc -shared "$T/gen.o" -o "$T/libdense.so"
	cc -O1 -fno-pie "${SAN[@]}" -pg -mfentry -mrecord-mcount -I"$SRC/include" \
		-c "$RT/sparse.c" -o "$T/sparse.o"
	cc -no-pie "${SAN[@]}" "$T/sparse.o" -o "$T/sparse" -L"$T" -ldense -L"$LIBDIR" -lmcloc
	run env LD_LIBRARY_PATH="$T:$LIBDIR" ASAN_OPTIONS=detect_leaks=0 "$T/sparse"
	assert_success
	# Its two sites' pages were the program's own since their calls
	# became NOPs; the 2 MiB between them stay the file's.
	local re="^400[0-9] sites enabled, ([0-9]+) kB of the program's text copied; 7$"
	[[ "$output" =~ $re ]]
	[ "${BASH_REMATCH[1]}" -le 64 ]
}

@test "MCLOC_TRACER=profile times calls by return hooking: inclusive, longjmp, return values" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	cc -O1 -pg -mfentry -c "$RT/profile.c" -o "$T/profile.o"
	"$RECORDMCOUNT" "$T/profile.o"
	"$OBJPATCH" link --nop --runtime -- cc "$T/profile.o" -o "$T/profile"
	run "$T/profile"
	assert_output "500.00 4200"
	run env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_TRACER=profile MCLOC_OUTPUT="$T/prof" \
		"$T/profile"
	assert_success
	assert_output "500.00 4200"	# return values survive the trampoline
	cat "$T/prof"
	# Lower bounds only (sleeps guarantee them; nothing here is a speed
	# claim): nap sleeps 20 ms, outer naps twice, main holds it all.
	awk '$1 == "nap" { ok = $2 == 7 && $4 >= 20000 } END { exit !ok }' "$T/prof"
	awk '$1 == "outer" { ok = $2 == 3 && $3 >= 120000 && $4 >= 40000 } END { exit !ok }' "$T/prof"
	awk '$1 == "main" { ok = $2 == 1 && $3 >= 140000 } END { exit !ok }' "$T/prof"
	# jumper's 20 calls are counted; longjmp left every one, so none is
	# timed, and the calls after it still found their own entries.
	awk '$1 == "jumper" { ok = $2 == 20 && $3 == "-" } END { exit !ok }' "$T/prof"
	awk '$1 == "fret" { ok = $2 == 100 && $4 != "-" } END { exit !ok }' "$T/prof"
	awk '$1 == "lret" { ok = $2 == 100 && $4 != "-" } END { exit !ok }' "$T/prof"
	# Whose profile it is, then the table, most time first: main (which
	# holds every call), then nap and outer.  (Nap's seven naps outlast
	# outer's six unless outer's own code is held up for a nap's 20 ms,
	# as a loaded CI machine can: their order is the sort's, not asked.)
	run head -2 "$T/prof"
	assert_line --index 0 "# tracer: profile"
	assert_line --index 1 --regexp '^# pid [0-9]+ \(profile\)$'
	run awk '/^#/ { next } ++n > 2 { print $1 }' "$T/prof"
	[ "${lines[0]}" = main ]
	[ "${lines[1]} ${lines[2]}" = "nap outer" ] || [ "${lines[1]} ${lines[2]}" = "outer nap" ]
	awk '/^#/ || ++n <= 2 || $3 == "-" { next }
	     seen && $3 > last { exit 1 } { last = $3; seen = 1 }' "$T/prof"
}

# A preloaded library takes the main program's table itself unless the
# program registers itself, which its symbols said; stripped, its parked
# sites say it.
@test "a stripped program linked with --runtime, libmcloc preloaded: one image of its sites, none refused, and check does not call them refused" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	cc -O1 -pg -mfentry -I"$SRC/include" -c "$RT/stripped.c" -o "$T/stripped.o"
	"$RECORDMCOUNT" "$T/stripped.o"
	"$OBJPATCH" link --nop --runtime --check -- cc "$T/stripped.o" -o "$T/stripped"
	strip "$T/stripped"
	# (Without symbols, check cannot say which stub a site is parked on;
	# the runtime reads the stubs from the descriptor, and takes them.)
	run "$OBJPATCH" check "$T/stripped"
	refute_output --partial "the runtime refuses it"
	run env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_TRACER=function MCLOC_OUTPUT="$T/trace" \
		"$T/stripped"
	assert_success
	assert_output "3 records, 0 refused; 4"
	[ "$(grep -c ': stripped_one <-' "$T/trace")" -eq 1 ]
}

# A program's table is the file's, read by a preloaded library before
# any constructor of the program runs: an entry near the top of the
# address space is not read (a bound that wrapped around read it).
@test "libmcloc preloaded into a program whose table names an address at the top of memory: it runs, and the rest is traced" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	cc -O1 -pg -mfentry -mrecord-mcount -fno-pie -no-pie -I"$SRC/include" "$RT/stripped.c" \
		-o "$T/forged" -ldl
	$PY - "$T/forged" <<-'PY'
	import struct, sys
	from elftools.elf.elffile import ELFFile
	path = sys.argv[1]
	t = ELFFile(open(path, "rb")).get_section_by_name("__mcount_loc")
	b = bytearray(open(path, "rb").read())
	# (main's, the last: its functions keep theirs)
	struct.pack_into("<Q", b, t["sh_offset"] + t["sh_size"] - 8, 0xfffffffffffffffc)
	open(path, "wb").write(b)
	PY
	# (In $T: a -pg program writes gmon.out where it runs.)  The forged
	# entry is refused, and counted, not dropped unsaid.
	cd "$T"
	run env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_TRACER=function MCLOC_OUTPUT="$T/trace" \
		"$T/forged"
	assert_success
	assert_line --regexp "^[0-9]+ records, 1 refused; 4\$"
	[ "$(grep -c ': stripped_one <-' "$T/trace")" -eq 1 ]
	# The first entry (stripped_one's) forged too: the image is still
	# found, by a site it has, and named (it was found by the table's
	# first entry, and then nothing was named).
	$PY - "$T/forged" <<-'PY'
	import struct, sys
	from elftools.elf.elffile import ELFFile
	path = sys.argv[1]
	t = ELFFile(open(path, "rb")).get_section_by_name("__mcount_loc")
	b = bytearray(open(path, "rb").read())
	struct.pack_into("<Q", b, t["sh_offset"], 0xfffffffffffffffc)
	open(path, "wb").write(b)
	PY
	run env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_TRACER=function MCLOC_OUTPUT="$T/trace2" \
		"$T/forged"
	assert_success
	assert_line --regexp "^[0-9]+ records, 2 refused; 4\$"
	[ "$(grep -c ': stripped_two <-' "$T/trace2")" -eq 1 ]
}

# The section headers of the program's file are data: a table header
# that places __mcount_loc where nothing is loaded (or makes it longer
# than its segment) is not read from memory (it was, and the program
# died of SIGSEGV in libmcloc's constructor, before main()).
@test "libmcloc preloaded into a program whose __mcount_loc header lies about its address or size: it runs" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	cc -O1 -pg -mfentry -mrecord-mcount -fno-pie -no-pie -I"$SRC/include" "$RT/stripped.c" \
		-o "$T/good" -ldl
	cd "$T"
	for field in addr size; do
		cp "$T/good" "$T/forged"
		$PY - "$T/forged" $field <<-'PY'
		import struct, sys
		from elftools.elf.elffile import ELFFile
		path, field = sys.argv[1], sys.argv[2]
		elf = ELFFile(open(path, "rb"))
		i = next(i for i, s in enumerate(elf.iter_sections()) if s.name == "__mcount_loc")
		at = elf["e_shoff"] + i * elf["e_shentsize"] + (0x10 if field == "addr" else 0x20)
		b = bytearray(open(path, "rb").read())
		struct.pack_into("<Q", b, at, 0x7ff000000000 if field == "addr" else 0x100000)
		open(path, "wb").write(b)
		PY
		run env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_TRACER=function \
			MCLOC_OUTPUT="$T/trace" "$T/forged"
		assert_success
		assert_line --regexp "; 4\$"
	done
}

@test "a stripped image keeps its function names: .mcloc_names from objpatch link --runtime" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	demo_objs "$T/o" record
	"$OBJPATCH" link --nop --runtime --check -- cc "$T"/o/*.o -o "$T/demo"
	strip "$T/demo"
	run readelf -SW "$T/demo"
	refute_output --partial " .symtab "
	assert_output --partial " .mcloc_names "
	# (No symbols left to place the sites in: said once, and not a fault.)
	run "$OBJPATCH" check "$T/demo"
	assert_success
	assert_output --partial "no symbol table (stripped?): where each site lies in its function is not checked"
	run env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_TRACER=function MCLOC_FILTER='stats_*' \
		MCLOC_OUTPUT="$T/trace" "$T/demo"
	assert_success
	assert_output "sum=143 max=55 mean=14.30"
	[ "$(grep -c ': stats_add <-' "$T/trace")" -eq 10 ]
	grep -q ': stats_mean <-' "$T/trace"
	# Without the section a stripped image has no names: the filter
	# matches nothing (what the section is for), and says so.
	objcopy --remove-section=.mcloc_names "$T/demo" "$T/bare"
	run env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_TRACER=function MCLOC_FILTER='stats_*' \
		MCLOC_OUTPUT="$T/trace2" "$T/bare"
	assert_success
	assert_line "libmcloc: MCLOC_FILTER: 'stats_*' matched no traced function; nothing was traced"
	run grep -vc '^#' "$T/trace2"
	assert_output 0
}

@test "MCLOC_TRACER on a program that never heard of mcloc, through LD_PRELOAD" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "LD_PRELOAD of a sanitized library into a plain program"
	mkdir "$T/o"
	for c in main fib stats; do
		cc -O2 -pg -mfentry -mrecord-mcount -c "$DEMO/$c.c" -o "$T/o/$c.o"
	done
	cc "$T"/o/*.o -o "$T/demo" 2>/dev/null
	run env LD_PRELOAD="$LIBDIR/libmcloc.so" MCLOC_TRACER=profile MCLOC_FILTER='stats*' "$T/demo"
	assert_success
	assert_line --regexp '^stats_add +10 +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$'
	assert_line --regexp '^stats_mean +1 +[0-9.]+ +[0-9.]+$'
	refute_line --regexp '^fib '
}

@test "two images, a shared library loaded above the program: counts and filters across both" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	build_shlib
	cc -O2 "${SAN[@]}" -pg -mfentry -I"$SRC/include" -c "$RT/multi.c" -o "$T/multi.o"
	"$RECORDMCOUNT" "$T/multi.o"
	"$OBJPATCH" link --nop --runtime --check -- cc "${SAN[@]}" "$T/multi.o" -o "$T/multi" \
		-L"$T" -ltraced -L"$LIBDIR" -lmcloc
	run env LD_LIBRARY_PATH="$T:$LIBDIR" "$T/multi"
	echo "$output"
	assert_success
	assert_line "filter lib_[bc],main_*: 3 functions"
	assert_line "PASSED"
}

@test "dlopen/dlclose 300 times: each unload gives its slot and memory back, ops across an unload" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	build_shlib
	cc -O2 "${SAN[@]}" -I"$SRC/include" -c "$RT/dlloop.c" -o "$T/dlloop.o"
	cc "${SAN[@]}" "$T/dlloop.o" -o "$T/dlloop" -Wl,--no-as-needed -L"$LIBDIR" -lmcloc -ldl
	run env LD_LIBRARY_PATH="$LIBDIR" "$T/dlloop" "$T/libtraced.so"
	echo "$output"
	assert_success
	assert_line "300 cycles"
	assert_line "PASSED"
}

# Plugins: an image's constructor and destructor run under the dynamic
# loader's lock while other threads' callbacks run.  Neither may wait for
# the other (a hang is a failure through timeout): the callers lie in an
# untraced program, so the function tracer must name them without the
# loader's lock, when it writes its lines out.
@test "threads run traced code while plugins load and unload 200 times, under every tracer" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	build_shlib
	cp "$T/libtraced.so" "$T/libplugin.so"
	cc -O2 "${SAN[@]}" "$RT/dlplugins.c" -o "$T/dlplugins" -L"$T" -ltraced \
		-Wl,--no-as-needed -L"$LIBDIR" -lmcloc -lpthread -ldl
	for t in function profile; do
		run env LD_LIBRARY_PATH="$T:$LIBDIR" MCLOC_TRACER=$t MCLOC_OUTPUT="$T/$t" \
			timeout 120 "$T/dlplugins" "$T/libplugin.so"
		echo "$t: $output"
		assert_success
		assert_line --regexp '^200 cycles, [0-9]+, PASSED$'
	done
	# Every call of the plugin, its caller named from the program's own
	# symbols (main and the static caller are not exported).
	[ "$(grep -c ': lib_c <-main$' "$T/function")" -eq 200 ]
	grep -q ': lib_d <-caller$' "$T/function"
	if grep -q ': lib_d <-0x' "$T/function"; then false; fi
	grep -Eq '^lib_c +200 ' "$T/profile"
	export XDG_RUNTIME_DIR=$T/run
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	# (The graph is long: to a file, which the program's own output
	# shares, so its line may land inside one of mcloc's.)
	run env LD_LIBRARY_PATH="$T:$LIBDIR" ASAN_OPTIONS=detect_leaks=0 timeout 300 \
		bash -c '"$0" run function_graph -- "$1" "$2" > "$3"' \
		"$MCLOC" "$T/dlplugins" "$T/libplugin.so" "$T/graph"
	echo "function_graph: $output"
	assert_success
	grep -Eq '200 cycles, [0-9]+, PASSED' "$T/graph"
	# (The plugin's own calls may print as addresses: mcloc asks their
	# names after the plugin is gone.)
	grep -Eq '\|  +lib_a\(\);' "$T/graph"
}

# A thread's first traced call in a signal handler that interrupted
# malloc(): the program's own malloc stands in for libc's and fails at
# once when entered again on the same thread, as a handler that allocates
# would deadlock on malloc's lock.
@test "a thread's first traced call, in a signal handler inside malloc, allocates nothing" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "ASan's allocator would stand in for the program's"
	build_shlib
	cc -O2 "$RT/sigfirst.c" -o "$T/sigfirst" -L"$T" -ltraced \
		-Wl,--no-as-needed -L"$LIBDIR" -lmcloc -lpthread
	for t in function profile; do
		run env LD_LIBRARY_PATH="$T:$LIBDIR" MCLOC_TRACER=$t MCLOC_OUTPUT="$T/$t" \
			timeout 60 "$T/sigfirst"
		echo "$t: $output"
		assert_success
		assert_output PASSED
	done
	grep -q ': lib_a <-on_usr1$' "$T/function"
	grep -Eq '^lib_a +1 ' "$T/profile"
}

# sigheld.c: threads that hold SIGTRAP (as xz's workers hold every signal,
# as glibc's SIGEV_THREAD timer threads do) meet sites under their
# breakpoints, and the program sets its own SIGTRAP handler.  Without libmcloc's interposed signal calls the kernel kills
# the process with SIGTRAP (exit 133) within the first cycles.
@test "threads that hold every signal (every way), a handler with a full sa_mask, a timer's thread and the program's own SIGTRAP handler, while every site toggles" {
	build_traced sigheld 300
	run env LD_LIBRARY_PATH="$LIBDIR" timeout 120 "$T/sigheld" 3
	echo "$output"
	assert_success
	assert_line --regexp '^PASSED [0-9]+ cycles, [1-9][0-9]* callbacks, [1-9][0-9]* handler runs, [1-9][0-9]* timer runs, SIGTRAP not held after SIG_BLOCK$'
	# The same under LD_PRELOAD, the way mcloc run and trace load it.
	run env LD_LIBRARY_PATH="$LIBDIR" LD_PRELOAD="$(san_preload) $LIBDIR/libmcloc.so.0" \
		timeout 120 "$T/sigheld" 1
	assert_success
	assert_line --partial "PASSED"
}

@test "text the kernel will not make writable (W^X policy): patched through /proc/self/mem" {
	build_traced wxdeny 500
	run env LD_LIBRARY_PATH="$LIBDIR" timeout 120 "$T/wxdeny"
	echo "$output"
	assert_success
	assert_line --regexp "^mprotect to writable text refused [1-9][0-9]* times$"
	assert_line "window: 0 of 500 functions counted other than 3 times; 0 calls after disable"
	assert_line "writable+executable mappings: 0"
	assert_line "PASSED"
}

# mcloc_register_direct (tests/fixtures/runtime/direct.c): the site calls
# the trampoline itself, or through the list when shared with an ops or
# out of reach, with a redirect in the mix; exact entry counts.
@test "direct calls: the site calls the trampoline itself, or the list enters it after the callbacks" {
	build_traced direct 20
	run env LD_LIBRARY_PATH="$LIBDIR" "$T/direct"
	echo "$output"
	assert_success
	assert_line "ok: fn1's site calls it itself where in reach"
	assert_line "ok: shared: callback, then trampoline, each call"
	assert_line "PASSED: 0 failures"
}

# work_ab_source FILE: the patchable-entry tests' program, work_b() calling work_a().
work_ab_source() {
	cat > "$1" <<-'C'
	#include <stdio.h>
	__attribute__((noinline)) int work_a(int x) { return x + 1; }
	__attribute__((noinline)) int work_b(int x) { return work_a(x) * 2; }
	int main(int c, char **v) { (void)v; printf("%d\n", work_b(c)); return 0; }
	C
}

@test "-pg -mfentry linked with --runtime but not --nop: its calls said in one line, with the remedy" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	work_ab_source "$T/pg.c"
	cc -O2 -pg -mfentry -c "$T/pg.c" -o "$T/pg.o"
	"$RECORDMCOUNT" "$T/pg.o"
	"$OBJPATCH" link --runtime -- cc "$T/pg.o" -o "$T/calls" -L"$LIBDIR" -lmcloc
	run env LD_LIBRARY_PATH="$LIBDIR" LD_PRELOAD="$(san_preload)" ASAN_OPTIONS=detect_leaks=0 MCLOC_TRACER=function MCLOC_OUTPUT="$T/calls.txt" "$T/calls"
	assert_success
	assert_output - <<-'OUT'
	libmcloc: /proc/self/exe: 3 sites skipped: calls, not NOPs: link with objpatch link --nop (or run recordmcount --nop)
	4
	OUT
}

@test "-fpatchable-function-entry=5 on x86_64: skipped sites said in one line; traced once linked with --nop" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	work_ab_source "$T/pf.c"
	cc -O2 -fpatchable-function-entry=5 -c "$T/pf.c" -o "$T/pf.o"
	"$OBJPATCH" link --runtime -- cc "$T/pf.o" -o "$T/raw" -L"$LIBDIR" -lmcloc
	"$OBJPATCH" link --nop --runtime --check -- cc "$T/pf.o" -o "$T/nop" -L"$LIBDIR" -lmcloc
	run env LD_LIBRARY_PATH="$LIBDIR" LD_PRELOAD="$(san_preload)" ASAN_OPTIONS=detect_leaks=0 MCLOC_TRACER=function MCLOC_OUTPUT="$T/raw.txt" "$T/raw"
	assert_success
	assert_output - <<-'OUT'
	libmcloc: /proc/self/exe: 3 sites skipped: 5 single-byte NOPs (GCC's -fpatchable-function-entry): link with objpatch link --nop
	4
	OUT
	run grep -c "work_" "$T/raw.txt"
	assert_output 0
	run env LD_LIBRARY_PATH="$LIBDIR" LD_PRELOAD="$(san_preload)" ASAN_OPTIONS=detect_leaks=0 MCLOC_TRACER=function MCLOC_OUTPUT="$T/nop.txt" "$T/nop"
	assert_success
	assert_output 4
	run grep -c "work_a <-work_b" "$T/nop.txt"
	assert_output 1
	command -v clang >/dev/null || skip "clang is not installed (its long NOPs)"
	clang -O2 -fpatchable-function-entry=5 -c "$T/pf.c" -o "$T/pfc.o"
	"$OBJPATCH" link --runtime -- clang "$T/pfc.o" -o "$T/rawc" -L"$LIBDIR" -lmcloc
	run env LD_LIBRARY_PATH="$LIBDIR" LD_PRELOAD="$(san_preload)" ASAN_OPTIONS=detect_leaks=0 MCLOC_TRACER=function MCLOC_OUTPUT=/dev/null "$T/rawc"
	assert_output - <<-'OUT'
	libmcloc: /proc/self/exe: 3 sites skipped: long NOPs not of the site's form (clang's -fpatchable-function-entry): link with objpatch link --nop
	4
	OUT
}

@test "-fpatchable-function-entry=5 linked normally, libmcloc LD_PRELOADed: the skipped sites said in one line" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	work_ab_source "$T/pp.c"
	for cc in $(installed_ccs); do
		$cc -O2 -fpatchable-function-entry=5 "$T/pp.c" -o "$T/pp-$cc"
		run env LD_PRELOAD="$(san_preload) $LIBDIR/libmcloc.so" ASAN_OPTIONS=detect_leaks=0 MCLOC_TRACER=function MCLOC_OUTPUT=/dev/null "$T/pp-$cc"
		assert_success
		[ "${#lines[@]}" -eq 2 ]
		assert_line --index 0 --regexp "^libmcloc: /proc/self/exe: 3 sites skipped: .*: link with objpatch link --nop$"
		assert_line --index 1 4
	done
}

@test "-fpatchable-function-entry=N,M with M>0 on x86_64: link --nop --runtime refuses in one line; linked normally it runs under libmcloc" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	cat > "$T/pm.c" <<-'C'
	#include <stdio.h>
	__attribute__((noinline)) int work_a(int x) { return x + 1; }
	int main(int c, char **v) { (void)v; printf("%d\n", work_a(c)); return 0; }
	C
	for cc in $(installed_ccs); do
		for nm in 5,3 6,1 7,2 10,5; do
			o="$T/pm-$cc-${nm/,/-}"
			$cc -O2 -fpatchable-function-entry=$nm -c "$T/pm.c" -o "$o.o"
			run "$OBJPATCH" link --nop --runtime -- $cc "$o.o" -o "$o" -L"$LIBDIR" -lmcloc
			assert_failure 1
			# (One line of ours; ld's own warnings about the sanitized
			# libmcloc's libasan are not.)
			[ "$(grep -vc 'libasan\.so\.[0-9]*: warning: ' <<< "$output")" -eq 1 ]
			assert_output --partial "M>0 (the entry ${nm#*,} bytes before its function, at "
			[ ! -e "$o" ] || { run env LD_LIBRARY_PATH="$LIBDIR" LD_PRELOAD="$(san_preload)" ASAN_OPTIONS=detect_leaks=0 MCLOC_TRACER=function MCLOC_OUTPUT=/dev/null "$o"; assert_success; }
			$cc "$o.o" -o "$o.plain"
			run env LD_PRELOAD="$(san_preload) $LIBDIR/libmcloc.so" ASAN_OPTIONS=detect_leaks=0 MCLOC_TRACER=function MCLOC_OUTPUT=/dev/null "$o.plain"
			assert_success
			assert_line 2
		done
	done
}

@test "an image linked for a newer libmcloc runs untraced, and the library says so in one line" {
	cat > "$T/newer.c" <<-'C'
	#include <mcloc/abi.h>
	#include <errno.h>
	#include <stdio.h>
	static struct mcloc_image d = { .magic = MCLOC_IMAGE_MAGIC, .version = MCLOC_IMAGE_VERSION + 1 };
	int main(void) { printf("%d\n", mcloc_register_image(&d) == -EINVAL); return 0; }
	C
	# (abi.h's reference is weak: --as-needed would drop the library.)
	cc "${SAN[@]}" -I"$SRC/include" "$T/newer.c" -o "$T/newer" -L"$LIBDIR" \
		-Wl,--no-as-needed -lmcloc
	run env LD_LIBRARY_PATH="$LIBDIR" "$T/newer"
	assert_success
	assert_line 1
	assert_line --regexp "^libmcloc: .*newer: image ABI version [0-9]+, not 2 to [0-9]+: not traced \(linked for a newer libmcloc\)\$"
}

@test "an image's descriptor registered again, or a copy of it, is refused: each site keeps one record" {
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	T=$(mktemp -d "$BATS_RUN_TMPDIR/t.XXXXXX")
	traced_fixture twice -I"$SRC/include"
	LD_LIBRARY_PATH=$LIBDIR run ./twice
	assert_success
	assert_output --regexp '^again -17, copy -17, records ([1-9][0-9]*) then \1; 2$'
}
