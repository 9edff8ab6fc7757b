#!/usr/bin/env bash
# Unpack Debian's arm64 and s390x kernel images under the kmod-oracle cache
# (extra/ARCH/x), for tests/corpus.bats (see fetch.sh beside it).  Needs root (or sudo) once, for
# dpkg --add-architecture and apt-get update.
set -euo pipefail
cache=${MCLOC_KMOD_CACHE:-$HOME/.cache/mcloc-kmod}/extra
sudo_=""; [ "$(id -u)" = 0 ] || sudo_=sudo
for a in arm64 s390x; do
	[ -d "$cache/$a/x" ] && continue
	dpkg --print-foreign-architectures | grep -qx "$a" || $sudo_ dpkg --add-architecture "$a"
done
# (A failed index of some other architecture must not stop us.)
$sudo_ apt-get update -q >/dev/null || echo "fetch-extra.sh: apt-get update had errors; going on with the lists there are" >&2
for a in arm64 s390x; do
	[ -d "$cache/$a/x" ] && continue
	flavour=$a; [ "$a" = arm64 ] && flavour=arm64-unsigned
	pkg=$(apt-cache search --names-only "^linux-image-[0-9.]+-[0-9]+-$flavour\$" | awk '{print $1}' | sort -V | tail -1)
	mkdir -p "$cache/$a"
	(cd "$cache/$a" && apt-get download -q "$pkg:$a" >/dev/null && dpkg -x ./*.deb x && rm -f ./*.deb)
	echo "$a: $pkg, $(find "$cache/$a/x" -name '*.ko' | wc -l) modules"
done
