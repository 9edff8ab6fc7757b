#!/usr/bin/env bats
# Malformed input: exit 1, exactly one diagnostic line naming the file,
# and the file byte-identical afterwards.  Never a crash or a hang.
load helpers

setup_file() {
	export BAD=$BATS_FILE_TMPDIR/bad
	mkdir -p "$BAD"
	gcc -O2 -pg -mfentry -c "$DEMO/stats.c" -I"$DEMO" -o "$BATS_FILE_TMPDIR/good.o"
	$PY "$SRC/tests/lib/corrupt.py" "$BATS_FILE_TMPDIR/good.o" "$BAD"
}

refused() {
	local f=$1
	cp "$f" "$f.orig"
	run timeout 20 "$RECORDMCOUNT" "$f"
	assert_failure 1
	[ "${#lines[@]}" -eq 1 ] || { echo "expected one line, got: $output"; false; }
	assert_output --regexp "^$f: error: recordmcount: "
	cmp "$f.orig" "$f"
	[ -z "$(find "$(dirname "$f")" -name ".$(basename "$f").*")" ]	# no temp file left
}

@test "at least 20 malformed objects are generated" {
	[ "$(ls "$BAD"/*.o | wc -l)" -ge 20 ]
}

@test "every malformed object is refused cleanly and left untouched" {
	for f in "$BAD"/*.o; do
		refused "$f"
	done
}

@test "every malformed object is refused the same way with --in-place" {
	for f in "$BAD"/*.o; do
		cp "$f" "$f.ip"
		run timeout 20 "$RECORDMCOUNT" --in-place "$f.ip"
		assert_failure 1
		[ "${#lines[@]}" -eq 1 ]
		cmp "$f" "$f.ip"
	done
}

@test "a directory is refused" {
	mkdir "$T/d.o"
	run "$RECORDMCOUNT" "$T/d.o"
	assert_failure 1
	assert_output "$T/d.o: error: recordmcount: is a directory"
}

@test "a missing file is refused" {
	run "$RECORDMCOUNT" "$T/nope.o"
	assert_failure 1
	assert_output --regexp "nope.o: error: recordmcount: cannot open"
}

@test "an unwritable directory fails the write and leaves the input intact" {
	[ "$(id -u)" != 0 ] || skip "root can write anywhere"
	mkdir "$T/ro"
	cp "$BATS_FILE_TMPDIR/good.o" "$T/ro/g.o"
	chmod 555 "$T/ro"
	run "$RECORDMCOUNT" "$T/ro/g.o"
	chmod 755 "$T/ro"
	assert_failure 1
	cmp "$BATS_FILE_TMPDIR/good.o" "$T/ro/g.o"
}
