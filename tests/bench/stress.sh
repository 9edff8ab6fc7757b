#!/usr/bin/env bash
# The libmcloc stress test (tests/fixtures/runtime/stress.c) for longer
# than make check runs it.  Usage: stress.sh [SECONDS [MIN_CYCLES [NFUNCS]]]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$here/build}
secs=${1:-600} cycles=${2:-20000} n=${3:-10000}
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
/usr/bin/python3 "$here/tests/fixtures/runtime/gen.py" "$w/gen.c" "$n"
cc -O1 -pg -mfentry -c "$w/gen.c" -o "$w/gen.o"
"$build/recordmcount/recordmcount" "$w/gen.o"
cc -O1 -I"$here/include" -c "$here/tests/fixtures/runtime/stress.c" -o "$w/stress.o"
"$build/objpatch/objpatch" link --nop --runtime --check -- cc "$w/stress.o" "$w/gen.o" \
	-o "$w/stress" -L"$build/libmcloc" -lmcloc -lpthread
LD_LIBRARY_PATH=$build/libmcloc "$w/stress" "$secs" "$cycles"
