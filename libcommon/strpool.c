/* strpool: interned strings, an hidx over their array. */
#include "strpool.h"

#include <stdlib.h>
#include <string.h>

struct key {
	const struct strpool *t;
	const char *p;
	size_t n;
};

static int key_eq(const void *ctx, uint32_t e)
{
	const struct key *k = ctx;
	const struct spstr *s = &k->t->v[e];
	return s->len == k->n && !memcmp(s->p, k->p, k->n);
}

uint32_t strpool_add(struct strpool *t, const char *p, size_t n, int *fresh)
{
	if (!n)
		p = ""; /* hash_bytes reads no byte, but never from NULL */
	struct key k = {t, p, n};
	uint32_t h = (uint32_t)hash_bytes(p, n), pos = 0;
	if (fresh)
		*fresh = 0;
	uint32_t e = hidx_find(&t->ix, h, key_eq, &k, &pos);
	if (e != HMAP_NONE)
		return e;
	if (n > UINT32_MAX || t->n >= HMAP_NONE - 1)
		return HMAP_NONE;
	if (!hidx_room(&t->ix)) {
		if (hidx_reserve(&t->ix) < 0)
			return HMAP_NONE;
		hidx_find(&t->ix, h, key_eq, &k, &pos);
	}
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? 2 * t->cap : 64;
		struct spstr *v = realloc(t->v, (size_t)cap * sizeof *v);
		if (!v)
			return HMAP_NONE;
		t->v = v;
		t->cap = cap;
	}
	char *copy = arena_strndup(&t->ar, p, n);
	if (!copy)
		return HMAP_NONE;
	t->v[t->n] = (struct spstr){copy, (uint32_t)n};
	hidx_set(&t->ix, pos, h, t->n);
	if (fresh)
		*fresh = 1;
	return t->n++;
}

const char *strpool_intern(struct strpool *t, const char *s)
{
	uint32_t i = strpool_add(t, s, strlen(s), NULL);
	return i == HMAP_NONE ? NULL : t->v[i].p;
}

void strpool_fini(struct strpool *t)
{
	free(t->v);
	hidx_fini(&t->ix);
	arena_fini(&t->ar);
	memset(t, 0, sizeof *t);
}
