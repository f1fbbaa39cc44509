/* gcc's own hot/cold split in a stripped program (as Debian builds them):
 * the block of work() that calls the cold function rare() goes to
 * "work.cold" in .text.unlikely, far from work() and not aligned, with its
 * own FDE and no symbol once stripped.  A window that begins inside rare()
 * learns work()'s frame from rare()'s return into work.cold: the frame is
 * work()'s (fnmap_owner: the function whose code jumps into that FDE's
 * range), not one named by the cold part's start.
 * Built -O2 -s, main exported to .dynsym for mt-ptsim --start-at. */
#include <stdio.h>
#include <stdlib.h>

static volatile long sink;

__attribute__((cold, noinline)) static long rare(long v)
{
	long s = 0;
	for (long i = 0; i < 3000; i++)
		s += (v ^ i) & 7;
	return s;
}

__attribute__((noinline)) static long work(long v)
{
	if (v % 16 == 15) {
		sink += 1;
		return rare(v) * 3 + sink;
	}
	return v + 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 16, s = 0;
	for (long i = 0; i < n; i++)
		s += work(i);
	printf("%ld\n", s);
	return 0;
}
