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
	run ./configure CC="recordmcount -g -- objpatch link --nop --runtime -- gcc" \
		CPPFLAGS="-pg -mfentry"
	assert_success
	grep -q 'DHAVE_MEMFD_CREATE=1' Makefile
	! grep -q 'HAVE_NO_SUCH_FUNCTION_ANYWHERE' Makefile
	run make
	assert_success
	traced_clean .libs/libstats.so.0.0.0 .libs/demo
	rm -f gmon.out	# (configure's probes ran with -pg)
	run ./demo
	assert_output "sum=143 max=55 mean=14.30"
	[ ! -e gmon.out ]
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
