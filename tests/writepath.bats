#!/usr/bin/env bats
# The write path in anyone's hands: what a rewrite keeps of the file it
# replaces (owner, group, mode, extended attributes, ACLs: side by side
# with binutils' strip on the same file), symbolic and hard links (a
# ccache cache in hard_link mode stays whole), files that are not regular
# (a FIFO is refused at once; -o /dev/null is the compiler's and the
# linker's alone), concurrent links of one output, and no /proc.

load helpers

FIX=$SRC/tests/fixtures/link

need_root() {
	[ "$(id -u)" = 0 ] || skip "needs root (chown to another user, mknod, mount)"
}

obj() {
	cc -O2 -pg -mfentry -c "$FIX/util.c" -o "$1"
}

# A linked program whose table objpatch sort and nop still change.
prog() {
	for f in main util lib; do
		cc -O2 -pg -mfentry -c "$FIX/$f.c" -o "$T/$f.o"
	done
	"$RECORDMCOUNT" "$T"/{main,util,lib}.o
	"$OBJPATCH" link --no-sort -- cc "$T"/{util,main,lib}.o -o "$1"
}

# meta FILE: owner, group, mode, and every extended attribute (ACLs are
# system.posix_acl_access) by name and value.
meta() {
	stat -c '%U:%G %a' "$1"
	getfattr -d -m - -e hex "$1" 2>/dev/null | grep -v '^# file:' || true
}

# dress FILE: another user's setuid and setgid file with an attribute of
# its own and an ACL.
dress() {
	chown nobody:nogroup "$1"
	chmod 6755 "$1"
	setfattr -n user.foo -v bar "$1"
	setfacl -m u:daemon:r "$1"
}

need_attr_tools() {
	need_root
	need setfattr
	need getfattr
	need setfacl
	need strip
}

@test "a rewrite keeps the owner, group, mode, attributes and ACL, as strip does" {
	need_attr_tools
	obj "$T/a.o"
	prog "$T/p"
	for what in "recordmcount:a.o:$RECORDMCOUNT" "recordmcount --in-place:a.o:$RECORDMCOUNT --in-place" \
		    "objpatch sort:p:$OBJPATCH sort" "objpatch nop:p:$OBJPATCH nop"; do
		IFS=: read -r name file cmd <<< "$what"
		cp "$T/$file" "$T/ours"
		cp "$T/$file" "$T/strip"
		dress "$T/ours"
		dress "$T/strip"
		strip "$T/strip"
		$cmd "$T/ours"
		meta "$T/strip" > "$T/want"
		meta "$T/ours" > "$T/got"
		grep -q 'nobody:nogroup 6755' "$T/want"
		grep -q user.foo "$T/want"
		grep -q posix_acl_access "$T/want"
		diff -u "$T/want" "$T/got" || { echo "$name: not what strip keeps"; false; }
		# (And the rewrite did happen.)
		if cmp -s "$T/$file" "$T/ours"; then false; fi
	done
}

@test "a new -o FILE is the caller's, without setuid; an existing one keeps what it had" {
	need_attr_tools
	obj "$T/a.o"
	dress "$T/a.o"
	cp "$T/a.o" "$T/s.o"
	strip -o "$T/strip-new.o" "$T/s.o"
	"$RECORDMCOUNT" -o "$T/new.o" "$T/a.o"
	# strip -o makes the file root's, with no attributes: so does
	# recordmcount -o, with the input's mode but never setuid root.
	[ "$(meta "$T/new.o" | sed 's/ [0-7]*$//')" = "$(meta "$T/strip-new.o" | sed 's/ [0-7]*$//')" ]
	[ "$(stat -c %U:%a "$T/new.o")" = root:755 ]

	obj "$T/b.o"
	cp "$T/b.o" "$T/out.o"
	dress "$T/out.o"
	meta "$T/out.o" > "$T/want"
	"$RECORDMCOUNT" -o "$T/out.o" "$T/b.o"
	meta "$T/out.o" > "$T/got"
	diff -u "$T/want" "$T/got"
	readelf -S "$T/out.o" | grep -q __mcount_loc
}

@test "an attribute that cannot be kept fails the rewrite (fault shim), the input intact" {
	need_attr_tools
	SHIM=${MCLOC_FAULTSHIM:-$(dirname "$OBJPATCH")/../tests/libfaultshim.so}
	[ -f "$SHIM" ] || skip "the fault shim is not built"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "a preloaded shim and ASan do not mix"
	obj "$T/a.o"
	dress "$T/a.o"
	cp -a "$T/a.o" "$T/pristine.o"
	# Calls: open (O_TMPFILE), the write, fchown, then the attributes.
	n=0
	for i in 1 2 3 4 5 6; do
		rc=0
		LD_PRELOAD=$SHIM MCLOC_FAULT=$i:eio "$RECORDMCOUNT" "$T/a.o" 2>"$T/err" || rc=$?
		if grep -q 'cannot keep extended attribute' "$T/err"; then
			[ "$rc" -eq 1 ]
			[ "$(wc -l < "$T/err")" -eq 1 ]
			cmp "$T/a.o" "$T/pristine.o"
			[ "$(meta "$T/a.o")" = "$(meta "$T/pristine.o")" ]
			n=$((n + 1))
		fi
		cp -a "$T/pristine.o" "$T/a.o"
	done
	[ "$n" -eq 2 ]	# user.foo and the ACL
}

@test "a symbolic link: its target is rewritten and the link kept, as strip does" {
	need strip
	obj "$T/real.o"
	ln -s real.o "$T/link.o"
	"$RECORDMCOUNT" "$T/link.o"
	[ -L "$T/link.o" ]
	[ "$(readlink "$T/link.o")" = real.o ]
	readelf -S "$T/real.o" | grep -q __mcount_loc
	[ -z "$(find "$T" -name '.*')" ]

	prog "$T/p"
	cp "$T/p" "$T/sp"
	cp "$T/p" "$T/p.orig"
	mkdir "$T/d"
	ln -s ../p "$T/d/lp"
	ln -s ../sp "$T/d/lsp"
	"$OBJPATCH" sort "$T/d/lp"
	strip "$T/d/lsp"
	[ -L "$T/d/lp" ] && [ -L "$T/d/lsp" ]
	"$OBJPATCH" check "$T/p"
	if cmp -s "$T/p" "$T/p.orig"; then false; fi
	[ -z "$(ls -A "$T/d" | grep -v '^l')" ]
}

@test "hard links: a rewrite replaces this name only; --in-place does not append to a shared file" {
	obj "$T/a.o"
	cp "$T/a.o" "$T/orig.o"
	ln "$T/a.o" "$T/b.o"
	"$RECORDMCOUNT" --in-place "$T/a.o"
	cmp "$T/b.o" "$T/orig.o"
	readelf -S "$T/a.o" | grep -q __mcount_loc
	ln -f "$T/orig.o" "$T/c.o"
	cp "$T/orig.o" "$T/d.o"
	ln -f "$T/d.o" "$T/e.o"
	"$RECORDMCOUNT" "$T/d.o"
	cmp "$T/e.o" "$T/orig.o"
	readelf -S "$T/d.o" | grep -q __mcount_loc
}

@test "ccache in hard_link mode: its cached objects stay byte-identical, with and without --in-place" {
	need ccache
	export CCACHE_DIR=$T/cache CCACHE_HARDLINK=1 CCACHE_NOCOMPRESS=1
	printf 'int f(int a) { return a + 1; }\nint g(int a) { return f(a) * 2; }\n' > "$T/u.c"
	cc -O2 -pg -mfentry -c "$T/u.c" -o "$T/plain.o"
	cd "$T"
	# (--in-place does not wrap a compiler: a step of its own after it.)
	for mode in wrapper --in-place; do
		for round in miss hit; do
			rm -f u.o
			if [ $mode = wrapper ]; then
				"$RECORDMCOUNT" -- ccache cc -O2 -pg -mfentry -c u.c -o u.o
			else
				ccache cc -O2 -pg -mfentry -c u.c -o u.o
				[ "$(stat -c %h u.o)" -eq 2 ]	# (ccache linked it)
				"$RECORDMCOUNT" --in-place u.o
			fi
			readelf -S u.o | grep -q __mcount_loc
			# Every object in the cache is still the compiler's.
			n=0
			while read -r f; do
				cmp "$f" plain.o || { echo "$mode $round: $f changed"; false; }
				n=$((n + 1))
			done < <(find cache -type f -name '*W')
			[ "$n" -ge 1 ]
			# And a compile served from the cache is the compiler's too.
			ccache cc -O2 -pg -mfentry -c u.c -o again.o
			cmp again.o plain.o
			rm -f again.o
		done
		ccache -C >/dev/null
	done
}

@test "a FIFO as input is refused at once, in one line, by every command" {
	mkfifo "$T/fifo"
	for cmd in "$RECORDMCOUNT" "$RECORDMCOUNT --in-place" "$RECORDMCOUNT --dry-run" \
		   "$OBJPATCH sort" "$OBJPATCH nop" "$OBJPATCH check" "$OBJPATCH inspect"; do
		# (timeout only turns a hang into a failure.)
		rc=0
		timeout 60 $cmd "$T/fifo" 2>"$T/err" || rc=$?
		[ "$rc" -eq 1 ] || { echo "$cmd: exit $rc"; cat "$T/err"; false; }
		[ "$(wc -l < "$T/err")" -eq 1 ]
		grep -q 'fifo: error: .*not a regular file' "$T/err"
	done
	[ -p "$T/fifo" ]
}

@test "-o /dev/null: a link and a compile exit as the compiler does, and the device stays" {
	need_root
	mknod "$T/null" c 1 3
	obj "$T/a.o"
	"$RECORDMCOUNT" "$T/a.o"
	cc -O2 -pg -mfentry -c "$FIX/main.c" -o "$T/main.o"
	cc -O2 -pg -mfentry -c "$FIX/lib.c" -o "$T/lib.o"
	"$RECORDMCOUNT" "$T/main.o" "$T/lib.o"
	run "$OBJPATCH" link -- cc "$T/a.o" "$T/main.o" "$T/lib.o" -o "$T/null"
	assert_success
	[ -c "$T/null" ]
	run "$OBJPATCH" link --nop --runtime --check -- cc "$T/a.o" "$T/main.o" "$T/lib.o" -o "$T/null"
	assert_success
	[ -c "$T/null" ]
	# A link that fails leaves the device alone too.
	run "$OBJPATCH" link -- cc "$T/a.o" -o "$T/null"
	assert_failure
	[ -c "$T/null" ]
	run "$RECORDMCOUNT" -- cc -O2 -pg -mfentry -c "$FIX/util.c" -o "$T/null"
	assert_success
	[ -c "$T/null" ]
	run "$RECORDMCOUNT" -- cc -c "$T/nosuch.c" -o "$T/null"
	assert_failure
	[ -c "$T/null" ]
	[ "$(ls -A "$T" | grep -c '^\.')" -eq 0 ]
}

@test "four concurrent links of one output: it is there and whole after each of 100 rounds" {
	for f in main util lib; do
		cc -O2 -pg -mfentry -c "$FIX/$f.c" -o "$T/$f.o"
	done
	"$RECORDMCOUNT" "$T"/{main,util,lib}.o
	cd "$T"
	lost=0 failed=0
	for round in $(seq 100); do
		rm -f px
		pids=()
		for i in 1 2 3 4; do
			"$OBJPATCH" link -- cc util.o main.o lib.o -o px 2>>errs &
			pids+=($!)
		done
		# (Each link works on a file of its own: none has a reason to fail.)
		for p in "${pids[@]}"; do
			wait "$p" || failed=$((failed + 1))
		done
		if [ ! -f px ]; then
			lost=$((lost + 1))
		else
			"$OBJPATCH" check px
		fi
	done
	echo "# 4 concurrent links x 100 rounds: $lost lost, $failed runs failed" >&3
	head -3 errs
	[ "$lost" -eq 0 ]
	[ "$failed" -eq 0 ]
	rm errs
	[ -z "$(ls -A | grep '^\.')" ]
}

@test "without /proc (an empty tmpfs over it), every rewrite still works" {
	need_root
	unshare -m true 2>/dev/null || skip "unshare -m is not permitted here"
	# (The sanitizers read their options, and LeakSanitizer the threads,
	# from /proc: their own failure, not the tools'.)
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "the sanitizers' runtime needs /proc"
	obj "$T/a.o"
	cp "$T/a.o" "$T/b.o"
	cp "$T/a.o" "$T/c.o"
	prog "$T/p"
	cp "$T/p" "$T/q"
	cp "$T/p" "$T/p.want"
	cp "$T/p" "$T/q.want"
	"$OBJPATCH" sort "$T/p.want"
	"$OBJPATCH" nop "$T/q.want"
	cat > "$T/run.sh" <<-EOF
		set -e
		mount -t tmpfs none /proc
		[ ! -e /proc/self ]
		"$RECORDMCOUNT" "$T/a.o"
		"$RECORDMCOUNT" -o "$T/out.o" "$T/b.o"
		"$RECORDMCOUNT" --in-place "$T/c.o"
		"$OBJPATCH" sort "$T/p"
		"$OBJPATCH" nop "$T/q"
	EOF
	unshare -m sh "$T/run.sh"
	for o in a out c; do
		readelf -S "$T/$o.o" | grep -q __mcount_loc
	done
	cmp "$T/p" "$T/p.want"
	cmp "$T/q" "$T/q.want"
	[ -z "$(ls -A "$T" | grep '^\.')" ]
}

# A shared directory, as /tmp is: sticky, and anyone may write it.
shared_dir() {
	need_root
	command -v setpriv >/dev/null || skip "setpriv is not installed"
	mkdir -m 1777 "$T/shared"
	chmod 711 "$BATS_RUN_TMPDIR" "$T"
	NOBODY="setpriv --reuid=65534 --regid=65534 --clear-groups"
}

@test "-o FILE replaces a link planted there, as objcopy does: root writes nothing through it" {
	shared_dir
	obj "$T/a.o"
	echo secret > "$T/victim"
	chmod 600 "$T/victim"
	$NOBODY ln -s "$T/victim" "$T/shared/out.o"
	$NOBODY ln -s "$T/victim" "$T/shared/same.o"
	cp "$T/a.o" "$T/rec.o"
	"$RECORDMCOUNT" "$T/rec.o"
	run "$RECORDMCOUNT" -o "$T/shared/out.o" "$T/a.o"
	assert_success
	run "$RECORDMCOUNT" -o "$T/shared/same.o" "$T/rec.o"	# (nothing to change)
	assert_success
	[ "$(cat "$T/victim")" = secret ]
	for o in out.o same.o; do
		[ ! -L "$T/shared/$o" ] && [ -f "$T/shared/$o" ]
		[ "$(stat -c %U "$T/shared/$o")" = root ]
	done
	objcopy "$T/a.o" "$T/shared/same.o"	# (what objcopy leaves: the same)
	[ "$(cat "$T/victim")" = secret ]
}

@test "a staged name another user made in a shared directory is neither removed nor in the way" {
	shared_dir
	obj "$T/shared/x.o"
	cc -O2 -c "$FIX/util.c" -o "$T/shared/plain.o"	# (no calls: nothing to write)
	$NOBODY sh -c "echo hers > '$T/shared/.x.o.mcloc~'; echo hers > '$T/shared/.plain.o.mcloc~'"
	run "$RECORDMCOUNT" "$T/shared/x.o" "$T/shared/plain.o"
	assert_success
	[ "$(cat "$T/shared/.x.o.mcloc~")" = hers ]
	[ "$(cat "$T/shared/.plain.o.mcloc~")" = hers ]
	"$OBJPATCH" check "$T/shared/x.o"
	# Another user's rewrite of her own file, past a directory (or a file)
	# planted under its staged name.
	obj "$T/shared/y.o"
	chown daemon:daemon "$T/shared/y.o"
	$NOBODY mkdir "$T/shared/.y.o.mcloc~"
	run setpriv --reuid=daemon --regid=daemon --clear-groups "$RECORDMCOUNT" "$T/shared/y.o"
	assert_success
	"$OBJPATCH" check "$T/shared/y.o"
	[ -d "$T/shared/.y.o.mcloc~" ]
	[ -z "$(find "$T/shared" -name '.y.o.*' ! -name '.y.o.mcloc~')" ]
}
