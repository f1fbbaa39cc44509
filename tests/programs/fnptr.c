/* Calls through function pointers, and libc calling back into the program
 * (qsort's comparison function). */
#include <stdlib.h>

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

__attribute__((noinline)) static int twice(int x) { return 2 * x; }
__attribute__((noinline)) static int square(int x) { return x * x; }
__attribute__((noinline)) static int negate(int x) { return -x; }

int (*const ops[])(int) = {twice, square, negate};

/* Four rounds: long enough that one PSB interval (2 KB of PT, where an
 * injected fault's data is lost) is a small share of the run. */
int main(void)
{
	int v[64];
	unsigned seed = 12345;
	int s = 0;
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < 64; i++) {
			seed = seed * 1103515245u + 12345u;
			v[i] = (int)(seed >> 16) & 1023;
		}
		qsort(v, 64, sizeof v[0], cmp_int);
		for (int i = 0; i < 300; i++)
			s += ops[i % 3](v[i % 64]);
		for (int i = 1; i < 64; i++)
			if (v[i - 1] > v[i])
				return 1;
	}
	return s == 42 ? 1 : 0;
}
