#!/usr/bin/env bats
# The README's build-system recipes, run for real on the demo: autotools
# with a libtool shared library (libtool links it with $CC, so CC is the
# whole wrapper chain), and CMake with its compiler and linker launchers.
# Configure's compile-and-link probes must give the right answers.
load helpers

setup() {
	T=$(mktemp -d "$BATS_RUN_TMPDIR/t.XXXXXX")
	PATH=$(dirname "$RECORDMCOUNT"):$(dirname "$OBJPATCH"):$PATH
	mkdir "$T/src"
	cp "$DEMO"/*.c "$DEMO"/*.h "$T/src/"
}

# traced_clean IMAGE...: every site NOPed, tables clean, runtime linked in.
traced_clean() {
	run "$OBJPATCH" check "$@"
	assert_success
	for f; do
		run "$OBJPATCH" -j inspect "$f"
		assert_output --regexp '"call": ?0,'
		refute_output --regexp '"nop": ?0,'
		nm "$f" | grep -q mcloc_tramp_args
	done
}

# same_answer CHAIN CC ARGS...: CHAIN ARGS... gives CC ARGS...'s standard
# output, standard error and exit status, byte for byte.
same_answer() {
	local chain=$1 cc=$2 want got; shift 2
	"$cc" "$@" > "$T/want.out" 2> "$T/want.err" < /dev/null && want=0 || want=$?
	$chain "$@" > "$T/got.out" 2> "$T/got.err" < /dev/null && got=0 || got=$?
	[ "$got" = "$want" ] || { echo "$*: exit $got, $cc's $want"; cat "$T/got.err"; return 1; }
	cmp "$T/want.out" "$T/got.out" || { echo "$*: standard output differs"; return 1; }
	cmp "$T/want.err" "$T/got.err" || { echo "$*: standard error differs"; return 1; }
}

# (The chain of issue 29, whose --runtime needed an object to link.)
@test "compiler queries through the CC chain: gcc's and clang's own output and status" {
	cd "$T/src"
	local cc q
	for cc in gcc clang; do
		command -v $cc >/dev/null || continue
		while read -r q; do
			run same_answer "recordmcount -g -- objpatch link --nop --runtime -- $cc" $cc $q
			assert_success
		done <<-Q
			--version
			-v
			-dumpmachine
			-dumpversion
			-print-prog-name=ld
			-print-search-dirs
			-print-file-name=libc.so
			-print-libgcc-file-name
			-print-multiarch
			-print-multi-os-directory
			-print-sysroot
			-E main.c
			-M main.c
			-MM main.c
			--help
		Q
	done
	# (Queries that gcc alone knows.)
	for q in -dumpfullversion -print-multi-lib -print-multi-directory \
		 -print-sysroot-headers-suffix -print-file-name=crtbegin.o; do
		run same_answer "recordmcount -g -- objpatch link --nop --runtime -- gcc" gcc $q
		assert_success
	done
}

@test "ld's own options are no compiler queries: --version-script=, --print-map, -M link, and the table is still sorted and NOPed" {
	cd "$T/src"
	cat > lib.c <<-'C'
		int lib_b(int x) { return x * 2; }
		int lib_a(int x) { return lib_b(x) + 1; }
	C
	printf '{ global: lib_a; local: *; };\n' > v.map
	gcc -pg -mfentry -fPIC -O1 -c lib.c -o lib.o
	"$RECORDMCOUNT" lib.o
	local opts
	for opts in "--version-script=v.map" "--print-map --version-script=v.map" "-M"; do
		# shellcheck disable=SC2086
		run "$OBJPATCH" link --nop --check -- ld -shared -o lib.so lib.o $opts
		assert_success
		run "$OBJPATCH" check lib.so
		assert_success
		run "$OBJPATCH" -j inspect lib.so
		assert_output --partial '"nop":2'
	done
	# (A driver in a directory whose name holds "ld." is still a driver.)
	mkdir -p old.d
	ln -sf "$(command -v gcc)" old.d/gcc
	run "$OBJPATCH" link --nop --check -- old.d/gcc -shared -o lib2.so lib.o
	assert_success
	run "$OBJPATCH" check lib2.so
	assert_success
}

@test "autotools and libtool: CC wraps recordmcount and objpatch link; probes still answer right" {
	need autoreconf
	need libtoolize
	cd "$T/src"
	cat > configure.ac <<-'AC'
		AC_INIT([demo], [1.0])
		AM_INIT_AUTOMAKE([foreign])
		LT_INIT
		AC_PROG_CC
		AC_CHECK_FUNCS([memfd_create no_such_function_anywhere])
		AC_CONFIG_FILES([Makefile])
		AC_OUTPUT
	AC
	cat > Makefile.am <<-'AM'
		lib_LTLIBRARIES = libstats.la
		libstats_la_SOURCES = stats.c fib.c
		bin_PROGRAMS = demo
		demo_SOURCES = main.c
		demo_LDADD = libstats.la
	AM
	autoreconf -fi >/dev/null 2>&1
	# (libmcloc from the build tree, as README says.)
	local lib=${MCLOC_LIBDIR:-$(dirname "$OBJPATCH")/../libmcloc}
	local flags=(CPPFLAGS="-pg -mfentry" LDFLAGS="-L$lib -Wl,-rpath,$lib")
	mkdir plain
	(cd plain && ../configure CC=gcc "${flags[@]}" >/dev/null)
	run ./configure CC="recordmcount -g -- objpatch link --nop --libmcloc -- gcc" "${flags[@]}"
	assert_success
	grep -q 'DHAVE_MEMFD_CREATE=1' Makefile
	if grep -q 'HAVE_NO_SUCH_FUNCTION_ANYWHERE' Makefile; then false; fi
	# libtool learnt what it learns from plain gcc: only CC differs.
	grep -q '^sys_lib_search_path_spec=".*/' libtool
	run diff <(grep -v 'CC=' plain/libtool) <(grep -v 'CC=' libtool)
	assert_success
	run make
	assert_success
	traced_clean .libs/libstats.so.0.0.0 .libs/demo
	# Both link libmcloc, so that tracing works without a preload.
	for f in .libs/libstats.so.0.0.0 .libs/demo; do
		run readelf -d "$f"
		assert_output --partial 'Shared library: [libmcloc.so.0]'
	done
	rm -f gmon.out	# (configure's probes ran with -pg)
	run env LD_PRELOAD="$(san_preload)" ASAN_OPTIONS=detect_leaks=0 ./demo
	assert_output "sum=143 max=55 mean=14.30"
	[ ! -e gmon.out ]
	run env LD_PRELOAD="$(san_preload)" ASAN_OPTIONS=detect_leaks=0 \
		MCLOC_TRACER=function MCLOC_OUTPUT="$T/trace" ./demo
	assert_output "sum=143 max=55 mean=14.30"
	[ "$(grep -c ': stats_add <-main$' "$T/trace")" -eq 10 ]
	[ "$(grep -c ': fib <-main$' "$T/trace")" -eq 10 ]
}

@test "CMake: compiler and linker launchers record, NOP and link the runtime" {
	need cmake
	cd "$T/src"
	cat > CMakeLists.txt <<-'CM'
		cmake_minimum_required(VERSION 3.21)
		project(demo C)
		add_compile_options(-pg -mfentry)
		add_executable(demo main.c fib.c stats.c)
	CM
	mkdir ../b && cd ../b
	run cmake -DCMAKE_C_COMPILER_LAUNCHER="recordmcount;-g;--" \
		-DCMAKE_C_LINKER_LAUNCHER="objpatch;link;--nop;--runtime;--" ../src
	assert_success
	run make
	assert_success
	traced_clean demo
	run ./demo
	assert_output "sum=143 max=55 mean=14.30"
	[ ! -e gmon.out ]
}
