/* hmap and arena, the helpers mt-symbolize's modules share: every key put is
 * found with its first value, a missing key is HMAP_NONE, growth keeps all
 * entries; arena memory never moves and copies hold embedded NULs. */
#include <stdint.h>
#include <string.h>

#include "arena.h"
#include "hmap.h"
#include "t.h"

int main(void)
{
	struct hmap m = {0};
	T_CHECK(hmap_get(&m, 1, 2) == HMAP_NONE, "empty map: missing");
	/* 100k keys: many growths; (a, b) and (b, a) are different keys */
	enum { N = 100000 };
	int ok = 1;
	for (uint32_t i = 0; i < N; i++)
		if (hmap_put(&m, i, (uint64_t)i * 7919, i) != i)
			ok = 0;
	T_CHECK(ok, "100k puts return their value");
	T_CHECK(m.n == N, "100k entries (%zu)", m.n);
	ok = 1;
	for (uint32_t i = 0; i < N; i++)
		if (hmap_get(&m, i, (uint64_t)i * 7919) != i)
			ok = 0;
	T_CHECK(ok, "every key found after growing");
	T_CHECK(hmap_put(&m, 5, 5 * 7919, 99) == 5, "a second put keeps the first value");
	T_CHECK(hmap_get(&m, 5 * 7919, 5) == HMAP_NONE, "(b, a) is not (a, b)");
	T_CHECK(hmap_get(&m, N, (uint64_t)N * 7919) == HMAP_NONE, "a key never put: missing");
	hmap_fini(&m);
	T_CHECK(m.cap == 0 && hmap_get(&m, 1, 7919) == HMAP_NONE, "fini empties it");

	struct arena a = {0};
	char *first = arena_strndup(&a, "a\0b", 3);
	T_CHECK(first && !memcmp(first, "a\0b", 4), "strndup copies embedded NULs and ends with one");
	ok = 1;
	for (int i = 0; i < 100000; i++) {
		char *p = arena_alloc(&a, (size_t)(i % 300) + 1);
		if (!p || ((uintptr_t)p & 7))
			ok = 0;
		else
			memset(p, 0xff, (size_t)(i % 300) + 1);
	}
	T_CHECK(ok, "100k allocations, 8-aligned");
	T_CHECK(!memcmp(first, "a\0b", 4), "the first copy has not moved or changed");
	char *big = arena_alloc(&a, 1 << 20);
	T_CHECK(big != NULL, "an allocation larger than a chunk");
	arena_fini(&a);
	T_CHECK(a.head == NULL, "fini empties it");
	return T_DONE();
}
