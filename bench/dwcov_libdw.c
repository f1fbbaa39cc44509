/* dwcov (libcommon/dwcov.c, DWARF read by hand) against the same answer read
 * through elfutils' libdw, on the same files in one invocation: for each
 * FILE, the coverage state and ranges (.debug_aranges, which must list every
 * unit), the merged inline ranges and the inline range bounds
 * (DW_TAG_inlined_subroutine DIEs, dwarf_ranges), and the time each takes.
 *
 * usage: dwcov_libdw [-n REPS] FILE...
 * Prints one line per file (`same` or the first difference) and a total:
 * files, ranges, inline ranges and bounds compared, milliseconds per reader.
 * Exit 1 when any answer differs.
 *
 * The libdw reader answers like dwcov on purpose (a unit it cannot read
 * stands for its own ranges; split DWARF, dwz and imported units likewise);
 * separate debug files are not followed here: give the debug file itself. */
#include "dwcov.h"
#include "elfinfo.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct vec {
	uint64_t *v;
	size_t n, cap;
};

static void push(struct vec *x, uint64_t a)
{
	if (x->n == x->cap) {
		x->cap = x->cap ? 2 * x->cap : 256;
		x->v = realloc(x->v, x->cap * sizeof *x->v);
		if (!x->v)
			abort();
	}
	x->v[x->n++] = a;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static size_t merge(struct vec *v)
{
	size_t w = dwcov_merge(v->v, v->n / 2);
	v->n = 2 * w;
	return w;
}

struct ans {
	int state, inl_known;
	struct vec r, ir, ib;
};

static int die_ranges(Dwarf_Die *d, struct vec *out)
{
	Dwarf_Addr base, s, e;
	ptrdiff_t off = 0;
	while ((off = dwarf_ranges(d, off, &base, &s, &e)) > 0)
		if (e > s)
			push(out, s), push(out, e);
	return off < 0 ? -1 : 0;
}

/* The inline ranges of one unit (depth-first over its DIEs); -1 when it
 * cannot be read: then its own ranges stand for them. */
static int unit_inline(Dwarf_Die *cu, struct vec *out)
{
	Dwarf_Attribute at;
	if (dwarf_attr(cu, DW_AT_dwo_name, &at) || dwarf_attr(cu, DW_AT_GNU_dwo_name, &at))
		return -1;
	Dwarf_Die stack[512];
	int sp = 0;
	if (dwarf_child(cu, &stack[0]) != 0)
		return 0;
	for (;;) {
		Dwarf_Die *d = &stack[sp];
		int tag = dwarf_tag(d);
		if (tag == DW_TAG_imported_unit)
			return -1;
		if (tag == DW_TAG_inlined_subroutine && die_ranges(d, out))
			return -1;
		if (dwarf_haschildren(d) && sp + 1 < 512) {
			if (dwarf_child(d, &stack[sp + 1]) == 0) {
				sp++;
				continue;
			}
		} else if (dwarf_haschildren(d)) {
			return -1;
		}
		for (;;) {
			int k = dwarf_siblingof(&stack[sp], &stack[sp]);
			if (k < 0)
				return -1;
			if (k == 0)
				break;
			if (sp == 0)
				return 0;
			sp--;
		}
	}
}

static void libdw_answer(const char *path, struct ans *a)
{
	memset(a, 0, sizeof *a);
	a->state = DWCOV_ALL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	Dwarf *dw = dwarf_begin(fd, DWARF_C_READ);
	if (!dw) {
		a->state = DWCOV_NONE; /* no DWARF in it */
		close(fd);
		return;
	}
	if (dwarf_getalt(dw)) /* dwz: units in another file */
		goto out;
	/* inline ranges, unit by unit */
	Dwarf_CU *u = NULL;
	Dwarf_Half ver;
	uint8_t ut;
	Dwarf_Die cu;
	struct vec cuoffs = {0};
	int ok = 1, k;
	while ((k = dwarf_get_units(dw, u, &u, &ver, &ut, &cu, NULL)) == 0) {
		if (ut == DW_UT_type || ut == DW_UT_split_type)
			continue;
		push(&cuoffs, dwarf_dieoffset(&cu) - dwarf_cuoffset(&cu)); /* the header */
		size_t mark = a->ir.n;
		if (unit_inline(&cu, &a->ir)) {
			a->ir.n = mark;
			if (die_ranges(&cu, &a->ir) || a->ir.n == mark) {
				ok = 0;
				break;
			}
		}
	}
	if (k < 0)
		ok = 0;
	if (ok) {
		for (size_t i = 0; i < a->ir.n; i++)
			push(&a->ib, a->ir.v[i]);
		qsort(a->ib.v, a->ib.n, sizeof *a->ib.v, cmp_u64);
		size_t w = 0;
		for (size_t i = 0; i < a->ib.n; i++)
			if (!w || a->ib.v[w - 1] != a->ib.v[i])
				a->ib.v[w++] = a->ib.v[i];
		a->ib.n = w;
		merge(&a->ir);
		a->inl_known = 1;
	} else {
		a->ir.n = a->ib.n = 0;
	}
	/* coverage: .debug_aranges, listing every unit */
	Dwarf_Aranges *ar;
	size_t nar;
	if (dwarf_getaranges(dw, &ar, &nar) == 0) {
		struct vec acu = {0};
		for (size_t i = 0; i < nar; i++) {
			Dwarf_Addr s;
			Dwarf_Word l;
			Dwarf_Off o;
			if (dwarf_getarangeinfo(dwarf_onearange(ar, i), &s, &l, &o))
				continue;
			push(&acu, o);
			if (l && s + l > s)
				push(&a->r, s), push(&a->r, s + l);
		}
		qsort(acu.v, acu.n, sizeof *acu.v, cmp_u64);
		int all = !(cuoffs.n && !acu.n);
		for (size_t i = 0; all && i < cuoffs.n; i++)
			all = bsearch(&cuoffs.v[i], acu.v, acu.n, sizeof *acu.v, cmp_u64) != NULL;
		if (all) {
			size_t w = merge(&a->r);
			a->state = w ? DWCOV_RANGES : DWCOV_NONE;
		} else {
			a->r.n = 0;
		}
		free(acu.v);
	}
	free(cuoffs.v);
out:
	dwarf_end(dw);
	close(fd);
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* The first difference in the coverage (@inl 0) or the inline ranges (@inl 1). */
static const char *diff(const struct dwcov *h, const struct ans *l, int inl)
{
	static char buf[200];
	if (!inl) {
		if (h->state != l->state)
			return snprintf(buf, sizeof buf, "state %s / %s", dwcov_state_name(h->state),
					dwcov_state_name(l->state)), buf;
		if (h->state == DWCOV_RANGES &&
		    (2 * h->n != l->r.n || memcmp(h->r, l->r.v, l->r.n * sizeof *h->r)))
			return snprintf(buf, sizeof buf, "ranges %zu / %zu", h->n, l->r.n / 2), buf;
		return NULL;
	}
	if (h->inl_known != l->inl_known)
		return snprintf(buf, sizeof buf, "inline known %d / %d", h->inl_known, l->inl_known),
		       buf;
	if (2 * h->nir != l->ir.n || (l->ir.n && memcmp(h->ir, l->ir.v, l->ir.n * sizeof *h->ir)))
		return snprintf(buf, sizeof buf, "inline ranges %zu / %zu", h->nir, l->ir.n / 2), buf;
	if (h->nib != l->ib.n || (l->ib.n && memcmp(h->ib, l->ib.v, l->ib.n * sizeof *h->ib)))
		return snprintf(buf, sizeof buf, "inline bounds %zu / %zu", h->nib, l->ib.n), buf;
	return NULL;
}

int main(int argc, char **argv)
{
	int reps = 1, i = 1, bad = 0;
	if (argc > 2 && !strcmp(argv[1], "-n"))
		reps = atoi(argv[2]), i = 3;
	if (i >= argc || reps < 1) {
		fputs("usage: dwcov_libdw [-n REPS] FILE...\n", stderr);
		return 2;
	}
	setenv("MT_DEBUGINFO_DIR", "", 1); /* each file alone */
	unsetenv("DEBUGINFOD_URLS");
	double th = 0, tl = 0;
	size_t nf = 0, nr = 0, nir = 0, nib = 0, ncov = 0, ninl = 0;
	for (; i < argc; i++) {
		struct dwcov h;
		struct ans l;
		double t0 = now();
		for (int k = 0; k < reps; k++) {
			dwcov_load(&h, argv[i], NULL, 0);
			if (k + 1 < reps)
				dwcov_fini(&h);
		}
		double t1 = now();
		for (int k = 0; k < reps; k++) {
			libdw_answer(argv[i], &l);
			if (k + 1 < reps)
				free(l.r.v), free(l.ir.v), free(l.ib.v);
		}
		double t2 = now();
		th += t1 - t0, tl += t2 - t1;
		const char *dc = diff(&h, &l, 0), *di = diff(&h, &l, 1);
		printf("%s: coverage %s, inline %s (hand %.1f ms, libdw %.1f ms; ranges %zu, "
		       "inline %zu, bounds %zu)\n",
		       argv[i], dc ? dc : "same", di ? di : "same", (t1 - t0) * 1e3 / reps,
		       (t2 - t1) * 1e3 / reps, h.n, h.nir, h.nib);
		bad |= dc || di;
		ncov += !dc, ninl += !di;
		nf++, nr += h.n, nir += h.nir, nib += h.nib;
		dwcov_fini(&h);
		free(l.r.v), free(l.ir.v), free(l.ib.v);
	}
	printf("total: %zu files (coverage the same in %zu, inline ranges and bounds in %zu), "
	       "%zu ranges, %zu inline ranges, %zu bounds; hand %.1f ms, libdw %.1f ms\n",
	       nf, ncov, ninl, nr, nir, nib, th * 1e3 / reps, tl * 1e3 / reps);
	return bad;
}
