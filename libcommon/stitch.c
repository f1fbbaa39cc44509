#include "stitch.h"
#include "fnmap.h"
#include "vec.h"

#include "compiler.h"
#include "sysenv.h"
#include "wplog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXD 4096 /* deepest stack level joined */

/* A held span's flag while it is in the stitcher: its depth is a lower
 * bound that mt-stitch set (a segment placed under a surviving root, or
 * joined to such a frame).  Written as MTEV_SPAN_MIN_DEPTH; unlike
 * mt-segment's min-depth frames, such a frame joins others (the depths in
 * its group are exact relative to each other). */
#define LOWB (1u << 31)
/* internal: an earlier frame that was not continued across a gap (decide):
 * it ended there; a later join aligns with it but does not continue it */
#define ENDED (1u << 30)

/* A span held in memory: one whose record can still change (on a group's
 * end stack: its end and flags wait for the next join), or whose place in
 * the output is not where it arrived (a root revealed by a later segment
 * begins where the group begins).  Levels are group levels (the first
 * segment's depth 0 is level 0; revealed roots are below it). */
struct hspan {
	uint64_t begin, end, func, callsite;
	int32_t level;
	uint32_t flags, seq;
	uint32_t name, namelen; /* in the thread's pool (P spans: in ppool) */
};

/* A segment or gap record, kept for the group's output. */
struct meta {
	struct mtev_rec r; /* message: malloc'd copy in .gap.message */
	int has_msg;
	uint32_t seq; /* a gap's: its span's place in the input order */
};

/* Log words: a waypoint in libcommon/wplog.h's encoding (1, 2 or 6 words,
 * first word's low bits x0, 101 or 001), or a span: a word with low bits 11
 * (namelen << 2 | 3), then begin, end, func, callsite (two words each, low first),
 * level, flags, seq, then the name in ceil(namelen / 4) words. */
enum { SPAN_WORDS = 12 };

struct sthr {
	uint32_t tid;
	uint32_t nseg;	    /* segment records seen (or the implicit one) */
	int inseg;	    /* a segment is current */
	int pending;	    /* collecting the current segment's start stack */
	int implicit;	    /* the current segment had no segment record */
	int grouped;	    /* a group is open */
	uint64_t seg_begin, seg_end;
	int32_t L;	    /* group level of the current segment's depth 0 */
	int lowb;	    /* the current segment's depths are lower bounds (LOWB) */
	size_t keep;	    /* frames of the group's end stack beneath it */
	uint32_t seq;

	/* the current segment's start stack candidates */
	struct hspan *p;
	size_t np, capp;
	char *ppool;
	size_t nppool, capppool;

	/* the group */
	uint64_t gstart;
	int32_t gbot, gmin;
	struct hspan *h;
	size_t nh, caph;
	int32_t *g; /* end stack of the segments joined so far: h indices */
	size_t gn, capg;
	int32_t *en; /* the current segment's open-at-end spans by depth */
	size_t nen, capen;
	char *pool;
	size_t npool, cappool;
	struct wplog log; /* waypoints and final spans, in arrival order */
	int fd;		  /* spill file, or -1 */
	uint64_t spilled; /* words in it */

	/* the group's completed activations: (group level, function) of every
	 * span that ended before its segment did, with the latest begin among
	 * them, an open-addressing table (done_add, done_since): a frame whose
	 * caller was seen calling its function before (it returned and may be
	 * called again) is not joined across a gap (decide) */
	struct done {
		uint64_t key, begin;
	} *done;
	size_t ndone, capdone;

	/* the current segment's facing frames joined across a gap, outermost
	 * first, until a later span of the segment shows one was a loop's
	 * callee (undo_join) */
	struct rjoin {
		size_t c;	    /* the joined span, in h */
		long parent;	    /* the frame beneath it, in h (-1: none) */
		uint64_t a_end;	    /* the earlier part's end and flags */
		uint32_t a_flags;
		uint64_t b_begin;   /* the later part's begin, flags, place */
		uint32_t b_flags, b_seq;
	} *rj;
	size_t nrj, caprj;
	size_t gap_h0, gap_h1; /* the gap spans of the last join, in h */

	struct meta *meta;
	size_t nmeta, capmeta;
	size_t seg_meta; /* first meta entry of the current segment (its gaps) */
	size_t ngaps_q;	 /* gaps queued since the current segment's record */
};

struct stitcher {
	stitch_emit_fn emit;
	void *ctx;
	struct sthr **thr;
	size_t nthr, capthr;
	struct sthr *last;
	struct sthr *wpt; /* a thread in a decided segment: its waypoints go straight to the log */
	size_t limit_words; /* per thread log in memory before spilling */
	uint32_t *rbuf;	    /* reading the spill back */
	size_t caprbuf;
	struct stitch_stats st;
	struct fnmap *fns;
	unsigned detail;
	int err;
};

void stitch_stats_text(const struct stitch_stats *st, const char *prefix, char *buf, size_t len)
{
	const char *p = prefix;
	snprintf(buf, len,
		 "%ssegments=%llu %sjoins=%llu %saligned=%llu %sunaligned=%llu %scontinued=%llu "
		 "%srevealed=%llu %sgap_spans=%llu %slower_bound=%llu %ssplit=%llu %sresumed=%llu "
		 "%scalled_under=%llu %sambiguous=%llu %shandoff=%llu",
		 p, (unsigned long long)st->segments, p, (unsigned long long)st->joins, p,
		 (unsigned long long)st->aligned, p, (unsigned long long)st->unaligned, p,
		 (unsigned long long)st->continued, p, (unsigned long long)st->revealed, p,
		 (unsigned long long)st->gap_spans, p, (unsigned long long)st->lower_bound, p,
		 (unsigned long long)st->split, p, (unsigned long long)st->resumed, p,
		 (unsigned long long)st->called_under, p, (unsigned long long)st->ambiguous, p,
		 (unsigned long long)st->handoff);
}

int stitch_unaligned_text(const struct stitch_stats *st, char *buf, size_t len)
{
	if (!st->unaligned)
		return 0;
	snprintf(buf, len,
		 "%llu of %llu join(s) found no common frame: the later segment keeps its own "
		 "depths",
		 (unsigned long long)st->unaligned, (unsigned long long)st->joins);
	return 1;
}

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
	case STITCH_ESPILL:
		return "temporary file failed";
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
		s->limit_words = STITCH_MEM_DEFAULT / 4;
	}
	return s;
}

void stitch_set_mem_limit(stitcher *s, size_t bytes)
{
	s->limit_words = bytes / 4 < 64 ? 64 : bytes / 4;
}

void stitch_set_fnmap(stitcher *s, struct fnmap *fns)
{
	s->fns = fns;
}

static void meta_free(struct sthr *t, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (t->meta[i].has_msg)
			free((void *)t->meta[i].r.gap.message.p);
}

void stitch_free(stitcher *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nthr; i++) {
		struct sthr *t = s->thr[i];
		free(t->p);
		free(t->ppool);
		free(t->h);
		free(t->g);
		free(t->en);
		free(t->done);
		free(t->rj);
		free(t->pool);
		wplog_free(&t->log);
		if (t->fd >= 0)
			close(t->fd);
		meta_free(t, 0, t->nmeta);
		free(t->meta);
		free(t);
	}
	free(s->thr);
	free(s->rbuf);
	free(s);
}

static __attribute__((noinline)) struct sthr *get_thr_slow(stitcher *s, uint32_t tid)
{
	for (size_t i = s->nthr; i-- > 0;)
		if (s->thr[i]->tid == tid)
			return s->last = s->thr[i];
	if (mt_grow((void **)&s->thr, &s->capthr, s->nthr + 1, sizeof *s->thr))
		return NULL;
	struct sthr *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->tid = tid;
	t->fd = -1;
	s->thr[s->nthr++] = t;
	return s->last = t;
}

static inline struct sthr *get_thr(stitcher *s, uint32_t tid)
{
	if (__builtin_expect(s->last && s->last->tid == tid, 1))
		return s->last;
	return get_thr_slow(s, tid);
}

static int emit(stitcher *s, const struct mtev_rec *r)
{
	if (s->emit(s->ctx, r))
		return s->err = -STITCH_EEMIT;
	return 0;
}

static int pool_add(char **pool, size_t *n, size_t *cap, const char *p, size_t len, uint32_t *off)
{
	if (mt_grow((void **)pool, cap, *n + len + 1, 1))
		return -1;
	if (len)
		memcpy(*pool + *n, p, len);
	*off = (uint32_t)*n;
	*n += len;
	return 0;
}

/* ---- the log: waypoints and final spans, spilled past the limit ---- */

static int spill(stitcher *s, struct sthr *t)
{
	if (t->fd < 0) {
		char path[4096];
		snprintf(path, sizeof path, "%s/mt-stitch.XXXXXX", mt_tmp_dir());
		t->fd = mkstemp(path);
		if (t->fd < 0)
			return s->err = -STITCH_ESPILL;
		unlink(path);
	}
	const char *p = (const char *)t->log.v;
	size_t n = t->log.n * sizeof *t->log.v;
	while (n) {
		ssize_t w = write(t->fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return s->err = -STITCH_ESPILL;
		p += w;
		n -= (size_t)w;
	}
	t->spilled += t->log.n;
	t->log.n = 0;
	return 0;
}

static int log_wp(stitcher *s, struct sthr *t, uint64_t time, uint64_t addr, int32_t level)
{
	if (wplog_put(&t->log, time, addr, level))
		return s->err = -STITCH_ENOMEM;
	if (t->log.n >= s->limit_words)
		return spill(s, t);
	return 0;
}

static int log_span(stitcher *s, struct sthr *t, const struct hspan *x, const char *name)
{
	struct wplog *l = &t->log;
	size_t nw = SPAN_WORDS + (x->namelen + 3) / 4;
	if (mt_grow((void **)&l->v, &l->cap, l->n + nw, sizeof *l->v))
		return s->err = -STITCH_ENOMEM;
	uint32_t *p = l->v + l->n;
	p[0] = x->namelen << 2 | 3;
	p[1] = (uint32_t)x->begin;
	p[2] = (uint32_t)(x->begin >> 32);
	p[3] = (uint32_t)x->end;
	p[4] = (uint32_t)(x->end >> 32);
	p[5] = (uint32_t)x->func;
	p[6] = (uint32_t)(x->func >> 32);
	p[7] = (uint32_t)x->callsite;
	p[8] = (uint32_t)(x->callsite >> 32);
	p[9] = (uint32_t)x->level;
	p[10] = x->flags;
	p[11] = x->seq;
	if (x->namelen) {
		p[nw - 1] = 0;
		memcpy(p + SPAN_WORDS, name, x->namelen);
	}
	l->n += nw;
	if (x->level < t->gmin)
		t->gmin = x->level;
	if (l->n >= s->limit_words)
		return spill(s, t);
	return 0;
}

/* A span whose record is final: to the log; else held. */
static int add_span(stitcher *s, struct sthr *t, struct hspan *x, const char *name, int held)
{
	if (!held)
		return log_span(s, t, x, name);
	if (mt_grow((void **)&t->h, &t->caph, t->nh + 1, sizeof *t->h))
		return s->err = -STITCH_ENOMEM;
	struct hspan *y = &t->h[t->nh];
	*y = *x;
	if (pool_add(&t->pool, &t->npool, &t->cappool, name, x->namelen, &y->name))
		return s->err = -STITCH_ENOMEM;
	if (x->level < t->gmin)
		t->gmin = x->level;
	t->nh++;
	return 0;
}

static uint64_t done_key(int32_t level, uint64_t func)
{
	uint64_t k = (func ^ (uint64_t)(uint32_t)level * 0x9e3779b97f4a7c15ull) | 1;
	return k;
}

static size_t done_slot(const struct sthr *t, uint64_t k)
{
	size_t i = (size_t)((k * 0xff51afd7ed558ccdull) >> 17) & (t->capdone - 1);
	while (t->done[i].key && t->done[i].key != k)
		i = (i + 1) & (t->capdone - 1);
	return i;
}

/* Has the group a completed activation of @func at @level that began at
 * @since or later? */
static int done_since(const struct sthr *t, int32_t level, uint64_t func, uint64_t since)
{
	if (!t->capdone || !func)
		return 0;
	const struct done *d = &t->done[done_slot(t, done_key(level, func))];
	return d->key && d->begin >= since;
}

/* done_add's table, twice the size (or its first). */
static __attribute__((noinline)) int done_grow(stitcher *s, struct sthr *t)
{
	size_t nc = t->capdone ? 2 * t->capdone : 256;
	struct done *o = t->done, *n = calloc(nc, sizeof *n);
	if (!n)
		return s->err = -STITCH_ENOMEM;
	size_t oc = t->capdone;
	t->done = n;
	t->capdone = nc;
	for (size_t i = 0; i < oc; i++)
		if (o[i].key)
			t->done[done_slot(t, o[i].key)] = o[i];
	free(o);
	return 0;
}

/* Notes a completed activation (span @x, its level the group's). */
static inline __attribute__((always_inline)) int done_add(stitcher *s, struct sthr *t,
							   const struct hspan *x)
{
	if (!x->func || (x->flags & MTEV_SPAN_OPEN_AT_END))
		return 0;
	uint64_t k = done_key(x->level, x->func);
	if (2 * (t->ndone + 1) > t->capdone && done_grow(s, t))
		return s->err;
	struct done *d = &t->done[done_slot(t, k)];
	if (!d->key) {
		t->ndone++;
		*d = (struct done){k, x->begin};
	} else if (x->begin > d->begin) {
		d->begin = x->begin;
	}
	return 0;
}

/* Records @hi as the current segment's open-at-end span at @depth. */
static int set_end(stitcher *s, struct sthr *t, uint32_t depth, size_t hi)
{
	if (depth >= MAXD)
		return 0;
	if (depth >= t->nen) {
		if (mt_grow((void **)&t->en, &t->capen, depth + 1, sizeof *t->en))
			return s->err = -STITCH_ENOMEM;
		while (t->nen <= depth)
			t->en[t->nen++] = -1;
	}
	t->en[depth] = (int32_t)hi;
	return 0;
}

/* Undoes the join t->rj[@i] and every one above it: the earlier part
 * ends at the gap again (open-at-end, continued by no later join), the
 * later part is a span of its own from the segment's begin (inferred-start),
 * and the gap span moves down to the lowest level undone. */
static int undo_join(stitcher *s, struct sthr *t, size_t i)
{
	int32_t low = t->h[t->rj[i].c].level;
	for (size_t k = i; k < t->nrj; k++) {
		const struct rjoin *r = &t->rj[k];
		struct hspan *y = &t->h[r->c];
		struct hspan b = *y;
		/* its name, copied: add_span may move the pool it lies in */
		char *name = y->namelen ? malloc(y->namelen) : NULL;
		if (y->namelen && !name)
			return s->err = -STITCH_ENOMEM;
		if (name)
			memcpy(name, t->pool + y->name, y->namelen);
		b.begin = r->b_begin;
		b.callsite = 0;
		b.flags = (r->b_flags & ~(uint32_t)MTEV_SPAN_STITCHED) | (y->flags & LOWB);
		b.seq = r->b_seq;
		y->end = r->a_end;
		y->flags = r->a_flags | ENDED;
		int held = (b.flags & MTEV_SPAN_OPEN_AT_END) != 0;
		int e = add_span(s, t, &b, name ? name : "", 1);
		free(name);
		if (e)
			return s->err;
		if (held && b.level >= t->L && set_end(s, t, (uint32_t)(b.level - t->L), t->nh - 1))
			return s->err;
		if (!held && done_add(s, t, &t->h[t->nh - 1]))
			return s->err;
		s->st.continued--;
		s->st.split++;
	}
	for (size_t g = t->gap_h0; g < t->gap_h1 && g < t->nh; g++)
		if (t->h[g].level > low)
			t->h[g].level = low;
	t->nrj = i;
	return 0;
}

/* A later span of the segment that says a facing frame joined across the
 * gap may have been two calls: its function again at its level, begun after
 * the joined frame ended, under the same activation of the frame beneath
 * (the caller loops: its first repetition may lie inside the gap, where no
 * completion before the gap showed it). */
static int later_call(stitcher *s, struct sthr *t, const struct hspan *x)
{
	for (size_t i = 0; i < t->nrj; i++) {
		const struct rjoin *r = &t->rj[i];
		const struct hspan *y = &t->h[r->c];
		if (y->level == x->level && y->func == x->func && x->begin >= y->end &&
		    (r->parent < 0 || (t->h[r->parent].begin <= y->begin && t->h[r->parent].end >= x->end)))
			return undo_join(s, t, i);
	}
	return 0;
}

/* A span of the current segment once its level offset is known. */
static int place_span(stitcher *s, struct sthr *t, struct hspan *x, uint32_t depth, const char *name)
{
	x->level = t->L + (int32_t)depth;
	if (t->nrj && later_call(s, t, x))
		return s->err;
	if (t->lowb)
		x->flags |= LOWB;
	if (done_add(s, t, x))
		return s->err;
	int held = (x->flags & MTEV_SPAN_OPEN_AT_END) != 0;
	if (add_span(s, t, x, name, held))
		return s->err;
	return held ? set_end(s, t, depth, t->nh - 1) : 0;
}

/* ---- output of a group ---- */

/* The output order (pre-order): by begin; at one begin, in input order
 * (seq: a gap's span between the spans before its record and those after
 * it; a root that a later segment revealed first), then outermost first.
 * Not by depth before input order: a frame entered at a gap's begin (a
 * zero-length span, ended there) lies under the frames that end there,
 * before the gap span that begins then at a smaller depth. */
static int cmp_h(const void *a, const void *b)
{
	const struct hspan *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return (x->level > y->level) - (x->level < y->level);
}

static int emit_span(stitcher *s, struct sthr *t, const struct hspan *x, const char *name)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_SPAN;
	r.span.tid = t->tid;
	r.span.depth = (uint32_t)(x->level - t->gmin);
	r.span.begin = x->begin;
	r.span.end = x->end;
	r.span.func = x->func;
	r.span.callsite = x->callsite;
	r.span.flags = x->flags & LOWB ? (x->flags & ~LOWB) | MTEV_SPAN_MIN_DEPTH : x->flags;
	r.span.flags &= ~ENDED;
	r.span.name.p = x->namelen ? name : NULL;
	r.span.name.len = x->namelen;
	return emit(s, &r);
}

/* Reads the log back: the spill file, then what is in memory. */
struct lrd {
	stitcher *s;
	struct sthr *t;
	const uint32_t *p, *end;
	uint64_t file_left; /* words */
	int in_mem;
};

static int lrd_fill(struct lrd *rd, size_t k)
{
	size_t have = (size_t)(rd->end - rd->p);
	stitcher *s = rd->s;
	if (!rd->file_left) {
		if (rd->in_mem || have)
			return -1;
		rd->in_mem = 1;
		rd->p = rd->end = rd->t->log.v; /* NULL for a thread that logged nothing */
		if (rd->t->log.n)
			rd->end += rd->t->log.n;
		return rd->t->log.n >= k ? 0 : -1;
	}
	size_t want = s->limit_words > k ? s->limit_words : k;
	/* The words not read yet go to the front first: growing may move the
	 * buffer, and rd->p points into it. */
	if (have)
		memmove(s->rbuf, rd->p, have * sizeof *s->rbuf);
	rd->p = rd->end = s->rbuf;
	if (mt_grow((void **)&s->rbuf, &s->caprbuf, want, sizeof *s->rbuf)) {
		s->err = -STITCH_ENOMEM;
		return -1;
	}
	size_t n = want - have;
	if (n > rd->file_left)
		n = (size_t)rd->file_left;
	char *dst = (char *)(s->rbuf + have);
	size_t bytes = n * sizeof *s->rbuf;
	while (bytes) {
		ssize_t r = read(rd->t->fd, dst, bytes);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			s->err = -STITCH_ESPILL;
			return -1;
		}
		dst += r;
		bytes -= (size_t)r;
	}
	rd->file_left -= n;
	rd->p = s->rbuf;
	rd->end = s->rbuf + have + n;
	return (size_t)(rd->end - rd->p) >= k ? 0 : -1;
}

/* Makes @k words available at rd->p; 0, or -1 at the end of the log. */
static inline int lrd_need(struct lrd *rd, size_t k)
{
	if ((size_t)(rd->end - rd->p) >= k)
		return 0;
	return lrd_fill(rd, k);
}

/* Writes the group: its segment and gap records (the first @nmeta meta
 * entries), then its spans in pre-order with the waypoints merged in by
 * time; then clears it. */
static NO_SLP int flush_group(stitcher *s, struct sthr *t, size_t nmeta)
{
	for (size_t i = 0; i < nmeta; i++)
		if (emit(s, &t->meta[i].r))
			return s->err;
	meta_free(t, 0, nmeta);
	if (t->nmeta > nmeta)
		memmove(t->meta, t->meta + nmeta, (t->nmeta - nmeta) * sizeof *t->meta);
	t->nmeta -= nmeta;
	t->seg_meta -= nmeta < t->seg_meta ? nmeta : t->seg_meta;
	if (!t->grouped)
		return 0;

	if (t->nh > 1)
		qsort(t->h, t->nh, sizeof *t->h, cmp_h);
	size_t k = 0;
	struct lrd rd = {s, t, NULL, NULL, 0, 0};
	if (t->fd >= 0 && t->log.n && spill(s, t))
		return s->err;
	if (t->fd >= 0) {
		if (lseek(t->fd, 0, SEEK_SET) < 0)
			return s->err = -STITCH_ESPILL;
		rd.file_left = t->spilled;
	}
	struct mtev_rec w;
	memset(&w, 0, sizeof w);
	w.kind = MTEV_WAYPOINT;
	w.waypoint.tid = t->tid;
	/* the waypoint state (it runs across the spans in the log) and the
	 * next held span, in locals */
	uint64_t time = 0, addr = 0;
	int32_t level = 0, gmin = t->gmin;
	const struct hspan *h = t->h;
	size_t nh = t->nh;
	uint64_t hb = nh ? h[0].begin : UINT64_MAX;
	for (;;) {
		if (rd.p == rd.end && lrd_need(&rd, 1)) {
			if (s->err)
				return s->err;
			break;
		}
		uint32_t x = *rd.p;
		if (__builtin_expect(!(x & 1), 1)) {
			rd.p++;
			level += (int32_t)((x >> 1) & 3) - 1;
			time += (x >> 3) & 1023;
			addr += (uint64_t)(int64_t)((int32_t)x >> 13);
		} else if ((x & 3) == 3) {
			struct hspan y;
			uint32_t namelen = x >> 2;
			size_t nw = SPAN_WORDS + (namelen + 3) / 4;
			if (lrd_need(&rd, nw))
				return s->err ? s->err : (s->err = -STITCH_ESPILL);
			const uint32_t *p = rd.p;
			y.begin = (uint64_t)p[1] | (uint64_t)p[2] << 32;
			y.end = (uint64_t)p[3] | (uint64_t)p[4] << 32;
			y.func = (uint64_t)p[5] | (uint64_t)p[6] << 32;
			y.callsite = (uint64_t)p[7] | (uint64_t)p[8] << 32;
			y.level = (int32_t)p[9];
			y.flags = p[10];
			y.seq = p[11];
			y.namelen = namelen;
			rd.p += nw;
			while (k < nh && cmp_h(&h[k], &y) < 0) {
				if (emit_span(s, t, &h[k], t->pool + h[k].name))
					return s->err;
				k++;
			}
			hb = k < nh ? h[k].begin : UINT64_MAX;
			if (emit_span(s, t, &y, (const char *)(p + SPAN_WORDS)))
				return s->err;
			continue;
		} else {
			if (lrd_need(&rd, x & 4 ? 2 : 6))
				return s->err ? s->err : (s->err = -STITCH_ESPILL);
			struct wpcur wc = {rd.p, rd.end, time, addr, level};
			wpcur_next(&wc);
			rd.p = wc.p;
			time = wc.time;
			addr = wc.addr;
			level = wc.level;
		}
		if (__builtin_expect(hb <= time, 0)) {
			while (k < nh && h[k].begin <= time) {
				if (emit_span(s, t, &h[k], t->pool + h[k].name))
					return s->err;
				k++;
			}
			hb = k < nh ? h[k].begin : UINT64_MAX;
		}
		int32_t d = level - gmin;
		w.waypoint.time = time;
		w.waypoint.addr = addr;
		w.waypoint.depth = (uint32_t)(d < 0 ? 0 : d);
		if (s->emit(s->ctx, &w))
			return s->err = -STITCH_EEMIT;
	}
	for (; k < t->nh; k++)
		if (emit_span(s, t, &t->h[k], t->pool + t->h[k].name))
			return s->err;

	/* a new group: empty */
	t->nh = t->gn = t->npool = 0;
	t->nen = 0;
	wplog_clear(&t->log);
	if (t->fd >= 0) {
		if (ftruncate(t->fd, 0) || lseek(t->fd, 0, SEEK_SET) < 0)
			return s->err = -STITCH_ESPILL;
		t->spilled = 0;
	}
	t->grouped = 0;
	return 0;
}

/* ---- joins ---- */

static int same_frame(const struct sthr *t, const struct hspan *a, const struct hspan *b)
{
	/* a frame whose depth is a lower bound (an unwind with unseen frames
	 * below it) is joined with no other: its place is unknown */
	if (a->func != b->func || ((a->flags | b->flags) & MTEV_SPAN_MIN_DEPTH))
		return 0;
	if (!a->func && (a->namelen != b->namelen ||
			 memcmp(t->pool + a->name, t->ppool + b->name, a->namelen)))
		return 0;
	return !a->callsite || !b->callsite || a->callsite == b->callsite;
}

/* May the earlier frame g[@k] continue into the current segment (after @nq
 * gaps)?  Not when it ended at an earlier gap.  Across a gap, only without
 * evidence that it may have returned and been called again inside the gap:
 * not when the group saw its function complete at its level under its
 * caller's current activation (done_since: a loop's callee; an activation
 * that completed under an earlier activation of the caller says that the
 * caller's caller loops, not the caller; the outermost frame has no caller
 * in the group: any), nor when its function is also an outer frame's (a
 * recursion, whose inner call may return and recur), nor when it is the
 * outermost frame of a recursion (its function also an inner frame's) and
 * the code of its caller calls its function from another call site too (a
 * direct call: fnmap_call_sites; with the call site unknown, from two): the
 * recursion may have ended and begun again from there. */
static int joinable(stitcher *s, const struct sthr *t, long k, size_t nq)
{
	const struct hspan *y = &t->h[t->g[k]];
	if (y->flags & ENDED)
		return 0;
	if (!nq)
		return 1;
	if (done_since(t, y->level, y->func, k ? t->h[t->g[k - 1]].begin : 0))
		return 0;
	if (!y->func)
		return 1;
	for (long i = 0; i < k; i++)
		if (t->h[t->g[i]].func == y->func)
			return 0;
	if (!s->fns || k == 0)
		return 1;
	long i = k + 1;
	while (i < (long)t->gn && t->h[t->g[i]].func != y->func)
		i++;
	if (i == (long)t->gn)
		return 1;
	const struct hspan *p = &t->h[t->g[k - 1]];
	if (y->callsite)
		return fnmap_call_sites(s->fns, t->tid, y->callsite, y->func, y->callsite, 1) == 0;
	return !p->func || fnmap_call_sites(s->fns, t->tid, p->func, y->func, 0, 2) < 2;
}

/* Gap spans for the queued gap records (the last @n meta entries before
 * the current segment's record, or the last @n entries) at @level. */
static int gap_spans(stitcher *s, struct sthr *t, size_t from, size_t n, int32_t level)
{
	for (size_t i = from; i < from + n; i++) {
		const struct mtev_rec *g = &t->meta[i].r;
		if (g->kind != MTEV_GAP)
			continue;
		char buf[512];
		int len;
		uint32_t flags = MTEV_SPAN_ERROR;
		switch (g->gap.reason) {
		case MTEV_GAP_DECODE_ERROR:
		case MTEV_GAP_NO_IMAGE:
			if (g->gap.message.len)
				len = snprintf(buf, sizeof buf, "[decode error: %.*s]",
					       (int)g->gap.message.len, g->gap.message.p);
			else if (g->gap.reason == MTEV_GAP_NO_IMAGE)
				len = snprintf(buf, sizeof buf, "[decode error: no memory image]");
			else
				len = snprintf(buf, sizeof buf, "[decode error: code %d]", (int)g->gap.code);
			break;
		case MTEV_GAP_UNTRACED:
			len = snprintf(buf, sizeof buf, "[untraced]");
			flags = MTEV_SPAN_UNTRACED;
			break;
		default:
			len = snprintf(buf, sizeof buf, "[lost trace]");
			break;
		}
		if (len < 0 || (size_t)len >= sizeof buf)
			len = (int)strlen(buf);
		struct hspan x = {g->gap.begin, g->gap.end, 0, 0, level, flags,
				  t->meta[i].seq, 0, (uint32_t)len};
		s->st.gap_spans++;
		/* held, so that it is written where the span order puts it
		 * (before the waypoints of its begin time) */
		if (add_span(s, t, &x, buf, 1))
			return s->err;
	}
	return 0;
}

/* A join across a gap that found no common frame: where the later
 * segment's start stack @st (@n frames) goes.  1: under the earlier
 * segment's root, which survived the gap (the thread's root: ld.so's or a
 * thread's entry, live as long as the thread).  But when a frame of the
 * later stack calls the earlier root's function (its code has a direct call
 * to it) and the root's function does not call the later root's, the root
 * returned to that frame inside the gap (a trace that began below main:
 * perl_run returned to main, which went on to perl_destruct): -(j + 1) for
 * the deepest such frame j, the earlier root one level under it. */
static long returned_root(stitcher *s, struct sthr *t, const long *st, size_t n)
{
	const struct hspan *a = &t->h[t->g[0]];
	if (!s->fns || !a->func || (t->p[st[0]].func &&
				     fnmap_calls(s->fns, t->tid, a->func, t->p[st[0]].func)))
		return 1;
	for (size_t j = n; j-- > 0;) {
		const struct hspan *b = &t->p[st[j]];
		if (b->func && fnmap_calls(s->fns, t->tid, b->func, a->func))
			return -(long)(j + 1);
	}
	return 1;
}

/* A join across a gap that found no common frame, when the earlier root
 * survived it: the deepest frame k >= 1 of the earlier segment's end stack
 * whose code calls the later segment's root function directly (a call to
 * its entry: fnmap_calls), or -1. */
static long called_from(stitcher *s, const struct sthr *t, const long *st)
{
	uint64_t b = t->p[st[0]].func;
	if (!s->fns || !b)
		return -1;
	for (long k = (long)t->gn; k-- > 1;) {
		uint64_t a = t->h[t->g[k]].func;
		if (a && fnmap_calls(s->fns, t->tid, a, b))
			return k;
	}
	return -1;
}

/* Does a frame of the later root's function face it deeper than @best_s
 * in the group's end stack (a frame same_frame would align it with)?  Then
 * which of them the later root is, no branch says. */
static int recursive_root(const struct sthr *t, const long *st, long best_s)
{
	const struct hspan *b = &t->p[st[0]];
	if (!b->func)
		return 0;
	for (long k = best_s + 1; k < (long)t->gn; k++)
		if (same_frame(t, &t->h[t->g[k]], b))
			return 1;
	/* or a recursion through it: a function at or above best_s that
	 * recurs deeper (an interpreter's eval loop re-entered through
	 * exec: python3.11's PyRun_StringFlags at depths 1 and 9 around its
	 * eval function at 5, the sixth probe corpus' py-valerr @25 %, 8,418
	 * wrong spans) may have reached B's root's function again below it,
	 * inside the gap */
	for (long a = 0; a <= best_s && a < (long)t->gn; a++) {
		uint64_t f = t->h[t->g[a]].func;
		if (!f)
			continue;
		for (long k = best_s + 1; k < (long)t->gn; k++)
			if (t->h[t->g[k]].func == f)
				return 1;
	}
	return 0;
}

/* Does the code of a frame deeper than g[@k] in the group's end stack call
 * g[@k]'s function directly?  Then the later root's caller may be a new
 * activation of it, called inside the gap from there (python3's
 * interpreter loop, recursive through the eval function, called the
 * function that calls the later root again), at a depth no branch shows. */
static int reentered(stitcher *s, const struct sthr *t, long k)
{
	uint64_t f = t->h[t->g[k]].func;
	if (!s->fns || !f)
		return 1;
	for (long j = k + 1; j < (long)t->gn; j++) {
		uint64_t a = t->h[t->g[j]].func;
		if (a && fnmap_calls(s->fns, t->tid, a, f))
			return 1;
	}
	return 0;
}

/* The group has no segment yet: the current one starts it. */
static void group_start(struct sthr *t)
{
	t->grouped = 1;
	t->gstart = t->seg_begin;
	t->gbot = 0;
	t->gmin = INT32_MAX;
	t->gn = 0;
	t->L = 0;
	t->keep = 0;
	if (t->capdone)
		memset(t->done, 0, t->capdone * sizeof *t->done);
	t->ndone = 0;
}

/* The current segment's start stack is complete: join it to the group. */
static int decide(stitcher *s, struct sthr *t)
{
	t->nrj = 0;
	t->pending = 0;
	t->lowb = 0;
	s->wpt = t;
	size_t qfrom = t->seg_meta, nq = t->ngaps_q;
	int32_t gaplevel = 0;
	long st[MAXD];
	size_t n = 0;
	if (!t->grouped) {
		group_start(t);
	} else {
		/* the start stack: inferred-start spans by depth, chain from 0 */
		for (size_t i = 0; i < t->np; i++) {
			uint32_t d = (uint32_t)t->p[i].level;
			if (d >= MAXD)
				continue;
			while (n <= d)
				st[n++] = -1;
			st[d] = (long)i;
		}
		for (size_t d = 0; d < n; d++)
			if (st[d] < 0) {
				n = d;
				break;
			}
		long best_s = 0;
		size_t best = 0, gn = t->gn;
		for (long sh = -(long)n + 1; sh < (long)gn; sh++) {
			size_t j0 = sh < 0 ? (size_t)-sh : 0, l = 0;
			while (j0 + l < n && (long)(j0 + l) + sh < (long)gn &&
			       same_frame(t, &t->h[t->g[(long)(j0 + l) + sh]], &t->p[st[j0 + l]]))
				l++;
			/* ties: the deepest (the fewest returns inside the
			 * gap), but across a gap the shallowest: a recursion,
			 * whose deeper placements B's depths, then lower
			 * bounds, still allow (recursive_root) */
			if (l && (l > best || (l == best && !nq))) {
				best = l;
				best_s = sh;
			}
		}
		s->st.joins++;
		/* Across a gap, no common frame: the gap held returns below
		 * the later segment's root and new calls.  The earlier
		 * segment's outermost frame (the thread's root: ld.so's or a
		 * thread's entry, live as long as the thread) survives it,
		 * and the later segment goes under it, unless the code says
		 * that root returned into a frame of the later segment
		 * (returned_root; docs/exactness.md). */
		int under_root = !best && nq && gn && n;
		if (under_root)
			best_s = returned_root(s, t, st, n);
		/* No common frame, but the code of an earlier frame above the
		 * root calls B's root directly (the deepest such frame k): B's
		 * root was called from it inside the gap, after the frames
		 * above it returned there (a gap over main's return from one
		 * callee and its call of the next).  B goes under it, as if
		 * that frame faced B's caller: the frames beneath continue
		 * across the gap as the join rules allow (called_under). */
		long called_under = under_root && best_s == 1 ? called_from(s, t, st) : -1;
		if (called_under > 0) {
			under_root = 0;
			best_s = called_under + 1;
			t->lowb = (t->h[t->g[called_under]].flags & LOWB) != 0 ||
				  reentered(s, t, called_under);
			s->st.called_under++;
		}
		/* Under the surviving root, B's depths are a lower bound: calls
		 * made inside the gap whose frames B never returns through lie
		 * between (a gap from ld.so's _dl_init into main's callees:
		 * __libc_start_main).  Unless the root's code calls B's root. */
		/* The surviving root is the dynamic loader's entry, and B runs
		 * in another file: the loader's entry jumped to the program's
		 * inside the gap (its _start), which is the thread's root
		 * after it, B under it (ld.so's hand-off, the fifth probe
		 * corpus' bzip2-d @25 %: _start lost for the whole run). */
		uint64_t handoff = 0, af = under_root ? t->h[t->g[0]].func : 0;
		uint64_t bf = under_root ? t->p[st[0]].func : 0;
		if (!(under_root && best_s == 1 && s->fns && af && bf &&
		      !fnmap_same_file(s->fns, t->tid, af, bf) &&
		      fnmap_program_entry(s->fns, t->tid, af, &handoff)))
			handoff = 0;
		/* B's root is the program's entry itself (the trigger's call
		 * chain reached it): B replaces the loader's root, at its depth */
		int handoff_root = handoff && bf == handoff;
		if (handoff_root)
			best_s = 0;
		if (under_root && best_s == 1) {
			uint64_t root = handoff ? handoff : af;
			t->lowb = !s->fns || !root || !bf || !fnmap_calls(s->fns, t->tid, root, bf);
		}
		/* Across a gap, B's root facing one of several frames of its
		 * function (a recursion) at the shallowest of them: a deeper one
		 * may be B's root as well (the recursion returned some levels
		 * inside the gap and recurred: XML parsing, tree walks), so B's
		 * depths are a lower bound (recursive_root). */
		if (best && nq && best_s >= 0 && !t->lowb && recursive_root(t, st, best_s)) {
			t->lowb = 1;
			s->st.ambiguous++;
		}
		if (best || under_root || called_under > 0) {
			size_t j0 = best_s < 0 ? (size_t)-best_s : 0;
			/* joined to a frame whose depth is a lower bound: so are B's */
			for (size_t j = j0; j < j0 + best && !t->lowb; j++)
				t->lowb = (t->h[t->g[(long)j + best_s]].flags & LOWB) != 0;
			s->st.lower_bound += t->lowb != 0;
			s->st.aligned++;
			t->L = t->gbot + (int32_t)best_s;
			if (t->L < t->gmin)
				t->gmin = t->L;
			/* Across a gap, facing frames are one activation only
			 * when nothing says otherwise: a frame the group saw
			 * return at that level and be called again (a loop's
			 * callee) may have done so inside the gap, so it and the
			 * frames above it are not joined: the earlier one ends
			 * at the gap (still open-at-end), the later one begins
			 * after it (inferred-start), at the same depth. */
			long outer = 0; /* the earlier frames beneath B's root */
			/* (under a surviving root: placed there, not continued;
			 * ld.so's _start, the thread's root, ends by a tail jump
			 * to the program's entry, maybe inside the gap) */
			while (!under_root && outer < best_s && joinable(s, t, outer, nq))
				outer++;
			size_t nj = 0;
			while (outer == (best_s > 0 ? best_s : 0) && nj < best &&
			       joinable(s, t, (long)(j0 + nj) + best_s, nq))
				nj++;
			s->st.split += best - nj + (size_t)((best_s > 0 ? best_s : 0) - outer);
			t->nrj = 0;
			for (size_t j = j0; j < j0 + nj; j++) {
				size_t c = (size_t)t->g[(long)j + best_s];
				struct hspan *x = &t->p[st[j]], *y = &t->h[c];
				if (nq && y->func) {
					if (mt_grow((void **)&t->rj, &t->caprj, t->nrj + 1, sizeof *t->rj))
						return s->err = -STITCH_ENOMEM;
					long k = (long)j + best_s;
					t->rj[t->nrj++] = (struct rjoin){c, k > 0 ? (long)t->g[k - 1] : -1,
									 y->end,    y->flags,
									 x->begin,  x->flags,
									 x->seq};
				}
				y->end = x->end;
				y->flags = (y->flags & ~(uint32_t)MTEV_SPAN_OPEN_AT_END) |
					   (x->flags & MTEV_SPAN_OPEN_AT_END) | MTEV_SPAN_STITCHED;
				x->seq = UINT32_MAX; /* joined: not written */
				if (done_add(s, t, y))
					return s->err;
				if ((x->flags & MTEV_SPAN_OPEN_AT_END) && set_end(s, t, (uint32_t)j, c))
					return s->err;
				s->st.continued++;
			}
			for (long j = outer; j < best_s; j++)
				t->h[t->g[j]].flags |= ENDED;
			for (size_t j = j0 + nj; j < j0 + best; j++)
				t->h[t->g[(long)j + best_s]].flags |= ENDED;
			for (long j = 0; j < outer; j++) {
				struct hspan *y = &t->h[t->g[j]];
				y->end = t->seg_end;
				y->flags |= MTEV_SPAN_STITCHED | MTEV_SPAN_OPEN_AT_END;
				s->st.continued++;
			}
			/* The earlier frames beneath B's root that are not joined:
			 * whether one returned and was called again inside the
			 * gap no branch says, but the alignment puts its function
			 * at its level under B's root either way (B's root is
			 * called from there): a span of it begins after the gap
			 * (inferred-start, no call site), live through this
			 * segment, as a facing frame's later part does, and a
			 * later join may continue it.  Not under a surviving
			 * root (its function after the gap is unknown) nor for a
			 * synthetic frame. */
			uint32_t bseq = UINT32_MAX;
			for (size_t j = 0; j < n; j++)
				if (t->p[st[j]].seq < bseq)
					bseq = t->p[st[j]].seq;
			for (long j = outer; !under_root && j < best_s && t->h[t->g[j]].func; j++) {
				const struct hspan *y = &t->h[t->g[j]];
				struct hspan x = {t->seg_begin, t->seg_end, y->func, 0, y->level,
						  (y->flags & LOWB) | MTEV_SPAN_INFERRED_START |
							  MTEV_SPAN_OPEN_AT_END,
						  bseq, 0, 0};
				if (add_span(s, t, &x, "", 1))
					return s->err;
				t->g[j] = (int32_t)(t->nh - 1);
				s->st.resumed++;
			}
			/* the program's entry after the loader's hand-off: the
			 * thread's root from the gap on, where the loader's
			 * entry was (later joins continue it) */
			if (handoff)
				s->st.handoff++;
			if (handoff_root) {
				t->h[t->g[0]].flags |= ENDED;
			} else if (handoff) {
				const struct hspan *y = &t->h[t->g[0]];
				struct hspan x = {t->seg_begin, t->seg_end, handoff, 0, y->level,
						  MTEV_SPAN_INFERRED_START | MTEV_SPAN_OPEN_AT_END,
						  bseq, 0, 0};
				if (add_span(s, t, &x, "", 1))
					return s->err;
				t->g[0] = (int32_t)(t->nh - 1);
			}
			/* roots only this segment saw: live during the whole group */
			for (size_t j = 0; j < j0; j++) {
				struct hspan *x = &t->p[st[j]];
				x->begin = t->gstart;
				x->seq = 0; /* before the group's first span */
				x->flags |= MTEV_SPAN_STITCHED | (t->lowb ? LOWB : 0);
				x->level = t->L + (int32_t)j;
				if (add_span(s, t, x, t->ppool + x->name, 1) ||
				    ((x->flags & MTEV_SPAN_OPEN_AT_END) && set_end(s, t, (uint32_t)j, t->nh - 1)))
					return s->err;
				x->seq = UINT32_MAX;
				s->st.revealed++;
			}
			/* the gap span just above the last frame joined: the first
			 * earlier frame beneath B's root not continued, else the
			 * first facing pair not joined */
			gaplevel = !under_root && outer < best_s ? t->h[t->g[outer]].level
								 : t->L + (int32_t)(j0 + nj);
			t->keep = best_s > 0 ? (size_t)best_s : 0;
			if (best_s < 0)
				t->gbot = t->L;
		} else {
			s->st.unaligned++;
			/* the group ends here; this segment (with the gaps before
			 * it) begins the next */
			if (flush_group(s, t, qfrom))
				return s->err;
			qfrom = t->seg_meta;
			group_start(t);
		}
	}
	if (t->L < t->gmin)
		t->gmin = t->L;
	t->gap_h0 = t->nh;
	if (gap_spans(s, t, qfrom, nq, gaplevel))
		return s->err;
	t->gap_h1 = t->nh;
	t->ngaps_q = 0;
	for (size_t i = 0; i < t->np; i++) {
		struct hspan *x = &t->p[i];
		if (x->seq == UINT32_MAX)
			continue;
		if (place_span(s, t, x, (uint32_t)x->level, t->ppool + x->name))
			return s->err;
	}
	t->np = t->nppool = 0;
	return 0;
}

/* The current segment is over: the group's end stack becomes the frames
 * beneath it and its own open-at-end chain. */
static int end_segment(stitcher *s, struct sthr *t)
{
	if (!t->inseg)
		return 0;
	if (t->pending && decide(s, t))
		return s->err;
	size_t m = 0;
	while (m < t->nen && t->en[m] >= 0)
		m++;
	size_t keep = t->keep;
	if (keep + m > MAXD)
		m = MAXD - keep;
	if (mt_grow((void **)&t->g, &t->capg, keep + m, sizeof *t->g))
		return s->err = -STITCH_ENOMEM;
	for (size_t j = 0; j < m; j++)
		t->g[keep + j] = t->en[j];
	t->gn = keep + m;
	t->nen = 0;
	t->keep = 0;
	t->inseg = 0;
	return 0;
}

static int add_meta(stitcher *s, struct sthr *t, const struct mtev_rec *r)
{
	if (mt_grow((void **)&t->meta, &t->capmeta, t->nmeta + 1, sizeof *t->meta))
		return s->err = -STITCH_ENOMEM;
	struct meta *m = &t->meta[t->nmeta];
	m->r = *r;
	m->has_msg = 0;
	if (r->kind == MTEV_GAP) {
		if (m->r.gap.end < m->r.gap.begin)
			m->r.gap.end = m->r.gap.begin;
		if (r->gap.message.len) {
			char *c = malloc(r->gap.message.len);
			if (!c)
				return s->err = -STITCH_ENOMEM;
			memcpy(c, r->gap.message.p, r->gap.message.len);
			m->r.gap.message.p = c;
			m->has_msg = 1;
		}
	}
	t->nmeta++;
	return 0;
}

static int begin_segment(stitcher *s, struct sthr *t, uint32_t index, uint64_t begin, uint64_t end,
			 unsigned reason, int implicit)
{
	if (end_segment(s, t))
		return s->err;
	t->seg_meta = t->nmeta - t->ngaps_q;
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_SEGMENT;
	r.segment.tid = t->tid;
	r.segment.index = index;
	r.segment.begin = begin;
	r.segment.end = end;
	r.segment.reason = reason;
	if (add_meta(s, t, &r))
		return s->err;
	t->inseg = 1;
	t->pending = 1;
	if (s->wpt == t)
		s->wpt = NULL;
	t->implicit = implicit;
	t->nseg++;
	t->seg_begin = begin;
	t->seg_end = end;
	t->np = t->nppool = 0;
	t->nen = 0;
	return 0;
}

/* Spans and waypoints before any segment record: an implicit segment
 * beginning at the first of them (earlier waypoints move it back). */
static inline int cur_seg(stitcher *s, struct sthr *t, uint64_t time)
{
	if (!t->nseg)
		return begin_segment(s, t, 0, time, time, 0, 1);
	if (t->implicit && t->pending && !t->np && time < t->seg_begin) {
		t->seg_begin = time;
		t->meta[t->nmeta - 1].r.segment.begin = time;
	}
	return 0;
}

static int feed_span(stitcher *s, struct sthr *t, const struct mtev_rec *r)
{
	if (cur_seg(s, t, r->span.begin))
		return s->err;
	struct hspan x = {r->span.begin, r->span.end, r->span.func, r->span.callsite,
			  (int32_t)r->span.depth, r->span.flags & ~(LOWB | ENDED), t->seq++, 0, r->span.name.len};
	if (t->pending) {
		if ((r->span.flags & MTEV_SPAN_INFERRED_START) && r->span.depth < MAXD) {
			if (mt_grow((void **)&t->p, &t->capp, t->np + 1, sizeof *t->p) ||
			    pool_add(&t->ppool, &t->nppool, &t->capppool, r->span.name.p,
				     r->span.name.len, &x.name))
				return s->err = -STITCH_ENOMEM;
			t->p[t->np++] = x;
			return 0;
		}
		if (decide(s, t))
			return s->err;
	}
	return place_span(s, t, &x, r->span.depth, r->span.name.p);
}

static int feed_wp(stitcher *s, struct sthr *t, const struct mtev_rec *r)
{
	if (cur_seg(s, t, r->waypoint.time))
		return s->err;
	if (t->pending && decide(s, t))
		return s->err;
	return log_wp(s, t, r->waypoint.time, r->waypoint.addr, t->L + (int32_t)r->waypoint.depth);
}

static __attribute__((noinline)) int stitch_feed_slow(stitcher *s, const struct mtev_rec *r);

/* The common case inline, without a stack frame; the rest in
 * stitch_feed_slow. */
int stitch_feed(stitcher *s, const struct mtev_rec *r)
{
	struct sthr *t;
	/* the common case: a waypoint of the thread before it, in a segment
	 * whose join is decided (what feed_wp does for it) */
	if (__builtin_expect(r->kind == MTEV_WAYPOINT, 1) && (t = s->wpt) &&
	    t->tid == r->waypoint.tid && !s->err) {
		struct wplog *l = &t->log;
		int32_t level = t->L + (int32_t)r->waypoint.depth;
		uint32_t w;
		size_t n = l->n;
		if (__builtin_expect(n + 1 < s->limit_words && n < l->cap &&
					     wplog_short(l, r->waypoint.time, r->waypoint.addr, level, &w),
				     1)) {
			l->v[n] = w;
			l->n = n + 1;
			l->time = r->waypoint.time;
			l->addr = r->waypoint.addr;
			l->level = level;
			l->count++;
			return 0;
		}
	}
	/* everything else, and the rare waypoints (spill, long entries) */
	return stitch_feed_slow(s, r);
}

static int stitch_feed_slow(stitcher *s, const struct mtev_rec *r)
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
		if (!(t = get_thr(s, r->segment.tid)))
			return s->err = -STITCH_ENOMEM;
		s->st.segments++;
		return begin_segment(s, t, r->segment.index, r->segment.begin, r->segment.end,
				     r->segment.reason, 0);
	case MTEV_SPAN:
		if (!(t = get_thr(s, r->span.tid)))
			return s->err = -STITCH_ENOMEM;
		return feed_span(s, t, r);
	case MTEV_WAYPOINT:
		if (!(t = get_thr(s, r->waypoint.tid)))
			return s->err = -STITCH_ENOMEM;
		return feed_wp(s, t, r);
	case MTEV_GAP:
		if (!(t = get_thr(s, r->gap.tid)))
			return s->err = -STITCH_ENOMEM;
		if (t->pending && decide(s, t))
			return s->err;
		if (add_meta(s, t, r))
			return s->err;
		t->meta[t->nmeta - 1].seq = t->seq++;
		t->ngaps_q++;
		return 0;
	default:
		return emit(s, r);
	}
}

/* Copies the entries of @c after its pending one (already in the log)
 * while their time is below the limit; absolute levels moved by @off.
 * Spills as log_wp does, after the entry that reaches the limit. */
static NO_SLP int log_run(stitcher *s, struct sthr *t, struct wprun *c, int32_t off)
{
	struct wplog *l = &t->log;
	size_t lim = s->limit_words;
	if (l->cap < lim + 6 && mt_grow((void **)&l->v, &l->cap, lim + 6, sizeof *l->v))
		return s->err = -STITCH_ENOMEM;
	uint32_t *v = l->v, *dst = v + l->n, *dlim = v + lim;
	const uint32_t *src = c->p, *end = c->end;
	uint64_t time = c->time, addr = c->addr, limit = c->limit;
	int32_t level = c->level;
	size_t n = 1; /* the pending entry */
	while (src < end) {
		uint32_t x = *src;
		if (__builtin_expect(!(x & 1), 1)) {
			uint64_t nt = time + ((x >> 3) & 1023);
			if (nt >= limit)
				break;
			time = nt;
			level += (int32_t)((x >> 1) & 3) - 1;
			addr += (uint64_t)(int64_t)((int32_t)x >> 13);
			*dst++ = x;
			src++;
		} else {
			struct wpcur k = {src, end, time, addr, level};
			wpcur_next(&k);
			if (k.time >= limit)
				break;
			time = k.time;
			addr = k.addr;
			level = k.level;
			if (x & 4) {
				dst[0] = x;
				dst[1] = src[1];
				dst += 2;
			} else {
				memcpy(dst, src, 5 * sizeof *dst);
				dst[5] = (uint32_t)(level + off);
				dst += 6;
			}
			src = k.p;
		}
		n++;
		if (__builtin_expect(dst >= dlim, 0)) {
			l->n = (size_t)(dst - v);
			if (spill(s, t))
				return s->err;
			dst = v;
		}
	}
	l->n = (size_t)(dst - v);
	l->time = time;
	l->addr = addr;
	l->level = level + off;
	l->count += n - 1;
	c->n += n - 1;
	/* the next pending entry */
	c->q = src;
	if (src == end) {
		c->have = 0;
		return 0;
	}
	struct wpcur k = {src, end, time, addr, level};
	wpcur_next(&k);
	c->p = k.p;
	c->time = k.time;
	c->addr = k.addr;
	c->level = k.level;
	c->have = 1;
	return 0;
}

int stitch_feed_wprun(stitcher *s, uint32_t tid, struct wprun *c)
{
	c->n = 0;
	if (s->err)
		return s->err;
	if (!c->have || c->time >= c->limit)
		return 0;
	struct sthr *t = s->wpt;
	int32_t depth = c->level + c->abs_off;
	if (!t || t->tid != tid) {
		/* the first waypoint decides the join, as a record */
		struct mtev_rec r;
		r.kind = MTEV_WAYPOINT;
		r.waypoint.tid = tid;
		r.waypoint.time = c->time;
		r.waypoint.addr = c->addr;
		r.waypoint.depth = (uint32_t)depth;
		if (stitch_feed(s, &r))
			return s->err;
		c->n = 1;
		t = s->wpt;
		if (!t || t->tid != tid) { /* not expected: record by record */
			struct wpcur k = {c->p, c->end, c->time, c->addr, c->level};
			for (;;) {
				c->q = k.p;
				if (!wpcur_next(&k)) {
					c->have = 0;
					return 0;
				}
				c->p = k.p;
				c->time = k.time;
				c->addr = k.addr;
				c->level = k.level;
				if (k.time >= c->limit)
					return 0;
				r.waypoint.time = k.time;
				r.waypoint.addr = k.addr;
				r.waypoint.depth = (uint32_t)(k.level + c->abs_off);
				if (stitch_feed(s, &r))
					return s->err;
				c->n++;
			}
		}
		return log_run(s, t, c, t->L + c->abs_off);
	}
	/* the pending entry's words as they are when, decoded from the log's
	 * last entry, they give it (they are relative to the same entry, or
	 * absolute); else put anew */
	struct wplog *l = &t->log;
	int32_t off = t->L + c->abs_off;
	struct wpcur k = {c->q, c->p, l->time, l->addr, l->level - off};
	wpcur_next(&k);
	uint32_t x = c->q[0];
	if (l->count && k.time == c->time && k.addr == c->addr && k.level == c->level &&
	    l->n + 1 < s->limit_words && l->n + 6 <= l->cap && (x & 3) != 3) {
		uint32_t *dst = l->v + l->n;
		size_t nw = (size_t)(c->p - c->q);
		memcpy(dst, c->q, nw * sizeof *dst);
		if (nw == 6)
			dst[5] = (uint32_t)(c->level + off);
		l->n += nw;
		l->time = c->time;
		l->addr = c->addr;
		l->level = c->level + off;
		l->count++;
	} else if (log_wp(s, t, c->time, c->addr, t->L + depth)) {
		return s->err;
	}
	c->n = 1;
	return log_run(s, t, c, off);
}

int stitch_finish(stitcher *s)
{
	if (s->err)
		return s->err;
	for (size_t i = 0; i < s->nthr; i++) {
		struct sthr *t = s->thr[i];
		if (end_segment(s, t))
			return s->err;
		int32_t level = t->L;
		if (t->ngaps_q) { /* gaps after the last segment: at its root */
			if (!t->grouped) {
				t->seg_begin = 0;
				group_start(t);
				level = 0;
			}
			if (level < t->gmin)
				t->gmin = level;
			if (gap_spans(s, t, t->nmeta - t->ngaps_q, t->ngaps_q, level))
				return s->err;
			t->ngaps_q = 0;
		}
		if (flush_group(s, t, t->nmeta))
			return s->err;
	}
	return 0;
}
