#include "hmap.h"

#include <stdlib.h>
#include <string.h>

/* ---- hmap ---- */

static int hmap_grow(struct hmap *m)
{
	size_t nc = m->cap ? m->cap * 2 : 1024;
	struct hslot *ns = malloc(nc * sizeof *ns);
	if (!ns)
		return -1;
	for (size_t i = 0; i < nc; i++) /* only the values say empty: a third of calloc's stores */
		ns[i].v = 0;
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->s[i].v)
			continue;
		size_t j = hslot(m->s[i].a, m->s[i].b, nc - 1);
		while (ns[j].v)
			j = (j + 1) & (nc - 1);
		ns[j] = m->s[i];
	}
	free(m->s);
	m->s = ns;
	m->cap = nc;
	return 0;
}

uint32_t hmap_put(struct hmap *m, uint64_t a, uint64_t b, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap && hmap_grow(m) < 0)
		return HMAP_NONE;
	size_t j = hslot(a, b, m->cap - 1);
	for (; m->s[j].v; j = (j + 1) & (m->cap - 1))
		if (m->s[j].a == a && m->s[j].b == b)
			return m->s[j].v - 1;
	m->s[j] = (struct hslot){a, b, val + 1};
	m->n++;
	return val;
}

/* Is @home outside the probe run (hole, j]?  Then the entry at j, whose
 * probe started at @home, may move back to the hole. */
static int may_fill(size_t hole, size_t j, size_t home)
{
	return hole <= j ? home <= hole || home > j : home <= hole && home > j;
}

void hmap_del(struct hmap *m, uint64_t a, uint64_t b)
{
	if (!m->cap)
		return;
	size_t mask = m->cap - 1, hole = hslot(a, b, mask);
	for (;; hole = (hole + 1) & mask) {
		if (!m->s[hole].v)
			return;
		if (m->s[hole].a == a && m->s[hole].b == b)
			break;
	}
	/* backward-shift deletion: the probe runs stay unbroken */
	for (size_t j = (hole + 1) & mask; m->s[j].v; j = (j + 1) & mask)
		if (may_fill(hole, j, hslot(m->s[j].a, m->s[j].b, mask))) {
			m->s[hole] = m->s[j];
			hole = j;
		}
	m->s[hole].v = 0;
	m->n--;
}

void hmap_fini(struct hmap *m)
{
	free(m->s);
	memset(m, 0, sizeof *m);
}

/* ---- hidx ---- */

int hidx_reserve(struct hidx *x)
{
	if (hidx_room(x))
		return 0;
	size_t size = x->c ? 2 * ((size_t)x->mask + 1) : 64;
	if (size > (size_t)UINT32_MAX + 1)
		return -1;
	struct hcell *nc = calloc(size, sizeof *nc);
	if (!nc)
		return -1;
	uint32_t mask = (uint32_t)(size - 1);
	if (x->c)
		for (size_t i = 0; i <= x->mask; i++) {
			if (!x->c[i].e1)
				continue;
			uint32_t j = x->c[i].h & mask;
			while (nc[j].e1)
				j = (j + 1) & mask;
			nc[j] = x->c[i];
		}
	free(x->c);
	x->c = nc;
	x->mask = mask;
	return 0;
}

void hidx_del(struct hidx *x, uint32_t pos)
{
	uint32_t hole = pos;
	for (uint32_t j = (pos + 1) & x->mask; x->c[j].e1; j = (j + 1) & x->mask)
		if (may_fill(hole, j, x->c[j].h & x->mask)) {
			x->c[hole] = x->c[j];
			hole = j;
		}
	x->c[hole].e1 = 0;
	x->n--;
}

void hidx_fini(struct hidx *x)
{
	free(x->c);
	memset(x, 0, sizeof *x);
}
