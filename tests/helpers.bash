# Shared setup for the bats suites: assertions, tool paths, a scratch dir.
load /usr/lib/bats/bats-support/load.bash
load /usr/lib/bats/bats-assert/load.bash

SRC=${MCLOC_SRC:-$(cd "$BATS_TEST_DIRNAME/.." && pwd)}
RECORDMCOUNT=${RECORDMCOUNT:-$SRC/build/recordmcount/recordmcount}
OBJPATCH=${OBJPATCH:-$SRC/build/objpatch/objpatch}
PY=/usr/bin/python3
# The runtime library and the mcloc command of the build.
LIBDIR=${MCLOC_LIBDIR:-$(dirname "$OBJPATCH")/../libmcloc}
MCLOC=${MCLOC_CMD:-$LIBDIR/../mcloc/mcloc}
MCTABLE="$PY $SRC/tests/lib/mctable.py"
KERNEL_RECORDMCOUNT=$(ls /usr/lib/linux-kbuild-*/scripts/recordmcount 2>/dev/null | sort -V | tail -1)
DEMO=$SRC/examples/demo
# The sanitizer flags of the sanitized build, which a program linked with
# libmcloc must share with it (empty in the plain build).
SAN=()
[ -z "${MCLOC_SANITIZED:-}" ] || SAN=(-fsanitize=address,undefined)

setup() {
	T=$(mktemp -d "$BATS_RUN_TMPDIR/t.XXXXXX")
}

# need_cc CC: skip (with the reason) when a cross compiler is missing.
need() {
	command -v "$1" >/dev/null 2>&1 || skip "$1 is not installed"
}

# Compile every demo source and the fixtures with CC FLAGS into $T/NAME/.
build_objs() {
	local name=$1 cc=$2; shift 2
	mkdir -p "$T/$name"
	for c in "$DEMO"/*.c "$SRC"/tests/fixtures/*.c; do
		"$cc" "$@" -I"$DEMO" -c "$c" -o "$T/$name/$(basename "${c%.c}").o" || return 1
	done
}

# same_tables DIR_A DIR_B: every object's normalised table is identical.
same_tables() {
	local n=0
	for o in "$1"/*.o; do
		$MCTABLE "$o" > "$o.tab"
		$MCTABLE "$2/$(basename "$o")" > "$o.want"
		if ! cmp -s "$o.want" "$o.tab"; then
			echo "table differs for $(basename "$o"):"
			diff "$o.want" "$o.tab" | head -10
			return 1
		fi
		n=$((n + $(wc -l < "$o.tab")))
	done
	[ "$n" -gt 0 ] || { echo "no entries at all"; return 1; }
}

# assert_finds_planted OBJ: plant each table defect of tests/lib/plant.py in
# copies of OBJ (which has a correct RELA __mcount_loc) and require objpatch
# check to report it, and the call its entry stood for as missing.
assert_finds_planted() {
	local d
	declare -A want=(
		[deleted-entry]="has no relocation"
		[shifted-entry]="neither a call to an mcount symbol nor a NOP"
		[duplicate-entry]="duplicates entry 0"
		[entry-into-data]="which is not executable"
		[entry-on-non-call]="neither a call to an mcount symbol nor a NOP"
	)
	mkdir "$T/planted"
	$PY "$SRC/tests/lib/plant.py" "$1" "$T/planted"
	for d in "${!want[@]}"; do
		run "$OBJPATCH" check "$T/planted/$d.o"
		assert_failure 1
		assert_output --partial "${want[$d]}"
		assert_output --partial "missing from the table"
	done
}

# demo_objs DIR [RECORD]: compile the demo with -pg -mfentry into DIR/*.o;
# with RECORD=record, run recordmcount on each.
demo_objs() {
	mkdir -p "$1"
	for c in main fib stats; do
		cc -O2 -pg -mfentry -c "$DEMO/$c.c" -o "$1/$c.o" || return 1
		[ "${2:-}" != record ] || "$RECORDMCOUNT" "$1/$c.o" || return 1
	done
}

# san_preload: in the sanitized build, the LD_PRELOAD under which a program
# that is not sanitized itself loads that build's libmcloc (ASan must come
# first); empty otherwise.
san_preload() {
	[ -n "${MCLOC_SANITIZED:-}" ] || return 0
	echo "$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
}

# installed_ccs: gcc and clang, those installed, one a line (a TAP note on
# fd 3 for each that is not, so that a test run over both says so).
installed_ccs() {
	local cc
	for cc in gcc clang; do
		if command -v $cc >/dev/null; then
			echo $cc
		else
			echo "# $cc is not installed" >&3
		fi
	done
}

# runtime_setup: what a test of the live runtime and the mcloc command
# starts from: $T, its own control directory ($XDG_RUNTIME_DIR, so that
# sockets of other runs never mix in), and libmcloc on the library
# path.  Skips where the live patcher does not run.
runtime_setup() {
	T=$(mktemp -d "$BATS_RUN_TMPDIR/t.XXXXXX")
	[ "$(uname -m)" = x86_64 ] || skip "the live patcher is x86_64-only so far"
	export XDG_RUNTIME_DIR=$T/run
	mkdir -m 700 "$XDG_RUNTIME_DIR"
	export LD_LIBRARY_PATH=$LIBDIR ASAN_OPTIONS=detect_leaks=0
}

# mask_times: a replay's times masked, as they vary: a duration column
# becomes "D us |", a CPU "C", a timestamp "S".
mask_times() {
	sed -E 's/^ +[0-9]+\) [ +!#*@$] +[0-9]+\.[0-9]{3} us \|/ C) D us |/;
		s/^ +[0-9]+\) +\|/ C)      |/;
		s/\[[0-9]{3}\] +[0-9]+\.[0-9]{6}/[CPU] S/'
}

# traced_fixture NAME [CFLAGS...]: tests/fixtures/runtime/NAME.c built as
# a traced program, $T/NAME (-O1 -pg -mfentry, recordmcount, objpatch
# link --runtime against libmcloc in $LIBDIR), with the sanitizer flags
# of runtime_setup; then into $T.
traced_fixture() {
	local name=$1; shift
	cc -O1 -pg -mfentry "$@" "${SAN[@]}" -c "$SRC/tests/fixtures/runtime/$name.c" -o "$T/$name.o"
	"$RECORDMCOUNT" "$T/$name.o"
	"$OBJPATCH" link --nop --runtime -- cc "${SAN[@]}" "$T/$name.o" -o "$T/$name" \
		-lpthread -L"$LIBDIR" -lmcloc
	cd "$T"
}
