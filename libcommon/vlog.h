/* Varint logs: LEB128 unsigned and zigzag signed integers in a byte buffer,
 * for compact in-memory event logs (segment waypoints). */
#ifndef MT_VLOG_H
#define MT_VLOG_H

#include <stdint.h>

/* Writes @v at @p (at most 10 bytes); returns the byte after it. */
static inline uint8_t *vlog_put(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Reads a value written by vlog_put (the buffer is trusted: our own). */
static inline uint64_t vlog_get(const uint8_t **pp)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;
	unsigned sh = 0;
	while (*p & 0x80) {
		v |= (uint64_t)(*p++ & 0x7f) << sh;
		sh += 7;
	}
	v |= (uint64_t)*p++ << sh;
	*pp = p;
	return v;
}

static inline uint64_t vlog_zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t vlog_unzz(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

#endif
