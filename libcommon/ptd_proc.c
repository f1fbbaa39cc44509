/* ptd_proc: the threads and processes of a decode, and each process's
 * executable maps and libipt image. */
#include "ptd_int.h"

#include <stdlib.h>
#include <string.h>

#include "vec.h"

/* ---- threads and processes ---- */

int thr_get(struct ptd *d, uint32_t tid, uint32_t pid)
{
	size_t i;
	if (d->nthr * 2 >= d->thr_icap) {
		size_t ncap = d->thr_icap ? 2 * d->thr_icap : 64, k;
		uint32_t *ni = malloc(ncap * sizeof *ni);
		if (!ni)
			return -1;
		memset(ni, 0xff, ncap * sizeof *ni);
		for (k = 0; k < d->nthr; k++) {
			size_t j = (d->thr[k].tid * 2654435761u) & (ncap - 1);
			while (ni[j] != UINT32_MAX)
				j = (j + 1) & (ncap - 1);
			ni[j] = (uint32_t)k;
		}
		free(d->thr_idx);
		d->thr_idx = ni;
		d->thr_icap = ncap;
	}
	for (i = (tid * 2654435761u) & (d->thr_icap - 1); d->thr_idx[i] != UINT32_MAX;
	     i = (i + 1) & (d->thr_icap - 1))
		if (d->thr[d->thr_idx[i]].tid == tid) {
			struct thr *t = &d->thr[d->thr_idx[i]];
			if (pid != UINT32_MAX && t->pid == UINT32_MAX)
				t->pid = pid;
			return (int)d->thr_idx[i];
		}
	if (mt_grow((void **)&d->thr, &d->thrcap, d->nthr + 1, sizeof *d->thr) < 0)
		return -1;
	memset(&d->thr[d->nthr], 0, sizeof d->thr[0]);
	d->thr[d->nthr].tid = tid;
	d->thr[d->nthr].pid = pid;
	d->thr[d->nthr].lastq = -1;
	d->thr_idx[i] = (uint32_t)d->nthr;
	return (int)d->nthr++;
}

struct proc *proc_get(struct ptd *d, uint32_t pid)
{
	size_t i;
	struct proc *p;
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].pid == pid)
			return &d->proc[i];
	if (mt_grow((void **)&d->proc, &d->proccap, d->nproc + 1, sizeof *d->proc) < 0)
		return NULL;
	p = &d->proc[d->nproc];
	memset(p, 0, sizeof *p);
	p->pid = pid;
	p->img = pt_image_alloc(NULL);
	if (!p->img)
		return NULL;
	/* kernel maps apply to every process */
	for (i = 0; i < d->nkmaps; i++) {
		if (mt_grow((void **)&p->maps, &p->mapcap, p->nmaps + 1, sizeof *p->maps) < 0)
			return NULL;
		p->maps[p->nmaps++] = d->kmaps[i];
	}
	d->nproc++;
	return p;
}

void map_note(struct mapent **v, size_t *n, size_t *cap, const struct mapent *m)
{
	if (mt_grow((void **)v, cap, *n + 1, sizeof **v) < 0)
		return;
	(*v)[(*n)++] = *m;
}

const struct mapent *map_lookup(struct ptd *d, uint32_t pid, uint64_t ip)
{
	struct proc *p = NULL;
	size_t i;
	for (i = 0; i < d->nproc; i++)
		if (d->proc[i].pid == pid)
			p = &d->proc[i];
	if (p) {
		for (i = p->nmaps; i-- > 0;)
			if (p->maps[i].start <= ip && ip < p->maps[i].end)
				return &p->maps[i];
	}
	for (i = d->nkmaps; i-- > 0;)
		if (d->kmaps[i].start <= ip && ip < d->kmaps[i].end)
			return &d->kmaps[i];
	return NULL;
}

void proc_exec(struct ptd *d, uint32_t pid)
{
	struct proc *p = proc_get(d, pid);
	size_t i;
	if (!p)
		return;
	if (mt_grow((void **)&d->oldimgs, &d->oldimgcap, d->noldimgs + 1, sizeof *d->oldimgs) == 0) {
		/* the old image keeps its sections (the walk reads code by them) */
		struct oldimg *o = &d->oldimgs[d->noldimgs++];
		o->img = p->img;
		o->isids = p->isids;
		o->nisids = p->nisids;
		p->isids = NULL;
		p->isidcap = 0;
	} else {
		pt_image_free(p->img);
	}
	p->img = pt_image_alloc(NULL);
	p->nmaps = 0;
	p->nisids = 0;
	p->anon_exec = 0;
	for (i = 0; i < d->nkmaps; i++) {
		map_note(&p->maps, &p->nmaps, &p->mapcap, &d->kmaps[i]);
	}
}

void proc_fork(struct ptd *d, uint32_t pid, uint32_t ppid)
{
	struct proc *parent, *child;
	size_t i;
	if (pid == ppid)
		return;
	parent = proc_get(d, ppid);
	if (!parent)
		return;
	child = proc_get(d, pid);
	if (!child)
		return;
	parent = proc_get(d, ppid); /* proc_get may have moved it */
	pt_image_copy(child->img, parent->img);
	for (i = 0; i < parent->nisids; i++)
		if (mt_grow((void **)&child->isids, &child->isidcap, child->nisids + 1,
			    sizeof *child->isids) == 0)
			child->isids[child->nisids++] = parent->isids[i];
	child->nmaps = 0;
	child->anon_exec = parent->anon_exec;
	for (i = 0; i < parent->nmaps; i++)
		map_note(&child->maps, &child->nmaps, &child->mapcap, &parent->maps[i]);
}

void proc_add_isid(struct ptd *d, struct proc *p, int32_t isid)
{
	if (pt_image_add_cached(p->img, d->isc, isid, NULL) < 0)
		return;
	if (mt_grow((void **)&p->isids, &p->isidcap, p->nisids + 1, sizeof *p->isids) == 0)
		p->isids[p->nisids++] = isid;
}
