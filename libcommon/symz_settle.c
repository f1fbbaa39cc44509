#include "symz.h"

/* Settling (see "the unit" in symz.h): every test here asks whether
 * something can still change given that the thread's later records are not
 * earlier than its now (c->fin: the unit has ended, nothing can). */

/* Span @si can get no more waypoints (its group's cursor has passed it):
 * its open inline frames last to its end.  1 if closed.  (One that has not
 * ended before @now is taken as open: the cursor is likely at it.) */
__attribute__((noinline)) int try_close_slow(struct ctx *c, uint32_t si, uint64_t now)
{
	struct span *sp = &c->spans[si];
	struct grp *g = &c->grps[grp_of(c, sp->tid, sp->depth)];
	if (c->fin) {
		grp_set_cur(c, g, NONE);
	} else {
		/* what proc_wp would do for a waypoint at @now (later ones are
		 * not earlier): skip the spans that ended before it */
		if (g->cur != NONE && g->cur_end < now)
			grp_advance(c, g, now);
		if (g->cur != NONE && c->spans[g->cur].seq <= sp->seq)
			return 0;
	}
	/* the cursor is past it: NONE, or a later span, so the group's tail
	 * is it only when the cursor is NONE (the next span to join then
	 * becomes cursor and tail: nothing links to a freed slot) */
	if (g->tail == si)
		g->tail = NONE;
	sp = &c->spans[si];
	for (uint32_t n = sp->inner; n != si;) {
		struct inode *in = &c->inodes[n & ~INL];
		uint32_t up = in->n.parent;
		in->n.end = sp->nd.end;
		in->iflags |= sp->flags & MTEV_SPAN_OPEN_AT_END;
		inode_close(c, n);
		n = up;
	}
	sp->inner = si;
	sp->nopen = 0;
	sp->st |= SP_CLOSED;
	return 1;
}

/* Attaches the children of thread @t that have a final attach point, in
 * input order: each hangs under the innermost frame of its parent that holds
 * it.  A child's candidate is final once its begin is past (no waypoint at
 * its begin can move it); an open frame's end will be at least
 * min(now, parent's end). */
void attach_ready(struct ctx *c, struct thr *t)
{
	uint64_t now = t->now;
	while (t->att_head != NONE) {
		uint32_t si = t->att_head;
		struct span *sp = &c->spans[si];
		if (!before_now(c, sp->nd.begin, now))
			return;
		uint32_t pn = sp->parent;
		try_close(c, pn, now);
		sp = &c->spans[si];
		struct span *p = &c->spans[pn];
		uint64_t sure = p->nd.end < now ? p->nd.end : now; /* open frames end no earlier */
		uint32_t n = sp->cand_match != NONE ? sp->cand_match : sp->cand_any;
		if (n == NONE)
			n = pn;
		/* climb to a node that holds the whole child */
		while (n != pn && n != NONE) {
			const struct inode *in = &c->inodes[n & ~INL];
			int holds;
			if (in->closed)
				holds = in->n.begin <= sp->nd.begin && sp->nd.end <= in->n.end;
			else if (sp->nd.end <= sure)
				holds = in->n.begin <= sp->nd.begin;
			else
				return; /* wait for its end */
			if (holds)
				break;
			n = in->n.parent;
		}
		t->att_head = sp->att_next;
		if (t->att_head == NONE)
			t->att_tail = NONE;
		/* off the parent's list of children still looking */
		for (uint32_t *pp = &p->pend; *pp != NONE;) {
			if (*pp == si)
				*pp = sp->pend_next;
			else
				pp = &c->spans[*pp].pend_next;
		}
		p->nun--;
		cand_set(c, &sp->cand_any, NONE);
		cand_set(c, &sp->cand_match, NONE);
		sp->st |= SP_ATTACHED;
		ready_insert(c, n == NONE ? pn : n, si);
	}
}

