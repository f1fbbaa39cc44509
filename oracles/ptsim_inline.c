/* mt-ptsim's inline truth (truth-inline.mt): the inline frames of every
 * executed instruction of the traced window, from the instruction log (the
 * tracer sees every address).
 *
 * The inline chain of an address is llvm-symbolizer's (`--inlines`, the
 * same tool and DWARF mt-symbolize uses), asked only for the addresses
 * dwcov says may be inline (elsewhere the chain is the function alone).
 * Per thread, each physical frame has a current chain: a call saves the
 * caller's (the callee begins with none), and a frame whose return-address
 * slot is below rsp ends and gives its caller's back.  Where the chain of
 * an instruction differs from its frame's current one, the inline frames
 * of the new chain outside their common outer part begin there: one span
 * record each (flag inline, func 0, name = the inlined function, depth =
 * its level in the chain, 1 = outermost), ending where the frame's chain
 * leaves it (or at the thread's last traced instruction, open-at-end).
 *
 * Times follow what a decoder can know: an instruction that a taken branch
 * lands on has that branch's time; any other the time of the taken branch
 * that ends its straight-line run (the branch's own time for the branch).
 * At the window's start the chain there begins (flag inferred-start). */
#include "dwcov.h"
#include "elfinfo.h"
#include "llvmsym.h"
#include "mtev.h"
#include "ptsim.h"
#include "vec.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pimg { /* a mapped file */
	const struct ptsim_map *m;
	struct elfinfo ei;
	struct dwcov dc;
	int ok;
};

struct addr_chain {
	uint64_t ip;
	uint32_t chain; /* index into chains; 0 = none */
};

struct ictx {
	struct pimg *img;
	size_t nimg;
	struct addr_chain *ac; /* sorted by ip */
	size_t nac, capac;
	char **chains; /* interned: names outermost first, joined by '\n' */
	size_t nchains, capchains;
	/* llvm request */
	const char **paths;
	uint64_t *vaddrs;
	size_t *which;
	size_t nreq, capreq, capw, capp;
};

static int ac_cmp(const void *x, const void *y)
{
	const struct addr_chain *a = x, *b = y;
	return a->ip < b->ip ? -1 : a->ip > b->ip;
}

static uint32_t intern(struct ictx *c, const char *s)
{
	if (!*s)
		return 0;
	for (size_t i = 1; i < c->nchains; i++)
		if (!strcmp(c->chains[i], s))
			return (uint32_t)i;
	if (mt_grow((void **)&c->chains, &c->capchains, c->nchains + 1, sizeof *c->chains))
		return 0;
	c->chains[c->nchains] = strdup(s);
	return c->chains[c->nchains] ? (uint32_t)c->nchains++ : 0;
}

/* the FunctionName values of a JSON reply, in order (innermost first) */
static void on_reply(void *ctx, size_t i, const char *line, size_t len)
{
	struct ictx *c = ctx;
	const char *names[64];
	size_t lens[64], n = 0;
	const char *p = line, *end = line + len;
	static const char key[] = "\"FunctionName\":\"";
	while (n < 64 && (p = strstr(p, key)) && p < end) {
		p += sizeof key - 1;
		const char *q = p;
		while (q < end && *q != '"')
			q += *q == '\\' && q + 1 < end ? 2 : 1;
		names[n] = p;
		lens[n++] = (size_t)(q - p);
		p = q;
	}
	if (n < 2) /* the function alone */
		return;
	/* outermost inline first; the physical function (last) left out */
	char buf[8192];
	size_t o = 0;
	for (size_t k = n - 1; k-- > 0;) {
		if (o + lens[k] + 2 >= sizeof buf)
			break;
		if (o)
			buf[o++] = '\n';
		memcpy(buf + o, names[k], lens[k]);
		o += lens[k];
	}
	buf[o] = 0;
	c->ac[c->which[i]].chain = intern(c, buf);
}

static struct pimg *img_of(struct ictx *c, const struct ptsim_map *m)
{
	for (size_t i = 0; i < c->nimg; i++)
		if (c->img[i].m == m)
			return &c->img[i];
	return NULL;
}

static uint32_t chain_of(const struct ictx *c, uint64_t ip)
{
	size_t lo = 0, hi = c->nac;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (c->ac[mid].ip < ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->nac && c->ac[lo].ip == ip ? c->ac[lo].chain : 0;
}

/* Resolves the chains of every executed address.  0, or -1 (@err). */
static int resolve(struct ictx *c, const struct ptsim_run *run, const char *symbolizer, char *err,
		   size_t errlen)
{
	for (size_t i = 0; i < run->nev; i++) {
		if (run->ev[i].kind != PTSIM_EV_INSN)
			continue;
		if (mt_grow((void **)&c->ac, &c->capac, c->nac + 1, sizeof *c->ac))
			goto nomem;
		c->ac[c->nac++] = (struct addr_chain){run->ev[i].ip, 0};
	}
	qsort(c->ac, c->nac, sizeof *c->ac, ac_cmp);
	size_t w = 0;
	for (size_t i = 0; i < c->nac; i++)
		if (!w || c->ac[w - 1].ip != c->ac[i].ip)
			c->ac[w++] = c->ac[i];
	c->nac = w;
	c->img = calloc(run->nmaps ? run->nmaps : 1, sizeof *c->img);
	if (!c->img)
		goto nomem;
	if (mt_grow((void **)&c->chains, &c->capchains, 1, sizeof *c->chains))
		goto nomem;
	c->chains[0] = NULL;
	c->nchains = 1;
	for (size_t i = 0; i < c->nac; i++) {
		const struct ptsim_map *m = ptsim_find_map(run, c->ac[i].ip);
		if (!m || m->path[0] == '[')
			continue;
		struct pimg *g = img_of(c, m);
		if (!g) {
			g = &c->img[c->nimg++];
			g->m = m;
			g->ok = elfinfo_load(&g->ei, m->path) == 0;
			if (g->ok)
				dwcov_load(&g->dc, m->path, m->build_id, m->build_id_len);
		}
		if (!g->ok || g->dc.state == DWCOV_NONE)
			continue;
		int64_t va = elfinfo_offset_to_vaddr(&g->ei, c->ac[i].ip - m->start + m->pgoff);
		const uint64_t *r;
		if (va < 0 || !dwcov_inline(&g->dc, (uint64_t)va, (uint64_t)va + 1, &r))
			continue;
		if (mt_grow((void **)&c->paths, &c->capp, c->nreq + 1, sizeof *c->paths) ||
		    mt_grow((void **)&c->vaddrs, &c->capreq, c->nreq + 1, sizeof *c->vaddrs) ||
		    mt_grow((void **)&c->which, &c->capw, c->nreq + 1, sizeof *c->which))
			goto nomem;
		c->paths[c->nreq] = m->path;
		c->vaddrs[c->nreq] = (uint64_t)va;
		c->which[c->nreq++] = i;
	}
	if (!c->nreq)
		return 0;
	int e = 0;
	llvmsym *ls = llvmsym_start(symbolizer, &e);
	if (!ls) {
		snprintf(err, errlen, "truth-inline.mt: cannot start %s: %s", symbolizer, strerror(-e));
		return -1;
	}
	void (*old)(int) = signal(SIGPIPE, SIG_IGN);
	long got = llvmsym_batch(ls, c->nreq, c->paths, c->vaddrs, on_reply, c, 120000);
	llvmsym_stop(ls, 5000);
	signal(SIGPIPE, old);
	if (got != (long)c->nreq) {
		snprintf(err, errlen, "truth-inline.mt: %s answered %ld of %zu requests", symbolizer,
			 got < 0 ? 0 : got, c->nreq);
		return -1;
	}
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

struct iframe { /* a physical frame: its return-address slot and chain */
	uint64_t slot;
	uint32_t chain;
};

struct open_in { /* an open inline span */
	uint64_t begin;
	uint32_t depth, flags;
	char *name;
};

struct ith { /* per thread */
	uint32_t tid;
	size_t *br; /* its branch records, in order */
	size_t nbr, capbr, k;
	struct iframe *stk;
	size_t nstk, capstk;
	uint32_t cur;
	int in_window, run_start;
	uint64_t ninsn, wstart, idx; /* instructions; the window's first; this one */
	uint64_t t_start, last_time;
	struct open_in *open; /* the inline spans open in the current frame's chain */
	size_t nopen, capopen;
	struct open_in *saved; /* those of the frames below, flattened per frame */
	size_t nsaved, capsaved;
	size_t *savedn; /* how many each stacked frame saved */
	size_t capsavedn;
};

static size_t nlevels(const char *s)
{
	size_t n = s && *s ? 1 : 0;
	for (; s && *s; s++)
		n += *s == '\n';
	return n;
}

/* the @k-th name (0 = outermost) of chain @s, length in *len */
static const char *level_name(const char *s, size_t k, size_t *len)
{
	while (k--)
		s = strchr(s, '\n') + 1;
	const char *e = strchr(s, '\n');
	*len = e ? (size_t)(e - s) : strlen(s);
	return s;
}

static int put_span(mtev_writer *w, uint32_t tid, const struct open_in *o, uint64_t end,
		    uint32_t flags)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_SPAN;
	r.span.tid = tid;
	r.span.depth = o->depth;
	r.span.begin = o->begin;
	r.span.end = end < o->begin ? o->begin : end;
	r.span.flags = MTEV_SPAN_INLINE | o->flags | flags;
	r.span.name = mtev_cstr(o->name);
	return mtev_write(w, &r);
}

/* The frame's chain becomes @nc at @time: close what it leaves, open what
 * it enters. */
static int change(const struct ictx *c, mtev_writer *w, struct ith *t, uint32_t nc, uint64_t time,
		  uint32_t flags)
{
	const char *a = t->cur ? c->chains[t->cur] : "", *b = nc ? c->chains[nc] : "";
	size_t na = nlevels(a), nb = nlevels(b), p = 0;
	while (p < na && p < nb) {
		size_t la, lb;
		const char *x = level_name(a, p, &la), *y = level_name(b, p, &lb);
		if (la != lb || memcmp(x, y, la))
			break;
		p++;
	}
	int rc = 0;
	while (t->nopen > p && t->nopen > 0) {
		struct open_in *o = &t->open[--t->nopen];
		if (t->in_window && !rc)
			rc = put_span(w, t->tid, o, time, 0);
		free(o->name);
	}
	for (size_t k = p; k < nb; k++) {
		size_t len;
		const char *n = level_name(b, k, &len);
		if (mt_grow((void **)&t->open, &t->capopen, t->nopen + 1, sizeof *t->open))
			return -ENOMEM;
		struct open_in *o = &t->open[t->nopen++];
		o->begin = time;
		o->depth = (uint32_t)k + 1;
		o->flags = flags;
		o->name = strndup(n, len);
		if (!o->name)
			return -ENOMEM;
	}
	t->cur = nc;
	return rc;
}

static struct ith *ith_of(struct ith *v, size_t n, uint32_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].tid == tid)
			return &v[i];
	return NULL;
}

/* One thread per stream of @res, with its window (its last @window
 * instructions) and its branch records.  -1: out of memory. */
static int threads_init(struct ith **thp, size_t *nthp, const struct ptsim_run *run,
			const struct ptsim_result *res, uint64_t window)
{
	struct ith *th = calloc(res->nts ? res->nts : 1, sizeof *th);
	size_t nth = 0;
	*thp = th;
	*nthp = 0;
	if (!th)
		return -1;
	for (size_t k = 0; k < res->nts; k++)
		th[nth++].tid = res->ts[k].tid;
	*nthp = nth;
	for (size_t i = 0; i < run->nev; i++) {
		struct ith *t = ith_of(th, nth, run->ev[i].tid);
		if (t && run->ev[i].kind == PTSIM_EV_INSN)
			t->ninsn++;
	}
	for (size_t k = 0; k < nth; k++)
		th[k].wstart = window && th[k].ninsn > window ? th[k].ninsn - window : 0;
	for (size_t i = 0; i < res->nbr; i++) {
		struct ith *t = ith_of(th, nth, res->br[i].tid);
		if (!t)
			continue;
		if (mt_grow((void **)&t->br, &t->capbr, t->nbr + 1, sizeof *t->br))
			return -1;
		t->br[t->nbr++] = i;
	}
	return 0;
}

static uint64_t slot_time(const struct ptsim_result *res, uint32_t slot)
{
	return ptsim_tsc_to_perf(PTSIM_TSC0 + res->times[slot]);
}

/* The branch records that land at @ip before it executes: trace-start,
 * sysret, iret; and an interrupt reported at this (unexecuted) ip. */
static void take_landings(struct ith *t, const struct ptsim_result *res, uint64_t ip)
{
	while (t->k < t->nbr) {
		const struct ptsim_branch *b = &res->br[t->br[t->k]];
		if (b->from == 0 && b->to == ip) {
			if (b->type == MTEV_BR_TRACE_START && !t->in_window) {
				t->in_window = 1;
				t->t_start = slot_time(res, b->slot);
				/* what is open at the window's start: its start, inferred */
				for (size_t k = 0; k < t->nopen; k++) {
					t->open[k].begin = t->t_start;
					t->open[k].flags = MTEV_SPAN_INFERRED_START;
				}
			}
			t->run_start = 1;
			t->last_time = slot_time(res, b->slot);
			t->k++;
		} else if (b->type == MTEV_BR_INTERRUPT && b->from == ip) {
			t->k++;
		} else {
			break;
		}
	}
}

/* A call from a frame whose return-address slot is @sp: the caller's chain
 * waits under the callee.  -1: out of memory. */
static int push_frame(struct ith *t, uint64_t sp)
{
	if (mt_grow((void **)&t->stk, &t->capstk, t->nstk + 1, sizeof *t->stk) ||
	    mt_grow((void **)&t->savedn, &t->capsavedn, t->nstk + 1, sizeof *t->savedn) ||
	    mt_grow((void **)&t->saved, &t->capsaved, t->nsaved + t->nopen, sizeof *t->saved))
		return -1;
	t->stk[t->nstk] = (struct iframe){sp, t->cur};
	t->savedn[t->nstk++] = t->nopen;
	memcpy(t->saved + t->nsaved, t->open, t->nopen * sizeof *t->open);
	t->nsaved += t->nopen;
	t->nopen = 0;
	t->cur = 0;
	return 0;
}

/* One executed instruction of thread @t.  0, a negative MTEV or errno code
 * (the writer's, or -ENOMEM from change()), or 1: out of memory. */
static int on_insn(const struct ictx *c, mtev_writer *w, struct ith *t,
		   const struct ptsim_result *res, const struct ptsim_ev *ev)
{
	int rc;
	if (t->idx++ < t->wstart) { /* before the window: the chain only */
		uint32_t ch = chain_of(c, ev->ip);
		return ch != t->cur ? change(c, w, t, ch, 0, 0) : 0;
	}
	take_landings(t, res, ev->ip);
	/* this instruction's time */
	const struct ptsim_branch *nb = t->k < t->nbr ? &res->br[t->br[t->k]] : NULL;
	int taken = nb && nb->from == ev->ip && nb->type != MTEV_BR_TRACE_START &&
		    nb->type != MTEV_BR_INTERRUPT;
	uint64_t time = t->last_time;
	if (!t->run_start && nb && nb->from)
		time = slot_time(res, nb->slot);
	uint32_t ch = chain_of(c, ev->ip);
	if (ch != t->cur && (rc = change(c, w, t, ch, time, 0)))
		return rc;
	t->run_start = 0;
	if (taken) {
		t->last_time = slot_time(res, nb->slot);
		t->run_start = nb->to != 0;
		t->k++;
		if (nb->type == MTEV_BR_CALL && push_frame(t, ev->sp) < 0)
			return 1;
	}
	/* frames whose return-address slot is below rsp have ended */
	while (t->nstk && ev->sp > t->stk[t->nstk - 1].slot) {
		if ((rc = change(c, w, t, 0, time, 0)))
			return rc;
		size_t n = t->savedn[--t->nstk];
		if (mt_grow((void **)&t->open, &t->capopen, n + 1, sizeof *t->open))
			return 1;
		t->nsaved -= n;
		memcpy(t->open, t->saved + t->nsaved, n * sizeof *t->open);
		t->nopen = n;
		t->cur = t->stk[t->nstk].chain;
	}
	return 0;
}

/* The spans still open at the end end at the thread's last branch. */
static int close_all(mtev_writer *w, struct ith *th, size_t nth, const struct ptsim_result *res)
{
	int rc = 0;
	for (size_t k = 0; k < nth && !rc; k++) {
		struct ith *t = &th[k];
		uint64_t end = t->last_time;
		for (size_t j = 0; j < t->nbr; j++) {
			uint64_t x = slot_time(res, res->br[t->br[j]].slot);
			if (x > end)
				end = x;
		}
		while (t->nopen && !rc) {
			struct open_in *o = &t->open[--t->nopen];
			if (t->in_window)
				rc = put_span(w, t->tid, o, end, MTEV_SPAN_OPEN_AT_END);
			free(o->name);
		}
		while (t->nsaved && !rc) {
			struct open_in *o = &t->saved[--t->nsaved];
			if (t->in_window)
				rc = put_span(w, t->tid, o, end, MTEV_SPAN_OPEN_AT_END);
			free(o->name);
		}
	}
	return rc;
}

static void threads_fini(struct ith *th, size_t nth)
{
	for (size_t k = 0; k < nth; k++) {
		for (size_t j = 0; j < th[k].nopen; j++)
			free(th[k].open[j].name);
		for (size_t j = 0; j < th[k].nsaved; j++)
			free(th[k].saved[j].name);
		free(th[k].br);
		free(th[k].stk);
		free(th[k].open);
		free(th[k].saved);
		free(th[k].savedn);
	}
	free(th);
}

static void ictx_fini(struct ictx *c)
{
	for (size_t i = 0; i < c->nimg; i++) {
		if (c->img[i].ok) {
			elfinfo_fini(&c->img[i].ei);
			dwcov_fini(&c->img[i].dc);
		}
	}
	free(c->img);
	for (size_t i = 1; i < c->nchains; i++)
		free(c->chains[i]);
	free(c->chains);
	free(c->ac);
	free(c->paths);
	free(c->vaddrs);
	free(c->which);
}

int ptsim_write_inline(int fd, const struct ptsim_run *run, const struct ptsim_result *res,
		       uint64_t window, const char *symbolizer, char *err, size_t errlen)
{
	struct ictx c;
	memset(&c, 0, sizeof c);
	struct ith *th = NULL;
	size_t nth = 0;
	int rc = -1, e = 0;
	mtev_writer *w = NULL;
	if (resolve(&c, run, symbolizer ? symbolizer : "llvm-symbolizer", err, errlen) < 0)
		goto out;
	if (threads_init(&th, &nth, run, res, window) < 0)
		goto nomem;
	w = mtev_writer_alloc(fd, "mt-ptsim", MTEV_F_TRUTH | MTEV_F_SPANS, &e);
	if (!w) {
		snprintf(err, errlen, "truth-inline.mt: %s", mtev_strerror(e));
		goto out;
	}
	rc = 0;
	for (size_t i = 0; i < run->nev && !rc; i++) {
		const struct ptsim_ev *ev = &run->ev[i];
		struct ith *t = ev->kind == PTSIM_EV_INSN ? ith_of(th, nth, ev->tid) : NULL;
		if (t)
			rc = on_insn(&c, w, t, res, ev);
	}
	if (rc == 1)
		goto nomem;
	if (!rc)
		rc = close_all(w, th, nth, res);
	if (!rc)
		rc = mtev_writer_finish(w);
	if (rc) {
		snprintf(err, errlen, "truth-inline.mt: %s",
			 rc == -ENOMEM ? "out of memory" : mtev_strerror(-rc));
		rc = -1;
	}
	goto out;
nomem:
	snprintf(err, errlen, "out of memory");
	rc = -1;
out:
	if (w)
		mtev_writer_free(w);
	threads_fini(th, nth);
	ictx_fini(&c);
	return rc;
}
