/* hmap, strpool (on hidx), arena and vec.h, the table helpers every stage shares:
 * every key put is found with its first value, a missing key is HMAP_NONE,
 * growth and removal keep all other entries; a string interned twice has one
 * number and one copy; arena memory never moves and copies hold embedded NULs. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arena.h"
#include "hmap.h"
#include "strpool.h"
#include "t.h"
#include "vec.h"

static void test_del(void)
{
	/* 50k keys in a half-full table: long probe runs; deleting every other
	 * key leaves holes the backward shift must close without losing one */
	struct hmap m = {0};
	enum { N = 50000 };
	for (uint32_t i = 0; i < N; i++)
		hmap_put(&m, i % 97, i, i);
	for (uint32_t i = 0; i < N; i += 2)
		hmap_del(&m, i % 97, i);
	hmap_del(&m, 1, 2); /* never put: nothing happens */
	int ok = 1;
	for (uint32_t i = 0; i < N; i++)
		if (hmap_get(&m, i % 97, i) != (i & 1 ? i : HMAP_NONE))
			ok = 0;
	T_CHECK(ok && m.n == N / 2, "deleting every other key of 50k: the others all found (%zu)", m.n);
	ok = 1;
	for (uint32_t i = 0; i < N; i += 2)
		if (hmap_put(&m, i % 97, i, i + 1) != i + 1 || hmap_get(&m, i % 97, i) != i + 1)
			ok = 0;
	T_CHECK(ok && m.n == N, "a deleted key can be put again with a new value");
	hmap_fini(&m);
}

static void test_strpool(void)
{
	struct strpool p = {0};
	char buf[32];
	enum { N = 100000 };
	int ok = 1;
	for (uint32_t i = 0; i < N; i++) {
		int fresh = -1;
		snprintf(buf, sizeof buf, "name%u", i);
		if (strpool_add(&p, buf, strlen(buf), &fresh) != i || fresh != 1)
			ok = 0;
	}
	T_CHECK(ok && p.n == N, "100k distinct strings: numbered 0, 1, ... in order, each fresh");
	const char *first = p.v[0].p;
	ok = 1;
	for (uint32_t i = 0; i < N; i++) {
		int fresh = -1;
		snprintf(buf, sizeof buf, "name%u", i);
		if (strpool_add(&p, buf, strlen(buf), &fresh) != i || fresh != 0 ||
		    strcmp(p.v[i].p, buf) || p.v[i].len != strlen(buf))
			ok = 0;
	}
	T_CHECK(ok && p.n == N, "each again: the same number, not fresh, the same text");
	T_CHECK(first == p.v[0].p && !strcmp(first, "name0"), "the first copy has not moved");
	uint32_t a = strpool_add(&p, "a\0b", 3, NULL), b = strpool_add(&p, "a\0c", 3, NULL);
	T_CHECK(a != b && a != HMAP_NONE && !memcmp(p.v[a].p, "a\0b", 4),
		"strings differing after a NUL are different, copied whole with a NUL after");
	uint32_t e = strpool_add(&p, NULL, 0, NULL);
	T_CHECK(e != HMAP_NONE && e == strpool_add(&p, "", 0, NULL) && p.v[e].p[0] == 0,
		"the empty string (also as NULL, 0) is one entry");
	const char *x = strpool_intern(&p, "name7");
	T_CHECK(x == p.v[7].p, "strpool_intern gives the pool's copy");
	strpool_fini(&p);
	T_CHECK(p.n == 0 && !p.v, "fini empties it");
}

/* mt_grow across the 2 MiB line, where it stops using realloc and moves
 * the array into a huge-page block itself: every element kept, the
 * capacity at least what was asked, the block aligned to a huge page;
 * mt_huge_zalloc zeroed on both sides of the line */
/* Grows an array to 6 MiB one element at a time: 0 when every element
 * is kept; *moves counts the block moving once past 2 MiB. */
static int grow_6m(int *aligned, int *moves)
{
	uint64_t *v = NULL, *big = NULL;
	size_t cap = 0, n = ((size_t)6 << 20) / sizeof *v; /* 6 MiB of elements */
	int ok = 1;
	*aligned = 1;
	*moves = 0;
	for (size_t i = 0; i < n; i++) {
		if (mt_grow((void **)&v, &cap, i + 1, sizeof *v)) {
			ok = 0;
			break;
		}
		if (cap * sizeof *v >= MT_HUGE_PAGE) {
			if ((uintptr_t)v % MT_HUGE_PAGE)
				*aligned = 0;
			*moves += big && v != big;
			big = v;
		}
		v[i] = i * 2654435761u;
	}
	for (size_t i = 0; ok && i < n; i++)
		if (v[i] != i * 2654435761u)
			ok = 0;
	free(v);
	return ok && cap >= n ? 0 : -1;
}

static void test_grow(void)
{
	int aligned, moves;
	T_CHECK(grow_6m(&aligned, &moves) == 0, "mt_grow to 6 MiB one element at a time keeps every one");
	T_CHECK(aligned, "mt_grow's blocks of 2 MiB or more start on a huge page");
	T_CHECK(moves == 0, "past 2 MiB it grows in place, in the room it reserved (%d moves)", moves);
	/* where the address space for the room is refused (ulimit -v): a block
	 * of the array's size, moved as it doubles */
	pid_t pid = fork();
	if (pid == 0) {
		struct rlimit rl = {(rlim_t)200 << 20, (rlim_t)200 << 20};
		int st = setrlimit(RLIMIT_AS, &rl) ? 3 : grow_6m(&aligned, &moves) ? 1 : moves ? 0 : 2;
		_exit(st);
	}
	int ws = 0;
	T_CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
		"under a 200 MiB address-space limit mt_grow still reaches 6 MiB, by moving (exit %d)",
		WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
	for (size_t k = 1; k <= 5; k += 4) { /* 1 MiB (calloc) and 5 MiB */
		size_t nb = k << 20;
		unsigned char *z = mt_huge_zalloc(nb / 64, 64);
		size_t nz = 0;
		for (size_t i = 0; z && i < nb; i++)
			nz += z[i] != 0;
		T_CHECK(z && nz == 0, "mt_huge_zalloc of %zu MiB: all zero", k);
		free(z);
	}
}

int main(void)
{
	test_grow();
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
	test_del();
	test_strpool();

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
