/* demo — a small program with a recognisable call structure, traced by
 * `make trace`.
 *
 * It serves "requests".  Each request builds a small binary tree (recursion:
 * tree_insert, tree_sum), runs one of three handlers chosen through a table of
 * function pointers, mixes numbers with a helper the compiler inlines at -O2
 * (mix), and sorts an array with libc's qsort (which calls back into
 * compare_u64).  Request sizes come from a fixed pseudo-random sequence; the
 * first request much larger than usual is "slow", and the demo calls
 * magic_trace_take_snapshot_with_arg(request number) right after it, which is
 * where mt takes the trace.  Then it serves 200 more requests (about half a
 * second: a capture that missed the trigger would end that much later) and
 * exits.
 *
 * Usage: demo [REQUESTS [SCALE]]   (defaults 400 and 12000: about 0.8 s here)
 * Prints the request that triggered on stderr; exit status 0.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "magic_trace.h"

struct node {
	struct node *left, *right;
	uint64_t key;
};

/* Inlined at -O2: it shows up in the trace only as an inline frame. */
static inline uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

__attribute__((noinline)) static struct node *tree_insert(struct node *root, struct node *n)
{
	if (!root)
		return n;
	if (n->key < root->key)
		root->left = tree_insert(root->left, n);
	else
		root->right = tree_insert(root->right, n);
	return root;
}

__attribute__((noinline)) static uint64_t tree_sum(const struct node *n, unsigned depth)
{
	if (!n)
		return 0;
	return n->key * depth + tree_sum(n->left, depth + 1) + tree_sum(n->right, depth + 1);
}

static int compare_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The three handlers, called through a function pointer. */
__attribute__((noinline)) static uint64_t handle_tree(uint64_t *v, size_t n)
{
	struct node *nodes = malloc(n * sizeof *nodes);
	struct node *root = NULL;
	if (!nodes)
		abort();
	for (size_t i = 0; i < n; i++) {
		nodes[i] = (struct node){NULL, NULL, mix(v[i])};
		root = tree_insert(root, &nodes[i]);
	}
	uint64_t s = tree_sum(root, 1);
	free(nodes);
	return s;
}

__attribute__((noinline)) static uint64_t handle_sort(uint64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		v[i] = mix(v[i] ^ i);
	qsort(v, n, sizeof *v, compare_u64);
	return v[n / 2];
}

__attribute__((noinline)) static uint64_t handle_text(uint64_t *v, size_t n)
{
	char buf[64];
	uint64_t h = 0;
	for (size_t i = 0; i < n; i++) {
		int len = snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v[i]);
		h = mix(h ^ (uint64_t)len ^ (uint64_t)strlen(buf) ^ (uint64_t)buf[i % 16]);
	}
	return h;
}

typedef uint64_t handler_fn(uint64_t *v, size_t n);
static handler_fn *const handlers[] = {handle_tree, handle_sort, handle_text};

__attribute__((noinline)) static uint64_t serve(unsigned req, size_t n)
{
	uint64_t *v = malloc(n * sizeof *v);
	if (!v)
		abort();
	for (size_t i = 0; i < n; i++)
		v[i] = mix(((uint64_t)req << 32) | i);
	handler_fn *h = handlers[mix(req) % 3];
	uint64_t r = h(v, n);
	free(v);
	return r;
}

int main(int argc, char **argv)
{
	unsigned requests = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 400;
	size_t scale = argc > 2 ? strtoul(argv[2], NULL, 0) : 12000;
	unsigned triggered = 0, after = 0;
	uint64_t total = 0;

	if (!requests || !scale) {
		fprintf(stderr, "usage: demo [REQUESTS [SCALE]]\n");
		return 2;
	}
	for (unsigned req = 1; req <= requests; req++) {
		/* Most requests are small; after a warm-up of 100, one in about
		 * 40 is ten times larger. */
		int slow = req > 100 && mix(req * 7919u) % 40 == 0;
		size_t n = slow ? scale * 10 : scale + mix(req) % scale;
		total += serve(req, n);
		if (slow && !triggered) {
			triggered = req;
			fprintf(stderr, "demo: slow request %u: taking a snapshot\n", req);
			magic_trace_take_snapshot_with_arg(req);
		}
		if (triggered && ++after > 200)
			break;
	}
	if (!triggered)
		fprintf(stderr, "demo: no slow request in %u requests\n", requests);
	printf("demo: checksum %016llx\n", (unsigned long long)total);
	return 0;
}
