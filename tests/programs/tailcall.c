/* Tail calls (built with -O2): the calls in tail position become jumps, so
 * a frame runs several functions in turn. */
__attribute__((noinline)) int leaf(int x);
__attribute__((noinline)) int middle(int x);
__attribute__((noinline)) int top(int x);

__attribute__((noinline)) int leaf(int x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

__attribute__((noinline)) int middle(int x)
{
	if (x & 1)
		return leaf(x + 1); /* tail call */
	return leaf(x - 1) + 2;
}

__attribute__((noinline)) int top(int x)
{
	__asm__ volatile("" ::: "memory");
	return middle(x * 2 + 1); /* tail call */
}

int main(void)
{
	int s = 0;
	for (int i = 0; i < 200; i++)
		s += top(i);
	return s == 0 ? 1 : 0;
}
