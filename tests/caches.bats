#!/usr/bin/env bats
# The README's recipes for compiler caches and distributed builds, run for
# real: recordmcount (and objpatch link) stand outside the launcher, so
# that the cache holds the compiler's own objects and the recording is
# redone on every hit.  ccache in its default and hard_link modes and
# sccache build twice (the second build all hits), distcc compiles through
# a distccd that the test starts on localhost.  Each time the objects and
# the linked program must be recorded, clean, and equal a local build's,
# and every object the cache holds must stay the compiler's, byte for byte.
load helpers

setup() {
	T=$(mktemp -d "$BATS_RUN_TMPDIR/t.XXXXXX")
	PATH=$(dirname "$RECORDMCOUNT"):$(dirname "$OBJPATCH"):$PATH
	mkdir "$T/src"
	printf 'int f(int a) { return a + 1; }\nint g(int a) { return f(a) * 2; }\n' > "$T/src/u.c"
	printf '#include <stdio.h>\nint g(int);\nint main(void) { printf("%%d\\n", g(20)); return 0; }\n' \
		> "$T/src/m.c"
	LIBDIR=${MCLOC_LIBDIR:-$MCLOC_BUILD/libmcloc}
}

teardown() {
	if [ -n "${SCCACHE_DIR:-}" ]; then
		sccache --stop-server >/dev/null 2>&1 || true
	fi
	if [ -n "${DISTCCD_PID:-}" ]; then
		kill "$DISTCCD_PID" 2>/dev/null || true
		wait "$DISTCCD_PID" 2>/dev/null || true
	fi
}

# build DIR [LAUNCHER...]: the README's chain, with LAUNCHER before gcc,
# compiles the sources into $T/DIR (one object named by -o, one by
# default) and links them into $T/DIR/prog.
build() {
	local dir=$T/$1; shift
	local cc="recordmcount -g -- objpatch link --nop --runtime -- $* gcc"

	mkdir -p "$dir"
	cp "$T"/src/*.c "$dir/"
	(
		cd "$dir"
		$cc -O2 -pg -mfentry -c u.c -o u.o
		$cc -O2 -pg -mfentry -c m.c
		$cc u.o m.o -o prog -L"$LIBDIR" -Wl,-rpath,"$LIBDIR" -lmcloc
	)
}

# same_as_local DIR: its objects and program are recorded, NOPed, clean,
# and byte for byte the local build's.
same_as_local() {
	[ -d "$T/local" ] || build local
	for f in u.o m.o prog; do
		readelf -SW "$T/$1/$f" | grep -q __mcount_loc
		cmp "$T/local/$f" "$T/$1/$f"
	done
	run "$OBJPATCH" check "$T/$1"/u.o "$T/$1"/m.o "$T/$1"/prog
	assert_success
	run "$OBJPATCH" -j inspect "$T/$1/prog"
	assert_output --regexp '"call": ?0,'
	refute_output --regexp '"nop": ?0,'
	run env LD_PRELOAD="$(san_preload)" ASAN_OPTIONS=detect_leaks=0 "$T/$1/prog"
	assert_output 42
}

# sums DIR FIND-ARGS...: a checksum line for each file of DIR that FIND-ARGS
# select, in name order.
sums() {
	local dir=$1; shift
	find "$dir" -type f "$@" -print0 | sort -z | xargs -0r sha256sum
}

# free_port: a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
	$PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ccache_stat NAME: the counter NAME of ccache's statistics.
ccache_stat() {
	ccache --print-stats | awk -v n="$1" '$1 == n { print $2 }'
}

# ccache_recipe: two builds through ccache, the second all hits.
ccache_recipe() {
	need ccache
	export CCACHE_DIR=$T/ccache CCACHE_CONFIGPATH=$T/ccache.conf
	: > "$CCACHE_CONFIGPATH"
	build miss ccache
	[ "$(ccache_stat cache_miss)" -eq 2 ]
	# (Result files, and the raw objects of hard_link mode.)
	sums "$CCACHE_DIR" \( -name '*R' -o -name '*W' \) > "$T/before"
	[ -s "$T/before" ]
	ccache -z >/dev/null
	build hit ccache
	[ "$(ccache_stat direct_cache_hit) $(ccache_stat preprocessed_cache_hit)" = "2 0" ]
	[ "$(ccache_stat cache_miss)" -eq 0 ]
	sums "$CCACHE_DIR" \( -name '*R' -o -name '*W' \) > "$T/after"
	diff "$T/before" "$T/after"
	same_as_local miss
	same_as_local hit
	# What the cache serves is still the compiler's own object.
	cd "$T/hit"
	gcc -O2 -pg -mfentry -c u.c -o plain.o
	ccache gcc -O2 -pg -mfentry -c u.c -o served.o
	cmp plain.o served.o
}

@test "ccache, default mode: recordmcount outside it; the cache keeps the compiler's objects" {
	ccache_recipe
}

@test "ccache, hard_link mode: the cache's linked objects stay the compiler's" {
	export CCACHE_HARDLINK=1 CCACHE_NOCOMPRESS=1
	ccache_recipe
	# hard_link mode really was in use: a hit is the cache's own file,
	# and the raw objects there are the compiler's.
	[ "$(stat -c %h "$T/hit/served.o")" -eq 2 ]
	n=0
	while read -r f; do
		cmp "$f" "$T/hit/plain.o" && n=$((n + 1))
	done < <(find "$CCACHE_DIR" -type f -name '*W')
	[ "$n" -ge 1 ]
}

@test "sccache: recordmcount outside it; the cache keeps the compiler's objects" {
	need sccache
	export SCCACHE_DIR=$T/sccache SCCACHE_CONF=$T/sccache.conf SCCACHE_SERVER_PORT=$(free_port)
	unset SCCACHE_LOG RUSTC_WRAPPER
	: > "$SCCACHE_CONF"
	# (The server outlives the call: it must not hold bats' descriptors.)
	sccache --start-server >/dev/null 2>&1 3>&-
	build miss sccache
	sums "$SCCACHE_DIR" > "$T/before"
	[ -s "$T/before" ]
	sccache --zero-stats >/dev/null
	build hit sccache
	sccache --show-stats --stats-format=json > "$T/stats"
	$PY - "$T/stats" <<-'PY'
		import json, sys
		s = json.load(open(sys.argv[1]))["stats"]
		hits = sum(s["cache_hits"]["counts"].values())
		misses = sum(s["cache_misses"]["counts"].values())
		assert (hits, misses) == (2, 0), s
	PY
	sums "$SCCACHE_DIR" > "$T/after"
	diff "$T/before" "$T/after"
	same_as_local miss
	same_as_local hit
}

@test "distcc: recordmcount outside it; objects compiled by a local distccd" {
	need distcc
	need distccd
	local port
	port=$(free_port)
	# (--no-detach: its pid is ours to stop; as root it serves as user
	# distcc, so the shell opens its log.)
	distccd --daemon --no-detach --log-stderr --log-level=info --listen 127.0.0.1 \
		--port "$port" --allow 127.0.0.1 </dev/null >/dev/null 2>"$T/distccd.log" 3>&- &
	DISTCCD_PID=$!
	for _ in $(seq 100); do
		grep -q 'listening on' "$T/distccd.log" && break
		sleep 0.1
	done
	grep -q 'listening on' "$T/distccd.log"
	# (No fallback to a local compile: each must go through distccd.)
	export DISTCC_HOSTS=127.0.0.1:$port DISTCC_FALLBACK=0 DISTCC_SKIP_LOCAL_RETRY=1 \
		DISTCC_DIR=$T/distcc
	mkdir "$DISTCC_DIR"
	build dist distcc
	[ "$(grep -c 'COMPILE_OK.* [um]\.c$' "$T/distccd.log")" -eq 2 ] || { cat "$T/distccd.log"; false; }
	same_as_local dist
}
