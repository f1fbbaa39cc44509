/* One function under two callers in turn: first() calls work() for a few
 * rounds and it returns; then second() calls it once for a long loop.  A gap
 * inside that long call: work() was seen complete at its depth before, but
 * under first(), an earlier activation of its caller, not under the second()
 * live across the gap, so nothing says that second() called it again inside
 * the gap: one activation on both sides (mt-stitch joins it, docs/stitch.md).
 * mix(), called in work()'s loop, was seen complete under the work() live
 * across the gap: it stays split.  Built with main and stop in .dynsym. */
#include <stdlib.h>

static volatile long sink;

__attribute__((noinline, noclone)) static long mix(long i)
{
	__asm__ volatile("" : "+r"(i));
	return i * 3 + 1;
}

__attribute__((noinline, noclone)) static long work(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += mix(i) & 7;
	return s;
}

__attribute__((noinline, noclone)) static void first(void)
{
	sink += work(8);
}

/* The trace ends here (mt-ptsim --stop-at stop), inside second(): a trace
 * after a gap over first()'s return and second()'s call never returns to
 * run(), so it shares no frame with the trace before the gap; run()'s code
 * calls second() directly, which places it (mt-stitch, docs/stitch.md). */
__attribute__((noinline, noclone)) void stop(void)
{
	__asm__ volatile("");
}

__attribute__((noinline, noclone)) static void second(long n)
{
	sink += work(n);
	stop();
	sink++; /* no tail call */
}

__attribute__((noinline, noclone)) static void run(long n)
{
	first();
	second(n);
	sink++;
}

int main(int argc, char **argv)
{
	run(argc > 1 ? atol(argv[1]) : 20000);
	return 0;
}
