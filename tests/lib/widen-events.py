#!/usr/bin/python3
"""widen-events.py FILE...: rewrite each thread file of a recording with
every short event (<mcloc/control.h>: SENTRY, SEXIT, one 8-byte unit)
written out as the whole slot it stands for, read against the state the
header describes.  A second reading of the format, apart from mcloc's
own: tests/record.bats checks that mcloc reads both files alike.  Prints
the short events and the slots it saw."""
import struct
import sys

PAY = (1 << 48) - 1
DEPTH_MAX = 0x7FF


def units(w):
    t = w >> 59 & 15
    if t in (9, 10):
        return 1
    if t == 1:
        return 4
    if t == 8 and (w & PAY) <= 1 << 20:
        return 2 + 2 * (((w & PAY) + 13) // 14)
    return 2


def widen(path):
    b = open(path, "rb").read()
    out, at = [b[:56]], 56
    time = site = opn = 0
    shorts = slots = 0
    while at + 8 <= len(b):
        w = struct.unpack_from("<Q", b, at)[0]
        t, n = w >> 59 & 15, units(w)
        if at + 8 * n > len(b):
            break
        if t == 9:
            d = w & (1 << 27) - 1
            d -= (d >> 26) << 27
            time += w >> 27 & 0xFFFFFFFF
            site = (site + d) & PAY
            depth, pay, t = opn, site, 2
            opn += 1
        elif t == 10:
            time += w >> 29 & (1 << 30) - 1
            depth, pay, t = opn - 1, w & (1 << 29) - 1, 3
            opn = depth
        else:
            slots += 1
            out.append(b[at:at + 8 * n])
            if 1 <= t <= 8:
                time = struct.unpack_from("<Q", b, at + 8)[0]
                depth = w >> 48 & DEPTH_MAX
                if t == 2:
                    site, opn = w & PAY, depth + 1
                elif t in (3, 4):
                    opn = depth
            at += 8 * n
            continue
        shorts += 1
        out.append(struct.pack("<QQ", t << 59 | depth << 48 | pay, time))
        at += 8
    out.append(b[at:])
    open(path, "wb").write(b"".join(out))
    return shorts, slots


tot = [0, 0]
for p in sys.argv[1:]:
    s, f = widen(p)
    tot[0] += s
    tot[1] += f
print(f"{tot[0]} short {tot[1]} slots")
