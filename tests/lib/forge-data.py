#!/usr/bin/python3
"""forge-data.py FILE HOW: rewrite the first DATA event after an EXIT in a
thread file of a recording (<mcloc/record.h>: a 56-byte header, then
16-byte slots; <mcloc/control.h> lays out the events), for the tests of
hostile recordings in tests/args.bats.

  two-retvals   its items become two return values: 5, then "ab"
  huge          its payload becomes 14 * 0xffffffff bytes (its slot count
                would wrap 32 bits); its own slots stay
"""
import struct
import sys


def slots(w):
    t = w >> 59 & 15
    return 2 if t == 1 else 1 + ((w & (1 << 48) - 1) + 13) // 14 if t == 8 else 1


def main(path, how):
    b = bytearray(open(path, "rb").read())
    at, prev = 56, 0
    while at + 16 <= len(b):
        w = struct.unpack_from("<Q", b, at + 8)[0]
        if w >> 59 & 15 == 8 and prev == 3:
            break
        prev, at = w >> 59 & 15, at + 16 * slots(w)
    else:
        sys.exit("no DATA after an EXIT in " + path)
    if how == "huge":
        struct.pack_into("<Q", b, at + 8, w >> 48 << 48 | 14 * 0xFFFFFFFF)
    else:
        items = bytes([0x81, 8]) + struct.pack("<q", 5) + bytes([0x86, 2]) + b"ab"
        items += bytes(-len(items) % 14)
        data = struct.pack("<QQ", 0, w >> 48 << 48 | len(items))
        data += b"".join(items[i:i + 14] + bytes(2) for i in range(0, len(items), 14))
        b = b[:at] + data + b[at + 16 * slots(w):]
    open(path, "wb").write(b)


main(sys.argv[1], sys.argv[2])
