#!/usr/bin/env python3
"""runnorm.py RUNFILE: an mt-ptsim run file (ptsim_run_save's layout) with what
differs between two steppings of the same program made neutral: the pid and
thread ids renumbered in order of appearance, the wall time zeroed.  Prints
the SHA-256 of the result and the event count, so that two steppings (two
builds of the tracer) can be compared: same digest, same execution log."""
import hashlib
import struct
import sys

data = open(sys.argv[1], "rb").read()
pos = 0


def u64():
    global pos
    v = struct.unpack_from("<Q", data, pos)[0]
    pos += 8
    return v


def blob():
    global pos
    n = u64()
    b = data[pos:pos + n]
    pos += n
    return b


ids = {}


def ren(t):
    return ids.setdefault(t, len(ids) + 1)


out = []
assert data[:8] == b"MTPTSIM1", "not an mt-ptsim run file"
pos = 8
out.append(ren(u64()))  # pid
out.append(blob())       # comm
out.append(blob())       # cmdline
out += [u64(), u64()]    # steps, insns
u64()                    # seconds: wall time
out += [u64(), u64(), u64(), blob(), blob()]  # end, status, end_ip, stop, start
for _ in range(u64()):
    out += [ren(u64()), blob()]
for _ in range(u64()):
    out += [u64() for _ in range(7)] + [blob(), blob(), blob()]
nev = u64()
for _ in range(nev):
    w = u64()
    kind, tid = w & 0xffffffff, w >> 32
    rest = [u64() for _ in range(4)]
    if (w & 0xff) == 4:  # PTSIM_EV_THREAD: arg = parent tid
        rest[3] = ren(rest[3])
    out += [kind, ren(tid)] + rest
assert pos == len(data), "trailing bytes"
print(hashlib.sha256(repr(out).encode()).hexdigest(), nev)
