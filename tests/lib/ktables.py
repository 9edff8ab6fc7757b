#!/usr/bin/python3
"""ktables.py: a kernel image's exception and ORC tables, read independently
of objpatch (pyelftools and the layouts written out here), for the tests.

  ktables.py dump FILE        one line per entry, with absolute addresses:
                              "ex INSN FIXUP DATA" and "orc IP WEAK BYTES",
                              then "flag VALUE" (main_extable_sort_needed)
  ktables.py order FILE       exit 0 when every table is in the order the
                              kernel's binary searches need; else print the
                              first entry out of order and exit 1
  ktables.py point FILE I ADDR  make __ex_table entry I's instruction ADDR
  ktables.py shuffle FILE SEED
                              permute each table at random in place, moving
                              relative offsets with their entries and the
                              ORC tables together: the same tables, unsorted

The layouts, as the 6.1 kernel has them: x86, arm64, riscv and s390 keep
12-byte entries (insn and fixup as 32-bit offsets from their own place, then
4 bytes of data); powerpc 8-byte ones (the two offsets); arm and mips two
absolute addresses.  An ORC entry is 6 bytes, its terminator bit pattern in
byte 4 (sp_reg, low nibble) and byte 5 (end, bit 2); from 6.4 (an image with
an .orc_header) a terminator is of type 0 (byte 5, bits 0-2)."""
import random
import sys
from elftools.elf.elffile import ELFFile

REL_DATA = {"EM_X86_64", "EM_386", "EM_AARCH64", "EM_RISCV", "EM_S390"}
REL = {"EM_PPC64", "EM_PPC"}
ABS = {"EM_ARM", "EM_MIPS"}


class Image:
    def __init__(self, path):
        self.path = path
        self.f = open(path, "rb")
        self.elf = ELFFile(self.f)
        self.order = "little" if self.elf.little_endian else "big"
        self.asize = self.elf.elfclass // 8
        m = self.elf["e_machine"]
        if m in REL_DATA:
            self.kind, self.esize = "rel", 12
        elif m in REL:
            self.kind, self.esize = "rel", 8
        elif m in ABS:
            self.kind, self.esize = "abs", 2 * self.asize
        else:
            sys.exit("%s: unknown machine %s" % (path, m))

    def sec(self, name):
        return self.elf.get_section_by_name(name)

    def u(self, b, off, n):
        return int.from_bytes(b[off:off + n], self.order)

    def s32(self, b, off):
        return int.from_bytes(b[off:off + 4], self.order, signed=True)

    def extable(self):
        """(insn, fixup, data bytes) per entry, absolute."""
        s = self.sec("__ex_table")
        if s is None:
            return []
        d, base, out = s.data(), s["sh_addr"], []
        for o in range(0, len(d), self.esize):
            if self.kind == "abs":
                a = self.asize
                out.append((self.u(d, o, a), self.u(d, o + a, a), b""))
            else:
                out.append((base + o + self.s32(d, o), base + o + 4 + self.s32(d, o + 4),
                            d[o + 8:o + self.esize]))
        return out

    def orc(self):
        """(ip, weak, entry bytes) per entry."""
        si, so = self.sec(".orc_unwind_ip"), self.sec(".orc_unwind")
        if si is None or so is None:
            return []
        di, do, base = si.data(), so.data(), si["sh_addr"]
        # (From 6.4, with an .orc_header: type:3 in byte 5, weak if 0.)
        new = self.sec(".orc_header") is not None
        out = []
        for i in range(len(di) // 4):
            e = do[6 * i:6 * i + 6]
            weak = (e[5] & 7) == 0 if new else (e[4] & 0xf) == 0 and not (e[5] & 4)
            out.append((base + 4 * i + self.s32(di, 4 * i), weak, e))
        return out

    def flag(self):
        sym = self.sec(".symtab").get_symbol_by_name("main_extable_sort_needed")
        if not sym:
            return None
        v = sym[0]["st_value"]
        for s in self.elf.iter_sections():
            if s["sh_type"] == "SHT_PROGBITS" and s["sh_addr"] <= v < s["sh_addr"] + s["sh_size"]:
                return self.u(s.data(), v - s["sh_addr"], 4)
        return None


def dump(img):
    for insn, fix, data in img.extable():
        print("ex %#x %#x %s" % (insn, fix, data.hex()))
    for ip, weak, e in img.orc():
        print("orc %#x %d %s" % (ip, weak, e.hex()))
    print("flag %s" % img.flag())


def order(img):
    bad = 0
    ex = img.extable()
    for i in range(1, len(ex)):
        if ex[i][0] < ex[i - 1][0]:
            print("__ex_table entry %d (%#x) after %#x" % (i, ex[i][0], ex[i - 1][0]))
            bad = 1
            break
    orc = img.orc()
    for i in range(1, len(orc)):
        (ip0, w0, _), (ip1, w1, _) = orc[i - 1], orc[i]
        if ip1 < ip0 or (ip1 == ip0 and w1 and not w0):
            print("ORC entry %d (%#x%s) after %#x%s" % (i, ip1, " weak" if w1 else "",
                                                        ip0, " weak" if w0 else ""))
            bad = 1
            break
    return bad


def shuffle(img, seed):
    rnd = random.Random(seed)
    patches = []

    def rebased(d, size, perm, words):
        """Entries of D (SIZE bytes each) in order PERM, the offsets at byte
        positions WORDS of each moved with it."""
        out = bytearray()
        for j, k in enumerate(perm):
            e = bytearray(d[k * size:(k + 1) * size])
            for w in words:
                v = (int.from_bytes(e[w:w + 4], img.order) + (k - j) * size) & 0xffffffff
                e[w:w + 4] = v.to_bytes(4, img.order)
            out += e
        return bytes(out)

    s = img.sec("__ex_table")
    if s is not None:
        d = s.data()
        perm = list(range(len(d) // img.esize))
        rnd.shuffle(perm)
        words = (0, 4) if img.kind == "rel" else ()
        patches.append((s["sh_offset"], rebased(d, img.esize, perm, words)))
    si, so = img.sec(".orc_unwind_ip"), img.sec(".orc_unwind")
    if si is not None and so is not None:
        perm = list(range(si["sh_size"] // 4))
        rnd.shuffle(perm)
        patches.append((si["sh_offset"], rebased(si.data(), 4, perm, (0,))))
        patches.append((so["sh_offset"], rebased(so.data(), 6, perm, ())))
    img.f.close()
    with open(img.path, "r+b") as f:
        for off, b in patches:
            f.seek(off)
            f.write(b)


def point(img, i, addr):
    s = img.sec("__ex_table")
    off = s["sh_offset"] + i * img.esize
    if img.kind == "abs":
        b = addr.to_bytes(img.asize, img.order)
    else:
        b = ((addr - (s["sh_addr"] + i * img.esize)) & 0xffffffff).to_bytes(4, img.order)
    img.f.close()
    with open(img.path, "r+b") as f:
        f.seek(off)
        f.write(b)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    img = Image(sys.argv[2])
    if sys.argv[1] == "dump":
        dump(img)
    elif sys.argv[1] == "order":
        sys.exit(order(img))
    elif sys.argv[1] == "point":
        point(img, int(sys.argv[3]), int(sys.argv[4], 0))
    elif sys.argv[1] == "shuffle":
        shuffle(img, int(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
