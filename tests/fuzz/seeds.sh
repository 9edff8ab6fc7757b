#!/usr/bin/env bash
# Make the seed corpora of tests/fuzz from real objects: the test
# fixtures compiled for every architecture a cross compiler is installed
# for (-pg, -pg -mfentry, -fpatchable-function-entry, with and without
# -ffunction-sections), and linked images made by recordmcount and
# objpatch link from them.  Each seed ends with a byte that picks the
# harness's options (see each harness): an ELF file does not mind bytes
# after its end, so one object seeds several jobs.
# Usage: seeds.sh BUILD_DIR   (writes corpus/*/seed-*, replacing them)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:?usage: seeds.sh BUILD_DIR}" && pwd)
rc=$build/recordmcount/recordmcount op=$build/objpatch/objpatch
fix=$here/../fixtures
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
rm -f "$here"/corpus/recordmcount/seed-* "$here"/corpus/objpatch/seed-*

# seed HARNESS NAME FILE BYTE...: FILE followed by each BYTE, one seed each.
seed() {
	local h=$1 name=$2 file=$3 b
	shift 3
	for b in "$@"; do
		{ cat "$file"; printf "\\x$b"; } > "$here/corpus/$h/seed-$name-$b"
	done
}

# arch cc flags-for-mcount
while read -r arch cc flags; do
	command -v "$cc" >/dev/null || { echo "seeds: no $cc, $arch skipped" >&2; continue; }
	for v in "pg:$flags" "pfe:-fpatchable-function-entry=2" "fs:$flags -ffunction-sections"; do
		tag=${v%%:*} f=${v#*:}
		$cc -O2 $f -c "$fix/shapes.c" -o "$w/$arch-$tag.o" 2>/dev/null || continue
		seed recordmcount "$arch-$tag" "$w/$arch-$tag.o" 00 03 14 40 80 c0
	done
	# A linked image with its table, for objpatch.
	if $cc -O2 $flags -c "$fix/link/lib.c" -o "$w/$arch-lib.o" 2>/dev/null &&
	   $cc -O2 $flags -c "$fix/link/util.c" -o "$w/$arch-util.o" 2>/dev/null &&
	   "$rc" "$w/$arch-lib.o" "$w/$arch-util.o" 2>/dev/null &&
	   $cc -nostdlib -shared -Wl,-z,max-page-size=4096,-z,noseparate-code "$w/$arch-lib.o" "$w/$arch-util.o" -o "$w/$arch.so" 2>/dev/null; then
		seed objpatch "$arch-so" "$w/$arch.so" 00 01 02 03 04 05 06 0b 13 14 16
	fi
done <<'ARCHES'
x86_64 gcc -pg -mfentry
i386 i686-linux-gnu-gcc -pg
aarch64 aarch64-linux-gnu-gcc -pg
riscv64 riscv64-linux-gnu-gcc -pg
arm arm-linux-gnueabihf-gcc -pg
ppc64le powerpc64le-linux-gnu-gcc -pg
s390x s390x-linux-gnu-gcc -pg -mfentry
mips64el mips64el-linux-gnuabi64-gcc -pg
ARCHES

# A program linked by objpatch link, with its run-time descriptor.
gcc -O2 -pg -mfentry -c "$fix/link/main.c" -o "$w/main.o"
gcc -O2 -pg -mfentry -c "$fix/link/util.c" -o "$w/util.o"
gcc -O2 -pg -mfentry -c "$fix/link/lib.c" -o "$w/lib.o"
"$rc" "$w/main.o" "$w/util.o" "$w/lib.o"
"$op" link --nop --runtime -- gcc -Wl,-z,max-page-size=4096,-z,noseparate-code "$w/main.o" "$w/util.o" "$w/lib.o" -o "$w/prog"
seed objpatch x86_64-runtime "$w/prog" 00 01 02 03 04 05 06 13
ls "$here"/corpus/recordmcount | wc -l | sed 's/$/ recordmcount seeds/'
ls "$here"/corpus/objpatch | wc -l | sed 's/$/ objpatch seeds/'
du -sh "$here/corpus"
