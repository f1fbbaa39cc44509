/* setjmp/longjmp out of a deep call chain: frames end without returning. */
#include <setjmp.h>

static jmp_buf env;

__attribute__((noinline)) static void deep(int n)
{
	if (n <= 0)
		longjmp(env, 1);
	if (n < 1000)
		deep(n - 1);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static int attempt(int n)
{
	if (setjmp(env))
		return 1;
	deep(n);
	return 0;
}

int main(void)
{
	int caught = 0;
	for (int i = 0; i < 20; i++)
		caught += attempt(i + 5);
	return caught == 20 ? 0 : 1;
}
