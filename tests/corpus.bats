#!/usr/bin/env bats
# Real, distribution-built kernel modules: an optional check.  The corpora
# are Debian's module packages, which this suite never downloads itself:
#   tests/corpus/fetch.sh         amd64, i386, armhf, mips64el, tables stripped
#   tests/corpus/fetch-extra.sh   arm64 (__patchable_function_entries) and
#                                 s390x (GCC's NOPed sites), unpacked
# Each test skips, saying why, when its corpus is not on this machine.
load helpers

CACHE=${MCLOC_KMOD_CACHE:-$HOME/.cache/mcloc-kmod}

need_corpus() {
	[ -d "$CACHE/$1" ] || skip "no $1 module corpus in $CACHE (see the header of this file)"
}

# Regenerate the tables of a stripped corpus, then check every module and
# count every table with inspect -j.
regenerate_and_check() {
	need_corpus "$1"
	cp "$CACHE/$1"/stripped/*.ko "$T/"
	"$RECORDMCOUNT" --kernel "$T"/*.ko
	run "$OBJPATCH" check "$T"/*.ko
	assert_success
	ls "$T"/*.ko > "$T/list"
	run $PY "$SRC/tests/lib/inspect_counts.py" "$OBJPATCH" "$T/list" --expected-dir "$CACHE/$1/expected"
	assert_success
}

@test "amd64: check is clean and inspect counts every table, on all modules" { regenerate_and_check amd64; }
@test "i386 (REL): check is clean and inspect counts every table, on all modules" { regenerate_and_check i386; }

check_extra() {
	local a=$1 state=$2
	[ -d "$CACHE/extra/$a/x" ] || skip "no $a kernel image under $CACHE/extra (tests/corpus/fetch-extra.sh)"
	find "$CACHE/extra/$a/x" -name '*.ko' | sort > "$T/list"
	run xargs -a "$T/list" "$OBJPATCH" check
	assert_success
	run $PY "$SRC/tests/lib/inspect_counts.py" "$OBJPATCH" "$T/list" --state "$state"
	assert_success
}

@test "arm64: every __patchable_function_entries entry is a patchable NOP pair; check clean" { check_extra arm64 patchable; }
@test "s390x (big-endian): every entry is a NOP GCC wrote; check clean" { check_extra s390x nop; }

@test "check finds every defect planted in a copy of a real module" {
	need_corpus amd64
	m=$CACHE/amd64/stripped/6.1.0-56-amd64_kernel_crypto_michael_mic.ko
	[ -f "$m" ] || m=$(ls "$CACHE"/amd64/stripped/*michael_mic.ko | head -1)
	cp "$m" "$T/mod.ko"
	"$RECORDMCOUNT" --kernel "$T/mod.ko"
	run "$OBJPATCH" check "$T/mod.ko"
	assert_success
	assert_finds_planted "$T/mod.ko"
}
