#!/usr/bin/env python3
"""Print the __mcount_loc table of a vmlinux: "TOTAL NONZERO", and with
a second argument write its nonzero entries there, one hex address a
line, sorted, for a comparison of two builds.  The bounds are the
__start_mcount_loc/__stop_mcount_loc symbols, which the kernel reads at
boot; the table sits inside .init.data, so a section header would not do."""
import struct
import sys


def main():
    path = sys.argv[1]
    data = open(path, "rb").read()
    if data[:4] != b"\x7fELF":
        sys.exit(f"{path}: error: mcount-entries: not an ELF file")
    is64 = data[4] == 2
    end = "<" if data[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3a)
        shdr, sym, word = end + "IIQQQQIIQQ", (end + "IIBBHQQ", 24), 8
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2e)
        shdr, sym, word = end + "IIIIIIIIII", (end + "IIIBBH", 16), 4
    secs = [struct.unpack_from(shdr, data, shoff + i * shentsize)
            for i in range(shnum)]
    # (type, addr, offset, size, link): the same fields in either class
    secs = [(s[1], s[3], s[4], s[5], s[6]) for s in secs]
    symtab = next(s for s in secs if s[0] == 2)
    strtab = secs[symtab[4]]
    want = {b"__start_mcount_loc": None, b"__stop_mcount_loc": None}
    fmt, size = sym
    for off in range(symtab[2], symtab[2] + symtab[3], size):
        f = struct.unpack_from(fmt, data, off)
        name_off = f[0]
        value = f[5] if is64 else f[1]
        s = strtab[2] + name_off
        name = data[s:data.index(b"\0", s)]
        if name in want:
            want[name] = value
    start, stop = want[b"__start_mcount_loc"], want[b"__stop_mcount_loc"]
    if start is None or stop is None:
        sys.exit(f"{path}: error: mcount-entries: no __start/__stop_mcount_loc")
    sec = next(s for s in secs if s[0] != 8 and s[1] <= start < s[1] + s[3])
    base = sec[2] + start - sec[1]
    n = (stop - start) // word
    ents = struct.unpack_from(end + ("Q" if is64 else "I") * n, data, base)
    nonzero = sorted(e for e in ents if e)
    print(n, len(nonzero))
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as out:
            out.writelines(f"{e:x}\n" for e in nonzero)


main()
