#!/usr/bin/env bats
# The runtime under what real programs meet: hostile environment values,
# a setuid program, seccomp filters that deny what patching needs, and
# libraries loaded and unloaded while other threads call into them.

load helpers

RT=$SRC/tests/fixtures/runtime

setup() {
	T=$(mktemp -d "$BATS_RUN_TMPDIR/t.XXXXXX")
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	export ASAN_OPTIONS=detect_leaks=0
}

# traced NAME [LINK ARGS...]: $T/NAME from $RT/NAME.c, -pg -mfentry,
# recordmcount, objpatch link --nop --runtime, linked with libmcloc, which
# it finds in $RUNPATH (default: $LIBDIR).
traced() {
	local name=$1
	shift
	cc -O1 -pg -mfentry "${SAN[@]}" -I"$SRC/include" -c "$RT/$name.c" -o "$T/$name.o"
	"$RECORDMCOUNT" "$T/$name.o"
	"$OBJPATCH" link --nop --runtime --check -- cc "${SAN[@]}" "$T/$name.o" -o "$T/$name" \
		-L"$LIBDIR" -Wl,-rpath,"${RUNPATH:-$LIBDIR}" -lmcloc "$@"
}

@test "hostile MCLOC_* values (garbage, non-UTF-8, 100 KB, empty): at most one short line each, the program unharmed" {
	traced envtest
	big=$(head -c 100000 /dev/zero | tr '\0' A)
	vars="MCLOC_TRACER MCLOC_OUTPUT MCLOC_FILTER MCLOC_NOTRACE MCLOC_CONTROL XDG_RUNTIME_DIR"
	n=0
	# (No value names a file outside $T: MCLOC_OUTPUT is written, as
	# asked, wherever it points.)
	for v in '%s%n%x%p' $'\xff\xfe\x80\xc3' "$big" '' $'a\nb' 'no/such/../dir' '-1' '1'; do
		for var in $vars ALL; do
			env=()
			if [ "$var" = ALL ]; then
				for x in $vars; do env+=("$x=$v"); done
			else
				env=("$var=$v")
				# (the control variables read one another)
				[ "$var" != XDG_RUNTIME_DIR ] || env+=(MCLOC_CONTROL=1)
				case $var in
				MCLOC_OUTPUT) env+=(MCLOC_TRACER=function) ;;
				MCLOC_FILTER|MCLOC_NOTRACE) env+=(MCLOC_TRACER=function MCLOC_OUTPUT=/dev/null) ;;
				esac
			fi
			(cd "$T" && env "${env[@]}" timeout 20 "$T/envtest") >"$T/out" 2>"$T/err" ||
				{ echo "$var: exit $?"; cat "$T/err" | head -c 600; false; }
			grep -qx 'secure=0 sum=9900' "$T/out" || { echo "$var: output"; head -c 300 "$T/out"; false; }
			# (An empty MCLOC_OUTPUT is the default, standard error: the
			# trace itself is not a complaint.)
			grep -av '^#\|^ *envtest-[0-9]* *\[[0-9]*\] ' "$T/err" > "$T/err2" || true
			mv "$T/err2" "$T/err"
			[ "$(wc -l < "$T/err")" -le 6 ] || { echo "$var=${v:0:40}: $(wc -l < "$T/err") lines"; head -5 "$T/err"; false; }
			! grep -av '^libmcloc: ' "$T/err" | grep -q . || { echo "$var: stray"; head -c 600 "$T/err"; false; }
			[ "$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$T/err")" -le 700 ]
			n=$((n + 1))
		done
	done
	echo "# $n runs under hostile values, each unharmed" >&3
	rm -f "$T"/%* 2>/dev/null || true
}

@test "a setuid program reads no MCLOC_* variable" {
	[ "$(id -u)" = 0 ] || skip "making a setuid-root program needs root"
	command -v setpriv >/dev/null || skip "setpriv is not installed"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "ASan refuses to run setuid"
	# The user nobody runs the program, so it and its libmcloc go to a
	# directory that nobody may enter, wherever the checkout lies (bats's
	# own directory, or a clone in a 0700 home, is its user's alone).
	P=$(mktemp -d /tmp/mcloc-suid.XXXXXX)
	chmod 755 "$P"
	mkdir -m 755 "$P/lib"
	cp -L "$LIBDIR/libmcloc.so.0" "$P/lib/"
	RUNPATH=$P/lib traced envtest
	mkdir -m 1777 "$P/pub"
	cp "$T/envtest" "$P/pub/plain"
	cp "$T/envtest" "$P/pub/suid"
	chmod 755 "$P/pub/plain"
	chmod 4755 "$P/pub/suid"
	as_nobody() {
		setpriv --reuid=nobody --regid=nogroup --clear-groups env MCLOC_TRACER=function \
			MCLOC_OUTPUT="$P/pub/$1.trace" MCLOC_CONTROL=1 XDG_RUNTIME_DIR="$P/pub" "$P/pub/$1"
	}
	# The same program without the bit reads them: the check can fail.
	run as_nobody plain
	assert_success
	assert_output 'secure=0 sum=9900'
	[ -s "$P/pub/plain.trace" ]
	[ -d "$P/pub/mcloc" ]
	rm -rf "$P/pub/mcloc"
	run as_nobody suid
	assert_success
	[ "$output" != 'secure=0 sum=9900' ] || skip "setuid bits are ignored here (a nosuid mount)"
	assert_output 'secure=1 sum=9900'
	[ ! -e "$P/pub/suid.trace" ]
	[ ! -e "$P/pub/mcloc" ]
}

teardown() {
	[ -z "${P:-}" ] || rm -rf "$P"
}

@test "seccomp denies membarrier, mprotect, or mprotect and pwrite64: tracing is refused with the reason, or done another way" {
	traced seccomp
	run "$T/seccomp"
	assert_success
	assert_line "traced 1000 of 1000"
	# membarrier: no safe way to change text under running threads.
	run "$T/seccomp" membarrier
	assert_success
	assert_line "libmcloc says: membarrier() is denied (Operation not permitted): live patching is refused"
	assert_line "refused: Operation not permitted"
	assert_line "traced 0 of 1000"
	assert_line "after: 0"
	# mprotect: the text is written through /proc/self/mem instead.
	run "$T/seccomp" mprotect
	assert_success
	assert_line "traced 1000 of 1000"
	assert_line "after: 1000"
	# Neither way: refused, the text as it was.
	run "$T/seccomp" mprotect pwrite64
	assert_success
	assert_line "libmcloc says: writing text through /proc/self/mem (mprotect refused) failed: Operation not permitted"
	assert_line "refused: Operation not permitted"
	assert_line "traced 0 of 1000"
	assert_line "after: 0"
}

# protback.c: a batch changes every site, then cannot give the text its
# protection back.  Its records must say what the text holds: they went
# back to the old states, and every later enable was refused (EILSEQ).
@test "a batch whose sites all changed but whose text stays writable: the next batches go on" {
	traced protback -lpthread
	for mode in "" threaded; do
		run "$T/protback" $mode
		assert_success
		assert_line "warm enable: ok, traced 1000 of 1000"
		assert_line "enable, protection not given back: Permission denied, traced 0 of 1000"
		assert_line "enable again: ok, traced 1000 of 1000"
		assert_line "disable: ok, traced 0 of 1000"
	done
}

@test "dlopen/dlclose 200 times while 4 threads call into the library: every call counted once" {
	cc -O2 -fPIC -pg -mfentry -c "$RT/shlib.c" -o "$T/shlib.o"
	"$RECORDMCOUNT" "$T/shlib.o"
	"$OBJPATCH" link --nop --runtime --check -- cc -shared "$T/shlib.o" -o "$T/libtraced.so"
	cc -O2 "${SAN[@]}" -I"$SRC/include" -c "$RT/dlthreads.c" -o "$T/dlthreads.o"
	cc "${SAN[@]}" "$T/dlthreads.o" -o "$T/dlthreads" -Wl,--no-as-needed -L"$LIBDIR" \
		-Wl,-rpath,"$LIBDIR" -lmcloc -ldl -lpthread
	run timeout 300 "$T/dlthreads" "$T/libtraced.so"
	echo "$output"
	assert_success
	assert_line "PASSED"
}
