#!/usr/bin/env python3
"""What boot.sh reads in a vmlinux, without objpatch (the tool under test).

kimage.py mcount VMLINUX [OUT]
    "TOTAL NONZERO" entries of the __mcount_loc table; with OUT, its
    nonzero entries there, one hex address a line, sorted, to compare two
    builds.  The bounds are the __start_mcount_loc/__stop_mcount_loc
    symbols the kernel reads at boot: the table sits inside .init.data.
kimage.py diff-sections A B
    The allocated sections whose bytes differ between two images."""
import struct
import sys


class Elf:
    def __init__(self, path):
        self.path = path
        d = self.data = open(path, "rb").read()
        if d[:4] != b"\x7fELF":
            sys.exit(f"{path}: error: kimage: not an ELF file")
        self.is64 = d[4] == 2
        e = self.end = "<" if d[5] == 1 else ">"
        if self.is64:
            shoff, = struct.unpack_from(e + "Q", d, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", d, 0x3a)
            shdr = e + "IIQQQQIIQQ"
        else:
            shoff, = struct.unpack_from(e + "I", d, 0x20)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", d, 0x2e)
            shdr = e + "IIIIIIIIII"
        # (name, type, flags, addr, offset, size, link): the same fields
        # in either class
        self.secs = [struct.unpack_from(shdr, d, shoff + i * shentsize)[:7]
                     for i in range(shnum)]
        names = self.secs[shstrndx][4]
        self.names = [self.cstr(names + s[0]) for s in self.secs]

    def cstr(self, off):
        return self.data[off:self.data.index(b"\0", off)]

    def bytes_of(self, i):
        s = self.secs[i]
        return b"" if s[1] == 8 else self.data[s[4]:s[4] + s[5]]  # NOBITS

    def symbols(self, wanted):
        symtab = next(s for s in self.secs if s[1] == 2)
        strtab = self.secs[symtab[6]][4]
        fmt, size = ((self.end + "IBBHQQ", 24) if self.is64
                     else (self.end + "IIIBBH", 16))
        found = {}
        for off in range(symtab[4], symtab[4] + symtab[5], size):
            f = struct.unpack_from(fmt, self.data, off)
            name = self.cstr(strtab + f[0])
            if name in wanted:
                found[name] = f[4] if self.is64 else f[1]
        return found


def mcount(path, out=None):
    elf = Elf(path)
    sym = elf.symbols({b"__start_mcount_loc", b"__stop_mcount_loc"})
    if len(sym) != 2:
        sys.exit(f"{path}: error: kimage: no __start/__stop_mcount_loc")
    start, stop = sym[b"__start_mcount_loc"], sym[b"__stop_mcount_loc"]
    s = next(s for s in elf.secs
             if s[1] not in (0, 8) and s[3] <= start < s[3] + s[5])
    word = 8 if elf.is64 else 4
    n = (stop - start) // word
    ents = struct.unpack_from(elf.end + ("Q" if elf.is64 else "I") * n,
                              elf.data, s[4] + start - s[3])
    nonzero = sorted(e for e in ents if e)
    print(n, len(nonzero))
    if out:
        with open(out, "w") as f:
            f.writelines(f"{e:x}\n" for e in nonzero)


def diff_sections(a, b):
    ea, eb = Elf(a), Elf(b)
    other = {n: i for i, n in enumerate(eb.names)}
    diff = [n.decode() for i, n in enumerate(ea.names)
            if ea.secs[i][2] & 2  # SHF_ALLOC
            and (n not in other or ea.bytes_of(i) != eb.bytes_of(other[n]))]
    print(" ".join(diff) or "none")


if len(sys.argv) >= 3 and sys.argv[1] == "mcount":
    mcount(*sys.argv[2:4])
elif len(sys.argv) == 4 and sys.argv[1] == "diff-sections":
    diff_sections(sys.argv[2], sys.argv[3])
else:
    sys.exit(__doc__)
