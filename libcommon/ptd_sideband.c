/* ptd_sideband: sideband records (mmap, comm, fork, samples, triggers) as
 * MTEV records, in time order; sampling recordings: each process's
 * executable maps to check callchains, and the --call-graph dwarf
 * unwinder. */
#include "ptd_int.h"

#include <stdlib.h>
#include <string.h>

#include "vec.h"

/* Sideband record @i as MTEV (0: nothing to write). */
/* Sampling recordings (no trace, no images loaded): each process's
 * executable maps as of the record being written, for smap_chain_end(). */
static void smap_apply(struct ptd *d, const struct sb *s)
{
	struct proc *p;
	if (s->pid == UINT32_MAX)
		return;
	if (s->kind == SB_MMAP && (s->mmap.prot & PROT_X) && (p = proc_get(d, s->pid))) {
		struct mapent me = {s->mmap.addr, s->mmap.addr + s->mmap.len, NULL};
		map_note(&p->maps, &p->nmaps, &p->mapcap, &me);
	} else if (s->kind == SB_COMM && s->comm.exec && (p = proc_get(d, s->pid))) {
		p->nmaps = 0;
	} else if (s->kind == SB_FORK) {
		proc_fork(d, s->pid, s->fork.ppid);
	}
}

/* A callchain's return addresses (all but the leaf) must be in executable
 * code: the frame-pointer walk through code without frame pointers goes on
 * with whatever rbp points at (stack or data words).  Returns how many
 * entries are a real stack (all of them when the process's maps are not
 * known). */
static uint32_t smap_chain_end(struct ptd *d, uint32_t pid, const uint64_t *ips, uint32_t n)
{
	const struct proc *p = NULL;
	uint32_t k;
	size_t i;
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].pid == pid)
			p = &d->proc[i];
	if (!p || !p->nmaps)
		return n;
	/* the kernel's frames (innermost, first) and the user leaf are kept */
	for (k = 0; k < n && ips[k] >> 63; k++)
		;
	for (k++; k < n; k++) {
		for (i = 0; i < p->nmaps; i++)
			if (p->maps[i].start <= ips[k] && ips[k] < p->maps[i].end)
				break;
		if (i == p->nmaps)
			return k;
	}
	return n;
}

/* Sampling: the executable maps of each process as sideband records, so
 * that a forked child gets its parent's (the kernel writes no MMAP record
 * for inherited maps). */
static void sb_note_map(struct ptd *d, const struct sb *s)
{
	struct proc *p;
	if (d->nq || d->have_info || s->pid == UINT32_MAX || !(p = proc_get(d, s->pid)))
		return;
	if (mt_grow((void **)&p->sbmaps, &p->sbmapcap, p->nsbmaps + 1, sizeof *p->sbmaps) < 0)
		return;
	p->sbmaps[p->nsbmaps++] = *s;
}

static void map_rec(struct ptd *d, const struct sb *s, struct mtev_rec *r)
{
	memset(r, 0, sizeof *r);
	r->kind = MTEV_MAP;
	r->map.pid = s->pid;
	r->map.time = s->time;
	r->map.start = s->mmap.addr;
	r->map.len = s->mmap.len;
	r->map.pgoff = s->mmap.pgoff;
	r->map.prot = s->mmap.prot;
	r->map.path = mtev_cstr(s->mmap.path);
	if (s->mmap.bidlen) {
		r->map.build_id_len = s->mmap.bidlen;
		r->map.build_id = s->mmap.bid;
	} else {
		const struct pd_buildid *b = bid_for_path(d, s->mmap.path);
		if (b) {
			r->map.build_id_len = b->len;
			r->map.build_id = b->id;
		}
	}
}

/* The parent's maps, again as the child's, at the fork's time. */
/* A new record at the end of d->sbout (NULL: out of memory). */
static struct mtev_rec *sb_out(struct ptd *d)
{
	if (mt_grow((void **)&d->sbout, &d->sboutcap, d->nsbout + 1, sizeof *d->sbout) < 0) {
		ptd_fail(d, PTD_ESYS, "out of memory");
		return NULL;
	}
	return &d->sbout[d->nsbout++];
}

static int sb_fork_maps(struct ptd *d, uint32_t pid, uint32_t ppid, uint64_t time)
{
	struct proc *c = proc_get(d, pid), *pp = NULL;
	size_t i, k;
	if (!c)
		return 0;
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].pid == ppid)
			pp = &d->proc[i];
	if (!pp || pp == c)
		return 0;
	c = proc_get(d, pid);
	c->nsbmaps = 0;
	for (k = 0; k < pp->nsbmaps; k++) {
		struct sb m = pp->sbmaps[k];
		struct mtev_rec *r;
		m.pid = m.tid = pid;
		m.time = time;
		if (mt_grow((void **)&c->sbmaps, &c->sbmapcap, c->nsbmaps + 1, sizeof *c->sbmaps) < 0)
			return -1;
		c->sbmaps[c->nsbmaps++] = m;
		if (!(r = sb_out(d)))
			return -1;
		map_rec(d, &m, r);
		if (m.mmap.bidlen) /* m dies here, the parent's copy lives on */
			r->map.build_id = pp->sbmaps[k].mmap.bid;
	}
	return 0;
}

/* Sampling: a FORK record (kept by the never-overwritten tracking ring) is
 * where a thread or process begins: its record, named as its parent is
 * until a COMM record renames it. */
static int sb_fork_rec(struct ptd *d, const struct sb *s, struct mtev_rec *r, struct mtev_rec *r2)
{
	int n = 0, th;
	size_t i;
	if (d->nq || d->have_info || s->pid == UINT32_MAX)
		return 0;
	th = thr_get(d, s->tid, s->pid);
	if (th < 0 || d->thr[th].announced)
		return 0;
	d->thr[th].announced = 1;
	const char *name = "";
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].pid == s->fork.ppid && d->proc[i].name)
			name = d->proc[i].name;
	if (s->pid != s->fork.ppid) { /* a new process */
		struct proc *cp = proc_get(d, s->pid);
		if (cp && *name)
			cp->name = name;
		if (sb_fork_maps(d, s->pid, s->fork.ppid, s->time) < 0)
			return 0;
		r->kind = MTEV_PROCESS;
		r->process.pid = s->pid;
		r->process.name = mtev_cstr(name);
		r = r2;
		n = 1;
	}
	r->kind = MTEV_THREAD;
	r->thread.pid = s->pid;
	r->thread.tid = s->tid;
	r->thread.time = s->time;
	r->thread.name = mtev_cstr(name);
	return n + 1;
}

/* --call-graph dwarf: the unwinder learns the maps in time order ... */
static void unw_note(struct ptd *d, unw *uw, const struct sb *s)
{
	if (s->kind == SB_MMAP && (s->mmap.prot & PROT_X)) {
		const uint8_t *bid = s->mmap.bid;
		uint8_t bidlen = s->mmap.bidlen;
		const char *why;
		if (!bidlen) {
			const struct pd_buildid *b = bid_for_path(d, s->mmap.path);
			if (b)
				bid = b->id, bidlen = b->len;
		}
		unw_map(uw, s->pid, s->mmap.addr, s->mmap.len, s->mmap.pgoff,
			find_image(d, s->mmap.path, bid, bidlen, &why));
	} else if (s->kind == SB_COMM && s->comm.exec) {
		unw_exec(uw, s->pid);
	} else if (s->kind == SB_FORK) {
		unw_fork(uw, s->pid, s->fork.ppid);
	}
}

/* ... and unwinds each sample's stack copy with them: its chain replaces
 * the one perf recorded (the ip alone, in dwarf mode) when longer. */
static void unw_chain(struct ptd *d, const struct sb *s, struct mtev_rec *r)
{
	const uint8_t *u = d->ustk + s->sample.ustk - 1;
	uint64_t have, len, regs[UNW_NREGS];
	memcpy(&have, u, 8);
	memcpy(regs, u + 8, sizeof regs);
	memcpy(&len, u + 8 + sizeof regs, 8);
	if (mt_grow((void **)&d->ips, &d->ipscap, d->nips + 512 + 128, sizeof *d->ips) < 0)
		return;
	r->sample.ips = d->ips + s->sample.ips; /* the arena may have moved */
	/* --kernel: the kernel's frames (innermost first) stay before the
	 * unwound user stack */
	uint32_t nk = 0;
	while (nk < r->sample.nips && nk < 128 && r->sample.ips[nk] >> 63)
		nk++;
	memcpy(d->ips + d->nips, r->sample.ips, nk * sizeof *d->ips);
	size_t n = unw_sample(d->unw, s->pid, s->tid, regs, have, u + 16 + sizeof regs, len,
			      d->ips + d->nips + nk, 512, NULL);
	if (nk + n > r->sample.nips) {
		r->sample.ips = d->ips + d->nips;
		r->sample.nips = (uint32_t)(nk + n);
		d->st->unwound++;
	}
}

/* ---- root chains: whole stacks from frame-pointer samples ----
 * (docs/sampling.md, "Whole stacks under fp").  A frame-pointer walk stops
 * at the first function below it that keeps no frame pointer; on Debian
 * that is glibc's start code under main (or start_thread under a thread's
 * function), so no fp sample shows its thread's root.  Those outermost
 * frames live as long as the thread: a sparse stream of samples with a
 * stack copy, recorded beside the fp samples (mt-capture -g fp), unwound to
 * the thread's outermost frame, shows them.  Each thread's root chain is
 * the return addresses, root first, that all its whole unwound stacks
 * begin with; an fp sample whose chain holds one of them gets the frames
 * below it from the chain.  Nothing is guessed: the join is at the same
 * return address of the same thread (the same generation of it: a new one
 * at its fork and at each exec), and a root chain stops before the first
 * return address that an unwound stack holds twice (a recursive function,
 * whose depth varies: the same address does not say the same level). */

/* A new generation of the thread a FORK (the child) or an exec begins;
 * @pass 0 the learning pass, 1 the writing pass (both see every sideband
 * record in the same order). */
static void root_gen(struct ptd *d, const struct sb *s, int pass)
{
	if (s->kind == SB_FORK || (s->kind == SB_COMM && s->comm.exec)) {
		int th = thr_get(d, s->tid, s->pid);
		if (th >= 0)
			d->thr[th].rgen[pass]++;
	}
}

static struct rchain *rchain_of(struct thr *t, uint32_t gen)
{
	for (size_t i = 0; i < t->nrc; i++)
		if (t->rc[i].gen == gen)
			return &t->rc[i];
	return NULL;
}

/* The root chains of a process's threads other than its first pooled:
 * kept in its first thread's list under this bit (the base every thread
 * of the process begins with: clone3, start_thread). */
#define RC_POOL 0x80000000u

/* A whole unwound stack (@c: the ip, then return addresses, innermost
 * first) into the root chain @gen of @t: the chain keeps what it shares
 * with it. */
static void root_learn(struct thr *t, uint32_t gen, const uint64_t *c, size_t n)
{
	struct rchain *rc = rchain_of(t, gen);
	size_t m = 0;
	/* root first, up to the first return address seen twice */
	while (m + 1 < n) {
		uint64_t a = c[n - 1 - m];
		size_t k;
		for (k = 1; k < n - 1 - m && c[k] != a; k++)
			;
		if (k < n - 1 - m)
			break;
		m++;
	}
	if (!rc) {
		if (mt_grow((void **)&t->rc, &t->rccap, t->nrc + 1, sizeof *t->rc) < 0)
			return;
		rc = &t->rc[t->nrc];
		*rc = (struct rchain){gen, 0, 0, malloc((m ? m : 1) * sizeof *rc->ra)};
		if (!rc->ra)
			return;
		t->nrc++;
		for (size_t i = 0; i < m; i++)
			rc->ra[i] = c[n - 1 - i];
		rc->n = (uint32_t)m;
	} else {
		uint32_t i = 0;
		while (i < rc->n && i < m && rc->ra[i] == c[n - 1 - i])
			i++;
		rc->n = i;
	}
	rc->nseen++;
}

void sb_roots(struct ptd *d)
{
	size_t nfp = 0, nstk = 0, i;
	if (d->nq || d->have_info)
		return;
	for (i = 0; i < d->nsb; i++)
		if (d->sb[i].kind == SB_SAMPLE) {
			nfp += d->sb[i].sample.fp;
			nstk += d->sb[i].sample.ustk != 0;
		}
	if (!nfp || !nstk)
		return;
	d->roots = 1; /* root samples, not stack samples, joined or not */
	if (d->opts->no_root_join)
		return;
	unw *uw = unw_new();
	uint64_t *c = malloc(512 * sizeof *c);
	if (!uw || !c)
		goto out;
	for (i = 0; i < d->nsb; i++) {
		const struct sb *s = &d->sb[i];
		root_gen(d, s, 0);
		unw_note(d, uw, s);
		if (s->kind != SB_SAMPLE || !s->sample.ustk)
			continue;
		const uint8_t *u = d->ustk + s->sample.ustk - 1;
		uint64_t have, len, regs[UNW_NREGS];
		int whole, th;
		memcpy(&have, u, 8);
		memcpy(regs, u + 8, sizeof regs);
		memcpy(&len, u + 8 + sizeof regs, 8);
		size_t n = unw_sample(uw, s->pid, s->tid, regs, have, u + 16 + sizeof regs, len, c,
				      512, &whole);
		d->st->roots++;
		if (!whole || n < 2 || (th = thr_get(d, s->tid, s->pid)) < 0)
			continue;
		d->st->roots_whole++;
		root_learn(&d->thr[th], d->thr[th].rgen[0], c, n);
		int lt = s->tid != s->pid ? thr_get(d, s->pid, s->pid) : -1;
		if (lt >= 0) /* a thread other than the process's first */
			root_learn(&d->thr[lt], d->thr[lt].rgen[0] | RC_POOL, c, n);
	}
out:
	free(c);
	unw_free(uw);
}

/* An fp sample's chain (@r, the user part from @lf, its leaf) completed
 * with its thread's root chain: at the innermost return address that is
 * in the chain, the rest of the sample's chain (what the walk read past
 * the frame without a frame pointer) is replaced by the root chain's
 * frames below it.  Two whole stacks must have agreed on the root chain
 * (one alone might be a moment's stack, not the thread's root): the
 * thread's own, else those of the other threads of its process (their
 * common base), as far as the thread's own whole stack agrees. */
static void root_join(struct ptd *d, const struct sb *s, struct mtev_rec *r, uint32_t lf)
{
	int th = thr_get(d, s->tid, s->pid);
	int lt = s->tid != s->pid ? thr_get(d, s->pid, s->pid) : -1;
	size_t off = s->sample.ips; /* its chain in the arena (no stack copy: as read) */
	if (th < 0)
		return;
	const struct rchain *own = rchain_of(&d->thr[th], d->thr[th].rgen[1]), *rc = own;
	uint32_t nrc;
	if (!own || own->nseen < 2) {
		/* too few of its own: those of its process's other threads */
		const struct rchain *pool =
			lt >= 0 ? rchain_of(&d->thr[lt], d->thr[lt].rgen[1] | RC_POOL) : NULL;
		if (!pool || pool->nseen - (own ? own->nseen : 0) < 2)
			return;
		rc = pool;
	}
	nrc = rc->n;
	if (own && rc != own) /* and what its own whole stack shares with them */
		for (nrc = 0; nrc < rc->n && nrc < own->n && rc->ra[nrc] == own->ra[nrc]; nrc++)
			;
	for (uint32_t k = lf + 1; k < r->sample.nips; k++) {
		uint32_t j;
		for (j = 0; j < nrc && rc->ra[j] != d->ips[off + k]; j++)
			;
		if (j == nrc)
			continue;
		/* rc->ra[j] is ips[k]: the frames below are rc->ra[j-1] ... [0] */
		if (!j || j > 255)
			return;
		if (mt_grow((void **)&d->ips, &d->ipscap, d->nips + k + 1 + j, sizeof *d->ips) < 0)
			return;
		const uint64_t *src = d->ips + off; /* the arena may have moved */
		uint64_t *dst = d->ips + d->nips;
		/* where the walk went on the right way, those frames are its own */
		uint32_t had = 0;
		while (had < j && k + 1 + had < r->sample.nips && src[k + 1 + had] == rc->ra[j - 1 - had])
			had++;
		memmove(dst, src, (k + 1) * sizeof *dst);
		for (uint32_t q = 0; q < j; q++)
			dst[k + 1 + q] = rc->ra[j - 1 - q];
		r->sample.ips = dst;
		r->sample.nips = k + 1 + j;
		if (had == j)
			return; /* it had them all */
		r->sample.flags |= (j - had) << MTEV_SAMPLE_ROOTED_SHIFT;
		d->st->rooted++;
		return;
	}
}

static int sb_recs(struct ptd *d, const struct sb *s, struct mtev_rec *r, struct mtev_rec *r2)
{
	int n = 0;
	memset(r, 0, sizeof *r);
	memset(r2, 0, sizeof *r2);
	if (!d->nq && !d->have_info) {
		smap_apply(d, s);
		if (d->unw || (d->unw = unw_new()))
			unw_note(d, d->unw, s);
		root_gen(d, s, 1);
	}
	switch (s->kind) {
	case SB_MMAP:
		if (!(s->mmap.prot & PROT_X))
			return 0;
		sb_note_map(d, s);
		map_rec(d, s, r);
		return 1;
	case SB_COMM: {
		int th = thr_get(d, s->tid, s->pid);
		struct proc *cp;
		if ((s->pid == s->tid || s->comm.exec) && (cp = proc_get(d, s->pid))) {
			cp->name = s->comm.name;
			if (s->comm.exec)
				cp->nsbmaps = 0;
		}
		if (th >= 0)
			d->thr[th].announced = 1;
		if (s->pid == s->tid || s->comm.exec) {
			r->kind = MTEV_PROCESS;
			r->process.pid = s->pid;
			r->process.name = mtev_cstr(s->comm.name);
			n = 1;
		}
		{
			struct mtev_rec *t = n ? r2 : r;
			t->kind = MTEV_THREAD;
			t->thread.pid = s->pid;
			t->thread.tid = s->tid;
			t->thread.time = s->time;
			t->thread.name = mtev_cstr(s->comm.name);
			n++;
		}
		return n;
	}
	case SB_FORK:
		return sb_fork_rec(d, s, r, r2);
	case SB_SAMPLE:
		if (!d->nq && !d->have_info) {
			/* a thread known only by its samples (its fork and comm
			 * were before the recording, or lost): its record first, so
			 * it is a thread of its process */
			int th = thr_get(d, s->tid, s->pid);
			if (th >= 0 && !d->thr[th].announced) {
				d->thr[th].announced = 1;
				r->kind = MTEV_THREAD;
				r->thread.pid = s->pid;
				r->thread.tid = s->tid;
				r->thread.time = s->time;
				r = r2;
				n = 1;
			}
		}
		/* beside fp samples, a stack copy is a root sample (sb_roots),
		 * not a stack sample of its own */
		if (d->roots && s->sample.ustk)
			return n;
		r->kind = MTEV_SAMPLE;
		r->sample.pid = s->pid;
		r->sample.tid = s->tid;
		r->sample.time = s->time;
		r->sample.ips = d->ips + s->sample.ips;
		r->sample.nips = s->sample.nips;
		if (s->sample.ustk && d->unw)
			unw_chain(d, s, r);
		r->sample.nips = smap_chain_end(d, s->pid, r->sample.ips, r->sample.nips);
		{
			/* kernel frames only go under a user frame: a chain
			 * left with none says nothing of the user stack */
			uint32_t k = 0;
			while (k < r->sample.nips && r->sample.ips[k] >> 63)
				k++;
			if (k == r->sample.nips)
				return n;
			if (d->roots && s->sample.fp)
				root_join(d, s, r, k);
		}
		d->st->samples++;
		return n + 1;
	case SB_TRIGGER:
		r->kind = MTEV_TRIGGER;
		r->trigger.pid = s->pid;
		r->trigger.tid = s->tid;
		r->trigger.time = s->time;
		r->trigger.addr = s->trig.addr;
		r->trigger.arg0 = s->trig.arg0;
		r->trigger.arg1 = s->trig.arg1;
		r->trigger.symbol = mtev_cstr(s->trig.sym);
		d->st->triggers++;
		return 1;
	default:
		return 0;
	}
}

int sb_to_rec(struct ptd *d, const struct sb *s)
{
	struct mtev_rec r, r2, *o;
	int n, k;
	d->nsbout = 0;
	n = sb_recs(d, s, &r, &r2);
	for (k = 0; k < n; k++) {
		if (!(o = sb_out(d)))
			return -1;
		*o = k ? r2 : r;
	}
	return (int)d->nsbout;
}
