/* A deterministic call tree for judging sampled stacks against mt-ptsim's
 * truth (tests/stacks.bats): the same paths every round; argv[1] rounds,
 * argv[2] 0 leaves out qsort (libc code without frame pointers calling back
 * into the program, which a frame-pointer walk cannot cross).  Built static
 * with frame pointers except in leaves (spin): a frame-pointer walk from a
 * sample in spin skips its caller. */
#include <stdlib.h>
static volatile unsigned long sink;
static int v[64];
__attribute__((noinline)) static void spin(int n) { for (int i = 0; i < n; i++) sink += i; }
__attribute__((noinline)) static int cmp(const void *a, const void *b)
{
	spin(20);
	return *(const int *)a - *(const int *)b;
}
__attribute__((noinline)) static void leaf_a(void) { spin(300); }
__attribute__((noinline)) static void leaf_b(void) { spin(200); }
__attribute__((noinline)) static void rec(int d) { if (d) rec(d - 1); else leaf_a(); spin(50); }
__attribute__((noinline)) static void mid(int i) { leaf_a(); leaf_b(); rec(i % 8); }
__attribute__((noinline)) static void sorter(void)
{
	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	qsort(v, 64, sizeof v[0], cmp);
}
__attribute__((noinline)) static void round1(int k) { for (int i = 0; i < 8; i++) mid(i); if (k) sorter(); }
int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1, q = argc > 2 ? atoi(argv[2]) : 1;
	for (int r = 0; r < n; r++)
		round1(q);
	return 0;
}
