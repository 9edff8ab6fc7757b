#!/usr/bin/env bats
# The kernel's other build-time sorted tables: __ex_table on every
# architecture objpatch knows, and ORC on x86_64 (from linux-kbuild's own
# objtool --orc).  Each image (tests/lib/gen-ktables.py) is linked out of
# order, as a kernel is, then shuffled at random; objpatch sort must
# restore the order that an independent reader (tests/lib/ktables.py)
# checks, keep every entry, and clear main_extable_sort_needed.  Where
# linux-source-6.1 and linux-source-6.12 are installed, each kernel's own
# scripts/sorttable is built from it and objpatch sort --kernel (and
# objpatch as sorttable) must give its bytes exactly, on images built as
# that kernel builds them (gen-ktables.py VERSION: 6.12's ORC layout with
# its .orc_header, replaced weak functions, arm64's relocation addends).

load helpers

KT="$PY $SRC/tests/lib/ktables.py"
OBJTOOL=$(ls /usr/lib/linux-kbuild-*/tools/objtool/objtool 2>/dev/null | sort -V | tail -1)

# toolchain ARCH: sets CC, LD, CFLAGS and LDFLAGS for ARCH, or skips.
toolchain() {
	CFLAGS="-O0 -fno-pie -fno-asynchronous-unwind-tables"
	LDFLAGS=
	case $1 in
	x86_64) CC=gcc LD=ld LDFLAGS=--emit-relocs ;;
	i386) CC=i686-linux-gnu-gcc LD=i686-linux-gnu-ld ;;
	aarch64) CC=aarch64-linux-gnu-gcc LD=aarch64-linux-gnu-ld ;;
	riscv64) CC=riscv64-linux-gnu-gcc LD=riscv64-linux-gnu-ld CFLAGS="$CFLAGS -mno-relax" ;;
	s390x) CC=s390x-linux-gnu-gcc LD=s390x-linux-gnu-ld ;;
	ppc64le) CC=powerpc64le-linux-gnu-gcc LD=powerpc64le-linux-gnu-ld ;;
	arm) CC=arm-linux-gnueabihf-gcc LD=arm-linux-gnueabihf-ld ;;
	mips64el) CC=mips64el-linux-gnuabi64-gcc LD=mips64el-linux-gnuabi64-ld
		CFLAGS="$CFLAGS -fno-pic -mno-abicalls" ;;
	mips) CC=mips64el-linux-gnuabi64-gcc LD=mips64el-linux-gnuabi64-ld
		CFLAGS="$CFLAGS -fno-pic -mno-abicalls -mabi=32 -march=mips32r2"
		LDFLAGS="-m elf32ltsmip" ;;
	esac
	need "$CC"
}

# image ARCH [VERSION]: $BATS_FILE_TMPDIR/ARCH/vmlinux as Linux VERSION
# (6.1, the default, or 6.12: in ARCH-6.12/) builds it, built once; and
# its System.map, which 6.1's sorttable reads for __mcount_loc, and the
# nm -S listing that 6.12's link-vmlinux.sh gives its sorttable -s.
image() {
	local v=${2:-6.1} d=$BATS_FILE_TMPDIR/$1
	[ "$v" = 6.1 ] || d=$d-$v
	toolchain "$1"
	[ -f "$d/vmlinux" ] && return 0
	$PY "$SRC/tests/lib/gen-ktables.py" "$d" "$1" 400 "$v"
	$CC $CFLAGS -c "$d/k.c" -o "$d/k.o"
	local objs=$d/k.o ldflags=$LDFLAGS
	if [ -f "$d/w.c" ]; then
		$CC $CFLAGS -c "$d/w.c" -o "$d/w.o"
		objs="$d/w.o $objs"
	fi
	if [ "$1" = x86_64 ]; then
		# (6.12's ORC is in orc.s, in 6.4's layout: no objtool.)
		if [ "$v" = 6.1 ]; then
			[ -x "$OBJTOOL" ] || skip "linux-kbuild's objtool is not installed"
			"$OBJTOOL" --orc "$d/k.o"
		fi
		$CC -c "$d/orc.s" -o "$d/orc.o"
		objs="$objs $d/orc.o"
	fi
	# (arm64 links vmlinux as a PIE whose relocations are not applied in
	# place: __mcount_loc holds zeros, the addresses are addends.)
	[ "$1$v" != aarch646.12 ] || ldflags="-pie --no-dynamic-linker --no-apply-dynamic-relocs -z notext"
	$LD $ldflags -T "$d/k.lds" $objs -o "$d/vmlinux" 2>/dev/null
	nm -n "$d/vmlinux" > "$d/System.map"
	"${CC%gcc}nm" -S "$d/vmlinux" > "$d/nm-sort"
}

# sorted_right ARCH FILE SORTED: SORTED holds FILE's tables in order, every
# entry still there, and main_extable_sort_needed is 0.
sorted_right() {
	$KT order "$3"
	$KT dump "$2" | grep -v '^flag' | sort > "$3.before"
	$KT dump "$3" | grep -v '^flag' | sort > "$3.after"
	cmp "$3.before" "$3.after"
	[ "$($KT dump "$3" | tail -1)" = "flag 0" ]
	[ "$(grep -c '^ex' "$3.after")" -gt 400 ]
}

sort_test() {
	image "$1"
	local d=$BATS_FILE_TMPDIR/$1
	cp "$d/vmlinux" "$T/shuffled"
	$KT shuffle "$T/shuffled" 7
	# The shuffle leaves the tables out of order, for both readers.
	run $KT order "$T/shuffled"
	assert_failure 1
	run "$OBJPATCH" check "$T/shuffled"
	assert_failure 1
	assert_output --partial "__ex_table: "
	assert_output --partial "entries out of order"
	cp "$T/shuffled" "$T/sorted"
	run "$OBJPATCH" sort -v "$T/sorted"
	assert_success
	assert_output --partial "main_extable_sort_needed cleared"
	sorted_right "$1" "$T/shuffled" "$T/sorted"
	run "$OBJPATCH" check "$T/sorted"
	assert_success
	# Sorting a sorted image changes nothing.
	cp "$T/sorted" "$T/again"
	"$OBJPATCH" sort "$T/again"
	cmp "$T/sorted" "$T/again"
}

@test "x86_64: sort restores a shuffled __ex_table and ORC, every entry kept" {
	sort_test x86_64
	run "$OBJPATCH" inspect "$T/sorted"
	assert_line --regexp '^__ex_table: [0-9]+ entries, sorted, 0 outside code; main_extable_sort_needed = 0$'
	assert_line --regexp '^\.orc_unwind_ip: [0-9]+ entries \(with \.orc_unwind\), sorted, 0 outside code$'
	# ORC: for one address, the weak terminators come first, then the
	# real entries (tests/lib/gen-ktables.py's orc.s has both).
	$KT dump "$T/sorted" | awk '$1 == "orc" { print $2, $3 }' | uniq -c |
		awk '$1 > 1 { n++ } END { exit n ? 0 : 1 }'
}

@test "i386: sort restores a shuffled __ex_table (12-byte relative entries)" {
	sort_test i386
}

@test "aarch64: sort restores a shuffled __ex_table" {
	sort_test aarch64
}

@test "riscv64: sort restores a shuffled __ex_table" {
	sort_test riscv64
}

@test "s390x: sort restores a shuffled __ex_table" {
	sort_test s390x
}

@test "ppc64le: sort restores a shuffled __ex_table (8-byte relative entries)" {
	sort_test ppc64le
}

@test "arm: sort restores a shuffled __ex_table (absolute 32-bit pairs)" {
	sort_test arm
}

@test "mips64el: sort restores a shuffled __ex_table (absolute 64-bit pairs)" {
	sort_test mips64el
}

@test "mips (o32): sort restores a shuffled __ex_table (absolute 32-bit pairs)" {
	sort_test mips
}

@test "the relocations --emit-relocs kept for __ex_table are zeroed, as sorttable does" {
	image x86_64
	cp "$BATS_FILE_TMPDIR/x86_64/vmlinux" "$T/v"
	run bash -c "readelf -rW '$T/v' | awk '/^Relocation section .\.rela__ex_table/ { on = 1; next } /^Relocation section/ { on = 0 } on && /R_X86_64_PC32/' | wc -l"
	[ "$output" -gt 400 ]
	"$OBJPATCH" sort "$T/v"
	run bash -c "readelf -rW '$T/v' | awk '/^Relocation section .\.rela__ex_table/ { on = 1; next } /^Relocation section/ { on = 0 } on && /R_X86_64_PC32/' | wc -l"
	assert_output 0
	# And the zeroed relocations are no defect to read back.
	run "$OBJPATCH" inspect "$T/v"
	assert_success
}

@test "check and inspect name an __ex_table entry that points outside code" {
	image aarch64
	cp "$BATS_FILE_TMPDIR/aarch64/vmlinux" "$T/v"
	"$OBJPATCH" sort "$T/v"
	data=$(nm "$T/v" | awk '$3 == "main_extable_sort_needed" { print "0x" $1 }')
	$KT point "$T/v" 0 "$data"
	run "$OBJPATCH" check "$T/v"
	assert_failure 1
	assert_output --partial "__ex_table: 1 entry points outside code (the first: entry 0, $data)"
	run "$OBJPATCH" -j inspect "$T/v"
	assert_output --partial '{"name":"__ex_table","entries":'
	assert_output --partial '"outside_code":1}'
	assert_output --partial '"main_extable_sort_needed":0'
	run "$OBJPATCH" -j check "$T/v"
	assert_output --regexp '"tables":\[\{"name":"__ex_table","entries":[0-9]+,"unsorted":[0-9]+,"outside_code":1\}\]'
}

# ---- against the kernel's own sorttable --------------------------------

# sorttable VERSION VARIANT: the kernel's scripts/sorttable of Linux
# VERSION (6.1 or 6.12), built from linux-source-VERSION as its Makefile
# builds it, into $BATS_FILE_TMPDIR/sorttable-VERSION/VARIANT: "orc" with
# ORC and mcount sorting (x86_64), "mcount" with mcount sorting alone (6.12:
# the other architectures that select HAVE_BUILDTIME_MCOUNT_SORT, i386,
# arm64 and arm), "plain" with neither.
sorttable() {
	local src k=$BATS_FILE_TMPDIR/sorttable-$1
	src=$(ls /usr/src/linux-source-$1.tar.* 2>/dev/null | head -1)
	[ -n "$src" ] || skip "linux-source-$1 is not installed (/usr/src/linux-source-$1.tar.xz)"
	if [ ! -d "$k" ]; then
		mkdir -p "$k.tmp"
		tar -xf "$src" -C "$k.tmp" --strip-components=1 --wildcards \
			'*/scripts/sorttable.[ch]' '*/tools/include/*' '*/tools/arch/x86/include/*'
		mv "$k.tmp" "$k"
	fi
	[ -x "$k/$2" ] && return 0
	local flags="-I$k/tools/include"
	case $2 in
	orc) flags="$flags -I$k/tools/arch/x86/include -DUNWINDER_ORC_ENABLED -DMCOUNT_SORT_ENABLED" ;;
	mcount) flags="$flags -DMCOUNT_SORT_ENABLED" ;;
	esac
	cc -O2 $flags "$k/scripts/sorttable.c" -o "$k/$2" -lpthread
}

identical_test() {
	local variant=plain
	[ "$1" != x86_64 ] || variant=orc
	sorttable 6.1 $variant
	image "$1"
	local d=$BATS_FILE_TMPDIR/$1
	for seed in 1 2; do
		cp "$d/vmlinux" "$T/theirs"
		$KT shuffle "$T/theirs" $seed
		cp "$T/theirs" "$T/ours"
		cp "$T/theirs" "$T/link"
		# sorttable reads System.map from the current directory.
		(cd "$d" && "$BATS_FILE_TMPDIR/sorttable-6.1/$variant" "$T/theirs")
		run "$OBJPATCH" sort --kernel "$T/ours"
		assert_success
		cmp "$T/theirs" "$T/ours"
		# 6.1's command line, through objpatch under sorttable's name.
		mkdir -p "$T/bin"
		ln -sf "$OBJPATCH" "$T/bin/sorttable"
		"$T/bin/sorttable" "$T/link"
		cmp "$T/theirs" "$T/link"
	done
}

@test "x86_64: sort --kernel gives the 6.1 sorttable's bytes (__ex_table, ORC, __mcount_loc)" {
	identical_test x86_64
}

@test "i386: sort --kernel gives the 6.1 sorttable's bytes" {
	identical_test i386
}

@test "aarch64: sort --kernel gives the 6.1 sorttable's bytes" {
	identical_test aarch64
}

@test "riscv64: sort --kernel gives the 6.1 sorttable's bytes" {
	identical_test riscv64
}

@test "s390x: sort --kernel gives the 6.1 sorttable's bytes" {
	identical_test s390x
}

@test "ppc64le: sort --kernel gives the 6.1 sorttable's bytes" {
	identical_test ppc64le
}

@test "arm: sort --kernel gives the 6.1 sorttable's bytes" {
	identical_test arm
}

@test "mips64el: sort --kernel gives the 6.1 sorttable's bytes" {
	identical_test mips64el
}

@test "mips (o32): sort --kernel gives the 6.1 sorttable's bytes" {
	identical_test mips
}

# ---- bad tables -----------------------------------------------------------

# corrupt_size FILE SECTION DELTA: change one section header's size.
corrupt_size() {
	$PY - "$1" "$2" "$3" <<'EOF'
import sys
from elftools.elf.elffile import ELFFile
path, name, delta = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(path, "rb") as f:
    e = ELFFile(f)
    idx = next(i for i, s in enumerate(e.iter_sections()) if s.name == name)
    size = e.get_section(idx)["sh_size"] + delta
    off = e["e_shoff"] + idx * e["e_shentsize"] + (32 if e.elfclass == 64 else 20)
    n = 8 if e.elfclass == 64 else 4
    order = "little" if e.little_endian else "big"
with open(path, "r+b") as f:
    f.seek(off)
    f.write(size.to_bytes(n, order))
EOF
}

@test "a corrupt table gets one line naming it, and the file stays as it was" {
	image x86_64
	local v=$BATS_FILE_TMPDIR/x86_64/vmlinux
	cp "$v" "$T/partial"
	corrupt_size "$T/partial" __ex_table -4
	cp "$v" "$T/orc"
	corrupt_size "$T/orc" .orc_unwind -6
	for f in partial orc; do
		cp "$T/$f" "$T/$f.orig"
		run "$OBJPATCH" sort "$T/$f"
		assert_failure 1
		[ "${#lines[@]}" -eq 1 ]
		cmp "$T/$f" "$T/$f.orig"
	done
	run "$OBJPATCH" sort "$T/partial"
	assert_output --partial "__ex_table: "
	assert_output --partial "not a whole number of 12-byte entries"
	run "$OBJPATCH" sort "$T/orc"
	assert_output --partial "ORC unwind tables disagree"
	run "$OBJPATCH" check "$T/orc"
	assert_failure 1
	assert_output --partial "ORC unwind tables disagree"
}

@test "an ORC table without its partner is refused, as the kernel's sorttable refuses it" {
	image x86_64
	cp "$BATS_FILE_TMPDIR/x86_64/vmlinux" "$T/v"
	objcopy --remove-section .orc_unwind "$T/v" "$T/half"
	cp "$T/half" "$T/half.orig"
	run "$OBJPATCH" sort "$T/half"
	assert_failure 1
	assert_output --partial "incomplete ORC unwind tables: .orc_unwind_ip without .orc_unwind"
	cmp "$T/half" "$T/half.orig"
}

# ---- Linux 6.12 -------------------------------------------------------------

variant612() {
	case $1 in
	x86_64) echo orc ;;
	i386|aarch64|arm) echo mcount ;;
	*) echo plain ;;
	esac
}

# identical612_test ARCH: sort --kernel, objpatch sorttable -s (also -i, in
# the file's own inode) and objpatch under the name sorttable all give the bytes of 6.12's "sorttable -s
# NMFILE vmlinux" (link-vmlinux.sh's step) on a shuffled 6.12 image.
identical612_test() {
	local variant
	variant=$(variant612 "$1")
	sorttable 6.12 "$variant"
	image "$1" 6.12
	local d=$BATS_FILE_TMPDIR/$1-6.12
	mkdir -p "$T/bin"
	ln -sf "$OBJPATCH" "$T/bin/sorttable"
	for seed in 1 2; do
		cp "$d/vmlinux" "$T/theirs"
		$KT shuffle "$T/theirs" $seed
		cp "$T/theirs" "$T/before"
		for w in ours sub link inplace; do cp "$T/theirs" "$T/$w"; done
		"$BATS_FILE_TMPDIR/sorttable-6.12/$variant" -s "$d/nm-sort" "$T/theirs"
		if cmp -s "$T/before" "$T/theirs"; then false; fi
		run "$OBJPATCH" sort --kernel "$T/ours"
		assert_success
		cmp "$T/theirs" "$T/ours"
		"$OBJPATCH" sorttable -s "$d/nm-sort" "$T/sub"
		cmp "$T/theirs" "$T/sub"
		"$T/bin/sorttable" -s "$d/nm-sort" "$T/link"
		cmp "$T/theirs" "$T/link"
		local ino
		ino=$(stat -c %i "$T/inplace")
		"$OBJPATCH" sorttable -i -s "$d/nm-sort" "$T/inplace"
		cmp "$T/theirs" "$T/inplace"
		[ "$(stat -c %i "$T/inplace")" = "$ino" ]
	done
}

# same_as_sorttable612 IMAGE NMFILE SEED: IMAGE's tables shuffled (SEED),
# then sort --kernel and sort --kernel --in-place, which read the image's
# own symbols, give the bytes of 6.12's sorttable -s NMFILE (NMFILE being
# nm -S of IMAGE), built with ORC by the caller.
same_as_sorttable612() {
	cp "$1" "$T/theirs"
	$KT shuffle "$T/theirs" "$3"
	cp "$T/theirs" "$T/ours"
	cp "$T/theirs" "$T/inplace"
	"$BATS_FILE_TMPDIR/sorttable-6.12/orc" -s "$2" "$T/theirs"
	"$OBJPATCH" sort --kernel "$T/ours"
	cmp "$T/theirs" "$T/ours"
	"$OBJPATCH" sort --kernel --in-place "$T/inplace"
	cmp "$T/theirs" "$T/inplace"
}

@test "x86_64: sort --kernel gives the 6.12 sorttable's bytes (6.4's ORC layout, weak entries zeroed)" {
	identical612_test x86_64
}

@test "sorttable -s reads an odd listing as 6.12's does: runs of blanks, tabs, CRs, 17-digit, upper-case and non-hex fields, whitespace in names, no last newline" {
	# objpatch reads nm -S's usual lines at once and anything else field
	# by field as fscanf does; both readings must agree with sorttable's.
	# "shift" also breaks the records' shape, which shifts fscanf's
	# fields for the rest of the file; "shape" keeps nm's shape, so that
	# the fast reading meets every oddity itself.
	sorttable 6.12 orc
	image x86_64 6.12
	local d=$BATS_FILE_TMPDIR/x86_64-6.12 how
	for how in shift shape; do
		$PY - "$d/nm-sort" "$T/odd" $how <<'EOF'
import sys
out = []
for i, line in enumerate(open(sys.argv[1]).read().splitlines()):
    k = i % 9
    if sys.argv[3] == "shape":
        if k == 1 and len(line) > 36:
            line = line[:29] + "x" + line[30:]   # a size not hex: 0 to strtoull
        elif k == 3:
            head, _, name = line.rpartition(" ")  # whitespace and UTF-8 inside a name
            line = head + " " + name[:3] + "\u00e9\x0bq" + name[3:]
        elif k == 5:
            line = line[:16].upper() + line[16:]
        elif k == 7 and len(line) > 36:
            line = line[:20] + "G" + line[21:]   # ends the size early
    elif k == 1:
        line = line.replace(" ", "  ", 1)
    elif k == 2:
        line = line.replace(" ", "\t")
    elif k == 3:
        line += "\r"
    elif k == 4 and line[:1] != " ":
        line = "0" + line
    elif k == 5:
        line = " \n" + line
    elif k == 6:
        line = line.replace(" ", " g", 1)
    out.append(line)
open(sys.argv[2], "w").write("\n".join(out))
EOF
		if cmp -s "$d/nm-sort" "$T/odd"; then false; fi
		cp "$d/vmlinux" "$T/theirs"
		$KT shuffle "$T/theirs" 3
		cp "$T/theirs" "$T/ours"
		"$BATS_FILE_TMPDIR/sorttable-6.12/orc" -s "$T/odd" "$T/theirs"
		"$OBJPATCH" sorttable -s "$T/odd" "$T/ours"
		cmp "$T/theirs" "$T/ours"
	done
}

@test "i386: sort --kernel gives the 6.12 sorttable's bytes" {
	identical612_test i386
}

@test "aarch64: sort --kernel gives the 6.12 sorttable's bytes (R_AARCH64_RELATIVE addends, CALL_OPS entries)" {
	identical612_test aarch64
}

@test "riscv64: sort --kernel gives the 6.12 sorttable's bytes" {
	identical612_test riscv64
}

@test "s390x: sort --kernel gives the 6.12 sorttable's bytes" {
	identical612_test s390x
}

@test "ppc64le: sort --kernel gives the 6.12 sorttable's bytes" {
	identical612_test ppc64le
}

@test "arm: sort --kernel gives the 6.12 sorttable's bytes (weak entries zeroed)" {
	identical612_test arm
}

@test "mips64el: sort --kernel gives the 6.12 sorttable's bytes" {
	identical612_test mips64el
}

@test "mips (o32): sort --kernel gives the 6.12 sorttable's bytes" {
	identical612_test mips
}

@test "x86_64 6.12: sort restores shuffled ORC tables in 6.4's layout (.orc_header), and check and inspect are clean" {
	image x86_64 6.12
	cp "$BATS_FILE_TMPDIR/x86_64-6.12/vmlinux" "$T/v"
	$KT shuffle "$T/v" 3
	run $KT order "$T/v"
	assert_failure 1
	run "$OBJPATCH" check --kernel "$T/v"
	assert_failure 1
	assert_output --partial ".orc_unwind_ip: "
	assert_output --partial "entries out of order"
	run "$OBJPATCH" sort --kernel -v "$T/v"
	assert_success
	assert_output --partial "sorted as Linux 6.12's sorttable does; 5 __mcount_loc entries in no function zeroed"
	$KT order "$T/v"
	run "$OBJPATCH" check --kernel "$T/v"
	assert_success
	run "$OBJPATCH" inspect "$T/v"
	assert_success
	assert_line --regexp '^\.orc_unwind_ip: [0-9]+ entries \(with \.orc_unwind\), sorted, 0 outside code$'
	# (The replaced weak functions' entries, zeroed, counted apart.)
	assert_line --regexp '^summary: 0 call, [0-9]+ nop, 0 patchable, 0 other, 5 zero; sorted; 0 duplicates$'
	# The entries that 6.1's rule would take for weak terminators (and the
	# reverse) are where 6.4's rule puts them: in orc_dup's group, the weak
	# ones (type 0) first, then the real ones.
	at=$(nm "$T/v" | awk '$3 == "orc_dup" { print "0x" $1 }' | sed 's/0x0*/0x/')
	$KT dump "$T/v" | awk -v at="$at" '$1 == "orc" && $2 == at { print $3, substr($4, 1, 4), substr($4, 9, 4) }' > "$T/group"
	run bash -c "head -2 '$T/group' | sort"
	assert_output "1 0000 0000
1 1800 0500"
	run bash -c "tail -n +3 '$T/group' | sort"
	assert_output "0 0000 0001
0 0000 0002
0 0800 0502
0 1000 0502"
}

@test "an .orc_header objpatch has not seen is refused, naming its bytes, and the file stays as it was" {
	image x86_64 6.12
	cp "$BATS_FILE_TMPDIR/x86_64-6.12/vmlinux" "$T/v"
	$PY - "$T/v" <<'PYEOF'
import sys
from elftools.elf.elffile import ELFFile
with open(sys.argv[1], "rb") as f:
    off = ELFFile(f).get_section_by_name(".orc_header")["sh_offset"]
with open(sys.argv[1], "r+b") as f:
    f.seek(off)
    f.write(b"\x12\x34")
PYEOF
	cp "$T/v" "$T/v.orig"
	for cmd in sort check inspect; do
		run "$OBJPATCH" $cmd "$T/v"
		assert_failure 1
		assert_output --partial "ORC unwind tables whose .orc_header (20 bytes: 123432bf581bd63b2ca9a5c65ba5a625eab3fe24"
		assert_output --partial "names an entry layout objpatch does not know"
	done
	cmp "$T/v" "$T/v.orig"
}

@test "the kernel's version: from linux_banner or .orc_header, or --kernel=6.1|6.12; check --kernel accepts 6.12's zeros" {
	image arm 6.12
	local d=$BATS_FILE_TMPDIR/arm-6.12
	cp "$d/vmlinux" "$T/new"
	cp "$d/vmlinux" "$T/old"
	run "$OBJPATCH" sort --kernel -v "$T/new"
	assert_success
	assert_output --partial "sorted as Linux 6.12's sorttable does; 5 __mcount_loc entries in no function zeroed"
	run "$OBJPATCH" sort --kernel=6.1 -v "$T/old"
	assert_success
	assert_output --partial "sorted as Linux 6.1's sorttable does; 0 __mcount_loc entries"
	if cmp -s "$T/new" "$T/old"; then false; fi
	# 6.12's kernel skips the zeros at boot; 6.1's sorttable never makes any.
	run "$OBJPATCH" check --kernel "$T/new"
	assert_success
	run "$OBJPATCH" check --kernel=6.1 "$T/new"
	assert_failure 1
	assert_output --partial "__mcount_loc entry 0 is zero"
	# Without --kernel, each zero says where to look.
	run "$OBJPATCH" check "$T/new"
	assert_failure 1
	assert_output --partial "__mcount_loc entry 0 is zero (6.12's sorttable zeroes a replaced weak function's: check --kernel takes a 6.12 kernel's conventions)"
	run "$OBJPATCH" sort --kernel=6.2 "$T/new"
	assert_failure 2
	# x86_64 without a banner: its .orc_header says 6.4 or later.
	image x86_64 6.12
	objcopy --strip-symbol=linux_banner "$BATS_FILE_TMPDIR/x86_64-6.12/vmlinux" "$T/x"
	run "$OBJPATCH" sort --kernel -v "$T/x"
	assert_success
	assert_output --partial "Linux 6.12's sorttable"
}

@test "a call-site table that is or would come out all zeros is an error for sort --kernel and check --kernel" {
	image arm 6.12
	cp "$BATS_FILE_TMPDIR/arm-6.12/vmlinux" "$T/v"
	# An nm listing whose one function holds no entry.
	echo "00000010 00000004 T nothing" > "$T/nm"
	cp "$T/v" "$T/v.orig"
	run "$OBJPATCH" sorttable -s "$T/nm" "$T/v"
	assert_failure 1
	assert_output --partial "__mcount_loc: all 410 entries would come out zero: the kernel would trace nothing (is NMFILE this image's nm -S listing?)"
	cmp "$T/v" "$T/v.orig"
	# 6.12's own sorttable writes that table; check --kernel refuses it.
	sorttable 6.12 mcount
	"$BATS_FILE_TMPDIR/sorttable-6.12/mcount" -s "$T/nm" "$T/v"
	run "$OBJPATCH" check --kernel "$T/v"
	assert_failure 1
	assert_output --partial "__mcount_loc: every entry is zero: the kernel would trace nothing"
}

@test "sort --kernel reads the image's own symbols as nm -S and sorttable -s would: a one-letter symbol and a name with spaces shifting what follows, functions after them, aliases of no size at functions' addresses" {
	# Lines before the first that shifts sorttable's fields are taken
	# straight from the symbols; the rest are sorted by name and read as
	# text.  "shift": a one-letter symbol without a size, as a real
	# kernel's absolute "i", makes sorttable miss the function after it;
	# "space": so does a name with two spaces.
	# "alias": size-0 aliases whose names start with T or t are functions
	# to sorttable, and put two sizes at one address; then nm's order of
	# the lines decides what its search finds, on both sides of the shift.
	sorttable 6.12 orc
	image x86_64 6.12
	local d=$BATS_FILE_TMPDIR/x86_64-6.12 how
	for how in shift space alias; do
		$PY - "$d/vmlinux" "$T/add" $how <<'EOF'
import sys
from elftools.elf.elffile import ELFFile
f = ELFFile(open(sys.argv[1], "rb"))
text = f.get_section_by_name(".text")["sh_addr"]
out = []
if sys.argv[3] != "space":                   # one letter, no size: shifts what follows
    out += ["--add-symbol", "i=0x200,global"]
funcs = [s for s in f.get_section_by_name(".symtab").iter_symbols()
         if s["st_info"]["type"] == "STT_FUNC" and s.name.startswith("f")]
for k, s in enumerate(sorted(funcs, key=lambda s: s.name)):
    off = s["st_value"] - text
    if sys.argv[3] == "alias" and k % 3 == 0:    # before the shift in nm's order
        out += ["--add-symbol", "Tz_%s=.text:0x%x,function,global" % (s.name, off)]
    if sys.argv[3] == "alias" and k % 5 == 0:    # after it
        out += ["--add-symbol", "tt_%s=.text:0x%x,global" % (s.name, off)]
    if k % 7 == 1:                               # functions after it
        out += ["--redefine-sym", "%s=z%s" % (s.name, s.name)]
    elif k % 7 == 3:                             # the first of them read shifted
        out += ["--redefine-sym", "%s=i_%s" % (s.name, s.name)]
    elif k == 4 and sys.argv[3] == "space":      # two spaces in a name: a field too many
        out += ["--add-symbol", '"Tq x y=.data:0,global"',
                "--redefine-sym", "%s=Tq_%s" % (s.name, s.name)]
open(sys.argv[2], "w").write("\n".join(out) + "\n")
EOF
		objcopy @"$T/add" "$d/vmlinux" "$T/syms"
		nm -S "$T/syms" > "$T/nm"
		if [ $how = space ]; then
			grep -A1 " D Tq x y$" "$T/nm" | grep -q " T Tq_f"
		else
			grep -A1 "^0*200 A i$" "$T/nm" | grep -q " T i_f"
		fi
		[ "$(grep -c " T zf" "$T/nm")" -gt 50 ]
		[ $how != alias ] || [ "$(grep -c " T Tz_f" "$T/nm")" -gt 50 ]
		[ $how != alias ] || [ "$(grep -c " T tt_f" "$T/nm")" -gt 50 ]
		same_as_sorttable612 "$T/syms" "$T/nm" 1
		same_as_sorttable612 "$T/syms" "$T/nm" 2
	done
}

@test "sort --kernel lists each symbol as nm -S does: an OS or processor binding is \"?\", a weak STT_COMMON \"V\", PE's section names (.edata) come first, a section without contents is \"b\" allocated or not, the symbol table's and relocations' sections are \"A\", an empty name (offset 0, whatever is there) is listed (and shifts), \"\$d\" is a function's name on x86" {
	# Sorttable reads the letter of a line without a size as the size of
	# a function whose name starts with T: so "e" (14) or "b" (11), not
	# "d" (13) or "n" (0), makes an entry 13 or 10 bytes on part of it.
	sorttable 6.12 orc
	image x86_64 6.12
	local d=$BATS_FILE_TMPDIR/x86_64-6.12 how
	echo junk > "$T/junk"
	objcopy --rename-section .data=.edata "$d/vmlinux" "$T/edata"
	objcopy --add-section .junk="$T/junk" "$d/vmlinux" "$T/nobits"
	cp "$d/vmlinux" "$T/bind"
	cp "$d/vmlinux" "$T/empty"
	cp "$d/vmlinux" "$T/abs"
	cp "$d/vmlinux" "$T/common"
	cp "$d/vmlinux" "$T/strtab0"
	# (arm's and aarch64's mapping symbols: x86's nm lists them.)
	objcopy --redefine-sym 'f10=$d' --redefine-sym 'f11=$x' --redefine-sym 'f12=$a' \
		--redefine-sym 'f13=$t.1' "$d/vmlinux" "$T/dollar"
	for how in bind common edata nobits abs empty strtab0 dollar; do
		$PY - "$T/$how" "$T/syms" $how <<'EOF'
import sys, struct
from elftools.elf.elffile import ELFFile
src, dst, how = sys.argv[1:4]
data = bytearray(open(src, "rb").read())
f = ELFFile(open(src, "rb"))
secs = list(f.iter_sections())
idx = {s.name: i for i, s in enumerate(secs)}
st = f.get_section_by_name(".symtab")
stro = f.get_section_by_name(".strtab")["sh_offset"]
syms = list(st.iter_symbols())
at = {s.name: s["st_value"] for s in syms}
loc = f.get_section_by_name(".init.data")
base = loc["sh_offset"] - loc["sh_addr"]
entries = sorted(struct.unpack_from("<Q", data, base + a)[0]
                 for a in range(at["__start_mcount_loc"], at["__stop_mcount_loc"], 8))
funcs = [(i, s) for i, s in enumerate(syms)
         if s["st_info"]["type"] == "STT_FUNC" and s.name.startswith("f")]
if how == "nobits":     # the section objcopy added: no contents now, not allocated
    struct.pack_into("<I", data, f["e_shoff"] + idx[".junk"] * f["e_shentsize"] + 4, 8)
for k, (i, s) in enumerate(funcs[3::20]):
    p = st["sh_offset"] + i * st["sh_entsize"]
    name, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", data, p)
    inside = [e for e in entries if value <= e < value + size]
    if how == "bind":           # an OS or processor binding: nm's "?"
        info = 13 << 4 | (info & 15)
    elif how == "common":       # weak, STT_COMMON: an object to nm ("V")
        info = 2 << 4 | 5
    elif how in ("empty", "strtab0"):   # nm lists it, "ADDR SIZE T " (sorttable reads on)
        name, size = 0, size if k % 2 else 0
    elif how == "dollar":
        continue
    elif inside:                # a function no more, but a name in T of no size
        # placed before an entry: nm's letter read as its size (e = 14,
        # b = 11, A = 10) reaches it, a d (13) or n (0) would not.
        place = {"edata": [".edata"], "nobits": [".junk"],
                 "abs": [".rela.text", ".symtab", ".strtab", ".shstrtab"]}[how]
        data[stro + name] = ord("T")
        shndx = idx[place[k % len(place)]]
        value, size = inside[0] - {"edata": 13, "nobits": 10, "abs": 9}[how], 0
    struct.pack_into("<IBBHQQ", data, p, name, info, other, shndx, value, size)
if how == "strtab0":           # offset 0 is "" to BFD, whatever is there
    data[stro] = ord("T")
open(dst, "wb").write(data)
EOF
		nm -S "$T/syms" > "$T/nm"
		case $how in
		bind) grep -q "^[0-9a-f]* [0-9a-f]* ? f" "$T/nm" ;;
		common) grep -q "^[0-9a-f]* [0-9a-f]* V f" "$T/nm" ;;
		edata) grep -q "^[0-9a-f]* E T" "$T/nm" ;;
		nobits) grep -q "^[0-9a-f]* B T" "$T/nm" ;;
		abs) [ "$(grep -c "^[0-9a-f]* A T" "$T/nm")" -gt 4 ] ;;
		empty | strtab0) grep -q "^[0-9a-f]* [0-9a-f]* T $" "$T/nm" ;;
		dollar) [ "$(grep -c '^[0-9a-f]* [0-9a-f]* T [$][dxat]' "$T/nm")" = 4 ] ;;
		esac
		same_as_sorttable612 "$T/syms" "$T/nm" 3
	done
}

@test "sorttable -s: overlapping functions (nested, one start, two sizes) leave entries as glibc's bsearch finds them, not as a scan would" {
	# Functions that end out of their start order make the search's
	# answer depend on the order; objpatch then searches each entry as
	# sorttable does, and walks the sorted entries only otherwise.
	sorttable 6.12 orc
	image x86_64 6.12
	local d=$BATS_FILE_TMPDIR/x86_64-6.12
	$PY - "$d/nm-sort" "$T/nested" <<'EOF'
import sys
funcs, out = [], []
for i, line in enumerate(open(sys.argv[1]).read().splitlines()):
    f = line.split()
    if len(f) == 4 and f[2] in "tT" and f[3].startswith("f"):
        funcs.append(int(f[0], 16))
        if i % 4 == 0:
            continue                    # its entries are in no function now
    out.append(line)
funcs.sort()
for k, at in enumerate(funcs[10::60]):  # some holding dozens of others
    out.append("%016x %016x T big%d" % (at, 0x600 + 0x100 * k, k))
    out.append("%016x %016x T small%d" % (at, 0x10, k))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
EOF
	cp "$d/vmlinux" "$T/theirs"
	$KT shuffle "$T/theirs" 5
	cp "$T/theirs" "$T/ours"
	"$BATS_FILE_TMPDIR/sorttable-6.12/orc" -s "$T/nested" "$T/theirs"
	run "$OBJPATCH" sorttable -v -s "$T/nested" "$T/ours"
	assert_success
	cmp "$T/theirs" "$T/ours"
	# (Some entries zeroed, and not all of those a scan would zero.)
	assert_output --regexp "does; [1-9][0-9]* __mcount_loc entries in no function zeroed"
}

@test "sorttable -s: options after the image, as sorttable's getopt takes them; an NMFILE that is no listing gets one line and the image stays" {
	sorttable 6.12 orc
	image x86_64 6.12
	local d=$BATS_FILE_TMPDIR/x86_64-6.12
	cp "$d/vmlinux" "$T/theirs"
	$KT shuffle "$T/theirs" 4
	cp "$T/theirs" "$T/ours"
	cp "$T/theirs" "$T/orig"
	"$BATS_FILE_TMPDIR/sorttable-6.12/orc" "$T/theirs" -s "$d/nm-sort"
	"$OBJPATCH" sorttable "$T/ours" -s "$d/nm-sort"
	cmp "$T/theirs" "$T/ours"
	mkfifo "$T/fifo"
	for bad in /dev/zero "$T" "$T/missing"; do
		cp "$T/orig" "$T/v"
		run timeout 60 "$OBJPATCH" sorttable -s "$bad" "$T/v"
		assert_failure 1
		[ "${#lines[@]}" -eq 1 ]
		assert_output --partial "$bad: "
		cmp "$T/v" "$T/orig"
	done
	# A FIFO with no writer reads as an empty listing, at once, as an
	# empty file does (sorttable then zeroes nothing either).
	cp "$T/orig" "$T/v"
	: > "$T/empty"
	cp "$T/orig" "$T/e"
	run timeout 60 "$OBJPATCH" sorttable -s "$T/fifo" "$T/v"
	assert_success
	"$OBJPATCH" sorttable -s "$T/empty" "$T/e"
	cmp "$T/v" "$T/e"
	# The zero entries of a 6.12 sort are "zero" to inspect -j, not calls.
	run "$OBJPATCH" -j inspect "$T/ours"
	local zeros
	zeros=$(grep -o '"state":"zero"' <<< "$output" | wc -l)
	[ "$zeros" -gt 0 ]
	[ "$(grep -o '"zero":[0-9]*' <<< "$output" | head -1)" = "\"zero\":$zeros" ]
}

@test "sorttable's command line: usage errors exit 2, and every image is sorted" {
	mkdir -p "$T/bin"
	ln -s "$OBJPATCH" "$T/bin/sorttable"
	run "$T/bin/sorttable"
	assert_failure 2
	assert_output --partial "usage: sorttable [-i] [-s NMFILE] vmlinux..."
	run "$OBJPATCH" sorttable -x v
	assert_failure 2
	image i386
	cp "$BATS_FILE_TMPDIR/i386/vmlinux" "$T/a"
	cp "$BATS_FILE_TMPDIR/i386/vmlinux" "$T/b"
	$KT shuffle "$T/a" 1
	$KT shuffle "$T/b" 2
	run "$T/bin/sorttable" "$T/a" "$T/missing" "$T/b"
	assert_failure 1
	$KT order "$T/a"
	$KT order "$T/b"
}

@test "riscv64 -fpatchable-function-entry=8,4: entries 8 bytes before their function are kept, a replaced weak one's zeroed" {
	toolchain riscv64
	printf '%s\n' 'int sink;' 'void f1(void) { sink += 1; }' 'void f2(void) { sink += 2; }' \
		'__attribute__((weak)) void f3(void) { sink += 3; }' \
		'void _start(void) { f1(); f2(); f3(); }' > "$T/a.c"
	printf '%s\n' 'extern int sink;' 'void f3(void) { sink += 33; }' > "$T/b.c"
	printf '%s\n' 'ENTRY(_start)' 'SECTIONS {' '. = 0xffffffff80000000 + SIZEOF_HEADERS;' \
		'.text : { *(.text .text.*) }' '. = ALIGN(4096);' \
		'.init.data : { . = ALIGN(8); __start_mcount_loc = .; KEEP(*(__patchable_function_entries)) __stop_mcount_loc = .; }' \
		'.data : { *(.data .sdata .bss .sbss) }' '}' > "$T/k.lds"
	for o in a b; do
		$CC -O2 -fno-pie -mcmodel=medany -march=rv64gc -fpatchable-function-entry=8,4 \
			-falign-functions=8 -c "$T/$o.c" -o "$T/$o.o"
	done
	$LD -T "$T/k.lds" "$T/a.o" "$T/b.o" -o "$T/v"
	run "$OBJPATCH" check --kernel "$T/v"
	assert_success
	run "$OBJPATCH" sort --kernel=6.12 -v "$T/v"
	assert_success
	assert_output --partial "1 __mcount_loc entry in no function zeroed"
	run "$OBJPATCH" check --kernel=6.12 "$T/v"
	assert_success
	run "$OBJPATCH" -j inspect "$T/v"
	[ "$(grep -o '"state":"patchable"' <<< "$output" | wc -l)" -eq 4 ]
}

# ---- sort --in-place --------------------------------------------------------

# in_place_same ARCH[-6.12] MODE...: on a shuffled 6.1 (or 6.12) image,
# sort MODE --in-place
# gives exactly the bytes of sort MODE (the atomic sort), in the file's
# own inode, for each MODE ("" or --kernel).  (Without --kernel, an image
# without __start___mcount_loc gets it added: .symtab grows, and that
# is refused in place.)
in_place_same() {
	local arch=${1%-6.12} d=$BATS_FILE_TMPDIR/$1
	image "$arch" $([ "$arch" = "$1" ] || echo 6.12)
	cp "$d/vmlinux" "$T/shuffled"
	$KT shuffle "$T/shuffled" 7
	shift
	for k in "$@"; do
		cp "$T/shuffled" "$T/atomic"
		cp "$T/shuffled" "$T/inplace"
		"$OBJPATCH" sort $k "$T/atomic"
		local ino
		ino=$(stat -c %i "$T/inplace")
		run "$OBJPATCH" sort $k --in-place "$T/inplace"
		assert_success
		cmp "$T/atomic" "$T/inplace"
		if cmp -s "$T/shuffled" "$T/inplace"; then false; fi
		[ "$(stat -c %i "$T/inplace")" = "$ino" ]
	done
}

@test "x86_64: sort --in-place gives the atomic sort's bytes (__ex_table, ORC), in the same inode" {
	in_place_same x86_64 --kernel
}

@test "s390x: sort --in-place gives the atomic sort's bytes (big-endian), in the same inode" {
	in_place_same s390x "" --kernel
}

@test "arm: sort --in-place gives the atomic sort's bytes (32-bit), in the same inode" {
	in_place_same arm "" --kernel
}

@test "6.12 images, x86_64 (.orc_header) and aarch64 (RELATIVE addends): sort --in-place gives the atomic sort's bytes" {
	in_place_same x86_64-6.12 --kernel
	in_place_same aarch64-6.12 --kernel
}

@test "sort --in-place on a corrupt table: one line, the file byte-identical and the same inode" {
	image x86_64
	local v=$BATS_FILE_TMPDIR/x86_64/vmlinux
	cp "$v" "$T/partial"
	corrupt_size "$T/partial" __ex_table -4
	cp "$T/partial" "$T/partial.orig"
	local ino
	ino=$(stat -c %i "$T/partial")
	run "$OBJPATCH" sort --in-place "$T/partial"
	assert_failure 1
	[ "${#lines[@]}" -eq 1 ]
	assert_output --partial "not a whole number of 12-byte entries"
	cmp "$T/partial" "$T/partial.orig"
	[ "$(stat -c %i "$T/partial")" = "$ino" ]
}

@test "sort --in-place: a symlink's target is edited; a hard-linked file is replaced under its name only" {
	image x86_64
	cp "$BATS_FILE_TMPDIR/x86_64/vmlinux" "$T/shuffled"
	$KT shuffle "$T/shuffled" 7
	cp "$T/shuffled" "$T/want"
	"$OBJPATCH" sort --kernel "$T/want"
	# A symbolic link stays one, and its target is the file edited.
	cp "$T/shuffled" "$T/target"
	ln -s target "$T/link"
	local ino
	ino=$(stat -c %i "$T/target")
	"$OBJPATCH" sort --kernel --in-place "$T/link"
	[ -L "$T/link" ]
	cmp "$T/want" "$T/target"
	[ "$(stat -c %i "$T/target")" = "$ino" ]
	# Editing a file with other names would change it under each (as
	# recordmcount --in-place, it is replaced instead).
	cp "$T/shuffled" "$T/one"
	ln "$T/one" "$T/other"
	"$OBJPATCH" sort --kernel --in-place "$T/one"
	cmp "$T/want" "$T/one"
	cmp "$T/shuffled" "$T/other"
}

@test "sort --in-place refuses a change that needs room the file does not have, and changes nothing" {
	# A program's sort adds the table's bound symbols: .symtab grows.
	need cc
	for f in util main lib; do
		cc -O2 -pg -mfentry -c "$SRC/tests/fixtures/link/$f.c" -o "$T/$f.o"
	done
	"$RECORDMCOUNT" "$T"/*.o
	"$OBJPATCH" link --no-sort -- cc "$T"/{util,main,lib}.o -o "$T/prog"
	cp "$T/prog" "$T/prog.orig"
	run "$OBJPATCH" sort --in-place "$T/prog"
	assert_failure 1
	[ "${#lines[@]}" -eq 1 ]
	assert_output --partial "prog: error: objpatch: the changes need room the file does not have"
	cmp "$T/prog" "$T/prog.orig"
	# What it can do in place, it does: --kernel adds nothing.
	cp "$T/prog" "$T/atomic"
	"$OBJPATCH" sort --kernel "$T/atomic"
	"$OBJPATCH" sort --kernel --in-place "$T/prog"
	cmp "$T/atomic" "$T/prog"
}
