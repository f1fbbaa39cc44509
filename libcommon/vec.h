/* Growable arrays: one helper instead of a copy per module. */
#ifndef MT_VEC_H
#define MT_VEC_H

#include <errno.h>
#include <stdlib.h>

/* Makes *p hold at least @need elements of @elsz bytes (capacity doubles,
 * from 16).  0, or -ENOMEM with *p unchanged. */
static inline int mt_grow(void **p, size_t *cap, size_t need, size_t elsz)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	void *np = realloc(*p, nc * elsz);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}

#endif
