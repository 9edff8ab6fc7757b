#!/usr/bin/python3
"""control-client.py: a raw client of libmcloc's control protocol, written
apart from the mcloc command (its layout is restated here from
<mcloc/control.h>), for the tests.

  control-client.py malformed SOCKET   send each malformed request of CASES
                                       on its own connection; each must get
                                       an error reply and then be closed.
                                       Prints one line per case; exit 1 if
                                       any case was not answered so
  control-client.py hello SOCKET       one well-formed HELLO: prints the pid
  control-client.py sites SOCKET       the address of every site enabled or
                                       parked (ever enabled), one a line
  control-client.py allsites SOCKET    every site the program names, those of
                                       images gone included: its address and
                                       name, one a line
  control-client.py silent SOCKET      8 connections that send nothing: each
                                       must be closed by the program (30 s at
                                       most); then a HELLO must be answered
  control-client.py badtrace SOCKET    each TRACE of BAD_TRACES must get an
                                       error naming it a bad trace request;
                                       a good one then starts
  control-client.py scribble SOCKET    start a trace, then write garbage over
                                       the rings' geometry and heads in the
                                       shared memory; "scribbled" once done;
                                       holds the trace until stdin closes
"""
import mmap
import os
import socket
import struct
import sys

VERSION = 1
REQ_HELLO, REQ_FUNCS, REQ_ENABLED, REQ_STATS, REQ_TRACE, REQ_STOP, REQ_ADDRS = 1, 2, 3, 4, 5, 6, 7
REQ_SITES = 8
REQ_ARGS = 11
REQ_ARGS_GLOB = 12
# struct mcloc_args_ent: site, nargs, has_ret, 6 reserved, 12 args of 4
# bytes (fmt, size, in, index), ret; padded to 8.
ARGS_ENT = struct.Struct("=QBB6x48s4s4x")
ARGS_ENT_SIZE = ARGS_ENT.size
TRACE = struct.Struct("=IIIIII")     # tracer, ring_kib, rings, max_depth, tid, flags
REP_HELLO, REP_END, REP_ERROR = 0x101, 0x1FE, 0x1FF
HDR = struct.Struct("=IHHII")


def msg(type_, payload=b"", version=VERSION, seq=7, reserved=0, length=None):
    n = HDR.size + len(payload) if length is None else length
    return HDR.pack(n, type_, version, seq, reserved) + payload


CASES = [
    ("length below the header", msg(REQ_HELLO, length=8)),
    ("length 0", msg(REQ_HELLO, length=0)),
    ("length above the maximum", msg(REQ_HELLO, length=4097)),
    ("length 4 GiB", msg(REQ_HELLO, length=0xFFFFFFFF)),
    ("type 0", msg(0)),
    ("type 99", msg(99)),
    ("type 0xffff", msg(0xFFFF)),
    ("a reply's type as a request", msg(REP_HELLO)),
    ("the error reply's type as a request", msg(REP_ERROR)),
    ("version 0", msg(REQ_HELLO, version=0)),
    ("version 2", msg(REQ_HELLO, version=2)),
    ("version 0xffff", msg(REQ_HELLO, version=0xFFFF)),
    ("reserved field set", msg(REQ_HELLO, reserved=1)),
    ("HELLO with a payload", msg(REQ_HELLO, b"x\0")),
    ("ENABLED with a payload", msg(REQ_ENABLED, b"\0" * 8)),
    ("STATS with a payload", msg(REQ_STATS, b"abc")),
    ("FUNCS without a payload", msg(REQ_FUNCS)),
    ("FUNCS glob without its NUL", msg(REQ_FUNCS, b"work_*")),
    ("FUNCS glob with a NUL inside", msg(REQ_FUNCS, b"wo\0rk\0")),
    ("FUNCS glob of 4080 bytes without a NUL", msg(REQ_FUNCS, b"a" * 4080)),
    ("FUNCS of two NULs", msg(REQ_FUNCS, b"\0\0")),
    ("sixteen bytes of 0xff", b"\xff" * 16),
    ("sixteen bytes of garbage", bytes(range(7, 23))),
    ("HELLO then garbage", msg(REQ_HELLO) + b"\xde\xad\xbe\xef" * 4),
    ("HELLO then a short length", msg(REQ_HELLO) + msg(REQ_HELLO, length=3)),
    ("TRACE without its fields", msg(REQ_TRACE, b"\0\0\0")),
    ("TRACE globs without their NULs",
     msg(REQ_TRACE, TRACE.pack(1, 64, 4, 0, 0, 0) + b"work_*")),
    ("TRACE with bytes past its globs",
     msg(REQ_TRACE, TRACE.pack(1, 64, 4, 0, 0, 0) + b"\0\0\0junk")),
    ("TRACE with an unknown flag set",
     msg(REQ_TRACE, TRACE.pack(1, 64, 4, 0, 0, 8) + b"\0\0\0")),
    ("STOP with a payload", msg(REQ_STOP, b"now\0")),
    ("ADDRS of 5 bytes", msg(REQ_ADDRS, b"\1\2\3\4\5")),
    ("ADDRS without addresses", msg(REQ_ADDRS)),
    ("SITES with a payload", msg(8, b"\0")),
    ("RELEASE with a payload", msg(9, b"\0")),
    ("SNAPSHOT with a payload", msg(10, b"\0")),
    ("ARGS without entries", msg(REQ_ARGS)),
    ("ARGS of an entry and a half", msg(REQ_ARGS, b"\0" * (ARGS_ENT_SIZE * 3 // 2))),
    ("ARGS_GLOB of an entry without a glob", msg(REQ_ARGS_GLOB, b"\0" * ARGS_ENT_SIZE)),
    ("ARGS_GLOB whose glob is not NUL-terminated",
     msg(REQ_ARGS_GLOB, b"\0" * ARGS_ENT_SIZE + b"main")),
] + [("unknown type %d" % t, msg(t)) for t in range(13, 17)] + [
    ("a header cut short, then silence", HDR.pack(16, REQ_HELLO, VERSION, 1, 0)[:10]),
]


def recv_all(s):
    out = b""
    while True:
        try:
            b = s.recv(65536)
        except ConnectionResetError:
            break
        if not b:
            break
        out += b
    return out


def replies(data):
    """(type, payload) of each whole reply in DATA."""
    out = []
    while len(data) >= HDR.size:
        n, t, v, seq, _ = HDR.unpack_from(data)
        if n < HDR.size or n > len(data):
            break
        out.append((t, data[HDR.size:n]))
        data = data[n:]
    return out


def malformed(path):
    bad = 0
    for name, b in CASES:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(15)
        s.connect(path)
        s.sendall(b)
        got = replies(recv_all(s))
        s.close()
        ok = bool(got) and got[-1][0] == REP_ERROR
        why = got[-1][1][4:].split(b"\0")[0].decode() if ok else "no error reply"
        print("%s %s: %s" % ("ok" if ok else "FAIL", name, why))
        bad += not ok
    print("%d malformed requests, %d answered with an error" % (len(CASES), len(CASES) - bad))
    return 1 if bad else 0


# Each value check of a trace request, one failing at a time: (name,
# tracer, ring KiB, rings).  The program answers each with an error and
# keeps the connection.
BAD_TRACES = [
    ("tracer 0", 0, 64, 4), ("tracer 3", 3, 64, 4),
    ("rings of 2 KiB", 1, 2, 4), ("rings of 6 KiB, not a power of 2", 1, 6, 4),
    ("rings of 96 KiB, not a power of 2", 1, 96, 4),
    ("rings of 131072 KiB", 1, 131072, 1), ("0 rings", 1, 64, 0), ("4097 rings", 1, 4, 4097),
    ("1025 MiB in all", 1, 1024, 1025),
]


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(path)
    return s


def one_reply(s):
    hdr = s.recv(HDR.size, socket.MSG_WAITALL)
    n, t, _, _, _ = HDR.unpack(hdr)
    body = s.recv(n - HDR.size, socket.MSG_WAITALL) if n > HDR.size else b""
    return t, body


def trace_req(tracer, kib, rings, globs=b"\0\0\0"):
    return msg(REQ_TRACE, TRACE.pack(tracer, kib, rings, 0, 0, 0) + globs)


def badtrace(path):
    bad = 0
    for name, tracer, kib, rings in BAD_TRACES:
        s = connect(path)
        s.sendall(trace_req(tracer, kib, rings))
        t, body = one_reply(s)
        why = body[4:].split(b"\0")[0].decode() if t == REP_ERROR else "type %#x" % t
        ok = t == REP_ERROR and why.startswith("bad trace request")
        print("%s %s: %s" % ("ok" if ok else "FAIL", name, why))
        bad += not ok
        s.close()
    # Argument entries the library does not know, and a site twice: the
    # trace request is refused, the connection kept.  The same of an
    # argument glob's entry; one that names a site is refused as it comes.
    glob = lambda ent: msg(REQ_ARGS_GLOB, ent + b"*\0")
    for name, first, at_trace, want in [
            ("an argument of format 9",
             msg(REQ_ARGS, ARGS_ENT.pack(0x1000, 1, 0, bytes([9, 8, 1, 1]) + bytes(44), bytes(4))),
             True, "is not one this library knows"),
            ("an argument of 3 bytes",
             msg(REQ_ARGS, ARGS_ENT.pack(0x1000, 1, 0, bytes([1, 3, 1, 1]) + bytes(44), bytes(4))),
             True, "is not one this library knows"),
            ("13 arguments", msg(REQ_ARGS, ARGS_ENT.pack(0x1000, 13, 0, bytes(48), bytes(4))),
             True, "is not one this library knows"),
            ("a return value of index 1",
             msg(REQ_ARGS, ARGS_ENT.pack(0x1000, 0, 1, bytes(48), bytes([1, 8, 1, 1]))),
             True, "is not one this library knows"),
            ("a site twice",
             msg(REQ_ARGS, ARGS_ENT.pack(0x1000, 0, 1, bytes(48), bytes([1, 8, 1, 0])) * 2),
             True, "has two argument entries"),
            ("an argument glob of format 9",
             glob(ARGS_ENT.pack(0, 1, 0, bytes([9, 8, 1, 1]) + bytes(44), bytes(4))),
             True, "is not one this library knows"),
            ("an argument glob naming a site",
             glob(ARGS_ENT.pack(0x1000, 1, 0, bytes([1, 8, 1, 1]) + bytes(44), bytes(4))),
             False, "names a site")]:
        s = connect(path)
        s.sendall(first)
        t0, body = one_reply(s)
        t = t0
        if at_trace:
            s.sendall(trace_req(1, 4, 1))
            t, body = one_reply(s)
        s.sendall(msg(REQ_HELLO))
        t2, _ = one_reply(s)
        why = body[4:].split(b"\0")[0].decode() if t == REP_ERROR else "type %#x" % t
        ok = (t0 == REP_END) == at_trace and t == REP_ERROR and want in why and t2 == REP_HELLO
        print("%s %s: %s" % ("ok" if ok else "FAIL", name, why))
        bad += not ok
        s.close()
    # STOP from a connection that does not trace: refused, kept.
    s = connect(path)
    s.sendall(msg(REQ_STOP) + msg(REQ_HELLO))
    t1, body = one_reply(s)
    t2, _ = one_reply(s)
    ok = t1 == REP_ERROR and b"not tracing" in body and t2 == REP_HELLO
    print("a STOP from a connection not tracing: %s" % ("refused, and answered on" if ok else "FAIL"))
    bad += not ok
    s.close()
    s = connect(path)
    s.sendall(trace_req(1, 4, 1))
    t, _ = socket.recv_fds(s, HDR.size + 8, 1)[:2]
    print("a good trace request: %s" % ("started" if HDR.unpack_from(t)[1] == 0x105 else "FAIL"))
    s.close()
    return 1 if bad else 0


def silent(path):
    conns = [connect(path) for _ in range(8)]
    closed = 0
    for s in conns:
        try:
            while s.recv(4096):
                pass
            closed += 1
        except OSError:
            pass
    print("%d of 8 silent connections closed by the program" % closed)
    return 0 if closed == 8 and hello(path) == 0 else 1


def sites(path, every=False):
    s = connect(path)
    s.sendall(msg(REQ_SITES))
    while True:
        t, body = one_reply(s)
        if t != 0x103:
            return 0 if t == REP_END else 1
        at = 0
        while at + 16 <= len(body):
            addr, flags, _, namelen = struct.unpack_from("=QIHH", body, at)
            if every:
                name = body[at + 16:at + 16 + namelen].decode(errors="replace")
                print(addr, name)
            elif flags & (1 | 8):     # MCLOC_SITE_ENABLED, MCLOC_SITE_PARKED
                print(addr)
            at += (16 + namelen + 1 + 7) & ~7


def scribble(path):
    s = connect(path)
    s.sendall(trace_req(1, 4, 4, b"burst_*\0\0\0"))
    data, fds, _, _ = socket.recv_fds(s, HDR.size + 8, 1)
    if HDR.unpack_from(data)[1] != 0x105 or not fds:
        return 1
    size = struct.unpack_from("=Q", data, HDR.size)[0]
    m = mmap.mmap(fds[0], size)
    rings, ring_size, stride, off = struct.unpack_from("=IIII", m, 12)
    # The geometry, as a controller may write it: rings past the end,
    # sizes no power of 2; and each ring's head far out.
    struct.pack_into("=IIII", m, 12, 0xFFFFFFFF, 0x80000000 | 12345, 0xFFFFFFF8, 0xFFFFFFF0)
    struct.pack_into("=I", m, 32, 0x7FFFFFFF)       # next_ring
    # (tail too, so that there is room: the events are written, at the
    # head masked by the program's own ring size)
    for i in range(rings):
        struct.pack_into("=Q", m, off + i * stride, 0xDEADBEEFDEADBEE7)
        struct.pack_into("=Q", m, off + i * stride + 64, 0xDEADBEEFDEADBEE7)
    print("scribbled", flush=True)
    sys.stdin.read()
    return 0


def hello(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(15)
    s.connect(path)
    s.sendall(msg(REQ_HELLO))
    hdr = s.recv(HDR.size, socket.MSG_WAITALL)
    n, t, _, _, _ = HDR.unpack(hdr)
    body = s.recv(n - HDR.size, socket.MSG_WAITALL)
    if t != REP_HELLO:
        return 1
    print(struct.unpack_from("=I", body)[0])
    return 0


if __name__ == "__main__":
    modes = dict(malformed=malformed, hello=hello, sites=sites, silent=silent,
                 allsites=lambda path: sites(path, True),
                 badtrace=badtrace, scribble=scribble)
    if len(sys.argv) != 3 or sys.argv[1] not in modes:
        sys.exit(__doc__)
    sys.exit(modes[sys.argv[1]](sys.argv[2]))
