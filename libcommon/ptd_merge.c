/* ptd_merge: runs the stepper on the queue furthest behind and writes what
 * every queue has passed, queue records and sideband records by time.
 * write_rec is the only place records leave the decoder. */
#include "ptd_int.h"

#include <string.h>

/* One record to the output: the writer, or the sink that takes its place. */
static inline int out_rec(struct ptd *d, const struct mtev_rec *r)
{
	const struct ptd_sink *k = d->opts->sink;
	return k ? k->rec(k->ctx, r) : mtev_write(d->w, r);
}

int write_rec(struct ptd *d, const struct mtev_rec *r)
{
	int e;
	if (d->per_cpu && (r->kind == MTEV_BRANCH || r->kind == MTEV_GAP)) {
		/* threads move between cpus: keep each one's records sorted
		 * even where the queues' clocks disagree */
		uint32_t tid = r->kind == MTEV_BRANCH ? r->br.tid : r->gap.tid;
		int th = thr_get(d, tid, UINT32_MAX);
		if (th >= 0) {
			struct thr *t = &d->thr[th];
			uint64_t tm = r->kind == MTEV_BRANCH ? r->br.time : r->gap.begin;
			if (tm < t->out_time) {
				struct mtev_rec c = *r;
				if (c.kind == MTEV_BRANCH)
					c.br.time = t->out_time;
				else {
					c.gap.begin = t->out_time;
					if (c.gap.end < c.gap.begin)
						c.gap.end = c.gap.begin;
				}
				e = out_rec(d, &c);
				goto done;
			}
			t->out_time = r->kind == MTEV_BRANCH ? tm : r->gap.end;
		}
	}
	e = out_rec(d, r);
done:
	if (e < 0)
		return ptd_fail(d, PTD_EOUTPUT, "writing MTEV: %s", mtev_strerror(e));
	return 0;
}

/* Writes records (queue heads and sideband) with time <= @safe, earliest
 * first. */
static int emit_upto(struct ptd *d, uint64_t safe)
{
	for (;;) {
		int best = -1; /* -1: sideband */
		uint64_t bt = UINT64_MAX;
		int have = 0;
		size_t i;

		if (d->sb_emit < d->nsb && d->sb[d->sb_emit].time <= safe) {
			bt = d->sb[d->sb_emit].time;
			have = 1;
		}
		for (i = 0; i < d->nq; i++) {
			struct ptq *q = &d->q[i];
			uint64_t t;
			if (!q->nready)
				continue;
			t = rec_time(&q->fifo[q->fhead]);
			if (t <= safe && (!have || t < bt)) {
				bt = t;
				best = (int)i;
				have = 1;
			}
		}
		if (!have)
			return 0;
		if (best < 0) {
			size_t k;
			int n = sb_to_rec(d, &d->sb[d->sb_emit]);
			d->sb_emit++;
			for (k = 0; n > 0 && k < (size_t)n; k++)
				if (write_rec(d, &d->sbout[k]) < 0)
					return d->err;
			if (n < 0)
				return d->err;
			continue;
		}
		{
			/* drain this queue while it stays the earliest */
			struct ptq *q = &d->q[best];
			uint64_t limit = safe;
			if (d->sb_emit < d->nsb && d->sb[d->sb_emit].time < limit)
				limit = d->sb[d->sb_emit].time;
			for (i = 0; i < d->nq; i++)
				if ((int)i != best && d->q[i].nready) {
					uint64_t t = rec_time(&d->q[i].fifo[d->q[i].fhead]);
					if (t < limit)
						limit = t;
				}
			if (d->per_cpu) {
				do {
					if (write_rec(d, &q->fifo[q->fhead]) < 0)
						return d->err;
					q->fhead = (q->fhead + 1) & (q->fcap - 1);
					q->fcount--;
					q->nready--;
				} while (q->nready && rec_time(&q->fifo[q->fhead]) <= limit);
			} else {
				/* the common case: the run that stays the earliest,
				 * its branches written as they are checked, a piece of
				 * the ring at a time; the first record goes out in any
				 * case (it is the earliest) */
				const struct mtev_rec *fifo = q->fifo;
				const size_t n = q->nready, mask = q->fcap - 1, h = q->fhead;
				size_t k = 0;
				int e = 0;
				while (k < n) {
					const size_t at = (h + k) & mask;
					const struct mtev_rec *r = &fifo[at];
					if (r->kind == MTEV_BRANCH) {
						const int head = !k;
						size_t piece = n - k < q->fcap - at ? n - k : q->fcap - at;
						const struct ptd_sink *sk = d->opts->sink;
						long m = sk ? sk->run(sk->ctx, r, head ? 1 : piece,
								      head ? UINT64_MAX : limit)
							    : mtev_write_upto(d->w, r, head ? 1 : piece,
									      head ? UINT64_MAX : limit);
						if (m < 0) {
							e = (int)m;
							break;
						}
						k += (size_t)m;
						if (head || (size_t)m == piece)
							continue;
						r = &fifo[(h + k) & mask];
						if (r->kind == MTEV_BRANCH)
							break; /* past the limit */
					}
					if (k && rec_time(r) > limit)
						break;
					e = out_rec(d, r);
					if (e < 0)
						break;
					k++;
				}
				q->fhead = (h + k) & mask;
				q->fcount -= k;
				q->nready -= k;
				if (e < 0)
					return ptd_fail(d, PTD_EOUTPUT, "writing MTEV: %s",
							mtev_strerror(e));
			}
		}
	}
}

/* Decodes all queues in time order: the queue furthest behind runs until it
 * passes the next one, so every thread's state changes in time order even
 * when it moves between cpus; what is older than every queue's position is
 * written. */
/* ptd_options.progress: how far the merge has written, in the time the
 * perf records span (raw PT has none: nothing is reported). */
static void progress(struct ptd *d, uint64_t t)
{
	uint64_t t0 = d->rec_t0, t9 = d->rec_t9;
	if (t9 <= t0 || t < t0)
		return;
	d->opts->progress(d->opts->progress_ctx, (t < t9 ? t : t9) - t0, t9 - t0);
}

int merge(struct ptd *d)
{
	size_t i;
	unsigned steps = 0;
	for (;;) {
		struct ptq *run = NULL;
		uint64_t t1 = UINT64_MAX, t2 = UINT64_MAX;
		for (i = 0; i < d->nq; i++) {
			struct ptq *q = &d->q[i];
			if (q->state == Q_DONE)
				continue;
			if (!run || q->time < t1) {
				t2 = t1;
				t1 = q->time;
				run = q;
			} else if (q->time < t2) {
				t2 = q->time;
			}
		}
		if (!run)
			break;
		d->step->step(d, run, t2);
		if (d->err)
			return d->err;
		/* everything older than the slowest live queue is final */
		t1 = UINT64_MAX;
		for (i = 0; i < d->nq; i++)
			if (d->q[i].state != Q_DONE && d->q[i].time < t1)
				t1 = d->q[i].time;
		if (t1 > 0 && emit_upto(d, t1 == UINT64_MAX ? t1 : t1 - 1) < 0)
			return d->err;
		if (d->opts->progress && !(++steps & 255))
			progress(d, t1);
		/* a full batch must go out even at equal times */
		if (run->nready >= PTD_BATCH) {
			size_t n = run->nready;
			if (emit_upto(d, run->time) < 0)
				return d->err;
			/* a batch whose head lies past the queue's own time (per
			 * cpu: a gap stamped with its thread's time on a queue
			 * that is ahead) would never go out, and the queue
			 * would never step again: its head goes out at its own
			 * time (write_rec keeps each thread's records sorted) */
			if (run->nready == n &&
			    emit_upto(d, rec_time(&run->fifo[run->fhead])) < 0)
				return d->err;
		}
	}
	for (i = 0; i < d->nq; i++)
		q_commit(&d->q[i]);
	if (emit_upto(d, UINT64_MAX) < 0)
		return d->err;
	if (d->nkmissing)
		ptd_warn(d, "%u kernel image%s (%s%s) not found; kernel code will be gaps", d->nkmissing,
			 d->nkmissing > 1 ? "s" : "", d->kmissing_first, d->nkmissing > 1 ? ", ..." : "");
	/* threads still open at the end of all data */
	for (i = 0; i < d->nthr; i++)
		thr_finish(d, NULL, &d->thr[i]);
	for (i = 0; i < d->nfin; i++)
		if (write_rec(d, &d->fin[i]) < 0)
			return d->err;
	return 0;
}

int write_head(struct ptd *d)
{
	struct mtev_rec r;
	memset(&r, 0, sizeof r);
	r.kind = MTEV_CLOCK;
	if (d->have_clock) {
		r.clock.time_zero = d->t_zero;
		r.clock.time_mult = d->t_mult;
		r.clock.time_shift = d->t_shift;
		if (d->t_mult)
			r.clock.tsc_hz = (uint64_t)((1000000000.0 * (double)(1ull << d->t_shift)) /
						    (double)d->t_mult + 0.5);
	} else {
		r.clock.time_mult = 1;
	}
	return write_rec(d, &r);
}
