#!/usr/bin/python3
"""decode.py ARCH WORD...: each 32-bit instruction word (hex, as the
little-endian value) as "mnemonic operands", one per line, decoded apart
from libmcloc: with capstone for aarch64; by its fields for riscv64, whose
decoder Debian 12's capstone (4.0.2) does not have."""
import sys


def riscv(w):
    op, rd, f3, rs1 = w & 0x7f, (w >> 7) & 31, (w >> 12) & 7, (w >> 15) & 31
    imm = (w >> 20) - (1 << 12 if w >> 31 else 0)
    if w == 0x00000013:
        return "nop"
    if op == 0x67 and f3 == 0:
        return f"jalr x{rd}, {imm}(x{rs1})"
    if op == 0x17:
        return f"auipc x{rd}, {w >> 12:#x}"
    return f"unknown {w:08x}"


def main():
    arch, words = sys.argv[1], [int(x, 16) for x in sys.argv[2:]]
    if arch == "aarch64":
        import capstone
        md = capstone.Cs(capstone.CS_ARCH_ARM64, capstone.CS_MODE_ARM)
        for w in words:
            insn = next(md.disasm(w.to_bytes(4, "little"), 0x1000), None)
            print(f"{insn.mnemonic} {insn.op_str}".strip() if insn else f"unknown {w:08x}")
    else:
        for w in words:
            print(riscv(w))


main()
