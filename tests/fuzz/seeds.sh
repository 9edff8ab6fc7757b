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
# libmcloc's readers of an image (fuzz-tables): entries at the sites of
# the harness's text block (a 29-byte pattern: nop5, nop6, call, parked),
# and the files above for the name reader: with .symtab, stripped (so
# .mcloc_names), and a shared library (.dynsym).
rm -f "$here"/corpus/tables/seed-* "$here"/corpus/control/seed-*
strip -o "$w/prog.stripped" "$w/prog"
entries() { /usr/bin/python3 -c 'import struct,sys; v=[int(a) for a in sys.argv[1:]]; sys.stdout.buffer.write(bytes([len(v)])+b"".join(struct.pack("<i",x) for x in v))' "$@"; }
for f in prog prog.stripped x86_64.so; do
	[ -f "$w/$f" ] || continue
	{ entries 0 5 11 16 29 34 40 45 -4 100000 1879048192 -2147483648; cat "$w/$f"; } > "$here/corpus/tables/seed-$f"
done
{ entries 0 29 58; } > "$here/corpus/tables/seed-none"

# The control protocol (fuzz-control): each malformed request of
# tests/lib/control-client.py, and well-formed conversations.
/usr/bin/python3 - "$here/../lib/control-client.py" "$here/corpus/control" <<'PY'
import importlib.util, struct, sys
spec = importlib.util.spec_from_file_location("cc", sys.argv[1])
cc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cc)
out = sys.argv[2]
for i, (what, m) in enumerate(cc.CASES):
    open("%s/seed-malformed-%02d" % (out, i), "wb").write(m)
tr = lambda tracer, flags=0, globs=b"\0\0\0": cc.msg(cc.REQ_TRACE, cc.TRACE.pack(tracer, 4, 2, 0, 0, flags) + globs)
convs = {
    "hello": cc.msg(cc.REQ_HELLO),
    "ask-all": cc.msg(cc.REQ_HELLO) + cc.msg(cc.REQ_FUNCS, b"*\0") + cc.msg(cc.REQ_ENABLED)
               + cc.msg(cc.REQ_STATS) + cc.msg(8),
    "addrs": cc.msg(cc.REQ_ADDRS, struct.pack("<3Q", 0, 0x401000, 0x7fffffffffff)),
    "trace-function": tr(1) + cc.msg(cc.REQ_STATS) + cc.msg(cc.REQ_STOP),
    "trace-graph": tr(2, 1, b"*\0\0main\0") + cc.msg(cc.REQ_STOP),
    "trace-twice": tr(1) + tr(2),
    "split": cc.msg(cc.REQ_HELLO)[:7],
}
for name, m in convs.items():
    open("%s/seed-%s" % (out, name), "wb").write(m)
PY
ls "$here"/corpus/recordmcount | wc -l | sed 's/$/ recordmcount seeds/'
ls "$here"/corpus/objpatch | wc -l | sed 's/$/ objpatch seeds/'
for h in tables control; do ls "$here/corpus/$h" | wc -l | sed "s/\$/ $h seeds/"; done
du -sh "$here/corpus"
