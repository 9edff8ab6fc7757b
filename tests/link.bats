#!/usr/bin/env bats
# objpatch link: every form of program a user links (PIE with RELA, PIE with
# DT_RELR, non-PIE, a shared library and its program, -ffunction-sections
# with --gc-sections), each with and without a weak function overridden
# elsewhere.  Objects go through recordmcount after each cc, the link goes
# through `objpatch link --nop`; every table must end up sorted, clean and
# check-clean, and every program must print what a plain build prints.
# The same matrix runs for aarch64 and riscv64 under qemu-user.

load helpers

FIX=$SRC/tests/fixtures/link

# inspect_clean FILE...: sorted, no duplicate, no call left, nothing else.
inspect_clean() {
	"$OBJPATCH" -j inspect "$@" | $PY -c '
import json, sys
bad = 0
for f in json.load(sys.stdin):
    s = f["summary"]
    ok = s["entries"] > 0 and s["sorted"] and s["duplicates"] == 0 and \
         s["call"] == 0 and s["other"] == 0
    if not ok:
        bad += 1
        print("not clean:", f["file"], s)
sys.exit(bad)'
}

# (util.o links first and main goes to .text.startup, first in .text, so
# the linker's table is out of order: sorting has work to do.)

# objs DIR NAME...: the paths of the objects NAME in DIR.
objs() {
	local d=$1; shift
	printf "$d/%s.o " "$@"
}

# matrix CC RUN CFLAGS...: RUN runs a program ("" natively).
matrix() {
	local cc=$1 run=$2; shift 2
	local form weak o d
	need "$cc"
	for form in pie relr nopie shared gc; do
		for weak in weak strong; do
			d=$T/$form-$weak
			mkdir -p "$d/plain"
			local names=(util main lib) cf=() lf=() rf=()
			[ $weak = strong ] && names+=(hook_strong)
			case $form in
			relr) lf=(-Wl,-z,pack-relative-relocs) ;;
			nopie) cf=(-fno-pie); lf=(-no-pie) ;;
			shared) cf=(-fPIC) ;;
			gc) cf=(-ffunction-sections); lf=(-Wl,--gc-sections); rf=(-g) ;;
			esac
			for o in "${names[@]}"; do
				"$cc" -O2 "$@" "${cf[@]}" -c "$FIX/$o.c" -o "$d/plain/$o.o"
				"$cc" -O2 "$@" -pg "${cf[@]}" $FENTRY -c "$FIX/$o.c" -o "$d/$o.o"
				"$RECORDMCOUNT" "${rf[@]}" "$d/$o.o"
			done
			local main=(util main) images=("$d/prog")
			[ $weak = strong ] && main+=(hook_strong)
			if [ $form = shared ]; then
				"$cc" -shared "$d/plain/lib.o" -o "$d/plain/libprog.so"
				"$cc" $(objs "$d/plain" "${main[@]}") -o "$d/plain/prog" -L"$d/plain" -lprog
				run "$OBJPATCH" link --nop -- "$cc" -shared "$d/lib.o" -o "$d/libprog.so"
				assert_success
				run "$OBJPATCH" link --nop -- "$cc" $(objs "$d" "${main[@]}") -o "$d/prog" \
					-L"$d" -lprog
				assert_success
				images+=("$d/libprog.so")
			else
				"$cc" "${lf[@]}" $(objs "$d/plain" "${names[@]}") -o "$d/plain/prog"
				run "$OBJPATCH" link --nop -- "$cc" "${lf[@]}" $(objs "$d" "${names[@]}") -o "$d/prog"
				assert_success
			fi
			echo "# $form-$weak" >&3
			run "$OBJPATCH" check "${images[@]}"
			assert_success
			run inspect_clean "${images[@]}"
			assert_success
			want=$(LD_LIBRARY_PATH=$d/plain $run "$d/plain/prog")
			run env LD_LIBRARY_PATH="$d" $run "$d/prog"
			assert_success
			assert_output "$want"
			if [ $form = gc ]; then
				# The unused function went, and its entry with it.
				run "$OBJPATCH" inspect --functions "$d/prog"
				assert_success
				refute_line util_unused
				assert_line util_fib
			fi
		done
	done
	# The replaced weak hook leaves an entry behind that only sorting
	# removes: an unsorted link of the same objects fails check on it.
	d=$T/pie-strong
	run "$OBJPATCH" link --no-sort -- "$cc" "$d"/{util,main,lib,hook_strong}.o -o "$d/unsorted"
	assert_success
	run "$OBJPATCH" check "$d/unsorted"
	assert_failure 1
	assert_output --partial "lies in no function"
	assert_output --partial "the table is not sorted"
}

@test "x86_64: every link form is sorted, clean, NOPed and runs" {
	FENTRY=-mfentry matrix cc ""
}

@test "aarch64 under qemu: every link form is sorted, clean, NOPed and runs" {
	need qemu-aarch64
	FENTRY= matrix aarch64-linux-gnu-gcc "qemu-aarch64 -L /usr/aarch64-linux-gnu"
}

# riscv64 sites must be 4-byte aligned for atomic patching, which compressed
# code does not give an mcount call after the prologue: build without C.
@test "riscv64 under qemu: every link form is sorted, clean, NOPed and runs" {
	need qemu-riscv64
	FENTRY= matrix riscv64-linux-gnu-gcc "qemu-riscv64 -L /usr/riscv64-linux-gnu" -march=rv64g
}

@test "link runs the command after -- unchanged, -j and -p included" {
	run "$OBJPATCH" link -- sh -c 'echo "$*" > "$0.args"; cp /bin/true "$0"' "$T/out" -p -j --json --pretty -o "$T/out"
	assert_success
	[ "$(cat "$T/out.args")" = "-p -j --json --pretty -o $T/out" ]
	# Before the --, -j still belongs to objpatch.
	run "$OBJPATCH" -j link -- sh -c 'cp /bin/true "$0"' "$T/out2" -o "$T/out2"
	assert_success
}

@test "link --nop fails with one line when an object was never recorded, and leaves no output" {
	for c in main fib stats; do
		cc -O2 -pg -mfentry -c "$DEMO/$c.c" -I"$DEMO" -o "$T/$c.o"
	done
	"$RECORDMCOUNT" "$T/main.o" "$T/fib.o"
	run "$OBJPATCH" link --nop -- cc "$T"/{main,fib,stats}.o -o "$T/prog"
	assert_failure 1
	[ "${#lines[@]}" -eq 1 ]
	assert_output --regexp "^$T/prog: error: objpatch: 3 calls to __fentry__ in no call-site table \(the first at stats_[a-z]+\+0x0\)"
	[ ! -e "$T/prog" ]
	# No table at all: the same.
	for c in main fib stats; do
		cc -O2 -pg -mfentry -c "$DEMO/$c.c" -I"$DEMO" -o "$T/$c.o"
	done
	run "$OBJPATCH" link --nop -- cc "$T"/{main,fib,stats}.o -o "$T/prog"
	assert_failure 1
	assert_output --partial "calls to __fentry__ in no call-site table"
	[ ! -e "$T/prog" ]
	# Recorded, it links and runs; without --nop nothing is promised.
	"$RECORDMCOUNT" "$T"/{main,fib,stats}.o
	run "$OBJPATCH" link --nop -- cc "$T"/{main,fib,stats}.o -o "$T/prog"
	assert_success
	run "$T/prog"
	assert_output "sum=143 max=55 mean=14.30"
}

@test "link warns about -pg on the link line, and still links" {
	demo_objs "$T/o" record
	run "$OBJPATCH" link --nop -- cc -pg "$T"/o/*.o -o "$T/prog"
	assert_success
	assert_output --partial "-pg on the link line links gcrt1.o"
}

@test "link of 40,000 functions in 20 objects: the grown symbol table moves, within bounds" {
	# Sorting adds __start_/__stop_ symbols, so .symtab and .strtab grow
	# and move past the image's end; a bound on the output's size once
	# left them out and refused this link.
	$PY "$SRC/tests/lib/gen-funcs.py" "$T" 40000 20
	for c in "$T"/*.c; do
		cc -O1 -pg -mfentry -c "$c" -o "${c%.c}.o"
		"$RECORDMCOUNT" "${c%.c}.o"
	done
	# (Without --nop: NOPing dirties .text, which hid the bug.)
	run "$OBJPATCH" link -- cc "$T"/*.o -o "$T/big"
	assert_success
	run "$OBJPATCH" check "$T/big"
	assert_success
	"$T/big"
}

# piled_image DIR K: DIR/prog, whose table needs K piles (K interleaved
# ascending runs, see label_piles() in common/mcsort.c).  K objects each
# hold K functions, function I in section .text.sorted.I.J of object J;
# the linker's SORT(.text.sorted.*) places them by I then J, while the
# table lists each object's entries in turn.  Not yet sorted.
piled_image() {
	local d=$1 k=$2 i j
	mkdir -p "$d"
	for ((j = 0; j < k; j++)); do
		for ((i = 0; i < k; i++)); do
			printf '__attribute__((section(".text.sorted.%02d.%02d"), noinline))\n' "$i" "$j"
			printf 'int f%d_%d(int x) { return x * %d + %d; }\n' "$i" "$j" $((i + 2)) "$j"
		done > "$d/o$j.c"
		cc -O2 -pg -mfentry -c "$d/o$j.c" -o "$d/o$j.o"
		"$RECORDMCOUNT" "$d/o$j.o"
	done
	echo 'int main(void) { return 0; }' | cc -O2 -x c -c - -o "$d/main.o"
	cc "$d/main.o" "$d"/o*.o -o "$d/prog"
}

# piles FILE: the fewest ascending runs FILE's table splits into (the
# longest strictly descending subsequence of its entries).
piles() {
	$MCTABLE --linked "$1" | $PY -c '
import sys
v = [int(x, 16) for x in sys.stdin.read().split()]
down = [1] * len(v)
for i in range(len(v)):
    for j in range(i):
        if v[j] > v[i]:
            down[i] = max(down[i], down[j] + 1)
print(max(down, default=0))'
}

@test "sort merges 5, 10 and 16 piles of a linked table (3 and 4 merge rounds, odd piles left over)" {
	ld --verbose 2>/dev/null | grep -q 'SORT(\.text\.sorted\.\*)' ||
		skip "the linker's script does not sort .text.sorted.* sections by name"
	for k in 5 10 16; do
		piled_image "$T/p$k" $k
		[ "$(piles "$T/p$k/prog")" -eq $k ] || { echo "$k objects gave $(piles "$T/p$k/prog") piles"; false; }
		$MCTABLE --linked "$T/p$k/prog" | sort > "$T/p$k/want"
		[ "$(wc -l < "$T/p$k/want")" -eq $((k * k)) ]
		run "$OBJPATCH" check "$T/p$k/prog"
		assert_failure 1
		assert_output --partial "the table is not sorted"
		run "$OBJPATCH" sort "$T/p$k/prog"
		assert_success
		# Sorted by number, and every entry kept once.
		$MCTABLE --linked "$T/p$k/prog" > "$T/p$k/got"
		sort -c <($PY -c 'import sys; [print("%016x" % int(x, 16)) for x in sys.stdin.read().split()]' < "$T/p$k/got")
		diff "$T/p$k/want" <(sort "$T/p$k/got")
		run "$OBJPATCH" check "$T/p$k/prog"
		assert_success
		"$T/p$k/prog"
	done
}
