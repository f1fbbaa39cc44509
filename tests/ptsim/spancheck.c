/* spancheck SPANS.mt PROG [checks...]: properties of mt-ptsim's truth spans.
 *
 * Always: per thread, spans are in pre-order (ascending begin, parents before
 * children), every span lies within its parent, depths step by at most one,
 * begin <= end.
 * Checks (function names are PROG's symbols; the span's func is its entry):
 *   --count NAME N        exactly N spans of NAME
 *   --min-chain NAME N    some NAME span has N-1 nested NAME ancestors
 *   --same-depth A B      every B span is at the depth of some A span of the
 *                         same thread (tail calls replace the frame)
 *   --name TEXT N         exactly N synthetic spans named TEXT
 *   --threads N           spans of exactly N threads
 *   --ends-with NAME      every NAME span ends at the same time as one of its
 *                         descendants ends that is not NAME (frames left by
 *                         longjmp/unwinding end together)
 * Exit 0 if all hold, 1 with a message otherwise, 2 on bad input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elfinfo.h"
#include "mtev.h"

struct sp {
	uint32_t tid, depth, flags;
	uint64_t begin, end, func;
	char name[32];
};

static struct sp *v;
static size_t n, cap;

static uint64_t addr_of(const struct elfinfo *ei, const char *name)
{
	const struct elf_sym *s = elfinfo_find(ei, name);
	if (!s) {
		fprintf(stderr, "spancheck: no symbol %s\n", name);
		exit(2);
	}
	return s->addr;
}

/* The SPAN records of @path into v[0, n): 0, or the exit status. */
static int read_spans(const char *path)
{
	static uint8_t buf[64 << 20];
	struct mtev_rec rec;
	mtev_reader *r;
	size_t len;
	int err = 0, rc;
	FILE *f = fopen(path, "rb");

	if (!f)
		return 2;
	len = fread(buf, 1, sizeof buf, f);
	fclose(f);
	r = mtev_reader_alloc_mem(buf, len, &err);
	if (!r)
		return 2;
	while ((rc = mtev_read(r, &rec)) == 1) {
		if (rec.kind != MTEV_SPAN)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 4096;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				return 111;
		}
		struct sp *s = &v[n++];
		memset(s, 0, sizeof(*s));
		s->tid = rec.span.tid;
		s->depth = rec.span.depth;
		s->flags = rec.span.flags;
		s->begin = rec.span.begin;
		s->end = rec.span.end;
		s->func = rec.span.func;
		snprintf(s->name, sizeof s->name, "%.*s", (int)rec.span.name.len,
			 rec.span.name.p ? rec.span.name.p : "");
	}
	if (rc < 0) {
		fprintf(stderr, "spancheck: %s\n", mtev_strerror(-rc));
		return 2;
	}
	return 0;
}

/* The structure (pre-order, nesting, depths): 0 with parent[] and
 * *nthreads set, or 1 with a message. */
static int check_structure(size_t *parent, int *nthreads)
{
	size_t *stack = malloc((n + 1) * sizeof(*stack));
	size_t sp = 0;
	uint32_t tid = 0;
	uint64_t last_begin = 0;

	*nthreads = 0;
	for (size_t i = 0; i < n; i++) {
		struct sp *s = &v[i];
		if (i == 0 || s->tid != tid) {
			tid = s->tid;
			sp = 0;
			last_begin = 0;
			(*nthreads)++;
			if (s->depth != 0) {
				printf("thread %u: first span at depth %u\n", tid, s->depth);
				return 1;
			}
		}
		if (s->begin > s->end || s->begin < last_begin) {
			printf("span %zu: begin %llu end %llu after a begin at %llu\n", i,
			       (unsigned long long)s->begin, (unsigned long long)s->end,
			       (unsigned long long)last_begin);
			return 1;
		}
		last_begin = s->begin;
		while (sp > s->depth)
			sp--;
		if (s->depth != sp) {
			printf("span %zu: depth %u, but %zu frames are open\n", i, s->depth, sp);
			return 1;
		}
		parent[i] = sp ? stack[sp - 1] : (size_t)-1;
		if (sp) {
			struct sp *p = &v[stack[sp - 1]];
			if (s->begin < p->begin || s->end > p->end) {
				printf("span %zu [%llu,%llu] is not inside its parent %zu [%llu,%llu]\n", i,
				       (unsigned long long)s->begin, (unsigned long long)s->end, stack[sp - 1],
				       (unsigned long long)p->begin, (unsigned long long)p->end);
				return 1;
			}
		}
		stack[sp++] = i;
	}
	free(stack);
	return 0;
}

/* PIE: runtime = vaddr + bias, found from a span whose func is main's
 * runtime address (its low 12 bits equal main's). */
static uint64_t pie_bias(const struct elfinfo *ei)
{
	uint64_t m;

	if (!ei->is_pie)
		return 0;
	m = addr_of(ei, "main");
	for (size_t i = 0; i < n; i++)
		if (v[i].func && (v[i].func & 0xfff) == (m & 0xfff) && v[i].func > m)
			return v[i].func - m;
	return 0;
}

/* --count and --name: exactly @want spans of function @fn, or named
 * @text if @fn is 0 */
static int check_count(uint64_t fn, const char *text, const char *what, long want)
{
	long got = 0;

	for (size_t i = 0; i < n; i++)
		got += fn ? v[i].func == fn : !strcmp(v[i].name, text);
	if (got != want) {
		printf("%s: %ld spans, expected %ld\n", what, got, want);
		return 1;
	}
	return 0;
}

/* --min-chain */
static int check_min_chain(const size_t *parent, uint64_t fn, const char *what, long want)
{
	long best = 0;

	for (size_t i = 0; i < n; i++) {
		long k = 0;
		for (size_t j = i; j != (size_t)-1 && v[j].func == fn; j = parent[j])
			k++;
		if (k > best)
			best = k;
	}
	if (best < want) {
		printf("%s: longest nested chain %ld, expected >= %ld\n", what, best, want);
		return 1;
	}
	return 0;
}

/* --same-depth */
static int check_same_depth(uint64_t fa, uint64_t fb, const char *a, const char *b)
{
	long nb = 0;

	for (size_t i = 0; i < n; i++) {
		if (v[i].func != fb)
			continue;
		nb++;
		int ok = 0;
		for (size_t j = 0; j < n && !ok; j++)
			ok = v[j].func == fa && v[j].tid == v[i].tid && v[j].depth == v[i].depth;
		if (!ok) {
			printf("%s span %zu at depth %u: no %s span there\n", b, i, v[i].depth, a);
			return 1;
		}
	}
	if (!nb) {
		printf("no %s spans\n", b);
		return 1;
	}
	return 0;
}

/* --ends-with */
static int check_ends_with(uint64_t fn, const char *what)
{
	long nfn = 0;

	for (size_t i = 0; i < n; i++) {
		if (v[i].func != fn)
			continue;
		nfn++;
		/* Its innermost descendant chain: the deepest span that ends
		 * at the same time and is not fn. */
		int ok = 0;
		for (size_t j = i + 1; j < n && v[j].tid == v[i].tid && v[j].depth > v[i].depth; j++)
			if (v[j].func != fn && v[j].end == v[i].end)
				ok = 1;
		if (!ok) {
			printf("%s span %zu ends alone at %llu\n", what, i, (unsigned long long)v[i].end);
			return 1;
		}
	}
	if (!nfn) {
		printf("no %s spans\n", what);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct elfinfo ei;
	size_t *parent;
	uint64_t bias;
	int nthreads, rc;

	if (argc < 3) {
		fprintf(stderr, "usage: spancheck SPANS.mt PROG [checks]\n");
		return 2;
	}
	rc = read_spans(argv[1]);
	if (rc)
		return rc;
	parent = malloc((n + 1) * sizeof(*parent));
	if (check_structure(parent, &nthreads))
		return 1;
	if (elfinfo_load(&ei, argv[2]) < 0) {
		fprintf(stderr, "spancheck: cannot read %s\n", argv[2]);
		return 2;
	}
	bias = pie_bias(&ei);
	for (int a = 3; a < argc; a++) {
		const char *c = argv[a];
		if (!strcmp(c, "--count") && a + 2 < argc) {
			rc = check_count(addr_of(&ei, argv[a + 1]) + bias, NULL, argv[a + 1],
					 atol(argv[a + 2]));
			a += 2;
		} else if (!strcmp(c, "--name") && a + 2 < argc) {
			rc = check_count(0, argv[a + 1], argv[a + 1], atol(argv[a + 2]));
			a += 2;
		} else if (!strcmp(c, "--min-chain") && a + 2 < argc) {
			rc = check_min_chain(parent, addr_of(&ei, argv[a + 1]) + bias, argv[a + 1],
					     atol(argv[a + 2]));
			a += 2;
		} else if (!strcmp(c, "--same-depth") && a + 2 < argc) {
			rc = check_same_depth(addr_of(&ei, argv[a + 1]) + bias,
					      addr_of(&ei, argv[a + 2]) + bias, argv[a + 1], argv[a + 2]);
			a += 2;
		} else if (!strcmp(c, "--threads") && a + 1 < argc) {
			rc = nthreads != atoi(argv[a + 1]);
			if (rc)
				printf("%d threads, expected %s\n", nthreads, argv[a + 1]);
			a += 1;
		} else if (!strcmp(c, "--ends-with") && a + 1 < argc) {
			rc = check_ends_with(addr_of(&ei, argv[a + 1]) + bias, argv[a + 1]);
			a += 1;
		} else {
			fprintf(stderr, "spancheck: bad check %s\n", c);
			return 2;
		}
		if (rc)
			return 1;
	}
	printf("%zu spans, %d threads: ok\n", n, nthreads);
	elfinfo_fini(&ei);
	return 0;
}
