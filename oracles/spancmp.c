#include "spancmp.h"
#include "vec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { SC_BEFORE = 1, SC_AFTER = 2, SC_MATCHED = 4, SC_JUDGED = 8, SC_HIDDEN = 16, SC_BADJOIN = 32 };

static char **names;
static size_t nnames, capnames;

uint32_t spancmp_intern(const char *p, size_t len)
{
	if (!len)
		return 0;
	for (size_t i = 0; i < nnames; i++)
		if (strlen(names[i]) == len && !memcmp(names[i], p, len))
			return (uint32_t)i + 1;
	if (nnames == capnames) {
		size_t nc = capnames ? capnames * 2 : 64;
		char **nn = realloc(names, nc * sizeof *nn);
		if (!nn)
			return 0;
		names = nn;
		capnames = nc;
	}
	char *c = strndup(p, len);
	if (!c)
		return 0;
	names[nnames++] = c;
	return (uint32_t)nnames;
}

const char *spancmp_name(uint32_t id)
{
	return id && id <= nnames ? names[id - 1] : "";
}

void spanset_init(struct spanset *s)
{
	memset(s, 0, sizeof *s);
}

void spanset_fini(struct spanset *s)
{
	free(s->v);
	free(s->win);
	free(s->gap);
	free(s->jmp);
	free(s->ret);
	memset(s, 0, sizeof *s);
}

int spanset_add(struct spanset *s, const struct mtev_rec *r)
{
	if (mt_grow((void **)&s->v, &s->cap, s->n + 1, sizeof *s->v))
		return -ENOMEM;
	struct sc_span *x = &s->v[s->n++];
	memset(x, 0, sizeof *x);
	x->tid = r->span.tid;
	x->depth = r->span.depth;
	x->begin = r->span.begin;
	x->end = r->span.end < r->span.begin ? r->span.begin : r->span.end;
	x->func = r->span.func;
	x->callsite = r->span.callsite;
	x->flags = r->span.flags;
	x->name = r->span.func ? 0 : spancmp_intern(r->span.name.p, r->span.name.len);
	return 0;
}

int spanset_add_gap(struct spanset *s, uint32_t tid, int is_seg, uint64_t begin, uint64_t end)
{
	if (mt_grow((void **)&s->gap, &s->capgap, s->ngap + 1, sizeof *s->gap))
		return -ENOMEM;
	s->gap[s->ngap++] = (struct sc_gap){tid, is_seg, 0, begin, end < begin ? begin : end};
	return 0;
}

static struct sc_win *find_win(const struct spanset *s, uint32_t tid)
{
	for (size_t i = 0; i < s->nwin; i++)
		if (s->win[i].tid == tid)
			return &s->win[i];
	return NULL;
}

int spanset_add_window(struct spanset *s, uint32_t tid, uint64_t begin, uint64_t end)
{
	struct sc_win *w = find_win(s, tid);
	if (w) {
		if (begin < w->begin)
			w->begin = begin;
		if (end > w->end)
			w->end = end;
		return 0;
	}
	if (mt_grow((void **)&s->win, &s->capwin, s->nwin + 1, sizeof *s->win))
		return -ENOMEM;
	s->win[s->nwin++] = (struct sc_win){tid, begin, end < begin ? begin : end, UINT64_MAX, 0, 0};
	return 0;
}

int spanset_note_start(struct spanset *s, uint32_t tid, uint64_t time, uint64_t to)
{
	struct sc_win *w = find_win(s, tid);
	int first = !w || time < w->begin || (time == w->begin && !w->start_to);
	if (spanset_add_window(s, tid, time, time))
		return -ENOMEM;
	if (first)
		find_win(s, tid)->start_to = to;
	return 0;
}

int spanset_note_move(struct spanset *s, uint32_t tid, uint64_t time)
{
	if (spanset_add_window(s, tid, time, time))
		return -ENOMEM;
	struct sc_win *w = find_win(s, tid);
	if (time < w->first_move)
		w->first_move = time;
	return 0;
}

int spanset_note_jump(struct spanset *s, uint32_t tid, uint64_t time, uint64_t to)
{
	if (mt_grow((void **)&s->jmp, &s->capjmp, s->njmp + 1, sizeof *s->jmp))
		return -ENOMEM;
	s->jmp[s->njmp++] = (struct sc_jump){tid, time, to, 0};
	return 0;
}

static int jump_cmp(const void *x, const void *y)
{
	const struct sc_jump *a = x, *b = y;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->time != b->time)
		return a->time < b->time ? -1 : 1;
	return a->to < b->to ? -1 : a->to > b->to;
}

int spanset_note_return(struct spanset *s, uint32_t tid, uint64_t time, uint64_t to)
{
	if (mt_grow((void **)&s->ret, &s->capret, s->nret + 1, sizeof *s->ret))
		return -ENOMEM;
	s->ret[s->nret++] = (struct sc_jump){tid, time, to, 0};
	return 0;
}

void spanset_sort_jumps(struct spanset *s)
{
	if (s->njmp)
		qsort(s->jmp, s->njmp, sizeof *s->jmp, jump_cmp);
	if (s->nret)
		qsort(s->ret, s->nret, sizeof *s->ret, jump_cmp);
}

/* Did thread @tid return at @time to an address in (@site, @site + 15]: to
 * the instruction after the call at @site (an x86 instruction is at most
 * 15 bytes)? */
static int returned_after(const struct spanset *s, uint32_t tid, uint64_t time, uint64_t site)
{
	struct sc_jump k = {tid, time, site + 1, 0};
	size_t lo = 0, hi = s->nret;
	while (lo < hi) { /* the first return not before (tid, time, site + 1) */
		size_t m = lo + (hi - lo) / 2;
		if (jump_cmp(&s->ret[m], &k) < 0)
			lo = m + 1;
		else
			hi = m;
	}
	return lo < s->nret && s->ret[lo].tid == tid && s->ret[lo].time == time &&
	       s->ret[lo].to <= site + 15;
}

/* Did thread @tid return at @time into the function entered at @func (the
 * returns' fn, where known)? */
static int returned_into(const struct spanset *s, uint32_t tid, uint64_t time, uint64_t func)
{
	struct sc_jump k = {tid, time, 0, 0};
	size_t lo = 0, hi = s->nret;
	while (lo < hi) { /* the first return of (tid, time) */
		size_t m = lo + (hi - lo) / 2;
		if (jump_cmp(&s->ret[m], &k) < 0)
			lo = m + 1;
		else
			hi = m;
	}
	for (; lo < s->nret && s->ret[lo].tid == tid && s->ret[lo].time == time; lo++)
		if (func && s->ret[lo].fn == func)
			return 1;
	return 0;
}

/* Did thread @tid jump to @to at @time (noted, then sorted)? */
static int jumped(const struct spanset *s, uint32_t tid, uint64_t time, uint64_t to)
{
	struct sc_jump k = {tid, time, to, 0};
	return s->njmp && bsearch(&k, s->jmp, s->njmp, sizeof *s->jmp, jump_cmp) != NULL;
}

static int key_cmp(const struct sc_span *a, const struct sc_span *b)
{
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->depth != b->depth)
		return a->depth < b->depth ? -1 : 1;
	if (a->func != b->func)
		return a->func < b->func ? -1 : 1;
	if (a->name != b->name)
		return a->name < b->name ? -1 : 1;
	return 0;
}

static int span_cmp(const void *x, const void *y)
{
	const struct sc_span *a = x, *b = y;
	int k = key_cmp(a, b);
	if (k)
		return k;
	if (a->begin != b->begin)
		return a->begin < b->begin ? -1 : 1;
	if (a->end != b->end)
		return a->end < b->end ? -1 : 1;
	return 0;
}

struct tb { /* a truth boundary time of a thread */
	uint32_t tid;
	uint64_t t;
};

static int tb_cmp(const void *x, const void *y)
{
	const struct tb *a = x, *b = y;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return a->t < b->t ? -1 : a->t > b->t;
}

/* index of the first boundary of @tid greater than @t (or of tid's end) */
static size_t tb_upper(const struct tb *v, size_t n, uint32_t tid, uint64_t t)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (v[mid].tid < tid || (v[mid].tid == tid && v[mid].t <= t))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct ctx {
	const struct spancmp_opts *o;
	struct tb *tb;
	size_t ntb;
};

/* does actual time @a match truth time @b? */
static int tmatch(const struct ctx *c, uint32_t tid, uint64_t b, uint64_t a)
{
	uint64_t d = a > b ? a - b : b - a;
	if (d <= c->o->tol)
		return 1;
	if (c->o->strict || a < b)
		return 0;
	size_t i = tb_upper(c->tb, c->ntb, tid, b);
	uint64_t next = i < c->ntb && c->tb[i].tid == tid ? c->tb[i].t : UINT64_MAX;
	return a < next;
}

static int tclose(const struct spancmp_opts *o, uint64_t b, uint64_t a)
{
	return (a > b ? a - b : b - a) <= o->tol;
}

/* latest truth boundary of @tid at or before @t (or @t) */
static uint64_t tb_prev(const struct ctx *c, uint32_t tid, uint64_t t)
{
	size_t i = tb_upper(c->tb, c->ntb, tid, t);
	if (i > 0 && c->tb[i - 1].tid == tid)
		return c->tb[i - 1].t;
	return t;
}

struct iv {
	uint64_t b, e;
};

/* union of the intervals of @v[0..n) (sorted by begin) into @out, those
 * flagged a bad join left out; count */
static size_t merge_ivs(const struct sc_span *v, size_t n, struct iv *out)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].cflags & SC_BADJOIN)
			continue;
		if (m && v[i].begin <= out[m - 1].e) {
			if (v[i].end > out[m - 1].e)
				out[m - 1].e = v[i].end;
		} else
			out[m++] = (struct iv){v[i].begin, v[i].end};
	}
	return m;
}

/* first interval whose end >= t */
static size_t iv_lower(const struct iv *u, size_t m, uint64_t t)
{
	size_t lo = 0, hi = m;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (u[mid].e < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static uint64_t overlap_with(const struct iv *u, size_t m, uint64_t b, uint64_t e)
{
	uint64_t sum = 0;
	for (size_t i = iv_lower(u, m, b); i < m && u[i].b < e; i++) {
		uint64_t lo = u[i].b > b ? u[i].b : b, hi = u[i].e < e ? u[i].e : e;
		if (hi > lo)
			sum += hi - lo;
	}
	return sum;
}

static int intersects(const struct iv *u, size_t m, uint64_t b, uint64_t e)
{
	size_t i = iv_lower(u, m, b);
	return i < m && u[i].b <= e;
}

/* Does a truth span of the group (sorted by begin) intersect @a once its end
 * is widened by the time tolerance?  Looks at the last few that begin
 * before @a ends: spans of one group seldom overlap. */
static int near(const struct ctx *c, const struct sc_span *t, size_t nt, const struct sc_span *a)
{
	size_t lo = 0, hi = nt;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (t[mid].begin <= a->end + c->o->tol)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t z = lo, n = 0; z-- > 0 && n < 16; n++) {
		uint64_t e = t[z].end + c->o->tol;
		if (!c->o->strict) {
			size_t i = tb_upper(c->tb, c->ntb, a->tid, t[z].end);
			uint64_t next = i < c->ntb && c->tb[i].tid == a->tid ? c->tb[i].t : UINT64_MAX;
			if (next - 1 > e)
				e = next - 1;
		}
		if (a->begin <= e)
			return 1;
	}
	return 0;
}

static int push_span(struct sc_span **v, size_t *n, size_t *cap, const struct sc_span *x)
{
	if (mt_grow((void **)v, cap, *n + 1, sizeof **v))
		return -ENOMEM;
	(*v)[(*n)++] = *x;
	return 0;
}

/* A comparison's working state: the clipped truth T, the judged actual A,
 * their merged intervals per group, the truth's boundaries. */
struct work {
	struct ctx c;
	struct sc_span *T, *A;
	size_t nT, nA, capT, capA, capw, capm;
	struct iv *ut, *ua;
	uint32_t *hid; /* outer frames hidden, per window (covering()) */
	struct sc_gap *G; /* the gaps, to the next segment, by thread and begin */
	size_t nG;
	uint8_t *tnames; /* names of synthetic truth spans */
};

/* A thread with no window from its segments gets its actual spans' extent. */
static int default_windows(struct spanset *actual)
{
	size_t nwin0 = actual->nwin;
	for (size_t i = 0; i < actual->n; i++) {
		const struct sc_span *a = &actual->v[i];
		const struct sc_win *w = find_win(actual, a->tid);
		if ((!w || (size_t)(w - actual->win) >= nwin0) &&
		    spanset_add_window(actual, a->tid, a->begin, a->end))
			return -ENOMEM;
	}
	return 0;
}

/* The truth clipped to the actual windows, into W->T; the frames live across
 * a whole window into W->cov. */
static int clip_truth(struct work *W, const struct spanset *truth, const struct spanset *actual)
{
	for (size_t i = 0; i < truth->n; i++) {
		struct sc_span x = truth->v[i];
		const struct sc_win *w = find_win(actual, x.tid);
		x.cflags = 0;
		if (w) {
			if (x.end < w->begin || x.begin > w->end)
				continue;
			/* ended by the instant tracing began, its return not a
			 * traced branch (the window's only branch at that instant
			 * is its trace-start): nothing of it is in the window;
			 * nor of one made and ended at that instant, its call
			 * not traced either (it ran before the first traced
			 * instruction) */
			if (x.end == w->begin && w->first_move != UINT64_MAX && w->first_move > w->begin)
				continue;
			if (x.begin < w->begin) {
				x.begin = w->begin;
				x.cflags |= SC_BEFORE;
			}
			/* live after the window: ended later, or never (open at the
			 * end of the run, which may be the window's end) */
			if (x.end > w->end || (x.flags & MTEV_SPAN_OPEN_AT_END)) {
				x.end = w->end;
				x.cflags |= SC_AFTER;
			}
		}
		if (push_span(&W->T, &W->nT, &W->capT, &x))
			return -ENOMEM;
	}
	return 0;
}

/* The parts of the window @w that the actual result recorded: from its
 * first span to its last, cut at its gap markers (flag error): the
 * stretches' bounds into @out (pairs), their count. */
static size_t recorded(const struct spanset *actual, const struct sc_win *w, uint64_t *out,
		       size_t cap)
{
	uint64_t ab = UINT64_MAX, ae = 0;
	for (size_t j = 0; j < actual->n; j++) {
		const struct sc_span *a = &actual->v[j];
		if (a->tid != w->tid || (a->flags & MTEV_SPAN_ERROR))
			continue;
		ab = a->begin < ab ? a->begin : ab;
		ae = a->end > ae ? a->end : ae;
	}
	if (ab == UINT64_MAX || ab < w->begin)
		ab = w->begin;
	if (ae < ab || ae > w->end)
		ae = w->end;
	size_t n = 0;
	out[n++] = ab;
	for (;;) { /* the earliest gap marker inside the current stretch */
		uint64_t gb = UINT64_MAX, ge = 0;
		for (size_t j = 0; j < actual->n; j++) {
			const struct sc_span *a = &actual->v[j];
			if (a->tid == w->tid && (a->flags & MTEV_SPAN_ERROR) && a->begin >= out[n - 1] &&
			    a->end > a->begin && a->begin < ae && a->begin < gb) {
				gb = a->begin;
				ge = a->end;
			}
		}
		if (gb == UINT64_MAX || n + 2 > cap)
			break;
		out[n++] = gb;
		out[n++] = ge < ae ? ge : ae;
	}
	out[n++] = ae;
	return n / 2;
}

/* Is truth span @x live from the start @ab of a stretch of window @w (began
 * before it: before the window, clipped there, or live when the truth
 * began), and up to its end @ae (ended after it; after the window: clipped
 * there)? */
static int live_from(const struct sc_span *x, const struct sc_win *w, uint64_t ab)
{
	return ab > w->begin ? x->begin < ab
			     : (x->cflags & SC_BEFORE) ||
				       (x->begin == ab && (x->flags & MTEV_SPAN_INFERRED_START));
}

static int live_to(const struct sc_span *x, const struct sc_win *w, uint64_t ae)
{
	return ae < w->end ? x->end > ae : (x->cflags & SC_AFTER) != 0;
}

static int by_begin(const void *a, const void *b)
{
	const struct sc_span *x = *(const struct sc_span *const *)a, *y = *(const struct sc_span *const *)b;
	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Is depth @d of window @w's thread held without a break across the
 * stretch [@ab, @ae] by truth frames that tail-call one another (each
 * begins as the one before ends, by a jump of the truth's branch stream
 * @jumps to it: the frame beneath executes nothing)?  1 yes, 0 no,
 * -ENOMEM. */
static int chained(const struct work *W, const struct spanset *jumps, const struct sc_win *w,
		   uint32_t d, uint64_t ab, uint64_t ae)
{
	size_t n = 0;
	for (size_t j = 0; j < W->nT; j++)
		n += W->T[j].tid == w->tid && W->T[j].depth == d && W->T[j].end >= ab &&
		     W->T[j].begin <= ae;
	if (!n)
		return 0;
	const struct sc_span **v = malloc(n * sizeof *v);
	if (!v)
		return -ENOMEM;
	n = 0;
	for (size_t j = 0; j < W->nT; j++)
		if (W->T[j].tid == w->tid && W->T[j].depth == d && W->T[j].end >= ab &&
		    W->T[j].begin <= ae)
			v[n++] = &W->T[j];
	qsort(v, n, sizeof *v, by_begin);
	int ok = 0;
	size_t j = 0;
	while (j < n && !live_from(v[j], w, ab))
		j++;
	if (j < n) {
		const struct sc_span *cur = v[j++];
		while (!(ok = live_to(cur, w, ae))) {
			while (j < n && v[j]->begin < cur->end)
				j++;
			/* the next frame begins as this one ends, by a jump to it:
			 * a return and the parent's next call can share a time */
			if (j == n || v[j]->begin != cur->end ||
			    !jumped(jumps, w->tid, v[j]->begin, v[j]->func))
				break;
			cur = v[j++]; /* j moves on: a zero-length span is passed once */
		}
	}
	free(v);
	return ok;
}

/* How many outer frames of each window's thread no recorded trace can see
 * (into W->hid): depth k is hidden when, in every stretch the actual result
 * recorded (recorded()), one truth frame of depth k is live across it
 * (live_from, live_to) and depth k + 1 is held across it by one frame or by
 * frames that tail-call one another (chained()): such a depth-k frame
 * executed nothing there. */
static int covering(struct work *W, const struct spanset *actual)
{
	W->hid = calloc(actual->nwin + 1, sizeof *W->hid);
	if (!W->hid)
		return -ENOMEM;
	enum { MAXST = 64 };
	uint64_t st[2 * MAXST];
	uint64_t mask[MAXST];
	for (size_t i = 0; i < actual->nwin; i++) {
		const struct sc_win *w = &actual->win[i];
		size_t ns = recorded(actual, w, st, 2 * MAXST);
		memset(mask, 0, sizeof mask);
		for (size_t j = 0; j < W->nT; j++) {
			const struct sc_span *x = &W->T[j];
			if (x->tid != w->tid || x->depth >= 64)
				continue;
			for (size_t k = 0; k < ns; k++)
				if (live_from(x, w, st[2 * k]) && live_to(x, w, st[2 * k + 1]))
					mask[k] |= 1ull << x->depth;
		}
		uint32_t k = 0;
		for (;;) {
			int all = ns > 0 && k + 1 < 64;
			for (size_t z = 0; z < ns && all; z++) {
				all = (mask[z] >> k & 1) != 0;
				if (all && !(mask[z] >> (k + 1) & 1)) {
					int c = chained(W, actual, w, k + 1, st[2 * z], st[2 * z + 1]);
					if (c < 0)
						return c;
					all = c;
				}
			}
			if (!all)
				break;
			k++;
		}
		W->hid[i] = k;
	}
	return 0;
}

/* Frames no trace can see (covering()) are dropped and the depths below
 * them renumbered. */
static void hide_outer(struct work *W, const struct spanset *actual, struct spancmp_res *res)
{
	struct sc_span *T = W->T;
	for (size_t i = 0; i < actual->nwin; i++) {
		uint32_t tid = actual->win[i].tid, k = W->hid[i];
		if (k > res->max_hidden)
			res->max_hidden = k;
		if (!k)
			continue;
		for (size_t j = 0; j < W->nT; j++)
			if (T[j].tid == tid) {
				if (T[j].depth < k)
					T[j].cflags |= SC_HIDDEN;
				else
					T[j].depth -= k;
			}
	}
	size_t w = 0;
	for (size_t j = 0; j < W->nT; j++)
		if (!(T[j].cflags & SC_HIDDEN))
			T[w++] = T[j];
	W->nT = w;
}

/* Frames no trace of the window can see although they end inside it: a
 * frame F that began before the window, suspended then in a callee C that
 * also began before it, which made no other call in the window, and which
 * ended with C without C returning to it (no return at C's end to the
 * instruction after C's call site): the unwinder (an exception, a longjmp)
 * removed both at once.  F executed no instruction in the window, so no
 * branch of it names F (docs/fidelity.md, "Frames the window cannot see").
 * Such frames are dropped; the depths of the others stay (F lies above the
 * frame the unwinding lands in, below frames that end with it).  Frames
 * live across the whole window are covering()'s. */
static void hide_unwound(struct work *W, const struct spanset *actual, struct spancmp_res *res)
{
	struct sc_span *T = W->T;
	size_t n = W->nT;
	for (size_t i = 0; i < n; i++) {
		const struct sc_span *f = &T[i];
		if (!(f->cflags & SC_BEFORE) || (f->cflags & SC_AFTER) || !find_win(actual, f->tid))
			continue;
		const struct sc_span *c = NULL;
		int called = 0;
		for (size_t j = 0; j < n && !called; j++) {
			const struct sc_span *g = &T[j];
			if (g->tid != f->tid || g->depth != f->depth + 1 || g->begin > f->end)
				continue;
			if ((g->cflags & SC_BEFORE) && g->end == f->end && g->callsite && !c)
				c = g;
			else if (!(g->cflags & SC_BEFORE))
				called = 1; /* F called something in the window */
		}
		/* C's call site is the jump's when C was tail-called: its
		 * return then lands after another call, in F's function */
		if (!c || called || returned_after(actual, f->tid, c->end, c->callsite) ||
		    returned_into(actual, f->tid, c->end, f->func))
			continue;
		T[i].cflags |= SC_HIDDEN;
		res->unwound++;
	}
	size_t w = 0;
	for (size_t j = 0; j < n; j++)
		if (!(T[j].cflags & SC_HIDDEN))
			T[w++] = T[j];
	W->nT = w;
}

static int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* A frame live when the window began runs, at the window's first
 * instruction, code that may lie in another function: a body entered by a
 * jump into its middle (glibc's mempcpy jumps into memcpy's), not a tail
 * call (the truth's frame keeps the name of its entry).  No trace of the
 * window can tell that entry; what it shows is the function whose code
 * runs.  So the frame executing the window's first instruction (the
 * deepest beginning with the window, clipped there) takes the name an
 * actual span gives it when that is the function of that instruction: by
 * the symbol tables (w->start_fn), else the nearest function entry the
 * truth knows (any span's, the whole run's) at or before it, past the
 * frame's own entry. */
static int name_by_code(struct work *W, const struct spanset *truth, const struct spanset *actual,
			struct spancmp_res *res)
{
	uint64_t *fn = NULL;
	size_t nfn = 0;
	for (size_t i = 0; i < actual->nwin; i++) {
		const struct sc_win *w = &actual->win[i];
		struct sc_span *f = NULL;
		if (!w->start_to)
			continue;
		for (size_t j = 0; j < W->nT; j++) {
			struct sc_span *x = &W->T[j];
			if (x->tid == w->tid && x->begin == w->begin && (!f || x->depth > f->depth))
				f = x;
		}
		if (!f || !(f->cflags & SC_BEFORE) || !f->func)
			continue;
		uint64_t e = w->start_fn;
		if (!e && f->func < w->start_to) {
			size_t lo = 0, hi; /* the first entry past it */
			if (!fn) { /* the truth's entries, made once */
				if (!(fn = malloc((truth->n ? truth->n : 1) * sizeof *fn)))
					return -ENOMEM;
				for (size_t j = 0; j < truth->n; j++)
					if (truth->v[j].func)
						fn[nfn++] = truth->v[j].func;
				qsort(fn, nfn, sizeof *fn, u64_cmp);
			}
			hi = nfn;
			while (lo < hi) {
				size_t mid = (lo + hi) / 2;
				if (fn[mid] <= w->start_to)
					lo = mid + 1;
				else
					hi = mid;
			}
			e = lo && fn[lo - 1] > f->func ? fn[lo - 1] : 0;
		}
		if (!e || e == f->func)
			continue;
		for (size_t j = 0; j < W->nA; j++) {
			const struct sc_span *a = &W->A[j];
			if (a->tid == f->tid && a->depth == f->depth && a->begin == w->begin &&
			    a->func == e && (a->flags & MTEV_SPAN_INFERRED_START)) {
				f->func = e;
				res->renamed++;
				break;
			}
		}
	}
	free(fn);
	return 0;
}

/* The actual spans judged, into W->A: functions, and synthetic spans whose
 * name the truth has; no gap markers. */
static int judged_actual(struct work *W, const struct spanset *actual, struct spancmp_res *res)
{
	W->tnames = calloc(nnames + 2, 1);
	if (!W->tnames)
		return -ENOMEM;
	for (size_t j = 0; j < W->nT; j++)
		if (!W->T[j].func && W->T[j].name <= nnames)
			W->tnames[W->T[j].name] = 1;
	/* the outer frames a call chain added (flag callchain) are the ones
	 * hidden above: set aside with them, the depths under them renumbered
	 * (judged only with absolute depths) */
	size_t *cc = NULL, ncc = 0;
	if (!W->c.o->absolute_depth) {
		for (size_t i = 0; i < actual->n; i++)
			if (actual->v[i].flags & MTEV_SPAN_CALLCHAIN)
				ncc++;
		if (ncc && !(cc = malloc(ncc * sizeof *cc)))
			return -ENOMEM;
		ncc = 0;
		for (size_t i = 0; i < actual->n && cc; i++)
			if (actual->v[i].flags & MTEV_SPAN_CALLCHAIN)
				cc[ncc++] = i;
	}
	for (size_t i = 0; i < actual->n; i++) {
		struct sc_span x = actual->v[i];
		x.cflags = 0;
		if (ncc && (x.flags & MTEV_SPAN_CALLCHAIN)) {
			res->actual++;
			res->unjudged++;
			continue;
		}
		uint32_t under = 0;
		for (size_t k = 0; k < ncc; k++) {
			const struct sc_span *y = &actual->v[cc[k]];
			under += y->tid == x.tid && y->depth < x.depth && y->begin <= x.begin &&
				 x.end <= y->end;
		}
		x.depth -= under;
		int judged = !(x.flags & MTEV_SPAN_ERROR) && x.func;
		if (!judged && !(x.flags & MTEV_SPAN_ERROR) && x.name && x.name <= nnames)
			judged = W->tnames[x.name];
		res->actual++;
		if (!judged) {
			res->unjudged++;
			continue;
		}
		if (push_span(&W->A, &W->nA, &W->capA, &x)) {
			free(cc);
			return -ENOMEM;
		}
	}
	free(cc);
	return 0;
}

static int gap_cmp(const void *x, const void *y)
{
	const struct sc_gap *a = x, *b = y;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return (a->begin > b->begin) - (a->begin < b->begin);
}

/* The time no trace shows, into W->G (merged, by thread and begin): each
 * gap record from its begin to the first segment that begins at or after
 * it (none: to the window's end), clipped to the window. */
static int gaps(struct work *W, const struct spanset *actual)
{
	W->G = malloc((actual->ngap + 1) * sizeof *W->G);
	if (!W->G)
		return -ENOMEM;
	for (size_t i = 0; i < actual->ngap; i++) {
		struct sc_gap g = actual->gap[i];
		const struct sc_win *w = find_win(actual, g.tid);
		if (g.is_seg || !w)
			continue;
		uint64_t next = UINT64_MAX;
		for (size_t k = 0; k < actual->ngap; k++) {
			const struct sc_gap *z = &actual->gap[k];
			if (z->is_seg && z->tid == g.tid && z->begin >= g.begin && z->begin < next)
				next = z->begin;
		}
		if (next == UINT64_MAX) {
			next = w->end;
			g.tail = 1;
		}
		if (next > g.end)
			g.end = next;
		if (g.begin < w->begin)
			g.begin = w->begin;
		if (g.end > w->end)
			g.end = w->end;
		if (g.end > g.begin)
			W->G[W->nG++] = g;
	}
	qsort(W->G, W->nG, sizeof *W->G, gap_cmp);
	size_t m = 0;
	for (size_t i = 0; i < W->nG; i++) {
		if (m && W->G[m - 1].tid == W->G[i].tid && W->G[i].begin <= W->G[m - 1].end) {
			if (W->G[i].end > W->G[m - 1].end)
				W->G[m - 1].end = W->G[i].end;
			W->G[m - 1].tail |= W->G[i].tail;
		} else
			W->G[m++] = W->G[i];
	}
	W->nG = m;
	return 0;
}

/* Is actual span @s joined across a gap over two activations: live across a
 * gap that no truth span of its group (@t[0..nt)) is live across?  Counts
 * the spans live across a gap into *@joins. */
static int bad_join(const struct work *W, const struct sc_span *t, size_t nt, const struct sc_span *s,
		    size_t *joins)
{
	int across = 0;
	for (size_t g = 0; g < W->nG; g++) {
		const struct sc_gap *z = &W->G[g];
		if (z->tid != s->tid || s->begin > z->begin || s->end < z->end)
			continue;
		*joins += !across;
		across = 1;
		size_t k = 0;
		while (k < nt && !(t[k].begin <= z->begin && t[k].end >= z->end))
			k++;
		if (k == nt)
			return 1;
	}
	return 0;
}

/* The time of truth span @x inside gaps that no trace shows: where it
 * begins or ends inside the gap (all of it in a gap no segment follows). */
static double gap_share(const struct work *W, const struct sc_span *x)
{
	double g = 0;
	for (size_t i = 0; i < W->nG; i++) {
		const struct sc_gap *z = &W->G[i];
		if (z->tid != x->tid || z->end <= x->begin || z->begin >= x->end ||
		    (!z->tail && x->begin <= z->begin && x->end >= z->end))
			continue;
		uint64_t lo = z->begin > x->begin ? z->begin : x->begin;
		uint64_t hi = z->end < x->end ? z->end : x->end;
		g += (double)(hi - lo);
	}
	return g;
}

/* The credit of truth span @x (@c: its time the actual covers) less what
 * lies inside gaps, unless @x is live across the gap and the actual (@u)
 * covers the whole gap too. */
static double gap_less(const struct work *W, const struct sc_span *x, int whole, const struct iv *u,
		       size_t m, double c)
{
	for (size_t g = 0; g < W->nG; g++) {
		const struct sc_gap *z = &W->G[g];
		if (z->tid != x->tid || z->end <= x->begin || z->begin >= x->end)
			continue;
		if (x->begin <= z->begin && x->end >= z->end) {
			size_t i = iv_lower(u, m, z->begin);
			if (i < m && u[i].b <= z->begin && u[i].e >= z->end)
				continue;
		}
		uint64_t lo = z->begin > x->begin ? z->begin : x->begin;
		uint64_t hi = z->end < x->end ? z->end : x->end;
		c -= whole ? (double)(hi - lo) : (double)overlap_with(u, m, lo, hi);
	}
	return c < 0 ? 0 : c;
}

/* The truth's span boundaries and the windows' edges, per thread, sorted. */
static int boundaries(struct work *W, const struct spanset *actual)
{
	struct ctx *c = &W->c;
	c->tb = malloc((2 * W->nT + 2 * actual->nwin + 1) * sizeof *c->tb);
	W->ut = malloc((W->nT + 1) * sizeof *W->ut);
	W->ua = malloc((W->nA + 1) * sizeof *W->ua);
	if (!c->tb || !W->ut || !W->ua)
		return -ENOMEM;
	for (size_t i = 0; i < W->nT; i++) {
		c->tb[c->ntb++] = (struct tb){W->T[i].tid, W->T[i].begin};
		c->tb[c->ntb++] = (struct tb){W->T[i].tid, W->T[i].end};
	}
	for (size_t i = 0; i < actual->nwin; i++) {
		c->tb[c->ntb++] = (struct tb){actual->win[i].tid, actual->win[i].begin};
		c->tb[c->ntb++] = (struct tb){actual->win[i].tid, actual->win[i].end};
	}
	qsort(c->tb, c->ntb, sizeof *c->tb, tb_cmp);
	return 0;
}

/* by thread, function, name, begin: the truth spans a min-depth span may be */
static int fkey_cmp(const void *x, const void *y)
{
	const struct sc_span *a = *(const struct sc_span *const *)x, *b = *(const struct sc_span *const *)y;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->func != b->func)
		return a->func < b->func ? -1 : 1;
	if (a->name != b->name)
		return a->name < b->name ? -1 : 1;
	return (a->begin > b->begin) - (a->begin < b->begin);
}

/* Actual spans flagged min-depth (their depth is a lower bound: unseen
 * frames may lie below them) take the depth, at or below the one they
 * claim, of the truth span of the same thread and function that they
 * match in time (the shallowest such), else of the one they overlap most;
 * none: they keep theirs (and are wrong).  Then judged as any span. */
static int resolve_min_depth(struct work *W)
{
	size_t nf = 0;
	for (size_t i = 0; i < W->nA; i++)
		nf += (W->A[i].flags & MTEV_SPAN_MIN_DEPTH) != 0;
	if (!nf)
		return 0;
	const struct sc_span **ix = malloc((W->nT + 1) * sizeof *ix);
	if (!ix)
		return -ENOMEM;
	for (size_t j = 0; j < W->nT; j++)
		ix[j] = &W->T[j];
	qsort(ix, W->nT, sizeof *ix, fkey_cmp);
	for (size_t i = 0; i < W->nA; i++) {
		struct sc_span *x = &W->A[i];
		if (!(x->flags & MTEV_SPAN_MIN_DEPTH))
			continue;
		/* the first truth span of x's thread, function and name */
		struct sc_span k = *x;
		k.begin = 0;
		const struct sc_span *kp = &k;
		size_t lo = 0, hi = W->nT;
		while (lo < hi) {
			size_t m = lo + (hi - lo) / 2;
			if (fkey_cmp(&ix[m], &kp) < 0)
				lo = m + 1;
			else
				hi = m;
		}
		uint32_t best = UINT32_MAX;
		int exact = 0;
		uint64_t most = 0;
		for (size_t j = lo; j < W->nT; j++) {
			const struct sc_span *u = ix[j];
			if (u->tid != x->tid || u->func != x->func || u->name != x->name || u->begin > x->end)
				break;
			if (u->depth < x->depth)
				continue;
			/* matching times as best_match takes them: spread inside
			 * one timestamp, a zero-length span too */
			int e = tmatch(&W->c, x->tid, u->begin, x->begin) &&
				tmatch(&W->c, x->tid, u->end, x->end);
			if (!e && u->end < x->begin)
				continue;
			uint64_t b = u->begin > x->begin ? u->begin : x->begin;
			uint64_t o = (u->end < x->end ? u->end : x->end) - b + 1;
			if (e > exact || (e == exact && (e ? u->depth < best : o > most))) {
				exact = e;
				best = u->depth;
				most = o;
			}
		}
		if (best != UINT32_MAX)
			x->depth = best;
	}
	free(ix);
	qsort(W->A, W->nA, sizeof *W->A, span_cmp);
	return 0;
}

/* The latest-beginning unmatched truth span of the group @t[0..nt) whose
 * times match actual span @s's, or NULL. */
static struct sc_span *best_match(const struct ctx *c, struct sc_span *t, size_t nt,
				  const struct sc_span *s)
{
	const struct spancmp_opts *o = c->o;
	uint32_t tid = s->tid; /* the group's: same thread, depth, function */
	/* candidates: truth spans beginning at most tol after it, back to the
	 * truth boundary at or before it */
	uint64_t lowb = tb_prev(c, tid, s->begin);
	if (s->begin - (s->begin > o->tol ? o->tol : s->begin) < lowb)
		lowb = s->begin - (s->begin > o->tol ? o->tol : s->begin);
	size_t lo = 0, hi = nt;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (t[mid].begin <= s->begin + o->tol)
			lo = mid + 1;
		else
			hi = mid;
	}
	struct sc_span *best = NULL;
	for (size_t z = lo; z-- > 0 && t[z].begin >= lowb;) {
		struct sc_span *u = &t[z];
		if (u->cflags & SC_MATCHED)
			continue;
		if (!tmatch(c, tid, u->begin, s->begin) || !tmatch(c, tid, u->end, s->end))
			continue;
		/* a span clipped at a window's edge begins (ends) exactly there:
		 * trace lost at the edge is not within resolution */
		if ((u->cflags & SC_BEFORE) && !tclose(o, u->begin, s->begin))
			continue;
		if ((u->cflags & SC_AFTER) && !tclose(o, u->end, s->end))
			continue;
		if ((u->cflags & SC_BEFORE) && !(s->flags & MTEV_SPAN_INFERRED_START))
			continue;
		if ((u->cflags & SC_AFTER) && !(s->flags & MTEV_SPAN_OPEN_AT_END))
			continue;
		best = u;
	}
	return best;
}

/* One group (same thread, depth, function): truth @t[0..nt), actual
 * @a[0..na), both sorted by begin. */
static int judge_group(struct work *W, struct sc_span *t, size_t nt, struct sc_span *a, size_t na,
		       struct spancmp_res *res)
{
	size_t mt = merge_ivs(t, nt, W->ut);
	for (size_t y = 0; y < na; y++) {
		struct sc_span *s = &a[y];
		struct sc_span *best = best_match(&W->c, t, nt, s);
		size_t joins = 0;
		int bad = bad_join(W, t, nt, s, &joins);
		res->joins += joins;
		if (best) {
			best->cflags |= SC_MATCHED;
			s->cflags |= SC_MATCHED;
			res->matched++;
		} else if ((!intersects(W->ut, mt, s->begin, s->end) && !near(&W->c, t, nt, s)) ||
			   bad) {
			if (intersects(W->ut, mt, s->begin, s->end) || near(&W->c, t, nt, s)) {
				s->cflags |= SC_BADJOIN;
				res->wrong_joins++;
			}
			res->wrong++;
			if (push_span(&res->wrong_spans, &res->nwrong_list, &W->capw, s))
				return -ENOMEM;
		}
	}
	size_t ma = merge_ivs(a, na, W->ua);
	/* time: a matched span counts whole (its times are right within the
	 * truth's resolution), others by their overlap; neither inside a gap
	 * unless live across it on both sides (gap_less) */
	for (size_t x = 0; x < nt; x++) {
		double len = (double)(t[x].end - t[x].begin);
		int m = (t[x].cflags & SC_MATCHED) != 0;
		res->truth_time += len;
		if (W->nG)
			res->gap_time += gap_share(W, &t[x]);
		double c = m ? len : (double)overlap_with(W->ua, ma, t[x].begin, t[x].end);
		c = W->nG ? gap_less(W, &t[x], m, W->ua, ma, c) : c;
		res->covered_time += c;
		if (m)
			res->exact_time += c;
	}
	for (size_t y = 0; y < na; y++) {
		res->actual_time += (double)(a[y].end - a[y].begin);
		if (a[y].cflags & SC_BADJOIN)
			continue;
		res->true_actual_time += a[y].cflags & SC_MATCHED
						 ? (double)(a[y].end - a[y].begin)
						 : (double)overlap_with(W->ut, mt, a[y].begin, a[y].end);
	}
	for (size_t x = 0; x < nt; x++)
		if (!(t[x].cflags & SC_MATCHED)) {
			if (push_span(&res->missed_spans, &res->nmissed_list, &W->capm, &t[x]))
				return -ENOMEM;
		} else
			res->truth_matched++;
	return 0;
}

int spancmp_run(struct spanset *truth, struct spanset *actual, const struct spancmp_opts *o,
		struct spancmp_res *res)
{
	int ret = -ENOMEM;
	struct work W = {.c = {o, NULL, 0}};
	memset(res, 0, sizeof *res);

	if (default_windows(actual) || clip_truth(&W, truth, actual) || gaps(&W, actual))
		goto out;
	if (!o->absolute_depth) {
		if (covering(&W, actual))
			goto out;
		hide_outer(&W, actual, res);
	}
	if (!o->count_unwound)
		hide_unwound(&W, actual, res);
	if (judged_actual(&W, actual, res) || name_by_code(&W, truth, actual, res))
		goto out;
	res->truth = W.nT;
	res->judged = W.nA;
	qsort(W.T, W.nT, sizeof *W.T, span_cmp);
	qsort(W.A, W.nA, sizeof *W.A, span_cmp);
	if (boundaries(&W, actual))
		goto out;
	if (resolve_min_depth(&W))
		goto out;

	/* walk the groups (same thread, depth, function) */
	struct sc_span *T = W.T, *A = W.A;
	size_t nT = W.nT, nA = W.nA, i = 0, j = 0;
	while (i < nT || j < nA) {
		int k = i >= nT ? 1 : j >= nA ? -1 : key_cmp(&T[i], &A[j]);
		size_t i1 = i, j1 = j;
		if (k <= 0)
			while (i1 < nT && !key_cmp(&T[i1], &T[i]))
				i1++;
		if (k >= 0)
			while (j1 < nA && !key_cmp(&A[j1], &A[j]))
				j1++;
		size_t nt = k <= 0 ? i1 - i : 0, na = k >= 0 ? j1 - j : 0;
		if (judge_group(&W, T + i, nt, A + j, na, res))
			goto out;
		i = k <= 0 ? i1 : i;
		j = k >= 0 ? j1 : j;
	}
	ret = 0;
out:
	free(W.T);
	free(W.A);
	free(W.ut);
	free(W.ua);
	free(W.c.tb);
	free(W.hid);
	free(W.tnames);
	free(W.G);
	return ret;
}

void spancmp_res_fini(struct spancmp_res *res)
{
	free(res->wrong_spans);
	free(res->missed_spans);
	memset(res, 0, sizeof *res);
}
