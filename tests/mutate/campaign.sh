#!/usr/bin/env bash
# A mutation campaign over objects and linked images of every architecture
# whose cross compiler is installed: build a corpus of good files
# (objects before and after recordmcount, shared objects, executables,
# vmlinux-like images), write COUNT mutants of them with a fixed SEED
# (tests/lib/mutate.py make), then run each mutant through every command of
# recordmcount and objpatch (tests/lib/mutate.py run), best under the
# ASan+UBSan build.  Prints the figures; exits 1 when any run crashed, hung,
# damaged its input or exited 0 with a table objpatch check rejects.
# Usage: campaign.sh BUILD_DIR [COUNT [SEED [JOBS [WORKDIR]]]]
# (see tests/mutate/README.md)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: campaign.sh BUILD_DIR [COUNT [SEED [JOBS [WORKDIR]]]]}" && pwd)
count=${2:-3000} seed=${3:-28} jobs=${4:-1} work=${5:-}
rc=$build/recordmcount/recordmcount op=$build/objpatch/objpatch
fix=$src/tests/fixtures
py=/usr/bin/python3
if [ -z "$work" ]; then
	work=$(mktemp -d)
	trap 'rm -rf "$work"' EXIT
fi
base=$work/base
rm -rf "$base" "$work/mutants" "$work/ccmap"
mkdir -p "$base" "$work/tmp"

# Every candidate call of an image must call something: a stub for each
# mcount symbol, built without -pg, lets an executable link with no libc.
cat > "$work/tmp/stub.c" <<'EOF'
void mcount(void) {}
void _mcount(void) {}
void __fentry__(void) {}
void __gnu_mcount_nc(void) {}
EOF

# corpus NAME CC FLAGS...: NAME's objects, shared object and executable.
# A step a toolchain cannot do is left out with a line on standard error.
corpus() {
	local name=$1 cc=$2 t=$work/tmp/$1
	shift 2
	command -v "$cc" >/dev/null || { echo "campaign: no $cc, $name left out" >&2; return 0; }
	mkdir -p "$t"
	"$cc" -O2 "$@" -c "$fix/shapes.c" -o "$base/$name-raw.o"
	cp "$base/$name-raw.o" "$base/$name-rec.o"
	"$rc" "$base/$name-rec.o"
	"$cc" -O2 "$@" -ffunction-sections -c "$fix/link/util.c" -o "$base/$name-fs-raw.o"
	"$rc" -g -o "$base/$name-fs-rec.o" "$base/$name-fs-raw.o"
	"$cc" -O2 "$@" -c "$fix/link/lib.c" -o "$t/lib.o"
	"$cc" -O2 "$@" -c "$fix/link/util.c" -o "$t/util.o"
	"$cc" -O2 $(filter_abi "$@") -c "$work/tmp/stub.c" -o "$t/stub.o"
	"$rc" "$t/lib.o" "$t/util.o"
	# How the campaign links a mutant object: the linker itself (the
	# driver's two extra processes cost more than the rest of the run),
	# into an executable with the stub.
	local ld=${cc%gcc}ld
	case " $* " in *" -mabi=32 "*) ld="$ld -m elf32ltsmip" ;; esac
	printf '%s\t%s\n' "$name" "$ld -static -e 0 $t/stub.o" >> "$work/ccmap"
	local ldf="-Wl,-z,max-page-size=4096,-z,noseparate-code"
	# ppc64le cannot call an undefined _mcount without a TOC restore, and
	# MIPS's non-PIC calls cannot reach one: those link the stub too.
	"$op" link -- "$cc" $(filter_abi "$@") -nostdlib -shared $ldf "$t/lib.o" "$t/util.o" -o "$base/$name.so" 2>/dev/null ||
	"$op" link -- "$cc" $(filter_abi "$@") -nostdlib -shared $ldf "$t/lib.o" "$t/util.o" "$t/stub.o" -o "$base/$name.so" ||
		echo "campaign: $name: no shared object" >&2
	"$op" link -- "$cc" $(filter_abi "$@") -nostdlib -no-pie -static -Wl,-e,lib_sum $ldf \
		"$t/lib.o" "$t/util.o" "$t/stub.o" -o "$base/$name.exe" ||
		echo "campaign: $name: no executable" >&2
}

# The options of FLAGS that say which ABI, for the stub and the links.
filter_abi() {
	local a
	for a in "$@"; do
		case $a in -pg|-mfentry|-mprofile-kernel|-mrecord-mcount) ;; *) printf '%s\n' "$a" ;; esac
	done
}

# kimage ARCH CC LD CFLAGS LDFLAGS: a vmlinux-like image with __ex_table
# (tests/lib/gen-ktables.py), and on x86_64 __mcount_loc.
kimage() {
	local arch=$1 cc=$2 ld=$3 cflags=$4 ldflags=$5 d=$work/tmp/k-$1
	command -v "$cc" >/dev/null || return 0
	[ "$cflags" != - ] || cflags=
	[ "$ldflags" != - ] || ldflags=
	$py "$src/tests/lib/gen-ktables.py" "$d" "$arch" 24
	"$cc" -O0 -fno-pie -fno-asynchronous-unwind-tables $cflags -c "$d/k.c" -o "$d/k.o"
	"$ld" $ldflags -T "$d/k.lds" "$d/k.o" -o "$base/$arch-ktables.vmlinux"
}

while read -r name cc flags; do
	corpus "$name" "$cc" $flags
done <<'ARCHES'
x86_64 gcc -pg -mfentry
x86_64-mcount gcc -pg
x86_64-pfe gcc -fpatchable-function-entry=5
i386 i686-linux-gnu-gcc -pg
aarch64 aarch64-linux-gnu-gcc -pg
aarch64-pfe aarch64-linux-gnu-gcc -fpatchable-function-entry=2
arm arm-linux-gnueabihf-gcc -pg -marm
thumb2 arm-linux-gnueabihf-gcc -pg -mthumb
riscv64 riscv64-linux-gnu-gcc -pg
ppc64le powerpc64le-linux-gnu-gcc -pg -mprofile-kernel
s390x s390x-linux-gnu-gcc -pg -mfentry
mips64el mips64el-linux-gnuabi64-gcc -pg -mno-abicalls -fno-pic
mips mips64el-linux-gnuabi64-gcc -pg -mno-abicalls -fno-pic -mabi=32 -march=mips32r2
ARCHES

while read -r arch cc ld cflags ldflags; do
	kimage "$arch" "$cc" "$ld" "${cflags//,/ }" "${ldflags//,/ }"
done <<'KARCHES'
x86_64 gcc ld - --emit-relocs
i386 i686-linux-gnu-gcc i686-linux-gnu-ld - -
aarch64 aarch64-linux-gnu-gcc aarch64-linux-gnu-ld - -
riscv64 riscv64-linux-gnu-gcc riscv64-linux-gnu-ld -mno-relax -
s390x s390x-linux-gnu-gcc s390x-linux-gnu-ld - -
ppc64le powerpc64le-linux-gnu-gcc powerpc64le-linux-gnu-ld - -
arm arm-linux-gnueabihf-gcc arm-linux-gnueabihf-ld - -
mips64el mips64el-linux-gnuabi64-gcc mips64el-linux-gnuabi64-ld -fno-pic,-mno-abicalls -
mips mips64el-linux-gnuabi64-gcc mips64el-linux-gnuabi64-ld -fno-pic,-mno-abicalls,-mabi=32,-march=mips32r2 -m,elf32ltsmip
KARCHES

# The kernel's shape of __mcount_loc: collected into .init.data between
# __start_mcount_loc and __stop_mcount_loc, out of address order.
$py "$src/tests/lib/gen-image.py" "$work/tmp/vm" 40
gcc -O0 -pg -mfentry -fno-pie -c "$work/tmp/vm/gen.c" -o "$work/tmp/vm/gen.o"
"$rc" "$work/tmp/vm/gen.o"
ld -T "$work/tmp/vm/vmlinux.lds" "$work/tmp/vm/gen.o" -o "$base/x86_64-mcount.vmlinux"

# A program with libc, linked by objpatch link with its run-time
# descriptor and names, whole and stripped.
t=$work/tmp/prog
mkdir -p "$t"
for c in main util lib; do
	gcc -O2 -pg -mfentry -c "$fix/link/$c.c" -o "$t/$c.o"
	"$rc" "$t/$c.o"
done
"$op" link --nop --runtime -- gcc -Wl,-z,max-page-size=4096,-z,noseparate-code \
	"$t/main.o" "$t/util.o" "$t/lib.o" -o "$base/x86_64-runtime.pie"
strip -o "$base/x86_64-runtime-stripped.pie" "$base/x86_64-runtime.pie"

echo "campaign: $(ls "$base" | wc -l) good files in the corpus, $(du -sh "$base" | cut -f1)"
$py "$src/tests/lib/mutate.py" make "$base" "$work/mutants" "$count" "$seed"
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
$py "$src/tests/lib/mutate.py" run --rc "$rc" --op "$op" --jobs "$jobs" --ccmap "$work/ccmap" \
	--tmp "$work/tmp" --log "$work/campaign.log" "$base" "$work/mutants"
