/* Growable arrays: one helper instead of a copy per module. */
#ifndef MT_VEC_H
#define MT_VEC_H

#include <errno.h>
#include <stdint.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Arrays of 2 MiB or more are blocks of their own, aligned to 2 MiB (see
 * mt_grow).  Transparent huge pages are not asked for: on this project's
 * VMs a fresh 2 MiB page often comes back from the host (free page
 * reporting) and its first touch cost 0.2-0.8 s of system time in a
 * 60 MB process, against 0.03-0.07 s in 4 KiB pages (docs/bench.md, "Page
 * faults on this VM"). */
#define MT_HUGE_PAGE ((size_t)2 << 20)

/* A block of at least *@nb bytes (@nb >= MT_HUGE_PAGE), whole 2 MiB units
 * aligned to one.  *@nb becomes its size.  NULL when out of memory; free()
 * releases it. */
static inline void *mt_huge_block(size_t *nb)
{
	size_t n = (*nb + MT_HUGE_PAGE - 1) & ~(MT_HUGE_PAGE - 1);
	void *p = aligned_alloc(MT_HUGE_PAGE, n);
	if (p)
		*nb = n;
	return p;
}

/* A zeroed table of @n elements of @elsz bytes filled at random places (a
 * cache): from 2 MiB on, a block of mt_huge_block's, else calloc's.  NULL when out of
 * memory; free() releases it. */
static inline void *mt_huge_zalloc(size_t n, size_t elsz)
{
	if (n && elsz > (SIZE_MAX - MT_HUGE_PAGE) / n)
		return NULL;
	size_t nb = n * elsz;
	if (nb < MT_HUGE_PAGE)
		return calloc(n ? n : 1, elsz ? elsz : 1);
	void *p = mt_huge_block(&nb);
	if (p)
		memset(p, 0, n * elsz);
	return p;
}

/* What a big array's block reserves (mt_grow): address space, not memory
 * (a page is memory once touched). */
#define MT_RESERVE ((size_t)256 << 20)

/* Makes *p hold at least @need elements of @elsz bytes (capacity doubles,
 * from 16).  0, or -ENOMEM with *p unchanged.
 *
 * A big array is moved by hand (a new block, the old contents copied in,
 * the old block freed), not by realloc: glibc
 * grows a block of its own mapping with mremap, and on a virtual machine
 * whose hypervisor keeps shadow page tables every page mremap moved faults
 * again at its next touch (measured here: 4.4 us per 4 KiB page, 63 ms to
 * read 56 MiB once after one realloc, 1.4 ms to read it again).  It still
 * comes from malloc: free() releases it.
 * And it is made with room to grow in place: MT_RESERVE bytes (4x its size
 * past a quarter of that), so that an array that keeps growing is neither
 * copied nor zeroed again at each doubling (the kernel zeroes each page it
 * gives, and on this VM a first touch costs ~10 us a 4 KiB page: mt-segment's
 * frames, 56 MB on the 50M trace, had 150 MB zeroed and 100 MB copied);
 * where the address space is refused (ulimit -v, strict overcommit), a
 * block of its size. */
static inline int mt_grow(void **p, size_t *cap, size_t need, size_t elsz)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	if (nc > (SIZE_MAX - MT_HUGE_PAGE) / elsz)
		return -ENOMEM;
	void *np;
	if (*p && malloc_usable_size(*p) >= nc * elsz) {
		*cap = nc; /* reserved already (below) */
		return 0;
	}
	if (nc * elsz < MT_HUGE_PAGE) {
		np = realloc(*p, nc * elsz);
		if (!np)
			return -ENOMEM;
	} else {
		size_t nb = nc * elsz, rb = nb > MT_RESERVE / 4 ? nb * 4 : MT_RESERVE;
		np = rb / 4 >= nb ? mt_huge_block(&rb) : NULL;
		if (!np) {
			rb = nb;
			np = mt_huge_block(&rb);
			if (!np)
				return -ENOMEM;
		}
		if (*p) {
			memcpy(np, *p, *cap * elsz);
			free(*p);
		}
	}
	*p = np;
	*cap = nc;
	return 0;
}

#endif
