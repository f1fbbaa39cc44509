#include "stitch.h"
#include "vec.h"

#include "vlog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPF_GAP 0x80000000u /* internal: a gap marker made here */

struct sspan {
	uint64_t begin, end, func, callsite;
	int32_t level; /* depth as read; the output depth after the join pass */
	uint32_t flags;
	uint32_t seg;
	uint32_t name, namelen; /* in the pool */
	int32_t alias;		/* -1: canonical; else the span it continues */
	uint32_t seq;
};

struct sseg {
	uint64_t begin, end;
	uint32_t index;
	unsigned reason;
	size_t sp0, nsp;
	size_t wp0, wp1; /* byte range of its waypoints in the log */
	uint64_t wt0, wa0; /* log state at wp0 */
	int32_t wd0;
	int32_t L;	/* level of its depth 0 in its group */
	uint32_t group;
};

struct sgap {
	uint64_t begin, end, offset, ip;
	unsigned reason;
	int32_t code;
	uint32_t msg, msglen;
	size_t before; /* number of segments before it */
};

struct sthr {
	uint32_t tid;
	struct sspan *sp;
	size_t nsp, capsp;
	struct sseg *seg;
	size_t nseg, capseg;
	struct sgap *gap;
	size_t ngap, capgap;
	uint8_t *wp;
	size_t nwp, capwp;
	uint64_t wt, wa;
	int32_t wd;
};

struct stitcher {
	stitch_emit_fn emit;
	void *ctx;
	struct sthr **thr;
	size_t nthr, capthr;
	char *pool;
	size_t npool, cappool;
	struct stitch_stats st;
	unsigned detail;
	int err;
};

const char *stitch_strerror(int err)
{
	switch (err < 0 ? -err : err) {
	case 0:
		return "success";
	case STITCH_ENOMEM:
		return "out of memory";
	case STITCH_EKIND:
		return "record kind not accepted here";
	case STITCH_EEMIT:
		return "writing output failed";
	}
	return "unknown error";
}

unsigned stitch_error_detail(const stitcher *s)
{
	return s->detail;
}

const struct stitch_stats *stitch_stats(const stitcher *s)
{
	return &s->st;
}

stitcher *stitch_alloc(stitch_emit_fn emit, void *ctx)
{
	stitcher *s = calloc(1, sizeof *s);
	if (s) {
		s->emit = emit;
		s->ctx = ctx;
	}
	return s;
}

void stitch_free(stitcher *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nthr; i++) {
		struct sthr *t = s->thr[i];
		free(t->sp);
		free(t->seg);
		free(t->gap);
		free(t->wp);
		free(t);
	}
	free(s->thr);
	free(s->pool);
	free(s);
}

static int pool_add(stitcher *s, const char *p, size_t len, uint32_t *off)
{
	if (mt_grow((void **)&s->pool, &s->cappool, s->npool + len + 1, 1))
		return -1;
	if (len)
		memcpy(s->pool + s->npool, p, len);
	*off = (uint32_t)s->npool;
	s->npool += len;
	return 0;
}

static struct sthr *get_thr(stitcher *s, uint32_t tid)
{
	for (size_t i = s->nthr; i-- > 0;)
		if (s->thr[i]->tid == tid)
			return s->thr[i];
	if (mt_grow((void **)&s->thr, &s->capthr, s->nthr + 1, sizeof *s->thr))
		return NULL;
	struct sthr *t = calloc(1, sizeof *t);
	if (t) {
		t->tid = tid;
		s->thr[s->nthr++] = t;
	}
	return t;
}

static int new_seg(struct sthr *t, uint32_t index, uint64_t begin, uint64_t end, unsigned reason)
{
	if (mt_grow((void **)&t->seg, &t->capseg, t->nseg + 1, sizeof *t->seg))
		return -1;
	struct sseg *g = &t->seg[t->nseg++];
	memset(g, 0, sizeof *g);
	g->index = index;
	g->begin = begin;
	g->end = end;
	g->reason = reason;
	g->sp0 = t->nsp;
	g->wp0 = g->wp1 = t->nwp;
	g->wt0 = t->wt;
	g->wa0 = t->wa;
	g->wd0 = t->wd;
	return 0;
}

/* spans and waypoints before any segment record: an implicit segment */
static int cur_seg(struct sthr *t, uint64_t time)
{
	if (!t->nseg && new_seg(t, 0, time, time, 0))
		return -1;
	struct sseg *g = &t->seg[t->nseg - 1];
	if (time < g->begin && g->sp0 == t->nsp)
		g->begin = time;
	return 0;
}

static int add_span(stitcher *s, struct sthr *t, const struct mtev_rec *r)
{
	if (cur_seg(t, r->span.begin) ||
	    mt_grow((void **)&t->sp, &t->capsp, t->nsp + 1, sizeof *t->sp))
		return s->err = -STITCH_ENOMEM;
	struct sspan *x = &t->sp[t->nsp];
	memset(x, 0, sizeof *x);
	x->begin = r->span.begin;
	x->end = r->span.end;
	x->func = r->span.func;
	x->callsite = r->span.callsite;
	x->level = (int32_t)r->span.depth;
	x->flags = r->span.flags;
	x->seg = (uint32_t)(t->nseg - 1);
	x->alias = -1;
	x->seq = (uint32_t)t->nsp;
	x->namelen = r->span.name.len;
	if (pool_add(s, r->span.name.p, r->span.name.len, &x->name))
		return s->err = -STITCH_ENOMEM;
	t->nsp++;
	t->seg[t->nseg - 1].nsp++;
	return 0;
}

static int add_wp(stitcher *s, struct sthr *t, const struct mtev_rec *r)
{
	if (cur_seg(t, r->waypoint.time) ||
	    mt_grow((void **)&t->wp, &t->capwp, t->nwp + 32, 1))
		return s->err = -STITCH_ENOMEM;
	uint8_t *p = t->wp + t->nwp;
	p = vlog_put(p, vlog_zz((int64_t)(r->waypoint.time - t->wt)));
	p = vlog_put(p, vlog_zz((int64_t)(r->waypoint.addr - t->wa)));
	p = vlog_put(p, vlog_zz((int64_t)r->waypoint.depth - t->wd));
	t->nwp = (size_t)(p - t->wp);
	t->wt = r->waypoint.time;
	t->wa = r->waypoint.addr;
	t->wd = (int32_t)r->waypoint.depth;
	t->seg[t->nseg - 1].wp1 = t->nwp;
	return 0;
}

static int add_gap(stitcher *s, struct sthr *t, const struct mtev_rec *r)
{
	if (mt_grow((void **)&t->gap, &t->capgap, t->ngap + 1, sizeof *t->gap))
		return s->err = -STITCH_ENOMEM;
	struct sgap *g = &t->gap[t->ngap];
	g->begin = r->gap.begin;
	g->end = r->gap.end < r->gap.begin ? r->gap.begin : r->gap.end;
	g->offset = r->gap.offset;
	g->ip = r->gap.ip;
	g->reason = r->gap.reason;
	g->code = r->gap.code;
	g->msglen = r->gap.message.len;
	g->before = t->nseg;
	if (pool_add(s, r->gap.message.p, r->gap.message.len, &g->msg))
		return s->err = -STITCH_ENOMEM;
	t->ngap++;
	return 0;
}

static int emit(stitcher *s, const struct mtev_rec *r)
{
	if (s->emit(s->ctx, r))
		return s->err = -STITCH_EEMIT;
	return 0;
}

int stitch_feed(stitcher *s, const struct mtev_rec *r)
{
	struct sthr *t;
	if (s->err)
		return s->err;
	switch (r->kind) {
	case MTEV_BRANCH:
	case MTEV_SAMPLE:
		s->detail = r->kind;
		return s->err = -STITCH_EKIND;
	case MTEV_SEGMENT:
		if (!(t = get_thr(s, r->segment.tid)) ||
		    new_seg(t, r->segment.index, r->segment.begin, r->segment.end, r->segment.reason))
			return s->err = -STITCH_ENOMEM;
		s->st.segments++;
		return 0;
	case MTEV_SPAN:
		if (!(t = get_thr(s, r->span.tid)))
			return s->err = -STITCH_ENOMEM;
		return add_span(s, t, r);
	case MTEV_WAYPOINT:
		if (!(t = get_thr(s, r->waypoint.tid)))
			return s->err = -STITCH_ENOMEM;
		return add_wp(s, t, r);
	case MTEV_GAP:
		if (!(t = get_thr(s, r->gap.tid)))
			return s->err = -STITCH_ENOMEM;
		return add_gap(s, t, r);
	default:
		return emit(s, r);
	}
}

/* ---- the join pass ---- */

static size_t canon(const struct sspan *sp, size_t i)
{
	while (sp[i].alias >= 0)
		i = (size_t)sp[i].alias;
	return i;
}

static int same_frame(const stitcher *s, const struct sspan *a, const struct sspan *b)
{
	if (a->func != b->func)
		return 0;
	if (!a->func && (a->namelen != b->namelen ||
			 memcmp(s->pool + a->name, s->pool + b->name, a->namelen)))
		return 0;
	return !a->callsite || !b->callsite || a->callsite == b->callsite;
}

/* stack of segment @g at its start (flag) or end, by depth: indices or -1 */
static size_t stack_of(const struct sthr *t, const struct sseg *g, uint32_t flag, long *out,
		       size_t max)
{
	size_t n = 0;
	for (size_t i = g->sp0; i < g->sp0 + g->nsp; i++) {
		const struct sspan *x = &t->sp[i];
		if (!(x->flags & flag) || (x->flags & SPF_GAP) || x->level < 0 || (size_t)x->level >= max)
			continue;
		while (n <= (size_t)x->level)
			out[n++] = -1;
		out[x->level] = (long)i;
	}
	/* keep the chain from the root */
	for (size_t d = 0; d < n; d++)
		if (out[d] < 0)
			return d;
	return n;
}

static int gap_span(stitcher *s, struct sthr *t, const struct sgap *g, int32_t level, uint32_t seg)
{
	char buf[512];
	int n;
	uint32_t flags = MTEV_SPAN_ERROR;
	switch (g->reason) {
	case MTEV_GAP_DECODE_ERROR:
	case MTEV_GAP_NO_IMAGE:
		if (g->msglen)
			n = snprintf(buf, sizeof buf, "[decode error: %.*s]", (int)g->msglen,
				     s->pool + g->msg);
		else if (g->reason == MTEV_GAP_NO_IMAGE)
			n = snprintf(buf, sizeof buf, "[decode error: no memory image]");
		else
			n = snprintf(buf, sizeof buf, "[decode error: code %d]", (int)g->code);
		break;
	case MTEV_GAP_UNTRACED:
		n = snprintf(buf, sizeof buf, "[untraced]");
		flags = MTEV_SPAN_UNTRACED;
		break;
	default:
		n = snprintf(buf, sizeof buf, "[lost trace]");
		break;
	}
	if (n < 0 || (size_t)n >= sizeof buf)
		n = (int)strlen(buf);
	if (mt_grow((void **)&t->sp, &t->capsp, t->nsp + 1, sizeof *t->sp))
		return s->err = -STITCH_ENOMEM;
	struct sspan *x = &t->sp[t->nsp];
	memset(x, 0, sizeof *x);
	x->begin = g->begin;
	x->end = g->end;
	x->level = level;
	x->flags = flags | SPF_GAP;
	x->seg = seg;
	x->alias = -1;
	x->seq = (uint32_t)t->nsp;
	x->namelen = (uint32_t)n;
	if (pool_add(s, buf, (size_t)n, &x->name))
		return s->err = -STITCH_ENOMEM;
	t->nsp++;
	s->st.gap_spans++;
	return 0;
}

#define MAXD 4096

/* The group's stack at the end of the segments joined so far, by level from
 * its bottom: the last segment's end stack, over the frames of earlier
 * segments that continued beneath its root (the spine). */
static int join_thread(stitcher *s, struct sthr *t)
{
	long *g = malloc(3 * MAXD * sizeof *g), *st = g + MAXD, *en = g + 2 * MAXD;
	if (!g)
		return s->err = -STITCH_ENOMEM;
	size_t gn = 0;
	int32_t gbot = 0;
	uint32_t group = 0;
	uint64_t gstart = t->nseg ? t->seg[0].begin : 0;
	size_t gi = 0;
	/* gaps before the first segment */
	for (; gi < t->ngap && t->gap[gi].before == 0; gi++)
		if (gap_span(s, t, &t->gap[gi], 0, 0))
			goto fail;
	for (size_t i = 0; i < t->nseg; i++) {
		struct sseg *b = &t->seg[i];
		size_t m = stack_of(t, b, MTEV_SPAN_OPEN_AT_END, en, MAXD);
		int32_t gaplevel = 0;
		if (i == 0) {
			b->L = 0;
			b->group = 0;
			for (gn = 0; gn < m; gn++)
				g[gn] = en[gn];
			gbot = 0;
			continue;
		}
		size_t n = stack_of(t, b, MTEV_SPAN_INFERRED_START, st, MAXD);
		long best_s = 0;
		size_t best = 0;
		for (long sh = -(long)n + 1; sh < (long)gn; sh++) {
			size_t j0 = sh < 0 ? (size_t)-sh : 0, l = 0;
			while (j0 + l < n && (long)(j0 + l) + sh < (long)gn &&
			       same_frame(s, &t->sp[canon(t->sp, (size_t)g[(long)(j0 + l) + sh])],
					  &t->sp[st[j0 + l]]))
				l++;
			if (l && l >= best) {
				best = l;
				best_s = sh;
			}
		}
		s->st.joins++;
		if (best) {
			size_t j0 = best_s < 0 ? (size_t)-best_s : 0;
			s->st.aligned++;
			b->L = gbot + (int32_t)best_s;
			b->group = group;
			for (size_t j = j0; j < j0 + best; j++) {
				size_t c = canon(t->sp, (size_t)g[(long)j + best_s]);
				struct sspan *x = &t->sp[st[j]], *y = &t->sp[c];
				x->alias = (int32_t)c;
				y->end = x->end;
				y->flags = (y->flags & ~(uint32_t)MTEV_SPAN_OPEN_AT_END) |
					   (x->flags & MTEV_SPAN_OPEN_AT_END) | MTEV_SPAN_STITCHED;
				s->st.continued++;
			}
			/* roots only B saw: live during the whole group */
			for (size_t j = 0; j < j0; j++) {
				struct sspan *x = &t->sp[st[j]];
				x->begin = gstart;
				x->flags |= MTEV_SPAN_STITCHED;
				s->st.revealed++;
			}
			/* frames beneath B's root that B never saw: live through B */
			for (long j = 0; j < best_s; j++) {
				struct sspan *y = &t->sp[canon(t->sp, (size_t)g[j])];
				y->end = b->end;
				y->flags |= MTEV_SPAN_STITCHED | MTEV_SPAN_OPEN_AT_END;
				s->st.continued++;
			}
			gaplevel = b->L + (int32_t)(j0 + best);
			/* the group's new end stack */
			size_t keep = best_s > 0 ? (size_t)best_s : 0;
			if (keep + m > MAXD)
				m = MAXD - keep;
			for (size_t j = 0; j < m; j++)
				g[keep + j] = (long)canon(t->sp, (size_t)en[j]);
			gn = keep + m;
			if (best_s < 0)
				gbot = b->L;
		} else {
			s->st.unaligned++;
			b->group = ++group;
			b->L = 0;
			gstart = b->begin;
			for (gn = 0; gn < m; gn++)
				g[gn] = en[gn];
			gbot = 0;
		}
		for (; gi < t->ngap && t->gap[gi].before == i; gi++)
			if (gap_span(s, t, &t->gap[gi], gaplevel, (uint32_t)i))
				goto fail;
	}
	/* gaps after the last segment: at its root's level */
	for (; gi < t->ngap; gi++)
		if (gap_span(s, t, &t->gap[gi], t->nseg ? t->seg[t->nseg - 1].L : 0,
			     t->nseg ? (uint32_t)t->nseg - 1 : 0))
			goto fail;
	free(g);
	return 0;
fail:
	free(g);
	return s->err;
}

static struct sspan *sort_base;

static int out_cmp(const void *x, const void *y)
{
	const struct sspan *a = &sort_base[*(const uint32_t *)x], *b = &sort_base[*(const uint32_t *)y];
	if (a->begin != b->begin)
		return a->begin < b->begin ? -1 : 1;
	if (a->level != b->level)
		return a->level < b->level ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int emit_thread(stitcher *s, struct sthr *t)
{
	struct mtev_rec r;
	/* group minimum levels */
	uint32_t ngroups = t->nseg ? t->seg[t->nseg - 1].group + 1 : 1;
	int32_t *gmin = calloc(ngroups, sizeof *gmin);
	uint32_t *ord = malloc((t->nsp + 1) * sizeof *ord);
	if (!gmin || !ord) {
		free(gmin);
		free(ord);
		return s->err = -STITCH_ENOMEM;
	}
	for (uint32_t g = 0; g < ngroups; g++)
		gmin[g] = INT32_MAX;
	for (size_t i = 0; i < t->nseg; i++)
		if (t->seg[i].L < gmin[t->seg[i].group])
			gmin[t->seg[i].group] = t->seg[i].L;
	for (size_t i = 0; i < t->nsp; i++) {
		struct sspan *x = &t->sp[i];
		uint32_t g = t->nseg ? t->seg[x->seg].group : 0;
		int32_t lvl = x->flags & SPF_GAP ? x->level : t->nseg ? t->seg[x->seg].L + x->level : x->level;
		if (lvl < gmin[g])
			gmin[g] = lvl;
	}
	size_t n = 0;
	for (size_t i = 0; i < t->nsp; i++) {
		struct sspan *x = &t->sp[i];
		uint32_t g = t->nseg ? t->seg[x->seg].group : 0;
		int32_t lvl = x->flags & SPF_GAP ? x->level : t->nseg ? t->seg[x->seg].L + x->level : x->level;
		x->level = lvl - gmin[g];
		if (x->alias < 0)
			ord[n++] = (uint32_t)i;
	}
	sort_base = t->sp;
	qsort(ord, n, sizeof *ord, out_cmp);

	/* segment and gap records first, in their order */
	size_t gi = 0;
	for (size_t i = 0; i <= t->nseg; i++) {
		for (; gi < t->ngap && t->gap[gi].before == i; gi++) {
			const struct sgap *g = &t->gap[gi];
			memset(&r, 0, sizeof r);
			r.kind = MTEV_GAP;
			r.gap.tid = t->tid;
			r.gap.begin = g->begin;
			r.gap.end = g->end;
			r.gap.reason = g->reason;
			r.gap.code = g->code;
			r.gap.offset = g->offset;
			r.gap.ip = g->ip;
			r.gap.message.p = s->pool + g->msg;
			r.gap.message.len = g->msglen;
			if (emit(s, &r))
				goto fail;
		}
		if (i == t->nseg)
			break;
		memset(&r, 0, sizeof r);
		r.kind = MTEV_SEGMENT;
		r.segment.tid = t->tid;
		r.segment.index = t->seg[i].index;
		r.segment.begin = t->seg[i].begin;
		r.segment.end = t->seg[i].end;
		r.segment.reason = t->seg[i].reason;
		if (emit(s, &r))
			goto fail;
	}
	/* spans, with the waypoints merged in by time */
	size_t si = 0, k = 0;
	const uint8_t *p = NULL, *pe = NULL;
	uint64_t wt = 0, wa = 0;
	int32_t wd = 0;
	int have = 0;
	for (;;) {
		/* next waypoint */
		while (!have && si < t->nseg) {
			struct sseg *g = &t->seg[si];
			if (!p) {
				p = t->wp + g->wp0;
				pe = t->wp + g->wp1;
				wt = g->wt0;
				wa = g->wa0;
				wd = g->wd0;
			}
			if (p < pe) {
				wt += (uint64_t)vlog_unzz(vlog_get(&p));
				wa += (uint64_t)vlog_unzz(vlog_get(&p));
				wd += (int32_t)vlog_unzz(vlog_get(&p));
				have = 1;
			} else {
				si++;
				p = NULL;
			}
		}
		if (!have && k >= n)
			break;
		if (have && (k >= n || wt < t->sp[ord[k]].begin)) {
			memset(&r, 0, sizeof r);
			r.kind = MTEV_WAYPOINT;
			r.waypoint.tid = t->tid;
			r.waypoint.time = wt;
			r.waypoint.addr = wa;
			int32_t d = t->seg[si].L + wd - gmin[t->seg[si].group];
			r.waypoint.depth = (uint32_t)(d < 0 ? 0 : d);
			if (emit(s, &r))
				goto fail;
			have = 0;
			continue;
		}
		const struct sspan *x = &t->sp[ord[k++]];
		memset(&r, 0, sizeof r);
		r.kind = MTEV_SPAN;
		r.span.tid = t->tid;
		r.span.depth = (uint32_t)x->level;
		r.span.begin = x->begin;
		r.span.end = x->end;
		r.span.func = x->func;
		r.span.callsite = x->callsite;
		r.span.flags = x->flags & ~SPF_GAP;
		r.span.name.p = s->pool + x->name;
		r.span.name.len = x->namelen;
		if (emit(s, &r))
			goto fail;
	}
	free(gmin);
	free(ord);
	return 0;
fail:
	free(gmin);
	free(ord);
	return s->err;
}

int stitch_finish(stitcher *s)
{
	if (s->err)
		return s->err;
	for (size_t i = 0; i < s->nthr; i++)
		if (join_thread(s, s->thr[i]) || emit_thread(s, s->thr[i]))
			return s->err;
	return 0;
}
