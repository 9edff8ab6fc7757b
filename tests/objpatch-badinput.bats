#!/usr/bin/env bats
# The bad-input matrix of every objpatch subcommand that reads a file:
# malformed relocatable objects (inspect, check, nop) and malformed linked
# images (inspect, check, sort, nop, link) from tests/lib/corrupt.py.  Each
# must give exactly one line naming the file, exit 1, and leave the input
# byte-identical with no temporary file behind.  link is driven with `cp`
# as its "linker", so the malformed file is what the link produced; a
# failed link must also remove its output, as make expects.

load helpers
bats_require_minimum_version 1.5.0

# refused FILE CMD...: CMD on FILE gives one diagnostic line and exit 1,
# and FILE is untouched.
refused() {
	local f=$1; shift
	cp "$f" "$T/orig"
	run timeout 20 "$OBJPATCH" "$@" "$f"
	assert_failure 1
	[ "${#lines[@]}" -eq 1 ] || { echo "$* $f: $output"; false; }
	assert_output --regexp "^$f: error: objpatch: "
	cmp "$T/orig" "$f"
}

no_temp_files() {
	run bash -c "ls -A '$1' | grep -v '^orig$' | grep -E '\.tmp|objpatch' || true"
	assert_output ""
}

@test "malformed objects: nop refuses each with one line and leaves it untouched" {
	gcc -O2 -pg -mfentry -c "$DEMO/stats.c" -I"$DEMO" -o "$T/good.o"
	"$RECORDMCOUNT" "$T/good.o"
	mkdir "$T/bad"
	$PY "$SRC/tests/lib/corrupt.py" "$T/good.o" "$T/bad"
	[ "$(ls "$T"/bad/*.o | wc -l)" -ge 20 ]
	for f in "$T"/bad/*.o; do
		refused "$f" nop
	done
	no_temp_files "$T/bad"
}

@test "malformed linked images: inspect, check, sort, nop and link each refuse all of them" {
	mkdir "$T/bad" "$T/out"
	demo_objs "$T/o" record
	"$OBJPATCH" link -- cc "$T"/o/*.o -o "$T/good"
	$PY "$SRC/tests/lib/corrupt.py" "$T/good" "$T/bad"
	n=$(ls "$T"/bad | wc -l)
	echo "# $n malformed images" >&3
	[ "$n" -ge 20 ]
	printf '#!/bin/sh\n# a "linker" that produces its first argument: fakeld IN -o OUT\ncp "$1" "$3"\n' > "$T/fakeld"
	chmod +x "$T/fakeld"
	for f in "$T"/bad/*; do
		for cmd in inspect check sort nop; do
			refused "$f" "$cmd"
		done
		# The link "succeeds" by copying the bad file; post-processing
		# must fail and remove what it produced.
		run "$OBJPATCH" link -- "$T/fakeld" "$f" -o "$T/out/prog"
		assert_failure 1
		[ "${#lines[@]}" -eq 1 ] || { echo "link $f: $output"; false; }
		assert_output --regexp "^$T/out/prog: error: objpatch: "
		[ ! -e "$T/out/prog" ]
	done
	no_temp_files "$T/bad"
	no_temp_files "$T/out"
}

@test "link: a failing link command passes its status through and leaves no output" {
	run "$OBJPATCH" link -- false -o "$T/prog"
	assert_failure 1
	run "$OBJPATCH" link -- sh -c 'exit 3'
	assert_failure 3
	run -127 "$OBJPATCH" link -- /nonexistent/ld -o "$T/prog"
	assert_output --partial "cannot run the link command"
	[ ! -e "$T/prog" ]
}

@test "link --check: a wrong table fails the link and removes the output" {
	demo_objs "$T/o"
	# Only one object recorded: the other two objects' calls are missing.
	"$RECORDMCOUNT" "$T/o/fib.o"
	run "$OBJPATCH" link --check -- cc "$T"/o/*.o -o "$T/prog"
	assert_failure 1
	assert_output --partial "missing from the table"
	assert_output --partial "output removed"
	[ ! -e "$T/prog" ]
}
