#!/usr/bin/python3
"""mctable.py [--section NAME] OBJECT: print an object's call-site table as
sorted "section+0xoffset" lines, independent of the base symbol chosen, of
REL vs RELA and of how the table is split into sections, so that two tools'
tables compare with cmp(1).  With --linked, print the raw entries of a
linked image's table section as hex addresses instead.  With --out-dir
DIR, write DIR/<basename>.txt per object instead of printing."""
import sys
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection


def relocatable(elf, want):
    secs = list(elf.iter_sections())
    symtab = elf.get_section_by_name(".symtab")
    asize = elf.elfclass // 8
    order = "little" if elf.little_endian else "big"
    # Objects with more than 65279 sections keep real section indexes of
    # symbols in SHT_SYMTAB_SHNDX (st_shndx is then SHN_XINDEX).
    xs = next((s for s in secs if s["sh_type"] == "SHT_SYMTAB_SHNDX"), None)
    xdata = xs.data() if xs is not None else b""

    def shndx(i, sym):
        v = sym["st_shndx"]
        if v in ("SHN_XINDEX", 0xffff):
            return int.from_bytes(xdata[4 * i:4 * i + 4], order)
        return v

    out = []
    for rs in secs:
        if not isinstance(rs, RelocationSection) or rs["sh_info"] >= len(secs):
            continue
        tab = secs[rs["sh_info"]]
        if tab.name != want:
            continue
        data = tab.data()
        for r in rs.iter_relocations():
            if r["r_info_type"] == 0:
                continue
            sym = symtab.get_symbol(r["r_info_sym"])
            idx = shndx(r["r_info_sym"], sym)
            if rs.is_RELA():
                add = r["r_addend"]
            else:
                o = r["r_offset"]
                add = int.from_bytes(data[o:o + asize], order, signed=True)
            # (S + A as the linker computes it: modulo the address size)
            off = (sym["st_value"] + add) & ((1 << (8 * asize)) - 1)
            out.append("%s+%#x" % (secs[idx].name, off))
    return sorted(out)


def linked(elf, want):
    s = elf.get_section_by_name(want)
    if s is None:
        return []
    a = elf.elfclass // 8
    d = s.data()
    order = "little" if elf.little_endian else "big"
    return ["%#x" % int.from_bytes(d[i:i + a], order) for i in range(0, len(d), a)]


def main(argv):
    want, mode, files, outdir = "__mcount_loc", relocatable, [], None
    it = iter(argv)
    for a in it:
        if a == "--section":
            want = next(it)
        elif a == "--linked":
            mode = linked
        elif a == "--out-dir":
            outdir = next(it)
        else:
            files.append(a)
    for path in files:
        with open(path, "rb") as f:
            lines = mode(ELFFile(f), want)
        text = "".join(line + "\n" for line in lines)
        if outdir:
            import os
            with open(os.path.join(outdir, os.path.basename(path) + ".txt"), "w") as o:
                o.write(text)
        else:
            sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
