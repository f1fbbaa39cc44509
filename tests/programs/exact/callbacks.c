/* Tail calls and callbacks from libc (bsearch, qsort) through PLT stubs,
 * built with IBT PLTs (-fcf-protection, -z ibtplt: .plt + .plt.sec, endbr64
 * stubs) and -z now (calls through .plt.got for functions whose address is
 * taken).  -O2, dynamically linked. */
#include <stdlib.h>
#include <string.h>

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

__attribute__((noinline)) static int find(const int *v, size_t n, int k)
{
	const int *p = bsearch(&k, v, n, sizeof *v, cmp_int);
	return p ? (int)(p - v) : -1;
}

/* a tail call into another function, and one into a PLT stub */
__attribute__((noinline)) int lookup(const int *v, size_t n, int k)
{
	if (k < 0)
		return -1;
	return find(v, n, k);
}

__attribute__((noinline)) size_t span_len(const char *s)
{
	return strlen(s); /* a tail jump to strlen@plt */
}

int (*volatile cmpp)(const void *, const void *) = cmp_int;

int main(int argc, char **argv)
{
	(void)argv;
	enum { N = 40 };
	int v[N];
	unsigned s = 777;
	for (int i = 0; i < N; i++) {
		s = s * 1103515245u + 12345u;
		v[i] = (int)(s >> 16) % 500;
	}
	qsort(v, N, sizeof v[0], cmpp);
	int hit = 0;
	for (int i = 0; i < 12; i++)
		hit += lookup(v, N, v[(i * 7) % N]) >= 0;
	hit += (int)span_len("exactness") + argc;
	return hit == 12 + 9 + 1 ? 0 : 1;
}
