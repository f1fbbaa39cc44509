/* Deep recursion: 300 nested calls, deeper than the 64-entry return stack
 * that return compression relies on. */
#include <stdlib.h>

__attribute__((noinline)) static long down(long n)
{
	if (n == 0)
		return 0;
	return 1 + down(n - 1) + (n & 1);
}

int main(int argc, char **argv)
{
	long depth = argc > 1 ? atol(argv[1]) : 300;
	long r = 0;
	for (int i = 0; i < 3; i++)
		r += down(depth);
	return r == 3 * (depth + depth / 2 + (depth & 1)) ? 0 : 1;
}
