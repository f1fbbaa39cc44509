#include "symz.h"

/* Output: writes the settled part of the unit's tree in pre-order (spans,
 * their names as string records, one symbol record per address before the
 * first span that needs it) and frees what can get no more children. */
static const struct result *want_res(const struct ctx *c, uint32_t w)
{
	if (w == NONE || c->wants[w].ri == NONE)
		return NULL;
	return &c->res[c->wants[w].ri];
}

/* The string id of name @s, writing its string record the first time.
 * 0 or -MTEV_E*.
 * NAME_BY_REF: a span record then carries the id with an empty name.  The
 * writer writes the same bytes as for the id with the text (an empty name
 * and the reference), without comparing the text with the string record's:
 * ids from SID_BASE up are ours alone (symz_core drops input string
 * records that use them), each written once with its onames text, so the
 * comparison could not fail. */
static int name_sid(struct ctx *c, mtev_writer *wr, struct mtev_str s, uint32_t *sid)
{
	int fresh;
	uint32_t i = strpool_add(&c->onames, s.p, s.len, &fresh);
	if (i >= UINT32_MAX - SID_BASE)
		return -MTEV_ENOMEM;
	*sid = SID_BASE + i;
	if (!fresh)
		return 0;
	struct mtev_rec rec = {.kind = MTEV_STRING};
	rec.string.id = *sid;
	rec.string.text = s;
	return mtev_write(wr, &rec);
}

/* The name of span @si and its string id into @rec.  0 or -MTEV_E*. */
static int span_name(struct ctx *c, mtev_writer *wr, uint32_t si, struct mtev_rec *rec)
{
	const struct span *sp = &c->spans[si];
	if (sp->nm) {
		const struct spstr *in = &c->inames.v[sp->nm - 1];
		int e = name_sid(c, wr, (struct mtev_str){in->p, in->len}, &rec->span.name_id);
		rec->span.name = (struct mtev_str){NULL, 0}; /* by reference (NAME_BY_REF) */
		return e;
	}
	if (sp->func_w == NONE || c->wants[sp->func_w].pfi == NONE)
		return 0;
	struct sframe *f = &c->frames[c->wants[sp->func_w].pfi];
	if (!f->sid) {
		int e = name_sid(c, wr, (struct mtev_str){f->name, f->name_len}, &f->sid);
		if (e < 0)
			return e;
	}
	rec->span.name_id = f->sid; /* by reference (NAME_BY_REF) */
	return 0;
}

/* One symbol record for each runtime address first met since the last call. */
static int write_symbols(struct ctx *c, mtev_writer *wr)
{
	struct mtev_frame *fr = NULL;
	size_t capfr = 0;
	int ret = 0;
	for (size_t i = c->wants_written; i < c->nwants && !ret; i++) {
		const struct want *w = &c->wants[i];
		const struct result *r = want_res(c, (uint32_t)i);
		if (!r || !r->nf)
			continue;
		if (hmap_get(&c->sym_seen, w->addr, 0) != NONE)
			continue;
		if (hmap_put(&c->sym_seen, w->addr, 0, 0) == NONE) {
			ret = -MTEV_ENOMEM;
			break;
		}
		if (r->nf > capfr) {
			capfr = r->nf * 2;
			struct mtev_frame *nf = realloc(fr, capfr * sizeof *nf);
			if (!nf) {
				ret = -MTEV_ENOMEM;
				break;
			}
			fr = nf;
		}
		for (uint32_t j = 0; j < r->nf; j++) {
			const struct sframe *f = &c->frames[r->f0 + j];
			fr[j] = (struct mtev_frame){{f->name, f->name_len}, {f->file, f->file_len}, f->line,
						    f->column};
		}
		struct mtev_rec rec = {.kind = MTEV_SYMBOL};
		rec.symbol.addr = w->addr;
		rec.symbol.entry = w->entry_rt;
		rec.symbol.nframes = r->nf;
		rec.symbol.frames = fr;
		ret = mtev_write(wr, &rec);
		c->st->symbols_out++;
	}
	c->wants_written = c->nwants;
	free(fr);
	return ret;
}

/* Writes node @x (its depth set). */
static inline __attribute__((always_inline)) int emit_node(struct ctx *c, mtev_writer *wr,
							   uint32_t x)
{
	const struct node *nd = ND(c, x);
	const struct inode *in = x & INL ? &c->inodes[x & ~INL] : NULL;
	uint32_t si = in ? in->si : x;
	const struct span *sp = &c->spans[si];
	struct mtev_rec rec = {.kind = MTEV_SPAN};
	int r;
	rec.span.tid = sp->tid;
	rec.span.depth = nd->depth;
	rec.span.begin = nd->begin;
	rec.span.end = nd->end;
	if (!in) {
		rec.span.func = sp->func;
		rec.span.callsite = sp->cs_w != NONE ? c->wants[sp->cs_w].addr : 0;
		rec.span.flags = sp->flags;
		if ((r = span_name(c, wr, si, &rec)) < 0)
			return r;
	} else {
		struct sframe *f = &c->frames[in->fi];
		/* input out of time order can close a frame before it opened, or
		 * open it after its span ended: an empty frame, not a bad record */
		if (rec.span.end < rec.span.begin)
			rec.span.end = rec.span.begin;
		rec.span.flags = in->iflags;
		if (!f->sid &&
		    (r = name_sid(c, wr, (struct mtev_str){f->name, f->name_len}, &f->sid)) < 0)
			return r;
		rec.span.name_id = f->sid; /* by reference (NAME_BY_REF) */
		c->st->inline_spans++;
	}
	if ((r = mtev_write(wr, &rec)) < 0)
		return r;
	c->st->spans_out++;
	return 0;
}

/* The open inline frame of span @si whose parent is node @x, or NONE. */
static uint32_t open_child(const struct ctx *c, uint32_t si, uint32_t x)
{
	const struct span *sp = &c->spans[si];
	if (!sp->nopen)
		return NONE;
	for (uint32_t n = sp->inner; n != si;) {
		uint32_t up = c->inodes[n & ~INL].n.parent;
		if (up == x)
			return n;
		n = up;
	}
	return NONE;
}

static inline int path_push(struct ctx *c, uint32_t x)
{
	if (c->npath == c->cappath && mt_grow((void **)&c->path, &c->cappath, c->npath + 1, sizeof *c->path) < 0)
		return -MTEV_ENOMEM;
	c->path[c->npath++] = x;
	return 0;
}

/* Node @x (of span @si), written, with no child left to write, can get no
 * more children: no later node can begin before @lim. */
static inline int node_done(struct ctx *c, uint32_t x, uint32_t si, uint64_t lim)
{
	if (x & INL) {
		const struct inode *in = &c->inodes[x & ~INL];
		return in->closed && !in->refs && before_now(c, in->n.end, lim);
	}
	const struct span *sp = &c->spans[si];
	return !(sp->st & SP_ON_STACK) && (sp->st & SP_CLOSED) && !sp->nun;
}

/* A written node is done: its slot is free. */
static inline void node_release(struct ctx *c, uint32_t x)
{
	if (x & INL) {
		inode_release(c, x);
		return;
	}
	span_release(c, x); /* its group forgot it (try_close_slow) */
}

/* Writes what has settled: symbol records for the addresses met so far,
 * then the current root's tree in pre-order (then the next root's, in input
 * order) as far as every node written is final and no node still to come can
 * precede it; frees what is written and done.  0 or -MTEV_E*. */
int emit_round(struct ctx *c, mtev_writer *wr)
{
	double t0 = cpu_now();
	int r = write_symbols(c, wr);
	for (size_t k = 0; k < c->nthrs; k++)
		attach_ready(c, &c->thrs[k]);
	double t1 = cpu_now();
	c->st->t_tree += t1 - t0;
	/* the tree's thread: its now, and lim: no node still to come (nor an
	 * unattached child) begins before it (both fixed during the round) */
	uint64_t now = 0, lim = 0;
	int have_lim = 0;
	while (r == 0 && !c->oom) {
		if (!c->npath) {
			if (c->root_head == c->nroots) {
				c->root_head = c->nroots = 0;
				break;
			}
			uint32_t root = c->roots[c->root_head++];
			struct span *sp = &c->spans[root];
			c->path_thr = hmap_get(&c->tidx, sp->tid, 0);
			have_lim = 0;
			sp->nd.depth = sp->depth;
			if ((r = emit_node(c, wr, root)) == 0)
				r = path_push(c, root);
			continue;
		}
		if (!have_lim) {
			const struct thr *t = &c->thrs[c->path_thr];
			now = lim = t->now;
			if (t->att_head != NONE && c->spans[t->att_head].nd.begin < lim)
				lim = c->spans[t->att_head].nd.begin;
			have_lim = 1;
		}
		uint32_t x = c->path[c->npath - 1];
		uint32_t si = x & INL ? c->inodes[x & ~INL].si : x;
		try_close(c, si, now);
		struct node *nd = ND(c, x);
		uint32_t ch = nd->first_child, o = open_child(c, si, x);
		if (ch != NONE && before_now(c, ND(c, ch)->begin, lim) &&
		    (o == NONE || ND(c, o)->begin > ND(c, ch)->begin)) {
			struct node *cn = ND(c, ch);
			nd->first_child = cn->next_sib;
			if (nd->first_child == NONE)
				nd->last_child = NONE;
			cn->depth = nd->depth + 1;
			if ((r = emit_node(c, wr, ch)) < 0)
				break;
			/* a leaf that is done already need not be visited */
			if (!(ch & INL)) {
				const struct span *cs = &c->spans[ch];
				if (cs->nd.first_child == NONE && !cs->nopen && !cs->nun &&
				    !(cs->st & SP_ON_STACK) && try_close(c, ch, now)) {
					node_release(c, ch);
					continue;
				}
			}
			r = path_push(c, ch);
			continue;
		}
		if (ch == NONE && o == NONE && node_done(c, x, si, lim)) {
			c->npath--;
			node_release(c, x);
			continue;
		}
		break;
	}
	if (c->oom && r == 0)
		r = -MTEV_ENOMEM;
	c->st->t_write += cpu_now() - t1;
	return r;
}

