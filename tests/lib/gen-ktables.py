#!/usr/bin/python3
"""gen-ktables.py DIR ARCH N [VERSION]: the sources of a vmlinux-like image
with the kernel's other build-time sorted tables, for ARCH (x86_64, i386,
aarch64, riscv64, s390x, ppc64le, mips64el, mips, arm), as Linux VERSION
(6.1, the default, or 6.12) builds them.

Writes DIR/k.c: N functions, every third in .init.text, which the linker
script DIR/k.lds places after .text, so the exception table ld concatenates
is out of address order, as a kernel's is.  Each function holds an entry of
__ex_table in ARCH's layout (see ktables.py), every seventh a second one for
the same instruction with other data (equal keys, whose order a stable sort
keeps), and on x86_64 a __mcount_loc entry.  main_extable_sort_needed is 1
in .init.data, as the kernel defines it.

On x86_64, objtool --orc adds the ORC tables to the compiled object; DIR/orc.s
adds entries the compiler never makes: four real ones (one of them the end
of the stack) and two weak terminators for one address, whose order is the subtle part of sorting ORC.

As 6.12 (every architecture): a linux_banner that names the version, and
DIR/w.c, weak definitions of some functions that k.c defines again (the
link keeps their code under no symbol), each with call-site entries where
the architecture records them: x86_64 a 5-byte NOP at the entry; aarch64
two NOPs 8 bytes before the function (CALL_OPS, -fpatchable-function-
entry=4,2; the image is linked as a PIE, so the entries are the addends of
R_AARCH64_RELATIVE relocations, zeros in place); arm a NOP inside the
function.  On x86_64 no objtool: DIR/orc.s holds an .orc_header (6.12's
hash) and an entry in 6.4's layout for every function, and in the group
for one address two entries whose weakness the two layouts read
differently."""
import os
import sys

d, arch, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
version = sys.argv[4] if len(sys.argv) > 4 else "6.1"
new = version != "6.1"
# Architectures whose call-site entries this image has, and how.
mcount = {"x86_64": "x86_64", "aarch64": "aarch64", "arm": "arm"}.get(arch)
if not new and arch != "x86_64":
    mcount = None
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


def site(where):
    """The asm of a call-site entry inside a function, as MCOUNT records it."""
    if mcount == "x86_64":
        # (a 5-byte NOP, as a NOPed call to __fentry__ is.)
        return "3: .byte 0x0f, 0x1f, 0x44, 0, 0\\n.pushsection __mcount_loc,\\\"a\\\"\\n" \
            ".balign 8\\n.quad 3b\\n.popsection\\n"
    if mcount == "arm":
        return "3: nop\\n.pushsection __mcount_loc,\\\"a\\\"\\n.balign 4\\n" \
            ".4byte 3b\\n.popsection\\n"
    return ""


def entry_fn(name, body):
    """A function NAME (asm, aarch64) whose entry has two NOPs 8 bytes
    before it, as -fpatchable-function-entry=4,2 puts them, and BODY."""
    return ("\t.balign 8\n3:\tnop\n\tnop\n\t.type %s,%%function\n%s:\n\tnop\n\tnop\n%s"
            "\tret\n\t.size %s,.-%s\n\t.pushsection __mcount_loc,\"a\"\n\t.balign 8\n"
            "\t.8byte 3b\n\t.popsection\n" % (name, name, body, name, name))


NWEAK = 5 if new and mcount else 0

with open(os.path.join(d, "k.c"), "w") as f:
    w = f.write
    w("__attribute__((section(\".init.data\"))) unsigned int main_extable_sort_needed = 1;\n")
    if new:
        w("const char linux_banner[] = \"Linux version %s.0 (mcloc@tests) (gcc) #1\\n\";\n"
          % version)
    w("int sink;\n")
    # Strong definitions of what w.c defines weak (the link keeps both
    # codes; the symbol names this one).
    for i in range(NWEAK):
        if mcount == "aarch64":
            w("__asm__(\".text\\n.globl fw%d\\n%s\");\n" %
              (i, entry_fn("fw%d" % i, "").replace("\n", "\\n").replace("\t", "\\t")
               .replace('"', '\\"')))
        else:
            w("void fw%d(void)\n{\n\t__asm__ volatile(\"%s\");\n\tsink += %d;\n}\n"
              % (i, site(arch), 1000 + i))
    if mcount == "aarch64":
        # (The entries of the aarch64 image: functions with CALL_OPS, every
        # other one in .init.text, so the table is out of order.)
        for i in range(0, n, 3):
            w("__asm__(\".section %s,\\\"ax\\\"\\n%s\");\n" %
              (".init.text" if i % 2 else ".text.g%d" % i, entry_fn("g%d" % i, "").replace("\n", "\\n").replace("\t", "\\t")
               .replace('"', '\\"')))
    for i in range(n):
        sec = '__attribute__((section(".init.text"))) ' if i % 3 == 0 else ""
        tab = entry(i)
        if i % 7 == 0:
            tab += entry(100000 + i)
        w("%s__attribute__((noinline)) void f%d(void)\n{\n\tsink += %d;\n"
          "\t__asm__ volatile(\"1: nop\\n2: nop\\n.pushsection __ex_table,\\\"a\\\"\\n%s"
          ".popsection\\n%s\");\n}\n" % (sec, i, i, tab, site(arch)))
    w("void _start(void)\n{\n")
    for i in range(0, n, max(1, n // 16)):
        w("\tf%d();\n" % i)
    w("}\n")

if NWEAK:
    # The weak definitions, each bigger than 8 bytes, so that the strong
    # function after it does not take its entry in.
    with open(os.path.join(d, "w.c"), "w") as f:
        w = f.write
        w("extern int sink;\n")
        for i in range(NWEAK):
            if mcount == "aarch64":
                w("__asm__(\".text\\n.weak fw%d\\n%s\");\n" %
                  (i, entry_fn("fw%d" % i, "\tnop\n\tnop\n\tnop\n").replace("\n", "\\n")
                   .replace("\t", "\\t").replace('"', '\\"')))
            else:
                w("__attribute__((weak)) void fw%d(void)\n{\n\t__asm__ volatile(\"%s\");\n"
                  "\tsink += %d;\n\tsink *= 3;\n}\n" % (i, site(arch), 2000 + i))

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
	.orc_header : { KEEP(*(.orc_header)) }
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
    #
    # As 6.12 (6.4's layout): byte 5 holds type:3 (weak: ORC_TYPE_UNDEFINED,
    # 0; CALL 2; END_OF_STACK 1), and objtool is not run, so every function
    # gets a real entry here, and .orc_header names the layout.
    with open(os.path.join(d, "orc.s"), "w") as f:
        w = f.write
        w("\t.text\n\t.globl orc_dup\n\t.type orc_dup,@function\norc_dup:\n\tnop\n\tret\n"
          "\t.size orc_dup,.-orc_dup\n")
        if not new:
            # (sp_offset, sp_reg, byte 5): the last is real, as its end bit says.
            kinds = [(8, 5, 0), (0, 0, 0), (16, 5, 0), (24, 5, 0), (0, 0, 0), (0, 0, 4)]
            ips = ["orc_dup"] * len(kinds)
        else:
            # The 4th, 5th and 6th are read the other way by 6.1's rule.
            kinds = [(8, 5, 2), (0, 0, 0), (16, 5, 2), (0, 0, 2), (24, 5, 0), (0, 0, 1)]
            ips = ["orc_dup"] * len(kinds)
            for i in list(range(n)) + ["w%d" % i for i in range(NWEAK)]:
                kinds.append((8, 5, 2))
                ips.append("f%s" % i)
            w("\t.section .orc_header,\"a\"\n\t.balign 4\n\t.byte %s\n" %
              ", ".join("0x" + "fe5d32bf581bd63b2ca9a5c65ba5a625eab3fe24"[i:i + 2]
                        for i in range(0, 40, 2)))
        w("\t.section .orc_unwind_ip,\"a\"\n\t.balign 4\n")
        for ip in ips:
            w("\t.long %s - .\n" % ip)
        w("\t.section .orc_unwind,\"a\"\n")
        for k, (sp, reg, b5) in enumerate(kinds):
            w("\t.short %d, %d\n\t.byte %d, %d\n" % (sp, k % 30000, reg, b5))
        w("\t.section .note.GNU-stack,\"\",@progbits\n")
