#include "arena.h"

#include <stdlib.h>
#include <string.h>

struct achunk {
	struct achunk *next;
	size_t used, cap;
	char data[];
};

void *arena_alloc(struct arena *a, size_t n)
{
	n = (n + 7) & ~(size_t)7;
	if (!a->head || a->head->cap - a->head->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		struct achunk *c = malloc(sizeof *c + cap);
		if (!c)
			return NULL;
		c->next = a->head;
		c->used = 0;
		c->cap = cap;
		a->head = c;
	}
	void *p = a->head->data + a->head->used;
	a->head->used += n;
	return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *p = arena_alloc(a, n + 1);
	if (p) {
		if (n)
			memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

void arena_fini(struct arena *a)
{
	while (a->head) {
		struct achunk *n = a->head->next;
		free(a->head);
		a->head = n;
	}
}
