#!/usr/bin/env python3
"""addmtc.py IN OUT MTC_FREQ EBX EAX: raw PT of an mt-ptsim run (IN) with the
timing packets `perf record -e intel_pt/mtc=1,mtc_period=MTC_FREQ/` adds,
into OUT: a TMA after every TSC (the CTC's low 16 bits and the TSC ticks
past its last CTC tick) and an MTC after a CYC whose cycles carry the clock
into new MTC periods (one MTC for each of the last 8 periods it entered:
the others are lost MTCs).  mt-ptsim's clock: one CYC cycle is one TSC tick; the CTC runs
at TSC * EAX / EBX (CPUID 0x15).  Control flow is unchanged: decoders must
find the same branches, and libipt's query decoder gives the times
(mt-decode --decoder walk-check --pt OUT --pt-timing MTC_FREQ,EBX,EAX,NOM).
Knows the packets mt-ptsim writes; exits 1 on any other."""
import sys


def size(b, i):
    """the size of the packet at b[i] and whether it is TSC / CYC (value)"""
    c = b[i]
    if c == 0x02:
        e = b[i + 1]
        return {0x82: 16, 0x23: 2, 0x03: 4, 0xa3: 8, 0xf3: 2}[e], None
    if c == 0x19:
        return 8, None
    if c == 0x99:
        return 2, None
    if c & 3 == 3:  # CYC
        v, n, sh = c >> 3, 1, 5
        ext = c & 4
        while ext:
            x = b[i + n]
            v |= (x >> 1) << sh
            sh += 7
            ext = x & 1
            n += 1
        return n, v
    if not c & 1:  # PAD, TNT-8
        return 1, None
    if c & 0x1f in (0x0d, 0x1d, 0x11, 0x01):  # TIP, FUP, TIP.PGE, TIP.PGD
        return 1 + [0, 2, 4, 6, 6, -99, 8, -99][c >> 5], None
    raise ValueError("packet 0x%02x at %d" % (c, i))


def main():
    src, dst = sys.argv[1], sys.argv[2]
    freq, ebx, eax = (int(x) for x in sys.argv[3:6])
    b = open(src, "rb").read()
    out = bytearray()
    i, tsc = 0, None
    while i < len(b):
        n, cyc = size(b, i)
        out += b[i:i + n]
        if b[i] == 0x19:  # TSC
            tsc = int.from_bytes(b[i + 1:i + 8], "little")
            ctc = tsc * eax // ebx
            fc = tsc - ctc * ebx // eax
            out += bytes([0x02, 0x73]) + (ctc & 0xffff).to_bytes(2, "little") + b"\0" + \
                fc.to_bytes(2, "little")
        elif cyc is not None and tsc is not None:
            old = (tsc * eax // ebx) >> freq
            tsc += cyc
            new = (tsc * eax // ebx) >> freq
            for k in range(max(old + 1, new - 7), new + 1):
                out += bytes([0x59, k & 0xff])
        i += n
    open(dst, "wb").write(out)


if __name__ == "__main__":
    try:
        main()
    except (ValueError, KeyError, IndexError) as e:
        sys.exit("addmtc.py: %s" % e)
