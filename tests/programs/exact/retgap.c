/* A trace that begins below main (mt-ptsim --start-at run, as the corpus
 * starts perl at perl_run): main is revealed only when run() returns to it.
 * A gap that swallows that return leaves two stacks with no common frame,
 * [run, ...] before it and [main, tidy, ...] after; main's code calls run,
 * so run returned to main inside the gap (mt-stitch, docs/exactness.md). */
#include <stdio.h>

__attribute__((noinline)) int step(int i)
{
	__asm__ volatile("" : "+r"(i));
	return i * 3 + 1;
}

__attribute__((noinline)) int run(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += step(i);
	return s;
}

__attribute__((noinline)) int tidy(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s ^= step(i);
	return s;
}

int main(void)
{
	int a = run(300);
	int b = tidy(300);
	printf("%d %d\n", a, b);
	return 0;
}
