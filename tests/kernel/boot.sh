#!/usr/bin/env bash
# Boot real Linux 6.12 kernels whose ftrace tables mcloc made, and compare
# them with the kernels the kernel's own tools make.  Optional, never run
# by `make check`: each kernel takes minutes to build.  See README.md here.
#
# Usage: tests/kernel/boot.sh [x86_64|arm|all]     (default: all)
# Environment:
#   RECORDMCOUNT, OBJPATCH  the tools under test (default: build/ here)
#   BOOT_SORT=objpatch      sort the "mcloc" kernels' tables with objpatch
#                           (default); =sorttable keeps the kernel's tool
#   BOOT_MCLOC=rerecord     make the "mcloc" kernel from the "kernel" one's
#                           objects, every table made again by recordmcount
#                           (default, minutes); =compile builds it all again
#                           with recordmcount in the compiles (see README)
#   MCLOC_KERNEL_CACHE      where the source and the builds live
#                           (default ~/.cache/mcloc-kernel; dirs boot-*)
#   KERNEL_SOURCE           the tarball (/usr/src/linux-source-6.12.tar.xz)
#   JOBS                    make -j (default 2)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
rmc=$(realpath "${RECORDMCOUNT:-$here/build/recordmcount/recordmcount}")
op=$(realpath "${OBJPATCH:-$here/build/objpatch/objpatch}")
sort_with=${BOOT_SORT:-objpatch}
mcloc_way=${BOOT_MCLOC:-rerecord}
jobs=${JOBS:-2}
cache=${MCLOC_KERNEL_CACHE:-$HOME/.cache/mcloc-kernel}
tarball=${KERNEL_SOURCE:-/usr/src/linux-source-6.12.tar.xz}
src=$cache/boot-src
kdir=$here/tests/kernel
arches=${1:-all}
[ "$arches" = all ] && arches="x86_64 arm"

die() { echo "boot.sh: error: $*" >&2; exit 1; }
case $sort_with in objpatch|sorttable) ;; *) die "BOOT_SORT must be objpatch or sorttable";; esac
case $mcloc_way in rerecord|compile) ;; *) die "BOOT_MCLOC must be rerecord or compile";; esac
[ -x "$rmc" ] || die "no recordmcount at $rmc (build mcloc, or set RECORDMCOUNT)"
[ -x "$op" ] || die "no objpatch at $op (build mcloc, or set OBJPATCH)"
[ -f "$tarball" ] || die "no $tarball (apt-get install linux-source-6.12)"

if [ ! -d "$src" ]; then
	echo "extracting $tarball into $src (once)..."
	mkdir -p "$cache"
	rm -rf "$src.tmp"; mkdir "$src.tmp"
	tar -xf "$tarball" -C "$src.tmp" --strip-components=1
	mv "$src.tmp" "$src"
fi

# Per architecture: make's ARCH, the cross prefix, the image, the qemu
# command and console, and the options added to tinyconfig.  Only what
# booting to a traced userspace needs: a serial console, an initramfs,
# ELF, tracefs and the dynamic function tracer.
common_opts="PRINTK TTY PROC_FS SYSFS DEBUG_FS BLK_DEV_INITRD BINFMT_ELF
	FTRACE FUNCTION_TRACER DYNAMIC_FTRACE"
arch_setup() {
	case $1 in
	x86_64)
		karch=x86_64 cross= image=arch/x86/boot/bzImage
		opts="64BIT SERIAL_8250 SERIAL_8250_CONSOLE UNWINDER_ORC
			RELOCATABLE RANDOMIZE_BASE"
		no_opts="UNWINDER_GUESS UNWINDER_FRAME_POINTER"
		qemu=(qemu-system-x86_64 -m 256M) console=ttyS0 ;;
	arm)
		karch=arm cross=arm-linux-gnueabihf- image=arch/arm/boot/zImage
		opts="MMU ARCH_MULTIPLATFORM ARCH_MULTI_V7 ARCH_VIRT AEABI VFP
			VFPv3 ARM_AMBA SERIAL_AMBA_PL011
			SERIAL_AMBA_PL011_CONSOLE"
		no_opts="THUMB2_KERNEL XIP_KERNEL"
		qemu=(qemu-system-arm -M virt -cpu cortex-a15 -m 256M) console=ttyAMA0 ;;
	*) die "unknown architecture $1 (x86_64 or arm)" ;;
	esac
	command -v "${cross}gcc" >/dev/null || die "no ${cross}gcc"
	command -v "${qemu[0]}" >/dev/null || die "no ${qemu[0]}"
}

# make in build directory $dir, with the variant's CC when it has one.
kmake() {
	nice -n 5 make -s -C "$src" O="$dir" ARCH="$karch" \
		${cross:+CROSS_COMPILE=$cross} ${cc:+CC=$cc} -j"$jobs" "$@"
}

# The configuration, made once per architecture in the "kernel" build
# and copied to the "mcloc" one, so that the two differ only in tools.
configure() {
	local o missing=
	if [ ! -f "$dir/.config" ]; then
		kmake tinyconfig >/dev/null
		for o in $common_opts $opts; do
			"$src/scripts/config" --file "$dir/.config" --enable "$o"
		done
		for o in $no_opts; do
			"$src/scripts/config" --file "$dir/.config" --disable "$o"
		done
		kmake olddefconfig >/dev/null
	fi
	for o in $common_opts $opts BUILDTIME_MCOUNT_SORT; do
		grep -q "^CONFIG_$o=y" "$dir/.config" || missing="$missing $o"
	done
	[ -z "$missing" ] || die "$dir/.config lacks:$missing"
}

# A tool of the build, kept under NAME.kernel and replaced by a script.
# make would rebuild a hostprog it found stale, so look again every run;
# vmlinux depends on scripts/sorttable, so an unchanged script is left be.
replace_hostprog() {
	local prog=$dir/scripts/$1
	if [ ! -f "$prog.kernel" ] || head -c4 "$prog" | grep -q ELF; then
		mv -f "$prog" "$prog.kernel"
	fi
	printf '#!/bin/sh\n# boot.sh: %s\n%s\n' "$2" "$3" > "$prog.new"
	chmod +x "$prog.new"
	if cmp -s "$prog.new" "$prog"; then rm "$prog.new"; else mv "$prog.new" "$prog"; fi
}

# The sorting step of link-vmlinux.sh: keep the image it is given (the
# tables as the compiler and linker left them), then sort, with the
# kernel's sorttable or with objpatch's drop-in for it.
sort_step() {
	local how=$1 cmd keep tag=$1
	keep="for img; do :; done; cp \"\$img\" \"$dir/vmlinux.presort\""
	if [ "$how" = objpatch ]; then
		cmd="exec \"$op\" sorttable \"\$@\"" tag="objpatch $op"
	else
		cmd="exec \"$dir/scripts/sorttable.kernel\" \"\$@\""
	fi
	replace_hostprog sorttable "sort the tables ($how)" "$keep; $cmd"
	# A changed sorter must reach the image: relink.
	if [ "$(cat "$dir/.boot-sort" 2>/dev/null)" != "$tag" ]; then
		rm -f "$dir/vmlinux"
		echo "$tag" > "$dir/.boot-sort"
	fi
}

# x86_64 compiles with gcc's -mrecord-mcount; the "mcloc" kernel has
# recordmcount write that table instead.  A CC wrapper does it: where the
# kernel asks for -mrecord-mcount (only the objects it traces), drop it
# and compile through `recordmcount --kernel --`.  Everything else,
# Kconfig's probes included, reaches gcc untouched, so .config is the same.
write_cc_wrapper() {
	cat > "$dir/mcloc-cc" <<EOS
#!/bin/sh
# boot.sh: gcc, with recordmcount instead of -mrecord-mcount
for a; do
	case \$a in -mrecord-mcount) rec=1 ;; esac
done
[ -n "\${rec:-}" ] || exec gcc "\$@"
for a; do
	shift
	[ "\$a" = -mrecord-mcount ] || set -- "\$@" "\$a"
done
exec "$rmc" --kernel -- gcc "\$@"
EOS
	chmod +x "$dir/mcloc-cc"
}

# The "mcloc" build as a copy of the "kernel" one, each object's table
# thrown away and made again by `recordmcount --kernel --force`: the
# compiler's code is the same bytes in both kernels, only the tables'
# maker differs.  The objects are those that have a table (the ones the
# kernel traces), not vmlinux.o, which the link makes again.
rerecord() {
	local from=$cache/boot-$1-kernel n
	rm -rf "$dir"
	cp -a "$from" "$dir"
	rm -f "$dir/vmlinux.presort" "$dir/.boot-sort"
	# The build's own tools (objtool) have the build directory's path in
	# their commands: in the copy, `make prepare` builds them again, and
	# every object, which depends on objtool, would be compiled again by
	# gcc.  Give what it rebuilt the time of the copied build's objtool
	# (the last thing its tools build made, older than any object), so
	# that only the objects made again below count as new.
	local ref=$from/tools/objtool/objtool
	[ -f "$ref" ] || ref=$from/include/config/auto.conf
	touch "$dir/.boot-copied"
	kmake prepare
	find "$dir" -newer "$dir/.boot-copied" -exec touch -h -r "$ref" {} +
	touch "$dir/.boot-copied"
	kmake prepare
	# (make writes Makefile and .missing-syscalls.d every time.)
	[ -z "$(find "$dir" -type f -newer "$dir/.boot-copied" ! -name Makefile ! -name .missing-syscalls.d)" ] ||
		die "$1/mcloc: make prepare keeps rebuilding in the copy: $(find "$dir" -type f -newer "$dir/.boot-copied" | head -3)"
	n=$(cd "$dir" && grep -rlZF --include='*.o' __mcount_loc . |
		grep -zvx ./vmlinux.o | tee "$dir/.boot-rerecorded" | tr -cd '\0' | wc -c)
	(cd "$dir" && xargs -0 -r "$rmc" --kernel --force -q < .boot-rerecorded)
	echo "$1/mcloc: recordmcount --kernel --force made the tables of $n objects again"
}

# The build directory of architecture $1's variant $2: the two ways of
# making the "mcloc" kernel keep apart, so that each stays incremental.
vdir() {
	local d=$cache/boot-$1-$2
	[ "$2/$mcloc_way" = mcloc/compile ] && d=$d-compile
	echo "$d"
}

# Build variant $2 ("kernel" or "mcloc") of architecture $1 into $dir.
build() {
	local arch=$1 variant=$2 how=sorttable
	dir=$(vdir "$arch" "$variant") cc=
	if [ "$variant" = mcloc ]; then
		how=$sort_with
		if [ "$mcloc_way" = rerecord ]; then
			rerecord "$arch"
		elif [ "$arch" = x86_64 ]; then
			mkdir -p "$dir"
			write_cc_wrapper
			cc=$dir/mcloc-cc
		fi
		mkdir -p "$dir"
		[ -f "$dir/.config" ] || cp "$cache/boot-$arch-kernel/.config" "$dir/.config"
	fi
	mkdir -p "$dir"
	configure
	kmake scripts
	if [ "$variant" = mcloc ] && [ "$arch" = arm ]; then
		# arm has the kernel run scripts/recordmcount on each object.
		replace_hostprog recordmcount "mcloc's recordmcount" \
			"exec \"$rmc\" --kernel \"\$@\""
	fi
	sort_step "$how"
	echo "building $arch/$variant in $dir ..."
	kmake "$(basename "$image")" > "$dir/build.log" 2>&1 ||
		{ tail -20 "$dir/build.log"; die "$arch/$variant: the build failed ($dir/build.log)"; }
	grep -q '^# boot.sh' "$dir/scripts/sorttable" ||
		die "$arch/$variant: make rebuilt scripts/sorttable over the wrapper"
	[ -f "$dir/vmlinux.presort" ] || die "$arch/$variant: the sort step did not run"
}

# The initramfs: /init (init.c, static) and /dev/console, through the
# build's own gen_init_cpio, so that making it needs no root.
initramfs() {
	local w=$dir/boot-initramfs
	mkdir -p "$w"
	"${cross}gcc" -static -O2 -Wall -o "$w/init" "$kdir/init.c"
	cat > "$w/list" <<EOS
dir /dev 0755 0 0
nod /dev/console 0600 0 0 c 5 1
file /init $w/init 0755 0 0
EOS
	"$dir/usr/gen_init_cpio" "$w/list" > "$w/initramfs.cpio"
	echo "$w/initramfs.cpio"
}

# Boot $dir's image; the summary line init prints, or nothing.
boot() {
	local initrd log=$dir/boot.log
	initrd=$(initramfs)
	timeout 600 "${qemu[@]}" -nographic -no-reboot -kernel "$dir/$image" \
		-initrd "$initrd" -append "console=$console panic=-1" \
		< /dev/null > "$log" 2>&1 || true
	tr -d '\r' < "$log" | sed -n 's/^MCLOC-BOOT: //p' | tail -1
}

# objpatch's own verdict on an image: "clean", or its problem count and
# first line (one line a problem).
check_image() {
	local out
	if out=$("$op" check --kernel "$1" 2>&1); then
		echo clean
	else
		echo "$(grep -c . <<<"$out") problem line(s), first: $(head -1 <<<"$out")"
	fi
}

val() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }

# Build, boot and report one variant; sets ent_$variant etc. for compare.
run() {
	local arch=$1 variant=$2 label line counts
	build "$arch" "$variant"
	counts=$("$kdir/kimage.py" mcount "$dir/vmlinux" "$dir/mcount.entries")
	line=$(boot)
	case $variant/$arch in
	kernel/x86_64) label="gcc -mrecord-mcount, scripts/sorttable" ;;
	kernel/*) label="scripts/recordmcount, scripts/sorttable" ;;
	*) label="recordmcount --kernel, ${sort_with/#objpatch/objpatch sorttable}" ;;
	esac
	printf '%-7s %-6s (%s)\n' "$arch" "$variant" "$label"
	printf '        __mcount_loc: %s entries, %s nonzero\n' ${counts% *} ${counts#* }
	echo "        objpatch check --kernel: $(check_image "$dir/vmlinux")"
	if [ -n "$line" ]; then
		printf '        booted: yes; available_filter_functions %s, enabled_functions %s, trace entries %s, function tracer %s, ftrace_bug %s\n' \
			"$(val available_filter_functions "$line")" "$(val enabled_functions "$line")" \
			"$(val trace_entries "$line")" "$(val function_tracer "$line")" "$(val ftrace_bug "$line")"
	else
		echo "        booted: NO (no summary line; see $dir/boot.log)"
	fi
	eval "counts_$variant=\"\$counts\" line_$variant=\"\$line\""
}

# Whether the mcloc kernel's figure $3 equals the kernel tools' $2.
compare() {
	if [ -n "$2" ] && [ "$2" = "$3" ]; then
		echo "        $1 equal: yes"
	else
		echo "        $1 equal: NO (mcloc ${3:-none}, kernel ${2:-none})"
		status=1
	fi
}

status=0
for arch in $arches; do
	arch_setup "$arch"
	run "$arch" kernel
	run "$arch" mcloc
	echo "$arch: mcloc's kernel against the kernel tools' one:"
	compare "__mcount_loc entries (all, nonzero)" "$counts_kernel" "$counts_mcloc"
	k=$(vdir "$arch" kernel) m=$(vdir "$arch" mcloc)
	if cmp -s "$k/mcount.entries" "$m/mcount.entries"; then
		echo "        the same addresses: yes"
	else
		echo "        the same addresses: NO (diff $k/mcount.entries $m/mcount.entries)"; status=1
	fi
	# With BOOT_MCLOC=rerecord only the version string (build number and
	# time: .rodata, .data) and the build ID (.notes) should; compile adds
	# .init.data (times in the built-in default initramfs).
	echo "        image sections that differ: $("$kdir/kimage.py" diff-sections "$k/vmlinux" "$m/vmlinux")"
	for f in available_filter_functions enabled_functions; do
		compare "$f" "$(val $f "$line_kernel")" "$(val $f "$line_mcloc")"
	done
	for v in kernel mcloc; do
		eval "l=\$line_$v"
		[ "$(val ftrace_bug "$l")" = no ] && [ "$(val function_tracer "$l")" = on ] || status=1
	done
done
exit $status
