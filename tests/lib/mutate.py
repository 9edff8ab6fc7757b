#!/usr/bin/python3
"""mutate.py: the mutation campaign of tests/mutate/campaign.sh.

  mutate.py make BASEDIR OUTDIR COUNT SEED
      writes COUNT mutants of the good files of BASEDIR to OUTDIR, spread
      evenly over them, each with what was done in OUTDIR/index.tsv.  The
      same SEED and files give the same mutants.
  mutate.py run --rc RECORDMCOUNT --op OBJPATCH [--jobs N] [--log FILE]
                [--timeout S] BASEDIR OUTDIR
      runs every mutant (and first every good file, for reference) through
      every command (COMMANDS below) and prints the figures.  Exit 1 when
      a run crashed, hung, damaged its input or exited 0 with a wrong
      table; the log names each such run and its mutant.

The mutations know ELF (32- and 64-bit, either byte order): fields of the
ELF header, section and program headers, symbols, relocations, the call-site
and kernel tables, string tables, the code at each call site; and truncation
and random byte flips.  See tests/mutate/README.md for the rules."""
import concurrent.futures
import filecmp
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile

# ---------------------------------------------------------------- ELF



def packed(fields):
    """[(name, offset, format)] of FIELDS laid end to end, and their size."""
    out, o = [], 0
    for name, f in fields:
        out.append((name, o, f))
        o += struct.calcsize("<" + f)
    return out, o

class Elf:
    """The parts of an ELF file a mutation aims at, as file offsets."""

    def __init__(self, b):
        self.b = b
        self.ok = len(b) >= 52 and b[:4] == b"\x7fELF" and b[4] in (1, 2) and b[5] in (1, 2)
        if not self.ok:
            return
        self.w = b[4] == 2
        self.e = "<" if b[5] == 1 else ">"
        w = self.w
        # (name, offset, format) of the header fields after e_ident.
        a = "Q" if w else "I"
        self.ehdr = [("e_type", 16, "H"), ("e_machine", 18, "H"), ("e_version", 20, "I"),
                     ("e_entry", 24, a)]
        o = 24 + (8 if w else 4)
        for n, f in (("e_phoff", a), ("e_shoff", a), ("e_flags", "I"), ("e_ehsize", "H"),
                     ("e_phentsize", "H"), ("e_phnum", "H"), ("e_shentsize", "H"),
                     ("e_shnum", "H"), ("e_shstrndx", "H")):
            self.ehdr.append((n, o, f))
            o += struct.calcsize(f)
        self.machine = self.get(18, "H")
        # (The classes' layouts: the same fields, addresses and sizes
        # 8 or 4 bytes wide; program headers and symbols order them
        # differently.)
        a = "Q" if w else "I"
        self.shf, self.shsize = packed([("name", "I"), ("type", "I"), ("flags", a), ("addr", a),
                                        ("offset", a), ("size", a), ("link", "I"), ("info", "I"),
                                        ("addralign", a), ("entsize", a)])
        if w:
            self.phf, self.phsize = packed([("type", "I"), ("flags", "I"), ("offset", a),
                                            ("vaddr", a), ("paddr", a), ("filesz", a),
                                            ("memsz", a), ("align", a)])
            self.symf, self.symsize = packed([("name", "I"), ("info", "B"), ("other", "B"),
                                              ("shndx", "H"), ("value", a), ("size", a)])
        else:
            self.phf, self.phsize = packed([("type", "I"), ("offset", a), ("vaddr", a),
                                            ("paddr", a), ("filesz", a), ("memsz", a),
                                            ("flags", "I"), ("align", a)])
            self.symf, self.symsize = packed([("name", "I"), ("value", a), ("size", a),
                                              ("info", "B"), ("other", "B"), ("shndx", "H")])
        self.secs = []
        shoff, shnum = self.field("e_shoff"), self.field("e_shnum")
        for i in range(shnum):
            at = shoff + i * self.shsize
            if at + self.shsize > len(b):
                break
            s = {n: self.get(at + o, f) for n, o, f in self.shf}
            s["at"] = at
            self.secs.append(s)
        strndx = self.field("e_shstrndx")
        for s in self.secs:
            s["nm"] = self.cstr(self.secs[strndx], s["name"]) if strndx < len(self.secs) else ""
        self.phdrs = []
        phoff, phnum = self.field("e_phoff"), self.field("e_phnum")
        for i in range(phnum):
            at = phoff + i * self.phsize
            if at + self.phsize <= len(b):
                self.phdrs.append(at)

    def get(self, at, f):
        return struct.unpack_from(self.e + f, self.b, at)[0]

    def field(self, name):
        return next(self.get(o, f) for n, o, f in self.ehdr if n == name)

    def cstr(self, sec, off):
        at = sec["offset"] + off
        if sec["type"] == 8 or at >= len(self.b):
            return ""
        end = self.b.find(b"\0", at)
        return self.b[at:end if end >= 0 else len(self.b)].decode("latin-1")

    def content(self, s):
        """The file range of S's bytes, or None."""
        if s["type"] == 8 or s["size"] == 0 or s["offset"] + s["size"] > len(self.b):
            return None
        return s["offset"], s["size"]

    def of_type(self, *types):
        return [s for s in self.secs if s["type"] in types and self.content(s)]

    def syms(self):
        """Each symbol's file offset, with its name, section and info."""
        out = []
        for st in self.of_type(2, 11):  # SHT_SYMTAB, SHT_DYNSYM
            strs = self.secs[st["link"]] if st["link"] < len(self.secs) else None
            off, size = self.content(st)
            for at in range(off, off + size - self.symsize + 1, self.symsize):
                sym = {n: self.get(at + o, f) for n, o, f in self.symf}
                sym["at"] = at
                sym["nm"] = self.cstr(strs, sym["name"]) if strs else ""
                out.append(sym)
        return out

    def rels(self):
        """Each relocation: its file offset, section, entry size, addend or not."""
        out = []
        for s in self.of_type(4, 9):  # SHT_RELA, SHT_REL
            ent = (24 if s["type"] == 4 else 16) if self.w else (12 if s["type"] == 4 else 8)
            off, size = self.content(s)
            for at in range(off, off + size - ent + 1, ent):
                out.append({"at": at, "sec": s, "ent": ent, "rela": s["type"] == 4})
        return out

    def rel_sym_at(self, r):
        """The file offset and format of a relocation's symbol index."""
        w, at = self.w, r["at"]
        if not w:
            return (at + 4 + (0 if self.e == ">" else 1), ">I" if self.e == ">" else "<I", 24)
        if self.machine == 8:  # MIPS64: r_sym is the first word of r_info
            return (at + 8, self.e + "I", 32)
        return (at + 8 + (0 if self.e == ">" else 4), self.e + "I", 32)

    def rel_type_at(self, r):
        """The file offset and format of a relocation's type."""
        w, at = self.w, r["at"]
        if not w:
            return (at + 4 + (3 if self.e == ">" else 0), "B")
        if self.machine == 8:
            return (at + 15, "B")
        return (at + 8 + (4 if self.e == ">" else 0), self.e + "I")

    def file_offset(self, addr):
        """The file offset of ADDR in a section, or None."""
        for s in self.secs:
            c = self.content(s)
            if c and s["addr"] and s["addr"] <= addr < s["addr"] + s["size"]:
                return s["offset"] + addr - s["addr"]
        return None


TABLES = ("__mcount_loc", "__patchable_function_entries", "__ex_table", ".orc_unwind_ip",
          ".orc_unwind", ".mcloc_names", ".mcloc_desc", "mcount_loc")
MCOUNT = ("mcount", "_mcount", "__fentry__", "__gnu_mcount_nc")

# ---------------------------------------------------------------- values


def interesting(rnd, old, size):
    bits = 8 * size
    mask = (1 << bits) - 1
    pick = rnd.choice([0, 1, 2, 3, 4, 7, 8, 16, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff,
                       0x7fffffff, 0x80000000, 0xffffffff, 1 << 32, 1 << 40, (1 << 63),
                       mask, mask - 1, old + 1, old - 1, old + 4, old - 4, old + 8, old - 8,
                       old * 2, old // 2, old ^ (1 << rnd.randrange(bits)),
                       rnd.getrandbits(bits), old + rnd.randrange(-64, 65)])
    return pick & mask


def put(b, at, f, v):
    f = f if f[0] in "<>" else ("<" + f)
    size = struct.calcsize(f)
    if at < 0 or at + size > len(b):
        return False
    struct.pack_into(f, b, at, v & ((1 << (8 * size)) - 1))
    return True


def setf(rnd, elf, b, at, f, why, value=None):
    f = f.upper()  # every value as unsigned: a negative one wraps
    f = elf.e + f if f[0] not in "<>" else f
    size = struct.calcsize(f)
    if at + size > len(b):
        return None
    old = struct.unpack_from(f, b, at)[0]
    v = interesting(rnd, old, size) if value is None else value & ((1 << 8 * size) - 1)
    if v == old:
        v = old ^ 1
    struct.pack_into(f, b, at, v)
    return "%s %#x->%#x" % (why, old, v)

# ---------------------------------------------------------------- mutations


def m_ehdr(rnd, elf, b):
    if rnd.random() < 0.15:
        i = rnd.choice([4, 5, 6, 7, 8])
        return setf(rnd, elf, b, i, "B", "e_ident[%d]" % i)
    n, o, f = rnd.choice(elf.ehdr)
    if n in ("e_shoff", "e_phoff") and rnd.random() < 0.4:
        return setf(rnd, elf, b, o, f, n, rnd.choice([len(b), len(b) - 1, len(b) - 8, 0, 64]))
    return setf(rnd, elf, b, o, f, n)


def m_shdr(rnd, elf, b):
    if not elf.secs:
        return None
    prefer = [s for s in elf.secs if s["nm"] in TABLES or s["nm"].startswith((".text", ".rel"))
              or s["type"] in (2, 3, 4, 9, 11)]
    s = rnd.choice(prefer if prefer and rnd.random() < 0.7 else elf.secs)
    n, o, f = rnd.choice(elf.shf)
    other = rnd.choice(elf.secs)
    val = None
    r = rnd.random()
    if r < 0.2:
        val = other[n]  # another section's value
    elif r < 0.3 and n in ("offset", "size"):
        val = len(b) - (s["offset"] if n == "size" else 0) + rnd.choice([-1, 0, 1, 8])
    elif r < 0.4 and n in ("link", "info"):
        val = rnd.choice([0, len(elf.secs), len(elf.secs) - 1, 0xffff, 0xfff0, s["link"], s["info"]])
    return setf(rnd, elf, b, s["at"] + o, f, "section %s %s" % (s["nm"] or "#%d" % elf.secs.index(s), n), val)


def m_phdr(rnd, elf, b):
    if not elf.phdrs:
        return None
    at = rnd.choice(elf.phdrs)
    n, o, f = rnd.choice(elf.phf)
    return setf(rnd, elf, b, at + o, f, "phdr %d %s" % (elf.phdrs.index(at), n))


def m_sym(rnd, elf, b):
    syms = elf.syms()
    if not syms:
        return None
    r = rnd.random()
    secsyms = [s for s in syms if s["info"] & 0xf == 3]
    if r < 0.15 and secsyms:
        # A section symbol with a nonzero value (issue 28, item 12).
        s = rnd.choice(secsyms)
        f = next(f for n, o, f in elf.symf if n == "value")
        o = next(o for n, o, f in elf.symf if n == "value")
        return setf(rnd, elf, b, s["at"] + o, f, "section symbol #%d st_value" % s["shndx"],
                    rnd.choice([1, 2, 4, 5, 8, 16, 0x40, -4, -1]))
    named = [s for s in syms if s["nm"] in MCOUNT or s["nm"].startswith(("__start", "__stop"))
             or s["info"] & 0xf == 2]
    s = rnd.choice(named if named and r < 0.6 else syms)
    n, o, f = rnd.choice(elf.symf)
    val = None
    if n == "shndx" and rnd.random() < 0.5:
        val = rnd.choice([0, 0xfff1, 0xfff2, 0xffff, len(elf.secs), len(elf.secs) - 1,
                          rnd.randrange(max(1, len(elf.secs)))])
    elif n == "info" and rnd.random() < 0.5:
        val = (rnd.randrange(4) << 4) | rnd.choice([0, 1, 2, 3, 4, 6, 10, 13])
    return setf(rnd, elf, b, s["at"] + o, f, "symbol %s %s" % (s["nm"] or "#", n), val)


def m_rel(rnd, elf, b):
    rels = elf.rels()
    if not rels:
        return None
    syms = elf.syms()
    mc = {i for i, s in enumerate(syms) if s["nm"] in MCOUNT}
    tab = [r for r in rels if any(t in r["sec"]["nm"] for t in TABLES)]

    def symidx(r):
        at, f, _ = elf.rel_sym_at(r)
        return struct.unpack_from(f, b, at)[0]
    hot = tab + [r for r in rels if symidx(r) in mc]
    r = rnd.choice(hot if hot and rnd.random() < 0.7 else rels)
    what = rnd.choice(["offset", "type", "sym", "addend"] if r["rela"] else ["offset", "type", "sym"])
    where = "%s@%#x" % (r["sec"]["nm"], r["at"] - r["sec"]["offset"])
    a = "Q" if elf.w else "I"
    if what == "offset":
        return setf(rnd, elf, b, r["at"], a, "reloc %s offset" % where)
    if what == "addend":
        return setf(rnd, elf, b, r["at"] + (16 if elf.w else 8), a.lower(), "reloc %s addend" % where,
                    rnd.choice([None, 0, -4, -8, 1, 4, 1 << 31, -(1 << 31)]))
    if what == "type":
        at, f = elf.rel_type_at(r)
        return setf(rnd, elf, b, at, f, "reloc %s type" % where,
                    rnd.choice([None, 0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 20, 22, 23, 24, 26, 27, 38, 255]))
    at, f, bits = elf.rel_sym_at(r)
    old = struct.unpack_from(f, b, at)[0]
    if bits == 24:  # the high 24 bits of a 32-bit r_info
        v = rnd.choice([0, 1, len(syms), 0xffffff, old + 1, old - 1, rnd.randrange(max(1, len(syms)))])
        info_at = r["at"] + 4
        info = struct.unpack_from(elf.e + "I", b, info_at)[0]
        struct.pack_into(elf.e + "I", b, info_at, ((v & 0xffffff) << 8) | (info & 0xff))
        return "reloc %s sym %d->%d" % (where, info >> 8, v & 0xffffff)
    mcs = sorted(mc)
    return setf(rnd, elf, b, at, f, "reloc %s sym" % where,
                rnd.choice([None, 0, len(syms), old + 1, old - 1] + mcs))


def m_table(rnd, elf, b):
    tabs = [s for s in elf.secs if s["nm"] in TABLES and elf.content(s)]
    if not tabs:
        return None
    s = rnd.choice(tabs)
    off, size = elf.content(s)
    ent = 8 if elf.w and s["nm"] in ("__mcount_loc", "__patchable_function_entries", "mcount_loc") else 4
    n = size // ent
    if n == 0:
        return None
    i = rnd.randrange(n)
    at = off + i * ent
    f = "Q" if ent == 8 else "I"
    r = rnd.random()
    if r < 0.25 and n > 1:
        j = rnd.randrange(n)
        b[at:at + ent] = b[off + j * ent:off + j * ent + ent]
        return "%s entry %d := entry %d" % (s["nm"], i, j)
    if r < 0.35 and n > 1:
        j = rnd.randrange(n)
        x, y = bytes(b[at:at + ent]), bytes(b[off + j * ent:off + j * ent + ent])
        b[at:at + ent], b[off + j * ent:off + j * ent + ent] = y, x
        return "%s entries %d and %d swapped" % (s["nm"], i, j)
    return setf(rnd, elf, b, at, f, "%s entry %d" % (s["nm"], i))


def m_strtab(rnd, elf, b):
    strs = elf.of_type(3)
    if not strs:
        return None
    s = rnd.choice(strs)
    off, size = elf.content(s)
    data = bytes(b[off:off + size])
    names = [n.encode() for n in MCOUNT + TABLES + (".text", ".rela", ".rel", "__start", "__stop")]
    hits = [off + data.find(n) for n in names if data.find(n) >= 0]
    r = rnd.random()
    if hits and r < 0.5:
        at = rnd.choice(hits) + rnd.randrange(4)
        old = b[at]
        b[at] = rnd.choice([0, ord("x"), old ^ 0x20, old + 1 & 0xff])
        return "string at %s+%#x %#x->%#x" % (s["nm"], at - off, old, b[at])
    if r < 0.7:
        # Cut the last string's NUL: a name that runs off the table.
        b[off + size - 1] = ord("A")
        return "%s's last NUL replaced" % s["nm"]
    at = off + rnd.randrange(size)
    old = b[at]
    b[at] = rnd.randrange(256)
    return "string byte %s+%#x %#x->%#x" % (s["nm"], at - off, old, b[at])


def m_code(rnd, elf, b):
    """A byte of the code at a call site: found by a relocation against an
    mcount symbol (an object) or by a table entry (an image)."""
    sites = []
    syms = elf.syms()
    mc = {i for i, s in enumerate(syms) if s["nm"] in MCOUNT}
    for r in elf.rels():
        at, f, bits = elf.rel_sym_at(r)
        idx = struct.unpack_from(f, b, at)[0] >> (8 if bits == 24 else 0)
        if bits == 24:
            idx = struct.unpack_from(elf.e + "I", b, r["at"] + 4)[0] >> 8
        tgt = r["sec"]["info"]
        if idx in mc and tgt < len(elf.secs) and elf.content(elf.secs[tgt]):
            roff = struct.unpack_from(elf.e + ("Q" if elf.w else "I"), b, r["at"])[0]
            sites.append(elf.secs[tgt]["offset"] + roff)
    for s in elf.secs:
        if s["nm"] in ("__mcount_loc", "mcount_loc") and elf.content(s) and s["type"] != 9:
            ent = 8 if elf.w else 4
            off, size = elf.content(s)
            for at in range(off, off + size - ent + 1, ent):
                fo = elf.file_offset(struct.unpack_from(elf.e + ("Q" if ent == 8 else "I"), b, at)[0])
                if fo is not None:
                    sites.append(fo)
    if not sites:
        return None
    at = rnd.choice(sites) + rnd.randrange(-4, 8)
    if not 0 <= at < len(b):
        return None
    old = b[at]
    b[at] = rnd.choice([0, 0x90, 0xff, 0xe8, 0xcc, old ^ (1 << rnd.randrange(8)), rnd.randrange(256)])
    return "code byte %#x %#x->%#x" % (at, old, b[at])


def m_truncate(rnd, elf, b):
    cuts = [rnd.randrange(len(b))]
    for s in getattr(elf, "secs", ()):  # (none once an earlier mutation broke the ELF)
        cuts += [s["offset"], s["offset"] + s["size"] - 1, s["at"] + 3]
    cut = max(0, min(len(b) - 1, rnd.choice(cuts)))
    del b[cut:]
    return "truncated to %d bytes" % cut


def m_flip(rnd, elf, b):
    out = []
    for _ in range(rnd.choice([1, 1, 2, 4, 8, 16])):
        at = rnd.randrange(len(b))
        old = b[at]
        b[at] = old ^ (1 << rnd.randrange(8)) if rnd.random() < 0.6 else rnd.randrange(256)
        out.append("%#x:%#x->%#x" % (at, old, b[at]))
    return "bytes " + ",".join(out)


def m_shdr_copy(rnd, elf, b):
    if len(elf.secs) < 2:
        return None
    s, t = rnd.sample(elf.secs, 2)
    b[t["at"]:t["at"] + elf.shsize] = b[s["at"]:s["at"] + elf.shsize]
    return "section header %s copied over %s" % (s["nm"], t["nm"])


MUTATORS = [(m_ehdr, 8), (m_shdr, 18), (m_phdr, 5), (m_sym, 14), (m_rel, 16), (m_table, 12),
            (m_strtab, 5), (m_code, 6), (m_truncate, 4), (m_flip, 10), (m_shdr_copy, 2)]


def mutate(rnd, raw):
    b = bytearray(raw)
    done = []
    steps = 1 if rnd.random() < 0.75 else rnd.choice([2, 3])
    for _ in range(steps * 4):
        if len(done) == steps or not b:
            break
        fn = rnd.choices([m for m, _ in MUTATORS], [w for _, w in MUTATORS])[0]
        elf = Elf(b)
        if not elf.ok and fn not in (m_flip, m_truncate):
            fn = m_flip
        what = fn(rnd, elf, b)
        if what:
            done.append(fn.__name__[2:] + ": " + what)
    return b, done


def make(basedir, outdir, count, seed):
    rnd = random.Random(seed)
    bases = sorted(os.listdir(basedir))
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "index.tsv"), "w") as idx:
        for k in range(count):
            name = bases[k % len(bases)]
            raw = open(os.path.join(basedir, name), "rb").read()
            for _ in range(20):
                b, done = mutate(rnd, raw)
                if bytes(b) != raw:
                    break
            m = "%05d.%s" % (k, name)
            with open(os.path.join(outdir, m), "wb") as f:
                f.write(b)
            idx.write("%s\t%s\t%s\n" % (m, name, "; ".join(done)))
    print("mutate: %d mutants of %d good files (seed %s) in %s" % (count, len(bases), seed, outdir))

# ---------------------------------------------------------------- running


def commands(rc, op):
    """(name, kind, argv, validator): the argv takes the input(s) at the
    end; OUT stands for an output.  kind is 'inplace' (the input becomes
    the result), 'output' (OUT is the result, the input never changes),
    'read' (nothing changes) or 'link' (OUT, made by a link of the input).
    Every command but -o and link takes many files in one run."""
    chk, kchk = [op, "check"], [op, "check", "--kernel"]
    return [
        ("rc", "inplace", [rc], chk),
        ("rc --nop", "inplace", [rc, "--nop"], chk),
        ("rc -g", "inplace", [rc, "-g"], chk),
        ("rc --kernel", "inplace", [rc, "--kernel"], chk),
        ("rc --force", "inplace", [rc, "--force"], chk),
        ("rc --in-place", "inplace", [rc, "--in-place"], chk),
        ("rc -o", "output", [rc, "-o", "OUT"], chk),
        ("rc -N -p -w", "read", [rc, "-N", "-p", "-w"], None),
        ("op check", "read", chk, None),
        ("op check --kernel", "read", kchk, None),
        ("op inspect", "read", [op, "inspect"], None),
        ("op inspect --functions --lines", "read", [op, "inspect", "--functions", "--lines"], None),
        ("op -p inspect", "read", [op, "-p", "inspect"], None),
        ("op sort", "inplace", [op, "sort"], chk),
        ("op sort --kernel", "inplace", [op, "sort", "--kernel"], kchk),
        ("op nop", "inplace", [op, "nop"], chk),
        ("op link --nop", "link", [op, "link", "--nop", "--"], chk),
    ]


SANITIZER = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:",
             "MemorySanitizer")


# No run may write more than this: a mutant of a few kilobytes that makes a
# tool write more asks it for gigabytes of padding (an alignment of 2^31),
# which the tool must refuse; it then dies of SIGXFSZ, a crash.  binutils'
# ld, under objpatch link, writes such files too: its death is the linker's.
FSIZE = 64 << 20


def spawn(argv, timeout):
    """(exit status or None for a hang, standard error)."""
    argv = ["prlimit", "--fsize=%d" % FSIZE, "--"] + argv
    try:
        p = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           stdin=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, ""
    return p.returncode, p.stderr.decode("latin-1")


def crashed(code, err):
    return code is None or code < 0 or code not in (0, 1, 2) or any(s in err for s in SANITIZER)


def sanitizer_line(err):
    for l in err.splitlines():
        if any(s in l for s in SANITIZER) or l.startswith("SUMMARY"):
            return l.strip()
    return err.strip().splitlines()[-1] if err.strip() else ""


def per_file(code, err, files):
    """Split one run over FILES into (status, lines) per file: a file
    failed when a diagnostic line names it as an error.  None when the
    run cannot be split (a crash, a hang, an error naming no file of the
    run, or a failure no line names): its files are then run one by one."""
    if crashed(code, err):
        return None
    said = {f: [] for f in files}
    for l in err.splitlines():
        f = l.split(": ", 1)[0]
        if f in said:
            said[f].append(l)
        elif ": error: " in l:
            return None
    out = {f: (1 if any(": error: " in l for l in ls) else 0, "\n".join(ls)) for f, ls in said.items()}
    if (code != 0) != any(s for s, _ in out.values()):
        return None
    return out


def problems(text):
    """check's error lines, without the file name and with entry numbers
    (which a sort changes) left out."""
    out = set()
    for l in text.splitlines():
        if ": error: " in l:
            p = re.sub(r"(entry|relocation|entries) [0-9]+", r"\1 #", l.split(": error: ", 1)[1])
            # The bytes shown at a site, which a NOP next to it changes.
            out.add(re.sub(r" \(([0-9a-f]{2} )*[0-9a-f]{2}\)$", "", p))
    return sorted(out)


def section_symbol_value(path):
    """Whether PATH is an object with a section symbol whose st_value is
    not 0: issue 28's item 12, counted apart."""
    b = bytearray(open(path, "rb").read())
    elf = Elf(b)
    if not elf.ok or elf.field("e_type") != 1:
        return False
    return any(s["info"] & 0xf == 3 and s["value"] for s in elf.syms())


# Where check judges a site by the function symbols around it, which
# recordmcount, working from relocations as the kernel's tool does, never
# reads.
PLACEMENT = ("not inside any function", "not at a function entry", "not at the function's entry",
             "past any prologue", "bytes of NOPs before the entry")
# What recordmcount exists to put right: a call no table names.
RECORD = ("missing from the table", "table, but calls to")
# What link answers for on an image a real linker made of a mutant object
# (whose own table may already disagree with its code): the cleaning and
# the sorting of the table, and with --nop no call left.
LINK = ("out of order", "not sorted", "duplicates entry", "is zero", "has no relocation",
        "points outside", "not executable", "lies in no function", "in no call-site table",
        "missing from the table")


def blame(name, changed, before, after, image=True):
    """The problems of a command's result that the command answers for
    (tests/mutate/README.md)."""
    if name.startswith("rc"):
        if not changed:
            return []  # a table it found and kept
        # (--kernel leaves the calls of sections the kernel does not trace,
        # as the kernel's tool does.)
        record = RECORD if "--kernel" not in name else ()
        return [p for p in after if (p not in before or any(r in p for r in record))
                and not any(x in p for x in PLACEMENT)]
    if "link" in name and not image:
        return [p for p in after if any(x in p for x in LINK)]
    new = [p for p in after if p not in before]
    if "sort" in name or "link" in name:
        new += [p for p in after if p in before and ("out of order" in p or "not sorted" in p)]
    return new


class Runner:
    def __init__(self, a):
        self.a = a
        self.ccmap = {}
        if a.ccmap and os.path.exists(a.ccmap):
            for line in open(a.ccmap):
                name, rest = line.rstrip("\n").split("\t", 1)
                self.ccmap[name] = rest.split()

    def link_argv(self, base, w, out):
        """The link of an object by its architecture's linker (the map
        campaign.sh writes: the linker, its options, then the objects to
        link with it); an image is "linked" by copying it
        (tests/mutate/copy-link)."""
        if base.endswith(".o"):
            ld = self.ccmap.get(re.sub(r"(-fs)?-(raw|rec)\.o$", "", base))
            return ld + ["-o", out, w] if ld else None
        return [os.path.join(self.a.src, "tests/mutate/copy-link"), "-o", out, w]

    def run_many(self, argv, files):
        """ARGV on FILES in one run where it can be split per file, else
        one run per file: {file: (status, stderr)}."""
        code, err = spawn(argv + files, self.a.timeout * max(1, len(files) // 4))
        split = per_file(code, err, files)
        if split is not None:
            return split
        return {f: spawn(argv + [f], self.a.timeout) for f in files}

    def batch(self, items, d):
        """Every command on each (path, base) of ITEMS, in the scratch
        directory D.  Returns per item the findings and exit statuses."""
        a = self.a
        res = [([], {}, {}) for _ in items]  # found, codes, stderr by command
        checks = []  # (item, command, validator, result, changed)
        for ci, (name, kind, argv, val) in enumerate(commands(a.rc, a.op)):
            cd = os.path.join(d, "c%d" % ci)
            os.mkdir(cd)
            ws = []
            for k, (path, base) in enumerate(items):
                w = os.path.join(cd, "%d%s" % (k, os.path.splitext(base)[1]))
                shutil.copyfile(path, w)
                ws.append(w)
            outs = [w + ".out" for w in ws]
            if kind in ("output", "link"):
                got = {}
                for k, (w, out) in enumerate(zip(ws, outs)):
                    if kind == "output":
                        full = [out if x == "OUT" else x for x in argv] + [w]
                    else:
                        la = self.link_argv(items[k][1], w, out)
                        full = argv + la if la else None
                    got[w] = spawn(full, a.timeout) if full else ("skip", "")
            else:
                got = self.run_many(argv, ws)
            for k, (path, base) in enumerate(items):
                code, err = got[ws[k]]
                found, codes, said = res[k]
                if code == "skip":
                    continue
                codes[name], said[name] = code, err
                if code is None:
                    found.append(("hang", name, "no exit in %d s" % a.timeout))
                    continue
                # link passes on the status of a linker that failed (binutils'
                # ld itself dies on some mutants): not a crash of objpatch.
                linker = kind == "link" and code > 2 and not any(x in err for x in SANITIZER)
                if crashed(code, err) and not linker:
                    found.append(("crash", name, "exit %d: %s" % (code, sanitizer_line(err))))
                    continue
                if not filecmp.cmp(path, ws[k], shallow=False) and (code != 0 or kind != "inplace"):
                    found.append(("damaged", name, "exit %d changed the input" % code))
                if code != 0 or not val:
                    continue
                result = ws[k] if kind == "inplace" else outs[k]
                if not os.path.exists(result):
                    found.append(("wrong-exit-0", name, "exit 0 but no output"))
                    continue
                checks.append((k, name, val, result, not filecmp.cmp(path, result, shallow=False)))
        # Each result that a command gave with exit 0, checked.
        for val in {tuple(c[2]) for c in checks}:
            mine = [c for c in checks if tuple(c[2]) == val]
            got = self.run_many(list(val), [c[3] for c in mine])
            for k, name, _, result, changed in mine:
                found, codes, said = res[k]
                vcode, verr = got[result]
                if crashed(vcode, verr):
                    found.append(("crash", name + " | check", "exit %s: %s" % (vcode, sanitizer_line(verr))))
                elif vcode != 0:
                    before = said.get("op check --kernel" if "--kernel" in val else "op check", "")
                    found.append(("rejected", name, blame(name, changed, problems(before),
                                                          problems(verr), not items[k][1].endswith(".o"))))
        return [(f, c) for f, c, _ in res]


def run(a):
    r = Runner(a)
    bases = sorted(f for f in os.listdir(a.basedir))
    index = [l.rstrip("\n").split("\t") for l in open(os.path.join(a.outdir, "index.tsv"))]
    if a.only:
        only = {l.split()[0] for l in open(a.only) if l.strip()}
        index = [row for row in index if row[0] in only]
    log = open(a.log, "w") if a.log else None

    def batch(items):
        with tempfile.TemporaryDirectory(dir=a.tmp) as d:
            return r.batch(items, d)
    # The good files first: a command whose result check rejects on the good
    # file cannot be blamed for rejecting on a mutant.
    ref = {}
    for base, (found, codes) in zip(bases, batch([(os.path.join(a.basedir, b), b) for b in bases])):
        bad = [f for f in found if f[0] != "rejected"]
        if bad:
            print("mutate: the good file %s already fails: %s" % (base, bad))
        rej = {f[1] for f in found if f[0] == "rejected"}
        ref[base] = {n for n, c in codes.items() if c == 0 and n not in rej}
        if rej and a.log:
            with open(a.log + ".reference", "a") as f:
                f.write("%s\t%s\n" % (base, "; ".join(sorted(rej))))
    tally = {}
    counts = {k: 0 for k in ("crash", "hang", "damaged", "wrong-exit-0", "item-12")}
    excused = 0
    groups = [index[i:i + a.batch] for i in range(0, len(index), a.batch)]
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for rows, results in zip(groups, ex.map(
                lambda g: batch([(os.path.join(a.outdir, m), b) for m, b, _ in g]), groups)):
            for (m, base, what), (found, codes) in zip(rows, results):
                for name, code in codes.items():
                    t = tally.setdefault(name, {})
                    k = "hang" if code is None else str(code) if code in (0, 1, 2) else "other"
                    t[k] = t.get(k, 0) + 1
                for kind, name, detail in found:
                    if kind == "rejected":
                        # Counted only where the good file's result passed
                        # check, and for what the command answers for.
                        if name not in ref[base] or not detail:
                            excused += 1
                            if log:
                                log.write("excused\t%s\t%s\t%s\t%s\n" % (m, name, detail, what))
                            continue
                        kind = "wrong-exit-0"
                        if section_symbol_value(os.path.join(a.outdir, m)):
                            kind = "item-12"
                    counts[kind] += 1
                    line = "%s\t%s\t%s\t%s\t%s" % (kind, m, name, detail, what)
                    if counts[kind] <= 30:
                        print(line)
                    if log:
                        log.write(line + "\n")
                        log.flush()
    print("mutate: %d mutants of %d good files; runs per command:" % (len(index), len(bases)))
    for name, t in tally.items():
        print("  %-32s %6d runs: %s" % (name, sum(t.values()),
                                        ", ".join("exit %s %d" % kv for kv in sorted(t.items()))))
    print("mutate: crashes %(crash)d, hangs %(hang)d, damaged inputs %(damaged)d, "
          "wrong exit 0 %(wrong-exit-0)d, wrong exit 0 of item 12 %(item-12)d" % counts +
          " (not counted: %d exit 0 whose problems the command does not answer for)" % excused)
    return 1 if any(counts.values()) else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
        return 0
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("cmd")
    p.add_argument("--rc", required=True)
    p.add_argument("--op", required=True)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--batch", type=int, default=25)
    p.add_argument("--log")
    p.add_argument("--timeout", type=int, default=60)
    p.add_argument("--ccmap")
    p.add_argument("--only", help="a file listing the mutants to run again, one a line")
    p.add_argument("--tmp", default=None)
    p.add_argument("--src", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
    p.add_argument("basedir")
    p.add_argument("outdir")
    return run(p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
