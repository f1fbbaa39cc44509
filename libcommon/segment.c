#include "segment.h"
#include "chainjoin.h"
#include "vec.h"

#include "compiler.h"
#include "fnmap.h"
#include "hmap.h"
#include "sampstack.h"
#include "wplog.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Frame kinds.  FK_FUNC and FK_SIGNAL are functions (a signal handler is a
 * function entered by the kernel, not by a call); the others are synthetic. */
enum { FK_FUNC, FK_SIGNAL, FK_SYSCALL, FK_INTERRUPT, FK_UNTRACED, FK_UNWOUND, FK_DELETED };

/* 40 bytes: the only per-span memory held until the segment is written. */
struct frame {
	uint64_t func, callsite, begin, end;
	int32_t level; /* depth = level - the segment's lowest level */
	uint16_t flags;
	uint8_t kind;
	uint8_t promoted : 1; /* revealed by a return past the root */
	/* waypoints (wp_keep): the last one written may have left an inline
	 * frame open, or that is unknown; another span of its depth may be
	 * live at its begin (one of that level ended in its run) */
	uint8_t wp_open : 1, wp_shared : 1;
	/* runs a PLT stub: its func becomes the stub's target at the jump
	 * that leaves the stub code (docs/exactness.md, stubs) */
	uint8_t stub : 1;
	/* stands for the frame a signal interrupted, revealed by the handler's
	 * return into the sigreturn trampoline: named where rt_sigreturn
	 * resumes it */
	uint8_t sigret : 1;
};

/* A root (inferred-start, no call site) that returned, and where to (few
 * a segment: kept beside the frames, not in each) */
struct rootret {
	uint32_t fi;
	uint64_t ret;
};

/* Events of the current run (branch records with one timestamp), kept until
 * the next distinct time is known so their times can be spread. */
enum { RUN_BEGIN, RUN_END, RUN_WP };
struct runev {
	uint64_t val; /* frame index or address */
	int32_t level;
	uint32_t slot; /* frames opened in the run so far (this one included) */
	uint8_t type;
};

enum { RC_SIZE = 1024, RC_MIN = 16 };

struct sigctx {
	int32_t level;	 /* level of the handler frame */
	uint64_t resume; /* where the interrupted code resumes, 0 unknown */
};

struct thr {
	uint32_t tid;
	int active, off;
	uint32_t nseg;
	unsigned next_reason;
	uint64_t seg_begin, last_time, off_time;
	uint64_t expect;
	int have_expect;

	struct frame *fr;
	size_t nfr, capfr;
	struct rootret *rr; /* in frame order (name_roots) */
	size_t nrr, caprr;
	uint32_t *stk;
	size_t nstk, capstk;
	int32_t min_level;

	struct wplog wl; /* the segment's waypoints, level = frame level */

	struct runev *run;
	size_t nrun, caprun;
	uint64_t run_time;
	uint32_t run_k;

	struct sigctx *sig;
	size_t nsig, capsig;

	/* the functions on the stack when the last gap began (while the
	 * segment after it runs: next_reason != 0), for land_after_gap, and
	 * the call site of the call each was making (its child's; 0: none or
	 * unknown), for lands_as_before */
	uint64_t *gapfn, *gapcs;
	size_t ngapfn, capgapfn, capgapcs;

	uint64_t lin; /* where the straight-line run since the last branch began (0: unknown) */

	/* the range of frame rfi (the last frame asked; UINT32_MAX: none) */
	uint32_t rfi, rgen;
	int32_t rok;
	uint64_t rlo, rhi;
	int rdw; /* its function may have inline frames (DWARF covers it) */
	size_t rninl;	      /* and where: its fn_info.ninl (inl: in its rc entry) */
	const uint8_t *rbits; /* fn_info.inl_bits, inl_bits_base */
	uint64_t rbase;
	uint64_t ilo, ihi; /* without rbits: [ilo, ihi) is all inline (iin) or */
	int iin;	   /* none of it is (in_inline's last answer; frame rfi) */
	/* frame rfi is a function's (FK_FUNC) whose range is known and has
	 * no inline ranges: [qlo, qhi) is that range, where inline_cross has
	 * nothing to do; else empty */
	uint64_t qlo, qhi;

	/* for wp_keep: the levels of the frames that ended in the run at
	 * pop_run, and the children begun in the run at kid_run (parent frame,
	 * call site; kid_all: too many to list, or a segment ended there) */
	uint64_t pop_run, kid_run;
	int32_t pop_lo, pop_hi;
	uint32_t nkid, kid_all;
	struct {
		uint32_t parent;
		uint64_t cs;
	} kid[8];

	/* the call chain at a trigger (a sample record, MTEV_SAMPLE_CHAIN),
	 * joined to the stack when the segment holding its time closes */
	uint64_t *chain, chain_time;
	size_t nchain, capchain;

	uint32_t *blk, blk_one; /* output order scratch */
	size_t capblk;

	/* the function containing an address (a frame's function entry, a
	 * jump target): direct-mapped, valid while the maps do not change
	 * (generation) */
	struct rcache {
		uint64_t func, lo, hi; /* func: the address looked up */
		uint32_t gen;
		int32_t ok;
		uint8_t is_plt, cold;
		uint8_t dw; /* DWARF may describe inline frames in it */
		const uint64_t *inl; /* fn_info.inl, ninl, inl_bias */
		size_t ninl;
		uint64_t bias;
		const uint8_t *bits; /* fn_info.inl_bits, inl_bits_base */
		uint64_t base;
		const uint64_t *inlb; /* fn_info.inlb, ninlb, inl_bias (kept by */
		size_t ninlb;	      /* --all-waypoints, which overrides inl) */
		uint64_t inlb_bias;
	} *rc; /* rcmask + 1 entries: RC_MIN, grown to RC_SIZE as it misses */
	uint32_t rcmask, rcmiss;
	struct rcache rc0[RC_MIN]; /* the first, in place: a thread costs ~2 KB */
};

struct segmenter {
	struct seg_opts o;
	seg_emit_fn emit;
	void *ctx;
	struct thr **thr;
	size_t nthr, capthr;
	struct hmap tidx; /* tid -> index in thr */
	struct thr *last;
	struct hmap tgt; /* call targets seen (the value unused) */
	struct seg_stats st;
	struct sstk_frame *sprev, *sout; /* a sample's previous and new stacks */
	size_t capsprev, capsout;
	uint64_t *chs; /* chain_outer's scratch */
	size_t capchs;
	uint32_t gen; /* bumped when maps or threads change: range caches */
	unsigned detail;
	int err;
};

const char *seg_strerror(int err)
{
	switch (err < 0 ? -err : err) {
	case 0:
		return "success";
	case SEG_ENOMEM:
		return "out of memory";
	case SEG_EKIND:
		return "record kind not accepted here";
	case SEG_EEMIT:
		return "writing output failed";
	case SEG_EORDER:
		return "time went backwards";
	case SEG_EBRANCH:
		return "a sysret, iret or trace-start without its target address";
	}
	return "unknown error";
}

unsigned seg_error_detail(const segmenter *s)
{
	return s->detail;
}

const struct seg_stats *seg_stats(const segmenter *s)
{
	return &s->st;
}

segmenter *seg_alloc(const struct seg_opts *opts, seg_emit_fn emit, void *ctx)
{
	segmenter *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	if (opts)
		s->o = *opts;
	s->emit = emit;
	s->ctx = ctx;
	s->gen = 1;
	return s;
}

static void thr_free(struct thr *t)
{
	if (!t)
		return;
	free(t->fr);
	free(t->rr);
	free(t->stk);
	wplog_free(&t->wl);
	free(t->run);
	free(t->sig);
	free(t->blk);
	free(t->chain);
	free(t->gapfn);
	free(t->gapcs);
	if (t->rc != t->rc0)
		free(t->rc);
	free(t);
}

void seg_free(segmenter *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nthr; i++)
		thr_free(s->thr[i]);
	free(s->thr);
	hmap_fini(&s->tidx);
	hmap_fini(&s->tgt);
	free(s->sprev);
	free(s->sout);
	free(s->chs);
	free(s);
}

/* ---- call targets: what calls revealed, for code without symbols ---- */

static int tgt_has(const segmenter *s, uint64_t a)
{
	return a && hmap_get(&s->tgt, a, 0) != HMAP_NONE;
}

/* 0, or -1 out of memory.  Most calls target a function called before:
 * the inline look-up first, hmap_put (a call) only for a new target. */
static inline int tgt_add(segmenter *s, uint64_t a)
{
	if (!a || hmap_get(&s->tgt, a, 0) != HMAP_NONE)
		return 0;
	return hmap_put(&s->tgt, a, 0, 0) == HMAP_NONE ? -1 : 0;
}

/* Entry of the function containing @ip from ELF symbols, else from the
 * loader's pointer arrays (fnmap_pointer_entry: a stripped object's crtstuff
 * functions); without them the entry is unknowable (a call target below @ip
 * may belong to another function), so @ip itself stands for the function. */
static uint64_t func_entry(segmenter *s, const struct thr *t, uint64_t ip)
{
	struct fn_info fi;
	uint64_t e;
	/* a .cold part's frame is its function's (fnmap_owner) */
	if (fnmap_owner(s->o.fns, t->tid, ip, &fi) || fnmap_lookup(s->o.fns, t->tid, ip, &fi))
		return fi.entry;
	if (fnmap_pointer_entry(s->o.fns, t->tid, ip, &e))
		return e;
	return ip;
}

/* ---- threads ---- */

static __attribute__((noinline)) struct thr *get_thr_slow(segmenter *s, uint32_t tid)
{
	uint32_t i = hmap_get(&s->tidx, tid, 0);
	if (i != HMAP_NONE)
		return s->last = s->thr[i];
	if (mt_grow((void **)&s->thr, &s->capthr, s->nthr + 1, sizeof *s->thr))
		return NULL;
	struct thr *t = calloc(1, sizeof *t);
	if (!t || hmap_put(&s->tidx, tid, 0, (uint32_t)s->nthr) == HMAP_NONE) {
		free(t);
		return NULL;
	}
	t->tid = tid;
	t->rc = t->rc0;
	t->rcmask = RC_MIN - 1;
	t->rfi = UINT32_MAX;
	t->pop_lo = 1; /* none */
	s->thr[s->nthr++] = t;
	return s->last = t;
}

static inline struct thr *get_thr(segmenter *s, uint32_t tid)
{
	if (__builtin_expect(s->last && s->last->tid == tid, 1))
		return s->last;
	return get_thr_slow(s, tid);
}

static inline struct frame *top(struct thr *t)
{
	return t->nstk ? &t->fr[t->stk[t->nstk - 1]] : NULL;
}

/* Events of a run need buffering only once a second frame has opened in it:
 * until then every event's time is the run's own time (close_run's rule
 * with slot 0 or 1), so they are applied at once. */
static inline int run_add(segmenter *s, struct thr *t, uint8_t type, uint64_t val, int32_t level)
{
	if (t->nrun == t->caprun && mt_grow((void **)&t->run, &t->caprun, t->nrun + 1, sizeof *t->run))
		return s->err = -SEG_ENOMEM;
	t->run[t->nrun++] = (struct runev){val, level, t->run_k, type};
	return 0;
}

static __attribute__((noinline)) int wp_append_slow(segmenter *s, struct thr *t, uint64_t time,
						     uint64_t addr, int32_t level)
{
	struct wplog *l = &t->wl;
	if (time == l->time && addr == l->addr && level == l->level && l->count)
		return 0;
	if (wplog_put_slow(l, time, addr, level))
		return s->err = -SEG_ENOMEM;
	return 0;
}

static inline __attribute__((always_inline)) int wp_append(segmenter *s, struct thr *t,
							    uint64_t time, uint64_t addr,
							    int32_t level)
{
	/* the same record as the previous waypoint (same time, address and
	 * frame, nothing between: the short word 2) tells a reader nothing
	 * more (see docs/segment.md, Waypoints) */
	struct wplog *l = &t->wl;
	uint32_t w;
	if (__builtin_expect(l->n < l->cap && wplog_short(l, time, addr, level, &w), 1)) {
		if (w != 2)
			wplog_store(l, w, time, addr, level);
		return 0;
	}
	return wp_append_slow(s, t, time, addr, level);
}

/* Two waypoints at one time (a branch's source and target): both words
 * at once when both are short. */
static __attribute__((noinline)) int wp_pair_slow(segmenter *s, struct thr *t, uint64_t time,
						   uint64_t a1, int32_t l1, uint64_t a2, int32_t l2)
{
	if (wp_append(s, t, time, a1, l1) || wp_append(s, t, time, a2, l2))
		return s->err;
	return 0;
}

static inline __attribute__((always_inline)) int wp_pair(segmenter *s, struct thr *t, uint64_t time,
							  uint64_t a1, int32_t l1, uint64_t a2,
							  int32_t l2)
{
	struct wplog *l = &t->wl;
	uint32_t w1;
	uint64_t d2 = a2 - a1 + (1u << 18);
	uint64_t dl2 = (uint64_t)((int64_t)l2 - l1 + 1);
	if (__builtin_expect(l->n + 2 <= l->cap && wplog_short(l, time, a1, l1, &w1) && !(d2 >> 19) &&
			     dl2 < 3, 1)) {
		uint32_t w2 = (uint32_t)dl2 << 1 | (((uint32_t)d2 - (1u << 18)) & 0x7ffffu) << 13;
		uint32_t *v = l->v + l->n;
		size_t n = 0;
		v[n] = w1; /* 2: a repeat of the entry before it, not kept */
		n += w1 != 2;
		v[n] = w2;
		n += w2 != 2;
		l->n += n;
		l->count += n;
		l->time = time;
		l->addr = a2;
		l->level = l2;
		return 0;
	}
	return wp_pair_slow(s, t, time, a1, l1, a2, l2);
}

/* Gives the events of the current run their times, now that the next
 * distinct time @next is known (== run_time: no spreading). */
static int close_run(segmenter *s, struct thr *t, uint64_t next)
{
	uint64_t d = s->o.no_smear || next <= t->run_time ? 0 : next - t->run_time;
	uint32_t k = t->run_k;
	for (size_t i = 0; i < t->nrun; i++) {
		const struct runev *e = &t->run[i];
		uint64_t tm = t->run_time;
		if (d && k && e->slot)
			tm += (uint64_t)(((unsigned __int128)(e->slot - 1) * d) / k);
		switch (e->type) {
		case RUN_BEGIN:
			t->fr[e->val].begin = tm;
			break;
		case RUN_END:
			t->fr[e->val].end = tm;
			break;
		case RUN_WP:
			if (wp_append(s, t, tm, e->val, e->level))
				return s->err;
			break;
		}
	}
	t->nrun = 0;
	t->run_k = 0;
	return 0;
}

/* A frame at @level ended in the current run. */
static inline void note_pop(struct thr *t, int32_t level)
{
	if (t->pop_run != t->run_time || t->pop_lo > t->pop_hi) {
		t->pop_run = t->run_time;
		t->pop_lo = t->pop_hi = level;
	} else if (level < t->pop_lo) {
		t->pop_lo = level;
	} else if (level > t->pop_hi) {
		t->pop_hi = level;
	}
}

/* Frame @parent began a child at call site @cs in the current run. */
static void kid_note(struct thr *t, uint32_t parent, uint64_t cs)
{
	if (t->kid_run != t->run_time) {
		t->kid_run = t->run_time;
		t->nkid = t->kid_all = 0;
	}
	for (uint32_t i = 0; i < t->nkid; i++)
		if (t->kid[i].parent == parent && t->kid[i].cs == cs)
			return;
	if (t->nkid < sizeof t->kid / sizeof *t->kid) {
		t->kid[t->nkid].parent = parent;
		t->kid[t->nkid++].cs = cs;
	} else {
		t->kid_all = 1;
	}
}

static inline __attribute__((always_inline)) int new_frame(segmenter *s, struct thr *t,
							   uint8_t kind, uint64_t func,
							   uint64_t callsite, uint64_t begin,
							   int32_t level, uint16_t flags)
{
	if (t->nfr == t->capfr && mt_grow((void **)&t->fr, &t->capfr, t->nfr + 1, sizeof *t->fr))
		return s->err = -SEG_ENOMEM;
	if (t->nstk == t->capstk &&
	    mt_grow((void **)&t->stk, &t->capstk, t->nstk + 1, sizeof *t->stk))
		return s->err = -SEG_ENOMEM;
	t->fr[t->nfr] = (struct frame){func, callsite, begin, begin, level, flags, kind, 0, 0, 0, 0, 0};
	t->fr[t->nfr].wp_shared =
		t->pop_run == t->run_time && level >= t->pop_lo && level <= t->pop_hi;
	t->stk[t->nstk++] = (uint32_t)t->nfr++;
	if (t->nfr > s->st.peak_frames)
		s->st.peak_frames = t->nfr;
	if (level < t->min_level)
		t->min_level = level;
	return 0;
}

/* A frame opened by an event (call, tail call, syscall, ...): a creating
 * event of the run. */
static int push_at(segmenter *s, struct thr *t, uint8_t kind, uint64_t func, uint64_t callsite,
		   uint64_t time, int32_t level)
{
	if (new_frame(s, t, kind, func, callsite, time, level, 0))
		return s->err;
	if (++t->run_k == 1) /* begins at the run's time: already set */
		return 0;
	return run_add(s, t, RUN_BEGIN, t->nfr - 1, level);
}

static int push(segmenter *s, struct thr *t, uint8_t kind, uint64_t func, uint64_t callsite,
		uint64_t time)
{
	struct frame *f = top(t);
	int32_t level = f ? f->level + 1 : 0;
	if (new_frame(s, t, kind, func, callsite, time, level, 0))
		return s->err;
	if (++t->run_k == 1)
		return 0;
	return run_add(s, t, RUN_BEGIN, t->nfr - 1, level);
}

static int pop(segmenter *s, struct thr *t, uint64_t time)
{
	uint32_t i = t->stk[--t->nstk];
	t->fr[i].end = time;
	note_pop(t, t->fr[i].level);
	/* a signal context lives while its interrupted frame does */
	int64_t tl = t->nstk ? (int64_t)top(t)->level : INT64_MIN / 2;
	while (t->nsig && (int64_t)t->sig[t->nsig - 1].level > tl + 1)
		t->nsig--;
	if (t->run_k <= 1) /* ends at the run's time: set */
		return 0;
	return run_add(s, t, RUN_END, i, 0);
}

static int pop_to(segmenter *s, struct thr *t, size_t n, uint64_t time)
{
	while (t->nstk > n)
		if (pop(s, t, time))
			return s->err;
	return 0;
}

static inline const struct rcache *fn_lookup(segmenter *s, struct thr *t, uint64_t addr);

/* The frame that was live when the segment began (or that a return
 * revealed): begins at the segment start. */
static int add_root(segmenter *s, struct thr *t, uint64_t ip, int promoted)
{
	int32_t level = t->nfr ? t->min_level - 1 : 0;
	if (new_frame(s, t, FK_FUNC, func_entry(s, t, ip), 0, t->seg_begin, level,
		      MTEV_SPAN_INFERRED_START))
		return s->err;
	t->fr[t->nfr - 1].promoted = (uint8_t)promoted;
	/* its span may continue one of an earlier segment (mt-stitch) */
	t->fr[t->nfr - 1].wp_open = 1;
	if (s->o.fns) {
		/* trace that resumes in PLT stub code (a resync or a trace-start
		 * inside a stub's lazy path) runs in the frame of the stub's
		 * target: named at the jump out, as after a call to a stub */
		const struct rcache *c = fn_lookup(s, t, ip);
		t->fr[t->nfr - 1].stub = (uint8_t)(c->ok && c->is_plt);
	}
	if (promoted)
		s->st.promoted++;
	return 0;
}

static int ensure_root(segmenter *s, struct thr *t, uint64_t ip)
{
	if (t->nstk)
		return 0;
	if (t->nfr) /* everything returned: the caller is revealed */
		return add_root(s, t, ip, 1);
	return add_root(s, t, ip, 0);
}

/* Synthetic frames left open by a lost sysret/iret/trace-start. */
static __attribute__((noinline)) int close_synthetic_slow(segmenter *s, struct thr *t,
							  uint64_t time)
{
	struct frame *f;
	while ((f = top(t)) && f->kind >= FK_SYSCALL) {
		s->st.anomalies++;
		if (pop(s, t, time))
			return s->err;
	}
	return 0;
}

/* The same: none, mostly (no call then). */
static inline int close_synthetic(segmenter *s, struct thr *t, uint64_t time)
{
	const struct frame *f = top(t);
	return f && f->kind >= FK_SYSCALL ? close_synthetic_slow(s, t, time) : 0;
}

static int is_cold_part(const char *name)
{
	const char *c = name ? strstr(name, ".cold") : NULL;
	return c && (c[5] == 0 || c[5] == '.');
}

/* fn_lookup: fills the cache entry @c for @addr. */
static __attribute__((noinline)) void fn_fill(segmenter *s, struct thr *t, struct rcache *c,
					      uint64_t addr)
{
	struct fn_info in;
	c->ok = fnmap_lookup(s->o.fns, t->tid, addr, &in);
	c->func = addr;
	c->gen = s->gen;
	c->lo = c->ok ? in.entry : 0;
	c->hi = c->ok ? in.end : 0;
	c->is_plt = (uint8_t)(c->ok && in.is_plt);
	c->cold = (uint8_t)(c->ok && is_cold_part(in.name));
	c->dw = (uint8_t)(!c->ok || in.may_inline || s->o.all_waypoints);
	c->inl = c->ok ? in.inl : NULL;
	c->ninl = c->ok ? in.ninl : 0;
	c->bias = c->ok ? in.inl_bias : 0;
	c->bits = c->ok ? in.inl_bits : NULL;
	c->base = c->ok ? in.inl_bits_base : 0;
	c->inlb = c->ok ? in.inlb : NULL;
	c->ninlb = c->ok ? in.ninlb : 0;
	c->inlb_bias = c->ok ? in.inl_bias : 0;
	if (s->o.all_waypoints) { /* every address counts as inline: all kept */
		static const uint64_t all[2] = {0, UINT64_MAX};
		c->inl = all;
		c->ninl = 1;
		c->bias = 0;
		c->bits = NULL;
	}
}

/* A miss: a thread that misses often gets a bigger cache (x4, up to
 * RC_SIZE entries; a cache, so its entries are dropped), so memory follows
 * the functions a thread runs through, not the thread count. */
static __attribute__((noinline)) struct rcache *fn_miss(segmenter *s, struct thr *t,
							uint64_t addr)
{
	if (++t->rcmiss > 2 * (t->rcmask + 1) && t->rcmask + 1 < RC_SIZE) {
		struct rcache *n = calloc((t->rcmask + 1) * 4, sizeof *n);
		if (n) { /* else: the small cache still works */
			if (t->rc != t->rc0)
				free(t->rc);
			t->rc = n;
			t->rcmask = (t->rcmask + 1) * 4 - 1;
		}
		t->rcmiss = 0;
	}
	struct rcache *c = &t->rc[(addr ^ addr >> 9) & t->rcmask];
	fn_fill(s, t, c, addr);
	return c;
}

/* fnmap_lookup of @addr through the thread's cache. */
static inline __attribute__((always_inline)) const struct rcache *fn_lookup(segmenter *s,
									    struct thr *t,
									    uint64_t addr)
{
	struct rcache *c = &t->rc[(addr ^ addr >> 9) & t->rcmask];
	if (__builtin_expect(c->gen != s->gen || c->func != addr, 0))
		c = fn_miss(s, t, addr);
	return c;
}

/* Function range of frame @fi; 1 known, 0 unknown. */
static inline __attribute__((always_inline)) int frame_range(segmenter *s, struct thr *t, uint32_t fi, uint64_t *lo, uint64_t *hi)
{
	if (__builtin_expect(fi == t->rfi && t->rgen == s->gen, 1)) {
		*lo = t->rlo;
		*hi = t->rhi;
		return t->rok;
	}
	const struct frame *f = &t->fr[fi];
	if (f->kind > FK_SIGNAL || !s->o.fns)
		return 0;
	const struct rcache *c = fn_lookup(s, t, f->func);
	t->rfi = fi;
	t->rgen = s->gen;
	t->rok = c->ok;
	t->rdw = c->dw;
	t->rninl = c->ninl;
	t->rbits = c->bits;
	t->rbase = c->base;
	t->ilo = t->ihi = 0;
	*lo = t->rlo = c->lo;
	*hi = t->rhi = c->hi;
	int quiet = f->kind == FK_FUNC && c->ok && !(c->dw && c->ninl);
	t->qlo = quiet ? c->lo : 0;
	t->qhi = quiet ? c->hi : 0;
	return c->ok;
}

/* in_inline: where @addr falls among the inline ranges of frame rfi's
 * function (from its cache entry: a lookup that hits, or redoes it). */
static __attribute__((noinline)) int in_inline_slow(segmenter *s, struct thr *t, uint64_t addr)
{
	const struct rcache *c = fn_lookup(s, t, t->fr[t->rfi].func);
	const uint64_t *r = c->inl;
	uint64_t a = addr - c->bias;
	size_t n = c->ninl, lo = 0, hi = n; /* the first range ending after a */
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		if (r[2 * m + 1] <= a)
			lo = m + 1;
		else
			hi = m;
	}
	/* [ilo, ihi) as runtime addresses; only the function's are asked */
	uint64_t glo = lo ? r[2 * lo - 1] : 0, ghi = lo < n ? r[2 * lo] : UINT64_MAX;
	if (lo < n && r[2 * lo] <= a) {
		glo = r[2 * lo];
		ghi = r[2 * lo + 1];
		t->iin = 1;
	} else { /* the gap: right within the function, whose ranges r holds */
		t->iin = 0;
	}
	t->ilo = glo + c->bias;
	t->ihi = ghi == UINT64_MAX ? UINT64_MAX : ghi + c->bias;
	if (t->ihi < t->ilo) /* wrapped: no interval */
		t->ilo = t->ihi = 0;
	return t->iin;
}

/* May @addr, in the function of the frame frame_range last gave, have an
 * inline frame?  The last answer's interval first: jumps stay near. */
static inline int in_inline(segmenter *s, struct thr *t, uint64_t addr)
{
	if (__builtin_expect(!t->rninl, 1))
		return 0;
	if (__builtin_expect(t->rbits != NULL, 1)) {
		uint64_t k = addr - t->rbase; /* addr is in [lo, hi): in the bitmap */
		return t->rbits[k >> 3] >> (k & 7) & 1;
	}
	if (addr - t->ilo < t->ihi - t->ilo)
		return t->iin;
	return in_inline_slow(s, t, addr);
}

/* wp_keep: must this waypoint of frame @fi be written although it opens
 * and closes nothing?  When another span of its depth may be live at its
 * time (it may fall to that span), or when a child of the frame began at
 * this address in this run (its call-site waypoint: mt-symbolize hangs the
 * child under the inline frame open after it). */
static inline int wp_needed(const struct thr *t, uint32_t fi, const struct frame *f,
			    uint64_t addr)
{
	if (f->wp_shared && f->begin == t->run_time)
		return 1;
	if (t->kid_run != t->run_time)
		return 0;
	if (t->kid_all)
		return 1;
	for (uint32_t i = 0; i < t->nkid; i++)
		if (t->kid[i].cs == addr && t->kid[i].parent == fi)
			return 1;
	return 0;
}

/* Is the waypoint at @addr of frame @fi, whose function (DWARF covers it)
 * frame_range just gave as [lo, hi), worth writing?  Not when its inline
 * chain is the function alone and so was that of the frame's last written
 * waypoint (or it has none): it can neither open nor close an inline frame
 * (docs/segment.md, Waypoints, says why this is exact). */
static inline int wp_keep(segmenter *s, struct thr *t, uint32_t fi, uint64_t addr, uint64_t lo,
			  uint64_t hi, int cs)
{
	struct frame *f = &t->fr[fi];
	if (cs) /* @addr is the call site of a child the frame begins now */
		kid_note(t, fi, addr);
	if (addr < lo || addr >= hi || in_inline(s, t, addr)) {
		f->wp_open = 1;
		return 1;
	}
	if (f->wp_open) {
		f->wp_open = 0;
		return 1;
	}
	if (cs || wp_needed(t, fi, f, addr))
		return 1;
	s->st.wp_elided++;
	s->st.wp_elided_inline++;
	return 0;
}

/* Is a waypoint at @addr in the top frame worth writing?  Not when @addr
 * lies in the frame's own function and no DWARF describes that function:
 * no inline frame can ever be found there (libcommon/dwcov.h); nor when
 * wp_keep says so.  Anything else (no symbols, a synthetic frame) is
 * written, as before. */
static inline __attribute__((always_inline)) int wp_wanted(segmenter *s, struct thr *t,
							    uint64_t addr, int cs)
{
	uint64_t lo, hi;
	if (!t->nstk || s->o.all_waypoints)
		return 1;
	uint32_t fi = t->stk[t->nstk - 1];
	if (!frame_range(s, t, fi, &lo, &hi)) {
		t->fr[fi].wp_open = 1; /* its range may become known (a new map) */
		return 1;
	}
	if (__builtin_expect(t->rdw, 1))
		return wp_keep(s, t, fi, addr, lo, hi, cs);
	if (addr < lo || addr >= hi) {
		t->fr[fi].wp_open = 1;
		return 1;
	}
	s->st.wp_elided++;
	return 0;
}

/* wp_pair of the waypoints @k1 and @k2 say are wanted. */
static inline __attribute__((always_inline)) int wp_pair_if(segmenter *s, struct thr *t,
							     uint64_t time, int k1, uint64_t a1,
							     int32_t l1, int k2, uint64_t a2,
							     int32_t l2)
{
	if (__builtin_expect(k1 && k2, 1))
		return wp_pair(s, t, time, a1, l1, a2, l2);
	if (k1)
		return wp_append(s, t, time, a1, l1);
	if (k2)
		return wp_append(s, t, time, a2, l2);
	return 0;
}

/* @cs: @addr is the call site of a child the top frame begins now (wp_needed) */
static inline __attribute__((always_inline)) int waypoint_at(segmenter *s, struct thr *t,
								uint64_t addr, int cs)
{
	if (s->o.no_waypoints || !addr || !wp_wanted(s, t, addr, cs))
		return 0;
	int32_t level = t->nstk ? t->fr[t->stk[t->nstk - 1]].level : 0;
	if (t->run_k <= 1) /* at the run's time */
		return wp_append(s, t, t->run_time, addr, level);
	return run_add(s, t, RUN_WP, addr, level);
}

static inline __attribute__((always_inline)) int waypoint(segmenter *s, struct thr *t,
							     uint64_t addr)
{
	return waypoint_at(s, t, addr, 0);
}

static int tail_call(segmenter *s, struct thr *t, uint64_t to, uint64_t time)
{
	struct frame *f = top(t);
	uint64_t cs = f->callsite;
	uint8_t kind = f->kind;
	int32_t level = f->level; /* the root too: same level, not 0 */
	s->st.tailcalls++;
	if (pop(s, t, time))
		return s->err;
	if (cs && t->nstk) /* the new frame's call site is the parent's (wp_needed) */
		kid_note(t, t->stk[t->nstk - 1], cs);
	if (push_at(s, t, kind, to, cs, time, level))
		return s->err;
	return 0;
}

static int close_seg(segmenter *s, struct thr *t);

/* The length of @name's function name before its ".cold" suffix (gcc's
 * hot/cold split: "f.cold", "f.cold.7"), 0 if it is not a cold part. */
static size_t cold_base(const char *name)
{
	const char *c = name ? strstr(name, ".cold") : NULL;
	return c && (c[5] == 0 || c[5] == '.') ? (size_t)(c - name) : 0;
}

/* The innermost stack entry below @n whose function owns @to: its range
 * holds @to, or @to is in a ".cold" part of it (same name before ".cold";
 * an exception's landing pad, entered by the unwinder).  SIZE_MAX: none. */
static size_t owner_frame(segmenter *s, struct thr *t, uint64_t to, size_t n)
{
	struct fn_info fi;
	const char *base = NULL;
	size_t blen = 0;
	if (s->o.fns && fnmap_lookup(s->o.fns, t->tid, to, &fi) && (blen = cold_base(fi.name)))
		base = fi.name;
	for (size_t i = n; i-- > 0;) {
		uint64_t lo, hi;
		const struct frame *f = &t->fr[t->stk[i]];
		if (frame_range(s, t, t->stk[i], &lo, &hi) && to >= lo && to < hi)
			return i;
		struct fn_info g;
		if (base && f->kind <= FK_SIGNAL && fnmap_lookup(s->o.fns, t->tid, f->func, &g) &&
		    g.name && !strncmp(g.name, base, blen) && g.name[blen] == 0)
			return i;
	}
	return SIZE_MAX;
}

/* Is frame @fi running the C++ unwinder's entry (libgcc's _Unwind_*, named
 * by .dynsym even when stripped), which jumps to landing pads? */
static int unwinder_frame(segmenter *s, struct thr *t, uint32_t fi)
{
	struct fn_info g;
	return s->o.fns && t->fr[fi].kind == FK_FUNC &&
	       fnmap_lookup(s->o.fns, t->tid, t->fr[fi].func, &g) && g.name &&
	       !strncmp(g.name, "_Unwind_", 8);
}

/* An exception (@exc) or a longjmp lands at @to in a function that is on no
 * frame of the stack: a caller above the root (the trace began inside the
 * unwinder, or below the landing frame: below perl's or Lua's setjmp).
 * Every frame ends; the landing function (a .cold part names it) is
 * revealed below the root.  When an exception's root is the
 * unwinder's own code, between them lie unwound frames no branch showed
 * (at least one: the unwinder's caller): an [unwound] span stands for the
 * one that surely was there; else the root is taken for the landing
 * function's callee.  Unless the code says so, how many frames lay between
 * is unknown: the frames before the landing are flagged min-depth
 * (docs/exactness.md, unwinding). */
static uint64_t landing_func(segmenter *s, struct thr *t, uint64_t to)
{
	struct fn_info fo;
	return s->o.fns && fnmap_owner(s->o.fns, t->tid, to, &fo) ? fo.entry : func_entry(s, t, to);
}

/* The innermost stack entry running function @f, SIZE_MAX: none.  (A jump
 * into the cold part of a stripped file's function lands in a frame's
 * function that owner_frame does not see: python3.11's, the sixth probe
 * corpus' py-valerr.) */
static size_t func_frame(const struct thr *t, uint64_t f)
{
	for (size_t i = t->nstk; i-- > 0;)
		if (t->fr[t->stk[i]].kind == FK_FUNC && t->fr[t->stk[i]].func == f)
			return i;
	return SIZE_MAX;
}

/* A gap begins: remember the functions on the stack (an empty stack, a
 * segment with no frame between two gaps, keeps the earlier list). */
static int keep_gap_stack(struct thr *t)
{
	if (!t->nstk)
		return 0;
	if (mt_grow((void **)&t->gapfn, &t->capgapfn, t->nstk, sizeof *t->gapfn) ||
	    mt_grow((void **)&t->gapcs, &t->capgapcs, t->nstk, sizeof *t->gapcs))
		return -1;
	t->ngapfn = 0;
	for (size_t i = 0; i < t->nstk; i++)
		if (t->fr[t->stk[i]].kind == FK_FUNC) {
			const struct frame *k = i + 1 < t->nstk ? &t->fr[t->stk[i + 1]] : NULL;
			t->gapcs[t->ngapfn] = k && k->kind == FK_FUNC ? k->callsite : 0;
			t->gapfn[t->ngapfn++] = t->fr[t->stk[i]].func;
		}
	return 0;
}

/* Was function @f on the stack when the gap before this segment began? */
static int on_gap_stack(const struct thr *t, uint64_t f)
{
	for (size_t i = 0; i < t->ngapfn; i++)
		if (t->gapfn[i] == f)
			return 1;
	return 0;
}

/* An exception lands in a segment that began after a gap.  When the
 * segment's root was on the stack before the gap, mt-stitch aligns it by
 * function (the throw came before the gap): a new segment begins at the
 * landing caller, aligned by function too.  When it was not (nor was the
 * earlier root on the segment's start stack) (the gap
 * swallowed the call of the root, or of the throw), the root cannot align,
 * and a segment of its own would be placed by a guess: the landing goes
 * below the root as in a thread's first segment, and mt-stitch aligns the
 * landing function (when it was on the earlier stack: the catcher survived
 * the gap) or places the whole by its rules for a gap with no common frame
 * (when it was not either). */
static int land_after_gap(struct thr *t)
{
	if (!t->next_reason)
		return 0;
	/* the segment's start stack, as mt-stitch sees it: its frames live
	 * since the segment began (a root a tail call replaced included).
	 * mt-stitch aligns it when its outermost frame is on the earlier
	 * stack, or the earlier stack's root is in it. */
	const struct frame *o = NULL;
	for (size_t i = 0; i < t->nfr; i++) {
		const struct frame *f = &t->fr[i];
		if (f->kind != FK_FUNC || !(f->flags & MTEV_SPAN_INFERRED_START))
			continue;
		if (t->ngapfn && f->func == t->gapfn[0])
			return 0;
		if (!o || f->level < o->level)
			o = f;
	}
	return !o || !on_gap_stack(t, o->func);
}

/* An exception lands at @to after a gap, and the segment's outermost frame
 * (the unwinder's entry) was on the stack before the gap, where
 * land_after_gap leaves the join to mt-stitch by function.  Can that
 * earlier activation land there?  It unwinds only the frames below its own
 * place, and lands in one of them at the landing pad of the call that frame
 * was making (its LSDA's call-site table: fnmap_landing_pad).  0 when no
 * frame of the landing function below it made a call whose pad is @to (the
 * gap held a landing and a new throw or resume, whose unwinder is another
 * activation of the same function: except_O0, a rethrow inside the gap);
 * 1 when one did, or when that is unknown. */
static int lands_as_before(segmenter *s, struct thr *t, uint64_t to)
{
	if (!t->next_reason || !t->ngapfn || !s->o.fns)
		return 1;
	const struct frame *o = NULL;
	for (size_t i = 0; i < t->nfr; i++) {
		const struct frame *f = &t->fr[i];
		if (f->kind == FK_FUNC && (f->flags & MTEV_SPAN_INFERRED_START) &&
		    (!o || f->level < o->level))
			o = f;
	}
	if (!o || o->func == t->gapfn[0])
		return 1;
	size_t j = t->ngapfn; /* its place before the gap: the deepest */
	while (j-- > 0 && t->gapfn[j] != o->func)
		;
	if (j == SIZE_MAX)
		return 1;
	uint64_t x = landing_func(s, t, to), pad;
	for (size_t k = 0; k < j; k++)
		if (t->gapfn[k] == x &&
		    (!t->gapcs[k] || !fnmap_landing_pad(s->o.fns, t->tid, t->gapcs[k], &pad) ||
		     pad == to))
			return 1;
	return 0;
}

static int land_below_root(segmenter *s, struct thr *t, uint64_t from, uint64_t to, uint64_t time,
			   int exc)
{
	uint64_t x = landing_func(s, t, to);
	uint64_t root = t->fr[t->stk[0]].func;
	/* the root is the unwinder's own code (the object that jumps to the
	 * landing pad): its caller was unwound too, at least that one frame
	 * (__cxa_throw, __cxa_rethrow, or the frame whose cleanup called
	 * _Unwind_Resume); how many more (the thrower, the catcher that
	 * rethrew, frames of a recursion between) no branch shows */
	int unwound = exc && from && fnmap_same_file(s->o.fns, t->tid, root, from);
	/* else the root was the landing function's callee if its code calls
	 * the root's function directly (as mt-stitch's returned_root reads
	 * it); without that, frames may lie between as well */
	int exact = !unwound && s->o.fns && fnmap_calls(s->o.fns, t->tid, x, root);
	if (pop_to(s, t, 0, time))
		return s->err;
	/* every frame so far hangs at an unknown distance above the landing
	 * function: its depth is a lower bound (min-depth; mt-stitch never
	 * joins such a frame, mt-compare judges it at that depth or deeper) */
	if (!exact)
		for (size_t i = 0; i < t->nfr; i++)
			if (t->fr[i].kind != FK_DELETED)
				t->fr[i].flags |= MTEV_SPAN_MIN_DEPTH;
	if (unwound) {
		if (new_frame(s, t, FK_UNWOUND, 0, 0, t->seg_begin, t->min_level - 1,
			      MTEV_SPAN_INFERRED_START))
			return s->err;
		t->fr[t->nfr - 1].promoted = 1;
		if (pop(s, t, time))
			return s->err;
	}
	if (add_root(s, t, x, 1))
		return s->err;
	t->fr[t->stk[0]].func = x;
	t->rfi = UINT32_MAX;
	return 0;
}

/* Where control went by a jump (or a resume): same function, tail call, or
 * an ancestor (longjmp). */
static int classify_jump(segmenter *s, struct thr *t, uint64_t from, uint64_t to, uint64_t time,
			 int jcc)
{
	uint64_t lo, hi;
	uint32_t cur = t->stk[t->nstk - 1];
	if (t->fr[cur].stub) {
		/* stubs are invisible: the frame entered through a stub is its
		 * target's, from where the stub was entered */
		const struct rcache *c = fn_lookup(s, t, to);
		if (c->ok && c->is_plt) /* still stub code (lazy binding: PLT0) */
			return 0;
		t->fr[cur].func = c->ok ? c->lo : to;
		t->fr[cur].stub = 0;
		t->rfi = UINT32_MAX;
		return 0;
	}
	int have = frame_range(s, t, cur, &lo, &hi);
	if (have && to >= lo && to < hi)
		return 0;
	/* a copy: frame_range below may reuse the cache entry */
	const struct rcache fi = *fn_lookup(s, t, to);
	if (fi.ok) {
		if (fi.is_plt) { /* a jump into a stub: a tail call to its target */
			if (tail_call(s, t, to, time))
				return s->err;
			top(t)->stub = 1;
			return 0;
		}
		/* a conditional branch to a function's first byte is taken
		 * for a branch inside its own function (into a .cold part that
		 * only an FDE names, in a stripped file), never for a call */
		if (to == fi.lo && !fi.cold && !jcc)
			return tail_call(s, t, to, time);
		/* into an ancestor's body or its .cold part: longjmp, or the
		 * unwinder landing in a caller's landing pad */
		size_t i = owner_frame(s, t, to, t->nstk);
		if (i == t->nstk - 1)
			return 0;
		if (i != SIZE_MAX) {
			s->st.unwinds++;
			return pop_to(s, t, i + 1, time);
		}
		/* into another function's body that is on no frame of the stack.
		 * By an indirect jmp, or (the jump itself unseen: a trace start)
		 * at a return site (just after a direct call): a longjmp or an
		 * exception landing pad in a caller above the root (the trace
		 * began below it).  How many frames lay between is unknowable,
		 * so the segment ends here and a new one begins in that caller
		 * (no gap record: nothing was lost); mt-stitch aligns the two by
		 * function.  Elsewhere the frame stays: a conditional branch or
		 * a direct jmp (into a .cold part that only an FDE names, whose
		 * code may well follow a call to a noreturn function; into code
		 * shared between functions), the lazy-binding path into .plt. */
		if (jcc || fi.is_plt || t->fr[t->stk[0]].callsite || t->fr[t->stk[0]].kind != FK_FUNC ||
		    (from ? !fnmap_is_indirect_jump(s->o.fns, t->tid, from)
			  : !fnmap_is_return_site(s->o.fns, t->tid, to)))
			return 0;
		/* into the code of a function a frame runs, which owner_frame
		 * does not see (a stripped file's cold part, only an FDE names
		 * it: a switch's jump table in python3.11's hot part lands
		 * there): that frame's own code, the frames above it end */
		size_t j = func_frame(t, landing_func(s, t, to));
		if (j == t->nstk - 1)
			return 0;
		s->st.unwinds++;
		if (j != SIZE_MAX)
			return pop_to(s, t, j + 1, time);
		/* an exception landing or a longjmp: in the thread's first
		 * segment, or in one that began after a gap, nothing in the
		 * segment can tell the frames between (a snapshot that began
		 * inside the unwinder, or below a setjmp; a throw whose call
		 * the gap swallowed): the landing function goes below the
		 * root, and mt-stitch aligns it with the earlier segment's
		 * stack.  Otherwise a new segment begins at the landing
		 * caller, aligned by function. */
		int exc = fi.cold || unwinder_frame(s, t, cur);
		if (!t->nseg || land_after_gap(t) || (exc && !lands_as_before(s, t, to)))
			return land_below_root(s, t, from, to, time, exc);
		if (close_seg(s, t))
			return s->err;
		t->active = 1;
		t->seg_begin = t->last_time = t->run_time = time;
		return add_root(s, t, to, 0);
	}
	/* no symbol for the target: only what calls revealed */
	if (!s->o.no_call_targets && !jcc && tgt_has(s, to) && to != t->fr[cur].func)
		return tail_call(s, t, to, time);
	return 0;
}

static int do_call(segmenter *s, struct thr *t, const struct mtev_rec *r)
{
	if (ensure_root(s, t, r->br.from) || close_synthetic(s, t, r->br.time) ||
	    ensure_root(s, t, r->br.from) || waypoint_at(s, t, r->br.from, 1))
		return s->err;
	if (tgt_add(s, r->br.to))
		return s->err = -SEG_ENOMEM;
	if (push(s, t, FK_FUNC, r->br.to, r->br.from, r->br.time))
		return s->err;
	if (s->o.fns) {
		const struct rcache *c = fn_lookup(s, t, r->br.to);
		top(t)->stub = (uint8_t)(c->ok && c->is_plt);
	}
	return waypoint(s, t, r->br.to);
}

/* Is @ip the kernel's signal return trampoline (glibc's __restore_rt:
 * mov $15,%rax; syscall, i.e. rt_sigreturn)?  By its code, so that a
 * stripped libc or a static program is recognised alike. */
static int is_sigtramp(segmenter *s, struct thr *t, uint64_t ip)
{
	static const uint8_t tramp[9] = {0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05};
	uint8_t b[9];
	return s->o.fns && fnmap_read(s->o.fns, t->tid, ip, b, sizeof b) == sizeof b &&
	       !memcmp(b, tramp, sizeof b);
}

static int do_return(segmenter *s, struct thr *t, const struct mtev_rec *r)
{
	uint64_t to = r->br.to, time = r->br.time;
	if (ensure_root(s, t, r->br.from) || close_synthetic(s, t, time) ||
	    ensure_root(s, t, r->br.from) || waypoint(s, t, r->br.from))
		return s->err;
	size_t i = t->nstk;
	int matched = 0, at_root = 0;
	while (i > 0) {
		const struct frame *g = &t->fr[t->stk[--i]];
		if (g->kind == FK_SIGNAL && !g->callsite) {
			matched = i == t->nstk - 1; /* the handler returns to the trampoline */
			break;
		}
		if (g->callsite && to > g->callsite && to - g->callsite <= 15) {
			matched = 1;
			break;
		}
		if (!g->callsite) {
			at_root = 1;
			break;
		}
	}
	if (matched) {
		if (i + 1 < t->nstk)
			s->st.unwinds++;
		if (pop_to(s, t, i, time))
			return s->err;
	} else if (at_root && i == t->nstk - 1 && i == 0) {
		/* the root returns: its caller was live since the segment began;
		 * into the sigreturn trampoline: the root was a signal handler,
		 * under the frame the signal interrupted (do_resume names it) */
		if (t->nrr == t->caprr && mt_grow((void **)&t->rr, &t->caprr, t->nrr + 1, sizeof *t->rr))
			return s->err = -SEG_ENOMEM;
		t->rr[t->nrr++] = (struct rootret){t->stk[0], to};
		if (pop_to(s, t, 0, time) || add_root(s, t, to, 1))
			return s->err;
		if (is_sigtramp(s, t, to))
			top(t)->sigret = 1;
	} else {
		/* does not fit the stack: unwind to an ancestor holding the
		 * target if symbols say so, else return to the parent */
		size_t j = owner_frame(s, t, to, t->nstk - 1);
		int found = j != SIZE_MAX;
		s->st.anomalies++;
		if (pop_to(s, t, found ? j + 1 : t->nstk - 1, time))
			return s->err;
		if (!t->nstk && add_root(s, t, to, 1))
			return s->err;
	}
	return waypoint(s, t, to);
}

static int do_jump(segmenter *s, struct thr *t, const struct mtev_rec *r)
{
	if (ensure_root(s, t, r->br.from) || close_synthetic(s, t, r->br.time) ||
	    ensure_root(s, t, r->br.from) || waypoint(s, t, r->br.from) ||
	    classify_jump(s, t, r->br.type == MTEV_BR_JUMP ? r->br.from : 0, r->br.to, r->br.time,
			  r->br.type == MTEV_BR_JCC))
		return s->err;
	return waypoint(s, t, r->br.to);
}

static int do_enter_kernel(segmenter *s, struct thr *t, const struct mtev_rec *r, uint8_t kind)
{
	if (ensure_root(s, t, r->br.from) || close_synthetic(s, t, r->br.time) ||
	    ensure_root(s, t, r->br.from) || waypoint_at(s, t, r->br.from, 1))
		return s->err;
	/* syscall, int $0x80, sysenter are 2 bytes; an interrupt resumes at
	 * the ip it reported */
	t->expect = kind == FK_SYSCALL ? r->br.from + 2 : r->br.from;
	t->have_expect = r->br.from != 0;
	return push(s, t, kind, 0, r->br.from, r->br.time);
}

static int do_resume(segmenter *s, struct thr *t, const struct mtev_rec *r)
{
	uint64_t to = r->br.to, time = r->br.time;
	if (!t->nstk) { /* the segment begins here */
		t->have_expect = 0;
		if (ensure_root(s, t, to))
			return s->err;
		return waypoint(s, t, to);
	}
	struct frame *f = top(t);
	if (f->kind == FK_SYSCALL || f->kind == FK_INTERRUPT) {
		if (pop(s, t, time))
			return s->err;
	}
	if (close_synthetic(s, t, time) || ensure_root(s, t, to))
		return s->err;
	int expect = t->have_expect;
	t->have_expect = 0;
	if (expect && to == t->expect)
		return waypoint(s, t, to);
	f = top(t);
	if (f->sigret && expect) { /* rt_sigreturn: the interrupted frame continues */
		f->func = func_entry(s, t, to);
		f->sigret = 0;
		t->rfi = UINT32_MAX;
		return waypoint(s, t, to);
	}
	/* rt_sigreturn: resumes where a handler's interrupted code stopped */
	for (size_t i = t->nsig; i-- > 0;) {
		if (t->sig[i].resume && t->sig[i].resume == to) {
			int32_t lvl = t->sig[i].level;
			size_t n = t->nstk;
			while (n > 0 && t->fr[t->stk[n - 1]].level >= lvl)
				n--;
			if (pop_to(s, t, n, time))
				return s->err;
			t->nsig = i;
			if (ensure_root(s, t, to))
				return s->err;
			return waypoint(s, t, to);
		}
	}
	/* a restarted system call, or an address in the same function */
	uint64_t lo, hi;
	if ((expect && to + 2 == t->expect) ||
	    (frame_range(s, t, t->stk[t->nstk - 1], &lo, &hi) && to >= lo && to < hi) ||
	    (!expect && !s->o.fns))
		return waypoint(s, t, to);
	/* the kernel entered a signal handler, nested under the interrupted frame */
	if (t->nsig == t->capsig && mt_grow((void **)&t->sig, &t->capsig, t->nsig + 1, sizeof *t->sig))
		return s->err = -SEG_ENOMEM;
	if (push(s, t, FK_SIGNAL, to, 0, time))
		return s->err;
	t->sig[t->nsig++] = (struct sigctx){top(t)->level, expect ? t->expect : 0};
	s->st.signals++;
	return waypoint(s, t, to);
}

static int do_trace_start(segmenter *s, struct thr *t, const struct mtev_rec *r)
{
	if (!t->nstk) {
		if (ensure_root(s, t, r->br.to))
			return s->err;
		return waypoint(s, t, r->br.to);
	}
	struct frame *f = top(t);
	if (f->kind == FK_UNTRACED && pop(s, t, r->br.time))
		return s->err;
	t->off = 0;
	if (close_synthetic(s, t, r->br.time) || ensure_root(s, t, r->br.to) ||
	    classify_jump(s, t, r->br.type == MTEV_BR_JUMP ? r->br.from : 0, r->br.to, r->br.time,
			  r->br.type == MTEV_BR_JCC))
		return s->err;
	return waypoint(s, t, r->br.to);
}

static int do_trace_end(segmenter *s, struct thr *t, const struct mtev_rec *r)
{
	if (r->br.from && (ensure_root(s, t, r->br.from) || waypoint(s, t, r->br.from)))
		return s->err;
	if (!t->nstk)
		return 0;
	t->off = 1;
	t->off_time = r->br.time;
	/* [untraced] until tracing resumes; dropped if it never does */
	return push(s, t, FK_UNTRACED, 0, 0, r->br.time);
}

/* ---- output ---- */

static int emit(segmenter *s, const struct mtev_rec *r)
{
	if (s->emit(s->ctx, r))
		return s->err = -SEG_EEMIT;
	return 0;
}

static inline __attribute__((always_inline)) int emit_span(segmenter *s, struct thr *t,
							   const struct frame *f)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_SPAN;
	r.span.tid = t->tid;
	r.span.depth = (uint32_t)(f->level - t->min_level);
	r.span.begin = f->begin;
	r.span.end = f->end;
	r.span.func = f->kind <= FK_SIGNAL ? f->func : 0;
	r.span.callsite = f->flags & MTEV_SPAN_SAMPLED ? 0 : f->callsite;
	r.span.flags = f->flags;
	switch (f->kind) {
	case FK_SYSCALL:
		r.span.flags |= MTEV_SPAN_SYSCALL | MTEV_SPAN_UNTRACED;
		r.span.name = mtev_cstr("[syscall]");
		break;
	case FK_INTERRUPT:
		r.span.flags |= MTEV_SPAN_INTERRUPT | MTEV_SPAN_UNTRACED;
		r.span.name = mtev_cstr("[interrupt]");
		break;
	case FK_UNTRACED:
		r.span.flags |= MTEV_SPAN_UNTRACED;
		r.span.name = mtev_cstr("[untraced]");
		break;
	case FK_UNWOUND:
		r.span.name = mtev_cstr("[unwound]");
		break;
	}
	s->st.spans++;
	return emit(s, &r);
}

/* ---- the call chain at a trigger: the frames older than the trace ----
 * (libcommon/chainjoin.h, docs/exactness.md) */

static int seg_chain(segmenter *s, const struct mtev_rec *r)
{
	struct thr *t = get_thr(s, r->sample.tid);
	if (!t)
		return s->err = -SEG_ENOMEM;
	s->st.chains++;
	if (t->nchain) /* a later chain replaces one not joined yet */
		s->st.chains_unjoined++;
	if (mt_grow((void **)&t->chain, &t->capchain, r->sample.nips ? r->sample.nips : 1,
		    sizeof *t->chain))
		return s->err = -SEG_ENOMEM;
	memcpy(t->chain, r->sample.ips, r->sample.nips * sizeof *t->chain);
	t->nchain = r->sample.nips;
	t->chain_time = r->sample.time;
	return 0;
}

static uint64_t chain_entry(void *ctx, uint64_t addr)
{
	void **c = ctx;
	return func_entry(c[0], c[1], addr);
}

/* The frames live at @time, by level (the frames of the segment that began
 * at or before it and had not ended), as frame indices into @v.  Returns
 * how many; 0 when a level has none or two. */
static size_t live_at(struct thr *t, uint64_t time, uint64_t *v)
{
	size_t n = 0;
	if (time >= t->last_time) { /* the open stack */
		for (size_t i = 0; i < t->nstk; i++)
			v[n++] = t->stk[i];
		return n;
	}
	for (size_t i = 0; i < t->nfr; i++) {
		const struct frame *f = &t->fr[i];
		if (f->kind == FK_DELETED || f->begin > time)
			continue;
		int open = 0;
		for (size_t k = 0; k < t->nstk && !open; k++)
			open = t->stk[k] == i;
		if (!open && f->end <= time)
			continue;
		size_t d = (size_t)(f->level - t->min_level);
		if (d >= t->nfr)
			return 0;
		while (n <= d)
			v[n++] = UINT64_MAX;
		if (v[d] != UINT64_MAX)
			return 0;
		v[d] = i;
	}
	for (size_t d = 0; d < n; d++)
		if (v[d] == UINT64_MAX)
			return 0;
	return n;
}

/* Called as the segment closes: when the thread's chain falls in it, its
 * frames beyond the segment's root become roots below it, live over the
 * whole segment (flags inferred-start, open-at-end, callchain). */
static int chain_outer(segmenter *s, struct thr *t)
{
	if (t->chain_time < t->seg_begin)
		return 0; /* for a later segment (or one already written) */
	size_t need = 2 * (t->nfr + 1) + t->nchain;
	if (mt_grow((void **)&s->chs, &s->capchs, need, sizeof *s->chs))
		return s->err = -SEG_ENOMEM;
	uint64_t *idx = s->chs, *stack = idx + t->nfr + 1;
	size_t n = live_at(t, t->chain_time, idx);
	/* the chain's ip is in user code: the [syscall], [interrupt] or
	 * [untraced] frame on top has no entry in it */
	while (n && t->fr[idx[n - 1]].kind >= FK_SYSCALL)
		n--;
	uint64_t *out = stack + n;
	int k = -1;
	if (n && (t->fr[idx[0]].flags & MTEV_SPAN_SAMPLED)) {
		/* a sampling recording: its samples carry their own stacks */
		t->nchain = 0;
		s->st.chains_sampled++;
		return 0;
	}
	if (n) {
		for (size_t d = 0; d < n; d++)
			stack[d] = t->fr[idx[d]].func;
		void *ctx[2] = {s, t};
		k = chainjoin(t->chain, t->nchain, stack, n, chain_entry, ctx, out, t->nchain);
	}
	t->nchain = 0;
	if (k < 0) {
		s->st.chains_unjoined++;
		return 0;
	}
	s->st.chains_joined++;
	s->st.chain_frames += (uint64_t)k;
	/* outermost last: the promoted roots are written from the last one */
	for (int i = k; i-- > 0;) {
		if (new_frame(s, t, FK_FUNC, out[i], 0, t->seg_begin, t->min_level - 1,
			      MTEV_SPAN_INFERRED_START | MTEV_SPAN_CALLCHAIN))
			return s->err;
		t->fr[t->nfr - 1].promoted = 1;
	}
	return 0;
}

/* Writes the waypoints before @limit: the cursor's pending entry (if
 * @c->have) and the following ones while their time is below @limit. */
struct wpout {
	const uint32_t *q;	 /* the pending entry (set by wpout_next) */
	const uint32_t *p, *end; /* entries after the pending one */
	uint64_t time, addr;	 /* the pending entry */
	int32_t depth;
	int have;
};

static void wpout_next(struct wpout *c, int32_t min)
{
	struct wpcur w = {c->p, c->end, c->time, c->addr, c->depth + min};
	c->q = c->p;
	c->have = wpcur_next(&w);
	c->p = w.p;
	c->time = w.time;
	c->addr = w.addr;
	c->depth = w.level - min;
}

static NO_SLP int emit_wps_before(segmenter *s, struct thr *t, struct wpout *c, uint64_t limit)
{
	if (!c->have || c->time >= limit)
		return 0;
	struct mtev_rec r;
	r.kind = MTEV_WAYPOINT;
	r.waypoint.tid = t->tid;
	/* the cursor in locals; short entries decoded here */
	const uint32_t *p = c->p;
	uint64_t time = c->time, addr = c->addr;
	int32_t depth = c->depth;
	for (;;) {
		r.waypoint.time = time;
		r.waypoint.addr = addr;
		r.waypoint.depth = (uint32_t)depth;
		if (s->emit(s->ctx, &r))
			return s->err = -SEG_EEMIT;
		if (p == c->end) {
			c->have = 0;
			return 0;
		}
		uint32_t w = *p;
		if (__builtin_expect(!(w & 1), 1)) {
			p++;
			depth += (int32_t)((w >> 1) & 3) - 1;
			time += (w >> 3) & 1023;
			addr += (uint64_t)(int64_t)((int32_t)w >> 13);
		} else {
			c->p = p;
			c->time = time;
			c->addr = addr;
			c->depth = depth;
			wpout_next(c, t->min_level);
			p = c->p;
			time = c->time;
			addr = c->addr;
			depth = c->depth;
		}
		if (time >= limit)
			break;
	}
	c->p = p;
	c->time = time;
	c->addr = addr;
	c->depth = depth;
	return 0;
}

/* One waypoint whatever its time (the pending one, at UINT64_MAX). */
/* emit_wps_before for a wprun callback: the entries as words. */
static int emit_wprun_before(segmenter *s, struct thr *t, struct wpout *c, uint64_t limit)
{
	if (!c->have || c->time >= limit)
		return 0;
	int32_t min = t->min_level;
	struct wprun run = {c->q, c->p, c->end, c->time, c->addr, c->depth + min, -min, limit, 1, 0};
	if (s->o.wprun(s->ctx, t->tid, &run))
		return s->err = -SEG_EEMIT;
	c->q = run.q;
	c->p = run.p;
	c->time = run.time;
	c->addr = run.addr;
	c->depth = run.level - min;
	c->have = run.have;
	return 0;
}

static inline int emit_wps(segmenter *s, struct thr *t, struct wpout *c, uint64_t limit)
{
	if (!c->have || c->time >= limit) /* both's first test: mostly, no call */
		return 0;
	return s->o.wprun ? emit_wprun_before(s, t, c, limit) : emit_wps_before(s, t, c, limit);
}

static int emit_wps_before_max(segmenter *s, struct thr *t, struct wpout *c)
{
	struct mtev_rec r;
	r.kind = MTEV_WAYPOINT;
	r.waypoint.tid = t->tid;
	r.waypoint.time = c->time;
	r.waypoint.addr = c->addr;
	r.waypoint.depth = (uint32_t)c->depth;
	if (s->emit(s->ctx, &r))
		return s->err = -SEG_EEMIT;
	wpout_next(c, t->min_level);
	return 0;
}

/* stable sort of frame indices by level (insertion: blocks are small) */
static void blk_sort(const struct frame *fr, uint32_t *v, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		uint32_t x = v[i];
		size_t j = i;
		while (j > 0 && fr[v[j - 1]].level > fr[x].level) {
			v[j] = v[j - 1];
			j--;
		}
		v[j] = x;
	}
}

/* A root the segment began in is named by the function holding its
 * address, and has no call site.  When it returned to a direct call (E8):
 * if that call's other calls in the segment all entered one function X
 * (the call's own target being a PLT stub) and X's code jumps into the
 * root's function's body, the root was X (glibc's mempcpy jumps into
 * memmove's body, and a window that begins there is in mempcpy's frame:
 * the probe corpus' seq, whose mempcpy mt-ptsim's truth names by the
 * call); and the call is its call site when it enters its function
 * directly or through a PLT stub: mt-stitch tells two activations apart by
 * it (the probe corpus' fold overflow@25 %: ld.so's strcmp returned and was
 * called again from another site inside a gap, and was joined). */
static void name_roots(segmenter *s, struct thr *t)
{
	if (!s->o.fns)
		return;
	/* t->rr is in frame order: a root returns once (it is popped), and
	 * the next root is a frame made after it */
	for (size_t k = 0; k < t->nrr; k++) {
		struct frame *f = &t->fr[t->rr[k].fi];
		uint64_t ret = t->rr[k].ret;
		if (f->kind != FK_FUNC || !ret || f->callsite || !f->func ||
		    !(f->flags & MTEV_SPAN_INFERRED_START))
			continue;
		uint64_t to = fnmap_call_target(s->o.fns, t->tid, ret), cs = ret - 5, x = 0;
		if (!to)
			continue;
		for (size_t j = 0; to != f->func && j < t->nfr; j++) {
			const struct frame *g = &t->fr[j];
			if (g->kind != FK_FUNC || g->callsite != cs)
				continue;
			if (x && g->func != x) {
				x = 0;
				break;
			}
			x = g->func;
		}
		if (x && x != f->func && fnmap_jumps_into(s->o.fns, t->tid, x, f->func))
			f->func = x;
		if (to == f->func) {
			f->callsite = cs;
		} else {
			const struct rcache *c = fn_lookup(s, t, to);
			if (c->ok && c->is_plt)
				f->callsite = cs;
		}
	}
}

static int close_seg(segmenter *s, struct thr *t)
{
	t->lin = 0;
	if (!t->active)
		return 0;
	if (close_run(s, t, t->run_time))
		return s->err;
	struct frame *f = top(t);
	if (f && f->kind == FK_UNTRACED) { /* tracing never resumed */
		f->kind = FK_DELETED;
		t->nstk--;
	} else if (f && f->stub) {
		/* still in PLT stub code (the stub, its lazy path through PLT0)
		 * when the segment ends: its jump out was lost, the target is
		 * unknown, and stubs are never shown (docs/exactness.md) */
		f->kind = FK_DELETED;
		t->nstk--;
	}
	if (t->nchain && chain_outer(s, t))
		return s->err;
	uint64_t end = t->last_time;
	for (size_t i = 0; i < t->nstk; i++) {
		struct frame *g = &t->fr[t->stk[i]];
		g->end = end;
		g->flags |= MTEV_SPAN_OPEN_AT_END;
	}
	name_roots(s, t);
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_SEGMENT;
	r.segment.tid = t->tid;
	r.segment.index = t->nseg++;
	r.segment.begin = t->seg_begin;
	r.segment.end = end;
	r.segment.reason = t->next_reason;
	s->st.segments++;
	if (emit(s, &r))
		return s->err;
	struct wpout c = {t->wl.v, t->wl.v, t->wl.v + t->wl.n, 0, 0, -t->min_level, 0};
	wpout_next(&c, t->min_level);
	/* pre-order: the promoted roots, outermost first (they began at the
	 * segment start and hold everything before them), then every other
	 * frame in creation order */
	for (size_t i = t->nfr; i-- > 0;)
		if (t->fr[i].promoted && emit_span(s, t, &t->fr[i]))
			return s->err;
	for (size_t i = 0; i < t->nfr;) {
		const struct frame *g = &t->fr[i];
		if (g->promoted || g->kind == FK_DELETED) {
			i++;
			continue;
		}
		/* frames opened at one time (when the run could not be spread)
		 * go by depth, as the span order requires */
		size_t j = i + 1, nb = 0;
		while (j < t->nfr && t->fr[j].begin == g->begin)
			j++;
		if (j - i > 1) {
			if (mt_grow((void **)&t->blk, &t->capblk, j - i, sizeof *t->blk))
				return s->err = -SEG_ENOMEM;
			for (size_t x = i; x < j; x++)
				if (!t->fr[x].promoted && t->fr[x].kind != FK_DELETED)
					t->blk[nb++] = (uint32_t)x;
			blk_sort(t->fr, t->blk, nb);
		} else
			t->blk_one = (uint32_t)i, nb = 1;
		const uint32_t *ord = j - i > 1 ? t->blk : &t->blk_one;
		for (size_t x = 0; x < nb; x++) {
			const struct frame *h = &t->fr[ord[x]];
			if (emit_wps(s, t, &c, h->begin) || emit_span(s, t, h))
				return s->err;
		}
		i = j;
	}
	/* the rest (a time of UINT64_MAX included) */
	while (c.have)
		if (emit_wps(s, t, &c, UINT64_MAX) ||
		    (c.have && emit_wps_before_max(s, t, &c)))
			return s->err;
	s->st.waypoints += t->wl.count;
	/* frames of a segment beginning in this run may join these (mt-stitch) */
	t->pop_run = t->kid_run = t->run_time;
	t->pop_lo = INT32_MIN;
	t->pop_hi = INT32_MAX;
	t->kid_all = 1;
	t->nkid = 0;
	t->active = 0;
	t->off = 0;
	t->nfr = t->nstk = t->nrun = t->nsig = t->nrr = 0;
	t->rfi = UINT32_MAX;
	wplog_clear(&t->wl);
	t->run_k = 0;
	t->min_level = 0;
	t->have_expect = 0;
	t->next_reason = 0;
	return 0;
}

/* ---- stack samples ----
 * A sample's stack is its callchain repaired by libcommon/sampstack.h (a
 * hidden caller of a frameless leaf, a root cut off aligned with the
 * thread's previous stack); inferred frames are marked stitched.  A frame is
 * the same activation in consecutive samples when its function and those of
 * all its ancestors are the same and so are the return addresses that link
 * them.  It begins at the first sample that shows it and ends at the first
 * sample that no longer does (the last sample of the thread for frames still
 * shown then, flag open-at-end); frames of the first sample began before it
 * (flag inferred-start). */
static uint32_t inferred_flag(uint8_t how)
{
	return how == SSTK_STITCHED ? MTEV_SPAN_STITCHED
	       : how == SSTK_ROOTED ? MTEV_SPAN_CALLCHAIN
				    : 0;
}

static int seg_sample(segmenter *s, const struct mtev_rec *r)
{
	struct thr *t = get_thr(s, r->sample.tid);
	if (!t)
		return s->err = -SEG_ENOMEM;
	uint64_t time = r->sample.time;
	int first = !t->active;
	if (first) {
		t->active = 1;
		t->seg_begin = t->last_time = t->run_time = time;
	}
	if (time < t->last_time) {
		s->st.anomalies++;
		time = t->last_time;
	}
	t->last_time = t->run_time = time;
	size_t max = (size_t)r->sample.nips + 1 + t->nstk;
	if (mt_grow((void **)&s->sprev, &s->capsprev, t->nstk + 1, sizeof *s->sprev) ||
	    mt_grow((void **)&s->sout, &s->capsout, max, sizeof *s->sout))
		return s->err = -SEG_ENOMEM;
	for (size_t d = 0; d < t->nstk; d++) {
		const struct frame *f = &t->fr[t->stk[d]];
		s->sprev[d] = (struct sstk_frame){f->func, f->callsite, 0};
	}
	uint32_t nroot = (r->sample.flags & MTEV_SAMPLE_ROOTED_MASK) >> MTEV_SAMPLE_ROOTED_SHIFT;
	size_t n = sampstack_build(s->o.fns, t->tid, r->sample.ips, r->sample.nips, nroot, s->sprev,
				   t->nstk, s->sout, max,
				   s->o.no_sample_repair ? SSTK_NO_REPAIR : 0);
	const struct sstk_frame *st = s->sout;
	/* root first: the frames shared with the previous sample go on */
	size_t d = 0;
	for (; d < n && d < t->nstk; d++) {
		struct frame *f = &t->fr[t->stk[d]];
		if (f->callsite != st[d].link || f->func != st[d].func)
			break;
		f->flags |= inferred_flag(st[d].inferred);
	}
	while (t->nstk > d)
		t->fr[t->stk[--t->nstk]].end = time;
	for (; d < n; d++)
		if (new_frame(s, t, FK_FUNC, st[d].func, st[d].link, time, (int32_t)d,
			      MTEV_SPAN_SAMPLED | (first ? MTEV_SPAN_INFERRED_START : 0) |
				      inferred_flag(st[d].inferred)))
			return s->err;
	s->st.sample_inferred += n && st[0].inferred == SSTK_STITCHED;
	if (n && !s->o.no_waypoints)
		return wp_append(s, t, time, r->sample.ips[0], (int32_t)n - 1);
	return 0;
}

/* Inline frames on a fall-through path: the straight-line run [@lin, @from]
 * executed between two taken branches (in the top frame's function) may
 * enter or leave an inline expansion, or go from one to another, where no
 * branch lands; a waypoint at each address inside it where a range of an
 * inlined subroutine begins or ends (dwcov_inline_bounds; wp_keep decides
 * as for any waypoint) lets mt-symbolize change the inline frames there.
 * The waypoints have the time of the branch that ends the run. */
static int inline_cross(segmenter *s, struct thr *t, uint64_t lin, uint64_t from)
{
	uint64_t lo, hi;
	uint32_t fi = t->stk[t->nstk - 1];
	if (from - lin > 65536 || t->fr[fi].kind != FK_FUNC || !frame_range(s, t, fi, &lo, &hi))
		return 0;
	const struct rcache *c;
	if (lin >= lo && from < hi) {
		if (!t->rdw || !t->rninl)
			return 0;
		c = fn_lookup(s, t, t->fr[fi].func);
	} else {
		/* the frame's own code in another symbol: its .cold part
		 * (a throw's code, inlined constructors and all), with its
		 * own inline ranges */
		c = fn_lookup(s, t, lin);
		if (!c->ok || !c->cold || !c->dw || !c->ninl || lin < c->lo || from >= c->hi)
			return 0;
	}
	const uint64_t *b = c->inlb;
	uint64_t bias = c->inlb_bias;
	size_t n = c->ninlb, a = 0, z = n;
	if (!n || lin - bias >= b[n - 1])
		return 0;
	while (a < z) { /* the first boundary after lin */
		size_t m = a + (z - a) / 2;
		if (b[m] <= lin - bias)
			a = m + 1;
		else
			z = m;
	}
	for (; a < n && b[a] < from - bias; a++)
		if (waypoint(s, t, b[a] + bias))
			return s->err;
	return 0;
}

static inline __attribute__((always_inline)) int do_branch(segmenter *s, const struct mtev_rec *r)
{
	struct thr *t = get_thr(s, r->br.tid);
	if (!t)
		return s->err = -SEG_ENOMEM;
	uint64_t time = r->br.time;
	s->st.branches++;
	if (__builtin_expect(!t->active, 0) && r->br.type == MTEV_BR_TRACE_END && !r->br.from)
		/* tracing stopped before anything of it was known (right after
		 * a gap, formats/mtev-semantics.md): no segment begins */
		return 0;
	if (__builtin_expect(!r->br.to, 0) &&
	    (r->br.type == MTEV_BR_SYSRET || r->br.type == MTEV_BR_IRET ||
	     r->br.type == MTEV_BR_TRACE_START)) {
		/* where tracing resumes is the record's whole content
		 * (formats/mtev-semantics.md): without it the stack is lost */
		s->detail = r->br.type;
		return s->err = -SEG_EBRANCH;
	}
	if (!t->active) {
		t->active = 1;
		t->seg_begin = t->last_time = t->run_time = time;
	}
	if (time < t->last_time) { /* tolerated: treated as simultaneous */
		s->st.anomalies++;
		time = t->last_time;
	}
	if (time != t->run_time) {
		if (t->nrun && close_run(s, t, time))
			return s->err;
		t->run_k = 0;
		t->run_time = time;
	}
	t->last_time = time;
	unsigned type = r->br.type;
	uint64_t lin = t->lin;
	t->lin = r->br.to;
	/* inline_cross, unless frame_range's cache says it has nothing to do
	 * (qlo, qhi: the run lies in a function without inline ranges) */
	if (lin && r->br.from > lin && t->nstk && !s->o.no_waypoints) {
		/* qhi first: 0 (nothing quiet) with --all-waypoints */
		if (r->br.from < t->qhi && lin >= t->qlo && t->stk[t->nstk - 1] == t->rfi &&
		    t->rgen == s->gen) {
			/* and a jump inside that function, without DWARF: both
			 * waypoints left out (the fast path below, its range
			 * and the top frame's known here) */
			if ((type == MTEV_BR_JCC || type == MTEV_BR_JUMP) && t->run_k <= 1 && !t->rdw &&
			    r->br.to && r->br.to >= t->rlo && r->br.to < t->rhi) {
				s->st.wp_elided += 2;
				return 0;
			}
		} else if (inline_cross(s, t, lin, r->br.from)) {
			return s->err;
		}
	}
	/* the common case first: a jump inside the current function leaves
	 * two waypoints and nothing else (what do_jump does for it) */
	if ((type == MTEV_BR_JCC || type == MTEV_BR_JUMP) && t->nstk && t->run_k <= 1 &&
	    !s->o.no_waypoints && r->br.from && r->br.to) {
		uint32_t fi = t->stk[t->nstk - 1];
		uint64_t lo, hi;
		if (frame_range(s, t, fi, &lo, &hi) && r->br.to >= lo && r->br.to < hi) {
			int32_t level = t->fr[fi].level;
			if (__builtin_expect(!t->rdw, 0)) { /* no DWARF: wp_wanted's rule */
				s->st.wp_elided++;
				if (r->br.from >= lo && r->br.from < hi) {
					s->st.wp_elided++;
					return 0;
				}
				t->fr[fi].wp_open = 1;
				return wp_append(s, t, time, r->br.from, level);
			}
			if (s->o.all_waypoints)
				return wp_pair(s, t, time, r->br.from, level, r->br.to, level);
			int k1 = wp_keep(s, t, fi, r->br.from, lo, hi, 0);
			int k2 = wp_keep(s, t, fi, r->br.to, lo, hi, 0);
			return wp_pair_if(s, t, time, k1, r->br.from, level, k2, r->br.to, level);
		}
	}
	/* a call or a return that fits the stack, first in its run: what
	 * do_call and do_return do for it */
	if (type <= MTEV_BR_RETURN && t->nstk && t->run_k <= 1 && !s->o.no_waypoints && r->br.from &&
	    r->br.to) {
		struct frame *f = &t->fr[t->stk[t->nstk - 1]];
		int32_t level = f->level;
		uint64_t from = r->br.from, to = r->br.to;
		if (type == MTEV_BR_CALL && t->run_k == 0 && f->kind < FK_SYSCALL) {
			if (tgt_add(s, to))
				return s->err = -SEG_ENOMEM;
			int k1 = wp_wanted(s, t, from, 1);
			if (new_frame(s, t, FK_FUNC, to, from, time, level + 1, 0))
				return s->err;
			if (s->o.fns) { /* a call through a PLT stub (classify_jump) */
				const struct rcache *c = fn_lookup(s, t, to);
				t->fr[t->nfr - 1].stub = (uint8_t)(c->ok && c->is_plt);
			}
			t->run_k = 1;
			return wp_pair_if(s, t, time, k1, from, level, wp_wanted(s, t, to, 0), to,
					  level + 1);
		}
		if (type == MTEV_BR_RETURN && t->nstk >= 2 && f->kind == FK_FUNC && f->callsite &&
		    to > f->callsite && to - f->callsite <= 15) {
			int k1 = wp_wanted(s, t, from, 0);
			f->end = time;
			t->nstk--;
			note_pop(t, level);
			int32_t up = t->fr[t->stk[t->nstk - 1]].level;
			while (t->nsig && t->sig[t->nsig - 1].level > up + 1)
				t->nsig--;
			return wp_pair_if(s, t, time, k1, from, level, wp_wanted(s, t, to, 0), to, up);
		}
	}
	struct mtev_rec rr;
	if (time != r->br.time) {
		rr = *r;
		rr.br.time = time;
		r = &rr;
	}
	switch (type) {
	case MTEV_BR_CALL:
		return do_call(s, t, r);
	case MTEV_BR_RETURN:
		return do_return(s, t, r);
	case MTEV_BR_JUMP:
	case MTEV_BR_JCC:
		return do_jump(s, t, r);
	case MTEV_BR_SYSCALL:
		return do_enter_kernel(s, t, r, FK_SYSCALL);
	case MTEV_BR_INTERRUPT:
		return do_enter_kernel(s, t, r, FK_INTERRUPT);
	case MTEV_BR_SYSRET:
	case MTEV_BR_IRET:
		return do_resume(s, t, r);
	case MTEV_BR_TRACE_START:
		return do_trace_start(s, t, r);
	case MTEV_BR_TRACE_END:
		return do_trace_end(s, t, r);
	}
	s->st.anomalies++;
	return 0;
}

static int feed_other(segmenter *s, const struct mtev_rec *r);

int seg_feed(segmenter *s, const struct mtev_rec *r)
{
	size_t at;
	return seg_feed_n(s, r, 1, &at);
}

int seg_feed_n(segmenter *s, const struct mtev_rec *r, size_t n, size_t *at)
{
	size_t i = 0;
	int e = s->err;

	for (; !e && i < n; i++)
		e = __builtin_expect(r[i].kind == MTEV_BRANCH, 1) ? do_branch(s, &r[i])
								  : feed_other(s, &r[i]);
	*at = i - (e != 0);
	return e;
}

/* seg_feed of anything but a branch record. */
static int feed_other(segmenter *s, const struct mtev_rec *r)
{
	switch (r->kind) {
	case MTEV_GAP: {
		struct thr *t = get_thr(s, r->gap.tid);
		if (!t)
			return s->err = -SEG_ENOMEM;
		if (keep_gap_stack(t))
			return s->err = -SEG_ENOMEM;
		if (close_seg(s, t))
			return s->err;
		t->next_reason = r->gap.reason;
		return emit(s, r);
	}
	case MTEV_SPAN:
	case MTEV_SEGMENT:
	case MTEV_WAYPOINT:
		s->detail = r->kind;
		return s->err = -SEG_EKIND;
	case MTEV_THREAD:
		s->gen++;
		if (s->o.fns && fnmap_add_thread(s->o.fns, r->thread.pid, r->thread.tid))
			return s->err = -SEG_ENOMEM;
		return emit(s, r);
	case MTEV_MAP:
		s->gen++;
		if (s->o.fns && fnmap_add_map(s->o.fns, r->map.pid, r->map.start, r->map.len,
					      r->map.pgoff, r->map.path.p, r->map.path.len,
					      r->map.build_id, r->map.build_id_len))
			return s->err = -SEG_ENOMEM;
		return emit(s, r);
	case MTEV_SAMPLE:
		if (r->sample.flags & MTEV_SAMPLE_CHAIN)
			return seg_chain(s, r);
		s->st.samples++;
		return seg_sample(s, r);
	default:
		return emit(s, r);
	}
}

int seg_finish(segmenter *s)
{
	if (s->err)
		return s->err;
	for (size_t i = 0; i < s->nthr; i++) {
		if (close_seg(s, s->thr[i]))
			return s->err;
		if (s->thr[i]->nchain) { /* no segment held its time */
			s->st.chains_unjoined++;
			s->thr[i]->nchain = 0;
		}
	}
	return 0;
}
