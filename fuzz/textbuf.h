/* A growing buffer of text lines, for the fuzz targets that compare two
 * renderings of the same records (fuzz_mtev, fuzz_mtev_text). */
#ifndef MT_FUZZ_TEXTBUF_H
#define MT_FUZZ_TEXTBUF_H

#include <stdlib.h>
#include <string.h>

struct text {
	char *p;
	size_t len, cap;
};

/* Appends @n bytes of @s and a newline; aborts when out of memory. */
static inline void text_add(struct text *t, const char *s, size_t n)
{
	if (t->len + n + 1 > t->cap) {
		size_t nc = t->cap ? t->cap : 4096;
		while (nc < t->len + n + 1)
			nc *= 2;
		char *np = realloc(t->p, nc);
		if (!np)
			abort();
		t->p = np;
		t->cap = nc;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len++] = '\n';
}

#endif
