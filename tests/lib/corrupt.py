#!/usr/bin/python3
"""corrupt.py GOOD OUTDIR: write malformed variants of a 64-bit
little-endian relocatable object that calls __fentry__, or of a linked image
(PIE) with an __mcount_loc table, one file per defect, named after it.  Each
must be refused with one diagnostic line."""
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
    with open(os.path.join(outdir, name + ext), "wb") as f:
        f.write(b)


def set_shdr_field(sec, field, val):
    fields = ["name", "type", "flags", "addr", "offset", "size", "link", "info", "align", "entsize"]
    offs = [0, 4, 8, 16, 24, 32, 40, 44, 48, 56]
    fmts = ["<I", "<I", "<Q", "<Q", "<Q", "<Q", "<I", "<I", "<Q", "<Q"]
    k = fields.index(field)
    return lambda b: put(b, shdr_at(idx[sec]) + offs[k], fmts[k], val)


image = eh["e_type"] in ("ET_EXEC", "ET_DYN")
ext = "" if image else ".o"
rela = secs[idx[".rela.dyn" if image else ".rela.text"]]
symtab = secs[idx[".symtab"]]
if image:
    rel_off = rela["sh_offset"]
else:
    fentry_rel = next(i for i, r in enumerate(rela.iter_relocations())
                      if symtab.get_symbol(r["r_info_sym"]).name == "__fentry__")
    rel_off = rela["sh_offset"] + fentry_rel * 24

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
variant("rela-bad-entsize", set_shdr_field(rela.name, "entsize", 7))
variant("rela-link-out-of-range", set_shdr_field(rela.name, "link", 999))
variant("rela-info-out-of-range", set_shdr_field(rela.name, "info", 999))
variant("overlapping-sections", set_shdr_field(".text", "offset", rela["sh_offset"]))
variant("section-name-out-of-range", set_shdr_field(".text", "name", 1 << 20))
variant("symtab-bad-entsize", set_shdr_field(".symtab", "entsize", 3))
variant("bad-alignment", set_shdr_field(".text", "align", 3))
variant("unsupported-machine", lambda b: put(b, 0x12, "<H", 0x1234))
variant("archive", lambda b: bytearray(b"!<arch>\n") + b)
variant("zero-sections", lambda b: put(b, 0x3c, "<H", 0))
variant("symbol-section-out-of-range",
        lambda b: put(b, symtab["sh_offset"] + 24 * (symtab.num_symbols() - 1) + 6, "<H", 0xfe00))
if not image:
    variant("reloc-symbol-out-of-range", lambda b: put(b, rel_off + 8, "<Q", (99999 << 32) | 4))
    variant("reloc-offset-outside-section", lambda b: put(b, rel_off, "<Q", 1 << 30))
    variant("not-relocatable", lambda b: put(b, 0x10, "<H", 2))
    # Alignments a rewrite would pad the output to: gigabytes of zeros.
    variant("text-align-2p31", set_shdr_field(".text", "align", 1 << 31))
    variant("symtab-align-2p40", set_shdr_field(".symtab", "align", 1 << 40))
    variant("rela-align-2p63", set_shdr_field(rela.name, "align", 1 << 63))
else:
    tab = secs[idx["__mcount_loc"]]
    sym = {s.name: i for i, s in enumerate(symtab.iter_symbols())}

    def set_sym_value(name, val):
        return lambda b: put(b, symtab["sh_offset"] + 24 * sym[name] + 8, "<Q", val)

    variant("phoff-past-end", lambda b: put(b, 0x20, "<Q", len(raw) + 4096))
    variant("no-program-headers", lambda b: put(b, 0x38, "<H", 0))
    variant("table-size-not-entries", set_shdr_field("__mcount_loc", "size", tab["sh_size"] - 3))
    variant("table-offset-past-end", set_shdr_field("__mcount_loc", "offset", len(raw) * 2))
    variant("table-outside-any-segment", set_shdr_field("__mcount_loc", "addr", 1 << 44))
    variant("table-stop-before-start", set_sym_value("__stop___mcount_loc",
                                                    tab["sh_addr"] - 8))
    variant("table-stop-past-section", set_sym_value("__stop___mcount_loc",
                                                    tab["sh_addr"] + tab["sh_size"] + 64))
    variant("table-symbolic-relocation", lambda b: [
        put(b, rela["sh_offset"] + 24 * i + 8, "<Q", (1 << 32) | 1)
        for i, r in enumerate(rela.iter_relocations())
        if tab["sh_addr"] <= r["r_offset"] < tab["sh_addr"] + tab["sh_size"]] and None)
