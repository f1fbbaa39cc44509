/* hmap: an open-addressing hash map from a pair of u64 to a u32, for the
 * tables of a stage (ids by address, by (thread, depth), ...).  Values are
 * below HMAP_NONE.  Zero-initialized is empty.  Never prints. */
#ifndef MT_HMAP_H
#define MT_HMAP_H

#include <stddef.h>
#include <stdint.h>

#define HMAP_NONE UINT32_MAX

struct hslot {
	uint64_t a, b;
	uint32_t v; /* value + 1; 0 = empty */
};
struct hmap {
	struct hslot *s; /* keys and value together: one cache line per probe */
	size_t cap, n;
};

static inline size_t hslot(uint64_t a, uint64_t b, size_t mask)
{
	uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
	h ^= h >> 29;
	return (size_t)h & mask;
}

/* The value for (a, b), or HMAP_NONE. */
static inline uint32_t hmap_get(const struct hmap *m, uint64_t a, uint64_t b)
{
	if (!m->cap)
		return HMAP_NONE;
	for (size_t j = hslot(a, b, m->cap - 1); m->s[j].v; j = (j + 1) & (m->cap - 1))
		if (m->s[j].a == a && m->s[j].b == b)
			return m->s[j].v - 1;
	return HMAP_NONE;
}

/* Inserts (a, b) -> val unless present.  Returns the stored value, or
 * HMAP_NONE on allocation failure. */
uint32_t hmap_put(struct hmap *m, uint64_t a, uint64_t b, uint32_t val);
/* Frees the table; it is empty again. */
void hmap_fini(struct hmap *m);

#endif
