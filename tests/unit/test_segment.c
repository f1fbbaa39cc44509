/* segment / stitch / spancmp library tests on records built in memory. */
#include "segment.h"
#include "spancmp.h"
#include "stitch.h"
#include "t.h"
#include "wplog.h"

#include <stdlib.h>
#include <string.h>

struct out {
	struct mtev_rec *v;
	size_t n, cap;
	size_t spans, waypoints, segments, other;
};

static int collect(void *ctx, const struct mtev_rec *r)
{
	struct out *o = ctx;
	if (o->n == o->cap) {
		o->cap = o->cap ? o->cap * 2 : 1024;
		o->v = realloc(o->v, o->cap * sizeof *o->v);
		if (!o->v)
			return -1;
	}
	o->v[o->n] = *r;
	if (r->kind == MTEV_SPAN) {
		/* names point into the producer: keep only the synthetic ones we use */
		o->v[o->n].span.name = r->span.name.len ? mtev_cstr("[named]") : r->span.name;
		o->spans++;
	} else if (r->kind == MTEV_WAYPOINT)
		o->waypoints++;
	else if (r->kind == MTEV_SEGMENT)
		o->segments++;
	else
		o->other++;
	o->n++;
	return 0;
}

static struct mtev_rec br(uint32_t tid, uint64_t time, unsigned type, uint64_t from, uint64_t to)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_BRANCH;
	r.br.tid = tid;
	r.br.time = time;
	r.br.type = type;
	r.br.from = from;
	r.br.to = to;
	return r;
}

static const struct mtev_rec *find_span(const struct out *o, uint64_t func, uint32_t depth)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->v[i].kind == MTEV_SPAN && o->v[i].span.func == func && o->v[i].span.depth == depth)
			return &o->v[i];
	return NULL;
}

/* A deep stack revealed entirely by returns: every promotion is O(1) and the
 * outermost frame ends up at depth 0. */
static void test_deep_promotion(void)
{
	enum { N = 200000 };
	struct out o = {0};
	struct seg_opts so = {.no_waypoints = 1};
	segmenter *s = seg_alloc(&so, collect, &o);
	struct mtev_rec r = br(1, 1000, MTEV_BR_TRACE_START, 0, 0x10000000);
	int e = seg_feed(s, &r);
	/* each return goes to a distinct "caller" address */
	for (uint64_t i = 0; i < N && !e; i++) {
		r = br(1, 1001 + i, MTEV_BR_RETURN, 0x10000000 + i * 16, 0x10000000 + (i + 1) * 16 + 5);
		e = seg_feed(s, &r);
	}
	T_CHECK(!e, "feeding %d returns past the root", N);
	T_CHECK(!seg_finish(s), "finish");
	T_CHECK(o.spans == N + 1, "one span per revealed frame plus the first: %zu", o.spans);
	T_CHECK(seg_stats(s)->promoted == N, "promoted %llu", (unsigned long long)seg_stats(s)->promoted);
	const struct mtev_rec *first = NULL, *root = NULL;
	for (size_t i = 0; i < o.n; i++)
		if (o.v[i].kind == MTEV_SPAN) {
			if (!root)
				root = &o.v[i];
			if (o.v[i].span.func == 0x10000000)
				first = &o.v[i];
		}
	T_CHECK(root && root->span.depth == 0 && root->span.begin == 1000 &&
			(root->span.flags & MTEV_SPAN_OPEN_AT_END) &&
			(root->span.flags & MTEV_SPAN_INFERRED_START),
		"the outermost frame is written first, at depth 0, from the segment start, open at end");
	T_CHECK(first && first->span.depth == N && first->span.end == 1001,
		"the first frame is %d deep and ends at the first return", N);
	/* pre-order: begins never decrease */
	uint64_t last = 0;
	int ordered = 1;
	for (size_t i = 0; i < o.n; i++)
		if (o.v[i].kind == MTEV_SPAN) {
			ordered &= o.v[i].span.begin >= last;
			last = o.v[i].span.begin;
		}
	T_CHECK(ordered, "spans in ascending begin");
	seg_free(s);
	free(o.v);
}

/* A gap closes the segment; the next segment numbers depths from its own root. */
static void test_gap_segments(void)
{
	struct out o = {0};
	segmenter *s = seg_alloc(NULL, collect, &o);
	struct mtev_rec r[] = {
		br(1, 10, MTEV_BR_TRACE_START, 0, 0x1000),
		br(1, 20, MTEV_BR_CALL, 0x1010, 0x2000),
	};
	int e = 0;
	for (size_t i = 0; i < 2; i++)
		e |= seg_feed(s, &r[i]);
	struct mtev_rec g;
	memset(&g, 0, sizeof g);
	g.kind = MTEV_GAP;
	g.gap.tid = 1;
	g.gap.begin = 20;
	g.gap.end = 50;
	g.gap.reason = MTEV_GAP_LOST;
	e |= seg_feed(s, &g);
	T_CHECK(o.segments == 1 && o.spans == 2, "the gap closed segment 0 (%zu spans)", o.spans);
	T_CHECK(o.n && o.v[o.n - 1].kind == MTEV_GAP, "the gap record follows its segment");
	struct mtev_rec r2[] = {
		br(1, 50, MTEV_BR_TRACE_START, 0, 0x3000),
		br(1, 60, MTEV_BR_RETURN, 0x3010, 0x2020),
		br(1, 70, MTEV_BR_RETURN, 0x2030, 0x1015),
	};
	for (size_t i = 0; i < 3; i++)
		e |= seg_feed(s, &r2[i]);
	e |= seg_finish(s);
	T_CHECK(!e, "no error");
	T_CHECK(o.segments == 2, "two segments");
	const struct mtev_rec *seg1 = NULL;
	for (size_t i = 0; i < o.n; i++)
		if (o.v[i].kind == MTEV_SEGMENT && o.v[i].segment.index == 1)
			seg1 = &o.v[i];
	T_CHECK(seg1 && seg1->segment.reason == MTEV_GAP_LOST && seg1->segment.begin == 50,
		"segment 1 begins after the gap, reason lost");
	const struct mtev_rec *x = find_span(&o, 0x1015, 0);
	T_CHECK(x && x->span.begin == 50 && (x->span.flags & MTEV_SPAN_INFERRED_START),
		"segment 1's revealed root begins at its start, not before the gap");
	seg_free(s);
	free(o.v);
}

static struct mtev_rec span(uint64_t begin, uint64_t end, uint32_t depth, uint64_t func, uint32_t flags)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_SPAN;
	r.span.tid = 1;
	r.span.begin = begin;
	r.span.end = end;
	r.span.depth = depth;
	r.span.func = func;
	r.span.flags = flags;
	return r;
}

static struct mtev_rec segrec(uint32_t index, uint64_t begin, uint64_t end)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_SEGMENT;
	r.segment.tid = 1;
	r.segment.index = index;
	r.segment.begin = begin;
	r.segment.end = end;
	return r;
}

/* Segments with no common function: across a gap, the earlier root (the
 * thread's root) survives it and the later segment goes one level under it,
 * the root's span not continued over the gap (ld.so's _start may tail-jump
 * to the program inside it: docs/stitch.md); without a gap record (a longjmp
 * above the root) they are not joined.  Nothing is invented. */
static void test_stitch_unaligned(void)
{
	const uint32_t I = MTEV_SPAN_INFERRED_START, O = MTEV_SPAN_OPEN_AT_END;
	struct mtev_rec in[] = {
		segrec(0, 0, 100), span(0, 100, 0, 0xa0, I | O), span(10, 100, 1, 0xb0, O),
		segrec(1, 200, 300), span(200, 300, 0, 0xc0, I | O), span(210, 220, 1, 0xd0, 0),
	};
	for (int gap = 1; gap >= 0; gap--) {
		struct out o = {0};
		stitcher *s = stitch_alloc(collect, &o);
		int e = 0;
		for (size_t i = 0; i < 3; i++)
			e |= stitch_feed(s, &in[i]);
		struct mtev_rec g;
		memset(&g, 0, sizeof g);
		g.kind = MTEV_GAP;
		g.gap.tid = 1;
		g.gap.begin = 100;
		g.gap.end = 200;
		g.gap.reason = MTEV_GAP_DECODE_ERROR;
		g.gap.message = mtev_cstr("boom");
		if (gap)
			e |= stitch_feed(s, &g);
		for (size_t i = 3; i < 6; i++)
			e |= stitch_feed(s, &in[i]);
		e |= stitch_finish(s);
		T_CHECK(!e, "stitch ran");
		const struct mtev_rec *a = find_span(&o, 0xa0, 0);
		if (gap) {
			const struct mtev_rec *c = find_span(&o, 0xc0, 1), *d = find_span(&o, 0xd0, 2);
			T_CHECK(stitch_stats(s)->unaligned == 0 && stitch_stats(s)->continued == 0,
				"gap, no common frame: aligned under the earlier root, which is not continued");
			T_CHECK(o.spans == 5, "four input spans and one gap marker: %zu", o.spans);
			T_CHECK(a && a->span.end == 100 && !(a->span.flags & MTEV_SPAN_STITCHED) && c &&
					c->span.begin == 200 && d && d->span.begin == 210,
				"the later segment goes one level under the earlier root, which ends at the gap");
		} else {
			const struct mtev_rec *c = find_span(&o, 0xc0, 0);
			T_CHECK(stitch_stats(s)->unaligned == 1 && stitch_stats(s)->continued == 0,
				"no gap, no common frame: not joined");
			T_CHECK(o.spans == 4, "four input spans: %zu", o.spans);
			T_CHECK(a && a->span.end == 100 && c && c->span.begin == 200 &&
					!(c->span.flags & MTEV_SPAN_STITCHED),
				"both roots keep their own times and depths");
		}
		stitch_free(s);
		free(o.v);
	}
}

/* The stitched span is one span: the same function live across the gap. */
static void test_stitch_aligned(void)
{
	struct out o = {0};
	stitcher *s = stitch_alloc(collect, &o);
	const uint32_t I = MTEV_SPAN_INFERRED_START, O = MTEV_SPAN_OPEN_AT_END;
	struct mtev_rec in[] = {
		segrec(0, 0, 100),  span(0, 100, 0, 0xa0, I | O),   span(10, 100, 1, 0xb0, O),
		span(20, 100, 2, 0xc0, O), segrec(1, 200, 300),     span(200, 300, 0, 0xa0, I | O),
		span(200, 250, 1, 0xb0, I), span(200, 210, 2, 0xe0, I),
	};
	int e = 0;
	for (size_t i = 0; i < 8; i++)
		e |= stitch_feed(s, &in[i]);
	e |= stitch_finish(s);
	T_CHECK(!e && stitch_stats(s)->continued == 2, "a and b continue across the gap");
	const struct mtev_rec *b = find_span(&o, 0xb0, 1), *x = find_span(&o, 0xe0, 2),
			      *cc = find_span(&o, 0xc0, 2);
	T_CHECK(b && b->span.begin == 10 && b->span.end == 250 &&
			(b->span.flags & MTEV_SPAN_STITCHED) && !(b->span.flags & MTEV_SPAN_OPEN_AT_END),
		"b is one span from 10 to 250");
	T_CHECK(x && x->span.begin == 200 && cc && cc->span.end == 100,
		"the frames that differ (c before, e after) keep their own times");
	T_CHECK(o.spans == 4, "a, b, c, e: %zu spans", o.spans);
	stitch_free(s);
	free(o.v);
}

static struct mtev_rec wprec(uint64_t time, uint32_t depth, uint64_t addr)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_WAYPOINT;
	r.waypoint.tid = 1;
	r.waypoint.time = time;
	r.waypoint.depth = depth;
	r.waypoint.addr = addr;
	return r;
}

static int run_stitch(const struct mtev_rec *in, size_t n, size_t limit, struct out *o)
{
	stitcher *s = stitch_alloc(collect, o);
	int e = !s;
	if (s && limit)
		stitch_set_mem_limit(s, limit);
	for (size_t i = 0; !e && i < n; i++)
		e |= stitch_feed(s, &in[i]);
	if (!e)
		e |= stitch_finish(s);
	stitch_free(s);
	return e;
}

/* Spilling the log to a temporary file changes nothing in the output:
 * three segments, the second joined to the first, the third not (a group
 * written at the join), with waypoints far apart in time and address. */
static void test_stitch_spill(void)
{
	const uint32_t I = MTEV_SPAN_INFERRED_START, O = MTEV_SPAN_OPEN_AT_END;
	struct mtev_rec *in = calloc(8000, sizeof *in);
	size_t n = 0;
	if (!in)
		return;
	in[n++] = segrec(0, 0, 100000);
	in[n++] = span(0, 100000, 0, 0xa0, I | O);
	in[n++] = span(10, 100000, 1, 0xb0, O);
	for (uint64_t i = 0; i < 2000; i++)
		in[n++] = wprec(10 + i * 40, 1, 0xb0 + (i % 7 == 0 ? i << 30 : i));
	in[n++] = segrec(1, 200000, 300000);
	in[n++] = span(200000, 300000, 0, 0x90, I | O); /* a root only B saw */
	in[n++] = span(200000, 300000, 1, 0xa0, I | O);
	in[n++] = span(200000, 250000, 2, 0xb0, I);
	for (uint64_t i = 0; i < 2000; i++) {
		if (i % 100 == 0)
			in[n++] = span(200001 + i * 20, 200001 + i * 20 + 5, 3, 0xe0, 0);
		in[n++] = wprec(200001 + i * 20, 2, 0xb0 + i * 3);
	}
	in[n++] = segrec(2, 400000, 500000);
	in[n++] = span(400000, 500000, 0, 0xf0, I | O);
	for (uint64_t i = 0; i < 2000; i++)
		in[n++] = wprec(400000 + i, 0, 0xf0 + i);
	struct out a = {0}, b = {0};
	int e = run_stitch(in, n, 0, &a) | run_stitch(in, n, 256, &b);
	int same = !e && a.n == b.n;
	for (size_t i = 0; same && i < a.n; i++) {
		const struct mtev_rec *x = &a.v[i], *y = &b.v[i];
		if (x->kind != y->kind)
			same = 0;
		else if (x->kind == MTEV_SPAN)
			same = x->span.begin == y->span.begin && x->span.end == y->span.end &&
			       x->span.depth == y->span.depth && x->span.func == y->span.func &&
			       x->span.flags == y->span.flags;
		else if (x->kind == MTEV_WAYPOINT)
			same = x->waypoint.time == y->waypoint.time && x->waypoint.addr == y->waypoint.addr &&
			       x->waypoint.depth == y->waypoint.depth;
	}
	T_CHECK(same, "spilled (256 bytes) and in-memory outputs are the same: %zu and %zu records",
		a.n, b.n);
	T_CHECK(a.waypoints == 6000 && a.spans == 24, "every waypoint and span written (%zu, %zu)",
		a.waypoints, a.spans);
	const struct mtev_rec *root = find_span(&a, 0x90, 0), *x = find_span(&a, 0xa0, 1);
	T_CHECK(root && root->span.begin == 0 && x && x->span.end == 300000 && a.v[0].kind == MTEV_SEGMENT,
		"the revealed root begins with the group and is written before its descendants");
	size_t first_root = a.n, first_wp = a.n;
	for (size_t i = a.n; i-- > 0;) {
		if (a.v[i].kind == MTEV_SPAN && a.v[i].span.func == 0x90)
			first_root = i;
		if (a.v[i].kind == MTEV_WAYPOINT)
			first_wp = i;
	}
	T_CHECK(first_root < first_wp, "the root comes before every waypoint");
	free(a.v);
	free(b.v);
	free(in);
}

/* ---- mt-segment --stitch: waypoints handed over as runs of words ---- */

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int same_rec(const struct mtev_rec *x, const struct mtev_rec *y)
{
	if (x->kind != y->kind)
		return 0;
	switch (x->kind) {
	case MTEV_SPAN:
		return x->span.tid == y->span.tid && x->span.begin == y->span.begin &&
		       x->span.end == y->span.end && x->span.depth == y->span.depth &&
		       x->span.func == y->span.func && x->span.callsite == y->span.callsite &&
		       x->span.flags == y->span.flags && x->span.name.len == y->span.name.len;
	case MTEV_WAYPOINT:
		return x->waypoint.tid == y->waypoint.tid && x->waypoint.time == y->waypoint.time &&
		       x->waypoint.addr == y->waypoint.addr && x->waypoint.depth == y->waypoint.depth;
	case MTEV_SEGMENT:
		return x->segment.tid == y->segment.tid && x->segment.index == y->segment.index &&
		       x->segment.begin == y->segment.begin && x->segment.end == y->segment.end &&
		       x->segment.reason == y->segment.reason;
	case MTEV_GAP:
		return x->gap.tid == y->gap.tid && x->gap.begin == y->gap.begin &&
		       x->gap.end == y->gap.end && x->gap.reason == y->gap.reason;
	}
	return 1;
}

static int feed_stitch_cb(void *ctx, const struct mtev_rec *r)
{
	return stitch_feed(ctx, r);
}

static int wprun_cb(void *ctx, uint32_t tid, struct wprun *run)
{
	return stitch_feed_wprun(ctx, tid, run);
}

/* A random branch stream of two threads (calls, returns that fit or reveal
 * callers, jumps near and far, runs of equal times, time leaps, gaps). */
static size_t gen_stream(struct mtev_rec *v, size_t max)
{
	uint64_t time = 1000, cur[2] = {0x400000, 0x400000}, stk[2][64];
	size_t n = 0, depth[2] = {0, 0};
	for (int tid = 1; tid <= 2; tid++)
		v[n++] = br((uint32_t)tid, time, MTEV_BR_TRACE_START, 0, 0x400010);
	while (n + 2 < max) {
		uint64_t r = rnd();
		int k = r % 5 == 0; /* thread 2 a fifth of the time */
		uint32_t tid = (uint32_t)k + 1;
		switch ((r >> 8) % 16) {
		case 0: /* same time */
			break;
		case 1:
			time += (r >> 16) % 100000; /* past the short form */
			break;
		default:
			time += (r >> 16) % 4;
		}
		uint64_t from = cur[k] + ((r >> 24) % 0x800);
		unsigned what = (unsigned)((r >> 40) % 100);
		if (what < 22 && depth[k] < 64) {
			uint64_t to = ((r >> 48) % 8 == 0 ? 0x7f0000000000ull : 0x400000) +
				      ((r >> 52) % 64) * 0x1000;
			stk[k][depth[k]++] = from;
			v[n++] = br(tid, time, MTEV_BR_CALL, from, to);
			cur[k] = to;
		} else if (what < 42) {
			uint64_t to = depth[k] ? stk[k][--depth[k]] + 5 : 0x500000 + ((r >> 48) % 64) * 0x40;
			v[n++] = br(tid, time, MTEV_BR_RETURN, from, to);
			cur[k] = to & ~0xfffull;
		} else if (what < 95) {
			v[n++] = br(tid, time, MTEV_BR_JCC, from, cur[k] + ((r >> 48) % 0x800));
		} else if (what < 98) {
			uint64_t to = 0x600000 + ((r >> 48) % 16) * 0x100000;
			v[n++] = br(tid, time, MTEV_BR_JUMP, from, to);
			cur[k] = to;
		} else {
			struct mtev_rec g;
			memset(&g, 0, sizeof g);
			g.kind = MTEV_GAP;
			g.gap.tid = tid;
			g.gap.begin = time;
			time += 50;
			g.gap.end = time;
			g.gap.reason = MTEV_GAP_LOST;
			v[n++] = g;
			v[n++] = br(tid, time, MTEV_BR_TRACE_START, 0, cur[k] + 0x10);
		}
	}
	return n;
}

static int run_seg_stitch(const struct mtev_rec *in, size_t n, int runs, size_t limit, struct out *o)
{
	stitcher *st = stitch_alloc(collect, o);
	struct seg_opts so = {0};
	if (runs)
		so.wprun = wprun_cb;
	segmenter *sg = st ? seg_alloc(&so, feed_stitch_cb, st) : NULL;
	int e = !sg;
	if (st && limit)
		stitch_set_mem_limit(st, limit);
	for (size_t i = 0; !e && i < n; i++)
		e |= seg_feed(sg, &in[i]);
	if (!e)
		e |= seg_finish(sg) | stitch_finish(st);
	seg_free(sg);
	stitch_free(st);
	return e;
}

/* The records of `mt-segment --stitch` (waypoints as runs of words, from
 * the segmenter's log to the stitcher's) are those of the record path, on
 * random streams, in memory and spilling after every few entries. */
static void test_wprun(void)
{
	enum { N = 60000 };
	struct mtev_rec *in = calloc(N, sizeof *in);
	if (!in)
		return;
	int ok = 1, ran = 0;
	size_t wps = 0;
	for (int round = 0; round < 6; round++) {
		size_t n = gen_stream(in, N);
		size_t limit = round % 2 ? 256 : 0;
		struct out a = {0}, b = {0};
		int e = run_seg_stitch(in, n, 0, limit, &a) | run_seg_stitch(in, n, 1, limit, &b);
		ran += !e;
		int same = !e && a.n == b.n;
		for (size_t i = 0; same && i < a.n; i++)
			same = same_rec(&a.v[i], &b.v[i]);
		if (!same)
			printf("# round %d: %zu and %zu records\n", round, a.n, b.n);
		ok &= same;
		wps += a.waypoints;
		free(a.v);
		free(b.v);
	}
	T_CHECK(ran == 6 && ok, "waypoint runs = waypoint records, 6 random streams (%zu waypoints)",
		wps);
	T_CHECK(wps > 100000, "the streams have waypoints");
	free(in);
}

int main(void)
{
	test_deep_promotion();
	test_gap_segments();
	test_stitch_unaligned();
	test_stitch_aligned();
	test_stitch_spill();
	test_wprun();
	return T_DONE();
}
