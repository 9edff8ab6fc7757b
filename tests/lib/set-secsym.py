#!/usr/bin/python3
"""set-secsym.py OBJECT SECTION VALUE: set the st_value of SECTION's
section symbol in OBJECT (compilers write 0; a linker adds whatever is
there to every relocation against it)."""
import struct
import sys
from elftools.elf.elffile import ELFFile

path, secname, value = sys.argv[1], sys.argv[2], int(sys.argv[3], 0)
with open(path, "rb") as fh:
    elf = ELFFile(fh)
    symtab = elf.get_section_by_name(".symtab")
    names = [s.name for s in elf.iter_sections()]
    i = next(i for i, s in enumerate(symtab.iter_symbols())
             if s["st_info"]["type"] == "STT_SECTION" and names[s["st_shndx"]] == secname)
    at, fmt = (8, "Q") if elf.elfclass == 64 else (4, "I")
    off = symtab["sh_offset"] + i * symtab["sh_entsize"] + at
    fmt = ("<" if elf.little_endian else ">") + fmt
raw = bytearray(open(path, "rb").read())
struct.pack_into(fmt, raw, off, value)
open(path, "wb").write(raw)
