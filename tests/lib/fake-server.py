#!/usr/bin/python3
"""fake-server.py DIR SCENARIO: a server that poses as a program with
libmcloc's control channel on, for the tests of the mcloc command: it
listens on DIR/PID (PID its own) and answers as SCENARIO says, which is
what a hostile or broken peer could send.  The layouts are restated here
from <mcloc/control.h>.  Prints "running" once it listens; runs until
killed.

Scenarios (see SCENARIOS below): "good" answers as a program would, with
rings in a sealed memfd; the others break one thing each: a field of the
rings' header, the memfd itself, or a reply.  "scribble" hands out good
rings, then writes garbage over their header and rings while they are
read.
"""
import fcntl
import mmap
import os
import random
import socket
import struct
import sys
import threading
import time

VERSION = 1
HDR = struct.Struct("=IHHII")
REQ_HELLO, REQ_FUNCS, REQ_ENABLED, REQ_STATS, REQ_TRACE, REQ_STOP, REQ_ADDRS, REQ_SITES = range(1, 9)
REP_HELLO, REP_NAMES, REP_SITES, REP_STATS, REP_TRACE, REP_ADDRS = range(0x101, 0x107)
REP_END, REP_ERROR = 0x1FE, 0x1FF
# magic, version, rings, ring_size, ring_stride, data_offset, ticks,
# next_ring, done, no_ring, start_ns, start_time, clock_seq, flags, now_ns,
# now_time
RING_HDR = struct.Struct("=QIIIIIIIIQQQIIQQ")
MAGIC = 0x676E6972636C636D
RING = 192      # sizeof(struct mcloc_ring)
HELLO = struct.Struct("=IIQQQ16s16s32s")
SITE = struct.Struct("=QIHH")

RING_VERSION = 3    # MCLOC_RING_VERSION
GOOD = dict(magic=MAGIC, version=RING_VERSION, rings=2, ring_size=4096, ring_stride=RING + 4096,
            data_offset=128, ticks=0, flags=0)

# name: (header fields changed, memfd changes)
SCENARIOS = {
    "good": ({}, {}),
    "magic": ({"magic": 0x1234}, {}),
    "version": ({"version": 1}, {}),
    "rings0": ({"rings": 0}, {}),
    "rings4097": ({"rings": 4097}, {"size": 128 + 4097 * (RING + 4096)}),
    "ringsize-npow2": ({"ring_size": 6144, "ring_stride": RING + 6144}, {"size": 128 + 2 * (RING + 6144)}),
    "ringsize-small": ({"ring_size": 2048, "ring_stride": RING + 2048}, {}),
    "ringsize-huge": ({"ring_size": 128 << 20, "rings": 1, "ring_stride": RING + (128 << 20)},
                      {"size": 128 + RING + (128 << 20)}),
    "total": ({"ring_size": 1 << 20, "rings": 1025, "ring_stride": RING + (1 << 20)},
              {"size": 128 + 1025 * (RING + (1 << 20))}),
    "offset-small": ({"data_offset": 8}, {}),
    "offset-misaligned": ({"data_offset": 132}, {}),
    "stride-small": ({"ring_stride": 4096}, {}),
    "stride-misaligned": ({"ring_stride": RING + 4096 + 4}, {"size": 128 + 2 * (RING + 4100)}),
    "past-end": ({}, {"said": 128 + 2 * (RING + 4096) - 8}),
    "flags": ({"flags": 4}, {}),
    "ticks": ({"ticks": 2}, {}),
    "nofd": ({}, {"fd": "none"}),
    "shortrep": ({}, {"rep": 4}),
    "trace-type": ({}, {"fd": "none", "type": REP_END}),
    "pipe": ({}, {"fd": "pipe"}),
    "unsealed": ({}, {"seal": False}),
    "truncated": ({}, {"size": 4096, "said": 128 + 2 * (RING + 4096)}),
    "tiny": ({}, {"said": 16}),
    "scribble": ({"ticks": 1}, {"scribble": True}),
    # replies
    "rep-short-len": ({}, {}), "rep-long-len": ({}, {}), "rep-version": ({}, {}),
    "rep-error": ({}, {}), "stats-type": ({}, {}), "stats-short": ({}, {}),
    "sites-type": ({}, {}), "sites-namelen": ({}, {}), "sites-nonul": ({}, {}),
    "funcs-nonul": ({}, {}),
}


def reply(conn, type_, payload=b"", seq=0, length=None, version=VERSION, fds=None):
    n = HDR.size + len(payload) if length is None else length
    data = HDR.pack(n, type_, version, seq, 0) + payload
    if fds:
        socket.send_fds(conn, [data], fds)
    else:
        conn.sendall(data)


def rings_memfd(scenario):
    fields, mem = SCENARIOS[scenario]
    h = dict(GOOD, **fields)
    size = mem.get("size", 128 + 2 * (RING + 4096))
    fd = os.memfd_create("fake-rings", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    now = time.monotonic_ns()
    os.pwrite(fd, RING_HDR.pack(h["magic"], h["version"], h["rings"], h["ring_size"],
                                h["ring_stride"], h["data_offset"], h["ticks"], 0, 0, 0, now,
                                1000, 0, h["flags"], now, 1000), 0)
    if mem.get("seal", True):
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
    return fd, mem.get("said", size), size


def scribble(fd, size):
    """Garbage over the header and the rings, again and again, as the
    reader reads: geometry, heads, tails, claims, the clock pair (its
    sequence odd for good), events."""
    m = mmap.mmap(fd, size)
    rnd = random.Random(28)
    time.sleep(0.5)     # (once the reader has checked the header)
    while True:
        for i in range(2):
            at = 128 + i * (RING + 4096)
            struct.pack_into("=QQ", m, at, rnd.getrandbits(64), rnd.getrandbits(64))
            struct.pack_into("=Q", m, at + 64, rnd.getrandbits(64))
            struct.pack_into("=QII", m, at + 128, rnd.getrandbits(64), 1000 + i, 1)
            m[at + RING:at + RING + 4096] = rnd.randbytes(4096)
        m[0:RING_HDR.size] = RING_HDR.pack(0, 9, 0xFFFFFFFF, 0x80000000, 0xFFFFFFFF,
                                           0xFFFFFFF0, 1, 0xFFFFFFFF, 0,
                                           rnd.getrandbits(64), rnd.getrandbits(64),
                                           rnd.getrandbits(64), 1, 0xFFFFFFFF,
                                           rnd.getrandbits(64), rnd.getrandbits(64))
        time.sleep(0.001)


def answer(conn, scenario, type_, seq):
    if scenario == "rep-short-len":
        return reply(conn, REP_STATS, b"\0" * 72, seq, length=8)
    if scenario == "rep-long-len":
        return reply(conn, REP_STATS, b"\0" * 72, seq, length=65537)
    if scenario == "rep-version":
        return reply(conn, REP_STATS, b"\0" * 72, seq, version=2)
    if scenario == "rep-error":
        return reply(conn, REP_ERROR, struct.pack("=i", 22) + b"refused, as a test\0", seq)
    if type_ == REQ_HELLO:
        return reply(conn, REP_HELLO, HELLO.pack(os.getpid(), 1, 1, 1, 0, b"fake", b"nop", b""), seq)
    if type_ == REQ_STATS:
        if scenario == "stats-type":
            return reply(conn, REP_HELLO, b"\0" * 72, seq)
        return reply(conn, REP_STATS, b"\0" * (8 if scenario == "stats-short" else 72), seq)
    if type_ == REQ_ENABLED and scenario.startswith("sites-"):
        if scenario == "sites-type":
            return reply(conn, REP_NAMES, b"f\0", seq)
        name = b"work_a"
        entry = SITE.pack(0x1000, 1, 1, len(name) + (100 if scenario == "sites-namelen" else 0))
        entry += name + (b"x" if scenario == "sites-nonul" else b"\0")
        return reply(conn, REP_SITES, entry + b"\0" * (-len(entry) % 8), seq)
    if type_ == REQ_FUNCS:
        if scenario == "funcs-nonul":
            return reply(conn, REP_NAMES, b"work_a\0work_b", seq)
        return reply(conn, REP_END, b"", seq)
    if type_ == REQ_ADDRS:
        return reply(conn, REP_ADDRS, b"", seq)
    if type_ == REQ_TRACE:
        mem = SCENARIOS[scenario][1]
        fd, said, size = rings_memfd(scenario)
        payload = struct.pack("=Q", said)[:mem.get("rep", 8)]
        if mem.get("fd") == "none":
            return reply(conn, mem.get("type", REP_TRACE), payload, seq)
        if mem.get("fd") == "pipe":
            r, w = os.pipe()
            os.close(fd)
            fd = r
        reply(conn, REP_TRACE, payload, seq, fds=[fd])
        if mem.get("scribble"):
            threading.Thread(target=scribble, args=(fd, size), daemon=True).start()
        return None
    return reply(conn, REP_END, b"", seq)     # ENABLED, SITES, STOP


def serve(conn, scenario):
    with conn:
        while True:
            hdr = conn.recv(HDR.size, socket.MSG_WAITALL)
            if len(hdr) < HDR.size:
                return
            n, type_, _, seq, _ = HDR.unpack(hdr)
            if n > HDR.size:
                conn.recv(n - HDR.size, socket.MSG_WAITALL)
            answer(conn, scenario, type_, seq)


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in SCENARIOS:
        sys.exit(__doc__)
    path = os.path.join(sys.argv[1], str(os.getpid()))
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(8)
    print("running", flush=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn, sys.argv[2]), daemon=True).start()


if __name__ == "__main__":
    main()
