/* glibc's qsort (merge sort on a temporary buffer) copies runs with memcpy,
 * reached from libc through its own unnamed .plt stubs, some by a tail jump:
 * a call through a stub is one span of its target, a jump into a stub a tail
 * call to it (docs/exactness.md).  Dynamically linked, -O2. */
#include <stdlib.h>
#include <string.h>

struct rec {
	int key;
	char pad[20];
};

static int cmp(const void *a, const void *b)
{
	const struct rec *x = a, *y = b;
	return (x->key > y->key) - (x->key < y->key);
}

int main(void)
{
	enum { N = 96 };
	static struct rec v[N];
	unsigned s = 12345;
	for (int i = 0; i < N; i++) {
		s = s * 1103515245u + 12345u;
		v[i].key = (int)(s >> 16) % 1000;
		memset(v[i].pad, i, sizeof v[i].pad);
	}
	qsort(v, N, sizeof v[0], cmp);
	for (int i = 1; i < N; i++)
		if (v[i - 1].key > v[i].key)
			return 1;
	return 0;
}
