/* ptd_step: the libipt stepper.  One libipt block decoder per queue, run as
 * a resumable step machine.  The decoder is configured to end blocks at
 * every direct call and jump (end_on_call / end_on_jump), so a block holds
 * at most one branch, its last instruction; the x86 classifier (x86br.h,
 * cached) says what that instruction is and how long, and the next block's
 * ip says where it went.  Records go into the queue's ring only. */
#include "ptd_int.h"
#include "ptd_par.h" /* -j N: libipt's calls answered by ptd_par.c */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vec.h"

static void thr_announce(struct ptd *d, struct ptq *q, struct thr *t, uint64_t time)
{
	struct mtev_rec *r;
	if (t->announced)
		return;
	t->announced = 1;
	r = q_push(d, q);
	if (!r)
		return;
	memset(r, 0, sizeof *r);
	r->kind = MTEV_THREAD;
	r->thread.pid = t->pid == UINT32_MAX ? 0 : t->pid;
	r->thread.tid = t->tid;
	r->thread.time = time;
}

/* The branch record of thread @t into the queue. */
static inline __attribute__((always_inline)) void push_br(struct ptd *d, struct ptq *q,
							   struct thr *t, unsigned type,
							   uint64_t from, uint64_t to, uint64_t time)
{
	struct mtev_rec *r = q_push(d, q);
	if (!r)
		return;
	r->kind = MTEV_BRANCH;
	r->br.tid = t->tid;
	r->br.time = time;
	r->br.type = type;
	r->br.from = from;
	r->br.to = to;
	t->last_time = time;
	t->has_rec = 1;
	t->ended = type == MTEV_BR_TRACE_END;
	t->lastq = (int)(q - d->q);
	d->st->branches++;
}

/* Emits a branch of the queue's current thread. */
static void emit_br_slow(struct ptd *d, struct ptq *q, unsigned type, uint64_t from, uint64_t to,
			 uint64_t time)
{
	struct thr *t;
	struct mtev_rec *r;
	if (q->th < 0 || q->untimed)
		return;
	t = &d->thr[q->th];
	if (!t->announced)
		thr_announce(d, q, t, time);
	if (t->gap_pending) {
		r = q_push(d, q);
		if (!r)
			return;
		*r = t->gap;
		r->gap.end = time >= r->gap.begin ? time : r->gap.begin;
		t->gap_pending = 0;
		d->st->gaps++;
		if (type != MTEV_BR_TRACE_START) {
			/* after a gap the thread's trace starts again
			 * (mtev-semantics), also when the first record after
			 * it comes from an event (an overflow whose timing came
			 * back at a TSC, not at a block): a resume becomes the
			 * start, anything else starts at its source */
			q->need_start = 0;
			if (type == MTEV_BR_SYSRET || type == MTEV_BR_IRET)
				type = MTEV_BR_TRACE_START;
			else if (from)
				emit_br_slow(d, q, MTEV_BR_TRACE_START, 0, from, time);
		}
	}
	push_br(d, q, t, type, from, to, time);
}

/* The common case inline: thread known and announced, no gap to close. */
static inline void emit_br(struct ptd *d, struct ptq *q, unsigned type, uint64_t from, uint64_t to,
			   uint64_t time)
{
	struct thr *t;
	if (q->th < 0 || q->untimed) {
		emit_br_slow(d, q, type, from, to, time);
		return;
	}
	t = &d->thr[q->th];
	if (!t->announced || t->gap_pending) {
		emit_br_slow(d, q, type, from, to, time);
		return;
	}
	push_br(d, q, t, type, from, to, time);
}


static void set_gap(struct ptd *d, struct ptq *q, unsigned reason, int code, uint64_t offset,
		    uint64_t ip, const char *msg)
{
	struct thr *t;
	d->st->degraded = 1;
	if (q->th < 0)
		q_set_thread(d, q, q->time);
	if (!d->ngaps_set++) {
		d->gap1.reason = reason;
		d->gap1.code = code;
		d->gap1.tid = q->th >= 0 ? d->thr[q->th].tid : q->tid0;
		d->gap1.offset = offset;
		d->gap1.ip = ip;
		snprintf(d->gap1.msg, sizeof d->gap1.msg, "%s", msg ? msg : "");
	}
	if (q->th < 0)
		return;
	t = &d->thr[q->th];
	if (t->gap_pending) {
		/* consecutive errors without a good record between: each is
		 * its own gap, the earlier one ends where the next begins */
		struct mtev_rec *r = q_push(d, q);
		if (!r)
			return;
		*r = t->gap;
		r->gap.end = q->time > r->gap.begin ? q->time : r->gap.begin;
		t->last_time = r->gap.end;
		d->st->gaps++;
	} else if (!t->has_rec) {
		t->last_time = q->time;
	}
	t->gap_pending = 1;
	memset(&t->gap, 0, sizeof t->gap);
	t->gap.kind = MTEV_GAP;
	t->gap.gap.tid = t->tid;
	t->gap.gap.begin = t->last_time;
	t->gap.gap.end = t->last_time;
	t->gap.gap.reason = reason;
	t->gap.gap.code = code;
	t->gap.gap.offset = offset;
	t->gap.gap.ip = ip;
	t->gap.gap.message = mtev_cstr(strpool_intern(&d->strs, msg));
	t->state = TS_GAP;
	t->lastq = (int)(q - d->q);
}

static inline uint64_t q_now(struct ptd *d, struct ptq *q)
{
	uint64_t tsc;
	uint32_t lm, lc;
	if (q->dec && pt_blk_time(q->dec, &tsc, &lm, &lc) >= 0) {
		/* many blocks share one timing packet: convert once */
		if (tsc != q->last_tsc) {
			uint64_t t = ptd_conv(d, tsc);
			q->last_tsc = tsc;
			if (t > q->time)
				q->time = t;
		}
		q->lost_timing = lm + lc;
	}
	return q->time;
}

/* Picks the thread running on the queue at @time (per-cpu: from the switch
 * timeline) and points the decoder at its process image. */
void q_set_thread(struct ptd *d, struct ptq *q, uint64_t time)
{
	uint32_t tid = q->tid0, pid = q->pid0;
	struct proc *p;
	int th;

	if (d->per_cpu && q->cpu >= 0 && (size_t)q->cpu < d->ncpus) {
		struct cpuline *cl = &d->cpus[q->cpu];
		while (q->swi + 1 < cl->n && cl->v[q->swi + 1].time <= time)
			q->swi++;
		if (cl->n && (cl->v[q->swi].time <= time || q->swi == 0)) {
			tid = cl->v[q->swi].tid;
			pid = cl->v[q->swi].pid;
		}
	}
	th = thr_get(d, tid, pid);
	if (th < 0) {
		ptd_fail(d, PTD_ESYS, "out of memory");
		return;
	}
	q->th = th;
	pid = d->thr[th].pid;
	if (pid == UINT32_MAX)
		pid = tid;
	p = proc_get(d, pid);
	if (p && p->img != q->img) {
		q->img = p->img;
		if (q->dec)
			pt_blk_set_image(q->dec, p->img);
	}
}

static int q_cpu_needs_switch(struct ptd *d, struct ptq *q, uint64_t time)
{
	struct cpuline *cl;
	if (!d->per_cpu || q->cpu < 0 || (size_t)q->cpu >= d->ncpus)
		return 0;
	cl = &d->cpus[q->cpu];
	return q->swi + 1 < cl->n && cl->v[q->swi + 1].time <= time;
}

/* Class and length of the instruction at @ip of section @isid (cached). */
static inline enum x86br classify_ip(struct ptd *d, uint64_t ip, int32_t isid, uint8_t mode,
					   uint8_t *size)
{
	const struct ccache_ent *e = &d->cc1[(ip ^ (ip >> 11)) & (PTD_CC1 - 1)];
	if (e->valid && e->ip == ip && e->isid == isid && e->mode == mode) {
		*size = e->size;
		return (enum x86br)e->cls;
	}
	return classify_ip_slow(d, ip, isid, mode, size);
}

/* The class of block @b's last instruction from its bytes (classify_at). */
static enum x86br classify_bytes(struct ptd *d, const struct pt_block *b, uint8_t *size)
{
	if (b->truncated) {
		int bits = b->mode == ptem_64bit ? 64 : b->mode == ptem_32bit ? 32 : 16;
		return x86br_classify(b->raw, b->size, bits, size);
	}
	return classify_ip(d, b->end_ip, b->isid, (uint8_t)b->mode, size);
}

/* The class of block @b's last instruction.  libipt already knows most
 * classes; only a jcc (its length says whether it was taken, looked up
 * lazily), a far transfer (syscall or not) and the unknown need a look at
 * the bytes. */
static inline __attribute__((always_inline)) enum x86br classify_at(struct ptd *d,
								     const struct pt_block *b,
								     uint8_t *size)
{
	int c = iclass_br(b);
	*size = 0;
	if (c >= 0)
		return (enum x86br)c;
	return classify_bytes(d, b, size);
}

static unsigned br_type(uint8_t cls)
{
	switch (cls) {
	case X86BR_JCC:
		return MTEV_BR_JCC;
	case X86BR_CALL:
		return MTEV_BR_CALL;
	case X86BR_RET:
		return MTEV_BR_RETURN;
	case X86BR_SYSCALL:
		return MTEV_BR_SYSCALL;
	case X86BR_SYSRET:
		return MTEV_BR_SYSRET;
	default:
		return MTEV_BR_JUMP;
	}
}

/* The instruction after the pending branch is at @next. */
static inline void resolve(struct ptd *d, struct ptq *q, uint64_t next)
{
	struct pend *p = &q->pend;
	if (!p->valid)
		return;
	p->valid = 0;
	switch (p->cls) {
	case X86BR_NONE:
		return;
	case X86BR_JCC:
		if (!p->size) {
			/* the fall-through is 2 to 15 bytes on: anything else
			 * was taken without looking at the instruction */
			uint64_t delta = next - p->from;
			if (delta >= 2 && delta <= 15)
				classify_ip(d, p->from, p->isid, p->mode, &p->size);
		}
		if (p->size && next == p->from + p->size)
			return;
		break;
	case X86BR_SYSCALL:
		/* a far branch that tracing went on through (no TIP.PGD: a
		 * corrupt trace, or int1/lcall staying in user code): the
		 * thread left at the instruction and came back at @next; a
		 * syscall's to and a sysret's from are 0 (mtev-semantics) */
		emit_br(d, q, MTEV_BR_SYSCALL, p->from, 0, p->time);
		if (!next) {
			/* no resume address (tracing went on at 0: a corrupt
			 * TIP): a sysret needs one (mtev-semantics); where
			 * tracing goes on comes with a trace-start */
			q->need_start = 1;
			q->start_time = p->time;
			return;
		}
		emit_br(d, q, MTEV_BR_SYSRET, 0, next, p->time);
		return;
	case X86BR_SYSRET:
		/* sysret, iret or far ret that tracing went on through (a
		 * corrupt trace, or a far ret in traced code): no syscall
		 * came before it, and a sysret comes only right after its
		 * syscall (mtev-semantics); like a far jmp, a jump */
		emit_br(d, q, MTEV_BR_JUMP, p->from, next, p->time);
		return;
	default:
		break;
	}
	emit_br(d, q, br_type(p->cls), p->from, next, p->time);
}

/* Whether what was decoded before an error of libipt's @code is kept.  A
 * missing image says nothing against the trace.  A packet that does not
 * parse (bad opcode or payload, data ending inside a packet) is reported at
 * its own first byte: every packet before it parsed and fitted the code, so
 * the branches they gave stand; corruption shows there, and libipt is
 * resynchronized at the next PSB.  An error where the trace disagrees with
 * the code (a TNT where a TIP was due, no IP, a bad return compression, an
 * instruction that cannot be decoded...) is positive evidence that an
 * earlier packet was wrong, at an unknown place since the last PSB, whose
 * PSB+ checked out: that part is retracted. */
static int err_keeps(int code)
{
	switch (code) {
	case pte_nomap:
	case pte_bad_image:
	case pte_nomem:
	case pte_bad_opc:
	case pte_bad_packet:
	case pte_eos:
		return 1;
	default:
		return 0;
	}
}

/* Whether the time the queue reached before an error at @off is later than
 * the next PSB's (its PSB+ TSC, converted to *@t): a TSC, MTC or CYC decoded
 * before the error was damaged too (real time does not go back, and
 * libipt's time never did in a clean trace: bench, docs/decode.md), so what
 * was decoded since the last PSB is not kept even for an error err_keeps()
 * keeps.  Corruption that parses as packets (garbage bytes are mostly valid
 * TNT, CYC and TIP packets) before a bad opcode shows so. */
static int time_went_back(struct ptd *d, struct ptq *q, uint64_t off, uint64_t *t)
{
	uint64_t tsc;
	if (!q_next_psb_tsc(d, q, off, &tsc))
		return 0;
	*t = ptd_conv(d, tsc);
	return *t < q->time;
}

/* A resync's copy is done with: the segment's decoder is q->dec again. */
static void q_resync_free(struct ptq *q)
{
	if (q->segdec) {
		/* the copy's decoder: never parallel (ptd_par_start) */
		(pt_blk_free_decoder)(q->dec);
		q->dec = q->segdec;
		q->segdec = NULL;
	}
	free(q->rsbuf);
	q->rsbuf = NULL;
	q->dec_bias = 0;
	q->rs_active = 0;
	q->rs_end = 0;
}

/* q_resync set q->dec up at a PSB+ made for the resync packet, with its
 * time: the queue runs from there (a TIP.PGE: the trace starts again at its
 * address, closing the gap). */
static void q_resynced(struct ptd *d, struct ptq *q)
{
	uint64_t t = q->time;
	q->rs_th = -1;
	if (q->th >= 0 && d->thr[q->th].gap_pending) {
		/* the gap the resync closes, for q_resync_drop */
		q->rs_th = q->th;
		q->rs_gap = d->thr[q->th].gap;
	}
	q->pend.valid = 0;
	q->need_start = 0;
	q->last_tsc = 0;
	q->spin_insns = 0;
	t = q_now(d, q);
	sb_apply_until(d, t);
	q_set_thread(d, q, t);
	q->state = Q_RUN;
}

/* Any error in a resync's copy (a compressed return whose call came before
 * the resync packet, or anything else): what the copy gave is dropped, the
 * gap it closed is open again, and the segment's decoder goes on at the
 * copy's PSB as without the resync.  A stretch kept must reach its PSB: a
 * piece that ends early is a segment too short to be placed in the stack
 * (mt-stitch finds no common frame). */
static void q_resync_drop(struct ptd *d, struct ptq *q)
{
	q_retract(d, q);
	if (q->rs_th >= 0) {
		struct thr *t = &d->thr[q->rs_th];
		t->gap = q->rs_gap;
		t->gap_pending = 1;
		t->state = TS_GAP;
	}
	d->st->resyncs--;
	q->rs_active = 0; /* q_sync: the segment's decoder at rs_psb */
	q->pend.valid = 0;
	q->state = Q_SYNC;
}

/* The decoder failed with @err at its offset @off, after @ip. */
void ptd_q_error_at(struct ptd *d, struct ptq *q, int err, uint64_t ip, uint64_t off)
{
	char msg[512];
	unsigned reason = MTEV_GAP_DECODE_ERROR;
	int code = pt_errcode(err), back;
	uint64_t tnext;

	off = q_off(q, off);
	if (q->rs_active) {
		/* dropped; a later resync packet may still reach the PSB */
		q_resync_drop(d, q);
		if (q_resync(d, q, off + 1))
			q_resynced(d, q);
		return;
	}
	back = time_went_back(d, q, off, &tnext);
	if (err_keeps(code) && !back)
		q_commit(q);
	else
		q_retract(d, q);
	if (back) {
		/* the queue's time is a running maximum: the damaged value
		 * would hold every later record at its time.  It falls back
		 * to the next PSB's (not before what is kept), which the sync
		 * after the error reads again. */
		q->time = tnext > q->ready_time ? tnext : q->ready_time;
		q->last_tsc = 0;
	}
	if (code == pte_nomap) {
		const struct mapent *m = q->th >= 0 ? map_lookup(d, d->thr[q->th].pid, ip) : NULL;
		reason = MTEV_GAP_NO_IMAGE;
		if (m)
			snprintf(msg, sizeof msg, "%s: no image for %s", pt_errstr(code), m->path);
		else
			snprintf(msg, sizeof msg, "%s: no mapping at 0x%" PRIx64, pt_errstr(code),
				 ip);
	} else {
		snprintf(msg, sizeof msg, "%s", pt_errstr(code));
	}
	set_gap(d, q, reason, -code, off + q->segs[q->curseg].begin, ip, msg);
	q->pend.valid = 0;
	q->state = Q_SYNC;
	if (code == pte_bad_opc || code == pte_bad_packet) {
		/* the packets after the damage, before the next PSB (not
		 * again after a resync's return without its call: piece after
		 * piece of a stretch that keeps returning to older frames
		 * makes segments too short to be placed in the stack) */
		if (q_resync(d, q, off + 1))
			q_resynced(d, q);
	}
}

static void q_error(struct ptd *d, struct ptq *q, int err, uint64_t ip)
{
	uint64_t off = 0;
	pt_blk_get_offset(q->dec, &off);
	ptd_q_error_at(d, q, err, ip, off);
}

static void q_spin_error(struct ptd *d, struct ptq *q, uint64_t ip)
{
	char msg[128];
	if (q->rs_active) {
		q_resync_drop(d, q);
		return;
	}
	snprintf(msg, sizeof msg, "never-ending loop: %" PRIu64 " instructions without trace packets",
		 q->spin_insns);
	q_retract(d, q); /* what it decoded since the last PSB is not trusted */
	set_gap(d, q, MTEV_GAP_DECODE_ERROR, 0, q->spin_off + q->segs[q->curseg].begin, ip, msg);
	q->spin_insns = 0;
	q->pend.valid = 0;
	q->state = Q_SYNC;
}

/* The queue's thread stopped tracing or the window ended: write what ends
 * it (semantics: trace-end from the last traced address, or 0). */
static void fin_push(struct ptd *d, const struct mtev_rec *r)
{
	if (mt_grow((void **)&d->fin, &d->fincap, d->nfin + 1, sizeof *d->fin) < 0) {
		ptd_fail(d, PTD_ESYS, "out of memory");
		return;
	}
	d->fin[d->nfin++] = *r;
}

void thr_finish(struct ptd *d, struct ptq *q, struct thr *t)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	if (t->gap_pending) {
		/* nothing good came after it: it lasts to where the
		 * thread's trace ends */
		uint64_t end = t->lastq >= 0 ? d->q[t->lastq].time : 0;
		r = t->gap;
		if (end > r.gap.end)
			r.gap.end = end;
		/* a later gap of the thread begins where this one ends */
		t->last_time = r.gap.end;
		t->gap_pending = 0;
		d->st->gaps++;
		t->state = TS_NONE;
		goto push;
	}
	if (!t->has_rec || t->ended) { /* nothing traced since its last end */
		t->state = TS_NONE;
		return;
	}
	r.kind = MTEV_BRANCH;
	r.br.tid = t->tid;
	r.br.time = t->last_time;
	r.br.type = MTEV_BR_TRACE_END;
	switch (t->state) {
	case TS_ON:
		r.br.from = t->last_ip;
		break;
	case TS_ASYNC: /* FUP + TIP.PGD and nothing after: the end */
		r.br.from = t->last_ip;
		if (t->async_time > r.br.time)
			r.br.time = t->async_time;
		break;
	case TS_SYSCALL:
		r.br.from = 0;
		break;
	default:
		return;
	}
	t->state = TS_NONE;
	t->ended = 1;
	d->st->branches++;
push:
	if (q) {
		struct mtev_rec *p = q_push(d, q);
		if (p)
			*p = r;
	} else {
		fin_push(d, &r);
	}
}

/* An interrupt (FUP + TIP or TIP.PGD) before the first block since tracing
 * (re)started, e.g. right after a PSB+: the trace starts where it was
 * interrupted, before the interrupt (mtev-semantics: a thread's records
 * begin with a trace-start). */
static void q_start_at(struct ptd *d, struct ptq *q, uint64_t ip)
{
	if (!q->need_start || q->th < 0 || q->untimed || !ip)
		return;
	q->need_start = 0;
	emit_br(d, q, MTEV_BR_TRACE_START, 0, ip, q->start_time);
}

/* Leaving user code asynchronously at @from: an interrupt, or where @from is
 * not known (0: a corrupt FUP, an async disable after a gap) a trace-end,
 * since an interrupt names where it left (mtev-semantics); what follows is
 * then a trace-start, not an iret. */
static void emit_leave(struct ptd *d, struct ptq *q, uint64_t from, uint64_t t)
{
	const struct thr *th = q->th >= 0 ? &d->thr[q->th] : NULL;

	/* an exit from an unknown place is a trace-end, which says something
	 * only where traced code ran since the last one, or after a gap
	 * (mtev-semantics: a thread's trace begins with a trace-start) */
	if (!from && th && !th->gap_pending && (!th->has_rec || th->ended))
		return;
	emit_br(d, q, from ? MTEV_BR_INTERRUPT : MTEV_BR_TRACE_END, from, 0, t);
}

static void handle_event(struct ptd *d, struct ptq *q, const struct pt_event *ev)
{
	uint64_t t = q_now(d, q);
	struct thr *th;

	if (q->untimed && !q->lost_timing && ev->type != ptev_overflow)
		q->untimed = 0;
	switch (ev->type) {
	case ptev_enabled:
		q_set_thread(d, q, t);
		q->need_start = 0;
		q->pend.valid = 0;
		if (q->th < 0)
			break;
		th = &d->thr[q->th];
		if (!ev->variant.enabled.ip) {
			/* no resume address (a corrupt TIP.PGE): the next block
			 * says where tracing goes on, with a trace-start */
			if (th->state == TS_ASYNC)
				emit_leave(d, q, th->last_ip, th->async_time);
			q->need_start = 1;
			q->start_time = t;
			th->state = TS_ON;
			break;
		}
		if (th->state == TS_SYSCALL)
			emit_br(d, q, MTEV_BR_SYSRET, 0, ev->variant.enabled.ip, t);
		else if (th->state == TS_ASYNC && th->last_ip) {
			emit_br(d, q, MTEV_BR_INTERRUPT, th->last_ip, 0, th->async_time);
			emit_br(d, q, MTEV_BR_IRET, 0, ev->variant.enabled.ip, t);
		} else if (th->state == TS_ASYNC) {
			emit_leave(d, q, 0, th->async_time);
			emit_br(d, q, MTEV_BR_TRACE_START, 0, ev->variant.enabled.ip, t);
		} else
			emit_br(d, q, MTEV_BR_TRACE_START, 0, ev->variant.enabled.ip, t);
		th->state = TS_ON;
		th->last_ip = ev->variant.enabled.ip;
		break;
	case ptev_disabled:
		if (q->th < 0)
			break;
		th = &d->thr[q->th];
		if (q->untimed) {
			q->pend.valid = 0;
			break;
		}
		if (q->pend.valid && q->pend.cls == X86BR_SYSCALL) {
			q->pend.valid = 0;
			emit_br(d, q, MTEV_BR_SYSCALL, q->pend.from, 0, t);
			th->state = TS_SYSCALL;
			/* the thread comes back with the next TIP.PGE (a
			 * sysret, which clears this); libipt can also go on
			 * with blocks and no enable (a PSB+ after an
			 * ip-suppressed TIP.PGD, in a corrupt trace): where
			 * tracing resumed is not a sysret's resume address
			 * then, and after a syscall only its sysret, a
			 * trace-end or a trace-start may come (mtev-semantics) */
			q->need_start = 1;
			q->start_time = t;
		} else {
			int known = q->pend.valid;
			uint64_t from = known ? q->pend.from : th->last_ip;
			if (q->pend.valid && !ev->ip_suppressed)
				resolve(d, q, ev->variant.disabled.ip);
			q->pend.valid = 0;
			if (th->gap_pending) {
				/* nothing good since the gap: the disable is the
				 * first good thing after it, so the gap ends here
				 * and tracing stops here, with a trace-end as
				 * without the gap (mtev-semantics); its from is
				 * the pending branch, else 0 (last_ip is from
				 * before the gap) */
				emit_br(d, q, MTEV_BR_TRACE_END, known ? from : 0, 0, t);
			} else {
				th->last_ip = from;
				th->state = TS_ON;
				thr_finish(d, q, th);
			}
			th->state = TS_NONE;
			/* the next TIP.PGE writes where tracing resumes; libipt
			 * can also go on with blocks and no enable (a corrupt
			 * trace): a trace-start comes first then, as after a
			 * syscall */
			q->need_start = 1;
			q->start_time = t;
		}
		break;
	case ptev_async_disabled:
		if (q->th < 0)
			break;
		th = &d->thr[q->th];
		resolve(d, q, ev->variant.async_disabled.at);
		q_start_at(d, q, ev->variant.async_disabled.at);
		th->state = TS_ASYNC;
		th->last_ip = ev->variant.async_disabled.at;
		th->async_time = t;
		break;
	case ptev_async_branch:
		resolve(d, q, ev->variant.async_branch.from);
		q_start_at(d, q, ev->variant.async_branch.from);
		/* left and resumed at once: an interrupt's to and an iret's
		 * from are 0 */
		emit_leave(d, q, ev->variant.async_branch.from, t);
		if (ev->variant.async_branch.from && !ev->ip_suppressed && ev->variant.async_branch.to) {
			emit_br(d, q, MTEV_BR_IRET, 0, ev->variant.async_branch.to, t);
		} else {
			/* no resume address (a suppressed or corrupt TIP): an
			 * iret needs one (mtev-semantics); the next block says
			 * where tracing goes on, with a trace-start */
			q->need_start = 1;
			q->start_time = t;
		}
		break;
	case ptev_overflow: {
		uint64_t off = 0;
		q_commit(q); /* the hardware lost what came after, not before */
		q->pend.valid = 0;
		pt_blk_get_offset(q->dec, &off);
		off = q_off(q, off) + q->segs[q->curseg].begin;
		set_gap(d, q, MTEV_GAP_OVERFLOW, 0, off, 0, "overflow");
		if (!ev->ip_suppressed) {
			q->need_start = 1;
			q->start_time = t;
		}
		/* libipt drops its cycle calibration at an overflow: CYC
		 * packets count for nothing until the next PSB+ (CBR) or TSC.
		 * The branches of that stretch are known but not when they
		 * ran, so the gap lasts until timing is exact again. */
		q->untimed = 1;
		break;
	}
	default:
		break;
	}
	if (q->untimed && q->th >= 0)
		d->thr[q->th].state = TS_GAP; /* what happened is in the gap */
}

/* The rest of a block once its pending branch is resolved and the queue's
 * time is @t: thread, trace-start, the block's own branch. */
static inline __attribute__((always_inline)) void handle_block_tail(struct ptd *d, struct ptq *q,
								    const struct pt_block *b, int ok,
								    uint64_t t)
{
	uint8_t size;
	enum x86br cls;
	struct thr *th;

	q->decided = 0;
	if (q_cpu_needs_switch(d, q, t))
		q_set_thread(d, q, t);
	if (q->th < 0)
		return;
	th = &d->thr[q->th];
	if (q->untimed && !q->lost_timing) {
		q->untimed = 0;
		q->need_start = 1;
		q->start_time = t;
	}
	if (q->need_start) {
		q->need_start = 0;
		emit_br(d, q, MTEV_BR_TRACE_START, 0, b->ip, q->start_time);
	}
	th->state = q->untimed ? TS_GAP : TS_ON;
	th->last_ip = b->end_ip;
	if (!ok)
		return;
	cls = classify_at(d, b, &size);
	if (cls == X86BR_NONE)
		return;
	q->decided = 1;
	q->ndec++;
	q->pend.valid = 1;
	q->pend.cls = (uint8_t)cls;
	q->pend.size = size;
	q->pend.isid = b->isid;
	q->pend.mode = (uint8_t)b->mode;
	q->pend.from = b->end_ip;
	q->pend.time = t;
}

static inline __attribute__((always_inline)) void handle_block(struct ptd *d, struct ptq *q,
							       const struct pt_block *b, int ok)
{
	uint64_t t;

	q->decided = 0;
	if (q->pend.valid)
		resolve(d, q, b->ip);
	if (!b->ninsn)
		return;
	q->nblocks++;
	q->ninsns += b->ninsn;
	t = q_now(d, q);
	handle_block_tail(d, q, b, ok, t);
}

/* Whether q_fast may run the queue: its thread is known and announced, no
 * gap waits to be closed, timing is exact and no trace-start is owed. */
static inline int q_fast_ok(const struct ptd *d, const struct ptq *q)
{
	const struct thr *t;
	if (q->th < 0 || q->untimed || q->need_start)
		return 0;
	t = &d->thr[q->th];
	return t->announced && !t->gap_pending;
}

enum { QF_EXIT, QF_CHECKS };

enum { QF_GENERAL = -2, QF_NOT_TAKEN = -1 };

/* q_fast's resolve() for the common pending branches (most are jcc, then
 * calls and returns): the MTEV type of the branch that went to @next,
 * QF_NOT_TAKEN for a jcc that fell through (p->valid cleared), QF_GENERAL
 * for the classes resolve() handles. */
static inline __attribute__((always_inline)) int fast_br_type(struct ptd *d, struct pend *p,
							      uint64_t next)
{
	if (p->cls == X86BR_JCC) {
		if (!p->size) {
			uint64_t delta = next - p->from;
			if (delta >= 2 && delta <= 15)
				classify_ip(d, p->from, p->isid, p->mode, &p->size);
		}
		if (p->size && next == p->from + p->size) {
			p->valid = 0;
			return QF_NOT_TAKEN;
		}
		return MTEV_BR_JCC;
	}
	if (p->cls == X86BR_CALL)
		return MTEV_BR_CALL;
	if (p->cls == X86BR_RET)
		return MTEV_BR_RETURN;
	if (p->cls == X86BR_JMP || p->cls == X86BR_FARJMP)
		return MTEV_BR_JUMP;
	return QF_GENERAL;
}

/* q_fast keeps its bookkeeping in locals (of these names); these write it
 * back: the thread's part, and all of it. */
#define QF_FLUSH_THREAD()                                                                          \
	do {                                                                                       \
		if (nbr) {                                                                         \
			th->last_time = br_time;                                                   \
			th->has_rec = 1;                                                           \
			th->ended = 0;                                                             \
			th->lastq = (int)(q - d->q);                                               \
			d->st->branches += nbr;                                                    \
			nbr = 0;                                                                   \
		}                                                                                  \
		if (touched) {                                                                     \
			th->state = TS_ON;                                                         \
			th->last_ip = last_ip;                                                     \
			touched = 0;                                                               \
		}                                                                                  \
	} while (0)
#define QF_FLUSH()                                                                                 \
	do {                                                                                       \
		QF_FLUSH_THREAD();                                                                 \
		q->time = now;                                                                     \
		q->last_tsc = last_tsc;                                                            \
		q->lost_timing = lost;                                                             \
		q->nblocks = nblocks;                                                              \
		q->ndec = ndec;                                                                    \
		q->ninsns = ninsns;                                                                \
		q->spin_off = spin_off;                                                            \
		q->spin_insns = spin_insns;                                                        \
		q->spin_mark = spin_mark;                                                          \
	} while (0)


/* The hot loop in the steady state (q_fast_ok): the same as pt_blk_next +
 * handle_block + the checks of q_step's loop, with the per-block and
 * per-branch bookkeeping (time, counters, the thread's last ip and last
 * record) kept in locals and written back before anything else can look at
 * them.  Returns QF_EXIT when q_step's loop must end (*stp: the last status,
 * negative for pt_blk_next's error, *b the block), QF_CHECKS when a block
 * needed the general path: it has been handled (a cpu switch), q_step does
 * its checks. */
static int q_fast(struct ptd *d, struct ptq *q, uint64_t limit, struct pt_block *b, int *stp)
{
	struct pt_block_decoder *dec = q->dec;
	struct thr *th = &d->thr[q->th];
	struct pend *p = &q->pend;
	const uint32_t tid = th->tid;
	uint64_t now = q->time, last_tsc = q->last_tsc;
	uint64_t nblocks = q->nblocks, ninsns = q->ninsns, ndec = q->ndec;
	uint64_t spin_off = q->spin_off, spin_insns = q->spin_insns, spin_mark = q->spin_mark;
	uint32_t lost = q->lost_timing;
	uint64_t last_ip = 0, br_time = 0, nbr = 0, stop, sw_next = UINT64_MAX;
	int touched = 0, full = 0, st, ret = QF_EXIT;

	/* leave at the time limit or when sideband is due */
	stop = d->sb_apply < d->nsb ? d->sb[d->sb_apply].time : UINT64_MAX;
	if (limit < stop)
		stop = limit + 1; /* limit < UINT64_MAX here */
	if (d->per_cpu && q->cpu >= 0 && (size_t)q->cpu < d->ncpus) {
		const struct cpuline *cl = &d->cpus[q->cpu];
		if (q->swi + 1 < cl->n)
			sw_next = cl->v[q->swi + 1].time;
	}

	for (;;) {
		uint64_t off, tsc;
		uint32_t lm, lc;
		uint8_t size;
		enum x86br cls;
		int decided = 0;

		if (par_due(q)) {
			/* -j N: records decoded on a worker, from here */
			int y;
			QF_FLUSH();
			y = par_body(d, q, stop);
			now = q->time;
			last_tsc = q->last_tsc;
			lost = q->lost_timing;
			nblocks = q->nblocks;
			ninsns = q->ninsns;
			ndec = q->ndec;
			spin_off = q->spin_off;
			spin_insns = q->spin_insns;
			spin_mark = q->spin_mark;
			st = q->status;
			if (y || d->err || q->nready >= PTD_BATCH)
				goto out;
		}
		st = pt_blk_next(dec, b, sizeof *b);
		if (st < 0)
			break;
		q->status = st;
		if (p->valid) {
			/* resolve(): the instruction after the pending branch
			 * is at b->ip */
			int type = fast_br_type(d, p, b->ip);
			if (type == QF_GENERAL) {
				/* far transfers: the general path (which
				 * writes the thread's last record itself) */
				QF_FLUSH_THREAD();
				resolve(d, q, b->ip);
				full |= d->err != 0;
			} else if (type != QF_NOT_TAKEN) {
				struct mtev_rec *r = q_push(d, q);
				p->valid = 0;
				if (r) {
					r->kind = MTEV_BRANCH;
					r->br.tid = tid;
					r->br.time = p->time;
					r->br.type = (unsigned)type;
					r->br.from = p->from;
					r->br.to = b->ip;
					br_time = p->time;
					nbr++;
				} else {
					full = 1; /* out of memory: d->err is set */
				}
			}
		}
		if (b->ninsn) {
			nblocks++;
			ninsns += b->ninsn;
			if (pt_blk_time(dec, &tsc, &lm, &lc) >= 0) {
				/* q_now() */
				if (tsc != last_tsc) {
					uint64_t t = ptd_conv(d, tsc);
					last_tsc = tsc;
					if (t > now)
						now = t;
				}
				lost = lm + lc;
			}
			if (now >= sw_next) {
				/* the cpu switches threads: the general path */
				QF_FLUSH();
				handle_block_tail(d, q, b, 1, now);
				ret = QF_CHECKS;
				goto out;
			}
			last_ip = b->end_ip;
			touched = 1;
			cls = classify_at(d, b, &size);
			if (cls != X86BR_NONE) {
				decided = 1;
				ndec++;
				p->valid = 1;
				p->cls = (uint8_t)cls;
				p->size = size;
				p->isid = b->isid;
				p->mode = (uint8_t)b->mode;
				p->from = b->end_ip;
				p->time = now;
			}
		}
		/* q_step's checks: every 16 branch blocks a PSB passed
		 * and spinning; a full batch, the time limit, sideband due */
		if (decided && !(ndec & 15)) {
			off = 0;
			if (pt_blk_get_offset(dec, &off) >= 0)
				off = q_off(q, off);
			if (!q->rs_active && q_psb_passed(q, off))
				full |= q->nready >= PTD_BATCH;
			if (q_spin_check(off, ninsns, &spin_off, &spin_mark, &spin_insns)) {
				QF_FLUSH();
				q_spin_error(d, q, b->end_ip);
				goto out;
			}
		}
		if ((st & pts_event_pending) || full || now >= stop)
			break;
	}
	QF_FLUSH();
out:
	*stp = st;
	return ret;
#undef QF_FLUSH
#undef QF_FLUSH_THREAD
}

static int q_open_seg(struct ptd *d, struct ptq *q);

/* The end of the segment's data (sync found no PSB): commit, then a gap
 * where data was lost before the next segment (tracing resumes at its
 * first PSB), or the end of a snapshot window: the threads last seen in
 * @q finish. */
static void seg_end(struct ptd *d, struct ptq *q)
{
	q_commit(q);
	if (q->curseg + 1 < q->nsegs && q->segs[q->curseg + 1].lost_before) {
		const struct seg *n = &q->segs[q->curseg + 1];
		char m[128];
		snprintf(m, sizeof m, "trace data lost (AUX offset %" PRIu64 ")", n->lost_at);
		if (q->th >= 0)
			set_gap(d, q, MTEV_GAP_LOST, 0, n->begin, d->thr[q->th].last_ip, m);
		q->pend.valid = 0;
	} else if (q->curseg + 1 < q->nsegs) {
		size_t k;
		for (k = 0; k < d->nthr; k++)
			if (d->thr[k].lastq == (int)(q - d->q))
				thr_finish(d, q, &d->thr[k]);
	}
}

/* Q_SYNC: to the next PSB of the segment; at its end, to the next segment
 * (a gap where data was lost, trace-ends at a snapshot's end). */
static void q_sync(struct ptd *d, struct ptq *q)
{
	int st, cont = 0;

	if (q->rsbuf) {
		/* a resync's copy is done: the segment's decoder goes on at
		 * the PSB the copy led to; when the copy ran to its end (libipt
		 * stopped exactly at the PSB's address) the trace goes on
		 * there without a new start */
		uint64_t psb = q->rs_psb;
		if (q->rs_end && q->rs_fup && q->th >= 0) {
			struct thr *t = &d->thr[q->th];
			cont = 1;
			t->state = TS_ON;
			t->last_ip = q->rs_fup;
		}
		q_resync_free(q);
		if (q->img)
			pt_blk_set_image(q->dec, q->img);
		st = pt_blk_sync_set(q->dec, psb);
	} else {
		st = pt_blk_sync_forward(q->dec);
	}
	if (st < 0 && st != -pte_eos) {
		/* a broken PSB+: report it and look further on; the
		 * offset check guarantees progress */
		uint64_t off = 0;
		pt_blk_get_offset(q->dec, &off);
		off = q_off(q, off);
		if (q_sync_error_new(q, off)) {
			q_error(d, q, st, 0);
			return;
		}
	}
	if (st < 0) {
		/* end of segment */
		seg_end(d, q);
		pt_blk_free_decoder(q->dec);
		q->dec = NULL;
		q->img = NULL;
		q_resync_free(q);
		q->curseg++;
		q->state = Q_SEG;
		return;
	}
	q->status = st;
	q->pend.valid = 0;
	q->need_start = !cont;
	q->start_time = q_now(d, q);
	{
		/* libipt may already have looked at code while
		 * syncing: with this time's images and thread in
		 * place, sync again at the same PSB */
		size_t before = d->sb_apply;
		struct pt_image *img = q->img;
		uint64_t soff;
		sb_apply_until(d, q->time);
		q_set_thread(d, q, q->start_time);
		if ((before != d->sb_apply || img != q->img) &&
		    pt_blk_get_sync_offset(q->dec, &soff) >= 0) {
			st = pt_blk_sync_set(q->dec, soff);
			if (st < 0)
				return; /* next round: sync_forward */
			q->status = st;
		}
	}
	q->state = Q_RUN;
	ptd_par_start(d, q); /* -j N: the rest of the segment on other threads */
}

/* Blocks until an event, an error, a full batch, the time limit or
 * sideband to apply: the fast loop where it may run, else block by block.
 * Returns the last status; *blk: the last block. */
static int q_blocks(struct ptd *d, struct ptq *q, uint64_t limit, struct pt_block *blk)
{
	int st;

	for (;;) {
		if (q_fast_ok(d, q)) {
			if (q_fast(d, q, limit, blk, &st) == QF_EXIT)
				return st;
			goto checks;
		}
		st = pt_blk_next(q->dec, blk, sizeof *blk);
		if (st < 0)
			return st;
		q->status = st;
		handle_block(d, q, blk, 1);
	checks:
		if (q->decided && !(q->ndec & 15)) {
			/* checked every 16 blocks ending at a branch (ndec):
			 * a commit a few blocks late is as good */
			uint64_t off = 0;
			int have = pt_blk_get_offset(q->dec, &off) >= 0;
			if (q_check16(q, have, q_off(q, off))) {
				q_spin_error(d, q, blk->end_ip);
				return st;
			}
		}
		if (q_step_yield(d, q, st, limit))
			return st;
	}
}

/* Q_RUN: an event, or blocks; the end of the data or an error. */
static void q_run(struct ptd *d, struct ptq *q, uint64_t limit)
{
	struct pt_block blk;
	struct pt_event ev;
	int st;

	if (q->status & pts_event_pending) {
		st = pt_blk_event(q->dec, &ev, sizeof ev);
		if (st < 0) {
			q_error(d, q, st, q->pend.valid ? q->pend.from : 0);
			return;
		}
		q->status = st;
		handle_event(d, q, &ev);
		return;
	}
	st = q_blocks(d, q, limit, &blk);
	if (st >= 0)
		return;
	handle_block(d, q, &blk, 0);
	if (st == -pte_eos) {
		q_commit(q);
		q->state = Q_SYNC; /* sync_forward will say eos */
		if (q->rsbuf) {
			q->rs_end = 1; /* a resync's copy ends at its PSB */
			return;
		}
		if (q->th >= 0 && q->pend.valid)
			q->pend.valid = 0; /* tracing ran to the end of the data */
		return;
	}
	q_error(d, q, st, blk.ninsn ? blk.end_ip : blk.ip);
}

/* Q_SEG: the current segment's decoder; a segment after lost data
 * resyncs at once where --resync asks. */
static int q_open(struct ptd *d, struct ptq *q)
{
	if (q_open_seg(d, q) < 0)
		return -1;
	q->state = Q_SYNC;
	if (q->segs[q->curseg].lost_before && q_resync(d, q, 0))
		q_resynced(d, q);
	return 0;
}

/* The libipt stepper (struct ptd_stepper). */
static void q_step(struct ptd *d, struct ptq *q, uint64_t limit)
{
	static const struct q_states states = {q_open, q_sync, q_run};
	q_states_run(d, q, limit, &states);
}

/* The first PSB (@psb, 16 bytes) in [p, e): what memmem finds, faster (a
 * PSB is 02 82 repeated: every one has an 0x82 second byte, and memchr
 * skips to those). */
static const uint8_t *find_psb(const uint8_t *p, const uint8_t *e, const uint8_t *psb)
{
	while (e - p >= 16) {
		const uint8_t *x = memchr(p + 1, 0x82, (size_t)(e - p - 1));
		if (!x || e - (x - 1) < 16)
			return NULL;
		if (!memcmp(x - 1, psb, 16))
			return x - 1;
		p = x;
	}
	return NULL;
}

/* The decoder configuration of @q's current segment (any libipt decoder). */
/* The recording's cpu (--cpu, else perf's cpuid) and its errata into @cfg. */
void ptd_cpu_config(const struct ptd *d, struct pt_config *cfg)
{
	if (d->opts->cpu_family) {
		cfg->cpu.vendor = pcv_intel;
		cfg->cpu.family = (uint16_t)d->opts->cpu_family;
		cfg->cpu.model = (uint8_t)d->opts->cpu_model;
		cfg->cpu.stepping = (uint8_t)d->opts->cpu_stepping;
	} else if (!strncmp(d->cpuid, "GenuineIntel,", 13)) {
		unsigned fam = 0, mod = 0, step = 0;
		if (sscanf(d->cpuid + 13, "%u,%u,%u", &fam, &mod, &step) >= 2) {
			cfg->cpu.vendor = pcv_intel;
			cfg->cpu.family = (uint16_t)fam;
			cfg->cpu.model = (uint8_t)mod;
			cfg->cpu.stepping = (uint8_t)step;
		}
	}
	if (cfg->cpu.vendor == pcv_intel && pt_cpu_errata(&cfg->errata, &cfg->cpu) < 0)
		memset(&cfg->errata, 0, sizeof cfg->errata);
}

void ptd_seg_config(struct ptd *d, struct ptq *q, struct pt_config *cfg)
{
	const struct seg *s = &q->segs[q->curseg];

	pt_config_init(cfg);
	cfg->begin = q->stream + s->begin;
	cfg->end = q->stream + s->end;
	ptd_cpu_config(d, cfg);
	if (d->have_info && d->npriv > 15) {
		uint64_t mtc_bits = d->priv[11];
		uint64_t config = d->pt_attr ? d->pt_attr->config : 0;
		if (mtc_bits) {
			unsigned shift = (unsigned)__builtin_ctzll(mtc_bits);
			cfg->mtc_freq = (uint8_t)((config & mtc_bits) >> shift);
		}
		cfg->cpuid_0x15_ebx = (uint32_t)d->priv[12];
		cfg->cpuid_0x15_eax = (uint32_t)d->priv[13];
		cfg->nom_freq = (uint8_t)d->priv[15];
	} else if (!d->have_info) { /* raw mode: --pt-timing */
		cfg->mtc_freq = (uint8_t)d->opts->raw_mtc_freq;
		cfg->cpuid_0x15_ebx = d->opts->raw_ctc_num;
		cfg->cpuid_0x15_eax = d->opts->raw_ctc_den;
		cfg->nom_freq = (uint8_t)d->opts->raw_nom_freq;
	}
	cfg->flags.variant.block.end_on_call = 1;
	cfg->flags.variant.block.end_on_jump = 1;
}

/* Where the PSBs of @q's current segment [@b, @e) are (q->psbs). */
int ptd_seg_psbs(struct ptd *d, struct ptq *q, const uint8_t *b, const uint8_t *e)
{
	{
		/* where the PSBs are: passing one confirms what came before */
		static const uint8_t psb[16] = {2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82,
						2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82};
		const uint8_t *p = b;
		size_t cap = 0;
		free(q->psbs);
		q->psbs = NULL;
		q->npsbs = q->psbi = 0;
		while (e - p >= 16 && (p = find_psb(p, e, psb)) != NULL) {
			if (mt_grow((void **)&q->psbs, &cap, q->npsbs + 1, sizeof *q->psbs) < 0)
				return ptd_fail(d, PTD_ESYS, "out of memory");
			q->psbs[q->npsbs++] = (uint64_t)(p - b);
			p += 16;
		}
		if (!q->psbs) {
			/* no PSB at all: nothing will decode; keep the
			 * retraction machinery on anyway */
			q->psbs = malloc(sizeof *q->psbs);
			if (!q->psbs)
				return ptd_fail(d, PTD_ESYS, "out of memory");
		}
	}
	return 0;
}

static int q_open_seg(struct ptd *d, struct ptq *q)
{
	struct pt_config cfg;

	q_resync_free(q);
	ptd_seg_config(d, q, &cfg);
	q->dec = pt_blk_alloc_decoder(&cfg);
	if (!q->dec)
		return ptd_fail(d, PTD_ESYS, "cannot allocate a PT decoder");
	if (ptd_seg_psbs(d, q, cfg.begin, cfg.end) < 0)
		return -1;
	q->img = NULL;
	q->swi = 0;
	return 0;
}

const struct ptd_stepper ptd_step_libipt = {"libipt", q_step};

/* The record logic for another source of blocks and events (the cached
 * walk, ptd_walk.c): with q->dec NULL, q->time, q->last_tsc and
 * q->lost_timing are the caller's (q_now reads them as they are). */
void ptd_handle_block(struct ptd *d, struct ptq *q, const struct pt_block *b, int ok)
{
	handle_block(d, q, b, ok);
}

void ptd_block_tail(struct ptd *d, struct ptq *q, const struct pt_block *b, uint64_t t)
{
	handle_block_tail(d, q, b, 1, t);
}

void ptd_handle_event(struct ptd *d, struct ptq *q, const struct pt_event *ev)
{
	handle_event(d, q, ev);
}

void ptd_set_thread(struct ptd *d, struct ptq *q, uint64_t time)
{
	q_set_thread(d, q, time);
}

void ptd_spin_error(struct ptd *d, struct ptq *q, uint64_t ip)
{
	q_spin_error(d, q, ip);
}

void ptd_seg_end(struct ptd *d, struct ptq *q)
{
	seg_end(d, q);
}

void ptd_set_gap(struct ptd *d, struct ptq *q, unsigned reason, int code, uint64_t offset,
		 uint64_t ip, const char *msg)
{
	set_gap(d, q, reason, code, offset, ip, msg);
}

/* For ptd_par.c: whether block @b ends at a branch (what sets a pending
 * branch), the stepper's own rule. */
int ptd_block_branches(struct ptd *d, const struct pt_block *b)
{
	uint8_t size;
	return classify_at(d, b, &size) != X86BR_NONE;
}
