#include "hmap.h"

#include <stdlib.h>
#include <string.h>

static int hmap_grow(struct hmap *m)
{
	size_t nc = m->cap ? m->cap * 2 : 1024;
	struct hslot *ns = calloc(nc, sizeof *ns);
	if (!ns)
		return -1;
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

void hmap_fini(struct hmap *m)
{
	free(m->s);
	memset(m, 0, sizeof *m);
}
