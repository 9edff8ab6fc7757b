#!/usr/bin/python3
"""gen-image.py DIR N [--asm]: a vmlinux-like image with N traced functions.

Writes DIR/vmlinux.lds, a linker script in the kernel's shape: __mcount_loc
is collected into .init.data between __start_mcount_loc and
__stop_mcount_loc.  Half the functions are "hot" and placed first, so the
table the linker concatenates is out of address order, as in a kernel.

Without --asm, writes DIR/gen.c (C, to build with -pg -mfentry and
recordmcount).  With --asm, writes DIR/gen.s, which already holds the
call sites and the table (for a 1,000,000-entry image that compiles in
seconds)."""
import os
import sys

d, n = sys.argv[1], int(sys.argv[2])
asm = "--asm" in sys.argv
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "vmlinux.lds"), "w") as f:
    f.write("""ENTRY(fn0)
SECTIONS {
	. = 0xffffffff81000000 + SIZEOF_HEADERS;
	.text : { *(.text.hot .text.hot.*) *(.text .text.*) }
	.rodata : { *(.rodata .rodata.*) }
	. = ALIGN(4096);
	.init.data : {
		*(.init.data)
		. = ALIGN(8);
		__start_mcount_loc = .;
		KEEP(*(__mcount_loc))
		__stop_mcount_loc = .;
	}
	.data : { *(.data .data.*) }
	.bss : { *(.bss .bss.*) }
	/DISCARD/ : { *(.note.GNU-stack) *(.comment) *(.eh_frame) }
}
""")
if asm:
    with open(os.path.join(d, "gen.s"), "w") as f:
        w = f.write
        w("\t.globl __fentry__\n\t.text\n__fentry__:\n\tret\n")
        for i in range(n):
            sec = ".text.hot" if i % 2 else ".text"
            w(f"\t.section {sec},\"ax\"\n\t.globl fn{i}\n\t.type fn{i},@function\n"
              f"fn{i}:\n\tcall __fentry__\n\tret\n\t.size fn{i},.-fn{i}\n")
        w("\t.section __mcount_loc,\"a\"\n")
        for i in range(n):
            w(f"\t.quad fn{i}\n")
        w("\t.section .init.data,\"aw\"\n\t.quad 0\n")
else:
    with open(os.path.join(d, "gen.c"), "w") as f:
        w = f.write
        w('__asm__(".globl __fentry__\\n.text\\n__fentry__: ret\\n");\n')
        w("int sink;\nint __attribute__((section(\".init.data\"))) init_value = 1;\n")
        for i in range(n):
            attr = '__attribute__((section(".text.hot"))) ' if i % 2 else ""
            w(f"{attr}void fn{i}(int x) {{ sink += x + {i}; }}\n")
