#!/usr/bin/env bats
# The tree's own contracts: what installs, which layer may include which,
# and that the image layout has one source.
load helpers

@test "meson install puts the tools, library, headers, pkg-config file and man pages in place" {
	[ -n "${MCLOC_BUILD:-}" ] || skip "run from meson test (MCLOC_BUILD names the build)"
	[ -z "${MCLOC_SANITIZED:-}" ] || skip "the sanitized build is not installed"
	run meson install -C "$MCLOC_BUILD" --no-rebuild --destdir "$T/dest"
	assert_success
	cd "$T/dest"
	for f in bin/recordmcount bin/objpatch bin/mcloc include/mcloc/mcloc.h include/mcloc/abi.h \
		include/mcloc/control.h include/mcloc/record.h share/man/man1/recordmcount.1 \
		share/man/man1/objpatch.1 share/man/man1/mcloc.1 share/man/man3/libmcloc.3 \
		share/man/man5/mcloc-record.5; do
		[ -e "$(find . -path "*/$f" | head -1)" ] || { echo "missing: $f"; false; }
	done
	pc=$(find . -name mcloc.pc | head -1)
	[ -n "$pc" ]
	lib=$(find . -name 'libmcloc.so.0' | head -1)
	[ -n "$lib" ]
	run readelf -d "$lib"
	assert_output --partial "Library soname: [libmcloc.so.0]"
	# Every export is versioned, and nothing but the API is exported,
	# but for the unwinder's two entry points that timing.c interposes
	# under libgcc's own version, and (x86_64) the signal calls that
	# signals.c interposes under glibc's, which libmcloc-glibc.map names.
	glibc=$(sed -n 's/^[[:space:]]*\([_a-z]*\);$/\1/p' "$SRC/libmcloc/libmcloc-glibc.map" |
		paste -sd'|')
	[ -n "$glibc" ]
	run sh -c "objdump -T '$lib' | awk '\$2 == \"g\" && \$4 == \".text\" { print \$6, \$7 }' |
		grep -vxE 'GCC_3\.0 _Unwind_(RaiseException|ForcedUnwind)' |
		grep -vxE '\\(?GLIBC_[0-9.]+\\)? ($glibc)'"
	refute_output --regexp '(^| )mcr_'
	refute_output --regexp '^[^M]'
	# A program builds from pkg-config's answer alone.
	cat > "$T/tiny.c" <<-'C'
		#include <mcloc/mcloc.h>
		int main(void)
		{
			struct mcloc_stats st = { .sz = sizeof(st) };
			return mcloc_get_stats(&st) != 0;
		}
	C
	export PKG_CONFIG_SYSROOT_DIR=$T/dest PKG_CONFIG_PATH=$T/dest/$(dirname "${pc#./}")
	flags=$(pkg-config --cflags --libs mcloc)
	cc "$T/tiny.c" $flags -o "$T/tiny"
	LD_LIBRARY_PATH=$T/dest/$(dirname "${lib#./}") "$T/tiny"
}

@test "layers: arch/ and common/ include neither each other; the runtime's includes form no cycle" {
	cd "$SRC"
	run grep -l '#include ".*common/' arch -r
	assert_output ""
	run grep -l '#include ".*arch/' common -r
	assert_output ""
	# libmcloc: who includes whom, as edges "a b"; tsort fails on a cycle.
	for f in libmcloc/*.c libmcloc/*.h; do
		for h in $(sed -n 's/^#include "\([a-z]*\)\.h"/\1/p' "$f"); do
			echo "$(basename "${f%.*}") $h"
		done
	done > "$T/edges"
	run tsort "$T/edges"
	assert_success
	refute_output --partial "loop"
}

# The runtime's modules, bottom up: each calls only those before it (and
# itself).  "runtime" is arch/<arch>/runtime.c.  README.md's libmcloc/ row
# names them in this order.
RUNTIME_ORDER="runtime signals patch state rcu images dispatch plan direct ops registry discover timing args tracer trace control redirect fork"

@test "layers: each runtime object calls no mcr_ function of a module above it (nm -u)" {
	[ -n "${MCLOC_BUILD:-}" ] || skip "run from meson test (MCLOC_BUILD names the build)"
	command -v nm >/dev/null || skip "no nm"
	dir=$(echo "$MCLOC_BUILD"/libmcloc/libmcloc.so*.p)
	[ -d "$dir" ] || skip "libmcloc is not built for this machine"
	level=0
	for m in $RUNTIME_ORDER; do
		echo "$m $level"
		level=$((level + 1))
	done > "$T/levels"
	# Each object as "module file"; one the order does not name fails.
	for o in "$dir"/*.o "$dir"/.._arch_*.o; do
		m=$(basename "$o" .c.o)
		case $m in
		.._arch_*_runtime) m=runtime ;;
		*mcloc-tramp.S.o) m=tramp ;;	# the generated trampolines: they call nothing
		esac
		echo "$m $o"
	done > "$T/objects"
	while read -r m o; do
		[ "$m" = tramp ] || grep -q "^$m " "$T/levels" || { echo "not in RUNTIME_ORDER: $o"; false; }
		nm --defined-only "$o" | awk -v m="$m" '$2 ~ /^[A-TV-Z]$/ && $3 ~ /^mcr_/ { print $3, m }'
	done < "$T/objects" > "$T/defs"
	# arch/<arch>/runtime.c defines its trampolines in top-level asm,
	# which nm does not see in an LTO object.
	sed -n 's/^"[[:space:]]*\.globl[[:space:]]*\(mcr_[a-z0-9_]*\).*/\1 runtime/p' "$SRC"/arch/*/runtime.c >> "$T/defs"
	while read -r m o; do
		nm -u "$o" | awk -v m="$m" '$2 ~ /^mcr_/ { print m, $2 }'
	done < "$T/objects" > "$T/calls"
	# Every call "module symbol" whose definer lies above the caller.
	run awk 'FILENAME ~ /levels$/ { lv[$1] = $2; next }
		FILENAME ~ /defs$/ { def[$1] = $2; next }
		!($2 in def) { print $1 ": " $2 " is defined by no object"; next }
		$1 == "tramp" || lv[def[$2]] > lv[$1] { print $1 " calls " def[$2] ": " $2 }' \
		"$T/levels" "$T/defs" "$T/calls"
	assert_output ""
	# README.md's layout row names the same modules in the same order.
	row=$(grep '^| `libmcloc/`' "$SRC/README.md")
	named=$(echo "$row" | grep -o '`[a-z]*\.c`' | tr -d '`' | sed 's/\.c$//' | awk '!seen[$0]++' | tr '\n' ' ')
	[ "runtime $named" = "$RUNTIME_ORDER " ] || { echo "README: runtime $named"; false; }
}

@test "layers: each runtime file includes only the headers of its own module and those below it" {
	cd "$SRC/libmcloc"
	level=0
	for m in $RUNTIME_ORDER; do
		echo "$m $level"
		level=$((level + 1))
	done > "$T/levels"
	# "file header" for every local include; mcr.h is state.c's.
	for f in *.c; do
		sed -n 's/^#include "\([a-z]*\)\.h"/\1/p' "$f" | sed "s/^mcr\$/state/; s/^/${f%.c} /"
	done > "$T/includes"
	run awk 'FILENAME ~ /levels$/ { lv[$1] = $2; next }
		($1 in lv) && lv[$2] > lv[$1] { print $1 ".c includes " $2 "'"'"'s header" }' \
		"$T/levels" "$T/includes"
	assert_output ""
}

@test "the image descriptor's layout is spelled only in <mcloc/abi.h>" {
	cd "$SRC"
	# The trampolines reach the handlers through the header's offsets...
	run grep -nE '(#|[^0-9])(64|72)(\]|\()' arch/x86/tramp.c arch/arm64/tramp.c arch/riscv/tramp.c
	refute_output --regexp '(rdx|x2|a2)'
	run grep -c 'MCLOC_IMAGE_OFF_' arch/x86/tramp.c arch/arm64/tramp.c arch/riscv/tramp.c objpatch/fix.c
	refute_output --regexp ':0$'
	# ...and the header ties every offset to the struct.
	[ "$(grep -c '^MCLOC_ABI_AT_(' include/mcloc/abi.h)" -eq \
	  "$(grep -c '^#define MCLOC_IMAGE_OFF_' include/mcloc/abi.h)" ]
}

@test "man pages: every option entry says something, and every tool option has an entry" {
	cd "$SRC/man"
	# An entry is .TP, the option line, then text; an empty one runs
	# straight into the next .TP, .SH or .SS.
	run awk 'prev2 == ".TP" && /^\.(TP|SH|SS)/ { print FILENAME ": empty entry " prev1 }
		{ prev2 = prev1; prev1 = $0 }' recordmcount.1 objpatch.1
	assert_output ""
	for opt in kernel nop section gc-sections symbol force output in-place dry-run print \
		warn-untraced verbose quiet help version; do
		lit="\\-\\-${opt//-/\\-}"	# as groff spells it: \-\-in\-place
		grep -qF -- "$lit" recordmcount.1 || { echo "recordmcount.1 lacks --$opt"; false; }
	done
}

@test "man pages and README hold no control characters (a \\f escape typed where a form feed went in)" {
	cd "$SRC"
	run grep -nP '[\x00-\x08\x0b-\x1f\x7f]' man/*.[135] README.md
	assert_output ""
}
