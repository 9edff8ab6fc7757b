#!/usr/bin/env bash
# fetch.sh [ARCH...]: download Debian's kernel image package of each ARCH
# (amd64, i386, armhf, mips64el; default all four, 30-70 MB each) and make
# the module corpus tests/corpus.bats and tests/bench/kmod-*.sh use:
#   $MCLOC_KMOD_CACHE/ARCH/stripped/NAME.ko   the module, its table removed
#   $MCLOC_KMOD_CACHE/ARCH/expected/NAME.txt  the shipped table, normalised
#                                             by tests/lib/mctable.py
# (default cache: ~/.cache/mcloc-kmod).  An ARCH already there is kept.
# Needs root or sudo once, to add a foreign architecture to dpkg.  This is
# an optional check: make check runs the corpus tests only where the cache
# exists, and never downloads anything itself.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cache=${MCLOC_KMOD_CACHE:-$HOME/.cache/mcloc-kmod}
sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
[ $# -gt 0 ] || set -- amd64 i386 armhf mips64el

flavour() {
	case $1 in
	amd64) echo amd64-unsigned ;; i386) echo 686-unsigned ;;
	armhf) echo armmp ;; mips64el) echo mips64r2el ;;
	*) echo "fetch.sh: no kernel flavour known for $1" >&2; return 1 ;;
	esac
}

latest() {	# the newest linux-image package of flavour $1
	apt-cache search --names-only "^linux-image-[0-9.]+-[0-9]+-$1\$" 2>/dev/null |
		awk '{ print $1 }' | sort -V | tail -1
}

updated=no
for a; do
	d=$cache/$a
	[ -f "$d/.ready" ] && { echo "$a: already in $d"; continue; }
	fl=$(flavour "$a")
	if [ "$a" != "$(dpkg --print-architecture)" ] &&
	   ! dpkg --print-foreign-architectures | grep -qx "$a"; then
		$sudo_ dpkg --add-architecture "$a"
		updated=no
	fi
	pkg=$(latest "$fl")
	if [ -z "$pkg" ] && [ $updated = no ]; then
		$sudo_ apt-get update -q >/dev/null || echo "fetch.sh: apt-get update had errors; going on with the lists there are" >&2
		updated=yes
		pkg=$(latest "$fl")
	fi
	[ -n "$pkg" ] || { echo "fetch.sh: no linux-image package for $a" >&2; exit 1; }
	rm -rf "$d"
	mkdir -p "$d/stripped" "$d/expected" "$d/orig" "$d/deb"
	(cd "$d/deb" && apt-get download -q "$pkg:$a" >/dev/null)
	dpkg -x "$d"/deb/*.deb "$d/x"
	find "$d/x" -name '*.ko' | sort | while read -r m; do
		n=$(echo "${m#"$d"/x/lib/modules/}" | tr / _)
		cp "$m" "$d/orig/$n"
		objcopy --remove-section=__mcount_loc --remove-section=.rel__mcount_loc \
			--remove-section=.rela__mcount_loc "$m" "$d/stripped/$n"
	done
	/usr/bin/python3 "$here/tests/lib/mctable.py" --out-dir "$d/expected" "$d"/orig/*.ko
	echo "$pkg" > "$d/package"
	rm -rf "$d/x" "$d/deb" "$d/orig"
	touch "$d/.ready"
	echo "$a: $pkg, $(ls "$d/stripped" | wc -l) modules"
done
