#!/usr/bin/env python3
"""Regenerates tests/corrupt/decode-*.data from the Skylake fixture.

Base: the fixture's header, attrs and the data records up to the end of the
cpu0 AUXTRACE (file offset 0x59c0), features dropped: a small valid file-mode
perf.data.  Each decode-* file breaks one thing.  Usage: gen-decode.py FIXTURE
(perf.data.intel_pt-4.14) OUTDIR."""
import struct, sys, random

src = open(sys.argv[1], 'rb').read()
out = sys.argv[2]
END = 0x59c0
hdr = bytearray(src[:104])
data_off = struct.unpack_from('<Q', hdr, 40)[0]
base = bytearray(src[:END])
struct.pack_into('<Q', base, 48, END - data_off)   # data.size
struct.pack_into('<4Q', base, 72, 0, 0, 0, 0)      # no features

def records(b):
    off = data_off
    while off < len(b):
        t, m, s = struct.unpack_from('<IHH', b, off)
        yield off, t, s
        off += s + (struct.unpack_from('<Q', b, off + 8)[0] if t == 71 else 0)

def w(name, b):
    open(f'{out}/decode-{name}.data', 'wb').write(bytes(b))

w('base-ok', base)
w('empty', b'')
w('bad-magic', b'NOTPERF!' + bytes(base[8:200]))
sw = bytearray(base[:200]); sw[0:8] = b'2ELIFREP'
w('other-endian', sw)
w('header-cut', base[:60])
b = bytearray(base); struct.pack_into('<Q', b, 16, 0)   # attr_size 0
w('attr-size-zero', b)
recs = list(records(base))
mid = [r for r in recs if r[1] == 1][20]                    # an MMAP in the middle
b = bytearray(base); struct.pack_into('<H', b, mid[0] + 6, 0)
w('zero-record-size', b)
last = [r for r in recs if r[1] == 15][-1]                 # a SWITCH near the end
b = bytearray(base); struct.pack_into('<H', b, last[0] + 6, 0xfff8)
w('huge-record-size', b)
aux = [r for r in recs if r[1] == 71][0]
b = bytearray(base); struct.pack_into('<Q', b, aux[0] + 8, 1 << 40)
w('auxtrace-past-end', b)
w('truncated', base[:aux[0] + 0x30 + 0x1000])              # file ends inside the PT
b = bytearray(base); rnd = random.Random(4)
for i in range(aux[0] + 0x30 + 0x40, aux[0] + 0x30 + 0x2fd0):
    b[i] = rnd.randrange(256)
w('garbage-pt', b)
b = bytearray(base); rnd = random.Random(5)
for i in range(aux[0] + 0x30, aux[0] + 0x30 + 0x2fd0):
    b[i] = rnd.randrange(256)
w('all-garbage-pt', b)
b = bytearray(base)
first = recs[0]
struct.pack_into('<Q', b, 40, len(b) + 4096)               # data.offset past the end
w('data-offset-past-end', b)
