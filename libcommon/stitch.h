/* The stitcher: joins each thread's segments (mt-segment output) across the
 * gaps between them.
 *
 * For each pair of consecutive segments A, B of a thread, the stack live at
 * A's end (its open-at-end spans, by depth) is aligned with the stack live at
 * B's start (its inferred-start spans).  An alignment puts the root of one
 * stack at some depth of the other; its score is the number of consecutive
 * frames, from there, with the same function (and the same call site when
 * both are known).  The best score wins; on a tie the deepest placement of
 * B's root (the one that assumes the fewest returns inside the gap).  Frames
 * that align continue as one span (flag stitched); B's frames below A's root
 * (roots B revealed) were live during A too and begin where A's chain of
 * joined segments begins.  The gap becomes a span named for its reason at the
 * depth where the stacks diverge.  With no alignment (no common function),
 * B starts a new group whose depths stay as mt-segment numbered them.
 * No frame is ever invented: every output span is an input span, joined, or
 * a gap marker.
 *
 * All of a thread's records are held until the end: spans (56 bytes each)
 * and waypoints (a varint log). */
#ifndef MT_STITCH_H
#define MT_STITCH_H

#include "mtev.h"

enum stitch_err {
	STITCH_ENOMEM = 1,
	STITCH_EKIND = 2, /* branch or sample records: not segmented yet */
	STITCH_EEMIT = 3,
};

struct stitch_stats {
	uint64_t segments, joins, aligned, unaligned, continued, revealed, gap_spans;
};

typedef int (*stitch_emit_fn)(void *ctx, const struct mtev_rec *rec);
typedef struct stitcher stitcher;

stitcher *stitch_alloc(stitch_emit_fn emit, void *ctx);
void stitch_free(stitcher *s);
/* Context records are emitted at once; a thread's records at the end. */
int stitch_feed(stitcher *s, const struct mtev_rec *rec);
int stitch_finish(stitcher *s);
const struct stitch_stats *stitch_stats(const stitcher *s);
const char *stitch_strerror(int err);
unsigned stitch_error_detail(const stitcher *s);

#endif
