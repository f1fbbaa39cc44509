/* ptd_queue: a queue's record ring between the stepper and the merge.
 * Records decoded since the last PSB wait in it unconfirmed: a PSB
 * confirms them (q_commit), an error that shows the trace was corrupt
 * drops them (q_retract). */
#include "ptd_int.h"

#include <stdlib.h>

struct mtev_rec *q_grow_push(struct ptd *d, struct ptq *q)
{
	struct mtev_rec *r;
	if (q->fcount == q->fcap) {
		size_t ncap = q->fcap ? 2 * q->fcap : 256, k;
		struct mtev_rec *nf = malloc(ncap * sizeof *nf);
		if (!nf) {
			ptd_fail(d, PTD_ESYS, "out of memory");
			return NULL;
		}
		for (k = 0; k < q->fcount; k++)
			nf[k] = q->fifo[(q->fhead + k) & (q->fcap - 1)];
		free(q->fifo);
		q->fifo = nf;
		q->fhead = 0;
		q->fcap = ncap;
	}
	r = &q->fifo[(q->fhead + q->fcount++) & (q->fcap - 1)];
	return r;
}

/* The trace since the last PSB is corrupt: forget what it gave. */
void q_retract(struct ptd *d, struct ptq *q)
{
	size_t k;
	for (k = q->nready; k < q->fcount; k++) {
		const struct mtev_rec *r = &q->fifo[(q->fhead + k) & (q->fcap - 1)];
		int th = -1;
		if (r->kind == MTEV_BRANCH)
			th = thr_get(d, r->br.tid, UINT32_MAX), d->st->branches--;
		else if (r->kind == MTEV_GAP)
			th = thr_get(d, r->gap.tid, UINT32_MAX), d->st->gaps--;
		if (th >= 0 && d->thr[th].last_time > q->ready_time)
			d->thr[th].last_time = q->ready_time;
	}
	d->st->retracted += q->fcount - q->nready;
	q->fcount = q->nready;
}
