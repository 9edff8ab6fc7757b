#!/usr/bin/env bats
# Fault injection: every call of a tool's write path fails in turn, in
# every way a disk or a file system fails (tests/lib/faultshim.c: EIO,
# ENOSPC, EACCES, EROFS, and a short write after which the disk is full),
# and the file-size limit is hit (RLIMIT_FSIZE, SIGXFSZ ignored).  Each
# time the tool either fails as it must (exit 1, one line naming the file,
# the input byte-identical, no temporary file left) or, where the failed
# call cannot matter, succeeds with exactly the output of a run without
# faults.  Each test prints how many failure points it tried.

load helpers

FIX=$SRC/tests/fixtures/link
SHIM=${MCLOC_FAULTSHIM:-$(dirname "$OBJPATCH")/../tests/libfaultshim.so}
MODES="eio enospc eacces erofs short"

setup() {
	T=$(mktemp -d "$BATS_RUN_TMPDIR/t.XXXXXX")
	[ -f "$SHIM" ] || skip "the fault shim is not built ($SHIM)"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "a preloaded shim and ASan's own interposition do not mix"
}

# calls DIR CMD...: how many write-path calls CMD makes, run in DIR.
calls() {
	local dir=$1
	shift
	(cd "$dir" && env LD_PRELOAD="$SHIM" MCLOC_FAULT_COUNT="$T/count" "$@" >/dev/null 2>&1)
	cat "$T/count"
}

# one_line FILE: exactly one line, naming the file the tool worked on.
one_line() {
	[ "$(wc -l < "$1")" -eq 1 ] || { echo "not one line:"; cat "$1"; return 1; }
}

# same DIR_A DIR_B: the same files with the same bytes, owners, modes and
# extended attributes (what a rewrite keeps).
same() {
	diff -r "$1" "$2" >/dev/null || return 1
	[ "$(metas "$1")" = "$(metas "$2")" ]
}

metas() {
	(cd "$1" && find . -printf '%P %u:%g %m\n' | sort
	 ! command -v getfattr >/dev/null || getfattr -R -d -m - -e hex . 2>/dev/null)
}

# try NAME WORK PRISTINE WANT CMD...: for every failure point N and every
# mode, copy PRISTINE (a directory) to WORK, run CMD there with call N
# failing, and check the result: exit 1 and one line and WORK as
# PRISTINE was, or exit 0 and WORK as WANT (the fault-free result), the
# files' owners, modes and extended attributes included.
try() {
	local name=$1 work=$2 pristine=$3 want=$4
	shift 4
	local n total failed=0 passed=0 rc
	rm -rf "$T/probe"
	cp -a "$pristine" "$T/probe"
	total=$(calls "$T/probe" "$@")
	[ "$total" -gt 0 ]
	for mode in $MODES; do
		for n in $(seq "$total"); do
			rm -rf "$work"
			cp -a "$pristine" "$work"
			rc=0
			(cd "$work" && env LD_PRELOAD="$SHIM" MCLOC_FAULT="$n:$mode" "$@" \
				>"$T/out" 2>"$T/err") || rc=$?
			if [ "$rc" -eq 0 ]; then
				same "$want" "$work" ||
					{ echo "$name $n:$mode: exit 0 but not the fault-free result"; diff -r "$want" "$work" | head; diff <(metas "$want") <(metas "$work"); return 1; }
				passed=$((passed + 1))
			else
				[ "$rc" -eq 1 ] || { echo "$name $n:$mode: exit $rc"; cat "$T/err"; return 1; }
				one_line "$T/err" || { echo "($name $n:$mode)"; return 1; }
				same "$pristine" "$work" ||
					{ echo "$name $n:$mode: the input changed, or a file was left"; diff -r "$pristine" "$work" | head; ls -la "$work"; return 1; }
				failed=$((failed + 1))
			fi
		done
	done
	echo "# $name: $total write-path calls x ${MODES// /, }: $failed failed cleanly, $passed succeeded unharmed" >&3
	[ "$failed" -gt 0 ]
}

# prepare NAME CMD...: $T/NAME.in (the pristine directory, from $T/src)
# and $T/NAME.want (after CMD without faults).
prepare() {
	local name=$1
	shift
	cp -a "$T/src" "$T/$name.in"
	cp -a "$T/src" "$T/$name.want"
	(cd "$T/$name.want" && "$@")
}

objects() {
	mkdir "$T/src"
	for f in main util lib; do
		cc -O2 -pg -mfentry -c "$FIX/$f.c" -o "$T/src/$f.o"
	done
}

@test "recordmcount: every write-path call fails in turn, in five ways; the input survives each" {
	objects
	prepare rec "$RECORDMCOUNT" util.o
	try recordmcount "$T/w" "$T/rec.in" "$T/rec.want" "$RECORDMCOUNT" util.o
	prepare rec_o "$RECORDMCOUNT" -o out.o util.o
	try "recordmcount -o" "$T/w" "$T/rec_o.in" "$T/rec_o.want" "$RECORDMCOUNT" -o out.o util.o
	# A file system without O_TMPFILE: a named temporary file instead.
	export MCLOC_FAULT_NO_TMPFILE=1
	try "recordmcount (no O_TMPFILE)" "$T/w" "$T/rec.in" "$T/rec.want" "$RECORDMCOUNT" util.o
	unset MCLOC_FAULT_NO_TMPFILE
	prepare rec_ip "$RECORDMCOUNT" --in-place util.o
	try "recordmcount --in-place" "$T/w" "$T/rec_ip.in" "$T/rec_ip.want" "$RECORDMCOUNT" --in-place util.o
	# No /proc to name the unnamed file through: a named one instead.
	export MCLOC_FAULT_NO_PROC=1
	try "recordmcount (no /proc)" "$T/w" "$T/rec.in" "$T/rec.want" "$RECORDMCOUNT" util.o
	unset MCLOC_FAULT_NO_PROC
}

@test "recordmcount on another user's setuid object with attributes and an ACL: each call fails in turn" {
	[ "$(id -u)" = 0 ] || skip "needs root (chown to another user)"
	command -v setfacl >/dev/null && command -v setfattr >/dev/null || skip "acl and attr are not installed"
	objects
	chown nobody:nogroup "$T/src/util.o"
	chmod 6755 "$T/src/util.o"
	setfattr -n user.foo -v bar "$T/src/util.o"
	setfacl -m u:daemon:r "$T/src/util.o"
	prepare own "$RECORDMCOUNT" util.o
	[ "$(stat -c %U:%a "$T/own.want/util.o")" = nobody:6755 ]
	try "recordmcount (nobody's, xattrs)" "$T/w" "$T/own.in" "$T/own.want" "$RECORDMCOUNT" util.o
	MCLOC_FAULT_NO_PROC=1 try "recordmcount (nobody's, xattrs, no /proc)" "$T/w" "$T/own.in" "$T/own.want" "$RECORDMCOUNT" util.o
	MCLOC_FAULT_NO_TMPFILE=1 try "recordmcount (nobody's, xattrs, no O_TMPFILE)" "$T/w" "$T/own.in" "$T/own.want" "$RECORDMCOUNT" util.o
}

# A linked program, its table not yet sorted or NOPed: objpatch link
# --no-sort leaves it so.
linked() {
	objects
	"$RECORDMCOUNT" "$T"/src/*.o
	"$OBJPATCH" link --no-sort -- cc "$T"/src/{util,main,lib}.o -o "$T/src/prog"
	rm "$T"/src/*.o
}

@test "objpatch sort and nop: every write-path call fails in turn; the image survives each" {
	linked
	prepare sort "$OBJPATCH" sort prog
	try "objpatch sort" "$T/w" "$T/sort.in" "$T/sort.want" "$OBJPATCH" sort prog
	MCLOC_FAULT_NO_TMPFILE=1 try "objpatch sort (no O_TMPFILE)" "$T/w" "$T/sort.in" "$T/sort.want" "$OBJPATCH" sort prog
	MCLOC_FAULT_NO_PROC=1 try "objpatch sort (no /proc)" "$T/w" "$T/sort.in" "$T/sort.want" "$OBJPATCH" sort prog
	prepare nop "$OBJPATCH" nop prog
	try "objpatch nop" "$T/w" "$T/nop.in" "$T/nop.want" "$OBJPATCH" nop prog
}

@test "objpatch sort --in-place: every write-path call fails in turn; the old bytes come back each time" {
	linked
	# (--kernel: a program's plain sort adds symbols, which in place it
	# refuses.)
	prepare sortip "$OBJPATCH" sort --kernel --in-place prog
	if cmp -s "$T/sortip.in/prog" "$T/sortip.want/prog"; then false; fi
	# Not "short" here: after a short write every write fails, as on a
	# full disk, the ones that would put the old bytes back included.
	MODES="eio enospc eacces erofs" try "objpatch sort --in-place" "$T/w" "$T/sortip.in" \
		"$T/sortip.want" "$OBJPATCH" sort --kernel --in-place prog
	# That case says the tables are torn, in its one line.
	local n rc torn=0
	rm -rf "$T/probe"
	cp -a "$T/sortip.in" "$T/probe"
	for n in $(seq "$(calls "$T/probe" "$OBJPATCH" sort --kernel --in-place prog)"); do
		rm -rf "$T/w"
		cp -a "$T/sortip.in" "$T/w"
		rc=0
		(cd "$T/w" && env LD_PRELOAD="$SHIM" MCLOC_FAULT="$n:short" "$OBJPATCH" sort --kernel \
			--in-place prog 2>"$T/err") || rc=$?
		[ "$rc" -eq 0 ] && continue
		[ "$rc" -eq 1 ]
		one_line "$T/err"
		if ! cmp -s "$T/sortip.in/prog" "$T/w/prog"; then
			grep -q "could not put the old bytes back .*: the tables are torn" "$T/err"
			torn=$((torn + 1))
		fi
	done
	[ "$torn" -gt 0 ]
}

@test "objpatch link: every write-path call of its own fails in turn; no output is left, the objects survive" {
	objects
	"$RECORDMCOUNT" "$T"/src/*.o
	prepare link "$OBJPATCH" link --nop --runtime -- cc util.o main.o lib.o -o prog
	try "objpatch link" "$T/w" "$T/link.in" "$T/link.want" \
		"$OBJPATCH" link --nop --runtime -- cc util.o main.o lib.o -o prog
}

@test "the file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored): one line, exit 1, the input intact" {
	objects
	"$RECORDMCOUNT" "$T"/src/*.o
	"$OBJPATCH" link --no-sort -- cc "$T"/src/{util,main,lib}.o -o "$T/src/prog"
	cc -O2 -pg -mfentry -c "$FIX/util.c" -o "$T/src/fresh.o"
	cp -a "$T/src" "$T/pristine"
	for cmd in "$RECORDMCOUNT fresh.o" "$RECORDMCOUNT --in-place fresh.o" "$OBJPATCH sort prog" "$OBJPATCH nop prog" \
		"$OBJPATCH sort --kernel --in-place prog"; do
		rc=0
		(cd "$T/src" && trap '' XFSZ && ulimit -f 1 && $cmd) 2>"$T/err" || rc=$?
		[ "$rc" -eq 1 ] || { echo "$cmd: exit $rc"; cat "$T/err"; false; }
		one_line "$T/err"
		grep -q 'File too large' "$T/err"
		diff -r "$T/pristine" "$T/src"
	done
}
