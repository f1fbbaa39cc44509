/* mt-symbolize test program: -O2 -g, helpers that the compiler inlines (two
 * and three levels deep, from several call sites) and an inlined helper that
 * makes a real call, so a physical span nests inside an inline frame. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int sym_leaf(int x)
{
	__asm__ volatile("" ::: "memory");
	return x ^ 0x55;
}

static inline __attribute__((always_inline)) int sym_sq(int x)
{
	return x * x;
}

static inline __attribute__((always_inline)) int sym_poly(int x)
{
	return sym_sq(x) + 3 * x + 1;
}

static inline __attribute__((always_inline)) int sym_calls_leaf(int x)
{
	int y = sym_leaf(x + 1);
	return y * 7;
}

static inline __attribute__((always_inline)) int sym_deep(int x)
{
	return sym_poly(x) ^ sym_calls_leaf(x);
}

__attribute__((noinline)) int sym_accumulate(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++)
		s += sym_poly(i);
	return s;
}

__attribute__((noinline)) int sym_mixed(int n)
{
	int s = 0;
	for (int i = 0; i < n; i++) {
		s += sym_deep(i);
		if (s & 1)
			s += sym_poly(s & 15);
	}
	return s;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3;
	int r = sym_accumulate(n) + sym_mixed(n);
	printf("%d\n", r);
	return 0;
}
