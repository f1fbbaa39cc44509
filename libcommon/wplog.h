/* Waypoint logs: (time, address, level) triples held in memory until they
 * can be written (mt-segment, mt-stitch), 4 bytes each in the common case.
 *
 * Short (one word, bit 0 clear), relative to the previous entry: bits 1-2
 * the level change + 1 (0, 1, 2 = -1, 0, +1), bits 3-12 the time step
 * (0..1023), bits 13-31 the address step (signed, -2^18..2^18-1).
 * Medium (two words, low bits 101): bits 3-4 the level change + 1, bits
 * 5-31 the time step (0..2^27-1); then the address step (signed 32 bits):
 * calls and returns to far functions of the same file.
 * Absolute (six words, low bits 001): the time and address (two words each,
 * low first) and the level: the first entry, a time going back or jumping
 * far, a jump to another library, a level change of more than one.
 * Low bits 11 are left to users that interleave other records (mt-stitch). */
#ifndef MT_WPLOG_H
#define MT_WPLOG_H

#include "vec.h"

#include <stddef.h>
#include <stdint.h>

struct wplog {
	uint32_t *v;
	size_t n, cap; /* words */
	uint64_t time, addr; /* the last entry */
	int32_t level;
	size_t count; /* entries since wplog_clear or wplog_mark */
};

static inline void wplog_clear(struct wplog *l)
{
	l->n = 0;
	l->count = 0;
	l->time = l->addr = 0;
	l->level = 0;
}

static inline void wplog_free(struct wplog *l)
{
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

/* The short word for (time, addr, level) after the last entry: 1 and *w,
 * or 0 when it needs a longer form (or it is the first entry).  An exact
 * repeat of the last entry is the word 2. */
static inline __attribute__((always_inline)) int wplog_short(const struct wplog *l, uint64_t time, uint64_t addr, int32_t level,
			      uint32_t *w)
{
	uint64_t dt = time - l->time;
	uint64_t da = addr - l->addr + (1u << 18); /* [0, 2^19) when short */
	uint64_t dl = (uint64_t)((int64_t)level - l->level + 1);
	if (!l->count || (dt >> 10 | da >> 19) || dl >= 3)
		return 0;
	*w = (uint32_t)dl << 1 | (uint32_t)dt << 3 | (((uint32_t)da - (1u << 18)) & 0x7ffffu) << 13;
	return 1;
}

/* The general case of wplog_put: 0, or -ENOMEM (the log is unchanged). */
static __attribute__((noinline, unused)) int wplog_put_slow(struct wplog *l, uint64_t time,
							    uint64_t addr, int32_t level)
{
	if (l->n + 6 > l->cap && mt_grow((void **)&l->v, &l->cap, l->n + 6, sizeof *l->v))
		return -ENOMEM;
	uint64_t dt = time - l->time;
	int64_t da = (int64_t)(addr - l->addr);
	int64_t dl = (int64_t)level - l->level + 1;
	if (l->count && dt < 1024 && da >= -(1 << 18) && da < (1 << 18) && (uint64_t)dl < 3) {
		l->v[l->n++] = (uint32_t)dl << 1 | (uint32_t)dt << 3 | ((uint32_t)da & 0x7ffffu) << 13;
	} else if (l->count && dt < (1u << 27) && da >= INT32_MIN && da <= INT32_MAX && (uint64_t)dl < 3) {
		l->v[l->n] = 5 | (uint32_t)dl << 3 | (uint32_t)dt << 5;
		l->v[l->n + 1] = (uint32_t)da;
		l->n += 2;
	} else {
		uint32_t *p = l->v + l->n;
		p[0] = 1;
		p[1] = (uint32_t)time;
		p[2] = (uint32_t)(time >> 32);
		p[3] = (uint32_t)addr;
		p[4] = (uint32_t)(addr >> 32);
		p[5] = (uint32_t)level;
		l->n += 6;
	}
	l->time = time;
	l->addr = addr;
	l->level = level;
	l->count++;
	return 0;
}

/* Appends the one-word entry @w (from wplog_short) for the waypoint. */
static inline void wplog_store(struct wplog *l, uint32_t w, uint64_t time, uint64_t addr,
			       int32_t level)
{
	l->v[l->n++] = w;
	l->time = time;
	l->addr = addr;
	l->level = level;
	l->count++;
}

/* 0, or -ENOMEM (the log is unchanged). */
static inline int wplog_put(struct wplog *l, uint64_t time, uint64_t addr, int32_t level)
{
	uint32_t w;
	if (__builtin_expect(l->n < l->cap && wplog_short(l, time, addr, level, &w), 1)) {
		wplog_store(l, w, time, addr, level);
		return 0;
	}
	return wplog_put_slow(l, time, addr, level);
}

struct wpcur {
	const uint32_t *p, *end;
	uint64_t time, addr;
	int32_t level;
};

/* A cursor over words [from, to) of @l; @from must start an entry and the
 * first entry read there must be absolute (the first of a log, or any entry
 * when @from was taken with wplog_mark on an empty-delta state).  */
static inline void wpcur_init(struct wpcur *c, const struct wplog *l, size_t from, size_t to)
{
	c->p = l->v + from;
	c->end = l->v + to;
	c->time = c->addr = 0;
	c->level = 0;
}

/* 1: the next entry is in c->time, c->addr, c->level; 0: the end. */
static inline int wpcur_next(struct wpcur *c)
{
	if (c->p >= c->end)
		return 0;
	uint32_t w = *c->p++;
	if (!(w & 1)) {
		c->level += (int32_t)((w >> 1) & 3) - 1;
		c->time += (w >> 3) & 1023;
		c->addr += (uint64_t)(int64_t)((int32_t)w >> 13);
	} else if (w & 4) {
		c->level += (int32_t)((w >> 3) & 3) - 1;
		c->time += w >> 5;
		c->addr += (uint64_t)(int64_t)(int32_t)*c->p++;
	} else {
		c->time = (uint64_t)c->p[0] | (uint64_t)c->p[1] << 32;
		c->addr = (uint64_t)c->p[2] | (uint64_t)c->p[3] << 32;
		c->level = (int32_t)c->p[4];
		c->p += 5;
	}
	return 1;
}

/* Words of the entry that begins with word @x. */
static inline size_t wplog_entry_words(uint32_t x)
{
	return !(x & 1) ? 1 : x & 4 ? 2 : 6;
}

/* A cursor that hands a log's entries over to another log (mt-segment
 * --stitch: the segmenter's waypoints to the stitcher's log, as words):
 * the pending entry (decoded, and its words [q, p)), then [p, end).  The
 * receiver takes the pending entry and the ones after it while their time
 * is below @limit and leaves the cursor on the first one it did not take
 * (@have 0: none left).  Short and medium entries are relative to the entry
 * before them; the level of an absolute entry is the first log's: depth =
 * level + @abs_off. */
struct wprun {
	const uint32_t *q, *p, *end;
	uint64_t time, addr; /* the pending entry */
	int32_t level;	     /* its level (the first log's) */
	int32_t abs_off;
	uint64_t limit;
	int have;
	size_t n; /* out: entries taken */
};

/* Makes the next entry put absolute, so that a cursor can start there. */
static inline void wplog_mark(struct wplog *l)
{
	l->count = 0;
}

#endif
