/* ptd_par.h: included by a stepper after ptd_int.h, it routes the
 * stepper's libipt calls on a queue's decoder through ptd_par.c while the
 * queue is decoded in parallel (q->par set): the same calls, answered from
 * what a worker thread's decoder gave for the same stretch of trace.  Each
 * macro needs the queue as `q` in scope.  Without q->par they are libipt's
 * own functions (a macro does not expand inside itself). */
#ifndef MT_PTD_PAR_H
#define MT_PTD_PAR_H

#include "ptd_int.h"

#define pt_blk_next(dec, b, n) (q->par ? par_next(q, (b)) : pt_blk_next((dec), (b), (n)))
#define pt_blk_event(dec, ev, n) (q->par ? par_event(q, (ev)) : pt_blk_event((dec), (ev), (n)))
#define pt_blk_time(dec, tsc, lm, lc)                                                              \
	(q->par ? par_time(q, (tsc), (lm), (lc)) : pt_blk_time((dec), (tsc), (lm), (lc)))
#define pt_blk_get_offset(dec, off) (q->par ? par_offset(q, (off)) : pt_blk_get_offset((dec), (off)))
#define pt_blk_sync_forward(dec) (q->par ? par_sync_forward(q) : pt_blk_sync_forward(dec))
#define pt_blk_get_sync_offset(dec, off)                                                           \
	(q->par ? par_sync_offset(q, (off)) : pt_blk_get_sync_offset((dec), (off)))
#define pt_blk_sync_set(dec, off) (q->par ? par_sync_set(q, (off)) : pt_blk_sync_set((dec), (off)))
#define pt_blk_set_image(dec, img)                                                                 \
	(q->par ? par_set_image(q, (img)) : pt_blk_set_image((dec), (img)))
#define pt_blk_free_decoder(dec) (ptd_par_stop(d, q), pt_blk_free_decoder(dec))

#endif
