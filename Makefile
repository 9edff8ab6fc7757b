# A thin wrapper around meson.
#   make deps     install the Debian packages that are missing (through sudo
#                 when not root); elsewhere, say what is needed
#   make / build  configure and build; installs nothing
#   make demo     deps, build, then the bundled example
#   make demo-cross   the runtime example for aarch64 and riscv64, under qemu
#   make check    deps, build, then every test, also under ASan + UBSan
#   make fuzz     deps, then a libFuzzer campaign of FUZZ_SECONDS per
#                 harness (tests/fuzz/README.md)
BUILD     ?= build
SANBUILD  ?= build-san
FUZZBUILD ?= build-fuzz
FUZZ_SECONDS ?= 600
MESON_OPTS ?=

# Build and test dependencies.  gcc-multilib is deliberately absent: it
# conflicts with Debian's cross compilers, so i386 uses gcc-i686-linux-gnu.
# linux-source-6.1 and -6.12 are the kernels' own scripts/sorttable, which
# tests/ktables.bats builds and compares objpatch sort --kernel with.
DEBS := gcc make meson ninja-build pkg-config cmake autoconf automake libtool ccache acl attr \
	libelf-dev libdw-dev libbz2-dev liblzma-dev libzydis-dev libcapstone-dev \
	bats bats-assert bats-support python3 python3-pyelftools python3-capstone \
	binutils-multiarch qemu-user linux-kbuild-6.1 linux-source-6.1 clang strace \
	linux-source-6.12 \
	gcc-aarch64-linux-gnu gcc-riscv64-linux-gnu gcc-arm-linux-gnueabihf \
	gcc-powerpc64le-linux-gnu gcc-s390x-linux-gnu \
	gcc-mips64el-linux-gnuabi64 gcc-i686-linux-gnu \
	libc6-dev-arm64-cross libc6-dev-riscv64-cross
# The compiler cache and distributed build of tests/caches.bats.
DEBS += sccache distcc
# The linkers of tests/toolchains.bats and tests/lto.bats (ld.bfd and gold
# come with binutils).
DEBS += lld mold
# protoc reads back mcloc dump --perfetto in tests/record.bats.
DEBS += protobuf-compiler

# What the build itself needs, as a non-Debian host can check it.
BUILD_TOOLS := cc meson ninja pkg-config
BUILD_PCS   := libelf libdw capstone

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build demo demo-cross check test clean fuzz

all: build

deps:
	@if command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then \
		missing=$$(for p in $(DEBS); do \
			dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
		done); \
		if [ -n "$$missing" ]; then \
			echo "installing:" $$missing; \
			$(SUDO) apt-get update -q && \
			DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
		fi; \
	else \
		bad=""; \
		for t in $(BUILD_TOOLS); do command -v $$t >/dev/null || bad="$$bad $$t"; done; \
		for m in $(BUILD_PCS); do pkg-config --exists $$m 2>/dev/null || bad="$$bad $$m(.pc)"; done; \
		[ -f /usr/include/Zydis/Zydis.h ] || bad="$$bad Zydis"; \
		if [ -n "$$bad" ]; then \
			echo "not a Debian host: install$$bad (and, for the tests: bats, bats-assert," \
			     "bats-support, python3 with pyelftools, qemu-user, cross compilers)"; \
			exit 1; \
		fi; \
		echo "not a Debian host: the build's own dependencies are there"; \
	fi

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

$(SANBUILD)/build.ninja:
	meson setup $(SANBUILD) -Db_sanitize=address,undefined -Db_lundef=false \
		-Dstatic_tools=false $(MESON_OPTS)

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)

# The harnesses under clang, instrumented for coverage with ASan and
# UBSan, the libraries too (CFLAGS reach every target).
$(FUZZBUILD)/build.ninja:
	CC=clang CFLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
	LDFLAGS="-fsanitize=address,undefined" \
		meson setup $(FUZZBUILD) -Dfuzz=true -Dstatic_tools=false -Db_lundef=false $(MESON_OPTS)

fuzz: deps $(FUZZBUILD)/build.ninja
	ninja -C $(FUZZBUILD)
	tests/fuzz/campaign.sh $(FUZZBUILD) $(FUZZ_SECONDS)

demo: deps
	$(MAKE) build
	examples/demo/run.sh $(BUILD)
	@echo
	examples/runtime/run.sh $(BUILD)

# libmcloc for aarch64 and riscv64 (libmcloc/cross/*.ini), and the
# runtime example on each under qemu-user.
CROSS_ARCHS := aarch64 riscv64

$(BUILD)-%/build.ninja:
	meson setup $(BUILD)-$* --cross-file libmcloc/cross/$*.ini -Dtools=false

demo-cross: deps
	$(MAKE) build
	@for a in $(CROSS_ARCHS); do \
		$(MAKE) $(BUILD)-$$a/build.ninja && ninja -C $(BUILD)-$$a && \
		echo && echo "== $$a ==" && \
		examples/runtime/run.sh $(BUILD) $$a $(BUILD)-$$a/libmcloc || exit 1; \
	done

# Every test runs twice: in the normal build and under ASan + UBSan.
check: deps
	$(MAKE) build
	$(MAKE) $(SANBUILD)/build.ninja
	ninja -C $(SANBUILD)
	meson test -C $(BUILD) --print-errorlogs --num-processes 2
	MCLOC_SANITIZED=1 meson test -C $(SANBUILD) --print-errorlogs --num-processes 2

test: check

clean:
	rm -rf $(BUILD) $(SANBUILD)
