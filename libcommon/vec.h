/* Growable arrays: one helper instead of a copy per module. */
#ifndef MT_VEC_H
#define MT_VEC_H

#include <errno.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include <sys/mman.h>

/* Arrays this big ask for transparent huge pages (see mt_grow). */
#define MT_HUGE_MIN ((size_t)8 << 20)

/* Advises transparent huge pages for the whole block @p (from malloc): one
 * page fault per 2 MiB instead of per 4 KiB as a big array fills.  The
 * advice covers the block's pages entirely, so that glibc can still grow a
 * block of its own mapping with mremap.  Only advice: without huge pages,
 * nothing changes. */
static inline void mt_huge_advise(void *p)
{
	const uintptr_t pg = 4096;
	uintptr_t b = (uintptr_t)p & ~(pg - 1);
	uintptr_t e = ((uintptr_t)p + malloc_usable_size(p) + pg - 1) & ~(pg - 1);
	(void)madvise((void *)b, e - b, MADV_HUGEPAGE);
}

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
	if (nc * elsz >= MT_HUGE_MIN)
		mt_huge_advise(np);
	*p = np;
	*cap = nc;
	return 0;
}

#endif
