/* arena: allocations that never move and are freed all at once.
 * Library code: returns NULL on allocation failure, never prints. */
#ifndef MT_ARENA_H
#define MT_ARENA_H

#include <stddef.h>

struct achunk;
/* Zero-initialized is empty. */
struct arena {
	struct achunk *head;
};

/* @n bytes, 8-aligned, valid until arena_fini; NULL when out of memory. */
void *arena_alloc(struct arena *a, size_t n);
/* A NUL-terminated copy of @s[0, @n) (which may hold NULs); NULL when out of memory. */
char *arena_strndup(struct arena *a, const char *s, size_t n);
/* Frees everything; the arena is empty again. */
void arena_fini(struct arena *a);

#endif
