/* REP-prefixed string instructions: one instruction that the CPU (and
 * single-stepping) iterates. */
#include <stddef.h>

__attribute__((noinline)) static void copy(void *d, const void *s, size_t n)
{
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

__attribute__((noinline)) static void fill(void *d, int c, size_t n)
{
	__asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(c) : "memory");
}

int main(void)
{
	static char a[256], b[256];
	for (int i = 0; i < 4; i++) {
		fill(a, 'x' + i, sizeof a);
		copy(b, a, sizeof a);
		fill(a, 0, 0); /* zero iterations */
	}
	return b[100] == 'x' + 3 ? 0 : 1;
}
