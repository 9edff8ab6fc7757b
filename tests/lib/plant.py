#!/usr/bin/python3
"""plant.py GOOD.o OUTDIR: copies of a 64-bit little-endian object with a
correct __mcount_loc (RELA), each with one planted table defect, named
after it.  objpatch check must find every one."""
import os
import struct
import sys
from elftools.elf.elffile import ELFFile

good, outdir = sys.argv[1], sys.argv[2]
raw = bytearray(open(good, "rb").read())
elf = ELFFile(open(good, "rb"))
secs = list(elf.iter_sections())
rela = elf.get_section_by_name(".rela__mcount_loc")
symtab = elf.get_section_by_name(".symtab")
base = rela["sh_offset"]
n = rela["sh_size"] // 24
assert n >= 2, "need two entries"


def entry(i):
    return struct.unpack_from("<QQq", raw, base + 24 * i)


def write(name, edits):
    b = bytearray(raw)
    for i, (off, info, add) in edits:
        struct.pack_into("<QQq", b, base + 24 * i, off, info, add)
    open(os.path.join(outdir, name + ".o"), "wb").write(b)


o1, i1, a1 = entry(1)
o0, i0, a0 = entry(0)
data_sym = next(k for k, s in enumerate(symtab.iter_symbols())
                if isinstance(s["st_shndx"], int) and s["st_shndx"] < len(secs) and
                secs[s["st_shndx"]].name == ".data")
write("deleted-entry", [(1, (o1, i1 & ~0xffffffff, a1))])          # R_X86_64_NONE
write("shifted-entry", [(1, (o1, i1, a1 + 1))])
write("duplicate-entry", [(1, (o1, i0, a0))])
write("entry-into-data", [(1, (o1, (data_sym << 32) | (i1 & 0xffffffff), 0))])
write("entry-on-non-call", [(1, (o1, i1, a1 + 6))])
