/* strpool: interned strings.  One copy of each distinct string; the
 * pointers stay valid until strpool_fini. */
#ifndef MT_STRPOOL_H
#define MT_STRPOOL_H

#include <stddef.h>
#include <stdint.h>

struct strpool {
	char **v; /* the strings, in the order they were first interned */
	size_t n, cap;
	uint32_t *idx; /* open-addressing index into v */
	size_t icap;
};

/* The pool's copy of @s (added if new); NULL: out of memory.  @t starts
 * zeroed; t->n says how many strings it holds. */
const char *strpool_intern(struct strpool *t, const char *s);
void strpool_fini(struct strpool *t);

#endif
