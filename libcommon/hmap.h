/* hmap: the open-addressing hash tables of every stage (linear probing,
 * at most half full, zero-initialized is empty, never prints).
 *
 * struct hmap maps a pair of u64 to a u32 (ids by address, by (thread,
 * depth), ...), its keys in its slots: one cache line per probe.
 *
 * struct hidx is the index of a table whose entries and keys the caller
 * keeps (strings: strpool.h, fxt.c's reference slots): entry numbers by
 * hash.  Each cell keeps its key's hash beside the entry, so growing and
 * removing need no key, and a probe compares keys only on equal hashes.
 *
 * Values and entry numbers are below HMAP_NONE. */
#ifndef MT_HMAP_H
#define MT_HMAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HMAP_NONE UINT32_MAX

/* ---- hmap: (u64, u64) -> u32 ---- */

struct hslot {
	uint64_t a, b;
	uint32_t v; /* value + 1; 0 = empty */
};
struct hmap {
	struct hslot *s;
	size_t cap, n; /* cap: a power of two, at most 2^32 */
};

/* One multiply for a key (a, 0): the high half of the product. */
static inline size_t hslot(uint64_t a, uint64_t b, size_t mask)
{
	return (size_t)(((a ^ b * 0xC2B2AE3D27D4EB4Full) * 0x9E3779B97F4A7C15ull) >> 32) & mask;
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
/* Removes (a, b) if present. */
void hmap_del(struct hmap *m, uint64_t a, uint64_t b);
/* Frees the table; it is empty again. */
void hmap_fini(struct hmap *m);

/* ---- hidx: hash -> entry of the caller's table ---- */

struct hcell {
	uint32_t h;  /* the key's hash (its low 32 bits) */
	uint32_t e1; /* entry + 1; 0 = empty */
};
struct hidx {
	struct hcell *c;
	uint32_t mask; /* cells - 1 (when c) */
	uint32_t n;
};

/* The hash of a byte string (word at a time, then a finalizer). */
static inline uint64_t hash_bytes(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ull ^ (n * 0x9e3779b97f4a7c15ull);
	for (; n >= 8; b += 8, n -= 8) {
		uint64_t w;
		memcpy(&w, b, 8);
		h = (h ^ w) * 0x100000001b3ull;
		h ^= h >> 29;
	}
	uint64_t w = 0;
	memcpy(&w, b, n);
	h = (h ^ w) * 0x100000001b3ull;
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	h ^= h >> 32;
	return h;
}

/* Looks for the entry with hash @h whose key @eq(@ctx, entry) accepts: the
 * entry, or HMAP_NONE.  *@pos is the cell it is in, or where it would go
 * (valid until the index changes; an index never grown has no cell). */
static inline __attribute__((always_inline)) uint32_t
hidx_find(const struct hidx *x, uint32_t h, int (*eq)(const void *ctx, uint32_t e),
	  const void *ctx, uint32_t *pos)
{
	if (!x->c)
		return HMAP_NONE;
	for (uint32_t j = h & x->mask;; j = (j + 1) & x->mask) {
		const struct hcell *c = &x->c[j];
		*pos = j;
		if (!c->e1)
			return HMAP_NONE;
		if (c->h == h && eq(ctx, c->e1 - 1))
			return c->e1 - 1;
	}
}

/* Is there room for one more entry (the index stays at most half full)? */
static inline int hidx_room(const struct hidx *x)
{
	return x->c && 2 * ((size_t)x->n + 1) <= (size_t)x->mask + 1;
}
/* Makes room for one more entry: 0, or -1 (out of memory).  It may move
 * every cell: a *pos from before it is stale. */
int hidx_reserve(struct hidx *x);
/* Puts entry @e with hash @h in the empty cell @pos (from hidx_find). */
static inline void hidx_set(struct hidx *x, uint32_t pos, uint32_t h, uint32_t e)
{
	x->c[pos] = (struct hcell){h, e + 1};
	x->n++;
}
/* Empties cell @pos (from hidx_find); other cells may move. */
void hidx_del(struct hidx *x, uint32_t pos);
void hidx_fini(struct hidx *x);

#endif
