#!/usr/bin/env bash
# make demo: build the example with -pg -mfentry, run recordmcount after
# each cc as a Makefile would, and show what it recorded.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
rm_=$build/recordmcount/recordmcount
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$here"
for c in main.c fib.c stats.c; do
	o=$out/${c%.c}.o
	echo "\$ cc -O2 -pg -mfentry -c $c -o ${c%.c}.o && recordmcount ${c%.c}.o"
	cc -O2 -pg -mfentry -c "$c" -o "$o"
	"$rm_" --print "$o" | sed "s|$out/||"
done
op=$build/objpatch/objpatch
echo
echo "\$ objpatch inspect stats.o     # each site, decoded"
"$op" inspect "$out/stats.o" | sed "s|$out/||"
echo "\$ objpatch check *.o && echo clean"
"$op" check "$out"/*.o && echo clean
cc "$out"/*.o -o "$out/demo"
echo "\$ ./demo"
"$out/demo"
