#include "symz.h"

/* The output tree: a window's spans join their (thread, depth) group and
 * their parent; waypoints open and close inline frames (docs/symbolize.md,
 * Inline spans). */

static inline const struct sframe *level_frame(const struct ctx *c, const struct result *r,
					       uint32_t j)
{
	return &c->frames[r->f0 + r->nf - 1 - j];
}

/* Same inlined frame at level @j: same function, same call site. */
static int level_eq(const struct ctx *c, const struct result *a, const struct result *b,
		    uint32_t j)
{
	const struct sframe *fa = level_frame(c, a, j), *fb = level_frame(c, b, j);
	const struct sframe *ca = fa + 1, *cb = fb + 1; /* the frame it is inlined into */
	return ca->line == cb->line && ca->column == cb->column &&
	       (fa->name == fb->name || !strcmp(fa->name, fb->name)) &&
	       (ca->file == cb->file || !strcmp(ca->file, cb->file));
}

/* A new inline node of span @si under node @parent: its id, or NONE. */
static uint32_t inode_new(struct ctx *c, uint64_t begin, uint64_t end, uint32_t si,
			  uint32_t parent)
{
	struct inode n = {{begin, end, NONE, NONE, NONE, parent, 0}, si, NONE, 0, 0, 0, c->inode_seq++};
	uint32_t i = c->inode_free;
	if (i != NONE) {
		c->inode_free = c->inodes[i].fi;
		c->inodes[i] = n;
	} else {
		if (c->ninodes >= INL - 1 || BVEC_PUSH(c->inodes, c->ninodes, c->capinodes, n) < 0) {
			c->oom = 1;
			return NONE;
		}
		i = (uint32_t)(c->ninodes - 1);
	}
	if (++c->inodes_live > c->st->inodes_live_max)
		c->st->inodes_live_max = c->inodes_live;
	return INL | i;
}

void inode_release(struct ctx *c, uint32_t id)
{
	uint32_t i = id & ~INL;
	c->inodes[i].fi = NONE;
	if (c->inode_free == NONE)
		c->inode_free = i;
	else
		c->inodes[c->inode_free_tail].fi = i;
	c->inode_free_tail = i;
	c->inodes_live--;
}

/* An inline frame's end is final: it joins its parent's children to write. */
void inode_close(struct ctx *c, uint32_t id)
{
	struct inode *in = &c->inodes[id & ~INL];
	in->closed = 1;
	ready_insert(c, in->n.parent, id);
}

/* *@slot (a child's candidate attach point) = node @n: an inline frame that
 * is some unattached child's candidate stays (node_done). */
/* A slot for a new span (filled by the caller), or NONE. */
static uint32_t span_alloc(struct ctx *c)
{
	uint32_t i = c->span_free;
	if (i != NONE) {
		c->span_free = c->spans[i].att_next;
	} else {
		if (c->nspans >= UINT32_MAX / 4 ||
		    (c->nspans == c->capspans &&
		     bvec_grow((void **)&c->spans, &c->capspans, sizeof *c->spans) < 0))
			return NONE;
		i = (uint32_t)c->nspans++;
	}
	if (++c->spans_live > c->st->spans_live_max)
		c->st->spans_live_max = c->spans_live;
	return i;
}

/* The thread entry of @tid, made when new; NONE when out of memory. */
uint32_t thr_of_slow(struct ctx *c, uint32_t tid)
{
	uint32_t k = hmap_put(&c->tidx, tid, 0, (uint32_t)c->nthrs);
	if (k == NONE)
		return NONE;
	if (k == c->nthrs) {
		struct thr z = {tid, NULL, 0, 0, 0, NONE, NONE};
		if (VEC_PUSH(c->thrs, c->nthrs, c->capthrs, z) < 0)
			return NONE;
	}
	c->last_thr = k;
	return k;
}

/* A span, in input order: its parent (the thread's stack of depths), its
 * (tid, depth) group, and a first guess of where it hangs under its parent. */
static void proc_span(struct ctx *c, uint32_t si)
{
	struct span *sp = &c->spans[si];
	uint32_t k = thr_of(c, sp->tid);
	if (k == NONE) {
		c->oom = 1;
		return;
	}
	struct thr *t = &c->thrs[k];
	if (sp->nd.begin < t->now)
		c->st->spans_late++; /* placed after what is written already */
	else
		t->now = sp->nd.begin;
	uint32_t parent = NONE;
	/* keep the depths below this span's and put it on top */
	while (t->n && t->stack[t->n - 1].depth >= sp->depth)
		c->spans[t->stack[--t->n].si].st &= ~(uint32_t)SP_ON_STACK;
	if (sp->depth > 0 && t->n && t->stack[t->n - 1].depth == sp->depth - 1)
		parent = t->stack[t->n - 1].si;
	if (t->n == t->cap && mt_grow((void **)&t->stack, &t->cap, t->n + 1, sizeof *t->stack) < 0) {
		c->oom = 1;
		return;
	}
	t->stack[t->n++] = (struct stk){sp->depth, si};
	sp->st |= SP_ON_STACK;
	sp->parent = parent;

	sp->nd.first_child = sp->nd.last_child = sp->nd.next_sib = sp->nd.parent = NONE;
	sp->nd.depth = 0;
	sp->inner = si;
	if (parent == NONE) {
		sp->st |= SP_ATTACHED;
		if (VEC_PUSH(c->roots, c->nroots, c->caproots, si) < 0)
			c->oom = 1;
	} else {
		struct span *p = &c->spans[parent];
		/* children met before at an earlier time are placed for good */
		while (p->pend != NONE && c->spans[p->pend].nd.begin < sp->nd.begin)
			p->pend = c->spans[p->pend].pend_next;
		/* where the parent is now: after its last waypoint (at or before
		 * our begin); its waypoints at our begin come after us and may
		 * still move it (proc_wp) */
		sp->cand_any = sp->cand_match = NONE;
		if (p->st & SP_SEEN)
			cand_set(c, &sp->cand_any, p->inner);
		sp->pend_next = p->pend;
		p->pend = si;
		p->nun++;
		/* the attach queue (attach_ready) */
		sp->att_next = NONE;
		if (t->att_tail == NONE)
			t->att_head = si;
		else
			c->spans[t->att_tail].att_next = si;
		t->att_tail = si;
	}
}

/* The group's cursor and its span's bounds. */
/* proc_wp: the group's cursor has passed its span's end. */
__attribute__((noinline)) void grp_advance(struct ctx *c, struct grp *g, uint64_t time)
{
	uint32_t s = g->cur;
	while (s != NONE && c->spans[s].nd.end < time)
		s = c->spans[s].grp_next;
	grp_set_cur(c, g, s);
}

/* proc_wp: several spans live at this time (zero-length ones): the one whose
 * function (entry @e) holds the address. */
__attribute__((noinline)) uint32_t wp_pick(struct ctx *c, struct grp *g, uint32_t s,
						   uint64_t e, uint64_t time)
{
	uint32_t t = c->spans[s].grp_next;
	for (int k = 1; t != NONE && k < 8 && c->spans[t].nd.begin <= time;
	     k++, t = c->spans[t].grp_next) {
		if (c->spans[t].func == e) {
			grp_set_cur(c, g, t);
			return t;
		}
	}
	return s;
}

/* proc_wp: the inline frames of span @s change when its inline chain does. */
__attribute__((noinline)) void wp_inline(struct ctx *c, uint32_t s, const struct want *wt,
						uint64_t time)
{
	struct span *sp = &c->spans[s];
	uint32_t ri = wt->ri;
	/* an address outside this function (its .cold part is its code) says
	 * nothing about its inline frames */
	if (ri == NONE || ri == sp->last_ri ||
	    (wt->entry_rt && sp->func && wt->entry_rt != sp->func && wt->owner_rt != sp->func))
		return;
	const struct result *r = &c->res[ri];
	uint32_t m = res_levels(r), keep = 0;
	if (sp->nopen) {
		const struct result *cur = &c->res[sp->last_ri];
		while (keep < sp->nopen && keep < m && level_eq(c, cur, r, keep + 1))
			keep++;
	}
	while (sp->nopen > keep) {
		uint32_t n = sp->inner;
		struct node *in = ND(c, n);
		in->end = time;
		sp->inner = in->parent;
		sp->nopen--;
		inode_close(c, n);
	}
	for (uint32_t j = keep + 1; j <= m; j++) {
		uint32_t n = inode_new(c, time, sp->nd.end, s, sp->inner);
		if (n == NONE)
			return;
		sp = &c->spans[s];
		struct inode *nd = &c->inodes[n & ~INL];
		nd->fi = (uint32_t)(level_frame(c, r, j) - c->frames);
		nd->iflags = MTEV_SPAN_INLINE;
		if (time == sp->nd.begin)
			nd->iflags |= sp->flags & MTEV_SPAN_INFERRED_START;
		sp->inner = n;
		sp->nopen++;
	}
	sp->last_ri = ri;
}

/* proc_wp: children that begin now hang under the frame open after the last
 * of these waypoints, or after the one at their call site (want @w). */
__attribute__((noinline)) void wp_pend(struct ctx *c, struct span *sp, uint32_t w,
					      uint64_t time)
{
	for (uint32_t *pp = &sp->pend; *pp != NONE;) {
		struct span *ch = &c->spans[*pp];
		if (ch->nd.begin < time) {
			*pp = ch->pend_next; /* placed for good */
			continue;
		}
		if (ch->nd.begin == time) {
			cand_set(c, &ch->cand_any, sp->inner);
			if (ch->cs_w != NONE && ch->cs_w == w)
				cand_set(c, &ch->cand_match, sp->inner);
		}
		pp = &ch->pend_next;
	}
}

/* A waypoint, in input order: the span of its thread and depth live at its
 * time; the inline frames of that span change when its inline chain does.
 * Its want is never NONE (add_waypoint). */

static uint32_t grp_of_slow(struct ctx *c, uint32_t tid, uint32_t depth)
{
	uint32_t g = hmap_put(&c->gidx, tid, depth, (uint32_t)c->ngrps);
	if (g == NONE)
		return NONE;
	if (g == c->ngrps) {
		struct grp z = {NONE, NONE, 0, 0, thr_of(c, tid)};
		if (z.thr == NONE || VEC_PUSH(c->grps, c->ngrps, c->capgrps, z) < 0)
			return NONE;
	}
	return g;
}

/* grp_of when the last lookup was another group: the unit's first thread
 * has a table by depth in front of the hash. */
uint32_t grp_of_miss(struct ctx *c, uint32_t tid, uint32_t depth)
{
	uint32_t g = NONE;
	if (!c->gd_set) {
		c->gd_set = 1;
		c->gd_tid = tid;
	}
	if (tid != c->gd_tid || depth >= (1u << 20)) {
		g = grp_of_slow(c, tid, depth);
		goto out;
	}
	if (depth < c->gdep_used && c->gdep[depth]) {
		g = c->gdep[depth] - 1;
		goto out;
	}
	if (depth >= c->capgdep) {
		size_t nc = c->capgdep ? c->capgdep : 64;
		while (nc <= depth)
			nc *= 2;
		uint32_t *nb = realloc(c->gdep, nc * sizeof *nb);
		if (!nb)
			return NONE;
		c->gdep = nb;
		c->capgdep = nc;
	}
	if (depth >= c->gdep_used) {
		memset(c->gdep + c->gdep_used, 0, (depth + 1 - c->gdep_used) * sizeof *c->gdep);
		c->gdep_used = depth + 1;
	}
	g = grp_of_slow(c, tid, depth);
	if (g != NONE)
		c->gdep[depth] = g + 1;
out:
	c->last_gtid = tid;
	c->last_gdepth = depth;
	c->last_g = g;
	return g;
}

/* The (tid, depth) group, created when new; NONE when out of memory. */
/* The group of a span (spans join their group when read, so that proc_wp
 * sees every span that begins at or before a waypoint's time). */
static int span_group(struct ctx *c, uint32_t si)
{
	const struct span *sp = &c->spans[si];
	uint32_t g = grp_of(c, sp->tid, sp->depth);
	if (g == NONE)
		return -1;
	struct grp *gp = &c->grps[g];
	if (gp->tail != NONE)
		c->spans[gp->tail].grp_next = si;
	gp->tail = si;
	if (gp->cur == NONE)
		grp_set_cur(c, gp, si);
	return 0;
}

/* The span of window item @pi (read, not yet processed): its slot, in its
 * (tid, depth) group; NONE when out of memory.  (A span joins its group when
 * processed, not when read: in time order no earlier waypoint falls in it.) */
static uint32_t span_make(struct ctx *c, uint32_t pi)
{
	const struct pspan *p = &c->psp[pi];
	struct span s = {.nd = {p->begin, p->end, NONE, NONE, NONE, NONE, 0},
			 .func = p->func,
			 .grp_next = NONE,
			 .nopen = 0,
			 .pend = NONE,
			 .st = 0,
			 .seq = p->seq,
			 .tid = p->tid,
			 .depth = p->depth,
			 .flags = p->flags,
			 .nm = p->nm,
			 .func_w = p->func_w,
			 .cs_w = p->cs_w,
			 .inner = NONE,
			 .last_ri = NONE,
			 .parent = NONE,
			 .cand_any = NONE,
			 .cand_match = NONE,
			 .pend_next = NONE,
			 .nun = 0,
			 .att_next = NONE};
	uint32_t si = span_alloc(c);
	if (si == NONE)
		return NONE;
	c->spans[si] = s;
	if (span_group(c, si) < 0)
		return NONE;
	return si;
}

/* Resolves the window's new addresses in one batch, then processes it, and
 * with @wr writes what settled after every CHUNK items.  0 or -MTEV_E*. */
int proc_window(struct ctx *c, mtev_writer *wr)
{
	double t0 = cpu_now();
	resolve_pending(c);
	c->st->t_resolve += cpu_now() - t0;
	int r = 0;
	for (size_t i = 0; i < c->nwin && r == 0 && !c->oom;) {
		double t1 = cpu_now();
		size_t e = c->nwin - i > c->chunk ? i + c->chunk : c->nwin;
		for (const struct witem *it = c->win + i, *end = c->win + e; it < end; it++) {
			if (it->g != NONE) {
				proc_wp(c, it);
				continue;
			}
			uint32_t si = span_make(c, it->a);
			if (si == NONE) {
				c->oom = 1;
				break;
			}
			proc_span(c, si);
			if (c->oom)
				break;
		}
		i = e;
		c->st->t_tree += cpu_now() - t1;
		if (wr && !c->oom)
			r = emit_round(c, wr);
	}
	c->nwin = c->npsp = 0;
	return c->oom ? -MTEV_ENOMEM : r;
}
