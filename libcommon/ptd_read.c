/* ptd_read: reads a whole perf.data: sideband records (sorted by time),
 * the per-cpu context-switch timelines, and each AUX queue's trace, built
 * into one stream of segments. */
#include "ptd_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"

static int sb_add(struct ptd *d, const struct sb *s)
{
	if (mt_grow((void **)&d->sb, &d->sbcap, d->nsb + 1, sizeof *d->sb) < 0)
		return ptd_fail(d, PTD_ESYS, "out of memory");
	d->sb[d->nsb] = *s;
	d->sb[d->nsb].seq = d->seq++;
	d->nsb++;
	return 0;
}

static int sw_add(struct ptd *d, uint32_t cpu, uint64_t time, uint32_t pid, uint32_t tid)
{
	struct cpuline *cl;
	if (cpu >= 4096)
		return 0;
	if (cpu >= d->ncpus) {
		struct cpuline *nc = realloc(d->cpus, (cpu + 1) * sizeof *nc);
		if (!nc)
			return ptd_fail(d, PTD_ESYS, "out of memory");
		memset(nc + d->ncpus, 0, (cpu + 1 - d->ncpus) * sizeof *nc);
		d->cpus = nc;
		d->ncpus = cpu + 1;
	}
	cl = &d->cpus[cpu];
	if (mt_grow((void **)&cl->v, &cl->cap, cl->n + 1, sizeof *cl->v) < 0)
		return ptd_fail(d, PTD_ESYS, "out of memory");
	cl->v[cl->n].time = time;
	cl->v[cl->n].pid = pid;
	cl->v[cl->n].tid = tid;
	cl->v[cl->n].seq = d->seq++;
	cl->n++;
	return 0;
}

struct ptq *q_get(struct ptd *d, uint32_t idx)
{
	size_t i;
	for (i = 0; i < d->nq; i++)
		if (d->q[i].idx == idx)
			return &d->q[i];
	{
		struct ptq *nq = realloc(d->q, (d->nq + 1) * sizeof *nq);
		if (!nq)
			return NULL;
		d->q = nq;
		memset(&d->q[d->nq], 0, sizeof d->q[0]);
		d->q[d->nq].idx = idx;
		d->q[d->nq].th = -1;
		d->q[d->nq].cpu = -1;
		return &d->q[d->nq++];
	}
}

static int sb_cmp(const void *a, const void *b)
{
	const struct sb *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int sw_cmp(const void *a, const void *b)
{
	const struct sw *x = a, *y = b;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int qbuf_cmp(const void *a, const void *b)
{
	const struct qbuf *x = a, *y = b;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return x->file_off < y->file_off ? -1 : x->file_off > y->file_off;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct seg *x = a, *y = b;
	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Builds each queue's stream: buffers in offset order; an overlap that is
 * the previous buffer's zero padding (perf pads AUXTRACE to 8 bytes but
 * counts offsets unpadded) is trimmed, an overlap that repeats data (the
 * next snapshot) is skipped; a hole starts a new segment, and so does every
 * place an AUX record flags as truncated (data lost there). */
static int q_build(struct ptd *d, struct ptq *q)
{
	uint64_t total = 0, end_off = 0, pos = 0;
	uint64_t *bpos; /* stream position of each buffer's offset */
	size_t i, k, cap;

	if (q->nbufs > 1) /* qsort(NULL, 0) is undefined */
		qsort(q->bufs, q->nbufs, sizeof *q->bufs, qbuf_cmp);
	for (i = 0; i < q->nbufs; i++)
		total += q->bufs[i].size;
	cap = q->nbufs + d->nauxlost + 1;
	if (q->nbufs == 1 && !(q->bufs[0].file_off >> 63)) {
		/* one buffer in the mapped file: decode it in place */
		q->segs = calloc(cap, sizeof *q->segs);
		if (!q->segs)
			return ptd_fail(d, PTD_ESYS, "out of memory");
		q->stream = (uint8_t *)(uintptr_t)q->bufs[0].data;
		q->len = q->bufs[0].size;
		q->segs[0].end = q->len;
		q->nsegs = 1;
		bpos = NULL;
		pos = q->len;
		goto lost;
	}
	q->stream_owned = 1;
	q->stream = malloc(total ? total : 1);
	q->segs = calloc(cap, sizeof *q->segs);
	bpos = calloc(q->nbufs + 1, sizeof *bpos);
	if (!q->stream || !q->segs || !bpos) {
		free(bpos);
		return ptd_fail(d, PTD_ESYS, "out of memory for %" PRIu64 " bytes of trace", total);
	}
	for (i = 0; i < q->nbufs; i++) {
		const struct qbuf *b = &q->bufs[i];
		uint64_t skip = 0;
		int newseg = i == 0, lost = 0;
		if (i > 0 && b->offset < end_off) {
			uint64_t ov = end_off - b->offset, z;
			if (ov > pos)
				ov = pos;
			for (z = 0; z < ov && !q->stream[pos - ov + z]; z++)
				;
			if (z == ov && (ov > b->size || memcmp(q->stream + pos - ov, b->data, ov))) {
				pos -= ov; /* the padding of the previous buffer */
			} else if (ov <= b->size && !memcmp(q->stream + pos - ov, b->data, ov)) {
				skip = ov;
			} else {
				newseg = 1; /* overlapping but different: decode apart */
			}
		} else if (i > 0 && b->offset > end_off) {
			newseg = 1;
			lost = !d->snapshot;
		}
		if (newseg) {
			if (q->nsegs)
				q->segs[q->nsegs - 1].end = pos;
			q->segs[q->nsegs].begin = pos;
			q->segs[q->nsegs].lost_before = lost;
			q->segs[q->nsegs].lost_at = b->offset;
			q->nsegs++;
		}
		bpos[i] = pos - skip;
		memcpy(q->stream + pos, b->data + skip, b->size - skip);
		pos += b->size - skip;
		if (b->offset + b->size > end_off)
			end_off = b->offset + b->size;
	}
	if (q->nsegs)
		q->segs[q->nsegs - 1].end = pos;
	q->len = pos;

lost:
	/* data the kernel dropped: the AUX record's end is where it was lost */
	for (k = 0; k < d->nauxlost; k++) {
		const struct auxlost *l = &d->auxlost[k];
		uint64_t at = l->offset, sp = UINT64_MAX;
		size_t j;
		if (d->per_cpu ? l->cpu != (uint32_t)q->cpu : l->tid != q->tid0)
			continue;
		for (i = 0; i < q->nbufs; i++)
			if (q->bufs[i].offset <= at && at <= q->bufs[i].offset + q->bufs[i].size)
				sp = (bpos ? bpos[i] : 0) + (at - q->bufs[i].offset);
		if (sp == UINT64_MAX || sp == 0 || sp >= pos)
			continue;
		for (j = 0; j < q->nsegs; j++)
			if (q->segs[j].begin < sp && sp < q->segs[j].end)
				break;
		if (j == q->nsegs || q->nsegs >= cap)
			continue;
		q->segs[q->nsegs].begin = sp;
		q->segs[q->nsegs].end = q->segs[j].end;
		q->segs[q->nsegs].lost_before = 1;
		q->segs[q->nsegs].lost_at = at;
		q->segs[j].end = sp;
		q->nsegs++;
		qsort(q->segs, q->nsegs, sizeof *q->segs, seg_cmp);
	}
	free(bpos);
	return 0;
}

enum { RD_CORRUPT = -1, RD_NOMEM = -2, RD_FAIL = -3 }; /* ptd_fail said why */

/* MMAP, MMAP2: a map, as sideband. */
static int rd_mmap(struct ptd *d, const struct pd_event *ev, struct sb *s)
{
	struct pd_mmap m;
	if (pd_parse_mmap(ev, &m) < 0)
		return RD_CORRUPT;
	s->kind = SB_MMAP;
	s->pid = m.pid;
	s->tid = m.tid;
	s->mmap.addr = m.addr;
	s->mmap.len = m.len;
	s->mmap.pgoff = m.pgoff;
	s->mmap.prot = m.prot;
	memcpy(s->mmap.bid, m.build_id, 20);
	s->mmap.bidlen = m.build_id_len;
	s->mmap.path = strpool_intern(&d->strs, m.filename);
	if (!s->mmap.path || sb_add(d, s) < 0)
		return RD_NOMEM;
	return 0;
}

/* COMM: a thread's name (exec: a new image). */
static int rd_comm(struct ptd *d, const struct pd_event *ev, struct sb *s)
{
	struct pd_comm c;
	if (pd_parse_comm(ev, &c) < 0)
		return RD_CORRUPT;
	s->kind = SB_COMM;
	s->pid = c.pid;
	s->tid = c.tid;
	s->comm.exec = c.exec;
	s->comm.name = strpool_intern(&d->strs, c.comm);
	if (!s->comm.name || sb_add(d, s) < 0)
		return RD_NOMEM;
	return 0;
}

/* FORK. */
static int rd_fork(struct ptd *d, const struct pd_event *ev, struct sb *s)
{
	struct pd_fork f;
	if (pd_parse_fork(ev, &f) < 0)
		return RD_CORRUPT;
	s->kind = SB_FORK;
	s->time = f.time;
	s->pid = f.pid;
	s->tid = f.tid;
	s->fork.ppid = f.ppid;
	if (sb_add(d, s) < 0)
		return RD_NOMEM;
	return 0;
}

/* SWITCH, SWITCH_CPU_WIDE: the per-cpu thread timeline. */
static int rd_switch(struct ptd *d, const struct pd_event *ev, struct sb *s)
{
	int ret;
	struct pd_switch sw;
	if (pd_parse_switch(ev, &sw) < 0)
		return RD_CORRUPT;
	if (!(ev->sid.have & PD_HAVE_CPU))
		return 0;
	if (sw.cpu_wide) {
		if (sw.out)
			ret = sw_add(d, ev->sid.cpu, s->time, sw.next_prev_pid,
				     sw.next_prev_tid);
		else
			ret = sw_add(d, ev->sid.cpu, s->time, ev->sid.pid, ev->sid.tid);
	} else if (!sw.out) {
		ret = sw_add(d, ev->sid.cpu, s->time, ev->sid.pid, ev->sid.tid);
	} else {
		ret = 0;
	}
	if (ret < 0)
		return RD_NOMEM;
	return 0;
}

/* ITRACE_START: a thread starts on a cpu. */
static int rd_itrace_start(struct ptd *d, const struct pd_event *ev, struct sb *s)
{
	struct pd_itrace_start is;
	if (pd_parse_itrace_start(ev, &is) < 0)
		return RD_CORRUPT;
	if ((ev->sid.have & PD_HAVE_CPU) &&
	    sw_add(d, ev->sid.cpu, s->time, is.pid, is.tid) < 0)
		return RD_NOMEM;
	return 0;
}

/* AUX: data the kernel lost (flagged truncated) becomes a gap. */
static int rd_aux(struct ptd *d, const struct pd_event *ev)
{
	struct pd_aux a;
	if (pd_parse_aux(ev, &a) < 0)
		return RD_CORRUPT;
	if (a.flags & PD_AUX_TRUNCATED) {
		struct auxlost *l;
		d->st->degraded = 1;
		ptd_warn(d, "the kernel lost trace data after AUX offset %" PRIu64
			    " (%s %u): a gap there",
			 a.aux_offset + a.aux_size, d->per_cpu ? "cpu" : "tid",
			 d->per_cpu ? ev->sid.cpu : ev->sid.tid);
		if (mt_grow((void **)&d->auxlost, &d->auxlostcap, d->nauxlost + 1, sizeof *l) < 0)
			return RD_NOMEM;
		l = &d->auxlost[d->nauxlost++];
		l->tid = ev->sid.tid;
		l->cpu = ev->sid.cpu;
		l->offset = a.aux_offset + a.aux_size;
	}
	return 0;
}

/* TIME_CONV: the TSC to perf time conversion. */
static int rd_time_conv(struct ptd *d, const struct pd_event *ev)
{
	struct pd_time_conv tc;
	if (pd_parse_time_conv(ev, &tc) < 0)
		return RD_CORRUPT;
	d->t_shift = tc.time_shift;
	d->t_mult = tc.time_mult;
	d->t_zero = tc.time_zero;
	d->have_clock = tc.cap_user_time_zero && tc.time_mult;
	return 0;
}

/* AUXTRACE_INFO: Intel PT's configuration (and the clock when TIME_CONV lacks it). */
static int rd_auxtrace_info(struct ptd *d, const struct pd_event *ev)
{
	struct pd_auxtrace_info ai;
	size_t k;
	if (pd_parse_auxtrace_info(ev, &ai) < 0)
		return RD_CORRUPT;
	if (ai.type != 1) {
		ptd_warn(d, "AUXTRACE_INFO of type %u is not Intel PT; ignored",
			 ai.type);
		return 0;
	}
	d->have_info = 1;
	d->npriv = ai.npriv < 64 ? ai.npriv : 64;
	for (k = 0; k < d->npriv; k++)
		d->priv[k] = ai.priv[k];
	if (!d->have_clock && d->npriv > 4 && d->priv[4] && d->priv[2] && d->priv[1] < 64) {
		d->t_shift = d->priv[1];
		d->t_mult = d->priv[2];
		d->t_zero = d->priv[3];
		d->have_clock = 1;
	}
	if (d->npriv > 9) {
		d->snapshot = !!d->priv[8];
		d->per_cpu = !!d->priv[9];
	}
	return 0;
}

/* AUXTRACE: a buffer of trace for its queue; @trunc: the file ends inside it. */
static int rd_auxtrace(struct ptd *d, pd_reader *r, const struct pd_event *ev, int trunc)
{
	struct pd_auxtrace a;
	struct ptq *q;
	struct qbuf *b;
	if (pd_parse_auxtrace(ev, &a) < 0)
		return RD_CORRUPT;
	q = q_get(d, a.idx);
	if (!q)
		return RD_NOMEM;
	if (mt_grow((void **)&q->bufs, &q->bufcap, q->nbufs + 1, sizeof *q->bufs) < 0)
		return RD_NOMEM;
	b = &q->bufs[q->nbufs++];
	b->offset = a.offset;
	b->size = ev->payload_size;
	b->file_off = ev->offset;
	d->st->aux_bytes += ev->payload_size;
	if (a.cpu >= 0)
		q->cpu = a.cpu;
	if (a.tid != UINT32_MAX && a.tid) {
		q->tid0 = a.tid;
		q->pid0 = UINT32_MAX;
	}
	if (pd_info(r)->pipe || !ev->payload) {
		uint8_t *copy = malloc(ev->payload_size ? ev->payload_size : 1);
		if (!copy)
			return RD_NOMEM;
		if (ev->payload_size)
			memcpy(copy, ev->payload, ev->payload_size);
		b->data = copy;
		/* remember to free: mark with file_off high bit */
		b->file_off |= 1ull << 63;
	} else {
		b->data = ev->payload;
	}
	if (trunc && !d->opts->partial) {
		ptd_fail(d, PTD_EINPUT, "%s is truncated: it ends inside the AUXTRACE "
			 "data at offset 0x%" PRIx64 " (%" PRIu64 " of %" PRIu64 " bytes; "
			 "--partial decodes what is there)",
			 INNAME(d->opts), ev->offset, ev->payload_size, a.size);
		return RD_FAIL;
	}
	if (trunc) {
		d->st->degraded = 1;
		ptd_warn(d, "%s ends inside the AUXTRACE data at offset 0x%" PRIx64
			    ": %" PRIu64 " of %" PRIu64 " bytes present",
			 INNAME(d->opts), ev->offset, ev->payload_size, a.size);
	}
	return 0;
}

/* SAMPLE: a trigger (hardware breakpoint) or a stack sample. */
static int rd_sample(struct ptd *d, const struct pd_event *ev, struct sb *s)
{
	uint64_t ip_n;
	struct pd_sample sm;
	size_t k, n = 0;
	if (!ev->attr)
		return 0;
	if (pd_parse_sample(ev, &sm) < 0)
		return RD_CORRUPT;
	if (d->pt_attr && ev->attr == d->pt_attr)
		return 0;
	s->time = sm.time;
	s->pid = sm.pid;
	s->tid = sm.tid;
	if (ev->attr->type == PD_TYPE_BREAKPOINT) {
		int ok;
		s->kind = SB_TRIGGER;
		s->trig.addr = sm.ip ? sm.ip : ev->attr->config1;
		s->trig.arg0 = pd_sample_reg(&sm, ev->attr, 5, &ok);
		s->trig.arg1 = pd_sample_reg(&sm, ev->attr, 4, &ok);
		s->trig.sym = ev->attr->name ? strpool_intern(&d->strs, ev->attr->name)
					   : NULL;
		if (sb_add(d, s) < 0)
			return RD_NOMEM;
		return 0;
	}
	/* an Intel PT recording carries cycles samples too: keep
	 * them only for sampling recordings */
	if (d->have_info)
		return 0;
	ip_n = sm.nr_ips + sm.nr_lbr + 1;
	if (mt_grow((void **)&d->ips, &d->ipscap, d->nips + ip_n, sizeof *d->ips) < 0)
		return RD_NOMEM;
	s->kind = SB_SAMPLE;
	s->sample.ips = d->nips;
	if (sm.nr_ips) {
		/* PERF_CONTEXT_* markers switch the context of the
		 * entries after them: keep the user stack only (a
		 * chain without markers is taken as user).  The
		 * kernel's frame-pointer walk stores whatever is at
		 * rbp+8, so through code without frame pointers the
		 * user part can go on with 0 or garbage: it ends at
		 * the first entry that cannot be a user return
		 * address (0, or in the upper half: kernel space). */
		int user = 1, user_seen = 0, walk_end = 0, kernel = 0;
		for (k = 0; k < sm.nr_ips; k++) {
			uint64_t ip = sm.ips[k];
			if (ip >= PD_CONTEXT_MAX) {
				user = ip == PD_CONTEXT_USER;
				kernel = ip == PD_CONTEXT_KERNEL;
				user_seen |= user;
				continue;
			}
			/* the kernel's frames (--kernel), innermost
			 * first, come before the user stack: they
			 * go under the system call's user frame */
			if (kernel && !user_seen && !walk_end && ip >> 63) {
				d->ips[d->nips + n++] = ip;
				continue;
			}
			if (!user || walk_end)
				continue;
			if (ip == 0 || ip >> 63) {
				walk_end = 1;
				continue;
			}
			d->ips[d->nips + n++] = ip;
		}
		if (sm.nr_lbr && (ev->attr->branch_sample_type & (1u << 11))) {
			/* lbr call stack: the user part is ip then the
			 * call sites, innermost first */
			if ((!user_seen || n == 0) && !(sm.ip >> 63))
				d->ips[d->nips + n++] = sm.ip;
			for (k = 0; k < sm.nr_lbr; k++)
				d->ips[d->nips + n++] = sm.lbr[k].from;
		}
	} else if (!(sm.ip >> 63)) {
		d->ips[d->nips + n++] = sm.ip;
	}
	/* no user frame at all (a kernel-only chain): the user
	 * stack is unknown, not empty; an empty sample would end
	 * every open frame of the thread */
	if (n == 0)
		return 0;
	s->sample.nips = (uint32_t)n;
	s->sample.fp = sm.nr_ips && !(ev->attr->sample_type & (PD_SAMPLE_STACK_USER |
								 PD_SAMPLE_BRANCH_STACK));
	d->nips += n;
	if (sm.stack_user && sm.stack_size && sm.regs_abi) {
		/* --call-graph dwarf: keep the registers and the stack
		 * copy for the unwinder (run in time order, with the
		 * maps of that time) */
		uint64_t have = 0, regs[UNW_NREGS] = {0};
		for (unsigned g = 0; g < UNW_NREGS; g++) {
			int ok;
			regs[g] = pd_sample_reg(&sm, ev->attr, g, &ok);
			have |= (uint64_t)ok << g;
		}
		size_t need = 16 + sizeof regs + sm.stack_size;
		if (mt_grow((void **)&d->ustk, &d->ustkcap, d->nustk + need, 1) < 0)
			return RD_NOMEM;
		uint8_t *u = d->ustk + d->nustk;
		memcpy(u, &have, 8);
		memcpy(u + 8, regs, sizeof regs);
		memcpy(u + 8 + sizeof regs, &sm.stack_size, 8);
		memcpy(u + 16 + sizeof regs, sm.stack_user, sm.stack_size);
		s->sample.ustk = d->nustk + 1;
		d->nustk += need;
	}
	if (sb_add(d, s) < 0)
		return RD_NOMEM;
	return 0;
}

/* After the last record: what the header said (cpuid, build-ids), the
 * sideband and the switch timelines sorted by time, each queue's stream
 * built. */
static int rd_finish(struct ptd *d, pd_reader *r)
{
	const struct pd_info *in = pd_info(r);
	size_t k;

	if (in->cpuid)
		snprintf(d->cpuid, sizeof d->cpuid, "%s", in->cpuid);
	if (in->nbuildids) {
		d->bids = calloc(in->nbuildids, sizeof *d->bids);
		if (!d->bids)
			return RD_NOMEM;
		for (k = 0; k < in->nbuildids; k++) {
			d->bids[k] = in->buildids[k];
			d->bids[k].filename = strpool_intern(&d->strs, in->buildids[k].filename);
		}
		d->nbids = in->nbuildids;
	}
	/* the pt attr pointer dies with the reader: keep a copy (stream-mode
	 * payloads were copied; memory-mode ones point into the mapping, so
	 * the reader stays open until the end) */
	if (d->pt_attr) {
		d->pt_attr_copy = *d->pt_attr;
		d->pt_attr_copy.ids = NULL;
		d->pt_attr_copy.name = NULL;
		d->pt_attr = &d->pt_attr_copy;
	}
	if (d->nsb > 1) /* qsort(NULL, 0) is undefined */
		qsort(d->sb, d->nsb, sizeof *d->sb, sb_cmp);
	sb_roots(d);
	for (k = 0; k < d->ncpus; k++)
		if (d->cpus[k].n > 1)
			qsort(d->cpus[k].v, d->cpus[k].n, sizeof *d->cpus[k].v, sw_cmp);
	for (k = 0; k < d->nq; k++)
		if (q_build(d, &d->q[k]) < 0)
			return RD_FAIL;
	return 0;
}

int read_perf(struct ptd *d, int fd)
{
	pd_reader *r;
	struct pd_event ev;
	int ret;

	ret = pd_open(&r, fd);
	if (ret < 0) {
		if (ret == -PD_EIO)
			return ptd_fail(d, PTD_ESYS, "reading %s: %s", INNAME(d->opts), strerror(errno));
		return ptd_fail(d, PTD_EINPUT, "%s: %s (in the header)", INNAME(d->opts),
				 pd_strerror(ret));
	}
	while ((ret = pd_next(r, &ev)) > 0 || ret == -PD_ETRUNC) {
		struct sb s;
		int trunc = ret == -PD_ETRUNC, e = 0;
		if (trunc && !ev.raw)
			break;
		if (trunc && ev.type != PD_REC_AUXTRACE)
			break;
		d->st->records++;
		if (ev.type < 128)
			d->st->rec_by_type[ev.type]++;
		memset(&s, 0, sizeof s);
		s.time = (ev.sid.have & PD_HAVE_TIME) ? ev.sid.time : 0;
		if (ev.sid.have & PD_HAVE_TIME) { /* the recording's span (progress) */
			if (!d->rec_t0 || s.time < d->rec_t0)
				d->rec_t0 = s.time;
			if (s.time > d->rec_t9)
				d->rec_t9 = s.time;
		}
		s.pid = ev.sid.pid;
		s.tid = ev.sid.tid;
		switch (ev.type) {
		case PD_REC_MMAP:
		case PD_REC_MMAP2:
			e = rd_mmap(d, &ev, &s);
			break;
		case PD_REC_COMM:
			e = rd_comm(d, &ev, &s);
			break;
		case PD_REC_FORK:
			e = rd_fork(d, &ev, &s);
			break;
		case PD_REC_SWITCH:
		case PD_REC_SWITCH_CPU_WIDE:
			e = rd_switch(d, &ev, &s);
			break;
		case PD_REC_ITRACE_START:
			e = rd_itrace_start(d, &ev, &s);
			break;
		case PD_REC_AUX:
			e = rd_aux(d, &ev);
			break;
		case PD_REC_TIME_CONV:
			e = rd_time_conv(d, &ev);
			break;
		case PD_REC_AUXTRACE_INFO:
			e = rd_auxtrace_info(d, &ev);
			break;
		case PD_REC_AUXTRACE:
			e = rd_auxtrace(d, r, &ev, trunc);
			break;
		case PD_REC_SAMPLE:
			e = rd_sample(d, &ev, &s);
			break;
		default:
			break;
		}
		if (e == RD_CORRUPT)
			goto corrupt;
		if (e == RD_NOMEM)
			goto nomem;
		if (e == RD_FAIL)
			goto out;
		if (trunc)
			break;
		/* attrs arrive before data; find the PT event once we can */
		if (!d->pt_attr && d->have_info && d->npriv > 0) {
			const struct pd_info *in = pd_info(r);
			size_t k;
			for (k = 0; k < in->nattrs; k++)
				if (in->attrs[k].type == d->priv[0])
					d->pt_attr = &in->attrs[k];
		}
	}
	if (ret < 0) {
		if (ret == -PD_ETRUNC && !d->opts->partial) {
			/* a killed recorder: no output that looks complete */
			ptd_fail(d, PTD_EINPUT, "%s is truncated at offset 0x%" PRIx64
				 " (--partial decodes what is there)", INNAME(d->opts), pd_offset(r));
			goto out;
		} else if (ret == -PD_ETRUNC) {
			d->st->degraded = 1;
			ptd_warn(d, "%s is truncated at offset 0x%" PRIx64
				    "; decoding what is there",
				 INNAME(d->opts), pd_offset(r));
		} else if (ret == -PD_EIO) {
			ptd_fail(d, PTD_ESYS, "reading %s: %s", INNAME(d->opts), strerror(errno));
			goto out;
		} else {
			ptd_fail(d, PTD_EINPUT, "%s: %s at offset 0x%" PRIx64, INNAME(d->opts),
				 pd_strerror(ret), pd_offset(r));
			goto out;
		}
	}
	if (rd_finish(d, r) == RD_NOMEM)
		goto nomem;
out:
	d->reader = r; /* AUX payloads may point into its mapping */
	return d->err;
corrupt:
	ptd_fail(d, PTD_EINPUT, "%s: corrupt %s record at offset 0x%" PRIx64, INNAME(d->opts),
		 pd_rec_name(ev.type) ? pd_rec_name(ev.type) : "unknown", ev.offset);
	pd_close(r);
	return d->err;
nomem:
	ptd_fail(d, PTD_ESYS, "out of memory");
	pd_close(r);
	return d->err;
}
