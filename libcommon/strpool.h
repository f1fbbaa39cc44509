/* strpool: interned strings.  One copy of each distinct byte string, in an
 * arena (never moves, NUL-terminated, may hold NULs), numbered from 0 in the
 * order first added; valid until strpool_fini.  Zero-initialized is empty.
 * Never prints. */
#ifndef MT_STRPOOL_H
#define MT_STRPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "hmap.h"

struct strpool {
	struct spstr {
		const char *p;
		uint32_t len;
	} *v; /* the strings by number */
	uint32_t n, cap;
	struct hidx ix;
	struct arena ar;
};

/* The number of @p[0, @n) in @t (added if new, then *@fresh = 1, else 0;
 * @fresh may be NULL), or HMAP_NONE when out of memory. */
uint32_t strpool_add(struct strpool *t, const char *p, size_t n, int *fresh);

/* The pool's copy of @s (added if new); NULL: out of memory. */
const char *strpool_intern(struct strpool *t, const char *s);

void strpool_fini(struct strpool *t);

#endif
