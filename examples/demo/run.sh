#!/usr/bin/env bash
# make demo: build the example with -pg -mfentry, run recordmcount after
# each cc as a Makefile would, link it through objpatch link, and show what
# the image's table holds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
rm_=$build/recordmcount/recordmcount
op=$build/objpatch/objpatch
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$here"
for c in main.c fib.c stats.c; do
	o=$out/${c%.c}.o
	echo "\$ cc -O2 -pg -mfentry -c $c -o ${c%.c}.o && recordmcount ${c%.c}.o"
	cc -O2 -pg -mfentry -c "$c" -o "$o"
	"$rm_" --print "$o" | sed "s|$out/||"
done
echo
echo "\$ objpatch check *.o && echo clean"
"$op" check "$out"/*.o && echo clean
echo
echo "\$ objpatch link -v --nop --runtime --check -- cc *.o -o demo"
"$op" link -v --nop --runtime --check -- cc "$out"/*.o -o "$out/demo" 2>&1 | sed "s|$out/||"
echo
echo "\$ objpatch inspect demo     # every site of the linked program, decoded"
"$op" inspect "$out/demo" | sed "s|$out/||"
echo
echo "\$ ./demo"
"$out/demo"
