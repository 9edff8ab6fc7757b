#!/usr/bin/python3
"""forge-data.py FILE HOW: rewrite the first DATA event after an EXIT in a
thread file of a recording (<mcloc/record.h>: a 56-byte header, then
8-byte units; <mcloc/control.h> lays out the events: a slot is a word,
then a time, a short event one word), for the tests of hostile
recordings in tests/args.bats.

  two-retvals   its items become two return values: 5, then "ab"
  huge          its payload becomes 14 * 0xffffffff bytes (its slot count
                would wrap 32 bits); its own slots stay
  int-len0      its item becomes a signed return value of no bytes
"""
import struct
import sys


def units(w):
    t = w >> 59 & 15
    if t in (9, 10):
        return 1
    return 4 if t == 1 else 2 + 2 * (((w & (1 << 48) - 1) + 13) // 14) if t == 8 else 2


def main(path, how):
    b = bytearray(open(path, "rb").read())
    at, prev = 56, 0
    while at + 8 <= len(b):
        w = struct.unpack_from("<Q", b, at)[0]
        if w >> 59 & 15 == 8 and prev in (3, 10):
            break
        prev, at = w >> 59 & 15, at + 8 * units(w)
    else:
        sys.exit("no DATA after an EXIT in " + path)
    if how == "huge":
        struct.pack_into("<Q", b, at, w >> 48 << 48 | 14 * 0xFFFFFFFF)
    else:
        items = bytes([0x81, 8]) + struct.pack("<q", 5) + bytes([0x86, 2]) + b"ab"
        if how == "int-len0":
            items = bytes([0x81, 0])
        items += bytes(-len(items) % 14)
        data = struct.pack("<QQ", w >> 48 << 48 | len(items), 0)
        data += b"".join(items[i:i + 6] + bytes(2) + items[i + 6:i + 14]
                         for i in range(0, len(items), 14))
        b = b[:at] + data + b[at + 8 * units(w):]
    open(path, "wb").write(b)


main(sys.argv[1], sys.argv[2])
