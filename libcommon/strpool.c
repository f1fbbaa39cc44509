/* strpool: interned strings. */
#include "strpool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	while (n--)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

const char *strpool_intern(struct strpool *t, const char *s)
{
	size_t n = strlen(s), i;
	uint64_t h = hash_bytes(s, n);
	char *p;
	if (t->n * 2 >= t->icap) {
		size_t ncap = t->icap ? 2 * t->icap : 256, k;
		uint32_t *ni = malloc(ncap * sizeof *ni);
		if (!ni)
			return NULL;
		memset(ni, 0xff, ncap * sizeof *ni);
		for (k = 0; k < t->n; k++) {
			size_t j = hash_bytes(t->v[k], strlen(t->v[k])) & (ncap - 1);
			while (ni[j] != UINT32_MAX)
				j = (j + 1) & (ncap - 1);
			ni[j] = (uint32_t)k;
		}
		free(t->idx);
		t->idx = ni;
		t->icap = ncap;
	}
	for (i = h & (t->icap - 1); t->idx[i] != UINT32_MAX; i = (i + 1) & (t->icap - 1))
		if (!strcmp(t->v[t->idx[i]], s))
			return t->v[t->idx[i]];
	if (t->n == t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		char **v = realloc(t->v, cap * sizeof *v);
		if (!v)
			return NULL;
		t->v = v;
		t->cap = cap;
	}
	p = strdup(s);
	if (!p)
		return NULL;
	t->v[t->n] = p;
	t->idx[i] = (uint32_t)t->n++;
	return p;
}

void strpool_fini(struct strpool *t)
{
	size_t i;
	for (i = 0; i < t->n; i++)
		free(t->v[i]);
	free(t->v);
	free(t->idx);
}
