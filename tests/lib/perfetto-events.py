#!/usr/bin/python3
"""perfetto-events.py FILE: the slices of a Perfetto trace written by mcloc
dump --perfetto, one JSON line each: {"type": 1 begin, 2 end, 3 instant,
"name": its interned name (begin, instant), "args": {annotation: value}}.
A reader of the protobuf wire format of its own, apart from mcloc's
writer, for tests/args.bats: varints, 64-bit fixed fields (doubles) and
length-delimited fields, by the field numbers of Perfetto's protos."""
import json
import struct
import sys


def fields(b):
    """(field, wire type, value) of the message B."""
    at = 0

    def varint():
        nonlocal at
        v = shift = 0
        while True:
            c = b[at]
            at += 1
            v |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                return v
    while at < len(b):
        k = varint()
        f, w = k >> 3, k & 7
        if w == 0:
            yield f, w, varint()
        elif w == 1:
            yield f, w, b[at:at + 8]
            at += 8
        elif w == 2:
            n = varint()
            yield f, w, b[at:at + n]
            at += n
        else:
            raise ValueError(f"wire type {w}")


def annotation(b):
    name, value = None, None
    for f, w, v in fields(b):
        if f == 10:
            name = v.decode()
        elif f == 2:
            value = bool(v)
        elif f == 3:
            value = v
        elif f == 4:
            value = v - (1 << 64) if v >> 63 else v
        elif f == 5:
            value = struct.unpack("<d", v)[0]
        elif f == 6:
            value = v.decode()
        elif f == 7:
            value = {"pointer": v}
    return name, value


names = {}
for f, w, pkt in fields(open(sys.argv[1], "rb").read()):
    assert f == 1 and w == 2
    ev = None
    for pf, pw, pv in fields(pkt):
        if pf == 12:    # interned_data { event_names = 2 { iid = 1; name = 2 } }
            for nf, nw, nv in fields(pv):
                if nf == 2:
                    d = dict((a, c) for a, _, c in fields(nv))
                    names[d[1]] = d[2].decode()
        elif pf == 11:  # track_event
            ev = {"args": {}}
            for ef, ew, evv in fields(pv):
                if ef == 9:
                    ev["type"] = evv
                elif ef == 10:
                    ev["iid"] = evv
                elif ef == 4:
                    k, v = annotation(evv)
                    ev["args"][k] = v
    if ev:
        if "iid" in ev:
            ev["name"] = names[ev.pop("iid")]
        print(json.dumps(ev))
