# A thin wrapper around meson.  `make demo` and `make check` first install
# whatever Debian packages are missing (through sudo when not root).
BUILD     ?= build
SANBUILD  ?= build-san
MESON_OPTS ?=

# Build and test dependencies.  gcc-multilib is deliberately absent: it
# conflicts with Debian's cross compilers, so i386 uses gcc-i686-linux-gnu.
DEBS := gcc make meson ninja-build pkg-config cmake \
	libelf-dev libdw-dev libbz2-dev liblzma-dev libzydis-dev libcapstone-dev liburcu-dev musl-dev \
	bats bats-assert bats-support python3 python3-pyelftools \
	binutils-multiarch qemu-user linux-kbuild-6.1 clang strace \
	gcc-aarch64-linux-gnu gcc-riscv64-linux-gnu gcc-arm-linux-gnueabihf \
	gcc-powerpc64le-linux-gnu gcc-s390x-linux-gnu \
	gcc-mips64el-linux-gnuabi64 gcc-i686-linux-gnu \
	libc6-dev-arm64-cross libc6-dev-riscv64-cross

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all deps build demo check test clean

all: build

deps:
	@missing=$$(for p in $(DEBS); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $$missing; \
	fi

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

$(SANBUILD)/build.ninja:
	meson setup $(SANBUILD) -Db_sanitize=address,undefined -Db_lundef=false \
		-Dstatic_tools=false -Dwerror=true $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	meson configure $(BUILD) -Dwerror=true >/dev/null
	ninja -C $(BUILD)

demo: build
	examples/demo/run.sh $(BUILD)
	@echo
	examples/runtime/run.sh $(BUILD)

# Every test runs twice: in the normal build and under ASan + UBSan.
check: build $(SANBUILD)/build.ninja
	ninja -C $(SANBUILD)
	meson test -C $(BUILD) --print-errorlogs --num-processes 2
	MCLOC_SANITIZED=1 meson test -C $(SANBUILD) --print-errorlogs --num-processes 2

test: check

clean:
	rm -rf $(BUILD) $(SANBUILD)
