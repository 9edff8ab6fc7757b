#!/usr/bin/env bash
# kmod-count.sh ARCH [TOOL ARGS...]: what kmod-oracle checks, but counting
# every module (kmod-oracle stops at its first mismatch: it runs under
# set -e -o pipefail and `diff | head` fails).  Uses kmod-oracle's cache
# and prints "ARCH: N passed, M failed" and the first differing modules.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
a=${1:?usage: kmod-count.sh ARCH [TOOL ARGS...]}; shift
[ $# -gt 0 ] || set -- "$here/build/recordmcount/recordmcount" --kernel
c=${MCLOC_KMOD_CACHE:-$HOME/.cache/mcloc-kmod}/$a
[ -d "$c/stripped" ] || { echo "no $a corpus: run ../shared/oracle/kmod-oracle --arch $a --limit 1 -- true"; exit 2; }
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
mkdir "$w/o" "$w/g"
cp "$c"/stripped/* "$w/o/"
for m in "$w"/o/*; do "$@" "$m" >/dev/null 2>&1; done
/usr/bin/python3 "$here/tests/lib/mctable.py" --out-dir "$w/g" "$w"/o/*
p=0 f=0
for m in $(ls "$c/stripped"); do
	if cmp -s "$c/expected/$m.txt" "$w/g/$m.txt"; then p=$((p + 1)); else f=$((f + 1)); echo "DIFF $m"; fi
done > "$w/diffs"
head -10 "$w/diffs"
echo "$a: $p passed, $f failed"
