#!/usr/bin/python3
"""corrupt.py GOOD.o OUTDIR: write malformed variants of a 64-bit
little-endian relocatable object that calls __fentry__, one file per defect,
named after it.  Each must be refused with one diagnostic line."""
import os
import struct
import sys
from elftools.elf.elffile import ELFFile

good, outdir = sys.argv[1], sys.argv[2]
raw = bytearray(open(good, "rb").read())
elf = ELFFile(open(good, "rb"))
eh = elf.header
shoff, shentsize = eh["e_shoff"], eh["e_shentsize"]
secs = list(elf.iter_sections())
idx = {s.name: i for i, s in enumerate(secs)}
SH = "<IIQQQQIIQQ"  # name type flags addr offset size link info align entsize


def shdr_at(i):
    return shoff + i * shentsize


def put(buf, off, fmt, val):
    struct.pack_into(fmt, buf, off, val)


def variant(name, fn):
    b = bytearray(raw)
    r = fn(b)
    b = b if r is None else r
    with open(os.path.join(outdir, name + ".o"), "wb") as f:
        f.write(b)


def set_shdr_field(sec, field, val):
    fields = ["name", "type", "flags", "addr", "offset", "size", "link", "info", "align", "entsize"]
    offs = [0, 4, 8, 16, 24, 32, 40, 44, 48, 56]
    fmts = ["<I", "<I", "<Q", "<Q", "<Q", "<Q", "<I", "<I", "<Q", "<Q"]
    k = fields.index(field)
    return lambda b: put(b, shdr_at(idx[sec]) + offs[k], fmts[k], val)


rela = secs[idx[".rela.text"]]
fentry_rel = next(i for i, r in enumerate(rela.iter_relocations())
                  if elf.get_section_by_name(".symtab").get_symbol(r["r_info_sym"]).name == "__fentry__")
rel_off = rela["sh_offset"] + fentry_rel * 24
symtab = secs[idx[".symtab"]]

variant("empty", lambda b: bytearray())
variant("not-elf", lambda b: bytearray(b"int main(void) { return 0; }\n" * 4))
variant("truncated-header", lambda b: b[:20])
variant("truncated-half", lambda b: b[:len(b) // 2])
variant("bad-class", lambda b: put(b, 4, "<B", 7))
variant("bad-byte-order", lambda b: put(b, 5, "<B", 9))
variant("bad-version", lambda b: put(b, 6, "<B", 0))
variant("shoff-past-end", lambda b: put(b, 0x28, "<Q", len(raw) + 4096))
variant("bad-shentsize", lambda b: put(b, 0x3a, "<H", 40))
variant("shstrndx-out-of-range", lambda b: put(b, 0x3e, "<H", 999))
variant("text-offset-past-end", set_shdr_field(".text", "offset", len(raw) * 4))
variant("text-size-huge", set_shdr_field(".text", "size", 1 << 40))
variant("rela-bad-entsize", set_shdr_field(".rela.text", "entsize", 7))
variant("rela-link-out-of-range", set_shdr_field(".rela.text", "link", 999))
variant("rela-info-out-of-range", set_shdr_field(".rela.text", "info", 999))
variant("reloc-symbol-out-of-range", lambda b: put(b, rel_off + 8, "<Q", (99999 << 32) | 4))
variant("reloc-offset-outside-section", lambda b: put(b, rel_off, "<Q", 1 << 30))
variant("symbol-section-out-of-range",
        lambda b: put(b, symtab["sh_offset"] + 24 * (symtab.num_symbols() - 1) + 6, "<H", 0xfe00))
variant("overlapping-sections", set_shdr_field(".text", "offset", rela["sh_offset"]))
variant("section-name-out-of-range", set_shdr_field(".text", "name", 1 << 20))
variant("symtab-bad-entsize", set_shdr_field(".symtab", "entsize", 3))
variant("bad-alignment", set_shdr_field(".text", "align", 3))
variant("unsupported-machine", lambda b: put(b, 0x12, "<H", 0x1234))
variant("not-relocatable", lambda b: put(b, 0x10, "<H", 2))
variant("archive", lambda b: bytearray(b"!<arch>\n") + b)
variant("zero-sections", lambda b: put(b, 0x3c, "<H", 0))
