#!/usr/bin/env bash
# make demo, part two: a multi-threaded program built through the whole
# toolchain (recordmcount or the compiler's patchable entries, objpatch
# link --nop --runtime), traced with libmcloc while its threads run.
#
#   run.sh [BUILD]                 natively (x86_64)
#   run.sh BUILD ARCH LIBDIR       aarch64 or riscv64, with Debian's cross
#                                  compiler, under qemu-user, against the
#                                  libmcloc built for ARCH in LIBDIR
#                                  (make demo-cross builds it)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
arch=${2:-$(uname -m)}
libdir=${3:-$build/libmcloc}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Each architecture's flags for traced code (man/libmcloc.3, BUILDING).
case $arch in
x86_64)
	cc=cc run=()
	flags=(-pg -mfentry) record=1 ;;
aarch64)
	cc=aarch64-linux-gnu-gcc run=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
	flags=(-fpatchable-function-entry=4,2 -falign-functions=8) record= ;;
riscv64)
	cc=riscv64-linux-gnu-gcc run=(qemu-riscv64 -L /usr/riscv64-linux-gnu)
	flags=(-fpatchable-function-entry=8,4 -falign-functions=8) record= ;;
*)
	echo "(no live patcher for $arch)"; exit 0 ;;
esac
[ "$arch" != x86_64 ] || [ "$(uname -m)" = x86_64 ] ||
	{ echo "(run natively on x86_64, or name an architecture)"; exit 0; }

echo "\$ $cc -O2 ${flags[*]} -c app.c${record:+ && recordmcount app.o}"
$cc -O2 "${flags[@]}" -c "$here/app.c" -o "$out/app.o"
[ -z "$record" ] || "$build/recordmcount/recordmcount" "$out/app.o"
$cc -O2 -I"$here/../../include" -c "$here/main.c" -o "$out/main.o"
echo "\$ objpatch link --nop --runtime -- $cc main.o app.o -lmcloc -o app"
"$build/objpatch/objpatch" link --nop --runtime -- $cc "$out/main.o" "$out/app.o" \
	-L"$libdir" -lmcloc -lpthread -o "$out/app"
echo "\$ ${run[*]:+${run[*]} }./app"
LD_LIBRARY_PATH=$libdir "${run[@]}" "$out/app"
