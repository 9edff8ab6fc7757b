#!/usr/bin/env bash
# mcloc record against uftrace record on real programs built from Debian's
# source packages, lua5.4 and sqlite3, each making tens of millions of
# calls, with the same workload and the same compiler flags (-O2 -pg
# -mfentry: uftrace records -pg builds, mcount or fentry):
#   - ours: recordmcount, objpatch link --nop --runtime, and
#     `mcloc record function_graph -- PROG` (every call's entry and exit);
#   - uftrace's: `uftrace record PROG` of the same objects, unpatched.
# Each writes its recording to a directory on the same file system.  The
# figure is the CPU time (user + system) of the whole command, recorder and
# program, from wait4's rusage (/usr/bin/time), in ROUNDS alternating
# rounds; the median's ratio ours/uftrace is printed with the events each
# kept and lost.  Goal: at most 0.5, every event kept.
#
# Floors measured in the same run:
#   - the plain program (-O2, no -pg): what tracing adds to;
#   - ours with MCLOC_TRACER=profile: our trampoline and return hook with
#     no event written, the least a recording can cost us;
#   - writing the recording's bytes: as many bytes from /dev/zero into a
#     file beside it (dd, 1 MiB blocks), the cost of the bytes alone.
# Then `mcloc replay` of our recording to /dev/null: events per second
# (goal: at least 5 million).  Then the cost per captured call of
# arguments and return values: both record again with the same -A and -R
# of one hot function (lua: interning a string, its bytes and length and
# the result, 400,000 calls; sqlite3: a varint's two pointers and its
# length, millions of calls), and the CPU
# above their plain recording, over the calls of that function, is the
# figure.
#
# Needs: uftrace, tclsh (sqlite's amalgamation), deb-src lines for
# `apt-get source` (the sources are cached in ~/.cache/mcloc-real).
# Not a test.  Usage: record-bench.sh [ROUNDS [PROGRAMS]]  (lua sqlite)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${MCLOC_BUILD:-$here/build}
rc=$build/recordmcount/recordmcount op=$build/objpatch/objpatch
libdir=$build/libmcloc mcloc=$build/mcloc/mcloc
rounds=${1:-3} programs=${2:-lua sqlite}
cache=${MCLOC_REAL_CACHE:-$HOME/.cache/mcloc-real}
command -v uftrace >/dev/null || { echo "skipped: uftrace is not installed"; exit 0; }
w=$(mktemp -d "${MCLOC_BENCH_DIR:-/var/tmp}/record-bench.XXXXXX")
trap 'rm -rf "$w"' EXIT
export XDG_RUNTIME_DIR=$w/run LD_LIBRARY_PATH=$libdir
mkdir -m 700 "$XDG_RUNTIME_DIR"
mkdir -p "$cache"

# The source package PKG unpacked into $cache/PKG (its orig tarball: the
# upstream source Debian builds).
source_of() {
	local pkg=$1
	[ -d "$cache/$pkg/src" ] && return 0
	mkdir -p "$cache/$pkg/dl"
	(cd "$cache/$pkg/dl" && apt-get source --download-only "$pkg" >/dev/null) || {
		echo "skipped: apt-get source $pkg failed (are there deb-src lines?)"; exit 0; }
	mkdir -p "$cache/$pkg/src"
	tar xf "$(ls "$cache/$pkg/dl/"*.orig.tar.* | grep -v www | head -1)" -C "$cache/$pkg/src" \
		--strip-components=1
}

# OBJS built three ways from the sources $@ with extra CFLAGS: plain,
# -pg -mfentry (uftrace's), and ours (the same objects, recordmcount'd).
build_three() {
	local name=$1 cflags=$2 libs=$3; shift 3
	local d=$cache/$name/bin
	[ -x "$d/ours" ] && return 0
	mkdir -p "$d/o-plain" "$d/o-pg"
	for f in "$@"; do
		local o; o=$(basename "${f%.c}").o
		cc -O2 $cflags -c "$f" -o "$d/o-plain/$o" &
		cc -O2 -pg -mfentry $cflags -c "$f" -o "$d/o-pg/$o"
		wait
	done
	cc "$d"/o-plain/*.o -o "$d/plain" $libs
	cc -pg "$d"/o-pg/*.o -o "$d/uftrace" $libs
	mkdir -p "$d/o-ours" && cp "$d"/o-pg/*.o "$d/o-ours/"
	for o in "$d"/o-ours/*.o; do "$rc" "$o"; done
	"$op" link --nop --runtime -- cc "$d"/o-ours/*.o -o "$d/ours" $libs -L"$libdir" -lmcloc
}

setup_lua() {
	source_of lua5.4
	local s=$cache/lua5.4/src/src
	build_three lua "-DLUA_USE_LINUX" "-lm -ldl" $(ls "$s"/*.c | grep -v '/luac\.c$')
	cat > "$w/work.lua" <<'EOF'
local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
local t = {}
for i = 1, 200000 do t[i] = tostring(i) .. "x" end
table.sort(t)
local s = 0
for i = 1, #t do s = s + #t[i] end
print(fib(24), s)
EOF
	args=("$w/work.lua")
	afunc=internshrstr
	aspec=(-A "$afunc@arg2/s,arg3/u" -R "$afunc@retval/x")
}

setup_sqlite() {
	source_of sqlite3
	local s=$cache/sqlite3/src
	if [ ! -f "$s/sqlite3.c" ]; then
		(cd "$s" && ./configure --disable-tcl >/dev/null && make -j2 sqlite3.c shell.c >/dev/null)
	fi
	build_three sqlite "-DSQLITE_THREADSAFE=0 -DSQLITE_OMIT_LOAD_EXTENSION" "-lm" \
		"$s/sqlite3.c" "$s/shell.c"
	cat > "$w/work.sql" <<'EOF'
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
INSERT INTO t SELECT i, printf('row %d', i * 7919 % 200000), i * 0.5 FROM n;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(length(b)), avg(c) FROM t WHERE b LIKE 'row 1%';
SELECT b FROM t ORDER BY b DESC LIMIT 1;
UPDATE t SET c = c * 2 WHERE a % 3 = 0;
SELECT count(*) FROM t a JOIN t b ON a.a = b.a + 1 WHERE a.c > b.c;
EOF
	args=(-batch "$w/db" ".read $w/work.sql")
	afunc=sqlite3GetVarint
	aspec=(-A "$afunc@arg1/x,arg2/x" -R "$afunc@retval/u8")
}

# CPU seconds (user + system) of the command $@, its own and its waited
# children's, into $cpu.
cpu_of() {
	/usr/bin/time -f '%U %S' -o "$w/time" "$@" > "$w/out" 2> "$w/err" || {
		cat "$w/err" >&2; return 1; }
	cpu=$(awk '{ printf "%.3f", $1 + $2 }' "$w/time")
}

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

for prog in $programs; do
	"setup_$prog"
	d=$cache/$prog/bin
	rm -f "$w/db"
	: > "$w/ours" ; : > "$w/uf" ; : > "$w/plain" ; : > "$w/prof" ; : > "$w/write"
	: > "$w/ours-a" ; : > "$w/uf-a"
	for r in $(seq "$rounds"); do
		rm -rf "$w/md" "$w/ud" "$w/db" "$w/copy"
		cpu_of "$d/plain" "${args[@]}"; echo "$cpu" >> "$w/plain"; rm -f "$w/db"
		cpu_of "$mcloc" record -d "$w/md" -- "$d/ours" "${args[@]}"; echo "$cpu" >> "$w/ours"
		grep -E ' 0 lost$' "$w/err" >/dev/null || { echo "events lost: $(cat "$w/err")"; }
		rm -f "$w/db"
		cpu_of uftrace record -d "$w/ud" "$d/uftrace" "${args[@]}"; echo "$cpu" >> "$w/uf"
		rm -f "$w/db"
		cpu_of env MCLOC_TRACER=profile MCLOC_OUTPUT=/dev/null "$d/ours" "${args[@]}"
		echo "$cpu" >> "$w/prof"; rm -f "$w/db"
		mib=$(( $(cat "$w"/md/*.events | wc -c) >> 20 ))
		cpu_of dd if=/dev/zero of="$w/copy" bs=1M count="$mib" status=none
		echo "$cpu" >> "$w/write"; rm -f "$w/copy"
		rm -rf "$w/ma" "$w/ua"
		cpu_of "$mcloc" record -d "$w/ma" "${aspec[@]}" -- "$d/ours" "${args[@]}"
		echo "$cpu" >> "$w/ours-a"; rm -f "$w/db"
		cpu_of uftrace record -d "$w/ua" "${aspec[@]}" "$d/uftrace" "${args[@]}"
		echo "$cpu" >> "$w/uf-a"; rm -f "$w/db"
	done
	calls=$("$mcloc" report -d "$w/md" | awk 'NR > 2 { n += $2 } END { print n }')
	lost=$("$mcloc" info -d "$w/md" | awk '$1 == "lost:" { print $2 }')
	ours_b=$(du -sb "$w/md" | cut -f1) uf_b=$(du -sb "$w/ud" | cut -f1)
	o=$(median < "$w/ours") u=$(median < "$w/uf") p=$(median < "$w/plain")
	f=$(median < "$w/prof") wr=$(median < "$w/write")
	echo "== $prog: $calls calls traced, $lost events lost; medians of $rounds rounds (CPU s)"
	echo "   plain $p, ours $o, uftrace $u; profile (no events) $f; writing our bytes $wr"
	echo "   recording: ours $((ours_b >> 20)) MiB, uftrace $((uf_b >> 20)) MiB"
	awk -v o="$o" -v u="$u" -v p="$p" -v n="$calls" -v f="$f" -v wr="$wr" 'BEGIN {
		printf "   per call: ours %.1f ns, uftrace %.1f ns (above plain)\n",
			(o - p) * 1e9 / n, (u - p) * 1e9 / n
		printf "   ours/uftrace record = %.2f   (floor: (profile + writing)/uftrace = %.2f)\n",
			o / u, (f + wr) / u }'
	/usr/bin/time -f '%e %U %S' -o "$w/time" "$mcloc" replay -d "$w/md" > /dev/null
	# (Events: an entry and an exit per call.)
	awk -v s="$((2 * calls))" '{ printf "   mcloc replay: %.1f million events/s (%.1f s)\n", s / ($2 + $3) / 1e6, $2 + $3 }' "$w/time"
	acalls=$("$mcloc" report -d "$w/ma" | awk -v f="$afunc" '$1 == f { print $2 }')
	oa=$(median < "$w/ours-a") ua=$(median < "$w/uf-a")
	"$mcloc" replay -d "$w/ma" -F "$afunc" | grep -m1 "$afunc(" | sed 's/^/   e.g. /' || true
	awk -v oa="$oa" -v ua="$ua" -v o="$o" -v u="$u" -v n="$acalls" -v f="$afunc" 'BEGIN {
		printf "   %s, %d calls, with %s: CPU ours %s s, uftrace %s s\n", f, n, "-A/-R", oa, ua
		printf "   per captured call (above the plain recording): ours %.1f ns, uftrace %.1f ns; ours/uftrace = %.2f\n",
			(oa - o) * 1e9 / n, (ua - u) * 1e9 / n, (oa - o) / (ua - u) }'
done
