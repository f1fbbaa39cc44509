/* loadlat: what one dependent load costs on this machine, by how the data
 * lies — the question behind the walk's block cache layout (docs/decode.md,
 * Cost).  N entries of S bytes, either side by side or at random slots of a
 * T-byte table (huge pages advised), visited in a random order where each
 * visit's next entry depends on the value loaded (as the walk's next block
 * depends on the block it reads).  Prints ns per visit, median of 5; the
 * loop's own cost is the N=500 row (everything in L1).
 *
 *   build/bench/loadlat [N S T LAYOUT]    LAYOUT: dense | spread
 *   (no arguments: the rows docs/decode.md cites) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

enum { VISITS = 11300000, REPS = 5 }; /* the 50M trace's block count */

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rnd(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double run(size_t n, size_t sz, size_t tab, int dense)
{
	size_t nslots = tab / sz;
	if (sz < 8 || n == 0 || n > nslots) {
		fprintf(stderr, "loadlat: %zu entries of %zu bytes do not fit %zu bytes\n", n, sz, tab);
		exit(2);
	}
	char *t = aligned_alloc((size_t)2 << 20, tab);
	uint8_t *used = calloc(nslots, 1);
	size_t *pos = malloc(n * sizeof *pos);
	uint32_t *seq = malloc((size_t)VISITS * sizeof *seq);
	if (!t || !used || !pos || !seq) {
		fprintf(stderr, "loadlat: out of memory\n");
		exit(111);
	}
	madvise(t, tab, MADV_HUGEPAGE);
	memset(t, 0, tab);
	uint64_t x = 88172645463325252ull;
	for (size_t i = 0; i < n; i++) {
		size_t s = i;
		if (!dense)
			do
				s = (size_t)(rnd(&x) % nslots);
			while (used[s]);
		used[s] = 1;
		pos[i] = s * sz;
	}
	for (size_t i = 0; i < VISITS; i++)
		seq[i] = (uint32_t)(rnd(&x) % n);
	double ns[REPS];
	uint64_t sum = 0;
	for (int r = 0; r < REPS; r++) {
		double t0 = now();
		size_t cur = pos[seq[0]];
		for (size_t i = 1; i < VISITS; i++) {
			uint64_t v = *(volatile uint64_t *)(t + cur);
			sum += v;
			cur = pos[seq[(i + (v & 1)) % VISITS]]; /* depends on the load */
		}
		ns[r] = (now() - t0) * 1e9 / VISITS;
	}
	qsort(ns, REPS, sizeof *ns, cmp_d);
	free(t);
	free(used);
	free(pos);
	free(seq);
	return ns[REPS / 2] + (double)(sum & 0); /* sum: keep the loads */
}

static void row(size_t n, size_t sz, size_t tab, int dense)
{
	printf("| %zu | %zu | %zu | %s | %.1f |\n", n, sz, tab, dense ? "dense" : "spread",
	       run(n, sz, tab, dense));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	printf("| entries | bytes each | table bytes | layout | ns a visit (median of %d) |\n"
	       "|---:|---:|---:|---|---:|\n",
	       REPS);
	if (argc == 5) {
		row(strtoul(argv[1], NULL, 0), strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0),
		    !strcmp(argv[4], "dense"));
		return 0;
	}
	if (argc != 1) {
		fprintf(stderr, "usage: loadlat [N S T dense|spread]\n");
		return 2;
	}
	row(19000, 64, (size_t)4 << 20, 0); /* the 2-way hash table's blocks */
	row(19000, 64, (size_t)4 << 20, 1); /* made in order */
	row(19000, 32, (size_t)4 << 20, 1); /* 32-byte entries */
	row(500, 32, (size_t)4 << 20, 1);   /* all in L1: the loop's own cost */
	return 0;
}
