#!/usr/bin/env bats
# Compilers by linkers: gcc and clang, each with ld.bfd, gold, lld and
# mold, through the README's recipe (-pg -mfentry, recordmcount after each
# cc, objpatch link --nop --runtime ... -lmcloc).  Each cell links one
# shared library (with a weak function replaced inside it, whose entry
# only the cleaning drops, shrinking the table) and one PIE program (-ffunction-sections,
# recordmcount -g, --gc-sections), from tests/fixtures/link, and both must
# come out recorded, NOPed, check-clean and traced by libmcloc without a
# preload.

load helpers

FIX=$SRC/tests/fixtures/link

# ld_prog NAME: the linker that -fuse-ld=NAME runs.
ld_prog() {
	case $1 in mold) echo mold ;; *) echo "ld.$1" ;; esac
}

# linked_by LD IMAGE: IMAGE carries its linker's mark (ld.bfd leaves none).
linked_by() {
	local comment gold
	comment=$(readelf -p .comment "$2" 2>/dev/null)
	gold=$(readelf -SW "$2" | grep -c '\.note\.gnu\.gold-version' || true)
	case $1 in
	bfd)  [ "$gold" = 0 ] && ! grep -qE 'LLD|mold' <<< "$comment" ;;
	gold) [ "$gold" != 0 ] ;;
	lld)  grep -q 'LLD' <<< "$comment" ;;
	mold) grep -q 'mold' <<< "$comment" ;;
	esac
}

# clean IMAGE: entries, every one a NOP, sorted, no duplicate.
clean() {
	"$OBJPATCH" -j inspect "$1" | $PY -c '
import json, sys
s = json.load(sys.stdin)[0]["summary"]
ok = s["entries"] > 0 and s["nop"] == s["entries"] and s["sorted"] and s["duplicates"] == 0
print(s)
sys.exit(0 if ok else 1)'
}

# cell CC LD: the library and the program, built, checked and traced.
cell() {
	local cc=$1 ld=$2 o
	[ "$(uname -m)" = x86_64 ] || skip "the x86_64 toolchains"
	need "$cc"
	need "$(ld_prog "$ld")"
	cd "$T"
	# (The library's util functions renamed, so that the program's
	# own stay its own to keep or drop.)
	for o in lib util hook_strong; do
		"$cc" -O2 -pg -mfentry -fPIC -Dutil_fib=lib_fib -Dutil_unused=lib_unused \
			-c "$FIX/$o.c" -o "pic-$o.o"
		"$RECORDMCOUNT" "pic-$o.o"
	done
	for o in main util hook_strong; do
		"$cc" -O2 -pg -mfentry -ffunction-sections -c "$FIX/$o.c" -o "$o.o"
		"$RECORDMCOUNT" -g "$o.o"
	done
	run "$OBJPATCH" link --nop --runtime -- "$cc" -fuse-ld="$ld" -shared \
		pic-lib.o pic-util.o pic-hook_strong.o -o libprog.so -L"$LIBDIR" -lmcloc
	assert_success
	run "$OBJPATCH" link --nop --runtime -- "$cc" -fuse-ld="$ld" -Wl,--gc-sections \
		main.o util.o hook_strong.o -o prog -L. -lprog -L"$LIBDIR" -lmcloc
	assert_success
	for o in libprog.so prog; do
		linked_by "$ld" "$o"
		run readelf -d "$o"
		assert_output --partial 'Shared library: [libmcloc.so.0]'
		run clean "$o"
		assert_success
	done
	run "$OBJPATCH" check libprog.so prog
	assert_success
	run "$OBJPATCH" inspect --functions libprog.so
	assert_output "$(printf '%s\n' lib_sum lib_scale lib_fib lib_unused hook)"
	run "$OBJPATCH" inspect --functions prog
	assert_line main
	assert_line util_fib
	assert_line hook
	# --gc-sections took the unused function, and its entry with it,
	# where the linker follows SHF_LINK_ORDER (gold and mold keep both).
	case $ld in bfd|lld) refute_line util_unused ;; esac
	run env LD_LIBRARY_PATH=".:$LIBDIR" LD_PRELOAD="$(san_preload)" ASAN_OPTIONS=detect_leaks=0 \
		MCLOC_TRACER=function MCLOC_OUTPUT=trace ./prog
	assert_success
	assert_output "sum=1596 scaled=99 hook=40"
	[ "$(grep -c ': util_fib <-main$' trace)" -eq 16 ]
	[ "$(grep -c ': lib_sum <-main$' trace)" -eq 2 ]
	[ "$(grep -c ': lib_scale <-main$' trace)" -eq 1 ]
	[ "$(grep -c ': hook <-main$' trace)" -eq 1 ]
}

@test "gcc, ld.bfd: library and program recorded, NOPed, clean and traced" { cell gcc bfd; }
@test "gcc, gold: library and program recorded, NOPed, clean and traced" { cell gcc gold; }
@test "gcc, lld: library and program recorded, NOPed, clean and traced" { cell gcc lld; }
@test "gcc, mold: library and program recorded, NOPed, clean and traced" { cell gcc mold; }
@test "clang, ld.bfd: library and program recorded, NOPed, clean and traced" { cell clang bfd; }
@test "clang, gold: library and program recorded, NOPed, clean and traced" { cell clang gold; }
@test "clang, lld: library and program recorded, NOPed, clean and traced" { cell clang lld; }
@test "clang, mold: library and program recorded, NOPed, clean and traced" { cell clang mold; }
