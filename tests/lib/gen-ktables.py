#!/usr/bin/python3
"""gen-ktables.py DIR ARCH N: the sources of a vmlinux-like image with the
kernel's other build-time sorted tables, for ARCH (x86_64, i386, aarch64,
riscv64, s390x, ppc64le, mips64el, mips, arm).

Writes DIR/k.c: N functions, every third in .init.text, which the linker
script DIR/k.lds places after .text, so the exception table ld concatenates
is out of address order, as a kernel's is.  Each function holds an entry of
__ex_table in ARCH's layout (see ktables.py), every seventh a second one for
the same instruction with other data (equal keys, whose order a stable sort
keeps), and on x86_64 a __mcount_loc entry.  main_extable_sort_needed is 1
in .init.data, as the kernel defines it.

On x86_64, objtool --orc adds the ORC tables to the compiled object; DIR/orc.s
adds entries the compiler never makes: four real ones (one of them the end
of the stack) and two weak terminators for one address, whose order is the subtle part of sorting ORC."""
import os
import sys

d, arch, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(d, exist_ok=True)
wide = arch in ("x86_64", "aarch64", "riscv64", "s390x", "ppc64le", "mips64el")
layout = {"ppc64le": "rel"}.get(arch, "abs" if arch in ("arm", "mips", "mips64el") else
                                "rel_data")


def entry(data):
    if layout == "rel_data":
        return ".balign 4\\n.long 1b - ., 2b - ., %d\\n" % data
    if layout == "rel":
        return ".balign 4\\n.long 1b - ., 2b - .\\n"
    word = ".8byte" if wide else ".4byte"
    return ".balign %d\\n%s 1b, 2b\\n" % (8 if wide else 4, word)


with open(os.path.join(d, "k.c"), "w") as f:
    w = f.write
    w("__attribute__((section(\".init.data\"))) unsigned int main_extable_sort_needed = 1;\n")
    w("int sink;\n")
    for i in range(n):
        sec = '__attribute__((section(".init.text"))) ' if i % 3 == 0 else ""
        tab = entry(i)
        if i % 7 == 0:
            tab += entry(100000 + i)
        # (x86_64: a 5-byte NOP, as a NOPed call to __fentry__ is.)
        mc = "3: .byte 0x0f, 0x1f, 0x44, 0, 0\\n.pushsection __mcount_loc,\\\"a\\\"\\n" \
            ".balign 8\\n.quad 3b\\n.popsection\\n" if arch == "x86_64" else ""
        w("%s__attribute__((noinline)) void f%d(void)\n{\n\tsink += %d;\n"
          "\t__asm__ volatile(\"1: nop\\n2: nop\\n.pushsection __ex_table,\\\"a\\\"\\n%s"
          ".popsection\\n%s\");\n}\n" % (sec, i, i, tab, mc))
    w("void _start(void)\n{\n")
    for i in range(0, n, max(1, n // 16)):
        w("\tf%d();\n" % i)
    w("}\n")

base = {"x86_64": "0xffffffff81000000", "aarch64": "0xffff800008000000",
        "riscv64": "0xffffffff80000000", "s390x": "0x100000", "ppc64le": "0xc000000000000000",
        "mips64el": "0xffffffff80100000"}.get(arch, "0xc0100000")
with open(os.path.join(d, "k.lds"), "w") as f:
    f.write("""ENTRY(_start)
SECTIONS {
	. = %s + SIZEOF_HEADERS;
	.text : { *(.text .text.*) }
	.init.text : { *(.init.text) }
	. = ALIGN(16);
	__ex_table : { __start___ex_table = .; KEEP(*(__ex_table)) __stop___ex_table = .; }
	. = ALIGN(4);
	.orc_unwind_ip : { KEEP(*(.orc_unwind_ip)) }
	. = ALIGN(2);
	.orc_unwind : { KEEP(*(.orc_unwind)) }
	.rodata : { *(.rodata .rodata.*) }
	. = ALIGN(4096);
	.init.data : {
		*(.init.data)
		. = ALIGN(8);
		__start_mcount_loc = .;
		KEEP(*(__mcount_loc))
		__stop_mcount_loc = .;
	}
	.data : { *(.data .data.* .sdata .sdata.*) }
	.bss : { *(.bss .bss.* .sbss .sbss.*) }
	/DISCARD/ : { *(.note.GNU-stack) *(.comment) *(.eh_frame) *(.note.gnu.property) }
}
""" % base)

if arch == "x86_64":
    # ORC entries by hand: sp_offset, bp_offset (s16 each), then sp_reg in
    # the low nibble of byte 4 and end in bit 2 of byte 5.  A real entry
    # has sp_reg SP (5); a weak terminator sp_reg UNDEFINED (0), end 0.
    with open(os.path.join(d, "orc.s"), "w") as f:
        w = f.write
        w("\t.text\n\t.globl orc_dup\n\t.type orc_dup,@function\norc_dup:\n\tnop\n\tret\n"
          "\t.size orc_dup,.-orc_dup\n")
        # (sp_offset, sp_reg, byte 5): the last is real, as its end bit says.
        kinds = [(8, 5, 0), (0, 0, 0), (16, 5, 0), (24, 5, 0), (0, 0, 0), (0, 0, 4)]
        w("\t.section .orc_unwind_ip,\"a\"\n\t.balign 4\n")
        for _ in kinds:
            w("\t.long orc_dup - .\n")
        w("\t.section .orc_unwind,\"a\"\n")
        for k, (sp, reg, b5) in enumerate(kinds):
            w("\t.short %d, %d\n\t.byte %d, %d\n" % (sp, k, reg, b5))
        w("\t.section .note.GNU-stack,\"\",@progbits\n")
