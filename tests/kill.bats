#!/usr/bin/env bats
# SIGKILL at random moments: while recordmcount works through 1,000
# objects, and through another user's setuid objects with attributes and
# ACLs (each must stay hers, with them), and while objpatch sort works on
# a large image.  After every
# kill each file is either its old bytes or exactly the complete new
# output, never torn; what a kill leaves beside a file is a complete new
# output under a name that says so (".NAME.mcloc~"), and the next run
# removes it.  And 8 recordmcount processes at once over overlapping sets
# of objects in one directory (make -j with a bad Makefile) leave every
# object whole.

load helpers

FIX=$SRC/tests/fixtures

# sums DIR: "NAME SHA1" per file of DIR, hidden ones too, sorted.
sums() {
	(cd "$1" && find . -maxdepth 1 -type f -printf '%P\n' | sort | xargs -r sha1sum) |
		awk '{ print $2, $1 }'
}

# check_dir DIR OLD NEW: every file of DIR has the sum OLD or NEW lists
# for its name; a staged ".NAME.mcloc~" has NEW's sum for NAME.  Prints
# "TORN NAME" for any other, and the number of files still old.
check_dir() {
	sums "$1" | awk -v old="$2" -v new="$3" '
		BEGIN { while ((getline l < old) > 0) { split(l, a, " "); o[a[1]] = a[2] }
			while ((getline l < new) > 0) { split(l, a, " "); n[a[1]] = a[2] } }
		{ name = $1; sum = $2
		  if (name ~ /^\..*\.mcloc~$/) { base = substr(name, 2, length(name) - 8)
			if (n[base] != sum) { print "TORN " name; bad = 1 } ; staged++; next }
		  if (!(name in o)) { print "UNKNOWN " name; bad = 1; next }
		  if (sum == o[name]) left++
		  else if (sum != n[name]) { print "TORN " name; bad = 1 } }
		END { print "left", left + 0, "staged", staged + 0; exit bad }'
}

# kill_runs N DIR PRISTINE WANT MS CMD...: N times, start CMD in DIR and
# SIGKILL it after a random time below MS milliseconds; check after each
# kill (and run $KILL_CHECK DIR if set); once every file is new, start
# again from PRISTINE.  Prints the counts.
kill_runs() {
	local n=$1 dir=$2 pristine=$3 want=$4 ms=$5 i pid out torn=0 staged=0 cut=0
	shift 5
	sums "$pristine" > "$T/old.sums"
	sums "$want" > "$T/new.sums"
	for i in $(seq "$n"); do
		(cd "$dir" && exec "$@" >/dev/null 2>&1) &
		pid=$!
		sleep "$(printf '0.%03d' $(( RANDOM % ms )))"
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		out=$(check_dir "$dir" "$T/old.sums" "$T/new.sums") || { echo "$out"; return 1; }
		# (KILL_CHECK: a command that checks DIR further.)
		[ -z "${KILL_CHECK:-}" ] || $KILL_CHECK "$dir" || return 1
		case $out in *"staged 0") ;; *) staged=$((staged + 1)) ;; esac
		left=$(echo "$out" | awk '/^left/ { print $2 }')
		total=$(wc -l < "$T/old.sums")
		[ "$left" -eq 0 ] || [ "$left" -eq "$total" ] || cut=$((cut + 1))
		if [ "$left" -eq 0 ]; then
			rm -rf "$dir"
			cp -a "$pristine" "$dir"
		fi
	done
	# A run to the end: everything new, nothing staged left.
	(cd "$dir" && "$@" >/dev/null 2>&1)
	out=$(check_dir "$dir" "$T/old.sums" "$T/new.sums")
	[ "$out" = "left 0 staged 0" ] || { echo "after a whole run: $out"; return 1; }
	echo "# $n kills: $cut in the middle of the set, $staged left a staged file, 0 torn" >&3
}

# ms CMD...: how long CMD takes, in ms (at least 20), as a kill's range.
ms_of() {
	local a b
	a=$(date +%s%N)
	"$@" >/dev/null 2>&1
	b=$(date +%s%N)
	echo $(( (b - a) / 1000000 > 20 ? (b - a) / 1000000 : 20 ))
}

@test "SIGKILL 100 times while recordmcount works through 1,000 objects: each file old or new, never torn" {
	mkdir "$T/objs"
	local k=0
	for c in "$FIX"/link/{main,util,lib,hook_strong}.c "$FIX/shapes.c" "$SRC"/examples/demo/*.c; do
		cc -O2 -pg -mfentry -I"$SRC/examples/demo" -c "$c" -o "$T/objs/src$k.o"
		k=$((k + 1))
	done
	mkdir "$T/pristine"
	for i in $(seq 0 999); do
		cp "$T/objs/src$((i % k)).o" "$T/pristine/o$(printf %04d "$i").o"
	done
	cp -a "$T/pristine" "$T/want"
	(cd "$T/want" && "$RECORDMCOUNT" ./*.o)
	cp -a "$T/pristine" "$T/w"
	ms=$(cd "$T/w" && ms_of "$RECORDMCOUNT" ./*.o)
	rm -rf "$T/w"
	cp -a "$T/pristine" "$T/w"
	kill_runs 100 "$T/w" "$T/pristine" "$T/want" "$ms" sh -c "exec \"$RECORDMCOUNT\" ./*.o"
}

# few_objs: $T/objs/src0.o... from four fixtures; prints how many.
few_objs() {
	local k=0
	mkdir -p "$T/objs"
	for c in "$FIX"/link/{main,util,lib}.c "$FIX/shapes.c"; do
		cc -O2 -pg -mfentry -c "$c" -o "$T/objs/src$k.o" || return 1
		k=$((k + 1))
	done
	echo "$k"
}

# dressed DIR: every object of DIR, old or new, is still nobody's, setuid
# and setgid, with its attribute and its ACL.
dressed() {
	local n bad
	n=$(find "$1" -maxdepth 1 -name '*.o' | wc -l)
	bad=$(find "$1" -maxdepth 1 -name '*.o' ! \( -user nobody -group nogroup -perm 6755 \) -printf '%P ')
	[ -z "$bad" ] || { echo "owner or mode lost: $(echo $bad | cut -d' ' -f1-5)..."; return 1; }
	[ "$(getfattr --absolute-names -d -m - "$1"/*.o | grep -c '^user.foo=')" -eq "$n" ] ||
		{ echo "an attribute lost"; return 1; }
	[ "$(getfattr --absolute-names -d -m - "$1"/*.o | grep -c '^system.posix_acl_access=')" -eq "$n" ] ||
		{ echo "an ACL lost"; return 1; }
}

@test "SIGKILL 100 times while recordmcount rewrites another user's setuid objects with attributes: old or new, each still hers" {
	[ "$(id -u)" = 0 ] || skip "needs root (chown to another user)"
	command -v setfacl >/dev/null && command -v getfattr >/dev/null || skip "acl and attr are not installed"
	mkdir "$T/pristine"
	k=$(few_objs)
	for i in $(seq 0 299); do
		cp "$T/objs/src$((i % k)).o" "$T/pristine/o$(printf %03d "$i").o"
	done
	chown nobody:nogroup "$T"/pristine/*.o
	chmod 6755 "$T"/pristine/*.o
	setfattr -n user.foo -v bar "$T"/pristine/*.o
	setfacl -m u:daemon:r "$T"/pristine/*.o
	cp -a "$T/pristine" "$T/want"
	(cd "$T/want" && "$RECORDMCOUNT" ./*.o)
	dressed "$T/want"
	cp -a "$T/pristine" "$T/w"
	ms=$(cd "$T/w" && ms_of "$RECORDMCOUNT" ./*.o)
	rm -rf "$T/w"
	cp -a "$T/pristine" "$T/w"
	KILL_CHECK=dressed kill_runs 100 "$T/w" "$T/pristine" "$T/want" "$ms" sh -c "exec \"$RECORDMCOUNT\" ./*.o"
	dressed "$T/w"
}

@test "SIGKILL 100 times while objpatch sort works on a large image: old or new, never torn" {
	$PY "$FIX/runtime/gen.py" "$T/big.c" 20000
	cc -O1 -pg -mfentry -ffunction-sections -c "$T/big.c" -o "$T/big.o"
	printf 'extern long (*const funcs[])(long);\nint main(void) { return (int)funcs[0](0); }\n' > "$T/m.c"
	cc -O1 -pg -mfentry -c "$T/m.c" -o "$T/m.o"
	"$RECORDMCOUNT" "$T/big.o" "$T/m.o"
	mkdir "$T/pristine"
	# (--no-sort: the linker's order, which sort then has to change)
	"$OBJPATCH" link --no-sort -- cc "$T/m.o" "$T/big.o" -o "$T/pristine/big"
	cp -a "$T/pristine" "$T/want"
	"$OBJPATCH" sort "$T/want/big"
	if cmp -s "$T/pristine/big" "$T/want/big"; then false; fi
	ms=$(cp "$T/pristine/big" "$T/probe" && ms_of "$OBJPATCH" sort "$T/probe")
	cp -a "$T/pristine" "$T/w"
	kill_runs 100 "$T/w" "$T/pristine" "$T/want" "$ms" "$OBJPATCH" sort big
}

@test "8 recordmcount processes at once over overlapping objects in one directory: none corrupt" {
	mkdir "$T/d"
	k=$(few_objs)
	for round in $(seq 10); do
		rm -f "$T"/d/* "$T"/d/.??*
		for i in $(seq 0 199); do
			cp "$T/objs/src$((i % k)).o" "$T/d/o$i.o"
		done
		cp -a "$T/d" "$T/want.$round"
		(cd "$T/want.$round" && "$RECORDMCOUNT" ./*.o)
		# Each process takes every object whose number is in its stride
		# or the next one's: every object goes through two or three at
		# once.
		pids=()
		for p in $(seq 0 7); do
			(cd "$T/d" && for i in $(seq 0 199); do
				[ $(( (i + p) % 3 )) -ne 0 ] && echo "o$i.o"
			done | xargs "$RECORDMCOUNT" >/dev/null 2>"$T/err.$p") &
			pids+=($!)
		done
		for pid in "${pids[@]}"; do wait "$pid"; done
		diff -r "$T/want.$round" "$T/d" || { cat "$T"/err.*; false; }
	done
	echo "# 10 rounds of 8 processes over 200 objects: every object whole and recorded once" >&3
}
