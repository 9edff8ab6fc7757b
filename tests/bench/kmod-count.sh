#!/usr/bin/env bash
# kmod-count.sh ARCH [TOOL ARGS...]: what kmod-oracle checks, but counting
# every module (kmod-oracle stops at its first mismatch: it runs under
# set -e -o pipefail and `diff | head` fails).  Uses kmod-oracle's cache
# and prints "ARCH: N passed, M failed" and the first differing modules.
# Each differing module is also given to the kernel's own recordmcount
# (linux-kbuild), from the same stripped copy: when it makes our table
# too, the expectation is one that tool cannot reproduce from a linked
# module either (mips64el's cross-object pair filter: see README).
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
a=${1:?usage: kmod-count.sh ARCH [TOOL ARGS...]}; shift
[ $# -gt 0 ] || set -- "$here/build/recordmcount/recordmcount" --kernel
c=${MCLOC_KMOD_CACHE:-$HOME/.cache/mcloc-kmod}/$a
[ -d "$c/stripped" ] || { echo "no $a corpus: run tests/corpus/fetch.sh $a"; exit 2; }
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
mkdir "$w/o" "$w/g"
cp "$c"/stripped/* "$w/o/"
for m in "$w"/o/*; do "$@" "$m" >/dev/null 2>&1; done
/usr/bin/python3 "$here/tests/lib/mctable.py" --out-dir "$w/g" "$w"/o/*
p=0 f=0
krm=$(ls /usr/lib/linux-kbuild-*/scripts/recordmcount 2>/dev/null | tail -1)
p=0 f=0 same=0
mkdir "$w/k"
for m in $(ls "$c/stripped"); do
	if cmp -s "$c/expected/$m.txt" "$w/g/$m.txt"; then p=$((p + 1)); continue; fi
	f=$((f + 1))
	peer=""
	if [ -n "$krm" ]; then
		cp "$c/stripped/$m" "$w/k/$m"
		"$krm" "$w/k/$m" >/dev/null 2>&1
		/usr/bin/python3 "$here/tests/lib/mctable.py" --out-dir "$w/k" "$w/k/$m"
		if cmp -s "$w/k/$m.txt" "$w/g/$m.txt"; then
			same=$((same + 1)); peer=" (the kernel's recordmcount makes our table too)"
		fi
	fi
	echo "DIFF $m$peer"
done > "$w/diffs"
head -10 "$w/diffs"
[ -n "$krm" ] && [ $f -gt 0 ] &&
	echo "$a: of the $f that differ, the kernel's own recordmcount makes $same exactly as we do"
echo "$a: $p passed, $f failed"
