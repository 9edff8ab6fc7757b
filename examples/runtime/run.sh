#!/usr/bin/env bash
# make demo, part two: a multi-threaded program built through the whole
# toolchain (-pg -mfentry, recordmcount, objpatch link --nop --runtime),
# traced with libmcloc while its threads run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
[ "$(uname -m)" = x86_64 ] || { echo "(the live patcher is x86_64-only so far)"; exit 0; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "\$ cc -O2 -pg -mfentry -c app.c && recordmcount app.o"
cc -O2 -pg -mfentry -c "$here/app.c" -o "$out/app.o"
"$build/recordmcount/recordmcount" "$out/app.o"
cc -O2 -I"$here/../../include" -c "$here/main.c" -o "$out/main.o"
echo "\$ objpatch link --nop --runtime -- cc main.o app.o -lmcloc -o app"
"$build/objpatch/objpatch" link --nop --runtime -- cc "$out/main.o" "$out/app.o" \
	-L"$build/libmcloc" -lmcloc -lpthread -o "$out/app"
echo "\$ ./app"
LD_LIBRARY_PATH=$build/libmcloc "$out/app"
